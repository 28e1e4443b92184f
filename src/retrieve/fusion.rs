//! Hybrid fusion and scoring: every candidate with both signals, scored by the mode's
//! [`Calibration`](super::Calibration) model.

use std::collections::{HashMap, HashSet};

use super::period::Period;
use super::SearchMode;
use super::{Neighbours, Signals};
use crate::error::Result;
use crate::memory::Memory;
use crate::store::keyword::RECONCILE_MIN_ROWS;
use crate::store::{Among, KeywordScore, VectorKey};

/// A ranked candidate: its key, score and signals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ranked {
    pub(crate) key: VectorKey,
    pub(crate) score: f32,
    pub(crate) signals: Signals,
}

impl Memory {
    /// Scores candidates, best first (ties by key), and keeps `k`. With a `period` the
    /// query names, each candidate's signals say whether it was stored in it (one read of
    /// the candidates' keys).
    pub(crate) async fn scored(
        &self,
        scoring: Scoring,
        candidates: Vec<(VectorKey, Signals)>,
        k: usize,
        among: Among<'_>,
        period: Option<&Period>,
    ) -> Result<Vec<Ranked>> {
        let mut candidates = candidates;
        if let Some(period) = period.filter(|_| !candidates.is_empty()) {
            let keys: Vec<VectorKey> = candidates.iter().map(|c| c.0).collect();
            // The candidates are of the search's memories already: only the period is asked.
            let filter = period.filter();
            let within: HashSet<VectorKey> = self
                .inner
                .store
                .admitted(&keys, Among::new(&filter, among.now, among.include_expired))
                .await?
                .into_iter()
                .collect();
            for (key, signals) in &mut candidates {
                signals.period = Some(within.contains(key));
            }
        }
        let calibration = &self.inner.calibration;
        let mut ranked: Vec<Ranked> = candidates
            .into_iter()
            .map(|(key, signals)| Ranked {
                key,
                score: match scoring {
                    Scoring::Search(mode) => calibration.score(mode, &signals),
                    Scoring::Related => calibration
                        .score(SearchMode::Vector, &signals)
                        .max(calibration.score(SearchMode::Hybrid, &signals)),
                },
                signals,
            })
            .collect();
        ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.key.cmp(&b.key)));
        ranked.truncate(k);
        Ok(ranked)
    }

    /// One hybrid ranking from its vector candidates and every keyword match (best first):
    /// the vector candidates and the best `fetch` keyword matches, each with its exact
    /// cosine and its keyword match, if it has one, and, for a search, its neighbours.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn fuse(
        &self,
        query: &[f32],
        vector: Vec<(VectorKey, f32)>,
        keyword: Vec<(VectorKey, KeywordScore)>,
        fetch: usize,
        k: usize,
        among: Among<'_>,
        prior: Prior,
        period: Option<&Period>,
    ) -> Result<Vec<Ranked>> {
        // The vector candidates are the nearest memories the search admits: the fifth of
        // them is every candidate's reference.
        let fifth = Signals::fifth_of(vector.iter().map(|v| v.1));
        let mut cosine: HashMap<VectorKey, f32> = vector.into_iter().collect();
        // The best `fetch` keyword matches are candidates; the rest only tell the vector
        // candidates' keyword match (one pass, looking keys up in the small map).
        let mut words: HashMap<VectorKey, KeywordScore> = HashMap::new();
        let mut missing: Vec<VectorKey> = Vec::new();
        for (i, (key, score)) in keyword.iter().enumerate() {
            if i < fetch {
                if !cosine.contains_key(key) {
                    // Keyword-only candidates still get their exact cosine.
                    missing.push(*key);
                }
                words.insert(*key, *score);
            } else if cosine.contains_key(key) {
                words.insert(*key, *score);
            }
        }
        let pool: HashSet<VectorKey> = cosine.keys().chain(&missing).copied().collect();
        let scoring = match prior {
            Prior::Search(_) => Scoring::Search(SearchMode::Hybrid),
            Prior::Among(_) => Scoring::Related,
        };
        let (scope, pairs) = match prior {
            Prior::Search(scope) => {
                let (pairs, outside) = self.replies_around(&pool, among).await?;
                // The neighbours outside the candidates: their cosine, and their keyword match
                // from the same list.
                missing.extend(outside.iter().copied());
                words.extend(
                    keyword
                        .iter()
                        .filter(|(key, _)| outside.contains(key))
                        .copied(),
                );
                (scope, pairs)
            }
            Prior::Among(scope) => (scope, Vec::new()),
        };
        if !missing.is_empty() {
            cosine.extend(
                self.space()
                    .candidates
                    .cosines(query, &missing, among)
                    .await?,
            );
        }
        // A neighbour's words count by what it says itself: the reply to a memory holds the
        // memory as its context, and would otherwise lend the memory its own words back.
        let mut of: HashMap<VectorKey, Neighbours> = HashMap::new();
        for &(a, b) in &pairs {
            for (me, other) in [(a, b), (b, a)] {
                let coverage = words.get(&other).map_or(0.0, |w| w.text_coverage);
                let n = of.entry(me).or_default();
                n.cosine = n.cosine.max(cosine.get(&other).copied().unwrap_or(0.0));
                n.coverage = n.coverage.max(coverage);
            }
        }
        let candidates: Vec<(VectorKey, Signals)> = pool
            .iter()
            .filter_map(|&key| {
                let cos = *cosine.get(&key)?;
                let mut signals = Signals::new(Some(cos), words.get(&key).copied(), scope);
                signals.neighbours = of.get(&key).copied();
                signals.fifth_nearest = Some(fifth);
                Some((key, signals))
            })
            .collect();
        self.scored(scoring, candidates, k, among, period).await
    }

    /// The candidates' neighbours: the reply pairs (see `Store::replies`) that join a
    /// candidate to the message it replied to or to the reply to it, of those the filter
    /// admits; and the neighbours that are not candidates themselves.
    async fn replies_around(
        &self,
        pool: &HashSet<VectorKey>,
        among: Among<'_>,
    ) -> Result<(Vec<(VectorKey, VectorKey)>, HashSet<VectorKey>)> {
        let mut around: Vec<VectorKey> = pool
            .iter()
            .flat_map(|&key| [Some(key), key.checked_sub(1), key.checked_add(1)])
            .flatten()
            .collect();
        around.sort_unstable();
        around.dedup();
        let mut pairs = self.inner.store.replies(&around).await?;
        pairs.retain(|(a, b)| pool.contains(a) || pool.contains(b));
        let outside: Vec<VectorKey> = pairs
            .iter()
            .flat_map(|&(a, b)| [a, b])
            .filter(|k| !pool.contains(k))
            .collect();
        let admitted: HashSet<VectorKey> = if outside.is_empty() {
            HashSet::new()
        } else {
            self.inner
                .store
                .admitted(&outside, among)
                .await?
                .into_iter()
                .collect()
        };
        let known = |k: &VectorKey| pool.contains(k) || admitted.contains(k);
        pairs.retain(|(a, b)| known(a) && known(b));
        Ok((pairs, admitted))
    }
}

/// What a ranking's scores estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scoring {
    /// A search's: the relevance to its query, by its mode's model.
    Search(SearchMode),
    /// Reconciling's: how related a new fact is to a memory, the greater of what their
    /// meaning alone (the vector model) and every signal (the hybrid model) make it. Both
    /// are monotone in the evidence, and so is the greater: a memory shown for its meaning
    /// is still shown when it shares a word with the fact too.
    Related,
}

/// The prior of a hybrid ranking's scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prior {
    /// A search: among this many memories (those its filter admits, counted), each memory
    /// with its conversation neighbours.
    Search(usize),
    /// Among this many memories, each on its own: how related a new fact is to its nearest
    /// memories, whatever the store's size and the conversations around them (its terms
    /// weighed as in a store of at least [`RECONCILE_MIN_ROWS`] memories).
    Among(usize),
}

impl Prior {
    /// The [`KeywordQuery::min_rows`](crate::store::KeywordQuery::min_rows) of a ranking
    /// with this prior: a search's terms are weighed by its store as it is.
    pub(crate) fn min_rows(self) -> u64 {
        match self {
            Prior::Search(_) => 0,
            Prior::Among(_) => RECONCILE_MIN_ROWS,
        }
    }
}
