//! What `add` with inference costs beyond the language model's own time, at 100k memories.
//!
//! `cargo bench --bench pipeline`
//!
//! A store of 100,000 memories (100 users of 1,000, hashing embedder, so no model runs) is
//! built once under `target/memlane-bench/` and copied for each run. The language model is
//! scripted and answers at once: extraction returns three new facts, reconciliation adds
//! them. What is timed is therefore the pipeline itself: checking the input, reading the
//! configuration, embedding (hashing), the hybrid search for each fact among its user's
//! memories, building the plan, the transaction and the index update. Before the criterion
//! run, 200 adds are timed one by one and the p50 / p95 printed next to the time of the two
//! scripted model calls alone.

// criterion_group! generates undocumented items.
#![allow(missing_docs)]
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use memlane::llm::ChatRequest;
use memlane::{HashEmbedder, Llm, Memory, Message, ScriptedLlm};
use serde_json::json;
use tokio::runtime::Runtime;

const USERS: usize = 100;
const PER_USER: usize = 1_000;
const DIM: usize = 384;
const TIMED: usize = 200;

fn bench_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/memlane-bench")
}

const TOPICS: [&str; 12] = [
    "hiking",
    "jazz",
    "sourdough",
    "chess",
    "sailing",
    "pottery",
    "cycling",
    "opera",
    "sushi",
    "gardening",
    "poetry",
    "climbing",
];
const CITIES: [&str; 8] = [
    "Lisbon", "Oslo", "Kyoto", "Lima", "Accra", "Quebec", "Perth", "Tallinn",
];

fn sentence(i: usize) -> String {
    format!(
        "Fact {i}: enjoys {} and {} and has been to {} {} times",
        TOPICS[i % TOPICS.len()],
        TOPICS[(i / 7) % TOPICS.len()],
        CITIES[(i / 3) % CITIES.len()],
        i % 13
    )
}

fn open(path: &Path, llm: Option<Arc<dyn Llm>>) -> impl std::future::Future<Output = Memory> {
    let path = path.to_path_buf();
    async move {
        let mut b = Memory::builder()
            .path(path)
            .embedder(Arc::new(HashEmbedder::new(DIM)));
        if let Some(llm) = llm {
            b = b.llm(llm);
        }
        b.build().await.unwrap()
    }
}

/// The 100k store, built once and reused.
async fn base_store() -> PathBuf {
    let dir = bench_dir();
    let path = dir.join("pipeline-100k.db");
    let done = dir.join("pipeline-100k.done");
    if done.exists() {
        return path;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(dir.join("pipeline-100k.db.index"));
    let memory = open(&path, None).await;
    for u in 0..USERS {
        let messages: Vec<Message> = (0..PER_USER)
            .map(|i| Message::user(sentence(u * PER_USER + i)))
            .collect();
        memory
            .add(messages)
            .user(format!("user-{u}"))
            .infer(false)
            .await
            .unwrap();
    }
    memory.save_index().await.unwrap();
    drop(memory);
    std::fs::write(&done, b"").unwrap();
    path
}

/// A fresh copy of the base store, so every run starts from the same 100k memories.
fn copy_store(base: &Path, to: &Path) -> PathBuf {
    let db = to.join("m.db");
    std::fs::copy(base, &db).unwrap();
    for suffix in ["-wal", "-shm"] {
        let side = PathBuf::from(format!("{}{suffix}", base.display()));
        if side.exists() {
            std::fs::copy(&side, format!("{}{suffix}", db.display())).unwrap();
        }
    }
    copy_dir(
        &PathBuf::from(format!("{}.index", base.display())),
        &PathBuf::from(format!("{}.index", db.display())),
    );
    db
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A model that answers at once: three new facts per extraction, ADD for every fact.
fn instant_model() -> ScriptedLlm {
    let counter = Arc::new(AtomicU64::new(0));
    ScriptedLlm::from_fn(move |request: &ChatRequest| {
        if request.messages[0].content.contains("memory store current") {
            return Ok(json!({"decisions": [
                {"fact": 0, "event": "ADD"}, {"fact": 1, "event": "ADD"}, {"fact": 2, "event": "ADD"}
            ]})
            .to_string());
        }
        let n = counter.fetch_add(1, Ordering::Relaxed);
        let facts: Vec<_> = (0..3)
            .map(|k| {
                json!({"text": format!("{} (new {n}.{k})", sentence(n as usize * 3 + k)),
                       "categories": ["hobbies"], "entities": [], "importance": 5})
            })
            .collect();
        Ok(json!({ "facts": facts }).to_string())
    })
}

fn pipeline(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let base = rt.block_on(base_store());
    let tmp = tempfile::tempdir().unwrap();
    let db = copy_store(&base, tmp.path());
    let model = instant_model();
    let memory = rt.block_on(open(&db, Some(Arc::new(model.clone()))));
    let add = |i: usize| {
        let memory = memory.clone();
        async move {
            memory
                .add(vec![
                    Message::user("I picked up a few new hobbies this month."),
                    Message::assistant("Tell me more!"),
                ])
                .user(format!("user-{}", i % USERS))
                .await
                .unwrap()
        }
    };

    // The model's own time: the two scripted calls of one add, alone.
    let calls = rt.block_on(async {
        let started = Instant::now();
        for _ in 0..TIMED {
            model
                .chat(ChatRequest::new(vec![
                    Message::new("system", "Extract facts"),
                    Message::user("x"),
                ]))
                .await
                .unwrap();
            model
                .chat(ChatRequest::new(vec![
                    Message::new("system", "You keep a memory store current"),
                    Message::user("x"),
                ]))
                .await
                .unwrap();
        }
        started.elapsed() / TIMED as u32
    });
    let mut times: Vec<Duration> = rt.block_on(async {
        let mut times = Vec::with_capacity(TIMED);
        for i in 0..TIMED {
            let started = Instant::now();
            let out = add(i).await;
            times.push(started.elapsed());
            assert_eq!(out.results.len(), 3);
        }
        times
    });
    times.sort();
    // The same store path without a model: three verbatim memories per add.
    let mut plain: Vec<Duration> = rt.block_on(async {
        let mut times = Vec::with_capacity(TIMED);
        for i in 0..TIMED {
            let started = Instant::now();
            memory
                .add(vec![
                    Message::user(format!("plain {i} a")),
                    Message::user(format!("plain {i} b")),
                    Message::user(format!("plain {i} c")),
                ])
                .user(format!("user-{}", i % USERS))
                .infer(false)
                .await
                .unwrap();
            times.push(started.elapsed());
        }
        times
    });
    plain.sort();
    println!(
        "add without inference, same store (3 verbatim memories): p50 {:.3} ms",
        plain[TIMED / 2].as_secs_f64() * 1e3
    );
    println!(
        "add with inference at 100k memories, scripted model ({TIMED} adds, 3 facts each): \
         p50 {:.3} ms, p95 {:.3} ms; the model calls alone: {:.3} ms",
        times[TIMED / 2].as_secs_f64() * 1e3,
        times[TIMED * 95 / 100].as_secs_f64() * 1e3,
        calls.as_secs_f64() * 1e3
    );

    let mut group = c.benchmark_group("pipeline");
    group.sample_size(30);
    let mut i = TIMED;
    group.bench_function("add_inferred_100k", |b| {
        b.to_async(&rt).iter(|| {
            i += 1;
            add(i)
        })
    });
    group.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
