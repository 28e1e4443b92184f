//! Pluggable storage: the thin [`Store`] trait, the rules above it, the SQLite store and a
//! small in-memory reference store.
//!
//! A store is the source of truth. It keeps every memory (live and soft-deleted) with its
//! vector, the change log, feedback, counters and a little metadata. Indexes are derived
//! from it.
//!
//! ## Primitives below, rules above
//! A [`Store`] provides primitives only: one [`commit`](Store::commit) of conditional row
//! writes, reads by id and by vector key, a filtered [`scan`](Store::scan) with a cursor,
//! the change [`log`](Store::log) after a cursor, counters and metadata. What a change
//! means (its history record, its credit charge, that an immutable memory refuses an
//! update, that a bulk delete takes every match) is decided once, in [`apply`], which turns
//! a [`WriteBatch`] of domain [`Write`]s into one [`Transaction`]. A new store cannot get a
//! rule wrong, because it never sees one.
//!
//! ## Preconditions inside the transaction
//! Every row write that changes a memory names the version of the row it was built from
//! ([`Row::version`]); the store checks it inside the transaction and refuses the whole
//! transaction with a 409 when another writer (another handle, process or host) changed
//! the row in between, and with a 404 when the row is no longer live. A charge is checked
//! against the balance the same way (402). Nothing is read earlier and trusted later.
//!
//! ## Vector keys
//! Every vector a store holds has a [`VectorKey`], allocated by the store from a counter
//! that only grows. Changing a memory's text stores a new vector under a new key and retires
//! the old one.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::Result;
use crate::filter::Filter;
use crate::record::{HistoryRecord, MemoryRecord, Owners};

mod batch;
mod candidates;
#[cfg(feature = "test-util")]
pub mod conformance;
pub mod keyword;
mod mem;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
mod records;
mod sqlite;

/// The crate's tokenizer, for a store of your own: index a text's [`terms`] and match a
/// query's [`query_terms`], so that it scores keyword search as every other store does.
pub use crate::text::{query_terms, terms, MAX_QUERY_WORDS};
pub use batch::{apply, Change, MemoryUpdate, NewMemory, Write, WriteBatch, WriteOutcome};
pub(crate) use batch::{immutable_error, owner_filter};
pub use candidates::{Among, CandidateSource};
pub use keyword::{KeywordHits, KeywordIndex, KeywordQuery, KeywordScore};
pub use mem::MemStore;
#[cfg(feature = "postgres")]
pub use postgres::{PostgresStore, DEFAULT_PROJECT};
pub use records::{Entity, EntityKind, Feedback, FeedbackKind};
pub use sqlite::SqliteStore;

/// The key of one stored vector. Allocated by the store, strictly increasing.
pub type VectorKey = u64;

/// A memory as a store keeps it: the record and what the engine needs beside it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Row {
    /// The memory.
    pub record: MemoryRecord,
    /// The key of its current vector.
    pub key: VectorKey,
    /// The row's version: 1 when inserted, one more with every change. Writes that change
    /// the row name it as their precondition.
    pub version: u64,
    /// The store's insertion sequence of the row (unique, growing): ties in scans are broken
    /// by it, newest first.
    pub seq: u64,
    /// When it was soft-deleted, if it was.
    pub deleted_at: Option<DateTime<Utc>>,
}

impl Row {
    /// A row as a store builds it from its columns.
    pub fn new(
        record: MemoryRecord,
        key: VectorKey,
        version: u64,
        seq: u64,
        deleted_at: Option<DateTime<Utc>>,
    ) -> Self {
        Row {
            record,
            key,
            version,
            seq,
            deleted_at,
        }
    }

    /// A live row of a memory of this text said at `at`, owned by no one, at version 3, for
    /// the unit tests of what reads rows.
    #[cfg(test)]
    pub(crate) fn of_text(text: &str, at: DateTime<Utc>, immutable: bool) -> Row {
        let record = MemoryRecord {
            id: uuid::Uuid::now_v7(),
            memory: text.into(),
            owners: crate::record::Owners::default(),
            metadata: serde_json::Map::new(),
            categories: Vec::new(),
            immutable,
            expiration_date: None,
            created_at: at,
            updated_at: at,
            hash: crate::record::content_hash(text),
            context: None,
            valid_from: at,
            valid_until: None,
            superseded_by: None,
        };
        Row::new(record, 1, 3, 1, None)
    }

