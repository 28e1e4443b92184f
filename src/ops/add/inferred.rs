//! `add` with inference: the model extracts facts and judges each against the owner's
//! current memories; every change of the call commits in one transaction. What is stored,
//! dropped or superseded is the model's decision; memlane checks only what needs no
//! knowledge of a language (ids in range, flags, times, exact repeats).
//!
//! 1. The model extracts facts, guided by the project's policy and labels
//!    ([`infer::extract_facts`]). Relative dates it left in a fact get their absolute date
//!    appended ([`dates::annotate`]).
//! 2. Each fact is embedded and searched (hybrid) among the owner's current memories. A
//!    fact whose text a memory already has is known without asking the model.
//! 3. Facts with relevant memories go to the model with those memories, numbered 0, 1, …
//!    (never real ids), under a JSON schema: ADD, UPDATE, DELETE or NONE each
//!    ([`infer::reconcile`]). Facts with none are added.
//! 4. The decisions become a plan ([`plan::decide`]): an UPDATE or DELETE makes the fact a
//!    new memory that supersedes the one named, which keeps its text and history and is
//!    no longer current (`valid_until`, `superseded_by`); a NONE that names a memory
//!    stores nothing; everything else is added. An immutable memory is never superseded;
//!    a fact said before the memory it would supersede is stored as its history.
//! 5. Under the write gate, every memory the plan supersedes must still be the version the
//!    model saw: if another call changed it meanwhile, the whole add is a 409 and nothing
//!    is written. Otherwise all inserts and supersessions commit together with their
//!    history (the input messages included) and credit charge.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::plan::{self, Context, FactPlan};
use super::{AddResult, AddedMemory};
use crate::error::{Error, Result};
use crate::filter::Filter;
use crate::infer::{self, dates, Existing};
use crate::llm::{Llm, Usage};
use crate::memory::Memory;
use crate::record::{content_hash, Owners};
use crate::retrieve::fusion::Prior;
use crate::store::keyword::RECONCILE_MIN_ROWS;
use crate::store::{owner_filter, Among, Row, WriteBatch};

/// Similar memories fetched per fact.
const CANDIDATES_PER_FACT: usize = 5;
/// Most existing memories shown to the model in one call.
const MAX_EXISTING: usize = 30;
/// The least relevance to a fact, scored among its [`CANDIDATES_PER_FACT`] nearest memories
/// (the hybrid score with a scope of 5, whatever the store's size), of a memory worth
/// showing the model with it: a memory that shares no word with the fact needs a cosine of
/// about 0.33; one that shares a name with it, much less.
const MIN_RELEVANCE: f32 = 0.3;

/// The owners a fact is reconciled against: the same user, agent and app in any session;
/// the session only when it is the one owner given.
fn reconcile_scope(owners: &Owners) -> Owners {
    let mut scope = owners.clone();
    if scope.user_id.is_some() || scope.agent_id.is_some() || scope.app_id.is_some() {
        scope.run_id = None;
    }
    scope
}

/// The configured language model, or the 503 of an `add` with inference without one.
fn language_model(memory: &Memory) -> Result<Arc<dyn Llm>> {
    memory.inner.llm.clone().ok_or_else(|| Error::Unavailable {
        detail: "add with inference needs a language model, and none is configured; \
                 configure one with Memory::builder().llm(…), or call .infer(false) to store \
                 the messages verbatim"
            .into(),
    })
}

impl Memory {
    /// Has a local language model read the fixed part of the prompts of `add` with
    /// inference now, so that the first `add` reads only its conversation: the extraction
    /// instructions and worked examples for this project's policy and labels, and the
    /// reconciliation's. Call it at start-up, beside other work; it takes as long as a
    /// first `add` would have waited for it.
    ///
    /// It makes one short call per prompt, stores nothing and charges no credits. With a
    /// model that does not keep prompt prefixes (an OpenAI-protocol server), it does
    /// nothing. Changing the project's policy or labels changes the extraction prompt:
    /// warm up again after `put_config`. A 503 without a language model.
    pub async fn warm_up(&self) -> Result<()> {
        let llm = language_model(self)?;
        let config = self.config().await?;
        infer::warm(&*llm, &config.extraction_policy, &config.labels()).await
    }
}

