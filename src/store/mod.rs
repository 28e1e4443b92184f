//! Pluggable storage: the [`Store`] trait, the SQLite store and a small in-memory store.
//!
//! A store is the source of truth. It keeps every memory (live and soft-deleted) with its
//! vector, its history, and a little metadata. The vector index is derived from it.
//!
//! ## Vector keys
//! Every vector a store holds has a [`VectorKey`], allocated by the store from a counter that
//! only grows, in commit order. Updating a memory's text stores a new vector under a new key
//! and retires the old one. The index relies on this: everything it needs to catch up after a
//! restart is the keys above the highest one it saved.
//!
//! ## Writes
//! [`Store::apply`] takes a [`WriteBatch`] and applies all of it in one transaction, history
//! and credit charge included, or none of it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::Result;
use crate::filter::Filter;
use crate::record::{HistoryEvent, HistoryRecord, MemoryRecord, Message, Owners};

mod fts;
mod mem;
mod sqlite;

pub use mem::MemStore;
pub use sqlite::SqliteStore;

/// The key of one stored vector. Allocated by the store, strictly increasing in commit order.
pub type VectorKey = u64;

/// A memory to insert.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NewMemory {
    /// The record (its id must be new).
    pub record: MemoryRecord,
    /// Its unit-length vector.
    pub vector: Vec<f32>,
    /// The input that caused it, for history.
    pub input: Vec<Message>,
    /// A restored memory's history, written as it is instead of a new ADD record.
    pub history: Option<Vec<HistoryRecord>>,
    /// A restored memory's feedback.
    pub feedback: Option<Box<Feedback>>,
}

impl NewMemory {
    /// A memory to insert.
    pub fn new(record: MemoryRecord, vector: Vec<f32>, input: Vec<Message>) -> Self {
        NewMemory {
            record,
            vector,
            input,
            history: None,
            feedback: None,
        }
    }

    /// A memory restored from an export, with its history and feedback as they were.
    pub fn restored(
        record: MemoryRecord,
        vector: Vec<f32>,
        history: Vec<HistoryRecord>,
        feedback: Option<Feedback>,
    ) -> Self {
        NewMemory {
            record,
            vector,
            input: Vec::new(),
            history: Some(history),
            feedback: feedback.map(Box::new),
        }
    }
}

/// A change to a live memory. Fields left `None` keep their value.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MemoryUpdate {
    /// Which memory.
    pub id: Uuid,
    /// New text and its vector (both or neither).
    pub text: Option<(String, Vec<f32>)>,
    /// New caller metadata (replaces it; `core` included).
    pub metadata: Option<Map<String, Value>>,
    /// New categories.
    pub categories: Option<Vec<String>>,
    /// When the change happens.
    pub at: DateTime<Utc>,
    /// The input that caused it, for history.
    pub input: Vec<Message>,
}

impl MemoryUpdate {
    /// An update of `id` at `at` that changes nothing yet.
    pub fn new(id: Uuid, at: DateTime<Utc>) -> Self {
        MemoryUpdate {
            id,
            text: None,
            metadata: None,
            categories: None,
            at,
            input: Vec::new(),
        }
    }
}

/// One write of a batch.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Write {
    /// Insert a new memory.
    Insert(NewMemory),
    /// Change a live memory. Fails with 404 if it is missing or deleted, 409 if immutable.
    Update(MemoryUpdate),
    /// Soft-delete a live memory. Fails with 404 if it is missing or already deleted.
    Delete {
        /// Which memory.
        id: Uuid,
        /// When.
        at: DateTime<Utc>,
        /// The input that caused it, for history (empty for a direct delete).
        input: Vec<Message>,
    },
    /// Soft-delete every live memory (expired included) matching a filter.
    DeleteWhere {
        /// Which memories.
        filter: Filter,
        /// When.
        at: DateTime<Utc>,
    },
}

/// Writes applied together, atomically, with their credit charge.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct WriteBatch {
    /// The writes, applied in order.
    pub writes: Vec<Write>,
    /// Credits to charge. If the balance cannot pay, nothing is written (402).
    pub credits: u64,
}

impl WriteBatch {
    /// A batch of writes charging `credits`.
    pub fn new(writes: Vec<Write>, credits: u64) -> Self {
        WriteBatch { writes, credits }
    }
}

/// One memory changed by a batch.
#[derive(Debug, Clone)]
pub struct Change {
    /// What happened.
    pub event: HistoryEvent,
    /// The memory after the change (on DELETE: as it was when deleted).
    pub record: MemoryRecord,
    /// The vector key retired by the change (UPDATE of the text, DELETE).
    pub retired_key: Option<VectorKey>,
    /// The vector key added by the change (ADD, UPDATE of the text).
    pub added_key: Option<VectorKey>,
}

