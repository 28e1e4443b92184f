//! `update`: change a memory's text, metadata or categories.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::limits;
use crate::memory::{Memory, MemoryId};
use crate::ops::awaitable;
use crate::record::{indexed_text, now, Core, MemoryRecord};
use crate::store::{immutable_error, MemoryUpdate, Write, WriteBatch};

/// How many times an update raced by other writers is rebuilt and retried.
const MAX_ATTEMPTS: usize = 8;

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
    pub fn categories(mut self, categories: impl IntoIterator<Item = impl Into<String>>) -> Self {
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
                return Err(Error::invalid_field(
                    "metadata",
                    format!("metadata must be a JSON object, got {other}"),
                ))
            }
        };
        let categories = self
            .categories
            .as_deref()
            .map(limits::categories)
            .transpose()?;
        // Fail fast before paying for an embedding; the write checks again. The context
        // never changes, so the new text is embedded with the one read here.
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
        // The new state is built from the memory as read, and written only if it is still
        // that version (checked in the store's transaction); when another writer got there
        // first, it is built again from what that writer left, so no field is lost.
        let mut attempt = 0;
        let outcome = loop {
            let row = self
                .memory
                .inner
                .store
                .rows(&[id])
                .await?
                .into_iter()
                .find(|r| r.deleted_at.is_none())
                .ok_or(Error::NotFound { id })?;
            let current = &row.record;
            let mut update = MemoryUpdate::new(id, now());
            update.expect = Some(row.version);
            if let (Some(text), Some(vector)) = (&self.text, &vector) {
                update.text = Some((text.clone(), vector.clone()));
            }
            // Keep memlane's digest in step with the text and categories.
            let text = self.text.as_deref().unwrap_or(&current.memory);
            let tags = categories.as_deref().unwrap_or(&current.categories);
            let mut metadata: Map<String, Value> = new_metadata
                .clone()
                .unwrap_or_else(|| current.metadata.clone());
            Core::revised(&current.metadata, text, tags, &[], None).insert_into(&mut metadata);
            update.metadata = Some(metadata);
            update.categories = categories.clone();
            let batch = WriteBatch::new(vec![Write::Update(update)], price);
            match self.memory.commit(batch).await {
                Err(Error::Conflict { .. }) if attempt < MAX_ATTEMPTS && !current.immutable => {
                    attempt += 1;
                }
                other => break other?,
            }
        };
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

awaitable!(UpdateRequest, UpdateResult, "update");
