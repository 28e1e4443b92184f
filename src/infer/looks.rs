//! The looks at one memory and one new fact that check the reconciliation's decisions:
//! the second look at a memory the model named ([`replaces`]), and the closer look at a
//! memory it did not ([`outdates`]), each made of narrow questions a small model answers
//! better than one decision over many memories.

use serde::Deserialize;
use serde_json::{json, Value};

use super::answer;
use crate::error::Result;
use crate::llm::{chat_json, chat_json_with, Llm, Parsed};
use crate::record::Message;

/// The two questions of a second look at one memory and one new fact (see [`supersedes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Question {
    /// Is the memory no longer true because of the fact?
    Replaced,
    /// Can the memory still be true beside the fact?
    BothTrue,
}

impl Question {
    fn text(self) -> &'static str {
        match self {
            Question::Replaced => "Replaced?",
            Question::BothTrue => "Both true?",
        }
    }
}

/// Worked examples of the second look, as (memory, new fact, question, answer): a move, a
/// new car, a new job and a corrected day replace; a visit, one more hobby, child or job
/// do not. Mostly asked both ways, so that neither answer is the habit.
const SECOND_LOOK_EXAMPLES: [(&str, &str, Question, bool); 12] = [
    (
        "I live in Hull",
        "I'm spending a few days with my niece in Kilkenny",
        Question::Replaced,
        false,
    ),
    (
        "I live in Hull",
        "I'm spending a few days with my niece in Kilkenny",
        Question::BothTrue,
        true,
    ),
    (
        "My car is a red Seat Ibiza",
        "I sold my car and bought a Kia Niro",
        Question::Replaced,
        true,
    ),
    (
        "My car is a red Seat Ibiza",
        "I sold my car and bought a Kia Niro",
        Question::BothTrue,
        false,
    ),
    (
        "Juego al ajedrez los martes",
        "Ahora también hago boxeo",
        Question::BothTrue,
        true,
    ),
    (
        "Juego al ajedrez los martes",
        "Ahora también hago boxeo",
        Question::Replaced,
        false,
    ),
    (
        "Trabajo de cartero en Lugo",
        "Ahora trabajo de bombero",
        Question::BothTrue,
        false,
    ),
    (
        "Trabajo de cartero en Lugo",
        "Ahora trabajo de bombero",
        Question::Replaced,
        true,
    ),
    (
        "I have a daughter, Ines",
        "My son Tomas starts school in May",
        Question::Replaced,
        false,
    ),
    (
        "Mein Zahnarzttermin ist am Montag",
        "Der Termin ist doch am Mittwoch",
        Question::BothTrue,
        false,
    ),
    (
        "Mein Zahnarzttermin ist am Montag",
        "Der Termin ist doch am Mittwoch",
        Question::Replaced,
        true,
    ),
    (
        "Sou enfermeira",
        "Aos sábados trabalho numa livraria",
        Question::BothTrue,
        true,
    ),
];

/// Token budget of a second look's reply: `{"answer": "yes"}`.
const SECOND_LOOK_TOKENS: u32 = 16;

fn second_look_question(memory: &str, fact: &str, question: Question) -> String {
    format!("{}\n{}", memory_and_fact(memory, fact), question.text())
}

fn yes_no(yes: bool) -> String {
    format!(r#"{{"answer": "{}"}}"#, if yes { "yes" } else { "no" })
}

/// The part of a second look's chat that is the same in every call: the instructions and
/// the worked examples of both questions, so that one kept prefix serves both.
pub(super) fn second_look_prefix() -> Vec<Message> {
    let system = "You keep a person's memories current. You see one of their memories, a new \
fact they just told you, and a question about the two. Answer \"yes\" or \"no\".\n\
\"Replaced?\" asks whether the memory is no longer true because of the new fact: they moved, \
changed job, car, partner, team or diet, stopped something, or corrected the memory.\n\
\"Both true?\" asks whether the memory can still be true beside the new fact: a trip or \
visit, one more hobby, job, child, pet or language, or something unrelated.\n\
Reply with JSON only: {\"answer\": \"yes\"} or {\"answer\": \"no\"}.";
    let mut chat = vec![Message::new("system", system)];
    for (memory, fact, question, yes) in SECOND_LOOK_EXAMPLES {
        chat.push(Message::user(second_look_question(memory, fact, question)));
        chat.push(Message::new("assistant", yes_no(yes)));
    }
    chat
}

#[derive(Debug, Deserialize)]
struct Answer {
    answer: String,
}

/// The schema of a second look's reply: `{"answer": "yes"}` or `{"answer": "no"}`.
pub(super) fn yes_no_schema() -> Value {
    answer(json!({"answer": {"enum": ["yes", "no"]}}), &["answer"])
}

/// One yes/no question about a memory and a fact.
async fn ask(llm: &dyn Llm, memory: &str, fact: &str, question: Question) -> Result<Parsed<bool>> {
    let mut chat = second_look_prefix();
    chat.push(Message::user(second_look_question(memory, fact, question)));
    // The memory and the fact are read once for both questions.
    chat_json_with::<Answer, _>(
        llm,
        chat,
        yes_no_schema(),
        SECOND_LOOK_TOKENS,
        true,
        |a| match a.answer.as_str() {
            "yes" | "no" => Ok(()),
            other => Err(format!("answer {other:?}: answer \"yes\" or \"no\"")),
        },
    )
    .await
    .map(|p| Parsed {
        value: p.value.answer == "yes",
        usage: p.usage,
        model: p.model,
    })
}

/// A second look at a fact the reconciliation added beside a similar memory: whether the
/// fact supersedes the memory. Asked as two narrow questions, put opposite ways: the memory
/// is replaced, and it cannot be true beside the fact. Only when both answers say so (the
/// second is asked only after a yes to the first). A small model that keeps an old fact
/// beside a new one in a decision over many memories often sees the change when shown one
/// memory; each question alone leans to "yes".
pub(crate) async fn supersedes(llm: &dyn Llm, memory: &str, fact: &str) -> Result<Parsed<bool>> {
    let looked = look(llm, memory, fact).await?;
    Ok(Parsed {
        value: looked.value == Look::Superseded,
        usage: looked.usage,
        model: looked.model,
    })
}

/// What the two questions of a second look found (see [`supersedes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Look {
    /// Not replaced.
    Kept,
    /// Replaced, and not true beside the fact.
    Superseded,
    /// Replaced, yet true beside the fact: the answers disagree.
    Torn,
}

