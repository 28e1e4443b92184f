//! A diet taken up that rules out what a memory says its speaker eats or drinks: "I'm
//! gluten-free now" after "I love bread and eat it with every meal", "I'm lactose
//! intolerant, so I've cut out dairy" after "I drink a glass of milk every morning", a
//! low-carb diet after pasta every night, halal after bacon, sugar given up after
//! chocolate every day, no fish after a pescatarian diet; and such a diet given up ("I quit
//! keto", "I stopped intermittent fasting"); and one whole way of eating for another ("I'm
//! vegetarian now" after "I do keto"). A small model keeps the two side by side: that
//! bread has gluten is what it misses. (Meat and a vegetarian diet are
//! [`super::topics::takes_up_diet`]'s and [`super::topics::gives_up_diet`]'s.)
//!
//! Words are matched whole, lowercase and without diacritics, in English, French, German,
//! Italian, Spanish, Portuguese and Dutch.

use super::tastes::{DRINK, STOPPED};
use super::topics::{any, of_the_speaker, EAT, LIKE, NOT};

/// A diet: the words that name it alone, those of what it leaves out (which name it with
/// a word of [`AVOIDING`]), the foods it rules out, the words by which a memory says its
/// speaker eats those foods without a verb ("I'm pescatarian"), and whether it is a whole
/// way of eating, of which a speaker keeps one at a time ([`switches_diet`]: keto,
/// vegetarian, paleo; not gluten-free, which goes with any).
struct Diet {
    named: &'static [&'static str],
    left_out: &'static [&'static str],
    foods: &'static [&'static str],
    eaten_by: &'static [&'static str],
    one_way: bool,
}

