//! The BFCL memory set for the examples, in LoCoMo's shape, so that the same ingest, searches
//! and figures serve both: a second kind of conversation to fit on one and measure on the
//! other.
//!
//! BFCL v4's memory set (the PyPI package bfcl-eval, Apache-2.0, fetched and verified by
//! `scripts/fetch-eval-data.sh`, read from its cache, never copied into this crate): five
//! people, each in several sessions with an assistant (a customer, a patient, a student,
//! someone planning their finances, a note-taker), written as the user's turns only, long and
//! task-oriented; and 155 questions about what they said ("What kind of latte do I
//! occasionally like?"), each with the passage that answers it.
//!
//! Each person is one conversation (`bfcl-customer`, …), each of their sessions one
//! LoCoMo session, each turn one dialog turn (`D2:5`). The data names no evidence turn, only
//! the passage: the evidence is the turn that holds the most of the passage's words (at
//! least [`MIN_SHARE`] of them; every turn tied with it), which finds the passage as written
//! and as the data shortens it ("Daycare: Monthly payment due Friday." for "Daycare: Drop-off
//! at 8 AM, pick-up at 5 PM. Monthly payment due Friday."). A question whose passage no turn
//! holds is left out, and counted.
//!
//! [`Unit::Sentence`] stores the same text as a store of facts holds it: each sentence of
//! each turn on its own (its own `add`, so no memory has a conversation around it), the
//! person `bfcl-facts-customer`, …; the evidence is the sentences of the evidence turn that
//! hold the passage (at least half of their words are the passage's; the one that holds most
//! of it when none does).
//!
//! [`Unit::Dialogue`] stores the turns as a conversation of two roles: after each of the
//! user's turns, the assistant's reply, written by a language model from that turn alone
//! ([`replies`]; the data has the user's side only). The evidence stays in the user's turns;
//! the replies are what a user–assistant chat puts around them, and each user turn is a
//! reply's neighbour.
#![allow(dead_code)] // each example uses its own part

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use memlane::llm::ChatRequest;
use memlane::{Llm, Message};
use serde_json::{json, Value};

/// The people of the set, in the order of their files.
pub const SCENARIOS: [&str; 5] = ["customer", "finance", "healthcare", "notetaker", "student"];

/// The least share of a passage's words a turn must hold to be its evidence.
pub const MIN_SHARE: f64 = 0.6;

/// What one memory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A turn, stored with the others of its session: a conversation.
    Turn,
    /// A sentence of a turn, stored on its own: a fact.
    Sentence,
    /// A turn, stored with the others of its session, each followed by the assistant's
    /// reply: a user–assistant conversation.
    Dialogue,
}

/// What the assistant is asked to do with each of the user's turns.
pub const REPLY_PROMPT: &str = "You are a helpful assistant in a chat with a user. Reply to \
     the user's message as a helpful assistant would, in two or three sentences: answer it, \
     advise, or ask what you need to know. Reply with the message only.";

/// The longest reply, in tokens.
pub const REPLY_TOKENS: u32 = 80;

/// The key of a user's turn in the replies: `customer/D2:5`.
fn turn_key(scenario: &str, dia_id: &str) -> String {
    format!("{scenario}/{dia_id}")
}

/// The user's turns of every person, as (key, text), in the order of the files.
fn user_turns(dir: &Path) -> Result<Vec<(String, String)>, Box<dyn std::error::Error>> {
    let mut out = Vec::new();
    for scenario in SCENARIOS {
        let file = dir.join(format!("memory_prereq_conversation/memory_{scenario}.json"));
        for (s, session) in lines(&file)?.iter().enumerate() {
            for (t, text) in session_turns(session).into_iter().enumerate() {
                out.push((turn_key(scenario, &format!("D{}:{}", s + 1, t + 1)), text));
            }
        }
    }
    Ok(out)
}

/// Where the replies of a model to the set are kept: beside the set, named by the model.
pub fn replies_path(dir: &Path, model: &str) -> PathBuf {
    let name: String = model
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '-' })
        .collect();
    let base = dir
        .file_name()
        .map_or("bfcl".into(), |n| n.to_string_lossy());
    dir.with_file_name(format!("{base}-replies-{name}.json"))
}

