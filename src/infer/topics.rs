//! The things about a person that one fact can end: who their partner is, what they eat,
//! whether they work. A change of these rarely shares words or meaning with the memory it
//! ends ("That relationship ended in spring" and "My boyfriend Declan is a chef", "I
//! retired" and "I work as an accountant"), so similarity alone does not find the memory;
//! a fact and a memory that speak of the same topic are compared as well.
//!
//! Words are matched whole, lowercase and without diacritics (as [`crate::text`] folds
//! them), in the languages memlane is evaluated in: English, French, German, Italian,
//! Spanish, Portuguese and Dutch.

/// A thing about a person that a new fact can change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Topic {
    /// A partner, and being with one: boyfriend, wife, married, divorced, a relationship.
    Partner,
    /// What a person eats: vegan, vegetarian, meat, fish.
    Diet,
    /// Working, and no longer working: a job, retired, quit.
    Work,
    /// Where a person lives: a memory of their home ("J'habite à Rennes") or a move of
    /// theirs to a named place ("Nous nous sommes installés à Grenoble"), which seldom
    /// resemble each other enough for similarity to pair them.
    Home,
    /// Drinking alcohol, and no longer drinking it: "I love a cold beer", "I quit drinking".
    Drink,
}

impl Topic {
    const ALL: [Topic; 5] = [
        Topic::Partner,
        Topic::Diet,
        Topic::Work,
        Topic::Home,
        Topic::Drink,
    ];

    /// The words of the topic, folded. A text speaks of a topic when it has one of its
    /// words, or of a partner when it says its speaker is in a couple
    /// ([`super::partners::coupled`]), of work when it says where its speaker holds a post
    /// ([`super::work::holds_a_post`]) or left a line of work
    /// ([`super::work::left_a_field`]); of a diet when it names one
    /// ([`super::diets::names_a_diet`]); of a home, only when it says where its owner lives
    /// or moved to ([`super::moves::speaks_of_home`]); of drinking, only when it says its
    /// speaker drinks alcohol or stopped ([`super::tastes::speaks_of_drinking`]).
    pub(crate) fn words(self) -> &'static [&'static str] {
        match self {
            Topic::Partner => PARTNER,
            Topic::Diet => DIET,
            Topic::Work => WORK,
            Topic::Home => super::moves::LIVE,
            Topic::Drink => super::tastes::DRINKS,
        }
    }

    /// The words a keyword search for the topic's memories looks for: its [`words`](Self::words),
    /// and for a partner the words of a couple without a partner word as well ("Wir sind
    /// seit zwei Jahren zusammen", "Ik heb verkering met Lotte").
    pub(crate) fn searched(self) -> Vec<&'static str> {
        let couple: &[&[&str]] = match self {
            Topic::Partner => &[super::partners::TOGETHER, super::partners::COUPLE],
            _ => &[],
        };
        self.words()
            .iter()
            .chain(couple.iter().copied().flatten())
            .copied()
            .collect()
    }

    /// The labels of the default taxonomy ([`crate::config::DEFAULT_LABELS`]) that the
    /// model gives memories of the topic, by which a search finds those its words do not
    /// ("I'm a barista at a café in Camden"). None for a partner, whose memories are
    /// labelled as any of the family's are.
    pub(crate) fn labels(self) -> &'static [&'static str] {
        match self {
            Topic::Work => &["professional_details"],
            _ => &[],
        }
    }

    fn in_text(self, text: &str, words: &[String]) -> bool {
        match self {
            Topic::Home => super::moves::speaks_of_home(text),
            Topic::Drink => super::tastes::speaks_of_drinking(text),
            // "Ik heb verkering met Lotte", "Ik ben samen met Eva": a couple without a
            // partner word.
            Topic::Partner => {
                words.iter().any(|w| PARTNER.contains(&w.as_str()))
                    || super::partners::coupled(text)
            }
            // "I'm a barista at a café": a post held somewhere, without a word of work;
            // "Dejé la enseñanza": a line of work left.
            Topic::Work => {
                any(words, WORK)
                    || super::work::holds_a_post(words)
                    || super::work::left_a_field(text)
            }
            // "Il medico mi ha messo a dieta chetogenica": a diet named.
            Topic::Diet => any(words, DIET) || super::diets::names_a_diet(words),
        }
    }
}

