//! The plan of an inferred add, as pure functions: from the new facts, the similar memories
//! they were compared with and the model's decisions, to what happens to each fact and each
//! memory, and from that plan to the writes of one batch. No model, no store: the rules of
//! reconciliation live here and are tested here.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::credits::Prices;
use crate::infer::{Decision, Event, Fact};
use crate::record::{content_hash, union, Core, MemoryRecord, Message, Owners};
use crate::store::{MemoryUpdate, NewMemory, Row, Write};

/// What happens to one new fact.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FactPlan {
    /// Stored as a new memory.
    Add,
    /// Takes the place of similar memory `memory` (an index into the memories shown), whose
    /// text becomes `text`, the fact's.
    Update { memory: usize, text: String },
    /// Already known: nothing is stored.
    None,
}

/// What happens to the facts and to the memories shown to the model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// One entry per fact.
    pub(crate) facts: Vec<FactPlan>,
    /// DELETEs, and UPDATEs whose text failed the checks of [`decide`], as (fact, memory):
    /// their facts are added, unless a second look finds that they supersede the memory
    /// after all ([`Plan::second_looks`]).
    pub(crate) doubtful: Vec<(usize, usize)>,
}

/// Applies the model's decisions for the facts that were asked about (`asked[i]` is the
/// fact the model calls `i`) to the plans known without it (`None`: to decide), and makes
/// them safe:
/// - an UPDATE gives the memory the fact's own text (`texts`, one per fact): what the user
///   said. The model's text for the memory serves only to check the UPDATE (below): stored,
///   it can merge the old value into the new ("an accountant at Michelin" from "an
///   accountant at Decathlon" and "I now work at Michelin, in the legal department");
/// - an immutable memory is never changed: a DELETE of it is skipped, an UPDATE of it
///   becomes an ADD of the fact;
/// - a memory is changed at most once per call (a second UPDATE becomes an ADD);
/// - a DELETE adds the fact and keeps the memory it names as doubtful: a second look
///   decides whether the fact takes its place (a small model deletes a hobby for a new
///   job, and a fact that supersedes a memory says what replaced it);
/// - an UPDATE whose text (the model's) brings no word of the new facts into the memory's
///   ([`carries_news`]) carries nothing of the fact, and one whose text shares no word
///   with the memory's is not about the same thing (a remark on the weather put in place
///   of a hobby): either way the fact is added and the memory stays (small models write
///   both when a fact is about something else; asked for no text, they put such remarks
///   in place of memories more often). Such an UPDATE is kept as doubtful, for a second
///   look ([`Plan::second_looks`]);
/// - a fact its speaker marked as one more of its kind ("I also…", "anche", "ook": see
///   [`ADDITIVE`]) adds to the memories and never takes one's place: an UPDATE or DELETE
///   for it adds it, and the memory stays (small models replace a first cuisine with a
///   second one the user liked "too");
/// - a fact older than the memory it would update or delete (the conversation took place
///   before the memory's `created_at`, as when old chats are imported) never replaces it:
///   the memory stays and the fact, superseded, is not stored;
/// - a fact replaces only a memory found for it (`found[i]`: the memories the search found
///   for the fact the model calls `i`, most relevant first): an UPDATE or DELETE of another
///   memory adds the fact and leaves that memory as it was (a small model puts a new job
///   in place of two cats found for another fact);
/// - a fact does not replace a memory when one more relevant to it is named by another
///   fact's UPDATE or DELETE: the fact is added and the memory stays. When one memory is
///   the most relevant to two facts, a small model gives it to one and the next memory to
///   the other ("Mi sono licenziato" in place of the pizzeria job, then "Ho cambiato lavoro
///   in banca" in place of a cat). A closer look may still find that the fact supersedes
///   one of its memories ([`Plan::closer_looks`]);
/// - a fact the model did not decide on is added.
pub(crate) fn decide(
    mut plans: Vec<Option<FactPlan>>,
    texts: &[String],
    asked: &[usize],
    shown: &[Row],
    found: &[Vec<usize>],
    decisions: Vec<Decision>,
    spoken_at: DateTime<Utc>,
) -> Plan {
    let mut touched = vec![false; shown.len()];
    let mut doubtful = Vec::new();
    // The words of the call's new facts, which an UPDATE's text must bring news from.
    let said: std::collections::HashSet<String> =
        texts.iter().flat_map(|f| crate::text::terms(f)).collect();
    // The memories the model would replace, as (the fact it calls `i`, memory).
    let named: Vec<(usize, usize)> = decisions
        .iter()
        .filter(|d| matches!(d.event, Event::Update | Event::Delete))
        .filter_map(|d| d.memory.map(|m| (d.fact, m)))
        .collect();
    for d in decisions {
        let Some(&fact) = asked.get(d.fact) else {
            continue;
        };
        let target = d
            .memory
            .and_then(|m| shown.get(m).map(|row| (m, &row.record)));
        if let (Event::Update | Event::Delete, Some((_, r))) = (d.event, target) {
            if texts.get(fact).is_some_and(|t| additional(t)) {
                tracing::debug!(memory = %r.id, "a fact marked as one more of its kind replaces nothing");
                plans[fact].get_or_insert(FactPlan::Add);
                continue;
            }
            if r.created_at > spoken_at {
                tracing::debug!(memory = %r.id, "an older fact does not replace a newer memory");
                plans[fact].get_or_insert(FactPlan::None);
                continue;
            }
        }
        let own = found.get(d.fact).map_or(&[][..], Vec::as_slice);
        let stranger = target.is_some_and(|(m, _)| !own.contains(&m));
        // A memory the fact holds more relevant than its target, named by another fact.
        let passed_over = target.is_some_and(|(m, _)| {
            own.iter()
                .take_while(|&&nearer| nearer != m)
                .any(|&nearer| named.iter().any(|&(f, n)| n == nearer && f != d.fact))
        });
        match (d.event, target) {
            (Event::Update | Event::Delete, Some((_, r))) if stranger => {
                tracing::debug!(memory = %r.id, "a fact replaces only a memory found for it");
                plans[fact].get_or_insert(FactPlan::Add);
            }
            (Event::Update | Event::Delete, Some((_, r))) if passed_over => {
                tracing::debug!(memory = %r.id, "another fact names a memory nearer to this one");
                plans[fact].get_or_insert(FactPlan::Add);
            }
            (Event::Delete, Some((m, r))) => {
                if r.immutable || touched[m] {
                    tracing::debug!(memory = %r.id, "DELETE skipped: immutable or already changed");
                } else if plans[fact].is_none() {
                    doubtful.push((fact, m));
                }
            }
            _ if plans[fact].is_some() => {}
            (Event::Update, Some((m, r))) => {
                let rewrite = d.text.as_deref().unwrap_or("").trim();
                let old: std::collections::HashSet<String> =
                    crate::text::terms(&r.memory).into_iter().collect();
                let rewritten = crate::text::terms(rewrite);
                let unrelated = !rewritten.iter().any(|t| old.contains(t));
                let checked = carries_news(&rewritten, &old, &said) && !unrelated;
                // News beside all of the old: the model took the two for compatible.
                let both =
                    checked && keeps_both(&r.memory, texts.get(fact).map_or("", |t| t), &rewritten);
                if !checked && !r.immutable && !touched[m] {
                    doubtful.push((fact, m));
                }
                let safe = checked && !both && !r.immutable && !touched[m];
                plans[fact] = Some(match texts.get(fact) {
                    Some(text) if safe => {
                        touched[m] = true;
                        FactPlan::Update {
                            memory: m,
                            text: text.clone(),
                        }
                    }
                    _ => FactPlan::Add,
                });
            }
            (Event::None, _) => plans[fact] = Some(FactPlan::None),
            _ => plans[fact] = Some(FactPlan::Add),
        }
    }
    Plan {
        facts: plans
            .into_iter()
            .map(|p| p.unwrap_or(FactPlan::Add))
            .collect(),
        doubtful,
    }
}

