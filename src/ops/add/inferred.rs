//! `add` with inference: extract facts, compare them with what the owner already has,
//! and commit every change of the call in one transaction.
//!
//! 1. The model extracts facts, guided by the project's policy and labels. Relative dates
//!    it left in a fact get their absolute date appended ([`dates::annotate`]).
//! 2. Each fact is embedded and searched (hybrid) among the owner's live memories. A fact
//!    whose text a memory already has is known (NONE) without asking the model.
//! 3. Each other fact is compared with the memories that may hold the same thing: its
//!    nearest that are relevant to it, and the nearest that share one of its labels (a move and a home say the same thing in other words). One short call per
//!    fact asks which of them the fact makes out of date, and whether one already says it
//!    (the memories numbered 0, 1, …, never real ids); each memory it calls out of date is
//!    then checked on its own by two narrow questions put opposite ways (is it still true
//!    once the fact is known? does the fact replace it?), and stays unless both say it
//!    goes. Facts with
//!    no memory to compare with are ADDed without a call.
//! 4. The answers become a plan, made safe: a fact replaces the first memory it outdates
//!    (an UPDATE to the fact's text, so the memory's history shows the change) and deletes
//!    the others; a fact a memory already says is not stored; an immutable memory is
//!    never changed (the fact is added instead); a memory is changed at most once per
//!    call; a fact older than a memory never replaces it.
//! 5. Under the write gate, every memory the plan changes is re-read: if another call
//!    changed it meanwhile, the whole add is a 409 and nothing is written. Otherwise all
//!    inserts, updates and deletes commit together with their history (the input messages
//!    included) and credit charge.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::plan::{self, Context, FactPlan};
use super::{AddResult, AddedMemory};
use crate::error::{Error, Result};
use crate::filter::{Condition, Filter, Op};
use crate::infer::{self, dates, Decision, Event, Fact, Verdict};
use crate::llm::{Llm, Usage};
use crate::memory::Memory;
use crate::record::{content_hash, indexed_text, Owners};
use crate::retrieve::fusion::Prior;
use crate::store::{owner_filter, Among, Row, WriteBatch};

/// Similar memories fetched per fact.
const CANDIDATES_PER_FACT: usize = 5;
/// The least relevance to a fact, scored among its [`CANDIDATES_PER_FACT`] nearest memories
/// (the hybrid score with a scope of 5, whatever the store's size), of a memory compared
/// with it: a memory that shares no word with the fact needs a cosine of about 0.33; one
/// that shares a name with it, much less. (Comparing a fact with unrelated memories made
/// the local model call some of them outdated.)
const MIN_RELEVANCE: f32 = 0.3;
/// The nearest memories sharing one of the fact's labels, compared with it as well.
const SAME_LABEL_CANDIDATES: usize = 3;
/// Most memories one fact is compared with.
const MAX_COMPARED: usize = 6;
/// Most memories one add compares its facts with, in all.
const MAX_EXISTING: usize = 30;

/// The owners a fact is reconciled against: the same user, agent and app in any session;
/// the session only when it is the one owner given.
fn reconcile_scope(owners: &Owners) -> Owners {
    let mut scope = owners.clone();
    if scope.user_id.is_some() || scope.agent_id.is_some() || scope.app_id.is_some() {
        scope.run_id = None;
    }
    scope
}

