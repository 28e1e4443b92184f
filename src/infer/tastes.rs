//! A taste reversed: "I can't stand jazz" and later "I've come to love jazz", "Odio il
//! caffè" and "Ormai bevo tre caffè al giorno". The new fact and the old memory name the
//! same thing with opposite feelings; a small model keeps both, as a second liking beside
//! the first, about as often as not.
//!
//! A text is read clause by clause (commas, full stops and "but" cut it): a clause of the
//! speaker's liking, loving, eating or drinking something is for it; one of hating it, or
//! of not liking, eating or drinking it, is against. Words are matched whole, lowercase
//! and without diacritics, in English, French, German, Italian, Spanish, Portuguese and
//! Dutch.

use super::topics::{any, of_the_speaker, EAT, LIKE, NOT};

/// Verbs and words of liking beyond [`LIKE`]: "enjoy", "gern", "piace", "graag". Not
/// "fan": a fan of one team is seldom a fan of another.
const LIKE_MORE: &[&str] = &[
    "enjoy",
    "loving",
    "kiffe",
    "gern",
    "gerne",
    "piace",
    "piacciono",
    "encantan",
    "gustan",
    "gosto",
    "graag",
    "dol",
];

/// Verbs of hating, in the first person: "hate", "déteste", "hasse", "odio", "haat".
const HATE: &[&str] = &[
    "hate",
    "dislike",
    "detest",
    "loathe",
    "deteste",
    "hais",
    "hasse",
    "verabscheue",
    "odio",
    "detesto",
    "odeio",
    "haat",
    "vies",
];

/// Verbs that are hating when denied: "I can't stand", "je ne supporte pas", "no soporto".
const STAND: &[&str] = &[
    "stand",
    "supporte",
    "ausstehen",
    "soporto",
    "sopporto",
    "suporto",
    "uitstaan",
];

/// Giving something up: "I quit sugar", "I've stopped drinking coffee", "j'ai arrêté le
/// café", "ho smesso di fumare". Against what follows.
const STOPPED: &[&str] = &[
    "quit",
    "stopped",
    "gave",
    "arrete",
    "arretee",
    "aufgehort",
    "smesso",
    "smessa",
    "deje",
    "parei",
    "gestopt",
];

/// Drinking, in the first person or the infinitive.
const DRINK: &[&str] = &[
    "drink", "drinking", "bois", "boire", "trinke", "trinken", "bevo", "bere", "bebo", "beber",
    "drinken",
];

/// Words that qualify a taste to a time or an occasion: "not coffee in the evening" beside
/// "I love coffee" is no reversal.
const QUALIFIED: &[&str] = &[
    "evening",
    "evenings",
    "night",
    "nights",
    "after",
    "before",
    "when",
    "except",
    "only",
    "sometimes",
    "soir",
    "nuit",
    "apres",
    "avant",
    "quand",
    "sauf",
    "seulement",
    "abend",
    "abends",
    "nacht",
    "nachts",
    "nach",
    "vor",
    "wenn",
    "ausser",
    "nur",
    "sera",
    "notte",
    "dopo",
    "prima",
    "quando",
    "tranne",
    "solo",
    "noche",
    "despues",
    "antes",
    "cuando",
    "excepto",
    "noite",
    "depois",
    "exceto",
    "avond",
    "avonds",
    "nacht",
    "na",
    "voor",
    "wanneer",
    "behalve",
    "alleen",
    "rain",
    "cold",
    "heat",
    "summer",
    "winter",
    "pluie",
    "froid",
    "chaleur",
    "ete",
    "hiver",
    "regen",
    "kalte",
    "hitze",
    "sommer",
    "lluvia",
    "frio",
    "calor",
    "verano",
    "invierno",
    "pioggia",
    "freddo",
    "caldo",
    "estate",
    "inverno",
    "chuva",
    "verao",
    "kou",
    "zomer",
];

/// Verbs in a form that is the speaker's alone, which Italian, Spanish and Portuguese say
/// without a pronoun: "Odio la cebolla", "Adoro il pesce", "Bevo solo tè".
const FIRST_PERSON: &[&str] = &[
    "odio", "detesto", "odeio", "adoro", "amo", "bevo", "bebo", "mangio", "como", "gosto",
    "soporto", "sopporto", "suporto",
];

/// Pronouns that follow their verb in German and Dutch: "Inzwischen trinke ich Kaffee".
const AFTER_VERB: &[&str] = &["ich", "wir", "ik", "wij", "we"];

/// Denials, with the "t" of "can't" and "don't".
const DENIED: &[&str] = &["t", "cannot", "cant"];

