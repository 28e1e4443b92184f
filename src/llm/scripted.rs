//! A language model that replies from a script: for tests of the pipeline's logic.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{ChatRequest, ChatResponse, Llm, Usage};
use crate::error::{Error, Result};

type Responder = dyn Fn(&ChatRequest) -> Result<String> + Send + Sync;

/// A test double for [`Llm`]: it replies with scripted texts in order (or computes each
/// reply with a function) and records every request, so a test can check the prompts.
///
/// Usage is counted as one token per four bytes, like a tokenizer on English text. It is for
/// unit tests and benchmarks of memlane's own logic; it knows nothing about language.
#[derive(Clone)]
pub struct ScriptedLlm {
    replies: Arc<Mutex<VecDeque<Result<String>>>>,
    responder: Option<Arc<Responder>>,
    requests: Arc<Mutex<Vec<ChatRequest>>>,
}

impl std::fmt::Debug for ScriptedLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedLlm")
            .field(
                "pending",
                &self.replies.lock().map(|r| r.len()).unwrap_or(0),
            )
            .finish_non_exhaustive()
    }
}

impl ScriptedLlm {
    /// Replies with these texts, one per call, in order; a call beyond the script is a 502.
    pub fn new<I, S>(replies: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ScriptedLlm {
            replies: Arc::new(Mutex::new(
                replies.into_iter().map(|r| Ok(r.into())).collect(),
            )),
            responder: None,
            requests: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Replies with whatever `f` computes from each request.
    pub fn from_fn(f: impl Fn(&ChatRequest) -> Result<String> + Send + Sync + 'static) -> Self {
        ScriptedLlm {
            replies: Arc::new(Mutex::new(VecDeque::new())),
            responder: Some(Arc::new(f)),
            requests: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Queues an error as the next reply.
    pub fn push_error(&self, error: Error) {
        if let Ok(mut replies) = self.replies.lock() {
            replies.push_back(Err(error));
        }
    }

    /// Queues a text as the next reply.
    pub fn push(&self, reply: impl Into<String>) {
        if let Ok(mut replies) = self.replies.lock() {
            replies.push_back(Ok(reply.into()));
        }
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// How many scripted replies are still unused.
    pub fn pending(&self) -> usize {
        self.replies.lock().map(|r| r.len()).unwrap_or(0)
    }
}

#[async_trait]
impl Llm for ScriptedLlm {
    fn model_id(&self) -> &str {
        "scripted"
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse> {
        let prompt_bytes: usize = request.messages.iter().map(|m| m.content.len()).sum();
        if let Ok(mut seen) = self.requests.lock() {
            seen.push(request.clone());
        }
        let queued = self.replies.lock().ok().and_then(|mut r| r.pop_front());
        let text = match (queued, &self.responder) {
            (Some(reply), _) => reply?,
            (None, Some(f)) => f(&request)?,
            (None, None) => {
                return Err(Error::provider(
                    "the scripted model has no reply left for this call",
                    false,
                ))
            }
        };
        let usage = Usage {
            prompt_tokens: prompt_bytes.div_ceil(4) as u64,
            completion_tokens: text.len().div_ceil(4) as u64,
        };
        Ok(ChatResponse::new(text, usage, "scripted"))
    }
}
