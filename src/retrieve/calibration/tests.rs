use proptest::prelude::*;

use super::*;
use crate::retrieve::Neighbours;
use crate::store::KeywordScore;

/// Samples drawn from a known model, with a fixed pseudo-random sequence.
fn drawn(model: &Logistic, n: usize) -> Vec<(Signals, bool)> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f32 / (1u64 << 53) as f32
    };
    (0..n)
        .map(|_| {
            let k = KeywordScore {
                bm25: 0.0,
                relative: next(),
                coverage: next(),
                text_coverage: 0.0,
            };
            // Searches among 1 to 1,000 memories.
            let scope = 1 + (next() * 999.0) as usize;
            let s = Signals::new(Some(next() * 2.0 - 1.0), Some(k), scope);
            // A third of the queries name no time; of the rest, half the memories were
            // stored in it.
            let s = match (next() * 3.0) as u8 {
                0 => s,
                1 => s.with_period(true),
                _ => s.with_period(false),
            };
            let y = next() < model.probability(&s);
            (s, y)
        })
        .collect()
}

#[test]
fn fitting_recovers_the_model_that_drew_the_samples() {
    let truth = Logistic::new(2.0, 3.0, 1.5, 1.0).with_period(2.0, -1.0);
    let fitted = Logistic::fit(SearchMode::Hybrid, &drawn(&truth, 40_000)).unwrap();
    for (got, want) in [
        (fitted.bias, truth.bias),
        (fitted.cosine, truth.cosine),
        (fitted.relative, truth.relative),
        (fitted.coverage, truth.coverage),
        (fitted.in_period, truth.in_period),
        (fitted.out_of_period, truth.out_of_period),
    ] {
        assert!((got - want).abs() < 0.25, "{fitted:?} vs {truth:?}");
    }
}

#[test]
fn a_modes_model_uses_only_its_signals() {
    let truth = Logistic::new(3.0, 2.0, 2.0, 2.0);
    let samples = drawn(&truth, 5_000);
    let vector = Logistic::fit(SearchMode::Vector, &samples).unwrap();
    assert_eq!((vector.relative, vector.coverage), (0.0, 0.0));
    assert!(vector.cosine > 1.0, "{vector:?}");
    let keyword = Logistic::fit(SearchMode::Keyword, &samples).unwrap();
    assert_eq!(keyword.cosine, 0.0);
    assert!(
        keyword.relative > 1.0 && keyword.coverage > 1.0,
        "{keyword:?}"
    );
}

#[test]
fn a_memory_stored_in_the_time_the_query_names_scores_higher_in_every_mode() {
    let k = KeywordScore {
        bm25: 3.0,
        relative: 0.5,
        coverage: 0.5,
        text_coverage: 0.5,
    };
    let plain = Signals::new(Some(0.4), Some(k), 300);
    let c = Calibration::FITTED;
    for (mode, s) in [
        (SearchMode::Vector, Signals::cosine(0.4, 300)),
        (SearchMode::Keyword, Signals::keyword(k, 300)),
        (SearchMode::Hybrid, plain),
        (
            SearchMode::Hybrid,
            plain.with_neighbours(Neighbours::new(0.3, 0.2)),
        ),
    ] {
        let (none, inside, outside) = (
            c.score(mode, &s),
            c.score(mode, &s.with_period(true)),
            c.score(mode, &s.with_period(false)),
        );
        assert!(
            inside > none && inside > outside,
            "{mode:?}: {inside} {none} {outside}"
        );
    }
}

#[test]
fn fitting_needs_both_labels_and_finite_signals() {
    let only = vec![(Signals::cosine(0.5, 1), true); 10];
    let e = Logistic::fit(SearchMode::Vector, &only).unwrap_err();
    assert_eq!(e.status(), 400);
    let mut bad = vec![
        (Signals::cosine(0.5, 1), true),
        (Signals::cosine(0.1, 1), false),
    ];
    bad.push((Signals::cosine(f32::NAN, 1), false));
    assert_eq!(
        Logistic::fit(SearchMode::Vector, &bad)
            .unwrap_err()
            .status(),
        400
    );
    // Perfectly separated labels still give a finite model.
    let separated: Vec<(Signals, bool)> = (0..100)
        .map(|i| (Signals::cosine(i as f32 / 100.0, 100), i >= 50))
        .collect();
    let m = Logistic::fit(SearchMode::Vector, &separated).unwrap();
    assert!(m.cosine.is_finite() && m.cosine > 10.0, "{m:?}");
}

#[test]
fn fewer_memories_to_choose_from_raise_the_odds_by_as_much() {
    let m = Logistic::new(1.0, 4.0, 0.0, 0.0);
    let odds = |scope| {
        let p = f64::from(m.probability(&Signals::cosine(0.5, scope)));
        p / (1.0 - p)
    };
    assert!(
        (odds(8) / odds(800) - 100.0).abs() < 0.1,
        "{}",
        odds(8) / odds(800)
    );
    // Beyond MAX_SCOPE, and at 0 or 1, the prior stops moving.
    assert_eq!(odds(Signals::MAX_SCOPE), odds(10 * Signals::MAX_SCOPE));
    assert_eq!(odds(0), odds(1));
}

/// A signal whose weight would come out negative gets none, and the others are fitted
/// without it: the model stays monotone.
#[test]
fn fitting_holds_a_weight_of_the_wrong_sign_at_zero() {
    let truth = Logistic::new(1.0, 3.0, 2.0, -2.0).with_period(-1.0, 1.0);
    let fitted = Logistic::fit(SearchMode::Hybrid, &drawn(&truth, 20_000)).unwrap();
    assert!(fitted.is_monotone(), "{fitted:?}");
    assert_eq!(
        (fitted.coverage, fitted.in_period, fitted.out_of_period),
        (0.0, 0.0, 0.0)
    );
    assert!(fitted.cosine > 2.0 && fitted.relative > 0.5, "{fitted:?}");
    assert!(!truth.is_monotone());
}

