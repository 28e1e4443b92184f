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

/// The facts, with each one the model translated into English ([`translated`]) replaced by
/// the user's own words for it ([`own_words`]) where their messages have them. Asked to
/// write such a fact again, a small model translates it again or copies its whole message;
/// the user's words are better, and take no time. This runs before the facts are tidied,
/// so two translations of one clause end as one fact.
fn in_users_words(mut facts: Vec<Fact>, messages: &[Message]) -> Vec<Fact> {
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

/// The facts, with those the model cut out of one thing the user said put back together
/// as they said it: two facts or more whose every word (but function words) is in one
/// sentence of the user's messages, and in no other, become that sentence, where the
/// sentence joins no clauses: with a conjunction ("and", "but", or their word in the other
/// six languages [`super::looks::clauses`] knows), or with a comma before a subject
/// ([`SUBJECTS`]). "I live in Madrid, near Retiro park" stays one memory, which a move then
/// replaces whole, where "I live near Retiro park" alone would stay beside the new home.
/// "I live in Madrid and I work as a nurse" and "My dog is called Rex, he's a beagle" are
/// two things said each, and stay two facts, so that a correction of the name keeps the
/// breed. The first of the facts takes the sentence, with the labels and entities of all
/// of them and their highest importance. "en" is Dutch for "and" and Spanish and French
/// for "in": it joins clauses only in a sentence with a word of Dutch's own ([`DUTCH`]),
/// so that "Estoy de visita en Granada, en casa de mis tíos" is put back together; "ma"
/// is Italian for "but" and French for "my", and joins none in a sentence with a word of
/// French's own ([`FRENCH`]).
/// One fact so cut keeps its sentence when the sentence marks what it says as one more of
/// its kind, or puts it at set times ([`super::habits::at_set_times`]: "In het weekend werk
/// ik als ober" is no new job), and the fact lost the mark ([`super::additional`]): a small model writes "Ik
/// werk als ober in een café" for "In het weekend werk ik ook als ober in een café", and
/// without its "ook" the fact takes the place of the job before. So does one whose
/// sentence says what it took the place of ([`super::in_place_of`]) while the fact does
/// not: "Ich trinke Kräutertee seit zwei Wochen" for "Seit zwei Wochen trinke ich statt
/// Espresso nur noch Kräutertee" stays beside the espresso.
fn as_said(facts: Vec<Fact>, messages: &[Message]) -> Vec<Fact> {
    let sentences: Vec<(&str, Vec<String>)> = users_sentences(messages)
        .flat_map(at_subjects)
        .map(|s| s.trim().trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|s| {
            let words = crate::text::keywords(s);
            let dutch = words.iter().any(|w| DUTCH.contains(&w.as_str()));
            let french = words.iter().any(|w| FRENCH.contains(&w.as_str()));
            !words.iter().any(|w| {
                super::looks::CONJUNCTIONS.contains(&w.as_str())
                    && (w != "en" || dutch)
                    && (w != "ma" || !french)
            })
        })
        .map(|s| (s, crate::text::content_terms(s)))
        .collect();
    let from: Vec<Option<usize>> = facts
        .iter()
        .map(|f| {
            let words = crate::text::content_terms(&f.text);
            let holds = |terms: &[String]| {
                !words.is_empty()
                    && words
                        .iter()
                        .all(|w| terms.iter().any(|t| t == w || alike(w, t)))
            };
            let mut holding = sentences.iter().enumerate().filter(|(_, (_, t))| holds(t));
            match (holding.next(), holding.next()) {
                (Some((i, _)), None) => Some(i),
                _ => None,
            }
        })
        .collect();
    let mut out: Vec<Fact> = Vec::with_capacity(facts.len());
    let mut taken: Vec<(usize, usize)> = Vec::new();
    for (mut fact, from) in facts.into_iter().zip(from) {
        // A repeat of the fact it would join is left for [`clean_facts`] to drop.
        let repeat =
            |at: usize| out[at].text.trim().to_lowercase() == fact.text.trim().to_lowercase();
        let earlier = from.and_then(|s| {
            taken
                .iter()
                .find(|&&(t, at)| t == s && !repeat(at))
                .map(|&(_, at)| (s, at))
        });
        match earlier {
            Some((s, at)) => {
                let into = &mut out[at];
                into.text = sentences[s].0.to_owned();
                into.categories.extend(fact.categories);
                into.entities.extend(fact.entities);
                into.importance = into.importance.max(fact.importance);
                tracing::debug!(target: "memlane", "two facts from one sentence are kept as said");
            }
            None => {
                if let Some(s) = from {
                    taken.push((s, out.len()));
                    // The speaker's mark of one more of its kind, or of what the fact
                    // took the place of, which the model left out.
                    let sentence = sentences[s].0;
                    let lost = |mark: fn(&str) -> bool| mark(sentence) && !mark(&fact.text);
                    if lost(super::additional)
                        || lost(super::in_place_of)
                        || lost(super::habits::at_set_times)
                    {
                        tracing::debug!(target: "memlane", "a fact that lost its speaker's mark is kept as said");
                        fact.text = sentence.to_owned();
                    } else if lost_its_apposition(&fact.text, sentence) {
                        tracing::debug!(target: "memlane", "a fact that lost the name or kind after it is kept as said");
                        fact.text = sentence.to_owned();
                    } else if lost_its_speaker(sentence, &fact.text) {
                        tracing::debug!(target: "memlane", "a fact that lost its speaker is kept as said");
                        fact.text = sentence.to_owned();
                    } else if let Some(part) = lost_a_name(&fact.text, sentence) {
                        tracing::debug!(target: "memlane", "a fact that lost a name is kept as said");
                        fact.text = part.to_owned();
                    }
                }
                out.push(fact);
            }
        }
    }
    out
}

/// Indefinite articles, which begin an apposition that says what kind a thing is
/// ("einen Hund, einen Dackel"; "a dog, a beagle").
const INDEFINITE: &[&str] = &[
    "a", "an", "un", "une", "uno", "una", "um", "uma", "ein", "eine", "einen", "einem", "een",
];

/// Whether the fact is the part of its sentence before the last comma, and what follows
/// the comma is an apposition the fact lost: one to three words, all capitalised (a name:
/// "Ik heb een kat, Pluis"), or an indefinite article and one or two words ("Meine
/// Nachbarin hat jetzt auch einen Hund, einen Dackel"). Without it the memory loses what
/// tells it apart from the next of its kind ("We hebben er een tweede kat bij, Snoes").
/// A denial or a correction after the comma ("…, not Rex"; "…, nicht mehr Taxi") is not
/// of that shape, and the model is right to leave it out.
fn lost_its_apposition(fact: &str, sentence: &str) -> bool {
    let Some((head, tail)) = sentence.rsplit_once(',') else {
        return false;
    };
    let words: Vec<&str> = tail
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let capitalised = |w: &&str| w.chars().next().is_some_and(char::is_uppercase);
    let apposition = match words.as_slice() {
        [] => false,
        [article, rest @ ..] if INDEFINITE.contains(&article.to_lowercase().as_str()) => {
            (1..=2).contains(&rest.len())
        }
        all => all.len() <= 3 && all.iter().all(capitalised),
    };
    let said = crate::text::content_terms(fact);
    let head = crate::text::content_terms(head);
    apposition
        && !said.is_empty()
        && said
            .iter()
            .all(|w| head.iter().any(|t| t == w || alike(w, t)))
        && !crate::text::content_terms(tail)
            .iter()
            .any(|t| said.iter().any(|w| w == t || alike(w, t)))
}

/// Words before a name that say it is where something came from, or what it no longer
/// is: "from Madrid", "de Lyon", "aus Bremen", "da Roma", "desde Bilbao", "uit Gent".
const FROM: &[&str] = &[
    "from", "de", "d", "du", "des", "von", "aus", "vom", "da", "dal", "dalla", "desde", "del",
    "do", "dos", "van", "uit", "instead", "statt", "than", "que", "ex",
];

/// The part of `sentence` between commas that holds all of the fact's words and a name
/// the fact left out ([`super::names`], not the part's first word: "Je suis chez ma sœur
/// à Annecy ce week-end" for "Je suis chez ma sœur ce week-end"), when a name was left
/// out. Not a name up to three words after a denial or a word of where something came
/// from ([`FROM`]: "from Madrid", "nicht mehr in Bremen"), which a model leaves out on
/// purpose.
fn lost_a_name<'a>(fact: &str, sentence: &'a str) -> Option<&'a str> {
    let said = crate::text::content_terms(fact);
    let kept: Vec<String> = crate::text::folded_words(fact);
    if said.is_empty() {
        return None;
    }
    sentence
        .split(',')
        .map(str::trim)
        .find(|part| {
            let terms = crate::text::content_terms(part);
            said.iter()
                .all(|w| terms.iter().any(|t| t == w || alike(w, t)))
        })
        .filter(|part| {
            let words = crate::text::folded_words(part);
            super::names(part).iter().any(|name| {
                !kept.contains(name)
                    && words.iter().position(|w| w == name).is_some_and(|at| {
                        at > 0
                            && !words[at.saturating_sub(3)..at].iter().any(|w| {
                                FROM.contains(&w.as_str())
                                    || super::topics::NOT.contains(&w.as_str())
                            })
                    })
            })
        })
}

