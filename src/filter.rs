//! The filter language of search, list and bulk operations.
//!
//! Filters are JSON, in the shape memory services use:
//!
//! ```json
//! {"AND": [
//!     {"user_id": "alice"},
//!     {"created_at": {"gte": "2024-07-01"}},
//!     {"OR": [{"categories": {"in": ["food", "travel"]}}, {"metadata.topic": "trips"}]},
//!     {"NOT": {"metadata.private": true}}
//! ]}
//! ```
//!
//! - Logical keys: `AND` and `OR` (arrays of filters), `NOT` (a filter). Several keys in one
//!   object are combined with AND.
//! - Fields: `user_id`, `agent_id`, `app_id`, `run_id`, `created_at`, `updated_at`,
//!   `expiration_date`, `categories`, `keywords` (the memory text), `metadata.<key>` (dotted
//!   paths reach nested objects), and `metadata` holding an object of key → value (each an
//!   equality, or an operator object).
//! - Operators: `eq`, `ne`, `in`, `nin`, `gt`, `gte`, `lt`, `lte`, `contains`, `icontains`,
//!   and the value `"*"`, meaning "any non-null value". A bare value means `eq`; an array
//!   given to an owner id or `categories` means `in`.
//!
//! Which operator applies to which field:
//!
//! | field | operators |
//! |---|---|
//! | owner ids | eq, ne, in, nin, contains, icontains, `*` |
//! | dates | eq, ne, in, nin, gt, gte, lt, lte, `*` (`expiration_date` only) |
//! | `categories` | eq and contains (has the label), ne, in (any of), nin (none of), icontains, `*` (has any) |
//! | `keywords` | contains, icontains |
//! | `metadata.<key>` | all |
//!
//! Dates are RFC 3339 instants or `YYYY-MM-DD` days (UTC). A day compares as the whole day:
//! `{"created_at": {"lte": "2024-07-01"}}` includes memories created at 23:59 that day.
//! On metadata, `gt`/`lt` compare numbers numerically and strings lexicographically (so ISO
//! dates work); other pairings do not match. `ne` and `nin` are the exact negations of `eq`
//! and `in`, so a memory without the key matches them.
//!
//! An unknown field, operator, or an operator that does not apply to its field is a 400,
//! never silently ignored. Filters nest at most [`MAX_FILTER_DEPTH`] levels and hold at
//! most [`MAX_FILTER_CONDITIONS`] conditions.

use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::record::MemoryRecord;

/// How deeply `AND` / `OR` / `NOT` may nest.
pub const MAX_FILTER_DEPTH: usize = 16;
/// How many conditions (leaves) one filter may hold.
pub const MAX_FILTER_CONDITIONS: usize = 256;
/// How many values one `in` / `nin` list may hold.
pub const MAX_IN_VALUES: usize = 1_000;
/// How many segments a metadata key path may have.
pub const MAX_METADATA_PATH: usize = 8;
/// How many operand values one filter may hold in all (every `in` list counted in full).
pub const MAX_FILTER_VALUES: usize = 1_000;
/// How many dates one `in` / `nin` list on a date field may hold.
pub const MAX_TIME_VALUES: usize = 100;

/// A parsed filter.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Filter {
    /// Every filter matches (an empty `AND` is true).
    And(Vec<Filter>),
    /// At least one filter matches (an empty `OR` is false).
    Or(Vec<Filter>),
    /// The filter does not match.
    Not(Box<Filter>),
    /// One condition on one field.
    Condition(Condition),
}

/// A condition on one field.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Condition {
    /// On an owner id.
    Owner(OwnerField, Op<String>),
    /// On a timestamp.
    Time(TimeField, Op<TimeRange>),
    /// On the categories.
    Categories(Op<String>),
    /// On the memory text (`contains` / `icontains` only).
    Keywords(Op<String>),
    /// On a caller metadata value at a key path.
    Metadata(Vec<String>, Op<Value>),
}

/// The owner-id fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OwnerField {
    /// `user_id`
    User,
    /// `agent_id`
    Agent,
    /// `app_id`
    App,
    /// `run_id`
    Run,
}

