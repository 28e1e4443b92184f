//! Many handles, one file: every search sees every write acknowledged before it began,
//! whichever handle or process made it; saves and loads of the shared index directory,
//! schema migrations and a writer killed mid-write never hurt another process.

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use memlane::IndexParams;
use memlane::{Memory, SearchMode};
use uuid::Uuid;

use crate::common::Rng;

const DIM: usize = 64;
const CHILD_ENV: &str = "MEMLANE_FRESHNESS_CHILD_DB";
/// Protocol lines of the child carry this (after whatever the test harness printed on the
/// same line); other lines are the harness's.
const TAG: &str = "@memlane@ ";

/// A handle whose searches rank exactly (`exact`) or through the HNSW graph whatever the
/// number of candidates.
async fn open(path: &Path, exact: bool) -> Memory {
    let params = if exact {
        IndexParams::default()
    } else {
        IndexParams::default().exact_search_max(1)
    };
    crate::common::open_with_params(path, DIM, params).await
}

/// The best hit of `text` in one mode, as `(id, text)`.
async fn top(
    memory: &Memory,
    user: Option<&str>,
    mode: SearchMode,
    text: &str,
) -> Option<(Uuid, String)> {
    let mut request = memory.search(text).mode(mode).top_k(1);
    if let Some(user) = user {
        request = request.user(user);
    }
    let hits = request.await.unwrap().results;
    hits.first().map(|h| (h.record.id, h.record.memory.clone()))
}

/// Every id a search of `text` returns among all of `user`'s memories.
async fn all_hits(memory: &Memory, user: &str, mode: SearchMode, text: &str) -> Vec<Uuid> {
    let request = memory.search(text).mode(mode).user(user).top_k(100);
    request
        .await
        .unwrap()
        .results
        .iter()
        .map(|h| h.record.id)
        .collect()
}

const MODES: [SearchMode; 3] = [SearchMode::Vector, SearchMode::Hybrid, SearchMode::Keyword];

/// One side of the schedule: a handle in this process, or a child process.
trait Side {
    async fn add(&mut self, user: &str, text: &str) -> Uuid;
    async fn update(&mut self, id: Uuid, text: &str);
    async fn delete(&mut self, id: Uuid);
    /// The best hit, in `mode`, filtered to `user` or not.
    async fn top(
        &mut self,
        user: Option<&str>,
        mode: SearchMode,
        text: &str,
    ) -> Option<(Uuid, String)>;
    /// Every hit among `user`'s memories.
    async fn hits(&mut self, user: &str, mode: SearchMode, text: &str) -> Vec<Uuid>;
}

impl Side for Memory {
    async fn add(&mut self, user: &str, text: &str) -> Uuid {
        crate::common::add(self, user, text).await
    }

    async fn update(&mut self, id: Uuid, text: &str) {
        Memory::update(self, id).text(text).await.unwrap();
    }

    async fn delete(&mut self, id: Uuid) {
        Memory::delete(self, id).await.unwrap();
    }

    async fn top(
        &mut self,
        user: Option<&str>,
        mode: SearchMode,
        text: &str,
    ) -> Option<(Uuid, String)> {
        top(self, user, mode, text).await
    }

    async fn hits(&mut self, user: &str, mode: SearchMode, text: &str) -> Vec<Uuid> {
        all_hits(self, user, mode, text).await
    }
}

fn mode_name(mode: SearchMode) -> &'static str {
    match mode {
        SearchMode::Vector => "vector",
        SearchMode::Keyword => "keyword",
        _ => "hybrid",
    }
}

fn mode_of(name: &str) -> SearchMode {
    match name {
        "vector" => SearchMode::Vector,
        "keyword" => SearchMode::Keyword,
        _ => SearchMode::Hybrid,
    }
}

