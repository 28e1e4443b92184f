//! Tracing: every public operation runs in a span of its own (target `memlane`) naming the
//! project and what it returned, with the model, embedding and storage work as child
//! spans, and no memory text in any span.

use std::sync::{Arc, Mutex, OnceLock};
use std::thread::ThreadId;

use memlane::store::FeedbackKind;
use memlane::{Llm, Memory, Message, Projects, ScriptedLlm};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One span as the collector saw it.
#[derive(Debug, Clone)]
struct Seen {
    id: u64,
    name: &'static str,
    target: String,
    parent: Option<u64>,
    thread: ThreadId,
    fields: Vec<(String, String)>,
}

impl Seen {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
}

/// A subscriber, installed once for the whole test binary, that keeps every span with its
/// fields, its parent (explicit, or the span entered on its thread when it was made) and
/// its thread. A thread-local default would miss spans: tracing caches per call site
/// whether anyone listens, and other tests' threads reach the same call sites first.
#[derive(Default)]
struct Collector {
    spans: Mutex<Vec<(Seen, &'static Metadata<'static>)>>,
    /// Events, as spans without parents or ids: name is the event's, fields its own.
    events: Mutex<Vec<Seen>>,
}

thread_local! {
    static ENTERED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

static COLLECTOR: OnceLock<&'static Collector> = OnceLock::new();

fn collector() -> &'static Collector {
    COLLECTOR.get_or_init(|| {
        let collector: &'static Collector = Box::leak(Box::default());
        tracing::subscriber::set_global_default(Shared(collector))
            .expect("no other global subscriber in this test binary");
        collector
    })
}

/// The events sent on this thread.
fn events_of_this_thread() -> Vec<Seen> {
    let me = std::thread::current().id();
    collector()
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|seen| seen.thread == me)
        .cloned()
        .collect()
}

/// The spans made on this thread (a `current_thread` test runs all its tasks on it).
fn spans_of_this_thread() -> Vec<Seen> {
    let collector = collector();
    let me = std::thread::current().id();
    collector
        .spans
        .lock()
        .unwrap()
        .iter()
        .map(|(seen, _)| seen)
        .filter(|seen| seen.thread == me)
        .cloned()
        .collect()
}

struct Shared(&'static Collector);

impl Subscriber for Shared {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, attributes: &Attributes<'_>) -> Id {
        let mut spans = self.0.spans.lock().unwrap();
        let id = spans.len() as u64 + 1;
        let parent = match attributes.parent() {
            Some(parent) => Some(parent.into_u64()),
            None if attributes.is_contextual() => ENTERED.with(|e| e.borrow().last().copied()),
            None => None,
        };
        let mut fields = Vec::new();
        attributes.record(&mut Fields(&mut fields));
        let metadata = attributes.metadata();
        let seen = Seen {
            id,
            name: metadata.name(),
            target: metadata.target().to_owned(),
            parent,
            thread: std::thread::current().id(),
            fields,
        };
        spans.push((seen, metadata));
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.0.spans.lock().unwrap();
        let (seen, _) = &mut spans[span.into_u64() as usize - 1];
        values.record(&mut Fields(&mut seen.fields));
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Vec::new();
        event.record(&mut Fields(&mut fields));
        let metadata = event.metadata();
        self.0.events.lock().unwrap().push(Seen {
            id: 0,
            name: metadata.name(),
            target: metadata.target().to_owned(),
            parent: None,
            thread: std::thread::current().id(),
            fields,
        });
    }

    fn enter(&self, span: &Id) {
        ENTERED.with(|e| e.borrow_mut().push(span.into_u64()));
    }

    fn exit(&self, span: &Id) {
        ENTERED.with(|e| {
            let mut entered = e.borrow_mut();
            if let Some(i) = entered.iter().rposition(|&s| s == span.into_u64()) {
                entered.remove(i);
            }
        });
    }

    /// What `Span::current()` returns (the operations record their counts through it).
    fn current_span(&self) -> tracing_core::span::Current {
        match ENTERED.with(|e| e.borrow().last().copied()) {
            Some(id) => {
                let metadata = self.0.spans.lock().unwrap()[id as usize - 1].1;
                tracing_core::span::Current::new(Id::from_u64(id), metadata)
            }
            None => tracing_core::span::Current::none(),
        }
    }
}

const SECRET: &str = "coriander";

