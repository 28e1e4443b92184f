//! Contradictions: whether `add` with inference keeps a user's memories consistent when a
//! new fact supersedes one (a move, a new job, a relationship that ended, a preference
//! reversed, a correction), and keeps both when they are compatible (a visit and a home, a
//! second hobby, a second child).
//!
//! `cargo run --release --example eval_contradictions` (after `scripts/fetch-models.sh`),
//! with the local model, or any OpenAI-compatible server when `OPENAI_API_KEY` or
//! `OPENAI_BASE_URL` is set (model: `MEMLANE_LLM_MODEL`, default `gpt-4o-mini`).
//! `-- --set tuned|untuned` runs one half (`dev`: the development cases; `unchanged`:
//! statements that must supersede nothing); `-- --only ID[,ID…]` some cases only;
//! `-- --set tuned --cases PATH` runs your own cases, in the halves' format;
//! `-- --store-per-case` gives each case a store of its own, so that no case's keyword
//! statistics hold another's memories (by default all cases share one store, as a
//! service's users do);
//! `-- --show-texts` prints the untuned half's memories (by default its listing gives only
//! events, marks and labels, so that reading a run's output does not tune on that half);
//! `-- --unconstrained` lets the model write its answers freely (no schema), to compare;
//! `--features llama -- --llama` runs the local model on llama.cpp (`LlamaCppLlm`), about
//! twice as fast.
//!
//! The cases are in `examples/data/contradictions_{tuned,untuned}.json`, in the format and
//! with the matching rule of the extraction evaluation (`eval_extraction/cases.rs`), and
//! written apart from its conversations. Each case is two or three `add` calls for its own
//! user; the first states the old fact and an unrelated one that must survive. Later turns
//! never repeat an old value, so a live memory that holds one (a stale term) can only be
//! the old memory kept, or merged into a text that states both. `tuned` is the half
//! memlane's reconciliation was developed on; `untuned` is never tuned on. `dev`
//! (`contradictions_dev.json`) holds 38 more cases written later to tune on, apart from
//! both halves and never in their figures.
//!
//! A case **ends consistent** when no current memory holds a stale term and every
//! labelled fact is stated. A fact is **lost** when no current memory states it without a
//! stale term. A superseded case **keeps its history** when the memories current as of
//! just before its last turn (`as_of`) still hold a stale term: the old fact, superseded
//! rather than lost. Marks in the listing: `+` states a fact, `~` stale, `-` states no
//! labelled fact.

#[path = "eval_extraction/cases.rs"]
mod cases;
#[path = "shared/eval_llm.rs"]
mod eval_llm;

use std::time::{Duration, Instant};

use cases::{is_right, is_stale, states, Case, Kind};
use eval_llm::{Args, Counted};
use memlane::Memory;

/// The two halves of the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Half {
    Tuned,
    Untuned,
    /// Cases written after the two halves, to tune on as well (`--set dev` only): more
    /// failures to learn from, without touching the half that is never tuned on.
    Dev,
    /// Ordinary statements that must supersede nothing (`--set unchanged`): news of someone
    /// else, a plan, a hypothetical, a quotation, a second job, a trip, a temporary state.
    /// Never tuned on.
    Unchanged,
}

impl Half {
    fn name(self) -> &'static str {
        match self {
            Half::Tuned => "tuned",
            Half::Untuned => "untuned",
            Half::Dev => "dev",
            Half::Unchanged => "unchanged",
        }
    }

    fn cases(self) -> Vec<Case> {
        cases::load(&format!("contradictions_{}.json", self.name()))
    }
}

/// How one case ended.
#[derive(Debug, Default, Clone, Copy)]
struct Outcome {
    cases: usize,
    consistent: usize,
    facts: usize,
    lost: usize,
    /// Cases whose old fact is still current as of just before the last turn.
    history: usize,
}

