//! Keyword and hybrid search on a real SQLite file: same filters, threshold and lifecycle
//! guarantees as vector search, and a keyword index that always agrees with the rows.

use std::path::Path;
use std::sync::Arc;

use chrono::{Duration, Utc};
use memlane::store::MemStore;
use memlane::{HashEmbedder, Memory, Message, SearchMode};
use serde_json::json;
use uuid::Uuid;

use crate::common::add;

async fn open(path: &Path) -> Memory {
    crate::common::open(path, 384).await
}

async fn ids(memory: &Memory, query: &str, mode: SearchMode) -> Vec<Uuid> {
    let hits = memory.search(query).mode(mode).top_k(20).await.unwrap();
    assert!(hits.results.iter().all(|h| (0.0..=1.0).contains(&h.score)));
    assert!(hits.results.windows(2).all(|w| w[0].score >= w[1].score));
    hits.results.iter().map(|h| h.record.id).collect()
}

#[tokio::test]
async fn keyword_index_follows_add_update_delete_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kw.db");
    let (zed, other) = {
        let memory = open(&path).await;
        let zed = add(&memory, "alice", "My cousin Zebedee lives in Reykjavik").await;
        let other = add(&memory, "alice", "I like long walks").await;
        for mode in [SearchMode::Keyword, SearchMode::Hybrid] {
            assert_eq!(
                ids(&memory, "Reykjavik", mode).await.first(),
                Some(&zed),
                "{mode:?}"
            );
        }
        // The word leaves with an update and arrives with another.
        memory
            .update(zed)
            .text("My cousin Zebedee moved to Oslo")
            .await
            .unwrap();
        assert!(!ids(&memory, "Reykjavik", SearchMode::Keyword)
            .await
            .contains(&zed));
        assert_eq!(ids(&memory, "Oslo", SearchMode::Keyword).await, vec![zed]);
        memory
            .update(other)
            .text("I like long walks around Oslo")
            .await
            .unwrap();
        let mut both = ids(&memory, "Oslo", SearchMode::Keyword).await;
        both.sort();
        let mut want = vec![zed, other];
        want.sort();
        assert_eq!(both, want);
        (zed, other)
    };
    let memory = open(&path).await;
    assert_eq!(
        ids(&memory, "Zebedee", SearchMode::Keyword).await,
        vec![zed]
    );
    memory.delete(zed).await.unwrap();
    for mode in [SearchMode::Keyword, SearchMode::Hybrid, SearchMode::Vector] {
        assert!(
            !ids(&memory, "Zebedee Oslo", mode).await.contains(&zed),
            "{mode:?} returned a deleted memory"
        );
    }
    memory.delete_all().user("alice").await.unwrap();
    for mode in [SearchMode::Keyword, SearchMode::Hybrid] {
        assert!(
            ids(&memory, "walks Oslo", mode).await.is_empty(),
            "{mode:?}: {other} came back"
        );
    }
}

