//! Calibrated scores: from a candidate's signals (its cosine, how it matches the query's
//! words) to an estimate that it is relevant, by a logistic model per search mode, and the
//! fitting of such models on labelled candidates.
//!
//! Every model is monotone in the evidence: its weights on the cosine, its lead over the
//! query's fifth-nearest memory, the keyword match, the neighbours' match and a memory
//! stored in the time the query names are never negative, and a signal that is absent
//! counts as the least of its values. Hybrid search scores every candidate with one model,
//! so a word in common or a neighbour can only add to what a memory's meaning earns it.

use serde::{Deserialize, Serialize};

use super::signals::INPUTS;
use super::{SearchMode, Signals};
use crate::error::{Error, Result};

/// A logistic model of relevance: `1 / (1 + e^−z)` with
/// `z = bias + cosine · c + lead · max(0, c − f) + relative · r + coverage · v +
/// text_coverage · t + neighbour_cosine · nc + neighbour_lead · max(0, nc − f) +
/// neighbour_coverage · nv + in_period · i + out_of_period · o − ln(scope)`, where `c` is
/// the memory's cosine with the query (0 when absent), `f` the cosine of the query's
/// fifth-nearest memory ([`Signals::fifth_nearest`]; no lead without it), `r` the memory's
/// [`KeywordScore::relative`](crate::store::KeywordScore::relative), `v` its
/// [`KeywordScore::coverage`](crate::store::KeywordScore::coverage) and `t` its
/// [`KeywordScore::text_coverage`](crate::store::KeywordScore::text_coverage) (all 0 when
/// it has no keyword match), `nc` and `nv` its [`Neighbours`](super::Neighbours)' (0 without),
/// `i` and `o` 1 when the query names a time and the memory was stored in it, or not
/// ([`Signals::period`]; both 0 when the query names none), and `scope` how many memories
/// the search ranked among ([`Signals::scope`]).
///
/// The last term is the prior: a query is taken to have about as many relevant memories
/// whatever the store's size, so a memory competing with fewer others is likelier to be
/// one of them. Among 8 memories, a memory scores the odds it would score among 800,
/// times 100.
///
/// A model is monotone in the evidence when every weight but the bias is at least 0 and
/// `out_of_period` at most 0 ([`is_monotone`](Self::is_monotone)): then no signal of more
/// evidence (a higher cosine, a word in common, a neighbour) lowers a score.
/// [`fit`](Self::fit) fits such models, and a [`Calibration`] takes no other.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Logistic {
    /// The log-odds of a memory without any signal, alone in its store.
    pub bias: f32,
    /// Weight of the cosine.
    pub cosine: f32,
    /// Weight of the relative BM25.
    pub relative: f32,
    /// Weight of the coverage of the query's words.
    pub coverage: f32,
    /// Weight of the neighbours' cosine ([`Neighbours`](super::Neighbours)).
    #[serde(default)]
    pub neighbour_cosine: f32,
    /// Weight of the neighbours' coverage.
    #[serde(default)]
    pub neighbour_coverage: f32,
    /// Weight of a memory stored in the time the query names ([`Signals::period`]).
    #[serde(default)]
    pub in_period: f32,
    /// Weight of a memory stored outside the time the query names.
    #[serde(default)]
    pub out_of_period: f32,
    /// Weight of the cosine's lead over the query's fifth-nearest memory.
    #[serde(default)]
    pub lead: f32,
    /// Weight of the neighbours' lead over the query's fifth-nearest memory.
    #[serde(default)]
    pub neighbour_lead: f32,
    /// Weight of the coverage of the query's words by the memory's own text, its context
    /// aside.
    #[serde(default)]
    pub text_coverage: f32,
}

impl Logistic {
    /// A model from its bias and weights (none on the neighbours).
    pub fn new(bias: f32, cosine: f32, relative: f32, coverage: f32) -> Self {
        Logistic::from_weights([
            bias, cosine, relative, coverage, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        ])
    }

