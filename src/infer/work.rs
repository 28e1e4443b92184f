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
    works(&memory) && retired(&fact) && !any(&fact, WORKING) && !any(&fact, VOLUNTEER)
}

/// Whether folded `words` tell of the speaker's paid work: a [`WORKING`] word, not "work
/// out", or a post held somewhere ([`holds_a_post`]); nothing denied, no one else, no
/// volunteering, no retirement.
fn works(words: &[String]) -> bool {
    (words.iter().enumerate().any(|(i, w)| {
        WORKING.contains(&w.as_str()) && words.get(i + 1).is_none_or(|next| next != "out")
    }) || holds_a_post(words))
        && !any(words, NOT)
        && !any(words, SOMEONE_ELSE)
        && !any(words, VOLUNTEER)
        && !retired(words)
}

/// First-person verbs of being, each with the words that say where a post is held after
/// it: "I'm a barista at a café", "Je suis caissière dans un supermarché", "Ich bin
/// Lehrerin an einer Schule", "Sono infermiera presso l'ospedale", "Soy profesora en un
/// instituto", "Sou enfermeiro num centro de saúde", "Ik ben kok bij een restaurant".
/// English "in" is left out ("I'm a big believer in…"), and so is Dutch "en" ("and").
const I_AM_AT: &[(&str, &[&str])] = &[
    ("m", &["at", "for"]),
    ("am", &["at", "for"]),
    ("suis", &["chez", "dans", "a"]),
    ("bin", &["bei", "an"]),
    ("sono", &["presso", "in"]),
    ("soy", &["en"]),
    ("sou", &["em", "no", "na", "num", "numa"]),
    ("ben", &["bij"]),
];

/// Articles before a post: "a barista", "une caissière".
const A: &[&str] = &[
    "a", "an", "un", "une", "ein", "eine", "uno", "una", "um", "uma", "een",
];

/// What a speaker may be somewhere without holding a post there: a student, a member, a
/// fan, a regular, a guest.
const NO_POST: &[&str] = &[
    "student",
    "students",
    "etudiant",
    "etudiante",
    "studentin",
    "studente",
    "studentessa",
    "estudiante",
    "estudante",
    "member",
    "membre",
    "mitglied",
    "socio",
    "socia",
    "lid",
    "fan",
    "regular",
    "guest",
];

/// Whether folded `words` say the speaker holds a post somewhere: a first-person verb of
/// being ([`I_AM_AT`]; "m" and "am" after "I"), an article ([`A`]; English needs one: "I'm
/// vegan at home"), a word or up to three (the post, none of [`NO_POST`] nor
/// [`VOLUNTEER`]), then a word of that verb's language saying where. "I'm a nurse" says no more than "I'm a vegan", and
/// is left to the model.
pub(super) fn holds_a_post(words: &[String]) -> bool {
    words.iter().enumerate().any(|(i, w)| {
        let Some((_, at)) = I_AM_AT.iter().find(|(be, _)| be == w) else {
            return false;
        };
        let article = words.get(i + 1).is_some_and(|a| A.contains(&a.as_str()));
        let english = ["m", "am"].contains(&w.as_str());
        if english && (i == 0 || words[i - 1] != "i" || !article) {
            return false;
        }
        let start = i + 1 + usize::from(article);
        let post = words.get(start..).unwrap_or_default();
        let ends = post.iter().take(4).position(|w| at.contains(&w.as_str()));
        ends.is_some_and(|end| {
            end > 0 && !any(&post[..end], NO_POST) && !any(&post[..end], VOLUNTEER)
        })
    })
}