/// The diets a fact may take up, give up or switch to.
const DIETS: &[Diet] = &[
    Diet {
        named: &[
            "coeliac",
            "celiac",
            "coeliaque",
            "celiaque",
            "zoliakie",
            "celiaco",
            "celiaca",
            "celiachia",
            "coeliakie",
            "glutenfrei",
            "glutenvrij",
        ],
        left_out: &["gluten", "glutine"],
        foods: &[
            "bread",
            "pasta",
            "pizza",
            "beer",
            "cake",
            "cakes",
            "croissant",
            "croissants",
            "baguette",
            "bagels",
            "toast",
            "pain",
            "pates",
            "biere",
            "brot",
            "brotchen",
            "nudeln",
            "bier",
            "kuchen",
            "pane",
            "birra",
            "cerveza",
            "pao",
            "cerveja",
            "brood",
        ],
        eaten_by: &[],
        one_way: false,
    },
    Diet {
        named: &["laktoseintolerant", "laktosefrei", "lactosevrij"],
        left_out: &[
            "lactose",
            "lactosa",
            "lattosio",
            "laktose",
            "dairy",
            "laitiers",
            "milchprodukte",
            "latticini",
            "lacteos",
            "laticinios",
            "zuivel",
        ],
        foods: &[
            "milk",
            "cheese",
            "yogurt",
            "yoghurt",
            "butter",
            "cream",
            "lait",
            "fromage",
            "yaourt",
            "beurre",
            "milch",
            "kase",
            "joghurt",
            "sahne",
            "formaggio",
            "burro",
            "panna",
            "leche",
            "queso",
            "yogur",
            "mantequilla",
            "leite",
            "queijo",
            "iogurte",
            "manteiga",
            "melk",
            "kaas",
            "boter",
        ],
        eaten_by: &[],
        one_way: false,
    },
    Diet {
        named: &[
            "keto",
            "ketogenic",
            "cetogenique",
            "cetogene",
            "ketogene",
            "chetogenica",
            "cetogenica",
            "ketogeen",
            "lowcarb",
            "atkins",
        ],
        left_out: &[
            "carb",
            "carbs",
            "carbohydrates",
            "glucides",
            "kohlenhydrate",
            "carboidrati",
            "carbohidratos",
            "carboidratos",
            "koolhydraten",
        ],
        foods: &[
            "bread",
            "pasta",
            "rice",
            "potatoes",
            "pizza",
            "noodles",
            "pain",
            "pates",
            "riz",
            "brot",
            "nudeln",
            "reis",
            "kartoffeln",
            "pane",
            "riso",
            "patate",
            "arroz",
            "patatas",
            "pao",
            "batatas",
            "brood",
            "rijst",
            "aardappelen",
        ],
        eaten_by: &[],
        one_way: true,
    },
    Diet {
        named: &["halal", "kosher", "casher", "koscher"],
        left_out: &[
            "pork",
            "porc",
            "schwein",
            "schweinefleisch",
            "maiale",
            "cerdo",
            "porco",
            "varkensvlees",
        ],
        foods: &[
            "pork",
            "bacon",
            "ham",
            "porc",
            "jambon",
            "lardons",
            "saucisson",
            "schweinefleisch",
            "schinken",
            "speck",
            "maiale",
            "prosciutto",
            "salame",
            "cerdo",
            "jamon",
            "chorizo",
            "porco",
            "presunto",
            "varkensvlees",
            "spek",
        ],
        eaten_by: &[],
        one_way: false,
    },
    Diet {
        named: &[],
        left_out: &[
            "sugar", "sucre", "zucker", "zucchero", "azucar", "acucar", "suiker",
        ],
        foods: &[
            "chocolate",
            "sweets",
            "candy",
            "cake",
            "cakes",
            "biscuits",
            "cookies",
            "desserts",
            "soda",
            "chocolat",
            "bonbons",
            "gateaux",
            "schokolade",
            "sussigkeiten",
            "kuchen",
            "cioccolato",
            "dolci",
            "caramelle",
            "dulces",
            "caramelos",
            "pasteles",
            "doces",
            "bolos",
            "chocolade",
            "snoep",
        ],
        eaten_by: &[],
        one_way: false,
    },
    Diet {
        named: &[
            "vegetarian",
            "vegan",
            "vegetarien",
            "vegetarienne",
            "vegetarier",
            "vegetarierin",
            "veganer",
            "veganerin",
            "vegetariano",
            "vegetariana",
            "vegano",
            "vegana",
            "veganist",
        ],
        left_out: &[
            "fish", "poisson", "fisch", "pesce", "pescado", "peixe", "vis",
        ],
        foods: &[
            "fish",
            "salmon",
            "tuna",
            "sushi",
            "seafood",
            "prawns",
            "poisson",
            "saumon",
            "thon",
            "fisch",
            "lachs",
            "thunfisch",
            "pesce",
            "salmone",
            "tonno",
            "pescado",
            "atun",
            "marisco",
            "peixe",
            "salmao",
            "atum",
            "bacalhau",
            "vis",
            "zalm",
            "tonijn",
        ],
        eaten_by: &[
            "pescatarian",
            "pescetarian",
            "pescetarien",
            "pescetarienne",
            "pescetarier",
            "pescetarierin",
            "pescetariano",
            "pescetariana",
            "pescatariano",
            "pescatariana",
            "pescotarier",
        ],
        one_way: true,
    },
    Diet {
        named: &["paleo", "carnivore", "carnivoro", "carnivora"],
        left_out: &[],
        foods: &[],
        eaten_by: &[],
        one_way: true,
    },
    Diet {
        named: &[
            "fasting",
            "intermittent",
            "intermittente",
            "intermitente",
            "intervallfasten",
            "ayuno",
            "digiuno",
            "jejum",
            "vasten",
        ],
        left_out: &[
            "breakfast",
            "dejeuner",
            "fruhstuck",
            "colazione",
            "desayuno",
            "ontbijt",
        ],
        foods: &[
            "breakfast",
            "dejeuner",
            "fruhstuck",
            "colazione",
            "desayuno",
            "ontbijt",
        ],
        eaten_by: &[],
        one_way: false,
    },
];

