//! A partner's coming and going: a partner after a single life, a break-up, a new partner,
//! a wedding. A small model keeps "Ich bin Single" beside a new girlfriend, or an old
//! boyfriend beside a new one, about as often as not; these rules tell the plain cases
//! without it. Words are matched whole, lowercase and without diacritics, in English,
//! French, German, Italian, Spanish, Portuguese and Dutch.

use super::topics::{any, of_the_speaker, NOT};

mod break_ups;
mod couples;
mod new_partners;
#[cfg(test)]
mod tests;
mod weddings;

use break_ups::{no_longer_with, over_with, said_by, BROKE_UP, BROKE_UP_BEFORE, LEFT};
use couples::WITH;
pub(super) use couples::{coupled, COUPLE, TOGETHER};
pub(crate) use new_partners::makes_a_friend;
use new_partners::{makes, DATING, ENGAGED, NEW};
use weddings::{married_at, AHEAD, BEFORE_WEDDING, WED};

/// Words that say a person has no partner.
const SINGLE: &[&str] = &[
    "single",
    "celibataire",
    "ledig",
    "soltero",
    "soltera",
    "solteiro",
    "solteira",
    "celibe",
    "nubile",
    "vrijgezel",
    "alleenstaand",
];

/// A partner, in the words a person uses of their own.
pub(super) const PARTNER_OF_ONES_OWN: &[&str] = &[
    "boyfriend",
    "girlfriend",
    "partner",
    "wife",
    "husband",
    "fiance",
    "fiancee",
    "copain",
    "copine",
    "mari",
    "femme",
    "compagnon",
    "compagne",
    "fiance",
    "fiancee",
    "freund",
    "freundin",
    "partnerin",
    "frau",
    "mann",
    "verlobte",
    "verlobter",
    "fidanzato",
    "fidanzata",
    "ragazzo",
    "ragazza",
    "moglie",
    "marito",
    "compagno",
    "compagna",
    "novio",
    "novia",
    "pareja",
    "esposa",
    "esposo",
    "marido",
    "namorado",
    "namorada",
    "noivo",
    "noiva",
    "vriend",
    "vriendin",
    "vriendje",
    "vriendinnetje",
    "man",
    "vrouw",
    "verloofde",
];

/// Partner words that also mean a man or a woman: a partner only after "my" ("ma femme",
/// "meine Frau", "mijn man"; "j'ai une femme de ménage" is no wife).
const MAN_OR_WOMAN: &[&str] = &["femme", "frau", "mann", "man", "vrouw"];

/// First-person possessives: what makes a partner the speaker's ("my girlfriend").
const MY: &[&str] = &[
    "my", "mon", "ma", "mein", "meine", "meinen", "meiner", "mio", "mia", "mi", "meu", "minha",
    "mijn",
];

/// Verbs of having in the first person ("ich habe eine Freundin", "tengo novia").
const HAVE: &[&str] = &[
    "have", "ve", "got", "ai", "habe", "hab", "ho", "tengo", "tenho", "heb",
];

/// Words that may stand between "my" or "I have" and the partner: articles and "new".
const BEFORE_PARTNER: &[&str] = &[
    "a",
    "an",
    "new",
    "un",
    "une",
    "nouveau",
    "nouvel",
    "nouvelle",
    "ein",
    "eine",
    "einen",
    "neue",
    "neuen",
    "neuer",
    "neu",
    "un",
    "una",
    "uno",
    "nuovo",
    "nuova",
    "nuevo",
    "nueva",
    "um",
    "uma",
    "novo",
    "nova",
    "een",
    "nieuwe",
    "jetzt",
    "now",
    "nu",
    "agora",
    "ahora",
    "ora",
    "maintenant",
    // "Since", "recently", "finally": "ik heb sinds kort een vriendin", "Ich habe endlich
    // einen Freund"
    "recently",
    "finally",
    "since",
    "sinds",
    "kort",
    "eindelijk",
    "seit",
    "kurzem",
    "endlich",
    "depuis",
    "peu",
    "enfin",
    "finalmente",
];

/// Whether a new fact says its speaker has a partner now while the memory says they are
/// single: "Ich habe jetzt eine Freundin, sie heißt Lena" after "Ich bin Single"; or a
/// couple without a partner word ("Ik ben sinds kort samen met Eva", see [`coupled`]), or
/// dating. A memory that denies a partner is single too ("Ik heb geen vriend", see
/// [`no_partner`]). The
/// memory's single word and the fact's partner must both be said of the speaker, nothing
/// denied ("I'm not single", "my brother has a girlfriend" leave the memory to the model),
/// and no friend made ("Ik heb een nieuwe vriend gemaakt").
pub(crate) fn ends_single_life(memory: &str, fact: &str) -> bool {
    let (couple, memory_names, fact_names) = (coupled(fact), names(memory), names(fact));
    let (memory, fact) = (
        crate::text::folded_words(memory),
        crate::text::folded_words(fact),
    );
    let single = (!denies(&memory, &memory_names)
        && memory
            .iter()
            .enumerate()
            .any(|(i, w)| SINGLE.contains(&w.as_str()) && of_the_speaker(&memory, i)))
        || no_partner(&memory);
    let partnered = !own_partners(&fact).is_empty()
        || fact.iter().enumerate().any(|(i, w)| {
            (WED.contains(&w.as_str()) || DATING.contains(&w.as_str())) && of_the_speaker(&fact, i)
        });
    single
        && (partnered || couple)
        && !denies(&fact, &fact_names)
        && !any(&fact, SINGLE)
        && !makes(&fact)
}

