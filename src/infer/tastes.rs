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

use super::topics::{any, of_the_speaker, EAT, LIKE, NOT, NO_LONGER};

/// Verbs and words of liking beyond [`LIKE`]: "enjoy", "gern", "piace", "graag", and
/// words of finding something delicious or nice, said by the speaker ("Tegenwoordig vind
/// ik koriander heerlijk", "Ich finde Fenchel lecker"). Not "fan": a fan of one team is
/// seldom a fan of another.
const LIKE_MORE: &[&str] = &[
    "heerlijk",
    "lekker",
    "leuk",
    "lecker",
    "delicious",
    "delicieux",
    "delicieuse",
    "delizioso",
    "deliziosa",
    "buonissimo",
    "buonissima",
    "delicioso",
    "deliciosa",
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

/// Verbs of hating, in the first person: "hate", "déteste", "hasse", "odio", "haat"; and
/// words of finding something disgusting ("Ik vind thee vies", "Ich finde Koriander
/// eklig").
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
    "disgusting",
    "degoutant",
    "degoutante",
    "eklig",
    "ekelhaft",
    "disgustoso",
    "asqueroso",
    "asquerosa",
    "nojento",
    "nojenta",
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
/// café", "ho smesso di fumare", "I've given up keto". Against what follows.
pub(super) const STOPPED: &[&str] = &[
    "quit",
    "stopped",
    "gave",
    "given",
    "dropped",
    "arrete",
    "arretee",
    "aufgehort",
    "smesso",
    "smessa",
    "deje",
    "dejado",
    "deixei",
    "parei",
    "gestopt",
];

/// Drinking, in the first person or the infinitive.
pub(super) const DRINK: &[&str] = &[
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
    "soporto", "sopporto", "suporto", "deje", "parei",
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
    let within = |a: &[String], b: &[String]| {
        !a.is_empty() && a.iter().all(|w| b.iter().any(|n| same(w, n)))
    };
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
                    .all(|(_, then, _)| !named.iter().any(|w| then.iter().any(|t| same(w, t))))
        })
}

/// Whether two named words name the same thing: the same word, or the same stem ("cafés"
/// and "café", "fromages" and "fromage").
fn same(a: &str, b: &str) -> bool {
    a == b || crate::text::terms(a) == crate::text::terms(b)
}

/// Alcoholic drinks, and alcohol itself: what drinking stops when a speaker stops
/// drinking.
const ALCOHOL: &[&str] = &[
    "alcohol",
    "booze",
    "wine",
    "wines",
    "beer",
    "beers",
    "ale",
    "lager",
    "whisky",
    "whiskey",
    "gin",
    "vodka",
    "rum",
    "tequila",
    "cocktail",
    "cocktails",
    "cider",
    "champagne",
    "prosecco",
    "cava",
    "sake",
    "spritz",
    "pint",
    "pints",
    "alcool",
    "vin",
    "vins",
    "biere",
    "bieres",
    "alkohol",
    "wein",
    "bier",
    "schnaps",
    "alcol",
    "vino",
    "vini",
    "birra",
    "birre",
    "cerveza",
    "cervezas",
    "sangria",
    "cerveja",
    "cervejas",
    "wijn",
    "biertje",
];

/// Alcohol itself, which a clause against it gives up whole: "I don't drink alcohol
/// anymore", "j'ai arrêté l'alcool", "Ik drink geen alcohol meer".
const ALCOHOL_ITSELF: &[&str] = &["alcohol", "booze", "alcool", "alkohol", "alcol"];

/// Words of no more drinking at all: "I'm sober", "teetotal", "abstinent".
const SOBER: &[&str] = &[
    "sober",
    "teetotal",
    "teetotaller",
    "abstinent",
    "abstemio",
    "abstemia",
];

/// Words that may follow a verb of drinking with no object: how much, and when ("I quit
/// drinking completely in January", "J'ai arrêté de boire depuis mars").
const NO_OBJECT: &[&str] = &[
    "completely",
    "altogether",
    "entirely",
    "for",
    "since",
    "in",
    "last",
    "this",
    "at",
    "anymore",
    "now",
    "du",
    "tout",
    "depuis",
    "en",
    "completement",
    "ganz",
    "seit",
    "im",
    "komplett",
    "del",
    "tutto",
    "da",
    "desde",
    "completamente",
    "helemaal",
    "sinds",
];

/// Spans of time: "for two years", "depuis deux ans".
const SPANS: &[&str] = &[
    "year", "years", "month", "months", "week", "weeks", "ago", "two", "three", "ans", "mois",
    "semaines", "jahr", "jahren", "monaten", "wochen", "anni", "mesi", "anos", "meses", "jaar",
    "maanden", "weken", "deux", "trois", "zwei", "drei", "due", "tre", "dos", "tres", "dois",
    "twee", "drie",
];