/// Words that, with what a diet leaves out, say it is left out (as do the verbs of giving
/// up of [`STOPPED`]: [`avoiding`]): "gluten-free", "sans gluten", "no dairy", "cut out
/// sugar", "lactose intolerant", "allergic", "low-carb", "Ich vertrage kein Gluten", "I
/// skip breakfast", "Je saute le petit-déjeuner".
const AVOIDING: &[&str] = &[
    "free",
    "frei",
    "vrij",
    "sans",
    "sin",
    "senza",
    "sem",
    "ohne",
    "zonder",
    "without",
    "no",
    "kein",
    "keine",
    "keinen",
    "geen",
    "cut",
    "giving",
    "avoid",
    "avoiding",
    "intolerant",
    "intolerance",
    "intolerante",
    "intollerante",
    "allergic",
    "allergique",
    "allergisch",
    "allergico",
    "allergica",
    "alergico",
    "alergica",
    "low",
    "off",
    "verzichte",
    "larguei",
    "skip",
    "skips",
    "skipping",
    "saute",
    "salto",
    "pulo",
];

/// Words of eating again, which take a diet back rather than up: "I eat bread again".
const AGAIN: &[&str] = &[
    "again",
    "wieder",
    "nouveau",
    "otra",
    "nuovo",
    "novamente",
    "weer",
];

/// Whether folded `words` say something is left out: a word of [`AVOIDING`] or a verb of
/// giving up ([`STOPPED`]: "I quit sugar", "Deixei o açúcar").
fn avoiding(words: &[String]) -> bool {
    any(words, AVOIDING) || any(words, STOPPED)
}

/// Whether a fact takes a diet back rather than up: eating again, a diet denied ("I'm not
/// gluten-free", "nicht", "pas", "niet") or no longer kept ("no longer", "any more", "ne
/// … plus", "non … più", "ya no", "já não"). Not "kein … mehr" ("Ich vertrage kein Gluten
/// mehr"), which leaves out.
fn taken_back(words: &[String]) -> bool {
    let no_longer = words
        .windows(2)
        .any(|w| (w[0] == "no" && w[1] == "longer") || (w[0] == "any" && w[1] == "more"));
    let no_longer = no_longer
        || words.windows(2).any(|w| {
            ["ya", "ja"].contains(&w[0].as_str()) && ["no", "nao"].contains(&w[1].as_str())
        });
    let ne_plus = any(words, &["ne", "n", "non"]) && any(words, &["plus", "piu"]);
    no_longer
        || ne_plus
        || any(words, AGAIN)
        || any(words, &["not", "nicht", "pas", "niet", "anymore"])
}

/// Words a speaker's sentence begins with: "I only eat raw food, no fish at all", "Me he
/// convertido al islam y ahora como halal"; and first-person verbs of giving something up
/// or keeping to a diet that need no pronoun ("Deixei o açúcar", "Sigo una dieta sin
/// azúcar").
const I: &[&str] = &[
    "i", "je", "j", "ich", "io", "yo", "eu", "ik", "me", "deje", "deixei", "larguei", "sigo",
    "seguo",
];

/// Whether `words[at]` is said of the speaker: [`of_the_speaker`], or the words begin
/// with the speaker, or a verb in the first person of a language that drops its pronoun
/// ([`super::looks::I_DO`]: "Ahora hago la dieta keto") stands before it, and none of
/// someone else's words stands before it.
fn the_speakers(words: &[String], at: usize) -> bool {
    let mine = words.first().is_some_and(|w| I.contains(&w.as_str()))
        || any(&words[..at], super::looks::I_DO);
    // Spanish "he" before a participle is "I have": "Me he convertido".
    let someone_else = words[..at].iter().enumerate().any(|(i, w)| {
        super::topics::SOMEONE_ELSE.contains(&w.as_str())
            && !(w == "he"
                && words
                    .get(i + 1)
                    .is_some_and(|next| next.ends_with("ado") || next.ends_with("ido")))
    });
    of_the_speaker(words, at) || mine && !someone_else
}

