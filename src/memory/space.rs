//! What a memory embeds with: its embedder (or none), the store's embedding model as this
//! handle opened it, and the vector index and candidate source that go with them; how they
//! are opened, checked against the store, and replaced by `reembed`.

use std::path::PathBuf;
use std::sync::Arc;

use super::{set_meta, Memory};
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::index::{IndexParams, VectorIndex};
use crate::progress::OnProgress;
use crate::retrieve::candidates::InProcess;
use crate::store::{CandidateSource, Store, META_DIMENSION, META_EPOCH, META_MODEL};

/// What a memory embeds with and searches vectors in.
pub(crate) struct Space {
    /// The embedder; `None` for a memory without one (keyword search only).
    pub(crate) embedder: Option<Arc<dyn Embedder>>,
    /// The store's embedding model as this handle opened it (empty: none), stated by every
    /// write of vectors (a precondition checked in the transaction).
    pub(crate) model: String,
    /// The store's vector dimension (0 without a model).
    pub(crate) dimension: usize,
    /// The in-process vector index, for stores searched in process that have an embedder
    /// (`None` for a store that searches in its database, and without an embedder).
    pub(crate) index: Option<Arc<VectorIndex>>,
    /// Where searches get their candidates.
    pub(crate) candidates: Arc<dyn CandidateSource>,
}

/// Where a memory's vector index is saved, and with what parameters.
#[derive(Debug)]
pub(crate) struct IndexHome {
    pub(crate) params: IndexParams,
    pub(crate) dir: Option<PathBuf>,
    pub(crate) store_id: String,
}

/// The vector space of an embedder (or none) on a store whose model is `model`: its index
/// opened (loaded, or rebuilt from the store's vectors) when the store is searched in
/// process and there is an embedder to search it with.
pub(crate) async fn open_space(
    store: &Arc<dyn Store>,
    home: &IndexHome,
    embedder: Option<Arc<dyn Embedder>>,
    model: String,
    dimension: usize,
    progress: Option<&OnProgress>,
) -> Result<Space> {
    let (index, candidates) = match (store.candidate_source(), &embedder) {
        // The store searches in its database: no in-process index to keep fresh.
        (Some(candidates), _) => (None, candidates),
        (None, None) => (
            None,
            Arc::new(InProcess {
                store: Arc::clone(store),
                index: None,
            }) as Arc<dyn CandidateSource>,
        ),
        (None, Some(_)) => {
            // A saved index belongs to one embedding model: after a re-embedding, one
            // saved before it (of the same dimension) is not loaded.
            let epoch = store.meta(META_EPOCH).await?.unwrap_or_default();
            let index_id = match epoch.as_str() {
                "" | "0" => home.store_id.clone(),
                epoch => format!("{}#{epoch}", home.store_id),
            };
            let index = VectorIndex::open(
                &**store,
                dimension,
                home.params,
                home.dir.clone(),
                index_id,
                progress,
            )
            .await?;
            let candidates: Arc<dyn CandidateSource> = Arc::new(InProcess {
                store: Arc::clone(store),
                index: Some(Arc::clone(&index)),
            });
            (Some(index), candidates)
        }
    };
    Ok(Space {
        embedder,
        model,
        dimension,
        index,
        candidates,
    })
}

/// The local MiniLM, loaded once per process (the first load reports to `progress`).
#[cfg(feature = "local-embed")]
pub(super) async fn default_embedder(progress: Option<OnProgress>) -> Result<Arc<dyn Embedder>> {
    use std::sync::Mutex;
    static SHARED: Mutex<Option<crate::MiniLm>> = Mutex::new(None);
    tokio::task::spawn_blocking(move || {
        let mut slot = SHARED
            .lock()
            .map_err(|_| Error::internal("embedder cache lock poisoned"))?;
        if let Some(model) = slot.as_ref() {
            return Ok(Arc::new(model.clone()) as Arc<dyn Embedder>);
        }
        let model = crate::MiniLm::load_default_reporting(progress.as_ref())?;
        *slot = Some(model.clone());
        Ok(Arc::new(model) as Arc<dyn Embedder>)
    })
    .await
    .map_err(|e| Error::internal(format!("embedder load task failed: {e}")))?
}

