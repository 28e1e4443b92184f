//! Search in the database: nearest vectors with pgvector, BM25 over the crate's terms.
//!
//! ## Vectors
//! pgvector 0.6's HNSW scan has no iterative mode: with a `WHERE` clause it filters the
//! `ef_search` candidates it found and may return far fewer than `k` rows (4% of the true
//! top 10 for one user in 100, measured). So a filtered search never asks the HNSW index
//! with its filter. While the memories a search may return number at most [`EXACT_MAX`]
//! (one user's, typically), they are ranked exactly: their keys materialised first, then
//! their distances computed. A larger set is searched through the index with a deep beam
//! and the filter applied to what it returns; when that leaves fewer than `k`, the set is
//! ranked exactly.
//!
//! ## Keywords
//! The statistics (live rows, their total length, each term's document frequency) and each
//! row's terms are in the database; the scores are computed here with the crate's BM25
//! ([`crate::store::keyword`]), so they equal the SQLite store's.

use std::collections::HashMap;

use async_trait::async_trait;

use super::filter_sql::{visible, Params};
use super::{big, pg_err, run, PostgresStore, COLUMNS};
use crate::error::Result;
use crate::store::keyword::{best, score, RowTerms, TermWeights};
use crate::store::{Among, CandidateSource, KeywordHits, KeywordIndex, KeywordQuery, VectorKey};

/// The largest set of memories a vector search ranks exactly.
pub const EXACT_MAX: usize = 2_048;

/// The deepest HNSW beam a search asks for (pgvector's own ceiling is 1,000).
const MAX_EF_SEARCH: usize = 1_000;

impl PostgresStore {
    /// The `k` nearest among the keys selected by `source` (SQL selecting `vector_key`
    /// from `memories m`), exactly.
    async fn exact(
        &self,
        client: &impl deadpool_postgres::GenericClient,
        query: &[f32],
        source: &str,
        mut params: Params,
        k: usize,
    ) -> Result<Vec<(VectorKey, f32)>> {
        let q = params.push(pgvector::Vector::from(query.to_vec()));
        let limit = params.push(big(k));
        let sql = format!(
            "SELECT v.key, (v.embedding <=> {q})::real AS d FROM {{s}}.vectors v \
             WHERE v.key = ANY(ARRAY({source})) ORDER BY d, v.key LIMIT {limit}::bigint"
        );
        distances(client, &self.sql(&sql), &params).await
    }

    /// The `k` nearest through the HNSW index, keeping those `keep` admits (SQL over
    /// `memories m` joined on the hits), or `None` when fewer than `k` survive the filter
    /// and the caller must rank exactly.
    async fn approximate(
        &self,
        client: &mut deadpool_postgres::Client,
        query: &[f32],
        keep: &str,
        mut params: Params,
        k: usize,
        fetch: usize,
    ) -> Result<Option<Vec<(VectorKey, f32)>>> {
        let dimension = query.len();
        let fetch = fetch.clamp(k, MAX_EF_SEARCH);
        let q = params.push(pgvector::Vector::from(query.to_vec()));
        let (f, limit) = (params.push(big(fetch)), params.push(big(k)));
        let sql = format!(
            "WITH h AS MATERIALIZED ( \
                 SELECT key, (embedding::vector({dimension}) <=> {q}::vector({dimension}))::real AS d \
                 FROM {{s}}.vectors ORDER BY embedding::vector({dimension}) <=> {q}::vector({dimension}) \
                 LIMIT {f}) \
             SELECT h.key, h.d FROM h JOIN {{s}}.memories m ON m.vector_key = h.key \
             WHERE {keep} ORDER BY h.d, h.key LIMIT {limit}"
        );
        // The beam is a setting of the connection: set before the query, sent together.
        let beam = format!("SET hnsw.ef_search = {fetch}");
        let sql = self.sql(&sql);
        let (_, hits) = futures_util::future::try_join(
            async { client.batch_execute(&beam).await.map_err(pg_err) },
            distances(&*client, &sql, &params),
        )
        .await?;
        Ok((hits.len() >= k).then_some(hits))
    }
}

