//! The write path: one IMMEDIATE transaction per commit, every precondition checked inside
//! it, so that no other connection (of this process or another) can slip in between a
//! check and its write.

use rusqlite::{params, Connection, OptionalExtension, Transaction as SqlTransaction};
use uuid::Uuid;

use super::rows::{to_json, vector_bytes};
use super::schema::terms_column;
use super::sql_err;
use crate::error::{Error, Result};
use crate::filter::micros;
use crate::record::{HistoryRecord, MemoryRecord};
use crate::store::{
    Committed, Feedback, FeedbackKind, RowOutcome, RowWrite, Transaction, VectorKey,
};

/// Commits a transaction, or nothing of it.
pub(super) fn commit(conn: &mut Connection, tx: Transaction) -> Result<Committed> {
    let t = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let credits: i64 = t
        .query_row("SELECT credits FROM state WHERE id = 1", [], |r| r.get(0))
        .map_err(sql_err)?;
    let credits = credits.max(0) as u64;
    if credits < tx.charge {
        return Err(Error::InsufficientCredits {
            needed: tx.charge,
            remaining: credits,
        });
    }
    if tx.charge > 0 {
        t.execute(
            "UPDATE state SET credits = credits - ?1 WHERE id = 1",
            params![tx.charge as i64],
        )
        .map_err(sql_err)?;
    }
    let mut out = Committed::default();
    for write in tx.writes {
        // An error drops `t`, which rolls the whole transaction back.
        apply(&t, write, &mut out)?;
    }
    out.credits = t
        .query_row("SELECT credits FROM state WHERE id = 1", [], |r| {
            r.get::<_, i64>(0)
        })
        .map_err(sql_err)?
        .max(0) as u64;
    t.commit().map_err(sql_err)?;
    Ok(out)
}

fn apply(t: &SqlTransaction<'_>, write: RowWrite, out: &mut Committed) -> Result<()> {
    match write {
        RowWrite::Insert { record, vector } => {
            let key = next_key(t)?;
            insert(t, &record, &vector, key)?;
            out.rows.push(RowOutcome::inserted(record.id, key));
        }
        RowWrite::Replace {
            record,
            vector,
            expect,
        } => {
            let (old_key, version) = live_at(t, record.id, expect)?;
            let r = &record;
            t.execute(
                "UPDATE memories SET metadata = ?1, categories = ?2, updated_at = ?3, \
                 expiration_date = ?4, immutable = ?5, version = ?6, valid_from = ?7, \
                 valid_until = ?8, superseded_by = ?9 WHERE id = ?10",
                params![
                    to_json(&r.metadata)?,
                    to_json(&r.categories)?,
                    micros(r.updated_at),
                    r.expiration_date.map(micros),
                    r.immutable,
                    (version + 1) as i64,
                    micros(r.valid_from),
                    r.valid_until.map(micros),
                    r.superseded_by.map(|id| id.to_string()),
                    r.id.to_string()
                ],
            )
            .map_err(sql_err)?;
            let (mut retired, mut added) = (None, None);
            if let Some(vector) = vector {
                // Only a new text touches the keyword index (its trigger watches the terms).
                let key = next_key(t)?;
                t.execute(
                    "UPDATE memories SET memory = ?1, hash = ?2, terms = ?3, vector_key = ?4 \
                     WHERE id = ?5",
                    params![
                        r.memory,
                        r.hash,
                        terms_column(&r.memory),
                        key as i64,
                        r.id.to_string()
                    ],
                )
                .map_err(sql_err)?;
                retire_vector(t, old_key)?;
                insert_vector(t, key, &vector)?;
                (retired, added) = (Some(old_key), Some(key));
            }
            out.rows.push(RowOutcome {
                id: r.id,
                retired,
                added,
                version: version + 1,
            });
        }
        RowWrite::SetVector { id, vector, expect } => {
            let (key, _) = live_at(t, id, expect)?;
            insert_vector(t, key, &vector)?;
        }
        RowWrite::DropVectors => {
            t.execute("DELETE FROM vectors", []).map_err(sql_err)?;
        }
        RowWrite::ExpectMeta { key, value } => {
            // Writers take turns (immediate transactions): nothing changes it before commit.
            let actual: Option<String> = t
                .query_row("SELECT value FROM meta WHERE key = ?1", [&key], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(sql_err)?;
            if actual.as_deref().unwrap_or_default() != value {
                return Err(crate::store::meta_moved(&key, &value, actual.as_deref()));
            }
        }
        RowWrite::Delete { id, at, expect } => {
            let (key, version) = live_at(t, id, expect)?;
            t.execute(
                "UPDATE memories SET deleted_at = ?1, version = ?2 WHERE id = ?3",
                params![micros(at), (version + 1) as i64, id.to_string()],
            )
            .map_err(sql_err)?;
            retire_vector(t, key)?;
            out.rows.push(RowOutcome {
                id,
                retired: Some(key),
                added: None,
                version: version + 1,
            });
        }
        RowWrite::Log(record) => out.cursors.push(insert_log(t, &record)?),
        RowWrite::Feedback(feedback) => {
            let live: bool = t
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM memories WHERE id = ?1 AND deleted_at IS NULL)",
                    [feedback.memory_id.to_string()],
                    |r| r.get(0),
                )
                .map_err(sql_err)?;
            if !live {
                return Err(Error::NotFound {
                    id: feedback.memory_id,
                });
            }
            upsert_feedback(t, &feedback)?;
        }
        RowWrite::Meta { key, value } => {
            t.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![key, value],
            )
            .map_err(sql_err)?;
        }
        RowWrite::Credit(amount) => {
            // Balances are SQLite integers: saturate at i64::MAX.
            t.execute(
                "UPDATE state SET credits = min(credits + min(?1, 9223372036854775807 - credits), \
                 9223372036854775807) WHERE id = 1",
                params![amount.min(i64::MAX as u64) as i64],
            )
            .map_err(sql_err)?;
        }
    }
    Ok(())
}

