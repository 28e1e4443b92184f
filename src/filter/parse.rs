//! The JSON form of filters.

use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use serde_json::{Map, Value};

use super::{
    applies, not_applicable, valid_metadata_key, Condition, FieldKind, Filter, Op, OwnerField,
    TimeField, TimeRange, MAX_FILTER_CONDITIONS, MAX_FILTER_DEPTH, MAX_IN_VALUES,
    MAX_METADATA_PATH,
};
use crate::error::{Error, Result};

/// Parses a filter from its JSON form (unvalidated).
pub(super) fn parse(value: &Value) -> Result<Filter> {
    Parser { conditions: 0 }.filter(value, 1)
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
            return Err(Error::invalid_field(
                "filters",
                format!("filter nests deeper than {MAX_FILTER_DEPTH} levels; flatten it"),
            ));
        }
        let Value::Object(map) = value else {
            return Err(Error::invalid_field(
                "filters",
                format!(
                    "a filter must be a JSON object such as {{\"user_id\": \"alice\"}}, got {}",
                    json_kind(value)
                ),
            ));
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
            return Err(Error::invalid_field(
                "filters",
                format!("{key} takes an array of filters, got {}", json_kind(value)),
            ));
        };
        if items.is_empty() {
            return Err(Error::invalid_field(
                "filters",
                format!("{key} needs at least one filter in its array"),
            ));
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
                    return Err(Error::invalid_field(
                        "filters",
                        format!(
                            "metadata in a filter takes an object of key → value, got {}",
                            json_kind(value)
                        ),
                    ));
                };
                if map.is_empty() {
                    return Err(Error::invalid_field(
                        "filters",
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
                    "valid_from" => Field::Time(TimeField::ValidFrom),
                    "valid_until" => Field::Time(TimeField::ValidUntil),
                    "categories" => Field::Categories,
                    "keywords" => Field::Keywords,
                    other => {
                        return Err(Error::invalid_field("filters", format!(
                            "unknown filter field {other:?}; fields are user_id, agent_id, app_id, run_id, \
                             created_at, updated_at, expiration_date, valid_from, valid_until, categories, \
                             keywords, metadata.<key>, \
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
            return Err(Error::invalid_field(
                "filters",
                format!("filter field {key:?} has more than {MAX_METADATA_PATH} path segments"),
            ));
        }
        for s in &segments {
            if !valid_metadata_key(s) {
                return Err(Error::invalid_field(
                    "filters",
                    format!(
                    "filter field {key:?}: metadata keys in filters must be 1–64 characters of \
                     letters, digits, '_' or '-'"
                ),
                ));
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
                return Err(Error::invalid_field("filters", format!(
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
                return Err(Error::invalid_field(
                    "filters",
                    format!(
                    "filter holds more than {MAX_FILTER_CONDITIONS} conditions; split the query"
                ),
                ));
            }
            parts.push(Filter::Condition(condition(key, &field, &op, &operand)?));
        }
        Ok(match parts.len() {
            1 => parts.pop().unwrap_or_else(Filter::all),
            _ => Filter::And(parts),
        })
    }
}
enum Field {
    Owner(OwnerField),
    Time(TimeField),
    Categories,
    Keywords,
    Metadata(Vec<String>),
}
fn condition(key: &str, field: &Field, op: &str, operand: &Value) -> Result<Condition> {
    let kind = match field {
        Field::Owner(_) => FieldKind::Owner,
        Field::Time(f) => FieldKind::Time(*f),
        Field::Categories => FieldKind::Categories,
        Field::Keywords => FieldKind::Keywords,
        Field::Metadata(_) => FieldKind::Metadata,
    };
    if !applies(kind, op) {
        return Err(not_applicable(op, key));
    }
    Ok(match field {
        Field::Owner(f) => Condition::Owner(*f, build_op(key, op, operand, string_operand)?),
        Field::Time(f) => Condition::Time(*f, build_op(key, op, operand, time_operand)?),
        Field::Categories => Condition::Categories(build_op(key, op, operand, string_operand)?),
        Field::Keywords => Condition::Keywords(build_op(key, op, operand, string_operand)?),
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
            return Err(Error::invalid_field(
                "filters",
                format!("{op} on {key} takes an array, got {}", json_kind(v)),
            ));
        };
        if items.len() > MAX_IN_VALUES {
            return Err(Error::invalid_field(
                "filters",
                format!("{op} on {key} holds more than {MAX_IN_VALUES} values"),
            ));
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
                return Err(Error::invalid_field(
                    "filters",
                    format!(
                        "icontains on {key} takes a string, got {}",
                        json_kind(other)
                    ),
                ))
            }
        },
        "*" => Op::Exists,
        other => {
            return Err(Error::invalid_field(
                "filters",
                format!("unknown operator {other:?} on {key}"),
            ))
        }
    })
}

fn string_operand(key: &str, v: &Value) -> Result<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        other => Err(Error::invalid_field(
            "filters",
            format!("{key} compares with strings, got {}", json_kind(other)),
        )),
    }
}

fn json_operand(key: &str, v: &Value) -> Result<Value> {
    match v {
        Value::Null => Err(Error::invalid_field("filters", format!(
            "{key}: null is not a comparable value; use \"*\" for any value or NOT with \"*\" for none"
        ))),
        other => Ok(other.clone()),
    }
}

/// Parses a date filter operand: an RFC 3339 instant or a `YYYY-MM-DD` day (UTC).
pub(crate) fn time_operand(key: &str, v: &Value) -> Result<TimeRange> {
    let Value::String(s) = v else {
        return Err(Error::invalid_field(
            "filters",
            format!(
                "{key} compares with a date string (RFC 3339 or YYYY-MM-DD), got {}",
                json_kind(v)
            ),
        ));
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
    Err(Error::invalid_field(
        "filters",
        format!("{key}: {s:?} is not a date; use RFC 3339 (2024-07-01T12:00:00Z) or YYYY-MM-DD"),
    ))
}
