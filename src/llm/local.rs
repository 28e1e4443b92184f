//! A quantized instruct model in process: Qwen2.5 (GGUF) on candle, on the CPU.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use candle_core::quantized::gguf_file;
use candle_core::{DType, Device};
use serde_json::{json, Value};
use tokenizers::Tokenizer;

use super::grammar::Grammars;
use super::prefixes::Prefixes;
use super::qwen2::{Cache, Qwen2};
use super::{ChatRequest, ChatResponse, Llm, Usage};
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

/// Qwen2's pre-tokenizer split (from its tokenizer.json): contractions, letter runs with one
/// leading non-letter, single digits, punctuation runs, newlines, spaces.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Prompts longer than this many tokens are refused (422): the model's window is 32k, but
/// on two CPU cores a prompt this long already takes about a minute.
pub const MAX_PROMPT_TOKENS: usize = 4096;

/// System messages kept read for reuse (see [`Prefixes`]): a few, such as extraction's and
/// reconciliation's.
pub(super) const PREFIXES: usize = 4;

/// A system message longer than this many tokens is not kept: each token read holds about
/// 56 KB of keys and values (28 layers, 2 key/value heads of 128 dimensions, f32).
pub(super) const MAX_PREFIX_TOKENS: usize = 1024;

/// A JSON reply whose last this many tokens were already written twice earlier in it is
/// looping (a small model at temperature 0 can list the same facts until its token
/// limit): it is stopped where the repetition began. A span this long covers more than
/// one fact or decision with its keys, and a third copy is asked for, so a reply that
/// repeats one fact once (and then goes on) is left alone.
const LOOP_SPAN: usize = 48;

/// A quantized Qwen2 instruct model (GGUF) running in process on the CPU with candle.
///
/// The pinned model, Qwen2.5-Coder-1.5B-Instruct in Q4_K_M, needs about 3 GB of memory. Its
/// speed depends on the build targeting AVX2 and FMA (see the README's "Known limits"):
/// `cargo run --release --example llm_speed` measures it. Calls are served one at a time.
///
/// The model keeps what it read of the last few system messages (up to 1,024 tokens each,
/// about 56 KB a token) and starts a call from the longest prefix it shares with one of
/// them, so a system message that does not change is read once. memlane's extraction and
/// reconciliation prompts open with the date to the minute, so calls reuse them whole only
/// within the same minute. [`stats`](Self::stats) counts the tokens reused.
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
    constrained: bool,
}

struct Inner {
    model: Qwen2,
    /// Calls run one at a time (each uses both cores already), and the one whose turn it is
    /// reads and keeps the prefixes.
    turn: Mutex<Prefixes<Cache>>,
    core: Core,
}

/// What a local model provider needs besides the model's arithmetic: the tokenizer built
/// from the GGUF, the token masks of JSON schemas, the stop tokens and the counters. Shared
/// by the candle model and llama.cpp's (feature `llama`), which run the same loop
/// ([`Core::run`]) over a [`Backend`].
pub(super) struct Core {
    pub(super) tokenizer: Tokenizer,
    /// Token masks for replies that must follow a JSON schema.
    grammars: Grammars,
    stop: Vec<u32>,
    /// `<|im_end|>`: a system message ends at the first.
    end_of_message: u32,
    pub(super) model_id: String,
    counters: Counters,
}

/// The model's arithmetic, as [`Core::run`] drives it through one call.
pub(super) trait Backend {
    /// Reads a prompt from its start, reusing what is kept of the longest prefix it shares
    /// with an earlier system message, and keeps what it read of its own system message
    /// (its first `system_end` tokens, if any) for later calls. Returns the scores of the
    /// next token, one per token of the vocabulary, and how many tokens were reused.
    fn read_prompt(
        &mut self,
        tokens: &[u32],
        system_end: Option<usize>,
    ) -> Result<(Vec<f32>, usize)>;

    /// Reads one more token; returns the scores of the next.
    fn read_token(&mut self, token: u32) -> Result<Vec<f32>>;
}

/// What the model has done since it was loaded; see [`LocalLlmStats`].
#[derive(Default)]
struct Counters {
    calls: AtomicU64,
    prompt_tokens: AtomicU64,
    reused_tokens: AtomicU64,
    written_tokens: AtomicU64,
    forced_tokens: AtomicU64,
    loops: AtomicU64,
}

