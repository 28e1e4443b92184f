//! `add` with inference, `extract`, project configuration and `consolidate`, through the
//! public API on a real SQLite file and HNSW index, with a scripted language model (the
//! logic under test is memlane's; `tests/models/local_llm.rs` runs the real local model).

use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use chrono::{TimeZone, Utc};
use memlane::config::{Label, ProductVariant, ProjectConfig};
use memlane::credits::Prices;
use memlane::llm::{ChatRequest, ChatResponse};
use memlane::record::HistoryEvent;
use memlane::{Error, Llm, Memory, Message, ScriptedLlm};
use serde_json::json;

use crate::common::shown_memories;
use memlane::ErrorKind;

async fn open(dir: &tempfile::TempDir, llm: Option<Arc<dyn Llm>>) -> Memory {
    crate::common::open_with_llm(&dir.path().join("m.db"), 256, llm).await
}

fn facts(items: &[&str]) -> String {
    let facts: Vec<_> = items
        .iter()
        .map(|t| json!({"text": t, "categories": ["personal_details"], "entities": [], "importance": 6}))
        .collect();
    json!({ "facts": facts }).to_string()
}

/// What a scripted model is asked: the request's last message, and the schema of its
/// answer as text (empty when there is none).
fn question_and_schema(request: &ChatRequest) -> (&str, String) {
    let last = request.messages.last().map_or("", |m| m.content.as_str());
    let schema = request
        .schema
        .as_ref()
        .map(|s| s.to_string())
        .unwrap_or_default();
    (last, schema)
}

/// Whether an add's fact took the place of a memory: its new memory first, then each
/// memory it superseded.
fn supersedes(out: &memlane::ops::add::AddResult) -> bool {
    out.results.first().map(|r| r.event) == Some(HistoryEvent::Add)
        && out.results[1..]
            .iter()
            .any(|r| r.event == HistoryEvent::Supersede)
}

async fn live(memory: &Memory, user: &str) -> Vec<String> {
    crate::common::sorted_texts(memory.list().user(user).await.unwrap())
}