impl Outcome {
    fn of(kept: &[String], before_last: &[String], case: &Case) -> Outcome {
        let lost = case
            .facts
            .iter()
            .filter(|f| {
                !kept
                    .iter()
                    .any(|m| is_right(m, std::slice::from_ref(*f), &case.stale))
            })
            .count();
        let stale = kept.iter().any(|m| is_stale(m, &case.stale));
        Outcome {
            cases: 1,
            consistent: usize::from(!stale && lost == 0),
            facts: case.facts.len(),
            lost,
            history: usize::from(before_last.iter().any(|m| is_stale(m, &case.stale))),
        }
    }

    fn add(&mut self, other: Outcome) {
        self.cases += other.cases;
        self.consistent += other.consistent;
        self.facts += other.facts;
        self.lost += other.lost;
        self.history += other.history;
    }

    /// The table's row; `superseded` for a row of superseded cases, whose history counts.
    fn row(&self, name: &str, superseded: bool) -> String {
        let pct = |a: usize, b: usize| {
            if b == 0 {
                "n/a".to_string()
            } else {
                format!("{:.1}", 100.0 * a as f64 / b as f64)
            }
        };
        format!(
            "| {name} | {} | {} | {} | {} | {} |",
            self.cases,
            pct(self.consistent, self.cases),
            self.facts,
            pct(self.lost, self.facts),
            if superseded {
                pct(self.history, self.cases)
            } else {
                "n/a".into()
            }
        )
    }
}

/// What one case left: the time of each add, how many failed, what the store holds now
/// (each current memory's text and labels), and the texts current as of just before the
/// last turn.
type Run = (
    Vec<Duration>,
    usize,
    Vec<(String, Vec<String>)>,
    Vec<String>,
);

/// Runs one case for its own user.
async fn run(
    memory: &Memory,
    llm: &Counted,
    half: Half,
    case: &Case,
    blind: bool,
) -> memlane::Result<Run> {
    let user = format!("contradictions-{}-{}", half.name(), case.id);
    let mut times = Vec::new();
    let mut failed = 0;
    for turn in &case.turns {
        let started = Instant::now();
        let added = memory
            .add(eval_llm::messages(&turn.messages))
            .user(user.as_str())
            .timestamp(turn.at)
            .await;
        times.push(started.elapsed());
        // A failed add stores nothing; the case goes on, and ends as the store stands.
        let added = match added {
            Ok(added) => added,
            Err(e) => {
                println!("    FAILED {e}");
                llm.note_failure(&e);
                failed += 1;
                continue;
            }
        };
        for m in &added.results {
            if blind {
                println!("    {}", m.event.as_str());
            } else {
                println!("    {:<9} {}", m.event.as_str(), m.memory);
            }
        }
    }
    let kept = memory
        .list()
        .user(user.as_str())
        .page_size(100)
        .await?
        .results
        .into_iter()
        .map(|r| (r.memory, r.categories))
        .collect();
    let before_last = match case.turns.last() {
        Some(last) if case.turns.len() > 1 => memory
            .list()
            .user(user.as_str())
            .as_of(last.at - chrono::Duration::seconds(1))
            .page_size(100)
            .await?
            .results
            .into_iter()
            .map(|r| r.memory)
            .collect(),
        _ => Vec::new(),
    };
    Ok((times, failed, kept, before_last))
}

