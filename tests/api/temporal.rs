//! Memory that keeps time: a fact that supersedes a memory is a new memory, and the old one
//! stays with its text and history, no longer current (`valid_until`, `superseded_by`).
//! Reads are current by default; `as_of` answers what held at a time, `include_superseded`
//! returns both; `restore` undoes a supersession. Through the public API on a real SQLite
//! file and HNSW index (and on PostgreSQL), with a scripted language model.

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use memlane::ops::events::EventKind;
use memlane::record::HistoryEvent;
use memlane::{Error, Llm, Memory, Message, ScriptedLlm};
use serde_json::json;
use uuid::Uuid;

fn day(y: i32, m: u32, d: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, m, d, 12, 0, 0).unwrap()
}

fn facts(items: &[&str]) -> String {
    let facts: Vec<_> = items
        .iter()
        .map(|t| json!({"text": t, "categories": ["home"], "entities": [], "importance": 6}))
        .collect();
    json!({ "facts": facts }).to_string()
}

/// A model that extracts "Alice lives in Lisbon", then a fact that takes its place.
fn lisbon_then_alfama() -> ScriptedLlm {
    ScriptedLlm::new([
        facts(&["Alice lives in Lisbon"]),
        facts(&["Alice lives in Lisbon, in the Alfama district"]),
        json!({"decisions": [{"fact": 0, "event": "UPDATE", "memory": 0,
                              "text": "Alice lives in the Alfama district of Lisbon"}]})
        .to_string(),
    ])
}

async fn texts(page: memlane::Result<memlane::record::Page<memlane::MemoryRecord>>) -> Vec<String> {
    crate::common::sorted_texts(page.unwrap())
}

const OLD: &str = "Alice lives in Lisbon";
const NEW: &str = "Alice lives in Lisbon, in the Alfama district";

/// Said in January, superseded in June: the ids of the old and the new memory.
async fn supersede(memory: &Memory) -> (Uuid, Uuid) {
    let old = memory
        .add("I live in Lisbon")
        .user("alice")
        .timestamp(day(2024, 1, 10))
        .await
        .unwrap()
        .results[0]
        .id;
    let input = vec![Message::user("I'm in Alfama, actually")];
    let out = memory
        .add(input.clone())
        .user("alice")
        .timestamp(day(2024, 6, 1))
        .await
        .unwrap();
    let events: Vec<(HistoryEvent, &str)> = out
        .results
        .iter()
        .map(|r| (r.event, r.memory.as_str()))
        .collect();
    assert_eq!(
        events,
        [(HistoryEvent::Add, NEW), (HistoryEvent::Supersede, OLD)]
    );
    let new = out.results[0].id;
    assert_ne!(new, old, "the new fact is a memory of its own");
    assert_eq!(out.results[1].id, old);
    assert_eq!(out.results[1].superseded_by, Some(new));

    // The old memory keeps its text; its validity ends when the news was said.
    let record = memory.get(old).await.unwrap();
    assert_eq!(record.memory, OLD);
    assert_eq!(record.valid_from, day(2024, 1, 10));
    assert_eq!(record.valid_until, Some(day(2024, 6, 1)));
    assert_eq!(record.superseded_by, Some(new));
    let record = memory.get(new).await.unwrap();
    assert_eq!(record.valid_from, day(2024, 6, 1));
    assert!(record.is_current());

    // Its history records the supersession, with the input that caused it.
    let history = memory.history(old).await.unwrap();
    let kinds: Vec<HistoryEvent> = history.iter().map(|h| h.event).collect();
    assert_eq!(kinds, [HistoryEvent::Add, HistoryEvent::Supersede]);
    assert_eq!(history[1].superseded_by, Some(new));
    assert_eq!(history[1].input, input);
    assert_eq!(history[1].created_at, day(2024, 6, 1));
    (old, new)
}

