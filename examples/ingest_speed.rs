//! How fast verbatim memories go in with the local MiniLM: `add` with `infer(false)`, on a
//! new SQLite store, for texts of about 128 and about 20 tokens.
//!
//! ```sh
//! cargo run --release --example ingest_speed            # 2,000 texts of each length
//! MEMLANE_INGEST_TEXTS=500 cargo run --release --example ingest_speed
//! ```
//!
//! For each length it reports texts per second and the process's CPU use (user and system
//! time, as shares of the wall time and of each other) for:
//! - the embedder alone, every text in one call;
//! - one `add` per text, one after another (an agent storing each turn as it comes);
//! - one `add` per text, 8 at a time (several conversations at once);
//! - `add`s of 16 texts (a conversation imported).
//!
//! The texts are generated here (a fixed vocabulary and seed), so the run needs no data
//! set; the vectors of the first 50 texts of each length are printed as a checksum, so two
//! builds can be compared (`MEMLANE_INGEST_VECTORS=path` writes them all, and a second run
//! with `MEMLANE_INGEST_COMPARE=path` reports the lowest cosine against them).

// An example: panics are its error reporting.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use memlane::{EmbedMode, Embedder, Memory, Message, MiniLm};

const WORDS: &[&str] = &[
    "the",
    "a",
    "and",
    "to",
    "of",
    "in",
    "my",
    "your",
    "for",
    "with",
    "on",
    "at",
    "about",
    "from",
    "that",
    "this",
    "it",
    "is",
    "was",
    "will",
    "would",
    "could",
    "should",
    "can",
    "we",
    "you",
    "they",
    "she",
    "he",
    "our",
    "their",
    "her",
    "his",
    "next",
    "last",
    "week",
    "month",
    "year",
    "today",
    "tomorrow",
    "morning",
    "evening",
    "weekend",
    "trip",
    "flight",
    "hotel",
    "train",
    "station",
    "airport",
    "booking",
    "ticket",
    "price",
    "budget",
    "plan",
    "meeting",
    "project",
    "deadline",
    "report",
    "draft",
    "review",
    "email",
    "message",
    "call",
    "team",
    "manager",
    "client",
    "contract",
    "invoice",
    "payment",
    "account",
    "password",
    "server",
    "database",
    "query",
    "index",
    "memory",
    "cache",
    "latency",
    "error",
    "bug",
    "test",
    "release",
    "version",
    "update",
    "install",
    "configure",
    "deploy",
    "backup",
    "doctor",
    "appointment",
    "medicine",
    "allergy",
    "diet",
    "vegetarian",
    "recipe",
    "dinner",
    "lunch",
    "breakfast",
    "coffee",
    "tea",
    "restaurant",
    "kitchen",
    "garden",
    "house",
    "apartment",
    "rent",
    "move",
    "city",
    "country",
    "language",
    "spanish",
    "french",
    "lesson",
    "course",
    "book",
    "novel",
    "author",
    "movie",
    "music",
    "concert",
    "guitar",
    "piano",
    "running",
    "marathon",
    "gym",
    "yoga",
    "swimming",
    "bike",
    "car",
    "insurance",
    "repair",
    "birthday",
    "gift",
    "party",
    "wedding",
    "family",
    "sister",
    "brother",
    "daughter",
    "son",
    "friend",
    "dog",
    "cat",
    "vet",
    "school",
    "teacher",
    "homework",
    "exam",
    "university",
    "career",
    "interview",
    "salary",
    "promotion",
    "remote",
    "office",
    "laptop",
    "phone",
    "prefer",
    "like",
    "love",
    "hate",
    "avoid",
    "remember",
    "forget",
    "need",
    "want",
    "try",
    "because",
    "however",
    "although",
    "usually",
    "always",
    "never",
    "sometimes",
    "really",
    "quite",
    "very",
    "more",
    "less",
    "early",
    "late",
    "quickly",
    "carefully",
    "new",
    "old",
];

/// A deterministic generator (xorshift), so every run embeds the same texts.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// `n` texts of about `words` words (one MiniLM token each, punctuation and numbers a few
/// more).
fn corpus(n: usize, words: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            let mut text = format!("Note {i}:");
            for w in 0..words {
                let word = WORDS[(rng.next() % WORDS.len() as u64) as usize];
                text.push(' ');
                text.push_str(word);
                if w % 12 == 11 {
                    text.push('.');
                }
            }
            text
        })
        .collect()
}

/// User and system CPU time of this process so far.
fn cpu() -> (Duration, Duration) {
    // /proc/self/stat fields 14 and 15, in clock ticks (100 per second on Linux).
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return (Duration::ZERO, Duration::ZERO);
    };
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (
        Duration::from_millis(ticks(11) * 10),
        Duration::from_millis(ticks(12) * 10),
    )
}

struct Measured {
    texts_per_s: f64,
    user: f64,
    system: f64,
    system_share: f64,
}

