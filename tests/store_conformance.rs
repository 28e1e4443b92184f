//! One conformance suite for every `Store`: the SQLite store (on a real file and in memory)
//! and the in-memory reference store must behave identically. A store of your own can run
//! the same checks by calling `conformance(&store)`.

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use memlane::filter::Filter;
use memlane::store::{
    ListQuery, MemStore, MemoryUpdate, NewMemory, SqliteStore, Store, Write, WriteBatch,
};
use memlane::{HistoryEvent, MemoryRecord, Message, Owners};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use uuid::Uuid;

fn t(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + secs, 0).single().unwrap()
}

fn record(text: &str, user: &str, at: DateTime<Utc>) -> MemoryRecord {
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
        hash: format!("hash-of-{text}"),
        context: None,
    }
}

fn insert(r: &MemoryRecord, v: Vec<f32>) -> Write {
    Write::Insert(NewMemory::new(r.clone(), v, vec![Message::user(&r.memory)]))
}

async fn apply(store: &dyn Store, writes: Vec<Write>) -> memlane::Result<Vec<u64>> {
    let out = store.apply(WriteBatch::new(writes, 0)).await?;
    Ok(out.changes.iter().filter_map(|c| c.added_key).collect())
}

async fn all(store: &dyn Store, filter: Filter, now: DateTime<Utc>) -> Vec<MemoryRecord> {
    let page = store.list(ListQuery::new(filter, now, 10_000)).await;
    page.map(|p| p.records).unwrap()
}