#[tokio::test]
async fn filters_threshold_and_expiry_apply_to_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(&dir.path().join("f.db")).await;
    let a = memory
        .add("The wifi password is hunter2")
        .user("alice")
        .metadata(json!({"room": "office"}))
        .categories(["secrets"])
        .infer(false)
        .await
        .unwrap()
        .results[0]
        .id;
    let b = add(&memory, "bob", "The wifi password is swordfish").await;
    let soon = memory
        .add("The guest wifi password is temporary")
        .user("alice")
        .expiry(Utc::now() + Duration::milliseconds(300))
        .infer(false)
        .await
        .unwrap()
        .results[0]
        .id;
    for mode in [SearchMode::Keyword, SearchMode::Hybrid, SearchMode::Vector] {
        let only_alice = memory
            .search("wifi password")
            .user("alice")
            .mode(mode)
            .await
            .unwrap();
        assert!(
            only_alice
                .results
                .iter()
                .all(|h| h.record.owners.user_id.as_deref() == Some("alice")),
            "{mode:?}"
        );
        assert!(
            only_alice.results.iter().any(|h| h.record.id == a),
            "{mode:?}"
        );
        let by_meta = memory
            .search("wifi password")
            .metadata(json!({"room": "office"}))
            .mode(mode)
            .await
            .unwrap();
        assert_eq!(
            by_meta
                .results
                .iter()
                .map(|h| h.record.id)
                .collect::<Vec<_>>(),
            vec![a],
            "{mode:?}"
        );
        let by_cat = memory
            .search("wifi")
            .categories(["secrets"])
            .mode(mode)
            .await
            .unwrap();
        assert_eq!(by_cat.results.len(), 1, "{mode:?}");
        let by_json = memory
            .search("wifi")
            .filters(json!({"NOT": {"user_id": "alice"}}))
            .mode(mode)
            .await
            .unwrap();
        assert_eq!(
            by_json
                .results
                .iter()
                .map(|h| h.record.id)
                .collect::<Vec<_>>(),
            vec![b],
            "{mode:?}"
        );
        let all = memory.search("wifi password").mode(mode).await.unwrap();
        let cut = all.results[1].score;
        let strict = memory
            .search("wifi password")
            .mode(mode)
            .threshold(cut)
            .await
            .unwrap();
        assert!(
            strict.results.iter().all(|h| h.score >= cut) && strict.results.len() >= 2,
            "{mode:?}"
        );
        assert!(
            strict.results.len() < all.results.len() || all.results.iter().all(|h| h.score >= cut)
        );
    }
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    for mode in [SearchMode::Keyword, SearchMode::Hybrid, SearchMode::Vector] {
        let hits = memory
            .search("guest wifi temporary")
            .mode(mode)
            .await
            .unwrap();
        assert!(
            hits.results.iter().all(|h| h.record.id != soon),
            "{mode:?} returned an expired memory"
        );
        let hits = memory
            .search("guest wifi temporary")
            .mode(mode)
            .include_expired(true)
            .await
            .unwrap();
        assert!(hits.results.iter().any(|h| h.record.id == soon), "{mode:?}");
    }
}

#[tokio::test]
async fn query_text_is_data_not_fts_syntax() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(&dir.path().join("q.db")).await;
    let id = add(
        &memory,
        "u",
        "Meeting at NEAR the \"old\" mill (north) at 5pm",
    )
    .await;
    // (query, shares a word with the memory)
    for (q, shares) in [
        ("NEAR(old mill)", true),
        ("\"old\" AND mill*", true),
        ("north) OR (", true),
        ("col:mill ^old", true),
        ("' ; DROP TABLE memories; --", false),
        ("***", false),
        ("-", false),
    ] {
        let hits = memory
            .search(q)
            .mode(SearchMode::Keyword)
            .await
            .unwrap_or_else(|e| panic!("{q:?}: {e}"));
        let found = hits.results.first().map(|h| h.record.id) == Some(id);
        assert_eq!(found, shares, "{q:?}");
        memory
            .search(q)
            .mode(SearchMode::Hybrid)
            .await
            .unwrap_or_else(|e| panic!("{q:?}: {e}"));
    }
    assert!(
        memory.get(id).await.unwrap().memory.starts_with("Meeting"),
        "the table is still there"
    );
    assert_eq!(
        memory
            .search_vector(vec![1.0; 384])
            .mode(SearchMode::Keyword)
            .await
            .unwrap_err()
            .status(),
        400
    );
}

#[tokio::test]
async fn a_store_from_before_the_keyword_index_is_backfilled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let id = {
        let memory = open(&path).await;
        add(&memory, "u", "The spare key hides under the blue flowerpot").await
    };
    // Put the file back to schema version 2, as written before the keyword index existed.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(crate::common::BEFORE_VALIDITY).unwrap();
        conn.execute_batch(
            "DROP TRIGGER memories_fts_insert; DROP TRIGGER memories_fts_update; \
             DROP TRIGGER memories_fts_delete; DROP TABLE memories_fts; \
             DROP INDEX memories_created; DROP INDEX memories_user_created; \
             DROP INDEX memories_agent_created; DROP INDEX memories_app_created; \
             DROP INDEX memories_run_created; \
             CREATE INDEX memories_user ON memories (user_id, seq) WHERE deleted_at IS NULL; \
             CREATE INDEX memories_agent ON memories (agent_id, seq) WHERE deleted_at IS NULL; \
             CREATE INDEX memories_app ON memories (app_id, seq) WHERE deleted_at IS NULL; \
             CREATE INDEX memories_run ON memories (run_id, seq) WHERE deleted_at IS NULL; \
             ALTER TABLE memories DROP COLUMN owners; ALTER TABLE memories DROP COLUMN context; \
             ALTER TABLE memories DROP COLUMN version; ALTER TABLE memories DROP COLUMN terms; \
             ALTER TABLE memories DROP COLUMN context_terms; \
             ALTER TABLE memories ADD COLUMN vector BLOB NOT NULL DEFAULT x''; \
             UPDATE memories SET vector = (SELECT v.vector FROM vectors v WHERE v.key = vector_key); \
             DROP TABLE vectors; \
             DROP TABLE feedback; PRAGMA user_version = 2;",
        )
        .unwrap();
    }
    // Without its saved index, the file's vectors are all there is to search by.
    std::fs::remove_dir_all(format!("{}.index", path.display())).unwrap();
    let memory = open(&path).await;
    // Every migration since ran: the keyword index (3, rebuilt by 4, 5 and 9), context (4),
    // owners (5), feedback (6), versions and terms (7, backfilled by 8), vectors moved out
    // of the rows (10).
    assert_eq!(
        ids(&memory, "flowerpots", SearchMode::Keyword).await,
        vec![id]
    );
    // The same text: cosine 1 with the vector the file kept.
    let same = memory
        .search("The spare key hides under the blue flowerpot")
        .mode(SearchMode::Vector)
        .await
        .unwrap();
    assert_eq!(same.results.len(), 1);
    assert_eq!(same.results[0].record.id, id);
    assert!(same.results[0].score > 0.999, "{}", same.results[0].score);
    let scoped = memory
        .search("flowerpots")
        .mode(SearchMode::Keyword)
        .user("u")
        .await
        .unwrap();
    assert_eq!(scoped.results.len(), 1);
    assert_eq!(memory.get(id).await.unwrap().context, None);
}