/// Whether an UPDATE's text (its `rewritten` terms) keeps all that the memory says and its
/// fact does not: every word of the memory worth matching (a number, or three letters or
/// more, not an English function word) that the fact lacks. Such a text states both the
/// old and the new ("I work as a nurse and volunteer at the food bank"): the model took
/// them for compatible, and the fact adds to the memory instead of taking its place.
fn keeps_both(memory: &str, fact: &str, rewritten: &[String]) -> bool {
    let fact: std::collections::HashSet<String> = crate::text::terms(fact).into_iter().collect();
    let mut own = crate::text::query_terms(memory)
        .into_iter()
        .filter(|t| !fact.contains(t))
        .filter(|t| t.chars().count() >= 3 || t.chars().any(|c| c.is_ascii_digit()))
        .peekable();
    own.peek().is_some() && own.all(|t| rewritten.contains(&t))
}

/// Whether an UPDATE's text (its `rewritten` terms) carries news into the memory (its
/// `old` terms): a word of one of the call's new facts (their terms, `said`) that the
/// memory lacks, a number or a word of three letters or more. A text that only restates the memory, or changes a
/// small word of it ("Ik speel de zondag hockey" for "Ik speel elke zondag hockey" beside
/// a new hobby), says the fact is about something else.
fn carries_news(
    rewritten: &[String],
    old: &std::collections::HashSet<String>,
    said: &std::collections::HashSet<String>,
) -> bool {
    rewritten.iter().any(|t| {
        !old.contains(t)
            && said.contains(t)
            && (t.chars().count() >= 3 || t.chars().any(|c| c.is_ascii_digit()))
    })
}