pub(crate) async fn add_inferred(memory: &Memory, cx: Context) -> Result<AddResult> {
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
    let (at, spoken_at) = (cx.at, cx.spoken_at);
    let extracted = infer::extract_facts(
        &*llm,
        &cx.messages,
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

    // The memories each fact is compared with, each listed once in `existing`.
    let scope = owner_filter(&reconcile_scope(&cx.owners));
    let mut existing: Vec<Row> = Vec::new();
    let mut slot: HashMap<Uuid, usize> = HashMap::new();
    let mut known: Vec<Option<FactPlan>> = vec![None; facts.len()];
    let mut asked: Vec<(usize, Vec<usize>)> = Vec::new();
    let similar = memory
        .similar(&texts, vectors.clone(), &scope, CANDIDATES_PER_FACT, at)
        .await?;
    for (i, hits) in similar.into_iter().enumerate() {
        let hash = content_hash(&texts[i]);
        if hits.iter().any(|(row, _)| row.record.hash == hash) {
            known[i] = Some(FactPlan::None);
            continue;
        }
        let mut shown: Vec<Row> = hits
            .into_iter()
            .filter(|(_, relevance)| *relevance >= MIN_RELEVANCE)
            .map(|(row, _)| row)
            .collect();
        // The same attribute can be said in other words ("moved to X" and "lives in Y"):
        // the nearest memories that share one of the fact's labels are compared too.
        let labels: Vec<String> = facts[i]
            .categories
            .iter()
            .filter(|c| c.as_str() != "misc")
            .cloned()
            .collect();
        if !labels.is_empty() {
            let labelled = scope
                .clone()
                .and(Filter::Condition(Condition::Categories(Op::In(labels))));
            let hits = memory
                .similar(
                    std::slice::from_ref(&texts[i]),
                    vec![vectors[i].clone()],
                    &labelled,
                    SAME_LABEL_CANDIDATES,
                    at,
                )
                .await?;
            shown.extend(hits.into_iter().flatten().map(|(row, _)| row));
        }
        let mut slots: Vec<usize> = Vec::new();
        for row in shown {
            if slots.len() >= MAX_COMPARED {
                break;
            }
            if existing.len() >= MAX_EXISTING && !slot.contains_key(&row.record.id) {
                break;
            }
            let s = *slot.entry(row.record.id).or_insert_with(|| {
                existing.push(row);
                existing.len() - 1
            });
            if !slots.contains(&s) {
                slots.push(s);
            }
        }
        if slots.is_empty() {
            known[i] = Some(FactPlan::Add);
        } else {
            asked.push((i, slots));
        }
    }

    // The model compares each fact with its memories (one short call per fact: a narrow
    // question a small model answers well, after instructions it has read before).
    let verdicts = futures_util::future::try_join_all(asked.iter().map(|(i, slots)| {
        let shown: Vec<String> = slots
            .iter()
            .map(|&s| existing[s].record.memory.clone())
            .collect();
        let (llm, fact) = (&llm, &texts[*i]);
        async move { infer::compare(&**llm, fact, &shown).await }
    }))
    .await?;
    // Each memory called outdated is checked on its own, by two narrow questions put
    // opposite ways (is it still true? does the fact replace it?): it goes only if both
    // say so.
    // (An immutable memory is never changed, so it needs no check.)
    let mut verdicts: Vec<Verdict> = verdicts
        .into_iter()
        .map(|v| {
            usage += v.usage;
            let mut verdict = v.value;
            let mut seen = Vec::new();
            verdict.outdated.retain(|&m| {
                let first = !seen.contains(&m);
                seen.push(m);
                first
            });
            verdict
        })
        .collect();
    let claimed: Vec<(usize, usize)> = verdicts
        .iter()
        .enumerate()
        .flat_map(|(n, v)| v.outdated.iter().map(move |&m| (n, m)))
        .filter(|&(n, m)| !existing[asked[n].1[m]].record.immutable)
        .collect();
    let checks = futures_util::future::try_join_all(claimed.iter().map(|&(n, m)| {
        let (i, slots) = &asked[n];
        let (llm, old, new) = (&llm, &existing[slots[m]].record.memory, &texts[*i]);
        async move {
            let still = infer::still_true(&**llm, old, new).await?;
            let mut usage = still.usage;
            if still.value {
                return Ok::<_, Error>((false, usage));
            }
            let replaces = infer::replaces(&**llm, old, new).await?;
            usage += replaces.usage;
            Ok((replaces.value, usage))
        }
    }))
    .await?;
    for (&(n, m), (outdated, spent)) in claimed.iter().zip(checks) {
        usage += spent;
        if !outdated {
            verdicts[n].outdated.retain(|&o| o != m);
        }
    }
    let mut decisions = Vec::new();
    for (n, ((i, slots), verdict)) in asked.iter().zip(verdicts).enumerate() {
        decisions.extend(decisions_of(n, &texts[*i], slots, verdict));
    }
    let asked: Vec<usize> = asked.into_iter().map(|(i, _)| i).collect();
    let plan = plan::decide(known, &asked, &existing, decisions, spoken_at, |t| {
        dates::annotate(t, spoken_at)
    });

    // Updated texts need vectors, read with the memory's context as `update` does.
    let update_texts: Vec<String> = plan
        .facts
        .iter()
        .filter_map(|p| match p {
            FactPlan::Update { memory: m, text } => {
                Some(indexed_text(text, existing[*m].record.context.as_deref()))
            }
            _ => None,
        })
        .collect();
    let update_vectors = if update_texts.is_empty() {
        Vec::new()
    } else {
        memory.embed_documents(&update_texts).await?
    };
    let plan::Writes { writes, credits } = plan::writes(
        &plan,
        &facts,
        vectors,
        update_vectors,
        &existing,
        &cx,
        &prices,
    );
    let credits = credits + prices.inference;
    if writes.is_empty() {
        let remaining = memory.charge(credits).await?;
        return Ok(AddResult::new(Vec::new(), credits, remaining, usage));
    }
    // Every memory the plan changes is written only if it is still the version the model
    // saw (checked in the store's transaction): otherwise the whole add is a 409.
    let outcome = memory
        .commit(WriteBatch::new(writes, credits))
        .await
        .map_err(|e| match e {
            Error::Conflict { detail } => Error::Conflict {
                detail: format!("{detail} (while this add was reconciling with it; nothing was stored: retry the add)"),
            },
            other => other,
        })?;
    let previous: HashMap<Uuid, String> = existing
        .into_iter()
        .map(|row| (row.record.id, row.record.memory))
        .collect();
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

/// The decisions of the plan for asked fact `n` (`text`), from the verdict (outdated
/// memories listed once each) on the memories at `slots`: a fact that changes memories replaces the first (an UPDATE to the
/// fact's text, so the memory's history shows the change) and deletes the others; a fact a
/// memory already says is not stored (outdated memories still go).
fn decisions_of(n: usize, text: &str, slots: &[usize], verdict: Verdict) -> Vec<Decision> {
    let mut out = Vec::new();
    for (k, &m) in verdict.outdated.iter().enumerate() {
        let replaces = k == 0 && verdict.same.is_none();
        out.push(Decision {
            fact: n,
            event: if replaces {
                Event::Update
            } else {
                Event::Delete
            },
            memory: slots.get(m).copied(),
            text: replaces.then(|| text.to_owned()),
        });
    }
    if let Some(m) = verdict.same {
        out.push(Decision {
            fact: n,
            event: Event::None,
            memory: slots.get(m).copied(),
            text: None,
        });
    }
    out
}

impl Memory {
    /// For each text with its vector, the `k` live memories most similar to it among
    /// `filter`, each with its relevance among those `k`: the hybrid score with `k` as its
    /// scope and no conversation neighbours (a fact relates to a memory, not to the talk
    /// around it).
    async fn similar(
        &self,
        texts: &[String],
        vectors: Vec<Vec<f32>>,
        filter: &crate::filter::Filter,
        k: usize,
        at: DateTime<Utc>,
    ) -> Result<Vec<Vec<(Row, f32)>>> {
        let among = Among::new(filter, at, false);
        let ranked = self
            .hybrid_ranked(texts, vectors, among, k, Some(Prior::Among(k)))
            .await?;
        let mut out = Vec::with_capacity(ranked.len());
        for ranked in ranked {
            let rows = self.hydrate_rows(ranked, filter, false, at).await?;
            out.push(rows.into_iter().map(|(row, r)| (row, r.score)).collect());
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
