//! Facts put back in the user's words where the model cut them out of what was said:
//! pieces of one sentence joined again, and a fact that lost its speaker, its mark of one
//! more of its kind, its set times, a name or what it was given to, kept as said.

use super::{alike, users_sentences, Fact};
use crate::record::Message;

/// The facts, with those the model cut out of one thing the user said put back together
/// as they said it: two facts or more whose every word (but function words) is in one
/// piece of a sentence of the user's messages ([`pieces`]: one thing said), and in no
/// other, become that piece. A sentence is cut where it joins clauses: with a conjunction
/// ("and", "but", or their word in the other six languages [`crate::infer::looks::clauses`]
/// knows) or with a comma before a subject ([`SUBJECTS`]), unless the clause after points
/// back at the one before ([`points_back`]). "I live in Madrid, near Retiro park" stays
/// one memory, which a move then replaces whole, where "I live near Retiro park" alone
/// would stay beside the new home. "I live in Madrid and I work as a nurse" and "My dog
/// is called Rex, he's a beagle" are two things said each, and stay two facts, so that a
/// correction of the name keeps the breed; "Ma mère vit à Marseille, je vais la voir en
/// mai" is one. The first of the facts takes the piece, with the labels and entities of
/// all of them and their highest importance.
/// One fact so cut keeps its sentence when the sentence marks what it says as one more of
/// its kind ([`crate::infer::additional`]) or puts it at set times
/// ([`crate::infer::habits::at_set_times`]: "In het weekend werk ik als ober" is no new
/// job), and the fact lost the mark: a small model writes "Ik werk als ober in een café"
/// for "In het weekend werk ik ook als ober in een café", and without its "ook" the fact
/// takes the place of the job before. So does one whose sentence says what it took the
/// place of ([`crate::infer::in_place_of`]) while the fact does not: "Ich trinke
/// Kräutertee seit zwei Wochen" for "Seit zwei Wochen trinke ich statt Espresso nur noch
/// Kräutertee" stays beside the espresso. And one that points back at someone its piece
/// names ([`points_back`]) takes the piece: "Je vais la voir en mai" says nothing of whom.
/// A piece may run over two sentences, when the second opens pointing back at the first
/// ([`said_pieces`]).
pub(super) fn as_said(facts: Vec<Fact>, messages: &[Message]) -> Vec<Fact> {
    let sentences: Vec<(&str, Vec<String>)> = said_pieces(messages)
        .into_iter()
        .map(|s| (s, crate::text::content_terms(s)))
        .collect();
    let from: Vec<Option<usize>> = facts
        .iter()
        .map(|f| {
            let words = crate::text::content_terms(&f.text);
            let holds = |terms: &[String]| {
                !words.is_empty()
                    && words
                        .iter()
                        .all(|w| terms.iter().any(|t| t == w || alike(w, t)))
            };
            let mut holding = sentences.iter().enumerate().filter(|(_, (_, t))| holds(t));
            match (holding.next(), holding.next()) {
                (Some((i, _)), None) => Some(i),
                _ => None,
            }
        })
        .collect();
    let kept: Vec<String> = facts
        .iter()
        .flat_map(|f| crate::text::folded_words(&f.text))
        .collect();
    let mut out: Vec<Fact> = Vec::with_capacity(facts.len());
    let mut taken: Vec<(usize, usize)> = Vec::new();
    for (mut fact, from) in facts.into_iter().zip(from) {
        // A repeat of the fact it would join is left for [`clean_facts`] to drop.
        let repeat =
            |at: usize| out[at].text.trim().to_lowercase() == fact.text.trim().to_lowercase();
        let earlier = from.and_then(|s| {
            taken
                .iter()
                .find(|&&(t, at)| t == s && !repeat(at))
                .map(|&(_, at)| (s, at))
        });
        match earlier {
            Some((s, at)) => {
                let into = &mut out[at];
                into.text = sentences[s].0.to_owned();
                into.categories.extend(fact.categories);
                into.entities.extend(fact.entities);
                into.importance = into.importance.max(fact.importance);
                tracing::debug!(target: "memlane", "two facts from one sentence are kept as said");
            }
            None => {
                if let Some(s) = from {
                    taken.push((s, out.len()));
                    // The speaker's mark of one more of its kind, or of what the fact
                    // took the place of, which the model left out.
                    let sentence = sentences[s].0;
                    let lost = |mark: fn(&str) -> bool| mark(sentence) && !mark(&fact.text);
                    let mark = if lost(crate::infer::additional) {
                        Some("one more of its kind")
                    } else if lost(crate::infer::in_place_of) {
                        Some("what it took the place of")
                    } else if lost(crate::infer::habits::at_set_times) {
                        Some("set times")
                    } else {
                        None
                    };
                    if let Some(mark) = mark {
                        tracing::debug!(target: "memlane", "a fact that lost its speaker's mark ({mark}) is kept as said");
                        fact.text = sentence.to_owned();
                    } else if lost_its_apposition(&fact.text, sentence) {
                        tracing::debug!(target: "memlane", "a fact that lost the name or kind after it is kept as said");
                        fact.text = sentence.to_owned();
                    } else if lost_its_speaker(sentence, &fact.text) {
                        tracing::debug!(target: "memlane", "a fact that lost its speaker is kept as said");
                        fact.text = sentence.to_owned();
                    } else if let Some(part) = lost_a_name(&fact.text, sentence) {
                        tracing::debug!(target: "memlane", "a fact that lost a name is kept as said");
                        fact.text = part.to_owned();
                    } else if points_back(&fact.text) {
                        tracing::debug!(target: "memlane", "a fact that points back at what the user named before is kept as said");
                        fact.text = sentence.to_owned();
                    }
                } else if let Some(piece) =
                    paraphrased_without_a_name(&fact.text, &kept, &sentences)
                {
                    tracing::debug!(target: "memlane", "a fact in other words that lost a name is kept as said");
                    fact.text = piece.to_owned();
                }
                out.push(fact);
            }
        }
    }
    out
}

