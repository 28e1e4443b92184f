//! The PostgreSQL store (feature `postgres`): memories, vectors (pgvector), the change log
//! and the keyword statistics in a database server, shared by every process on every host
//! that opens it. Searches run in the database; there is no in-process index to go stale.
//!
//! - `schema.rs`: one schema per project, migrated on open under an advisory lock;
//! - `errors.rs`: the server's errors as the crate's (what may be retried);
//! - `rows.rs`: the columns of a memory row and their decoding;
//! - `filter_sql.rs`: filters compiled to SQL;
//! - `write.rs`: the transaction, with every precondition checked inside it;
//! - `search.rs`: the candidate source (nearest vectors, BM25) in SQL.
//!
//! ## Commit order
//! Every commit of a project starts by locking the project's one state row (`UPDATE …
//! RETURNING`, which also checks and takes the charge), and allocates its vector keys and
//! change-log cursors from it. Commits of one project are therefore serialised, and cursors
//! are handed out in commit order: a reader of "changes after cursor N" never sees N + 2
//! while N + 1 is still to commit, so it never skips or repeats a change.

use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::{IsolationLevel, NoTls};
use uuid::Uuid;

mod errors;
mod filter_sql;
mod listen;
mod rows;
mod schema;
mod search;
mod write;

use errors::corrupt;
pub(crate) use errors::{pg_err, pool_err};
use filter_sql::{visible, Params};
use rows::{big, row_at, rows, time, COLUMNS};
pub(crate) use schema::MIGRATION_LOCK;

use super::{
    Committed, Counters, Entity, EntityKind, EntityQuery, Feedback, FeedbackKind, LogQuery, Row,
    Scan, ScanPage, Store, StoredVector, Transaction, VectorKey, VectorQuery,
};
use crate::error::{Error, Result};
use crate::record::HistoryRecord;

type Client = deadpool_postgres::Client;

/// The project a store opened without one uses.
pub const DEFAULT_PROJECT: &str = "default";

/// Connections a store opens at most, unless told otherwise.
const DEFAULT_CONNECTIONS: usize = 16;

/// A store on PostgreSQL with pgvector: one schema per project (`memlane_<project>`), many
/// processes and hosts at once.
///
/// ```no_run
/// # async fn run() -> memlane::Result<()> {
/// use memlane::Memory;
/// let memory = Memory::builder()
///     .postgres("host=/run/postgresql user=agent dbname=memory")
///     .build()
///     .await?;
/// # Ok(()) }
/// ```
///
/// - Every commit is one transaction with its preconditions and its charge checked inside
///   it; commits of a project are serialised on its state row, so change-log cursors follow
///   commit order.
/// - Every read sees a consistent snapshot (a repeatable-read transaction where it takes
///   several statements), and sees every write committed before it began, by any host.
/// - A lost connection, a server restarting, a pool with no free connection: a 503 that
///   may be retried; a transaction cut short is rolled back by the server.
#[derive(Clone)]
pub struct PostgresStore {
    shared: Arc<Shared>,
    /// The largest set of memories a vector search ranks exactly.
    exact_max: usize,
}

struct Shared {
    pool: Pool,
    /// How to open a connection of its own (the listener's).
    config: tokio_postgres::Config,
    project: String,
    /// The project's schema, quoted.
    schema: String,
    /// Woken when any host commits to the project (see `listen.rs`).
    signal: Arc<tokio::sync::Notify>,
    /// Whether the listener was started.
    listening: std::sync::atomic::AtomicBool,
    /// Stops the listener.
    closing: Arc<tokio::sync::Notify>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.closing.notify_waiters();
    }
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("project", &self.shared.project)
            .finish_non_exhaustive()
    }
}

