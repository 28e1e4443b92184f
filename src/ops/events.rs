//! `events`: the durable, ordered log of memory changes, as pages or as a stream that
//! replays from a cursor and then follows live changes.
//!
//! The log is the history of every memory in commit order: each change writes exactly one
//! history record in the transaction that makes it, so there is one event per change, none
//! for a change that rolled back, and events always agree with history. A cursor is a
//! position in that log; it survives restarts, so a subscriber that was away resumes where
//! it stopped and loses nothing.
//!
//! ```no_run
//! # async fn run(memory: memlane::Memory, mut cursor: u64) -> memlane::Result<()> {
//! use futures_util::StreamExt;
//!
//! let mut events = std::pin::pin!(memory.events(cursor));
//! while let Some(event) = events.next().await {
//!     let event = event?;
//!     println!("{:?} {:?} {:?}", event.kind, event.memory_id, event.memory);
//!     cursor = event.cursor; // keep it to resume later
//! }
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_core::Stream;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::memory::Memory;
use crate::record::Owners;
use crate::record::{HistoryEvent, HistoryRecord};
use crate::store::LogQuery;

/// How many events a page holds at most.
pub const MAX_EVENTS_PAGE: usize = 1_000;

/// How often a stream checks for changes made by other handles or processes on the same
/// file (changes made through the same handle wake it at once).
pub const EVENT_POLL: Duration = Duration::from_millis(200);

/// Events read per store call while a stream catches up.
const STREAM_BATCH: usize = 256;

/// What an event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// A memory was added.
    MemoryAdd,
    /// A memory's text, metadata or categories changed.
    MemoryUpdate,
    /// A memory was deleted (one by one, by owner, or with its entity).
    MemoryDelete,
    /// A memory's feedback was set or cleared (`value`, `previous_value`).
    MemoryFeedback,
    /// The project's configuration changed (`value`, `previous_value`).
    ConfigUpdate,
    /// A later fact superseded a memory (`value`: `{"superseded_by", "valid_until"}`); the
    /// memory keeps its text, and is no longer current.
    MemorySupersede,
    /// A superseded memory was made current again.
    MemoryRestore,
}

/// One change in the event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The event's position in the log: pass it back to resume after this event.
    pub cursor: u64,
    /// What happened.
    pub kind: EventKind,
    /// The event's id (for a memory's change, the id of its history record).
    pub id: Uuid,
    /// The memory the event is about; `None` for the project's configuration.
    pub memory_id: Option<Uuid>,
    /// The memory's text after the change (`None` on delete, and for other events).
    pub memory: Option<String>,
    /// Its text before the change (`None` on add, and for other events).
    pub previous_memory: Option<String>,
    /// The new value, for feedback (`{"feedback", "feedback_reason"}`; `None` when cleared)
    /// and configuration (`{"extraction_policy", "label_taxonomy"}`) events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// The value before the change, as `value` (`None` when there was none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_value: Option<Value>,
    /// The memory's owners.
    #[serde(flatten)]
    pub owners: Owners,
    /// The memory's categories after the change.
    pub categories: Vec<String>,
    /// The memory's metadata after the change.
    pub metadata: Map<String, Value>,
    /// When the change was stored.
    pub created_at: DateTime<Utc>,
}

impl Event {
    fn new(cursor: u64, r: HistoryRecord) -> Event {
        let json = |v: Option<String>| v.and_then(|t| serde_json::from_str(&t).ok());
        let (memory, previous_memory, value, previous_value) = if r.event == HistoryEvent::Supersede
        {
            let value = serde_json::json!({
                "superseded_by": r.superseded_by,
                "valid_until": r.created_at,
            });
            (r.new_memory, None, Some(value), None)
        } else if r.event == HistoryEvent::Restore {
            (r.new_memory, None, None, None)
        } else if r.event.is_memory_change() {
            (r.new_memory, r.old_memory, None, None)
        } else {
            (None, None, json(r.new_memory), json(r.old_memory))
        };
        Event {
            cursor,
            kind: match r.event {
                HistoryEvent::Add => EventKind::MemoryAdd,
                HistoryEvent::Update => EventKind::MemoryUpdate,
                HistoryEvent::Delete => EventKind::MemoryDelete,
                HistoryEvent::Feedback => EventKind::MemoryFeedback,
                HistoryEvent::Config => EventKind::ConfigUpdate,
                HistoryEvent::Supersede => EventKind::MemorySupersede,
                HistoryEvent::Restore => EventKind::MemoryRestore,
            },
            id: r.id,
            memory_id: (!r.memory_id.is_nil()).then_some(r.memory_id),
            memory,
            previous_memory,
            value,
            previous_value,
            owners: r.owners,
            categories: r.categories,
            metadata: r.metadata,
            created_at: r.created_at,
        }
    }
}

