//! The OpenAI protocol: chat completions and embeddings from OpenAI or any server that speaks
//! its API (Ollama, vLLM, llama.cpp's server, LM Studio, …).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::ReqwestService;
use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestMessage,
    ChatCompletionRequestSystemMessage, ChatCompletionRequestUserMessage,
    CreateChatCompletionRequest, ResponseFormat, ResponseFormatJsonSchema,
};
use async_openai::types::embeddings::{CreateEmbeddingRequest, EmbeddingInput};
use async_openai::Client;
use async_trait::async_trait;

use super::{ChatRequest, ChatResponse, Llm, Usage};
use crate::embed::{EmbedMode, Embedder};
use crate::error::{Error, ProviderFailure, Result};

/// OpenAI's own API address.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// How to reach an OpenAI-compatible server.
///
/// ## Defaults
/// - base URL: `https://api.openai.com/v1` (for Ollama: `http://localhost:11434/v1`);
/// - API key: none (local servers need none; OpenAI does);
/// - timeout: 60 s per attempt;
/// - retries: 3, after 0.5 s, 1 s and 2 s (doubling, with up to 25% jitter), on transient
///   failures only: 408, 409, 429 and 5xx answers, timeouts, refused or reset connections;
/// - structured output: on. A request with a schema ([`ChatRequest::schema`]) is sent with
///   `response_format` `json_schema` (not `strict`: the server enforces it where it can);
///   a server that refuses that request but takes `json_object` gets `json_object` from then
///   on.
#[derive(Clone)]
pub struct OpenAiConfig {
    model: String,
    base_url: String,
    api_key: Option<String>,
    timeout: Duration,
    max_retries: u32,
    backoff: Duration,
    structured_output: bool,
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key never reaches logs.
        f.debug_struct("OpenAiConfig")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("structured_output", &self.structured_output)
            .finish_non_exhaustive()
    }
}

impl OpenAiConfig {
    /// A configuration for `model` on OpenAI's API, with the defaults above.
    pub fn new(model: impl Into<String>) -> Self {
        OpenAiConfig {
            model: model.into(),
            base_url: OPENAI_BASE_URL.into(),
            api_key: None,
            timeout: Duration::from_secs(60),
            max_retries: 3,
            backoff: Duration::from_millis(500),
            structured_output: true,
        }
    }

    /// `model` with the key from `OPENAI_API_KEY` and the address from `OPENAI_BASE_URL`,
    /// where set.
    pub fn from_env(model: impl Into<String>) -> Self {
        let mut config = OpenAiConfig::new(model);
        if let Some(key) = std::env::var("OPENAI_API_KEY")
            .ok()
            .filter(|k| !k.is_empty())
        {
            config = config.api_key(key);
        }
        if let Some(url) = std::env::var("OPENAI_BASE_URL")
            .ok()
            .filter(|u| !u.is_empty())
        {
            config = config.base_url(url);
        }
        config
    }

    /// The server's address, up to and including `/v1`.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// The API key, sent as `Authorization: Bearer <key>`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// How long one attempt may take.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How many times a transient failure is retried.
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// The wait before the first retry; each later one waits twice as long.
    pub fn backoff(mut self, backoff: Duration) -> Self {
        self.backoff = backoff;
        self
    }

    /// Whether requests with a schema ask for it (`response_format` `json_schema`); off,
    /// they ask for `json_object` only, as for servers that mishandle schemas.
    pub fn structured_output(mut self, on: bool) -> Self {
        self.structured_output = on;
        self
    }

    /// The model's name.
    pub fn model(&self) -> &str {
        &self.model
    }