/// What a [`LocalLlm`] has done since it was loaded, over all its clones: for logs and
/// metrics, and to see how much of its prompts the prefix cache saves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LocalLlmStats {
    /// Calls the model began to read (a call cancelled while it waited its turn is not
    /// one).
    pub calls: u64,
    /// Prompt tokens of those calls.
    pub prompt_tokens: u64,
    /// Of those, the tokens not read again: an earlier call had read them (the shared
    /// start of a system message).
    pub reused_tokens: u64,
    /// Tokens written, counted as each is written (so a call under way counts too).
    pub written_tokens: u64,
    /// Of those, the tokens a reply's JSON schema left no choice about (parts of keys,
    /// brackets, quotes).
    pub forced_tokens: u64,
    /// JSON replies stopped because they began to repeat themselves (the same facts
    /// listed over and over): each ends where the repetition began.
    pub loops: u64,
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
        let unavailable = |what: String| Error::Unavailable {
            detail: format!("cannot load {}: {what}", path.display()),
        };
        let mut file = std::fs::File::open(path).map_err(|e| unavailable(e.to_string()))?;
        let content = gguf_file::Content::read(&mut file)
            .map_err(|e| unavailable(format!("not a GGUF file ({e})")))?;
        check_architecture(&content).map_err(unavailable)?;
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
            constrained: true,
        })
    }

    /// Whether a reply with a JSON schema ([`ChatRequest::schema`]) is decoded under it (on
    /// by default): at each step only the tokens that keep the reply valid for the schema
    /// can be chosen, so it always parses. Off, the model writes freely and memlane asks
    /// again when a reply does not parse or breaks a rule: for comparison.
    pub fn constrained(mut self, on: bool) -> Self {
        self.constrained = on;
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
        };
        inner
            .core
            .run(&mut turn, request, self.constrained, cancelled)
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
    let actual = sha256_of(&path, progress).map_err(|e| Error::Unavailable {
        detail: format!(
            "the local language model is not installed ({}: {e}); run \
             `scripts/fetch-models.sh qwen` or set MEMLANE_MODELS_DIR to a directory that \
             holds {PINNED_DIR}/{PINNED_NAME}",
            path.display()
        ),
    })?;
    if actual != PINNED_SHA256 {
        return Err(Error::Unavailable {
            detail: format!(
                "{} has SHA-256 {actual}, expected {PINNED_SHA256}; the file is corrupt or \
                 not the pinned release: delete it and run `scripts/fetch-models.sh qwen` again",
                path.display()
            ),
        });
    }
    Ok((path, PINNED_ID))
}

/// Refuses a GGUF whose architecture is not qwen2.
pub(super) fn check_architecture(content: &gguf_file::Content) -> std::result::Result<(), String> {
    let arch = content
        .metadata
        .get("general.architecture")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .unwrap_or_default();
    if arch != "qwen2" {
        return Err(format!(
            "architecture {arch:?}; memlane's local models run qwen2 models"
        ));
    }
    Ok(())
}

/// One call's turn on the candle model: it holds the lock, so calls run one at a time.
struct CandleTurn<'a> {
    model: &'a Qwen2,
    prefixes: std::sync::MutexGuard<'a, Prefixes<Cache>>,
    cache: Option<Cache>,
}

impl Backend for CandleTurn<'_> {
    fn read_prompt(
        &mut self,
        tokens: &[u32],
        system_end: Option<usize>,
    ) -> Result<(Vec<f32>, usize)> {
        let model = self.model;
        let end = system_end.unwrap_or(0);
        let (mut cache, start) = match self.prefixes.longest(&tokens[..end]) {
            Some((shared, kept)) => (kept.prefix(shared).map_err(model_err)?, shared),
            None => (model.cache(), 0),
        };
        if start < end {
            // The rest of the system message, kept for the calls after this one.
            model
                .forward(&tokens[start..end], &mut cache)
                .map_err(model_err)?;
            self.prefixes.keep(tokens[..end].to_vec(), cache.clone());
        }
        let logits = model
            .forward(&tokens[end..], &mut cache)
            .map_err(model_err)?;
        self.cache = Some(cache);
        Ok((scores_of(&logits)?, start))
    }

    fn read_token(&mut self, token: u32) -> Result<Vec<f32>> {
        let cache = self
            .cache
            .as_mut()
            .ok_or_else(|| Error::internal("a token was read before the prompt"))?;
        let logits = self.model.forward(&[token], cache).map_err(model_err)?;
        scores_of(&logits)
    }
}