/// Indefinite articles, which begin an apposition that says what kind a thing is
/// ("einen Hund, einen Dackel"; "a dog, a beagle").
const INDEFINITE: &[&str] = &[
    "a", "an", "un", "une", "uno", "una", "um", "uma", "ein", "eine", "einen", "einem", "een",
];

/// Whether the fact is the part of its sentence before the last comma, and what follows
/// the comma is an apposition the fact lost: one to three words, all capitalised (a name:
/// "Ik heb een kat, Pluis"), or an indefinite article and one or two words ("Meine
/// Nachbarin hat jetzt auch einen Hund, einen Dackel"). Without it the memory loses what
/// tells it apart from the next of its kind ("We hebben er een tweede kat bij, Snoes").
/// A denial or a correction after the comma ("…, not Rex"; "…, nicht mehr Taxi") is not
/// of that shape, and the model is right to leave it out.
fn lost_its_apposition(fact: &str, sentence: &str) -> bool {
    let Some((head, tail)) = sentence.rsplit_once(',') else {
        return false;
    };
    let words: Vec<&str> = tail
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let capitalised = |w: &&str| w.chars().next().is_some_and(char::is_uppercase);
    let apposition = match words.as_slice() {
        [] => false,
        [article, rest @ ..] if INDEFINITE.contains(&article.to_lowercase().as_str()) => {
            (1..=2).contains(&rest.len())
        }
        all => all.len() <= 3 && all.iter().all(capitalised),
    };
    let said = crate::text::content_terms(fact);
    let head = crate::text::content_terms(head);
    apposition
        && !said.is_empty()
        && said
            .iter()
            .all(|w| head.iter().any(|t| t == w || alike(w, t)))
        && !crate::text::content_terms(tail)
            .iter()
            .any(|t| said.iter().any(|w| w == t || alike(w, t)))
}

/// Words before a name that say it is where something came from, or what it no longer
/// is: "from Madrid", "de Lyon", "aus Bremen", "da Roma", "desde Bilbao", "uit Gent".
const FROM: &[&str] = &[
    "from", "de", "d", "du", "des", "von", "aus", "vom", "da", "dal", "dalla", "desde", "del",
    "do", "dos", "van", "uit", "instead", "statt", "than", "que", "ex",
];

