//! `add` with inference: extract facts, reconcile them with what the owner already has,
//! and commit every change of the call in one transaction.
//!
//! 1. The model extracts facts, guided by the project's policy and labels. Relative dates
//!    it left in a fact get their absolute date appended ([`dates::annotate`]).
//! 2. Each fact is embedded and searched (hybrid) among the owner's live memories. A fact
//!    whose text a memory already has is known (NONE) without asking the model.
//! 3. Facts with similar memories go to the model with those memories, numbered 0, 1, …
//!    (never real ids): ADD, UPDATE, DELETE or NONE each. Facts with none are ADDed.
//! 4. The decisions are made safe: an immutable memory is never changed (the fact is added
//!    instead); a memory is changed at most once per call; a contradicted memory is deleted
//!    *and* the new fact is added, so a DELETE never loses the fact.
//! 5. Under the write gate, every memory the plan changes is re-read: if another call
//!    changed it meanwhile, the whole add is a 409 and nothing is written. Otherwise all
//!    inserts, updates and deletes commit together with their history (the input messages
//!    included) and credit charge.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::add::{AddResult, AddedMemory};
use crate::error::{Error, Result};
use crate::infer::{self, dates, Event, Existing, Fact};
use crate::llm::{Llm, Usage};
use crate::memory::Memory;
use crate::record::{content_hash, indexed_text, Core, MemoryRecord, Message, Owners};
use crate::store::{owner_filter, MemoryUpdate, NewMemory, Write, WriteBatch};

/// Similar memories fetched per fact.
const CANDIDATES_PER_FACT: usize = 5;
/// Most existing memories shown to the model in one call.
const MAX_EXISTING: usize = 30;
/// Hybrid score below which a memory is not similar enough to reconcile with. A memory that
/// shares no word with the fact needs a cosine of about 0.33 to reach it.
const MIN_SIMILARITY: f32 = 0.1;

/// What the caller gave `add`, checked.
pub(crate) struct Input {
    pub(crate) messages: Vec<Message>,
    pub(crate) owners: Owners,
    pub(crate) metadata: Map<String, Value>,
    pub(crate) categories: Vec<String>,
    pub(crate) expiry: Option<DateTime<Utc>>,
    pub(crate) immutable: bool,
    /// When the memories are stored.
    pub(crate) at: DateTime<Utc>,
    /// When the conversation took place: what relative dates are counted from.
    pub(crate) spoken_at: DateTime<Utc>,
}

/// What happens to one fact.
#[derive(Debug, Clone, PartialEq)]
enum Plan {
    Add,
    Update { memory: usize, text: String },
    None,
}

/// The owners a fact is reconciled against: the same user, agent and app in any session;
/// the session only when it is the one owner given.
fn reconcile_scope(owners: &Owners) -> Owners {
    let mut scope = owners.clone();
    if scope.user_id.is_some() || scope.agent_id.is_some() || scope.app_id.is_some() {
        scope.run_id = None;
    }
    scope
}

