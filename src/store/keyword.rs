//! Keyword search: BM25 over the crate's own terms ([`terms`](crate::store::terms)), the same formula and
//! statistics in every store.
//!
//! A memory is a document of three parts: the terms of its text, of its context (weighted
//! [`CONTEXT_WEIGHT`]) and one token per owner id (weighted 0, but counted in its length).
//! Over the whole store's live memories (expired ones included), with `N` rows and an
//! average length `avgdl`, a query term of document frequency `df` weighs
//! `ln((N - df + 0.5) / (df + 0.5))` (at least 1e-6; a query may count `N` as at least
//! [`KeywordQuery::min_rows`]), and a row scores
//! `Σ idf · f · (k1 + 1) / (f + k1 · (1 − b + b · len / avgdl))`, `f` being the weighted
//! count of the term in the row, `k1` 1.2 and `b` 0.75: SQLite FTS5's `bm25()`.
//!
//! A store with a keyword index of its own implements [`KeywordIndex`] and must give these
//! scores (the conformance suite checks them to 1e-4); a store without one is searched by
//! [`rank_rows`], which reads its rows.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Scan, Store, VectorKey};
use crate::error::Result;
use crate::filter::Filter;
use crate::text;

/// How much a term of a memory's context counts, relative to a term of its own text.
pub const CONTEXT_WEIGHT: f32 = 0.3;

/// BM25's term-frequency saturation.
pub(crate) const BM25_K1: f64 = 1.2;
/// BM25's length normalisation.
pub(crate) const BM25_B: f64 = 0.75;
/// The weight of a term in at least half of the rows.
pub(crate) const MIN_IDF: f64 = 1e-6;
/// How many memories a weightless term must be in before a query drops it.
pub(crate) const DROPPED_WORD_MIN_ROWS: i64 = 1_000;

/// Keyword searches sharing one filter.
#[derive(Debug, Clone, Copy)]
pub struct KeywordQuery<'a> {
    /// Each search's terms (see [`query_terms`](crate::store::query_terms)).
    pub queries: &'a [Vec<String>],
    /// Which memories.
    pub filter: &'a Filter,
    /// The current time, for expiry.
    pub now: DateTime<Utc>,
    /// Whether expired memories are searched too.
    pub include_expired: bool,
    /// At most this many hits per search.
    pub limit: usize,
    /// The terms are weighed as if the store held at least this many memories (`N` of the
    /// [module](self)'s idf is `max(N, min_rows)`; lengths are the store's own); 0 for
    /// plain BM25. In a store of a few memories a term they all lack weighs several times
    /// one they hold, and a word shared by two of three weighs nothing, so relevance
    /// swings with each memory stored, another user's included. A floor keeps the weights
    /// close to equal there, and leaves a large store's as they are.
    pub min_rows: u64,
}

impl KeywordQuery<'_> {
    /// The row count the terms' idf uses, for a store of `rows` memories.
    pub fn idf_rows(&self, rows: i64) -> i64 {
        rows.max(i64::try_from(self.min_rows).unwrap_or(i64::MAX))
    }
}

/// The floor of [`KeywordQuery::min_rows`] when a new fact is compared with its owner's
/// memories: how related the two are should not depend on how many memories the store
/// holds, nor whose.
pub(crate) const RECONCILE_MIN_ROWS: u64 = 1_000;

/// For each search of a [`KeywordQuery`], its hits, best BM25 first, ties by key.
pub type KeywordHits = Vec<Vec<(VectorKey, KeywordScore)>>;

/// How a memory matches a query's terms.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct KeywordScore {
    /// BM25 (see the [module](self)): unbounded, and larger for longer queries.
    pub bm25: f32,
    /// BM25 over its ceiling for this query, `Σ idf · (k1 + 1)` (the score of a memory
    /// holding every term infinitely often): in [0, 1), comparable across queries.
    pub relative: f32,
    /// The share of the query's term weight the memory holds: the idf of the terms it
    /// contains (in its text or context) over the idf of all the query's terms, in [0, 1].
    pub coverage: f32,
    /// The share its own text holds, its context aside: at most `coverage`, and equal to it
    /// for a memory stored without context. A reply that only echoes the message it answers
    /// covers the query through its context, not by what it says.
    #[serde(default)]
    pub text_coverage: f32,
}

/// A store's own keyword index.
#[async_trait]
pub trait KeywordIndex: Send + Sync {
    /// Runs the searches of `query`, each as if it ran alone.
    async fn search(&self, query: KeywordQuery<'_>) -> Result<KeywordHits>;
}

/// The terms of a query worth ranking by, with their inverse document frequencies.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TermWeights {
    pub(crate) terms: Vec<String>,
    pub(crate) idf: Vec<f64>,
}