/// The second look's two questions, the second asked only after a yes to the first.
async fn look(llm: &dyn Llm, memory: &str, fact: &str) -> Result<Parsed<Look>> {
    let replaced = ask(llm, memory, fact, Question::Replaced).await?;
    if !replaced.value {
        return Ok(Parsed {
            value: Look::Kept,
            usage: replaced.usage,
            model: replaced.model,
        });
    }
    let both = ask(llm, memory, fact, Question::BothTrue).await?;
    let mut usage = replaced.usage;
    usage += both.usage;
    Ok(Parsed {
        value: if both.value {
            Look::Torn
        } else {
            Look::Superseded
        },
        usage,
        model: both.model,
    })
}

/// A second look at a memory the reconciliation named for a fact (an UPDATE or DELETE the
/// plan doubted): whether the fact takes its place. As [`supersedes`], except that the
/// question the memory answers ([`answers`], [`drops`]) settles it when the two answers
/// disagree (replaced, yet true beside the fact), and when the two share no topic while one
/// speaks of one ([`super::leaves_topic`]). Told "I moved to Valencia", a small model calls
/// "I live in Madrid" both replaced and still true, yet answers "Where do they live?" with
/// Madrid before and Valencia now. It calls a nurse's job replaced by "I don't drink cow's
/// milk either" and not true beside it, yet answers "What is their work?" with the same job
/// before and now. The model named this memory for the fact; the closer look at a memory
/// it did not name ([`outdates`]) needs both answers to agree and the question too.
pub(crate) async fn replaces(llm: &dyn Llm, memory: &str, fact: &str) -> Result<Parsed<bool>> {
    let looked = look(llm, memory, fact).await?;
    let settled = match looked.value {
        Look::Kept => Some(false),
        Look::Superseded if !super::leaves_topic(memory, fact) => Some(true),
        _ => None,
    };
    if let Some(value) = settled {
        return Ok(Parsed {
            value,
            usage: looked.usage,
            model: looked.model,
        });
    }
    let answered = answers(llm, memory, fact).await?;
    let mut usage = looked.usage;
    usage += answered.usage;
    Ok(Parsed {
        value: drops(&answered.value.before, &answered.value.now),
        usage,
        model: answered.model,
    })
}

/// Worked examples of the question a memory answers (see [`answers`]), as (memory, new fact,
/// question, answer before, answer now): a new job, a corrected day, a car sold or
/// replaced change the answer; a remark, a visit, one more hobby, child or job keep it.
/// None is from an evaluation set.
const ANSWER_EXAMPLES: [(&str, &str, &str, &str, &str); 10] = [
    (
        "Trabajo de cartero en Lugo",
        "Ahora trabajo de bombero",
        "What is their job?",
        "cartero en Lugo",
        "bombero",
    ),
    (
        "Juego al ajedrez los martes",
        "Ahora también hago boxeo",
        "What do they do for fun?",
        "ajedrez los martes",
        "ajedrez los martes y boxeo",
    ),
    (
        "Mein Zahnarzttermin ist am Montag",
        "Der Termin ist doch am Mittwoch",
        "When is their dentist appointment?",
        "am Montag",
        "am Mittwoch",
    ),
    (
        "I live in Derby",
        "What a windy day",
        "Where do they live?",
        "Derby",
        "Derby",
    ),
    (
        "Sou enfermeira",
        "Aos sábados trabalho numa livraria",
        "What is their work?",
        "enfermeira",
        "enfermeira, e aos sábados numa livraria",
    ),
    (
        "Je vis à Rennes",
        "Je suis à Nice pour le week-end",
        "Where do they live?",
        "à Rennes",
        "à Rennes",
    ),
    (
        "I have a daughter, Ines",
        "My son Tomas starts school in May",
        "What children do they have?",
        "a daughter, Ines",
        "a daughter, Ines, and a son, Tomas",
    ),
    (
        "Ik rij in een Opel Corsa",
        "Ik heb de Opel verkocht",
        "What car do they drive?",
        "een Opel Corsa",
        "geen auto meer",
    ),
    (
        "Ich fahre einen VW Golf",
        "Habe mir einen Skoda gekauft",
        "What car do they drive?",
        "einen VW Golf",
        "einen Skoda",
    ),
    (
        "I'm a librarian at the city library",
        "I started as a lab technician at the hospital",
        "What is their job?",
        "librarian at the city library",
        "lab technician at the hospital",
    ),
];

