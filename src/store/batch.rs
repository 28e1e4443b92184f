//! The rules of every write, once: a [`WriteBatch`] of domain writes becomes one
//! [`Transaction`] of conditional row writes, with its change-log records and its charge.
//!
//! - An insert writes the memory at version 1 and an ADD record (a restored memory: its
//!   history as it was, and its feedback).
//! - An update reads the memory, refuses an immutable one (409), writes the new record at
//!   the version it read, and an UPDATE record with the old text.
//! - A delete writes a DELETE record; a bulk delete reads every live match and deletes each.
//! - A supersession keeps the memory and its text, ends its validity (`valid_until`, and the
//!   memory that superseded it) and writes a SUPERSEDE record; a restore makes it current
//!   again and writes a RESTORE record. An immutable memory refuses both (409).
//! - Feedback and configuration changes write a FEEDBACK or CONFIG record with the old and
//!   new values.
//!
//! Each memory write carries the version it was built from, checked by the store inside
//! the transaction. A write that names its version (a plan reconciled against what it read)
//! fails with 409 when the memory moved; one that does not is rebuilt from a fresh read and
//! retried, so that concurrent direct updates apply in turn and never lose a field.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{Committed, Feedback, Row, RowWrite, Scan, Store, Transaction, VectorKey};
use crate::error::{Error, Result};
use crate::filter::Filter;
use crate::record::{content_hash, HistoryEvent, HistoryRecord, MemoryRecord, Message, Owners};

/// How many times a batch whose rows moved under it is rebuilt from a fresh read.
const RETRIES: usize = 8;

/// A memory to insert.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NewMemory {
    /// The record (its id must be new).
    pub record: MemoryRecord,
    /// Its unit-length vector.
    pub vector: Vec<f32>,
    /// The input that caused it, for history.
    pub input: Vec<Message>,
    /// A restored memory's history, written as it is instead of a new ADD record.
    pub history: Option<Vec<HistoryRecord>>,
    /// A restored memory's feedback.
    pub feedback: Option<Box<Feedback>>,
}

impl NewMemory {
    /// A memory to insert.
    pub fn new(record: MemoryRecord, vector: Vec<f32>, input: Vec<Message>) -> Self {
        NewMemory {
            record,
            vector,
            input,
            history: None,
            feedback: None,
        }
    }

    /// A memory restored from an export, with its history and feedback as they were.
    pub fn restored(
        record: MemoryRecord,
        vector: Vec<f32>,
        history: Vec<HistoryRecord>,
        feedback: Option<Feedback>,
    ) -> Self {
        NewMemory {
            record,
            vector,
            input: Vec::new(),
            history: Some(history),
            feedback: feedback.map(Box::new),
        }
    }
}

/// A change to a live memory. Fields left `None` keep their value.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MemoryUpdate {
    /// Which memory.
    pub id: Uuid,
    /// New text and its vector (both or neither).
    pub text: Option<(String, Vec<f32>)>,
    /// New caller metadata (replaces it; `core` included).
    pub metadata: Option<Map<String, Value>>,
    /// New categories.
    pub categories: Option<Vec<String>>,
    /// When the change happens.
    pub at: DateTime<Utc>,
    /// The input that caused it, for history.
    pub input: Vec<Message>,
    /// The version the change was decided on: the write fails with 409 if the memory moved
    /// since. `None`: apply it to whatever the memory is when the batch commits.
    pub expect: Option<u64>,
}

impl MemoryUpdate {
    /// An update of `id` at `at` that changes nothing yet.
    pub fn new(id: Uuid, at: DateTime<Utc>) -> Self {
        MemoryUpdate {
            id,
            text: None,
            metadata: None,
            categories: None,
            at,
            input: Vec::new(),
            expect: None,
        }
    }
}

