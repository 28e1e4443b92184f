//! A couple without a partner word: "Ik ben sinds kort samen met Eva", "Io e Marco siamo
//! una coppia".

use super::{denies, names};
use crate::infer::topics::{any, of_the_speaker};

/// Words that say the speaker is in a couple by themselves: "Ik heb verkering met Lotte",
/// "Estou namorando o Rui", "Namoro com a Ana", "Je suis en couple avec Hugo" (after
/// "en").
pub(in crate::infer) const COUPLE: &[&str] =
    &["verkering", "namorando", "namoro", "namoramos", "couple"];

/// Words of being together that say a couple only at the end of a clause, after a verb of
/// being: "Ik ben sinds kort samen met Eva", "Ich bin mit Lena zusammen", "Eva and I are
/// together now", "Stiamo insieme da maggio", "Estamos juntos". ("Ik ben samen met Eva
/// naar Parijs geweest", "We went to Rome together" are no couple.)
pub(in crate::infer) const TOGETHER: &[&str] = &[
    "samen", "zusammen", "together", "insieme", "juntos", "juntas",
];

/// Verbs of being, one of which must go before a [`TOGETHER`] word.
pub(super) const BE_TOGETHER: &[&str] = &[
    "ben", "zijn", "bin", "sind", "are", "re", "been", "stiamo", "sto", "estamos", "estoy", "somos",
];

/// Those of [`BE_TOGETHER`] that are the speaker's alone: "ik ben", "ich bin", "stiamo".
pub(super) const BE_FIRST: &[&str] = &["ben", "bin", "stiamo", "sto", "estamos", "estoy", "somos"];

/// Whether `words[at]` is a [`TOGETHER`] word after a verb of being of the speaker's
/// ([`BE_TOGETHER`]): "ik ben … samen", "Eva and I are together".
pub(super) fn together_at(words: &[String], at: usize) -> bool {
    TOGETHER.contains(&words[at].as_str())
        && words[..at].iter().enumerate().any(|(j, b)| {
            BE_TOGETHER.contains(&b.as_str())
                && (BE_FIRST.contains(&b.as_str()) || of_the_speaker(words, j))
        })
}

/// Verbs of being that "with" a partner may follow ([`coupled`]).
pub(super) const BE_WITH: &[&str] = &[
    "ben", "m", "am", "bin", "suis", "sono", "sto", "estoy", "estou",
];

/// First-person verbs of going out, which "with" a partner's name and a word of now make
/// a couple: "Ahora salgo con Andrés", "Agora saio com o Rui", "Adesso esco con Marco",
/// "Maintenant je sors avec Karim" ("je" before it). Without a word of now, or with more
/// after the name ("Esta noche salgo con Marta", "Ahora salgo con Marta a correr"), it is
/// an evening out.
pub(super) const GO_OUT: &[&str] = &["salgo", "saio", "esco", "sors"];

/// "With", before a partner's name.
pub(super) const WITH: &[&str] = &["met", "with", "mit", "avec", "con", "com"];

/// Words of now, which make "I'm with Koen" a couple rather than company.
pub(super) const NOW: &[&str] = &[
    "now",
    "nu",
    "jetzt",
    "maintenant",
    "ora",
    "adesso",
    "ahora",
    "agora",
];

/// Words that may follow a [`TOGETHER`] word at the end of a clause: "now", a time.
pub(super) const AFTER_TOGETHER: &[&str] = &[
    "now", "again", "since", "for", "nu", "sinds", "al", "jetzt", "seit", "ora", "da", "ahora",
    "desde",
];

/// Whether a text says its speaker is in a couple without a partner word ([`COUPLE`],
/// [`TOGETHER`]; "dating" counts where the caller asks for it). Nothing may be denied.
pub(in crate::infer) fn coupled(text: &str) -> bool {
    text.split([',', '.', ';', ':', '!', '?', '(', ')'])
        .any(|clause| {
            let words = crate::text::folded_words(clause);
            let names = names(clause);
            if denies(&words, &names) {
                return false;
            }
            words.iter().enumerate().any(|(i, w)| {
                let couple = COUPLE.contains(&w.as_str())
                    && (w != "couple" || i > 0 && words[i - 1] == "en")
                    && (w.starts_with("namoro") || of_the_speaker(&words, i));
                let together = together_at(&words, i) && {
                    // What follows is "with" and a name, then nothing but a time.
                    let mut rest = &words[i + 1..];
                    if rest
                        .first()
                        .is_some_and(|w| ["met", "with", "con"].contains(&w.as_str()))
                        && rest.get(1).is_some_and(|n| names.contains(n))
                    {
                        rest = &rest[2..];
                    }
                    rest.first()
                        .is_none_or(|w| AFTER_TOGETHER.contains(&w.as_str()))
                };
                // "Ik ben nu met Koen", "I'm with Koen now": a verb of being or of going
                // out, "with" a name that ends the clause, and a word of now.
                let going_out = GO_OUT.contains(&w.as_str());
                let with_now = (BE_WITH.contains(&w.as_str()) || going_out)
                    && (BE_FIRST.contains(&w.as_str())
                        || going_out && w != "sors"
                        || of_the_speaker(&words, i))
                    && any(&words, NOW)
                    && words[i + 1..]
                        .iter()
                        .position(|w| WITH.contains(&w.as_str()))
                        .is_some_and(|at| {
                            let at = i + 1 + at;
                            words[i + 1..at].iter().all(|w| NOW.contains(&w.as_str()))
                                && words.get(at + 1).is_some_and(|n| names.contains(n))
                                && words[at + 2..].iter().all(|w| NOW.contains(&w.as_str()))
                        });
                // "Joris en ik zijn een stel", "Mia and I are a couple": a plural verb
                // of being, an article, a word of a couple, said by "I" or "we".
                let a_couple = COUPLE_NOUN.contains(&w.as_str())
                    && i >= 2
                    && ["een", "a", "ein", "una", "um"].contains(&words[i - 1].as_str())
                    && BE_A_COUPLE.contains(&words[i - 2].as_str())
                    && any(&words[..i - 2], WE_OR_I);
                couple || together || with_now || a_couple
            })
        })
}

/// Words of a couple after an article: "een stel", "a couple", "ein Paar", "una coppia",
/// "una pareja", "um casal".
pub(super) const COUPLE_NOUN: &[&str] = &["stel", "couple", "paar", "coppia", "pareja", "casal"];

/// Plural verbs of being before a [`COUPLE_NOUN`]: "zijn", "are", "sind", "siamo",
/// "somos", "sommes".
pub(super) const BE_A_COUPLE: &[&str] = &["zijn", "are", "re", "sind", "siamo", "somos", "sommes"];

/// "I" or "we", one of which says a couple is the speaker's: "Mia and I", "wir".
pub(super) const WE_OR_I: &[&str] = &[
    "i", "we", "ik", "wij", "ich", "wir", "io", "noi", "yo", "nosotros", "eu", "nos", "moi", "nous",
];