const PARTNER: &[&str] = &[
    // English
    "boyfriend",
    "girlfriend",
    "partner",
    "husband",
    "wife",
    "fiance",
    "fiancee",
    "spouse",
    "married",
    "divorced",
    "engaged",
    "single",
    "relationship",
    "dating",
    "ex",
    // French
    "copain",
    "copine",
    "mari",
    "femme",
    "epoux",
    "epouse",
    "compagnon",
    "compagne",
    "mariee",
    "divorcee",
    "relation",
    "celibataire",
    // German
    "freund",
    "freundin",
    "mann",
    "frau",
    "ehemann",
    "ehefrau",
    "partnerin",
    "verheiratet",
    "verlobt",
    "ledig",
    "geschieden",
    "beziehung",
    "getrennt",
    // Spanish
    "novio",
    "novia",
    "marido",
    "esposo",
    "esposa",
    "mujer",
    "pareja",
    "casado",
    "casada",
    "soltero",
    "soltera",
    "divorciado",
    "divorciada",
    "relacion",
    // Italian
    "fidanzato",
    "fidanzata",
    "ragazzo",
    "ragazza",
    "moglie",
    "sposato",
    "sposata",
    "divorziato",
    "relazione",
    // Portuguese
    "namorado",
    "namorada",
    "noivo",
    "noiva",
    "mulher",
    "solteiro",
    "solteira",
    "relacao",
    // Dutch
    "vriend",
    "vriendin",
    "vrouw",
    "echtgenoot",
    "getrouwd",
    "vrijgezel",
    "relatie",
    "gescheiden",
    "verloofd",
    "verloofde",
    "verkering",
    "alleenstaand",
];

const DIET: &[&str] = &[
    // English
    "vegan",
    "vegetarian",
    "veggie",
    "pescatarian",
    "plantbased",
    // "Plant-based", for a keyword search.
    "plant",
    "meat",
    "fish",
    "chicken",
    "dairy",
    // French
    "vegane",
    "vegetarien",
    "vegetarienne",
    "vegetalien",
    "vegetalienne",
    "viande",
    "poisson",
    // German
    "veganer",
    "veganerin",
    "vegetarier",
    "vegetarierin",
    "vegetarisch",
    "fleisch",
    "fisch",
    // Spanish and Portuguese
    "vegano",
    "vegana",
    "vegetariano",
    "vegetariana",
    "carne",
    "pescado",
    "pollo",
    "peixe",
    "frango",
    // Italian
    "vegani",
    "vegetariani",
    "pesce",
    // Dutch
    "veganist",
    "vegetariers",
    "vlees",
    "kip",
    // Diets that leave out gluten, lactose, carbohydrates, pork or sugar
    // ([`super::diets`]), and foods they rule out
    "gluten",
    "glutine",
    "coeliac",
    "celiac",
    "lactose",
    "lactosa",
    "lattosio",
    "keto",
    "carb",
    "carbs",
    "halal",
    "kosher",
    "sugar",
    "sucre",
    "zucker",
    "azucar",
    "bread",
    "milk",
    "pasta",
    "pork",
    "bacon",
    "chocolate",
    "brot",
    "milch",
    "pane",
    "leche",
    "leite",
    "brood",
    "melk",
    // Eating again, or no longer
    "eat",
    "eating",
    "mange",
    "mangiare",
];

const WORK: &[&str] = &[
    // English
    "job",
    "work",
    "works",
    "working",
    "employed",
    "career",
    "retired",
    "retirement",
    "pension",
    "quit",
    "resigned",
    "notice",
    "fired",
    "redundant",
    "unemployed",
    // French
    "travail",
    "travaille",
    "travailler",
    "emploi",
    "metier",
    "retraite",
    "retraitee",
    "demissionne",
    "licencie",
    "chomage",
    // German
    "arbeite",
    "arbeitet",
    "arbeiten",
    "arbeit",
    "beruf",
    "rente",
    "ruhestand",
    "rentner",
    "rentnerin",
    "gekundigt",
    "arbeitslos",
    // Spanish
    "trabajo",
    "trabaja",
    "trabajar",
    "empleo",
    "jubilado",
    "jubilada",
    "jubilacion",
    "despedido",
    // Italian
    "lavoro",
    "lavora",
    "lavorare",
    "pensione",
    "pensionato",
    "pensionata",
    "licenziato",
    "licenziata",
    "disoccupato",
    // Portuguese
    "trabalho",
    "trabalha",
    "trabalhar",
    "emprego",
    "aposentado",
    "aposentada",
    "reformado",
    // Dutch
    "werk",
    "werkt",
    "werken",
    "baan",
    "gepensioneerd",
    "ontslag",
];

