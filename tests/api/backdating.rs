//! Backdating: `.timestamp(t)` dates what an `add` stores as it happened. `created_at` is
//! `t` (so lists and `created_at` filters place the memory where it happened); `updated_at`,
//! history and events keep the time it was stored; a `t` in the future is a 400; an older
//! fact never replaces a newer memory in reconciliation.

use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use memlane::record::HistoryEvent;
use memlane::{Llm, Memory, Message, ScriptedLlm, SearchMode};
use serde_json::json;

use crate::common::{add, open, open_with_llm};

fn year(y: i32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, 6, 1, 12, 0, 0).unwrap()
}

async fn listed(memory: &Memory, filters: Option<serde_json::Value>) -> Vec<String> {
    let mut list = memory.list().user("ann");
    if let Some(f) = filters {
        list = list.filters(f);
    }
    list.await
        .unwrap()
        .results
        .into_iter()
        .map(|r| r.memory)
        .collect()
}

#[tokio::test]
async fn backdated_memories_are_dated_as_they_happened_and_stored_now() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(&dir.path().join("m.db"), 64).await;
    let before = Utc::now();
    add(&memory, "ann", "started a new job at the bakery").await;
    let imported = memory
        .add(vec![
            Message::user("we adopted a dog called Pip"),
            Message::user("I ran my first marathon"),
        ])
        .user("ann")
        .timestamp(year(2021))
        .infer(false)
        .await
        .unwrap();
    memory
        .add("moved to Porto")
        .user("ann")
        .timestamp(year(2023))
        .infer(false)
        .await
        .unwrap();
    let after = Utc::now();

    // created_at is when it happened; updated_at, history and events are when it was stored.
    for added in &imported.results {
        let record = memory.get(added.id).await.unwrap();
        assert_eq!(record.created_at, year(2021));
        assert!(record.updated_at >= before && record.updated_at <= after);
        let history = memory.history(added.id).await.unwrap();
        assert_eq!(history[0].event, HistoryEvent::Add);
        assert!(
            history[0].created_at >= before,
            "history is never backdated"
        );
    }
    let events = memory.events_after(0, 100).await.unwrap().results;
    assert_eq!(events.len(), 4);
    assert!(
        events.iter().all(|e| e.created_at >= before),
        "events are never backdated"
    );

    // Lists order by created_at, newest first: the backdated memories sort where they
    // happened, though they were stored last.
    assert_eq!(
        listed(&memory, None).await,
        vec![
            "started a new job at the bakery",
            "moved to Porto",
            "I ran my first marathon",
            "we adopted a dog called Pip",
        ]
    );
    // Filters on created_at see when they happened, in list and in search.
    let in_2021 = json!({"created_at": {"gte": "2021-01-01", "lt": "2022-01-01"}});
    let mut got = listed(&memory, Some(in_2021.clone())).await;
    got.sort();
    assert_eq!(
        got,
        vec!["I ran my first marathon", "we adopted a dog called Pip"]
    );
    for mode in [SearchMode::Keyword, SearchMode::Vector, SearchMode::Hybrid] {
        let hits = memory
            .search("dog marathon Porto bakery")
            .user("ann")
            .filters(in_2021.clone())
            .mode(mode)
            .await
            .unwrap();
        assert!(!hits.results.is_empty(), "{mode:?}");
        assert!(
            hits.results
                .iter()
                .all(|h| h.record.created_at == year(2021)),
            "{mode:?}: {:?}",
            hits.results
        );
    }
    let before_2022 = json!({"created_at": {"lt": "2022-01-01"}});
    assert_eq!(listed(&memory, Some(before_2022)).await.len(), 2);
}

#[tokio::test]
async fn a_time_in_the_future_or_out_of_range_is_a_400_that_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(&dir.path().join("m.db"), 64).await;
    // Within the clock skew it is fine.
    memory
        .add("now-ish")
        .user("ann")
        .timestamp(Utc::now() + Duration::seconds(30))
        .infer(false)
        .await
        .unwrap();
    for (t, words) in [
        (Utc::now() + Duration::hours(1), "in the future"),
        (DateTime::<Utc>::MAX_UTC, "in the future"),
        (DateTime::<Utc>::MIN_UTC, "out of range"),
        (
            Utc.with_ymd_and_hms(1899, 12, 31, 0, 0, 0).unwrap(),
            "out of range",
        ),
    ] {
        for infer in [false, true] {
            let err = memory
                .add("a memory from nowhen")
                .user("ann")
                .timestamp(t)
                .infer(infer)
                .await
                .unwrap_err();
            assert_eq!(err.status(), 400, "{t}: {err}");
            assert!(err.detail().contains(words), "{t}: {err}");
        }
    }
    assert_eq!(listed(&memory, None).await, vec!["now-ish"]);
}

fn facts(items: &[&str]) -> String {
    let facts: Vec<_> = items.iter().map(|t| json!({"text": t})).collect();
    json!({ "facts": facts }).to_string()
}

/// An older statement never replaces a newer memory: told in a chat from 2019 that Ann
/// lived in Madrid, and asked, the model calls it a contradiction of today's Valencia; the
/// fact is stored as history, superseded by Valencia from when that was said. The same
/// contradiction from a conversation after the memory does supersede it.
#[tokio::test]
async fn reconciliation_never_lets_an_older_fact_replace_a_newer_memory() {
    let dir = tempfile::tempdir().unwrap();
    let llm = Arc::new(ScriptedLlm::new([
        facts(&["Ann lives in Valencia"]),
        facts(&["Ann lives in Madrid"]),
        json!({"decisions": [{"fact": 0, "event": "DELETE", "memory": 0}]}).to_string(),
        facts(&["Ann lives in Lisbon"]),
        json!({"decisions": [{"fact": 0, "event": "DELETE", "memory": 0}]}).to_string(),
    ]));
    let memory = open_with_llm(&dir.path().join("m.db"), 256, Some(llm as Arc<dyn Llm>)).await;
    let valencia = memory
        .add("I live in Valencia")
        .user("ann")
        .await
        .unwrap()
        .results[0]
        .id;
    let old = memory
        .add("Back then I lived in Madrid")
        .user("ann")
        .timestamp(year(2019))
        .await
        .unwrap();
    let events: Vec<HistoryEvent> = old.results.iter().map(|r| r.event).collect();
    assert_eq!(events, [HistoryEvent::Add], "{:?}", old.results);
    assert_eq!(old.results[0].superseded_by, Some(valencia));
    assert_eq!(listed(&memory, None).await, vec!["Ann lives in Valencia"]);
    let then = memory.list().user("ann").as_of(year(2020)).await.unwrap();
    let then: Vec<&str> = then.results.iter().map(|r| r.memory.as_str()).collect();
    assert_eq!(then, ["Ann lives in Madrid"]);
    memory.add("I moved to Lisbon").user("ann").await.unwrap();
    assert_eq!(listed(&memory, None).await, vec!["Ann lives in Lisbon"]);
}
