//! The place "here" means.
//!
//! A user who writes "Hello from Edinburgh! I'm here for the festival until Sunday" gives a
//! fact that only makes sense with the greeting: the model extracts "I'm here for the
//! festival until Sunday", and a week later "here" means nothing. Like [`super::dates`]
//! does for relative dates, memlane follows the word "here" with the place the user's own
//! greeting names: "I'm here (Edinburgh) for the festival until Sunday".
//!
//! Only a greeting that names where it comes from counts ("Hello from …", "Ciao da …",
//! "Grüße aus …"), in one of the languages below, and only when the user's messages of the
//! call name exactly one such place. A fact that already names the place is left as it is.

use crate::record::Message;

/// One language's greetings that name a place: a greeting word, a word for "from", the
/// place. And its words for "here".
struct Tongue {
    greetings: &'static [&'static str],
    from: &'static [&'static str],
    here: &'static [&'static str],
}

const TONGUES: [Tongue; 7] = [
    Tongue {
        greetings: &["hello", "hi", "hey", "hiya", "greetings", "love", "regards"],
        from: &["from"],
        here: &["here"],
    },
    Tongue {
        greetings: &["ciao", "saluti", "salve", "buongiorno", "buonasera"],
        from: &["da", "dal", "dalla", "dall"],
        here: &["qui", "qua"],
    },
    Tongue {
        greetings: &["bonjour", "bonsoir", "salut", "coucou", "amitiés", "bises"],
        from: &["de", "d", "du", "des"],
        here: &["ici"],
    },
    Tongue {
        greetings: &[
            "hola", "saludos", "días", "tardes", "noches", "besos", "abrazos",
        ],
        from: &["desde", "de", "del"],
        here: &["aquí", "acá"],
    },
    Tongue {
        greetings: &[
            "hallo", "grüße", "grüsse", "gruß", "gruss", "servus", "moin", "tag",
        ],
        from: &["aus", "von", "vom"],
        here: &["hier"],
    },
    Tongue {
        greetings: &[
            "olá",
            "ola",
            "oi",
            "saudações",
            "abraços",
            "beijos",
            "dia",
            "tarde",
        ],
        from: &["de", "do", "da", "desde"],
        here: &["aqui", "cá"],
    },
    Tongue {
        greetings: &["hallo", "hoi", "groeten", "groetjes", "dag"],
        from: &["uit", "vanuit", "van"],
        here: &["hier"],
    },
];

/// Lowercase words that may join the capitalised words of one place ("Rio de Janeiro",
/// "Frankfurt am Main"), kept only when a capitalised word follows.
const JOINERS: [&str; 12] = [
    "de", "del", "della", "di", "da", "do", "dos", "das", "am", "an", "upon", "sur",
];

/// Articles that may open a place ("from the Lake District"), not part of its name.
const ARTICLES: [&str; 5] = ["the", "la", "le", "el", "il"];

/// A word of a message: its text without the punctuation around it, and whether
/// punctuation followed it (a place never runs past it).
struct Word<'a> {
    text: &'a str,
    ends: bool,
}

fn split(text: &str) -> Vec<Word<'_>> {
    let mut out: Vec<Word<'_>> = Vec::new();
    for raw in text.split_whitespace() {
        // "d'Annecy", "dall'Aquila": the elided word and the place, as two words ("I'm"
        // and "Tom's" stay one).
        let pieces: Vec<&str> = match raw.find(['\'', '’']) {
            Some(i) if i > 0 && i <= 4 && raw[..i].chars().all(char::is_lowercase) => {
                vec![
                    &raw[..i],
                    &raw[i + raw[i..].chars().next().map_or(1, char::len_utf8)..],
                ]
            }
            _ => vec![raw],
        };
        for piece in pieces {
            let text = piece.trim_matches(|c: char| !c.is_alphanumeric());
            if text.is_empty() {
                // Punctuation on its own ("Lyon !"): it ends the word before.
                if let Some(last) = out.last_mut() {
                    last.ends = true;
                }
                continue;
            }
            let ends = piece.ends_with(|c: char| !c.is_alphanumeric() && c != '-');
            out.push(Word { text, ends });
        }
    }
    out
}