#[tokio::test]
async fn facts_are_stored_with_core_categories_and_history() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([json!({"facts": [
        {"text": "Alice is vegetarian", "categories": ["diet", "invented"], "entities": ["Alice"], "importance": 8},
        {"text": "Alice lives in Lisbon", "categories": ["home"], "entities": ["Alice", "Lisbon"]}
    ]})
    .to_string()]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    memory
        .put_config(&json!({
            "extraction_policy": "Never store health data.",
            "label_taxonomy": [{"diet": "what they eat"}, {"home": "where they live"}]
        }))
        .await
        .unwrap();
    let messages = vec![
        Message::user("Hi! I'm Alice, I live in Lisbon and I don't eat meat."),
        Message::assistant("Nice to meet you, Alice!"),
    ];
    let out = memory
        .add(messages.clone())
        .user("alice")
        .categories(["onboarding"])
        .metadata(json!({"source": "chat"}))
        .await
        .unwrap();
    assert_eq!(out.results.len(), 2);
    assert_eq!(out.credits_used, 2);
    assert!(out.usage.prompt_tokens > 0 && out.usage.completion_tokens > 0);
    let first = &out.results[0];
    assert_eq!(first.event, HistoryEvent::Add);
    assert_eq!(first.memory, "Alice is vegetarian");
    let core = &first.metadata["core"];
    assert_eq!(core["entities"], json!(["Alice"]));
    assert_eq!(core["importance"], json!(8));
    assert_eq!(core["tags"], json!(["onboarding", "diet"]));
    assert_eq!(first.metadata["source"], json!("chat"));

    let record = memory.get(first.id).await.unwrap();
    assert_eq!(record.categories, vec!["onboarding", "diet"]);
    let history = memory.history(first.id).await.unwrap();
    assert_eq!(history[0].input, messages);

    // The prompt carried the project's policy, labels and the conversation.
    let system = &llm.requests()[0].messages[0].content;
    assert!(system.contains("Never store health data."), "{system}");
    assert!(system.contains("home (where they live)"));
    // The conversation is the last message, after the fixed instructions and examples.
    assert!(llm.requests()[0]
        .messages
        .last()
        .unwrap()
        .content
        .contains("user: Hi! I'm Alice"));
    // One call: an empty store has nothing to reconcile with.
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn small_talk_stores_nothing_and_costs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([r#"{"facts": []}"#]);
    let memory = open(&dir, Some(Arc::new(llm))).await;
    let before = memory.credits().await.unwrap();
    let out = memory
        .add("hey, how's it going?")
        .user("bob")
        .await
        .unwrap();
    assert!(out.results.is_empty());
    assert_eq!(out.credits_used, 0);
    assert_eq!(out.credits_remaining, before);
    assert!(live(&memory, "bob").await.is_empty());
}

#[tokio::test]
async fn an_update_supersedes_the_memory_and_records_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([
        facts(&["Alice lives in Lisbon"]),
        facts(&["Alice lives in Lisbon, in the Alfama district"]),
        json!({"decisions": [{"fact": 0, "event": "UPDATE", "memory": 0,
                              "text": "Alice lives in the Alfama district of Lisbon"}]})
        .to_string(),
    ]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let id = memory
        .add("I live in Lisbon")
        .user("alice")
        .await
        .unwrap()
        .results[0]
        .id;
    let input = vec![Message::user("I'm in Alfama, actually")];
    let out = memory.add(input.clone()).user("alice").await.unwrap();
    assert!(supersedes(&out));
    let (added, ended) = (&out.results[0], &out.results[1]);
    // The new memory takes the new fact as the user stated it, not the model's rewrite.
    assert_eq!(
        added.memory,
        "Alice lives in Lisbon, in the Alfama district"
    );
    assert_ne!(added.id, id);
    assert_eq!((ended.id, ended.superseded_by), (id, Some(added.id)));
    assert_eq!(ended.memory, "Alice lives in Lisbon");
    assert_eq!(out.credits_used, 1);
    assert_eq!(
        live(&memory, "alice").await,
        vec!["Alice lives in Lisbon, in the Alfama district"]
    );
    let history = memory.history(id).await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[1].event, HistoryEvent::Supersede);
    assert_eq!(history[1].input, input);
    assert_eq!(memory.history(added.id).await.unwrap()[0].input, input);
    // The model saw numbered memories, never real ids.
    let prompt = &llm.requests()[2].messages[1].content;
    assert!(prompt.contains(r#""memory":0"#), "{prompt}");
    assert!(!prompt.contains(&id.to_string()));
    // Search finds the new memory.
    let hits = memory.search("Alfama").user("alice").await.unwrap();
    assert_eq!(hits.results[0].record.id, added.id);
}

#[tokio::test]
async fn known_facts_are_not_stored_twice() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([
        facts(&["Alice likes green tea"]),
        // The same text again: known without asking the model.
        facts(&["Alice likes green tea"]),
        // A rephrasing: the model says NONE.
        facts(&["Alice enjoys green tea"]),
        json!({"decisions": [{"fact": 0, "event": "NONE", "memory": 0}]}).to_string(),
    ]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    memory.add("I like green tea").user("alice").await.unwrap();
    let again = memory.add("I like green tea").user("alice").await.unwrap();
    assert!(again.results.is_empty());
    assert_eq!(again.credits_used, 0);
    assert_eq!(
        llm.requests().len(),
        2,
        "an exact repeat needs no reconciliation"
    );
    let rephrased = memory
        .add("green tea is great")
        .user("alice")
        .await
        .unwrap();
    assert!(rephrased.results.is_empty());
    assert_eq!(live(&memory, "alice").await, vec!["Alice likes green tea"]);
    // Another user's identical fact is theirs to keep.
    let llm2 = ScriptedLlm::new([facts(&["Alice likes green tea"])]);
    drop(memory);
    let memory = open(&dir, Some(Arc::new(llm2))).await;
    let other = memory.add("x").user("bob").await.unwrap();
    assert_eq!(other.results.len(), 1);
}

#[tokio::test]
async fn immutable_memories_are_never_changed_by_inference() {
    let dir = tempfile::tempdir().unwrap();
    // Reconciliation always targets the fixed memory with the scripted event; extraction
    // replies are queued before each add.
    let event = Arc::new(Mutex::new("DELETE"));
    let chosen = Arc::clone(&event);
    let llm = ScriptedLlm::from_fn(move |request| {
        let prompt = &request.messages.last().unwrap().content;
        // A closer look at a mutable memory beside an added fact: not replaced.
        if prompt.starts_with("Memory: ") {
            return Ok(r#"{"answer": "no"}"#.into());
        }
        let fixed = shown_memories(prompt)
            .iter()
            .find(|m| m.get("fixed").is_some())
            .map(|m| m["memory"].clone())
            .unwrap();
        let event = *chosen.lock().unwrap();
        Ok(
            json!({"decisions": [{"fact": 0, "event": event, "memory": fixed,
                                 "text": "Alice is allergic to peanuts and cashews"}]})
            .to_string(),
        )
    });
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    llm.push(facts(&["Alice is allergic to peanuts"]));
    let fixed = memory
        .add("I'm allergic to peanuts")
        .user("alice")
        .immutable(true)
        .await
        .unwrap()
        .results[0]
        .id;
    llm.push(facts(&["Alice is no longer allergic to peanuts"]));
    let deleted = memory.add("not anymore").user("alice").await.unwrap();
    assert_eq!(deleted.results.len(), 1);
    assert_eq!(deleted.results[0].event, HistoryEvent::Add);
    assert!(!supersedes(&deleted));
    *event.lock().unwrap() = "UPDATE";
    llm.push(facts(&["Alice is allergic to peanuts and cashews"]));
    let updated = memory.add("cashews too").user("alice").await.unwrap();
    assert_eq!(updated.results.len(), 1);
    assert_eq!(updated.results[0].event, HistoryEvent::Add);
    assert!(!supersedes(&updated));
    assert_ne!(updated.results[0].id, fixed);
    let record = memory.get(fixed).await.unwrap();
    assert_eq!(record.memory, "Alice is allergic to peanuts");
    assert_eq!(memory.history(fixed).await.unwrap().len(), 1);
    // Three extractions and two judgements; the model never saw the fixed memory's id.
    assert_eq!(llm.requests().len(), 5);
}

#[tokio::test]
async fn a_failed_reconciliation_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([
        facts(&["Alice lives in Lisbon"]),
        facts(&["Alice lives in Porto", "Alice has a cat"]),
        "I think memory 0 should be updated".to_string(),
        json!({"decisions": [{"fact": 0, "event": "UPDATE", "memory": 7, "text": "x"}]})
            .to_string(),
    ]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    memory.add("I live in Lisbon").user("alice").await.unwrap();
    let credits = memory.credits().await.unwrap();
    let err = memory
        .add("Porto now, and a cat")
        .user("alice")
        .await
        .unwrap_err();
    assert_eq!(err.status(), 502);
    assert!(err.detail().contains("memory 7 does not exist"), "{err}");
    assert!(err.detail().contains("nothing was stored"), "{err}");
    assert_eq!(live(&memory, "alice").await, vec!["Alice lives in Lisbon"]);
    assert_eq!(memory.credits().await.unwrap(), credits);
    // The retry fed the first error back.
    let retry = &llm.requests()[3].messages;
    assert!(retry
        .last()
        .unwrap()
        .content
        .contains("no complete JSON object"));

    // A provider failure half way is the provider's error, and stores nothing either.
    llm.push(facts(&["Alice lives in Braga"]));
    llm.push_error(Error::provider("upstream down", true));
    let err = memory.add("Braga now").user("alice").await.unwrap_err();
    assert_eq!((err.status(), err.is_transient()), (502, true));
    assert_eq!(live(&memory, "alice").await, vec!["Alice lives in Lisbon"]);
}

#[tokio::test]
async fn relative_dates_are_stored_as_absolute_dates() {
    let dir = tempfile::tempdir().unwrap();
    // A model that left "next Friday" in the fact.
    let llm = ScriptedLlm::new([facts(&["Alice flies to Oslo next Friday"])]);
    let memory = open(&dir, Some(Arc::new(llm))).await;
    let sunday = Utc.with_ymd_and_hms(2026, 11, 22, 9, 0, 0).unwrap();
    let out = memory
        .add("I fly to Oslo next Friday!")
        .user("alice")
        .timestamp(sunday)
        .await
        .unwrap();
    // With a model, inference is the default.
    assert!(out.inferred);
    assert_eq!(
        out.results[0].memory,
        "Alice flies to Oslo next Friday (2026-11-27)"
    );
}

#[tokio::test]
async fn without_a_model_add_stores_verbatim_unless_inference_is_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(&dir, None).await;
    // By default: verbatim, and the result says so.
    let out = memory.add("I like tea").user("a").await.unwrap();
    assert!(!out.inferred);
    assert_eq!(out.results.len(), 1);
    assert_eq!(out.results[0].memory, "I like tea");
    assert_eq!(out.usage.prompt_tokens, 0);
    // Asked for, inference without a model is a 503 that says what to do, and stores nothing.
    let err = memory
        .add("I like coffee")
        .user("a")
        .infer(true)
        .await
        .unwrap_err();
    assert_eq!((err.status(), err.kind()), (503, ErrorKind::NotConfigured));
    assert!(err.detail().contains("infer(false)"));
    assert_eq!(memory.list().user("a").await.unwrap().results.len(), 1);
    let err = memory.add("I like tea").await.unwrap_err();
    assert_eq!(err.status(), 400);
    let llm = ScriptedLlm::new(Vec::<String>::new());
    let memory = open(&tempfile::tempdir().unwrap(), Some(Arc::new(llm.clone()))).await;
    let err = memory
        .add(Vec::<Message>::new())
        .user("a")
        .await
        .unwrap_err();
    assert_eq!(err.status(), 400);
    assert!(
        llm.requests().is_empty(),
        "bad input never reaches the model"
    );
}

#[tokio::test]
async fn extract_returns_core_usage_and_stores_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let digest = json!({
        "summary": "Alice is planning a trip to Japan next month",
        "entities": ["Alice", "Japan"],
        "tags": ["travel", "made_up"],
        "key_facts": ["Alice plans to visit Japan", " "],
        "importance": 7
    })
    .to_string();
    let llm = ScriptedLlm::new([digest.clone(), digest]);
    let memory = open(&dir, Some(Arc::new(llm))).await;
    let at = Utc.with_ymd_and_hms(2026, 11, 22, 14, 5, 59).unwrap();
    let out = memory
        .extract("I'm going to Japan next month!")
        .user("alice")
        .timestamp(at)
        .await
        .unwrap();
    assert_eq!(out.core.timestamp, "2026-11-22T14:05");
    assert_eq!(
        out.core.summary,
        "Alice is planning a trip to Japan next month (2026-12)"
    );
    assert_eq!(out.core.tags, vec!["travel"]);
    assert_eq!(out.core.key_facts, vec!["Alice plans to visit Japan"]);
    assert_eq!(out.core.importance, 7);
    assert!(out.extensions.is_empty());
    assert_eq!(out.memory_id, None);
    assert_eq!(out.usage.core.model, "scripted");
    assert!(out.usage.core.prompt_tokens > 0);
    let wire = serde_json::to_value(&out).unwrap();
    assert_eq!(wire["extensions"], json!({}));
    assert!(wire.get("memory_id").is_none());
    assert!(live(&memory, "alice").await.is_empty());

    let stored = memory
        .extract("I'm going to Japan next month!")
        .user("alice")
        .store(true)
        .metadata(json!({"channel": "sms"}))
        .await
        .unwrap();
    let id = stored.memory_id.unwrap();
    let record = memory.get(id).await.unwrap();
    assert_eq!(record.memory, stored.core.summary);
    assert_eq!(
        record.metadata["core"]["entities"],
        json!(["Alice", "Japan"])
    );
    assert_eq!(record.metadata["channel"], json!("sms"));
    assert_eq!(stored.credits_used, 1);
}

#[tokio::test]
async fn extract_is_refused_on_other_variants_and_checks_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new(Vec::<String>::new());
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    assert_eq!(
        memory.product_variant().await.unwrap(),
        ProductVariant::Structured
    );
    let err = memory
        .extract("hi")
        .extension("sentiment")
        .await
        .unwrap_err();
    assert_eq!(err.status(), 400);
    let err = memory.extract("hi").store(true).await.unwrap_err();
    assert_eq!(err.status(), 400);
    assert!(err.detail().contains("owner"));
    memory
        .set_product_variant(ProductVariant::Memory)
        .await
        .unwrap();
    drop(memory);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let err = memory.extract("hi").user("a").await.unwrap_err();
    assert_eq!(err.status(), 403);
    assert!(err.detail().contains("memory variant"), "{err}");
    assert!(llm.requests().is_empty());
}

#[tokio::test]
async fn project_config_round_trips_and_rejects_bad_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(&dir, None).await;
    assert_eq!(memory.config().await.unwrap(), ProjectConfig::default());
    let put = memory
        .put_config(
            &json!({"extraction_policy": "Only food.", "label_taxonomy": [{"food": "meals"}]}),
        )
        .await
        .unwrap();
    assert_eq!(put.credits_used, 0);
    for bad in [
        json!({"label_taxonomy": [{"food": "meals", "x": "y"}]}),
        json!({"label_taxonomy": "food"}),
        json!({"extraction_policy": ["x"]}),
        json!({"label_taxonomy": [{"food": {"nested": true}}]}),
    ] {
        let err = memory.put_config(&bad).await.unwrap_err();
        assert_eq!(err.status(), 400, "{bad}");
    }
    // A partial body keeps the other field.
    memory
        .put_config(&json!({"extraction_policy": "Food and drink."}))
        .await
        .unwrap();
    drop(memory);
    let memory = open(&dir, None).await;
    let config = memory.config().await.unwrap();
    assert_eq!(config.extraction_policy, "Food and drink.");
    assert_eq!(config.label_taxonomy, vec![Label::new("food", "meals")]);
    assert_eq!(
        serde_json::to_value(&config).unwrap(),
        json!({"extraction_policy": "Food and drink.", "label_taxonomy": [{"food": "meals"}]})
    );
}

