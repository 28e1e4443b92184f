//! Extraction quality: precision and recall of the facts `add` stores, on 23 labelled
//! conversations written for this project.
//!
//! `cargo run --release --example eval_extraction` (after `scripts/fetch-models.sh`), with
//! the local model (about 23 minutes on two cores), or any OpenAI-compatible server when
//! `OPENAI_API_KEY` or `OPENAI_BASE_URL` is set (model: `MEMLANE_LLM_MODEL`, default
//! `gpt-4o-mini`). `-- --only ID[,ID…]` runs some conversations only.
//!
//! Each conversation is one or more `add` calls for its own user, at fixed times, so that
//! relative dates have one right answer. Its label is the set of facts a careful person
//! would keep about the user once the conversation is over: corrected and contradicted
//! facts are gone, small talk leaves nothing, and facts stay in the language they were said
//! in.
//!
//! **Matching.** A label is a list of term groups; a stored memory states the fact when it
//! contains at least one term of every group (case-insensitive substring; accents count, so
//! a French fact translated into English does not match). After the last `add`:
//! - precision: the share of the user's live memories that state at least one labelled fact;
//! - recall: the share of labelled facts stated by at least one live memory.
//!
//! A memory that still holds a corrected or contradicted fact (it contains one of the
//! conversation's stale terms, such as the old city) counts as wrong even if it also states
//! the new one: it costs precision, and does not count for recall. Anything stored from
//! small talk is wrong too. Marks in the listing: `+` right, `~` stale, `-` states no fact.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use memlane::{Llm, LocalLlm, Memory, Message, OpenAiConfig, OpenAiLlm};

/// What a conversation tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Preference,
    Correction,
    Contradiction,
    RelativeDate,
    NonEnglish,
    SmallTalk,
    Mixed,
}

/// One `add` call: when it happened and what was said.
struct Turn {
    at: &'static str,
    messages: &'static [(&'static str, &'static str)],
}

/// A fact to keep: every group must be matched by one of its terms.
type Fact = &'static [&'static [&'static str]];

struct Case {
    id: &'static str,
    kind: Kind,
    turns: &'static [Turn],
    facts: &'static [Fact],
    /// Terms of a corrected or contradicted fact: a memory holding one is stale.
    stale: &'static [&'static str],
}

/// Wednesday 4 March 2026, 10:00 UTC: "now" for the single-turn conversations.
const NOW: &str = "2026-03-04T10:00:00Z";
/// A month earlier: the first turn of conversations that change a fact later.
const BEFORE: &str = "2026-02-04T10:00:00Z";