/// No field of these spans or events holds [`SECRET`], the memory text of the tests.
fn assert_no_secret(seen: &[Seen]) {
    let texts: Vec<&(String, String)> = seen
        .iter()
        .flat_map(|s| &s.fields)
        .filter(|(_, v)| v.to_lowercase().contains(SECRET))
        .collect();
    assert!(texts.is_empty(), "memory text traced: {texts:?}");
}

fn facts_reply() -> String {
    json!({"facts": [{"text": format!("Cannot stand {SECRET}"), "categories": ["food"],
                      "entities": [], "importance": 6}]})
    .to_string()
}

/// A memory in `dir` whose model gives `replies` in turn, and the add of Ana's dislike of
/// [`SECRET`] that every test here starts with (the model's first reply extracts it).
async fn ana_dislikes_the_secret(
    dir: &std::path::Path,
    replies: impl IntoIterator<Item = String>,
) -> (Memory, memlane::ops::add::AddResult) {
    let llm: Arc<dyn Llm> = Arc::new(ScriptedLlm::new(replies));
    let memory: Memory = crate::common::open_with_llm(&dir.join("m.db"), 64, Some(llm)).await;
    let added = memory
        .add(vec![Message::user(format!("I can't stand {SECRET}."))])
        .user("ana")
        .await
        .unwrap();
    (memory, added)
}

#[tokio::test(flavor = "current_thread")]
async fn every_operation_runs_in_its_span_with_its_work_below_and_no_memory_text() {
    spans_of_this_thread();
    let dir = tempfile::tempdir().unwrap();
    let (memory, added) = ana_dislikes_the_secret(dir.path(), [facts_reply()]).await;
    let id = added.results[0].id;
    memory.search(SECRET).user("ana").top_k(3).await.unwrap();
    memory.list().user("ana").await.unwrap();
    memory.get(id).await.unwrap();
    memory.history(id).await.unwrap();
    memory
        .update(id)
        .text(format!("Hates {SECRET}"))
        .await
        .unwrap();
    memory
        .feedback(id, Some(FeedbackKind::Positive), Some(SECRET))
        .await
        .unwrap();
    memory.retrieve(SECRET, "ana", 2).await.unwrap();
    memory.export().await.unwrap();
    memory.entities().await.unwrap();
    memory.events_after(0, 10).await.unwrap();
    memory.config().await.unwrap();
    memory.delete(id).await.unwrap();
    memory.delete_all().user("ana").await.unwrap();

    let spans = spans_of_this_thread();
    let op = |name: &str| -> Seen {
        let found: Vec<&Seen> = spans
            .iter()
            .filter(|s| s.name == name && s.target == "memlane" && s.parent.is_none())
            .collect();
        assert_eq!(found.len(), 1, "{name}: {spans:#?}");
        found[0].clone()
    };
    let below = |parent: &Seen, name: &str| -> Vec<Seen> {
        // Children, grandchildren and so on.
        let mut ids = vec![parent.id];
        let mut out = Vec::new();
        for s in &spans {
            if s.parent.is_some_and(|p| ids.contains(&p)) {
                ids.push(s.id);
                if s.name == name {
                    out.push(s.clone());
                }
            }
        }
        out
    };

    let add = op("add");
    assert_eq!(add.field("count"), Some("1"), "{add:?}");
    let model = below(&add, "model");
    assert_eq!(model.len(), 1, "{spans:#?}");
    assert_eq!(model[0].field("model"), Some("\"scripted\""), "{model:?}");
    assert!(
        model[0].field("prompt_tokens").is_some_and(|t| t != "0"),
        "{model:?}"
    );
    assert!(model[0].field("completion_tokens").is_some(), "{model:?}");
    assert!(!below(&add, "embed").is_empty(), "{spans:#?}");
    let commits = below(&add, "commit");
    assert_eq!(commits.len(), 1, "{spans:#?}");
    assert_eq!(below(&commits[0], "store").len(), 1, "{spans:#?}");
    assert_eq!(below(&commits[0], "index").len(), 1, "{spans:#?}");

    let search = op("search");
    assert_eq!(search.field("k"), Some("3"));
    assert_eq!(search.field("count"), Some("1"));
    assert_eq!(below(&search, "embed").len(), 1, "{spans:#?}");
    assert_eq!(below(&search, "index").len(), 1, "{spans:#?}");
    assert_eq!(below(&search, "keyword").len(), 1, "{spans:#?}");
    let retrieve = op("retrieve");
    assert_eq!(retrieve.field("k"), Some("2"));
    assert_eq!(retrieve.field("count"), Some("1"));
    assert_eq!(op("history").field("count"), Some("1"));
    assert_eq!(op("list").field("count"), Some("1"));
    assert_eq!(op("export").field("count"), Some("1"));
    assert_eq!(op("delete").field("count"), Some("1"));
    assert_eq!(op("delete_all").field("count"), Some("0"));
    for name in [
        "get",
        "update",
        "feedback",
        "entities",
        "events_after",
        "config",
    ] {
        op(name);
    }
    // A memory opened on its own names no project.
    assert_eq!(add.field("project"), None);
    assert_no_secret(&spans);
}

