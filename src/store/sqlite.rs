//! The SQLite store: one file, WAL, schema migrations, every call off the async runtime.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::functions::FunctionFlags;
use rusqlite::types::Value as SqlValue;
use rusqlite::{
    params, params_from_iter, Connection, OpenFlags, OptionalExtension, Row, Transaction,
};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::fts::{self, RowTerms};
use super::{
    history_record, immutable_error, Change, Entity, EntityKind, Feedback, FeedbackKind, ListPage,
    ListQuery, LiveKey, Store, VectorKey, Write, WriteBatch, WriteOutcome, DEFAULT_CREDITS,
};
use super::{query_keywords, CONTEXT_WEIGHT};
use crate::error::{Error, Result};
use crate::filter::{
    icontains, metadata_matches, micros, Condition, Filter, Op, OwnerField, TimeField,
};
use crate::record::{content_hash, HistoryEvent, HistoryRecord, MemoryRecord, Message, Owners};

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE memories (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    memory          TEXT    NOT NULL,
    user_id         TEXT,
    agent_id        TEXT,
    app_id          TEXT,
    run_id          TEXT,
    metadata        TEXT    NOT NULL,
    categories      TEXT    NOT NULL,
    immutable       INTEGER NOT NULL,
    expiration_date INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    hash            TEXT    NOT NULL,
    deleted_at      INTEGER,
    vector_key      INTEGER NOT NULL UNIQUE,
    vector          BLOB    NOT NULL
);
CREATE INDEX memories_user  ON memories (user_id, seq)  WHERE deleted_at IS NULL;
CREATE INDEX memories_agent ON memories (agent_id, seq) WHERE deleted_at IS NULL;
CREATE INDEX memories_app   ON memories (app_id, seq)   WHERE deleted_at IS NULL;
CREATE INDEX memories_run   ON memories (run_id, seq)   WHERE deleted_at IS NULL;
CREATE TABLE history (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT    NOT NULL,
    memory_id  TEXT    NOT NULL,
    event      TEXT    NOT NULL,
    old_memory TEXT,
    new_memory TEXT,
    input      TEXT    NOT NULL,
    user_id    TEXT,
    agent_id   TEXT,
    app_id     TEXT,
    run_id     TEXT,
    categories TEXT    NOT NULL,
    metadata   TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX history_memory ON history (memory_id, seq);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE state (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    credits INTEGER NOT NULL,
    max_key INTEGER NOT NULL
);
"#,
    // Covering indexes: an owner-scoped search reads its candidate keys from the index alone.
    r#"
CREATE INDEX memories_user_keys  ON memories (user_id, vector_key, expiration_date)  WHERE deleted_at IS NULL;
CREATE INDEX memories_agent_keys ON memories (agent_id, vector_key, expiration_date) WHERE deleted_at IS NULL;
CREATE INDEX memories_app_keys   ON memories (app_id, vector_key, expiration_date)   WHERE deleted_at IS NULL;
CREATE INDEX memories_run_keys   ON memories (run_id, vector_key, expiration_date)   WHERE deleted_at IS NULL;
"#,
    // Keyword index (BM25) over the text of live memories. Triggers keep it in the
    // transaction that changes the rows, so it never disagrees with them.
    r#"
CREATE VIRTUAL TABLE memories_fts USING fts5(
    memory, content = 'memories', content_rowid = 'seq', tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories WHEN new.deleted_at IS NULL BEGIN
    INSERT INTO memories_fts (rowid, memory) VALUES (new.seq, new.memory);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF memory, deleted_at ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, memory)
        SELECT 'delete', old.seq, old.memory WHERE old.deleted_at IS NULL;
    INSERT INTO memories_fts (rowid, memory)
        SELECT new.seq, new.memory WHERE new.deleted_at IS NULL;
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories WHEN old.deleted_at IS NULL BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, memory) VALUES ('delete', old.seq, old.memory);
END;
INSERT INTO memories_fts (rowid, memory) SELECT seq, memory FROM memories WHERE deleted_at IS NULL;
"#,
    // A memory's conversational context, indexed beside its text; words are stemmed
    // (Porter), so "painting" finds "paint". The keyword index is rebuilt for both.
    r#"
ALTER TABLE memories ADD COLUMN context TEXT;
DROP TRIGGER memories_fts_insert;
DROP TRIGGER memories_fts_update;
DROP TRIGGER memories_fts_delete;
DROP TABLE memories_fts;
CREATE VIRTUAL TABLE memories_fts USING fts5(
    memory, context, content = 'memories', content_rowid = 'seq',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories WHEN new.deleted_at IS NULL BEGIN
    INSERT INTO memories_fts (rowid, memory, context) VALUES (new.seq, new.memory, new.context);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF memory, context, deleted_at ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, memory, context)
        SELECT 'delete', old.seq, old.memory, old.context WHERE old.deleted_at IS NULL;
    INSERT INTO memories_fts (rowid, memory, context)
        SELECT new.seq, new.memory, new.context WHERE new.deleted_at IS NULL;
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories WHEN old.deleted_at IS NULL BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, memory, context)
        VALUES ('delete', old.seq, old.memory, old.context);
END;
INSERT INTO memories_fts (rowid, memory, context)
    SELECT seq, memory, context FROM memories WHERE deleted_at IS NULL;
"#,
    // The owners of a memory as keyword tokens (see `owner_token`), indexed beside its text
    // so that a keyword search for one user's memories reads only that user's rows. The
    // column weighs nothing in ranking.
    r#"
ALTER TABLE memories ADD COLUMN owners TEXT GENERATED ALWAYS AS (trim(
    iif(user_id IS NULL, '', ' u' || hex(user_id)) || iif(agent_id IS NULL, '', ' a' || hex(agent_id)) ||
    iif(app_id IS NULL, '', ' p' || hex(app_id)) || iif(run_id IS NULL, '', ' r' || hex(run_id))
)) VIRTUAL;
DROP TRIGGER memories_fts_insert;
DROP TRIGGER memories_fts_update;
DROP TRIGGER memories_fts_delete;
DROP TABLE memories_fts;
CREATE VIRTUAL TABLE memories_fts USING fts5(
    memory, context, owners, content = 'memories', content_rowid = 'seq',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories WHEN new.deleted_at IS NULL BEGIN
    INSERT INTO memories_fts (rowid, memory, context, owners)
        VALUES (new.seq, new.memory, new.context, new.owners);
END;
CREATE TRIGGER memories_fts_update
AFTER UPDATE OF memory, context, deleted_at, user_id, agent_id, app_id, run_id ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, memory, context, owners)
        SELECT 'delete', old.seq, old.memory, old.context, old.owners WHERE old.deleted_at IS NULL;
    INSERT INTO memories_fts (rowid, memory, context, owners)
        SELECT new.seq, new.memory, new.context, new.owners WHERE new.deleted_at IS NULL;
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories WHEN old.deleted_at IS NULL BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, memory, context, owners)
        VALUES ('delete', old.seq, old.memory, old.context, old.owners);
END;
INSERT INTO memories_fts (rowid, memory, context, owners)
    SELECT seq, memory, context, owners FROM memories WHERE deleted_at IS NULL;
"#,
    // Feedback on memories, one row per memory that ever had some.
    r#"
CREATE TABLE feedback (
    memory_id  TEXT PRIMARY KEY,
    feedback   TEXT,
    reason     TEXT,
    updated_at INTEGER NOT NULL
);
CREATE INDEX feedback_negative ON feedback (feedback) WHERE feedback IN ('NEGATIVE', 'VERY_NEGATIVE');
"#,
];

const COLUMNS: &str = "m.id, m.memory, m.user_id, m.agent_id, m.app_id, m.run_id, m.metadata, \
     m.categories, m.immutable, m.expiration_date, m.created_at, m.updated_at, m.hash, m.context";

