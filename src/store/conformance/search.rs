//! Reads: scans in `created_at` order with cursors, and keyword search against the
//! reference BM25.

use serde_json::json;
use uuid::Uuid;

use super::{insert_all, record, row, scan_all, t};
use crate::filter::Filter;
use crate::record::MemoryRecord;
use crate::store::keyword::rank_rows;
use crate::store::{
    apply, Among, KeywordHits, KeywordQuery, KeywordScore, MemoryUpdate, Scan, Store, Write,
    WriteBatch,
};
use crate::text;

/// Scans: newest first by `created_at` (backdated rows sort where they happened), stable
/// pages under concurrent inserts, counts, expiry, and the keys of a filter.
pub(super) async fn scans(store: &dyn Store) {
    let mut records = Vec::new();
    for i in 0..25 {
        // Inserted in an order that is not the order of `created_at`.
        let at = t((i * 7) % 25);
        let mut r = record(&format!("fact {i}"), "pat", at);
        if i % 5 == 0 {
            r.expiration_date = Some(t(100));
        }
        records.push(r);
    }
    let refs: Vec<&MemoryRecord> = records.iter().collect();
    insert_all(store, &refs).await;
    let mut newest_first: Vec<&MemoryRecord> = records.iter().collect();
    newest_first.sort_by_key(|r| std::cmp::Reverse(r.created_at));
    let want: Vec<Uuid> = newest_first.iter().map(|r| r.id).collect();

    // Pages of 7, the count over all pages; a row arriving mid-way shifts nothing.
    let mut seen = Vec::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let mut scan = Scan::new(Filter::user("pat"), t(50), 7);
        scan.after = after;
        let page = store.scan(&scan).await.unwrap();
        assert_eq!(page.count, if pages == 0 { 25 } else { 26 });
        seen.extend(page.rows.iter().map(|r| r.record.id));
        pages += 1;
        if pages == 1 {
            let late = record("late fact", "pat", t(60));
            insert_all(store, &[&late]).await;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, want, "every row once, newest first");

    // Expired rows are hidden at `now` unless asked for.
    assert_eq!(
        scan_all(store, Filter::user("pat"), t(200)).await.len(),
        26 - 5
    );
    let mut scan = Scan::new(Filter::user("pat"), t(200), 1000);
    scan.include_expired = true;
    assert_eq!(store.scan(&scan).await.unwrap().rows.len(), 26);
    assert_eq!(
        scan_all(
            store,
            Filter::from_json(&json!({"user_id": "pat", "created_at": {"lt": t(5).to_rfc3339()}}))
                .unwrap(),
            t(50)
        )
        .await
        .len(),
        5,
        "filters on created_at see when the rows happened"
    );

    // Keys: live, unexpired (unless asked), ascending.
    let keys = store
        .keys(Among::new(&Filter::user("pat"), t(50), false))
        .await
        .unwrap();
    assert_eq!(keys.len(), 26);
    assert!(keys.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(
        store
            .keys(Among::new(&Filter::user("pat"), t(200), false))
            .await
            .unwrap()
            .len(),
        21
    );
    assert_eq!(
        store
            .keys(Among::new(&Filter::user("pat"), t(200), true))
            .await
            .unwrap()
            .len(),
        26
    );
    assert!(store
        .keys(Among::new(&Filter::user("nobody"), t(0), true))
        .await
        .unwrap()
        .is_empty());
}

/// Keyword search: the store's own index (if any) gives exactly the reference BM25
/// ([`rank_rows`]), for pinned owners and other filters, alone and several at once; deleted
/// memories are never hits.
pub(super) async fn keyword(store: &dyn Store) {
    let users = ["kim", "o'brien \"x\"", "Zoë", "lee"];
    let words = [
        "tea", "green", "mint", "coffee", "Lisbon", "jazz", "hiking", "bread", "Malmö",
    ];
    let mut records = Vec::new();
    for i in 0..60 {
        let text = format!(
            "{} and {} {} note {i}",
            words[i % words.len()],
            words[(i / 3) % words.len()],
            words[(i * 7) % words.len()]
        );
        let mut r = record(&text, users[i % users.len()], t(1_000 + i as i64));
        if i % 5 == 0 {
            r.context = Some(format!("talking about {}", words[(i / 2) % words.len()]));
        }
        if i % 2 == 0 {
            r.owners.agent_id = Some("helper".into());
        }
        records.push(r);
    }
    let refs: Vec<&MemoryRecord> = records.iter().collect();
    insert_all(store, &refs).await;
    let gone = records[0].id;
    apply(
        store,
        WriteBatch::new(
            vec![Write::Delete {
                id: gone,
                at: t(2_000),
                input: Vec::new(),
                expect: None,
            }],
            0,
        ),
    )
    .await
    .unwrap();
    // Memories re-embedded with their text unchanged: each keeps its row and takes a new
    // key, so the order of keys is not the order of rows, and equal scores are ranked by key.
    let reembedded: Vec<Write> = records[1..9]
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut update = MemoryUpdate::new(r.id, t(2_100 + i as i64));
            update.text = Some((r.memory.clone(), vec![0.0, 1.0]));
            Write::Update(update)
        })
        .collect();
    apply(store, WriteBatch::new(reembedded, 0)).await.unwrap();
    let queries: Vec<Vec<String>> = [
        "green tea",
        "tea tea Lisbon?",
        "what about malmo bread and jazz",
        "\"mint\" OR coffee*",
        "nothing matches this",
        "",
    ]
    .iter()
    .map(|q| text::query_terms(q))
    .collect();
    let mut compared = 0;
    // Plain BM25, and terms weighed as in a store of a thousand memories (this one holds a
    // handful): the floor changes the scores, and every store applies it alike.
    let (mut plain, mut floored) = (Vec::new(), Vec::new());
    // A limit below the matches (1, 2, 5) as well as above them: the hits at the cut, ties
    // broken by key, and, where the filter is not the owners' index's, rows it refuses
    // among the best.
    let mut cut = 0;
    for (user, min_rows, limit) in users
        .iter()
        .flat_map(|u| [(*u, 0), (*u, 1_000)])
        .flat_map(|(u, floor)| [1, 2, 5, 100].map(|limit| (u, floor, limit)))
    {
        for filter in [
            Filter::user(user),
            Filter::user(user).and(Filter::agent("helper")),
            Filter::Or(vec![Filter::user(user)]),
            Filter::all(),
        ] {
            let query = KeywordQuery {
                queries: &queries,
                filter: &filter,
                now: t(3_000),
                include_expired: false,
                limit,
                min_rows,
            };
            let want = rank_rows(store, query).await.unwrap();
            cut += want.iter().filter(|hits| hits.len() == limit).count();
            if limit == 100 && !filter.is_all() {
                if min_rows == 0 {
                    &mut plain
                } else {
                    &mut floored
                }
                .push(want.clone());
            }
            let Some(index) = store.keyword_index() else {
                continue;
            };
            let got = index.search(query).await.unwrap();
            assert_eq!(got.len(), queries.len());
            for ((g, w), q) in got.iter().zip(&want).zip(&queries) {
                let ids =
                    |hits: &[(u64, KeywordScore)]| hits.iter().map(|h| h.0).collect::<Vec<_>>();
                assert_eq!(ids(g), ids(w), "{user} / {q:?}");
                for ((_, a), (_, b)) in g.iter().zip(w) {
                    assert!(same_score(a, b), "{q:?}: {a:?} vs {b:?}");
                }
                compared += g.len();
            }
            // One search alone ranks as it does among others.
            for (i, q) in queries.iter().enumerate() {
                let alone = index
                    .search(KeywordQuery {
                        queries: std::slice::from_ref(q),
                        ..query
                    })
                    .await
                    .unwrap();
                assert_eq!(alone[0], got[i], "{q:?}");
            }
        }
    }
    if store.keyword_index().is_some() {
        assert!(compared > 100, "the queries match: {compared}");
    }
    assert!(cut > 100, "the limits cut the hits: {cut}");
    let relative = |hits: &[KeywordHits]| -> Vec<f32> {
        hits.iter()
            .flatten()
            .flatten()
            .map(|h| h.1.relative)
            .collect()
    };
    let (plain, floored) = (relative(&plain), relative(&floored));
    assert_eq!(plain.len(), floored.len(), "the floor keeps the same hits");
    assert!(
        plain
            .iter()
            .zip(&floored)
            .any(|(a, b)| (a - b).abs() > 1e-3),
        "the floor changes some scores"
    );
    // Deleted memories and other owners' memories are never hits.
    let all_hits = {
        let filter = Filter::all();
        let query = KeywordQuery {
            queries: &queries,
            filter: &filter,
            now: t(3_000),
            include_expired: false,
            limit: 1_000,
            min_rows: 0,
        };
        match store.keyword_index() {
            Some(index) => index.search(query).await.unwrap(),
            None => rank_rows(store, query).await.unwrap(),
        }
    };
    let gone_key = row(store, gone).await.key;
    assert!(all_hits.iter().flatten().all(|(key, _)| *key != gone_key));
    assert!(all_hits[4].is_empty() && all_hits[5].is_empty());
    let nobody = Filter::user("nobody");
    let none = rank_rows(
        store,
        KeywordQuery {
            queries: &queries,
            filter: &nobody,
            now: t(3_000),
            include_expired: false,
            limit: 10,
            min_rows: 0,
        },
    )
    .await
    .unwrap();
    assert!(none.iter().all(Vec::is_empty));
}

/// Whether two keyword scores agree, each part to 1e-4 (relative, for BM25).
pub fn same_score(a: &KeywordScore, b: &KeywordScore) -> bool {
    (a.bm25 - b.bm25).abs() <= 1e-4 * b.bm25.abs().max(1.0)
        && (a.relative - b.relative).abs() <= 1e-4
        && (a.coverage - b.coverage).abs() <= 1e-4
}
