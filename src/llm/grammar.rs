//! Constrained decoding for the local model: token masks from a JSON schema (llguidance), so
//! every reply the model writes parses and keeps the answer's shape.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};
use serde_json::{json, Value};
use tokenizers::Tokenizer;

/// Builds a [`Matcher`] per reply from a JSON schema, over one model's vocabulary.
pub(crate) struct Grammars {
    factory: ParserFactory,
}

/// The model's vocabulary as llguidance sees it: each token's bytes, and the model's own
/// tokenizer for the text the grammar forces (so forced text is tokenized as the model
/// would read it).
struct Vocabulary {
    trie: TokTrie,
    /// None in unit tests: the trie's greedy tokenization then.
    tokenizer: Option<Tokenizer>,
}

impl TokenizerEnv for Vocabulary {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        let encoded = self.tokenizer.as_ref().and_then(|t| {
            t.encode(String::from_utf8_lossy(s).as_ref(), false)
                .ok()
                .map(|e| e.get_ids().to_vec())
        });
        // The tokenizer takes any text; the trie's greedy tokenization is a valid one too.
        encoded.unwrap_or_else(|| self.trie.greedy_tokenize(s))
    }
}

impl Grammars {
    /// Over the vocabulary of `tokenizer_json` (a Hugging Face `tokenizer.json`, as built
    /// from the GGUF), ending a reply at `end`.
    pub(crate) fn new(
        tokenizer_json: &Value,
        tokenizer: &Tokenizer,
        end: u32,
    ) -> std::result::Result<Self, String> {
        let words = llguidance::token_bytes_from_tokenizer_json(tokenizer_json)
            .map_err(|e| format!("its vocabulary cannot be read for constrained decoding ({e})"))?;
        Self::over(words, end, Some(tokenizer.clone()))
    }

    fn over(
        words: Vec<Vec<u8>>,
        end: u32,
        tokenizer: Option<Tokenizer>,
    ) -> std::result::Result<Self, String> {
        let info = TokRxInfo::new(words.len() as u32, end);
        let trie = TokTrie::from(&info, &words);
        let env: TokEnv = Arc::new(Vocabulary { trie, tokenizer });
        let mut factory = ParserFactory::new_simple(&env)
            .map_err(|e| format!("constrained decoding cannot start ({e})"))?;
        factory.quiet();
        Ok(Grammars { factory })
    }

    /// A matcher for one reply that must be one JSON value of `schema`, written with a
    /// space after `:` and `,` (as the prompts show it) and no other whitespace.
    pub(crate) fn matcher(&self, schema: &Value) -> std::result::Result<Matcher, String> {
        let mut schema = schema.clone();
        if let Some(object) = schema.as_object_mut() {
            object.insert(
                "x-guidance".into(),
                json!({"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "}),
            );
        }
        let grammar = TopLevelGrammar::from_json_schema(schema);
        let parser = self
            .factory
            .create_parser(grammar)
            .map_err(|e| format!("the answer's JSON schema cannot be used ({e})"))?;
        Ok(Matcher::new(Ok(parser)))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A vocabulary of one token per byte and an end token: enough to check which texts a
    /// schema lets through, as the model's masks would.
    pub(crate) fn bytes() -> Grammars {
        let mut words: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        words.push(b"\xff<|end|>".to_vec());
        Grammars::over(words, 256, None).unwrap()
    }

    /// Whether `text` is a complete reply under `schema`.
    pub(crate) fn accepts(grammars: &Grammars, schema: &Value, text: &str) -> bool {
        let mut matcher = grammars.matcher(schema).unwrap();
        text.bytes()
            .all(|b| matcher.consume_token(u32::from(b)).is_ok())
            && matcher.is_accepting().unwrap_or(false)
    }

    #[test]
    fn a_reply_must_follow_its_schema_in_the_prompts_layout() {
        let grammars = bytes();
        let schema = json!({
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 10}},
            "required": ["n"],
            "additionalProperties": false
        });
        assert!(accepts(&grammars, &schema, r#"{"n": 7}"#));
        assert!(!accepts(&grammars, &schema, r#"{"n": 11}"#));
        assert!(!accepts(&grammars, &schema, r#"{"n": 7"#), "incomplete");
        assert!(!accepts(&grammars, &schema, r#"{"n": 7, "m": 1}"#));
        // One layout only: a space after ':' and ',', no other whitespace.
        assert!(!accepts(&grammars, &schema, r#"{"n":7}"#));
        assert!(!accepts(&grammars, &schema, r#"{ "n": 7}"#));
        assert!(!accepts(&grammars, &schema, "{\"n\":\n7}"));
    }
}
