//! Hostile and bad input, one table: each case expects a specific status, words of its
//! `detail` and the request field it names, and leaves the stored data exactly as it was (memories, vectors, history,
//! feedback, events, credits and configuration).

use std::sync::Arc;

use chrono::{Duration, Utc};
use memlane::credits::Prices;
use memlane::ops::export::Export;
use memlane::store::{EntityKind, FeedbackKind};
use memlane::{EmbedMode, HashEmbedder, Memory, Message, Projects, SearchMode};
use serde_json::{json, Value};
use uuid::Uuid;

const DIM: usize = 32;

/// What a case must produce.
struct Case {
    name: &'static str,
    status: u16,
    detail: &'static str,
    /// The request field the error names (`Error::field`), if any.
    field: Option<&'static str>,
}

const fn case(
    name: &'static str,
    status: u16,
    detail: &'static str,
    field: Option<&'static str>,
) -> Case {
    Case {
        name,
        status,
        detail,
        field,
    }
}

const CASES: &[Case] = &[
    // add
    case("add_empty_text", 400, "empty", Some("messages[0].content")),
    case("add_blank_text", 400, "empty", Some("messages[0].content")),
    case("add_huge_text", 413, "limit", Some("messages[0].content")),
    case("add_too_many_messages", 413, "messages", Some("messages")),
    case("add_no_owner", 400, "user_id", None),
    case("add_empty_owner", 400, "user_id is empty", Some("user_id")),
    case("add_long_owner", 400, "at most 256 bytes", Some("user_id")),
    case(
        "add_control_char_owner",
        400,
        "control characters",
        Some("user_id"),
    ),
    case("add_empty_role", 400, "role", Some("messages[0].role")),
    case("add_metadata_array", 400, "JSON object", Some("metadata")),
    case("add_metadata_core_key", 400, "reserved", Some("metadata")),
    case("add_metadata_too_deep", 400, "deep", Some("metadata")),
    case("add_metadata_too_big", 413, "metadata", Some("metadata")),
    case(
        "add_too_many_categories",
        400,
        "categories",
        Some("categories"),
    ),
    case(
        "add_expiry_in_the_past",
        400,
        "not in the future",
        Some("expiry"),
    ),
    case(
        "add_timestamp_at_the_end_of_time",
        400,
        "timestamp",
        Some("timestamp"),
    ),
    case(
        "add_timestamp_at_the_start_of_time",
        400,
        "timestamp",
        Some("timestamp"),
    ),
    case(
        "add_inferred_timestamp_in_the_future",
        400,
        "in the future",
        Some("timestamp"),
    ),
    case("add_inference_without_model", 503, "language model", None),
    // search
    case("search_top_k_zero", 400, "top_k", Some("top_k")),
    case("search_top_k_absurd", 400, "top_k", Some("top_k")),
    case(
        "search_threshold_negative",
        400,
        "threshold",
        Some("threshold"),
    ),
    case(
        "search_threshold_above_one",
        400,
        "threshold",
        Some("threshold"),
    ),
    case("search_threshold_nan", 400, "threshold", Some("threshold")),
    case("search_empty_query", 400, "empty", Some("query")),
    case("search_huge_query", 413, "limit", Some("query")),
    case("search_unknown_field", 400, "unknown", Some("filters")),
    case("search_unknown_operator", 400, "operator", Some("filters")),
    case("search_filter_too_deep", 400, "deep", Some("filters")),
    case(
        "search_filter_too_many_conditions",
        400,
        "conditions",
        Some("filters"),
    ),
    case(
        "search_filter_too_many_values",
        400,
        "values",
        Some("filters"),
    ),
    case(
        "search_filters_not_an_object",
        400,
        "object",
        Some("filters"),
    ),
    case(
        "search_sql_in_metadata_key",
        400,
        "metadata key",
        Some("filters"),
    ),
    case("search_vector_wrong_length", 422, "dimension", None),
    case("search_vector_nan", 422, "finite", None),
    case("search_vector_zero", 422, "zero", None),
    case(
        "search_vector_in_keyword_mode",
        400,
        "text query",
        Some("query"),
    ),
    // list
    case("list_page_size_zero", 400, "page_size", Some("page_size")),
    case("list_page_size_absurd", 400, "page_size", Some("page_size")),
    case("list_forged_cursor", 400, "cursor", Some("cursor")),
    // get, update, delete, history
    case("get_invalid_uuid", 400, "is not a UUID", Some("memory_id")),
    case("get_unknown", 404, "not found", None),
    case("update_deleted", 404, "not found", None),
    case("update_immutable", 409, "immutable", None),
    case("update_nothing", 400, "nothing to update", None),
    case("update_huge_text", 413, "limit", Some("text")),
    case("delete_twice", 404, "not found", None),
    case("delete_all_without_owner", 400, "refused", None),
    case(
        "history_invalid_uuid",
        400,
        "is not a UUID",
        Some("memory_id"),
    ),
    // configuration
    case(
        "config_taxonomy_string",
        400,
        "label_taxonomy",
        Some("label_taxonomy"),
    ),
    case(
        "config_taxonomy_two_keys",
        400,
        "one key",
        Some("label_taxonomy[0]"),
    ),
    case(
        "config_taxonomy_too_many",
        413,
        "the limit is 100",
        Some("label_taxonomy"),
    ),
    case(
        "config_policy_too_big",
        413,
        "extraction_policy",
        Some("extraction_policy"),
    ),
    case("config_unknown_field", 400, "unknown", None),
    case(
        "config_description_not_text",
        400,
        "string",
        Some("label_taxonomy[0]"),
    ),
    // engine
    case("retrieve_limit_zero", 400, "limit", Some("limit")),
    case("embed_empty", 400, "empty", Some("text")),
    case("embed_unknown_mode", 400, "mode", Some("mode")),
    // events, entities, feedback, import
    case("events_limit_zero", 400, "limit", Some("limit")),
    case(
        "entities_page_size_zero",
        400,
        "page_size",
        Some("page_size"),
    ),
    case("entities_forged_cursor", 400, "cursor", Some("cursor")),
    case("delete_entity_empty_id", 400, "empty", Some("user_id")),
    case("delete_entity_unknown", 404, "owns any memory", None),
    case("feedback_unknown_memory", 404, "not found", None),
    case(
        "feedback_reason_too_big",
        413,
        "feedback_reason",
        Some("feedback_reason"),
    ),
    case("import_wrong_format", 400, "not a memlane export", None),
    case("import_existing_ids", 409, "already exists", None),
    case("credits_exhausted", 402, "credit", None),
];