/// A child process holding its own handle on the file, driven line by line.
struct Remote {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Remote {
    fn spawn(db: &Path) -> Remote {
        let exe: PathBuf = std::env::current_exe().unwrap();
        let mut child = Command::new(exe)
            .args([
                "--ignored",
                "--exact",
                "freshness::freshness_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                if let Some((_, reply)) = line.split_once(TAG) {
                    if tx.send(reply.to_owned()).is_err() {
                        break;
                    }
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        let mut remote = Remote {
            child,
            stdin,
            lines,
            stderr: Some(stderr),
        };
        assert_eq!(remote.reply(), "READY");
        remote
    }

    /// The next reply; panics with the child's stderr when there is none.
    fn reply(&mut self) -> String {
        match self.lines.recv_timeout(Duration::from_secs(120)) {
            Ok(line) => line,
            Err(e) => {
                let _ = self.child.kill();
                let stderr = self
                    .stderr
                    .take()
                    .map(|h| h.join().unwrap())
                    .unwrap_or_default();
                panic!(
                    "the child gave no reply ({}): {stderr}",
                    if e == RecvTimeoutError::Timeout {
                        "timeout"
                    } else {
                        "it exited"
                    }
                );
            }
        }
    }

    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        self.reply()
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        if self.child.wait_timeout_secs(30).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

trait WaitTimeout {
    fn wait_timeout_secs(&mut self, secs: u64) -> Option<std::process::ExitStatus>;
}

impl WaitTimeout for Child {
    fn wait_timeout_secs(&mut self, secs: u64) -> Option<std::process::ExitStatus> {
        for _ in 0..secs * 10 {
            if let Ok(Some(status)) = self.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }
}

fn parse_hit(reply: &str) -> Option<(Uuid, String)> {
    let (id, text) = reply.split_once(' ')?;
    Some((id.parse().unwrap(), text.to_owned()))
}

impl Side for Remote {
    async fn add(&mut self, user: &str, text: &str) -> Uuid {
        self.ask(&format!("add {user} {text}")).parse().unwrap()
    }

    async fn update(&mut self, id: Uuid, text: &str) {
        assert_eq!(self.ask(&format!("update {id} {text}")), "ok");
    }

    async fn delete(&mut self, id: Uuid) {
        assert_eq!(self.ask(&format!("delete {id}")), "ok");
    }

    async fn top(
        &mut self,
        user: Option<&str>,
        mode: SearchMode,
        text: &str,
    ) -> Option<(Uuid, String)> {
        let user = user.unwrap_or("*");
        parse_hit(&self.ask(&format!("top {user} {} {text}", mode_name(mode))))
    }

    async fn hits(&mut self, user: &str, mode: SearchMode, text: &str) -> Vec<Uuid> {
        let reply = self.ask(&format!("hits {user} {} {text}", mode_name(mode)));
        reply
            .split_whitespace()
            .map(|id| id.parse().unwrap())
            .collect()
    }
}

/// The child: a handle on the file given in the environment, answering the parent's
/// commands, one line each, until `quit`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by the freshness tests as a child process"]
async fn freshness_child() {
    let Ok(db) = std::env::var(CHILD_ENV) else {
        return;
    };
    // The graph path: the side that ranks exactly is the parent's.
    let memory = open(Path::new(&db), false).await;
    println!("{TAG}READY");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(|l| l.ok()) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = rx.recv().await {
        let mut words = line.splitn(4, ' ');
        let reply = match words.next().unwrap_or("") {
            "add" => {
                let (user, rest) = (words.next().unwrap(), words.collect::<Vec<_>>().join(" "));
                crate::common::add(&memory, user, &rest).await.to_string()
            }
            "update" => {
                let id: Uuid = words.next().unwrap().parse().unwrap();
                let text = words.collect::<Vec<_>>().join(" ");
                memory.update(id).text(text).await.unwrap();
                "ok".to_owned()
            }
            "delete" => {
                let id: Uuid = words.next().unwrap().parse().unwrap();
                memory.delete(id).await.unwrap();
                "ok".to_owned()
            }
            "top" => {
                let user = words.next().unwrap();
                let mode = mode_of(words.next().unwrap());
                let text = words.next().unwrap_or("");
                let user = (user != "*").then_some(user);
                match top(&memory, user, mode, text).await {
                    Some((id, text)) => format!("{id} {text}"),
                    None => "none".to_owned(),
                }
            }
            "hits" => {
                let user = words.next().unwrap();
                let mode = mode_of(words.next().unwrap());
                let text = words.next().unwrap_or("");
                let ids = all_hits(&memory, user, mode, text).await;
                ids.iter()
                    .map(Uuid::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            }
            "adds" => {
                // Adds of four messages each, acknowledged one by one, until killed.
                let n: usize = words.next().unwrap().parse().unwrap();
                for i in 0..n {
                    let texts: Vec<String> = (0..4)
                        .map(|j| format!("batch {i} part {j} marker{i}"))
                        .collect();
                    let messages: Vec<memlane::Message> = texts
                        .iter()
                        .map(|t| memlane::Message::new("user", t.as_str()))
                        .collect();
                    memory
                        .add(messages)
                        .user("bulk")
                        .infer(false)
                        .await
                        .unwrap();
                    println!("{TAG}ack {i}");
                }
                "done".to_owned()
            }
            "save" => {
                memory.save_index().await.unwrap();
                "ok".to_owned()
            }
            "quit" => break,
            other => panic!("unknown command {other:?}"),
        };
        println!("{TAG}{reply}");
    }
}

const WORDS: [&str; 8] = [
    "tea", "paris", "cello", "chess", "sushi", "rain", "jazz", "dogs",
];

/// Writes through one side and checks the other after each acknowledgement: an added or
/// updated memory is the best hit of its own text in every mode (filtered to its user and
/// not), a deleted one is gone from its user's results, and an updated one never comes
/// back with its old text. Returns the number of checks made.
async fn interleave(
    first: &mut impl Side,
    second: &mut impl Side,
    seed: u64,
    steps: usize,
) -> usize {
    // Runs `$call` on the writing side (`write!`) or on the other one (`read!`).
    macro_rules! on {
        ($first:expr, $side:ident . $($call:tt)*) => {
            if $first { first.$($call)* } else { second.$($call)* }
        };
    }
    let mut rng = Rng(seed);
    // (id, user, text) of live memories.
    let mut live: Vec<(Uuid, String, String)> = Vec::new();
    let mut checks = 0;
    for step in 0..steps {
        let user = format!("user-{}", rng.below(3));
        let w = rng.below(2) == 0;
        let words = format!(
            "{} {} {} step{step}",
            WORDS[rng.below(WORDS.len())],
            WORDS[rng.below(WORDS.len())],
            WORDS[rng.below(WORDS.len())]
        );
        let kind = if live.len() < 4 { 0 } else { rng.below(4) };
        // What the other side must now find, and what it must no longer find.
        let (found, gone) = match kind {
            0 | 1 => {
                let text = format!("note {words}");
                let id = on!(w, side.add(&user, &text).await);
                live.push((id, user.clone(), text.clone()));
                (Some((id, user, text)), None)
            }
            2 => {
                let at = rng.below(live.len());
                let (id, owner, old) = live[at].clone();
                let text = format!("revised {words}");
                on!(w, side.update(id, &text).await);
                live[at].2 = text.clone();
                (Some((id, owner.clone(), text)), Some((id, owner, old)))
            }
            _ => {
                let (id, owner, old) = live.swap_remove(rng.below(live.len()));
                on!(w, side.delete(id).await);
                (None, Some((id, owner, old)))
            }
        };
        let r = !w;
        if let Some((id, owner, text)) = &found {
            for mode in MODES {
                for user in [Some(owner.as_str()), None] {
                    let hit = on!(r, side.top(user, mode, text).await);
                    assert_eq!(
                        hit.as_ref().map(|h| h.0),
                        Some(*id),
                        "step {step}: {mode:?} search (user {user:?}) of {text:?} by the other side: {hit:?}"
                    );
                    assert_eq!(
                        hit.map(|h| h.1).as_deref(),
                        Some(text.as_str()),
                        "step {step}: stale text"
                    );
                    checks += 1;
                }
            }
        }
        if let Some((id, owner, old)) = &gone {
            for mode in MODES {
                if found.is_none() {
                    let hits = on!(r, side.hits(owner, mode, old).await);
                    assert!(
                        !hits.contains(id),
                        "step {step}: {mode:?} still finds deleted {id} ({old:?})"
                    );
                } else if let Some((hit, text)) = on!(r, side.top(Some(owner), mode, old).await) {
                    // The memory may still match its old text; it must come with its new one.
                    assert!(
                        hit != *id || text != *old,
                        "step {step}: {mode:?} returned the old text"
                    );
                }
                checks += 1;
            }
        }
    }
    checks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_handles_in_one_process_see_each_others_writes_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let mut exact = open(&path, true).await;
    let mut graph = open(&path, false).await;
    let checks = interleave(&mut exact, &mut graph, 0x5EED_0001, 80).await;
    assert!(checks > 300, "only {checks} checks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_sees_another_processs_writes_at_once_and_the_other_way_round() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let mut here = open(&path, true).await;
    let mut child = Remote::spawn(&path);
    let checks = interleave(&mut here, &mut child, 0x5EED_0002, 60).await;
    assert!(checks > 200, "only {checks} checks");
}

/// The generation `CURRENT` names exists with its manifest, and it is the only one.
fn one_sound_generation(index_dir: &Path) {
    let current = std::fs::read_to_string(index_dir.join("CURRENT")).unwrap();
    assert!(
        index_dir
            .join(current.trim())
            .join("manifest.json")
            .exists(),
        "CURRENT names {current:?}, which is gone"
    );
    let generations: Vec<String> = std::fs::read_dir(index_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("g-"))
        .collect();
    assert_eq!(
        generations,
        vec![current.trim().to_owned()],
        "left behind: {generations:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_saving_and_loading_the_index_at_once_keep_it_sound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let index_dir = dir.path().join("m.db.index");
    let here = open(&path, true).await;
    let texts: Vec<String> = (0..300)
        .map(|i| format!("fact {i} about {}", WORDS[i % WORDS.len()]))
        .collect();
    let messages: Vec<memlane::Message> = texts
        .iter()
        .map(|t| memlane::Message::new("user", t.as_str()))
        .collect();
    here.add(messages).user("u").infer(false).await.unwrap();
    let mut child = Remote::spawn(&path);
    let mut rng = Rng(0x5EED_0003);
    for round in 0..12 {
        // Both save at once; then a third handle loads what they left, while the child
        // saves again.
        writeln!(child.stdin, "save").unwrap();
        child.stdin.flush().unwrap();
        here.save_index().await.unwrap();
        assert_eq!(child.reply(), "ok", "round {round}");
        one_sound_generation(&index_dir);
        writeln!(child.stdin, "save").unwrap();
        child.stdin.flush().unwrap();
        let third = open(&path, false).await;
        assert_eq!(child.reply(), "ok", "round {round}");
        for _ in 0..5 {
            let text = &texts[rng.below(texts.len())];
            let hit = top(&third, None, SearchMode::Vector, text).await;
            assert_eq!(
                hit.map(|h| h.1).as_deref(),
                Some(text.as_str()),
                "round {round}"
            );
        }
        drop(third);
        one_sound_generation(&index_dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_opening_an_old_file_at_once_both_open_it_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let texts: Vec<String> = (0..2_000)
        .map(|i| format!("old fact {i} about {}", WORDS[i % WORDS.len()]))
        .collect();
    {
        let memory = open(&path, true).await;
        for chunk in texts.chunks(500) {
            let messages: Vec<memlane::Message> = chunk
                .iter()
                .map(|t| memlane::Message::new("user", t.as_str()))
                .collect();
            memory.add(messages).user("u").infer(false).await.unwrap();
        }
        // Saved before its files are removed below: a dropped handle saves in the
        // background, and that save may still be writing them.
        memory.close().await.unwrap();
    }
    // Back to schema version 9: vectors in the memory rows, as before migration 10.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(crate::common::BEFORE_VALIDITY).unwrap();
        conn.execute_batch(
            "ALTER TABLE memories ADD COLUMN vector BLOB NOT NULL DEFAULT x''; \
             UPDATE memories SET vector = (SELECT v.vector FROM vectors v WHERE v.key = vector_key); \
             DROP TABLE vectors; PRAGMA user_version = 9;",
        )
        .unwrap();
    }
    std::fs::remove_dir_all(dir.path().join("old.db.index")).unwrap();
    let opening = tokio::spawn({
        let path = path.clone();
        async move { open(&path, true).await }
    });
    let mut child = Remote::spawn(&path);
    let mut here = opening.await.unwrap();
    let page = here.list().user("u").page_size(1).await.unwrap();
    assert_eq!(page.pagination.count as usize, texts.len());
    for i in [0, 777, 1_999] {
        let text = &texts[i];
        for hit in [
            here.top(Some("u"), SearchMode::Vector, text).await,
            child.top(Some("u"), SearchMode::Vector, text).await,
            child.top(None, SearchMode::Keyword, text).await,
        ] {
            assert_eq!(hit.map(|h| h.1).as_deref(), Some(text.as_str()));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_killed_mid_add_never_shows_half_an_add_to_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let here = open(&path, true).await;
    let mut child = Remote::spawn(&path);
    writeln!(child.stdin, "adds 100000").unwrap();
    child.stdin.flush().unwrap();
    let mut acked = 0usize;
    let mut searched = 0usize;
    let stop_after = 15 + Rng(0x5EED_0004).below(20);
    while acked < stop_after {
        let reply = child.reply();
        let i: usize = reply.strip_prefix("ack ").unwrap().parse().unwrap();
        acked = i + 1;
        // The add just acknowledged is whole; the next, likely in flight, is whole or absent.
        for k in [i, i + 1] {
            let hits = here
                .search(format!("marker{k}"))
                .mode(SearchMode::Keyword)
                .user("bulk")
                .await
                .unwrap();
            let n = hits.results.len();
            assert!(
                n == 4 || (k > i && n == 0),
                "add {k}: {n} of its 4 memories found"
            );
            searched += 1;
        }
        let count = here
            .list()
            .user("bulk")
            .page_size(1)
            .await
            .unwrap()
            .pagination
            .count;
        assert_eq!(
            count % 4,
            0,
            "a part of an add is visible: {count} memories"
        );
    }
    child.child.kill().unwrap();
    child.child.wait().unwrap();
    assert!(searched >= 30);
    // What the child acknowledged is all there, whole, for this handle and a new one.
    let reopened = open(&path, false).await;
    for memory in [&here, &reopened] {
        let count = memory
            .list()
            .user("bulk")
            .page_size(1)
            .await
            .unwrap()
            .pagination
            .count as usize;
        assert_eq!(count % 4, 0, "half an add survived the kill: {count}");
        assert!(
            count >= 4 * acked,
            "{count} memories for {acked} acknowledged adds"
        );
        for k in 0..acked {
            let hits = memory
                .search(format!("marker{k}"))
                .mode(SearchMode::Keyword)
                .user("bulk")
                .await
                .unwrap();
            assert_eq!(hits.results.len(), 4, "add {k}");
        }
    }
}
