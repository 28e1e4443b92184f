//! `restore`: undo a supersession. A memory a later fact superseded is current again.

use crate::error::{Error, Result};
use crate::memory::{Memory, MemoryId};
use crate::record::{now, HistoryEvent, MemoryRecord};
use crate::store::{Write, WriteBatch};

impl Memory {
    /// Makes a superseded memory current again: its `valid_until` and `superseded_by` are
    /// cleared, and its history records a RESTORE. The memory that superseded it stays as
    /// it is (both are current afterwards; delete or update it if it is wrong too). Nothing
    /// inference does is lost, so one call undoes a wrong supersession.
    ///
    /// A 404 if the memory is unknown or deleted, a 409 if it is current. Free.
    #[tracing::instrument(name = "restore", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn restore(&self, id: impl Into<MemoryId>) -> Result<MemoryRecord> {
        let id = id.into().parse()?;
        let outcome = self
            .commit(WriteBatch::new(vec![Write::Restore { id, at: now() }], 0))
            .await?;
        crate::ops::counted(outcome.changes.len());
        outcome
            .changes
            .into_iter()
            .find(|c| c.event == HistoryEvent::Restore)
            .map(|c| c.record)
            .ok_or_else(|| Error::internal("a restore committed no change"))
    }
}
