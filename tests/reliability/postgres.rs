//! The PostgreSQL store (feature `postgres`) against a real server with pgvector, started
//! by `scripts/postgres.sh` (or the one `MEMLANE_TEST_POSTGRES` names): the conformance
//! suite, keyword scores equal to SQLite's, two handles and two hosts' worth of pools, the
//! change log under concurrent writers with a live reader, atomic credits, migrations
//! racing, filtered vector search that keeps its recall, and the whole `Memory` on it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use memlane::filter::Filter;
use memlane::ops::events::EventKind;
use memlane::store::conformance::{self, record, t};
use memlane::store::{
    apply, Among, CandidateSource, KeywordQuery, KeywordScore, LogQuery, NewMemory, PostgresStore,
    Scan, SqliteStore, Store, Write, WriteBatch,
};
use memlane::{HashEmbedder, Memory, Message, SearchMode};
use uuid::Uuid;

use crate::common::{pg_database, pg_memory, pg_open, Rng};
use memlane::ErrorKind;

const DIM: usize = 32;

async fn store(url: &str) -> PostgresStore {
    PostgresStore::connect(url)
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

fn insert(text: &str, user: &str, vector: Vec<f32>) -> Write {
    let r = record(text, user, t(0));
    Write::Insert(NewMemory::new(r, vector, vec![Message::user(text)]))
}

fn unit(rng: &mut Rng, dim: usize) -> Vec<f32> {
    let v: Vec<f32> = (0..dim)
        .map(|_| (rng.below(2001) as f32 - 1000.0) / 1000.0)
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.into_iter().map(|x| x / norm).collect()
}

#[tokio::test]
async fn postgres_conforms() {
    let url = pg_database().await;
    conformance::run(&store(&url).await).await;
}

#[tokio::test]
async fn two_postgres_pools_check_preconditions_in_the_transaction() {
    let url = pg_database().await;
    let (a, b) = (store(&url).await, store(&url).await);
    conformance::run_two_handles(&a, &b).await;
}

#[tokio::test]
async fn projects_are_isolated_and_migrations_race_safely() {
    let url = pg_database().await;
    // Four processes' worth of pools opening a new database at once: one migrates, the
    // others wait and find the schema current.
    let opened = futures_util::future::join_all(
        (0..4).map(|_| PostgresStore::connect_project(&url, "acme", 2)),
    )
    .await;
    for store in &opened {
        assert_eq!(store.as_ref().unwrap().schema_version().await.unwrap(), 2);
    }
    let acme = opened.into_iter().next().unwrap().unwrap();
    let other = PostgresStore::connect_project(&url, "other", 2)
        .await
        .unwrap();
    apply(
        &acme,
        WriteBatch::new(vec![insert("acme's secret", "u", vec![1.0, 0.0])], 0),
    )
    .await
    .unwrap();
    let everything = Scan::new(Filter::all(), t(10), 100);
    assert_eq!(acme.scan(&everything).await.unwrap().count, 1);
    assert_eq!(other.scan(&everything).await.unwrap().count, 0);
    assert!(other.log(LogQuery::after(0, 10)).await.unwrap().is_empty());
    // A project id that cannot name a schema is refused, not quoted into SQL.
    let bad = PostgresStore::connect_project(&url, "x\"; DROP SCHEMA", 1).await;
    assert_eq!(bad.err().map(|e| e.status()), Some(400));
    // A schema a newer memlane migrated is refused, and left as it is.
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute("INSERT INTO memlane_other.schema_version (version) VALUES (99)")
        .await
        .unwrap();
    let newer = PostgresStore::connect_project(&url, "other", 1).await;
    let Err(e) = newer else {
        panic!("a newer schema is opened")
    };
    assert_eq!((e.status(), e.kind()), (409, ErrorKind::Conflict), "{e}");
    assert!(e.detail().contains("newer than this build"), "{e}");
    let versions: i64 = client
        .query_one("SELECT COUNT(*) FROM memlane_other.schema_version", &[])
        .await
        .unwrap()
        .get(0);
    // One row per migration this build ran, and the newer one.
    assert_eq!(versions, 3, "the refused open changed the schema");
}

/// The keyword scores equal the SQLite store's on the same memories (the calibration of
/// scores holds for both stores).
#[tokio::test]
async fn keyword_scores_equal_sqlite() {
    let url = pg_database().await;
    let pg = store(&url).await;
    let lite = SqliteStore::in_memory().unwrap();
    let texts = [
        ("I moved to Valencia last month", "carlos"),
        ("Carlos lives in Madrid and loves the sea", "carlos"),
        ("My car is a blue Toyota Corolla", "ana"),
        ("I'm vegetarian and I can't stand coriander", "ana"),
        ("Valencia has the best paella, Valencia!", "ana"),
        ("the sea, the sea, the sea", "bo"),
    ];
    let mut records = Vec::new();
    for (i, (text, user)) in texts.iter().enumerate() {
        let mut r = record(text, user, t(i as i64));
        if i == 1 {
            r.context = Some("where does Carlos live?".into());
        }
        records.push(r);
    }
    for s in [&pg as &dyn Store, &lite] {
        let writes = records
            .iter()
            .map(|r| {
                Write::Insert(NewMemory::new(
                    r.clone(),
                    vec![1.0, 0.0],
                    vec![Message::user(&r.memory)],
                ))
            })
            .collect();
        apply(s, WriteBatch::new(writes, 0)).await.unwrap();
    }
    // A deletion changes the statistics on both sides.
    let gone = records[5].id;
    for s in [&pg as &dyn Store, &lite] {
        let version = s.rows(&[gone]).await.unwrap()[0].version;
        s.commit(memlane::store::Transaction::new(
            vec![memlane::store::RowWrite::Delete {
                id: gone,
                at: t(50),
                expect: version,
            }],
            0,
        ))
        .await
        .unwrap();
    }
    let queries: Vec<Vec<String>> = [
        "where does carlos live",
        "Valencia",
        "sea",
        "blue car",
        "what food should I avoid",
    ]
    .iter()
    .map(|q| memlane::store::query_terms(q))
    .collect();
    let mut compared = 0;
    // Both paths: the filter's rows read by its indexes (default), and the terms' index
    // (a filter admitting more than one memory counts as wide).
    for (pg, filter) in [pg.clone(), pg.with_exact_search_max(1)]
        .into_iter()
        .flat_map(|pg| [(pg.clone(), Filter::all()), (pg, Filter::user("ana"))])
    {
        let q = KeywordQuery {
            queries: &queries,
            filter: &filter,
            now: t(100),
            include_expired: false,
            limit: 10,
            min_rows: 0,
        };
        let a = pg.keyword_index().unwrap().search(q).await.unwrap();
        let b = lite.keyword_index().unwrap().search(q).await.unwrap();
        assert_eq!(a.len(), b.len());
        for (a, b) in a.iter().zip(&b) {
            let keys = |h: &Vec<(u64, KeywordScore)>| h.iter().map(|x| x.0).collect::<Vec<_>>();
            assert_eq!(keys(a), keys(b), "{filter:?}");
            for (x, y) in a.iter().zip(b) {
                assert!(conformance::same_score(&x.1, &y.1), "{x:?} vs {y:?}");
                compared += 1;
            }
        }
    }
    assert!(compared >= 12, "only {compared} scores compared");
}

/// Writers on several pools commit at once while a reader follows the change log from
/// its cursor: it sees every change exactly once, in cursor order, with no gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_change_log_never_skips_or_repeats_under_concurrent_writers() {
    let url = pg_database().await;
    let reader = store(&url).await;
    const WRITERS: usize = 4;
    const EACH: usize = 40;
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let s = PostgresStore::connect_project(&url, "default", 2)
            .await
            .unwrap();
        tasks.push(tokio::spawn(async move {
            for i in 0..EACH {
                let text = format!("writer {w} fact {i}");
                apply(
                    &s,
                    WriteBatch::new(vec![insert(&text, "u", vec![1.0, 0.0])], 0),
                )
                .await
                .unwrap();
            }
        }));
    }
    let mut seen = Vec::new();
    let mut cursor = 0;
    let total = WRITERS * EACH;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while seen.len() < total {
        assert!(
            std::time::Instant::now() < deadline,
            "saw {} of {total}",
            seen.len()
        );
        let writers_done = tasks.iter().all(|t| t.is_finished());
        let before = seen.len();
        for (c, record) in reader.log(LogQuery::after(cursor, 7)).await.unwrap() {
            assert_eq!(c, cursor + 1, "a gap or a repeat after cursor {cursor}");
            cursor = c;
            seen.push(record.memory_id);
        }
        // Writers that stopped (or failed) early leave the log short: stop waiting.
        if writers_done && seen.len() == before {
            break;
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(seen.len(), total);
    assert!(reader
        .log(LogQuery::after(cursor, 10))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), total);
}

