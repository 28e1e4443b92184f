//! What memlane asks a language model, and how it reads the answers: fact extraction,
//! the comparison of a new fact with existing memories, a structured digest, and merging.
//!
//! Every answer is JSON read into the structs below and checked by a `validate` function;
//! a broken rule is sent back to the model once (see [`chat_json`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::{Label, DEFAULT_LABELS};
use crate::error::Result;
use crate::limits;
use crate::llm::{chat_json, ChatRequest, Llm, Parsed};
use crate::record::Message;

pub(crate) mod dates;
#[cfg(feature = "fuzzing")]
pub(crate) mod fuzz;

/// Most facts one extraction may return.
pub(crate) const MAX_FACTS: usize = 50;
/// Token budget of an extraction reply.
const EXTRACT_TOKENS: u32 = 768;

/// One fact as the model states it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Fact {
    pub(crate) text: String,
    #[serde(default)]
    pub(crate) categories: Vec<String>,
    #[serde(default)]
    pub(crate) entities: Vec<String>,
    #[serde(default = "default_importance")]
    pub(crate) importance: i64,
}

fn default_importance() -> i64 {
    crate::record::DEFAULT_IMPORTANCE
}

#[derive(Debug, Deserialize)]
struct Facts {
    facts: Vec<Fact>,
}

/// The conversation as the model reads it: one `role: content` line per message.
fn transcript(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str(&m.role);
        out.push_str(": ");
        out.push_str(&m.content);
        out.push('\n');
    }
    out
}

/// The date line every prompt carries, so relative dates can be resolved.
fn today(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d (%A), %H:%M UTC").to_string()
}