/// Runs `sql` as a statement each connection prepares once (the pool's statement cache):
/// one round trip per call instead of two, and no parsing.
pub(super) async fn run(
    client: &impl deadpool_postgres::GenericClient,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<tokio_postgres::Row>> {
    let statement = client.prepare_cached(sql).await.map_err(pg_err)?;
    client.query(&statement, params).await.map_err(pg_err)
}

/// Whether a project id can name a schema: 1 to 40 ASCII lowercase letters, digits, `_`.
fn valid_project(project: &str) -> bool {
    (1..=40).contains(&project.len())
        && project
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// A pool of at most `connections` connections to the server at `url`, and its config.
pub(crate) fn pool(url: &str, connections: usize) -> Result<(Pool, tokio_postgres::Config)> {
    if connections == 0 {
        return Err(Error::invalid("a store needs at least one connection"));
    }
    let config = tokio_postgres::Config::from_str(url).map_err(|e| {
        Error::invalid(format!(
            "the PostgreSQL connection string is malformed ({e}); expected a URL such as \
             postgresql://user@host/dbname or key=value pairs such as \
             \"host=/run/postgresql dbname=memory\""
        ))
    })?;
    let manager = Manager::from_config(
        config.clone(),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager)
        .max_size(connections)
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(std::time::Duration::from_secs(30)))
        .create_timeout(Some(std::time::Duration::from_secs(10)))
        .build()
        .map_err(|e| Error::internal(format!("cannot build the connection pool: {e}")))?;
    Ok((pool, config))
}

impl PostgresStore {
    /// Connects to the server at `url` (a `postgresql://` URL or a `key=value` connection
    /// string, as libpq takes them), and creates or migrates the default project's schema.
    pub async fn connect(url: &str) -> Result<PostgresStore> {
        Self::connect_project(url, DEFAULT_PROJECT, DEFAULT_CONNECTIONS).await
    }

    /// Connects with at most `connections` connections to one project's memories: the
    /// schema `memlane_<project>`, created or migrated now. Projects share nothing but the
    /// server: no query of one reaches another's schema.
    pub async fn connect_project(
        url: &str,
        project: &str,
        connections: usize,
    ) -> Result<PostgresStore> {
        let (pool, config) = pool(url, connections)?;
        Self::open_in(pool, config, project).await
    }

    /// The store of `project` on an existing pool, its schema created or migrated now.
    pub(crate) async fn open_in(
        pool: Pool,
        config: tokio_postgres::Config,
        project: &str,
    ) -> Result<PostgresStore> {
        if !valid_project(project) {
            return Err(Error::invalid(format!(
                "project {:?} cannot name a PostgreSQL schema: use 1 to 40 lowercase ASCII \
                 letters, digits or underscores",
                project.chars().take(60).collect::<String>()
            )));
        }
        let store = PostgresStore {
            shared: Arc::new(Shared {
                pool,
                config,
                project: project.to_owned(),
                schema: format!("\"memlane_{project}\""),
                signal: Arc::new(tokio::sync::Notify::new()),
                listening: std::sync::atomic::AtomicBool::new(false),
                closing: Arc::new(tokio::sync::Notify::new()),
            }),
            exact_max: search::EXACT_MAX,
        };
        let mut client = store.client().await?;
        schema::init(&mut client, &store.shared.schema).await?;
        Ok(store)
    }

    /// The same store, ranking vector searches over at most `n` memories exactly (default
    /// 2,048, as the SQLite store's `exact_search_max`). pgvector 0.6's HNSW scan loses
    /// results under a filter, so a search never gives it one: a set of memories this small
    /// (one user's, typically) is ranked exactly, a larger one through the index with a
    /// beam deep enough for the filter's share, the filter applied to what it returns, and
    /// exactly when that leaves fewer than `k`. Keyword search takes the same line: a
    /// filter admitting at most `n` memories is served by reading them, a wider one through
    /// the index of terms.
    pub fn with_exact_search_max(mut self, n: usize) -> Self {
        self.exact_max = n;
        self
    }

    /// The project this store reads and writes.
    pub fn project(&self) -> &str {
        &self.shared.project
    }

    /// The version of the project's schema.
    pub async fn schema_version(&self) -> Result<i32> {
        let client = self.client().await?;
        let s = &self.shared.schema;
        let row = client
            .query_one(
                &format!("SELECT COALESCE(MAX(version), 0) FROM {s}.schema_version"),
                &[],
            )
            .await
            .map_err(pg_err)?;
        Ok(row.get(0))
    }

    async fn client(&self) -> Result<Client> {
        self.shared.pool.get().await.map_err(pool_err)
    }

    /// `sql` with `{s}` replaced by the project's schema.
    fn sql(&self, sql: &str) -> String {
        sql.replace("{s}", &self.shared.schema)
    }

    /// Rows matching `sql` (which selects [`COLUMNS`] from `memories m`), checked against
    /// `filter` when the SQL could only narrow them down.
    async fn query_rows(
        &self,
        client: &impl deadpool_postgres::GenericClient,
        sql: &str,
        params: &Params,
    ) -> Result<Vec<Row>> {
        let found = run(client, &self.sql(sql), &params.refs()).await?;
        rows(&found)
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn commit(&self, tx: Transaction) -> Result<Committed> {
        let mut client = self.client().await?;
        let channel = listen::channel(&self.shared.project);
        write::commit(&mut client, &self.shared.schema, &channel, tx).await
    }

    /// Woken by the server's notifications: every commit, on any host, notifies the
    /// project's channel, and one connection of this store listens to it (opened on the
    /// first call).
    fn commit_signal(&self) -> Option<Arc<tokio::sync::Notify>> {
        let shared = &self.shared;
        if !shared
            .listening
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            let runtime = tokio::runtime::Handle::try_current().ok()?;
            runtime.spawn(listen::listen(
                shared.config.clone(),
                listen::channel(&shared.project),
                Arc::downgrade(&shared.signal),
                Arc::clone(&shared.closing),
            ));
        }
        Some(Arc::clone(&shared.signal))
    }

    async fn rows(&self, ids: &[Uuid]) -> Result<Vec<Row>> {
        let client = self.client().await?;
        let mut params = Params::default();
        let ids = params.push(ids.to_vec());
        self.query_rows(
            &client,
            &format!("SELECT {COLUMNS} FROM {{s}}.memories m WHERE m.id = ANY({ids})"),
            &params,
        )
        .await
    }

    async fn rows_by_key(&self, keys: &[VectorKey]) -> Result<Vec<Row>> {
        let client = self.client().await?;
        let mut params = Params::default();
        let keys = params.push(keys.iter().map(|k| big(*k)).collect::<Vec<i64>>());
        // Deleted rows are dropped here, not in SQL: `deleted_at IS NULL` is the predicate
        // of the owner indexes, and a planner without fresh statistics would combine one of
        // them (all live rows) with the key lookup.
        let mut rows = self
            .query_rows(
                &client,
                &format!("SELECT {COLUMNS} FROM {{s}}.memories m WHERE m.vector_key = ANY({keys})"),
                &params,
            )
            .await?;
        rows.retain(|r| r.deleted_at.is_none());
        Ok(rows)
    }

    async fn scan(&self, scan: &Scan) -> Result<ScanPage> {
        let mut client = self.client().await?;
        // One snapshot for the count and the page.
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(pg_err)?;
        let mut params = Params::default();
        let clause = visible(&scan.filter, scan.now, scan.include_expired, &mut params);
        let order = "ORDER BY m.created_at DESC, m.seq DESC";
        let page = if clause.exact {
            let count: i64 = tx
                .query_one(
                    &self.sql(&format!(
                        "SELECT COUNT(*) FROM {{s}}.memories m WHERE {}",
                        clause.sql
                    )),
                    &params.refs(),
                )
                .await
                .map_err(pg_err)?
                .get(0);
            let mut sql = format!(
                "SELECT {COLUMNS} FROM {{s}}.memories m WHERE {}",
                clause.sql
            );
            if let Some(after) = scan.after {
                let (c, s) = (params.push(after.created_at), params.push(big(after.seq)));
                sql.push_str(&format!(
                    " AND (m.created_at < {c} OR (m.created_at = {c} AND m.seq < {s}))"
                ));
            }
            let limit = params.push(big(scan.limit.saturating_add(1)));
            sql.push_str(&format!(" {order} LIMIT {limit}"));
            let page = self.query_rows(&tx, &sql, &params).await?;
            ScanPage::cut(page, scan.limit, count.max(0) as u64)
        } else {
            // The SQL narrows the rows down; the filter decides.
            let sql = format!(
                "SELECT {COLUMNS} FROM {{s}}.memories m WHERE {} {order}",
                clause.sql
            );
            let matching: Vec<Row> = self
                .query_rows(&tx, &sql, &params)
                .await?
                .into_iter()
                .filter(|r| scan.filter.matches(&r.record))
                .collect();
            let count = matching.len() as u64;
            let page: Vec<Row> = matching
                .into_iter()
                .filter(|r| scan.after.is_none_or(|after| after.precedes(r)))
                .take(scan.limit.saturating_add(1))
                .collect();
            ScanPage::cut(page, scan.limit, count)
        };
        tx.commit().await.map_err(pg_err)?;
        Ok(page)
    }

    async fn keys(&self, among: super::Among<'_>) -> Result<Vec<VectorKey>> {
        let client = self.client().await?;
        self.keys_with(&client, among).await
    }

    async fn replies(&self, keys: &[VectorKey]) -> Result<Vec<(VectorKey, VectorKey)>> {
        let client = self.client().await?;
        let keys: Vec<i64> = keys.iter().map(|k| big(*k)).collect();
        // The key lookups are fenced off (`OFFSET 0`) from the test of liveness, as in
        // `rows_by_key`.
        let sql = "SELECT a.vector_key, b.vector_key FROM \
                   (SELECT vector_key, memory, deleted_at FROM {s}.memories \
                    WHERE vector_key = ANY($1) OFFSET 0) AS a \
                   JOIN (SELECT vector_key, context, deleted_at FROM {s}.memories \
                    WHERE vector_key = ANY($1) OFFSET 0) AS b \
                   ON b.vector_key = a.vector_key + 1 \
                   WHERE a.deleted_at IS NULL AND b.deleted_at IS NULL AND b.context = a.memory \
                   ORDER BY a.vector_key";
        client
            .query(&self.sql(sql), &[&keys])
            .await
            .map_err(pg_err)?
            .iter()
            .map(|r| {
                let a: i64 = r.try_get(0).map_err(pg_err)?;
                let b: i64 = r.try_get(1).map_err(pg_err)?;
                Ok((a.max(0) as VectorKey, b.max(0) as VectorKey))
            })
            .collect()
    }

    async fn admitted(
        &self,
        keys: &[VectorKey],
        among: super::Among<'_>,
    ) -> Result<Vec<VectorKey>> {
        let client = self.client().await?;
        let mut params = Params::default();
        let clause = visible(among.filter, among.now, among.include_expired, &mut params);
        let given = params.push(keys.iter().map(|k| big(*k)).collect::<Vec<i64>>());
        if !clause.exact {
            let sql = format!(
                "SELECT {COLUMNS} FROM (SELECT * FROM {{s}}.memories \
                 WHERE vector_key = ANY({given}) OFFSET 0) AS m WHERE {}",
                clause.sql
            );
            return Ok(self
                .query_rows(&client, &sql, &params)
                .await?
                .into_iter()
                .filter(|r| among.filter.matches(&r.record))
                .map(|r| r.key)
                .collect());
        }
        let sql = format!(
            "SELECT m.vector_key FROM (SELECT * FROM {{s}}.memories \
             WHERE vector_key = ANY({given}) OFFSET 0) AS m WHERE {}",
            clause.sql
        );
        client
            .query(&self.sql(&sql), &params.refs())
            .await
            .map_err(pg_err)?
            .iter()
            .map(|r| Ok(r.try_get::<_, i64>(0).map_err(pg_err)?.max(0) as VectorKey))
            .collect()
    }

    async fn count(&self, among: super::Among<'_>, cap: usize) -> Result<usize> {
        let client = self.client().await?;
        let mut params = Params::default();
        let clause = visible(among.filter, among.now, among.include_expired, &mut params);
        if !clause.exact {
            return Ok(self.keys_with(&client, among).await?.len().min(cap));
        }
        let limit = params.push(big(cap));
        let sql = format!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM {{s}}.memories m WHERE {} LIMIT {limit}) AS x",
            clause.sql
        );
        let row = client
            .query_one(&self.sql(&sql), &params.refs())
            .await
            .map_err(pg_err)?;
        Ok(row.try_get::<_, i64>(0).map_err(pg_err)?.max(0) as usize)
    }

    async fn vectors(&self, query: VectorQuery<'_>) -> Result<Vec<StoredVector>> {
        let client = self.client().await?;
        let mut params = Params::default();
        let select = "SELECT m.vector_key, m.id, v.embedding, \
                      CASE WHEN m.valid_until IS NULL THEN m.expiration_date \
                      ELSE -9223372036854775807 END, \
                      m.deleted_at IS NULL AS live, \
                      m.user_id, m.agent_id, m.app_id, m.run_id \
                      FROM {s}.memories m JOIN {s}.vectors v ON v.key = m.vector_key";
        let sql = match query {
            VectorQuery::After { key, limit } => {
                let (k, l) = (params.push(big(key)), params.push(big(limit)));
                format!(
                    "{select} WHERE m.vector_key > {k} AND m.deleted_at IS NULL \
                     ORDER BY m.vector_key LIMIT {l}"
                )
            }
            VectorQuery::Of(ids) => {
                let ids = params.push(ids.to_vec());
                // The key lookup is fenced off (`OFFSET 0`) from the test of liveness, the
                // owner indexes' predicate, which a planner without fresh statistics would
                // otherwise combine with it (see `rows_by_key`).
                format!(
                    "SELECT * FROM ({select} WHERE m.id = ANY({ids}) OFFSET 0) AS x \
                     WHERE x.live"
                )
            }
        };
        let found = client
            .query(&self.sql(&sql), &params.refs())
            .await
            .map_err(pg_err)?;
        found
            .iter()
            .map(|r| {
                Ok(StoredVector {
                    key: r.try_get::<_, i64>(0).map_err(pg_err)?.max(0) as VectorKey,
                    id: r.try_get(1).map_err(pg_err)?,
                    vector: r
                        .try_get::<_, pgvector::Vector>(2)
                        .map_err(pg_err)?
                        .to_vec(),
                    expires_at: r.try_get(3).map_err(pg_err)?,
                    owners: crate::record::Owners {
                        user_id: r.try_get(5).map_err(pg_err)?,
                        agent_id: r.try_get(6).map_err(pg_err)?,
                        app_id: r.try_get(7).map_err(pg_err)?,
                        run_id: r.try_get(8).map_err(pg_err)?,
                    },
                })
            })
            .collect()
    }

    async fn log(&self, query: LogQuery) -> Result<Vec<(u64, HistoryRecord)>> {
        let client = self.client().await?;
        let mut params = Params::default();
        let (after, limit) = (params.push(big(query.after)), params.push(big(query.limit)));
        let mut sql = format!("SELECT seq, record FROM {{s}}.history WHERE seq > {after}");
        if let Some(id) = query.memory {
            sql.push_str(&format!(" AND memory_id = {}", params.push(id)));
        }
        sql.push_str(&format!(" ORDER BY seq LIMIT {limit}"));
        let found = client
            .query(&self.sql(&sql), &params.refs())
            .await
            .map_err(pg_err)?;
        found
            .iter()
            .map(|r| {
                let seq: i64 = r.try_get(0).map_err(pg_err)?;
                let text: String = r.try_get(1).map_err(pg_err)?;
                let record: HistoryRecord =
                    serde_json::from_str(&text).map_err(|_| corrupt("change-log record"))?;
                Ok((seq.max(0) as u64, record))
            })
            .collect()
    }

    async fn changed(&self, after: u64, limit: usize) -> Result<Vec<(u64, Uuid)>> {
        let client = self.client().await?;
        let found = client
            .query(
                &self.sql(
                    "SELECT seq, memory_id FROM {s}.history WHERE seq > $1 ORDER BY seq LIMIT $2",
                ),
                &[&big(after), &big(limit)],
            )
            .await
            .map_err(pg_err)?;
        found
            .iter()
            .map(|r| {
                let seq: i64 = r.try_get(0).map_err(pg_err)?;
                Ok((seq.max(0) as u64, r.try_get(1).map_err(pg_err)?))
            })
            .collect()
    }

    async fn entities(&self, query: EntityQuery) -> Result<Vec<Entity>> {
        let EntityQuery { kind, after, limit } = query;
        let client = self.client().await?;
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
            let found = client
                .query(
                    &self.sql(&format!(
                        "SELECT m.{column}, COUNT(*), MIN(m.created_at), MAX(m.updated_at) \
                         FROM {{s}}.memories m WHERE m.deleted_at IS NULL \
                         AND m.{column} IS NOT NULL AND ($1::text IS NULL OR m.{column} > $1) \
                         GROUP BY m.{column} ORDER BY m.{column} COLLATE \"C\" LIMIT $2"
                    )),
                    &[&after_id, &big(left)],
                )
                .await
                .map_err(pg_err)?;
            for r in &found {
                out.push(Entity {
                    id: r.try_get(0).map_err(pg_err)?,
                    kind: k,
                    memory_count: r.try_get::<_, i64>(1).map_err(pg_err)?.max(0) as u64,
                    created_at: time(r.try_get(2).map_err(pg_err)?)?,
                    updated_at: time(r.try_get(3).map_err(pg_err)?)?,
                });
            }
        }
        Ok(out)
    }

    async fn feedback(&self, ids: &[Uuid]) -> Result<Vec<Feedback>> {
        let client = self.client().await?;
        let found = run(
            &client,
            &self.sql(
                "SELECT memory_id, feedback, reason, updated_at FROM {s}.feedback \
                 WHERE memory_id = ANY($1)",
            ),
            &[&ids.to_vec()],
        )
        .await?;
        found
            .iter()
            .map(|r| {
                let kind: Option<String> = r.try_get(1).map_err(pg_err)?;
                Ok(Feedback {
                    memory_id: r.try_get(0).map_err(pg_err)?,
                    feedback: kind.as_deref().and_then(FeedbackKind::parse),
                    feedback_reason: r.try_get(2).map_err(pg_err)?,
                    updated_at: Some(time(r.try_get(3).map_err(pg_err)?)?),
                })
            })
            .collect()
    }

    async fn meta(&self, key: &str) -> Result<Option<String>> {
        let client = self.client().await?;
        let found = client
            .query_opt(
                &self.sql("SELECT value FROM {s}.meta WHERE key = $1"),
                &[&key],
            )
            .await
            .map_err(pg_err)?;
        found.map(|r| r.try_get(0).map_err(pg_err)).transpose()
    }

    async fn counters(&self) -> Result<Counters> {
        let client = self.client().await?;
        let r = client
            .query_one(
                &self.sql(
                    "SELECT credits, \
                     (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {s}.key_seq), \
                     (SELECT COUNT(*) FROM {s}.feedback \
                      WHERE feedback IN ('NEGATIVE', 'VERY_NEGATIVE')), last_cursor \
                     FROM {s}.state WHERE id = 1",
                ),
                &[],
            )
            .await
            .map_err(pg_err)?;
        let get =
            |i: usize| -> Result<u64> { Ok(r.try_get::<_, i64>(i).map_err(pg_err)?.max(0) as u64) };
        Ok(Counters {
            credits: get(0)?,
            max_key: get(1)?,
            negative_feedback: get(2)?,
            last_cursor: get(3)?,
        })
    }

    fn keyword_index(&self) -> Option<&dyn super::KeywordIndex> {
        Some(self)
    }

    fn candidate_source(&self) -> Option<Arc<dyn super::CandidateSource>> {
        Some(Arc::new(self.clone()))
    }
}

