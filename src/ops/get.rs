//! `get` and `history`: read one memory, or its changes.

use crate::error::{Error, Result};
use crate::memory::{Memory, MemoryId};
use crate::record::{HistoryRecord, MemoryRecord};
use crate::store::LogQuery;

impl Memory {
    /// One live memory by id. Expired memories are still returned; deleted ones are a 404.
    #[tracing::instrument(name = "get", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn get(&self, id: impl Into<MemoryId>) -> Result<MemoryRecord> {
        let id = id.into().parse()?;
        self.inner
            .store
            .rows(&[id])
            .await?
            .into_iter()
            .find(|row| row.deleted_at.is_none())
            .map(|row| row.record)
            .ok_or(Error::NotFound { id })
    }

    /// Every change to a memory (deleted ones included), oldest first: ADD, then UPDATEs with
    /// old and new text, then DELETE. A 404 if the id never existed.
    #[tracing::instrument(name = "history", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn history(&self, id: impl Into<MemoryId>) -> Result<Vec<HistoryRecord>> {
        let id = id.into().parse()?;
        let history: Vec<HistoryRecord> = self
            .inner
            .store
            .log(LogQuery::of(id))
            .await?
            .into_iter()
            .map(|(_, h)| h)
            .filter(|h| h.event.is_memory_change())
            .collect();
        if history.is_empty() {
            return Err(Error::NotFound { id });
        }
        crate::ops::counted(history.len());
        Ok(history)
    }
}