/// The topics a text speaks of, in [`Topic::ALL`]'s order.
pub(crate) fn topics(text: &str) -> Vec<Topic> {
    let words = diet_words(text);
    Topic::ALL
        .into_iter()
        .filter(|topic| topic.in_text(text, &words))
        .collect()
}

/// Whether a memory and a fact share no topic while one of them speaks of one: a job and
/// a milk preference, a home and a visit, a peanut allergy and a vegetarian diet. A model
/// that puts such a fact in the memory's place needs more to show for it (see
/// [`super::replaces`]).
pub(crate) fn leaves_topic(memory: &str, fact: &str) -> bool {
    let of_memory = topics(memory);
    let of_fact = topics(fact);
    (!of_memory.is_empty() || !of_fact.is_empty()) && !of_memory.iter().any(|t| of_fact.contains(t))
}

/// Words that say a person eats no meat nor fish: vegetarian and vegan.
const NO_MEAT: &[&str] = &[
    "vegan",
    "vegetarian",
    "veggie",
    "vegane",
    "vegetarien",
    "vegetarienne",
    "vegetalien",
    "vegetalienne",
    "veganer",
    "veganerin",
    "vegetarier",
    "vegetarierin",
    "vegetarisch",
    "vegano",
    "vegana",
    "vegetariano",
    "vegetariana",
    "vegani",
    "vegetariani",
    "veganist",
    "plantbased",
    "plantaardig",
];

/// A text's words folded, "plant-based" (and "plant based") one word: "plantbased".
fn diet_words(text: &str) -> Vec<String> {
    let mut words = crate::text::folded_words(text);
    while let Some(i) = words
        .windows(2)
        .position(|w| w[0] == "plant" && w[1] == "based")
    {
        words.splice(i..i + 2, ["plantbased".to_owned()]);
    }
    words
}

/// Meat and fish, which neither a vegetarian nor a vegan eats.
const MEAT: &[&str] = &[
    "meat",
    "fish",
    "chicken",
    "beef",
    "pork",
    "steak",
    "bacon",
    "ham",
    "salmon",
    "tuna",
    "viande",
    "poisson",
    "poulet",
    "boeuf",
    "porc",
    "jambon",
    "fleisch",
    "fisch",
    "hahnchen",
    "huhn",
    "rind",
    "schwein",
    "wurst",
    "schinken",
    "carne",
    "pescado",
    "pollo",
    "cerdo",
    "jamon",
    "pesce",
    "maiale",
    "prosciutto",
    "peixe",
    "frango",
    "porco",
    "presunto",
    "vlees",
    "vis",
    "kip",
    "rundvlees",
    "varkensvlees",
];

/// Eating, in the forms a person uses of themselves (the first person, the infinitive and
/// the participle): "eats", "isst", "mangia" are about someone else.
pub(super) const EAT: &[&str] = &[
    "eat", "eating", "ate", "eaten", "esse", "essen", "gegessen", "mange", "remange", "manger",
    "mangio", "mangiare", "mangiato", "como", "comer", "comido", "comi", "eet", "eten", "gegeten",
];

/// Words that deny what follows: "I don't eat meat" keeps a vegetarian one. Not Italian
/// "mai", which comes with "non" and is French for May ("Je me suis mariée en mai").
pub(super) const NOT: &[&str] = &[
    "no", "not", "never", "don", "didn", "doesn", "won", "isn", "aren", "wasn", "weren", "hasn",
    "haven", "hadn", "couldn", "wouldn", "cannot", "without", "ne", "n", "pas", "jamais", "sans",
    "nicht", "kein", "keine", "keinen", "nie", "niemals", "ohne", "nunca", "sin", "non", "senza",
    "nao", "sem", "niet", "geen", "nooit", "zonder",
];

/// Whether any of the folded `words` is one of `of`.
pub(super) fn any(words: &[String], of: &[&str]) -> bool {
    words.iter().any(|w| of.contains(&w.as_str()))
}

