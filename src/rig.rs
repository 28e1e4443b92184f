//! memlane in [rig](https://docs.rs/rig-core) agents (feature `rig`).
//!
//! - [`MemoryIndex`]: a search scope (an owner, a mode) as a rig [`VectorStoreIndex`], for
//!   an agent's `dynamic_context`: before each turn the agent recalls what memlane holds
//!   about the prompt.
//! - [`RecallTool`] and [`RememberTool`]: rig tools (`recall_memories`, `remember`) with
//!   which a model that calls tools searches and writes an owner's memories itself.
//! - [`completion_model`]: any memlane [`Llm`] (the local model, an OpenAI-protocol
//!   server) as a rig completion model, so an agent runs offline on the local model.
//!
//! Built against rig-core and rig-agent 0.44.0 exactly (rig's API moves between minor
//! versions); both are re-exported as [`rig_core`] and [`rig_agent`], so an agent can name
//! the same versions. rig needs Rust 1.95.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//!
//! use memlane::rig::{completion_model, rig_agent::AgentBuilder, MemoryIndex};
//! use memlane::{LocalLlm, Memory};
//!
//! let memory = Memory::open("agent-memory.db").await?;
//! let agent = AgentBuilder::new(completion_model(Arc::new(LocalLlm::load_default()?)))
//!     .preamble("You are Alice's assistant. Answer in one sentence.")
//!     .dynamic_context(3, MemoryIndex::new(memory.clone()).user("alice"))
//!     .build();
//! let answer = agent.prompt("What should I cook for Alice tonight?").await?;
//! println!("{answer}");
//! # Ok(()) }
//! ```

use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures_util::stream;
use rig_core::completion::{
    Accepts, AssistantContent, CompletionRequest, FinishReason, Media, Message as RigMessage,
    ReplayTarget,
};
use rig_core::driver::{Exchange, Model, Opened, Opening, Transport};
use rig_core::error::{EncodeError, ProviderError};
use rig_core::message::{Api, DocumentSourceKind, ToolResultContent, UserContent};
use rig_core::operation::{Block, Completion, Finish};
use rig_core::tool::PortableTool;
use rig_core::vector_store::request::{Filter as RigFilter, VectorSearchRequest};
use rig_core::vector_store::{
    VectorSearchIdResult, VectorSearchResult, VectorStoreError, VectorStoreIndex,
};
use rig_core::wire::document::{Reassemble, Serves};
use rig_core::wire::{Decoder, Descriptor, Flow, Mode, Out, Wire, WireEvent};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub use rig_agent;
pub use rig_core;

use crate::error::{Error, Result};
use crate::llm::{ChatRequest, ChatResponse, Llm};
use crate::ops::search::SearchResult;
use crate::record::{HistoryEvent, Message, Owners};
use crate::retrieve::{ScoredMemory, SearchMode};
use crate::Memory;

/// One memory as the rig integrations hand it to a model: its text, its labels and when it
/// last changed. Its id (and score) travel beside it in rig's results; the whole record is
/// [`Memory::get`]'s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RecalledMemory {
    /// The memory's text.
    pub memory: String,
    /// Its categories (left out when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// When it last changed: a model can tell a newer fact from an older one.
    pub updated_at: DateTime<Utc>,
}

impl From<&ScoredMemory> for RecalledMemory {
    fn from(hit: &ScoredMemory) -> Self {
        RecalledMemory {
            memory: hit.record.memory.clone(),
            categories: hit.record.categories.clone(),
            updated_at: hit.record.updated_at,
        }
    }
}

/// A memlane search scope as a rig [`VectorStoreIndex`]: `top_n` is [`Memory::search`]
/// over the owners set here, in the mode set here (the store's default otherwise).
///
/// - A document is a [`RecalledMemory`]; an id is the memory's UUID; a score is memlane's
///   (an estimate in [0, 1] that the memory is relevant, the same in every mode).
/// - A request's `samples` is `top_k` (1–1000) and its `threshold` memlane's threshold
///   (0–1); memlane's 400 for anything outside reaches rig as a
///   [`VectorStoreError::DatastoreError`] holding the [`Error`].
/// - rig's filters translate to memlane's [filter language](crate::filter): `eq`, `gt` and
///   `lt` on a field (`user_id`, `created_at`, `categories`, `metadata.<key>`, …), `and`,
///   `or`. They narrow the owners set here; they never widen them.
///
/// Every index also gets rig's generic `search_vector_store` tool; [`RecallTool`] is the
/// narrower one meant for models.
#[derive(Debug, Clone)]
pub struct MemoryIndex {
    memory: Memory,
    owners: Owners,
    mode: Option<SearchMode>,
}