/// The part of `sentence` between commas that holds all of the fact's words and a name
/// the fact left out ([`crate::infer::names`], not the part's first word: "Je suis chez ma sœur
/// à Annecy ce week-end" for "Je suis chez ma sœur ce week-end"), when a name was left
/// out. Not a name up to three words after a denial or a word of where something came
/// from ([`FROM`]: "from Madrid", "nicht mehr in Bremen"), which a model leaves out on
/// purpose.
fn lost_a_name<'a>(fact: &str, sentence: &'a str) -> Option<&'a str> {
    let said = crate::text::content_terms(fact);
    let kept: Vec<String> = crate::text::folded_words(fact);
    if said.is_empty() {
        return None;
    }
    sentence
        .split(',')
        .map(str::trim)
        .find(|part| {
            let terms = crate::text::content_terms(part);
            said.iter()
                .all(|w| terms.iter().any(|t| t == w || alike(w, t)))
        })
        .filter(|part| leaves_out_a_name(&kept, part))
}

/// Whether `part` gives a name that the fact's folded words (`kept`) leave out: not its
/// first word, nor up to three words after a denial or a word of where something came
/// from ([`FROM`]), nor a day, a month or a feast ([`crate::infer::moves::is_time`]),
/// which a model writes as a date.
fn leaves_out_a_name(kept: &[String], part: &str) -> bool {
    let words = crate::text::folded_words(part);
    crate::infer::names(part).iter().any(|name| {
        !kept.contains(name)
            && !crate::infer::moves::is_time(name)
            && !crate::infer::habits::names_a_time(name)
            && words.iter().position(|w| w == name).is_some_and(|at| {
                at > 0
                    && !words[at.saturating_sub(3)..at].iter().any(|w| {
                        FROM.contains(&w.as_str())
                            || crate::infer::topics::NOT.contains(&w.as_str())
                    })
            })
    })
}

/// The one piece of what the user said ([`said_pieces`]) that a fact the model wrote in
/// other words was made from, when the fact left out a name it gives
/// ([`leaves_out_a_name`]; `kept`: the folded words of all the call's facts, so that a
/// name another fact keeps is not lost): the piece that shares the most of the fact's
/// words (but function words), at least two and half of them, a word shared when the two
/// are [`alike`] or begin with the same four letters ("rend" and "rends"). "Rend visite à
/// ses parents ce week-end" for "Ce week-end je rends visite à mes parents à Lyon" is the
/// user's piece again; a fact that keeps its sentence's words is [`lost_a_name`]'s.
fn paraphrased_without_a_name<'a>(
    fact: &str,
    kept: &[String],
    pieces: &[(&'a str, Vec<String>)],
) -> Option<&'a str> {
    let said = crate::text::content_terms(fact);
    let shared = |terms: &[String]| {
        said.iter()
            .filter(|w| {
                terms.iter().any(|t| {
                    t == *w
                        || alike(w, t)
                        || [w.as_str(), t.as_str()]
                            .iter()
                            .all(|x| x.chars().count() >= 4)
                            && w.chars().take(4).eq(t.chars().take(4))
                })
            })
            .count()
    };
    let counts: Vec<usize> = pieces.iter().map(|(_, terms)| shared(terms)).collect();
    let best = *counts.iter().max()?;
    let mut at_best = counts
        .iter()
        .enumerate()
        .filter(|&(_, &c)| c == best)
        .map(|(i, _)| i);
    let (Some(at), None) = (at_best.next(), at_best.next()) else {
        return None;
    };
    let piece = pieces[at].0;
    (best >= 2 && 2 * best >= said.len() && leaves_out_a_name(kept, piece)).then_some(piece)
}

/// The facts, with each one that gave someone else what the speaker said of themselves
/// put back as the speaker's clause ([`given_to_another`]).
pub(super) fn the_speakers_own(mut facts: Vec<Fact>, messages: &[Message]) -> Vec<Fact> {
    for fact in &mut facts {
        if let Some(clause) =
            users_sentences(messages).find_map(|s| given_to_another(&fact.text, s))
        {
            tracing::debug!(target: "memlane", "a fact that gave someone else the speaker's clause is the speaker's again");
            fact.text = clause.to_owned();
        }
    }
    facts
}