/// The index of the first column after [`COLUMNS`].
const EXTRA: usize = 14;

const LIVE: &str = "m.deleted_at IS NULL";

/// Idle read connections kept open for reuse.
const MAX_IDLE_READERS: usize = 4;

/// The SQLite store: memories, vectors, history and metadata in one file.
///
/// - WAL journal with `synchronous = FULL`: an acknowledged write survives a crash of the
///   process or the machine.
/// - One writer connection; reads use their own connections and never wait for a write.
/// - Every call runs on tokio's blocking pool, never on an async worker.
/// - The schema is versioned and migrated forward on open.
#[derive(Clone)]
pub struct SqliteStore {
    shared: Arc<Shared>,
}

struct Shared {
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
    /// `None` for an in-memory database, which has one connection for everything.
    path: Option<PathBuf>,
    frequencies: Mutex<DocFrequencies>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.shared.path)
            .finish_non_exhaustive()
    }
}

fn sql_err(e: rusqlite::Error) -> Error {
    Error::storage("SQLite failed", e)
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and migrates its schema. Blocks the
    /// calling thread briefly; [`Memory::open`](crate::Memory::open) calls it off the runtime.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore> {
        let path = path.as_ref().to_path_buf();
        let conn = Self::connect(&path, false)?;
        init(&conn)?;
        Ok(SqliteStore {
            shared: Arc::new(Shared {
                writer: Mutex::new(conn),
                readers: Mutex::new(Vec::new()),
                path: Some(path),
                frequencies: Mutex::default(),
            }),
        })
    }

    /// A fresh database that lives in memory and is gone when the store is dropped.
    pub fn in_memory() -> Result<SqliteStore> {
        let conn = Connection::open_in_memory().map_err(sql_err)?;
        register_functions(&conn)?;
        init(&conn)?;
        Ok(SqliteStore {
            shared: Arc::new(Shared {
                writer: Mutex::new(conn),
                readers: Mutex::new(Vec::new()),
                path: None,
                frequencies: Mutex::default(),
            }),
        })
    }

    /// The database file, or `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.shared.path.as_deref()
    }

    fn connect(path: &Path, read_only: bool) -> Result<Connection> {
        let flags = if read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
        };
        let conn = Connection::open_with_flags(path, flags).map_err(|e| Error::Storage {
            detail: format!("cannot open the database {}", path.display()),
            source: Some(Box::new(e)),
        })?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(sql_err)?;
        conn.execute_batch("PRAGMA cache_size = -65536; PRAGMA foreign_keys = ON;")
            .map_err(sql_err)?;
        if !read_only {
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
                .map_err(sql_err)?;
            conn.pragma_update(None, "synchronous", "FULL")
                .map_err(sql_err)?;
        }
        register_functions(&conn)?;
        Ok(conn)
    }

    async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        spawn(move || {
            let Some(path) = &shared.path else {
                let conn = lock(&shared.writer)?;
                return f(&conn);
            };
            let pooled = lock(&shared.readers)?.pop();
            let conn = match pooled {
                Some(c) => c,
                None => Self::connect(path, true)?,
            };
            let out = f(&conn);
            let mut idle = lock(&shared.readers)?;
            if idle.len() < MAX_IDLE_READERS {
                idle.push(conn);
            }
            out
        })
        .await
    }

    async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        spawn(move || {
            let mut conn = lock(&shared.writer)?;
            f(&mut conn)
        })
        .await
    }
}

async fn spawn<T, F>(f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::internal(format!("storage task failed: {e}")))?
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| Error::internal("a storage lock was poisoned by a panic"))
}

fn init(conn: &Connection) -> Result<()> {
    // IMMEDIATE: two processes creating the same database must not both migrate it.
    let tx = Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let version: usize = tx
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(sql_err)?;
    if version > MIGRATIONS.len() {
        return Err(Error::Unavailable {
            detail: format!(
                "the database has schema version {version}, newer than this memlane understands ({}); \
                 upgrade memlane",
                MIGRATIONS.len()
            ),
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
        tx.execute_batch(sql).map_err(sql_err)?;
        if i == 0 {
            tx.execute(
                "INSERT INTO state (id, credits, max_key) VALUES (1, ?1, 0)",
                params![DEFAULT_CREDITS as i64],
            )
            .map_err(sql_err)?;
            tx.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)",
                params![super::META_STORE_ID, Uuid::new_v4().to_string()],
            )
            .map_err(sql_err)?;
        }
    }
    tx.pragma_update(None, "user_version", MIGRATIONS.len())
        .map_err(sql_err)?;
    tx.commit().map_err(sql_err)
}

/// The Rust functions the compiled filters call, so that SQLite evaluates them with exactly
/// the reference semantics of [`Filter::matches`].
fn register_functions(conn: &Connection) -> Result<()> {
    fts::register(conn).map_err(sql_err)?;
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("memlane_icontains", 2, flags, |ctx| {
        let hay: Option<String> = ctx.get(0)?;
        let needle: String = ctx.get(1)?;
        Ok(hay.is_some_and(|h| icontains(&h, &needle)))
    })
    .map_err(sql_err)?;
    conn.create_scalar_function("memlane_meta", 2, flags, |ctx| {
        let op = ctx.get_or_create_aux(1, |v| -> std::result::Result<Op<Value>, String> {
            let text = v.as_str().map_err(|e| e.to_string())?;
            decode_op(text).ok_or_else(|| "malformed metadata operator".to_string())
        })?;
        let value: Option<String> = ctx.get(0)?;
        let value: Option<Value> = value
            .and_then(|v| serde_json::from_str(&v).ok())
            .filter(|v: &Value| !v.is_null());
        Ok(metadata_matches(value.as_ref(), &op))
    })
    .map_err(sql_err)?;
    Ok(())
}

fn encode_op(op: &Op<Value>) -> String {
    let v = match op {
        Op::Eq(x) => serde_json::json!(["eq", x]),
        Op::Ne(x) => serde_json::json!(["ne", x]),
        Op::In(xs) => serde_json::json!(["in", xs]),
        Op::Nin(xs) => serde_json::json!(["nin", xs]),
        Op::Gt(x) => serde_json::json!(["gt", x]),
        Op::Gte(x) => serde_json::json!(["gte", x]),
        Op::Lt(x) => serde_json::json!(["lt", x]),
        Op::Lte(x) => serde_json::json!(["lte", x]),
        Op::Contains(x) => serde_json::json!(["contains", x]),
        Op::Icontains(x) => serde_json::json!(["icontains", x]),
        Op::Exists => serde_json::json!(["*"]),
    };
    v.to_string()
}

fn decode_op(text: &str) -> Option<Op<Value>> {
    let v: Value = serde_json::from_str(text).ok()?;
    let arr = v.as_array()?;
    let name = arr.first()?.as_str()?;
    let arg = arr.get(1).cloned();
    let list = |a: Option<Value>| a.and_then(|a| a.as_array().cloned());
    Some(match name {
        "eq" => Op::Eq(arg?),
        "ne" => Op::Ne(arg?),
        "in" => Op::In(list(arg)?),
        "nin" => Op::Nin(list(arg)?),
        "gt" => Op::Gt(arg?),
        "gte" => Op::Gte(arg?),
        "lt" => Op::Lt(arg?),
        "lte" => Op::Lte(arg?),
        "contains" => Op::Contains(arg?),
        "icontains" => Op::Icontains(arg?.as_str()?.to_owned()),
        "*" => Op::Exists,
        _ => return None,
    })
}

