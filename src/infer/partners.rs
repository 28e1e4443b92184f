//! A partner's coming and going: a partner after a single life, a break-up, a new partner,
//! a wedding. A small model keeps "Ich bin Single" beside a new girlfriend, or an old
//! boyfriend beside a new one, about as often as not; these rules tell the plain cases
//! without it. Words are matched whole, lowercase and without diacritics, in English,
//! French, German, Italian, Spanish, Portuguese and Dutch.

use super::topics::{any, of_the_speaker, NOT, NO_LONGER};

/// Words that say a person has no partner.
const SINGLE: &[&str] = &[
    "single",
    "celibataire",
    "ledig",
    "soltero",
    "soltera",
    "solteiro",
    "solteira",
    "celibe",
    "nubile",
    "vrijgezel",
    "alleenstaand",
];

/// A partner, in the words a person uses of their own.
pub(super) const PARTNER_OF_ONES_OWN: &[&str] = &[
    "boyfriend",
    "girlfriend",
    "partner",
    "wife",
    "husband",
    "fiance",
    "fiancee",
    "copain",
    "copine",
    "mari",
    "femme",
    "compagnon",
    "compagne",
    "fiance",
    "fiancee",
    "freund",
    "freundin",
    "partnerin",
    "frau",
    "mann",
    "verlobte",
    "verlobter",
    "fidanzato",
    "fidanzata",
    "ragazzo",
    "ragazza",
    "moglie",
    "marito",
    "compagno",
    "compagna",
    "novio",
    "novia",
    "pareja",
    "esposa",
    "esposo",
    "marido",
    "namorado",
    "namorada",
    "noivo",
    "noiva",
    "vriend",
    "vriendin",
    "vriendje",
    "vriendinnetje",
    "man",
    "vrouw",
    "verloofde",
];

/// Partner words that also mean a man or a woman: a partner only after "my" ("ma femme",
/// "meine Frau", "mijn man"; "j'ai une femme de ménage" is no wife).
const MAN_OR_WOMAN: &[&str] = &["femme", "frau", "mann", "man", "vrouw"];

/// First-person possessives: what makes a partner the speaker's ("my girlfriend").
const MY: &[&str] = &[
    "my", "mon", "ma", "mein", "meine", "meinen", "meiner", "mio", "mia", "mi", "meu", "minha",
    "mijn",
];

/// Verbs of having in the first person ("ich habe eine Freundin", "tengo novia").
const HAVE: &[&str] = &[
    "have", "ve", "got", "ai", "habe", "hab", "ho", "tengo", "tenho", "heb",
];

/// Words that may stand between "my" or "I have" and the partner: articles and "new".
const BEFORE_PARTNER: &[&str] = &[
    "a",
    "an",
    "new",
    "un",
    "une",
    "nouveau",
    "nouvel",
    "nouvelle",
    "ein",
    "eine",
    "einen",
    "neue",
    "neuen",
    "neuer",
    "neu",
    "un",
    "una",
    "uno",
    "nuovo",
    "nuova",
    "nuevo",
    "nueva",
    "um",
    "uma",
    "novo",
    "nova",
    "een",
    "nieuwe",
    "jetzt",
    "now",
    "nu",
    "agora",
    "ahora",
    "ora",
    "maintenant",
    // "Since", "recently", "finally": "ik heb sinds kort een vriendin", "Ich habe endlich
    // einen Freund"
    "recently",
    "finally",
    "since",
    "sinds",
    "kort",
    "eindelijk",
    "seit",
    "kurzem",
    "endlich",
    "depuis",
    "peu",
    "enfin",
    "finalmente",
];

/// Words of a wedding or an engagement in the first person ("we got married", "je me suis
/// mariée", "ich habe geheiratet", "mi sono sposata", "me casé", "casei", "ik ben
/// getrouwd"), said with a [`SPEAKER`] word before them.
const WED: &[&str] = &[
    "married",
    "engaged",
    "marie",
    "mariee",
    "maries",
    "fiance",
    "fiancee",
    "geheiratet",
    "verheiratet",
    "verlobt",
    "sposato",
    "sposata",
    "sposati",
    "fidanzato",
    "fidanzata",
    "case",
    "casado",
    "casada",
    "casei",
    "casamos",
    "noivei",
    "getrouwd",
    "verloofd",
];

/// Whether a new fact says its speaker has a partner now while the memory says they are
/// single: "Ich habe jetzt eine Freundin, sie heißt Lena" after "Ich bin Single"; or a
/// couple without a partner word ("Ik ben sinds kort samen met Eva", see [`coupled`]), or
/// dating. A memory that denies a partner is single too ("Ik heb geen vriend", see
/// [`no_partner`]). The
/// memory's single word and the fact's partner must both be said of the speaker, nothing
/// denied ("I'm not single", "my brother has a girlfriend" leave the memory to the model),
/// and no friend made ("Ik heb een nieuwe vriend gemaakt").
pub(crate) fn ends_single_life(memory: &str, fact: &str) -> bool {
    let (couple, memory_names, fact_names) = (coupled(fact), names(memory), names(fact));
    let (memory, fact) = (
        crate::text::folded_words(memory),
        crate::text::folded_words(fact),
    );
    let single = (!denies(&memory, &memory_names)
        && memory
            .iter()
            .enumerate()
            .any(|(i, w)| SINGLE.contains(&w.as_str()) && of_the_speaker(&memory, i)))
        || no_partner(&memory);
    let partnered = !own_partners(&fact).is_empty()
        || fact.iter().enumerate().any(|(i, w)| {
            (WED.contains(&w.as_str()) || DATING.contains(&w.as_str())) && of_the_speaker(&fact, i)
        });
    single
        && (partnered || couple)
        && !denies(&fact, &fact_names)
        && !any(&fact, SINGLE)
        && !makes(&fact)
}

