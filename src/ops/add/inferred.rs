//! `add` with inference: extract facts, reconcile them with what the owner already has,
//! and commit every change of the call in one transaction.
//!
//! 1. The model extracts facts, guided by the project's policy and labels. A fact it
//!    translated into English is kept in the user's own words; relative dates it left in a
//!    fact get their absolute date appended ([`dates::annotate`]), and a "here" the place
//!    the user's greeting names ([`places::annotate`]). A statement of the user (or a
//!    clause of one) that no fact speaks of and that a rule of step 3 finds superseding
//!    one of the owner's memories is kept as said ([`Memory::unextracted_changes`]): a
//!    small model often extracts nothing from a change said as a denial. When it extracted
//!    nothing, a statement of what the speaker does said without "I" ("Toco la batería",
//!    [`infer::activities`]) is kept as said too.
//! 2. Each fact is embedded and searched (hybrid) among the owner's live memories. A fact
//!    whose text a memory already has is known (NONE) without asking the model.
//! 3. A fact that says plainly that it supersedes one of those memories takes its place
//!    without the model: a move away from the place a memory says its owner lives, a
//!    diet given up or taken up, a partner after a single life, a relationship ended (a
//!    break-up, a new partner, a wedding), a taste turned around, drinking given up, a
//!    retirement after a job ([`superseded_by_rule`]).
//!    Other facts with similar memories go to the model with those memories, numbered 0, 1, …
//!    (never real ids): ADD, UPDATE, DELETE or NONE each. Facts with none are ADDed.
//! 4. The decisions are made safe: a stay away from a home never takes the home's place
//!    ([`infer::stays_away`]), nor another taste a taste's ([`infer::another_taste`]), nor a
//!    friend made a partner's ([`infer::makes_a_friend`]), nor a new pet the pet before's
//!    ([`infer::another_pet`]), nor news of someone else ("Ma voisine n'a plus de chat")
//!    a memory of the speaker's own ([`infer::of_someone_else`]); an
//!    updated memory takes the fact's text; an immutable
//!    memory is never changed, nor replaced by a fact said to be one more of its kind
//!    ("also", "anche"; the fact is added instead); a memory is changed at most once per
//!    call; a fact replaces only a memory found for it, and none when another fact
//!    names a memory more relevant to it; an UPDATE whose text states the old memory
//!    beside the news adds the fact. A DELETE, and an UPDATE whose text brings no
//!    news or shares no word with its memory but function words, add the fact, unless a
//!    second look at that memory alone finds the fact supersedes it
//!    ([`infer::replaces`]): then the fact takes the memory's place, its history kept.
//!    A yes counts only when the same look says no of the fact's next most relevant
//!    memory; when it says yes of both, the question each memory answers tells them apart
//!    ([`infer::apart`]), or nothing changes.
//!    A fact still added gets a closer look at its two most relevant memories
//!    ([`infer::outdates`]), and takes the place of the first it outdates.
//!    A fact that takes the place of a memory of several clauses replaces only the one
//!    a rule finds it superseding ([`infer::with_the_rest_kept_by`]), or else the one
//!    whose answer it changes ([`infer::with_the_rest_kept`]); the others stay.
//! 5. Under the write gate, every memory the plan changes is re-read: if another call
//!    changed it meanwhile, the whole add is a 409 and nothing is written. Otherwise all
//!    inserts and updates commit together with their history (the input messages
//!    included) and credit charge.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::plan::{self, Context, FactPlan};
use super::{AddResult, AddedMemory};
use crate::error::{Error, Result};
use crate::filter::{Condition, Filter, Op};
use crate::infer::{self, dates, places, Apart, Existing, Fact};
use crate::llm::{Llm, Usage};
use crate::memory::Memory;
use crate::record::{content_hash, indexed_text, Owners};
use crate::retrieve::fusion::Prior;
use crate::store::keyword::RECONCILE_MIN_ROWS;
use crate::store::{owner_filter, Among, Row, Scan, Write, WriteBatch};