impl PostgresStore {
    /// How many live memories `clause` admits, up to [`Self::exact_max`] + 1 (all live
    /// memories, from the state row, when the filter admits all), the live total, and, when
    /// the count is within the exact limit, the `k` nearest among them, ranked exactly: one
    /// statement.
    async fn counted(
        &self,
        client: &impl deadpool_postgres::GenericClient,
        query: &[f32],
        clause: &str,
        among: Among<'_>,
        mut params: Params,
        k: usize,
    ) -> Result<(usize, usize, Option<Vec<(VectorKey, f32)>>)> {
        let q = params.push(pgvector::Vector::from(query.to_vec()));
        let limit = params.push(big(k));
        let max = params.push(big(self.exact_max));
        let counting = if among.filter.is_all() {
            "SELECT live_rows AS n FROM {s}.state WHERE id = 1".to_owned()
        } else {
            format!(
                "SELECT COUNT(*) AS n FROM (SELECT 1 FROM {{s}}.memories m WHERE {clause} \
                 LIMIT {max}::bigint + 1) AS x"
            )
        };
        let sql = format!(
            "WITH n AS MATERIALIZED ({counting}), \
             c AS MATERIALIZED (SELECT m.vector_key FROM {{s}}.memories m \
                 WHERE {clause} AND (SELECT n FROM n) <= {max}::bigint) \
             SELECT -1::bigint, 0::real, (SELECT n FROM n), \
                 (SELECT live_rows FROM {{s}}.state WHERE id = 1) \
             UNION ALL \
             (SELECT v.key, (v.embedding <=> {q})::real AS d, 0, 0 FROM {{s}}.vectors v \
              WHERE v.key = ANY(ARRAY(SELECT vector_key FROM c)) \
              ORDER BY d, v.key LIMIT {limit}::bigint)"
        );
        let found = run(client, &self.sql(&sql), &params.refs()).await?;
        let mut rows = found.iter();
        let head = rows
            .next()
            .ok_or_else(|| crate::error::Error::internal("the count row is missing"))?;
        let count = head.try_get::<_, i64>(2).map_err(pg_err)?.max(0) as usize;
        let total = head.try_get::<_, i64>(3).map_err(pg_err)?.max(0) as usize;
        if count > self.exact_max {
            return Ok((count, total, None));
        }
        let hits = rows
            .map(|r| {
                let key: i64 = r.try_get(0).map_err(pg_err)?;
                let d: f32 = r.try_get(1).map_err(pg_err)?;
                Ok((key.max(0) as VectorKey, 1.0 - d))
            })
            .collect::<Result<_>>()?;
        Ok((count, total, Some(hits)))
    }
}

async fn distances(
    client: &impl deadpool_postgres::GenericClient,
    sql: &str,
    params: &Params,
) -> Result<Vec<(VectorKey, f32)>> {
    let found = run(client, sql, &params.refs()).await?;
    found
        .iter()
        .map(|r| {
            let key: i64 = r.try_get(0).map_err(pg_err)?;
            let d: f32 = r.try_get(1).map_err(pg_err)?;
            Ok((key.max(0) as VectorKey, 1.0 - d))
        })
        .collect()
}

#[async_trait]
impl CandidateSource for PostgresStore {
    async fn nearest(
        &self,
        queries: Vec<Vec<f32>>,
        among: Among<'_>,
        k: usize,
    ) -> Result<Vec<Vec<(VectorKey, f32)>>> {
        let mut out = Vec::with_capacity(queries.len());
        if k == 0 {
            return Ok(vec![Vec::new(); queries.len()]);
        }
        let mut client = self.client().await?;
        let mut params = Params::default();
        let clause = visible(among.filter, among.now, among.include_expired, &mut params);
        // An inexact filter is decided here, on the rows: the search ranks their keys.
        let keys = if clause.exact {
            None
        } else {
            Some(self.keys_with(&client, among).await?)
        };
        for query in &queries {
            let source = |params: &mut Params| match &keys {
                None => format!(
                    "SELECT m.vector_key FROM {{s}}.memories m WHERE {}",
                    clause.sql
                ),
                Some(keys) => {
                    let keys = params.push(keys.iter().map(|k| big(*k)).collect::<Vec<i64>>());
                    format!("SELECT unnest({keys}::bigint[]) AS vector_key")
                }
            };
            // One statement counts the candidates (up to the exact limit) and, when they
            // are few enough, ranks them exactly.
            let mut p = fresh(&keys, among);
            let (count, total, exact) = match &keys {
                Some(keys) if keys.is_empty() => (0, 0, Some(Vec::new())),
                Some(keys) if keys.len() <= self.exact_max => {
                    let source = source(&mut p);
                    let hits = self.exact(&client, query, &source, p, k).await?;
                    (keys.len(), 0, Some(hits))
                }
                Some(keys) => (keys.len(), self.counters_live(&client).await?, None),
                None => {
                    self.counted(&client, query, &clause.sql, among, p, k)
                        .await?
                }
            };
            let hits = match exact {
                Some(hits) => hits,
                None => {
                    // A beam deep enough that the filter's share of it still holds k.
                    let fetch =
                        k.saturating_mul(2).saturating_mul(total.max(1)) / count.max(1) + 10;
                    let mut p = fresh(&keys, among);
                    let keep = match &keys {
                        None => clause.sql.clone(),
                        Some(keys) => {
                            let keys = p.push(keys.iter().map(|k| big(*k)).collect::<Vec<i64>>());
                            format!("m.vector_key = ANY({keys})")
                        }
                    };
                    match self
                        .approximate(&mut client, query, &keep, p, k, fetch.max(40))
                        .await?
                    {
                        Some(hits) => hits,
                        None => {
                            let mut p = fresh(&keys, among);
                            let source = source(&mut p);
                            self.exact(&client, query, &source, p, k).await?
                        }
                    }
                }
            };
            out.push(hits);
        }
        Ok(out)
    }