/// The facts, with each one that gave someone else what the speaker said of themselves
/// put back as the speaker's clause ([`given_to_another`]).
fn the_speakers_own(mut facts: Vec<Fact>, messages: &[Message]) -> Vec<Fact> {
    for fact in &mut facts {
        if let Some(clause) =
            users_sentences(messages).find_map(|s| given_to_another(&fact.text, s))
        {
            tracing::debug!(target: "memlane", "a fact that gave someone else the speaker's clause is the speaker's again");
            fact.text = clause.to_owned();
        }
    }
    facts
}

/// The clause of `sentence` ([`super::looks::clauses`]) that the fact took from the
/// speaker and gave the subject of another clause: the clause begins with the speaker
/// ([`SPEAKERS`]) or a first-person verb ([`super::looks::I_DO`]), holds the most of the
/// fact's words, and the fact's other words are in another clause, while the fact names
/// no speaker. A small model writes "Mi novia trabaja en un hotel" for "Mi novia se llama
/// Lucía y trabajo en un hotel", and the speaker's job ends with the relationship.
fn given_to_another<'a>(fact: &str, sentence: &'a str) -> Option<&'a str> {
    let words = crate::text::folded_words(fact);
    if words
        .iter()
        .any(|w| SPEAKERS.contains(&w.as_str()) || super::looks::I_DO.contains(&w.as_str()))
    {
        return None;
    }
    let said = crate::text::content_terms(fact);
    let parts: Vec<(&str, Vec<String>)> = super::looks::clauses(sentence)
        .into_iter()
        .map(|r| {
            let part = sentence[r]
                .trim()
                .trim_matches(|c: char| !c.is_alphanumeric());
            (part, crate::text::content_terms(part))
        })
        .collect();
    let holds = |terms: &[String], w: &String| terms.iter().any(|t| t == w || alike(w, t));
    let (own, terms) = parts
        .iter()
        .filter(|(part, _)| {
            crate::text::folded_words(part).first().is_some_and(|w| {
                SPEAKERS.contains(&w.as_str()) || super::looks::I_DO.contains(&w.as_str())
            })
        })
        .max_by_key(|(_, terms)| said.iter().filter(|w| holds(terms, w)).count())?;
    let rest: Vec<&String> = said.iter().filter(|w| !holds(terms, w)).collect();
    let elsewhere = parts
        .iter()
        .filter(|(part, _)| part != own)
        .any(|(_, other)| !rest.is_empty() && rest.iter().all(|w| holds(other, w)));
    (said.iter().any(|w| holds(terms, w)) && elsewhere).then_some(*own)
}

