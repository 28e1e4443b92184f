//! `extract`: the synchronous structured extraction of the spec, optionally stored.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::config::ProductVariant;
use crate::error::{Error, Result};
use crate::infer;
use crate::limits;
use crate::memory::Memory;
use crate::ops::{awaitable, owner_setters};
use crate::record::{content_hash, now, Core, MemoryRecord, Message, Owners};
use crate::store::{NewMemory, Write, WriteBatch};

/// The structured record `extract` returns: [`Core`] plus the conversation's time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExtractedCore {
    /// What is worth remembering, in a sentence or two.
    pub summary: String,
    /// Entities named.
    pub entities: Vec<String>,
    /// Labels of the project's taxonomy that fit.
    pub tags: Vec<String>,
    /// The facts worth remembering, each self-contained.
    pub key_facts: Vec<String>,
    /// Importance from 1 (trivia) to 10 (essential).
    pub importance: i64,
    /// When the conversation took place, to the minute: `YYYY-MM-DDTHH:MM` (UTC).
    pub timestamp: String,
}

/// Token usage of the core extraction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CoreUsage {
    /// Tokens of the prompts.
    pub prompt_tokens: u64,
    /// Tokens of the replies.
    pub completion_tokens: u64,
    /// The model that answered.
    pub model: String,
}

/// Token usage of an extraction, per part (`core`; extensions would add theirs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExtractUsage {
    /// The core extraction's usage.
    pub core: CoreUsage,
}

/// The result of `extract`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExtractResult {
    /// The structured record.
    pub core: ExtractedCore,
    /// Extension outputs by extension name; empty when none was asked for.
    pub extensions: Map<String, Value>,
    /// The stored memory's id, when storing was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_id: Option<Uuid>,
    /// Tokens used.
    pub usage: ExtractUsage,
    /// Credits this call used (storing costs what an `add` of one memory costs).
    pub credits_used: u64,
    /// Credits left.
    pub credits_remaining: u64,
}

/// An extraction request; await it to run it. Built by [`Memory::extract`].
///
/// ## Defaults
/// Not stored, no extension, no metadata, the conversation's time is now.
#[derive(Debug)]
#[must_use = "a request does nothing until awaited"]
pub struct ExtractRequest<'a> {
    memory: &'a Memory,
    messages: Vec<Message>,
    owners: Owners,
    store: bool,
    extension: Option<String>,
    metadata: Option<Value>,
    timestamp: Option<DateTime<Utc>>,
}

impl Memory {
    /// Extracts one structured record (`core`) from a conversation, and stores it as a
    /// memory when asked to (its text is the summary, its `metadata.core` the record).
    ///
    /// Belongs to the [`ProductVariant::Structured`] variant: on other projects it is a 403.
    /// Needs a language model (503 without one).
    pub fn extract(&self, messages: impl Into<super::add::Messages>) -> ExtractRequest<'_> {
        ExtractRequest {
            memory: self,
            messages: messages.into().0,
            owners: Owners::default(),
            store: false,
            extension: None,
            metadata: None,
            timestamp: None,
        }
    }
}

impl<'a> ExtractRequest<'a> {
    owner_setters!(owners);

    /// Whether the record is stored as a memory (default `false`). Storing needs an owner.
    pub fn store(mut self, store: bool) -> Self {
        self.store = store;
        self
    }

    /// Asks for an extension's output too. This build ships no extensions, so any name is a
    /// 400 that lists what is available.
    pub fn extension(mut self, name: impl Into<String>) -> Self {
        self.extension = Some(name.into());
        self
    }

    /// Caller metadata for the stored memory (a JSON object).
    pub fn metadata(mut self, metadata: Value) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// When the conversation took place (default: now): the `timestamp` of the result, what
    /// relative dates are counted from, and the stored memory's `created_at`. In the future
    /// (beyond a few minutes) or before 1900: a 400.
    pub fn timestamp(mut self, at: DateTime<Utc>) -> Self {
        self.timestamp = Some(at);
        self
    }

