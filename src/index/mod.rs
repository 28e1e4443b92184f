//! The in-process vector index: an HNSW graph (hnsw_rs) derived from the store.
//!
//! The store is the source of truth; this index only speeds up ranking. Its invariants:
//!
//! - **Freshness.** The index reflects the store up to a change-log cursor. Before every
//!   read (`VectorIndex::refresh`) it asks the store for a cheap change token
//!   and, when the token moved, replays the change log after its cursor: each memory named
//!   there is read as it is now (its live vector, or none) and the index made to match. So
//!   writes by any handle or process on the same store are seen by the next search, and a
//!   commit through this engine reaches the index by the same path. Replaying a memory is
//!   idempotent (the state read is the newest), so a cursor that lags only costs work.
//! - **Vectors.** The graph holds int8-quantized copies (they only steer the walk); the exact
//!   f32 vectors of live memories sit in an arena: those of the loaded generation mapped
//!   from its state file (the kernel pages them in as searches read them), those written
//!   since in the heap. Exact searches rank from the arena, and graph hits are re-ranked
//!   from it, so every score is an exact cosine. Memory: about 0.4 KB of graph data per
//!   memory at 384 dimensions plus the graph's links, in the heap; 1.5 KB of exact vector,
//!   mapped (or in the heap until the next save).
//! - **Liveness.** hnsw_rs cannot remove points. Retired keys (deleted or superseded
//!   memories) stay in the graph but are masked by a bitset, and every result is checked
//!   against the store again before it is returned.
//! - **Persistence.** Saving writes a new generation directory (graph, data, a state file
//!   with every live memory's key, id, expiry and exact vector, and a manifest with their
//!   checksums and the cursor), then atomically points `CURRENT` at it. On open, a
//!   generation whose state file, store id, dimension or parameters do not match is not
//!   loaded: the index is rebuilt from the store (a graph whose files fail their checksums
//!   is rebuilt from the state's vectors). A sound one is opened from its state file
//!   and the change log since its cursor, without a pass over the store; its graph loads on
//!   a thread of its own (hnsw_rs rebuilds every point and link, 12 to 22 s at a million
//!   memories), and until it is in, every search ranks exactly from the arena. Generations
//!   saved before state files existed are opened as before: graph loaded, state read from
//!   the store.

mod graph;
mod live;
mod loading;
mod mapped;
mod owners;
mod params;
mod persist;
mod rank;
mod statefile;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use uuid::Uuid;

use crate::error::{Error, Result};
use crate::progress::{report, OnProgress, Task};
use crate::store::{Store, StoredVector, VectorKey, VectorQuery, WriteOutcome};

use graph::{insert_into, new_graph, pairs, GraphHolder};
use live::State;
pub use params::IndexParams;
use persist::Contents;

/// The vector index. See the module docs for its invariants. Where both locks are held,
/// `graph` is taken before `state`.
pub(crate) struct VectorIndex {
    dimension: usize,
    params: IndexParams,
    graph: RwLock<GraphHolder>,
    state: RwLock<State>,
    dir: Option<PathBuf>,
    store_id: String,
    /// The store's change token when the index last caught up.
    token: Mutex<Option<u64>>,
    /// One catch-up (or rebuild) at a time.
    refreshing: tokio::sync::Mutex<()>,
    /// Held while points go into the graph and the state, while the graph is saved, and
    /// while a loaded graph is swapped in, so that none of them sees half of another.
    inserting: Mutex<()>,
    /// Whether no graph load is under way (see [`VectorIndex::wait_for_graph`]).
    graph_settled: Mutex<bool>,
    graph_settled_cv: Condvar,
}

const CATCH_UP_CHUNK: usize = 4096;

/// The store's live vectors in key order, a chunk at a time, each checked for the index's
/// dimension. Asking for a chunk reports the keys before it as done, and the end as all
/// done.
struct Chunks<'a> {
    /// The last key read.
    after: VectorKey,
    progress: Option<&'a OnProgress>,
    /// The store's highest key when the pass began.
    total: VectorKey,
}

