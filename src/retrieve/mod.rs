//! The ranking engine: from a query to scored memories.
//!
//! 1. **Candidates** per mode ([`candidates`]): the nearest vectors (exact within a small
//!    filtered set, the HNSW graph otherwise), the best BM25 matches, or both.
//! 2. **Scores** ([`fusion`]): each candidate's signals (cosine, keyword match) through the
//!    mode's [`Calibration`] model, an estimate that it is relevant.
//! 3. **Hydration**: every candidate is read back from the store, so a memory deleted,
//!    changed out of the filter or expired since its key was ranked never comes back.
//! 4. **Rerank**: a configured [`Reranker`](crate::Reranker) re-scores a window of the best.
//! 5. **Feedback** ([`feedback`]): NEGATIVE halves a score, VERY_NEGATIVE removes the memory;
//!    extra candidates refill what leaves.
//! 6. **Cut**: `top_k`, then the threshold.
//!
//! `ops/search.rs` and `ops/engine.rs` only build the request and shape the result.

pub(crate) mod calibration;
pub(crate) mod candidates;
pub(crate) mod feedback;
pub(crate) mod fusion;
pub(crate) mod period;
mod signals;

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::embed::EmbedMode;
use crate::error::{Error, Result};
use crate::filter::Filter;
use crate::memory::Memory;
use crate::record::{now, MemoryRecord};
use crate::rerank::{self, RERANK_WINDOW};
use crate::store::{Among, Row, VectorKey};
pub use calibration::{Calibration, Logistic};
use fusion::Ranked;
use period::Period;
pub use signals::{Neighbours, Signals};

/// One search hit: the memory, its score and the signals the score came from.
///
/// `score` lies in [0, 1], higher is better: the estimated probability that the memory is
/// relevant to the query (see [`Calibration`]), or a configured
/// [`Reranker`](crate::Reranker)'s score; negative feedback halves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ScoredMemory {
    /// The memory (its `id`, `memory`, `categories`, owners, metadata, timestamps).
    #[serde(flatten)]
    pub record: MemoryRecord,
    /// Relevance to the query, in [0, 1] (see [`SearchMode`]).
    pub score: f32,
    /// What the first ranking measured: the cosine and the keyword match.
    #[serde(default)]
    pub signals: Signals,
}

/// How a search ranks memories.
///
/// Every mode reports the same kind of score, an estimate in (0, 1) that the memory is
/// relevant (see [`Calibration`]), so `threshold` means the same in each; the modes differ
/// in the signals they estimate from:
/// - `Vector`: the cosine similarity of query and memory embeddings.
/// - `Keyword`: how the memory matches the query's words (BM25, relative to the query's
///   best possible, and the share of the query's word weight it holds).
/// - `Hybrid`: both, over the candidates of both.
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
    /// Both, fused: the default, because it measures best (see `docs/retrieval.md`).
    #[default]
    Hybrid,
}

/// What to rank: a text (embedded when the mode needs a vector), or a vector of the caller's.
#[derive(Debug)]
pub(crate) enum Query {
    Text(String),
    Vector(Vec<f32>),
}

/// One ranking, validated by the operation that asks for it.
#[derive(Debug)]
pub(crate) struct Retrieval<'a> {
    pub(crate) query: Query,
    pub(crate) mode: SearchMode,
    pub(crate) filter: &'a Filter,
    pub(crate) top_k: usize,
    pub(crate) threshold: f32,
    pub(crate) include_expired: bool,
    /// Whether a configured reranker re-scores the hits (text queries only).
    pub(crate) rerank: bool,
}

