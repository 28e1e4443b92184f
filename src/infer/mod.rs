//! What memlane asks a language model, and how it reads the answers: fact extraction,
//! reconciliation with existing memories, a structured digest, and merging.
//!
//! Every answer is JSON read into the structs below and checked by a `validate` function;
//! a broken rule is sent back to the model once (see [`chat_json`]).

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::config::{Label, DEFAULT_LABELS};
use crate::error::Result;
use crate::limits;
use crate::llm::{chat_json, ChatRequest, Llm, Parsed};
use crate::record::Message;

pub(crate) mod dates;
mod denials;
mod diets;
mod extract;
mod habits;
mod looks;
mod moves;
mod partners;
mod people;
mod pets;
pub(crate) mod places;
mod reconcile;
mod small_talk;
mod tastes;
mod topics;
mod work;

pub(crate) use denials::takes_back;
pub(crate) use diets::{ends_diet, rules_out, switches_diet};
pub(crate) use extract::{activities, extract_facts, left_out, Fact};
pub(crate) use habits::at_other_times;
pub(crate) use looks::{
    answers, apart, clauses, outdates, replaces, with_the_rest_kept, with_the_rest_kept_by, Apart,
};
pub(crate) use moves::{moved_away, stays_away};
pub(crate) use partners::{ends_partnership, ends_single_life, makes_a_friend};
pub(crate) use people::of_someone_else;
pub(crate) use pets::{a_pet_died, another_pet};
pub(crate) use reconcile::{reconcile, Decision, Event, Existing};
pub(crate) use tastes::{another_taste, gives_up_drinking, reverses_taste};
pub(crate) use topics::{gives_up_diet, leaves_topic, takes_up_diet, topics};
pub(crate) use work::{changes_jobs, retires};
#[cfg(feature = "fuzzing")]
pub(crate) mod fuzz;

/// Words with which a speaker marks a fact as one more of its kind, in the languages memlane
/// is evaluated in: English, French, German, Italian, Spanish, Portuguese and Dutch.
const ADDITIVE: [&str; 10] = [
    "also",
    "too",
    "aussi",
    "également",
    "auch",
    "ebenfalls",
    "anche",
    "también",
    "também",
    "ook",
];

/// Whether a fact has one of the [`ADDITIVE`] words after its first word: a first "Also,"
/// brings news ("Also, I moved to Porto"), and German's "Also" means "so".
pub(crate) fn additional(fact: &str) -> bool {
    fact.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .skip(1)
        .any(|word| ADDITIVE.contains(&word.to_lowercase().as_str()))
}

/// Words and phrases by which a speaker says something still holds: "I still cycle every
/// weekend", "Je joue toujours au tennis", "Ich spiele immer noch Geige", "Suono ancora
/// il piano", "Todavía vivo en Bilbao", "Sigo corriendo", "Ainda moro em Lisboa", "Ik
/// woon nog steeds in Gent". Not French "encore" nor Dutch "nog" alone, which say "again"
/// and "one more" as often.
const STILL: &[&[&str]] = &[
    &["still"],
    &["toujours"],
    &["immer", "noch"],
    &["weiterhin"],
    &["ancora"],
    &["todavia"],
    &["aun"],
    &["sigo"],
    &["ainda"],
    &["continuo"],
    &["nog", "steeds"],
    &["nog", "altijd"],
];

/// Forms of "avoir" before which "toujours" is "always": "J'ai toujours voulu…".
const AVOIR: &[&str] = &["ai", "as", "a", "avons", "avez", "ont"];

/// Whether a fact says something still holds ([`STILL`]): it confirms what a memory says
/// rather than taking its place ("I still cycle every weekend" beside "I love cycling").
pub(crate) fn still_holds(fact: &str) -> bool {
    let words = crate::text::folded_words(fact);
    let always = words
        .windows(2)
        .any(|w| w[1] == "toujours" && AVOIR.contains(&w[0].as_str()));
    !always && says_phrase(&words, STILL)
}

