//! The quickstart: a memory store in a SQLite file, local embeddings and a local language
//! model, no network.
//!
//! Run with `scripts/quickstart.sh` (it fetches and verifies the model files first). With
//! `OPENAI_API_KEY` or `OPENAI_BASE_URL` set, facts are extracted by that server instead
//! (model: `MEMLANE_LLM_MODEL`, default `gpt-4o-mini`).

use memlane::{Memory, Message};
use serde_json::json;

#[path = "shared/language_model.rs"]
mod language_model;
#[path = "shared/progress.rs"]
mod progress;

use language_model::language_model;

#[tokio::main(flavor = "current_thread")]
async fn main() -> memlane::Result<()> {
    let dir = std::env::temp_dir().join(format!("memlane-quickstart-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| memlane::Error::storage("cannot create a temp dir", e))?;
    let path = dir.join("memories.db");

    println!("memlane quickstart: long-term memory for an agent, in one file");
    println!("store: {}\n", path.display());
    let memory = Memory::open(&path).await?;

    // Store a few things Alice said, verbatim (no language model needed).
    let said = [
        "I'm vegetarian, and I can't stand coriander.",
        "My daughter Maya starts primary school in September.",
        "I work as a structural engineer in Lisbon.",
        "I'm training for the Porto half marathon in October.",
        "Please always answer me in short bullet points.",
    ];
    let messages: Vec<Message> = said.iter().map(|s| Message::user(*s)).collect();
    let added = memory
        .add(messages)
        .user("alice")
        .metadata(json!({"source": "onboarding chat"}))
        .infer(false)
        .await?;
    println!(
        "stored {} memories for alice ({} credits used, {} left)",
        added.results.len(),
        added.credits_used,
        added.credits_remaining
    );
    memory
        .add("I'm a big fan of spicy food.")
        .user("bob")
        .infer(false)
        .await?;

    for question in [
        "What should I cook for her tonight?",
        "What is her job?",
        "Is anything coming up for her kids?",
    ] {
        println!("\nQ: {question}  (alice's best matches, score in [0, 1])");
        let hits = memory.search(question).user("alice").top_k(2).await?;
        for hit in hits.results {
            println!("   {:.2}  {}", hit.score, hit.record.memory);
        }
    }

    // Facts change: update one, and look at its history.
    let job = memory
        .search("What is her job?")
        .user("alice")
        .top_k(1)
        .await?
        .results
        .into_iter()
        .next()
        .map(|hit| hit.record.id);
    if let Some(id) = job {
        memory
            .update(id)
            .text("I work as a structural engineer in Porto (moved from Lisbon).")
            .await?;
        println!("\nhistory of memory {id}:");
        for change in memory.history(id).await? {
            println!(
                "   {}: {} -> {}",
                change.event.as_str(),
                change.old_memory.as_deref().unwrap_or("(nothing)"),
                change.new_memory.as_deref().unwrap_or("(deleted)")
            );
        }
    }

    // Close and reopen: everything is still there, and the index reloads from disk.
    drop(memory);
    let memory = Memory::open(&path).await?;
    let page = memory.list().user("alice").await?;
    println!(
        "\nafter reopening, alice has {} memories",
        page.pagination.count
    );
    let now = memory
        .search("Where does she work now?")
        .user("alice")
        .top_k(1)
        .await?;
    if let Some(hit) = now.results.first() {
        println!(
            "where does she work now? {:.2}  {}",
            hit.score, hit.record.memory
        );
    }

    // With a language model, add extracts the facts itself and keeps them current.
    println!();
    let memory = Memory::builder()
        .path(&path)
        .llm(language_model()?)
        .build()
        .await?;
    // Carlos's chats, dated as they happened (`timestamp`): a fact that supersedes a
    // memory ends it, and the memory stays as history.
    let first_chat = chrono::Utc::now() - chrono::Duration::days(90);
    let conversation = vec![
        Message::user("Hi, I'm Carlos. I live in Madrid and I work as a nurse."),
        Message::assistant("Nice to meet you, Carlos!"),
    ];
    let added = memory
        .add(conversation)
        .user("carlos")
        .timestamp(first_chat)
        .await?;
    println!("extracted from carlos's first chat:");
    for m in &added.results {
        println!("   {}  {}", m.event.as_str(), m.memory);
    }
    let later = memory
        .add("Big news: I moved to Valencia last month!")
        .user("carlos")
        .await?;
    println!("after \"I moved to Valencia last month\":");
    for m in &later.results {
        println!("   {}  {}", m.event.as_str(), m.memory);
    }
    println!("carlos's memories now:");
    for m in memory.list().user("carlos").await?.results {
        println!("   {}", m.memory);
    }
    println!("carlos's memories as of his first chat:");
    for m in memory
        .list()
        .user("carlos")
        .as_of(first_chat)
        .await?
        .results
    {
        println!("   {}", m.memory);
    }

    // Erasure request: delete everything about bob.
    let deleted = memory.delete_all().user("bob").await?;
    println!(
        "deleted {} memory of bob's on request",
        deleted.deleted.len()
    );

    drop(memory);
    std::fs::remove_dir_all(&dir).map_err(|e| memlane::Error::storage("cannot clean up", e))?;
    Ok(())
}
