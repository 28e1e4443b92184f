//! The SQLite store: one file, WAL, schema migrations, every call off the async runtime.
//!
//! - `schema.rs`: migrations and the SQL functions every connection registers;
//! - `filter_sql.rs`: filters compiled to SQL;
//! - `keyword.rs` and `fts.rs`: the keyword index (FTS5 over the crate's terms);
//! - `rows.rs`: row codecs;
//! - `write.rs`: the transaction, with every precondition checked inside it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, params_from_iter, Connection, OpenFlags, OptionalExtension};
use uuid::Uuid;

mod filter_sql;
mod fts;
mod keyword;
mod rows;
mod schema;
mod write;

use filter_sql::visible;
use rows::{COLUMNS, LOG_COLUMNS};

use super::{
    Among, Committed, Counters, Entity, EntityKind, EntityQuery, Feedback, FeedbackKind,
    KeywordHits, KeywordIndex, KeywordQuery, LogQuery, Row, Scan, ScanPage, Store, StoredVector,
    Transaction, VectorKey, VectorQuery,
};
use crate::error::{Error, Result};
use crate::record::HistoryRecord;

const LIVE: &str = "m.deleted_at IS NULL";

/// How long a statement waits for another connection's lock before it fails.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long opening a file waits for another process's schema migration.
const MIGRATION_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Idle read connections kept open for reuse.
const MAX_IDLE_READERS: usize = 4;

/// Rows read by key on the caller's thread, at most (see `SqliteStore::read_by_key`); more
/// go to the blocking pool.
const POINT_READ_MAX: usize = 64;

/// The SQLite store: memories, vectors, the change log and metadata in one file.
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
    frequencies: Mutex<keyword::DocFrequencies>,
    /// The connection that answers [`Store::change_token`] (`PRAGMA data_version`), opened
    /// on first use; files only.
    watcher: Mutex<Option<Connection>>,
    /// Transactions committed through this store, the change token of an in-memory
    /// database (whose one connection cannot see its own commits in `data_version`).
    commits: std::sync::atomic::AtomicU64,
    /// Reads that list or count the rows a filter admits ([`Store::keys`],
    /// [`Store::count`]), for the tests of the index's own owner lists.
    #[cfg(test)]
    filter_reads: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.shared.path)
            .finish_non_exhaustive()
    }
}