/// A model that, while reconciling, lets another writer change the memory it is about to
/// update.
#[derive(Debug)]
struct Interfering {
    memory: OnceLock<Memory>,
    target: Mutex<Option<uuid::Uuid>>,
    script: ScriptedLlm,
}

#[async_trait]
impl Llm for Interfering {
    fn model_id(&self) -> &str {
        "interfering"
    }

    async fn chat(&self, request: ChatRequest) -> memlane::Result<ChatResponse> {
        let reconciling = request.messages[0].content.contains("memory store current");
        let target = *self.target.lock().unwrap();
        if let (true, Some(id), Some(memory)) = (reconciling, target, self.memory.get()) {
            memory.update(id).text("Alice lives in Faro").await?;
        }
        self.script.chat(request).await
    }
}

#[tokio::test]
async fn a_memory_changed_during_reconciliation_is_a_409_and_nothing_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let llm = Arc::new(Interfering {
        memory: OnceLock::new(),
        target: Mutex::new(None),
        script: ScriptedLlm::new([
            facts(&["Alice lives in Lisbon"]),
            facts(&["Alice lives in Lisbon, near the river", "Alice has a cat"]),
            json!({"decisions": [
                {"fact": 0, "event": "UPDATE", "memory": 0, "text": "Alice lives in Lisbon near the river"},
                {"fact": 1, "event": "ADD"}
            ]})
            .to_string(),
        ]),
    });
    let memory = open(&dir, Some(llm.clone())).await;
    llm.memory.set(memory.clone()).unwrap();
    let id = memory.add("Lisbon").user("alice").await.unwrap().results[0].id;
    *llm.target.lock().unwrap() = Some(id);
    let err = memory
        .add("near the river; I have a cat")
        .user("alice")
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409, "{err}");
    assert!(err.detail().contains("retry"));
    // The other writer's change stands; neither the update nor the new fact was written.
    assert_eq!(live(&memory, "alice").await, vec!["Alice lives in Faro"]);
}

