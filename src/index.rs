//! The in-process vector index: an HNSW graph (hnsw_rs) derived from the store.
//!
//! The store is the source of truth; this index only speeds up ranking. Its invariants:
//!
//! - **Keys.** Graph points are identified by [`VectorKey`]s. Keys only grow, and the index
//!   inserts them in commit order (the engine holds its write gate across commit and insert),
//!   so "everything up to `max_key`" is a complete description of what the graph holds.
//! - **Vectors.** The graph holds int8-quantized copies (they only steer the walk); the exact
//!   f32 vectors of live memories sit in an in-memory arena, filled from the store on open.
//!   Exact searches rank from the arena, and graph hits are re-ranked from it, so every
//!   score is an exact cosine. Memory: about 1.5 KB (arena) + 0.4 KB (graph data) per
//!   memory at 384 dimensions, plus the graph's links.
//! - **Liveness.** hnsw_rs cannot remove points. Retired keys (deleted or superseded
//!   memories) stay in the graph but are masked by a bitset, and every result is checked
//!   against the store again before it is returned.
//! - **Persistence.** [`VectorIndex::save`] writes a new generation directory (graph, data,
//!   and a manifest with SHA-256 sums), then atomically points `CURRENT` at it. On open, a
//!   generation whose sums, store id, dimension or parameters do not match is not loaded: the
//!   index is rebuilt from the store. A loaded index then catches up on keys written after it
//!   was saved.

use std::collections::HashMap;
use std::io::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use hnsw_rs::api::AnnT;
use hnsw_rs::hnsw::Hnsw;
use hnsw_rs::hnswio::HnswIo;
use hnsw_rs::prelude::Distance;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::embed::dot;
use crate::error::{Error, Result};
use crate::store::{LiveKey, Store, VectorKey};

/// Parameters of the HNSW graph and of the exact-search cut-over.
///
/// ## Defaults
/// - `max_connections` (M): 16. More links per node: better recall, more memory, slower
///   inserts. Must be 4–128.
/// - `ef_construction`: 100. Candidate list size while inserting. Must be at least M and at
///   most 4096.
/// - `ef_search`: 32. Candidate list size while searching (raised to `top_k` when larger).
///   Must be 1–4096. On the benchmark's 100k memories, recall@10 against exact search was
///   0.94 at 16, 0.99 at 32 and 0.998 at 48, and p50 latency grows about 30% from 32 to 48.
///   Searches within `exact_search_max` candidates are exact whatever this is.
/// - `exact_search_max`: 2048. A search whose filters leave at most this many memories ranks
///   them all exactly instead of walking the graph, so that a per-user search never misses a
///   memory because the graph was tuned for the whole collection. Must be at most 1,000,000.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct IndexParams {
    /// Links per node (M).
    pub max_connections: usize,
    /// Candidate list size while inserting.
    pub ef_construction: usize,
    /// Candidate list size while searching.
    pub ef_search: usize,
    /// Largest filtered candidate set ranked exactly.
    pub exact_search_max: usize,
}

impl Default for IndexParams {
    fn default() -> Self {
        IndexParams {
            max_connections: 16,
            ef_construction: 100,
            ef_search: 32,
            exact_search_max: 2048,
        }
    }
}

impl IndexParams {
    /// Sets `max_connections`.
    pub fn max_connections(mut self, m: usize) -> Self {
        self.max_connections = m;
        self
    }

    /// Sets `ef_construction`.
    pub fn ef_construction(mut self, ef: usize) -> Self {
        self.ef_construction = ef;
        self
    }

    /// Sets `ef_search`.
    pub fn ef_search(mut self, ef: usize) -> Self {
        self.ef_search = ef;
        self
    }

    /// Sets `exact_search_max`.
    pub fn exact_search_max(mut self, n: usize) -> Self {
        self.exact_search_max = n;
        self
    }