impl Core {
    /// The shared parts of a Qwen2-style ChatML instruct model, from its GGUF metadata.
    pub(super) fn from_gguf(
        metadata: &HashMap<String, gguf_file::Value>,
        model_id: &str,
    ) -> std::result::Result<Core, String> {
        let (tokenizer, tokenizer_json) = tokenizer_from_gguf(metadata)?;
        let end_of_message = tokenizer
            .token_to_id("<|im_end|>")
            .ok_or("its vocabulary has no <|im_end|>: not a ChatML instruct model")?;
        let stop: Vec<u32> = std::iter::once(end_of_message)
            .chain(tokenizer.token_to_id("<|endoftext|>"))
            .collect();
        let grammars = Grammars::new(&tokenizer_json, &tokenizer, end_of_message)?;
        Ok(Core {
            tokenizer,
            grammars,
            stop,
            end_of_message,
            model_id: model_id.to_owned(),
            counters: Counters::default(),
        })
    }

    pub(super) fn stats(&self) -> LocalLlmStats {
        let c = &self.counters;
        LocalLlmStats {
            calls: c.calls.load(Ordering::Relaxed),
            prompt_tokens: c.prompt_tokens.load(Ordering::Relaxed),
            reused_tokens: c.reused_tokens.load(Ordering::Relaxed),
            written_tokens: c.written_tokens.load(Ordering::Relaxed),
            forced_tokens: c.forced_tokens.load(Ordering::Relaxed),
            loops: c.loops.load(Ordering::Relaxed),
        }
    }

    /// Runs a chat on `backend`, stopping before its next step once `cancelled` is set.
    pub(super) fn run(
        &self,
        backend: &mut dyn Backend,
        request: &ChatRequest,
        constrained: bool,
        cancelled: &AtomicBool,
    ) -> Result<ChatResponse> {
        let stopped = || {
            cancelled.load(Ordering::Relaxed).then(|| Error::Provider {
                detail: "the local model call was cancelled".into(),
                transient: true,
            })
        };
        if let Some(e) = stopped() {
            return Err(e);
        }
        let mut prompt = String::new();
        for m in &request.messages {
            let role = match m.role.as_str() {
                "system" | "assistant" => m.role.as_str(),
                _ => "user",
            };
            prompt.push_str(&format!("<|im_start|>{role}\n{}<|im_end|>\n", m.content));
        }
        prompt.push_str("<|im_start|>assistant\n");
        // In JSON mode the reply is started for the model (`{"`, one token in Qwen's
        // vocabulary, so the model continues with a key): small models then write the
        // object instead of an introduction to it. A reply with a schema is also decoded
        // under it, from that start where the schema allows it.
        let mut matcher = match &request.schema {
            Some(schema) if constrained => Some(
                self.grammars
                    .matcher(schema)
                    .map_err(|detail| Error::InvalidInput { detail })?,
            ),
            _ => None,
        };
        let mut prefill = if request.json { "{\"" } else { "" };
        if let Some(m) = matcher.as_mut() {
            let ids = self
                .tokenizer
                .encode(prefill, false)
                .map_err(|e| Error::internal(format!("tokenizer failed: {e}")))?
                .get_ids()
                .to_vec();
            if m.validate_tokens(&ids).ok() == Some(ids.len()) {
                m.consume_tokens(&ids).map_err(grammar_err)?;
            } else {
                prefill = "";
            }
        }
        prompt.push_str(prefill);
        let encoding = self
            .tokenizer
            .encode(prompt.as_str(), false)
            .map_err(|e| Error::internal(format!("tokenizer failed: {e}")))?;
        let tokens = encoding.get_ids().to_vec();
        if tokens.len() > MAX_PROMPT_TOKENS {
            return Err(Error::Unprocessable {
                detail: format!(
                    "the prompt is {} tokens; the local model takes at most {MAX_PROMPT_TOKENS}: \
                     send fewer or shorter messages",
                    tokens.len()
                ),
            });
        }
        // The system message, through its `<|im_end|>`, is the prefix kept for reuse. Control
        // tokens are split out before the text is, so its tokens are the same whatever
        // follows.
        let system_end = match request.messages.first() {
            Some(m) if m.role == "system" => tokens
                .iter()
                .position(|&t| t == self.end_of_message)
                .map(|i| i + 1)
                .filter(|&end| end <= MAX_PREFIX_TOKENS && end < tokens.len()),
            _ => None,
        };
        let mut sampler = Sampler::new(request.temperature);
        let counters = &self.counters;
        counters.calls.fetch_add(1, Ordering::Relaxed);
        counters
            .prompt_tokens
            .fetch_add(tokens.len() as u64, Ordering::Relaxed);
        let (mut scores, start) = backend.read_prompt(&tokens, system_end)?;
        counters
            .reused_tokens
            .fetch_add(start as u64, Ordering::Relaxed);
        let mut generated: Vec<u32> = Vec::new();
        for _ in 0..request.max_tokens {
            if let Some(e) = stopped() {
                return Err(e);
            }
            // Under a schema the model chooses among the tokens it allows: its own choice
            // whenever that is one of them, so a reply that would have been valid anyway
            // comes out the same.
            let next = match matcher.as_mut() {
                None => sampler.pick(&scores),
                Some(m) => {
                    let allowed = m.compute_mask().map_err(grammar_err)?;
                    if allowed.num_set() == 1 {
                        counters.forced_tokens.fetch_add(1, Ordering::Relaxed);
                    }
                    let next = sample_allowed(&mut sampler, scores, &allowed, request)?;
                    if !self.stop.contains(&next) {
                        m.consume_token(next).map_err(grammar_err)?;
                    }
                    next
                }
            };
            if self.stop.contains(&next) {
                break;
            }
            generated.push(next);
            counters.written_tokens.fetch_add(1, Ordering::Relaxed);
            if request.json {
                if let Some(start) = loop_start(&generated, LOOP_SPAN) {
                    // The reply ends where it began to repeat itself; its complete part is
                    // read as a cut-off reply is (see `recover_json`).
                    tracing::debug!(
                        written = generated.len(),
                        kept = start,
                        "local model reply stopped in a loop"
                    );
                    counters.loops.fetch_add(1, Ordering::Relaxed);
                    generated.truncate(start);
                    break;
                }
            }
            if matcher.as_ref().is_some_and(|m| m.is_stopped()) {
                // The reply is complete: nothing may follow, so nothing more is read.
                break;
            }
            scores = backend.read_token(next)?;
        }

        tracing::debug!(
            prompt = tokens.len(),
            reused = start,
            generated = generated.len(),
            "local model call"
        );
        let text = self
            .tokenizer
            .decode(&generated, true)
            .map_err(|e| Error::internal(format!("tokenizer failed to decode: {e}")))?;
        Ok(ChatResponse::new(
            format!("{prefill}{text}"),
            Usage {
                prompt_tokens: tokens.len() as u64,
                completion_tokens: generated.len() as u64,
            },
            self.model_id.clone(),
        ))
    }
}

