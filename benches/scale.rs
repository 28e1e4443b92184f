//! Scale: bulk ingest, open time, resident memory and search at 10k, 100k and 1M memories.
//!
//! `cargo bench --bench scale` measures 10k and 100k; `MEMLANE_SCALE_MAX=1000000 cargo bench
//! --bench scale` goes on to 1M (about 4 GB of disk under `target/memlane-bench/`).
//! `MEMLANE_SCALE_EF` sets the search beam (`IndexParams::ef_search`) of the measuring
//! process, `MEMLANE_SCALE_EFC` the insertion beam (`ef_construction`) of both, and
//! `MEMLANE_SCALE_VERBOSE` prints each unfiltered search's time.
//!
//! - One store grows from empty: 1,000 memories per `add`, with precomputed vectors
//!   (`AddRequest::vectors`), users of 1,000 memories each. The vectors are those of
//!   `benches/search.rs` (1,000 random centres with noise, 384 dimensions). The ingest rate
//!   is reported over the last tenth of each size (the last 100k of the 1M).
//! - At each size the handle is dropped (saving its index) and a fresh process opens the
//!   store: its open time (until `build` returns), the time until its graph is in memory
//!   (`wait_for_index`), its resident memory after open and after the searches (from
//!   `/proc/self/status`: all of it, the heap, and the mapped exact vectors), what the
//!   exact f32 vectors and the graph's int8 copies take by construction, and 100
//!   queries each of unfiltered vector search (recall@10 against exact search), one user's
//!   vector search (recall@10) and one user's keyword search.

// A bench binary: panics are its error reporting.
#![allow(missing_docs, clippy::unwrap_used)]
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memlane::{HashEmbedder, Memory, Message, SearchMode};

#[path = "common/synthetic.rs"]
mod synthetic;
use synthetic::{vector, DIM};

const PER_USER: usize = 1_000;
const BATCH: usize = 1_000;
const QUERIES: usize = 100;
const CHILD_ENV: &str = "MEMLANE_SCALE_OPEN";
const WORDS: [&str; 16] = [
    "tea", "paris", "cello", "chess", "sushi", "rain", "jazz", "dogs", "kyoto", "sailing", "opera",
    "pottery", "lima", "poetry", "hiking", "oslo",
];

/// Memory `i`'s text: two words from a small vocabulary, so keyword search has real work.
fn text(i: usize) -> String {
    format!(
        "memory {i} about {} and {}",
        WORDS[i % WORDS.len()],
        WORDS[(i / 7 + 3) % WORDS.len()]
    )
}

/// A handle on the store; `MEMLANE_SCALE_EF` and `MEMLANE_SCALE_EFC` set the search and
/// insertion beams (default: the library's).
async fn open(path: &Path) -> Memory {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    let mut params = memlane::IndexParams::default();
    if let Some(ef) = env("MEMLANE_SCALE_EF") {
        params = params.ef_search(ef);
    }
    if let Some(ef) = env("MEMLANE_SCALE_EFC") {
        params = params.ef_construction(ef);
    }
    Memory::builder()
        .path(path)
        .embedder(Arc::new(HashEmbedder::new(DIM)))
        .index_params(params)
        .build()
        .await
        .unwrap()
}