#[tokio::test]
async fn consolidate_merges_near_duplicates_per_owner() {
    let dir = tempfile::tempdir().unwrap();
    let llm =
        ScriptedLlm::new([json!({"text": "Alice loves green tea, especially sencha"}).to_string()]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let add = |user: &'static str, text: &'static str| {
        let memory = memory.clone();
        async move {
            memory
                .add(text)
                .user(user)
                .infer(false)
                .await
                .unwrap()
                .results[0]
                .id
        }
    };
    let a1 = add("alice", "Alice loves green tea").await;
    let a2 = add("alice", "Alice loves green tea, especially sencha").await;
    let a3 = add("alice", "Alice plays the cello on weekends").await;
    let b1 = add("bob", "Alice loves green tea").await;
    let fixed = memory
        .add("Alice loves green tea!")
        .user("alice")
        .infer(false)
        .immutable(true)
        .await
        .unwrap()
        .results[0]
        .id;

    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let dry = memory
        .consolidate()
        .threshold(0.75)
        .dry_run(true)
        .on_progress(move |p| log.lock().unwrap().push(p))
        .await
        .unwrap();
    assert!(dry.dry_run);
    assert_eq!(dry.clusters.len(), 1, "{dry:?}");
    assert_eq!(dry.clusters[0].kept, a2);
    assert_eq!(dry.clusters[0].merged, vec![a1]);
    assert_eq!(dry.examined, 4, "the immutable memory is left out");
    // As it starts, then after each of the two owners.
    let reports: Vec<(u64, u64)> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|p| (p.done, p.total))
        .collect();
    assert_eq!(reports, [(0, 2), (1, 2), (2, 2)]);
    assert!(seen
        .lock()
        .unwrap()
        .iter()
        .all(|p| p.task == memlane::progress::Task::Consolidate));
    assert!(llm.requests().is_empty(), "a dry run calls no model");
    assert_eq!(live(&memory, "alice").await.len(), 4);

    let done = memory.consolidate().threshold(0.75).await.unwrap();
    assert_eq!(done.clusters.len(), 1);
    assert_eq!(
        done.clusters[0].memory,
        "Alice loves green tea, especially sencha"
    );
    assert_eq!(memory.get(a1).await.unwrap_err().status(), 404);
    for id in [a2, a3, b1, fixed] {
        memory.get(id).await.unwrap();
    }
    let history = memory.history(a1).await.unwrap();
    assert!(history.last().unwrap().input[0]
        .content
        .contains(&a2.to_string()));
    let err = memory.consolidate().threshold(0.2).await.unwrap_err();
    assert_eq!(err.status(), 400);
}