    /// This model with weights on the neighbours' cosine and coverage.
    pub fn with_neighbours(mut self, cosine: f32, coverage: f32) -> Self {
        self.neighbour_cosine = cosine;
        self.neighbour_coverage = coverage;
        self
    }

    /// This model with weights on the leads of a memory's cosine and its neighbours' over
    /// the query's fifth-nearest memory.
    pub fn with_leads(mut self, lead: f32, neighbour_lead: f32) -> Self {
        self.lead = lead;
        self.neighbour_lead = neighbour_lead;
        self
    }

    /// This model with a weight on the coverage of the query's words by a memory's own
    /// text, its context aside.
    pub fn with_text_coverage(mut self, text_coverage: f32) -> Self {
        self.text_coverage = text_coverage;
        self
    }

    /// This model with weights on a memory stored in, and out of, the time a query names.
    pub fn with_period(mut self, in_period: f32, out_of_period: f32) -> Self {
        self.in_period = in_period;
        self.out_of_period = out_of_period;
        self
    }

    const fn from_weights(w: [f32; INPUTS]) -> Self {
        Logistic {
            bias: w[0],
            cosine: w[1],
            relative: w[2],
            coverage: w[3],
            neighbour_cosine: w[4],
            neighbour_coverage: w[5],
            in_period: w[6],
            out_of_period: w[7],
            lead: w[8],
            neighbour_lead: w[9],
            text_coverage: w[10],
        }
    }

    fn weights(&self) -> [f32; INPUTS] {
        [
            self.bias,
            self.cosine,
            self.relative,
            self.coverage,
            self.neighbour_cosine,
            self.neighbour_coverage,
            self.in_period,
            self.out_of_period,
            self.lead,
            self.neighbour_lead,
            self.text_coverage,
        ]
    }

    /// The estimated probability that a memory with these signals is relevant.
    ///
    /// A signal that is not a finite number counts as absent.
    pub fn probability(&self, signals: &Signals) -> f32 {
        predicted(
            &self.weights().map(f64::from),
            &signals.inputs(),
            signals.offset(),
        ) as f32
    }

    /// Fits the model of `mode` to labelled candidates, `(signals, relevant)`: logistic
    /// regression by Newton's method, with a small ridge penalty on the weights (not the
    /// bias) so that a signal that separates the labels perfectly keeps a finite weight, and
    /// the weights held to the signs that keep the model monotone in the evidence (see
    /// [`is_monotone`](Self::is_monotone)): a signal that would take a weight of the wrong
    /// sign gets none. A mode's model uses only some signals: the cosine for
    /// [`SearchMode::Vector`] (its lead too makes a model that, fitted on LoCoMo, scores
    /// unrelated facts of a small store too high), the keyword match for
    /// [`SearchMode::Keyword`], every signal, the neighbours' too, for
    /// [`SearchMode::Hybrid`].
    ///
    /// Fit on the candidates your searches consider (the best 50, say, of each labelled
    /// query), not on every memory: the scores estimate relevance among those.
    ///
    /// ```
    /// use memlane::{Logistic, SearchMode, Signals};
    /// // Relevant memories have higher cosines here.
    /// let samples: Vec<(Signals, bool)> = (0..200)
    ///     .map(|i| {
    ///         let c = i as f32 / 200.0;
    ///         (Signals::cosine(c, 50), (i * 7919) % 200 < i)
    ///     })
    ///     .collect();
    /// let model = Logistic::fit(SearchMode::Vector, &samples)?;
    /// assert!(model.cosine > 0.0 && model.is_monotone());
    /// # Ok::<(), memlane::Error>(())
    /// ```
    pub fn fit(mode: SearchMode, samples: &[(Signals, bool)]) -> Result<Logistic> {
        Logistic::fit_inputs(samples, |s| features(mode, s))
    }

