//! A memory row as the PostgreSQL store reads it: the columns it selects and their decoding.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::errors::{corrupt, pg_err};
use crate::error::Result;
use crate::record::{MemoryRecord, Owners};
use crate::store::{Row, VectorKey};

/// The columns of a memory row, in the order [`row`] reads them.
pub(super) const COLUMNS: &str = "m.id, m.memory, m.user_id, m.agent_id, m.app_id, m.run_id, \
     m.metadata, m.categories, m.immutable, m.expiration_date, m.created_at, m.updated_at, \
     m.hash, m.context, m.vector_key, m.version, m.seq, m.deleted_at, m.valid_from, \
     m.valid_until, m.superseded_by";

pub(super) fn time(micros: i64) -> Result<DateTime<Utc>> {
    DateTime::from_timestamp_micros(micros).ok_or_else(|| corrupt("timestamp"))
}

/// A count or cursor as PostgreSQL's bigint, clamped to its range.
pub(super) fn big(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// A memory row read with [`COLUMNS`].
pub(super) fn row(r: &tokio_postgres::Row) -> Result<Row> {
    row_at(r, 0)
}

/// A memory row read with [`COLUMNS`] from column `at` on.
pub(super) fn row_at(r: &tokio_postgres::Row, at: usize) -> Result<Row> {
    let metadata: String = r.try_get(at + 6).map_err(pg_err)?;
    let categories: Value = r.try_get(at + 7).map_err(pg_err)?;
    let record = MemoryRecord {
        id: r.try_get(at).map_err(pg_err)?,
        memory: r.try_get(at + 1).map_err(pg_err)?,
        owners: Owners {
            user_id: r.try_get(at + 2).map_err(pg_err)?,
            agent_id: r.try_get(at + 3).map_err(pg_err)?,
            app_id: r.try_get(at + 4).map_err(pg_err)?,
            run_id: r.try_get(at + 5).map_err(pg_err)?,
        },
        metadata: serde_json::from_str::<Map<String, Value>>(&metadata)
            .map_err(|_| corrupt("metadata object"))?,
        categories: serde_json::from_value(categories).map_err(|_| corrupt("category list"))?,
        immutable: r.try_get(at + 8).map_err(pg_err)?,
        expiration_date: r
            .try_get::<_, Option<i64>>(at + 9)
            .map_err(pg_err)?
            .map(time)
            .transpose()?,
        created_at: time(r.try_get(at + 10).map_err(pg_err)?)?,
        updated_at: time(r.try_get(at + 11).map_err(pg_err)?)?,
        hash: r.try_get(at + 12).map_err(pg_err)?,
        context: r.try_get(at + 13).map_err(pg_err)?,
        valid_from: time(r.try_get(at + 18).map_err(pg_err)?)?,
        valid_until: r
            .try_get::<_, Option<i64>>(at + 19)
            .map_err(pg_err)?
            .map(time)
            .transpose()?,
        superseded_by: r.try_get(at + 20).map_err(pg_err)?,
    };
    Ok(Row::new(
        record,
        r.try_get::<_, i64>(at + 14).map_err(pg_err)?.max(0) as VectorKey,
        r.try_get::<_, i64>(at + 15).map_err(pg_err)?.max(0) as u64,
        r.try_get::<_, i64>(at + 16).map_err(pg_err)?.max(0) as u64,
        r.try_get::<_, Option<i64>>(at + 17)
            .map_err(pg_err)?
            .map(time)
            .transpose()?,
    ))
}

pub(super) fn rows(found: &[tokio_postgres::Row]) -> Result<Vec<Row>> {
    found.iter().map(row).collect()
}