impl MemoryIndex {
    /// An index over all the memories of `memory`'s project; narrow it with the owner setters.
    pub fn new(memory: Memory) -> Self {
        MemoryIndex {
            memory,
            owners: Owners::default(),
            mode: None,
        }
    }

    crate::ops::owner_setters!(owners);

    /// Ranks in this mode instead of the store's default (hybrid, or keyword without an
    /// embedder).
    pub fn mode(mut self, mode: SearchMode) -> Self {
        self.mode = Some(mode);
        self
    }

    async fn hits(&self, request: &VectorSearchRequest<RigFilter<Value>>) -> Result<SearchResult> {
        let top_k = usize::try_from(request.samples()).unwrap_or(usize::MAX);
        let mut search = self
            .memory
            .search(request.query())
            .owners(self.owners.clone())
            .top_k(top_k);
        if let Some(threshold) = request.threshold() {
            search = search.threshold(threshold as f32);
        }
        if let Some(mode) = self.mode {
            search = search.mode(mode);
        }
        if let Some(filter) = request.filter() {
            search = search.filters(filter_json(filter.clone()));
        }
        search.await
    }
}

/// rig's canonical filter in memlane's filter language.
fn filter_json(filter: RigFilter<Value>) -> Value {
    match filter {
        RigFilter::Eq(key, value) => json!({ key: {"eq": value} }),
        RigFilter::Gt(key, value) => json!({ key: {"gt": value} }),
        RigFilter::Lt(key, value) => json!({ key: {"lt": value} }),
        RigFilter::And(a, b) => json!({"AND": [filter_json(*a), filter_json(*b)]}),
        RigFilter::Or(a, b) => json!({"OR": [filter_json(*a), filter_json(*b)]}),
    }
}

fn store_error(error: Error) -> VectorStoreError {
    VectorStoreError::DatastoreError(Box::new(error))
}

impl VectorStoreIndex for MemoryIndex {
    type Filter = RigFilter<Value>;

    async fn top_n<T: serde::de::DeserializeOwned + Send>(
        &self,
        request: VectorSearchRequest<Self::Filter>,
    ) -> std::result::Result<Vec<VectorSearchResult<T>>, VectorStoreError> {
        let hits = self.hits(&request).await.map_err(store_error)?;
        let results: serde_json::Result<Vec<_>> = hits
            .results
            .iter()
            .map(|hit| {
                let document = serde_json::to_value(RecalledMemory::from(hit))?;
                Ok(VectorSearchResult {
                    score: f64::from(hit.score),
                    id: hit.record.id.to_string(),
                    document: serde_json::from_value(document)?,
                })
            })
            .collect();
        Ok(results?)
    }

    async fn top_n_ids(
        &self,
        request: VectorSearchRequest<Self::Filter>,
    ) -> std::result::Result<Vec<VectorSearchIdResult>, VectorStoreError> {
        let hits = self.hits(&request).await.map_err(store_error)?;
        Ok(hits
            .results
            .iter()
            .map(|hit| VectorSearchIdResult {
                score: f64::from(hit.score),
                id: hit.record.id.to_string(),
            })
            .collect())
    }
}

/// The rig tool `recall_memories`: a model searches the owner's memories with a query of
/// its own and gets the best [`RecalledMemory`]s (5 unless it asks for more, at most 20).
#[derive(Debug, Clone)]
pub struct RecallTool {
    memory: Memory,
    owners: Owners,
}

/// The arguments of [`RecallTool`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RecallArgs {
    /// What to look for, in the model's words.
    pub query: String,
    /// How many memories at most (default 5, at most 20).
    #[serde(default)]
    pub limit: Option<u64>,
}

impl RecallTool {
    /// The tool over all the memories of `memory`'s project; narrow it with the owner
    /// setters.
    pub fn new(memory: Memory) -> Self {
        RecallTool {
            memory,
            owners: Owners::default(),
        }
    }

