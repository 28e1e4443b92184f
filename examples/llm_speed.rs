//! How fast the local language model reads a prompt and writes an answer, and how long an
//! `add` with inference takes, on this machine, for each local provider: candle's
//! (`LocalLlm`) and, with the feature `llama`, llama.cpp's (`LlamaCppLlm`), on the same file.
//!
//! `cargo run --release --features llama --example llm_speed` (after
//! `scripts/fetch-models.sh` and `scripts/llama-deps.sh`; without `--features llama`, candle
//! only). For each provider in turn it loads the pinned model, then:
//!
//! 1. times, three times each and in turns, one call that reads a prompt of about 400
//!    tokens and writes one token, and one that reads the same prompt and writes up to 64: the
//!    first is the prompt's reading, the difference the writing;
//! 2. times the quickstart's two `add`s with inference (a first chat, then a move that
//!    contradicts it), each run in a new store: `MEMLANE_LLM_RUNS` runs (default 5) on a
//!    model just loaded, which has read nothing, then as many on one model that has served
//!    them once, which reads each call's instructions and worked examples from what it kept
//!    of them. In between, as many runs on a model just loaded
//!    whose store was warmed up (`Memory::warm_up`, timed apart). Answers are decoded
//!    under their JSON schemas, as by default.
//!
//! It prints one table: each provider's prompt and writing speed and each add's p50 with
//! the model's work (calls, prompt tokens read and reused, tokens written and forced,
//! passes, and tokens guessed ahead by prompt lookup, with how many were right).
//! `-- --compare-lookup` also runs each provider with prompt lookup
//! (`prompt_lookup(true)`), right after it. With `RUST_LOG=memlane=debug`, each model call's span is printed to stderr as
//! it closes, with its tokens and its time (the last two are the last warm move's).

use std::sync::Arc;
use std::time::Instant;

use memlane::llm::ChatRequest;
use memlane::{Llm, LocalLlm, LocalLlmStats, Memory, Message, MiniLm};

/// A local provider under test: its name and how to load it.
struct Provider {
    name: &'static str,
    load: fn() -> memlane::Result<Loaded>,
}

/// A loaded provider and how to read its counters.
type Loaded = (Arc<dyn Llm>, Stats);

type Stats = Arc<dyn Fn() -> LocalLlmStats + Send + Sync>;

fn candle(lookup: bool) -> memlane::Result<Loaded> {
    let llm = LocalLlm::load_default()?.prompt_lookup(lookup);
    let counted = llm.clone();
    Ok((Arc::new(llm), Arc::new(move || counted.stats())))
}

#[cfg(feature = "llama")]
fn llama(lookup: bool) -> memlane::Result<Loaded> {
    let llm = memlane::LlamaCppLlm::load_default()?.prompt_lookup(lookup);
    let counted = llm.clone();
    Ok((Arc::new(llm), Arc::new(move || counted.stats())))
}

/// The providers, each with prompt lookup off right after it when `compare` is set.
fn providers(compare: bool) -> Vec<Provider> {
    let mut all = vec![Provider {
        name: "candle (LocalLlm)",
        load: || candle(false),
    }];
    if compare {
        all.push(Provider {
            name: "candle, prompt lookup",
            load: || candle(true),
        });
    }
    #[cfg(feature = "llama")]
    {
        all.push(Provider {
            name: "llama.cpp (LlamaCppLlm)",
            load: || llama(false),
        });
        if compare {
            all.push(Provider {
                name: "llama.cpp, prompt lookup",
                load: || llama(true),
            });
        }
    }
    all
}

/// What one add cost: its time and the model's work.
type AddCost = (f64, LocalLlmStats);

/// One provider's figures.
struct Figures {
    prompt_tokens_per_s: f64,
    written_tokens_per_s: f64,
    /// Per add (first chat, the move): the runs on a model just loaded, then on one just
    /// loaded and warmed up (`Memory::warm_up`), then warm.
    cold: Vec<[AddCost; 2]>,
    warmed_up: Vec<[AddCost; 2]>,
    warm: Vec<[AddCost; 2]>,
    /// The time of each `warm_up` call.
    warm_ups: Vec<f64>,
}

fn main() -> memlane::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_writer(std::io::stderr)
        .init();
    let runs: usize = std::env::var("MEMLANE_LLM_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let runtime = tokio::runtime::Runtime::new()
        .map_err(|e| memlane::Error::internal(format!("no runtime: {e}")))?;
    let embedder = Arc::new(MiniLm::load_default()?);
    let mut results = Vec::new();
    let compare = std::env::args().any(|a| a == "--compare-lookup");
    for provider in providers(compare) {
        println!("{}:", provider.name);
        let figures = runtime.block_on(measure(&provider, &embedder, runs))?;
        results.push((provider.name, figures));
    }
    println!("\nthe quickstart's adds with inference, p50 of {runs} runs each:");
    println!(
        "| provider | prompt tokens/s | written tokens/s | add | model | p50 | calls | prompt tokens | of which reused | written | of which forced | passes | guessed (right) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (name, f) in &results {
        for (i, add) in ["first chat", "the move"].iter().enumerate() {
            for (kind, samples) in [
                ("just loaded", &f.cold),
                ("just loaded, warm_up", &f.warmed_up),
                ("warm", &f.warm),
            ] {
                let mut times: Vec<f64> = samples.iter().map(|r| r[i].0).collect();
                times.sort_by(f64::total_cmp);
                let s = samples[samples.len() / 2][i].1;
                println!(
                    "| {name} | {:.1} | {:.1} | {add} | {kind} | {:.2} s | {} | {} | {} | {} | {} | {} | {} ({}) |",
                    f.prompt_tokens_per_s,
                    f.written_tokens_per_s,
                    times[times.len() / 2],
                    s.calls,
                    s.prompt_tokens,
                    s.reused_tokens,
                    s.written_tokens,
                    s.forced_tokens,
                    s.passes,
                    s.guessed,
                    s.guessed_right
                );
            }
        }
    }
    for (name, f) in &results {
        let mut t = f.warm_ups.clone();
        t.sort_by(f64::total_cmp);
        println!("{name}: warm_up p50 {:.2} s", t[t.len() / 2]);
    }
    Ok(())
}

