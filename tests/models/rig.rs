//! A rig agent offline: the local model through `memlane::rig::completion_model`, with the
//! owner's memories as dynamic context recalled by the real MiniLM from a SQLite file.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use memlane::llm::{ChatRequest, ChatResponse};
use memlane::rig::rig_agent::AgentBuilder;
use memlane::rig::{completion_model, MemoryIndex};
use memlane::{Llm, Memory, MiniLm};

/// The local model, keeping each request it was sent.
#[derive(Debug)]
struct Recorded {
    model: memlane::LocalLlm,
    sent: Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl Llm for Recorded {
    fn model_id(&self) -> &str {
        self.model.model_id()
    }

    async fn chat(&self, request: ChatRequest) -> memlane::Result<ChatResponse> {
        self.sent.lock().unwrap().push(request.clone());
        self.model.chat(request).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_on_the_local_model_answers_from_the_owners_recalled_memories() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::builder()
        .path(dir.path().join("m.db"))
        .embedder(Arc::new(MiniLm::load_default().unwrap()))
        .build()
        .await
        .unwrap();
    for (user, text) in [
        ("alice", "I'm vegetarian and I can't stand coriander."),
        (
            "alice",
            "I'm training for the Porto half marathon in October.",
        ),
        ("alice", "My car is a blue Toyota Corolla."),
        ("bob", "I love steak tartare."),
    ] {
        memory.add(text).user(user).infer(false).await.unwrap();
    }
    let llm = Arc::new(Recorded {
        model: crate::local_llm::llm(),
        sent: Mutex::new(Vec::new()),
    });
    let agent = AgentBuilder::new(completion_model(llm.clone() as Arc<dyn Llm>))
        .preamble("You are Alice's assistant. Answer in one short sentence.")
        .dynamic_context(2, MemoryIndex::new(memory.clone()).user("alice"))
        .max_tokens(24)
        .build();
    let answer = agent
        .prompt("What food should I avoid serving Alice at dinner?")
        .await
        .unwrap();

    let sent = llm.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    let prompt = &sent[0].messages.last().unwrap().content;
    assert!(prompt.contains("can't stand coriander"), "{prompt}");
    assert!(!prompt.contains("steak"), "bob's memory leaked: {prompt}");
    assert_eq!(
        prompt.matches("<file id:").count(),
        2,
        "two memories: {prompt}"
    );
    // The model read them: its (greedy) answer names what to avoid.
    let text = answer.output().to_lowercase();
    assert!(
        ["coriander", "cilantro", "meat"]
            .iter()
            .any(|w| text.contains(w)),
        "{text}"
    );
    let used = answer.usage.output_tokens.unwrap();
    assert!((1..=24).contains(&used), "{used} tokens");
}
