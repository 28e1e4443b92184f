//! The write path: one transaction per commit. Its first statement locks the project's state
//! row and takes the charge (`UPDATE … WHERE credits >= $n RETURNING`), so commits of a
//! project run one after another and every precondition is checked inside the transaction.

use tokio_postgres::Transaction as PgTransaction;
use uuid::Uuid;

use super::{big, pg_err, Client};
use crate::error::{Error, Result};
use crate::filter::micros;
use crate::record::{HistoryRecord, MemoryRecord};
use crate::store::{
    Committed, Feedback, FeedbackKind, RowOutcome, RowWrite, Transaction, VectorKey,
};
use crate::text;

/// The counters a commit allocates from, read under the state row's lock and written back
/// at its end.
struct State {
    credits: i64,
    max_key: i64,
    last_cursor: i64,
    seq: i64,
    live_rows: i64,
    live_tokens: i64,
    dimension: Option<i32>,
}

/// Commits a transaction, or nothing of it.
pub(super) async fn commit(
    client: &mut Client,
    s: &str,
    channel: &str,
    tx: Transaction,
) -> Result<Committed> {
    let t = client.transaction().await.map_err(pg_err)?;
    // Balances are bigints: a charge beyond them cannot be covered.
    let charge = big(tx.charge);
    let locked = t
        .query_opt(
            &format!(
                "UPDATE {s}.state SET credits = credits - $1 WHERE id = 1 AND credits >= $1 \
                 RETURNING credits, max_key, last_cursor, seq, live_rows, live_tokens, dimension"
            ),
            &[&charge],
        )
        .await
        .map_err(pg_err)?;
    let Some(r) = locked else {
        let credits: i64 = t
            .query_one(&format!("SELECT credits FROM {s}.state WHERE id = 1"), &[])
            .await
            .map_err(pg_err)?
            .get(0);
        return Err(Error::InsufficientCredits {
            needed: tx.charge,
            remaining: credits.max(0) as u64,
        });
    };
    let mut state = State {
        credits: r.get(0),
        max_key: r.get(1),
        last_cursor: r.get(2),
        seq: r.get(3),
        live_rows: r.get(4),
        live_tokens: r.get(5),
        dimension: r.get(6),
    };
    let mut out = Committed::default();
    for write in tx.writes {
        // An error drops `t`, which rolls the whole transaction back.
        apply(&t, s, write, &mut state, &mut out).await?;
    }
    t.execute(
        &format!(
            "UPDATE {s}.state SET credits = $1, max_key = $2, last_cursor = $3, seq = $4, \
             live_rows = $5, live_tokens = $6, dimension = $7 WHERE id = 1"
        ),
        &[
            &state.credits,
            &state.max_key,
            &state.last_cursor,
            &state.seq,
            &state.live_rows,
            &state.live_tokens,
            &state.dimension,
        ],
    )
    .await
    .map_err(pg_err)?;
    // Delivered to the listeners when the transaction commits, and only then.
    t.execute("SELECT pg_notify($1, '')", &[&channel])
        .await
        .map_err(pg_err)?;
    t.commit().await.map_err(pg_err)?;
    out.credits = state.credits.max(0) as u64;
    Ok(out)
}