impl OwnerField {
    /// The field's name.
    pub fn name(self) -> &'static str {
        match self {
            OwnerField::User => "user_id",
            OwnerField::Agent => "agent_id",
            OwnerField::App => "app_id",
            OwnerField::Run => "run_id",
        }
    }

    /// All owner fields.
    pub const ALL: [OwnerField; 4] = [
        OwnerField::User,
        OwnerField::Agent,
        OwnerField::App,
        OwnerField::Run,
    ];
}

/// The timestamp fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeField {
    /// `created_at`
    Created,
    /// `updated_at`
    Updated,
    /// `expiration_date`
    Expiration,
}

impl TimeField {
    /// The field's name.
    pub fn name(self) -> &'static str {
        match self {
            TimeField::Created => "created_at",
            TimeField::Updated => "updated_at",
            TimeField::Expiration => "expiration_date",
        }
    }
}

/// A time operand: the half-open interval `[start, end)` in microseconds since the epoch.
/// An instant is one microsecond wide; a day is the whole day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRange {
    /// First microsecond inside.
    pub start: i64,
    /// First microsecond after.
    pub end: i64,
}

/// An operator with its operand.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Op<T> {
    /// Equal.
    Eq(T),
    /// Not equal (the negation of `Eq`).
    Ne(T),
    /// Equal to one of.
    In(Vec<T>),
    /// Equal to none of (the negation of `In`).
    Nin(Vec<T>),
    /// Greater than.
    Gt(T),
    /// Greater than or equal.
    Gte(T),
    /// Less than.
    Lt(T),
    /// Less than or equal.
    Lte(T),
    /// Contains (substring, or element of an array).
    Contains(T),
    /// Contains, ignoring case (Unicode lowercase of both sides).
    Icontains(String),
    /// Has any non-null value (`"*"`).
    Exists,
}

impl Filter {
    /// Parses a filter from its JSON form. Errors are 400s naming the offending part.
    pub fn from_json(value: &Value) -> Result<Filter> {
        let mut parser = Parser { conditions: 0 };
        let filter = parser.filter(value, 1)?;
        filter.validate()?;
        Ok(filter)
    }

    /// Checks the bounds the parser enforces, for filters built in code: depth, number of
    /// conditions and values, metadata key paths, date lists. Every search, list and delete
    /// validates its filter before using it.
    pub fn validate(&self) -> Result<()> {
        let mut counts = (0usize, 0usize);
        self.check(1, &mut counts)
    }

    fn check(&self, depth: usize, counts: &mut (usize, usize)) -> Result<()> {
        if depth > MAX_FILTER_DEPTH {
            return Err(Error::invalid(format!(
                "filter nests deeper than {MAX_FILTER_DEPTH} levels; flatten it"
            )));
        }
        match self {
            Filter::And(parts) | Filter::Or(parts) => {
                parts.iter().try_for_each(|f| f.check(depth + 1, counts))
            }
            Filter::Not(inner) => inner.check(depth + 1, counts),
            Filter::Condition(c) => {
                counts.0 += 1;
                counts.1 += c.value_count();
                if counts.0 > MAX_FILTER_CONDITIONS {
                    return Err(Error::invalid(format!(
                        "filter holds more than {MAX_FILTER_CONDITIONS} conditions; split the query"
                    )));
                }
                if counts.1 > MAX_FILTER_VALUES {
                    return Err(Error::invalid(format!(
                        "filter holds more than {MAX_FILTER_VALUES} values in all; split the query"
                    )));
                }
                match c {
                    Condition::Metadata(path, _)
                        if path.is_empty()
                            || path.len() > MAX_METADATA_PATH
                            || !path.iter().all(|k| valid_metadata_key(k)) =>
                    {
                        Err(Error::invalid(format!(
                            "metadata filter path {path:?}: 1–{MAX_METADATA_PATH} keys of 1–64 \
                             letters, digits, '_' or '-'"
                        )))
                    }
                    Condition::Time(field, Op::In(rs) | Op::Nin(rs))
                        if rs.len() > MAX_TIME_VALUES =>
                    {
                        Err(Error::invalid(format!(
                            "{} in / nin holds more than {MAX_TIME_VALUES} dates",
                            field.name()
                        )))
                    }
                    _ => Ok(()),
                }
            }
        }
    }

    /// A filter that matches everything.
    pub fn all() -> Filter {
        Filter::And(Vec::new())
    }