/// The clause of `sentence` ([`crate::infer::looks::clauses`]) that the fact took from the
/// speaker and gave the subject of another clause: the clause begins with the speaker
/// ([`SPEAKERS`]) or a first-person verb ([`crate::infer::looks::I_DO`]), holds the most of the
/// fact's words, and the fact's other words are in another clause, while the fact names
/// no speaker. A small model writes "Mi novia trabaja en un hotel" for "Mi novia se llama
/// Lucía y trabajo en un hotel", and the speaker's job ends with the relationship.
fn given_to_another<'a>(fact: &str, sentence: &'a str) -> Option<&'a str> {
    let words = crate::text::folded_words(fact);
    if words
        .iter()
        .any(|w| SPEAKERS.contains(&w.as_str()) || crate::infer::looks::I_DO.contains(&w.as_str()))
    {
        return None;
    }
    let said = crate::text::content_terms(fact);
    let parts: Vec<(&str, Vec<String>)> = crate::infer::looks::clauses(sentence)
        .into_iter()
        .map(|r| {
            let part = sentence[r]
                .trim()
                .trim_matches(|c: char| !c.is_alphanumeric());
            (part, crate::text::content_terms(part))
        })
        .collect();
    let holds = |terms: &[String], w: &String| terms.iter().any(|t| t == w || alike(w, t));
    let (own, terms) = parts
        .iter()
        .filter(|(part, _)| {
            crate::text::folded_words(part).first().is_some_and(|w| {
                SPEAKERS.contains(&w.as_str()) || crate::infer::looks::I_DO.contains(&w.as_str())
            })
        })
        .max_by_key(|(_, terms)| said.iter().filter(|w| holds(terms, w)).count())?;
    let rest: Vec<&String> = said.iter().filter(|w| !holds(terms, w)).collect();
    let elsewhere = parts
        .iter()
        .filter(|(part, _)| part != own)
        .any(|(_, other)| !rest.is_empty() && rest.iter().all(|w| holds(other, w)));
    (said.iter().any(|w| holds(terms, w)) && elsewhere).then_some(*own)
}

/// The speaker as a subject, in the languages [`SUBJECTS`] covers.
const SPEAKERS: &[&str] = &[
    "i", "we", "je", "j", "nous", "ich", "wir", "io", "noi", "yo", "nosotros", "eu", "nos", "ik",
    "wij",
];

/// Whether `fact` is some of `sentence`'s words, in their order, without the speaker the
/// sentence names ([`SPEAKERS`]): "Koriander heerlijk" for "Tegenwoordig vind ik
/// koriander heerlijk" says no one likes it, and a taste it reverses would stay.
fn lost_its_speaker(sentence: &str, fact: &str) -> bool {
    let (said, kept) = (
        crate::text::folded_words(sentence),
        crate::text::folded_words(fact),
    );
    let mut rest = said.iter();
    let in_order = kept.iter().all(|w| rest.any(|s| s == w));
    !kept.is_empty()
        && kept.len() < said.len()
        && in_order
        && said.iter().any(|w| SPEAKERS.contains(&w.as_str()))
        && !kept.iter().any(|w| SPEAKERS.contains(&w.as_str()))
}

/// Words of French's own, none of them Italian: a sentence with one is French, and its
/// "ma" is "my", not "but" ("Je vais voir ma sœur").
const FRENCH: &[&str] = &[
    "je", "j", "suis", "les", "des", "une", "mon", "mes", "avec", "chez", "pour", "dans", "nous",
    "vous", "au", "aux", "cette", "est",
];

/// Words of Dutch's own, none of them Spanish or French: a sentence with one is Dutch,
/// and its "en" is "and".
const DUTCH: &[&str] = &[
    "ik", "het", "een", "niet", "zijn", "wij", "jij", "hij", "ook", "maar", "wel", "mijn", "dat",
    "wat", "heb", "ben", "naar", "met", "voor", "bij", "van", "we", "ze", "is", "heeft", "wonen",
    "woon", "werk",
];