    /// Whether the row is live (not deleted) and, unless `include_expired`, unexpired at `now`.
    pub fn visible(&self, now: DateTime<Utc>, include_expired: bool) -> bool {
        self.deleted_at.is_none() && (include_expired || !self.record.is_expired_at(now))
    }
}

/// One stored vector of a live memory.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredVector {
    /// Its key.
    pub key: VectorKey,
    /// The memory it belongs to.
    pub id: Uuid,
    /// The unit-length vector.
    pub vector: Vec<f32>,
    /// When its memory leaves the current view, in microseconds since the epoch: when it
    /// expires, or [`SUPERSEDED`] once a later fact superseded it.
    pub expires_at: Option<i64>,
    /// Whom its memory belongs to: the in-process index answers one owner's searches from
    /// lists of keys by owner.
    pub owners: Owners,
}

/// The [`StoredVector::expires_at`] of a superseded memory: before every clock but the one
/// of reads that take every memory (expired and superseded ones too), `i64::MIN`.
pub const SUPERSEDED: i64 = i64::MIN + 1;

/// When a memory leaves the current view (see [`StoredVector::expires_at`]).
pub fn leaves_current(record: &MemoryRecord) -> Option<i64> {
    if record.valid_until.is_some() {
        Some(SUPERSEDED)
    } else {
        record.expiration_date.map(|t| t.timestamp_micros())
    }
}

/// Which vectors [`Store::vectors`] reads.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum VectorQuery<'a> {
    /// Live vectors with keys above this one, ascending, at most `limit`: how an index is
    /// built and caught up.
    After {
        /// Exclusive lower bound.
        key: VectorKey,
        /// At most this many.
        limit: usize,
    },
    /// The current vectors of these memories, when live (others are left out).
    Of(&'a [Uuid]),
}

/// One conditional row write of a [`Transaction`].
///
/// An empty vector is no vector: a memory of a store without an embedding model yet (see
/// [`Memory::reembed`](crate::Memory::reembed)) has a key but no vector, and
/// [`Store::vectors`] leaves it out.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RowWrite {
    /// Inserts a memory with its vector (or none, when empty), at version 1 under a new
    /// key. Precondition: no row has its id, live or deleted (409).
    Insert {
        /// The memory.
        record: MemoryRecord,
        /// Its unit-length vector, or empty.
        vector: Vec<f32>,
    },
    /// Replaces a live row's record (its id stays); with a vector (possibly empty: none),
    /// the vector too, under a new key. Precondition: the row is live (404) at version
    /// `expect` (409).
    Replace {
        /// The new record.
        record: MemoryRecord,
        /// A new vector, if the text changed.
        vector: Option<Vec<f32>>,
        /// The version the record was built from.
        expect: u64,
    },
    /// Sets the vector of a live row under its current key, leaving its record, version
    /// and key as they are (a memory embedded again by a new model). Precondition: the row
    /// is live (404) at version `expect` (409).
    SetVector {
        /// Which memory.
        id: Uuid,
        /// Its unit-length vector (not empty).
        vector: Vec<f32>,
        /// The version the vector was computed from.
        expect: u64,
    },
    /// Forgets every stored vector (the memories stay, without vectors): the first step of
    /// moving a store to another embedding model, whose vectors may have another dimension.
    DropVectors,
    /// A precondition: the metadata value of `key` is `value` (a missing key counts as
    /// empty), read so that a concurrent change of it waits for this transaction or makes
    /// it fail (409). Writers of vectors state the embedding model they used with it.
    ExpectMeta {
        /// The key.
        key: String,
        /// The value it must have.
        value: String,
    },
    /// Soft-deletes a live row. Precondition: the row is live (404) at version `expect` (409).
    Delete {
        /// Which memory.
        id: Uuid,
        /// When.
        at: DateTime<Utc>,
        /// The version the deletion was decided on.
        expect: u64,
    },
    /// Appends a record to the change log, which gives it the next cursor.
    Log(HistoryRecord),
    /// Sets (or, with `feedback: None`, clears) a memory's feedback. Precondition: the
    /// memory is live (404).
    Feedback(Feedback),
    /// Sets a metadata value.
    Meta {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Adds to the credit balance (saturating).
    Credit(u64),
}