/// The whole contract, run against one store.
async fn conformance(store: &dyn Store) {
    // Insert, get, keys.
    let a = record("alice likes tea", "alice", t(0));
    let mut b = record("bob likes coffee", "bob", t(1));
    b.immutable = true;
    let keys = apply(
        store,
        vec![insert(&a, vec![1.0, 0.0]), insert(&b, vec![0.0, 1.0])],
    )
    .await
    .unwrap();
    assert_eq!(keys.len(), 2);
    assert!(keys[0] < keys[1], "keys grow in commit order");
    assert_eq!(store.get(a.id).await.ok().flatten(), Some(a.clone()));
    assert_eq!(store.max_key().await.ok(), Some(keys[1]));

    // A duplicate id is a conflict, and the whole batch rolls back.
    let c = record("carol likes juice", "carol", t(2));
    let dup = store
        .apply(WriteBatch::new(
            vec![insert(&c, vec![0.5, 0.5]), insert(&a, vec![1.0, 0.0])],
            0,
        ))
        .await;
    assert_eq!(dup.err().map(|e| e.status()), Some(409));
    assert_eq!(store.get(c.id).await.ok().flatten(), None, "rolled back");

    // Updating text retires the old key and adds a new one; history keeps old and new.
    let mut upd = MemoryUpdate::new(a.id, t(10));
    upd.text = Some(("alice likes green tea".into(), vec![0.9, 0.1]));
    let out = store
        .apply(WriteBatch::new(vec![Write::Update(upd)], 0))
        .await
        .ok();
    let change = out.and_then(|o| o.changes.into_iter().next());
    assert_eq!(change.as_ref().and_then(|c| c.retired_key), Some(keys[0]));
    let new_key = change.as_ref().and_then(|c| c.added_key).unwrap_or(0);
    assert!(new_key > keys[1]);
    let a2 = store.get(a.id).await.ok().flatten();
    assert_eq!(
        a2.as_ref().map(|r| r.memory.as_str()),
        Some("alice likes green tea")
    );
    assert_eq!(a2.as_ref().map(|r| r.updated_at), Some(t(10)));
    assert_eq!(a2.as_ref().map(|r| r.created_at), Some(t(0)));

    // Immutable memories refuse updates; nothing changes.
    let mut upd = MemoryUpdate::new(b.id, t(11));
    upd.categories = Some(vec!["x".into()]);
    let err = store
        .apply(WriteBatch::new(vec![Write::Update(upd)], 0))
        .await;
    assert_eq!(err.err().map(|e| e.status()), Some(409));
    assert_eq!(store.get(b.id).await.ok().flatten(), Some(b.clone()));

    // get_by_keys skips retired keys.
    let by_keys = store
        .get_by_keys(&[keys[0], keys[1], new_key])
        .await
        .unwrap();
    let mut found: Vec<u64> = by_keys.iter().map(|(k, _)| *k).collect();
    found.sort_unstable();
    assert_eq!(found, vec![keys[1], new_key]);

    // Delete: gone from get and lists, a second delete is a 404, history is complete.
    apply(
        store,
        vec![Write::Delete {
            id: a.id,
            at: t(20),
            input: vec![Message::user("forget that")],
        }],
    )
    .await
    .ok();
    assert_eq!(store.get(a.id).await.ok().flatten(), None);
    let again = store
        .apply(WriteBatch::new(
            vec![Write::Delete {
                id: a.id,
                at: t(21),
                input: Vec::new(),
            }],
            0,
        ))
        .await;
    assert_eq!(again.err().map(|e| e.status()), Some(404));
    let history = store.history(a.id).await.unwrap();
    let events: Vec<HistoryEvent> = history.iter().map(|h| h.event).collect();
    assert_eq!(
        events,
        vec![
            HistoryEvent::Add,
            HistoryEvent::Update,
            HistoryEvent::Delete
        ]
    );
    assert_eq!(history[0].old_memory, None);
    assert_eq!(history[2].input, vec![Message::user("forget that")]);
    assert_eq!(history[0].input, vec![Message::user("alice likes tea")]);
    assert_eq!(history[1].old_memory.as_deref(), Some("alice likes tea"));
    assert_eq!(
        history[1].new_memory.as_deref(),
        Some("alice likes green tea")
    );
    assert_eq!(history[2].new_memory, None);
    assert!(store.history(Uuid::new_v4()).await.unwrap().is_empty());

    // Updating a deleted memory is a 404.
    let mut upd = MemoryUpdate::new(a.id, t(22));
    upd.categories = Some(vec![]);
    let err = store
        .apply(WriteBatch::new(vec![Write::Update(upd)], 0))
        .await;
    assert_eq!(err.err().map(|e| e.status()), Some(404));

    // Live keys and catch-up scans see only live vectors.
    let live: Vec<u64> = store
        .live_keys()
        .await
        .unwrap()
        .iter()
        .map(|l| l.key)
        .collect();
    assert_eq!(live, vec![keys[1]]);
    let after = store.vectors_after(0, 10).await.unwrap();
    assert_eq!(after, vec![(keys[1], vec![0.0, 1.0])]);

    // Credits: an unaffordable batch is a 402 and writes nothing.
    let before = store.credits().await.unwrap_or(0);
    let d = record("dave", "dave", t(30));
    let err = store
        .apply(WriteBatch::new(
            vec![insert(&d, vec![1.0, 0.0])],
            before + 1,
        ))
        .await;
    assert_eq!(err.err().map(|e| e.status()), Some(402));
    assert_eq!(store.get(d.id).await.ok().flatten(), None);
    let out = store
        .apply(WriteBatch::new(vec![insert(&d, vec![1.0, 0.0])], 3))
        .await
        .ok();
    assert_eq!(out.map(|o| o.credits_remaining), Some(before - 3));
    assert_eq!(store.credits().await.ok(), Some(before - 3));

    // Bulk delete by filter deletes exactly the matches.
    let e1 = record("eve one", "eve", t(40));
    let e2 = record("eve two", "eve", t(41));
    apply(
        store,
        vec![insert(&e1, vec![1.0, 0.0]), insert(&e2, vec![1.0, 0.0])],
    )
    .await
    .ok();
    let out = store
        .apply(WriteBatch::new(
            vec![Write::DeleteWhere {
                filter: Filter::user("eve"),
                at: t(42),
            }],
            0,
        ))
        .await
        .ok();
    let mut gone: Vec<Uuid> = out
        .map(|o| o.changes.iter().map(|c| c.record.id).collect())
        .unwrap();
    gone.sort();
    let mut want = vec![e1.id, e2.id];
    want.sort();
    assert_eq!(gone, want);
    assert_eq!(
        store.get(d.id).await.ok().flatten().map(|r| r.id),
        Some(d.id)
    );

    // Keyword search: live memories with a query word, best BM25 first, filtered, limited.
    let k1 = record("green tea with green mint", "kim", t(50));
    let k2 = record("tea", "kim", t(51));
    let k3 = record("coffee beans", "kim", t(52));
    let k4 = record("green tea for lee", "lee", t(53));
    apply(
        store,
        vec![
            insert(&k1, vec![1.0, 0.0]),
            insert(&k2, vec![1.0, 0.0]),
            insert(&k3, vec![1.0, 0.0]),
            insert(&k4, vec![1.0, 0.0]),
        ],
    )
    .await
    .unwrap();
    let kim_keys = store
        .matching_keys(&Filter::user("kim"), t(60), false)
        .await
        .unwrap();
    let hits = store
        .keyword_search("Green TEA?", &Filter::user("kim"), t(60), false, 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert_eq!(
        hits[0].0, kim_keys[0],
        "the text with both words, twice, ranks first"
    );
    assert!(hits.iter().all(|(_, score)| *score > 0.0) && hits[0].1 > hits[1].1);
    assert_eq!(
        store
            .keyword_search("green tea", &Filter::all(), t(60), false, 1)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(store
        .keyword_search("", &Filter::all(), t(60), false, 10)
        .await
        .unwrap()
        .is_empty());
    apply(
        store,
        vec![Write::Delete {
            id: k1.id,
            at: t(61),
            input: Vec::new(),
        }],
    )
    .await
    .unwrap();
    let hits = store
        .keyword_search("green", &Filter::user("kim"), t(62), false, 10)
        .await
        .unwrap();
    assert!(
        hits.is_empty(),
        "deleted memories are not keyword hits: {hits:?}"
    );

    // Meta.
    assert_eq!(store.meta("k").await.ok().flatten(), None);
    store.set_meta("k", "v1").await.ok();
    store.set_meta("k", "v2").await.ok();
    assert_eq!(store.meta("k").await.ok().flatten().as_deref(), Some("v2"));
}

async fn pagination_and_expiry(store: &dyn Store) {
    let mut writes = Vec::new();
    let mut ids = Vec::new();
    for i in 0..25 {
        let mut r = record(&format!("fact {i}"), "pat", t(i));
        if i % 5 == 0 {
            r.expiration_date = Some(t(100));
        }
        ids.push(r.id);
        writes.push(insert(&r, vec![1.0, i as f32]));
    }
    apply(store, writes).await.ok();

    // Newest first, pages of 7, count over all pages; stable when rows arrive mid-way.
    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let mut q = ListQuery::new(Filter::user("pat"), t(50), 7);
        q.before = cursor;
        let page = store.list(q).await.ok();
        let Some(page) = page else { break };
        assert_eq!(
            page.count,
            if pages == 0 { 25 } else { 26 },
            "count covers every page"
        );
        seen.extend(page.records.iter().map(|r| r.id));
        pages += 1;
        if pages == 1 {
            let late = record("late fact", "pat", t(60));
            apply(store, vec![insert(&late, vec![1.0, 0.0])]).await.ok();
        }
        match page.next {
            Some(n) => cursor = Some(n),
            None => break,
        }
    }
    ids.reverse();
    assert_eq!(
        seen, ids,
        "every row once, newest first, none shifted by the late insert"
    );

    // Expired rows are hidden at `now` unless asked for.
    let at_200 = all(store, Filter::user("pat"), t(200)).await;
    assert_eq!(at_200.len(), 26 - 5);
    let mut q = ListQuery::new(Filter::user("pat"), t(200), 1000);
    q.include_expired = true;
    assert_eq!(store.list(q).await.map(|p| p.records.len()).ok(), Some(26));

    // Matching keys: live, unexpired (unless asked), ascending.
    let keys = store
        .matching_keys(&Filter::user("pat"), t(50), false)
        .await
        .unwrap();
    assert_eq!(keys.len(), 26);
    assert!(keys.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(
        store
            .matching_keys(&Filter::user("pat"), t(200), false)
            .await
            .unwrap()
            .len(),
        21
    );
    assert_eq!(
        store
            .matching_keys(&Filter::user("pat"), t(200), true)
            .await
            .unwrap()
            .len(),
        26
    );
    assert!(store
        .matching_keys(&Filter::user("nobody"), t(0), true)
        .await
        .unwrap()
        .is_empty());
}

async fn sqlite_file() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("conformance.db")).unwrap();
    (dir, store)
}