/// Compiles a filter to a SQL expression over `memories m`. Every atomic predicate yields 0
/// or 1, never NULL, so that NOT is the exact negation as in [`Filter::matches`].
fn compile(filter: &Filter, params: &mut Vec<SqlValue>) -> String {
    match filter {
        Filter::And(parts) if parts.is_empty() => "1".into(),
        Filter::Or(parts) if parts.is_empty() => "0".into(),
        Filter::And(parts) => join(parts, " AND ", params),
        Filter::Or(parts) => join(parts, " OR ", params),
        Filter::Not(inner) => format!("NOT ({})", compile(inner, params)),
        Filter::Condition(c) => condition(c, params),
    }
}

fn join(parts: &[Filter], sep: &str, params: &mut Vec<SqlValue>) -> String {
    let sql: Vec<String> = parts
        .iter()
        .map(|p| format!("({})", compile(p, params)))
        .collect();
    sql.join(sep)
}

fn placeholders(values: &[String], params: &mut Vec<SqlValue>) -> String {
    let marks: Vec<&str> = values
        .iter()
        .map(|v| {
            params.push(SqlValue::Text(v.clone()));
            "?"
        })
        .collect();
    marks.join(", ")
}

fn condition(c: &Condition, params: &mut Vec<SqlValue>) -> String {
    match c {
        Condition::Owner(field, op) => {
            let col = match field {
                OwnerField::User => "m.user_id",
                OwnerField::Agent => "m.agent_id",
                OwnerField::App => "m.app_id",
                OwnerField::Run => "m.run_id",
            };
            text_condition(col, op, params)
        }
        Condition::Keywords(op) => text_condition("m.memory", op, params),
        Condition::Time(field, op) => {
            let col = match field {
                TimeField::Created => "m.created_at",
                TimeField::Updated => "m.updated_at",
                TimeField::Expiration => "m.expiration_date",
            };
            let mut bound = |x: i64| {
                params.push(SqlValue::Integer(x));
                "?"
            };
            match op {
                Op::Eq(r) => format!(
                    "({col} IS NOT NULL AND {col} >= {} AND {col} < {})",
                    bound(r.start),
                    bound(r.end)
                ),
                Op::Ne(r) => format!(
                    "NOT ({col} IS NOT NULL AND {col} >= {} AND {col} < {})",
                    bound(r.start),
                    bound(r.end)
                ),
                Op::In(rs) | Op::Nin(rs) => {
                    let any: Vec<String> = rs
                        .iter()
                        .map(|r| {
                            format!("({col} >= {} AND {col} < {})", bound(r.start), bound(r.end))
                        })
                        .collect();
                    let any = if any.is_empty() {
                        "0".to_owned()
                    } else {
                        any.join(" OR ")
                    };
                    let sql = format!("({col} IS NOT NULL AND ({any}))");
                    if matches!(op, Op::Nin(_)) {
                        format!("NOT {sql}")
                    } else {
                        sql
                    }
                }
                Op::Gt(r) => format!("({col} IS NOT NULL AND {col} >= {})", bound(r.end)),
                Op::Gte(r) => format!("({col} IS NOT NULL AND {col} >= {})", bound(r.start)),
                Op::Lt(r) => format!("({col} IS NOT NULL AND {col} < {})", bound(r.start)),
                Op::Lte(r) => format!("({col} IS NOT NULL AND {col} < {})", bound(r.end)),
                Op::Exists => format!("({col} IS NOT NULL)"),
                Op::Contains(_) | Op::Icontains(_) => "0".into(),
            }
        }
        Condition::Categories(op) => {
            let each = "SELECT 1 FROM json_each(m.categories) AS c WHERE";
            match op {
                Op::Eq(x) | Op::Contains(x) => {
                    params.push(SqlValue::Text(x.clone()));
                    format!("EXISTS ({each} c.value = ?)")
                }
                Op::Ne(x) => {
                    params.push(SqlValue::Text(x.clone()));
                    format!("NOT EXISTS ({each} c.value = ?)")
                }
                Op::In(xs) | Op::Nin(xs) => {
                    let sql = if xs.is_empty() {
                        "0".to_owned()
                    } else {
                        format!("EXISTS ({each} c.value IN ({}))", placeholders(xs, params))
                    };
                    if matches!(op, Op::Nin(_)) {
                        format!("NOT {sql}")
                    } else {
                        sql
                    }
                }
                Op::Icontains(x) => {
                    params.push(SqlValue::Text(x.clone()));
                    format!("EXISTS ({each} memlane_icontains(c.value, ?))")
                }
                Op::Exists => "(json_array_length(m.categories) > 0)".into(),
                Op::Gt(_) | Op::Gte(_) | Op::Lt(_) | Op::Lte(_) => "0".into(),
            }
        }
        Condition::Metadata(path, op) => {
            let json_path = path
                .iter()
                .fold(String::from("$"), |acc, k| format!("{acc}.\"{k}\""));
            params.push(SqlValue::Text(json_path));
            params.push(SqlValue::Text(encode_op(op)));
            "memlane_meta(m.metadata -> ?, ?)".into()
        }
    }
}

fn text_condition(col: &str, op: &Op<String>, params: &mut Vec<SqlValue>) -> String {
    let mut one = |x: &String| {
        params.push(SqlValue::Text(x.clone()));
        "?"
    };
    match op {
        Op::Eq(x) => format!("({col} IS {})", one(x)),
        Op::Ne(x) => format!("({col} IS NOT {})", one(x)),
        Op::In(xs) | Op::Nin(xs) => {
            let sql = if xs.is_empty() {
                "0".to_owned()
            } else {
                format!(
                    "({col} IS NOT NULL AND {col} IN ({}))",
                    placeholders(xs, params)
                )
            };
            if matches!(op, Op::Nin(_)) {
                format!("NOT {sql}")
            } else {
                sql
            }
        }
        Op::Contains(x) => format!("({col} IS NOT NULL AND instr({col}, {}) > 0)", one(x)),
        Op::Icontains(x) => format!("memlane_icontains({col}, {})", one(x)),
        Op::Exists => format!("({col} IS NOT NULL)"),
        Op::Gt(_) | Op::Gte(_) | Op::Lt(_) | Op::Lte(_) => "0".into(),
    }
}

/// The WHERE clause for live memories matching `filter` at `now`.
fn visible(
    filter: &Filter,
    now: DateTime<Utc>,
    include_expired: bool,
    params: &mut Vec<SqlValue>,
) -> String {
    let mut sql = String::from(LIVE);
    if !include_expired {
        params.push(SqlValue::Integer(micros(now)));
        sql.push_str(" AND (m.expiration_date IS NULL OR m.expiration_date > ?)");
    }
    if !filter.is_all() {
        sql.push_str(" AND (");
        sql.push_str(&compile(filter, params));
        sql.push(')');
    }
    sql
}

/// Keyword searches sharing one filter, ranked by BM25 with FTS5's formula and parameters.
struct KeywordSearch {
    /// Each search's words.
    queries: Vec<Vec<String>>,
    /// Tokens of the owners the filter pins (see [`owner_tokens`]).
    owners: Vec<String>,
    filter: Filter,
    now: DateTime<Utc>,
    include_expired: bool,
    limit: usize,
}

/// FTS5's BM25 parameters (its defaults, which `bm25()` uses).
const BM25_K1: f64 = 1.2;
const BM25_B: f64 = 0.75;

/// A word as an FTS5 string: quoted, so the caller's text is data, never query syntax.
fn fts_string(word: &str) -> String {
    format!("\"{}\"", word.replace('"', "\"\""))
}

/// The keyword token under which the `owners` column indexes a memory's owner: a letter for
/// the field and the id's UTF-8 bytes in hex, so any id is one token.
fn owner_token(prefix: char, id: &str) -> String {
    let mut token = String::with_capacity(1 + 2 * id.len());
    token.push(prefix);
    for byte in id.bytes() {
        token.push_str(&format!("{byte:02X}"));
    }
    token
}