/// Token budget of the reply of [`answers`]: a question and two short answers.
const ANSWER_TOKENS: u32 = 64;

/// A memory and a new fact, as the second look and the closer look's question show them.
fn memory_and_fact(memory: &str, fact: &str) -> String {
    format!("Memory: {memory}\nNew fact: {fact}")
}

/// The fixed part of the chat of [`answers`]: instructions and worked examples.
pub(super) fn answers_prefix() -> Vec<Message> {
    let system = "You keep a person's memory current. You see a memory of what they told you \
earlier and a new fact they just told you. Write the question the memory answers about them, \
its answer before the new fact, and its answer now, each answer in a few words in the \
memory's language. The answer now keeps what is still true and drops what the new fact shows \
is no longer true: an old home, job, partner, car, team, diet or habit, or a detail they \
corrected. A trip, one more hobby, job, child or pet, or something unrelated keeps the answer \
before.\nReply with JSON only: {\"question\": \"...\", \"before\": \"...\", \"now\": \"...\"}.";
    let mut chat = vec![Message::new("system", system)];
    for (memory, fact, question, before, now) in ANSWER_EXAMPLES {
        chat.push(Message::user(memory_and_fact(memory, fact)));
        chat.push(Message::new(
            "assistant",
            json!({"question": question, "before": before, "now": now}).to_string(),
        ));
    }
    chat
}

/// The question a memory answers about its owner, with its answer before and after a new
/// fact.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Answers {
    pub(crate) question: String,
    pub(crate) before: String,
    pub(crate) now: String,
}

/// Asks the model what question a memory answers, and that question's answer before and
/// after a new fact. Told what is true now, a small model drops an old home or job it keeps
/// when asked whether the memory was replaced, and keeps a hobby beside a move it would
/// say was replaced.
pub(crate) async fn answers(llm: &dyn Llm, memory: &str, fact: &str) -> Result<Parsed<Answers>> {
    let mut chat = answers_prefix();
    chat.push(Message::user(memory_and_fact(memory, fact)));
    chat_json::<Answers, _>(llm, chat, answers_schema(), ANSWER_TOKENS, |_| Ok(())).await
}

/// The schema of the reply of [`answers`]: three strings, any of them possibly empty (an
/// answer with no word drops nothing: see [`drops`]).
pub(super) fn answers_schema() -> Value {
    let string = json!({"type": "string"});
    answer(
        json!({"question": string, "before": string, "now": string}),
        &["question", "before", "now"],
    )
}

/// Whether the answer `now` drops part of the answer `before`: a word of it worth matching
/// (a number, or three letters or more, not an English function word) that `now` has in no
/// form alike ("Montag" → "Mittwoch", "Glasgow" → "Bristol"). An answer with no such word
/// drops nothing.
pub(crate) fn drops(before: &str, now: &str) -> bool {
    !dropped(before, now).is_empty()
}

/// The words of the answer `before` that the answer `now` drops (see [`drops`]), as terms.
fn dropped(before: &str, now: &str) -> Vec<String> {
    let now = crate::text::terms(now);
    crate::text::query_terms(before)
        .into_iter()
        .filter(|t| t.chars().count() >= 3 || t.chars().any(|c| c.is_ascii_digit()))
        .filter(|t| !now.iter().any(|n| super::extract::alike(t, n)))
        .collect()
}

/// Words that join two clauses after a comma ("I'm 34, and I've just started the
/// ukulele"), in the languages memlane is evaluated in: English, French, German, Italian,
/// Spanish, Portuguese and Dutch.
pub(super) const CONJUNCTIONS: [&str; 13] = [
    "and", "but", "et", "mais", "und", "aber", "e", "ma", "y", "pero", "mas", "en", "maar",
];

/// The clauses of a memory's text, as byte ranges: it is cut at semicolons, at commas
/// followed by a [`CONJUNCTIONS`] word (which is left out of both clauses), and before a
/// conjunction and a subject after a clause ([`at_conjunctions`]: "I'm vegan and I run
/// half marathons", "Ho 29 anni e faccio la commessa"). A comma alone does not cut: "I
/// live in Madrid, near the Retiro" is one thing said, and so is "Teacher, 12 years".
pub(crate) fn clauses(text: &str) -> Vec<std::ops::Range<usize>> {
    at_punctuation(text)
        .into_iter()
        .flat_map(|r| at_conjunctions(text, r, true))
        .collect()
}