/// Similar memories fetched per fact.
const CANDIDATES_PER_FACT: usize = 5;
/// Most existing memories shown to the model in one call.
const MAX_EXISTING: usize = 30;
/// The least relevance to a fact, scored among its [`CANDIDATES_PER_FACT`] nearest memories
/// (the hybrid score with a scope of 5, whatever the store's size), of a memory worth
/// reconciling with: a memory that shares no word with the fact needs a cosine of about
/// 0.33; one that shares a name with it, much less.
const MIN_RELEVANCE: f32 = 0.3;

/// Most memories of a fact's topics shown with it beside the similar ones (see
/// [`Memory::on_topic`]).
const TOPIC_CANDIDATES: usize = 2;
/// Memories a topic's keyword search reads, of which those that speak of the topic are kept.
const TOPIC_SEARCHED: usize = 8;

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
    /// instructions and worked examples for this project's policy and labels (about 500
    /// tokens), the reconciliation's and its second look's. Call it at start-up, beside
    /// other work; on this machine it takes as long as a first `add` would have waited
    /// for it (see the README's `llm_speed` table).
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
    // Facts are reconciled with the owner's current memories only: one a later fact
    // superseded is history, and stays as it is.
    let filter = owner_filter(&reconcile_scope(&cx.owners)).and(Filter::current());
    let mut facts = extracted.value;
    let none_extracted = facts.is_empty();
    let unextracted = memory
        .unextracted_changes(&facts, &cx.messages, &filter, at, spoken_at)
        .await?;
    facts.extend(unextracted);
    // What the speaker does, said without "I", when the model extracted nothing.
    if none_extracted {
        for said in infer::activities(&cx.messages) {
            if !facts.iter().any(|f| f.text == said) {
                tracing::debug!(target: "memlane", "an activity the model did not extract is kept as said");
                facts.push(Fact {
                    text: said,
                    categories: Vec::new(),
                    entities: Vec::new(),
                    importance: crate::record::DEFAULT_IMPORTANCE,
                });
            }
        }
    }
    let facts: Vec<Fact> = facts
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
    // The facts as the model reads them, and as they are stored, embedded and searched:
    // with the place a "here" means. The model decides on the user's words: told the
    // place, it took a stay for a move.
    let said: Vec<String> = facts.iter().map(|f| f.text.clone()).collect();
    let here = places::greeted_place(&cx.messages);
    let facts: Vec<Fact> = facts
        .into_iter()
        .map(|mut f| {
            f.text = places::annotate(&f.text, here.as_ref());
            f
        })
        .collect();
    let texts: Vec<String> = facts.iter().map(|f| f.text.clone()).collect();
    let vectors = memory.embed_documents(&texts).await?;

    // Similar memories of the owner, each listed once.
    let mut existing: Vec<Row> = Vec::new();
    let mut slot: HashMap<Uuid, usize> = HashMap::new();
    let mut known: Vec<Option<FactPlan>> = vec![None; facts.len()];
    // (fact, memory): a memory that the same rule finds a fact superseding, beside the one
    // the fact takes the place of, ended with it ([`ENDS_EVERY`]).
    let mut ended: Vec<(usize, usize)> = Vec::new();
    let mut asked: Vec<usize> = Vec::new();
    // For each asked fact, its own neighbours: (index into `existing`, relevance).
    let mut neighbours: Vec<Vec<(usize, f32)>> = Vec::new();
    let similar = memory
        .similar(&texts, vectors.clone(), &filter, CANDIDATES_PER_FACT, at)
        .await?;
    let on_topic = memory.on_topic(&said, &filter, at).await?;
    for (i, ((text, hits), (topical, labelled))) in
        texts.iter().zip(similar).zip(on_topic).enumerate()
    {
        let hash = content_hash(text);
        if hits.iter().any(|(row, _)| row.record.hash == hash) {
            known[i] = Some(FactPlan::None);
            continue;
        }
        let mut own: Vec<(usize, f32)> = Vec::new();
        // The similar memories, then those that speak of what the fact changes, however
        // unlike it (with their keyword score).
        let relevant = hits
            .into_iter()
            .filter(|(_, relevance)| *relevance >= MIN_RELEVANCE);
        for (row, relevance) in relevant.chain(topical) {
            if existing.len() >= MAX_EXISTING && !slot.contains_key(&row.record.id) {
                break;
            }
            let at = *slot.entry(row.record.id).or_insert_with(|| {
                existing.push(row);
                existing.len() - 1
            });
            if !own.iter().any(|&(m, _)| m == at) {
                own.push((at, relevance));
            }
        }
        // A fact that a rule finds superseding one of its memories takes that memory's
        // place without asking the model (see [`superseded_by_rule`]); failing those, one
        // of the memories found by the topic's label alone, which the model never sees: a
        // memory shown by its label is replaced by one more of its kind as readily as by
        // a change.
        let open = |existing: &[Row], m: usize| {
            let record = &existing[m].record;
            let taken = known
                .iter()
                .any(|p| matches!(p, Some(FactPlan::Update { memory, .. }) if *memory == m))
                || ended.iter().any(|&(_, e)| e == m);
            !(record.immutable || record.created_at > spoken_at || taken)
        };
        let mut ruled = own.iter().find_map(|&(m, _)| {
            open(&existing, m)
                .then(|| superseded_by_rule(&existing[m].record.memory, &said[i]))
                .flatten()
                .map(|rule| (m, rule))
        });
        if ruled.is_none() {
            for row in labelled {
                let Some(rule) = superseded_by_rule(&row.record.memory, &said[i]) else {
                    continue;
                };
                // Only a memory the fact takes the place of joins those shown.
                let free = match slot.get(&row.record.id) {
                    Some(&m) => open(&existing, m),
                    None => {
                        existing.len() < MAX_EXISTING
                            && !row.record.immutable
                            && row.record.created_at <= spoken_at
                    }
                };
                if free {
                    let m = *slot.entry(row.record.id).or_insert_with(|| {
                        existing.push(row);
                        existing.len() - 1
                    });
                    own.push((m, 0.0));
                    ruled = Some((m, rule));
                    break;
                }
            }
        }
        if let Some((m, rule)) = ruled {
            tracing::debug!(target: "memlane", memory = %existing[m].record.id, "{rule}: the fact supersedes the memory");
            if ENDS_EVERY.contains(&rule) {
                let others: Vec<usize> = own
                    .iter()
                    .map(|&(o, _)| o)
                    .filter(|&o| {
                        o != m
                            && open(&existing, o)
                            && superseded_by_rule(&existing[o].record.memory, &said[i])
                                == Some(rule)
                    })
                    .collect();
                for o in others {
                    tracing::debug!(target: "memlane", memory = %existing[o].record.id, "{rule}: the fact ends one more memory");
                    ended.push((i, o));
                }
            }
            known[i] = Some(FactPlan::Update {
                memory: m,
                text: texts[i].clone(),
            });
        } else if !own.is_empty() {
            asked.push(i);
            neighbours.push(own);
        } else {
            known[i] = Some(FactPlan::Add);
        }
    }

    // The model decides for the facts that have neighbours.
    let mut decisions = Vec::new();
    if !asked.is_empty() {
        let asked_texts: Vec<String> = asked.iter().map(|&i| said[i].clone()).collect();
        let shown: Vec<Existing> = existing
            .iter()
            .map(|row| Existing {
                text: row.record.memory.clone(),
                immutable: row.record.immutable,
            })
            .collect();
        let decided = infer::reconcile(&*llm, &asked_texts, &shown, spoken_at).await?;
        usage += decided.usage;
        decisions = decided.value;
        trace_decisions(&decisions, &neighbours, &existing);
    }
    let found: Vec<Vec<usize>> = neighbours
        .iter()
        .map(|own| own.iter().map(|&(m, _)| m).collect())
        .collect();
    let mut plan = plan::decide(
        known, &said, &asked, &existing, &found, decisions, spoken_at,
    );
    // A fact that tells of a stay away from a home found for it leaves that home alone,
    // one that tells of another taste leaves the taste, a friend made the partner, a
    // new pet the pet before, news of someone else the speaker's own memories, and a
    // habit at set times what a memory with no time of its own says.
    let beside: Vec<(usize, usize)> = asked
        .iter()
        .zip(&found)
        .flat_map(|(&fact, memories)| memories.iter().map(move |&m| (fact, m)))
        .filter_map(|(fact, m)| {
            let (memory, fact_said) = (&existing[m].record.memory, &said[fact]);
            let why = if infer::stays_away(memory, fact_said) {
                "a stay away"
            } else if infer::another_taste(memory, fact_said) {
                "another taste"
            } else if infer::makes_a_friend(memory, fact_said) {
                "a friend made"
            } else if infer::another_pet(memory, fact_said) {
                "a new pet"
            } else if infer::of_someone_else(memory, fact_said) {
                "news of someone else"
            } else if infer::at_other_times(memory, fact_said) {
                "a habit at set times"
            } else {
                return None;
            };
            if matches!(plan.facts.get(fact), Some(FactPlan::Update { memory, .. }) if *memory == m)
            {
                tracing::debug!(target: "memlane", memory = %existing[m].record.id, "{why}: the fact stays beside the memory");
            }
            Some((fact, m))
        })
        .collect();
    plan.keep_beside(beside);
    // A second look at each DELETE, and at each UPDATE whose text failed the plan's
    // checks: the memory the model named, alone with the fact.
    for (fact, m) in plan.second_looks() {
        let looked = infer::replaces(&*llm, &existing[m].record.memory, &said[fact]).await?;
        usage += looked.usage;
        if !looked.value {
            continue;
        }
        // A yes counts only when the look tells the memory apart from the fact's next most
        // relevant one: a small model that calls a job replaced by a change of diet may
        // say so of the diet too. When it says so of both, the question each memory
        // answers tells them apart; when that cannot either, neither memory gets a closer
        // look with this fact.
        let (mut superseded, mut look) = (m, "a second look");
        if let Some(rival) = plan.rival(fact, m, &asked, &existing, &found) {
            let also = infer::replaces(&*llm, &existing[rival].record.memory, &said[fact]).await?;
            usage += also.usage;
            if also.value {
                let told = infer::apart(
                    &*llm,
                    &existing[m].record.memory,
                    &existing[rival].record.memory,
                    &said[fact],
                )
                .await?;
                usage += told.usage;
                look = "a second look told apart by the memories' questions";
                match told.value {
                    Apart::First => {}
                    Apart::Second => superseded = rival,
                    Apart::Neither => {
                        tracing::debug!(
                            target: "memlane",
                            memory = %existing[m].record.id,
                            rival = %existing[rival].record.id,
                            "a second look that tells no memory apart"
                        );
                        plan.doubtful.push((fact, rival));
                        continue;
                    }
                }
            }
        }
        settle(
            &mut plan,
            fact,
            &existing[superseded],
            superseded,
            &texts[fact],
            look,
        );
    }

    // A closer look beside each fact the model added: its most relevant memories, one at a
    // time, until one is outdated.
    for (fact, memories) in plan.closer_looks(&said, &asked, &existing, &found, spoken_at) {
        for m in memories {
            if plan.touches(m) {
                continue;
            }
            let looked = infer::outdates(&*llm, &existing[m].record.memory, &said[fact]).await?;
            usage += looked.usage;
            if looked.value
                && settle(
                    &mut plan,
                    fact,
                    &existing[m],
                    m,
                    &texts[fact],
                    "a closer look",
                )
            {
                break;
            }
        }
    }

    // An UPDATE stores its fact as the new memories do, its "here" resolved.
    plan.store_as(&texts);
    // A memory of several clauses keeps those the fact does not change: the one clause a
    // rule finds the fact superseding, or else, asked what the memory answers, the model
    // names the part that changes.
    let several: Vec<(usize, usize, String)> = plan
        .facts
        .iter()
        .enumerate()
        .filter_map(|(fact, p)| match p {
            FactPlan::Update { memory: m, text } => Some((fact, *m, text.clone())),
            _ => None,
        })
        .collect();
    for (fact, m, text) in several {
        let old = &existing[m].record.memory;
        let by_rule = infer::with_the_rest_kept_by(old, &text, |clause| {
            superseded_by_rule(clause, &said[fact]).is_some()
        });
        if let Some(kept) = by_rule {
            tracing::debug!(target: "memlane", memory = %existing[m].record.id, "a rule finds the fact superseding one clause of the memory");
            plan.facts[fact] = FactPlan::Update {
                memory: m,
                text: kept,
            };
            continue;
        }
        if infer::clauses(old).len() < 2 {
            continue;
        }
        let answered = infer::answers(&*llm, old, &said[fact]).await?;
        usage += answered.usage;
        if let Some(kept) = infer::with_the_rest_kept(old, &text, &answered.value) {
            tracing::debug!(target: "memlane", memory = %existing[m].record.id, "the fact takes the place of one clause of the memory");
            plan.facts[fact] = FactPlan::Update {
                memory: m,
                text: kept,
            };
        }
    }

    // A fact that takes a memory's place is a new memory of the text it is stored as.
    let update_texts: Vec<String> = plan
        .facts
        .iter()
        .filter_map(|p| match p {
            FactPlan::Update { text, .. } => Some(indexed_text(text, None)),
            _ => None,
        })
        .collect();
    let update_vectors = if update_texts.is_empty() {
        Vec::new()
    } else {
        memory.embed_documents(&update_texts).await?
    };
    let plan::Writes {
        mut writes,
        credits,
        ids,
    } = plan::writes(
        &plan,
        &facts,
        vectors,
        update_vectors,
        &existing,
        &cx,
        &prices,
    );
    // A memory ended beside the one its fact took the place of is superseded by that fact
    // too, if the plan still has the fact take a memory's place and changes this one no
    // other way.
    for (fact, m) in ended {
        let updates = |memory: usize| {
            plan.facts
                .iter()
                .any(|p| matches!(p, FactPlan::Update { memory: u, .. } if *u == memory))
        };
        let by = ids.get(fact).copied().flatten();
        if let (FactPlan::Update { .. }, Some(by), false) = (&plan.facts[fact], by, updates(m)) {
            let row = &existing[m];
            if row.record.valid_from <= cx.spoken_at {
                writes.push(Write::Supersede {
                    id: row.record.id,
                    by,
                    at: cx.spoken_at,
                    input: cx.messages.clone(),
                    expect: Some(row.version),
                });
            }
        }
    }
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

