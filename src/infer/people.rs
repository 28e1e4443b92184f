//! A fact about someone else beside a memory of the speaker's own: "Ma voisine n'a plus de
//! chat depuis mars" after "J'ai un chat qui s'appelle Moka". A small model replaces the
//! memory of the cat with the neighbour's news as readily as with the speaker's.

use super::topics::any;

/// Third-person subject pronouns that begin a fact about someone else: "She switched to
/// golf", "Elle a déménagé", "Er ist umgezogen". Not French "il", German "es", Spanish
/// "él" (folded, "el") nor Portuguese "a" and "o", which begin as many facts as articles
/// ("El gato murió").
const PRONOUNS: &[&str] = &[
    "he", "she", "they", "elle", "ils", "elles", "er", "sie", "lui", "lei", "loro", "ella",
    "ellos", "ellas", "ele", "ela", "eles", "elas", "hij", "zij", "ze",
];

/// Possessives before a person: "my sister", "ma voisine", "meine Nachbarin", "il mio
/// vicino", "mi hermana", "a minha irmã", "mijn buurman"; and the third person's.
const POSSESSIVES: &[&str] = &[
    "my", "our", "his", "her", "their", "mon", "ma", "mes", "notre", "nos", "son", "sa", "ses",
    "leur", "leurs", "mein", "meine", "unser", "unsere", "sein", "seine", "ihr", "ihre", "mio",
    "mia", "miei", "mie", "nostro", "nostra", "suo", "sua", "mi", "mis", "nuestro", "nuestra",
    "su", "sus", "meu", "minha", "meus", "minhas", "nosso", "nossa", "seu", "seus", "mijn", "onze",
    "zijn", "haar",
];

/// Articles before a possessive: "il mio vicino", "a minha irmã", "o meu irmão".
const ARTICLES: &[&str] = &["il", "la", "i", "le", "a", "o", "os", "as"];

/// People a speaker speaks of, folded: family, neighbours, friends, colleagues. Not
/// partners, whose news is the speaker's own ("Mijn vriendin woont nu in Gent"), nor the
/// words that name a partner as well as a friend ("vriend", "Freundin", "copine",
/// "ragazzo").
const PEOPLE: &[&str] = &[
    // English
    "neighbour",
    "neighbor",
    "neighbours",
    "neighbors",
    "sister",
    "brother",
    "sibling",
    "mother",
    "father",
    "mom",
    "mum",
    "dad",
    "parents",
    "son",
    "daughter",
    "kids",
    "children",
    "child",
    "grandmother",
    "grandfather",
    "grandma",
    "grandpa",
    "aunt",
    "uncle",
    "cousin",
    "niece",
    "nephew",
    "friend",
    "friends",
    "colleague",
    "coworker",
    "boss",
    "roommate",
    "flatmate",
    "landlord",
    "mate",
    "buddy",
    // French
    "voisin",
    "voisine",
    "voisins",
    "soeur",
    "frere",
    "mere",
    "pere",
    "fils",
    "fille",
    "enfants",
    "tante",
    "oncle",
    "cousine",
    "neveu",
    "collegue",
    "patron",
    "patronne",
    "colocataire",
    "coloc",
    "pote",
    // German
    "nachbar",
    "nachbarin",
    "nachbarn",
    "schwester",
    "bruder",
    "mutter",
    "vater",
    "mama",
    "papa",
    "eltern",
    "sohn",
    "tochter",
    "kinder",
    "oma",
    "opa",
    "onkel",
    "kollege",
    "kollegin",
    "chef",
    "chefin",
    "mitbewohner",
    "mitbewohnerin",
    "kumpel",
    // Italian
    "vicino",
    "vicina",
    "vicini",
    "sorella",
    "fratello",
    "madre",
    "padre",
    "mamma",
    "genitori",
    "figlio",
    "figlia",
    "figli",
    "nonna",
    "nonno",
    "zia",
    "zio",
    "cugino",
    "cugina",
    "collega",
    "capo",
    "coinquilino",
    "coinquilina",
    "amico",
    "amica",
    // Spanish
    "vecino",
    "vecina",
    "vecinos",
    "hermana",
    "hermano",
    "padres",
    "hijo",
    "hija",
    "hijos",
    "abuela",
    "abuelo",
    "tia",
    "tio",
    "primo",
    "prima",
    "companero",
    "companera",
    "jefe",
    "jefa",
    "amigo",
    "amiga",
    // Portuguese
    "vizinho",
    "vizinha",
    "irma",
    "irmao",
    "mae",
    "pai",
    "filho",
    "filha",
    "filhos",
    "avo",
    "colega",
    "chefe",
    // Dutch
    "buurman",
    "buurvrouw",
    "buren",
    "zus",
    "zuster",
    "broer",
    "moeder",
    "vader",
    "ouders",
    "zoon",
    "dochter",
    "kinderen",
    "oom",
    "neef",
    "nicht",
    "baas",
    "huisgenoot",
    "maat",
];

