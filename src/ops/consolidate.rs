//! `consolidate`: merge clusters of near-duplicate memories, one owner at a time.
//!
//! Within each owner (the same user, agent, app and run ids), memories are taken oldest
//! first; each one not yet in a cluster gathers its unclustered neighbours at or above the
//! similarity threshold (cosine of the stored vectors). Leaders gather members, members
//! never recruit others, so clusters do not chain A≈B≈C into A+C.
//!
//! A cluster keeps its most recently updated memory (the newest information). With a
//! language model its text becomes the model's merge of all the members' texts; without
//! one it stays as it is. The other members are soft-deleted. Each cluster commits on its
//! own, with history on every member naming the merge; a cluster whose memories changed
//! since they were read is skipped and counted, never half-applied. Immutable memories are
//! left out of consolidation altogether.
//!
//! Every model call costs the project's `inference` price, whatever it leads to: a merged
//! cluster pays it with its `update` price in the cluster's transaction, a skipped cluster
//! pays it alone. When the balance cannot pay for the next call, the run stops before it
//! and returns what it merged so far, with a 402 in [`ConsolidateResult::stopped`] saying
//! where it stopped. A dry run calls no model and costs nothing.

use crate::progress::{report, OnProgress, Progress, Task};
use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::credits::Prices;
use crate::error::{Error, Result};
use crate::infer;
use crate::llm::Usage;
use crate::memory::Memory;
use crate::ops::{awaitable, scope_setters, Scope};
use crate::record::{indexed_text, now, union, Core, MemoryRecord, Message, Owners};
use crate::store::{
    owner_filter, Among, MemoryUpdate, Row, VectorKey, VectorQuery, Write, WriteBatch,
};

/// Neighbours examined per leader.
const NEIGHBOURS: usize = 32;
/// Records read from the store per call.
const READ_CHUNK: usize = 1000;

/// The default similarity threshold: MiniLM scores rephrasings of one fact around 0.9 and
/// above ("That is a happy person" / "That is a very happy person": 0.94), and related but
/// different facts below.
pub const DEFAULT_CONSOLIDATE_THRESHOLD: f32 = 0.9;

/// One cluster merged (or, in a dry run, that would be).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MergedCluster {
    /// The memory that stays.
    pub kept: Uuid,
    /// The memories soft-deleted into it.
    pub merged: Vec<Uuid>,
    /// The kept memory's text after the merge (in a dry run: its current text).
    pub memory: String,
    /// Every member's text before the merge, oldest first.
    pub previous: Vec<String>,
}

/// The result of `consolidate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ConsolidateResult {
    /// The clusters, in the order they were found.
    pub clusters: Vec<MergedCluster>,
    /// Memories examined.
    pub examined: usize,
    /// Whether this was a dry run (nothing changed).
    pub dry_run: bool,
    /// Clusters skipped because a member changed while the run was merging it.
    pub skipped: usize,
    /// Tokens the language model used for merging.
    pub usage: Usage,
    /// Credits this call used: the `inference` price per model call, and the `update`
    /// price per kept memory whose text changed.
    pub credits_used: u64,
    /// Credits left.
    pub credits_remaining: u64,
    /// Why the run stopped before the end, if it did: a 402 when the balance could not pay
    /// for the next model call. What was merged before it stays merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
}

/// Why a long operation stopped early: an error's status and `detail`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Stopped {
    /// The HTTP-style status (402 when credits ran out).
    pub status: u16,
    /// What stopped it, and where.
    pub detail: String,
}

/// A consolidation; await it to run it. Built by [`Memory::consolidate`].
///
/// ## Defaults
/// Every owner, threshold [`DEFAULT_CONSOLIDATE_THRESHOLD`] (0.5–1), not a dry run, no
/// progress callback, expired memories left alone.
#[must_use = "a request does nothing until awaited"]
pub struct ConsolidateRequest<'a> {
    memory: &'a Memory,
    scope: Scope,
    threshold: f32,
    dry_run: bool,
    progress: Option<OnProgress>,
}

impl std::fmt::Debug for ConsolidateRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsolidateRequest")
            .field("scope", &self.scope)
            .field("threshold", &self.threshold)
            .field("dry_run", &self.dry_run)
            .finish_non_exhaustive()
    }
}

impl Memory {
    /// Finds clusters of near-duplicate memories per owner and merges each into one: the
    /// newest member stays, merged by the language model when one is configured; the rest
    /// are soft-deleted with history.
    pub fn consolidate(&self) -> ConsolidateRequest<'_> {
        ConsolidateRequest {
            memory: self,
            scope: Scope::default(),
            threshold: DEFAULT_CONSOLIDATE_THRESHOLD,
            dry_run: false,
            progress: None,
        }
    }
}

impl<'a> ConsolidateRequest<'a> {
    scope_setters!();

    /// The cosine similarity at which two memories count as duplicates (0.5–1).
    pub fn threshold(mut self, threshold: f32) -> Self {
        self.threshold = threshold;
        self
    }