    async fn send(self) -> Result<ExtractResult> {
        let memory = self.memory;
        let variant = memory.product_variant().await?;
        if variant != ProductVariant::Structured {
            return Err(Error::Forbidden {
                detail: "extract belongs to the structured-extraction product variant, and this \
                         project is on the memory variant; use add, or have the operator switch \
                         the project with set_product_variant(ProductVariant::Structured)"
                    .into(),
            });
        }
        limits::messages(&self.messages)?;
        limits::owners(&self.owners)?;
        let at = now();
        limits::timestamp(self.timestamp, at)?;
        if let Some(name) = &self.extension {
            return Err(Error::invalid_field(
                "extension",
                format!(
                    "unknown extension {:?}: this build has no extensions; leave extension unset",
                    name.chars().take(64).collect::<String>()
                ),
            ));
        }
        let mut metadata = limits::metadata_object(self.metadata)?;
        if self.store && self.owners.is_empty() {
            return Err(Error::invalid(
                "extract with store needs at least one of user_id, agent_id, app_id or run_id, \
                 so that the memory has an owner",
            ));
        }
        let llm = memory
            .inner
            .llm
            .clone()
            .ok_or_else(|| Error::NotConfigured {
                detail: "extract needs a language model, and none is configured; configure one \
                     with Memory::builder().llm(…)"
                    .into(),
            })?;
        let spoken_at = self.timestamp.unwrap_or(at);
        let config = memory.config().await?;
        let prices = memory.prices().await?;
        let price = prices.inference + if self.store { prices.add } else { 0 };
        memory.check_affordable(price).await?;
        let labels = config.labels();
        let parsed = infer::digest(
            &*llm,
            &self.messages,
            spoken_at,
            &config.extraction_policy,
            &labels,
        )
        .await?;
        let d = parsed.value;
        let resolve = |text: &str| infer::dates::annotate(text, spoken_at);
        let summary = resolve(&d.summary);
        let key_facts: Vec<String> = d.key_facts.iter().map(|f| resolve(f.trim())).collect();
        let core = ExtractedCore {
            summary,
            entities: d.entities,
            tags: d.tags,
            key_facts,
            importance: d.importance,
            timestamp: spoken_at.format("%Y-%m-%dT%H:%M").to_string(),
        };
        let usage = ExtractUsage {
            core: CoreUsage {
                prompt_tokens: parsed.usage.prompt_tokens,
                completion_tokens: parsed.usage.completion_tokens,
                model: parsed.model,
            },
        };
        if !self.store {
            return Ok(ExtractResult {
                core,
                extensions: Map::new(),
                memory_id: None,
                usage,
                credits_used: price,
                credits_remaining: memory.charge(price).await?,
            });
        }
        let id = Uuid::now_v7();
        let stored_core = Core {
            summary: core.summary.clone(),
            entities: core.entities.clone(),
            tags: core.tags.clone(),
            key_facts: core.key_facts.clone(),
            importance: core.importance,
        };
        stored_core.insert_into(&mut metadata);
        let record = MemoryRecord {
            id,
            hash: content_hash(&core.summary),
            memory: core.summary.clone(),
            owners: self.owners,
            metadata,
            categories: core.tags.clone(),
            immutable: false,
            expiration_date: None,
            created_at: spoken_at,
            updated_at: at,
            context: None,
            valid_from: spoken_at,
            valid_until: None,
            superseded_by: None,
        };
        let vector = memory
            .embed_documents(std::slice::from_ref(&record.memory))
            .await?
            .pop()
            .ok_or_else(|| Error::internal("no vector"))?;
        let outcome = memory
            .commit(WriteBatch::new(
                vec![Write::Insert(NewMemory::new(
                    record,
                    vector.clone(),
                    self.messages,
                ))],
                price,
            ))
            .await?;
        Ok(ExtractResult {
            core,
            extensions: Map::new(),
            memory_id: Some(id),
            usage,
            credits_used: price,
            credits_remaining: outcome.credits_remaining,
        })
    }
}

awaitable!(ExtractRequest, ExtractResult, "extract");
