//! `reembed`: gives a store an embedding model, or moves it to another one, by embedding
//! every memory with the new embedder.
//!
//! 1. **The switch**, one transaction: the store records the new model and dimension and
//!    forgets every old vector. It states the model it replaces, so two moves at once do
//!    not both happen (409), and every other handle still on the old model is refused
//!    from then on: its writes of vectors at commit, its searches by vector before they
//!    run (409, "open the store again with its model").
//! 2. **The walk**: every live memory (expired ones too) without a vector is embedded and
//!    its vector written under its key, a chunk at a time, each chunk stating the new
//!    model. A memory changed meanwhile (by a handle on the new model, which embeds it
//!    itself) is read again.
//! 3. **The swap**: this handle searches and writes with the new embedder, from a vector
//!    index built from the new vectors.
//!
//! An interrupted reembed leaves a store on the new model with some memories not yet
//! embedded: vector search does not find those until `reembed` is called again, which
//! embeds only what is missing. Keyword search finds every memory throughout. Meanwhile,
//! this handle's writes wait, and its searches by vector are a 503 that says why.

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::embed::{embed_unit, EmbedMode, Embedder};
use crate::error::{Error, Result};
use crate::filter::Filter;
use crate::memory::{open_space, Memory};
use crate::progress::{report, OnProgress, Progress, Task};
use crate::record::now;
use crate::store::{
    apply, Among, Row, Scan, Store, VectorQuery, Write, WriteBatch, META_DIMENSION, META_EPOCH,
    META_MODEL,
};

/// Memories embedded (and written) at a time: one progress report each.
const REEMBED_CHUNK: usize = 256;

/// How many times a chunk whose memories moved under it is read again.
const RETRIES: usize = 4;

/// What a reembed did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ReembedResult {
    /// The store's embedding model now.
    pub model: String,
    /// Its dimension.
    pub dimension: usize,
    /// Whether the store moved to this model (false: it had it already, and only memories
    /// without a vector were embedded).
    pub switched: bool,
    /// How many memories were embedded.
    pub embedded: usize,
}

/// A reembed; await it to run it. Built by [`Memory::reembed`].
#[derive(Debug)]
#[must_use = "a request does nothing until awaited"]
pub struct ReembedRequest<'a> {
    memory: &'a Memory,
    embedder: Arc<dyn Embedder>,
    progress: Option<OnProgress>,
}

impl Memory {
    /// Embeds every memory with `embedder` and makes it this memory's embedder: how a store
    /// made without an embedder ([`MemoryBuilder::without_embedder`](crate::MemoryBuilder::without_embedder))
    /// gets vector and hybrid search, and how a store moves to another embedding model.
    /// Afterwards the store opens with `embedder` (or another instance of its model), and
    /// other handles still on the old model get a 409 that says to open it again. Called on
    /// a store already on `embedder`'s model, it embeds only the memories without a vector
    /// (the rest of an interrupted reembed). See [`crate::ops::reembed`] for how it runs.
    ///
    /// ```no_run
    /// # async fn run(embedder: std::sync::Arc<dyn memlane::Embedder>) -> memlane::Result<()> {
    /// use memlane::Memory;
    /// let memory = Memory::builder().path("agent.db").without_embedder().build().await?;
    /// memory.add("I'm vegetarian").user("alice").await?; // stored, found by keyword
    /// // embedder: Arc::new(MiniLm::load_default()?), an OpenAiEmbedder, one of your own
    /// memory.reembed(embedder).await?;
    /// let hits = memory.search("what does alice eat?").user("alice").await?; // hybrid now
    /// # Ok(()) }
    /// ```
    pub fn reembed(&self, embedder: Arc<dyn Embedder>) -> ReembedRequest<'_> {
        ReembedRequest {
            memory: self,
            embedder,
            progress: None,
        }
    }
}

impl ReembedRequest<'_> {
    /// Reports progress: [`Task::Reembed`] over the store's live memories, then the new
    /// index's [`Task::RebuildIndex`] (see [`progress`](crate::progress)).
    pub fn on_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(OnProgress::new(f));
        self
    }

    async fn send(self) -> Result<ReembedResult> {
        let memory = self.memory;
        let embedder = self.embedder;
        let model = embedder.model_id().to_owned();
        let dimension = embedder.dimension();
        if model.is_empty() || dimension == 0 {
            return Err(Error::invalid(format!(
                "an embedder needs a model id and a dimension to re-embed a store with; this \
                 one has {model:?} and {dimension}"
            )));
        }
        // This handle's writes wait until the store and the handle are on the new model;
        // its searches by vector are a 503 meanwhile.
        let _gate = memory.inner.gate.lock().await;
        let _flag = Reembedding::start(memory, &model)?;
        let store = &*memory.inner.store;
        let switched = switch(store, &model, dimension).await?;
        let among_all = Filter::all();
        let total = store
            .count(Among::new(&among_all, now(), true), usize::MAX)
            .await? as u64;
        let progress = self.progress.as_ref();
        report(progress, Task::Reembed, 0, total);
        let mut embedded = 0;
        let mut done = 0u64;
        let mut after = None;
        loop {
            let mut scan = Scan::new(Filter::all(), now(), REEMBED_CHUNK);
            scan.include_expired = true;
            scan.after = after;
            let page = store.scan(&scan).await?;
            done += page.rows.len() as u64;
            embedded += embed_missing(store, &*embedder, &model, page.rows).await?;
            // Done when the index is in: until then, one short.
            report(
                progress,
                Task::Reembed,
                done.min(total.saturating_sub(1)),
                total,
            );
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let space = open_space(
            &memory.inner.store,
            &memory.inner.home,
            Some(embedder),
            model.clone(),
            dimension,
            progress,
        )
        .await?;
        let index = space.index.clone();
        *memory
            .inner
            .space
            .write()
            .map_err(|_| Error::internal("vector space lock poisoned"))? = Arc::new(space);
        *memory
            .inner
            .model_seen
            .lock()
            .map_err(|_| Error::internal("model check lock poisoned"))? = None;
        if let Some(index) = index {
            tokio::task::spawn_blocking(move || index.save())
                .await
                .map_err(|e| Error::internal(format!("index save task failed: {e}")))??;
        }
        report(progress, Task::Reembed, total, total);
        Ok(ReembedResult {
            model,
            dimension,
            switched,
            embedded,
        })
    }
}

