//! Hybrid fusion and scoring: every candidate with both signals, scored by the mode's
//! [`Calibration`](super::Calibration) model.

use std::collections::{HashMap, HashSet};

use super::calibration::{Neighbours, Signals};
use super::SearchMode;
use crate::error::Result;
use crate::memory::Memory;
use crate::store::{Among, KeywordScore, VectorKey};

/// A ranked candidate: its key, score and signals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ranked {
    pub(crate) key: VectorKey,
    pub(crate) score: f32,
    pub(crate) signals: Signals,
}

impl Memory {
    /// Scores candidates in a mode, best first (ties by key), and keeps `k`.
    pub(crate) fn scored(
        &self,
        mode: SearchMode,
        candidates: impl IntoIterator<Item = (VectorKey, Signals)>,
        k: usize,
    ) -> Vec<Ranked> {
        let calibration = &self.inner.calibration;
        let mut ranked: Vec<Ranked> = candidates
            .into_iter()
            .map(|(key, signals)| Ranked {
                key,
                score: calibration.score(mode, &signals),
                signals,
            })
            .collect();
        ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.key.cmp(&b.key)));
        ranked.truncate(k);
        ranked
    }

    /// One hybrid ranking from its vector candidates and every keyword match (best first):
    /// the vector candidates and the best `fetch` keyword matches, each with its exact
    /// cosine and its keyword match, if it has one.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn fuse(
        &self,
        query: &[f32],
        vector: Vec<(VectorKey, f32)>,
        keyword: Vec<(VectorKey, KeywordScore)>,
        fetch: usize,
        k: usize,
        among: Among<'_>,
        scope: usize,
    ) -> Result<Vec<Ranked>> {
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
        // The candidates' neighbours: the message each replied to and the reply to it (see
        // `Store::replies`), of those the filter admits.
        let pool: HashSet<VectorKey> = cosine.keys().chain(&missing).copied().collect();
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
        pairs.retain(|(a, b)| {
            (pool.contains(a) || admitted.contains(a)) && (pool.contains(b) || admitted.contains(b))
        });
        missing.extend(admitted.iter().copied());
        if !missing.is_empty() {
            cosine.extend(
                self.inner
                    .candidates
                    .cosines(query, &missing, among)
                    .await?,
            );
        }
        // The neighbours' keyword matches, from the same list.
        let mut around_words: HashMap<VectorKey, KeywordScore> = HashMap::new();
        for (key, score) in &keyword {
            if admitted.contains(key) {
                around_words.insert(*key, *score);
            }
        }
        let mut of: HashMap<VectorKey, Neighbours> = HashMap::new();
        for &(a, b) in &pairs {
            for (me, other) in [(a, b), (b, a)] {
                let w = words
                    .get(&other)
                    .or_else(|| around_words.get(&other))
                    .copied()
                    .unwrap_or_default();
                let c = cosine.get(&other).copied().unwrap_or(0.0);
                let n = of.entry(me).or_default();
                n.cosine = n.cosine.max(c);
                n.coverage = n.coverage.max(w.coverage);
            }
        }
        let candidates: Vec<(VectorKey, Signals)> = pool
            .iter()
            .filter_map(|&key| {
                let cos = *cosine.get(&key)?;
                let mut signals = Signals::new(Some(cos), words.get(&key).copied(), scope);
                signals.neighbours = of.get(&key).copied();
                Some((key, signals))
            })
            .collect();
        Ok(self.scored(SearchMode::Hybrid, candidates, k))
    }
}