/// A live subscriber — an event stream on one handle, following the log as it grows — while
/// four other handles add (two memories per commit) and delete at once: every change arrives
/// exactly once, cursors one apart, and each writer's changes in the order it made them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_live_event_stream_sees_every_change_of_concurrent_writers_once_in_order() {
    use futures_util::StreamExt;
    let url = pg_database().await;
    let subscriber = pg_open(&url, DIM).await;
    let start = subscriber.store().counters().await.unwrap().last_cursor;
    let mut events = Box::pin(subscriber.events(start));
    const WRITERS: usize = 4;
    const EACH: usize = 20;
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let memory = pg_open(&url, DIM).await;
        tasks.push(tokio::spawn(async move {
            // This writer's changes, in the order it made them.
            let mut changes: Vec<(Uuid, EventKind)> = Vec::new();
            for i in 0..EACH {
                let added = memory
                    .add(vec![
                        Message::user(format!("writer {w} fact {i}")),
                        Message::user(format!("writer {w} detail {i}")),
                    ])
                    .user(format!("w{w}"))
                    .infer(false)
                    .await
                    .unwrap();
                changes.extend(added.results.iter().map(|m| (m.id, EventKind::MemoryAdd)));
                if i % 4 == 3 {
                    let gone = added.results[1].id;
                    memory.delete(gone).await.unwrap();
                    changes.push((gone, EventKind::MemoryDelete));
                }
            }
            changes
        }));
    }
    let total = WRITERS * (EACH * 2 + EACH / 4);
    let mut seen: Vec<(Uuid, EventKind)> = Vec::new();
    let mut cursor = start;
    while seen.len() < total {
        let event = tokio::time::timeout(std::time::Duration::from_secs(60), events.next())
            .await
            .unwrap_or_else(|_| panic!("the stream stalled after {} of {total}", seen.len()))
            .expect("the stream ended")
            .unwrap();
        assert_eq!(
            event.cursor,
            cursor + 1,
            "a gap or a repeat after cursor {cursor}"
        );
        cursor = event.cursor;
        seen.push((event.memory_id.unwrap(), event.kind));
    }
    let mut made = Vec::new();
    for task in tasks {
        made.push(task.await.unwrap());
    }
    assert_eq!(made.iter().map(Vec::len).sum::<usize>(), total);
    for changes in &made {
        let mine: Vec<&(Uuid, EventKind)> = seen.iter().filter(|c| changes.contains(c)).collect();
        assert_eq!(
            mine,
            changes.iter().collect::<Vec<_>>(),
            "a writer's changes out of order"
        );
    }
    // Nothing more arrives: the stream waits.
    let more = tokio::time::timeout(std::time::Duration::from_millis(500), events.next()).await;
    assert!(more.is_err(), "an extra event: {more:?}");
}

