//! A safety net for relative dates.
//!
//! The extraction prompt asks the model to write absolute dates, and a good model does. A
//! small one sometimes keeps "next Friday", which is wrong a week later. When a stored fact
//! still holds an English relative date and no absolute one, memlane appends the date it
//! means, counted from the conversation's time: "Flies to Oslo next Friday (2026-11-27)".

use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc, Weekday};

/// The fact with each relative date followed by its absolute date in parentheses; unchanged
/// when it has none, or already holds an ISO date.
pub(crate) fn annotate(text: &str, at: DateTime<Utc>) -> String {
    if has_iso_date(text) {
        return text.to_owned();
    }
    let today = at.date_naive();
    let words = words(text);
    let lower: Vec<String> = words.iter().map(|(_, w)| w.to_lowercase()).collect();
    let mut inserts: Vec<(usize, String)> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let rest: Vec<&str> = lower[i..].iter().take(5).map(String::as_str).collect();
        match resolve(&rest, today) {
            Some((len, date)) => {
                let (start, word) = words[i + len - 1];
                let end = start + word.len();
                // Already annotated ("tomorrow (2026-…)") or followed by a year: leave it.
                if !text[end..].trim_start().starts_with('(') {
                    inserts.push((end, date.to_string()));
                }
                i += len;
            }
            None => i += 1,
        }
    }
    let mut out = text.to_owned();
    for (at, date) in inserts.into_iter().rev() {
        out.insert_str(at, &format!(" ({date})"));
    }
    out
}

/// Words (runs of letters and digits) with their byte offsets.
pub(crate) fn words(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, &text[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, &text[s..]));
    }
    out
}

fn has_iso_date(text: &str) -> bool {
    let b = text.as_bytes();
    b.windows(10).any(|w| {
        w[..4].iter().all(u8::is_ascii_digit)
            && w[4] == b'-'
            && w[5..7].iter().all(u8::is_ascii_digit)
            && w[7] == b'-'
            && w[8..].iter().all(u8::is_ascii_digit)
    })
}

/// What a relative date means: a day, the week from a Monday, a month (its first day) or
/// a year. Shown as `2026-11-27`, `week of 2026-11-09`, `2026-12` and `2026`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Relative {
    Day(NaiveDate),
    Week(NaiveDate),
    Month(NaiveDate),
    Year(i32),
}

impl std::fmt::Display for Relative {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Relative::Day(d) => write!(f, "{}", d.format("%Y-%m-%d")),
            Relative::Week(d) => write!(f, "week of {}", d.format("%Y-%m-%d")),
            Relative::Month(d) => write!(f, "{}", d.format("%Y-%m")),
            Relative::Year(y) => write!(f, "{y}"),
        }
    }
}

/// The first relative date in these lowercase words, counted from `today`.
pub(crate) fn first_relative(words: &[String], today: NaiveDate) -> Option<Relative> {
    (0..words.len()).find_map(|i| {
        let rest: Vec<&str> = words[i..].iter().take(5).map(String::as_str).collect();
        resolve(&rest, today).map(|(_, date)| date)
    })
}

/// Matches a relative date at the start of `w`: how many words it spans and what it means.
/// `None` also when the date it means lies outside the calendar (a conversation at the
/// edge of time): the text is then left as it is.
fn resolve(w: &[&str], today: NaiveDate) -> Option<(usize, Relative)> {
    let day = Relative::Day;
    let week_of = |d: NaiveDate| monday(d).map(Relative::Week);
    let month = Relative::Month;
    let shift = |days: i64| today.checked_add_signed(Duration::try_days(days)?);
    match w {
        ["the", "day", "after", "tomorrow", ..] => Some((4, day(shift(2)?))),
        ["the", "day", "before", "yesterday", ..] => Some((4, day(shift(-2)?))),
        ["end", "of", which @ ("next" | "last" | "this" | "the"), "month", ..] => {
            let months: i32 = match *which {
                "next" => 1,
                "last" => -1,
                _ => 0,
            };
            let next = add_months(today, months.checked_add(1)?)?;
            Some((4, day(next.pred_opt()?)))
        }
        ["end", "of", which @ ("next" | "last" | "this" | "the"), "year", ..] => {
            let year = match *which {
                "next" => today.year().checked_add(1)?,
                "last" => today.year().checked_sub(1)?,
                _ => today.year(),
            };
            Some((4, day(NaiveDate::from_ymd_opt(year, 12, 31)?)))
        }
        ["today" | "tonight", ..] => Some((1, day(today))),
        ["tomorrow", ..] => Some((1, day(shift(1)?))),
        ["yesterday", ..] => Some((1, day(shift(-1)?))),
        ["next", "week", ..] => Some((2, week_of(shift(7)?)?)),
        ["last", "week", ..] => Some((2, week_of(shift(-7)?)?)),
        ["this", "week", ..] => Some((2, week_of(today)?)),
        ["next", "month", ..] => Some((2, month(add_months(today, 1)?))),
        ["last", "month", ..] => Some((2, month(add_months(today, -1)?))),
        ["this", "month", ..] => Some((2, month(add_months(today, 0)?))),
        ["next", "year", ..] => Some((2, Relative::Year(today.year().checked_add(1)?))),
        ["last", "year", ..] => Some((2, Relative::Year(today.year().checked_sub(1)?))),
        ["this", "year", ..] => Some((2, Relative::Year(today.year()))),
        [which @ ("next" | "last" | "this" | "coming"), name, ..] => {
            let target = weekday(name)?;
            let offsets: Vec<i64> = match *which {
                "last" => (1..=7).map(|n| -n).collect(),
                "this" => (0..7).collect(),
                _ => (1..=7).collect(),
            };
            let date = offsets
                .into_iter()
                .filter_map(shift)
                .find(|d| d.weekday() == target)?;
            Some((2, day(date)))
        }
        ["in", n, unit, ..] => {
            let days = count(n)?.checked_mul(unit_days(unit)?)?;
            Some((3, day(shift(days)?)))
        }
        [n, unit, "ago", ..] => {
            let days = count(n)?.checked_mul(unit_days(unit)?)?;
            Some((3, day(shift(-days)?)))
        }
        _ => None,
    }
}

