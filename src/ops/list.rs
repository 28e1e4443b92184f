//! `list`: filtered, paginated listing, newest first (by `created_at`).

use crate::error::{Error, Result};
use crate::limits;
use crate::memory::Memory;
use crate::ops::{awaitable, check_page_size, paging_setters, scope_setters, Scope};
use crate::record::{now, MemoryRecord, Page, Pagination};
use crate::store::{Scan, ScanCursor};

/// A list request; await it to run it. Built by [`Memory::list`].
///
/// Pages are cut by an opaque cursor, not by page number, so memories added while a caller
/// pages through never shift or repeat entries: they appear before the first page.
///
/// ## Defaults
/// `page_size` 100 (1–1000), first page, no filters, expired memories hidden.
#[derive(Debug)]
#[must_use = "a request does nothing until awaited"]
pub struct ListRequest<'a> {
    memory: &'a Memory,
    scope: Scope,
    page_size: usize,
    cursor: Option<String>,
}

impl Memory {
    /// Lists memories, newest first, a page at a time.
    pub fn list(&self) -> ListRequest<'_> {
        ListRequest {
            memory: self,
            scope: Scope::default(),
            page_size: limits::DEFAULT_PAGE_SIZE,
            cursor: None,
        }
    }
}

impl<'a> ListRequest<'a> {
    scope_setters!();

    paging_setters!();

    async fn send(self) -> Result<Page<MemoryRecord>> {
        check_page_size(self.page_size)?;
        let after = match &self.cursor {
            None => None,
            Some(c) => Some(ScanCursor::parse(c).ok_or_else(|| {
                Error::invalid_field(
                    "cursor",
                    "cursor is not one this service issued; pass pagination.next_cursor unchanged",
                )
            })?),
        };
        let filter = self.scope.to_filter()?;
        let mut scan = Scan::new(filter, now(), self.page_size);
        scan.include_expired = self.scope.include_expired;
        scan.after = after;
        let page = self.memory.inner.store.scan(&scan).await?;
        Ok(Page {
            results: page.rows.into_iter().map(|row| row.record).collect(),
            pagination: Pagination {
                count: page.count,
                page_size: self.page_size,
                next_cursor: page.next.map(|n| n.encode()),
            },
        })
    }
}

awaitable!(ListRequest, Page<MemoryRecord>, "list");