/// Subject pronouns, in the languages of [`crate::infer::looks::CONJUNCTIONS`], that begin a
/// clause of their own after a comma: "My dog is called Rex, he's a beagle" says two
/// things, where "I live in Madrid, near Retiro park" says one. As [`crate::text::keywords`]
/// reads them ("I'm" is "i" then "m"; "j'ai" is "j" then "ai").
pub(in crate::infer) const SUBJECTS: &[&str] = &[
    "i", "he", "she", "it", "we", "they", "you", // English
    "je", "j", "il", "elle", "on", "nous", "vous", "ils", "elles", "c", // French
    "ich", "er", "sie", "es", "wir", "ihr", // German
    "io", "lui", "lei", "noi", "voi", "loro", // Italian
    "yo", "él", "ella", "nosotros", "nosotras", "ellos", "ellas", // Spanish
    "eu", "ele", "ela", "nós", "eles", "elas", // Portuguese
    "ik", "hij", "zij", "ze", "het", "wij", "jij", // Dutch ("je" is French's too)
];

/// Words by which a clause points back at what the clause before it named, in the same
/// languages: "I love steak, I have one every Friday" says one thing, which a change of
/// diet replaces whole. The clitics of French, Spanish, Italian and Portuguese, which are
/// articles as often, are read in place ([`object_pronoun`]).
const BACK: &[&str] = &[
    "one", "ones", "it", "them", "there", "him", // English
    "ihn", "ihm", "ihnen", "dort", "eins", // German
    "er", "hem", "daar", "ervan", // Dutch
];

/// Whether `clause` points back at what a clause before it named: a word of [`BACK`]
/// after its first word, or an object pronoun ([`object_pronoun`]). "Ma mère vit à
/// Marseille, je vais la voir en mai" says one thing; "Je vais la voir en mai" alone says
/// nothing of whom.
fn points_back(clause: &str) -> bool {
    let words = crate::text::keywords(clause);
    words.iter().skip(1).any(|w| BACK.contains(&w.as_str())) || object_pronoun(clause, &words)
}

/// French object pronouns, which stand before their verb, and "y" ("there"; Spanish for
/// "and", which follows no subject).
const FRENCH_OBJECTS: &[&str] = &["le", "la", "les", "l", "lui", "leur", "y"];

/// What comes before a French object pronoun and never before an article: a subject or
/// "ne" ("je la vois", "je ne la vois plus", "je l'appelle").
const BEFORE_A_FRENCH_OBJECT: &[&str] = &[
    "je", "j", "tu", "il", "elle", "on", "nous", "vous", "ils", "elles", "ne", "n",
];

/// French verbs of going and wanting, before an object pronoun and its infinitive: "je
/// vais la voir", "je veux lui rendre visite".
const GOING_TO: &[&str] = &[
    "vais", "va", "vas", "allons", "allez", "vont", "veux", "peux", "dois", "voudrais", "compte",
];

/// Spanish and Italian object pronouns, before a verb in the first person ("la visito",
/// "lo vedo") or after an infinitive ("verla", "trovarla").
const ROMANCE_OBJECTS: &[&str] = &["lo", "la", "los", "las", "le", "les", "li", "gli"];

/// Portuguese object pronouns after a hyphen ("visitá-la", "vejo-o").
const HYPHENATED_OBJECTS: &[&str] = &[
    "la", "lo", "las", "los", "lhe", "lhes", "a", "o", "as", "os",
];

