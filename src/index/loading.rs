//! Loading a saved graph in the background: the state of a generation is in at open, its
//! graph follows on a thread of its own and is swapped in with whatever it lacks.

use std::sync::Arc;

use super::graph::{self, insert_into, new_graph, pairs, GraphHolder};
use super::live::{Arena, State};
use super::{mutex, persist, read_lock, statefile, write_lock, VectorIndex, CATCH_UP_CHUNK};
use crate::error::{Error, Result};
use crate::store::VectorKey;

impl VectorIndex {
    /// Loads a saved graph on a thread of its own, then swaps it in with every live vector
    /// it lacks inserted (those written since it was saved). A graph that cannot be loaded
    /// is rebuilt from the state's vectors instead.
    pub(super) fn load_graph_in_background(self: &Arc<Self>, files: persist::GraphFiles) {
        /// Marks the load settled however the thread ends.
        struct Settled(Arc<VectorIndex>);
        impl Drop for Settled {
            fn drop(&mut self) {
                if let Ok(mut settled) = self.0.graph_settled.lock() {
                    *settled = true;
                }
                self.0.graph_settled_cv.notify_all();
            }
        }
        let settled = Settled(Arc::clone(self));
        let work = move || {
            let graph = persist::load_graph(files);
            if let Err(e) = settled.0.install_loaded(graph) {
                tracing::warn!(error = %e, "vector index graph not installed; searches stay exact");
            }
        };
        let spawned = std::thread::Builder::new()
            .name("memlane-index-load".into())
            .spawn(work);
        if let Err(e) = spawned {
            // No thread to spare: the graph stays out and searches stay exact (and correct)
            // until the index is rebuilt.
            tracing::warn!(error = %e, "cannot start the vector index loader");
        }
    }

    /// Swaps a loaded graph in, unless the index was rebuilt meanwhile.
    pub(super) fn install_loaded(&self, loaded: Option<graph::LoadedGraph>) -> Result<()> {
        let _inserting = mutex(&self.inserting)?;
        if !read_lock(&self.graph)?.is_loading() {
            return Ok(());
        }
        let holder = match loaded {
            Some(g) => GraphHolder::Loaded(g),
            None => GraphHolder::Fresh(new_graph(&self.params, self.live_count()?)),
        };
        let added = self.insert_missing(&holder)?;
        let points = holder.with(memlane_kernels::graph::points).unwrap_or(0);
        *write_lock(&self.graph)? = holder;
        let mut s = write_lock(&self.state)?;
        s.points = points;
        s.unsaved += added;
        Ok(())
    }

    /// Inserts into `graph` every live vector of the arena it lacks: those written since
    /// it was saved, or any a damaged history left out. Returns how many.
    pub(super) fn insert_missing(&self, graph: &GraphHolder) -> Result<usize> {
        // Which keys the graph holds, as a bitset.
        let mut present: Vec<u64> = Vec::new();
        graph.with(|g| {
            // hnsw_rs's point iterator unwraps the entry point: never walk an empty graph.
            if memlane_kernels::graph::points(g) > 0 {
                for point in g.get_point_indexation() {
                    let key = point.get_origin_id();
                    if present.len() <= key / 64 {
                        present.resize(key / 64 + 1, 0);
                    }
                    if let Some(w) = present.get_mut(key / 64) {
                        *w |= 1 << (key % 64);
                    }
                }
            }
        });
        let holds = |key: VectorKey| {
            present
                .get((key / 64) as usize)
                .is_some_and(|w| w & (1 << (key % 64)) != 0)
        };
        let missing: Vec<VectorKey> = read_lock(&self.state)?
            .arena
            .keys()
            .filter(|k| !holds(*k))
            .collect();
        for keys in missing.chunks(CATCH_UP_CHUNK) {
            let vectors = self.vectors(keys)?;
            graph.with(|g| insert_into(g, pairs(&vectors)));
        }
        Ok(missing.len())
    }

    /// Waits until no graph load is under way (blocking).
    pub(crate) fn wait_for_graph(&self) -> Result<()> {
        let mut settled = mutex(&self.graph_settled)?;
        while !*settled {
            settled = self
                .graph_settled_cv
                .wait(settled)
                .map_err(|_| Error::internal("vector index lock poisoned"))?;
        }
        Ok(())
    }

    /// Whether the graph is in memory (searches that need it rank exactly until then).
    pub(crate) fn graph_ready(&self) -> Result<bool> {
        Ok(!read_lock(&self.graph)?.is_loading())
    }
}

/// Rebuilds the state of a saved generation: liveness, ids and the mapped vectors.
pub(super) fn restore(mut state: State, saved: statefile::SavedState) -> State {
    state.ids.reserve(saved.records.len());
    for r in &saved.records {
        state.set(r.key, r.expires_at);
        state.ids.insert(r.id, r.key);
    }
    if let Some((sets, of_record)) = &saved.owners {
        let keys = saved.records.iter().map(|r| r.key);
        state
            .owners
            .restore(sets, keys.zip(of_record.iter().copied()));
    }
    if let Some(mapped) = saved.vectors {
        state.arena = Arena::over(mapped, saved.records.iter().map(|r| r.key));
    }
    state
}