/// The assistant's reply to each of the user's turns, by key: read from `cache` where it
/// has them, else written by `llm` (one call per turn, the turn alone as the chat, at most
/// [`REPLY_TOKENS`]) and added to it, every 16 replies and at the end, so that a run cut
/// short resumes.
pub async fn replies(
    dir: &Path,
    llm: &dyn Llm,
    cache: &Path,
) -> Result<HashMap<String, String>, Box<dyn std::error::Error>> {
    let mut known: BTreeMap<String, String> = match std::fs::read(cache) {
        Ok(bytes) => serde_json::from_slice(&bytes)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
        Err(e) => return Err(e.into()),
    };
    let turns = user_turns(dir)?;
    let missing: Vec<&(String, String)> = turns
        .iter()
        .filter(|(key, _)| !known.contains_key(key))
        .collect();
    let save = |known: &BTreeMap<String, String>| -> std::io::Result<()> {
        let tmp = cache.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(known)?)?;
        std::fs::rename(&tmp, cache)
    };
    for (i, (key, text)) in missing.iter().enumerate() {
        let request = ChatRequest::new(vec![
            Message::new("system", REPLY_PROMPT),
            Message::new("user", text.as_str()),
        ])
        .max_tokens(REPLY_TOKENS);
        let reply = llm.chat(request).await?;
        known.insert(key.clone(), reply.text.trim().to_owned());
        if (i + 1) % 16 == 0 || i + 1 == missing.len() {
            save(&known)?;
            eprint!("\r  replies {}/{}", i + 1, missing.len());
        }
    }
    if !missing.is_empty() {
        eprintln!();
    }
    Ok(known.into_iter().collect())
}

/// A session's turns: the text of each, its messages joined by line breaks.
fn session_turns(session: &Value) -> Vec<String> {
    session["question"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|turn| {
            let text: Vec<&str> = turn
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["content"].as_str())
                .collect();
            text.join("\n")
        })
        .collect()
}

/// The lines of a JSON-lines file, each parsed.
fn lines(path: &Path) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: {e} (run scripts/fetch-eval-data.sh)", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(Into::into))
        .collect()
}

/// The sentences of a text: split after `.`, `!` or `?` followed by white space, and at
/// line breaks.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        current.push(c);
        let end = matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|n| n.is_whitespace());
        if end || c == '\n' {
            if !current.trim().is_empty() {
                out.push(current.trim().to_owned());
            }
            current.clear();
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_owned());
    }
    out
}

/// The set as LoCoMo samples, and how many questions were left out. [`Unit::Dialogue`]
/// needs the assistant's `replies` ([`replies`]); a turn without one is an error.
pub fn as_locomo(
    dir: &Path,
    unit: Unit,
    replies: Option<&HashMap<String, String>>,
) -> Result<(Vec<Value>, usize), Box<dyn std::error::Error>> {
    let questions = lines(&dir.join("BFCL_v4_memory.json"))?;
    let answers: BTreeMap<String, Value> = lines(&dir.join("possible_answer/BFCL_v4_memory.json"))?
        .into_iter()
        .filter_map(|a| Some((a["id"].as_str()?.to_owned(), a)))
        .collect();
    let mut samples = Vec::new();
    let mut left_out = 0;
    for scenario in SCENARIOS {
        let file = dir.join(format!("memory_prereq_conversation/memory_{scenario}.json"));
        let mut conversation = serde_json::Map::new();
        conversation.insert("speaker_a".into(), json!("user"));
        conversation.insert("speaker_b".into(), json!("assistant"));
        // (dialog id, text) of every turn, to find the evidence in.
        let mut turns: Vec<(String, String)> = Vec::new();
        // Each turn's sentences, as (dialog id, text), when sentences are the unit.
        let mut sentences_of: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
        let mut fact = 0;
        for (s, session) in lines(&file)?.iter().enumerate() {
            let mut out = Vec::new();
            for (t, text) in session_turns(session).into_iter().enumerate() {
                let dia_id = format!("D{}:{}", s + 1, t + 1);
                if unit == Unit::Sentence {
                    // Each sentence a session of its own: a memory with no conversation.
                    for sentence in sentences(&text) {
                        fact += 1;
                        let id = format!("D{fact}:1");
                        let turn = json!([{"speaker": "user", "dia_id": id, "text": sentence}]);
                        conversation.insert(format!("session_{fact}"), turn);
                        sentences_of
                            .entry(dia_id.clone())
                            .or_default()
                            .push((id, sentence));
                    }
                }
                out.push(json!({"speaker": "user", "dia_id": dia_id, "text": text}));
                if unit == Unit::Dialogue {
                    let key = turn_key(scenario, &dia_id);
                    let reply = replies
                        .and_then(|r| r.get(&key))
                        .ok_or_else(|| format!("no assistant reply to {key}"))?;
                    let id = format!("A{}:{}", s + 1, t + 1);
                    out.push(json!({"speaker": "assistant", "dia_id": id, "text": reply}));
                }
                turns.push((dia_id, text));
            }
            if unit != Unit::Sentence {
                conversation.insert(format!("session_{}", s + 1), Value::Array(out));
            }
        }
        let mut qa = Vec::new();
        for q in questions.iter().filter(|q| q["scenario"] == scenario) {
            let id = q["id"].as_str().unwrap_or_default();
            let question = q["question"][0][0]["content"].as_str().unwrap_or_default();
            let passage = answers
                .get(id)
                .and_then(|a| a["source"].as_str())
                .unwrap_or_default();
            let mut evidence = evidence(passage, &turns);
            if unit == Unit::Sentence {
                evidence = evidence
                    .iter()
                    .flat_map(|turn| {
                        held(
                            passage,
                            sentences_of.get(turn).map_or(&[][..], Vec::as_slice),
                        )
                    })
                    .collect();
            }
            if question.is_empty() || evidence.is_empty() {
                left_out += 1;
                continue;
            }
            qa.push(json!({"question": question, "evidence": evidence, "category": 0}));
        }
        let person = match unit {
            Unit::Turn => format!("bfcl-{scenario}"),
            Unit::Sentence => format!("bfcl-facts-{scenario}"),
            Unit::Dialogue => format!("bfcl-dialogue-{scenario}"),
        };
        samples.push(json!({
            "sample_id": person,
            "conversation": conversation,
            "qa": qa,
        }));
    }
    Ok((samples, left_out))
}

