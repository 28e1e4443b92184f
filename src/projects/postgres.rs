//! Projects and API keys on the server (the schema `memlane_registry`), for a
//! [`Projects`](crate::Projects) registry every host shares: a key created or revoked on one
//! host is honoured by every host at its next call, since each call reads it.

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;

use super::{ApiKey, Project, KEY_PREFIX};
use crate::error::{Error, Result};
use crate::store::postgres::{pg_err, pool, pool_err, PostgresStore, MIGRATION_LOCK};

const SCHEMA: &str = "memlane_registry";

const TABLES: &str = r#"
CREATE SCHEMA IF NOT EXISTS memlane_registry;
CREATE TABLE IF NOT EXISTS memlane_registry.projects (
    id         text   PRIMARY KEY,
    name       text   NOT NULL,
    created_at bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS memlane_registry.api_keys (
    id         text   PRIMARY KEY,
    project_id text   NOT NULL REFERENCES memlane_registry.projects (id),
    name       text   NOT NULL,
    hash       bytea  NOT NULL,
    created_at bigint NOT NULL,
    revoked_at bigint
);
CREATE INDEX IF NOT EXISTS api_keys_project ON memlane_registry.api_keys (project_id);
"#;

/// The registry's tables, and the pool every project's store shares.
pub(crate) struct PgRegistry {
    pool: Pool,
    config: tokio_postgres::Config,
}

fn time(micros: i64) -> Result<DateTime<Utc>> {
    DateTime::from_timestamp_micros(micros).ok_or_else(|| Error::Storage {
        detail: "the registry holds a malformed timestamp".into(),
        source: None,
    })
}

fn key(r: &tokio_postgres::Row) -> Result<ApiKey> {
    let id: String = r.try_get(0).map_err(pg_err)?;
    Ok(ApiKey {
        display: format!("{KEY_PREFIX}{id}_…"),
        id,
        project_id: r.try_get(1).map_err(pg_err)?,
        name: r.try_get(2).map_err(pg_err)?,
        created_at: time(r.try_get(3).map_err(pg_err)?)?,
        revoked_at: r
            .try_get::<_, Option<i64>>(4)
            .map_err(pg_err)?
            .map(time)
            .transpose()?,
    })
}

impl PgRegistry {
    /// Connects with at most `connections` connections (shared by every project) and
    /// creates the registry's tables if needed, under the migration lock.
    pub(crate) async fn connect(url: &str, connections: usize) -> Result<PgRegistry> {
        let (pool, config) = pool(url, connections)?;
        let mut client = pool.get().await.map_err(pool_err)?;
        let tx = client.transaction().await.map_err(pg_err)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(pg_err)?;
        tx.batch_execute(TABLES).await.map_err(pg_err)?;
        tx.commit().await.map_err(pg_err)?;
        drop(client);
        Ok(PgRegistry { pool, config })
    }

    /// The store of a project's memories, on the registry's pool.
    pub(crate) async fn project_store(&self, project_id: &str) -> Result<PostgresStore> {
        PostgresStore::open_in(self.pool.clone(), self.config.clone(), project_id).await
    }

    async fn client(&self) -> Result<deadpool_postgres::Client> {
        self.pool.get().await.map_err(pool_err)
    }

    pub(crate) async fn insert_project(&self, p: &Project) -> Result<()> {
        self.client()
            .await?
            .execute(
                &format!(
                    "INSERT INTO {SCHEMA}.projects (id, name, created_at) VALUES ($1, $2, $3)"
                ),
                &[&p.id, &p.name, &p.created_at.timestamp_micros()],
            )
            .await
            .map_err(pg_err)?;
        Ok(())
    }

    /// Every project, oldest first, or the one with id `only`.
    pub(crate) async fn projects(&self, only: Option<&str>) -> Result<Vec<Project>> {
        let found = self
            .client()
            .await?
            .query(
                &format!(
                    "SELECT id, name, created_at FROM {SCHEMA}.projects \
                     WHERE $1::text IS NULL OR id = $1 ORDER BY created_at, id"
                ),
                &[&only],
            )
            .await
            .map_err(pg_err)?;
        found
            .iter()
            .map(|r| {
                Ok(Project {
                    id: r.try_get(0).map_err(pg_err)?,
                    name: r.try_get(1).map_err(pg_err)?,
                    created_at: time(r.try_get(2).map_err(pg_err)?)?,
                })
            })
            .collect()
    }

    pub(crate) async fn insert_key(&self, k: &ApiKey, hash: [u8; 32]) -> Result<()> {
        self.client()
            .await?
            .execute(
                &format!(
                    "INSERT INTO {SCHEMA}.api_keys (id, project_id, name, hash, created_at) \
                     VALUES ($1, $2, $3, $4, $5)"
                ),
                &[
                    &k.id,
                    &k.project_id,
                    &k.name,
                    &hash.as_slice(),
                    &k.created_at.timestamp_micros(),
                ],
            )
            .await
            .map_err(pg_err)?;
        Ok(())
    }

    pub(crate) async fn keys(&self, project_id: &str) -> Result<Vec<ApiKey>> {
        let found = self
            .client()
            .await?
            .query(
                &format!(
                    "SELECT id, project_id, name, created_at, revoked_at FROM {SCHEMA}.api_keys \
                     WHERE project_id = $1 ORDER BY created_at, id"
                ),
                &[&project_id],
            )
            .await
            .map_err(pg_err)?;
        found.iter().map(key).collect()
    }

    pub(crate) async fn revoke(&self, key_id: &str, at: i64) -> Result<Option<ApiKey>> {
        let client = self.client().await?;
        client
            .execute(
                &format!(
                    "UPDATE {SCHEMA}.api_keys SET revoked_at = $2 \
                     WHERE id = $1 AND revoked_at IS NULL"
                ),
                &[&key_id, &at],
            )
            .await
            .map_err(pg_err)?;
        let found = client
            .query_opt(
                &format!(
                    "SELECT id, project_id, name, created_at, revoked_at FROM {SCHEMA}.api_keys \
                     WHERE id = $1"
                ),
                &[&key_id],
            )
            .await
            .map_err(pg_err)?;
        found.as_ref().map(key).transpose()
    }

    pub(crate) async fn lookup(
        &self,
        key_id: &str,
    ) -> Result<Option<(String, Vec<u8>, Option<i64>)>> {
        let found = self
            .client()
            .await?
            .query_opt(
                &format!(
                    "SELECT project_id, hash, revoked_at FROM {SCHEMA}.api_keys WHERE id = $1"
                ),
                &[&key_id],
            )
            .await
            .map_err(pg_err)?;
        found
            .map(|r| {
                Ok((
                    r.try_get(0).map_err(pg_err)?,
                    r.try_get(1).map_err(pg_err)?,
                    r.try_get(2).map_err(pg_err)?,
                ))
            })
            .transpose()
    }
}
