//! `get` and `history`: read one memory, or its changes.

use crate::error::{Error, Result};
use crate::memory::{Memory, MemoryId};
use crate::record::{HistoryRecord, MemoryRecord};

impl Memory {
    /// One live memory by id. Expired memories are still returned; deleted ones are a 404.
    pub async fn get(&self, id: impl Into<MemoryId>) -> Result<MemoryRecord> {
        let id = id.into().parse()?;
        self.inner
            .store
            .get(id)
            .await?
            .ok_or(Error::NotFound { id })
    }

    /// Every change to a memory (deleted ones included), oldest first: ADD, then UPDATEs with
    /// old and new text, then DELETE. A 404 if the id never existed.
    pub async fn history(&self, id: impl Into<MemoryId>) -> Result<Vec<HistoryRecord>> {
        let id = id.into().parse()?;
        let history = self.inner.store.history(id).await?;
        if history.is_empty() {
            return Err(Error::NotFound { id });
        }
        Ok(history)
    }
}