async fn measure<F: std::future::Future<Output = ()>>(n: usize, run: F) -> Measured {
    let (u0, s0) = cpu();
    let t = Instant::now();
    run.await;
    let wall = t.elapsed().as_secs_f64();
    let (u1, s1) = cpu();
    let (user, system) = ((u1 - u0).as_secs_f64(), (s1 - s0).as_secs_f64());
    Measured {
        texts_per_s: n as f64 / wall,
        user: user / wall,
        system: system / wall,
        system_share: system / (user + system).max(1e-9),
    }
}

async fn fresh(model: &MiniLm, dir: &std::path::Path, name: &str) -> Memory {
    Memory::builder()
        .path(dir.join(format!("{name}.db")))
        .embedder(Arc::new(model.clone()))
        .build()
        .await
        .unwrap()
}

async fn add_each(memory: &Memory, texts: &[String], in_flight: usize) {
    let memory = memory.clone();
    let chunks: Vec<Vec<String>> = texts
        .chunks(texts.len().div_ceil(in_flight))
        .map(<[String]>::to_vec)
        .collect();
    let tasks: Vec<_> = chunks
        .into_iter()
        .map(|chunk| {
            let memory = memory.clone();
            tokio::spawn(async move {
                for text in chunk {
                    memory
                        .add(vec![Message::user(text)])
                        .user("ana")
                        .infer(false)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

async fn add_batches(memory: &Memory, texts: &[String], per_add: usize) {
    for chunk in texts.chunks(per_add) {
        memory
            .add(chunk.iter().cloned().map(Message::user).collect::<Vec<_>>())
            .user("ana")
            .infer(false)
            .await
            .unwrap();
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("MEMLANE_INGEST_TEXTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let model = MiniLm::load_default().unwrap_or_else(|e| {
        eprintln!("{e}\n(run scripts/fetch-models.sh first)");
        std::process::exit(1)
    });
    let dir = tempfile::tempdir().unwrap();
    let mut all_vectors = Vec::new();
    println!("| texts | way | texts/s | user CPU | system CPU | system share |");
    println!("|---|---|---|---|---|---|");
    // The model's own tokenizer, without the padding and truncation its file asks for,
    // counts each text's tokens ([CLS] and [SEP] included).
    let mut tokenizer =
        tokenizers::Tokenizer::from_file(MiniLm::default_dir().join("tokenizer.json")).unwrap();
    tokenizer.with_padding(None);
    tokenizer.with_truncation(None).unwrap();
    for (label, words, seed) in [("~128 tokens", 110, 7), ("~20 tokens", 14, 11)] {
        let texts = corpus(n, words, seed);
        let tokens: usize = texts
            .iter()
            .map(|t| tokenizer.encode(t.as_str(), true).unwrap().len())
            .sum();
        eprintln!(
            "{label}: {:.1} tokens per text on average",
            tokens as f64 / n as f64
        );
        let mut vectors = Vec::new();
        let alone = measure(n, async {
            vectors = model.embed(&texts, EmbedMode::Document).await.unwrap();
        })
        .await;
        let one = fresh(&model, dir.path(), &format!("{seed}-one")).await;
        let each = measure(n, add_each(&one, &texts, 1)).await;
        let eight = fresh(&model, dir.path(), &format!("{seed}-eight")).await;
        let concurrent = measure(n, add_each(&eight, &texts, 8)).await;
        let sixteen = fresh(&model, dir.path(), &format!("{seed}-sixteen")).await;
        let batched = measure(n, add_batches(&sixteen, &texts, 16)).await;
        for (way, m) in [
            ("embedder alone", alone),
            ("add, one text each, one at a time", each),
            ("add, one text each, 8 at a time", concurrent),
            ("add, 16 texts each", batched),
        ] {
            println!(
                "| {label} | {way} | {:.1} | {:.0}% | {:.0}% | {:.1}% |",
                m.texts_per_s,
                m.user * 100.0,
                m.system * 100.0,
                m.system_share * 100.0
            );
        }
        let checksum: f64 = vectors
            .iter()
            .take(50)
            .flat_map(|v| v.iter().take(8))
            .map(|x| f64::from(*x))
            .sum();
        eprintln!("{label}: checksum of the first vectors {checksum:.6}");
        all_vectors.extend(vectors);
    }
    if let Ok(path) = std::env::var("MEMLANE_INGEST_VECTORS") {
        std::fs::write(path, serde_json::to_string(&all_vectors).unwrap()).unwrap();
    }
    if let Ok(path) = std::env::var("MEMLANE_INGEST_COMPARE") {
        let before: Vec<Vec<f32>> =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(before.len(), all_vectors.len());
        let lowest = before
            .iter()
            .zip(&all_vectors)
            .map(|(a, b)| cosine(a, b))
            .fold(f32::INFINITY, f32::min);
        println!(
            "\nlowest cosine against the saved vectors over {} texts: {lowest:.6}",
            before.len()
        );
    }
}