/// Whether `words` deny something: a [`NOT`] word that is none of the text's `names`
/// ("Mijn nieuwe vriend Sem": Portuguese "sem" is "without").
fn denies(words: &[String], names: &[String]) -> bool {
    words
        .iter()
        .any(|w| NOT.contains(&w.as_str()) && !names.contains(w))
}

/// Words that may stand between a denied "I have" or "I am" and a partner: "Ik heb geen
/// vriend", "I'm not in a relationship", "Je n'ai pas de copain", "Ik zit niet in een
/// relatie".
const NO_PARTNER_BETWEEN: &[&str] = &["in", "de", "zit", "currently", "nu", "momenteel"];

/// Whether a memory says its speaker has no partner: a partner or a relationship denied
/// after "I have" or "I am" ("Ik heb geen vriend", "I don't have a girlfriend", "Ich habe
/// keinen Freund", "I'm not in a relationship", "No tengo novio"). "I don't have a
/// girlfriend's phone number" is none.
fn no_partner(memory: &[String]) -> bool {
    any(memory, NOT)
        && memory.iter().enumerate().any(|(i, w)| {
            let partner = (PARTNER_OF_ONES_OWN.contains(&w.as_str())
                && !MAN_OR_WOMAN.contains(&w.as_str()))
                || RELATIONSHIP.contains(&w.as_str());
            let before = memory[..i].iter().rposition(|b| {
                let b = b.as_str();
                !(BEFORE_PARTNER.contains(&b)
                    || NOT.contains(&b)
                    || NO_PARTNER_BETWEEN.contains(&b)
                    || b == "t")
            });
            partner
                && memory.get(i + 1).is_none_or(|n| n != "s")
                && before.is_some_and(|b| {
                    HAVE.contains(&memory[b].as_str())
                        || ["ik", "ich", "i", "m", "am", "je"].contains(&memory[b].as_str())
                })
        })
}

