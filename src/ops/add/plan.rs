//! The plan of an inferred add, as pure functions: from the new facts, the memories shown
//! to the model and its decisions, to what happens to each fact, and from that plan to the
//! writes of one batch. No model, no store, no knowledge of any language: every check here
//! reads ids, flags and times.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::credits::Prices;
use crate::infer::{Decision, Event, Fact};
use crate::record::{content_hash, union, Core, MemoryRecord, Message, Owners};
use crate::store::{NewMemory, Row, Write};

/// What happens to one new fact.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FactPlan {
    /// Stored as a new memory.
    Add,
    /// Stored as a new memory that supersedes memory `memory` (an index into the memories
    /// shown): the old memory keeps its text and history, and is no longer current.
    Supersede { memory: usize },
    /// Already known: nothing is stored.
    None,
}

/// Applies the model's decisions for the facts it was asked about (`asked[i]` is the fact
/// the model calls `i`) to the plans known without it (`None`: to decide), and makes them
/// safe:
/// - an UPDATE or DELETE of memory `m` that the model did not call still true is a
///   supersession of `m` by the fact, stored in its own words;
/// - a NONE that names a memory is a fact already known; anything else (an ADD, a NONE
///   that names none) stores the fact, so that no fact is lost to a decision;
/// - an immutable memory is never superseded: the fact is added instead (a memory said
///   after the fact, in a conversation added out of order, is not superseded either: the
///   fact is stored as its history, see [`supersede`]);
/// - a memory is superseded once per call: a second fact that names it is added beside.
pub(crate) fn decide(
    known: Vec<Option<FactPlan>>,
    asked: &[usize],
    shown: &[Row],
    decisions: &[Decision],
) -> Vec<FactPlan> {
    let mut plans = known;
    for (i, &fact) in asked.iter().enumerate() {
        let decision = decisions.iter().find(|d| d.fact == i);
        let named = decision.and_then(|d| d.memory).filter(|&m| m < shown.len());
        let still_true = decision.and_then(|d| d.memory_still_true) == Some(true);
        let plan = match (decision.map(|d| d.event), named) {
            (Some(Event::Update | Event::Delete), Some(m)) if !still_true => {
                let record = &shown[m].record;
                let taken = plans
                    .iter()
                    .any(|p| matches!(p, Some(FactPlan::Supersede { memory }) if *memory == m));
                if record.immutable || taken {
                    FactPlan::Add
                } else {
                    FactPlan::Supersede { memory: m }
                }
            }
            (Some(Event::None), Some(_)) => FactPlan::None,
            _ => FactPlan::Add,
        };
        if let Some(slot) = plans.get_mut(fact) {
            *slot = Some(plan);
        }
    }
    plans
        .into_iter()
        .map(|p| p.unwrap_or(FactPlan::Add))
        .collect()
}

/// What an `add` call stores, and when.
#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) messages: Vec<Message>,
    pub(crate) owners: Owners,
    pub(crate) metadata: Map<String, Value>,
    pub(crate) categories: Vec<String>,
    pub(crate) expiry: Option<DateTime<Utc>>,
    pub(crate) immutable: bool,
    /// When the memories are stored.
    pub(crate) at: DateTime<Utc>,
    /// When the conversation took place: the new memories' `created_at` and `valid_from`,
    /// and what relative dates are counted from.
    pub(crate) spoken_at: DateTime<Utc>,
}

/// The writes of a plan.
#[derive(Debug)]
pub(crate) struct Writes {
    /// Inserts and supersessions, in the order of the facts.
    pub(crate) writes: Vec<Write>,
    /// Credits the writes cost (the model call's price not included).
    pub(crate) credits: u64,
}

/// Turns a plan into writes: `vectors` holds one vector per fact. A fact that supersedes a
/// memory is a new memory, and the old one is superseded by it ([`supersede`]).
pub(crate) fn writes(
    plans: &[FactPlan],
    facts: &[Fact],
    vectors: Vec<Vec<f32>>,
    shown: &[Row],
    cx: &Context,
    prices: &Prices,
) -> Writes {
    let mut out = Writes {
        writes: Vec::new(),
        credits: 0,
    };
    for ((fact, vector), plan) in facts.iter().zip(vectors).zip(plans) {
        let (mut record, ends) = match plan {
            FactPlan::None => continue,
            FactPlan::Add => {
                out.credits += prices.add;
                (new_record(Uuid::now_v7(), fact, &[], cx), None)
            }
            FactPlan::Supersede { memory } => {
                let Some(row) = shown.get(*memory) else {
                    continue;
                };
                out.credits += prices.update;
                // The new memory keeps the labels of the one it supersedes.
                let record = new_record(Uuid::now_v7(), fact, &row.record.categories, cx);
                (record, Some(row))
            }
        };
        let ends = ends.and_then(|row| supersede(row, &mut record, cx));
        out.writes.push(Write::Insert(NewMemory::new(
            record,
            vector,
            cx.messages.clone(),
        )));
        out.writes.extend(ends);
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

/// A new memory for a fact, with these labels beside its own.
fn new_record(id: Uuid, fact: &Fact, kept: &[String], cx: &Context) -> MemoryRecord {
    let categories = union(&union(kept, &cx.categories), &fact.categories);
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
        valid_from: cx.spoken_at,
        valid_until: None,
        superseded_by: None,
    }
}

#[cfg(test)]
mod tests;