pub(crate) async fn add_inferred(memory: &Memory, input: Input) -> Result<AddResult> {
    let llm: Arc<dyn Llm> = memory.inner.llm.clone().ok_or_else(|| Error::Unavailable {
        detail: "add with inference needs a language model, and none is configured; \
                 configure one with Memory::builder().llm(…), or call .infer(false) to store \
                 the messages verbatim"
            .into(),
    })?;
    let config = memory.config().await?;
    let prices = memory.prices().await?;
    memory.check_affordable(prices.inference).await?;
    let labels = config.labels();
    let (at, spoken_at) = (input.at, input.spoken_at);
    let extracted = infer::extract_facts(
        &*llm,
        &input.messages,
        spoken_at,
        &config.extraction_policy,
        &labels,
    )
    .await?;
    let mut usage = extracted.usage;
    let facts: Vec<Fact> = extracted
        .value
        .into_iter()
        .map(|mut f| {
            f.text = dates::annotate(&f.text, spoken_at);
            f
        })
        .collect();
    if facts.is_empty() {
        let remaining = memory.charge(prices.inference).await?;
        return Ok(AddResult::new(
            Vec::new(),
            prices.inference,
            remaining,
            usage,
        ));
    }
    let texts: Vec<String> = facts.iter().map(|f| f.text.clone()).collect();
    let vectors = memory.embed_documents(&texts).await?;

    // Similar memories of the owner, each listed once.
    let filter = owner_filter(&reconcile_scope(&input.owners));
    let mut existing: Vec<MemoryRecord> = Vec::new();
    let mut slot: HashMap<Uuid, usize> = HashMap::new();
    let mut plans: Vec<Option<Plan>> = vec![None; facts.len()];
    let mut asked: Vec<usize> = Vec::new();
    let similar = memory
        .similar(&texts, vectors.clone(), &filter, CANDIDATES_PER_FACT, at)
        .await?;
    for (i, (text, hits)) in texts.iter().zip(similar).enumerate() {
        let hash = content_hash(text);
        if hits.iter().any(|h| h.record.hash == hash) {
            plans[i] = Some(Plan::None);
            continue;
        }
        let mut any = false;
        for hit in hits.into_iter().filter(|h| h.score >= MIN_SIMILARITY) {
            if existing.len() >= MAX_EXISTING && !slot.contains_key(&hit.record.id) {
                break;
            }
            any = true;
            slot.entry(hit.record.id).or_insert_with(|| {
                existing.push(hit.record);
                existing.len() - 1
            });
        }
        if any {
            asked.push(i);
        } else {
            plans[i] = Some(Plan::Add);
        }
    }

    // The model decides for the facts that have neighbours.
    let mut deletes: Vec<usize> = Vec::new();
    if !asked.is_empty() {
        let asked_texts: Vec<String> = asked.iter().map(|&i| texts[i].clone()).collect();
        let shown: Vec<Existing> = existing
            .iter()
            .map(|r| Existing {
                text: r.memory.clone(),
                immutable: r.immutable,
            })
            .collect();
        let decided = infer::reconcile(&*llm, &asked_texts, &shown, spoken_at).await?;
        usage += decided.usage;
        let mut touched = vec![false; existing.len()];
        for d in decided.value {
            let fact = asked[d.fact];
            let target = d.memory.and_then(|m| existing.get(m).map(|r| (m, r)));
            match (d.event, target) {
                (Event::Delete, Some((m, r))) => {
                    if r.immutable || touched[m] {
                        tracing::debug!(memory = %r.id, "DELETE skipped: immutable or already changed");
                    } else {
                        touched[m] = true;
                        deletes.push(m);
                    }
                }
                _ if plans[fact].is_some() => {}
                (Event::Update, Some((m, r))) => {
                    let text = dates::annotate(d.text.as_deref().unwrap_or("").trim(), spoken_at);
                    plans[fact] = Some(if text == r.memory {
                        Plan::None
                    } else if r.immutable || touched[m] {
                        Plan::Add
                    } else {
                        touched[m] = true;
                        Plan::Update { memory: m, text }
                    });
                }
                (Event::None, _) => plans[fact] = Some(Plan::None),
                _ => plans[fact] = Some(Plan::Add),
            }
        }
    }
    // A fact the model did not decide on, or whose only decision was a DELETE, is added:
    // contradicted memories go, the new fact stays.
    let plans: Vec<Plan> = plans.into_iter().map(|p| p.unwrap_or(Plan::Add)).collect();

    // Updated texts need vectors, read with the memory's context as `update` does.
    let update_texts: Vec<String> = plans
        .iter()
        .filter_map(|p| match p {
            Plan::Update { memory: m, text } => {
                Some(indexed_text(text, existing[*m].context.as_deref()))
            }
            _ => None,
        })
        .collect();
    let mut update_vectors = if update_texts.is_empty() {
        Vec::new()
    } else {
        memory.embed_documents(&update_texts).await?
    }
    .into_iter();

    let mut writes = Vec::new();
    let mut keyed = Vec::new();
    let mut credits = prices.inference;
    let mut expected: Vec<MemoryRecord> = Vec::new();
    for ((fact, vector), plan) in facts.iter().zip(vectors).zip(&plans) {
        match plan {
            Plan::None => {}
            Plan::Add => {
                let id = Uuid::now_v7();
                let record = new_record(id, fact, &input);
                keyed.push((id, vector.clone()));
                writes.push(Write::Insert(NewMemory::new(
                    record,
                    vector,
                    input.messages.clone(),
                )));
                credits += prices.add;
            }
            Plan::Update { memory: m, text } => {
                let old = &existing[*m];
                let vector = update_vectors
                    .next()
                    .ok_or_else(|| Error::internal("an update vector is missing"))?;
                let mut update = MemoryUpdate::new(old.id, at);
                keyed.push((old.id, vector.clone()));
                update.text = Some((text.clone(), vector));
                let categories = union(&old.categories, &fact.categories);
                let mut metadata = old.metadata.clone();
                metadata.insert("core".into(), merged_core(old, fact, text, &categories));
                update.metadata = Some(metadata);
                update.categories = Some(categories);
                update.input = input.messages.clone();
                writes.push(Write::Update(update));
                expected.push(old.clone());
                credits += prices.update;
            }
        }
    }
    for m in deletes {
        let old = &existing[m];
        writes.push(Write::Delete {
            id: old.id,
            at,
            input: input.messages.clone(),
        });
        expected.push(old.clone());
    }
    if writes.is_empty() {
        let remaining = memory.charge(credits).await?;
        return Ok(AddResult::new(Vec::new(), credits, remaining, usage));
    }
    let outcome = memory
        .commit_with(move |memory| async move {
            // Nothing this plan changes may have moved since it was read.
            if let Some(id) = memory.first_changed(&expected).await? {
                return Err(Error::Conflict {
                    detail: format!(
                        "memory {id} changed while this add was reconciling with it; nothing \
                         was stored: retry the add"
                    ),
                });
            }
            Ok((WriteBatch::new(writes, credits), keyed))
        })
        .await?;
    let previous: HashMap<Uuid, String> = existing.into_iter().map(|r| (r.id, r.memory)).collect();
    let results = outcome
        .changes
        .into_iter()
        .map(|c| {
            let mut added =
                AddedMemory::new(c.record.id, c.record.memory, c.event, c.record.metadata);
            if c.event != crate::record::HistoryEvent::Add {
                added.previous_memory = previous.get(&added.id).cloned();
            }
            added
        })
        .collect();
    Ok(AddResult::new(
        results,
        credits,
        outcome.credits_remaining,
        usage,
    ))
}