#[cfg(not(feature = "local-embed"))]
pub(super) async fn default_embedder(_progress: Option<OnProgress>) -> Result<Arc<dyn Embedder>> {
    Err(Error::NotConfigured {
        detail: "no embedder is configured, and this build has no local one: pass one to \
                 Memory::builder().embedder(…) (OpenAiEmbedder, say), or enable memlane's \
                 `local-embed` feature"
            .into(),
    })
}

/// Records the embedder (or that there is none) on a new store; on an existing one,
/// returns the store's model and dimension, and refuses an embedder of another model (409):
/// vectors of different models cannot be compared. A memory without an embedder opens any
/// store (it searches by keyword, and can move the store to a model with `reembed`).
pub(super) async fn check_model(
    store: &dyn Store,
    embedder: Option<&dyn Embedder>,
) -> Result<(String, usize)> {
    let (id, dimension) = embedder.map_or((String::new(), 0), |e| {
        (e.model_id().to_owned(), e.dimension())
    });
    let stored_dimension = match store.meta(META_DIMENSION).await? {
        Some(d) => Some(d.parse::<usize>().map_err(|_| {
            Error::internal(format!("stored embedding dimension {d:?} is not a number"))
        })?),
        None => None,
    };
    let Some(stored_dimension) = stored_dimension else {
        set_meta(store, META_MODEL, &id).await?;
        set_meta(store, META_DIMENSION, &dimension.to_string()).await?;
        return Ok((id, dimension));
    };
    let model = store.meta(META_MODEL).await?.unwrap_or_default();
    if embedder.is_none() || (model == id && stored_dimension == dimension) {
        return Ok((model, stored_dimension));
    }
    if model == id {
        return Err(Error::DimensionMismatch {
            expected: stored_dimension,
            actual: dimension,
        });
    }
    let detail = if model.is_empty() {
        format!(
            "this store has no embedding model yet (it was made without an embedder), so it \
             cannot be opened with {id:?} as it is: open it without one \
             (MemoryBuilder::without_embedder) and call reembed(embedder) to embed its memories"
        )
    } else {
        format!(
            "this store was written with embedding model {model:?}, not {id:?}; vectors of \
             different models cannot be compared: open it with the same embedder, or move it \
             to the new one by opening it without an embedder \
             (MemoryBuilder::without_embedder) and calling reembed(embedder)"
        )
    };
    Err(Error::Conflict { detail })
}

/// The 503 of an operation that needs an embedder, on a memory without one.
pub(crate) fn no_embedder(what: &str) -> Error {
    Error::NotConfigured {
        detail: format!(
            "{what} needs an embedder, and this memory has none: give one to \
             Memory::builder().embedder(…) (or use the default local MiniLM, feature \
             `local-embed`), or call reembed(embedder) to embed a store made without one; \
             keyword search works without"
        ),
    }
}

impl Memory {
    /// The embedding model, index and candidates in use now.
    pub(crate) fn space(&self) -> Arc<Space> {
        match self.inner.space.read() {
            Ok(space) => Arc::clone(&space),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// The embedder, or the 503 of a memory without one.
    pub(crate) fn require_embedder(&self, what: &str) -> Result<Arc<dyn Embedder>> {
        self.space()
            .embedder
            .clone()
            .ok_or_else(|| no_embedder(what))
    }

    /// Checks, before a search by vector, that the store's embedding model is still the one
    /// this handle embeds queries with (another handle may have re-embedded it): a 409 that
    /// says to open the store again otherwise. Read once per change of the store.
    pub(crate) async fn check_space(&self, space: &Space) -> Result<()> {
        let token = self.inner.store.change_token();
        let seen = || {
            self.inner
                .model_seen
                .lock()
                .map_err(|_| Error::internal("model check lock poisoned"))
        };
        if token.is_some() && *seen()? == token {
            return Ok(());
        }
        let model = self.inner.store.meta(META_MODEL).await?;
        if model.as_deref().unwrap_or_default() != space.model {
            let reembedding = self
                .inner
                .reembedding
                .lock()
                .map_err(|_| Error::internal("reembed lock poisoned"))?
                .clone();
            if let Some(new) = reembedding {
                return Err(Error::Unavailable {
                    detail: format!(
                        "this memory is being re-embedded with {new:?}: searches by vector \
                         resume when that ends; keyword search works meanwhile"
                    ),
                });
            }
            return Err(crate::store::model_moved(
                &space.model,
                model.as_deref().unwrap_or_default(),
                "",
            ));
        }
        *seen()? = token;
        Ok(())
    }
}
