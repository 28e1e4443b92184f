//! Language models: the [`Llm`] trait, its providers, and the strict reading of their output.
//!
//! memlane asks a model for JSON and reads the reply into typed structs. A reply wrapped in a
//! Markdown fence or in prose is recovered; a reply that still does not parse, or that breaks
//! a rule of the answer's shape, is sent back once with the error, and a second failure is a
//! typed 502 (nothing is stored).

use std::fmt::Debug;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tracing::Instrument;

use crate::error::{Error, Result};
use crate::record::Message;

#[cfg(feature = "local-llm")]
mod decoding;
#[cfg(feature = "local-llm")]
mod gguf;
#[cfg(feature = "local-llm")]
pub(crate) mod grammar;
#[cfg(feature = "llama")]
mod llama;
#[cfg(feature = "local-llm")]
mod local;
#[cfg(feature = "local-llm")]
mod lookup;
#[cfg(feature = "openai")]
mod openai;
pub(crate) mod parse;
#[cfg(feature = "local-llm")]
mod prefixes;
#[cfg(feature = "local-llm")]
mod qwen2;
#[cfg(any(test, feature = "test-util"))]
mod scripted;

#[cfg(feature = "local-llm")]
pub use decoding::{LocalLlmStats, MAX_PROMPT_TOKENS};
#[cfg(feature = "llama")]
pub use llama::LlamaCppLlm;
#[cfg(feature = "local-llm")]
pub use local::LocalLlm;
#[cfg(feature = "openai")]
pub use openai::{OpenAiConfig, OpenAiEmbedder, OpenAiLlm};
pub(crate) use parse::recover_json;
#[cfg(any(test, feature = "test-util"))]
pub use scripted::ScriptedLlm;

/// A chat completion request.
///
/// ## Defaults
/// JSON output off, no schema, at most 1024 new tokens, temperature 0 (the most likely reply:
/// extraction should be repeatable).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChatRequest {
    /// The conversation so far; roles are `system`, `user` and `assistant`.
    pub messages: Vec<Message>,
    /// Whether the reply must be one JSON object (providers that support a JSON mode use
    /// it; the others rely on the prompt).
    pub json: bool,
    /// The JSON schema the reply must follow, where the provider can enforce one: the local
    /// model decodes under it (only tokens that keep the reply valid can be chosen), and
    /// OpenAI-protocol servers get it as `response_format` `json_schema`. Providers that
    /// cannot enforce it rely on the prompt; memlane checks every reply either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Value>,
    /// At most this many new tokens.
    pub max_tokens: u32,
    /// Sampling temperature; 0 picks the most likely token.
    pub temperature: f32,
    /// The last message is a note, then a question about it on its last line, and other
    /// calls will ask other questions about the same note after the same earlier messages:
    /// a local model that keeps what it read (`LocalLlm`, `LlamaCppLlm`) then keeps
    /// the note too (one at a time), so that the next such call reads only its question.
    /// The reply never depends on what was kept: a prompt is read in the same pieces
    /// either way. Servers ignore it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_note: bool,
}

impl ChatRequest {
    /// A request with the given messages and the defaults.
    pub fn new(messages: Vec<Message>) -> Self {
        ChatRequest {
            messages,
            json: false,
            schema: None,
            max_tokens: 1024,
            temperature: 0.0,
            keep_note: false,
        }
    }

    /// Asks for one JSON object as the reply.
    pub fn json(mut self, json: bool) -> Self {
        self.json = json;
        self
    }

    /// Asks for one JSON value following `schema` (a JSON Schema object); implies
    /// [`json`](Self::json).
    pub fn schema(mut self, schema: serde_json::Value) -> Self {
        self.json = true;
        self.schema = Some(schema);
        self
    }

    /// Caps the reply's length in tokens.
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// Keeps the last message's note for the next question about it (see
    /// [`keep_note`](Self::keep_note)).
    pub fn keep_note(mut self, keep_note: bool) -> Self {
        self.keep_note = keep_note;
        self
    }
}

/// Tokens a model call used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Tokens of the reply.
    pub completion_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
    }
}

/// A model's reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChatResponse {
    /// The reply's text.
    pub text: String,
    /// Tokens used.
    pub usage: Usage,
    /// The model that answered, as it names itself.
    pub model: String,
}

impl ChatResponse {
    /// A reply.
    pub fn new(text: impl Into<String>, usage: Usage, model: impl Into<String>) -> Self {
        ChatResponse {
            text: text.into(),
            usage,
            model: model.into(),
        }
    }
}

/// A chat model: a hosted API, a local server, or a model in process.
///
/// Errors should say whether a retry can help ([`Error::Provider`] with `transient`); a
/// provider that retries on its own returns only the final error.
#[async_trait]
pub trait Llm: Send + Sync + Debug + 'static {
    /// The model's name, reported in `usage.core.model`.
    fn model_id(&self) -> &str;

    /// Completes a chat.
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse>;

    /// Whether the model keeps what it read of a chat before its last message, so that a
    /// later chat starting the same way reads only the rest (the local models do; see
    /// [`Memory::warm_up`](crate::Memory::warm_up)). `false` by default.
    fn reuses_prefixes(&self) -> bool {
        false
    }
}

