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
use crate::rerank::{self, RERANK_WINDOW};
use crate::store::VectorKey;
use chrono::{DateTime, Utc};

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

/// How a search ranks memories.
///
/// Every mode reports a score in [0, 1], so `threshold` means the same in each:
/// - `Vector`: the cosine similarity of query and memory embeddings.
/// - `Keyword`: BM25 over the memory text (SQLite FTS5), squashed as `b / (b + 5)`.
/// - `Hybrid`: `0.3 · vector + 0.7 · keyword`, over the candidates of both.
///
/// Keyword matching ignores English function words in the query ("what", "for", …) and
/// matches words by their stem ("painting" finds "painted"). A memory's context (see
/// [`MemoryRecord::context`]) counts in both signals, its words at 0.3 of the text's.
///
/// With a [`Reranker`](crate::Reranker) configured, the score is the reranker's, in [0, 1].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SearchMode {
    /// Semantic similarity only.
    Vector,
    /// Words in common only.
    Keyword,
    /// Both, fused: the default, because it measures best (see the README's LoCoMo table).
    #[default]
    Hybrid,
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
/// `top_k` 10 (1–1000), `threshold` 0 (0–1), mode [`SearchMode::Hybrid`], no filters,
/// expired memories hidden.
#[derive(Debug)]
#[must_use = "a request does nothing until awaited"]
pub struct SearchRequest<'a> {
    memory: &'a Memory,
    query: Query,
    scope: Scope,
    top_k: usize,
    threshold: f32,
    mode: SearchMode,
    rerank: bool,
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
            mode: SearchMode::default(),
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

    /// The lowest score returned (0–1, default 0).
    pub fn threshold(mut self, t: f32) -> Self {
        self.threshold = t;
        self
    }

    /// How to rank (see [`SearchMode`]).
    pub fn mode(mut self, mode: SearchMode) -> Self {
        self.mode = mode;
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
        let filter = self.scope.to_filter()?;
        let memory = self.memory;
        let reranker = match (&self.query, &memory.inner.reranker) {
            (Query::Text(text), Some(reranker)) if self.rerank => {
                Some((text.clone(), std::sync::Arc::clone(reranker)))
            }
            _ => None,
        };
        // A reranker sees a wider window than top_k, and picks the top_k from it; memories
        // with negative feedback may leave or sink, so as many more are fetched.
        let k = match reranker {
            Some(_) => self.top_k.max(RERANK_WINDOW),
            None => self.top_k,
        } + memory.feedback_refill().await?;
        let (expired, at) = (self.scope.include_expired, now());
        let ranked = match (self.mode, self.query) {
            (SearchMode::Vector, Query::Vector(v)) => {
                let v = normalize(v, memory.inner.embedder.dimension())?;
                memory.vector_ranked(&v, &filter, k, expired, at).await?
            }
            (_, Query::Vector(_)) => return Err(Error::invalid(
                "keyword and hybrid search need a text query; search_vector ranks by vector only",
            )),
            (SearchMode::Keyword, Query::Text(text)) => {
                memory
                    .keyword_ranked(&text, &filter, k, expired, at)
                    .await?
            }
            (mode, Query::Text(text)) => {
                let v = memory
                    .embed_texts(std::slice::from_ref(&text), EmbedMode::Query)
                    .await?
                    .pop()
                    .ok_or_else(|| Error::internal("no query vector"))?;
                if mode == SearchMode::Hybrid {
                    memory
                        .hybrid_ranked(&text, &v, &filter, k, expired, at)
                        .await?
                } else {
                    memory.vector_ranked(&v, &filter, k, expired, at).await?
                }
            }
        };
        let mut hits = memory.hydrate(ranked, &filter, expired, at).await?;
        if let Some((query, reranker)) = reranker {
            let documents: Vec<String> = hits.iter().map(|h| h.record.indexed_text()).collect();
            let scores = rerank::checked(
                reranker.rerank(&query, &documents).await?,
                documents.len(),
                reranker.model_id(),
            )?;
            for (hit, score) in hits.iter_mut().zip(scores) {
                hit.score = score;
            }
            // Stable: equal scores keep the first ranking's order.
            hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        }
        memory.apply_feedback(&mut hits, self.top_k).await?;
        let results = hits
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
        let ranked = self
            .vector_ranked(query, filter, k, include_expired, at)
            .await?;
        self.hydrate(ranked, filter, include_expired, at).await
    }

    /// The `k` nearest live vectors among the memories matching `filter`, with their cosine.
    async fn vector_ranked(
        &self,
        query: &[f32],
        filter: &Filter,
        k: usize,
        include_expired: bool,
        at: DateTime<Utc>,
    ) -> Result<Vec<(VectorKey, f32)>> {
        let mut ranked = self
            .vector_ranked_many(vec![query.to_vec()], filter, k, include_expired, at)
            .await?;
        Ok(ranked.pop().unwrap_or_default())
    }

    /// [`Memory::vector_ranked`] for several queries, reading the filter's keys once.
    async fn vector_ranked_many(
        &self,
        queries: Vec<Vec<f32>>,
        filter: &Filter,
        k: usize,
        include_expired: bool,
        at: DateTime<Utc>,
    ) -> Result<Vec<Vec<(VectorKey, f32)>>> {
        let max_exact = self.inner.index.params().exact_search_max;
        let index = std::sync::Arc::clone(&self.inner.index);
        let graph_now = clock(include_expired, at);
        let keys = if filter.is_all() {
            None
        } else {
            Some(
                self.inner
                    .store
                    .matching_keys(filter, at, include_expired)
                    .await?,
            )
        };
        let candidates = keys.as_ref().map_or(index.live_count()?, Vec::len);
        let work = candidates.saturating_mul(queries.len());
        let rank = move || {
            queries
                .iter()
                .map(|query| match &keys {
                    _ if candidates <= max_exact => {
                        index.exact(query, keys.as_deref(), k, graph_now)
                    }
                    keys => index.search(query, k, graph_now, keys.as_deref()),
                })
                .collect()
        };
        // Small exact rankings are cheap enough for the async worker; anything bigger runs
        // on the blocking pool.
        if work <= 4096 {
            rank()
        } else {
            tokio::task::spawn_blocking(rank)
                .await
                .map_err(|e| Error::internal(format!("search task failed: {e}")))?
        }
    }

    /// Keyword ranking: BM25, squashed into [0, 1].
    async fn keyword_ranked(
        &self,
        text: &str,
        filter: &Filter,
        k: usize,
        include_expired: bool,
        at: DateTime<Utc>,
    ) -> Result<Vec<(VectorKey, f32)>> {
        let hits = self
            .inner
            .store
            .keyword_search(text, filter, at, include_expired, k)
            .await?;
        Ok(hits
            .into_iter()
            .map(|(key, bm25)| (key, squash(bm25)))
            .collect())
    }

    /// Hybrid ranking: the vector and keyword candidates together, each scored
    /// `HYBRID_VECTOR_WEIGHT · cosine + (1 − HYBRID_VECTOR_WEIGHT) · squash(BM25)`.
    pub(crate) async fn hybrid_ranked(
        &self,
        text: &str,
        query: &[f32],
        filter: &Filter,
        k: usize,
        include_expired: bool,
        at: DateTime<Utc>,
    ) -> Result<Vec<(VectorKey, f32)>> {
        let mut ranked = self
            .hybrid_ranked_many(
                &[text.to_string()],
                vec![query.to_vec()],
                filter,
                k,
                include_expired,
                at,
            )
            .await?;
        Ok(ranked.pop().unwrap_or_default())
    }

    /// [`Memory::hybrid_ranked`] for several texts with their vectors, sharing the reads of
    /// the filter's memories between them.
    pub(crate) async fn hybrid_ranked_many(
        &self,
        texts: &[String],
        queries: Vec<Vec<f32>>,
        filter: &Filter,
        k: usize,
        include_expired: bool,
        at: DateTime<Utc>,
    ) -> Result<Vec<Vec<(VectorKey, f32)>>> {
        // Over-fetch from each side, as the best hybrid hit may rank low on one of them.
        let fetch = (4 * k).clamp(60, limits::MAX_TOP_K);
        // The two sides read the store on their own connections, side by side.
        let (vectors, keywords) = tokio::try_join!(
            self.vector_ranked_many(queries.clone(), filter, fetch, include_expired, at),
            self.inner
                .store
                .keyword_search_many(texts, filter, at, include_expired, fetch),
        )?;
        queries
            .iter()
            .zip(vectors)
            .zip(keywords)
            .map(|((query, vector), keyword)| {
                self.fuse(query, vector, keyword, k, include_expired, at)
            })
            .collect()
    }

    /// One hybrid ranking from its vector and keyword candidates.
    fn fuse(
        &self,
        query: &[f32],
        vector: Vec<(VectorKey, f32)>,
        keyword: Vec<(VectorKey, f32)>,
        k: usize,
        include_expired: bool,
        at: DateTime<Utc>,
    ) -> Result<Vec<(VectorKey, f32)>> {
        let mut bm25: HashMap<VectorKey, f32> = keyword.into_iter().collect();
        let mut cosine: HashMap<VectorKey, f32> = vector.into_iter().collect();
        // Keyword-only candidates still get their exact cosine.
        let missing: Vec<VectorKey> = bm25
            .keys()
            .filter(|k| !cosine.contains_key(k))
            .copied()
            .collect();
        cosine.extend(
            self.inner
                .index
                .cosines(query, &missing, clock(include_expired, at))?,
        );
        let mut fused: Vec<(VectorKey, f32)> = cosine
            .into_iter()
            .map(|(key, cos)| {
                let keyword = bm25.remove(&key).map_or(0.0, squash);
                (
                    key,
                    HYBRID_VECTOR_WEIGHT * cos.max(0.0) + (1.0 - HYBRID_VECTOR_WEIGHT) * keyword,
                )
            })
            .collect();
        fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        fused.truncate(k);
        Ok(fused)
    }

    /// Reads ranked keys back from the store, best first. A memory deleted, changed out of
    /// the filter, or expired since its key was ranked is dropped.
    pub(crate) async fn hydrate(
        &self,
        ranked: Vec<(VectorKey, f32)>,
        filter: &Filter,
        include_expired: bool,
        at: DateTime<Utc>,
    ) -> Result<Vec<ScoredMemory>> {
        let keys: Vec<VectorKey> = ranked.iter().map(|(key, _)| *key).collect();
        let mut records: HashMap<VectorKey, MemoryRecord> = self
            .inner
            .store
            .get_by_keys(&keys)
            .await?
            .into_iter()
            .collect();
        Ok(ranked
            .into_iter()
            .filter_map(|(key, score)| {
                let record = records.remove(&key)?;
                if !filter.matches(&record) || (!include_expired && record.is_expired_at(at)) {
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

/// The expiry clock of the index: `i64::MIN` when expired memories are wanted too.
fn clock(include_expired: bool, at: DateTime<Utc>) -> i64 {
    if include_expired {
        i64::MIN
    } else {
        at.timestamp_micros()
    }
}

/// The BM25 score at which a keyword match counts as half a perfect match.
const BM25_HALF: f32 = 5.0;
/// The weight of the cosine in a hybrid score (the keyword score has the rest). Measured on
/// LoCoMo (R@5 / R@10): 0.2 → 63.3 / 72.7, 0.25 → 63.2 / 72.9, 0.3 → 63.2 / 73.0,
/// 0.35 → 63.0 / 72.6, 0.4 → 62.4 / 72.2. The optimum is broad; 0.3 keeps weight on meaning
/// for stores where questions share no words with their answers.
const HYBRID_VECTOR_WEIGHT: f32 = 0.3;

/// Maps a BM25 score (unbounded, positive) into [0, 1): `b / (b + BM25_HALF)`.
fn squash(bm25: f32) -> f32 {
    let b = bm25.max(0.0);
    b / (b + BM25_HALF)
}