/// Phrases by which a speaker says what something took the place of: "instead of",
/// "statt", "invece di", "au lieu de", "en vez de", "em vez de", "en lugar de", "in
/// plaats van".
const IN_PLACE: &[&[&str]] = &[
    &["instead"],
    &["statt"],
    &["anstatt"],
    &["anstelle"],
    &["invece"],
    &["au", "lieu"],
    &["en", "vez"],
    &["em", "vez"],
    &["en", "lugar", "de"],
    &["in", "plaats", "van"],
];

/// Whether a text says what something took the place of ([`IN_PLACE`]): "Seit zwei
/// Wochen trinke ich statt Espresso nur noch Kräutertee".
pub(crate) fn in_place_of(text: &str) -> bool {
    says_phrase(&crate::text::folded_words(text), IN_PLACE)
}

/// Whether folded `words` hold one of `phrases`, its words in a row.
pub(super) fn says_phrase(words: &[String], phrases: &[&[&str]]) -> bool {
    phrases.iter().any(|phrase| {
        words
            .windows(phrase.len())
            .any(|w| w.iter().zip(phrase.iter()).all(|(a, b)| a == b))
    })
}

/// The names a text gives: its capitalised words but "I", folded ("Léo": "leo"). A
/// function word counts only inside a sentence, where its capital makes it a name ("I'm
/// with Mia now"; "Mia" is Italian for "my"); at a sentence's start it is none.
pub(super) fn names(text: &str) -> Vec<String> {
    text.split(['.', '!', '?', ';', ':', '\n'])
        .flat_map(|sentence| {
            sentence
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .enumerate()
                .filter(|&(i, w)| {
                    w.chars().next().is_some_and(char::is_uppercase)
                        && w != "I"
                        && (i > 0 || !crate::text::content_words(w).is_empty())
                })
                .map(|(_, w)| crate::text::folded_words(w).concat())
        })
        .collect()
}

/// Token budget of an extraction or digest reply.
const EXTRACT_TOKENS: u32 = 768;