/// A reply read into `T`, with the usage of every call it took.
#[derive(Debug)]
pub(crate) struct Parsed<T> {
    pub(crate) value: T,
    pub(crate) usage: Usage,
    pub(crate) model: String,
}

/// Asks for JSON following `schema`, reads it into `T` and checks it with `validate`. A reply
/// that fails either step is sent back once with the error; a second failure is a 502.
pub(crate) async fn chat_json<T, F>(
    llm: &dyn Llm,
    messages: Vec<Message>,
    schema: serde_json::Value,
    max_tokens: u32,
    validate: F,
) -> Result<Parsed<T>>
where
    T: DeserializeOwned,
    F: Fn(&T) -> std::result::Result<(), String>,
{
    chat_json_with(llm, messages, schema, max_tokens, false, validate).await
}

/// [`chat_json`], keeping the note of a last message that is a note, then a question
/// about it on its last line, when `keep_note`: the first attempt asks so
/// ([`ChatRequest::keep_note`]); a retry, which ends with its correction, does not.
pub(crate) async fn chat_json_with<T, F>(
    llm: &dyn Llm,
    messages: Vec<Message>,
    schema: serde_json::Value,
    max_tokens: u32,
    keep_note: bool,
    validate: F,
) -> Result<Parsed<T>>
where
    T: DeserializeOwned,
    F: Fn(&T) -> std::result::Result<(), String>,
{
    let mut messages = messages;
    let mut usage = Usage::default();
    let mut first_error = None;
    for attempt in 0..2 {
        // A retry ends with its correction, not with the note.
        let request = ChatRequest::new(messages.clone())
            .schema(schema.clone())
            .max_tokens(max_tokens)
            .keep_note(keep_note && attempt == 0);
        let span = tracing::info_span!(
            target: "memlane",
            "model",
            model = llm.model_id(),
            attempt = attempt + 1,
            prompt_tokens = tracing::field::Empty,
            completion_tokens = tracing::field::Empty,
        );
        let reply = llm.chat(request).instrument(span.clone()).await?;
        span.record("prompt_tokens", reply.usage.prompt_tokens);
        span.record("completion_tokens", reply.usage.completion_tokens);
        usage += reply.usage;
        let outcome =
            recover_json::<T>(&reply.text).and_then(|value| validate(&value).map(|()| value));
        match outcome {
            Ok(value) => {
                return Ok(Parsed {
                    value,
                    usage,
                    model: reply.model,
                })
            }
            Err(problem) if attempt == 0 => {
                // The reason is sent back to the model, not traced: it quotes the reply,
                // and no event carries text.
                tracing::debug!(
                    reply_bytes = reply.text.len(),
                    "model reply rejected; asking once more"
                );
                messages.push(Message::assistant(reply.text));
                messages.push(Message::user(format!(
                    "Your reply could not be used: {problem}. Reply again with only the JSON \
                     object, in exactly the format asked for."
                )));
                first_error = Some(problem);
            }
            Err(problem) => {
                return Err(Error::provider(
                    format!(
                        "the language model {:?} did not return usable JSON after one retry \
                         (first reply: {}; second reply: {problem}); nothing was stored",
                        llm.model_id(),
                        first_error.unwrap_or_default()
                    ),
                    true,
                ))
            }
        }
    }
    Err(Error::internal("chat_json ran out of attempts"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Answer {
        n: u32,
    }

    #[tokio::test]
    async fn a_bad_reply_is_retried_once_with_its_error() {
        let llm = ScriptedLlm::new(["not json at all", "```json\n{\"n\": 4}\n```"]);
        let schema = serde_json::json!({"type": "object"});
        let parsed =
            chat_json::<Answer, _>(&llm, vec![Message::user("n?")], schema.clone(), 50, |_| {
                Ok(())
            })
            .await
            .unwrap();
        assert_eq!(parsed.value.n, 4);
        let requests = llm.requests();
        assert_eq!(requests.len(), 2);
        let retry = &requests[1].messages;
        assert_eq!(retry[1].content, "not json at all");
        assert!(retry[2].content.contains("could not be used"), "{retry:?}");
        assert!(requests[0].json);
        assert_eq!(requests[0].schema.as_ref(), Some(&schema));
        assert_eq!(requests[1].schema.as_ref(), Some(&schema));
    }

    #[tokio::test]
    async fn two_bad_replies_are_a_transient_502() {
        let llm = ScriptedLlm::new(["{\"n\": 1}", "{\"n\": 2}"]);
        let schema = serde_json::json!({"type": "object"});
        let err = chat_json::<Answer, _>(&llm, vec![Message::user("n?")], schema, 50, |a| {
            if a.n > 2 {
                Ok(())
            } else {
                Err(format!("n must be above 2, got {}", a.n))
            }
        })
        .await
        .unwrap_err();
        assert_eq!(err.status(), 502);
        assert!(err.is_transient());
        assert!(err.detail().contains("n must be above 2, got 1"), "{err}");
        assert!(err.detail().contains("got 2"), "{err}");
    }
}