#[tokio::test]
async fn sqlite_file_conforms() {
    let (_dir, store) = sqlite_file().await;
    conformance(&store).await;
    let (_dir, store) = sqlite_file().await;
    pagination_and_expiry(&store).await;
}

#[tokio::test]
async fn sqlite_in_memory_conforms() {
    let store = SqliteStore::in_memory().unwrap();
    conformance(&store).await;
    let store = SqliteStore::in_memory().unwrap();
    pagination_and_expiry(&store).await;
}

#[tokio::test]
async fn mem_store_conforms() {
    conformance(&MemStore::new()).await;
    pagination_and_expiry(&MemStore::new()).await;
}

#[tokio::test]
async fn sqlite_file_survives_reopen_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reopen.db");
    let mut r = record(
        "ünïcödé and 'quotes' -- ; DROP TABLE memories;",
        "o'brien",
        t(5),
    );
    r.metadata = json!({"n": 1.5, "deep": {"list": [1, "two", null, true]}, "k;ey": "v\"al"})
        .as_object()
        .cloned()
        .unwrap();
    r.categories = vec!["a".into(), "b c".into()];
    r.expiration_date = Some(t(1_000_000));
    r.owners.agent_id = Some("agent".into());
    r.owners.run_id = Some("run-1".into());
    {
        let store = SqliteStore::open(&path).unwrap();
        apply(&store, vec![insert(&r, vec![0.25, -0.5, 1e-7])])
            .await
            .ok();
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.get(r.id).await.ok().flatten(), Some(r.clone()));
    assert_eq!(
        store.vectors_after(0, 1).await.ok().map(|v| v[0].1.clone()),
        Some(vec![0.25, -0.5, 1e-7])
    );
    let h = store.history(r.id).await.unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].metadata, r.metadata);
}