/// A count or cursor as SQLite's integer, clamped to its range.
fn sql_int(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

fn sql_err(e: rusqlite::Error) -> Error {
    Error::storage("SQLite failed", e)
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| Error::internal("a storage lock was poisoned by a panic"))
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and migrates its schema. Blocks the
    /// calling thread briefly; [`Memory::open`](crate::Memory::open) calls it off the runtime.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore> {
        let path = path.as_ref().to_path_buf();
        let conn = Self::connect(&path, false)?;
        // Another process may be migrating the same file: wait for it as long as a large
        // migration takes, then find the schema current.
        conn.busy_timeout(MIGRATION_WAIT).map_err(sql_err)?;
        schema::init(&conn)?;
        conn.busy_timeout(BUSY_WAIT).map_err(sql_err)?;
        Ok(Self::with(conn, Some(path)))
    }

    /// A fresh database that lives in memory and is gone when the store is dropped.
    pub fn in_memory() -> Result<SqliteStore> {
        let conn = Connection::open_in_memory().map_err(sql_err)?;
        schema::register_functions(&conn)?;
        schema::init(&conn)?;
        Ok(Self::with(conn, None))
    }

    fn with(writer: Connection, path: Option<PathBuf>) -> SqliteStore {
        SqliteStore {
            shared: Arc::new(Shared {
                writer: Mutex::new(writer),
                readers: Mutex::new(Vec::new()),
                path,
                frequencies: Mutex::default(),
                watcher: Mutex::new(None),
                commits: std::sync::atomic::AtomicU64::new(0),
                #[cfg(test)]
                filter_reads: std::sync::atomic::AtomicUsize::new(0),
            }),
        }
    }

    /// The database file, or `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.shared.path.as_deref()
    }

    /// How many times [`Store::keys`] or [`Store::count`] was read.
    #[cfg(test)]
    pub(crate) fn filter_reads(&self) -> usize {
        self.shared
            .filter_reads
            .load(std::sync::atomic::Ordering::Relaxed)
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
        conn.busy_timeout(BUSY_WAIT).map_err(sql_err)?;
        conn.execute_batch("PRAGMA cache_size = -65536; PRAGMA foreign_keys = ON;")
            .map_err(sql_err)?;
        if !read_only {
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
                .map_err(sql_err)?;
            conn.pragma_update(None, "synchronous", "FULL")
                .map_err(sql_err)?;
        }
        schema::register_functions(&conn)?;
        Ok(conn)
    }

    async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        spawn(move || Self::read_with(&shared, f)).await
    }

    /// A read of `rows` rows by key: when they are few (at most [`POINT_READ_MAX`]), on the
    /// caller's thread, as a hand-off to the blocking pool and back costs more than such a
    /// read (tens of microseconds each way on a busy machine, against a few for an indexed
    /// lookup). A file's reader never waits for its writer (WAL); a store in memory shares
    /// its one connection with writes, so its reads always go to the pool.
    async fn read_by_key<T, F>(&self, rows: usize, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        if self.shared.path.is_none() || rows > POINT_READ_MAX {
            return self.read(f).await;
        }
        Self::read_with(&self.shared, f)
    }

    fn read_with<T>(shared: &Shared, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
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

/// Rows read with [`COLUMNS`].
fn query_rows(conn: &Connection, sql: &str, params: Vec<SqlValue>) -> Result<Vec<Row>> {
    let mut stmt = conn.prepare_cached(sql).map_err(sql_err)?;
    let rows = stmt
        .query_map(params_from_iter(params), rows::row)
        .map_err(sql_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
}

/// The vector keys `sql` selects (its first column).
fn select_keys(conn: &Connection, sql: &str, params: Vec<SqlValue>) -> Result<Vec<VectorKey>> {
    let mut stmt = conn.prepare_cached(sql).map_err(sql_err)?;
    let keys = stmt
        .query_map(params_from_iter(params), |r| {
            Ok(r.get::<_, i64>(0)? as VectorKey)
        })
        .map_err(sql_err)?;
    keys.collect::<rusqlite::Result<_>>().map_err(sql_err)
}

/// Vector keys as a JSON array, for `json_each`.
fn json_keys(keys: &[VectorKey]) -> Result<String> {
    let keys: Vec<i64> = keys.iter().map(|k| *k as i64).collect();
    serde_json::to_string(&keys)
        .map_err(|e| Error::internal(format!("cannot encode vector keys: {e}")))
}

/// Runs `sql` (with `?` marks for a chunk of values) over values in chunks of 500.
fn chunked<V: Clone + rusqlite::ToSql>(
    conn: &Connection,
    values: &[V],
    sql: impl Fn(&str) -> String,
) -> Result<Vec<Row>> {
    let mut out = Vec::with_capacity(values.len());
    for chunk in values.chunks(500) {
        let marks = vec!["?"; chunk.len()].join(", ");
        let mut stmt = conn.prepare_cached(&sql(&marks)).map_err(sql_err)?;
        let rows = stmt
            .query_map(params_from_iter(chunk.iter()), rows::row)
            .map_err(sql_err)?;
        for row in rows {
            out.push(row.map_err(sql_err)?);
        }
    }
    Ok(out)
}

#[async_trait]
impl Store for SqliteStore {
    async fn commit(&self, tx: Transaction) -> Result<Committed> {
        let committed = self.write(move |conn| write::commit(conn, tx)).await?;
        self.shared
            .commits
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        Ok(committed)
    }

    async fn changed(&self, after: u64, limit: usize) -> Result<Vec<(u64, Uuid)>> {
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT seq, memory_id FROM history WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                )
                .map_err(sql_err)?;
            let rows = stmt
                .query_map(params![sql_int(after), sql_int(limit)], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
                })
                .map_err(sql_err)?;
            let mut out = Vec::new();
            for row in rows {
                let (seq, id) = row.map_err(sql_err)?;
                let id = Uuid::parse_str(&id).map_err(|e| Error::Storage {
                    detail: format!("the change log holds a malformed memory id {id:?}"),
                    source: Some(Box::new(e)),
                })?;
                out.push((seq.max(0) as u64, id));
            }
            Ok(out)
        })
        .await
    }

    /// SQLite's `PRAGMA data_version` on a connection of its own: it changes when any
    /// other connection (this store's writer, another handle's, another process's) has
    /// committed. Reading it takes a few microseconds: a look at the WAL index in shared
    /// memory, no page read.
    fn change_token(&self) -> Option<u64> {
        let Some(path) = &self.shared.path else {
            return Some(
                self.shared
                    .commits
                    .load(std::sync::atomic::Ordering::Acquire),
            );
        };
        let mut watcher = self.shared.watcher.lock().ok()?;
        if watcher.is_none() {
            *watcher = Some(Self::connect(path, true).ok()?);
        }
        let conn = watcher.as_ref()?;
        let version = conn
            .query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))
            .ok()?;
        Some(version as u64)
    }

    async fn rows(&self, ids: &[Uuid]) -> Result<Vec<Row>> {
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        self.read(move |conn| {
            chunked(conn, &ids, |marks| {
                format!("SELECT {COLUMNS} FROM memories m WHERE m.id IN ({marks})")
            })
        })
        .await
    }

    async fn rows_by_key(&self, keys: &[VectorKey]) -> Result<Vec<Row>> {
        let keys: Vec<i64> = keys.iter().map(|k| *k as i64).collect();
        self.read_by_key(keys.len(), move |conn| {
            chunked(conn, &keys, |marks| {
                format!(
                    "SELECT {COLUMNS} FROM memories m WHERE m.vector_key IN ({marks}) AND {LIVE}"
                )
            })
        })
        .await
    }

    async fn scan(&self, scan: &Scan) -> Result<ScanPage> {
        let scan = scan.clone();
        self.read(move |conn| {
            // One read transaction: the count and the page see the same snapshot.
            let conn = conn.unchecked_transaction().map_err(sql_err)?;
            let mut params = Vec::new();
            let clause = visible(&scan.filter, scan.now, scan.include_expired, &mut params);
            let count: i64 = conn
                .query_row(
                    &format!("SELECT COUNT(*) FROM memories m WHERE {clause}"),
                    params_from_iter(params.clone()),
                    |r| r.get(0),
                )
                .map_err(sql_err)?;
            let mut sql = format!("SELECT {COLUMNS} FROM memories m WHERE {clause}");
            if let Some(after) = scan.after {
                sql.push_str(" AND (m.created_at < ? OR (m.created_at = ? AND m.seq < ?))");
                let seq = sql_int(after.seq);
                params.extend([
                    SqlValue::Integer(after.created_at),
                    SqlValue::Integer(after.created_at),
                    SqlValue::Integer(seq),
                ]);
            }
            sql.push_str(" ORDER BY m.created_at DESC, m.seq DESC LIMIT ?");
            params.push(SqlValue::Integer(sql_int(scan.limit.saturating_add(1))));
            let page = query_rows(&conn, &sql, params)?;
            Ok(ScanPage::cut(page, scan.limit, count.max(0) as u64))
        })
        .await
    }

    async fn keys(&self, among: Among<'_>) -> Result<Vec<VectorKey>> {
        #[cfg(test)]
        self.shared
            .filter_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (filter, now, include_expired) =
            (among.filter.clone(), among.now, among.include_expired);
        self.read(move |conn| {
            let mut params = Vec::new();
            let clause = visible(&filter, now, include_expired, &mut params);
            let sql =
                format!("SELECT m.vector_key FROM memories m WHERE {clause} ORDER BY m.vector_key");
            select_keys(conn, &sql, params)
        })
        .await
    }

    async fn admitted(&self, keys: &[VectorKey], among: Among<'_>) -> Result<Vec<VectorKey>> {
        let keys = json_keys(keys)?;
        let (filter, now, include_expired) =
            (among.filter.clone(), among.now, among.include_expired);
        self.read(move |conn| {
            let mut params = vec![SqlValue::Text(keys)];
            let clause = visible(&filter, now, include_expired, &mut params);
            let sql = format!(
                "SELECT m.vector_key FROM memories m \
                 WHERE m.vector_key IN (SELECT value FROM json_each(?)) AND {clause}"
            );
            select_keys(conn, &sql, params)
        })
        .await
    }

    async fn replies(&self, keys: &[VectorKey]) -> Result<Vec<(VectorKey, VectorKey)>> {
        let keys = json_keys(keys)?;
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT a.vector_key, b.vector_key FROM memories a \
                     JOIN memories b ON b.vector_key = a.vector_key + 1 \
                     WHERE a.vector_key IN (SELECT value FROM json_each(?1)) \
                     AND b.vector_key IN (SELECT value FROM json_each(?1)) \
                     AND a.deleted_at IS NULL AND b.deleted_at IS NULL \
                     AND b.context = a.memory ORDER BY a.vector_key",
                )
                .map_err(sql_err)?;
            let pairs = stmt
                .query_map([keys], |r| {
                    Ok((
                        r.get::<_, i64>(0)? as VectorKey,
                        r.get::<_, i64>(1)? as VectorKey,
                    ))
                })
                .map_err(sql_err)?;
            pairs.collect::<rusqlite::Result<_>>().map_err(sql_err)
        })
        .await
    }

    async fn count(&self, among: Among<'_>, cap: usize) -> Result<usize> {
        #[cfg(test)]
        self.shared
            .filter_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (filter, now, include_expired) =
            (among.filter.clone(), among.now, among.include_expired);
        self.read(move |conn| {
            let mut params = Vec::new();
            let clause = visible(&filter, now, include_expired, &mut params);
            params.push(SqlValue::Integer(i64::try_from(cap).unwrap_or(i64::MAX)));
            conn.prepare_cached(&format!(
                "SELECT count(*) FROM (SELECT 1 FROM memories m WHERE {clause} LIMIT ?)"
            ))
            .and_then(|mut stmt| stmt.query_row(params_from_iter(params), |r| r.get::<_, i64>(0)))
            .map(|n| n.max(0) as usize)
            .map_err(sql_err)
        })
        .await
    }

    async fn vectors(&self, query: VectorQuery<'_>) -> Result<Vec<StoredVector>> {
        let decode = |r: &rusqlite::Row<'_>| -> rusqlite::Result<StoredVector> {
            let bytes: Vec<u8> = r.get(2)?;
            let id: String = r.get(1)?;
            Ok(StoredVector {
                key: r.get::<_, i64>(0)? as VectorKey,
                id: Uuid::parse_str(&id).map_err(|e| {
                    rusqlite::Error::FromSqlConversionFailure(
                        1,
                        rusqlite::types::Type::Text,
                        Box::new(e),
                    )
                })?,
                vector: rows::vector_from_bytes(&bytes),
                expires_at: r.get(3)?,
                owners: crate::record::Owners {
                    user_id: r.get(4)?,
                    agent_id: r.get(5)?,
                    app_id: r.get(6)?,
                    run_id: r.get(7)?,
                },
            })
        };
        const SELECT: &str = "SELECT m.vector_key, m.id, v.vector, \
             iif(m.valid_until IS NULL, m.expiration_date, -9223372036854775807), \
             m.user_id, m.agent_id, m.app_id, m.run_id \
             FROM memories m JOIN vectors v ON v.key = m.vector_key";
        match query {
            VectorQuery::After { key, limit } => {
                self.read(move |conn| {
                    let mut stmt = conn
                        .prepare_cached(&format!(
                            "{SELECT} WHERE m.vector_key > ?1 AND {LIVE} ORDER BY m.vector_key LIMIT ?2"
                        ))
                        .map_err(sql_err)?;
                    let rows = stmt
                        .query_map(
                            params![
                                sql_int(key),
                                sql_int(limit)
                            ],
                            decode,
                        )
                        .map_err(sql_err)?;
                    rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
                })
                .await
            }
            VectorQuery::Of(ids) => {
                let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
                self.read(move |conn| {
                    let mut out = Vec::with_capacity(ids.len());
                    for chunk in ids.chunks(500) {
                        let marks = vec!["?"; chunk.len()].join(", ");
                        let mut stmt = conn
                            .prepare_cached(&format!("{SELECT} WHERE m.id IN ({marks}) AND {LIVE}"))
                            .map_err(sql_err)?;
                        let rows = stmt
                            .query_map(params_from_iter(chunk), decode)
                            .map_err(sql_err)?;
                        for row in rows {
                            out.push(row.map_err(sql_err)?);
                        }
                    }
                    Ok(out)
                })
                .await
            }
        }
    }

    async fn log(&self, query: LogQuery) -> Result<Vec<(u64, HistoryRecord)>> {
        self.read(move |conn| {
            let cursor = sql_int(query.after);
            let limit = sql_int(query.limit);
            let mut stmt = match query.memory {
                None => conn.prepare_cached(&format!(
                    "SELECT {LOG_COLUMNS} FROM history WHERE seq > ?1 ORDER BY seq LIMIT ?2"
                )),
                Some(_) => conn.prepare_cached(&format!(
                    "SELECT {LOG_COLUMNS} FROM history WHERE seq > ?1 AND memory_id = ?3 \
                     ORDER BY seq LIMIT ?2"
                )),
            }
            .map_err(sql_err)?;
            let rows = match query.memory {
                None => stmt.query_map(params![cursor, limit], rows::log),
                Some(id) => stmt.query_map(params![cursor, limit, id.to_string()], rows::log),
            }
            .map_err(sql_err)?;
            rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
        })
        .await
    }

    async fn entities(&self, query: EntityQuery) -> Result<Vec<Entity>> {
        let EntityQuery { kind, after, limit } = query;
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
                    .query_map(params![after_id, sql_int(left)], |r| {
                        Ok(Entity {
                            id: r.get(0)?,
                            kind: k,
                            memory_count: r.get::<_, i64>(1)?.max(0) as u64,
                            created_at: rows::time(r.get(2)?)?,
                            updated_at: rows::time(r.get(3)?)?,
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

    async fn feedback(&self, ids: &[Uuid]) -> Result<Vec<Feedback>> {
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        self.read_by_key(ids.len(), move |conn| {
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
                            updated_at: Some(rows::time(r.get(3)?)?),
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

    async fn counters(&self) -> Result<Counters> {
        self.read(|conn| {
            conn.query_row(
                "SELECT credits, max_key, \
                 (SELECT COUNT(*) FROM feedback WHERE feedback IN ('NEGATIVE', 'VERY_NEGATIVE')), \
                 (SELECT COALESCE(MAX(seq), 0) FROM history) \
                 FROM state WHERE id = 1",
                [],
                |r| {
                    Ok(Counters {
                        credits: r.get::<_, i64>(0)?.max(0) as u64,
                        max_key: r.get::<_, i64>(1)?.max(0) as VectorKey,
                        negative_feedback: r.get::<_, i64>(2)?.max(0) as u64,
                        last_cursor: r.get::<_, i64>(3)?.max(0) as u64,
                    })
                },
            )
            .map_err(sql_err)
        })
        .await
    }

    fn keyword_index(&self) -> Option<&dyn KeywordIndex> {
        Some(self)
    }
}

#[async_trait]
impl KeywordIndex for SqliteStore {
    async fn search(&self, query: KeywordQuery<'_>) -> Result<KeywordHits> {
        let queries = query.queries.to_vec();
        let filter = query.filter.clone();
        let (now, include_expired, limit, min_rows) = (
            query.now,
            query.include_expired,
            query.limit,
            query.min_rows,
        );
        let shared = Arc::clone(&self.shared);
        self.read(move |conn| {
            keyword::search(
                conn,
                &shared.frequencies,
                KeywordQuery {
                    queries: &queries,
                    filter: &filter,
                    now,
                    include_expired,
                    limit,
                    min_rows,
                },
            )
        })
        .await
    }
}
