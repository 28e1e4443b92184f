//! A move: a new fact that says its speaker moved to another place, and the memory of
//! where they lived that it ends.
//!
//! "I moved to Valencia last month" ends "I live in Madrid" as surely as a new job ends an
//! old one, yet a small model asked about the two keeps both about as often as not (it
//! calls the old home "replaced" and "still true" in one breath). The words of a move are
//! few and fixed in each language, so [`moved_away`] tells it without the model: in
//! English, French, German, Italian, Spanish, Portuguese and Dutch, the languages memlane
//! is evaluated in. Anything it does not recognise is left to the model.

/// A word of a text: as written, and lowercase without diacritics.
struct Word {
    raw: String,
    folded: String,
}

fn words(text: &str) -> Vec<Word> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| Word {
            raw: w.to_owned(),
            folded: crate::text::folded_words(w).concat(),
        })
        .collect()
}

fn capitalised(word: &Word) -> bool {
    word.raw.chars().next().is_some_and(char::is_uppercase) && word.raw != "I"
}

/// Words that deny what follows, or make it a condition: "I never moved to Leeds", "if we
/// moved to Rome". A fact or memory with one is left to the model.
const NOT: &[&str] = &[
    "no", "not", "never", "don", "didn", "haven", "hasn", "won", "if", "ne", "n", "pas", "jamais",
    "si", "nicht", "kein", "nie", "niemals", "wenn", "falls", "nunca", "non", "nao", "niet",
    "nooit", "geen", "als", "anymore", "longer", "used",
];

/// Whether the words deny or make a condition ([`NOT`]). Portuguese "no" before a name
/// is "in the" ("Moro no Porto").
fn denies(words: &[Word]) -> bool {
    words.iter().enumerate().any(|(i, w)| {
        NOT.contains(&w.folded.as_str())
            && !(w.folded == "no" && words.get(i + 1).is_some_and(capitalised))
    })
}

/// Words between a subject and its verb that change neither ("I have just moved", "je me
/// suis enfin installée", "mi sono appena trasferita").
const BETWEEN: &[&str] = &[
    "have",
    "ve",
    "had",
    "d",
    "just",
    "finally",
    "recently",
    "actually",
    "officially",
    "all",
    "both",
    "now",
    "already",
    "still",
    "currently",
    "also",
    "m",
    "am",
    "re",
    "are",
    "s",
    "enfin",
    "finalement",
    "recemment",
    "bien",
    "deja",
    "tous",
    "toutes",
    "actuellement",
    "appena",
    "gia",
    "ora",
    "finalmente",
    "ahora",
    "agora",
];

/// First-person subjects, and the reflexive pronouns that stand for them ("je me suis
/// installé"; "on s'est installés" has "on").
const FIRST_PERSON: &[&str] = &[
    "i", "we", "j", "je", "nous", "on", "me", "ich", "wir", "io", "noi", "mi", "ci", "yo", "nos",
    "nosotros", "eu", "ik", "wij",
];

/// Auxiliaries that are first person whatever precedes them: "J'ai déménagé", "Ho
/// traslocato", "Me he mudado".
const FIRST_PERSON_AUXILIARIES: &[&str] = &[
    "ai", "avons", "suis", "sommes", "he", "hemos", "ho", "abbiamo", "siamo",
];

/// Forms of moving that are the first person of the past on their own (Spanish,
/// Portuguese): "Me mudé a Bilbao", "Mudei-me para o Porto".
const MOVED_FIRST_PERSON: &[&str] = &["mude", "mudamos", "traslade", "trasladamos", "mudei"];

const HAVE: &[&str] = &["ai", "avons", "a", "as"];
const BE: &[&str] = &["suis", "sommes", "est", "es"];