    /// Checks the bounds documented on the type (hnsw_rs exits the process on some bad
    /// values, so they must never reach it).
    pub fn validate(&self) -> Result<()> {
        if !(4..=128).contains(&self.max_connections) {
            return Err(Error::invalid(format!(
                "index max_connections must be 4–128, got {}",
                self.max_connections
            )));
        }
        if !(self.max_connections..=4096).contains(&self.ef_construction) {
            return Err(Error::invalid(format!(
                "index ef_construction must be between max_connections ({}) and 4096, got {}",
                self.max_connections, self.ef_construction
            )));
        }
        if !(1..=4096).contains(&self.ef_search) {
            return Err(Error::invalid(format!(
                "index ef_search must be 1–4096, got {}",
                self.ef_search
            )));
        }
        if self.exact_search_max > 1_000_000 {
            return Err(Error::invalid(format!(
                "index exact_search_max must be at most 1000000, got {}",
                self.exact_search_max
            )));
        }
        Ok(())
    }
}

/// Scale of the int8 quantization: a unit vector's components lie in [-1, 1], so they map
/// to [-127, 127] without clipping.
const QUANT_SCALE: f32 = 127.0;

/// The graph stores vectors quantized to int8: a quarter of the memory, and of the memory
/// traffic per hop, of f32. Its distances only steer the walk; hits are re-ranked exactly
/// with the f32 vectors of the arena.
pub(crate) fn quantize(v: &[f32]) -> Vec<i8> {
    v.iter()
        .map(|x| (x * QUANT_SCALE).round().clamp(-QUANT_SCALE, QUANT_SCALE) as i8)
        .collect()
}

/// Approximate cosine distance between quantized unit vectors, `1 - dot`, clamped at 0
/// (hnsw_rs asserts on negative distances).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct QuantizedCosine;

impl Distance<i8> for QuantizedCosine {
    fn eval(&self, a: &[i8], b: &[i8]) -> f32 {
        let dot: i32 = a
            .iter()
            .zip(b)
            .map(|(x, y)| i32::from(*x) * i32::from(*y))
            .sum();
        (1.0 - dot as f32 / (QUANT_SCALE * QUANT_SCALE)).max(0.0)
    }
}

type Graph<'a> = Hnsw<'a, i8, QuantizedCosine>;

self_cell::self_cell!(
    /// A graph loaded from disk borrows from its loader.
    struct LoadedGraph {
        owner: HnswIo,
        #[not_covariant]
        dependent: Graph,
    }
);

enum GraphHolder {
    Fresh(Graph<'static>),
    Loaded(LoadedGraph),
}

impl GraphHolder {
    fn with<R>(&self, f: impl for<'a> FnOnce(&Graph<'a>) -> R) -> R {
        match self {
            GraphHolder::Fresh(g) => f(g),
            GraphHolder::Loaded(l) => l.with_dependent(|_, g| f(g)),
        }
    }
}

/// Which keys are live, when they expire, and their vectors.
#[derive(Default)]
struct State {
    bits: Vec<u64>,
    expiring: HashMap<VectorKey, i64>,
    live: usize,
    /// Live vectors, for exact ranking without a trip to the store.
    arena: Arena,
    max_key: VectorKey,
    points: usize,
    unsaved: usize,
}

impl State {
    fn is_live(&self, key: VectorKey, now: i64) -> bool {
        let (word, bit) = ((key / 64) as usize, key % 64);
        self.bits.get(word).is_some_and(|w| w & (1 << bit) != 0)
            && (self.expiring.is_empty() || self.expiring.get(&key).is_none_or(|&at| at > now))
    }

    fn set(&mut self, key: VectorKey, expires_at: Option<i64>) {
        let (word, bit) = ((key / 64) as usize, key % 64);
        if self.bits.len() <= word {
            self.bits.resize(word + 1, 0);
        }
        if let Some(w) = self.bits.get_mut(word) {
            if *w & (1 << bit) == 0 {
                self.live += 1;
            }
            *w |= 1 << bit;
        }
        if let Some(at) = expires_at {
            self.expiring.insert(key, at);
        }
    }

    fn clear(&mut self, key: VectorKey) {
        let (word, bit) = ((key / 64) as usize, key % 64);
        if let Some(w) = self.bits.get_mut(word) {
            if *w & (1 << bit) != 0 {
                self.live -= 1;
            }
            *w &= !(1 << bit);
        }
        self.expiring.remove(&key);
        self.arena.remove(key);
    }