/// A conversation stored verbatim: each message is indexed with the one before it.
async fn lisbon(memory: &Memory) -> (Uuid, Uuid) {
    let out = memory
        .add(vec![
            Message::new("Mel", "Did you ever make it to Lisbon?"),
            Message::new("Caro", "Yes, last May, for a whole week."),
        ])
        .user("u")
        .metadata(json!({"session": 3}))
        .infer(false)
        .await
        .unwrap();
    (out.results[0].id, out.results[1].id)
}

#[tokio::test]
async fn an_answer_is_found_by_its_question() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let memory = open(&path).await;
    add(&memory, "u", "Lisbon has steep hills and yellow trams").await;
    let (question, answer) = lisbon(&memory).await;
    add(&memory, "u", "Caro liked the week of rest").await;

    let q = memory.get(question).await.unwrap();
    let a = memory.get(answer).await.unwrap();
    assert_eq!(q.context, None);
    assert_eq!(
        a.context.as_deref(),
        Some("Did you ever make it to Lisbon?")
    );
    // The role is kept in metadata, beside the caller's; the caller's own `role` wins.
    assert_eq!(a.metadata["role"], "Caro");
    assert_eq!(a.metadata["session"], 3);
    let own = memory
        .add(vec![Message::user("I prefer tea")])
        .user("u")
        .metadata(json!({"role": "customer"}))
        .infer(false)
        .await
        .unwrap();
    assert_eq!(own.results[0].metadata["role"], "customer");
    // Messages in a row from one role are a list of facts, each read on its own.
    let list = memory
        .add(vec![
            Message::user("I like jazz"),
            Message::user("I own a cat"),
        ])
        .user("u")
        .infer(false)
        .await
        .unwrap();
    for added in &list.results {
        assert_eq!(memory.get(added.id).await.unwrap().context, None);
    }

    // "lisbon" is in the answer's context only: found, below the memories that say it.
    let hits = ids(&memory, "lisbon", SearchMode::Keyword).await;
    assert_eq!(hits.len(), 2 + 1, "{hits:?}");
    assert_eq!(hits[2], answer);
    // Words match by their stem.
    assert_eq!(ids(&memory, "resting", SearchMode::Keyword).await.len(), 1);

    // An update changes the text and keeps the context, through reopening.
    memory
        .update(answer)
        .text("Yes, in June, for ten days.")
        .await
        .unwrap();
    drop(memory);
    let memory = open(&path).await;
    let a = memory.get(answer).await.unwrap();
    assert_eq!(
        a.context.as_deref(),
        Some("Did you ever make it to Lisbon?")
    );
    assert!(ids(&memory, "lisbon", SearchMode::Keyword)
        .await
        .contains(&answer));
    assert!(!ids(&memory, "may", SearchMode::Keyword)
        .await
        .contains(&answer));
    assert!(ids(&memory, "june", SearchMode::Keyword)
        .await
        .contains(&answer));

    // Deleted: found by neither its text nor its context.
    memory.delete(answer).await.unwrap();
    for mode in [SearchMode::Keyword, SearchMode::Hybrid, SearchMode::Vector] {
        assert!(!ids(&memory, "lisbon june", mode).await.contains(&answer));
    }
}