/// A page of events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventPage {
    /// The events after the requested cursor, oldest first.
    pub results: Vec<Event>,
    /// The cursor to ask from next: the last event's, or the requested one when the page is
    /// empty.
    pub next_cursor: u64,
}

impl Memory {
    /// The events after `cursor` (`0`: from the beginning), oldest first, at most `limit`
    /// (1 to [`MAX_EVENTS_PAGE`]; 400 otherwise).
    #[tracing::instrument(name = "events_after", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn events_after(&self, cursor: u64, limit: usize) -> Result<EventPage> {
        if !(1..=MAX_EVENTS_PAGE).contains(&limit) {
            return Err(Error::invalid_field(
                "limit",
                format!("limit must be between 1 and {MAX_EVENTS_PAGE}, got {limit}"),
            ));
        }
        let results: Vec<Event> = self
            .inner
            .store
            .log(LogQuery::after(cursor, limit))
            .await?
            .into_iter()
            .map(|(c, h)| Event::new(c, h))
            .collect();
        let next_cursor = results.last().map_or(cursor, |e| e.cursor);
        crate::ops::counted(results.len());
        Ok(EventPage {
            results,
            next_cursor,
        })
    }

    /// A stream of every event after `cursor` (`0`: from the beginning): first those already
    /// logged, then each new one as it is committed, for as long as the stream is polled.
    ///
    /// Changes made through this handle (or its clones) arrive at once; changes made by other
    /// handles or processes on the same file within [`EVENT_POLL`]. A storage error is
    /// yielded once and ends the stream; resume from the last cursor received.
    pub fn events(&self, cursor: u64) -> impl Stream<Item = Result<Event>> + Send + 'static {
        struct Follow {
            memory: Memory,
            cursor: u64,
            pending: VecDeque<Event>,
            failed: bool,
        }
        let start = Follow {
            memory: self.clone(),
            cursor,
            pending: VecDeque::new(),
            failed: false,
        };
        futures_util::stream::unfold(start, |mut s| async move {
            if s.failed {
                return None;
            }
            loop {
                if let Some(event) = s.pending.pop_front() {
                    s.cursor = event.cursor;
                    return Some((Ok(event), s));
                }
                // Registered before reading, so a commit between the read and the wait
                // still wakes this stream.
                let inner = std::sync::Arc::clone(&s.memory.inner);
                let changed = inner.changed.notified();
                let mut changed = std::pin::pin!(changed);
                changed.as_mut().enable();
                // Other hosts' commits, where the store hears of them.
                let signal = inner.store.commit_signal();
                let remote = signal.as_ref().map(|s| s.notified());
                let mut remote = std::pin::pin!(remote);
                if let Some(remote) = remote.as_mut().as_pin_mut() {
                    remote.enable();
                }
                match s
                    .memory
                    .inner
                    .store
                    .log(LogQuery::after(s.cursor, STREAM_BATCH))
                    .await
                {
                    Err(e) => {
                        s.failed = true;
                        return Some((Err(e), s));
                    }
                    Ok(batch) if !batch.is_empty() => {
                        s.pending
                            .extend(batch.into_iter().map(|(c, h)| Event::new(c, h)));
                    }
                    Ok(_) => {
                        let woken = async {
                            match remote.as_mut().as_pin_mut() {
                                Some(remote) => {
                                    futures_util::future::select(changed, remote).await;
                                }
                                None => changed.await,
                            }
                        };
                        let _ = tokio::time::timeout(EVENT_POLL, woken).await;
                    }
                }
            }
        })
    }
}
