//! Habits kept at set times: "La sera do lezioni di chitarra ai ragazzi", "Abends gebe
//! ich Nachhilfe", "On Saturdays I work at the market". Such a habit is one more thing the
//! speaker does, beside what a memory with no time of its own says.

use super::says_phrase;

/// The folded beginnings of the words that name a day or a time of day, in the seven
/// languages: "saturday", "samedi", "samstag", "sabato", "sábado", "zaterdag", "evening",
/// "soir", "abend", "sera", "noche", "noite", "avond", and their plurals and adverbs.
/// (Not Portuguese "segunda" to "sexta", which are ordinals as often.)
const TIME_OF: &[&str] = &[
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "weekday",
    "weekend",
    "evening",
    "morning",
    "afternoon",
    "night",
    "lundi",
    "mardi",
    "mercredi",
    "jeudi",
    "vendredi",
    "samedi",
    "dimanche",
    "soir",
    "matin",
    "nuit",
    "montag",
    "dienstag",
    "mittwoch",
    "donnerstag",
    "freitag",
    "samstag",
    "sonntag",
    "wochenend",
    "abend",
    "morgen",
    "vormittag",
    "nachmittag",
    "nacht",
    "lunedi",
    "martedi",
    "mercoledi",
    "giovedi",
    "venerdi",
    "sabato",
    "domenica",
    "sera",
    "mattin",
    "notte",
    "pomeriggi",
    "lunes",
    "martes",
    "miercoles",
    "jueves",
    "viernes",
    "sabado",
    "domingo",
    "tarde",
    "noche",
    "noite",
    "manha",
    "maandag",
    "dinsdag",
    "woensdag",
    "donderdag",
    "vrijdag",
    "zaterdag",
    "zondag",
    "avond",
    "ochtend",
    "middag",
];

/// Whether a folded word names a day or a time of day ([`TIME_OF`]).
pub(super) fn names_a_time(word: &str) -> bool {
    TIME_OF.iter().any(|t| word.starts_with(t))
}

/// Words that put what they go with at a set time by themselves: English plurals ("on
/// Saturdays", "in the evenings"), German and Dutch adverbs of time ("abends",
/// "samstags", "'s avonds", "zaterdags").
fn recurring(word: &str) -> bool {
    let english = ["day", "end", "ing", "noon", "night"];
    word.strip_suffix('s').is_some_and(|stem| {
        names_a_time(stem)
            && (english.iter().any(|e| stem.ends_with(e))
                || stem.ends_with("tag")
                || stem.ends_with("dag")
                || ["abend", "morgen", "nacht", "avond", "ochtend", "wochenend"].contains(&stem))
    })
}

/// Words before a time that make it a set one: "every evening", "chaque soir", "jeden
/// Abend", "ogni sera", "cada noche", "todas as noites", "elke avond"; and the articles
/// of the Romance languages, before a day or a time of day ("le samedi", "la sera", "il
/// sabato", "los sábados", "por las tardes", "aos domingos", "às noites").
const BEFORE_TIME: &[&[&str]] = &[
    &["every"],
    &["each"],
    &["chaque"],
    &["tous", "les"],
    &["le"],
    &["les"],
    &["jeden"],
    &["jede"],
    &["jeder"],
    &["ogni"],
    &["la"],
    &["il"],
    &["di"],
    &["nel"],
    &["cada"],
    &["los"],
    &["las"],
    &["todos", "los"],
    &["todas", "las"],
    &["aos"],
    &["as"],
    &["todas", "as"],
    &["todos", "os"],
    &["elke"],
    &["iedere"],
];

/// Whether a text puts what it says at set times: a [`recurring`] word, or a day or a
/// time of day after one of [`BEFORE_TIME`], or a weekend said as such ("am Wochenende",
/// "in het weekend", "le week-end", "nel fine settimana", "los fines de semana", "aos fins
/// de semana").
pub(super) fn at_set_times(text: &str) -> bool {
    let words = crate::text::folded_words(text);
    words.iter().any(|w| recurring(w))
        || words.iter().enumerate().any(|(i, w)| {
            // "Il sera" is French for "he will be"; Italian's evening is "la sera".
            names_a_time(w)
                && (w != "sera" || i > 0 && ["la", "di", "ogni"].contains(&words[i - 1].as_str()))
                && BEFORE_TIME
                    .iter()
                    .any(|b| i >= b.len() && words[i - b.len()..i] == **b)
        })
        || says_phrase(
            &words,
            &[
                &["am", "wochenende"],
                &["in", "het", "weekend"],
                &["le", "week", "end"],
                &["fine", "settimana"],
                &["fines", "de", "semana"],
                &["fins", "de", "semana"],
            ],
        )
}