/// Past forms of moving whose subject is read before them (past [`BETWEEN`] words, to a
/// [`FIRST_PERSON`] word), with the auxiliaries one of which must stand between (none in
/// English): "déménage" alone is the present, "je déménage en mars" a plan.
const MOVED: &[(&str, &[&str])] = &[
    ("moved", &[]),
    ("relocated", &[]),
    ("demenage", HAVE),
    ("demenagee", HAVE),
    ("demenages", HAVE),
    ("demenagees", HAVE),
    ("emmenage", HAVE),
    ("emmenagee", HAVE),
    ("emmenages", HAVE),
    ("emmenagees", HAVE),
    ("installe", BE),
    ("installee", BE),
    ("installes", BE),
    ("installees", BE),
    ("mudado", &["he", "hemos"]),
    ("trasladado", &["he", "hemos"]),
    ("trasferito", &["sono", "siamo"]),
    ("trasferita", &["sono", "siamo"]),
    ("trasferiti", &["siamo"]),
    ("trasferite", &["siamo"]),
    ("traslocato", &["ho", "abbiamo"]),
];

/// Past participles of moving that German and Dutch put last, with the first-person
/// auxiliaries that go with them ("Wir sind nach Freiburg gezogen", "Ik ben naar Utrecht
/// verhuisd").
const MOVED_LAST: &[&str] = &["gezogen", "umgezogen", "verhuisd"];
const AUXILIARY_LAST: &[(&str, &str)] = &[
    ("ich", "bin"),
    ("wir", "sind"),
    ("ik", "ben"),
    ("we", "zijn"),
    ("wij", "zijn"),
];

/// Words that lead to a destination or a home: "to Valencia", "nach Freiburg", "a Bilbao",
/// "para o Porto", "in Milan".
const TO: &[&str] = &[
    "to", "into", "in", "a", "au", "aux", "en", "nach", "naar", "para", "pra", "em", "ad", "at",
    "bei", "no", "na", "nel", "nella", "te", "op",
];

/// Articles that may open a place ("to the Netherlands", "para o Porto").
const ARTICLES: &[&str] = &["the", "la", "le", "l", "el", "il", "lo", "o", "den", "der"];

/// Capitalised words that name a time, not a place ("I moved to a flat in March"),
/// besides the English months and days ([`is_time`]).
const TIMES: &[&str] = &[
    "christmas",
    "easter",
    "januar",
    "februar",
    "marz",
    "mai",
    "juni",
    "juli",
    "oktober",
    "dezember",
    "montag",
    "dienstag",
    "mittwoch",
    "donnerstag",
    "freitag",
    "samstag",
    "sonntag",
    "weihnachten",
    "ostern",
    "wochen",
    "monaten",
    "jahren",
    "tagen",
    "monat",
    "jahr",
    "woche",
];

/// Whether a folded word names a time: an English month or day, or one of [`TIMES`].
pub(super) fn is_time(word: &str) -> bool {
    TIMES.contains(&word)
        || crate::retrieve::period::MONTHS.contains(&word)
        || super::dates::weekday(word).is_some()
}

/// The place the words from `start` lead to: a [`TO`] word, maybe an article, then
/// capitalised words (not a time), folded and joined by spaces.
fn place_after(words: &[Word], start: usize) -> Option<String> {
    let mut i = start;
    while i < words.len() {
        if TO.contains(&words[i].folded.as_str()) {
            let mut j = i + 1;
            if words
                .get(j)
                .is_some_and(|w| ARTICLES.contains(&w.folded.as_str()) && !capitalised(w))
            {
                j += 1;
            }
            let name: Vec<&str> = words[j.min(words.len())..]
                .iter()
                .take_while(|w| capitalised(w) && !is_time(&w.folded))
                .map(|w| w.folded.as_str())
                .collect();
            if !name.is_empty() {
                return Some(name.join(" "));
            }
        }
        i += 1;
    }
    None
}

/// Whether the subject of the verb at `verb` is the speaker: read backwards past the
/// words that may stand between ([`BETWEEN`]) and one of `auxiliaries` (which must be
/// there when any is given), to a first-person word.
fn first_person_before(words: &[Word], verb: usize, auxiliaries: &[&str]) -> bool {
    let mut helped = auxiliaries.is_empty();
    for w in words[..verb].iter().rev() {
        let w = w.folded.as_str();
        if auxiliaries.contains(&w) {
            if FIRST_PERSON_AUXILIARIES.contains(&w) {
                return true;
            }
            helped = true;
        } else if FIRST_PERSON.contains(&w) {
            return helped;
        } else if !BETWEEN.contains(&w) {
            return false;
        }
    }
    false
}