    crate::ops::owner_setters!(owners);
}

/// The most a model may ask [`RecallTool`] for, and what it gets without asking.
const RECALL_MAX: u64 = 20;
const RECALL_DEFAULT: u64 = 5;

impl PortableTool for RecallTool {
    const NAME: &'static str = "recall_memories";
    type Args = RecallArgs;
    type Output = Vec<RecalledMemory>;
    type Error = Error;

    fn description(&self) -> String {
        "Searches long-term memory for facts about the user that are relevant to a query \
         (preferences, plans, people, past events). Call it before answering whenever what \
         you know about the user could matter; the most relevant memories come first."
            .to_owned()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for, in plain words."},
                "limit": {
                    "type": "integer", "minimum": 1, "maximum": RECALL_MAX,
                    "description": "How many memories at most (default 5)."
                }
            },
            "required": ["query"]
        })
    }

    async fn call(&self, args: RecallArgs) -> Result<Vec<RecalledMemory>> {
        let limit = args.limit.unwrap_or(RECALL_DEFAULT).clamp(1, RECALL_MAX);
        let hits = self
            .memory
            .search(args.query)
            .owners(self.owners.clone())
            .top_k(limit as usize)
            .await?;
        Ok(hits.results.iter().map(RecalledMemory::from).collect())
    }
}

/// The rig tool `remember`: a model stores a fact about the owner. With a language model
/// configured on the [`Memory`], `add` extracts and reconciles it as usual (a contradicted
/// memory is superseded, kept as history); without one, or with [`infer(false)`](Self::infer), the
/// fact is stored as written.
#[derive(Debug, Clone)]
pub struct RememberTool {
    memory: Memory,
    owners: Owners,
    infer: Option<bool>,
}

/// The arguments of [`RememberTool`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RememberArgs {
    /// The fact, as one short sentence.
    pub fact: String,
}

/// What [`RememberTool`] did to one memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Remembered {
    /// `ADD` (a new memory), or `SUPERSEDE` (an existing memory a new fact of this call
    /// superseded: it is kept as history, no longer current).
    pub event: HistoryEvent,
    /// The memory's text.
    pub memory: String,
}

impl RememberTool {
    /// The tool writing into `memory`'s project; set the owner with the owner setters (a
    /// memory needs at least one).
    pub fn new(memory: Memory) -> Self {
        RememberTool {
            memory,
            owners: Owners::default(),
            infer: None,
        }
    }

    crate::ops::owner_setters!(owners);

    /// Whether a language model extracts and reconciles the fact (default: when the
    /// [`Memory`] has one), as [`AddRequest::infer`](crate::ops::add::AddRequest::infer).
    pub fn infer(mut self, infer: bool) -> Self {
        self.infer = Some(infer);
        self
    }
}

impl PortableTool for RememberTool {
    const NAME: &'static str = "remember";
    type Args = RememberArgs;
    type Output = Vec<Remembered>;
    type Error = Error;

    fn description(&self) -> String {
        "Stores a fact about the user in long-term memory, for later conversations: a \
         preference, a plan, a person, a change (a move, a new job). One short sentence per \
         call; a fact that replaces an older one supersedes it."
            .to_owned()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "fact": {"type": "string", "description": "The fact, as one short sentence."}
            },
            "required": ["fact"]
        })
    }

    async fn call(&self, args: RememberArgs) -> Result<Vec<Remembered>> {
        let mut add = self
            .memory
            .add(Message::user(args.fact))
            .owners(self.owners.clone());
        if let Some(infer) = self.infer {
            add = add.infer(infer);
        }
        let added = add.await?;
        Ok(added
            .results
            .into_iter()
            .map(|m| Remembered {
                event: m.event,
                memory: m.memory,
            })
            .collect())
    }
}

