//! `add`: store messages (or facts) as memories.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::limits;
use crate::memory::{prices, Memory};
use crate::ops::{awaitable, owner_setters};
use crate::record::{
    content_hash, indexed_text, now, Core, HistoryEvent, MemoryRecord, Message, Owners,
    DEFAULT_IMPORTANCE,
};
use crate::store::{NewMemory, Write, WriteBatch};

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
    /// What happened to it (`ADD`).
    pub event: HistoryEvent,
    /// Its metadata, `core` included.
    pub metadata: Map<String, Value>,
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
    infer: bool,
}

impl Memory {
    /// Stores memories from chat messages (or from a text, taken as one user message).
    ///
    /// With `.infer(false)` each message is stored verbatim as one memory, its role kept in
    /// the history and as `metadata.role` (unless the caller's metadata has a `role`), and
    /// the message it replied to as its [`context`](MemoryRecord::context). With inference (the default) a language model extracts facts first;
    /// that needs a model configured on the builder, and is a 503 without one.
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
            infer: true,
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
    pub fn categories<I, S>(mut self, categories: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
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

    /// Whether a language model extracts facts (default `true`), or each message is stored
    /// verbatim (`false`).
    pub fn infer(mut self, infer: bool) -> Self {
        self.infer = infer;
        self
    }

    async fn send(self) -> Result<AddResult> {
        let at = now();
        let metadata = match self.metadata {
            None => Map::new(),
            Some(Value::Object(m)) => m,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "metadata must be a JSON object, got {other}"
                )))
            }
        };
        limits::metadata(&metadata)?;
        if self.owners.is_empty() {
            return Err(Error::invalid(
                "add needs at least one of user_id, agent_id, app_id or run_id, so that the memory has an owner",
            ));
        }
        limits::owners(&self.owners)?;
        let categories = limits::categories(&self.categories)?;
        limits::expiry(self.expiry, at)?;
        if self.messages.is_empty() {
            return Err(Error::invalid(
                "messages is empty; give at least one message",
            ));
        }
        if self.messages.len() > limits::MAX_MESSAGES {
            return Err(Error::TooLarge {
                detail: format!(
                    "{} messages in one add; the limit is {}: send them in smaller batches",
                    self.messages.len(),
                    limits::MAX_MESSAGES
                ),
            });
        }
        for (i, m) in self.messages.iter().enumerate() {
            limits::role(i, &m.role)?;
            limits::text(&format!("message {i}"), &m.content)?;
        }
        if self.infer {
            return Err(Error::Unavailable {
                detail: "add with inference needs a language model, and none is configured; \
                         configure one on Memory::builder(), or call .infer(false) to store the \
                         messages verbatim"
                    .into(),
            });
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
        let vectors = self.memory.embed_documents(&texts).await?;
        let mut writes = Vec::with_capacity(texts.len());
        let mut keyed = Vec::with_capacity(texts.len());
        for ((message, vector), context) in self.messages.into_iter().zip(vectors).zip(contexts) {
            let id = Uuid::now_v7();
            let mut meta = metadata.clone();
            meta.insert("core".into(), verbatim_core(&message.content, &categories));
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
                created_at: at,
                updated_at: at,
                context,
            };
            keyed.push((id, vector.clone()));
            writes.push(Write::Insert(NewMemory::new(record, vector, vec![message])));
        }
        let credits_used = prices::ADD * writes.len() as u64;
        let outcome = self
            .memory
            .commit(WriteBatch::new(writes, credits_used), keyed)
            .await?;
        Ok(AddResult {
            results: outcome
                .changes
                .into_iter()
                .map(|c| AddedMemory {
                    id: c.record.id,
                    memory: c.record.memory,
                    event: c.event,
                    metadata: c.record.metadata,
                })
                .collect(),
            credits_used,
            credits_remaining: outcome.credits_remaining,
        })
    }
}

awaitable!(AddRequest, AddResult);

/// The `core` digest of a memory stored without a model: the text is its own summary and
/// key fact, the categories its tags.
pub(crate) fn verbatim_core(text: &str, categories: &[String]) -> Value {
    let core = Core {
        summary: text.to_owned(),
        entities: Vec::new(),
        tags: categories.to_vec(),
        key_facts: vec![text.to_owned()],
        importance: DEFAULT_IMPORTANCE,
    };
    serde_json::to_value(core).unwrap_or(Value::Null)
}
