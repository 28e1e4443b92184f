//! Scale: bulk ingest, open time, resident memory and search at 10k, 100k and 1M memories,
//! on two sets of vectors.
//!
//! `cargo bench --bench scale` measures 10k and 100k; `MEMLANE_SCALE_MAX=1000000 cargo bench
//! --bench scale` goes on to 1M (about 4 GB of disk under `target/memlane-bench/`).
//! `MEMLANE_SCALE_SET=realistic` or `clusters` runs one set (default: both, realistic first).
//! `MEMLANE_SCALE_M` sets the graph's links per node (`IndexParams::max_connections`) and
//! `MEMLANE_SCALE_EFC` its insertion beam (`ef_construction`), `MEMLANE_SCALE_EF` the search
//! beam (`ef_search`) of the measuring process; `MEMLANE_SCALE_EFS=32,48,64` measures
//! unfiltered search again at each of those beams (`sweep=` in the process's line), and
//! `MEMLANE_SCALE_VERBOSE` prints each unfiltered search's time.
//!
//! - The sets: `realistic` (`common/realistic.rs`: real MiniLM vectors of LoCoMo's texts
//!   moved along their neighbours' directions, queried with real questions) and `clusters`
//!   (`common/synthetic.rs`: 1,000 random centres with noise, a worst case for the graph).
//!   First a table compares each with real vectors of conversations the realistic set was
//!   not made from, at equal size (`MEMLANE_SCALE_FIT=1` prints the fitting grid instead,
//!   and stops; `MEMLANE_SCALE_REALISM=0` leaves the table out).
//! - One store grows from empty: 1,000 memories per `add`, with precomputed vectors
//!   (`AddRequest::vectors`), users of 1,000 memories each. The ingest rate is reported over
//!   the last tenth of each size (the last 100k of the 1M).
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

#[path = "common/realistic.rs"]
mod realistic;
#[path = "common/synthetic.rs"]
mod synthetic;
use realistic::Realistic;
use synthetic::DIM;

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

/// A handle on the store; `MEMLANE_SCALE_M`, `MEMLANE_SCALE_EF` and `MEMLANE_SCALE_EFC` set
/// the links per node and the search and insertion beams (default: the library's).
async fn open(path: &Path) -> Memory {
    open_with(path, None).await
}

