//! memlane in rig agents (feature `rig`): the index, the tools and the completion model,
//! through rig's own agent runtime. The tool-calling agent talks to a scripted
//! OpenAI-protocol server on loopback through rig's OpenAI client; the offline agent runs on
//! a scripted memlane `Llm` (the real local model: `tests/models/rig.rs`).

use std::sync::Arc;

use memlane::rig::rig_agent::AgentBuilder;
use memlane::rig::rig_core::providers::openai::wire::Chat;
use memlane::rig::rig_core::providers::openai::OpenAIConfig;
use memlane::rig::rig_core::vector_store::request::{Filter, SearchFilter, VectorSearchRequest};
use memlane::rig::rig_core::vector_store::{VectorStoreError, VectorStoreIndex};
use memlane::rig::{completion_model, MemoryIndex, RecallTool, RecalledMemory, RememberTool};
use memlane::{Llm, Memory, ScriptedLlm};
use serde_json::{json, Value};

use crate::common;
use crate::loopback::{chat_body, ok, Server};

/// A chat completion that calls one tool.
fn tool_call(id: &str, name: &str, arguments: Value) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000u32,
        "model": "test-model",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": null,
                "tool_calls": [{
                    "id": id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments.to_string()}
                }]
            },
            "finish_reason": "tool_calls"
        }],
        "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}
    })
}

/// Every message's text in a chat request body, joined (content may be null or parts).
fn sent_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .map(|m| match &m["content"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// rig's OpenAI chat model on the loopback server.
fn served(server: &Server) -> memlane::rig::rig_core::driver::Model<Chat> {
    OpenAIConfig::new("sk-test")
        .with_base_url(&server.base)
        .client()
        .chat("test-model")
}

async fn memory_of_alice_and_bob(dir: &tempfile::TempDir) -> Memory {
    let memory = common::open(&dir.path().join("m.db"), 64).await;
    memory
        .add("I'm vegetarian and I can't stand coriander")
        .user("alice")
        .metadata(json!({"topic": "food"}))
        .infer(false)
        .await
        .unwrap();
    memory
        .add("I moved to Valencia last month")
        .user("alice")
        .metadata(json!({"topic": "home"}))
        .infer(false)
        .await
        .unwrap();
    common::add(&memory, "bob", "I'm a vegetarian who loves steak tartare").await;
    memory
}

#[tokio::test]
async fn an_agent_remembers_and_recalls_through_the_tools_on_an_openai_protocol_server() {
    let dir = tempfile::tempdir().unwrap();
    let memory = common::open(&dir.path().join("m.db"), 64).await;
    let server = Server::start(vec![
        ok(tool_call(
            "call_1",
            "remember",
            json!({"fact": "Alice is vegetarian"}),
        )),
        ok(tool_call(
            "call_2",
            "recall_memories",
            json!({"query": "what Alice eats", "limit": 3}),
        )),
        ok(chat_body("A mushroom risotto.")),
    ])
    .await;
    let agent = AgentBuilder::new(served(&server))
        .preamble("You are Alice's assistant.")
        .tool(RememberTool::new(memory.clone()).user("alice"))
        .tool(RecallTool::new(memory.clone()).user("alice"))
        .default_max_turns(5)
        .build();

    let answer = agent
        .prompt("I'm vegetarian. What should I cook tonight?")
        .await
        .unwrap();
    assert_eq!(answer.output(), "A mushroom risotto.");

    // The remember call stored the fact for Alice (verbatim: this memory has no model).
    let stored = memory.list().user("alice").await.unwrap();
    let texts: Vec<&str> = stored.results.iter().map(|m| m.memory.as_str()).collect();
    assert_eq!(texts, ["Alice is vegetarian"]);

    let sent = server.received();
    assert_eq!(sent.len(), 3, "one request per turn");
    let mut tools: Vec<&str> = sent[0].body["tools"]
        .as_array()
        .expect("the tools are declared")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    tools.sort_unstable();
    assert_eq!(tools, ["recall_memories", "remember"]);
    // The remember result (an ADD) went back to the model, then the recall result.
    assert!(sent_text(&sent[1].body).contains("ADD"), "{}", sent[1].body);
    let last = &sent[2].body["messages"];
    let recalled = last
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "tool")
        .expect("the recall result is sent back");
    assert!(
        recalled.to_string().contains("Alice is vegetarian"),
        "{recalled}"
    );
}

#[tokio::test]
async fn dynamic_context_puts_the_owners_memories_before_the_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let memory = memory_of_alice_and_bob(&dir).await;
    let server = Server::start(vec![ok(chat_body("Vegetable paella."))]).await;
    let agent = AgentBuilder::new(served(&server))
        .dynamic_context(5, MemoryIndex::new(memory.clone()).user("alice"))
        .build();
    let answer = agent
        .prompt("Is she vegetarian? What should I cook?")
        .await
        .unwrap();
    assert_eq!(answer.output(), "Vegetable paella.");
    let sent = sent_text(&server.received()[0].body);
    assert!(sent.contains("can't stand coriander"), "{sent}");
    assert!(sent.contains("Valencia"), "{sent}");
    assert!(!sent.contains("steak"), "bob's memory leaked: {sent}");
}

