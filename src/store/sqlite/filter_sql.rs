//! Filters compiled to SQL over `memories m`: the same selection as
//! [`Filter::matches`](crate::Filter::matches), computed by SQLite.

use chrono::{DateTime, Utc};
use rusqlite::types::Value as SqlValue;
use serde_json::Value;

use super::LIVE;
use crate::filter::{micros, Condition, Filter, Op, OwnerField, TimeField};

pub(super) fn encode_op(op: &Op<Value>) -> String {
    let v = match op {
        Op::Eq(x) => serde_json::json!(["eq", x]),
        Op::Ne(x) => serde_json::json!(["ne", x]),
        Op::In(xs) => serde_json::json!(["in", xs]),
        Op::Nin(xs) => serde_json::json!(["nin", xs]),
        Op::Gt(x) => serde_json::json!(["gt", x]),
        Op::Gte(x) => serde_json::json!(["gte", x]),
        Op::Lt(x) => serde_json::json!(["lt", x]),
        Op::Lte(x) => serde_json::json!(["lte", x]),
        Op::Contains(x) => serde_json::json!(["contains", x]),
        Op::Icontains(x) => serde_json::json!(["icontains", x]),
        Op::Exists => serde_json::json!(["*"]),
    };
    v.to_string()
}

pub(super) fn decode_op(text: &str) -> Option<Op<Value>> {
    let v: Value = serde_json::from_str(text).ok()?;
    let arr = v.as_array()?;
    let name = arr.first()?.as_str()?;
    let arg = arr.get(1).cloned();
    let list = |a: Option<Value>| a.and_then(|a| a.as_array().cloned());
    Some(match name {
        "eq" => Op::Eq(arg?),
        "ne" => Op::Ne(arg?),
        "in" => Op::In(list(arg)?),
        "nin" => Op::Nin(list(arg)?),
        "gt" => Op::Gt(arg?),
        "gte" => Op::Gte(arg?),
        "lt" => Op::Lt(arg?),
        "lte" => Op::Lte(arg?),
        "contains" => Op::Contains(arg?),
        "icontains" => Op::Icontains(arg?.as_str()?.to_owned()),
        "*" => Op::Exists,
        _ => return None,
    })
}

/// Compiles a filter to a SQL expression over `memories m`. Every atomic predicate yields 0
/// or 1, never NULL, so that NOT is the exact negation as in [`Filter::matches`].
pub(super) fn compile(filter: &Filter, params: &mut Vec<SqlValue>) -> String {
    match filter {
        Filter::And(parts) if parts.is_empty() => "1".into(),
        Filter::Or(parts) if parts.is_empty() => "0".into(),
        Filter::And(parts) => join(parts, " AND ", params),
        Filter::Or(parts) => join(parts, " OR ", params),
        Filter::Not(inner) => format!("NOT ({})", compile(inner, params)),
        Filter::Condition(c) => condition(c, params),
    }
}

fn join(parts: &[Filter], sep: &str, params: &mut Vec<SqlValue>) -> String {
    let sql: Vec<String> = parts
        .iter()
        .map(|p| format!("({})", compile(p, params)))
        .collect();
    sql.join(sep)
}

fn placeholders(values: &[String], params: &mut Vec<SqlValue>) -> String {
    let marks: Vec<&str> = values
        .iter()
        .map(|v| {
            params.push(SqlValue::Text(v.clone()));
            "?"
        })
        .collect();
    marks.join(", ")
}

