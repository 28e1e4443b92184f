//! The same quantized Qwen2 instruct model as [`LocalLlm`](super::LocalLlm), run by
//! llama.cpp (feature `llama`): llama.cpp's CPU kernels read a prompt and write a reply
//! faster than candle's on this kind of machine.
//!
//! Only the arithmetic changes. The prompt, the tokenizer (built from the GGUF's own
//! metadata, so the token ids are llama.cpp's), the JSON-schema token masks, the sampler and
//! the loop stop are [`LocalLlm`](super::LocalLlm)'s ([`Core`]), so the two providers give
//! the same replies up to the models' rounding.
//!
//! llama.cpp's context may not leave the thread that made it, so the model lives on a
//! thread of its own and calls reach it over a channel, one at a time.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc, OnceLock};

use async_trait::async_trait;
use candle_core::quantized::gguf_file;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;

use super::decoding::{Backend, CancelOnDrop, Core, Decoding, Keep, LocalLlmStats, PREFIXES};
use super::prefixes::Prefixes;
use super::{ChatRequest, ChatResponse, Llm};
use crate::error::{Error, Result};

/// Tokens read in one llama.cpp batch.
const BATCH: usize = 512;
/// The sequence of calls that keep no prefix; the kept prefixes are the sequences after it.
const SCRATCH: i32 = 0;

/// llama.cpp's global state, set up once per process.
static BACKEND: OnceLock<std::result::Result<LlamaBackend, String>> = OnceLock::new();

fn backend() -> Result<&'static LlamaBackend> {
    BACKEND
        .get_or_init(|| {
            LlamaBackend::init()
                .map(|mut b| {
                    b.void_logs();
                    b
                })
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::provider(format!("llama.cpp did not start: {e}"), false))
}

/// The pinned local model (or a Qwen2 GGUF of your own) run by llama.cpp.
///
/// A drop-in alternative to [`LocalLlm`](super::LocalLlm), behind the feature `llama`: the
/// same file, prompts, JSON-schema constrained decoding, loop stop and prefix reuse, with
/// llama.cpp's kernels doing the arithmetic. Building it compiles llama.cpp from the source
/// its crate ships, which needs cmake, a C++ compiler and libclang (`scripts/llama-deps.sh`
/// installs them on Debian). `cargo run --release --features llama --example llm_speed`
/// compares the two on this machine.
///
/// Calls are served one at a time by a thread that holds the model; dropping the future of
/// [`chat`](Llm::chat) stops the call before its next token. The thread ends when the last
/// clone is dropped.
///
/// A reply depends on its request alone, not on the calls served before it: each kept
/// prefix has cells of its own in llama.cpp's cache, so a call's tokens sit in the same
/// places whatever came before. That costs memory: the cache holds six sequences of 5,120
/// tokens, about 840 MiB of keys and values for the pinned model.
///
/// ```no_run
/// # async fn run() -> memlane::Result<()> {
/// use std::sync::Arc;
/// use memlane::{LlamaCppLlm, Memory};
/// let llm = LlamaCppLlm::load_default()?;
/// let memory = Memory::builder().path("agent.db").llm(Arc::new(llm)).build().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LlamaCppLlm {
    core: Arc<Core>,
    jobs: mpsc::Sender<Job>,
    decoding: Decoding,
}

impl std::fmt::Debug for LlamaCppLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaCppLlm")
            .field("model_id", &self.core.model_id)
            .finish_non_exhaustive()
    }
}

/// One call for the model's thread.
struct Job {
    request: ChatRequest,
    decoding: Decoding,
    cancelled: Arc<AtomicBool>,
    reply: tokio::sync::oneshot::Sender<Result<ChatResponse>>,
}

impl LlamaCppLlm {
    /// Loads the pinned model from memlane's model cache, verifying its SHA-256 first, as
    /// [`LocalLlm::load_default`](super::LocalLlm::load_default) does.
    pub fn load_default() -> Result<LlamaCppLlm> {
        let (path, model_id) = super::local::verified_pinned(None)?;
        Self::load(&path, model_id)
    }