#[tokio::test]
async fn consolidate_with_a_model_rewrites_the_kept_memory() {
    let dir = tempfile::tempdir().unwrap();
    let llm =
        ScriptedLlm::new([json!({"text": "Alice runs 10 km every Sunday morning"}).to_string()]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    for text in [
        "Alice runs 10 km every Sunday",
        "Alice runs 10 km every Sunday morning.",
    ] {
        memory.add(text).user("alice").infer(false).await.unwrap();
    }
    let out = memory
        .consolidate()
        .user("alice")
        .threshold(0.7)
        .await
        .unwrap();
    assert_eq!(out.clusters.len(), 1, "{out:?}");
    assert_eq!(out.credits_used, 1);
    assert_eq!(
        live(&memory, "alice").await,
        vec!["Alice runs 10 km every Sunday morning"]
    );
    let kept = out.clusters[0].kept;
    let history = memory.history(kept).await.unwrap();
    assert_eq!(history.last().unwrap().event, HistoryEvent::Update);
    assert_eq!(llm.requests().len(), 1);
    assert!(llm.requests()[0].messages[1]
        .content
        .contains("every Sunday"));
}

/// A merging model that, on its `at`-th call, lets another writer change a memory of the
/// cluster it is merging.
#[derive(Debug)]
struct RacingMerge {
    memory: OnceLock<Memory>,
    calls: Mutex<usize>,
    at: usize,
    target: OnceLock<uuid::Uuid>,
    script: ScriptedLlm,
}

#[async_trait]
impl Llm for RacingMerge {
    fn model_id(&self) -> &str {
        "racing-merge"
    }

    async fn chat(&self, request: ChatRequest) -> memlane::Result<ChatResponse> {
        let call = {
            let mut calls = self.calls.lock().unwrap();
            *calls += 1;
            *calls
        };
        if call == self.at {
            let memory = self.memory.get().unwrap();
            let id = *self.target.get().unwrap();
            memory.update(id).text("changed meanwhile").await?;
        }
        self.script.chat(request).await
    }
}

#[tokio::test]
async fn consolidate_pays_for_every_model_call_and_stops_when_the_balance_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let merged = |text: &str| json!({ "text": text }).to_string();
    let llm = Arc::new(RacingMerge {
        memory: OnceLock::new(),
        calls: Mutex::new(0),
        at: 2,
        target: OnceLock::new(),
        script: ScriptedLlm::new([merged("Ann drinks green tea daily"), merged("unused")]),
    });
    let memory = open(&dir, Some(llm.clone())).await;
    llm.memory.set(memory.clone()).unwrap();
    memory
        .set_prices(Prices {
            add: 0,
            update: 1,
            inference: 10,
        })
        .await
        .unwrap();
    let mut ids = Vec::new();
    for user in ["u1", "u2", "u3"] {
        for text in ["Ann drinks green tea", "Ann drinks green tea!"] {
            let out = memory.add(text).user(user).infer(false).await.unwrap();
            ids.push(out.results[0].id);
        }
    }
    llm.target.set(ids[2]).unwrap();
    // Enough for: cluster 1 (a model call, 10, and an update, 1), the racing update (1),
    // cluster 2's model call (10, paid though its cluster is skipped), and 5 more: not
    // enough for cluster 3's call.
    let balance = memory.credits().await.unwrap();
    let charge = memlane::store::WriteBatch::new(Vec::new(), balance - 27);
    memlane::store::apply(&**memory.store(), charge)
        .await
        .unwrap();

    // A dry run calls no model and pays nothing.
    let dry = memory
        .consolidate()
        .threshold(0.7)
        .dry_run(true)
        .await
        .unwrap();
    assert_eq!(dry.clusters.len(), 3);
    assert_eq!((dry.credits_used, dry.credits_remaining), (0, 27));
    assert_eq!(*llm.calls.lock().unwrap(), 0);

    let out = memory.consolidate().threshold(0.7).await.unwrap();
    assert_eq!(out.clusters.len(), 1, "{out:?}");
    assert_eq!(out.skipped, 1);
    assert_eq!(
        *llm.calls.lock().unwrap(),
        2,
        "no call it could not pay for"
    );
    assert_eq!(
        out.credits_used, 21,
        "11 for the merge, 10 for the skipped call"
    );
    assert_eq!(out.credits_remaining, 5);
    assert_eq!(memory.credits().await.unwrap(), 5);
    let stopped = out.stopped.expect("the run stopped early");
    assert_eq!(stopped.status, 402);
    assert!(
        stopped.detail.contains("before merging cluster 3") && stopped.detail.contains("1 cluster"),
        "{}",
        stopped.detail
    );
    assert_eq!(
        live(&memory, "u1").await,
        vec!["Ann drinks green tea daily"]
    );
    assert_eq!(
        live(&memory, "u2").await,
        vec!["Ann drinks green tea!", "changed meanwhile"],
        "the skipped cluster is untouched"
    );
    assert_eq!(live(&memory, "u3").await.len(), 2, "never reached");
}

