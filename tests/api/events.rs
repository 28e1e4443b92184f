//! The event log: one event per change in commit order, none for a change that rolled back,
//! replay from a cursor, live following, and resuming after a restart without loss.

use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use memlane::ops::events::EventKind;
use memlane::store::FeedbackKind;
use memlane::Memory;
use serde_json::json;
use uuid::Uuid;

use crate::common::add;

async fn open(path: &Path) -> Memory {
    crate::common::open(path, 64).await
}

async fn all_events(memory: &Memory) -> Vec<memlane::ops::events::Event> {
    memory.events_after(0, 1_000).await.unwrap().results
}

#[tokio::test]
async fn every_change_is_one_event_and_a_rolled_back_change_is_none() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(&dir.path().join("m.db")).await;
    let a = add(&memory, "ann", "likes tea").await;
    let b = add(&memory, "ann", "lives in Oslo").await;
    let c = add(&memory, "bob", "plays chess").await;
    memory.update(a).text("likes green tea").await.unwrap();
    memory.delete(b).await.unwrap();
    memory.delete_all().user("bob").await.unwrap();

    // Failures write nothing, and log nothing.
    assert!(memory.update(b).text("gone").await.is_err());
    let balance = memory.credits().await.unwrap();
    let charge = memlane::store::WriteBatch::new(Vec::new(), balance);
    let drained = memlane::store::apply(&**memory.store(), charge).await;
    assert!(drained.is_ok());
    assert_eq!(
        memory
            .add("too poor")
            .user("ann")
            .infer(false)
            .await
            .unwrap_err()
            .status(),
        402
    );

    let events = all_events(&memory).await;
    let seen: Vec<(EventKind, Uuid)> = events
        .iter()
        .map(|e| (e.kind, e.memory_id.unwrap()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (EventKind::MemoryAdd, a),
            (EventKind::MemoryAdd, b),
            (EventKind::MemoryAdd, c),
            (EventKind::MemoryUpdate, a),
            (EventKind::MemoryDelete, b),
            (EventKind::MemoryDelete, c),
        ]
    );
    assert!(events.windows(2).all(|w| w[0].cursor < w[1].cursor));
    assert_eq!(events[3].previous_memory.as_deref(), Some("likes tea"));
    assert_eq!(events[3].memory.as_deref(), Some("likes green tea"));
    assert_eq!(events[4].memory, None);
    assert_eq!(events[5].owners.user_id.as_deref(), Some("bob"));

    // Events agree with history.
    for e in &events {
        let history = memory.history(e.memory_id.unwrap()).await.unwrap();
        assert!(history.iter().any(|h| h.id == e.id), "{e:?}");
    }

    // Pages: from a cursor, bounded, and the next cursor continues.
    let page = memory.events_after(events[1].cursor, 2).await.unwrap();
    assert_eq!(
        page.results.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![events[2].id, events[3].id]
    );
    assert_eq!(page.next_cursor, events[3].cursor);
    let rest = memory.events_after(page.next_cursor, 10).await.unwrap();
    assert_eq!(rest.results.len(), 2);
    let end = memory.events_after(events[5].cursor, 10).await.unwrap();
    assert!(end.results.is_empty());
    assert_eq!(end.next_cursor, events[5].cursor);
    for limit in [0, 1_001] {
        assert_eq!(
            memory.events_after(0, limit).await.unwrap_err().status(),
            400
        );
    }
}

#[tokio::test]
async fn a_stream_replays_then_follows_live_changes() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(&dir.path().join("m.db")).await;
    let first = add(&memory, "ann", "one").await;
    let mut stream = Box::pin(memory.events(0));
    let replayed = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(replayed.memory_id.unwrap(), first);

    // Live: written after the subscriber caught up, from another task.
    let writer = memory.clone();
    let written = tokio::spawn(async move {
        let mut ids = Vec::new();
        for i in 0..5 {
            ids.push(add(&writer, "ann", &format!("fact {i}")).await);
        }
        ids
    });
    let mut received = Vec::new();
    while received.len() < 5 {
        let event = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("a live event arrives")
            .unwrap()
            .unwrap();
        received.push(event.memory_id.unwrap());
    }
    assert_eq!(received, written.await.unwrap());
}

