//! SQLite and PostgreSQL side by side (feature `postgres`), in one run:
//!
//! ```sh
//! cargo bench --features postgres --bench stores
//! ```
//!
//! At 10k and 100k memories (`MEMLANE_STORES_MAX` caps the sizes) and for each store:
//! - ingest with precomputed vectors, 100 memories per `add`: one writer process over the
//!   first 10k memories of a new store, then four writer processes filling another new
//!   store to the size (each its own quarter of the users);
//! - search: four processes searching at once, 100 queries each per kind (one user's
//!   vector, keyword and hybrid search, unfiltered vector search), reporting p50 and p95
//!   over all four (the query's embedding is a hashing embedder's, microseconds);
//! - PostgreSQL only: recall@10 of filtered vector search against exact ranking, for filters
//!   on owners, metadata, categories and dates, each at 0.1%, 1% and 10% selectivity.
//!
//! Memory `i` is in batch `b = i / 100` (one `add`): user `i / 1000`, app `b % 10`, run `b`,
//! metadata `{"batch": b}`, categories `c{b}`, `d{b % 100}` and `e{b % 10}`, created on
//! 2024-01-01 plus `b` minutes; its vector is that of the other benches (1,000 random
//! centres with noise, 384 dimensions). The
//! PostgreSQL server is `MEMLANE_TEST_POSTGRES`'s, or one started by `scripts/postgres.sh`
//! for the run (no fsync: it measures the store, not the disk).

// A bench binary: panics are its error reporting.
#![allow(missing_docs, clippy::unwrap_used)]
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use memlane::filter::Filter;
use memlane::store::{Among, CandidateSource, PostgresStore};
use memlane::{HashEmbedder, Memory, Message, SearchMode};

#[path = "common/synthetic.rs"]
mod synthetic;
use synthetic::{vector, DIM};

const BATCH: usize = 100;
const PER_USER: usize = 1_000;
const QUERIES: usize = 100;
const WRITERS: usize = 4;
const SEARCHERS: usize = 4;
const ROLE: &str = "MEMLANE_STORES_ROLE";
const WORDS: [&str; 16] = [
    "tea", "paris", "cello", "chess", "sushi", "rain", "jazz", "dogs", "kyoto", "sailing", "opera",
    "pottery", "lima", "poetry", "hiking", "oslo",
];

fn text(i: usize) -> String {
    format!(
        "memory {i} about {} and {}",
        WORDS[i % WORDS.len()],
        WORDS[(i / 7 + 3) % WORDS.len()]
    )
}

/// Where a store is: a SQLite file or a PostgreSQL database.
#[derive(Clone, Debug)]
enum Place {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Place {
    fn encode(&self) -> String {
        match self {
            Place::Sqlite(p) => format!("sqlite:{}", p.display()),
            Place::Postgres(url) => format!("postgres:{url}"),
        }
    }

    fn decode(s: &str) -> Place {
        match s.split_once(':').unwrap() {
            ("sqlite", p) => Place::Sqlite(PathBuf::from(p)),
            (_, url) => Place::Postgres(url.to_owned()),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Place::Sqlite(_) => "SQLite",
            Place::Postgres(_) => "PostgreSQL",
        }
    }