    /// Graph points a search may have to skip: retired, or live but expiring.
    fn masked(&self) -> usize {
        self.points.saturating_sub(self.live) + self.expiring.len()
    }
}

/// Vectors in one flat buffer, slot per key; freed slots are reused.
#[derive(Default)]
struct Arena {
    dimension: usize,
    slots: HashMap<VectorKey, usize>,
    data: Vec<f32>,
    free: Vec<usize>,
}

impl Arena {
    fn insert(&mut self, key: VectorKey, v: &[f32]) {
        self.dimension = v.len();
        let slot = match self.slots.get(&key) {
            Some(&slot) => slot,
            None => {
                let slot = self.free.pop().unwrap_or(self.data.len() / v.len().max(1));
                self.slots.insert(key, slot);
                slot
            }
        };
        let at = slot * v.len();
        if self.data.len() < at + v.len() {
            self.data.resize(at + v.len(), 0.0);
        }
        if let Some(dst) = self.data.get_mut(at..at + v.len()) {
            dst.copy_from_slice(v);
        }
    }

    fn remove(&mut self, key: VectorKey) {
        if let Some(slot) = self.slots.remove(&key) {
            self.free.push(slot);
        }
    }

    fn get(&self, key: VectorKey) -> Option<&[f32]> {
        let slot = *self.slots.get(&key)?;
        self.data
            .get(slot * self.dimension..(slot + 1) * self.dimension)
    }
}

/// The vector index. See the module docs for its invariants. Where both locks are held,
/// `graph` is taken before `state`.
pub(crate) struct VectorIndex {
    dimension: usize,
    params: IndexParams,
    graph: RwLock<GraphHolder>,
    state: RwLock<State>,
    dir: Option<PathBuf>,
    store_id: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: u32,
    store_id: String,
    dimension: usize,
    max_connections: usize,
    ef_construction: usize,
    max_key: VectorKey,
    points: usize,
    basename: String,
    graph_sha256: String,
    data_sha256: String,
}

/// Version of the saved index; 2: int8 graph.
const FORMAT: u32 = 2;
const CATCH_UP_CHUNK: usize = 4096;

fn new_graph(params: &IndexParams, capacity: usize) -> Graph<'static> {
    // hnsw_rs's default layer cap; the capacity is only an allocation hint.
    Hnsw::new(
        params.max_connections,
        capacity.max(1024),
        16,
        params.ef_construction,
        QuantizedCosine,
    )
}

fn insert_into<'v>(g: &Graph<'_>, items: impl IntoIterator<Item = (VectorKey, &'v [f32])>) {
    let quantized: Vec<(Vec<i8>, usize)> = items
        .into_iter()
        .map(|(k, v)| (quantize(v), k as usize))
        .collect();
    if quantized.len() >= 64 {
        let data: Vec<(&[i8], usize)> = quantized.iter().map(|(v, k)| (v.as_slice(), *k)).collect();
        g.parallel_insert_slice(&data);
    } else {
        for (v, k) in &quantized {
            g.insert_slice((v.as_slice(), *k));
        }
    }
}

