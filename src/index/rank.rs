//! Ranking: exact over the arena, or by the graph with exact re-ranking.

use super::graph::quantize;
use super::live::State;
use super::{read_lock, VectorIndex};
use crate::embed::dot;
use crate::error::{Error, Result};
use crate::store::VectorKey;

impl VectorIndex {
    /// Exact ranking of a unit query against live vectors: `keys` (any order), or every live
    /// vector when `None`. `(key, cosine)` best first, at most `k`.
    pub(crate) fn exact(
        &self,
        query: &[f32],
        keys: Option<&[VectorKey]>,
        k: usize,
        now: i64,
    ) -> Result<Vec<(VectorKey, f32)>> {
        let s = read_lock(&self.state)?;
        Ok(rank_exact(&s, query, keys, k, now))
    }

    /// Exact cosines of a unit query with live vectors, for the given keys (dead or unknown
    /// keys are skipped).
    pub(crate) fn cosines(
        &self,
        query: &[f32],
        keys: &[VectorKey],
        now: i64,
    ) -> Result<Vec<(VectorKey, f32)>> {
        let s = read_lock(&self.state)?;
        Ok(keys
            .iter()
            .filter(|key| s.is_live(**key, now))
            .filter_map(|key| s.arena.get(*key).map(|v| (*key, dot(query, v))))
            .collect())
    }

    /// The vectors of live keys (expired included), in the order given; other keys are
    /// skipped.
    pub(crate) fn vectors(&self, keys: &[VectorKey]) -> Result<Vec<(VectorKey, Vec<f32>)>> {
        let s = read_lock(&self.state)?;
        Ok(keys
            .iter()
            .filter(|key| s.is_live(**key, i64::MIN))
            .filter_map(|key| s.arena.get(*key).map(|v| (*key, v.to_vec())))
            .collect())
    }

    /// Approximate nearest live neighbours of a unit query: `(key, cosine)` best first.
    /// `allowed` (sorted) restricts the result to those keys.
    pub(crate) fn search(
        &self,
        query: &[f32],
        k: usize,
        now: i64,
        allowed: Option<&[VectorKey]>,
    ) -> Result<Vec<(VectorKey, f32)>> {
        if query.len() != self.dimension {
            return Err(Error::DimensionMismatch {
                expected: self.dimension,
                actual: query.len(),
            });
        }
        if k == 0 {
            return Ok(Vec::new());
        }
        // Lock order, everywhere: graph before state.
        let graph = read_lock(&self.graph)?;
        let s = read_lock(&self.state)?;
        if graph.is_loading() {
            // Exact, and slower, until the saved graph is in.
            return Ok(rank_exact(&s, query, allowed, k, now));
        }
        let ef = self.params.beam(s.points.max(s.live)).max(k);
        let quantized = quantize(query);
        // The whole beam comes back from the walk and is re-ranked exactly from the arena.
        let rerank = |found: Vec<memlane_kernels::graph::Neighbour>| -> Vec<(VectorKey, f32)> {
            let scored = found
                .into_iter()
                .map(|n| n.d_id as VectorKey)
                .filter(|key| {
                    s.is_live(*key, now) && allowed.is_none_or(|a| a.binary_search(key).is_ok())
                })
                .filter_map(|key| s.arena.get(key).map(|v| (key, dot(query, v))))
                .collect();
            top_k(scored, k)
        };
        if allowed.is_none() {
            // hnsw_rs walks much further when given any filter, so skip masked points
            // afterwards instead: widen the beam to cover the masked share, and fall back to
            // the filtered walk only if that was not enough.
            let masked = s.masked();
            let share = masked as f64 / s.points.max(1) as f64;
            let beam = if masked == 0 {
                ef
            } else {
                ((ef as f64 / (1.0 - share).max(0.05)) * 1.5).ceil() as usize
            }
            .clamp(ef, 4096);
            let hits = rerank(
                graph
                    .with(|g| memlane_kernels::graph::search(g, &quantized, beam, beam))
                    .unwrap_or_default(),
            );
            if hits.len() == k || hits.len() >= s.live {
                return Ok(hits);
            }
        }
        let mut ef = ef;
        if let Some(allowed) = allowed {
            // A selective filter leaves few eligible nodes along the walk; widen the beam in
            // proportion so that the graph still yields k of them.
            let share = allowed.len().max(1) as f64 / s.live.max(1) as f64;
            ef = ((ef as f64 / share.max(0.01)).ceil() as usize).clamp(ef, 4096);
        }
        let filter = |id: &usize| {
            let key = *id as VectorKey;
            s.is_live(key, now) && allowed.is_none_or(|a| a.binary_search(&key).is_ok())
        };
        Ok(rerank(
            graph
                .with(|g| memlane_kernels::graph::search_filter(g, &quantized, ef, ef, &filter))
                .unwrap_or_default(),
        ))
    }
}

/// Exact ranking of a unit query against live vectors: `keys` (any order), or every live
/// vector when `None`.
fn rank_exact(
    s: &State,
    query: &[f32],
    keys: Option<&[VectorKey]>,
    k: usize,
    now: i64,
) -> Vec<(VectorKey, f32)> {
    let score = |key: VectorKey| {
        s.is_live(key, now)
            .then(|| s.arena.get(key).map(|v| (key, dot(query, v))))
            .flatten()
    };
    let scored: Vec<(VectorKey, f32)> = match keys {
        Some(keys) => keys.iter().filter_map(|key| score(*key)).collect(),
        None => s.arena.keys().filter_map(score).collect(),
    };
    top_k(scored, k)
}

/// The `k` best of scored keys, best first; ties go to the lower key.
fn top_k(mut scored: Vec<(VectorKey, f32)>, k: usize) -> Vec<(VectorKey, f32)> {
    let by_score =
        |a: &(VectorKey, f32), b: &(VectorKey, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if scored.len() > k {
        scored.select_nth_unstable_by(k, by_score);
        scored.truncate(k);
    }
    scored.sort_by(by_score);
    scored
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_ranks_by_score_then_key() {
        let scored = vec![(1, 0.0), (3, 1.0), (2, 1.0), (4, 0.6)];
        let r = top_k(scored, 3);
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), vec![2, 3, 4]);
    }
}