/// The speaker as a subject, in the languages [`SUBJECTS`] covers.
const SPEAKERS: &[&str] = &[
    "i", "we", "je", "j", "nous", "ich", "wir", "io", "noi", "yo", "nosotros", "eu", "nos", "ik",
    "wij",
];

/// Whether `fact` is some of `sentence`'s words, in their order, without the speaker the
/// sentence names ([`SPEAKERS`]): "Koriander heerlijk" for "Tegenwoordig vind ik
/// koriander heerlijk" says no one likes it, and a taste it reverses would stay.
fn lost_its_speaker(sentence: &str, fact: &str) -> bool {
    let (said, kept) = (
        crate::text::folded_words(sentence),
        crate::text::folded_words(fact),
    );
    let mut rest = said.iter();
    let in_order = kept.iter().all(|w| rest.any(|s| s == w));
    !kept.is_empty()
        && kept.len() < said.len()
        && in_order
        && said.iter().any(|w| SPEAKERS.contains(&w.as_str()))
        && !kept.iter().any(|w| SPEAKERS.contains(&w.as_str()))
}

/// Words of French's own, none of them Italian: a sentence with one is French, and its
/// "ma" is "my", not "but" ("Je vais voir ma sœur").
const FRENCH: &[&str] = &[
    "je", "j", "suis", "les", "des", "une", "mon", "mes", "avec", "chez", "pour", "dans", "nous",
    "vous", "au", "aux", "cette", "est",
];

/// Words of Dutch's own, none of them Spanish or French: a sentence with one is Dutch,
/// and its "en" is "and".
const DUTCH: &[&str] = &[
    "ik", "het", "een", "niet", "zijn", "wij", "jij", "hij", "ook", "maar", "wel", "mijn", "dat",
    "wat", "heb", "ben", "naar", "met", "voor", "bij", "van", "we", "ze", "is", "heeft", "wonen",
    "woon", "werk",
];

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

