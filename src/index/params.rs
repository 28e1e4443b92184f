//! The parameters of the HNSW graph and of the exact-search cut-over.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

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
}