const CASES: &[Case] = &[
    // Preferences.
    Case {
        id: "food",
        kind: Kind::Preference,
        turns: &[Turn {
            at: NOW,
            messages: &[
                ("user", "I'm vegetarian these days, and honestly I can't stand olives."),
                ("assistant", "Noted! Any cuisines you especially love?"),
                ("user", "Thai food, the spicier the better."),
            ],
        }],
        facts: &[&[&["vegetarian"]], &[&["olive"]], &[&["thai"]]],
        stale: &[],
    },
    Case {
        id: "answers",
        kind: Kind::Preference,
        turns: &[Turn {
            at: NOW,
            messages: &[
                ("user", "Please keep your answers short. Bullet points work best for me."),
                ("assistant", "Understood, I'll keep it brief."),
            ],
        }],
        facts: &[&[&["bullet", "short", "brief", "concise"]]],
        stale: &[],
    },
    Case {
        id: "weekends",
        kind: Kind::Preference,
        turns: &[Turn {
            at: NOW,
            messages: &[(
                "user",
                "On weekends I usually go bouldering with my sister Ana.",
            )],
        }],
        facts: &[&[&["boulder"]], &[&["ana"]]],
        stale: &[],
    },
    Case {
        id: "seats",
        kind: Kind::Preference,
        turns: &[Turn {
            at: NOW,
            messages: &[
                ("user", "Book me an aisle seat please, I hate being stuck by the window."),
                ("assistant", "Sure, aisle it is."),
            ],
        }],
        facts: &[&[&["aisle"]]],
        stale: &[],
    },
    Case {
        id: "work",
        kind: Kind::Preference,
        turns: &[Turn {
            at: NOW,
            messages: &[(
                "user",
                "I work remotely for a fintech startup in Berlin, mostly writing Rust.",
            )],
        }],
        facts: &[&[&["fintech"]], &[&["berlin"]], &[&["rust"]]],
        stale: &[],
    },
    // Corrections.
    Case {
        id: "birthday-corrected",
        kind: Kind::Correction,
        turns: &[Turn {
            at: NOW,
            messages: &[(
                "user",
                "My daughter's birthday is on May 3rd. Oh wait, sorry, it's May 13th.",
            )],
        }],
        facts: &[&[&["may 13", "13 may", "05-13"]]],
        stale: &["may 3rd", "may 3,", "05-03"],
    },
    Case {
        id: "dog-name",
        kind: Kind::Correction,
        turns: &[
            Turn {
                at: BEFORE,
                messages: &[("user", "My dog is called Rex, he's a beagle.")],
            },
            Turn {
                at: NOW,
                messages: &[(
                    "user",
                    "Sorry, I got it wrong before: my dog is called Rocky, not Rex.",
                )],
            },
        ],
        facts: &[&[&["rocky"]], &[&["beagle"]]],
        stale: &["rex"],
    },
    Case {
        id: "hospital",
        kind: Kind::Correction,
        turns: &[
            Turn {
                at: BEFORE,
                messages: &[("user", "I'm a nurse at St. Mary's hospital.")],
            },
            Turn {
                at: NOW,
                messages: &[(
                    "user",
                    "Update: I don't work at St. Mary's any more, I moved to the children's hospital in Leeds.",
                )],
            },
        ],
        facts: &[&[&["nurse"]], &[&["leeds", "children"]]],
        stale: &["st. mary", "st mary"],
    },
    Case {
        id: "allergy-corrected",
        kind: Kind::Correction,
        turns: &[Turn {
            at: NOW,
            messages: &[
                ("user", "I'm allergic to shellfish."),
                ("assistant", "Thanks, I'll avoid shellfish in recipes."),
                ("user", "Hmm, actually it's only shrimp, other shellfish are fine."),
            ],
        }],
        facts: &[&[&["shrimp"]]],
        stale: &[],
    },
    // Contradictions: a later conversation says the opposite.
    Case {
        id: "city",
        kind: Kind::Contradiction,
        turns: &[
            Turn {
                at: BEFORE,
                messages: &[("user", "I live in Madrid, near Retiro park.")],
            },
            Turn {
                at: NOW,
                messages: &[("user", "Big news: I moved to Valencia last week!")],
            },
        ],
        facts: &[&[&["valencia"]]],
        stale: &["madrid"],
    },
    Case {
        id: "diet",
        kind: Kind::Contradiction,
        turns: &[
            Turn {
                at: BEFORE,
                messages: &[("user", "I love steak, I have one every Friday.")],
            },
            Turn {
                at: NOW,
                messages: &[("user", "I've gone fully vegan, no more meat for me.")],
            },
        ],
        facts: &[&[&["vegan"]]],
        stale: &["steak"],
    },
    Case {
        id: "drink",
        kind: Kind::Contradiction,
        turns: &[
            Turn {
                at: BEFORE,
                messages: &[("user", "I need a strong coffee every morning.")],
            },
            Turn {
                at: NOW,
                messages: &[(
                    "user",
                    "I switched to green tea in the mornings, coffee makes me jittery now.",
                )],
            },
        ],
        facts: &[&[&["green tea"]], &[&["jitter"]]],
        stale: &["strong coffee", "coffee every"],
    },
    // Relative dates, resolved against the conversation's time (Wednesday 4 March 2026).
    Case {
        id: "dentist",
        kind: Kind::RelativeDate,
        turns: &[Turn {
            at: NOW,
            messages: &[("user", "My dentist appointment is next Tuesday.")],
        }],
        facts: &[&[&["dentist"], &["2026-03-10", "march 10", "10 march"]]],
        stale: &[],
    },
    Case {
        id: "tokyo",
        kind: Kind::RelativeDate,
        turns: &[Turn {
            at: NOW,
            messages: &[("user", "We're flying to Tokyo in two weeks for my brother's wedding.")],
        }],
        facts: &[
            &[&["tokyo"], &["2026-03-18", "march 18", "18 march"]],
            &[&["brother"]],
        ],
        stale: &[],
    },
    Case {
        id: "new-job",
        kind: Kind::RelativeDate,
        turns: &[Turn {
            at: NOW,
            messages: &[("user", "I started my new job as a data analyst yesterday.")],
        }],
        facts: &[&[&["analyst"], &["2026-03-03", "march 3", "3 march"]]],
        stale: &[],
    },
    Case {
        id: "exam",
        kind: Kind::RelativeDate,
        turns: &[Turn {
            at: NOW,
            messages: &[("user", "My driving test is tomorrow morning, wish me luck!")],
        }],
        facts: &[&[&["driving"], &["2026-03-05", "march 5", "5 march"]]],
        stale: &[],
    },
    // Not English: the facts stay in the language they were said in.
    Case {
        id: "es",
        kind: Kind::NonEnglish,
        turns: &[Turn {
            at: NOW,
            messages: &[(
                "user",
                "Soy alérgica a los cacahuetes y trabajo como profesora de historia.",
            )],
        }],
        facts: &[&[&["cacahuete"]], &[&["profesora", "historia"]]],
        stale: &[],
    },
    Case {
        id: "de",
        kind: Kind::NonEnglish,
        turns: &[Turn {
            at: NOW,
            messages: &[(
                "user",
                "Ich wohne seit drei Jahren in Hamburg und spiele gern Schach.",
            )],
        }],
        facts: &[&[&["hamburg"]], &[&["schach"]]],
        stale: &[],
    },
    Case {
        id: "fr",
        kind: Kind::NonEnglish,
        turns: &[Turn {
            at: NOW,
            messages: &[(
                "user",
                "Je suis végétarien et je joue du piano depuis l'enfance.",
            )],
        }],
        facts: &[&[&["végétarien"]], &[&["piano"]]],
        stale: &[],
    },
    // Small talk: nothing worth keeping.
    Case {
        id: "hello",
        kind: Kind::SmallTalk,
        turns: &[Turn {
            at: NOW,
            messages: &[
                ("user", "Hi! How are you today?"),
                ("assistant", "Great, thanks! How can I help?"),
                ("user", "Just saying hello. Have a nice day!"),
            ],
        }],
        facts: &[],
        stale: &[],
    },
    Case {
        id: "weather",
        kind: Kind::SmallTalk,
        turns: &[Turn {
            at: NOW,
            messages: &[
                ("user", "Is spring usually rainy?"),
                (
                    "assistant",
                    "In many temperate places spring brings frequent showers and mild temperatures.",
                ),
                ("user", "Ok, thanks."),
            ],
        }],
        facts: &[],
        stale: &[],
    },
    Case {
        id: "thanks",
        kind: Kind::SmallTalk,
        turns: &[Turn {
            at: NOW,
            messages: &[
                ("user", "lol ok"),
                ("assistant", "Anything else?"),
                ("user", "nope, thanks, that was helpful"),
            ],
        }],
        facts: &[],
        stale: &[],
    },
    // The assistant's suggestion is not a fact about the user; the reply to it is.
    Case {
        id: "books",
        kind: Kind::Mixed,
        turns: &[Turn {
            at: NOW,
            messages: &[
                ("user", "Can you recommend a book?"),
                ("assistant", "You could try Dune by Frank Herbert."),
                ("user", "I've read Dune already, loved it. I'm more into non-fiction lately."),
            ],
        }],
        facts: &[&[&["dune"]], &[&["non-fiction", "nonfiction"]]],
        stale: &[],
    },
];

