//! How fast the local language model reads a prompt and writes an answer, on this machine.
//!
//! `cargo run --release --example llm_speed` (after `scripts/fetch-models.sh qwen`). It
//! loads the pinned model, then times, three times each and in turns, one call that reads
//! a prompt of about 250 tokens and writes one token, and one that reads the same prompt
//! and writes 64: the first is the prompt's reading, the difference the writing.

use std::time::{Duration, Instant};

use memlane::llm::ChatRequest;
use memlane::{LocalLlm, Message};

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
    Ok(())
}