/// Many charges at once never spend more than the balance.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn credits_are_never_overspent_by_concurrent_writers() {
    let url = pg_database().await;
    let s = store(&url).await;
    let balance = s.counters().await.unwrap().credits;
    // Leave 25 credits; 8 writers try 10 charges of 1 each.
    let spend = balance - 25;
    apply(&s, WriteBatch::new(vec![], spend)).await.unwrap();
    let mut tasks = Vec::new();
    for w in 0..8 {
        let s = PostgresStore::connect_project(&url, "default", 1)
            .await
            .unwrap();
        tasks.push(tokio::spawn(async move {
            let mut paid = 0;
            for i in 0..10 {
                let text = format!("{w}-{i}");
                let batch = WriteBatch::new(vec![insert(&text, "u", vec![0.0, 1.0])], 1);
                match apply(&s, batch).await {
                    Ok(_) => paid += 1,
                    Err(e) => assert_eq!(e.status(), 402, "{e}"),
                }
            }
            paid
        }));
    }
    let mut paid = 0;
    for task in tasks {
        paid += task.await.unwrap();
    }
    assert_eq!(paid, 25);
    assert_eq!(s.counters().await.unwrap().credits, 0);
    let rows = s
        .scan(&Scan::new(Filter::all(), t(10), 1000))
        .await
        .unwrap();
    assert_eq!(rows.count, 25, "a refused charge wrote its memory");
}