fn new_record(id: Uuid, fact: &Fact, input: &Input) -> MemoryRecord {
    let categories = union(&input.categories, &fact.categories);
    let mut metadata = input.metadata.clone();
    let core = Core {
        summary: fact.text.clone(),
        entities: fact.entities.clone(),
        tags: categories.clone(),
        key_facts: vec![fact.text.clone()],
        importance: fact.importance,
    };
    metadata.insert(
        "core".into(),
        serde_json::to_value(core).unwrap_or(Value::Null),
    );
    MemoryRecord {
        id,
        hash: content_hash(&fact.text),
        memory: fact.text.clone(),
        owners: input.owners.clone(),
        metadata,
        categories,
        immutable: input.immutable,
        expiration_date: input.expiry,
        created_at: input.at,
        updated_at: input.at,
        context: None,
    }
}

/// The digest of an updated memory: the new text, both entity lists, the higher importance.
fn merged_core(old: &MemoryRecord, fact: &Fact, text: &str, categories: &[String]) -> Value {
    let old_core = old.metadata.get("core");
    let old_entities: Vec<String> = old_core
        .and_then(|c| c.get("entities"))
        .and_then(|e| serde_json::from_value(e.clone()).ok())
        .unwrap_or_default();
    let old_importance = old_core
        .and_then(|c| c.get("importance"))
        .and_then(Value::as_i64)
        .unwrap_or(fact.importance);
    let core = Core {
        summary: text.to_owned(),
        entities: union(&old_entities, &fact.entities),
        tags: categories.to_vec(),
        key_facts: vec![text.to_owned()],
        importance: old_importance.max(fact.importance),
    };
    serde_json::to_value(core).unwrap_or(Value::Null)
}

/// `a`, then the items of `b` it lacks, in order (labels and entity lists stay small).
pub(crate) fn union(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = a.to_vec();
    for item in b {
        if !out.contains(item) {
            out.push(item.clone());
        }
    }
    out
}

impl Memory {
    /// The first of these memories that is no longer live with the same text and
    /// `updated_at` as read. Called under the write gate, before a plan built on them
    /// commits.
    pub(crate) async fn first_changed(&self, read: &[MemoryRecord]) -> Result<Option<Uuid>> {
        for old in read {
            let now = self.inner.store.get(old.id).await?;
            if now.as_ref().map(|r| (&r.memory, r.updated_at))
                != Some((&old.memory, old.updated_at))
            {
                return Ok(Some(old.id));
            }
        }
        Ok(None)
    }

    /// For each text with its vector, the `k` live memories most similar to it (hybrid
    /// score), among `filter`.
    async fn similar(
        &self,
        texts: &[String],
        vectors: Vec<Vec<f32>>,
        filter: &crate::filter::Filter,
        k: usize,
        at: DateTime<Utc>,
    ) -> Result<Vec<Vec<crate::ops::search::ScoredMemory>>> {
        let ranked = self
            .hybrid_ranked_many(texts, vectors, filter, k, false, at)
            .await?;
        let mut out = Vec::with_capacity(ranked.len());
        for ranked in ranked {
            out.push(self.hydrate(ranked, filter, false, at).await?);
        }
        Ok(out)
    }
}

/// Usage is part of every inferred add's result.
impl AddResult {
    pub(crate) fn new(
        results: Vec<AddedMemory>,
        credits_used: u64,
        credits_remaining: u64,
        usage: Usage,
    ) -> Self {
        AddResult {
            results,
            credits_used,
            credits_remaining,
            usage,
        }
    }
}