/// Where `tokens` began to repeat itself, if its last `span` tokens were already written
/// twice before: the start of the second copy, traced back as far as it matches the first.
fn loop_start(tokens: &[u32], span: usize) -> Option<usize> {
    let n = tokens.len();
    if span == 0 || n <= span {
        return None;
    }
    let tail = &tokens[n - span..];
    let mut copies = (0..n - span)
        .rev()
        .filter(|&i| &tokens[i..i + span] == tail);
    // The latest earlier copy (it may overlap the last one): the shortest cycle.
    let earlier = copies.next()?;
    copies.next()?;
    let (mut first, mut second) = (earlier, n - span);
    while first > 0 && tokens[first - 1] == tokens[second - 1] {
        first -= 1;
        second -= 1;
    }
    Some(second)
}

fn model_err(e: candle_core::Error) -> Error {
    Error::Provider {
        detail: format!("the local model failed: {e}"),
        transient: false,
    }
}

fn grammar_err(e: impl std::fmt::Display) -> Error {
    Error::Provider {
        detail: format!("constrained decoding failed: {e}"),
        transient: false,
    }
}

/// The next token among those `allowed`: the most likely at temperature 0, else sampled
/// from the model's distribution renormalised over them.
fn sample_allowed(
    sampler: &mut Sampler,
    mut scores: Vec<f32>,
    allowed: &llguidance::toktrie::SimpleVob,
    request: &ChatRequest,
) -> Result<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, score) in scores.iter_mut().enumerate() {
        if i < allowed.len() && allowed.is_allowed(i as u32) {
            if best.is_none_or(|(_, b)| *score > b) {
                best = Some((i, *score));
            }
        } else {
            *score = f32::NEG_INFINITY;
        }
    }
    let Some((best, _)) = best else {
        return Err(Error::Provider {
            detail: "constrained decoding left no token to choose: the reply's JSON schema \
                     cannot be completed"
                .into(),
            transient: false,
        });
    };
    if request.temperature <= 0.0 {
        return Ok(best as u32);
    }
    Ok(sampler.pick(&scores))
}

