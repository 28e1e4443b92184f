//! Helpers shared by the integration-test binaries (`api`, `models`, `reliability`,
//! `tenancy`). Each binary includes this module; not every binary uses every helper.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use memlane::IndexParams;
use memlane::{HashEmbedder, Llm, Memory};
use uuid::Uuid;

/// A memory on the SQLite file at `path`, with a hashing embedder of `dim` dimensions.
pub async fn open(path: &Path, dim: usize) -> Memory {
    open_with_llm(path, dim, None).await
}

/// [`open`], with these index parameters.
pub async fn open_with_params(path: &Path, dim: usize, params: IndexParams) -> Memory {
    Memory::builder()
        .path(path)
        .embedder(Arc::new(HashEmbedder::new(dim)))
        .index_params(params)
        .build()
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// [`open`], with a language model when one is given.
pub async fn open_with_llm(path: &Path, dim: usize, llm: Option<Arc<dyn Llm>>) -> Memory {
    let mut builder = Memory::builder()
        .path(path)
        .embedder(Arc::new(HashEmbedder::new(dim)));
    if let Some(llm) = llm {
        builder = builder.llm(llm);
    }
    builder
        .build()
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// SQL that takes a SQLite file of this memlane back to schema version 10, before memories
/// had a validity (migration 11): tests that go further back run it first.
pub const BEFORE_VALIDITY: &str = "\
    DROP INDEX memories_user_keys; DROP INDEX memories_agent_keys; \
    DROP INDEX memories_app_keys; DROP INDEX memories_run_keys; \
    CREATE INDEX memories_user_keys ON memories (user_id, vector_key, expiration_date) WHERE deleted_at IS NULL; \
    CREATE INDEX memories_agent_keys ON memories (agent_id, vector_key, expiration_date) WHERE deleted_at IS NULL; \
    CREATE INDEX memories_app_keys ON memories (app_id, vector_key, expiration_date) WHERE deleted_at IS NULL; \
    CREATE INDEX memories_run_keys ON memories (run_id, vector_key, expiration_date) WHERE deleted_at IS NULL; \
    ALTER TABLE memories DROP COLUMN valid_from; ALTER TABLE memories DROP COLUMN valid_until; \
    ALTER TABLE memories DROP COLUMN superseded_by; ALTER TABLE history DROP COLUMN superseded_by; \
    PRAGMA user_version = 10;";

/// Stores `text` verbatim for `user` and returns the new memory's id.
pub async fn add(memory: &Memory, user: &str, text: &str) -> Uuid {
    memory
        .add(text)
        .user(user)
        .infer(false)
        .await
        .unwrap_or_else(|e| panic!("add {text:?}: {e}"))
        .results[0]
        .id
}

/// The texts of a page of memories, sorted.
pub fn sorted_texts(page: memlane::record::Page<memlane::MemoryRecord>) -> Vec<String> {
    let mut texts: Vec<String> = page.results.into_iter().map(|r| r.memory).collect();
    texts.sort();
    texts
}

/// The memories a reconciliation prompt shows the model, as `{"memory": i, "text": …}`
/// objects (none when the prompt shows none).
pub fn shown_memories(prompt: &str) -> Vec<serde_json::Value> {
    let list = prompt
        .split("Existing memories:\n")
        .nth(1)
        .and_then(|rest| rest.split("\n\nNew facts:").next())
        .unwrap_or("[]");
    serde_json::from_str(list).unwrap()
}

/// A small deterministic generator (xorshift64) for seeded random test schedules.
pub struct Rng(pub u64);

impl Rng {
    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The PostgreSQL server of the `postgres` feature's tests: the connection string in
/// `MEMLANE_TEST_POSTGRES` (`scripts/test.sh` starts one and sets it; a user with a server
/// of their own sets it by hand), or a server this test binary starts with
/// `scripts/postgres.sh`, which stops it when the binary exits.
#[cfg(feature = "postgres")]
pub fn pg_server() -> &'static str {
    static SERVER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SERVER.get_or_init(|| {
        if let Ok(url) = std::env::var("MEMLANE_TEST_POSTGRES") {
            return url;
        }
        let dir = std::env::temp_dir().join(format!("memlane-pg-{}", Uuid::new_v4().simple()));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/postgres.sh");
        let out = std::process::Command::new(script)
            .arg("start")
            .arg(&dir)
            .arg(std::process::id().to_string())
            .output()
            .expect("run scripts/postgres.sh");
        assert!(
            out.status.success(),
            "scripts/postgres.sh could not start a server: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    })
}

/// `url` with its database replaced by `database`: a `postgresql://` URL or a libpq
/// `key=value` string (where the last `dbname` counts).
#[cfg(feature = "postgres")]
pub fn pg_with_database(url: &str, database: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (rest, query) = match rest.split_once('?') {
                Some((r, q)) => (r, format!("?{q}")),
                None => (rest, String::new()),
            };
            let authority = rest.split('/').next().unwrap_or(rest);
            format!("{scheme}://{authority}/{database}{query}")
        }
        None => format!("{url} dbname={database}"),
    }
}

/// A new, empty database on the test server, for one test: its connection string.
#[cfg(feature = "postgres")]
pub async fn pg_database() -> String {
    let server = pg_server();
    let (client, connection) = tokio_postgres::connect(server, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect to the test server {server:?}: {e}"));
    let task = tokio::spawn(connection);
    let name = format!("memlane_test_{}", Uuid::new_v4().simple());
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap_or_else(|e| panic!("create database {name}: {e}"));
    drop(client);
    let _ = task.await;
    pg_with_database(server, &name)
}

/// A memory on a new database of the test server, with a hashing embedder of `dim`
/// dimensions.
#[cfg(feature = "postgres")]
pub async fn pg_memory(dim: usize) -> (Memory, String) {
    let url = pg_database().await;
    (pg_open(&url, dim).await, url)
}

/// A memory on the PostgreSQL database at `url`, with a hashing embedder.
#[cfg(feature = "postgres")]
pub async fn pg_open(url: &str, dim: usize) -> Memory {
    Memory::builder()
        .postgres(url)
        .embedder(Arc::new(HashEmbedder::new(dim)))
        .build()
        .await
        .unwrap_or_else(|e| panic!("open {url}: {e}"))
}

/// Collects progress reports, for tests of long tasks.
#[derive(Clone, Default)]
pub struct Reports(Arc<std::sync::Mutex<Vec<memlane::Progress>>>);

impl Reports {
    /// A callback that records every report.
    pub fn callback(&self) -> impl Fn(memlane::Progress) + Send + Sync + 'static {
        let seen = Arc::clone(&self.0);
        move |p| seen.lock().unwrap().push(p)
    }

    /// `(done, total)` of every report so far, each of `task`; panics on a report of
    /// another task.
    pub fn of(&self, task: memlane::progress::Task) -> Vec<(u64, u64)> {
        let seen = self.0.lock().unwrap();
        assert!(seen.iter().all(|p| p.task == task), "{seen:?}");
        drop(seen);
        self.of_each(task)
    }

    /// `(done, total)` of every report of `task` so far; panics if its `done` went back
    /// or passed its `total`.
    pub fn of_each(&self, task: memlane::progress::Task) -> Vec<(u64, u64)> {
        let seen = self.0.lock().unwrap();
        let mut last = 0;
        seen.iter()
            .filter(|p| p.task == task)
            .map(|p| {
                assert!(p.done >= last && p.done <= p.total, "{seen:?}");
                last = p.done;
                (p.done, p.total)
            })
            .collect()
    }
}

/// The code between `// README` and `// END README` in `source`, after `skip` such
/// blocks, as compared (see [`squeezed`]).
pub fn quoted(source: &str, skip: usize) -> String {
    let start = "// README\n";
    let mut rest = source;
    for _ in 0..=skip {
        let at = rest.find(start).expect("a // README block") + start.len();
        rest = &rest[at..];
    }
    let end = rest.find("// END README").expect("its // END README");
    squeezed(&rest[..end])
}

/// Code as compared: without whitespace (rustfmt lays out the tests' copies its own way)
/// and without the closing brackets that end it (a quoted block may stop inside a loop the
/// README closes).
pub fn squeezed(code: &str) -> String {
    let text: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    text.trim_end_matches(['}', ')', ']', ';']).to_owned()
}

/// Checks that the README has a ```rust block of this code (see [`squeezed`]).
pub fn check_readme_has(code: &str) {
    let readme = include_str!("../../README.md");
    let found = readme
        .split("```rust\n")
        .skip(1)
        .any(|block| squeezed(block.split("```").next().unwrap_or("")) == code);
    assert!(
        found,
        "the README has no block of this code any more: {code}"
    );
}
