//! Reconciliation: for each new fact, whether it adds to, updates, contradicts or repeats
//! the owner's similar memories, as the model decides it under a schema that allows one
//! decision per fact. What the decisions then do (and the checks that make them safe) is
//! `ops::add::plan`'s.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{answer, index, object, today};
use crate::error::Result;
use crate::llm::{chat_json, Llm, Parsed};
use crate::record::Message;

/// Token budget of a reconciliation reply.
const RECONCILE_TOKENS: u32 = 768;

/// What to do with one new fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum Event {
    Add,
    Update,
    Delete,
    None,
}

/// One decision of the reconciliation, as the model states it. `fact` and `memory` are the
/// small integers of the prompt, never real ids, so the model cannot invent an id.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Decision {
    pub(crate) fact: usize,
    pub(crate) event: Event,
    #[serde(default)]
    pub(crate) memory: Option<usize>,
    /// Whether the memory named is still true once the fact is: asked before the event, so
    /// that the event follows from it (the schema lets only UPDATE and DELETE follow
    /// `false`, only ADD and NONE follow `true`).
    #[serde(default)]
    pub(crate) memory_still_true: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Decisions {
    pub(super) decisions: Vec<Decision>,
}

/// An existing memory as the reconciliation sees it.
#[derive(Debug, Clone)]
pub(crate) struct Existing {
    pub(crate) text: String,
    pub(crate) immutable: bool,
}

/// The schema of a reconciliation reply (see [`check_decisions`]): one decision per fact,
/// in their order. Each names the memory the fact is most about, or none; says whether that
/// memory is still true once the fact is; then the event, which follows from that answer:
/// UPDATE or DELETE only for a memory no longer true, ADD or NONE for one still true, ADD
/// when no memory is named. There are memories to name whenever memlane asks.
pub(super) fn decisions_schema(facts: usize, memories: usize) -> Value {
    let memory = index(memories);
    let decision = |fact: usize| {
        let named = |still: bool, events: &[&str]| {
            object(
                json!({
                    "fact": {"const": fact},
                    "memory": memory,
                    "memory_still_true": {"const": still},
                    "event": {"enum": events}
                }),
                &["fact", "memory", "memory_still_true", "event"],
            )
        };
        json!({"anyOf": [
            named(false, &["UPDATE", "DELETE"]),
            named(true, &["ADD", "NONE"]),
            object(
                json!({
                    "fact": {"const": fact},
                    "memory": {"type": "null"},
                    "event": {"const": "ADD"}
                }),
                &["fact", "memory", "event"],
            ),
        ]})
    };
    let decisions: Vec<Value> = (0..facts).map(decision).collect();
    answer(
        json!({"decisions": {
            "type": "array",
            "prefixItems": decisions,
            "items": false,
            "minItems": facts
        }}),
        &["decisions"],
    )
}

/// Worked examples the reconciliation prompt shows as earlier turns of its chat, as
/// (existing memories, new facts, answer): a change or correction of the same thing leaves
/// the memory untrue (UPDATE); a repeat is NONE; a fact about something else, or one that
/// leaves the memory true beside it (a visit, a second hobby or job, someone else's news,
/// a remark), is ADDed, and every memory stays as it was. None is from an evaluation set.
///
/// A small model copies the pattern of the examples it has read, most of all for the first
/// fact of a question (which is often its only one): the examples' first decisions differ
/// (two updates, an addition beside a memory still true), and the first example is a
/// question of one fact. With every example opening on an addition, the local model added
/// the first fact beside the memory it changed far more often (`docs/temporal-memory.md`,
/// "What was tried").
const RECONCILE_EXAMPLES: [(&[&str], &[&str], &str); 4] = [
    (
        &["Mon cours de yoga est le lundi", "J'ai une fille, Inès"],
        &["En fait, le yoga c'est le mercredi"],
        r#"{"decisions": [{"fact": 0, "memory": 0, "memory_still_true": false, "event": "UPDATE"}]}"#,
    ),
    (
        &[
            "I live in Hull",
            "My car is a red Seat Ibiza",
            "I'm allergic to nuts",
        ],
        &[
            "I sold my car and bought a Kia Niro",
            "I'm spending a few days with my niece in Kilkenny",
            "I am allergic to nuts",
        ],
        r#"{"decisions": [{"fact": 0, "memory": 1, "memory_still_true": false, "event": "UPDATE"}, {"fact": 1, "memory": 0, "memory_still_true": true, "event": "ADD"}, {"fact": 2, "memory": 2, "memory_still_true": true, "event": "NONE"}]}"#,
    ),
    (
        &["Juego al ajedrez los martes", "Trabajo de cartero en Lugo"],
        &[
            "Ahora trabajo de bombero",
            "También hago boxeo",
            "Menudo atasco había esta mañana",
        ],
        r#"{"decisions": [{"fact": 0, "memory": 1, "memory_still_true": false, "event": "UPDATE"}, {"fact": 1, "memory": 0, "memory_still_true": true, "event": "ADD"}, {"fact": 2, "memory": null, "event": "ADD"}]}"#,
    ),
    (
        &[
            "I work as an accountant in Derby",
            "My brother lives in Oslo",
            "I'm single",
        ],
        &[
            "On Saturdays I work at a garden centre",
            "My brother moved to Bergen",
            "My best friend Tom just got engaged",
        ],
        r#"{"decisions": [{"fact": 0, "memory": 0, "memory_still_true": true, "event": "ADD"}, {"fact": 1, "memory": 1, "memory_still_true": false, "event": "UPDATE"}, {"fact": 2, "memory": 2, "memory_still_true": true, "event": "ADD"}]}"#,
    ),
];