/// Whether a clause of the speaker's says they stopped drinking alcohol: against alcohol
/// itself, sober, or a verb of drinking given up or denied with nothing drunk after it
/// ("I quit drinking completely", "Je ne bois plus", not "I've stopped drinking coffee").
fn stops_drinking(clause: &[String], feeling: Option<Feeling>) -> bool {
    // Nothing after the verb names a thing: only how much, when, or function words.
    let no_object = |i: usize| {
        crate::text::content_words(&clause[i + 1..].join(" "))
            .iter()
            .all(|w| {
                [NO_OBJECT, NO_LONGER, SPANS]
                    .iter()
                    .any(|of| of.contains(&w.as_str()))
                    || crate::retrieve::period::MONTHS.contains(&w.as_str())
                    || w.chars().all(|c| c.is_ascii_digit())
            })
    };
    let stopped = any(clause, STOPPED)
        && clause
            .iter()
            .enumerate()
            .any(|(i, w)| DRINK.contains(&w.as_str()) && no_object(i));
    let no_more = (any(clause, NOT) || any(clause, DENIED))
        && any(clause, NO_LONGER)
        && clause
            .iter()
            .enumerate()
            .any(|(i, w)| DRINK.contains(&w.as_str()) && no_object(i));
    let sober = !any(clause, NOT)
        && clause
            .iter()
            .enumerate()
            .any(|(i, w)| SOBER.contains(&w.as_str()) && of_the_speaker(clause, i));
    (feeling == Some(Feeling::Against) && (any(clause, ALCOHOL_ITSELF) || stopped || no_more))
        || sober
}

/// Whether a new fact says its speaker stopped drinking alcohol while the memory says they
/// drink or like an alcoholic drink: "I quit drinking completely in January" after "I
/// drink a glass of red wine every evening", "Ik drink geen alcohol meer" after "Ik drink
/// graag een biertje". The fact must not qualify it ("I don't drink during the week") nor
/// keep a drink ("I quit beer but still drink wine"). A small model keeps the wine beside
/// the quitting: that wine is alcohol is what it misses.
pub(crate) fn gives_up_drinking(memory: &str, fact: &str) -> bool {
    drinks_alcohol(memory) && stops(fact)
}

/// Whether a text says its speaker drinks or likes an alcoholic drink.
fn drinks_alcohol(text: &str) -> bool {
    feelings(text)
        .iter()
        .any(|(feeling, named, _)| *feeling == Feeling::For && any(named, ALCOHOL))
}

/// Whether a text says its speaker stopped drinking alcohol, unqualified, with no drink
/// kept.
fn stops(fact: &str) -> bool {
    let mut stops = false;
    for sentence in fact.split([',', '.', ';', ':', '!', '?']) {
        let words = crate::text::folded_words(sentence);
        for clause in words.split(|w| BUT.contains(&w.as_str())) {
            let felt = feeling(clause);
            if felt == Some(Feeling::For) && any(clause, ALCOHOL) || any(clause, QUALIFIED) {
                return false;
            }
            stops |= stops_drinking(clause, felt);
        }
    }
    stops
}

/// Whether a text speaks of its speaker's drinking alcohol, or of their having stopped:
/// the two sides of [`gives_up_drinking`], which seldom resemble each other ("I quit
/// drinking", "I love a cold beer").
pub(super) fn speaks_of_drinking(text: &str) -> bool {
    drinks_alcohol(text) || stops(text)
}

/// The words a keyword search for memories of drinking looks for.
pub(super) const DRINKS: &[&str] = ALCOHOL;

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
            ("J'adore les fromages", "Je déteste le fromage"),
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
    fn drinking_given_up_ends_a_drink() {
        for (memory, fact) in [
            (
                "I drink a glass of red wine every evening",
                "I quit drinking completely in January",
            ),
            ("I love craft beer", "I don't drink anymore"),
            ("Ik drink graag een biertje", "Ik drink geen alcohol meer"),
            ("J'adore le vin rouge", "Je ne bois plus depuis deux ans"),
            ("Ich trinke gern Wein", "Ich habe aufgehört zu trinken"),
            ("Me encanta la cerveza", "Dejé el alcohol en marzo"),
            ("Bevo un bicchiere di vino a cena", "Non bevo più"),
            (
                "I enjoy a gin and tonic on Fridays",
                "I've been sober since May",
            ),
        ] {
            assert!(gives_up_drinking(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // Another drink given up, or one kept.
            (
                "I drink red wine every evening",
                "I've stopped drinking coffee",
            ),
            ("J'adore le vin rouge", "Je ne bois plus de café"),
            ("I love beer", "I quit beer but I still drink wine"),
            // Qualified, or someone else's.
            ("I love red wine", "I don't drink during the week"),
            ("I love red wine", "My husband quit drinking"),
            ("I love red wine", "I'm not sober"),
            // No alcohol drunk in the memory.
            ("I drink coffee every morning", "I quit drinking completely"),
            ("My dad drinks a lot of beer", "I quit drinking"),
        ] {
            assert!(!gives_up_drinking(memory, fact), "{memory} / {fact}");
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
            // A plural names what its singular does.
            ("Je bois quatre cafés par jour", "J'ai arrêté le café"),
            (
                "Ich trinke keinen Kaffee",
                "Inzwischen trinke ich jeden Morgen Kaffee",
            ),
            ("I hate running", "I love running now"),
            ("Odio la cebolla", "Ahora me encanta la cebolla"),
            ("Ik drink graag thee", "Ik vind thee tegenwoordig echt vies"),
            (
                "Ik hou niet van koriander",
                "Tegenwoordig vind ik koriander heerlijk",
            ),
            (
                "Ich esse gern Koriander",
                "Ich finde Koriander inzwischen eklig",
            ),
            ("I don't like olives", "I find olives delicious now"),
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
            // Someone else finds it delicious.
            (
                "Ik hou niet van koriander",
                "Mijn vriend vindt koriander heerlijk",
            ),
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