/// Whether a memory states a fact: a term of every group, case-insensitively.
fn states(memory: &str, fact: Fact) -> bool {
    let memory = memory.to_lowercase();
    fact.iter().all(|group| {
        group
            .iter()
            .any(|term| memory.contains(&term.to_lowercase()))
    })
}

/// Counts for precision and recall.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Score {
    memories: usize,
    memories_stating_a_fact: usize,
    facts: usize,
    facts_stated: usize,
}

/// Whether a memory still holds a corrected or contradicted fact.
fn is_stale(memory: &str, stale: &[&str]) -> bool {
    let memory = memory.to_lowercase();
    stale.iter().any(|term| memory.contains(term))
}

/// Whether a memory is right: it states a labelled fact and holds no stale one.
fn is_right(memory: &str, facts: &[Fact], stale: &[&str]) -> bool {
    !is_stale(memory, stale) && facts.iter().any(|f| states(memory, f))
}

impl Score {
    fn of(memories: &[String], facts: &[Fact], stale: &[&str]) -> Score {
        Score {
            memories: memories.len(),
            memories_stating_a_fact: memories
                .iter()
                .filter(|m| is_right(m, facts, stale))
                .count(),
            facts: facts.len(),
            facts_stated: facts
                .iter()
                .filter(|f| memories.iter().any(|m| is_right(m, &[**f], stale)))
                .count(),
        }
    }