/// Every read of validity, then `restore`, on `memory` (a scripted [`lisbon_then_alfama`]).
async fn reads_know_time(memory: &Memory) {
    let (old, new) = supersede(memory).await;

    // Current by default: list, search.
    assert_eq!(texts(memory.list().user("alice").await).await, [NEW]);
    let hits = memory.search("Lisbon").user("alice").await.unwrap().results;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].record.id, new);
    // Unfiltered search (the index's own view of every current memory) too: the old
    // memory, the nearest to its own text, takes no place of the current one.
    let hits = memory.search(OLD).top_k(1).await.unwrap().results;
    let ids: Vec<Uuid> = hits.iter().map(|h| h.record.id).collect();
    assert_eq!(ids, [new]);

    // As of a time: what held then.
    let march = day(2024, 3, 1);
    assert_eq!(
        texts(memory.list().user("alice").as_of(march).await).await,
        [OLD]
    );
    let hits = memory
        .search("Where does Alice live?")
        .as_of(march)
        .await
        .unwrap();
    let ids: Vec<Uuid> = hits.results.iter().map(|h| h.record.id).collect();
    assert_eq!(ids, [old]);
    // Before anything was said: nothing; the day of the change: the new fact.
    let before = memory.list().user("alice").as_of(day(2023, 1, 1)).await;
    assert!(texts(before).await.is_empty());
    let on_the_day = memory.list().user("alice").as_of(day(2024, 6, 1)).await;
    assert_eq!(texts(on_the_day).await, [NEW]);

    // Both, each with its validity; and filters on validity.
    let both = memory.list().user("alice").include_superseded(true).await;
    assert_eq!(texts(both).await, [OLD, NEW]);
    let ended = memory
        .list()
        .include_superseded(true)
        .filters(json!({"valid_until": {"lte": "2024-06-01"}}))
        .await;
    assert_eq!(texts(ended).await, [OLD]);
    let said_early = memory
        .list()
        .include_superseded(true)
        .filters(json!({"valid_from": {"lt": "2024-02-01"}}))
        .await;
    assert_eq!(texts(said_early).await, [OLD]);
    let hits = memory
        .search("Lisbon")
        .include_superseded(true)
        .await
        .unwrap()
        .results;
    assert_eq!(hits.len(), 2);

    // The event stream carries the supersession as a change of its own kind.
    let events = memory.events_after(0, 100).await.unwrap().results;
    let superseded: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventKind::MemorySupersede)
        .collect();
    assert_eq!(superseded.len(), 1);
    assert_eq!(superseded[0].memory_id, Some(old));
    assert_eq!(
        superseded[0]
            .value
            .as_ref()
            .map(|v| v["superseded_by"].clone()),
        Some(json!(new))
    );

    // One call undoes a wrong supersession; the new memory stays.
    let restored = memory.restore(old).await.unwrap();
    assert!(restored.is_current());
    assert_eq!(restored.superseded_by, None);
    assert_eq!(texts(memory.list().user("alice").await).await, [OLD, NEW]);
    let hits = memory.search("Lisbon").user("alice").await.unwrap().results;
    assert_eq!(hits.len(), 2);
    let history = memory.history(old).await.unwrap();
    assert_eq!(history.last().map(|h| h.event), Some(HistoryEvent::Restore));
    let events = memory.events_after(0, 100).await.unwrap().results;
    assert_eq!(
        events.last().map(|e| e.kind),
        Some(EventKind::MemoryRestore)
    );
    // A current memory has nothing to restore; an unknown one is a 404.
    for id in [old, new] {
        match memory.restore(id).await {
            Err(e @ Error::Conflict { .. }) => assert_eq!(e.status(), 409),
            other => panic!("restore of a current memory: {other:?}"),
        }
    }
    let unknown = Uuid::now_v7();
    assert!(matches!(
        memory.restore(unknown).await,
        Err(Error::NotFound { .. })
    ));
}