/// Words by which a fact speaks of its speaker too, after its subject: "My sister moved in
/// with me", "Ma voisine garde mon chat", "Mein Bruder und ich". Not the words another
/// language has for something else: French "ma" and "mes" (Italian "but", Spanish
/// "month"). Italian "ci" is "us" more often than "there".
const THE_SPEAKER: &[&str] = &[
    "i", "me", "m", "my", "we", "us", "our", "je", "j", "moi", "mon", "nous", "notre", "nos",
    "ich", "mich", "mir", "mein", "meine", "meinen", "meinem", "wir", "uns", "unser", "unsere",
    "io", "mio", "mia", "miei", "mie", "noi", "ci", "nostro", "nostra", "yo", "mi", "mis",
    "nosotros", "nuestro", "nuestra", "eu", "meu", "minha", "meus", "minhas", "nossa", "nosso",
    "ik", "mij", "mijn", "wij", "ons", "onze",
];

/// Whether `fact` tells of someone else, not of its speaker ([`about_another`]), and
/// `memory` is not about them: the memory neither names that person (the person word, or
/// the name right after it) nor begins with someone else. "Ma voisine n'a plus de chat"
/// leaves "J'ai un chat qui s'appelle Moka" be; "My sister moved to Lisbon" may still
/// replace "My sister lives in Porto".
pub(crate) fn of_someone_else(memory: &str, fact: &str) -> bool {
    let words = crate::text::folded_words(first_clause(fact));
    let Some((person, end)) = another(&words) else {
        return false;
    };
    let memory_words = crate::text::folded_words(memory);
    // The person's name, right after the person ("My sister Ana"); German capitalises
    // every noun, so no other capital counts.
    let name = words
        .get(end)
        .filter(|w| super::names(first_clause(fact)).contains(w));
    let named = |w: &String| name == Some(w) || person.is_some_and(|p| super::extract::alike(p, w));
    !memory_words.iter().any(named) && subject(&memory_words).is_none()
}

/// Whether a fact tells of someone else, not of its speaker: its subject is a
/// third-person pronoun ([`PRONOUNS`]) or a person ([`PEOPLE`]) after a possessive
/// ([`POSSESSIVES`]), and nothing after it in its clause ([`first_clause`], and up to a
/// conjunction before a subject) speaks of the speaker ([`THE_SPEAKER`]): "Mein Kumpel
/// Timo hat einen neuen Job", not "My sister moved in with me".
pub(super) fn about_another(fact: &str) -> bool {
    another(&crate::text::folded_words(first_clause(fact))).is_some()
}

/// The first clause of a fact: up to the first comma before a subject
/// ([`super::extract::SUBJECTS`]). What the speaker does in a clause after it ("Mon fils
/// habite à Berlin, je vais le voir souvent") leaves the fact someone else's.
fn first_clause(fact: &str) -> &str {
    fact.match_indices(',')
        .find(|&(at, _)| {
            crate::text::keywords(&fact[at + 1..])
                .first()
                .is_some_and(|w| super::extract::SUBJECTS.contains(&w.as_str()))
        })
        .map_or(fact, |(at, _)| &fact[..at])
}

/// The subject of folded `words` when they tell of someone else ([`about_another`]): the
/// person word and where the subject ends.
fn another(words: &[String]) -> Option<(Option<&str>, usize)> {
    subject(words).filter(|&(_, end)| {
        // The clause ends at a conjunction and a subject after a word of its own: "My
        // brother moved to Perth and I'm visiting him", not "Mein Bruder und ich".
        let clause = (end + 1..words.len())
            .find(|&i| {
                super::looks::CONJUNCTIONS.contains(&words[i].as_str())
                    && words
                        .get(i + 1)
                        .is_some_and(|w| super::extract::SUBJECTS.contains(&w.as_str()))
            })
            .unwrap_or(words.len());
        !any(&words[end..clause], THE_SPEAKER)
    })
}