impl TermWeights {
    /// The terms of `query` worth ranking by, or `None` for a query without terms.
    ///
    /// A term in at least half of the memories has no weight in BM25, yet matching it reads
    /// most of the index. When such a term is also in at least [`DROPPED_WORD_MIN_ROWS`]
    /// memories it is dropped, if the query has other terms; a query made only of such
    /// terms keeps them all. Small stores rank every term.
    pub(crate) fn new(query: &[String], df: impl Fn(&str) -> i64, rows: i64) -> Option<Self> {
        if query.is_empty() {
            return None;
        }
        let idf: Vec<f64> = query.iter().map(|t| idf(rows, df(t))).collect();
        let kept: Vec<usize> = (0..query.len())
            .filter(|&i| idf[i] > MIN_IDF || df(&query[i]) < DROPPED_WORD_MIN_ROWS)
            .collect();
        let kept = if kept.is_empty() {
            (0..query.len()).collect()
        } else {
            kept
        };
        Some(TermWeights {
            terms: kept.iter().map(|&i| query[i].clone()).collect(),
            idf: kept.iter().map(|&i| idf[i]).collect(),
        })
    }
}

/// FTS5's inverse document frequency: never below a tiny positive weight, so a term in
/// more than half of the rows still counts, barely. A count above the rows (statistics
/// read a moment apart, while other handles write) counts as every row.
pub(crate) fn idf(rows: i64, df: i64) -> f64 {
    let df = df.clamp(0, rows.max(0));
    let idf = ((rows - df) as f64 + 0.5).ln() - (df as f64 + 0.5).ln();
    if idf > 0.0 {
        idf
    } else {
        MIN_IDF
    }
}

/// One row's side of BM25: its length, and each query term's count in its text and context.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RowTerms {
    /// Tokens in the row, all parts.
    pub(crate) length: i64,
    /// Per term of the query: occurrences in the text and in the context.
    pub(crate) counts: Vec<[u32; 2]>,
}

/// The BM25 score of a row, given the whole store's rows and tokens; `None` when no term
/// occurs in it.
pub(crate) fn score(
    weights: &TermWeights,
    row: &RowTerms,
    rows: i64,
    tokens: i64,
) -> Option<KeywordScore> {
    let avg = tokens as f64 / rows.max(1) as f64;
    let length = BM25_K1 * (1.0 - BM25_B + BM25_B * row.length as f64 / avg.max(f64::MIN_POSITIVE));
    let mut any = false;
    let (mut total, mut matched, mut in_text) = (0.0, 0.0, 0.0);
    for (counts, idf) in row.counts.iter().zip(&weights.idf) {
        let f = f64::from(counts[0]) + f64::from(CONTEXT_WEIGHT) * f64::from(counts[1]);
        if f > 0.0 {
            any = true;
            total += idf * (f * (BM25_K1 + 1.0)) / (f + length);
            matched += idf;
        }
        if counts[0] > 0 {
            in_text += idf;
        }
    }
    let mass: f64 = weights.idf.iter().sum();
    any.then(|| KeywordScore {
        bm25: total as f32,
        relative: (total / (mass * (BM25_K1 + 1.0))) as f32,
        coverage: (matched / mass) as f32,
        text_coverage: (in_text / mass) as f32,
    })
}

/// Sorts hits best first (ties by key) and keeps `limit`.
pub(crate) fn best(
    mut hits: Vec<(VectorKey, KeywordScore)>,
    limit: usize,
) -> Vec<(VectorKey, KeywordScore)> {
    hits.sort_by(|a, b| b.1.bm25.total_cmp(&a.1.bm25).then(a.0.cmp(&b.0)));
    hits.truncate(limit);
    hits
}

/// A row as the reference BM25 reads it.
struct Document {
    key: VectorKey,
    /// Whether the search's filter and time admit it (every row counts in the statistics).
    admitted: bool,
    length: i64,
    text: Vec<String>,
    context: Vec<String>,
}

