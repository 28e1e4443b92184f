//! A small in-memory store: the reference implementation of the [`Store`] contract.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{
    history_record, immutable_error, query_keywords, stem_all, stems, Change, Entity, EntityKind,
    Feedback, FeedbackKind, ListPage, ListQuery, LiveKey, Store, VectorKey, Write, WriteBatch,
    WriteOutcome, CONTEXT_WEIGHT, DEFAULT_CREDITS,
};
use crate::error::{Error, Result};
use crate::filter::{micros, Filter};
use crate::record::{content_hash, HistoryEvent, HistoryRecord, MemoryRecord, Message};

/// A store that keeps everything in process memory and forgets it when dropped.
///
/// It is deliberately simple (every write copies the state, every read scans it) so that it
/// can serve as the reference the SQLite store is checked against, and as an example of
/// implementing [`Store`]. Use [`SqliteStore`](super::SqliteStore) for real work.
#[derive(Debug)]
pub struct MemStore {
    state: Mutex<State>,
}

#[derive(Debug, Clone)]
struct State {
    rows: Vec<Row>,
    by_id: HashMap<Uuid, usize>,
    history: Vec<HistoryRecord>,
    meta: HashMap<String, String>,
    feedback: HashMap<Uuid, Feedback>,
    credits: u64,
    max_key: VectorKey,
}

#[derive(Debug, Clone)]
struct Row {
    record: MemoryRecord,
    vector: Vec<f32>,
    key: VectorKey,
    deleted: bool,
}

impl Row {
    fn visible(&self, now: DateTime<Utc>, include_expired: bool) -> bool {
        !self.deleted && (include_expired || !self.record.is_expired_at(now))
    }
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
                by_id: HashMap::new(),
                history: Vec::new(),
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
    fn live_index(&self, id: Uuid) -> Result<usize> {
        self.by_id
            .get(&id)
            .copied()
            .filter(|&i| self.rows.get(i).is_some_and(|r| !r.deleted))
            .ok_or(Error::NotFound { id })
    }

    fn apply(&mut self, write: Write, changes: &mut Vec<Change>) -> Result<()> {
        match write {
            Write::Insert(new) => {
                if self.by_id.contains_key(&new.record.id) {
                    return Err(Error::Conflict {
                        detail: format!("a memory with id {} already exists", new.record.id),
                    });
                }
                self.max_key += 1;
                let key = self.max_key;
                let at = new.record.created_at;
                match &new.history {
                    Some(history) => self.history.extend(history.iter().cloned()),
                    None => self.history.push(history_record(
                        HistoryEvent::Add,
                        None,
                        &new.record,
                        &new.input,
                        at,
                    )),
                }
                if let Some(f) = &new.feedback {
                    self.feedback.insert(f.memory_id, (**f).clone());
                }
                self.by_id.insert(new.record.id, self.rows.len());
                changes.push(Change {
                    event: HistoryEvent::Add,
                    record: new.record.clone(),
                    retired_key: None,
                    added_key: Some(key),
                });
                self.rows.push(Row {
                    record: new.record,
                    vector: new.vector,
                    key,
                    deleted: false,
                });
            }
            Write::Update(update) => {
                let i = self.live_index(update.id)?;
                let next_key = self.max_key + 1;
                let row = self
                    .rows
                    .get_mut(i)
                    .ok_or_else(|| Error::internal("row index out of range"))?;
                if row.record.immutable {
                    return Err(immutable_error(update.id));
                }
                let old = row.record.memory.clone();
                let mut retired = None;
                let mut added = None;
                if let Some((text, vector)) = update.text {
                    row.record.hash = content_hash(&text);
                    row.record.memory = text;
                    row.vector = vector;
                    retired = Some(row.key);
                    row.key = next_key;
                    added = Some(next_key);
                }
                if let Some(m) = update.metadata {
                    row.record.metadata = m;
                }
                if let Some(c) = update.categories {
                    row.record.categories = c;
                }
                row.record.updated_at = update.at;
                let record = row.record.clone();
                if added.is_some() {
                    self.max_key = next_key;
                }
                self.history.push(history_record(
                    HistoryEvent::Update,
                    Some(&old),
                    &record,
                    &update.input,
                    update.at,
                ));
                changes.push(Change {
                    event: HistoryEvent::Update,
                    record,
                    retired_key: retired,
                    added_key: added,
                });
            }
            Write::Delete { id, at, input } => {
                let i = self.live_index(id)?;
                self.delete_row(i, at, &input, changes)?;
            }
            Write::DeleteWhere { filter, at } => {
                let hits: Vec<usize> = self
                    .rows
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| !r.deleted && filter.matches(&r.record))
                    .map(|(i, _)| i)
                    .collect();
                for i in hits {
                    self.delete_row(i, at, &[], changes)?;
                }
            }
        }
        Ok(())
    }

    fn delete_row(
        &mut self,
        i: usize,
        at: DateTime<Utc>,
        input: &[Message],
        changes: &mut Vec<Change>,
    ) -> Result<()> {
        let row = self
            .rows
            .get_mut(i)
            .ok_or_else(|| Error::internal("row index out of range"))?;
        row.deleted = true;
        let record = row.record.clone();
        self.history.push(history_record(
            HistoryEvent::Delete,
            Some(&record.memory),
            &record,
            input,
            at,
        ));
        changes.push(Change {
            event: HistoryEvent::Delete,
            record,
            retired_key: Some(row.key),
            added_key: None,
        });
        Ok(())
    }
}

