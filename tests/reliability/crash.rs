//! Crash safety: a child process runs a stream of mixed writes on one store and is killed
//! (SIGKILL) at a random point, over and over; after every kill the store is reopened and
//! checked:
//!
//! - every write acknowledged before the kill is there, and the one in flight is either
//!   wholly there or wholly absent (an `add` of several messages, a bulk delete);
//! - keyword search and vector search agree with the rows: each live memory is found by
//!   its own text in both modes, no deleted one is;
//! - history and the event log agree with the memories: replaying the log gives exactly the
//!   live memories, and each memory's history ends as the memory does;
//! - SQLite's and the keyword index's own integrity checks pass.
//!
//! `cargo test --test reliability crash` runs 100 kills; `MEMLANE_CRASH_KILLS=2000 cargo test --release
//! --test reliability crash` runs a longer campaign by hand.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use memlane::ops::events::EventKind;
use memlane::record::HistoryEvent;
use memlane::{Memory, Message, SearchMode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::Rng;

async fn open(dir: &Path) -> Memory {
    crate::common::open(&dir.join("m.db"), 64).await
}

const USERS: usize = 4;
const CHILD_ENV: &str = "MEMLANE_CRASH_CHILD_DIR";
const SEED_ENV: &str = "MEMLANE_CRASH_SEED";

fn user(i: usize) -> String {
    format!("user-{i}")
}

/// The child: writes until killed, announcing each operation before it starts (`BEGIN`)
/// and after it returns (`ACK`).
#[tokio::test]
#[ignore = "run by crash_campaign as a child process"]
async fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let seed: u64 = std::env::var(SEED_ENV).unwrap().parse().unwrap();
    let memory = open(Path::new(&dir)).await;
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut live: Vec<Uuid> = Vec::new();
    for u in 0..USERS {
        let page = memory
            .list()
            .user(user(u))
            .page_size(1_000)
            .include_expired(true);
        live.extend(page.await.unwrap().results.iter().map(|r| r.id));
    }
    // The parent kills only a child that got this far: one that fails to start is a
    // failure, not a kill.
    println!("READY");
    for op in 0.. {
        let u = user(rng.below(USERS));
        let step = match rng.below(12) {
            0..=4 => {
                let texts: Vec<String> = (0..1 + rng.below(3))
                    .map(|k| format!("seed {seed} op {op} part {k} for {u}"))
                    .collect();
                json!({"kind": "add", "user": u, "texts": texts})
            }
            5..=7 if !live.is_empty() => {
                let id = live[rng.below(live.len())];
                json!({"kind": "update", "id": id, "text": format!("seed {seed} op {op} revised")})
            }
            8 | 9 if !live.is_empty() => {
                json!({"kind": "delete", "id": live[rng.below(live.len())]})
            }
            10 => json!({"kind": "delete_all", "user": u}),
            _ => json!({"kind": "config", "policy": format!("policy of seed {seed} op {op}")}),
        };
        println!("BEGIN {step}");
        let done = match step["kind"].as_str().unwrap() {
            "add" => {
                let messages: Vec<Message> = step["texts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| Message::user(t.as_str().unwrap()))
                    .collect();
                let out = memory.add(messages).user(&u).infer(false).await.unwrap();
                let ids: Vec<Uuid> = out.results.iter().map(|r| r.id).collect();
                live.extend(&ids);
                json!({"ids": ids})
            }
            "update" => {
                let id: Uuid = serde_json::from_value(step["id"].clone()).unwrap();
                memory
                    .update(id)
                    .text(step["text"].as_str().unwrap())
                    .await
                    .unwrap();
                json!({})
            }
            "delete" => {
                let id: Uuid = serde_json::from_value(step["id"].clone()).unwrap();
                memory.delete(id).await.unwrap();
                live.retain(|x| *x != id);
                json!({})
            }
            "delete_all" => {
                let out = memory.delete_all().user(&u).await.unwrap();
                live.retain(|x| !out.deleted.contains(x));
                json!({"ids": out.deleted})
            }
            _ => {
                memory
                    .put_config(&json!({"extraction_policy": step["policy"]}))
                    .await
                    .unwrap();
                json!({})
            }
        };
        println!("ACK {done}");
    }
}

/// What the parent knows to be true: the acknowledged writes, replayed.
#[derive(Debug, Clone, Default, PartialEq)]
struct Model {
    /// Live memories: id → (user, text).
    live: HashMap<Uuid, (String, String)>,
    /// Every memory ever deleted.
    deleted: HashSet<Uuid>,
    policy: String,
}

impl Model {
    /// Applies one operation. `ids` are the ids the acknowledgement reported, or, for an
    /// add in flight, those found in the store.
    fn apply(&mut self, step: &Value, ids: &[Uuid]) {
        match step["kind"].as_str().unwrap() {
            "add" => {
                let user = step["user"].as_str().unwrap().to_string();
                for (id, text) in ids.iter().zip(step["texts"].as_array().unwrap()) {
                    self.live
                        .insert(*id, (user.clone(), text.as_str().unwrap().to_string()));
                }
            }
            "update" => {
                let id: Uuid = serde_json::from_value(step["id"].clone()).unwrap();
                if let Some(entry) = self.live.get_mut(&id) {
                    entry.1 = step["text"].as_str().unwrap().to_string();
                }
            }
            "delete" => {
                let id: Uuid = serde_json::from_value(step["id"].clone()).unwrap();
                if self.live.remove(&id).is_some() {
                    self.deleted.insert(id);
                }
            }
            "delete_all" => {
                let user = step["user"].as_str().unwrap();
                let gone: Vec<Uuid> = self
                    .live
                    .iter()
                    .filter(|(_, (u, _))| u == user)
                    .map(|(id, _)| *id)
                    .collect();
                for id in gone {
                    self.live.remove(&id);
                    self.deleted.insert(id);
                }
            }
            _ => self.policy = step["policy"].as_str().unwrap().to_string(),
        }
    }
}

/// The store as it is after reopening.
async fn observe(memory: &Memory) -> Model {
    let mut live = HashMap::new();
    for u in 0..USERS {
        let page = memory
            .list()
            .user(user(u))
            .page_size(1_000)
            .include_expired(true)
            .await
            .unwrap();
        for r in page.results {
            live.insert(r.id, (user(u), r.memory));
        }
    }
    Model {
        live,
        deleted: HashSet::new(),
        policy: memory.config().await.unwrap().extraction_policy,
    }
}

/// What one child did before it was killed.
struct Run {
    /// The acknowledged steps, with the ids they reported.
    acked: Vec<(Value, Vec<Uuid>)>,
    /// The step begun but not acknowledged, if any.
    in_flight: Option<Value>,
}

/// Runs one child until the kill. Panics, showing the child's stderr, when the child does
/// not come up (no `READY` within a minute) or exits before it is killed.
fn run_child(exe: &Path, dir: &Path, seed: u64, rng: &mut Rng) -> Run {
    let mut child = Command::new(exe)
        .args([
            "--ignored",
            "--exact",
            "crash::crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .env(SEED_ENV, seed.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let mut lines = Vec::new();
    let mut failure: Option<String> = None;
    // Ready first: libtest may print "test crash::crash_child ... " on the same line.
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => {
                let ready = line.contains("READY");
                lines.push(line);
                if ready {
                    break;
                }
            }
            Err(_) => {
                failure = Some("did not report READY within 60 s".into());
                break;
            }
        }
    }
    // Kill after a random number of acknowledgements, a random moment into the next step.
    if failure.is_none() {
        let acks_before_kill = rng.below(12);
        let mut acks = 0;
        let started = Instant::now();
        while acks < acks_before_kill && started.elapsed() < Duration::from_secs(30) {
            match rx.recv_timeout(Duration::from_secs(30)) {
                Ok(line) => {
                    if line.contains("ACK ") {
                        acks += 1;
                    }
                    lines.push(line);
                }
                Err(_) => break,
            }
        }
        std::thread::sleep(Duration::from_micros(rng.below(8_000) as u64));
    }
    if let Ok(Some(status)) = child.try_wait() {
        failure = Some(format!("exited on its own ({status}) before the kill"));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    reader.join().unwrap();
    let stderr = errors.join().unwrap();
    if let Some(why) = failure {
        panic!("the crash child (seed {seed}) {why}; its stderr:\n{stderr}");
    }
    lines.extend(rx.try_iter());

    let mut acked = Vec::new();
    let mut begun: Option<Value> = None;
    let after = |line: &str, tag: &str| line.find(tag).map(|i| line[i + tag.len()..].to_string());
    for line in lines {
        if let Some(step) = after(&line, "BEGIN ") {
            begun = Some(serde_json::from_str(&step).unwrap());
        } else if let Some(ack) = after(&line, "ACK ") {
            let ack: Value = serde_json::from_str(&ack).unwrap();
            let ids: Vec<Uuid> = serde_json::from_value(ack["ids"].clone()).unwrap_or_default();
            acked.push((begun.take().expect("an ACK follows a BEGIN"), ids));
        }
    }
    Run {
        acked,
        in_flight: begun,
    }
}

/// Checks a reopened store against the model; returns the model updated with the step in
/// flight when the store shows it was committed.
async fn check(memory: &Memory, model: Model, in_flight: Option<Value>, kill: usize) -> Model {
    let seen = observe(memory).await;
    let mut candidates = vec![model.clone()];
    if let Some(step) = &in_flight {
        let mut applied = model.clone();
        // An add in flight has no reported ids: take those of its texts in the store.
        let ids: Vec<Uuid> = match step["kind"].as_str() {
            Some("add") => step["texts"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| {
                    seen.live
                        .iter()
                        .find(|(_, (_, text))| text == t.as_str().unwrap())
                        .map(|(id, _)| *id)
                })
                .collect(),
            _ => Vec::new(),
        };
        let whole = step["kind"] != "add" || ids.len() == step["texts"].as_array().unwrap().len();
        if whole {
            applied.apply(step, &ids);
            candidates.push(applied);
        }
    }
    let truth = candidates
        .into_iter()
        .find(|m| m.live == seen.live && m.policy == seen.policy)
        .unwrap_or_else(|| {
            panic!(
                "kill {kill}: the store is neither before nor after the step in flight \
                 {in_flight:?}\nmodel: {:?}\nstore: {:?}",
                model.live, seen.live
            )
        });

    // Both indexes agree with the rows.
    for (id, (u, text)) in &truth.live {
        for mode in [SearchMode::Keyword, SearchMode::Vector] {
            let hits = memory
                .search(text.as_str())
                .user(u)
                .mode(mode)
                .top_k(1_000)
                .await
                .unwrap();
            assert!(
                hits.results.iter().any(|h| h.record.id == *id),
                "kill {kill}: {mode:?} search misses {id} {text:?}"
            );
            for hit in &hits.results {
                assert!(
                    truth.live.contains_key(&hit.record.id),
                    "kill {kill}: a dead hit"
                );
            }
        }
    }
    // History ends as each memory does; the event log replays to the live memories.
    for id in truth.live.keys() {
        let last = memory.history(*id).await.unwrap().pop().map(|h| h.event);
        assert_ne!(last, Some(HistoryEvent::Delete), "kill {kill}: {id}");
        assert!(last.is_some(), "kill {kill}: {id} has no history");
    }
    for id in &truth.deleted {
        let last = memory.history(*id).await.unwrap().pop().map(|h| h.event);
        assert_eq!(last, Some(HistoryEvent::Delete), "kill {kill}: {id}");
    }
    let mut replay: HashMap<Uuid, String> = HashMap::new();
    let mut cursor = 0;
    loop {
        let page = memory.events_after(cursor, 1_000).await.unwrap();
        if page.results.is_empty() {
            break;
        }
        for e in page.results {
            match e.kind {
                EventKind::MemoryDelete => {
                    replay.remove(&e.memory_id.unwrap());
                }
                EventKind::MemoryAdd | EventKind::MemoryUpdate => {
                    replay.insert(e.memory_id.unwrap(), e.memory.unwrap_or_default());
                }
                // Configuration changes, feedback: not memories.
                _ => {}
            }
        }
        cursor = page.next_cursor;
    }
    let live: HashMap<Uuid, String> = truth
        .live
        .iter()
        .map(|(id, (_, text))| (*id, text.clone()))
        .collect();
    assert_eq!(
        replay, live,
        "kill {kill}: the event log disagrees with the rows"
    );
    truth
}

fn integrity(db: &Path, kill: usize) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let ok: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok", "kill {kill}");
    // Rank 0: the keyword index's own structure (its rows are checked by search above).
    conn.execute(
        "INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 0)",
        [],
    )
    .unwrap_or_else(|e| panic!("kill {kill}: keyword index damaged: {e}"));
}

/// Kills every CI run makes at least; `MEMLANE_CRASH_KILLS` asks for more.
const MIN_KILLS: usize = 100;

#[test]
fn crash_campaign() {
    let kills: usize = std::env::var("MEMLANE_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MIN_KILLS)
        .max(MIN_KILLS);
    let exe: PathBuf = std::env::current_exe().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut rng = Rng(0x5EED_CAFE_F00D_BEEF);
    let mut model = Model::default();
    let mut committed_in_flight = 0;
    let (mut killed, mut verified) = (0, 0);
    for kill in 0..kills {
        let run = run_child(&exe, dir.path(), kill as u64 + 1, &mut rng);
        killed += 1;
        for (step, ids) in &run.acked {
            model.apply(step, ids);
        }
        integrity(&dir.path().join("m.db"), kill);
        model = runtime.block_on(async {
            let memory = open(dir.path()).await;
            let before = model.live.len();
            let truth = check(&memory, model, run.in_flight, kill).await;
            if truth.live.len() != before {
                committed_in_flight += 1;
            }
            truth
        });
        // `check` found every write acknowledged before this kill.
        verified += run.acked.len();
    }
    println!(
        "{killed} kills; {verified} acknowledged writes verified after reopening; the store held \
         {} memories at the end; the step in flight had committed {committed_in_flight} times",
        model.live.len()
    );
    assert!(killed >= MIN_KILLS, "only {killed} kills");
    // About five acknowledged writes per kill on average (kills before any acknowledgement
    // verify nothing, which is allowed); far fewer means the children did no work.
    assert!(
        verified >= killed,
        "only {verified} acknowledged writes verified over {killed} kills"
    );
}

const LOADING_ENV: &str = "MEMLANE_LOADING_CHILD_DIR";
/// Memories in the store the loading children open: enough that its graph takes a while to
/// load in a test build.
const LOADING_MEMORIES: usize = 12_000;
const LOADING_DIM: usize = 32;
/// Children opened and killed, one after another, on the same store.
const LOADING_KILLS: usize = 4;

async fn open_loading(dir: &Path) -> Memory {
    crate::common::open(&dir.join("m.db"), LOADING_DIM).await
}

/// Memory `i`'s vector: random, so that vector search has one right answer.
fn loading_vector(i: usize) -> Vec<f32> {
    let mut rng = Rng((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let v: Vec<f32> = (0..LOADING_DIM)
        .map(|_| rng.below(2_001) as f32 - 1_000.0)
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / norm).collect()
}

/// The child of the loading test: opens the store, stores one memory at once (while the
/// saved graph loads), reports it and whether the graph was loading, and waits to be killed.
#[tokio::test]
#[ignore = "run by a_process_killed_while_its_graph_loads_loses_nothing as a child process"]
async fn loading_child() {
    let Ok(dir) = std::env::var(LOADING_ENV) else {
        return;
    };
    let round = std::env::var(SEED_ENV).unwrap();
    let memory = open_loading(Path::new(&dir)).await;
    let loading = memory.index_loading();
    let round: usize = round.parse().unwrap();
    let id = memory
        .add(format!("written during load {round}"))
        .user("late")
        .infer(false)
        .vectors(vec![loading_vector(LOADING_MEMORIES + round)])
        .await
        .unwrap()
        .results[0]
        .id;
    println!("ACK {id} {loading}");
    tokio::time::sleep(Duration::from_secs(120)).await;
}

/// A process killed while its saved graph loads in the background loses nothing: the
/// memory it stored meanwhile is there after the kill, the next open loads the graph, and
/// every memory is found by vector search.
#[test]
fn a_process_killed_while_its_graph_loads_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let memory = open_loading(dir.path()).await;
        for batch in 0..LOADING_MEMORIES / 1_000 {
            let ids = batch * 1_000..(batch + 1) * 1_000;
            let texts: Vec<Message> = ids
                .clone()
                .map(|i| Message::user(format!("memory {i} of the store")))
                .collect();
            memory
                .add(texts)
                .user(format!("u{batch}"))
                .infer(false)
                .vectors(ids.map(loading_vector).collect())
                .await
                .unwrap();
        }
        // Saves the index: the children find a graph to load.
        memory.close().await.unwrap();
    });
    let exe: PathBuf = std::env::current_exe().unwrap();
    let (mut acked, mut while_loading) = (Vec::new(), 0);
    for round in 0..LOADING_KILLS {
        let mut child = Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "crash::loading_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(LOADING_ENV, dir.path())
            .env(SEED_ENV, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // libtest may print "test crash::loading_child ... " on the same line.
        let ack = lines
            .find_map(|line| {
                let line = line.ok()?;
                Some(line[line.find("ACK ")? + 4..].to_owned())
            })
            .unwrap_or_else(|| panic!("loading child {round} exited without storing"));
        child.kill().unwrap(); // SIGKILL, as soon as the write is acknowledged
        child.wait().unwrap();
        let (id, loading) = ack.split_once(' ').unwrap();
        acked.push(id.parse::<Uuid>().unwrap());
        if loading == "true" {
            while_loading += 1;
        }
    }
    println!("{while_loading} of {LOADING_KILLS} children were killed while their graph loaded");
    assert!(
        while_loading > 0,
        "none of {LOADING_KILLS} children was killed while its graph loaded"
    );
    runtime.block_on(async {
        // A wide search beam, so that the graph's walk never misses a nearest point.
        let params = memlane::IndexParams::default().ef_search(512);
        let memory =
            crate::common::open_with_params(&dir.path().join("m.db"), LOADING_DIM, params).await;
        memory.wait_for_index().await.unwrap();
        assert!(!memory.index_loading());
        let mut found = 0;
        for (round, id) in acked.iter().enumerate() {
            let text = format!("written during load {round}");
            assert_eq!(memory.get(*id).await.unwrap().memory, text);
            let hits = memory
                .search_vector(loading_vector(LOADING_MEMORIES + round))
                .top_k(1)
                .await
                .unwrap();
            assert_eq!(hits.results[0].record.id, *id, "round {round}");
            found += 1;
        }
        for i in (0..LOADING_MEMORIES).step_by(997) {
            let hits = memory
                .search_vector(loading_vector(i))
                .top_k(1)
                .await
                .unwrap();
            assert_eq!(
                hits.results[0].record.memory,
                format!("memory {i} of the store")
            );
            found += 1;
        }
        assert_eq!(found, LOADING_KILLS + LOADING_MEMORIES.div_ceil(997));
    });
}