    /// `user_id` equals `id`.
    pub fn user(id: impl Into<String>) -> Filter {
        Filter::Condition(Condition::Owner(OwnerField::User, Op::Eq(id.into())))
    }

    /// `agent_id` equals `id`.
    pub fn agent(id: impl Into<String>) -> Filter {
        Filter::Condition(Condition::Owner(OwnerField::Agent, Op::Eq(id.into())))
    }

    /// `app_id` equals `id`.
    pub fn app(id: impl Into<String>) -> Filter {
        Filter::Condition(Condition::Owner(OwnerField::App, Op::Eq(id.into())))
    }

    /// `run_id` equals `id`.
    pub fn run(id: impl Into<String>) -> Filter {
        Filter::Condition(Condition::Owner(OwnerField::Run, Op::Eq(id.into())))
    }

    /// Both filters match. Flattens nested `AND`s.
    pub fn and(self, other: Filter) -> Filter {
        match (self, other) {
            (Filter::And(mut a), Filter::And(b)) => {
                a.extend(b);
                Filter::And(a)
            }
            (Filter::And(mut a), f) | (f, Filter::And(mut a)) => {
                a.push(f);
                Filter::And(a)
            }
            (a, b) => Filter::And(vec![a, b]),
        }
    }

    /// Whether the filter matches everything (an empty `AND`).
    pub fn is_all(&self) -> bool {
        matches!(self, Filter::And(v) if v.is_empty())
    }

    /// Evaluates the filter against a record. This is the reference semantics that every
    /// [`Store`](crate::store::Store) must agree with.
    pub fn matches(&self, record: &MemoryRecord) -> bool {
        match self {
            Filter::And(all) => all.iter().all(|f| f.matches(record)),
            Filter::Or(any) => any.iter().any(|f| f.matches(record)),
            Filter::Not(f) => !f.matches(record),
            Filter::Condition(c) => c.matches(record),
        }
    }

    /// The owner ids this filter pins with top-level equalities (`user_id = x` under AND only).
    /// Stores may use them to narrow a scan; the filter itself stays authoritative.
    pub fn pinned_owner(&self, field: OwnerField) -> Option<&str> {
        match self {
            Filter::Condition(Condition::Owner(f, Op::Eq(v))) if *f == field => Some(v),
            Filter::And(all) => all.iter().find_map(|f| f.pinned_owner(field)),
            _ => None,
        }
    }
}

impl Condition {
    fn value_count(&self) -> usize {
        fn count<T>(op: &Op<T>) -> usize {
            match op {
                Op::In(v) | Op::Nin(v) => v.len(),
                Op::Exists => 0,
                _ => 1,
            }
        }
        match self {
            Condition::Owner(_, op) | Condition::Categories(op) | Condition::Keywords(op) => {
                count(op)
            }
            Condition::Time(_, op) => count(op),
            Condition::Metadata(_, op) => count(op),
        }
    }

    /// Evaluates the condition against a record.
    pub fn matches(&self, record: &MemoryRecord) -> bool {
        match self {
            Condition::Owner(field, op) => {
                let value = match field {
                    OwnerField::User => record.owners.user_id.as_deref(),
                    OwnerField::Agent => record.owners.agent_id.as_deref(),
                    OwnerField::App => record.owners.app_id.as_deref(),
                    OwnerField::Run => record.owners.run_id.as_deref(),
                };
                text_matches(value, op)
            }
            Condition::Time(field, op) => {
                let value = match field {
                    TimeField::Created => Some(micros(record.created_at)),
                    TimeField::Updated => Some(micros(record.updated_at)),
                    TimeField::Expiration => record.expiration_date.map(micros),
                };
                time_matches(value, op)
            }
            Condition::Categories(op) => categories_match(&record.categories, op),
            Condition::Keywords(op) => text_matches(Some(&record.memory), op),
            Condition::Metadata(path, op) => metadata_matches(lookup(&record.metadata, path), op),
        }
    }
}

/// Microseconds since the epoch.
pub(crate) fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// Follows a key path into caller metadata. JSON `null` counts as absent.
pub fn lookup<'a>(metadata: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut value = metadata.get(first)?;
    for key in rest {
        value = value.as_object()?.get(key)?;
    }
    (!value.is_null()).then_some(value)
}