/// The owner tokens of the owners a filter pins with top-level equalities.
fn owner_tokens(filter: &Filter) -> Vec<String> {
    [
        (OwnerField::User, 'u'),
        (OwnerField::Agent, 'a'),
        (OwnerField::App, 'p'),
        (OwnerField::Run, 'r'),
    ]
    .into_iter()
    .filter_map(|(field, prefix)| filter.pinned_owner(field).map(|id| owner_token(prefix, id)))
    .collect()
}

/// The words a keyword search ranks by, with their inverse document frequencies.
struct WordWeights {
    words: Vec<String>,
    idf: Vec<f64>,
}

impl WordWeights {
    /// The words of `query` worth ranking by, or `None` for a query without words.
    ///
    /// A word in at least half of the memories has no weight in BM25 (FTS5 gives it 1e-6),
    /// yet matching it reads most of the index. When such a word is also in at least
    /// [`DROPPED_WORD_MIN_ROWS`] memories it is dropped, if the query has other words; a
    /// query made only of such words keeps them all. Small stores rank every word.
    fn new(query: &[String], frequencies: &HashMap<String, i64>, rows: i64) -> Option<Self> {
        if query.is_empty() {
            return None;
        }
        let df = |word: &String| frequencies.get(word).copied().unwrap_or(0);
        let idf: Vec<f64> = query.iter().map(|w| bm25_idf(rows, df(w))).collect();
        let kept: Vec<usize> = (0..query.len())
            .filter(|&i| idf[i] > MIN_IDF || df(&query[i]) < DROPPED_WORD_MIN_ROWS)
            .collect();
        Some(if kept.is_empty() {
            WordWeights {
                words: query.to_vec(),
                idf,
            }
        } else {
            WordWeights {
                words: kept.iter().map(|&i| query[i].clone()).collect(),
                idf: kept.iter().map(|&i| idf[i]).collect(),
            }
        })
    }
}

/// The distinct words of several lists, in order of first appearance.
fn distinct<'a>(lists: impl IntoIterator<Item = &'a [String]>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    lists
        .into_iter()
        .flatten()
        .filter(|w| seen.insert(w.as_str()))
        .cloned()
        .collect()
}

impl KeywordSearch {
    /// Words as alternatives, matched in the memory's text and context.
    fn words_query(words: &[String]) -> String {
        let words: Vec<String> = words.iter().map(|w| fts_string(w)).collect();
        format!("{{memory context}} : ({})", words.join(" OR "))
    }

    /// Runs every search: one ranked list per query, as if each ran alone.
    fn run(
        &self,
        conn: &Connection,
        cache: &Mutex<DocFrequencies>,
    ) -> Result<Vec<Vec<(VectorKey, f32)>>> {
        let mut out = vec![Vec::new(); self.queries.len()];
        let words = distinct(self.queries.iter().map(Vec::as_slice));
        if words.is_empty() || self.limit == 0 {
            return Ok(out);
        }
        // The size of the table, from the first row that contains any word.
        let probe: Option<Vec<u8>> = conn
            .prepare_cached(
                "SELECT memlane_terms(memories_fts) FROM memories_fts WHERE memories_fts MATCH ?1 LIMIT 1",
            )
            .and_then(|mut stmt| {
                stmt.query_row([Self::words_query(&words)], |r| r.get(0))
                    .optional()
            })
            .map_err(sql_err)?;
        let Some(rows) = probe.as_deref().and_then(RowTerms::decode).map(|t| t.rows) else {
            return Ok(out);
        };
        let mut frequencies = HashMap::with_capacity(words.len());
        for word in words {
            let df = document_frequency(conn, cache, &word, rows)?;
            frequencies.insert(word, df);
        }
        let weights: Vec<Option<WordWeights>> = self
            .queries
            .iter()
            .map(|q| WordWeights::new(q, &frequencies, rows))
            .collect();
        if self.owners.is_empty() {
            for (hits, weights) in out.iter_mut().zip(&weights) {
                if let Some(weights) = weights {
                    *hits = self.ranked_by_sqlite(conn, weights)?;
                }
            }
        } else {
            self.ranked_within_owners(conn, &weights, &mut out)?;
        }
        Ok(out)
    }

