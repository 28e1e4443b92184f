//! Raw engine operations: `retrieve` (vector search for one user) and `embed`.

use serde::{Deserialize, Serialize};

use crate::embed::EmbedMode;
use crate::error::{Error, Result};
use crate::filter::Filter;
use crate::limits;
use crate::memory::Memory;
use crate::retrieve::{Query, Retrieval, ScoredMemory, SearchMode};

/// The result of `embed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Embedding {
    /// The unit-length vector, exactly as memlane stores and searches it.
    pub embedding: Vec<f32>,
    /// Its length.
    pub dimension: usize,
}

/// The result of `retrieve`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RetrieveResult {
    /// The nearest memories of the user, best first, with their scores.
    pub results: Vec<ScoredMemory>,
}

impl Memory {
    /// Raw vector search over one user's memories: the `limit` nearest, no threshold, no
    /// model beyond the embedder.
    #[tracing::instrument(name = "retrieve", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn retrieve(
        &self,
        query: &str,
        user_id: &str,
        limit: usize,
    ) -> Result<RetrieveResult> {
        limits::text("query", query)?;
        limits::id("user_id", user_id)?;
        limits::top_k("limit", limit)?;
        tracing::Span::current().record("k", limit as u64);
        let vector = self
            .embed_texts(&[query.to_owned()], EmbedMode::Query)
            .await?
            .pop()
            .ok_or_else(|| Error::internal("no query vector"))?;
        let results = self
            .ranked(Retrieval {
                query: Query::Vector(vector),
                mode: SearchMode::Vector,
                filter: &Filter::user(user_id).and(Filter::current()),
                top_k: limit,
                threshold: 0.0,
                include_expired: false,
                rerank: false,
            })
            .await?;
        crate::ops::counted(results.len());
        Ok(RetrieveResult { results })
    }

    /// Embeds a text as memlane would: `mode` is `query` or `document` (see [`EmbedMode::parse`]).
    #[tracing::instrument(name = "embed", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn embed(&self, text: &str, mode: EmbedMode) -> Result<Embedding> {
        limits::text("text", text)?;
        self.require_embedder("embed")?;
        let embedding = self
            .embed_texts(&[text.to_owned()], mode)
            .await?
            .pop()
            .ok_or_else(|| Error::internal("no vector"))?;
        Ok(Embedding {
            dimension: embedding.len(),
            embedding,
        })
    }
}