/// Whether `clause` (its lowercase `words`, [`crate::text::keywords`]) has an object
/// pronoun that stands for someone named before: English "her" at the end or before a
/// function word ("I'm visiting her in May"; not "her flat"); Dutch "haar" and "ze" and
/// German "sie" right after the speaker's verb ("Ik ga haar opzoeken"); a French one
/// after a subject or "ne", or after a verb of going or wanting and before an infinitive
/// ([`GOING_TO`]: "je vais la voir"; not "je vais la semaine prochaine"); a Spanish or
/// Italian one at the start, after "y", "e", "yo", "io", "no" or "non" and before a verb
/// in the first person ("y la visito"), or joined to an infinitive, uncapitalised ("voy a
/// verla", "vado a trovarla"; not "Charles"); a Portuguese one after a hyphen ("vou
/// visitá-la").
fn object_pronoun(clause: &str, words: &[String]) -> bool {
    let function = |w: &str| crate::text::content_words(w).is_empty();
    let infinitive = |w: &str| ["er", "ir", "re", "oir"].iter().any(|end| w.ends_with(end));
    let at = |i: usize| words.get(i).map(String::as_str);
    let proclitic = words.iter().enumerate().any(|(i, w)| {
        let (before, after) = (i.checked_sub(1).and_then(at), at(i + 1));
        match w.as_str() {
            "her" => i > 0 && after.is_none_or(function),
            // "Ik ga haar opzoeken", "Ich besuche sie im Herbst": after the speaker's
            // verb, where "sie" and "ze" are no subject.
            "haar" | "ze" | "sie" => i >= 2 && ["ik", "ich"].contains(&words[i - 2].as_str()),
            w if FRENCH_OBJECTS.contains(&w) => {
                before.is_some_and(|b| {
                    BEFORE_A_FRENCH_OBJECT.contains(&b)
                        || GOING_TO.contains(&b) && after.is_some_and(infinitive)
                }) || ROMANCE_OBJECTS.contains(&w) && spanish_or_italian(before, after)
            }
            w if ROMANCE_OBJECTS.contains(&w) => spanish_or_italian(before, after),
            _ => false,
        }
    });
    let enclitic = clause
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.starts_with(char::is_uppercase))
        .any(|w| {
            let w = w.to_lowercase();
            ROMANCE_OBJECTS.iter().any(|o| {
                w.strip_suffix(o).is_some_and(|verb| {
                    verb == "ver"
                        || verb.chars().count() >= 4
                            && ["ar", "er", "ir"].iter().any(|end| verb.ends_with(end))
                })
            })
        });
    let hyphenated = clause.match_indices('-').any(|(at, _)| {
        let before = clause[..at]
            .chars()
            .next_back()
            .is_some_and(char::is_alphabetic);
        let object: String = clause[at + 1..]
            .chars()
            .take_while(|c| c.is_alphanumeric())
            .collect();
        before && HYPHENATED_OBJECTS.contains(&object.to_lowercase().as_str())
    });
    proclitic || enclitic || hyphenated
}

/// Whether a Spanish or Italian clitic stands, between `before` and `after`, as an object
/// before a verb in the first person: at the start or after "y", "e", "yo", "io", "no",
/// "non", and before a word of four letters or more that ends in "o" ("y la visito", "lo
/// vedo").
fn spanish_or_italian(before: Option<&str>, after: Option<&str>) -> bool {
    before.is_none_or(|b| ["y", "e", "yo", "io", "no", "non"].contains(&b))
        && after.is_some_and(|a| a.chars().count() >= 4 && a.ends_with('o'))
}

/// The pieces of the user's messages that say one thing each: the [`pieces`] of their
/// sentences, where a sentence whose opening clause points back ([`opening`],
/// [`points_back`]) is one piece with the last piece before it in the same message.
/// "Nos petits-enfants vivent à Nancy. Nous les voyons tous les week-ends" says one
/// thing, where "Nous les voyons tous les week-ends" alone says nothing of whom; "Now I
/// work at a bakery and I love it" is news of its own. A message is never joined to the
/// one before.
fn said_pieces(messages: &[Message]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for message in messages {
        let content = message.content.as_str();
        let from = out.len();
        for sentence in users_sentences(std::slice::from_ref(message)) {
            let mut these = pieces(sentence).into_iter().filter(|p| !p.is_empty());
            let Some(first) = these.next() else { continue };
            let begins = sentence.trim_start().starts_with(first);
            let joins = out.len() > from && begins && points_back(opening(first));
            match out.last_mut() {
                Some(last) if joins => {
                    *last = &content[offset(content, last)..offset(content, first) + first.len()];
                }
                _ => out.push(first),
            }
            out.extend(these);
        }
    }
    out
}