fn request(query: &str, samples: u64) -> VectorSearchRequest {
    VectorSearchRequest::builder()
        .query(query)
        .samples(samples)
        .build()
}

/// The memlane error inside an index error.
fn status(error: VectorStoreError) -> u16 {
    match error {
        VectorStoreError::DatastoreError(inner) => inner
            .downcast_ref::<memlane::Error>()
            .expect("a memlane error")
            .status(),
        other => panic!("not a datastore error: {other}"),
    }
}

#[tokio::test]
async fn the_index_searches_the_scope_with_rigs_samples_threshold_and_filters() {
    let dir = tempfile::tempdir().unwrap();
    let memory = memory_of_alice_and_bob(&dir).await;
    let alice = MemoryIndex::new(memory.clone()).user("alice");

    let hits = alice
        .top_n::<RecalledMemory>(request("vegetarian coriander", 10))
        .await
        .unwrap();
    assert_eq!(hits.len(), 2, "alice's two memories, not bob's");
    assert_eq!(
        hits[0].document.memory,
        "I'm vegetarian and I can't stand coriander"
    );
    assert!(hits[0].score > hits[1].score && hits[0].score <= 1.0);
    let full = memory.get(hits[0].id.parse::<uuid::Uuid>().unwrap()).await;
    assert_eq!(full.unwrap().memory, hits[0].document.memory);
    let ids = alice
        .top_n_ids(request("vegetarian coriander", 10))
        .await
        .unwrap();
    assert_eq!(
        ids.iter().map(|h| &h.id).collect::<Vec<_>>(),
        hits.iter().map(|h| &h.id).collect::<Vec<_>>()
    );

    // samples is top_k.
    let one = alice.top_n_ids(request("vegetarian", 1)).await.unwrap();
    assert_eq!(one.len(), 1);
    // rig's filters narrow the scope: eq on metadata, or, and.
    let home = VectorSearchRequest::builder()
        .query("vegetarian")
        .samples(10)
        .filter(Filter::eq("metadata.topic", json!("home")))
        .build();
    let found = alice.top_n::<RecalledMemory>(home).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].document.memory, "I moved to Valencia last month");
    let either = VectorSearchRequest::builder()
        .query("vegetarian")
        .samples(10)
        .filter(
            Filter::eq("metadata.topic", json!("home"))
                .or(Filter::eq("metadata.topic", json!("food")))
                .and(Filter::gt("created_at", json!("2000-01-01"))),
        )
        .build();
    assert_eq!(alice.top_n_ids(either).await.unwrap().len(), 2);
    // A filter never widens the owners set on the index.
    let bob = VectorSearchRequest::builder()
        .query("vegetarian")
        .samples(10)
        .filter(Filter::eq("user_id", json!("bob")))
        .build();
    assert!(alice.top_n_ids(bob).await.unwrap().is_empty());
    // A threshold above every score keeps nothing.
    let strict = VectorSearchRequest::builder()
        .query("vegetarian")
        .samples(10)
        .threshold(1.0)
        .build();
    assert!(alice.top_n_ids(strict).await.unwrap().is_empty());

    // memlane's 400s reach rig as datastore errors holding the memlane error.
    assert_eq!(
        status(alice.top_n_ids(request("x", 0)).await.unwrap_err()),
        400
    );
    let unknown = VectorSearchRequest::builder()
        .query("vegetarian")
        .samples(10)
        .filter(Filter::eq("colour", json!("blue")))
        .build();
    assert_eq!(status(alice.top_n_ids(unknown).await.unwrap_err()), 400);
}

