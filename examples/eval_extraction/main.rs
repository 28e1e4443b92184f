//! Extraction quality: precision and recall of the facts `add` stores, on labelled
//! conversations written for this project (see `cases.rs` for the sets and the matching
//! rule): the set the prompts were developed on and a held-out set never tuned on,
//! reported side by side.
//!
//! `cargo run --release --example eval_extraction` (after `scripts/fetch-models.sh`), with
//! the local model, or any OpenAI-compatible server when `OPENAI_API_KEY` or
//! `OPENAI_BASE_URL` is set (model: `MEMLANE_LLM_MODEL`, default `gpt-4o-mini`).
//! `-- --set tuned|heldout` runs one set; `-- --only ID[,ID…]` some conversations only;
//! `-- --set tuned --cases PATH` runs your own conversations, in the sets' format;
//! `-- --unconstrained` lets the model write its answers freely (no schema), to compare;
//! `--features llama -- --llama` runs the local model on llama.cpp (`LlamaCppLlm`), about
//! twice as fast.
//! A failed `add` is reported and the conversation goes on. `RUST_LOG=memlane=debug`
//! traces each reconciliation (the memories found, the model's decisions, the looks).
//! Marks in the listing: `+` right, `~` stale, `-` states no fact.

mod cases;
#[path = "../shared/eval_llm.rs"]
mod eval_llm;

use std::collections::BTreeMap;
use std::time::Instant;

use cases::{is_right, is_stale, states, Case, Kind, Score, Set};
use eval_llm::{Args, Counted};
use memlane::Memory;

/// Runs one conversation for its own user and returns what the store kept. A failed `add`
/// is printed; the conversation goes on.
async fn run(
    memory: &Memory,
    llm: &Counted,
    set: Set,
    case: &Case,
) -> memlane::Result<Vec<String>> {
    let user = format!("eval-{}-{}", set.name(), case.id);
    for turn in &case.turns {
        let added = memory
            .add(eval_llm::messages(&turn.messages))
            .user(user.as_str())
            .timestamp(turn.at)
            .await;
        if let Err(e) = added {
            println!("    FAILED {e}");
            llm.note_failure(&e);
        }
    }
    Ok(memory
        .list()
        .user(user.as_str())
        .page_size(100)
        .await?
        .results
        .into_iter()
        .map(|r| r.memory)
        .collect())
}

/// One set's results: per kind (conversations, score), and in all.
struct Table {
    set: Set,
    by_kind: BTreeMap<Kind, (usize, Score)>,
    total: Score,
    conversations: usize,
}

