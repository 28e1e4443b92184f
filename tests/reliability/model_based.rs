//! Random sequences of add / update / delete / bulk delete / search / list / reopen, run
//! against the real engine (SQLite file, HNSW index; and PostgreSQL with feature
//! `postgres`) and against a plain in-memory model;
//! every observation must agree. Two handles share the file, and each operation goes
//! through one of them: what one writes, the other's next search must see.

use std::path::PathBuf;

use memlane::{EmbedMode, Embedder, HashEmbedder, Memory, SearchMode};
use proptest::prelude::*;
use uuid::Uuid;

/// Where the two handles keep their memories.
enum Backend {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database (its connection string).
    #[cfg(feature = "postgres")]
    Postgres(String),
}

async fn open(backend: &Backend) -> Memory {
    match backend {
        Backend::Sqlite(path) => crate::common::open(path, DIM).await,
        #[cfg(feature = "postgres")]
        Backend::Postgres(url) => crate::common::pg_open(url, DIM).await,
    }
}

const DIM: usize = 384;
const USERS: [&str; 3] = ["ann", "ben", "cat"];
const WORDS: [&str; 12] = [
    "tea", "coffee", "paris", "dog", "cello", "running", "sushi", "berlin", "cat", "chess", "rain",
    "jazz",
];

#[derive(Debug, Clone)]
enum Op {
    Add {
        user: usize,
        words: Vec<usize>,
    },
    Update {
        target: usize,
        words: Vec<usize>,
    },
    Delete {
        target: usize,
    },
    DeleteAll {
        user: usize,
    },
    Search {
        user: Option<usize>,
        words: Vec<usize>,
        k: usize,
    },
    List {
        user: usize,
    },
    Reopen,
}

fn text(words: &[usize]) -> String {
    words
        .iter()
        .map(|w| WORDS[w % WORDS.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

fn arb_words() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..WORDS.len(), 1..4)
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..USERS.len(), arb_words()).prop_map(|(user, words)| Op::Add { user, words }),
        2 => (any::<usize>(), arb_words()).prop_map(|(target, words)| Op::Update { target, words }),
        2 => any::<usize>().prop_map(|target| Op::Delete { target }),
        1 => (0..USERS.len()).prop_map(|user| Op::DeleteAll { user }),
        3 => (prop::option::of(0..USERS.len()), arb_words(), 1..6usize)
            .prop_map(|(user, words, k)| Op::Search { user, words, k }),
        1 => (0..USERS.len()).prop_map(|user| Op::List { user }),
        1 => Just(Op::Reopen),
    ]
}

#[derive(Debug, Clone)]
struct Entry {
    id: Uuid,
    user: usize,
    text: String,
    deleted: bool,
}

