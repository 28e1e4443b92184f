//! A relationship ended: a break-up said by the speaker or by the partner ("We broke up",
//! "Bas heeft het uitgemaakt"), "it's over with" the partner, no longer with them.

use super::couples::{together_at, BE_WITH, WITH};
use super::names;
use crate::infer::topics::{any, NOT, NO_LONGER};

/// Words that say a relationship ended, in any person: "Paul and I divorced", "wir haben
/// uns getrennt", "ci siamo lasciati". [`BROKE_UP_BEFORE`] holds those that need a word
/// after them.
pub(super) const BROKE_UP: &[&str] = &[
    "breakup",
    "separated",
    "divorced",
    "separes",
    "separee",
    "separe",
    "rompu",
    "divorce",
    "divorcee",
    "getrennt",
    "geschieden",
    "separado",
    "separada",
    "separados",
    "divorciado",
    "divorciada",
    "divorciados",
    "rompimos",
    "lasciati",
    "separati",
    "separato",
    "separata",
    "divorziato",
    "divorziata",
    "divorziati",
    "separei",
    "separamos",
    "divorciei",
    "gescheiden",
    "uitgemaakt",
    "verbroken",
];

/// Break-ups of two words: "we broke up" ("I broke my leg" is none), "split up",
/// "Schluss gemacht", "uit elkaar", "lo dejamos".
pub(super) const BROKE_UP_BEFORE: &[(&str, &str)] = &[
    ("broke", "up"),
    ("split", "up"),
    ("schluss", "gemacht"),
    ("uit", "elkaar"),
    ("lo", "dejamos"),
];

/// Verbs of leaving someone, which end a relationship only when the memory names the one
/// left ("J'ai quitté Léo" after "Mon copain s'appelle Léo"; "I left my job" ends none).
pub(super) const LEFT: &[&str] = &[
    "left",
    "quitte",
    "verlassen",
    "lasciato",
    "lasciata",
    "deje",
    "deixei",
    "verlaten",
];

/// Words of an end, said with a verb of being ([`BE_OVER`]): "it's over", "het is uit",
/// "c'est fini", "es ist aus", "è finita", "se acabó"; "acabou" needs none.
pub(super) const OVER: &[&str] = &[
    "over",
    "uit",
    "fini",
    "finie",
    "termine",
    "aus",
    "vorbei",
    "finita",
    "finito",
    "acabo",
    "acabado",
    "terminado",
    "acabou",
    "terminou",
];

pub(super) const BE_OVER: &[&str] = &[
    "is", "s", "est", "ist", "e", "es", "se", "esta", "era", "foi",
];

/// Whether a clause of `text` says it is over with a partner `names` holds: "Het is uit met
/// Bram", "It's over with Tim", "C'est fini avec Léo", "Mit Jonas ist es aus", or with
/// the two of them named in the clause before ([`the_two_of_us`]: "Hugo et moi, c'est
/// fini"). "Over" and "uit" need "it" or "het" as well ("Bram is uit Leiden vertrokken"
/// ends nothing).
pub(super) fn over_with(text: &str, names: &[String]) -> bool {
    let clauses: Vec<&str> = text.split([',', '.', ';', ':', '!', '?']).collect();
    let named_in = |clause: &str| self::names(clause).iter().any(|n| names.contains(n));
    clauses.iter().enumerate().any(|(c, clause)| {
        let before = c.checked_sub(1).map(|b| clauses[b]);
        let named = named_in(clause) || before.is_some_and(|b| the_two_of_us(b) && named_in(b));
        let words = crate::text::folded_words(clause);
        named
            && words.iter().enumerate().any(|(i, w)| {
                let be = |back: usize| i >= back && BE_OVER.contains(&words[i - back].as_str());
                let said = |subject: &[&str]| {
                    (i >= 2 && subject.contains(&words[i - 2].as_str()))
                        || (i >= 3 && subject.contains(&words[i - 3].as_str()))
                };
                OVER.contains(&w.as_str())
                    && (be(1) || be(2) || ["acabou", "terminou"].contains(&w.as_str()))
                    && (w != "over" || said(&["it", "we"]))
                    && (w != "uit" || said(&["het"]))
            })
    })
}

/// The speaker, as the second of a pair: "me", "moi", "ik", "ich", "io", "yo", "eu".
const ME: &[&str] = &["i", "me", "moi", "ik", "ich", "io", "yo", "eu", "mij"];

/// "And" between the two of a pair.
const AND: &[&str] = &["and", "et", "und", "e", "y", "en"];

/// Whether a clause is nothing but the speaker and one other, joined by "and": "Hugo et
/// moi", "Tom and me", "Eva en ik".
fn the_two_of_us(clause: &str) -> bool {
    let words = crate::text::folded_words(clause);
    matches!(words.as_slice(),
        [a, and, b] if AND.contains(&and.as_str())
            && (ME.contains(&a.as_str()) != ME.contains(&b.as_str())))
}

/// Words that may stand between a partner's name and a word of a break-up: "Bas heeft
/// het uitgemaakt", "Lena hat Schluss gemacht", "Léo a rompu".
pub(super) const BEFORE_BREAK_UP: &[&str] = &[
    "has",
    "just",
    "heeft",
    "het",
    "hat",
    "a",
    "ha",
    "es",
    "it",
    "finally",
    "eindelijk",
];

/// Whether `words[at]`, a word of a break-up, is said by one of `names`: the name right
/// before it, or before [`BEFORE_BREAK_UP`] words only ("Tom broke up with me", "Bas heeft
/// het uitgemaakt").
pub(super) fn said_by(words: &[String], at: usize, names: &[String]) -> bool {
    words[..at]
        .iter()
        .rev()
        .find(|w| !BEFORE_BREAK_UP.contains(&w.as_str()))
        .is_some_and(|w| names.contains(w))
}

/// Articles that may stand between "with" and a name: "com o Tiago".
pub(super) const ARTICLES: &[&str] = &["o", "a", "el", "la", "le", "il"];

/// Whether a clause of `text` says its speaker is no longer with a partner: no longer
/// ([`NOT`] and [`NO_LONGER`]) being ([`BE_WITH`]) "with" one of `names` (those of the
/// memory), or no longer together ([`together_at`]): "Ya no estoy con Javier", "I'm not
/// with Tom anymore", "Je ne suis plus avec Léo", "Ich bin nicht mehr mit Jonas
/// zusammen", "Já não estou com o Tiago", "We zijn niet meer samen". ("Ya no trabajo con
/// Pedro" names no partner of the memory's; "I don't work with Tom anymore" says no
/// being with him.)
pub(super) fn no_longer_with(text: &str, names: &[String]) -> bool {
    text.split([',', '.', ';', ':', '!', '?']).any(|clause| {
        let words = crate::text::folded_words(clause);
        // "Já não" as well as "ya no", "no longer", "nicht mehr".
        let stopped = any(&words, NOT) && any(&words, NO_LONGER)
            || words.windows(2).any(|w| w[0] == "ja" && w[1] == "nao");
        let with_partner = words.iter().enumerate().any(|(i, w)| {
            let at = i
                + 1
                + usize::from(
                    words
                        .get(i + 1)
                        .is_some_and(|a| ARTICLES.contains(&a.as_str())),
                );
            WITH.contains(&w.as_str())
                && words.get(at).is_some_and(|n| names.contains(n))
                && any(&words[..i], BE_WITH)
        });
        let together = (0..words.len()).any(|i| together_at(&words, i));
        stopped && (with_partner || together)
    })
}
