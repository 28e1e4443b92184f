//! The service's operations through the public API, on real SQLite files, with a hashing
//! embedder and scripted or loopback-served language models.

#[path = "../common/mod.rs"]
mod common;

mod architecture;
mod backdating;
mod embedders;
mod entities;
mod events;
mod export;
mod feedback;
mod hybrid;
mod inference;
mod lifecycle;
#[cfg(feature = "openai")]
mod loopback;
#[cfg(feature = "openai")]
mod openai;
mod rerank;
#[cfg(all(feature = "rig", feature = "openai"))]
mod rig;
mod spans;
mod temporal;