/// Filtered vector search keeps its recall whichever path ranks it (exact for a small set,
/// the HNSW index with a deep beam and a fallback for a large one), for every kind of
/// filter — owners, metadata, categories, dates — at 0.1%, 1% and 10% of the memories.
#[tokio::test]
async fn filtered_vector_search_keeps_recall_at_every_selectivity() {
    let url = pg_database().await;
    const N: usize = 3_000;
    let base = store(&url).await;
    let mut rng = Rng(7);
    let mut records = Vec::new();
    let mut writes = Vec::new();
    for i in 0..N {
        let v = unit(&mut rng, DIM);
        // Memory i: user u{i % 1000} (0.1%), app a{i % 100} (1%), agent g{i % 10} (10%);
        // metadata n = i; categories c{i % 1000}, d{i % 100}, e{i % 10}; created i minutes in.
        let mut r = record(
            &format!("memory {i}"),
            &format!("u{}", i % 1000),
            t(i as i64 * 60),
        );
        r.owners.app_id = Some(format!("a{}", i % 100));
        r.owners.agent_id = Some(format!("g{}", i % 10));
        r.metadata.insert("n".into(), serde_json::json!(i));
        r.categories = vec![
            format!("c{}", i % 1000),
            format!("d{}", i % 100),
            format!("e{}", i % 10),
        ];
        writes.push(Write::Insert(NewMemory::new(
            r.clone(),
            v.clone(),
            vec![Message::user(r.memory.clone())],
        )));
        records.push((r, v));
    }
    apply(&base, WriteBatch::new(writes, 0)).await.unwrap();
    let ids: Vec<Uuid> = records.iter().map(|(r, _)| r.id).collect();
    let by_id: HashMap<Uuid, u64> = base
        .rows(&ids)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.record.id, r.key))
        .collect();
    assert_eq!(by_id.len(), N);
    let exact_top = |query: &[f32], filter: &Filter, k: usize| -> Vec<u64> {
        let mut scored: Vec<(u64, f32)> = records
            .iter()
            .filter(|(r, _)| filter.matches(r))
            .map(|(r, v)| (by_id[&r.id], v.iter().zip(query).map(|(a, b)| a * b).sum()))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.into_iter().take(k).map(|x| x.0).collect()
    };
    let minute = |i: usize| t(i as i64 * 60).to_rfc3339();
    // (kind, memories admitted, filter): each kind at 3, 30 and 300 of the 3,000.
    let mut cases: Vec<(&str, usize, serde_json::Value)> = Vec::new();
    for (share, size) in [(1000, 3), (100, 30), (10, 300)] {
        let g = 7 % share;
        let owner = match share {
            1000 => serde_json::json!({"user_id": format!("u{g}")}),
            100 => serde_json::json!({"app_id": format!("a{g}")}),
            _ => serde_json::json!({"agent_id": format!("g{g}")}),
        };
        let category = match share {
            1000 => format!("c{g}"),
            100 => format!("d{g}"),
            _ => format!("e{g}"),
        };
        let from = 1_234;
        cases.push(("owner", size, owner));
        cases.push((
            "metadata",
            size,
            serde_json::json!({"metadata.n": {"gte": from, "lt": from + size}}),
        ));
        cases.push((
            "category",
            size,
            serde_json::json!({"categories": category}),
        ));
        cases.push((
            "date",
            size,
            serde_json::json!({"AND": [{"created_at": {"gte": minute(from)}},
                                       {"created_at": {"lt": minute(from + size)}}]}),
        ));
    }
    let mut checked = 0;
    // Every path: exact (default), and the HNSW index for anything over 50 memories.
    for exact_max in [20_000, 50] {
        let s = base.clone().with_exact_search_max(exact_max);
        for (kind, size, json) in &cases {
            let filter = Filter::from_json(json).unwrap();
            assert_eq!(
                records.iter().filter(|(r, _)| filter.matches(r)).count(),
                *size,
                "{kind} filter {json}"
            );
            let (mut found, mut wanted) = (0, 0);
            for _ in 0..10 {
                let q = unit(&mut rng, DIM);
                let hits = s
                    .nearest(
                        vec![q.clone()],
                        Among::new(&filter, t(N as i64 * 60), false),
                        10,
                    )
                    .await
                    .unwrap()
                    .pop()
                    .unwrap();
                let truth = exact_top(&q, &filter, 10);
                assert_eq!(hits.len(), truth.len(), "{kind} {json}");
                wanted += truth.len();
                found += hits.iter().filter(|h| truth.contains(&h.0)).count();
                checked += 1;
            }
            let recall = found as f64 / wanted as f64;
            let floor = if exact_max == 20_000 { 1.0 } else { 0.95 };
            assert!(
                recall >= floor,
                "recall {recall} for the {kind} filter {json} ({size} of {N}, exact up to {exact_max})"
            );
        }
    }
    assert_eq!(checked, 2 * 12 * 10);
}

/// The whole engine on PostgreSQL: two handles (two hosts' worth) see each other's adds,
/// updates and deletes at once, in every search mode, with no index to refresh.
#[tokio::test]
async fn two_memories_on_one_database_see_each_others_writes_at_once() {
    let (a, url) = pg_memory(DIM).await;
    let b = pg_open(&url, DIM).await;
    let id = crate::common::add(&a, "alice", "alice keeps bees in her garden").await;
    for mode in [SearchMode::Vector, SearchMode::Keyword, SearchMode::Hybrid] {
        let hits = b
            .search("bees garden")
            .user("alice")
            .mode(mode)
            .await
            .unwrap()
            .results;
        assert_eq!(hits.first().map(|h| h.record.id), Some(id), "{mode:?}");
    }
    b.update(id).text("alice keeps goats now").await.unwrap();
    let got = a.get(id).await.unwrap();
    assert_eq!(got.memory, "alice keeps goats now");
    let hits = a
        .search("goats")
        .user("alice")
        .mode(SearchMode::Keyword)
        .await
        .unwrap()
        .results;
    assert_eq!(hits.len(), 1);
    let history = a.history(id).await.unwrap();
    assert_eq!(history.len(), 2);
    a.delete(id).await.unwrap();
    for mode in [SearchMode::Vector, SearchMode::Keyword, SearchMode::Hybrid] {
        let hits = b
            .search("alice goats")
            .user("alice")
            .mode(mode)
            .await
            .unwrap()
            .results;
        assert!(hits.is_empty(), "{mode:?} still finds a deleted memory");
    }
    // The same database opened with another embedding model is refused (see reembed).
    let other = Memory::builder()
        .postgres(&url)
        .embedder(Arc::new(HashEmbedder::new(DIM * 2)))
        .build()
        .await;
    assert_eq!(other.err().map(|e| e.status()), Some(409));
}

/// Consolidation on PostgreSQL finds duplicates through the database's search.
#[tokio::test]
async fn consolidation_finds_duplicates_through_the_database() {
    let (memory, _url) = pg_memory(DIM).await;
    for text in [
        "alice likes green tea",
        "alice likes green tea",
        "bob plays chess",
    ] {
        crate::common::add(&memory, "alice", text).await;
    }
    let result = memory
        .consolidate()
        .user("alice")
        .dry_run(true)
        .await
        .unwrap();
    assert_eq!(result.examined, 3);
    assert_eq!(result.clusters.len(), 1, "{:?}", result.clusters);
    assert_eq!(result.clusters[0].merged.len(), 1);
}

