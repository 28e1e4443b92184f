//! Fact extraction: the facts worth remembering in a conversation, as a model states
//! them under the extraction prompt, then tidied and checked against what the user said
//! (not copied from the prompt, not the assistant's, not translated).

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

mod said;
#[cfg(test)]
mod tests;
mod translations;

pub(in crate::infer) use said::SUBJECTS;
use said::{as_said, the_speakers_own};
use translations::in_users_words;

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
    let facts = clean_facts(
        as_said(
            the_speakers_own(in_users_words(parsed.value.facts, messages), messages),
            messages,
        ),
        labels,
    );
    Ok(Parsed {
        value: not_small_talk(said_by_the_user(
            not_copied(facts, &instructions, &prompt),
            messages,
        )),
        usage: parsed.usage,
        model: parsed.model,
    })
}

/// The user's messages cut into sentences, untrimmed: at . ! ? : ; and line breaks (and
/// their CJK forms), not at commas, which would cut "Teacher, 12 years" to a fragment.
fn users_sentences(messages: &[Message]) -> impl Iterator<Item = &str> {
    messages.iter().filter(|m| m.role == "user").flat_map(|m| {
        m.content
            .split(['.', '!', '?', ':', ';', '\n', '。', '！', '？'])
    })
}

/// The user's statements, each once: their sentences ([`users_sentences`]) of two words or
/// more, trimmed, but questions and small talk. What a caller reads for a fact the model
/// did not extract.
pub(crate) fn statements(messages: &[Message]) -> Vec<String> {
    let sentences = messages
        .iter()
        .filter(|m| m.role == "user")
        .flat_map(|m| {
            m.content
                .split_inclusive(['.', '!', '?', ';', '\n', '。', '！', '？'])
        })
        .filter(|s| !s.trim_end().ends_with(['?', '？']))
        .map(|s| {
            s.trim()
                .trim_end_matches(['.', '!', ';', '。', '！'])
                .trim()
        })
        .filter(|s| s.split_whitespace().nth(1).is_some() && !super::small_talk::is_small_talk(s))
        .map(str::to_owned);
    dedup(sentences)
}

/// Verbs of what a person does, in the first person singular of Spanish, Italian and
/// Portuguese, which say who does it without a pronoun: "toco", "gioco", "dou".
const I_DO_AN_ACTIVITY: &[&str] = &[
    // Spanish
    "toco",
    "juego",
    "trabajo",
    "enseño",
    "estudio",
    "practico",
    "corro",
    "nado",
    "doy",
    "vivo",
    "canto",
    "bailo",
    "pinto",
    "escribo",
    "cocino",
    "colecciono",
    "entreno",
    // Italian
    "gioco",
    "suono",
    "lavoro",
    "insegno",
    "studio",
    "pratico",
    "nuoto",
    "abito",
    "ballo",
    "dipingo",
    "scrivo",
    "cucino",
    "colleziono",
    // Portuguese
    "jogo",
    "trabalho",
    "ensino",
    "estudo",
    "dou",
    "moro",
    "danço",
    "escrevo",
    "cozinho",
    "coleciono",
    "treino",
];

/// Words before a noun, which make "trabajo" or "studio" one ("El trabajo es duro", "Mi
/// studio è piccolo").
const DETERMINERS: &[&str] = &[
    "el", "la", "los", "las", "un", "una", "il", "lo", "gli", "uno", "o", "os", "as", "um", "uma",
    "mi", "mis", "tu", "su", "sus", "mio", "mia", "meu", "minha", "seu", "sua", "del", "al", "do",
    "da", "dos", "das", "este", "esta", "questo", "questa", "esse", "essa",
];

/// Words before a verb that say someone else does it, or that it is not done.
const NOT_MINE: &[&str] = &[
    "él", "ella", "ellos", "ellas", "usted", "tú", "lui", "lei", "loro", "tu", "ele", "ela",
    "eles", "elas", "você", "no", "non", "não", "nunca", "mai",
];

/// The user's statements ([`statements`]) that say what the speaker does in a language
/// that drops the pronoun: a verb of [`I_DO_AN_ACTIVITY`] among their first four words,
/// with something after it, no determiner right before it ([`DETERMINERS`]: "El trabajo
/// es duro" says no work of the speaker's) and no one else or denial before it
/// ([`NOT_MINE`]). A small model extracts nothing from "Toco la batería" or "Às noites
/// dou aulas de guitarra a miúdos", which say no "I".
pub(crate) fn activities(messages: &[Message]) -> Vec<String> {
    statements(messages)
        .into_iter()
        .filter(|s| {
            let words = crate::text::keywords(s);
            words
                .iter()
                .take(4)
                .position(|w| I_DO_AN_ACTIVITY.contains(&w.as_str()))
                .is_some_and(|at| {
                    at + 1 < words.len()
                        && !at
                            .checked_sub(1)
                            .is_some_and(|b| DETERMINERS.contains(&words[b].as_str()))
                        && !words[..at].iter().any(|w| NOT_MINE.contains(&w.as_str()))
                })
        })
        .collect()
}

/// The user's statements that none of `facts` speaks of: all of them ([`statements`])
/// when there is no fact, and otherwise each clause of them said on its own (cut at
/// colons too, [`said::pieces`]) that shares no word but function words with any fact.
/// "Funny thing: I've come to love jazz, I listen to Coltrane every evening", of which a
/// small model extracted only the last clause, leaves "I've come to love jazz".
pub(crate) fn left_out(facts: &[Fact], messages: &[Message]) -> Vec<String> {
    let all = statements(messages);
    if facts.is_empty() {
        return all;
    }
    let spoken: Vec<String> = facts
        .iter()
        .flat_map(|f| crate::text::content_terms(&f.text))
        .collect();
    let pieces = all
        .iter()
        .flat_map(|s| s.split(':'))
        .flat_map(said::pieces)
        .filter(|piece| {
            let terms = crate::text::content_terms(piece);
            piece.split_whitespace().nth(1).is_some()
                && !terms.is_empty()
                && !spoken
                    .iter()
                    .any(|w| terms.iter().any(|t| t == w || alike(w, t)))
        });
    dedup(pieces.map(str::to_owned))
}

/// Whether two terms are one word, or look like one word in two languages: five letters
/// or more each, with half their letter trigrams shared (Dice ≥ 0.5), as "guitar" and
/// "gitarre", "professor" and "professora", "clinic" and "clínica".
pub(super) fn alike(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    if a.chars().count() < 5 || b.chars().count() < 5 {
        return false;
    }
    let trigrams = |w: &str| -> std::collections::HashSet<Vec<char>> {
        let chars: Vec<char> = w.chars().collect();
        chars.windows(3).map(<[char]>::to_vec).collect()
    };
    let (a, b) = (trigrams(a), trigrams(b));
    4 * a.intersection(&b).count() >= a.len() + b.len()
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

/// Drops the facts that are small talk ([`super::small_talk::is_small_talk`]): a remark on
/// the weather, a greeting or a wish, which the prompt forbids and a small model extracts.
fn not_small_talk(facts: Vec<Fact>) -> Vec<Fact> {
    facts
        .into_iter()
        .filter(|f| {
            let small = super::small_talk::is_small_talk(&f.text);
            if small {
                tracing::debug!(target: "memlane", "a fact that is small talk was dropped");
            }
            !small
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
