//! A memory without an embedder (keyword search, verbatim adds, no model file), and
//! `reembed`: giving a store an embedding model, or moving it to another, while other
//! handles on the old model are refused.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use memlane::progress::Task;
use memlane::{EmbedMode, Embedder, HashEmbedder, Memory, SearchMode};

use crate::common::{add, Reports};

/// A memory on `path` without an embedder.
async fn keyword_only(path: &std::path::Path) -> Memory {
    Memory::builder()
        .path(path)
        .without_embedder()
        .build()
        .await
        .unwrap()
}

async fn with_embedder(
    path: &std::path::Path,
    embedder: Arc<dyn Embedder>,
) -> memlane::Result<Memory> {
    Memory::builder()
        .path(path)
        .embedder(embedder)
        .build()
        .await
}

/// A hashing embedder's vectors reversed: another model of the same dimension, whose
/// cosines differ from the hashing embedder's.
#[derive(Debug)]
struct Reversed(HashEmbedder, String);

impl Reversed {
    fn new(dim: usize) -> Self {
        Reversed(HashEmbedder::new(dim), format!("reversed-{dim}"))
    }
}

#[async_trait]
impl Embedder for Reversed {
    async fn embed(&self, texts: &[String], mode: EmbedMode) -> memlane::Result<Vec<Vec<f32>>> {
        let mut vectors = self.0.embed(texts, mode).await?;
        vectors.iter_mut().for_each(|v| v.reverse());
        Ok(vectors)
    }
    fn dimension(&self) -> usize {
        self.0.dimension()
    }
    fn model_id(&self) -> &str {
        &self.1
    }
}

/// A hashing embedder that fails once it has embedded `limit` texts.
#[derive(Debug)]
struct FailsAfter(HashEmbedder, AtomicUsize, usize);

#[async_trait]
impl Embedder for FailsAfter {
    async fn embed(&self, texts: &[String], mode: EmbedMode) -> memlane::Result<Vec<Vec<f32>>> {
        if self.1.fetch_add(texts.len(), Ordering::SeqCst) + texts.len() > self.2 {
            return Err(memlane::Error::provider(
                "the embedding server went away",
                true,
            ));
        }
        self.0.embed(texts, mode).await
    }
    fn dimension(&self) -> usize {
        self.0.dimension()
    }
    fn model_id(&self) -> &str {
        self.0.model_id()
    }
}

async fn texts(memory: &Memory, query: &str, mode: SearchMode) -> memlane::Result<Vec<String>> {
    Ok(memory
        .search(query)
        .user("ana")
        .mode(mode)
        .top_k(3)
        .await?
        .results
        .into_iter()
        .map(|hit| hit.record.memory)
        .collect())
}

/// Ana's memories by vector, with their scores.
async fn scored(memory: &Memory, query: &str) -> Vec<(String, f32)> {
    let hits = memory
        .search(query)
        .user("ana")
        .mode(SearchMode::Vector)
        .await
        .unwrap()
        .results;
    assert!(!hits.is_empty());
    hits.into_iter()
        .map(|hit| (hit.record.memory, hit.score))
        .collect()
}