#[tokio::test]
async fn a_memlane_llm_runs_an_agent_with_its_context_and_usage() {
    let dir = tempfile::tempdir().unwrap();
    let memory = memory_of_alice_and_bob(&dir).await;
    let llm = Arc::new(ScriptedLlm::new(["Cook her a vegetable paella."]));
    let agent = AgentBuilder::new(completion_model(llm.clone() as Arc<dyn Llm>))
        .preamble("You are Alice's assistant.")
        .dynamic_context(1, MemoryIndex::new(memory.clone()).user("alice"))
        .max_tokens(40)
        .temperature(0.5)
        .build();
    let answer = agent
        .prompt("What should I cook for her? She's vegetarian.")
        .await
        .unwrap();
    assert_eq!(answer.output(), "Cook her a vegetable paella.");

    let sent = llm.requests();
    assert_eq!(sent.len(), 1);
    let chat = &sent[0];
    assert_eq!((chat.max_tokens, chat.temperature), (40, 0.5));
    let roles: Vec<&str> = chat.messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["system", "user"]);
    assert_eq!(chat.messages[0].content, "You are Alice's assistant.");
    // The recalled memory comes first in the user's message, the prompt last.
    let user = &chat.messages[1].content;
    let memory_at = user.find("can't stand coriander").expect("the memory");
    let prompt_at = user.find("What should I cook").expect("the prompt");
    assert!(memory_at < prompt_at, "{user}");
    assert!(!user.contains("Valencia"), "samples 1 keeps one memory");
    // The scripted model counts a token per four bytes; rig reports what memlane counted.
    let expected = ScriptedLlm::new(["Cook her a vegetable paella."])
        .chat(chat.clone())
        .await
        .unwrap()
        .usage;
    assert_eq!(answer.usage.input_tokens, Some(expected.prompt_tokens));
    assert_eq!(answer.usage.output_tokens, Some(expected.completion_tokens));
}

#[tokio::test]
async fn a_memlane_llm_refuses_tools_and_reports_model_errors_with_their_status() {
    let dir = tempfile::tempdir().unwrap();
    let memory = common::open(&dir.path().join("m.db"), 64).await;
    let llm = Arc::new(ScriptedLlm::new(["never read"]));
    let with_tools = AgentBuilder::new(completion_model(llm.clone() as Arc<dyn Llm>))
        .tool(RecallTool::new(memory.clone()).user("alice"))
        .build();
    let refused = with_tools.prompt("hello").await.unwrap_err().to_string();
    assert!(
        refused.contains("call no tools") && refused.contains("recall_memories"),
        "{refused}"
    );
    assert!(llm.requests().is_empty(), "nothing reached the model");

    // A model failure (here: the script has run out, a 502) keeps memlane's status and detail.
    let empty = Arc::new(ScriptedLlm::new(Vec::<String>::new()));
    let agent = AgentBuilder::new(completion_model(empty as Arc<dyn Llm>)).build();
    let failed = agent.prompt("hello").await.unwrap_err().to_string();
    assert!(failed.contains("502"), "{failed}");
}

#[tokio::test]
async fn a_memlane_llm_reads_rigs_placeholders_for_images_and_audio() {
    use memlane::rig::rig_core::completion::Message;
    use memlane::rig::rig_core::message::{Audio, DocumentSourceKind, Image, UserContent};

    let llm = Arc::new(ScriptedLlm::new(["A cat."]));
    let agent = AgentBuilder::new(completion_model(llm.clone() as Arc<dyn Llm>)).build();
    let prompt = Message::User {
        content: vec![
            UserContent::text("What is in these?"),
            UserContent::Image(Image {
                data: DocumentSourceKind::Url("https://example.com/cat.png".into()),
                ..Image::default()
            }),
            UserContent::Audio(Audio {
                data: DocumentSourceKind::Base64("AAAA".into()),
                ..Audio::default()
            }),
        ],
    };
    let answer = agent.prompt(prompt).await.unwrap();
    assert_eq!(answer.output(), "A cat.");
    let sent = &llm.requests()[0].messages[0].content;
    assert!(sent.starts_with("What is in these?"), "{sent}");
    assert!(
        sent.contains("(image omitted") && sent.contains("(audio omitted"),
        "{sent}"
    );
    assert!(
        !sent.contains("cat.png") && !sent.contains("AAAA"),
        "{sent}"
    );
}