async fn measure(
    provider: &Provider,
    embedder: &Arc<MiniLm>,
    runs: usize,
) -> memlane::Result<Figures> {
    let started = Instant::now();
    let (llm, _) = (provider.load)()?;
    println!(
        "  load (SHA-256 check included): {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let facts: Vec<String> = (1..=24)
        .map(|i| format!("Fact {i}: the user visited city number {i} in spring."))
        .collect();
    let prompt = format!(
        "Here are some notes.\n{}\nCount from 1 upwards, one number per line, and never stop.",
        facts.join("\n")
    );
    let request = |max_tokens: u32| {
        ChatRequest::new(vec![Message::user(prompt.as_str())]).max_tokens(max_tokens)
    };
    let (mut read, mut both) = (0.0, 0.0);
    let (mut prompt_tokens, mut written) = (0, 0);
    for _ in 0..3 {
        let t = Instant::now();
        let one = llm.chat(request(1)).await?;
        read += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let many = llm.chat(request(64)).await?;
        both += t.elapsed().as_secs_f64();
        prompt_tokens = one.usage.prompt_tokens;
        written = many.usage.completion_tokens;
    }
    drop(llm);
    let read = read / 3.0;
    let write = (both / 3.0 - read).max(f64::EPSILON);
    let prompt_tokens_per_s = prompt_tokens as f64 / read;
    let written_tokens_per_s = written.saturating_sub(1) as f64 / write;
    println!("  prompt: {prompt_tokens} tokens in {read:.2} s = {prompt_tokens_per_s:.1} tokens/s");
    println!(
        "  answer: {} more tokens in {write:.2} s = {written_tokens_per_s:.1} tokens/s",
        written.saturating_sub(1)
    );
    let mut cold = Vec::new();
    for _ in 0..runs {
        let (llm, stats) = (provider.load)()?;
        cold.push(quickstart_adds(&llm, &stats, embedder, None).await?);
    }
    let (mut warmed_up, mut warm_ups) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let (llm, stats) = (provider.load)()?;
        warmed_up.push(quickstart_adds(&llm, &stats, embedder, Some(&mut warm_ups)).await?);
    }
    let (llm, stats) = (provider.load)()?;
    quickstart_adds(&llm, &stats, embedder, None).await?;
    let mut warm = Vec::new();
    for _ in 0..runs {
        warm.push(quickstart_adds(&llm, &stats, embedder, None).await?);
    }
    Ok(Figures {
        prompt_tokens_per_s,
        written_tokens_per_s,
        cold,
        warmed_up,
        warm,
        warm_ups,
    })
}

/// The quickstart's two adds with inference in a new store: seconds and the model's work
/// of each. With `warm_ups`, the store is warmed up first, and the time that took is
/// pushed there.
async fn quickstart_adds(
    llm: &Arc<dyn Llm>,
    stats: &Stats,
    embedder: &Arc<MiniLm>,
    warm_ups: Option<&mut Vec<f64>>,
) -> memlane::Result<[AddCost; 2]> {
    let dir = std::env::temp_dir().join(format!("memlane-llm-speed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| memlane::Error::storage("no temp dir", e))?;
    let memory = Memory::builder()
        .path(dir.join("m.db"))
        .embedder(embedder.clone())
        .llm(llm.clone())
        .build()
        .await?;
    if let Some(warm_ups) = warm_ups {
        let started = Instant::now();
        memory.warm_up().await?;
        warm_ups.push(started.elapsed().as_secs_f64());
    }
    let first = vec![
        Message::user("Hi, I'm Carlos. I live in Madrid and I work as a nurse."),
        Message::assistant("Nice to meet you, Carlos!"),
    ];
    let second = vec![Message::user("Big news: I moved to Valencia last month!")];
    let mut costs = Vec::new();
    for messages in [first, second] {
        let (before, started) = (stats(), Instant::now());
        memory.add(messages).user("carlos").await?;
        let (after, seconds) = (stats(), started.elapsed().as_secs_f64());
        let mut used = after;
        used.calls -= before.calls;
        used.prompt_tokens -= before.prompt_tokens;
        used.reused_tokens -= before.reused_tokens;
        used.written_tokens -= before.written_tokens;
        used.forced_tokens -= before.forced_tokens;
        used.passes -= before.passes;
        used.guessed -= before.guessed;
        used.guessed_right -= before.guessed_right;
        costs.push((seconds, used));
    }
    memory.close().await?;
    std::fs::remove_dir_all(&dir).map_err(|e| memlane::Error::storage("cannot clean up", e))?;
    Ok([costs[0], costs[1]])
}