impl Plan {
    /// Each UPDATE's text made its fact's text as stored (`texts`, one per fact): the
    /// plan was decided on the facts as the model read them.
    pub(crate) fn store_as(&mut self, texts: &[String]) {
        for (plan, stored) in self.facts.iter_mut().zip(texts) {
            if let FactPlan::Update { text, .. } = plan {
                text.clone_from(stored);
            }
        }
    }

    /// The doubtful UPDATEs worth a second look (see [`crate::infer::supersedes`]), as
    /// (fact, memory): the fact is still to be added and nothing else changes the memory.
    /// A small model names the right memory for a change more often than it writes its
    /// text well ("Ich wohne in Köln" for a move to Freiburg); a decision over many
    /// memories is checked over one.
    pub(crate) fn second_looks(&self) -> Vec<(usize, usize)> {
        self.doubtful
            .iter()
            .copied()
            .filter(|&(fact, m)| self.facts.get(fact) == Some(&FactPlan::Add) && !self.touches(m))
            .collect()
    }

    /// The memories worth a closer look ([`crate::infer::outdates`]) beside each fact the
    /// plan adds although the model was asked about it, as (fact, memories): the two most
    /// relevant memories found for it (`found[i]`, most relevant first, for the fact the
    /// model calls `i`, which is fact `asked[i]`) that it may replace: not immutable, not
    /// newer than the fact, not changed by the plan and not already given a second look
    /// with it. A fact marked as one more
    /// of its kind gets none. A small model keeps an old home, job or diet beside the new
    /// one as readily as it keeps a hobby beside a move.
    pub(crate) fn closer_looks(
        &self,
        texts: &[String],
        asked: &[usize],
        shown: &[Row],
        found: &[Vec<usize>],
        spoken_at: DateTime<Utc>,
    ) -> Vec<(usize, Vec<usize>)> {
        asked
            .iter()
            .zip(found)
            .filter(|&(&fact, _)| {
                self.facts.get(fact) == Some(&FactPlan::Add)
                    && texts.get(fact).is_some_and(|t| !additional(t))
            })
            .map(|(&fact, memories)| {
                let memories = memories
                    .iter()
                    .copied()
                    .filter(|&m| {
                        shown.get(m).is_some_and(|row| {
                            !row.record.immutable && row.record.created_at <= spoken_at
                        }) && !self.doubtful.contains(&(fact, m))
                            && !self.touches(m)
                    })
                    .take(CLOSER_LOOKS)
                    .collect();
                (fact, memories)
            })
            .filter(|(_, memories): &(usize, Vec<usize>)| !memories.is_empty())
            .collect()
    }

    /// Whether the plan updates memory `m`.
    pub(crate) fn touches(&self, m: usize) -> bool {
        self.facts
            .iter()
            .any(|p| matches!(p, FactPlan::Update { memory, .. } if *memory == m))
    }

    /// Fact `fact`, which the plan adds, takes the place of memory `m` instead, unless the
    /// plan already changes that memory. Whether it did.
    pub(crate) fn supersede(&mut self, fact: usize, m: usize, text: &str) -> bool {
        if self.touches(m) || self.facts.get(fact) != Some(&FactPlan::Add) {
            return false;
        }
        self.facts[fact] = FactPlan::Update {
            memory: m,
            text: text.to_owned(),
        };
        true
    }
}

/// Most memories given a closer look beside one added fact ([`Plan::closer_looks`]).
const CLOSER_LOOKS: usize = 2;

/// Words with which a speaker marks a fact as one more of its kind, in the languages memlane
/// is evaluated in: English, French, German, Italian, Spanish, Portuguese and Dutch.
const ADDITIVE: [&str; 10] = [
    "also",
    "too",
    "aussi",
    "également",
    "auch",
    "ebenfalls",
    "anche",
    "también",
    "também",
    "ook",
];

/// Whether a fact has one of the [`ADDITIVE`] words after its first word: a first "Also,"
/// brings news ("Also, I moved to Porto"), and German's "Also" means "so".
fn additional(fact: &str) -> bool {
    fact.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .skip(1)
        .any(|word| ADDITIVE.contains(&word.to_lowercase().as_str()))
}

/// What the caller gave `add`, checked, as the plan's writes need it.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    pub(crate) messages: Vec<Message>,
    pub(crate) owners: Owners,
    pub(crate) metadata: Map<String, Value>,
    pub(crate) categories: Vec<String>,
    pub(crate) expiry: Option<DateTime<Utc>>,
    pub(crate) immutable: bool,
    /// When the memories are stored.
    pub(crate) at: DateTime<Utc>,
    /// When the conversation took place: the new memories' `created_at`, and what relative
    /// dates are counted from.
    pub(crate) spoken_at: DateTime<Utc>,
}