/// `text` cut at semicolons and at commas followed by a [`CONJUNCTIONS`] word, as
/// [`clauses`] are.
fn at_punctuation(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut at = 0;
    while let Some(found) = text[at..].find([',', ';']) {
        let cut = at + found;
        let next = if text[cut..].starts_with(';') {
            Some(cut + 1)
        } else {
            let trimmed = text[cut + 1..].trim_start();
            let word_end = trimmed
                .find(|c: char| !c.is_alphabetic())
                .unwrap_or(trimmed.len());
            let word = &trimmed[..word_end];
            let joined = CONJUNCTIONS.contains(&word.to_lowercase().as_str())
                && trimmed[word_end..].starts_with(char::is_whitespace);
            joined.then(|| text.len() - trimmed.len() + word_end)
        };
        match next {
            Some(next) => {
                out.push(start..cut);
                start = next;
                at = next;
            }
            None => at = cut + 1,
        }
    }
    out.push(start..text.len());
    out.into_iter()
        .map(|r| {
            let piece = &text[r.clone()];
            let lead = piece.len() - piece.trim_start().len();
            let trail = piece.len() - piece.trim_end().len();
            r.start + lead..r.end - trail
        })
        .filter(|r| !r.is_empty())
        .collect()
}

/// The text a memory of several clauses takes when a fact supersedes it: the fact in place
/// of the one clause that holds the words its answer drops ([`Answers`], [`dropped`]), the
/// other clauses kept as they were. "I'm 34, and I've just started learning the ukulele",
/// told "I'm actually 43", keeps the ukulele. None, and the fact's text replaces the whole
/// memory, when the memory is one clause, when no clause or more than one holds the
/// dropped words, or when the clauses kept say nothing but function words.
pub(crate) fn with_the_rest_kept(memory: &str, fact: &str, answers: &Answers) -> Option<String> {
    let parts = clauses(memory);
    if parts.len() < 2 {
        return None;
    }
    let gone = dropped(&answers.before, &answers.now);
    let holds = |range: &std::ops::Range<usize>| {
        let terms = crate::text::terms(&memory[range.clone()]);
        gone.iter()
            .any(|g| terms.iter().any(|t| super::extract::alike(g, t)))
    };
    in_place_of_one(memory, &parts, fact, holds)
}

/// The text a memory of several clauses takes when a rule finds a fact superseding it: the
/// fact in place of the one clause ([`clauses`]) the rule finds it superseding on its own,
/// the other clauses kept: "I'm vegan and I run half marathons", told "I started eating
/// meat again", keeps the marathons. None when the memory is one clause, when no clause
/// or more than one is superseded, or when the clauses kept say nothing but function
/// words.
pub(crate) fn with_the_rest_kept_by(
    memory: &str,
    fact: &str,
    supersedes: impl Fn(&str) -> bool,
) -> Option<String> {
    let parts = clauses(memory);
    if parts.len() < 2 {
        return None;
    }
    in_place_of_one(memory, &parts, fact, |r| supersedes(&memory[r.clone()]))
}

/// Verbs of being and naming, by which a piece says something of a subject that is no
/// pronoun: "Mijn vriendin heet Eva", "Ma sœur est infirmière", "My wife is a nurse". As
/// written, lowercase ("è", "é"), or after an apostrophe ("s'appelle").
const BE_OR_NAMED: &[&str] = &[
    "is",
    "are",
    "was",
    "called",
    "named",
    "est",
    "sont",
    "appelle",
    "appellent",
    "ist",
    "sind",
    "heißt",
    "heisst",
    "è",
    "sono",
    "chiama",
    "chiamano",
    "es",
    "llama",
    "llaman",
    "é",
    "são",
    "chama",
    "chamam",
    "heet",
    "heten",
    "zijn",
];

/// First-person verbs that begin a clause without a pronoun in Italian, Spanish and
/// Portuguese: "e faccio la commessa", "y trabajo en un hotel", "e sou designer". Not
/// "como" ("as") nor "gusto" ("taste"), which are as often something else.
pub(super) const I_DO: &[&str] = &[
    "sono", "ho", "faccio", "lavoro", "vivo", "abito", "gioco", "studio", "suono", "corro",
    "insegno", "mangio", "bevo", "parlo", "soy", "estoy", "tengo", "trabajo", "juego", "estudio",
    "toco", "enseño", "hago", "bebo", "hablo", "sou", "estou", "tenho", "trabalho", "moro", "jogo",
    "estudo", "ensino", "faço", "falo", "seguo", "sigo",
];