    fn add(&mut self, other: Score) {
        self.memories += other.memories;
        self.memories_stating_a_fact += other.memories_stating_a_fact;
        self.facts += other.facts;
        self.facts_stated += other.facts_stated;
    }

    /// Precision in percent; a store that kept nothing is 100% precise.
    fn precision(&self) -> f64 {
        if self.memories == 0 {
            100.0
        } else {
            100.0 * self.memories_stating_a_fact as f64 / self.memories as f64
        }
    }

    /// Recall in percent, `None` without facts to find.
    fn recall(&self) -> Option<f64> {
        (self.facts > 0).then(|| 100.0 * self.facts_stated as f64 / self.facts as f64)
    }
}

fn time(at: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(at)
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|e| panic!("bad time {at} in the dataset: {e}"))
}

/// The language model: an OpenAI-compatible server when one is configured, else the local one.
fn language_model() -> memlane::Result<(Arc<dyn Llm>, String)> {
    let configured = ["OPENAI_API_KEY", "OPENAI_BASE_URL"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|s| !s.is_empty()));
    if configured {
        let model = std::env::var("MEMLANE_LLM_MODEL").unwrap_or_else(|_| "gpt-4o-mini".into());
        let llm = OpenAiLlm::new(OpenAiConfig::from_env(model.clone()))?;
        return Ok((Arc::new(llm), format!("{model} over the OpenAI protocol")));
    }
    Ok((
        Arc::new(LocalLlm::load_default()?),
        "local Qwen2.5 1.5B (Q4_K_M)".into(),
    ))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> memlane::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let only: Option<Vec<String>> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(|ids| ids.split(',').map(str::to_string).collect());
    let cases: Vec<&Case> = CASES
        .iter()
        .filter(|c| {
            only.as_ref()
                .is_none_or(|ids| ids.iter().any(|id| id == c.id))
        })
        .collect();

    let dir = tempfile_dir()?;
    let (llm, name) = language_model()?;
    println!("language model: {name}");
    println!("{} conversations; store {}\n", cases.len(), dir.display());
    let memory = Memory::builder()
        .path(dir.join("eval.db"))
        .llm(llm)
        .build()
        .await?;

    let started = Instant::now();
    let mut by_kind: BTreeMap<Kind, Score> = BTreeMap::new();
    let mut total = Score::default();
    for case in &cases {
        let user = format!("eval-{}", case.id);
        let case_started = Instant::now();
        for turn in case.turns {
            let messages: Vec<Message> = turn
                .messages
                .iter()
                .map(|(role, text)| Message::new(*role, *text))
                .collect();
            memory
                .add(messages)
                .user(user.as_str())
                .timestamp(time(turn.at))
                .await?;
        }
        let kept: Vec<String> = memory
            .list()
            .user(user.as_str())
            .page_size(100)
            .await?
            .results
            .into_iter()
            .map(|r| r.memory)
            .collect();
        let score = Score::of(&kept, case.facts, case.stale);
        total.add(score);
        by_kind.entry(case.kind).or_default().add(score);
        println!(
            "{:<20} {:?}: {}/{} memories state a fact, {}/{} facts found ({:.0} s)",
            case.id,
            case.kind,
            score.memories_stating_a_fact,
            score.memories,
            score.facts_stated,
            score.facts,
            case_started.elapsed().as_secs_f64()
        );
        for m in &kept {
            let mark = if is_stale(m, case.stale) {
                "~"
            } else if case.facts.iter().any(|f| states(m, f)) {
                "+"
            } else {
                "-"
            };
            println!("    {mark} {m}");
        }
        for fact in case
            .facts
            .iter()
            .filter(|f| !kept.iter().any(|m| is_right(m, &[**f], case.stale)))
        {
            println!("    missed: {fact:?}");
        }
    }

    println!("\n| conversations | memories | facts | precision | recall |");
    println!("|---|---|---|---|---|");
    for (kind, score) in &by_kind {
        let n = cases.iter().filter(|c| c.kind == *kind).count();
        println!(
            "| {kind:?} ({n}) | {} | {} | {:.1} | {} |",
            score.memories,
            score.facts,
            score.precision(),
            score
                .recall()
                .map_or_else(|| "n/a".to_string(), |r| format!("{r:.1}"))
        );
    }
    println!(
        "| **all ({})** | {} | {} | **{:.1}** | **{}** |",
        cases.len(),
        total.memories,
        total.facts,
        total.precision(),
        total
            .recall()
            .map_or_else(|| "n/a".to_string(), |r| format!("{r:.1}"))
    );
    println!("\n{:.0} s in all", started.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn tempfile_dir() -> memlane::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("memlane-eval-extraction-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| memlane::Error::storage("cannot create a temp dir", e))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memory_states_a_fact_with_a_term_of_every_group() {
        let fact: Fact = &[&["dentist"], &["2026-03-10", "march 10"]];
        assert!(states("Dentist appointment on March 10", fact));
        assert!(states("dentist next Tuesday (2026-03-10)", fact));
        assert!(!states("Dentist appointment next Tuesday", fact));
        assert!(!states("Appointment on 2026-03-10", fact));
        assert!(!states("Is vegetarian", &[&["végétarien"]]));
        assert!(states("Est végétarien", &[&["végétarien"]]));
    }

    #[test]
    fn precision_and_recall_count_memories_and_facts() {
        let facts: &[Fact] = &[&[&["vegan"]], &[&["valencia"]]];
        let kept = vec![
            "Is vegan".to_string(),
            "Lives in Madrid".to_string(),
            "Vegan, lives in Valencia".to_string(),
        ];
        let score = Score::of(&kept, facts, &[]);
        assert_eq!((score.memories_stating_a_fact, score.memories), (2, 3));
        assert_eq!((score.facts_stated, score.facts), (2, 2));
        assert!((score.precision() - 200.0 / 3.0).abs() < 1e-9);
        assert_eq!(Score::of(&[], &[], &[]).recall(), None);
        assert_eq!(Score::of(&[], &[], &[]).precision(), 100.0);
        // Stating the new city beside the old one is stale: wrong, and not a find.
        let merged = vec!["Lived in Madrid, moved to Valencia".to_string()];
        let score = Score::of(&merged, &[&[&["valencia"]]], &["madrid"]);
        assert_eq!((score.memories_stating_a_fact, score.facts_stated), (0, 0));
    }

    #[test]
    fn the_dataset_covers_what_the_issue_asks_for() {
        assert!(CASES.len() >= 20);
        let mut ids: Vec<&str> = CASES.iter().map(|c| c.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), CASES.len(), "ids are unique");
        for kind in [
            Kind::Preference,
            Kind::Correction,
            Kind::Contradiction,
            Kind::RelativeDate,
            Kind::NonEnglish,
            Kind::SmallTalk,
        ] {
            assert!(CASES.iter().any(|c| c.kind == kind), "{kind:?}");
        }
        for case in CASES {
            assert!(!case.turns.is_empty(), "{}", case.id);
            assert_eq!(
                case.facts.is_empty(),
                case.kind == Kind::SmallTalk,
                "{}",
                case.id
            );
            for turn in case.turns {
                time(turn.at);
                assert!(!turn.messages.is_empty());
            }
        }
    }
}
