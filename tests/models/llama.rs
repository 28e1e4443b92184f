//! The local language model run by llama.cpp (`LlamaCppLlm`, feature `llama`) on the pinned
//! GGUF: the same tokens as candle's, constrained decoding, prefix reuse through llama.cpp's
//! sequences (with more system messages than it keeps), cancellation, and `add` with
//! inference end to end. Needs `scripts/fetch-models.sh` and `scripts/llama-deps.sh`.
#![cfg(all(feature = "llama", feature = "local-embed"))]

use std::sync::{Arc, OnceLock};

use memlane::llm::ChatRequest;
use memlane::{LlamaCppLlm, Llm, LocalLlm, Memory, Message, MiniLm};

use crate::local_llm::cases;

fn shared() -> LlamaCppLlm {
    static MODEL: OnceLock<LlamaCppLlm> = OnceLock::new();
    MODEL
        .get_or_init(|| LlamaCppLlm::load_default().unwrap_or_else(|e| panic!("{e}")))
        .clone()
}

fn private() -> LlamaCppLlm {
    LlamaCppLlm::from_gguf(LocalLlm::default_path(), "qwen2.5-llama-private").unwrap()
}

/// `warm_up` has the model read the fixed part of the two prompts of `add` with
/// inference (extraction, for the project's own labels, and reconciliation), so that the
/// first `add` reads only its conversation. The warmed model then runs a compatible case
/// through llama.cpp, the real embedder, index and SQLite file: a second job
/// ("nebenjob-de") supersedes nothing, and every fact stays current. (One test, so that
/// the prompts' instructions are read once for both.)
#[tokio::test]
async fn a_warmed_model_reads_only_conversations_and_keeps_a_compatible_case_current() {
    let llm = private();
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::builder()
        .path(dir.path().join("m.db"))
        .embedder(Arc::new(MiniLm::load_default().unwrap()))
        .llm(Arc::new(llm.clone()))
        .build()
        .await
        .unwrap();
    memory
        .put_config(&serde_json::json!({"label_taxonomy": [{"garden": "what they grow"}]}))
        .await
        .unwrap();
    memory.warm_up().await.unwrap();
    let warmed = llm.stats();
    // Two calls, each with instructions of its own: nothing is reused.
    assert!(warmed.calls == 2 && warmed.reused_tokens == 0, "{warmed:?}");
    memory
        .add(vec![Message::user("I grow tomatoes on my balcony.")])
        .user("wren")
        .await
        .unwrap();
    let after = llm.stats();
    let read = after.prompt_tokens - warmed.prompt_tokens;
    let reused = after.reused_tokens - warmed.reused_tokens;
    // The extraction's instructions and examples (about 500 tokens) were read already.
    assert!(
        reused >= 400 && read - reused < 120,
        "{read} prompt tokens, {reused} reused"
    );

    let case = cases::load("contradictions_tuned.json")
        .into_iter()
        .find(|c| c.id == "nebenjob-de")
        .unwrap();
    let (kept, changed) = crate::local_llm::add_case_changing(&memory, &case).await;
    assert_eq!(case.facts.len(), 3);
    for fact in &case.facts {
        assert!(
            kept.iter()
                .any(|m| cases::is_right(m, std::slice::from_ref(fact), &case.stale)),
            "{fact:?} is lost: {kept:?}"
        );
    }
    assert_eq!(changed, [], "{kept:?}");
}