/// A `/proc/self/status` figure in MB: `VmRSS` (all resident memory), `RssAnon` (the
/// heap: graph, maps, caches) or `RssFile` (mapped files: the exact vectors).
fn status_mb(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn p50(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn exact_top10(query: &[f32], ids: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut scored: Vec<(usize, f32)> = ids
        .map(|i| (i, vector(i).iter().zip(query).map(|(a, b)| a * b).sum()))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored.truncate(10);
    scored.into_iter().map(|(i, _)| i).collect()
}

fn index_of(record: &memlane::MemoryRecord) -> usize {
    record.memory.split(' ').nth(1).unwrap().parse().unwrap()
}

/// The child: opens the store of `n` memories and reports one line of figures.
async fn measure_open(path: &Path, n: usize) {
    // Exact answers first, before the store is opened (so that what the scan allocates is
    // not counted as the store's memory); the exact scan of all n vectors regenerates them,
    // which is slow at 1M, so fewer unfiltered queries there.
    let queries: Vec<Vec<f32>> = (0..QUERIES).map(|q| vector(50_000_000 + q)).collect();
    let unfiltered_queries = if n > 200_000 { 20 } else { QUERIES };
    let users = n / PER_USER;
    let user_of = |q: usize| (q * 7919) % users;
    // `MEMLANE_SCALE_PROFILE=user|unfiltered|keyword`: repeat one kind of search for ten
    // seconds instead of measuring, for a profiler attached to this process.
    let profile = std::env::var("MEMLANE_SCALE_PROFILE").unwrap_or_default();
    let profiling = !profile.is_empty();
    let truths_all: Vec<Vec<usize>> = queries[..if profiling { 0 } else { unfiltered_queries }]
        .iter()
        .map(|query| exact_top10(query, 0..n))
        .collect();
    let truths_user: Vec<Vec<usize>> = queries[..if profiling { 0 } else { QUERIES }]
        .iter()
        .enumerate()
        .map(|(q, query)| exact_top10(query, user_of(q) * PER_USER..(user_of(q) + 1) * PER_USER))
        .collect();
    let (before, before_anon) = (status_mb("VmRSS"), status_mb("RssAnon"));
    let started = Instant::now();
    let memory = open(path).await;
    let open_time = started.elapsed();
    // The graph loads in the background; the searches below are timed once it is in.
    memory.wait_for_index().await.unwrap();
    let ready_time = started.elapsed();
    let rss = status_mb("VmRSS") - before;
    let rss_anon = status_mb("RssAnon") - before_anon;
    let until = Instant::now() + Duration::from_secs(10);
    let mut q = 0;
    while profiling && Instant::now() < until {
        let query = queries[q % QUERIES].clone();
        let user = format!("user{}", user_of(q % QUERIES));
        match profile.as_str() {
            "user" => drop(memory.search_vector(query).user(user).top_k(10).await),
            "keyword" => {
                let words = WORDS[q % WORDS.len()];
                drop(
                    memory
                        .search(words)
                        .mode(SearchMode::Keyword)
                        .user(user)
                        .top_k(10)
                        .await,
                )
            }
            _ => drop(memory.search_vector(query).top_k(10).await),
        }
        q += 1;
    }
    if profiling {
        eprintln!("{q} searches");
        return;
    }
    // Each kind of search timed back to back, twice: the first pass reads the hits' rows
    // and the vectors' pages from disk when the kernel's cache has dropped them (at 1M the
    // files outgrow what this machine keeps cached), the second finds them cached.
    let mut cold = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let (mut unfiltered, mut one_user, mut keyword) = (Vec::new(), Vec::new(), Vec::new());
    let (mut found_all, mut wanted_all, mut found_user, mut wanted_user) = (0, 0, 0, 0);
    for pass in 0..2 {
        if pass == 1 {
            cold = (
                p50(std::mem::take(&mut unfiltered)),
                p50(std::mem::take(&mut one_user)),
                p50(std::mem::take(&mut keyword)),
            );
            (found_all, wanted_all, found_user, wanted_user) = (0, 0, 0, 0);
        }
        for (query, truth) in queries.iter().zip(&truths_all) {
            let started = Instant::now();
            let hits = memory.search_vector(query.clone()).top_k(10).await.unwrap();
            unfiltered.push(started.elapsed());
            let got: Vec<usize> = hits.results.iter().map(|h| index_of(&h.record)).collect();
            found_all += truth.iter().filter(|t| got.contains(t)).count();
            wanted_all += truth.len();
        }
        for (q, (query, truth)) in queries.iter().zip(&truths_user).enumerate() {
            let started = Instant::now();
            let hits = memory
                .search_vector(query.clone())
                .user(format!("user{}", user_of(q)))
                .top_k(10)
                .await
                .unwrap();
            one_user.push(started.elapsed());
            let got: Vec<usize> = hits.results.iter().map(|h| index_of(&h.record)).collect();
            found_user += truth.iter().filter(|t| got.contains(t)).count();
            wanted_user += truth.len();
        }
        for q in 0..QUERIES {
            let words = format!(
                "{} {}",
                WORDS[q % WORDS.len()],
                WORDS[(q / 3) % WORDS.len()]
            );
            let started = Instant::now();
            let hits = memory
                .search(words)
                .mode(SearchMode::Keyword)
                .user(format!("user{}", user_of(q)))
                .top_k(10)
                .await
                .unwrap();
            keyword.push(started.elapsed());
            assert!(!hits.results.is_empty());
        }
    }
    let rss_after = status_mb("VmRSS") - before;
    let rss_file_after = status_mb("RssFile");
    // What the exact vectors and the graph's int8 copies take by construction.
    let vectors_mb = (n * DIM * 4) as f64 / (1024.0 * 1024.0);
    let graph_data_mb = (n * DIM) as f64 / (1024.0 * 1024.0);
    if std::env::var("MEMLANE_SCALE_VERBOSE").is_ok() {
        eprintln!(
            "unfiltered times (ms): {:?}",
            unfiltered
                .iter()
                .map(|t| t.as_secs_f64() * 1e3)
                .collect::<Vec<_>>()
        );
    }
    println!(
        "SCALE {n} open_s={:.2} ready_s={:.2} rss_mb={rss:.0} rss_anon_mb={rss_anon:.0} \
         rss_after_mb={rss_after:.0} rss_file_after_mb={rss_file_after:.0} vectors_mb={vectors_mb:.0} graph_data_mb={graph_data_mb:.0} \
         unfiltered_p50_ms={:.3} unfiltered_cold_ms={:.3} unfiltered_recall={:.3} user_p50_ms={:.3} user_cold_ms={:.3} \
         user_recall={:.3} keyword_p50_ms={:.3} keyword_cold_ms={:.3}",
        open_time.as_secs_f64(),
        ready_time.as_secs_f64(),
        p50(unfiltered).as_secs_f64() * 1e3,
        cold.0.as_secs_f64() * 1e3,
        found_all as f64 / wanted_all as f64,
        p50(one_user).as_secs_f64() * 1e3,
        cold.1.as_secs_f64() * 1e3,
        found_user as f64 / wanted_user as f64,
        p50(keyword).as_secs_f64() * 1e3,
        cold.2.as_secs_f64() * 1e3,
    );
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        let (n, path) = spec.split_once(':').unwrap();
        rt.block_on(measure_open(Path::new(path), n.parse().unwrap()));
        return;
    }
    let max: usize = std::env::var("MEMLANE_SCALE_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let sizes: Vec<usize> = [10_000, 100_000, 1_000_000]
        .into_iter()
        .filter(|n| *n <= max)
        .collect();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/memlane-bench/scale");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.db");
    let mut rows = Vec::new();
    let mut done = 0;
    for n in sizes {
        let memory = rt.block_on(open(&path));
        let tail_from = n - n / 10;
        let mut tail = Duration::ZERO;
        while done < n {
            let batch: Vec<Message> = (done..done + BATCH)
                .map(|i| Message::user(text(i)))
                .collect();
            let vectors: Vec<Vec<f32>> = (done..done + BATCH).map(vector).collect();
            let started = Instant::now();
            rt.block_on(async {
                memory
                    .add(batch)
                    .user(format!("user{}", done / PER_USER))
                    .infer(false)
                    .vectors(vectors)
                    .await
                    .unwrap()
            });
            if done >= tail_from {
                tail += started.elapsed();
            }
            done += BATCH;
        }
        let rate = (n / 10) as f64 / tail.as_secs_f64();
        let started = Instant::now();
        drop(memory);
        let close = started.elapsed();
        let out = Command::new(std::env::current_exe().unwrap())
            .env(CHILD_ENV, format!("{n}:{}", path.display()))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout
            .lines()
            .find(|l| l.starts_with("SCALE "))
            .unwrap_or_else(|| {
                panic!(
                    "the measuring process failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
            .to_owned();
        eprintln!(
            "{line} ingest_tail_per_s={rate:.0} close_s={:.2}",
            close.as_secs_f64()
        );
        rows.push((n, rate, line));
    }
    let field = |line: &str, key: &str| -> String {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(&format!("{key}=")))
            .unwrap_or("?")
            .to_owned()
    };
    println!(
        "\n| memories | ingest (last tenth) | open | graph in | RSS after open (heap) | RSS after the searches (mapped vectors) | by construction: f32 vectors, int8 graph data | unfiltered p50 (first pass) | recall@10 | one user p50 (first pass) | recall@10 | one user keyword p50 (first pass) |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for (n, rate, line) in rows {
        println!(
            "| {n} | {rate:.0}/s | {} s | {} s | {} MB ({} MB) | {} MB ({} MB) | {} MB, {} MB | {} ms ({} ms) | {} | {} ms ({} ms) | {} | {} ms ({} ms) |",
            field(&line, "open_s"),
            field(&line, "ready_s"),
            field(&line, "rss_mb"),
            field(&line, "rss_anon_mb"),
            field(&line, "rss_after_mb"),
            field(&line, "rss_file_after_mb"),
            field(&line, "vectors_mb"),
            field(&line, "graph_data_mb"),
            field(&line, "unfiltered_p50_ms"),
            field(&line, "unfiltered_cold_ms"),
            field(&line, "unfiltered_recall"),
            field(&line, "user_p50_ms"),
            field(&line, "user_cold_ms"),
            field(&line, "user_recall"),
            field(&line, "keyword_p50_ms"),
            field(&line, "keyword_cold_ms"),
        );
    }
}
