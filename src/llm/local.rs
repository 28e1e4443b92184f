//! A quantized instruct model in process: Qwen2.5 (GGUF) on candle, on the CPU.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use candle_core::quantized::gguf_file;
use candle_core::{DType, Device};
use tokenizers::Tokenizer;

use super::decoding::{Backend, CancelOnDrop, Core, Decoding, Keep, LocalLlmStats, PREFIXES};
use super::prefixes::Prefixes;
use super::qwen2::{Cache, Qwen2};
use super::{ChatRequest, ChatResponse, Llm};
use crate::error::{Error, Result};
use crate::models::sha256_of;
use crate::progress::{OnProgress, Progress};

/// The pinned GGUF: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, as `scripts/fetch-models.sh qwen`
/// installs it.
const PINNED_NAME: &str = "model.gguf";
const PINNED_SHA256: &str = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046";
const PINNED_DIR: &str = "qwen2.5-1.5b-instruct-q4km";
/// The same file on the Hugging Face hub (feature `hub`): Qwen's own GGUF release.
#[cfg(feature = "hub")]
const PINNED_HUB: crate::hub::HubFile = crate::hub::HubFile {
    repo: "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
    revision: "f86cb2c1fa58255f8052cc32aeede1b7482d4361",
    path: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256: PINNED_SHA256,
};
/// The name the pinned model reports.
const PINNED_ID: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m";

/// A quantized Qwen2 instruct model (GGUF) running in process on the CPU with candle.
///
/// The pinned model, Qwen2.5-Coder-1.5B-Instruct in Q4_K_M, needs about 3 GB of memory. Its
/// speed depends on the build targeting AVX2 and FMA (see the README's "Known limits"):
/// `cargo run --release --example llm_speed` measures it. Calls are served one at a time.
///
/// The model keeps what it read of the last few chats that open with a system message
/// (everything before their last message, up to 1,024 tokens each, about 56 KB a token)
/// and a call that opens with one of them reads only the rest, so instructions that do not
/// change are read once. Only a whole kept prefix is reused, never a start shared with
/// one: read in other pieces, a prefix rounds differently. memlane's extraction and
/// reconciliation prompts are instructions and worked examples that never change, then
/// the question with its date, so every call after the first reads only the question. A
/// request that keeps its note ([`ChatRequest::keep_note`]: a last message that is a note,
/// then a question on its last line) also keeps the note, apart and one at a time: the
/// next question about the same note reads only itself (the second look asks two
/// questions of one memory and one fact this way). [`stats`](Self::stats) counts the
/// tokens reused.
///
/// A request with a JSON schema ([`ChatRequest::schema`], as every memlane prompt sends) is
/// decoded under it: at each step only the tokens that keep the reply valid can be chosen
/// (token masks from the schema, by llguidance), so the reply always parses. The model's
/// own choice is taken whenever the schema allows it, so a reply that would have been
/// valid anyway is unchanged. [`constrained(false)`](Self::constrained) turns that off.
///
/// Dropping the future of [`chat`](Llm::chat) (or of the `add` that awaits it) stops the
/// call before its next token, and a call still waiting for its turn never starts.
///
/// The tokenizer is built from the GGUF's own metadata (byte-level BPE with Qwen2's
/// pre-tokenizer and NFC normalisation) and checked to round-trip text on load.
///
/// ```no_run
/// # async fn run() -> memlane::Result<()> {
/// use std::sync::Arc;
/// use memlane::{LocalLlm, Memory};
/// let llm = LocalLlm::load_default()?;
/// let memory = Memory::builder().path("agent.db").llm(Arc::new(llm)).build().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LocalLlm {
    inner: Arc<Inner>,
    decoding: Decoding,
}

struct Inner {
    model: Qwen2,
    /// Calls run one at a time (each uses both cores already), and the one whose turn it is
    /// reads and keeps the prefixes.
    turn: Mutex<Prefixes<Cache>>,
    core: Core,
}

