//! Documented bounds on every input, enforced with 400 / 413 errors before anything is
//! stored or computed.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::record::Owners;

/// Largest text of one memory, message or query, in bytes (413 beyond).
pub const MAX_TEXT_BYTES: usize = 32 * 1024;
/// Most messages (memories) in one `add` (413 beyond).
pub const MAX_MESSAGES: usize = 1_000;
/// Largest caller metadata object, serialised, in bytes (413 beyond).
pub const MAX_METADATA_BYTES: usize = 64 * 1024;
/// Deepest nesting of objects and arrays in caller metadata.
pub const MAX_METADATA_DEPTH: usize = 32;
/// Longest message role, in bytes.
pub const MAX_ROLE_BYTES: usize = 256;
/// Most categories on one memory.
pub const MAX_CATEGORIES: usize = 64;
/// Longest category label, in bytes.
pub const MAX_CATEGORY_BYTES: usize = 128;
/// Longest owner id, in bytes.
pub const MAX_ID_BYTES: usize = 256;
/// Bytes of a feedback reason.
pub const MAX_FEEDBACK_REASON_BYTES: usize = 2_048;
/// Largest `top_k` of a search and `limit` of a retrieve.
pub const MAX_TOP_K: usize = 1_000;
/// Default `top_k` of a search.
pub const DEFAULT_TOP_K: usize = 10;
/// Largest page size of a list.
pub const MAX_PAGE_SIZE: usize = 1_000;
/// Default page size of a list.
pub const DEFAULT_PAGE_SIZE: usize = 100;

/// Checks one text (memory, message or query), the request's `field`: not blank, not too
/// large.
pub(crate) fn text(field: &str, text: &str) -> Result<()> {
    if text.trim().is_empty() {
        return Err(Error::invalid_field(
            field,
            format!("{field} is empty; give it some text"),
        ));
    }
    if text.len() > MAX_TEXT_BYTES {
        return Err(Error::too_large(
            field,
            format!(
                "{field} is {} bytes; the limit is {MAX_TEXT_BYTES} bytes: split it into smaller pieces",
                text.len()
            ),
        ));
    }
    Ok(())
}

