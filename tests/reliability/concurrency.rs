//! Concurrency: many tasks writing and reading through one handle and through a second
//! handle on the same file. Only documented errors, no deadlock, and a final state equal to
//! a serial replay: of each task's acknowledged operations, and of the event log in commit
//! order. Reads go on while another connection holds the write lock.

use std::collections::HashMap;
use std::time::Duration;

use memlane::ops::events::EventKind;
use memlane::{Memory, SearchMode};
use uuid::Uuid;

use crate::common::Rng;

async fn open(path: &std::path::Path) -> Memory {
    crate::common::open(path, 64).await
}

const TASKS: usize = 8;
const OPS_PER_TASK: usize = 60;
/// Memories of the user every task races on.
const SHARED: usize = 12;
/// A deadlock shows as a task still running after this.
const DEADLINE: Duration = Duration::from_secs(120);

/// One task's own user: its acknowledged operations, replayed in its order, are the truth.
async fn own_user(memory: Memory, task: usize) -> HashMap<Uuid, String> {
    let user = format!("user-{task}");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (task as u64 + 1));
    let mut model: HashMap<Uuid, String> = HashMap::new();
    for op in 0..OPS_PER_TASK {
        let ids: Vec<Uuid> = model.keys().copied().collect();
        match rng.below(10) {
            0..=3 => {
                let text = format!("task {task} fact {op} about tea");
                let out = memory
                    .add(text.as_str())
                    .user(&user)
                    .infer(false)
                    .await
                    .unwrap();
                model.insert(out.results[0].id, text);
            }
            4 | 5 if !ids.is_empty() => {
                let id = ids[rng.below(ids.len())];
                let text = format!("task {task} fact {op} revised");
                let out = memory.update(id).text(text.as_str()).await.unwrap();
                assert_eq!(out.memory.memory, text);
                model.insert(id, text);
            }
            6 if !ids.is_empty() => {
                let id = ids[rng.below(ids.len())];
                memory.delete(id).await.unwrap();
                model.remove(&id);
            }
            7 if op % 20 == 7 => {
                memory.delete_all().user(&user).await.unwrap();
                model.clear();
            }
            _ => {
                // Reads see only this user's live memories, each with its latest text or a
                // newer one than the model's (never a deleted one).
                let hits = memory
                    .search("tea")
                    .user(&user)
                    .mode(SearchMode::Keyword)
                    .top_k(50)
                    .await
                    .unwrap();
                for hit in hits.results {
                    assert_eq!(model.get(&hit.record.id), Some(&hit.record.memory));
                }
                let page = memory.list().user(&user).page_size(1_000).await.unwrap();
                assert_eq!(page.results.len(), model.len());
            }
        }
    }
    model
}