/// Phrases that say a job changed or ended: "I changed jobs", "my new job", "Ho cambiato
/// lavoro", "Cambié de trabajo", "Ich habe den Job gewechselt", "Ik heb een nieuwe baan".
const JOB_CHANGED: &[&[&str]] = &[
    &["changed", "jobs"],
    &["changed", "job"],
    &["switched", "jobs"],
    &["new", "job"],
    &["quit", "my", "job"],
    &["left", "my", "job"],
    &["handed", "in", "my", "notice"],
    &["resigned"],
    &["demissionne"],
    &["demissionnee"],
    &["dimesso"],
    &["dimessa"],
    &["renuncie"],
    &["demiti"],
    &["changed", "careers"],
    &["change", "de", "travail"],
    &["change", "de", "boulot"],
    &["change", "d", "emploi"],
    &["change", "de", "job"],
    &["nouveau", "travail"],
    &["nouveau", "boulot"],
    &["nouvel", "emploi"],
    &["nouveau", "job"],
    &["quitte", "mon", "travail"],
    &["quitte", "mon", "boulot"],
    &["quitte", "mon", "emploi"],
    &["neuen", "job"],
    &["neue", "stelle"],
    &["neue", "arbeit"],
    &["job", "gewechselt"],
    &["stelle", "gewechselt"],
    &["arbeit", "gewechselt"],
    &["job", "gekundigt"],
    &["stelle", "gekundigt"],
    &["cambiato", "lavoro"],
    &["nuovo", "lavoro"],
    &["lasciato", "il", "lavoro"],
    &["sono", "licenziato"],
    &["sono", "licenziata"],
    &["cambie", "de", "trabajo"],
    &["cambiado", "de", "trabajo"],
    &["cambie", "de", "empleo"],
    &["nuevo", "trabajo"],
    &["nuevo", "empleo"],
    &["deje", "el", "trabajo"],
    &["deje", "mi", "trabajo"],
    &["deje", "mi", "empleo"],
    &["mudei", "de", "emprego"],
    &["mudei", "de", "trabalho"],
    &["troquei", "de", "emprego"],
    &["novo", "emprego"],
    &["novo", "trabalho"],
    &["deixei", "o", "emprego"],
    &["deixei", "o", "meu", "emprego"],
    &["nieuwe", "baan"],
    &["andere", "baan"],
    &["van", "baan", "veranderd"],
    &["van", "baan", "gewisseld"],
    &["baan", "opgezegd"],
    &["ontslag", "genomen"],
];

/// Verbs of leaving a line of work, in the past, that come before it: "I left teaching",
/// "Dejé la enseñanza", "J'ai quitté l'enseignement", "Ho lasciato l'insegnamento",
/// "Deixei o ensino", "Ik ben gestopt met lesgeven".
const LEFT: &[&str] = &[
    "left",
    "quit",
    "stopped",
    "quitte",
    "abandonne",
    "arrete",
    "deje",
    "dejado",
    "abandone",
    "lasciato",
    "abbandonato",
    "smesso",
    "deixei",
    "abandonei",
    "larguei",
    "gestopt",
];

/// German and Dutch participles of leaving, which end the clause after the line of work
/// left: "Ich habe den Lehrerberuf aufgegeben", "Ik heb het onderwijs verlaten".
const LEFT_AT_THE_END: &[&str] = &[
    "aufgegeben",
    "verlassen",
    "ausgestiegen",
    "aufgehort",
    "verlaten",
    "opgegeven",
];

/// Lines of work and professions, which a person leaves as they leave a job: "teaching",
/// "la enseñanza", "den Lehrerberuf", "het onderwijs", "the police", "my career".
const FIELDS: &[&str] = &[
    "teaching",
    "nursing",
    "medicine",
    "law",
    "journalism",
    "banking",
    "finance",
    "retail",
    "hospitality",
    "academia",
    "army",
    "military",
    "navy",
    "police",
    "profession",
    "career",
    "enseignement",
    "journalisme",
    "armee",
    "metier",
    "carriere",
    "ensenanza",
    "docencia",
    "magisterio",
    "enfermeria",
    "medicina",
    "abogacia",
    "periodismo",
    "hosteleria",
    "ejercito",
    "policia",
    "profesion",
    "insegnamento",
    "insegnare",
    "giornalismo",
    "esercito",
    "polizia",
    "professione",
    "avvocatura",
    "ensino",
    "enfermagem",
    "jornalismo",
    "exercito",
    "profissao",
    "advocacia",
    "lehramt",
    "lehrerberuf",
    "schuldienst",
    "unterrichten",
    "journalismus",
    "bundeswehr",
    "polizei",
    "polizeidienst",
    "beruf",
    "onderwijs",
    "lesgeven",
    "verpleging",
    "journalistiek",
    "leger",
    "politie",
    "advocatuur",
];

/// Words that may stand between a verb of leaving and the line of work left: articles,
/// the speaker's possessives, "met" ("gestopt met lesgeven"), "di" ("smesso di insegnare").
const BEFORE_A_FIELD: &[&str] = &[
    "the", "my", "l", "la", "le", "el", "il", "lo", "o", "a", "den", "die", "das", "dem", "het",
    "met", "mit", "di", "de", "mon", "ma", "mi", "mio", "mia", "meu", "minha", "mijn", "meinen",
    "meine", "aus",
];

/// Words of when that may follow the line of work left: "I quit nursing last year",
/// "Dejé la enseñanza hace un año", "l'année dernière", "… now I run a bakery".
const WHEN: &[&str] = &[
    "now",
    "maintenant",
    "ahora",
    "adesso",
    "ora",
    "agora",
    "jetzt",
    "nu",
    "last",
    "ago",
    "recently",
    "year",
    "years",
    "month",
    "months",
    "yesterday",
    "hace",
    "annee",
    "dernier",
    "derniere",
    "pasado",
    "pasada",
    "scorso",
    "scorsa",
    "passado",
    "passada",
    "vorig",
    "vorige",
    "letztes",
    "letzten",
];