#[async_trait]
impl Store for MemStore {
    async fn apply(&self, batch: WriteBatch) -> Result<WriteOutcome> {
        let mut state = self.lock()?;
        if state.credits < batch.credits {
            return Err(Error::InsufficientCredits {
                needed: batch.credits,
                remaining: state.credits,
            });
        }
        // Work on a copy so that a failing write leaves the store untouched.
        let mut next = state.clone();
        let mut changes = Vec::new();
        for write in batch.writes {
            next.apply(write, &mut changes)?;
        }
        next.credits -= batch.credits;
        let credits_remaining = next.credits;
        *state = next;
        Ok(WriteOutcome {
            changes,
            credits_remaining,
        })
    }

    async fn get(&self, id: Uuid) -> Result<Option<MemoryRecord>> {
        let state = self.lock()?;
        Ok(state
            .live_index(id)
            .ok()
            .and_then(|i| state.rows.get(i))
            .map(|r| r.record.clone()))
    }

    async fn get_by_keys(&self, keys: &[VectorKey]) -> Result<Vec<(VectorKey, MemoryRecord)>> {
        let state = self.lock()?;
        let wanted: std::collections::HashSet<_> = keys.iter().collect();
        Ok(state
            .rows
            .iter()
            .filter(|r| !r.deleted && wanted.contains(&r.key))
            .map(|r| (r.key, r.record.clone()))
            .collect())
    }