    /// Loads any Qwen2-architecture instruct GGUF of your own (not hash-checked: you vouch
    /// for it). `model_id` is the name reported in usage.
    pub fn from_gguf(path: impl AsRef<Path>, model_id: &str) -> Result<LlamaCppLlm> {
        Self::load(path.as_ref(), model_id)
    }

    fn load(path: &Path, model_id: &str) -> Result<LlamaCppLlm> {
        let unavailable = |what: String| Error::ModelFile {
            detail: format!("cannot load {}: {what}", path.display()),
        };
        let mut file = std::fs::File::open(path).map_err(|e| unavailable(e.to_string()))?;
        let content = gguf_file::Content::read(&mut file)
            .map_err(|e| unavailable(format!("not a GGUF file ({e})")))?;
        super::gguf::check_architecture(&content).map_err(unavailable)?;
        let core = Arc::new(Core::from_gguf(&content.metadata, model_id).map_err(unavailable)?);
        drop(file);
        let backend = backend()?;
        let (jobs, queue) = mpsc::channel::<Job>();
        let (loaded, on_load) = mpsc::channel::<std::result::Result<(), String>>();
        let path: PathBuf = path.to_owned();
        let thread_core = core.clone();
        std::thread::Builder::new()
            .name("memlane-llama".into())
            .spawn(move || serve(backend, &path, &thread_core, &queue, &loaded))
            .map_err(|e| unavailable(format!("cannot start its thread ({e})")))?;
        on_load
            .recv()
            .map_err(|_| unavailable("its thread ended while loading".into()))?
            .map_err(unavailable)?;
        Ok(LlamaCppLlm {
            core,
            jobs,
            decoding: Decoding::default(),
        })
    }

    /// Whether a reply with a JSON schema is decoded under it (on by default), as
    /// [`LocalLlm::constrained`](super::LocalLlm::constrained).
    pub fn constrained(mut self, on: bool) -> Self {
        self.decoding.constrained = on;
        self
    }

    /// Whether tokens a reply will likely copy are guessed and read ahead, as
    /// [`LocalLlm::prompt_lookup`](super::LocalLlm::prompt_lookup) does (off by default).
    /// On this machine's two cores llama.cpp took longer with it (206 s against 187 s on
    /// the contradiction set's tuned half): a pass of several tokens costs it nearly their
    /// price one by one.
    pub fn prompt_lookup(mut self, on: bool) -> Self {
        self.decoding.lookup = on;
        self
    }

    /// What the model has done since it was loaded (all clones together).
    pub fn stats(&self) -> LocalLlmStats {
        self.core.stats()
    }
}

/// The model's thread: loads the model, says whether it could, then serves calls until
/// every sender is gone.
fn serve(
    backend: &'static LlamaBackend,
    path: &Path,
    core: &Core,
    queue: &mpsc::Receiver<Job>,
    loaded: &mpsc::Sender<std::result::Result<(), String>>,
) {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let threads = i32::try_from(threads).unwrap_or(2);
    let model = match LlamaModel::load_from_file(backend, path, &LlamaModelParams::default()) {
        Ok(model) => model,
        Err(e) => {
            let _ = loaded.send(Err(format!("llama.cpp cannot load it ({e})")));
            return;
        }
    };
    // Each sequence has cells of its own (a stream of llama.cpp's cache) for a whole call: a
    // kept prefix, and the call that starts from it after it. A call's cells then hold only
    // its prefix and itself, in the same places whatever calls came before, so its reply is
    // the same too (in one cache shared by all sequences, where a call's tokens go depends on
    // what the others hold, and so does how the model's sums round).
    let cells = (PREFIXES + 1) * (super::MAX_PROMPT_TOKENS + 1024);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(cells as u32))
        .with_n_batch(BATCH as u32)
        .with_n_seq_max(PREFIXES as u32 + 1)
        .with_kv_unified(false)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut context = match model.new_context(backend, params) {
        Ok(context) => context,
        Err(e) => {
            let _ = loaded.send(Err(format!("llama.cpp cannot make a context for it ({e})")));
            return;
        }
    };
    if loaded.send(Ok(())).is_err() {
        return;
    }
    let mut kept = Kept {
        prefixes: Prefixes::new(PREFIXES),
        free: (1..=PREFIXES as i32).collect(),
    };
    while let Ok(job) = queue.recv() {
        let mut turn = LlamaTurn {
            context: &mut context,
            kept: &mut kept,
            batch: LlamaBatch::new(BATCH, 1),
            seq: SCRATCH,
            position: 0,
            batch_start: 0,
        };
        let reply = core.run(&mut turn, &job.request, job.decoding, &job.cancelled);
        // The caller may have gone (a dropped future): its reply is not needed.
        let _ = job.reply.send(reply);
    }
}

