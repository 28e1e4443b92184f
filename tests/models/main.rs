//! The real local models: all-MiniLM-L6-v2 (the crate's own forward pass) and the quantized
//! Qwen2.5 GGUF on candle, and on llama.cpp with the feature `llama`.
//! Needs `scripts/fetch-models.sh` to have run.

#[path = "../common/mod.rs"]
mod common;

#[cfg(all(feature = "hub", feature = "local-embed"))]
mod hub;
#[cfg(feature = "llama")]
mod llama;
#[cfg(feature = "local-llm")]
mod local_llm;
#[cfg(feature = "local-embed")]
mod minilm;
#[cfg(feature = "local-embed")]
mod model_files;
#[cfg(feature = "local-embed")]
mod readme;
