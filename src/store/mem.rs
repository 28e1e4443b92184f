//! A small in-memory store: the reference implementation of the [`Store`] primitives.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use uuid::Uuid;

use super::{
    Among, Committed, Counters, Entity, EntityKind, EntityQuery, Feedback, LogQuery, Row,
    RowOutcome, RowWrite, Scan, ScanCursor, ScanPage, Store, StoredVector, Transaction, VectorKey,
    VectorQuery, DEFAULT_CREDITS,
};
use crate::error::{Error, Result};
use crate::record::HistoryRecord;

/// A store that keeps everything in process memory and forgets it when dropped.
///
/// It is deliberately simple (every commit copies the state, every read scans it) so that
/// it can serve as the reference the SQLite store is checked against, and as an example of
/// implementing [`Store`]. It keeps no keyword index: keyword search reads its rows
/// ([`rank_rows`](super::keyword::rank_rows)). Use [`SqliteStore`](super::SqliteStore) for
/// real work.
#[derive(Debug)]
pub struct MemStore {
    state: Mutex<State>,
}

#[derive(Debug, Clone)]
struct State {
    /// Rows in insertion order; a row's `seq` is its position plus one.
    rows: Vec<Row>,
    vectors: Vec<Vec<f32>>,
    by_id: HashMap<Uuid, usize>,
    log: Vec<HistoryRecord>,
    meta: HashMap<String, String>,
    feedback: HashMap<Uuid, Feedback>,
    credits: u64,
    max_key: VectorKey,
}

impl Default for MemStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemStore {
    /// An empty store with the default credit balance.
    pub fn new() -> Self {
        MemStore {
            state: Mutex::new(State {
                rows: Vec::new(),
                vectors: Vec::new(),
                by_id: HashMap::new(),
                log: Vec::new(),
                feedback: HashMap::new(),
                meta: HashMap::new(),
                credits: DEFAULT_CREDITS,
                max_key: 0,
            }),
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| Error::internal("in-memory store lock poisoned"))
    }
}

impl State {
    /// The position of a live row at version `expect`: 404 when not live, 409 when moved.
    fn live_at(&self, id: Uuid, expect: u64) -> Result<usize> {
        let i = self
            .by_id
            .get(&id)
            .copied()
            .filter(|&i| self.rows.get(i).is_some_and(|r| r.deleted_at.is_none()))
            .ok_or(Error::NotFound { id })?;
        if self.rows[i].version != expect {
            return Err(moved(id));
        }
        Ok(i)
    }

    fn write(&mut self, write: RowWrite, out: &mut Committed) -> Result<()> {
        match write {
            RowWrite::Insert { record, vector } => {
                if self.by_id.contains_key(&record.id) {
                    return Err(Error::Conflict {
                        detail: format!("a memory with id {} already exists", record.id),
                    });
                }
                self.max_key += 1;
                let id = record.id;
                let seq = self.rows.len() as u64 + 1;
                self.by_id.insert(id, self.rows.len());
                self.rows.push(Row::new(record, self.max_key, 1, seq, None));
                self.vectors.push(vector);
                out.rows.push(RowOutcome::inserted(id, self.max_key));
            }
            RowWrite::Replace {
                record,
                vector,
                expect,
            } => {
                let i = self.live_at(record.id, expect)?;
                let mut retired = None;
                let mut added = None;
                if let Some(v) = vector {
                    self.max_key += 1;
                    retired = Some(self.rows[i].key);
                    added = Some(self.max_key);
                    self.rows[i].key = self.max_key;
                    self.vectors[i] = v;
                }
                let row = &mut self.rows[i];
                row.record = record;
                row.version += 1;
                out.rows.push(RowOutcome {
                    id: row.record.id,
                    retired,
                    added,
                    version: row.version,
                });
            }
            RowWrite::SetVector { id, vector, expect } => {
                let i = self.live_at(id, expect)?;
                self.vectors[i] = vector;
            }
            RowWrite::DropVectors => self.vectors.iter_mut().for_each(Vec::clear),
            RowWrite::ExpectMeta { key, value } => {
                let actual = self.meta.get(&key).map(String::as_str);
                if actual.unwrap_or_default() != value {
                    return Err(super::meta_moved(&key, &value, actual));
                }
            }
            RowWrite::Delete { id, at, expect } => {
                let i = self.live_at(id, expect)?;
                let row = &mut self.rows[i];
                row.deleted_at = Some(at);
                row.version += 1;
                out.rows.push(RowOutcome {
                    id,
                    retired: Some(row.key),
                    added: None,
                    version: row.version,
                });
            }
            RowWrite::Log(record) => {
                self.log.push(record);
                out.cursors.push(self.log.len() as u64);
            }
            RowWrite::Feedback(feedback) => {
                let id = feedback.memory_id;
                let live = self
                    .by_id
                    .get(&id)
                    .is_some_and(|&i| self.rows[i].deleted_at.is_none());
                if !live {
                    return Err(Error::NotFound { id });
                }
                self.feedback.insert(id, feedback);
            }
            RowWrite::Meta { key, value } => {
                self.meta.insert(key, value);
            }
            RowWrite::Credit(amount) => self.credits = self.credits.saturating_add(amount),
        }
        Ok(())
    }
}

/// The 409 of a write whose row moved since it was read.
fn moved(id: uuid::Uuid) -> Error {
    Error::Conflict {
        detail: format!(
            "memory {id} was changed by another writer while this change was being prepared; \
             nothing was written: retry"
        ),
    }
}