#[tokio::test]
async fn a_malformed_connection_string_is_a_400_and_an_unreachable_server_a_503() {
    let bad = PostgresStore::connect("host=/nonexistent port=notaport").await;
    assert_eq!(bad.err().map(|e| e.status()), Some(400));
    let gone = Uuid::new_v4().simple();
    let unreachable = PostgresStore::connect(&format!("host=/tmp/{gone} user=x dbname=x")).await;
    let e = unreachable.err().unwrap();
    assert_eq!((e.status(), e.kind()), (503, ErrorKind::Unreachable), "{e}");
    assert!(e.is_transient());
}

/// Every commit, on any pool or host, wakes the listeners of the project's channel; an
/// event stream on another handle receives the change.
#[tokio::test]
async fn commits_on_another_pool_wake_the_listeners() {
    let url = pg_database().await;
    let (a, b) = (store(&url).await, store(&url).await);
    let signal = a
        .commit_signal()
        .expect("a PostgreSQL store has a commit signal");
    // The listener wakes once when it is listening.
    let listening = signal.notified();
    tokio::time::timeout(std::time::Duration::from_secs(30), listening)
        .await
        .expect("the listener connected");
    for i in 0..3 {
        let woken = signal.notified();
        let mut woken = std::pin::pin!(woken);
        woken.as_mut().enable();
        let text = format!("fact {i}");
        apply(
            &b,
            WriteBatch::new(vec![insert(&text, "u", vec![1.0, 0.0])], 0),
        )
        .await
        .unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(30), woken)
            .await
            .unwrap_or_else(|_| panic!("commit {i} did not wake the other pool's listener"));
    }
    // Through the engine: a stream on one handle receives another handle's add.
    let url = pg_database().await;
    let (m1, m2) = (pg_open(&url, DIM).await, pg_open(&url, DIM).await);
    let cursor = m1.store().counters().await.unwrap().last_cursor;
    let mut events = Box::pin(m1.events(cursor));
    let id = crate::common::add(&m2, "alice", "alice rides a red bicycle").await;
    let event = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        futures_util::StreamExt::next(&mut events),
    )
    .await
    .unwrap()
    .unwrap()
    .unwrap();
    assert_eq!(event.memory_id, Some(id));
}

/// The server crashes mid-run, with adds of three memories in flight on four tasks and a
/// search running: calls fail with a retryable 503; once it is back, the same handle works
/// again; every acknowledged add is there, and every add is whole or absent — including
/// those whose answer was lost with the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_crash_mid_write_is_a_retryable_503_and_leaves_every_add_whole_or_absent() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    // A server of this test's own, since it is crashed.
    let dir = std::env::temp_dir().join(format!("memlane-pg-{}", Uuid::new_v4().simple()));
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/postgres.sh");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&script)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "postgres.sh {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let dir_arg = dir.to_str().unwrap();
    let pid = std::process::id().to_string();
    let url = run(&["start", dir_arg, &pid]).trim().to_owned();
    let memory = pg_open(&url, DIM).await;
    let kept = crate::common::add(&memory, "alice", "alice speaks Finnish").await;
    const WRITERS: usize = 4;
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let (memory, stop, acked) = (memory.clone(), Arc::clone(&stop), Arc::clone(&acked));
        tasks.push(tokio::spawn(async move {
            // (add number, its ids) for every acknowledged add; the statuses of failures.
            let (mut done, mut failed) = (Vec::new(), Vec::new());
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let texts: Vec<Message> = (0..3)
                    .map(|j| Message::user(format!("add w{w}n{i} part {j}")))
                    .collect();
                match memory.add(texts).user("bob").infer(false).await {
                    Ok(r) => {
                        let ids: Vec<Uuid> = r.results.iter().map(|m| m.id).collect();
                        done.push((i, ids));
                        acked.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        assert!(e.is_transient(), "{e}");
                        failed.push(e.status());
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    }
                }
                i += 1;
            }
            (done, failed)
        }));
    }
    let wait_for = |n: usize| {
        let acked = Arc::clone(&acked);
        async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
            while acked.load(Ordering::Relaxed) < n {
                assert!(std::time::Instant::now() < deadline, "writers stalled");
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        }
    };
    wait_for(40).await;
    run(&["halt", dir_arg]);
    let at_crash = acked.load(Ordering::Relaxed);
    let search = memory.search("Finnish").user("alice").await.err().unwrap();
    assert_eq!(search.status(), 503, "{search}");
    assert!(search.is_transient());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    run(&["resume", dir_arg]);
    wait_for(at_crash + 40).await;
    stop.store(true, Ordering::Relaxed);
    let mut acknowledged = Vec::new();
    let mut failures = 0;
    for task in tasks {
        let (done, failed) = task.await.unwrap();
        assert!(failed.iter().all(|&s| s == 503), "{failed:?}");
        failures += failed.len();
        acknowledged.extend(done);
    }
    assert!(failures > 0, "no call failed: the crash missed the writers");
    // Every memory of bob's, by its add: each add is whole (three parts) or absent.
    let by_add = memories_by_add(&memory, "bob").await;
    for (add, ids) in &by_add {
        assert_eq!(ids.len(), 3, "{add} is stored in part");
    }
    for (_, ids) in &acknowledged {
        for id in ids {
            assert!(
                memory.get(*id).await.is_ok(),
                "an acknowledged memory is lost"
            );
        }
    }
    assert!(by_add.len() >= acknowledged.len());
    // Searches work again, in every mode.
    for mode in [SearchMode::Vector, SearchMode::Keyword, SearchMode::Hybrid] {
        let hits = memory
            .search("Finnish")
            .user("alice")
            .mode(mode)
            .await
            .unwrap()
            .results;
        assert_eq!(hits.first().map(|h| h.record.id), Some(kept), "{mode:?}");
    }
    run(&["stop", dir_arg]);
}