fn nested(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = json!({ "k": v });
    }
    v
}

fn nested_filter(depth: usize) -> Value {
    let mut f = json!({"user_id": "ann"});
    for _ in 0..depth {
        f = json!({ "AND": [f] });
    }
    f
}

/// Runs one case; `Ok` when the call succeeded (which every case here must not).
async fn run(name: &str, m: &Memory, ids: &Ids) -> memlane::Result<()> {
    let huge = "x".repeat(memlane::limits::MAX_TEXT_BYTES + 1);
    match name {
        "add_empty_text" => m.add("").user("ann").infer(false).await.map(drop),
        "add_blank_text" => m.add(" \n\t ").user("ann").infer(false).await.map(drop),
        "add_huge_text" => m.add(huge).user("ann").infer(false).await.map(drop),
        "add_too_many_messages" => {
            let many: Vec<Message> = (0..1_001).map(|i| Message::user(format!("m{i}"))).collect();
            m.add(many).user("ann").infer(false).await.map(drop)
        }
        "add_no_owner" => m.add("a fact").infer(false).await.map(drop),
        "add_empty_owner" => m.add("a fact").user("").infer(false).await.map(drop),
        "add_long_owner" => m
            .add("a fact")
            .user("u".repeat(257))
            .infer(false)
            .await
            .map(drop),
        "add_control_char_owner" => m.add("a fact").user("a\u{0}b").infer(false).await.map(drop),
        "add_empty_role" => m
            .add(vec![Message::new("", "hello there")])
            .user("ann")
            .infer(false)
            .await
            .map(drop),
        "add_metadata_array" => m
            .add("a fact")
            .user("ann")
            .metadata(json!([1, 2]))
            .infer(false)
            .await
            .map(drop),
        "add_metadata_core_key" => m
            .add("a fact")
            .user("ann")
            .metadata(json!({"core": {}}))
            .infer(false)
            .await
            .map(drop),
        "add_metadata_too_deep" => m
            .add("a fact")
            .user("ann")
            .metadata(json!({ "a": nested(40) }))
            .infer(false)
            .await
            .map(drop),
        "add_metadata_too_big" => m
            .add("a fact")
            .user("ann")
            .metadata(json!({ "blob": "y".repeat(70_000) }))
            .infer(false)
            .await
            .map(drop),
        "add_too_many_categories" => m
            .add("a fact")
            .user("ann")
            .categories((0..65).map(|i| format!("c{i}")))
            .infer(false)
            .await
            .map(drop),
        "add_expiry_in_the_past" => m
            .add("a fact")
            .user("ann")
            .expiry(Utc::now() - Duration::days(1))
            .infer(false)
            .await
            .map(drop),
        "add_timestamp_at_the_end_of_time" => m
            .add("a fact")
            .user("ann")
            .timestamp(chrono::DateTime::<Utc>::MAX_UTC)
            .infer(false)
            .await
            .map(drop),
        "add_timestamp_at_the_start_of_time" => m
            .add("a fact")
            .user("ann")
            .timestamp(chrono::DateTime::<Utc>::MIN_UTC)
            .infer(false)
            .await
            .map(drop),
        "add_inferred_timestamp_in_the_future" => m
            .add("next Friday I fly to Oslo")
            .user("ann")
            .timestamp(Utc::now() + Duration::days(2))
            .await
            .map(drop),
        "add_inference_without_model" => {
            m.add("I like tea").user("ann").infer(true).await.map(drop)
        }

        "search_top_k_zero" => m.search("tea").user("ann").top_k(0).await.map(drop),
        "search_top_k_absurd" => m
            .search("tea")
            .user("ann")
            .top_k(usize::MAX)
            .await
            .map(drop),
        "search_threshold_negative" => m.search("tea").user("ann").threshold(-0.1).await.map(drop),
        "search_threshold_above_one" => m.search("tea").user("ann").threshold(1.5).await.map(drop),
        "search_threshold_nan" => m
            .search("tea")
            .user("ann")
            .threshold(f32::NAN)
            .await
            .map(drop),
        "search_empty_query" => m.search("").user("ann").await.map(drop),
        "search_huge_query" => m.search(huge).user("ann").await.map(drop),
        "search_unknown_field" => m
            .search("tea")
            .filters(json!({"color": "red"}))
            .await
            .map(drop),
        "search_unknown_operator" => m
            .search("tea")
            .filters(json!({"user_id": {"regex": ".*"}}))
            .await
            .map(drop),
        "search_filter_too_deep" => m.search("tea").filters(nested_filter(20)).await.map(drop),
        "search_filter_too_many_conditions" => {
            let many: Vec<Value> = (0..300)
                .map(|i| json!({"user_id": format!("u{i}")}))
                .collect();
            m.search("tea")
                .filters(json!({ "OR": many }))
                .await
                .map(drop)
        }
        "search_filter_too_many_values" => {
            let many: Vec<String> = (0..1_001).map(|i| format!("u{i}")).collect();
            m.search("tea")
                .filters(json!({"user_id": {"in": many}}))
                .await
                .map(drop)
        }
        "search_filters_not_an_object" => {
            m.search("tea").filters(json!(["user_id"])).await.map(drop)
        }
        "search_sql_in_metadata_key" => m
            .search("tea")
            .user("ann")
            .filters(json!({"metadata": {"a') OR 1=1 --": 1}}))
            .await
            .map(drop),
        "search_vector_wrong_length" => m
            .search_vector(vec![0.5; DIM + 1])
            .user("ann")
            .await
            .map(drop),
        "search_vector_nan" => {
            let mut v = vec![0.5; DIM];
            v[3] = f32::NAN;
            m.search_vector(v).user("ann").await.map(drop)
        }
        "search_vector_zero" => m.search_vector(vec![0.0; DIM]).user("ann").await.map(drop),
        "search_vector_in_keyword_mode" => m
            .search_vector(vec![0.5; DIM])
            .user("ann")
            .mode(SearchMode::Keyword)
            .await
            .map(drop),

        "list_page_size_zero" => m.list().user("ann").page_size(0).await.map(drop),
        "list_page_size_absurd" => m.list().user("ann").page_size(1_000_000).await.map(drop),
        "list_forged_cursor" => m
            .list()
            .user("ann")
            .cursor("'; DROP TABLE memories; --")
            .await
            .map(drop),

        "get_invalid_uuid" => m.get("1; DROP TABLE memories").await.map(drop),
        "get_unknown" => m.get(Uuid::new_v4()).await.map(drop),
        "update_deleted" => m.update(ids.deleted).text("back").await.map(drop),
        "update_immutable" => m.update(ids.immutable).text("changed").await.map(drop),
        "update_nothing" => m.update(ids.plain).await.map(drop),
        "update_huge_text" => m.update(ids.plain).text(huge).await.map(drop),
        "delete_twice" => m.delete(ids.deleted).await.map(drop),
        "delete_all_without_owner" => m.delete_all().await.map(drop),
        "history_invalid_uuid" => m.history("not-a-uuid").await.map(drop),

        "config_taxonomy_string" => m
            .put_config(&json!({"label_taxonomy": "food"}))
            .await
            .map(drop),
        "config_taxonomy_two_keys" => m
            .put_config(&json!({"label_taxonomy": [{"a": "x", "b": "y"}]}))
            .await
            .map(drop),
        "config_taxonomy_too_many" => {
            let labels: Vec<Value> = (0..101).map(|i| json!({ format!("l{i}"): "d" })).collect();
            m.put_config(&json!({ "label_taxonomy": labels }))
                .await
                .map(drop)
        }
        "config_policy_too_big" => m
            .put_config(&json!({"extraction_policy": "p".repeat(9 * 1024)}))
            .await
            .map(drop),
        "config_unknown_field" => m.put_config(&json!({"temperature": 2})).await.map(drop),
        "config_description_not_text" => m
            .put_config(&json!({"label_taxonomy": [{"food": 3}]}))
            .await
            .map(drop),

        "retrieve_limit_zero" => m.retrieve("tea", "ann", 0).await.map(drop),
        "embed_empty" => m.embed("", EmbedMode::Query).await.map(drop),
        "embed_unknown_mode" => EmbedMode::parse("sideways").map(drop),

        "events_limit_zero" => m.events_after(0, 0).await.map(drop),
        "entities_page_size_zero" => m.entities().page_size(0).await.map(drop),
        "entities_forged_cursor" => m.entities().cursor("martian:x").await.map(drop),
        "delete_entity_empty_id" => m.delete_entity(EntityKind::User, " ").await.map(drop),
        "delete_entity_unknown" => m.delete_entity(EntityKind::Agent, "nobody").await.map(drop),
        "feedback_unknown_memory" => m
            .feedback(Uuid::new_v4(), Some(FeedbackKind::Negative), None)
            .await
            .map(drop),
        "feedback_reason_too_big" => m
            .feedback(
                ids.plain,
                Some(FeedbackKind::Negative),
                Some(&"r".repeat(3_000)),
            )
            .await
            .map(drop),
        "import_wrong_format" => {
            let mut export: Export = m.export().await?;
            export.format = "mem0".into();
            m.import(&export).await.map(drop)
        }
        "import_existing_ids" => {
            let export = m.export().await?;
            m.import(&export).await.map(drop)
        }
        "credits_exhausted" => {
            m.set_prices(Prices {
                add: 2_000_000,
                ..Prices::default()
            })
            .await?;
            let out = m.add("costly").user("ann").infer(false).await.map(drop);
            m.set_prices(Prices::default()).await?;
            out
        }
        other => panic!("no case named {other}"),
    }
}