    async fn keyword(
        &self,
        queries: &[Vec<String>],
        among: Among<'_>,
        k: usize,
        min_rows: u64,
    ) -> Result<KeywordHits> {
        KeywordIndex::search(
            self,
            KeywordQuery {
                queries,
                filter: among.filter,
                now: among.now,
                include_expired: among.include_expired,
                limit: k,
                min_rows,
            },
        )
        .await
    }

    async fn cosines(
        &self,
        query: &[f32],
        keys: &[VectorKey],
        among: Among<'_>,
    ) -> Result<Vec<(VectorKey, f32)>> {
        let client = self.client().await?;
        let mut params = Params::default();
        let q = params.push(pgvector::Vector::from(query.to_vec()));
        let keys = params.push(keys.iter().map(|k| big(*k)).collect::<Vec<i64>>());
        // The key lookup is fenced off (`OFFSET 0`) from the test of liveness, the owner
        // indexes' predicate, which a planner without fresh statistics would otherwise
        // combine with it.
        let mut sql = format!(
            "SELECT key, d FROM (SELECT v.key, (v.embedding <=> {q})::real AS d, m.deleted_at, \
             m.expiration_date FROM {{s}}.vectors v \
             JOIN {{s}}.memories m ON m.vector_key = v.key \
             WHERE v.key = ANY({keys}) OFFSET 0) AS m WHERE m.deleted_at IS NULL"
        );
        if !among.include_expired {
            let now = params.push(crate::filter::micros(among.now));
            sql.push_str(&format!(
                " AND (m.expiration_date IS NULL OR m.expiration_date > {now})"
            ));
        }
        distances(&client, &self.sql(&sql), &params).await
    }
}

/// The parameters a statement starts from: the filter's, when the statement selects by the
/// filter's SQL; none, when it selects by keys found beforehand (an unused parameter is an
/// error to PostgreSQL).
fn fresh(keys: &Option<Vec<VectorKey>>, among: Among<'_>) -> Params {
    match keys {
        Some(_) => Params::default(),
        None => rebuild(among),
    }
}

/// The parameters of `among`'s clause again, for a statement of its own.
fn rebuild(among: Among<'_>) -> Params {
    let mut params = Params::default();
    visible(among.filter, among.now, among.include_expired, &mut params);
    params
}

impl PostgresStore {
    /// Live rows (expired ones included), from the state row.
    async fn counters_live(&self, client: &impl deadpool_postgres::GenericClient) -> Result<usize> {
        let r = client
            .query_one(
                &self.sql("SELECT live_rows FROM {s}.state WHERE id = 1"),
                &[],
            )
            .await
            .map_err(pg_err)?;
        Ok(r.get::<_, i64>(0).max(0) as usize)
    }
}