/// [`open`], with a search beam of its own.
async fn open_with(path: &Path, ef_search: Option<usize>) -> Memory {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    let mut params = memlane::IndexParams::default();
    if let Some(m) = env("MEMLANE_SCALE_M") {
        params = params.max_connections(m);
    }
    if let Some(ef) = ef_search.or_else(|| env("MEMLANE_SCALE_EF")) {
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

/// The vectors a run stores: `MEMLANE_SCALE_SET=clusters` (near-equidistant points around
/// random centres, a worst case for the graph) or `realistic` (real sentence embeddings'
/// neighbourhoods, `common/realistic.rs`).
enum Vectors {
    Clusters,
    Realistic(Realistic),
}

impl Vectors {
    fn named(name: &str) -> Vectors {
        match name {
            "clusters" => Vectors::Clusters,
            "realistic" => Vectors::Realistic(Realistic::load()),
            other => panic!("MEMLANE_SCALE_SET must be clusters or realistic, not {other}"),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Vectors::Clusters => "clusters",
            Vectors::Realistic(_) => "realistic",
        }
    }

    fn vector(&self, i: usize) -> Vec<f32> {
        match self {
            Vectors::Clusters => synthetic::vector(i),
            Vectors::Realistic(r) => r.vector(i),
        }
    }

    /// Query `q`: for the realistic set, a real question about the conversations its bases
    /// came from.
    fn query(&self, q: usize) -> Vec<f32> {
        match self {
            Vectors::Clusters => synthetic::vector(50_000_000 + q),
            Vectors::Realistic(r) => r.source().question(q),
        }
    }
}

/// The exact top 10 of each query among the vectors of its range: each vector is made once
/// and scored against every query whose range holds it (at 1M, making them is the cost).
fn exact_top10(vectors: &Vectors, queries: &[(&[f32], std::ops::Range<usize>)]) -> Vec<Vec<usize>> {
    let mut best: Vec<Vec<(usize, f32)>> = vec![Vec::with_capacity(11); queries.len()];
    let end = queries.iter().map(|q| q.1.end).max().unwrap_or(0);
    for i in 0..end {
        let mut v = None;
        for ((query, range), best) in queries.iter().zip(best.iter_mut()) {
            if !range.contains(&i) {
                continue;
            }
            let v = v.get_or_insert_with(|| vectors.vector(i));
            let s = memlane_kernels::vector::dot(v, query);
            if best.len() < 10 || s > best[9].1 {
                let at = best.partition_point(|b| b.1 >= s);
                best.insert(at, (i, s));
                best.truncate(10);
            }
        }
    }
    best.into_iter()
        .map(|b| b.into_iter().map(|(i, _)| i).collect())
        .collect()
}

fn index_of(record: &memlane::MemoryRecord) -> usize {
    record.memory.split(' ').nth(1).unwrap().parse().unwrap()
}

/// The child: opens the store of `n` memories and reports one line of figures.
async fn measure_open(path: &Path, n: usize, vectors: &Vectors) {
    // Exact answers first, before the store is opened (so that what the scan allocates is
    // not counted as the store's memory).
    let queries: Vec<Vec<f32>> = (0..QUERIES).map(|q| vectors.query(q)).collect();
    let users = n / PER_USER;
    let user_of = |q: usize| (q * 7919) % users;
    // `MEMLANE_SCALE_PROFILE=user|unfiltered|keyword`: repeat one kind of search for ten
    // seconds instead of measuring, for a profiler attached to this process.
    let profile = std::env::var("MEMLANE_SCALE_PROFILE").unwrap_or_default();
    let profiling = !profile.is_empty();
    let measured = if profiling { 0 } else { QUERIES };
    let mut wanted: Vec<(&[f32], std::ops::Range<usize>)> =
        queries[..measured].iter().map(|q| (&q[..], 0..n)).collect();
    wanted.extend(queries[..measured].iter().enumerate().map(|(q, query)| {
        (
            &query[..],
            user_of(q) * PER_USER..(user_of(q) + 1) * PER_USER,
        )
    }));
    let mut truths_all = exact_top10(vectors, &wanted);
    let truths_user = truths_all.split_off(measured);
    let (before, before_anon) = (status_mb("VmRSS"), status_mb("RssAnon"));
    let started = Instant::now();
    let memory = open(path).await;
    let open_time = started.elapsed();
    // The heap once `build` returns: the index's state (liveness, ids, owner lists), the
    // store's connections and caches; the graph has only begun to load (at 1M it takes
    // seconds), so what the heap gains until it is in is, nearly all, hnsw_rs's graph.
    let heap_at_open = status_mb("RssAnon") - before_anon;
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
    // `MEMLANE_SCALE_EFS=32,48,64`: unfiltered search again at each of these beams (p50 of
    // a second pass, recall@10), each on a handle of its own.
    let mut sweep = String::new();
    if let Ok(list) = std::env::var("MEMLANE_SCALE_EFS") {
        drop(memory);
        for ef in list.split(',').filter_map(|e| e.parse::<usize>().ok()) {
            let memory = open_with(path, Some(ef)).await;
            memory.wait_for_index().await.unwrap();
            let (mut times, mut found) = (Vec::new(), 0);
            for pass in 0..2 {
                for (query, truth) in queries.iter().zip(&truths_all) {
                    let started = Instant::now();
                    let hits = memory.search_vector(query.clone()).top_k(10).await.unwrap();
                    let elapsed = started.elapsed();
                    if pass == 1 {
                        times.push(elapsed);
                        let got: Vec<usize> =
                            hits.results.iter().map(|h| index_of(&h.record)).collect();
                        found += truth.iter().filter(|t| got.contains(t)).count();
                    }
                }
            }
            sweep += &format!(
                "ef{ef}:{:.3}ms:{:.3},",
                p50(times).as_secs_f64() * 1e3,
                found as f64 / (10 * truths_all.len()) as f64
            );
        }
    }
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
        "SCALE {n} open_s={:.2} ready_s={:.2} rss_mb={rss:.0} rss_anon_mb={rss_anon:.0} heap_at_open_mb={heap_at_open:.0} \
         rss_after_mb={rss_after:.0} rss_file_after_mb={rss_file_after:.0} vectors_mb={vectors_mb:.0} graph_data_mb={graph_data_mb:.0} \
         unfiltered_p50_ms={:.3} unfiltered_cold_ms={:.3} unfiltered_recall={:.3} user_p50_ms={:.3} user_cold_ms={:.3} \
         user_recall={:.3} keyword_p50_ms={:.3} keyword_cold_ms={:.3} sweep={sweep}",
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

/// How close the realistic vectors come to real ones, printed as a table: for equal-sized
/// sets (the held-out conversations' real vectors, the realistic set, the clusters), the
/// cosine of each vector to its nearest other (10th, 50th and 90th percentiles, over 2,000 of
/// them), the mean cosine between random pairs, and the graph's recall@10 of 100 queries at
/// two search beams. `MEMLANE_SCALE_FIT=1` prints the same for a grid of the generator's two
/// amounts against the source conversations' real vectors, which is how they were chosen.
fn realism(rt: &tokio::runtime::Runtime, dir: &Path) {
    /// A row: its name, its vectors, its queries.
    type Row = (String, Vec<Vec<f32>>, Vec<Vec<f32>>);
    let generator = Realistic::load();
    let fitting = std::env::var("MEMLANE_SCALE_FIT").is_ok();
    let real = if fitting {
        generator.source()
    } else {
        generator.held_out()
    };
    let n = real.texts.len();
    let mut rows: Vec<Row> = vec![(
        format!(
            "real: {}",
            if fitting {
                "the source conversations"
            } else {
                "held-out conversations"
            }
        ),
        real.texts.clone(),
        real.questions.iter().take(QUERIES).cloned().collect(),
    )];
    let source_questions: Vec<Vec<f32>> = (0..QUERIES)
        .map(|q| generator.source().question(q))
        .collect();
    let grid: Vec<(f32, f32)> = if fitting {
        [0.25f32, 0.5, 0.75]
            .into_iter()
            .flat_map(|s| [0.008f32, 0.016, 0.024].map(|j| (s, j)))
            .collect()
    } else {
        vec![]
    };
    if grid.is_empty() {
        let v = Vectors::Realistic(generator);
        rows.push((
            "realistic".into(),
            (0..n).map(|i| v.vector(i)).collect(),
            source_questions.clone(),
        ));
        let c = Vectors::Clusters;
        rows.push((
            "clusters".into(),
            (0..n).map(|i| c.vector(i)).collect(),
            (0..QUERIES).map(|q| c.query(q)).collect(),
        ));
    } else {
        for (spread, jitter) in grid {
            let g = Realistic::with(spread, jitter);
            rows.push((
                format!("spread {spread}, jitter {jitter}"),
                (0..n).map(|i| g.vector(i)).collect(),
                source_questions.clone(),
            ));
        }
    }
    println!(
        "\n| {n} vectors | nearest other: p10 / p50 / p90 cosine | random pairs: mean cosine | recall@10, ef 16 | ef 32 |\n|---|---|---|---|---|"
    );
    for (name, set, queries) in rows {
        let sample: Vec<Vec<f32>> = (0..2_000).map(|i| set[(i * 7_919) % n].clone()).collect();
        // Each sampled vector's nearest is itself; the second is its nearest other.
        let mut nn: Vec<f32> = realistic::nearest(&set, &sample, 2, false)
            .into_iter()
            .map(|b| b[1].1)
            .collect();
        nn.sort_by(f32::total_cmp);
        let pct = |p: usize| nn[nn.len() * p / 100];
        let mut rng = synthetic::Rng::new(99);
        let pairs = 20_000;
        let mean: f32 = (0..pairs)
            .map(|_| {
                let a = &set[(rng.next() % n as u64) as usize];
                let b = &set[(rng.next() % n as u64) as usize];
                a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>()
            })
            .sum::<f32>()
            / pairs as f32;
        let truths: Vec<Vec<usize>> = realistic::nearest(&set, &queries, 10, false)
            .into_iter()
            .map(|b| b.into_iter().map(|(i, _)| i as usize).collect())
            .collect();
        let path = dir.join("realism.db");
        let _ = std::fs::remove_file(&path);
        let recall: Vec<f64> = rt.block_on(async {
            let memory = open(&path).await;
            for (b, chunk) in set.chunks(BATCH).enumerate() {
                let texts: Vec<Message> = (0..chunk.len())
                    .map(|j| Message::user(text(b * BATCH + j)))
                    .collect();
                memory
                    .add(texts)
                    .user(format!("user{b}"))
                    .infer(false)
                    .vectors(chunk.to_vec())
                    .await
                    .unwrap();
            }
            drop(memory);
            let mut out = Vec::new();
            for ef in [16, 32] {
                let memory = Memory::builder()
                    .path(&path)
                    .embedder(Arc::new(HashEmbedder::new(DIM)))
                    .index_params(memlane::IndexParams::default().ef_search(ef))
                    .build()
                    .await
                    .unwrap();
                memory.wait_for_index().await.unwrap();
                let mut found = 0;
                for (query, truth) in queries.iter().zip(&truths) {
                    let hits = memory.search_vector(query.clone()).top_k(10).await.unwrap();
                    let got: Vec<usize> =
                        hits.results.iter().map(|h| index_of(&h.record)).collect();
                    found += truth.iter().filter(|t| got.contains(t)).count();
                }
                out.push(found as f64 / (10 * queries.len()) as f64);
            }
            out
        });
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        let _ = std::fs::remove_dir_all(dir.join("realism.db.index"));
        println!(
            "| {name} | {:.3} / {:.3} / {:.3} | {mean:.3} | {:.3} | {:.3} |",
            pct(10),
            pct(50),
            pct(90),
            recall[0],
            recall[1]
        );
    }
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        let (n, path) = spec.split_once(':').unwrap();
        let set = std::env::var("MEMLANE_SCALE_SET").unwrap();
        rt.block_on(measure_open(
            Path::new(path),
            n.parse().unwrap(),
            &Vectors::named(&set),
        ));
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
    let sets: Vec<String> = std::env::var("MEMLANE_SCALE_SET")
        .unwrap_or_else(|_| "realistic,clusters".into())
        .split(',')
        .map(str::to_owned)
        .collect();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/memlane-bench/scale");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if std::env::var("MEMLANE_SCALE_REALISM").as_deref() != Ok("0") {
        realism(&rt, &dir);
    }
    if std::env::var("MEMLANE_SCALE_FIT").is_ok() {
        return;
    }
    let path = dir.join("m.db");
    let mut rows = Vec::new();
    for set in &sets {
        let vectors = Vectors::named(set);
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        let _ = std::fs::remove_dir_all(dir.join("m.db.index"));
        let mut done = 0;
        for &n in &sizes {
            let memory = rt.block_on(open(&path));
            let tail_from = n - n / 10;
            let mut tail = Duration::ZERO;
            while done < n {
                let batch: Vec<Message> = (done..done + BATCH)
                    .map(|i| Message::user(text(i)))
                    .collect();
                let batch_vectors: Vec<Vec<f32>> =
                    (done..done + BATCH).map(|i| vectors.vector(i)).collect();
                let started = Instant::now();
                rt.block_on(async {
                    memory
                        .add(batch)
                        .user(format!("user{}", done / PER_USER))
                        .infer(false)
                        .vectors(batch_vectors)
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
                .env("MEMLANE_SCALE_SET", vectors.name())
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
                "{line} set={} ingest_tail_per_s={rate:.0} close_s={:.2}",
                vectors.name(),
                close.as_secs_f64()
            );
            rows.push((n, vectors.name(), rate, line));
        }
    }
    let field = |line: &str, key: &str| -> String {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(&format!("{key}=")))
            .unwrap_or("?")
            .to_owned()
    };
    println!(
        "\n| memories | vectors | ingest (last tenth) | open | graph in | RSS after open (heap) | RSS after the searches (mapped vectors) | by construction: f32 vectors, int8 graph data | unfiltered p50 (first pass) | recall@10 | one user p50 (first pass) | recall@10 | one user keyword p50 (first pass) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for (n, set, rate, line) in &rows {
        println!(
            "| {n} | {set} | {rate:.0}/s | {} s | {} s | {} MB ({} MB) | {} MB ({} MB) | {} MB, {} MB | {} ms ({} ms) | {} | {} ms ({} ms) | {} | {} ms ({} ms) |",
            field(line, "open_s"),
            field(line, "ready_s"),
            field(line, "rss_mb"),
            field(line, "rss_anon_mb"),
            field(line, "rss_after_mb"),
            field(line, "rss_file_after_mb"),
            field(line, "vectors_mb"),
            field(line, "graph_data_mb"),
            field(line, "unfiltered_p50_ms"),
            field(line, "unfiltered_cold_ms"),
            field(line, "unfiltered_recall"),
            field(line, "user_p50_ms"),
            field(line, "user_cold_ms"),
            field(line, "user_recall"),
            field(line, "keyword_p50_ms"),
            field(line, "keyword_cold_ms"),
        );
    }
    println!(
        "\n| memories | vectors | heap at open: the index's state, the store | heap the graph adds (hnsw_rs) | mapped exact vectors after the searches | per memory: heap, graph |\n|---|---|---|---|---|---|"
    );
    for (n, set, _, line) in &rows {
        let mb = |key: &str| field(line, key).parse::<f64>().unwrap_or(f64::NAN);
        let (at_open, heap) = (mb("heap_at_open_mb"), mb("rss_anon_mb"));
        println!(
            "| {n} | {set} | {at_open:.0} MB | {:.0} MB | {} MB | {:.0} B, {:.0} B |",
            heap - at_open,
            field(line, "rss_file_after_mb"),
            heap * 1048576.0 / *n as f64,
            (heap - at_open) * 1048576.0 / *n as f64,
        );
    }
}
