//! # memlane
//!
//! Long-term memory for AI agents, in process: one SQLite file, an in-process HNSW index, and
//! pluggable embedding models. No server.
//!
//! ## Quick start
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> memlane::Result<()> {
//! use memlane::Memory;
//!
//! let memory = Memory::open("agent-memory.db").await?;
//! memory
//!     .add("I'm vegetarian and I live in Lisbon")
//!     .user("alice")
//!     .infer(false)
//!     .await?;
//! let hits = memory.search("where does alice live?").user("alice").top_k(3).await?;
//! for hit in &hits.results {
//!     println!("{:.2}  {}", hit.score, hit.record.memory);
//! }
//! # Ok(()) }
//! ```
//!
//! ## Concepts
//!
//! - A **memory** is a short fact owned by a user, agent, app and/or run, with metadata,
//!   categories, an optional expiry, and a history of every change.
//! - [`Memory`] is the whole service: `add`, `extract`, `search`, `list`, `get`, `update`,
//!   `delete`, `delete_all`, `history`, `config` / `put_config`, `retrieve`, `embed` and
//!   `consolidate`. Requests are builders you `.await`.
//! - With a language model ([`Llm`]: [`OpenAiLlm`] for any OpenAI-protocol server, or the
//!   local model), `add` extracts facts and reconciles them with what the owner already
//!   has: add, update, delete (a contradicted memory) or nothing, in one transaction.
//! - The [`Store`](store::Store) (SQLite by default) is the source of truth. The vector index
//!   is derived from it: persisted next to the database, reloaded on open, caught up or
//!   rebuilt when it lags or is damaged.
//! - Searches with filters that leave at most [`IndexParams::exact_search_max`] memories are
//!   ranked exactly; others walk the HNSW graph.
//! - Every error has an HTTP-style [`status`](Error::status) and a `detail`.
//!
//! ## Crate features
//!
//! - `local-embed` (default): the local all-MiniLM-L6-v2 embedder ([`MiniLm`]) on candle.
//!   Its files are fetched by `scripts/fetch-models.sh`.
//! - `local-llm` (default): a local quantized Qwen2.5 instruct model ([`LocalLlm`]) on
//!   candle, for fact extraction offline. Fetched by `scripts/fetch-models.sh qwen`.

#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

mod config;
mod credits;
mod embed;
mod error;
pub mod filter;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod index;
mod infer;
pub mod limits;
mod llm;
mod memory;
mod models;
mod ops;
mod projects;
mod record;
mod rerank;
mod retrieve;
pub mod store;
pub mod text;

pub use config::{
    ConfigResult, Label, ProductVariant, ProjectConfig, DEFAULT_LABELS, MAX_LABELS,
    MAX_LABEL_BYTES, MAX_LABEL_DESCRIPTION_BYTES, MAX_POLICY_BYTES,
};
pub use credits::Prices;
#[cfg(feature = "local-embed")]
pub use embed::MiniLm;
pub use embed::{EmbedMode, Embedder, HashEmbedder};
pub use error::{Error, ErrorBody, Result};
pub use filter::Filter;
pub use index::IndexParams;
pub use llm::{
    ChatRequest, ChatResponse, Llm, OpenAiConfig, OpenAiEmbedder, OpenAiLlm, ScriptedLlm, Usage,
};
#[cfg(feature = "local-llm")]
pub use llm::{LocalLlm, MAX_PROMPT_TOKENS};
pub use memory::{Memory, MemoryBuilder, MemoryId};
pub use ops::add::{AddRequest, AddResult, AddedMemory, Messages};
pub use ops::consolidate::{
    ConsolidateProgress, ConsolidateRequest, ConsolidateResult, MergedCluster,
    DEFAULT_CONSOLIDATE_THRESHOLD,
};
pub use ops::delete::{DeleteAllRequest, DeleteResult};
pub use ops::engine::{Embedding, RetrieveResult};
pub use ops::entities::EntitiesRequest;
pub use ops::events::{Event, EventKind, EventPage, EVENT_POLL, MAX_EVENTS_PAGE};
pub use ops::export::{
    Export, ExportRequest, ExportedMemory, ImportResult, EXPORT_FORMAT, EXPORT_VERSION,
};
pub use ops::extract::{CoreUsage, ExtractRequest, ExtractResult, ExtractUsage, ExtractedCore};
pub use ops::feedback::{MAX_FEEDBACK_REASON_BYTES, MAX_FEEDBACK_REFILL, NEGATIVE_FEEDBACK_FACTOR};
pub use ops::list::ListRequest;
pub use ops::search::{ScoredMemory, SearchMode, SearchRequest, SearchResult};
pub use ops::update::{UpdateRequest, UpdateResult};
pub use projects::{
    ApiKey, NewApiKey, Project, Projects, ProjectsBuilder, KEY_PREFIX, MAX_NAME_BYTES,
};
pub use record::{
    Core, HistoryEvent, HistoryRecord, MemoryRecord, Message, Owners, Page, Pagination,
    DEFAULT_IMPORTANCE,
};
pub use rerank::{EmbeddingReranker, Reranker, RERANK_WINDOW};
pub use store::{Entity, EntityKind, Feedback, FeedbackKind};
