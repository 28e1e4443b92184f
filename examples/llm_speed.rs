//! How fast the local language model reads a prompt and writes an answer, and how long an
//! `add` with inference takes, on this machine.
//!
//! `cargo run --release --example llm_speed` (after `scripts/fetch-models.sh`). It loads
//! the pinned model, then:
//!
//! 1. times, three times each and in turns, one call that reads a prompt of about 250
//!    tokens and writes one token, and one that reads the same prompt and writes 64: the
//!    first is the prompt's reading, the difference the writing;
//! 2. times the quickstart's two `add`s with inference (a first chat, then a move that
//!    contradicts it), each run in a new store: `MEMLANE_LLM_RUNS` runs (default 5) on a
//!    model just loaded, which has read nothing, then as many on one model that has served
//!    them once, which starts each call from the longest prefix of it read before (the
//!    prompts open with the date to the minute, so that is the whole of the instructions
//!    only within a minute). It prints each add's p50 and its prompt tokens read, reused
//!    and written. Both are done twice, in turns: with each answer decoded under its JSON
//!    schema (the default) and with the model writing freely (`LocalLlm::constrained`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use memlane::llm::ChatRequest;
use memlane::{LocalLlm, Memory, Message, MiniLm};

fn main() -> memlane::Result<()> {
    let started = Instant::now();
    let llm = LocalLlm::load_default()?;
    println!(
        "load (SHA-256 check included): {:.1} s",
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
    let (mut read, mut both) = (Duration::ZERO, Duration::ZERO);
    let (mut prompt_tokens, mut written) = (0, 0);
    for _ in 0..3 {
        let t = Instant::now();
        let one = llm.chat_blocking(&request(1))?;
        read += t.elapsed();
        let t = Instant::now();
        let many = llm.chat_blocking(&request(64))?;
        both += t.elapsed();
        prompt_tokens = one.usage.prompt_tokens;
        written = many.usage.completion_tokens;
    }
    let read = read.as_secs_f64() / 3.0;
    let write = (both.as_secs_f64() / 3.0 - read).max(f64::EPSILON);
    println!(
        "prompt: {prompt_tokens} tokens in {read:.2} s = {:.1} tokens/s",
        prompt_tokens as f64 / read
    );
    println!(
        "answer: {} more tokens in {write:.2} s = {:.1} tokens/s",
        written.saturating_sub(1),
        written.saturating_sub(1) as f64 / write
    );
    drop(llm);
    adds()
}

/// The quickstart's adds with inference, `MEMLANE_LLM_RUNS` times each on a model just
/// loaded, then on one that has served them; constrained and free decoding in turns.
fn adds() -> memlane::Result<()> {
    let runs: usize = std::env::var("MEMLANE_LLM_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let runtime = tokio::runtime::Runtime::new()
        .map_err(|e| memlane::Error::internal(format!("no runtime: {e}")))?;
    let embedder = Arc::new(MiniLm::load_default()?);
    let modes = [(true, "constrained"), (false, "free")];
    let mut cold = vec![Vec::new(); modes.len()];
    for _ in 0..runs {
        for (m, (constrained, _)) in modes.iter().enumerate() {
            let llm = LocalLlm::from_gguf(LocalLlm::default_path(), "qwen-cold")?
                .constrained(*constrained);
            cold[m].push(runtime.block_on(quickstart_adds(&llm, &embedder))?);
        }
    }
    let warm_models = modes
        .iter()
        .map(|(constrained, _)| {
            let llm = LocalLlm::from_gguf(LocalLlm::default_path(), "qwen-warm")?
                .constrained(*constrained);
            runtime.block_on(quickstart_adds(&llm, &embedder))?;
            Ok(llm)
        })
        .collect::<memlane::Result<Vec<_>>>()?;
    let mut warm = vec![Vec::new(); modes.len()];
    for _ in 0..runs {
        for (m, llm) in warm_models.iter().enumerate() {
            warm[m].push(runtime.block_on(quickstart_adds(llm, &embedder))?);
        }
    }
    println!("\nthe quickstart's adds with inference, p50 of {runs} runs each:");
    println!(
        "| add | model | decoding | p50 | calls | prompt tokens | of which reused | written | of which forced |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (i, name) in ["first chat", "the move"].iter().enumerate() {
        for (kind, samples) in [("just loaded", &cold), ("warm", &warm)] {
            for (m, (_, mode)) in modes.iter().enumerate() {
                let samples = &samples[m];
                let mut times: Vec<f64> = samples.iter().map(|r| r[i].0).collect();
                times.sort_by(f64::total_cmp);
                let s = samples[samples.len() / 2][i].1;
                println!(
                    "| {name} | {kind} | {mode} | {:.2} s | {} | {} | {} | {} | {} |",
                    times[times.len() / 2],
                    s.calls,
                    s.prompt_tokens,
                    s.reused_tokens,
                    s.written_tokens,
                    s.forced_tokens
                );
            }
        }
    }
    Ok(())
}

/// What one add cost: its time and the model's work.
type AddCost = (f64, memlane::LocalLlmStats);

/// The quickstart's two adds with inference in a new store: seconds and the model's work
/// of each.
async fn quickstart_adds(llm: &LocalLlm, embedder: &Arc<MiniLm>) -> memlane::Result<[AddCost; 2]> {
    let dir = std::env::temp_dir().join(format!("memlane-llm-speed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| memlane::Error::storage("no temp dir", e))?;
    let memory = Memory::builder()
        .path(dir.join("m.db"))
        .embedder(embedder.clone())
        .llm(Arc::new(llm.clone()))
        .build()
        .await?;
    let first = vec![
        Message::user("Hi, I'm Carlos. I live in Madrid and I work as a nurse."),
        Message::assistant("Nice to meet you, Carlos!"),
    ];
    let second = vec![Message::user("Big news: I moved to Valencia last month!")];
    let mut costs = Vec::new();
    for messages in [first, second] {
        let (before, started) = (llm.stats(), Instant::now());
        memory.add(messages).user("carlos").await?;
        let (after, seconds) = (llm.stats(), started.elapsed().as_secs_f64());
        let mut used = after;
        used.calls -= before.calls;
        used.prompt_tokens -= before.prompt_tokens;
        used.reused_tokens -= before.reused_tokens;
        used.written_tokens -= before.written_tokens;
        used.forced_tokens -= before.forced_tokens;
        costs.push((seconds, used));
    }
    memory.close().await?;
    std::fs::remove_dir_all(&dir).map_err(|e| memlane::Error::storage("cannot clean up", e))?;
    Ok([costs[0], costs[1]])
}