impl std::fmt::Debug for LocalLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalLlm")
            .field("model_id", &self.inner.core.model_id)
            .finish_non_exhaustive()
    }
}

impl LocalLlm {
    /// Where [`load_default`](Self::load_default) looks for the pinned model:
    /// `<model cache>/qwen2.5-1.5b-instruct-q4km/model.gguf` (the cache is
    /// `$MEMLANE_MODELS_DIR`, else `${XDG_CACHE_HOME:-$HOME/.cache}/memlane/models`).
    pub fn default_path() -> PathBuf {
        crate::models::cache_dir()
            .join(PINNED_DIR)
            .join(PINNED_NAME)
    }

    /// Loads the pinned model, verifying its SHA-256 first (a few seconds), from memlane's
    /// model cache ([`default_path`](Self::default_path)); when it is not there (feature
    /// `hub`), from the Hugging Face hub as [`Hub::from_env`](crate::Hub::from_env)
    /// configures it, downloading it once into the hub cache. A missing or altered file is
    /// a 503 that says how to get it.
    pub fn load_default() -> Result<LocalLlm> {
        Self::load_pinned(None)
    }

    /// [`load_default`](Self::load_default), reporting its progress (see
    /// [`progress`](crate::progress)): the download, when the file comes from the hub
    /// ([`Task::FetchModel`], in bytes), the file's check against the pinned SHA-256
    /// ([`Task::VerifyModel`], in bytes), then the loading of its weights
    /// ([`Task::LoadModel`], in layers).
    ///
    /// [`Task::FetchModel`]: crate::progress::Task::FetchModel
    /// [`Task::VerifyModel`]: crate::progress::Task::VerifyModel
    /// [`Task::LoadModel`]: crate::progress::Task::LoadModel
    pub fn load_default_with_progress(
        f: impl Fn(Progress) + Send + Sync + 'static,
    ) -> Result<LocalLlm> {
        Self::load_pinned(Some(&OnProgress::new(f)))
    }

    /// Loads the pinned model from a Hugging Face hub (or its cache), verified against
    /// its pinned SHA-256: Qwen's own release of the GGUF, at a pinned revision.
    #[cfg(feature = "hub")]
    pub fn load_from_hub(hub: &crate::Hub) -> Result<LocalLlm> {
        Self::from_hub(hub, None)
    }

    #[cfg(feature = "hub")]
    fn from_hub(hub: &crate::Hub, progress: Option<&OnProgress>) -> Result<LocalLlm> {
        let path = hub.fetch(&PINNED_HUB, progress)?;
        Self::load(&path, PINNED_ID, progress)
    }

    fn load_pinned(progress: Option<&OnProgress>) -> Result<LocalLlm> {
        let (path, model_id) = verified_pinned(progress)?;
        Self::load(&path, model_id, progress)
    }

    /// Loads any Qwen2-architecture instruct GGUF of your own (not hash-checked: you vouch
    /// for it). `model_id` is the name reported in usage.
    pub fn from_gguf(path: impl AsRef<Path>, model_id: &str) -> Result<LocalLlm> {
        Self::load(path.as_ref(), model_id, None)
    }

    fn load(path: &Path, model_id: &str, progress: Option<&OnProgress>) -> Result<LocalLlm> {
        let unavailable = |what: String| Error::ModelFile {
            detail: format!("cannot load {}: {what}", path.display()),
        };
        let mut file = std::fs::File::open(path).map_err(|e| unavailable(e.to_string()))?;
        let content = gguf_file::Content::read(&mut file)
            .map_err(|e| unavailable(format!("not a GGUF file ({e})")))?;
        super::gguf::check_architecture(&content).map_err(unavailable)?;
        let core = Core::from_gguf(&content.metadata, model_id).map_err(unavailable)?;
        let device = Device::Cpu;
        let model = Qwen2::from_gguf(&content, &mut file, &device, progress)
            .map_err(|e| unavailable(format!("its weights do not load ({e})")))?;
        Ok(LocalLlm {
            inner: Arc::new(Inner {
                model,
                turn: Mutex::new(Prefixes::new(PREFIXES)),
                core,
            }),
            decoding: Decoding::default(),
        })
    }

