//! What the model evaluations (`eval_extraction`, `eval_contradictions`) share: their
//! command line, their tracing, the choice of language model, a turn's messages, and a
//! count of the replies memlane had to reject.
#![allow(dead_code)] // each example uses its own part

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use memlane::llm::{ChatRequest, ChatResponse};
use memlane::{Llm, LocalLlm, LocalLlmStats, Message, OpenAiConfig, OpenAiLlm};

/// Traces to stderr what `RUST_LOG` asks for (`memlane=debug`: each reconciliation).
pub fn trace_to_stderr() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
}

/// The command line: `--set NAME`, `--cases PATH`, `--only ID[,ID…]`, `--unconstrained`,
/// `--lookup` or `--no-lookup`, `--llama`.
pub struct Args {
    /// The local model runs on llama.cpp (`LlamaCppLlm`; built with `--features llama`)
    /// instead of candle.
    pub llama: bool,
    pub set: Option<String>,
    /// Cases read from this file instead of the set's own (your conversations, in the
    /// set's format), reported under the set's name.
    pub cases: Option<std::path::PathBuf>,
    pub only: Option<Vec<String>>,
    /// The local model writes freely (no token masks from the answers' schemas), for the
    /// comparison with constrained decoding.
    pub unconstrained: bool,
    /// Prompt lookup on or off, to compare (else the providers' default, off).
    pub lookup: Option<bool>,
}

impl Args {
    pub fn parse() -> Args {
        let args: Vec<String> = std::env::args().collect();
        let value = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1))
                .cloned()
        };
        Args {
            llama: args.iter().any(|a| a == "--llama"),
            set: value("--set"),
            cases: value("--cases").map(std::path::PathBuf::from),
            only: value("--only").map(|ids| ids.split(',').map(str::to_string).collect()),
            unconstrained: args.iter().any(|a| a == "--unconstrained"),
            lookup: if args.iter().any(|a| a == "--no-lookup") {
                Some(false)
            } else if args.iter().any(|a| a == "--lookup") {
                Some(true)
            } else {
                None
            },
        }
    }

    /// Whether the case `id` is to run.
    pub fn runs(&self, id: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|ids| ids.iter().any(|i| i == id))
    }
}

/// The language model under evaluation, counted.
pub struct Model {
    pub llm: Arc<Counted>,
    /// The local model's counters (none over the OpenAI protocol).
    pub local: Option<Arc<dyn Fn() -> LocalLlmStats + Send + Sync>>,
    pub name: String,
}

impl Model {
    /// Replies the local model stopped in a loop so far (none for a remote model).
    pub fn loops(&self) -> u64 {
        self.local.as_ref().map_or(0, |stats| stats().loops)
    }

    /// Prints the replies rejected and, for the local model, its counters.
    pub fn print_report(&self) {
        println!("{}", self.llm.report());
        if let Some(stats) = &self.local {
            let s = stats();
            println!(
                "local model: {} calls, {} prompt tokens ({} reused), {} tokens written ({} forced) in {} \
                 passes, {} guessed ahead ({} right), {} replies stopped in a loop",
                s.calls,
                s.prompt_tokens,
                s.reused_tokens,
                s.written_tokens,
                s.forced_tokens,
                s.passes,
                s.guessed,
                s.guessed_right,
                s.loops
            );
        }
    }
}

