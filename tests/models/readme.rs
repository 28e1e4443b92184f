//! The README's examples run as written: each test below holds one of its code blocks
//! between `// README` and `// END README`, and first checks that the README still has that
//! block, line for line. They run on the README's default configuration (the local
//! MiniLM, SQLite files, no language model).
#![cfg(feature = "local-embed")]

use std::time::Duration;

use memlane::{Memory, Message};

use crate::common::{check_readme_has, quoted};

/// Runs the test `name` of this binary in a child process working in `dir` (the README's
/// paths are relative), and returns what it printed (standard output, then error).
pub(crate) fn run_in(dir: &std::path::Path, name: &str) -> String {
    run_with(dir, name, &[])
}

/// [`run_in`], with these environment variables set.
fn run_with(dir: &std::path::Path, name: &str, env: &[(&str, &str)]) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .envs(env.iter().copied())
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .current_dir(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}{errors}");
    format!("{text}{errors}")
}

#[test]
fn the_readmes_projects_example_runs_as_written() {
    check_readme_has(&quoted(include_str!("readme.rs"), 0));
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), "readme::projects_example");
    assert!(
        out.contains("give this to Acme, it is shown once: mlk_"),
        "{out}"
    );
    assert!(out.contains("REVOKED 401"), "{out}");
    assert!(dir.path().join("tenants").join("registry.db").exists());
}

#[tokio::test]
#[ignore = "run by the_readmes_projects_example_runs_as_written, in a directory of its own"]
async fn projects_example() {
    async fn example() -> memlane::Result<()> {
        // README
        use memlane::Projects;

        let projects = Projects::open("tenants").await?; // builder: embedder, llm, …
        let acme = projects.create_project("Acme support bot").await?;
        let key = projects.create_key(&acme.id, "production").await?;
        println!("give this to Acme, it is shown once: {}", key.key); // mlk_<id>_<secret>

        // In the request handler, with the request's Authorization header:
        let authorization = format!("Token {}", key.key);
        let memory = projects.authenticate(&authorization).await?; // 401 if missing, malformed, unknown or revoked
        memory
            .add("I'm allergic to peanuts")
            .user("customer-42")
            .await?;

        projects.revoke_key(&key.info.id).await?; // the key stops working at once
                                                  // END README
        let stored = memory.list().user("customer-42").await?;
        assert_eq!(stored.results[0].memory, "I'm allergic to peanuts");
        let refused = projects.authenticate(&authorization).await.unwrap_err();
        println!("REVOKED {}", refused.status());
        Ok(())
    }
    example().await.unwrap();
}

#[tokio::test]
async fn the_readmes_events_example_runs_as_written() {
    check_readme_has(&quoted(include_str!("readme.rs"), 1));
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::open(dir.path().join("events.db")).await.unwrap();
    memory
        .add(vec![
            Message::user("I like tea"),
            Message::user("I like rain"),
        ])
        .user("alice")
        .await
        .unwrap();
    let mut saved_cursor = 0;
    let mut seen = 0;
    // The example follows the log for ever: it is stopped once it has had its time.
    let example = async {
        // README
        use futures_util::StreamExt;

        let page = memory.events_after(0, 100).await?; // polling: a page after a cursor
        let mut events = std::pin::pin!(memory.events(saved_cursor)); // replay, then follow live
        while let Some(event) = events.next().await {
            let event = event?;
            println!("{:?} {:?} {:?}", event.kind, event.memory_id, event.memory); // memory_add, …
            saved_cursor = event.cursor; // persist it to resume later
                                         // END README
            seen += 1;
            assert_eq!(page.results.len(), 2);
        }
        Ok::<_, memlane::Error>(())
    };
    let stopped = tokio::time::timeout(Duration::from_secs(2), example).await;
    assert!(
        stopped.is_err(),
        "the stream follows live until it is dropped"
    );
    assert_eq!(seen, 2);
    assert!(saved_cursor > 0);
}