#[tokio::test]
async fn a_superseded_memory_is_kept_and_reads_know_time() {
    let dir = tempfile::tempdir().unwrap();
    let llm: Arc<dyn Llm> = Arc::new(lisbon_then_alfama());
    let path = dir.path().join("m.db");
    let memory = crate::common::open_with_llm(&path, 256, Some(llm)).await;
    reads_know_time(&memory).await;
    // Reopened, the index knows which memories are current.
    drop(memory);
    let memory = crate::common::open(&path, 256).await;
    let hits = memory.search("Lisbon").await.unwrap().results;
    assert_eq!(hits.len(), 2, "both current after the restore");
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn a_superseded_memory_is_kept_and_reads_know_time_on_postgres() {
    let url = crate::common::pg_database().await;
    let memory = Memory::builder()
        .postgres(&url)
        .embedder(Arc::new(memlane::HashEmbedder::new(256)))
        .llm(Arc::new(lisbon_then_alfama()))
        .build()
        .await
        .unwrap();
    reads_know_time(&memory).await;
}

#[tokio::test]
async fn another_handle_sees_a_supersession_and_a_restore() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let llm: Arc<dyn Llm> = Arc::new(lisbon_then_alfama());
    let writer = crate::common::open_with_llm(&path, 256, Some(llm)).await;
    let reader = crate::common::open(&path, 256).await;
    // The reader's index holds the first memory before it is superseded.
    writer
        .add("I live in Lisbon")
        .user("alice")
        .timestamp(day(2024, 1, 10))
        .await
        .unwrap();
    assert_eq!(reader.search("Lisbon").await.unwrap().results.len(), 1);
    let out = writer
        .add("I'm in Alfama, actually")
        .user("alice")
        .timestamp(day(2024, 6, 1))
        .await
        .unwrap();
    let (new, old) = (out.results[0].id, out.results[1].id);
    let ids: Vec<Uuid> = reader
        .search("I live in Lisbon")
        .top_k(1)
        .await
        .unwrap()
        .results
        .iter()
        .map(|h| h.record.id)
        .collect();
    assert_eq!(ids, [new]);
    writer.restore(old).await.unwrap();
    assert_eq!(reader.search("Lisbon").await.unwrap().results.len(), 2);
}

#[tokio::test]
async fn export_and_import_keep_validity() {
    let dir = tempfile::tempdir().unwrap();
    let llm: Arc<dyn Llm> = Arc::new(lisbon_then_alfama());
    let memory = crate::common::open_with_llm(&dir.path().join("a.db"), 256, Some(llm)).await;
    let (old, _) = supersede(&memory).await;
    let export = memory.export().await.unwrap();
    assert_eq!(export.memories.len(), 2, "superseded memories are exported");
    let json = serde_json::to_string(&export).unwrap();
    let copy = crate::common::open(&dir.path().join("b.db"), 256).await;
    copy.import(&serde_json::from_str(&json).unwrap())
        .await
        .unwrap();
    assert_eq!(copy.get(old).await.unwrap(), memory.get(old).await.unwrap());
    assert_eq!(
        copy.history(old).await.unwrap(),
        memory.history(old).await.unwrap()
    );
    assert_eq!(texts(copy.list().user("alice").await).await, [NEW]);
    let again = copy.export().await.unwrap();
    assert_eq!(again.memories, export.memories);

    // An export written before memories had a validity reads as current since created.
    let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
    for m in value["memories"].as_array_mut().unwrap() {
        let m = m.as_object_mut().unwrap();
        m.remove("valid_from");
        m.remove("valid_until");
        m.remove("superseded_by");
    }
    let older: memlane::ops::export::Export = serde_json::from_value(value).unwrap();
    for m in &older.memories {
        assert_eq!(m.record.valid_from, m.record.created_at);
        assert!(m.record.is_current());
    }
}

/// A model that extracts `fact` and has it take the place of the memory shown to it whose
/// text holds `replaces`; it answers yes to any closer look.
fn replacing(fact: &'static str, replaces: &'static str) -> ScriptedLlm {
    ScriptedLlm::from_fn(move |request| {
        let prompt = request.messages.last().map_or("", |m| m.content.as_str());
        let schema = request
            .schema
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default();
        Ok(if schema.contains("\"facts\"") {
            facts(&[fact])
        } else if schema.contains("\"decisions\"") {
            let shown = crate::common::shown_memories(prompt);
            let decisions: Vec<_> = shown
                .iter()
                .filter(|m| m["text"].as_str().is_some_and(|t| t.contains(replaces)))
                .map(|m| json!({"fact": 0, "event": "UPDATE", "memory": m["memory"], "text": fact}))
                .collect();
            json!({ "decisions": decisions }).to_string()
        } else {
            json!({"answer": "yes"}).to_string()
        })
    })
}

