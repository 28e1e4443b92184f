//! The time a query names: "on 8 May 2023", "in June", "last week". A memory stored in
//! that period, or soon after it (people tell of a day in the days after), is likelier to
//! be what the query is about; the calibrated models weigh it (see
//! [`Signals::period`](super::Signals::period)).
//!
//! Read in English and in UTC: full month names, with a day and a year or without them
//! (a month without a year is that month of each of the last ten years), ISO dates
//! (`2023-05-08`), and the relative dates fact extraction resolves ("yesterday", "last
//! week", "3 days ago", "last Friday"), counted from the search's own time. A year alone
//! names no period.

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};

use crate::filter::{Condition, Filter, Op, TimeField, TimeRange};
use crate::infer::dates::{self, Relative};

pub(crate) const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// Month names that are also common words ("may I", "march on"): months only with a day, a
/// year or one of these words before them.
const AMBIGUOUS: [&str; 2] = ["may", "march"];
const BEFORE_A_MONTH: [&str; 9] = [
    "in", "of", "during", "since", "early", "late", "mid", "last", "this",
];

/// How many days around a named day a memory still counts as stored about it.
const DAY_SLACK: i64 = 10;
/// How many days after a named month, week or year a memory still counts as told of it.
const TOLD_AFTER: i64 = 14;
/// How many years back a month without a year reaches.
const YEARS_BACK: i32 = 10;

/// The `created_at` ranges, each `[start, end)`, of memories stored in or soon after the
/// time a query names.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Period {
    ranges: Vec<(DateTime<Utc>, DateTime<Utc>)>,
}

impl Period {
    /// The period `query` names, read at `now`; `None` when it names none.
    pub(crate) fn named_in(query: &str, now: DateTime<Utc>) -> Option<Period> {
        let words: Vec<String> = dates::words(query)
            .into_iter()
            .map(|(_, w)| w.to_lowercase())
            .collect();
        let mut ranges = Vec::new();
        for date in iso_dates(query) {
            ranges.push(around(date));
        }
        for (i, word) in words.iter().enumerate() {
            let Some(month) = MONTHS.iter().position(|m| m == word) else {
                continue;
            };
            let month = month as u32 + 1;
            // "8 May", "8th of May", "May 8th".
            let day_before = |k: usize| i.checked_sub(k).and_then(|j| day(&words[j]));
            let day = day_before(1)
                .or_else(|| day_before(2).filter(|_| words[i - 1] == "of"))
                .or_else(|| words.get(i + 1).and_then(|w| day(w)));
            let year = words.iter().skip(i + 1).take(3).find_map(|w| year(w));
            let before = i.checked_sub(1).map(|j| words[j].as_str());
            if AMBIGUOUS.contains(&word.as_str())
                && day.is_none()
                && year.is_none()
                && !before.is_some_and(|b| BEFORE_A_MONTH.contains(&b))
            {
                continue;
            }
            match (day, year) {
                (Some(d), Some(y)) => {
                    if let Some(date) = NaiveDate::from_ymd_opt(y, month, d) {
                        ranges.push(around(date));
                    }
                }
                (_, Some(y)) => ranges.extend(month_of(y, month)),
                (_, None) => {
                    for y in now.year() - YEARS_BACK..=now.year() {
                        ranges.extend(month_of(y, month).filter(|r| r.0 <= now));
                    }
                }
            }
        }
        if ranges.is_empty() {
            ranges.extend(relative(&words, now));
        }
        (!ranges.is_empty()).then_some(Period { ranges })
    }

    /// The filter of memories stored in the period.
    pub(crate) fn filter(&self) -> Filter {
        let at = |t: DateTime<Utc>| {
            let start = t.timestamp_micros();
            TimeRange {
                start,
                end: start.saturating_add(1),
            }
        };
        Filter::Or(
            self.ranges
                .iter()
                .map(|&(start, end)| {
                    Filter::And(vec![
                        Filter::Condition(Condition::Time(TimeField::Created, Op::Gte(at(start)))),
                        Filter::Condition(Condition::Time(TimeField::Created, Op::Lt(at(end)))),
                    ])
                })
                .collect(),
        )
    }
}

/// A day of the month, `8` or `8th`.
fn day(word: &str) -> Option<u32> {
    let digits = ["st", "nd", "rd", "th"]
        .iter()
        .find_map(|s| word.strip_suffix(s))
        .unwrap_or(word);
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

/// A year of four digits.
fn year(word: &str) -> Option<i32> {
    (word.len() == 4)
        .then(|| word.parse().ok())
        .flatten()
        .filter(|y| (1900..=2100).contains(y))
}

fn midnight(date: NaiveDate) -> DateTime<Utc> {
    Utc.from_utc_datetime(&date.and_hms_opt(0, 0, 0).unwrap_or_default())
}

/// A named day: the days around it.
fn around(date: NaiveDate) -> (DateTime<Utc>, DateTime<Utc>) {
    let start = midnight(date) - Duration::days(DAY_SLACK);
    (start, midnight(date) + Duration::days(DAY_SLACK + 1))
}

/// A month of a year, and the days after it.
fn month_of(year: i32, month: u32) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let first = NaiveDate::from_ymd_opt(year, month, 1)?;
    let next = first.checked_add_months(chrono::Months::new(1))?;
    Some((midnight(first), midnight(next) + Duration::days(TOLD_AFTER)))
}

/// `yyyy-mm-dd` dates in the text.
fn iso_dates(text: &str) -> Vec<NaiveDate> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '-'))
        .filter(|piece| piece.len() == 10)
        .filter_map(|piece| NaiveDate::parse_from_str(piece, "%Y-%m-%d").ok())
        .collect()
}