/// Words of the time of a change, which name nothing: "I don't drink wine anymore",
/// "Ahora me encanta la cebolla".
const CHANGE: &[&str] = &[
    "anymore",
    "now",
    "nowadays",
    "longer",
    "again",
    "finally",
    "these",
    "days",
    "maintenant",
    "desormais",
    "finalement",
    "jetzt",
    "inzwischen",
    "mittlerweile",
    "endlich",
    "ormai",
    "adesso",
    "ora",
    "finalmente",
    "ahora",
    "agora",
    "nu",
    "tegenwoordig",
    "eindelijk",
    "weer",
    "wieder",
];

/// Words that cut a text into clauses, besides punctuation: "but".
const BUT: &[&str] = &["but", "mais", "aber", "pero", "ma", "mas", "maar"];

/// How a clause feels about what it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Feeling {
    For,
    Against,
}

/// Each clause's feeling of the speaker's, the things it names (its content words that
/// are none of the feeling's words), and whether it is qualified ([`QUALIFIED`]).
fn feelings(text: &str) -> Vec<(Feeling, Vec<String>, bool)> {
    let mut out = Vec::new();
    for sentence in text.split([',', '.', ';', ':', '!', '?']) {
        let words = crate::text::folded_words(sentence);
        for clause in words.split(|w| BUT.contains(&w.as_str())) {
            if let Some(feeling) = feeling(clause) {
                let named: Vec<String> = crate::text::content_words(&clause.join(" "))
                    .into_iter()
                    .filter(|w| !is_feeling_word(w))
                    .collect();
                out.push((feeling, named, any(clause, QUALIFIED)));
            }
        }
    }
    out
}

fn is_feeling_word(w: &str) -> bool {
    [
        LIKE, LIKE_MORE, HATE, STAND, STOPPED, EAT, DRINK, NOT, DENIED, CHANGE,
    ]
    .iter()
    .any(|of| of.contains(&w))
}

/// The feeling of one clause of the speaker's, if it says one: a verb of hating or giving
/// up (not denied), of standing (denied), or of liking, eating or drinking (against when
/// denied).
/// The verb is the speaker's: a first-person word before it, "me"/"mi" right before
/// ("me encanta", "mi piace"), a pronoun right after ("trinke ich"), or a form that is
/// the speaker's alone ("odio").
fn feeling(clause: &[String]) -> Option<Feeling> {
    let denied = any(clause, NOT) || any(clause, DENIED);
    let of_speaker = |i: usize| {
        of_the_speaker(clause, i)
            || FIRST_PERSON.contains(&clause[i].as_str())
            || clause
                .get(i + 1)
                .is_some_and(|w| AFTER_VERB.contains(&w.as_str()))
            || clause[..i]
                .iter()
                .rev()
                .find(|w| !NOT.contains(&w.as_str()))
                .is_some_and(|w| w == "me" || w == "mi")
    };
    let at = |of: &[&str]| {
        clause
            .iter()
            .enumerate()
            .find(|(i, w)| of.contains(&w.as_str()) && of_speaker(*i))
            .map(|(i, _)| i)
    };
    if at(HATE).is_some() {
        return (!denied).then_some(Feeling::Against);
    }
    if at(STAND).is_some() {
        return denied.then_some(Feeling::Against);
    }
    if at(STOPPED).is_some() {
        return (!denied).then_some(Feeling::Against);
    }
    let likes = at(LIKE).or_else(|| at(LIKE_MORE));
    let takes = at(EAT).or_else(|| at(DRINK));
    match (likes.or(takes), denied) {
        (Some(_), true) => Some(Feeling::Against),
        (Some(_), false) => Some(Feeling::For),
        (None, _) => None,
    }
}

/// Whether a new fact reverses a taste the memory states: a clause of each names the same
/// thing, one for it and the other against ("I've come to love jazz" after "I can't stand
/// jazz"; "Ik vind thee tegenwoordig echt vies" after "Ik drink graag thee"). One clause
/// names all the other names: "Je déteste les fromages bleus" reverses no "J'adore les
/// fromages de chèvre". A fact that qualifies its taste to a time or an occasion ("Ich
/// mag keinen Kaffee am Abend") leaves the memory, as do someone else's tastes ("My
/// husband hates cinema").
pub(crate) fn reverses_taste(memory: &str, fact: &str) -> bool {
    let before = feelings(memory);
    let within = |a: &[String], b: &[String]| !a.is_empty() && a.iter().all(|w| b.contains(w));
    feelings(fact).iter().any(|(now, named, qualified)| {
        !qualified
            && before.iter().any(|(then, named_then, qualified_then)| {
                then != now
                    && !qualified_then
                    && (within(named, named_then) || within(named_then, named))
            })
    })
}