/// What a batch did.
#[derive(Debug, Clone)]
pub struct WriteOutcome {
    /// The changes, in the order of the writes.
    pub changes: Vec<Change>,
    /// The credit balance after the charge.
    pub credits_remaining: u64,
}

/// A query for a page of memories, newest first.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ListQuery {
    /// Which memories.
    pub filter: Filter,
    /// The current time, for expiry.
    pub now: DateTime<Utc>,
    /// Whether expired memories are listed too.
    pub include_expired: bool,
    /// Only memories inserted before this position (a [`ListPage::next`] value).
    pub before: Option<u64>,
    /// At most this many.
    pub limit: usize,
}

impl ListQuery {
    /// A query for the first `limit` live, unexpired memories matching `filter` at `now`.
    pub fn new(filter: Filter, now: DateTime<Utc>, limit: usize) -> Self {
        ListQuery {
            filter,
            now,
            include_expired: false,
            before: None,
            limit,
        }
    }
}

/// A page of memories.
#[derive(Debug, Clone)]
pub struct ListPage {
    /// The memories, newest first.
    pub records: Vec<MemoryRecord>,
    /// Where the next page starts, if there is one.
    pub next: Option<u64>,
    /// How many memories match, over all pages.
    pub count: u64,
}

/// The kinds of owner a memory has; each owner id is an entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityKind {
    /// `user_id`
    User,
    /// `agent_id`
    Agent,
    /// `app_id`
    App,
    /// `run_id`
    Run,
}

impl EntityKind {
    /// Every kind, in listing order.
    pub const ALL: [EntityKind; 4] = [
        EntityKind::User,
        EntityKind::Agent,
        EntityKind::App,
        EntityKind::Run,
    ];

    /// The kind's name: `user`, `agent`, `app` or `run`.
    pub fn as_str(self) -> &'static str {
        match self {
            EntityKind::User => "user",
            EntityKind::Agent => "agent",
            EntityKind::App => "app",
            EntityKind::Run => "run",
        }
    }

    /// The kind with this name.
    pub fn parse(name: &str) -> Option<EntityKind> {
        EntityKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The owner field of this kind in a record's [`Owners`].
    pub fn of(self, owners: &Owners) -> Option<&str> {
        match self {
            EntityKind::User => owners.user_id.as_deref(),
            EntityKind::Agent => owners.agent_id.as_deref(),
            EntityKind::App => owners.app_id.as_deref(),
            EntityKind::Run => owners.run_id.as_deref(),
        }
    }

    /// Owners with only this kind's id set.
    pub fn owners(self, id: &str) -> Owners {
        let mut owners = Owners::default();
        let slot = match self {
            EntityKind::User => &mut owners.user_id,
            EntityKind::Agent => &mut owners.agent_id,
            EntityKind::App => &mut owners.app_id,
            EntityKind::Run => &mut owners.run_id,
        };
        *slot = Some(id.to_string());
        owners
    }
}

/// An owner id with live memories.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entity {
    /// The owner id.
    pub id: String,
    /// Which kind of owner.
    #[serde(rename = "type")]
    pub kind: EntityKind,
    /// How many live (not deleted) memories it owns, expired ones included.
    pub memory_count: u64,
    /// When its oldest live memory was created.
    pub created_at: DateTime<Utc>,
    /// When any of its live memories last changed.
    pub updated_at: DateTime<Utc>,
}

/// A quality signal about a memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FeedbackKind {
    /// The memory is right and useful.
    Positive,
    /// The memory is wrong or unhelpful: search halves its score.
    Negative,
    /// The memory must not be used: search and retrieve leave it out.
    VeryNegative,
}

impl FeedbackKind {
    /// The kind's name: `POSITIVE`, `NEGATIVE` or `VERY_NEGATIVE`.
    pub fn as_str(self) -> &'static str {
        match self {
            FeedbackKind::Positive => "POSITIVE",
            FeedbackKind::Negative => "NEGATIVE",
            FeedbackKind::VeryNegative => "VERY_NEGATIVE",
        }
    }

    /// The kind with this name.
    pub fn parse(name: &str) -> Option<FeedbackKind> {
        [
            FeedbackKind::Positive,
            FeedbackKind::Negative,
            FeedbackKind::VeryNegative,
        ]
        .into_iter()
        .find(|k| k.as_str() == name)
    }
}

/// The feedback on a memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Feedback {
    /// The memory.
    pub memory_id: Uuid,
    /// The signal; `None` when cleared or never given.
    pub feedback: Option<FeedbackKind>,
    /// Why, in the giver's words.
    pub feedback_reason: Option<String>,
    /// When it was last set or cleared (`None` if never).
    pub updated_at: Option<DateTime<Utc>>,
}