/// A file written before memories had a validity (schema version 10, by the memlane of
/// that time: `tests/fixtures/schema10.db`) opens with every live memory current since it
/// was said, its history as it was, and supersedes and answers `as_of` like a new one.
#[tokio::test]
async fn a_file_from_before_validity_migrates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schema10.db");
    std::fs::copy(fixture, &path).unwrap();
    let llm: Arc<dyn Llm> = Arc::new(replacing("Carlos lives in Valencia", "Madrid"));
    let memory = Memory::builder()
        .path(&path)
        .embedder(Arc::new(memlane::HashEmbedder::new(64)))
        .llm(llm)
        .build()
        .await
        .unwrap();
    let listed = memory.list().user("carlos").await.unwrap().results;
    let mut said: Vec<&str> = listed.iter().map(|r| r.memory.as_str()).collect();
    said.sort();
    assert_eq!(
        said,
        [
            "I live in Madrid",
            "I love paella",
            "I work as a nurse at La Paz hospital"
        ]
    );
    for r in &listed {
        assert_eq!(r.valid_from, r.created_at, "{}", r.memory);
        assert!(r.is_current());
    }
    let nurse = listed.iter().find(|r| r.memory.contains("nurse")).unwrap();
    let kinds: Vec<HistoryEvent> = memory
        .history(nurse.id)
        .await
        .unwrap()
        .iter()
        .map(|h| h.event)
        .collect();
    assert_eq!(kinds, [HistoryEvent::Add, HistoryEvent::Update]);
    let january = memory.list().user("carlos").as_of(day(2024, 1, 15)).await;
    assert_eq!(
        texts(january).await,
        ["I live in Madrid", "I work as a nurse at La Paz hospital"]
    );
    assert_eq!(
        memory.list().agent("helper").await.unwrap().results.len(),
        1
    );

    // The move supersedes Madrid; Madrid is still the answer as of before it.
    let moved = memory
        .add("Big news: I moved to Valencia!")
        .user("carlos")
        .timestamp(day(2024, 9, 1))
        .await
        .unwrap();
    let events: Vec<HistoryEvent> = moved.results.iter().map(|r| r.event).collect();
    assert_eq!(events, [HistoryEvent::Add, HistoryEvent::Supersede]);
    let now = texts(memory.list().user("carlos").await).await;
    assert!(
        now.contains(&"Carlos lives in Valencia".to_owned()),
        "{now:?}"
    );
    assert!(!now.contains(&"I live in Madrid".to_owned()), "{now:?}");
    let before = texts(memory.list().user("carlos").as_of(day(2024, 8, 1)).await).await;
    assert!(
        before.contains(&"I live in Madrid".to_owned()),
        "{before:?}"
    );
    assert!(!before.contains(&"Carlos lives in Valencia".to_owned()));
}

/// The README's example of memory that keeps time, as written.
#[tokio::test]
async fn the_readmes_temporal_example_runs_as_written() -> memlane::Result<()> {
    crate::common::check_readme_has(&crate::common::quoted(include_str!("temporal.rs"), 0));
    let dir = tempfile::tempdir().unwrap();
    let llm: Arc<dyn Llm> = Arc::new(replacing("Carlos lives in Valencia", "Madrid"));
    let memory = crate::common::open_with_llm(&dir.path().join("m.db"), 64, Some(llm)).await;
    let madrid_id = memory
        .add("I live in Madrid")
        .user("carlos")
        .timestamp(day(2024, 1, 10))
        .infer(false)
        .await?
        .results[0]
        .id;
    memory
        .add("Big news: I moved to Valencia!")
        .user("carlos")
        .timestamp(day(2024, 6, 1))
        .await?;
    let march_2024 = day(2024, 3, 1);
    // README
    let now = memory
        .search("Where does Carlos live?")
        .user("carlos")
        .await?; // current only
    let then = memory
        .search("Where does Carlos live?")
        .user("carlos")
        .as_of(march_2024) // what held then
        .await?;
    let both = memory
        .list()
        .user("carlos")
        .include_superseded(true)
        .await?;
    memory.restore(madrid_id).await?; // a wrong supersession, undone
                                      // END README
    let texts = |hits: &[memlane::ops::search::ScoredMemory]| -> Vec<String> {
        hits.iter().map(|h| h.record.memory.clone()).collect()
    };
    assert_eq!(texts(&now.results), ["Carlos lives in Valencia"]);
    assert_eq!(texts(&then.results), ["I live in Madrid"]);
    assert_eq!(both.results.len(), 2);
    assert_eq!(memory.list().user("carlos").await?.results.len(), 2);
    Ok(())
}

