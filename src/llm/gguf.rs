//! What the local models read from a GGUF file besides their weights: the architecture,
//! and the tokenizer its `tokenizer.ggml.*` metadata describes.

use std::collections::HashMap;

use candle_core::quantized::gguf_file;
use serde_json::{json, Value};
use tokenizers::Tokenizer;

/// Qwen2's pre-tokenizer split (from its tokenizer.json): contractions, letter runs with one
/// leading non-letter, single digits, punctuation runs, newlines, spaces.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A string value of a GGUF's metadata; empty when it is missing or not a string.
fn metadata_str(metadata: &HashMap<String, gguf_file::Value>, key: &str) -> String {
    metadata
        .get(key)
        .and_then(|v| v.to_string().ok())
        .cloned()
        .unwrap_or_default()
}

/// Refuses a GGUF whose architecture is not qwen2.
pub(super) fn check_architecture(content: &gguf_file::Content) -> std::result::Result<(), String> {
    let arch = metadata_str(&content.metadata, "general.architecture");
    if arch != "qwen2" {
        return Err(format!(
            "architecture {arch:?}; memlane's local models run qwen2 models"
        ));
    }
    Ok(())
}

/// Builds the tokenizer from `tokenizer.ggml.*` metadata: byte-level BPE over the GGUF's
/// vocabulary and merges, Qwen2's pre-tokenizer split, NFC, control tokens as special
/// tokens; then checks that text round-trips. Returns the tokenizer and its
/// `tokenizer.json`.
pub(super) fn tokenizer_from_gguf(
    metadata: &HashMap<String, gguf_file::Value>,
) -> std::result::Result<(Tokenizer, Value), String> {
    let strings = |key: &str| -> std::result::Result<Vec<String>, String> {
        let values = metadata
            .get(key)
            .ok_or_else(|| format!("its metadata has no {key}"))?
            .to_vec()
            .map_err(|e| format!("{key}: {e}"))?;
        values
            .iter()
            .map(|v| v.to_string().cloned().map_err(|e| format!("{key}: {e}")))
            .collect()
    };
    let model = metadata_str(metadata, "tokenizer.ggml.model");
    if model != "gpt2" {
        return Err(format!(
            "tokenizer model {model:?}; only byte-level BPE (gpt2) is supported"
        ));
    }
    let tokens = strings("tokenizer.ggml.tokens")?;
    let merges = strings("tokenizer.ggml.merges")?;
    let types: Vec<i32> = match metadata.get("tokenizer.ggml.token_type") {
        Some(v) => v
            .to_vec()
            .map_err(|e| e.to_string())?
            .iter()
            .map(|t| t.to_i32().unwrap_or(1))
            .collect(),
        None => Vec::new(),
    };
    let mut vocab = serde_json::Map::new();
    let mut added = Vec::new();
    for (id, token) in tokens.iter().enumerate() {
        vocab.insert(token.clone(), json!(id));
        // 3: control (<|im_start|>, <|im_end|>, …), 4: user-defined.
        if matches!(types.get(id), Some(3 | 4)) {
            added.push(json!({
                "id": id, "content": token, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": true
            }));
        }
    }
    let byte_level = json!({
        "type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false
    });
    let spec = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated", "invert": false},
            byte_level.clone()
        ]},
        "post_processor": null,
        "decoder": byte_level,
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null,
            "continuing_subword_prefix": null, "end_of_word_suffix": null,
            "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": Value::Object(vocab), "merges": merges
        }
    });
    let tokenizer: Tokenizer = spec
        .to_string()
        .parse()
        .map_err(|e| format!("its tokenizer metadata does not build a tokenizer ({e})"))?;
    let sample = "Ana's café, 2026-11-22: \"¿Dónde?\" 東京\n  {\"facts\": []}";
    let ids = tokenizer
        .encode(sample, false)
        .map_err(|e| format!("its tokenizer cannot encode ({e})"))?;
    let back = tokenizer
        .decode(ids.get_ids(), false)
        .map_err(|e| format!("its tokenizer cannot decode ({e})"))?;
    if back != sample {
        return Err(format!(
            "its tokenizer does not round-trip text ({sample:?} came back as {back:?})"
        ));
    }
    Ok((tokenizer, spec))
}