/// An OpenAI-compatible server when `OPENAI_API_KEY` or `OPENAI_BASE_URL` is set (model:
/// `MEMLANE_LLM_MODEL`, default `gpt-4o-mini`), else the local model.
pub fn language_model(args: &Args) -> memlane::Result<Model> {
    let configured = ["OPENAI_API_KEY", "OPENAI_BASE_URL"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|s| !s.is_empty()));
    if configured {
        let model = std::env::var("MEMLANE_LLM_MODEL").unwrap_or_else(|_| "gpt-4o-mini".into());
        let config = OpenAiConfig::from_env(model.clone()).structured_output(!args.unconstrained);
        let llm = OpenAiLlm::new(config)?;
        return Ok(Model {
            llm: Arc::new(Counted::new(Arc::new(llm))),
            local: None,
            name: format!("{model} over the OpenAI protocol"),
        });
    }
    let decoding = format!(
        "{}{}",
        if args.unconstrained {
            "unconstrained"
        } else {
            "constrained to each answer's schema"
        },
        match args.lookup {
            Some(true) => ", prompt lookup",
            Some(false) => ", no prompt lookup",
            None => "",
        }
    );
    if args.llama {
        #[cfg(feature = "llama")]
        {
            let mut local = memlane::LlamaCppLlm::load_default()?.constrained(!args.unconstrained);
            if let Some(on) = args.lookup {
                local = local.prompt_lookup(on);
            }
            let counted = local.clone();
            return Ok(Model {
                llm: Arc::new(Counted::new(Arc::new(local))),
                local: Some(Arc::new(move || counted.stats())),
                name: format!("local Qwen2.5 1.5B (Q4_K_M) on llama.cpp, {decoding}"),
            });
        }
        #[cfg(not(feature = "llama"))]
        return Err(memlane::Error::invalid(
            "--llama needs a build with --features llama",
        ));
    }
    let mut local = LocalLlm::load_default()?.constrained(!args.unconstrained);
    if let Some(on) = args.lookup {
        local = local.prompt_lookup(on);
    }
    let counted = local.clone();
    Ok(Model {
        llm: Arc::new(Counted::new(Arc::new(local))),
        local: Some(Arc::new(move || counted.stats())),
        name: format!("local Qwen2.5 1.5B (Q4_K_M), {decoding}"),
    })
}

/// A turn of a labelled conversation as `add` takes it.
pub fn messages(turn: &[(String, String)]) -> Vec<Message> {
    turn.iter()
        .map(|(role, text)| Message::new(role.as_str(), text.as_str()))
        .collect()
}

/// How memlane's note on a rejected reply begins (`chat_json` in `src/llm/mod.rs`).
const REJECTED: &str = "Your reply could not be used";

/// Counts a model's replies, and those memlane rejected: a reply that did not parse or
/// broke a rule of its answer is sent back to the model with the error, so the request
/// after it ends with that reply and memlane's note on it.
#[derive(Debug)]
pub struct Counted {
    inner: Arc<dyn Llm>,
    replies: AtomicU64,
    rejected: AtomicU64,
}

impl Counted {
    fn new(inner: Arc<dyn Llm>) -> Counted {
        Counted {
            inner,
            replies: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
        }
    }

    /// `(replies, rejected)` so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.replies.load(Ordering::Relaxed),
            self.rejected.load(Ordering::Relaxed),
        )
    }

    /// Notes an `add` that failed: if memlane gave up on the model's second reply, that
    /// reply was rejected too (no request follows it to count it).
    pub fn note_failure(&self, error: &memlane::Error) {
        if error.detail().contains("did not return usable JSON") {
            self.rejected.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The line the evaluations print.
    pub fn report(&self) -> String {
        let (replies, rejected) = self.counts();
        let rate = if replies == 0 {
            0.0
        } else {
            100.0 * rejected as f64 / replies as f64
        };
        format!("{replies} model replies, {rejected} rejected ({rate:.1}%): did not parse or broke a rule of the answer")
    }
}

#[async_trait]
impl Llm for Counted {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    async fn chat(&self, request: ChatRequest) -> memlane::Result<ChatResponse> {
        if let [.., reply, note] = request.messages.as_slice() {
            if reply.role == "assistant" && note.content.starts_with(REJECTED) {
                self.rejected.fetch_add(1, Ordering::Relaxed);
            }
        }
        let reply = self.inner.chat(request).await?;
        self.replies.fetch_add(1, Ordering::Relaxed);
        Ok(reply)
    }
}