/// A model that extracts one to three facts from a small pool per add and decides at
/// random for each fact it is shown (ADD, UPDATE, DELETE or NONE, naming any memory shown,
/// or none): every decision a model could make, in any order.
fn random_model(seed: u64) -> ScriptedLlm {
    let rng = std::sync::Mutex::new(crate::common::Rng(seed));
    ScriptedLlm::from_fn(move |request| {
        let mut rng = rng.lock().unwrap();
        let prompt = request.messages.last().map_or("", |m| m.content.as_str());
        let schema = request
            .schema
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default();
        if schema.contains("\"facts\"") {
            const POOL: [&str; 6] = [
                "Sam lives in Leeds",
                "Sam lives in York",
                "Sam works as a nurse",
                "Sam works as a chef",
                "Sam has a dog called Rex",
                "Sam plays the cello",
            ];
            let n = 1 + rng.below(3);
            let picked: Vec<&str> = (0..n).map(|_| POOL[rng.below(POOL.len())]).collect();
            return Ok(facts(&picked));
        }
        let shown = crate::common::shown_memories(prompt).len();
        let new = prompt.split("New facts:\n").nth(1).map_or(0, |list| {
            serde_json::from_str::<Vec<serde_json::Value>>(list).map_or(0, |v| v.len())
        });
        let decisions: Vec<_> = (0..new)
            .map(|fact| {
                // As the schema allows: UPDATE, DELETE and NONE name a memory, ADD may.
                let event = ["ADD", "UPDATE", "DELETE", "NONE"][rng.below(4)];
                let names = event != "ADD" || rng.below(2) > 0;
                let memory = (names && shown > 0).then(|| rng.below(shown));
                let still = memory.map(|_| !matches!(event, "UPDATE" | "DELETE"));
                json!({"fact": fact, "memory": memory, "memory_still_true": still, "event": event})
            })
            .collect();
        Ok(json!({ "decisions": decisions }).to_string())
    })
}

/// No sequence of inferred adds loses a fact: whatever the model decides, every memory
/// ever stored is still there with its text, it is either current or superseded by a
/// memory that is there too, its history has no DELETE, and `as_of` the time just before
/// each add returns exactly the memories current then.
#[tokio::test]
async fn no_sequence_of_inferred_adds_loses_a_fact() {
    let mut checked = 0;
    for seed in 1..=12u64 {
        let dir = tempfile::tempdir().unwrap();
        let llm: Arc<dyn Llm> = Arc::new(random_model(seed * 7919));
        let memory = crate::common::open_with_llm(&dir.path().join("m.db"), 64, Some(llm)).await;
        let mut stored: Vec<(Uuid, String)> = Vec::new();
        let mut snapshots: Vec<(DateTime<Utc>, Vec<Uuid>)> = Vec::new();
        for turn in 0..6u32 {
            let at = day(2024, 1 + turn, 1);
            let mut current: Vec<Uuid> = memory
                .list()
                .user("sam")
                .await
                .unwrap()
                .results
                .iter()
                .map(|r| r.id)
                .collect();
            current.sort();
            snapshots.push((at - chrono::Duration::seconds(1), current));
            let out = memory
                .add(format!("turn {turn}"))
                .user("sam")
                .timestamp(at)
                .await
                .unwrap();
            for r in out.results.iter().filter(|r| r.event == HistoryEvent::Add) {
                stored.push((r.id, r.memory.clone()));
            }
        }
        for (id, text) in &stored {
            let record = memory.get(*id).await.unwrap();
            assert_eq!(&record.memory, text, "seed {seed}");
            if let Some(by) = record.superseded_by {
                assert!(memory.get(by).await.is_ok(), "seed {seed}: {by}");
                assert!(record.valid_until.is_some());
            }
            let history = memory.history(*id).await.unwrap();
            assert!(history.iter().all(|h| h.event != HistoryEvent::Delete));
            checked += 1;
        }
        for (at, current) in &snapshots {
            let mut then: Vec<Uuid> = memory
                .list()
                .user("sam")
                .as_of(*at)
                .await
                .unwrap()
                .results
                .iter()
                .map(|r| r.id)
                .collect();
            then.sort();
            assert_eq!(&then, current, "seed {seed}, as of {at}");
        }
    }
    assert!(checked > 50, "{checked} memories checked");
}
