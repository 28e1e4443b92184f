//! The reference semantics of filters: how each operator matches a record's value. Every
//! store must select exactly what these functions select.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::{Op, TimeRange};

/// Microseconds since the epoch.
pub(crate) fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// Follows a key path into caller metadata. JSON `null` counts as absent.
pub(crate) fn lookup<'a>(metadata: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut value = metadata.get(first)?;
    for key in rest {
        value = value.as_object()?.get(key)?;
    }
    (!value.is_null()).then_some(value)
}

/// Unicode case-insensitive substring test, shared by every store.
pub(crate) fn icontains(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

/// The semantics of an operator on an optional text value.
pub(crate) fn text_matches(value: Option<&str>, op: &Op<String>) -> bool {
    match op {
        Op::Eq(x) => value == Some(x.as_str()),
        Op::Ne(x) => value != Some(x.as_str()),
        Op::In(xs) => value.is_some_and(|v| xs.iter().any(|x| x == v)),
        Op::Nin(xs) => !value.is_some_and(|v| xs.iter().any(|x| x == v)),
        Op::Contains(x) => value.is_some_and(|v| v.contains(x.as_str())),
        Op::Icontains(x) => value.is_some_and(|v| icontains(v, x)),
        Op::Exists => value.is_some(),
        Op::Gt(_) | Op::Gte(_) | Op::Lt(_) | Op::Lte(_) => false,
    }
}

/// The semantics of an operator on an optional timestamp (microseconds).
pub(crate) fn time_matches(value: Option<i64>, op: &Op<TimeRange>) -> bool {
    let within = |v: i64, r: &TimeRange| r.start <= v && v < r.end;
    match (value, op) {
        (_, Op::Exists) => value.is_some(),
        (v, Op::Ne(r)) => !v.is_some_and(|v| within(v, r)),
        (v, Op::Nin(rs)) => !v.is_some_and(|v| rs.iter().any(|r| within(v, r))),
        (None, _) => false,
        (Some(v), Op::Eq(r)) => within(v, r),
        (Some(v), Op::In(rs)) => rs.iter().any(|r| within(v, r)),
        (Some(v), Op::Gt(r)) => v >= r.end,
        (Some(v), Op::Gte(r)) => v >= r.start,
        (Some(v), Op::Lt(r)) => v < r.start,
        (Some(v), Op::Lte(r)) => v < r.end,
        (Some(_), Op::Contains(_) | Op::Icontains(_)) => false,
    }
}

/// The semantics of an operator on a list of categories.
pub(crate) fn categories_match(categories: &[String], op: &Op<String>) -> bool {
    let has = |x: &String| categories.iter().any(|c| c == x);
    match op {
        Op::Eq(x) | Op::Contains(x) => has(x),
        Op::Ne(x) => !has(x),
        Op::In(xs) => xs.iter().any(has),
        Op::Nin(xs) => !xs.iter().any(has),
        Op::Icontains(x) => categories.iter().any(|c| icontains(c, x)),
        Op::Exists => !categories.is_empty(),
        Op::Gt(_) | Op::Gte(_) | Op::Lt(_) | Op::Lte(_) => false,
    }
}

/// JSON equality, with numbers compared by value (`1` equals `1.0`).
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

fn json_order(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => Some(x.cmp(&y)),
            _ => x.as_f64()?.partial_cmp(&y.as_f64()?),
        },
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// The semantics of an operator on an optional metadata value.
pub(crate) fn metadata_matches(value: Option<&Value>, op: &Op<Value>) -> bool {
    use std::cmp::Ordering::*;
    let eq = |x: &Value| value.is_some_and(|v| json_eq(v, x));
    let ord = |x: &Value| value.and_then(|v| json_order(v, x));
    match op {
        Op::Eq(x) => eq(x),
        Op::Ne(x) => !eq(x),
        Op::In(xs) => xs.iter().any(eq),
        Op::Nin(xs) => !xs.iter().any(eq),
        Op::Gt(x) => ord(x) == Some(Greater),
        Op::Gte(x) => matches!(ord(x), Some(Greater | Equal)),
        Op::Lt(x) => ord(x) == Some(Less),
        Op::Lte(x) => matches!(ord(x), Some(Less | Equal)),
        Op::Contains(x) => match (value, x) {
            (Some(Value::String(v)), Value::String(x)) => v.contains(x.as_str()),
            (Some(Value::Array(items)), x) => items.iter().any(|i| json_eq(i, x)),
            _ => false,
        },
        Op::Icontains(x) => match value {
            Some(Value::String(v)) => icontains(v, x),
            Some(Value::Array(items)) => items
                .iter()
                .any(|i| i.as_str().is_some_and(|s| icontains(s, x))),
            _ => false,
        },
        Op::Exists => value.is_some(),
    }
}
