//! `add` with inference, `extract`, project configuration and `consolidate`, through the
//! public API on a real SQLite file and HNSW index, with a scripted language model (the
//! logic under test is memlane's; `tests/local_llm.rs` runs the real local model).

use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use chrono::{TimeZone, Utc};
use memlane::config::{Label, ProductVariant, ProjectConfig};
use memlane::credits::Prices;
use memlane::llm::{ChatRequest, ChatResponse};
use memlane::record::HistoryEvent;
use memlane::{Error, Llm, Memory, Message, ScriptedLlm};
use serde_json::json;

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

/// The memories a reconciliation prompt shows the model, as `{"memory": i, "text": …}`
/// objects (none when the prompt shows none).
fn shown_memories(prompt: &str) -> Vec<serde_json::Value> {
    let list = prompt
        .split("Existing memories:\n")
        .nth(1)
        .and_then(|rest| rest.split("\n\nNew facts:").next())
        .unwrap_or("[]");
    serde_json::from_str(list).unwrap()
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
    let mut texts: Vec<String> = memory
        .list()
        .user(user)
        .await
        .unwrap()
        .results
        .into_iter()
        .map(|r| r.memory)
        .collect();
    texts.sort();
    texts
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
    assert_eq!(added.memory, "Alice lives in Lisbon, in the Alfama district");
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
async fn a_contradiction_replaces_the_old_memory_once_a_second_look_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let delete = json!({"decisions": [{"fact": 0, "event": "DELETE", "memory": 0}]}).to_string();
    let (yes, no) = (r#"{"answer": "yes"}"#, r#"{"answer": "no"}"#);
    for (looks, replaced) in [(&[yes, no][..], true), (&[no][..], false)] {
        let user = format!("alice-{replaced}");
        let (memory, out) = lisbon_then_porto(&dir, &user, &delete, looks, replaced).await;
        let events: Vec<(HistoryEvent, &str)> = out
            .results
            .iter()
            .map(|r| (r.event, r.memory.as_str()))
            .collect();
        if replaced {
            assert_eq!(
                events,
                vec![
                    (HistoryEvent::Add, "Alice lives in Porto now"),
                    (HistoryEvent::Supersede, "Alice lives in Lisbon")
                ]
            );
            let history = memory.history(out.results[1].id).await.unwrap();
            assert_eq!(
                history.last().map(|h| h.event),
                Some(HistoryEvent::Supersede)
            );
            assert_eq!(
                history.last().map(|h| h.input.clone()),
                Some(vec![Message::user("Porto now!")])
            );
        } else {
            // A DELETE the second look does not confirm loses nothing.
            assert_eq!(
                events,
                vec![(HistoryEvent::Add, "Alice lives in Porto now")]
            );
        }
    }
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
    // Three extractions, two reconciliations, and a closer look at the memory of the second
    // add, never at the fixed one.
    let requests = llm.requests();
    assert_eq!(requests.len(), 6);
    assert_eq!(
        requests[5].messages.last().unwrap().content,
        "Memory: Alice is no longer allergic to peanuts\n\
         New fact: Alice is allergic to peanuts and cashews\nReplaced?"
    );
}

/// Alice says she lives in Lisbon, then in Porto, as `user` of a store in `dir`: the model
/// decides the second add with `decision` and answers the looks that follow with `looks`.
/// Every look is asked, the first about the Lisbon memory and the Porto fact; the Porto
/// fact takes the Lisbon memory's place, its history kept, exactly when `superseded`, and
/// otherwise both stay. Returns the store and the second add's result.
async fn lisbon_then_porto(
    dir: &tempfile::TempDir,
    user: &str,
    decision: &str,
    looks: &[&str],
    superseded: bool,
) -> (Memory, memlane::ops::add::AddResult) {
    let mut script = vec![
        facts(&["Alice lives in Lisbon"]),
        facts(&["Alice lives in Porto now"]),
        decision.to_string(),
    ];
    script.extend(looks.iter().map(|l| l.to_string()));
    let llm = ScriptedLlm::new(script);
    let memory = open(dir, Some(Arc::new(llm.clone()))).await;
    let first = memory.add("I live in Lisbon").user(user).await.unwrap();
    let second = memory.add("Porto now!").user(user).await.unwrap();
    assert_eq!(llm.pending(), 0, "{looks:?}: every question was asked");
    let question = llm.requests()[3].messages.last().unwrap().content.clone();
    assert!(
        question.contains("Memory: Alice lives in Lisbon\nNew fact: Alice lives in Porto now"),
        "{question}"
    );
    if superseded {
        assert!(supersedes(&second));
        assert_eq!(second.results[1].id, first.results[0].id);
        assert_eq!(live(&memory, user).await, vec!["Alice lives in Porto now"]);
        assert_eq!(memory.history(first.results[0].id).await.unwrap().len(), 2);
    } else {
        assert_eq!(second.results[0].event, HistoryEvent::Add, "{looks:?}");
    assert!(!supersedes(&second), "{looks:?}");
        assert_eq!(
            live(&memory, user).await,
            vec!["Alice lives in Lisbon", "Alice lives in Porto now"]
        );
    }
    (memory, second)
}

/// An UPDATE whose text only restates its memory gets a second look: when the model then
/// says the fact replaced the memory and both cannot be true, the memory takes the fact's
/// text, with its history; when it says not replaced, both stay. When it says replaced yet
/// both true, the question the memory answers settles it: replaced when its answer now
/// drops part of the answer before.
#[tokio::test]
async fn a_second_look_settles_a_doubtful_update() {
    let dir = tempfile::tempdir().unwrap();
    let update = json!({"decisions": [{"fact": 0, "event": "UPDATE", "memory": 0,
                                       "text": "Alice lives in Lisbon"}]})
    .to_string();
    let (yes, no) = (r#"{"answer": "yes"}"#, r#"{"answer": "no"}"#);
    let answers = |now: &str| {
        json!({"question": "Where does she live?", "before": "Lisbon", "now": now}).to_string()
    };
    let (moved, stays) = (answers("Porto"), answers("Lisbon"));
    let cases: [(&[&str], bool); 4] = [
        (&[yes, no], true),
        (&[no], false),
        (&[yes, yes, &moved], true),
        (&[yes, yes, &stays], false),
    ];
    for (i, (looks, superseded)) in cases.into_iter().enumerate() {
        let user = format!("alice-{i}");
        lisbon_then_porto(&dir, &user, &update, looks, superseded).await;
    }
}

/// A second look's "replaced" of a memory whose topic the fact leaves (a job, and a milk
/// preference) counts only when the question the memory answers gets an answer now that
/// drops part of the answer before, even when the look says the two cannot both be true:
/// a small model calls a job replaced by a milk preference, yet answers "What is her
/// job?" the same before and now. Then the fact is added and the memory stays; when the
/// answer changes, the fact takes the memory's place.
#[tokio::test]
async fn a_second_look_leaving_the_memorys_topic_needs_its_answer_changed() {
    let dir = tempfile::tempdir().unwrap();
    let delete = json!({"decisions": [{"fact": 0, "event": "DELETE", "memory": 0}]}).to_string();
    let (yes, no) = (r#"{"answer": "yes"}"#, r#"{"answer": "no"}"#);
    for (now, replaced) in [("a nurse", false), ("oat milk", true)] {
        let llm = ScriptedLlm::new([
            facts(&["Sofia works as a nurse"]),
            facts(&["Sofia prefers oat milk"]),
            delete.clone(),
            yes.to_string(),
            no.to_string(),
            json!({"question": "What is her job?", "before": "a nurse", "now": now}).to_string(),
        ]);
        let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
        let user = format!("sofia-{replaced}");
        let first = memory.add("I'm a nurse").user(&user).await.unwrap();
        let second = memory.add("Oat milk for me").user(&user).await.unwrap();
        assert_eq!(llm.pending(), 0, "{now}: the memory's question was asked");
        assert_eq!(
            llm.requests()[5].messages.last().unwrap().content,
            "Memory: Sofia works as a nurse\nNew fact: Sofia prefers oat milk"
        );
        if replaced {
            assert!(supersedes(&second));
            assert_eq!(second.results[1].id, first.results[0].id);
            assert_eq!(live(&memory, &user).await, ["Sofia prefers oat milk"]);
        } else {
            assert_eq!(second.results[0].event, HistoryEvent::Add);
    assert!(!supersedes(&second));
            assert_eq!(
                live(&memory, &user).await,
                ["Sofia prefers oat milk", "Sofia works as a nurse"]
            );
            assert_eq!(memory.history(first.results[0].id).await.unwrap().len(), 1);
        }
    }
}

/// A second look must tell the memory the model named apart from the fact's next most
/// relevant memory. When the look says "replaced" of the named memory only, the fact takes
/// its place. When it says so of both, the question each memory answers decides: the fact
/// takes the place of the one whose answer drops part of what it was, if the other's does
/// not; otherwise the fact is added, both memories stay, and neither gets a closer look
/// with that fact.
#[tokio::test]
async fn a_second_look_must_tell_the_memory_apart_from_the_next() {
    /// What the model answers about the cats memory, and which memory ends replaced.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Case {
        /// "Replaced?" no: the look alone tells the two apart; Lisbon is replaced.
        LookApart,
        /// "Replaced?" yes for both, and both answers change: nothing is replaced.
        BothChange,
        /// "Replaced?" yes for both, and neither answer changes: nothing is replaced.
        NeitherChanges,
        /// "Replaced?" yes for both; only Lisbon's answer changes: Lisbon is replaced.
        QuestionNamed,
        /// "Replaced?" yes for both; only the cats' answer changes: the cats are replaced.
        QuestionRival,
    }
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        Case::LookApart,
        Case::BothChange,
        Case::NeitherChanges,
        Case::QuestionNamed,
        Case::QuestionRival,
    ];
    for case in cases {
        let llm = ScriptedLlm::from_fn(move |request| {
            let (last, schema) = question_and_schema(request);
            let (yes, no) = (r#"{"answer": "yes"}"#, r#"{"answer": "no"}"#);
            let porto = last.contains("New fact: Alice lives in Porto now");
            let named = last.starts_with("Memory: Alice lives in Lisbon\n");
            Ok(if last.ends_with("Replaced?") {
                (if porto && (named || case != Case::LookApart) {
                    yes
                } else {
                    no
                })
                .to_string()
            } else if last.ends_with("Both true?") {
                no.to_string()
            } else if schema.contains("before") {
                // The memory's question: its answer changes for the memories the case says.
                let (before, changes) = if named {
                    ("in Lisbon", case != Case::QuestionRival)
                } else {
                    ("with two cats", case != Case::QuestionNamed)
                };
                let changes = changes && case != Case::NeitherChanges;
                let now = if changes { "in Porto" } else { before };
                json!({"question": "Where does she live?", "before": before, "now": now})
                    .to_string()
            } else if schema.contains("decisions") {
                // An UPDATE of the Lisbon memory that only restates it (doubtful) for the
                // move, an ADD for anything else.
                let lisbon = shown_memories(last)
                    .iter()
                    .find(|m| m["text"] == "Alice lives in Lisbon")
                    .map(|m| m["memory"].clone());
                match lisbon.filter(|_| last.contains("Porto")) {
                    Some(m) => json!({"decisions": [{"fact": 0, "event": "UPDATE",
                                       "memory": m, "text": "Alice lives in Lisbon"}]}),
                    None => json!({"decisions": [{"fact": 0, "event": "ADD"}]}),
                }
                .to_string()
            } else if last.contains("Porto") {
                facts(&["Alice lives in Porto now"])
            } else if last.contains("cats") {
                facts(&["Alice lives in Lisbon with two cats"])
            } else {
                facts(&["Alice lives in Lisbon"])
            })
        });
        let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
        let user = format!("alice-{case:?}");
        let lisbon = memory.add("I live in Lisbon").user(&user).await.unwrap();
        let cats = memory
            .add("I live in Lisbon with two cats")
            .user(&user)
            .await
            .unwrap();
        let moved = memory.add("Porto now!").user(&user).await.unwrap();
        // Both memories were asked about with the move; their questions only after a yes
        // for both.
        let asked = |ending: &str| {
            llm.requests()
                .iter()
                .map(|r| r.messages.last().unwrap().content.clone())
                .filter(|q| q.contains("New fact: Alice lives in Porto now") && q.ends_with(ending))
                .count()
        };
        assert_eq!(asked("Replaced?"), 2, "{case:?}");
        let questions = if case == Case::LookApart { 0 } else { 2 };
        assert_eq!(asked("Porto now"), questions, "{case:?}");
        let (replaced, kept) = match case {
            Case::LookApart | Case::QuestionNamed => {
                (Some(&lisbon), "Alice lives in Lisbon with two cats")
            }
            Case::QuestionRival => (Some(&cats), "Alice lives in Lisbon"),
            Case::BothChange | Case::NeitherChanges => (None, ""),
        };
        match replaced {
            Some(replaced) => {
                assert!(supersedes(&moved), "{case:?}");
                assert_eq!(moved.results[1].id, replaced.results[0].id, "{case:?}");
                let mut expected = vec!["Alice lives in Porto now", kept];
                expected.sort();
                assert_eq!(live(&memory, &user).await, expected, "{case:?}");
            }
            None => {
                assert_eq!(moved.results[0].event, HistoryEvent::Add);
    assert!(!supersedes(&moved));
                assert_eq!(
                    live(&memory, &user).await,
                    vec![
                        "Alice lives in Lisbon",
                        "Alice lives in Lisbon with two cats",
                        "Alice lives in Porto now"
                    ]
                );
            }
        }
    }
}

/// A fact that supersedes a memory of several clauses takes the place of the clause whose
/// answer it changes, and the other clauses stay in the memory, its history keeping the
/// old text. The model is asked what the memory answers only for a memory of several
/// clauses; when that answer points at no single clause, the fact replaces it all.
#[tokio::test]
async fn a_fact_that_supersedes_one_clause_of_a_memory_leaves_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // (memory, what its answer drops, the memory after the correction)
        (
            "Alice is 34, and she plays the ukulele",
            Some("34"),
            "Alice is 43, and she plays the ukulele",
        ),
        (
            "Alice is 34, and she plays the ukulele",
            Some("34 and the ukulele"),
            "Alice is 43",
        ),
        ("Alice is 34", None, "Alice is 43"),
        // A clause cut at a conjunction and a subject, without a comma.
        (
            "Alice is 34 and she plays the ukulele",
            Some("34"),
            "Alice is 43 and she plays the ukulele",
        ),
    ];
    for (i, (old, before, after)) in cases.into_iter().enumerate() {
        let mut script = vec![
            facts(&[old]),
            facts(&["Alice is 43"]),
            json!({"decisions": [{"fact": 0, "event": "UPDATE", "memory": 0, "text": "Alice is 43"}]})
                .to_string(),
        ];
        script.extend(before.map(|before| {
            json!({"question": "How old is she?", "before": before, "now": "43"}).to_string()
        }));
        let llm = ScriptedLlm::new(script);
        let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
        let user = format!("alice-{i}");
        let first = memory.add("About me").user(&user).await.unwrap();
        let fixed = memory.add("I'm actually 43").user(&user).await.unwrap();
        assert_eq!(llm.pending(), 0, "{old:?}: every question was asked");
        assert_eq!(
            llm.requests().len(),
            3 + usize::from(before.is_some()),
            "{old:?}"
        );
        if before.is_some() {
            let question = llm.requests()[3].messages.last().unwrap().content.clone();
            assert_eq!(question, format!("Memory: {old}\nNew fact: Alice is 43"));
        }
        assert_eq!(fixed.results.len(), 2, "{old:?}");
        assert!(supersedes(&fixed));
        assert_eq!(fixed.results[1].id, first.results[0].id);
        assert_eq!(fixed.results[0].memory, after);
        assert_eq!(live(&memory, &user).await, vec![after]);
        let history = memory.history(first.results[0].id).await.unwrap();
        assert_eq!(
            history.last().and_then(|h| h.old_memory.as_deref()),
            Some(old)
        );
        // Search reads the memory's new text.
        let hits = memory
            .search("How old is Alice?")
            .user(&user)
            .await
            .unwrap();
        assert_eq!(hits.results[0].record.memory, after);
    }
}