/// Whether a new fact says its speaker took up a diet (one of [`DIETS`]: a word that names
/// it, or what it leaves out with a word of [`AVOIDING`], said of the speaker; nothing
/// taken back) that rules out a food the memory says they eat or drink (a verb of eating,
/// liking or drinking and the food, or a word that eats it, such as "pescatarian";
/// nothing denied, and no diet of its own: "I eat gluten-free bread").
pub(crate) fn rules_out(memory: &str, fact: &str) -> bool {
    let (memory, fact) = (words(memory), words(fact));
    if taken_back(&fact) || any(&memory, NOT) {
        return false;
    }
    DIETS.iter().any(|diet| {
        let eats = (any(&memory, EAT) || any(&memory, LIKE) || any(&memory, DRINK))
            && names_food(&memory, diet.foods)
            || any(&memory, diet.eaten_by);
        let kept = any(&memory, diet.named) || any(&memory, diet.left_out) && avoiding(&memory);
        let stopped = any(&fact, diet.named) && any(&fact, STOPPED);
        keeps(diet, &fact) && !stopped && eats && !kept
    })
}

/// Whether a new fact says its speaker gave up a diet a memory says they keep (one of
/// [`DIETS`], said of the speaker, not taken back): the diet named and stopped ("I quit
/// keto", "Ho smesso la dieta chetogenica") or taken back ("I'm no longer gluten-free"),
/// or a food it rules out eaten or drunk, nothing denied or left out ("I eat bread
/// again" after "I'm gluten-free", "Como chocolate outra vez" after "Deixei o açúcar").
/// The other direction of [`rules_out`].
pub(crate) fn ends_diet(memory: &str, fact: &str) -> bool {
    let (memory, fact) = (words(memory), words(fact));
    // "I'm not gluten-free" keeps no diet; "Je ne mange pas de sucre" does.
    if taken_back(&memory) && !(any(&memory, EAT) && any(&memory, NOT)) {
        return false;
    }
    DIETS.iter().any(|diet| {
        let named = any(&fact, diet.named) || any(&fact, diet.left_out) && avoiding(&fact);
        let stopped = named && (any(&fact, STOPPED) || taken_back(&fact));
        let eats = (any(&fact, EAT) || any(&fact, DRINK))
            && (names_food(&fact, diet.foods) || any(&fact, diet.left_out))
            && !any(&fact, NOT)
            && !avoiding(&fact)
            && !any(&fact, diet.named);
        keeps(diet, &memory) && (stopped || eats)
    })
}

/// Whether folded `words` say their speaker keeps `diet`: a word that names it, or what
/// it leaves out with a word of [`AVOIDING`] or a denied verb of eating ("I don't eat
/// sugar", "Ich esse keinen Zucker"), said of the speaker and not of a thing
/// ([`of_a_thing`]: "I tried a vegan restaurant").
fn keeps(diet: &Diet, words: &[String]) -> bool {
    let avoids = avoiding(words) || any(words, EAT) && any(words, NOT);
    words.iter().enumerate().any(|(i, w)| {
        (diet.named.contains(&w.as_str()) || diet.left_out.contains(&w.as_str()) && avoids)
            && the_speakers(words, i)
            && !of_a_thing(words, i)
    })
}

