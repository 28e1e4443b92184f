//! The write path: one transaction per commit, every precondition checked inside it.
//!
//! The rows go in first, in as few statements as the writes allow (consecutive insertions
//! share one `INSERT … SELECT FROM unnest(…)` per table), with vector keys and row
//! sequence numbers from sequences, while other writers do the same. Only then does the
//! transaction lock the project's state row, in the statement that checks and takes the
//! charge (`UPDATE … WHERE credits >= $n RETURNING`); under that lock it numbers its
//! change-log records, writes them, and commits. Commits therefore take their cursors in
//! the order they commit, and the lock is held for a few statements, not for the whole
//! write: writers on several hosts insert (and pay pgvector's index insertion) in parallel.

use tokio_postgres::Transaction as PgTransaction;
use uuid::Uuid;

use super::{big, pg_err, Client};
use crate::error::{Error, Result};
use crate::filter::micros;
use crate::record::MemoryRecord;
use crate::store::{
    Committed, Feedback, FeedbackKind, RowOutcome, RowWrite, Transaction, VectorKey,
};
use crate::text;

/// Separates a row's terms in the text that carries them into `unnest` (which cannot take
/// an array per row); no term holds it.
const TERM_SEPARATOR: &str = "\u{1f}";

/// What a commit has done before it takes the lock, for the state row.
#[derive(Default)]
struct Tally {
    live_rows: i64,
    live_tokens: i64,
    credits_added: i64,
    logs: Vec<(Uuid, String)>,
    /// Changes of document frequency: for each term, live rows gained (or lost).
    df: std::collections::HashMap<String, i64>,
    /// The store's vector dimension, once known.
    dimension: Option<i32>,
}

impl Tally {
    /// Counts a row's distinct terms (of its text and its context) `by` rows more.
    fn count_terms(&mut self, text: &[String], context: &[String], by: i64) {
        let distinct: std::collections::HashSet<&String> = text.iter().chain(context).collect();
        for term in distinct {
            *self.df.entry(term.clone()).or_default() += by;
        }
    }
}

/// An insertion waiting to be written with the others next to it.
struct Pending {
    record: MemoryRecord,
    vector: Vec<f32>,
}

/// A step of a commit before the lock.
enum Step {
    /// Consecutive insertions, written with one statement per table.
    Insert(Vec<Pending>),
    /// A write that reads or changes rows, after the insertions before it.
    Apply(Box<RowWrite>),
}

/// Orders a transaction's writes into steps. Change-log records and credits are only
/// counted until the lock, so the insertions around them stay one step: an add of a
/// hundred memories (each followed by its log record) is one insertion, not a hundred.
fn steps(writes: Vec<RowWrite>, tally: &mut Tally) -> Result<Vec<Step>> {
    let mut out = Vec::new();
    let mut pending = Vec::new();
    for write in writes {
        match write {
            RowWrite::Insert { record, vector } => pending.push(Pending { record, vector }),
            RowWrite::Log(record) => tally.logs.push((record.memory_id, to_text(&record)?)),
            RowWrite::Credit(amount) => {
                tally.credits_added = tally.credits_added.saturating_add(big(amount));
            }
            write => {
                if !pending.is_empty() {
                    out.push(Step::Insert(std::mem::take(&mut pending)));
                }
                out.push(Step::Apply(Box::new(write)));
            }
        }
    }
    if !pending.is_empty() {
        out.push(Step::Insert(pending));
    }
    Ok(out)
}

