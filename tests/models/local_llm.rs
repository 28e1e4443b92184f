//! The local language model (Qwen2.5 1.5B, GGUF on candle) end to end: its tokenizer, and
//! `add` with inference → `search` through the real embedder, index and SQLite file.
//! Needs `scripts/fetch-models.sh` (run by `scripts/test.sh`).
#![cfg(all(feature = "local-llm", feature = "local-embed"))]

use std::sync::{Arc, OnceLock};

use memlane::config::DEFAULT_LABELS;
use memlane::llm::ChatRequest;
use memlane::progress::Task;
use memlane::record::HistoryEvent;
use memlane::{Llm, LocalLlm, LocalLlmStats, Memory, Message, MiniLm};

#[path = "../../examples/eval_extraction/cases.rs"]
pub(crate) mod cases;

/// The model, loaded once for the binary, with the progress its load reported.
fn loaded() -> &'static (LocalLlm, crate::common::Reports) {
    static MODEL: OnceLock<(LocalLlm, crate::common::Reports)> = OnceLock::new();
    MODEL.get_or_init(|| {
        let reports = crate::common::Reports::default();
        let model = LocalLlm::load_default_with_progress(reports.callback())
            .unwrap_or_else(|e| panic!("{e}"));
        (model, reports)
    })
}

fn llm() -> LocalLlm {
    loaded().0.clone()
}

#[test]
fn loading_reports_the_check_of_every_byte_then_every_layer() {
    let reports = &loaded().1;
    let size = std::fs::metadata(LocalLlm::default_path()).unwrap().len();
    let verify = reports.of_each(Task::VerifyModel);
    assert_eq!(verify.first(), Some(&(0, size)));
    assert_eq!(verify.last(), Some(&(size, size)));
    // One report per 64 MiB read, besides the first and the last.
    assert!(verify.len() >= (size >> 26) as usize, "{verify:?}");
    // Qwen2.5 1.5B has 28 layers: a report as each begins, and one at the end.
    let load = reports.of_each(Task::LoadModel);
    assert_eq!(load, (0..=28).map(|i| (i, 28)).collect::<Vec<_>>());
}

/// A memory in `dir` on the real embedder and the shared model. The model reads the fixed
/// part of `add`'s prompts (default labels) once for the binary, before the first such
/// memory is handed out: each test then reads only its own conversations, and two tests
/// never read the same instructions at once.
async fn memory(dir: &tempfile::TempDir) -> Memory {
    static WARM: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    let memory = Memory::builder()
        .path(dir.path().join("m.db"))
        .embedder(Arc::new(MiniLm::load_default().unwrap()))
        .llm(Arc::new(llm()))
        .build()
        .await
        .unwrap();
    WARM.get_or_init(|| async { memory.warm_up().await.unwrap() })
        .await;
    memory
}

#[test]
fn the_tokenizer_built_from_the_gguf_round_trips_and_knows_chatml() {
    let model = llm();
    let tokenizer = model.tokenizer();
    for text in [
        "Hello, world!",
        "Él vive en São Paulo desde 2019 — ¿y tú?",
        "東京に住んでいます。",
        "  leading spaces\n\ttabs\r\nand {\"json\": [1, 2.5, null]}",
    ] {
        let ids = tokenizer.encode(text, false).unwrap();
        assert_eq!(tokenizer.decode(ids.get_ids(), false).unwrap(), text);
    }
    // Control tokens are one token each, not spelled out.
    let ids = tokenizer
        .encode("<|im_start|>user\nhi<|im_end|>", false)
        .unwrap();
    assert_eq!(
        ids.get_ids()[0],
        tokenizer.token_to_id("<|im_start|>").unwrap()
    );
    assert_eq!(
        *ids.get_ids().last().unwrap(),
        tokenizer.token_to_id("<|im_end|>").unwrap()
    );
    // Qwen2's split keeps digits apart, so "2026" is four tokens.
    assert_eq!(tokenizer.encode("2026", false).unwrap().get_ids().len(), 4);
}