/// The reconciliation's question: the memories and the facts, numbered from 0.
fn reconcile_question<'a>(
    existing: impl Iterator<Item = (&'a str, bool)>,
    facts: impl Iterator<Item = &'a str>,
) -> String {
    let memories: Vec<Value> = existing
        .enumerate()
        .map(|(i, (text, fixed))| {
            if fixed {
                json!({"memory": i, "text": text, "fixed": true})
            } else {
                json!({"memory": i, "text": text})
            }
        })
        .collect();
    let new: Vec<Value> = facts
        .enumerate()
        .map(|(i, f)| json!({"fact": i, "text": f}))
        .collect();
    format!(
        "Existing memories:\n{}\n\nNew facts:\n{}",
        Value::Array(memories),
        Value::Array(new)
    )
}

/// The part of the reconciliation chat that is the same in every call: the instructions
/// and the worked examples. As in extraction, the date comes with the question, so a local
/// model reuses all of this.
pub(super) fn reconcile_prefix() -> Vec<Message> {
    let system = "You keep a memory store current. For each new fact, in order:\n\
`memory`: the existing memory the fact is most about (the same person and the same thing), \
or null if none is.\n\
`memory_still_true`: once the fact is true, is that memory still true? A second job, hobby, \
child or pet, a trip, a visit, a plan, a wish, a passing state or someone else's news leave \
it true.\n\
`event`: UPDATE if the fact changes or corrects that memory, DELETE if it ends it (both only \
when it is no longer true); NONE if the memory already says the fact; otherwise ADD.\n\
Never UPDATE or DELETE a memory marked \"fixed\".\n\
Reply with JSON only: {\"decisions\": [{\"fact\": 0, \"memory\": null, \"event\": \"ADD\"}]}, \
one decision per new fact, in their order.";
    let mut chat = vec![Message::new("system", system)];
    for (memories, new, answer) in RECONCILE_EXAMPLES {
        chat.push(Message::user(reconcile_question(
            memories.iter().map(|m| (*m, false)),
            new.iter().copied(),
        )));
        chat.push(Message::new("assistant", answer));
    }
    chat
}

/// Decides, for each new fact, whether it adds to, updates, contradicts or repeats the
/// existing memories.
pub(crate) async fn reconcile(
    llm: &dyn Llm,
    facts: &[String],
    existing: &[Existing],
    at: DateTime<Utc>,
) -> Result<Parsed<Vec<Decision>>> {
    let mut chat = reconcile_prefix();
    chat.push(Message::user(format!(
        "Today: {}\n{}",
        today(at),
        reconcile_question(
            existing.iter().map(|e| (e.text.as_str(), e.immutable)),
            facts.iter().map(String::as_str),
        )
    )));
    chat_json::<Decisions, _>(
        llm,
        chat,
        decisions_schema(facts.len(), existing.len()),
        RECONCILE_TOKENS,
        |d| check_decisions(&d.decisions, facts.len(), existing.len()),
    )
    .await
    .map(|p| Parsed {
        value: p.value.decisions,
        usage: p.usage,
        model: p.model,
    })
}