fn capitalised(word: &str) -> bool {
    word.chars().next().is_some_and(char::is_uppercase)
}

/// A capitalised word that is no place's: English "I" ("Hello from Leeds I'm here").
fn pronoun(word: &str) -> bool {
    word == "I" || word.starts_with("I'") || word.starts_with("I’")
}

/// Each place named by a greeting in `text`, with the language of its greeting (an index
/// into [`TONGUES`]).
fn greeted_places(text: &str) -> Vec<(String, usize)> {
    let words = split(text);
    let mut out = Vec::new();
    for i in 0..words.len().saturating_sub(2) {
        let greeting = words[i].text.to_lowercase();
        let from = words[i + 1].text.to_lowercase();
        if words[i].ends {
            continue;
        }
        for (t, tongue) in TONGUES.iter().enumerate() {
            if !tongue.greetings.contains(&greeting.as_str())
                || !tongue.from.contains(&from.as_str())
                || words[i + 1].ends
            {
                continue;
            }
            let mut j = i + 2;
            if ARTICLES.contains(&words[j].text.to_lowercase().as_str()) && !words[j].ends {
                j += 1;
            }
            let mut name: Vec<&str> = Vec::new();
            while let Some(w) = words.get(j) {
                let joiner = !name.is_empty()
                    && JOINERS.contains(&w.text)
                    && words.get(j + 1).is_some_and(|n| capitalised(n.text))
                    && !w.ends;
                if !((capitalised(w.text) && !pronoun(w.text)) || joiner) {
                    break;
                }
                name.push(w.text);
                if w.ends {
                    break;
                }
                j += 1;
            }
            if !name.is_empty() {
                out.push((name.join(" "), t));
            }
        }
    }
    out
}

/// The place "here" means in one conversation, and the language of the greeting that
/// named it.
pub(crate) struct Here {
    place: String,
    tongue: &'static Tongue,
}

impl Here {
    /// Whether `word` (lowercase) says "here" in the greeting's language or in English.
    fn says_here(&self, word: &str) -> bool {
        word == "here" || self.tongue.here.contains(&word)
    }
}

/// The one place the user's greetings in `messages` name, with its greeting's language;
/// `None` when they name none, or more than one.
pub(crate) fn greeted_place(messages: &[Message]) -> Option<Here> {
    let mut found: Vec<(String, usize)> = Vec::new();
    for m in messages
        .iter()
        .filter(|m| m.role != "assistant" && m.role != "system")
    {
        for (place, tongue) in greeted_places(&m.content) {
            if !found
                .iter()
                .any(|(p, _)| p.to_lowercase() == place.to_lowercase())
            {
                found.push((place, tongue));
            }
        }
    }
    match <[_; 1]>::try_from(found) {
        Ok([(place, tongue)]) => Some(Here {
            place,
            tongue: &TONGUES[tongue],
        }),
        Err(_) => None,
    }
}