/// Every memory of `user`, grouped by the add that stored it: the memories are "<add> part
/// <j>", so each group of a whole add has all its parts.
async fn memories_by_add(memory: &Memory, user: &str) -> HashMap<String, Vec<Uuid>> {
    let mut by_add: HashMap<String, Vec<Uuid>> = HashMap::new();
    let mut cursor = None;
    loop {
        let mut list = memory.list().user(user).page_size(1000);
        if let Some(c) = cursor.take() {
            list = list.cursor(c);
        }
        let page = list.await.unwrap();
        for r in page.results {
            let add = r.memory.rsplit_once(" part ").unwrap().0.to_owned();
            by_add.entry(add).or_default().push(r.id);
        }
        match page.pagination.next_cursor {
            Some(c) => cursor = Some(c),
            None => return by_add,
        }
    }
}

// ---- Several OS processes on one database. ----

const CHILD_URL: &str = "MEMLANE_PG_CHILD_URL";
const CHILD_TASK: &str = "MEMLANE_PG_CHILD_TASK";
/// Protocol lines of a child carry this; other lines are the test harness's.
const TAG: &str = "@memlane-pg@ ";

/// One writer's schedule on its own user: adds, updates and deletes, some refused for want
/// of credits (402, nothing written). Returns the user's memories as its acknowledged
/// operations left them, how many paid operations went through, and how many were refused.
async fn writer(memory: &Memory, task: usize, ops: usize) -> (HashMap<Uuid, String>, u64, u64) {
    let user = format!("writer-{task}");
    let mut rng = Rng(0xA076_1D64_78BD_642F ^ (task as u64 + 1));
    let (mut model, mut paid, mut refused) = (HashMap::new(), 0, 0);
    for op in 0..ops {
        let ids: Vec<Uuid> = model.keys().copied().collect();
        let roll = rng.below(20);
        let result = if roll < 12 || ids.is_empty() {
            let text = format!("writer {task} fact {op}");
            memory
                .add(text.as_str())
                .user(&user)
                .infer(false)
                .await
                .map(|out| {
                    model.insert(out.results[0].id, text);
                })
        } else if roll < 17 {
            let id = ids[rng.below(ids.len())];
            let text = format!("writer {task} fact {op} revised");
            memory.update(id).text(text.as_str()).await.map(|_| {
                model.insert(id, text);
            })
        } else {
            let id = ids[rng.below(ids.len())];
            memory.delete(id).await.unwrap();
            model.remove(&id);
            continue;
        };
        match result {
            Ok(()) => paid += 1,
            Err(e) if e.status() == 402 => refused += 1,
            Err(e) => panic!("writer {task}: {e}"),
        }
    }
    (model, paid, refused)
}

/// A writer in a process of its own, driven by the tests below through its environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by the PostgreSQL tests as a child process"]
async fn postgres_child() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let task: usize = std::env::var(CHILD_TASK).unwrap().parse().unwrap();
    let memory = pg_open(&url, DIM).await;
    if task == usize::MAX {
        // Adds of three memories until killed, reporting each acknowledged add: its tag
        // (unique to this process) and its ids.
        let me = std::process::id();
        for i in 0.. {
            let tag = format!("crash-p{me}n{i}");
            let added = memory
                .add(
                    (0..3)
                        .map(|j| Message::user(format!("{tag} part {j}")))
                        .collect::<Vec<_>>(),
                )
                .user("crash")
                .infer(false)
                .await
                .unwrap();
            let ids: Vec<String> = added.results.iter().map(|m| m.id.to_string()).collect();
            println!("{TAG}{tag} {}", ids.join(" "));
        }
    }
    let (model, paid, refused) = writer(&memory, task, 40).await;
    println!(
        "{TAG}{}",
        serde_json::json!({"model": model, "paid": paid, "refused": refused})
    );
}