#[test]
fn the_readmes_zero_download_example_runs_as_written() {
    check_readme_has(&quoted(include_str!("readme.rs"), 2));
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), "readme::zero_download_example");
    // (The harness prints the test's name on the line of its first output.)
    let lines: Vec<&str> = out
        .lines()
        .filter_map(|l| l.find("by its").map(|at| &l[at..]))
        .collect();
    let memory = "I'm vegetarian and I can't stand coriander";
    assert_eq!(
        lines,
        [
            format!("by its words: {memory}"),
            format!("by its meaning: {memory}")
        ]
    );
    assert!(dir.path().join("notes.db").exists());
}

#[tokio::test]
#[ignore = "run by the_readmes_zero_download_example_runs_as_written, in a directory of its own"]
async fn zero_download_example() {
    async fn example() -> memlane::Result<()> {
        // README
        use memlane::{Memory, MiniLm};
        use std::sync::Arc;

        // No model file: verbatim adds, keyword search.
        let memory = Memory::builder()
            .path("notes.db")
            .without_embedder()
            .build()
            .await?;
        memory
            .add("I'm vegetarian and I can't stand coriander")
            .user("alice")
            .await?;
        let hits = memory.search("coriander").user("alice").await?;
        println!("by its words: {}", hits.results[0].record.memory);

        // Later: search by meaning too. Every memory is embedded, with progress.
        memory
            .reembed(Arc::new(MiniLm::load_default()?))
            .on_progress(|p| eprintln!("{} {}/{}", p.task, p.done, p.total))
            .await?;
        let hits = memory
            .search("what food should I avoid serving her?")
            .user("alice")
            .await?;
        println!("by its meaning: {}", hits.results[0].record.memory);
        // END README
        assert!(memory.embedder().is_some());
        // Found by meaning alone: the query shares no word with the memory.
        let by_meaning = memory
            .search("what food should I avoid serving her?")
            .user("alice")
            .mode(memlane::SearchMode::Vector)
            .await?;
        assert_eq!(by_meaning.results.len(), 1);
        Ok(())
    }
    example().await.unwrap();
}

#[cfg(feature = "local-llm")]
#[test]
fn the_readmes_language_model_example_runs_as_written() {
    check_readme_has(&quoted(include_str!("readme.rs"), 3));
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), "readme::language_model_example");
    let added: Vec<&str> = out
        .lines()
        .filter_map(|l| l.find("ADD ").map(|at| &l[at..]))
        .collect();
    assert!(
        added
            .iter()
            .any(|l| l.to_lowercase().contains("vegetarian")),
        "{out}"
    );
    assert!(out.contains("CONFIGURED"), "{out}");
}

#[cfg(feature = "local-llm")]
#[tokio::test]
#[ignore = "run by the_readmes_language_model_example_runs_as_written, in a directory of its own"]
async fn language_model_example() {
    async fn example() -> memlane::Result<()> {
        // README
        use memlane::{LocalLlm, Memory, Message};
        use serde_json::json;
        use std::sync::Arc;

        // In process, offline (feature `local-llm`, on by default).
        let llm = Arc::new(LocalLlm::load_default()?);
        let memory = Memory::builder().path("agent.db").llm(llm).build().await?;
        memory.put_config(&json!({
            "extraction_policy": "Keep food preferences and travel plans; never store health data.",
            "label_taxonomy": [{"food": "diet and dishes"}, {"travel": "trips and places"}]
        })).await?;
        let messages = vec![
            Message::user("I'm vegetarian, and I fly to Lisbon on Friday"),
            Message::assistant("Noted! Enjoy Lisbon."),
        ];
        let out = memory.add(messages).user("alice").await?; // infers: the memory has a model
        for m in &out.results {
            println!("{} {}", m.event.as_str(), m.memory); // ADD, or SUPERSEDE for a memory it ended
        }
        // END README
        assert!(out.inferred);
        let config = memory.config().await?;
        assert_eq!(config.labels().len(), 2);
        println!("CONFIGURED");
        Ok(())
    }
    example().await.unwrap();
}

