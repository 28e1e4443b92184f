//! The HNSW graph of memlane's index: hnsw_rs over int8-quantized unit vectors, with an
//! approximate cosine distance.
//!
//! hnsw_rs is generic over the vector type and the distance, so its walks are compiled in
//! the crate that names them. They are named here, behind functions that are not generic
//! (and never inlined elsewhere), so that they are compiled optimised with this crate
//! whatever memlane's own profile is.

use std::path::Path;

use hnsw_rs::api::AnnT;
use hnsw_rs::hnsw::{FilterT, Hnsw};
use hnsw_rs::hnswio::HnswIo;
use hnsw_rs::prelude::Distance;

pub use hnsw_rs::hnsw::Neighbour;

/// Scale of the int8 quantization: a unit vector's components lie in [-1, 1], so they map
/// to [-127, 127] without clipping.
pub const QUANT_SCALE: f32 = 127.0;

/// Approximate cosine distance between quantized unit vectors, `1 - dot`, clamped at 0
/// (hnsw_rs asserts on negative distances).
#[derive(Debug, Default, Clone, Copy)]
pub struct QuantizedCosine;

impl Distance<i8> for QuantizedCosine {
    fn eval(&self, a: &[i8], b: &[i8]) -> f32 {
        let dot = crate::vector::dot_i8(a, b);
        (1.0 - dot as f32 / (QUANT_SCALE * QUANT_SCALE)).max(0.0)
    }
}

/// The graph: points are int8 vectors, each with an id.
pub type Graph<'a> = Hnsw<'a, i8, QuantizedCosine>;

/// An empty graph of at most `max_connections` links per point (twice that on the lowest
/// layer) and `layers` layers, built with a beam of `ef_construction`; `capacity` is an
/// allocation hint.
#[inline(never)]
pub fn new(
    max_connections: usize,
    capacity: usize,
    layers: usize,
    ef_construction: usize,
) -> Graph<'static> {
    Hnsw::new(
        max_connections,
        capacity,
        layers,
        ef_construction,
        QuantizedCosine,
    )
}

/// Adds one point.
#[inline(never)]
pub fn insert(graph: &Graph<'_>, vector: &[i8], id: usize) {
    graph.insert_slice((vector, id));
}

/// Adds points over rayon's threads.
#[inline(never)]
pub fn parallel_insert(graph: &Graph<'_>, points: &Vec<(&[i8], usize)>) {
    graph.parallel_insert_slice(points);
}

/// Points in the graph.
#[inline(never)]
pub fn points(graph: &Graph<'_>) -> usize {
    graph.get_nb_point()
}

/// Up to `k` nearest points to `query`, walking with a beam of `ef`, nearest first.
#[inline(never)]
pub fn search(graph: &Graph<'_>, query: &[i8], k: usize, ef: usize) -> Vec<Neighbour> {
    graph.search(query, k, ef)
}

/// As [`search`], giving only points whose id `keep` accepts.
#[inline(never)]
pub fn search_filter(
    graph: &Graph<'_>,
    query: &[i8],
    k: usize,
    ef: usize,
    keep: &dyn Fn(&usize) -> bool,
) -> Vec<Neighbour> {
    graph.search_filter(query, k, ef, Some(&keep as &dyn FilterT))
}

/// Writes the graph's two files into `dir`, named after `basename`; returns the basename
/// hnsw_rs chose (it adds a suffix rather than overwrite a file).
#[inline(never)]
pub fn dump(graph: &Graph<'_>, dir: &Path, basename: &str) -> Result<String, String> {
    graph.file_dump(dir, basename).map_err(|e| e.to_string())
}

/// Reads a graph [`dump`] wrote, borrowing from its reader.
#[inline(never)]
pub fn load(io: &HnswIo) -> Result<Graph<'_>, String> {
    io.load_hnsw_with_dist(QuantizedCosine)
        .map_err(|e| e.to_string())
}