/// Row writes applied together, atomically, with a charge.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Transaction {
    /// The writes, applied in order.
    pub writes: Vec<RowWrite>,
    /// Credits to charge. Precondition: the balance covers it (402).
    pub charge: u64,
}

impl Transaction {
    /// A transaction of `writes` charging `charge`.
    pub fn new(writes: Vec<RowWrite>, charge: u64) -> Self {
        Transaction { writes, charge }
    }
}

/// What one [`RowWrite`] of a committed transaction did (`Insert`, `Replace` and `Delete`;
/// other writes have no outcome of their own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowOutcome {
    /// The memory written.
    pub id: Uuid,
    /// The vector key the write retired (a replaced vector, a deletion).
    pub retired: Option<VectorKey>,
    /// The vector key the write added (an insertion, a replaced vector).
    pub added: Option<VectorKey>,
    /// The row's version after the write.
    pub version: u64,
}

impl RowOutcome {
    /// The outcome of inserting memory `id` under `key`, at version 1.
    pub fn inserted(id: Uuid, key: VectorKey) -> Self {
        RowOutcome {
            id,
            retired: None,
            added: Some(key),
            version: 1,
        }
    }
}

/// What a committed transaction did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Committed {
    /// One outcome per `Insert`, `Replace` and `Delete`, in order.
    pub rows: Vec<RowOutcome>,
    /// The cursors the log records got, in order.
    pub cursors: Vec<u64>,
    /// The credit balance after the transaction.
    pub credits: u64,
}

/// A filtered read of live memories, newest first (by `created_at`, then by insertion).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Scan {
    /// Which memories.
    pub filter: Filter,
    /// The current time, for expiry.
    pub now: DateTime<Utc>,
    /// Whether expired memories are read too.
    pub include_expired: bool,
    /// Only memories after this position (a [`ScanPage::next`]).
    pub after: Option<ScanCursor>,
    /// At most this many.
    pub limit: usize,
}

impl Scan {
    /// The first `limit` live, unexpired memories matching `filter` at `now`.
    pub fn new(filter: Filter, now: DateTime<Utc>, limit: usize) -> Self {
        Scan {
            filter,
            now,
            include_expired: false,
            after: None,
            limit,
        }
    }
}

/// A position in a scan: the last row of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ScanCursor {
    /// Its `created_at`, in microseconds since the epoch.
    pub created_at: i64,
    /// Its [`Row::seq`].
    pub seq: u64,
}

impl ScanPage {
    /// A page from the rows of a scan read one past its limit (newest first), and the count.
    pub fn cut(mut rows: Vec<Row>, limit: usize, count: u64) -> Self {
        let more = rows.len() > limit;
        rows.truncate(limit);
        ScanPage {
            next: if more {
                rows.last().map(ScanCursor::of)
            } else {
                None
            },
            rows,
            count,
        }
    }
}

impl ScanCursor {
    /// The cursor of a row.
    pub fn of(row: &Row) -> Self {
        ScanCursor {
            created_at: row.record.created_at.timestamp_micros(),
            seq: row.seq,
        }
    }

    /// Whether `row` comes after this position, newest first.
    pub fn precedes(&self, row: &Row) -> bool {
        ScanCursor::of(row) < *self
    }

    /// The cursor as text, for callers (see [`ScanCursor::parse`]).
    pub fn encode(&self) -> String {
        format!("{}.{}", self.created_at, self.seq)
    }

    /// A cursor from [`ScanCursor::encode`]'s text.
    pub fn parse(text: &str) -> Option<Self> {
        let (created_at, seq) = text.split_once('.')?;
        Some(ScanCursor {
            created_at: created_at.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    }
}

/// A page of a scan.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanPage {
    /// The rows, newest first.
    pub rows: Vec<Row>,
    /// Where the next page starts, if there is one.
    pub next: Option<ScanCursor>,
    /// How many rows match, over all pages.
    pub count: u64,
}

/// A read of the change log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogQuery {
    /// Records after this cursor.
    pub after: u64,
    /// At most this many.
    pub limit: usize,
    /// Only this memory's records (its history).
    pub memory: Option<Uuid>,
}

impl LogQuery {
    /// At most `limit` records after `after`, of every memory.
    pub fn after(after: u64, limit: usize) -> Self {
        LogQuery {
            after,
            limit,
            memory: None,
        }
    }

