//! `add`: store messages (or facts) as memories.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::limits;
use crate::llm::Usage;
use crate::memory::Memory;
use crate::ops::{awaitable, owner_setters};
use crate::record::{
    content_hash, indexed_text, now, Core, HistoryEvent, MemoryRecord, Message, Owners,
    DEFAULT_IMPORTANCE,
};

mod inferred;
mod plan;

use crate::store::{NewMemory, Write, WriteBatch};
use inferred::add_inferred;
use plan::Context;

/// What `add` takes: chat messages, or plain text (one user message).
#[derive(Debug, Clone, Default)]
pub struct Messages(pub Vec<Message>);

impl From<Vec<Message>> for Messages {
    fn from(v: Vec<Message>) -> Self {
        Messages(v)
    }
}

impl From<&[Message]> for Messages {
    fn from(v: &[Message]) -> Self {
        Messages(v.to_vec())
    }
}

impl From<Message> for Messages {
    fn from(m: Message) -> Self {
        Messages(vec![m])
    }
}

impl From<&str> for Messages {
    fn from(s: &str) -> Self {
        Messages(vec![Message::user(s)])
    }
}

impl From<String> for Messages {
    fn from(s: String) -> Self {
        Messages(vec![Message::user(s)])
    }
}

/// One memory stored by `add`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AddedMemory {
    /// The new memory's id.
    pub id: Uuid,
    /// Its text.
    pub memory: String,
    /// What happened to it: `ADD` for a new memory; with inference also `SUPERSEDE` (an
    /// existing memory a new fact of this call superseded: it keeps its text and history,
    /// and is no longer current; `superseded_by` names the new memory).
    pub event: HistoryEvent,
    /// Its metadata, `core` included.
    pub metadata: Map<String, Value>,
    /// For `SUPERSEDE`, the new memory that superseded it; for an `ADD` stored as history
    /// (a statement older than the memory it would have superseded), that memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<Uuid>,
}

impl AddedMemory {
    pub(crate) fn new(
        id: Uuid,
        memory: String,
        event: HistoryEvent,
        metadata: Map<String, Value>,
    ) -> Self {
        AddedMemory {
            id,
            memory,
            event,
            metadata,
            superseded_by: None,
        }
    }
}

/// The result of `add`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AddResult {
    /// The memories stored, in the order of the messages.
    pub results: Vec<AddedMemory>,
    /// Credits this call used.
    pub credits_used: u64,
    /// Credits left.
    pub credits_remaining: u64,
    /// Tokens the language model used (zero without inference).
    #[serde(default)]
    pub usage: Usage,
    /// Whether a language model extracted the facts. `false` when the messages were
    /// stored verbatim: asked for with `.infer(false)`, or by default when the memory has
    /// no language model.
    #[serde(default)]
    pub inferred: bool,
}

/// A request to store memories; await it to run it. Built by [`Memory::add`].
#[derive(Debug)]
#[must_use = "a request does nothing until awaited"]
pub struct AddRequest<'a> {
    memory: &'a Memory,
    messages: Vec<Message>,
    owners: Owners,
    metadata: Option<Value>,
    categories: Vec<String>,
    expiry: Option<DateTime<Utc>>,
    immutable: bool,
    /// Asked for with `infer`; by default, whether the memory has a language model.
    infer: Option<bool>,
    timestamp: Option<DateTime<Utc>>,
    vectors: Option<Vec<Vec<f32>>>,
}

impl Memory {
    /// Stores memories from chat messages (or from a text, taken as one user message).
    ///
    /// With inference a language model extracts the facts worth keeping, following the
    /// project's [configuration](crate::config::ProjectConfig), and reconciles each with
    /// the owner's similar memories: `ADD`, `UPDATE` (the fact takes the place of a memory
    /// it supersedes) or nothing (already known). Immutable memories are never changed.
    /// Every change of one call commits together, or none does.
    ///
    /// Without inference each message is stored verbatim as one memory, its role kept in
    /// the history and as `metadata.role` (unless the caller's metadata has a `role`), and
    /// the message it replied to as its [`context`](MemoryRecord::context).
    ///
    /// Which one: [`infer`](AddRequest::infer) says; by default, inference when the memory
    /// has a language model ([`MemoryBuilder::llm`](crate::MemoryBuilder::llm)) and
    /// verbatim when it has none, so an add never fails for want of a model. The result's
    /// [`inferred`](AddResult::inferred) tells which happened. `.infer(true)` without a
    /// model is a 503.
    ///
    /// At least one owner id (`user`, `agent`, `app` or `run`) is required.
    pub fn add(&self, messages: impl Into<Messages>) -> AddRequest<'_> {
        AddRequest {
            memory: self,
            messages: messages.into().0,
            owners: Owners::default(),
            metadata: None,
            categories: Vec::new(),
            expiry: None,
            immutable: false,
            infer: None,
            timestamp: None,
            vectors: None,
        }
    }
}

impl<'a> AddRequest<'a> {
    owner_setters!(owners);

    /// Caller metadata stored with every memory (a JSON object; the key `core` is reserved).
    pub fn metadata(mut self, metadata: Value) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// Categories (labels) given to every memory.
    pub fn categories(mut self, categories: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.categories = categories.into_iter().map(Into::into).collect();
        self
    }

    /// When the memories stop being returned by search and list. Must be in the future.
    pub fn expiry(mut self, at: DateTime<Utc>) -> Self {
        self.expiry = Some(at);
        self
    }

    /// Marks the memories immutable: never changed by `update`, extraction or consolidation.
    pub fn immutable(mut self, immutable: bool) -> Self {
        self.immutable = immutable;
        self
    }