    /// Ranked by FTS5's `bm25()`: used when no owner narrows the search.
    fn ranked_by_sqlite(
        &self,
        conn: &Connection,
        weights: &WordWeights,
    ) -> Result<Vec<(VectorKey, f32)>> {
        let mut params = vec![SqlValue::Text(Self::words_query(&weights.words))];
        let clause = visible(&self.filter, self.now, self.include_expired, &mut params);
        params.push(SqlValue::Integer(self.limit.min(i64::MAX as usize) as i64));
        // CROSS JOIN keeps the full-text match as the outer loop: the other order would run
        // the match once per row of the filter.
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT m.vector_key, -bm25(memories_fts, 1.0, {CONTEXT_WEIGHT:?}, 0.0) FROM memories_fts \
                 CROSS JOIN memories m ON m.seq = memories_fts.rowid \
                 WHERE memories_fts MATCH ? AND {clause} \
                 ORDER BY bm25(memories_fts, 1.0, {CONTEXT_WEIGHT:?}, 0.0) LIMIT ?"
            ))
            .map_err(sql_err)?;
        let rows = stmt
            .query_map(params_from_iter(params), |r| {
                Ok((r.get::<_, i64>(0)? as VectorKey, r.get::<_, f64>(1)? as f32))
            })
            .map_err(sql_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
    }

    /// The same ranking, computed here for every search in one pass over the pinned owners'
    /// rows: the match is narrowed to those rows in the full-text index itself, and the
    /// words' document frequencies come from the cache, where `bm25()` would count them
    /// again by reading each word's whole posting list.
    fn ranked_within_owners(
        &self,
        conn: &Connection,
        weights: &[Option<WordWeights>],
        out: &mut [Vec<(VectorKey, f32)>],
    ) -> Result<()> {
        let phrases = distinct(weights.iter().flatten().map(|w| w.words.as_slice()));
        let phrase_of: HashMap<&str, usize> = phrases
            .iter()
            .enumerate()
            .map(|(i, w)| (w.as_str(), i))
            .collect();
        // Each search's words as phrase numbers of the match.
        let plans: Vec<Option<(Vec<usize>, &[f64])>> = weights
            .iter()
            .map(|w| {
                w.as_ref().map(|w| {
                    let phrase = w.words.iter().map(|x| phrase_of[x.as_str()]).collect();
                    (phrase, w.idf.as_slice())
                })
            })
            .collect();
        let owners: Vec<String> = self
            .owners
            .iter()
            .map(|t| format!("owners : {}", fts_string(t)))
            .collect();
        let owners = owners.join(" AND ");
        // The words come first, so phrase i of the match is `phrases[i]`.
        let query = format!("{} AND {owners}", Self::words_query(&phrases));
        let matched = conn
            .prepare_cached(
                "SELECT rowid, memlane_terms(memories_fts) FROM memories_fts WHERE memories_fts MATCH ?1",
            )
            .and_then(|mut stmt| {
                stmt.query_map([query], |r| {
                    let blob: Vec<u8> = r.get(1)?;
                    Ok((r.get::<_, i64>(0)?, RowTerms::decode(&blob)))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(sql_err)?;
        if matched.is_empty() {
            return Ok(());
        }
        let keys = self.admitted_keys(conn, &owners, &matched)?;
        let column_weights = [1.0, f64::from(CONTEXT_WEIGHT)];
        for (seq, terms) in matched {
            let Some(&key) = keys.get(&seq) else {
                continue;
            };
            let terms = terms
                .filter(|t| t.counts.len() >= phrases.len())
                .ok_or_else(|| Error::internal("memlane_terms returned a malformed row"))?;
            let avg_tokens = terms.table_tokens as f64 / terms.rows.max(1) as f64;
            let length = BM25_K1 * (1.0 - BM25_B + BM25_B * terms.row_tokens as f64 / avg_tokens);
            let frequency: Vec<f64> = terms
                .counts
                .iter()
                .map(|counts| {
                    column_weights
                        .iter()
                        .zip(counts)
                        .map(|(w, &c)| w * f64::from(c))
                        .sum()
                })
                .collect();
            for (hits, plan) in out.iter_mut().zip(&plans) {
                let Some((phrase, idf)) = plan else { continue };
                if phrase.iter().all(|&p| frequency[p] == 0.0) {
                    continue;
                }
                let score: f64 = phrase
                    .iter()
                    .zip(idf.iter())
                    .map(|(&p, idf)| {
                        let f = frequency[p];
                        idf * (f * (BM25_K1 + 1.0)) / (f + length)
                    })
                    .sum();
                hits.push((key, score as f32));
            }
        }
        for hits in out.iter_mut() {
            hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            hits.truncate(self.limit);
        }
        Ok(())
    }
}

/// The weight FTS5 gives a word in at least half of the rows.
const MIN_IDF: f64 = 1e-6;

/// How many memories a weightless word must be in before keyword search drops it.
const DROPPED_WORD_MIN_ROWS: i64 = 1_000;

impl KeywordSearch {
    /// The vector keys of the matched rows the filter admits, by row.
    ///
    /// Looking rows up one by one costs a read of each row (a memory's row holds its vector);
    /// reading the filter's rows from an index costs much less per row, but reads all of
    /// the owners' rows. The cheaper way is taken, judged by how many rows the owners have.
    fn admitted_keys(
        &self,
        conn: &Connection,
        owners: &str,
        matched: &[(i64, Option<RowTerms>)],
    ) -> Result<HashMap<i64, VectorKey>> {
        let owned: i64 = conn
            .prepare_cached("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?1")
            .and_then(|mut stmt| stmt.query_row([owners], |r| r.get(0)))
            .map_err(sql_err)?;
        let mut params = Vec::new();
        let sql = if owned <= 4 * matched.len() as i64 + 256 {
            let clause = visible(&self.filter, self.now, self.include_expired, &mut params);
            format!("SELECT m.seq, m.vector_key FROM memories m WHERE {clause}")
        } else {
            let rows: Vec<i64> = matched.iter().map(|(seq, _)| *seq).collect();
            params.push(SqlValue::Text(serde_json::to_string(&rows).map_err(
                |e| Error::internal(format!("cannot encode row numbers: {e}")),
            )?));
            let clause = visible(&self.filter, self.now, self.include_expired, &mut params);
            format!(
                "SELECT m.seq, m.vector_key FROM memories m \
                 WHERE m.seq IN (SELECT value FROM json_each(?)) AND {clause}"
            )
        };
        let mut stmt = conn.prepare_cached(&sql).map_err(sql_err)?;
        let rows = stmt
            .query_map(params_from_iter(params), |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as VectorKey))
            })
            .map_err(sql_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
    }
}

/// FTS5's inverse document frequency: never below a tiny positive weight, so a word in
/// more than half of the rows still counts, barely.
fn bm25_idf(rows: i64, df: i64) -> f64 {
    let idf = ((rows - df) as f64 + 0.5).ln() - (df as f64 + 0.5).ln();
    if idf <= 0.0 {
        MIN_IDF
    } else {
        idf
    }
}

/// How many rows contain `word` in their text or context, from `cache` when fresh.
fn document_frequency(
    conn: &Connection,
    cache: &Mutex<DocFrequencies>,
    word: &str,
    rows: i64,
) -> Result<i64> {
    if let Some(df) = lock(cache)?.get(word, rows) {
        return Ok(df);
    }
    let df: i64 = conn
        .prepare_cached("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?1")
        .and_then(|mut stmt| {
            stmt.query_row(
                params![format!("{{memory context}} : {}", fts_string(word))],
                |r| r.get(0),
            )
        })
        .map_err(sql_err)?;
    lock(cache)?.put(word, df, rows);
    Ok(df)
}

/// Document frequencies of query words. Counting the rows that contain a word walks its
/// whole posting list (about 2 ms for a word in 100,000 memories), so counts are kept and
/// reused while the number of rows stays within 5% of the number they were counted at;
/// BM25 scores drift by no more than that before a recount.
#[derive(Debug, Default)]
struct DocFrequencies {
    words: HashMap<String, (i64, i64)>,
}

/// Words kept before the cache starts over.
const MAX_CACHED_WORDS: usize = 50_000;

impl DocFrequencies {
    fn get(&self, word: &str, rows: i64) -> Option<i64> {
        let &(df, counted_at) = self.words.get(word)?;
        ((rows - counted_at).abs() * 20 <= counted_at).then_some(df)
    }

    fn put(&mut self, word: &str, df: i64, rows: i64) {
        if self.words.len() >= MAX_CACHED_WORDS {
            self.words.clear();
        }
        self.words.insert(word.to_string(), (df, rows));
    }
}

fn time(micros: i64) -> rusqlite::Result<DateTime<Utc>> {
    DateTime::from_timestamp_micros(micros).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Integer,
            "timestamp out of range".into(),
        )
    })
}

fn json_column<T: serde::de::DeserializeOwned>(text: &str) -> rusqlite::Result<T> {
    serde_json::from_str(text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

fn record_from_row(row: &Row<'_>) -> rusqlite::Result<MemoryRecord> {
    let id: String = row.get(0)?;
    let metadata: String = row.get(6)?;
    let categories: String = row.get(7)?;
    Ok(MemoryRecord {
        id: Uuid::parse_str(&id).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
        })?,
        memory: row.get(1)?,
        owners: Owners {
            user_id: row.get(2)?,
            agent_id: row.get(3)?,
            app_id: row.get(4)?,
            run_id: row.get(5)?,
        },
        metadata: json_column::<Map<String, Value>>(&metadata)?,
        categories: json_column(&categories)?,
        immutable: row.get(8)?,
        expiration_date: row.get::<_, Option<i64>>(9)?.map(time).transpose()?,
        created_at: time(row.get(10)?)?,
        updated_at: time(row.get(11)?)?,
        hash: row.get(12)?,
        context: row.get(13)?,
    })
}

fn vector_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn vector_from_bytes(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn to_json(v: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::internal(format!("cannot serialise a record: {e}")))
}

const HISTORY_COLUMNS: &str = "id, memory_id, event, old_memory, new_memory, input, user_id, \
     agent_id, app_id, run_id, categories, metadata, created_at";

fn history_from_row(r: &Row<'_>) -> rusqlite::Result<HistoryRecord> {
    let bad = |e: Box<dyn std::error::Error + Send + Sync>| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, e)
    };
    let id: String = r.get(0)?;
    let memory_id: String = r.get(1)?;
    let event: String = r.get(2)?;
    let input: String = r.get(5)?;
    let categories: String = r.get(10)?;
    let metadata: String = r.get(11)?;
    Ok(HistoryRecord {
        id: Uuid::parse_str(&id).map_err(|e| bad(Box::new(e)))?,
        memory_id: Uuid::parse_str(&memory_id).map_err(|e| bad(Box::new(e)))?,
        event: HistoryEvent::parse(&event)
            .ok_or_else(|| bad(format!("unknown event {event}").into()))?,
        old_memory: r.get(3)?,
        new_memory: r.get(4)?,
        input: json_column::<Vec<Message>>(&input)?,
        owners: Owners {
            user_id: r.get(6)?,
            agent_id: r.get(7)?,
            app_id: r.get(8)?,
            run_id: r.get(9)?,
        },
        categories: json_column(&categories)?,
        metadata: json_column(&metadata)?,
        created_at: time(r.get(12)?)?,
    })
}

