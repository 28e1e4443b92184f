//! Progress of long tasks, reported through one callback type.
//!
//! Every task that can take more than a moment takes the same callback: loading the local
//! language model ([`LocalLlm::load_default_with_progress`][localllm]), opening a store
//! whose vector index must be rebuilt ([`MemoryBuilder::on_progress`](crate::MemoryBuilder::on_progress)),
//! [`Memory::rebuild_index`](crate::Memory::rebuild_index),
//! [`Memory::import`](crate::Memory::import) and
//! [`Memory::consolidate`](crate::Memory::consolidate). One function can drive one
//! progress bar for all of them:
//!
//! ```
//! use memlane::progress::Progress;
//! let report = |p: Progress| {
//!     eprintln!("{}: {} of {} {}", p.task, p.done, p.total, p.task.unit());
//! };
//! # report(Progress::new(memlane::progress::Task::Import, 1, 2));
//! ```
//!
//! The callback runs on whichever thread does the work (often one of tokio's blocking
//! threads): keep it short, and never block on the memory it reports on.
//!
#![cfg_attr(
    feature = "local-llm",
    doc = "[localllm]: crate::LocalLlm::load_default_with_progress"
)]
#![cfg_attr(not(feature = "local-llm"), doc = "[localllm]: crate#crate-features")]

use std::sync::Arc;

/// A long task memlane reports on. Each counts in its own [`unit`](Task::unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Task {
    /// Downloading a model file from a Hugging Face hub (counted in bytes; feature `hub`).
    FetchModel,
    /// Checking a model file against its pinned SHA-256 (counted in bytes).
    VerifyModel,
    /// Reading a model's weights into memory (counted in layers).
    LoadModel,
    /// Building the vector index from the store's vectors: on open when no sound saved
    /// index is found, or on [`Memory::rebuild_index`](crate::Memory::rebuild_index)
    /// (counted in vector keys: every memory ever written has one, so the count reaches
    /// the store's highest key).
    RebuildIndex,
    /// Importing an export (counted in memories: embedded, when the export's model is not
    /// this memory's, then written together).
    Import,
    /// Consolidating near-duplicate memories (counted in owners).
    Consolidate,
    /// Embedding every memory with a new embedder, on
    /// [`Memory::reembed`](crate::Memory::reembed) (counted in memories: every live one is
    /// looked at, those without a vector embedded).
    Reembed,
}

impl Task {
    /// What [`Progress::done`] and [`Progress::total`] count: `"bytes"`, `"layers"`,
    /// `"keys"`, `"memories"` or `"owners"`.
    pub fn unit(self) -> &'static str {
        match self {
            Task::FetchModel | Task::VerifyModel => "bytes",
            Task::LoadModel => "layers",
            Task::RebuildIndex => "keys",
            Task::Import | Task::Reembed => "memories",
            Task::Consolidate => "owners",
        }
    }
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Task::FetchModel => "fetching model",
            Task::VerifyModel => "verifying model",
            Task::LoadModel => "loading model",
            Task::RebuildIndex => "rebuilding index",
            Task::Import => "importing",
            Task::Consolidate => "consolidating",
            Task::Reembed => "re-embedding",
        })
    }
}

/// Where a long task is: `done` of `total`, in the task's [`unit`](Task::unit).
///
/// A task reports once when it starts (`done` 0) and once when it ends (`done` equal to
/// `total`), and in between as it goes. `total` can grow while a task runs (a store
/// written to during a rebuild); `done` never passes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// The task.
    pub task: Task,
    /// How much is done.
    pub done: u64,
    /// How much there is in all.
    pub total: u64,
}

impl Progress {
    /// A report (for tests of your own callbacks).
    pub fn new(task: Task, done: u64, total: u64) -> Self {
        Progress {
            task,
            done: done.min(total),
            total,
        }
    }
}

/// A progress callback as memlane keeps it: shared, callable from any thread.
#[derive(Clone)]
pub(crate) struct OnProgress(Arc<dyn Fn(Progress) + Send + Sync>);

impl OnProgress {
    pub(crate) fn new(f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        OnProgress(Arc::new(f))
    }

    /// Reports `done` of `total` (`done` capped at `total`).
    pub(crate) fn report(&self, task: Task, done: u64, total: u64) {
        (self.0)(Progress::new(task, done, total));
    }
}

impl std::fmt::Debug for OnProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnProgress")
    }
}

/// Reports to `progress`, if there is one.
pub(crate) fn report(progress: Option<&OnProgress>, task: Task, done: u64, total: u64) {
    if let Some(p) = progress {
        p.report(task, done, total);
    }
}