/// Whether `words` deny something: a [`NOT`] word that is none of the text's `names`
/// ("Mijn nieuwe vriend Sem": Portuguese "sem" is "without").
fn denies(words: &[String], names: &[String]) -> bool {
    words
        .iter()
        .any(|w| NOT.contains(&w.as_str()) && !names.contains(w))
}

/// Words that may stand between a denied "I have" or "I am" and a partner: "Ik heb geen
/// vriend", "I'm not in a relationship", "Je n'ai pas de copain", "Ik zit niet in een
/// relatie".
const NO_PARTNER_BETWEEN: &[&str] = &["in", "de", "zit", "currently", "nu", "momenteel"];

/// Whether a memory says its speaker has no partner: a partner or a relationship denied
/// after "I have" or "I am" ("Ik heb geen vriend", "I don't have a girlfriend", "Ich habe
/// keinen Freund", "I'm not in a relationship", "No tengo novio"). "I don't have a
/// girlfriend's phone number" is none.
fn no_partner(memory: &[String]) -> bool {
    any(memory, NOT)
        && memory.iter().enumerate().any(|(i, w)| {
            let partner = (PARTNER_OF_ONES_OWN.contains(&w.as_str())
                && !MAN_OR_WOMAN.contains(&w.as_str()))
                || RELATIONSHIP.contains(&w.as_str());
            let before = memory[..i].iter().rposition(|b| {
                let b = b.as_str();
                !(BEFORE_PARTNER.contains(&b)
                    || NOT.contains(&b)
                    || NO_PARTNER_BETWEEN.contains(&b)
                    || b == "t")
            });
            partner
                && memory.get(i + 1).is_none_or(|n| n != "s")
                && before.is_some_and(|b| {
                    HAVE.contains(&memory[b].as_str())
                        || ["ik", "ich", "i", "m", "am", "je"].contains(&memory[b].as_str())
                })
        })
}

/// The index of each of the speaker's own partners in `words`: a partner word after "my"
/// or "I have" (articles, "new" and "now" may stand between; "heb ik", "habe ich" as well),
/// and which of those words stood between. "Femme", "Frau", "man" and the like count only
/// after "my".
fn own_partners(words: &[String]) -> Vec<(usize, &[String])> {
    words
        .iter()
        .enumerate()
        .filter_map(|(i, w)| {
            let start = before_partner(words, i)?;
            let before = words[start].as_str();
            let have = HAVE.contains(&before)
                || (["ik", "ich"].contains(&before)
                    && start > 0
                    && HAVE.contains(&words[start - 1].as_str()));
            let own = (PARTNER_OF_ONES_OWN.contains(&w.as_str())
                || RELATIONSHIP.contains(&w.as_str()))
                && (MY.contains(&before) || (have && !MAN_OR_WOMAN.contains(&w.as_str())));
            own.then(|| (i, &words[start + 1..i]))
        })
        .collect()
}

/// Words of a time that "since" may lead between "I have" and a partner: "Ik heb sinds de
/// zomer een vriend", "I've had a boyfriend since last May" reads the other way.
const SINCE_WHEN: &[&str] = &[
    "de",
    "het",
    "the",
    "der",
    "dem",
    "den",
    "le",
    "la",
    "l",
    "el",
    "il",
    "o",
    "last",
    "vorig",
    "vorige",
    "letzten",
    "letztem",
    "dernier",
    "derniere",
    "summer",
    "zomer",
    "sommer",
    "ete",
    "verano",
    "estate",
    "verao",
    "winter",
    "hiver",
    "invierno",
    "inverno",
    "spring",
    "lente",
    "fruhling",
    "printemps",
    "primavera",
    "autumn",
    "herfst",
    "herbst",
    "automne",
    "otono",
    "autunno",
    "outono",
    "year",
    "jaar",
    "jahr",
    "annee",
    "ano",
    "anno",
    "month",
    "maand",
    "monat",
    "mois",
    "mes",
    "mese",
    "week",
    "woche",
    "semaine",
    "semana",
    "settimana",
    "months",
    "maanden",
    "monaten",
    "years",
    "jaren",
    "jahren",
    "weeks",
    "weken",
    "wochen",
    "two",
    "twee",
    "zwei",
    "deux",
    "dos",
    "due",
    "dois",
    "three",
    "drie",
    "drei",
    "trois",
    "tres",
    "tre",
    "paar",
    "few",
];

