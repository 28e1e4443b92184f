//! The plan of an inferred add, as pure functions: from the new facts, the similar memories
//! they were compared with and the model's decisions, to what happens to each fact and each
//! memory, and from that plan to the writes of one batch. No model, no store: the rules of
//! reconciliation live here and are tested here.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::credits::Prices;
use crate::infer::{self, Decision, Event, Fact};
use crate::record::{content_hash, union, Core, MemoryRecord, Message, Owners};
use crate::store::{NewMemory, Row, Write};

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
    /// after all ([`Plan::second_looks`]). Then also the memories a second look could not
    /// tell apart from them ([`Plan::rival`]). No pair here gets a closer look.
    pub(crate) doubtful: Vec<(usize, usize)>,
    /// Pairs (fact, memory) that both stay true, told by their words (a stay away from a
    /// home: see [`Plan::keep_beside`]): the fact never takes that memory's place.
    pub(crate) beside: Vec<(usize, usize)>,
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
///   with the memory's but function words ("ich", "je") is not about the same thing (a
///   remark on the weather put in place of a hobby): either way the fact is added and
///   the memory stays (small models write both when a fact is about something else;
///   asked for no text, they put such remarks in place of memories more often). Such an
///   UPDATE is kept as doubtful, for a second look ([`Plan::second_looks`]);
/// - a fact its speaker marked as one more of its kind ("I also…", "anche", "ook": see
///   [`infer::additional`]), or as still holding ("I still…", [`infer::still_holds`]),
///   adds to the memories and never takes one's place: an UPDATE or DELETE for it adds
///   it, and the memory stays (small models replace a first cuisine with a second one the
///   user liked "too");
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
    // The memories a fact already takes the place of (by a rule, before the model).
    let mut touched = vec![false; shown.len()];
    for plan in plans.iter().flatten() {
        if let FactPlan::Update { memory, .. } = plan {
            if let Some(t) = touched.get_mut(*memory) {
                *t = true;
            }
        }
    }
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
            if texts.get(fact).is_some_and(|t| adds_only(t)) {
                tracing::debug!(memory = %r.id, "a fact marked as one more of its kind, or as still holding, replaces nothing");
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
                let unrelated = !about_the_same(&r.memory, rewrite);
                let checked = carries_news(&rewritten, &old, &said) && !unrelated;
                // News beside all of the old: the model took the two for compatible.
                let both =
                    checked && keeps_both(&r.memory, texts.get(fact).map_or("", |t| t), &rewritten);
                if !checked && !r.immutable && !touched[m] {
                    doubtful.push((fact, m));
                }
                if both {
                    tracing::debug!(memory = %r.id, "an UPDATE that keeps the memory beside the news adds the fact");
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
        beside: Vec::new(),
    }
}

/// Whether a fact only adds to the memories: its speaker marked it as one more of its
/// kind ([`infer::additional`]) or as still holding ([`infer::still_holds`]).
fn adds_only(fact: &str) -> bool {
    infer::additional(fact) || infer::still_holds(fact)
}

