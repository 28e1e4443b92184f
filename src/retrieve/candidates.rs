//! Candidates per mode: the nearest vectors, the best keyword matches, or both, fused; and
//! the in-process candidate source of stores without one of their own.

use std::sync::Arc;

use async_trait::async_trait;
use tracing::Instrument;

use super::clock;
use super::fusion::{Prior, Ranked, Scoring};
use super::period::Period;
use super::SearchMode;
use super::Signals;
use crate::error::{Error, Result};
use crate::index::VectorIndex;
use crate::limits;
use crate::memory::Memory;
use crate::store::keyword::rank_rows;
use crate::store::{Among, CandidateSource, KeywordHits, KeywordQuery, Store, VectorKey};
use crate::text;

/// Candidates from the engine's in-process vector index and, for keywords, the store's own
/// keyword index (or, without one, its rows read in process).
pub(crate) struct InProcess {
    pub(crate) store: Arc<dyn Store>,
    /// None for a memory without an embedder (keyword search only).
    pub(crate) index: Option<Arc<VectorIndex>>,
}

impl InProcess {
    fn index(&self) -> Result<&Arc<VectorIndex>> {
        self.index
            .as_ref()
            .ok_or_else(|| crate::memory::no_embedder("searching by vector"))
    }
}

/// What the index alone knows of the memories a read asks for.
enum Owned {
    /// Every current memory.
    All,
    /// The current memories of some owners: among these keys, those live now.
    Keys(Vec<VectorKey>),
    /// Nothing: the store names them.
    Unknown,
}

impl InProcess {
    fn owned(&self, index: &VectorIndex, among: Among<'_>) -> Result<Owned> {
        if among.include_expired {
            return Ok(Owned::Unknown);
        }
        if among.filter.is_current() {
            return Ok(Owned::All);
        }
        Ok(match among.filter.current_owners() {
            Some(pins) => Owned::Keys(index.owner_keys(&pins)?),
            None => Owned::Unknown,
        })
    }
}