    /// Every record of one memory.
    pub fn of(memory: Uuid) -> Self {
        LogQuery {
            after: 0,
            limit: usize::MAX,
            memory: Some(memory),
        }
    }
}

/// A read of entities.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct EntityQuery {
    /// Only entities of this kind.
    pub kind: Option<EntityKind>,
    /// Only entities after this one (by kind, then id).
    pub after: Option<(EntityKind, String)>,
    /// At most this many.
    pub limit: usize,
}

impl EntityQuery {
    /// At most `limit` entities of `kind` (every kind when `None`) after `after`.
    pub fn new(
        kind: Option<EntityKind>,
        after: Option<(EntityKind, String)>,
        limit: usize,
    ) -> Self {
        EntityQuery { kind, after, limit }
    }
}

/// A store's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// The credit balance.
    pub credits: u64,
    /// The highest vector key ever allocated (0 when none).
    pub max_key: VectorKey,
    /// How many memories carry NEGATIVE or VERY_NEGATIVE feedback.
    pub negative_feedback: u64,
    /// The cursor of the last change-log record (0 when none).
    pub last_cursor: u64,
}

/// Storage for memories: the primitives an engine provides. Every rule lives above it, in
/// [`apply`]; implement these methods to keep memories somewhere else, and run the
/// conformance suite (feature `test-util`, `memlane::store::conformance::run`) against your
/// implementation.
///
/// Every read sees a consistent snapshot, and [`commit`](Store::commit) is atomic: all of
/// a transaction, with every precondition checked inside it, or none of it.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// Applies a transaction atomically, checking each write's precondition and the charge
    /// inside it; the first that fails rolls everything back (404, 409 or 402).
    async fn commit(&self, tx: Transaction) -> Result<Committed>;

    /// The rows of these memories, live or deleted, in no particular order (unknown ids are
    /// left out).
    async fn rows(&self, ids: &[Uuid]) -> Result<Vec<Row>>;

    /// The live rows holding these vector keys, in no particular order (retired keys are
    /// left out).
    async fn rows_by_key(&self, keys: &[VectorKey]) -> Result<Vec<Row>>;

    /// A page of the live rows matching a filter, newest first, and how many match.
    async fn scan(&self, scan: &Scan) -> Result<ScanPage>;

    /// The vector keys of the live rows among these memories, ascending.
    async fn keys(&self, among: Among<'_>) -> Result<Vec<VectorKey>>;

    /// The keys, of those given, of live rows among these memories (in any order). The
    /// default reads the rows.
    async fn admitted(&self, keys: &[VectorKey], among: Among<'_>) -> Result<Vec<VectorKey>> {
        Ok(self
            .rows_by_key(keys)
            .await?
            .into_iter()
            .filter(|r| {
                r.visible(among.now, among.include_expired) && among.filter.matches(&r.record)
            })
            .map(|r| r.key)
            .collect())
    }

    /// The replies among these keys' live rows: each pair `(a, a + 1)` of given keys where
    /// memory `a + 1` was stored replying to memory `a` (in one `add`, its context is `a`'s
    /// text). The default reads the rows.
    async fn replies(&self, keys: &[VectorKey]) -> Result<Vec<(VectorKey, VectorKey)>> {
        let rows: HashMap<VectorKey, Row> = self
            .rows_by_key(keys)
            .await?
            .into_iter()
            .filter(|r| r.deleted_at.is_none())
            .map(|r| (r.key, r))
            .collect();
        let mut pairs: Vec<(VectorKey, VectorKey)> = rows
            .iter()
            .filter_map(|(&key, a)| {
                let b = rows.get(&key.checked_add(1)?)?;
                (b.record.context.as_deref() == Some(a.record.memory.as_str()))
                    .then_some((key, b.key))
            })
            .collect();
        pairs.sort_unstable();
        Ok(pairs)
    }

    /// How many live rows are among these memories, counted up to `cap` (a larger number
    /// is reported as `cap`). The default counts [`keys`](Self::keys).
    async fn count(&self, among: Among<'_>, cap: usize) -> Result<usize> {
        Ok(self.keys(among).await?.len().min(cap))
    }

    /// Stored vectors of live memories (see [`VectorQuery`]).
    async fn vectors(&self, query: VectorQuery<'_>) -> Result<Vec<StoredVector>>;

    /// The change log after a cursor, in commit order, with each record's cursor (see
    /// [`LogQuery`]). Cursors are positive, strictly increasing in commit order and never
    /// reused; `0` is before the first record.
    async fn log(&self, query: LogQuery) -> Result<Vec<(u64, HistoryRecord)>>;

    /// The memories the change log names after a cursor: each record's cursor and memory,
    /// in commit order, at most `limit`. An in-process index replays them to catch up with
    /// other writers (other handles, other processes). The default reads
    /// [`log`](Store::log); a store can answer without reading whole records.
    async fn changed(&self, after: u64, limit: usize) -> Result<Vec<(u64, Uuid)>> {
        Ok(self
            .log(LogQuery::after(after, limit))
            .await?
            .into_iter()
            .map(|(cursor, record)| (cursor, record.memory_id))
            .collect())
    }

    /// A cheap token that changes whenever a transaction may have been committed to the
    /// store by anyone (this handle, another handle, another process) since the last call
    /// returned it; `None` when the store has no such token, and then the engine reads
    /// [`changed`](Store::changed) before every read of its in-process index. It is called
    /// on an async worker before every search, so it must answer in microseconds; an error
    /// is `None`.
    fn change_token(&self) -> Option<u64> {
        None
    }

    /// Entities (owner ids with live memories) ordered by kind, then id (see
    /// [`EntityQuery`]).
    async fn entities(&self, query: EntityQuery) -> Result<Vec<Entity>>;

    /// The feedback given on these memories (those with none are left out).
    async fn feedback(&self, ids: &[Uuid]) -> Result<Vec<Feedback>>;

    /// A value from the store's key–value metadata.
    async fn meta(&self, key: &str) -> Result<Option<String>>;

    /// The store's counters.
    async fn counters(&self) -> Result<Counters>;

    /// The store's own keyword index, if it keeps one; without one, keyword search ranks the
    /// store's rows in process (see [`KeywordIndex`]).
    fn keyword_index(&self) -> Option<&dyn KeywordIndex> {
        None
    }

    /// The store's own search, if it ranks in its database: the engine then keeps no
    /// in-process index for it and asks this source for every search's candidates. `None`
    /// (the default) for stores searched through the engine's in-process indexes.
    fn candidate_source(&self) -> Option<std::sync::Arc<dyn CandidateSource>> {
        None
    }

    /// Woken whenever another handle, process or host may have committed to the store,
    /// when the store can tell (a database server's notifications); event streams then
    /// wait on it. `None` (the default): streams poll the change log.
    fn commit_signal(&self) -> Option<std::sync::Arc<tokio::sync::Notify>> {
        None
    }
}

/// Metadata key holding the store's random identity (so an index saved for one store is
/// never loaded for another).
pub const META_STORE_ID: &str = "store_id";
/// Metadata key holding the embedding model id.
pub const META_MODEL: &str = "embedding_model";
/// Metadata key holding the embedding dimension.
pub const META_DIMENSION: &str = "embedding_dimension";
/// Metadata key counting the store's moves to another embedding model (missing: none).
pub const META_EPOCH: &str = "embedding_epoch";

/// The 409 of a handle whose store moved to another embedding model since it opened it:
/// `then` is what the handle did about it (written before the advice).
pub(crate) fn model_moved(expected: &str, actual: &str, then: &str) -> crate::Error {
    let name = |m: &str| match m {
        "" => "none".to_owned(),
        m => format!("{m:?}"),
    };
    crate::Error::Conflict {
        detail: format!(
            "this store's embedding model is now {}, not {} as when this handle opened it \
             (another handle re-embedded it); {then}open the store again with its model",
            name(actual),
            name(expected)
        ),
    }
}

/// The 409 of a transaction whose [`RowWrite::ExpectMeta`] does not hold: `actual` is the
/// value the store has (`None`: missing). Stores return it as it is.
pub fn meta_moved(key: &str, expected: &str, actual: Option<&str>) -> crate::Error {
    let actual = actual.unwrap_or_default();
    if key == META_MODEL {
        return model_moved(expected, actual, "nothing was written: ");
    }
    crate::Error::Conflict {
        detail: format!(
            "the store's {key:?} is {actual:?}, not {expected:?} as this change expected \
             (another writer changed it); nothing was written"
        ),
    }
}

/// The credit balance a new store starts with.
pub const DEFAULT_CREDITS: u64 = 1_000_000;