/// Whether a clause of `fact` (cut at punctuation) says the speaker left a line of work
/// ([`FIELDS`], or a German "-beruf": "den Pflegeberuf aufgegeben"): a verb of [`LEFT`],
/// at most two [`BEFORE_A_FIELD`] words, then the field, which ends the clause or is
/// followed by a function word or a word of [`WHEN`] ("I left teaching in May"; "I left
/// the police station" leaves no profession); or the field right before a participle of
/// [`LEFT_AT_THE_END`] ("den Lehrerberuf aufgegeben").
pub(super) fn left_a_field(fact: &str) -> bool {
    fact.split([',', ';', ':', '.', '!', '?']).any(|clause| {
        let words = crate::text::folded_words(clause);
        words.iter().enumerate().any(|(i, w)| {
            if !FIELDS.contains(&w.as_str()) && !w.ends_with("beruf") {
                return false;
            }
            let ends_there = words.get(i + 1).is_none_or(|next| {
                crate::text::content_words(next).is_empty() || WHEN.contains(&next.as_str())
            });
            let left_before = (i.saturating_sub(3)..i).any(|v| {
                LEFT.contains(&words[v].as_str()) && all_of(&words[v + 1..i], BEFORE_A_FIELD)
            });
            let left_after = words
                .get(i + 1)
                .is_some_and(|next| LEFT_AT_THE_END.contains(&next.as_str()));
            (left_before && ends_there) || left_after
        })
    })
}

/// Whether every one of the folded `words` is one of `of` (none at all is every one).
fn all_of(words: &[String], of: &[&str]) -> bool {
    words.iter().all(|w| of.contains(&w.as_str()))
}

/// Someone other than the speaker, whose job a change may be: "My son changed jobs" (and
/// a partner: [`super::partners::PARTNER_OF_ONES_OWN`]). Not the possessives of the
/// speaker ("my", "mon", "mein", "mio", "mi", "meu", "mijn"), which the phrases use.
const OTHERS: &[&str] = &[
    "he",
    "she",
    "they",
    "his",
    "her",
    "their",
    "son",
    "daughter",
    "brother",
    "sister",
    "mum",
    "mom",
    "dad",
    "mother",
    "father",
    "friend",
    "il",
    "elle",
    "ils",
    "elles",
    "fils",
    "fille",
    "frere",
    "soeur",
    "er",
    "sie",
    "seine",
    "ihre",
    "sohn",
    "tochter",
    "bruder",
    "schwester",
    "lui",
    "lei",
    "figlio",
    "figlia",
    "fratello",
    "sorella",
    "ella",
    "hijo",
    "hija",
    "hermano",
    "hermana",
    "ele",
    "ela",
    "mulher",
    "filho",
    "filha",
    "irmao",
    "irma",
    "hij",
    "zij",
    "zoon",
    "dochter",
    "broer",
    "zus",
];

/// Words of a job looked for, or of one more job beside the first: "I'm looking for a new
/// job", "a second job", "Nebenjob", "bijbaan".
const NOT_A_CHANGE: &[&str] = &[
    "looking",
    "search",
    "searching",
    "interview",
    "applied",
    "applying",
    "second",
    "side",
    "extra",
    "cherche",
    "recherche",
    "entretien",
    "deuxieme",
    "suche",
    "bewerbung",
    "beworben",
    "zweiten",
    "zweite",
    "nebenjob",
    "cerco",
    "cercando",
    "colloquio",
    "secondo",
    "busco",
    "buscando",
    "entrevista",
    "segundo",
    "procuro",
    "procurando",
    "zoek",
    "zoeken",
    "sollicitatie",
    "gesolliciteerd",
    "tweede",
    "bijbaan",
];

