//! A new pet beside the one before: "Adotei uma gata, a Mimi" after "Tenho um cão chamado
//! Bolt". A small model puts the new animal in the old one's place, as if a household
//! kept one pet at a time; people keep a dog and a cat, and a second cat.
//!
//! Words are matched whole, lowercase and without diacritics, in English, French, German,
//! Italian, Spanish, Portuguese and Dutch.

use super::topics::{any, NOT};

/// Pets, and the word itself. Not Spanish "loro" (Italian for "them").
const PETS: &[&str] = &[
    // English
    "pet",
    "pets",
    "dog",
    "dogs",
    "puppy",
    "cat",
    "cats",
    "kitten",
    "kitty",
    "rabbit",
    "bunny",
    "hamster",
    "parrot",
    "budgie",
    "tortoise",
    "turtle",
    "horse",
    "pony",
    "ferret",
    "goldfish",
    // French
    "chien",
    "chienne",
    "chiot",
    "chat",
    "chatte",
    "chaton",
    "lapin",
    "perroquet",
    "perruche",
    "tortue",
    "cheval",
    "furet",
    // German
    "hund",
    "hundin",
    "welpe",
    "welpen",
    "katze",
    "kater",
    "katzchen",
    "kaninchen",
    "papagei",
    "wellensittich",
    "schildkrote",
    "pferd",
    "meerschweinchen",
    "haustier",
    // Italian
    "cane",
    "cagnolino",
    "cucciolo",
    "gatto",
    "gatta",
    "gattino",
    "coniglio",
    "criceto",
    "pappagallo",
    "tartaruga",
    "cavallo",
    // Spanish
    "perro",
    "perra",
    "perrito",
    "gato",
    "gata",
    "gatito",
    "conejo",
    "periquito",
    "tortuga",
    "caballo",
    "mascota",
    // Portuguese
    "cao",
    "cadela",
    "cachorro",
    "cachorrinho",
    "gatinho",
    "coelho",
    "papagaio",
    "cavalo",
    // Dutch
    "hond",
    "hondje",
    "kat",
    "poes",
    "kitten",
    "konijn",
    "papegaai",
    "parkiet",
    "schildpad",
    "paard",
    "cavia",
    "huisdier",
];

/// Words that say a pet came: adopted, bought, given, rescued; new, another, a second.
const CAME: &[&str] = &[
    // English
    "adopted",
    "got",
    "bought",
    "rescued",
    "new",
    "another",
    "second",
    // French
    "adopte",
    "adoptee",
    "achete",
    "recueilli",
    "nouveau",
    "nouvel",
    "nouvelle",
    "autre",
    "deuxieme",
    // German
    "adoptiert",
    "gekauft",
    "bekommen",
    "geholt",
    "neu",
    "neue",
    "neuen",
    "neuer",
    "neues",
    "zweite",
    "zweiten",
    "zweiter",
    "weitere",
    "weiteren",
    // Italian
    "adottato",
    "adottata",
    "comprato",
    "preso",
    "presa",
    "nuovo",
    "nuova",
    "secondo",
    "seconda",
    "altro",
    "altra",
    // Spanish
    "adoptado",
    "adoptada",
    "adoptamos",
    "compre",
    "compramos",
    "nuevo",
    "nueva",
    "segundo",
    "segunda",
    "otro",
    "otra",
    // Portuguese
    "adotei",
    "adotamos",
    "adotado",
    "adotada",
    "comprei",
    "novo",
    "nova",
    "outro",
    "outra",
    // Dutch
    "geadopteerd",
    "gekocht",
    "gekregen",
    "nieuw",
    "nieuwe",
    "tweede",
];