#[test]
fn a_calibration_takes_only_monotone_models() {
    let c = Calibration::FITTED;
    assert!(Calibration::new(c.vector, c.keyword, c.hybrid).is_ok());
    let against = Logistic::new(0.0, 1.0, -0.5, 1.0);
    let e = Calibration::new(c.vector, c.keyword, against).unwrap_err();
    assert_eq!(e.status(), 400);
    for odd in [
        c.hybrid.with_period(1.0, 0.5),
        c.hybrid.with_neighbours(-1.0, 1.0),
        c.hybrid.with_leads(1.0, -0.1),
        c.vector.with_leads(-1.0, 0.0),
        c.keyword.with_text_coverage(-0.1),
    ] {
        assert!(
            Calibration::new(c.vector, c.keyword, odd).is_err(),
            "{odd:?}"
        );
    }
}

/// Signals as a search gives them: any cosine and fifth-nearest, a keyword match or
/// none, neighbours or none, a period named or not.
fn signals() -> impl Strategy<Value = Signals> {
    let keyword =
        (0.0f32..1.0, 0.0f32..=1.0, 0.0f32..=1.0).prop_map(|(relative, coverage, in_text)| {
            KeywordScore {
                bm25: relative * 10.0,
                relative,
                coverage,
                text_coverage: coverage * in_text,
            }
        });
    (
        -1.0f32..=1.0,
        proptest::option::of(-1.0f32..=1.0),
        proptest::option::of(keyword),
        proptest::option::of((-1.0f32..=1.0, 0.0f32..=1.0)),
        proptest::option::of(any::<bool>()),
        0usize..2_000,
    )
        .prop_map(|(cosine, fifth, keyword, neighbours, period, scope)| {
            let mut s = Signals::new(Some(cosine), keyword, scope);
            s.fifth_nearest = fifth;
            s.neighbours = neighbours.map(|(c, v)| Neighbours::new(c, v));
            s.period = period;
            s
        })
}

/// More evidence, one signal at a time: `s` with `step` (in [0, 1]) more of one signal,
/// or with a signal it lacked.
fn more(s: Signals, which: u8, step: f32) -> Signals {
    let mut t = s;
    let k = s.keyword.unwrap_or_default();
    let n = s.neighbours.unwrap_or_default();
    match which % 8 {
        0 => t.cosine = s.cosine.map(|c| (c + 2.0 * step).min(1.0)),
        1 => {
            t.keyword = Some(KeywordScore {
                relative: (k.relative + step).min(0.999).max(k.relative),
                ..k
            })
        }
        2 => {
            t.keyword = Some(KeywordScore {
                coverage: (k.coverage + step).min(1.0),
                ..k
            })
        }
        3 => {
            t.neighbours = Some(Neighbours::new(
                (n.cosine + 2.0 * step).min(1.0),
                n.coverage,
            ))
        }
        4 => t.neighbours = Some(Neighbours::new(n.cosine, (n.coverage + step).min(1.0))),
        6 => {
            // More of the query's words in the memory's own text, not only its context.
            let text_coverage = (k.text_coverage + step).min(1.0);
            t.keyword = Some(KeywordScore {
                text_coverage,
                coverage: k.coverage.max(text_coverage),
                ..k
            })
        }
        5 => {
            // A word in common with the same cosine.
            t.keyword = Some(s.keyword.unwrap_or(KeywordScore {
                bm25: step,
                relative: step / 10.0,
                coverage: step,
                text_coverage: step,
            }))
        }
        // Out of the time the query names becomes none named; none, in it.
        _ => {
            t.period = if s.period == Some(false) {
                None
            } else {
                Some(true)
            }
        }
    }
    t
}

proptest! {
    /// No mode's score falls when a memory has more evidence: a higher cosine, a
    /// better keyword match, a word in common where it had none, neighbours that match
    /// better, or a time the query names that it was stored in.
    #[test]
    fn a_score_never_falls_with_more_evidence(
        s in signals(),
        which in 0u8..8,
        step in 0.0f32..=1.0,
    ) {
        let t = more(s, which, step);
        for mode in [SearchMode::Vector, SearchMode::Keyword, SearchMode::Hybrid] {
            let (before, after) = (
                Calibration::FITTED.score(mode, &s),
                Calibration::FITTED.score(mode, &t),
            );
            prop_assert!(after >= before, "{mode:?}: {before} -> {after}\n{s:?}\n{t:?}");
        }
    }
}

#[test]
fn a_memorys_lead_over_the_fifth_nearest_raises_its_score() {
    let c = Calibration::FITTED;
    let plain = Signals::new(Some(0.4), None, 100);
    let ahead = plain.with_fifth_nearest(0.2);
    let behind = plain.with_fifth_nearest(0.5);
    let (p, a, b) = (
        c.score(SearchMode::Hybrid, &plain),
        c.score(SearchMode::Hybrid, &ahead),
        c.score(SearchMode::Hybrid, &behind),
    );
    assert!(a > p && p == b, "{a} {p} {b}");
    // Among unrelated facts a cosine of 0.3 stands out; among near ones it does not.
    let stands_out = Signals::new(Some(0.3), None, 8).with_fifth_nearest(0.1);
    let among_near = Signals::new(Some(0.3), None, 8).with_fifth_nearest(0.3);
    assert!(
        c.score(SearchMode::Hybrid, &stands_out) > 2.0 * c.score(SearchMode::Hybrid, &among_near)
    );
}
