//! Retrieval evaluation on LoCoMo (Maharana et al., ACL 2024).
//!
//! ```sh
//! cargo run --release --example eval_locomo -- ../shared/data/locomo/locomo10.json
//! ```
//!
//! Stores every dialog turn of each conversation as a memory (`infer = false`; the turn is
//! `speaker: text`, plus the photo caption where the turn shares one; one `add` per session,
//! so each turn is indexed with the turn before it as its context; the speaker is
//! `metadata.role`, beside the session and its date; each conversation is its own user), asks every question with
//! resolvable evidence, and reports the official evidence recall at k = 5, 10, 25, 50 (the
//! share of a question's evidence turns found in the top k, averaged over questions),
//! recall-all@10 (every evidence turn in the top 10), MRR (of the first evidence turn within
//! the top 50) and the search latency for each search mode (vector, keyword, hybrid), then
//! a summary table. The questions are embedded once before the searches are timed (the
//! time per question is printed), so the latencies are of the search alone: candidates,
//! scores, and reading the hits from the store.
//!
//! The data is CC BY-NC 4.0: it is read from the path given, never copied into this crate.
//!
//! SQLite and PostgreSQL side by side, in one run (an empty database; `scripts/postgres.sh
//! start DIR` gives a server and prints its connection string):
//! `MEMLANE_EVAL_POSTGRES="host=DIR user=postgres dbname=postgres" cargo run --release
//! --features postgres --example eval_locomo -- ../shared/data/locomo/locomo10.json`
//! evaluates the SQLite store, then the PostgreSQL one, and ends with one table of both.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use std::sync::Arc;

use locomo::{category_name, progress, QueryCache, Score};
use memlane::{Embedder, Memory, MiniLm, SearchMode};
use serde_json::Value;

#[path = "shared/locomo.rs"]
mod locomo;

/// The same evaluation on PostgreSQL: `MEMLANE_EVAL_POSTGRES` names an empty database.
#[cfg(feature = "postgres")]
async fn open_postgres(url: &str, embedder: Arc<QueryCache>) -> memlane::Result<Memory> {
    Memory::builder()
        .postgres(url)
        .embedder(embedder)
        .build()
        .await
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(_url: &str, _embedder: Arc<QueryCache>) -> memlane::Result<Memory> {
    Err(memlane::Error::invalid(
        "MEMLANE_EVAL_POSTGRES needs the example built with --features postgres",
    ))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or(
        "usage: eval_locomo <path to locomo10.json>  (e.g. ../shared/data/locomo/locomo10.json)",
    )?;
    let data: Value = serde_json::from_slice(&std::fs::read(&path)?)?;
    let samples = data
        .as_array()
        .ok_or("locomo10.json should hold an array of conversations")?;
    // SQLite always; PostgreSQL too, in the same run, when a database is named.
    // Queries are embedded once, before searches are timed (see `QueryCache`).
    let embedder = Arc::new(QueryCache::new(Arc::new(MiniLm::load_default()?)));
    let sqlite = Memory::builder()
        .embedder(Arc::clone(&embedder) as Arc<dyn Embedder>)
        .build()
        .await?;
    let mut stores = vec![("SQLite", sqlite)];
    if let Ok(url) = std::env::var("MEMLANE_EVAL_POSTGRES") {
        stores.push((
            "PostgreSQL",
            open_postgres(&url, Arc::clone(&embedder)).await?,
        ));
    }
    let mut summary = Vec::new();
    for (store, memory) in &stores {
        if stores.len() > 1 {
            println!("\n## {store}");
        }
        for row in evaluate(memory, &embedder, samples).await? {
            summary.push(if stores.len() > 1 {
                format!("| {store} {row}")
            } else {
                row
            });
        }
    }
    let store_column = if stores.len() > 1 { "store | " } else { "" };
    let store_rule = if stores.len() > 1 { "---|" } else { "" };
    println!(
        "\n| {store_column}mode | n | R@5 | R@10 | R@25 | R@50 | all@10 | MRR |\n|{store_rule}---|---|---|---|---|---|---|---|"
    );
    for row in summary {
        println!("{row}");
    }
    Ok(())
}

/// Ingests LoCoMo into `memory`, asks every question in each mode, prints the tables, and
/// returns the summary row of each mode.
async fn evaluate(
    memory: &Memory,
    embedder: &QueryCache,
    samples: &[Value],
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let corpus = locomo::ingest(memory, samples).await?;
    let (questions, turn_of) = (&corpus.questions, &corpus.turn_of);
    let (ingest, total_turns) = (corpus.ingest, corpus.turns);
    let texts: Vec<String> = questions.iter().map(|q| q.question.clone()).collect();
    let embedding = embedder.warm(&texts).await?;
    println!(
        "\nLoCoMo evidence recall, {} questions over {} turns (ingest {:.1} s, {:.0} turns/s; \
         a question's embedding {:.1} ms, not in the search latencies below)",
        questions.len(),
        total_turns,
        ingest.as_secs_f64(),
        total_turns as f64 / ingest.as_secs_f64(),
        embedding.as_secs_f64() * 1e3
    );
    let mut summary = Vec::new();
    for mode in [SearchMode::Vector, SearchMode::Keyword, SearchMode::Hybrid] {
        let mut overall = Score::default();
        let mut per_category: BTreeMap<u64, Score> = BTreeMap::new();
        let mut latencies: Vec<Duration> = Vec::with_capacity(questions.len());
        let label = format!("{mode:?}").to_lowercase();
        for (i, q) in questions.iter().enumerate() {
            let (question, evidence, category) = (&q.question, &q.evidence, &q.category);
            let t = Instant::now();
            let hits = memory
                .search(question.as_str())
                .user(q.conversation.as_str())
                .mode(mode)
                .top_k(50)
                .await?;
            latencies.push(t.elapsed());
            let ranked: Vec<String> = hits
                .results
                .iter()
                .filter_map(|h| turn_of.get(&h.record.id).cloned())
                .collect();
            overall.add(&ranked, evidence);
            per_category
                .entry(*category)
                .or_default()
                .add(&ranked, evidence);
            if i % 50 == 0 || i + 1 == questions.len() {
                progress(&label, i + 1, questions.len());
            }
        }
        latencies.sort();
        let p = |q: f64| {
            latencies
                .get(((latencies.len() as f64 - 1.0) * q) as usize)
                .copied()
                .unwrap_or_default()
        };
        println!(
            "\nsearch mode: {label}; latency without the query's embedding: p50 {:.2} ms, p95 {:.2} ms\n",
            p(0.5).as_secs_f64() * 1e3,
            p(0.95).as_secs_f64() * 1e3
        );
        println!("| questions | n | R@5 | R@10 | R@25 | R@50 | all@10 | MRR |\n|---|---|---|---|---|---|---|---|");
        println!("{}", overall.row("all"));
        for (c, score) in &per_category {
            println!("{}", score.row(&format!("{c} {}", category_name(*c))));
        }
        summary.push(overall.row(&format!(
            "{label} (p50 {:.2} ms)",
            p(0.5).as_secs_f64() * 1e3
        )));
    }
    Ok(summary)
}