#[async_trait]
impl Store for MemStore {
    async fn commit(&self, tx: Transaction) -> Result<Committed> {
        let mut state = self.lock()?;
        if state.credits < tx.charge {
            return Err(Error::InsufficientCredits {
                needed: tx.charge,
                remaining: state.credits,
            });
        }
        // Work on a copy so that a failing write leaves the store untouched.
        let mut next = state.clone();
        next.credits -= tx.charge;
        let mut out = Committed::default();
        for write in tx.writes {
            next.write(write, &mut out)?;
        }
        out.credits = next.credits;
        *state = next;
        Ok(out)
    }

    async fn rows(&self, ids: &[Uuid]) -> Result<Vec<Row>> {
        let state = self.lock()?;
        Ok(ids
            .iter()
            .filter_map(|id| state.rows.get(*state.by_id.get(id)?).cloned())
            .collect())
    }

    async fn rows_by_key(&self, keys: &[VectorKey]) -> Result<Vec<Row>> {
        let state = self.lock()?;
        let wanted: std::collections::HashSet<_> = keys.iter().collect();
        Ok(state
            .rows
            .iter()
            .filter(|r| r.deleted_at.is_none() && wanted.contains(&r.key))
            .cloned()
            .collect())
    }

    async fn scan(&self, scan: &Scan) -> Result<ScanPage> {
        let state = self.lock()?;
        let mut matching: Vec<&Row> = state
            .rows
            .iter()
            .filter(|r| r.visible(scan.now, scan.include_expired) && scan.filter.matches(&r.record))
            .collect();
        matching.sort_by_key(|r| std::cmp::Reverse(ScanCursor::of(r)));
        let count = matching.len() as u64;
        let page: Vec<Row> = matching
            .into_iter()
            .filter(|r| scan.after.is_none_or(|after| after.precedes(r)))
            .take(scan.limit.saturating_add(1))
            .cloned()
            .collect();
        Ok(ScanPage::cut(page, scan.limit, count))
    }

    async fn keys(&self, among: Among<'_>) -> Result<Vec<VectorKey>> {
        let state = self.lock()?;
        let mut keys: Vec<VectorKey> = state
            .rows
            .iter()
            .filter(|r| {
                r.visible(among.now, among.include_expired) && among.filter.matches(&r.record)
            })
            .map(|r| r.key)
            .collect();
        keys.sort_unstable();
        Ok(keys)
    }

    async fn vectors(&self, query: VectorQuery<'_>) -> Result<Vec<StoredVector>> {
        let state = self.lock()?;
        let stored = |i: usize| {
            let row = &state.rows[i];
            StoredVector {
                key: row.key,
                id: row.record.id,
                vector: state.vectors[i].clone(),
                expires_at: super::leaves_current(&row.record),
                owners: row.record.owners.clone(),
            }
        };
        // Live rows with a vector (a memory of a store without an embedding model has none).
        let embedded =
            |i: &usize| state.rows[*i].deleted_at.is_none() && !state.vectors[*i].is_empty();
        Ok(match query {
            VectorQuery::After { key, limit } => {
                let mut live: Vec<usize> = (0..state.rows.len())
                    .filter(|i| embedded(i) && state.rows[*i].key > key)
                    .collect();
                live.sort_unstable_by_key(|&i| state.rows[i].key);
                live.into_iter().take(limit).map(stored).collect()
            }
            VectorQuery::Of(ids) => ids
                .iter()
                .filter_map(|id| state.by_id.get(id).copied())
                .filter(embedded)
                .map(stored)
                .collect(),
        })
    }

    async fn log(&self, query: LogQuery) -> Result<Vec<(u64, HistoryRecord)>> {
        let state = self.lock()?;
        let start = usize::try_from(query.after).unwrap_or(usize::MAX);
        Ok(state
            .log
            .iter()
            .enumerate()
            .skip(start)
            .filter(|(_, r)| query.memory.is_none_or(|id| r.memory_id == id))
            .take(query.limit)
            .map(|(i, r)| (i as u64 + 1, r.clone()))
            .collect())
    }

    async fn entities(&self, query: EntityQuery) -> Result<Vec<Entity>> {
        let EntityQuery { kind, after, limit } = query;
        let state = self.lock()?;
        let mut all: BTreeMap<(EntityKind, String), Entity> = BTreeMap::new();
        for row in state.rows.iter().filter(|r| r.deleted_at.is_none()) {
            let r = &row.record;
            for k in EntityKind::ALL {
                if kind.is_some_and(|want| want != k) {
                    continue;
                }
                let Some(id) = k.of(&r.owners) else { continue };
                let e = all.entry((k, id.to_string())).or_insert_with(|| Entity {
                    id: id.to_string(),
                    kind: k,
                    memory_count: 0,
                    created_at: r.created_at,
                    updated_at: r.updated_at,
                });
                e.memory_count += 1;
                e.created_at = e.created_at.min(r.created_at);
                e.updated_at = e.updated_at.max(r.updated_at);
            }
        }
        Ok(all
            .into_iter()
            .filter(|(key, _)| after.as_ref().is_none_or(|a| key > a))
            .map(|(_, e)| e)
            .take(limit)
            .collect())
    }

    async fn feedback(&self, ids: &[Uuid]) -> Result<Vec<Feedback>> {
        let state = self.lock()?;
        Ok(ids
            .iter()
            .filter_map(|id| state.feedback.get(id).cloned())
            .collect())
    }

    async fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(self.lock()?.meta.get(key).cloned())
    }

    async fn counters(&self) -> Result<Counters> {
        let state = self.lock()?;
        Ok(Counters {
            credits: state.credits,
            max_key: state.max_key,
            negative_feedback: state
                .feedback
                .values()
                .filter(|f| f.feedback.is_some_and(|k| k.is_negative()))
                .count() as u64,
            last_cursor: state.log.len() as u64,
        })
    }
}