impl<'a> Chunks<'a> {
    fn new(progress: Option<&'a OnProgress>, total: VectorKey) -> Self {
        Chunks {
            after: 0,
            progress,
            total,
        }
    }

    async fn next(
        &mut self,
        index: &VectorIndex,
        store: &dyn Store,
    ) -> Result<Option<Vec<StoredVector>>> {
        if self.after < self.total {
            report(self.progress, Task::RebuildIndex, self.after, self.total);
        }
        let chunk = store
            .vectors(VectorQuery::After {
                key: self.after,
                limit: CATCH_UP_CHUNK,
            })
            .await?;
        let Some(last) = chunk.last().map(|v| v.key) else {
            report(self.progress, Task::RebuildIndex, self.total, self.total);
            return Ok(None);
        };
        index.check_dimensions(chunk.iter().map(|v| (v.key, v.vector.as_slice())))?;
        self.after = last;
        Ok(Some(chunk))
    }
}

/// Runs CPU-heavy index work on tokio's blocking pool.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::internal(format!("index task failed: {e}")))?
}

fn read_lock<T>(l: &RwLock<T>) -> Result<RwLockReadGuard<'_, T>> {
    l.read()
        .map_err(|_| Error::internal("vector index lock poisoned"))
}

fn write_lock<T>(l: &RwLock<T>) -> Result<RwLockWriteGuard<'_, T>> {
    l.write()
        .map_err(|_| Error::internal("vector index lock poisoned"))
}

fn mutex<T>(l: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    l.lock()
        .map_err(|_| Error::internal("vector index lock poisoned"))
}

impl VectorIndex {
    /// Opens the index for a store: loads the saved generation if it is sound, otherwise
    /// rebuilds from the store; then catches up and loads liveness.
    pub(crate) async fn open(
        store: &dyn Store,
        dimension: usize,
        params: IndexParams,
        dir: Option<PathBuf>,
        store_id: String,
        progress: Option<&OnProgress>,
    ) -> Result<Arc<VectorIndex>> {
        let counters = store.counters().await?;
        let store_max = counters.max_key;
        let loaded = match &dir {
            Some(d) => {
                let d = d.clone();
                let (id, p) = (store_id.clone(), params);
                tokio::task::spawn_blocking(move || persist::load(&d, &id, dimension, &p))
                    .await
                    .map_err(|e| Error::internal(format!("index load task failed: {e}")))?
            }
            None => None,
        };
        // An index that has seen keys the store never issued belongs to another history of
        // the store (a restored backup, say): it cannot be trusted.
        let loaded = loaded.filter(|l| l.max_key <= store_max && l.cursor <= counters.last_cursor);
        let opened = loaded.and_then(|l| {
            let state = State {
                max_key: l.max_key,
                points: l.points,
                cursor: l.cursor,
                ..State::default()
            };
            match l.contents {
                Contents::State(saved, check, files) => {
                    let state = loading::restore(state, saved);
                    // The vectors' checksum was summed beside the restore: a file that fails
                    // it is given up and the index rebuilt from the store, as one that
                    // failed before.
                    match check.wait() {
                        Ok(()) => Some((GraphHolder::Loading, state, Some(files), false)),
                        Err(e) => {
                            files.reject_state(&e);
                            None
                        }
                    }
                }
                Contents::Graph(graph) => Some((graph, state, None, true)),
            }
        });
        let (graph, state, pending, check_graph) = opened.unwrap_or_else(|| {
            (
                GraphHolder::Fresh(new_graph(&params, 0)),
                State::default(),
                None,
                false,
            )
        });
        let from_state = pending.is_some();
        let index = Arc::new(VectorIndex {
            dimension,
            params,
            graph: RwLock::new(graph),
            state: RwLock::new(state),
            dir,
            store_id,
            token: Mutex::new(None),
            refreshing: tokio::sync::Mutex::new(()),
            inserting: Mutex::new(()),
            graph_settled: Mutex::new(pending.is_none()),
            graph_settled_cv: Condvar::new(),
        });
        if let Some(files) = pending {
            // The graph loads in the background; the state is complete already, so
            // searches rank exactly until it is in.
            index.load_graph_in_background(files);
        }
        if from_state {
            // Only what changed since the save.
            let _one = index.refreshing.lock().await;
            index.catch_up(store).await?;
        } else {
            index.sync_with_store(store, progress).await?;
        }
        if check_graph {
            // A saved graph lacking live vectors it should hold gets them from the arena,
            // which the pass above filled from the store.
            let _inserting = mutex(&index.inserting)?;
            let added = index.insert_missing(&*read_lock(&index.graph)?)?;
            if added > 0 {
                tracing::warn!(added, "vector index lacked live vectors; inserted them");
                let mut s = write_lock(&index.state)?;
                s.points += added;
                s.unsaved += added;
            }
        }
        Ok(index)
    }