// ---- The SQL compilation of filters agrees with the reference evaluator. ----

fn arb_record() -> impl Strategy<Value = MemoryRecord> {
    let owner = prop::option::of(prop::sample::select(vec!["a", "b", "Ab", "ç"]));
    let meta_value = prop_oneof![
        Just(Value::Null),
        (-3i64..3).prop_map(|n| json!(n)),
        (-3.0f64..3.0).prop_map(|f| json!(f)),
        prop::sample::select(vec!["x", "X y", "2024-01-01", "ÉTÉ"]).prop_map(|s| json!(s)),
        Just(json!(["x", 1])),
        Just(json!(true)),
        Just(json!({"k": 1})),
    ];
    (
        owner.clone(),
        owner,
        prop::collection::vec(prop::sample::select(vec!["food", "travel", "Work"]), 0..3),
        prop::option::of(meta_value.clone()),
        prop::option::of(meta_value),
        0i64..4,
        prop::option::of(0i64..4),
        prop::sample::select(vec!["Pizza night", "tax form", "ünï text"]),
    )
        .prop_map(|(user, agent, cats, m1, m2, day, exp, text)| {
            let mut r = record(text, "", t(day * 86_400));
            r.owners.user_id = user.map(str::to_owned);
            r.owners.agent_id = agent.map(str::to_owned);
            r.categories = cats.into_iter().map(str::to_owned).collect();
            r.categories.dedup();
            if let Some(v) = m1 {
                r.metadata.insert("m".into(), v);
            }
            if let Some(v) = m2 {
                r.metadata.insert("nested".into(), json!({"v": v}));
            }
            r.expiration_date = exp.map(|d| t(d * 86_400 + 3600));
            r
        })
}

fn arb_condition() -> impl Strategy<Value = Value> {
    let scalar = prop_oneof![
        (-3i64..3).prop_map(|n| json!(n)),
        Just(json!(1.0)),
        prop::sample::select(vec!["x", "X", "a", "2024", "été"]).prop_map(|s| json!(s)),
        Just(json!(true)),
    ];
    let op = prop::sample::select(vec![
        "eq",
        "ne",
        "gt",
        "gte",
        "lt",
        "lte",
        "contains",
        "icontains",
    ]);
    let day = (0i64..4).prop_map(|d| {
        let at = t(d * 86_400);
        json!(at.format("%Y-%m-%d").to_string())
    });
    prop_oneof![
        prop::sample::select(vec!["a", "b", "Ab"]).prop_map(|u| json!({"user_id": u})),
        Just(json!({"agent_id": "*"})),
        Just(json!({"user_id": {"in": ["a", "ç"]}})),
        Just(json!({"agent_id": {"nin": ["a"]}})),
        Just(json!({"user_id": {"icontains": "A"}})),
        Just(json!({"user_id": {"ne": "a"}})),
        prop::sample::select(vec!["food", "work", "Work"]).prop_map(|c| json!({"categories": c})),
        Just(json!({"categories": {"nin": ["food", "travel"]}})),
        Just(json!({"categories": {"icontains": "WOR"}})),
        Just(json!({"categories": "*"})),
        Just(json!({"keywords": {"icontains": "PIZZA"}})),
        Just(json!({"keywords": {"contains": "ünï"}})),
        (
            prop::sample::select(vec!["eq", "ne", "gt", "gte", "lt", "lte"]),
            day.clone()
        )
            .prop_map(|(op, d)| json!({"created_at": {op: d}})),
        (prop::sample::select(vec!["gt", "lte", "ne"]), day)
            .prop_map(|(op, d)| json!({"expiration_date": {op: d}})),
        Just(json!({"expiration_date": "*"})),
        (op.clone(), scalar.clone()).prop_map(|(op, v)| {
            if op == "icontains" {
                json!({"metadata.m": {op: "x"}})
            } else {
                json!({"metadata.m": {op: v}})
            }
        }),
        (op, scalar.clone()).prop_map(|(op, v)| {
            if op == "icontains" {
                json!({"metadata.nested.v": {op: "É"}})
            } else {
                json!({"metadata.nested.v": {op: v}})
            }
        }),
        Just(json!({"metadata.m": "*"})),
        prop::collection::vec(scalar, 0..3).prop_map(|vs| json!({"metadata.m": {"in": vs}})),
        Just(json!({"metadata": {"m": ["x", 1]}})),
    ]
}