/// The prefixes kept in the cache: each in a sequence of its own, which holds nothing else
/// between calls but the note kept after it (see [`Keep`]), until a call reads
/// something else there.
struct Kept {
    prefixes: Prefixes<i32>,
    /// Sequences that hold no prefix.
    free: Vec<i32>,
}

/// Which scores a read returns.
#[derive(Debug, Clone, Copy)]
enum Scores {
    None,
    /// The next token's, after the last token read.
    Last,
    /// The next token's after each token of the last batch read (see
    /// [`Backend::scores_at`]).
    Each,
}

/// One call on llama.cpp's context.
struct LlamaTurn<'a, 'm> {
    context: &'a mut LlamaContext<'m>,
    kept: &'a mut Kept,
    batch: LlamaBatch<'static>,
    /// The sequence the call reads into: its prefix's, or [`SCRATCH`].
    seq: i32,
    /// Where the next token goes in that sequence.
    position: usize,
    /// Where the last batch of the last read began in the tokens it read.
    batch_start: usize,
}

fn llama_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::provider(format!("llama.cpp failed to {what}: {e}"), false)
}

impl LlamaTurn<'_, '_> {
    /// Reads `tokens` into the call's sequence after what it holds; returns the scores
    /// of the token after the last one for [`Scores::Last`], and has llama.cpp work out
    /// those after each token of the last batch for [`Scores::Each`].
    fn read(&mut self, tokens: &[u32], scores: Scores) -> Result<Option<Vec<f32>>> {
        let chunks = tokens.len().div_ceil(BATCH);
        for (c, chunk) in tokens.chunks(BATCH).enumerate() {
            self.batch.clear();
            let last_chunk = c + 1 == chunks;
            if last_chunk {
                self.batch_start = tokens.len() - chunk.len();
            }
            for (i, &token) in chunk.iter().enumerate() {
                let wanted = match scores {
                    Scores::None => false,
                    Scores::Last => last_chunk && i + 1 == chunk.len(),
                    Scores::Each => last_chunk,
                };
                let position = i32::try_from(self.position + i)
                    .map_err(|_| Error::internal("position past i32"))?;
                self.batch
                    .add(LlamaToken::new(token as i32), position, &[self.seq], wanted)
                    .map_err(|e| llama_err("batch tokens", e))?;
            }
            self.context
                .decode(&mut self.batch)
                .map_err(|e| llama_err("read tokens", e))?;
            self.position += chunk.len();
        }
        match scores {
            Scores::Last if !tokens.is_empty() => {
                let last = self.batch.n_tokens() - 1;
                Ok(Some(self.context.get_logits_ith(last).to_vec()))
            }
            _ => Ok(None),
        }
    }
}