fn condition(c: &Condition, params: &mut Vec<SqlValue>) -> String {
    match c {
        Condition::Owner(field, op) => {
            let col = match field {
                OwnerField::User => "m.user_id",
                OwnerField::Agent => "m.agent_id",
                OwnerField::App => "m.app_id",
                OwnerField::Run => "m.run_id",
            };
            text_condition(col, op, params)
        }
        Condition::Keywords(op) => text_condition("m.memory", op, params),
        Condition::Time(field, op) => {
            let col = match field {
                TimeField::Created => "m.created_at",
                TimeField::Updated => "m.updated_at",
                TimeField::Expiration => "m.expiration_date",
                TimeField::ValidFrom => "m.valid_from",
                TimeField::ValidUntil => "m.valid_until",
            };
            let mut bound = |x: i64| {
                params.push(SqlValue::Integer(x));
                "?"
            };
            match op {
                Op::Eq(r) => format!(
                    "({col} IS NOT NULL AND {col} >= {} AND {col} < {})",
                    bound(r.start),
                    bound(r.end)
                ),
                Op::Ne(r) => format!(
                    "NOT ({col} IS NOT NULL AND {col} >= {} AND {col} < {})",
                    bound(r.start),
                    bound(r.end)
                ),
                Op::In(rs) | Op::Nin(rs) => {
                    let any: Vec<String> = rs
                        .iter()
                        .map(|r| {
                            format!("({col} >= {} AND {col} < {})", bound(r.start), bound(r.end))
                        })
                        .collect();
                    let any = if any.is_empty() {
                        "0".to_owned()
                    } else {
                        any.join(" OR ")
                    };
                    let sql = format!("({col} IS NOT NULL AND ({any}))");
                    if matches!(op, Op::Nin(_)) {
                        format!("NOT {sql}")
                    } else {
                        sql
                    }
                }
                Op::Gt(r) => format!("({col} IS NOT NULL AND {col} >= {})", bound(r.end)),
                Op::Gte(r) => format!("({col} IS NOT NULL AND {col} >= {})", bound(r.start)),
                Op::Lt(r) => format!("({col} IS NOT NULL AND {col} < {})", bound(r.start)),
                Op::Lte(r) => format!("({col} IS NOT NULL AND {col} < {})", bound(r.end)),
                Op::Exists => format!("({col} IS NOT NULL)"),
                Op::Contains(_) | Op::Icontains(_) => "0".into(),
            }
        }
        Condition::Categories(op) => {
            let each = "SELECT 1 FROM json_each(m.categories) AS c WHERE";
            match op {
                Op::Eq(x) | Op::Contains(x) => {
                    params.push(SqlValue::Text(x.clone()));
                    format!("EXISTS ({each} c.value = ?)")
                }
                Op::Ne(x) => {
                    params.push(SqlValue::Text(x.clone()));
                    format!("NOT EXISTS ({each} c.value = ?)")
                }
                Op::In(xs) | Op::Nin(xs) => {
                    let sql = if xs.is_empty() {
                        "0".to_owned()
                    } else {
                        format!("EXISTS ({each} c.value IN ({}))", placeholders(xs, params))
                    };
                    if matches!(op, Op::Nin(_)) {
                        format!("NOT {sql}")
                    } else {
                        sql
                    }
                }
                Op::Icontains(x) => {
                    params.push(SqlValue::Text(x.clone()));
                    format!("EXISTS ({each} memlane_icontains(c.value, ?))")
                }
                Op::Exists => "(json_array_length(m.categories) > 0)".into(),
                Op::Gt(_) | Op::Gte(_) | Op::Lt(_) | Op::Lte(_) => "0".into(),
            }
        }
        Condition::Metadata(path, op) => {
            let json_path = path
                .iter()
                .fold(String::from("$"), |acc, k| format!("{acc}.\"{k}\""));
            params.push(SqlValue::Text(json_path));
            params.push(SqlValue::Text(encode_op(op)));
            "memlane_meta(m.metadata -> ?, ?)".into()
        }
    }
}

fn text_condition(col: &str, op: &Op<String>, params: &mut Vec<SqlValue>) -> String {
    let mut one = |x: &String| {
        params.push(SqlValue::Text(x.clone()));
        "?"
    };
    match op {
        Op::Eq(x) => format!("({col} IS {})", one(x)),
        Op::Ne(x) => format!("({col} IS NOT {})", one(x)),
        Op::In(xs) | Op::Nin(xs) => {
            let sql = if xs.is_empty() {
                "0".to_owned()
            } else {
                format!(
                    "({col} IS NOT NULL AND {col} IN ({}))",
                    placeholders(xs, params)
                )
            };
            if matches!(op, Op::Nin(_)) {
                format!("NOT {sql}")
            } else {
                sql
            }
        }
        Op::Contains(x) => format!("({col} IS NOT NULL AND instr({col}, {}) > 0)", one(x)),
        Op::Icontains(x) => format!("memlane_icontains({col}, {})", one(x)),
        Op::Exists => format!("({col} IS NOT NULL)"),
        Op::Gt(_) | Op::Gte(_) | Op::Lt(_) | Op::Lte(_) => "0".into(),
    }
}

/// The WHERE clause for live memories matching `filter` at `now`.
pub(super) fn visible(
    filter: &Filter,
    now: DateTime<Utc>,
    include_expired: bool,
    params: &mut Vec<SqlValue>,
) -> String {
    let mut sql = String::from(LIVE);
    if !include_expired {
        params.push(SqlValue::Integer(micros(now)));
        sql.push_str(" AND (m.expiration_date IS NULL OR m.expiration_date > ?)");
    }
    if !filter.is_all() {
        sql.push_str(" AND (");
        sql.push_str(&compile(filter, params));
        sql.push(')');
    }
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_ops_round_trip_through_sql_encoding() {
        let ops = vec![
            Op::Eq(serde_json::json!(1)),
            Op::In(vec![serde_json::json!("a"), serde_json::json!(2)]),
            Op::Icontains("x".into()),
            Op::Exists,
            Op::Lte(serde_json::json!("2024")),
        ];
        for op in ops {
            assert_eq!(decode_op(&encode_op(&op)), Some(op));
        }
    }
}