#[cfg(feature = "openai")]
#[test]
fn the_readmes_server_example_runs_as_written() {
    check_readme_has(&quoted(include_str!("readme.rs"), 4));
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), "readme::server_example");
    assert!(out.contains("MODEL qwen2.5:7b-instruct"), "{out}");
}

#[cfg(feature = "openai")]
#[tokio::test]
#[ignore = "run by the_readmes_server_example_runs_as_written, in a directory of its own"]
async fn server_example() {
    async fn example() -> memlane::Result<()> {
        // README
        use memlane::{Memory, OpenAiConfig, OpenAiLlm};
        use std::sync::Arc;

        let config = OpenAiConfig::from_env("qwen2.5:7b-instruct");
        let llm = Arc::new(OpenAiLlm::new(config)?);
        let memory = Memory::builder().path("agent.db").llm(llm).build().await?;
        // END README
        // Building asks the server nothing; the loopback server tests (tests/api/openai.rs)
        // cover the calls.
        let llm = memory.llm().expect("the memory has the server's model");
        println!("MODEL {}", llm.model_id());
        Ok(())
    }
    example().await.unwrap();
}

#[cfg(all(feature = "rig", feature = "local-llm"))]
#[test]
fn the_readmes_offline_rig_agent_runs_as_written() {
    check_readme_has(&quoted(include_str!("readme.rs"), 5));
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), "readme::offline_rig_agent");
    // The harness prints the test's name on the line of the first output.
    let answer = out
        .lines()
        .find_map(|l| l.split_once("ANSWER "))
        .map(|(_, a)| a.to_lowercase())
        .expect("an answer");
    // Greedy decoding, so always the same reply: it names what Alice's memory says to
    // avoid (without her memories the model suggests avoiding "spicy or strong-tasting
    // foods").
    assert!(
        ["coriander", "cilantro", "meat"]
            .iter()
            .any(|w| answer.contains(w)),
        "{answer}"
    );
}

#[cfg(all(feature = "rig", feature = "local-llm"))]
#[tokio::test]
#[ignore = "run by the_readmes_offline_rig_agent_runs_as_written, in a directory of its own"]
async fn offline_rig_agent() {
    async fn example() -> Result<(), Box<dyn std::error::Error>> {
        // README
        use memlane::rig::{completion_model, rig_agent::AgentBuilder, MemoryIndex};
        use memlane::{LocalLlm, Memory};
        use std::sync::Arc;

        let memory = Memory::open("agent.db").await?;
        let food = "I'm vegetarian and I can't stand coriander.";
        memory.add(food).user("alice").infer(false).await?;
        memory
            .add("I love steak tartare.")
            .user("bob")
            .infer(false)
            .await?;

        // The local model answers, with Alice's most relevant memories recalled first.
        let llm = Arc::new(LocalLlm::load_default()?);
        let agent = AgentBuilder::new(completion_model(llm))
            .preamble("You are Alice's assistant. Answer in one short sentence.")
            .dynamic_context(2, MemoryIndex::new(memory.clone()).user("alice"))
            .max_tokens(24)
            .build();
        let answer = agent
            .prompt("What food should I avoid serving Alice at dinner?")
            .await?;
        println!("{}", answer.output());
        // END README
        println!("ANSWER {}", answer.output().replace('\n', " "));
        Ok(())
    }
    example().await.unwrap();
}