/// The model's DELETE of a memory is a supersession: the fact is a new memory, and the
/// memory stays as history. No word of either decides it: the same texts with an ADD
/// leave both current.
#[tokio::test]
async fn the_models_decision_alone_supersedes_a_memory() {
    let dir = tempfile::tempdir().unwrap();
    for (event, superseded) in [("DELETE", true), ("UPDATE", true), ("ADD", false)] {
        let user = format!("alice-{event}");
        let mut decision = json!({"fact": 0, "event": event, "memory": 0});
        if event == "UPDATE" {
            decision["text"] = json!("Alice lives in Porto");
        }
        let llm = ScriptedLlm::new([
            facts(&["Alice lives in Lisbon"]),
            facts(&["Alice lives in Porto now"]),
            json!({ "decisions": [decision] }).to_string(),
        ]);
        let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
        memory.add("I live in Lisbon").user(&user).await.unwrap();
        let out = memory.add("Porto now!").user(&user).await.unwrap();
        assert_eq!(supersedes(&out), superseded, "{event}");
        assert_eq!(llm.pending(), 0, "one extraction and one judgement per add");
        let expected: &[&str] = if superseded {
            &["Alice lives in Porto now"]
        } else {
            &["Alice lives in Lisbon", "Alice lives in Porto now"]
        };
        assert_eq!(live(&memory, &user).await, expected, "{event}");
        let all = memory
            .list()
            .user(&user)
            .include_superseded(true)
            .await
            .unwrap();
        assert_eq!(all.results.len(), 2, "{event}: nothing is lost");
    }
}

