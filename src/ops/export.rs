//! `export` and `import`: a lossless JSON copy of a project's memories, for backups,
//! migrations and inspection.
//!
//! An export holds every field of each live memory, its vector, its whole history and its
//! feedback. Importing it into an empty project restores each memory with its id,
//! timestamps, hash and history exactly; a second export of that project equals the first
//! (but for `exported_at`). Vectors are reused when the embedding model is the same and
//! recomputed when it is not, so an import is also how to move to another model.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::embed::normalize;
use crate::error::{Error, Result};
use crate::limits;
use crate::memory::Memory;
use crate::ops::{awaitable, scope_setters, Scope};
use crate::progress::{report, OnProgress, Progress, Task};
use crate::record::{content_hash, now, HistoryRecord, MemoryRecord};
use crate::store::{Feedback, LogQuery, NewMemory, Scan, VectorQuery, Write, WriteBatch};

/// The `format` of an export.
pub const EXPORT_FORMAT: &str = "memlane.export";
/// The `version` of the export format this memlane writes and reads.
pub const EXPORT_VERSION: u32 = 1;

/// A project's memories as JSON (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Export {
    /// Always [`EXPORT_FORMAT`].
    pub format: String,
    /// [`EXPORT_VERSION`].
    pub version: u32,
    /// When the export was made.
    pub exported_at: DateTime<Utc>,
    /// The model the vectors come from.
    pub embedding_model: String,
    /// Their length.
    pub dimension: usize,
    /// The memories, oldest first.
    pub memories: Vec<ExportedMemory>,
}

/// One memory of an export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedMemory {
    /// Every field of the memory.
    #[serde(flatten)]
    pub record: MemoryRecord,
    /// Its vector.
    pub vector: Vec<f32>,
    /// Its history, oldest first.
    pub history: Vec<HistoryRecord>,
    /// Its feedback, if any was ever given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<Feedback>,
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ImportResult {
    /// The ids of the memories restored.
    pub imported: Vec<Uuid>,
    /// Whether vectors were recomputed (the export came from another embedding model).
    pub reembedded: bool,
    /// Credits this call used: imports are free.
    pub credits_used: u64,
    /// Credits left.
    pub credits_remaining: u64,
}

/// An export; await it to run it. Built by [`Memory::export`].
#[derive(Debug)]
#[must_use = "a request does nothing until awaited"]
pub struct ExportRequest<'a> {
    memory: &'a Memory,
    scope: Scope,
}

/// An import; await it to run it. Built by [`Memory::import`].
#[derive(Debug)]
#[must_use = "a request does nothing until awaited"]
pub struct ImportRequest<'a> {
    memory: &'a Memory,
    export: &'a Export,
    progress: Option<OnProgress>,
}

/// Texts embedded at a time when an import recomputes vectors: one progress report each.
const IMPORT_CHUNK: usize = 256;

impl Memory {
    /// Exports the live memories matching the request's restrictions (all by default,
    /// expired and superseded ones included) with their vectors, history and feedback.
    pub fn export(&self) -> ExportRequest<'_> {
        ExportRequest {
            memory: self,
            scope: Scope {
                include_expired: true,
                validity: crate::ops::Validity::All,
                ..Scope::default()
            },
        }
    }

    /// Restores an export: every memory with its id, fields, history and feedback, all in
    /// one transaction (nothing is stored if anything is wrong). A 409 when a memory with
    /// one of the ids exists here, deleted ones included; a 400 for an export that is not
    /// one ([`EXPORT_FORMAT`], [`EXPORT_VERSION`]) or does not hold together (a history of
    /// another memory, a hash that is not the text's, a repeated id).
    ///
    /// Await the request to run it; [`on_progress`](ImportRequest::on_progress) follows it.
    pub fn import<'a>(&'a self, export: &'a Export) -> ImportRequest<'a> {
        ImportRequest {
            memory: self,
            export,
            progress: None,
        }
    }
}