/// Things, not foods, that a diet's word may say what kind they are: "a vegan
/// restaurant", "un restaurant végétarien", "a gluten-free bakery", "keto recipes".
const THINGS: &[&str] = &[
    "restaurant",
    "restaurants",
    "restaurante",
    "restaurantes",
    "ristorante",
    "ristoranti",
    "cafe",
    "bakery",
    "boulangerie",
    "backerei",
    "panaderia",
    "padaria",
    "bakkerij",
    "food",
    "recipe",
    "recipes",
    "recette",
    "recettes",
    "rezept",
    "rezepte",
    "ricetta",
    "ricette",
    "receta",
    "recetas",
    "receita",
    "receitas",
    "recept",
    "recepten",
    "cookbook",
    "kochbuch",
    "menu",
    "options",
    "shop",
    "market",
    "festival",
    "blog",
    "cuisine",
    "cucina",
    "cocina",
    "cozinha",
    "keuken",
    "products",
    "produits",
    "produkte",
    "prodotti",
    "productos",
    "produtos",
    "producten",
];

/// Words for "without", which stand between a thing and what it leaves out.
const WITHOUT: &[&str] = &["without", "sans", "sin", "senza", "sem", "ohne", "zonder"];

/// Whether the diet's word `words[at]` says what kind a thing or a dish is ([`THINGS`],
/// or a food of [`DIETS`]): one of the two words after it, past words of [`AVOIDING`]
/// ("gluten-free bakery", "a vegan chocolate cake"), or the word right before it, past a
/// word for "without" ([`WITHOUT`]: "boulangerie sans gluten", "una pizza vegana"); not
/// past a comma ([`COMMA`]: "I'm lactose intolerant, milk makes me ill"; "raw food, no
/// fish").
pub(super) fn of_a_thing(words: &[String], at: usize) -> bool {
    let thing = |w: &String| {
        THINGS.contains(&w.as_str()) || DIETS.iter().any(|d| d.foods.contains(&w.as_str()))
    };
    let mut after = words[at + 1..]
        .iter()
        .skip_while(|w| AVOIDING.contains(&w.as_str()))
        .take_while(|w| *w != COMMA)
        .take(2);
    let before = words[..at]
        .iter()
        .rev()
        .find(|w| !WITHOUT.contains(&w.as_str()));
    after.any(thing) || before.is_some_and(|w| w != COMMA && thing(w))
}

/// The word that stands for a comma in a text's [`words`].
const COMMA: &str = ",";

/// Whether a new fact says its speaker took up a whole way of eating ([`Diet::one_way`],
/// said of the speaker, nothing taken back or stopped) that a memory of theirs does not
/// keep while it keeps another: "These days I'm a vegetarian" after "I do keto for my
/// health", "I went paleo" after "I'm vegan". Vegetarian and vegan are one way here
/// ([`super::topics::takes_up_diet`] reads the step between them); a diet that goes with
/// any, such as gluten-free, changes none.
pub(crate) fn switches_diet(memory: &str, fact: &str) -> bool {
    let (memory, fact) = (words(memory), words(fact));
    if taken_back(&fact) || any(&fact, STOPPED) || taken_back(&memory) {
        return false;
    }
    let ways = |words: &[String]| -> Vec<usize> {
        DIETS
            .iter()
            .enumerate()
            .filter(|(_, diet)| diet.one_way && keeps(diet, words))
            .map(|(d, _)| d)
            .collect()
    };
    let kept = ways(&memory);
    !kept.is_empty() && ways(&fact).iter().any(|d| !kept.contains(d))
}

/// Words that make a food another one, free of what a diet leaves out: "oat milk", "lait
/// d'avoine", "Sojajoghurt" is one word and no food of the list.
const PLANT: &[&str] = &[
    "oat", "soy", "soya", "almond", "rice", "coconut", "plant", "vegan", "avoine", "soja",
    "amande", "hafer", "mandel", "avena", "almendra", "aveia", "amendoa", "haver", "amandel",
    "riso", "riz", "arroz", "mandorla", "cocco", "coco",
];

/// Whether folded `words` name one of `foods` itself, not a plant-made one ([`PLANT`]
/// before it, or up to two words after: "oat milk", "leche de avena").
fn names_food(words: &[String], foods: &[&str]) -> bool {
    words.iter().enumerate().any(|(i, w)| {
        foods.contains(&w.as_str())
            && !(i > 0 && PLANT.contains(&words[i - 1].as_str()))
            && !words[i + 1..words.len().min(i + 3)]
                .iter()
                .any(|w| PLANT.contains(&w.as_str()))
    })
}

