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
//! the top 50) and the end-to-end search latency, query embedding included, for each search
//! mode (vector, keyword, hybrid), then a summary table.
//!
//! The data is CC BY-NC 4.0: it is read from the path given, never copied into this crate.
//!
//! SQLite and PostgreSQL side by side, in one run (an empty database; `scripts/postgres.sh
//! start DIR` gives a server and prints its connection string):
//! `MEMLANE_EVAL_POSTGRES="host=DIR user=postgres dbname=postgres" cargo run --release
//! --features postgres --example eval_locomo -- ../shared/data/locomo/locomo10.json`
//! evaluates the SQLite store, then the PostgreSQL one, and ends with one table of both.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write as _;
use std::time::{Duration, Instant};

use memlane::{Memory, Message, SearchMode};
use serde_json::{json, Value};
use uuid::Uuid;

const KS: [usize; 4] = [5, 10, 25, 50];

/// Category names, in the mapping of the official evaluation code (see the data's README).
fn category_name(c: u64) -> &'static str {
    match c {
        1 => "multi-hop",
        2 => "temporal",
        3 => "open-domain",
        4 => "single-hop",
        5 => "adversarial",
        _ => "other",
    }
}

/// Evidence ids as written, split and normalised: `"D8:6; D9:17"` → two ids, `"D:11:26"` →
/// `D11:26`, `"D30:05"` → `D30:5`. Ids that name no turn are dropped by the caller.
fn evidence_ids(raw: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for item in raw.iter().filter_map(Value::as_str) {
        for piece in item
            .split(|c: char| c == ';' || c.is_whitespace())
            .filter(|p| !p.is_empty())
        {
            let digits: Vec<&str> = piece
                .trim_start_matches('D')
                .split(':')
                .filter(|p| !p.is_empty())
                .collect();
            if let [session, turn] = digits[..] {
                if let (Ok(s), Ok(t)) = (session.parse::<u32>(), turn.parse::<u32>()) {
                    let id = format!("D{s}:{t}");
                    if !out.contains(&id) {
                        out.push(id);
                    }
                }
            }
        }
    }
    out
}

#[derive(Default, Clone)]
struct Score {
    questions: usize,
    recall: [f64; 4],
    all_at_10: f64,
    reciprocal_rank: f64,
}

impl Score {
    fn add(&mut self, ranked: &[String], evidence: &HashSet<String>) {
        self.questions += 1;
        for (i, k) in KS.iter().enumerate() {
            let found = ranked
                .iter()
                .take(*k)
                .filter(|d| evidence.contains(*d))
                .count();
            self.recall[i] += found as f64 / evidence.len() as f64;
        }
        let top10 = ranked
            .iter()
            .take(10)
            .filter(|d| evidence.contains(*d))
            .count();
        if top10 == evidence.len() {
            self.all_at_10 += 1.0;
        }
        if let Some(rank) = ranked.iter().position(|d| evidence.contains(d)) {
            self.reciprocal_rank += 1.0 / (rank + 1) as f64;
        }
    }

    fn row(&self, name: &str) -> String {
        let n = self.questions.max(1) as f64;
        format!(
            "| {name} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} |",
            self.questions,
            100.0 * self.recall[0] / n,
            100.0 * self.recall[1] / n,
            100.0 * self.recall[2] / n,
            100.0 * self.recall[3] / n,
            100.0 * self.all_at_10 / n,
            self.reciprocal_rank / n
        )
    }
}

fn progress(label: &str, done: usize, total: usize) {
    let width = 40;
    let filled = width * done / total.max(1);
    eprint!(
        "\r{label:>9} [{}{}] {done}/{total}",
        "#".repeat(filled),
        " ".repeat(width - filled)
    );
    if done == total {
        eprintln!();
    }
    let _ = std::io::stderr().flush();
}

