//! The OpenAI-protocol providers against a real HTTP server on loopback that speaks the
//! protocol: the requests memlane sends are asserted, and the server injects 429s, 500s,
//! timeouts, dropped connections and malformed bodies.

use std::sync::Arc;
use std::time::Duration;

use memlane::llm::ChatRequest;
use memlane::{
    EmbedMode, Embedder, HashEmbedder, Llm, Memory, Message, OpenAiConfig, OpenAiEmbedder,
    OpenAiLlm,
};
use serde_json::json;

use crate::loopback::{chat_body, embedding_body, error, ok, Reply, Server};
use memlane::ErrorKind;

fn config(server: &Server) -> OpenAiConfig {
    OpenAiConfig::new("test-model")
        .base_url(&server.base)
        .api_key("sk-test-123")
        .backoff(Duration::from_millis(5))
        .timeout(Duration::from_secs(5))
}

fn json_request() -> ChatRequest {
    ChatRequest::new(vec![
        Message::new("system", "Reply in JSON."),
        Message::user("What do you know?"),
        Message::assistant("{}"),
        Message::user("More."),
    ])
    .json(true)
    .max_tokens(99)
}

#[tokio::test]
async fn a_chat_request_is_sent_as_the_protocol_says() {
    let server = Server::start(vec![ok(chat_body(r#"{"facts": []}"#))]).await;
    let llm = OpenAiLlm::new(config(&server)).unwrap();
    let reply = llm.chat(json_request()).await.unwrap();
    assert_eq!(reply.text, r#"{"facts": []}"#);
    assert_eq!(
        (reply.usage.prompt_tokens, reply.usage.completion_tokens),
        (31, 7)
    );
    assert_eq!(reply.model, "test-model-2026");

    let sent = &server.received()[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test-123"));
    assert_eq!(sent.body["model"], "test-model");
    assert_eq!(sent.body["response_format"], json!({"type": "json_object"}));
    assert_eq!(sent.body["temperature"], json!(0.0));
    // Not OpenAI's own address: the field local servers read.
    assert_eq!(sent.body["max_tokens"], json!(99));
    assert!(sent.body.get("max_completion_tokens").is_none());
    let roles: Vec<&str> = sent.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, vec!["system", "user", "assistant", "user"]);
    assert_eq!(sent.body["messages"][1]["content"], "What do you know?");
    assert!(sent.body.get("stream").is_none_or(|s| s == &json!(false)));
    // Without JSON mode there is no response_format.
    server.push(ok(chat_body("hi")));
    llm.chat(ChatRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap();
    assert!(server.received()[1].body.get("response_format").is_none());
}

fn schema_request() -> ChatRequest {
    ChatRequest::new(vec![Message::user("Facts?")]).schema(json!({
        "type": "object",
        "properties": {"facts": {"type": "array", "items": {"type": "string"}}},
        "required": ["facts"]
    }))
}

#[tokio::test]
async fn a_request_with_a_schema_asks_for_structured_output() {
    let server = Server::start(vec![ok(chat_body(r#"{"facts": []}"#))]).await;
    let llm = OpenAiLlm::new(config(&server)).unwrap();
    llm.chat(schema_request()).await.unwrap();
    let format = &server.received()[0].body["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["name"], "memlane_reply");
    assert_eq!(
        format["json_schema"]["schema"],
        schema_request().schema.unwrap()
    );
    // Not strict: OpenAI's strict mode takes only a subset of JSON Schema.
    assert!(format["json_schema"].get("strict").is_none());

    // Turned off, the same request asks for a JSON object only.
    let server = Server::start(vec![ok(chat_body(r#"{"facts": []}"#))]).await;
    let llm = OpenAiLlm::new(config(&server).structured_output(false)).unwrap();
    llm.chat(schema_request()).await.unwrap();
    assert_eq!(
        server.received()[0].body["response_format"],
        json!({"type": "json_object"})
    );
}

/// A server without structured output refuses the schema; the call goes on as a JSON
/// object request, and later calls ask for that straight away.
#[tokio::test]
async fn a_server_that_refuses_schemas_gets_json_object_requests() {
    let server = Server::start(vec![
        error(400, "response_format json_schema is not supported"),
        ok(chat_body(r#"{"facts": ["a"]}"#)),
        ok(chat_body(r#"{"facts": ["b"]}"#)),
    ])
    .await;
    let llm = OpenAiLlm::new(config(&server)).unwrap();
    assert_eq!(
        llm.chat(schema_request()).await.unwrap().text,
        r#"{"facts": ["a"]}"#
    );
    assert_eq!(
        llm.chat(schema_request()).await.unwrap().text,
        r#"{"facts": ["b"]}"#
    );
    let formats: Vec<String> = server
        .received()
        .iter()
        .map(|r| {
            r.body["response_format"]["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(formats, ["json_schema", "json_object", "json_object"]);

    // A refusal that is not the schema's (a bad key) stays an error, and schemas are
    // still asked for.
    let server = Server::start(vec![error(401, "bad key"), error(401, "bad key")]).await;
    let llm = OpenAiLlm::new(config(&server)).unwrap();
    let err = llm.chat(schema_request()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ProviderRefused, "{err}");
    assert!(err.detail().contains("check the API key"), "{err}");
    server.push(ok(chat_body("{}")));
    llm.chat(schema_request()).await.unwrap();
    let last = server.received().last().unwrap().body["response_format"]["type"].clone();
    assert_eq!(last, "json_schema");
}

#[tokio::test]
async fn transient_failures_are_retried_with_backoff() {
    let server = Server::start(vec![
        error(429, "slow down"),
        error(500, "oops"),
        Reply::Drop,
        error(503, "overloaded"),
        ok(chat_body("fine")),
    ])
    .await;
    let llm = OpenAiLlm::new(config(&server).max_retries(4)).unwrap();
    let reply = llm.chat(json_request()).await.unwrap();
    assert_eq!(reply.text, "fine");
    let received = server.received();
    assert_eq!(received.len(), 5);
    // Every attempt sends the same request.
    assert!(received.iter().all(|r| r.body == received[0].body));
}

#[tokio::test]
async fn retries_stop_at_the_limit_with_a_transient_error() {
    let server = Server::start(vec![error(500, "down"); 3]).await;
    let llm = OpenAiLlm::new(config(&server).max_retries(2)).unwrap();
    let err = llm.chat(json_request()).await.unwrap_err();
    assert_eq!((err.status(), err.kind()), (502, ErrorKind::ProviderFailed));
    assert!(err.is_transient());
    assert!(err.detail().contains("500"), "{err}");
    assert!(err.detail().contains("gave up after 3 attempts"), "{err}");
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn permanent_failures_are_not_retried() {
    let cases = [
        (error(401, "bad key"), "check the API key", ErrorKind::ProviderRefused),
        (
            Reply::Body(
                429,
                json!({"error": {"message": "quota", "type": "insufficient_quota", "param": null, "code": null}}).to_string(),
            ),
            "out of quota",
            ErrorKind::ProviderRefused,
        ),
        (error(404, "no such model"), "check the model name", ErrorKind::ProviderRefused),
        (error(400, "bad request"), "rejected (400", ErrorKind::ProviderRefused),
        (Reply::Body(200, "this is not json".into()), "not an OpenAI response", ErrorKind::ProviderFailed),
        (ok(json!({"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []})), "no choices", ErrorKind::ProviderFailed),
    ];
    for (reply, needle, kind) in cases {
        let server = Server::start(vec![reply, ok(chat_body("never read"))]).await;
        let llm = OpenAiLlm::new(config(&server)).unwrap();
        let err = llm.chat(json_request()).await.unwrap_err();
        assert_eq!((err.status(), err.kind()), (502, kind), "{needle}: {err}");
        assert!(!err.is_transient(), "{err}");
        assert!(err.detail().contains(needle), "{needle}: {err}");
        assert_eq!(server.received().len(), 1, "{needle}: retried");
    }
}

/// A server that keeps asking to slow down is a transient rate limit once the retries are
/// spent, with the client's own error as its source.
#[tokio::test]
async fn a_rate_limit_is_its_own_kind_with_its_source() {
    let server = Server::start(vec![error(429, "slow down"); 3]).await;
    let llm = OpenAiLlm::new(config(&server).max_retries(2)).unwrap();
    let err = llm.chat(json_request()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ProviderRateLimited, "{err}");
    assert!(err.is_transient());
    assert!(std::error::Error::source(&err).is_some(), "{err:?}");
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn a_slow_server_times_out_and_is_retried() {
    let server = Server::start(vec![
        Reply::Hang(Duration::from_secs(3)),
        ok(chat_body("quick")),
    ])
    .await;
    let llm = OpenAiLlm::new(config(&server).timeout(Duration::from_millis(300))).unwrap();
    assert_eq!(llm.chat(json_request()).await.unwrap().text, "quick");

    let server = Server::start(vec![Reply::Hang(Duration::from_secs(3)); 2]).await;
    let llm = OpenAiLlm::new(
        config(&server)
            .timeout(Duration::from_millis(200))
            .max_retries(1),
    )
    .unwrap();
    let err = llm.chat(json_request()).await.unwrap_err();
    assert!(err.is_transient());
    assert_eq!(err.kind(), ErrorKind::ProviderUnreachable, "{err}");
    assert!(err.detail().contains("timed out"), "{err}");
    assert_eq!(server.received().len(), 2);
}

#[tokio::test]
async fn bad_configurations_are_400s() {
    for config in [
        OpenAiConfig::new("m").base_url("localhost:11434/v1"),
        OpenAiConfig::new(" "),
        OpenAiConfig::new("m").timeout(Duration::ZERO),
        OpenAiConfig::new("m").api_key("sk-with\nnewline"),
    ] {
        let err = OpenAiLlm::new(config).unwrap_err();
        assert_eq!(err.status(), 400, "{err}");
    }
    assert_eq!(
        OpenAiEmbedder::new(OpenAiConfig::new("m"), 0)
            .unwrap_err()
            .status(),
        400
    );
    // The key never reaches Debug output.
    let shown = format!("{:?}", OpenAiConfig::new("m").api_key("sk-secret"));
    assert!(!shown.contains("sk-secret"), "{shown}");
}

#[tokio::test]
async fn embeddings_are_requested_in_batches_and_checked() {
    let server = Server::start(vec![
        error(429, "slow down"),
        // Out of order: the provider puts them back in order.
        ok(embedding_body(&[
            (1, vec![0.0, 1.0, 0.0]),
            (0, vec![1.0, 0.0, 0.0]),
        ])),
    ])
    .await;
    let embedder = OpenAiEmbedder::new(config(&server), 3).unwrap();
    assert_eq!(embedder.model_id(), "openai:test-model");
    let texts = vec!["first".to_string(), "second".to_string()];
    let vectors = embedder.embed(&texts, EmbedMode::Document).await.unwrap();
    assert_eq!(vectors, vec![vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 0.0]]);
    let sent = &server.received()[1];
    assert_eq!(sent.path, "/v1/embeddings");
    assert_eq!(sent.body["model"], "test-model");
    assert_eq!(sent.body["input"], json!(["first", "second"]));

    server.push(ok(embedding_body(&[(0, vec![1.0, 0.0])])));
    let err = embedder.embed_one("x", EmbedMode::Query).await.unwrap_err();
    assert_eq!(err.status(), 422);
    server.push(ok(embedding_body(&[(0, vec![1.0, 0.0, 0.0])])));
    let err = embedder.embed(&texts, EmbedMode::Query).await.unwrap_err();
    assert_eq!(err.status(), 502);
    assert!(err.detail().contains("1 vectors for 2 texts"), "{err}");
}

#[tokio::test]
async fn add_and_extract_run_through_the_protocol() {
    let server = Server::start(vec![ok(chat_body(
        "Here are the facts:\n```json\n{\"facts\": [{\"text\": \"Sam keeps bees\", \"categories\": [\"hobbies\"], \"entities\": [\"Sam\"], \"importance\": 6}]}\n```",
    ))])
    .await;
    let llm = OpenAiLlm::new(config(&server)).unwrap();
    let memory = Memory::builder()
        .embedder(Arc::new(HashEmbedder::new(64)))
        .llm(Arc::new(llm))
        .build()
        .await
        .unwrap();
    let out = memory.add("I keep bees!").user("sam").await.unwrap();
    assert_eq!(out.results[0].memory, "Sam keeps bees");
    assert_eq!(out.usage.prompt_tokens, 31);
    let prompt = &server.received()[0].body["messages"];
    let last = prompt.as_array().unwrap().last().unwrap();
    assert!(last["content"]
        .as_str()
        .unwrap()
        .contains("user: I keep bees!"));

    server.push(ok(chat_body(
        r#"{"summary": "Sam keeps bees", "entities": ["Sam"], "tags": ["hobbies"], "key_facts": ["Sam keeps bees"], "importance": 4}"#,
    )));
    let extracted = memory.extract("I keep bees!").await.unwrap();
    assert_eq!(extracted.usage.core.model, "test-model-2026");
    assert_eq!(extracted.usage.core.completion_tokens, 7);
}

#[tokio::test]
async fn an_openai_embedder_backs_a_memory() {
    // A server that embeds by hashing, so that the same text gets the same vector.
    let server = Server::start(Vec::new()).await;
    let hash = HashEmbedder::new(8);
    let texts = ["Sam keeps bees", "bees"];
    for text in texts {
        let v = hash.embed_one(text, EmbedMode::Document).await.unwrap();
        server.push(ok(embedding_body(&[(0, v)])));
    }
    let memory = Memory::builder()
        .embedder(Arc::new(OpenAiEmbedder::new(config(&server), 8).unwrap()))
        .build()
        .await
        .unwrap();
    memory
        .add("Sam keeps bees")
        .user("sam")
        .infer(false)
        .await
        .unwrap();
    let hits = memory.search("bees").user("sam").await.unwrap();
    assert_eq!(hits.results[0].record.memory, "Sam keeps bees");
    assert_eq!(server.received().len(), 2);
}