#[tokio::test]
async fn the_model_answers_a_json_request() {
    let model = llm();
    let reply = model
        .chat(
            ChatRequest::new(vec![
                Message::new("system", "Reply with only JSON."),
                Message::user(r#"Give {"capital": <the capital of France>}."#),
            ])
            .json(true)
            .max_tokens(20),
        )
        .await
        .unwrap();
    let value: serde_json::Value = serde_json::from_str(&reply.text).unwrap();
    assert_eq!(value["capital"], "Paris", "{}", reply.text);
    assert!(reply.usage.prompt_tokens > 10);
    assert!(reply.usage.completion_tokens > 0 && reply.usage.completion_tokens <= 20);
}

/// A reply with a schema can only be what the schema allows, whatever the model would have
/// written: here the answer the model gives unconstrained (Paris) is not among the values
/// allowed. The keys are forced, so they are read rather than written.
#[tokio::test]
async fn a_reply_with_a_schema_is_decoded_under_it() {
    // A pass per token written, so that passes count what the schema forces.
    let model = private_llm().prompt_lookup(false);
    let request = ChatRequest::new(vec![
        Message::new("system", "Reply with only JSON."),
        Message::user(r#"Give {"capital": <the capital of France>, "rank": <1, 2 or 3>}."#),
    ])
    .schema(serde_json::json!({
        "type": "object",
        "properties": {
            "capital": {"enum": ["Lyon", "Marseille"]},
            "rank": {"type": "integer", "minimum": 1, "maximum": 3}
        },
        "required": ["capital", "rank"],
        "additionalProperties": false
    }))
    .max_tokens(24);

    let free = model
        .clone()
        .constrained(false)
        .chat(request.clone())
        .await
        .unwrap();
    assert!(free.text.contains("Paris"), "{}", free.text);
    let after_free = model.stats();
    assert_eq!(after_free.forced_tokens, 0);

    let reply = model.chat(request.clone()).await.unwrap();
    let value: serde_json::Value =
        serde_json::from_str(&reply.text).unwrap_or_else(|e| panic!("{e}: {}", reply.text));
    let object = value.as_object().unwrap();
    assert_eq!(object.len(), 2, "{}", reply.text);
    assert!(
        ["Lyon", "Marseille"].contains(&value["capital"].as_str().unwrap()),
        "{}",
        reply.text
    );
    assert!(
        (1..=3).contains(&value["rank"].as_i64().unwrap()),
        "{}",
        reply.text
    );
    assert!(reply.text.starts_with("{\"capital\": \""), "{}", reply.text);
    let stats = model.stats();
    assert!(stats.forced_tokens >= 2, "{stats:?}");
    assert_eq!(
        reply.usage.completion_tokens,
        stats.written_tokens - free.usage.completion_tokens
    );
    // Unconstrained, each token written took a pass over the model; under the schema, the
    // forced keys were read with the tokens before them (or with the prompt).
    assert_eq!(
        free.usage.completion_tokens, after_free.passes,
        "{after_free:?}"
    );
    let passes = stats.passes - after_free.passes;
    assert!(
        passes + 4 <= reply.usage.completion_tokens,
        "{passes} passes for {} tokens",
        reply.usage.completion_tokens
    );
    // Forced tokens count against the reply's budget like any other, wherever it ends:
    // with a budget of 1 the forced opening alone (`capital":`, two tokens) is cut.
    for budget in 1..=5 {
        let cut = model
            .chat(request.clone().max_tokens(budget))
            .await
            .unwrap();
        assert_eq!(
            cut.usage.completion_tokens,
            u64::from(budget),
            "{}",
            cut.text
        );
        assert!(cut.text.starts_with("{\"capital"), "{}", cut.text);
    }
}

/// Held-out conversations of the extraction evaluation (`examples/eval_extraction`) that the
/// suite runs through the real model: short ones, so that the suite stays fast. The
/// evaluation itself runs every conversation, by hand.
const HELD_OUT_IN_SUITE: [&str; 2] = ["pref-late-calls", "corr-flight-number"];

/// `add` with inference end to end, through the real model, embedder, index and SQLite
/// file: each conversation keeps its facts and nothing else (the evaluation's own rule),
/// and search then finds a fact by its meaning.
#[tokio::test]
async fn held_out_extraction_cases_keep_their_facts_and_search_finds_them() {
    let cases: Vec<cases::Case> = cases::Set::HeldOut
        .cases()
        .into_iter()
        .filter(|c| HELD_OUT_IN_SUITE.contains(&c.id.as_str()))
        .collect();
    assert_eq!(cases.len(), HELD_OUT_IN_SUITE.len());
    let dir = tempfile::tempdir().unwrap();
    let memory = memory(&dir).await;
    let reused_before = llm().stats().reused_tokens;
    let mut labelled = 0;
    for case in &cases {
        let kept = add_case(&memory, case).await;
        let score = cases::Score::of(&kept, &case.facts, &case.stale);
        assert_eq!(
            (score.facts_stated, score.memories_stating_a_fact),
            (score.facts, score.memories),
            "{}: {kept:?}",
            case.id
        );
        for m in memory.list().user(case.id.as_str()).await.unwrap().results {
            assert!(m.metadata.get("core").is_some(), "{m:?}");
            // Labels come from the taxonomy (here the default one), which the schema
            // lists: the model picks among them.
            assert!(
                m.categories
                    .iter()
                    .all(|c| DEFAULT_LABELS.iter().any(|(name, _)| name == c)),
                "{m:?}"
            );
            labelled += usize::from(!m.categories.is_empty());
        }
    }
    assert!(labelled > 0, "no memory was labelled");
    // Extraction's instructions and worked examples are the same in every add (the date
    // comes with the conversation): the model read them once, and each extraction starts
    // from them (508 prompt tokens with the default labels).
    let reused = llm().stats().reused_tokens - reused_before;
    assert!(reused >= 400, "{reused} prompt tokens reused");
    // Across both conversations' memories, a question finds its answer by meaning.
    let hits = memory
        .search("Which plane am I taking home?")
        .top_k(1)
        .await
        .unwrap();
    assert!(
        hits.results[0].record.memory.contains("2940"),
        "{:?}",
        hits.results
    );
}

/// The quickstart's move, through the real model: "I live in Madrid" is superseded by the
/// move to Valencia, in one extraction and one judgement; the job stays current; Madrid is
/// still there, its history kept, and is where Carlos lived as of before the move.
#[tokio::test]
async fn the_quickstarts_move_supersedes_the_old_home_and_keeps_it_as_history() {
    let dir = tempfile::tempdir().unwrap();
    let memory = memory(&dir).await;
    let before = chrono::Utc::now() - chrono::Duration::days(90);
    let first = vec![
        Message::user("Hi, I'm Carlos. I live in Madrid and I work as a nurse."),
        Message::assistant("Nice to meet you, Carlos!"),
    ];
    memory
        .add(first)
        .user("carlos")
        .timestamp(before)
        .await
        .unwrap();
    let moved = memory
        .add("Big news: I moved to Valencia last month!")
        .user("carlos")
        .await
        .unwrap();
    let superseded: Vec<_> = moved
        .results
        .iter()
        .filter(|r| r.event == HistoryEvent::Supersede)
        .collect();
    assert_eq!(superseded.len(), 1, "{:?}", moved.results);
    assert!(superseded[0].memory.contains("Madrid"), "{superseded:?}");
    let kept = texts(&memory, "carlos").await;
    assert!(!kept.iter().any(|m| m.contains("Madrid")), "{kept:?}");
    assert!(kept.iter().any(|m| m.contains("Valencia")), "{kept:?}");
    assert!(kept.iter().any(|m| m.contains("nurse")), "{kept:?}");
    let then: Vec<String> = memory
        .list()
        .user("carlos")
        .as_of(before)
        .await
        .unwrap()
        .results
        .into_iter()
        .map(|r| r.memory)
        .collect();
    assert!(then.iter().any(|m| m.contains("Madrid")), "{then:?}");
    assert!(!then.iter().any(|m| m.contains("Valencia")), "{then:?}");
    let history = memory.history(superseded[0].id).await.unwrap();
    assert_eq!(
        history.last().map(|h| h.event),
        Some(HistoryEvent::Supersede)
    );
}

/// Runs a labelled conversation's adds for its user, each at its time, and returns the
/// user's live memories. Shared with the llama.cpp provider's tests.
pub(crate) async fn add_case(memory: &Memory, case: &cases::Case) -> Vec<String> {
    add_case_changing(memory, case).await.0
}

/// [`add_case`], with the memories its adds changed (superseded): (id, event).
pub(crate) async fn add_case_changing(
    memory: &Memory,
    case: &cases::Case,
) -> (Vec<String>, Vec<(uuid::Uuid, HistoryEvent)>) {
    let mut changed = Vec::new();
    for turn in &case.turns {
        let messages: Vec<Message> = turn
            .messages
            .iter()
            .map(|(role, text)| Message::new(role.as_str(), text.as_str()))
            .collect();
        let out = memory
            .add(messages)
            .user(case.id.as_str())
            .timestamp(turn.at)
            .await
            .unwrap();
        changed.extend(
            out.results
                .into_iter()
                .filter(|r| r.event != HistoryEvent::Add)
                .map(|r| (r.id, r.event)),
        );
    }
    (texts(memory, &case.id).await, changed)
}

/// The texts of a user's live memories.
async fn texts(memory: &Memory, user: &str) -> Vec<String> {
    memory
        .list()
        .user(user)
        .await
        .unwrap()
        .results
        .into_iter()
        .map(|r| r.memory)
        .collect()
}

fn private_llm() -> LocalLlm {
    LocalLlm::from_gguf(LocalLlm::default_path(), "qwen2.5-private").unwrap()
}

/// The tokens of a prompt, as the model counts them (its usage).
async fn prompt_tokens(llm: &LocalLlm, request: ChatRequest) -> u64 {
    llm.chat(request.max_tokens(1))
        .await
        .unwrap()
        .usage
        .prompt_tokens
}

#[tokio::test]
async fn a_call_starts_from_the_instructions_an_earlier_call_read_and_answers_the_same() {
    let llm = private_llm();
    let system = "You are a terse assistant. Answer every question with one or two words, \
                  in lowercase, without punctuation, without explanations, and without \
                  repeating the question. If you do not know, answer unknown.";
    let ask = |question: &str| {
        ChatRequest::new(vec![
            Message::new("system", system),
            Message::user(question),
        ])
        .max_tokens(6)
    };
    let first = llm.chat(ask("What colour is the sky?")).await.unwrap();
    assert_eq!(llm.stats().reused_tokens, 0, "nothing was read before");
    let again = llm.chat(ask("What colour is the sky?")).await.unwrap();
    assert_eq!(again.text, first.text, "reusing the prefix changes nothing");
    // The system message's tokens, through its `<|im_end|>`: the prompt less the user
    // message and the reply's header (a prompt without a system message) and the newline
    // between the two messages.
    let without_system = prompt_tokens(
        &llm,
        ChatRequest::new(vec![Message::user("What colour is the sky?")]),
    )
    .await;
    let system_tokens = first.usage.prompt_tokens - without_system - 1;
    assert!(system_tokens > 30, "{system_tokens}");
    let stats = llm.stats();
    assert_eq!(stats.reused_tokens, system_tokens, "{stats:?}");
    // Another question with the same instructions reads only itself.
    let other = llm.chat(ask("What is frozen water called?")).await.unwrap();
    assert!(other.text.to_lowercase().contains("ice"), "{}", other.text);
    assert_eq!(llm.stats().reused_tokens, 2 * system_tokens);
    // A worked example after the instructions is kept with them: everything before the
    // chat's last message is read once, and reused only whole (the instructions alone,
    // kept above, are not a start to build on).
    let with_example = |question: &str| {
        ChatRequest::new(vec![
            Message::new("system", system),
            Message::user("What colour is grass?"),
            Message::assistant("green"),
            Message::user(question),
        ])
        .max_tokens(6)
    };
    let before = llm.stats().reused_tokens;
    llm.chat(with_example("What colour is snow?"))
        .await
        .unwrap();
    assert_eq!(llm.stats().reused_tokens, before);
    let before = llm.stats().reused_tokens;
    llm.chat(with_example("What is frozen water called?"))
        .await
        .unwrap();
    let reused = llm.stats().reused_tokens - before;
    assert!(reused > system_tokens + 10, "{reused} of {system_tokens}");
    assert_eq!(llm.stats().calls, 6);
}

#[tokio::test]
async fn dropping_a_call_stops_it_before_its_next_token() {
    let llm = private_llm();
    let counted = llm.clone();
    dropping_a_call_stops_it(Arc::new(llm), move || counted.stats().written_tokens).await;
}

#[tokio::test]
async fn a_reply_that_copies_its_prompt_is_read_ahead_and_comes_out_the_same() {
    let llm = private_llm();
    let counted = llm.clone();
    a_copying_reply_is_read_ahead(
        Arc::new(llm.clone().prompt_lookup(true)),
        Arc::new(llm),
        move || counted.stats(),
    )
    .await;
}

/// A reply that copies the user's words: with prompt lookup (`on`), most of it is guessed
/// and read ahead, in fewer passes than a pass per token (`off`, the same model), and the
/// reply is the same. `stats` counts for both. Shared with the llama.cpp provider's tests.
pub(crate) async fn a_copying_reply_is_read_ahead(
    on: Arc<dyn Llm>,
    off: Arc<dyn Llm>,
    stats: impl Fn() -> LocalLlmStats,
) {
    let request = ChatRequest::new(vec![
        Message::new(
            "system",
            "Copy the user's message into the JSON field text, word for word.",
        ),
        Message::user(
            "My sister Ingrid moved to Malmö in 2019 and teaches maths at a school near the \
             harbour.",
        ),
    ])
    .schema(serde_json::json!({
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": false
    }))
    .max_tokens(48);
    let before = stats();
    let plain = off.chat(request.clone()).await.unwrap();
    let between = stats();
    let looked = on.chat(request).await.unwrap();
    let after = stats();
    assert!(plain.text.contains("teaches maths"), "{}", plain.text);
    assert_eq!(looked.text, plain.text);
    assert_eq!(between.guessed, before.guessed);
    let right = after.guessed_right - between.guessed_right;
    let (passes_off, passes_on) = (
        between.passes - before.passes,
        after.passes - between.passes,
    );
    assert!(right >= 10, "{right} guesses right: {after:?}");
    assert!(
        passes_on + 10 <= passes_off,
        "{passes_on} passes against {passes_off}"
    );
}

#[tokio::test]
async fn a_second_question_about_a_message_reads_only_itself() {
    let llm = private_llm();
    let counted = llm.clone();
    a_second_question_reads_only_itself(Arc::new(llm), move || counted.stats().reused_tokens, true)
        .await;
}

/// A request that keeps its note (a last message that is a note, then a question about it
/// on its last line, as a caller asks two questions of one text)
/// keeps the note apart from the prefixes: the next question about it reads only itself,
/// and the reply is the one the question gets when the note is read anew. `reused` counts the prompt tokens reused. A
/// plain call on the same instructions keeps the note in candle's cache (`outlived`), not
/// in llama.cpp's, where the call reads over it. Shared with the llama.cpp provider's tests.
pub(crate) async fn a_second_question_reads_only_itself(
    llm: Arc<dyn Llm>,
    reused: impl Fn() -> u64,
    outlived: bool,
) {
    let system = "Answer with one word, in lowercase, without punctuation.";
    let about = |note: &str, question: &str| {
        ChatRequest::new(vec![
            Message::new("system", system),
            Message::user(format!("{note}\n{question}")),
        ])
        .max_tokens(4)
        .keep_note(true)
    };
    let note = "The meeting with Ana and Jon is on Tuesday in the blue room.";
    let other = "The party is on Friday at the old boathouse by the river.";
    // The instructions, read and kept by a question about another note.
    llm.chat(about(other, "Which day?")).await.unwrap();
    let read = |request: ChatRequest| {
        let llm = llm.clone();
        let before = reused();
        async move {
            let reply = llm.chat(request).await.unwrap();
            (reply.text, before)
        }
    };
    let (day, before) = read(about(note, "Which day?")).await;
    let instructions = reused() - before;
    assert!(instructions > 10, "{instructions}");
    let (colour, before) = read(about(note, "Which colour is the room?")).await;
    let with_note = reused() - before;
    assert!(
        with_note >= instructions + 12,
        "{with_note} reused, {instructions} of them the instructions"
    );
    assert!(day.to_lowercase().contains("tuesday"), "{day}");
    assert!(colour.to_lowercase().contains("blue"), "{colour}");
    // After a plain question on the same instructions.
    let plain = ChatRequest::new(vec![
        Message::new("system", system),
        Message::user("What colour is the sky?"),
    ])
    .max_tokens(4);
    llm.chat(plain).await.unwrap();
    let (again, before) = read(about(note, "Which colour is the room?")).await;
    let expected = if outlived { with_note } else { instructions };
    assert_eq!(reused() - before, expected);
    assert_eq!(again, colour);
    // Another note takes the kept one's place: the note is read anew, with the same reply.
    llm.chat(about(other, "Which day?")).await.unwrap();
    let (anew, before) = read(about(note, "Which colour is the room?")).await;
    assert_eq!(reused() - before, instructions);
    assert_eq!(anew, colour);
}

/// Drops a call once it has written a few tokens (`written` counts the model's tokens): it
/// stops before its next token, and the next call waits for it, then writes its own. Shared
/// with the llama.cpp provider's tests.
pub(crate) async fn dropping_a_call_stops_it(llm: Arc<dyn Llm>, written: impl Fn() -> u64) {
    let count = ChatRequest::new(vec![Message::user(
        "Count from 1 to 100 in words, one number per line.",
    )])
    .max_tokens(300);
    let call = tokio::spawn({
        let llm = llm.clone();
        async move { llm.chat(count).await }
    });
    // Wait until it writes (bounded: a prompt this short is read in a few seconds).
    let mut waited = 0;
    while written() < 3 {
        assert!(waited < 1200, "the call never started writing");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        waited += 1;
    }
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    let at_drop = written();
    // The next call waits for the dropped one to end, and writes one token of its own.
    let next = llm
        .chat(ChatRequest::new(vec![Message::user("Say yes.")]).max_tokens(1))
        .await
        .unwrap();
    assert_eq!(next.usage.completion_tokens, 1);
    let after = written();
    assert!(
        after <= at_drop + 2,
        "{} tokens written after the call was dropped",
        after - at_drop - 1
    );
}
