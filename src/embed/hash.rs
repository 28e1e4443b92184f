//! A deterministic feature-hashing embedder for tests.

use async_trait::async_trait;

use super::{EmbedMode, Embedder};
use crate::error::{Error, Result};

/// A deterministic embedder that hashes words and character trigrams into a fixed number of
/// buckets. Texts that share words land near each other, which is enough to test search
/// logic without a model.
///
/// **For tests only**: it knows nothing of meaning ("car" and "automobile" are unrelated).
#[derive(Debug, Clone)]
pub struct HashEmbedder {
    dimension: usize,
    model_id: String,
}

impl HashEmbedder {
    /// A hashing embedder with `dimension` buckets (at least 1).
    pub fn new(dimension: usize) -> Self {
        let dimension = dimension.max(1);
        HashEmbedder {
            dimension,
            model_id: format!("memlane-hash-{dimension}"),
        }
    }

    fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dimension];
        let lower = text.to_lowercase();
        let mut add = |feature: &str, weight: f32| {
            let h = fnv1a(feature.as_bytes());
            let bucket = (h % self.dimension as u64) as usize;
            let sign = if (h >> 63) == 0 { 1.0 } else { -1.0 };
            if let Some(x) = v.get_mut(bucket) {
                *x += sign * weight;
            }
        };
        let mut empty = true;
        for word in lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            empty = false;
            add(word, 1.0);
            let chars: Vec<char> = format!(" {word} ").chars().collect();
            for tri in chars.windows(3) {
                add(&tri.iter().collect::<String>(), 0.3);
            }
        }
        // An empty or symbol-only text still gets a direction, so it can be stored.
        if empty {
            add("\u{0}empty", 1.0);
        }
        v
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[async_trait]
impl Embedder for HashEmbedder {
    fn dimension(&self) -> usize {
        self.dimension
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    async fn embed(&self, texts: &[String], _mode: EmbedMode) -> Result<Vec<Vec<f32>>> {
        if texts.len() > 100_000 {
            return Err(Error::invalid("too many texts in one embedding batch"));
        }
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::{dot, normalize};

    #[tokio::test]
    async fn similar_texts_are_closer() {
        let e = HashEmbedder::new(256);
        let texts = [
            "I love pizza".to_string(),
            "pizza is what I love".into(),
            "The tax form is due".into(),
        ];
        let v: Vec<Vec<f32>> = e
            .embed(&texts, EmbedMode::Document)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter_map(|v| normalize(v, 256).ok())
            .collect();
        assert_eq!(v.len(), 3);
        assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]) + 0.3);
        assert_eq!(
            e.embed_one("I love pizza", EmbedMode::Query).await.ok(),
            Some(e.vector("I love pizza"))
        );
    }
}