    /// One pass over the store's live vectors: every one is marked live and goes into the
    /// arena, and those above the graph's `max_key` (written after its last save) into the
    /// graph too.
    ///
    /// The index's cursor becomes the change log's last cursor read before the pass: what
    /// other writers commit during the pass is replayed by the next refresh.
    async fn sync_with_store(
        self: &Arc<Self>,
        store: &dyn Store,
        progress: Option<&OnProgress>,
    ) -> Result<()> {
        let counters = store.counters().await?;
        let cursor = counters.last_cursor;
        let graph_max = {
            let mut s = write_lock(&self.state)?;
            s.bits.clear();
            s.expiring.clear();
            s.ids.clear();
            s.live = 0;
            s.max_key
        };
        let mut chunks = Chunks::new(progress, counters.max_key);
        while let Some(chunk) = chunks.next(self, store).await? {
            let new: Vec<(VectorKey, Vec<f32>)> = chunk
                .iter()
                .filter(|v| v.key > graph_max)
                .map(|v| (v.key, v.vector.clone()))
                .collect();
            let new = if new.is_empty() {
                new
            } else {
                let this = Arc::clone(self);
                blocking(move || {
                    read_lock(&this.graph)?.with(|g| insert_into(g, pairs(&new)));
                    Ok(new)
                })
                .await?
            };
            let mut s = write_lock(&self.state)?;
            for v in &chunk {
                s.hold(v);
            }
            s.points += new.len();
            s.unsaved += new.len();
        }
        write_lock(&self.state)?.cursor = cursor;
        Ok(())
    }

    /// Brings the index up to date with every transaction committed to the store before
    /// the call (see the module docs). Cheap when nothing changed: one change token.
    pub(crate) async fn refresh(self: &Arc<Self>, store: &dyn Store) -> Result<()> {
        let token = store.change_token();
        let current = |index: &Self| -> Result<bool> {
            Ok(token.is_some() && *mutex(&index.token)? == token)
        };
        if current(self)? {
            return Ok(());
        }
        let _one = self.refreshing.lock().await;
        if current(self)? {
            return Ok(());
        }
        self.catch_up(store).await?;
        *mutex(&self.token)? = token;
        Ok(())
    }

    /// Applies a commit made through this engine, whose vectors are at hand: directly,
    /// when the index has seen every change-log record before the commit's first one (no
    /// other writer committed in between), and by catching up through the log otherwise.
    pub(crate) async fn apply_own(
        self: &Arc<Self>,
        store: &dyn Store,
        outcome: &WriteOutcome,
        mut vectors: HashMap<Uuid, Vec<f32>>,
    ) -> Result<()> {
        let (Some(first), Some(last)) = (outcome.first_cursor, outcome.cursor) else {
            // Nothing logged, nothing for the index.
            return Ok(());
        };
        let _one = self.refreshing.lock().await;
        if read_lock(&self.state)?.cursor.checked_add(1) != Some(first) {
            return self.catch_up(store).await;
        }
        let mut retired = Vec::new();
        let mut added = Vec::new();
        let mut expiries = Vec::new();
        for change in &outcome.changes {
            let id = change.record.id;
            let expires_at = crate::store::leaves_current(&change.record);
            retired.extend(change.retired_key.map(|k| (id, k)));
            match change.added_key {
                Some(key) => {
                    let vector = vectors.remove(&id).ok_or_else(|| {
                        Error::internal("a committed vector is missing for the index")
                    })?;
                    added.push(StoredVector {
                        key,
                        id,
                        vector,
                        expires_at,
                        owners: change.record.owners.clone(),
                    });
                }
                None if change.retired_key.is_none() => expiries.push((id, expires_at)),
                None => {}
            }
        }
        self.check_dimensions(added.iter().map(|v| (v.key, v.vector.as_slice())))?;
        self.install(retired, added, expiries).await?;
        write_lock(&self.state)?.cursor = last;
        Ok(())
    }

