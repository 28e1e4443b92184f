//! Fact extraction: the facts worth remembering in a conversation, as a model states
//! them under the extraction prompt, then tidied and checked against what the user said
//! (not copied from the prompt, not the assistant's), by their words alone: no check here
//! knows a language.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{
    answer, label_lines, label_names, object, strings, text, today, transcript, EXTRACT_TOKENS,
};
use crate::config::Label;
use crate::error::Result;
use crate::limits;
use crate::llm::{chat_json, Llm, Parsed};
use crate::record::Message;

#[cfg(test)]
mod tests;

/// Most facts one extraction may return.
pub(crate) const MAX_FACTS: usize = 50;

/// One fact as the model states it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Fact {
    pub(crate) text: String,
    #[serde(default)]
    pub(crate) categories: Vec<String>,
    #[serde(default)]
    pub(crate) entities: Vec<String>,
    #[serde(default = "super::default_importance")]
    pub(crate) importance: i64,
}

#[derive(Debug, Deserialize)]
pub(super) struct Facts {
    pub(super) facts: Vec<Fact>,
}

/// The schema of an extraction reply (see [`check_facts`]). Categories are the project's
/// label names: a local model writes the first token or two of one and the rest is forced,
/// and a constrained model cannot spend tokens on a label that would be dropped.
pub(super) fn facts_schema(labels: &[Label]) -> Value {
    let fact = object(
        json!({
            "text": text(),
            "categories": label_names(labels),
            "entities": strings(),
            "importance": {"type": "integer"}
        }),
        &["text"],
    );
    answer(
        json!({"facts": {"type": "array", "items": fact, "maxItems": MAX_FACTS}}),
        &["facts"],
    )
}

/// Worked examples the extraction prompt shows as earlier turns of its chat: (the
/// conversation with its date, the answer). They show what the rules mean to a small
/// model better than more rules do: a correction keeps only the corrected fact, small talk
/// and the assistant's words give nothing, a fact stays in its language. They never change,
/// so a local model reads them once and keeps them with the instructions (see
/// [`crate::llm::LocalLlm`]).
const EXTRACTION_EXAMPLES: [(&str, &[(&str, &str)]); 3] = [
    (
        "Conversation held on 2024-03-05 (Tuesday), 08:10 UTC:\n\
user: Morning! Grey skies again.\n\
assistant: Morning! How was the kayaking trip?\n\
user: Brilliant, thanks. Quick fix to what I told you: my climbing gym is in Derby, not \
Leicester. And I've just adopted a rescue cat called Marmite.\n\
assistant: Marmite is a great name!\n",
        &[
            ("My climbing gym is in Derby", "sports"),
            ("I adopted a rescue cat called Marmite", "family"),
        ],
    ),
    (
        "Conversation held on 2024-06-14 (Friday), 17:45 UTC:\n\
user: Kleines Update: Ich fahre jetzt Bus in Graz, nicht mehr Taxi! Am Wochenende spiele ich \
Badminton.\n\
assistant: Glückwunsch zur neuen Stelle!\n",
        &[
            (
                "Ich fahre jetzt Bus in Graz, nicht mehr Taxi",
                "professional_details",
            ),
            ("Am Wochenende spiele ich Badminton", "sports"),
        ],
    ),
    (
        "Conversation held on 2024-09-02 (Monday), 21:30 UTC:\n\
user: Merci pour les idées ! Bonne soirée.\n\
assistant: Bonne soirée à vous !\n",
        &[],
    ),
];