fn insert(t: &SqlTransaction<'_>, r: &MemoryRecord, vector: &[f32], key: VectorKey) -> Result<()> {
    let inserted = t.execute(
        "INSERT INTO memories (id, memory, user_id, agent_id, app_id, run_id, metadata, categories, \
         immutable, expiration_date, created_at, updated_at, hash, vector_key, context, \
         version, terms, context_terms, valid_from, valid_until, superseded_by) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, 1, ?16, ?17, \
         ?18, ?19, ?20)",
        params![
            r.id.to_string(),
            r.memory,
            r.owners.user_id,
            r.owners.agent_id,
            r.owners.app_id,
            r.owners.run_id,
            to_json(&r.metadata)?,
            to_json(&r.categories)?,
            r.immutable,
            r.expiration_date.map(micros),
            micros(r.created_at),
            micros(r.updated_at),
            r.hash,
            key as i64,
            r.context,
            terms_column(&r.memory),
            r.context.as_deref().map(terms_column).unwrap_or_default(),
            micros(r.valid_from),
            r.valid_until.map(micros),
            r.superseded_by.map(|id| id.to_string()),
        ],
    );
    match inserted {
        Ok(_) => insert_vector(t, key, vector),
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            Err(Error::Conflict {
                detail: format!("a memory with id {} already exists", r.id),
            })
        }
        Err(e) => Err(sql_err(e)),
    }
}

/// Stores the vector of a vector key (none for an empty one).
fn insert_vector(t: &SqlTransaction<'_>, key: VectorKey, vector: &[f32]) -> Result<()> {
    if vector.is_empty() {
        return Ok(());
    }
    t.execute(
        "INSERT OR REPLACE INTO vectors (key, vector) VALUES (?1, ?2)",
        params![key as i64, vector_bytes(vector)],
    )
    .map_err(sql_err)?;
    Ok(())
}

/// Drops the vector of a key no live memory holds any more (a new text, or a delete).
fn retire_vector(t: &SqlTransaction<'_>, key: VectorKey) -> Result<()> {
    t.execute("DELETE FROM vectors WHERE key = ?1", [key as i64])
        .map_err(sql_err)?;
    Ok(())
}

fn next_key(t: &SqlTransaction<'_>) -> Result<VectorKey> {
    let key: i64 = t
        .query_row(
            "UPDATE state SET max_key = max_key + 1 WHERE id = 1 RETURNING max_key",
            [],
            |r| r.get(0),
        )
        .map_err(sql_err)?;
    Ok(key as VectorKey)
}

/// A live row's vector key and version, if the version is `expect`: 404 when the memory is
/// not live, 409 when it moved.
fn live_at(t: &SqlTransaction<'_>, id: Uuid, expect: u64) -> Result<(VectorKey, u64)> {
    let found: Option<(i64, i64)> = t
        .query_row(
            "SELECT vector_key, version FROM memories WHERE id = ?1 AND deleted_at IS NULL",
            [id.to_string()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(sql_err)?;
    let (key, version) = found.ok_or(Error::NotFound { id })?;
    let version = version.max(0) as u64;
    if version != expect {
        return Err(Error::Conflict {
            detail: format!(
                "memory {id} was changed by another writer while this change was being \
                 prepared; nothing was written: retry"
            ),
        });
    }
    Ok((key as VectorKey, version))
}

/// Appends a change-log record and returns its cursor.
pub(super) fn insert_log(t: &SqlTransaction<'_>, h: &HistoryRecord) -> Result<u64> {
    let seq: i64 = t
        .query_row(
            "INSERT INTO history (id, memory_id, event, old_memory, new_memory, input, categories, \
             metadata, user_id, agent_id, app_id, run_id, created_at, superseded_by) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) RETURNING seq",
            params![
                h.id.to_string(),
                h.memory_id.to_string(),
                h.event.as_str(),
                h.old_memory,
                h.new_memory,
                to_json(&h.input)?,
                to_json(&h.categories)?,
                to_json(&h.metadata)?,
                h.owners.user_id,
                h.owners.agent_id,
                h.owners.app_id,
                h.owners.run_id,
                micros(h.created_at),
                h.superseded_by.map(|id| id.to_string()),
            ],
            |r| r.get(0),
        )
        .map_err(sql_err)?;
    Ok(seq.max(0) as u64)
}

fn upsert_feedback(t: &SqlTransaction<'_>, f: &Feedback) -> Result<()> {
    t.execute(
        "INSERT INTO feedback (memory_id, feedback, reason, updated_at) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (memory_id) DO UPDATE SET feedback = excluded.feedback, \
         reason = excluded.reason, updated_at = excluded.updated_at",
        params![
            f.memory_id.to_string(),
            f.feedback.map(FeedbackKind::as_str),
            f.feedback_reason,
            f.updated_at.map(micros).unwrap_or_default()
        ],
    )
    .map_err(sql_err)?;
    Ok(())
}
