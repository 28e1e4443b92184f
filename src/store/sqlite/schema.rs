//! The schema, its migrations, and the SQL functions every connection registers.

use rusqlite::functions::FunctionFlags;
use rusqlite::{params, Connection, Transaction};
use serde_json::Value;
use uuid::Uuid;

use super::filter_sql::decode_op;
use super::{fts, sql_err};
use crate::error::{Error, Result};
use crate::filter::{icontains, metadata_matches, Op};
use crate::store::{DEFAULT_CREDITS, META_STORE_ID};
use crate::text;

/// One step of the schema's history.
enum Migration {
    Sql(&'static str),
    /// SQL built by a function (several steps share its shape).
    Generated(fn() -> String),
    /// A step SQL cannot express (the crate's tokenizer runs in Rust).
    Rust(fn(&Transaction<'_>) -> Result<()>),
}

/// The keyword index: an FTS5 table over `columns` of `memories` (external content), the
/// triggers that keep it in the writing transaction, and its filling from the live rows.
/// The old index, if any, is dropped first.
fn keyword_index(columns: &[&str], tokenize: &str, replaces_one: bool) -> String {
    let cols = columns.join(", ");
    let new: Vec<String> = columns.iter().map(|c| format!("new.{c}")).collect();
    let old: Vec<String> = columns.iter().map(|c| format!("old.{c}")).collect();
    let (new, old) = (new.join(", "), old.join(", "));
    let drop = if replaces_one {
        "DROP TRIGGER memories_fts_insert;\nDROP TRIGGER memories_fts_update;\n\
         DROP TRIGGER memories_fts_delete;\nDROP TABLE memories_fts;\n"
    } else {
        ""
    };
    // The owners column is generated from the owner ids, so their changes re-index too.
    let watched = columns
        .iter()
        .map(|c| {
            if *c == "owners" {
                "user_id, agent_id, app_id, run_id"
            } else {
                c
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "{drop}CREATE VIRTUAL TABLE memories_fts USING fts5(
    {cols}, content = 'memories', content_rowid = 'seq', tokenize = '{tokenize}'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories WHEN new.deleted_at IS NULL BEGIN
    INSERT INTO memories_fts (rowid, {cols}) VALUES (new.seq, {new});
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF {watched}, deleted_at ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, {cols})
        SELECT 'delete', old.seq, {old} WHERE old.deleted_at IS NULL;
    INSERT INTO memories_fts (rowid, {cols}) SELECT new.seq, {new} WHERE new.deleted_at IS NULL;
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories WHEN old.deleted_at IS NULL BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, {cols}) VALUES ('delete', old.seq, {old});
END;
INSERT INTO memories_fts (rowid, {cols}) SELECT seq, {cols} FROM memories WHERE deleted_at IS NULL;
"
    )
}

/// Migration 5: the owners of a memory as keyword tokens (see `owner_token` in
/// `keyword.rs`), indexed beside its text so that a keyword search for one user's memories
/// reads only that user's rows. The column weighs nothing in ranking.
fn owners_in_the_keyword_index() -> String {
    let owners = "ALTER TABLE memories ADD COLUMN owners TEXT GENERATED ALWAYS AS (trim(
    iif(user_id IS NULL, '', ' u' || hex(user_id)) || iif(agent_id IS NULL, '', ' a' || hex(agent_id)) ||
    iif(app_id IS NULL, '', ' p' || hex(app_id)) || iif(run_id IS NULL, '', ' r' || hex(run_id))
)) VIRTUAL;
";
    let index = keyword_index(
        &["memory", "context", "owners"],
        "porter unicode61 remove_diacritics 2",
        true,
    );
    format!("{owners}{index}")
}

/// Migration 9: the keyword index over the crate's terms (migration 7 dropped the old one).
fn keyword_index_over_terms() -> String {
    keyword_index(
        &["terms", "context_terms", "owners"],
        "unicode61 remove_diacritics 0",
        false,
    )
}

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
const MIGRATIONS: &[Migration] = &[
    Migration::Sql(
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
    ),
    // Covering indexes: an owner-scoped search reads its candidate keys from the index alone.
    Migration::Sql(
        r#"
CREATE INDEX memories_user_keys  ON memories (user_id, vector_key, expiration_date)  WHERE deleted_at IS NULL;
CREATE INDEX memories_agent_keys ON memories (agent_id, vector_key, expiration_date) WHERE deleted_at IS NULL;
CREATE INDEX memories_app_keys   ON memories (app_id, vector_key, expiration_date)   WHERE deleted_at IS NULL;
CREATE INDEX memories_run_keys   ON memories (run_id, vector_key, expiration_date)   WHERE deleted_at IS NULL;
"#,
    ),
    // Keyword index (BM25) over the text of live memories. Triggers keep it in the
    // transaction that changes the rows, so it never disagrees with them.
    Migration::Sql(
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
    ),
    // A memory's conversational context, indexed beside its text; words are stemmed
    // (Porter), so "painting" finds "paint". The keyword index is rebuilt for both.
    Migration::Sql(
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
    ),
    // Owners in the keyword index.
    Migration::Generated(owners_in_the_keyword_index),
    // Feedback on memories, one row per memory that ever had some.
    Migration::Sql(
        r#"
CREATE TABLE feedback (
    memory_id  TEXT PRIMARY KEY,
    feedback   TEXT,
    reason     TEXT,
    updated_at INTEGER NOT NULL
);
CREATE INDEX feedback_negative ON feedback (feedback) WHERE feedback IN ('NEGATIVE', 'VERY_NEGATIVE');
"#,
    ),
    // Versions for preconditions, the crate's own terms for keyword search (the same in
    // every store), and indexes for scans in `created_at` order. The old keyword index,
    // built by FTS5's own stemmer, goes.
    Migration::Sql(
        r#"
ALTER TABLE memories ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE memories ADD COLUMN terms TEXT NOT NULL DEFAULT '';
ALTER TABLE memories ADD COLUMN context_terms TEXT NOT NULL DEFAULT '';
DROP TRIGGER memories_fts_insert;
DROP TRIGGER memories_fts_update;
DROP TRIGGER memories_fts_delete;
DROP TABLE memories_fts;
DROP INDEX memories_user;
DROP INDEX memories_agent;
DROP INDEX memories_app;
DROP INDEX memories_run;
CREATE INDEX memories_created       ON memories (created_at, seq)           WHERE deleted_at IS NULL;
CREATE INDEX memories_user_created  ON memories (user_id, created_at, seq)  WHERE deleted_at IS NULL;
CREATE INDEX memories_agent_created ON memories (agent_id, created_at, seq) WHERE deleted_at IS NULL;
CREATE INDEX memories_app_created   ON memories (app_id, created_at, seq)   WHERE deleted_at IS NULL;
CREATE INDEX memories_run_created   ON memories (run_id, created_at, seq)   WHERE deleted_at IS NULL;
"#,
    ),
    Migration::Rust(backfill_terms),
    // The keyword index over the terms; FTS5 only splits them at spaces.
    Migration::Generated(keyword_index_over_terms),
    // Vectors in their own table, by vector key: a memory's row without its vector is a
    // quarter of the size, so reading rows (lists, filters, search hits) reads a quarter of
    // the pages. A retired key's vector goes with it; deleted memories keep none.
    Migration::Sql(
        r#"
CREATE TABLE vectors (
    key    INTEGER PRIMARY KEY,
    vector BLOB    NOT NULL
);
INSERT INTO vectors (key, vector) SELECT vector_key, vector FROM memories WHERE deleted_at IS NULL;
ALTER TABLE memories DROP COLUMN vector;
"#,
    ),
    // Memories keep time: since when a fact holds, until when (a later fact superseded
    // it), and which memory superseded it; a change log record names the superseding
    // memory. The owner-scoped key indexes cover `valid_until`, which every search reads.
    Migration::Sql(
        r#"
ALTER TABLE memories ADD COLUMN valid_from INTEGER;
ALTER TABLE memories ADD COLUMN valid_until INTEGER;
ALTER TABLE memories ADD COLUMN superseded_by TEXT;
UPDATE memories SET valid_from = created_at;
ALTER TABLE history ADD COLUMN superseded_by TEXT;
DROP INDEX memories_user_keys;
DROP INDEX memories_agent_keys;
DROP INDEX memories_app_keys;
DROP INDEX memories_run_keys;
CREATE INDEX memories_user_keys  ON memories (user_id, vector_key, expiration_date, valid_until)  WHERE deleted_at IS NULL;
CREATE INDEX memories_agent_keys ON memories (agent_id, vector_key, expiration_date, valid_until) WHERE deleted_at IS NULL;
CREATE INDEX memories_app_keys   ON memories (app_id, vector_key, expiration_date, valid_until)   WHERE deleted_at IS NULL;
CREATE INDEX memories_run_keys   ON memories (run_id, vector_key, expiration_date, valid_until)   WHERE deleted_at IS NULL;
"#,
    ),
    // The keyword index merges its segments sooner (FTS5's `automerge` at 2, from 4): a
    // search reads each term's postings once per segment, and one owner's search seeks
    // into every segment. The segments written so far are merged into one.
    Migration::Sql(
        "INSERT INTO memories_fts (memories_fts, rank) VALUES ('automerge', 2);
INSERT INTO memories_fts (memories_fts) VALUES ('optimize');",
    ),
];

/// How many migrations this build knows: the schema version it writes.
pub(super) const VERSION: usize = MIGRATIONS.len();

/// The terms of a text as the keyword index stores them: [`text::terms`], space-separated.
pub(super) fn terms_column(text: &str) -> String {
    text::terms(text).join(" ")
}

/// Fills the term columns of rows written before they existed (deleted rows too, so that
/// every row looks as if written now).
fn backfill_terms(tx: &Transaction<'_>) -> Result<()> {
    let rows: Vec<(i64, String, Option<String>)> = {
        let mut stmt = tx
            .prepare("SELECT seq, memory, context FROM memories")
            .map_err(sql_err)?;
        let mapped = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(sql_err)?;
        mapped.collect::<rusqlite::Result<_>>().map_err(sql_err)?
    };
    let mut update = tx
        .prepare("UPDATE memories SET terms = ?1, context_terms = ?2 WHERE seq = ?3")
        .map_err(sql_err)?;
    for (seq, memory, context) in rows {
        let context = context.as_deref().map(terms_column).unwrap_or_default();
        update
            .execute(params![terms_column(&memory), context, seq])
            .map_err(sql_err)?;
    }
    Ok(())
}

/// Creates or migrates the schema. IMMEDIATE: two processes opening the same database
/// cannot both migrate it; the second waits (busy timeout) and finds it current.
pub(super) fn init(conn: &Connection) -> Result<()> {
    let tx = Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let version: usize = tx
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(sql_err)?;
    if version > VERSION {
        return Err(Error::Conflict {
            detail: format!(
                "the database has schema version {version}, newer than this memlane understands \
                 ({VERSION}); upgrade memlane"
            ),
        });
    }
    for (i, migration) in MIGRATIONS.iter().enumerate().skip(version) {
        match migration {
            Migration::Sql(sql) => tx.execute_batch(sql).map_err(sql_err)?,
            Migration::Generated(sql) => tx.execute_batch(&sql()).map_err(sql_err)?,
            Migration::Rust(step) => step(&tx)?,
        }
        if i == 0 {
            tx.execute(
                "INSERT INTO state (id, credits, max_key) VALUES (1, ?1, 0)",
                params![DEFAULT_CREDITS as i64],
            )
            .map_err(sql_err)?;
            tx.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)",
                params![META_STORE_ID, Uuid::new_v4().to_string()],
            )
            .map_err(sql_err)?;
        }
    }
    tx.pragma_update(None, "user_version", VERSION)
        .map_err(sql_err)?;
    tx.commit().map_err(sql_err)
}

/// The Rust functions SQL calls: the keyword index's term counts, and what the compiled
/// filters need to evaluate exactly as [`Filter::matches`](crate::Filter::matches) does.
pub(super) fn register_functions(conn: &Connection) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_idempotent_and_versioned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        for _ in 0..2 {
            assert!(crate::store::SqliteStore::open(&path).is_ok());
        }
        let conn = Connection::open(&path).unwrap();
        let version: usize = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, VERSION);
        // The keyword index merges its segments at two of a level (FTS5's default is four).
        let automerge: i64 = conn
            .query_row(
                "SELECT v FROM memories_fts_config WHERE k = 'automerge'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(automerge, 2);
    }
}
