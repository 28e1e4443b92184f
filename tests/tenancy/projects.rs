//! Projects and API keys: keys shown once and stored hashed, every bad key a 401, revocation,
//! and no way for one project's handle to reach another project's memories.

use std::collections::HashMap;
use std::sync::Arc;

use memlane::projects::KEY_PREFIX;
use memlane::{Error, HashEmbedder, Memory, Projects};
use proptest::prelude::*;
use uuid::Uuid;

use crate::common::add;

async fn registry(dir: &std::path::Path) -> Projects {
    Projects::builder(dir)
        .embedder(Arc::new(HashEmbedder::new(64)))
        .build()
        .await
        .unwrap()
}

fn status<T>(r: memlane::Result<T>) -> (u16, String) {
    match r {
        Ok(_) => (200, String::new()),
        Err(e) => (e.status(), e.detail()),
    }
}

#[tokio::test]
async fn a_key_opens_its_project_and_only_its_hash_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let projects = registry(dir.path()).await;
    let acme = projects.create_project("Acme support bot").await.unwrap();
    let created = projects.create_key(&acme.id, "production").await.unwrap();
    assert!(created.key.starts_with(KEY_PREFIX));
    assert!(
        !format!("{created:?}").contains(&created.key),
        "Debug hides the key"
    );

    let memory = projects
        .authenticate(&format!("Token {}", created.key))
        .await
        .unwrap();
    let id = add(&memory, "alice", "Alice prefers email over phone calls").await;
    let again = projects
        .authenticate(&format!("token  {}", created.key))
        .await
        .unwrap();
    assert_eq!(
        again.get(id).await.unwrap().memory,
        "Alice prefers email over phone calls"
    );

    // The secret half of the key is nowhere in the registry's files.
    let secret = created.key.rsplit('_').next().unwrap().to_string();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{} holds the secret",
                path.display()
            );
        }
    }
    let keys = projects.keys(&acme.id).await.unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].name, "production");
    assert!(!keys[0].display.contains(&secret));

    // Keys and projects survive a restart.
    drop((memory, again, projects));
    let projects = registry(dir.path()).await;
    let memory = projects
        .authenticate(&format!("Token {}", created.key))
        .await
        .unwrap();
    assert!(memory.get(id).await.is_ok());
    assert_eq!(projects.projects().await.unwrap(), vec![acme]);
}

#[tokio::test]
async fn every_bad_key_is_a_401_that_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let projects = registry(dir.path()).await;
    let project = projects.create_project("p").await.unwrap();
    let key = projects.create_key(&project.id, "k").await.unwrap().key;
    let other = projects.create_key(&project.id, "other").await.unwrap();

    let (id, secret) = key[KEY_PREFIX.len()..].split_once('_').unwrap();
    let wrong_secret = format!("{KEY_PREFIX}{id}_{}", "0".repeat(secret.len()));
    let unknown_id = format!("{KEY_PREFIX}{}_{secret}", "0".repeat(id.len()));
    let cases = [
        ("", "missing API key"),
        (&*format!("Bearer {key}"), "Token scheme"),
        (&*key, "Token scheme"),
        ("Token ", "malformed API key"),
        (
            &*format!("Token {}", &key[..key.len() - 1]),
            "malformed API key",
        ),
        (&*format!("Token {key}{key}"), "malformed API key"),
        (&*format!("Token {wrong_secret}"), "unknown API key"),
        (&*format!("Token {unknown_id}"), "unknown API key"),
    ];
    for (header, why) in cases {
        let (code, detail) = status(projects.authenticate(header).await);
        assert_eq!(code, 401, "{header:?}");
        assert!(detail.contains(why), "{header:?}: {detail}");
    }

    // Revoked: the key stops working at once, the project's other key does not.
    let revoked = projects.revoke_key(id).await.unwrap();
    assert!(revoked.revoked_at.is_some());
    let (code, detail) = status(projects.authenticate(&format!("Token {key}")).await);
    assert_eq!(code, 401);
    assert!(detail.contains("revoked"), "{detail}");
    assert!(projects
        .authenticate(&format!("Token {}", other.key))
        .await
        .is_ok());
    // Revoking again keeps the first time; unknown keys and projects are 404s.
    assert_eq!(projects.revoke_key(id).await.unwrap(), revoked);
    assert_eq!(status(projects.revoke_key("nope").await).0, 404);
    assert_eq!(status(projects.create_key("prj_nope", "k").await).0, 404);
    assert_eq!(status(projects.memory("prj_nope").await).0, 404);
    assert_eq!(status(projects.create_project(" ").await).0, 400);
    assert_eq!(
        status(projects.create_key(&project.id, "a\u{0}b").await).0,
        400
    );
}

