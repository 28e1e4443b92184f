//! A job ended by retirement: "Ich bin in Rente seit Juli" after "Ich arbeite als Busfahrer
//! in Kassel". A small model keeps the two side by side: a retirement names no job, so
//! it reads as one more fact about the speaker.
//!
//! Words are matched whole, lowercase and without diacritics, in English, French, German,
//! Italian, Spanish, Portuguese and Dutch.

use super::topics::{any, of_the_speaker, NOT, SOMEONE_ELSE};

/// Words that say their subject is retired: participles and nouns of the state.
const RETIRED: &[&str] = &[
    "retired",
    "retraitee",
    "rentner",
    "rentnerin",
    "pensioniert",
    "pensionierte",
    "jubilado",
    "jubilada",
    "pensionato",
    "pensionata",
    "aposentado",
    "aposentada",
    "reformado",
    "reformada",
    "gepensioneerd",
];

/// First-person verbs of retiring, which need no pronoun: "Me jubilé", "Aposentei-me".
const I_RETIRED: &[&str] = &["jubile", "aposentei", "reformei"];

/// Two-word phrases of being retired: "in Rente", "im Ruhestand", "in pensione", "met
/// pensioen", "la retraite" ("je suis à la retraite", "j'ai pris ma retraite").
const RETIRED_PHRASES: &[[&str; 2]] = &[
    ["in", "rente"],
    ["im", "ruhestand"],
    ["in", "pensione"],
    ["met", "pensioen"],
    ["la", "retraite"],
    ["ma", "retraite"],
    ["suis", "retraite"],
];

/// Words of a plan or a wish, which put a retirement ahead: "I'll be retired next year",
/// "Je serai à la retraite en mai", "Vado in pensione il prossimo anno".
const AHEAD: &[&str] = &[
    "will",
    "ll",
    "going",
    "gonna",
    "soon",
    "next",
    "plan",
    "planning",
    "hope",
    "want",
    "serai",
    "vais",
    "prochain",
    "prochaine",
    "bientot",
    "werde",
    "bald",
    "nachstes",
    "nachsten",
    "voy",
    "proximo",
    "proxima",
    "pronto",
    "vado",
    "prossimo",
    "prossima",
    "presto",
    "vou",
    "ga",
    "gaan",
    "binnenkort",
    "volgend",
    "volgende",
    "wil",
];

/// Verbs of working in the first person (and the English "work"): what a memory of the
/// speaker's job says, and what a retirement that still works says too.
const WORKING: &[&str] = &[
    "work",
    "working",
    "job",
    "travaille",
    "arbeite",
    "trabajo",
    "lavoro",
    "trabalho",
    "werk",
];

/// Work without pay, which a retired person often does: "I volunteer at the library".
const VOLUNTEER: &[&str] = &[
    "volunteer",
    "volunteering",
    "benevole",
    "ehrenamtlich",
    "voluntario",
    "voluntaria",
    "volontario",
    "volontaria",
    "vrijwilliger",
    "vrijwilligerswerk",
];

/// Whether folded `words` say their speaker is retired now: a [`RETIRED`] word or a
/// [`RETIRED_PHRASES`] phrase said of the speaker, or an [`I_RETIRED`] verb, and no
/// denial, plan or wish ("I'm not retired yet", "I'll be retired next year").
fn retired(words: &[String]) -> bool {
    let said = words.iter().enumerate().any(|(i, w)| {
        let w = w.as_str();
        let phrase = words
            .get(i + 1)
            .is_some_and(|next| RETIRED_PHRASES.contains(&[w, next.as_str()]));
        ((RETIRED.contains(&w) || phrase) && of_the_speaker(words, i))
            || (I_RETIRED.contains(&w) && !any(&words[..i], SOMEONE_ELSE))
    });
    said && !any(words, NOT) && !any(words, AHEAD)
}

/// Whether a new fact says its speaker retired ([`retired`], and nothing of working on:
/// "I retired but still work two days a week" is left to the model) while the memory says
/// they work (a [`WORKING`] word, not "work out", nothing denied, no one else, no
/// retirement, no volunteering): "I retired last year" after "I work as a pilot", "Sono
/// in pensione" after "Lavoro in banca".
pub(crate) fn retires(memory: &str, fact: &str) -> bool {
    let (memory, fact) = (
        crate::text::folded_words(memory),
        crate::text::folded_words(fact),
    );
    let works = memory.iter().enumerate().any(|(i, w)| {
        WORKING.contains(&w.as_str()) && memory.get(i + 1).is_none_or(|next| next != "out")
    }) && !any(&memory, NOT)
        && !any(&memory, SOMEONE_ELSE)
        && !any(&memory, VOLUNTEER)
        && !retired(&memory);
    works && retired(&fact) && !any(&fact, WORKING) && !any(&fact, VOLUNTEER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retirement_ends_a_job() {
        for (memory, fact) in [
            (
                "Ich arbeite als Busfahrer in Kassel",
                "Ich bin in Rente seit Juli",
            ),
            ("Ich arbeite als Koch", "Ich bin seit Mai im Ruhestand"),
            ("I work as a pilot", "I retired last year"),
            ("I work at the post office", "I'm retired now"),
            ("Lavoro in banca", "Sono in pensione da gennaio"),
            (
                "Je travaille chez Renault",
                "Je suis à la retraite depuis mars",
            ),
            ("Je travaille à la mairie", "J'ai pris ma retraite"),
            ("Trabajo de cartero en Lugo", "Me jubilé en abril"),
            ("Trabalho num banco", "Estou aposentada"),
            (
                "Ik werk in een bakkerij",
                "Ik ben sinds de zomer met pensioen",
            ),
        ] {
            assert!(retires(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // Someone else retired, or not yet, or ahead.
            ("I work as a pilot", "My dad retired last year"),
            ("Ich arbeite als Koch", "Mein Vater ist in Rente"),
            ("I work as a pilot", "I'm not retired yet"),
            ("I work as a pilot", "I'll be retired next year"),
            ("Lavoro in banca", "Vado in pensione il prossimo anno"),
            // Still working, or volunteering, beside the retirement.
            (
                "I work as a pilot",
                "I retired but still work two days a week",
            ),
            (
                "I work as a pilot",
                "I'm retired and volunteer at the library",
            ),
            // No job in the memory: a hobby, someone else's job, a volunteer, work out.
            ("I play golf on Sundays", "I retired last year"),
            ("My wife works as a nurse", "I retired last year"),
            (
                "I do volunteer work at the food bank",
                "I retired last year",
            ),
            ("I work out at the gym", "I retired last year"),
            ("I don't work on Fridays", "I retired last year"),
            // Saving for retirement is no retirement.
            ("I work as a pilot", "I'm saving for my retirement"),
            ("Ich arbeite als Koch", "Ich spare für die Rente"),
        ] {
            assert!(!retires(memory, fact), "{memory} / {fact}");
        }
    }
}