/// Whether a new fact says its speaker changed or left their job ([`JOB_CHANGED`], or a
/// line of work left: [`left_a_field`]; no one else's, nothing denied, nothing ahead, no
/// job looked for, no second job, no "also") while the memory tells of their work
/// ([`works`]): "Ho cambiato lavoro: adesso sono autista di autobus" after "Lavoro come
/// cuoco in una trattoria", "Dejé la enseñanza" after "Soy profesora en un instituto".
/// A small model keeps the two side by side when the new job's words share nothing with
/// the old one's. A memory that names a job with no verb of working ("Faccio il cuoco",
/// "I'm a nurse") is left to the model.
pub(crate) fn changes_jobs(memory: &str, fact: &str) -> bool {
    let (memory, words) = (
        crate::text::folded_words(memory),
        crate::text::folded_words(fact),
    );
    works(&memory)
        && (super::says_phrase(&words, JOB_CHANGED) || left_a_field(fact))
        && !any(&words, OTHERS)
        && !super::people::about_another(fact)
        && !any(&words, super::partners::PARTNER_OF_ONES_OWN)
        && !any(&words, NOT)
        && !any(&words, AHEAD)
        && !any(&words, NOT_A_CHANGE)
        && !super::additional(fact)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_of_job_ends_the_job_before() {
        for (memory, fact) in [
            (
                "Lavoro come cuoco in una trattoria",
                "Ho cambiato lavoro: adesso sono autista di autobus",
            ),
            (
                "I work as a plumber",
                "I changed jobs, I'm a driving instructor now",
            ),
            ("I work at a call centre", "I quit my job in May"),
            (
                "Je travaille dans une banque",
                "J'ai changé de travail, je suis prof",
            ),
            (
                "Ich arbeite als Koch",
                "Ich habe den Job gewechselt und bin jetzt Gärtner",
            ),
            ("Trabajo de camarera", "Cambié de trabajo en marzo"),
            (
                "Trabalho num hotel",
                "Mudei de emprego, agora sou enfermeira",
            ),
            (
                "Ik werk in een garage",
                "Ik heb een nieuwe baan als buschauffeur",
            ),
            // A post held somewhere.
            (
                "I'm a barista at a café in Camden",
                "I handed in my notice and started as a web developer",
            ),
            (
                "Soy profesora de matemáticas en un instituto de Zaragoza",
                "Cambié de trabajo: ahora llevo una librería",
            ),
            (
                "Je suis caissière dans un supermarché",
                "J'ai démissionné en juin",
            ),
            ("Ik ben kok bij een restaurant", "Ik heb een nieuwe baan"),
        ] {
            assert!(changes_jobs(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // Someone else's job, or a job looked for, planned or denied.
            ("I work as a plumber", "My wife changed jobs"),
            ("Lavoro come cuoco", "Mio fratello ha un nuovo lavoro"),
            (
                "Ich arbeite als Krankenpfleger",
                "Mein Kumpel Timo hat einen neuen Job bei Siemens",
            ),
            ("I work as a plumber", "I'm looking for a new job"),
            ("I work as a plumber", "I'll start a new job next month"),
            ("I work as a plumber", "I have not changed jobs after all"),
            // One more job beside the first.
            (
                "I work as a plumber",
                "I also have a new job at a bar on weekends",
            ),
            (
                "Ik werk in een garage",
                "Ik heb er een nieuwe baan bij als bijbaan",
            ),
            // No job in the memory: a hobby, someone else's work, working out.
            ("I play chess on Sundays", "I changed jobs"),
            ("My husband works as a nurse", "I changed jobs"),
            ("I work out at the gym", "I changed jobs"),
            // A state or a place, no post: a student, a member, no word of where.
            ("I'm a student at Leeds", "I got a new job"),
            ("I'm a member of a rowing club", "I got a new job"),
            ("I'm a volunteer at the food bank", "I got a new job"),
            ("I'm a nurse", "I changed jobs"),
            ("I'm vegan at home", "I changed jobs"),
            ("Ik ben vegetariër en ik fiets", "Ik heb een nieuwe baan"),
        ] {
            assert!(!changes_jobs(memory, fact), "{memory} / {fact}");
        }
    }

    #[test]
    fn leaving_a_line_of_work_ends_the_job_in_it() {
        let memory = "Soy profesora de matemáticas en un instituto de Zaragoza";
        for fact in [
            "Dejé la enseñanza",
            "I left teaching in May",
            "I quit nursing last year",
            "J'ai quitté l'enseignement",
            "Ho lasciato l'insegnamento",
            "Ho smesso di insegnare",
            "Deixei o ensino",
            "Ik ben gestopt met lesgeven",
            "Ik heb het onderwijs verlaten",
            "Ich habe den Lehrerberuf aufgegeben",
            "Ich bin aus dem Schuldienst ausgestiegen",
            "Ich habe den Pflegeberuf aufgegeben und studiere jetzt Informatik",
            "J'ai quitté l'enseignement, maintenant je suis guide touristique",
            "I left law and now I run a bakery",
            "I quit nursing, bought a farm and keep goats",
        ] {
            assert!(changes_jobs(memory, fact), "{fact}");
        }
        for fact in [
            // A place left, not a profession; a field named with no leaving.
            "I left the police station at five",
            "I stopped teaching piano on Saturdays",
            "I love teaching",
            "Teaching left me tired",
            // Someone else, or not done.
            "My sister left teaching",
            "I never left teaching",
            "I'll leave teaching next year",
        ] {
            assert!(!changes_jobs(memory, fact), "{fact}");
        }
        assert!(!changes_jobs("I play chess", "I left teaching"));
    }

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
            ("Sou enfermeiro num centro de saúde", "Estou aposentado"),
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