/// An example's answer as a model would write it (keys in the schema's order), with its
/// labels where the project has them.
fn example_answer(facts: &[(&str, &str)], labels: &[Label]) -> String {
    let facts: Vec<String> = facts
        .iter()
        .map(|(text, label)| {
            let categories = if labels.iter().any(|l| l.name == *label) {
                json!([label])
            } else {
                json!([])
            };
            format!(r#"{{"text": {}, "categories": {categories}}}"#, json!(text))
        })
        .collect();
    format!(r#"{{"facts": [{}]}}"#, facts.join(", "))
}

/// The part of the extraction chat that is the same in every call of a project: the
/// instructions and the worked examples; and the instructions' text with the examples',
/// which facts must not be copied from.
pub(super) fn extraction_prefix(policy: &str, labels: &[Label]) -> (Vec<Message>, String) {
    let policy = if policy.trim().is_empty() {
        String::new()
    } else {
        format!("Project policy (overrides the rules): {policy}\n")
    };
    // The instructions and examples are the same for every call of a project; the date
    // comes with the conversation, so a local model reuses everything before it.
    let system = format!(
        "Extract facts worth remembering about the user from a conversation.\n\
Rules: take every fact from every user message: each preference, dislike, habit, plan, \
relationship, job, place and decision is its own short, self-contained fact. After a \
correction keep only the corrected fact. Nothing from greetings, thanks, small talk, questions \
or the assistant's words. Write dates as absolute dates, using the conversation's date. \
Never translate: a fact is in the language of its message. importance is 1 (trivia) to 10 \
(essential).\n\
{policy}\
Categories: {labels}\n\
Reply with JSON only: {{\"facts\": [{{\"text\": \"...\", \"categories\": [\"...\"]}}]}}, or \
{{\"facts\": []}} if nothing is worth keeping.",
        labels = label_lines(labels),
    );
    let mut instructions = system.clone();
    let mut chat = vec![Message::new("system", system)];
    for (conversation, facts) in EXTRACTION_EXAMPLES {
        let answer = example_answer(facts, labels);
        chat.push(Message::user(conversation));
        instructions.push_str(conversation);
        instructions.push_str(&answer);
        chat.push(Message::new("assistant", answer));
    }
    (chat, instructions)
}

/// Extracts the facts worth remembering from a conversation.
pub(crate) async fn extract_facts(
    llm: &dyn Llm,
    messages: &[Message],
    at: DateTime<Utc>,
    policy: &str,
    labels: &[Label],
) -> Result<Parsed<Vec<Fact>>> {
    let (mut chat, instructions) = extraction_prefix(policy, labels);
    let prompt = transcript(messages);
    chat.push(Message::user(format!(
        "Conversation held on {}:\n{prompt}",
        today(at)
    )));
    let parsed = chat_json::<Facts, _>(llm, chat, facts_schema(labels), EXTRACT_TOKENS, |f| {
        check_facts(&f.facts)
    })
    .await?;
    let facts = clean_facts(parsed.value.facts, labels);
    Ok(Parsed {
        value: said_by_the_user(not_copied(facts, &instructions, &prompt), messages),
        usage: parsed.usage,
        model: parsed.model,
    })
}

pub(super) fn check_facts(facts: &[Fact]) -> std::result::Result<(), String> {
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
pub(super) fn clean_facts(facts: Vec<Fact>, labels: &[Label]) -> Vec<Fact> {
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

/// Drops the facts a model copied from its instructions (their example, a project's policy)
/// instead of reading them in the conversation: a fact the instructions hold word for word,
/// one of whose longer words (five letters or more) the conversation does not have. Small
/// models do this when a conversation resembles the example.
fn not_copied(facts: Vec<Fact>, instructions: &str, conversation: &str) -> Vec<Fact> {
    let instructions = instructions.to_lowercase();
    let said: std::collections::HashSet<String> =
        crate::text::terms(conversation).into_iter().collect();
    facts
        .into_iter()
        .filter(|f| {
            let text = f.text.trim_end_matches(['.', '!']).to_lowercase();
            if !instructions.contains(&text) {
                return true;
            }
            let grounded = crate::text::terms(&text)
                .iter()
                .filter(|w| w.chars().count() >= 5)
                .all(|w| said.contains(w));
            if !grounded {
                tracing::debug!(target: "memlane", "a fact copied from the instructions was dropped");
            }
            grounded
        })
        .collect()
}

/// Drops the facts a model took from the assistant's messages or the user's questions
/// rather than from what the user stated (answers, suggestions, jokes, the subject of a
/// question), which the prompt forbids and small models do: a fact most of whose words
/// (folded and stemmed) only those have. A fact in words of neither, a translation say,
/// stays. So do facts of one word, in scripts that separate words with spaces: "Cheers!"
/// and "Gut" state nothing about anyone.
fn said_by_the_user(facts: Vec<Fact>, messages: &[Message]) -> Vec<Fact> {
    let mut stated = std::collections::HashSet::new();
    let mut other = std::collections::HashSet::new();
    for m in messages {
        if m.role == "assistant" {
            other.extend(crate::text::terms(&m.content));
            continue;
        }
        // Sentences end at . ! ? (and their full-width forms) or a line break.
        for sentence in m
            .content
            .split_inclusive(['.', '!', '?', '\n', '。', '！', '？'])
        {
            let question = sentence.trim_end().ends_with(['?', '？']);
            let terms = crate::text::terms(sentence);
            if question { &mut other } else { &mut stated }.extend(terms);
        }
    }
    facts
        .into_iter()
        .filter(|f| {
            let terms = crate::text::terms(&f.text);
            let theirs = terms
                .iter()
                .filter(|t| other.contains(*t) && !stated.contains(*t))
                .count();
            // Chinese and Japanese (from U+2E80 on) write a sentence as one "word".
            let sentence = f.text.split_whitespace().nth(1).is_some()
                || f.text.chars().any(|c| c >= '\u{2E80}');
            let kept = sentence && theirs * 2 <= terms.len();
            if !kept {
                tracing::debug!(target: "memlane", "a fact the user did not state was dropped");
            }
            kept
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