impl Backend for LlamaTurn<'_, '_> {
    fn read_prompt(&mut self, tokens: &[u32], keep: Option<Keep>) -> Result<(Vec<f32>, usize)> {
        let (end, note) = keep.map_or((0, None), |k| (k.prefix, k.note));
        // The note is kept in its prefix's sequence, after the prefix.
        let kept_note = note.and_then(|at| {
            let seq = *self.kept.prefixes.get_note(&tokens[..at])?;
            let prefix = *self.kept.prefixes.get(&tokens[..end])?;
            (prefix == seq).then_some((seq, at))
        });
        let kept = match kept_note {
            Some((seq, _)) => Some(seq),
            None => (end > 0)
                .then(|| self.kept.prefixes.get(&tokens[..end]).copied())
                .flatten(),
        };
        let start = match kept {
            Some(seq) => {
                self.seq = seq;
                kept_note.map_or(end, |(_, at)| at)
            }
            None if end > 0 => {
                // A sequence for this prefix: a free one, or the least recently used
                // prefix's.
                let seq = match self.kept.free.pop() {
                    Some(seq) => seq,
                    None => self
                        .kept
                        .prefixes
                        .make_room()
                        .ok_or_else(|| Error::internal("no sequence for a prefix"))?,
                };
                self.seq = seq;
                0
            }
            None => {
                self.seq = SCRATCH;
                0
            }
        };
        // What the last call on this sequence read after its prefix (or its note)
        // goes, all of it for a prefix read anew; and with it a note kept there.
        if kept_note.is_none() {
            let seq = self.seq;
            self.kept.prefixes.forget_note(|&s| s == seq);
        }
        self.context
            .clear_kv_cache_seq(Some(self.seq as u32), Some(start as u32), None)
            .map_err(|e| llama_err("clear its cache", e))?;
        self.position = start;
        if start < end {
            // The prefix, kept for the calls after this one once it is read whole.
            if let Err(e) = self.read(&tokens[..end], Scores::None) {
                self.kept.free.push(self.seq);
                return Err(e);
            }
            for gone in self.kept.prefixes.keep(tokens[..end].to_vec(), self.seq) {
                self.kept.free.push(gone);
            }
        }
        let mut at = start.max(end);
        if let Some(note) = note.filter(|&note| at < note && end > 0) {
            self.read(&tokens[at..note], Scores::None)?;
            self.kept
                .prefixes
                .keep_note(tokens[..note].to_vec(), self.seq);
            at = note;
        }
        let scores = self
            .read(&tokens[at..], Scores::Last)?
            .ok_or_else(|| Error::internal("a prompt with nothing after its kept prefix"))?;
        Ok((scores, start))
    }

    fn read_tokens(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.read(tokens, Scores::Last)?
            .ok_or_else(|| Error::internal("no scores for a token"))
    }

    fn read_each(&mut self, tokens: &[u32]) -> Result<()> {
        self.read(tokens, Scores::Each).map(|_| ())
    }

    fn scores_at(&mut self, i: usize) -> Result<Vec<f32>> {
        let i = i
            .checked_sub(self.batch_start)
            .filter(|&i| i < self.batch.n_tokens() as usize)
            .ok_or_else(|| Error::internal("scores asked for a token not in the last batch"))?;
        Ok(self.context.get_logits_ith(i as i32).to_vec())
    }

    fn forget(&mut self, n: usize) -> Result<()> {
        let from = self.position.saturating_sub(n);
        let from = u32::try_from(from).map_err(|_| Error::internal("position past u32"))?;
        self.context
            .clear_kv_cache_seq(Some(self.seq as u32), Some(from), None)
            .map_err(|e| llama_err("forget guessed tokens", e))?;
        self.position = from as usize;
        Ok(())
    }
}

#[async_trait]
impl Llm for LlamaCppLlm {
    fn model_id(&self) -> &str {
        &self.core.model_id
    }

    fn reuses_prefixes(&self) -> bool {
        true
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse> {
        let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)));
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = Job {
            request,
            decoding: self.decoding,
            cancelled: cancel.0.clone(),
            reply,
        };
        self.jobs
            .send(job)
            .map_err(|_| Error::provider("the llama.cpp model's thread has ended", false))?;
        let reply = answer.await.map_err(|_| {
            Error::provider("the llama.cpp model's thread ended during the call", false)
        })?;
        drop(cancel);
        reply
    }
}
