//! Search latency and recall, and `add` throughput.
//!
//! `cargo bench --bench search` (after `scripts/fetch-models.sh`).
//!
//! - Search runs over 10k and 100k stored memories whose vectors are precomputed (no model in
//!   the loop: a synthetic embedder maps the text `v<i>` to vector `i`). Vectors are drawn
//!   around 1,000 random centres in 384 dimensions, which is closer to real sentence
//!   embeddings than uniform noise. Each user owns 1,000 memories.
//! - Before the criterion runs, 300 queries per case are timed one by one through the public
//!   API (`search_vector`, so query embedding is excluded; the store round trip that hydrates
//!   results is included) and compared with exact search: the table printed first holds p50,
//!   p95 and recall@10.
//! - Freshness at 100k, on a copy of the store with two handles: the change check every
//!   search makes (timed alone, in turns with searches that find nothing changed), and the
//!   catch-up of a search after the other handle added, updated or deleted 100 memories.
//! - `add` throughput: 100 distinct short sentences per call, `infer = false`, the local
//!   MiniLM embedder, a SQLite file.
//!
//! The stores are built once under `target/memlane-bench/` and reused by later runs.

// criterion_group! generates undocumented items.
#![allow(missing_docs)]
use std::future::IntoFuture;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use memlane::{EmbedMode, Embedder, Memory, Message};
use tokio::runtime::Runtime;

#[path = "common/synthetic.rs"]
mod synthetic;
use synthetic::{vector, DIM};

const PER_USER: usize = 1_000;
const QUERIES: usize = 300;

/// The synthetic embedder: text `v<i>` is vector `i`.
#[derive(Debug)]
struct Precomputed;

#[async_trait]
impl Embedder for Precomputed {
    fn dimension(&self) -> usize {
        DIM
    }

    fn model_id(&self) -> &str {
        "bench-precomputed"
    }

    async fn embed(&self, texts: &[String], _: EmbedMode) -> memlane::Result<Vec<Vec<f32>>> {
        texts
            .iter()
            .map(|t| {
                t.strip_prefix('v')
                    .and_then(|n| n.parse().ok())
                    .map(vector)
                    .ok_or_else(|| memlane::Error::invalid(format!("not a bench text: {t}")))
            })
            .collect()
    }
}

fn bench_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/memlane-bench");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A store of `n` memories, built on first use and reused afterwards.
async fn store(n: usize) -> Memory {
    let path = bench_dir().join(format!("search-{n}.db"));
    let open = || {
        Memory::builder()
            .path(&path)
            .embedder(Arc::new(Precomputed))
            .build()
    };
    let memory = open().await.unwrap();
    let have = memory.list().page_size(1).await.unwrap().pagination.count as usize;
    if have == n {
        return memory;
    }
    assert_eq!(
        have,
        0,
        "{} holds {have} memories, not {n}: delete it",
        path.display()
    );
    let started = Instant::now();
    for start in (0..n).step_by(1_000) {
        let user = format!("user{}", start / PER_USER);
        let batch: Vec<Message> = (start..(start + 1_000).min(n))
            .map(|i| Message::user(format!("v{i}")))
            .collect();
        memory.add(batch).user(user).infer(false).await.unwrap();
    }
    memory.save_index().await.unwrap();
    eprintln!("built {n} memories in {:.1?}", started.elapsed());
    memory
}

fn exact_top10(query: &[f32], data: &[Vec<f32>], ids: std::ops::Range<usize>) -> Vec<usize> {
    let mut scored: Vec<(usize, f32)> = ids
        .map(|i| (i, data[i].iter().zip(query).map(|(a, b)| a * b).sum()))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored.truncate(10);
    scored.into_iter().map(|(i, _)| i).collect()
}

struct Case {
    name: &'static str,
    p50: Duration,
    p95: Duration,
    recall: f64,
    /// p50 of a brute-force scan over the same candidates, timed in the same run.
    scan_p50: Duration,
}

