//! Rerankers: a second opinion on the best candidates of a search.

use std::sync::Arc;

use async_trait::async_trait;

use crate::embed::{dot, EmbedMode, Embedder};
use crate::error::{Error, Result};

/// Re-scores the best candidates of a search: a cross-encoder, a rerank API, or a larger
/// embedder than the one the index was built with.
///
/// Configured with [`MemoryBuilder::reranker`](crate::MemoryBuilder::reranker), it sees the
/// query and the text of the first [`RERANK_WINDOW`] candidates (or `top_k`, if larger) of
/// every text search, after filters; its scores order the results and are what `threshold`
/// compares against. A search can opt out with
/// [`SearchRequest::rerank(false)`](crate::ops::search::SearchRequest::rerank).
#[async_trait]
pub trait Reranker: Send + Sync + std::fmt::Debug {
    /// A name for the model, for logs.
    fn model_id(&self) -> &str;

    /// The relevance of each document to the query, in [0, 1], one score per document in
    /// the order given.
    async fn rerank(&self, query: &str, documents: &[String]) -> Result<Vec<f32>>;
}

/// How many candidates a reranker sees at least.
pub const RERANK_WINDOW: usize = 50;

/// Reranks by the cosine similarity of another embedder's vectors, clamped to [0, 1].
///
/// For an embedder too slow to index every memory with but fast enough for a search's
/// fifty candidates.
#[derive(Debug, Clone)]
pub struct EmbeddingReranker {
    embedder: Arc<dyn Embedder>,
}

impl EmbeddingReranker {
    /// Reranks with `embedder`.
    pub fn new(embedder: Arc<dyn Embedder>) -> Self {
        EmbeddingReranker { embedder }
    }
}

#[async_trait]
impl Reranker for EmbeddingReranker {
    fn model_id(&self) -> &str {
        self.embedder.model_id()
    }

    async fn rerank(&self, query: &str, documents: &[String]) -> Result<Vec<f32>> {
        let dimension = self.embedder.dimension();
        let query = self
            .embedder
            .embed(&[query.to_owned()], EmbedMode::Query)
            .await?
            .pop()
            .ok_or_else(|| Error::internal("the reranker's embedder returned no query vector"))?;
        let query = crate::embed::normalize(query, dimension)?;
        let documents = self.embedder.embed(documents, EmbedMode::Document).await?;
        documents
            .into_iter()
            .map(|d| Ok(dot(&query, &crate::embed::normalize(d, dimension)?).clamp(0.0, 1.0)))
            .collect()
    }
}

/// Checks a reranker's answer: one finite score per document, clamped to [0, 1].
pub(crate) fn checked(scores: Vec<f32>, documents: usize, model: &str) -> Result<Vec<f32>> {
    if scores.len() != documents {
        return Err(Error::provider(
            format!(
                "the reranker {model} returned {} scores for {documents} documents",
                scores.len()
            ),
            false,
        ));
    }
    scores
        .into_iter()
        .map(|s| {
            if s.is_finite() {
                Ok(s.clamp(0.0, 1.0))
            } else {
                Err(Error::provider(
                    format!("the reranker {model} returned a score that is not a number"),
                    false,
                ))
            }
        })
        .collect()
}