/// Whether a new fact says its speaker eats meat or fish (a word of eating and one of
/// meat or fish, no denial, no vegetarian word of its own) while the memory says they are
/// vegetarian or vegan, or eat no meat ([`refuses_meat`]): the diet was given up ("Ich
/// esse inzwischen wieder Fisch und Eier" after "Ich bin Veganerin", "Seit dem Sommer esse
/// ich wieder Fleisch" after "Ich esse kein Fleisch"; eggs or cheese after a vegan memory),
/// or that they are no longer vegetarian or vegan ("I'm no longer vegetarian",
/// [`no_longer`]). A small model keeps the two side by side, asked whether the memory was
/// replaced; that meat is not vegetarian is what it misses.
pub(crate) fn gives_up_diet(memory: &str, fact: &str) -> bool {
    let (memory, fact) = (diet_words(memory), diet_words(fact));
    let vegan = any(&memory, VEGAN);
    let eats = any(&fact, EAT)
        && (any(&fact, MEAT) || vegan && any(&fact, ANIMAL_PRODUCTS))
        && !any(&fact, NOT)
        && !any(&fact, NO_MEAT);
    (any(&memory, NO_MEAT) || refuses_meat(&memory, &fact)) && (eats || no_longer(&fact))
}

/// Meat itself, which a person who eats none eats in no form.
const MEAT_ITSELF: &[&str] = &["meat", "viande", "fleisch", "carne", "vlees"];

/// Whether a memory (its folded words) says its speaker eats no meat, of which the fact
/// eats some: a word of eating, a denial and meat itself, or the very meat or fish the
/// fact names ("I don't eat meat", "Ich esse kein Fleisch", "No como pescado" before
/// "Ahora como pescado"). Not said of someone else ("My son doesn't eat meat"), and not of
/// another meat ("I don't eat pork" stays true beside "I eat chicken").
fn refuses_meat(memory: &[String], fact: &[String]) -> bool {
    any(memory, EAT)
        && any(memory, NOT)
        && !any(memory, SOMEONE_ELSE)
        && memory.iter().any(|w| {
            MEAT.contains(&w.as_str()) && (MEAT_ITSELF.contains(&w.as_str()) || fact.contains(w))
        })
}

/// Words that, with a denial, say a thing is no longer so: "no longer", "not anymore",
/// "ne … plus", "nicht mehr", "niet meer", "non … più", "ya no".
pub(super) const NO_LONGER: &[&str] = &["longer", "anymore", "plus", "mehr", "meer", "piu", "ya"];

/// Whether a fact says its speaker is no longer vegetarian or vegan: "I'm no longer
/// vegetarian", "I stopped being vegan", "Je ne suis plus végétarienne", "Ik ben geen
/// vegetariër meer".
fn no_longer(fact: &[String]) -> bool {
    let stopped_being = fact
        .windows(2)
        .any(|w| ["stopped", "quit"].contains(&w[0].as_str()) && w[1] == "being");
    fact.iter().enumerate().any(|(i, w)| {
        NO_MEAT.contains(&w.as_str())
            && (of_the_speaker(fact, i) || stopped_being)
            && (stopped_being || any(fact, NOT) && any(fact, NO_LONGER))
    })
}

/// Words of a vegan, who eats no animal product at all.
const VEGAN: &[&str] = &[
    "vegan",
    "vegane",
    "veganer",
    "veganerin",
    "vegano",
    "vegana",
    "vegani",
    "veganist",
    "vegetalien",
    "vegetalienne",
];

/// Animal products besides meat and fish, which a vegetarian eats and a vegan does not:
/// "I eat eggs and cheese again" gives up a vegan diet.
const ANIMAL_PRODUCTS: &[&str] = &[
    "egg",
    "eggs",
    "cheese",
    "dairy",
    "milk",
    "butter",
    "yogurt",
    "yoghurt",
    "honey",
    "oeufs",
    "oeuf",
    "fromage",
    "lait",
    "beurre",
    "eier",
    "kase",
    "milch",
    "uova",
    "formaggio",
    "burro",
    "huevos",
    "queso",
    "leche",
    "ovos",
    "queijo",
    "leite",
    "eieren",
    "kaas",
    "melk",
    "zuivel",
];

/// Verbs of liking, in the first person: "I love steak", "J'aime la viande", "Me encanta
/// el jamón".
pub(super) const LIKE: &[&str] = &[
    "love", "like", "adore", "aime", "adore", "liebe", "mag", "amo", "adoro", "encanta", "gusta",
    "hou",
];

