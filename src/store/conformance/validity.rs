//! Validity: a memory's `valid_from`, `valid_until` and `superseded_by` as a store keeps
//! them, supersessions and restores, and filters on them.

use uuid::Uuid;

use super::{apply, batch, history, insert_all, live, logged, record, scan_all, t};
use crate::filter::Filter;
use crate::record::{HistoryEvent, MemoryRecord, Message};
use crate::store::{Store, VectorQuery, Write};

/// A memory's validity: stored and read back as written, ended by a supersession (logged
/// with the memory that superseded it), made current again by a restore, and filtered on
/// like any timestamp; a superseded memory's vector leaves the current view for good.
pub(super) async fn supersede_and_restore(store: &dyn Store) {
    let owner = "validity";
    let mut said = record("said long ago", owner, t(100));
    said.valid_from = t(10);
    let mut past = record("already history", owner, t(100));
    past.valid_from = t(5);
    past.valid_until = Some(t(50));
    past.superseded_by = Some(said.id);
    let news = record("the news", owner, t(200));
    insert_all(store, &[&said, &past, &news]).await;
    assert_eq!(live(store, said.id).await, Some(said.clone()));
    assert_eq!(live(store, past.id).await, Some(past.clone()));

    // `said` superseded by the news, said at `at`.
    let supersede = |at: i64, input: Vec<Message>| {
        batch(vec![Write::Supersede {
            id: said.id,
            by: news.id,
            at: t(at),
            input,
            expect: None,
        }])
    };
    let out = apply(store, supersede(200, vec![Message::user("the news")]))
        .await
        .unwrap();
    assert_eq!(out.changes[0].event, HistoryEvent::Supersede);
    assert_eq!(out.changes[0].added_key, None, "the text and vector stay");
    let ended = live(store, said.id)
        .await
        .expect("a superseded memory is live");
    assert_eq!(ended.memory, said.memory);
    assert_eq!(ended.valid_until, Some(t(200)));
    assert_eq!(ended.superseded_by, Some(news.id));
    let log = logged(store, out.cursor.unwrap()).await;
    assert_eq!(log.event, HistoryEvent::Supersede);
    assert_eq!(log.superseded_by, Some(news.id));
    assert_eq!(log.created_at, t(200));
    // Twice is a conflict, and writes nothing.
    let again = apply(store, supersede(300, Vec::new())).await;
    assert!(
        matches!(again, Err(crate::Error::Conflict { .. })),
        "{again:?}"
    );

    let mine = Filter::user(owner);
    let texts = |records: Vec<MemoryRecord>| -> Vec<String> {
        let mut t: Vec<String> = records.into_iter().map(|r| r.memory).collect();
        t.sort();
        t
    };
    let current = scan_all(store, mine.clone().and(Filter::current()), t(1000)).await;
    assert_eq!(texts(current), ["the news"]);
    let then = scan_all(store, mine.clone().and(Filter::held_at(t(20))), t(1000)).await;
    assert_eq!(texts(then), ["already history", "said long ago"]);
    let ended_early =
        Filter::from_json(&serde_json::json!({"valid_until": {"lt": t(100)}})).unwrap();
    let early = scan_all(store, mine.clone().and(ended_early), t(1000)).await;
    assert_eq!(texts(early), ["already history"]);
    let said_later = Filter::from_json(&serde_json::json!({"valid_from": {"gt": t(5)}})).unwrap();
    let later = scan_all(store, mine.clone().and(said_later), t(1000)).await;
    assert_eq!(texts(later), ["said long ago", "the news"]);
    let vectors = store
        .vectors(VectorQuery::Of(&[said.id, news.id]))
        .await
        .unwrap();
    let expiry = |id: Uuid| vectors.iter().find(|v| v.id == id).map(|v| v.expires_at);
    assert_eq!(expiry(said.id), Some(Some(crate::store::SUPERSEDED)));
    assert_eq!(expiry(news.id), Some(None));

    let out = apply(
        store,
        batch(vec![Write::Restore {
            id: said.id,
            at: t(400),
        }]),
    )
    .await
    .unwrap();
    assert_eq!(out.changes[0].event, HistoryEvent::Restore);
    let restored = live(store, said.id).await.unwrap();
    assert!(restored.is_current());
    assert_eq!(restored.superseded_by, None);
    assert_eq!(restored.valid_from, t(10));
    assert_eq!(
        history(store, said.id).await,
        [
            HistoryEvent::Add,
            HistoryEvent::Supersede,
            HistoryEvent::Restore
        ]
    );
    let current = scan_all(store, mine.and(Filter::current()), t(1000)).await;
    assert_eq!(texts(current), ["said long ago", "the news"]);
    let twice = apply(
        store,
        batch(vec![Write::Restore {
            id: said.id,
            at: t(500),
        }]),
    )
    .await;
    assert!(
        matches!(twice, Err(crate::Error::Conflict { .. })),
        "{twice:?}"
    );
}
