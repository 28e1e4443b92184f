//! The store conformance suite (feature `test-util`): every [`Store`] — the SQLite store,
//! the in-memory reference, a database server's, one of your own — runs the same checks
//! with one call, as tantivy runs one directory suite against every `Directory`.
//!
//! ```no_run
//! # async fn run() -> memlane::Result<()> {
//! let store = memlane::store::SqliteStore::in_memory()?;
//! memlane::store::conformance::run(&store).await;
//! # Ok(()) }
//! ```
//!
//! The checks panic on the first disagreement, naming it. Run them on an empty store: they
//! write memories of their own owners, and count them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use chrono::{DateTime, TimeZone, Utc};
use serde_json::Map;
use uuid::Uuid;

use super::{
    apply, Feedback, FeedbackKind, LogQuery, MemoryUpdate, NewMemory, Row, RowWrite, Scan, Store,
    Transaction, VectorQuery, Write, WriteBatch,
};
use crate::filter::Filter;
use crate::record::{content_hash, HistoryEvent, HistoryRecord, MemoryRecord, Message, Owners};

mod search;
mod validity;

pub use search::same_score;

/// Runs every check on `store`, which must start empty.
pub async fn run(store: &dyn Store) {
    rules(store).await;
    validity::supersede_and_restore(store).await;
    preconditions(store).await;
    concurrent_commits(store).await;
    search::scans(store).await;
    search::keyword(store).await;
    threads(store).await;
    // Last: it drops every vector of the store.
    vectors(store).await;
}