/// `range` of `text` cut before each [`CONJUNCTIONS`] word followed by a subject
/// ([`super::extract::SUBJECTS`]) or a first-person verb ([`I_DO`]), the conjunction left
/// out of both pieces. With `clause_before`, only where the piece before has a subject or
/// such a verb of its own, or a verb of being or naming ([`BE_OR_NAMED`]) that says
/// something of a subject: "I'm vegan and I run", "Moro em Coimbra e sou designer", "Mijn
/// vriendin heet Eva en ik werk bij een bank"; not "My wife and I live", "Lena und ich
/// sind", nor "Casa e lavoro sono lontani".
pub(super) fn at_conjunctions(
    text: &str,
    range: std::ops::Range<usize>,
    clause_before: bool,
) -> Vec<std::ops::Range<usize>> {
    let words: Vec<(usize, &str)> = text[range.clone()]
        .split_whitespace()
        .map(|w| (w.as_ptr() as usize - text.as_ptr() as usize, w))
        .collect();
    // "I'm", "j'habite": the subject before the apostrophe.
    let bare = |w: &str| {
        let w = w.split(['\'', '’']).next().unwrap_or(w);
        w.trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase()
    };
    let mut out = Vec::new();
    let mut start = range.start;
    let subject = |w: &str| {
        let w = bare(w);
        super::extract::SUBJECTS.contains(&w.as_str()) || I_DO.contains(&w.as_str())
    };
    let verb = |w: &str| {
        w.split(['\'', '’']).any(|part| {
            let part = part.trim_matches(|c: char| !c.is_alphanumeric());
            BE_OR_NAMED.contains(&part.to_lowercase().as_str())
        })
    };
    for pair in words.windows(2) {
        let ((at, conjunction), (next, after)) = (pair[0], pair[1]);
        // The piece before is a clause of its own: "Lena und ich sind zusammen" is one.
        let a_clause_before = !clause_before
            || words
                .iter()
                .any(|&(w_at, w)| (start..at).contains(&w_at) && (subject(w) || verb(w)));
        if a_clause_before && CONJUNCTIONS.contains(&bare(conjunction).as_str()) && subject(after) {
            out.push(start..text[..at].trim_end().len());
            start = next;
        }
    }
    out.push(start..range.end);
    out
}

/// `memory` with `fact` in place of the one clause of `parts` that `replaced` picks, if
/// exactly one, and the clauses kept say more than function words.
fn in_place_of_one(
    memory: &str,
    parts: &[std::ops::Range<usize>],
    fact: &str,
    replaced: impl Fn(&std::ops::Range<usize>) -> bool,
) -> Option<String> {
    let mut superseded = parts.iter().filter(|r| replaced(r));
    let (Some(replaced), None) = (superseded.next(), superseded.next()) else {
        return None;
    };
    let rest_says_something = parts
        .iter()
        .filter(|r| *r != replaced)
        .any(|r| !crate::text::content_terms(&memory[r.clone()]).is_empty());
    if !rest_says_something {
        return None;
    }
    let fact = fact
        .trim()
        .trim_end_matches(['.', '!', '?', '。', '！', '？']);
    Some(format!(
        "{}{}{}",
        &memory[..replaced.start],
        fact,
        &memory[replaced.end..]
    ))
}

/// Whether a fact the reconciliation added beside a similar memory outdates it after all:
/// the second look says so ([`supersedes`]), and the answer to the question the memory
/// answers drops part of what it was ([`answers`], [`drops`]). Either alone replaces
/// memories that stay true (a dog's name for a new job; a home for a greeting from a
/// trip); together, on 52 pairs of a fact added beside a memory in the development cases,
/// they replaced 4 of the 7 outdated memories and none of the 45 others.
pub(crate) async fn outdates(llm: &dyn Llm, memory: &str, fact: &str) -> Result<Parsed<bool>> {
    let looked = supersedes(llm, memory, fact).await?;
    if !looked.value {
        return Ok(looked);
    }
    let answered = answers(llm, memory, fact).await?;
    let mut usage = looked.usage;
    usage += answered.usage;
    Ok(Parsed {
        value: drops(&answered.value.before, &answered.value.now),
        usage,
        model: answered.model,
    })
}

/// Which of two memories a fact supersedes (see [`apart`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Apart {
    /// The first memory, not the second.
    First,
    /// The second memory, not the first.
    Second,
    /// Both or neither: the two are not told apart.
    Neither,
}

