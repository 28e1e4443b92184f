//! Filters compiled to PostgreSQL over `memories m`.
//!
//! Most of the filter language maps onto SQL exactly: owner ids, the text's `contains`,
//! dates, categories. A few operators do not, because their meaning is the crate's own
//! Rust code (metadata comparisons, case-insensitive matching with Unicode folding). For
//! those the SQL is a superset of the filter — a condition it cannot decide counts as true
//! where it is required and as false where it is negated — and the rows it returns are
//! checked with [`Filter::matches`] afterwards. [`Compiled::exact`] says which case holds.

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::types::ToSql;

use crate::filter::{micros, Condition, Filter, Op, OwnerField, TimeField};

/// One query parameter.
pub(super) type Param = Box<dyn ToSql + Sync + Send>;

/// Query parameters, numbered `$1`, `$2`, … in the order they are pushed.
#[derive(Default)]
pub(super) struct Params(pub(super) Vec<Param>);

impl Params {
    /// Adds a parameter and returns its placeholder.
    pub(super) fn push(&mut self, value: impl ToSql + Sync + Send + 'static) -> String {
        self.0.push(Box::new(value));
        format!("${}", self.0.len())
    }

    /// The parameters as tokio-postgres takes them.
    pub(super) fn refs(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.0
            .iter()
            .map(|p| p.as_ref() as &(dyn ToSql + Sync))
            .collect()
    }
}

/// A filter as SQL.
pub(super) struct Compiled {
    /// A boolean expression over `memories m`.
    pub(super) sql: String,
    /// Whether the expression is the filter itself; otherwise it selects a superset, and
    /// the rows must be checked with [`Filter::matches`].
    pub(super) exact: bool,
}

/// The WHERE clause for live memories matching `filter` at `now` (see [`Compiled`]).
pub(super) fn visible(
    filter: &Filter,
    now: DateTime<Utc>,
    include_expired: bool,
    params: &mut Params,
) -> Compiled {
    let mut sql = String::from("m.deleted_at IS NULL");
    if !include_expired {
        let now = params.push(micros(now));
        sql.push_str(&format!(
            " AND (m.expiration_date IS NULL OR m.expiration_date > {now})"
        ));
    }
    let mut exact = true;
    if !filter.is_all() {
        let clause = compile(filter, true, &mut exact, params);
        sql.push_str(&format!(" AND ({clause})"));
    }
    Compiled { sql, exact }
}

/// `filter` as SQL that never yields NULL. Where a condition cannot be expressed, the SQL
/// answers `wide` (true: a superset, false: a subset, for under a NOT) and clears `exact`.
fn compile(filter: &Filter, wide: bool, exact: &mut bool, params: &mut Params) -> String {
    match filter {
        Filter::And(parts) if parts.is_empty() => "TRUE".into(),
        Filter::Or(parts) if parts.is_empty() => "FALSE".into(),
        Filter::And(parts) => join(parts, " AND ", wide, exact, params),
        Filter::Or(parts) => join(parts, " OR ", wide, exact, params),
        Filter::Not(inner) => format!("NOT ({})", compile(inner, !wide, exact, params)),
        Filter::Condition(c) => condition(c, params).unwrap_or_else(|| {
            *exact = false;
            if wide {
                superset(c, params).unwrap_or_else(|| "TRUE".into())
            } else {
                "FALSE".into()
            }
        }),
    }
}

fn join(parts: &[Filter], sep: &str, wide: bool, exact: &mut bool, params: &mut Params) -> String {
    let sql: Vec<String> = parts
        .iter()
        .map(|p| format!("({})", compile(p, wide, exact, params)))
        .collect();
    sql.join(sep)
}

/// One condition as SQL, or `None` when SQL cannot express it exactly.
fn condition(c: &Condition, params: &mut Params) -> Option<String> {
    Some(match c {
        Condition::Owner(field, op) => {
            let col = match field {
                OwnerField::User => "m.user_id",
                OwnerField::Agent => "m.agent_id",
                OwnerField::App => "m.app_id",
                OwnerField::Run => "m.run_id",
            };
            text_condition(col, op, params)?
        }
        Condition::Keywords(op) => text_condition("m.memory", op, params)?,
        Condition::Time(field, op) => {
            let col = match field {
                TimeField::Created => "m.created_at",
                TimeField::Updated => "m.updated_at",
                TimeField::Expiration => "m.expiration_date",
                TimeField::ValidFrom => "m.valid_from",
                TimeField::ValidUntil => "m.valid_until",
            };
            let mut within = |start: i64, end: i64| {
                let (s, e) = (params.push(start), params.push(end));
                format!("({col} >= {s} AND {col} < {e})")
            };
            let sql = match op {
                Op::Eq(r) | Op::Ne(r) => within(r.start, r.end),
                Op::In(rs) | Op::Nin(rs) if rs.is_empty() => "FALSE".into(),
                Op::In(rs) | Op::Nin(rs) => {
                    let any: Vec<String> = rs.iter().map(|r| within(r.start, r.end)).collect();
                    format!("({})", any.join(" OR "))
                }
                Op::Gt(r) => format!("({col} >= {})", params.push(r.end)),
                Op::Gte(r) => format!("({col} >= {})", params.push(r.start)),
                Op::Lt(r) => format!("({col} < {})", params.push(r.start)),
                Op::Lte(r) => format!("({col} < {})", params.push(r.end)),
                Op::Exists => "TRUE".into(),
                Op::Contains(_) | Op::Icontains(_) => "FALSE".into(),
            };
            let sql = format!("({col} IS NOT NULL AND {sql})");
            if matches!(op, Op::Ne(_) | Op::Nin(_)) {
                format!("NOT {sql}")
            } else {
                sql
            }
        }
        Condition::Categories(op) => match op {
            Op::Eq(x) | Op::Contains(x) => format!("(m.categories ? {})", params.push(x.clone())),
            Op::Ne(x) => format!("NOT (m.categories ? {})", params.push(x.clone())),
            Op::In(xs) => format!("(m.categories ?| {}::text[])", params.push(xs.clone())),
            Op::Nin(xs) => format!("NOT (m.categories ?| {}::text[])", params.push(xs.clone())),
            Op::Exists => "(jsonb_array_length(m.categories) > 0)".into(),
            Op::Gt(_) | Op::Gte(_) | Op::Lt(_) | Op::Lte(_) => "FALSE".into(),
            // Unicode case folding is the crate's own (see `crate::filter::icontains`).
            Op::Icontains(_) => return None,
        },
        // Metadata comparisons follow the filter language's own (`Filter::matches`).
        Condition::Metadata(..) => return None,
    })
}