/// The opening clause of `piece`: what comes before its first comma and its first
/// conjunction ([`after_a_conjunction`]).
fn opening(piece: &str) -> &str {
    let clause = piece.split(',').next().unwrap_or(piece);
    match after_a_conjunction(clause) {
        Some(after) => clause[..offset(clause, after)]
            .trim_end()
            .rsplit_once(char::is_whitespace)
            .map_or("", |(before, _)| before),
        None => clause,
    }
}

/// Where `part`, a slice of `whole`, begins in it.
fn offset(whole: &str, part: &str) -> usize {
    part.as_ptr() as usize - whole.as_ptr() as usize
}

/// The pieces of a sentence that say one thing each, trimmed. The sentence is cut
/// before each comma whose next word is one of the [`SUBJECTS`] ([`at_subjects`]); a
/// piece with a conjunction (see [`after_a_conjunction`]) is cut into its clauses
/// ([`crate::infer::looks::clauses`]) and kept only where each has none, or where the
/// clause after it points back ("Ma mère vit à Marseille et je vais la voir en mai" is
/// one thing said; "I live in Leeds and I work as a nurse" two, and "I love cats and
/// dogs" none that a fact could be cut from).
pub(super) fn pieces(sentence: &str) -> Vec<&str> {
    fn trim(s: &str) -> &str {
        s.trim().trim_matches(|c: char| !c.is_alphanumeric())
    }
    let mut out = Vec::new();
    for piece in at_subjects(sentence) {
        if after_a_conjunction(piece).is_none() {
            out.push(trim(piece));
            continue;
        }
        let mut clauses: Vec<(std::ops::Range<usize>, bool)> = Vec::new();
        for r in crate::infer::looks::clauses(piece) {
            match clauses.last_mut() {
                Some((last, joined)) if points_back(&piece[r.clone()]) => {
                    last.end = r.end;
                    *joined = true;
                }
                _ => clauses.push((r, false)),
            }
        }
        for (r, joined) in clauses {
            let clause = &piece[r];
            // A conjunction within a clause: kept where what follows it points back
            // ("Mi abuela vive en Lugo y voy a verla").
            let after = after_a_conjunction(clause);
            if joined || after.is_none_or(points_back) {
                out.push(trim(clause));
            }
        }
    }
    out
}

/// What follows the first conjunction of `piece` ("and", "but", or their word in the
/// other six languages [`crate::infer::looks::clauses`] knows), if it has one after its
/// first word (a sentence that opens with "But" joins nothing, and "Ma sœur vit à Lyon"
/// opens with "my"). "en" is Dutch for "and" and Spanish and French for "in": it joins
/// clauses only in a piece with a word of Dutch's own ([`DUTCH`]); "ma" is Italian for
/// "but" and French for "my", and "y" Spanish for "and" and French for "there": neither
/// joins clauses in a piece with a word of French's own ([`FRENCH`]).
fn after_a_conjunction(piece: &str) -> Option<&str> {
    let words = crate::text::keywords(piece);
    let dutch = words.iter().any(|w| DUTCH.contains(&w.as_str()));
    let french = words.iter().any(|w| FRENCH.contains(&w.as_str()));
    piece
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .skip(1)
        .find(|w| {
            let w = w.to_lowercase();
            crate::infer::looks::CONJUNCTIONS.contains(&w.as_str())
                && (w != "en" || dutch)
                && ((w != "ma" && w != "y") || !french)
        })
        .map(|w| &piece[offset(piece, w) + w.len()..])
}

/// A sentence cut before each comma whose next word is one of the [`SUBJECTS`], unless the
/// clause that word begins points back at the one before it ([`points_back`]).
fn at_subjects(sentence: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (comma, _) in sentence.match_indices(',') {
        let rest = &sentence[comma + 1..];
        let clause = rest.split(',').next().unwrap_or(rest);
        let next = crate::text::keywords(clause);
        if next.first().is_some_and(|w| SUBJECTS.contains(&w.as_str())) && !points_back(clause) {
            pieces.push(&sentence[start..comma]);
            start = comma + 1;
        }
    }
    pieces.push(&sentence[start..]);
    pieces
}