/// The rules of [`superseded_by_rule`] whose state is one at a time, so that a fact that
/// supersedes one memory by such a rule ends every other memory the rule finds it
/// superseding ("Lena und ich haben uns getrennt" ends "Meine Freundin heißt Lena" and
/// "Wir sind seit zwei Jahren zusammen"). Not a change of job (a second job may stay), a
/// taste, drinking or a pet; nor a diet by the rules of meat, which do not ask whose diet
/// a memory tells of ("My daughter is vegetarian too" would go with "I'm vegetarian").
/// A diet the speaker keeps ends with each memory of it: "I stopped intermittent
/// fasting, now I eat breakfast again" ends "I do intermittent fasting" and "I skip
/// breakfast every day".
const ENDS_EVERY: &[&str] = &[
    "a single life ended",
    "a relationship ended",
    "a move",
    "a diet of the speaker's given up",
    "a way of eating changed",
];

/// The rule by which a new fact supersedes a memory of its owner, when one does: the
/// speaker eats meat again after a vegetarian or vegan memory ([`infer::gives_up_diet`]),
/// went vegetarian or vegan after a memory of eating meat ([`infer::takes_up_diet`]) or
/// took up a diet that rules out what the memory eats ([`infer::rules_out`]), gave up
/// one it keeps ([`infer::ends_diet`]) or took up another way of eating than the one it
/// keeps ([`infer::switches_diet`]), has
/// a partner after a memory of being single ([`infer::ends_single_life`]), ended a
/// relationship, found a new partner or married after a memory of the partner before
/// ([`infer::ends_partnership`]), turned a taste around ([`infer::reverses_taste`]),
/// stopped drinking after a memory of a drink ([`infer::gives_up_drinking`]), moved
/// away from the place a memory says they live ([`infer::moved_away`]), retired or
/// changed jobs after a memory of their work ([`infer::retires`], [`infer::changes_jobs`]),
/// or lost the one pet a memory names ([`infer::a_pet_died`]). A small
/// model keeps such pairs side by side; these say it plainly enough to need no model.
/// None for news of someone else the memory does not name ([`infer::of_someone_else`]):
/// "My sister started eating meat again" ends no vegan memory of the speaker's.
fn superseded_by_rule(memory: &str, fact: &str) -> Option<&'static str> {
    if infer::of_someone_else(memory, fact) {
        None
    } else if infer::gives_up_diet(memory, fact) {
        Some("a diet given up")
    } else if infer::takes_up_diet(memory, fact) {
        Some("a diet taken up")
    } else if infer::rules_out(memory, fact) {
        Some("a diet that rules out what the memory eats")
    } else if infer::ends_diet(memory, fact) {
        Some("a diet of the speaker's given up")
    } else if infer::switches_diet(memory, fact) {
        Some("a way of eating changed")
    } else if infer::ends_single_life(memory, fact) {
        Some("a single life ended")
    } else if infer::ends_partnership(memory, fact) {
        Some("a relationship ended")
    } else if infer::reverses_taste(memory, fact) {
        Some("a taste reversed")
    } else if infer::gives_up_drinking(memory, fact) {
        Some("drinking given up")
    } else if infer::moved_away(memory, fact) {
        Some("a move")
    } else if infer::retires(memory, fact) {
        Some("a retirement")
    } else if infer::changes_jobs(memory, fact) {
        Some("a change of job")
    } else if infer::a_pet_died(memory, fact) {
        Some("a pet that died")
    } else if infer::takes_back(memory, fact) {
        Some("a memory taken back")
    } else {
        None
    }
}

