//! The SQLite store's keyword index: FTS5 over the crate's terms, ranked by the crate's BM25
//! ([`crate::store::keyword`]).
//!
//! FTS5 finds the rows holding a query's terms (narrowed, when the filter pins owners, to
//! those owners' rows through the index's `owners` column), and `memlane_terms` (see
//! `fts.rs`) reports each row's term counts and length. FTS5's own `bm25()` would count each
//! term's rows again on every query by walking its whole posting list (about 2 ms for a term
//! in 100,000 memories); the counts come from a cache instead.

use std::collections::HashMap;
use std::sync::Mutex;

use rusqlite::types::Value as SqlValue;
use rusqlite::{params_from_iter, Connection, OptionalExtension};

use super::filter_sql::visible;
use super::fts::FtsRow;
use super::{lock, sql_err};
use crate::error::{Error, Result};
use crate::filter::{Filter, OwnerField};
use crate::store::keyword::{best, score, KeywordScore, RowTerms, TermWeights};
use crate::store::{KeywordHits, KeywordQuery, VectorKey};

/// A term as an FTS5 string: quoted, so the caller's text is data, never query syntax.
fn fts_string(term: &str) -> String {
    format!("\"{}\"", term.replace('"', "\"\""))
}

/// The keyword token under which the `owners` column indexes a memory's owner: a letter for
/// the field and the id's UTF-8 bytes in hex, so any id is one token.
fn owner_token(prefix: char, id: &str) -> String {
    let mut token = String::with_capacity(1 + 2 * id.len());
    token.push(prefix);
    for byte in id.bytes() {
        token.push_str(&format!("{byte:02X}"));
    }
    token
}

/// The `owners` match of the owners a filter pins with top-level equalities, if any.
fn owners_match(filter: &Filter) -> Option<String> {
    let tokens: Vec<String> = [
        (OwnerField::User, 'u'),
        (OwnerField::Agent, 'a'),
        (OwnerField::App, 'p'),
        (OwnerField::Run, 'r'),
    ]
    .into_iter()
    .filter_map(|(field, prefix)| filter.pinned_owner(field).map(|id| owner_token(prefix, id)))
    .map(|t| format!("owners : {}", fts_string(&t)))
    .collect();
    (!tokens.is_empty()).then(|| tokens.join(" AND "))
}

/// Terms as alternatives, matched in the memory's text and context.
fn terms_match(terms: &[String]) -> String {
    let terms: Vec<String> = terms.iter().map(|t| fts_string(t)).collect();
    format!("{{terms context_terms}} : ({})", terms.join(" OR "))
}

/// The items without repeats, in order of first appearance.
fn distinct<T: std::hash::Hash + Eq + Copy>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut seen = std::collections::HashSet::new();
    items.into_iter().filter(|t| seen.insert(*t)).collect()
}

/// The distinct terms of several lists, in order of first appearance.
fn distinct_terms<'a>(lists: impl IntoIterator<Item = &'a [String]>) -> Vec<String> {
    distinct(lists.into_iter().flatten())
        .into_iter()
        .cloned()
        .collect()
}