/// Memories without vectors, vectors set on their own, every vector dropped, and the
/// metadata precondition. An empty vector is none: the memory has its key but
/// [`Store::vectors`] leaves it out until one is set (a store without an embedding model,
/// re-embedded later). A new dimension may follow a drop.
async fn vectors(store: &dyn Store) {
    let keyed = |v: Vec<super::StoredVector>| -> Vec<(u64, Vec<f32>)> {
        v.into_iter().map(|v| (v.key, v.vector)).collect()
    };
    let bare = record("no vector yet", "vectors", t(0));
    let embedded = record("has a vector", "vectors", t(0));
    let out = apply(
        store,
        batch(vec![
            insert(&bare, Vec::new()),
            insert(&embedded, vec![0.0, 1.0]),
        ]),
    )
    .await
    .unwrap();
    let keys: Vec<u64> = out.changes.iter().filter_map(|c| c.added_key).collect();
    assert_eq!(keys.len(), 2, "both memories get a key");
    let of = store
        .vectors(VectorQuery::Of(&[bare.id, embedded.id]))
        .await
        .unwrap();
    assert_eq!(keyed(of), vec![(keys[1], vec![0.0, 1.0])]);
    let after = store
        .vectors(VectorQuery::After {
            key: keys[0] - 1,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(keyed(after), vec![(keys[1], vec![0.0, 1.0])]);

    // A vector set later: same key, same version, nothing logged.
    let before = row(store, bare.id).await;
    let cursor = store.counters().await.unwrap().last_cursor;
    let set = |id, vector, expect| Write::Vector { id, vector, expect };
    apply(
        store,
        batch(vec![set(bare.id, vec![1.0, 0.0], before.version)]),
    )
    .await
    .unwrap();
    let after_set = row(store, bare.id).await;
    assert_eq!(
        (after_set.key, after_set.version),
        (before.key, before.version)
    );
    assert_eq!(store.counters().await.unwrap().last_cursor, cursor);
    let of = store.vectors(VectorQuery::Of(&[bare.id])).await.unwrap();
    assert_eq!(keyed(of), vec![(keys[0], vec![1.0, 0.0])]);
    // From a stale version: 409; on a deleted memory: 404. Neither writes.
    let stale = apply(
        store,
        batch(vec![set(bare.id, vec![0.5, 0.5], before.version + 1)]),
    )
    .await;
    assert_eq!(stale.err().map(|e| e.status()), Some(409));
    let gone = record("deleted", "vectors", t(0));
    insert_all(store, &[&gone]).await;
    let deleted = Write::Delete {
        id: gone.id,
        at: t(1),
        input: Vec::new(),
        expect: None,
    };
    apply(store, batch(vec![deleted])).await.unwrap();
    let missing = apply(store, batch(vec![set(gone.id, vec![0.5, 0.5], 2)])).await;
    assert_eq!(missing.err().map(|e| e.status()), Some(404));
    let of = store.vectors(VectorQuery::Of(&[bare.id])).await.unwrap();
    assert_eq!(keyed(of), vec![(keys[0], vec![1.0, 0.0])]);

    // The metadata precondition: a missing key is empty; a wrong value refuses everything.
    let expect = |key: &str, value: &str| Write::ExpectMeta {
        key: key.into(),
        value: value.into(),
    };
    let meta = Write::Meta {
        key: "conformance_model".into(),
        value: "m1".into(),
        log: false,
        at: t(0),
    };
    apply(store, batch(vec![expect("conformance_model", ""), meta]))
        .await
        .unwrap();
    let refused_record = record("written under a stale model", "vectors", t(0));
    let refused = apply(
        store,
        batch(vec![
            expect("conformance_model", "m0"),
            insert(&refused_record, vec![1.0, 0.0]),
        ]),
    )
    .await;
    assert_eq!(refused.err().map(|e| e.status()), Some(409));
    assert!(live(store, refused_record.id).await.is_none());
    apply(
        store,
        batch(vec![
            expect("conformance_model", "m1"),
            insert(&refused_record, vec![1.0, 0.0]),
        ]),
    )
    .await
    .unwrap();

    // Dropping every vector keeps the memories; a new dimension may follow.
    apply(store, batch(vec![Write::DropVectors])).await.unwrap();
    let all = store
        .vectors(VectorQuery::After {
            key: 0,
            limit: 1000,
        })
        .await
        .unwrap();
    assert!(all.is_empty(), "{} vectors left", all.len());
    assert!(live(store, embedded.id).await.is_some());
    let version = row(store, embedded.id).await.version;
    apply(
        store,
        batch(vec![set(embedded.id, vec![0.0, 0.6, 0.8], version)]),
    )
    .await
    .unwrap();
    let fresh = record("written after the drop", "vectors", t(0));
    apply(store, batch(vec![insert(&fresh, vec![0.8, 0.6, 0.0])]))
        .await
        .unwrap();
    let of = store
        .vectors(VectorQuery::Of(&[bare.id, embedded.id, fresh.id]))
        .await
        .unwrap();
    let mut dims: Vec<(Uuid, usize)> = of.iter().map(|v| (v.id, v.vector.len())).collect();
    dims.sort();
    let mut want = vec![(embedded.id, 3), (fresh.id, 3)];
    want.sort();
    assert_eq!(dims, want);
}

/// `count`, `admitted` and `replies` agree with the rows: a conversation's replies are
/// pairs of consecutive keys whose second memory's context is the first's text, among live
/// rows only; `admitted` keeps the keys the filter admits; `count` stops at its cap.
async fn threads(store: &dyn Store) {
    let user = "threads";
    let first = record("Where do you paddle?", user, t(0));
    let mut reply = record("On the lake", user, t(0));
    reply.context = Some(first.memory.clone());
    let mut thanks = record("Thanks", user, t(0));
    thanks.context = Some(reply.memory.clone());
    // Stored right after, with a context that is not the text before it.
    let mut stray = record("Unrelated", "threads-other", t(0));
    stray.context = Some("something else".into());
    let keys = insert_all(store, &[&first, &reply, &thanks, &stray]).await;
    assert_eq!(keys.len(), 4);
    assert!(keys.windows(2).all(|w| w[1] == w[0] + 1), "{keys:?}");
    let pairs = store.replies(&keys).await.unwrap();
    assert_eq!(pairs, vec![(keys[0], keys[1]), (keys[1], keys[2])]);
    // Only pairs whose two keys are given.
    assert_eq!(
        store.replies(&keys[1..]).await.unwrap(),
        vec![(keys[1], keys[2])]
    );
    let filter = Filter::user(user);
    let among = super::Among::new(&filter, t(10), false);
    let mut admitted = store.admitted(&keys, among).await.unwrap();
    admitted.sort_unstable();
    assert_eq!(admitted, keys[..3].to_vec());
    assert_eq!(store.count(among, 100).await.unwrap(), 3);
    assert_eq!(store.count(among, 2).await.unwrap(), 2);
    // A deleted memory leaves its pairs and the admitted keys.
    apply(
        store,
        batch(vec![Write::Delete {
            id: reply.id,
            at: t(5),
            input: Vec::new(),
            expect: None,
        }]),
    )
    .await
    .unwrap();
    assert!(store.replies(&keys).await.unwrap().is_empty());
    let among = super::Among::new(&filter, t(10), false);
    assert_eq!(store.admitted(&keys, among).await.unwrap().len(), 2);
    assert_eq!(store.count(among, 100).await.unwrap(), 2);
}

/// Checks that a write built from what one handle read is refused (409) when another
/// handle of the same store changed the memory in between: `a` and `b` are two handles on
/// one store (two connections, two processes' files, two clients of one server).
pub async fn run_two_handles(a: &dyn Store, b: &dyn Store) {
    let r = record("shared fact", "two-handles", t(0));
    insert_all(a, &[&r]).await;
    let seen_by_a = row(a, r.id).await;
    let mut update = MemoryUpdate::new(r.id, t(1));
    update.categories = Some(vec!["b".into()]);
    apply(b, batch(vec![Write::Update(update)])).await.unwrap();
    // `a` writes what it built from its read: the store refuses it inside the transaction.
    let mut stale = seen_by_a.record.clone();
    stale.categories = vec!["a".into()];
    let refused = a
        .commit(Transaction::new(
            vec![RowWrite::Replace {
                record: stale,
                vector: None,
                expect: seen_by_a.version,
            }],
            0,
        ))
        .await;
    assert_eq!(refused.err().map(|e| e.status()), Some(409));
    assert_eq!(row(a, r.id).await.record.categories, vec!["b".to_string()]);
    // A delete decided on the old version is refused the same way; on the current one it
    // goes through, and the other handle sees it at once.
    let stale_delete = a
        .commit(Transaction::new(
            vec![RowWrite::Delete {
                id: r.id,
                at: t(2),
                expect: seen_by_a.version,
            }],
            0,
        ))
        .await;
    assert_eq!(stale_delete.err().map(|e| e.status()), Some(409));
    let current = row(a, r.id).await.version;
    a.commit(Transaction::new(
        vec![RowWrite::Delete {
            id: r.id,
            at: t(3),
            expect: current,
        }],
        0,
    ))
    .await
    .unwrap();
    assert!(row(b, r.id).await.deleted_at.is_some());
}

/// An instant, `seconds` after the suite's fixed origin (2023-11-14T22:13:20Z).
pub fn t(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + seconds, 0)
        .single()
        .unwrap()
}

/// A memory of `user` as the suite writes them: `text`, created and updated `at`, with no
/// metadata, categories, expiry or context, and its text's hash.
pub fn record(text: &str, user: &str, at: DateTime<Utc>) -> MemoryRecord {
    MemoryRecord {
        id: Uuid::new_v4(),
        memory: text.into(),
        owners: Owners {
            user_id: Some(user.into()),
            ..Owners::default()
        },
        metadata: Map::new(),
        categories: Vec::new(),
        immutable: false,
        expiration_date: None,
        created_at: at,
        updated_at: at,
        hash: content_hash(text),
        context: None,
        valid_from: at,
        valid_until: None,
        superseded_by: None,
    }
}

fn batch(writes: Vec<Write>) -> WriteBatch {
    WriteBatch::new(writes, 0)
}

fn insert(r: &MemoryRecord, vector: Vec<f32>) -> Write {
    Write::Insert(NewMemory::new(
        r.clone(),
        vector,
        vec![Message::user(&r.memory)],
    ))
}

async fn insert_all(store: &dyn Store, records: &[&MemoryRecord]) -> Vec<u64> {
    let writes = records.iter().map(|r| insert(r, vec![1.0, 0.0])).collect();
    let out = apply(store, batch(writes)).await.unwrap();
    out.changes.iter().filter_map(|c| c.added_key).collect()
}

async fn row(store: &dyn Store, id: Uuid) -> Row {
    store
        .rows(&[id])
        .await
        .unwrap()
        .pop()
        .unwrap_or_else(|| panic!("no row {id}"))
}

async fn live(store: &dyn Store, id: Uuid) -> Option<MemoryRecord> {
    store
        .rows(&[id])
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.deleted_at.is_none())
        .map(|r| r.record)
}