#[cfg(all(feature = "rig", feature = "openai"))]
#[test]
fn the_readmes_rig_tools_example_runs_as_written() {
    check_readme_has(&quoted(include_str!("readme.rs"), 6));
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens there: building the agent asks the server nothing (the loopback
    // server tests in tests/api/rig.rs cover the calls).
    let env = [
        ("OPENAI_API_KEY", "sk-test"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
    ];
    let out = run_with(dir.path(), "readme::rig_tools_example", &env);
    assert!(out.contains("AGENT BUILT"), "{out}");
}

#[cfg(all(feature = "rig", feature = "openai"))]
#[tokio::test]
#[ignore = "run by the_readmes_rig_tools_example_runs_as_written, in a directory of its own"]
async fn rig_tools_example() {
    async fn example() -> Result<(), Box<dyn std::error::Error>> {
        // README
        use memlane::rig::rig_agent::AgentBuilder;
        use memlane::rig::rig_core::providers::openai::OpenAIConfig;
        use memlane::rig::{MemoryIndex, RecallTool, RememberTool};
        use memlane::Memory;

        let memory = Memory::open("agent.db").await?;
        let model = OpenAIConfig::from_env()?.client().chat("gpt-4o-mini");
        let agent = AgentBuilder::new(model)
            .preamble("You are Alice's assistant. Remember what you learn about her.")
            .dynamic_context(5, MemoryIndex::new(memory.clone()).user("alice"))
            .tool(RememberTool::new(memory.clone()).user("alice"))
            .tool(RecallTool::new(memory.clone()).user("alice"))
            .default_max_turns(5)
            .build();
        // END README
        let _ = agent;
        println!("AGENT BUILT");
        Ok(())
    }
    example().await.unwrap();
}

#[cfg(feature = "local-llm")]
#[test]
fn the_readmes_progress_example_runs_as_written() {
    check_readme_has(&quoted(include_str!("readme.rs"), 7));
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), "readme::progress_example");
    let size = std::fs::metadata(memlane::LocalLlm::default_path())
        .unwrap()
        .len();
    for line in [
        "verifying model: 0 of {size} bytes".replace("{size}", &size.to_string()),
        format!("verifying model: {size} of {size} bytes"),
        "loading model: 28 of 28 layers".to_owned(),
    ] {
        assert!(out.contains(&line), "{line:?} not in {out}");
    }
}

#[cfg(feature = "local-llm")]
#[tokio::test]
#[ignore = "run by the_readmes_progress_example_runs_as_written, in a process of its own"]
async fn progress_example() {
    fn example() -> memlane::Result<()> {
        // README
        use memlane::LocalLlm;

        let llm = LocalLlm::load_default_with_progress(|p| {
            eprintln!("{}: {} of {} {}", p.task, p.done, p.total, p.task.unit());
        })?;
        // END README
        drop(llm);
        Ok(())
    }
    example().unwrap();
}

#[test]
fn the_readmes_tracing_example_runs_as_written() {
    check_readme_has(&quoted(include_str!("readme.rs"), 8));
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), "readme::tracing_example");
    // Each operation's span closes with its timings (INFO), and so do its children (DEBUG).
    let closed = |span: &str| {
        out.lines()
            .any(|l| l.contains(span) && l.contains("close time.busy="))
    };
    assert!(closed(" INFO search{k=10 count=1}: memlane:"), "{out}");
    assert!(closed(" INFO add{count=1}: memlane:"), "{out}");
    assert!(closed(" DEBUG search{k=10}:embed{texts=1}:"), "{out}");
    // No memory text or query in the spans.
    assert!(!out.contains("coriander"), "{out}");
}

#[tokio::test]
#[ignore = "run by the_readmes_tracing_example_runs_as_written, in a process of its own"]
async fn tracing_example() {
    // README
    // With tracing-subscriber (features `fmt` and `env-filter`):
    tracing_subscriber::fmt()
        .with_env_filter("memlane=debug")
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .init();
    // END README
    let memory = Memory::open("traced.db").await.unwrap();
    memory
        .add("I can't stand coriander")
        .user("alice")
        .infer(false)
        .await
        .unwrap();
    memory.search("coriander").user("alice").await.unwrap();
}