fn percent(x: Option<f64>) -> String {
    x.map_or_else(|| "n/a".to_string(), |r| format!("{r:.1}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> memlane::Result<()> {
    let args = Args::parse();
    eval_llm::trace_to_stderr();
    let sets: Vec<Set> = match args.set.as_deref() {
        Some("tuned") => vec![Set::Tuned],
        Some("heldout") => vec![Set::HeldOut],
        None => vec![Set::Tuned, Set::HeldOut],
        Some(other) => {
            return Err(memlane::Error::invalid(format!(
                "--set takes tuned or heldout, not {other}"
            )))
        }
    };

    let dir = std::env::temp_dir().join(format!("memlane-eval-extraction-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| memlane::Error::storage("cannot create a temp dir", e))?;
    let model = eval_llm::language_model(&args)?;
    println!("language model: {}; store {}\n", model.name, dir.display());
    let memory = Memory::builder()
        .path(dir.join("eval.db"))
        .llm(model.llm.clone())
        .build()
        .await?;

    let started = Instant::now();
    let mut tables: Vec<Table> = Vec::new();
    for set in sets {
        let cases: Vec<Case> = args
            .cases
            .as_deref()
            .map_or_else(|| set.cases(), cases::load_path)
            .into_iter()
            .filter(|c| args.runs(&c.id))
            .collect();
        println!("## {} ({} conversations)\n", set.name(), cases.len());
        let mut by_kind: BTreeMap<Kind, (usize, Score)> = BTreeMap::new();
        let mut total = Score::default();
        for case in &cases {
            let case_started = Instant::now();
            let loops = model.loops();
            let kept = run(&memory, &model.llm, set, case).await?;
            let score = Score::of(&kept, &case.facts, &case.stale);
            total.add(score);
            let entry = by_kind.entry(case.kind).or_default();
            entry.0 += 1;
            entry.1.add(score);
            println!(
                "{:<24} {:?}: {}/{} memories state a fact, {}/{} facts found ({:.0} s)",
                case.id,
                case.kind,
                score.memories_stating_a_fact,
                score.memories,
                score.facts_stated,
                score.facts,
                case_started.elapsed().as_secs_f64()
            );
            if model.loops() > loops {
                println!(
                    "    ({} model replies stopped in a loop)",
                    model.loops() - loops
                );
            }
            for m in &kept {
                let mark = if is_stale(m, &case.stale) {
                    "~"
                } else if case.facts.iter().any(|f| states(m, f)) {
                    "+"
                } else {
                    "-"
                };
                println!("    {mark} {m}");
            }
            for fact in case.facts.iter().filter(|f| {
                !kept
                    .iter()
                    .any(|m| is_right(m, std::slice::from_ref(*f), &case.stale))
            }) {
                println!("    missed: {fact:?}");
            }
        }
        println!();
        tables.push(Table {
            set,
            by_kind,
            total,
            conversations: cases.len(),
        });
    }

    for Table {
        set,
        by_kind,
        total,
        conversations: n,
    } in &tables
    {
        println!("\n{} set\n", set.name());
        println!("| conversations | memories | facts | precision | recall |");
        println!("|---|---|---|---|---|");
        for (kind, (count, score)) in by_kind {
            println!(
                "| {kind:?} ({count}) | {} | {} | {:.1} | {} |",
                score.memories,
                score.facts,
                score.precision(),
                percent(score.recall())
            );
        }
        println!(
            "| **all ({n})** | {} | {} | **{:.1}** | **{}** |",
            total.memories,
            total.facts,
            total.precision(),
            percent(total.recall())
        );
    }
    if tables.len() > 1 {
        println!("\n| set | conversations | precision | recall |\n|---|---|---|---|");
        for table in &tables {
            println!(
                "| {} | {} | {:.1} | {} |",
                table.set.name(),
                table.conversations,
                table.total.precision(),
                percent(table.total.recall())
            );
        }
    }
    println!();
    model.print_report();
    println!("{:.0} s in all", started.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::cases::*;

    fn terms(t: &[&str]) -> Vec<String> {
        t.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_memory_states_a_fact_with_a_term_of_every_group() {
        let fact: Fact = vec![terms(&["dentist"]), terms(&["2026-03-10", "march 10"])];
        assert!(states("Dentist appointment on March 10", &fact));
        assert!(states("dentist next Tuesday (2026-03-10)", &fact));
        assert!(!states("Dentist appointment next Tuesday", &fact));
        assert!(!states("Appointment on 2026-03-10", &fact));
        assert!(!states("Is vegetarian", &vec![terms(&["végétarien"])]));
        assert!(states("Est végétarien", &vec![terms(&["végétarien"])]));
    }

    #[test]
    fn precision_and_recall_count_memories_and_facts() {
        let facts: Vec<Fact> = vec![vec![terms(&["vegan"])], vec![terms(&["valencia"])]];
        let kept = vec![
            "Is vegan".to_string(),
            "Lives in Madrid".to_string(),
            "Vegan, lives in Valencia".to_string(),
        ];
        let score = Score::of(&kept, &facts, &[]);
        assert_eq!((score.memories_stating_a_fact, score.memories), (2, 3));
        assert_eq!((score.facts_stated, score.facts), (2, 2));
        assert!((score.precision() - 200.0 / 3.0).abs() < 1e-9);
        assert_eq!(Score::of(&[], &[], &[]).recall(), None);
        assert_eq!(Score::of(&[], &[], &[]).precision(), 100.0);
        // Stating the new city beside the old one is stale: wrong, and not a find.
        let merged = vec!["Lived in Madrid, moved to Valencia".to_string()];
        let score = Score::of(&merged, &[vec![terms(&["valencia"])]], &terms(&["madrid"]));
        assert_eq!((score.memories_stating_a_fact, score.facts_stated), (0, 0));
    }

    /// The contradiction set of `examples/eval_contradictions.rs`, checked here so that
    /// the suite builds no test harness of its own for it.
    #[test]
    fn the_contradiction_halves_are_labelled_as_their_evaluation_needs() {
        let halves = [
            load("contradictions_tuned.json"),
            load("contradictions_untuned.json"),
        ];
        let extraction: Vec<Case> = Set::Tuned
            .cases()
            .into_iter()
            .chain(Set::HeldOut.cases())
            .collect();
        let said = |cases: &[Case]| -> Vec<String> {
            cases
                .iter()
                .flat_map(|c| c.turns.iter().flat_map(|t| t.messages.iter()))
                .map(|m| m.1.to_lowercase())
                .collect()
        };
        let extraction_said = said(&extraction);
        let mut ids: Vec<&str> = extraction.iter().map(|c| c.id.as_str()).collect();
        let mut checked = 0;
        for half in &halves {
            assert!(half.len() >= 20, "{} cases", half.len());
            let compatible = half.iter().filter(|c| c.kind == Kind::Compatible).count();
            assert!(
                3 * compatible >= half.len(),
                "{compatible} compatible cases"
            );
            assert!(half
                .iter()
                .all(|c| matches!(c.kind, Kind::Update | Kind::Correction | Kind::Compatible)));
            for case in half {
                ids.push(&case.id);
                assert!(case.turns.len() >= 2, "{}: several adds", case.id);
                assert!(
                    case.turns.windows(2).all(|w| w[0].at < w[1].at),
                    "{}",
                    case.id
                );
                // Compatible cases keep everything; the others have an old value to lose.
                assert_eq!(
                    case.stale.is_empty(),
                    case.kind == Kind::Compatible,
                    "{}",
                    case.id
                );
                // Later turns never repeat an old value, so a memory that holds one can
                // only be the old memory, kept or merged: the strict stale rule is sound.
                for turn in &case.turns[1..] {
                    for (_, text) in &turn.messages {
                        assert!(!is_stale(text, &case.stale), "{}: {text}", case.id);
                    }
                }
                for group in case.facts.iter().flatten() {
                    assert!(!group.is_empty(), "{}", case.id);
                    for term in group {
                        assert!(!is_stale(term, &case.stale), "{}: {term}", case.id);
                    }
                }
                // Kept apart from the extraction evaluation and from the quickstart.
                for text in said(std::slice::from_ref(case)) {
                    assert!(!extraction_said.contains(&text), "{}: {text}", case.id);
                    for word in ["carlos", "madrid", "valencia"] {
                        assert!(!text.contains(word), "{}: {text}", case.id);
                    }
                }
                checked += 1;
            }
        }
        assert!(checked >= 40);
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "ids are unique across all four files");
    }

    #[test]
    fn both_sets_cover_what_the_evaluation_needs_and_never_overlap() {
        let tuned = Set::Tuned.cases();
        let held_out = Set::HeldOut.cases();
        assert!(tuned.len() >= 20 && held_out.len() >= 20);
        let mut ids: Vec<&str> = tuned
            .iter()
            .chain(&held_out)
            .map(|c| c.id.as_str())
            .collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "ids are unique across both sets");
        let said = |cases: &[Case]| -> Vec<String> {
            cases
                .iter()
                .flat_map(|c| {
                    c.turns
                        .iter()
                        .flat_map(|t| t.messages.iter().map(|m| m.1.clone()))
                })
                .collect()
        };
        let tuned_texts = said(&tuned);
        assert!(
            said(&held_out).iter().all(|m| !tuned_texts.contains(m)),
            "no message of the held-out set is in the tuned set"
        );
        for kind in [
            Kind::Update,
            Kind::Compatible,
            Kind::SmallTalk,
            Kind::NonEnglish,
        ] {
            assert!(
                held_out.iter().filter(|c| c.kind == kind).count() >= 3,
                "{kind:?}"
            );
        }
        for case in tuned.iter().chain(&held_out) {
            assert!(!case.turns.is_empty(), "{}", case.id);
            assert_eq!(
                case.facts.is_empty(),
                case.kind == Kind::SmallTalk,
                "{}",
                case.id
            );
            for turn in &case.turns {
                assert!(!turn.messages.is_empty(), "{}", case.id);
            }
            for fact in &case.facts {
                assert!(fact.iter().all(|g| !g.is_empty()), "{}", case.id);
                // A fact must not count as stale by its own terms.
                for group in fact {
                    for term in group {
                        assert!(!is_stale(term, &case.stale), "{}: {term}", case.id);
                    }
                }
            }
        }
    }
}
