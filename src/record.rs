//! The records memlane stores and returns: memories, messages, history, pages.

use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

/// One chat message, as given to [`Memory::add`](crate::Memory::add).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who spoke: `user`, `assistant`, `system`, or a speaker's name.
    pub role: String,
    /// What was said.
    pub content: String,
}

impl Message {
    /// A message with the given role and content.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            role: role.into(),
            content: content.into(),
        }
    }

    /// A message from the user.
    pub fn user(content: impl Into<String>) -> Self {
        Message::new("user", content)
    }

    /// A message from the assistant.
    pub fn assistant(content: impl Into<String>) -> Self {
        Message::new("assistant", content)
    }
}

/// The ids a memory belongs to. At least one of `user_id`, `agent_id`, `app_id` or `run_id`
/// is set on every stored memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Owners {
    /// The user the memory is about.
    pub user_id: Option<String>,
    /// The agent the memory belongs to.
    pub agent_id: Option<String>,
    /// The application the memory belongs to.
    pub app_id: Option<String>,
    /// The session (run) the memory came from.
    pub run_id: Option<String>,
}

impl Owners {
    /// Whether no owner id is set.
    pub fn is_empty(&self) -> bool {
        self.user_id.is_none()
            && self.agent_id.is_none()
            && self.app_id.is_none()
            && self.run_id.is_none()
    }
}

/// The `metadata.core` object of a memory: a structured digest of its text.
///
/// Without a language model (`infer = false`) memlane fills it from what the caller gave:
/// `summary` and `key_facts` hold the text itself, `tags` the categories, `entities` stays
/// empty and `importance` is the caller's value or 5 on the scale 1–10.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Core {
    /// Summary of the memory.
    pub summary: String,
    /// Entities mentioned.
    pub entities: Vec<String>,
    /// Tags or labels.
    pub tags: Vec<String>,
    /// Key facts.
    pub key_facts: Vec<String>,
    /// Importance from 1 (trivia) to 10 (essential).
    pub importance: i64,
}

/// The importance given to a memory when nothing rated it.
pub const DEFAULT_IMPORTANCE: i64 = 5;

impl Core {
    /// The digest of a memory's text: the text is its summary and its key fact, the
    /// categories its tags.
    pub(crate) fn of_text(
        text: &str,
        categories: &[String],
        entities: Vec<String>,
        importance: i64,
    ) -> Core {
        Core {
            summary: text.to_owned(),
            entities,
            tags: categories.to_vec(),
            key_facts: vec![text.to_owned()],
            importance,
        }
    }

    /// The digest after a memory's text or categories change: that of the new text, keeping
    /// the entities of the old digest (with `more` added) and the higher importance.
    pub(crate) fn revised(
        old: &Map<String, Value>,
        text: &str,
        categories: &[String],
        more: &[String],
        importance: Option<i64>,
    ) -> Core {
        let old = old.get("core");
        let entities: Vec<String> = old
            .and_then(|c| c.get("entities"))
            .and_then(|e| serde_json::from_value(e.clone()).ok())
            .unwrap_or_default();
        let old_importance = old
            .and_then(|c| c.get("importance"))
            .and_then(Value::as_i64);
        let importance = match (old_importance, importance) {
            (Some(a), Some(b)) => a.max(b),
            (a, b) => a.or(b).unwrap_or(DEFAULT_IMPORTANCE),
        };
        Core::of_text(text, categories, union(&entities, more), importance)
    }

    /// Stores the digest as `metadata.core`.
    pub(crate) fn insert_into(self, metadata: &mut Map<String, Value>) {
        metadata.insert(
            "core".into(),
            serde_json::to_value(self).unwrap_or(Value::Null),
        );
    }
}

/// `a`, then the items of `b` it lacks, in order (labels and entity lists stay small).
pub(crate) fn union(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = a.to_vec();
    for item in b {
        if !out.contains(item) {
            out.push(item.clone());
        }
    }
    out
}

