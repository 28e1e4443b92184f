//! Row codecs: memories, change-log records and vectors as SQLite stores them.

use chrono::{DateTime, Utc};
use rusqlite::Row as SqlRow;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::record::{HistoryEvent, HistoryRecord, MemoryRecord, Message, Owners};
use crate::store::{Row, VectorKey};

/// The columns of a memory row, in the order [`row`] reads them.
pub(super) const COLUMNS: &str = "m.id, m.memory, m.user_id, m.agent_id, m.app_id, m.run_id, \
     m.metadata, m.categories, m.immutable, m.expiration_date, m.created_at, m.updated_at, \
     m.hash, m.context, m.vector_key, m.version, m.seq, m.deleted_at, \
     coalesce(m.valid_from, m.created_at), m.valid_until, m.superseded_by";

/// The columns of a change-log record, in the order [`log`] reads them.
pub(super) const LOG_COLUMNS: &str = "id, memory_id, event, old_memory, new_memory, input, \
     user_id, agent_id, app_id, run_id, categories, metadata, created_at, seq, superseded_by";

fn bad(e: Box<dyn std::error::Error + Send + Sync>) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, e)
}

/// A timestamp from its microseconds.
pub(super) fn time(micros: i64) -> rusqlite::Result<DateTime<Utc>> {
    DateTime::from_timestamp_micros(micros).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Integer,
            "timestamp out of range".into(),
        )
    })
}

fn json_column<T: serde::de::DeserializeOwned>(text: &str) -> rusqlite::Result<T> {
    serde_json::from_str(text).map_err(|e| bad(Box::new(e)))
}

fn uuid(text: &str) -> rusqlite::Result<Uuid> {
    Uuid::parse_str(text).map_err(|e| bad(Box::new(e)))
}

/// A memory row read with [`COLUMNS`].
pub(super) fn row(r: &SqlRow<'_>) -> rusqlite::Result<Row> {
    let metadata: String = r.get(6)?;
    let categories: String = r.get(7)?;
    let record = MemoryRecord {
        id: uuid(&r.get::<_, String>(0)?)?,
        memory: r.get(1)?,
        owners: Owners {
            user_id: r.get(2)?,
            agent_id: r.get(3)?,
            app_id: r.get(4)?,
            run_id: r.get(5)?,
        },
        metadata: json_column::<Map<String, Value>>(&metadata)?,
        categories: json_column(&categories)?,
        immutable: r.get(8)?,
        expiration_date: r.get::<_, Option<i64>>(9)?.map(time).transpose()?,
        created_at: time(r.get(10)?)?,
        updated_at: time(r.get(11)?)?,
        hash: r.get(12)?,
        context: r.get(13)?,
        valid_from: time(r.get(18)?)?,
        valid_until: r.get::<_, Option<i64>>(19)?.map(time).transpose()?,
        superseded_by: r
            .get::<_, Option<String>>(20)?
            .as_deref()
            .map(uuid)
            .transpose()?,
    };
    Ok(Row::new(
        record,
        r.get::<_, i64>(14)? as VectorKey,
        r.get::<_, i64>(15)?.max(0) as u64,
        r.get::<_, i64>(16)?.max(0) as u64,
        r.get::<_, Option<i64>>(17)?.map(time).transpose()?,
    ))
}

/// A change-log record read with [`LOG_COLUMNS`], with its cursor.
pub(super) fn log(r: &SqlRow<'_>) -> rusqlite::Result<(u64, HistoryRecord)> {
    let event: String = r.get(2)?;
    let input: String = r.get(5)?;
    let categories: String = r.get(10)?;
    let metadata: String = r.get(11)?;
    let record = HistoryRecord {
        id: uuid(&r.get::<_, String>(0)?)?,
        memory_id: uuid(&r.get::<_, String>(1)?)?,
        event: HistoryEvent::parse(&event)
            .ok_or_else(|| bad(format!("unknown event {event}").into()))?,
        old_memory: r.get(3)?,
        new_memory: r.get(4)?,
        input: json_column::<Vec<Message>>(&input)?,
        owners: Owners {
            user_id: r.get(6)?,
            agent_id: r.get(7)?,
            app_id: r.get(8)?,
            run_id: r.get(9)?,
        },
        categories: json_column(&categories)?,
        metadata: json_column(&metadata)?,
        created_at: time(r.get(12)?)?,
        superseded_by: r
            .get::<_, Option<String>>(14)?
            .as_deref()
            .map(uuid)
            .transpose()?,
    };
    Ok((r.get::<_, i64>(13)?.max(0) as u64, record))
}

/// A vector as stored: little-endian `f32`s.
pub(super) fn vector_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A vector from its stored bytes.
pub(super) fn vector_from_bytes(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A value as a JSON column.
pub(super) fn to_json(v: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::internal(format!("cannot serialise a record: {e}")))
}