/// Fact `fact` takes the place of memory `m` (`row`), which a look found it supersedes,
/// unless the plan already changes that memory; whether it did. Traced at debug level with
/// the look's name and the memory's id.
fn settle(plan: &mut plan::Plan, fact: usize, row: &Row, m: usize, text: &str, look: &str) -> bool {
    let settled = plan.supersede(fact, m, text);
    if settled {
        tracing::debug!(target: "memlane", memory = %row.record.id, "{look}: the fact supersedes the memory");
    }
    settled
}

/// At debug level, each decision of the model: the fact (its number among those asked
/// about), the memory it names, and the memories its fact was found similar to, with their
/// relevance (a memory found by its topic, with its keyword score instead): what to read
/// when a fact replaced the wrong memory, or none it should have.
/// Memories appear by id; no text is traced.
fn trace_decisions(
    decisions: &[infer::Decision],
    neighbours: &[Vec<(usize, f32)>],
    existing: &[Row],
) {
    if !tracing::enabled!(target: "memlane", tracing::Level::DEBUG) {
        return;
    }
    for d in decisions {
        let similar: Vec<(Uuid, f32)> = neighbours
            .get(d.fact)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|&(m, relevance)| (existing[m].record.id, relevance))
            .collect();
        tracing::debug!(
            target: "memlane",
            fact = d.fact,
            event = ?d.event,
            memory = ?d.memory.and_then(|m| existing.get(m)).map(|r| r.record.id),
            similar = ?similar,
            "reconciled"
        );
    }
}