/// Words that say a pet went, or that one took another's place: died, lost, given away,
/// no longer, instead.
const WENT: &[&str] = &[
    // English
    "died",
    "dead",
    "passed",
    "lost",
    "rehomed",
    "gave",
    "away",
    "rid",
    "put",
    "instead",
    "anymore",
    "longer",
    "replaced",
    // French
    "mort",
    "morte",
    "decede",
    "perdu",
    "donne",
    "plus",
    "place",
    // German
    "gestorben",
    "verstorben",
    "tot",
    "verloren",
    "abgegeben",
    "weggegeben",
    "eingeschlafert",
    "mehr",
    "statt",
    "anstelle",
    // Italian
    "morto",
    "morta",
    "perso",
    "persa",
    "regalato",
    "piu",
    "invece",
    // Spanish
    "murio",
    "muerto",
    "muerta",
    "perdimos",
    "regalamos",
    "lugar",
    "vez",
    // Portuguese
    "morreu",
    "perdemos",
    "doamos",
    "doei",
    // Dutch
    "overleden",
    "dood",
    "gestorven",
    "kwijt",
    "weggegeven",
    "ingeslapen",
    "meer",
    "plaats",
];

/// Words of a pet wished for or planned rather than had: "I'd love a dog one day", "We're
/// getting a puppy next month". The pet that then comes fulfils the memory, which the
/// model may replace.
const WISHED: &[&str] = &[
    "want",
    "wants",
    "wish",
    "someday",
    "next",
    "soon",
    "will",
    "getting",
    "plan",
    "planning",
    "hope",
    "voudrais",
    "aimerais",
    "envie",
    "prochain",
    "prochaine",
    "bientot",
    "mochte",
    "mochten",
    "wunsche",
    "bald",
    "nachsten",
    "vorrei",
    "piacerebbe",
    "prossimo",
    "prossima",
    "presto",
    "quiero",
    "quisiera",
    "gustaria",
    "pronto",
    "proximo",
    "proxima",
    "quero",
    "queria",
    "gostaria",
    "breve",
    "wil",
    "zou",
    "binnenkort",
    "volgende",
];

/// Words by which a fact corrects what was said of a pet: "Actually, my new kitten is
/// called Mia", with the denial words of [`NOT`].
const CORRECTING: &[&str] = &[
    "actually",
    "fait",
    "eigentlich",
    "realmente",
    "verdad",
    "verdade",
    "eigenlijk",
];

/// Whether a new fact tells of a pet that came (adopted, bought, new, another) while the
/// memory tells of a pet had: both stay, whatever the model says. Not when the fact tells
/// of a pet that went or of one in another's place (died, given away, instead), nor when
/// it corrects or denies, nor when the memory wished for or planned a pet, which the new
/// one may fulfil.
pub(crate) fn another_pet(memory: &str, fact: &str) -> bool {
    let (memory, fact) = (
        crate::text::folded_words(memory),
        crate::text::folded_words(fact),
    );
    any(&memory, PETS)
        && !any(&memory, WISHED)
        && any(&fact, PETS)
        && any(&fact, CAME)
        && !any(&fact, WENT)
        && !any(&fact, NOT)
        && !any(&fact, CORRECTING)
}

/// Words that say a pet died: "Nibbles died", "Minou est mort", "Bello ist gestorben".
const DIED: &[&str] = &[
    "died",
    "dead",
    "passed",
    "mort",
    "morte",
    "decede",
    "decedee",
    "gestorben",
    "verstorben",
    "tot",
    "eingeschlafert",
    "morto",
    "morta",
    "murio",
    "muerto",
    "muerta",
    "morreu",
    "overleden",
    "dood",
    "gestorven",
    "ingeslapen",
];