#[tokio::test]
async fn a_memory_without_an_embedder_stores_verbatim_and_searches_by_keyword() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let memory = keyword_only(&path).await;
    assert!(memory.embedder().is_none());
    let added = memory
        .add("I keep bees on the roof")
        .user("ana")
        .await
        .unwrap();
    assert!(!added.inferred);
    add(&memory, "ana", "My sister lives in Lyon").await;
    // The default mode is keyword: no query is embedded.
    let hits = memory.search("bees").user("ana").await.unwrap().results;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].record.memory, "I keep bees on the roof");
    for mode in [SearchMode::Vector, SearchMode::Hybrid] {
        let refused = texts(&memory, "bees", mode).await.unwrap_err();
        assert_eq!(refused.status(), 503, "{mode:?}");
        assert!(refused.to_string().contains("reembed"), "{refused}");
    }
    assert_eq!(
        memory
            .embed("bees", EmbedMode::Query)
            .await
            .unwrap_err()
            .status(),
        503
    );
    assert_eq!(
        memory
            .retrieve("bees", "ana", 3)
            .await
            .unwrap_err()
            .status(),
        503
    );
    assert_eq!(memory.consolidate().await.unwrap_err().status(), 503);
    // Everything else works; an export says there is no model, and holds no vectors.
    let export = memory.export().await.unwrap();
    assert_eq!((export.embedding_model.as_str(), export.dimension), ("", 0));
    assert_eq!(export.memories.len(), 2);
    assert!(export.memories.iter().all(|m| m.vector.is_empty()));
    // A new text is searched by its new words.
    memory
        .update(added.results[0].id)
        .text("I keep wasps on the roof")
        .await
        .unwrap();
    assert_eq!(
        texts(&memory, "wasps", SearchMode::Keyword).await.unwrap(),
        ["I keep wasps on the roof"]
    );
    memory.delete(added.results[0].id).await.unwrap();
    assert!(texts(&memory, "wasps", SearchMode::Keyword)
        .await
        .unwrap()
        .is_empty());
    memory.close().await.unwrap();

    // The store remembers it has no model: an embedder is refused, with the way out.
    let refused = with_embedder(&path, Arc::new(HashEmbedder::new(16)))
        .await
        .unwrap_err();
    assert_eq!(refused.status(), 409);
    assert!(
        refused.to_string().contains("without_embedder") && refused.to_string().contains("reembed"),
        "{refused}"
    );
    let again = keyword_only(&path).await;
    assert_eq!(
        texts(&again, "Lyon", SearchMode::Keyword)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn reembed_gives_a_store_made_without_an_embedder_vector_search() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let memory = keyword_only(&path).await;
    // More than one chunk of the walk.
    let n = 300;
    for i in 0..n {
        add(&memory, "filler", &format!("note {i} about nothing")).await;
    }
    add(&memory, "ana", "I am allergic to peanuts").await;
    let total = n + 1;
    let reports = Reports::default();
    let result = memory
        .reembed(Arc::new(HashEmbedder::new(32)))
        .on_progress(reports.callback())
        .await
        .unwrap();
    assert!(result.switched);
    assert_eq!(result.embedded as u64, total);
    assert_eq!(
        (result.model.as_str(), result.dimension),
        ("memlane-hash-32", 32)
    );
    let progress = reports.of_each(Task::Reembed);
    assert!(
        !reports.of_each(Task::RebuildIndex).is_empty(),
        "the new index is built"
    );
    assert_eq!(progress.first(), Some(&(0, total)));
    assert_eq!(progress.last(), Some(&(total, total)));
    assert!(progress.len() >= 3, "one report per chunk: {progress:?}");
    // Vector and hybrid search work now, on this handle and on the store reopened with it.
    assert_eq!(
        texts(&memory, "allergic to peanuts", SearchMode::Vector)
            .await
            .unwrap()[0],
        "I am allergic to peanuts"
    );
    assert!(memory.embedder().is_some());
    memory.close().await.unwrap();
    let reopened = with_embedder(&path, Arc::new(HashEmbedder::new(32)))
        .await
        .unwrap();
    assert_eq!(
        texts(&reopened, "allergic to peanuts", SearchMode::Hybrid)
            .await
            .unwrap()[0],
        "I am allergic to peanuts"
    );
    // A second reembed with the same model has nothing left to do.
    let again = reopened
        .reembed(Arc::new(HashEmbedder::new(32)))
        .await
        .unwrap();
    assert!(!again.switched);
    assert_eq!(again.embedded, 0);
}

#[tokio::test]
async fn reembed_moves_a_store_to_another_model_and_refuses_handles_on_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let a = with_embedder(&path, Arc::new(HashEmbedder::new(24)))
        .await
        .unwrap();
    add(&a, "ana", "I am allergic to peanuts").await;
    add(&a, "ana", "My bike is a red Bianchi").await;
    a.save_index().await.unwrap();
    let b = with_embedder(&path, Arc::new(HashEmbedder::new(24)))
        .await
        .unwrap();
    assert_eq!(
        texts(&b, "peanuts", SearchMode::Vector)
            .await
            .unwrap()
            .len(),
        2
    );

    // Same dimension, another model: the saved index of the old one must not be used.
    let result = a.reembed(Arc::new(Reversed::new(24))).await.unwrap();
    assert!(result.switched);
    assert_eq!(result.embedded, 2);
    // Its index holds the new vectors: it ranks as an index built afresh from the store.
    let fresh = Memory::builder()
        .path(&path)
        .index_dir(dir.path().join("fresh.index"))
        .embedder(Arc::new(Reversed::new(24)))
        .build()
        .await
        .unwrap();
    let query = "allergic to peanuts";
    assert_eq!(scored(&a, query).await, scored(&fresh, query).await);

    // The handle still on the old model: its searches by vector and its adds are refused,
    // and write nothing; keyword search and deletes go on.
    for mode in [SearchMode::Vector, SearchMode::Hybrid] {
        let refused = texts(&b, "peanuts", mode).await.unwrap_err();
        assert_eq!(refused.status(), 409, "{mode:?}: {refused}");
        assert!(refused.to_string().contains("reversed-24"), "{refused}");
    }
    let refused = b.add("I moved to Porto").user("ana").await.unwrap_err();
    assert_eq!(refused.status(), 409, "{refused}");
    assert!(texts(&a, "Porto", SearchMode::Keyword)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        texts(&b, "Bianchi", SearchMode::Keyword)
            .await
            .unwrap()
            .len(),
        1
    );

    // Reopened: the old model is refused, the new one finds what it embedded.
    a.close().await.unwrap();
    drop(b);
    let old = with_embedder(&path, Arc::new(HashEmbedder::new(24)))
        .await
        .unwrap_err();
    assert_eq!(old.status(), 409);
    let new = with_embedder(&path, Arc::new(Reversed::new(24)))
        .await
        .unwrap();
    let query = Reversed::new(24)
        .embed(&["allergic to peanuts".to_owned()], EmbedMode::Query)
        .await
        .unwrap()
        .remove(0);
    let by_vector = new.search_vector(query).user("ana").top_k(1).await.unwrap();
    assert_eq!(
        by_vector.results[0].record.memory,
        "I am allergic to peanuts"
    );
    assert_eq!(
        scored(&new, "red bike").await,
        scored(&fresh, "red bike").await
    );
    drop(fresh);
    // And moves on to a model of another dimension.
    let result = new.reembed(Arc::new(HashEmbedder::new(40))).await.unwrap();
    assert_eq!((result.dimension, result.embedded), (40, 2));
    assert_eq!(
        texts(&new, "red Bianchi", SearchMode::Hybrid)
            .await
            .unwrap()[0],
        "My bike is a red Bianchi"
    );
    add(&new, "ana", "I moved to Porto").await;
    assert_eq!(
        texts(&new, "moved to Porto", SearchMode::Vector)
            .await
            .unwrap()[0],
        "I moved to Porto"
    );
}