/// Times `QUERIES` searches one by one and scores them against exact search. The exact
/// answers are computed first, so that the timed loop runs searches back to back.
async fn measure(
    memory: &Memory,
    data: &[Vec<f32>],
    user: Option<usize>,
    name: &'static str,
) -> Case {
    let queries: Vec<Vec<f32>> = (0..QUERIES).map(|q| vector(10_000_000 + q)).collect();
    let mut scans = Vec::with_capacity(QUERIES);
    let truths: Vec<Vec<usize>> = queries
        .iter()
        .map(|query| {
            let started = Instant::now();
            let truth = match user {
                None => exact_top10(query, data, 0..data.len()),
                Some(u) => exact_top10(query, data, u * PER_USER..(u + 1) * PER_USER),
            };
            scans.push(started.elapsed());
            truth
        })
        .collect();
    scans.sort();
    let mut latencies = Vec::with_capacity(QUERIES);
    let mut results = Vec::with_capacity(QUERIES);
    for query in &queries {
        let mut req = memory.search_vector(query.clone()).top_k(10);
        if let Some(u) = user {
            req = req.user(format!("user{u}"));
        }
        let started = Instant::now();
        let hits = req.await.unwrap();
        latencies.push(started.elapsed());
        results.push(hits);
    }
    let mut found = 0usize;
    let mut wanted = 0usize;
    for (hits, truth) in results.iter().zip(&truths) {
        let got: Vec<usize> = hits
            .results
            .iter()
            .map(|h| h.record.memory[1..].parse().unwrap())
            .collect();
        found += truth.iter().filter(|t| got.contains(t)).count();
        wanted += truth.len();
    }
    latencies.sort();
    Case {
        name,
        p50: latencies[QUERIES / 2],
        p95: latencies[QUERIES * 95 / 100],
        recall: found as f64 / wanted as f64,
        scan_p50: scans[QUERIES / 2],
    }
}

fn search(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let mut table = Vec::new();
    let mut group = c.benchmark_group("search");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(5));
    for (n, label) in [(10_000, "10k"), (100_000, "100k")] {
        let memory = rt.block_on(store(n));
        let data: Vec<Vec<f32>> = (0..n).map(vector).collect();
        let unfiltered = rt.block_on(measure(&memory, &data, None, "unfiltered"));
        let user = rt.block_on(measure(
            &memory,
            &data,
            Some(n / PER_USER / 2),
            "one user (1k)",
        ));
        drop(data);
        table.push((label, unfiltered));
        table.push((label, user));
        let query = vector(20_000_000);
        group.bench_function(BenchmarkId::new("unfiltered", label), |b| {
            b.to_async(&rt)
                .iter(|| async { memory.search_vector(query.clone()).top_k(10).await.unwrap() })
        });
        group.bench_function(BenchmarkId::new("one_user", label), |b| {
            b.to_async(&rt).iter(|| async {
                memory
                    .search_vector(query.clone())
                    .user("user0")
                    .top_k(10)
                    .await
                    .unwrap()
            })
        });
    }
    group.finish();
    rt.block_on(freshness(100_000));
    println!(
        "\n| memories | search | p50 | p95 | recall@10 | brute-force scan p50 | speed-up over the scan |\n|---|---|---|---|---|---|---|"
    );
    for (label, case) in table {
        println!(
            "| {label} | {} | {:.3} ms | {:.3} ms | {:.3} | {:.3} ms | {:.1}x |",
            case.name,
            case.p50.as_secs_f64() * 1e3,
            case.p95.as_secs_f64() * 1e3,
            case.recall,
            case.scan_p50.as_secs_f64() * 1e3,
            case.scan_p50.as_secs_f64() / case.p50.as_secs_f64()
        );
    }
}

