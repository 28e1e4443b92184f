//! The operations of [`Memory`](crate::Memory), one file each: the request, its result and
//! its tests.
//!
//! # A tour
//!
//! Requests are builders: set what you need, then `.await` them. Every error is a
//! [`crate::Error`] with an HTTP-style status. (A hashing embedder, feature `test-util`, keeps
//! this example free of model files; [`Memory::open`](crate::Memory::open) uses the local
//! MiniLM.)
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> memlane::Result<()> {
//! use std::sync::Arc;
//!
//! use memlane::store::FeedbackKind;
//! use memlane::{HashEmbedder, Memory};
//! use serde_json::json;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let memory = Memory::builder()
//!     .path(dir.path().join("agent.db"))
//!     .embedder(Arc::new(HashEmbedder::new(64)))
//!     .build()
//!     .await?;
//!
//! // add: stored verbatim here (no language model); each result names its event.
//! let added = memory
//!     .add("I live in Madrid")
//!     .user("carlos")
//!     .metadata(json!({"source": "chat"}))
//!     .categories(["home"])
//!     .await?;
//! let id = added.results[0].id;
//!
//! // search: the owner's best matches, with metadata and category filters.
//! let hits = memory
//!     .search("where does he live?")
//!     .user("carlos")
//!     .categories(["home"])
//!     .top_k(3)
//!     .await?;
//! assert_eq!(hits.results[0].record.id, id);
//!
//! // update keeps the id and records the change; history lists every change.
//! memory.update(id).text("I live in Valencia").await?;
//! let history = memory.history(id).await?;
//! assert_eq!(history.len(), 2); // ADD, then UPDATE
//! assert_eq!(history[1].old_memory.as_deref(), Some("I live in Madrid"));
//!
//! // list pages through an owner's memories; get reads one.
//! let page = memory.list().user("carlos").page_size(50).await?;
//! assert_eq!(page.results.len(), 1);
//! assert_eq!(memory.get(id).await?.memory, "I live in Valencia");
//!
//! // feedback: a negative mark halves the memory's search score.
//! memory.feedback(id, Some(FeedbackKind::Negative), Some("outdated")).await?;
//!
//! // export and import move memories between stores (vectors included).
//! let export = memory.export().user("carlos").await?;
//! assert_eq!(export.memories.len(), 1);
//!
//! // delete is soft (the history stays); delete_all removes an owner's memories.
//! memory.delete(id).await?;
//! assert_eq!(memory.get(id).await.unwrap_err().status(), 404);
//! memory.add("I'm learning to surf").user("carlos").await?;
//! let gone = memory.delete_all().user("carlos").await?;
//! assert_eq!(gone.deleted.len(), 1);
//! # Ok(()) }
//! ```

pub mod add;
mod config;
pub mod consolidate;
mod credits;
pub mod delete;
pub mod engine;
pub mod entities;
pub mod events;
pub mod export;
pub mod extract;
pub mod feedback;
pub mod get;
pub mod list;
pub mod reembed;
mod restore;
pub mod search;
pub mod update;

/// Makes a request type awaitable by running its `send` method inside the operation's
/// tracing span (see [`op_span`]).
macro_rules! awaitable {
    ($request:ident, $output:ty, $op:literal) => {
        impl<'a> std::future::IntoFuture for $request<'a> {
            type Output = $crate::error::Result<$output>;
            type IntoFuture =
                std::pin::Pin<Box<dyn std::future::Future<Output = Self::Output> + Send + 'a>>;

            fn into_future(self) -> Self::IntoFuture {
                let span = $crate::ops::op_span!($op, self.memory);
                Box::pin(tracing::Instrument::instrument(
                    async move {
                        let output = self.send().await;
                        if let Ok(output) = &output {
                            $crate::ops::counted($crate::ops::Counted::count(output));
                        }
                        output
                    },
                    span,
                ))
            }
        }
    };
}

/// Records in the current operation's span how many things it returned or changed.
pub(crate) fn counted(count: usize) {
    tracing::Span::current().record("count", count as u64);
}

/// How many things an operation's result holds, for its span's `count`.
pub(crate) trait Counted {
    fn count(&self) -> usize;
}

macro_rules! counted_by {
    ($($ty:ty => |$r:ident| $count:expr),* $(,)?) => {
        $(impl Counted for $ty {
            fn count(&self) -> usize {
                let $r = self;
                $count
            }
        })*
    };
}

counted_by! {
    add::AddResult => |r| r.results.len(),
    search::SearchResult => |r| r.results.len(),
    crate::record::Page<crate::record::MemoryRecord> => |r| r.results.len(),
    crate::record::Page<crate::store::Entity> => |r| r.results.len(),
    export::Export => |r| r.memories.len(),
    export::ImportResult => |r| r.imported.len(),
    reembed::ReembedResult => |r| r.embedded,
    delete::DeleteResult => |r| r.deleted.len(),
    consolidate::ConsolidateResult => |r| r.clusters.len(),
    extract::ExtractResult => |r| usize::from(r.memory_id.is_some()),
    update::UpdateResult => |_r| 1,
}

/// Adds the owner-id setters (`user`, `agent`, `app`, `run`) to a request, writing to the
/// `Owners` at the given field path.
macro_rules! owner_setters {
    ($($owners:ident).+) => {
        /// Restricts to (or assigns) this user id.
        pub fn user(mut self, id: impl Into<String>) -> Self {
            self.$($owners).+.user_id = Some(id.into());
            self
        }

        /// Restricts to (or assigns) this agent id.
        pub fn agent(mut self, id: impl Into<String>) -> Self {
            self.$($owners).+.agent_id = Some(id.into());
            self
        }

        /// Restricts to (or assigns) this app id.
        pub fn app(mut self, id: impl Into<String>) -> Self {
            self.$($owners).+.app_id = Some(id.into());
            self
        }

        /// Restricts to (or assigns) this run (session) id.
        pub fn run(mut self, id: impl Into<String>) -> Self {
            self.$($owners).+.run_id = Some(id.into());
            self
        }

        /// Restricts to (or assigns) these owner ids, all four at once: those set before
        /// are replaced, and one left `None` is unset.
        pub fn owners(mut self, owners: $crate::record::Owners) -> Self {
            self.$($owners).+ = owners;
            self
        }
    };
}

/// Adds the setters of a [`Scope`] (owners, metadata, categories, filters, expiry) to a
/// request with a `scope` field.
macro_rules! scope_setters {
    () => {
        $crate::ops::owner_setters!(scope.owners);

        /// Only memories whose metadata has these key–value pairs (a JSON object; each value
        /// may also be an operator object, see [`Filter`](crate::Filter)).
        pub fn metadata(mut self, metadata: serde_json::Value) -> Self {
            self.scope.metadata = Some(metadata);
            self
        }

        /// Only memories with at least one of these categories.
        pub fn categories<I, S>(mut self, categories: I) -> Self
        where
            I: IntoIterator<Item = S>,
            S: Into<String>,
        {
            self.scope.categories = Some(categories.into_iter().map(Into::into).collect());
            self
        }

        /// Only memories matching this filter (combined with the other restrictions by AND).
        pub fn filter(mut self, filter: $crate::Filter) -> Self {
            self.scope.filter = Some(filter);
            self
        }

        /// Only memories matching this filter, in its JSON form; parsed when the request runs
        /// (400 if malformed).
        pub fn filters(mut self, filters: serde_json::Value) -> Self {
            self.scope.filter_json = Some(filters);
            self
        }

        /// Includes expired memories.
        pub fn include_expired(mut self, yes: bool) -> Self {
            self.scope.include_expired = yes;
            self
        }

        /// Only memories whose fact held at `at`: said by then, and not superseded by then
        /// ("where did Carlos live in March 2024?"). Replaces
        /// [`include_superseded`](Self::include_superseded).
        pub fn as_of(mut self, at: chrono::DateTime<chrono::Utc>) -> Self {
            self.scope.validity = $crate::ops::Validity::AsOf(at);
            self
        }

        /// Includes memories a later fact superseded, beside the current ones; each carries
        /// its `valid_from`, `valid_until` and `superseded_by`. `false` (the default for
        /// search and list) reads current memories only. Replaces [`as_of`](Self::as_of).
        pub fn include_superseded(mut self, yes: bool) -> Self {
            self.scope.validity = if yes {
                $crate::ops::Validity::All
            } else {
                $crate::ops::Validity::Current
            };
            self
        }
    };
}

/// Adds `page_size` and `cursor` to a request with `page_size: usize` and
/// `cursor: Option<String>` fields; `check_page_size` validates the first.
macro_rules! paging_setters {
    () => {
        /// Results per page (1–1000, default 100).
        pub fn page_size(mut self, n: usize) -> Self {
            self.page_size = n;
            self
        }

        /// Continues after a previous page (its `pagination.next_cursor`).
        pub fn cursor(mut self, cursor: impl Into<String>) -> Self {
            self.cursor = Some(cursor.into());
            self
        }
    };
}

/// Checks a page size (400 outside 1–[`limits::MAX_PAGE_SIZE`]).
pub(crate) fn check_page_size(n: usize) -> Result<()> {
    if !(1..=limits::MAX_PAGE_SIZE).contains(&n) {
        return Err(Error::invalid_field(
            "page_size",
            format!("page_size must be 1–{}, got {n}", limits::MAX_PAGE_SIZE),
        ));
    }
    Ok(())
}

pub(crate) use crate::memory::op_span;
pub(crate) use awaitable;
pub(crate) use owner_setters;
pub(crate) use paging_setters;
pub(crate) use scope_setters;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::filter::{Condition, Filter, Op};
use crate::limits;
use crate::record::Owners;
use crate::store::owner_filter;

/// Which memories a read takes by their validity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Validity {
    /// Those no later fact superseded.
    #[default]
    Current,
    /// Those whose fact held at a time.
    AsOf(chrono::DateTime<chrono::Utc>),
    /// Current and superseded alike.
    All,
}

