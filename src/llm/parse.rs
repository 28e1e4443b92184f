//! Reading a model's JSON out of whatever it wrapped it in.

use serde::de::DeserializeOwned;

/// How many opening braces are tried as the start of an object: bounds the work on a long,
/// brace-heavy reply.
const MAX_STARTS: usize = 64;
/// Longest reply excerpt quoted in an error.
const QUOTE: usize = 200;

/// Reads `T` from a model reply: the whole reply, else the inside of a Markdown code fence,
/// else the first balanced `{…}` in the prose that reads as `T`.
///
/// The error says what was wrong with the best candidate (a missing field, a wrong type), or
/// that there was no JSON object at all, quoting the start of the reply.
pub(crate) fn recover_json<T: DeserializeOwned>(reply: &str) -> Result<T, String> {
    let mut first_error: Option<String> = None;
    let mut syntax_error: Option<String> = None;
    let mut attempt = |candidate: &str, whole: bool| -> Option<T> {
        match serde_json::from_str::<T>(candidate.trim()) {
            Ok(value) => Some(value),
            Err(e) => {
                // A well-formed object of the wrong shape says exactly what to fix. A syntax
                // error in the whole reply says little (it may be prose around JSON); in a
                // fenced block or a balanced object it is the model's JSON that is broken.
                if !e.is_syntax() && !e.is_eof() {
                    first_error.get_or_insert_with(|| e.to_string());
                } else if !whole {
                    syntax_error.get_or_insert_with(|| e.to_string());
                }
                None
            }
        }
    };
    if let Some(v) = attempt(reply, true) {
        return Ok(v);
    }
    for block in fenced_blocks(reply) {
        if let Some(v) = attempt(block, false) {
            return Ok(v);
        }
    }
    for object in balanced_objects(reply) {
        if let Some(v) = attempt(object, false) {
            return Ok(v);
        }
    }
    // A reply cut off before its end (a token limit; a local model stopped in a loop): the
    // complete part of it, when that reads as `T`.
    if let Some(v) = cut_off_prefixes(reply)
        .into_iter()
        .find_map(|candidate| serde_json::from_str::<T>(&candidate).ok())
    {
        return Ok(v);
    }
    let quoted: String = reply.chars().take(QUOTE).collect();
    let ellipsis = if reply.chars().count() > QUOTE {
        "…"
    } else {
        ""
    };
    Err(match (first_error, syntax_error) {
        (Some(e), _) => {
            format!("the JSON does not have the expected shape ({e}): {quoted:?}{ellipsis}")
        }
        (None, Some(e)) => format!("the JSON is malformed ({e}): {quoted:?}{ellipsis}"),
        (None, None) => format!("the reply holds no complete JSON object: {quoted:?}{ellipsis}"),
    })
}

/// The bodies of Markdown code fences (```` ```json … ``` ````), the language tag dropped.
fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        // The opening fence's line may carry a language tag.
        let body_start = after.find('\n').map_or(after.len(), |n| n + 1);
        let body = &after[body_start..];
        match body.find("```") {
            Some(close) => {
                blocks.push(&body[..close]);
                rest = &body[close + 3..];
            }
            None => {
                blocks.push(body);
                break;
            }
        }
    }
    blocks
}

/// The ways to close a JSON object that `text` starts (from its first `{`) but never ends,
/// longest first: each keeps the text up to the end of one complete value (a closing
/// bracket, or just before a comma), drops the rest and closes the brackets still open. A
/// cut-off string, key or number is dropped whole, so no value is ever shortened; a reply
/// whose object is complete, or that holds no complete value, gives none.
fn cut_off_prefixes(text: &str) -> Vec<String> {
    let Some(start) = text.find('{') else {
        return Vec::new();
    };
    let text = &text[start..];
    // The closing brackets still owed, innermost last.
    let mut open: Vec<char> = Vec::new();
    let mut cuts: Vec<(usize, String)> = Vec::new();
    for (i, c) in structure(text) {
        match c {
            '{' => open.push('}'),
            '[' => open.push(']'),
            '}' | ']' => {
                if open.pop() != Some(c) {
                    // Not JSON: nothing to salvage.
                    return Vec::new();
                }
                if open.is_empty() {
                    // The object is complete: it was not cut off.
                    return Vec::new();
                }
                cuts.push((i + 1, open.iter().rev().collect()));
            }
            ',' => cuts.push((i, open.iter().rev().collect())),
            _ => {}
        }
    }
    cuts.iter()
        .rev()
        .take(MAX_STARTS)
        .map(|(end, closers)| format!("{}{closers}", &text[..*end]))
        .collect()
}

/// The characters of `text` outside JSON strings, with their byte offsets: its structure
/// (a bracket or comma inside a string, escaped quotes included, is text).
fn structure(text: &str) -> impl Iterator<Item = (usize, char)> + '_ {
    let (mut in_string, mut escaped) = (false, false);
    text.char_indices().filter(move |&(_, c)| {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            return false;
        }
        if c == '"' {
            in_string = true;
        }
        c != '"'
    })
}

