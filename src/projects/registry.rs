//! Where projects and keys are kept: a SQLite file in the registry's directory, or tables
//! on a PostgreSQL server (feature `postgres`), where every host reads them at each call.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};

use super::{ApiKey, Project, KEY_PREFIX};
use crate::error::{Error, Result};
use crate::memory::MemoryBuilder;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS projects (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS api_keys (
    id         TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects (id),
    name       TEXT NOT NULL,
    hash       BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX IF NOT EXISTS api_keys_project ON api_keys (project_id);
"#;

/// A key as authentication reads it: its project, the SHA-256 of its secret, and when it
/// was revoked (microseconds), if it was.
pub(super) type StoredKey = (String, Vec<u8>, Option<i64>);

/// The registry's storage.
pub(super) enum Registry {
    /// `registry.db` in a directory, each project's memories in a file under `projects/`.
    Sqlite {
        dir: PathBuf,
        conn: Arc<Mutex<Connection>>,
    },
    /// Tables of the schema `memlane_registry` on a server, each project's memories in a
    /// schema of its own, all on one pool.
    #[cfg(feature = "postgres")]
    Postgres(Box<super::postgres::PgRegistry>),
}

impl Registry {
    pub(super) async fn sqlite(dir: PathBuf) -> Result<Registry> {
        let conn = blocking({
            let dir = dir.clone();
            move || {
                std::fs::create_dir_all(dir.join("projects"))
                    .map_err(|e| Error::storage("cannot create the projects directory", e))?;
                let conn = Connection::open(dir.join("registry.db")).map_err(sql_err)?;
                conn.busy_timeout(std::time::Duration::from_secs(10))
                    .map_err(sql_err)?;
                conn.pragma_update(None, "journal_mode", "WAL")
                    .map_err(sql_err)?;
                conn.pragma_update(None, "synchronous", "FULL")
                    .map_err(sql_err)?;
                conn.execute_batch(SCHEMA).map_err(sql_err)?;
                Ok(conn)
            }
        })
        .await?;
        Ok(Registry::Sqlite {
            dir,
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// The database file of a project, for a registry in a directory.
    pub(super) fn project_path(dir: &Path, project_id: &str) -> PathBuf {
        dir.join("projects").join(format!("{project_id}.db"))
    }

    /// Where a project's memories are, given to a builder.
    pub(super) async fn place(
        &self,
        project_id: &str,
        builder: MemoryBuilder,
    ) -> Result<MemoryBuilder> {
        match self {
            Registry::Sqlite { dir, .. } => Ok(builder.path(Self::project_path(dir, project_id))),
            #[cfg(feature = "postgres")]
            Registry::Postgres(pg) => {
                Ok(builder.store(Arc::new(pg.project_store(project_id).await?)))
            }
        }
    }

    async fn run<T, F>(conn: &Arc<Mutex<Connection>>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let conn = Arc::clone(conn);
        blocking(move || {
            let conn = conn
                .lock()
                .map_err(|_| Error::internal("the registry lock was poisoned by a panic"))?;
            f(&conn)
        })
        .await
    }

    pub(super) async fn insert_project(&self, project: &Project) -> Result<()> {
        match self {
            Registry::Sqlite { conn, .. } => {
                let row = project.clone();
                Self::run(conn, move |conn| {
                    conn.execute(
                        "INSERT INTO projects (id, name, created_at) VALUES (?1, ?2, ?3)",
                        params![row.id, row.name, row.created_at.timestamp_micros()],
                    )
                    .map_err(sql_err)?;
                    Ok(())
                })
                .await
            }
            #[cfg(feature = "postgres")]
            Registry::Postgres(pg) => pg.insert_project(project).await,
        }
    }

    /// Every project, oldest first.
    pub(super) async fn projects(&self) -> Result<Vec<Project>> {
        match self {
            Registry::Sqlite { conn, .. } => {
                Self::run(conn, |conn| {
                    let mut stmt = conn
                        .prepare(
                            "SELECT id, name, created_at FROM projects ORDER BY created_at, id",
                        )
                        .map_err(sql_err)?;
                    let rows = stmt.query_map([], project_row).map_err(sql_err)?;
                    rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
                })
                .await
            }
            #[cfg(feature = "postgres")]
            Registry::Postgres(pg) => pg.projects(None).await,
        }
    }

    pub(super) async fn project(&self, id: &str) -> Result<Option<Project>> {
        match self {
            Registry::Sqlite { conn, .. } => {
                let id = id.to_owned();
                Self::run(conn, move |conn| {
                    conn.query_row(
                        "SELECT id, name, created_at FROM projects WHERE id = ?1",
                        [&id],
                        project_row,
                    )
                    .optional()
                    .map_err(sql_err)
                })
                .await
            }
            #[cfg(feature = "postgres")]
            Registry::Postgres(pg) => Ok(pg.projects(Some(id)).await?.pop()),
        }
    }

    pub(super) async fn insert_key(&self, key: &ApiKey, hash: [u8; 32]) -> Result<()> {
        match self {
            Registry::Sqlite { conn, .. } => {
                let row = key.clone();
                Self::run(conn, move |conn| {
                    conn.execute(
                        "INSERT INTO api_keys (id, project_id, name, hash, created_at) \
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                        params![
                            row.id,
                            row.project_id,
                            row.name,
                            hash.to_vec(),
                            row.created_at.timestamp_micros()
                        ],
                    )
                    .map_err(sql_err)?;
                    Ok(())
                })
                .await
            }
            #[cfg(feature = "postgres")]
            Registry::Postgres(pg) => pg.insert_key(key, hash).await,
        }
    }

    /// A project's keys, revoked ones included, oldest first.
    pub(super) async fn keys(&self, project_id: &str) -> Result<Vec<ApiKey>> {
        match self {
            Registry::Sqlite { conn, .. } => {
                let project_id = project_id.to_owned();
                Self::run(conn, move |conn| {
                    let mut stmt = conn
                        .prepare(
                            "SELECT id, project_id, name, created_at, revoked_at FROM api_keys \
                             WHERE project_id = ?1 ORDER BY created_at, id",
                        )
                        .map_err(sql_err)?;
                    let rows = stmt.query_map([&project_id], key_row).map_err(sql_err)?;
                    rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
                })
                .await
            }
            #[cfg(feature = "postgres")]
            Registry::Postgres(pg) => pg.keys(project_id).await,
        }
    }

    /// Revokes a key (keeping the first revocation's time); `None` for an unknown id.
    pub(super) async fn revoke(&self, key_id: &str, at: i64) -> Result<Option<ApiKey>> {
        match self {
            Registry::Sqlite { conn, .. } => {
                let key_id = key_id.to_owned();
                Self::run(conn, move |conn| {
                    conn.execute(
                        "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                        params![key_id, at],
                    )
                    .map_err(sql_err)?;
                    conn.query_row(
                        "SELECT id, project_id, name, created_at, revoked_at FROM api_keys \
                         WHERE id = ?1",
                        [&key_id],
                        key_row,
                    )
                    .optional()
                    .map_err(sql_err)
                })
                .await
            }
            #[cfg(feature = "postgres")]
            Registry::Postgres(pg) => pg.revoke(key_id, at).await,
        }
    }

    /// A key by its public id.
    pub(super) async fn lookup(&self, key_id: &str) -> Result<Option<StoredKey>> {
        match self {
            Registry::Sqlite { conn, .. } => {
                let key_id = key_id.to_owned();
                Self::run(conn, move |conn| {
                    conn.query_row(
                        "SELECT project_id, hash, revoked_at FROM api_keys WHERE id = ?1",
                        [&key_id],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .optional()
                    .map_err(sql_err)
                })
                .await
            }
            #[cfg(feature = "postgres")]
            Registry::Postgres(pg) => pg.lookup(key_id).await,
        }
    }
}

fn project_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Project> {
    Ok(Project {
        id: r.get(0)?,
        name: r.get(1)?,
        created_at: time(r.get(2)?)?,
    })
}

fn key_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApiKey> {
    let id: String = r.get(0)?;
    Ok(ApiKey {
        display: format!("{KEY_PREFIX}{id}_…"),
        id,
        project_id: r.get(1)?,
        name: r.get(2)?,
        created_at: time(r.get(3)?)?,
        revoked_at: r.get::<_, Option<i64>>(4)?.map(time).transpose()?,
    })
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

fn sql_err(e: rusqlite::Error) -> Error {
    Error::storage("the project registry failed", e)
}

async fn blocking<T, F>(f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::internal(format!("registry task failed: {e}")))?
}