/// The index of the word that says whose the partner at `at` is: the last before it that
/// is none of [`BEFORE_PARTNER`] ("my new", "I have a"), nor of a time that "since" leads
/// ("heb sinds de zomer een").
fn before_partner(words: &[String], at: usize) -> Option<usize> {
    let (mut start, mut since, mut when) = (at, false, false);
    while start > 0 {
        let b = words[start - 1].as_str();
        if BEFORE_PARTNER.contains(&b) || SINCE.contains(&b) {
            since |= SINCE.contains(&b);
        } else if SINCE_WHEN.contains(&b)
            || crate::retrieve::period::MONTHS.contains(&b)
            || crate::retrieve::period::OTHER_MONTHS.contains(&b)
            || b.chars().all(|c| c.is_ascii_digit())
        {
            when = true;
        } else {
            break;
        }
        start -= 1;
    }
    (start > 0 && (since || !when)).then(|| start - 1)
}

/// "Since", before a time ([`SINCE_WHEN`]).
const SINCE: &[&str] = &["since", "sinds", "seit", "depuis", "al", "schon", "already"];

/// The names a text gives ([`super::names`]) that are no partner word: "Mon copain
/// s'appelle Léo": "leo".
fn names(text: &str) -> Vec<String> {
    super::names(text)
        .into_iter()
        .filter(|w| !PARTNER_OF_ONES_OWN.contains(&w.as_str()))
        .collect()
}

/// Verbs that give a partner's name: "my boyfriend is Dan", "mijn vriend heet Daan", "ma
/// copine s'appelle Inès".
const NAMED: &[&str] = &[
    "is", "called", "named", "heet", "heisst", "appelle", "chiama", "llama", "chama",
];

/// Verbs of being between a name and "my" partner: "Dan is my boyfriend", "Daan is mijn
/// vriend", "Léo est mon copain".
const IS: &[&str] = &["is", "s", "ist", "est", "e", "es"];

/// The names a text gives its speaker's own partner, right beside the partner word: "my
/// boyfriend Dan", "mijn vriend heet Daan", "my boyfriend is called Dan", "Dan is my
/// boyfriend". ("Brunch with my boyfriend and his friend Dan" names no partner.) "My
/// boyfriend is Tim" names him only `with_is`: "my boyfriend is Italian" names no one.
fn partner_named(text: &str, with_is: bool) -> Vec<String> {
    let mut out = Vec::new();
    for clause in text.split([',', '.', ';', ':', '!', '?', '(', ')']) {
        let (names, words) = (names(clause), crate::text::folded_words(clause));
        // A capitalised word before "is my boyfriend" is a name, even one that is a
        // function word elsewhere ("Dan").
        let raw: Vec<&str> = clause
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        let capital = |j: usize| {
            raw.len() == words.len()
                && raw[j].chars().next().is_some_and(char::is_uppercase)
                && raw[j] != "I"
        };
        let name_at = |j: usize| words.get(j).filter(|w| names.contains(w));
        for (i, between) in own_partners(&words) {
            let start = i - between.len() - 1;
            let mut at = i + 1;
            while words.get(at).is_some_and(|w| {
                (NAMED.contains(&w.as_str()) && (with_is || w != "is")) || with_is && w == "s"
            }) {
                at += 1;
            }
            let found = name_at(at).or_else(|| {
                (start >= 2 && IS.contains(&words[start - 1].as_str()) && capital(start - 2))
                    .then(|| &words[start - 2])
            });
            out.extend(found.cloned());
        }
    }
    out
}

/// Words of a relationship: "I'm in a relationship with Tim", "Ik heb een relatie met Tim".
const RELATIONSHIP: &[&str] = &[
    "relationship",
    "relatie",
    "beziehung",
    "relation",
    "relazione",
    "relacion",
    "relacao",
];

/// Whether a memory says its owner has a partner now: their own partner ("My boyfriend
/// Declan is a chef", "Mijn vriend heet Bas"), their couple ("Ik ben samen met Eva"),
/// their relationship ("Ik heb een relatie met Tim") or their marriage ("I'm married to
/// Paul"), no "ex".
fn partnered(text: &str, memory: &[String], names: &[String]) -> bool {
    !memory.iter().any(|w| w == "ex")
        && (!own_partners(memory).is_empty()
            || coupled(text)
            || married_at(memory, names).any(|i| of_the_speaker(memory, i))
            || memory
                .iter()
                .enumerate()
                .any(|(i, w)| RELATIONSHIP.contains(&w.as_str()) && of_the_speaker(memory, i)))
}

