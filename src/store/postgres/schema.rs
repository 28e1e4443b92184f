//! The schema of one project and its migrations, run on open under an advisory lock.

use super::{pg_err, Client};
use crate::error::{Error, Result};
use crate::store::DEFAULT_CREDITS;

/// The advisory lock every migration takes (any project's, on any database): two processes
/// opening a new database at once take turns, and the second finds the schema current.
pub(crate) const MIGRATION_LOCK: i64 = 0x6d65_6d6c_616e_6501;

/// The steps of a project schema's history, applied in order; `{s}` is the schema.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE SEQUENCE {s}.key_seq;
CREATE SEQUENCE {s}.row_seq;
CREATE TABLE {s}.state (
    id          integer PRIMARY KEY CHECK (id = 1),
    credits     bigint  NOT NULL,
    last_cursor bigint  NOT NULL DEFAULT 0,
    live_rows   bigint  NOT NULL DEFAULT 0,
    live_tokens bigint  NOT NULL DEFAULT 0,
    dimension   integer
);
INSERT INTO {s}.state (id, credits) VALUES (1, {credits});
CREATE TABLE {s}.meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE {s}.memories (
    id              uuid    PRIMARY KEY,
    seq             bigint  NOT NULL UNIQUE,
    memory          text    NOT NULL,
    user_id         text,
    agent_id        text,
    app_id          text,
    run_id          text,
    metadata        text    NOT NULL,
    categories      jsonb   NOT NULL,
    immutable       boolean NOT NULL,
    expiration_date bigint,
    created_at      bigint  NOT NULL,
    updated_at      bigint  NOT NULL,
    hash            text    NOT NULL,
    context         text,
    deleted_at      bigint,
    version         bigint  NOT NULL,
    vector_key      bigint  NOT NULL UNIQUE,
    terms           text[]  NOT NULL,
    context_terms   text[]  NOT NULL,
    doc_length      integer NOT NULL
);
CREATE INDEX memories_user  ON {s}.memories (user_id)  WHERE deleted_at IS NULL;
CREATE INDEX memories_agent ON {s}.memories (agent_id) WHERE deleted_at IS NULL;
CREATE INDEX memories_app   ON {s}.memories (app_id)   WHERE deleted_at IS NULL;
CREATE INDEX memories_run   ON {s}.memories (run_id)   WHERE deleted_at IS NULL;
CREATE INDEX memories_order ON {s}.memories (created_at DESC, seq DESC) WHERE deleted_at IS NULL;
CREATE INDEX memories_terms ON {s}.memories USING gin ((terms || context_terms))
    WHERE deleted_at IS NULL;
CREATE TABLE {s}.terms (
    term text   PRIMARY KEY,
    df   bigint NOT NULL
);
CREATE TABLE {s}.vectors (
    key       bigint PRIMARY KEY,
    embedding vector NOT NULL
);
CREATE TABLE {s}.history (
    seq       bigint PRIMARY KEY,
    memory_id uuid   NOT NULL,
    record    text   NOT NULL
);
CREATE INDEX history_memory ON {s}.history (memory_id, seq);
CREATE TABLE {s}.feedback (
    memory_id  uuid   PRIMARY KEY,
    feedback   text,
    reason     text,
    updated_at bigint NOT NULL
);
"#,
    // Memories keep time: since when a fact holds, until when a later fact superseded it, and
    // which memory did (a change-log record names it in its JSON).
    r#"
ALTER TABLE {s}.memories ADD COLUMN valid_from bigint;
UPDATE {s}.memories SET valid_from = created_at;
ALTER TABLE {s}.memories ALTER COLUMN valid_from SET NOT NULL;
ALTER TABLE {s}.memories ADD COLUMN valid_until bigint;
ALTER TABLE {s}.memories ADD COLUMN superseded_by uuid;
"#,
];

/// The schema version this build writes.
pub(super) const VERSION: i32 = MIGRATIONS.len() as i32;

/// Creates or migrates the schema `schema` (a quoted identifier), under the migration lock.
pub(super) async fn init(client: &mut Client, schema: &str) -> Result<()> {
    let tx = client.transaction().await.map_err(pg_err)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(pg_err)?;
    tx.batch_execute(&format!(
        "CREATE EXTENSION IF NOT EXISTS vector;
         CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.schema_version (version integer NOT NULL);"
    ))
    .await
    .map_err(|e| match pg_err(e) {
        // A server that cannot be reached says so; any other failure here is the server's
        // setup, which retrying will not change.
        unreachable @ Error::Unreachable { .. } => unreachable,
        other => Error::NotConfigured {
            detail: format!(
                "cannot prepare the memlane schema: {} (the pgvector extension must be \
                 installed on the server, and the role must be allowed to create schemas)",
                other.detail()
            ),
        },
    })?;
    let current: i32 = tx
        .query_one(
            &format!("SELECT COALESCE(MAX(version), 0) FROM {schema}.schema_version"),
            &[],
        )
        .await
        .map_err(pg_err)?
        .get(0);
    if current > VERSION {
        return Err(Error::Conflict {
            detail: format!(
                "this database's memlane schema is version {current}, newer than this build \
                 knows ({VERSION}): upgrade memlane"
            ),
        });
    }
    for (i, step) in MIGRATIONS.iter().enumerate().skip(current.max(0) as usize) {
        let sql = step
            .replace("{s}", schema)
            .replace("{credits}", &DEFAULT_CREDITS.to_string());
        tx.batch_execute(&sql).await.map_err(pg_err)?;
        tx.execute(
            &format!("INSERT INTO {schema}.schema_version (version) VALUES ($1)"),
            &[&(i as i32 + 1)],
        )
        .await
        .map_err(pg_err)?;
    }
    tx.commit().await.map_err(pg_err)
}