/// Words that say a relationship ended, in any person: "Paul and I divorced", "wir haben
/// uns getrennt", "ci siamo lasciati". [`BROKE_UP_BEFORE`] holds those that need a word
/// after them.
const BROKE_UP: &[&str] = &[
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
const BROKE_UP_BEFORE: &[(&str, &str)] = &[
    ("broke", "up"),
    ("split", "up"),
    ("schluss", "gemacht"),
    ("uit", "elkaar"),
    ("lo", "dejamos"),
];

/// Verbs of leaving someone, which end a relationship only when the memory names the one
/// left ("J'ai quitté Léo" after "Mon copain s'appelle Léo"; "I left my job" ends none).
const LEFT: &[&str] = &[
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
const OVER: &[&str] = &[
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
const BE_OVER: &[&str] = &[
    "is", "s", "est", "ist", "e", "es", "se", "esta", "era", "foi",
];

/// Whether a clause of `text` says it is over with a partner `names` holds: "Het is uit met
/// Bram", "It's over with Tim", "C'est fini avec Léo", "Mit Jonas ist es aus". "Over" and
/// "uit" need "it" or "het" as well ("Bram is uit Leiden vertrokken" ends nothing).
fn over_with(text: &str, names: &[String]) -> bool {
    text.split([',', '.', ';', ':', '!', '?']).any(|clause| {
        let named = self::names(clause).iter().any(|n| names.contains(n));
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

/// Whether folded `words` hold a verb of making ([`MADE`]) that is not a break-up's
/// ("Schluss gemacht").
fn makes(words: &[String]) -> bool {
    words
        .iter()
        .enumerate()
        .any(|(i, w)| MADE.contains(&w.as_str()) && (i == 0 || words[i - 1] != "schluss"))
}

/// Words of being engaged, said of the speaker before the one they are engaged to: "Ik
/// ben verloofd met Pieter", "I got engaged to Sam", "Sono fidanzata con Luca".
const ENGAGED: &[&str] = &[
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

/// Words that may stand between a partner's name and a word of a break-up: "Bas heeft
/// het uitgemaakt", "Lena hat Schluss gemacht", "Léo a rompu".
const BEFORE_BREAK_UP: &[&str] = &[
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
fn said_by(words: &[String], at: usize, names: &[String]) -> bool {
    words[..at]
        .iter()
        .rev()
        .find(|w| !BEFORE_BREAK_UP.contains(&w.as_str()))
        .is_some_and(|w| names.contains(w))
}

/// "New", before a partner: "my new girlfriend", "een nieuwe vriend".
const NEW: &[&str] = &[
    "new", "nouveau", "nouvel", "nouvelle", "neue", "neuen", "neuer", "nuovo", "nuova", "nuevo",
    "nueva", "novo", "nova", "nieuwe",
];

/// Dating someone: "I'm dating Mia". ("Je sors avec Nathan" may be a night out.)
const DATING: &[&str] = &["dating"];

/// Verbs that make a friend of a "vriend" or a "Freund" ("een nieuwe vriend gemaakt",
/// "I made a new friend", "een nieuwe vriend leren kennen"): friendship, not a partner.
const MADE: &[&str] = &[
    "made", "make", "gemaakt", "maken", "fait", "hecho", "fatto", "feito", "leren", "gemacht",
];

/// Friends, in the seven languages: "vriend" and "Freund" are friends or partners.
const FRIEND: &[&str] = &[
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

/// Words that put a wedding ahead: "we're getting married next year", "on va se marier".
const AHEAD: &[&str] = &[
    "getting",
    "will",
    "going",
    "gonna",
    "next",
    "soon",
    "plan",
    "planning",
    "va",
    "allons",
    "werden",
    "wollen",
    "bald",
    "nachstes",
    "prossimo",
    "prossima",
    "vamos",
    "proximo",
    "proxima",
    "vou",
    "gaan",
    "volgend",
    "volgende",
    "binnenkort",
];

/// Words of having married, in the past or the present of being married: "we got
/// married", "je me suis mariée", "wir haben geheiratet", "mi sono sposata", "me casé"
/// (after "me" only: English "case"), "casei", "we zijn getrouwd", "tied the knot". A
/// word the text capitalises is a name ("Marie").
const MARRIED: &[&str] = &[
    "married",
    "knot",
    "marie",
    "mariee",
    "maries",
    "geheiratet",
    "verheiratet",
    "sposato",
    "sposata",
    "sposati",
    "case",
    "casado",
    "casada",
    "casados",
    "casei",
    "casamos",
    "getrouwd",
];

/// The indices of [`MARRIED`] words in `words`, of which `names` are none.
fn married_at<'a>(words: &'a [String], names: &'a [String]) -> impl Iterator<Item = usize> + 'a {
    words.iter().enumerate().filter_map(move |(i, w)| {
        let married = MARRIED.contains(&w.as_str())
            && !names.contains(w)
            && (w != "case" || i > 0 && words[i - 1] == "me");
        married.then_some(i)
    })
}

/// Partners before a wedding: a boyfriend or girlfriend, a fiancé, being engaged.
const BEFORE_WEDDING: &[&str] = &[
    "boyfriend",
    "girlfriend",
    "fiance",
    "fiancee",
    "engaged",
    "copain",
    "copine",
    "freund",
    "freundin",
    "verlobt",
    "verlobte",
    "verlobter",
    "fidanzato",
    "fidanzata",
    "ragazzo",
    "ragazza",
    "novio",
    "novia",
    "prometido",
    "prometida",
    "namorado",
    "namorada",
    "noivo",
    "noiva",
    "vriend",
    "vriendin",
    "verloofd",
    "verloofde",
];

/// The index of each of the speaker's own partners in `words`: a partner word after "my"
/// or "I have" (articles, "new" and "now" may stand between; "heb ik", "habe ich" as well),
/// and which of those words stood between. "Femme", "Frau", "man" and the like count only
/// after "my".
fn own_partners(words: &[String]) -> Vec<(usize, &[String])> {
    words
        .iter()
        .enumerate()
        .filter_map(|(i, w)| {
            let start = before_partner(words, i)?;
            let before = words[start].as_str();
            let have = HAVE.contains(&before)
                || (["ik", "ich"].contains(&before)
                    && start > 0
                    && HAVE.contains(&words[start - 1].as_str()));
            let own = (PARTNER_OF_ONES_OWN.contains(&w.as_str())
                || RELATIONSHIP.contains(&w.as_str()))
                && (MY.contains(&before) || (have && !MAN_OR_WOMAN.contains(&w.as_str())));
            own.then(|| (i, &words[start + 1..i]))
        })
        .collect()
}

/// Words of a time that "since" may lead between "I have" and a partner: "Ik heb sinds de
/// zomer een vriend", "I've had a boyfriend since last May" reads the other way.
const SINCE_WHEN: &[&str] = &[
    "de",
    "het",
    "the",
    "der",
    "dem",
    "den",
    "le",
    "la",
    "l",
    "el",
    "il",
    "o",
    "last",
    "vorig",
    "vorige",
    "letzten",
    "letztem",
    "dernier",
    "derniere",
    "summer",
    "zomer",
    "sommer",
    "ete",
    "verano",
    "estate",
    "verao",
    "winter",
    "hiver",
    "invierno",
    "inverno",
    "spring",
    "lente",
    "fruhling",
    "printemps",
    "primavera",
    "autumn",
    "herfst",
    "herbst",
    "automne",
    "otono",
    "autunno",
    "outono",
    "year",
    "jaar",
    "jahr",
    "annee",
    "ano",
    "anno",
    "month",
    "maand",
    "monat",
    "mois",
    "mes",
    "mese",
    "week",
    "woche",
    "semaine",
    "semana",
    "settimana",
    "months",
    "maanden",
    "monaten",
    "years",
    "jaren",
    "jahren",
    "weeks",
    "weken",
    "wochen",
    "two",
    "twee",
    "zwei",
    "deux",
    "dos",
    "due",
    "dois",
    "three",
    "drie",
    "drei",
    "trois",
    "tres",
    "tre",
    "paar",
    "few",
];

/// The index of the word that says whose the partner at `at` is: the last before it that
/// is none of [`BEFORE_PARTNER`] ("my new", "I have a"), nor of a time that "since" leads
/// ("heb sinds de zomer een").
fn before_partner(words: &[String], at: usize) -> Option<usize> {
    let (mut start, mut since, mut when) = (at, false, false);
    while start > 0 {
        let b = words[start - 1].as_str();
        if BEFORE_PARTNER.contains(&b) || SINCE.contains(&b) {
            since |= SINCE.contains(&b);
        } else if SINCE_WHEN.contains(&b)
            || crate::retrieve::period::MONTHS.contains(&b)
            || crate::retrieve::period::OTHER_MONTHS.contains(&b)
            || b.chars().all(|c| c.is_ascii_digit())
        {
            when = true;
        } else {
            break;
        }
        start -= 1;
    }
    (start > 0 && (since || !when)).then(|| start - 1)
}

/// "Since", before a time ([`SINCE_WHEN`]).
const SINCE: &[&str] = &["since", "sinds", "seit", "depuis", "al", "schon", "already"];

/// The names a text gives ([`super::names`]) that are no partner word: "Mon copain
/// s'appelle Léo": "leo".
fn names(text: &str) -> Vec<String> {
    super::names(text)
        .into_iter()
        .filter(|w| !PARTNER_OF_ONES_OWN.contains(&w.as_str()))
        .collect()
}

/// Words that say the speaker is in a couple by themselves: "Ik heb verkering met Lotte",
/// "Estou namorando o Rui", "Namoro com a Ana", "Je suis en couple avec Hugo" (after
/// "en").
pub(super) const COUPLE: &[&str] = &["verkering", "namorando", "namoro", "namoramos", "couple"];

/// Words of being together that say a couple only at the end of a clause, after a verb of
/// being: "Ik ben sinds kort samen met Eva", "Ich bin mit Lena zusammen", "Eva and I are
/// together now", "Stiamo insieme da maggio", "Estamos juntos". ("Ik ben samen met Eva
/// naar Parijs geweest", "We went to Rome together" are no couple.)
pub(super) const TOGETHER: &[&str] = &[
    "samen", "zusammen", "together", "insieme", "juntos", "juntas",
];

/// Verbs of being, one of which must go before a [`TOGETHER`] word.
const BE_TOGETHER: &[&str] = &[
    "ben", "zijn", "bin", "sind", "are", "re", "been", "stiamo", "sto", "estamos", "estoy", "somos",
];

/// Those of [`BE_TOGETHER`] that are the speaker's alone: "ik ben", "ich bin", "stiamo".
const BE_FIRST: &[&str] = &["ben", "bin", "stiamo", "sto", "estamos", "estoy", "somos"];

/// Whether `words[at]` is a [`TOGETHER`] word after a verb of being of the speaker's
/// ([`BE_TOGETHER`]): "ik ben … samen", "Eva and I are together".
fn together_at(words: &[String], at: usize) -> bool {
    TOGETHER.contains(&words[at].as_str())
        && words[..at].iter().enumerate().any(|(j, b)| {
            BE_TOGETHER.contains(&b.as_str())
                && (BE_FIRST.contains(&b.as_str()) || of_the_speaker(words, j))
        })
}

/// Verbs of being that "with" a partner may follow ([`coupled`]).
const BE_WITH: &[&str] = &[
    "ben", "m", "am", "bin", "suis", "sono", "sto", "estoy", "estou",
];

/// "With", before a partner's name.
const WITH: &[&str] = &["met", "with", "mit", "avec", "con", "com"];

/// Words of now, which make "I'm with Koen" a couple rather than company.
const NOW: &[&str] = &[
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
const AFTER_TOGETHER: &[&str] = &[
    "now", "again", "since", "for", "nu", "sinds", "al", "jetzt", "seit", "ora", "da", "ahora",
    "desde",
];

/// Whether a text says its speaker is in a couple without a partner word ([`COUPLE`],
/// [`TOGETHER`]; "dating" counts where the caller asks for it). Nothing may be denied.
pub(super) fn coupled(text: &str) -> bool {
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
                // "Ik ben nu met Koen", "I'm with Koen now": a verb of being, "with" a
                // name that ends the clause, and a word of now.
                let with_now = BE_WITH.contains(&w.as_str())
                    && (BE_FIRST.contains(&w.as_str()) || of_the_speaker(&words, i))
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
const COUPLE_NOUN: &[&str] = &["stel", "couple", "paar", "coppia", "pareja", "casal"];

/// Plural verbs of being before a [`COUPLE_NOUN`]: "zijn", "are", "sind", "siamo",
/// "somos", "sommes".
const BE_A_COUPLE: &[&str] = &["zijn", "are", "re", "sind", "siamo", "somos", "sommes"];

/// "I" or "we", one of which says a couple is the speaker's: "Mia and I", "wir".
const WE_OR_I: &[&str] = &[
    "i", "we", "ik", "wij", "ich", "wir", "io", "noi", "yo", "nosotros", "eu", "nos", "moi", "nous",
];

/// Verbs that give a partner's name: "my boyfriend is Dan", "mijn vriend heet Daan", "ma
/// copine s'appelle Inès".
const NAMED: &[&str] = &[
    "is", "called", "named", "heet", "heisst", "appelle", "chiama", "llama", "chama",
];

/// Verbs of being between a name and "my" partner: "Dan is my boyfriend", "Daan is mijn
/// vriend", "Léo est mon copain".
const IS: &[&str] = &["is", "s", "ist", "est", "e", "es"];

/// The names a text gives its speaker's own partner, right beside the partner word: "my
/// boyfriend Dan", "mijn vriend heet Daan", "my boyfriend is called Dan", "Dan is my
/// boyfriend". ("Brunch with my boyfriend and his friend Dan" names no partner.) "My
/// boyfriend is Tim" names him only `with_is`: "my boyfriend is Italian" names no one.
fn partner_named(text: &str, with_is: bool) -> Vec<String> {
    let mut out = Vec::new();
    for clause in text.split([',', '.', ';', ':', '!', '?', '(', ')']) {
        let (names, words) = (names(clause), crate::text::folded_words(clause));
        // A capitalised word before "is my boyfriend" is a name, even one that is a
        // function word elsewhere ("Dan").
        let raw: Vec<&str> = clause
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        let capital = |j: usize| {
            raw.len() == words.len()
                && raw[j].chars().next().is_some_and(char::is_uppercase)
                && raw[j] != "I"
        };
        let name_at = |j: usize| words.get(j).filter(|w| names.contains(w));
        for (i, between) in own_partners(&words) {
            let start = i - between.len() - 1;
            let mut at = i + 1;
            while words.get(at).is_some_and(|w| {
                (NAMED.contains(&w.as_str()) && (with_is || w != "is")) || with_is && w == "s"
            }) {
                at += 1;
            }
            let found = name_at(at).or_else(|| {
                (start >= 2 && IS.contains(&words[start - 1].as_str()) && capital(start - 2))
                    .then(|| &words[start - 2])
            });
            out.extend(found.cloned());
        }
    }
    out
}

/// Words of a relationship: "I'm in a relationship with Tim", "Ik heb een relatie met Tim".
const RELATIONSHIP: &[&str] = &[
    "relationship",
    "relatie",
    "beziehung",
    "relation",
    "relazione",
    "relacion",
    "relacao",
];

/// Whether a memory says its owner has a partner now: their own partner ("My boyfriend
/// Declan is a chef", "Mijn vriend heet Bas"), their couple ("Ik ben samen met Eva"),
/// their relationship ("Ik heb een relatie met Tim") or their marriage ("I'm married to
/// Paul"), no "ex".
fn partnered(text: &str, memory: &[String], names: &[String]) -> bool {
    !memory.iter().any(|w| w == "ex")
        && (!own_partners(memory).is_empty()
            || coupled(text)
            || married_at(memory, names).any(|i| of_the_speaker(memory, i))
            || memory
                .iter()
                .enumerate()
                .any(|(i, w)| RELATIONSHIP.contains(&w.as_str()) && of_the_speaker(memory, i)))
}

/// Articles that may stand between "with" and a name: "com o Tiago".
const ARTICLES: &[&str] = &["o", "a", "el", "la", "le", "il"];

/// Whether a clause of `text` says its speaker is no longer with a partner: no longer
/// ([`NOT`] and [`NO_LONGER`]) being ([`BE_WITH`]) "with" one of `names` (those of the
/// memory), or no longer together ([`together_at`]): "Ya no estoy con Javier", "I'm not
/// with Tom anymore", "Je ne suis plus avec Léo", "Ich bin nicht mehr mit Jonas
/// zusammen", "Já não estou com o Tiago", "We zijn niet meer samen". ("Ya no trabajo con
/// Pedro" names no partner of the memory's; "I don't work with Tom anymore" says no
/// being with him.)
fn no_longer_with(text: &str, names: &[String]) -> bool {
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

/// Whether a new fact ends the relationship a memory tells of. Three ways:
/// - the relationship ended: a word of a break-up or a divorce said of the speaker ("Bas
///   en ik zijn uit elkaar", "Paul and I divorced last year", "I'm single again"), or
///   "I left" the partner the memory names ("J'ai quitté Léo"), after a memory of the
///   speaker's partner or marriage, or no longer with the partner ("Ya no estoy con
///   Javier", [`no_longer_with`]);
/// - a new partner: "my new boyfriend", "ik heb nu een nieuwe vriend, Joris", "I'm dating
///   Mia", a couple or a relationship with someone named ("Ik heb nu verkering met Lotte",
///   "Rob and I are together now", "Ik heb sinds mei een relatie met Pieter"), after a
///   memory of a partner the fact does not name; or the partner
///   named anew beside the partner word ("Dan is my boyfriend" after "My boyfriend is
///   Tim", see [`partner_named`]);
/// - a wedding: "we got married in April", "Emma and I tied the knot", after a memory of
///   a boyfriend, a girlfriend or an engagement (a wedding ahead, "we're getting married
///   next year", leaves it).
///
/// Nothing may be denied; a friend made ("een nieuwe vriend gemaakt") is no partner. A
/// small model keeps an old partner beside a break-up or a new one about as often as not.
pub(crate) fn ends_partnership(memory: &str, fact: &str) -> bool {
    let (memory_names, fact_names) = (names(memory), names(fact));
    let (memory_text, fact_text, couple) = (memory, fact, coupled(fact));
    let (memory, fact) = (
        crate::text::folded_words(memory),
        crate::text::folded_words(fact),
    );
    if makes(&fact) || denies(&memory, &memory_names) {
        return false;
    }
    if no_longer_with(fact_text, &memory_names) {
        return partnered(memory_text, &memory, &memory_names);
    }
    if denies(&fact, &fact_names) {
        return false;
    }
    let named_in_memory = fact_names.iter().any(|n| memory_names.contains(n));
    let over = over_with(fact_text, &memory_names);
    let broke_up = fact.iter().enumerate().any(|(i, w)| {
        let ended = BROKE_UP.contains(&w.as_str())
            || SINGLE.contains(&w.as_str())
            || BROKE_UP_BEFORE
                .iter()
                .any(|&(a, b)| w == a && fact.get(i + 1).is_some_and(|n| n == b));
        let left = LEFT.contains(&w.as_str()) && named_in_memory;
        (ended || left) && of_the_speaker(&fact, i) || ended && said_by(&fact, i, &memory_names)
    });
    let new_partner = !named_in_memory
        && (own_partners(&fact)
            .iter()
            .any(|(_, between)| any(between, NEW))
            || fact
                .iter()
                .enumerate()
                .any(|(i, w)| DATING.contains(&w.as_str()) && of_the_speaker(&fact, i))
            || (couple && !fact_names.is_empty())
            // "Ik ben verloofd met Pieter", "I got engaged to Sam".
            || fact.iter().enumerate().any(|(i, w)| {
                ENGAGED.contains(&w.as_str())
                    && of_the_speaker(&fact, i)
                    && fact[i + 1..]
                        .iter()
                        .take(3)
                        .any(|n| fact_names.contains(n))
            })
            // "Ik heb sinds mei een relatie met Pieter", "I'm in a relationship with Tom".
            || fact.iter().enumerate().any(|(i, w)| {
                RELATIONSHIP.contains(&w.as_str())
                    && (of_the_speaker(&fact, i) || own_partners(&fact).iter().any(|p| p.0 == i))
                    && fact.get(i + 1).is_some_and(|w| WITH.contains(&w.as_str()))
                    && fact.get(i + 2).is_some_and(|n| fact_names.contains(n))
            })
            || {
                // "Dan is my boyfriend" after "My boyfriend is Tim": both name the partner.
                let (then, now) = (
                    partner_named(memory_text, true),
                    partner_named(fact_text, false),
                );
                !then.is_empty() && !now.is_empty() && !now.iter().any(|n| then.contains(n))
            });
    let engaged = memory.iter().enumerate().any(|(i, w)| {
        ["engaged", "verlobt", "verloofd"].contains(&w.as_str()) && of_the_speaker(&memory, i)
    }) || own_partners(&memory)
        .iter()
        .any(|&(i, _)| BEFORE_WEDDING.contains(&memory[i].as_str()));
    let wedding = !any(&fact, AHEAD)
        && married_at(&fact, &fact_names).any(|i| of_the_speaker(&fact, i))
        && married_at(&memory, &memory_names).next().is_none()
        && engaged;
    (partnered(memory_text, &memory, &memory_names) && (broke_up || over || new_partner)) || wedding
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partner_ends_a_single_life() {
        for (memory, fact) in [
            (
                "Ich bin Single",
                "Ich habe jetzt eine Freundin, sie heißt Lena",
            ),
            ("I'm single", "My new boyfriend Sam is a chef"),
            (
                "I'm single and honestly loving it",
                "I got married to Priya last weekend",
            ),
            ("Je suis célibataire", "Je me suis mariée en juin"),
            ("Soy soltera", "Tengo novio"),
            ("Ik ben vrijgezel", "Ik heb een nieuwe vriendin"),
            ("Je suis célibataire", "Ma femme s'appelle Inès"),
            ("Je suis célibataire", "Je me suis mariée avec Hugo en mai"),
            (
                "Ik ben vrijgezel",
                "Ik heb sinds kort een vriendin, ze heet Sanne",
            ),
            ("Ich bin ledig", "Ich habe endlich einen Freund"),
            // In a couple, without a partner word.
            ("Ik ben single", "Ik ben sinds kort samen met Eva"),
            ("Ich bin Single", "Ich bin seit Mai mit Lena zusammen"),
            ("Je suis célibataire", "Je suis en couple avec Hugo"),
            ("I'm single", "Eva and I are together now"),
            ("Sou solteira", "Estou namorando o Rui"),
            ("Ik ben vrijgezel", "Ik heb verkering met Lotte"),
            // No partner before.
            ("Ik heb geen vriend", "Ik heb een nieuwe vriend, Daan"),
            ("I'm not in a relationship", "I'm dating Mia now"),
            ("Ich habe keinen Freund", "Ich habe jetzt einen Freund"),
            // A time between.
            (
                "Ik ben vrijgezel",
                "Ik heb sinds de zomer een vriend, hij heet Joep",
            ),
        ] {
            assert!(ends_single_life(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // Someone else's partner or wedding.
            ("I'm single", "My brother has a girlfriend"),
            ("I'm single", "My sister got married in June"),
            // Still single, or not single in the memory.
            ("I'm single", "I don't have a boyfriend"),
            ("I'm single", "Still single, and I have a new cat"),
            ("My sister is single", "I have a girlfriend"),
            ("I'm not single", "I have a girlfriend"),
            // A woman who is no wife.
            ("Je suis célibataire", "J'ai une femme de ménage le lundi"),
            // A friend made.
            (
                "Ik ben vrijgezel",
                "Ik heb een nieuwe vriend gemaakt op yoga",
            ),
            // Together on a trip, someone else's couple.
            ("Ik ben single", "Ik ben samen met Eva naar Parijs geweest"),
            ("I'm single", "We went to Rome together"),
            ("Ich bin Single", "Wir sind zusammen nach Rom gefahren"),
            ("I'm single", "My parents are together again"),
            ("Ik ben vrijgezel", "Mijn zus heeft verkering met Tom"),
            (
                "Je suis célibataire",
                "Mes parents sont en couple depuis 30 ans",
            ),
            // A partner's thing denied, or someone else's partner.
            (
                "I don't have a girlfriend's phone number",
                "I have a girlfriend now",
            ),
            ("My sister has no boyfriend", "I have a new boyfriend"),
            // Someone else's partner seen.
            ("Ik ben vrijgezel", "Ik heb de vriend van mijn zus gezien"),
        ] {
            assert!(!ends_single_life(memory, fact), "{memory} / {fact}");
        }
    }

    #[test]
    fn a_friend_made_is_kept_beside_a_partner() {
        for (memory, fact) in [
            (
                "Mijn vriendin heet Julia",
                "Op de tennisclub heb ik een nieuwe vriend leren kennen, Thijs",
            ),
            ("My girlfriend is Zoe", "I made a new friend at yoga, Tom"),
            (
                "Mein Mann heißt Jonas",
                "Ich habe eine neue Freundin gemacht",
            ),
        ] {
            assert!(makes_a_friend(memory, fact), "{memory} / {fact}");
            assert!(!ends_partnership(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // A partner met, no friend, or no partner in the memory.
            (
                "Mijn vriendin heet Julia",
                "Ik heb mijn nieuwe vriend leren kennen op de tennisclub",
            ),
            ("My girlfriend is Zoe", "I made pancakes with Tom"),
            ("I live in Leeds", "I made a new friend at yoga, Tom"),
        ] {
            assert!(!makes_a_friend(memory, fact), "{memory} / {fact}");
        }
    }

    #[test]
    fn a_break_up_a_new_partner_or_a_wedding_ends_a_relationship() {
        for (memory, fact) in [
            // The relationship ended.
            (
                "Mijn vriend heet Bas, we wonen samen",
                "Bas en ik zijn uit elkaar",
            ),
            ("I'm married to Paul", "Paul and I divorced last year"),
            ("My girlfriend Ana is a nurse", "We broke up in March"),
            (
                "Mein Freund heißt Jonas",
                "Wir haben uns im Sommer getrennt",
            ),
            ("Mon copain s'appelle Léo", "J'ai quitté Léo"),
            (
                "Il mio ragazzo si chiama Luca",
                "Io e Luca ci siamo lasciati",
            ),
            ("My husband Tom is a pilot", "I'm single again"),
            // A new partner.
            ("Mijn vriend heet Bas", "Ik heb nu een nieuwe vriend, Joris"),
            (
                "My boyfriend Declan is a chef",
                "My new boyfriend Sam is a nurse",
            ),
            ("Mi novia se llama Carmen", "Tengo una nueva novia, Lucía"),
            ("My girlfriend is called Zoe", "I'm dating Mia now"),
            (
                "Ik heb een relatie met Tim",
                "Ik heb een nieuwe vriend, Daan",
            ),
            (
                "I'm in a relationship with Tim",
                "My new boyfriend Dan is great",
            ),
            (
                "Mijn vriend heet Tim",
                "Sinds een maand heb ik een nieuwe vriend, Daan",
            ),
            // A wedding after an engagement or a girlfriend.
            ("I'm engaged to Marco", "We got married in April"),
            (
                "My girlfriend Emma is a vet",
                "Emma and I tied the knot in June",
            ),
            ("Meine Freundin heißt Lena", "Lena und ich haben geheiratet"),
            ("Mi novia es Carmen", "Me casé con Carmen en mayo"),
            ("Mijn vriendin heet Eva", "Eva en ik zijn in juli getrouwd"),
            // In a couple with someone new, or no longer.
            ("Mijn vriendin heet Sanne", "Ik heb nu verkering met Lotte"),
            ("My boyfriend is Tim", "Rob and I are together now"),
            ("Ik ben samen met Eva", "Eva en ik zijn uit elkaar"),
            ("Mi novia se llama Lucía", "Lucía y yo lo dejamos en verano"),
            // Over with the partner named, or with someone now.
            ("Mijn partner heet Bram", "Het is uit met Bram"),
            ("My boyfriend Tim is a chef", "It's over with Tim"),
            ("Mon copain s'appelle Léo", "C'est fini avec Léo"),
            ("Mein Freund heißt Jonas", "Mit Jonas ist es aus"),
            ("Mijn partner heet Bram", "Ik ben nu met Koen"),
            ("My girlfriend is Zoe", "I'm with Mia now"),
            // The partner broke up; engaged to someone new; a couple with someone new.
            ("Mijn vriend heet Bas", "Bas heeft het uitgemaakt"),
            ("My boyfriend Tom is a chef", "Tom broke up with me"),
            ("Meine Freundin heißt Lena", "Lena hat Schluss gemacht"),
            ("Mijn vriend heet Bas", "Ik ben verloofd met Pieter"),
            ("My girlfriend is Zoe", "I got engaged to Mia"),
            ("Mijn vriend heet Bas", "Joris en ik zijn een stel"),
            ("My girlfriend is Zoe", "Sara and I are a couple now"),
            // No longer with the partner, or together.
            ("Mi novio se llama Javier", "Ya no estoy con Javier"),
            ("My boyfriend Tom is a chef", "I'm not with Tom anymore"),
            ("Mon copain s'appelle Léo", "Je ne suis plus avec Léo"),
            (
                "Mein Freund heißt Jonas",
                "Ich bin nicht mehr mit Jonas zusammen",
            ),
            ("O meu namorado é o Tiago", "Já não estou com o Tiago"),
            ("Il mio ragazzo si chiama Marco", "Non sto più con Marco"),
            ("Mijn vriendin heet Sanne", "We zijn niet meer samen"),
            // The partner named anew, or the relationship of some years.
            ("My boyfriend is Tim", "Dan is my boyfriend"),
            ("Mijn vriend heet Tim", "Mijn vriend Daan is kok"),
            (
                "Ik heb al twee jaar een relatie met Tim",
                "Ik heb een nieuwe vriend, Daan",
            ),
            // A name that is a word of denial elsewhere.
            ("Mijn vriend heet Ruben", "Mijn nieuwe vriend Sem is kok"),
            // A relationship with someone the memory does not name; a "vriendje".
            (
                "Mijn vriend heet Joris",
                "Ik heb sinds mei een relatie met Pieter",
            ),
            ("My girlfriend is Zoe", "I'm in a relationship with Mia"),
            (
                "Mijn vriendje Ruben is kok",
                "Ik heb een nieuwe vriend, Bram",
            ),
            (
                "Mijn vriendin heet Eva",
                "Mijn nieuwe vriendinnetje heet Lies",
            ),
        ] {
            assert!(!makes_a_friend(memory, fact), "{memory} / {fact}");
            assert!(ends_partnership(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // Someone else's break-up, partner or wedding.
            (
                "My wife Sara is a teacher",
                "My sister broke up with her boyfriend",
            ),
            (
                "My wife Sara is a teacher",
                "My brother got married in June",
            ),
            (
                "My boyfriend Declan is a chef",
                "My friend has a new boyfriend",
            ),
            // Not a break-up: a leg broken, time split, each other seen, a job left.
            ("My wife Sara is a teacher", "I broke my leg skiing"),
            (
                "My wife Sara is a teacher",
                "I split my time between Leeds and York",
            ),
            ("Mijn vriendin heet Eva", "We zien elkaar elke dag"),
            ("My wife Sara is a teacher", "I left my job in May"),
            ("Mon copain s'appelle Léo", "J'ai quitté mon travail"),
            // The same partner, a friend made, a denial.
            (
                "My boyfriend is Sam",
                "My new boyfriend Sam cooks every night",
            ),
            (
                "Mijn vriendin Lotte en ik wonen in Utrecht",
                "Ik heb op mijn werk een nieuwe vriend gemaakt, Thijs",
            ),
            ("Mijn vriendin heet Eva", "Ik heb een nieuwe vriend gemaakt"),
            (
                "My wife Sara is a teacher",
                "We never split up, despite everything",
            ),
            // A wedding ahead, a name, or no partner before it.
            ("I'm engaged to Marco", "We're getting married next spring"),
            ("My girlfriend Emma is a vet", "I had dinner with Marie"),
            ("I'm married to Paul", "We got married in 2010"),
            ("I collect vinyl records", "We got married in April"),
            ("My ex-boyfriend lives in Leeds", "I'm dating Mia now"),
            ("My sister is in a relationship", "I'm dating Mia now"),
            (
                "Mijn zus heeft een relatie",
                "Ik heb een nieuwe vriend, Daan",
            ),
            ("My girlfriend Emma is a vet", "I'm on the case"),
            // Together with the same partner.
            ("My boyfriend is Tim", "Tim and I are together again"),
            ("My boyfriend is Tim", "We've been together for five years"),
            (
                "Mijn vriendin heet Sanne",
                "Sanne en ik zijn al drie jaar samen",
            ),
            // Over, but not with the partner; with someone, but not now or not alone.
            ("Mijn partner heet Bram", "Bram is uit Leiden vertrokken"),
            ("My boyfriend Tim is a chef", "The match is over, Tim won"),
            (
                "My boyfriend Tim is a chef",
                "It's over with Ana, my old boss",
            ),
            ("My girlfriend is Zoe", "I'm with Mia at the cinema now"),
            ("My girlfriend is Zoe", "I'm with Mia"),
            // Someone else's break-up, engagement or couple.
            (
                "My boyfriend Tom is a chef",
                "Tom's sister broke up with Sam",
            ),
            ("My girlfriend is Zoe", "My brother got engaged to Mia"),
            ("My girlfriend is Zoe", "Mia and Sam are a couple"),
            ("Mijn vriend heet Bas", "Bas en ik zijn een stel"),
            // No longer with someone else, or no longer doing something together.
            ("Mi novio se llama Javier", "Ya no trabajo con Pedro"),
            (
                "My boyfriend Tom is a chef",
                "I don't play with Sam anymore",
            ),
            (
                "My boyfriend Tom is a chef",
                "I don't work with Tom anymore",
            ),
            (
                "Mi novio se llama Javier",
                "Ya no juego al pádel con Javier",
            ),
            ("Mijn vriendin heet Sanne", "We sporten niet meer samen"),
            (
                "Mi novio se llama Javier",
                "Ya estoy con Javier desde hace años",
            ),
            ("My sister is in a relationship", "I'm not with Tom anymore"),
            // A partner named beside someone else, or first named.
            (
                "My boyfriend is Tim",
                "Sunday brunch with my boyfriend and his friend Dan",
            ),
            ("I have a boyfriend", "My boyfriend Dan is a chef"),
            ("My boyfriend is Tim", "My boyfriend Tim is a chef"),
            ("My boyfriend is Tim", "My boyfriend is Italian"),
            // A relationship with the same partner, or someone else's friend.
            (
                "Mijn vriend heet Joris",
                "Ik heb al twee jaar een relatie met Joris",
            ),
            (
                "Mijn vriendin heet Eva",
                "Mijn zoon speelt met zijn vriendje Tim",
            ),
        ] {
            assert!(!ends_partnership(memory, fact), "{memory} / {fact}");
        }
    }
}
