//! A new partner ("my new girlfriend", dating, engaged to someone), and a friend made, who
//! is none ("Ik heb een nieuwe vriend leren kennen").

use super::{before_partner, names, partnered, MY};

/// Whether folded `words` hold a verb of making ([`MADE`]) that is not a break-up's
/// ("Schluss gemacht").
pub(super) fn makes(words: &[String]) -> bool {
    words
        .iter()
        .enumerate()
        .any(|(i, w)| MADE.contains(&w.as_str()) && (i == 0 || words[i - 1] != "schluss"))
}

/// Words of being engaged, said of the speaker before the one they are engaged to: "Ik
/// ben verloofd met Pieter", "I got engaged to Sam", "Sono fidanzata con Luca".
pub(super) const ENGAGED: &[&str] = &[
    "engaged",
    "verloofd",
    "verlobt",
    "fiance",
    "fiancee",
    "fidanzato",
    "fidanzata",
    "comprometido",
    "comprometida",
    "noivei",
];

/// "New", before a partner: "my new girlfriend", "een nieuwe vriend".
pub(super) const NEW: &[&str] = &[
    "new", "nouveau", "nouvel", "nouvelle", "neue", "neuen", "neuer", "nuovo", "nuova", "nuevo",
    "nueva", "novo", "nova", "nieuwe",
];

/// Dating someone: "I'm dating Mia". ("Je sors avec Nathan" may be a night out.)
pub(super) const DATING: &[&str] = &["dating"];

/// Verbs that make a friend of a "vriend" or a "Freund" ("een nieuwe vriend gemaakt",
/// "I made a new friend", "een nieuwe vriend leren kennen"): friendship, not a partner.
pub(super) const MADE: &[&str] = &[
    "made", "make", "gemaakt", "maken", "fait", "hecho", "fatto", "feito", "leren", "gemacht",
];

/// Friends, in the seven languages: "vriend" and "Freund" are friends or partners.
pub(super) const FRIEND: &[&str] = &[
    "friend", "friends", "ami", "amie", "amis", "freund", "freundin", "freunde", "amico", "amica",
    "amici", "amigo", "amiga", "amigos", "vriend", "vriendin", "vrienden",
];

/// Whether a new fact tells of a friend made ("Op de tennisclub heb ik een nieuwe vriend
/// leren kennen, Thijs", "I made a new friend at yoga") while the memory tells of the
/// speaker's partner: a friend ends no partner, and is kept beside whatever the model
/// says (a small model put the new "vriend" in the girlfriend's place). A friend called
/// "my new boyfriend" is a partner, and left alone here.
pub(crate) fn makes_a_friend(memory: &str, fact: &str) -> bool {
    let memory_names = names(memory);
    let (memory_words, fact_words) = (
        crate::text::folded_words(memory),
        crate::text::folded_words(fact),
    );
    let friend = fact_words.iter().enumerate().any(|(i, w)| {
        FRIEND.contains(&w.as_str())
            && before_partner(&fact_words, i).is_none_or(|b| !MY.contains(&fact_words[b].as_str()))
    });
    makes(&fact_words) && friend && partnered(memory, &memory_words, &memory_names)
}
