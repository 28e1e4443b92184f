//! Hybrid fusion and scoring: every candidate with both signals, scored by the mode's
//! [`Calibration`](super::Calibration) model.

use std::collections::HashMap;

use super::calibration::Signals;
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
        for (i, (key, score)) in keyword.into_iter().enumerate() {
            if i < fetch {
                if !cosine.contains_key(&key) {
                    // Keyword-only candidates still get their exact cosine.
                    missing.push(key);
                }
                words.insert(key, score);
            } else if cosine.contains_key(&key) {
                words.insert(key, score);
            }
        }
        if !missing.is_empty() {
            cosine.extend(
                self.inner
                    .candidates
                    .cosines(query, &missing, among)
                    .await?,
            );
        }
        let candidates: Vec<(VectorKey, Signals)> = cosine
            .into_iter()
            .map(|(key, cos)| (key, Signals::new(Some(cos), words.remove(&key), scope)))
            .collect();
        Ok(self.scored(SearchMode::Hybrid, candidates, k))
    }
}
