//! `search`: semantic search with filters, `top_k` and `threshold`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::embed::{normalize, EmbedMode};
use crate::error::{Error, Result};
use crate::filter::{Condition, Filter, Op};
use crate::limits;
use crate::memory::Memory;
use crate::ops::{awaitable, owner_setters};
use crate::record::{now, MemoryRecord, Owners};
use crate::store::{owner_filter, VectorKey};

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
    owners: Owners,
    top_k: usize,
    threshold: f32,
    metadata: Option<Value>,
    categories: Option<Vec<String>>,
    filter: Option<Filter>,
    filter_json: Option<Value>,
    include_expired: bool,
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
            owners: Owners::default(),
            top_k: limits::DEFAULT_TOP_K,
            threshold: 0.0,
            metadata: None,
            categories: None,
            filter: None,
            filter_json: None,
            include_expired: false,
        }
    }
}

impl<'a> SearchRequest<'a> {
    owner_setters!();

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

    /// Only memories whose metadata has these key–value pairs (a JSON object; each value
    /// may also be an operator object, see [`Filter`]).
    pub fn metadata(mut self, metadata: Value) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// Only memories with at least one of these categories.
    pub fn categories<I, S>(mut self, categories: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.categories = Some(categories.into_iter().map(Into::into).collect());
        self
    }

    /// Only memories matching this filter (combined with the other restrictions by AND).
    pub fn filter(mut self, filter: Filter) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Only memories matching this filter, in its JSON form; parsed when the request runs
    /// (400 if malformed).
    pub fn filters(mut self, filters: Value) -> Self {
        self.filter_json = Some(filters);
        self
    }

    /// Includes expired memories.
    pub fn include_expired(mut self, yes: bool) -> Self {
        self.include_expired = yes;
        self
    }

    async fn send(self) -> Result<SearchResult> {
        if let Query::Text(text) = &self.query {
            limits::text("query", text)?;
        }
        limits::top_k("top_k", self.top_k)?;
        limits::threshold(self.threshold)?;
        let filter = combine(
            &self.owners,
            self.metadata.as_ref(),
            self.categories.as_deref(),
            self.filter,
            self.filter_json.as_ref(),
        )?;
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
            .rank(&query, &filter, self.top_k, self.include_expired)
            .await?
            .into_iter()
            .filter(|hit| hit.score >= self.threshold)
            .collect();
        Ok(SearchResult { results })
    }
}

awaitable!(SearchRequest, SearchResult);

/// Combines the restrictions of a request into one filter.
pub(crate) fn combine(
    owners: &Owners,
    metadata: Option<&Value>,
    categories: Option<&[String]>,
    filter: Option<Filter>,
    filter_json: Option<&Value>,
) -> Result<Filter> {
    limits::owners(owners)?;
    let mut all = owner_filter(owners);
    if let Some(m) = metadata {
        if !m.is_object() {
            return Err(Error::invalid(format!(
                "the metadata filter must be a JSON object, got {m}"
            )));
        }
        all = all.and(Filter::from_json(&serde_json::json!({ "metadata": m }))?);
    }
    if let Some(c) = categories {
        all = all.and(Filter::Condition(Condition::Categories(Op::In(c.to_vec()))));
    }
    if let Some(f) = filter {
        all = all.and(f);
    }
    if let Some(json) = filter_json {
        all = all.and(Filter::from_json(json)?);
    }
    all.validate()?;
    Ok(all)
}

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