/// Any memlane [`Llm`] as a rig completion model, for `AgentBuilder::new`: the local model
/// runs an agent offline.
///
/// - The request's system, user and assistant messages become one chat, with its documents
///   (an agent's static and dynamic context) as text before the first user message's text,
///   where rig places them for every provider; `max_tokens`, `temperature` and an output
///   schema (decoded under it by the local model) carry over.
/// - memlane's models call no tools: a request that declares tools is refused (give the
///   agent memlane through `dynamic_context` instead, or use a model that calls tools).
///   Earlier tool calls and results in a history reach the model as text; images, audio,
///   video and files by reference as rig's placeholders ("(image omitted: …)").
/// - The reply is one text block; a model error keeps its status and detail (a
///   `ProviderResponse` with memlane's error body) and whether a retry can help.
pub fn completion_model(llm: Arc<dyn Llm>) -> Model<LlmWire, LlmWire> {
    let wire = LlmWire {
        model: llm.model_id().to_owned(),
        llm,
    };
    Model::new(wire.clone(), wire)
}

/// The rig wire (and transport) of [`completion_model`]: a request goes to the [`Llm`] in
/// process, and its reply comes back as one frame.
#[derive(Clone)]
pub struct LlmWire {
    llm: Arc<dyn Llm>,
    model: String,
}

impl std::fmt::Debug for LlmWire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmWire")
            .field("model", &self.model)
            .finish()
    }
}

/// The one frame of an [`LlmWire`] reply.
#[derive(Debug, Clone)]
pub struct LlmReply(ChatResponse);

/// Decodes an [`LlmReply`] into rig's completion events.
#[derive(Debug, Default)]
pub struct LlmDecoder;

impl<'id> Decoder<'id, Completion, LlmReply> for LlmDecoder {
    type Event = LlmReply;

    fn classify(&self, frame: LlmReply) -> WireEvent<LlmReply> {
        WireEvent::Known(frame)
    }

    fn decode(
        &mut self,
        LlmReply(reply): LlmReply,
        mut out: Out<'id, Completion>,
    ) -> std::result::Result<Flow, ProviderError> {
        out.run(Block::Text, &reply.text)?;
        out.end_run()?;
        out.finish_open()?;
        let usage = rig_core::completion::Usage::new()
            .input_tokens(reply.usage.prompt_tokens)
            .output_tokens(reply.usage.completion_tokens)
            .total_tokens(reply.usage.prompt_tokens + reply.usage.completion_tokens);
        Ok(out.end(Finish {
            usage,
            reason: Some(FinishReason::Stop),
            model: Some(reply.model),
            ..Finish::default()
        }))
    }
}

/// The reply document an [`LlmWire`] records as rig's `raw`: `{"text", "model", "usage"}`.
#[derive(Debug, Default)]
pub struct LlmDocument(Value);

impl Serves<Completion> for LlmDocument {}

impl Reassemble<LlmReply> for LlmDocument {
    fn absorb(&mut self, LlmReply(reply): &LlmReply) {
        self.0 = serde_json::to_value(reply).unwrap_or(Value::Null);
    }

    fn finish(self) -> Value {
        self.0
    }
}

impl ReplayTarget for LlmWire {
    fn api(&self) -> Api {
        Api::from_static("memlane.chat")
    }

    fn provider(&self) -> &str {
        "memlane"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn accepts(&self, _model: &str) -> Accepts {
        Accepts {
            tools: false,
            ..Accepts::TEXT
        }
    }

    /// Text documents only: images, audio, video and files by reference reach the model as
    /// rig's placeholders ("(image omitted: …)").
    fn encodes(&self, _model: &str, media: Media<'_>) -> bool {
        matches!(media, Media::Document(d) if matches!(d.data, DocumentSourceKind::String(_)))
    }

    fn map_options(
        &self,
        _request: &CompletionRequest,
        fields: rig_core::completion::options::OptionFields<'_>,
    ) -> rig_core::completion::options::OptionMap {
        use rig_core::completion::options::{Mapping, OptionFields, OptionMap};
        let OptionFields {
            reasoning,
            cache,
            service_tier,
            verbosity,
            parallel_tool_calls,
            top_p,
            seed,
            stop,
        } = fields;
        let refused = |set: bool| match set {
            true => Mapping::unsupported("memlane's language models take no such option"),
            false => Mapping::Nothing,
        };
        OptionMap {
            reasoning: refused(reasoning.is_some()),
            cache: refused(cache.is_some()),
            service_tier: refused(service_tier.is_some()),
            verbosity: refused(verbosity.is_some()),
            parallel_tool_calls: refused(parallel_tool_calls.is_some()),
            top_p: refused(top_p.is_some()),
            seed: refused(seed.is_some()),
            stop: refused(!stop.is_empty()),
        }
    }
}

impl Wire for LlmWire {
    type Op = Completion;
    type Payload = ChatRequest;
    type Frame = LlmReply;
    type Decoder<'id> = LlmDecoder;
    type Reassembler = LlmDocument;