fn arb_filter() -> impl Strategy<Value = Value> {
    arb_condition().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"AND": v})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"OR": v})),
            inner.prop_map(|v| json!({"NOT": v})),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn sqlite_filters_match_the_reference_semantics(
        records in prop::collection::vec(arb_record(), 1..12),
        filters in prop::collection::vec(arb_filter(), 1..8),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let Ok(runtime) = runtime else { return Err(TestCaseError::fail("runtime")) };
        runtime.block_on(async {
            let store = Arc::new(SqliteStore::in_memory().unwrap());
            let writes = records.iter().map(|r| insert(r, vec![1.0])).collect();
            apply(&*store, writes).await.unwrap();
            let now = t(2 * 86_400);
            for json in &filters {
                let filter = Filter::from_json(json).unwrap_or_else(|e| panic!("{json}: {e}"));
                let mut want: Vec<Uuid> = records
                    .iter()
                    .filter(|r| !r.is_expired_at(now) && filter.matches(r))
                    .map(|r| r.id)
                    .collect();
                let mut got: Vec<Uuid> = all(&*store, filter, now).await.iter().map(|r| r.id).collect();
                want.sort();
                got.sort();
                assert_eq!(got, want, "filter {json}");
            }
        });
    }
}

/// A keyword search that pins an owner is ranked outside SQLite, from the owner's rows and
/// cached word counts; without a pinned owner FTS5's `bm25()` ranks. Both must agree.
#[tokio::test]
async fn sqlite_keyword_ranking_within_an_owner_equals_fts5_bm25() {
    let (_dir, store) = sqlite_file().await;
    let users = ["kim", "o'brien \"x\"", "Zoë 🙂", "kim2", "bulk"];
    let words = [
        "tea",
        "green",
        "mint",
        "coffee",
        "Lisbon",
        "jazz",
        "hiking",
        "bread",
        "sourdough",
    ];
    let mut writes = Vec::new();
    for i in 0..120 {
        let text = format!(
            "{} and {} {} note {i}",
            words[i % words.len()],
            words[(i / 3) % words.len()],
            words[(i * 7) % words.len()]
        );
        let mut r = record(&text, users[i % users.len()], t(i as i64));
        if i % 5 == 0 {
            r.context = Some(format!("talking about {}", words[(i / 2) % words.len()]));
        }
        if i % 2 == 0 {
            r.owners.agent_id = Some("helper".into());
        }
        writes.push(insert(&r, vec![1.0, 0.0]));
    }
    // An owner with many memories and few matches: its rows are looked up one by one.
    for i in 0..400 {
        let text = if i % 50 == 0 {
            format!("green tea and jazz {i}")
        } else {
            format!("filler {i}")
        };
        writes.push(insert(&record(&text, "bulk", t(i)), vec![1.0, 0.0]));
    }
    apply(&store, writes).await.unwrap();

    let queries = [
        "green tea",
        "tea tea Lisbon?",
        "what about sourdough bread and jazz",
        "\"mint\" OR coffee*",
        "nothing matches this",
        "",
    ]
    .map(String::from);
    let mut ranked = 0;
    for user in users {
        // Several searches at once rank as each alone.
        for pinned in [Filter::user(user), Filter::Or(vec![Filter::user(user)])] {
            let many = store
                .keyword_search_many(&queries, &pinned, t(500), false, 100)
                .await
                .unwrap();
            assert_eq!(many.len(), queries.len());
            for (query, hits) in queries.iter().zip(many) {
                let alone = store
                    .keyword_search(
                        query,
                        &Filter::Or(vec![Filter::user(user)]),
                        t(500),
                        false,
                        100,
                    )
                    .await
                    .unwrap();
                assert_eq!(
                    hits.iter().map(|h| h.0).collect::<Vec<_>>(),
                    alone.iter().map(|h| h.0).collect::<Vec<_>>(),
                    "{user} / {query}"
                );
                for ((_, a), (_, b)) in hits.iter().zip(&alone) {
                    assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{a} vs {b}");
                }
            }
        }
        for query in &queries {
            for pinned in [
                Filter::user(user),
                Filter::user(user).and(Filter::agent("helper")),
            ] {
                // An OR of one filter admits the same rows but pins nothing.
                let unpinned = Filter::Or(vec![pinned.clone()]);
                let ours = store
                    .keyword_search(query, &pinned, t(500), false, 100)
                    .await
                    .unwrap();
                let sqlite = store
                    .keyword_search(query, &unpinned, t(500), false, 100)
                    .await
                    .unwrap();
                assert_eq!(
                    ours.iter().map(|h| h.0).collect::<Vec<_>>(),
                    sqlite.iter().map(|h| h.0).collect::<Vec<_>>(),
                    "{user} / {query}"
                );
                for ((_, a), (_, b)) in ours.iter().zip(&sqlite) {
                    assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{a} vs {b}");
                }
                let owned = all(&store, pinned.clone(), t(500)).await.len();
                assert!(ours.len() <= owned);
                ranked += ours.len();
            }
        }
    }
    assert!(ranked > 100, "the queries match: {ranked}");
    // Another user's words never leak into a pinned search.
    assert!(store
        .keyword_search("tea", &Filter::user("nobody"), t(500), false, 100)
        .await
        .unwrap()
        .is_empty());
}