    /// When the conversation took place (default: now), for importing old conversations as
    /// they happened. Every memory the call stores gets it as its `created_at`, so lists
    /// and `created_at` filters place it where it happened; its `updated_at`, its history
    /// and its events keep the time it was stored, and an expiry stays relative to the
    /// storage time. Relative dates in the conversation ("next Friday") are resolved
    /// against it. A fact older than a memory it would change (by `created_at`) never
    /// replaces it. A time in the future (beyond a few minutes of clock skew) or before
    /// 1900 is a 400.
    pub fn timestamp(mut self, at: DateTime<Utc>) -> Self {
        self.timestamp = Some(at);
        self
    }

    /// Whether a language model extracts facts (`true`: a 503 when the memory has no
    /// language model), or each message is stored verbatim (`false`). By default, `true`
    /// exactly when the memory has a language model.
    pub fn infer(mut self, infer: bool) -> Self {
        self.infer = Some(infer);
        self
    }

    /// Stores these vectors instead of embedding the messages: one per message, in order,
    /// of the embedder's dimension (normalised to unit length), for bulk imports whose
    /// embeddings are already computed. They must come from the store's embedding model,
    /// or searches will compare unlike vectors. Verbatim adds only: with inference, or
    /// with one vector too many or too few, it is a 400; a vector of another dimension,
    /// with NaN or of zero length, a 422; either way nothing is stored.
    pub fn vectors(mut self, vectors: Vec<Vec<f32>>) -> Self {
        self.vectors = Some(vectors);
        self
    }

    async fn send(self) -> Result<AddResult> {
        let at = now();
        let metadata = limits::metadata_object(self.metadata)?;
        if self.owners.is_empty() {
            return Err(Error::invalid(
                "add needs at least one of user_id, agent_id, app_id or run_id, so that the memory has an owner",
            ));
        }
        limits::owners(&self.owners)?;
        let categories = limits::categories(&self.categories)?;
        limits::expiry(self.expiry, at)?;
        limits::timestamp(self.timestamp, at)?;
        limits::messages(&self.messages)?;
        let created_at = self.timestamp.unwrap_or(at);
        let infer = self.infer.unwrap_or(self.memory.llm().is_some());
        let given = match self.vectors {
            Some(_) if infer => {
                return Err(Error::invalid_field(
                    "vectors",
                    "vectors can be given only with .infer(false): with inference, the stored \
                     facts are not the messages",
                ))
            }
            Some(vectors) if vectors.len() != self.messages.len() => {
                return Err(Error::invalid_field(
                    "vectors",
                    format!(
                        "{} vectors for {} messages: give one vector per message",
                        vectors.len(),
                        self.messages.len()
                    ),
                ))
            }
            Some(vectors) => {
                let dimension = self.memory.space().dimension;
                if dimension == 0 {
                    return Err(Error::invalid_field(
                        "vectors",
                        "this store has no embedding model, so it keeps no vectors: add \
                         without vectors, or give it a model first with reembed",
                    ));
                }
                let vectors: Vec<Vec<f32>> = vectors
                    .into_iter()
                    .map(|v| crate::embed::normalize(v, dimension))
                    .collect::<Result<_>>()?;
                Some(vectors)
            }
            None => None,
        };
        if infer {
            let cx = Context {
                messages: self.messages,
                owners: self.owners,
                metadata,
                categories,
                expiry: self.expiry,
                immutable: self.immutable,
                at,
                spoken_at: created_at,
            };
            return add_inferred(self.memory, cx).await;
        }

        // A message that replies to someone else's is read with it, its context: an answer
        // is found by its question. Messages in a row from one role (a list of facts) are
        // read on their own.
        let contexts: Vec<Option<String>> = std::iter::once(None)
            .chain(self.messages.windows(2).map(|pair| match pair {
                [before, message] if before.role != message.role => Some(before.content.clone()),
                _ => None,
            }))
            .collect();
        let texts: Vec<String> = self
            .messages
            .iter()
            .zip(&contexts)
            .map(|(m, context)| indexed_text(&m.content, context.as_deref()))
            .collect();
        let vectors = match given {
            Some(vectors) => vectors,
            None => self.memory.embed_documents(&texts).await?,
        };
        let mut writes = Vec::with_capacity(texts.len());
        for ((message, vector), context) in self.messages.into_iter().zip(vectors).zip(contexts) {
            let id = Uuid::now_v7();
            let mut meta = metadata.clone();
            Core::of_text(
                &message.content,
                &categories,
                Vec::new(),
                DEFAULT_IMPORTANCE,
            )
            .insert_into(&mut meta);
            meta.entry("role")
                .or_insert_with(|| Value::String(message.role.clone()));
            let record = MemoryRecord {
                id,
                hash: content_hash(&message.content),
                memory: message.content.clone(),
                owners: self.owners.clone(),
                metadata: meta,
                categories: categories.clone(),
                immutable: self.immutable,
                expiration_date: self.expiry,
                created_at,
                updated_at: at,
                context,
                valid_from: created_at,
                valid_until: None,
                superseded_by: None,
            };
            writes.push(Write::Insert(NewMemory::new(record, vector, vec![message])));
        }
        let credits_used = self.memory.prices().await?.add * writes.len() as u64;
        let outcome = self
            .memory
            .commit(WriteBatch::new(writes, credits_used))
            .await?;
        Ok(AddResult::new(
            outcome
                .changes
                .into_iter()
                .map(|c| AddedMemory::new(c.record.id, c.record.memory, c.event, c.record.metadata))
                .collect(),
            credits_used,
            outcome.credits_remaining,
            Usage::default(),
        )
        .verbatim())
    }
}

awaitable!(AddRequest, AddResult, "add");
