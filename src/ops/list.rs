//! `list`: filtered, paginated listing, newest first.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::filter::Filter;
use crate::limits;
use crate::memory::Memory;
use crate::ops::search::combine;
use crate::ops::{awaitable, owner_setters};
use crate::record::{now, MemoryRecord, Owners, Page, Pagination};
use crate::store::ListQuery;

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
    owners: Owners,
    metadata: Option<Value>,
    categories: Option<Vec<String>>,
    filter: Option<Filter>,
    filter_json: Option<Value>,
    page_size: usize,
    cursor: Option<String>,
    include_expired: bool,
}

impl Memory {
    /// Lists memories, newest first, a page at a time.
    pub fn list(&self) -> ListRequest<'_> {
        ListRequest {
            memory: self,
            owners: Owners::default(),
            metadata: None,
            categories: None,
            filter: None,
            filter_json: None,
            page_size: limits::DEFAULT_PAGE_SIZE,
            cursor: None,
            include_expired: false,
        }
    }
}

impl<'a> ListRequest<'a> {
    owner_setters!();

    /// Only memories whose metadata has these key–value pairs.
    pub fn metadata(mut self, metadata: Value) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// Only memories with at least one of these categories.
    pub fn categories<I, S>(mut self, categories: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.categories = Some(categories.into_iter().map(Into::into).collect());
        self
    }

    /// Only memories matching this filter.
    pub fn filter(mut self, filter: Filter) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Only memories matching this filter, in its JSON form (400 if malformed).
    pub fn filters(mut self, filters: Value) -> Self {
        self.filter_json = Some(filters);
        self
    }

    /// Memories per page (1–1000, default 100).
    pub fn page_size(mut self, n: usize) -> Self {
        self.page_size = n;
        self
    }

    /// Continues after a previous page (its `pagination.next_cursor`).
    pub fn cursor(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }

    /// Includes expired memories.
    pub fn include_expired(mut self, yes: bool) -> Self {
        self.include_expired = yes;
        self
    }

    async fn send(self) -> Result<Page<MemoryRecord>> {
        if !(1..=limits::MAX_PAGE_SIZE).contains(&self.page_size) {
            return Err(Error::invalid(format!(
                "page_size must be 1–{}, got {}",
                limits::MAX_PAGE_SIZE,
                self.page_size
            )));
        }
        let before = match &self.cursor {
            None => None,
            Some(c) => Some(c.parse::<u64>().map_err(|_| {
                Error::invalid(
                    "cursor is not one this service issued; pass pagination.next_cursor unchanged",
                )
            })?),
        };
        let filter = combine(
            &self.owners,
            self.metadata.as_ref(),
            self.categories.as_deref(),
            self.filter,
            self.filter_json.as_ref(),
        )?;
        let mut query = ListQuery::new(filter, now(), self.page_size);
        query.include_expired = self.include_expired;
        query.before = before;
        let page = self.memory.inner.store.list(query).await?;
        Ok(Page {
            results: page.records,
            pagination: Pagination {
                count: page.count,
                page_size: self.page_size,
                next_cursor: page.next.map(|n| n.to_string()),
            },
        })
    }
}

awaitable!(ListRequest, Page<MemoryRecord>);