/// Borrows `(key, vector)` pairs as the graph helpers take them.
fn pairs(items: &[(VectorKey, Vec<f32>)]) -> impl Iterator<Item = (VectorKey, &[f32])> {
    items.iter().map(|(k, v)| (*k, v.as_slice()))
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

fn io_err(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::Storage {
        detail: format!("{what} {}", path.display()),
        source: Some(Box::new(e)),
    }
}

fn sha256_file(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(|e| io_err("cannot read", path, e))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(|e| io_err("cannot read", path, e))?;
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
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
    ) -> Result<Arc<VectorIndex>> {
        let store_max = store.max_key().await?;
        let loaded = match &dir {
            Some(d) => {
                let d = d.clone();
                let (id, p) = (store_id.clone(), params);
                tokio::task::spawn_blocking(move || load(&d, &id, dimension, &p))
                    .await
                    .map_err(|e| Error::internal(format!("index load task failed: {e}")))?
            }
            None => None,
        };
        // An index that has seen keys the store never issued belongs to another history of
        // the store (a restored backup, say): it cannot be trusted.
        let loaded = loaded.filter(|(_, max_key, _)| *max_key <= store_max);
        let was_loaded = loaded.is_some();
        let (graph, max_key, points) = match loaded {
            Some(l) => l,
            None => (GraphHolder::Fresh(new_graph(&params, 0)), 0, 0),
        };
        let index = Arc::new(VectorIndex {
            dimension,
            params,
            graph: RwLock::new(graph),
            state: RwLock::new(State {
                max_key,
                points,
                ..State::default()
            }),
            dir,
            store_id,
        });
        index.load_liveness(store).await?;
        index.sync_with_store(store).await?;
        if was_loaded && !index.graph_holds_every_live_key()? {
            // The saved graph lacks live vectors it should hold: trust the store instead.
            tracing::warn!("vector index incomplete; rebuilding from the store");
            index.rebuild(store).await?;
        }
        Ok(index)
    }

    /// One pass over the store's live vectors: every one goes into the arena, and those
    /// above the graph's `max_key` (written after its last save) into the graph too.
    async fn sync_with_store(self: &Arc<Self>, store: &dyn Store) -> Result<()> {
        let graph_max = read_lock(&self.state)?.max_key;
        let mut after = 0;
        loop {
            let chunk = store.vectors_after(after, CATCH_UP_CHUNK).await?;
            let Some(&(last, _)) = chunk.last() else {
                break;
            };
            self.check_dimensions(pairs(&chunk))?;
            let new: Vec<(VectorKey, Vec<f32>)> = chunk
                .iter()
                .filter(|(k, _)| *k > graph_max)
                .cloned()
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
            for (k, v) in &chunk {
                s.arena.insert(*k, v);
            }
            s.points += new.len();
            s.unsaved += new.len();
            after = last;
        }
        let store_max = store.max_key().await?;
        let mut s = write_lock(&self.state)?;
        s.max_key = s.max_key.max(store_max);
        Ok(())
    }

    /// Whether every live key is a point of the graph.
    fn graph_holds_every_live_key(&self) -> Result<bool> {
        let graph = read_lock(&self.graph)?;
        let s = read_lock(&self.state)?;
        let mut in_graph = std::collections::HashSet::with_capacity(s.points);
        graph.with(|g| {
            // hnsw_rs's point iterator unwraps the entry point: never walk an empty graph.
            if g.get_nb_point() > 0 {
                for point in g.get_point_indexation() {
                    in_graph.insert(point.get_origin_id() as VectorKey);
                }
            }
        });
        Ok(s.arena.slots.keys().all(|k| in_graph.contains(k)))
    }

    async fn load_liveness(&self, store: &dyn Store) -> Result<()> {
        let keys = store.live_keys().await?;
        let mut s = write_lock(&self.state)?;
        s.bits.clear();
        s.expiring.clear();
        s.live = 0;
        for LiveKey { key, expires_at } in keys {
            s.set(key, expires_at);
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

    /// Adds committed vectors (in commit order) and marks them live.
    pub(crate) fn add(&self, items: &[(VectorKey, Vec<f32>, Option<i64>)]) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let points = || items.iter().map(|(k, v, _)| (*k, v.as_slice()));
        self.check_dimensions(points())?;
        read_lock(&self.graph)?.with(|g| insert_into(g, points()));
        let mut s = write_lock(&self.state)?;
        s.points += items.len();
        s.unsaved += items.len();
        for (k, v, exp) in items {
            s.set(*k, *exp);
            s.arena.insert(*k, v);
            s.max_key = s.max_key.max(*k);
        }
        Ok(())
    }

    /// Masks retired keys.
    pub(crate) fn retire(&self, keys: &[VectorKey]) -> Result<()> {
        let mut s = write_lock(&self.state)?;
        for k in keys {
            s.clear(*k);
        }
        Ok(())
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

    /// Exact ranking of a unit query against live vectors: `keys` (any order), or every live
    /// vector when `None`. `(key, cosine)` best first, at most `k`.
    pub(crate) fn exact(
        &self,
        query: &[f32],
        keys: Option<&[VectorKey]>,
        k: usize,
        now: i64,
    ) -> Result<Vec<(VectorKey, f32)>> {
        let s = read_lock(&self.state)?;
        let score = |key: VectorKey| {
            s.is_live(key, now)
                .then(|| s.arena.get(key).map(|v| (key, dot(query, v))))
                .flatten()
        };
        let scored: Vec<(VectorKey, f32)> = match keys {
            Some(keys) => keys.iter().filter_map(|key| score(*key)).collect(),
            None => s.arena.slots.keys().filter_map(|key| score(*key)).collect(),
        };
        Ok(top_k(scored, k))
    }

    /// Exact cosines of a unit query with live vectors, for the given keys (dead or unknown
    /// keys are skipped).
    pub(crate) fn cosines(
        &self,
        query: &[f32],
        keys: &[VectorKey],
        now: i64,
    ) -> Result<Vec<(VectorKey, f32)>> {
        let s = read_lock(&self.state)?;
        Ok(keys
            .iter()
            .filter(|key| s.is_live(**key, now))
            .filter_map(|key| s.arena.get(*key).map(|v| (*key, dot(query, v))))
            .collect())
    }

    /// The vectors of live keys (expired included), in the order given; other keys are
    /// skipped.
    pub(crate) fn vectors(&self, keys: &[VectorKey]) -> Result<Vec<(VectorKey, Vec<f32>)>> {
        let s = read_lock(&self.state)?;
        Ok(keys
            .iter()
            .filter(|key| s.is_live(**key, i64::MIN))
            .filter_map(|key| s.arena.get(*key).map(|v| (*key, v.to_vec())))
            .collect())
    }

    /// Approximate nearest live neighbours of a unit query: `(key, cosine)` best first.
    /// `allowed` (sorted) restricts the result to those keys.
    pub(crate) fn search(
        &self,
        query: &[f32],
        k: usize,
        now: i64,
        allowed: Option<&[VectorKey]>,
    ) -> Result<Vec<(VectorKey, f32)>> {
        if query.len() != self.dimension {
            return Err(Error::DimensionMismatch {
                expected: self.dimension,
                actual: query.len(),
            });
        }
        if k == 0 {
            return Ok(Vec::new());
        }
        // Lock order, everywhere: graph before state.
        let graph = read_lock(&self.graph)?;
        let s = read_lock(&self.state)?;
        let ef = self.params.ef_search.max(k);
        let quantized = quantize(query);
        // The whole beam comes back from the walk and is re-ranked exactly from the arena.
        let rerank = |found: Vec<hnsw_rs::hnsw::Neighbour>| -> Vec<(VectorKey, f32)> {
            let scored = found
                .into_iter()
                .map(|n| n.d_id as VectorKey)
                .filter(|key| {
                    s.is_live(*key, now) && allowed.is_none_or(|a| a.binary_search(key).is_ok())
                })
                .filter_map(|key| s.arena.get(key).map(|v| (key, dot(query, v))))
                .collect();
            top_k(scored, k)
        };
        if allowed.is_none() {
            // hnsw_rs walks much further when given any filter, so skip masked points
            // afterwards instead: widen the beam to cover the masked share, and fall back to
            // the filtered walk only if that was not enough.
            let masked = s.masked();
            let share = masked as f64 / s.points.max(1) as f64;
            let beam = if masked == 0 {
                ef
            } else {
                ((ef as f64 / (1.0 - share).max(0.05)) * 1.5).ceil() as usize
            }
            .clamp(ef, 4096);
            let hits = rerank(graph.with(|g| g.search(&quantized, beam, beam)));
            if hits.len() == k || hits.len() >= s.live {
                return Ok(hits);
            }
        }
        let mut ef = ef;
        if let Some(allowed) = allowed {
            // A selective filter leaves few eligible nodes along the walk; widen the beam in
            // proportion so that the graph still yields k of them.
            let share = allowed.len().max(1) as f64 / s.live.max(1) as f64;
            ef = ((ef as f64 / share.max(0.01)).ceil() as usize).clamp(ef, 4096);
        }
        let filter = |id: &usize| {
            let key = *id as VectorKey;
            s.is_live(key, now) && allowed.is_none_or(|a| a.binary_search(&key).is_ok())
        };
        Ok(rerank(graph.with(|g| {
            g.search_filter(&quantized, ef, ef, Some(&filter))
        })))
    }

    /// Rebuilds the graph from the store's live vectors, dropping retired points. The new
    /// graph is built aside and swapped in, so searches meanwhile use the old one. The caller
    /// holds the engine's write gate.
    pub(crate) async fn rebuild(self: &Arc<Self>, store: &dyn Store) -> Result<()> {
        let live = store.live_keys().await?.len();
        let mut fresh = new_graph(&self.params, live);
        let mut arena = Arena::default();
        let (mut after, mut points) = (0, 0);
        loop {
            let chunk = store.vectors_after(after, CATCH_UP_CHUNK).await?;
            let Some(&(last, _)) = chunk.last() else {
                break;
            };
            self.check_dimensions(pairs(&chunk))?;
            let (graph, chunk) = blocking(move || {
                insert_into(&fresh, pairs(&chunk));
                Ok((fresh, chunk))
            })
            .await?;
            fresh = graph;
            for (k, v) in &chunk {
                arena.insert(*k, v);
            }
            points += chunk.len();
            after = last;
        }
        {
            let mut graph = write_lock(&self.graph)?;
            *graph = GraphHolder::Fresh(fresh);
            let mut s = write_lock(&self.state)?;
            s.max_key = after;
            s.points = points;
            s.unsaved = points;
            s.arena = arena;
        }
        self.load_liveness(store).await
    }

    /// Writes the graph as a new generation and points `CURRENT` at it. The caller holds the
    /// engine's write gate, so no insert runs concurrently. Blocking.
    pub(crate) fn save(&self) -> Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let (max_key, points) = {
            let s = read_lock(&self.state)?;
            (s.max_key, s.points)
        };
        if points == 0 {
            // Nothing to dump; an empty index is rebuilt for free on open.
            let current = dir.join("CURRENT");
            if current.exists() {
                std::fs::remove_file(&current).map_err(|e| io_err("cannot remove", &current, e))?;
            }
            return Ok(());
        }
        std::fs::create_dir_all(dir).map_err(|e| io_err("cannot create", dir, e))?;
        let generation = next_generation(dir);
        let name = format!("g-{generation}");
        let tmp = dir.join(format!("{name}.tmp-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&tmp).map_err(|e| io_err("cannot create", &tmp, e))?;
        let basename = {
            let graph = read_lock(&self.graph)?;
            let dumped = catch_unwind(AssertUnwindSafe(|| {
                graph.with(|g| g.file_dump(&tmp, "graph"))
            }));
            match dumped {
                Ok(Ok(name)) => name,
                Ok(Err(e)) => return Err(Error::internal(format!("index dump failed: {e}"))),
                Err(_) => return Err(Error::internal("index dump panicked")),
            }
        };
        let graph_file = tmp.join(format!("{basename}.hnsw.graph"));
        let data_file = tmp.join(format!("{basename}.hnsw.data"));
        for f in [&graph_file, &data_file] {
            sync_file(f)?;
        }
        let manifest = Manifest {
            format: FORMAT,
            store_id: self.store_id.clone(),
            dimension: self.dimension,
            max_connections: self.params.max_connections,
            ef_construction: self.params.ef_construction,
            max_key,
            points,
            basename,
            graph_sha256: sha256_file(&graph_file)?,
            data_sha256: sha256_file(&data_file)?,
        };
        let manifest_json = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| Error::internal(format!("cannot serialise the index manifest: {e}")))?;
        write_synced(&tmp.join("manifest.json"), &manifest_json)?;
        let final_dir = dir.join(&name);
        std::fs::rename(&tmp, &final_dir).map_err(|e| io_err("cannot rename", &tmp, e))?;
        write_synced(&dir.join("CURRENT.tmp"), name.as_bytes())?;
        std::fs::rename(dir.join("CURRENT.tmp"), dir.join("CURRENT"))
            .map_err(|e| io_err("cannot rename", &dir.join("CURRENT.tmp"), e))?;
        sync_dir(dir);
        // Older generations are garbage now, and so are temporary directories a crash left
        // behind (an hour old: younger ones may be another handle's save in progress).
        // Failing to remove them costs only disk.
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let n = entry.file_name().to_string_lossy().into_owned();
                let stale_tmp = n.contains(".tmp-")
                    && entry
                        .metadata()
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age.as_secs() > 3600);
                if n.starts_with("g-") && n != name && (!n.contains(".tmp-") || stale_tmp) {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        write_lock(&self.state)?.unsaved = 0;
        Ok(())
    }
}

fn next_generation(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.strip_prefix("g-")?
                        .trim_end_matches(".tmp")
                        .parse::<u64>()
                        .ok()
                })
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
        + 1
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = std::fs::File::create(path).map_err(|e| io_err("cannot create", path, e))?;
    f.write_all(bytes)
        .map_err(|e| io_err("cannot write", path, e))?;
    f.sync_all().map_err(|e| io_err("cannot sync", path, e))
}