/// The liveness of one indexed vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveKey {
    /// The key.
    pub key: VectorKey,
    /// When its memory expires, in microseconds since the epoch.
    pub expires_at: Option<i64>,
}

/// Storage for memories. Implement it to keep memories somewhere else; run the conformance
/// suite in `tests/store_conformance.rs` against your implementation.
///
/// Every method sees a consistent snapshot; [`apply`](Store::apply) is atomic. Methods that
/// take a `now` hide memories that expired at `now` unless told otherwise; deleted memories
/// are never returned except by [`history`](Store::history).
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// Applies a batch atomically and returns what changed.
    async fn apply(&self, batch: WriteBatch) -> Result<WriteOutcome>;

    /// A live memory by id (expired ones included), or `None`.
    async fn get(&self, id: Uuid) -> Result<Option<MemoryRecord>>;

    /// The live memories holding these vector keys, in no particular order. Retired keys are
    /// skipped.
    async fn get_by_keys(&self, keys: &[VectorKey]) -> Result<Vec<(VectorKey, MemoryRecord)>>;

    /// A page of memories, newest first.
    async fn list(&self, query: ListQuery) -> Result<ListPage>;

    /// The vector keys of the live memories matching `filter` at `now`, ascending.
    async fn matching_keys(
        &self,
        filter: &Filter,
        now: DateTime<Utc>,
        include_expired: bool,
    ) -> Result<Vec<VectorKey>>;

    /// Keyword search: the live memories matching `filter` at `now` that contain any word of
    /// `query` (see [`keywords`]), ranked by BM25, best first, at most `limit`, with their
    /// BM25 score (positive; higher is better).
    async fn keyword_search(
        &self,
        query: &str,
        filter: &Filter,
        now: DateTime<Utc>,
        include_expired: bool,
        limit: usize,
    ) -> Result<Vec<(VectorKey, f32)>>;

    /// Several keyword searches with one filter: for each query, what [`Store::keyword_search`]
    /// returns for it. Stores may share work between the queries (the SQLite store reads the
    /// matching rows once); this default runs them one by one.
    async fn keyword_search_many(
        &self,
        queries: &[String],
        filter: &Filter,
        now: DateTime<Utc>,
        include_expired: bool,
        limit: usize,
    ) -> Result<Vec<Vec<(VectorKey, f32)>>> {
        let mut out = Vec::with_capacity(queries.len());
        for query in queries {
            out.push(
                self.keyword_search(query, filter, now, include_expired, limit)
                    .await?,
            );
        }
        Ok(out)
    }

    /// Live vectors with keys above `after`, ascending, at most `limit`: how the index
    /// catches up and rebuilds.
    async fn vectors_after(
        &self,
        after: VectorKey,
        limit: usize,
    ) -> Result<Vec<(VectorKey, Vec<f32>)>>;

    /// Every live vector key with its expiry.
    async fn live_keys(&self) -> Result<Vec<LiveKey>>;

    /// The change history of a memory (deleted ones too), oldest first; empty if unknown.
    async fn history(&self, id: Uuid) -> Result<Vec<HistoryRecord>>;

    /// Every change of every memory after `cursor`, in commit order, with its cursor: the
    /// history records of all memories as one log. Cursors are positive and strictly
    /// increasing in commit order, and never reused; `0` is before the first change.
    async fn changes_after(&self, cursor: u64, limit: usize) -> Result<Vec<(u64, HistoryRecord)>>;

    /// Entities (owner ids with live memories) ordered by kind, then id; only those after
    /// `after` and, when given, of one kind; at most `limit`.
    async fn entities(
        &self,
        kind: Option<EntityKind>,
        after: Option<(EntityKind, String)>,
        limit: usize,
    ) -> Result<Vec<Entity>>;

    /// The stored vectors of these live memories (unknown or deleted ones are left out).
    async fn vectors_of(&self, ids: &[Uuid]) -> Result<Vec<(Uuid, Vec<f32>)>>;

    /// Sets (or, with `feedback: None`, clears) the feedback on a live memory; 404 when the
    /// memory is missing or deleted.
    async fn set_feedback(&self, feedback: Feedback) -> Result<()>;

    /// The feedback given on these memories (those with none are left out).
    async fn feedback(&self, ids: &[Uuid]) -> Result<Vec<Feedback>>;

    /// How many memories carry NEGATIVE or VERY_NEGATIVE feedback.
    async fn negative_feedback_count(&self) -> Result<u64>;

    /// A value from the store's key–value metadata.
    async fn meta(&self, key: &str) -> Result<Option<String>>;

    /// Sets a value in the store's key–value metadata.
    async fn set_meta(&self, key: &str, value: &str) -> Result<()>;

    /// The credit balance.
    async fn credits(&self) -> Result<u64>;

    /// Adds to the credit balance (saturating) and returns the new balance.
    async fn add_credits(&self, amount: u64) -> Result<u64>;

    /// The highest vector key ever allocated (0 when none).
    async fn max_key(&self) -> Result<VectorKey>;
}

