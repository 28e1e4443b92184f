//! Hybrid fusion: one score from a cosine and a BM25 score.

use std::collections::HashMap;

use crate::error::Result;
use crate::memory::Memory;
use crate::store::{Among, VectorKey};

impl Memory {
    /// One hybrid ranking from its vector and keyword candidates: each candidate scored
    /// `HYBRID_VECTOR_WEIGHT · cosine + (1 − HYBRID_VECTOR_WEIGHT) · squash(BM25)`.
    pub(super) async fn fuse(
        &self,
        query: &[f32],
        vector: Vec<(VectorKey, f32)>,
        keyword: Vec<(VectorKey, f32)>,
        k: usize,
        among: Among<'_>,
    ) -> Result<Vec<(VectorKey, f32)>> {
        let mut bm25: HashMap<VectorKey, f32> = keyword.into_iter().collect();
        let mut cosine: HashMap<VectorKey, f32> = vector.into_iter().collect();
        // Keyword-only candidates still get their exact cosine.
        let missing: Vec<VectorKey> = bm25
            .keys()
            .filter(|k| !cosine.contains_key(k))
            .copied()
            .collect();
        if !missing.is_empty() {
            cosine.extend(
                self.inner
                    .candidates
                    .cosines(query, &missing, among)
                    .await?,
            );
        }
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
}

/// The BM25 score at which a keyword match counts as half a perfect match.
const BM25_HALF: f32 = 5.0;
/// The weight of the cosine in a hybrid score (the keyword score has the rest), chosen on
/// LoCoMo, where questions share many words with their evidence; it keeps weight on meaning
/// for stores where they share none.
const HYBRID_VECTOR_WEIGHT: f32 = 0.3;

/// Maps a BM25 score (unbounded, positive) into [0, 1): `b / (b + BM25_HALF)`.
pub(crate) fn squash(bm25: f32) -> f32 {
    let b = bm25.max(0.0);
    b / (b + BM25_HALF)
}
