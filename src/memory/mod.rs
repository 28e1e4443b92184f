//! The [`Memory`] handle and its builder.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tracing::Instrument;

use uuid::Uuid;

use crate::embed::{EmbedMode, Embedder};
use crate::error::{Error, Result};
use crate::index::IndexParams;
use crate::llm::Llm;
use crate::progress::{OnProgress, Progress};
use crate::record::now;
use crate::rerank::Reranker;
use crate::retrieve::Calibration;
use crate::store::{
    apply, SqliteStore, Store, Write, WriteBatch, WriteOutcome, META_MODEL, META_STORE_ID,
};

mod space;

use space::{check_model, default_embedder};
pub(crate) use space::{no_embedder, open_space, IndexHome, Space};

/// The tracing span of one public operation: target `memlane`, level INFO, named after the
/// operation, with the project (when opened through `Projects`) and, recorded as the
/// operation ends, `count` (what it returned or changed) and `k` (a search's `top_k`).
/// Spans carry no memory text, query or secret. Its children: `model` (a language model
/// call, with its token counts), `embed`, `commit` with `store` and `index`.
macro_rules! op_span {
    ($op:literal, $memory:expr) => {
        tracing::info_span!(
            target: "memlane",
            $op,
            project = $memory.inner.project.as_deref(),
            count = tracing::field::Empty,
            k = tracing::field::Empty,
        )
    };
}
pub(crate) use op_span;

/// The memory engine: a cheap, cloneable handle to one store, its vector index and its
/// embedder. Clone it freely; every clone shares the same state.
///
/// ```no_run
/// # async fn run() -> memlane::Result<()> {
/// use memlane::Memory;
/// let memory = Memory::open("agent.db").await?;
/// memory.add("I'm vegetarian and allergic to nuts").user("alice").infer(false).await?;
/// let hits = memory.search("what can alice eat?").user("alice").top_k(3).await?;
/// for hit in hits.results {
///     println!("{:.2}  {}", hit.score, hit.record.memory);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Memory {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) store: Arc<dyn Store>,
    /// The embedding model, its index and the candidate source: replaced together by
    /// [`Memory::reembed`].
    pub(crate) space: std::sync::RwLock<Arc<Space>>,
    /// Where and how an index is opened (again by `reembed`).
    pub(crate) home: IndexHome,
    /// The store's change token when its embedding model was last seen to be `space`'s.
    pub(crate) model_seen: std::sync::Mutex<Option<u64>>,
    /// The store's count of negative feedback, and the change token it was read at.
    pub(crate) negative_seen: std::sync::Mutex<Option<(u64, u64)>>,
    /// The model this handle is re-embedding the store with, while it does.
    pub(crate) reembedding: std::sync::Mutex<Option<String>>,
    pub(crate) reranker: Option<Arc<dyn Reranker>>,
    /// How signals become scores.
    pub(crate) calibration: Calibration,
    pub(crate) llm: Option<Arc<dyn Llm>>,
    /// Serialises commit + index insert, so that the index sees keys in commit order.
    pub(crate) gate: Arc<tokio::sync::Mutex<()>>,
    /// Woken after every commit, for event streams.
    pub(crate) changed: tokio::sync::Notify,
    /// Held across a configuration's read and write (`put_config` merges fields).
    pub(crate) config_lock: tokio::sync::Mutex<()>,
    /// The project this memory is, when opened by [`Projects`](crate::Projects): named in
    /// the tracing span of every operation.
    pub(crate) project: Option<String>,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let space = self.space();
        f.debug_struct("Memory")
            .field("store", &self.inner.store)
            .field("embedder", &space.embedder)
            .field("params", &self.inner.home.params)
            .finish_non_exhaustive()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle is gone: persist what the index learned since its last save, so the
        // next open need not re-insert it. Failure only costs that re-insertion, so it is
        // logged, not returned (`Memory::close` returns it). Inside a tokio runtime the save
        // runs on its blocking pool, so the thread that drops the last handle never waits on
        // the disk; a runtime shutting down before the pool starts it drops it (tokio runs
        // queued blocking tasks only if they are mandatory), which costs the next open the
        // same re-insertion as a killed process. A handle opened on the
        // same files meanwhile reads the saved generation or replays the change log, as a
        // second process would. A graph still loading is left to load: the saved generation
        // and the change log already hold everything, and waiting could take seconds.
        let space = match self.space.get_mut() {
            Ok(space) => space,
            Err(poisoned) => poisoned.into_inner(),
        };
        let Some(index) = space.index.clone() else {
            return;
        };
        if index.unsaved().unwrap_or(0) == 0 || !index.graph_ready().unwrap_or(false) {
            return;
        }
        let save = move || {
            if let Err(e) = index.save() {
                tracing::warn!(error = %e, "could not save the vector index on close");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(save)),
            Err(_) => save(),
        }
    }
}