/// Unicode case-insensitive substring test, shared by every store.
pub fn icontains(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

/// The semantics of an operator on an optional text value.
pub fn text_matches(value: Option<&str>, op: &Op<String>) -> bool {
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
pub fn time_matches(value: Option<i64>, op: &Op<TimeRange>) -> bool {
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
pub fn categories_match(categories: &[String], op: &Op<String>) -> bool {
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
pub fn json_eq(a: &Value, b: &Value) -> bool {
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
pub fn metadata_matches(value: Option<&Value>, op: &Op<Value>) -> bool {
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

struct Parser {
    conditions: usize,
}

const OPERATORS: [&str; 10] = [
    "eq",
    "ne",
    "in",
    "nin",
    "gt",
    "gte",
    "lt",
    "lte",
    "contains",
    "icontains",
];

fn is_operator_object(map: &Map<String, Value>) -> bool {
    !map.is_empty() && map.keys().all(|k| OPERATORS.contains(&k.as_str()))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Parser {
    fn filter(&mut self, value: &Value, depth: usize) -> Result<Filter> {
        if depth > MAX_FILTER_DEPTH {
            return Err(Error::invalid(format!(
                "filter nests deeper than {MAX_FILTER_DEPTH} levels; flatten it"
            )));
        }
        let Value::Object(map) = value else {
            return Err(Error::invalid(format!(
                "a filter must be a JSON object such as {{\"user_id\": \"alice\"}}, got {}",
                json_kind(value)
            )));
        };
        let mut parts = Vec::with_capacity(map.len());
        for (key, value) in map {
            parts.push(self.entry(key, value, depth)?);
        }
        Ok(match parts.len() {
            1 => parts.pop().unwrap_or_else(Filter::all),
            _ => Filter::And(parts),
        })
    }

    fn list(&mut self, key: &str, value: &Value, depth: usize) -> Result<Vec<Filter>> {
        let Value::Array(items) = value else {
            return Err(Error::invalid(format!(
                "{key} takes an array of filters, got {}",
                json_kind(value)
            )));
        };
        if items.is_empty() {
            return Err(Error::invalid(format!(
                "{key} needs at least one filter in its array"
            )));
        }
        items.iter().map(|v| self.filter(v, depth + 1)).collect()
    }

    fn entry(&mut self, key: &str, value: &Value, depth: usize) -> Result<Filter> {
        match key {
            "AND" => Ok(Filter::And(self.list(key, value, depth)?)),
            "OR" => Ok(Filter::Or(self.list(key, value, depth)?)),
            "NOT" => {
                let inner = match value {
                    Value::Array(_) => Filter::And(self.list(key, value, depth)?),
                    _ => self.filter(value, depth + 1)?,
                };
                Ok(Filter::Not(Box::new(inner)))
            }
            "metadata" => {
                let Value::Object(map) = value else {
                    return Err(Error::invalid(format!(
                        "metadata in a filter takes an object of key → value, got {}",
                        json_kind(value)
                    )));
                };
                if map.is_empty() {
                    return Err(Error::invalid(
                        "metadata in a filter needs at least one key",
                    ));
                }
                let mut parts = Vec::with_capacity(map.len());
                for (k, v) in map {
                    parts.push(self.metadata(&format!("metadata.{k}"), k, v)?);
                }
                Ok(match parts.len() {
                    1 => parts.pop().unwrap_or_else(Filter::all),
                    _ => Filter::And(parts),
                })
            }
            _ => {
                if let Some(path) = key.strip_prefix("metadata.") {
                    return self.metadata(key, path, value);
                }
                let field = match key {
                    "user_id" => Field::Owner(OwnerField::User),
                    "agent_id" => Field::Owner(OwnerField::Agent),
                    "app_id" => Field::Owner(OwnerField::App),
                    "run_id" => Field::Owner(OwnerField::Run),
                    "created_at" => Field::Time(TimeField::Created),
                    "updated_at" => Field::Time(TimeField::Updated),
                    "expiration_date" => Field::Time(TimeField::Expiration),
                    "categories" => Field::Categories,
                    "keywords" => Field::Keywords,
                    other => {
                        return Err(Error::invalid(format!(
                            "unknown filter field {other:?}; fields are user_id, agent_id, app_id, run_id, \
                             created_at, updated_at, expiration_date, categories, keywords, metadata.<key>, \
                             and the logical keys AND, OR, NOT"
                        )))
                    }
                };
                self.field(key, field, value)
            }
        }
    }

    fn metadata(&mut self, key: &str, path: &str, value: &Value) -> Result<Filter> {
        let segments: Vec<String> = path.split('.').map(str::to_owned).collect();
        if segments.len() > MAX_METADATA_PATH {
            return Err(Error::invalid(format!(
                "filter field {key:?} has more than {MAX_METADATA_PATH} path segments"
            )));
        }
        for s in &segments {
            if !valid_metadata_key(s) {
                return Err(Error::invalid(format!(
                    "filter field {key:?}: metadata keys in filters must be 1–64 characters of \
                     letters, digits, '_' or '-'"
                )));
            }
        }
        self.field(key, Field::Metadata(segments), value)
    }

    fn field(&mut self, key: &str, field: Field, value: &Value) -> Result<Filter> {
        let ops: Vec<(String, Value)> = match value {
            Value::Object(map) if is_operator_object(map) => {
                map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
            }
            Value::Object(map) => {
                let unknown = map
                    .keys()
                    .find(|k| !OPERATORS.contains(&k.as_str()))
                    .cloned()
                    .unwrap_or_default();
                return Err(Error::invalid(format!(
                    "unknown operator {unknown:?} on {key}; operators are eq, ne, in, nin, gt, gte, \
                     lt, lte, contains, icontains, and the value \"*\" for any non-null value \
                     (to compare with an object, write {{\"eq\": {{…}}}})"
                )));
            }
            Value::String(s) if s == "*" => vec![("*".into(), Value::Null)],
            Value::Array(_) if matches!(field, Field::Owner(_) | Field::Categories) => {
                vec![("in".into(), value.clone())]
            }
            _ => vec![("eq".into(), value.clone())],
        };
        let mut parts = Vec::with_capacity(ops.len());
        for (op, operand) in ops {
            self.conditions += 1;
            if self.conditions > MAX_FILTER_CONDITIONS {
                return Err(Error::invalid(format!(
                    "filter holds more than {MAX_FILTER_CONDITIONS} conditions; split the query"
                )));
            }
            parts.push(Filter::Condition(condition(key, &field, &op, &operand)?));
        }
        Ok(match parts.len() {
            1 => parts.pop().unwrap_or_else(Filter::all),
            _ => Filter::And(parts),
        })
    }
}

/// Whether a metadata key may be used in a filter path.
pub fn valid_metadata_key(key: &str) -> bool {
    (1..=64).contains(&key.len())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

enum Field {
    Owner(OwnerField),
    Time(TimeField),
    Categories,
    Keywords,
    Metadata(Vec<String>),
}

fn condition(key: &str, field: &Field, op: &str, operand: &Value) -> Result<Condition> {
    let not_applicable = || {
        Error::invalid(format!(
            "operator {} does not apply to {key}; see the filter documentation for which operators each field takes",
            if op == "*" { "\"*\"" } else { op }
        ))
    };
    Ok(match field {
        Field::Owner(f) => {
            if matches!(op, "gt" | "gte" | "lt" | "lte") {
                return Err(not_applicable());
            }
            Condition::Owner(*f, build_op(key, op, operand, string_operand)?)
        }
        Field::Time(f) => {
            if matches!(op, "contains" | "icontains") || (op == "*" && *f != TimeField::Expiration)
            {
                return Err(not_applicable());
            }
            Condition::Time(*f, build_op(key, op, operand, time_operand)?)
        }
        Field::Categories => {
            if matches!(op, "gt" | "gte" | "lt" | "lte") {
                return Err(not_applicable());
            }
            Condition::Categories(build_op(key, op, operand, string_operand)?)
        }
        Field::Keywords => {
            if !matches!(op, "contains" | "icontains") {
                return Err(not_applicable());
            }
            Condition::Keywords(build_op(key, op, operand, string_operand)?)
        }
        Field::Metadata(path) => {
            Condition::Metadata(path.clone(), build_op(key, op, operand, json_operand)?)
        }
    })
}

fn build_op<T>(
    key: &str,
    op: &str,
    operand: &Value,
    parse: fn(&str, &Value) -> Result<T>,
) -> Result<Op<T>> {
    let list = |v: &Value| -> Result<Vec<T>> {
        let Value::Array(items) = v else {
            return Err(Error::invalid(format!(
                "{op} on {key} takes an array, got {}",
                json_kind(v)
            )));
        };
        if items.len() > MAX_IN_VALUES {
            return Err(Error::invalid(format!(
                "{op} on {key} holds more than {MAX_IN_VALUES} values"
            )));
        }
        items.iter().map(|i| parse(key, i)).collect()
    };
    Ok(match op {
        "eq" => Op::Eq(parse(key, operand)?),
        "ne" => Op::Ne(parse(key, operand)?),
        "in" => Op::In(list(operand)?),
        "nin" => Op::Nin(list(operand)?),
        "gt" => Op::Gt(parse(key, operand)?),
        "gte" => Op::Gte(parse(key, operand)?),
        "lt" => Op::Lt(parse(key, operand)?),
        "lte" => Op::Lte(parse(key, operand)?),
        "contains" => Op::Contains(parse(key, operand)?),
        "icontains" => match operand {
            Value::String(s) => Op::Icontains(s.clone()),
            other => {
                return Err(Error::invalid(format!(
                    "icontains on {key} takes a string, got {}",
                    json_kind(other)
                )))
            }
        },
        "*" => Op::Exists,
        other => {
            return Err(Error::invalid(format!(
                "unknown operator {other:?} on {key}"
            )))
        }
    })
}

fn string_operand(key: &str, v: &Value) -> Result<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        other => Err(Error::invalid(format!(
            "{key} compares with strings, got {}",
            json_kind(other)
        ))),
    }
}

fn json_operand(key: &str, v: &Value) -> Result<Value> {
    match v {
        Value::Null => Err(Error::invalid(format!(
            "{key}: null is not a comparable value; use \"*\" for any value or NOT with \"*\" for none"
        ))),
        other => Ok(other.clone()),
    }
}

/// Parses a date filter operand: an RFC 3339 instant or a `YYYY-MM-DD` day (UTC).
pub(crate) fn time_operand(key: &str, v: &Value) -> Result<TimeRange> {
    let Value::String(s) = v else {
        return Err(Error::invalid(format!(
            "{key} compares with a date string (RFC 3339 or YYYY-MM-DD), got {}",
            json_kind(v)
        )));
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        let start = t.with_timezone(&Utc).timestamp_micros();
        return Ok(TimeRange {
            start,
            end: start.saturating_add(1),
        });
    }
    if let Ok(day) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        let start = day.and_time(NaiveTime::MIN).and_utc().timestamp_micros();
        return Ok(TimeRange {
            start,
            end: start.saturating_add(86_400_000_000),
        });
    }
    Err(Error::invalid(format!(
        "{key}: {s:?} is not a date; use RFC 3339 (2024-07-01T12:00:00Z) or YYYY-MM-DD"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<Filter> {
        Filter::from_json(&v)
    }

    #[test]
    fn bare_value_is_eq_and_star_is_exists() {
        assert_eq!(
            parse(json!({"user_id": "alice"})).ok(),
            Some(Filter::user("alice"))
        );
        assert_eq!(
            parse(json!({"agent_id": "*"})).ok(),
            Some(Filter::Condition(Condition::Owner(
                OwnerField::Agent,
                Op::Exists
            )))
        );
    }

    #[test]
    fn unknown_fields_and_operators_are_400() {
        for bad in [
            json!({"usr_id": "a"}),
            json!({"user_id": {"like": "a"}}),
            json!({"and": [{"user_id": "a"}]}),
            json!({"created_at": {"contains": "2024"}}),
            json!({"created_at": "yesterday"}),
            json!({"user_id": {"gt": "a"}}),
            json!({"keywords": "pizza"}),
            json!({"categories": {"lt": "x"}}),
            json!({"metadata.a b": 1}),
            json!({"metadata.x": {"eq": null}}),
            json!({"AND": []}),
            json!({"OR": {"user_id": "a"}}),
            json!([{"user_id": "a"}]),
            json!({"user_id": 3}),
            json!({"categories": {"in": "food"}}),
            json!({"metadata.x": {"gt": 1, "between": 3}}),
            json!({"metadata.x": {"like": "a"}}),
            json!({"metadata": {"x": {}}}),
            json!({"created_at": {"in": vec!["2024-01-01"; MAX_TIME_VALUES + 1]}}),
            json!({"OR": vec![json!({"user_id": {"in": vec!["a"; 600]}}); 2]}),
        ] {
            let err = parse(bad.clone()).err();
            assert_eq!(err.as_ref().map(Error::status), Some(400), "{bad}");
        }
    }

    #[test]
    fn depth_and_size_are_bounded() {
        let mut deep = json!({"user_id": "a"});
        for _ in 0..MAX_FILTER_DEPTH {
            deep = json!({"NOT": deep});
        }
        assert_eq!(parse(deep).err().map(|e| e.status()), Some(400));
        let many: Vec<Value> = (0..=MAX_FILTER_CONDITIONS)
            .map(|i| json!({"user_id": i.to_string()}))
            .collect();
        assert_eq!(
            parse(json!({"OR": many})).err().map(|e| e.status()),
            Some(400)
        );
    }

    #[test]
    fn code_built_filters_are_validated() {
        let meta = |path: Vec<&str>| {
            Filter::Condition(Condition::Metadata(
                path.into_iter().map(String::from).collect(),
                Op::Exists,
            ))
        };
        assert!(meta(vec!["a", "b"]).validate().is_ok());
        assert_eq!(meta(vec![]).validate().err().map(|e| e.status()), Some(400));
        assert_eq!(
            meta(vec!["a\"b"]).validate().err().map(|e| e.status()),
            Some(400)
        );
        let mut deep = Filter::user("a");
        for _ in 0..10_000 {
            deep = Filter::Not(Box::new(deep));
        }
        assert_eq!(deep.validate().err().map(|e| e.status()), Some(400));
        let big = Filter::Condition(Condition::Owner(
            OwnerField::User,
            Op::In(vec!["a".into(); 1001]),
        ));
        assert_eq!(big.validate().err().map(|e| e.status()), Some(400));
        // Dropping a very deep filter must not overflow the stack either.
        std::mem::forget(deep);
    }

    #[test]
    fn literal_objects_need_eq() {
        let f = Filter::from_json(&json!({"metadata.x": {"eq": {"k": 1}}}));
        assert!(f.is_ok());
    }

    #[test]
    fn days_cover_the_whole_day() {
        let r = time_operand("created_at", &json!("2024-07-01")).ok();
        assert_eq!(r.map(|r| r.end - r.start), Some(86_400_000_000));
        let at = time_operand("created_at", &json!("2024-07-01T23:59:00Z"))
            .ok()
            .map(|r| r.start);
        let lte = Op::Lte(
            time_operand("x", &json!("2024-07-01")).unwrap_or(TimeRange { start: 0, end: 0 }),
        );
        assert!(time_matches(at, &lte));
    }

    #[test]
    fn metadata_semantics() {
        let v = json!({"n": 3, "s": "Hello World", "tags": ["a", "b"], "nested": {"k": 1.0}});
        let map = v.as_object().cloned().unwrap_or_default();
        let at = |p: &str| lookup(&map, &p.split('.').map(String::from).collect::<Vec<_>>());
        assert!(metadata_matches(at("n"), &Op::Eq(json!(3.0))));
        assert!(metadata_matches(at("n"), &Op::Gt(json!(2))));
        assert!(!metadata_matches(at("n"), &Op::Gt(json!("2"))));
        assert!(metadata_matches(at("s"), &Op::Icontains("WORLD".into())));
        assert!(metadata_matches(at("tags"), &Op::Contains(json!("b"))));
        assert!(metadata_matches(at("nested.k"), &Op::Eq(json!(1))));
        assert!(metadata_matches(at("missing"), &Op::Ne(json!(1))));
        assert!(!metadata_matches(at("missing"), &Op::Exists));
    }

    #[test]
    fn spec_shaped_filters_parse() {
        let f = parse(
            json!({"metadata": {"topic": "food", "n": {"gte": 2}}, "categories": ["a", "b"]}),
        );
        assert!(matches!(f, Ok(Filter::And(ref parts)) if parts.len() == 2));
    }
}
