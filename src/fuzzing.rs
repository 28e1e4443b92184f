//! Entry points of the fuzz targets in `fuzz/` (feature `fuzzing`; not a stable API). The
//! test suite replays the committed corpus through the same functions and runs property
//! tests over them, so what the fuzzers check is checked in CI too.
// A fuzz target reports what it finds by panicking.
#![allow(clippy::panic)]

use std::sync::OnceLock;

use chrono::{DateTime, TimeZone, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

pub use crate::infer::fuzz::{model_reply, relative_dates};

use crate::filter::Filter;
use crate::record::{MemoryRecord, Message, Owners};
use crate::store::{apply, Among, MemStore, NewMemory, SqliteStore, Store, Write, WriteBatch};

/// Eight memories in both stores: owners with quotes, metadata of every JSON type, unicode,
/// categories, timestamps 100 s apart.
struct Fixture {
    runtime: tokio::runtime::Runtime,
    sqlite: SqliteStore,
    reference: MemStore,
    records: Vec<MemoryRecord>,
}

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + seconds, 0)
        .single()
        .unwrap_or_default()
}

fn fixture() -> Result<&'static Fixture, String> {
    static FIXTURE: OnceLock<Result<Fixture, String>> = OnceLock::new();
    FIXTURE
        .get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            let metadata = [
                json!({"n": 1, "tag": "a", "deep": {"x": [1, 2]}}),
                json!({"n": 2.5, "tag": "B", "flag": true}),
                json!({"tag": null, "n": -3, "text": "Ünïcode ' \" %_"}),
                json!({}),
            ];
            let records: Vec<MemoryRecord> = (0..8usize)
                .map(|i| MemoryRecord {
                    id: Uuid::from_u128(i as u128 + 1),
                    memory: format!("memory {i} about tea and jazz"),
                    owners: Owners {
                        user_id: Some(["ann", "bob", "o'brien"][i % 3].to_string()),
                        agent_id: (i % 2 == 0).then(|| "helper".to_string()),
                        app_id: (i % 4 == 1).then(|| "app".to_string()),
                        run_id: None,
                    },
                    metadata: metadata[i % 4].as_object().cloned().unwrap_or_default(),
                    categories: [vec!["food"], vec!["travel", "food"], vec![]][i % 3]
                        .iter()
                        .map(|c| c.to_string())
                        .collect(),
                    immutable: false,
                    expiration_date: None,
                    created_at: at(i as i64 * 100),
                    updated_at: at(i as i64 * 100 + 50),
                    hash: format!("h{i}"),
                    context: None,
                    valid_from: at(i as i64 * 100),
                    valid_until: None,
                    superseded_by: None,
                })
                .collect();
            let sqlite = SqliteStore::in_memory().map_err(|e| e.to_string())?;
            let reference = MemStore::new();
            let writes: Vec<Write> = records
                .iter()
                .map(|r| {
                    Write::Insert(NewMemory::new(
                        r.clone(),
                        vec![1.0, 0.0],
                        vec![Message::user("x")],
                    ))
                })
                .collect();
            runtime.block_on(async {
                apply(&sqlite, WriteBatch::new(writes.clone(), 0))
                    .await
                    .map_err(|e| e.to_string())?;
                apply(&reference, WriteBatch::new(writes, 0))
                    .await
                    .map_err(|e| e.to_string())
            })?;
            Ok(Fixture {
                runtime,
                sqlite,
                reference,
                records,
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Filters: any bytes that are JSON are parsed and validated without a panic, and a valid
/// filter selects the same memories in the SQLite store (compiled to SQL) as in the
/// reference store (evaluated in Rust), and as [`Filter::matches`] says. Returns whether the
/// input was a valid filter that was compared; panics on a disagreement.
pub fn filter(data: &[u8]) -> bool {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return false;
    };
    let Ok(filter) = Filter::from_json(&value) else {
        return false;
    };
    assert!(
        filter.validate().is_ok(),
        "a parsed filter validates: {value}"
    );
    let f = match fixture() {
        Ok(f) => f,
        Err(e) => panic!("the fuzz fixture cannot be built: {e}"),
    };
    let now = at(10_000);
    let (sql, reference) = f.runtime.block_on(async {
        (
            f.sqlite.keys(Among::new(&filter, now, false)).await,
            f.reference.keys(Among::new(&filter, now, false)).await,
        )
    });
    let sql = match sql {
        Ok(keys) => keys,
        Err(e) => panic!("a valid filter runs in SQLite: {value}: {e}"),
    };
    let reference = match reference {
        Ok(keys) => keys,
        Err(e) => panic!("a valid filter runs in the reference store: {value}: {e}"),
    };
    assert_eq!(sql, reference, "SQLite and the reference store: {value}");
    let matched = f.records.iter().filter(|r| filter.matches(r)).count();
    assert_eq!(
        matched,
        sql.len(),
        "Filter::matches and the stores: {value}"
    );
    true
}