/// Subject pronouns, in the languages of [`super::looks::CONJUNCTIONS`], that begin a
/// clause of their own after a comma: "My dog is called Rex, he's a beagle" says two
/// things, where "I live in Madrid, near Retiro park" says one. As [`crate::text::keywords`]
/// reads them ("I'm" is "i" then "m"; "j'ai" is "j" then "ai").
pub(super) const SUBJECTS: &[&str] = &[
    "i", "he", "she", "it", "we", "they", "you", // English
    "je", "j", "il", "elle", "on", "nous", "vous", "ils", "elles", "c", // French
    "ich", "er", "sie", "es", "wir", "ihr", // German
    "io", "lui", "lei", "noi", "voi", "loro", // Italian
    "yo", "él", "ella", "nosotros", "nosotras", "ellos", "ellas", // Spanish
    "eu", "ele", "ela", "nós", "eles", "elas", // Portuguese
    "ik", "hij", "zij", "ze", "het", "wij", "jij", // Dutch ("je" is French's too)
];

/// Words by which a clause points back at what the clause before it named, in the same
/// languages (not the pro-drop ones' clitics, which begin their clause): "I love steak, I
/// have one every Friday" says one thing, which a change of diet replaces whole. Not
/// French "l'" (an article as often: "je travaille à l'hôpital").
const BACK: &[&str] = &[
    "one", "ones", "it", "them", "there", // English
    "y",     // French ("en" joins clauses in Dutch: see `as_said`)
    "ihn", "ihm", "dort", "eins", // German
    "er", "hem", "daar", "ervan", // Dutch
];