/// A model that answers extractions from a script, in order, and judges each fact shown
/// to it with `judge(fact, memories shown)`, which returns the decision's event and the
/// memory it names (by text).
fn judging(
    extractions: Vec<String>,
    judge: impl Fn(&str, &[String]) -> (&'static str, Option<String>) + Send + Sync + 'static,
) -> ScriptedLlm {
    let extractions = Mutex::new(std::collections::VecDeque::from(extractions));
    ScriptedLlm::from_fn(move |request| {
        let (prompt, schema) = question_and_schema(request);
        if schema.contains("\"facts\"") {
            return Ok(extractions
                .lock()
                .unwrap()
                .pop_front()
                .expect("an extraction"));
        }
        let shown: Vec<String> = shown_memories(prompt)
            .iter()
            .map(|m| m["text"].as_str().unwrap().to_owned())
            .collect();
        let new: Vec<serde_json::Value> = prompt
            .split("New facts:\n")
            .nth(1)
            .map(|list| serde_json::from_str(list).unwrap())
            .unwrap_or_default();
        let decisions: Vec<_> = new
            .iter()
            .map(|f| {
                let (event, memory) = judge(f["text"].as_str().unwrap(), &shown);
                let memory = memory.and_then(|m| shown.iter().position(|s| *s == m));
                let still = memory.map(|_| !matches!(event, "UPDATE" | "DELETE"));
                json!({"fact": f["fact"], "memory": memory, "memory_still_true": still,
                       "event": event})
            })
            .collect();
        Ok(json!({ "decisions": decisions }).to_string())
    })
}

/// A NONE that names a memory stores nothing (the fact is known); an ADD beside it stores
/// its fact.
#[tokio::test]
async fn a_repeat_is_not_stored_and_a_new_fact_is() {
    let dir = tempfile::tempdir().unwrap();
    let llm = judging(
        vec![
            facts(&["Alice likes green tea"]),
            facts(&["Alice enjoys green tea", "Alice enjoys jasmine tea"]),
        ],
        |fact, _| {
            if fact.contains("green") {
                ("NONE", Some("Alice likes green tea".into()))
            } else {
                ("ADD", None)
            }
        },
    );
    let memory = open(&dir, Some(Arc::new(llm))).await;
    memory.add("I like green tea").user("alice").await.unwrap();
    let out = memory.add("Tea!").user("alice").await.unwrap();
    let added: Vec<&str> = out.results.iter().map(|r| r.memory.as_str()).collect();
    assert_eq!(added, ["Alice enjoys jasmine tea"]);
    assert_eq!(
        live(&memory, "alice").await,
        ["Alice enjoys jasmine tea", "Alice likes green tea"]
    );
}

/// Two facts that name one memory: the first supersedes it, the second is added beside.
#[tokio::test]
async fn a_memory_is_superseded_once_per_call() {
    let dir = tempfile::tempdir().unwrap();
    let llm = judging(
        vec![
            facts(&["Alice works as a nurse"]),
            facts(&["Alice works as a teacher", "Alice works as a baker"]),
        ],
        |_, _| ("UPDATE", Some("Alice works as a nurse".into())),
    );
    let memory = open(&dir, Some(Arc::new(llm))).await;
    memory.add("I'm a nurse").user("alice").await.unwrap();
    let out = memory.add("New jobs!").user("alice").await.unwrap();
    let events: Vec<HistoryEvent> = out.results.iter().map(|r| r.event).collect();
    assert_eq!(
        events,
        [
            HistoryEvent::Add,
            HistoryEvent::Supersede,
            HistoryEvent::Add
        ]
    );
    assert_eq!(
        live(&memory, "alice").await,
        ["Alice works as a baker", "Alice works as a teacher"]
    );
}