/// Balanced `{…}` spans, in order of their opening brace, strings and escapes respected.
fn balanced_objects(text: &str) -> impl Iterator<Item = &str> {
    text.char_indices()
        .filter(|&(_, c)| c == '{')
        .take(MAX_STARTS)
        .filter_map(move |(start, _)| {
            let mut depth = 0usize;
            for (offset, c) in structure(&text[start..]) {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(&text[start..start + offset + 1]);
                        }
                    }
                    _ => {}
                }
            }
            None
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Facts {
        facts: Vec<String>,
    }

    fn facts(reply: &str) -> Result<Vec<String>, String> {
        recover_json::<Facts>(reply).map(|f| f.facts)
    }

    #[test]
    fn plain_fenced_and_prose_wrapped_json_are_read() {
        let want = Ok(vec!["likes tea".to_string()]);
        assert_eq!(facts(r#"{"facts": ["likes tea"]}"#), want);
        assert_eq!(facts("```json\n{\"facts\": [\"likes tea\"]}\n```"), want);
        assert_eq!(facts("```\n{\"facts\": [\"likes tea\"]}```"), want);
        assert_eq!(
            facts("Sure! Here you go: {\"facts\": [\"likes tea\"]} Hope that helps {:}"),
            want
        );
        // A brace inside a string does not end the object.
        assert_eq!(
            facts(r#"Result: {"facts": ["uses {braces} and \"quotes\""]}."#),
            Ok(vec![r#"uses {braces} and "quotes""#.to_string()])
        );
        // An unterminated fence still yields its body.
        assert_eq!(facts("```json\n{\"facts\": []}"), Ok(vec![]));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let e = facts(r#"{"fact": ["x"]}"#).unwrap_err();
        assert!(e.contains("missing field `facts`"), "{e}");
        let e = facts(r#"{"facts": "x"}"#).unwrap_err();
        assert!(e.contains("invalid type"), "{e}");
        let e = facts("I could not find any facts.").unwrap_err();
        assert!(e.contains("no complete JSON object"), "{e}");
        // Cut off before any value ended: nothing to salvage.
        let e = facts(r#"{"facts": ["cut off"#).unwrap_err();
        assert!(e.contains("no complete JSON object"), "{e}");
        // The object is there but is not JSON (a missing comma).
        let e = facts(r#"{"facts": ["a" "b"]}"#).unwrap_err();
        assert!(e.contains("malformed"), "{e}");
        let long = "x".repeat(1000);
        assert!(facts(&long).unwrap_err().len() < 400);
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Fact {
        text: String,
        #[serde(default)]
        tags: Vec<String>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Objects {
        facts: Vec<Fact>,
    }

    fn texts(reply: &str) -> Result<Vec<(String, Vec<String>)>, String> {
        recover_json::<Objects>(reply)
            .map(|o| o.facts.into_iter().map(|f| (f.text, f.tags)).collect())
    }

    #[test]
    fn a_cut_off_reply_keeps_its_complete_values() {
        let fact = |t: &str, tags: &[&str]| {
            (
                t.to_owned(),
                tags.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        };
        // Cut inside the second fact's text: the first fact is whole.
        assert_eq!(
            texts(r#"{"facts": [{"text": "a", "tags": ["x"]}, {"text": "b is cu"#),
            Ok(vec![fact("a", &["x"])])
        );
        // Cut after a complete fact, before the comma that would follow it.
        assert_eq!(
            texts(r#"{"facts": [{"text": "a"}, {"text": "b"} "#),
            Ok(vec![fact("a", &[]), fact("b", &[])])
        );
        // Cut inside a fact's list of tags: the tags written whole stay, the cut one goes.
        assert_eq!(
            texts(r#"{"facts": [{"text": "a", "tags": ["x", "y", "zz"#),
            Ok(vec![fact("a", &["x", "y"])])
        );
        // Brackets and commas inside strings are text, not structure.
        assert_eq!(
            texts(r#"{"facts": [{"text": "a, [b] {c}"}, {"text": "d \" ,"#),
            Ok(vec![fact("a, [b] {c}", &[])])
        );
        // A cut that leaves no fact with its text is not a reply.
        assert!(texts(r#"{"facts": [{"tags": ["x", "y"#).is_err());
        // A complete object of the wrong shape is not salvaged into another.
        assert!(texts(r#"{"facts": [{"text": "a"}], "more": 1} trailing {"#).is_ok());
        assert!(facts(r#"{"facts": "x"}, {"#).is_err());
    }

    #[test]
    fn unbalanced_and_brace_heavy_text_is_bounded() {
        let text = "{".repeat(10_000);
        assert!(facts(&text).is_err());
        let text = "}{".repeat(10_000) + "\u{e9}";
        assert!(facts(&text).is_err());
    }
}