#[tokio::test]
async fn the_reference_store_matches_context_and_stems_too() {
    let memory = Memory::builder()
        .store(Arc::new(MemStore::new()))
        .embedder(Arc::new(HashEmbedder::new(384)))
        .build()
        .await
        .unwrap();
    add(&memory, "u", "Lisbon has steep hills and yellow trams").await;
    let (question, answer) = lisbon(&memory).await;
    assert_eq!(
        ids(&memory, "lisbon", SearchMode::Keyword).await.last(),
        Some(&answer)
    );
    assert_eq!(
        ids(&memory, "making", SearchMode::Keyword).await,
        vec![question, answer]
    );
}

/// A hybrid candidate found by its vector knows its keyword match even when better keyword
/// matches fill the keyword candidates: it is scored by the hybrid model, not as a memory
/// that shares no word with the query (which would score it by its cosine alone, above the
/// better matches).
#[tokio::test]
async fn a_vector_candidate_keeps_its_keyword_match_beyond_the_keyword_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(&dir.path().join("deep.db")).await;
    // 80 short memories with "tea": each a better BM25 match than the long one below.
    let short: Vec<Message> = (0..80).map(|i| Message::user(format!("tea {i}"))).collect();
    memory.add(short).user("kim").infer(false).await.unwrap();
    // The long one shares "tea" and many function words with the query: function words
    // are no keywords, but the hashing embedder counts them, so it is the nearest vector.
    let long = add(
        &memory,
        "kim",
        "tea what which would could should their there these those about again ceremony",
    )
    .await;
    let query = "tea what which would could should their there these those about again";
    let keyword = memory
        .search(query)
        .user("kim")
        .mode(SearchMode::Keyword)
        .top_k(100)
        .await
        .unwrap();
    let rank = keyword.results.iter().position(|h| h.record.id == long);
    assert!(
        rank >= Some(60),
        "the long memory must rank low by words: {rank:?}"
    );
    // A top_k of 1 takes 60 candidates from each side: the long memory is among the
    // vector ones only, and is the best hit; its keyword match is known all the same.
    let hits = memory
        .search(query)
        .user("kim")
        .top_k(1)
        .await
        .unwrap()
        .results;
    assert_eq!(hits[0].record.id, long, "{hits:#?}");
    let signals = hits[0].signals;
    assert!(
        signals.keyword.is_some_and(|k| k.coverage > 0.99),
        "{signals:?}"
    );
    assert_eq!(signals.scope, 81);
    let model = memlane::Calibration::FITTED.hybrid;
    assert_eq!(hits[0].score, model.probability(&signals));
}

/// A memory stored in a conversation knows how the message it replied to, and the reply to
/// it, match the query; memories added one by one, or another user's, are nobody's
/// neighbours, and a neighbour the filter leaves out counts for nothing.
#[tokio::test]
async fn neighbours_are_the_replies_of_one_conversation_within_the_filter() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(&dir.path().join("threads.db")).await;
    let alone = add(&memory, "ana", "I bought a kayak for the lake").await;
    let talk = memory
        .add(vec![
            Message::new("ana", "Where do you paddle your kayak on weekends?"),
            Message::new("ben", "Mostly on the lake near the old mill"),
            Message::new("ana", "Lovely, I should try it"),
        ])
        .user("ana")
        .infer(false)
        .await
        .unwrap();
    let [question, answer, thanks] = [0, 1, 2].map(|i| talk.results[i].id);
    // Bob's memory is stored right after, and replies to nothing of Ana's.
    let bob = add(&memory, "bob", "Lovely, I should try it").await;
    let hits = memory
        .search("kayak lake weekends")
        .user("ana")
        .top_k(10)
        .await
        .unwrap()
        .results;
    let of = |id| hits.iter().find(|h| h.record.id == id).map(|h| h.signals);
    assert!(hits.iter().all(|h| h.record.id != bob));
    assert_eq!(of(alone).and_then(|s| s.neighbours), None);
    let q = of(question).unwrap();
    let a = of(answer).unwrap();
    // The question's neighbour is the answer, and the answer's the question and the thanks.
    assert_eq!(q.neighbours.unwrap().cosine, a.cosine.unwrap());
    assert!(a.neighbours.unwrap().cosine >= q.cosine.unwrap());
    assert!(a.neighbours.unwrap().coverage > 0.0);
    let scored = memlane::Calibration::FITTED;
    assert_eq!(
        hits.iter().find(|h| h.record.id == answer).unwrap().score,
        scored.hybrid.probability(&a)
    );
    // Only Ana's own messages: the answer (Ben's) is filtered out, so it is no neighbour.
    let hers = memory
        .search("kayak lake weekends")
        .user("ana")
        .metadata(json!({"role": "ana"}))
        .top_k(10)
        .await
        .unwrap()
        .results;
    assert!(hers.iter().all(|h| h.record.id != answer));
    let q = hers.iter().find(|h| h.record.id == question).unwrap();
    assert_eq!(q.signals.neighbours, None, "{:?}", q.signals);
    let t = hers.iter().find(|h| h.record.id == thanks);
    assert!(t.is_none_or(|t| t.signals.neighbours.is_none()));
}