pub(super) fn check_decisions(
    decisions: &[Decision],
    facts: usize,
    memories: usize,
) -> std::result::Result<(), String> {
    for (i, d) in decisions.iter().enumerate() {
        if d.fact >= facts {
            return Err(format!(
                "fact {} does not exist; the new facts are numbered 0 to {}",
                d.fact,
                facts.saturating_sub(1)
            ));
        }
        if d.fact != i {
            return Err(format!(
                "decision {i} is about fact {}; give one decision per new fact, in their \
                 order (fact 0 first)",
                d.fact
            ));
        }
        match (d.event, d.memory) {
            (Event::Update | Event::Delete, None) => {
                return Err(format!(
                    "the {:?} of fact {} names no memory",
                    d.event, d.fact
                ))
            }
            (_, Some(m)) if m >= memories => {
                return Err(format!(
                    "memory {m} does not exist; the existing memories are numbered 0 to {}",
                    memories.saturating_sub(1)
                ))
            }
            _ => {}
        }
        match (d.event, d.memory, d.memory_still_true) {
            (Event::Update | Event::Delete, _, Some(true)) => {
                return Err(format!(
                    "the {:?} of fact {} names a memory still true; ADD the fact instead",
                    d.event, d.fact
                ))
            }
            (Event::Add | Event::None, Some(m), Some(false)) => {
                return Err(format!(
                    "fact {} leaves memory {m} no longer true: UPDATE or DELETE it",
                    d.fact
                ))
            }
            (Event::None, None, _) => {
                return Err(format!(
                    "the NONE of fact {} names no memory; name the memory that already says it",
                    d.fact
                ))
            }
            _ => {}
        }
    }
    if decisions.len() < facts {
        return Err(format!(
            "{} decisions for {facts} new facts; give one decision per new fact",
            decisions.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ScriptedLlm;

    /// The instructions and examples come first and never change; the date and the
    /// numbered memories and facts come last, in the question.
    #[tokio::test]
    async fn the_question_carries_the_date_after_the_fixed_instructions_and_examples() {
        let llm = ScriptedLlm::new([r#"{"decisions": [{"fact": 0, "event": "ADD"}]}"#]);
        let at = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 22, 10, 30, 0).unwrap();
        let existing = [Existing {
            text: "Lives in Oslo".into(),
            immutable: true,
        }];
        let decided = reconcile(&llm, &["Visits Rome".into()], &existing, at)
            .await
            .unwrap();
        assert_eq!(decided.value[0].event, Event::Add);
        let messages = &llm.requests()[0].messages;
        assert_eq!(messages.len(), 2 + 2 * RECONCILE_EXAMPLES.len());
        assert!(messages[..messages.len() - 1]
            .iter()
            .all(|m| !m.content.contains("2026-11-22")));
        let question = &messages.last().unwrap().content;
        assert!(
            question.starts_with("Today: 2026-11-22 (Sunday)"),
            "{question}"
        );
        assert!(question.contains(r#"{"memory":0,"text":"Lives in Oslo","fixed":true}"#));
        assert!(question.contains(r#"{"fact":0,"text":"Visits Rome"}"#));
    }

    /// Every worked example is an answer the checks accept, and the examples do not all
    /// answer their first fact alike: a small model answers a question's first fact (often
    /// its only one) as the examples answer theirs.
    #[test]
    fn the_worked_examples_are_valid_answers_and_their_first_decisions_vary() {
        let mut first = Vec::new();
        for (memories, facts, answer) in RECONCILE_EXAMPLES {
            let parsed: Decisions = serde_json::from_str(answer).unwrap();
            check_decisions(&parsed.decisions, facts.len(), memories.len()).unwrap();
            assert_eq!(parsed.decisions.len(), facts.len(), "{answer}");
            first.push(parsed.decisions[0].event);
        }
        assert_eq!(first.len(), RECONCILE_EXAMPLES.len());
        assert!(first.iter().any(|&e| e != first[0]), "{first:?}");
        assert_eq!(
            RECONCILE_EXAMPLES[0].1.len(),
            1,
            "the first example has one fact"
        );
    }

    /// Decisions name real facts and memories, and an UPDATE or DELETE only a memory the
    /// model did not call still true.
    #[test]
    fn decisions_must_name_real_facts_and_memories() {
        let d = |fact, event, memory, still: Option<bool>| Decision {
            fact,
            event,
            memory,
            memory_still_true: still,
        };
        assert!(check_decisions(&[d(0, Event::Add, None, None)], 1, 0).is_ok());
        assert!(check_decisions(&[d(1, Event::Add, None, None)], 1, 0)
            .unwrap_err()
            .contains("fact 1 does not exist"));
        assert!(check_decisions(&[d(0, Event::Delete, None, None)], 1, 1)
            .unwrap_err()
            .contains("names no memory"));
        assert!(check_decisions(&[d(0, Event::None, Some(3), None)], 1, 1)
            .unwrap_err()
            .contains("memory 3 does not exist"));
        assert!(
            check_decisions(&[d(0, Event::Update, Some(0), Some(true))], 1, 1)
                .unwrap_err()
                .contains("still true")
        );
        assert!(check_decisions(&[d(0, Event::Update, Some(0), Some(false))], 1, 1).is_ok());
        assert!(check_decisions(&[d(0, Event::Add, Some(0), Some(true))], 1, 1).is_ok());
        // One decision per new fact, in their order.
        let add = |fact| d(fact, Event::Add, None, None);
        assert!(check_decisions(&[add(0), add(1)], 2, 0).is_ok());
        assert!(check_decisions(&[add(1), add(0)], 2, 0)
            .unwrap_err()
            .contains("in their order"));
        assert!(check_decisions(&[add(0)], 2, 0)
            .unwrap_err()
            .contains("1 decisions for 2 new facts"));
        assert!(check_decisions(&[add(0), add(0)], 1, 0)
            .unwrap_err()
            .contains("in their order"));
    }
}