/// One domain write of a batch.
// An insert carries its whole record; a batch holds a few writes per memory written, so
// boxing it would cost an allocation per memory to save bytes nobody keeps.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Write {
    /// Insert a new memory.
    Insert(NewMemory),
    /// Change a live memory. Fails with 404 if it is missing or deleted, 409 if immutable.
    Update(MemoryUpdate),
    /// Soft-delete a live memory. Fails with 404 if it is missing or already deleted.
    Delete {
        /// Which memory.
        id: Uuid,
        /// When.
        at: DateTime<Utc>,
        /// The input that caused it, for history (empty for a direct delete).
        input: Vec<Message>,
        /// The version the deletion was decided on (see [`MemoryUpdate::expect`]).
        expect: Option<u64>,
    },
    /// Soft-delete every live memory (expired included) matching a filter.
    DeleteWhere {
        /// Which memories.
        filter: Filter,
        /// When.
        at: DateTime<Utc>,
    },
    /// Set or clear the feedback on a live memory (404 otherwise), logged as FEEDBACK.
    Feedback(Feedback),
    /// Set a metadata value; with `log`, a CONFIG record of the old and new values too.
    Meta {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// Whether the change is logged (the project's configuration is).
        log: bool,
        /// When.
        at: DateTime<Utc>,
    },
    /// Add to the credit balance (saturating).
    Credit(u64),
    /// Set a live memory's vector under its key, without logging it: the memory embedded
    /// again by a new model (see [`Memory::reembed`](crate::Memory::reembed)). Fails with
    /// 404 if it is missing or deleted, 409 if it moved since version `expect`.
    Vector {
        /// Which memory.
        id: Uuid,
        /// Its unit-length vector.
        vector: Vec<f32>,
        /// The version the vector was computed from.
        expect: u64,
    },
    /// Forget every stored vector (see [`RowWrite::DropVectors`]).
    DropVectors,
    /// End a live, current memory's validity: a later fact (memory `by`) superseded it at
    /// `at`. Its text, vector and history stay. Fails with 404 if it is missing or deleted,
    /// 409 if it is immutable, already superseded, or moved since version `expect`.
    Supersede {
        /// Which memory.
        id: Uuid,
        /// The memory that supersedes it.
        by: Uuid,
        /// When the superseding statement was made: its `valid_until`.
        at: DateTime<Utc>,
        /// The input that caused it, for history.
        input: Vec<Message>,
        /// The version the supersession was decided on (see [`MemoryUpdate::expect`]).
        expect: Option<u64>,
    },
    /// Make a superseded memory current again (`valid_until` and `superseded_by` cleared),
    /// logged as RESTORE at `at`. Fails with 404 if it is missing or deleted, 409 if it is
    /// current.
    Restore {
        /// Which memory.
        id: Uuid,
        /// When.
        at: DateTime<Utc>,
    },
    /// Fail with 409, writing nothing, unless a metadata value is as expected (see
    /// [`RowWrite::ExpectMeta`]).
    ExpectMeta {
        /// The key.
        key: String,
        /// The value it must have (empty: missing).
        value: String,
    },
}

/// Writes applied together, atomically, with their credit charge.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct WriteBatch {
    /// The writes, applied in order.
    pub writes: Vec<Write>,
    /// Credits to charge. If the balance cannot pay, nothing is written (402).
    pub credits: u64,
}

impl WriteBatch {
    /// A batch of writes charging `credits`.
    pub fn new(writes: Vec<Write>, credits: u64) -> Self {
        WriteBatch { writes, credits }
    }
}

/// One memory changed by a batch.
#[derive(Debug, Clone)]
pub struct Change {
    /// What happened.
    pub event: HistoryEvent,
    /// The memory after the change (on DELETE: as it was when deleted).
    pub record: MemoryRecord,
    /// The vector key retired by the change (UPDATE of the text, DELETE).
    pub retired_key: Option<VectorKey>,
    /// The vector key added by the change (ADD, UPDATE of the text).
    pub added_key: Option<VectorKey>,
    /// The memory's version after the change.
    pub version: u64,
}

/// What a batch did.
#[derive(Debug, Clone)]
pub struct WriteOutcome {
    /// The changes of memories, in the order of the writes.
    pub changes: Vec<Change>,
    /// The credit balance after the charge.
    pub credits_remaining: u64,
    /// The cursor of the last change-log record the batch wrote, if any.
    pub cursor: Option<u64>,
    /// The cursor of the first change-log record the batch wrote, if any.
    pub first_cursor: Option<u64>,
}

