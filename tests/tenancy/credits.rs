//! Credits: configurable prices, a 402 that changes nothing, model calls refused before they
//! run when the balance cannot pay, and concurrent calls (one handle or two on one file)
//! that never overspend.

use std::sync::Arc;

use memlane::credits::Prices;
use memlane::{Llm, Memory, ScriptedLlm};
use serde_json::json;

async fn open(path: &std::path::Path, llm: Option<Arc<dyn Llm>>) -> Memory {
    crate::common::open_with_llm(path, 64, llm).await
}

/// Spends the balance down to `left`.
async fn drain_to(memory: &Memory, left: u64) {
    let balance = memory.credits().await.unwrap();
    let charge = memlane::store::WriteBatch::new(Vec::new(), balance - left);
    memlane::store::apply(&**memory.store(), charge)
        .await
        .unwrap();
    assert_eq!(memory.credits().await.unwrap(), left);
}

#[tokio::test]
async fn prices_are_per_project_and_every_call_reports_its_charge() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([
        json!({"facts": [{"text": "Ann likes tea"}, {"text": "Ann lives in Oslo"}]}).to_string(),
        json!({"facts": []}).to_string(),
    ]);
    let memory = open(&dir.path().join("m.db"), Some(Arc::new(llm))).await;
    assert_eq!(memory.prices().await.unwrap(), Prices::default());
    let prices = Prices {
        add: 3,
        update: 5,
        inference: 7,
    };
    memory.set_prices(prices).await.unwrap();
    let start = memory.credits().await.unwrap();

    let verbatim = memory
        .add(vec![
            memlane::Message::user("a"),
            memlane::Message::user("b"),
        ])
        .user("ann")
        .infer(false)
        .await
        .unwrap();
    assert_eq!(verbatim.credits_used, 6);
    assert_eq!(verbatim.credits_remaining, start - 6);

    let inferred = memory
        .add("I like tea and live in Oslo")
        .user("ann")
        .await
        .unwrap();
    assert_eq!(inferred.results.len(), 2);
    assert_eq!(
        inferred.credits_used,
        7 + 2 * 3,
        "the model call and two memories"
    );
    let nothing = memory.add("hi!").user("ann").await.unwrap();
    assert!(nothing.results.is_empty());
    assert_eq!(
        nothing.credits_used, 7,
        "the model ran, so its price is paid"
    );

    let id = verbatim.results[0].id;
    let updated = memory.update(id).text("c").await.unwrap();
    assert_eq!(updated.credits_used, 5);
    let deleted = memory.delete(id).await.unwrap();
    assert_eq!(deleted.credits_used, 0, "erasure is free");
    assert_eq!(
        memory.credits().await.unwrap(),
        start - 6 - 13 - 7 - 5,
        "the balance is the sum of the charges"
    );

    // Prices persist with the project, and top-ups add up.
    drop(memory);
    let memory = open(&dir.path().join("m.db"), None).await;
    assert_eq!(memory.prices().await.unwrap(), prices);
    let before = memory.credits().await.unwrap();
    assert_eq!(memory.add_credits(10).await.unwrap(), before + 10);
}

#[tokio::test]
async fn an_unaffordable_call_is_a_402_that_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::new([json!({"facts": [{"text": "Ann likes tea"}]}).to_string()]);
    let memory = open(&dir.path().join("m.db"), Some(Arc::new(llm.clone()))).await;
    let kept = memory
        .add("kept")
        .user("ann")
        .infer(false)
        .await
        .unwrap()
        .results[0]
        .id;
    drain_to(&memory, 1).await;

    let err = memory
        .add(vec![
            memlane::Message::user("x"),
            memlane::Message::user("y"),
        ])
        .user("ann")
        .infer(false)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 402);
    assert!(err.detail().contains("credit"), "{}", err.detail());
    assert_eq!(memory.list().user("ann").await.unwrap().results.len(), 1);

    // A model call the balance cannot pay is refused before it runs.
    memory
        .set_prices(Prices {
            inference: 2,
            ..Prices::default()
        })
        .await
        .unwrap();
    assert_eq!(
        memory
            .add("I like tea")
            .user("ann")
            .await
            .unwrap_err()
            .status(),
        402
    );
    assert_eq!(llm.requests().len(), 0, "the model was not called");
    assert_eq!(memory.credits().await.unwrap(), 1);

    // Deleting still works on an empty balance.
    drain_to(&memory, 0).await;
    memory.delete(kept).await.unwrap();
    assert_eq!(
        memory.update(kept).text("z").await.unwrap_err().status(),
        404
    );
}

/// Many concurrent paying calls, through one handle and through two handles on one file,
/// never spend more than the balance: exactly as many succeed as it can pay for.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_never_overspend() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let one = open(&path, None).await;
    let two = open(&path, None).await;
    drain_to(&one, 25).await;
    let mut tasks = Vec::new();
    for i in 0..60 {
        let memory = if i % 2 == 0 { one.clone() } else { two.clone() };
        tasks.push(tokio::spawn(async move {
            memory
                .add(format!("fact {i}"))
                .user("ann")
                .infer(false)
                .await
                .map(|r| r.credits_remaining)
        }));
    }
    let mut paid = 0;
    let mut refused = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => paid += 1,
            Err(e) => {
                assert_eq!(e.status(), 402, "{e}");
                refused += 1;
            }
        }
    }
    assert_eq!((paid, refused), (25, 35));
    assert_eq!(one.credits().await.unwrap(), 0);
    assert_eq!(two.list().user("ann").await.unwrap().results.len(), 25);
}