async fn apply(
    t: &PgTransaction<'_>,
    s: &str,
    write: RowWrite,
    state: &mut State,
    out: &mut Committed,
) -> Result<()> {
    match write {
        RowWrite::Insert { record, vector } => {
            state.max_key += 1;
            state.seq += 1;
            let key = state.max_key;
            let length = insert(t, s, &record, key, state.seq).await?;
            insert_vector(t, s, state, key, vector).await?;
            state.live_rows += 1;
            state.live_tokens += i64::from(length);
            out.rows
                .push(RowOutcome::inserted(record.id, key as VectorKey));
        }
        RowWrite::Replace {
            record,
            vector,
            expect,
        } => {
            let (old_key, version, old_length) = live_at(t, s, record.id, expect).await?;
            let r = &record;
            let categories = serde_json::to_value(&r.categories).map_err(encode_err)?;
            t.execute(
                &format!(
                    "UPDATE {s}.memories SET metadata = $1, categories = $2, updated_at = $3, \
                     expiration_date = $4, immutable = $5, version = $6 WHERE id = $7"
                ),
                &[
                    &to_text(&r.metadata)?,
                    &categories,
                    &micros(r.updated_at),
                    &r.expiration_date.map(micros),
                    &r.immutable,
                    &big(version + 1),
                    &r.id,
                ],
            )
            .await
            .map_err(pg_err)?;
            let (mut retired, mut added) = (None, None);
            if let Some(vector) = vector {
                state.max_key += 1;
                let key = state.max_key;
                let terms = text::terms(&r.memory);
                let length = doc_length(&terms, &r.context, r) as i32;
                t.execute(
                    &format!(
                        "UPDATE {s}.memories SET memory = $1, hash = $2, terms = $3, \
                         vector_key = $4, doc_length = $5 WHERE id = $6"
                    ),
                    &[&r.memory, &r.hash, &terms, &key, &length, &r.id],
                )
                .await
                .map_err(pg_err)?;
                retire_vector(t, s, old_key).await?;
                insert_vector(t, s, state, key, vector).await?;
                state.live_tokens += i64::from(length) - i64::from(old_length);
                (retired, added) = (Some(old_key as VectorKey), Some(key as VectorKey));
            }
            out.rows.push(RowOutcome {
                id: r.id,
                retired,
                added,
                version: version + 1,
            });
        }
        RowWrite::Delete { id, at, expect } => {
            let (key, version, length) = live_at(t, s, id, expect).await?;
            t.execute(
                &format!("UPDATE {s}.memories SET deleted_at = $1, version = $2 WHERE id = $3"),
                &[&micros(at), &big(version + 1), &id],
            )
            .await
            .map_err(pg_err)?;
            retire_vector(t, s, key).await?;
            state.live_rows -= 1;
            state.live_tokens -= i64::from(length);
            out.rows.push(RowOutcome {
                id,
                retired: Some(key as VectorKey),
                added: None,
                version: version + 1,
            });
        }
        RowWrite::Log(record) => {
            state.last_cursor += 1;
            insert_log(t, s, &record, state.last_cursor).await?;
            out.cursors.push(state.last_cursor.max(0) as u64);
        }
        RowWrite::Feedback(feedback) => {
            let live = t
                .query_opt(
                    &format!("SELECT 1 FROM {s}.memories WHERE id = $1 AND deleted_at IS NULL"),
                    &[&feedback.memory_id],
                )
                .await
                .map_err(pg_err)?;
            if live.is_none() {
                return Err(Error::NotFound {
                    id: feedback.memory_id,
                });
            }
            upsert_feedback(t, s, &feedback).await?;
        }
        RowWrite::Meta { key, value } => {
            t.execute(
                &format!(
                    "INSERT INTO {s}.meta (key, value) VALUES ($1, $2) \
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                ),
                &[&key, &value],
            )
            .await
            .map_err(pg_err)?;
        }
        RowWrite::Credit(amount) => {
            state.credits = state.credits.saturating_add(big(amount));
        }
    }
    Ok(())
}

fn encode_err(e: serde_json::Error) -> Error {
    Error::internal(format!("cannot serialise a record: {e}"))
}

fn to_text(v: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(v).map_err(encode_err)
}

/// A memory's length as BM25 counts it: its terms, its context's, one token per owner.
fn doc_length(terms: &[String], context: &Option<String>, r: &MemoryRecord) -> usize {
    let context = context.as_deref().map_or(0, |c| text::terms(c).len());
    let owners = [
        &r.owners.user_id,
        &r.owners.agent_id,
        &r.owners.app_id,
        &r.owners.run_id,
    ]
    .iter()
    .filter(|o| o.is_some())
    .count();
    terms.len() + context + owners
}

/// Inserts a memory row; returns its BM25 length. 409 when its id is taken.
async fn insert(
    t: &PgTransaction<'_>,
    s: &str,
    r: &MemoryRecord,
    key: i64,
    seq: i64,
) -> Result<i32> {
    let terms = text::terms(&r.memory);
    let context_terms = r.context.as_deref().map(text::terms).unwrap_or_default();
    let length = doc_length(&terms, &r.context, r) as i32;
    let categories = serde_json::to_value(&r.categories).map_err(encode_err)?;
    let inserted = t
        .execute(
            &format!(
                "INSERT INTO {s}.memories (id, seq, memory, user_id, agent_id, app_id, run_id, \
                 metadata, categories, immutable, expiration_date, created_at, updated_at, hash, \
                 context, version, vector_key, terms, context_terms, doc_length) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, 1, \
                 $16, $17, $18, $19) ON CONFLICT (id) DO NOTHING"
            ),
            &[
                &r.id,
                &seq,
                &r.memory,
                &r.owners.user_id,
                &r.owners.agent_id,
                &r.owners.app_id,
                &r.owners.run_id,
                &to_text(&r.metadata)?,
                &categories,
                &r.immutable,
                &r.expiration_date.map(micros),
                &micros(r.created_at),
                &micros(r.updated_at),
                &r.hash,
                &r.context,
                &key,
                &terms,
                &context_terms,
                &length,
            ],
        )
        .await
        .map_err(pg_err)?;
    if inserted == 0 {
        return Err(Error::Conflict {
            detail: format!("a memory with id {} already exists", r.id),
        });
    }
    Ok(length)
}

/// Stores the vector of a new key. The first vector fixes the store's dimension and builds
/// its HNSW index (cosine distance, over the vectors cast to that dimension).
async fn insert_vector(
    t: &PgTransaction<'_>,
    s: &str,
    state: &mut State,
    key: i64,
    vector: Vec<f32>,
) -> Result<()> {
    let dimension = vector.len() as i32;
    match state.dimension {
        Some(d) if d != dimension => {
            return Err(Error::DimensionMismatch {
                expected: d.max(0) as usize,
                actual: vector.len(),
            })
        }
        Some(_) => {}
        None => {
            t.batch_execute(&format!(
                "CREATE INDEX vectors_hnsw ON {s}.vectors \
                 USING hnsw ((embedding::vector({dimension})) vector_cosine_ops)"
            ))
            .await
            .map_err(pg_err)?;
            state.dimension = Some(dimension);
        }
    }
    t.execute(
        &format!("INSERT INTO {s}.vectors (key, embedding) VALUES ($1, $2)"),
        &[&key, &pgvector::Vector::from(vector)],
    )
    .await
    .map_err(pg_err)?;
    Ok(())
}

/// Drops the vector of a key no live memory holds any more.
async fn retire_vector(t: &PgTransaction<'_>, s: &str, key: i64) -> Result<()> {
    t.execute(&format!("DELETE FROM {s}.vectors WHERE key = $1"), &[&key])
        .await
        .map_err(pg_err)?;
    Ok(())
}

/// A live row's vector key, version and BM25 length, if its version is `expect` (locking
/// it): 404 when the memory is not live, 409 when it moved.
async fn live_at(t: &PgTransaction<'_>, s: &str, id: Uuid, expect: u64) -> Result<(i64, u64, i32)> {
    let found = t
        .query_opt(
            &format!(
                "SELECT vector_key, version, doc_length FROM {s}.memories \
                 WHERE id = $1 AND deleted_at IS NULL FOR UPDATE"
            ),
            &[&id],
        )
        .await
        .map_err(pg_err)?;
    let r = found.ok_or(Error::NotFound { id })?;
    let version = r.get::<_, i64>(1).max(0) as u64;
    if version != expect {
        return Err(Error::Conflict {
            detail: format!(
                "memory {id} was changed by another writer while this change was being \
                 prepared; nothing was written: retry"
            ),
        });
    }
    Ok((r.get(0), version, r.get(2)))
}

async fn insert_log(t: &PgTransaction<'_>, s: &str, h: &HistoryRecord, seq: i64) -> Result<()> {
    t.execute(
        &format!("INSERT INTO {s}.history (seq, memory_id, record) VALUES ($1, $2, $3)"),
        &[&seq, &h.memory_id, &to_text(h)?],
    )
    .await
    .map_err(pg_err)?;
    Ok(())
}

async fn upsert_feedback(t: &PgTransaction<'_>, s: &str, f: &Feedback) -> Result<()> {
    t.execute(
        &format!(
            "INSERT INTO {s}.feedback (memory_id, feedback, reason, updated_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (memory_id) DO UPDATE SET \
             feedback = excluded.feedback, reason = excluded.reason, \
             updated_at = excluded.updated_at"
        ),
        &[
            &f.memory_id,
            &f.feedback.map(FeedbackKind::as_str),
            &f.feedback_reason,
            &f.updated_at.map(micros).unwrap_or_default(),
        ],
    )
    .await
    .map_err(pg_err)?;
    Ok(())
}