impl ImportRequest<'_> {
    /// Reports the import's progress in memories: embedded (when the export's embedding
    /// model is not this memory's), then written, all together (see
    /// [`progress`](crate::progress)).
    pub fn on_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(OnProgress::new(f));
        self
    }

    async fn send(self) -> Result<ImportResult> {
        let (this, export) = (self.memory, self.export);
        let progress = self.progress.as_ref();
        let total = export.memories.len() as u64;
        if export.format != EXPORT_FORMAT || export.version != EXPORT_VERSION {
            return Err(Error::invalid(format!(
                "this is not a memlane export of version {EXPORT_VERSION} (format {:?}, version {})",
                export.format, export.version
            )));
        }
        let mut seen = HashSet::new();
        for m in &export.memories {
            let r = &m.record;
            if !seen.insert(r.id) {
                return Err(Error::invalid(format!("memory {} appears twice", r.id)));
            }
            // Every bound `add` applies, so that an import stores nothing `add` would refuse.
            limits::record(
                r,
                &m.history,
                m.feedback
                    .as_ref()
                    .and_then(|f| f.feedback_reason.as_deref()),
            )
            .map_err(|e| e.about(&format!("memory {}", r.id)))?;
            if r.hash != content_hash(&r.memory) {
                return Err(Error::invalid(format!(
                    "memory {}: its hash is not the SHA-256 of its text; the export was altered",
                    r.id
                )));
            }
            if let Some(h) = m.history.iter().find(|h| h.memory_id != r.id) {
                return Err(Error::invalid(format!(
                    "memory {} carries history record {} of memory {}",
                    r.id, h.id, h.memory_id
                )));
            }
            if m.feedback.as_ref().is_some_and(|f| f.memory_id != r.id) {
                return Err(Error::invalid(format!(
                    "memory {} carries feedback on another memory",
                    r.id
                )));
            }
        }
        report(progress, Task::Import, 0, total);
        let space = this.space();
        let reembed = export.embedding_model != space.model || export.dimension != space.dimension;
        let vectors: Vec<Vec<f32>> = if space.model.is_empty() {
            // A store without an embedding model keeps no vectors.
            vec![Vec::new(); export.memories.len()]
        } else if reembed {
            let mut vectors = Vec::with_capacity(export.memories.len());
            for chunk in export.memories.chunks(IMPORT_CHUNK) {
                let texts: Vec<String> = chunk.iter().map(|m| m.record.indexed_text()).collect();
                vectors.extend(this.embed_documents(&texts).await?);
                // The import is done when it is written: until then, one short.
                let embedded = (vectors.len() as u64).min(total.saturating_sub(1));
                report(progress, Task::Import, embedded, total);
            }
            vectors
        } else {
            export
                .memories
                .iter()
                .map(|m| {
                    // Checked like any vector; kept bit for bit when it is already unit
                    // length, as stored vectors are, so that a restore is exact.
                    let unit = normalize(m.vector.clone(), space.dimension)?;
                    let norm: f32 = m.vector.iter().map(|x| x * x).sum::<f32>().sqrt();
                    Ok(if (norm - 1.0).abs() < 1e-4 {
                        m.vector.clone()
                    } else {
                        unit
                    })
                })
                .collect::<Result<_>>()?
        };
        let mut writes = Vec::with_capacity(export.memories.len());
        for (m, vector) in export.memories.iter().zip(vectors) {
            writes.push(Write::Insert(NewMemory::restored(
                m.record.clone(),
                vector,
                m.history.clone(),
                m.feedback.clone(),
            )));
        }
        let outcome = this.commit(WriteBatch::new(writes, 0)).await?;
        report(progress, Task::Import, total, total);
        Ok(ImportResult {
            imported: outcome.changes.iter().map(|c| c.record.id).collect(),
            reembedded: reembed,
            credits_used: 0,
            credits_remaining: outcome.credits_remaining,
        })
    }
}

awaitable!(ImportRequest, ImportResult, "import");

impl ExportRequest<'_> {
    scope_setters!();

    async fn send(self) -> Result<Export> {
        let filter = self.scope.to_filter()?;
        let store = &self.memory.inner.store;
        let at = now();
        let mut records = Vec::new();
        let mut after = None;
        loop {
            let mut scan = Scan::new(filter.clone(), at, limits::MAX_PAGE_SIZE);
            scan.include_expired = self.scope.include_expired;
            scan.after = after;
            let page = store.scan(&scan).await?;
            records.extend(page.rows.into_iter().map(|row| row.record));
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        // Lists are newest first; an export reads oldest first, as history does.
        records.reverse();
        let ids: Vec<Uuid> = records.iter().map(|r| r.id).collect();
        let mut vectors: HashMap<Uuid, Vec<f32>> = store
            .vectors(VectorQuery::Of(&ids))
            .await?
            .into_iter()
            .map(|v| (v.id, v.vector))
            .collect();
        let mut feedback: HashMap<Uuid, Feedback> = store
            .feedback(&ids)
            .await?
            .into_iter()
            .map(|f| (f.memory_id, f))
            .collect();
        let mut memories = Vec::with_capacity(records.len());
        // A memory deleted between the list and now is left out.
        let live: std::collections::HashSet<Uuid> = store
            .rows(&ids)
            .await?
            .into_iter()
            .filter(|row| row.deleted_at.is_none())
            .map(|row| row.record.id)
            .collect();
        for record in records {
            if !live.contains(&record.id) {
                continue;
            }
            // None in a store without an embedding model (or not yet re-embedded).
            let vector = vectors.remove(&record.id).unwrap_or_default();
            let history: Vec<HistoryRecord> = store
                .log(LogQuery::of(record.id))
                .await?
                .into_iter()
                .map(|(_, h)| h)
                .filter(|h| h.event.is_memory_change())
                .collect();
            memories.push(ExportedMemory {
                feedback: feedback.remove(&record.id),
                record,
                vector,
                history,
            });
        }
        let space = self.memory.space();
        Ok(Export {
            format: EXPORT_FORMAT.to_string(),
            version: EXPORT_VERSION,
            exported_at: at,
            embedding_model: space.model.clone(),
            dimension: space.dimension,
            memories,
        })
    }
}

awaitable!(ExportRequest, Export, "export");