fn default_importance() -> i64 {
    crate::record::DEFAULT_IMPORTANCE
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

// The answers' JSON schemas. A model that can decode under a schema (the local one; the
// OpenAI-protocol servers that take `json_schema`) is kept to them. Each forbids what the
// reading below would reject (a reply that does not parse into the struct or breaks a
// rule of its `check`), and two things more: a category that is not one of the project's
// labels, which reading would drop, and a key the answer does not have at its top level,
// which reading would ignore. Out-of-range importance and unknown keys inside an item are
// tidied after reading, so the schemas allow them. Properties are listed in the order the
// prompts show.

/// An object with these properties, in this order, of which `required` must be present.
fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

/// An answer: an object with these properties and no other, so that a constrained reply
/// ends when its last property does (a small model otherwise goes on with made-up keys).
fn answer(properties: Value, required: &[&str]) -> Value {
    let mut schema = object(properties, required);
    schema["additionalProperties"] = json!(false);
    schema
}

fn strings() -> Value {
    json!({"type": "array", "items": {"type": "string"}})
}

fn text() -> Value {
    json!({"type": "string", "minLength": 1})
}

/// An index among `n` things (the prompts number facts and memories from 0).
fn index(n: usize) -> Value {
    json!({"type": "integer", "minimum": 0, "maximum": n.saturating_sub(1)})
}

/// An array of the project's label names (empty when it has none).
fn label_names(labels: &[Label]) -> Value {
    let names: Vec<&str> = labels.iter().map(|l| l.name.as_str()).collect();
    if names.is_empty() {
        json!({"type": "array", "maxItems": 0})
    } else {
        json!({"type": "array", "items": {"enum": names}})
    }
}

/// Has a model that keeps prompt prefixes read the fixed part of the prompts of `add` with
/// inference (extraction, for this project's policy and labels, reconciliation, and its
/// second look),
/// each with a one-line question and a one-token reply, so that the first real call reads
/// only its own conversation. A model that keeps none is left alone.
pub(crate) async fn warm(llm: &dyn Llm, policy: &str, labels: &[Label]) -> Result<()> {
    if !llm.reuses_prefixes() {
        return Ok(());
    }
    for mut chat in [
        extract::extraction_prefix(policy, labels).0,
        reconcile::reconcile_prefix(),
        looks::second_look_prefix(),
        looks::answers_prefix(),
    ] {
        chat.push(Message::user("Hello"));
        llm.chat(ChatRequest::new(chat).max_tokens(1)).await?;
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
    let schema = answer(
        json!({
            "summary": text(),
            "entities": strings(),
            "tags": label_names(labels),
            "key_facts": strings(),
            "importance": {"type": "integer"}
        }),
        &["summary"],
    );
    let mut parsed = chat_json::<Digest, _>(
        llm,
        vec![Message::new("system", system), Message::user(prompt)],
        schema,
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
        answer(json!({"text": text()}), &["text"]),
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
    #[cfg(feature = "local-llm")]
    use super::extract::{check_facts, facts_schema, Facts, MAX_FACTS};
    #[cfg(feature = "local-llm")]
    use super::looks::{answers_schema, yes_no_schema};
    #[cfg(feature = "local-llm")]
    use super::reconcile::{check_decisions, decisions_schema, Decisions};
    use super::*;
    use crate::llm::ScriptedLlm;

    fn at() -> DateTime<Utc> {
        chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 22, 10, 30, 0).unwrap()
    }

    /// A model that keeps prompt prefixes, answering from a script.
    #[derive(Debug)]
    struct Keeping(ScriptedLlm);

    #[async_trait::async_trait]
    impl Llm for Keeping {
        fn model_id(&self) -> &str {
            "keeping"
        }

        fn reuses_prefixes(&self) -> bool {
            true
        }

        async fn chat(&self, request: ChatRequest) -> Result<crate::llm::ChatResponse> {
            self.0.chat(request).await
        }
    }

    #[tokio::test]
    async fn warming_up_reads_exactly_what_precedes_each_real_question() {
        let scripted = ScriptedLlm::new([
            "{",
            "{",
            "{",
            "{",
            r#"{"facts": [{"text": "I like tea"}]}"#,
            r#"{"decisions": [{"fact": 0, "event": "ADD"}]}"#,
            r#"{"answer": "no"}"#,
            r#"{"question": "What do they drink?", "before": "coffee", "now": "tea"}"#,
        ]);
        let llm = Keeping(scripted.clone());
        let labels = vec![Label::new("food", "what they eat and drink")];
        warm(&llm, "Only food.", &labels).await.unwrap();
        extract_facts(
            &llm,
            &[Message::user("I like tea")],
            at(),
            "Only food.",
            &labels,
        )
        .await
        .unwrap();
        let existing = [Existing {
            text: "Drinks coffee".into(),
            immutable: false,
        }];
        reconcile(&llm, &["I like tea".into()], &existing, at())
            .await
            .unwrap();
        replaces(&llm, "Drinks coffee", "I like tea").await.unwrap();
        looks::answers(&llm, "Drinks coffee", "I like tea")
            .await
            .unwrap();
        let requests = scripted.requests();
        assert_eq!(requests.len(), 8);
        for (warming, real) in [
            (&requests[0], &requests[4]),
            (&requests[1], &requests[5]),
            (&requests[2], &requests[6]),
            (&requests[3], &requests[7]),
        ] {
            let (kept, last) = warming.messages.split_at(warming.messages.len() - 1);
            assert_eq!(kept, &real.messages[..real.messages.len() - 1]);
            assert_eq!(last[0].role, "user");
            assert_eq!(warming.max_tokens, 1);
        }
        // A model that keeps nothing is not called.
        let plain = ScriptedLlm::new(Vec::<String>::new());
        warm(&plain, "", &labels).await.unwrap();
        assert!(plain.requests().is_empty());
    }

    /// The answers' schemas, as the local model's token masks apply them, let through
    /// exactly the replies memlane reads and accepts (in the prompts' layout).
    #[cfg(feature = "local-llm")]
    #[test]
    fn the_schemas_let_through_exactly_the_answers_memlane_accepts() {
        use crate::llm::grammar::tests::{accepts, bytes};
        let grammars = bytes();
        let mut seen = [0usize; 2];
        let mut agree = |schema: &Value, reply: &str, read: bool| {
            assert_eq!(accepts(&grammars, schema, reply), read, "{reply}");
            seen[usize::from(read)] += 1;
        };

        // Read and kept as written: no key beside the answer's, and every category one of
        // the project's labels.
        let only = |reply: &str, key: &str| {
            serde_json::from_str::<serde_json::Map<String, Value>>(reply)
                .is_ok_and(|o| o.keys().all(|k| k == key))
        };
        let labels = [Label::new("food", ""), Label::new("sports", "")];
        let schema = facts_schema(&labels);
        let read = |reply: &str| {
            only(reply, "facts")
                && serde_json::from_str::<Facts>(reply).is_ok_and(|f| {
                    check_facts(&f.facts).is_ok()
                        && f.facts
                            .iter()
                            .flat_map(|f| &f.categories)
                            .all(|c| labels.iter().any(|l| l.name == *c))
                })
        };
        let fifty = vec![r#"{"text": "x"}"#; MAX_FACTS].join(", ");
        for reply in [
            r#"{"facts": []}"#.to_owned(),
            r#"{"facts": [{"text": "Likes tea", "categories": ["food", "sports"], "entities": ["tea"], "importance": 42}]}"#.into(),
            r#"{"facts": [{"text": "Likes tea", "categories": ["food", "made_up"]}]}"#.into(),
            r#"{"facts": [{"text": "Likes tea", "categories": ["foo"]}]}"#.into(),
            r#"{"facts": [{"text": "Likes tea", "categories": []}]}"#.into(),
            r#"{"facts": [{"text": "Likes tea"}, {"text": "Runs", "importance": 3}]}"#.into(),
            r#"{"facts": [{"text": "Likes tea", "date": "2026-11-22"}]}"#.into(),
            format!(r#"{{"facts": [{fifty}]}}"#),
            format!(r#"{{"facts": [{fifty}, {{"text": "one too many"}}]}}"#),
            r#"{"facts": [{"text": ""}]}"#.into(),
            r#"{"facts": [{"categories": ["food"]}]}"#.into(),
            r#"{"facts": [{"text": "Likes tea", "importance": 4.5}]}"#.into(),
            r#"{"facts": [{"text": "Likes tea", "categories": null}]}"#.into(),
            r#"{"facts": {"text": "Likes tea"}}"#.into(),
            r#"{"fact": []}"#.into(),
            r#"{"facts": [], "facts2": []}"#.into(),
        ] {
            agree(&schema, &reply, read(&reply));
        }
        // A project without labels: no category at all.
        let unlabelled = facts_schema(&[]);
        agree(
            &unlabelled,
            r#"{"facts": [{"text": "Likes tea", "categories": []}]}"#,
            true,
        );
        agree(
            &unlabelled,
            r#"{"facts": [{"text": "Likes tea", "categories": ["food"]}]}"#,
            false,
        );

        // Two facts, three memories: each reply below is a first decision, then fact 1's.
        let schema = decisions_schema(2, 3);
        let read = |reply: &str| {
            only(reply, "decisions")
                && serde_json::from_str::<Decisions>(reply)
                    .is_ok_and(|d| check_decisions(&d.decisions, 2, 3).is_ok())
        };
        for decision in [
            r#"{"fact": 0, "event": "UPDATE", "memory": 2, "text": "a, now"}"#,
            r#"{"fact": 0, "event": "DELETE", "memory": 0}"#,
            r#"{"fact": 0, "event": "DELETE", "memory": 0, "text": null}"#,
            r#"{"fact": 0, "event": "NONE", "memory": 1}"#,
            r#"{"fact": 0, "event": "NONE"}"#,
            r#"{"fact": 0, "event": "ADD"}"#,
            r#"{"fact": 0, "event": "ADD", "memory": null, "text": "x"}"#,
            r#"{"fact": 0, "event": "UPDATE", "memory": 0}"#,
            r#"{"fact": 0, "event": "UPDATE", "memory": 0, "text": ""}"#,
            r#"{"fact": 0, "event": "UPDATE", "memory": null, "text": "x"}"#,
            r#"{"fact": 0, "event": "DELETE"}"#,
            r#"{"fact": 0, "event": "NONE", "memory": 3}"#,
            r#"{"fact": 1, "event": "ADD"}"#,
            r#"{"fact": 2, "event": "ADD"}"#,
            r#"{"fact": -1, "event": "ADD"}"#,
            r#"{"fact": 0, "event": "MERGE", "memory": 1}"#,
            r#"{"event": "ADD"}"#,
        ] {
            let reply = format!(r#"{{"decisions": [{decision}, {{"fact": 1, "event": "ADD"}}]}}"#);
            agree(&schema, &reply, read(&reply));
        }
        // One decision per fact, in their order: not fewer, not more.
        for reply in [
            r#"{"decisions": []}"#,
            r#"{"decisions": [{"fact": 0, "event": "ADD"}]}"#,
            r#"{"decisions": [{"fact": 1, "event": "ADD"}, {"fact": 0, "event": "ADD"}]}"#,
            r#"{"decisions": [{"fact": 0, "event": "ADD"}, {"fact": 1, "event": "ADD"}, {"fact": 1, "event": "NONE"}]}"#,
            r#"{"decisions": [{"fact": 0, "event": "ADD"}, {"fact": 1, "event": "ADD"}], "decisions2": []}"#,
        ] {
            agree(&schema, reply, false);
        }

        // A second look's answer: yes or no, nothing else.
        let schema = yes_no_schema();
        for (reply, read) in [
            (r#"{"answer": "yes"}"#, true),
            (r#"{"answer": "no"}"#, true),
            (r#"{"answer": "maybe"}"#, false),
            (r#"{"answer": true}"#, false),
            (r#"{"answer": "yes", "why": "moved"}"#, false),
            (r#"{}"#, false),
        ] {
            agree(&schema, reply, read);
        }

        // The answers of a closer look: the three strings, nothing else.
        let schema = answers_schema();
        for (reply, read) in [
            (
                r#"{"question": "Where?", "before": "Hull", "now": "York"}"#,
                true,
            ),
            (r#"{"question": "", "before": "", "now": ""}"#, true),
            (r#"{"question": "Where?", "before": "Hull"}"#, false),
            (
                r#"{"question": "Where?", "before": "Hull", "now": 3}"#,
                false,
            ),
            (
                r#"{"question": "Where?", "before": "Hull", "now": "York", "why": "moved"}"#,
                false,
            ),
        ] {
            assert_eq!(
                serde_json::from_str::<looks::Answers>(reply).is_ok()
                    && serde_json::from_str::<serde_json::Map<String, Value>>(reply).is_ok_and(
                        |o| o
                            .keys()
                            .all(|k| ["question", "before", "now"].contains(&k.as_str()))
                    ),
                read,
                "{reply}"
            );
            agree(&schema, reply, read);
        }
        assert!(seen[0] >= 28 && seen[1] >= 16, "{seen:?}");
    }
}