/// A rebuild of the vector index; await it to run it. Built by [`Memory::rebuild_index`].
#[must_use = "a request does nothing until awaited"]
#[derive(Debug)]
pub struct RebuildIndexRequest<'a> {
    memory: &'a Memory,
    progress: Option<OnProgress>,
}

impl RebuildIndexRequest<'_> {
    /// Reports the rebuild's progress (see [`progress`](crate::progress)).
    pub fn on_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(OnProgress::new(f));
        self
    }

    async fn send(self) -> Result<()> {
        let memory = self.memory;
        let _gate = memory.inner.gate.lock().await;
        let Some(index) = &memory.space().index else {
            return Ok(());
        };
        index
            .rebuild(&*memory.inner.store, self.progress.as_ref())
            .await?;
        memory.save_index_locked().await
    }
}

impl<'a> std::future::IntoFuture for RebuildIndexRequest<'a> {
    type Output = Result<()>;
    type IntoFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        let span = op_span!("rebuild_index", self.memory);
        Box::pin(self.send().instrument(span))
    }
}

/// A memory id given as a [`Uuid`] or as text (parsed, 400 if malformed).
#[derive(Debug, Clone)]
pub enum MemoryId {
    /// An id.
    Uuid(Uuid),
    /// Text to parse as an id.
    Text(String),
}

impl MemoryId {
    pub(crate) fn parse(self) -> Result<Uuid> {
        match self {
            MemoryId::Uuid(u) => Ok(u),
            MemoryId::Text(t) => Uuid::parse_str(t.trim()).map_err(|_| {
                Error::invalid_field("memory_id", format!(
                    "memory id {:?} is not a UUID (expected the form 123e4567-e89b-12d3-a456-426614174000)",
                    t.chars().take(64).collect::<String>()
                ))
            }),
        }
    }
}

impl From<Uuid> for MemoryId {
    fn from(u: Uuid) -> Self {
        MemoryId::Uuid(u)
    }
}

impl From<&Uuid> for MemoryId {
    fn from(u: &Uuid) -> Self {
        MemoryId::Uuid(*u)
    }
}

impl From<&str> for MemoryId {
    fn from(s: &str) -> Self {
        MemoryId::Text(s.to_owned())
    }
}

impl From<String> for MemoryId {
    fn from(s: String) -> Self {
        MemoryId::Text(s)
    }
}

/// Builds a [`Memory`].
///
/// ## Defaults
/// - store: an in-memory SQLite database, or the SQLite file given to [`path`](Self::path);
/// - embedder: the local all-MiniLM-L6-v2 model (feature `local-embed`), loaded once per
///   process; none with [`without_embedder`](Self::without_embedder) (keyword search, no
///   model file);
/// - index parameters: [`IndexParams::default`];
/// - index directory: `<path>.index` next to the database file; none (rebuilt on open) for
///   in-memory and custom stores unless [`index_dir`](Self::index_dir) is set;
/// - reranker: none;
/// - score calibration: [`Calibration::FITTED`] (fitted for the default embedder);
/// - language model: none (`add` with inference and `extract` are a 503 until one is set).
#[derive(Debug, Default)]
#[must_use]
pub struct MemoryBuilder {
    path: Option<PathBuf>,
    store: Option<Arc<dyn Store>>,
    #[cfg(feature = "postgres")]
    postgres: Option<String>,
    embedder: Option<Arc<dyn Embedder>>,
    params: IndexParams,
    index_dir: Option<PathBuf>,
    reranker: Option<Arc<dyn Reranker>>,
    calibration: Calibration,
    llm: Option<Arc<dyn Llm>>,
    project: Option<String>,
    progress: Option<OnProgress>,
    without_embedder: bool,
}

impl MemoryBuilder {
    /// Names the project in the operations' tracing spans (set by `Projects`).
    pub(crate) fn project(mut self, id: &str) -> Self {
        self.project = Some(id.to_owned());
        self
    }

    /// Extracts, reconciles and merges memories with this language model.
    pub fn llm(mut self, llm: Arc<dyn Llm>) -> Self {
        self.llm = Some(llm);
        self
    }

    /// Stores memories in the SQLite file at `path` (created if missing).
    pub fn path(mut self, path: impl AsRef<Path>) -> Self {
        self.path = Some(path.as_ref().to_path_buf());
        self
    }