    /// Whether the model is monotone in the evidence: no negative weight on the cosine, its
    /// lead, the keyword match, the neighbours' match or lead, or a memory stored in the
    /// time the query names, and no positive one on a memory stored outside it.
    pub fn is_monotone(&self) -> bool {
        self.weights()
            .iter()
            .zip(SIGNS)
            .all(|(w, sign)| sign.admits(f64::from(*w)))
    }

    fn fit_inputs(
        samples: &[(Signals, bool)],
        features: impl Fn(&Signals) -> [f64; INPUTS],
    ) -> Result<Logistic> {
        let positives = samples.iter().filter(|(_, y)| *y).count();
        if positives == 0 || positives == samples.len() {
            return Err(Error::invalid(format!(
                "fitting a calibration needs relevant and irrelevant candidates; got {positives} \
                 relevant of {}",
                samples.len()
            )));
        }
        if samples.iter().any(|(s, _)| !s.is_finite()) {
            return Err(Error::invalid(
                "fitting a calibration needs finite signals; a candidate has a NaN or infinite one",
            ));
        }
        let rows: Vec<Row> = samples
            .iter()
            .map(|(s, y)| (features(s), s.offset(), f64::from(u8::from(*y))))
            .collect();
        // Active sets: fit the free weights; a weight that comes out with the wrong sign is
        // held at 0 and the rest fitted again; a weight held at 0 is freed again when the
        // likelihood would rise by moving it the way its sign allows. Each round holds or
        // frees one weight.
        let mut held = [false; INPUTS];
        let mut w = newton(&rows, &held, positives)?;
        for _ in 0..4 * INPUTS {
            let wrong = (1..INPUTS)
                .filter(|&i| !held[i] && !SIGNS[i].admits(w[i]))
                .max_by(|&i, &j| w[i].abs().total_cmp(&w[j].abs()));
            if let Some(i) = wrong {
                held[i] = true;
                w = newton(&rows, &held, positives)?;
                continue;
            }
            let ascent = gradient(&rows, &w);
            let freed = (1..INPUTS)
                .filter(|&i| {
                    held[i]
                        && SIGNS[i].admits(ascent[i])
                        && ascent[i].abs() > 1e-6 * rows.len() as f64
                })
                .max_by(|&i, &j| ascent[i].abs().total_cmp(&ascent[j].abs()));
            match freed {
                Some(i) => {
                    held[i] = false;
                    w = newton(&rows, &held, positives)?;
                }
                None => break,
            }
        }
        for i in 1..INPUTS {
            if !SIGNS[i].admits(w[i]) {
                w[i] = 0.0;
            }
        }
        let model = Logistic::from_weights(w.map(|w| w as f32));
        model.check("fitted")?;
        Ok(model)
    }

    fn check(&self, mode: &str) -> Result<()> {
        if self.weights().iter().all(|v| v.is_finite()) {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "the {mode} calibration has a weight that is not a finite number: {self:?}"
            )))
        }
    }
}

/// How each search mode turns signals into a score: one [`Logistic`] model per mode.
///
/// A score is the model's estimate that the memory is relevant to the query, among the
/// candidates a search considers. The default models are fitted on LoCoMo's question →
/// evidence labels (see `docs/retrieval.md` and `examples/calibrate/main.rs`, which
/// shows how to fit models on labelled searches of your own). Each mode scores every
/// candidate with its one model, so a score never falls when the evidence grows: a word in
/// common, a neighbour that matches or a higher cosine can only raise it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Calibration {
    /// The model of vector searches (only its bias and its weights on the cosine, its lead
    /// and the period matter; the default weighs no lead).
    pub vector: Logistic,
    /// The model of keyword searches (its weights on the cosine and the neighbours do not
    /// matter).
    pub keyword: Logistic,
    /// The model of hybrid searches.
    pub hybrid: Logistic,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration::FITTED
    }
}