    /// Replays the change log after the index's cursor. The caller holds `refreshing`.
    async fn catch_up(self: &Arc<Self>, store: &dyn Store) -> Result<()> {
        loop {
            let cursor = read_lock(&self.state)?.cursor;
            let changed = store.changed(cursor, CATCH_UP_CHUNK).await?;
            let Some(&(last, _)) = changed.last() else {
                break;
            };
            let mut ids: Vec<Uuid> = changed.iter().map(|(_, id)| *id).collect();
            ids.sort_unstable();
            ids.dedup();
            self.replay(store, &ids).await?;
            write_lock(&self.state)?.cursor = last;
            if changed.len() < CATCH_UP_CHUNK {
                break;
            }
        }
        Ok(())
    }

    /// Makes the index hold these memories as the store holds them now: the live vector of
    /// each live memory, nothing of a deleted one. The caller holds `refreshing`.
    async fn replay(self: &Arc<Self>, store: &dyn Store, ids: &[Uuid]) -> Result<()> {
        let mut now: HashMap<Uuid, StoredVector> = store
            .vectors(VectorQuery::Of(ids))
            .await?
            .into_iter()
            .map(|v| (v.id, v))
            .collect();
        self.check_dimensions(now.values().map(|v| (v.key, v.vector.as_slice())))?;
        let mut retired = Vec::new();
        let mut added = Vec::new();
        let mut expiries = Vec::new();
        {
            let s = read_lock(&self.state)?;
            for id in ids {
                let held = s.ids.get(id).copied();
                match now.remove(id) {
                    None => retired.extend(held.map(|k| (*id, k))),
                    Some(v) if held == Some(v.key) => expiries.push((*id, v.expires_at)),
                    Some(v) => {
                        retired.extend(held.map(|k| (*id, k)));
                        added.push(v);
                    }
                }
            }
        }
        self.install(retired, added, expiries).await
    }

    /// Retires keys, sets expiries (by memory) and inserts new vectors, in that order.
    async fn install(
        self: &Arc<Self>,
        retired: Vec<(Uuid, VectorKey)>,
        added: Vec<StoredVector>,
        expiries: Vec<(Uuid, Option<i64>)>,
    ) -> Result<()> {
        if added.is_empty() {
            return self.install_now(retired, added, expiries);
        }
        let this = Arc::clone(self);
        blocking(move || this.install_now(retired, added, expiries)).await
    }

    fn install_now(
        &self,
        retired: Vec<(Uuid, VectorKey)>,
        added: Vec<StoredVector>,
        expiries: Vec<(Uuid, Option<i64>)>,
    ) -> Result<()> {
        // New points go into the graph and the state under one hold of `inserting`, so a
        // save or a graph swap sees both or neither. (A graph still loading gets them when
        // it is swapped in.)
        let _inserting = if added.is_empty() {
            None
        } else {
            let inserting = mutex(&self.inserting)?;
            read_lock(&self.graph)?
                .with(|g| insert_into(g, added.iter().map(|v| (v.key, v.vector.as_slice()))));
            Some(inserting)
        };
        let mut s = write_lock(&self.state)?;
        for (id, key) in retired {
            s.clear(key);
            s.ids.remove(&id);
        }
        for (id, expires_at) in expiries {
            if let Some(&key) = s.ids.get(&id) {
                s.set_expiry(key, expires_at);
            }
        }
        s.points += added.len();
        s.unsaved += added.len();
        for v in &added {
            s.hold(v);
        }
        Ok(())
    }