/// Words that put someone else in a speaker's place: possessives and third-person
/// pronouns ("My son is vegan", "Meine Freundin ist Vegetarierin", "Lui è vegano").
pub(super) const SOMEONE_ELSE: &[&str] = &[
    "my", "his", "her", "their", "he", "she", "they", "mon", "ma", "mes", "son", "sa", "ses",
    "leur", "il", "elle", "ils", "elles", "mein", "meine", "meiner", "meinem", "sein", "seine",
    "ihr", "ihre", "er", "sie", "mio", "mia", "miei", "mie", "suo", "sua", "lui", "lei", "loro",
    "mis", "su", "sus", "el", "ella", "ellos", "meu", "minha", "meus", "minhas", "seu", "ele",
    "ela", "eles", "mijn", "haar", "hij", "zij", "ze",
];

/// Words that say the speaker is the subject: pronouns and first-person verbs of being
/// and becoming ("I'm", "je suis", "ich bin", "sono", "soy", "estoy", "sou", "ik ben").
const SPEAKER: &[&str] = &[
    "i",
    "m",
    "am",
    "we",
    "je",
    "j",
    "suis",
    "sommes",
    "nous",
    "ich",
    "bin",
    "wir",
    "uns",
    "io",
    "sono",
    "siamo",
    "yo",
    "soy",
    "somos",
    "estoy",
    "estamos",
    "estou",
    "me",
    "nos",
    "eu",
    "sou",
    "virei",
    "tornei",
    "ik",
    "ben",
    "vind",
    "wij",
    "ons",
    "devenu",
    "devenue",
    "geworden",
    "diventato",
    "diventata",
    "hice",
    "vuelto",
];

/// Whether `words[at]` is said of the speaker: among the four words before it there is a
/// [`SPEAKER`] word, and no [`SOMEONE_ELSE`] word stands between.
pub(super) fn of_the_speaker(words: &[String], at: usize) -> bool {
    for w in words[at.saturating_sub(4)..at].iter().rev() {
        if SOMEONE_ELSE.contains(&w.as_str()) {
            return false;
        }
        if SPEAKER.contains(&w.as_str()) {
            return true;
        }
    }
    false
}