/// An operation a client of one project might try, aimed at that project's ids or the
/// other's.
#[derive(Debug, Clone)]
enum Op {
    Add { project: usize, user: u8 },
    Get { project: usize, pick: usize },
    Update { project: usize, pick: usize },
    Delete { project: usize, pick: usize },
    History { project: usize, pick: usize },
    Search { project: usize, user: u8 },
    List { project: usize },
    DeleteAll { project: usize, user: u8 },
}

fn arb_op() -> impl Strategy<Value = Op> {
    let p = 0..2usize;
    prop_oneof![
        3 => (p.clone(), 0..3u8).prop_map(|(project, user)| Op::Add { project, user }),
        1 => (p.clone(), any::<usize>()).prop_map(|(project, pick)| Op::Get { project, pick }),
        1 => (p.clone(), any::<usize>()).prop_map(|(project, pick)| Op::Update { project, pick }),
        1 => (p.clone(), any::<usize>()).prop_map(|(project, pick)| Op::Delete { project, pick }),
        1 => (p.clone(), any::<usize>()).prop_map(|(project, pick)| Op::History { project, pick }),
        1 => (p.clone(), 0..3u8).prop_map(|(project, user)| Op::Search { project, user }),
        1 => p.clone().prop_map(|project| Op::List { project }),
        1 => (p, 0..3u8).prop_map(|(project, user)| Op::DeleteAll { project, user }),
    ]
}

/// Runs the operations through two projects' handles, each aimed at any id either project
/// ever made, and checks that a handle only ever sees and changes its own project's ids.
async fn isolation(projects: Projects, ops: Vec<Op>) {
    let mut memories = Vec::new();
    for name in ["a", "b"] {
        let project = projects.create_project(name).await.unwrap();
        let key = projects.create_key(&project.id, "k").await.unwrap().key;
        memories.push(
            projects
                .authenticate(&format!("Token {key}"))
                .await
                .unwrap(),
        );
    }
    // Every id each project ever made; the same user names are used in both.
    let mut made: [Vec<Uuid>; 2] = [Vec::new(), Vec::new()];
    // The live memories of each project, with their user.
    let mut live: [HashMap<Uuid, u8>; 2] = [HashMap::new(), HashMap::new()];
    let everything = |made: &[Vec<Uuid>; 2]| -> Vec<(usize, Uuid)> {
        (0..2)
            .flat_map(|p| made[p].iter().map(move |id| (p, *id)))
            .collect()
    };
    for op in ops {
        match op {
            Op::Add { project, user } => {
                let id = add(&memories[project], &format!("u{user}"), "likes green tea").await;
                made[project].push(id);
                live[project].insert(id, user);
            }
            Op::Get { project, pick }
            | Op::Update { project, pick }
            | Op::Delete { project, pick }
            | Op::History { project, pick } => {
                let all = everything(&made);
                if all.is_empty() {
                    continue;
                }
                let (owner, id) = all[pick % all.len()];
                let memory = &memories[project];
                let code = match op {
                    Op::Get { .. } => status(memory.get(id).await).0,
                    Op::Update { .. } => status(memory.update(id).text("changed").await).0,
                    Op::Delete { .. } => status(memory.delete(id).await).0,
                    _ => status(memory.history(id).await).0,
                };
                if owner != project {
                    assert_eq!(code, 404, "{op:?} reached another project's memory");
                } else if matches!(op, Op::Delete { .. }) && code == 200 {
                    live[project].remove(&id);
                }
            }
            Op::Search { project, user } => {
                let hits = memories[project]
                    .search("green tea")
                    .user(format!("u{user}"))
                    .await
                    .unwrap();
                for hit in hits.results {
                    assert!(made[project].contains(&hit.record.id), "{op:?}");
                }
            }
            Op::List { project } => {
                let export = memories[project].export().await.unwrap();
                for m in export.memories {
                    assert!(
                        made[project].contains(&m.record.id),
                        "{op:?}: exported {m:?}"
                    );
                }
                let events = memories[project].events_after(0, 1_000).await.unwrap();
                for event in events.results {
                    assert!(
                        event.memory_id.is_none_or(|id| made[project].contains(&id)),
                        "{op:?}: {event:?}"
                    );
                }
                for user in 0..3 {
                    let page = memories[project]
                        .list()
                        .user(format!("u{user}"))
                        .await
                        .unwrap();
                    for record in page.results {
                        assert!(made[project].contains(&record.id), "{op:?}");
                    }
                }
            }
            Op::DeleteAll { project, user } => {
                memories[project]
                    .delete_all()
                    .user(format!("u{user}"))
                    .await
                    .unwrap();
                live[project].retain(|_, u| *u != user);
                // The other project's memories of the same user name are all still there.
                let other = 1 - project;
                for id in live[other].keys() {
                    assert!(
                        memories[other].get(*id).await.is_ok(),
                        "{op:?} reached {id}"
                    );
                }
            }
        }
    }
    // Finally every id answers in its own project only, and what is live there is live.
    for (project, ids) in live.iter().enumerate() {
        for id in ids.keys() {
            assert!(memories[project].get(*id).await.is_ok());
        }
    }
    for (owner, id) in everything(&made) {
        assert_eq!(status(memories[1 - owner].get(id).await).0, 404);
        assert_eq!(status(memories[1 - owner].history(id).await).0, 404);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn no_operation_of_one_project_reaches_another(ops in prop::collection::vec(arb_op(), 1..30)) {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            isolation(registry(dir.path()).await, ops).await;
        });
    }
}

