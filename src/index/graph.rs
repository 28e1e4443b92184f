//! The HNSW graph (hnsw_rs, through `memlane_kernels::graph`) over int8-quantized
//! vectors, fresh or loaded from disk.

use hnsw_rs::hnswio::HnswIo;
pub(crate) use memlane_kernels::graph::{Graph, QUANT_SCALE};

use super::IndexParams;
use crate::store::VectorKey;

/// The graph stores vectors quantized to int8: a quarter of the memory, and of the memory
/// traffic per hop, of f32. Its distances only steer the walk; hits are re-ranked exactly
/// with the f32 vectors of the arena.
pub(crate) fn quantize(v: &[f32]) -> Vec<i8> {
    v.iter()
        .map(|x| (x * QUANT_SCALE).round().clamp(-QUANT_SCALE, QUANT_SCALE) as i8)
        .collect()
}

self_cell::self_cell!(
    /// A graph loaded from disk borrows from its loader.
    pub(super) struct LoadedGraph {
        owner: HnswIo,
        #[not_covariant]
        dependent: Graph,
    }
);

pub(super) enum GraphHolder {
    Fresh(Graph<'static>),
    Loaded(LoadedGraph),
    /// A saved graph being loaded in the background; searches meanwhile rank exactly.
    Loading,
}

impl GraphHolder {
    /// Runs `f` on the graph; `None` while it is loading.
    pub(super) fn with<R>(&self, f: impl for<'a> FnOnce(&Graph<'a>) -> R) -> Option<R> {
        match self {
            GraphHolder::Fresh(g) => Some(f(g)),
            GraphHolder::Loaded(l) => Some(l.with_dependent(|_, g| f(g))),
            GraphHolder::Loading => None,
        }
    }

    pub(super) fn is_loading(&self) -> bool {
        matches!(self, GraphHolder::Loading)
    }
}

pub(super) fn new_graph(params: &IndexParams, capacity: usize) -> Graph<'static> {
    // hnsw_rs's default layer cap; the capacity is only an allocation hint.
    memlane_kernels::graph::new(
        params.max_connections,
        capacity.max(1024),
        16,
        params.ef_construction,
    )
}

pub(super) fn insert_into<'v>(
    g: &Graph<'_>,
    items: impl IntoIterator<Item = (VectorKey, &'v [f32])>,
) {
    let quantized: Vec<(Vec<i8>, usize)> = items
        .into_iter()
        .map(|(k, v)| (quantize(v), k as usize))
        .collect();
    let mut rest = quantized.as_slice();
    // hnsw_rs lets two threads inserting into an empty graph both take its entry point,
    // and one of the two points is then never linked: the first point goes in alone.
    if memlane_kernels::graph::points(g) == 0 {
        if let Some(((v, k), after)) = rest.split_first() {
            memlane_kernels::graph::insert(g, v, *k);
            rest = after;
        }
    }
    if rest.len() >= 64 {
        let data: Vec<(&[i8], usize)> = rest.iter().map(|(v, k)| (v.as_slice(), *k)).collect();
        memlane_kernels::graph::parallel_insert(g, &data);
    } else {
        for (v, k) in rest {
            memlane_kernels::graph::insert(g, v, *k);
        }
    }
}

/// Borrows `(key, vector)` pairs as the graph helpers take them.
pub(super) fn pairs(items: &[(VectorKey, Vec<f32>)]) -> impl Iterator<Item = (VectorKey, &[f32])> {
    items.iter().map(|(k, v)| (*k, v.as_slice()))
}

#[cfg(test)]
mod tests {
    use hnsw_rs::prelude::Distance;
    use memlane_kernels::graph::QuantizedCosine;

    use super::*;
    use crate::embed::dot;

    #[test]
    fn quantized_distance_tracks_cosine() {
        let a = [0.6f32, 0.8, 0.0];
        let b = [0.8f32, 0.6, 0.0];
        let c = [-0.6f32, -0.8, 0.0];
        let d = |x: &[f32], y: &[f32]| QuantizedCosine.eval(&quantize(x), &quantize(y));
        assert!(
            d(&a, &a) < 1e-3,
            "identical vectors are at distance ~0, never below"
        );
        assert!((d(&a, &b) - (1.0 - dot(&a, &b))).abs() < 0.01);
        assert!((d(&a, &c) - 2.0).abs() < 0.01);
        assert_eq!(quantize(&[1.0, -1.0, 0.004]), vec![127, -127, 1]);
    }

    /// Points inserted in parallel into an empty graph are all reachable: hnsw_rs lets two
    /// threads each take the empty graph's entry point, leaving one point without a link.
    #[test]
    fn every_point_of_a_parallel_insert_into_an_empty_graph_is_reachable() {
        // The race is at the first points, so many small graphs.
        const POINTS: usize = 65;
        const GRAPHS: usize = 800;
        let vectors: Vec<(VectorKey, Vec<f32>)> = (0..POINTS)
            .map(|k| (k as VectorKey + 1, super::super::unit(k, 16)))
            .collect();
        let mut searched = 0;
        for _ in 0..GRAPHS {
            let g = new_graph(&IndexParams::default(), POINTS);
            insert_into(&g, pairs(&vectors));
            for (key, v) in &vectors {
                // Asked for every point, the graph must give every point back.
                let hits = memlane_kernels::graph::search(&g, &quantize(v), POINTS, POINTS);
                assert!(
                    hits.iter().any(|h| h.d_id == *key as usize),
                    "point {key} is unreachable"
                );
                searched += 1;
            }
        }
        assert_eq!(searched, GRAPHS * POINTS);
    }
}
