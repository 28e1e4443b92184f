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
use crate::credits::Prices;
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
/// (the greater of the vector and hybrid scores with a scope of 5, whatever the store's
/// size), of a memory worth showing the model with it: a memory that shares no word with
/// the fact needs a cosine of about 0.33, or a little less when it stands far above the
/// fact's fifth-nearest memory; one that shares a name with it, much less.
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
    memory
        .inner
        .llm
        .clone()
        .ok_or_else(|| Error::NotConfigured {
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
    let prices = memory.prices().await?;
    memory.check_affordable(prices.inference).await?;
    let mut add = Inference {
        memory,
        llm,
        prices,
        usage: Usage::default(),
        cx,
    };
    let facts = add.extract().await?;
    if facts.is_empty() {
        return add.commit(&facts, Vec::new(), &[], Vec::new()).await;
    }
    let texts: Vec<String> = facts.iter().map(|f| f.text.clone()).collect();
    let vectors = memory.embed_documents(&texts).await?;
    let candidates = add.candidates(&texts, vectors.clone()).await?;
    let decisions = add.judge(&texts, &candidates).await?;
    let plans = plan::decide(
        candidates.known,
        &candidates.asked,
        &candidates.shown,
        &decisions,
    );
    add.commit(&facts, vectors, &candidates.shown, plans).await
}

/// One `add` with inference, as its phases: [`extract`](Self::extract) the facts,
/// find their [`candidates`](Self::candidates) among the owner's memories,
/// [`judge`](Self::judge) them with the model, then [`plan::decide`] what each fact does
/// (made safe there) and [`commit`](Self::commit) it.
struct Inference<'a> {
    memory: &'a Memory,
    llm: Arc<dyn Llm>,
    prices: Prices,
    /// The model's tokens, over every call of the add.
    usage: Usage,
    cx: Context,
}

impl Inference<'_> {
    /// The facts the model extracts from the conversation, under the project's policy and
    /// labels, each with its relative dates made absolute.
    async fn extract(&mut self) -> Result<Vec<infer::Fact>> {
        let config = self.memory.config().await?;
        let spoken_at = self.cx.spoken_at;
        let extracted = infer::extract_facts(
            &*self.llm,
            &self.cx.messages,
            spoken_at,
            &config.extraction_policy,
            &config.labels(),
        )
        .await?;
        self.usage += extracted.usage;
        Ok(extracted
            .value
            .into_iter()
            .map(|mut f| {
                f.text = dates::annotate(&f.text, spoken_at);
                f
            })
            .collect())
    }

    /// The owner's current memories similar to each fact (a memory a later fact
    /// superseded is history, and stays as it is), gathered into what the model is shown.
    async fn candidates(&self, texts: &[String], vectors: Vec<Vec<f32>>) -> Result<Candidates> {
        let filter = owner_filter(&reconcile_scope(&self.cx.owners)).and(Filter::current());
        let similar = self
            .memory
            .similar(texts, vectors, &filter, CANDIDATES_PER_FACT, self.cx.at)
            .await?;
        Ok(Candidates::gather(texts, similar))
    }

    /// The model's judgement of the facts that have candidates (none when no fact has).
    async fn judge(
        &mut self,
        texts: &[String],
        candidates: &Candidates,
    ) -> Result<Vec<infer::Decision>> {
        if candidates.asked.is_empty() {
            return Ok(Vec::new());
        }
        let asked: Vec<String> = candidates.asked.iter().map(|&i| texts[i].clone()).collect();
        let existing: Vec<Existing> = candidates
            .shown
            .iter()
            .map(|row| Existing {
                text: row.record.memory.clone(),
                immutable: row.record.immutable,
            })
            .collect();
        let decided = infer::reconcile(&*self.llm, &asked, &existing, self.cx.spoken_at).await?;
        self.usage += decided.usage;
        trace_decisions(&decided.value, &candidates.neighbours, &candidates.shown);
        Ok(decided.value)
    }

    /// Writes the plan in one transaction with the credits of the add (the model call's
    /// included), or charges the call alone when the plan writes nothing. Every memory the
    /// plan supersedes is written only if it is still the version the model saw (checked
    /// in the store's transaction): otherwise the whole add is a 409.
    async fn commit(
        self,
        facts: &[infer::Fact],
        vectors: Vec<Vec<f32>>,
        shown: &[Row],
        plans: Vec<FactPlan>,
    ) -> Result<AddResult> {
        let plan::Writes { writes, credits } =
            plan::writes(&plans, facts, vectors, shown, &self.cx, &self.prices);
        let credits = credits + self.prices.inference;
        if writes.is_empty() {
            let remaining = self.memory.charge(credits).await?;
            return Ok(AddResult::new(Vec::new(), credits, remaining, self.usage));
        }
        let outcome = self
            .memory
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
            self.usage,
        ))
    }
}