/// The words of a text: lowercased runs of letters and digits (quotes, dashes and other
/// punctuation, typographic or plain, only separate them).
fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The dialog ids of the turns that hold the most of the passage's words, if that is at
/// least [`MIN_SHARE`] of them.
fn evidence(passage: &str, turns: &[(String, String)]) -> Vec<String> {
    let wanted: HashSet<String> = words(passage).into_iter().collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    let shares: Vec<(usize, &String)> = turns
        .iter()
        .map(|(id, text)| {
            let have: HashSet<String> = words(text).into_iter().collect();
            (wanted.intersection(&have).count(), id)
        })
        .collect();
    let best = shares.iter().map(|s| s.0).max().unwrap_or(0);
    if (best as f64) < MIN_SHARE * wanted.len() as f64 {
        return Vec::new();
    }
    shares
        .into_iter()
        .filter(|s| s.0 == best)
        .map(|s| s.1.clone())
        .collect()
}

/// The dialog ids of the sentences (of one turn) that hold the passage: those with at least
/// half of their words in it, or else the one with the largest share.
fn held(passage: &str, sentences: &[(String, String)]) -> Vec<String> {
    let wanted: HashSet<String> = words(passage).into_iter().collect();
    let shares: Vec<(f64, &String)> = sentences
        .iter()
        .map(|(id, text)| {
            let have: HashSet<String> = words(text).into_iter().collect();
            let share = have.intersection(&wanted).count() as f64 / have.len().max(1) as f64;
            (share, id)
        })
        .collect();
    let most: Vec<String> = shares
        .iter()
        .filter(|s| s.0 >= 0.5)
        .map(|s| s.1.clone())
        .collect();
    if !most.is_empty() {
        return most;
    }
    shares
        .iter()
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|s| vec![s.1.clone()])
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_evidence_is_the_turn_with_most_of_the_passage() {
        let turns = vec![
            (
                "D1:1".to_owned(),
                "Monday: team meeting. Daycare closed.".to_owned(),
            ),
            (
                "D1:2".to_owned(),
                "Daycare: Drop-off at 8 AM, pick-up at 5 PM. Monthly payment due Friday."
                    .to_owned(),
            ),
        ];
        assert_eq!(
            evidence("Daycare: Monthly payment due Friday.", &turns),
            vec!["D1:2"]
        );
        assert!(evidence("Something nobody said at all", &turns).is_empty());
    }

    #[test]
    fn sentences_split_at_their_ends_and_hold_the_passage() {
        let text = "I'm 35. I live in Seattle, WA.\nI work from home! Do you ship to 3.5 mi?";
        let all = sentences(text);
        assert_eq!(
            all,
            vec![
                "I'm 35.",
                "I live in Seattle, WA.",
                "I work from home!",
                "Do you ship to 3.5 mi?"
            ]
        );
        let ids: Vec<(String, String)> = all
            .into_iter()
            .enumerate()
            .map(|(i, s)| (format!("D{i}:1"), s))
            .collect();
        assert_eq!(
            held("I'm 35 years old, live in Seattle...", &ids),
            vec!["D0:1", "D1:1"]
        );
    }
}