/// Whether a new fact tells of another taste than the memory's, which both can be true
/// beside: each of the fact's feelings names nothing the memory's feelings name ("Je
/// déteste les huîtres" beside "J'adore le fromage"), or is qualified to a time or an
/// occasion ("Ich mag keinen Kaffee am Abend" beside "Ich liebe Kaffee"). Both must say a
/// feeling of the speaker's, and the fact no word of a change ("I love Thai food now" may
/// end "I love Italian food"). A small model puts one taste in another's place.
pub(crate) fn another_taste(memory: &str, fact: &str) -> bool {
    let (before, now) = (feelings(memory), feelings(fact));
    !before.is_empty()
        && !now.is_empty()
        && !any(&crate::text::folded_words(fact), CHANGE)
        && now.iter().all(|(_, named, qualified)| {
            *qualified
                || before
                    .iter()
                    .all(|(_, then, _)| !named.iter().any(|w| then.contains(w)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_taste_or_a_qualified_one_is_no_reversal() {
        for (memory, fact) in [
            ("J'adore le fromage", "Je déteste les huîtres"),
            ("I love jazz", "I also love classical music"),
            ("I love jazz", "I love classical music too"),
            (
                "Ich liebe Kaffee",
                "Ich mag keinen Kaffee am Abend, da schlafe ich schlecht",
            ),
            ("I love running", "I hate running in the rain"),
            ("Odio la cebolla", "Me encanta el ajo"),
        ] {
            assert!(another_taste(memory, fact), "{memory} / {fact}");
            assert!(!reverses_taste(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // The same thing, or no feeling in one of the two.
            ("I love jazz", "I love jazz more than ever"),
            // A kind of a thing liked and another kind hated.
            (
                "J'adore les fromages de chèvre",
                "Je déteste les fromages bleus",
            ),
            ("I can't stand jazz", "I've come to love jazz"),
            ("J'adore le fromage", "Mon mari déteste les huîtres"),
            ("I work as a nurse", "I love classical music"),
            // A change, or a fan's team.
            ("I love Italian food", "I love Thai food now"),
            ("I'm a huge Celtics fan", "I'm a Knicks fan now"),
            ("I'm a huge Celtics fan", "I'm a Knicks fan"),
        ] {
            assert!(!another_taste(memory, fact), "{memory} / {fact}");
        }
    }

    #[test]
    fn a_taste_turned_around_reverses_the_memory() {
        for (memory, fact) in [
            (
                "I can't stand jazz, it all sounds the same to me",
                "I've come to love jazz",
            ),
            (
                "Odio il caffè, bevo solo tè",
                "Ormai bevo tre caffè al giorno",
            ),
            ("Je déteste l'opéra", "Finalement j'adore l'opéra"),
            (
                "Ich trinke keinen Kaffee",
                "Inzwischen trinke ich jeden Morgen Kaffee",
            ),
            ("I hate running", "I love running now"),
            ("Odio la cebolla", "Ahora me encanta la cebolla"),
            ("Ik drink graag thee", "Ik vind thee tegenwoordig echt vies"),
            ("Non mi piace il pesce", "Adesso adoro il pesce"),
            ("I love sushi", "I don't like sushi anymore"),
            ("Eu adoro café", "Odeio café agora"),
            (
                "I drink coffee every morning",
                "I've stopped drinking coffee",
            ),
            ("J'adore le café", "J'ai arrêté le café en mars"),
            (
                "I love a glass of red wine with dinner",
                "I don't drink wine anymore",
            ),
        ] {
            assert!(reverses_taste(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // The same feeling, or another thing.
            ("I love jazz", "I also love classical music"),
            ("J'adore le fromage", "Je déteste les huîtres"),
            ("I hate running", "I hate swimming too"),
            ("I love jazz", "I love jazz more than ever"),
            // Qualified to a time, or someone else's.
            (
                "Ich liebe Kaffee",
                "Ich mag keinen Kaffee am Abend, da schlafe ich schlecht",
            ),
            ("Adoro cinema", "O meu marido odeia cinema"),
            ("I love jazz", "My wife hates jazz"),
            // No feeling in the memory.
            ("Jazz is on at the Blue Note on Fridays", "I hate jazz"),
            // Never given up.
            ("I love coffee", "I never quit coffee, even when pregnant"),
        ] {
            assert!(!reverses_taste(memory, fact), "{memory} / {fact}");
        }
    }
}
