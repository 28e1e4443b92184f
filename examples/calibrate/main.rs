//! Fits the score calibration of each search mode on LoCoMo's question → evidence labels,
//! and measures it honestly: fitted on five conversations, measured on the other five, then
//! swapped.
//!
//! ```sh
//! cargo run --release --example calibrate -- ../shared/data/locomo/locomo10.json
//! ```
//!
//! Stores LoCoMo as `eval_locomo` does, then, for each question, reads every turn of its
//! conversation with both signals (a hybrid search of `top_k` 1000 returns them all, each
//! with its cosine and keyword match). From those, each mode's search of `top_k` 50 is
//! replayed exactly as the library runs it: the candidates it considers (the 50 nearest
//! vectors; the 200 best BM25 matches; both, for hybrid), scored, best first.
//!
//! Reported, on the measured halves only:
//! - recall at 5, 10, 25 and 50 (official evidence recall), all@10 and MRR, per mode, with
//!   the scores of memlane 0.x before calibration (cosine; BM25; `0.3 · cosine + 0.7 ·
//!   BM25 / (BM25 + 5)`) and with the fitted models, and per question category;
//! - the expected calibration error (ECE: 10 equal bins of score, over the top 50 of each
//!   question, the gap between mean score and share of evidence, weighted by bin size);
//! - per threshold 0.1–0.9, the share of evidence in the top 50 kept and the share of other
//!   candidates dropped.
//!
//! Last, the models fitted on all ten conversations, as the `Calibration` to ship. Fit on
//! data of your own the same way: label, for some queries, which of the candidates your
//! searches consider are relevant, and give `Logistic::fit` the signals and labels.
//!
//! With `--bfcl <dir>` (the directory `scripts/fetch-eval-data.sh` prints), it also stores
//! the BFCL memory set twice, as conversations (turns) and as a store of facts (sentences,
//! each on its own; see `examples/shared/bfcl.rs`), and measures each kind with the models
//! fitted on the other: any@5, all@5, any@10, all@10 and MRR per mode, beside plain BM25.
//! `--dialogue` adds a third kind: the turns as a user–assistant chat, each followed by a
//! reply the language model writes (the local one, on llama.cpp with `--features llama`
//! and `--llama`, or a server's with `OPENAI_BASE_URL`), kept beside the set so that a
//! second run writes none.
//!
//! With `--levers` after the path, it measures instead the ways of re-ranking the top 50
//! that were tried for a deeper search and not kept (see `levers.rs`).

use std::collections::{BTreeMap, HashMap, HashSet};

use locomo::{category_name, Question, Score};
use memlane::{Calibration, Logistic, Memory, SearchMode, Signals};
use serde_json::Value;

#[path = "../shared/bfcl.rs"]
mod bfcl;
#[path = "../shared/eval_llm.rs"]
mod eval_llm;
mod levers;
#[path = "../shared/locomo.rs"]
mod locomo;

/// The `top_k` of the replayed searches.
const TOP_K: usize = 50;
const MODES: [SearchMode; 3] = [SearchMode::Vector, SearchMode::Keyword, SearchMode::Hybrid];

/// A turn of the question's conversation, with its signals for the question.
#[derive(Clone)]
struct Candidate {
    /// The turn's dialog id.
    turn: String,
    relevant: bool,
    signals: Signals,
}

/// A question with every turn of its conversation as a candidate.
struct Pool {
    question: usize,
    candidates: Vec<Candidate>,
}

/// How a replayed search scores a candidate.
#[derive(Clone, Copy)]
enum Scorer {
    /// memlane 0.x: the cosine; BM25; `0.3 · cosine + 0.7 · squash(BM25)`.
    Before,
    /// A calibration.
    Fitted(Calibration),
}

impl Scorer {
    fn score(&self, mode: SearchMode, s: &Signals) -> f32 {
        let bm25 = s.keyword.map_or(0.0, |k| k.bm25);
        match self {
            Scorer::Fitted(c) => c.score(mode, s),
            Scorer::Before => match mode {
                SearchMode::Vector => s.cosine.unwrap_or(0.0),
                SearchMode::Keyword => bm25,
                _ => 0.3 * s.cosine.unwrap_or(0.0).max(0.0) + 0.7 * bm25 / (bm25 + 5.0),
            },
        }
    }
}