/// Commits a transaction, or nothing of it.
pub(super) async fn commit(
    client: &mut Client,
    s: &str,
    channel: &str,
    tx: Transaction,
) -> Result<Committed> {
    let t = client.transaction().await.map_err(pg_err)?;
    let mut tally = Tally {
        dimension: t
            .query_one(
                &format!("SELECT dimension FROM {s}.state WHERE id = 1"),
                &[],
            )
            .await
            .map_err(pg_err)?
            .get(0),
        ..Tally::default()
    };
    let mut out = Committed::default();
    for step in steps(tx.writes, &mut tally)? {
        // An error drops `t`, which rolls the whole transaction back.
        match step {
            Step::Insert(pending) => insert_all(&t, s, pending, &mut tally, &mut out).await?,
            Step::Apply(write) => apply(&t, s, *write, &mut tally, &mut out).await?,
        }
    }

    // The lock: the charge, then the cursors, in commit order.
    let charge = big(tx.charge);
    let locked = t
        .query_opt(
            &format!(
                "UPDATE {s}.state SET \
                 credits = LEAST(credits::numeric - $1::bigint + $2::bigint, \
                 9223372036854775807)::bigint, \
                 live_rows = live_rows + $3::bigint, live_tokens = live_tokens + $4::bigint, \
                 last_cursor = last_cursor + $5::bigint \
                 WHERE id = 1 AND credits >= $1::bigint RETURNING credits, last_cursor"
            ),
            &[
                &charge,
                &tally.credits_added,
                &tally.live_rows,
                &tally.live_tokens,
                &(tally.logs.len() as i64),
            ],
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
    let (credits, last): (i64, i64) = (r.get(0), r.get(1));
    let first = last - tally.logs.len() as i64 + 1;
    if !tally.logs.is_empty() {
        let cursors: Vec<i64> = (first..=last).collect();
        let (ids, records): (Vec<Uuid>, Vec<String>) = tally.logs.into_iter().unzip();
        t.execute(
            &format!(
                "INSERT INTO {s}.history (seq, memory_id, record) \
                 SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::text[])"
            ),
            &[&cursors, &ids, &records],
        )
        .await
        .map_err(pg_err)?;
        out.cursors = cursors.into_iter().map(|c| c.max(0) as u64).collect();
    }
    // Document frequencies, under the lock (so in one order: no deadlock between writers).
    let mut df: Vec<(String, i64)> = tally.df.into_iter().filter(|(_, d)| *d != 0).collect();
    if !df.is_empty() {
        df.sort();
        let (terms, deltas): (Vec<String>, Vec<i64>) = df.into_iter().unzip();
        t.execute(
            &format!(
                "INSERT INTO {s}.terms AS t (term, df) \
                 SELECT * FROM unnest($1::text[], $2::bigint[]) \
                 ON CONFLICT (term) DO UPDATE SET df = t.df + excluded.df"
            ),
            &[&terms, &deltas],
        )
        .await
        .map_err(pg_err)?;
    }
    // Delivered to the listeners when the transaction commits, and only then.
    t.execute("SELECT pg_notify($1, '')", &[&channel])
        .await
        .map_err(pg_err)?;
    t.commit().await.map_err(at_commit)?;
    out.credits = credits.max(0) as u64;
    Ok(out)
}

/// An error while committing. A connection lost then leaves the outcome unknown: the server
/// may have committed the transaction (whole) before the answer was lost, or rolled it back
/// (whole). Still a retryable 503, but one that says so.
fn at_commit(e: tokio_postgres::Error) -> Error {
    let cause = e.to_string();
    match pg_err(e) {
        Error::Unreachable { source, .. } => Error::Unreachable {
            detail: format!(
                "the connection to PostgreSQL was lost while the call committed ({cause}), so \
                 it is either wholly written or not at all: read back what it wrote (get, \
                 list or the events) before retrying it"
            ),
            source,
        },
        other => other,
    }
}

/// Checks a vector against the store's dimension. The first vector ever (or since the
/// vectors were dropped) fixes it and builds the HNSW index (cosine distance, over the
/// vectors cast to that dimension), under the state row's lock, so that two first writers
/// do not both build it. An empty vector is none, and passes.
async fn check_dimension(
    t: &PgTransaction<'_>,
    s: &str,
    tally: &mut Tally,
    vector: &[f32],
) -> Result<()> {
    let dimension = vector.len() as i32;
    if vector.is_empty() {
        return Ok(());
    }
    if tally.dimension.is_none() {
        let current: Option<i32> = t
            .query_one(
                &format!("SELECT dimension FROM {s}.state WHERE id = 1 FOR UPDATE"),
                &[],
            )
            .await
            .map_err(pg_err)?
            .get(0);
        if current.is_none() {
            t.batch_execute(&format!(
                "CREATE INDEX vectors_hnsw ON {s}.vectors \
                 USING hnsw ((embedding::vector({dimension})) vector_cosine_ops); \
                 UPDATE {s}.state SET dimension = {dimension} WHERE id = 1"
            ))
            .await
            .map_err(pg_err)?;
        }
        tally.dimension = Some(current.unwrap_or(dimension));
    }
    match tally.dimension {
        Some(d) if d != dimension => Err(Error::DimensionMismatch {
            expected: d.max(0) as usize,
            actual: vector.len(),
        }),
        _ => Ok(()),
    }
}

/// Fresh values of the project's sequences: `n` vector keys, or row numbers.
async fn next(t: &PgTransaction<'_>, s: &str, sequence: &str, n: usize) -> Result<Vec<i64>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let rows = t
        .query(
            &format!("SELECT nextval('{s}.{sequence}') FROM generate_series(1, $1::bigint)"),
            &[&(n as i64)],
        )
        .await
        .map_err(pg_err)?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Writes consecutive insertions together: one statement per table. 409 when an id is
/// taken (or given twice).
async fn insert_all(
    t: &PgTransaction<'_>,
    s: &str,
    pending: Vec<Pending>,
    tally: &mut Tally,
    out: &mut Committed,
) -> Result<()> {
    if pending.is_empty() {
        return Ok(());
    }
    for p in &pending {
        check_dimension(t, s, tally, &p.vector).await?;
    }
    let n = pending.len();
    let keys = next(t, s, "key_seq", n).await?;
    let seqs = next(t, s, "row_seq", n).await?;
    let mut cols = Columns::with_capacity(n);
    let (mut vector_keys, mut vectors) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for (p, key) in pending.into_iter().zip(&keys) {
        let (length, text, context) = cols.push(&p.record)?;
        tally.count_terms(&text, &context, 1);
        tally.live_rows += 1;
        tally.live_tokens += i64::from(length);
        // An empty vector is none (a store without an embedding model).
        if !p.vector.is_empty() {
            vector_keys.push(*key);
            vectors.push(pgvector::Vector::from(p.vector));
        }
    }
    let inserted = t
        .query(
            &format!(
                "INSERT INTO {s}.memories (id, seq, memory, user_id, agent_id, app_id, run_id, \
                 metadata, categories, immutable, expiration_date, created_at, updated_at, hash, \
                 context, version, vector_key, terms, context_terms, doc_length, valid_from, \
                 valid_until, superseded_by) \
                 SELECT u.id, u.seq, u.memory, u.user_id, u.agent_id, u.app_id, u.run_id, \
                 u.metadata, u.categories, u.immutable, u.expiration_date, u.created_at, \
                 u.updated_at, u.hash, u.context, 1, u.vector_key, \
                 string_to_array(u.terms, E'\\x1f'), string_to_array(u.context_terms, E'\\x1f'), \
                 u.doc_length, u.valid_from, u.valid_until, u.superseded_by \
                 FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[], \
                 $6::text[], $7::text[], $8::text[], $9::jsonb[], $10::boolean[], $11::bigint[], \
                 $12::bigint[], $13::bigint[], $14::text[], $15::text[], $16::bigint[], \
                 $17::text[], $18::text[], $19::integer[], $20::bigint[], $21::bigint[], \
                 $22::uuid[]) AS u (id, seq, memory, user_id, \
                 agent_id, app_id, run_id, metadata, categories, immutable, expiration_date, \
                 created_at, updated_at, hash, context, vector_key, terms, context_terms, \
                 doc_length, valid_from, valid_until, superseded_by) \
                 ORDER BY u.seq ON CONFLICT (id) DO NOTHING RETURNING id"
            ),
            &[
                &cols.id,
                &seqs,
                &cols.memory,
                &cols.user_id,
                &cols.agent_id,
                &cols.app_id,
                &cols.run_id,
                &cols.metadata,
                &cols.categories,
                &cols.immutable,
                &cols.expiration_date,
                &cols.created_at,
                &cols.updated_at,
                &cols.hash,
                &cols.context,
                &keys,
                &cols.terms,
                &cols.context_terms,
                &cols.doc_length,
                &cols.valid_from,
                &cols.valid_until,
                &cols.superseded_by,
            ],
        )
        .await
        .map_err(pg_err)?;
    if inserted.len() != n {
        let written: std::collections::HashSet<Uuid> =
            inserted.iter().map(|r| r.get::<_, Uuid>(0)).collect();
        let taken = cols
            .id
            .iter()
            .find(|id| !written.contains(id))
            .copied()
            .unwrap_or_default();
        return Err(Error::Conflict {
            detail: format!("a memory with id {taken} already exists"),
        });
    }
    if !vectors.is_empty() {
        t.execute(
            &format!(
                "INSERT INTO {s}.vectors (key, embedding) \
                 SELECT * FROM unnest($1::bigint[], $2::vector[])"
            ),
            &[&vector_keys, &vectors],
        )
        .await
        .map_err(pg_err)?;
    }
    for (id, key) in cols.id.iter().zip(&keys) {
        out.rows.push(RowOutcome::inserted(*id, *key as VectorKey));
    }
    Ok(())
}

/// The columns of insertions, one array each, for `unnest`.
struct Columns {
    id: Vec<Uuid>,
    memory: Vec<String>,
    user_id: Vec<Option<String>>,
    agent_id: Vec<Option<String>>,
    app_id: Vec<Option<String>>,
    run_id: Vec<Option<String>>,
    metadata: Vec<String>,
    categories: Vec<serde_json::Value>,
    immutable: Vec<bool>,
    expiration_date: Vec<Option<i64>>,
    created_at: Vec<i64>,
    updated_at: Vec<i64>,
    hash: Vec<String>,
    context: Vec<Option<String>>,
    terms: Vec<String>,
    context_terms: Vec<String>,
    doc_length: Vec<i32>,
    valid_from: Vec<i64>,
    valid_until: Vec<Option<i64>>,
    superseded_by: Vec<Option<Uuid>>,
}

impl Columns {
    fn with_capacity(n: usize) -> Columns {
        Columns {
            id: Vec::with_capacity(n),
            memory: Vec::with_capacity(n),
            user_id: Vec::with_capacity(n),
            agent_id: Vec::with_capacity(n),
            app_id: Vec::with_capacity(n),
            run_id: Vec::with_capacity(n),
            metadata: Vec::with_capacity(n),
            categories: Vec::with_capacity(n),
            immutable: Vec::with_capacity(n),
            expiration_date: Vec::with_capacity(n),
            created_at: Vec::with_capacity(n),
            updated_at: Vec::with_capacity(n),
            hash: Vec::with_capacity(n),
            context: Vec::with_capacity(n),
            terms: Vec::with_capacity(n),
            context_terms: Vec::with_capacity(n),
            doc_length: Vec::with_capacity(n),
            valid_from: Vec::with_capacity(n),
            valid_until: Vec::with_capacity(n),
            superseded_by: Vec::with_capacity(n),
        }
    }

    /// Adds a record; returns its BM25 length and its terms (of its text, of its context).
    fn push(&mut self, r: &MemoryRecord) -> Result<(i32, Vec<String>, Vec<String>)> {
        let terms = text::terms(&r.memory);
        let context_terms = r.context.as_deref().map(text::terms).unwrap_or_default();
        let length = doc_length(&terms, &context_terms, r) as i32;
        self.id.push(r.id);
        self.memory.push(r.memory.clone());
        self.user_id.push(r.owners.user_id.clone());
        self.agent_id.push(r.owners.agent_id.clone());
        self.app_id.push(r.owners.app_id.clone());
        self.run_id.push(r.owners.run_id.clone());
        self.metadata.push(to_text(&r.metadata)?);
        self.categories
            .push(serde_json::to_value(&r.categories).map_err(encode_err)?);
        self.immutable.push(r.immutable);
        self.expiration_date.push(r.expiration_date.map(micros));
        self.created_at.push(micros(r.created_at));
        self.updated_at.push(micros(r.updated_at));
        self.hash.push(r.hash.clone());
        self.context.push(r.context.clone());
        self.terms.push(terms.join(TERM_SEPARATOR));
        self.context_terms.push(context_terms.join(TERM_SEPARATOR));
        self.doc_length.push(length);
        self.valid_from.push(micros(r.valid_from));
        self.valid_until.push(r.valid_until.map(micros));
        self.superseded_by.push(r.superseded_by);
        Ok((length, terms, context_terms))
    }
}

async fn apply(
    t: &PgTransaction<'_>,
    s: &str,
    write: RowWrite,
    tally: &mut Tally,
    out: &mut Committed,
) -> Result<()> {
    match write {
        RowWrite::Replace {
            record,
            vector,
            expect,
        } => {
            let (old_key, version, old_length, old_terms) =
                live_at(t, s, record.id, expect).await?;
            let r = &record;
            let categories = serde_json::to_value(&r.categories).map_err(encode_err)?;
            t.execute(
                &format!(
                    "UPDATE {s}.memories SET metadata = $1, categories = $2, updated_at = $3, \
                     expiration_date = $4, immutable = $5, version = $6, valid_from = $7, \
                     valid_until = $8, superseded_by = $9 WHERE id = $10"
                ),
                &[
                    &to_text(&r.metadata)?,
                    &categories,
                    &micros(r.updated_at),
                    &r.expiration_date.map(micros),
                    &r.immutable,
                    &big(version + 1),
                    &micros(r.valid_from),
                    &r.valid_until.map(micros),
                    &r.superseded_by,
                    &r.id,
                ],
            )
            .await
            .map_err(pg_err)?;
            let (mut retired, mut added) = (None, None);
            if let Some(vector) = vector {
                check_dimension(t, s, tally, &vector).await?;
                let key = next(t, s, "key_seq", 1).await?[0];
                let terms = text::terms(&r.memory);
                let context_terms = r.context.as_deref().map(text::terms).unwrap_or_default();
                let length = doc_length(&terms, &context_terms, r) as i32;
                t.execute(
                    &format!(
                        "UPDATE {s}.memories SET memory = $1, hash = $2, terms = $3, \
                         vector_key = $4, doc_length = $5 WHERE id = $6"
                    ),
                    &[&r.memory, &r.hash, &terms, &key, &length, &r.id],
                )
                .await
                .map_err(pg_err)?;
                t.execute(
                    &format!("DELETE FROM {s}.vectors WHERE key = $1"),
                    &[&old_key],
                )
                .await
                .map_err(pg_err)?;
                if !vector.is_empty() {
                    t.execute(
                        &format!("INSERT INTO {s}.vectors (key, embedding) VALUES ($1, $2)"),
                        &[&key, &pgvector::Vector::from(vector)],
                    )
                    .await
                    .map_err(pg_err)?;
                }
                tally.live_tokens += i64::from(length) - i64::from(old_length);
                tally.count_terms(&old_terms.0, &old_terms.1, -1);
                tally.count_terms(&terms, &old_terms.1, 1);
                (retired, added) = (Some(old_key as VectorKey), Some(key as VectorKey));
            }
            out.rows.push(RowOutcome {
                id: r.id,
                retired,
                added,
                version: version + 1,
            });
        }
        RowWrite::SetVector { id, vector, expect } => {
            let (key, ..) = live_at(t, s, id, expect).await?;
            check_dimension(t, s, tally, &vector).await?;
            if !vector.is_empty() {
                t.execute(
                    &format!(
                        "INSERT INTO {s}.vectors (key, embedding) VALUES ($1, $2) \
                         ON CONFLICT (key) DO UPDATE SET embedding = excluded.embedding"
                    ),
                    &[&key, &pgvector::Vector::from(vector)],
                )
                .await
                .map_err(pg_err)?;
            }
        }
        RowWrite::DropVectors => {
            // Under the state row's lock, as the first vector's writer builds the index.
            // TRUNCATE, not DELETE: the next index is built over an expression of the new
            // dimension, and PostgreSQL indexes deleted rows still visible to an open
            // snapshot, whose old dimension would fail the cast.
            t.batch_execute(&format!(
                "SELECT dimension FROM {s}.state WHERE id = 1 FOR UPDATE; \
                 TRUNCATE {s}.vectors; \
                 DROP INDEX IF EXISTS {s}.vectors_hnsw; \
                 UPDATE {s}.state SET dimension = NULL WHERE id = 1"
            ))
            .await
            .map_err(pg_err)?;
            tally.dimension = None;
        }
        RowWrite::ExpectMeta { key, value } => {
            // A share lock: a change of the value waits for this transaction, and this one
            // waits for a change under way, then reads its result.
            let actual: Option<String> = t
                .query_opt(
                    &format!("SELECT value FROM {s}.meta WHERE key = $1 FOR SHARE"),
                    &[&key],
                )
                .await
                .map_err(pg_err)?
                .map(|r| r.get(0));
            if actual.as_deref().unwrap_or_default() != value {
                return Err(crate::store::meta_moved(&key, &value, actual.as_deref()));
            }
        }
        RowWrite::Delete { id, at, expect } => {
            let (key, version, length, terms) = live_at(t, s, id, expect).await?;
            tally.count_terms(&terms.0, &terms.1, -1);
            t.execute(
                &format!("UPDATE {s}.memories SET deleted_at = $1, version = $2 WHERE id = $3"),
                &[&micros(at), &big(version + 1), &id],
            )
            .await
            .map_err(pg_err)?;
            t.execute(&format!("DELETE FROM {s}.vectors WHERE key = $1"), &[&key])
                .await
                .map_err(pg_err)?;
            tally.live_rows -= 1;
            tally.live_tokens -= i64::from(length);
            out.rows.push(RowOutcome {
                id,
                retired: Some(key as VectorKey),
                added: None,
                version: version + 1,
            });
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
        // Taken apart by `steps`, never applied one by one.
        RowWrite::Insert { .. } | RowWrite::Log(_) | RowWrite::Credit(_) => {}
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
fn doc_length(terms: &[String], context_terms: &[String], r: &MemoryRecord) -> usize {
    let owners = [
        &r.owners.user_id,
        &r.owners.agent_id,
        &r.owners.app_id,
        &r.owners.run_id,
    ]
    .iter()
    .filter(|o| o.is_some())
    .count();
    terms.len() + context_terms.len() + owners
}

/// The terms of a row's text and of its context.
type RowTerms = (Vec<String>, Vec<String>);

/// A live row's vector key, version, BM25 length and terms, if its version is `expect`
/// (locking it): 404 when the memory is not live, 409 when it moved.
async fn live_at(
    t: &PgTransaction<'_>,
    s: &str,
    id: Uuid,
    expect: u64,
) -> Result<(i64, u64, i32, RowTerms)> {
    let found = t
        .query_opt(
            &format!(
                "SELECT vector_key, version, doc_length, terms, context_terms FROM {s}.memories \
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
    Ok((r.get(0), version, r.get(2), (r.get(3), r.get(4))))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{HistoryEvent, HistoryRecord};
    use crate::store::conformance::{record, t};

    fn insert(text: &str) -> [RowWrite; 2] {
        let record = record(text, "ana", t(0));
        let log = HistoryRecord {
            id: Uuid::new_v4(),
            memory_id: record.id,
            event: HistoryEvent::Add,
            old_memory: None,
            new_memory: Some(text.into()),
            input: Vec::new(),
            owners: record.owners.clone(),
            categories: Vec::new(),
            metadata: serde_json::Map::new(),
            created_at: t(0),
            superseded_by: None,
        };
        [
            RowWrite::Insert {
                record,
                vector: vec![1.0, 0.0],
            },
            RowWrite::Log(log),
        ]
    }

    #[test]
    fn insertions_with_their_log_records_are_one_step() {
        let mut writes: Vec<RowWrite> = ["a", "b", "c"].into_iter().flat_map(insert).collect();
        writes.push(RowWrite::Credit(5));
        writes.push(RowWrite::Meta {
            key: "k".into(),
            value: "v".into(),
        });
        writes.extend(insert("d"));
        let mut tally = Tally::default();
        let steps = steps(writes, &mut tally).unwrap();
        let shape: Vec<String> = steps
            .iter()
            .map(|s| match s {
                Step::Insert(p) => format!("insert {}", p.len()),
                Step::Apply(w) if matches!(**w, RowWrite::Meta { .. }) => "meta".into(),
                Step::Apply(_) => "other".into(),
            })
            .collect();
        assert_eq!(shape, ["insert 3", "meta", "insert 1"]);
        assert_eq!(tally.logs.len(), 4);
        assert_eq!(tally.credits_added, 5);
    }
}
