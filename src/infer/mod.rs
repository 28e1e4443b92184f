//! What memlane asks a language model, and how it reads the answers: fact extraction,
//! reconciliation with existing memories, a structured digest, and merging; and the
//! arithmetic of relative dates ([`dates`]).
//!
//! Every answer is JSON, decoded under a schema where the model can be held to one, read
//! into the structs below and checked by a `validate` function; a broken rule is sent back
//! to the model once (see [`chat_json`]). What the model decided is never second-guessed by
//! lists of words: the checks here read ids, schemas, and whether a fact's words are in
//! what the user said.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::config::{Label, DEFAULT_LABELS};
use crate::error::Result;
use crate::limits;
use crate::llm::{chat_json, ChatRequest, Llm, Parsed};
use crate::record::Message;

pub(crate) mod dates;
mod extract;
mod reconcile;

pub(crate) use extract::{extract_facts, Fact};
pub(crate) use reconcile::{reconcile, Decision, Event, Existing};
#[cfg(feature = "fuzzing")]
pub(crate) mod fuzz;

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
/// inference (extraction, for this project's policy and labels, and reconciliation), each
/// with a one-line question and a one-token reply, so that the first real call reads only
/// its own conversation. A model that keeps none is left alone.
pub(crate) async fn warm(llm: &dyn Llm, policy: &str, labels: &[Label]) -> Result<()> {
    if !llm.reuses_prefixes() {
        return Ok(());
    }
    for mut chat in [
        extract::extraction_prefix(policy, labels).0,
        reconcile::reconcile_prefix(),
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
            r#"{"facts": [{"text": "I like tea"}]}"#,
            r#"{"decisions": [{"fact": 0, "event": "ADD"}]}"#,
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
        let requests = scripted.requests();
        assert_eq!(requests.len(), 4);
        for (warming, real) in [(&requests[0], &requests[2]), (&requests[1], &requests[3])] {
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
        // The schema also has the model say whether a memory it names is still true, and
        // write `memory` even when null; a reply without them, from a model held to no
        // schema, is read as its event says.
        let schema = decisions_schema(2, 3);
        let strict = |reply: &str| {
            serde_json::from_str::<Value>(reply).is_ok_and(|v| {
                v["decisions"].as_array().is_some_and(|ds| {
                    ds.iter().all(|d| {
                        d.get("memory").is_some()
                            && (d["memory"].is_null() || d.get("memory_still_true").is_some())
                    })
                })
            })
        };
        let read = |reply: &str| {
            only(reply, "decisions")
                && strict(reply)
                && serde_json::from_str::<Decisions>(reply)
                    .is_ok_and(|d| check_decisions(&d.decisions, 2, 3).is_ok())
        };
        for decision in [
            r#"{"fact": 0, "memory": 2, "memory_still_true": false, "event": "UPDATE"}"#,
            r#"{"fact": 0, "memory": 0, "memory_still_true": false, "event": "DELETE"}"#,
            r#"{"fact": 0, "memory": 1, "memory_still_true": true, "event": "NONE"}"#,
            r#"{"fact": 0, "memory": 1, "memory_still_true": true, "event": "ADD"}"#,
            r#"{"fact": 0, "memory": null, "event": "ADD"}"#,
            r#"{"fact": 0, "memory": 0, "memory_still_true": true, "event": "UPDATE"}"#,
            r#"{"fact": 0, "memory": 0, "memory_still_true": false, "event": "ADD"}"#,
            r#"{"fact": 0, "memory": null, "event": "UPDATE"}"#,
            r#"{"fact": 0, "memory": null, "event": "NONE"}"#,
            r#"{"fact": 0, "memory": 3, "memory_still_true": true, "event": "NONE"}"#,
            r#"{"fact": 0, "memory": 0, "event": "DELETE"}"#,
            r#"{"fact": 0, "event": "ADD"}"#,
            r#"{"fact": 1, "memory": null, "event": "ADD"}"#,
            r#"{"fact": -1, "memory": null, "event": "ADD"}"#,
            r#"{"fact": 0, "memory": 1, "memory_still_true": false, "event": "MERGE"}"#,
            r#"{"memory": null, "event": "ADD"}"#,
        ] {
            let reply = format!(
                r#"{{"decisions": [{decision}, {{"fact": 1, "memory": null, "event": "ADD"}}]}}"#
            );
            agree(&schema, &reply, read(&reply));
        }
        // One decision per fact, in their order: not fewer, not more.
        for reply in [
            r#"{"decisions": []}"#,
            r#"{"decisions": [{"fact": 0, "memory": null, "event": "ADD"}]}"#,
            r#"{"decisions": [{"fact": 1, "memory": null, "event": "ADD"}, {"fact": 0, "memory": null, "event": "ADD"}]}"#,
            r#"{"decisions": [{"fact": 0, "memory": null, "event": "ADD"}, {"fact": 1, "memory": null, "event": "ADD"}, {"fact": 1, "memory": null, "event": "ADD"}]}"#,
            r#"{"decisions": [{"fact": 0, "memory": null, "event": "ADD"}, {"fact": 1, "memory": null, "event": "ADD"}], "decisions2": []}"#,
        ] {
            agree(&schema, reply, false);
        }

        assert!(seen[0] >= 21 && seen[1] >= 12, "{seen:?}");
    }
}
