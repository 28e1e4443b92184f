//! The memory lifecycle through the public API, on a real SQLite file and the real HNSW
//! index (with the hashing test embedder, so no model is needed here; `tests/minilm.rs`
//! repeats the essentials with the real model).

use std::path::Path;
use std::sync::Arc;

use chrono::{Duration, Utc};
use memlane::progress::Task;
use memlane::record::HistoryEvent;
use memlane::store::{NewMemory, SqliteStore, Write, WriteBatch};
use memlane::IndexParams;
use memlane::{EmbedMode, Filter, HashEmbedder, Memory, MemoryRecord, Message, Owners, SearchMode};
use serde_json::json;
use uuid::Uuid;

use crate::common::add;

const DIM: usize = 384;

async fn open(path: &Path) -> Memory {
    open_with(path, IndexParams::default()).await
}

async fn open_with(path: &Path, params: IndexParams) -> Memory {
    crate::common::open_with_params(path, DIM, params).await
}

fn db(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("memories.db")
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

async fn everything(memory: &Memory) -> Vec<MemoryRecord> {
    let page = memory.list().page_size(1000).include_expired(true).await;
    page.map(|p| p.results)
        .unwrap_or_else(|e| panic!("list: {e}"))
}

fn status<T: std::fmt::Debug>(r: memlane::Result<T>) -> u16 {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => {
            assert!(!e.detail().is_empty());
            e.status()
        }
    }
}