/// Endings of Spanish past participles: "vuelto", "empezado", "vendido", "hecho", "visto".
const PARTICIPLE: &[&str] = &["ado", "ido", "to", "cho", "sto"];

/// Whether folded `words` begin with Spanish "he" ("I have") before a past participle
/// ([`PARTICIPLE`]): "He vuelto a comer carne" is the speaker's, where "He moved to Berlin"
/// is someone else's.
fn spanish_have(words: &[String]) -> bool {
    words.first().is_some_and(|w| w == "he")
        && words
            .get(1)
            .is_some_and(|next| PARTICIPLE.iter().any(|end| next.ends_with(end)))
}

/// The subject of a fact that is someone else: the person word ([`PEOPLE`]; none for a
/// pronoun) and where the subject ends. A possessive's person may stand two words after
/// it ("my older sister", "mijn jongere broer").
fn subject(words: &[String]) -> Option<(Option<&str>, usize)> {
    let at = match words {
        [article, possessive, ..]
            if ARTICLES.contains(&article.as_str())
                && POSSESSIVES.contains(&possessive.as_str()) =>
        {
            1
        }
        _ => 0,
    };
    let first = words.get(at)?.as_str();
    if at == 0 && PRONOUNS.contains(&first) && !spanish_have(words) {
        return Some((None, 1));
    }
    if !POSSESSIVES.contains(&first) {
        return None;
    }
    (at + 1..words.len().min(at + 4))
        .find(|&i| PEOPLE.contains(&words[i].as_str()))
        .map(|i| (Some(words[i].as_str()), i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fact_about_someone_else_leaves_the_speakers_memory_be() {
        let cases = [
            (
                "J'ai un chat qui s'appelle Moka",
                "Ma voisine n'a plus de chat depuis mars",
            ),
            ("I live in Madrid", "My older sister moved to Lisbon"),
            (
                "Ich spiele Tennis",
                "Meine Nachbarin spielt kein Tennis mehr",
            ),
            ("Vivo a Torino", "Il mio vicino si è trasferito a Milano"),
            ("Sou vegana", "A minha irmã voltou a comer carne"),
            (
                "Ik werk bij een bank",
                "Mijn broer werkt niet meer bij de bank",
            ),
            ("I play tennis every weekend", "She switched to golf"),
            ("I live in Madrid", "He moved to Berlin"),
            (
                "Ich arbeite als Krankenpfleger in Bremen",
                "Mein Kumpel Timo hat einen neuen Job bei Siemens",
            ),
            ("Vivo en Sevilla", "Mis padres se mudaron a Valencia"),
            (
                "Vivo en Sevilla",
                "Mi hermana se mudó a Valencia el mes pasado",
            ),
            // The speaker in a clause of their own after it.
            (
                "Je vis à Poitiers",
                "Mon fils habite maintenant à Berlin, je vais le voir souvent",
            ),
            (
                "I live in Cardiff",
                "My brother moved to Perth and I'm visiting him in March",
            ),
        ];
        for (memory, fact) in cases {
            assert!(of_someone_else(memory, fact), "{memory} / {fact}");
        }
    }

    #[test]
    fn a_fact_of_the_speaker_or_of_the_person_a_memory_names_may_replace_it() {
        let cases = [
            // The speaker's own news.
            ("I live in Madrid", "I moved to Valencia"),
            ("I live in Madrid", "My wife and I moved to Valencia"),
            ("J'ai un chat", "Ma voisine garde mon chat"),
            (
                "Ich wohne in Köln",
                "Meine Schwester und ich sind nach Bonn gezogen",
            ),
            // A partner's news is the speaker's too, and so is a thing of the speaker's.
            ("I live alone", "My girlfriend moved in"),
            ("My phone is a Samsung", "My phone died, I got a Motorola"),
            // The memory is about that person.
            ("My sister lives in Porto", "My sister moved to Lisbon"),
            ("Ana is a dentist", "My sister Ana quit dentistry"),
            ("She is a nurse", "My mother retired"),
            // No person after the possessive, nor after an article.
            ("Vivo a Torino", "Il mio gatto è morto"),
            ("Tengo un gato llamado Coco", "El gato murió"),
            // Spanish "he" is "I have".
            ("Soy vegetariano", "He vuelto a comer carne"),
            ("Vivo en Sevilla", "He empezado a trabajar en Cádiz"),
        ];
        for (memory, fact) in cases {
            assert!(!of_someone_else(memory, fact), "{memory} / {fact}");
        }
    }
}