async fn unit(e: &HashEmbedder, text: &str) -> Vec<f32> {
    let v = e.embed_one(text, EmbedMode::Document).await.unwrap();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

async fn run(backend: Backend, ops: Vec<(Op, bool)>) {
    let embedder = HashEmbedder::new(DIM);
    let mut handles = [open(&backend).await, open(&backend).await];
    let mut model: Vec<Entry> = Vec::new();

    for (op, second) in ops {
        let via = usize::from(second);
        let memory = &handles[via];
        match op {
            Op::Add { user, words } => {
                let t = text(&words);
                let out = memory
                    .add(t.as_str())
                    .user(USERS[user])
                    .infer(false)
                    .await
                    .unwrap();
                assert_eq!(out.results.len(), 1);
                model.push(Entry {
                    id: out.results[0].id,
                    user,
                    text: t,
                    deleted: false,
                });
            }
            Op::Update { target, words } => {
                if model.is_empty() {
                    continue;
                }
                let i = target % model.len();
                let t = text(&words);
                let result = memory.update(model[i].id).text(t.as_str()).await;
                if model[i].deleted {
                    assert_eq!(result.err().map(|e| e.status()), Some(404));
                } else {
                    assert_eq!(result.unwrap().memory.memory, t);
                    model[i].text = t;
                }
            }
            Op::Delete { target } => {
                if model.is_empty() {
                    continue;
                }
                let i = target % model.len();
                let result = memory.delete(model[i].id).await;
                if model[i].deleted {
                    assert_eq!(result.err().map(|e| e.status()), Some(404));
                } else {
                    assert_eq!(result.unwrap().deleted, vec![model[i].id]);
                    model[i].deleted = true;
                }
            }
            Op::DeleteAll { user } => {
                let mut got = memory.delete_all().user(USERS[user]).await.unwrap().deleted;
                let mut want: Vec<Uuid> = Vec::new();
                for e in model.iter_mut().filter(|e| e.user == user && !e.deleted) {
                    e.deleted = true;
                    want.push(e.id);
                }
                got.sort();
                want.sort();
                assert_eq!(got, want);
            }
            Op::Search { user, words, k } => {
                let q = text(&words);
                let mut req = memory.search(q.as_str()).mode(SearchMode::Vector).top_k(k);
                if let Some(u) = user {
                    req = req.user(USERS[u]);
                }
                let hits = req.await.unwrap().results;
                let qv = unit(&embedder, &q).await;
                let mut expected: Vec<(Uuid, f32)> = Vec::new();
                for e in model
                    .iter()
                    .filter(|e| !e.deleted && user.is_none_or(|u| e.user == u))
                {
                    let v = unit(&embedder, &e.text).await;
                    let score = qv
                        .iter()
                        .zip(&v)
                        .map(|(a, b)| a * b)
                        .sum::<f32>()
                        .clamp(0.0, 1.0);
                    expected.push((e.id, score));
                }
                expected.sort_by(|a, b| b.1.total_cmp(&a.1));
                assert_eq!(
                    hits.len(),
                    expected.len().min(k),
                    "search {q:?} for {user:?}"
                );
                for (hit, (_, want)) in hits.iter().zip(&expected) {
                    let cosine = hit.signals.cosine.unwrap_or(f32::NAN).clamp(0.0, 1.0);
                    assert!(
                        (cosine - want).abs() < 1e-4,
                        "score order differs for {q:?}"
                    );
                    let entry = model.iter().find(|e| e.id == hit.record.id).unwrap();
                    assert!(!entry.deleted, "deleted memory returned");
                    assert_eq!(hit.record.memory, entry.text, "stale text returned");
                    let own = expected
                        .iter()
                        .find(|(id, _)| *id == hit.record.id)
                        .unwrap()
                        .1;
                    assert!((cosine - own).abs() < 1e-4, "wrong cosine for a hit");
                    // The score is the vector model's, among the memories searched.
                    let scope = model
                        .iter()
                        .filter(|e| !e.deleted && user.is_none_or(|u| e.user == u))
                        .count();
                    assert_eq!(hit.signals.scope, scope);
                    let score =
                        memlane::Calibration::FITTED.score(SearchMode::Vector, &hit.signals);
                    assert_eq!(hit.score, score, "wrong score for a hit");
                }
            }
            Op::List { user } => {
                let page = memory
                    .list()
                    .user(USERS[user])
                    .page_size(1000)
                    .await
                    .unwrap();
                let got: Vec<(Uuid, String)> = page
                    .results
                    .iter()
                    .map(|r| (r.id, r.memory.clone()))
                    .collect();
                let want: Vec<(Uuid, String)> = model
                    .iter()
                    .rev()
                    .filter(|e| e.user == user && !e.deleted)
                    .map(|e| (e.id, e.text.clone()))
                    .collect();
                assert_eq!(got, want);
                assert_eq!(page.pagination.count as usize, want.len());
            }
            Op::Reopen => {
                // Dropping the last clone saves the index while the other handle lives on.
                handles[via] = open(&backend).await;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn engine_agrees_with_a_simple_model(ops in prop::collection::vec((arb_op(), any::<bool>()), 1..40)) {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        runtime.block_on(run(Backend::Sqlite(dir.path().join("model.db")), ops));
    }
}

#[cfg(feature = "postgres")]
proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    /// The same schedules on PostgreSQL, with two handles (two hosts' worth) on one database.
    #[test]
    fn postgres_agrees_with_a_simple_model(ops in prop::collection::vec((arb_op(), any::<bool>()), 1..40)) {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async {
            let url = crate::common::pg_database().await;
            run(Backend::Postgres(url), ops).await;
        });
    }
}
