//! `delete` (one memory) and `delete_all` (every memory of an owner).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::limits;
use crate::memory::{Memory, MemoryId};
use crate::ops::{awaitable, owner_setters};
use crate::record::{now, Owners};
use crate::store::{owner_filter, Write, WriteBatch};

/// The result of a delete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeleteResult {
    /// The ids of the memories deleted.
    pub deleted: Vec<Uuid>,
    /// Credits this call used.
    pub credits_used: u64,
    /// Credits left.
    pub credits_remaining: u64,
}

/// A bulk delete by owner; await it to run it. Built by [`Memory::delete_all`].
#[derive(Debug)]
#[must_use = "a request does nothing until awaited"]
pub struct DeleteAllRequest<'a> {
    memory: &'a Memory,
    owners: Owners,
}

impl Memory {
    /// Soft-deletes one memory: it disappears from get, list and search, and its history
    /// records the deletion. A 404 if it is unknown or already deleted.
    #[tracing::instrument(name = "delete", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn delete(&self, id: impl Into<MemoryId>) -> Result<DeleteResult> {
        let id = id.into().parse()?;
        self.delete_where(Write::Delete {
            id,
            at: now(),
            input: Vec::new(),
            expect: None,
        })
        .await
    }

    /// Soft-deletes every memory of an owner (all given ids must match), for erasure
    /// requests. At least one owner id is required: an empty filter is refused (400), never
    /// taken as "everything".
    pub fn delete_all(&self) -> DeleteAllRequest<'_> {
        DeleteAllRequest {
            memory: self,
            owners: Owners::default(),
        }
    }

    pub(crate) async fn delete_where(&self, write: Write) -> Result<DeleteResult> {
        // Deleting is free, so that erasure is never blocked by an empty balance.
        let outcome = self.commit(WriteBatch::new(vec![write], 0)).await?;
        crate::ops::counted(outcome.changes.len());
        Ok(DeleteResult {
            deleted: outcome.changes.iter().map(|c| c.record.id).collect(),
            credits_used: 0,
            credits_remaining: outcome.credits_remaining,
        })
    }
}

impl<'a> DeleteAllRequest<'a> {
    owner_setters!(owners);

    async fn send(self) -> Result<DeleteResult> {
        if self.owners.is_empty() {
            return Err(Error::invalid(
                "bulk delete needs at least one of user_id, agent_id, app_id or run_id; \
                 an empty filter would delete everything and is refused",
            ));
        }
        limits::owners(&self.owners)?;
        self.memory
            .delete_where(Write::DeleteWhere {
                filter: owner_filter(&self.owners),
                at: now(),
            })
            .await
    }
}

awaitable!(DeleteAllRequest, DeleteResult, "delete_all");