#[tokio::test]
async fn llama_cpp_answers_as_the_candle_model_does() {
    let request = ChatRequest::new(vec![
        Message::new("system", "Reply with only JSON."),
        Message::user(r#"Give {"capital": <the capital of France>, "river": <its river>}."#),
    ])
    .json(true)
    .max_tokens(24);
    let llama = shared().chat(request.clone()).await.unwrap();
    let value: serde_json::Value =
        serde_json::from_str(&llama.text).unwrap_or_else(|e| panic!("{e}: {}", llama.text));
    assert_eq!(value["capital"], "Paris", "{}", llama.text);
    let candle = LocalLlm::load_default()
        .unwrap()
        .chat(request)
        .await
        .unwrap();
    assert_eq!(llama.text, candle.text);
    assert_eq!(llama.usage, candle.usage);
    assert_eq!(llama.model, "qwen2.5-coder-1.5b-instruct-q4_k_m");
}

/// A schema keeps llama.cpp's reply to what it allows, as it does candle's.
#[tokio::test]
async fn a_reply_with_a_schema_is_decoded_under_it() {
    let model = private();
    let reply = model
        .chat(
            ChatRequest::new(vec![
                Message::new("system", "Reply with only JSON."),
                Message::user(r#"Give {"capital": <the capital of France>}."#),
            ])
            .schema(serde_json::json!({
                "type": "object",
                "properties": {"capital": {"enum": ["Lyon", "Marseille"]}},
                "required": ["capital"],
                "additionalProperties": false
            }))
            .max_tokens(16),
        )
        .await
        .unwrap();
    let value: serde_json::Value =
        serde_json::from_str(&reply.text).unwrap_or_else(|e| panic!("{e}: {}", reply.text));
    assert!(
        ["Lyon", "Marseille"].contains(&value["capital"].as_str().unwrap()),
        "{}",
        reply.text
    );
    assert!(model.stats().forced_tokens >= 2, "{:?}", model.stats());
}

#[tokio::test]
async fn a_reply_that_copies_its_prompt_is_read_ahead_and_comes_out_the_same() {
    let llm = private();
    let counted = llm.clone();
    crate::local_llm::a_copying_reply_is_read_ahead(
        Arc::new(llm.clone().prompt_lookup(true)),
        Arc::new(llm),
        move || counted.stats(),
    )
    .await;
}

#[tokio::test]
async fn a_second_question_about_a_message_reads_only_itself() {
    let llm = private();
    let counted = llm.clone();
    crate::local_llm::a_second_question_reads_only_itself(
        Arc::new(llm),
        move || counted.stats().reused_tokens,
        false,
    )
    .await;
}

/// A call reuses what an earlier one read of its system message, answers as it did the
/// first time, and still answers right after more system messages than are kept have
/// pushed its prefix out (the sequences they held are cleared and used again).
#[tokio::test]
async fn prefixes_are_reused_kept_and_dropped_in_llama_cpp_sequences() {
    let llm = private();
    let ask = |rule: &str, question: &str| {
        ChatRequest::new(vec![
            Message::new(
                "system",
                format!(
                    "You are a terse assistant. Answer every question with one or two words, \
                     in lowercase, without punctuation and without explanations. {rule}"
                ),
            ),
            Message::user(question),
        ])
        .max_tokens(6)
    };
    let first = llm
        .chat(ask("Be kind.", "What colour is the sky?"))
        .await
        .unwrap();
    assert_eq!(llm.stats().reused_tokens, 0);
    let again = llm
        .chat(ask("Be kind.", "What colour is the sky?"))
        .await
        .unwrap();
    assert_eq!(again.text, first.text, "reusing the prefix changes nothing");
    let reused = llm.stats().reused_tokens;
    assert!(reused > 30, "{reused}");
    let ice = llm
        .chat(ask("Be kind.", "What is frozen water called?"))
        .await
        .unwrap();
    assert!(ice.text.to_lowercase().contains("ice"), "{}", ice.text);
    assert_eq!(llm.stats().reused_tokens, 2 * reused);
    // Six other system messages: more than are kept, so the first one's goes.
    for rule in [
        "Rule one.",
        "Rule two.",
        "Rule three.",
        "Rule four.",
        "Rule five.",
        "Rule six.",
    ] {
        let reply = llm
            .chat(ask(rule, "What colour is the sky?"))
            .await
            .unwrap();
        assert_eq!(reply.text, first.text, "{rule}");
    }
    let before = llm.stats().reused_tokens;
    let late = llm
        .chat(ask("Be kind.", "What colour is the sky?"))
        .await
        .unwrap();
    assert_eq!(late.text, first.text);
    // Its instructions were read again: a shared opening ("Rule six.") is not reused.
    assert_eq!(llm.stats().reused_tokens, before, "{:?}", llm.stats());
    assert_eq!(llm.stats().calls, 10);
}

/// A call's reply depends on its prompt alone, not on the calls before it: read from
/// scratch by a fresh model, or after other prompts have been read and kept, and from its
/// own kept prefix, a long greedy reply comes out token for token the same.
#[tokio::test]
async fn a_reply_is_the_same_whatever_calls_came_before() {
    let ask = |rules: &str, question: &str| {
        ChatRequest::new(vec![
            Message::new(
                "system",
                format!(
                    "You are a storyteller. Write vivid, plain prose with concrete details and \
                     no lists. {rules}"
                ),
            ),
            Message::user(question),
        ])
        .max_tokens(64)
    };
    let question = "Tell the story of a lighthouse keeper who finds a letter in a bottle.";
    let fresh = private().chat(ask("", question)).await.unwrap();
    assert_eq!(fresh.usage.completion_tokens, 64, "{fresh:?}");

    // Other prompts read and kept first (their replies do not matter: one token each).
    let busy = private();
    for (rules, other) in [
        ("Keep it short.", "Describe a market at dawn."),
        ("", "Tell the story of a baker who loses her keys."),
        ("Use the past tense.", "Describe a train crossing a desert."),
    ] {
        busy.chat(ask(rules, other).max_tokens(1)).await.unwrap();
    }
    let later = busy.chat(ask("", question)).await.unwrap();
    assert!(busy.stats().reused_tokens > 0, "{:?}", busy.stats());
    assert_eq!(later.text, fresh.text);
}

#[tokio::test]
async fn dropping_a_call_stops_it_before_its_next_token() {
    let llm = private();
    let counted = llm.clone();
    crate::local_llm::dropping_a_call_stops_it(Arc::new(llm), move || {
        counted.stats().written_tokens
    })
    .await;
}

/// A memory in `dir` on the real embedder and the shared llama.cpp model.
async fn memory_on_llama(dir: &tempfile::TempDir) -> Memory {
    Memory::builder()
        .path(dir.path().join("m.db"))
        .embedder(Arc::new(MiniLm::load_default().unwrap()))
        .llm(Arc::new(shared()))
        .build()
        .await
        .unwrap()
}

/// `add` with inference through llama.cpp, the real embedder, index and SQLite file: a
/// held-out conversation of the extraction evaluation keeps its facts and nothing else.
#[tokio::test]
async fn add_with_inference_keeps_a_held_out_conversations_facts() {
    let case = cases::Set::HeldOut
        .cases()
        .into_iter()
        .find(|c| c.id == "pref-late-calls")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let memory = memory_on_llama(&dir).await;
    assert_eq!(case.turns.len(), 1);
    let stored = crate::local_llm::add_case(&memory, &case).await;
    let score = cases::Score::of(&stored, &case.facts, &case.stale);
    assert_eq!(score.facts_stated, case.facts.len(), "{stored:?}");
    assert_eq!(score.memories_stating_a_fact, score.memories, "{stored:?}");
}

#[test]
fn the_readmes_llama_example_runs_as_written() {
    crate::common::check_readme_has(&crate::common::quoted(include_str!("llama.rs"), 0));
    let dir = tempfile::tempdir().unwrap();
    let out = crate::readme::run_in(dir.path(), "llama::llama_example");
    assert!(
        out.contains("MODEL qwen2.5-coder-1.5b-instruct-q4_k_m"),
        "{out}"
    );
}

#[tokio::test]
#[ignore = "run by the_readmes_llama_example_runs_as_written, in a directory of its own"]
async fn llama_example() {
    async fn example() -> memlane::Result<()> {
        // README
        use memlane::{LlamaCppLlm, Memory};
        use std::sync::Arc;

        // cargo add memlane --features llama
        let llm = Arc::new(LlamaCppLlm::load_default()?);
        let memory = Memory::builder().path("agent.db").llm(llm).build().await?;
        // END README
        let llm = memory.llm().expect("the memory has the model");
        println!("MODEL {}", llm.model_id());
        Ok(())
    }
    example().await.unwrap();
}