    async fn open(&self) -> Memory {
        let builder = Memory::builder().embedder(Arc::new(HashEmbedder::new(DIM)));
        match self {
            Place::Sqlite(p) => builder.path(p),
            Place::Postgres(url) => builder.postgres(url.clone()),
        }
        .build()
        .await
        .unwrap()
    }
}

/// Adds memories `range`, 100 per call, with their vectors and owners.
async fn ingest(memory: &Memory, range: std::ops::Range<usize>) {
    let mut at = range.start;
    while at < range.end {
        // A batch stays within one user; its memories share run, app, metadata, categories
        // and date.
        let end = (at + BATCH)
            .min(range.end)
            .min((at / PER_USER + 1) * PER_USER);
        let messages: Vec<Message> = (at..end).map(|i| Message::user(text(i))).collect();
        let vectors: Vec<Vec<f32>> = (at..end).map(vector).collect();
        let b = at / BATCH;
        memory
            .add(messages)
            .user(format!("user{}", at / PER_USER))
            .app(format!("app{}", b % 10))
            .run(format!("run{b}"))
            .metadata(serde_json::json!({"batch": b}))
            .categories([
                format!("c{b}"),
                format!("d{}", b % 100),
                format!("e{}", b % 10),
            ])
            .timestamp(batch_time(b))
            .vectors(vectors)
            .infer(false)
            .await
            .unwrap();
        at = end;
    }
}

fn spawn(role: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .arg("--bench")
        .env(ROLE, role)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// The searching child: prints one line per kind, `kind ms ms …`.
async fn search_child(place: &Place, n: usize, seed: usize) {
    let memory = place.open().await;
    memory.wait_for_index().await.unwrap();
    let users = n / PER_USER;
    let kinds = ["user-vector", "user-keyword", "user-hybrid", "all-vector"];
    for kind in kinds {
        let mut times = Vec::with_capacity(QUERIES);
        for q in 0..QUERIES {
            let i = seed * 10_000 + q;
            let query = vector(60_000_000 + i);
            let user = format!("user{}", (i * 7919) % users);
            let words = format!("{} {}", WORDS[i % 16], WORDS[(i / 3) % 16]);
            let t = Instant::now();
            match kind {
                "user-vector" => drop(memory.search_vector(query).user(user).top_k(10).await),
                "user-keyword" => drop(
                    memory
                        .search(words)
                        .user(user)
                        .mode(SearchMode::Keyword)
                        .top_k(10)
                        .await,
                ),
                "user-hybrid" => drop(
                    memory
                        .search(words)
                        .user(user)
                        .mode(SearchMode::Hybrid)
                        .top_k(10)
                        .await,
                ),
                _ => drop(memory.search_vector(query).top_k(10).await),
            }
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let times: Vec<String> = times.iter().map(|t| format!("{t:.4}")).collect();
        println!("@stores@ {kind} {}", times.join(" "));
    }
}

fn percentile(times: &mut [f64], q: f64) -> f64 {
    times.sort_by(f64::total_cmp);
    times[((times.len() - 1) as f64 * q) as usize]
}

/// Four searching processes at once on `place`: p50 and p95 per kind.
fn search_all(place: &Place, n: usize) -> Vec<(String, f64, f64)> {
    let children: Vec<_> = (0..SEARCHERS)
        .map(|s| spawn(&format!("search {n} {s} {}", place.encode())))
        .collect();
    let mut by_kind: Vec<(String, Vec<f64>)> = Vec::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let Some(rest) = line.strip_prefix("@stores@ ") else {
                continue;
            };
            let mut parts = rest.split(' ');
            let kind = parts.next().unwrap().to_owned();
            let times: Vec<f64> = parts.map(|t| t.parse().unwrap()).collect();
            match by_kind.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, all)) => all.extend(times),
                None => by_kind.push((kind, times)),
            }
        }
    }
    by_kind
        .into_iter()
        .map(|(kind, mut times)| {
            let p50 = percentile(&mut times, 0.5);
            let p95 = percentile(&mut times, 0.95);
            (kind, p50, p95)
        })
        .collect()
}

/// A new empty place of `kind` for size `n`.
async fn fresh(kind: &str, n: usize, tag: &str, server: &str, dir: &Path) -> Place {
    match kind {
        "sqlite" => Place::Sqlite(dir.join(format!("{n}-{tag}.db"))),
        _ => {
            let name = format!("memlane_bench_{n}_{tag}_{}", std::process::id());
            let (client, connection) = tokio_postgres::connect(server, tokio_postgres::NoTls)
                .await
                .unwrap();
            let task = tokio::spawn(connection);
            client
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .await
                .unwrap();
            drop(client);
            let _ = task.await;
            Place::Postgres(format!("{server} dbname={name}"))
        }
    }
}

/// The minute memories of batch `b` (`i / 100`) are dated: 2024-01-01 plus `b` minutes.
fn batch_time(b: usize) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2024-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc)
        + chrono::Duration::minutes(b as i64)
}