crate::ops::awaitable!(ReembedRequest, ReembedResult, "reembed");

/// Marks a memory as re-embedding while it lives (whether the reembed ends or fails).
struct Reembedding<'a>(&'a Memory);

impl<'a> Reembedding<'a> {
    fn start(memory: &'a Memory, model: &str) -> Result<Self> {
        *memory
            .inner
            .reembedding
            .lock()
            .map_err(|_| Error::internal("reembed lock poisoned"))? = Some(model.to_owned());
        Ok(Reembedding(memory))
    }
}

impl Drop for Reembedding<'_> {
    fn drop(&mut self) {
        if let Ok(mut flag) = self.0.inner.reembedding.lock() {
            *flag = None;
        }
    }
}

/// Moves the store to `model` unless it is on it: records the model, its dimension and a
/// new epoch (a saved vector index of the old model is then not loaded), and drops every
/// vector, in one transaction that expects the model it replaces.
async fn switch(store: &dyn Store, model: &str, dimension: usize) -> Result<bool> {
    let current = store.meta(META_MODEL).await?.unwrap_or_default();
    let current_dimension = store.meta(META_DIMENSION).await?.unwrap_or_default();
    if current == model && current_dimension == dimension.to_string() {
        return Ok(false);
    }
    let epoch = store
        .meta(META_EPOCH)
        .await?
        .and_then(|e| e.parse::<u64>().ok())
        .unwrap_or(0)
        + 1;
    let meta = |key: &str, value: String| Write::Meta {
        key: key.to_owned(),
        value,
        log: false,
        at: now(),
    };
    let writes = vec![
        Write::ExpectMeta {
            key: META_MODEL.to_owned(),
            value: current,
        },
        meta(META_MODEL, model.to_owned()),
        meta(META_DIMENSION, dimension.to_string()),
        meta(META_EPOCH, epoch.to_string()),
        Write::DropVectors,
    ];
    apply(store, WriteBatch::new(writes, 0)).await?;
    tracing::info!(target: "memlane", model, dimension, "store moved to a new embedding model");
    Ok(true)
}

/// Embeds the rows without a vector and writes their vectors; returns how many. A row
/// that moved meanwhile is read again (and one deleted is left out).
async fn embed_missing(
    store: &dyn Store,
    embedder: &dyn Embedder,
    model: &str,
    mut rows: Vec<Row>,
) -> Result<usize> {
    for attempt in 0.. {
        let ids: Vec<uuid::Uuid> = rows.iter().map(|row| row.record.id).collect();
        let embedded: HashSet<uuid::Uuid> = store
            .vectors(VectorQuery::Of(&ids))
            .await?
            .into_iter()
            .map(|v| v.id)
            .collect();
        rows.retain(|row| !embedded.contains(&row.record.id) && row.deleted_at.is_none());
        if rows.is_empty() {
            return Ok(0);
        }
        let texts: Vec<String> = rows.iter().map(|row| row.record.indexed_text()).collect();
        let vectors = embed_unit(embedder, &texts, EmbedMode::Document).await?;
        let mut writes = vec![Write::ExpectMeta {
            key: META_MODEL.to_owned(),
            value: model.to_owned(),
        }];
        for (row, vector) in rows.iter().zip(vectors) {
            writes.push(Write::Vector {
                id: row.record.id,
                vector,
                expect: row.version,
            });
        }
        match apply(store, WriteBatch::new(writes, 0)).await {
            Ok(_) => return Ok(rows.len()),
            // A memory changed or deleted since it was read: read them again. (A new model
            // meanwhile fails again below, and is returned.)
            Err(Error::Conflict { .. } | Error::NotFound { .. }) if attempt + 1 < RETRIES => {
                if store.meta(META_MODEL).await?.unwrap_or_default() != model {
                    break;
                }
                rows = store.rows(&ids).await?;
            }
            Err(e) => return Err(e),
        }
    }
    let now_model = store.meta(META_MODEL).await?;
    Err(crate::store::meta_moved(
        META_MODEL,
        model,
        now_model.as_deref(),
    ))
}