/// A memory opened through `Projects` names its project in every operation's span.
#[tokio::test(flavor = "current_thread")]
async fn a_projects_memory_names_its_project() {
    spans_of_this_thread();
    let dir = tempfile::tempdir().unwrap();
    let projects = Projects::builder(dir.path())
        .embedder(Arc::new(memlane::HashEmbedder::new(64)))
        .build()
        .await
        .unwrap();
    let project = projects.create_project("Kitchen").await.unwrap();
    let memory = projects.memory(&project.id).await.unwrap();
    memory.list().user("ana").await.unwrap();
    let spans = spans_of_this_thread();
    let list = spans
        .iter()
        .find(|s| s.name == "list" && s.target == "memlane")
        .unwrap_or_else(|| panic!("{spans:#?}"));
    assert_eq!(
        list.field("project"),
        Some(format!("{:?}", project.id).as_str()),
        "{list:?}"
    );
}

/// Each decision of a reconciliation is a DEBUG event naming the fact by its number and
/// the memories by id, with the fact's similar memories and their relevance: no text.
#[tokio::test(flavor = "current_thread")]
async fn reconciliation_decisions_are_events_by_id_without_text() {
    spans_of_this_thread();
    let dir = tempfile::tempdir().unwrap();
    let hates =
        json!({"facts": [{"text": format!("Cannot stand {SECRET} at all"), "categories": []}]});
    let decision = json!({"decisions": [
        {"fact": 0, "event": "UPDATE", "memory": 0, "text": format!("Cannot stand {SECRET} at all")}
    ]});
    let (memory, first) = ana_dislikes_the_secret(
        dir.path(),
        [facts_reply(), hates.to_string(), decision.to_string()],
    )
    .await;
    let second = memory
        .add(vec![Message::user(format!("I really hate {SECRET}."))])
        .user("ana")
        .await
        .unwrap();
    // The new fact supersedes the memory it was reconciled with.
    assert_eq!(second.results[1].id, first.results[0].id, "{second:?}");
    assert_eq!(
        second.results[1].event,
        memlane::record::HistoryEvent::Supersede
    );

    let events = events_of_this_thread();
    let reconciled: Vec<&Seen> = events
        .iter()
        .filter(|e| e.field("message") == Some("reconciled"))
        .collect();
    assert_eq!(reconciled.len(), 1, "{events:#?}");
    let e = reconciled[0];
    assert_eq!(e.target, "memlane");
    assert_eq!(e.field("fact"), Some("0"), "{e:?}");
    assert_eq!(e.field("event"), Some("Update"), "{e:?}");
    let id = first.results[0].id.to_string();
    assert_eq!(
        e.field("memory"),
        Some(format!("Some({id})").as_str()),
        "{e:?}"
    );
    let similar = e.field("similar").unwrap();
    assert!(similar.starts_with(&format!("[({id}, 0.")), "{similar}");
    assert_no_secret(&events);
}

/// A model reply that is rejected and asked again is a DEBUG event that says so without
/// the reply's text, even when the reason quotes it (serde names the value it refused).
#[tokio::test(flavor = "current_thread")]
async fn a_rejected_reply_is_an_event_without_its_text() {
    spans_of_this_thread();
    let dir = tempfile::tempdir().unwrap();
    let refused = json!({"facts": format!("Cannot stand {SECRET}")});
    let (_memory, added) =
        ana_dislikes_the_secret(dir.path(), [refused.to_string(), facts_reply()]).await;
    assert_eq!(added.results.len(), 1, "{added:?}");

    let events = events_of_this_thread();
    let rejected: Vec<&Seen> = events
        .iter()
        .filter(|e| e.field("message").is_some_and(|m| m.contains("rejected")))
        .collect();
    assert_eq!(rejected.len(), 1, "{events:#?}");
    assert_no_secret(&events);
}