/// A stored memory, as returned by `get`, `list` and `add`. Stores construct it, so its
/// fields are all public.
///
/// A memory is *current* until a later fact supersedes it: then it keeps its text and gets
/// `valid_until` and `superseded_by`, and reads return it only when asked for what was true
/// at a time before (`as_of`) or for superseded memories too (`include_superseded`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "StoredRecord")]
pub struct MemoryRecord {
    /// The memory's id.
    pub id: Uuid,
    /// The fact, as text.
    pub memory: String,
    /// Who the memory belongs to.
    #[serde(flatten)]
    pub owners: Owners,
    /// Caller metadata, plus the `core` object.
    pub metadata: Map<String, Value>,
    /// Labels of the memory.
    pub categories: Vec<String>,
    /// Never changed by later extraction, consolidation or `update`.
    pub immutable: bool,
    /// When the memory stops being returned by search and list (`None`: never).
    pub expiration_date: Option<DateTime<Utc>>,
    /// When the memory was stored.
    pub created_at: DateTime<Utc>,
    /// When the memory's text or metadata last changed.
    pub updated_at: DateTime<Utc>,
    /// SHA-256 of the text (hex), for exact-duplicate detection.
    pub hash: String,
    /// The message a memory stored verbatim (`infer = false`) replied to: the one before
    /// it in the same `add` call, when another role said it. Search reads it with the text
    /// (at lower weight for keywords), so that an answer such as "Yes, last May" is found by
    /// its question. `None` for the first message, for a message following one of its own
    /// role, and for extracted facts, which stand on their own. `update` keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Since when the fact holds: the time it was said (the `add`'s `timestamp`, or when it
    /// was stored).
    pub valid_from: DateTime<Utc>,
    /// Until when the fact held: when a later statement superseded it (`None`: it is
    /// current).
    pub valid_until: Option<DateTime<Utc>>,
    /// The memory that superseded it, if one did.
    pub superseded_by: Option<Uuid>,
}

/// A memory as serialised before it had a validity: `valid_from` defaults to `created_at`.
#[derive(Deserialize)]
struct StoredRecord {
    id: Uuid,
    memory: String,
    #[serde(flatten)]
    owners: Owners,
    metadata: Map<String, Value>,
    categories: Vec<String>,
    immutable: bool,
    expiration_date: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    hash: String,
    #[serde(default)]
    context: Option<String>,
    #[serde(default)]
    valid_from: Option<DateTime<Utc>>,
    #[serde(default)]
    valid_until: Option<DateTime<Utc>>,
    #[serde(default)]
    superseded_by: Option<Uuid>,
}

impl From<StoredRecord> for MemoryRecord {
    fn from(r: StoredRecord) -> Self {
        MemoryRecord {
            id: r.id,
            memory: r.memory,
            owners: r.owners,
            metadata: r.metadata,
            categories: r.categories,
            immutable: r.immutable,
            expiration_date: r.expiration_date,
            created_at: r.created_at,
            updated_at: r.updated_at,
            hash: r.hash,
            context: r.context,
            valid_from: r.valid_from.unwrap_or(r.created_at),
            valid_until: r.valid_until,
            superseded_by: r.superseded_by,
        }
    }
}

impl MemoryRecord {
    /// The `metadata.core` object, if present and well-formed.
    pub fn core(&self) -> Option<Core> {
        self.metadata
            .get("core")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }

    /// The text its embedding is computed from: the context, then the memory.
    pub fn indexed_text(&self) -> String {
        indexed_text(&self.memory, self.context.as_deref())
    }

    /// Whether the memory has expired at `now`.
    pub fn is_expired_at(&self, now: DateTime<Utc>) -> bool {
        self.expiration_date.is_some_and(|at| at <= now)
    }

    /// Whether no later fact has superseded the memory.
    pub fn is_current(&self) -> bool {
        self.valid_until.is_none()
    }

    /// Whether the memory held at `at`: it was said by then, and not yet superseded.
    pub fn held_at(&self, at: DateTime<Utc>) -> bool {
        self.valid_from <= at && self.valid_until.is_none_or(|until| until > at)
    }
}

/// What kind of change a history record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
#[non_exhaustive]
pub enum HistoryEvent {
    /// The memory was created.
    Add,
    /// The memory's text or metadata changed.
    Update,
    /// The memory was (soft-)deleted.
    Delete,
    /// The memory's feedback was set or cleared: `old_memory` and `new_memory` hold the
    /// feedback before and after, as JSON. In the change log only, not in `history`.
    Feedback,
    /// The project's configuration changed: `old_memory` and `new_memory` hold it before and
    /// after, as JSON, and `memory_id` is the nil id. In the change log only.
    Config,
    /// A later fact superseded the memory: it keeps its text, and is no longer current
    /// (`superseded_by` names the new memory; the record's `created_at` is `valid_until`).
    Supersede,
    /// A superseded memory was made current again ([`Memory::restore`](crate::Memory::restore)).
    Restore,
}