/// Whether a new fact ends the relationship a memory tells of. Three ways:
/// - the relationship ended: a word of a break-up or a divorce said of the speaker ("Bas
///   en ik zijn uit elkaar", "Paul and I divorced last year", "I'm single again"), or
///   "I left" the partner the memory names ("J'ai quitté Léo"), after a memory of the
///   speaker's partner or marriage, or no longer with the partner ("Ya no estoy con
///   Javier", [`no_longer_with`]);
/// - a new partner: "my new boyfriend", "ik heb nu een nieuwe vriend, Joris", "I'm dating
///   Mia", a couple or a relationship with someone named ("Ik heb nu verkering met Lotte",
///   "Rob and I are together now", "Ik heb sinds mei een relatie met Pieter"), after a
///   memory of a partner the fact does not name; or the partner
///   named anew beside the partner word ("Dan is my boyfriend" after "My boyfriend is
///   Tim", see [`partner_named`]);
/// - a wedding: "we got married in April", "Emma and I tied the knot", after a memory of
///   a boyfriend, a girlfriend or an engagement (a wedding ahead, "we're getting married
///   next year", leaves it).
///
/// Nothing may be denied; a friend made ("een nieuwe vriend gemaakt") is no partner. A
/// small model keeps an old partner beside a break-up or a new one about as often as not.
pub(crate) fn ends_partnership(memory: &str, fact: &str) -> bool {
    let (memory_names, fact_names) = (names(memory), names(fact));
    let (memory_text, fact_text, couple) = (memory, fact, coupled(fact));
    let (memory, fact) = (
        crate::text::folded_words(memory),
        crate::text::folded_words(fact),
    );
    if makes(&fact) || denies(&memory, &memory_names) {
        return false;
    }
    if no_longer_with(fact_text, &memory_names) {
        return partnered(memory_text, &memory, &memory_names);
    }
    if denies(&fact, &fact_names) {
        return false;
    }
    let named_in_memory = fact_names.iter().any(|n| memory_names.contains(n));
    let over = over_with(fact_text, &memory_names);
    let broke_up = fact.iter().enumerate().any(|(i, w)| {
        let ended = BROKE_UP.contains(&w.as_str())
            || SINGLE.contains(&w.as_str())
            || BROKE_UP_BEFORE
                .iter()
                .any(|&(a, b)| w == a && fact.get(i + 1).is_some_and(|n| n == b));
        let left = LEFT.contains(&w.as_str()) && named_in_memory;
        (ended || left) && of_the_speaker(&fact, i) || ended && said_by(&fact, i, &memory_names)
    });
    let new_partner = !named_in_memory
        && (own_partners(&fact)
            .iter()
            .any(|(_, between)| any(between, NEW))
            || fact
                .iter()
                .enumerate()
                .any(|(i, w)| DATING.contains(&w.as_str()) && of_the_speaker(&fact, i))
            || (couple && !fact_names.is_empty())
            // "Ik ben verloofd met Pieter", "I got engaged to Sam".
            || fact.iter().enumerate().any(|(i, w)| {
                ENGAGED.contains(&w.as_str())
                    && of_the_speaker(&fact, i)
                    && fact[i + 1..]
                        .iter()
                        .take(3)
                        .any(|n| fact_names.contains(n))
            })
            // "Ik heb sinds mei een relatie met Pieter", "I'm in a relationship with Tom".
            || fact.iter().enumerate().any(|(i, w)| {
                RELATIONSHIP.contains(&w.as_str())
                    && (of_the_speaker(&fact, i) || own_partners(&fact).iter().any(|p| p.0 == i))
                    && fact.get(i + 1).is_some_and(|w| WITH.contains(&w.as_str()))
                    && fact.get(i + 2).is_some_and(|n| fact_names.contains(n))
            })
            || {
                // "Dan is my boyfriend" after "My boyfriend is Tim": both name the partner.
                let (then, now) = (
                    partner_named(memory_text, true),
                    partner_named(fact_text, false),
                );
                !then.is_empty() && !now.is_empty() && !now.iter().any(|n| then.contains(n))
            });
    let engaged = memory.iter().enumerate().any(|(i, w)| {
        ["engaged", "verlobt", "verloofd"].contains(&w.as_str()) && of_the_speaker(&memory, i)
    }) || own_partners(&memory)
        .iter()
        .any(|&(i, _)| BEFORE_WEDDING.contains(&memory[i].as_str()));
    let wedding = !any(&fact, AHEAD)
        && married_at(&fact, &fact_names).any(|i| of_the_speaker(&fact, i))
        && married_at(&memory, &memory_names).next().is_none()
        && engaged;
    (partnered(memory_text, &memory, &memory_names) && (broke_up || over || new_partner)) || wedding
}