#[cfg(feature = "postgres")]
proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]

    /// The same on PostgreSQL, where the two projects are two schemas of one database.
    #[test]
    fn on_postgres_no_operation_of_one_project_reaches_another(ops in prop::collection::vec(arb_op(), 1..30)) {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async {
            let url = crate::common::pg_database().await;
            let projects = Projects::postgres(url, 4)
                .embedder(Arc::new(HashEmbedder::new(64)))
                .build()
                .await
                .unwrap();
            isolation(projects, ops).await;
        });
    }
}

#[tokio::test]
async fn a_file_opened_directly_is_its_own_project() {
    // No registry, no key: the single-tenant path stays one call.
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::builder()
        .path(dir.path().join("solo.db"))
        .embedder(Arc::new(HashEmbedder::new(64)))
        .build()
        .await
        .unwrap();
    let id = add(&memory, "solo", "works without keys").await;
    assert!(memory.get(id).await.is_ok());
    let err: Error = memory.get(Uuid::new_v4()).await.unwrap_err();
    assert_eq!(err.status(), 404);
}

/// Two hosts' registries on one PostgreSQL database: a key created on one opens its
/// project on the other, a revocation on either is honoured by both at their next call,
/// and one project's handle never reaches another's memories.
#[cfg(feature = "postgres")]
#[tokio::test]
async fn on_postgres_every_host_honours_keys_at_its_next_call() {
    let url = crate::common::pg_database().await;
    let host = || async {
        Projects::postgres(url.clone(), 4)
            .embedder(Arc::new(HashEmbedder::new(64)))
            .build()
            .await
            .unwrap()
    };
    let (a, b) = (host().await, host().await);
    let acme = a.create_project("Acme").await.unwrap();
    let other = b.create_project("Other").await.unwrap();
    assert_eq!(a.projects().await.unwrap().len(), 2);
    assert_eq!(b.project(&acme.id).await.unwrap().name, "Acme");
    assert!(a.project_path(&acme.id).is_none());
    let key = a.create_key(&acme.id, "production").await.unwrap();
    let header = format!("Token {}", key.key);
    let on_a = a.authenticate(&header).await.unwrap();
    let on_b = b.authenticate(&header).await.unwrap();
    let id = add(&on_a, "alice", "Alice prefers email over phone calls").await;
    assert_eq!(
        on_b.get(id).await.unwrap().memory,
        "Alice prefers email over phone calls"
    );
    // Another project's handle neither finds nor reads it.
    let theirs = b.memory(&other.id).await.unwrap();
    assert_eq!(theirs.get(id).await.err().map(|e| e.status()), Some(404));
    assert!(theirs
        .search("email")
        .user("alice")
        .await
        .unwrap()
        .results
        .is_empty());
    // Revoked on b: a refuses it at its next call.
    b.revoke_key(&key.info.id).await.unwrap();
    let (code, detail) = status(a.authenticate(&header).await);
    assert_eq!(code, 401, "{detail}");
    assert!(detail.contains("revoked"), "{detail}");
    assert!(a.keys(&acme.id).await.unwrap()[0].revoked_at.is_some());
    // A wrong secret for a real key id is a 401 too.
    let forged = format!("Token {}{}", &key.key[..key.key.len() - 1], "0");
    let forged = if forged == header {
        format!("Token {}{}", &key.key[..key.key.len() - 1], "1")
    } else {
        forged
    };
    assert_eq!(status(b.authenticate(&forged).await).0, 401);
}
