//! Entities: owner ids with their memory counts, paginated, and deleting one with all of its
//! memories (soft delete, history and events recorded), on the SQLite and in-memory stores.

use std::sync::Arc;

use memlane::ops::events::EventKind;
use memlane::store::EntityKind;
use memlane::store::{MemStore, Store};
use memlane::{HashEmbedder, Memory};

async fn memory(store: Option<Arc<dyn Store>>, dir: &std::path::Path) -> Memory {
    let b = Memory::builder().embedder(Arc::new(HashEmbedder::new(64)));
    match store {
        Some(s) => b.store(s),
        None => b.path(dir.join("m.db")),
    }
    .build()
    .await
    .unwrap()
}

async fn entities_on(memory: Memory) {
    for (user, agent, text) in [
        ("ann", Some("helper"), "ann likes tea"),
        ("ann", None, "ann lives in Oslo"),
        ("bob", Some("helper"), "bob plays chess"),
        ("cy", None, "cy swims"),
    ] {
        let mut add = memory.add(text).user(user).infer(false);
        if let Some(agent) = agent {
            add = add.agent(agent);
        }
        add.await.unwrap();
    }
    memory
        .add("a run note")
        .run("run-1")
        .infer(false)
        .await
        .unwrap();

    let page = memory.entities().await.unwrap();
    let listed: Vec<(EntityKind, &str, u64)> = page
        .results
        .iter()
        .map(|e| (e.kind, e.id.as_str(), e.memory_count))
        .collect();
    assert_eq!(
        listed,
        vec![
            (EntityKind::User, "ann", 2),
            (EntityKind::User, "bob", 1),
            (EntityKind::User, "cy", 1),
            (EntityKind::Agent, "helper", 2),
            (EntityKind::Run, "run-1", 1),
        ]
    );
    assert_eq!(page.pagination.count, 5);
    assert!(page.results.iter().all(|e| e.created_at <= e.updated_at));

    // Pages of two walk the same list.
    let mut walked = Vec::new();
    let mut cursor = None;
    loop {
        let mut request = memory.entities().page_size(2);
        if let Some(c) = cursor.take() {
            request = request.cursor(c);
        }
        let page = request.await.unwrap();
        walked.extend(page.results.iter().map(|e| (e.kind, e.id.clone())));
        match page.pagination.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(walked.len(), 5);
    let users = memory.entities().kind(EntityKind::User).await.unwrap();
    assert_eq!(users.results.len(), 3);
    assert_eq!(
        memory
            .entities()
            .cursor("nonsense")
            .await
            .unwrap_err()
            .status(),
        400
    );
    assert_eq!(
        memory.entities().page_size(0).await.unwrap_err().status(),
        400
    );

    // Deleting the agent deletes its memories, whoever else owns them, and only those.
    let before = memory.events_after(0, 1000).await.unwrap().next_cursor;
    let deleted = memory
        .delete_entity(EntityKind::Agent, "helper")
        .await
        .unwrap();
    assert_eq!(deleted.deleted.len(), 2);
    for id in &deleted.deleted {
        assert_eq!(memory.get(*id).await.unwrap_err().status(), 404);
        let history = memory.history(*id).await.unwrap();
        assert_eq!(history.last().map(|h| h.event.as_str()), Some("DELETE"));
    }
    let events = memory.events_after(before, 10).await.unwrap().results;
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|e| e.kind == EventKind::MemoryDelete));
    let listed: Vec<(EntityKind, String, u64)> = memory
        .entities()
        .await
        .unwrap()
        .results
        .into_iter()
        .map(|e| (e.kind, e.id, e.memory_count))
        .collect();
    assert_eq!(
        listed,
        vec![
            (EntityKind::User, "ann".into(), 1),
            (EntityKind::User, "cy".into(), 1),
            (EntityKind::Run, "run-1".into(), 1),
        ]
    );
    // Gone entities and bad ids.
    assert_eq!(
        memory
            .delete_entity(EntityKind::Agent, "helper")
            .await
            .unwrap_err()
            .status(),
        404
    );
    assert_eq!(
        memory
            .delete_entity(EntityKind::User, "")
            .await
            .unwrap_err()
            .status(),
        400
    );
}

#[tokio::test]
async fn entities_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    entities_on(memory(None, dir.path()).await).await;
}

#[tokio::test]
async fn entities_on_the_reference_store() {
    let dir = tempfile::tempdir().unwrap();
    entities_on(memory(Some(Arc::new(MemStore::new())), dir.path()).await).await;
}