/// The labels as the prompt lists them. The default catalogue's names speak for themselves;
/// a project's own labels carry their descriptions. Every prompt token costs time on a local
/// model (about 0.1 s each on two cores), so this is kept short.
fn label_lines(labels: &[Label]) -> String {
    let default = labels.len() == DEFAULT_LABELS.len()
        && labels
            .iter()
            .zip(DEFAULT_LABELS)
            .all(|(l, (n, _))| l.name == *n);
    labels
        .iter()
        .map(|l| {
            if default || l.description.is_empty() {
                l.name.clone()
            } else {
                format!("{} ({})", l.name, l.description)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Extracts the facts worth remembering from a conversation.
pub(crate) async fn extract_facts(
    llm: &dyn Llm,
    messages: &[Message],
    at: DateTime<Utc>,
    policy: &str,
    labels: &[Label],
) -> Result<Parsed<Vec<Fact>>> {
    let policy = if policy.trim().is_empty() {
        String::new()
    } else {
        format!("Project policy (overrides the rules): {policy}\n")
    };
    let system = format!(
        "Extract facts worth remembering about the user from a conversation held on {date}.\n\
Rules: take every fact from every user message: each preference, dislike, habit, plan, \
relationship, job, place and decision is its own short, self-contained fact. After a \
correction keep only the corrected fact. Nothing from greetings, thanks, small talk, questions \
or the assistant's words. Write dates as absolute dates. Never translate: a fact is in the \
language of its message (\"Vado in palestra ogni mattina\" gives \"Va in palestra ogni \
mattina\"). importance is 1 (trivia) to 10 (essential).\n\
{policy}\
Categories: {labels}\n\
Reply with JSON only: {{\"facts\": [{{\"text\": \"...\", \"categories\": [\"...\"], \
\"entities\": [\"...\"], \"importance\": 5}}]}}, or {{\"facts\": []}} if nothing is worth keeping.",
        date = today(at),
        labels = label_lines(labels),
    );
    let prompt = transcript(messages);
    let parsed = chat_json::<Facts, _>(
        llm,
        vec![Message::new("system", system), Message::user(prompt)],
        EXTRACT_TOKENS,
        |f| check_facts(&f.facts),
    )
    .await?;
    Ok(Parsed {
        value: clean_facts(parsed.value.facts, labels),
        usage: parsed.usage,
        model: parsed.model,
    })
}

fn check_facts(facts: &[Fact]) -> std::result::Result<(), String> {
    if facts.len() > MAX_FACTS {
        return Err(format!(
            "{} facts; give at most {MAX_FACTS}, the most important first",
            facts.len()
        ));
    }
    for (i, f) in facts.iter().enumerate() {
        if f.text.trim().is_empty() {
            return Err(format!("fact {i} has an empty text"));
        }
        if f.text.len() > limits::MAX_TEXT_BYTES {
            return Err(format!("fact {i} is too long; keep facts short"));
        }
    }
    Ok(())
}

/// Tidies checked facts: trims, drops repeats and questions, keeps only known labels (a
/// label the model made up is dropped, not an error: the fact is still worth keeping),
/// clamps importance.
fn clean_facts(facts: Vec<Fact>, labels: &[Label]) -> Vec<Fact> {
    let mut seen = std::collections::HashSet::new();
    facts
        .into_iter()
        .filter_map(|mut f| {
            f.text = f.text.trim().to_owned();
            // A question states nothing; small models sometimes return the user's greeting.
            if f.text.ends_with(['?', '？']) || !seen.insert(f.text.to_lowercase()) {
                return None;
            }
            f.categories = dedup(
                f.categories
                    .into_iter()
                    .filter(|c| labels.iter().any(|l| l.name == *c)),
            );
            f.entities = dedup(
                f.entities
                    .into_iter()
                    .map(|e| e.trim().to_owned())
                    .filter(|e| !e.is_empty() && e.len() <= 256),
            )
            .into_iter()
            .take(32)
            .collect();
            f.importance = f.importance.clamp(1, 10);
            Some(f)
        })
        .collect()
}

fn dedup(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// What happens to one new fact, as the plan of an add states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum Event {
    Add,
    Update,
    Delete,
    None,
}

/// One decision about a new fact: `fact` and `memory` are indexes into the facts asked
/// about and the memories shown, never real ids.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Decision {
    pub(crate) fact: usize,
    pub(crate) event: Event,
    #[serde(default)]
    pub(crate) memory: Option<usize>,
    #[serde(default)]
    pub(crate) text: Option<String>,
}

/// The model's answer about one new fact and the memories it was compared with, numbered
/// as the prompt numbered them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct Verdict {
    /// Memories the fact changes or corrects: no longer true.
    #[serde(default)]
    pub(crate) outdated: Vec<usize>,
    /// A memory that already says what the fact says.
    #[serde(default)]
    pub(crate) same: Option<usize>,
}

/// Token budget of a verdict (`{"outdated": [0, 1], "same": null}` is 16 tokens).
const VERDICT_TOKENS: u32 = 48;

/// The instructions of [`compare`]. They carry no date and nothing of the call, so a local
/// model reads them once and starts every later comparison from them (its prefix cache).
/// The examples are made up for this prompt: none is a case of memlane's evaluations.
const COMPARE_SYSTEM: &str = "You keep what is remembered about a person current. You get \
the memories stored about them, numbered, and one new fact about them.\n\
A memory is outdated when the new fact changes or corrects it: the same thing (where they \
live, their job or employer, their partner, their age, a date, a time, a name, a favourite, a \
diet, their car or phone) now has another value. A memory is not outdated when both can be \
true: a visit or a trip elsewhere, another hobby, child, pet, sibling or language, a job on the \
side. A memory about another subject is never outdated: most new facts outdate nothing.\n\
same: the memory that already says everything the new fact says, or null.\n\
Reply with JSON only: {\"outdated\": [numbers], \"same\": number or null}\n\
\n\
Memories:\n0: Lives in Rome\n1: Has a dog named Max\nNew fact: Moved to Milan in May\n\
{\"outdated\": [0], \"same\": null}\n\
\n\
Memories:\n0: Works as a teacher in Oslo\n1: Plays tennis on Sundays\nNew fact: Is in Paris \
for a conference this week\n\
{\"outdated\": [], \"same\": null}\n\
\n\
Memories:\n0: Mi hermano se llama Pablo\nNew fact: Mi hermana Lucía empieza la universidad\n\
{\"outdated\": [], \"same\": null}\n\
\n\
Memories:\n0: Takes piano lessons on Tuesdays\n1: Is allergic to dogs\nNew fact: It is raining \
today\n\
{\"outdated\": [], \"same\": null}\n\
\n\
Memories:\n0: Le rendez-vous chez le dentiste est vendredi\n1: Aime le jazz\nNew fact: Le \
rendez-vous chez le dentiste est lundi\n\
{\"outdated\": [0], \"same\": null}\n\
\n\
Memories:\n0: Drinks coffee every morning\nNew fact: Has a coffee each morning\n\
{\"outdated\": [], \"same\": 0}";

/// Asks whether one new fact makes any of `memories` out of date, or repeats one.
pub(crate) async fn compare(
    llm: &dyn Llm,
    fact: &str,
    memories: &[String],
) -> Result<Parsed<Verdict>> {
    let mut prompt = String::from("Memories:\n");
    for (i, m) in memories.iter().enumerate() {
        // One line per memory: a line break inside one would read as the next.
        prompt.push_str(&format!("{i}: {}\n", m.replace(['\n', '\r'], " ")));
    }
    prompt.push_str("New fact: ");
    prompt.push_str(&fact.replace(['\n', '\r'], " "));
    chat_json::<Verdict, _>(
        llm,
        vec![
            Message::new("system", COMPARE_SYSTEM),
            Message::user(prompt),
        ],
        VERDICT_TOKENS,
        |v| check_verdict(v, memories.len()),
    )
    .await
}

/// The instructions of [`still_true`]: fixed, like [`COMPARE_SYSTEM`], with examples made
/// up for this prompt. The question is put so that "yes" keeps the memory: a small model
/// leans to "yes", and a contradiction kept costs less than a fact lost.
const STILL_TRUE_SYSTEM: &str = "You get what is remembered about a person and a new fact \
about them. Answer whether the memory is still true once the new fact is known. It is not \
when the new fact gives the same thing another value: another home, job, employer, \
partner, age, day, time, date, name or favourite. It is when the new fact is about \
something else or adds to it: a visit or a trip, another hobby, relative, child, pet or \
language, a job on the side.\n\
Reply with JSON only: {\"still_true\": true} or {\"still_true\": false}\n\
\n\
Memory: Lives in Rome\nNew fact: Moved to Milan in May\n{\"still_true\": false}\n\
\n\
Memory: Mi hermano se llama Pablo\nNew fact: Mi hermana Lucía se ha prometido\n\
{\"still_true\": true}\n\
\n\
Memory: Le rendez-vous chez le dentiste est vendredi\nNew fact: Le rendez-vous chez le \
dentiste est lundi\n{\"still_true\": false}\n\
\n\
Memory: Is learning the violin\nNew fact: Is in Paris for a conference this week\n\
{\"still_true\": true}\n\
\n\
Memory: Has a cat named Leo\nNew fact: Adopted a parrot called Kiwi\n{\"still_true\": true}\n\
\n\
Memory: Is 52 years old\nNew fact: Is actually 25 years old\n{\"still_true\": false}\n\
\n\
Memory: Plays chess on Sundays\nNew fact: It is raining today\n{\"still_true\": true}";

#[derive(Debug, Deserialize)]
struct StillTrue {
    still_true: bool,
}

/// Asks whether a memory the comparison called outdated is in fact still true beside the
/// new fact: one pair, one narrow question, which a small model answers better than it
/// picks from a list (it tends to call the first memory listed outdated).
pub(crate) async fn still_true(llm: &dyn Llm, memory: &str, fact: &str) -> Result<Parsed<bool>> {
    let one_line = |t: &str| t.replace(['\n', '\r'], " ");
    let prompt = format!("Memory: {}\nNew fact: {}", one_line(memory), one_line(fact));
    let parsed = chat_json::<StillTrue, _>(
        llm,
        vec![
            Message::new("system", STILL_TRUE_SYSTEM),
            Message::user(prompt),
        ],
        VERDICT_TOKENS,
        |_| Ok(()),
    )
    .await?;
    Ok(Parsed {
        value: parsed.value.still_true,
        usage: parsed.usage,
        model: parsed.model,
    })
}

/// The instructions of [`replaces`]: the same judgement as [`still_true`]'s, asked the
/// other way round. The local model errs differently on the two (probed on the tuned half
/// of the contradiction set: each alone got 10 of 14 pairs right, in different places), so
/// a memory is replaced only when both say so.
const REPLACES_SYSTEM: &str = "Does the new fact about a person replace the old one, so that \
the old one is no longer true? Both are about the same person, whether they say I or name \
them. Yes only when both are about the same thing and give it \
different values (another home, job, employer, partner, age, day, time, date, name or \
favourite). No when the new fact is about something else or adds to it (a visit, a trip, \
another hobby, relative, child, pet, language or dish).\n\
Answer yes or no.\n\
\n\
Old: Anna lives in Oslo\nNew: I moved to Bergen last year (2025)\nyes\n\
\n\
Old: Mi hermano se llama Pablo\nNew: Mi hermana Lucía se ha prometido\nno\n\
\n\
Old: Le rendez-vous chez le dentiste est vendredi\nNew: Le rendez-vous chez le dentiste \
est lundi\nyes\n\
\n\
Old: Sofia has a cat named Leo\nNew: I adopted a parrot called Kiwi\nno\n\
\n\
Old: Is 52 years old\nNew: Is actually 25 years old\nyes\n\
\n\
Old: Plays chess on Sundays\nNew: It is raining today\nno";

/// Asks whether a new fact replaces a memory: `true` only for an answer that starts with
/// "yes" (an answer that is neither keeps the memory: a contradiction kept costs less
/// than a fact lost).
pub(crate) async fn replaces(llm: &dyn Llm, memory: &str, fact: &str) -> Result<Parsed<bool>> {
    let one_line = |t: &str| t.replace(['\n', '\r'], " ");
    let prompt = format!("Old: {}\nNew: {}", one_line(memory), one_line(fact));
    let reply = llm
        .chat(
            ChatRequest::new(vec![
                Message::new("system", REPLACES_SYSTEM),
                Message::user(prompt),
            ])
            .max_tokens(2),
        )
        .await?;
    let answer = reply.text.trim_start().to_lowercase();
    Ok(Parsed {
        value: answer.starts_with("yes"),
        usage: reply.usage,
        model: reply.model,
    })
}

fn check_verdict(verdict: &Verdict, memories: usize) -> std::result::Result<(), String> {
    let last = memories.saturating_sub(1);
    for &m in verdict.outdated.iter().chain(&verdict.same) {
        if m >= memories {
            return Err(format!(
                "memory {m} does not exist; the memories are numbered 0 to {last}"
            ));
        }
    }
    if let Some(same) = verdict.same {
        if verdict.outdated.contains(&same) {
            return Err(format!(
                "memory {same} cannot both say the same as the new fact and be outdated by it"
            ));
        }
    }
    Ok(())
}

/// The digest of a conversation that `extract` returns.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Digest {
    pub(crate) summary: String,
    #[serde(default)]
    pub(crate) entities: Vec<String>,
    #[serde(default)]
    pub(crate) tags: Vec<String>,
    #[serde(default)]
    pub(crate) key_facts: Vec<String>,
    #[serde(default = "default_importance")]
    pub(crate) importance: i64,
}

/// Digests a conversation into one structured record.
pub(crate) async fn digest(
    llm: &dyn Llm,
    messages: &[Message],
    at: DateTime<Utc>,
    policy: &str,
    labels: &[Label],
) -> Result<Parsed<Digest>> {
    let policy = if policy.trim().is_empty() {
        String::new()
    } else {
        format!("Project policy: {policy}\n")
    };
    let system = format!(
        "Turn a conversation held on {date} into one memory record. summary: one or two \
sentences on what is worth remembering; entities: people, places, organisations and things \
named; tags: the categories that fit; key_facts: short self-contained facts, dates written as \
absolute dates; importance: 1 (trivia) to 10 (essential). Keep the conversation's language.\n\
{policy}\
Categories: {labels}\n\
Reply with JSON only: {{\"summary\": \"...\", \"entities\": [\"...\"], \"tags\": \
[\"...\"], \"key_facts\": [\"...\"], \"importance\": 5}}",
        date = today(at),
        labels = label_lines(labels),
    );
    let prompt = transcript(messages);
    let mut parsed = chat_json::<Digest, _>(
        llm,
        vec![Message::new("system", system), Message::user(prompt)],
        EXTRACT_TOKENS,
        |d| {
            if d.summary.trim().is_empty() {
                Err("the summary is empty".into())
            } else if d.summary.len() > limits::MAX_TEXT_BYTES {
                Err("the summary is too long".into())
            } else {
                Ok(())
            }
        },
    )
    .await?;
    let d = &mut parsed.value;
    d.summary = d.summary.trim().to_owned();
    d.tags.retain(|t| labels.iter().any(|l| l.name == *t));
    d.key_facts.retain(|f| !f.trim().is_empty());
    d.importance = d.importance.clamp(1, 10);
    Ok(parsed)
}

/// Merges near-duplicate memories into one text.
pub(crate) async fn merge(llm: &dyn Llm, texts: &[String]) -> Result<Parsed<String>> {
    #[derive(Deserialize)]
    struct Merged {
        text: String,
    }
    let system = "You merge memories that say nearly the same thing into one memory that keeps \
every detail of them all, in their language, as one short sentence. Reply with only this JSON: \
{\"text\": \"...\"}";
    let list = serde_json::to_string(texts).unwrap_or_default();
    let parsed = chat_json::<Merged, _>(
        llm,
        vec![
            Message::new("system", system),
            Message::user(format!("Memories:\n{list}")),
        ],
        256,
        |m| {
            if m.text.trim().is_empty() {
                Err("the merged text is empty".into())
            } else if m.text.len() > limits::MAX_TEXT_BYTES {
                Err("the merged text is too long".into())
            } else {
                Ok(())
            }
        },
    )
    .await?;
    Ok(Parsed {
        value: parsed.value.text.trim().to_owned(),
        usage: parsed.usage,
        model: parsed.model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ScriptedLlm;

    fn at() -> DateTime<Utc> {
        chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 22, 10, 30, 0).unwrap()
    }

    #[tokio::test]
    async fn the_extraction_prompt_carries_date_policy_and_labels() {
        let llm = ScriptedLlm::new([
            r#"{"facts": [{"text": " Likes tea ", "categories": ["food", "made_up"], "importance": 42},
                          {"text": "likes tea"}, {"text": "How are you today?"},
                          {"text": "¿Dónde vives?"}]}"#,
        ]);
        let labels = vec![Label::new("food", "what they eat and drink")];
        let facts = extract_facts(
            &llm,
            &[Message::user("I like tea")],
            at(),
            "Never store health data",
            &labels,
        )
        .await
        .unwrap();
        assert_eq!(facts.value.len(), 1);
        let f = &facts.value[0];
        assert_eq!(f.text, "Likes tea");
        assert_eq!(f.categories, vec!["food"]);
        assert_eq!(f.importance, 10);
        let request = &llm.requests()[0];
        let system = &request.messages[0].content;
        assert!(system.contains("2026-11-22 (Sunday)"), "{system}");
        assert!(system.contains("Never store health data"));
        assert!(system.contains("Categories: food (what they eat and drink)"));
        assert!(request.messages[1].content.contains("user: I like tea"));
    }

    #[test]
    fn a_verdict_must_name_memories_that_were_shown() {
        let v = |outdated: &[usize], same: Option<usize>| Verdict {
            outdated: outdated.to_vec(),
            same,
        };
        assert!(check_verdict(&v(&[], None), 0).is_ok());
        assert!(check_verdict(&v(&[0, 1], None), 2).is_ok());
        assert!(check_verdict(&v(&[1], Some(0)), 2).is_ok());
        assert!(check_verdict(&v(&[2], None), 2)
            .unwrap_err()
            .contains("memory 2 does not exist; the memories are numbered 0 to 1"));
        assert!(check_verdict(&v(&[], Some(3)), 2)
            .unwrap_err()
            .contains("memory 3 does not exist"));
        assert!(check_verdict(&v(&[0], Some(0)), 2)
            .unwrap_err()
            .contains("cannot both"));
    }

    #[tokio::test]
    async fn a_comparison_lists_the_memories_one_per_line_after_fixed_instructions() {
        let llm = ScriptedLlm::new([r#"{"outdated": [1], "same": null}"#]);
        let memories = vec!["Lives in Oslo".to_string(), "Works\nat Acme".to_string()];
        let verdict = compare(&llm, "Joined Globex", &memories).await.unwrap();
        assert_eq!(verdict.value.outdated, vec![1]);
        let request = &llm.requests()[0];
        assert_eq!(request.messages[0].content, COMPARE_SYSTEM);
        assert_eq!(
            request.messages[1].content,
            "Memories:\n0: Lives in Oslo\n1: Works at Acme\nNew fact: Joined Globex"
        );
    }
}
