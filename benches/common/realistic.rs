//! Realistic vectors for the scale bench: the neighbourhoods of real sentence embeddings,
//! as many as wanted.
//!
//! The bases are real: all-MiniLM-L6-v2 vectors of the texts of LoCoMo's first five
//! conversations (read from `../shared/data/locomo/locomo10.json`, or `MEMLANE_LOCOMO`; never
//! copied): each turn, each of its sentences, the observations, and the sentences of the
//! session and event summaries. Vector `i` is a base moved a random amount along its
//! difference to each of its eight nearest other bases (the directions real texts vary in),
//! plus a little noise in every direction. The two amounts are fitted on those five conversations; `realism` compares
//! the result with the real vectors of the other five, by the nearest-neighbour similarity of
//! equal-sized sets and by the graph's recall on each. The queries are real too: the
//! embeddings of the questions asked about the first five conversations.
//!
//! The embeddings are computed once and kept in `target/memlane-bench/locomo-minilm.bin`.

use std::path::{Path, PathBuf};

use memlane_kernels::vector::dot;

use super::synthetic::{normalise, Rng, DIM};

/// Nearest other bases each base may move toward.
const NEAR: usize = 8;
/// How far a vector moves along its base's difference to each of its neighbours: a normal
/// weight centred a little toward the neighbour (`PULL`, in units of the weight's spread),
/// times `SPREAD`; and how much noise it gets in every direction (`JITTER`, per dimension of
/// a unit vector). Chosen on the source conversations (`MEMLANE_SCALE_FIT=1`): moves of
/// either sign alone spread the set too evenly (random pairs' mean cosine 0.11 against 0.14),
/// moves toward neighbours alone pull it together (0.18 to 0.23).
const SPREAD: f32 = 0.5;
const PULL: f32 = 0.2;
const JITTER: f32 = 0.016;
/// Conversations whose texts are the bases; the others are held out.
const SOURCE: usize = 5;
/// The cache's format (bump when the texts chosen change).
const CACHE_MAGIC: &[u8; 8] = b"MLLOCO01";

/// Real vectors of one half of LoCoMo: its texts' and its questions'.
pub struct RealSet {
    pub texts: Vec<Vec<f32>>,
    pub questions: Vec<Vec<f32>>,
}

impl RealSet {
    /// Question `q`, spread over all of them (every seventh, round and round).
    pub fn question(&self, q: usize) -> Vec<f32> {
        self.questions[(q * 7) % self.questions.len()].clone()
    }
}

/// The generator, with the real vectors it was made from and those held out from it.
pub struct Realistic {
    source: RealSet,
    held_out: RealSet,
    near: Vec<[u32; NEAR]>,
    spread: f32,
    jitter: f32,
}

/// LoCoMo's file: `MEMLANE_LOCOMO`, or the shared data beside the repository.
fn locomo_path() -> PathBuf {
    std::env::var_os("MEMLANE_LOCOMO").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/locomo/locomo10.json"),
        PathBuf::from,
    )
}

/// The texts and questions of each conversation, in the file's order.
fn conversation_texts(path: &Path) -> Vec<(Vec<String>, Vec<String>)> {
    let raw = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "LoCoMo not found at {} ({e}); set MEMLANE_LOCOMO to locomo10.json",
            path.display()
        )
    });
    let data: serde_json::Value = serde_json::from_str(&raw).unwrap();
    // Sentences: split after a full stop, question or exclamation mark followed by a space;
    // fragments of fewer than three words are left out.
    let sentences = |text: &str| -> Vec<String> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = text.as_bytes();
        for (i, &b) in bytes.iter().enumerate() {
            if matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1) == Some(&b' ') {
                out.push(text[start..=i].trim().to_owned());
                start = i + 1;
            }
        }
        out.push(text[start..].trim().to_owned());
        out.retain(|s| s.split_whitespace().count() >= 3);
        out
    };
    let mut out = Vec::new();
    for conversation in data.as_array().unwrap() {
        let mut texts = Vec::new();
        for (key, session) in conversation["conversation"].as_object().unwrap() {
            if !key.starts_with("session_") {
                continue;
            }
            for turn in session.as_array().into_iter().flatten() {
                let Some(text) = turn["text"].as_str() else {
                    continue;
                };
                texts.push(text.to_owned());
                let parts = sentences(text);
                if parts.len() > 1 {
                    texts.extend(parts);
                }
            }
        }
        for sessions in conversation["observation"]
            .as_object()
            .into_iter()
            .flatten()
        {
            for facts in sessions.1.as_object().into_iter().flatten() {
                for fact in facts.1.as_array().into_iter().flatten() {
                    if let Some(text) = fact[0].as_str() {
                        texts.push(text.to_owned());
                    }
                }
            }
        }
        for summary in conversation["session_summary"]
            .as_object()
            .into_iter()
            .flatten()
        {
            texts.extend(sentences(summary.1.as_str().unwrap_or_default()));
        }
        for session in conversation["event_summary"]
            .as_object()
            .into_iter()
            .flatten()
        {
            for events in session.1.as_object().into_iter().flatten() {
                for event in events.1.as_array().into_iter().flatten() {
                    if let Some(text) = event.as_str() {
                        texts.push(text.to_owned());
                    }
                }
            }
        }
        texts.sort();
        texts.dedup();
        let questions = conversation["qa"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|qa| qa["question"].as_str().map(str::to_owned))
            .collect();
        out.push((texts, questions));
    }
    out
}