fn p50(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The price of freshness at `n` memories, on a copy of the bench store with two handles:
/// the change check on searches that find nothing changed (the check timed alone, in turns
/// with the search it precedes), and the catch-up of a search after the other handle wrote.
async fn freshness(n: usize) {
    let from = bench_dir().join(format!("search-{n}.db"));
    let dir = bench_dir().join(format!("fresh-{n}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.db");
    for suffix in ["", "-wal", "-shm"] {
        let source = PathBuf::from(format!("{}{suffix}", from.display()));
        if source.exists() {
            std::fs::copy(&source, format!("{}{suffix}", path.display())).unwrap();
        }
    }
    let open = || {
        Memory::builder()
            .path(&path)
            .embedder(Arc::new(Precomputed))
            .build()
    };
    let (reader, writer) = (open().await.unwrap(), open().await.unwrap());
    let query = vector(30_000_000);
    for (name, user) in [("unfiltered", None), ("one user", Some("user0"))] {
        let (mut checks, mut searches) = (Vec::new(), Vec::new());
        for _ in 0..QUERIES {
            let started = Instant::now();
            std::hint::black_box(reader.store().change_token());
            checks.push(started.elapsed());
            let mut request = reader.search_vector(query.clone()).top_k(10);
            if let Some(user) = user {
                request = request.user(user);
            }
            let started = Instant::now();
            request.await.unwrap();
            searches.push(started.elapsed());
        }
        let (check, search) = (p50(checks), p50(searches));
        println!(
            "freshness at {n}, {name}: the change check p50 {:.1} µs, {:.1}% of the search's p50 ({:.3} ms)",
            check.as_secs_f64() * 1e6,
            100.0 * check.as_secs_f64() / search.as_secs_f64(),
            search.as_secs_f64() * 1e3
        );
    }
    // Catch-up: the other handle adds (then updates, then deletes) `changed` memories; the
    // reader's next search replays them. Its cost is that search's time less a search with
    // nothing to replay, per changed memory.
    let changed = 100;
    let mut next = 40_000_000usize;
    let mut per_change = Vec::new();
    for round in 0..6 {
        let mut ids = Vec::new();
        match round % 3 {
            0 => {
                let batch: Vec<Message> = (next..next + changed)
                    .map(|i| Message::user(format!("v{i}")))
                    .collect();
                next += changed;
                let added = writer.add(batch).user("fresh").infer(false).await.unwrap();
                ids.extend(added.results.iter().map(|r| r.id));
            }
            1 => {
                let page = writer
                    .list()
                    .user("fresh")
                    .page_size(changed)
                    .await
                    .unwrap();
                for r in page.results {
                    writer.update(r.id).text(format!("v{next}")).await.unwrap();
                    next += 1;
                }
            }
            _ => {
                writer.delete_all().user("fresh").await.unwrap();
            }
        }
        let started = Instant::now();
        reader.search_vector(query.clone()).top_k(10).await.unwrap();
        let first = started.elapsed();
        let rest = p50(search_times(&reader, &query, 21).await);
        per_change.push(first.saturating_sub(rest) / changed as u32);
    }
    println!(
        "freshness at {n}: catching up costs {:.3} ms per changed memory (p50 of 6 rounds of {changed} adds, updates or deletes by another handle)",
        p50(per_change).as_secs_f64() * 1e3
    );
    drop((reader, writer));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The times of `k` unfiltered searches in a row.
async fn search_times(memory: &Memory, query: &[f32], k: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(k);
    for _ in 0..k {
        let started = Instant::now();
        memory
            .search_vector(query.to_vec())
            .top_k(10)
            .await
            .unwrap();
        times.push(started.elapsed());
    }
    times
}

fn add(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let path = bench_dir().join("add.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let _ = std::fs::remove_dir_all(format!("{}.index", path.display()));
    let memory = rt.block_on(Memory::open(&path)).unwrap();
    let subjects = [
        "my sister",
        "the dentist",
        "our team",
        "the landlord",
        "my coach",
        "the bakery",
    ];
    let actions = [
        "moved to",
        "called about",
        "booked a trip to",
        "wrote to me from",
        "recommended",
    ];
    let places = [
        "Lisbon",
        "the lake house",
        "Kyoto",
        "the new office",
        "Oslo",
        "the old market",
    ];
    let mut counter = 0usize;
    let mut batch = move || -> Vec<Message> {
        (0..100)
            .map(|_| {
                counter += 1;
                let i = counter;
                Message::user(format!(
                    "On day {i}, {} {} {} (note {}).",
                    subjects[i % subjects.len()],
                    actions[(i / 7) % actions.len()],
                    places[(i / 3) % places.len()],
                    i * 7919 % 10_007
                ))
            })
            .collect()
    };
    // One timed pass for the reported figure, then criterion's own estimate. The baseline is
    // the embedder alone on exactly the texts `add` embeds (messages in a row from one role
    // carry no context, so each is embedded as it is), timed batch for batch in turns with
    // `add` so that both see the same machine: what `add` costs beyond it is the engine's
    // own work (SQLite, the vector and keyword indexes).
    let batches: Vec<Vec<Message>> = (0..10).map(|_| batch()).collect();
    let (mut embed_time, mut add_time) = (Duration::ZERO, Duration::ZERO);
    for b in batches {
        let texts: Vec<String> = b.iter().map(|m| m.content.clone()).collect();
        let started = Instant::now();
        let embedder = memory.embedder().expect("the bench memory has an embedder");
        rt.block_on(embedder.embed(&texts, EmbedMode::Document))
            .unwrap();
        embed_time += started.elapsed();
        let started = Instant::now();
        rt.block_on(memory.add(b).user("bench").infer(false).into_future())
            .unwrap();
        add_time += started.elapsed();
    }
    let embed_per_second = 1_000.0 / embed_time.as_secs_f64();
    let per_second = 1_000.0 / add_time.as_secs_f64();
    let mut group = c.benchmark_group("add");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(15))
        .throughput(Throughput::Elements(100));
    group.bench_function("infer_false_minilm_100", |b| {
        b.to_async(&rt).iter_batched(
            &mut batch,
            |messages| async {
                memory
                    .add(messages)
                    .user("bench")
                    .infer(false)
                    .await
                    .unwrap()
            },
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
    println!(
        "\nadd, infer = false, MiniLM, 100 messages per call: {per_second:.0} memories/s; the embedder alone: \
         {embed_per_second:.0} texts/s; add reaches {:.0}% of the embedder's own rate (1,000 memories timed)",
        100.0 * per_second / embed_per_second
    );
}

criterion_group!(benches, search, add);
criterion_main!(benches);