/// A relative date ("yesterday", "last week", "3 days ago", "last Friday"), as fact
/// extraction reads them (see `infer::dates`), counted from `now`.
fn relative(words: &[String], now: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let told = Duration::days(TOLD_AFTER);
    Some(match dates::first_relative(words, now.date_naive())? {
        Relative::Day(d) => around(d),
        Relative::Week(monday) => (
            midnight(monday),
            midnight(monday) + Duration::days(7) + told,
        ),
        Relative::Month(first) => month_of(first.year(), first.month())?,
        Relative::Year(y) => {
            let first = NaiveDate::from_ymd_opt(y, 1, 1)?;
            (
                midnight(first),
                midnight(NaiveDate::from_ymd_opt(y + 1, 1, 1)?) + told,
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i32, m: u32, d: u32) -> DateTime<Utc> {
        midnight(NaiveDate::from_ymd_opt(y, m, d).unwrap())
    }

    fn now() -> DateTime<Utc> {
        at(2026, 11, 26) + Duration::hours(15)
    }

    /// Whether a memory stored at `t` counts as stored in the period `query` names.
    fn of(query: &str, t: DateTime<Utc>) -> Option<bool> {
        let period = Period::named_in(query, now())?;
        Some(period.ranges.iter().any(|&(s, e)| s <= t && t < e))
    }

    #[test]
    fn a_named_day_takes_the_days_around_it() {
        for query in [
            "What did Maria do on 3 May, 2023?",
            "what happened on May 3rd 2023",
            "Who came on the 3rd of May, 2023?",
            "plans for 2023-05-03?",
        ] {
            assert_eq!(of(query, at(2023, 5, 3)), Some(true), "{query}");
            assert_eq!(of(query, at(2023, 5, 12)), Some(true), "{query}");
            assert_eq!(of(query, at(2023, 4, 24)), Some(true), "{query}");
            assert_eq!(of(query, at(2023, 5, 15)), Some(false), "{query}");
            assert_eq!(of(query, at(2022, 5, 3)), Some(false), "{query}");
        }
    }

    #[test]
    fn a_month_takes_the_weeks_after_it_and_every_recent_year_without_one() {
        let q = "What did they paint in July 2023?";
        assert_eq!(of(q, at(2023, 7, 1)), Some(true));
        assert_eq!(of(q, at(2023, 8, 10)), Some(true));
        assert_eq!(of(q, at(2023, 8, 20)), Some(false));
        assert_eq!(of(q, at(2023, 6, 30)), Some(false));
        let q = "When did Melanie go camping in June?";
        assert_eq!(of(q, at(2023, 6, 9)), Some(true));
        assert_eq!(of(q, at(2019, 6, 30)), Some(true));
        assert_eq!(of(q, at(2023, 9, 1)), Some(false));
        assert_eq!(
            of(q, at(2012, 6, 9)),
            Some(false),
            "more than ten years back"
        );
    }

    #[test]
    fn may_and_march_as_words_name_no_time() {
        assert_eq!(of("What may Caroline like to read?", at(2023, 5, 1)), None);
        assert_eq!(of("Who will march in the parade?", at(2023, 3, 1)), None);
        assert_eq!(of("What did she do in May?", at(2023, 5, 1)), Some(true));
        assert_eq!(of("and on 8 May?", at(2023, 5, 8)), Some(true));
        assert_eq!(
            of("What happened in March 2024?", at(2024, 3, 5)),
            Some(true)
        );
    }

    #[test]
    fn relative_times_count_back_from_the_search() {
        let n = now();
        assert_eq!(
            of("what did I eat yesterday?", n - Duration::hours(20)),
            Some(true)
        );
        assert_eq!(
            of("what did I eat yesterday?", n - Duration::days(15)),
            Some(false)
        );
        assert_eq!(
            of("who did I meet 3 days ago", n - Duration::days(3)),
            Some(true)
        );
        assert_eq!(
            of("who did I meet 3 days ago", n - Duration::days(20)),
            Some(false)
        );
        assert_eq!(
            of("where was I last week", n - Duration::days(10)),
            Some(true)
        );
        assert_eq!(
            of("where was I last week", n - Duration::days(30)),
            Some(false)
        );
        assert_eq!(of("books I read last month", at(2026, 10, 5)), Some(true));
        assert_eq!(of("books I read last month", at(2026, 9, 28)), Some(false));
        assert_eq!(of("goals for this year", at(2026, 2, 1)), Some(true));
        assert_eq!(of("goals for this year", at(2025, 12, 1)), Some(false));
        // A named date wins over a relative one.
        assert_eq!(
            of(
                "the weekend before 10 April 2023, last week",
                at(2023, 4, 8)
            ),
            Some(true)
        );
    }

    #[test]
    fn queries_without_a_time_name_none() {
        for query in [
            "what food should I avoid serving her?",
            "How many times has Melanie gone to the beach in 2023?",
            "Which weekend hobby do I have?",
            "the 31st item",
            "",
        ] {
            assert_eq!(Period::named_in(query, now()), None, "{query}");
        }
    }

    #[test]
    fn the_filter_keeps_exactly_the_ranges() {
        let period = Period::named_in("on 8 May 2023", now()).unwrap();
        for (t, kept) in [
            (at(2023, 5, 8), true),
            (at(2023, 5, 18) + Duration::hours(23), true),
            (at(2023, 5, 19), false),
            (at(2023, 4, 28), true),
            (at(2023, 4, 27) + Duration::hours(23), false),
        ] {
            let record = crate::store::conformance::record("x", "u", t);
            assert_eq!(period.filter().matches(&record), kept, "{t}");
        }
    }
}