/// Runs every search of `query`: one ranked list per search, as if each ran alone.
pub(super) fn search(
    conn: &Connection,
    cache: &Mutex<DocFrequencies>,
    query: KeywordQuery<'_>,
) -> Result<KeywordHits> {
    let mut out = vec![Vec::new(); query.queries.len()];
    let terms = distinct_terms(query.queries.iter().map(Vec::as_slice));
    if terms.is_empty() || query.limit == 0 {
        return Ok(out);
    }
    // The size of the table, from the first row that holds any term.
    let probe: Option<Vec<u8>> = conn
        .prepare_cached(
            "SELECT memlane_terms(memories_fts) FROM memories_fts WHERE memories_fts MATCH ?1 LIMIT 1",
        )
        .and_then(|mut stmt| stmt.query_row([terms_match(&terms)], |r| r.get(0)).optional())
        .map_err(sql_err)?;
    let Some(table) = probe.as_deref().and_then(FtsRow::decode) else {
        return Ok(out);
    };
    let mut frequencies = HashMap::with_capacity(terms.len());
    for term in terms {
        let df = document_frequency(conn, cache, &term, table.rows)?;
        frequencies.insert(term, df);
    }
    let df = |t: &str| frequencies.get(t).copied().unwrap_or(0);
    let weights: Vec<Option<TermWeights>> = query
        .queries
        .iter()
        .map(|q| TermWeights::new(q, df, query.idf_rows(table.rows)))
        .collect();
    let phrases = distinct_terms(weights.iter().flatten().map(|w| w.terms.as_slice()));
    let phrase_of: HashMap<&str, usize> = phrases
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    // Each search's terms as phrase numbers of the match.
    let plans: Vec<Option<(Vec<usize>, &TermWeights)>> = weights
        .iter()
        .map(|w| {
            w.as_ref()
                .map(|w| (w.terms.iter().map(|t| phrase_of[t.as_str()]).collect(), w))
        })
        .collect();
    let owners = owners_match(query.filter);
    // The terms come first, so phrase i of the match is `phrases[i]`.
    let fts_query = match &owners {
        Some(owners) => format!("{} AND {owners}", terms_match(&phrases)),
        None => terms_match(&phrases),
    };
    let matched = conn
        .prepare_cached(
            "SELECT rowid, memlane_terms(memories_fts) FROM memories_fts WHERE memories_fts MATCH ?1",
        )
        .and_then(|mut stmt| {
            stmt.query_map([fts_query], |r| {
                let blob: Vec<u8> = r.get(1)?;
                Ok((r.get::<_, i64>(0)?, FtsRow::decode(&blob)))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(sql_err)?;
    if matched.is_empty() {
        return Ok(out);
    }
    // Every matched row scored for every search first: only the rows a search can return
    // need their keys and visibility read.
    let mut scored: Vec<Vec<(i64, KeywordScore)>> = vec![Vec::new(); plans.len()];
    for (seq, terms) in &matched {
        let terms = terms
            .as_ref()
            .filter(|t| t.counts.len() >= phrases.len())
            .ok_or_else(|| Error::internal("memlane_terms returned a malformed row"))?;
        for (hits, plan) in scored.iter_mut().zip(&plans) {
            let Some((phrase, weights)) = plan else {
                continue;
            };
            let row = RowTerms {
                length: terms.row_tokens,
                counts: phrase.iter().map(|&p| terms.counts[p]).collect(),
            };
            if let Some(s) = score(weights, &row, terms.rows, terms.table_tokens) {
                hits.push((*seq, s));
            }
        }
    }
    let keys = admitted_keys(conn, &query, owners.as_deref(), &mut scored)?;
    for (hits, scored) in out.iter_mut().zip(scored) {
        let admitted = scored
            .into_iter()
            .filter_map(|(seq, s)| keys.get(&seq).map(|&key| (key, s)))
            .collect();
        *hits = best(admitted, query.limit);
    }
    Ok(out)
}

/// The vector keys of the scored rows the filter admits, by row: the rows each search can
/// return, which are all of its matches only when it keeps them all.
///
/// A search that matched more rows than its limit reads its rows best first, in rounds:
/// each round reads, for every search, the rows it still needs to fill its limit (with any
/// tied with the last of them, which its ranking breaks by key), and a row the filter
/// refuses leaves room for the next one in the following round. So a one-owner search of a
/// common word reads its best rows, not every row of the owner that holds the word.
fn admitted_keys(
    conn: &Connection,
    query: &KeywordQuery<'_>,
    owners: Option<&str>,
    scored: &mut [Vec<(i64, KeywordScore)>],
) -> Result<HashMap<i64, VectorKey>> {
    let limit = query.limit;
    if scored.iter().all(|hits| hits.len() <= limit) {
        let rows = distinct(scored.iter().flatten().map(|(seq, _)| *seq));
        return all_admitted(conn, query, owners, &rows);
    }
    for hits in scored.iter_mut() {
        hits.sort_by(|a, b| b.1.bm25.total_cmp(&a.1.bm25).then(a.0.cmp(&b.0)));
    }
    let mut read: HashMap<i64, Option<VectorKey>> = HashMap::new();
    loop {
        let mut wanted = Vec::new();
        for hits in scored.iter() {
            let (mut counted, mut last) = (0, None);
            for (seq, s) in hits {
                if counted >= limit && last != Some(s.bm25) {
                    break;
                }
                match read.get(seq) {
                    Some(None) => continue,
                    Some(Some(_)) => {}
                    None => wanted.push(*seq),
                }
                counted += 1;
                last = Some(s.bm25);
            }
        }
        let wanted = distinct(wanted);
        if wanted.is_empty() {
            break;
        }
        let found = by_row(conn, query, &wanted)?;
        for seq in wanted {
            read.insert(seq, found.get(&seq).copied());
        }
    }
    Ok(read
        .into_iter()
        .filter_map(|(seq, key)| Some((seq, key?)))
        .collect())
}

/// The vector keys of `rows` the filter admits.
///
/// Looking rows up one by one costs a read of each row; reading the filter's rows from an
/// index costs much less per row, but reads all of the pinned owners' rows. The cheaper way
/// is taken, judged by how many rows the owners have.
fn all_admitted(
    conn: &Connection,
    query: &KeywordQuery<'_>,
    owners: Option<&str>,
    rows: &[i64],
) -> Result<HashMap<i64, VectorKey>> {
    let owned: Option<i64> = match owners {
        Some(owners) => Some(
            conn.prepare_cached("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?1")
                .and_then(|mut stmt| stmt.query_row([owners], |r| r.get(0)))
                .map_err(sql_err)?,
        ),
        None => None,
    };
    if owned.is_none_or(|owned| owned > 4 * rows.len() as i64 + 256) {
        return by_row(conn, query, rows);
    }
    let mut params = Vec::new();
    let clause = visible(query.filter, query.now, query.include_expired, &mut params);
    let sql = format!("SELECT m.seq, m.vector_key FROM memories m WHERE {clause}");
    keys_of(conn, &sql, params)
}

/// The vector keys of `rows` the filter admits, each row read by its number (`NOT
/// INDEXED`: with the owners pinned, SQLite would otherwise walk every row of the owners'
/// index and test each against the list, several times the cost of a few dozen rows).
fn by_row(
    conn: &Connection,
    query: &KeywordQuery<'_>,
    rows: &[i64],
) -> Result<HashMap<i64, VectorKey>> {
    let mut params = vec![SqlValue::Text(
        serde_json::to_string(rows)
            .map_err(|e| Error::internal(format!("cannot encode row numbers: {e}")))?,
    )];
    let clause = visible(query.filter, query.now, query.include_expired, &mut params);
    let sql = format!(
        "SELECT m.seq, m.vector_key FROM memories m NOT INDEXED \
         WHERE m.seq IN (SELECT value FROM json_each(?)) AND {clause}"
    );
    keys_of(conn, &sql, params)
}

fn keys_of(conn: &Connection, sql: &str, params: Vec<SqlValue>) -> Result<HashMap<i64, VectorKey>> {
    let mut stmt = conn.prepare_cached(sql).map_err(sql_err)?;
    let rows = stmt
        .query_map(params_from_iter(params), |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as VectorKey))
        })
        .map_err(sql_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
}

/// How many rows hold `term` in their text or context, from `cache` when fresh.
fn document_frequency(
    conn: &Connection,
    cache: &Mutex<DocFrequencies>,
    term: &str,
    rows: i64,
) -> Result<i64> {
    if let Some(df) = lock(cache)?.get(term, rows) {
        return Ok(df);
    }
    let df: i64 = conn
        .prepare_cached("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?1")
        .and_then(|mut stmt| {
            stmt.query_row(
                [format!("{{terms context_terms}} : {}", fts_string(term))],
                |r| r.get(0),
            )
        })
        .map_err(sql_err)?;
    lock(cache)?.put(term, df, rows);
    Ok(df)
}

/// Document frequencies of query terms. Counting the rows that hold a term walks its whole
/// posting list (about 2 ms for a term in 100,000 memories), so counts are kept and reused
/// while the number of rows stays within 5% of the number they were counted at; BM25 scores
/// drift by no more than that before a recount.
#[derive(Debug, Default)]
pub(super) struct DocFrequencies {
    terms: HashMap<String, (i64, i64)>,
}

/// Terms kept before the cache starts over.
const MAX_CACHED_TERMS: usize = 50_000;

impl DocFrequencies {
    fn get(&self, term: &str, rows: i64) -> Option<i64> {
        let &(df, counted_at) = self.terms.get(term)?;
        ((rows - counted_at).abs() * 20 <= counted_at).then_some(df)
    }

    fn put(&mut self, term: &str, df: i64, rows: i64) {
        if self.terms.len() >= MAX_CACHED_TERMS {
            self.terms.clear();
        }
        self.terms.insert(term.to_string(), (df, rows));
    }
}