    fn client(&self) -> Result<Client<OpenAIConfig>> {
        if !(self.base_url.starts_with("http://") || self.base_url.starts_with("https://")) {
            return Err(Error::invalid_field(
                "base_url",
                format!(
                    "base URL {:?} is not an http:// or https:// address",
                    self.base_url
                ),
            ));
        }
        if self.model.trim().is_empty() {
            return Err(Error::invalid_field("model", "the model name is empty"));
        }
        if self.timeout.is_zero() {
            return Err(Error::invalid_field(
                "timeout",
                "the timeout must be above zero",
            ));
        }
        let key = self.api_key.clone().unwrap_or_default();
        // The key becomes a header value: anything but visible ASCII would not be one.
        if !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Error::invalid_field(
                "api_key",
                "the API key holds spaces, control or non-ASCII characters; copy it again \
                 without surrounding whitespace",
            ));
        }
        // async-openai falls back to OPENAI_API_KEY, OPENAI_ORG_ID and OPENAI_PROJECT_ID by
        // itself; memlane sends only what it was given, so that a local server never
        // receives a hosted key by accident.
        let config = OpenAIConfig::new()
            .with_api_base(&self.base_url)
            .with_api_key(key)
            .with_org_id("")
            .with_project_id("");
        // The plain transport, without async-openai's own retry layer: retries are memlane's
        // (`run`), with the configured count and backoff, so that attempts do not multiply.
        Ok(Client::with_config(config).with_http_service(ReqwestService::default()))
    }

    /// Runs `call` with the timeout, retrying transient failures with backoff.
    async fn run<T, F, Fut>(&self, what: &str, call: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, OpenAIError>>,
    {
        let mut attempt = 0u32;
        loop {
            let error = match tokio::time::timeout(self.timeout, call()).await {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(e)) => self.classify(what, e),
                Err(_) => Error::Provider {
                    detail: format!(
                        "{what} at {} timed out after {:?}",
                        self.base_url, self.timeout
                    ),
                    transient: true,
                    failure: ProviderFailure::Unreachable,
                    source: None,
                },
            };
            if !error.is_transient() || attempt >= self.max_retries {
                if attempt > 0 {
                    return Err(with_attempts(error, attempt + 1));
                }
                return Err(error);
            }
            let wait = self.backoff.saturating_mul(1 << attempt.min(16));
            let wait = wait + jitter(wait);
            tracing::debug!(%error, ?wait, attempt, "{what} failed; retrying");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// Maps a client error to memlane's, deciding whether a retry can help and what kind of
    /// failure it was; the client's error stays as the source.
    fn classify(&self, what: &str, error: OpenAIError) -> Error {
        let base = &self.base_url;
        let (detail, transient, failure) = match &error {
            OpenAIError::ApiError(api) => {
                let status = api.status_code.as_u16();
                let message: String = api.api_error.message.chars().take(500).collect();
                let quota = api.api_error.r#type.as_deref() == Some("insufficient_quota");
                match status {
                    429 if quota => (
                        format!(
                            "{what} at {base}: the account is out of quota (429: {message}); \
                             retrying will not help until it is topped up"
                        ),
                        false,
                        ProviderFailure::Refused,
                    ),
                    401 | 403 => (
                        format!(
                            "{what} at {base} was refused ({status}: {message}); check the API key"
                        ),
                        false,
                        ProviderFailure::Refused,
                    ),
                    404 => (
                        format!(
                            "{what} at {base} found no such model or route (404: {message}); \
                             check the model name {:?} and that the base URL ends in /v1",
                            self.model
                        ),
                        false,
                        ProviderFailure::Refused,
                    ),
                    429 => (
                        format!("{what} at {base} was rate-limited (429: {message})"),
                        true,
                        ProviderFailure::RateLimited,
                    ),
                    408 | 409 | 500..=599 => (
                        format!("{what} at {base} failed ({status}: {message})"),
                        true,
                        ProviderFailure::Failed,
                    ),
                    _ => (
                        format!("{what} at {base} was rejected ({status}: {message})"),
                        false,
                        ProviderFailure::Refused,
                    ),
                }
            }
            OpenAIError::Reqwest(e) => {
                // A body that is not what was announced will not get better; a connection
                // that failed may.
                let broken = e.is_decode() || e.is_builder();
                (
                    format!("{what} at {base} could not complete: {e}"),
                    !broken,
                    if broken {
                        ProviderFailure::Failed
                    } else {
                        ProviderFailure::Unreachable
                    },
                )
            }
            OpenAIError::JSONDeserialize(e, body) => (
                format!(
                    "{what} at {base} answered with a body that is not an OpenAI response ({e}): {:?}",
                    body.chars().take(200).collect::<String>()
                ),
                false,
                ProviderFailure::Failed,
            ),
            OpenAIError::InvalidArgument(e) => {
                return Error::invalid(format!("{what}: invalid request: {e}"))
            }
            other => (
                format!("{what} at {base} failed: {other}"),
                false,
                ProviderFailure::Failed,
            ),
        };
        Error::Provider {
            detail,
            transient,
            failure,
            source: Some(Box::new(error)),
        }
    }
}

/// Notes the number of attempts in a provider error.
fn with_attempts(error: Error, attempts: u32) -> Error {
    match error {
        Error::Provider {
            detail,
            transient,
            failure,
            source,
        } => Error::Provider {
            detail: format!("{detail} (gave up after {attempts} attempts)"),
            transient,
            failure,
            source,
        },
        other => other,
    }
}

/// Up to a quarter of `wait`, so that clients retrying together spread out.
fn jitter(wait: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    wait.mul_f64(f64::from(nanos % 1000) / 4000.0)
}

/// A chat model behind the OpenAI protocol.
///
/// ```no_run
/// # fn run() -> memlane::Result<()> {
/// use memlane::{OpenAiConfig, OpenAiLlm};
/// // Ollama on this machine:
/// let llm = OpenAiLlm::new(
///     OpenAiConfig::new("qwen2.5:7b-instruct").base_url("http://localhost:11434/v1"),
/// )?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct OpenAiLlm {
    config: OpenAiConfig,
    client: Client<OpenAIConfig>,
    /// Set once the server refused a `json_schema` request it took as `json_object`.
    schemas_refused: Arc<AtomicBool>,
}