#[tokio::test]
async fn add_stores_each_message_verbatim_with_core_and_credits() {
    let dir = tmp();
    let memory = open(&db(&dir)).await;
    let before = memory.credits().await.unwrap_or(0);
    let out = memory
        .add(vec![
            Message::user("I love hiking in the Alps"),
            Message::assistant("Noted: you love hiking"),
        ])
        .user("alice")
        .agent("coach")
        .run("session-1")
        .metadata(json!({"source": "chat", "n": 3}))
        .categories(["hobbies", "travel", "hobbies"])
        .immutable(true)
        .infer(false)
        .await
        .unwrap();
    assert_eq!(out.results.len(), 2);
    assert_eq!(out.results[0].memory, "I love hiking in the Alps");
    assert_eq!(out.results[0].event, HistoryEvent::Add);
    assert_eq!(
        out.results[0].metadata["core"]["summary"],
        "I love hiking in the Alps"
    );
    assert_eq!(
        out.results[0].metadata["core"]["tags"],
        json!(["hobbies", "travel"])
    );
    assert_eq!(out.results[0].metadata["source"], "chat");
    assert_eq!(out.credits_used, 2);
    assert_eq!(out.credits_remaining, before - 2);

    let stored = memory.get(out.results[1].id).await.unwrap();
    assert_eq!(stored.memory, "Noted: you love hiking");
    assert_eq!(stored.owners.user_id.as_deref(), Some("alice"));
    assert_eq!(stored.owners.agent_id.as_deref(), Some("coach"));
    assert_eq!(stored.owners.run_id.as_deref(), Some("session-1"));
    assert_eq!(stored.owners.app_id, None);
    assert_eq!(stored.categories, vec!["hobbies", "travel"]);
    assert!(stored.immutable);
    assert_eq!(
        stored.core().map(|c| c.importance),
        Some(memlane::record::DEFAULT_IMPORTANCE)
    );
    assert_eq!(stored.hash.len(), 64);
    let history = memory.history(stored.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(
        history[0].input,
        vec![Message::assistant("Noted: you love hiking")]
    );
}

#[tokio::test]
async fn bad_add_input_is_a_typed_error_and_changes_nothing() {
    let dir = tmp();
    let memory = open(&db(&dir)).await;
    let credits = memory.credits().await.unwrap_or(0);
    let huge = "x".repeat(memlane::limits::MAX_TEXT_BYTES + 1);
    let many: Vec<Message> = (0..=memlane::limits::MAX_MESSAGES)
        .map(|i| Message::user(format!("m{i}")))
        .collect();
    let past = Utc::now() - Duration::minutes(1);
    let cases: Vec<(memlane::Result<memlane::ops::add::AddResult>, u16)> = vec![
        (memory.add("no owner").infer(false).await, 400),
        (
            memory
                .add(Vec::<Message>::new())
                .user("u")
                .infer(false)
                .await,
            400,
        ),
        (memory.add("   ").user("u").infer(false).await, 400),
        (memory.add(huge.as_str()).user("u").infer(false).await, 413),
        (memory.add(many).user("u").infer(false).await, 413),
        (
            memory
                .add("m")
                .user("u")
                .metadata(json!([1, 2]))
                .infer(false)
                .await,
            400,
        ),
        (
            memory
                .add("m")
                .user("u")
                .metadata(json!({"core": 1}))
                .infer(false)
                .await,
            400,
        ),
        (
            memory.add("m").user("u").expiry(past).infer(false).await,
            400,
        ),
        (memory.add("m").user("").infer(false).await, 400),
        (memory.add("m").user("bad\u{0}id").infer(false).await, 400),
        (
            memory
                .add("m")
                .user("u")
                .categories([""])
                .infer(false)
                .await,
            400,
        ),
        (memory.add("needs a model").user("u").infer(true).await, 503),
    ];
    for (i, (result, want)) in cases.into_iter().enumerate() {
        assert_eq!(status(result), want, "case {i}");
    }
    assert!(everything(&memory).await.is_empty());
    assert_eq!(memory.credits().await.ok(), Some(credits));
}

#[tokio::test]
async fn search_ranks_filters_and_validates() {
    let dir = tmp();
    let memory = open(&db(&dir)).await;
    let pizza = memory
        .add("pizza with olives is my favourite dinner")
        .user("alice")
        .metadata(json!({"topic": "food", "stars": 5}))
        .categories(["food"])
        .infer(false)
        .await
        .map(|r| r.results[0].id)
        .unwrap();
    memory
        .add("tax forms are due in april")
        .user("alice")
        .metadata(json!({"topic": "admin", "stars": 1}))
        .categories(["admin"])
        .infer(false)
        .await
        .unwrap();
    add(
        &memory,
        "bob",
        "pizza with olives is my favourite dinner too",
    )
    .await;

    // Vector mode: these checks are about cosine scores.
    let hits = memory
        .search("favourite pizza dinner")
        .user("alice")
        .mode(SearchMode::Vector)
        .await
        .unwrap();
    assert_eq!(hits.results.len(), 2);
    assert_eq!(hits.results[0].record.id, pizza);
    assert!(hits.results.windows(2).all(|w| w[0].score >= w[1].score));
    assert!(hits.results.iter().all(|h| (0.0..=1.0).contains(&h.score)));
    assert!(hits
        .results
        .iter()
        .all(|h| h.record.owners.user_id.as_deref() == Some("alice")));

    let top1 = memory.search("pizza").top_k(1).await.unwrap();
    assert_eq!(top1.results.len(), 1);
    let strict = memory
        .search("favourite pizza dinner")
        .user("alice")
        .mode(SearchMode::Vector)
        .threshold(0.5)
        .await
        .unwrap();
    assert!(strict.results.iter().all(|h| h.score >= 0.5));
    assert_eq!(strict.results.len(), 1);

    let by_meta = memory
        .search("anything")
        .metadata(json!({"topic": "admin"}))
        .await
        .unwrap();
    assert_eq!(by_meta.results.len(), 1);
    let by_cat = memory
        .search("anything")
        .categories(["food"])
        .await
        .unwrap();
    assert_eq!(by_cat.results.len(), 1);
    let by_json = memory
        .search("anything")
        .filters(json!({"AND": [{"metadata.stars": {"gte": 2}}, {"NOT": {"user_id": "bob"}}]}))
        .await
        .unwrap();
    assert_eq!(
        by_json
            .results
            .iter()
            .map(|h| h.record.id)
            .collect::<Vec<_>>(),
        vec![pizza]
    );
    let by_typed = memory
        .search("pizza")
        .filter(Filter::user("bob"))
        .await
        .unwrap();
    assert_eq!(by_typed.results.len(), 1);
    let none = memory.search("pizza").user("nobody").await.unwrap();
    assert!(none.results.is_empty());

    assert_eq!(
        status(
            memory
                .search("pizza")
                .filters(json!({"colour": "red"}))
                .await
        ),
        400
    );
    assert_eq!(
        status(
            memory
                .search("pizza")
                .filters(json!({"user_id": {"like": "a%"}}))
                .await
        ),
        400
    );
    assert_eq!(status(memory.search("pizza").top_k(0).await), 400);
    assert_eq!(status(memory.search("pizza").top_k(1001).await), 400);
    assert_eq!(status(memory.search("pizza").threshold(1.5).await), 400);
    assert_eq!(
        status(memory.search("pizza").threshold(f32::NAN).await),
        400
    );
    assert_eq!(status(memory.search("").await), 400);
    assert_eq!(
        status(memory.search("pizza").metadata(json!("food")).await),
        400
    );

    // Search by a vector of one's own: the same ranking, typed errors for bad vectors.
    let v = memory
        .embed("favourite pizza dinner", EmbedMode::Query)
        .await
        .unwrap()
        .embedding;
    let by_vector = memory
        .search_vector(v)
        .user("alice")
        .mode(SearchMode::Vector)
        .await
        .unwrap();
    assert_eq!(by_vector.results.len(), hits.results.len());
    for (a, b) in by_vector.results.iter().zip(&hits.results) {
        assert_eq!(a.record, b.record);
        assert!(
            (a.score - b.score).abs() < 1e-5,
            "re-normalising a unit vector moves only the last bits"
        );
    }
    for (bad, why) in [
        (vec![1.0; 3], "wrong length"),
        (vec![f32::NAN; DIM], "NaN"),
        (vec![0.0; DIM], "zero vector"),
    ] {
        let result = memory.search_vector(bad).mode(SearchMode::Vector).await;
        assert_eq!(status(result), 422, "{why}");
    }
    assert_eq!(
        status(
            memory
                .search_vector(vec![1.0; DIM])
                .mode(SearchMode::Hybrid)
                .await
        ),
        400,
        "hybrid needs text"
    );
}

#[tokio::test]
async fn update_delete_history_and_bulk_delete() {
    let dir = tmp();
    let memory = open(&db(&dir)).await;
    let id = add(&memory, "alice", "I live in Lisbon").await;
    let other = add(&memory, "alice", "I have a cat named Miso").await;
    let bobs = add(&memory, "bob", "I live in Porto").await;

    let updated = memory
        .update(id)
        .text("I live in Berlin now")
        .metadata(json!({"verified": true}))
        .await
        .unwrap();
    assert_eq!(updated.memory.memory, "I live in Berlin now");
    assert_eq!(updated.memory.metadata["verified"], true);
    assert_eq!(
        updated.memory.metadata["core"]["summary"],
        "I live in Berlin now"
    );
    assert_eq!(updated.credits_used, 1);
    assert!(updated.memory.updated_at >= updated.memory.created_at);

    // Re-embedded: the new text is found, the old one is not returned any more.
    let hits = memory
        .search("Berlin")
        .user("alice")
        .top_k(1)
        .await
        .unwrap();
    assert_eq!(hits.results[0].record.id, id);
    assert_eq!(hits.results[0].record.memory, "I live in Berlin now");

    assert_eq!(status(memory.update(id).await), 400, "nothing to update");
    assert_eq!(status(memory.update(id).text(" ").await), 400);
    assert_eq!(status(memory.update("not-a-uuid").text("x").await), 400);
    assert_eq!(status(memory.update(Uuid::new_v4()).text("x").await), 404);

    memory.delete(other).await.unwrap();
    assert_eq!(status(memory.get(other).await), 404);
    assert_eq!(status(memory.delete(other).await), 404);
    assert_eq!(status(memory.update(other).text("x").await), 404);
    let hits = memory.search("cat named Miso").user("alice").await.unwrap();
    assert!(hits.results.iter().all(|h| h.record.id != other));

    let history = memory.history(id).await.unwrap();
    let events: Vec<_> = history
        .iter()
        .map(|h| (h.event, h.old_memory.as_deref(), h.new_memory.as_deref()))
        .collect();
    assert_eq!(
        events,
        vec![
            (HistoryEvent::Add, None, Some("I live in Lisbon")),
            (
                HistoryEvent::Update,
                Some("I live in Lisbon"),
                Some("I live in Berlin now")
            ),
        ]
    );
    let history = memory.history(other).await.unwrap();
    assert_eq!(history.last().map(|h| h.event), Some(HistoryEvent::Delete));
    assert_eq!(status(memory.history(Uuid::new_v4()).await), 404);
    assert_eq!(status(memory.history("nope").await), 400);

    assert_eq!(
        status(memory.delete_all().await),
        400,
        "an empty owner filter is refused"
    );
    let out = memory.delete_all().user("alice").await.unwrap();
    assert_eq!(out.deleted, vec![id]);
    let left: Vec<Uuid> = everything(&memory).await.iter().map(|r| r.id).collect();
    assert_eq!(left, vec![bobs]);
    let out = memory.delete_all().user("alice").await.unwrap();
    assert!(out.deleted.is_empty());
}

#[tokio::test]
async fn immutable_memories_refuse_updates() {
    let dir = tmp();
    let memory = open(&db(&dir)).await;
    let id = memory
        .add("my blood type is O negative")
        .user("alice")
        .immutable(true)
        .infer(false)
        .await
        .map(|r| r.results[0].id)
        .unwrap();
    let credits = memory.credits().await.unwrap_or(0);
    assert_eq!(status(memory.update(id).text("A positive").await), 409);
    assert_eq!(
        memory.get(id).await.map(|r| r.memory).ok().as_deref(),
        Some("my blood type is O negative")
    );
    assert_eq!(memory.credits().await.ok(), Some(credits));
    assert_eq!(memory.history(id).await.map(|h| h.len()).ok(), Some(1));
    // Deleting is still allowed: immutability protects content, not erasure rights.
    assert!(memory.delete(id).await.is_ok());
}

#[tokio::test]
async fn expired_memories_are_hidden_unless_asked_for() {
    let dir = tmp();
    let path = db(&dir);
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let memory = Memory::builder()
        .store(store.clone())
        .embedder(Arc::new(HashEmbedder::new(DIM)))
        .build()
        .await
        .unwrap();
    let soon = memory
        .add("the parking code is 4711")
        .user("alice")
        .expiry(Utc::now() + Duration::days(1))
        .infer(false)
        .await
        .map(|r| r.results[0].id)
        .unwrap();
    // A memory that already expired, written straight into the store (the API refuses
    // expiries in the past).
    let vector = memory
        .embed("the door code is 1234", EmbedMode::Document)
        .await
        .map(|e| e.embedding)
        .unwrap();
    let now = Utc::now();
    let expired = MemoryRecord {
        id: Uuid::new_v4(),
        memory: "the door code is 1234".into(),
        owners: Owners {
            user_id: Some("alice".into()),
            ..Owners::default()
        },
        metadata: serde_json::Map::new(),
        categories: vec![],
        immutable: false,
        expiration_date: Some(now - Duration::hours(1)),
        created_at: now - Duration::days(2),
        updated_at: now - Duration::days(2),
        hash: String::new(),
        context: None,
        valid_from: now - Duration::days(2),
        valid_until: None,
        superseded_by: None,
    };
    let insert = Write::Insert(NewMemory::new(expired.clone(), vector, vec![]));
    memlane::store::apply(&*store, WriteBatch::new(vec![insert], 0))
        .await
        .unwrap();
    drop(memory);
    let memory = Memory::builder()
        .store(store)
        .embedder(Arc::new(HashEmbedder::new(DIM)))
        .build()
        .await
        .unwrap();

    let hits = memory.search("door code").user("alice").await.unwrap();
    assert_eq!(
        hits.results.iter().map(|h| h.record.id).collect::<Vec<_>>(),
        vec![soon]
    );
    let hits = memory
        .search("door code")
        .user("alice")
        .include_expired(true)
        .await
        .unwrap();
    assert_eq!(hits.results[0].record.id, expired.id);
    let page = memory.list().user("alice").await.unwrap();
    assert_eq!(page.pagination.count, 1);
    let page = memory
        .list()
        .user("alice")
        .include_expired(true)
        .await
        .unwrap();
    assert_eq!(page.pagination.count, 2);
    assert_eq!(
        memory.get(expired.id).await.ok().map(|r| r.id),
        Some(expired.id),
        "get still returns it"
    );
    let filtered = memory
        .list()
        .filters(json!({"expiration_date": "*"}))
        .include_expired(true)
        .await
        .map(|p| p.pagination.count)
        .ok();
    assert_eq!(filtered, Some(2));
}

#[tokio::test]
async fn list_pages_with_filters_and_cursor() {
    let dir = tmp();
    let memory = open(&db(&dir)).await;
    let mut ids = Vec::new();
    for i in 0..12 {
        let id = memory
            .add(format!("note number {i}"))
            .user("alice")
            .metadata(json!({"i": i}))
            .infer(false)
            .await
            .map(|r| r.results[0].id)
            .unwrap();
        ids.push(id);
    }
    add(&memory, "bob", "bob's note").await;
    let mut got = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut req = memory.list().user("alice").page_size(5);
        if let Some(c) = cursor.take() {
            req = req.cursor(c);
        }
        let page = req.await.unwrap();
        assert_eq!(page.pagination.count, 12);
        assert_eq!(page.pagination.page_size, 5);
        got.extend(page.results.iter().map(|r| r.id));
        match page.pagination.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    ids.reverse();
    assert_eq!(got, ids);
    let even = memory
        .list()
        .filters(json!({"metadata.i": {"in": [0, 2, 4]}}))
        .await
        .map(|p| p.pagination.count)
        .ok();
    assert_eq!(even, Some(3));
    assert_eq!(status(memory.list().page_size(0).await), 400);
    assert_eq!(status(memory.list().page_size(1001).await), 400);
    assert_eq!(status(memory.list().cursor("garbage").await), 400);
}

/// The last handle's drop hands the save to the runtime's blocking pool. A runtime that
/// shuts down before the pool starts it drops it (tokio runs queued blocking tasks only if
/// they are mandatory), which costs the next open a re-insertion and nothing else; while
/// the runtime runs, the save happens without anyone waiting for it.
#[tokio::test]
async fn dropping_the_last_handle_saves_the_index_in_the_background() {
    let dir = tmp();
    let path = db(&dir);
    let memory = open(&path).await;
    for i in 0..20 {
        add(&memory, "alice", &format!("fact {i}")).await;
    }
    memory.wait_for_index().await.unwrap();
    drop(memory);
    let current = format!("{}.index/CURRENT", path.display());
    let mut waited = 0;
    while !Path::new(&current).exists() && waited < 400 {
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        waited += 1;
    }
    assert!(
        Path::new(&current).exists(),
        "no saved index 10 s after the last handle was dropped"
    );
}

#[tokio::test]
async fn closing_saves_the_index_and_other_handles_go_on() {
    let dir = tmp();
    let path = db(&dir);
    let memory = open(&path).await;
    let other = memory.clone();
    add(&memory, "alice", "the first fact").await;
    memory.close().await.unwrap();
    assert!(Path::new(&format!("{}.index/CURRENT", path.display())).exists());
    // The clone still works, and closing with nothing new to save is quick and fine.
    add(&other, "alice", "the second fact").await;
    assert_eq!(everything(&other).await.len(), 2);
    other.clone().close().await.unwrap();
    other.close().await.unwrap();
    // An in-memory store has no index files to save.
    Memory::builder()
        .embedder(std::sync::Arc::new(memlane::HashEmbedder::new(DIM)))
        .build()
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
}

#[tokio::test]
async fn reopening_returns_exactly_what_was_written() {
    let dir = tmp();
    let path = db(&dir);
    let (before, hits_before) = {
        let memory = open(&path).await;
        for i in 0..40 {
            memory
                .add(format!("fact {i} about topic {}", i % 7))
                .user(format!("user{}", i % 3))
                .metadata(json!({"i": i, "f": 0.1 * i as f64, "s": "ünï\"code"}))
                .categories([format!("c{}", i % 4)])
                .infer(false)
                .await
                .unwrap();
        }
        let first = everything(&memory).await[0].id;
        memory.update(first).text("changed fact").await.unwrap();
        let hits = memory.search("topic 3").top_k(5).await.unwrap();
        let all = everything(&memory).await;
        memory.close().await.unwrap();
        (all, hits)
    };
    assert!(
        Path::new(&format!("{}.index/CURRENT", path.display())).exists(),
        "index saved on close"
    );
    let memory = open(&path).await;
    assert_eq!(everything(&memory).await, before);
    assert_eq!(
        memory.search("topic 3").top_k(5).await.unwrap(),
        hits_before
    );
    assert_eq!(
        memory.index_dead_points(),
        1,
        "the superseded vector is still masked after reload"
    );
}

/// Forces the graph path (tiny exact-search cut-over) so HNSW answers, not brute force.
fn graph_params() -> IndexParams {
    IndexParams::default().exact_search_max(8)
}

#[tokio::test]
async fn graph_search_never_returns_deleted_or_superseded_memories() {
    let dir = tmp();
    let memory = open_with(&db(&dir), graph_params()).await;
    let mut ids = Vec::new();
    for i in 0..200 {
        ids.push(
            add(
                &memory,
                if i % 2 == 0 { "even" } else { "odd" },
                &format!("memory about subject {i} and thing {}", i % 13),
            )
            .await,
        );
    }
    for id in ids.iter().step_by(3) {
        memory.delete(*id).await.unwrap();
    }
    for id in ids.iter().skip(1).step_by(7) {
        memory
            .update(*id)
            .text("rewritten completely different words")
            .await
            .ok();
    }
    let deleted: std::collections::HashSet<Uuid> = ids.iter().step_by(3).copied().collect();
    for q in ["subject 3", "thing 12", "memory about", "rewritten words"] {
        for user in [None, Some("even")] {
            let mut req = memory.search(q).top_k(50);
            if let Some(u) = user {
                req = req.user(u);
            }
            let hits = req.await.unwrap();
            assert!(!hits.results.is_empty());
            for h in &hits.results {
                assert!(
                    !deleted.contains(&h.record.id),
                    "deleted memory returned for {q:?}"
                );
                let current = memory.get(h.record.id).await.unwrap();
                assert_eq!(current.memory, h.record.memory, "stale text returned");
                if let Some(u) = user {
                    assert_eq!(h.record.owners.user_id.as_deref(), Some(u));
                }
            }
        }
    }
}

#[tokio::test]
async fn index_catches_up_with_rows_written_after_its_last_save() {
    let dir = tmp();
    let path = db(&dir);
    {
        let memory = open_with(&path, graph_params()).await;
        for i in 0..30 {
            add(&memory, "alice", &format!("early fact {i}")).await;
        }
    } // index saved here
    let late_id = {
        // Another writer (a crash before the next save looks the same) adds and deletes
        // rows the saved index has never seen.
        let memory = Memory::builder()
            .store(Arc::new(SqliteStore::open(&path).unwrap()))
            .embedder(Arc::new(HashEmbedder::new(DIM)))
            .index_params(graph_params())
            .build()
            .await
            .unwrap();
        let id = add(&memory, "alice", "late breaking zebra news").await;
        let gone = add(&memory, "alice", "late zebra rumour since retracted").await;
        memory.delete(gone).await.unwrap();
        id
    };
    let memory = open_with(&path, graph_params()).await;
    let hits = memory.search("zebra").top_k(3).await.unwrap();
    assert_eq!(hits.results[0].record.id, late_id);
    assert!(hits
        .results
        .iter()
        .all(|h| h.record.memory != "late zebra rumour since retracted"));
}

#[tokio::test]
async fn a_corrupt_or_missing_index_is_rebuilt_from_the_store() {
    let dir = tmp();
    let path = db(&dir);
    let expected = {
        let memory = open_with(&path, graph_params()).await;
        for i in 0..50 {
            add(&memory, "alice", &format!("fact {i} on subject {}", i % 5)).await;
        }
        let hits = memory.search("subject 2").top_k(5).await.unwrap();
        memory.close().await.unwrap();
        hits
    };
    let index_dir = std::path::PathBuf::from(format!("{}.index", path.display()));
    let ids = |hits: &memlane::ops::search::SearchResult| -> Vec<uuid::Uuid> {
        hits.results.iter().map(|h| h.record.id).collect()
    };
    // Each file of a generation in turn: the graph, its data, and the state file.
    for suffix in [".hnsw.graph", ".hnsw.data", "state.bin"] {
        let current = std::fs::read_to_string(index_dir.join("CURRENT")).unwrap();
        let generation = index_dir.join(current.trim());
        let file = std::fs::read_dir(&generation)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(suffix))
            .unwrap_or_else(|| panic!("no {suffix} file in {}", generation.display()));
        // Flip bytes in the middle.
        let mut bytes = std::fs::read(&file).unwrap();
        let mid = bytes.len() / 2;
        for b in &mut bytes[mid..mid + 64] {
            *b ^= 0xFF;
        }
        std::fs::write(&file, bytes).unwrap();
        let memory = open_with(&path, graph_params()).await;
        let hits = memory.search("subject 2").top_k(5).await.unwrap();
        assert_eq!(
            ids(&hits),
            ids(&expected),
            "{suffix} damaged, while loading"
        );
        memory.wait_for_index().await.unwrap();
        let hits = memory.search("subject 2").top_k(5).await.unwrap();
        assert_eq!(ids(&hits), ids(&expected), "{suffix} damaged, graph in");
        // A sound generation for the next round.
        memory.save_index().await.unwrap();
    }
    std::fs::remove_dir_all(&index_dir).unwrap();
    // With no index to load, opening rebuilds it from the store, and says how far it is.
    let reports = crate::common::Reports::default();
    let memory = Memory::builder()
        .path(&path)
        .embedder(Arc::new(HashEmbedder::new(DIM)))
        .index_params(graph_params())
        .on_progress(reports.callback())
        .build()
        .await
        .unwrap();
    assert_eq!(reports.of(Task::RebuildIndex), [(0, 50), (50, 50)]);
    let hits = memory.search("subject 2").top_k(5).await.unwrap();
    assert_eq!(hits.results.len(), 5);
    assert_eq!(hits.results[0].record.id, expected.results[0].record.id);
}

