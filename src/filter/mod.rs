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
//!   `expiration_date`, `valid_from`, `valid_until`, `categories`, `keywords` (the memory text), `metadata.<key>` (dotted
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
//! | dates | eq, ne, in, nin, gt, gte, lt, lte, `*` (`expiration_date` and `valid_until` only) |
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

use serde_json::Value;

use crate::error::{Error, Result};
use crate::record::MemoryRecord;

mod eval;
mod parse;
#[cfg(test)]
mod tests;

pub(crate) use eval::micros;
pub(crate) use eval::{
    categories_match, icontains, lookup, metadata_matches, text_matches, time_matches,
};

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
    /// `valid_from`: since when the memory's fact holds.
    ValidFrom,
    /// `valid_until`: when a later fact superseded it (none while it is current).
    ValidUntil,
}

impl TimeField {
    /// The field's name.
    pub fn name(self) -> &'static str {
        match self {
            TimeField::Created => "created_at",
            TimeField::Updated => "updated_at",
            TimeField::Expiration => "expiration_date",
            TimeField::ValidFrom => "valid_from",
            TimeField::ValidUntil => "valid_until",
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
        let filter = parse::parse(value)?;
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
            return Err(Error::invalid_field(
                "filters",
                format!("filter nests deeper than {MAX_FILTER_DEPTH} levels; flatten it"),
            ));
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
                    return Err(Error::invalid_field(
                        "filters",
                        format!(
                        "filter holds more than {MAX_FILTER_CONDITIONS} conditions; split the query"
                    ),
                    ));
                }
                if counts.1 > MAX_FILTER_VALUES {
                    return Err(Error::invalid_field(
                        "filters",
                        format!(
                        "filter holds more than {MAX_FILTER_VALUES} values in all; split the query"
                    ),
                    ));
                }
                match c {
                    Condition::Metadata(path, _)
                        if path.is_empty()
                            || path.len() > MAX_METADATA_PATH
                            || !path.iter().all(|k| valid_metadata_key(k)) =>
                    {
                        Err(Error::invalid_field(
                            "filters",
                            format!(
                            "metadata filter path {path:?}: 1–{MAX_METADATA_PATH} keys of 1–64 \
                             letters, digits, '_' or '-'"
                        ),
                        ))
                    }
                    Condition::Time(field, Op::In(rs) | Op::Nin(rs))
                        if rs.len() > MAX_TIME_VALUES =>
                    {
                        Err(Error::invalid_field(
                            "filters",
                            format!(
                                "{} in / nin holds more than {MAX_TIME_VALUES} dates",
                                field.name()
                            ),
                        ))
                    }
                    c => c.check_operator(),
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

    /// The memories no later fact has superseded: `{"NOT": {"valid_until": "*"}}`, what
    /// search and list read unless asked otherwise.
    pub fn current() -> Filter {
        Filter::Not(Box::new(Filter::Condition(Condition::Time(
            TimeField::ValidUntil,
            Op::Exists,
        ))))
    }

    /// The memories whose fact held at `at`: said by then (`valid_from`), and not superseded
    /// by then (`valid_until` after it, or none).
    pub fn held_at(at: chrono::DateTime<chrono::Utc>) -> Filter {
        let at = micros(at);
        let instant = TimeRange {
            start: at,
            end: at.saturating_add(1),
        };
        Filter::And(vec![
            Filter::Condition(Condition::Time(TimeField::ValidFrom, Op::Lte(instant))),
            Filter::Not(Box::new(Filter::Condition(Condition::Time(
                TimeField::ValidUntil,
                Op::Lte(instant),
            )))),
        ])
    }

    /// Whether the filter is exactly [`Filter::current`]: every current memory.
    pub fn is_current(&self) -> bool {
        *self == Filter::current()
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

    /// When the filter asks for exactly the current memories of some owners (owner
    /// equalities and [`Filter::current`], under `AND`s only, at least one owner), those
    /// owners: the in-process index answers such a filter from its own lists.
    pub(crate) fn current_owners(&self) -> Option<Vec<(OwnerField, &str)>> {
        fn walk<'a>(
            f: &'a Filter,
            pins: &mut Vec<(OwnerField, &'a str)>,
            current: &mut usize,
        ) -> bool {
            match f {
                Filter::And(all) => all.iter().all(|f| walk(f, pins, current)),
                Filter::Condition(Condition::Owner(field, Op::Eq(id))) => {
                    pins.push((*field, id));
                    true
                }
                f if f.is_current() => {
                    *current += 1;
                    true
                }
                _ => false,
            }
        }
        let (mut pins, mut current) = (Vec::new(), 0);
        (walk(self, &mut pins, &mut current) && current > 0 && !pins.is_empty()).then_some(pins)
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
    /// The field's name, as the JSON form writes it.
    fn field_name(&self) -> String {
        match self {
            Condition::Owner(f, _) => f.name().to_string(),
            Condition::Time(f, _) => f.name().to_string(),
            Condition::Categories(_) => "categories".to_string(),
            Condition::Keywords(_) => "keywords".to_string(),
            Condition::Metadata(path, _) => format!("metadata.{}", path.join(".")),
        }
    }

    /// A 400 when the operator does not apply to the field (the table in the module docs),
    /// so that a filter built in code is refused exactly as its JSON form would be, instead
    /// of silently matching nothing.
    fn check_operator(&self) -> Result<()> {
        let (kind, op) = match self {
            Condition::Owner(_, op) => (FieldKind::Owner, op_name(op)),
            Condition::Time(f, op) => (FieldKind::Time(*f), op_name(op)),
            Condition::Categories(op) => (FieldKind::Categories, op_name(op)),
            Condition::Keywords(op) => (FieldKind::Keywords, op_name(op)),
            Condition::Metadata(_, op) => (FieldKind::Metadata, op_name(op)),
        };
        if applies(kind, op) {
            Ok(())
        } else {
            Err(not_applicable(op, &self.field_name()))
        }
    }

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
                    TimeField::ValidFrom => Some(micros(record.valid_from)),
                    TimeField::ValidUntil => record.valid_until.map(micros),
                };
                time_matches(value, op)
            }
            Condition::Categories(op) => categories_match(&record.categories, op),
            Condition::Keywords(op) => text_matches(Some(&record.memory), op),
            Condition::Metadata(path, op) => metadata_matches(lookup(&record.metadata, path), op),
        }
    }
}
/// Whether a metadata key may be used in a filter path.
pub(crate) fn valid_metadata_key(key: &str) -> bool {
    (1..=64).contains(&key.len())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}