/// The candidates a search of `k` in `mode` considers, as the library takes them.
fn considered(mode: SearchMode, pool: &[Candidate], k: usize) -> Vec<&Candidate> {
    let fetch = (4 * k).clamp(60, 1000).max(k);
    let by = |key: &dyn Fn(&Candidate) -> Option<f32>, n: usize| -> Vec<usize> {
        let mut order: Vec<(usize, f32)> = pool
            .iter()
            .enumerate()
            .filter_map(|(i, c)| key(c).map(|v| (i, v)))
            .collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1));
        order.into_iter().take(n).map(|(i, _)| i).collect()
    };
    let cosine = |c: &Candidate| c.signals.cosine;
    let bm25 = |c: &Candidate| c.signals.keyword.map(|k| k.bm25);
    let chosen: Vec<usize> = match mode {
        SearchMode::Vector => by(&cosine, k),
        SearchMode::Keyword => by(&bm25, fetch),
        _ => {
            let mut both = by(&cosine, fetch);
            let seen: HashSet<usize> = both.iter().copied().collect();
            both.extend(by(&bm25, fetch).into_iter().filter(|i| !seen.contains(i)));
            both
        }
    };
    chosen.into_iter().map(|i| &pool[i]).collect()
}

/// A replayed search: the top `k` of what the mode considers, with their scores.
fn search(
    mode: SearchMode,
    scorer: Scorer,
    pool: &[Candidate],
    k: usize,
) -> Vec<(&Candidate, f32)> {
    let mut ranked: Vec<(&Candidate, f32)> = considered(mode, pool, k)
        .into_iter()
        .map(|c| (c, scorer.score(mode, &c.signals)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    ranked.truncate(k);
    ranked
}

/// Fits the model of a mode on some pools, beside the other models of `calibration`: on
/// what the mode considers at first, then twice more on the top 50 of its own ranking,
/// where thresholds are applied.
fn fit_model(
    mode: SearchMode,
    pools: &[&Pool],
    calibration: Calibration,
) -> Result<Logistic, memlane::Error> {
    let samples = |scorer: Scorer| -> Vec<(Signals, bool)> {
        pools
            .iter()
            .flat_map(|p| match scorer {
                Scorer::Before => considered(mode, &p.candidates, TOP_K),
                Scorer::Fitted(_) => search(mode, scorer, &p.candidates, TOP_K)
                    .into_iter()
                    .map(|(c, _)| c)
                    .collect(),
            })
            .map(|c| (c.signals, c.relevant))
            .collect()
    };
    let mut fitted = Logistic::fit(mode, &samples(Scorer::Before))?;
    for _ in 0..2 {
        fitted = Logistic::fit(
            mode,
            &samples(Scorer::Fitted(with(calibration, mode, fitted))),
        )?;
    }
    Ok(fitted)
}

/// Every model, fitted on some pools.
fn fit(pools: &[&Pool]) -> Result<Calibration, memlane::Error> {
    let mut c = Calibration::FITTED;
    for mode in MODES {
        let fitted = fit_model(mode, pools, c)?;
        c = with(c, mode, fitted);
    }
    Ok(c)
}

/// A calibration with one mode's model replaced.
fn with(mut c: Calibration, mode: SearchMode, fitted: Logistic) -> Calibration {
    match mode {
        SearchMode::Vector => c.vector = fitted,
        SearchMode::Keyword => c.keyword = fitted,
        _ => c.hybrid = fitted,
    }
    c
}

/// Scores and labels of the top 50 of measured searches, for calibration figures.
#[derive(Default)]
struct Outcomes {
    scored: Vec<(f32, bool)>,
}

impl Outcomes {
    /// The expected calibration error over 10 equal-width bins.
    fn ece(&self) -> f64 {
        let mut bins = [(0usize, 0.0f64, 0usize); 10];
        for &(p, y) in &self.scored {
            let b = ((p * 10.0) as usize).min(9);
            bins[b].0 += 1;
            bins[b].1 += f64::from(p);
            bins[b].2 += usize::from(y);
        }
        let n = self.scored.len().max(1) as f64;
        bins.iter()
            .filter(|b| b.0 > 0)
            .map(|&(count, sum, pos)| {
                let c = count as f64;
                c / n * (sum / c - pos as f64 / c).abs()
            })
            .sum()
    }

    /// At threshold `t`: the share of evidence kept and of other candidates dropped.
    fn at(&self, t: f32) -> (f64, f64) {
        let evidence = self.scored.iter().filter(|s| s.1).count().max(1) as f64;
        let other = self.scored.iter().filter(|s| !s.1).count().max(1) as f64;
        let kept = self.scored.iter().filter(|s| s.1 && s.0 >= t).count() as f64;
        let dropped = self.scored.iter().filter(|s| !s.1 && s.0 < t).count() as f64;
        (kept / evidence, dropped / other)
    }
}

/// Measures a scorer on some pools: recall (overall and per category) and outcomes.
fn measure(
    mode: SearchMode,
    scorer: Scorer,
    pools: &[&Pool],
    questions: &[Question],
) -> (Score, BTreeMap<u64, Score>, Outcomes) {
    let mut overall = Score::default();
    let mut per_category: BTreeMap<u64, Score> = BTreeMap::new();
    let mut outcomes = Outcomes::default();
    for pool in pools {
        let q = &questions[pool.question];
        let hits = search(mode, scorer, &pool.candidates, TOP_K);
        let ranked: Vec<String> = hits.iter().map(|(c, _)| c.turn.clone()).collect();
        overall.add(&ranked, &q.evidence);
        per_category
            .entry(q.category)
            .or_default()
            .add(&ranked, &q.evidence);
        outcomes
            .scored
            .extend(hits.iter().map(|(c, s)| (*s, c.relevant)));
    }
    (overall, per_category, outcomes)
}

/// Every turn of each question's conversation, with its signals (and, with `texts`, the
/// text it was indexed with).
async fn pools_of(
    memory: &Memory,
    corpus: &locomo::Corpus,
    mut texts: Option<&mut HashMap<(String, String), String>>,
) -> Result<Vec<Pool>, memlane::Error> {
    let mut pools = Vec::with_capacity(corpus.questions.len());
    for (i, q) in corpus.questions.iter().enumerate() {
        let hits = memory
            .search(q.question.as_str())
            .user(q.conversation.as_str())
            .mode(SearchMode::Hybrid)
            .top_k(1000)
            .await?;
        let candidates = hits
            .results
            .iter()
            .filter_map(|h| {
                let turn = corpus.turn_of.get(&h.record.id)?.clone();
                if let Some(texts) = texts.as_deref_mut() {
                    texts
                        .entry((q.conversation.clone(), turn.clone()))
                        .or_insert_with(|| h.record.indexed_text());
                }
                Some(Candidate {
                    relevant: q.evidence.contains(&turn),
                    turn,
                    signals: h.signals,
                })
            })
            .collect();
        pools.push(Pool {
            question: i,
            candidates,
        });
        if i % 50 == 0 || i + 1 == corpus.questions.len() {
            locomo::progress("signals", i + 1, corpus.questions.len());
        }
    }
    Ok(pools)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).filter(|a| !a.starts_with("--")).ok_or(
        "usage: calibrate <path to locomo10.json> [--bfcl <dir> [--dialogue [--llama]]] \
         [--levers]  (e.g. ../shared/data/locomo/locomo10.json --bfcl \
         \"$(scripts/fetch-eval-data.sh)\")",
    )?;
    let data: Value = serde_json::from_slice(&std::fs::read(path)?)?;
    let samples = data
        .as_array()
        .ok_or("locomo10.json should hold an array of conversations")?;
    let with_levers = args.iter().any(|a| a == "--levers");
    let with_dialogue = args.iter().any(|a| a == "--dialogue");
    let bfcl_dir = args
        .iter()
        .position(|a| a == "--bfcl")
        .map(|i| {
            args.get(i + 1)
                .ok_or("--bfcl needs the directory of the set")
        })
        .transpose()?;
    let memory = Memory::in_memory().await?;
    let corpus = locomo::ingest(&memory, samples).await?;
    let mut texts: HashMap<(String, String), String> = HashMap::new();
    let pools = pools_of(&memory, &corpus, with_levers.then_some(&mut texts)).await?;

    // Two folds by conversation: the first five and the last five.
    let half = corpus.conversations.len() / 2;
    let fold_of = |p: &Pool| {
        let conv = &corpus.questions[p.question].conversation;
        usize::from(
            corpus
                .conversations
                .iter()
                .position(|c| c == conv)
                .unwrap_or(0)
                >= half,
        )
    };
    let mut folds = Vec::new();
    for fold in 0..2 {
        let train: Vec<&Pool> = pools.iter().filter(|p| fold_of(p) != fold).collect();
        let calibration = fit(&train)?;
        eprintln!("fold {fold}: {calibration:?}");
        folds.push(calibration);
    }
    if with_levers {
        levers::measure(&memory, &corpus, &pools, &folds, &fold_of, &texts).await?;
        return Ok(());
    }
    println!(
        "\nLoCoMo, {} questions; fitted on one half of the conversations, measured on the \
         other (both ways)\n",
        pools.len()
    );
    let mut thresholds = Vec::new();
    println!("| mode | scores | R@5 | R@10 | R@25 | R@50 | all@10 | MRR | ECE |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut categories = Vec::new();
    for mode in MODES {
        let mut totals: [(Score, BTreeMap<u64, Score>, Outcomes); 2] = Default::default();
        for (fold, calibration) in folds.iter().enumerate() {
            let test: Vec<&Pool> = pools.iter().filter(|p| fold_of(p) == fold).collect();
            for (i, scorer) in [Scorer::Before, Scorer::Fitted(*calibration)]
                .into_iter()
                .enumerate()
            {
                let (score, per_category, outcomes) =
                    measure(mode, scorer, &test, &corpus.questions);
                let total = &mut totals[i];
                total.0.merge(&score);
                for (c, s) in per_category {
                    total.1.entry(c).or_default().merge(&s);
                }
                total.2.scored.extend(outcomes.scored);
            }
        }
        for (i, (score, per_category, outcomes)) in totals.iter().enumerate() {
            let name = format!(
                "{} | {}",
                format!("{mode:?}").to_lowercase(),
                ["before", "calibrated"][i]
            );
            let row = score.row(&name);
            // `row` ends with MRR; the ECE of the scores before calibration is not one of a
            // probability, except for the vector mode's cosine, but it is shown for each.
            let row = row.replacen(&format!("| {} |", score.questions), "|", 1);
            println!("{row} {:.3} |", outcomes.ece());
            categories.push((name.clone(), per_category.clone()));
            if i == 1 {
                thresholds.push((mode, outcomes.scored.clone()));
            }
        }
    }

    println!("\nR@10 per category, measured halves\n");
    let names: Vec<u64> = categories
        .first()
        .map(|(_, c)| c.keys().copied().collect())
        .unwrap_or_default();
    let head: Vec<String> = names.iter().map(|c| category_name(*c).to_owned()).collect();
    println!("| mode | scores | {} |", head.join(" | "));
    println!("|---|---|{}", "---|".repeat(names.len()));
    for (name, per_category) in &categories {
        let cells = locomo::recall_at_10_cells(per_category, &names);
        println!("| {name} | {} |", cells.join(" | "));
    }

    println!(
        "\nThresholds, calibrated scores, measured halves: evidence in the top {TOP_K} kept / \
         other candidates dropped\n"
    );
    println!("| mode | 0.1 | 0.2 | 0.3 | 0.4 | 0.5 | 0.6 | 0.7 | 0.8 | 0.9 |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (mode, scored) in thresholds {
        let outcomes = Outcomes { scored };
        let cells: Vec<String> = (1..=9)
            .map(|t| {
                let (kept, dropped) = outcomes.at(t as f32 / 10.0);
                format!("{:.0}% / {:.0}%", 100.0 * kept, 100.0 * dropped)
            })
            .collect();
        println!(
            "| {} | {} |",
            format!("{mode:?}").to_lowercase(),
            cells.join(" | ")
        );
    }

    // Fitted on all ten: the calibration to ship.
    let all: Vec<&Pool> = pools.iter().collect();
    let locomo_fit = fit(&all)?;
    if let Some(dir) = bfcl_dir {
        // The BFCL memory set twice: as conversations (turns), and as facts (sentences, each
        // on its own); with `--dialogue`, a third time, as user–assistant chats.
        let dir = std::path::Path::new(dir);
        let mut units = vec![bfcl::Unit::Turn, bfcl::Unit::Sentence];
        let replies = if with_dialogue {
            let model = eval_llm::language_model(&eval_llm::Args::parse())?;
            let name = model.name.split(',').next().unwrap_or_default().to_owned();
            let cache = bfcl::replies_path(dir, &name);
            eprintln!("assistant replies: {name}, kept in {}", cache.display());
            units.push(bfcl::Unit::Dialogue);
            Some(bfcl::replies(dir, &*model.llm, &cache).await?)
        } else {
            None
        };
        let mut sets = Vec::new();
        for unit in units {
            let (samples, left_out) = bfcl::as_locomo(dir, unit, replies.as_ref())?;
            let corpus = locomo::ingest(&memory, &samples).await?;
            let pools = pools_of(&memory, &corpus, None).await?;
            sets.push((unit, corpus, pools, left_out));
        }
        let bfcl_all: Vec<&Pool> = sets.iter().flat_map(|s| s.2.iter()).collect();
        let bfcl_fit = fit(&bfcl_all)?;

        let kinds: Vec<String> = sets
            .iter()
            .map(|(unit, corpus, ..)| format!("{} as {unit:?}", corpus.turns).to_lowercase())
            .collect();
        println!(
            "\nFitted on one kind of data, measured on another: LoCoMo ({} questions), and \
             the BFCL memory set ({} questions of {}; memories: {})\n",
            pools.len(),
            sets[0].2.len(),
            sets[0].2.len() + sets[0].3,
            kinds.join(", "),
        );
        println!(
            "| measured on | mode | fitted on | questions | any@5 | all@5 | any@10 | all@10 | \
             MRR | ECE |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|");
        let mut measured = vec![("LoCoMo", all.clone(), &corpus, bfcl_fit, "BFCL")];
        for (unit, corpus, pools, _) in &sets {
            let name = match unit {
                bfcl::Unit::Turn => "BFCL turns",
                bfcl::Unit::Sentence => "BFCL facts",
                bfcl::Unit::Dialogue => "BFCL dialogues",
            };
            measured.push((name, pools.iter().collect(), corpus, locomo_fit, "LoCoMo"));
        }
        for (name, test, corpus, other, other_name) in measured {
            let mut rows: Vec<(String, Scorer, SearchMode)> =
                vec![("bm25".into(), Scorer::Before, SearchMode::Keyword)];
            for mode in MODES {
                rows.push((
                    format!("{mode:?}").to_lowercase(),
                    Scorer::Fitted(other),
                    mode,
                ));
            }
            for (mode_name, scorer, mode) in rows {
                let (score, _, outcomes) = measure(mode, scorer, &test, &corpus.questions);
                let fitted_on = match scorer {
                    Scorer::Before => "–",
                    Scorer::Fitted(_) => other_name,
                };
                let row = score.any_all_row(&format!("{name} | {mode_name} | {fitted_on}"));
                println!("{row} {:.3} |", outcomes.ece());
            }
        }
        println!("\nFitted on the BFCL memory set:\n\n{bfcl_fit:#?}");
    }
    println!("\nFitted on all ten conversations:\n\n{locomo_fit:#?}");
    Ok(())
}