    fn check_dimensions<'v>(
        &self,
        items: impl IntoIterator<Item = (VectorKey, &'v [f32])>,
    ) -> Result<()> {
        match items.into_iter().find(|(_, v)| v.len() != self.dimension) {
            Some((_, v)) => Err(Error::DimensionMismatch {
                expected: self.dimension,
                actual: v.len(),
            }),
            None => Ok(()),
        }
    }

    /// The keys of the memories held by every one of `pins` (owner field and id),
    /// ascending, whether live or not (rankings check liveness).
    pub(crate) fn owner_keys(
        &self,
        pins: &[(crate::filter::OwnerField, &str)],
    ) -> Result<Vec<VectorKey>> {
        Ok(read_lock(&self.state)?.owners.keys(pins))
    }

    /// How many memories held by every one of `pins` are live at `now`, up to `cap`.
    pub(crate) fn count_owned(
        &self,
        pins: &[(crate::filter::OwnerField, &str)],
        now: i64,
        cap: usize,
    ) -> Result<usize> {
        let s = read_lock(&self.state)?;
        Ok(s.owners
            .keys(pins)
            .into_iter()
            .filter(|k| s.is_live(*k, now))
            .take(cap)
            .count())
    }

    /// How many of the index's vectors are live at `now`, at most `cap`: the live keys less
    /// those expired by then (every expiring key is a live one).
    pub(crate) fn count_live(&self, now: i64, cap: usize) -> Result<usize> {
        let s = read_lock(&self.state)?;
        let expired = s.expiring.values().filter(|&&at| at <= now).count();
        Ok(s.live.saturating_sub(expired).min(cap))
    }

    /// The parameters the index was opened with.
    pub(crate) fn params(&self) -> &IndexParams {
        &self.params
    }

    /// Live vectors known to the index (expired ones included).
    pub(crate) fn live_count(&self) -> Result<usize> {
        Ok(read_lock(&self.state)?.live)
    }

    /// Retired points still held by the graph.
    pub(crate) fn dead_count(&self) -> Result<usize> {
        let s = read_lock(&self.state)?;
        Ok(s.points.saturating_sub(s.live))
    }

    /// Points added since the last save.
    pub(crate) fn unsaved(&self) -> Result<usize> {
        Ok(read_lock(&self.state)?.unsaved)
    }

    /// Rebuilds the graph from the store's live vectors, dropping retired points. The new
    /// graph is built aside and swapped in, so searches meanwhile use the old one. The caller
    /// holds the engine's write gate.
    pub(crate) async fn rebuild(
        self: &Arc<Self>,
        store: &dyn Store,
        progress: Option<&OnProgress>,
    ) -> Result<()> {
        // No catch-up meanwhile: it would change the state this one replaces.
        let _one = self.refreshing.lock().await;
        let counters = store.counters().await?;
        let cursor = counters.last_cursor;
        let mut fresh = new_graph(&self.params, self.live_count()?);
        let mut next = State::default();
        let mut chunks = Chunks::new(progress, counters.max_key);
        while let Some(chunk) = chunks.next(self, store).await? {
            let (graph, chunk) = blocking(move || {
                insert_into(&fresh, chunk.iter().map(|v| (v.key, v.vector.as_slice())));
                Ok((fresh, chunk))
            })
            .await?;
            fresh = graph;
            for v in &chunk {
                next.hold(v);
            }
            next.points += chunk.len();
        }
        next.max_key = chunks.after;
        next.cursor = cursor;
        next.unsaved = next.points;
        let _inserting = mutex(&self.inserting)?;
        let mut graph = write_lock(&self.graph)?;
        *graph = GraphHolder::Fresh(fresh);
        *write_lock(&self.state)? = next;
        // Replay what was committed during the rebuild on the next read.
        *mutex(&self.token)? = None;
        Ok(())
    }
}

/// A unit vector of `dim` components, pseudo-random but the same for the same `i`: the
/// index's tests' vectors.
#[cfg(test)]
pub(super) fn unit(i: usize, dim: usize) -> Vec<f32> {
    let mut state = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut v: Vec<f32> = (0..dim)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 1000) as f32 / 500.0 - 1.0
        })
        .collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}