/// Whether a new fact says that the one pet a memory names died: the memory tells of a
/// pet (not wished for, nothing denied) and gives one name ([`super::names`], not a pet's
/// word: German capitalises "Hund"), the fact gives that name and
/// a word of dying, and denies nothing. "Nibbles died last week" after "I have a hamster
/// called Nibbles": the memory is no longer true, and a small model keeps both. A memory
/// of two pets, or of a pet and a place ("My dog Rex and I live in Graz"), is left to the
/// model: the fact ends only part of it.
pub(crate) fn a_pet_died(memory: &str, fact: &str) -> bool {
    let (memory_words, fact_words) = (
        crate::text::folded_words(memory),
        crate::text::folded_words(fact),
    );
    let named: Vec<String> = super::names(memory)
        .into_iter()
        .filter(|w| !PETS.contains(&w.as_str()))
        .collect();
    let [name] = named.as_slice() else {
        return false;
    };
    any(&memory_words, PETS)
        && !any(&memory_words, WISHED)
        && !any(&memory_words, NOT)
        && fact_words.contains(name)
        && any(&fact_words, DIED)
        && !any(&fact_words, NOT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_pet_that_died_ends_its_memory() {
        for (memory, fact) in [
            ("I have a hamster called Nibbles", "Nibbles died last week"),
            ("J'ai un chat qui s'appelle Minou", "Minou est mort en mai"),
            (
                "Ich habe einen Hund namens Bello",
                "Bello ist im Sommer gestorben",
            ),
            ("Tengo un perro, Toby", "Toby murió en enero"),
            ("Ik heb een kat, Tijger", "Tijger is overleden"),
        ] {
            assert!(a_pet_died(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // Two names: the fact ends only part of the memory.
            ("I have two cats, Tom and Jerry", "Tom died last week"),
            ("My dog Rex and I live in Graz", "Rex died last week"),
            // Another pet, a pet wished for, a denial, no death.
            ("I have a hamster called Nibbles", "Bella died last week"),
            ("I'd love a dog called Rex someday", "Rex died"),
            (
                "I have a hamster called Nibbles",
                "Nibbles is not dead, just sleepy",
            ),
            ("I have a hamster called Nibbles", "Nibbles is ill"),
            // No pet: a person.
            ("My grandmother is called Rosa", "Rosa died in May"),
        ] {
            assert!(!a_pet_died(memory, fact), "{memory} / {fact}");
        }
    }

    #[test]
    fn a_new_pet_stays_beside_the_one_before() {
        for (memory, fact) in [
            ("Tenho um cão chamado Bolt", "Adotei uma gata, a Mimi"),
            (
                "I have a cat called Pixel",
                "We adopted a second cat last week",
            ),
            (
                "Ich habe einen Hund, Bruno",
                "Wir haben jetzt auch ein Kaninchen gekauft",
            ),
            ("Mi perro se llama Toby", "Tenemos un gatito nuevo"),
            ("J'ai un chat", "Nous avons adopté un chiot"),
            ("Ho un gatto nero", "Abbiamo preso un cucciolo"),
            ("Wij hebben een poes, Saar", "We hebben een nieuwe hond"),
        ] {
            assert!(another_pet(memory, fact), "{memory} / {fact}");
        }
        for (memory, fact) in [
            // A pet that went, or one in another's place.
            (
                "My dog Rex is a beagle",
                "Rex died in May and we adopted a kitten",
            ),
            ("Tengo un perro", "Regalamos el perro y adoptamos una gata"),
            (
                "Ich habe eine Katze",
                "Statt der Katze haben wir jetzt einen neuen Hund",
            ),
            (
                "I have a hamster",
                "I don't have a hamster anymore, I got a rabbit",
            ),
            // A correction, a denial.
            (
                "Our new puppy is called Max",
                "Actually, the new puppy is called Rex",
            ),
            ("J'ai un chat", "Je n'ai pas de nouveau chat"),
            // The same pet, renamed.
            ("My cat is called Mimi", "My cat's name is Mini"),
            // A pet wished for or planned, then had.
            ("I'd love to get a dog someday", "We adopted a dog!"),
            ("Vorrei un gatto", "Abbiamo adottato una gatta"),
            // Not two pets.
            ("I have a dog", "I bought a new car"),
            ("I love hiking", "We adopted a puppy"),
            ("Ik heb een kat", "Ik speel ook tennis"),
        ] {
            assert!(!another_pet(memory, fact), "{memory} / {fact}");
        }
    }
}