/// The model's scores for the next token, one per token of the vocabulary.
fn scores_of(logits: &candle_core::Tensor) -> Result<Vec<f32>> {
    logits
        .flatten_all()
        .and_then(|l| l.to_dtype(DType::F32))
        .and_then(|l| l.to_vec1::<f32>())
        .map_err(model_err)
}

/// Picks each next token from the model's scores: the most likely at temperature 0, else
/// one drawn from their softmax at that temperature, with a fixed seed (a request gives
/// the same reply each time).
struct Sampler {
    temperature: f32,
    state: u64,
}

impl Sampler {
    fn new(temperature: f32) -> Self {
        Sampler {
            temperature,
            state: 299_792_458,
        }
    }

    fn pick(&mut self, scores: &[f32]) -> u32 {
        let best = scores
            .iter()
            .enumerate()
            .fold((0, f32::NEG_INFINITY), |(bi, bs), (i, &s)| {
                if s > bs {
                    (i, s)
                } else {
                    (bi, bs)
                }
            });
        if self.temperature <= 0.0 || !best.1.is_finite() {
            return best.0 as u32;
        }
        let t = f64::from(self.temperature);
        let weight = |s: f32| match s.is_finite() {
            true => ((f64::from(s) - f64::from(best.1)) / t).exp(),
            false => 0.0,
        };
        let total: f64 = scores.iter().map(|&s| weight(s)).sum();
        let mut target = self.uniform() * total;
        for (i, &s) in scores.iter().enumerate() {
            target -= weight(s);
            if target < 0.0 {
                return i as u32;
            }
        }
        best.0 as u32
    }

    /// A uniform draw in [0, 1) (xorshift64*).
    fn uniform(&mut self) -> f64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let x = self.state.wrapping_mul(0x2545_f491_4f6c_dd1d);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Sets its flag when dropped: the future of a call, dropped before the call on the
/// blocking pool ends, tells it to stop.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[async_trait]
impl Llm for LocalLlm {
    fn model_id(&self) -> &str {
        &self.inner.core.model_id
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

/// Builds the tokenizer from `tokenizer.ggml.*` metadata: byte-level BPE over the GGUF's
/// vocabulary and merges, Qwen2's pre-tokenizer split, NFC, control tokens as special
/// tokens; then checks that text round-trips. Returns the tokenizer and its
/// `tokenizer.json`.
fn tokenizer_from_gguf(
    metadata: &HashMap<String, gguf_file::Value>,
) -> std::result::Result<(Tokenizer, Value), String> {
    let strings = |key: &str| -> std::result::Result<Vec<String>, String> {
        let values = metadata
            .get(key)
            .ok_or_else(|| format!("its metadata has no {key}"))?
            .to_vec()
            .map_err(|e| format!("{key}: {e}"))?;
        values
            .iter()
            .map(|v| v.to_string().cloned().map_err(|e| format!("{key}: {e}")))
            .collect()
    };
    let model = metadata
        .get("tokenizer.ggml.model")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .unwrap_or_default();
    if model != "gpt2" {
        return Err(format!(
            "tokenizer model {model:?}; only byte-level BPE (gpt2) is supported"
        ));
    }
    let tokens = strings("tokenizer.ggml.tokens")?;
    let merges = strings("tokenizer.ggml.merges")?;
    let types: Vec<i32> = match metadata.get("tokenizer.ggml.token_type") {
        Some(v) => v
            .to_vec()
            .map_err(|e| e.to_string())?
            .iter()
            .map(|t| t.to_i32().unwrap_or(1))
            .collect(),
        None => Vec::new(),
    };
    let mut vocab = serde_json::Map::new();
    let mut added = Vec::new();
    for (id, token) in tokens.iter().enumerate() {
        vocab.insert(token.clone(), json!(id));
        // 3: control (<|im_start|>, <|im_end|>, …), 4: user-defined.
        if matches!(types.get(id), Some(3 | 4)) {
            added.push(json!({
                "id": id, "content": token, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": true
            }));
        }
    }
    let byte_level = json!({
        "type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false
    });
    let spec = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated", "invert": false},
            byte_level.clone()
        ]},
        "post_processor": null,
        "decoder": byte_level,
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null,
            "continuing_subword_prefix": null, "end_of_word_suffix": null,
            "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": Value::Object(vocab), "merges": merges
        }
    });
    let tokenizer: Tokenizer = spec
        .to_string()
        .parse()
        .map_err(|e| format!("its tokenizer metadata does not build a tokenizer ({e})"))?;
    let sample = "Ana's café, 2026-11-22: \"¿Dónde?\" 東京\n  {\"facts\": []}";
    let ids = tokenizer
        .encode(sample, false)
        .map_err(|e| format!("its tokenizer cannot encode ({e})"))?;
    let back = tokenizer
        .decode(ids.get_ids(), false)
        .map_err(|e| format!("its tokenizer cannot decode ({e})"))?;
    if back != sample {
        return Err(format!(
            "its tokenizer does not round-trip text ({sample:?} came back as {back:?})"
        ));
    }
    Ok((tokenizer, spec))
}