fn insert_feedback(tx: &Transaction<'_>, f: &Feedback) -> Result<()> {
    tx.execute(
        "INSERT INTO feedback (memory_id, feedback, reason, updated_at) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (memory_id) DO UPDATE SET feedback = excluded.feedback, \
         reason = excluded.reason, updated_at = excluded.updated_at",
        params![
            f.memory_id.to_string(),
            f.feedback.map(FeedbackKind::as_str),
            f.feedback_reason,
            f.updated_at.map(micros).unwrap_or_default()
        ],
    )
    .map_err(sql_err)?;
    Ok(())
}

fn insert_history(tx: &Transaction<'_>, h: &HistoryRecord) -> Result<()> {
    tx.execute(
        "INSERT INTO history (id, memory_id, event, old_memory, new_memory, input, user_id, agent_id, \
         app_id, run_id, categories, metadata, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        params![
            h.id.to_string(),
            h.memory_id.to_string(),
            h.event.as_str(),
            h.old_memory,
            h.new_memory,
            to_json(&h.input)?,
            h.owners.user_id,
            h.owners.agent_id,
            h.owners.app_id,
            h.owners.run_id,
            to_json(&h.categories)?,
            to_json(&h.metadata)?,
            micros(h.created_at),
        ],
    )
    .map_err(sql_err)?;
    Ok(())
}

fn next_key(tx: &Transaction<'_>) -> Result<VectorKey> {
    let key: i64 = tx
        .query_row(
            "UPDATE state SET max_key = max_key + 1 WHERE id = 1 RETURNING max_key",
            [],
            |r| r.get(0),
        )
        .map_err(sql_err)?;
    Ok(key as VectorKey)
}

/// A live row for update or delete: its record and vector key.
fn live_row(tx: &Transaction<'_>, id: Uuid) -> Result<(MemoryRecord, VectorKey)> {
    tx.query_row(
        &format!("SELECT {COLUMNS}, m.vector_key FROM memories m WHERE m.id = ?1 AND {LIVE}"),
        params![id.to_string()],
        |r| Ok((record_from_row(r)?, r.get::<_, i64>(EXTRA)? as VectorKey)),
    )
    .optional()
    .map_err(sql_err)?
    .ok_or(Error::NotFound { id })
}

fn delete_row(
    tx: &Transaction<'_>,
    record: MemoryRecord,
    key: VectorKey,
    at: DateTime<Utc>,
    input: &[Message],
    changes: &mut Vec<Change>,
) -> Result<()> {
    tx.execute(
        "UPDATE memories SET deleted_at = ?1 WHERE id = ?2",
        params![micros(at), record.id.to_string()],
    )
    .map_err(sql_err)?;
    insert_history(
        tx,
        &history_record(
            HistoryEvent::Delete,
            Some(&record.memory),
            &record,
            input,
            at,
        ),
    )?;
    changes.push(Change {
        event: HistoryEvent::Delete,
        record,
        retired_key: Some(key),
        added_key: None,
    });
    Ok(())
}

fn apply_write(tx: &Transaction<'_>, write: Write, changes: &mut Vec<Change>) -> Result<()> {
    match write {
        Write::Insert(new) => {
            let r = &new.record;
            let key = next_key(tx)?;
            let inserted = tx.execute(
                "INSERT INTO memories (id, memory, user_id, agent_id, app_id, run_id, metadata, categories, \
                 immutable, expiration_date, created_at, updated_at, hash, vector_key, vector, context) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
                params![
                    r.id.to_string(),
                    r.memory,
                    r.owners.user_id,
                    r.owners.agent_id,
                    r.owners.app_id,
                    r.owners.run_id,
                    to_json(&r.metadata)?,
                    to_json(&r.categories)?,
                    r.immutable,
                    r.expiration_date.map(micros),
                    micros(r.created_at),
                    micros(r.updated_at),
                    r.hash,
                    key as i64,
                    vector_bytes(&new.vector),
                    r.context,
                ],
            );
            match inserted {
                Ok(_) => {}
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    return Err(Error::Conflict {
                        detail: format!("a memory with id {} already exists", r.id),
                    })
                }
                Err(e) => return Err(sql_err(e)),
            }
            match &new.history {
                Some(history) => {
                    for h in history {
                        insert_history(tx, h)?;
                    }
                }
                None => insert_history(
                    tx,
                    &history_record(HistoryEvent::Add, None, r, &new.input, r.created_at),
                )?,
            }
            if let Some(f) = &new.feedback {
                insert_feedback(tx, f)?;
            }
            changes.push(Change {
                event: HistoryEvent::Add,
                record: new.record,
                retired_key: None,
                added_key: Some(key),
            });
        }
        Write::Update(update) => {
            let (mut record, old_key) = live_row(tx, update.id)?;
            if record.immutable {
                return Err(immutable_error(update.id));
            }
            let old = record.memory.clone();
            let (mut retired, mut added) = (None, None);
            if let Some((text, vector)) = update.text {
                let key = next_key(tx)?;
                record.hash = content_hash(&text);
                record.memory = text;
                tx.execute(
                    "UPDATE memories SET memory = ?1, hash = ?2, vector_key = ?3, vector = ?4 WHERE id = ?5",
                    params![record.memory, record.hash, key as i64, vector_bytes(&vector), record.id.to_string()],
                )
                .map_err(sql_err)?;
                retired = Some(old_key);
                added = Some(key);
            }
            if let Some(m) = update.metadata {
                record.metadata = m;
            }
            if let Some(c) = update.categories {
                record.categories = c;
            }
            record.updated_at = update.at;
            tx.execute(
                "UPDATE memories SET metadata = ?1, categories = ?2, updated_at = ?3 WHERE id = ?4",
                params![
                    to_json(&record.metadata)?,
                    to_json(&record.categories)?,
                    micros(record.updated_at),
                    record.id.to_string()
                ],
            )
            .map_err(sql_err)?;
            insert_history(
                tx,
                &history_record(
                    HistoryEvent::Update,
                    Some(&old),
                    &record,
                    &update.input,
                    update.at,
                ),
            )?;
            changes.push(Change {
                event: HistoryEvent::Update,
                record,
                retired_key: retired,
                added_key: added,
            });
        }
        Write::Delete { id, at, input } => {
            let (record, key) = live_row(tx, id)?;
            delete_row(tx, record, key, at, &input, changes)?;
        }
        Write::DeleteWhere { filter, at } => {
            let mut params = Vec::new();
            let sql = format!(
                "SELECT {COLUMNS}, m.vector_key FROM memories m WHERE {LIVE} AND ({}) ORDER BY m.seq",
                compile(&filter, &mut params)
            );
            let rows: Vec<(MemoryRecord, VectorKey)> = {
                let mut stmt = tx.prepare(&sql).map_err(sql_err)?;
                let mapped = stmt
                    .query_map(params_from_iter(params), |r| {
                        Ok((record_from_row(r)?, r.get::<_, i64>(EXTRA)? as VectorKey))
                    })
                    .map_err(sql_err)?;
                mapped.collect::<rusqlite::Result<_>>().map_err(sql_err)?
            };
            for (record, key) in rows {
                delete_row(tx, record, key, at, &[], changes)?;
            }
        }
    }
    Ok(())
}

