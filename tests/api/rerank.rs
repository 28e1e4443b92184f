//! Rerankers: a scripted one for the contract, the real model for the built-in one.

use std::sync::Arc;

use async_trait::async_trait;
#[cfg(feature = "local-embed")]
use memlane::EmbeddingReranker;
use memlane::{EmbedMode, Error, HashEmbedder, Memory, Reranker, Result, SearchMode};

/// Scores a document by its length, so the longest text wins; or misbehaves as told.
#[derive(Debug)]
enum Scripted {
    ByLength,
    WrongCount,
    NotANumber,
}

#[async_trait]
impl Reranker for Scripted {
    fn model_id(&self) -> &str {
        "scripted"
    }

    async fn rerank(&self, _query: &str, documents: &[String]) -> Result<Vec<f32>> {
        Ok(match self {
            Scripted::ByLength => documents.iter().map(|d| d.len() as f32 / 100.0).collect(),
            Scripted::WrongCount => vec![0.5],
            Scripted::NotANumber => vec![f32::NAN; documents.len()],
        })
    }
}

async fn memory(reranker: Scripted) -> Memory {
    let memory = Memory::builder()
        .embedder(Arc::new(HashEmbedder::new(64)))
        .reranker(Arc::new(reranker))
        .build()
        .await
        .unwrap();
    for text in [
        "tea",
        "green tea in the morning",
        "tea, but only with a slice of lemon and no sugar at all",
    ] {
        memory.add(text).user("u").infer(false).await.unwrap();
    }
    memory
}

#[tokio::test]
async fn the_reranker_orders_scores_and_meets_the_threshold() {
    let memory = memory(Scripted::ByLength).await;
    let hits = memory.search("tea").top_k(2).await.unwrap().results;
    let texts: Vec<&str> = hits.iter().map(|h| h.record.memory.as_str()).collect();
    assert_eq!(
        texts,
        [
            "tea, but only with a slice of lemon and no sugar at all",
            "green tea in the morning"
        ]
    );
    // The score is the reranker's (clamped to [0, 1]) and the threshold applies to it.
    assert_eq!(hits[0].score, 0.55);
    assert_eq!(hits[1].score, 0.24);
    let hits = memory.search("tea").threshold(0.3).await.unwrap().results;
    assert_eq!(hits.len(), 1);

    // Opting out, and searching by vector, rank as before.
    for request in [
        memory.search("tea").mode(SearchMode::Keyword).rerank(false),
        memory.search_vector(
            memory
                .embed("tea", EmbedMode::Query)
                .await
                .unwrap()
                .embedding,
        ),
    ] {
        let hits = request.top_k(1).await.unwrap().results;
        assert_eq!(hits[0].record.memory, "tea");
    }
}

#[tokio::test]
async fn a_misbehaving_reranker_is_a_provider_error() {
    for (reranker, detail) in [
        (Scripted::WrongCount, "returned 1 scores for 3 documents"),
        (Scripted::NotANumber, "not a number"),
    ] {
        let memory = memory(reranker).await;
        let err = memory.search("tea").await.unwrap_err();
        assert!(matches!(err, Error::Provider { .. }), "{err:?}");
        assert_eq!(err.status(), 502);
        assert!(err.detail().contains(detail), "{}", err.detail());
    }
}

#[cfg(feature = "local-embed")]
#[tokio::test]
async fn an_embedding_reranker_with_the_real_model_prefers_meaning() {
    let minilm: Arc<dyn memlane::Embedder> = Arc::new(memlane::MiniLm::load_default().unwrap());
    let memory = Memory::builder()
        .embedder(Arc::clone(&minilm))
        .reranker(Arc::new(EmbeddingReranker::new(minilm)))
        .build()
        .await
        .unwrap();
    for text in [
        "We had a picnic on the grassy bank of the river",
        "My savings are deposited at a credit union",
    ] {
        memory.add(text).user("u").infer(false).await.unwrap();
    }
    let query = "Which bank holds my money?";
    // Keyword ranking alone finds only the shared word "bank".
    let plain = memory
        .search(query)
        .mode(SearchMode::Keyword)
        .rerank(false)
        .await
        .unwrap()
        .results;
    assert!(plain[0].record.memory.contains("river"), "{plain:?}");
    // The reranker reads both candidates of a hybrid search and prefers the meaning.
    let reranked = memory.search(query).await.unwrap().results;
    assert_eq!(reranked.len(), 2);
    assert!(
        reranked[0].record.memory.contains("savings"),
        "{reranked:?}"
    );
}
