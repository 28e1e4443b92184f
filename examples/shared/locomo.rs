//! LoCoMo (Maharana et al., ACL 2024) for the examples: reading the conversations, storing
//! every dialog turn as a memory, the questions with their evidence turns, and the official
//! evidence recall. The data is CC BY-NC 4.0: it is read from the path given, never copied
//! into this crate.
#![allow(dead_code)] // each example uses its own part

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use memlane::{EmbedMode, Embedder, Memory, Message};
use serde_json::{json, Value};
use uuid::Uuid;

pub const KS: [usize; 4] = [5, 10, 25, 50];

/// Category names, in the mapping of the official evaluation code (see the data's README).
pub fn category_name(c: u64) -> &'static str {
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
pub fn evidence_ids(raw: &[Value]) -> Vec<String> {
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
pub struct Score {
    pub questions: usize,
    pub recall: [f64; 4],
    pub all_at_10: f64,
    pub reciprocal_rank: f64,
    /// Questions with any of their evidence in the top 5, and in the top 10.
    pub any_at: [f64; 2],
    /// Questions with all their evidence in the top 5.
    pub all_at_5: f64,
}

impl Score {
    pub fn add(&mut self, ranked: &[String], evidence: &HashSet<String>) {
        self.questions += 1;
        let found = |k: usize| {
            ranked
                .iter()
                .take(k)
                .filter(|d| evidence.contains(*d))
                .count()
        };
        for (i, k) in KS.iter().enumerate() {
            self.recall[i] += found(*k) as f64 / evidence.len() as f64;
        }
        let (top5, top10) = (found(5), found(10));
        if top10 == evidence.len() {
            self.all_at_10 += 1.0;
        }
        if top5 == evidence.len() {
            self.all_at_5 += 1.0;
        }
        self.any_at[0] += f64::from(u8::from(top5 > 0));
        self.any_at[1] += f64::from(u8::from(top10 > 0));
        if let Some(rank) = ranked.iter().position(|d| evidence.contains(d)) {
            self.reciprocal_rank += 1.0 / (rank + 1) as f64;
        }
    }

    /// Adds another set of questions' figures to these.
    pub fn merge(&mut self, other: &Score) {
        self.questions += other.questions;
        for (a, b) in self.recall.iter_mut().zip(other.recall) {
            *a += b;
        }
        self.all_at_10 += other.all_at_10;
        self.reciprocal_rank += other.reciprocal_rank;
        self.all_at_5 += other.all_at_5;
        for (a, b) in self.any_at.iter_mut().zip(other.any_at) {
            *a += b;
        }
    }

    /// `| name | questions | any@5 | all@5 | any@10 | all@10 | MRR |`, in percent but MRR.
    pub fn any_all_row(&self, name: &str) -> String {
        let n = self.questions.max(1) as f64;
        format!(
            "| {name} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} |",
            self.questions,
            100.0 * self.any_at[0] / n,
            100.0 * self.all_at_5 / n,
            100.0 * self.any_at[1] / n,
            100.0 * self.all_at_10 / n,
            self.reciprocal_rank / n
        )
    }

    pub fn row(&self, name: &str) -> String {
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

/// R@10 of each of these categories, as table cells (`–` for a category without questions).
pub fn recall_at_10_cells(per_category: &BTreeMap<u64, Score>, categories: &[u64]) -> Vec<String> {
    categories
        .iter()
        .map(|c| {
            per_category.get(c).map_or("–".into(), |s| {
                format!("{:.1}", 100.0 * s.recall[1] / s.questions.max(1) as f64)
            })
        })
        .collect()
}

pub fn progress(label: &str, done: usize, total: usize) {
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

/// An embedder that answers queries it has seen from a cache, so that a timed search
/// measures the search alone: the questions are embedded once, before the clock starts.
#[derive(Debug)]
pub struct QueryCache {
    inner: Arc<dyn Embedder>,
    cache: Mutex<HashMap<String, Vec<f32>>>,
}

impl QueryCache {
    pub fn new(inner: Arc<dyn Embedder>) -> Self {
        QueryCache {
            inner,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Embeds these queries now, and returns the time it took per query.
    pub async fn warm(&self, queries: &[String]) -> memlane::Result<Duration> {
        let started = Instant::now();
        let mut vectors = Vec::with_capacity(queries.len());
        for query in queries {
            // One at a time, as a search embeds its query.
            vectors.push(self.inner.embed_one(query, EmbedMode::Query).await?);
        }
        let each = started.elapsed() / queries.len().max(1) as u32;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.extend(queries.iter().cloned().zip(vectors));
        Ok(each)
    }
}

#[async_trait::async_trait]
impl Embedder for QueryCache {
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    async fn embed(&self, texts: &[String], mode: EmbedMode) -> memlane::Result<Vec<Vec<f32>>> {
        if mode == EmbedMode::Query {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(hits) = texts.iter().map(|t| cache.get(t).cloned()).collect() {
                return Ok(hits);
            }
        }
        self.inner.embed(texts, mode).await
    }
}

/// A question with resolvable evidence.
pub struct Question {
    /// The conversation's `sample_id`, which is also the user the turns are stored under.
    pub conversation: String,
    pub question: String,
    /// The evidence turns' dialog ids (`D3:14`).
    pub evidence: HashSet<String>,
    pub category: u64,
}

/// LoCoMo stored in a [`Memory`].
pub struct Corpus {
    /// The dialog id of each stored turn.
    pub turn_of: HashMap<Uuid, String>,
    /// The conversations' `sample_id`s, in the file's order.
    pub conversations: Vec<String>,
    pub questions: Vec<Question>,
    pub turns: usize,
    pub ingest: Duration,
}

/// A session's date as LoCoMo writes it, `1:56 pm on 8 May, 2023`, read as UTC.
pub fn session_time(date: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::NaiveDateTime::parse_from_str(date, "%I:%M %p on %d %B, %Y")
        .ok()
        .map(|t| t.and_utc())
}

/// Stores every dialog turn of each conversation as a memory (`infer = false`; the turn is
/// `speaker: text`, plus the photo caption where the turn shares one; one `add` per session,
/// so each turn is indexed with the turn before it as its context; the speaker is
/// `metadata.role`, beside the session and its date; each session is stored as of its date
/// (`timestamp`); each conversation is its own user), and collects every question with
/// resolvable evidence.
pub async fn ingest(
    memory: &Memory,
    samples: &[Value],
) -> Result<Corpus, Box<dyn std::error::Error>> {
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
            let mut add = memory
                .add(messages)
                .user(conv_id.clone())
                .metadata(json!({"session": session, "session_date": date}))
                .infer(false);
            // Stored as of the session's date, as a user importing old chats would.
            if let Some(at) = session_time(date) {
                add = add.timestamp(at);
            }
            let out = add.await?;
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
            questions.push(Question {
                conversation: conv_id.clone(),
                question,
                evidence,
                category: qa["category"].as_u64().unwrap_or(0),
            });
        }
    }
    Ok(Corpus {
        turn_of,
        conversations: samples
            .iter()
            .filter_map(|s| s["sample_id"].as_str().map(str::to_owned))
            .collect(),
        questions,
        turns: total_turns,
        ingest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_dates_are_read() {
        let at = session_time("1:56 pm on 8 May, 2023").map(|t| t.to_rfc3339());
        assert_eq!(at.as_deref(), Some("2023-05-08T13:56:00+00:00"));
        let at = session_time("10:04 am on 19 October, 2023").map(|t| t.to_rfc3339());
        assert_eq!(at.as_deref(), Some("2023-10-19T10:04:00+00:00"));
        assert_eq!(session_time("someday"), None);
    }

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
        assert_eq!((s.all_at_5, s.any_at), (0.0, [1.0, 1.0]));
        assert!((s.reciprocal_rank - 1.0 / 3.0).abs() < 1e-9);
    }
}