/// A word in at least half of the memories weighs nothing in BM25; the SQLite store drops it
/// from a query that has other words once it is in 1,000 memories or more, and keeps it in
/// a query made only of such words.
#[tokio::test]
async fn sqlite_keyword_search_drops_words_most_memories_contain() {
    let (_dir, store) = sqlite_file().await;
    let writes = (0..960)
        .map(|i| insert(&record(&format!("tea {i}"), "lee", t(i)), vec![1.0, 0.0]))
        .collect();
    apply(&store, writes).await.unwrap();
    let writes = (0..40)
        .map(|i| {
            let text = if i % 10 == 0 {
                format!("tea with mint {i}")
            } else {
                format!("tea number {i}")
            };
            insert(&record(&text, "kim", t(i)), vec![1.0, 0.0])
        })
        .collect();
    apply(&store, writes).await.unwrap();
    for filter in [Filter::user("kim"), Filter::Or(vec![Filter::user("kim")])] {
        let hits = store
            .keyword_search("mint tea", &filter, t(100), false, 100)
            .await
            .unwrap();
        assert_eq!(hits.len(), 4, "only the memories with mint: {hits:?}");
        let hits = store
            .keyword_search("tea", &filter, t(100), false, 100)
            .await
            .unwrap();
        assert_eq!(hits.len(), 40, "a query of common words only keeps them");
    }
    // Below 1,000 memories with the word, it counts again (word counts are cached while the
    // store changes by less than 5%, so enough memories go for a recount).
    let deletes = all(&store, Filter::user("lee"), t(100)).await[..100]
        .iter()
        .map(|r| Write::Delete {
            id: r.id,
            at: t(100),
            input: Vec::new(),
        })
        .collect();
    apply(&store, deletes).await.unwrap();
    for filter in [Filter::user("kim"), Filter::Or(vec![Filter::user("kim")])] {
        let hits = store
            .keyword_search("mint tea", &filter, t(101), false, 100)
            .await
            .unwrap();
        assert_eq!(hits.len(), 40, "every memory with tea: {hits:?}");
        let hits = store
            .keyword_search("tea", &filter, t(100), false, 100)
            .await
            .unwrap();
        assert_eq!(hits.len(), 40, "a query of common words only keeps them");
    }
}