/// The words of a text as keyword search sees them: lowercase runs of letters and digits
/// (accents kept), at most 64 of them.
pub fn keywords(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(64)
        .map(str::to_lowercase)
        .collect()
}

/// The words of a query worth matching: [`keywords`] without English function words
/// ("what", "did", "for", …). In a small store such words are rare enough for BM25 to weigh
/// them heavily, and a question would match memories by its grammar instead of its subject.
/// Only queries are filtered; stored texts keep every word.
pub fn query_keywords(text: &str) -> Vec<String> {
    keywords(text)
        .into_iter()
        .filter(|w| STOPWORDS.binary_search(&w.as_str()).is_err())
        .collect()
}

/// How much a word of a memory's context counts in keyword search, relative to a word of its
/// own text. Measured on LoCoMo in a probe outside the engine (R@10 of hybrid search):
/// 0.2 → 72.8, 0.3 → 73.1, 0.5 → 73.4, with 0.3 keeping the memory's own words clearly first.
pub const CONTEXT_WEIGHT: f32 = 0.3;

/// The stems of a text's [`keywords`] (English snowball stemmer), so that "painting" and
/// "painted" meet. The SQLite store stems with FTS5's Porter tokenizer instead; the two agree
/// on all but rare words.
pub fn stems(text: &str) -> Vec<String> {
    stem_all(keywords(text))
}

/// The stems of words, in order (English snowball stemmer).
pub(crate) fn stem_all(words: Vec<String>) -> Vec<String> {
    let stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
    words.iter().map(|w| stemmer.stem(w).into_owned()).collect()
}

/// English function words, sorted (the query filter relies on binary search).
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "before", "being", "both", "but", "by", "can", "could", "did", "do", "does", "doing",
    "during", "each", "for", "from", "had", "has", "have", "having", "he", "her", "here", "hers",
    "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "more", "most",
    "my", "no", "not", "now", "of", "on", "once", "only", "or", "other", "our", "out", "over",
    "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "them",
    "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
    "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "would", "you", "your",
];

/// Metadata key holding the store's random identity (so an index saved for one store is
/// never loaded for another).
pub const META_STORE_ID: &str = "store_id";
/// Metadata key holding the embedding model id.
pub const META_MODEL: &str = "embedding_model";
/// Metadata key holding the embedding dimension.
pub const META_DIMENSION: &str = "embedding_dimension";

/// The credit balance a new store starts with.
pub const DEFAULT_CREDITS: u64 = 1_000_000;

/// The 409 for changing an immutable memory.
pub(crate) fn immutable_error(id: Uuid) -> crate::error::Error {
    crate::error::Error::Conflict {
        detail: format!(
            "memory {id} is immutable and cannot be updated; delete it and add a new one instead"
        ),
    }
}

/// Builds the history record of a change.
pub(crate) fn history_record(
    event: HistoryEvent,
    old: Option<&str>,
    record: &MemoryRecord,
    input: &[Message],
    at: DateTime<Utc>,
) -> HistoryRecord {
    HistoryRecord {
        id: Uuid::now_v7(),
        memory_id: record.id,
        event,
        old_memory: old.map(str::to_owned),
        new_memory: (event != HistoryEvent::Delete).then(|| record.memory.clone()),
        input: input.to_vec(),
        owners: record.owners.clone(),
        categories: record.categories.clone(),
        metadata: record.metadata.clone(),
        created_at: at,
    }
}

/// The owner part of a bulk-delete filter, checked non-empty.
pub(crate) fn owner_filter(owners: &Owners) -> Filter {
    let mut parts = Vec::new();
    if let Some(u) = &owners.user_id {
        parts.push(Filter::user(u.clone()));
    }
    if let Some(a) = &owners.agent_id {
        parts.push(Filter::agent(a.clone()));
    }
    if let Some(a) = &owners.app_id {
        parts.push(Filter::app(a.clone()));
    }
    if let Some(r) = &owners.run_id {
        parts.push(Filter::run(r.clone()));
    }
    Filter::And(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwords_are_sorted_and_only_leave_queries() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            query_keywords("What should I cook for her tonight?"),
            vec!["cook", "tonight"]
        );
        assert_eq!(keywords("What for"), vec!["what", "for"]);
        assert!(query_keywords("what is it").is_empty());
    }
}