/// Keyword search by reading a store's rows: the reference BM25, for stores without a
/// keyword index of their own. Reads every live row, so it suits small stores.
pub async fn rank_rows(store: &dyn Store, query: KeywordQuery<'_>) -> Result<KeywordHits> {
    let mut out = vec![Vec::new(); query.queries.len()];
    if query.queries.iter().all(Vec::is_empty) || query.limit == 0 {
        return Ok(out);
    }
    // Statistics are the whole store's, expired memories included.
    let mut all = Scan::new(Filter::all(), query.now, usize::MAX);
    all.include_expired = true;
    let rows = store.scan(&all).await?.rows;
    let documents: Vec<Document> = rows
        .iter()
        .map(|row| {
            let r = &row.record;
            let text = text::terms(&r.memory);
            let context = r.context.as_deref().map(text::terms).unwrap_or_default();
            let owners = [
                &r.owners.user_id,
                &r.owners.agent_id,
                &r.owners.app_id,
                &r.owners.run_id,
            ]
            .iter()
            .filter(|o| o.is_some())
            .count() as i64;
            Document {
                key: row.key,
                admitted: row.visible(query.now, query.include_expired) && query.filter.matches(r),
                length: (text.len() + context.len()) as i64 + owners,
                text,
                context,
            }
        })
        .collect();
    let n = documents.len() as i64;
    let tokens: i64 = documents.iter().map(|d| d.length).sum();
    let mut df: HashMap<&str, i64> = HashMap::new();
    for d in &documents {
        let distinct: HashSet<&str> = d
            .text
            .iter()
            .chain(&d.context)
            .map(String::as_str)
            .collect();
        for term in distinct {
            *df.entry(term).or_default() += 1;
        }
    }
    for (hits, terms) in out.iter_mut().zip(query.queries) {
        let Some(weights) = TermWeights::new(
            terms,
            |t| df.get(t).copied().unwrap_or(0),
            query.idf_rows(n),
        ) else {
            continue;
        };
        let mut scored = Vec::new();
        for d in documents.iter().filter(|d| d.admitted) {
            let count =
                |part: &[String], term: &str| part.iter().filter(|t| *t == term).count() as u32;
            let row = RowTerms {
                length: d.length,
                counts: weights
                    .terms
                    .iter()
                    .map(|t| [count(&d.text, t), count(&d.context, t)])
                    .collect(),
            };
            if let Some(s) = score(&weights, &row, n, tokens) {
                scored.push((d.key, s));
            }
        }
        *hits = best(scored, query.limit);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weightless_terms_are_dropped_only_from_big_stores_and_only_beside_others() {
        let q: Vec<String> = ["tea", "common"].map(String::from).to_vec();
        let df = |t: &str| if t == "common" { 60_000 } else { 10 };
        let w = TermWeights::new(&q, df, 100_000).unwrap();
        assert_eq!(w.terms, vec!["tea"]);
        let only: Vec<String> = vec!["common".into()];
        assert_eq!(TermWeights::new(&only, df, 100_000).unwrap().terms, only);
        let small = |t: &str| if t == "common" { 600 } else { 1 };
        assert_eq!(TermWeights::new(&q, small, 1_000).unwrap().terms, q);
        assert!(TermWeights::new(&[], df, 10).is_none());
        // A repeated query term counts each time, as FTS5's phrases do.
        let twice: Vec<String> = ["tea", "tea"].map(String::from).to_vec();
        assert_eq!(TermWeights::new(&twice, df, 100).unwrap().terms.len(), 2);
    }

    #[test]
    fn scores_follow_fts5s_formula() {
        let w = TermWeights {
            terms: vec!["tea".into()],
            idf: vec![idf(10, 2)],
        };
        let row = RowTerms {
            length: 4,
            counts: vec![[1, 1]],
        };
        let f = 1.3;
        let length = BM25_K1 * (1.0 - BM25_B + BM25_B * 4.0 / 5.0);
        let want = idf(10, 2) * f * (BM25_K1 + 1.0) / (f + length);
        let got = score(&w, &row, 10, 50).unwrap();
        assert!((f64::from(got.bm25) - want).abs() < 1e-5);
        assert!((f64::from(got.relative) - want / (idf(10, 2) * (BM25_K1 + 1.0))).abs() < 1e-6);
        assert_eq!(got.coverage, 1.0);
        let none = RowTerms {
            length: 4,
            counts: vec![[0, 0]],
        };
        assert_eq!(score(&w, &none, 10, 50), None);
        // Coverage is the matched terms' share of the query's idf.
        let two = TermWeights {
            terms: vec!["tea".into(), "mint".into()],
            idf: vec![1.0, 3.0],
        };
        let mint = RowTerms {
            length: 4,
            counts: vec![[0, 0], [0, 2]],
        };
        assert_eq!(score(&two, &mint, 10, 50).unwrap().coverage, 0.75);
        // A term only in the context covers the query, but not through the memory's text.
        assert_eq!(score(&two, &mint, 10, 50).unwrap().text_coverage, 0.0);
        let both = RowTerms {
            length: 4,
            counts: vec![[1, 0], [0, 2]],
        };
        let got = score(&two, &both, 10, 50).unwrap();
        assert_eq!((got.coverage, got.text_coverage), (1.0, 0.25));
        assert_eq!(idf(10, 9), MIN_IDF);
        // Statistics a moment apart: more rows with the term than rows.
        assert_eq!(idf(2, 3), MIN_IDF);
        assert_eq!(idf(0, 1), MIN_IDF);
    }
}