    /// Stores memories on a PostgreSQL server with pgvector (feature `postgres`), in the
    /// default project's schema: `url` is a `postgresql://` URL or a libpq `key=value`
    /// string. Every process and host that opens the same database shares its memories,
    /// and sees each other's writes at once. For another project, or another pool size,
    /// give [`store`](Self::store) a [`PostgresStore`](crate::store::PostgresStore).
    #[cfg(feature = "postgres")]
    pub fn postgres(mut self, url: impl Into<String>) -> Self {
        self.postgres = Some(url.into());
        self
    }

    /// Stores memories in a store of your own.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Embeds texts with this embedder.
    pub fn embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// Opens the memory without an embedder, so that no model file is needed: memories are
    /// stored without vectors, searches rank by keyword (BM25, the default mode here), and
    /// vector and hybrid searches are a 503. On a store with an embedding model, vectors
    /// are left as they are; adding and changing memories then needs that model's
    /// embedder. [`Memory::reembed`] gives the memory an embedder later, and embeds every
    /// memory with it.
    pub fn without_embedder(mut self) -> Self {
        self.without_embedder = true;
        self
    }

    /// Re-scores the best candidates of every text search (see [`Reranker`]). None by default.
    pub fn reranker(mut self, reranker: Arc<dyn Reranker>) -> Self {
        self.reranker = Some(reranker);
        self
    }

    /// Turns search signals into scores with these models (see [`Calibration`]). The
    /// default, [`Calibration::FITTED`], is fitted for the default embedder,
    /// all-MiniLM-L6-v2: with another embedder, whose cosines spread differently, fit
    /// models of your own (`examples/calibrate/main.rs` shows how) for scores that keep their
    /// meaning. Ranking works either way; thresholds are what calibration is for.
    pub fn calibration(mut self, calibration: Calibration) -> Self {
        self.calibration = calibration;
        self
    }

    /// Reports the progress of opening: the default embedder's download, when its files
    /// come from the hub (feature `hub`; the first open in a process), and the vector
    /// index's rebuild from the store, when no sound saved index is found (a new index
    /// directory, a damaged one, a store written by another tool). See
    /// [`progress`](crate::progress).
    pub fn on_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(OnProgress::new(f));
        self
    }

    /// Sets the vector index parameters.
    pub fn index_params(mut self, params: IndexParams) -> Self {
        self.params = params;
        self
    }

    /// Persists the vector index in this directory.
    pub fn index_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.index_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Opens the store, checks it matches the embedder, and loads (or rebuilds) the index.
    pub async fn build(self) -> Result<Memory> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::NotConfigured {
                detail: "memlane runs its storage and index work on tokio's blocking pool: \
                         build and use Memory inside a tokio runtime"
                    .into(),
            });
        }
        self.params.validate()?;
        self.calibration.check()?;
        #[cfg(feature = "postgres")]
        let store = match self.postgres {
            Some(url) => {
                Some(Arc::new(crate::store::PostgresStore::connect(&url).await?) as Arc<dyn Store>)
            }
            None => self.store,
        };
        #[cfg(not(feature = "postgres"))]
        let store = self.store;
        if self.path.is_some() && store.is_some() {
            return Err(Error::invalid(
                "give the builder one place for memories: a path, a PostgreSQL server or a \
                 store",
            ));
        }
        let index_dir = self.index_dir.or_else(|| {
            self.path.as_ref().map(|p| {
                let mut name = p.as_os_str().to_owned();
                name.push(".index");
                PathBuf::from(name)
            })
        });
        let store: Arc<dyn Store> = match (store, self.path) {
            (Some(s), _) => s,
            (None, Some(path)) => Arc::new(
                tokio::task::spawn_blocking(move || SqliteStore::open(path))
                    .await
                    .map_err(|e| Error::internal(format!("store open task failed: {e}")))??,
            ),
            (None, None) => Arc::new(SqliteStore::in_memory()?),
        };
        let embedder = match self.embedder {
            Some(e) => Some(e),
            None if self.without_embedder => None,
            None => Some(default_embedder(self.progress.clone()).await?),
        };
        let (model, dimension) = check_model(&*store, embedder.as_deref()).await?;
        let store_id = match store.meta(META_STORE_ID).await? {
            Some(id) => id,
            None => {
                let id = Uuid::new_v4().to_string();
                set_meta(&*store, META_STORE_ID, &id).await?;
                id
            }
        };
        let home = IndexHome {
            params: self.params,
            dir: index_dir,
            store_id,
        };
        let space = open_space(
            &store,
            &home,
            embedder,
            model,
            dimension,
            self.progress.as_ref(),
        )
        .await?;
        Ok(Memory {
            inner: Arc::new(Inner {
                store,
                space: std::sync::RwLock::new(Arc::new(space)),
                home,
                model_seen: std::sync::Mutex::new(None),
                negative_seen: std::sync::Mutex::new(None),
                reembedding: std::sync::Mutex::new(None),
                reranker: self.reranker,
                calibration: self.calibration,
                llm: self.llm,
                gate: Arc::new(tokio::sync::Mutex::new(())),
                changed: tokio::sync::Notify::new(),
                config_lock: tokio::sync::Mutex::new(()),
                project: self.project,
            }),
        })
    }
}