impl Calibration {
    /// The models shipped with memlane, fitted on all ten LoCoMo conversations
    /// (`cargo run --release --example calibrate -- locomo10.json` prints them), for the
    /// default embedder, all-MiniLM-L6-v2.
    pub const FITTED: Calibration = Calibration {
        vector: Logistic::from_weights([
            -2.116, 9.318, 0.0, 0.0, 0.0, 0.0, 1.555, -1.848, 0.0, 0.0, 0.0,
        ]),
        keyword: Logistic::from_weights([
            -0.061, 0.0, 0.549, 3.306, 0.0, 0.0, 2.223, -0.328, 0.0, 0.0, 2.592,
        ]),
        hybrid: Logistic::from_weights([
            -0.843, 0.642, 0.0, 1.879, 2.316, 0.0, 1.923, -0.134, 5.470, 8.900, 3.087,
        ]),
    };

    /// Models of your own: 400 unless each is monotone in the evidence
    /// ([`Logistic::is_monotone`]) and its weights are finite.
    pub fn new(vector: Logistic, keyword: Logistic, hybrid: Logistic) -> Result<Self> {
        let calibration = Calibration {
            vector,
            keyword,
            hybrid,
        };
        calibration.check()?;
        Ok(calibration)
    }

    /// The score of signals in a mode, in (0, 1): the mode's model's
    /// [`probability`](Logistic::probability).
    pub fn score(&self, mode: SearchMode, signals: &Signals) -> f32 {
        let model = match mode {
            SearchMode::Vector => &self.vector,
            SearchMode::Keyword => &self.keyword,
            SearchMode::Hybrid => &self.hybrid,
        };
        model.probability(signals)
    }

    /// Checks that every weight is a finite number and every model monotone in the
    /// evidence.
    pub(crate) fn check(&self) -> Result<()> {
        for (mode, model) in [
            ("vector", &self.vector),
            ("keyword", &self.keyword),
            ("hybrid", &self.hybrid),
        ] {
            model.check(mode)?;
            if !model.is_monotone() {
                return Err(Error::invalid(format!(
                    "the {mode} calibration is not monotone in the evidence: a weight on the \
                     cosine, its lead, the keyword match, the neighbours or a memory in the \
                     period is negative, or the one on a memory outside the period positive: \
                     {model:?}"
                )));
            }
        }
        Ok(())
    }
}

/// The ridge penalty of [`Logistic::fit`] on each weight.
const RIDGE: f64 = 1e-3;

/// A candidate for fitting: its inputs, its prior's offset and its label (1 relevant).
type Row = ([f64; INPUTS], f64, f64);

/// The sign a weight may take in a model monotone in the evidence.
#[derive(Clone, Copy)]
enum Sign {
    Any,
    AtLeastZero,
    AtMostZero,
}

impl Sign {
    fn admits(self, w: f64) -> bool {
        match self {
            Sign::Any => true,
            Sign::AtLeastZero => w >= 0.0,
            Sign::AtMostZero => w <= 0.0,
        }
    }
}

/// The signs of the weights, in the order of [`Signals::inputs`]: the bias is free; out of
/// the period named is evidence against.
const SIGNS: [Sign; INPUTS] = [
    Sign::Any,
    Sign::AtLeastZero,
    Sign::AtLeastZero,
    Sign::AtLeastZero,
    Sign::AtLeastZero,
    Sign::AtLeastZero,
    Sign::AtLeastZero,
    Sign::AtMostZero,
    Sign::AtLeastZero,
    Sign::AtLeastZero,
    Sign::AtLeastZero,
];

/// The probability weights `w` give a candidate with inputs `x` and the prior's `offset`:
/// a model's score ([`Logistic::probability`]) and its fit's prediction alike.
fn predicted(w: &[f64; INPUTS], x: &[f64; INPUTS], offset: f64) -> f64 {
    let z: f64 = w.iter().zip(x).map(|(w, x)| w * x).sum::<f64>() + offset;
    1.0 / (1.0 + (-z).exp())
}