/// Tells apart two memories a second look called replaced by one fact: asked what each
/// memory answers, before the fact and now ([`answers`]), the one whose answer drops part
/// of what it was is superseded, when the other's does not. A small model calls a job
/// replaced by "Ho ricominciato a mangiare carne" as readily as the vegetarian diet, yet
/// answers "What is their job?" with the same job before and now.
pub(crate) async fn apart(
    llm: &dyn Llm,
    first: &str,
    second: &str,
    fact: &str,
) -> Result<Parsed<Apart>> {
    let one = answers(llm, first, fact).await?;
    let other = answers(llm, second, fact).await?;
    let mut usage = one.usage;
    usage += other.usage;
    let (first_drops, second_drops) = (
        drops(&one.value.before, &one.value.now),
        drops(&other.value.before, &other.value.now),
    );
    tracing::debug!(
        target: "memlane",
        first_drops,
        second_drops,
        "two memories a second look called replaced, asked what each answers"
    );
    let value = match (first_drops, second_drops) {
        (true, false) => Apart::First,
        (false, true) => Apart::Second,
        _ => Apart::Neither,
    };
    Ok(Parsed {
        value,
        usage,
        model: other.model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ScriptedLlm;

    /// both cannot be true; the second question is asked only after a yes to the first.
    /// Both questions share everything before the question itself, and keep the memory and
    /// the fact for the next question (`keep_note`); a retry, which ends with a
    /// correction, does not.
    #[tokio::test]
    async fn a_second_look_needs_both_answers_to_agree() {
        let yes = r#"{"answer": "yes"}"#;
        let no = r#"{"answer": "no"}"#;
        let cases = [
            (vec![yes, no], true),
            (vec![yes, yes], false),
            (vec![no], false),
        ];
        for (replies, expected) in cases {
            let llm = ScriptedLlm::new(replies.clone());
            let looked = supersedes(&llm, "Lives in Hull", "Moved to York")
                .await
                .unwrap();
            assert_eq!(looked.value, expected, "{replies:?}");
            let requests = llm.requests();
            assert_eq!(requests.len(), replies.len(), "{replies:?}");
            let first = &requests[0].messages;
            let question = &first.last().unwrap().content;
            assert_eq!(
                question,
                "Memory: Lives in Hull\nNew fact: Moved to York\nReplaced?"
            );
            assert!(requests.iter().all(|r| r.keep_note), "{replies:?}");
            if let Some(second) = requests.get(1) {
                let (last, prefix) = second.messages.split_last().unwrap();
                assert_eq!(prefix, &first[..first.len() - 1]);
                assert_eq!(
                    last.content,
                    "Memory: Lives in Hull\nNew fact: Moved to York\nBoth true?"
                );
            }
        }
        let llm = ScriptedLlm::new([r#"{"answer": "maybe"}"#, yes, no]);
        assert!(
            supersedes(&llm, "Lives in Hull", "Moved to York")
                .await
                .unwrap()
                .value
        );
        let kept: Vec<bool> = llm.requests().iter().map(|r| r.keep_note).collect();
        assert_eq!(kept, [true, false, true]);
    }

    /// A second look at a memory the model named settles a disagreement of its two answers
    /// (replaced, yet true beside the fact) by the question the memory answers: replaced
    /// when its answer now drops part of the answer before. Agreeing answers decide alone
    /// when the fact speaks of the memory's topic (here a home).
    #[tokio::test]
    async fn a_torn_second_look_at_a_named_memory_asks_what_the_memory_answers() {
        let (yes, no) = (YES, NO);
        let cases = [
            (vec![yes, yes, MOVED], true),
            (vec![yes, yes, STAYS], false),
            (vec![yes, no], true),
            (vec![no], false),
        ];
        check_look(Look::Torn, &cases).await;
    }

    /// A second look at a memory of a topic the fact does not speak of (a job, and a move)
    /// asks the question the memory answers even when its two answers agree: replaced
    /// only when that answer changes.
    #[tokio::test]
    async fn a_second_look_at_a_memory_whose_topic_the_fact_leaves_asks_its_question() {
        let (memory, fact) = ("I work at the docks", "Moved to York");
        let cases = [
            (vec![YES, NO, JOB_CHANGES], true),
            (vec![YES, NO, JOB_STAYS], false),
            (vec![YES, YES, JOB_CHANGES], true),
            (vec![NO], false),
        ];
        for (replies, expected) in cases {
            let llm = ScriptedLlm::new(replies.clone());
            let looked = replaces(&llm, memory, fact).await.unwrap();
            assert_eq!(looked.value, expected, "{replies:?}");
            let requests = llm.requests();
            assert_eq!(requests.len(), replies.len(), "{replies:?}");
            if let Some(third) = requests.get(2) {
                let (last, prefix) = third.messages.split_last().unwrap();
                assert_eq!(prefix, answers_prefix().as_slice());
                assert_eq!(last.content, format!("Memory: {memory}\nNew fact: {fact}"));
            }
        }
    }

    /// An answer drops part of what it was when a word worth matching is gone from it in
    /// every form; an answer that keeps it, in another form or beside more, drops nothing.
    #[test]
    fn an_answer_now_drops_a_word_of_the_answer_before() {
        for (before, now) in [
            ("am Montag", "am Mittwoch"),
            ("Glasgow", "Bristol"),
            ("on Mondays at 6", "on Tuesdays at 6"),
            ("cartero en Lugo", "bombero"),
            ("a Fiat Punto", "no car"),
        ] {
            assert!(drops(before, now), "{before:?} → {now:?}");
        }
        for (before, now) in [
            ("enfermeira", "enfermeira, e aos sábados numa livraria"),
            ("a daughter, Ines", "a daughter, Ines, and a son, Tomas"),
            ("Derby", "derby"),
            ("plays the guitar", "plays the guitars"),
            ("clínica dental", "clinica dental"),
            ("the", "Bristol"),
            ("...", "Bristol"),
        ] {
            assert!(!drops(before, now), "{before:?} → {now:?}");
        }
    }

    /// A memory is cut into clauses at semicolons, at commas before a conjunction, and
    /// before a conjunction and a subject after a clause, in each of the evaluated
    /// languages; a comma alone, or a conjunction between two things, does not cut.
    #[test]
    fn a_memory_is_cut_into_clauses_at_a_semicolon_or_a_comma_and_a_conjunction() {
        let cut = |text: &str| -> Vec<String> {
            clauses(text)
                .into_iter()
                .map(|r| text[r].to_owned())
                .collect()
        };
        for (text, expected) in [
            (
                "I'm 34, and I've just started learning the ukulele",
                vec!["I'm 34", "I've just started learning the ukulele"],
            ),
            (
                "Vivo en Murcia; trabajo en un banco",
                vec!["Vivo en Murcia", "trabajo en un banco"],
            ),
            (
                "Ich bin 34, und ich spiele Cello",
                vec!["Ich bin 34", "ich spiele Cello"],
            ),
            (
                "Sono vegetariano, ma mangio pesce",
                vec!["Sono vegetariano", "mangio pesce"],
            ),
            (
                "Tenho 34 anos, e toco guitarra",
                vec!["Tenho 34 anos", "toco guitarra"],
            ),
            (
                "Ik ben 34, en ik speel hockey",
                vec!["Ik ben 34", "ik speel hockey"],
            ),
            (
                "I live in Madrid, near the Retiro",
                vec!["I live in Madrid, near the Retiro"],
            ),
            ("I like salt and pepper", vec!["I like salt and pepper"]),
            // A conjunction and a subject, or a first-person verb, after a clause.
            (
                "I'm vegan and I run half marathons",
                vec!["I'm vegan", "I run half marathons"],
            ),
            (
                "Ho 29 anni e faccio la commessa",
                vec!["Ho 29 anni", "faccio la commessa"],
            ),
            (
                "Moro em Coimbra e sou designer",
                vec!["Moro em Coimbra", "sou designer"],
            ),
            (
                "Casa e lavoro sono lontani",
                vec!["Casa e lavoro sono lontani"],
            ),
            (
                "Lena und ich sind zusammen",
                vec!["Lena und ich sind zusammen"],
            ),
            ("Teacher, 12 years", vec!["Teacher, 12 years"]),
            // "andere" is not "and"; a trailing separator leaves no empty clause.
            (
                "Ich habe zwei Hunde, andere Tiere nicht;",
                vec!["Ich habe zwei Hunde, andere Tiere nicht"],
            ),
        ] {
            assert_eq!(cut(text), expected, "{text:?}");
        }
    }

    /// A fact takes the place of the one clause a rule finds it superseding; none, or
    /// every clause, and the fact replaces the whole memory.
    #[test]
    fn a_fact_replaces_only_the_clause_a_rule_finds_it_superseding() {
        let vegan = |clause: &str| clause.contains("vegan");
        // (memory, fact, the word of the superseded clause, the memory after)
        for (memory, fact, word, after) in [
            (
                "I'm vegan and I run half marathons",
                "I eat meat again.",
                "vegan",
                "I eat meat again and I run half marathons",
            ),
            (
                "Je cours des marathons et j'étais vegan",
                "Je mange de la viande",
                "vegan",
                "Je cours des marathons et Je mange de la viande",
            ),
            // A clause whose subject is no pronoun, said by a verb of being or naming.
            (
                "Mijn vriendin heet Eva en ik werk bij een bank",
                "Ik ben verloofd met Noor",
                "Eva",
                "Ik ben verloofd met Noor en ik werk bij een bank",
            ),
            (
                "Ma copine s'appelle Eva et je suis infirmier",
                "Je suis fiancé à Noor",
                "Eva",
                "Je suis fiancé à Noor et je suis infirmier",
            ),
        ] {
            assert_eq!(
                with_the_rest_kept_by(memory, fact, |clause| clause.contains(word)).as_deref(),
                Some(after),
                "{memory}"
            );
        }
        for memory in [
            "I'm vegan",
            "The vegan diet and I are old friends",
            "I run half marathons, and I swim",
            "I'm vegan, and my wife is vegan",
            "My vegan wife and I run half marathons",
        ] {
            assert_eq!(
                with_the_rest_kept_by(memory, "I eat meat again", vegan),
                None,
                "{memory}"
            );
        }
    }

    /// A fact takes the place of the one clause that holds what the memory's answer drops,
    /// and the other clauses stay; otherwise (one clause, none or two holding it, nothing
    /// but function words left) the fact replaces the whole memory.
    #[test]
    fn a_fact_replaces_only_the_clause_whose_answer_it_changes() {
        let answers = |before: &str, now: &str| Answers {
            question: "?".into(),
            before: before.into(),
            now: now.into(),
        };
        let ukulele = "I'm 34, and I've just started learning the ukulele";
        assert_eq!(
            with_the_rest_kept(ukulele, "I'm actually 43.", &answers("34", "43")).as_deref(),
            Some("I'm actually 43, and I've just started learning the ukulele")
        );
        assert_eq!(
            with_the_rest_kept(
                "Ich spiele Cello; ich wohne in Köln",
                "Ich bin nach Freiburg gezogen",
                &answers("in Köln", "in Freiburg")
            )
            .as_deref(),
            Some("Ich spiele Cello; Ich bin nach Freiburg gezogen")
        );
        for (memory, answered) in [
            // One clause.
            (
                "I live in Madrid, near the Retiro",
                answers("Madrid", "Valencia"),
            ),
            // Nothing dropped, or dropped words the memory does not hold.
            (ukulele, answers("34", "34")),
            (ukulele, answers("thirty-four", "forty-three")),
            // Both clauses hold a dropped word.
            (ukulele, answers("34 and the ukulele", "43")),
            // What is left says nothing.
            ("I'm 34; and so on", answers("34", "43")),
        ] {
            assert_eq!(
                with_the_rest_kept(memory, "I'm actually 43", &answered),
                None,
                "{memory:?} {answered:?}"
            );
        }
    }

    /// A closer look outdates a memory only when the second look says it is replaced and
    /// the answer to the memory's question drops part of what it was; the question is asked
    /// only after the second look's yes, with its own fixed instructions and examples.
    #[tokio::test]
    async fn a_closer_look_needs_the_second_look_and_a_changed_answer() {
        let (yes, no) = (YES, NO);
        let cases = [
            (vec![yes, no, MOVED], true),
            (vec![yes, no, STAYS], false),
            (vec![yes, yes], false),
            (vec![no], false),
        ];
        check_look(Look::Superseded, &cases).await;
    }

    /// Two memories a second look called replaced are told apart by their questions:
    /// the one whose answer drops part of what it was, when the other's does not. Both
    /// questions are asked, the first memory's first, each after the fixed instructions.
    #[tokio::test]
    async fn the_memorys_question_tells_two_replaced_memories_apart() {
        let cases = [
            ([MOVED, STAYS], Apart::First),
            ([STAYS, MOVED], Apart::Second),
            ([MOVED, MOVED], Apart::Neither),
            ([STAYS, STAYS], Apart::Neither),
        ];
        for (replies, expected) in cases {
            let llm = ScriptedLlm::new(replies.to_vec());
            let told = apart(&llm, "Lives in Hull", "Works at the docks", "Moved to York")
                .await
                .unwrap();
            assert_eq!(told.value, expected, "{replies:?}");
            let requests = llm.requests();
            assert_eq!(requests.len(), 2);
            for (request, memory) in requests.iter().zip(["Lives in Hull", "Works at the docks"]) {
                let (last, prefix) = request.messages.split_last().unwrap();
                assert_eq!(prefix, answers_prefix().as_slice());
                assert_eq!(
                    last.content,
                    format!("Memory: {memory}\nNew fact: Moved to York")
                );
            }
        }
    }

    const YES: &str = r#"{"answer": "yes"}"#;
    const NO: &str = r#"{"answer": "no"}"#;
    const MOVED: &str = r#"{"question": "Where do they live?", "before": "Hull", "now": "York"}"#;
    const STAYS: &str = r#"{"question": "Where do they live?", "before": "Hull", "now": "Hull"}"#;
    const JOB_CHANGES: &str =
        r#"{"question": "Where do they work?", "before": "at the docks", "now": "in York"}"#;
    const JOB_STAYS: &str =
        r#"{"question": "Where do they work?", "before": "at the docks", "now": "at the docks"}"#;

    /// Runs each case's scripted replies through [`replaces`] (`Look::Torn`: the look at a
    /// memory the model named) or [`outdates`] (`Look::Superseded`), on "Lives in Hull" and "Moved
    /// to York": the answer is the case's, every reply is asked for, and a third call is the
    /// memory's question, after its own fixed instructions and examples.
    async fn check_look(look: Look, cases: &[(Vec<&str>, bool)]) {
        for (replies, expected) in cases {
            let llm = ScriptedLlm::new(replies.clone());
            let (memory, fact) = ("Lives in Hull", "Moved to York");
            let looked = match look {
                Look::Torn => replaces(&llm, memory, fact).await,
                _ => outdates(&llm, memory, fact).await,
            }
            .unwrap();
            assert_eq!(looked.value, *expected, "{replies:?}");
            let requests = llm.requests();
            assert_eq!(requests.len(), replies.len(), "{replies:?}");
            if let Some(third) = requests.get(2) {
                let (last, prefix) = third.messages.split_last().unwrap();
                assert_eq!(prefix, answers_prefix().as_slice());
                assert_eq!(
                    last.content,
                    "Memory: Lives in Hull\nNew fact: Moved to York"
                );
                assert_eq!(prefix.len(), 1 + 2 * ANSWER_EXAMPLES.len());
            }
        }
    }
}