/// Where a fact says its speaker moved to: a move in the first person, in the past, with
/// a named destination.
fn destination(fact: &str) -> Option<String> {
    let words = words(fact);
    let has = |w: &str| words.iter().any(|x| x.folded == w);
    if denies(&words) {
        return None;
    }
    for (i, w) in words.iter().enumerate() {
        let w = w.folded.as_str();
        let moved = if MOVED_FIRST_PERSON.contains(&w) {
            true
        } else if let Some(&(_, auxiliaries)) = MOVED.iter().find(|(form, _)| *form == w) {
            first_person_before(&words, i, auxiliaries)
        } else if MOVED_LAST.contains(&w) {
            AUXILIARY_LAST.iter().any(|&(s, aux)| has(s) && has(aux))
        } else {
            false
        };
        if moved {
            // German and Dutch name the destination before the participle.
            let from = if MOVED_LAST.contains(&w) { 0 } else { i + 1 };
            return place_after(&words, from);
        }
    }
    None
}

/// The verbs of living somewhere: in the first person ("I live", "j'habite", "ich
/// wohne", "vivo", "moro", "ik woon", [`LIVE_FIRST`]), and in the third, of a named person
/// ("Carlos lives in Madrid", as an extraction may word a user's fact, [`LIVE_THIRD`]).
/// "Habite" and "reside" are both.
pub(super) const LIVE: &[&str] = &[
    "live", "living", "based", "habitons", "vis", "vivons", "wohne", "lebe", "wohnen", "leben",
    "abito", "vivo", "abitiamo", "viviamo", "resido", "vivimos", "moro", "moramos", "vivemos",
    "woon", "wonen", "habite", "reside", "lives", "resides", "vit", "wohnt", "lebt", "abita",
    "vive", "mora", "woont",
];
const LIVE_FIRST: &[&str] = LIVE.split_at(23).0;
const LIVE_THIRD: &[&str] = LIVE.split_at(21).1;
/// First-person forms that need no subject before them (Italian, Spanish, Portuguese).
const LIVE_ALONE: &[&str] = &[
    "wohne", "lebe", "abito", "vivo", "abitiamo", "viviamo", "resido", "vivimos", "moro",
    "moramos", "vivemos",
];

/// Capitalised first words that are no one's name: possessives and pronouns ("My sister
/// lives in Dublin", "Elle habite à Lyon").
const NOT_A_NAME: &[&str] = &[
    "my", "his", "her", "their", "our", "he", "she", "they", "mon", "ma", "mes", "notre", "il",
    "elle", "ils", "elles", "mein", "meine", "unser", "unsere", "er", "sie", "mi", "mio", "mia",
    "miei", "mie", "mis", "nuestro", "nuestra", "el", "ella", "lui", "lei", "meu", "minha",
    "nosso", "nossa", "ele", "ela", "mijn", "onze", "hij", "zij", "ze", "the", "la", "le",
];

/// Where a memory says its owner lives: a verb of living, its subject the owner, then a
/// named place.
fn home(memory: &str) -> Option<String> {
    let words = words(memory);
    if denies(&words) {
        return None;
    }
    for (i, w) in words.iter().enumerate() {
        let f = w.folded.as_str();
        let first = LIVE_FIRST.contains(&f)
            && (LIVE_ALONE.contains(&f) || first_person_before(&words, i, &[]));
        let named = LIVE_THIRD.contains(&f)
            && i == 1
            && capitalised(&words[0])
            && !NOT_A_NAME.contains(&words[0].folded.as_str());
        if first || named {
            // The place follows within a few words: "I live in Madrid", "Vivo en Sevilla
            // desde 2019", "J'habite à Lille".
            let place = place_after(&words[..words.len().min(i + 5)], i + 1)?;
            return Some(place);
        }
    }
    None
}

