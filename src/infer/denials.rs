//! A fact that takes back what a memory says: "I'm not lactose intolerant after all"
//! after "I'm lactose intolerant", "Ich spiele nicht mehr Tennis" after "Ich spiele
//! Tennis". A small model keeps the two side by side, the denial being new text.

use super::topics::{any, NOT, NO_LONGER, SOMEONE_ELSE};

/// Words that mark a fact as a correction of what was said before ("after all" as well):
/// "actually", "I was wrong", "it turns out", and their kin in French, German, Italian,
/// Spanish, Portuguese and Dutch, folded.
const CORRECTION: &[&str] = &[
    "actually",
    "wrong",
    "mistaken",
    "turns",
    "turned",
    "fait",
    "finalement",
    "trompe",
    "eigentlich",
    "doch",
    "falsch",
    "geirrt",
    "realta",
    "sbagliato",
    "sbagliata",
    "dopotutto",
    "realidad",
    "equivocado",
    "equivocada",
    "resulta",
    "afinal",
    "enganei",
    "enganado",
    "enganada",
    "eigenlijk",
    "vergist",
    "toch",
];

/// Whether `fact` takes back what `memory` says: a piece of the fact ([`pieces`]) denies
/// ([`NOT`]) what the memory says without a denial, the fact says it is no longer so
/// ([`NO_LONGER`]) or corrects ([`CORRECTION`]), and the piece's content terms are all
/// the memory's: two or more of them, or all the memory has. Not said of someone the
/// memory does not name ("Actually she isn't lactose intolerant"), and not of a
/// part of what the memory says ("I don't play tennis on Sundays anymore" leaves "I play
/// tennis").
pub(crate) fn takes_back(memory: &str, fact: &str) -> bool {
    let memory_words = crate::text::folded_words(memory);
    let fact_words = crate::text::folded_words(fact);
    let after_all = fact_words
        .windows(2)
        .any(|w| w[0] == "after" && w[1] == "all");
    let corrects = after_all || any(&fact_words, CORRECTION);
    if any(&memory_words, NOT) || !(corrects || any(&fact_words, NO_LONGER)) {
        return false;
    }
    let memory_terms = crate::text::content_terms(memory);
    pieces(fact).any(|piece| {
        let words = crate::text::folded_words(piece);
        let others_named = words
            .iter()
            .filter(|w| SOMEONE_ELSE.contains(&w.as_str()))
            .all(|w| memory_words.contains(w));
        let said: Vec<&str> = words
            .iter()
            .map(String::as_str)
            .filter(|w| ![NOT, NO_LONGER, CORRECTION].iter().any(|of| of.contains(w)))
            .collect();
        let terms = crate::text::content_terms(&said.join(" "));
        any(&words, NOT)
            && others_named
            && !terms.is_empty()
            && terms
                .iter()
                .all(|t| memory_terms.iter().any(|m| super::extract::alike(t, m)))
            && (terms.len() >= 2 || memory_terms.len() == terms.len())
    })
}

/// The clauses of a fact: cut at punctuation, and before every conjunction and subject
/// ([`super::looks::at_conjunctions`]): a piece that is no clause denies nothing.
fn pieces(fact: &str) -> impl Iterator<Item = &str> {
    fact.split([',', '.', ';', ':', '!', '?'])
        .flat_map(move |part| {
            let start = part.as_ptr() as usize - fact.as_ptr() as usize;
            super::looks::at_conjunctions(fact, start..start + part.len(), false)
        })
        .map(move |r| &fact[r])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fact_that_denies_the_memory_takes_it_back() {
        let taken_back = [
            (
                "I'm lactose intolerant",
                "I was wrong, the test came back and I'm not lactose intolerant after all",
            ),
            ("Ich spiele Tennis", "Ich spiele nicht mehr Tennis"),
            ("I'm allergic to cats", "I'm not allergic to cats after all"),
            ("I drink", "I don't drink anymore"),
            ("Je joue du piano", "En fait, je ne joue pas du piano"),
            ("Tengo un perro", "Ya no tengo perro"),
            (
                "Voy al gimnasio tres veces por semana",
                "Ya no voy al gimnasio",
            ),
            ("I work on Fridays", "Actually I don't work on Fridays"),
        ];
        for (memory, fact) in taken_back {
            assert!(takes_back(memory, fact), "{memory} / {fact}");
        }
        let kept = [
            // No denial, or the memory denies already.
            (
                "I'm lactose intolerant",
                "Actually I'm very lactose intolerant",
            ),
            ("I don't eat meat", "I don't eat fish anymore"),
            // Neither "no longer" nor a correction.
            ("I'm lactose intolerant", "I'm not lactose intolerant"),
            // Someone else, or a part of what the memory says.
            (
                "I'm lactose intolerant",
                "Actually my sister isn't lactose intolerant",
            ),
            (
                "I'm lactose intolerant",
                "Actually she isn't lactose intolerant",
            ),
            ("I play tennis", "I don't play tennis on Sundays anymore"),
            // One term of a memory that says more.
            ("I drink coffee every morning", "I don't drink anymore"),
        ];
        for (memory, fact) in kept {
            assert!(!takes_back(memory, fact), "{memory} / {fact}");
        }
    }
}