/// Checks one owner id.
pub(crate) fn id(field: &str, id: &str) -> Result<()> {
    if id.trim().is_empty() {
        return Err(Error::invalid_field(
            field,
            format!("{field} is empty; omit it or give an id"),
        ));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(Error::invalid_field(
            field,
            format!(
                "{field} is {} bytes; ids are at most {MAX_ID_BYTES} bytes",
                id.len()
            ),
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::invalid_field(
            field,
            format!("{field} contains control characters; ids must be printable"),
        ));
    }
    Ok(())
}

/// Checks every owner id that is set.
pub(crate) fn owners(owners: &Owners) -> Result<()> {
    for (field, value) in [
        ("user_id", &owners.user_id),
        ("agent_id", &owners.agent_id),
        ("app_id", &owners.app_id),
        ("run_id", &owners.run_id),
    ] {
        if let Some(v) = value {
            id(field, v)?;
        }
    }
    Ok(())
}

/// Checks caller metadata: size, and the reserved key `core`.
/// Caller metadata as given to `add` or `extract` (none: empty), checked: a JSON object
/// within the limits of [`metadata`].
pub(crate) fn metadata_object(metadata: Option<Value>) -> Result<Map<String, Value>> {
    let map = match metadata {
        None => Map::new(),
        Some(Value::Object(m)) => m,
        Some(other) => {
            return Err(Error::invalid_field(
                "metadata",
                format!("metadata must be a JSON object, got {other}"),
            ))
        }
    };
    self::metadata(&map)?;
    Ok(map)
}

pub(crate) fn metadata(metadata: &Map<String, Value>) -> Result<()> {
    if metadata.contains_key("core") {
        return Err(Error::invalid_field(
            "metadata",
            "metadata key \"core\" is reserved for memlane's digest of the memory; rename it",
        ));
    }
    // Iterative, so that no nesting can exhaust the stack.
    let mut stack: Vec<(&Value, usize)> = metadata.values().map(|v| (v, 2)).collect();
    while let Some((value, depth)) = stack.pop() {
        if depth > MAX_METADATA_DEPTH {
            return Err(Error::invalid_field(
                "metadata",
                format!("metadata nests deeper than {MAX_METADATA_DEPTH} levels; flatten it"),
            ));
        }
        match value {
            Value::Object(m) => stack.extend(m.values().map(|v| (v, depth + 1))),
            Value::Array(a) => stack.extend(a.iter().map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    let size = serde_json::to_string(metadata)
        .map(|s| s.len())
        .unwrap_or(usize::MAX);
    if size > MAX_METADATA_BYTES {
        return Err(Error::too_large(
            "metadata",
            format!("metadata is {size} bytes serialised; the limit is {MAX_METADATA_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// Checks and normalises categories: no blanks, bounded, duplicates removed (order kept).
pub(crate) fn categories(categories: &[String]) -> Result<Vec<String>> {
    if categories.len() > MAX_CATEGORIES {
        return Err(Error::invalid_field(
            "categories",
            format!(
                "{} categories given; a memory has at most {MAX_CATEGORIES}",
                categories.len()
            ),
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(categories.len());
    for c in categories {
        if c.trim().is_empty() || c.len() > MAX_CATEGORY_BYTES {
            return Err(Error::invalid_field(
                "categories",
                format!("category {c:?} must be 1–{MAX_CATEGORY_BYTES} bytes of text"),
            ));
        }
        if !out.contains(c) {
            out.push(c.clone());
        }
    }
    Ok(out)
}

/// Checks the messages of a call: 1–1000 of them, each with a valid role and text.
pub(crate) fn messages(messages: &[crate::record::Message]) -> Result<()> {
    if messages.is_empty() {
        return Err(Error::invalid_field(
            "messages",
            "messages is empty; give at least one message",
        ));
    }
    if messages.len() > MAX_MESSAGES {
        return Err(Error::too_large(
            "messages",
            format!(
                "{} messages in one call; the limit is {MAX_MESSAGES}: send them in smaller batches",
                messages.len(),
            ),
        ));
    }
    for (i, m) in messages.iter().enumerate() {
        role(i, &m.role)?;
        text(&format!("messages[{i}].content"), &m.content)?;
    }
    Ok(())
}

/// Checks a message role: 1–256 bytes, printable.
pub(crate) fn role(index: usize, role: &str) -> Result<()> {
    if role.trim().is_empty() || role.len() > MAX_ROLE_BYTES || role.chars().any(char::is_control) {
        return Err(Error::invalid_field(
            format!("messages[{index}].role"),
            format!(
                "message {index} has role {:?}; a role is 1–{MAX_ROLE_BYTES} printable bytes such as \"user\" or \"assistant\"",
                role.chars().take(40).collect::<String>()
            ),
        ));
    }
    Ok(())
}

/// How far in the future a conversation's time may lie: the clocks of two machines differ.
pub const MAX_CLOCK_SKEW_SECONDS: i64 = 300;

/// Checks when a conversation took place (`timestamp`): not in the future beyond
/// [`MAX_CLOCK_SKEW_SECONDS`], and not before 1900 (a time out of range, not a date of a
/// conversation).
pub(crate) fn timestamp(at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Result<()> {
    let Some(at) = at else { return Ok(()) };
    if at.timestamp() > now.timestamp().saturating_add(MAX_CLOCK_SKEW_SECONDS) {
        return Err(Error::invalid_field(
            "timestamp",
            format!(
                "timestamp {} is in the future; give the time the conversation took place (now \
                 or earlier)",
                at.to_rfc3339()
            ),
        ));
    }
    if at.timestamp() < EARLIEST_TIMESTAMP {
        return Err(Error::invalid_field(
            "timestamp",
            format!(
                "timestamp {} is out of range: conversations are dated from 1900-01-01 on",
                at.to_rfc3339()
            ),
        ));
    }
    Ok(())
}

/// 1900-01-01T00:00:00Z, in seconds since the epoch.
const EARLIEST_TIMESTAMP: i64 = -2_208_988_800;

/// Checks an expiry: it must lie in the future.
pub(crate) fn expiry(at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Result<()> {
    match at {
        Some(at) if at <= now => Err(Error::invalid_field(
            "expiry",
            format!(
                "expiry {} is not in the future; give a later time or none",
                at.to_rfc3339()
            ),
        )),
        _ => Ok(()),
    }
}

/// Checks a stored memory as `add` would have made it: its text and context, owners,
/// caller metadata (`core` is memlane's own and kept), categories; and what comes with it
/// in an export: its history records' inputs and its feedback reason. For records that
/// arrive whole, as an import's do.
pub(crate) fn record(
    r: &crate::record::MemoryRecord,
    history: &[crate::record::HistoryRecord],
    feedback_reason: Option<&str>,
) -> Result<()> {
    text("memory", &r.memory)?;
    if let Some(context) = &r.context {
        text("context", context)?;
    }
    if r.owners.is_empty() {
        return Err(Error::invalid(
            "it has no owner; a memory needs at least one of user_id, agent_id, app_id or run_id",
        ));
    }
    owners(&r.owners)?;
    let mut caller = r.metadata.clone();
    caller.remove("core");
    metadata(&caller)?;
    if categories(&r.categories)?.len() != r.categories.len() {
        return Err(Error::invalid_field(
            "categories",
            "its categories repeat a label",
        ));
    }
    for h in history {
        if h.input.len() > MAX_MESSAGES {
            return Err(Error::too_large(
                "history",
                format!(
                    "history record {} has {} input messages; the limit is {MAX_MESSAGES}",
                    h.id,
                    h.input.len()
                ),
            ));
        }
        for (i, m) in h.input.iter().enumerate() {
            role(i, &m.role).map_err(|e| {
                Error::invalid_field(
                    "history",
                    format!("history record {}: {}", h.id, e.detail()),
                )
            })?;
            if m.content.len() > MAX_TEXT_BYTES {
                return Err(Error::too_large(
                    "history",
                    format!(
                        "history record {}: message {i} is {} bytes; the limit is {MAX_TEXT_BYTES}",
                        h.id,
                        m.content.len()
                    ),
                ));
            }
        }
        for t in [&h.old_memory, &h.new_memory].into_iter().flatten() {
            if t.len() > MAX_TEXT_BYTES {
                return Err(Error::too_large(
                    "history",
                    format!(
                        "history record {} holds a text of {} bytes; the limit is {MAX_TEXT_BYTES}",
                        h.id,
                        t.len()
                    ),
                ));
            }
        }
    }
    if let Some(reason) = feedback_reason {
        if reason.len() > MAX_FEEDBACK_REASON_BYTES {
            return Err(Error::too_large(
                "feedback_reason",
                format!(
                    "its feedback reason is {} bytes; the limit is {}",
                    reason.len(),
                    MAX_FEEDBACK_REASON_BYTES
                ),
            ));
        }
    }
    Ok(())
}

/// Checks a `top_k` or `limit`.
pub(crate) fn top_k(name: &str, k: usize) -> Result<()> {
    if !(1..=MAX_TOP_K).contains(&k) {
        return Err(Error::invalid_field(
            name,
            format!("{name} must be 1–{MAX_TOP_K}, got {k}"),
        ));
    }
    Ok(())
}

/// Checks a similarity threshold.
pub(crate) fn threshold(t: f32) -> Result<()> {
    if !(0.0..=1.0).contains(&t) {
        return Err(Error::invalid_field(
            "threshold",
            format!(
                "threshold must be a number from 0 to 1 (a score is the estimated probability \
                 that a memory is relevant), got {t}"
            ),
        ));
    }
    Ok(())
}