impl Memory {
    /// Runs a ranking: candidates, fusion, hydration, rerank, feedback, `top_k`, threshold.
    pub(crate) async fn ranked(&self, r: Retrieval<'_>) -> Result<Vec<ScoredMemory>> {
        let reranker = match (&r.query, &self.inner.reranker) {
            (Query::Text(text), Some(reranker)) if r.rerank => {
                Some((text.clone(), Arc::clone(reranker)))
            }
            _ => None,
        };
        // A reranker sees a wider window than top_k, and picks the top_k from it; memories
        // with negative feedback may leave or sink, so as many more are fetched.
        let k = match reranker {
            Some(_) => r.top_k.max(RERANK_WINDOW),
            None => r.top_k,
        } + self.feedback_refill().await?;
        let at = now();
        let (filter, expired) = (r.filter, r.include_expired);
        let among = Among::new(filter, at, expired);
        let ranked = match (r.mode, r.query) {
            (SearchMode::Vector, Query::Vector(v)) => {
                let dimension = self.space().dimension;
                if dimension == 0 {
                    return Err(crate::memory::no_embedder("searching by vector"));
                }
                let v = crate::embed::normalize(v, dimension)?;
                self.vector_ranked(&v, among, k, None).await?
            }
            (_, Query::Vector(_)) => return Err(Error::invalid_field(
                "query",
                "keyword and hybrid search need a text query; search_vector ranks by vector only",
            )),
            (SearchMode::Keyword, Query::Text(text)) => {
                let period = Period::named_in(&text, at);
                self.keyword_ranked(&text, among, k, 0, period.as_ref())
                    .await?
            }
            (mode, Query::Text(text)) => {
                let period = Period::named_in(&text, at);
                let v = self
                    .embed_texts(std::slice::from_ref(&text), EmbedMode::Query)
                    .await?
                    .pop()
                    .ok_or_else(|| Error::internal("no query vector"))?;
                if mode == SearchMode::Hybrid {
                    self.hybrid_ranked(&[text], vec![v], among, k, None, period.as_ref())
                        .await?
                        .pop()
                        .unwrap_or_default()
                } else {
                    self.vector_ranked(&v, among, k, period.as_ref()).await?
                }
            }
        };
        let mut hits = self.hydrate(ranked, filter, expired, at).await?;
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
        self.apply_feedback(&mut hits, r.top_k).await?;
        hits.retain(|hit| hit.score >= r.threshold);
        Ok(hits)
    }

    /// Reads ranked keys back from the store, best first. A memory deleted, changed out of
    /// the filter, or expired since its key was ranked is dropped.
    pub(crate) async fn hydrate(
        &self,
        ranked: Vec<Ranked>,
        filter: &Filter,
        include_expired: bool,
        at: DateTime<Utc>,
    ) -> Result<Vec<ScoredMemory>> {
        Ok(self
            .hydrate_rows(ranked, filter, include_expired, at)
            .await?
            .into_iter()
            .map(|(row, r)| ScoredMemory {
                record: row.record,
                score: r.score,
                signals: r.signals,
            })
            .collect())
    }

    /// [`Memory::hydrate`], keeping each memory's row (its version included).
    pub(crate) async fn hydrate_rows(
        &self,
        ranked: Vec<Ranked>,
        filter: &Filter,
        include_expired: bool,
        at: DateTime<Utc>,
    ) -> Result<Vec<(Row, Ranked)>> {
        let keys: Vec<VectorKey> = ranked.iter().map(|r| r.key).collect();
        let mut rows: HashMap<VectorKey, Row> = self
            .inner
            .store
            .rows_by_key(&keys)
            .await?
            .into_iter()
            .map(|row| (row.key, row))
            .collect();
        Ok(ranked
            .into_iter()
            .filter_map(|ranked| {
                let row = rows.remove(&ranked.key)?;
                let r = &row.record;
                if !filter.matches(r) || (!include_expired && r.is_expired_at(at)) {
                    return None;
                }
                Some((row, ranked))
            })
            .collect())
    }
}

/// The expiry clock of the index: `i64::MIN` when expired memories are wanted too.
pub(crate) fn clock(include_expired: bool, at: DateTime<Utc>) -> i64 {
    if include_expired {
        i64::MIN
    } else {
        at.timestamp_micros()
    }
}