/// Whether folded `words` name a diet of [`DIETS`]: a word that names it ("keto",
/// "halal", "coeliac"), or what it leaves out with a word of [`AVOIDING`] ("gluten-free",
/// "no dairy"), whoever keeps it.
pub(super) fn names_a_diet(words: &[String]) -> bool {
    DIETS
        .iter()
        .any(|diet| any(words, diet.named) || any(words, diet.left_out) && avoiding(words))
}

/// A text's words folded, "low carb" (and "low-carb") one word: "lowcarb", and each
/// comma a word of its own ([`COMMA`]).
fn words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for (i, part) in text.split(',').enumerate() {
        if i > 0 {
            words.push(COMMA.to_owned());
        }
        words.extend(crate::text::folded_words(part));
    }
    while let Some(i) = words
        .windows(2)
        .position(|w| w[0] == "low" && ["carb", "carbs"].contains(&w[1].as_str()))
    {
        words.splice(i..i + 2, ["lowcarb".to_owned()]);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diet_taken_up_rules_out_what_the_memory_eats() {
        for (memory, fact) in [
            (
                "I love bread and eat it with every meal",
                "I'm gluten-free now",
            ),
            (
                "I love bread and eat it with every meal",
                "I was diagnosed with coeliac disease",
            ),
            (
                "Je mange du pain à chaque repas",
                "Je mange sans gluten depuis mars",
            ),
            ("Ich esse gern Brot", "Ich vertrage kein Gluten mehr"),
            (
                "I love bread",
                "I don't eat anything with gluten, I'm allergic",
            ),
            (
                "I drink a glass of milk every morning",
                "I'm lactose intolerant, so I've cut out dairy completely",
            ),
            (
                "I eat pasta almost every night",
                "My doctor put me on a low-carb diet",
            ),
            ("Como arroz todos los días", "Ahora hago la dieta keto"),
            (
                "I eat pork all the time, bacon is my favourite",
                "I keep halal now",
            ),
            (
                "I have a sweet tooth and eat chocolate daily",
                "I quit sugar in the spring",
            ),
            ("I'm pescatarian", "I only eat raw food, no fish at all"),
            ("Sono pescetariana", "Sono diventata vegana"),
            (
                "Como chocolate todos os dias",
                "Deixei o açúcar há três meses",
            ),
            (
                "Me encanta el jamón, lo como casi a diario",
                "Me he convertido al islam y ahora como halal",
            ),
        ] {
            assert!(rules_out(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // Someone else's diet, a diet taken back or denied, another food.
            ("I love bread", "My daughter is gluten-free"),
            ("I love bread", "I'm not gluten-free any more"),
            ("I love bread", "I'm no longer gluten-free"),
            ("I love bread", "I eat gluten again"),
            ("I love bread", "I'm lactose intolerant"),
            ("I drink a glass of milk every morning", "I quit sugar"),
            // The memory already keeps the diet, or eats nothing it rules out.
            ("I eat gluten-free bread", "I'm gluten-free now"),
            ("I don't eat bread", "I'm gluten-free now"),
            ("I'm a baker", "I'm gluten-free now"),
            ("I'm vegetarian", "I also avoid peanuts"),
            // A thing of the diet's kind, not the speaker's diet.
            ("I love bread", "I found a gluten-free bakery near work"),
            (
                "I love pasta",
                "I bought keto recipes and gluten-free bread",
            ),
            ("J'adore le pain", "J'ai trouvé une boulangerie sans gluten"),
            // A diet given up.
            ("I eat pasta every night", "I quit keto"),
        ] {
            assert!(!rules_out(memory, fact), "{memory} / {fact}");
        }
    }

    #[test]
    fn a_diet_given_up_ends_its_memory() {
        for (memory, fact) in [
            ("I'm gluten-free", "I eat bread again"),
            ("I'm on a low-carb diet", "I'm eating pasta again"),
            ("I do keto", "I quit keto last month"),
            ("I keep halal", "I eat bacon sometimes"),
            ("Deixei o açúcar", "Como chocolate outra vez"),
            ("Je mange sans gluten", "Je ne suis plus sans gluten"),
            ("I'm vegetarian", "I eat salmon now"),
            ("Je ne mange pas de sucre", "Je remange des gâteaux"),
            ("Sigo una dieta sin azúcar", "He vuelto a comer dulces"),
            (
                "I do intermittent fasting",
                "I stopped intermittent fasting, now I eat breakfast again",
            ),
            (
                "I skip breakfast every day",
                "I stopped intermittent fasting, now I eat breakfast again",
            ),
            (
                "Je saute le petit-déjeuner",
                "Je mange un petit-déjeuner maintenant",
            ),
            (
                "Ich mache Intervallfasten",
                "Mit dem Intervallfasten habe ich aufgehört",
            ),
            ("Hago ayuno intermitente", "Ya no hago ayuno intermitente"),
            (
                "I'm lactose intolerant, milk makes me ill",
                "I drink milk again",
            ),
            ("I eat paleo", "I quit paleo"),
        ] {
            assert!(ends_diet(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // The diet kept, another food, no diet in the memory, someone else's.
            ("I'm gluten-free", "I eat gluten-free bread"),
            ("I'm gluten-free", "I still avoid bread"),
            ("I'm gluten-free", "I stopped eating bread"),
            ("I'm gluten-free", "I drink milk"),
            ("I love bread", "I eat bread every day"),
            ("My son is gluten-free", "I eat bread again"),
            ("I'm no longer gluten-free", "I eat bread"),
            ("I'm lactose intolerant", "I drink oat milk with my coffee"),
            ("Soy intolerante a la lactosa", "Bebo leche de avena"),
            ("I do intermittent fasting", "I skip breakfast on weekdays"),
        ] {
            assert!(!ends_diet(memory, fact), "{memory} / {fact}");
        }
    }

    #[test]
    fn one_way_of_eating_takes_the_place_of_another() {
        for (memory, fact) in [
            ("I do keto for my health", "These days I'm a vegetarian"),
            ("I'm on a low-carb diet", "I'm vegan now"),
            ("I've been eating paleo for a year", "I went vegan in March"),
            ("I'm vegetarian", "I started a keto diet"),
            ("I follow a carnivore diet", "Now I'm vegetarian"),
            (
                "Je suis végétarienne",
                "Je fais le régime cétogène depuis janvier",
            ),
            ("Ich mache Keto", "Ich bin jetzt Vegetarier"),
            ("Sono vegana", "Ora seguo la dieta paleo"),
        ] {
            assert!(switches_diet(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // The same way, a diet that goes with any, or none kept before.
            ("I'm vegetarian", "I went vegan"),
            ("I'm vegetarian", "I'm gluten-free now"),
            ("I'm gluten-free", "I went vegan"),
            ("I love pasta", "I'm on keto now"),
            (
                "I do intermittent fasting",
                "I started eating low-carb as well",
            ),
            // Someone else's, a thing's, given up or taken back.
            ("I do keto", "My wife is vegetarian"),
            ("I do keto", "I tried a vegan restaurant"),
            (
                "I'm vegetarian",
                "I baked a vegan chocolate cake for my sister",
            ),
            ("I do keto", "Ho fatto una pizza vegana"),
            ("I do keto", "I'm not vegan"),
            ("I'm vegan", "I quit paleo"),
            ("I'm no longer vegetarian", "I do keto"),
        ] {
            assert!(!switches_diet(memory, fact), "{memory} / {fact}");
        }
    }
}
