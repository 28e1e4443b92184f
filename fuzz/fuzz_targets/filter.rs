//! Filters: any JSON is parsed and validated without a panic, and a valid filter selects the
//! same memories in the SQLite store (compiled to SQL) as in the reference store (evaluated
//! in Rust), and as `Filter::matches` says.
#![no_main]

use std::sync::OnceLock;

use chrono::{TimeZone, Utc};
use libfuzzer_sys::fuzz_target;
use memlane::store::{MemStore, NewMemory, SqliteStore, Store, Write, WriteBatch};
use memlane::{Filter, MemoryRecord, Message, Owners};
use serde_json::{json, Value};
use uuid::Uuid;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    sqlite: SqliteStore,
    reference: MemStore,
    records: Vec<MemoryRecord>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let at = |s: i64| {
            Utc.timestamp_opt(1_700_000_000 + s, 0)
                .single()
                .expect("time")
        };
        let metadata = [
            json!({"n": 1, "tag": "a", "deep": {"x": [1, 2]}}),
            json!({"n": 2.5, "tag": "B", "flag": true}),
            json!({"tag": null, "n": -3, "text": "Ünïcode ' \" %_"}),
            json!({}),
        ];
        let records: Vec<MemoryRecord> = (0..8)
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
            })
            .collect();
        let sqlite = SqliteStore::in_memory().expect("sqlite");
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
            sqlite
                .apply(WriteBatch::new(writes.clone(), 0))
                .await
                .expect("insert");
            reference
                .apply(WriteBatch::new(writes, 0))
                .await
                .expect("insert");
        });
        Fixture {
            runtime,
            sqlite,
            reference,
            records,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Ok(filter) = Filter::from_json(&value) else {
        return;
    };
    if filter.validate().is_err() {
        return;
    }
    let f = fixture();
    let now = Utc.timestamp_opt(1_700_010_000, 0).single().expect("time");
    let (sql, reference) = f.runtime.block_on(async {
        (
            f.sqlite.matching_keys(&filter, now, false).await,
            f.reference.matching_keys(&filter, now, false).await,
        )
    });
    let sql = sql.expect("a valid filter runs in SQLite");
    let reference = reference.expect("a valid filter runs in the reference store");
    assert_eq!(sql, reference, "{value}");
    let matched = f.records.iter().filter(|r| filter.matches(r)).count();
    assert_eq!(matched, sql.len(), "{value}");
});