/// Whether a text names a time: a day or a time of day ([`TIME_OF`]), or a number.
fn names_time(text: &str) -> bool {
    text.chars().any(|c| c.is_ascii_digit())
        || crate::text::folded_words(text)
            .iter()
            .any(|w| names_a_time(w))
}

/// Whether a new fact tells of something done at set times ([`at_set_times`]) while the
/// memory names no time ([`names_time`]): one more habit beside what the memory says ("La
/// sera do lezioni di chitarra ai ragazzi" beside "Faccio il farmacista a Bari"), not its
/// replacement, whatever a small model says. A memory with a time of its own may be
/// corrected ("The book club is on Thursdays" after "My book club meets on Wednesdays"),
/// and a diet, which says what its speaker eats at every time, may be ended by what they
/// eat at set times ("I eat fish on Fridays now" after "I'm vegetarian"): the two speak of
/// diet ([`super::topics::Topic::Diet`]).
pub(crate) fn at_other_times(memory: &str, fact: &str) -> bool {
    let diet = |text: &str| super::topics::topics(text).contains(&super::topics::Topic::Diet);
    at_set_times(fact) && !names_time(memory) && !(diet(memory) && diet(fact))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_habit_at_set_times_stays_beside_a_memory_with_no_time() {
        for (memory, fact) in [
            (
                "Faccio il farmacista a Bari",
                "La sera do lezioni di chitarra ai ragazzi",
            ),
            (
                "I'm an accountant in Leeds",
                "In the evenings I teach guitar",
            ),
            ("Ich bin Elektriker", "Abends gebe ich Nachhilfe in Mathe"),
            ("Ik werk bij een bank", "'s Avonds geef ik gitaarles"),
            ("Ik werk bij een bank", "Zaterdags werk ik op de markt"),
            ("Je suis infirmière", "Le samedi je travaille au marché"),
            (
                "Je suis infirmière",
                "Le week-end, je chante dans une chorale",
            ),
            ("Soy enfermera", "Los sábados trabajo en un bar"),
            ("Soy enfermera", "Por las tardes doy clases de inglés"),
            (
                "Sou contabilista em Faro",
                "Às noites dou aulas de guitarra",
            ),
            ("Sou contabilista em Faro", "Aos fins de semana sou guia"),
            ("Lavoro in banca", "Nel fine settimana faccio il cameriere"),
            ("I work at a bank", "Every evening I write poems"),
            ("I'm a teacher", "On Sundays I sing in a choir"),
        ] {
            assert!(at_other_times(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // A memory with a time of its own, which the fact may correct.
            (
                "My book club meets on Wednesdays",
                "The book club is on Thursdays",
            ),
            ("I play football on Sundays", "Now I play on Saturdays"),
            ("Le cours est à 18h", "Le cours est le mardi soir"),
            // No set time: once, or a time that is no day.
            ("I live in Madrid", "We moved to Valencia last weekend"),
            ("I work at a bank", "I start at the zoo on Monday"),
            ("Ich bin Elektriker", "Ich bin jetzt Lehrer"),
            ("Je suis infirmière", "Ce sera mon dernier jour"),
            ("Je suis infirmière", "Il sera à Paris"),
            ("Soy enfermera", "Vivo en la segunda planta"),
            ("Faccio il farmacista", "Sono tornato a casa stanotte"),
            // A diet, which eating at set times may end.
            ("I'm vegetarian", "I eat fish on Fridays now"),
            ("Sono vegana", "Il venerdì mangio pesce"),
        ] {
            assert!(!at_other_times(memory, fact), "{memory} / {fact}");
        }
    }
}