fn write_vectors(out: &mut Vec<u8>, vectors: &[Vec<f32>]) {
    out.extend_from_slice(&(vectors.len() as u32).to_le_bytes());
    for v in vectors {
        for x in v {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
}

fn read_vectors(bytes: &mut &[u8]) -> Option<Vec<Vec<f32>>> {
    let n = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    *bytes = &bytes[4..];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let chunk = bytes.get(..DIM * 4)?;
        out.push(
            chunk
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        );
        *bytes = &bytes[DIM * 4..];
    }
    Some(out)
}

/// The real vectors of both halves: from the cache, or embedded now (about a minute).
fn real_sets() -> (RealSet, RealSet) {
    let path = locomo_path();
    let cache =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/memlane-bench/locomo-minilm.bin");
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    if let Ok(bytes) = std::fs::read(&cache) {
        let mut rest = &bytes[..];
        if rest.get(..8) == Some(CACHE_MAGIC) && rest.get(8..16) == Some(&size.to_le_bytes()[..]) {
            rest = &rest[16..];
            let sets: Option<Vec<_>> = (0..4).map(|_| read_vectors(&mut rest)).collect();
            if let Some(sets) = sets {
                let mut sets = sets.into_iter();
                let mut next = || sets.next().unwrap();
                let source = RealSet {
                    texts: next(),
                    questions: next(),
                };
                let held_out = RealSet {
                    texts: next(),
                    questions: next(),
                };
                return (source, held_out);
            }
        }
    }
    let conversations = conversation_texts(&path);
    let embedder = memlane::MiniLm::load_default().unwrap();
    let embed = |texts: Vec<String>| -> Vec<Vec<f32>> {
        texts
            .chunks(256)
            .flat_map(|chunk| embedder.embed_blocking(chunk).unwrap())
            .collect()
    };
    let half = |range: std::ops::Range<usize>| {
        let (texts, questions): (Vec<_>, Vec<_>) = conversations[range].iter().cloned().unzip();
        RealSet {
            texts: embed(texts.concat()),
            questions: embed(questions.concat()),
        }
    };
    let source = half(0..SOURCE);
    let held_out = half(SOURCE..conversations.len());
    let mut out = CACHE_MAGIC.to_vec();
    out.extend_from_slice(&size.to_le_bytes());
    for set in [
        &source.texts,
        &source.questions,
        &held_out.texts,
        &held_out.questions,
    ] {
        write_vectors(&mut out, set);
    }
    std::fs::create_dir_all(cache.parent().unwrap()).unwrap();
    std::fs::write(&cache, out).unwrap();
    (source, held_out)
}

/// Each vector's `k` nearest others in `set` (by cosine), by exact search on two threads.
pub fn nearest(
    set: &[Vec<f32>],
    of: &[Vec<f32>],
    k: usize,
    skip_self: bool,
) -> Vec<Vec<(u32, f32)>> {
    let work = |range: std::ops::Range<usize>| -> Vec<Vec<(u32, f32)>> {
        range
            .map(|i| {
                let mut best: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
                for (j, v) in set.iter().enumerate() {
                    if skip_self && i == j {
                        continue;
                    }
                    let s = dot(&of[i], v);
                    if best.len() < k || s > best[best.len() - 1].1 {
                        let at = best.partition_point(|b| b.1 >= s);
                        best.insert(at, (j as u32, s));
                        best.truncate(k);
                    }
                }
                best
            })
            .collect()
    };
    let mid = of.len() / 2;
    std::thread::scope(|s| {
        let first = s.spawn(|| work(0..mid));
        let mut second = work(mid..of.len());
        let mut out = first.join().unwrap();
        out.append(&mut second);
        out
    })
}

impl Realistic {
    /// The generator with its fitted amounts.
    pub fn load() -> Realistic {
        Self::with(SPREAD, JITTER)
    }

    /// The generator with amounts of one's own (for fitting them).
    pub fn with(spread: f32, jitter: f32) -> Realistic {
        let (source, held_out) = real_sets();
        let near = nearest(&source.texts, &source.texts, NEAR, true)
            .into_iter()
            .map(|n| std::array::from_fn(|j| n.get(j).map_or(0, |p| p.0)))
            .collect();
        Realistic {
            source,
            held_out,
            near,
            spread,
            jitter,
        }
    }

    /// Vector `i`: the same in every run.
    pub fn vector(&self, i: usize) -> Vec<f32> {
        let mut rng = Rng::new(i as u64 + 7);
        let a = (rng.next() % self.source.texts.len() as u64) as usize;
        let base = &self.source.texts[a];
        let mut v = base.clone();
        for &b in &self.near[a] {
            let w = self.spread * (rng.gauss() + PULL);
            for ((x, nb), ba) in v.iter_mut().zip(&self.source.texts[b as usize]).zip(base) {
                *x += w * (nb - ba);
            }
        }
        for x in v.iter_mut() {
            *x += self.jitter * rng.gauss();
        }
        normalise(v)
    }

    /// The real vectors the bases came from.
    pub fn source(&self) -> &RealSet {
        &self.source
    }

    /// The real vectors of the conversations the generator never saw.
    pub fn held_out(&self) -> &RealSet {
        &self.held_out
    }
}