impl std::fmt::Debug for InProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcess")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl CandidateSource for InProcess {
    async fn nearest(
        &self,
        queries: Vec<Vec<f32>>,
        among: Among<'_>,
        k: usize,
    ) -> Result<Vec<Vec<(VectorKey, f32)>>> {
        // See every write committed before this call, by any handle or process.
        let index = Arc::clone(self.index()?);
        index.refresh(&*self.store).await?;
        let max_exact = index.params().exact_search_max;
        // Every current memory is what the index holds as unexpired at `now` (a superseded
        // memory's vector expired for good), and so are the current memories of owners,
        // among the keys the index lists for them; any other set is the store's to name, and
        // then its keys alone decide.
        let (now, keys) = match self.owned(&index, among)? {
            Owned::All => (clock(false, among.now), None),
            Owned::Keys(keys) => (clock(false, among.now), Some(keys)),
            Owned::Unknown => (i64::MIN, Some(self.store.keys(among).await?)),
        };
        let candidates = keys.as_ref().map_or(index.live_count()?, Vec::len);
        let work = candidates.saturating_mul(queries.len());
        let rank = move || {
            queries
                .iter()
                .map(|query| match &keys {
                    _ if candidates <= max_exact => index.exact(query, keys.as_deref(), k, now),
                    keys => index.search(query, k, now, keys.as_deref()),
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

    async fn keyword(
        &self,
        queries: &[Vec<String>],
        among: Among<'_>,
        k: usize,
        min_rows: u64,
    ) -> Result<KeywordHits> {
        let query = KeywordQuery {
            queries,
            filter: among.filter,
            now: among.now,
            include_expired: among.include_expired,
            limit: k,
            min_rows,
        };
        match self.store.keyword_index() {
            Some(index) => index.search(query).await,
            None => rank_rows(&*self.store, query).await,
        }
    }

    async fn count(&self, among: Among<'_>, cap: usize) -> Result<Option<usize>> {
        let Some(index) = &self.index else {
            return Ok(None);
        };
        if among.include_expired {
            return Ok(None);
        }
        let now = clock(false, among.now);
        if among.filter.is_current() {
            // Every current memory: the index's live keys.
            index.refresh(&*self.store).await?;
            return Ok(Some(index.count_live(now, cap)?));
        }
        let Some(pins) = among.filter.current_owners() else {
            return Ok(None);
        };
        index.refresh(&*self.store).await?;
        Ok(Some(index.count_owned(&pins, now, cap)?))
    }

    async fn cosines(
        &self,
        query: &[f32],
        keys: &[VectorKey],
        among: Among<'_>,
    ) -> Result<Vec<(VectorKey, f32)>> {
        // The keys were chosen among the memories asked for (superseded ones too, when
        // asked): only expiry is the index's to check.
        let now = if among.filter.is_current() {
            clock(among.include_expired, among.now)
        } else {
            i64::MIN
        };
        self.index()?.cosines(query, keys, now)
    }
}

impl Memory {
    /// How many memories a search among `among` ranks among, up to [`Signals::MAX_SCOPE`]: the
    /// prior of every score (see [`Logistic`](super::Logistic)).
    pub(crate) async fn scope(&self, among: Among<'_>) -> Result<usize> {
        let candidates = Arc::clone(&self.space().candidates);
        if let Some(n) = candidates.count(among, Signals::MAX_SCOPE).await? {
            return Ok(n);
        }
        self.inner.store.count(among, Signals::MAX_SCOPE).await
    }

    /// The `k` nearest live vectors among the memories matching `filter`, scored.
    pub(crate) async fn vector_ranked(
        &self,
        query: &[f32],
        among: Among<'_>,
        k: usize,
        period: Option<&Period>,
    ) -> Result<Vec<Ranked>> {
        let space = self.space();
        // The model check runs beside the search (a read of its own on a database server),
        // and its 409 comes first.
        let (check, ranked, scope) = tokio::join!(
            self.check_space(&space),
            space
                .candidates
                .nearest(vec![query.to_vec()], among, k.max(Signals::REFERENCE_RANK))
                .instrument(tracing::debug_span!("index", queries = 1)),
            self.scope(among),
        );
        check?;
        let (mut ranked, scope) = (ranked?, scope?);
        let nearest = ranked.pop().unwrap_or_default();
        let fifth = Signals::fifth_of(nearest.iter().map(|n| n.1));
        let candidates = nearest
            .into_iter()
            .map(|(key, c)| {
                let mut signals = Signals::cosine(c, scope);
                signals.fifth_nearest = Some(fifth);
                (key, signals)
            })
            .collect();
        self.scored(
            Scoring::Search(SearchMode::Vector),
            candidates,
            k,
            among,
            period,
        )
        .await
    }

    /// Keyword ranking: the best BM25 matches, scored (the score also weighs how much of
    /// the query a memory covers, so more candidates are taken than are kept), the terms
    /// weighed as if the store held at least `min_rows` memories
    /// ([`KeywordQuery::min_rows`]).
    pub(crate) async fn keyword_ranked(
        &self,
        text: &str,
        among: Among<'_>,
        k: usize,
        min_rows: u64,
        period: Option<&Period>,
    ) -> Result<Vec<Ranked>> {
        let terms = [text::query_terms(text)];
        let space = self.space();
        let (mut hits, scope) = tokio::try_join!(
            space
                .candidates
                .keyword(&terms, among, fetch(k), min_rows)
                .instrument(tracing::debug_span!("keyword")),
            self.scope(among),
        )?;
        let hits = hits.pop().unwrap_or_default();
        let candidates = hits
            .into_iter()
            .map(|(key, m)| (key, Signals::keyword(m, scope)))
            .collect();
        self.scored(
            Scoring::Search(SearchMode::Keyword),
            candidates,
            k,
            among,
            period,
        )
        .await
    }

    /// Hybrid ranking: for each text with its vector, the vector and keyword candidates
    /// together, fused (see [`super::fusion`]); the texts share the reads of the filter's
    /// memories.
    ///
    /// A search counts its memories for the prior (`prior` `None`); reconciling a fact gives
    /// a fixed one ([`Prior::Among`]).
    pub(crate) async fn hybrid_ranked(
        &self,
        texts: &[String],
        queries: Vec<Vec<f32>>,
        among: Among<'_>,
        k: usize,
        prior: Option<Prior>,
        period: Option<&Period>,
    ) -> Result<Vec<Vec<Ranked>>> {
        // Over-fetch from each side, as the best hybrid hit may rank low on one of them. Every
        // keyword match comes back (the store scores them all anyway), so that a vector
        // candidate's keyword match is known exactly: one that shares no word with the query
        // is scored by its meaning alone.
        let fetch = fetch(k);
        let terms: Vec<Vec<String>> = texts.iter().map(|t| text::query_terms(t)).collect();
        let space = self.space();
        let candidates = &space.candidates;
        // The two sides read the store on their own connections, side by side.
        let counted = async {
            match prior {
                Some(prior) => Ok(prior),
                None => Ok(Prior::Search(self.scope(among).await?)),
            }
        };
        // The model check runs beside them too, and its 409 comes first.
        let (check, vectors, keywords, prior) = tokio::join!(
            self.check_space(&space),
            candidates
                .nearest(queries.clone(), among, fetch)
                .instrument(tracing::debug_span!("index", queries = queries.len())),
            candidates
                .keyword(&terms, among, usize::MAX, prior.map_or(0, Prior::min_rows))
                .instrument(tracing::debug_span!("keyword")),
            counted,
        );
        check?;
        let (vectors, keywords, prior) = (vectors?, keywords?, prior?);
        let mut out = Vec::with_capacity(queries.len());
        for ((query, vector), keyword) in queries.iter().zip(vectors).zip(keywords) {
            out.push(
                self.fuse(query, vector, keyword, fetch, k, among, prior, period)
                    .await?,
            );
        }
        Ok(out)
    }
}

/// How many candidates a ranking of `k` takes from each side: `4 · k`, at least 60 and at
/// most [`limits::MAX_TOP_K`], unless `k` itself is more.
pub(crate) fn fetch(k: usize) -> usize {
    (4 * k).clamp(60, limits::MAX_TOP_K).max(k)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::store::SqliteStore;
    use crate::{Filter, HashEmbedder, Memory};

    /// One owner's current memories come from the index's own lists, and everyone's from
    /// its live keys: neither the search nor its prior lists or counts the store's rows;
    /// any other filter still asks the store.
    #[tokio::test]
    async fn a_search_of_one_owner_or_of_everyone_neither_lists_nor_counts_rows_in_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path().join("m.db")).unwrap());
        let memory = Memory::builder()
            .store(store.clone())
            .embedder(Arc::new(HashEmbedder::new(64)))
            .build()
            .await
            .unwrap();
        let mut ids = Vec::new();
        for (user, text) in [
            ("ann", "tea in kyoto"),
            ("ann", "jazz on sunday"),
            ("ben", "tea with lemon"),
            ("ben", "rain in oslo"),
        ] {
            let added = memory.add(text).user(user).infer(false).await.unwrap();
            ids.push(added.results[0].id);
        }
        // One more that expires at once: in the index, but not current.
        memory
            .add("tea that went cold")
            .user("ann")
            .infer(false)
            .expiry(chrono::Utc::now() + chrono::Duration::milliseconds(300))
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        let hits = memory.search("tea").user("ann").await.unwrap();
        let mut texts: Vec<String> = hits.results.into_iter().map(|h| h.record.memory).collect();
        texts.sort();
        assert_eq!(texts, vec!["jazz on sunday", "tea in kyoto"]);
        let hits = memory
            .search("tea")
            .user("ben")
            .agent("none")
            .await
            .unwrap();
        assert!(hits.results.is_empty());
        assert_eq!(
            store.filter_reads(),
            0,
            "one owner's search asked the store"
        );
        // Everyone's: ranked among the three current memories, counted by the index.
        memory.delete(ids[3]).await.unwrap();
        let hits = memory
            .search("tea")
            .mode(crate::SearchMode::Vector)
            .await
            .unwrap();
        assert_eq!(hits.results.len(), 3);
        assert!(
            hits.results.iter().all(|h| h.signals.scope == 3),
            "{hits:?}"
        );
        assert_eq!(
            store.filter_reads(),
            0,
            "a search of everyone asked the store"
        );
        let other = Filter::from_json(&serde_json::json!({"categories": {"in": ["x"]}})).unwrap();
        let hits = memory
            .search("tea")
            .user("ann")
            .filter(other)
            .await
            .unwrap();
        assert!(hits.results.is_empty());
        assert!(store.filter_reads() > 0, "the counter counts");
    }
}