/// One row of the recall table: a filter, and which batches it admits.
struct FilterCase {
    name: String,
    filter: Filter,
    admits: Box<dyn Fn(usize) -> bool>,
}

/// Each kind of filter — owners, metadata, categories, dates — at three selectivities (at
/// 100k: one batch of 100 memories, 0.1%; ten, 1%; a hundred or a tenth, 10%), for query `q`.
fn filter_cases(n: usize, q: usize) -> Vec<FilterCase> {
    let batches = n / BATCH;
    let mut out = Vec::new();
    for (label, size) in [("0.1%", 1), ("1%", 10), ("10%", 100)] {
        let groups = (batches / size).max(1);
        let g = (q * 7919) % groups;
        let (lo, hi) = (g * size, g * size + size);
        let range = move |b: usize| (lo..hi).contains(&b);
        let (owner, owner_of): (Filter, Box<dyn Fn(usize) -> bool>) = match size {
            1 => (Filter::run(format!("run{g}")), Box::new(move |b| b == g)),
            10 => (
                Filter::user(format!("user{g}")),
                Box::new(move |b| b / 10 == g),
            ),
            _ => {
                let g = q % 10;
                (
                    Filter::app(format!("app{g}")),
                    Box::new(move |b| b % 10 == g),
                )
            }
        };
        out.push(FilterCase {
            name: format!("owner ({label} at 100k)"),
            filter: owner,
            admits: owner_of,
        });
        let metadata = if size == 1 {
            serde_json::json!({"metadata.batch": g})
        } else {
            serde_json::json!({"metadata.batch": {"gte": lo, "lt": hi}})
        };
        out.push(FilterCase {
            name: format!("metadata ({label} at 100k)"),
            filter: Filter::from_json(&metadata).unwrap(),
            admits: Box::new(range),
        });
        let (category, category_of): (String, Box<dyn Fn(usize) -> bool>) = match size {
            1 => (format!("c{g}"), Box::new(move |b| b == g)),
            10 => {
                let g = q % 100;
                (format!("d{g}"), Box::new(move |b| b % 100 == g))
            }
            _ => {
                let g = q % 10;
                (format!("e{g}"), Box::new(move |b| b % 10 == g))
            }
        };
        out.push(FilterCase {
            name: format!("category ({label} at 100k)"),
            filter: Filter::from_json(&serde_json::json!({"categories": category})).unwrap(),
            admits: category_of,
        });
        let dates = serde_json::json!({"AND": [
            {"created_at": {"gte": batch_time(lo).to_rfc3339()}},
            {"created_at": {"lt": batch_time(hi).to_rfc3339()}},
        ]});
        out.push(FilterCase {
            name: format!("date range ({label} at 100k)"),
            filter: Filter::from_json(&dates).unwrap(),
            admits: Box::new(range),
        });
    }
    out
}

/// Recall@10 of filtered vector search on PostgreSQL for every kind of filter at three
/// selectivities, and p50.
async fn filtered_recall(url: &str, n: usize) -> Vec<(String, f64, f64)> {
    let store = PostgresStore::connect(url).await.unwrap();
    let all: Vec<Vec<f32>> = (0..n).map(vector).collect();
    let now = chrono::Utc::now();
    let kinds = filter_cases(n, 0).len();
    let mut out = Vec::new();
    for kind in 0..kinds {
        let (mut found, mut wanted, mut times) = (0, 0, Vec::new());
        let mut name = String::new();
        for q in 0..20 {
            let case = filter_cases(n, q).swap_remove(kind);
            name = case.name;
            let query = vector(70_000_000 + q);
            let mut scored: Vec<f32> = (0..n)
                .filter(|&i| (case.admits)(i / BATCH))
                .map(|i| all[i].iter().zip(&query).map(|(a, b)| a * b).sum())
                .collect();
            scored.sort_by(|a, b| b.total_cmp(a));
            scored.truncate(10);
            let t = Instant::now();
            let hits = store
                .nearest(vec![query], Among::new(&case.filter, now, false), 10)
                .await
                .unwrap()
                .pop()
                .unwrap();
            times.push(t.elapsed().as_secs_f64() * 1e3);
            // Compared by score: ties between identical vectors are either's.
            let cut = scored.last().copied().unwrap_or(0.0) - 1e-5;
            found += hits.iter().filter(|h| h.1 >= cut).count().min(scored.len());
            wanted += scored.len();
        }
        assert!(wanted > 0, "{name} admitted nothing");
        out.push((
            name,
            found as f64 / wanted as f64,
            percentile(&mut times, 0.5),
        ));
    }
    out
}