pub(crate) async fn add_inferred(memory: &Memory, cx: Context) -> Result<AddResult> {
    let llm = language_model(memory)?;
    let config = memory.config().await?;
    let prices = memory.prices().await?;
    memory.check_affordable(prices.inference).await?;
    let (at, spoken_at) = (cx.at, cx.spoken_at);
    let extracted = infer::extract_facts(
        &*llm,
        &cx.messages,
        spoken_at,
        &config.extraction_policy,
        &config.labels(),
    )
    .await?;
    let mut usage = extracted.usage;
    let facts: Vec<infer::Fact> = extracted
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

    // Facts are reconciled with the owner's current memories only: one a later fact
    // superseded is history, and stays as it is.
    let filter = owner_filter(&reconcile_scope(&cx.owners)).and(Filter::current());
    let similar = memory
        .similar(&texts, vectors.clone(), &filter, CANDIDATES_PER_FACT, at)
        .await?;
    // The relevant memories, each shown once; per fact asked about, its own.
    let mut shown: Vec<Row> = Vec::new();
    let mut slot: HashMap<Uuid, usize> = HashMap::new();
    let mut known: Vec<Option<FactPlan>> = vec![None; facts.len()];
    let mut asked: Vec<usize> = Vec::new();
    let mut neighbours: Vec<Vec<(usize, f32)>> = Vec::new();
    for (i, (text, hits)) in texts.iter().zip(similar).enumerate() {
        let hash = content_hash(text);
        if hits.iter().any(|(row, _)| row.record.hash == hash) {
            known[i] = Some(FactPlan::None);
            continue;
        }
        let mut own: Vec<(usize, f32)> = Vec::new();
        for (row, relevance) in hits.into_iter().filter(|(_, r)| *r >= MIN_RELEVANCE) {
            if shown.len() >= MAX_EXISTING && !slot.contains_key(&row.record.id) {
                break;
            }
            let m = *slot.entry(row.record.id).or_insert_with(|| {
                shown.push(row);
                shown.len() - 1
            });
            own.push((m, relevance));
        }
        if own.is_empty() {
            known[i] = Some(FactPlan::Add);
        } else {
            asked.push(i);
            neighbours.push(own);
        }
    }

    let mut decisions = Vec::new();
    if !asked.is_empty() {
        let asked_texts: Vec<String> = asked.iter().map(|&i| texts[i].clone()).collect();
        let existing: Vec<Existing> = shown
            .iter()
            .map(|row| Existing {
                text: row.record.memory.clone(),
                immutable: row.record.immutable,
            })
            .collect();
        let decided = infer::reconcile(&*llm, &asked_texts, &existing, spoken_at).await?;
        usage += decided.usage;
        decisions = decided.value;
        trace_decisions(&decisions, &neighbours, &shown);
    }
    let plans = plan::decide(known, &asked, &shown, &decisions);
    let plan::Writes { writes, credits } =
        plan::writes(&plans, &facts, vectors, &shown, &cx, &prices);
    let credits = credits + prices.inference;
    if writes.is_empty() {
        let remaining = memory.charge(credits).await?;
        return Ok(AddResult::new(Vec::new(), credits, remaining, usage));
    }
    // Every memory the plan supersedes is written only if it is still the version the
    // model saw (checked in the store's transaction): otherwise the whole add is a 409.
    let outcome = memory
        .commit(WriteBatch::new(writes, credits))
        .await
        .map_err(|e| match e {
            Error::Conflict { detail } => Error::Conflict {
                detail: format!("{detail} (while this add was reconciling with it; nothing was stored: retry the add)"),
            },
            other => other,
        })?;
    let results = outcome
        .changes
        .into_iter()
        .map(|c| {
            let superseded_by = c.record.superseded_by;
            let mut added =
                AddedMemory::new(c.record.id, c.record.memory, c.event, c.record.metadata);
            added.superseded_by = superseded_by;
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

/// Traces each decision at debug level by ids, never texts: the fact's number, the event,
/// the memory it names, and the similar memories the fact was shown with their relevance.
fn trace_decisions(decisions: &[infer::Decision], neighbours: &[Vec<(usize, f32)>], shown: &[Row]) {
    if !tracing::enabled!(target: "memlane", tracing::Level::DEBUG) {
        return;
    }
    for d in decisions {
        let similar: Vec<(Uuid, f32)> = neighbours
            .get(d.fact)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|&(m, relevance)| (shown[m].record.id, relevance))
            .collect();
        tracing::debug!(
            target: "memlane",
            fact = d.fact,
            event = ?d.event,
            memory = ?d.memory.and_then(|m| shown.get(m)).map(|r| r.record.id),
            similar = ?similar,
            "reconciled"
        );
    }
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
        filter: &Filter,
        k: usize,
        at: DateTime<Utc>,
    ) -> Result<Vec<Vec<(Row, f32)>>> {
        let among = Among::new(filter, at, false);
        let ranked = if self.space().embedder.is_some() {
            self.hybrid_ranked(texts, vectors, among, k, Some(Prior::Among(k)), None)
                .await?
        } else {
            // Without an embedder, similar by their words.
            let mut ranked = Vec::with_capacity(texts.len());
            for text in texts {
                ranked.push(
                    self.keyword_ranked(text, among, k, RECONCILE_MIN_ROWS, None)
                        .await?,
                );
            }
            ranked
        };
        let mut out = Vec::with_capacity(ranked.len());
        for ranked in ranked {
            let rows = self.hydrate_rows(ranked, filter, false, at).await?;
            out.push(rows.into_iter().map(|(row, r)| (row, r.score)).collect());
        }
        Ok(out)
    }
}

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
            inferred: true,
        }
    }

    /// The result of a verbatim add.
    pub(crate) fn verbatim(mut self) -> Self {
        self.inferred = false;
        self
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::embed::HashEmbedder;

    /// How related a new fact is to its owner's memories stays put as the store grows by
    /// memories that share none of its words, whoever owns them. Plain BM25 would move it:
    /// in a store this small, each memory stored changes every term's weight.
    #[tokio::test]
    async fn relevance_to_a_fact_stays_as_unrelated_memories_are_stored() {
        let dir = tempfile::tempdir().unwrap();
        let memory = Memory::builder()
            .path(dir.path().join("m.db"))
            .embedder(Arc::new(HashEmbedder::new(256)))
            .build()
            .await
            .unwrap();
        let store = |text: String, user: &'static str| {
            let memory = memory.clone();
            async move {
                memory.add(text).user(user).infer(false).await.unwrap();
            }
        };
        store("I live in Lisbon with my wife Ana".into(), "ana").await;
        store("I play the cello in an orchestra".into(), "ana").await;
        let facts = vec!["My wife Ana and I moved to Porto".to_string()];
        let filter = crate::filter::Filter::user("ana");
        let relevance = || async {
            let vectors = memory.embed_documents(&facts).await.unwrap();
            let found = memory
                .similar(&facts, vectors, &filter, 5, Utc::now())
                .await
                .unwrap();
            let mut found: Vec<(String, f32)> = found[0]
                .iter()
                .map(|(row, r)| (row.record.memory.clone(), *r))
                .collect();
            found.sort_by(|a, b| a.0.cmp(&b.0));
            found
        };
        let before = relevance().await;
        assert_eq!(before.len(), 2, "{before:?}");
        // In a store of two memories, the one about the same wife is shown to the model.
        assert!(before[0].1 >= MIN_RELEVANCE, "{before:?}");
        for i in 0..30 {
            store(format!("Bob grows tomatoes and beans in plot {i}"), "bob").await;
        }
        let after = relevance().await;
        assert_eq!(after.len(), 2, "{after:?}");
        for ((a, x), (b, y)) in before.iter().zip(&after) {
            assert_eq!(a, b);
            assert!((x - y).abs() < 0.01, "{a}: {x} then {y}");
        }
    }
}