impl PostgresStore {
    /// The vector keys of the live rows among `among`, ascending, on `client`.
    async fn keys_with(
        &self,
        client: &impl deadpool_postgres::GenericClient,
        among: super::Among<'_>,
    ) -> Result<Vec<VectorKey>> {
        let mut params = Params::default();
        let clause = visible(among.filter, among.now, among.include_expired, &mut params);
        let keys: Vec<VectorKey> = if clause.exact {
            client
                .query(
                    &self.sql(&format!(
                        "SELECT m.vector_key FROM {{s}}.memories m WHERE {} ORDER BY m.vector_key",
                        clause.sql
                    )),
                    &params.refs(),
                )
                .await
                .map_err(pg_err)?
                .iter()
                .map(|r| Ok(r.try_get::<_, i64>(0).map_err(pg_err)?.max(0) as VectorKey))
                .collect::<Result<_>>()?
        } else {
            let sql = format!(
                "SELECT {COLUMNS} FROM {{s}}.memories m WHERE {} ORDER BY m.vector_key",
                clause.sql
            );
            self.query_rows(client, &sql, &params)
                .await?
                .into_iter()
                .filter(|r| among.filter.matches(&r.record))
                .map(|r| r.key)
                .collect()
        };
        Ok(keys)
    }
}
