//! `update`: change a memory's text, metadata or categories.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::limits;
use crate::memory::{Memory, MemoryId};
use crate::ops::add::verbatim_core;
use crate::ops::awaitable;
use crate::record::{indexed_text, now, MemoryRecord};
use crate::store::{immutable_error, MemoryUpdate, Write, WriteBatch};

/// The result of `update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct UpdateResult {
    /// The memory after the change.
    #[serde(flatten)]
    pub memory: MemoryRecord,
    /// Credits this call used.
    pub credits_used: u64,
    /// Credits left.
    pub credits_remaining: u64,
}

/// An update request; await it to run it. Built by [`Memory::update`].
#[derive(Debug)]
#[must_use = "a request does nothing until awaited"]
pub struct UpdateRequest<'a> {
    memory: &'a Memory,
    id: MemoryId,
    text: Option<String>,
    metadata: Option<Value>,
    categories: Option<Vec<String>>,
}

impl Memory {
    /// Changes a memory. A new text is re-embedded. Immutable memories are refused (409),
    /// deleted or unknown ones are a 404; the change lands in the memory's history.
    pub fn update(&self, id: impl Into<MemoryId>) -> UpdateRequest<'_> {
        UpdateRequest {
            memory: self,
            id: id.into(),
            text: None,
            metadata: None,
            categories: None,
        }
    }
}

impl<'a> UpdateRequest<'a> {
    /// The new text.
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// New caller metadata, replacing the old (a JSON object; `core` is kept by memlane).
    pub fn metadata(mut self, metadata: Value) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// New categories, replacing the old.
    pub fn categories<I, S>(mut self, categories: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.categories = Some(categories.into_iter().map(Into::into).collect());
        self
    }

    async fn send(self) -> Result<UpdateResult> {
        let id = self.id.parse()?;
        let price = self.memory.prices().await?.update;
        if self.text.is_none() && self.metadata.is_none() && self.categories.is_none() {
            return Err(Error::invalid(
                "nothing to update: give a new text, metadata or categories",
            ));
        }
        if let Some(t) = &self.text {
            limits::text("text", t)?;
        }
        let new_metadata = match self.metadata {
            None => None,
            Some(Value::Object(m)) => {
                limits::metadata(&m)?;
                Some(m)
            }
            Some(other) => {
                return Err(Error::invalid(format!(
                    "metadata must be a JSON object, got {other}"
                )))
            }
        };
        let categories = self
            .categories
            .as_deref()
            .map(limits::categories)
            .transpose()?;
        // Fail fast before paying for an embedding; the write below checks again.
        // The context never changes, so the new text is embedded with the one read here.
        let current = self.memory.get(id).await?;
        if current.immutable {
            return Err(immutable_error(id));
        }
        let vector = match &self.text {
            Some(text) => Some(
                self.memory
                    .embed_documents(&[indexed_text(text, current.context.as_deref())])
                    .await?
                    .pop()
                    .ok_or_else(|| Error::internal("no vector"))?,
            ),
            None => None,
        };
        let text = self.text;
        // Read the memory and write its new state under the write gate, so that a
        // concurrent update cannot slip in between and be overwritten.
        let outcome = self
            .memory
            .commit_with(move |memory| async move {
                let current = memory.get(id).await?;
                let mut update = MemoryUpdate::new(id, now());
                let mut keyed = Vec::new();
                if let (Some(text), Some(vector)) = (&text, vector) {
                    keyed.push((id, vector.clone()));
                    update.text = Some((text.clone(), vector));
                }
                // Keep memlane's digest in step with the text and categories.
                let text = text.as_deref().unwrap_or(&current.memory);
                let tags = categories.as_deref().unwrap_or(&current.categories);
                let mut metadata: Map<String, Value> =
                    new_metadata.unwrap_or_else(|| current.metadata.clone());
                let mut core = current.metadata.get("core").cloned().unwrap_or(Value::Null);
                if let Value::Object(c) = &mut core {
                    c.insert("summary".into(), Value::String(text.to_owned()));
                    c.insert("key_facts".into(), serde_json::json!([text]));
                    c.insert("tags".into(), serde_json::json!(tags));
                } else {
                    core = verbatim_core(text, tags);
                }
                metadata.insert("core".into(), core);
                update.metadata = Some(metadata);
                update.categories = categories;
                Ok((WriteBatch::new(vec![Write::Update(update)], price), keyed))
            })
            .await?;
        let memory = outcome
            .changes
            .into_iter()
            .next()
            .map(|c| c.record)
            .ok_or_else(|| Error::internal("update committed no change"))?;
        Ok(UpdateResult {
            memory,
            credits_used: price,
            credits_remaining: outcome.credits_remaining,
        })
    }
}

awaitable!(UpdateRequest, UpdateResult);