#[async_trait]
impl KeywordIndex for PostgresStore {
    async fn search(&self, query: KeywordQuery<'_>) -> Result<KeywordHits> {
        let mut out = vec![Vec::new(); query.queries.len()];
        if query.queries.iter().all(Vec::is_empty) || query.limit == 0 {
            return Ok(out);
        }
        let client = self.client().await?;
        let mut distinct: Vec<String> = query.queries.iter().flatten().cloned().collect();
        distinct.sort();
        distinct.dedup();
        // The statistics and each term's document frequency, in one statement.
        let stats = client
            .query(
                &self.sql(
                    "SELECT s.live_rows, s.live_tokens, t, \
                     COALESCE((SELECT df FROM {s}.terms WHERE term = t), 0) \
                     FROM {s}.state s, unnest($1::text[]) AS t WHERE s.id = 1",
                ),
                &[&distinct],
            )
            .await
            .map_err(pg_err)?;
        let (rows, tokens): (i64, i64) = stats.first().map_or((0, 0), |r| (r.get(0), r.get(1)));
        let df: HashMap<String, i64> = stats
            .iter()
            .map(|r| (r.get::<_, String>(2), r.get::<_, i64>(3)))
            .collect();
        let weights: Vec<Option<TermWeights>> = query
            .queries
            .iter()
            .map(|terms| {
                TermWeights::new(
                    terms,
                    |t| df.get(t).copied().unwrap_or(0),
                    query.idf_rows(rows),
                )
            })
            .collect();
        let mut wanted: Vec<String> = weights
            .iter()
            .flatten()
            .flat_map(|w| w.terms.iter().cloned())
            .collect();
        wanted.sort();
        wanted.dedup();
        let mut params = Params::default();
        let clause = visible(query.filter, query.now, query.include_expired, &mut params);
        let terms = params.push(wanted);
        let max = params.push(big(self.exact_max));
        // The row's columns are only read to check an inexact filter.
        let columns = if clause.exact {
            "m.vector_key, m.terms, m.context_terms, m.doc_length".to_owned()
        } else {
            format!("m.vector_key, m.terms, m.context_terms, m.doc_length, {COLUMNS}")
        };
        // The path is chosen by counting, not left to the planner's estimates, which miss
        // by orders of magnitude between statistics runs: while the filter admits at most
        // `exact_max` memories (one user's, typically), those are read by the filter's
        // indexes and their terms checked; a wider filter goes through the terms' index.
        let counting = if query.filter.is_all() {
            "SELECT live_rows AS n FROM {s}.state WHERE id = 1".to_owned()
        } else {
            format!(
                "SELECT COUNT(*) AS n FROM (SELECT 1 FROM {{s}}.memories m WHERE {} \
                 LIMIT {max}::bigint + 1) AS x",
                clause.sql
            )
        };
        let sql = format!(
            "WITH n AS MATERIALIZED ({counting}), \
             f AS MATERIALIZED (SELECT m.* FROM {{s}}.memories m \
                 WHERE {clause} AND (SELECT n FROM n) <= {max}::bigint) \
             SELECT {columns} FROM f AS m WHERE (m.terms || m.context_terms) && {terms} \
             UNION ALL \
             SELECT {columns} FROM {{s}}.memories m \
             WHERE (m.terms || m.context_terms) && {terms} AND {clause} \
                 AND (SELECT n FROM n) > {max}::bigint",
            clause = clause.sql
        );
        let found = run(&client, &self.sql(&sql), &params.refs()).await?;
        let mut documents = Vec::with_capacity(found.len());
        for r in &found {
            if !clause.exact {
                let row = super::row_at(r, 4)?;
                if !query.filter.matches(&row.record) {
                    continue;
                }
            }
            let key: i64 = r.try_get(0).map_err(pg_err)?;
            let text: Vec<String> = r.try_get(1).map_err(pg_err)?;
            let context: Vec<String> = r.try_get(2).map_err(pg_err)?;
            let length: i32 = r.try_get(3).map_err(pg_err)?;
            documents.push((key.max(0) as VectorKey, text, context, i64::from(length)));
        }
        for (hits, weights) in out.iter_mut().zip(&weights) {
            let Some(weights) = weights else { continue };
            let mut scored = Vec::new();
            for (key, text, context, length) in &documents {
                let count =
                    |part: &[String], term: &str| part.iter().filter(|t| *t == term).count() as u32;
                let terms = RowTerms {
                    length: *length,
                    counts: weights
                        .terms
                        .iter()
                        .map(|t| [count(text, t), count(context, t)])
                        .collect(),
                };
                if let Some(s) = score(weights, &terms, rows, tokens) {
                    scored.push((*key, s));
                }
            }
            *hits = best(scored, query.limit);
        }
        Ok(out)
    }
}
