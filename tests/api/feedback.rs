//! Feedback: set, read back, clear; and its documented effect on search and retrieve.

use std::sync::Arc;

use memlane::store::FeedbackKind;
use memlane::store::{MemStore, Store};
use memlane::{HashEmbedder, Memory, SearchMode};
use uuid::Uuid;

async fn open(store: Option<Arc<dyn Store>>, dir: &std::path::Path) -> Memory {
    let b = Memory::builder().embedder(Arc::new(HashEmbedder::new(128)));
    match store {
        Some(s) => b.store(s),
        None => b.path(dir.join("m.db")),
    }
    .build()
    .await
    .unwrap()
}

async fn add(memory: &Memory, text: &str) -> Uuid {
    memory
        .add(text)
        .user("ann")
        .infer(false)
        .await
        .unwrap()
        .results[0]
        .id
}

async fn ranked(memory: &Memory, top_k: usize) -> Vec<(Uuid, f32)> {
    memory
        .search("green tea")
        .user("ann")
        .mode(SearchMode::Keyword)
        .top_k(top_k)
        .await
        .unwrap()
        .results
        .into_iter()
        .map(|h| (h.record.id, h.score))
        .collect()
}

async fn feedback_on(memory: Memory) {
    let a = add(&memory, "green tea").await;
    let b = add(&memory, "green tea with milk and honey").await;
    let c = add(&memory, "tea").await;
    let before = ranked(&memory, 3).await;
    assert_eq!(
        before.iter().map(|h| h.0).collect::<Vec<_>>(),
        vec![a, b, c]
    );

    // Read back, replace, clear.
    let none = memory.feedback_of(a).await.unwrap();
    assert_eq!((none.feedback, none.updated_at), (None, None));
    let set = memory
        .feedback(a, Some(FeedbackKind::Positive), Some("  spot on "))
        .await
        .unwrap();
    assert_eq!(set.feedback.feedback_reason.as_deref(), Some("spot on"));
    assert_eq!(set.credits_used, 0);
    assert_eq!(set.credits_remaining, memory.credits().await.unwrap());
    assert_eq!(memory.feedback_of(a).await.unwrap(), set.feedback);
    assert_eq!(
        ranked(&memory, 3).await,
        before,
        "POSITIVE changes no score"
    );
    memory.feedback(a, None, Some("ignored")).await.unwrap();
    let cleared = memory.feedback_of(a).await.unwrap();
    assert_eq!((cleared.feedback, cleared.feedback_reason), (None, None));
    assert!(cleared.updated_at.is_some());

    // VERY_NEGATIVE: out of search and retrieve, refilled by the next best; still readable.
    memory
        .feedback(a, Some(FeedbackKind::VeryNegative), Some("wrong person"))
        .await
        .unwrap();
    let now = ranked(&memory, 2).await;
    assert_eq!(now.iter().map(|h| h.0).collect::<Vec<_>>(), vec![b, c]);
    assert_eq!(now[0].1, before[1].1);
    let retrieved = memory.retrieve("green tea", "ann", 3).await.unwrap();
    assert!(retrieved.results.iter().all(|h| h.record.id != a));
    assert_eq!(retrieved.results.len(), 2);
    assert!(memory.get(a).await.is_ok());
    assert_eq!(memory.list().user("ann").await.unwrap().results.len(), 3);

    // NEGATIVE: half the score, then ranked again by score.
    memory
        .feedback(b, Some(FeedbackKind::Negative), None)
        .await
        .unwrap();
    let now = ranked(&memory, 2).await;
    let b_now = now.iter().find(|h| h.0 == b).map(|h| h.1).unwrap();
    assert!((b_now - before[1].1 * 0.5).abs() < 1e-6);
    assert!(now.windows(2).all(|w| w[0].1 >= w[1].1));

    // Bad input.
    assert_eq!(
        memory
            .feedback(Uuid::new_v4(), Some(FeedbackKind::Positive), None)
            .await
            .unwrap_err()
            .status(),
        404
    );
    assert_eq!(
        memory
            .feedback("not-a-uuid", None, None)
            .await
            .unwrap_err()
            .status(),
        400
    );
    let long = "x".repeat(memlane::ops::feedback::MAX_FEEDBACK_REASON_BYTES + 1);
    assert_eq!(
        memory
            .feedback(c, Some(FeedbackKind::Negative), Some(&long))
            .await
            .unwrap_err()
            .status(),
        413
    );
    assert_eq!(
        memory.feedback_of(c).await.unwrap().feedback,
        None,
        "nothing was stored"
    );
    memory.delete(c).await.unwrap();
    assert_eq!(memory.feedback_of(c).await.unwrap_err().status(), 404);
    assert_eq!(
        memory
            .feedback(c, Some(FeedbackKind::Positive), None)
            .await
            .unwrap_err()
            .status(),
        404
    );
}

#[tokio::test]
async fn feedback_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    feedback_on(open(None, dir.path()).await).await;
}

#[tokio::test]
async fn feedback_on_the_reference_store() {
    let dir = tempfile::tempdir().unwrap();
    feedback_on(open(Some(Arc::new(MemStore::new())), dir.path()).await).await;
}

#[tokio::test]
async fn feedback_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let memory = open(None, dir.path()).await;
        let id = add(&memory, "likes jazz").await;
        memory
            .feedback(id, Some(FeedbackKind::Negative), Some("outdated"))
            .await
            .unwrap();
        id
    };
    let memory = open(None, dir.path()).await;
    let f = memory.feedback_of(id).await.unwrap();
    assert_eq!(f.feedback, Some(FeedbackKind::Negative));
    assert_eq!(f.feedback_reason.as_deref(), Some("outdated"));
}