    /// Whether a reply with a JSON schema ([`ChatRequest::schema`]) is decoded under it (on
    /// by default): at each step only the tokens that keep the reply valid for the schema
    /// can be chosen, so it always parses. Off, the model writes freely and memlane asks
    /// again when a reply does not parse or breaks a rule: for comparison.
    pub fn constrained(mut self, on: bool) -> Self {
        self.decoding.constrained = on;
        self
    }

    /// Whether tokens a reply will likely copy are guessed and read ahead (off by default):
    /// where the last tokens written occur earlier in the reply or in the prompt's last
    /// message, what followed them there is read in the same pass as the token just
    /// written, and each guess the model then writes needs no pass of its own (prompt
    /// lookup). A fact copies the user's words, so most of it is read this way. Guesses
    /// grow while they come true and shrink when they do not, so free text pays little
    /// for them. Every token is still the model's pick from its own scores and wrong
    /// guesses are forgotten, so the reply is the one a pass per token writes (up to the
    /// rounding of a pass of several tokens against one, which can turn a near tie).
    ///
    /// Off by default: on this machine (two cores) it made the quickstart's second add
    /// 0.94x to 0.98x as long but saved no time over the held-out extraction evaluation
    /// (169 s against 167 s), where rounding changed 2 of 32 conversations' facts. A pass
    /// of four tokens costs 1.7 times a pass of one here, and a third to a half of the
    /// guesses are wrong; where passes cost less (more cores), it saves more.
    pub fn prompt_lookup(mut self, on: bool) -> Self {
        self.decoding.lookup = on;
        self
    }

    /// The tokenizer built from the GGUF.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.inner.core.tokenizer
    }

    /// What the model has done since it was loaded (all clones together).
    pub fn stats(&self) -> LocalLlmStats {
        self.inner.core.stats()
    }

    /// Runs a chat on the calling thread (it takes seconds: call it off the async runtime).
    pub fn chat_blocking(&self, request: &ChatRequest) -> Result<ChatResponse> {
        self.run(request, &AtomicBool::new(false))
    }

    /// Runs a chat, stopping before its next step once `cancelled` is set.
    fn run(&self, request: &ChatRequest, cancelled: &AtomicBool) -> Result<ChatResponse> {
        let inner = &self.inner;
        let prefixes = inner
            .turn
            .lock()
            .map_err(|_| Error::internal("local model lock poisoned"))?;
        let mut turn = CandleTurn {
            model: &inner.model,
            prefixes,
            cache: None,
            hidden: None,
        };
        inner.core.run(&mut turn, request, self.decoding, cancelled)
    }
}

/// The pinned model's file, checked against its SHA-256, with the name it reports: from
/// memlane's model cache, else (feature `hub`) from the hub, downloaded once.
pub(super) fn verified_pinned(progress: Option<&OnProgress>) -> Result<(PathBuf, &'static str)> {
    let path = LocalLlm::default_path();
    #[cfg(feature = "hub")]
    if !path.exists() {
        return crate::Hub::from_env()
            .fetch(&PINNED_HUB, progress)
            .map(|path| (path, PINNED_ID))
            .map_err(|e| crate::hub::after_cache_miss("language model", &path, e));
    }
    let actual = sha256_of(&path, progress).map_err(|e| Error::ModelFile {
        detail: format!(
            "the local language model is not installed ({}: {e}); run \
             `scripts/fetch-models.sh qwen` or set MEMLANE_MODELS_DIR to a directory that \
             holds {PINNED_DIR}/{PINNED_NAME}",
            path.display()
        ),
    })?;
    if actual != PINNED_SHA256 {
        return Err(Error::ModelFile {
            detail: format!(
                "{} has SHA-256 {actual}, expected {PINNED_SHA256}; the file is corrupt or \
                 not the pinned release: delete it and run `scripts/fetch-models.sh qwen` again",
                path.display()
            ),
        });
    }
    Ok((path, PINNED_ID))
}