/// The gradient of the penalised log-likelihood at `w` (the direction that raises it).
fn gradient(rows: &[Row], w: &[f64; INPUTS]) -> [f64; INPUTS] {
    let mut g = [0.0f64; INPUTS];
    for (x, offset, y) in rows {
        let p = predicted(w, x, *offset);
        for i in 0..INPUTS {
            g[i] += (y - p) * x[i];
        }
    }
    for i in 1..INPUTS {
        g[i] -= RIDGE * w[i];
    }
    g
}

/// Logistic regression by Newton's method with the ridge, the `held` weights kept at 0.
fn newton(rows: &[Row], held: &[bool; INPUTS], positives: usize) -> Result<[f64; INPUTS]> {
    // Start from the base rate, so that the first steps are short.
    let n = rows.len() as f64;
    let rate = positives as f64 / n;
    let mean_offset = rows.iter().map(|r| r.1).sum::<f64>() / n;
    let mut w = [0.0f64; INPUTS];
    w[0] = (rate / (1.0 - rate)).ln() - mean_offset;
    for _ in 0..200 {
        let mut gradient = [0.0f64; INPUTS];
        let mut hessian = [[0.0f64; INPUTS]; INPUTS];
        for (x, offset, y) in rows {
            let p = predicted(&w, x, *offset);
            for i in 0..INPUTS {
                gradient[i] += (p - y) * x[i];
                for j in 0..INPUTS {
                    hessian[i][j] += p * (1.0 - p) * x[i] * x[j];
                }
            }
        }
        // The ridge; it also keeps at 0 the weight of a signal the mode does not have (its
        // input is always 0). A held weight has no gradient and a unit curvature: its step
        // is 0.
        for i in 1..INPUTS {
            gradient[i] += RIDGE * w[i];
            hessian[i][i] += RIDGE;
            if held[i] {
                gradient[i] = 0.0;
                hessian[i] = [0.0; INPUTS];
                for row in hessian.iter_mut() {
                    row[i] = 0.0;
                }
                hessian[i][i] = 1.0;
            }
        }
        let step = solve(hessian, gradient).ok_or_else(|| {
            Error::invalid("fitting a calibration failed: the signals do not vary")
        })?;
        // Newton's steps, at most 2 long in any weight: a far start cannot overshoot.
        let largest = step.iter().fold(0.0f64, |m, s| m.max(s.abs()));
        let scale = (2.0 / largest).min(1.0);
        for (w, step) in w.iter_mut().zip(step) {
            *w -= scale * step;
        }
        if largest < 1e-9 {
            break;
        }
    }
    Ok(w)
}

/// A candidate's inputs to a mode's model (see [`Signals::inputs`]), with the signals the
/// mode does not use at 0.
fn features(mode: SearchMode, s: &Signals) -> [f64; INPUTS] {
    let mut x = s.inputs();
    let unused: &[usize] = match mode {
        SearchMode::Vector => &[2, 3, 4, 5, 8, 9, 10],
        SearchMode::Keyword => &[1, 4, 5, 8, 9],
        SearchMode::Hybrid => &[],
    };
    for &i in unused {
        x[i] = 0.0;
    }
    x
}

/// Solves `a · x = b` by Gaussian elimination with partial pivoting; `None` when `a` is
/// singular.
fn solve<const N: usize>(mut a: [[f64; N]; N], mut b: [f64; N]) -> Option<[f64; N]> {
    for col in 0..N {
        let pivot = (col..N).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (pivot_row, pivot_b) = (a[col], b[col]);
        for (row, rb) in a.iter_mut().zip(b.iter_mut()).skip(col + 1) {
            let f = row[col] / pivot_row[col];
            for (x, p) in row.iter_mut().zip(pivot_row).skip(col) {
                *x -= f * p;
            }
            *rb -= f * pivot_b;
        }
    }
    let mut x = [0.0; N];
    for row in (0..N).rev() {
        let tail: f64 = (row + 1..N).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - tail) / a[row][row];
    }
    Some(x)
}

#[cfg(test)]
mod tests;