/// A sentence cut before each comma whose next word is one of the [`SUBJECTS`], unless the
/// clause that word begins points back at the one before it ([`BACK`]) after its subject.
fn at_subjects(sentence: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (comma, _) in sentence.match_indices(',') {
        let rest = &sentence[comma + 1..];
        let clause = rest.split(',').next().unwrap_or(rest);
        let next = crate::text::keywords(clause);
        let back = next.iter().skip(1).any(|w| BACK.contains(&w.as_str()));
        if next.first().is_some_and(|w| SUBJECTS.contains(&w.as_str())) && !back {
            pieces.push(&sentence[start..comma]);
            start = comma + 1;
        }
    }
    pieces.push(&sentence[start..]);
    pieces
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ScriptedLlm;

    fn at() -> DateTime<Utc> {
        chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 22, 10, 30, 0).unwrap()
    }

    /// The user's statements: each sentence once, but questions, small talk, single words
    /// and what the assistant said.
    #[test]
    fn statements_are_the_users_sentences_that_state_something() {
        let messages = [
            Message::user("¡Hola! Ya no estoy con Javier. ¿Conoces un bar vegano en Sevilla?"),
            Message::assistant("Lo siento mucho. ¿Estás bien?"),
            Message::user("Bien. Ya no estoy con Javier; vivo en Sevilla\nGracias"),
        ];
        assert_eq!(
            statements(&messages),
            ["Ya no estoy con Javier", "vivo en Sevilla"]
        );
    }

    /// A remark on the weather or a wish the model returns as a fact is not stored; a fact
    /// with something of the user in it is, small talk and all.
    #[tokio::test]
    async fn small_talk_the_model_extracts_is_dropped() {
        let llm = ScriptedLlm::new([r#"{"facts": [{"text": "Lovely sunny morning here"},
            {"text": "I moved to Leeds, lovely and sunny"}, {"text": "Wish me luck!"}]}"#]);
        let said = "Lovely sunny morning here! I moved to Leeds, lovely and sunny. Wish me luck!";
        let facts = extract_facts(&llm, &[Message::user(said)], at(), "", &[])
            .await
            .unwrap();
        let texts: Vec<&str> = facts.value.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(texts, ["I moved to Leeds, lovely and sunny"]);
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
        assert!(system.contains("Never store health data"));
        assert!(system.contains("Categories: food (what they eat and drink)"));
        // The date comes with the conversation, after the fixed instructions and examples.
        let last = &request.messages.last().unwrap().content;
        assert!(last.contains("2026-11-22 (Sunday)"), "{last}");
        assert!(last.contains("user: I like tea"));
        assert!(!system.contains("2026-11-22"));
        // The examples' labels are the project's: "food" only, so none of the catalogue's.
        let examples = &request.messages[1..request.messages.len() - 1];
        assert_eq!(examples.len(), 2 * EXTRACTION_EXAMPLES.len());
        assert!(examples
            .iter()
            .all(|m| !m.content.contains("sports") && !m.content.contains("family")));
    }

    /// A fact the model copied from the prompt's own examples is dropped, unless the
    /// conversation says it too; facts of the conversation stay.
    #[tokio::test]
    async fn a_fact_copied_from_the_instructions_is_dropped() {
        let copied = r#"{"facts": [{"text": "I adopted a rescue cat called Marmite."},
                                   {"text": "I work at a bakery on Saturdays"}]}"#;
        let llm = ScriptedLlm::new([copied, copied]);
        let extract = |text: &'static str| {
            let llm = &llm;
            async move {
                let facts = extract_facts(llm, &[Message::user(text)], at(), "", &[])
                    .await
                    .unwrap();
                facts.value.into_iter().map(|f| f.text).collect::<Vec<_>>()
            }
        };
        // The conversation shares "adopted" with the example, not "rescue" or "Marmite".
        assert_eq!(
            extract("I adopted a kitten, and I work at a bakery on Saturdays").await,
            ["I work at a bakery on Saturdays"]
        );
        // Said in the conversation: kept, though the example says it too.
        assert_eq!(
            extract(
                "I adopted a rescue cat, she's called Marmite. I work at a bakery on Saturdays"
            )
            .await
            .len(),
            2
        );
    }

    /// The facts `extract_facts` keeps from a model that replies `reply` (once: a second
    /// call would fail) to a conversation.
    async fn extracted(reply: &str, conversation: &[Message], labels: &[Label]) -> Vec<Fact> {
        let llm = ScriptedLlm::new([reply]);
        extract_facts(&llm, conversation, at(), "", labels)
            .await
            .unwrap()
            .value
    }

    fn texts(facts: &[Fact]) -> Vec<&str> {
        facts.iter().map(|f| f.text.as_str()).collect()
    }

    /// Facts in the assistant's words are dropped, and so are one-word facts; facts in the
    /// user's words, or in words of neither (a translation), stay.
    #[tokio::test]
    async fn facts_the_user_did_not_say_are_dropped() {
        let reply = r#"{"facts": [
            {"text": "The capital of Australia is Canberra"},
            {"text": "You got married in June"},
            {"text": "The user is a dentist"},
            {"text": "Cheers!"},
            {"text": "東京に住んでいます"}]}"#;
        let conversation = [
            Message::user("Is Sydney the capital of Australia? I got married in June!"),
            Message::assistant("No, the capital of Australia is Canberra. Congratulations to you!"),
            Message::user("Soy dentista. Cheers! 東京に住んでいます"),
        ];
        assert_eq!(
            texts(&extracted(reply, &conversation, &[]).await),
            [
                "You got married in June",
                "The user is a dentist",
                "東京に住んでいます"
            ]
        );
    }

    #[tokio::test]
    async fn a_translated_fact_is_kept_in_the_users_own_words() {
        let reply = r#"{"facts": [
            {"text": "Moos is the correct name for our cat", "categories": ["pets"]},
            {"text": "Ik zwem graag"},
            {"text": "I'm 34"},
            {"text": "I have a job as a baker"},
            {"text": "I bake bread for a living"},
            {"text": "I have been a teacher for 12 years"},
            {"text": "I play guitar"},
            {"text": "The name of our cat is Moos"}]}"#;
        let conversation = [
            Message::user("Onze kat heet Pluis."),
            Message::assistant("Leuk! Moos mooier?"),
            Message::user(
                "Foutje: onze kat heet eigenlijk Moos, niet Pluis. Ik zwem graag.\n\
                 Ik ben 34; ik werk als bakker.\nTeacher, 12 years. Ich spiele Gitarre.",
            ),
        ];
        let facts = extracted(reply, &conversation, &[Label::new("pets", "")]).await;
        // The clause with the fact's name, number or a word alike ("baker", "bakker"),
        // never the assistant's words, whole between commas, once; a translation with none
        // of the user's words stays. A user who writes no English word betrays a
        // translation with one.
        assert_eq!(
            texts(&facts),
            [
                "onze kat heet eigenlijk Moos, niet Pluis",
                "Ik zwem graag",
                "Ik ben 34",
                "ik werk als bakker",
                "I bake bread for a living",
                "Teacher, 12 years",
                "Ich spiele Gitarre"
            ]
        );
        assert_eq!(facts[0].categories, ["pets"]);
    }

    #[tokio::test]
    async fn facts_cut_out_of_one_thing_said_are_kept_as_said() {
        let reply = r#"{"facts": [
            {"text": "I live in Madrid", "categories": ["home"], "entities": ["Madrid"],
             "importance": 7},
            {"text": "I live near Retiro park", "categories": ["places"],
             "entities": ["Retiro park"], "importance": 8},
            {"text": "My dog is called Rex"},
            {"text": "He's a beagle"},
            {"text": "I'm vegan now"},
            {"text": "No more meat for me"},
            {"text": "I live in Leeds"},
            {"text": "I work as a nurse"},
            {"text": "Retiro park is nearby"},
            {"text": "Ho due gatti"},
            {"text": "Ho due gatti neri"},
            {"text": "I love steak"},
            {"text": "I have one every Friday"}]}"#;
        let conversation = [
            Message::user(
                "Big news: I live in Madrid, near Retiro park. My dog is called Rex, he's a \
                 beagle. I'm vegan now, no more meat for me.",
            ),
            Message::assistant("Nice!"),
            Message::user(
                "I live in Leeds and I work as a nurse! Ho due gatti neri. Ho due gatti neri. \
                 I love steak, I have one every Friday.",
            ),
        ];
        let labels = [Label::new("home", ""), Label::new("places", "")];
        let facts = extracted(reply, &conversation, &labels).await;
        // One sentence, two facts: the sentence, at the first one's place, with the labels
        // and the highest importance of both. Two things joined by "and" or by a comma
        // before a subject, a fact with a word the sentence lacks ("nearby") and a sentence
        // said twice stay as they were; a clause after such a comma that points back at
        // the one before it ("one") is one thing said with it.
        assert_eq!(
            texts(&facts),
            [
                "I live in Madrid, near Retiro park",
                "My dog is called Rex",
                "He's a beagle",
                "I'm vegan now, no more meat for me",
                "I live in Leeds",
                "I work as a nurse",
                "Retiro park is nearby",
                "Ho due gatti",
                "Ho due gatti neri",
                "I love steak, I have one every Friday"
            ]
        );
        assert_eq!(facts[0].categories, ["home", "places"]);
        assert_eq!(facts[0].entities, ["Madrid", "Retiro park"]);
        assert_eq!(facts[0].importance, 8);
    }

    /// A fact cut out of a sentence that marks it as one more of its kind ("ook", "too"),
    /// says what it took the place of ("statt") or puts it at set times ("In het
    /// weekend", "On Sundays") keeps the sentence when the model left the mark out; a fact
    /// with its mark, a first "Also," that brings news and one of two clauses stay as the
    /// model wrote them.
    #[tokio::test]
    async fn a_fact_that_lost_its_speakers_mark_is_kept_as_said() {
        let reply = r#"{"facts": [
            {"text": "Ik werk als ober in een café"},
            {"text": "Ik werk als ober in een strandtent"},
            {"text": "I play the violin too"},
            {"text": "I moved to Porto"},
            {"text": "I bake bread"},
            {"text": "I coach football"},
            {"text": "Ich trinke Kräutertee seit zwei Wochen"},
            {"text": "I cycle to work instead of driving"}]}"#;
        let conversation = [Message::user(
            "In het weekend werk ik ook als ober in een café. In het weekend werk ik als ober \
             in een strandtent. I play the violin too. Also, I \
             moved to Porto. On Sundays I bake bread. I also teach, and I coach football. \
             Seit zwei Wochen trinke ich statt Espresso nur noch Kräutertee. These days I \
             cycle to work instead of driving.",
        )];
        let facts = extracted(reply, &conversation, &[]).await;
        assert_eq!(
            texts(&facts),
            [
                "In het weekend werk ik ook als ober in een café",
                "In het weekend werk ik als ober in een strandtent",
                "I play the violin too",
                "I moved to Porto",
                "On Sundays I bake bread",
                "I coach football",
                "Seit zwei Wochen trinke ich statt Espresso nur noch Kräutertee",
                "I cycle to work instead of driving"
            ]
        );
    }

    /// A fact that lost the name or the kind its sentence gives after a comma keeps the
    /// sentence; a denial, a correction, a clause or a longer phrase after the comma, and
    /// a fact that took the words after it, stay as the model wrote them.
    #[tokio::test]
    async fn a_fact_that_lost_its_apposition_is_kept_as_said() {
        let reply = r#"{"facts": [
            {"text": "Ik heb een kat"},
            {"text": "Meine Nachbarin hat jetzt auch einen Hund"},
            {"text": "I have a parrot"},
            {"text": "My climbing gym is in Derby"},
            {"text": "Ich fahre jetzt Bus in Graz"},
            {"text": "I work in a bakery"},
            {"text": "Ho comprato una bici"},
            {"text": "I bought a van"}]}"#;
        let conversation = [Message::user(
            "Ik heb een kat, Pluis. Meine Nachbarin hat jetzt auch einen Hund, einen Dackel. \
             I have a parrot, an African grey. My climbing gym is in Derby, not Leicester. Ich \
             fahre jetzt Bus in Graz, nicht mehr Taxi. I work in a bakery, it is hard work. \
             Ho comprato una bici, Bianchi. I bought a van, a decision my wife laughs about.",
        )];
        let facts = extracted(reply, &conversation, &[]).await;
        assert_eq!(
            texts(&facts),
            [
                "Ik heb een kat, Pluis",
                "Meine Nachbarin hat jetzt auch einen Hund, einen Dackel",
                "I have a parrot, an African grey",
                "My climbing gym is in Derby",
                "Ich fahre jetzt Bus in Graz",
                "I work in a bakery",
                "Ho comprato una bici, Bianchi",
                "I bought a van"
            ]
        );
    }

    /// A fact that left out a name its part of the sentence gives keeps that part; a name
    /// after a denial or a word of where something came from stays out, and so does one in
    /// another part of the sentence.
    #[tokio::test]
    async fn a_fact_that_lost_a_name_is_kept_as_said() {
        let reply = r#"{"facts": [
            {"text": "Ce week-end je vais voir ma sœur"},
            {"text": "I moved to Valencia last month"},
            {"text": "My gym is in Derby"},
            {"text": "Ich spiele Geige im Orchester"},
            {"text": "Ik werk in een bakkerij"},
            {"text": "Ich wohne in Hamburg"}]}"#;
        let conversation = [Message::user(
            "Ce week-end je vais voir ma sœur Camille à Annecy. I moved to Valencia from Madrid \
             last month. My gym is in Derby, not Leicester. Ich spiele Geige im Orchester, \
             Mahler vor allem. Ik werk sinds mei in een bakkerij. Ich wohne nicht mehr in \
             Bremen sondern in Hamburg.",
        )];
        let facts = extracted(reply, &conversation, &[]).await;
        assert_eq!(
            texts(&facts),
            [
                "Ce week-end je vais voir ma sœur Camille à Annecy",
                "I moved to Valencia last month",
                "My gym is in Derby",
                "Ich spiele Geige im Orchester",
                "Ik werk in een bakkerij",
                "Ich wohne in Hamburg"
            ]
        );
    }

    /// A fact that gave the subject of one clause what the speaker said of themselves in
    /// the next is the speaker's clause again; a fact of the other clause's own subject,
    /// one that names the speaker and one that takes nothing from another clause stay as
    /// written.
    #[tokio::test]
    async fn a_fact_that_gave_someone_else_the_speakers_clause_is_the_speakers_again() {
        let reply = r#"{"facts": [
            {"text": "Mi novia se llama Lucía"},
            {"text": "Mi novia trabaja en un hotel"},
            {"text": "My wife works at a bank"},
            {"text": "Mein Bruder wohnt in Köln"},
            {"text": "I work at a school"},
            {"text": "Works at a post office"},
            {"text": "Lea and I sing in a choir"}]}"#;
        let conversation = [Message::user(
            "Mi novia se llama Lucía y trabajo en un hotel. My wife is Ana and I work at a \
             bank. Mein Bruder wohnt in Köln und er arbeitet bei Ford. My son is Tom and I \
             work at a school. Tim is my son and I work at a post office. My sister is Lea \
             and I sing in a choir.",
        )];
        assert_eq!(
            texts(&extracted(reply, &conversation, &[]).await),
            [
                "Mi novia se llama Lucía",
                "trabajo en un hotel",
                "I work at a bank",
                "Mein Bruder wohnt in Köln",
                "I work at a school",
                "Works at a post office",
                "Lea and I sing in a choir"
            ]
        );
    }

    /// A fact that is its sentence's words without the speaker keeps its sentence; one
    /// that keeps its own subject, or whose sentence names no speaker, stays as written.
    #[tokio::test]
    async fn a_fact_that_lost_its_speaker_is_kept_as_said() {
        let reply = r#"{"facts": [
            {"text": "Koriander heerlijk"},
            {"text": "Sanne is a nurse"},
            {"text": "Tomatoes on the balcony"},
            {"text": "Rome in May"}]}"#;
        let conversation = [Message::user(
            "Tegenwoordig vind ik koriander heerlijk. My friend Sanne is a nurse. These days \
             I grow tomatoes on the balcony. Trip to Rome in May!",
        )];
        let facts = extracted(reply, &conversation, &[]).await;
        assert_eq!(
            texts(&facts),
            [
                "Tegenwoordig vind ik koriander heerlijk",
                "Sanne is a nurse",
                "These days I grow tomatoes on the balcony",
                "Rome in May"
            ]
        );
    }

    /// French "ma" is "my": a French sentence with it is put back together as any other;
    /// Italian "ma" is "but", and its two clauses stay two facts.
    #[tokio::test]
    async fn a_sentence_with_ma_is_put_back_together_unless_it_is_italian() {
        let reply = r#"{"facts": [{"text": "Je vais voir ma sœur à Lyon"},
            {"text": "ce week-end"}, {"text": "Vivo a Roma"},
            {"text": "lavoro a Milano"}]}"#;
        let conversation = [Message::user(
            "Je vais voir ma sœur à Lyon, ce week-end. Vivo a Roma, ma lavoro a Milano.",
        )];
        assert_eq!(
            texts(&extracted(reply, &conversation, &[]).await),
            [
                "Je vais voir ma sœur à Lyon, ce week-end",
                "Vivo a Roma",
                "lavoro a Milano"
            ]
        );
    }

    /// Spanish and French "en" is "in": a sentence with it is put back together as any
    /// other; Dutch "en" is "and", and its two clauses stay two facts.
    #[tokio::test]
    async fn a_sentence_with_en_is_put_back_together_unless_it_is_dutch() {
        let reply = r#"{"facts": [{"text": "Estoy de visita en Granada"},
            {"text": "en casa de mis tíos"}, {"text": "Ik woon in Gent"},
            {"text": "Ik werk in Brussel"}]}"#;
        let conversation = [Message::user(
            "Estoy de visita en Granada, en casa de mis tíos. Ik woon in Gent en ik werk in \
             Brussel.",
        )];
        assert_eq!(
            texts(&extracted(reply, &conversation, &[]).await),
            [
                "Estoy de visita en Granada, en casa de mis tíos",
                "Ik woon in Gent",
                "Ik werk in Brussel"
            ]
        );
    }

    #[tokio::test]
    async fn a_fact_half_translated_is_kept_in_the_users_own_words() {
        // English words without a pronoun or article of English's own ("now", "at"), from a
        // user who wrote none.
        let reply = r#"{"facts": [{"text": "¡Hola! Por fin dejé el hotel"},
            {"text": "now am receptionist at a dental clinic"}]}"#;
        let conversation = [Message::user(
            "¡Hola! Por fin dejé el hotel: ahora soy recepcionista en una clínica dental.",
        )];
        assert_eq!(
            texts(&extracted(reply, &conversation, &[]).await),
            [
                "¡Hola! Por fin dejé el hotel",
                "ahora soy recepcionista en una clínica dental"
            ]
        );
    }

    #[tokio::test]
    async fn a_fact_translated_with_an_english_verb_is_kept_in_the_users_own_words() {
        // "He" is Spanish too; "started" and "doing" are no word of the user's language.
        // It shares no word with any clause: the one clause no other fact comes from.
        let reply = r#"{"facts": [{"text": "Toco la guitarra en un grupo"},
            {"text": "He started doing rock climbing"}]}"#;
        let conversation = [Message::user(
            "Toco la guitarra en un grupo. También he empezado a hacer escalada.",
        )];
        assert_eq!(
            texts(&extracted(reply, &conversation, &[]).await),
            [
                "Toco la guitarra en un grupo",
                "También he empezado a hacer escalada"
            ]
        );
        // Both facts translated: the clause found for the first is not the second's.
        let reply = r#"{"facts": [{"text": "My girlfriend is called Rita"},
            {"text": "I work at a bank"}]}"#;
        let conversation_pt = [Message::user(
            "A minha namorada chama-se Rita. Trabalho num banco.",
        )];
        assert_eq!(
            texts(&extracted(reply, &conversation_pt, &[]).await),
            ["A minha namorada chama-se Rita", "Trabalho num banco"]
        );
        // Two clauses no other fact comes from: which one it says is not known.
        let reply = r#"{"facts": [{"text": "He started doing rock climbing"}]}"#;
        assert_eq!(
            texts(&extracted(reply, &conversation, &[]).await),
            ["He started doing rock climbing"]
        );
        // A user who may write English wrote it.
        let reply = r#"{"facts": [{"text": "Alice is 34 and she plays the ukulele"}]}"#;
        assert_eq!(
            texts(&extracted(reply, &[Message::user("About me")], &[]).await),
            ["Alice is 34 and she plays the ukulele"]
        );
    }

    #[tokio::test]
    async fn facts_in_the_words_of_the_conversation_are_kept_as_written() {
        // A paraphrase keeps most of its message's words, or its language's small words; the
        // user is "user" to the model.
        let reply = r#"{"facts": [{"text": "User loves hiking at the weekend"},
            {"text": "I'm moving to Porto in 2026-05"},
            {"text": "Tigre es el nombre del gato adoptado"}]}"#;
        let conversation = [
            Message::user("I go hiking every weekend. We move to Porto in May!"),
            Message::assistant("Lovely."),
            Message::user("¡Ayer adoptamos un gato! Se llama Tigre."),
        ];
        assert_eq!(
            texts(&extracted(reply, &conversation, &[]).await),
            [
                "User loves hiking at the weekend",
                "I'm moving to Porto in 2026-05",
                "Tigre es el nombre del gato adoptado"
            ]
        );
    }
}