async fn history(store: &dyn Store, id: Uuid) -> Vec<HistoryEvent> {
    store
        .log(LogQuery::of(id))
        .await
        .unwrap()
        .into_iter()
        .map(|(_, h)| h.event)
        .filter(|e| e.is_memory_change())
        .collect()
}

/// The change-log record at `cursor`.
async fn logged(store: &dyn Store, cursor: u64) -> HistoryRecord {
    store
        .log(LogQuery::after(0, usize::MAX))
        .await
        .unwrap()
        .into_iter()
        .find(|(c, _)| *c == cursor)
        .map(|(_, r)| r)
        .unwrap_or_else(|| panic!("no log record at cursor {cursor}"))
}

async fn scan_all(store: &dyn Store, filter: Filter, now: DateTime<Utc>) -> Vec<MemoryRecord> {
    let page = store.scan(&Scan::new(filter, now, 10_000)).await.unwrap();
    page.rows.into_iter().map(|r| r.record).collect()
}

/// The rules of [`apply`] over the store's primitives.
async fn rules(store: &dyn Store) {
    // Insert, read, keys.
    let a = record("alice likes tea", "alice", t(0));
    let mut b = record("bob likes coffee", "bob", t(1));
    b.immutable = true;
    let keys = insert_all(store, &[&a, &b]).await;
    assert_eq!(keys.len(), 2);
    assert!(keys[0] < keys[1], "keys grow in commit order");
    assert_eq!(live(store, a.id).await, Some(a.clone()));
    assert_eq!(row(store, a.id).await.version, 1);
    assert_eq!(store.counters().await.unwrap().max_key, keys[1]);

    // A duplicate id is a conflict, and the whole batch rolls back.
    let c = record("carol likes juice", "carol", t(2));
    let dup = apply(
        store,
        batch(vec![insert(&c, vec![0.5, 0.5]), insert(&a, vec![1.0, 0.0])]),
    )
    .await;
    assert_eq!(dup.err().map(|e| e.status()), Some(409));
    assert_eq!(live(store, c.id).await, None, "rolled back");

    // Updating text retires the old key and adds a new one; history keeps old and new.
    let mut upd = MemoryUpdate::new(a.id, t(10));
    upd.text = Some(("alice likes green tea".into(), vec![0.9, 0.1]));
    let out = apply(store, batch(vec![Write::Update(upd)])).await.unwrap();
    let change = &out.changes[0];
    assert_eq!(change.retired_key, Some(keys[0]));
    let new_key = change.added_key.unwrap();
    assert!(new_key > keys[1]);
    assert_eq!(change.version, 2);
    let a2 = live(store, a.id).await.unwrap();
    assert_eq!(a2.memory, "alice likes green tea");
    assert_eq!(a2.hash, content_hash("alice likes green tea"));
    assert_eq!((a2.updated_at, a2.created_at), (t(10), t(0)));

    // Immutable memories refuse updates; nothing changes.
    let mut upd = MemoryUpdate::new(b.id, t(11));
    upd.categories = Some(vec!["x".into()]);
    let err = apply(store, batch(vec![Write::Update(upd)])).await;
    assert_eq!(err.err().map(|e| e.status()), Some(409));
    assert_eq!(live(store, b.id).await, Some(b.clone()));

    // Reads by key skip retired keys.
    let mut found: Vec<u64> = store
        .rows_by_key(&[keys[0], keys[1], new_key])
        .await
        .unwrap()
        .iter()
        .map(|r| r.key)
        .collect();
    found.sort_unstable();
    assert_eq!(found, vec![keys[1], new_key]);

    // Delete: gone from reads and scans, a second delete is a 404, history is complete.
    let delete = |id, at, input| Write::Delete {
        id,
        at,
        input,
        expect: None,
    };
    apply(
        store,
        batch(vec![delete(
            a.id,
            t(20),
            vec![Message::user("forget that")],
        )]),
    )
    .await
    .unwrap();
    assert_eq!(live(store, a.id).await, None);
    assert_eq!(row(store, a.id).await.deleted_at, Some(t(20)));
    let again = apply(store, batch(vec![delete(a.id, t(21), Vec::new())])).await;
    assert_eq!(again.err().map(|e| e.status()), Some(404));
    assert_eq!(
        history(store, a.id).await,
        vec![
            HistoryEvent::Add,
            HistoryEvent::Update,
            HistoryEvent::Delete
        ]
    );
    let log: Vec<_> = store
        .log(LogQuery::of(a.id))
        .await
        .unwrap()
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    assert_eq!(log[0].old_memory, None);
    assert_eq!(log[0].input, vec![Message::user("alice likes tea")]);
    assert_eq!(log[1].old_memory.as_deref(), Some("alice likes tea"));
    assert_eq!(log[1].new_memory.as_deref(), Some("alice likes green tea"));
    assert_eq!(log[2].new_memory, None);
    assert_eq!(log[2].input, vec![Message::user("forget that")]);
    assert!(history(store, Uuid::new_v4()).await.is_empty());

    // Updating a deleted memory is a 404.
    let mut upd = MemoryUpdate::new(a.id, t(22));
    upd.categories = Some(vec![]);
    let err = apply(store, batch(vec![Write::Update(upd)])).await;
    assert_eq!(err.err().map(|e| e.status()), Some(404));

    // Reads by key skip a deleted row's key too.
    assert!(store.rows_by_key(&[new_key]).await.unwrap().is_empty());

    // Catch-up reads see only live vectors, with their expiry.
    let after = store
        .vectors(VectorQuery::After { key: 0, limit: 10 })
        .await
        .unwrap();
    assert_eq!(
        after
            .iter()
            .map(|v| (v.key, v.vector.clone()))
            .collect::<Vec<_>>(),
        vec![(keys[1], vec![1.0, 0.0])]
    );
    let of = store.vectors(VectorQuery::Of(&[a.id, b.id])).await.unwrap();
    assert_eq!(of.iter().map(|v| v.id).collect::<Vec<_>>(), vec![b.id]);

    // Credits: an unaffordable batch is a 402 and writes nothing.
    let before = store.counters().await.unwrap().credits;
    let d = record("dave", "dave", t(30));
    let err = apply(
        store,
        WriteBatch::new(vec![insert(&d, vec![1.0, 0.0])], before + 1),
    )
    .await;
    assert_eq!(err.err().map(|e| e.status()), Some(402));
    assert_eq!(live(store, d.id).await, None);
    let out = apply(store, WriteBatch::new(vec![insert(&d, vec![1.0, 0.0])], 3))
        .await
        .unwrap();
    assert_eq!(out.credits_remaining, before - 3);
    let out = apply(store, batch(vec![Write::Credit(5)])).await.unwrap();
    assert_eq!(out.credits_remaining, before + 2);
    assert_eq!(store.counters().await.unwrap().credits, before + 2);

    // Bulk delete by filter deletes exactly the matches, expired ones included.
    let e1 = record("eve one", "eve", t(40));
    let mut e2 = record("eve two", "eve", t(41));
    e2.expiration_date = Some(t(41));
    insert_all(store, &[&e1, &e2]).await;
    let out = apply(
        store,
        batch(vec![Write::DeleteWhere {
            filter: Filter::user("eve"),
            at: t(42),
        }]),
    )
    .await
    .unwrap();
    let mut gone: Vec<Uuid> = out.changes.iter().map(|c| c.record.id).collect();
    gone.sort();
    let mut want = vec![e1.id, e2.id];
    want.sort();
    assert_eq!(gone, want);
    assert_eq!(live(store, d.id).await.map(|r| r.id), Some(d.id));

    // Feedback: set, read, cleared, logged with old and new; a 404 on a deleted memory.
    let feedback = |kind, reason: Option<&str>| Feedback {
        memory_id: d.id,
        feedback: kind,
        feedback_reason: reason.map(str::to_string),
        updated_at: Some(t(50)),
    };
    let negatives = store.counters().await.unwrap().negative_feedback;
    apply(
        store,
        batch(vec![Write::Feedback(feedback(
            Some(FeedbackKind::Negative),
            Some("wrong"),
        ))]),
    )
    .await
    .unwrap();
    assert_eq!(
        store.feedback(&[d.id]).await.unwrap(),
        vec![feedback(Some(FeedbackKind::Negative), Some("wrong"))]
    );
    assert_eq!(
        store.counters().await.unwrap().negative_feedback,
        negatives + 1
    );
    let out = apply(store, batch(vec![Write::Feedback(feedback(None, None))]))
        .await
        .unwrap();
    let cleared = logged(store, out.cursor.unwrap()).await;
    assert_eq!(cleared.event, HistoryEvent::Feedback);
    assert_eq!(cleared.memory_id, d.id);
    assert!(cleared.old_memory.unwrap().contains("NEGATIVE") && cleared.new_memory.is_none());
    let err = apply(
        store,
        batch(vec![Write::Feedback(Feedback {
            memory_id: a.id,
            ..feedback(Some(FeedbackKind::Positive), None)
        })]),
    )
    .await;
    assert_eq!(err.err().map(|e| e.status()), Some(404));

    // Metadata; a logged change records the old and new values.
    assert_eq!(store.meta("k").await.unwrap(), None);
    let meta = |value: &str, log| Write::Meta {
        key: "k".into(),
        value: value.into(),
        log,
        at: t(60),
    };
    apply(store, batch(vec![meta("v1", false)])).await.unwrap();
    let out = apply(store, batch(vec![meta("v2", true)])).await.unwrap();
    assert_eq!(store.meta("k").await.unwrap().as_deref(), Some("v2"));
    let config = logged(store, out.cursor.unwrap()).await;
    assert_eq!(config.event, HistoryEvent::Config);
    assert!(config.memory_id.is_nil(), "about the project, not a memory");
    assert_eq!(
        (config.old_memory.as_deref(), config.new_memory.as_deref()),
        (Some("v1"), Some("v2"))
    );

    // The log: cursors strictly increasing, the counters' last one the newest.
    let log = store.log(LogQuery::after(0, usize::MAX)).await.unwrap();
    assert!(log.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(
        store.counters().await.unwrap().last_cursor,
        log.last().unwrap().0
    );
    let tail = store.log(LogQuery::after(log[2].0, 2)).await.unwrap();
    assert_eq!(tail.len(), 2);
    assert_eq!(tail[0].0, log[3].0, "a page starts after its cursor");
}

/// Preconditions are checked inside the transaction; a failed one rolls all back.
/// Transactions committed at once (a store may commit them together) succeed or fail each
/// on its own: a refused one leaves nothing, and the others are all kept.
async fn concurrent_commits(store: &dyn Store) {
    let target = record("contested", "together", t(200));
    insert_all(store, &[&target]).await;
    let version = row(store, target.id).await.version;
    let records: Vec<MemoryRecord> = (0..24)
        .map(|i| record(&format!("together {i}"), "together", t(201 + i)))
        .collect();
    let commits = records.iter().enumerate().map(|(i, r)| {
        let mut writes = vec![RowWrite::Insert {
            record: r.clone(),
            vector: vec![1.0, 0.0],
        }];
        if i % 3 == 1 {
            // A stale version after the insert: the whole transaction is refused.
            writes.push(RowWrite::Replace {
                record: target.clone(),
                vector: None,
                expect: version + 1,
            });
        }
        store.commit(Transaction::new(writes, 0))
    });
    let results = futures_util::future::join_all(commits).await;
    assert_eq!(results.len(), records.len());
    for (i, (r, result)) in records.iter().zip(results).enumerate() {
        if i % 3 == 1 {
            assert_eq!(result.err().map(|e| e.status()), Some(409), "commit {i}");
            assert_eq!(
                live(store, r.id).await,
                None,
                "refused commit {i} left its insert"
            );
        } else {
            result.unwrap();
            assert_eq!(
                live(store, r.id).await.as_ref(),
                Some(r),
                "commit {i} was lost"
            );
        }
    }
    assert_eq!(row(store, target.id).await.version, version);
}

async fn preconditions(store: &dyn Store) {
    let r = record("precondition", "pre", t(100));
    let other = record("bystander", "pre", t(101));
    insert_all(store, &[&r]).await;
    let v1 = row(store, r.id).await.version;
    let mut changed = r.clone();
    changed.categories = vec!["x".into()];
    let replace = |record: MemoryRecord, expect| RowWrite::Replace {
        record,
        vector: None,
        expect,
    };
    store
        .commit(Transaction::new(vec![replace(changed.clone(), v1)], 0))
        .await
        .unwrap();
    let v2 = row(store, r.id).await.version;
    assert!(v2 > v1, "a change moves the version");
    // A stale version: 409, and the insert in the same transaction is rolled back.
    let stale = store
        .commit(Transaction::new(
            vec![
                RowWrite::Insert {
                    record: other.clone(),
                    vector: vec![1.0, 0.0],
                },
                replace(r.clone(), v1),
            ],
            0,
        ))
        .await;
    assert_eq!(stale.err().map(|e| e.status()), Some(409));
    assert_eq!(live(store, other.id).await, None);
    assert_eq!(
        row(store, r.id).await.record.categories,
        vec!["x".to_string()]
    );
    // A charge the balance cannot cover: 402, nothing written.
    let credits = store.counters().await.unwrap().credits;
    let unaffordable = store
        .commit(Transaction::new(vec![replace(r.clone(), v2)], credits + 1))
        .await;
    assert_eq!(unaffordable.err().map(|e| e.status()), Some(402));
    assert_eq!(row(store, r.id).await.version, v2);
    // A deleted row: 404.
    store
        .commit(Transaction::new(
            vec![RowWrite::Delete {
                id: r.id,
                at: t(102),
                expect: v2,
            }],
            0,
        ))
        .await
        .unwrap();
    let gone = store
        .commit(Transaction::new(vec![replace(r.clone(), v2 + 1)], 0))
        .await;
    assert_eq!(gone.err().map(|e| e.status()), Some(404));
}
