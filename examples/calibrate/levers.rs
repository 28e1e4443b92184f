//! `calibrate --levers`: ways to re-rank the calibrated hybrid top 50 that were measured
//! and not kept, each with its cross-validated recall.
//!
//! A lever is a signal computed over a search's top 50 after the first ranking, which
//! the library could compute for a deeper, slower search mode:
//! - **session max / session sum**: the best / summed first score of the other candidates
//!   stored in the same `add` (a LoCoMo session);
//! - **window**: the best first score of the candidates within three turns of it;
//! - **PRF**: the cosine of the memory with the mean vector of the first three hits
//!   (pseudo-relevance feedback);
//! - **near the first hit**: `1 / (1 + turns apart)` from the first hit, in its session.
//!
//! Each is fitted beside the first score's log-odds, ranking-wise (a logistic model of
//! which of a relevant and an irrelevant candidate of one question comes first), on one
//! half of the conversations and measured on the other, both ways, over the first ranking
//! of the calibration fitted on the same half.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use memlane::{Calibration, EmbedMode, Memory, SearchMode};

use super::locomo::{self, category_name, Corpus, Score};
use super::{search, Pool, Scorer, TOP_K};

/// The levers' inputs for one candidate: `[first log-odds, session max, session sum,
/// window max, PRF, near the first hit]`.
type Inputs = [f64; 6];

const LEVERS: [(&str, &[usize]); 6] = [
    ("first ranking (calibrated)", &[0]),
    ("+ session max", &[0, 1]),
    ("+ session sum", &[0, 2]),
    ("+ window of 3 turns", &[0, 3]),
    ("+ PRF (first 3 hits)", &[0, 4]),
    ("+ near the first hit", &[0, 5]),
];

/// `D3:12` → (3, 12).
fn position(turn: &str) -> (u32, u32) {
    let mut parts = turn.trim_start_matches('D').split(':');
    let mut next = || parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (next(), next())
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    f64::from(dot / (norm(a) * norm(b)).max(1e-9))
}

/// The top 50 of a pool's calibrated hybrid search, with each candidate's lever inputs.
fn inputs(
    pool: &Pool,
    calibration: Calibration,
    vector: &dyn Fn(&str) -> Option<Vec<f32>>,
) -> Vec<(Inputs, bool, String)> {
    let hits = search(
        SearchMode::Hybrid,
        Scorer::Fitted(calibration),
        &pool.candidates,
        TOP_K,
    );
    let at: Vec<(u32, u32)> = hits.iter().map(|(c, _)| position(&c.turn)).collect();
    let vectors: Vec<Vec<f32>> = hits
        .iter()
        .map(|(c, _)| vector(&c.turn).unwrap_or_default())
        .collect();
    let mut centroid = vec![0.0f32; vectors.first().map_or(0, Vec::len)];
    for v in vectors.iter().take(3) {
        for (c, x) in centroid.iter_mut().zip(v) {
            *c += x;
        }
    }
    hits.iter()
        .enumerate()
        .map(|(i, (c, p))| {
            let p = f64::from(*p).clamp(1e-6, 1.0 - 1e-6);
            let (mut best, mut sum, mut window) = (0.0f64, 0.0, 0.0f64);
            for (j, (_, q)) in hits.iter().enumerate() {
                if j != i && at[j].0 == at[i].0 {
                    best = best.max(f64::from(*q));
                    sum += f64::from(*q);
                    if at[j].1.abs_diff(at[i].1) <= 3 {
                        window = window.max(f64::from(*q));
                    }
                }
            }
            let near = if i > 0 && at[0].0 == at[i].0 {
                1.0 / (1.0 + f64::from(at[0].1.abs_diff(at[i].1)))
            } else {
                0.0
            };
            let x = [
                (p / (1.0 - p)).ln(),
                best,
                sum,
                window,
                cosine(&vectors[i], &centroid),
                near,
            ];
            (x, c.relevant, c.turn.clone())
        })
        .collect()
}