/// Tasks sharing one user's memories: races end in documented errors only (404 for a
/// memory another task deleted; 409 for one another task changed while this update was
/// being prepared, which the stores check in the write's transaction), never in anything
/// else. Memories at even positions are
/// only ever updated, so that some shared memories are sure to outlive the race.
async fn shared_user(memory: Memory, task: usize, ids: Vec<Uuid>) {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03 ^ (task as u64 + 1));
    for op in 0..OPS_PER_TASK / 2 {
        let at = rng.below(ids.len());
        let id = ids[at];
        let result = if at % 2 == 1 && rng.below(4) == 0 {
            memory.delete(id).await.map(drop)
        } else {
            memory
                .update(id)
                .text(format!("shared, by task {task}, op {op}"))
                .await
                .map(drop)
        };
        if let Err(e) = result {
            assert!(matches!(e.status(), 404 | 409), "{e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_and_readers_agree_with_a_serial_replay() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let one = open(&path).await;
    let two = open(&path).await;
    let mut shared = Vec::new();
    for i in 0..SHARED {
        let out = one
            .add(format!("shared memory {i}"))
            .user("shared")
            .infer(false)
            .await;
        shared.push(out.unwrap().results[0].id);
    }

    let mut own = Vec::new();
    let mut racing = Vec::new();
    for task in 0..TASKS {
        let memory = if task % 2 == 0 {
            one.clone()
        } else {
            two.clone()
        };
        own.push(tokio::spawn(own_user(memory.clone(), task)));
        racing.push(tokio::spawn(shared_user(memory, task, shared.clone())));
    }
    let mut models = Vec::new();
    let work = async {
        for task in own {
            models.push(task.await.unwrap());
        }
        for task in racing {
            task.await.unwrap();
        }
    };
    tokio::time::timeout(DEADLINE, work)
        .await
        .expect("no task is stuck");

    // Each task's user holds exactly what its acknowledged operations left, through
    // either handle.
    for (task, model) in models.iter().enumerate() {
        for memory in [&one, &two] {
            let page = memory
                .list()
                .user(format!("user-{task}"))
                .page_size(1_000)
                .await
                .unwrap();
            let live: HashMap<Uuid, String> =
                page.results.into_iter().map(|r| (r.id, r.memory)).collect();
            assert_eq!(&live, model, "task {task}");
        }
    }

    // Replaying the event log in commit order gives exactly the live memories.
    let mut replay: HashMap<Uuid, String> = HashMap::new();
    let mut cursor = 0;
    loop {
        let page = one.events_after(cursor, 1_000).await.unwrap();
        if page.results.is_empty() {
            break;
        }
        for e in page.results {
            match e.kind {
                EventKind::MemoryAdd | EventKind::MemoryUpdate => {
                    replay.insert(e.memory_id.unwrap(), e.memory.clone().unwrap());
                }
                EventKind::MemoryDelete => {
                    assert!(replay.remove(&e.memory_id.unwrap()).is_some(), "{e:?}");
                }
                _ => {}
            }
        }
        cursor = page.next_cursor;
    }
    let mut live = HashMap::new();
    for user in (0..TASKS)
        .map(|t| format!("user-{t}"))
        .chain(["shared".to_string()])
    {
        let page = two.list().user(user).page_size(1_000).await.unwrap();
        live.extend(page.results.into_iter().map(|r| (r.id, r.memory)));
    }
    assert_eq!(replay, live);

    // Each live shared memory is found, by its text, through the handle that wrote its
    // current text (vector and hybrid). Tasks on even numbers write through `one`, odd
    // ones through `two`; the texts name the task. (The other handle's index lags until
    // "many processes, one SQLite file" lands.)
    let mut checked = 0;
    for (id, text) in live.iter().filter(|(id, _)| shared.contains(id)) {
        let writer = match text.strip_prefix("shared, by task ") {
            Some(rest) => {
                let task: usize = rest.split(',').next().unwrap().parse().unwrap();
                if task.is_multiple_of(2) {
                    &one
                } else {
                    &two
                }
            }
            None => &one, // never updated since `one` added it
        };
        for mode in [SearchMode::Vector, SearchMode::Hybrid] {
            let hits = writer
                .search(text.as_str())
                .user("shared")
                .mode(mode)
                .top_k(SHARED)
                .await
                .unwrap();
            assert!(
                hits.results.iter().any(|h| h.record.id == *id),
                "{mode:?}: {id} {text:?} missing from its writer's search"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= SHARED,
        "only {checked} searches checked shared memories"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_do_not_wait_for_a_writer_holding_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let memory = open(&path).await;
    let id = memory
        .add("ann likes tea")
        .user("ann")
        .infer(false)
        .await
        .unwrap()
        .results[0]
        .id;

    // Another connection takes the write lock and keeps it.
    let blocker = rusqlite::Connection::open(&path).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();

    // Reads complete well within the store's busy timeout (10 s): they do not wait.
    let reads = async {
        memory.get(id).await.unwrap();
        memory.list().user("ann").await.unwrap();
        memory.search("tea").user("ann").await.unwrap();
        memory.history(id).await.unwrap();
        memory.events_after(0, 10).await.unwrap();
        memory.entities().await.unwrap();
    };
    tokio::time::timeout(Duration::from_secs(5), reads)
        .await
        .expect("reads went on while another connection held the write lock");

    // A write waits for the lock and goes through once it is released.
    let writer = memory.clone();
    let write = tokio::spawn(async move {
        writer
            .add("ann likes jazz")
            .user("ann")
            .infer(false)
            .await
            .map(drop)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!write.is_finished(), "the write waits for the lock");
    blocker.execute_batch("COMMIT").unwrap();
    write.await.unwrap().unwrap();
    assert_eq!(memory.list().user("ann").await.unwrap().results.len(), 2);
}