/// SQL that admits every row `c` admits (and maybe more), for a condition [`condition`]
/// cannot express exactly; `None` when no narrower superset than all rows is known. It
/// keeps a search by metadata from reading every row: only those it admits are read and
/// checked with [`Filter::matches`].
fn superset(c: &Condition, params: &mut Params) -> Option<String> {
    let Condition::Metadata(path, op) = c else {
        return None;
    };
    let number = |v: &Value| v.as_f64().filter(|x| x.is_finite());
    let plain = |s: &str| !s.chars().any(|c| c == '"' || c == '\\' || c < ' ');
    let scalar = |v: &Value| match v {
        Value::Number(_) => number(v).is_some(),
        Value::Array(_) | Value::Object(_) => false,
        _ => true,
    };
    // Only conditions with a narrower superset below; no parameter is pushed for others.
    let narrows = match op {
        Op::Eq(x) => scalar(x),
        Op::In(xs) => xs.iter().all(scalar),
        Op::Gt(x) | Op::Gte(x) | Op::Lt(x) | Op::Lte(x) => number(x).is_some(),
        Op::Contains(Value::String(s)) => plain(s),
        Op::Exists => true,
        _ => false,
    };
    if !narrows {
        return None;
    }
    // `lookup` never finds a null, so null matches nothing.
    let none = match op {
        Op::Eq(x) => x.is_null(),
        Op::In(xs) => xs.iter().all(Value::is_null),
        _ => false,
    };
    if none {
        return Some("FALSE".into());
    }
    // The value at the path, as `lookup` finds it (PostgreSQL's `#>` also indexes arrays,
    // which only widens the set).
    let at = format!(
        "(m.metadata::jsonb #> {}::text[])",
        params.push(path.clone())
    );
    // Numbers compared as float8, as the crate compares numbers that are not both
    // integers; two integers it tells apart may be equal as float8, which only widens.
    let numeric = |cmp: &str, x: f64, params: &mut Params| {
        format!(
            "COALESCE(CASE WHEN jsonb_typeof({at}) = 'number' THEN ({at})::float8 {cmp} {}::float8 END, FALSE)",
            params.push(x)
        )
    };
    let eq = |x: &Value, params: &mut Params| -> Option<String> {
        match x {
            Value::Null => Some("FALSE".into()),
            Value::String(_) | Value::Bool(_) => Some(format!(
                "COALESCE({at} = {}::jsonb, FALSE)",
                params.push(x.clone())
            )),
            Value::Number(_) => number(x).map(|n| numeric("=", n, params)),
            Value::Array(_) | Value::Object(_) => None,
        }
    };
    match op {
        Op::Eq(x) => eq(x, params),
        Op::In(xs) => {
            let any: Option<Vec<String>> = xs
                .iter()
                .filter(|x| !x.is_null())
                .map(|x| eq(x, params))
                .collect();
            any.map(|any| format!("({})", any.join(" OR ")))
        }
        // A strict comparison may hold where the float8 values are equal.
        Op::Gt(x) | Op::Gte(x) => number(x).map(|n| numeric(">=", n, params)),
        Op::Lt(x) | Op::Lte(x) => number(x).map(|n| numeric("<=", n, params)),
        // A string holding `s`, or an array with the element `s`: either's text holds `s`
        // when `s` has no character JSON escapes inside an array's text.
        Op::Contains(Value::String(s)) => Some(format!(
            "COALESCE(strpos({at} #>> '{{}}', {}) > 0, FALSE)",
            params.push(s.clone())
        )),
        Op::Exists => Some(format!("COALESCE(jsonb_typeof({at}) <> 'null', FALSE)")),
        _ => None,
    }
}

fn text_condition(col: &str, op: &Op<String>, params: &mut Params) -> Option<String> {
    Some(match op {
        // `col IS NOT NULL AND col = $n` is never NULL, and keeps the index on `col` usable
        // (a COALESCE around the comparison hides it from the planner).
        Op::Eq(x) => format!("({col} IS NOT NULL AND {col} = {})", params.push(x.clone())),
        Op::Ne(x) => format!(
            "NOT ({col} IS NOT NULL AND {col} = {})",
            params.push(x.clone())
        ),
        Op::In(xs) => format!(
            "({col} IS NOT NULL AND {col} = ANY({}))",
            params.push(xs.clone())
        ),
        Op::Nin(xs) => format!(
            "NOT ({col} IS NOT NULL AND {col} = ANY({}))",
            params.push(xs.clone())
        ),
        Op::Contains(x) => format!(
            "COALESCE(strpos({col}, {}) > 0, FALSE)",
            params.push(x.clone())
        ),
        Op::Exists => format!("({col} IS NOT NULL)"),
        Op::Gt(_) | Op::Gte(_) | Op::Lt(_) | Op::Lte(_) => "FALSE".into(),
        Op::Icontains(_) => return None,
    })
}