/// The writes of a plan.
#[derive(Debug)]
pub(crate) struct Writes {
    /// Inserts and updates, in the order of the facts.
    pub(crate) writes: Vec<Write>,
    /// Credits the writes cost (the model call's price not included).
    pub(crate) credits: u64,
}

/// Turns a plan into writes. `vectors` holds one vector per fact, `update_vectors` one per
/// UPDATE in fact order (the new text read with the memory's context).
pub(crate) fn writes(
    plan: &Plan,
    facts: &[Fact],
    vectors: Vec<Vec<f32>>,
    update_vectors: Vec<Vec<f32>>,
    shown: &[Row],
    cx: &Context,
    prices: &Prices,
) -> Writes {
    let mut out = Writes {
        writes: Vec::new(),
        credits: 0,
    };
    let mut update_vectors = update_vectors.into_iter();
    for ((fact, vector), plan) in facts.iter().zip(vectors).zip(&plan.facts) {
        match plan {
            FactPlan::None => {}
            FactPlan::Add => {
                let record = new_record(Uuid::now_v7(), fact, cx);
                out.writes.push(Write::Insert(NewMemory::new(
                    record,
                    vector,
                    cx.messages.clone(),
                )));
                out.credits += prices.add;
            }
            FactPlan::Update { memory, text } => {
                let (Some(row), Some(vector)) = (shown.get(*memory), update_vectors.next()) else {
                    continue;
                };
                let old = &row.record;
                let categories = union(&old.categories, &fact.categories);
                let mut metadata = old.metadata.clone();
                Core::revised(
                    &old.metadata,
                    text,
                    &categories,
                    &fact.entities,
                    Some(fact.importance),
                )
                .insert_into(&mut metadata);
                // Written only if the memory is still as the model saw it.
                let mut update = MemoryUpdate::new(old.id, cx.at);
                update.expect = Some(row.version);
                update.text = Some((text.clone(), vector));
                update.metadata = Some(metadata);
                update.categories = Some(categories);
                update.input = cx.messages.clone();
                out.writes.push(Write::Update(update));
                out.credits += prices.update;
            }
        }
    }
    out
}

