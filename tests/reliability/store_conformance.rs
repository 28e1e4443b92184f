//! The store conformance suite (`memlane::store::conformance`, feature `test-util`) on
//! every store of the crate: the SQLite store on a file and in memory, two handles of one
//! SQLite file, and the in-memory reference store. Then what is SQLite's own: filters
//! compiled to SQL against the reference semantics, an exact round trip through a reopen,
//! and the keyword index dropping words most memories contain.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use memlane::filter::Filter;
use memlane::store::conformance::{record, t};
use memlane::store::{
    apply, conformance, KeywordQuery, KeywordScore, LogQuery, MemStore, NewMemory, Scan,
    SqliteStore, Store, VectorQuery, Write, WriteBatch,
};
use memlane::{MemoryRecord, Message};
use proptest::prelude::*;
use serde_json::{json, Value};
use uuid::Uuid;

fn insert(r: &MemoryRecord, v: Vec<f32>) -> Write {
    Write::Insert(NewMemory::new(r.clone(), v, vec![Message::user(&r.memory)]))
}

async fn write(store: &dyn Store, writes: Vec<Write>) {
    apply(store, WriteBatch::new(writes, 0)).await.unwrap();
}

/// The SQLite store's own keyword search for one query.
async fn keyword(
    store: &SqliteStore,
    query: &str,
    filter: &Filter,
    now: DateTime<Utc>,
) -> Vec<(u64, KeywordScore)> {
    let queries = [memlane::store::query_terms(query)];
    let index = store.keyword_index().unwrap();
    let mut hits = index
        .search(KeywordQuery {
            queries: &queries,
            filter,
            now,
            include_expired: false,
            limit: 100,
            min_rows: 0,
        })
        .await
        .unwrap();
    hits.pop().unwrap()
}

async fn all(store: &dyn Store, filter: Filter, now: DateTime<Utc>) -> Vec<MemoryRecord> {
    let page = store.scan(&Scan::new(filter, now, 10_000)).await.unwrap();
    page.rows.into_iter().map(|r| r.record).collect()
}

#[tokio::test]
async fn sqlite_file_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("conformance.db")).unwrap();
    conformance::run(&store).await;
}

#[tokio::test]
async fn sqlite_in_memory_conforms() {
    conformance::run(&SqliteStore::in_memory().unwrap()).await;
}

#[tokio::test]
async fn the_reference_store_conforms() {
    conformance::run(&MemStore::new()).await;
}

#[tokio::test]
async fn two_handles_of_one_sqlite_file_check_preconditions_in_the_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.db");
    let a = SqliteStore::open(&path).unwrap();
    let b = SqliteStore::open(&path).unwrap();
    conformance::run_two_handles(&a, &b).await;
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
        write(&store, vec![insert(&r, vec![0.25, -0.5, 1e-7])]).await;
    }
    let store = SqliteStore::open(&path).unwrap();
    let row = store.rows(&[r.id]).await.unwrap().pop().unwrap();
    assert_eq!(row.record, r);
    let vectors = store
        .vectors(VectorQuery::After { key: 0, limit: 1 })
        .await
        .unwrap();
    assert_eq!(vectors[0].vector, vec![0.25, -0.5, 1e-7]);
    let log = store.log(LogQuery::of(r.id)).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].1.metadata, r.metadata);
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
            write(&*store, writes).await;
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

#[cfg(feature = "postgres")]
proptest! {
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

    /// The same on PostgreSQL, where most of the filter is SQL and the rest (metadata,
    /// case-insensitive matching) is checked on the rows the SQL narrows down to. Each case
    /// is a project (a schema) of one database.
    #[test]
    fn postgres_filters_match_the_reference_semantics(
        records in prop::collection::vec(arb_record(), 1..12),
        filters in prop::collection::vec(arb_filter(), 1..8),
    ) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static CASE: AtomicUsize = AtomicUsize::new(0);
        static DATABASE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let Ok(runtime) = runtime else { return Err(TestCaseError::fail("runtime")) };
        runtime.block_on(async {
            let url = match DATABASE.get() {
                Some(url) => url.clone(),
                None => {
                    let url = crate::common::pg_database().await;
                    DATABASE.get_or_init(|| url).clone()
                }
            };
            let project = format!("filters_{}", CASE.fetch_add(1, Ordering::Relaxed));
            let store = memlane::store::PostgresStore::connect_project(&url, &project, 2)
                .await
                .unwrap();
            let writes = records.iter().map(|r| insert(r, vec![1.0])).collect();
            write(&store, writes).await;
            let now = t(2 * 86_400);
            for json in &filters {
                let filter = Filter::from_json(json).unwrap_or_else(|e| panic!("{json}: {e}"));
                let mut want: Vec<Uuid> = records
                    .iter()
                    .filter(|r| !r.is_expired_at(now) && filter.matches(r))
                    .map(|r| r.id)
                    .collect();
                let mut got: Vec<Uuid> = all(&store, filter, now).await.iter().map(|r| r.id).collect();
                want.sort();
                got.sort();
                assert_eq!(got, want, "filter {json}");
            }
        });
    }
}

/// A word in at least half of the memories weighs nothing in BM25; the SQLite store drops it
/// from a query that has other words once it is in 1,000 memories or more, and keeps it in
/// a query made only of such words.
#[tokio::test]
async fn sqlite_keyword_search_drops_words_most_memories_contain() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("common.db")).unwrap();
    let writes = (0..960)
        .map(|i| insert(&record(&format!("tea {i}"), "lee", t(i)), vec![1.0, 0.0]))
        .collect();
    write(&store, writes).await;
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
    write(&store, writes).await;
    for filter in [Filter::user("kim"), Filter::Or(vec![Filter::user("kim")])] {
        let hits = keyword(&store, "mint tea", &filter, t(100)).await;
        assert_eq!(hits.len(), 4, "only the memories with mint: {hits:?}");
        let hits = keyword(&store, "tea", &filter, t(100)).await;
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
            expect: None,
        })
        .collect();
    write(&store, deletes).await;
    for filter in [Filter::user("kim"), Filter::Or(vec![Filter::user("kim")])] {
        let hits = keyword(&store, "mint tea", &filter, t(101)).await;
        assert_eq!(hits.len(), 40, "every memory with tea: {hits:?}");
        let hits = keyword(&store, "tea", &filter, t(100)).await;
        assert_eq!(hits.len(), 40, "a query of common words only keeps them");
    }
}