    /// Only report the clusters; change nothing and call no model.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Reports the run's progress in owners: as it starts, then after each owner (see
    /// [`progress`](crate::progress)). The clusters found are in the result.
    pub fn on_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(OnProgress::new(f));
        self
    }

    async fn send(self) -> Result<ConsolidateResult> {
        if !(0.5..=1.0).contains(&self.threshold) {
            return Err(Error::invalid_field(
                "threshold",
                format!(
                "threshold must be 0.5–1 (a cosine similarity; {DEFAULT_CONSOLIDATE_THRESHOLD} \
                 by default), got {}",
                self.threshold
            ),
            ));
        }
        let memory = self.memory;
        // Near-duplicates are found by their vectors, and merged texts embedded.
        memory.require_embedder("consolidate")?;
        let filter = self.scope.to_filter()?;
        let at = now();
        let include_expired = self.scope.include_expired;
        let keys = memory
            .inner
            .store
            .keys(Among::new(&filter, at, include_expired))
            .await?;
        let mut groups: HashMap<Owners, Vec<Row>> = HashMap::new();
        for chunk in keys.chunks(READ_CHUNK) {
            for row in memory.inner.store.rows_by_key(chunk).await? {
                if !row.record.immutable {
                    groups
                        .entry(row.record.owners.clone())
                        .or_default()
                        .push(row);
                }
            }
        }
        // The index holds the vectors of every row just read, whoever wrote them.
        if let Some(index) = &memory.space().index {
            index.refresh(&*memory.inner.store).await?;
        }
        let mut groups: Vec<Vec<Row>> = groups.into_values().collect();
        for g in &mut groups {
            g.sort_by_key(|row| (row.record.created_at, row.key));
        }
        groups.sort_by_key(|g| g.first().map(|row| row.key));

        let mut result = ConsolidateResult {
            clusters: Vec::new(),
            examined: 0,
            dry_run: self.dry_run,
            skipped: 0,
            usage: Usage::default(),
            credits_used: 0,
            credits_remaining: 0,
            stopped: None,
        };
        let total = groups.len();
        report(self.progress.as_ref(), Task::Consolidate, 0, total as u64);
        let clock = crate::retrieve::clock(include_expired, at);
        let prices = memory.prices().await?;
        'owners: for (done, group) in groups.into_iter().enumerate() {
            result.examined += group.len();
            let scope = Among::new(&filter, at, include_expired);
            for cluster in clusters(memory, &group, self.threshold, clock, scope).await? {
                if self.dry_run {
                    let kept = newest(&cluster);
                    result.clusters.push(MergedCluster {
                        kept: kept.id,
                        merged: others(&cluster, kept.id),
                        memory: kept.memory.clone(),
                        previous: cluster.iter().map(|r| r.record.memory.clone()).collect(),
                    });
                    continue;
                }
                if memory.inner.llm.is_some() {
                    if let Err(e) = memory.check_affordable(prices.inference).await {
                        result.stopped = Some(Stopped {
                            status: e.status(),
                            detail: format!(
                                "consolidation stopped before merging cluster {} (owner {} of \
                                 {total}), {} cluster(s) merged: {}",
                                result.clusters.len() + result.skipped + 1,
                                done + 1,
                                result.clusters.len(),
                                e.detail()
                            ),
                        });
                        break 'owners;
                    }
                }
                match merge_cluster(memory, cluster, &prices, &mut result).await {
                    Ok(()) => {}
                    Err(e @ Error::InsufficientCredits { .. }) => {
                        result.stopped = Some(Stopped {
                            status: e.status(),
                            detail: format!(
                                "consolidation stopped at cluster {} (owner {} of {total}), \
                                 {} cluster(s) merged: {}",
                                result.clusters.len() + result.skipped + 1,
                                done + 1,
                                result.clusters.len(),
                                e.detail()
                            ),
                        });
                        break 'owners;
                    }
                    Err(e) => return Err(e),
                }
            }
            report(
                self.progress.as_ref(),
                Task::Consolidate,
                done as u64 + 1,
                total as u64,
            );
        }
        result.credits_remaining = memory.credits().await?;
        Ok(result)
    }
}

awaitable!(ConsolidateRequest, ConsolidateResult, "consolidate");