#[tokio::test]
async fn rebuild_drops_dead_points() {
    let dir = tmp();
    let memory = open_with(&db(&dir), graph_params()).await;
    let mut ids = Vec::new();
    for i in 0..40 {
        ids.push(add(&memory, "alice", &format!("fact {i}")).await);
    }
    for id in &ids[..20] {
        memory.delete(*id).await.unwrap();
    }
    assert_eq!(memory.index_dead_points(), 20);
    let reports = crate::common::Reports::default();
    memory
        .rebuild_index()
        .on_progress(reports.callback())
        .await
        .unwrap();
    assert_eq!(memory.index_dead_points(), 0);
    // Keys of deleted memories count too: the pass goes up to the highest key.
    assert_eq!(reports.of(Task::RebuildIndex), [(0, 40), (40, 40)]);
    let hits = memory.search("fact 30").top_k(3).await.unwrap();
    assert_eq!(hits.results[0].record.id, ids[30]);
}

#[tokio::test]
async fn retrieve_and_embed() {
    let dir = tmp();
    let memory = open(&db(&dir)).await;
    let id = add(&memory, "alice", "alice plays the cello").await;
    add(&memory, "bob", "bob plays the cello").await;
    let out = memory.retrieve("cello", "alice", 5).await.unwrap();
    assert_eq!(
        out.results.iter().map(|h| h.record.id).collect::<Vec<_>>(),
        vec![id]
    );
    assert_eq!(status(memory.retrieve("cello", "", 5).await), 400);
    assert_eq!(status(memory.retrieve("cello", "alice", 0).await), 400);

    let e = memory
        .embed("hello", EmbedMode::parse("query").unwrap())
        .await
        .unwrap();
    assert_eq!(e.dimension, DIM);
    assert_eq!(e.embedding.len(), DIM);
    let norm: f32 = e.embedding.iter().map(|x| x * x).sum();
    assert!((norm - 1.0).abs() < 1e-4);
    assert_eq!(status(EmbedMode::parse("sideways")), 400);
    assert_eq!(status(memory.embed("", EmbedMode::Query).await), 400);
}