/// A reply holds the message it answers as its context: its keyword match covers the
/// message's words, but only its own words are what it says (`text_coverage`), and a
/// neighbour lends a memory only the words it says itself, not the memory's own words back.
#[tokio::test]
async fn a_neighbour_lends_only_the_words_it_says_itself() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(&dir.path().join("echo.db")).await;
    let talk = memory
        .add(vec![
            Message::user("I bought a kayak for the lake"),
            Message::assistant("Enjoy it! Weekends on the water are the best."),
        ])
        .user("ana")
        .infer(false)
        .await
        .unwrap();
    let hits = memory
        .search("kayak lake")
        .user("ana")
        .top_k(10)
        .await
        .unwrap()
        .results;
    let of = |i: usize| {
        let id = talk.results[i].id;
        hits.iter().find(|h| h.record.id == id).unwrap().signals
    };
    let (said, reply) = (of(0), of(1));
    let words = |s: memlane::Signals| {
        let k = s.keyword.unwrap();
        (k.coverage, k.text_coverage)
    };
    assert_eq!(words(said), (1.0, 1.0));
    // The reply covers the query through its context only.
    assert_eq!(words(reply), (1.0, 0.0));
    assert_eq!(said.neighbours.unwrap().coverage, 0.0, "{said:?}");
    assert_eq!(reply.neighbours.unwrap().coverage, 1.0, "{reply:?}");
}

/// Every candidate of a query carries the cosine of the fifth-nearest memory its filters
/// admit, whatever the `top_k` and the mode that takes the cosine: the same in vector and
/// hybrid mode, read off the five nearest (among fewer, a missing memory counts as a
/// cosine of 0), and other users' memories are not among them.
#[tokio::test]
async fn the_fifth_nearest_is_the_same_whatever_the_top_k() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(&dir.path().join("fifth.db")).await;
    for i in 0..12 {
        add(
            &memory,
            "ana",
            &format!("note {i} about gardens and tomatoes {}", "x".repeat(i)),
        )
        .await;
    }
    add(&memory, "ana", "tomatoes tomatoes tomatoes").await;
    for i in 0..30 {
        add(&memory, "bob", &format!("tomatoes {i}")).await;
    }
    let query = "tomatoes in the garden";
    let all = memory
        .search(query)
        .user("ana")
        .mode(SearchMode::Vector)
        .top_k(13)
        .await
        .unwrap()
        .results;
    assert_eq!(all.len(), 13);
    let fifth = all[4].signals.cosine.unwrap();
    for mode in [SearchMode::Vector, SearchMode::Hybrid] {
        for k in [1, 3, 5, 13] {
            let hits = memory
                .search(query)
                .user("ana")
                .mode(mode)
                .top_k(k)
                .await
                .unwrap()
                .results;
            assert_eq!(hits.len(), k);
            for h in &hits {
                assert_eq!(h.signals.fifth_nearest, Some(fifth), "{mode:?} top_k {k}");
            }
        }
    }
    // Among fewer than five memories, the missing ones count as unrelated.
    add(&memory, "cy", "tomatoes").await;
    let few = memory.search(query).user("cy").await.unwrap().results;
    assert_eq!(few[0].signals.fifth_nearest, Some(0.0));
    // Keyword mode has no cosine, and so no reference.
    let words = memory
        .search(query)
        .user("ana")
        .mode(SearchMode::Keyword)
        .await
        .unwrap()
        .results;
    assert!(words.iter().all(|h| h.signals.fifth_nearest.is_none()));
}