fn child(url: &str, task: usize) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "postgres::postgres_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_URL, url)
        .env(CHILD_TASK, task.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Writers in three processes and this one share a balance too small for all of them:
/// credits are never overspent, every refused operation wrote nothing, each writer's user
/// holds what its acknowledged operations left, and the event log replays to the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writer_processes_never_overspend_and_replay_to_the_final_state() {
    let (memory, url) = pg_memory(DIM).await;
    const BALANCE: u64 = 60;
    let spend = memory.credits().await.unwrap() - BALANCE;
    apply(&**memory.store(), WriteBatch::new(vec![], spend))
        .await
        .unwrap();
    let children: Vec<_> = (1..4).map(|task| child(&url, task)).collect();
    let (own_model, own_paid, own_refused) = writer(&memory, 0, 40).await;
    let mut models = vec![own_model];
    let (mut paid, mut refused) = (own_paid, own_refused);
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "a writer process failed");
        let text = String::from_utf8(out.stdout).unwrap();
        let line = text
            .lines()
            .find_map(|l| l.split_once(TAG).map(|(_, r)| r.to_owned()))
            .expect("the child reported");
        let report: serde_json::Value = serde_json::from_str(&line).unwrap();
        let model: HashMap<Uuid, String> = serde_json::from_value(report["model"].clone()).unwrap();
        models.push(model);
        paid += report["paid"].as_u64().unwrap();
        refused += report["refused"].as_u64().unwrap();
    }
    let left = memory.credits().await.unwrap();
    assert_eq!(
        left + paid,
        BALANCE,
        "charges and acknowledged operations disagree"
    );
    assert!(
        refused > 0,
        "the balance never ran out: the test checked nothing"
    );
    for (task, model) in models.iter().enumerate() {
        let page = memory
            .list()
            .user(format!("writer-{task}"))
            .page_size(1_000)
            .await
            .unwrap();
        let live: HashMap<Uuid, String> =
            page.results.into_iter().map(|r| (r.id, r.memory)).collect();
        assert_eq!(&live, model, "writer {task}");
    }
    // The change log, replayed in cursor order, gives exactly the live memories.
    let mut replay: HashMap<Uuid, String> = HashMap::new();
    let mut cursor = 0;
    loop {
        let page = memory.events_after(cursor, 1_000).await.unwrap();
        if page.results.is_empty() {
            break;
        }
        for e in page.results {
            match e.kind {
                EventKind::MemoryAdd | EventKind::MemoryUpdate => {
                    replay.insert(e.memory_id.unwrap(), e.memory.clone().unwrap());
                }
                EventKind::MemoryDelete => {
                    assert!(replay.remove(&e.memory_id.unwrap()).is_some(), "{e:?}");
                }
                _ => {}
            }
        }
        cursor = page.next_cursor;
    }
    let live: HashMap<Uuid, String> = models.into_iter().flatten().collect();
    assert_eq!(replay, live);
}

/// A client process killed in the middle of its adds: every add it acknowledged is there,
/// and every memory in the database is whole (its row, its vector, its change-log record),
/// none half-written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_killed_mid_add_leaves_each_add_whole_or_absent() {
    let (memory, url) = pg_memory(DIM).await;
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let mut rng = Rng(0x5EED);
    // tag → ids of every acknowledged add, over all the kills.
    let mut acknowledged: HashMap<String, Vec<Uuid>> = HashMap::new();
    const KILLS: usize = 8;
    for kill in 0..KILLS {
        let mut c = child(&url, usize::MAX);
        let stdout = c.stdout.take().unwrap();
        // Killed after a random number of acknowledged adds and a random delay, while the
        // child is most likely inside its next add.
        let wanted = 1 + rng.below(12);
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
        let mut got = 0;
        while got < wanted {
            let line = lines
                .next()
                .unwrap_or_else(|| panic!("round {kill}: the child ended early"))
                .unwrap();
            let Some((_, rest)) = line.split_once(TAG) else {
                continue;
            };
            let mut words = rest.split(' ');
            let tag = words.next().unwrap().to_owned();
            let ids: Vec<Uuid> = words.map(|w| w.parse().unwrap()).collect();
            assert_eq!(ids.len(), 3);
            acknowledged.insert(tag, ids);
            got += 1;
        }
        std::thread::sleep(std::time::Duration::from_millis(rng.below(15) as u64));
        c.kill().unwrap();
        c.wait().unwrap();
        // Every add is whole or absent; every acknowledged one is there, as acknowledged.
        let by_tag = memories_by_add(&memory, "crash").await;
        for (tag, ids) in &by_tag {
            assert_eq!(ids.len(), 3, "round {kill}: {tag} is stored in part");
        }
        for (tag, ids) in &acknowledged {
            let mut stored = by_tag.get(tag).cloned().unwrap_or_default();
            let mut want = ids.clone();
            stored.sort();
            want.sort();
            assert_eq!(stored, want, "round {kill}: acknowledged add {tag}");
        }
        // Whole underneath too: one vector and one log record per memory, none orphaned.
        let counts = client
            .query_one(
                "SELECT (SELECT COUNT(*) FROM memlane_default.vectors), \
                 (SELECT COUNT(*) FROM memlane_default.memories WHERE deleted_at IS NULL), \
                 (SELECT COUNT(*) FROM memlane_default.history)",
                &[],
            )
            .await
            .unwrap();
        let (v, m, h): (i64, i64, i64) = (counts.get(0), counts.get(1), counts.get(2));
        assert_eq!(
            (v, h),
            (m, m),
            "round {kill}: vectors, memories and log disagree"
        );
        assert_eq!(m as usize, 3 * by_tag.len());
        // And searchable: the last add each way.
        let (tag, ids) = by_tag.iter().max_by_key(|(t, _)| t.as_str()).unwrap();
        for mode in [SearchMode::Vector, SearchMode::Keyword] {
            let hits = memory
                .search(format!("{tag} part 1"))
                .user("crash")
                .mode(mode)
                .top_k(50)
                .await
                .unwrap()
                .results;
            assert!(
                hits.iter().any(|h| ids.contains(&h.record.id)),
                "round {kill}: {mode:?} does not find {tag}"
            );
        }
    }
    assert!(acknowledged.len() >= KILLS);
}