#[tokio::test]
async fn an_interrupted_reembed_is_finished_by_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let memory = keyword_only(&path).await;
    let n = 600;
    for i in 0..n {
        add(&memory, "ana", &format!("memory {i} of many")).await;
    }
    // Dies after two chunks (256 each).
    let failing = FailsAfter(HashEmbedder::new(16), AtomicUsize::new(0), 300);
    let failed = memory.reembed(Arc::new(failing)).await.unwrap_err();
    assert_eq!(failed.status(), 502, "{failed}");
    // The store is on the new model; the handle still has no embedder, and adds refuse to
    // write memories without vectors into it.
    assert!(memory.embedder().is_none());
    assert_eq!(
        memory
            .add("one more")
            .user("ana")
            .await
            .unwrap_err()
            .status(),
        409
    );
    drop(memory);
    let reopened = with_embedder(&path, Arc::new(HashEmbedder::new(16)))
        .await
        .unwrap();
    let found = reopened
        .search("memory of many")
        .user("ana")
        .mode(SearchMode::Vector)
        .top_k(1000)
        .await
        .unwrap()
        .results
        .len();
    assert_eq!(found, 256, "only the first chunk was written");
    let rest = reopened
        .reembed(Arc::new(HashEmbedder::new(16)))
        .await
        .unwrap();
    assert!(!rest.switched);
    assert_eq!(rest.embedded, n - 256);
    let found = reopened
        .search("memory of many")
        .user("ana")
        .mode(SearchMode::Vector)
        .top_k(1000)
        .await
        .unwrap()
        .results
        .len();
    assert_eq!(found, n);
}

/// A hashing embedder that waits for a go the first time it is asked to embed.
#[derive(Debug)]
struct Paused {
    inner: HashEmbedder,
    paused: std::sync::atomic::AtomicBool,
    started: Arc<tokio::sync::Notify>,
    go: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl Embedder for Paused {
    async fn embed(&self, texts: &[String], mode: EmbedMode) -> memlane::Result<Vec<Vec<f32>>> {
        if !self.paused.swap(true, Ordering::SeqCst) {
            self.started.notify_one();
            self.go.notified().await;
        }
        self.inner.embed(texts, mode).await
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
}

#[tokio::test]
async fn while_a_memory_re_embeds_its_vector_searches_say_so_and_keyword_search_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let memory = with_embedder(&dir.path().join("m.db"), Arc::new(HashEmbedder::new(16)))
        .await
        .unwrap();
    add(&memory, "ana", "I am allergic to peanuts").await;
    let (started, go) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let paused = Paused {
        inner: HashEmbedder::new(24),
        paused: Default::default(),
        started: Arc::clone(&started),
        go: Arc::clone(&go),
    };
    let reembedding = {
        let memory = memory.clone();
        tokio::spawn(async move { memory.reembed(Arc::new(paused)).await })
    };
    started.notified().await;
    let busy = texts(&memory, "peanuts", SearchMode::Hybrid)
        .await
        .unwrap_err();
    assert_eq!(busy.status(), 503, "{busy}");
    assert!(busy.to_string().contains("being re-embedded"), "{busy}");
    assert_eq!(
        texts(&memory, "peanuts", SearchMode::Keyword)
            .await
            .unwrap()
            .len(),
        1
    );
    go.notify_one();
    let done = reembedding.await.unwrap().unwrap();
    assert_eq!(done.dimension, 24);
    assert_eq!(
        texts(&memory, "peanuts", SearchMode::Hybrid)
            .await
            .unwrap()
            .len(),
        1
    );
}