/// A fact the model adds beside a similar memory gets a closer look at that memory: when
/// the second look says it is replaced and the answer to the memory's question changes,
/// the memory takes the fact's text, with its history; when the answer keeps what it was,
/// or the second look says no, both stay.
#[tokio::test]
async fn a_closer_look_settles_a_fact_added_beside_an_outdated_memory() {
    let dir = tempfile::tempdir().unwrap();
    let add = json!({"decisions": [{"fact": 0, "event": "ADD"}]}).to_string();
    let (yes, no) = (r#"{"answer": "yes"}"#, r#"{"answer": "no"}"#);
    let answers = |now: &str| {
        json!({"question": "Where does she live?", "before": "Lisbon", "now": now}).to_string()
    };
    let (porto, both) = (answers("Porto"), answers("Lisbon, visiting Porto"));
    for (case, (looks, superseded)) in [
        (vec![yes, no, porto.as_str()], true),
        (vec![yes, no, both.as_str()], false),
        (vec![no], false),
    ]
    .into_iter()
    .enumerate()
    {
        let user = format!("alice-{case}");
        lisbon_then_porto(&dir, &user, &add, &looks, superseded).await;
    }
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
    llm.push_error(Error::Provider {
        detail: "upstream down".into(),
        transient: true,
    });
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

/// A "here" in a fact is stored with the place the user's greeting names, and the model
/// decides on the fact as the user said it: the stay replaces the earlier one (the model
/// here says so), and no question shows the place in parentheses.
#[tokio::test]
async fn a_here_is_stored_with_the_place_the_greeting_names() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::from_fn(|request| {
        let (last, schema) = question_and_schema(request);
        Ok(if last.ends_with("Replaced?") {
            r#"{"answer": "yes"}"#.to_string()
        } else if last.ends_with("Both true?") {
            r#"{"answer": "no"}"#.to_string()
        } else if schema.contains("decisions") {
            json!({"decisions": [{"fact": 0, "event": "UPDATE", "memory": 0,
                                  "text": "I'm here for the festival until Sunday"}]})
            .to_string()
        } else if last.contains("Edinburgh") {
            facts(&["I'm here for the festival until Sunday"])
        } else {
            facts(&["I'm here for the opera tonight"])
        })
    });
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let first = memory
        .add("I'm here for the opera tonight")
        .user("alice")
        .await
        .unwrap();
    let second = memory
        .add(vec![
            Message::user("Hello from Edinburgh! I'm here for the festival until Sunday."),
            Message::assistant("Enjoy the shows!"),
        ])
        .user("alice")
        .await
        .unwrap();
    assert_eq!(second.results.len(), 2);
    assert!(supersedes(&second));
    assert_eq!(second.results[1].id, first.results[0].id);
    assert_eq!(
        live(&memory, "alice").await,
        vec!["I'm here (Edinburgh) for the festival until Sunday"]
    );
    let requests = llm.requests();
    assert!(requests.len() >= 3, "extraction twice, then reconciliation");
    for request in &requests {
        for message in &request.messages {
            assert!(
                !message.content.contains("(Edinburgh)"),
                "{}",
                message.content
            );
        }
    }
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
    assert_eq!(err.status(), 503);
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
async fn extract_resolves_a_here_from_the_greeting() {
    let dir = tempfile::tempdir().unwrap();
    let digest = json!({
        "summary": "Alice is here on holiday",
        "entities": ["Alice"],
        "tags": ["travel"],
        "key_facts": ["Alice is here until Friday", "Alice loves temples"],
        "importance": 5
    })
    .to_string();
    let memory = open(&dir, Some(Arc::new(ScriptedLlm::new([digest])))).await;
    let out = memory
        .extract("Greetings from Kyoto! I'm here until Friday, loving the temples.")
        .await
        .unwrap();
    assert_eq!(out.core.summary, "Alice is here (Kyoto) on holiday");
    assert_eq!(
        out.core.key_facts,
        vec!["Alice is here (Kyoto) until Friday", "Alice loves temples"]
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

/// A fact that ends a partnership, a diet or a job is compared with the memories of that
/// topic, which share no word or meaning with it (here, no word: the test's hashing
/// embedder finds them unrelated): the model sees the partner's memory, not the hobby, and
/// the fact takes its place once the second look agrees. A fact of no topic is compared
/// with nothing.
#[tokio::test]
async fn a_fact_that_ends_a_relationship_is_compared_with_the_partners_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (yes, no) = (r#"{"answer": "yes"}"#, r#"{"answer": "no"}"#);
    let delete = json!({"decisions": [{"fact": 0, "event": "DELETE", "memory": 0}]}).to_string();
    let llm = ScriptedLlm::new([
        facts(&["That relationship ended in spring"]),
        delete,
        yes.to_string(),
        no.to_string(),
        facts(&["Rainy Sundays are for films"]),
    ]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    for text in ["My girlfriend Ana is a nurse", "I play the cello"] {
        memory.add(text).user("leo").infer(false).await.unwrap();
    }
    let ended = memory
        .add("Life update: that relationship ended in spring.")
        .user("leo")
        .await
        .unwrap();
    let asked = &llm.requests()[1];
    let shown = shown_memories(&asked.messages.last().unwrap().content);
    assert_eq!(
        shown,
        [json!({"memory": 0, "text": "My girlfriend Ana is a nurse"})]
    );
    assert_eq!(ended.results.len(), 2);
    assert!(supersedes(&ended));
    assert_eq!(
        live(&memory, "leo").await,
        ["I play the cello", "That relationship ended in spring"]
    );
    // Of no topic and like no memory: no reconciliation.
    memory
        .add("Any film for a rainy Sunday?")
        .user("leo")
        .await
        .unwrap();
    assert_eq!(llm.requests().len(), 5);
}

/// Eating meat again gives up a vegetarian diet: the fact takes the memory's place,
/// history kept, without asking the model (which keeps the two side by side); a fact
/// about someone else's meals asks the model whether to add it, and nothing more.
#[tokio::test]
async fn eating_meat_again_replaces_a_vegetarian_memory() {
    let dir = tempfile::tempdir().unwrap();
    let add = json!({"decisions": [{"fact": 0, "event": "ADD"}]}).to_string();
    let llm = ScriptedLlm::new([
        facts(&["I started eating chicken again"]),
        facts(&["My son eats chicken every day"]),
        add,
    ]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let vegetarian = memory
        .add("I'm vegetarian")
        .user("mia")
        .infer(false)
        .await
        .unwrap();
    let again = memory
        .add("Confession: I started eating chicken again.")
        .user("mia")
        .await
        .unwrap();
    // The extraction only: no reconciliation.
    assert_eq!(llm.requests().len(), 1);
    assert!(supersedes(&again));
    assert_eq!(again.results[1].id, vegetarian.results[0].id);
    assert_eq!(
        live(&memory, "mia").await,
        ["I started eating chicken again"]
    );

    memory.delete(again.results[0].id).await.unwrap();
    memory
        .add("I'm vegetarian")
        .user("mia")
        .infer(false)
        .await
        .unwrap();
    memory
        .add("My son eats chicken every day")
        .user("mia")
        .await
        .unwrap();
    // The reconciliation only: the son's news is no closer look at the speaker's diet.
    assert_eq!(llm.requests().len(), 3);
    assert_eq!(
        live(&memory, "mia").await,
        ["I'm vegetarian", "My son eats chicken every day"]
    );
}

/// A diet taken up that rules out a food the speaker eats takes the place of that food's
/// memory, unasked, found by its topic when the two share no word: gluten-free after
/// bread, lactose intolerant after milk; and so does a diet given up, pasta after a
/// low-carb diet. A diet of the speaker's memory itself stays.
#[tokio::test]
async fn a_diet_taken_up_replaces_the_memory_of_a_food_it_rules_out() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "ruth",
            "I love bread and eat it with every meal",
            "I'm gluten-free now",
        ),
        (
            "omar",
            "I drink a glass of milk every morning",
            "I'm lactose intolerant, so I've cut out dairy completely",
        ),
        // And the other way: a diet given up.
        ("lin", "I'm on a low-carb diet", "I'm eating pasta again"),
    ];
    for (user, food, diet) in cases {
        let llm = ScriptedLlm::new([facts(&[diet])]);
        let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
        let before = memory.add(food).user(user).infer(false).await.unwrap();
        let added = memory.add(diet).user(user).await.unwrap();
        // The extraction only: no reconciliation.
        assert_eq!(llm.requests().len(), 1, "{diet}");
        assert!(supersedes(&added), "{diet}");
        assert_eq!(added.results[1].id, before.results[0].id, "{diet}");
        assert_eq!(live(&memory, user).await, [diet]);
    }
    // Bread that is already gluten-free stays beside the diet: the model, asked, adds it,
    // and a closer look finds the memory not outdated.
    let add = json!({"decisions": [{"fact": 0, "event": "ADD"}]}).to_string();
    let no = r#"{"answer": "no"}"#.to_owned();
    let llm = ScriptedLlm::new([facts(&["I'm gluten-free now"]), add, no]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    memory
        .add("I eat gluten-free bread")
        .user("vera")
        .infer(false)
        .await
        .unwrap();
    let added = memory
        .add("I'm gluten-free now")
        .user("vera")
        .await
        .unwrap();
    assert_eq!(added.results[0].event, HistoryEvent::Add);
    assert!(!supersedes(&added));
    assert_eq!(llm.requests().len(), 3);
}

/// One way of eating takes another's place without the model ("These days I'm a
/// vegetarian" after "I do keto for my health"), and a diet given up ends each memory of
/// it: "I stopped intermittent fasting" ends the fasting and the breakfast skipped.
#[tokio::test]
async fn a_new_way_of_eating_or_a_diet_given_up_ends_each_memory_of_the_old() {
    let dir = tempfile::tempdir().unwrap();
    let said = "These days I'm a vegetarian";
    let llm = ScriptedLlm::new([facts(&[said])]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let before = memory
        .add("I do keto for my health")
        .user("kai")
        .infer(false)
        .await
        .unwrap();
    let added = memory.add(said).user("kai").await.unwrap();
    assert_eq!(llm.requests().len(), 1);
    assert!(supersedes(&added));
    assert_eq!(added.results[1].id, before.results[0].id);
    assert_eq!(live(&memory, "kai").await, [said]);

    let said = "I stopped intermittent fasting, now I eat breakfast again";
    let llm = ScriptedLlm::new([facts(&[said])]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    for old in ["I do intermittent fasting", "I skip breakfast every day"] {
        memory.add(old).user("noa").infer(false).await.unwrap();
    }
    memory.add(said).user("noa").await.unwrap();
    assert_eq!(llm.requests().len(), 1);
    assert_eq!(live(&memory, "noa").await, [said]);
}

/// News of someone else ends none of the speaker's memories by a rule: a sister's meat
/// leaves the speaker vegan. The model, asked, adds it.
#[tokio::test]
async fn someone_elses_change_ends_no_memory_of_the_speakers() {
    let dir = tempfile::tempdir().unwrap();
    let said = "My sister started eating meat again";
    let add = json!({"decisions": [{"fact": 0, "event": "ADD"}]}).to_string();
    let llm = ScriptedLlm::new([facts(&[said]), add]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    memory
        .add("I'm vegan and I run a small bakery")
        .user("ines")
        .infer(false)
        .await
        .unwrap();
    let added = memory.add(said).user("ines").await.unwrap();
    assert_eq!(added.results[0].event, HistoryEvent::Add);
    assert!(!supersedes(&added));
    assert_eq!(
        live(&memory, "ines").await,
        ["I'm vegan and I run a small bakery", said]
    );

    // Spanish "he" is "I have": the speaker's own change, ended by the rule unasked.
    let said = "He vuelto a comer carne";
    let llm = ScriptedLlm::new([facts(&[said])]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    memory
        .add("Soy vegetariano desde hace tres años")
        .user("pablo")
        .infer(false)
        .await
        .unwrap();
    let added = memory.add(said).user("pablo").await.unwrap();
    assert!(supersedes(&added));
    assert_eq!(live(&memory, "pablo").await, [said]);
    assert_eq!(llm.requests().len(), 1);
}

/// A move away from where a memory says its owner lives takes that memory's place without
/// asking the model, history kept; someone else's move, and a move back to the same place,
/// are left to the model.
#[tokio::test]
async fn a_move_elsewhere_replaces_the_memory_of_home() {
    let dir = tempfile::tempdir().unwrap();
    let add = json!({"decisions": [{"fact": 0, "event": "ADD"}]}).to_string();
    let llm = ScriptedLlm::new([
        facts(&["I moved from Madrid to Valencia"]),
        facts(&["My sister moved from Valencia to Bilbao"]),
        add,
    ]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let home = memory
        .add("I live in Madrid")
        .user("carlos")
        .infer(false)
        .await
        .unwrap();
    let moved = memory
        .add("Big news: I moved from Madrid to Valencia!")
        .user("carlos")
        .await
        .unwrap();
    // The extraction only: no reconciliation, no look.
    assert_eq!(llm.requests().len(), 1);
    assert_eq!(moved.results.len(), 2);
    assert!(supersedes(&moved));
    assert_eq!(moved.results[1].id, home.results[0].id);
    assert_eq!(
        live(&memory, "carlos").await,
        ["I moved from Madrid to Valencia"]
    );
    let history = memory.history(home.results[0].id).await.unwrap();
    assert_eq!(
        history.last().unwrap().old_memory.as_deref(),
        Some("I live in Madrid")
    );

    // Someone else's move ends no home of the owner's.
    memory
        .add("I live in Valencia")
        .user("carlos")
        .infer(false)
        .await
        .unwrap();
    memory
        .add("My sister just moved from Valencia to Bilbao")
        .user("carlos")
        .await
        .unwrap();
    // The reconciliation only: the sister's move is no closer look at the speaker's homes.
    assert_eq!(llm.requests().len(), 3);
    assert_eq!(
        live(&memory, "carlos").await,
        [
            "I live in Valencia",
            "I moved from Madrid to Valencia",
            "My sister moved from Valencia to Bilbao"
        ]
    );
}

/// A move that shares no word with the home it ends (here, none: the test's hashing
/// embedder finds them unrelated) is still compared with it, as a fact of the same topic,
/// and takes its place without asking the model.
#[tokio::test]
async fn a_move_unlike_the_home_it_ends_is_found_by_its_topic() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([facts(&["Nous nous sommes installés à Grenoble cet été"])]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let home = memory
        .add("J'habite à Rennes")
        .user("maud")
        .infer(false)
        .await
        .unwrap();
    memory
        .add("Je fais du vélo")
        .user("maud")
        .infer(false)
        .await
        .unwrap();
    let moved = memory
        .add("Nous nous sommes installés à Grenoble cet été !")
        .user("maud")
        .await
        .unwrap();
    assert_eq!(llm.requests().len(), 1);
    assert_eq!(moved.results.len(), 2);
    assert!(supersedes(&moved));
    assert_eq!(moved.results[1].id, home.results[0].id);
    assert_eq!(
        live(&memory, "maud").await,
        [
            "Je fais du vélo",
            "Nous nous sommes installés à Grenoble cet été"
        ]
    );
}

/// A stay never takes the place of a home, whatever the model said: the fact is added
/// beside it, and no look asks about the two.
#[tokio::test]
async fn a_stay_away_leaves_the_home_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let update = json!({"decisions": [
        {"fact": 0, "event": "UPDATE", "memory": 0, "text": "I'm at a conference in Lisbon until Sunday"}
    ]})
    .to_string();
    let llm = ScriptedLlm::new([
        facts(&["I'm at a conference in Lisbon until Sunday"]),
        update,
    ]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    memory
        .add("I live in Lisbon")
        .user("aoife")
        .infer(false)
        .await
        .unwrap();
    let stay = memory
        .add("I'm at a conference in Lisbon until Sunday.")
        .user("aoife")
        .await
        .unwrap();
    // The extraction and the reconciliation; no look.
    assert_eq!(llm.requests().len(), 2);
    assert_eq!(stay.results.len(), 1);
    assert_eq!(stay.results[0].event, HistoryEvent::Add);
    assert!(!supersedes(&stay));
    assert_eq!(
        live(&memory, "aoife").await,
        [
            "I live in Lisbon",
            "I'm at a conference in Lisbon until Sunday"
        ]
    );
}

/// A friend made never takes the place of a partner, nor a new pet the pet before, nor a
/// neighbour's news the speaker's own memory, nor a habit at set times a memory with no
/// time, nor what still holds its memory, whatever the model said: "vriend" is a friend or
/// a boyfriend, and made ("leren kennen") it is a friend; a household keeps a dog and a
/// cat; a pharmacist may work in a pub in the evenings.
#[tokio::test]
async fn a_friend_made_a_new_pet_and_someone_elses_news_stay_beside_what_the_model_replaced() {
    let cases = [
        (
            "Mijn vriendin heet Julia",
            "Op de tennisclub heb ik een nieuwe vriend leren kennen, Thijs",
        ),
        (
            "I have a cat called Pixel",
            "We adopted a second cat called Miso",
        ),
        (
            "J'ai un chat qui s'appelle Moka",
            "Ma voisine a un chat qui s'appelle Filou",
        ),
        (
            "Lavoro in una farmacia a Bari",
            "La sera lavoro in un pub a Bari",
        ),
        ("I cycle to work", "I still cycle to work, rain or shine"),
    ];
    for (before, said) in cases {
        let dir = tempfile::tempdir().unwrap();
        let update = json!({"decisions": [
            {"fact": 0, "event": "UPDATE", "memory": 0, "text": said}
        ]})
        .to_string();
        let llm = ScriptedLlm::new([facts(&[said]), update]);
        let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
        memory.add(before).user("joost").infer(false).await.unwrap();
        let added = memory.add(said).user("joost").await.unwrap();
        // The extraction and the reconciliation; no look.
        assert_eq!(llm.requests().len(), 2, "{said}");
        assert_eq!(added.results.len(), 1, "{said}");
        assert_eq!(added.results[0].event, HistoryEvent::Add, "{said}");
    assert!(!supersedes(&added), "{said}");
        let mut both = [before, said];
        both.sort_unstable();
        assert_eq!(live(&memory, "joost").await, both);
    }
}

/// Going vegetarian ends a memory of eating meat, and a partner a memory of being single,
/// without asking the model, history kept.
#[tokio::test]
async fn a_diet_taken_up_and_a_partner_replace_their_memories() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([
        facts(&["I went vegetarian in March"]),
        facts(&["Ich habe jetzt eine Freundin, sie heißt Lena"]),
    ]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let meat = memory
        .add("I eat meat most days")
        .user("noor")
        .infer(false)
        .await
        .unwrap();
    let single = memory
        .add("Ich bin Single")
        .user("noor")
        .infer(false)
        .await
        .unwrap();
    let diet = memory
        .add("News: I went vegetarian in March.")
        .user("noor")
        .await
        .unwrap();
    assert!(supersedes(&diet));
    assert_eq!(diet.results[1].id, meat.results[0].id);
    let partner = memory
        .add("Ich habe jetzt eine Freundin, sie heißt Lena!")
        .user("noor")
        .await
        .unwrap();
    assert!(supersedes(&partner));
    assert_eq!(partner.results[1].id, single.results[0].id);
    // The two extractions only.
    assert_eq!(llm.requests().len(), 2);
    assert_eq!(
        live(&memory, "noor").await,
        [
            "I went vegetarian in March",
            "Ich habe jetzt eine Freundin, sie heißt Lena"
        ]
    );
}

/// A break-up and a new partner (with a partner word or without: "verkering") end the
/// memory of the partner before, and a wedding the memory of an engagement, without
/// asking the model, history kept.
#[tokio::test]
async fn a_break_up_a_new_partner_and_a_wedding_replace_the_partner_before() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([
        facts(&["Ik heb nu een nieuwe vriend, Joris"]),
        facts(&["We got married in April"]),
        facts(&["Paul and I divorced last year"]),
        facts(&["Ik heb nu verkering met Lotte"]),
    ]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let mut ids = Vec::new();
    for (user, said) in [
        ("sanne", "Mijn vriend heet Bas"),
        ("rosa", "I'm engaged to Marco"),
        ("dana", "I'm married to Paul"),
        ("joost", "Mijn vriendin heet Sanne"),
    ] {
        let added = memory.add(said).user(user).infer(false).await.unwrap();
        ids.push(added.results[0].id);
    }
    for (i, (user, said)) in [
        ("sanne", "Ik heb nu een nieuwe vriend, Joris."),
        ("rosa", "We got married in April!"),
        ("dana", "Paul and I divorced last year."),
        ("joost", "Ik heb nu verkering met Lotte."),
    ]
    .into_iter()
    .enumerate()
    {
        let added = memory.add(said).user(user).await.unwrap();
        assert_eq!(added.results.len(), 2, "{said}");
        assert!(supersedes(&added), "{said}");
        assert_eq!(added.results[1].id, ids[i], "{said}");
        let history = memory.history(ids[i]).await.unwrap();
        assert_eq!(history.len(), 2, "{said}");
    }
    // The four extractions only.
    assert_eq!(llm.requests().len(), 4);
    assert_eq!(
        live(&memory, "sanne").await,
        ["Ik heb nu een nieuwe vriend, Joris"]
    );
    assert_eq!(live(&memory, "rosa").await, ["We got married in April"]);
    assert_eq!(
        live(&memory, "dana").await,
        ["Paul and I divorced last year (2025)"]
    );
}

/// A fact a rule finds superseding one clause of a memory takes that clause's place, and
/// the rest of the memory stays, without asking the model which part changed.
#[tokio::test]
async fn a_rule_replaces_only_the_clause_it_finds_superseded() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([facts(&["I started eating meat again"])]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let vegan = memory
        .add("I'm vegan and I run half marathons")
        .user("noor")
        .infer(false)
        .await
        .unwrap();
    let added = memory
        .add("I started eating meat again")
        .user("noor")
        .await
        .unwrap();
    assert_eq!(added.results.len(), 2);
    assert!(supersedes(&added));
    assert_eq!(added.results[1].id, vegan.results[0].id);
    assert_eq!(
        live(&memory, "noor").await,
        ["I started eating meat again and I run half marathons"]
    );
    // The extraction only.
    assert_eq!(llm.requests().len(), 1);

    // A clause whose subject is no pronoun: a partner named, beside a job.
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([facts(&["Ik ben verloofd met Noor"])]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    memory
        .add("Mijn vriendin heet Eva en ik werk bij een bank")
        .user("daan")
        .infer(false)
        .await
        .unwrap();
    let added = memory
        .add("Groot nieuws: ik ben verloofd met Noor!")
        .user("daan")
        .await
        .unwrap();
    assert!(supersedes(&added));
    assert_eq!(
        live(&memory, "daan").await,
        ["Ik ben verloofd met Noor en ik werk bij een bank"]
    );
    assert_eq!(llm.requests().len(), 1);
}

/// A break-up ends every memory of the relationship found for it: it takes the place of
/// one, and the others are superseded by it too, their history kept.
#[tokio::test]
async fn a_break_up_ends_every_memory_of_the_relationship() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([facts(&["Lena und ich haben uns getrennt"])]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let mut ids = Vec::new();
    for said in [
        "Meine Freundin heißt Lena",
        "Wir sind seit zwei Jahren zusammen",
        "Ich spiele Cello",
    ] {
        let added = memory.add(said).user("jonas").infer(false).await.unwrap();
        ids.push(added.results[0].id);
    }
    let added = memory
        .add("Lena und ich haben uns getrennt")
        .user("jonas")
        .await
        .unwrap();
    // The fact is a new memory, and supersedes both.
    let events: Vec<_> = added.results.iter().map(|r| r.event).collect();
    assert_eq!(
        events,
        [HistoryEvent::Add, HistoryEvent::Supersede, HistoryEvent::Supersede]
    );
    let mut changed: Vec<_> = added.results[1..].iter().map(|r| r.id).collect();
    changed.sort();
    assert_eq!(changed, ids[..2]);
    assert!(added.results[1..]
        .iter()
        .all(|r| r.superseded_by == Some(added.results[0].id)));
    assert_eq!(
        live(&memory, "jonas").await,
        ["Ich spiele Cello", "Lena und ich haben uns getrennt"]
    );
    for id in &ids[..2] {
        let history = memory.history(*id).await.unwrap();
        assert_eq!(history.last().unwrap().event, HistoryEvent::Supersede);
    }
    assert_eq!(llm.requests().len(), 1);
}

/// A fact that takes back what a memory says replaces it without asking the model, and
/// so does a statement the model did not extract.
#[tokio::test]
async fn a_fact_taking_back_a_memory_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([
        facts(&["I'm not lactose intolerant after all"]),
        r#"{"facts": []}"#.to_string(),
    ]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let mut ids = Vec::new();
    for said in [
        "I'm lactose intolerant",
        "Voy al gimnasio tres veces por semana",
    ] {
        let added = memory.add(said).user("noor").infer(false).await.unwrap();
        ids.push(added.results[0].id);
    }
    for (said, id) in [
        (
            "The test came back: I'm not lactose intolerant after all",
            ids[0],
        ),
        ("Ya no voy al gimnasio.", ids[1]),
    ] {
        let added = memory.add(said).user("noor").await.unwrap();
        assert_eq!(added.results.len(), 2, "{said}");
        assert!(supersedes(&added));
        assert_eq!(added.results[1].id, id);
    }
    assert_eq!(
        live(&memory, "noor").await,
        [
            "I'm not lactose intolerant after all",
            "Ya no voy al gimnasio"
        ]
    );
    assert_eq!(llm.requests().len(), 2);
}

/// A change the model did not extract, said as a denial, still ends the memory a rule
/// finds it superseding: the user's statement is kept as said, in that memory's place.
/// A statement that supersedes nothing stays unstored, as the model decided.
#[tokio::test]
async fn a_change_the_model_did_not_extract_still_ends_the_memory_it_supersedes() {
    let dir = tempfile::tempdir().unwrap();
    let none = r#"{"facts": []}"#;
    let llm = ScriptedLlm::new([none, none, none]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let mut ids = Vec::new();
    for (user, said) in [
        ("lucia", "Mi novio se llama Javier"),
        ("lucia", "Toco la guitarra"),
        ("marta", "Toco la guitarra"),
    ] {
        let added = memory.add(said).user(user).infer(false).await.unwrap();
        ids.push(added.results[0].id);
    }
    let ended = memory
        .add("¡Hola! Ya no estoy con Javier. ¿Qué tal el fin de semana?")
        .user("lucia")
        .await
        .unwrap();
    assert_eq!(ended.results.len(), 2);
    assert!(supersedes(&ended));
    assert_eq!(ended.results[1].id, ids[0]);
    assert_eq!(memory.history(ids[0]).await.unwrap().len(), 2);
    assert_eq!(
        live(&memory, "lucia").await,
        ["Toco la guitarra", "Ya no estoy con Javier"]
    );
    // No partner's memory to end, or no change said: nothing stored.
    for (user, said) in [
        ("marta", "Ya no estoy con Javier."),
        ("lucia", "Ya no voy al gimnasio."),
    ] {
        let added = memory.add(said).user(user).await.unwrap();
        assert!(added.results.is_empty(), "{said}");
    }
    assert_eq!(live(&memory, "marta").await, ["Toco la guitarra"]);
    assert_eq!(live(&memory, "lucia").await.len(), 2);
    // The three extractions only.
    assert_eq!(llm.requests().len(), 3);
}

/// What the speaker does, said without "I", is stored as said when the model extracts
/// nothing from it; small talk and a question stay unstored.
#[tokio::test]
async fn an_activity_said_without_i_is_stored_when_the_model_extracts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let none = r#"{"facts": []}"#;
    let llm = ScriptedLlm::new([none, none]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let added = memory
        .add("¡Hola! Toco la batería. ¿Y tú?")
        .user("lia")
        .await
        .unwrap();
    assert_eq!(added.results.len(), 1);
    assert_eq!(added.results[0].event, HistoryEvent::Add);
    assert!(!supersedes(&added));
    let added = memory.add("¿Juego mañana?").user("lia").await.unwrap();
    assert!(added.results.is_empty());
    assert_eq!(live(&memory, "lia").await, ["Toco la batería"]);
    assert_eq!(llm.requests().len(), 2);
}

/// A change said in a clause the model left out, when it extracted another, ends the
/// memory a rule finds it superseding, kept as said; the fact extracted is added beside.
#[tokio::test]
async fn a_change_left_out_beside_a_fact_extracted_still_ends_its_memory() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([facts(&["I listen to Coltrane every evening"])]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let jazz = memory
        .add("I can't stand jazz")
        .user("ines")
        .infer(false)
        .await
        .unwrap();
    let added = memory
        .add("Funny thing: I've come to love jazz, I listen to Coltrane every evening.")
        .user("ines")
        .await
        .unwrap();
    assert!(added
        .results
        .iter()
        .any(|r| r.event == HistoryEvent::Supersede && r.id == jazz.results[0].id));
    assert_eq!(
        live(&memory, "ines").await,
        [
            "I listen to Coltrane every evening",
            "I've come to love jazz"
        ]
    );
    assert_eq!(llm.requests().len(), 1);
}

/// A taste turned around replaces the memory of the taste before, without asking the
/// model, in English as in Italian.
#[tokio::test]
async fn a_taste_turned_around_replaces_the_taste_before() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([
        facts(&["I've come to love jazz"]),
        facts(&["Adesso adoro il pesce"]),
    ]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let jazz = memory
        .add("I can't stand jazz")
        .user("ines")
        .infer(false)
        .await
        .unwrap();
    let fish = memory
        .add("Non mi piace il pesce")
        .user("ines")
        .infer(false)
        .await
        .unwrap();
    for (said, before) in [
        ("Funny thing: I've come to love jazz.", &jazz),
        ("Adesso adoro il pesce!", &fish),
    ] {
        let added = memory.add(said).user("ines").await.unwrap();
        assert_eq!(added.results.len(), 2, "{said}");
        assert!(supersedes(&added), "{said}");
        assert_eq!(added.results[1].id, before.results[0].id, "{said}");
    }
    // The two extractions only.
    assert_eq!(llm.requests().len(), 2);
    assert_eq!(
        live(&memory, "ines").await,
        ["Adesso adoro il pesce", "I've come to love jazz"]
    );
}

/// Drinking given up ends the memory of a drink, though the two share no word (the
/// test's hashing embedder finds them unrelated), without asking the model; the memory
/// of another drink stays.
#[tokio::test]
async fn drinking_given_up_replaces_the_drink_before() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([facts(&["I quit drinking completely in January"])]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let wine = memory
        .add("I love a glass of red wine with dinner")
        .user("ruth")
        .infer(false)
        .await
        .unwrap();
    memory
        .add("Black coffee every morning")
        .user("ruth")
        .infer(false)
        .await
        .unwrap();
    let quit = memory
        .add("Update: I quit drinking completely in January.")
        .user("ruth")
        .await
        .unwrap();
    // The extraction only.
    assert_eq!(llm.requests().len(), 1);
    assert_eq!(quit.results.len(), 2);
    assert!(supersedes(&quit));
    assert_eq!(quit.results[1].id, wine.results[0].id);
    assert_eq!(
        live(&memory, "ruth").await,
        [
            "Black coffee every morning",
            "I quit drinking completely in January"
        ]
    );
}

/// A retirement takes the place of a memory of the speaker's job without asking the
/// model, found by its topic however unlike the two are; a hobby stays.
#[tokio::test]
async fn a_retirement_replaces_the_job_before() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([facts(&["Ich bin in Rente seit Juli"])]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let job = memory
        .add("Ich arbeite als Busfahrer in Kassel")
        .user("kurt")
        .infer(false)
        .await
        .unwrap();
    memory
        .add("Ich habe einen Schrebergarten")
        .user("kurt")
        .infer(false)
        .await
        .unwrap();
    let retired = memory
        .add("Ich bin in Rente seit Juli!")
        .user("kurt")
        .await
        .unwrap();
    // The extraction only.
    assert_eq!(llm.requests().len(), 1);
    assert_eq!(retired.results.len(), 2);
    assert!(supersedes(&retired));
    assert_eq!(retired.results[1].id, job.results[0].id);
    assert_eq!(
        live(&memory, "kurt").await,
        [
            "Ich bin in Rente seit Juli",
            "Ich habe einen Schrebergarten"
        ]
    );
    assert_eq!(memory.history(job.results[0].id).await.unwrap().len(), 2);
}

/// A change of job takes the place of a memory of a post held somewhere, found by its
/// label when it has no word of work and none in common with the change.
#[tokio::test]
async fn a_change_of_job_replaces_a_post_found_by_its_label() {
    let dir = tempfile::tempdir().unwrap();
    let said = "I handed in my notice and started as a junior web developer";
    let llm = ScriptedLlm::new([facts(&[said])]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let post = memory
        .add("I'm a barista at a café in Camden")
        .user("jo")
        .categories(["professional_details"])
        .infer(false)
        .await
        .unwrap();
    let changed = memory.add(said).user("jo").await.unwrap();
    // The extraction only.
    assert_eq!(llm.requests().len(), 1);
    assert!(supersedes(&changed));
    assert_eq!(changed.results[1].id, post.results[0].id);
    assert_eq!(live(&memory, "jo").await, [said]);

    // A fact of work that supersedes nothing is added; the model never sees a memory
    // found by its label alone.
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([facts(&["Got promoted to shift lead at work"])]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    memory
        .add("I'm a barista at a café in Camden")
        .user("jo")
        .categories(["professional_details"])
        .infer(false)
        .await
        .unwrap();
    let added = memory
        .add("Got promoted to shift lead at work!")
        .user("jo")
        .await
        .unwrap();
    assert_eq!(llm.requests().len(), 1);
    assert_eq!(added.results[0].event, HistoryEvent::Add);
    assert!(!supersedes(&added));
}

/// Leaving a line of work takes the place of the job in it, unasked, found by its label
/// when the two share no word: "Dejé la enseñanza" after a teacher's post.
#[tokio::test]
async fn leaving_a_line_of_work_replaces_the_job_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let said = "Dejé la enseñanza";
    let llm = ScriptedLlm::new([facts(&[said])]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    let post = memory
        .add("Soy profesora de matemáticas en un instituto de Zaragoza")
        .user("elena")
        .categories(["professional_details"])
        .infer(false)
        .await
        .unwrap();
    memory
        .add("Me encanta hacer senderismo")
        .user("elena")
        .infer(false)
        .await
        .unwrap();
    let left = memory.add(said).user("elena").await.unwrap();
    // The extraction only.
    assert_eq!(llm.requests().len(), 1);
    assert!(supersedes(&left));
    assert_eq!(left.results[1].id, post.results[0].id);
    assert_eq!(
        live(&memory, "elena").await,
        [said, "Me encanta hacer senderismo"]
    );
}

/// Another taste is added beside the taste a memory holds, whatever the model decided: no
/// look asks about the two.
#[tokio::test]
async fn another_taste_is_kept_beside_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let update = json!({"decisions": [
        {"fact": 0, "event": "UPDATE", "memory": 0, "text": "I hate fish"}
    ]})
    .to_string();
    let llm = ScriptedLlm::new([facts(&["I hate fish"]), update]);
    let memory = open(&dir, Some(Arc::new(llm.clone()))).await;
    memory
        .add("I love chicken")
        .user("lea")
        .infer(false)
        .await
        .unwrap();
    let added = memory.add("But I hate fish.").user("lea").await.unwrap();
    // The extraction and the reconciliation; no look.
    assert_eq!(llm.requests().len(), 2);
    assert_eq!(added.results.len(), 1);
    assert_eq!(added.results[0].event, HistoryEvent::Add);
    assert!(!supersedes(&added));
    assert_eq!(
        live(&memory, "lea").await,
        ["I hate fish", "I love chicken"]
    );
}
