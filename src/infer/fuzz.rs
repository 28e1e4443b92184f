//! The parsers of model output, as the fuzz targets call them (feature `fuzzing`): whatever
//! a model replies, parsing it must end in a value or an error, never a panic or a hang.

use chrono::{DateTime, TimeZone, Utc};

use super::extract::{check_facts, clean_facts, Facts};
use super::reconcile::{check_decisions, Decisions};
use super::{dates, Digest};
use crate::config::ProjectConfig;
use crate::llm::parse::recover_json;

/// Runs every parser of model replies on `reply`: fact extraction (recovery, checks, tidying
/// and date annotation), reconciliation decisions, and the `extract` digest.
pub fn model_reply(reply: &str) {
    let at: DateTime<Utc> = Utc
        .with_ymd_and_hms(2026, 3, 4, 10, 0, 0)
        .single()
        .unwrap_or_default();
    let labels = ProjectConfig::default().labels();
    if let Ok(parsed) = recover_json::<Facts>(reply) {
        if check_facts(&parsed.facts).is_ok() {
            for fact in clean_facts(parsed.facts, &labels) {
                let _ = dates::annotate(&fact.text, at);
            }
        }
    }
    if let Ok(parsed) = recover_json::<Decisions>(reply) {
        let _ = check_decisions(&parsed.decisions, 3, 3);
    }
    let _ = recover_json::<Digest>(reply);
    relative_dates(reply, at);
}

/// Resolves the relative dates of `text` as spoken at `at`, and at the first and last
/// instants a timestamp can hold: never a panic, whatever the text or the time.
pub fn relative_dates(text: &str, at: DateTime<Utc>) {
    for when in [at, DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC] {
        let _ = dates::annotate(text, when);
    }
}