    async fn list(&self, query: ListQuery) -> Result<ListPage> {
        let state = self.lock()?;
        let matching: Vec<(usize, &Row)> = state
            .rows
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, r)| r.visible(query.now, query.include_expired))
            .filter(|(_, r)| query.filter.matches(&r.record))
            .collect();
        let count = matching.len() as u64;
        let mut page: Vec<(usize, &Row)> = matching
            .into_iter()
            .filter(|(i, _)| query.before.is_none_or(|b| (*i as u64) < b))
            .take(query.limit.saturating_add(1))
            .collect();
        let more = page.len() > query.limit;
        page.truncate(query.limit);
        let next = if more {
            page.last().map(|(i, _)| *i as u64)
        } else {
            None
        };
        Ok(ListPage {
            records: page.into_iter().map(|(_, r)| r.record.clone()).collect(),
            next,
            count,
        })
    }

    async fn matching_keys(
        &self,
        filter: &Filter,
        now: DateTime<Utc>,
        include_expired: bool,
    ) -> Result<Vec<VectorKey>> {
        let state = self.lock()?;
        let mut keys: Vec<VectorKey> = state
            .rows
            .iter()
            .filter(|r| r.visible(now, include_expired) && filter.matches(&r.record))
            .map(|r| r.key)
            .collect();
        keys.sort_unstable();
        Ok(keys)
    }

    async fn keyword_search(
        &self,
        query: &str,
        filter: &Filter,
        now: DateTime<Utc>,
        include_expired: bool,
        limit: usize,
    ) -> Result<Vec<(VectorKey, f32)>> {
        // Okapi BM25 as SQLite's FTS5 computes it (k1 = 1.2, b = 0.75, its IDF; a context
        // word counts CONTEXT_WEIGHT of a text word; the length is that of both) over the
        // visible, matching memories, on stemmed words.
        let state = self.lock()?;
        let words: std::collections::HashSet<String> =
            stem_all(query_keywords(query)).into_iter().collect();
        let docs: Vec<(VectorKey, Vec<String>, Vec<String>)> = state
            .rows
            .iter()
            .filter(|r| r.visible(now, include_expired) && filter.matches(&r.record))
            .map(|r| {
                let context = r.record.context.as_deref().map(stems).unwrap_or_default();
                (r.key, stems(&r.record.memory), context)
            })
            .collect();
        if words.is_empty() || docs.is_empty() {
            return Ok(Vec::new());
        }
        let n = docs.len() as f32;
        let avg = docs
            .iter()
            .map(|(_, t, c)| t.len() + c.len())
            .sum::<usize>() as f32
            / n;
        let idf: HashMap<&String, f32> = words
            .iter()
            .map(|w| {
                let with = docs
                    .iter()
                    .filter(|(_, t, c)| t.contains(w) || c.contains(w))
                    .count() as f32;
                (w, ((n - with + 0.5) / (with + 0.5)).ln_1p())
            })
            .collect();
        let count = |doc: &[String], w: &String| doc.iter().filter(|t| *t == w).count() as f32;
        let mut scored: Vec<(VectorKey, f32)> = docs
            .iter()
            .filter_map(|(key, text, context)| {
                let len = (text.len() + context.len()) as f32;
                let score: f32 = words
                    .iter()
                    .map(|w| {
                        let tf = count(text, w) + CONTEXT_WEIGHT * count(context, w);
                        idf.get(w).copied().unwrap_or(0.0) * tf * 2.2
                            / (tf + 1.2 * (0.25 + 0.75 * len / avg.max(1.0)))
                    })
                    .sum();
                (score > 0.0).then_some((*key, score))
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(limit);
        Ok(scored)
    }

    async fn vectors_after(
        &self,
        after: VectorKey,
        limit: usize,
    ) -> Result<Vec<(VectorKey, Vec<f32>)>> {
        let state = self.lock()?;
        let mut out: Vec<(VectorKey, Vec<f32>)> = state
            .rows
            .iter()
            .filter(|r| !r.deleted && r.key > after)
            .map(|r| (r.key, r.vector.clone()))
            .collect();
        out.sort_unstable_by_key(|(k, _)| *k);
        out.truncate(limit);
        Ok(out)
    }

    async fn live_keys(&self) -> Result<Vec<LiveKey>> {
        let state = self.lock()?;
        Ok(state
            .rows
            .iter()
            .filter(|r| !r.deleted)
            .map(|r| LiveKey {
                key: r.key,
                expires_at: r.record.expiration_date.map(micros),
            })
            .collect())
    }

    async fn history(&self, id: Uuid) -> Result<Vec<HistoryRecord>> {
        let state = self.lock()?;
        Ok(state
            .history
            .iter()
            .filter(|h| h.memory_id == id)
            .cloned()
            .collect())
    }

    async fn entities(
        &self,
        kind: Option<EntityKind>,
        after: Option<(EntityKind, String)>,
        limit: usize,
    ) -> Result<Vec<Entity>> {
        let state = self.lock()?;
        let mut all: std::collections::BTreeMap<(EntityKind, String), Entity> =
            std::collections::BTreeMap::new();
        for row in state.rows.iter().filter(|r| !r.deleted) {
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

    async fn vectors_of(&self, ids: &[Uuid]) -> Result<Vec<(Uuid, Vec<f32>)>> {
        let state = self.lock()?;
        Ok(ids
            .iter()
            .filter_map(|id| {
                let row = state.rows.get(*state.by_id.get(id)?)?;
                (!row.deleted).then(|| (*id, row.vector.clone()))
            })
            .collect())
    }

    async fn set_feedback(&self, feedback: Feedback) -> Result<()> {
        let mut state = self.lock()?;
        let live = state
            .by_id
            .get(&feedback.memory_id)
            .is_some_and(|&i| !state.rows[i].deleted);
        if !live {
            return Err(Error::NotFound {
                id: feedback.memory_id,
            });
        }
        state.feedback.insert(feedback.memory_id, feedback);
        Ok(())
    }

    async fn feedback(&self, ids: &[Uuid]) -> Result<Vec<Feedback>> {
        let state = self.lock()?;
        Ok(ids
            .iter()
            .filter_map(|id| state.feedback.get(id).cloned())
            .collect())
    }

    async fn negative_feedback_count(&self) -> Result<u64> {
        let state = self.lock()?;
        Ok(state
            .feedback
            .values()
            .filter(|f| {
                matches!(
                    f.feedback,
                    Some(FeedbackKind::Negative | FeedbackKind::VeryNegative)
                )
            })
            .count() as u64)
    }

    async fn changes_after(&self, cursor: u64, limit: usize) -> Result<Vec<(u64, HistoryRecord)>> {
        let state = self.lock()?;
        let start = usize::try_from(cursor).unwrap_or(usize::MAX);
        Ok(state
            .history
            .iter()
            .enumerate()
            .skip(start)
            .take(limit)
            .map(|(i, h)| (i as u64 + 1, h.clone()))
            .collect())
    }

    async fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(self.lock()?.meta.get(key).cloned())
    }

    async fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.lock()?.meta.insert(key.to_owned(), value.to_owned());
        Ok(())
    }

    async fn credits(&self) -> Result<u64> {
        Ok(self.lock()?.credits)
    }

    async fn add_credits(&self, amount: u64) -> Result<u64> {
        let mut state = self.lock()?;
        state.credits = state.credits.saturating_add(amount);
        Ok(state.credits)
    }

    async fn max_key(&self) -> Result<VectorKey> {
        Ok(self.lock()?.max_key)
    }
}
