//! What the fuzz targets in `fuzz/` check, checked in CI without a fuzzer: every input of
//! the committed corpus (`fuzz/seeds/`) replayed through the targets' entry points, and
//! property tests that generate inputs of the same kinds for the same entry points.

use std::path::PathBuf;

use chrono::{DateTime, TimeZone, Utc};
use memlane::fuzzing;
use proptest::prelude::*;
use serde_json::{json, Value};

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn the_filter_corpus_replays() {
    let files = corpus("filter");
    assert!(files.len() >= 10, "{} files", files.len());
    let compared: Vec<&str> = files
        .iter()
        .filter(|(_, bytes)| fuzzing::filter(bytes))
        .map(|(name, _)| name.as_str())
        .collect();
    // Most seeds are valid filters, compared across both stores; the rest must be refused.
    assert!(compared.len() >= 8, "compared only {compared:?}");
    assert!(!compared.contains(&"bad-operator.json"));
    assert!(!compared.contains(&"truncated.json"));
}

#[test]
fn the_model_output_corpus_replays() {
    let files = corpus("model_output");
    assert!(files.len() >= 6, "{} files", files.len());
    for (name, bytes) in &files {
        let text = std::str::from_utf8(bytes).unwrap_or_else(|_| panic!("{name} is UTF-8"));
        fuzzing::model_reply(text);
    }
}

/// Filter JSON built from the language's own fields, operators and operand kinds, nested.
fn filter_json() -> impl Strategy<Value = Value> {
    let field = prop_oneof![
        Just("user_id"),
        Just("agent_id"),
        Just("app_id"),
        Just("run_id"),
        Just("created_at"),
        Just("updated_at"),
        Just("expiration_date"),
        Just("categories"),
        Just("keywords"),
        Just("metadata.n"),
        Just("metadata.tag"),
        Just("metadata.deep.x"),
        Just("metadata.text"),
        Just("metadata.flag"),
        Just("nonsense"),
    ];
    let op = prop_oneof![
        Just("eq"),
        Just("ne"),
        Just("in"),
        Just("nin"),
        Just("gt"),
        Just("gte"),
        Just("lt"),
        Just("lte"),
        Just("contains"),
        Just("icontains"),
        Just("bogus"),
    ];
    let scalar = prop_oneof![
        Just(json!("ann")),
        Just(json!("o'brien")),
        Just(json!("helper")),
        Just(json!("food")),
        Just(json!("travel")),
        Just(json!("a")),
        Just(json!("B")),
        Just(json!("tea")),
        Just(json!("Ü")),
        Just(json!("*")),
        Just(json!("2023-11-14")),
        Just(json!("2023-11-14T22:15:00Z")),
        Just(json!("2023-11-15T00:00:00+02:00")),
        Just(json!(1)),
        Just(json!(2.5)),
        Just(json!(-3)),
        Just(json!(true)),
        Just(Value::Null),
    ];
    let operand = prop_oneof![
        3 => scalar.clone(),
        1 => prop::collection::vec(scalar, 0..4).prop_map(Value::Array),
    ];
    let leaf = prop_oneof![
        (field.clone(), operand.clone()).prop_map(|(f, v)| json!({ f: v })),
        (field, op, operand).prop_map(|(f, o, v)| json!({ f: { o: v } })),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| json!({ "AND": v })),
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| json!({ "OR": v })),
            inner.clone().prop_map(|v| json!({ "NOT": v })),
            (inner.clone(), inner).prop_map(|(a, b)| {
                let mut merged = a.as_object().cloned().unwrap_or_default();
                merged.extend(b.as_object().cloned().unwrap_or_default());
                Value::Object(merged)
            }),
        ]
    })
}

/// Model replies built from the pieces real replies are made of, and noise.
fn model_reply() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("{\"facts\": [".to_string()),
        Just("{\"text\": \"Flies to Oslo next Friday\", \"categories\": [\"travel\"]}".to_string()),
        Just("{\"text\": \"\", \"importance\": 11}".to_string()),
        Just("{\"decisions\": [{\"fact\": 0, \"event\": \"UPDATE\", \"memory\": 1, \"text\": \"x\"}".to_string()),
        Just("{\"summary\": \"s\", \"entities\": [\"Ana\"], \"tags\": [], \"key_facts\": [], \"importance\": 5}".to_string()),
        Just("```json\n".to_string()),
        Just("```".to_string()),
        Just("]}".to_string()),
        Just(", ".to_string()),
        Just(" in 3 weeks ".to_string()),
        Just(" the day after tomorrow ".to_string()),
        Just(" last sunday ".to_string()),
        Just(" 2026-03-10 ".to_string()),
        "\\PC{0,24}",
    ];
    prop::collection::vec(piece, 0..10).prop_map(|parts| parts.concat())
}

fn any_time() -> impl Strategy<Value = DateTime<Utc>> {
    let (min, max) = (
        DateTime::<Utc>::MIN_UTC.timestamp(),
        DateTime::<Utc>::MAX_UTC.timestamp(),
    );
    prop_oneof![
        min..=max,
        Just(min),
        Just(max),
        (min..=min + 30 * 86_400),
        (max - 30 * 86_400..=max),
    ]
    .prop_map(|s| Utc.timestamp_opt(s, 0).single().unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn generated_filters_agree_across_stores(value in filter_json()) {
        let bytes = serde_json::to_vec(&value).unwrap();
        fuzzing::filter(&bytes);
    }

    #[test]
    fn generated_model_replies_never_panic(reply in model_reply(), at in any_time()) {
        fuzzing::model_reply(&reply);
        fuzzing::relative_dates(&reply, at);
    }
}