    fn describe(&self) -> Descriptor<'_> {
        Descriptor::new("memlane")
            .model(Some(self.model.as_str()))
            .replay(self)
    }

    fn encode(
        &self,
        request: CompletionRequest,
        _mode: Mode,
    ) -> std::result::Result<ChatRequest, EncodeError> {
        chat_request(request).map_err(EncodeError::request)
    }

    fn decoder<'id>(&self) -> Self::Decoder<'id> {
        LlmDecoder
    }
}

impl Transport<LlmWire> for LlmWire {
    fn send(&self, payload: ChatRequest, _exchange: Exchange) -> Opening<LlmReply> {
        let llm = Arc::clone(&self.llm);
        Opening::new(async move {
            match llm.chat(payload).await {
                Ok(reply) => Ok(Opened::new(stream::iter([Ok(LlmReply(reply))]))),
                Err(error) => Err(provider_error(&error)),
            }
        })
    }
}

fn provider_error(error: &Error) -> ProviderError {
    let status = http::StatusCode::from_u16(error.status())
        .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::to_string(&error.body()).unwrap_or_else(|_| error.detail());
    ProviderError::from_http_response(status, body).with_transient(Some(error.is_transient()))
}

/// rig's request as memlane's chat request.
fn chat_request(request: CompletionRequest) -> std::result::Result<ChatRequest, String> {
    if !request.tools.is_empty() {
        return Err(format!(
            "memlane's language models call no tools, and this request declares {} ({}): give \
             the agent memlane as dynamic context (AgentBuilder::dynamic_context with a \
             memlane::rig::MemoryIndex), or use a model that calls tools",
            request.tools.len(),
            request
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // rig has already placed the request's documents in the history (as user content
    // before the first user message's text), so the history is the whole chat.
    let mut messages = Vec::with_capacity(request.chat_history.len());
    for message in &request.chat_history {
        messages.push(match message {
            RigMessage::System { content } => Message::new("system", content.clone()),
            RigMessage::User { content } => Message::user(user_text(content)?),
            RigMessage::Assistant(turn) => Message::assistant(assistant_text(&turn.content)),
        });
    }
    let mut chat = ChatRequest::new(messages);
    if let Some(max_tokens) = request.max_tokens {
        chat = chat.max_tokens(u32::try_from(max_tokens).unwrap_or(u32::MAX));
    }
    if let Some(temperature) = request.temperature {
        chat.temperature = temperature as f32;
    }
    if let Some(schema) = request.output_schema {
        chat = chat.schema(schema.to_value());
    }
    Ok(chat)
}

fn user_text(content: &[UserContent]) -> std::result::Result<String, String> {
    let mut parts = Vec::with_capacity(content.len());
    for part in content {
        parts.push(match part {
            UserContent::Text(text) => text.text.clone(),
            UserContent::Document(document) => document.data.to_string(),
            UserContent::ToolResult(result) => {
                let outputs: Vec<String> = result
                    .content
                    .iter()
                    .map(|c| match c {
                        ToolResultContent::Text(text) => text.text.clone(),
                        ToolResultContent::Json { value, .. } => value.to_string(),
                        _ => "[an image]".to_owned(),
                    })
                    .collect();
                format!("Result of {}: {}", result.name, outputs.join("\n"))
            }
            _ => {
                return Err(
                    "memlane's language models read text only: this request holds an \
                            image, audio or video"
                        .to_owned(),
                )
            }
        });
    }
    Ok(parts.join("\n"))
}

fn assistant_text(content: &[AssistantContent]) -> String {
    let parts: Vec<String> = content
        .iter()
        .filter_map(|part| match part {
            AssistantContent::Text(text) => Some(text.text.clone()),
            AssistantContent::ToolCall(call) => Some(format!(
                "Called {} with {}",
                call.function.name,
                call.function.arguments_value()
            )),
            _ => None,
        })
        .collect();
    parts.join("\n")
}