/// Sets a store metadata value (not logged).
pub(crate) async fn set_meta(store: &dyn Store, key: &str, value: &str) -> Result<()> {
    let write = Write::Meta {
        key: key.to_owned(),
        value: value.to_owned(),
        log: false,
        at: now(),
    };
    apply(store, WriteBatch::new(vec![write], 0))
        .await
        .map(drop)
}

impl Memory {
    /// Saves what the vector index learned since its last save, on tokio's blocking pool,
    /// and returns its error, if any; then drops this handle (other clones keep working, and
    /// the store is closed when the last one goes). Dropping the last handle saves too, in
    /// the background, and only logs a failure: close a handle when you want to know.
    pub async fn close(self) -> Result<()> {
        let Some(index) = self.space().index.clone() else {
            return Ok(());
        };
        // No commit installs keys in the index while it is written out.
        let _gate = self.inner.gate.lock().await;
        if index.unsaved()? == 0 {
            return Ok(());
        }
        tokio::task::spawn_blocking(move || index.save())
            .await
            .map_err(|e| Error::internal(format!("index save task failed: {e}")))?
    }

    /// Opens (or creates) the memory store in the SQLite file at `path`, with the default
    /// embedder and index.
    pub async fn open(path: impl AsRef<Path>) -> Result<Memory> {
        Memory::builder().path(path).build().await
    }

    /// A memory that lives in process memory only, with the default embedder.
    pub async fn in_memory() -> Result<Memory> {
        Memory::builder().build().await
    }

    /// A builder for everything else.
    pub fn builder() -> MemoryBuilder {
        MemoryBuilder::default()
    }

    /// The language model in use, if any.
    pub fn llm(&self) -> Option<&Arc<dyn Llm>> {
        self.inner.llm.as_ref()
    }

    /// The embedder in use, if any (see [`MemoryBuilder::without_embedder`]).
    pub fn embedder(&self) -> Option<Arc<dyn Embedder>> {
        self.space().embedder.clone()
    }

