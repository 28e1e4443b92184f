//! Text embedders: the [`Embedder`] trait and its implementations.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[cfg(any(test, feature = "test-util"))]
mod hash;
#[cfg(feature = "local-embed")]
mod minilm;

#[cfg(any(test, feature = "test-util"))]
pub use hash::HashEmbedder;
#[cfg(feature = "local-embed")]
pub use minilm::MiniLm;

/// What a text is embedded as. Embedders that prefix queries (E5, BGE, …) use it; MiniLM
/// embeds both the same way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbedMode {
    /// A search query.
    Query,
    /// A document (a memory) to be stored.
    #[default]
    Document,
}

impl EmbedMode {
    /// Parses the spec's `mode` string (`query` or `document`).
    pub fn parse(mode: &str) -> Result<EmbedMode> {
        match mode {
            "query" => Ok(EmbedMode::Query),
            "document" => Ok(EmbedMode::Document),
            other => Err(Error::invalid_field(
                "mode",
                format!("unknown embedding mode {other:?}; use \"query\" or \"document\""),
            )),
        }
    }
}

/// Turns texts into vectors. Batch first: [`embed`](Embedder::embed) is the one required
/// method, [`embed_one`](Embedder::embed_one) is built on it.
///
/// Vectors need not be normalised; memlane normalises them before storing and searching, and
/// refuses vectors that are empty, zero or not finite.
#[async_trait]
pub trait Embedder: Send + Sync + std::fmt::Debug + 'static {
    /// The length of every vector this embedder returns.
    fn dimension(&self) -> usize;

    /// A stable name of the model, recorded in the store so that a store is not searched with
    /// vectors from another model.
    fn model_id(&self) -> &str;

    /// Embeds a batch of texts, one vector per text, in order.
    async fn embed(&self, texts: &[String], mode: EmbedMode) -> Result<Vec<Vec<f32>>>;

    /// Embeds one text.
    async fn embed_one(&self, text: &str, mode: EmbedMode) -> Result<Vec<f32>> {
        self.embed(&[text.to_owned()], mode)
            .await?
            .pop()
            .ok_or_else(|| Error::internal("embedder returned no vector for one text"))
    }
}

/// Embeds texts with `embedder` and checks what comes back: one vector per text, each of
/// its dimension, scaled to unit length (as memlane stores and searches them).
pub(crate) async fn embed_unit(
    embedder: &dyn Embedder,
    texts: &[String],
    mode: EmbedMode,
) -> Result<Vec<Vec<f32>>> {
    let vectors = embedder.embed(texts, mode).await?;
    if vectors.len() != texts.len() {
        return Err(Error::provider(
            format!(
                "the embedder returned {} vectors for {} texts",
                vectors.len(),
                texts.len()
            ),
            false,
        ));
    }
    let dimension = embedder.dimension();
    vectors
        .into_iter()
        .map(|v| normalize(v, dimension))
        .collect()
}

/// Checks a vector and scales it to unit length.
pub(crate) fn normalize(mut v: Vec<f32>, expected: usize) -> Result<Vec<f32>> {
    if v.len() != expected {
        return Err(Error::DimensionMismatch {
            expected,
            actual: v.len(),
        });
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(Error::Unprocessable {
            detail: "vector holds NaN or infinite values".into(),
        });
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if !(norm.is_finite() && norm > 0.0) {
        return Err(Error::Unprocessable {
            detail: "vector has zero length and no direction; it cannot be compared".into(),
        });
    }
    for x in &mut v {
        *x /= norm;
    }
    Ok(v)
}

/// Dot product (in `memlane-kernels`, built optimised when memlane is not).
pub(crate) use memlane_kernels::vector::dot;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_rejects_bad_vectors() {
        assert_eq!(
            normalize(vec![1.0; 3], 4).err().map(|e| e.status()),
            Some(422)
        );
        assert_eq!(
            normalize(vec![f32::NAN, 1.0], 2).err().map(|e| e.status()),
            Some(422)
        );
        assert_eq!(
            normalize(vec![0.0, 0.0], 2).err().map(|e| e.status()),
            Some(422)
        );
        let v = normalize(vec![3.0, 4.0], 2).unwrap_or_default();
        assert!((dot(&v, &v) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn dot_matches_naive() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.25).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-3);
    }
}
