//! What a hit's score is computed from: its [`Signals`], and the inputs a calibration model
//! reads off them.

use serde::{Deserialize, Serialize};

use crate::store::KeywordScore;

/// How many inputs a model has, the constant 1 of the bias included.
pub(super) const INPUTS: usize = 11;

/// What a hit's score was computed from.
///
/// `cosine` is the cosine similarity of the query's and the memory's embeddings (absent
/// in keyword mode); `keyword` how the memory matches the query's words (absent in vector
/// mode, and in hybrid mode when the memory shares no word with the query or ranks below
/// the keyword candidates a search takes); `scope` how many memories the search ranked
/// among (those its filters admit, counted up to [`Signals::MAX_SCOPE`]); `fifth_nearest`
/// how near the query the search's fifth-nearest memory is, which tells how far this one
/// stands out from the rest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Signals {
    /// Cosine similarity of query and memory, in [-1, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cosine: Option<f32>,
    /// The memory's keyword match (BM25 and its normalised forms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyword: Option<KeywordScore>,
    /// How many memories the search ranked among, at most [`Signals::MAX_SCOPE`].
    #[serde(default)]
    pub scope: usize,
    /// The cosine of the query with the fifth most similar memory the search's filters
    /// admit (among fewer than five, a missing memory counts as unrelated: a cosine of 0):
    /// the same for every candidate of a query. A memory's cosine is evidence by itself,
    /// and more so by how far it stands above this, its *lead* (see
    /// [`Logistic`](super::Logistic)): among unrelated facts a cosine of 0.3 stands out,
    /// among hundreds of turns about the same two people it does not. Absent in keyword
    /// mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fifth_nearest: Option<f32>,
    /// How the memories stored just before and after it (in the search's scope) match the
    /// query: hybrid searches only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neighbours: Option<Neighbours>,
    /// Whether the memory was stored in the time the query names ("on 8 May 2023", "in
    /// June", "last week"), or in the days after it; absent when the query names none. Text
    /// queries in English only; see `docs/retrieval.md`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<bool>,
}

/// How a memory's neighbours match a query: the memories stored just before and just after
/// it (the turns around it, for a conversation stored verbatim), of those the search's
/// filters admit. Each value is the larger of the two.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Neighbours {
    /// Their cosine with the query.
    pub cosine: f32,
    /// Their coverage of the query's word weight by their own text, their context aside
    /// (0 without a keyword match): the reply to a memory holds the memory as its context.
    pub coverage: f32,
}

impl Neighbours {
    /// Neighbour signals from their parts.
    pub fn new(cosine: f32, coverage: f32) -> Self {
        Neighbours { cosine, coverage }
    }
}

impl Signals {
    /// The most memories a score's prior counts: a search among more is scored as if among
    /// this many (see [`Logistic`](super::Logistic)).
    pub const MAX_SCOPE: usize = 1_000;

    /// Signals of a cosine alone, among `scope` memories.
    pub fn cosine(cosine: f32, scope: usize) -> Self {
        Signals::new(Some(cosine), None, scope)
    }

    /// Signals of a keyword match alone, among `scope` memories.
    pub fn keyword(keyword: KeywordScore, scope: usize) -> Self {
        Signals::new(None, Some(keyword), scope)
    }

    /// Signals from their parts (`scope` is capped at [`Signals::MAX_SCOPE`]).
    pub fn new(cosine: Option<f32>, keyword: Option<KeywordScore>, scope: usize) -> Self {
        Signals {
            cosine,
            keyword,
            scope: scope.min(Signals::MAX_SCOPE),
            fifth_nearest: None,
            neighbours: None,
            period: None,
        }
    }

    /// These signals with their neighbours'.
    pub fn with_neighbours(mut self, neighbours: Neighbours) -> Self {
        self.neighbours = Some(neighbours);
        self
    }

    /// Which of a query's nearest memories [`Signals::fifth_nearest`] is: the fifth.
    pub(crate) const REFERENCE_RANK: usize = 5;

    /// [`Signals::fifth_nearest`] from a query's cosines with the nearest memories a search
    /// admits, best first (as `CandidateSource::nearest` gives them): the fifth, or among
    /// fewer, the least of theirs and the 0 of a missing, unrelated memory.
    pub(crate) fn fifth_of(best_first: impl IntoIterator<Item = f32>) -> f32 {
        let (mut seen, mut last) = (0, 0.0f32);
        for cosine in best_first.into_iter().take(Signals::REFERENCE_RANK) {
            (seen, last) = (seen + 1, cosine);
        }
        if seen < Signals::REFERENCE_RANK {
            last.min(0.0)
        } else {
            last
        }
    }

    /// These signals with the cosine of the query's fifth-nearest memory
    /// ([`Signals::fifth_nearest`]).
    pub fn with_fifth_nearest(mut self, cosine: f32) -> Self {
        self.fifth_nearest = Some(cosine);
        self
    }

    /// These signals with whether the memory was stored in the time the query names.
    pub fn with_period(mut self, in_period: bool) -> Self {
        self.period = Some(in_period);
        self
    }

    /// Whether every signal present is a finite number.
    pub(super) fn is_finite(&self) -> bool {
        let k = self.keyword.unwrap_or_default();
        let n = self.neighbours.unwrap_or_default();
        [
            self.cosine.unwrap_or(0.0),
            self.fifth_nearest.unwrap_or(0.0),
            k.relative,
            k.coverage,
            k.text_coverage,
            n.cosine,
            n.coverage,
        ]
        .iter()
        .all(|x| x.is_finite())
    }

    /// The model's inputs: `[1, cosine, relative, coverage, the neighbours' cosine and
    /// coverage, in the period, out of it, the lead, the neighbours' lead, the coverage by
    /// the memory's own text]`, an absent or non-finite signal as 0. The keyword match and
    /// the neighbours' signals count from 0 up (a negative cosine of a neighbour as 0):
    /// being absent is their least value. A lead is how far a cosine stands above
    /// [`Signals::fifth_nearest`], 0 when it does not (or either is absent).
    pub(super) fn inputs(&self) -> [f64; INPUTS] {
        let finite = |x: f32| x.is_finite().then_some(f64::from(x));
        // Evidence that counts from 0 up.
        let evidence = |x: f32| finite(x).unwrap_or(0.0).max(0.0);
        let cosine = self.cosine.and_then(finite);
        let neighbour = self
            .neighbours
            .and_then(|n| finite(n.cosine))
            .map(|c| c.max(0.0));
        let lead = |c: Option<f64>| match (c, self.fifth_nearest.and_then(finite)) {
            (Some(c), Some(fifth)) => (c - fifth).max(0.0),
            _ => 0.0,
        };
        let k = self.keyword.unwrap_or_default();
        [
            1.0,
            cosine.unwrap_or(0.0),
            evidence(k.relative),
            evidence(k.coverage),
            neighbour.unwrap_or(0.0),
            self.neighbours.map_or(0.0, |n| evidence(n.coverage)),
            f64::from(u8::from(self.period == Some(true))),
            f64::from(u8::from(self.period == Some(false))),
            lead(cosine),
            lead(neighbour),
            evidence(k.text_coverage),
        ]
    }

    /// The prior's share of the log-odds: `−ln(scope)` (0 for a scope of 0 or 1).
    pub(super) fn offset(&self) -> f64 {
        -(self.scope.clamp(1, Signals::MAX_SCOPE) as f64).ln()
    }
}