#[cfg(test)]
mod tests {
    use super::{loop_start, Sampler};

    #[test]
    fn greedy_picks_the_highest_score_and_sampling_follows_the_softmax() {
        let mut greedy = Sampler::new(0.0);
        assert_eq!(greedy.pick(&[0.5, 2.0, f32::NAN, 1.9]), 1);
        assert_eq!(greedy.pick(&[f32::NEG_INFINITY; 3]), 0);
        // At temperature 1, scores 0 and ln 3 are drawn one time in four and three in
        // four; a masked (-inf) token never is.
        let mut sampler = Sampler::new(1.0);
        let scores = [0.0, 3f32.ln(), f32::NEG_INFINITY];
        let mut counts = [0u32; 3];
        for _ in 0..4000 {
            counts[sampler.pick(&scores) as usize] += 1;
        }
        assert_eq!(counts[2], 0);
        assert!((2880..=3120).contains(&counts[1]), "{counts:?}");
        // A fixed seed: the same draws each time.
        let mut again = Sampler::new(1.0);
        let first: Vec<u32> = (0..50).map(|_| again.pick(&scores)).collect();
        let mut once_more = Sampler::new(1.0);
        assert_eq!(
            first,
            (0..50).map(|_| once_more.pick(&scores)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_loop_is_cut_where_its_second_copy_begins() {
        // A reply that states 1..=5, then repeats 3, 4, 5 over and over.
        let mut tokens: Vec<u32> = vec![1, 2, 3, 4, 5];
        let mut cut = None;
        for step in 0..30 {
            tokens.push([3, 4, 5][step % 3]);
            if let Some(at) = loop_start(&tokens, 4) {
                cut = Some((tokens.len(), at));
                break;
            }
        }
        // Seen once the last four tokens were written twice before, after
        // 1 2 3 4 5 3 4 5 3 4 5 3; cut where the second copy of 3 4 5 begins, keeping one.
        assert_eq!(cut, Some((12, 5)));
        assert_eq!(&tokens[..5], &[1, 2, 3, 4, 5]);
        // A cycle as short as one token is one too.
        assert_eq!(loop_start(&[9, 7, 7, 7, 7, 7], 3), Some(2));
    }

    #[test]
    fn one_repeat_is_not_a_loop() {
        // A fact written twice, then the reply goes on: not stopped.
        let fact = [10, 11, 12, 13];
        let tokens: Vec<u32> = [&[1, 2][..], &fact, &fact, &[3, 4]].concat();
        for end in 0..=tokens.len() {
            assert_eq!(loop_start(&tokens[..end], 4), None, "{:?}", &tokens[..end]);
        }
    }

    #[test]
    fn text_that_does_not_repeat_a_whole_span_is_not_a_loop() {
        // Repeats shorter than the span (keys and brackets between facts) are not loops.
        let tokens: Vec<u32> = (0..40).flat_map(|fact| [100, 101, 102, fact]).collect();
        assert_eq!(loop_start(&tokens, 4), None);
        assert_eq!(loop_start(&tokens, 5), None);
        assert_eq!(loop_start(&[1, 2, 3], 3), None);
        assert_eq!(loop_start(&[], 3), None);
        assert_eq!(loop_start(&[1, 1, 1], 0), None);
    }
}