/// The clusters of one owner's memories (oldest first within each cluster).
///
/// Neighbours come from the in-process index, or, for a store that searches in its
/// database, from its candidate source, among the memories of the group's owners in `scope`.
async fn clusters(
    memory: &Memory,
    group: &[Row],
    threshold: f32,
    clock: i64,
    scope: Among<'_>,
) -> Result<Vec<Vec<Row>>> {
    if group.len() < 2 {
        return Ok(Vec::new());
    }
    let keys: Vec<VectorKey> = group.iter().map(|row| row.key).collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    let space = memory.space();
    let index = space.index.as_deref();
    let vectors: HashMap<VectorKey, Vec<f32>> = match index {
        Some(index) => index.vectors(&keys)?.into_iter().collect(),
        None => {
            let ids: Vec<Uuid> = group.iter().map(|row| row.record.id).collect();
            memory
                .inner
                .store
                .vectors(VectorQuery::Of(&ids))
                .await?
                .into_iter()
                .map(|v| (v.key, v.vector))
                .collect()
        }
    };
    let owners = scope
        .filter
        .clone()
        .and(owner_filter(&group[0].record.owners));
    let position: HashMap<VectorKey, usize> =
        keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
    let exact = index.is_some_and(|index| group.len() <= index.params().exact_search_max);
    let mut taken = vec![false; group.len()];
    let mut out = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        if taken[i] {
            continue;
        }
        let Some(v) = vectors.get(key) else { continue };
        let neighbours = match index {
            Some(index) if exact => index.exact(v, Some(&keys), NEIGHBOURS, clock)?,
            Some(index) => index.search(v, NEIGHBOURS, clock, Some(&sorted))?,
            None => {
                let among = Among::new(&owners, scope.now, scope.include_expired);
                space
                    .candidates
                    .nearest(vec![v.clone()], among, NEIGHBOURS)
                    .await?
                    .pop()
                    .unwrap_or_default()
            }
        };
        let mut members = vec![i];
        for (k, cosine) in neighbours {
            match position.get(&k) {
                Some(&j) if j != i && !taken[j] && cosine >= threshold => members.push(j),
                _ => {}
            }
        }
        if members.len() > 1 {
            members.sort_unstable();
            for &j in &members {
                taken[j] = true;
            }
            out.push(members.iter().map(|&j| group[j].clone()).collect());
        }
    }
    Ok(out)
}

/// The member that stays: the most recently updated.
fn newest(cluster: &[Row]) -> &MemoryRecord {
    cluster
        .iter()
        .map(|row| &row.record)
        .max_by_key(|r| r.updated_at)
        .unwrap_or(&cluster[0].record)
}

fn others(cluster: &[Row], kept: Uuid) -> Vec<Uuid> {
    cluster
        .iter()
        .map(|row| row.record.id)
        .filter(|id| *id != kept)
        .collect()
}

/// Merges one cluster in one transaction, written only if no member moved since it was
/// read; a cluster that moved is skipped. Records the outcome, and what it paid, in
/// `result`; a 402 means the balance could not pay, and nothing of the cluster changed.
async fn merge_cluster(
    memory: &Memory,
    cluster: Vec<Row>,
    prices: &Prices,
    result: &mut ConsolidateResult,
) -> Result<()> {
    let kept = newest(&cluster).clone();
    let version = |id: Uuid| {
        cluster
            .iter()
            .find(|r| r.record.id == id)
            .map(|r| r.version)
    };
    let merged_ids = others(&cluster, kept.id);
    let previous: Vec<String> = cluster.iter().map(|r| r.record.memory.clone()).collect();
    let (text, inference) = match &memory.inner.llm {
        Some(llm) => {
            let parsed = infer::merge(&**llm, &previous).await?;
            result.usage += parsed.usage;
            (parsed.value, prices.inference)
        }
        None => (kept.memory.clone(), 0),
    };
    let at = now();
    let note = |what: String| vec![Message::new("system", what)];
    let mut writes = Vec::new();
    let mut credits = inference;
    let mut update = MemoryUpdate::new(kept.id, at);
    update.expect = version(kept.id);
    let categories = cluster.iter().fold(kept.categories.clone(), |all, r| {
        union(&all, &r.record.categories)
    });
    if text != kept.memory {
        let vector = memory
            .embed_documents(&[indexed_text(&text, kept.context.as_deref())])
            .await?
            .pop()
            .ok_or_else(|| Error::internal("no vector"))?;
        update.text = Some((text.clone(), vector));
        let mut metadata = kept.metadata.clone();
        Core::revised(&kept.metadata, &text, &categories, &[], None).insert_into(&mut metadata);
        update.metadata = Some(metadata);
        credits += prices.update;
    }
    if text != kept.memory || categories != kept.categories {
        update.categories = Some(categories);
        update.input = note(format!(
            "consolidate: merged {} into this memory",
            merged_ids
                .iter()
                .map(Uuid::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
        writes.push(Write::Update(update));
    }
    for id in &merged_ids {
        writes.push(Write::Delete {
            id: *id,
            at,
            input: note(format!("consolidate: merged into {}", kept.id)),
            expect: version(*id),
        });
    }
    match memory.commit(WriteBatch::new(writes, credits)).await {
        Ok(_) => {
            result.credits_used += credits;
            result.clusters.push(MergedCluster {
                kept: kept.id,
                merged: merged_ids,
                memory: text,
                previous,
            });
            Ok(())
        }
        // A member moved (another writer) or was deleted meanwhile: the cluster is skipped,
        // and its model call is still paid.
        Err(Error::Conflict { .. } | Error::NotFound { .. }) => {
            tracing::debug!("cluster skipped: a member changed during consolidation");
            result.skipped += 1;
            if inference > 0 {
                memory.charge(inference).await?;
                result.credits_used += inference;
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}
