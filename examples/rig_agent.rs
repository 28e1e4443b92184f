//! A rig agent with long-term memory: it recalls what memlane holds about the user before
//! each turn, and what the user says is remembered after it, for the next conversation.
//!
//! ```sh
//! scripts/fetch-models.sh qwen   # the local models, checked
//! cargo run --release --features rig --example rig_agent
//! cargo run --release --features rig --example rig_agent -- "I'm Ana. I just adopted a cat." "What pet do I have?"
//! ```
//!
//! - Offline (the default): the local Qwen2.5 model answers through
//!   `memlane::rig::completion_model`, with the user's memories as dynamic context, and
//!   `add` extracts what to remember from each turn with the same model.
//! - With `OPENAI_API_KEY` or `OPENAI_BASE_URL` set (model: `MEMLANE_LLM_MODEL`, default
//!   `gpt-4o-mini`): rig's own OpenAI client answers, with the same dynamic context and
//!   memlane's `remember` and `recall_memories` tools, so the model decides what to store.
//!
//! The store is a SQLite file in the temp directory, kept between runs: run it twice and the
//! second conversation starts with what the first one taught it.

use memlane::rig::rig_agent::{Agent, AgentBuilder};
use memlane::rig::rig_core::providers::openai::OpenAIConfig;
use memlane::rig::{completion_model, MemoryIndex, RecallTool, RememberTool};
use memlane::{Memory, Message};

#[path = "shared/language_model.rs"]
mod language_model;
#[path = "shared/progress.rs"]
mod progress;

const USER: &str = "demo-user";
const PREAMBLE: &str = "You are a helpful personal assistant with long-term memory. The \
                        documents you are given are memories about the user from earlier \
                        conversations: use them when they help. Answer in at most two short \
                        sentences.";

/// The agent, and whether its model stores memories itself (through the `remember` tool).
fn agent(memory: &Memory) -> Result<(Agent, bool), Box<dyn std::error::Error>> {
    let recall = MemoryIndex::new(memory.clone()).user(USER);
    if let Some(model) = language_model::server_model() {
        println!("agent: {model} over the OpenAI protocol, with memlane's tools");
        let agent = AgentBuilder::new(OpenAIConfig::from_env()?.client().chat(model))
            .preamble(PREAMBLE)
            .append_preamble(
                "Call `remember` for each new fact about the user (a preference, a plan, a \
                 change), and `recall_memories` when you need more than you were given.",
            )
            .dynamic_context(5, recall)
            .tool(RememberTool::new(memory.clone()).user(USER))
            .tool(RecallTool::new(memory.clone()).user(USER))
            .default_max_turns(5)
            .build();
        return Ok((agent, true));
    }
    let llm = memory
        .llm()
        .cloned()
        .ok_or("the memory has no language model")?;
    println!(
        "agent: {} in process (memlane as dynamic context)",
        llm.model_id()
    );
    let agent = AgentBuilder::new(completion_model(llm))
        .preamble(PREAMBLE)
        .dynamic_context(5, recall)
        .max_tokens(96)
        .build();
    Ok((agent, false))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::temp_dir().join("memlane-rig-agent.db");
    println!("store: {}", path.display());
    let memory = Memory::builder()
        .path(&path)
        .llm(language_model::language_model()?)
        .build()
        .await?;
    let (agent, remembers_itself) = agent(&memory)?;

    let mut turns: Vec<String> = std::env::args().skip(1).collect();
    if turns.is_empty() {
        turns = [
            "Hi! I'm Ana. I just started a new job as a night-shift nurse in Bristol.",
            "I'm allergic to peanuts, by the way.",
            "Can you suggest a snack to take to work tonight?",
        ]
        .map(String::from)
        .to_vec();
    }
    for turn in turns {
        println!("\nuser:  {turn}");
        let reply = agent.prompt(turn.as_str()).await?;
        println!("agent: {}", reply.output().trim());
        if remembers_itself {
            continue;
        }
        // Remember after the turn what the user said (the agent's reply holds no new fact
        // about them): the language model extracts the facts and reconciles them with what
        // is stored, so a changed fact replaces the old one.
        let added = memory.add(Message::user(turn)).user(USER).await?;
        for m in &added.results {
            println!("       remembered: {:?} {}", m.event, m.memory);
        }
    }
    let all = memory.list().user(USER).await?;
    println!("\n{} memories about {USER} now:", all.results.len());
    for m in &all.results {
        println!("  - {}", m.memory);
    }
    Ok(())
}