/// The kinds of field, as far as operators care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldKind {
    Owner,
    Time(TimeField),
    Categories,
    Keywords,
    Metadata,
}

/// Which operators apply to which field: the table in the module docs, in one place for the
/// parser and for [`Filter::validate`]. `op` is the JSON name, `"*"` for [`Op::Exists`].
fn applies(field: FieldKind, op: &str) -> bool {
    let ordering = matches!(op, "gt" | "gte" | "lt" | "lte");
    let substring = matches!(op, "contains" | "icontains");
    match field {
        FieldKind::Owner | FieldKind::Categories => !ordering,
        FieldKind::Time(f) => {
            !substring && (op != "*" || matches!(f, TimeField::Expiration | TimeField::ValidUntil))
        }
        FieldKind::Keywords => substring,
        FieldKind::Metadata => true,
    }
}

/// The JSON name of an operator.
fn op_name<T>(op: &Op<T>) -> &'static str {
    match op {
        Op::Eq(_) => "eq",
        Op::Ne(_) => "ne",
        Op::In(_) => "in",
        Op::Nin(_) => "nin",
        Op::Gt(_) => "gt",
        Op::Gte(_) => "gte",
        Op::Lt(_) => "lt",
        Op::Lte(_) => "lte",
        Op::Contains(_) => "contains",
        Op::Icontains(_) => "icontains",
        Op::Exists => "*",
    }
}

fn not_applicable(op: &str, field: &str) -> Error {
    Error::invalid_field("filters", format!(
        "operator {} does not apply to {field}; see the filter documentation for which operators each field takes",
        if op == "*" { "\"*\"" } else { op }
    ))
}