/// Weights of a ranking model over the chosen inputs: logistic regression on the
/// differences of (relevant, irrelevant) pairs of one question, by Newton's method.
fn fit_pairs(rows: &[Vec<(Inputs, bool, String)>], chosen: &[usize]) -> Vec<f64> {
    let d = chosen.len();
    let mut pairs: Vec<Vec<f64>> = Vec::new();
    for question in rows {
        for (a, _, _) in question.iter().filter(|r| r.1) {
            for (b, _, _) in question.iter().filter(|r| !r.1) {
                pairs.push(chosen.iter().map(|&k| a[k] - b[k]).collect());
            }
        }
    }
    let mut w = vec![0.0f64; d];
    for _ in 0..25 {
        let mut gradient = vec![0.0; d];
        let mut hessian = vec![vec![0.0; d]; d];
        // Each pair both ways: the model is odd, so one side's terms suffice twice.
        for x in &pairs {
            let z: f64 = x.iter().zip(&w).map(|(x, w)| x * w).sum();
            let p = 1.0 / (1.0 + (-z).exp());
            for i in 0..d {
                gradient[i] += (1.0 - p) * x[i];
                for j in 0..d {
                    hessian[i][j] += p * (1.0 - p) * x[i] * x[j];
                }
            }
        }
        for i in 0..d {
            gradient[i] -= 1e-3 * w[i];
            hessian[i][i] += 1e-3;
        }
        // Gauss–Jordan on the small system.
        let mut b = gradient;
        for col in 0..d {
            let pivot = (col..d)
                .max_by(|&p, &q| hessian[p][col].abs().total_cmp(&hessian[q][col].abs()))
                .unwrap_or(col);
            hessian.swap(col, pivot);
            b.swap(col, pivot);
            for row in 0..d {
                if row != col && hessian[col][col] != 0.0 {
                    let f = hessian[row][col] / hessian[col][col];
                    let pivot_row = hessian[col].clone();
                    for (x, p) in hessian[row].iter_mut().zip(pivot_row) {
                        *x -= f * p;
                    }
                    b[row] -= f * b[col];
                }
            }
        }
        for i in 0..d {
            if hessian[i][i] != 0.0 {
                w[i] += b[i] / hessian[i][i];
            }
        }
    }
    w
}

/// Measures every lever and prints one table.
pub async fn measure(
    memory: &Memory,
    corpus: &Corpus,
    pools: &[Pool],
    folds: &[Calibration],
    fold_of: &dyn Fn(&Pool) -> usize,
    texts: &HashMap<(String, String), String>,
) -> Result<(), Box<dyn std::error::Error>> {
    let embedder = memory
        .embedder()
        .ok_or("the levers need the default embedder")?;
    let keys: Vec<&(String, String)> = texts.keys().collect();
    let mut vectors: HashMap<(String, String), Vec<f32>> = HashMap::new();
    for chunk in keys.chunks(64) {
        let batch: Vec<String> = chunk.iter().map(|k| texts[*k].clone()).collect();
        for (key, v) in chunk
            .iter()
            .zip(embedder.embed(&batch, EmbedMode::Document).await?)
        {
            vectors.insert((*key).clone(), v);
        }
    }
    // Each fold's inputs over its measured pools and its fitting pools.
    let mut spent = Duration::ZERO;
    let mut by_fold: Vec<Vec<Vec<(Inputs, bool, String)>>> = Vec::new();
    for calibration in folds {
        let started = Instant::now();
        let rows = pools
            .iter()
            .map(|p| {
                let conv = &corpus.questions[p.question].conversation;
                inputs(p, *calibration, &|turn: &str| {
                    vectors.get(&(conv.clone(), turn.to_owned())).cloned()
                })
            })
            .collect();
        spent += started.elapsed();
        by_fold.push(rows);
    }
    println!(
        "\nLevers over the calibrated hybrid top {TOP_K}, fitted ranking-wise on one half, \
         measured on the other ({:.2} ms per question to compute them all, vectors given)\n",
        spent.as_secs_f64() * 1e3 / (2 * pools.len()).max(1) as f64
    );
    let names: Vec<u64> = corpus
        .questions
        .iter()
        .map(|q| q.category)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let head: Vec<&str> = names.iter().map(|c| category_name(*c)).collect();
    println!(
        "| lever | n | R@5 | R@10 | R@25 | R@50 | all@10 | MRR | R@10 {} |",
        head.join(" | R@10 ")
    );
    println!(
        "|---|---|---|---|---|---|---|---|{}",
        "---|".repeat(names.len())
    );
    for (name, chosen) in LEVERS {
        let mut total = Score::default();
        let mut per_category: BTreeMap<u64, Score> = BTreeMap::new();
        for (fold, rows) in by_fold.iter().enumerate() {
            let fitting: Vec<Vec<(Inputs, bool, String)>> = pools
                .iter()
                .zip(rows)
                .filter(|(p, _)| fold_of(p) != fold)
                .map(|(_, r)| r.clone())
                .collect();
            let w = fit_pairs(&fitting, chosen);
            for (p, r) in pools.iter().zip(rows).filter(|(p, _)| fold_of(p) == fold) {
                let mut ranked: Vec<(f64, &str)> = r
                    .iter()
                    .map(|(x, _, turn)| {
                        let z: f64 = chosen.iter().zip(&w).map(|(&k, w)| x[k] * w).sum();
                        (z, turn.as_str())
                    })
                    .collect();
                ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
                let ids: Vec<String> = ranked.into_iter().map(|(_, t)| t.to_owned()).collect();
                let q = &corpus.questions[p.question];
                total.add(&ids, &q.evidence);
                per_category
                    .entry(q.category)
                    .or_default()
                    .add(&ids, &q.evidence);
            }
        }
        let cells = locomo::recall_at_10_cells(&per_category, &names);
        println!("{} {} |", total.row(name), cells.join(" | "));
    }
    Ok(())
}
