//! Where a search gets its candidates.
//!
//! A store on a database server ranks in the database; a store in a file is ranked by the
//! engine's in-process indexes, derived from it. Either way the ranking engine asks a
//! [`CandidateSource`] for the nearest vectors and the best keyword matches, and fuses,
//! hydrates, reranks and cuts the same way.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{KeywordHits, VectorKey};
use crate::error::Result;
use crate::filter::Filter;

/// What a search asks its candidates for: the live memories matching a filter at a time.
#[derive(Debug, Clone, Copy)]
pub struct Among<'a> {
    /// Which memories.
    pub filter: &'a Filter,
    /// The current time, for expiry.
    pub now: DateTime<Utc>,
    /// Whether expired memories count too.
    pub include_expired: bool,
}

impl<'a> Among<'a> {
    /// The live memories matching `filter` at `now` (expired ones too when asked).
    pub fn new(filter: &'a Filter, now: DateTime<Utc>, include_expired: bool) -> Self {
        Among {
            filter,
            now,
            include_expired,
        }
    }
}

/// A source of search candidates.
#[async_trait]
pub trait CandidateSource: Send + Sync + std::fmt::Debug {
    /// For each unit query vector, the `k` nearest live vectors among the memories, with
    /// their cosine, best first. One memory's or a small filter's candidates are ranked
    /// exactly; a large set may be ranked approximately.
    async fn nearest(
        &self,
        queries: Vec<Vec<f32>>,
        among: Among<'_>,
        k: usize,
    ) -> Result<Vec<Vec<(VectorKey, f32)>>>;

    /// For each query's terms (see [`query_terms`](crate::store::query_terms)), the `k` best BM25 matches
    /// among the memories (see [`crate::store::keyword`] for the scores), the terms weighed
    /// as if the store held at least `min_rows` memories ([`KeywordQuery::min_rows`]).
    ///
    /// [`KeywordQuery::min_rows`]: crate::store::KeywordQuery::min_rows
    async fn keyword(
        &self,
        queries: &[Vec<String>],
        among: Among<'_>,
        k: usize,
        min_rows: u64,
    ) -> Result<KeywordHits>;

    /// How many memories `among` holds, up to `cap`, when this source knows it without
    /// asking the store (`None`: ask the store).
    async fn count(&self, among: Among<'_>, cap: usize) -> Result<Option<usize>> {
        let _ = (among, cap);
        Ok(None)
    }

    /// The exact cosines of a unit query with the vectors of these keys (keys of memories
    /// no longer live, or outside `among`'s time, are left out).
    async fn cosines(
        &self,
        query: &[f32],
        keys: &[VectorKey],
        among: Among<'_>,
    ) -> Result<Vec<(VectorKey, f32)>>;
}