impl Validity {
    /// The validity as a filter (`None`: every memory).
    fn filter(self) -> Option<Filter> {
        match self {
            Validity::Current => Some(Filter::current()),
            Validity::AsOf(at) => Some(Filter::held_at(at)),
            Validity::All => None,
        }
    }
}

/// What a search or list is restricted to.
#[derive(Debug, Default)]
pub(crate) struct Scope {
    pub(crate) owners: Owners,
    pub(crate) metadata: Option<Value>,
    pub(crate) categories: Option<Vec<String>>,
    pub(crate) filter: Option<Filter>,
    pub(crate) filter_json: Option<Value>,
    pub(crate) include_expired: bool,
    pub(crate) validity: Validity,
}

impl Scope {
    /// All restrictions as one validated filter (400 if any part is malformed).
    pub(crate) fn to_filter(&self) -> Result<Filter> {
        limits::owners(&self.owners)?;
        let mut all = owner_filter(&self.owners);
        if let Some(m) = &self.metadata {
            if !m.is_object() {
                return Err(Error::invalid_field(
                    "metadata",
                    format!("the metadata filter must be a JSON object, got {m}"),
                ));
            }
            all = all.and(Filter::from_json(&serde_json::json!({ "metadata": m }))?);
        }
        if let Some(c) = &self.categories {
            all = all.and(Filter::Condition(Condition::Categories(Op::In(c.clone()))));
        }
        if let Some(f) = &self.filter {
            all = all.and(f.clone());
        }
        if let Some(json) = &self.filter_json {
            all = all.and(Filter::from_json(json)?);
        }
        all.validate()?;
        // Validity last, and alone when nothing else restricts the read: the engine knows
        // every current memory without asking the store (see `Filter::is_current`).
        Ok(match self.validity.filter() {
            Some(validity) if all.is_all() => validity,
            Some(validity) => all.and(validity),
            None => all,
        })
    }
}