fn p50(times: &mut [Duration]) -> f64 {
    if times.is_empty() {
        return 0.0;
    }
    times.sort();
    times[times.len() / 2].as_secs_f64()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> memlane::Result<()> {
    let args = Args::parse();
    eval_llm::trace_to_stderr();
    let halves = match args.set.as_deref() {
        Some("tuned") => vec![Half::Tuned],
        Some("untuned") => vec![Half::Untuned],
        Some("dev") => vec![Half::Dev],
        Some("unchanged") => vec![Half::Unchanged],
        None => vec![Half::Tuned, Half::Untuned],
        Some(other) => {
            return Err(memlane::Error::invalid(format!(
                "--set takes tuned, untuned, dev or unchanged, not {other}"
            )))
        }
    };

    let dir = std::env::temp_dir().join(format!(
        "memlane-eval-contradictions-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir)
        .map_err(|e| memlane::Error::storage("cannot create a temp dir", e))?;
    let model = eval_llm::language_model(&args)?;
    println!("language model: {}; store {}\n", model.name, dir.display());
    let per_case = std::env::args().any(|a| a == "--store-per-case");
    let show_texts = std::env::args().any(|a| a == "--show-texts");
    let open = |name: &str| {
        Memory::builder()
            .path(dir.join(format!("{name}.db")))
            .llm(model.llm.clone())
            .build()
    };
    let shared = open("eval").await?;

    let started = Instant::now();
    let mut rows = Vec::new();
    let mut add_times = Vec::new();
    let mut failures = 0;
    for half in halves {
        let cases: Vec<Case> = args
            .cases
            .as_deref()
            .map_or_else(|| half.cases(), cases::load_path)
            .into_iter()
            .filter(|c| args.runs(&c.id))
            .collect();
        println!("## {} ({} cases)\n", half.name(), cases.len());
        let (mut superseded, mut compatible) = (Outcome::default(), Outcome::default());
        for case in &cases {
            println!("{} ({:?})", case.id, case.kind);
            // Each case's traces (`RUST_LOG=memlane=debug`) under its id.
            tracing::debug!(target: "memlane", case = %case.id, "a case begins");
            let loops = model.loops();
            let own = if per_case {
                Some(open(&format!("{}-{}", half.name(), case.id)).await?)
            } else {
                None
            };
            let memory = own.as_ref().unwrap_or(&shared);
            // The half never tuned on is read by its figures, not its texts.
            let blind = matches!(half, Half::Untuned | Half::Unchanged)
                && args.cases.is_none()
                && !show_texts;
            let (times, failed, labelled, before_last) =
                run(memory, &model.llm, half, case, blind).await?;
            let kept: Vec<String> = labelled.iter().map(|(m, _)| m.clone()).collect();
            failures += failed;
            let outcome = Outcome::of(&kept, &before_last, case);
            if case.kind == Kind::Compatible {
                compatible.add(outcome);
            } else {
                superseded.add(outcome);
            }
            println!(
                "  {}: {}/{} facts lost ({:.0} s)",
                if outcome.consistent == 1 {
                    "consistent"
                } else {
                    "INCONSISTENT"
                },
                outcome.lost,
                outcome.facts,
                times.iter().map(Duration::as_secs_f64).sum::<f64>()
            );
            if model.loops() > loops {
                println!(
                    "    ({} model replies stopped in a loop)",
                    model.loops() - loops
                );
            }
            for (m, labels) in &labelled {
                let mark = if is_stale(m, &case.stale) {
                    "~"
                } else if case.facts.iter().any(|f| states(m, f)) {
                    "+"
                } else {
                    "-"
                };
                let text = if blind { "" } else { m.as_str() };
                println!("    {mark} {text} [{}]", labels.join(", "));
            }
            add_times.extend(times);
        }
        let mut all = superseded;
        all.add(compatible);
        rows.push((half, superseded, compatible, all));
        println!();
    }

    println!(
        "| half | cases | consistent % | facts | facts lost % | history kept % |\n\
         |---|---|---|---|---|---|"
    );
    for (half, superseded, compatible, all) in &rows {
        let name = half.name();
        println!("{}", superseded.row(&format!("{name}: superseded"), true));
        println!("{}", compatible.row(&format!("{name}: compatible"), false));
        println!("{}", all.row(&format!("**{name}: all**"), false));
    }
    println!(
        "\n{} adds ({failures} failed), p50 {:.1} s per add; {:.0} s in all",
        add_times.len(),
        p50(&mut add_times),
        started.elapsed().as_secs_f64()
    );
    model.print_report();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