/// The same evaluation on PostgreSQL: `MEMLANE_EVAL_POSTGRES` names an empty database.
#[cfg(feature = "postgres")]
async fn open_postgres(url: &str) -> memlane::Result<Memory> {
    Memory::builder().postgres(url).build().await
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(_url: &str) -> memlane::Result<Memory> {
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
    let mut stores = vec![("SQLite", Memory::in_memory().await?)];
    if let Ok(url) = std::env::var("MEMLANE_EVAL_POSTGRES") {
        stores.push(("PostgreSQL", open_postgres(&url).await?));
    }
    let mut summary = Vec::new();
    for (store, memory) in &stores {
        if stores.len() > 1 {
            println!("\n## {store}");
        }
        for row in evaluate(memory, samples).await? {
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
    samples: &[Value],
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    // Ingest: one `add` per (session, speaker), so each memory carries its speaker and
    // session date; the results come back in message order, which maps ids to turns.
    let total_turns: usize = samples
        .iter()
        .filter_map(|s| s["conversation"].as_object())
        .flat_map(|c| {
            c.iter()
                .filter(|(k, v)| k.starts_with("session_") && v.is_array())
        })
        .map(|(_, v)| v.as_array().map_or(0, Vec::len))
        .sum();
    let mut turn_of: HashMap<Uuid, String> = HashMap::new();
    let mut turns_of: HashMap<String, HashSet<String>> = HashMap::new();
    let started = Instant::now();
    let mut done = 0;
    for sample in samples {
        let conv_id = sample["sample_id"]
            .as_str()
            .ok_or("sample without sample_id")?
            .to_owned();
        let conv = sample["conversation"]
            .as_object()
            .ok_or("sample without conversation")?;
        let mut session = 1;
        while let Some(turns) = conv
            .get(&format!("session_{session}"))
            .and_then(Value::as_array)
        {
            let date = conv
                .get(&format!("session_{session}_date_time"))
                .and_then(Value::as_str)
                .unwrap_or("");
            // One `add` per session: each turn is read with the turn before it, and keeps
            // its speaker as `metadata.role`.
            let mut messages = Vec::with_capacity(turns.len());
            let mut ids = Vec::with_capacity(turns.len());
            for turn in turns {
                let speaker = turn["speaker"].as_str().unwrap_or("?");
                let mut text = format!("{speaker}: {}", turn["text"].as_str().unwrap_or(""));
                if let Some(caption) = turn.get("blip_caption").and_then(Value::as_str) {
                    text.push_str(&format!(" [shares a photo of {caption}]"));
                }
                messages.push(Message::new(speaker, text));
                ids.push(turn["dia_id"].as_str().unwrap_or("?").to_owned());
            }
            let out = memory
                .add(messages)
                .user(conv_id.clone())
                .metadata(json!({"session": session, "session_date": date}))
                .infer(false)
                .await?;
            for (result, dia_id) in out.results.iter().zip(&ids) {
                turn_of.insert(result.id, dia_id.clone());
                turns_of
                    .entry(conv_id.clone())
                    .or_default()
                    .insert(dia_id.clone());
            }
            done += ids.len();
            progress("ingest", done, total_turns);
            session += 1;
        }
    }
    let ingest = started.elapsed();

    // Ask.
    let mut questions = Vec::new();
    for sample in samples {
        let conv_id = sample["sample_id"].as_str().unwrap_or("").to_owned();
        let known = turns_of.get(&conv_id).cloned().unwrap_or_default();
        for qa in sample["qa"].as_array().into_iter().flatten() {
            let evidence: HashSet<String> =
                evidence_ids(qa["evidence"].as_array().map_or(&[][..], Vec::as_slice))
                    .into_iter()
                    .filter(|id| known.contains(id))
                    .collect();
            if evidence.is_empty() {
                continue; // nothing to retrieve (4 questions), or only unresolvable ids
            }
            let question = qa["question"].as_str().unwrap_or("").to_owned();
            questions.push((
                conv_id.clone(),
                question,
                evidence,
                qa["category"].as_u64().unwrap_or(0),
            ));
        }
    }
    println!(
        "\nLoCoMo evidence recall, {} questions over {} turns (ingest {:.1} s, {:.0} turns/s)",
        questions.len(),
        total_turns,
        ingest.as_secs_f64(),
        total_turns as f64 / ingest.as_secs_f64()
    );
    let mut summary = Vec::new();
    for mode in [SearchMode::Vector, SearchMode::Keyword, SearchMode::Hybrid] {
        let mut overall = Score::default();
        let mut per_category: BTreeMap<u64, Score> = BTreeMap::new();
        let mut latencies: Vec<Duration> = Vec::with_capacity(questions.len());
        let label = format!("{mode:?}").to_lowercase();
        for (i, (conv_id, question, evidence, category)) in questions.iter().enumerate() {
            let t = Instant::now();
            let hits = memory
                .search(question.as_str())
                .user(conv_id.as_str())
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
            "\nsearch mode: {label}; latency with query embedding: p50 {:.1} ms, p95 {:.1} ms\n",
            p(0.5).as_secs_f64() * 1e3,
            p(0.95).as_secs_f64() * 1e3
        );
        println!("| questions | n | R@5 | R@10 | R@25 | R@50 | all@10 | MRR |\n|---|---|---|---|---|---|---|---|");
        println!("{}", overall.row("all"));
        for (c, score) in &per_category {
            println!("{}", score.row(&format!("{c} {}", category_name(*c))));
        }
        summary.push(overall.row(&format!(
            "{label} (p50 {:.1} ms)",
            p(0.5).as_secs_f64() * 1e3
        )));
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_defects_are_repaired() {
        let raw = vec![
            json!("D8:6; D9:17"),
            json!("D:11:26"),
            json!("D30:05"),
            json!("D"),
            json!("D8:6"),
        ];
        assert_eq!(evidence_ids(&raw), vec!["D8:6", "D9:17", "D11:26", "D30:5"]);
    }

    #[test]
    fn recall_follows_the_official_definition() {
        let mut s = Score::default();
        let ranked: Vec<String> = (1..=60).map(|i| format!("D1:{i}")).collect();
        let evidence: HashSet<String> = ["D1:3", "D1:30"].iter().map(|s| s.to_string()).collect();
        s.add(&ranked, &evidence);
        assert_eq!(s.recall, [0.5, 0.5, 0.5, 1.0]);
        assert_eq!(s.all_at_10, 0.0);
        assert!((s.reciprocal_rank - 1.0 / 3.0).abs() < 1e-9);
    }
}