struct Ids {
    plain: Uuid,
    immutable: Uuid,
    deleted: Uuid,
}

/// Everything a case could change, as comparable values.
async fn snapshot(m: &Memory) -> (Value, u64, u64, Value, Prices) {
    let mut export = serde_json::to_value(m.export().await.unwrap()).unwrap();
    export["exported_at"] = Value::Null;
    (
        export,
        m.credits().await.unwrap(),
        m.events_after(0, 1_000).await.unwrap().next_cursor,
        serde_json::to_value(m.config().await.unwrap()).unwrap(),
        m.prices().await.unwrap(),
    )
}

#[tokio::test]
async fn every_bad_input_is_a_typed_error_that_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let m = Memory::builder()
        .path(dir.path().join("m.db"))
        .embedder(Arc::new(HashEmbedder::new(DIM)))
        .build()
        .await
        .unwrap();
    every_case(&m).await;
}

/// The same table on PostgreSQL.
#[cfg(feature = "postgres")]
#[tokio::test]
async fn on_postgres_every_bad_input_is_a_typed_error_that_changes_nothing() {
    let (m, _url) = crate::common::pg_memory(DIM).await;
    every_case(&m).await;
}

/// Runs every case of the table on `m`, a new empty memory.
async fn every_case(m: &Memory) {
    assert!(CASES.len() >= 50, "{} cases", CASES.len());
    // Stored strings full of SQL and FTS syntax are data, kept as given.
    let nasty = "Robert'); DROP TABLE memories; -- \"quoted\" OR * NEAR(a b) % _ \\";
    let plain = m
        .add(nasty)
        .user("o'brien; --")
        .metadata(json!({"k'; DELETE FROM history; --": "v\"al"}))
        .infer(false)
        .await
        .unwrap()
        .results[0]
        .id;
    assert_eq!(m.get(plain).await.unwrap().memory, nasty);
    let hits = m.search(nasty).user("o'brien; --").await.unwrap();
    assert_eq!(hits.results[0].record.id, plain);
    m.add("ann likes tea")
        .user("ann")
        .infer(false)
        .await
        .unwrap();
    let immutable = m
        .add("ann's passport ends in 42")
        .user("ann")
        .immutable(true)
        .infer(false)
        .await
        .unwrap()
        .results[0]
        .id;
    let deleted = m
        .add("gone")
        .user("ann")
        .infer(false)
        .await
        .unwrap()
        .results[0]
        .id;
    m.delete(deleted).await.unwrap();
    m.put_config(
        &json!({"extraction_policy": "keep food", "label_taxonomy": [{"food": "eating"}]}),
    )
    .await
    .unwrap();
    let ids = Ids {
        plain,
        immutable,
        deleted,
    };

    let mut failures = Vec::new();
    for c in CASES {
        let before = snapshot(m).await;
        let outcome = run(c.name, m, &ids).await;
        let after = snapshot(m).await;
        match outcome {
            Ok(()) => failures.push(format!("{}: succeeded", c.name)),
            Err(e) => {
                if e.status() != c.status || !e.detail().contains(c.detail) || e.field() != c.field
                {
                    failures.push(format!(
                        "{}: got {} {:?} about {:?}, want {} containing {:?} about {:?}",
                        c.name,
                        e.status(),
                        e.detail(),
                        e.field(),
                        c.status,
                        c.detail,
                        c.field
                    ));
                }
                // The body is the spec's: one `detail` string.
                let body = serde_json::to_value(e.body()).unwrap();
                assert_eq!(body.as_object().map(|o| o.len()), Some(1), "{}", c.name);
            }
        }
        if before != after {
            failures.push(format!("{}: changed the stored data", c.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn wrong_and_revoked_keys_are_401s() {
    let dir = tempfile::tempdir().unwrap();
    let projects = Projects::builder(dir.path())
        .embedder(Arc::new(HashEmbedder::new(DIM)))
        .build()
        .await
        .unwrap();
    let p = projects.create_project("p").await.unwrap();
    let key = projects.create_key(&p.id, "k").await.unwrap();
    projects.revoke_key(&key.info.id).await.unwrap();
    for header in [
        format!("Token {}", key.key),
        "Token mlk_' OR 1=1 --".to_string(),
        format!("Token {}", key.key.to_uppercase()),
        "Token\u{0}".to_string(),
    ] {
        let e = projects.authenticate(&header).await.unwrap_err();
        assert_eq!(e.status(), 401, "{header:?}: {e}");
    }
}
