//! `search`: semantic search with filters, `top_k` and `threshold`. The ranking itself is
//! the engine's (`src/retrieve/`).

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::limits;
use crate::memory::Memory;
use crate::ops::{awaitable, scope_setters, Scope};
use crate::retrieve::{Query, Retrieval};
pub use crate::retrieve::{ScoredMemory, SearchMode};

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
/// `top_k` 10 (1–1000), `threshold` 0 (0–1), mode [`SearchMode::Hybrid`] (or
/// [`SearchMode::Keyword`] for a memory without an embedder), no filters, expired memories
/// hidden.
#[derive(Debug)]
#[must_use = "a request does nothing until awaited"]
pub struct SearchRequest<'a> {
    memory: &'a Memory,
    query: Query,
    scope: Scope,
    top_k: usize,
    threshold: f32,
    /// `None`: hybrid, or keyword without an embedder.
    mode: Option<SearchMode>,
    rerank: bool,
}

impl Memory {
    /// Searches memories by meaning.
    pub fn search(&self, query: impl Into<String>) -> SearchRequest<'_> {
        self.search_query(Query::Text(query.into()))
    }

    /// Searches memories nearest a vector of your own (the embedder's dimension; it is
    /// normalised). Its mode is [`SearchMode::Vector`]: keyword and hybrid ranking need a
    /// text. Everything else works as in [`search`](Self::search).
    pub fn search_vector(&self, vector: Vec<f32>) -> SearchRequest<'_> {
        self.search_query(Query::Vector(vector))
            .mode(SearchMode::Vector)
    }

    fn search_query(&self, query: Query) -> SearchRequest<'_> {
        SearchRequest {
            memory: self,
            query,
            scope: Scope::default(),
            top_k: limits::DEFAULT_TOP_K,
            threshold: 0.0,
            mode: None,
            rerank: true,
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

    /// The lowest score returned (0–1, default 0). A score is the estimated probability
    /// that the memory is relevant (see [`Calibration`](crate::Calibration)), so 0.1 keeps
    /// the memories with at least a one-in-ten chance, in any mode.
    pub fn threshold(mut self, t: f32) -> Self {
        self.threshold = t;
        self
    }

    /// How to rank (see [`SearchMode`]). Vector and hybrid ranking need an embedder (a 503
    /// without one).
    pub fn mode(mut self, mode: SearchMode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Whether a configured [`Reranker`](crate::Reranker) re-scores the results (default
    /// true; searches by vector are never reranked, having no text).
    pub fn rerank(mut self, rerank: bool) -> Self {
        self.rerank = rerank;
        self
    }

    async fn send(self) -> Result<SearchResult> {
        if let Query::Text(text) = &self.query {
            limits::text("query", text)?;
        }
        limits::top_k("top_k", self.top_k)?;
        limits::threshold(self.threshold)?;
        tracing::Span::current().record("k", self.top_k as u64);
        let filter = self.scope.to_filter()?;
        let results = self
            .memory
            .ranked(Retrieval {
                query: self.query,
                mode: self
                    .mode
                    .unwrap_or_else(|| match self.memory.space().embedder {
                        Some(_) => SearchMode::default(),
                        None => SearchMode::Keyword,
                    }),
                filter: &filter,
                top_k: self.top_k,
                threshold: self.threshold,
                include_expired: self.scope.include_expired,
                rerank: self.rerank,
            })
            .await?;
        Ok(SearchResult { results })
    }
}

awaitable!(SearchRequest, SearchResult, "search");