#[tokio::test]
async fn a_store_refuses_a_different_embedder() {
    let dir = tmp();
    let path = db(&dir);
    drop(open(&path).await);
    let other_dim = Memory::builder()
        .path(&path)
        .embedder(Arc::new(HashEmbedder::new(DIM * 2)))
        .build()
        .await;
    // Another model (of another dimension): a 409 that names the way to move the store.
    let refused = other_dim.unwrap_err();
    assert_eq!(refused.status(), 409);
    assert!(refused.to_string().contains("reembed"), "{refused}");
    assert_eq!(
        status(
            Memory::builder()
                .path(&path)
                .store(Arc::new(memlane::store::MemStore::new()))
                .build()
                .await
        ),
        400
    );
    assert_eq!(
        status(
            Memory::builder()
                .index_params(IndexParams::default().max_connections(1000))
                .build()
                .await
        ),
        400
    );
}

#[tokio::test]
async fn concurrent_writers_and_readers_on_one_handle() {
    let dir = tmp();
    let memory = open(&db(&dir)).await;
    let mut tasks = Vec::new();
    for t in 0..8 {
        let m = memory.clone();
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in 0..15 {
                let id = m
                    .add(format!("task {t} fact {i}"))
                    .user(format!("u{t}"))
                    .infer(false)
                    .await;
                ids.push(id.map(|r| r.results[0].id).unwrap());
                let hits = m
                    .search(format!("task {t} fact"))
                    .user(format!("u{t}"))
                    .top_k(100)
                    .await;
                assert_eq!(
                    hits.map(|h| h.results.len()).ok(),
                    Some(ids.len()),
                    "reads see own writes"
                );
            }
            ids
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.map(|ids| ids.len()).unwrap_or(0);
    }
    assert_eq!(total, 120);
    assert_eq!(everything(&memory).await.len(), 120);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebuilding_while_searching_neither_deadlocks_nor_loses_results() {
    let dir = tmp();
    let memory = open_with(&db(&dir), graph_params()).await;
    for i in 0..300 {
        add(&memory, "alice", &format!("fact {i} on subject {}", i % 17)).await;
    }
    let searcher = {
        let m = memory.clone();
        tokio::spawn(async move {
            for i in 0..300 {
                let hits = m
                    .search(format!("subject {}", i % 17))
                    .top_k(5)
                    .await
                    .unwrap();
                assert_eq!(hits.results.len(), 5);
            }
        })
    };
    for _ in 0..5 {
        memory.rebuild_index().await.unwrap();
    }
    tokio::time::timeout(std::time::Duration::from_secs(60), searcher)
        .await
        .expect("searches finished")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_caller_gives_up_still_reaches_the_index() {
    use std::future::IntoFuture;
    let dir = tmp();
    // Exact search (the default for a store this small) ranks from the index's own vectors,
    // so a memory missing from the index cannot be found.
    let memory = open(&db(&dir)).await;
    for i in 0..40 {
        let batch: Vec<Message> = (0..20)
            .map(|j| Message::user(format!("batch {i} item {j} unique{i}x{j}")))
            .collect();
        let write = memory.add(batch).user("alice").infer(false).into_future();
        // Give up almost at once: the write may or may not have committed.
        let _ = tokio::time::timeout(std::time::Duration::from_micros(50 * i), write).await;
    }
    // A later write waits for every earlier one to finish, index update included.
    add(&memory, "alice", "the last one").await;
    let all = everything(&memory).await;
    assert!(all.len() > 1);
    for record in all.iter().step_by(7) {
        let hits = memory.search(record.memory.clone()).top_k(1).await.unwrap();
        assert_eq!(
            hits.results[0].record.id, record.id,
            "{:?} is stored but not searchable",
            record.memory
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_updates_of_one_memory_keep_both_changes() {
    let dir = tmp();
    let memory = open(&db(&dir)).await;
    for round in 0..10 {
        let id = add(&memory, "alice", "I live in Lisbon").await;
        let (a, b) = (memory.clone(), memory.clone());
        let text =
            tokio::spawn(
                async move { a.update(id).text(format!("I live in Porto {round}")).await },
            );
        let meta =
            tokio::spawn(async move { b.update(id).metadata(json!({"checked": round})).await });
        text.await.unwrap().unwrap();
        meta.await.unwrap().unwrap();
        let now = memory.get(id).await.unwrap();
        assert_eq!(now.memory, format!("I live in Porto {round}"));
        assert_eq!(now.metadata["checked"], round);
        assert_eq!(now.metadata["core"]["summary"], now.memory.as_str());
        assert_eq!(memory.history(id).await.unwrap().len(), 3);
    }
}

#[tokio::test]
async fn credits_are_charged_and_can_be_topped_up() {
    let dir = tmp();
    let memory = open(&db(&dir)).await;
    let balance = memory.credits().await.unwrap();
    assert_eq!(memory.add_credits(5).await.unwrap(), balance + 5);
    let out = memory
        .add(vec![Message::user("a"), Message::user("b")])
        .user("u")
        .infer(false)
        .await
        .unwrap();
    assert_eq!((out.credits_used, out.credits_remaining), (2, balance + 3));
    assert_eq!(memory.credits().await.unwrap(), balance + 3);
    // Balances saturate instead of overflowing.
    assert_eq!(memory.add_credits(u64::MAX).await.unwrap(), i64::MAX as u64);
}

#[tokio::test]
async fn more_bad_input_is_refused() {
    let dir = tmp();
    let memory = open(&db(&dir)).await;
    let mut deep = json!(1);
    for _ in 0..40 {
        deep = json!({"d": deep});
    }
    assert_eq!(
        status(memory.add("m").user("u").metadata(deep).infer(false).await),
        400
    );
    assert_eq!(
        status(
            memory
                .add(vec![Message::new("", "hi")])
                .user("u")
                .infer(false)
                .await
        ),
        400
    );
    assert_eq!(
        status(
            memory
                .add(vec![Message::new("x".repeat(300), "hi")])
                .user("u")
                .infer(false)
                .await
        ),
        400
    );
    let days: Vec<String> = (0..101)
        .map(|i| format!("2024-01-{:02}", i % 28 + 1))
        .collect();
    assert_eq!(
        status(
            memory
                .list()
                .filters(json!({"created_at": {"in": days}}))
                .await
        ),
        400
    );
    let many: Vec<String> = (0..1001).map(|i| format!("c{i}")).collect();
    assert_eq!(status(memory.search("q").categories(many).await), 400);
    assert_eq!(
        status(
            memory
                .search("q")
                .filters(json!({"metadata.k": {"like": "x"}}))
                .await
        ),
        400
    );
    assert!(everything(&memory).await.is_empty());
}

#[cfg(not(feature = "local-embed"))]
#[tokio::test]
async fn without_a_local_embedder_the_default_is_a_503_that_says_what_to_configure() {
    let err = Memory::in_memory().await.unwrap_err();
    assert_eq!(
        (err.status(), err.kind()),
        (503, memlane::ErrorKind::NotConfigured),
        "{err}"
    );
    assert!(err.detail().contains("embedder("), "{err}");
}

#[tokio::test]
async fn the_file_keeps_one_vector_per_live_memory() {
    let dir = tmp();
    let path = db(&dir);
    let memory = open(&path).await;
    let a = add(&memory, "u", "likes green tea").await;
    let b = add(&memory, "u", "walks to work").await;
    let c = add(&memory, "u", "plays the cello").await;
    memory.update(a).text("likes black tea").await.unwrap();
    memory.update(c).metadata(json!({"k": 1})).await.unwrap();
    memory.delete(b).await.unwrap();

    let conn = rusqlite::Connection::open(&path).unwrap();
    let orphans: i64 = conn
        .query_row(
            "SELECT count(*) FROM vectors v WHERE NOT EXISTS \
             (SELECT 1 FROM memories m WHERE m.vector_key = v.key AND m.deleted_at IS NULL)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let live_without: i64 = conn
        .query_row(
            "SELECT count(*) FROM memories m WHERE m.deleted_at IS NULL AND NOT EXISTS \
             (SELECT 1 FROM vectors v WHERE v.key = m.vector_key)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let vectors: i64 = conn
        .query_row("SELECT count(*) FROM vectors", [], |r| r.get(0))
        .unwrap();
    assert_eq!((orphans, live_without, vectors), (0, 0, 2));
    // The new text's vector is the one searched by.
    let hits = memory
        .search("likes black tea")
        .mode(SearchMode::Vector)
        .user("u")
        .await
        .unwrap();
    assert_eq!(hits.results[0].record.id, a);
    assert!(hits.results[0].signals.cosine.unwrap() > 0.999);
}

#[tokio::test]
async fn precomputed_vectors_are_stored_as_given_and_checked() {
    let dir = tmp();
    let memory = open(&db(&dir)).await;
    let unit = |i: usize| -> Vec<f32> {
        let mut v = vec![0.0; DIM];
        v[i] = 2.0; // normalised on the way in
        v
    };
    let texts = ["first imported fact", "second imported fact"];
    let added = memory
        .add(vec![Message::user(texts[0]), Message::user(texts[1])])
        .user("u")
        .infer(false)
        .vectors(vec![unit(3), unit(7)])
        .await
        .unwrap();
    assert_eq!(added.results.len(), 2);
    for (i, axis) in [(0, 3), (1, 7)] {
        let hits = memory
            .search_vector(unit(axis))
            .user("u")
            .top_k(1)
            .await
            .unwrap();
        assert_eq!(hits.results[0].record.id, added.results[i].id);
        let cosine = hits.results[0].signals.cosine.unwrap();
        assert!((cosine - 1.0).abs() < 1e-5, "{cosine}");
        // The text's own embedding is not what was stored.
        let by_text = memory
            .search(texts[i])
            .mode(SearchMode::Vector)
            .user("u")
            .top_k(2)
            .await
            .unwrap();
        let own = by_text
            .results
            .iter()
            .find(|h| h.record.id == added.results[i].id)
            .unwrap();
        assert!(own.score < 0.9, "{}", own.score);
    }

    let bad: Vec<(Vec<Vec<f32>>, bool, u16, &str)> = vec![
        (vec![unit(1)], false, 400, "2 messages"),
        (
            vec![unit(1), unit(2), unit(3)],
            false,
            400,
            "one vector per message",
        ),
        (vec![unit(1), unit(2)], true, 400, "infer(false)"),
        (vec![unit(1), vec![1.0; DIM - 1]], false, 422, "383"),
        (vec![unit(1), vec![f32::NAN; DIM]], false, 422, "NaN"),
        (vec![unit(1), vec![0.0; DIM]], false, 422, "zero length"),
    ];
    let before = everything(&memory).await.len();
    let mut checked = 0;
    for (vectors, infer, want, words) in bad {
        let e = memory
            .add(vec![Message::user("a"), Message::user("b")])
            .user("u")
            .infer(infer)
            .vectors(vectors)
            .await
            .unwrap_err();
        assert_eq!(e.status(), want, "{e}");
        assert!(
            e.to_string().contains(words) || format!("{e:?}").contains(words),
            "{e:?} lacks {words:?}"
        );
        assert_eq!(everything(&memory).await.len(), before);
        checked += 1;
    }
    assert_eq!(checked, 6);
}
