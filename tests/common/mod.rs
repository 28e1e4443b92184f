//! Helpers shared by the integration-test binaries (`api`, `models`, `reliability`,
//! `tenancy`). Each binary includes this module; not every binary uses every helper.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use memlane::index::IndexParams;
use memlane::{HashEmbedder, Llm, Memory};
use uuid::Uuid;

/// A memory on the SQLite file at `path`, with a hashing embedder of `dim` dimensions.
pub async fn open(path: &Path, dim: usize) -> Memory {
    open_with_llm(path, dim, None).await
}

/// [`open`], with these index parameters.
pub async fn open_with_params(path: &Path, dim: usize, params: IndexParams) -> Memory {
    Memory::builder()
        .path(path)
        .embedder(Arc::new(HashEmbedder::new(dim)))
        .index_params(params)
        .build()
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// [`open`], with a language model when one is given.
pub async fn open_with_llm(path: &Path, dim: usize, llm: Option<Arc<dyn Llm>>) -> Memory {
    let mut builder = Memory::builder()
        .path(path)
        .embedder(Arc::new(HashEmbedder::new(dim)));
    if let Some(llm) = llm {
        builder = builder.llm(llm);
    }
    builder
        .build()
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// Stores `text` verbatim for `user` and returns the new memory's id.
pub async fn add(memory: &Memory, user: &str, text: &str) -> Uuid {
    memory
        .add(text)
        .user(user)
        .infer(false)
        .await
        .unwrap_or_else(|e| panic!("add {text:?}: {e}"))
        .results[0]
        .id
}

/// A small deterministic generator (xorshift64) for seeded random test schedules.
pub struct Rng(pub u64);

impl Rng {
    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}