fn sync_file(path: &Path) -> Result<()> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| io_err("cannot sync", path, e))
}

fn sync_dir(dir: &Path) {
    // Best effort: not every platform can fsync a directory.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Loads the current generation if every check passes; `None` means "rebuild".
fn load(
    dir: &Path,
    store_id: &str,
    dimension: usize,
    params: &IndexParams,
) -> Option<(GraphHolder, VectorKey, usize)> {
    let name = std::fs::read_to_string(dir.join("CURRENT")).ok()?;
    let gen_dir = dir.join(name.trim());
    let manifest: Manifest =
        serde_json::from_slice(&std::fs::read(gen_dir.join("manifest.json")).ok()?).ok()?;
    let reject = |why: &str| {
        tracing::warn!(dir = %dir.display(), "vector index not loaded ({why}); rebuilding from the store");
    };
    if manifest.format != FORMAT
        || manifest.store_id != store_id
        || manifest.dimension != dimension
        || manifest.max_connections != params.max_connections
        || manifest.ef_construction != params.ef_construction
    {
        reject("it was built for another store, model or parameters");
        return None;
    }
    let graph_file = gen_dir.join(format!("{}.hnsw.graph", manifest.basename));
    let data_file = gen_dir.join(format!("{}.hnsw.data", manifest.basename));
    if sha256_file(&graph_file).ok()? != manifest.graph_sha256
        || sha256_file(&data_file).ok()? != manifest.data_sha256
    {
        reject("its files do not match their checksums");
        return None;
    }
    let io = HnswIo::new(&gen_dir, &manifest.basename);
    let loaded = catch_unwind(AssertUnwindSafe(|| {
        LoadedGraph::try_new(io, |io| io.load_hnsw_with_dist(QuantizedCosine))
    }));
    let graph = match loaded {
        Ok(Ok(g)) => g,
        _ => {
            reject("hnsw_rs could not read it");
            return None;
        }
    };
    let points = graph.with_dependent(|_, g| g.get_nb_point());
    if points != manifest.points {
        reject("its point count disagrees with its manifest");
        return None;
    }
    Some((GraphHolder::Loaded(graph), manifest.max_key, points))
}

/// The `k` best of scored keys, best first; ties go to the lower key.
fn top_k(mut scored: Vec<(VectorKey, f32)>, k: usize) -> Vec<(VectorKey, f32)> {
    let by_score =
        |a: &(VectorKey, f32), b: &(VectorKey, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if scored.len() > k {
        scored.select_nth_unstable_by(k, by_score);
        scored.truncate(k);
    }
    scored.sort_by(by_score);
    scored
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_validated() {
        assert!(IndexParams::default().validate().is_ok());
        for bad in [
            IndexParams::default().max_connections(300),
            IndexParams::default().max_connections(2),
            IndexParams::default().ef_construction(8),
            IndexParams::default().ef_search(0),
            IndexParams::default().exact_search_max(2_000_000),
        ] {
            assert_eq!(bad.validate().err().map(|e| e.status()), Some(400));
        }
    }

    #[test]
    fn liveness_masks_and_expires() {
        let mut l = State::default();
        l.set(3, None);
        l.set(200, Some(100));
        assert!(l.is_live(3, 0) && l.is_live(200, 99));
        assert!(!l.is_live(200, 100) && !l.is_live(4, 0) && !l.is_live(10_000, 0));
        l.clear(3);
        assert!(!l.is_live(3, 0));
        assert_eq!(l.live, 1);
    }

    #[test]
    fn quantized_distance_tracks_cosine() {
        let a = [0.6f32, 0.8, 0.0];
        let b = [0.8f32, 0.6, 0.0];
        let c = [-0.6f32, -0.8, 0.0];
        let d = |x: &[f32], y: &[f32]| QuantizedCosine.eval(&quantize(x), &quantize(y));
        assert!(
            d(&a, &a) < 1e-3,
            "identical vectors are at distance ~0, never below"
        );
        assert!((d(&a, &b) - (1.0 - dot(&a, &b))).abs() < 0.01);
        assert!((d(&a, &c) - 2.0).abs() < 0.01);
        assert_eq!(quantize(&[1.0, -1.0, 0.004]), vec![127, -127, 1]);
    }

    #[test]
    fn top_k_ranks_by_score_then_key() {
        let scored = vec![(1, 0.0), (3, 1.0), (2, 1.0), (4, 0.6)];
        let r = top_k(scored, 3);
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), vec![2, 3, 4]);
    }

    #[test]
    fn arena_reuses_slots() {
        let mut a = Arena::default();
        a.insert(1, &[1.0, 2.0]);
        a.insert(2, &[3.0, 4.0]);
        a.remove(1);
        a.insert(3, &[5.0, 6.0]);
        assert_eq!(a.get(3), Some(&[5.0, 6.0][..]));
        assert_eq!(a.get(2), Some(&[3.0, 4.0][..]));
        assert_eq!(a.get(1), None);
        assert_eq!(a.data.len(), 4);
    }
}