/// Whether a text says where its speaker lives ("J'habite à Rennes", "Carlos lives in
/// Madrid") or moved to ("Nous nous sommes installés à Grenoble"), in a named place.
pub(super) fn speaks_of_home(text: &str) -> bool {
    home(text).is_some() || destination(text).is_some()
}

/// Whether a new fact says its speaker moved to another place than the one the memory
/// says they live in: "I moved to Valencia last month" ends "I live in Madrid" and
/// "Carlos lives in Madrid". Both must say it plainly: a first-person move in the past
/// with a named destination, no denial or condition ("I haven't moved", "if we moved");
/// a memory of where the owner (not "my sister") lives, in a named place. A move back to
/// the same place, a move "to a new flat", and a visit ("I'm in Rome for the weekend") are
/// left to the model.
pub(crate) fn moved_away(memory: &str, fact: &str) -> bool {
    let (Some(to), Some(from)) = (destination(fact), home(memory)) else {
        return false;
    };
    // The same place, or one inside the other ("Madrid" and "Madrid Centro").
    !(to.contains(&from) || from.contains(&to))
}

/// Words of a stay away from home: a trip, a holiday, a visit, a conference, a flight, and
/// the spans of time a stay lasts ("this week", "for four days", "until Sunday").
const STAY: &[&str] = &[
    "trip",
    "visit",
    "visiting",
    "holiday",
    "holidays",
    "vacation",
    "conference",
    "festival",
    "weekend",
    "week",
    "days",
    "until",
    "fly",
    "flying",
    "travelling",
    "traveling",
    "tour",
    "vacances",
    "visite",
    "voyage",
    "sejour",
    "conference",
    "semaine",
    "jours",
    "jusqu",
    "vole",
    "pars",
    "chez",
    "urlaub",
    "besuch",
    "besuche",
    "reise",
    "konferenz",
    "wochenende",
    "woche",
    "tage",
    "bis",
    "fliege",
    "ferien",
    "vacanza",
    "vacanze",
    "visita",
    "viaggio",
    "conferenza",
    "settimana",
    "giorni",
    "fino",
    "volo",
    "ferie",
    "vacaciones",
    "viaje",
    "conferencia",
    "finde",
    "semana",
    "dias",
    "hasta",
    "vuelo",
    "ferias",
    "viagem",
    "conferencia",
    "ate",
    "voo",
    "vakantie",
    "bezoek",
    "reis",
    "conferentie",
    "dagen",
    "tot",
    "vlieg",
    // A month, a temporary "I'm" ("Este mes estoy en Cádiz"), staying over ("logeer").
    "month",
    "mois",
    "monat",
    "mese",
    "mes",
    "maand",
    "estoy",
    "estou",
    "logeer",
    "logeren",
    // Tomorrow, and meetings of a trade.
    "tomorrow",
    "demain",
    "morgen",
    "domani",
    "manana",
    "amanha",
    "congres",
    "kongress",
    "convegno",
    "congresso",
    "congreso",
    "seminar",
    "seminaire",
    "workshop",
];

/// Phrases of a stay at someone's home, as French "chez" ([`STAY`]) says it: "vado da mia
/// nonna", "bei meiner Oma", "bij mijn broer", "con mi tía", "en casa de mis padres", "em
/// casa dos meus pais".
const AT_SOMEONES: &[&[&str]] = &[
    &["da", "mia"],
    &["da", "mio"],
    &["da", "miei"],
    &["dai", "miei"],
    &["bei", "meiner"],
    &["bei", "meinem"],
    &["bei", "meinen"],
    &["bij", "mijn"],
    &["con", "mi"],
    &["con", "mis"],
    &["casa", "de"],
    &["casa", "da"],
    &["casa", "do"],
    &["casa", "dos"],
    &["casa", "das"],
];