/// One call's turn on the candle model: it holds the lock, so calls run one at a time.
struct CandleTurn<'a> {
    model: &'a Qwen2,
    prefixes: std::sync::MutexGuard<'a, Prefixes<Cache>>,
    cache: Option<Cache>,
    /// The final hidden states of the last [`Backend::read_each`].
    hidden: Option<candle_core::Tensor>,
}

impl Backend for CandleTurn<'_> {
    fn read_prompt(&mut self, tokens: &[u32], keep: Option<Keep>) -> Result<(Vec<f32>, usize)> {
        let model = self.model;
        let (prefix, note) = keep.map_or((0, None), |k| (k.prefix, k.note));
        let found_note = note.and_then(|end| {
            let kept = self.prefixes.get_note(&tokens[..end])?;
            Some((kept.prefix(end), end))
        });
        let found = found_note.or_else(|| {
            let kept = (prefix > 0).then(|| self.prefixes.get(&tokens[..prefix]))??;
            Some((kept.prefix(prefix), prefix))
        });
        let (mut cache, start) = found.unwrap_or_else(|| (model.cache(), 0));
        let mut at = start;
        if at < prefix {
            // The rest of the prefix to keep, kept for the calls after this one.
            model
                .forward(&tokens[at..prefix], &mut cache)
                .map_err(model_err)?;
            self.prefixes.keep(tokens[..prefix].to_vec(), cache.clone());
            at = prefix;
        }
        if let Some(end) = note.filter(|&end| at < end) {
            model
                .forward(&tokens[at..end], &mut cache)
                .map_err(model_err)?;
            self.prefixes
                .keep_note(tokens[..end].to_vec(), cache.clone());
            at = end;
        }
        let logits = model
            .forward(&tokens[at..], &mut cache)
            .map_err(model_err)?;
        self.cache = Some(cache);
        Ok((scores_of(&logits)?, start))
    }

    fn read_tokens(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        let cache = self
            .cache
            .as_mut()
            .ok_or_else(|| Error::internal("a token was read before the prompt"))?;
        let logits = self.model.forward(tokens, cache).map_err(model_err)?;
        scores_of(&logits)
    }

    fn read_each(&mut self, tokens: &[u32]) -> Result<()> {
        let cache = self
            .cache
            .as_mut()
            .ok_or_else(|| Error::internal("a token was read before the prompt"))?;
        self.hidden = Some(self.model.hidden(tokens, cache).map_err(model_err)?);
        Ok(())
    }

    fn scores_at(&mut self, i: usize) -> Result<Vec<f32>> {
        let hidden = self
            .hidden
            .as_ref()
            .ok_or_else(|| Error::internal("scores asked for before a read"))?;
        scores_of(&self.model.logits_at(hidden, i).map_err(model_err)?)
    }

    fn forget(&mut self, n: usize) -> Result<()> {
        self.cache
            .as_mut()
            .ok_or_else(|| Error::internal("a token was forgotten before the prompt"))?
            .forget(n);
        Ok(())
    }
}

fn model_err(e: candle_core::Error) -> Error {
    Error::provider(format!("the local model failed: {e}"), false)
}

/// The model's scores for the next token, one per token of the vocabulary.
fn scores_of(logits: &candle_core::Tensor) -> Result<Vec<f32>> {
    logits
        .flatten_all()
        .and_then(|l| l.to_dtype(DType::F32))
        .and_then(|l| l.to_vec1::<f32>())
        .map_err(model_err)
}

#[async_trait]
impl Llm for LocalLlm {
    fn model_id(&self) -> &str {
        &self.inner.core.model_id
    }

    fn reuses_prefixes(&self) -> bool {
        true
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse> {
        let this = self.clone();
        let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)));
        let cancelled = cancel.0.clone();
        let reply = tokio::task::spawn_blocking(move || this.run(&request, &cancelled))
            .await
            .map_err(|e| Error::internal(format!("local model task failed: {e}")))?;
        drop(cancel);
        reply
    }
}