    /// The store in use.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The credit balance.
    #[tracing::instrument(name = "credits", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn credits(&self) -> Result<u64> {
        Ok(self.inner.store.counters().await?.credits)
    }

    /// Adds credits to the balance and returns the new balance.
    #[tracing::instrument(name = "add_credits", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn add_credits(&self, amount: u64) -> Result<u64> {
        let batch = WriteBatch::new(vec![Write::Credit(amount)], 0);
        Ok(apply(&*self.inner.store, batch).await?.credits_remaining)
    }

    /// Writes the vector index to disk now (it is also written when the last handle is
    /// dropped, and automatically as it grows).
    #[tracing::instrument(name = "save_index", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn save_index(&self) -> Result<()> {
        let _gate = self.inner.gate.lock().await;
        self.save_index_locked().await
    }

    async fn save_index_locked(&self) -> Result<()> {
        let Some(index) = self.space().index.clone() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || index.save())
            .await
            .map_err(|e| Error::internal(format!("index save task failed: {e}")))?
    }

    /// Waits until the vector index's graph is in memory.
    ///
    /// Opening a store whose saved index is large returns once the index's state is read:
    /// the graph itself (12 to 22 s at a million memories on two cores) loads on a thread
    /// of its own. Meanwhile every search is answered, exactly: searches within
    /// `exact_search_max` memories (one user's, typically) as fast as ever, larger ones by
    /// a full scan. Call this at start-up when the first large searches must be fast.
    pub async fn wait_for_index(&self) -> Result<()> {
        let Some(index) = self.space().index.clone() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || index.wait_for_graph())
            .await
            .map_err(|e| Error::internal(format!("index wait task failed: {e}")))?
    }

    /// Rebuilds the vector index from the store, dropping the points of deleted and updated
    /// memories; await it to run it. Searches keep working meanwhile; writes wait.
    /// [`on_progress`](RebuildIndexRequest::on_progress) follows it.
    pub fn rebuild_index(&self) -> RebuildIndexRequest<'_> {
        RebuildIndexRequest {
            memory: self,
            progress: None,
        }
    }

    /// Whether the vector index's saved graph is still loading in the background (see
    /// [`wait_for_index`](Self::wait_for_index)): a readiness check that never blocks.
    /// Searches are answered meanwhile, exactly.
    pub fn index_loading(&self) -> bool {
        self.space()
            .index
            .as_ref()
            .is_some_and(|index| !index.graph_ready().unwrap_or(true))
    }

    /// How many points the index holds for deleted or superseded memories.
    pub fn index_dead_points(&self) -> usize {
        self.space()
            .index
            .as_ref()
            .map_or(0, |index| index.dead_count().unwrap_or(0))
    }

    /// Embeds texts as documents and normalises the vectors.
    pub(crate) async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.embed_texts(texts, EmbedMode::Document).await
    }

    pub(crate) async fn embed_texts(
        &self,
        texts: &[String],
        mode: EmbedMode,
    ) -> Result<Vec<Vec<f32>>> {
        let space = self.space();
        let Some(embedder) = &space.embedder else {
            if mode == EmbedMode::Document && space.model.is_empty() {
                // A store without an embedding model keeps memories without vectors.
                return Ok(vec![Vec::new(); texts.len()]);
            }
            if mode == EmbedMode::Document {
                return Err(Error::Conflict {
                    detail: format!(
                        "this store embeds memories with model {:?}, and this memory has no \
                         embedder: open it with that model's embedder to add or change \
                         memories (without one, it can read, search by keyword, delete, and \
                         reembed)",
                        space.model
                    ),
                });
            }
            return Err(no_embedder("searching by meaning"));
        };
        let span = tracing::debug_span!("embed", texts = texts.len());
        crate::embed::embed_unit(&**embedder, texts, mode)
            .instrument(span)
            .await
    }

    /// Commits a batch (see [`apply`]) and brings the index up to date.
    ///
    /// The work runs in a task of its own holding the write gate: if the caller stops
    /// waiting (a timeout, a dropped request), the commit and its index update still finish
    /// together. When another writer committed since the index last caught up, the index
    /// replays the change log first (see [`VectorIndex::refresh`]); otherwise the batch's
    /// own vectors go in directly.
    pub(crate) async fn commit(&self, mut batch: WriteBatch) -> Result<WriteOutcome> {
        let this = self.clone();
        let space = self.space();
        let embeds = batch.writes.iter().any(|w| match w {
            Write::Insert(_) => true,
            Write::Update(update) => update.text.is_some(),
            _ => false,
        });
        if embeds {
            // The vectors are of the model this handle opened the store with: refused if
            // another handle moved the store to another model meanwhile.
            batch.writes.insert(
                0,
                Write::ExpectMeta {
                    key: META_MODEL.to_owned(),
                    value: space.model.clone(),
                },
            );
        }
        let span = tracing::debug_span!("commit", writes = batch.writes.len());
        let task = async move {
            let _gate = Arc::clone(&this.inner.gate).lock_owned().await;
            let vectors: std::collections::HashMap<Uuid, Vec<f32>> = batch
                .writes
                .iter()
                .filter_map(|write| match write {
                    Write::Insert(new) => Some((new.record.id, new.vector.clone())),
                    Write::Update(update) => {
                        update.text.as_ref().map(|(_, v)| (update.id, v.clone()))
                    }
                    _ => None,
                })
                .collect();
            let outcome = apply(&*this.inner.store, batch)
                .instrument(tracing::debug_span!("store"))
                .await?;
            this.inner.changed.notify_waiters();
            if let Some(index) = &space.index {
                index
                    .apply_own(&*this.inner.store, &outcome, vectors)
                    .instrument(tracing::debug_span!("index"))
                    .await?;
            }
            this.maybe_autosave().await;
            Ok(outcome)
        };
        tokio::spawn(task.instrument(span))
            .await
            .map_err(|e| Error::internal(format!("write task failed: {e}")))?
    }

    /// Saves the index when it has grown enough since the last save that re-inserting it on
    /// the next open would cost more than saving now. The caller holds the gate.
    async fn maybe_autosave(&self) {
        let Some(index) = self.space().index.clone() else {
            return;
        };
        let unsaved = index.unsaved().unwrap_or(0);
        let total = index.live_count().unwrap_or(0) + index.dead_count().unwrap_or(0);
        // While the graph loads, a save would wait for it with the gate held; the next
        // add after it is in saves instead.
        if unsaved >= 20_000.max(total / 2) && index.graph_ready().unwrap_or(false) {
            if let Err(e) = self.save_index_locked().await {
                tracing::warn!(error = %e, "could not save the vector index");
            }
        }
    }
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Memory>();
};