/// Words of living somewhere or of moving, in any person or tense: a fact with one is no
/// mere stay ("I've lived in Lisbon for three weeks now").
const SETTLING: &[&str] = &[
    "lived",
    "move",
    "moving",
    "moved",
    "relocate",
    "relocating",
    "relocated",
    "demenager",
    "demenage",
    "installe",
    "installee",
    "installes",
    "installees",
    "umziehen",
    "ziehe",
    "ziehen",
    "gezogen",
    "umgezogen",
    "trasferisco",
    "trasferito",
    "trasferita",
    "mudarme",
    "mudo",
    "mude",
    "mudado",
    "mudar",
    "mudei",
    "mudamos",
    "verhuizen",
    "verhuis",
    "verhuisd",
    "vivia",
    "vivait",
    "wohnte",
    "abitavo",
    "woonde",
];

/// Whether a new fact tells of a stay away from the home the memory names, which both can
/// be true beside: "I'm in Lisbon this week for a conference", "Nächste Woche fliege ich
/// für vier Tage nach Rom", "Je suis chez mes parents à Lyon pour les vacances" beside "I
/// live in Dublin", "Ich wohne in Hamburg", "J'habite à Toulouse". The fact has a word of
/// a trip, a visit or a span of time, and none of living or moving; the memory says where
/// its owner lives, in a named place. A small model takes such a stay for a move as
/// readily as it keeps an old home beside a new one.
pub(crate) fn stays_away(memory: &str, fact: &str) -> bool {
    let words = words(fact);
    let any = |of: &[&str]| words.iter().any(|w| of.contains(&w.folded.as_str()));
    let folded: Vec<String> = words.iter().map(|w| w.folded.clone()).collect();
    home(memory).is_some()
        && (any(STAY) || super::says_phrase(&folded, AT_SOMEONES))
        && !any(SETTLING)
        && !any(LIVE_FIRST)
        && !any(LIVE_THIRD)
        && destination(fact).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_elsewhere_ends_the_memory_of_home() {
        let moves = [
            ("I live in Madrid", "I moved to Valencia last month"),
            (
                "Carlos lives in Madrid",
                "I moved to Valencia last month (October 2026)",
            ),
            ("I live in Glasgow", "We've just moved to Bristol"),
            ("I'm based in Leeds", "I relocated to the Isle of Wight"),
            (
                "J'habite à Lille depuis cinq ans",
                "On s'est installés à Bordeaux le mois dernier",
            ),
            ("Je vis à Rennes", "J'ai déménagé à Nantes"),
            (
                "Ich wohne in Köln",
                "Wir sind vor zwei Wochen nach Freiburg gezogen",
            ),
            ("Ich lebe in Wien", "Ich bin nach Graz umgezogen"),
            ("Vivo en Sevilla", "Me mudé a Bilbao el mes pasado"),
            ("Abito a Torino", "Mi sono appena trasferita a Bologna"),
            ("Moro em Lisboa", "Mudei-me para o Porto"),
            ("Ik woon in Utrecht", "Ik ben naar Groningen verhuisd"),
            ("Moro no Porto", "Mudámos para Braga"),
            ("Abito a Roma", "Ho traslocato a Napoli"),
            ("Vivo en Cádiz", "Me he mudado a Málaga"),
            ("Ich wohne in Bonn", "Ich bin im Mai nach Kiel gezogen"),
            ("Je vis à Strasbourg", "Ça y est, on a emménagé à Annecy"),
        ];
        for (memory, fact) in moves {
            assert!(moved_away(memory, fact), "{memory} / {fact}");
        }
        let kept = [
            // Someone else moved, or lives there.
            ("I live in Madrid", "My sister moved to Valencia"),
            ("My brother lives in Dublin", "I moved to Cork"),
            ("Ich wohne in Köln", "Meine Eltern sind nach Bonn gezogen"),
            ("Vivo en Sevilla", "Mi hermano se ha mudado a Cádiz"),
            // Not a move, not yet, or not elsewhere.
            (
                "I live in Norwich",
                "I'm in Edinburgh for the festival until Sunday",
            ),
            ("I live in Madrid", "I haven't moved to Valencia yet"),
            (
                "I live in Madrid",
                "If we moved to Valencia we'd need a car",
            ),
            ("I live in Madrid", "I moved to a new flat in March"),
            (
                "I live in Madrid",
                "I moved back to Madrid after a year in Rome",
            ),
            (
                "J'habite à Nantes",
                "En octobre, je pars une semaine à Montréal",
            ),
            ("J'habite à Lille", "Je déménage à Lyon en mars"),
            ("J'habite à Lille", "J'installe une cuisine à Lyon"),
            ("J'habite à Lille", "Il s'est installé à Lyon"),
            ("Ich wohne in Köln", "Ich bin in die Stadt gezogen"),
            // No home in the memory.
            ("I live with my two cats", "I moved to Bristol"),
            ("Vivo con mi abuela", "Me mudé a Bilbao"),
            ("I work as a nurse in Madrid", "I moved to Valencia"),
            ("I don't live in Madrid anymore", "I moved to Valencia"),
        ];
        for (memory, fact) in kept {
            assert!(!moved_away(memory, fact), "{memory} / {fact}");
        }
    }

    #[test]
    fn a_stay_away_leaves_the_memory_of_home() {
        let stays = [
            (
                "I live in Dublin",
                "I'm in Lisbon this week for a conference",
            ),
            (
                "J'habite à Toulouse avec mon chien",
                "Je suis chez mes parents à Lyon pour les vacances",
            ),
            (
                "Ich wohne in Hamburg",
                "Nächste Woche fliege ich für vier Tage nach Rom",
            ),
            (
                "Vivo en Sevilla",
                "Estoy de vacaciones en Cádiz hasta el domingo",
            ),
            ("Abito a Torino", "Sono a Roma per una conferenza"),
            ("Moro em Coimbra", "Passei o fim de semana em Lisboa"),
            ("Ik woon in Gent", "Dit weekend ben ik in Antwerpen"),
            // Tomorrow, or a meeting of a trade.
            (
                "Vivo a Torino con il mio cane",
                "Domani vado a Roma per un convegno",
            ),
            ("I live in Dublin", "Tomorrow I head to Berlin"),
            ("J'habite à Toulouse", "Je vais à Paris pour un congrès"),
            // A month, a temporary "I'm", a stay at someone's home.
            (
                "Vivo en Valladolid",
                "Este mes estoy en Cádiz con mi tía Pilar",
            ),
            ("Abito a Torino", "Ad agosto vado da mia nonna Rosa a Lecce"),
            ("Ich wohne in Leipzig", "Ich bin bei meiner Oma in Rostock"),
            (
                "Ik woon in Zwolle",
                "Volgende maand logeer ik bij mijn broer in Maastricht",
            ),
            ("Moro em Braga", "Estou em casa dos meus pais em Faro"),
            ("Vivo en Valladolid", "Estoy en Cádiz por trabajo"),
        ];
        for (memory, fact) in stays {
            assert!(stays_away(memory, fact), "{memory} / {fact}");
        }
        let not = [
            // Living or moving there, however long.
            (
                "I live in Dublin",
                "I've lived in Lisbon for three weeks now",
            ),
            ("I live in Dublin", "I moved to Lisbon last week"),
            ("Ich wohne in Hamburg", "Ich ziehe nächste Woche nach Rom"),
            ("Vivo en Valladolid", "Este mes me mudé a Cádiz con mi tía"),
            ("Abito a Torino", "Vivo da mia nonna a Lecce adesso"),
            ("I live in Dublin", "Tomorrow I move to Berlin"),
            // No stay, or no home in the memory.
            ("I live in Dublin", "I work in Lisbon now"),
            (
                "I work as an architect",
                "I'm in Lisbon this week for a conference",
            ),
            ("My sister lives in Rome", "I'm in Rome this week"),
        ];
        for (memory, fact) in not {
            assert!(!stays_away(memory, fact), "{memory} / {fact}");
        }
    }
}