impl HistoryEvent {
    /// The event's name as stored and serialised (`ADD`, `UPDATE`, `DELETE`, `FEEDBACK`,
    /// `CONFIG`, `SUPERSEDE`, `RESTORE`).
    pub fn as_str(self) -> &'static str {
        match self {
            HistoryEvent::Add => "ADD",
            HistoryEvent::Update => "UPDATE",
            HistoryEvent::Delete => "DELETE",
            HistoryEvent::Feedback => "FEEDBACK",
            HistoryEvent::Config => "CONFIG",
            HistoryEvent::Supersede => "SUPERSEDE",
            HistoryEvent::Restore => "RESTORE",
        }
    }

    /// Parses a stored event name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ADD" => Some(HistoryEvent::Add),
            "UPDATE" => Some(HistoryEvent::Update),
            "DELETE" => Some(HistoryEvent::Delete),
            "FEEDBACK" => Some(HistoryEvent::Feedback),
            "CONFIG" => Some(HistoryEvent::Config),
            "SUPERSEDE" => Some(HistoryEvent::Supersede),
            "RESTORE" => Some(HistoryEvent::Restore),
            _ => None,
        }
    }

    /// Whether the event changed a memory itself (ADD, UPDATE, DELETE, SUPERSEDE, RESTORE):
    /// what a memory's history holds.
    pub fn is_memory_change(self) -> bool {
        matches!(
            self,
            HistoryEvent::Add
                | HistoryEvent::Update
                | HistoryEvent::Delete
                | HistoryEvent::Supersede
                | HistoryEvent::Restore
        )
    }
}

/// One record of the change log: a change to one memory (its history, oldest first), or a
/// feedback or configuration change (see [`HistoryEvent`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryRecord {
    /// The history record's id.
    pub id: Uuid,
    /// The memory that changed.
    pub memory_id: Uuid,
    /// What happened.
    pub event: HistoryEvent,
    /// The text before the change (`None` on ADD).
    pub old_memory: Option<String>,
    /// The text after the change (`None` on DELETE).
    pub new_memory: Option<String>,
    /// The input messages that caused the change, if any.
    pub input: Vec<Message>,
    /// The memory's owners at the time.
    #[serde(flatten)]
    pub owners: Owners,
    /// The memory's categories after the change.
    pub categories: Vec<String>,
    /// The memory's metadata after the change.
    pub metadata: Map<String, Value>,
    /// When the change happened.
    pub created_at: DateTime<Utc>,
    /// On SUPERSEDE, the memory that superseded this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<Uuid>,
}

/// The pagination object of a list response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Pagination {
    /// How many records match the filters, over all pages.
    pub count: u64,
    /// The page size that was used.
    pub page_size: usize,
    /// Pass this to `.cursor(…)` for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// One page of a list response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Page<T> {
    /// The records of this page.
    pub results: Vec<T>,
    /// Where this page sits in the whole result.
    pub pagination: Pagination,
}

/// The current time, truncated to the microsecond precision memlane stores.
pub(crate) fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

/// SHA-256 of a text, as lowercase hex.
pub(crate) fn content_hash(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(text.as_bytes());
    let mut out = String::with_capacity(64);
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// The text a memory's embedding is computed from: its context (if any) on the line before
/// its text.
pub(crate) fn indexed_text(memory: &str, context: Option<&str>) -> String {
    match context {
        Some(context) if !context.is_empty() => format!("{context}\n{memory}"),
        _ => memory.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_sha256_hex() {
        assert_eq!(
            content_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn history_event_names_round_trip() {
        for e in [
            HistoryEvent::Add,
            HistoryEvent::Update,
            HistoryEvent::Delete,
            HistoryEvent::Supersede,
            HistoryEvent::Restore,
        ] {
            assert_eq!(HistoryEvent::parse(e.as_str()), Some(e));
            assert_eq!(
                serde_json::to_value(e).ok(),
                Some(Value::String(e.as_str().into()))
            );
        }
    }
}