fn query_records(conn: &Connection, sql: &str, params: Vec<SqlValue>) -> Result<Vec<MemoryRecord>> {
    let mut stmt = conn.prepare_cached(sql).map_err(sql_err)?;
    let rows = stmt
        .query_map(params_from_iter(params), record_from_row)
        .map_err(sql_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
}

#[async_trait]
impl Store for SqliteStore {
    async fn apply(&self, batch: WriteBatch) -> Result<WriteOutcome> {
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(sql_err)?;
            let credits: i64 = tx
                .query_row("SELECT credits FROM state WHERE id = 1", [], |r| r.get(0))
                .map_err(sql_err)?;
            let credits = credits.max(0) as u64;
            if credits < batch.credits {
                return Err(Error::InsufficientCredits {
                    needed: batch.credits,
                    remaining: credits,
                });
            }
            let mut changes = Vec::with_capacity(batch.writes.len());
            for write in batch.writes {
                // An error drops `tx`, which rolls the whole batch back.
                apply_write(&tx, write, &mut changes)?;
            }
            let remaining = credits - batch.credits;
            tx.execute(
                "UPDATE state SET credits = ?1 WHERE id = 1",
                params![remaining as i64],
            )
            .map_err(sql_err)?;
            tx.commit().map_err(sql_err)?;
            Ok(WriteOutcome {
                changes,
                credits_remaining: remaining,
            })
        })
        .await
    }

    async fn get(&self, id: Uuid) -> Result<Option<MemoryRecord>> {
        self.read(move |conn| {
            let sql = format!("SELECT {COLUMNS} FROM memories m WHERE m.id = ?1 AND {LIVE}");
            Ok(query_records(conn, &sql, vec![SqlValue::Text(id.to_string())])?.pop())
        })
        .await
    }

    async fn get_by_keys(&self, keys: &[VectorKey]) -> Result<Vec<(VectorKey, MemoryRecord)>> {
        let keys = keys.to_vec();
        self.read(move |conn| {
            let mut out = Vec::with_capacity(keys.len());
            for chunk in keys.chunks(500) {
                let marks = vec!["?"; chunk.len()].join(", ");
                let sql = format!("SELECT {COLUMNS}, m.vector_key FROM memories m WHERE m.vector_key IN ({marks}) AND {LIVE}");
                let mut stmt = conn.prepare_cached(&sql).map_err(sql_err)?;
                let rows = stmt
                    .query_map(params_from_iter(chunk.iter().map(|k| *k as i64)), |r| {
                        Ok((r.get::<_, i64>(EXTRA)? as VectorKey, record_from_row(r)?))
                    })
                    .map_err(sql_err)?;
                for row in rows {
                    out.push(row.map_err(sql_err)?);
                }
            }
            Ok(out)
        })
        .await
    }

    async fn list(&self, query: ListQuery) -> Result<ListPage> {
        self.read(move |conn| {
            // One read transaction: the count and the page see the same snapshot.
            let conn = conn.unchecked_transaction().map_err(sql_err)?;
            let mut params = Vec::new();
            let clause = visible(&query.filter, query.now, query.include_expired, &mut params);
            let count: i64 = conn
                .query_row(
                    &format!("SELECT COUNT(*) FROM memories m WHERE {clause}"),
                    params_from_iter(params.clone()),
                    |r| r.get(0),
                )
                .map_err(sql_err)?;
            let mut sql = format!("SELECT {COLUMNS}, m.seq FROM memories m WHERE {clause}");
            if let Some(before) = query.before {
                sql.push_str(" AND m.seq < ?");
                params.push(SqlValue::Integer(before.min(i64::MAX as u64) as i64));
            }
            sql.push_str(" ORDER BY m.seq DESC LIMIT ?");
            params.push(SqlValue::Integer(
                query.limit.saturating_add(1).min(i64::MAX as usize) as i64,
            ));
            let mut stmt = conn.prepare(&sql).map_err(sql_err)?;
            let rows = stmt
                .query_map(params_from_iter(params), |r| {
                    Ok((record_from_row(r)?, r.get::<_, i64>(EXTRA)?))
                })
                .map_err(sql_err)?;
            let mut page: Vec<(MemoryRecord, i64)> =
                rows.collect::<rusqlite::Result<_>>().map_err(sql_err)?;
            let more = page.len() > query.limit;
            page.truncate(query.limit);
            let next = if more {
                page.last().map(|(_, seq)| *seq as u64)
            } else {
                None
            };
            Ok(ListPage {
                records: page.into_iter().map(|(r, _)| r).collect(),
                next,
                count: count.max(0) as u64,
            })
        })
        .await
    }

    async fn matching_keys(
        &self,
        filter: &Filter,
        now: DateTime<Utc>,
        include_expired: bool,
    ) -> Result<Vec<VectorKey>> {
        let filter = filter.clone();
        self.read(move |conn| {
            let mut params = Vec::new();
            let clause = visible(&filter, now, include_expired, &mut params);
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT m.vector_key FROM memories m WHERE {clause} ORDER BY m.vector_key"
                ))
                .map_err(sql_err)?;
            let keys = stmt
                .query_map(params_from_iter(params), |r| {
                    Ok(r.get::<_, i64>(0)? as VectorKey)
                })
                .map_err(sql_err)?;
            keys.collect::<rusqlite::Result<_>>().map_err(sql_err)
        })
        .await
    }

    async fn keyword_search(
        &self,
        query: &str,
        filter: &Filter,
        now: DateTime<Utc>,
        include_expired: bool,
        limit: usize,
    ) -> Result<Vec<(VectorKey, f32)>> {
        let mut hits = self
            .keyword_search_many(&[query.to_string()], filter, now, include_expired, limit)
            .await?;
        Ok(hits.pop().unwrap_or_default())
    }

    async fn keyword_search_many(
        &self,
        queries: &[String],
        filter: &Filter,
        now: DateTime<Utc>,
        include_expired: bool,
        limit: usize,
    ) -> Result<Vec<Vec<(VectorKey, f32)>>> {
        let search = KeywordSearch {
            queries: queries.iter().map(|q| query_keywords(q)).collect(),
            owners: owner_tokens(filter),
            filter: filter.clone(),
            now,
            include_expired,
            limit,
        };
        let shared = Arc::clone(&self.shared);
        self.read(move |conn| search.run(conn, &shared.frequencies))
            .await
    }

    async fn vectors_after(
        &self,
        after: VectorKey,
        limit: usize,
    ) -> Result<Vec<(VectorKey, Vec<f32>)>> {
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT m.vector_key, m.vector FROM memories m WHERE m.vector_key > ?1 AND {LIVE} \
                     ORDER BY m.vector_key LIMIT ?2"
                ))
                .map_err(sql_err)?;
            let rows = stmt
                .query_map(params![after.min(i64::MAX as u64) as i64, limit.min(i64::MAX as usize) as i64], |r| {
                    let bytes: Vec<u8> = r.get(1)?;
                    Ok((r.get::<_, i64>(0)? as VectorKey, vector_from_bytes(&bytes)))
                })
                .map_err(sql_err)?;
            rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
        })
        .await
    }

    async fn live_keys(&self) -> Result<Vec<LiveKey>> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT m.vector_key, m.expiration_date FROM memories m WHERE {LIVE}"
                ))
                .map_err(sql_err)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok(LiveKey {
                        key: r.get::<_, i64>(0)? as VectorKey,
                        expires_at: r.get(1)?,
                    })
                })
                .map_err(sql_err)?;
            rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
        })
        .await
    }

    async fn history(&self, id: Uuid) -> Result<Vec<HistoryRecord>> {
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {HISTORY_COLUMNS} FROM history WHERE memory_id = ?1 ORDER BY seq"
                ))
                .map_err(sql_err)?;
            let rows = stmt
                .query_map(params![id.to_string()], history_from_row)
                .map_err(sql_err)?;
            rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
        })
        .await
    }

    async fn entities(
        &self,
        kind: Option<EntityKind>,
        after: Option<(EntityKind, String)>,
        limit: usize,
    ) -> Result<Vec<Entity>> {
        self.read(move |conn| {
            let mut out = Vec::new();
            for k in EntityKind::ALL {
                if kind.is_some_and(|want| want != k) {
                    continue;
                }
                let after_id = match &after {
                    Some((ak, _)) if *ak > k => continue,
                    Some((ak, id)) if *ak == k => Some(id.clone()),
                    _ => None,
                };
                let left = limit.saturating_sub(out.len());
                if left == 0 {
                    break;
                }
                // The owner columns are fixed names, never caller input.
                let column = format!("{}_id", k.as_str());
                let mut stmt = conn
                    .prepare_cached(&format!(
                        "SELECT m.{column}, COUNT(*), MIN(m.created_at), MAX(m.updated_at) \
                         FROM memories m WHERE {LIVE} AND m.{column} IS NOT NULL \
                         AND (?1 IS NULL OR m.{column} > ?1) \
                         GROUP BY m.{column} ORDER BY m.{column} LIMIT ?2"
                    ))
                    .map_err(sql_err)?;
                let rows = stmt
                    .query_map(params![after_id, left.min(i64::MAX as usize) as i64], |r| {
                        Ok(Entity {
                            id: r.get(0)?,
                            kind: k,
                            memory_count: r.get::<_, i64>(1)?.max(0) as u64,
                            created_at: time(r.get(2)?)?,
                            updated_at: time(r.get(3)?)?,
                        })
                    })
                    .map_err(sql_err)?;
                for row in rows {
                    out.push(row.map_err(sql_err)?);
                }
            }
            Ok(out)
        })
        .await
    }

    async fn changes_after(&self, cursor: u64, limit: usize) -> Result<Vec<(u64, HistoryRecord)>> {
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {HISTORY_COLUMNS}, seq FROM history WHERE seq > ?1 ORDER BY seq LIMIT ?2"
                ))
                .map_err(sql_err)?;
            let rows = stmt
                .query_map(
                    params![
                        cursor.min(i64::MAX as u64) as i64,
                        limit.min(i64::MAX as usize) as i64
                    ],
                    |r| Ok((r.get::<_, i64>(13)? as u64, history_from_row(r)?)),
                )
                .map_err(sql_err)?;
            rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
        })
        .await
    }

    async fn vectors_of(&self, ids: &[Uuid]) -> Result<Vec<(Uuid, Vec<f32>)>> {
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        self.read(move |conn| {
            let mut out = Vec::with_capacity(ids.len());
            for chunk in ids.chunks(500) {
                let marks = vec!["?"; chunk.len()].join(", ");
                let mut stmt = conn
                    .prepare_cached(&format!(
                        "SELECT m.id, m.vector FROM memories m WHERE m.id IN ({marks}) AND {LIVE}"
                    ))
                    .map_err(sql_err)?;
                let rows = stmt
                    .query_map(params_from_iter(chunk), |r| {
                        let id: String = r.get(0)?;
                        let bytes: Vec<u8> = r.get(1)?;
                        Ok((id, vector_from_bytes(&bytes)))
                    })
                    .map_err(sql_err)?;
                for row in rows {
                    let (id, vector) = row.map_err(sql_err)?;
                    let id = Uuid::parse_str(&id)
                        .map_err(|e| Error::internal(format!("a stored id is not a UUID: {e}")))?;
                    out.push((id, vector));
                }
            }
            Ok(out)
        })
        .await
    }

    async fn set_feedback(&self, feedback: Feedback) -> Result<()> {
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(sql_err)?;
            let id = feedback.memory_id.to_string();
            let live: bool = tx
                .query_row(
                    &format!("SELECT EXISTS (SELECT 1 FROM memories m WHERE m.id = ?1 AND {LIVE})"),
                    [&id],
                    |r| r.get(0),
                )
                .map_err(sql_err)?;
            if !live {
                return Err(Error::NotFound {
                    id: feedback.memory_id,
                });
            }
            insert_feedback(&tx, &feedback)?;
            tx.commit().map_err(sql_err)
        })
        .await
    }

    async fn feedback(&self, ids: &[Uuid]) -> Result<Vec<Feedback>> {
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        self.read(move |conn| {
            let mut out = Vec::new();
            for chunk in ids.chunks(500) {
                let marks = vec!["?"; chunk.len()].join(", ");
                let mut stmt = conn
                    .prepare_cached(&format!(
                        "SELECT memory_id, feedback, reason, updated_at FROM feedback \
                         WHERE memory_id IN ({marks})"
                    ))
                    .map_err(sql_err)?;
                let rows = stmt
                    .query_map(params_from_iter(chunk), |r| {
                        let id: String = r.get(0)?;
                        let kind: Option<String> = r.get(1)?;
                        Ok(Feedback {
                            memory_id: Uuid::parse_str(&id).map_err(|e| {
                                rusqlite::Error::FromSqlConversionFailure(
                                    0,
                                    rusqlite::types::Type::Text,
                                    Box::new(e),
                                )
                            })?,
                            feedback: kind.as_deref().and_then(FeedbackKind::parse),
                            feedback_reason: r.get(2)?,
                            updated_at: Some(time(r.get(3)?)?),
                        })
                    })
                    .map_err(sql_err)?;
                for row in rows {
                    out.push(row.map_err(sql_err)?);
                }
            }
            Ok(out)
        })
        .await
    }

    async fn negative_feedback_count(&self) -> Result<u64> {
        self.read(|conn| {
            let n: i64 = conn
                .query_row(
                    "SELECT COUNT(*) FROM feedback WHERE feedback IN ('NEGATIVE', 'VERY_NEGATIVE')",
                    [],
                    |r| r.get(0),
                )
                .map_err(sql_err)?;
            Ok(n.max(0) as u64)
        })
        .await
    }

    async fn meta(&self, key: &str) -> Result<Option<String>> {
        let key = key.to_owned();
        self.read(move |conn| {
            conn.query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| {
                r.get(0)
            })
            .optional()
            .map_err(sql_err)
        })
        .await
    }

    async fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        let (key, value) = (key.to_owned(), value.to_owned());
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![key, value],
            )
            .map_err(sql_err)?;
            Ok(())
        })
        .await
    }

    async fn credits(&self) -> Result<u64> {
        self.read(|conn| {
            let c: i64 = conn
                .query_row("SELECT credits FROM state WHERE id = 1", [], |r| r.get(0))
                .map_err(sql_err)?;
            Ok(c.max(0) as u64)
        })
        .await
    }

    async fn add_credits(&self, amount: u64) -> Result<u64> {
        self.write(move |conn| {
            // Balances are stored as SQLite integers: saturate at i64::MAX.
            let credits: i64 = conn
                .query_row(
                    "UPDATE state SET credits = min(credits + min(?1, 9223372036854775807 - credits), \
                     9223372036854775807) WHERE id = 1 RETURNING credits",
                    params![amount.min(i64::MAX as u64) as i64],
                    |r| r.get(0),
                )
                .map_err(sql_err)?;
            Ok(credits.max(0) as u64)
        })
        .await
    }

    async fn max_key(&self) -> Result<VectorKey> {
        self.read(|conn| {
            let k: i64 = conn
                .query_row("SELECT max_key FROM state WHERE id = 1", [], |r| r.get(0))
                .map_err(sql_err)?;
            Ok(k.max(0) as VectorKey)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_ops_round_trip_through_sql_encoding() {
        let ops = vec![
            Op::Eq(serde_json::json!(1)),
            Op::In(vec![serde_json::json!("a"), serde_json::json!(2)]),
            Op::Icontains("x".into()),
            Op::Exists,
            Op::Lte(serde_json::json!("2024")),
        ];
        for op in ops {
            assert_eq!(decode_op(&encode_op(&op)), Some(op));
        }
    }

    #[test]
    fn migrations_are_idempotent_and_versioned() {
        let dir = tempfile::tempdir().ok();
        let Some(dir) = dir else { return };
        let path = dir.path().join("m.db");
        for _ in 0..2 {
            let store = SqliteStore::open(&path);
            assert!(store.is_ok());
        }
        let conn = Connection::open(&path).ok();
        let version: Option<usize> = conn.and_then(|c| {
            c.pragma_query_value(None, "user_version", |r| r.get(0))
                .ok()
        });
        assert_eq!(version, Some(MIGRATIONS.len()));
    }
}
