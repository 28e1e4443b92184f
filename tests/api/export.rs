//! Export and import: a lossless round trip (every field, vectors, history, feedback),
//! filters, conflicts and altered exports refused whole, and migration to another model.

use std::sync::Arc;

use chrono::{Duration, Utc};
use memlane::ops::export::Export;
use memlane::store::FeedbackKind;
use memlane::store::{MemStore, Store};
use memlane::{HashEmbedder, Memory, Message};
use serde_json::json;

async fn open(dir: &std::path::Path, name: &str, dim: usize) -> Memory {
    Memory::builder()
        .path(dir.join(name))
        .embedder(Arc::new(HashEmbedder::new(dim)))
        .build()
        .await
        .unwrap()
}

/// A store with every kind of field and history.
async fn populate(memory: &Memory) {
    let added = memory
        .add(vec![
            Message::new("Mel", "Did you ever make it to Lisbon?"),
            Message::new("Caro", "Yes, last May, for a whole week."),
        ])
        .user("ann")
        .agent("helper")
        .metadata(json!({"session": 3, "deep": {"list": [1, "two", null]}}))
        .categories(["travel"])
        .infer(false)
        .await
        .unwrap();
    let kept = memory
        .add("Ann's passport number ends in 42")
        .user("ann")
        .immutable(true)
        .expiry(Utc::now() + Duration::days(30))
        .infer(false)
        .await
        .unwrap();
    let bob = memory
        .add("Bob plays chess")
        .user("bob")
        .infer(false)
        .await
        .unwrap();
    let gone = memory
        .add("Bob lived in Rome")
        .user("bob")
        .infer(false)
        .await
        .unwrap();
    memory
        .update(bob.results[0].id)
        .text("Bob plays chess on Sundays")
        .await
        .unwrap();
    memory.delete(gone.results[0].id).await.unwrap();
    memory
        .feedback(
            added.results[1].id,
            Some(FeedbackKind::Negative),
            Some("vague"),
        )
        .await
        .unwrap();
    let _ = kept;
}

fn without_time(mut export: Export) -> Export {
    export.exported_at = chrono::DateTime::UNIX_EPOCH;
    export
}

#[tokio::test]
async fn an_import_restores_an_export_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let source = open(dir.path(), "a.db", 64).await;
    populate(&source).await;
    let export = source.export().await.unwrap();
    assert_eq!(
        export.memories.len(),
        4,
        "the deleted memory is not exported"
    );
    // Through JSON, as a backup file would be.
    let text = serde_json::to_string(&export).unwrap();
    let parsed: Export = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed, export);

    for target in [
        open(dir.path(), "b.db", 64).await,
        Memory::builder()
            .store(Arc::new(MemStore::new()) as Arc<dyn Store>)
            .embedder(Arc::new(HashEmbedder::new(64)))
            .build()
            .await
            .unwrap(),
    ] {
        let result = target.import(&parsed).await.unwrap();
        assert_eq!(result.imported.len(), 4);
        assert!(!result.reembedded);
        assert_eq!(result.credits_used, 0);
        let again = target.export().await.unwrap();
        assert_eq!(without_time(again), without_time(export.clone()));
        for m in &export.memories {
            assert_eq!(target.get(m.record.id).await.unwrap(), m.record);
            assert_eq!(target.history(m.record.id).await.unwrap(), m.history);
        }
        // The index knows the restored vectors.
        let hit = target
            .search("chess on Sundays")
            .user("bob")
            .top_k(1)
            .await
            .unwrap();
        assert_eq!(hit.results[0].record.memory, "Bob plays chess on Sundays");

        // Importing the same memories again is a conflict, and changes nothing.
        let before = target.export().await.unwrap();
        assert_eq!(target.import(&parsed).await.unwrap_err().status(), 409);
        assert_eq!(
            without_time(target.export().await.unwrap()),
            without_time(before)
        );
    }
}

