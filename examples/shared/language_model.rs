//! The language model of the examples: an OpenAI-protocol server when one is configured
//! (`OPENAI_API_KEY` or `OPENAI_BASE_URL`; model `MEMLANE_LLM_MODEL`, default
//! `gpt-4o-mini`), else the local model, loaded with a progress bar.

use std::sync::Arc;

use memlane::{Llm, LocalLlm, OpenAiConfig, OpenAiLlm};

/// The model to ask the configured server for, when one is configured.
pub fn server_model() -> Option<String> {
    let configured = ["OPENAI_API_KEY", "OPENAI_BASE_URL"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|s| !s.is_empty()));
    configured.then(|| std::env::var("MEMLANE_LLM_MODEL").unwrap_or_else(|_| "gpt-4o-mini".into()))
}

/// The configured server's model, else the local one.
pub fn language_model() -> memlane::Result<Arc<dyn Llm>> {
    if let Some(model) = server_model() {
        println!("language model: {model} over the OpenAI protocol");
        return Ok(Arc::new(OpenAiLlm::new(OpenAiConfig::from_env(model))?));
    }
    println!("language model: local Qwen2.5 1.5B (seconds per call on two cores)");
    Ok(Arc::new(LocalLlm::load_default_with_progress(
        crate::progress::progress_bar(),
    )?))
}