/// A new memory for a fact.
fn new_record(id: Uuid, fact: &Fact, cx: &Context) -> MemoryRecord {
    let categories = union(&cx.categories, &fact.categories);
    let mut metadata = cx.metadata.clone();
    Core::of_text(
        &fact.text,
        &categories,
        fact.entities.clone(),
        fact.importance,
    )
    .insert_into(&mut metadata);
    MemoryRecord {
        id,
        hash: content_hash(&fact.text),
        memory: fact.text.clone(),
        owners: cx.owners.clone(),
        metadata,
        categories,
        immutable: cx.immutable,
        expiration_date: cx.expiry,
        created_at: cx.spoken_at,
        updated_at: cx.at,
        context: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::now;

    fn memory(text: &str, immutable: bool) -> Row {
        let at = now();
        let record = MemoryRecord {
            id: Uuid::now_v7(),
            memory: text.into(),
            owners: Owners::default(),
            metadata: Map::new(),
            categories: vec!["food".into()],
            immutable,
            expiration_date: None,
            created_at: at,
            updated_at: at,
            hash: content_hash(text),
            context: None,
        };
        Row::new(record, 1, 3, 1, None)
    }

    fn fact(text: &str) -> Fact {
        Fact {
            text: text.into(),
            categories: vec!["travel".into()],
            entities: vec!["Ana".into()],
            importance: 7,
        }
    }

    fn decision(fact: usize, event: Event, memory: Option<usize>, text: Option<&str>) -> Decision {
        Decision {
            fact,
            event,
            memory,
            text: text.map(str::to_string),
        }
    }

    fn texts(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|t| t.to_string()).collect()
    }

    /// Every memory shown found for every fact asked about (the tests have fewer of each),
    /// memory `i` most relevant to the fact the model calls `i`.
    fn anywhere() -> Vec<Vec<usize>> {
        (0..8)
            .map(|i| {
                std::iter::once(i)
                    .chain((0..8).filter(|&m| m != i))
                    .collect()
            })
            .collect()
    }

    /// A conversation after every memory of the tests was created.
    fn later() -> DateTime<Utc> {
        now() + chrono::Duration::days(1)
    }

    /// [`decide`] for facts none of which is known yet, all asked about in their order,
    /// from a conversation after the memories.
    fn decided(
        facts: &[String],
        shown: &[Row],
        found: &[Vec<usize>],
        decisions: Vec<Decision>,
    ) -> Plan {
        let asked: Vec<usize> = (0..facts.len()).collect();
        decide(
            vec![None; facts.len()],
            facts,
            &asked,
            shown,
            found,
            decisions,
            later(),
        )
    }

    #[test]
    fn an_older_fact_never_replaces_a_newer_memory() {
        let shown = vec![
            memory("Lives in Valencia", false),
            memory("Has a cat", false),
        ];
        let facts = texts(&["Lives in Lisbon", "Has a cat named Tom"]);
        let old_chat = now() - chrono::Duration::days(3 * 365);
        let decisions = || {
            vec![
                decision(0, Event::Delete, Some(0), None),
                decision(1, Event::Update, Some(1), Some("Has a cat, Tom")),
            ]
        };
        let plan = decide(
            vec![None, None],
            &facts,
            &[0, 1],
            &shown,
            &anywhere(),
            decisions(),
            old_chat,
        );
        assert_eq!(plan.facts, vec![FactPlan::None, FactPlan::None]);
        assert!(plan.doubtful.is_empty(), "the newer memory stays");
        // The same decisions from a conversation after the memories apply.
        let plan = decided(&facts, &shown, &anywhere(), decisions());
        assert_eq!(plan.doubtful, vec![(0, 0)]);
        assert_eq!(
            plan.facts,
            vec![
                FactPlan::Add,
                FactPlan::Update {
                    memory: 1,
                    text: "Has a cat named Tom".into()
                }
            ]
        );
    }

    #[test]
    fn decisions_become_plans_and_only_safe_ones_stand() {
        let shown = vec![
            memory("Lives in Madrid", false),
            memory("Blood type O", true),
            memory("Likes tea", false),
            memory("Plays chess", false),
        ];
        // Facts 0..=5; 6 is an exact repeat found without the model.
        let facts = texts(&[
            "Moved to Lisbon",
            "Blood type A",
            "Likes green tea now",
            "Likes black tea",
            "Likes tea",
            "I play chess",
            "Plays chess",
        ]);
        let mut known = vec![None; 7];
        known[6] = Some(FactPlan::None);
        let asked = [0, 1, 2, 3, 4, 5];
        // The memory each fact names is the most relevant to it.
        let found = vec![vec![0], vec![1], vec![2], vec![2], vec![3], vec![3]];
        let plan = decide(
            known,
            &facts,
            &asked,
            &shown,
            &found,
            vec![
                // A contradiction: the fact is added, the memory gets a second look.
                decision(0, Event::Delete, Some(0), None),
                // An immutable memory is never deleted, nor updated: the fact is added.
                decision(1, Event::Delete, Some(1), None),
                decision(1, Event::Update, Some(1), Some("Blood type A")),
                // An update: the memory takes the fact's text, not the model's.
                decision(2, Event::Update, Some(2), Some("Likes tea, green now")),
                // A second change of the same memory becomes an add.
                decision(3, Event::Update, Some(2), Some("Likes black tea")),
                // Known already.
                decision(4, Event::None, None, None),
                // An update to the same text carries nothing of fact 5: it is added.
                decision(5, Event::Update, Some(3), Some("Plays chess")),
                // Out-of-range numbers from the model are ignored.
                decision(9, Event::Add, None, None),
                decision(4, Event::Delete, Some(7), None),
            ],
            later(),
        );
        assert_eq!(
            plan.facts,
            vec![
                FactPlan::Add,
                FactPlan::Add,
                FactPlan::Update {
                    memory: 2,
                    text: "Likes green tea now".into()
                },
                FactPlan::Add,
                FactPlan::None,
                FactPlan::Add,
                FactPlan::None,
            ]
        );
        assert_eq!(plan.doubtful, vec![(0, 0), (5, 3)]);
    }

    /// An update whose text shares no word with the memory's (small models write a remark
    /// in place of a hobby) is not about it: the fact is added, the memory stays.
    #[test]
    fn an_update_about_something_else_leaves_the_memory_and_adds_the_fact() {
        let shown = vec![
            memory("Swims on Sundays", false),
            memory("Lives in Oslo", false),
        ];
        let plan = decided(
            &texts(&["Grey skies today!", "Moved to Bergen", "Swims on Mondays"]),
            &shown,
            &anywhere(),
            vec![
                decision(0, Event::Update, Some(0), Some("Grey skies today!")),
                decision(1, Event::Update, Some(1), Some("Lives in Bergen now")),
            ],
        );
        assert_eq!(
            plan.facts,
            vec![
                FactPlan::Add,
                FactPlan::Update {
                    memory: 1,
                    text: "Moved to Bergen".into()
                },
                // Undecided: added.
                FactPlan::Add,
            ]
        );
        assert_eq!(plan.doubtful, vec![(0, 0)], "the remark gets a second look");
    }

    /// An UPDATE stands only when its text brings a word of the new facts into the memory:
    /// a new value, a number; not a small word changed, nor a word the facts lack.
    #[test]
    fn an_update_must_bring_news_from_the_facts() {
        let shown = vec![
            memory("Ik speel elke zondag hockey", false),
            memory("I'm 34", false),
            memory("Lives in Oslo", false),
            memory("Works at a bakery", false),
        ];
        let facts = texts(&[
            "Daarnaast ben ik begonnen met schilderen in de tuin",
            "I'm actually 43",
            "Moved to Bergen",
            "Got a new job",
        ]);
        let plan = decided(
            &facts,
            &shown,
            &anywhere(),
            vec![
                decision(0, Event::Update, Some(0), Some("Ik speel de zondag hockey")),
                decision(1, Event::Update, Some(1), Some("I'm 43")),
                decision(2, Event::Update, Some(2), Some("Lives in Bergen")),
                decision(3, Event::Update, Some(3), Some("Works at a bank")),
            ],
        );
        assert_eq!(
            plan.facts,
            vec![
                FactPlan::Add,
                FactPlan::Update {
                    memory: 1,
                    text: "I'm actually 43".into()
                },
                FactPlan::Update {
                    memory: 2,
                    text: "Moved to Bergen".into()
                },
                // "bank" is the model's, not the user's.
                FactPlan::Add,
            ]
        );
    }

    /// Each fact the model was asked about and the plan adds gets a closer look at its two
    /// most relevant memories that it may replace: none that is immutable, newer than the
    /// conversation, updated by another fact, or already given a second look with it; none
    /// for a fact marked as one more of its kind, nor for a fact the plan updates with.
    #[test]
    fn an_added_fact_gets_a_closer_look_at_its_nearest_replaceable_memories() {
        let mut shown = vec![
            memory("J'habite à Lille", false),
            memory("Je cours le dimanche", false),
            memory("Je suis végétarien", true),
            memory("J'ai un chat", false),
            memory("Je joue du violon", false),
        ];
        shown[3].record.created_at = later() + chrono::Duration::days(1);
        let facts = texts(&[
            "On s'est installés à Bordeaux",
            "Je mange de nouveau de la viande",
            "Je fais aussi du judo",
            "Il fait chaud",
            "Je joue du violoncelle",
            "Je cours le samedi",
        ]);
        let found = vec![
            // Most relevant first.
            vec![0, 1, 4],
            vec![2, 3, 1],
            vec![4],
            vec![],
            vec![4, 0],
            vec![1],
        ];
        let plan = decided(
            &facts,
            &shown,
            &found,
            vec![
                decision(0, Event::Add, None, None),
                decision(1, Event::Add, None, None),
                decision(2, Event::Add, None, None),
                decision(3, Event::Add, None, None),
                // Restates its memory: doubtful, given a second look instead.
                decision(4, Event::Update, Some(4), Some("Je joue du violon")),
                decision(5, Event::Update, Some(1), Some("Je cours le samedi")),
            ],
        );
        assert_eq!(plan.doubtful, vec![(4, 4)]);
        let asked: Vec<usize> = (0..facts.len()).collect();
        assert_eq!(
            plan.closer_looks(&facts, &asked, &shown, &found, later()),
            vec![(0, vec![0, 4]), (4, vec![0])]
        );
        // Facts are numbered as the model was asked about them; undecided, they are added.
        let asked = [5, 0, 1, 2, 3, 4];
        let plan = decide(
            vec![None; facts.len()],
            &facts,
            &asked,
            &shown,
            &found,
            vec![decision(1, Event::Add, None, None)],
            later(),
        );
        assert_eq!(
            plan.closer_looks(&facts, &asked, &shown, &found, later())[0],
            (5, vec![0, 1])
        );
    }

    /// An UPDATE whose text fails the checks is doubtful: its fact is added and it gets a
    /// second look, while its memory is mutable and nothing else changes it; a superseding
    /// fact takes the memory's place only while no other fact has.
    #[test]
    fn a_doubtful_update_gets_a_second_look() {
        let shown = vec![
            memory("Ich wohne in Köln", false),
            memory("Has a dog", true),
            memory("Swims on Sundays", false),
            memory("Plays chess", false),
        ];
        let facts = texts(&[
            "Wir sind nach Freiburg gezogen",
            "Has a cat",
            "Swims on Mondays",
            "Grey skies today",
            "Plays the piano",
        ]);
        let found = vec![vec![0], vec![1], vec![2], vec![2], vec![3]];
        let mut plan = decided(
            &facts,
            &shown,
            &found,
            vec![
                // No word shared with the memory.
                decision(
                    0,
                    Event::Update,
                    Some(0),
                    Some("Wir sind nach Freiburg gezogen"),
                ),
                decision(1, Event::Update, Some(1), Some("Has a dog")),
                decision(2, Event::Update, Some(2), Some("Swims on Mondays")),
                // Memory 2 is taken by then.
                decision(3, Event::Update, Some(2), Some("Swims on Sundays")),
                // Restates its memory.
                decision(4, Event::Update, Some(3), Some("Plays chess")),
            ],
        );
        assert_eq!(plan.doubtful, vec![(0, 0), (4, 3)]);
        assert_eq!(plan.second_looks(), vec![(0, 0), (4, 3)]);
        assert!(plan.supersede(0, 0, "Wir sind nach Freiburg gezogen"));
        assert!(
            !plan.supersede(4, 0, "Plays the piano"),
            "memory 0 is taken"
        );
        assert!(
            !plan.supersede(2, 3, "Swims on Mondays"),
            "fact 2 is no addition"
        );
        assert_eq!(
            plan.facts,
            vec![
                FactPlan::Update {
                    memory: 0,
                    text: "Wir sind nach Freiburg gezogen".into()
                },
                FactPlan::Add,
                FactPlan::Update {
                    memory: 2,
                    text: "Swims on Mondays".into()
                },
                FactPlan::Add,
                FactPlan::Add,
            ]
        );
        // Fact 0 is no longer added.
        assert_eq!(plan.second_looks(), vec![(4, 3)]);
    }

    /// A fact its speaker marked as one more of its kind ("anche", "ook", "too") never
    /// takes a memory's place, whatever the model decided; the same fact without the mark
    /// does, and so does one with "Also" as its first word; a word that only contains one
    /// ("Toots") is no mark.
    #[test]
    fn a_fact_said_to_be_one_more_of_its_kind_replaces_nothing() {
        let shown = vec![
            memory("Adoro la cucina giapponese", false),
            memory("Ik ben timmerman in Utrecht", false),
            memory("My dog is called Rex", false),
        ];
        let decisions = || {
            vec![
                decision(0, Event::Update, Some(0), Some("Adoro la cucina etiope")),
                decision(1, Event::Delete, Some(1), None),
                decision(2, Event::Update, Some(2), Some("My dog is called Toots")),
            ]
        };
        let marked = texts(&[
            "Mi piace anche la cucina etiope",
            "Ik werk op zondag ook in het dierenasiel",
            "We have a cat called Toots too",
        ]);
        let plan = decided(&marked, &shown, &anywhere(), decisions());
        assert_eq!(plan.facts, vec![FactPlan::Add; 3]);
        assert!(plan.doubtful.is_empty());
        // Unmarked, or "Also" first: news, which may replace.
        let unmarked = texts(&[
            "Mi piace la cucina etiope",
            "Ik werk in het dierenasiel",
            "Also, my dog is called Toots",
        ]);
        let plan = decided(&unmarked, &shown, &anywhere(), decisions());
        assert_eq!(
            plan.facts,
            vec![
                FactPlan::Update {
                    memory: 0,
                    text: "Mi piace la cucina etiope".into()
                },
                FactPlan::Add,
                FactPlan::Update {
                    memory: 2,
                    text: "Also, my dog is called Toots".into()
                },
            ]
        );
        assert_eq!(plan.doubtful, vec![(1, 1)]);
    }

    /// An UPDATE whose text keeps all of the memory beside the news says both hold: the
    /// fact is added and the memory stays. One that drops the old value is a change.
    #[test]
    fn an_update_that_states_both_adds_the_fact() {
        let shown = vec![
            memory("I'm a software engineer at a bank", false),
            memory("My book club meets on Wednesdays", false),
        ];
        let facts = texts(&[
            "I mentor students at a coding bootcamp",
            "The book club is on Thursdays",
        ]);
        let plan = decided(
            &facts,
            &shown,
            &anywhere(),
            vec![
                decision(
                    0,
                    Event::Update,
                    Some(0),
                    Some("I'm a software engineer at a bank and mentor students"),
                ),
                decision(
                    1,
                    Event::Update,
                    Some(1),
                    Some("My book club meets on Thursdays"),
                ),
            ],
        );
        assert_eq!(
            plan.facts,
            vec![
                FactPlan::Add,
                FactPlan::Update {
                    memory: 1,
                    text: "The book club is on Thursdays".into()
                }
            ]
        );
        assert!(plan.doubtful.is_empty(), "the model's answer was clear");
    }

    #[test]
    fn a_fact_replaces_only_a_memory_found_for_it() {
        let shown = vec![
            memory("Trabajo de camarera en un hotel", false),
            memory("Tengo dos gatos", false),
        ];
        let facts = texts(&[
            "Por fin dejé el hotel",
            "Now I am a receptionist at a dental clinic",
        ]);
        // Fact 0 found both memories; fact 1 found the job only.
        let found = vec![vec![0, 1], vec![0]];
        let decisions = vec![
            decision(0, Event::Delete, Some(0), None),
            decision(
                1,
                Event::Update,
                Some(1),
                Some("Now I am a receptionist, two cats"),
            ),
        ];
        let plan = decided(&facts, &shown, &found, decisions);
        assert_eq!(plan.facts, vec![FactPlan::Add, FactPlan::Add]);
        assert_eq!(
            plan.doubtful,
            vec![(0, 0)],
            "a second look at the memory found for its fact only"
        );
        // A DELETE of a memory not found for its fact is no question either.
        let plan = decided(
            &facts,
            &shown,
            &found,
            vec![decision(1, Event::Delete, Some(1), None)],
        );
        assert!(plan.doubtful.is_empty());
        assert_eq!(plan.facts, vec![FactPlan::Add, FactPlan::Add]);
    }

    #[test]
    fn a_fact_does_not_replace_a_memory_in_place_of_a_nearer_one_another_fact_named() {
        let shown = vec![
            memory("Faccio il cameriere in una pizzeria di Palermo", false),
            memory("Ho un gatto nero", false),
        ];
        let facts = texts(&[
            "Mi sono licenziato",
            "Ho cambiato lavoro: ora sono in banca",
        ]);
        // Both facts found the pizzeria first and the cat second.
        let found = vec![vec![0, 1], vec![0, 1]];
        let decisions = || {
            vec![
                decision(0, Event::Delete, Some(0), None),
                decision(1, Event::Update, Some(1), Some("Ho lavoro in banca")),
            ]
        };
        let plan = decided(&facts, &shown, &found, decisions());
        assert_eq!(
            plan.facts,
            vec![FactPlan::Add, FactPlan::Add],
            "the bank job does not take the cat's place"
        );
        assert_eq!(plan.doubtful, vec![(0, 0)], "no second look at the cat");
        // Alone, a fact may replace a memory other than its most relevant one.
        let plan = decided(&facts, &shown, &found, decisions().split_off(1));
        assert_eq!(
            plan.facts[1],
            FactPlan::Update {
                memory: 1,
                text: facts[1].clone(),
            }
        );
        // And so may a fact whose more relevant memories no other fact names.
        let found = vec![vec![0, 1], vec![1, 0]];
        let plan = decided(&facts, &shown, &found, decisions());
        assert_eq!(
            plan.facts[1],
            FactPlan::Update {
                memory: 1,
                text: facts[1].clone(),
            }
        );
    }

    #[test]
    fn a_plan_becomes_writes_with_digests_history_input_and_credits() {
        let shown = vec![memory("Likes tea", false), memory("Lives in Madrid", false)];
        let plan = Plan {
            doubtful: Vec::new(),
            facts: vec![
                FactPlan::Add,
                FactPlan::Update {
                    memory: 0,
                    text: "Likes green tea".into(),
                },
                FactPlan::None,
            ],
        };
        let facts = [fact("Moved to Lisbon"), fact("Likes green tea"), fact("x")];
        let at = now();
        let cx = Context {
            messages: vec![Message::user("I moved to Lisbon and now drink green tea")],
            owners: Owners {
                user_id: Some("ann".into()),
                ..Owners::default()
            },
            metadata: Map::new(),
            categories: vec!["personal".into()],
            expiry: None,
            immutable: false,
            at,
            spoken_at: at - chrono::Duration::days(400),
        };
        let prices = Prices {
            add: 3,
            update: 5,
            inference: 100,
        };
        let out = writes(
            &plan,
            &facts,
            vec![vec![1.0], vec![2.0], vec![3.0]],
            vec![vec![4.0]],
            &shown,
            &cx,
            &prices,
        );
        assert_eq!(
            out.credits, 8,
            "one add and one update; the model call is not here"
        );
        assert_eq!(out.writes.len(), 2);
        let Write::Insert(new) = &out.writes[0] else {
            panic!("{:?}", out.writes[0])
        };
        assert_eq!(new.record.memory, "Moved to Lisbon");
        assert_eq!(new.record.categories, vec!["personal", "travel"]);
        assert_eq!(new.input, cx.messages);
        assert_eq!(
            (new.record.created_at, new.record.updated_at),
            (cx.spoken_at, cx.at),
            "dated when it was said, updated when stored"
        );
        let core = new.record.core().unwrap();
        assert_eq!(
            (core.importance, core.entities.clone()),
            (7, vec!["Ana".to_string()])
        );
        let Write::Update(update) = &out.writes[1] else {
            panic!("{:?}", out.writes[1])
        };
        assert_eq!(update.id, shown[0].record.id);
        assert_eq!(
            update.expect,
            Some(3),
            "written only over the version shown"
        );
        assert_eq!(update.text.as_ref().map(|t| t.1.clone()), Some(vec![4.0]));
        assert_eq!(
            update.categories,
            Some(vec!["food".into(), "travel".into()])
        );
    }
}
