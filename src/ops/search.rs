//! `search`: semantic search with filters, `top_k` and `threshold`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::embed::{normalize, EmbedMode};
use crate::error::{Error, Result};
use crate::filter::Filter;
use crate::limits;
use crate::memory::Memory;
use crate::ops::{awaitable, scope_setters, Scope};
use crate::record::{now, MemoryRecord};
use crate::store::VectorKey;

/// One search hit: the memory and its score.
///
/// `score` is the cosine similarity of the query and memory embeddings, clamped to [0, 1]:
/// 1 means the same direction (near-identical meaning); unrelated texts score around 0–0.2
/// with MiniLM. Scores from the same embedder are comparable across queries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ScoredMemory {
    /// The memory (its `id`, `memory`, `categories`, owners, metadata, timestamps).
    #[serde(flatten)]
    pub record: MemoryRecord,
    /// Similarity to the query, in [0, 1].
    pub score: f32,
}

/// The result of `search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SearchResult {
    /// The hits, best first.
    pub results: Vec<ScoredMemory>,
}

/// A search request; await it to run it. Built by [`Memory::search`].
///
/// ## Defaults
/// `top_k` 10 (1–1000), `threshold` 0 (0–1), no filters, expired memories hidden.
#[derive(Debug)]
#[must_use = "a request does nothing until awaited"]
pub struct SearchRequest<'a> {
    memory: &'a Memory,
    query: Query,
    scope: Scope,
    top_k: usize,
    threshold: f32,
}

#[derive(Debug)]
enum Query {
    Text(String),
    Vector(Vec<f32>),
}

impl Memory {
    /// Searches memories by meaning.
    pub fn search(&self, query: impl Into<String>) -> SearchRequest<'_> {
        self.search_query(Query::Text(query.into()))
    }

    /// Searches memories nearest a vector of your own (the embedder's dimension; it is
    /// normalised). Everything else works as in [`search`](Self::search).
    pub fn search_vector(&self, vector: Vec<f32>) -> SearchRequest<'_> {
        self.search_query(Query::Vector(vector))
    }

    fn search_query(&self, query: Query) -> SearchRequest<'_> {
        SearchRequest {
            memory: self,
            query,
            scope: Scope::default(),
            top_k: limits::DEFAULT_TOP_K,
            threshold: 0.0,
        }
    }
}

impl<'a> SearchRequest<'a> {
    scope_setters!();

    /// How many hits at most (1–1000, default 10).
    pub fn top_k(mut self, k: usize) -> Self {
        self.top_k = k;
        self
    }

    /// The lowest score returned (0–1, default 0).
    pub fn threshold(mut self, t: f32) -> Self {
        self.threshold = t;
        self
    }

    async fn send(self) -> Result<SearchResult> {
        if let Query::Text(text) = &self.query {
            limits::text("query", text)?;
        }
        limits::top_k("top_k", self.top_k)?;
        limits::threshold(self.threshold)?;
        let filter = self.scope.to_filter()?;
        let query = match self.query {
            Query::Text(text) => self
                .memory
                .embed_texts(&[text], EmbedMode::Query)
                .await?
                .pop()
                .ok_or_else(|| Error::internal("no query vector"))?,
            Query::Vector(v) => normalize(v, self.memory.inner.embedder.dimension())?,
        };
        let results = self
            .memory
            .rank(&query, &filter, self.top_k, self.scope.include_expired)
            .await?
            .into_iter()
            .filter(|hit| hit.score >= self.threshold)
            .collect();
        Ok(SearchResult { results })
    }
}

awaitable!(SearchRequest, SearchResult);

impl Memory {
    /// The `k` live memories nearest a unit query vector among those matching `filter`.
    ///
    /// Small candidate sets (at most `exact_search_max`, the whole store included) are
    /// ranked exactly; larger ones go through the graph, restricted to the candidates.
    /// Every hit is re-read from the store, so a memory deleted meanwhile never comes back.
    pub(crate) async fn rank(
        &self,
        query: &[f32],
        filter: &Filter,
        k: usize,
        include_expired: bool,
    ) -> Result<Vec<ScoredMemory>> {
        let at = now();
        let max_exact = self.inner.params.exact_search_max;
        let index = std::sync::Arc::clone(&self.inner.index);
        let store = &self.inner.store;
        let graph_now = if include_expired {
            i64::MIN
        } else {
            at.timestamp_micros()
        };
        let keys = if filter.is_all() {
            None
        } else {
            Some(store.matching_keys(filter, at, include_expired).await?)
        };
        let candidates = keys.as_ref().map_or(index.live_count()?, Vec::len);
        let query = query.to_vec();
        let rank = move || match keys {
            _ if candidates <= max_exact => index.exact(&query, keys.as_deref(), k, graph_now),
            keys => index.search(&query, k, graph_now, keys.as_deref()),
        };
        // Small exact rankings are cheap enough for the async worker; anything bigger runs
        // on the blocking pool.
        let ranked: Vec<(VectorKey, f32)> = if candidates <= 4096 {
            rank()?
        } else {
            tokio::task::spawn_blocking(rank)
                .await
                .map_err(|e| Error::internal(format!("search task failed: {e}")))??
        };
        let keys: Vec<VectorKey> = ranked.iter().map(|(key, _)| *key).collect();
        let mut records: HashMap<VectorKey, MemoryRecord> =
            store.get_by_keys(&keys).await?.into_iter().collect();
        Ok(ranked
            .into_iter()
            .filter_map(|(key, score)| {
                let record = records.remove(&key)?;
                // The memory may have changed since its key was matched: check again.
                if !filter.matches(&record) {
                    return None;
                }
                // The graph path checks expiry against its own clock; check again here.
                if !include_expired && record.is_expired_at(at) {
                    return None;
                }
                Some(ScoredMemory {
                    record,
                    score: score.clamp(0.0, 1.0),
                })
            })
            .collect())
    }
}