/// The fact with its first word for "here" followed by the place the greeting names, in
/// parentheses; unchanged when there is no such place or word, or the fact names the place
/// already.
pub(crate) fn annotate(text: &str, here: Option<&Here>) -> String {
    let Some(here) = here else {
        return text.to_owned();
    };
    let place = &here.place;
    let lower = text.to_lowercase();
    if place
        .split(' ')
        .filter(|w| capitalised(w))
        .any(|w| lower.contains(&w.to_lowercase()))
    {
        return text.to_owned();
    }
    let Some((start, word)) = super::dates::words(text)
        .into_iter()
        .find(|(_, w)| here.says_here(&w.to_lowercase()))
    else {
        return text.to_owned();
    };
    let end = start + word.len();
    let mut out = text.to_owned();
    out.insert_str(end, &format!(" ({place})"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Message {
        Message::new("user", text)
    }

    fn resolve(fact: &str, messages: &[Message]) -> String {
        annotate(fact, greeted_place(messages).as_ref())
    }

    #[test]
    fn here_takes_the_place_of_the_greeting() {
        let cases = [
            (
                "Hello from Edinburgh! I'm here for the festival until Sunday.",
                "I'm here for the festival until Sunday",
                "I'm here (Edinburgh) for the festival until Sunday",
            ),
            (
                "Ciao da Napoli! Sono qui per lavoro fino a venerdì.",
                "Sono qui per lavoro fino a venerdì",
                "Sono qui (Napoli) per lavoro fino a venerdì",
            ),
            (
                "Bonjour d'Annecy ! Je suis ici pour le week-end.",
                "Je suis ici pour le week-end",
                "Je suis ici (Annecy) pour le week-end",
            ),
            (
                "¡Saludos desde San Sebastián! Estoy aquí por un congreso.",
                "Estoy aquí por un congreso",
                "Estoy aquí (San Sebastián) por un congreso",
            ),
            (
                "Viele Grüße aus Frankfurt am Main, ich bin hier auf einer Messe.",
                "Ich bin hier auf einer Messe",
                "Ich bin hier (Frankfurt am Main) auf einer Messe",
            ),
            (
                "Olá do Rio de Janeiro! Estou aqui de férias.",
                "Estou aqui de férias",
                "Estou aqui (Rio de Janeiro) de férias",
            ),
            (
                "Groeten uit Gent! Ik ben hier voor een bruiloft.",
                "Ik ben hier voor een bruiloft",
                "Ik ben hier (Gent) voor een bruiloft",
            ),
            (
                "Greetings from the Lake District. Just here for a week of walking.",
                "Here for a week of walking",
                "Here (Lake District) for a week of walking",
            ),
            // A fact the model wrote in English from an Italian message.
            (
                "Ciao da Bari! Sono qui per il matrimonio di mio cugino.",
                "I'm here for my cousin's wedding",
                "I'm here (Bari) for my cousin's wedding",
            ),
        ];
        for (message, fact, expected) in cases {
            assert_eq!(resolve(fact, &[user(message)]), expected, "{message}");
        }
    }

    #[test]
    fn here_stays_as_it_is_without_one_greeted_place() {
        let cases: [(&[Message], &str); 7] = [
            // No greeting.
            (
                &[user("Lovely sunny morning here.")],
                "Lovely sunny morning here",
            ),
            (
                &[user("I'm in Leeds. I'm here until May.")],
                "I'm here until May",
            ),
            // The fact names the place already.
            (
                &[user("Hello from Edinburgh! I'm here for the festival.")],
                "I'm in Edinburgh for the festival",
            ),
            // Two places: which one "here" means is not known.
            (
                &[user(
                    "Hello from Oslo! Tomorrow greetings from Bergen. I'm here all week.",
                )],
                "I'm here all week",
            ),
            // The greeting is the assistant's.
            (
                &[
                    Message::new("assistant", "Hello from Memlane! How are you?"),
                    user("Fine, I'm here all day."),
                ],
                "I'm here all day",
            ),
            // French "qui" is "who", not "here": the greeting's language decides.
            (
                &[user(
                    "Bonjour de Lyon ! Ma sœur, qui est médecin, vient me voir.",
                )],
                "Ma sœur, qui est médecin, vient me voir",
            ),
            // Annotated already: the fact names the place.
            (
                &[user("Hello from York! I'm here until Monday.")],
                "I'm here (York) until Monday",
            ),
        ];
        for (messages, fact) in cases {
            assert_eq!(resolve(fact, messages), fact);
        }
    }

    #[test]
    fn a_greeting_names_the_place_up_to_its_punctuation() {
        let places = |text: &str| -> Vec<String> {
            greeted_places(text).into_iter().map(|(p, _)| p).collect()
        };
        assert_eq!(places("Hello from Edinburgh!"), ["Edinburgh"]);
        assert_eq!(places("Hi from New York, it's hot."), ["New York"]);
        assert_eq!(places("Hi from New York City"), ["New York City"]);
        assert_eq!(places("Hello from Leeds. Tom says hi"), ["Leeds"]);
        assert_eq!(places("Ciao dall'Aquila!"), ["Aquila"]);
        assert_eq!(places("Bonjour de Lyon ! Ma sœur est là."), ["Lyon"]);
        assert_eq!(places("Hello from Leeds I'm here"), ["Leeds"]);
        assert!(places("Hello from work, busy day.").is_empty());
        assert!(places("Hello! From Monday I start a new job.").is_empty());
        assert!(places("hello from").is_empty());
        assert!(places("").is_empty());
    }
}