fn sizes() -> Vec<usize> {
    let max: usize = std::env::var("MEMLANE_STORES_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    [10_000, 100_000]
        .into_iter()
        .filter(|&n| n <= max)
        .collect()
}

fn server() -> (String, Option<PathBuf>) {
    if let Ok(url) = std::env::var("MEMLANE_TEST_POSTGRES") {
        return (url, None);
    }
    let dir = std::env::temp_dir().join(format!("memlane-bench-pg-{}", std::process::id()));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/postgres.sh");
    let out = Command::new(&script)
        .arg("start")
        .arg(&dir)
        .arg(std::process::id().to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap().trim().to_owned(),
        Some(dir),
    )
}

#[tokio::main]
async fn main() {
    if let Ok(role) = std::env::var(ROLE) {
        let mut words = role.splitn(4, ' ');
        let (what, a, b, place) = (
            words.next().unwrap(),
            words.next().unwrap().parse::<usize>().unwrap(),
            words.next().unwrap().parse::<usize>().unwrap(),
            Place::decode(words.next().unwrap()),
        );
        match what {
            "ingest" => ingest(&place.open().await, a..b).await,
            _ => search_child(&place, a, b).await,
        }
        return;
    }
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let (server, server_dir) = server();
    let dir = tempfile_dir();
    println!("| store | memories | ingest, 1 writer (mem/s) | ingest, 4 writers (mem/s) | kind | p50 ms | p95 ms |");
    println!("|---|---|---|---|---|---|---|");
    let mut recalls = Vec::new();
    for n in sizes() {
        for kind in ["sqlite", "postgres"] {
            // One writer, the first 10k memories of a new store.
            let single = fresh(kind, n, "one", &server, &dir).await;
            let memory = single.open().await;
            let first = n.min(10_000);
            let t = Instant::now();
            ingest(&memory, 0..first).await;
            let one = first as f64 / t.elapsed().as_secs_f64();
            drop(memory);
            // Four writer processes, each a quarter of the users.
            let place = fresh(kind, n, "four", &server, &dir).await;
            drop(place.open().await); // schema, model and index directory before the race
            let quarter = n / WRITERS;
            let t = Instant::now();
            let writers: Vec<_> = (0..WRITERS)
                .map(|w| {
                    spawn(&format!(
                        "ingest {} {} {}",
                        w * quarter,
                        (w + 1) * quarter,
                        place.encode()
                    ))
                })
                .collect();
            for w in writers {
                assert!(w.wait_with_output().unwrap().status.success());
            }
            let four = n as f64 / t.elapsed().as_secs_f64();
            // Searches: SQLite's processes load the index the last writer saved.
            let searched = search_all(&place, n);
            for (i, (what, p50, p95)) in searched.iter().enumerate() {
                let (a, b) = if i == 0 {
                    (format!("{one:.0}"), format!("{four:.0}"))
                } else {
                    (String::new(), String::new())
                };
                println!(
                    "| {} | {n} | {a} | {b} | {what} | {p50:.2} | {p95:.2} |",
                    place.name()
                );
            }
            if let Place::Postgres(url) = &place {
                recalls.push((n, filtered_recall(url, n).await));
            }
        }
    }
    println!("\n| memories | filter (selectivity) | recall@10 | p50 ms |\n|---|---|---|---|");
    for (n, rows) in recalls {
        for (name, recall, p50) in rows {
            println!("| {n} | {name} | {recall:.3} | {p50:.2} |");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if let Some(dir) = server_dir {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/postgres.sh");
        let _ = Command::new(script).arg("stop").arg(dir).status();
    }
}

fn tempfile_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/memlane-bench")
        .join(format!("stores-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