/// Whether an UPDATE's text (`rewrite`) is about what the memory is: they share a word
/// other than a function word ("ich" in "Ich segle gern" and "Ich gebe Nachhilfe in
/// Mathe"). A memory with no such word but numbers ("I'm 34") is about what its function
/// words say, and any word in common will do ("I'm 43").
fn about_the_same(memory: &str, rewrite: &str) -> bool {
    let content = crate::text::content_terms(memory);
    let (about, words) = if content
        .iter()
        .all(|t| t.chars().all(|c| c.is_ascii_digit()))
    {
        (crate::text::terms(memory), crate::text::terms(rewrite))
    } else {
        (content, crate::text::content_terms(rewrite))
    };
    words.iter().any(|t| about.contains(t))
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

    /// The doubtful UPDATEs worth a second look (see [`crate::infer::replaces`]), as
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

    /// The memory a second look at fact `fact` and memory `m` must tell `m` apart from:
    /// the fact's most relevant other memory found for it (`found[i]`, most relevant
    /// first, for the fact the model calls `i`, which is fact `asked[i]`) that it could
    /// replace (not immutable, not kept beside it). None when the fact has no other.
    pub(crate) fn rival(
        &self,
        fact: usize,
        m: usize,
        asked: &[usize],
        shown: &[Row],
        found: &[Vec<usize>],
    ) -> Option<usize> {
        let i = asked.iter().position(|&a| a == fact)?;
        found.get(i)?.iter().copied().find(|&o| {
            o != m
                && shown.get(o).is_some_and(|row| !row.record.immutable)
                && !self.beside.contains(&(fact, o))
        })
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
                    && texts.get(fact).is_some_and(|t| !adds_only(t))
            })
            .map(|(&fact, memories)| {
                let memories = memories
                    .iter()
                    .copied()
                    .filter(|&m| {
                        shown.get(m).is_some_and(|row| {
                            !row.record.immutable && row.record.created_at <= spoken_at
                        }) && !self.doubtful.contains(&(fact, m))
                            && !self.beside.contains(&(fact, m))
                            && !self.touches(m)
                    })
                    .take(CLOSER_LOOKS)
                    .collect();
                (fact, memories)
            })
            .filter(|(_, memories): &(usize, Vec<usize>)| !memories.is_empty())
            .collect()
    }

    /// Each fact of `pairs` (fact, memory) stays beside its memory whatever the model
    /// said: an UPDATE of that memory by that fact adds the fact instead, and neither a
    /// second look nor a closer look asks about the pair.
    pub(crate) fn keep_beside(&mut self, pairs: Vec<(usize, usize)>) {
        for &(fact, m) in &pairs {
            if matches!(self.facts.get(fact), Some(FactPlan::Update { memory, .. }) if *memory == m)
            {
                tracing::debug!("a fact stays beside the memory it would have replaced");
                self.facts[fact] = FactPlan::Add;
            }
        }
        self.doubtful.retain(|pair| !pairs.contains(pair));
        self.beside.extend(pairs);
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
        if self.touches(m)
            || self.facts.get(fact) != Some(&FactPlan::Add)
            || self.beside.contains(&(fact, m))
        {
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
    /// Inserts and supersessions, in the order of the facts.
    pub(crate) writes: Vec<Write>,
    /// Credits the writes cost (the model call's price not included).
    pub(crate) credits: u64,
    /// The id of the memory each fact is stored as (`None`: a fact already known).
    pub(crate) ids: Vec<Option<Uuid>>,
}

/// Turns a plan into writes. `vectors` holds one vector per fact, `update_vectors` one per
/// fact that takes a memory's place, in fact order (the text it is stored as).
///
/// A fact that takes a memory's place is a new memory, and the old one is superseded by it
/// ([`supersede`]): kept with its text and history, no longer current.
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
        ids: vec![None; facts.len()],
    };
    let mut update_vectors = update_vectors.into_iter();
    for (i, ((fact, vector), plan)) in facts.iter().zip(vectors).zip(&plan.facts).enumerate() {
        match plan {
            FactPlan::None => {}
            FactPlan::Add => {
                let record = new_record(Uuid::now_v7(), &fact.text, fact, &[], cx);
                out.ids[i] = Some(record.id);
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
                // The new memory keeps the labels of the one it supersedes.
                let mut record = new_record(Uuid::now_v7(), text, fact, &row.record.categories, cx);
                out.ids[i] = Some(record.id);
                let ends = supersede(row, &mut record, cx);
                out.writes.push(Write::Insert(NewMemory::new(
                    record,
                    vector,
                    cx.messages.clone(),
                )));
                out.writes.extend(ends);
                out.credits += prices.update;
            }
        }
    }
    out
}

/// New memory `record` takes the place of `row`: the write that ends `row`'s validity when
/// `record` was said (the add's timestamp), written only if `row` is still as the model saw
/// it. A statement older than the memory (a conversation added out of order) supersedes
/// nothing: `record` is stored as history instead, superseded by the memory from the time
/// the memory's fact was said.
pub(crate) fn supersede(row: &Row, record: &mut MemoryRecord, cx: &Context) -> Option<Write> {
    if record.valid_from < row.record.valid_from {
        record.valid_until = Some(row.record.valid_from);
        record.superseded_by = Some(row.record.id);
        return None;
    }
    Some(Write::Supersede {
        id: row.record.id,
        by: record.id,
        at: record.valid_from,
        input: cx.messages.clone(),
        expect: Some(row.version),
    })
}

/// A new memory for a fact, stored as `text`, with these labels beside its own.
fn new_record(id: Uuid, text: &str, fact: &Fact, kept: &[String], cx: &Context) -> MemoryRecord {
    let categories = union(&union(kept, &cx.categories), &fact.categories);
    let mut metadata = cx.metadata.clone();
    Core::of_text(text, &categories, fact.entities.clone(), fact.importance)
        .insert_into(&mut metadata);
    MemoryRecord {
        id,
        hash: content_hash(text),
        memory: text.to_owned(),
        owners: cx.owners.clone(),
        metadata,
        categories,
        immutable: cx.immutable,
        expiration_date: cx.expiry,
        created_at: cx.spoken_at,
        updated_at: cx.at,
        context: None,
        valid_from: cx.spoken_at,
        valid_until: None,
        superseded_by: None,
    }
}

#[cfg(test)]
mod tests;