/// A memory on `url` whose vector searches go through pgvector's HNSW index (no exact
/// ranking of small sets).
async fn through_hnsw(url: &str, embedder: Option<usize>) -> Memory {
    let store = store(url).await.with_exact_search_max(0);
    let builder = Memory::builder().store(Arc::new(store));
    match embedder {
        Some(dim) => builder.embedder(Arc::new(HashEmbedder::new(dim))),
        None => builder.without_embedder(),
    }
    .build()
    .await
    .unwrap()
}

#[tokio::test]
async fn reembed_on_postgres_embeds_a_keyword_store_moves_dimension_and_refuses_stale_pools() {
    let url = pg_database().await;
    let memory = through_hnsw(&url, None).await;
    let texts = [
        "I am allergic to peanuts",
        "My bike is a red Bianchi",
        "My sister lives in Lyon",
    ];
    for text in texts {
        memory.add(text).user("ana").await.unwrap();
    }
    let top = |memory: Memory, query: &'static str, mode: SearchMode| async move {
        memory
            .search(query)
            .user("ana")
            .mode(mode)
            .top_k(1)
            .await
            .map(|r| r.results[0].record.memory.clone())
    };
    assert_eq!(
        top(memory.clone(), "Bianchi", SearchMode::Keyword)
            .await
            .unwrap(),
        texts[1]
    );
    let refused = top(memory.clone(), "Bianchi", SearchMode::Vector).await;
    assert_eq!(refused.unwrap_err().status(), 503);
    // A second pool stays without an embedder.
    let keyword_pool = through_hnsw(&url, None).await;

    let first = memory
        .reembed(Arc::new(HashEmbedder::new(16)))
        .await
        .unwrap();
    assert_eq!((first.embedded, first.dimension), (3, 16));
    let query = "allergic to peanuts";
    assert_eq!(
        top(memory.clone(), query, SearchMode::Vector)
            .await
            .unwrap(),
        texts[0]
    );
    let on_16 = through_hnsw(&url, Some(16)).await;
    assert_eq!(
        top(on_16.clone(), query, SearchMode::Hybrid).await.unwrap(),
        texts[0]
    );

    // Another dimension: the HNSW index is rebuilt for it.
    let second = memory
        .reembed(Arc::new(HashEmbedder::new(24)))
        .await
        .unwrap();
    assert_eq!((second.embedded, second.dimension), (3, 24));
    assert_eq!(
        top(memory.clone(), query, SearchMode::Vector)
            .await
            .unwrap(),
        texts[0]
    );
    memory.add("I moved to Porto").user("ana").await.unwrap();
    assert_eq!(
        top(memory.clone(), "moved to Porto", SearchMode::Vector)
            .await
            .unwrap(),
        "I moved to Porto"
    );
    // Pools on the old state: searches by vector and adds are refused, and write nothing.
    let stale = top(on_16.clone(), query, SearchMode::Vector)
        .await
        .unwrap_err();
    assert_eq!(stale.status(), 409, "{stale}");
    for pool in [&on_16, &keyword_pool] {
        let refused = pool.add("I sold the bike").user("ana").await.unwrap_err();
        assert_eq!(refused.status(), 409, "{refused}");
    }
    assert!(memory
        .search("sold")
        .user("ana")
        .mode(SearchMode::Keyword)
        .await
        .unwrap()
        .results
        .is_empty());
    let reopened = through_hnsw(&url, Some(24)).await;
    assert_eq!(
        top(reopened, query, SearchMode::Vector).await.unwrap(),
        texts[0]
    );
}

/// The README's PostgreSQL example, as written, on a database of the test server.
#[cfg(feature = "local-embed")]
#[tokio::test]
async fn the_readmes_postgres_example_runs_as_written() {
    crate::common::check_readme_has(&crate::common::quoted(include_str!("postgres.rs"), 0));
    // README
    use memlane::Memory;

    /// `url`: "postgresql://agent@db.internal/memory", or "host=/run/postgresql dbname=memory".
    async fn open_shared(url: &str) -> memlane::Result<Memory> {
        Memory::builder().postgres(url).build().await
    }
    // END README
    let url = pg_database().await;
    let first = open_shared(&url).await.unwrap();
    first
        .add("I can't stand coriander")
        .user("alice")
        .infer(false)
        .await
        .unwrap();
    // A second handle (another process, another host) sees it.
    let second = open_shared(&url).await.unwrap();
    let hits = second.search("coriander").user("alice").await.unwrap();
    assert_eq!(hits.results[0].record.memory, "I can't stand coriander");
}