fn monday(d: NaiveDate) -> Option<NaiveDate> {
    d.checked_sub_signed(Duration::try_days(i64::from(
        d.weekday().num_days_from_monday(),
    ))?)
}

fn add_months(d: NaiveDate, months: i32) -> Option<NaiveDate> {
    let total = d
        .year()
        .checked_mul(12)?
        .checked_add(d.month0() as i32)?
        .checked_add(months)?;
    NaiveDate::from_ymd_opt(total.div_euclid(12), total.rem_euclid(12) as u32 + 1, 1)
}

pub(crate) fn weekday(name: &str) -> Option<Weekday> {
    Some(match name {
        "monday" => Weekday::Mon,
        "tuesday" => Weekday::Tue,
        "wednesday" => Weekday::Wed,
        "thursday" => Weekday::Thu,
        "friday" => Weekday::Fri,
        "saturday" => Weekday::Sat,
        "sunday" => Weekday::Sun,
        _ => return None,
    })
}

fn count(word: &str) -> Option<i64> {
    const NUMBERS: [&str; 12] = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven",
    ];
    match word {
        "a" | "an" => Some(1),
        _ => NUMBERS
            .iter()
            .position(|n| *n == word)
            .map(|p| p as i64)
            .or_else(|| word.parse().ok().filter(|n| (0..=3650).contains(n))),
    }
}

fn unit_days(unit: &str) -> Option<i64> {
    match unit {
        "day" | "days" => Some(1),
        "week" | "weeks" => Some(7),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn sunday() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 18, 0, 0).unwrap()
    }

    #[test]
    fn relative_dates_get_their_absolute_date() {
        let cases = [
            (
                "Flies to Oslo next Friday",
                "Flies to Oslo next Friday (2026-11-27)",
            ),
            (
                "Dentist tomorrow at 9",
                "Dentist tomorrow (2026-11-23) at 9",
            ),
            (
                "Started a new job last week",
                "Started a new job last week (week of 2026-11-09)",
            ),
            ("Moving next month", "Moving next month (2026-12)"),
            ("Exam in 3 days", "Exam in 3 days (2026-11-25)"),
            (
                "Adopted a cat two weeks ago",
                "Adopted a cat two weeks ago (2026-11-08)",
            ),
            (
                "Ran a marathon last Sunday",
                "Ran a marathon last Sunday (2026-11-15)",
            ),
            (
                "Party on the day after tomorrow",
                "Party on the day after tomorrow (2026-11-24)",
            ),
            ("Graduates next year", "Graduates next year (2027)"),
            (
                "Lease runs out at the end of next month",
                "Lease runs out at the end of next month (2026-12-31)",
            ),
            (
                "Report due by the end of the month",
                "Report due by the end of the month (2026-11-30)",
            ),
            (
                "Left the firm at the end of last year",
                "Left the firm at the end of last year (2025-12-31)",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(annotate(text, sunday()), want);
        }
    }

    #[test]
    fn texts_without_relative_dates_or_with_absolute_ones_are_untouched() {
        for text in [
            "Is vegetarian",
            "Flies to Oslo on 2026-11-27, next Friday",
            "Dentist tomorrow (2026-11-23)",
            "Next steps are unclear",
            "Mañana va al médico",
            "",
        ] {
            assert_eq!(annotate(text, sunday()), text);
        }
    }

    #[test]
    fn months_wrap_around_the_year() {
        let dec = Utc.with_ymd_and_hms(2026, 12, 5, 0, 0, 0).unwrap();
        assert_eq!(
            annotate("Trip next month", dec),
            "Trip next month (2027-01)"
        );
        let jan = Utc.with_ymd_and_hms(2027, 1, 5, 0, 0, 0).unwrap();
        assert_eq!(
            annotate("Quit last month", jan),
            "Quit last month (2026-12)"
        );
        assert_eq!(
            annotate("Quit at the end of last month", jan),
            "Quit at the end of last month (2026-12-31)"
        );
        let jan31 = Utc.with_ymd_and_hms(2027, 1, 31, 0, 0, 0).unwrap();
        assert_eq!(
            annotate("Moves at the end of next month", jan31),
            "Moves at the end of next month (2027-02-28)"
        );
    }

    #[test]
    fn the_edges_of_time_never_panic() {
        let text = "Tomorrow, yesterday, the day after tomorrow, next week, last month, next \
                    year, last Sunday, in 3650 weeks, 3650 days ago, the end of next month \
                    and the end of next year";
        for at in [DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC] {
            // Dates past the calendar's end are left unresolved; the rest resolve.
            let out = annotate(text, at);
            assert!(out.starts_with("Tomorrow"), "{out}");
        }
        let last = annotate("Tomorrow and yesterday", DateTime::<Utc>::MAX_UTC);
        assert!(
            last.contains("yesterday (") && !last.contains("Tomorrow ("),
            "{last}"
        );
    }
}