impl Memory {
    /// The user's statements that none of the extracted `facts` speaks of
    /// ([`infer::left_out`]: all of them when the model extracted nothing, else the
    /// clauses left out) that a rule finds superseding one of the owner's memories found
    /// for them ([`superseded_by_rule`]), each kept as said. A small model extracts
    /// nothing from a change said as a denial ("Ya no estoy con Javier", "Het is uit
    /// tussen Daan en mij"), or only the other clause of a sentence ("I've come to love
    /// jazz, I listen to Coltrane every evening"), and the memory it ends would stay. A statement that supersedes nothing stays unstored, as the model
    /// decided.
    async fn unextracted_changes(
        &self,
        facts: &[Fact],
        messages: &[crate::record::Message],
        filter: &crate::filter::Filter,
        at: DateTime<Utc>,
        spoken_at: DateTime<Utc>,
    ) -> Result<Vec<Fact>> {
        let statements = infer::left_out(facts, messages);
        if statements.is_empty() {
            return Ok(Vec::new());
        }
        let vectors = self.embed_documents(&statements).await?;
        let similar = self
            .similar(&statements, vectors, filter, CANDIDATES_PER_FACT, at)
            .await?;
        let on_topic = self.on_topic(&statements, filter, at).await?;
        let mut facts = Vec::new();
        for ((statement, hits), (topical, labelled)) in
            statements.into_iter().zip(similar).zip(on_topic)
        {
            let supersedes = hits
                .into_iter()
                .filter(|(_, relevance)| *relevance >= MIN_RELEVANCE)
                .chain(topical)
                .chain(labelled.into_iter().map(|row| (row, 0.0)))
                .any(|(row, _)| {
                    !row.record.immutable
                        && row.record.created_at <= spoken_at
                        && superseded_by_rule(&row.record.memory, &statement).is_some()
                });
            if supersedes {
                tracing::debug!(target: "memlane", "a change the model did not extract is kept as said");
                facts.push(Fact {
                    text: statement,
                    categories: Vec::new(),
                    entities: Vec::new(),
                    importance: crate::record::DEFAULT_IMPORTANCE,
                });
            }
        }
        Ok(facts)
    }

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