/// Whether a new fact says its speaker went vegetarian or vegan (a vegetarian word said
/// of the speaker, nothing denied) while the memory says they eat or like meat or fish
/// (a verb of eating or liking in the first person, nothing denied, no vegetarian word):
/// "Depuis cet été je suis devenue végétarienne" after "Je mange de tout, surtout de la
/// viande rouge". Or went vegan while the memory says they are vegetarian (not vegan,
/// nothing denied): "I went fully vegan last spring" after "I'm vegetarian"; not a vegan
/// thing ([`super::diets::of_a_thing`]: "I tried a vegan restaurant"). The other
/// direction of [`gives_up_diet`].
pub(crate) fn takes_up_diet(memory: &str, fact: &str) -> bool {
    let (memory, fact) = (diet_words(memory), diet_words(fact));
    let eats_meat = (any(&memory, EAT) || any(&memory, LIKE))
        && any(&memory, MEAT)
        && !any(&memory, NOT)
        && !any(&memory, NO_MEAT);
    let vegetarian = any(&memory, NO_MEAT) && !any(&memory, VEGAN) && !any(&memory, NOT);
    let taken_up = |diet: &[&str]| {
        fact.iter().enumerate().any(|(i, w)| {
            diet.contains(&w.as_str())
                && of_the_speaker(&fact, i)
                && !super::diets::of_a_thing(&fact, i)
        })
    };
    !any(&fact, NOT) && (eats_meat && taken_up(NO_MEAT) || vegetarian && taken_up(VEGAN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_and_the_memory_it_ends_share_a_topic() {
        let shared = |fact: &str, memory: &str| -> Vec<Topic> {
            let of_memory = topics(memory);
            topics(fact)
                .into_iter()
                .filter(|t| of_memory.contains(t))
                .collect()
        };
        for (fact, memory, topic) in [
            (
                "We broke up, that relationship is over",
                "My girlfriend Ana is a nurse",
                Topic::Partner,
            ),
            (
                "Je suis divorcée depuis mars",
                "Mon mari s'appelle Luc",
                Topic::Partner,
            ),
            (
                "Ik heb een nieuwe vriendin",
                "Ik ben getrouwd met Sanne",
                Topic::Partner,
            ),
            (
                "I started eating fish again",
                "I'm a vegetarian",
                Topic::Diet,
            ),
            (
                "Ik heb nu verkering met Lotte",
                "Mijn vriendin heet Sanne",
                Topic::Partner,
            ),
            ("Como carne otra vez", "Soy vegetariana", Topic::Diet),
            (
                "I've started eating chicken again",
                "I'm plant-based",
                Topic::Diet,
            ),
            (
                "Ich bin seit Mai in Rente",
                "Ich arbeite als Koch",
                Topic::Work,
            ),
            ("Sono in pensione", "Lavoro in banca", Topic::Work),
            ("I retired last year", "I work as a pilot", Topic::Work),
            (
                "I handed in my notice",
                "I'm a barista at a café in Camden",
                Topic::Work,
            ),
            (
                "Nous nous sommes installés à Grenoble cet été",
                "J'habite à Rennes",
                Topic::Home,
            ),
            (
                "I moved to Valencia last month",
                "Carlos lives in Madrid",
                Topic::Home,
            ),
            (
                "I quit drinking completely in January",
                "I drink a glass of red wine every evening",
                Topic::Drink,
            ),
        ] {
            assert_eq!(shared(fact, memory), [topic], "{fact} / {memory}");
        }
        // A volunteer's post, a student's, a member's is no work.
        for memory in [
            "I'm a volunteer at the food bank",
            "I'm a student at Leeds",
            "Soy socia en un club de remo",
        ] {
            assert!(!topics(memory).contains(&Topic::Work), "{memory}");
        }
        // Every word of a topic is written as texts are read: lowercase, no diacritics.
        for topic in [Topic::Partner, Topic::Diet, Topic::Work] {
            for word in topic.words() {
                assert!(topics(word).contains(&topic), "{word}");
            }
        }
        for word in Topic::Home.words().iter().chain(Topic::Drink.words()) {
            assert_eq!(crate::text::folded_words(word), [*word]);
        }
        // A hobby, a pet or a stay away is none of them.
        for text in [
            "I'm in Lisbon for the weekend",
            "I play the cello on Sundays",
            "We adopted a cat called Miso",
        ] {
            assert!(topics(text).is_empty(), "{text}: {:?}", topics(text));
        }
    }

    /// A fact leaves a memory's topic when the memory speaks of one and the fact of none
    /// of the memory's: a job and a milk preference, a home and a stay away. A memory of
    /// no topic is left by no fact.
    #[test]
    fn a_fact_leaves_the_topic_of_a_memory_it_does_not_speak_of() {
        for (memory, fact) in [
            ("Trabajo de enfermera", "Tampoco tomo leche de vaca"),
            ("Ik werk in een bakkerij", "Ik woon nu alleen"),
            ("J'habite à Nantes", "Je passe le week-end à Bordeaux"),
            ("I'm vegetarian", "I moved to Porto"),
            // A memory of no topic, a fact of one.
            (
                "I'm allergic to peanuts",
                "I've gone vegetarian since March",
            ),
            (
                "Tenho um cão chamado Bolt",
                "Comecei a trabalhar numa farmácia",
            ),
            // A diet named by no word of the topic.
            (
                "Faccio l'architetto",
                "Il medico mi ha messo a dieta chetogenica",
            ),
        ] {
            assert!(leaves_topic(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            ("I'm vegetarian", "I went fully vegan last spring"),
            (
                "Ich esse kein Fleisch",
                "Seit dem Sommer esse ich wieder Fleisch",
            ),
            ("Ich arbeite als Busfahrer", "Ich bin in Rente seit Juli"),
            (
                "My boyfriend Declan is a chef",
                "That relationship ended in spring",
            ),
            ("My sister Katrin is a vet", "My sister's name is Catrin"),
            (
                "I drink black coffee every morning",
                "I usually have green tea",
            ),
            ("I love bread", "I'm gluten-free now"),
        ] {
            assert!(!leaves_topic(memory, fact), "{memory} / {fact}");
        }
    }

    #[test]
    fn eating_meat_again_gives_up_a_vegetarian_diet() {
        for (memory, fact) in [
            (
                "Ich bin Veganerin",
                "Ich esse inzwischen wieder Fisch und Eier",
            ),
            ("I'm vegetarian", "I started eating chicken again"),
            (
                "Soy vegetariana desde 2019",
                "Ahora como pescado dos veces por semana",
            ),
            ("Je suis végétarien", "Je remange de la viande"),
            ("Ik ben vegetariër", "Ik eet weer vlees"),
            ("I'm vegan", "I eat eggs and cheese again"),
            ("I'm plant-based", "I've started eating chicken again"),
            // No longer so.
            ("I'm vegetarian", "I'm no longer vegetarian"),
            (
                "I don't eat meat, I'm vegetarian",
                "I'm not vegetarian anymore",
            ),
            ("I'm a vegetarian", "I stopped being vegetarian last year"),
            ("Je suis végétarienne", "Je ne suis plus végétarienne"),
            ("Ik ben vegetariër", "Ik ben geen vegetariër meer"),
            ("Sono vegana", "Non sono più vegana"),
            ("Ich bin Veganerin", "Ich esse wieder Käse"),
            // A memory of eating no meat.
            (
                "Ich esse kein Fleisch",
                "Seit dem Sommer esse ich wieder Fleisch",
            ),
            ("I don't eat meat", "I started eating chicken again"),
            ("No como pescado", "Ahora como pescado"),
        ] {
            assert!(gives_up_diet(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // Denied, still vegetarian, or about someone else.
            ("I'm vegetarian", "I don't eat meat or fish"),
            ("Je suis végétarienne", "Je ne mange jamais de poisson"),
            ("I'm vegetarian", "I'm still vegetarian, but I eat eggs"),
            ("I'm vegetarian", "My son eats chicken every day"),
            ("Sono vegetariano", "Mio marito mangia carne"),
            // No meat, or no diet in the memory.
            ("I'm vegan", "I eat a lot of Thai curries"),
            ("I love steak", "I eat fish on Fridays"),
            // Still so, or someone else no longer.
            ("I'm vegetarian", "I'm not vegan, just vegetarian"),
            ("I'm vegetarian", "My sister is no longer vegetarian"),
            // Eggs are no meat: a vegetarian eats them.
            ("I'm vegetarian", "I eat eggs most mornings"),
            // Cooking is not eating.
            ("I'm vegetarian", "I cooked chicken for the kids"),
            // Another meat than the one not eaten, or someone else's.
            ("I don't eat pork", "I eat chicken every week"),
            ("My son doesn't eat meat", "I eat meat again"),
            (
                "Ich esse kein Fleisch",
                "Ich esse kein Fleisch mehr, aber Fisch",
            ),
        ] {
            assert!(!gives_up_diet(memory, fact), "{memory} / {fact}");
        }
    }

    #[test]
    fn going_vegetarian_ends_a_memory_of_eating_meat() {
        for (memory, fact) in [
            (
                "Je mange de tout, surtout de la viande rouge",
                "Depuis cet été je suis devenue végétarienne",
            ),
            ("I eat meat most days", "I went vegan in January"),
            ("I love steak", "I'm vegetarian now"),
            ("Ich esse gern Fleisch", "Ich bin seit März Vegetarierin"),
            ("Como pollo casi todos los días", "Me hice vegano"),
            ("I eat meat most days", "I went plant-based in May"),
            // Vegan after vegetarian.
            ("I'm vegetarian", "I went fully vegan last spring"),
            ("Sono vegetariana", "Ora sono vegana"),
        ] {
            assert!(takes_up_diet(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // Someone else's diet, or denied.
            ("I eat meat most days", "My daughter went vegan"),
            ("Ich esse gern Fleisch", "Meine Freundin ist Vegetarierin"),
            ("I love steak", "I'm not vegetarian, just eating less meat"),
            // No meat eaten or liked in the memory.
            ("I cook chicken for the kids", "I'm vegan now"),
            ("My husband loves steak", "I'm vegetarian now"),
            // Vegan already, not vegan, or someone else vegan.
            ("I'm vegan", "I'm fully vegan now"),
            ("I'm vegetarian", "I'm not vegan"),
            ("I'm vegetarian", "My girlfriend went vegan"),
            // A vegan thing, not a diet.
            ("I'm vegetarian", "I tried a new vegan restaurant downtown"),
            (
                "I'm vegetarian",
                "I baked a vegan chocolate cake for my sister",
            ),
            (
                "Je mange de la viande",
                "J'ai trouvé un restaurant végétarien",
            ),
        ] {
            assert!(!takes_up_diet(memory, fact), "{memory} / {fact}");
        }
    }
}