#[cfg(test)]
mod persistence_tests {
    use super::*;
    use crate::store::{MemStore, NewMemory, Write, WriteBatch};

    fn unit(i: usize, dim: usize) -> Vec<f32> {
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

    #[tokio::test]
    async fn insert_after_load_keeps_keys_and_vectors_together() {
        let dir = tempfile::tempdir().unwrap();
        let store = MemStore::new();
        let dim = 16;
        let writes = |range: std::ops::Range<usize>| -> Vec<Write> {
            range
                .map(|i| {
                    let mut r = crate::record::MemoryRecord {
                        id: uuid::Uuid::new_v4(),
                        memory: format!("m{i}"),
                        owners: Default::default(),
                        metadata: Default::default(),
                        categories: vec![],
                        immutable: false,
                        expiration_date: None,
                        created_at: crate::record::now(),
                        updated_at: crate::record::now(),
                        hash: String::new(),
                        context: None,
                    };
                    r.owners.user_id = Some("u".into());
                    Write::Insert(NewMemory::new(r, unit(i, dim), vec![]))
                })
                .collect()
        };
        store
            .apply(WriteBatch::new(writes(0..30), 0))
            .await
            .unwrap();
        let params = IndexParams::default();
        let index = VectorIndex::open(&store, dim, params, Some(dir.path().into()), "s".into())
            .await
            .unwrap();
        index.save().unwrap();
        drop(index);
        store
            .apply(WriteBatch::new(writes(30..35), 0))
            .await
            .unwrap();
        let index = VectorIndex::open(&store, dim, params, Some(dir.path().into()), "s".into())
            .await
            .unwrap();
        assert!(matches!(
            *index.graph.read().unwrap(),
            GraphHolder::Loaded(_)
        ));
        for i in 0..35 {
            let hits = index.search(&unit(i, dim), 1, 0, None).unwrap();
            assert_eq!(hits[0].0, i as u64 + 1, "query {i}: {hits:?}");
            assert!((hits[0].1 - 1.0).abs() < 1e-4, "query {i}: {hits:?}");
        }
    }
}