    /// For each fact, the live memories among `filter` that speak of a topic it speaks of
    /// (a partner, a diet, work: see [`infer::topics`]), at most [`TOPIC_CANDIDATES`], best
    /// keyword score first, with that score: a change of these rarely resembles the memory
    /// it ends. Beside them, for the rules only, the newest others with the topic's label
    /// that speak of it (`Topic::labels`: "professional_details" for work), found by no
    /// word of the topic: "I'm a barista at a café in Camden". Facts of no topic get none,
    /// and cost no search.
    async fn on_topic(
        &self,
        facts: &[String],
        filter: &crate::filter::Filter,
        at: DateTime<Utc>,
    ) -> Result<Vec<(Vec<(Row, f32)>, Vec<Row>)>> {
        let among = Among::new(filter, at, false);
        let mut out = Vec::with_capacity(facts.len());
        for fact in facts {
            let mut found: Vec<(Row, f32)> = Vec::new();
            let mut labelled: Vec<Row> = Vec::new();
            for topic in infer::topics(fact) {
                // A query reads at most `MAX_QUERY_WORDS` words.
                for words in topic.searched().chunks(crate::text::MAX_QUERY_WORDS) {
                    let ranked = self
                        .keyword_ranked(
                            &words.join(" "),
                            among,
                            TOPIC_SEARCHED,
                            RECONCILE_MIN_ROWS,
                            None,
                        )
                        .await?;
                    for (row, r) in self.hydrate_rows(ranked, filter, false, at).await? {
                        let speaks = infer::topics(&row.record.memory).contains(&topic);
                        if speaks && !found.iter().any(|(f, _)| f.record.id == row.record.id) {
                            found.push((row, r.score));
                        }
                    }
                }
                // The newest memories with the topic's label that speak of it.
                for label in topic.labels() {
                    let with_label =
                        filter
                            .clone()
                            .and(Filter::Condition(Condition::Categories(Op::Eq(
                                (*label).to_owned(),
                            ))));
                    let page = self
                        .inner
                        .store
                        .scan(&Scan::new(with_label, at, TOPIC_SEARCHED))
                        .await?;
                    for row in page.rows {
                        let speaks = infer::topics(&row.record.memory).contains(&topic);
                        if speaks && !labelled.iter().any(|l| l.record.id == row.record.id) {
                            labelled.push(row);
                        }
                    }
                }
            }
            found.sort_by(|a, b| b.1.total_cmp(&a.1));
            found.truncate(TOPIC_CANDIDATES);
            labelled.retain(|l| !found.iter().any(|(f, _)| f.record.id == l.record.id));
            out.push((found, labelled));
        }
        Ok(out)
    }
}

/// Usage is part of every add's result (zero for a verbatim one).
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
