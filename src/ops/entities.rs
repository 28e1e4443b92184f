//! `entities` (the user, agent, app and run ids that own memories, with counts) and
//! `delete_entity` (an owner id with all of its memories).
//!
//! An entity exists while it owns at least one live memory: it appears with its first
//! memory and disappears with its last, so the list never disagrees with the memories.

use crate::error::{Error, Result};
use crate::limits;
use crate::memory::Memory;
use crate::ops::delete::DeleteResult;
use crate::ops::{awaitable, check_page_size, paging_setters};
use crate::record::{now, Page, Pagination};
use crate::store::{owner_filter, Entity, EntityKind, EntityQuery, Write};

/// A page of entities; await it to run it. Built by [`Memory::entities`].
#[derive(Debug)]
#[must_use = "a request does nothing until awaited"]
pub struct EntitiesRequest<'a> {
    memory: &'a Memory,
    kind: Option<EntityKind>,
    page_size: usize,
    cursor: Option<String>,
}

impl Memory {
    /// Lists entities: every user, agent, app and run id that owns live memories, with how
    /// many (expired ones included) and when they were first created and last changed,
    /// ordered by kind (user, agent, app, run), then id; 100 per page by default.
    pub fn entities(&self) -> EntitiesRequest<'_> {
        EntitiesRequest {
            memory: self,
            kind: None,
            page_size: limits::DEFAULT_PAGE_SIZE,
            cursor: None,
        }
    }

    /// Deletes an entity: soft-deletes every memory it owns (expired ones included), each
    /// with its history record and event. Other owners of those memories keep their other
    /// memories. A 404 when the id owns no live memory.
    #[tracing::instrument(name = "delete_entity", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn delete_entity(&self, kind: EntityKind, id: &str) -> Result<DeleteResult> {
        let owners = kind.owners(id);
        limits::owners(&owners)?;
        let deleted = self
            .delete_where(Write::DeleteWhere {
                filter: owner_filter(&owners),
                at: now(),
            })
            .await?;
        if deleted.deleted.is_empty() {
            return Err(Error::Unknown {
                detail: format!("no {} {id:?} owns any memory", kind.as_str()),
            });
        }
        Ok(deleted)
    }
}

impl EntitiesRequest<'_> {
    /// Only entities of this kind.
    pub fn kind(mut self, kind: EntityKind) -> Self {
        self.kind = Some(kind);
        self
    }

    paging_setters!();

    async fn send(self) -> Result<Page<Entity>> {
        check_page_size(self.page_size)?;
        let after = self.cursor.as_deref().map(decode_cursor).transpose()?;
        let store = &self.memory.inner.store;
        let count = store
            .entities(EntityQuery::new(self.kind, None, usize::MAX))
            .await?
            .len() as u64;
        let mut results = store
            .entities(EntityQuery::new(
                self.kind,
                after,
                self.page_size.saturating_add(1),
            ))
            .await?;
        let more = results.len() > self.page_size;
        results.truncate(self.page_size);
        let next_cursor = if more {
            results
                .last()
                .map(|e| format!("{}:{}", e.kind.as_str(), e.id))
        } else {
            None
        };
        Ok(Page {
            results,
            pagination: Pagination {
                count,
                page_size: self.page_size,
                next_cursor,
            },
        })
    }
}

/// A cursor is `<kind>:<id>` of the last entity of the previous page.
fn decode_cursor(cursor: &str) -> Result<(EntityKind, String)> {
    cursor
        .split_once(':')
        .and_then(|(kind, id)| Some((EntityKind::parse(kind)?, id.to_string())))
        .ok_or_else(|| {
            Error::invalid_field(
                "cursor",
                "cursor is not one this service issued; pass pagination.next_cursor unchanged",
            )
        })
}

awaitable!(EntitiesRequest, Page<Entity>, "entities");