impl OpenAiLlm {
    /// A client for the configured server (400 if the configuration is unusable).
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        let client = config.client()?;
        Ok(OpenAiLlm {
            config,
            client,
            schemas_refused: Arc::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }
}

#[async_trait]
impl Llm for OpenAiLlm {
    fn model_id(&self) -> &str {
        &self.config.model
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse> {
        let messages: Vec<ChatCompletionRequestMessage> = request
            .messages
            .iter()
            .map(|m| match m.role.as_str() {
                "system" => ChatCompletionRequestSystemMessage::from(m.content.as_str()).into(),
                "assistant" => {
                    ChatCompletionRequestAssistantMessage::from(m.content.as_str()).into()
                }
                _ => ChatCompletionRequestUserMessage::from(m.content.as_str()).into(),
            })
            .collect();
        let mut body = CreateChatCompletionRequest {
            messages,
            model: self.config.model.clone(),
            temperature: Some(request.temperature),
            ..Default::default()
        };
        // OpenAI's newer models only take max_completion_tokens; most local servers only
        // know max_tokens.
        if self.config.base_url == OPENAI_BASE_URL {
            body.max_completion_tokens = Some(request.max_tokens);
        } else {
            // Deprecated by OpenAI, but the field llama.cpp, Ollama and older vLLM read.
            #[allow(deprecated)]
            {
                body.max_tokens = Some(request.max_tokens);
            }
        }
        let schema = request.schema.clone().filter(|_| {
            self.config.structured_output && !self.schemas_refused.load(Ordering::Relaxed)
        });
        if request.json {
            body.response_format = Some(ResponseFormat::JsonObject);
        }
        let send = |body: CreateChatCompletionRequest| {
            self.config.run("chat completion", move || {
                let body = body.clone();
                async move { self.client.chat().create(body).await }
            })
        };
        let response = match schema {
            None => send(body).await?,
            Some(schema) => {
                let mut with_schema = body.clone();
                with_schema.response_format = Some(ResponseFormat::JsonSchema {
                    json_schema: ResponseFormatJsonSchema {
                        description: None,
                        name: "memlane_reply".into(),
                        schema,
                        strict: None,
                    },
                });
                match send(with_schema).await {
                    Ok(response) => response,
                    // A permanent refusal may be the schema's: a server that then takes the
                    // same request as `json_object` does not do schemas.
                    Err(refused) if !refused.is_transient() => {
                        let response = send(body).await?;
                        tracing::warn!(
                            base_url = %self.config.base_url,
                            error = %refused,
                            "the server refused a json_schema response format and took \
                             json_object; asking for json_object from now on"
                        );
                        self.schemas_refused.store(true, Ordering::Relaxed);
                        response
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        let choice = response.choices.into_iter().next().ok_or_else(|| {
            Error::provider(
                format!(
                    "chat completion at {} returned no choices",
                    self.config.base_url
                ),
                false,
            )
        })?;
        let text = match (choice.message.content, choice.message.refusal) {
            (Some(text), _) => text,
            (None, Some(refusal)) => {
                return Err(Error::provider(
                    format!("the model refused: {refusal}"),
                    false,
                ))
            }
            (None, None) => String::new(),
        };
        let usage = response.usage.map_or_else(Usage::default, |u| Usage {
            prompt_tokens: u64::from(u.prompt_tokens),
            completion_tokens: u64::from(u.completion_tokens),
        });
        Ok(ChatResponse::new(text, usage, response.model))
    }
}

/// An embedding model behind the OpenAI protocol.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedder {
    config: OpenAiConfig,
    client: Client<OpenAIConfig>,
    dimension: usize,
    model_id: String,
}

impl OpenAiEmbedder {
    /// A client for the configured server, whose model returns vectors of `dimension`
    /// (1536 for OpenAI's `text-embedding-3-small`). A vector of another length is a 422.
    pub fn new(config: OpenAiConfig, dimension: usize) -> Result<Self> {
        if dimension == 0 {
            return Err(Error::invalid_field(
                "dimension",
                "an embedding dimension must be above zero",
            ));
        }
        let client = config.client()?;
        let model_id = format!("openai:{}", config.model);
        Ok(OpenAiEmbedder {
            config,
            client,
            dimension,
            model_id,
        })
    }
}

/// Texts per embeddings request: OpenAI accepts 2048.
const EMBED_BATCH: usize = 256;

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn dimension(&self) -> usize {
        self.dimension
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    async fn embed(&self, texts: &[String], _mode: EmbedMode) -> Result<Vec<Vec<f32>>> {
        let mut vectors = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(EMBED_BATCH) {
            let body = CreateEmbeddingRequest {
                model: self.config.model.clone(),
                input: EmbeddingInput::StringArray(chunk.to_vec()),
                ..Default::default()
            };
            let response = self
                .config
                .run("embedding", || async {
                    self.client.embeddings().create(body.clone()).await
                })
                .await?;
            let mut data = response.data;
            data.sort_by_key(|e| e.index);
            let in_order = data.iter().enumerate().all(|(i, e)| e.index as usize == i);
            if data.len() != chunk.len() || !in_order {
                return Err(Error::provider(
                    format!(
                        "embedding at {} returned {} vectors for {} texts",
                        self.config.base_url,
                        data.len(),
                        chunk.len()
                    ),
                    false,
                ));
            }
            for e in data {
                if e.embedding.len() != self.dimension {
                    return Err(Error::DimensionMismatch {
                        expected: self.dimension,
                        actual: e.embedding.len(),
                    });
                }
                vectors.push(e.embedding);
            }
        }
        Ok(vectors)
    }
}