/// What the model is shown of the owner's memories, and which facts it is asked about.
#[derive(Debug)]
struct Candidates {
    /// The relevant memories, each once, numbered by their place here.
    shown: Vec<Row>,
    /// Per fact, what is known of it without the model: a repeat (`None`: its exact text
    /// is a memory's) or an addition (`Add`: no memory is relevant); `None` for a fact
    /// the model is asked about.
    known: Vec<Option<FactPlan>>,
    /// The facts the model is asked about, in the order it numbers them.
    asked: Vec<usize>,
    /// Per fact asked about, its relevant memories (places in `shown`) with their
    /// relevance.
    neighbours: Vec<Vec<(usize, f32)>>,
}

impl Candidates {
    /// Gathers each fact's similar memories (`similar[i]`: fact `i`'s, with their
    /// relevance): a fact whose text a memory has is known; memories of at least
    /// [`MIN_RELEVANCE`] are shown, each once, at most [`MAX_EXISTING`] in all; a fact
    /// with none is added without asking.
    fn gather(texts: &[String], similar: Vec<Vec<(Row, f32)>>) -> Candidates {
        let mut out = Candidates {
            shown: Vec::new(),
            known: vec![None; texts.len()],
            asked: Vec::new(),
            neighbours: Vec::new(),
        };
        let mut slot: HashMap<Uuid, usize> = HashMap::new();
        for (i, (text, hits)) in texts.iter().zip(similar).enumerate() {
            let hash = content_hash(text);
            if hits.iter().any(|(row, _)| row.record.hash == hash) {
                out.known[i] = Some(FactPlan::None);
                continue;
            }
            let mut own: Vec<(usize, f32)> = Vec::new();
            for (row, relevance) in hits.into_iter().filter(|(_, r)| *r >= MIN_RELEVANCE) {
                if out.shown.len() >= MAX_EXISTING && !slot.contains_key(&row.record.id) {
                    break;
                }
                let shown = &mut out.shown;
                let m = *slot.entry(row.record.id).or_insert_with(|| {
                    shown.push(row);
                    shown.len() - 1
                });
                own.push((m, relevance));
            }
            if own.is_empty() {
                out.known[i] = Some(FactPlan::Add);
            } else {
                out.asked.push(i);
                out.neighbours.push(own);
            }
        }
        out
    }
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

    /// A stored memory of this text, as a search returns it.
    fn row(text: &str) -> Row {
        Row::of_text(text, Utc::now(), false)
    }

    fn texts(items: &[&str]) -> Vec<String> {
        items.iter().map(|t| t.to_string()).collect()
    }

    /// A fact whose text a memory has is known; one whose similar memories are all under
    /// the relevance bar is added without asking; the others are asked about, with only
    /// their relevant memories shown.
    #[test]
    fn candidates_know_repeats_add_the_unrelated_and_ask_about_the_rest() {
        let (tea, coffee, bergen) = (
            row("Likes tea"),
            row("Likes coffee"),
            row("Lives in Bergen"),
        );
        let facts = texts(&["Likes tea", "Plays chess", "Lives in Oslo"]);
        let similar = vec![
            vec![(tea, 0.9)],
            vec![(coffee.clone(), MIN_RELEVANCE - 0.01)],
            vec![(bergen.clone(), 0.8), (coffee.clone(), MIN_RELEVANCE)],
        ];
        let c = Candidates::gather(&facts, similar);
        assert_eq!(c.known, [Some(FactPlan::None), Some(FactPlan::Add), None]);
        assert_eq!(c.asked, [2]);
        let shown: Vec<Uuid> = c.shown.iter().map(|r| r.record.id).collect();
        assert_eq!(shown, [bergen.record.id, coffee.record.id]);
        assert_eq!(c.neighbours, [vec![(0, 0.8), (1, MIN_RELEVANCE)]]);
    }

    /// A memory relevant to several facts is shown once, and no more than
    /// [`MAX_EXISTING`] memories are shown in all: a fact's memories past the cap are left
    /// out, but one already shown is still its neighbour.
    #[test]
    fn each_memory_is_shown_once_and_no_more_than_the_cap_in_all() {
        let shared = row("Works as a nurse");
        let many: Vec<(Row, f32)> = (0..MAX_EXISTING + 5)
            .map(|i| (row(&format!("Memory {i}")), 0.5))
            .collect();
        let facts = texts(&["Works as a doctor", "Works night shifts", "Has a cat"]);
        let similar = vec![
            vec![(shared.clone(), 0.7)],
            many,
            vec![(shared.clone(), 0.6)],
        ];
        let c = Candidates::gather(&facts, similar);
        assert_eq!(c.shown.len(), MAX_EXISTING);
        assert_eq!(c.shown[0].record.id, shared.record.id);
        assert_eq!(c.asked, [0, 1, 2]);
        assert_eq!(c.neighbours[1].len(), MAX_EXISTING - 1);
        assert_eq!(c.neighbours[2], [(0, 0.6)], "the shared memory, shown once");
    }

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
