//! Facts a model translated into English, put back in the user's own words.

use super::{alike, users_sentences, Fact};
use crate::record::Message;

/// The facts, with each one the model translated into English ([`translated`]) replaced by
/// the user's own words for it ([`own_words`]) where their messages have them. Asked to
/// write such a fact again, a small model translates it again or copies its whole message;
/// the user's words are better, and take no time. This runs before the facts are tidied,
/// so two translations of one clause end as one fact.
pub(super) fn in_users_words(mut facts: Vec<Fact>, messages: &[Message]) -> Vec<Fact> {
    let translations = translated(&facts, messages);
    let found: Vec<Option<String>> = translations
        .iter()
        .map(|&i| own_words(&facts[i].text, messages))
        .collect();
    // A user who writes no English said the fact in their own language: in the one clause
    // no other fact comes from, untranslated or found for another translation.
    let english = may_write_english(messages);
    let words: Vec<Option<String>> = found
        .iter()
        .enumerate()
        .map(|(k, own)| {
            own.clone().or_else(|| {
                let others: Vec<&str> = (0..facts.len())
                    .filter(|j| !translations.contains(j))
                    .map(|j| facts[j].text.as_str())
                    .chain(
                        found
                            .iter()
                            .enumerate()
                            .filter(|&(o, _)| o != k)
                            .filter_map(|(_, w)| w.as_deref()),
                    )
                    .collect();
                (!english)
                    .then(|| the_one_left(&others, messages))
                    .flatten()
            })
        })
        .collect();
    for (&i, words) in translations.iter().zip(words) {
        if let Some(words) = words {
            tracing::debug!(target: "memlane", "a translated fact is kept in the user's words");
            facts[i].text = words;
        }
    }
    facts
}

/// The one clause of the user's messages ([`users_sentences`], two words or more) that
/// none of the `others` facts comes from (shares a content word with), when there is
/// exactly one: what a translation that shares no word with any clause says, from a user
/// who writes no English ([`may_write_english`]) ("He started
/// doing rock climbing" for "También he empezado a hacer escalada").
fn the_one_left(others: &[&str], messages: &[Message]) -> Option<String> {
    let taken: Vec<Vec<String>> = others
        .iter()
        .map(|f| crate::text::content_terms(f))
        .collect();
    let mut left = users_sentences(messages)
        .map(|s| s.trim().trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|clause| clause.split_whitespace().nth(1).is_some())
        .filter(|clause| {
            let terms = crate::text::content_terms(clause);
            !taken
                .iter()
                .any(|fact| fact.iter().any(|w| terms.iter().any(|t| alike(w, t))))
        });
    match (left.next(), left.next()) {
        (Some(clause), None) => Some(clause.to_owned()),
        _ => None,
    }
}

/// The part of the user's messages a translated fact says: of the clauses
/// ([`users_sentences`]) of two words or more, the one with most of the fact's words other than English function
/// words (names, numbers, words shared across languages, words [`alike`] across them), the
/// shortest of equals. None if no clause has any.
fn own_words(fact: &str, messages: &[Message]) -> Option<String> {
    let words: std::collections::HashSet<String> =
        crate::text::query_terms(fact).into_iter().collect();
    users_sentences(messages)
        .map(str::trim)
        .filter(|clause| clause.split_whitespace().nth(1).is_some())
        .map(|clause| {
            let terms = crate::text::query_terms(clause);
            let shared = words
                .iter()
                .filter(|w| terms.iter().any(|t| alike(w, t)))
                .count();
            (shared, std::cmp::Reverse(clause.len()), clause)
        })
        .filter(|(shared, _, _)| *shared > 0)
        .max()
        .map(|(_, _, clause)| clause.to_owned())
}

/// English words that are seldom words of the other languages a user may write in (no
/// "a", "in", "is", "me", "was" …), with the pieces of English contractions ("I'm", "it's",
/// "we've"): what betrays a fact translated into English.
const ENGLISH: &[&str] = &[
    "and", "are", "been", "for", "has", "have", "her", "his", "i", "it", "ll", "m", "my", "our",
    "re", "s", "that", "the", "their", "this", "ve", "were", "with", "your",
];

/// English words of none of those languages either ("am", "of" and "on" are German, Dutch
/// and French), but too common in an English fact to betray one when the user may have
/// written English: they count only when the user wrote no English word ("now am
/// receptionist at a dental clinic" for "ahora soy recepcionista en una clínica dental";
/// "He started doing rock climbing" for "También he empezado a hacer escalada").
const ENGLISH_TOO: &[&str] = &[
    "at", "from", "just", "now", "since", "to", "who", "started", "began", "doing", "going",
    "playing", "learning", "working", "living", "moved", "got", "went", "took", "lives", "works",
    "plays", "loves", "likes", "enjoys",
];

/// Whether the user may write English: they wrote fewer than five words, which say too
/// little of their language ("cashews too"), or an English word. A user who writes five
/// words or more and no English one: one English word in a fact mostly in words they did
/// not say (half is enough) betrays a translation.
fn may_write_english(messages: &[Message]) -> bool {
    let users: Vec<String> = messages
        .iter()
        .filter(|m| m.role == "user")
        .flat_map(|m| crate::text::keywords(&m.content))
        .collect();
    users.len() < 5
        || users
            .iter()
            .any(|w| ENGLISH.contains(&w.as_str()) || ENGLISH_TOO.contains(&w.as_str()))
}

/// The facts (their indexes) a model translated into English: written mostly in words the
/// conversation does not have (two or more, and more than half, numbers aside: dates are
/// written out in digits), two of them [`ENGLISH`] words; or, when the user wrote five
/// words or more and no English one, one of them, with half of its words unsaid ("I play
/// guitar" for "Ich spiele Gitarre"). The prompt forbids translating, and a small model
/// does it, into English, with the less common languages. A paraphrase in its message's
/// language has the language's own small words, not these.
fn translated(facts: &[Fact], messages: &[Message]) -> Vec<usize> {
    // The roles are words the model reads too: "The user is a dentist" is not a translation.
    let said: std::collections::HashSet<String> = messages
        .iter()
        .flat_map(|m| crate::text::terms(&format!("{} {}", m.role, m.content)))
        .collect();
    let english_user = may_write_english(messages);
    facts
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            let words: Vec<String> = crate::text::keywords(&f.text)
                .into_iter()
                .filter(|w| !w.chars().any(|c| c.is_ascii_digit()))
                .collect();
            let unsaid: Vec<&String> = words
                .iter()
                .filter(|w| !said.contains(&crate::text::terms(w).concat()))
                .collect();
            let english = unsaid
                .iter()
                .filter(|w| {
                    ENGLISH.contains(&w.as_str())
                        || (!english_user && ENGLISH_TOO.contains(&w.as_str()))
                })
                .count();
            if english_user {
                english >= 2 && unsaid.len() * 2 > words.len()
            } else {
                english >= 1 && unsaid.len() >= 2 && unsaid.len() * 2 >= words.len()
            }
        })
        .map(|(i, _)| i)
        .collect()
}