#[tokio::test]
async fn a_subscriber_resumes_after_a_restart_and_sees_other_handles() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let (cursor, before) = {
        let memory = open(&path).await;
        let before = vec![
            add(&memory, "ann", "a").await,
            add(&memory, "ann", "b").await,
        ];
        // The subscriber read the first event, then went away.
        let mut stream = Box::pin(memory.events(0));
        let seen = stream.next().await.unwrap().unwrap();
        (seen.cursor, before)
    };
    // Written while nobody listened, after a restart.
    let memory = open(&path).await;
    let later = add(&memory, "ann", "c").await;
    let mut stream = Box::pin(memory.events(cursor));
    let mut got = Vec::new();
    for _ in 0..2 {
        got.push(stream.next().await.unwrap().unwrap().memory_id.unwrap());
    }
    assert_eq!(got, vec![before[1], later]);

    // A change through a second handle on the same file reaches the stream by polling.
    let other = open(&path).await;
    let remote = add(&other, "ann", "d").await;
    let event = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("another handle's change arrives")
        .unwrap()
        .unwrap();
    assert_eq!(event.memory_id.unwrap(), remote);
}

#[tokio::test]
async fn feedback_and_configuration_changes_are_events_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let memory = open(&path).await;
    let a = add(&memory, "ann", "likes tea").await;
    let cursor = memory.events_after(0, 10).await.unwrap().next_cursor;
    memory
        .feedback(a, Some(FeedbackKind::Negative), Some("outdated"))
        .await
        .unwrap();
    memory.feedback(a, None, None).await.unwrap();
    memory
        .put_config(&json!({"extraction_policy": "Only food."}))
        .await
        .unwrap();
    memory
        .put_config(&json!({"label_taxonomy": [{"food": "what they eat"}]}))
        .await
        .unwrap();
    // A refused change is no event.
    assert!(memory.put_config(&json!({"labels": []})).await.is_err());
    assert!(memory
        .feedback(uuid::Uuid::new_v4(), Some(FeedbackKind::Positive), None)
        .await
        .is_err());

    let events = memory.events_after(cursor, 100).await.unwrap().results;
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![
            EventKind::MemoryFeedback,
            EventKind::MemoryFeedback,
            EventKind::ConfigUpdate,
            EventKind::ConfigUpdate,
        ]
    );
    // Feedback: about the memory, with the new and old values.
    assert_eq!(events[0].memory_id, Some(a));
    assert_eq!(
        events[0].value,
        Some(json!({"feedback": "NEGATIVE", "feedback_reason": "outdated"}))
    );
    assert_eq!(events[0].previous_value, None);
    assert_eq!(events[1].value, None, "cleared");
    assert_eq!(events[1].previous_value, events[0].value);
    // Configuration: about the project, with the whole configuration before and after.
    assert_eq!(events[2].memory_id, None);
    assert_eq!(events[2].previous_value, None);
    assert_eq!(
        events[2].value.as_ref().unwrap()["extraction_policy"],
        json!("Only food.")
    );
    assert_eq!(events[3].previous_value, events[2].value);
    assert_eq!(
        events[3].value.as_ref().unwrap()["label_taxonomy"],
        json!([{"food": "what they eat"}])
    );
    assert!(events.iter().all(|e| e.created_at <= chrono::Utc::now()));

    // Resumable like any event: after a reopen, from the cursor of the first.
    drop(memory);
    let memory = open(&path).await;
    let resumed = memory.events_after(events[0].cursor, 100).await.unwrap();
    assert_eq!(
        resumed.results.iter().map(|e| e.id).collect::<Vec<_>>(),
        events[1..].iter().map(|e| e.id).collect::<Vec<_>>()
    );
}