/// Applies a batch to a store: every rule of every write, in one transaction (see the
/// module docs). Rebuilds and retries a batch whose unversioned writes raced another writer.
pub async fn apply(store: &dyn Store, batch: WriteBatch) -> Result<WriteOutcome> {
    let mut attempt = 0;
    loop {
        let (tx, changes) = plan(store, &batch).await?;
        match store.commit(tx).await {
            Ok(committed) => return Ok(outcome(changes, committed)),
            Err(Error::Conflict { .. }) if attempt + 1 < RETRIES && retryable(&batch) => {
                attempt += 1;
                tracing::debug!(attempt, "a batch raced another writer; rebuilding it");
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether a conflict may be retried: the batch read rows it did not promise to leave
/// unchanged (an update or delete without an expected version, a bulk delete), and none
/// of its writes named the version it expects. (A batch of inserts only is not: a
/// duplicate id stays a duplicate.)
fn retryable(batch: &WriteBatch) -> bool {
    let mut read = false;
    for write in &batch.writes {
        match write {
            Write::Update(MemoryUpdate {
                expect: Some(_), ..
            })
            | Write::Delete {
                expect: Some(_), ..
            } => return false,
            Write::Supersede {
                expect: Some(_), ..
            } => return false,
            Write::Update(_)
            | Write::Delete { .. }
            | Write::DeleteWhere { .. }
            | Write::Supersede { .. }
            | Write::Restore { .. } => read = true,
            _ => {}
        }
    }
    read
}

/// A change in the making: what the outcome reports once the transaction commits.
struct Pending {
    event: HistoryEvent,
    record: MemoryRecord,
}

/// Reads what the batch needs and builds its transaction.
async fn plan(store: &dyn Store, batch: &WriteBatch) -> Result<(Transaction, Vec<Pending>)> {
    let ids: Vec<Uuid> = batch
        .writes
        .iter()
        .filter_map(|w| match w {
            Write::Update(u) => Some(u.id),
            Write::Delete { id, .. } | Write::Supersede { id, .. } | Write::Restore { id, .. } => {
                Some(*id)
            }
            _ => None,
        })
        .collect();
    let mut rows: HashMap<Uuid, Row> = if ids.is_empty() {
        HashMap::new()
    } else {
        store
            .rows(&ids)
            .await?
            .into_iter()
            .map(|r| (r.record.id, r))
            .collect()
    };
    let mut writes = Vec::new();
    let mut changes = Vec::new();
    for write in &batch.writes {
        match write {
            Write::Insert(new) => {
                let r = &new.record;
                writes.push(RowWrite::Insert {
                    record: r.clone(),
                    vector: new.vector.clone(),
                });
                match &new.history {
                    Some(history) => writes.extend(history.iter().cloned().map(RowWrite::Log)),
                    None => writes.push(RowWrite::Log(memory_log(
                        HistoryEvent::Add,
                        None,
                        r,
                        &new.input,
                        r.updated_at,
                    ))),
                }
                if let Some(f) = &new.feedback {
                    writes.push(RowWrite::Feedback((**f).clone()));
                }
                changes.push(Pending {
                    event: HistoryEvent::Add,
                    record: r.clone(),
                });
            }
            Write::Update(update) => {
                let row = live(&rows, update.id)?;
                if row.record.immutable {
                    return Err(immutable_error(update.id));
                }
                let mut record = row.record.clone();
                let old = record.memory.clone();
                let mut vector = None;
                if let Some((text, v)) = &update.text {
                    record.hash = content_hash(text);
                    record.memory = text.clone();
                    vector = Some(v.clone());
                }
                if let Some(m) = &update.metadata {
                    record.metadata = m.clone();
                }
                if let Some(c) = &update.categories {
                    record.categories = c.clone();
                }
                record.updated_at = update.at;
                writes.push(RowWrite::Replace {
                    record: record.clone(),
                    vector,
                    expect: update.expect.unwrap_or(row.version),
                });
                writes.push(RowWrite::Log(memory_log(
                    HistoryEvent::Update,
                    Some(&old),
                    &record,
                    &update.input,
                    update.at,
                )));
                // A later write of the same batch sees this one.
                let next = Row {
                    record: record.clone(),
                    version: row.version + 1,
                    ..row.clone()
                };
                rows.insert(update.id, next);
                changes.push(Pending {
                    event: HistoryEvent::Update,
                    record,
                });
            }
            Write::Delete {
                id,
                at,
                input,
                expect,
            } => {
                let row = live(&rows, *id)?.clone();
                delete(
                    &row,
                    expect.unwrap_or(row.version),
                    *at,
                    input,
                    &mut writes,
                    &mut changes,
                );
                rows.insert(
                    *id,
                    Row {
                        deleted_at: Some(*at),
                        ..row
                    },
                );
            }
            Write::DeleteWhere { filter, at } => {
                let mut scan = Scan::new(filter.clone(), *at, usize::MAX);
                scan.include_expired = true;
                let mut matched = store.scan(&scan).await?.rows;
                // Oldest first, as the rows were written.
                matched.reverse();
                for row in matched {
                    if rows
                        .get(&row.record.id)
                        .is_some_and(|r| r.deleted_at.is_some())
                    {
                        continue;
                    }
                    delete(&row, row.version, *at, &[], &mut writes, &mut changes);
                }
            }
            Write::Feedback(feedback) => {
                let old = store
                    .feedback(&[feedback.memory_id])
                    .await?
                    .pop()
                    .and_then(|f| f.feedback.map(|_| f));
                let mut log = change(
                    HistoryEvent::Feedback,
                    feedback.memory_id,
                    feedback.updated_at.unwrap_or_else(crate::record::now),
                );
                log.old_memory = old.as_ref().map(feedback_json);
                log.new_memory = feedback.feedback.map(|_| feedback_json(feedback));
                writes.push(RowWrite::Feedback(feedback.clone()));
                writes.push(RowWrite::Log(log));
            }
            Write::Meta {
                key,
                value,
                log,
                at,
            } => {
                if *log {
                    let mut record = change(HistoryEvent::Config, Uuid::nil(), *at);
                    record.old_memory = store.meta(key).await?;
                    record.new_memory = Some(value.clone());
                    writes.push(RowWrite::Log(record));
                }
                writes.push(RowWrite::Meta {
                    key: key.clone(),
                    value: value.clone(),
                });
            }
            Write::Credit(amount) => writes.push(RowWrite::Credit(*amount)),
            Write::Vector { id, vector, expect } => writes.push(RowWrite::SetVector {
                id: *id,
                vector: vector.clone(),
                expect: *expect,
            }),
            Write::DropVectors => writes.push(RowWrite::DropVectors),
            Write::Supersede {
                id,
                by,
                at,
                input,
                expect,
            } => {
                let row = live(&rows, *id)?.clone();
                if row.record.immutable {
                    return Err(Error::Conflict {
                        detail: format!("memory {id} is immutable: no later fact supersedes it"),
                    });
                }
                if !row.record.is_current() {
                    let by = row
                        .record
                        .superseded_by
                        .map_or_else(String::new, |other| format!(" by memory {other}"));
                    return Err(Error::Conflict {
                        detail: format!("memory {id} was already superseded{by}; restore it first"),
                    });
                }
                let mut record = row.record.clone();
                record.valid_until = Some(*at);
                record.superseded_by = Some(*by);
                let mut log = memory_log(
                    HistoryEvent::Supersede,
                    Some(&record.memory),
                    &record,
                    input,
                    *at,
                );
                log.superseded_by = Some(*by);
                revise(
                    &mut rows,
                    row,
                    record,
                    *expect,
                    log,
                    &mut writes,
                    &mut changes,
                );
            }
            Write::Restore { id, at } => {
                let row = live(&rows, *id)?.clone();
                if row.record.is_current() {
                    return Err(Error::Conflict {
                        detail: format!(
                            "memory {id} is current: only a superseded memory can be restored"
                        ),
                    });
                }
                let mut record = row.record.clone();
                record.valid_until = None;
                record.superseded_by = None;
                let log = memory_log(
                    HistoryEvent::Restore,
                    Some(&record.memory),
                    &record,
                    &[],
                    *at,
                );
                revise(&mut rows, row, record, None, log, &mut writes, &mut changes);
            }
            Write::ExpectMeta { key, value } => writes.push(RowWrite::ExpectMeta {
                key: key.clone(),
                value: value.clone(),
            }),
        }
    }
    Ok((Transaction::new(writes, batch.credits), changes))
}

/// Writes `record` over `row` (text and vector unchanged) with its change-log record `log`;
/// a later write of the same batch sees it.
fn revise(
    rows: &mut HashMap<Uuid, Row>,
    row: Row,
    record: MemoryRecord,
    expect: Option<u64>,
    log: HistoryRecord,
    writes: &mut Vec<RowWrite>,
    changes: &mut Vec<Pending>,
) {
    writes.push(RowWrite::Replace {
        record: record.clone(),
        vector: None,
        expect: expect.unwrap_or(row.version),
    });
    changes.push(Pending {
        event: log.event,
        record: record.clone(),
    });
    writes.push(RowWrite::Log(log));
    rows.insert(
        record.id,
        Row {
            record,
            version: row.version + 1,
            ..row
        },
    );
}

fn delete(
    row: &Row,
    expect: u64,
    at: DateTime<Utc>,
    input: &[Message],
    writes: &mut Vec<RowWrite>,
    changes: &mut Vec<Pending>,
) {
    let r = &row.record;
    writes.push(RowWrite::Delete {
        id: r.id,
        at,
        expect,
    });
    writes.push(RowWrite::Log(memory_log(
        HistoryEvent::Delete,
        Some(&r.memory),
        r,
        input,
        at,
    )));
    changes.push(Pending {
        event: HistoryEvent::Delete,
        record: r.clone(),
    });
}

/// The live row of a memory, or a 404.
fn live(rows: &HashMap<Uuid, Row>, id: Uuid) -> Result<&Row> {
    rows.get(&id)
        .filter(|r| r.deleted_at.is_none())
        .ok_or(Error::NotFound { id })
}

fn outcome(changes: Vec<Pending>, committed: Committed) -> WriteOutcome {
    WriteOutcome {
        changes: changes
            .into_iter()
            .zip(committed.rows)
            .map(|(p, row)| Change {
                event: p.event,
                record: p.record,
                retired_key: row.retired,
                added_key: row.added,
                version: row.version,
            })
            .collect(),
        credits_remaining: committed.credits,
        cursor: committed.cursors.last().copied(),
        first_cursor: committed.cursors.first().copied(),
    }
}

/// The feedback as a change-log value.
fn feedback_json(f: &Feedback) -> String {
    serde_json::json!({
        "feedback": f.feedback,
        "feedback_reason": f.feedback_reason,
    })
    .to_string()
}

/// The change-log record of a memory's change.
fn memory_log(
    event: HistoryEvent,
    old: Option<&str>,
    record: &MemoryRecord,
    input: &[Message],
    at: DateTime<Utc>,
) -> HistoryRecord {
    HistoryRecord {
        id: Uuid::now_v7(),
        memory_id: record.id,
        event,
        old_memory: old.map(str::to_owned),
        new_memory: (event != HistoryEvent::Delete).then(|| record.memory.clone()),
        input: input.to_vec(),
        owners: record.owners.clone(),
        categories: record.categories.clone(),
        metadata: record.metadata.clone(),
        created_at: at,
        superseded_by: None,
    }
}

/// A change-log record of `event` about `memory_id` (the nil id: the project), with no
/// values yet.
fn change(event: HistoryEvent, memory_id: Uuid, at: DateTime<Utc>) -> HistoryRecord {
    HistoryRecord {
        id: Uuid::now_v7(),
        memory_id,
        event,
        old_memory: None,
        new_memory: None,
        input: Vec::new(),
        owners: Owners::default(),
        categories: Vec::new(),
        metadata: serde_json::Map::new(),
        created_at: at,
        superseded_by: None,
    }
}

/// The 409 for changing an immutable memory.
pub(crate) fn immutable_error(id: Uuid) -> Error {
    Error::Conflict {
        detail: format!(
            "memory {id} is immutable and cannot be updated; delete it and add a new one instead"
        ),
    }
}

/// The owner part of a bulk-delete filter: every given owner id must match.
pub(crate) fn owner_filter(owners: &Owners) -> Filter {
    let mut parts = Vec::new();
    if let Some(u) = &owners.user_id {
        parts.push(Filter::user(u.clone()));
    }
    if let Some(a) = &owners.agent_id {
        parts.push(Filter::agent(a.clone()));
    }
    if let Some(a) = &owners.app_id {
        parts.push(Filter::app(a.clone()));
    }
    if let Some(r) = &owners.run_id {
        parts.push(Filter::run(r.clone()));
    }
    Filter::And(parts)
}
