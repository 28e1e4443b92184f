//! The parameters of the HNSW graph and of the exact-search cut-over.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Parameters of the HNSW graph and of the exact-search cut-over.
///
/// ## Defaults
/// Chosen with `cargo bench --bench scale` on vectors whose neighbourhoods are those of real
/// sentence embeddings (its `realistic` set; see `docs/search-and-scale.md`):
/// - `max_connections` (M): 24. More links per node: better recall and slower inserts; the
///   graph's memory hardly changes (most of hnsw_rs's memory per point does not depend on
///   M). At a million memories, recall@10 at a beam of 64 was 0.85 with 16 and 0.94 to
///   0.95 with 24; at 100k, ingest was about 5% slower with 24. Must be 4–128.
/// - `ef_construction`: 100. Candidate list size while inserting. Must be at least M and at
///   most 4096.
/// - `ef_search`: 0, which sizes the search beam by the graph: 32 up to 10,000 memories
///   and 32 more for every tenfold beyond (64 at 100k, 96 at 1M). With M 24 that gave
///   recall@10 against exact search of 0.99 at 10k and 100k and 0.95 to 0.975 at 1M (three
///   builds of the graph), under 0.75 ms p50; a fixed beam of 64 gave 0.94 to 0.96 at 1M.
///   Any other value is the beam whatever the size (raised to `top_k` when larger). Must
///   be at most 4096. Searches within `exact_search_max` candidates are exact whatever this
///   is.
/// - `exact_search_max`: 2048. A search whose filters leave at most this many memories ranks
///   them all exactly instead of walking the graph, so that a per-user search never misses a
///   memory because the graph was tuned for the whole collection. Must be at most 1,000,000.
///
/// A saved graph built with another M or `ef_construction` is rebuilt when the index is
/// opened with these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct IndexParams {
    /// Links per node (M).
    pub max_connections: usize,
    /// Candidate list size while inserting.
    pub ef_construction: usize,
    /// Candidate list size while searching (0: by the graph's size).
    pub ef_search: usize,
    /// Largest filtered candidate set ranked exactly.
    pub exact_search_max: usize,
}

impl Default for IndexParams {
    fn default() -> Self {
        IndexParams {
            max_connections: 24,
            ef_construction: 100,
            ef_search: 0,
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

    /// The search beam over a graph of `points` points: `ef_search`, or by the size when it
    /// is 0 (see the defaults above).
    pub(crate) fn beam(&self, points: usize) -> usize {
        if self.ef_search > 0 {
            return self.ef_search;
        }
        let tenfolds = (points.max(1) as f64 / 10_000.0).log10().max(0.0);
        (32.0 * (1.0 + tenfolds)).round() as usize
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
        if self.ef_search > 4096 {
            return Err(Error::invalid(format!(
                "index ef_search must be at most 4096 (0: by the index's size), got {}",
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
            IndexParams::default().ef_search(5000),
            IndexParams::default().exact_search_max(2_000_000),
        ] {
            assert_eq!(bad.validate().err().map(|e| e.status()), Some(400));
        }
    }

    #[test]
    fn the_default_beam_grows_with_the_graph_and_a_set_one_stays() {
        let auto = IndexParams::default();
        let beams: Vec<usize> = [0, 5_000, 10_000, 100_000, 1_000_000, 10_000_000]
            .into_iter()
            .map(|n| auto.beam(n))
            .collect();
        assert_eq!(beams, vec![32, 32, 32, 64, 96, 128]);
        assert_eq!(auto.ef_search(40).beam(1_000_000), 40);
    }
}