#[tokio::test]
async fn exports_are_filtered_and_altered_exports_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let source = open(dir.path(), "a.db", 64).await;
    populate(&source).await;
    let ann = source.export().user("ann").await.unwrap();
    assert_eq!(ann.memories.len(), 3);
    assert!(ann
        .memories
        .iter()
        .all(|m| m.record.owners.user_id.as_deref() == Some("ann")));
    assert_eq!(
        source
            .export()
            .filters(json!({"nope": 1}))
            .await
            .unwrap_err()
            .status(),
        400
    );

    let target = open(dir.path(), "b.db", 64).await;
    let mut altered = ann.clone();
    altered.memories[0].record.memory = "Ann never went to Lisbon".into();
    let mut foreign_history = ann.clone();
    foreign_history.memories[0].history[0].memory_id = uuid::Uuid::new_v4();
    let mut twice = ann.clone();
    twice.memories.push(twice.memories[0].clone());
    let mut wrong_format = ann.clone();
    wrong_format.format = "mem0".into();
    let mut bad_vector = ann.clone();
    bad_vector.memories[1].vector = vec![f32::NAN; 64];
    for bad in [altered, foreign_history, twice, wrong_format] {
        assert_eq!(target.import(&bad).await.unwrap_err().status(), 400);
    }
    assert_eq!(target.import(&bad_vector).await.unwrap_err().status(), 422);

    // Every bound `add` applies holds for imported records too: one bad record among good
    // ones stores nothing, and the error names it.
    type Spoil = fn(&mut memlane::ops::export::ExportedMemory);
    let spoils: [(Spoil, u16); 8] = [
        (
            |m| m.record.categories = (0..65).map(|i| format!("c{i}")).collect(),
            400,
        ),
        (
            |m| m.record.categories = vec!["food".into(), "food".into()],
            400,
        ),
        (|m| m.record.categories = vec![" ".into()], 400),
        (|m| m.record.context = Some("x".repeat(40_000)), 413),
        (|m| m.record.owners.user_id = Some("bad\u{7}id".into()), 400),
        (|m| m.record.owners.agent_id = Some("a".repeat(300)), 400),
        (|m| m.history[0].input = vec![Message::new("", "hi")], 400),
        (
            |m| {
                m.feedback = Some(memlane::store::Feedback {
                    memory_id: m.record.id,
                    feedback: Some(FeedbackKind::Negative),
                    feedback_reason: Some("r".repeat(3_000)),
                    updated_at: None,
                })
            },
            413,
        ),
    ];
    for (i, (spoil, status)) in spoils.into_iter().enumerate() {
        let mut bad = ann.clone();
        spoil(&mut bad.memories[1]);
        let err = target.import(&bad).await.unwrap_err();
        assert_eq!(err.status(), status, "case {i}: {err}");
        let id = bad.memories[1].record.id.to_string();
        assert!(err.detail().contains(&id), "case {i}: {err}");
    }
    assert!(
        target.export().await.unwrap().memories.is_empty(),
        "nothing was stored"
    );
}

#[tokio::test]
async fn an_import_from_another_model_recomputes_the_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let source = open(dir.path(), "a.db", 64).await;
    populate(&source).await;
    let export = source.export().await.unwrap();
    let target = open(dir.path(), "b.db", 32).await;
    let reports = crate::common::Reports::default();
    let result = target
        .import(&export)
        .on_progress(reports.callback())
        .await
        .unwrap();
    assert!(result.reembedded);
    // Embedded in one chunk (the last memory counts once written), then written.
    let n = export.memories.len() as u64;
    assert!(n > 1);
    assert_eq!(
        reports.of(memlane::progress::Task::Import),
        [(0, n), (n - 1, n), (n, n)]
    );
    let again = target.export().await.unwrap();
    assert_eq!(again.dimension, 32);
    assert!(again.memories.iter().all(|m| m.vector.len() == 32));
    let hit = target
        .search("chess on Sundays")
        .user("bob")
        .top_k(1)
        .await
        .unwrap();
    assert_eq!(hit.results[0].record.memory, "Bob plays chess on Sundays");
}
