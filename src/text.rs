//! The crate's own tokenizer: what keyword search sees of a text, in every store.
//!
//! A word is a run of letters and digits, lowercased, with the diacritics of Latin letters
//! removed ("Malmö" → "malmo") and reduced to its English stem ("painting" → "paint",
//! Snowball). Stores index these terms, and queries are made of them, so that every store
//! matches and scores a query the same way.

use std::borrow::Cow;

/// Most words a query is read for.
pub const MAX_QUERY_WORDS: usize = 64;

/// The words of a text: lowercase runs of letters and digits (accents kept), at most
/// [`MAX_QUERY_WORDS`] of them.
pub fn keywords(text: &str) -> Vec<String> {
    words(text).take(MAX_QUERY_WORDS).collect()
}

/// The words of a query worth matching: [`keywords`] without English function words
/// ("what", "did", "for", …). In a small store such words are rare enough for BM25 to weigh
/// them heavily, and a question would match memories by its grammar instead of its subject.
/// Only queries are filtered; stored texts keep every word.
pub fn query_keywords(text: &str) -> Vec<String> {
    keywords(text)
        .into_iter()
        .filter(|w| STOPWORDS.binary_search(&w.as_str()).is_err())
        .collect()
}

/// The terms of a stored text, every word of it: what a store indexes.
pub fn terms(text: &str) -> Vec<String> {
    let stemmer = stemmer();
    words(text).map(|w| term(&stemmer, &w)).collect()
}

/// The terms of a query: its [`query_keywords`], folded and stemmed as [`terms`] are.
pub fn query_terms(text: &str) -> Vec<String> {
    let stemmer = stemmer();
    query_keywords(text)
        .iter()
        .map(|w| term(&stemmer, w))
        .collect()
}

fn stemmer() -> rust_stemmers::Stemmer {
    rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English)
}

fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

fn term(stemmer: &rust_stemmers::Stemmer, word: &str) -> String {
    stemmer.stem(&fold(word)).into_owned()
}

/// A lowercase word without the diacritics of Latin letters.
fn fold(word: &str) -> Cow<'_, str> {
    if word.is_ascii() {
        return Cow::Borrowed(word);
    }
    let mut out = String::with_capacity(word.len());
    for c in word.chars() {
        match base_letter(c) {
            Some(base) => out.push_str(base),
            None => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The base letters of lowercase Latin letters with diacritics (Latin-1 Supplement and
/// Latin Extended-A); other characters have none.
fn base_letter(c: char) -> Option<&'static str> {
    Some(match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' | 'ă' | 'ą' => "a",
        'æ' => "ae",
        'ç' | 'ć' | 'ĉ' | 'ċ' | 'č' => "c",
        'ď' | 'đ' | 'ð' => "d",
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ĕ' | 'ė' | 'ę' | 'ě' => "e",
        'ĝ' | 'ğ' | 'ġ' | 'ģ' => "g",
        'ĥ' | 'ħ' => "h",
        'ì' | 'í' | 'î' | 'ï' | 'ĩ' | 'ī' | 'ĭ' | 'į' | 'ı' => "i",
        'ĵ' => "j",
        'ķ' => "k",
        'ĺ' | 'ļ' | 'ľ' | 'ŀ' | 'ł' => "l",
        'ñ' | 'ń' | 'ņ' | 'ň' => "n",
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' | 'ŏ' | 'ő' => "o",
        'œ' => "oe",
        'ŕ' | 'ŗ' | 'ř' => "r",
        'ś' | 'ŝ' | 'ş' | 'š' => "s",
        'ß' => "ss",
        'ţ' | 'ť' | 'ŧ' => "t",
        'ù' | 'ú' | 'û' | 'ü' | 'ũ' | 'ū' | 'ŭ' | 'ů' | 'ű' | 'ų' => "u",
        'ŵ' => "w",
        'ý' | 'ÿ' | 'ŷ' => "y",
        'ź' | 'ż' | 'ž' => "z",
        'þ' => "th",
        _ => return None,
    })
}

/// English function words, sorted (the query filter relies on binary search).
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "before", "being", "both", "but", "by", "can", "could", "did", "do", "does", "doing",
    "during", "each", "for", "from", "had", "has", "have", "having", "he", "her", "here", "hers",
    "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "more", "most",
    "my", "no", "not", "now", "of", "on", "once", "only", "or", "other", "our", "out", "over",
    "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "them",
    "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
    "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "would", "you", "your",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwords_are_sorted_and_only_leave_queries() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            query_keywords("What should I cook for her tonight?"),
            vec!["cook", "tonight"]
        );
        assert_eq!(keywords("What for"), vec!["what", "for"]);
        assert!(query_keywords("what is it").is_empty());
    }

    #[test]
    fn terms_are_folded_stems_and_queries_meet_them() {
        assert_eq!(
            terms("Painting in Malmö, CAFÉS!"),
            vec!["paint", "in", "malmo", "cafe"]
        );
        assert_eq!(query_terms("Who painted the cafe?"), vec!["paint", "cafe"]);
        assert_eq!(terms("Straße 12b"), vec!["strass", "12b"]);
        assert_eq!(terms("東京に住んでいます"), vec!["東京に住んでいます"]);
        assert!(terms(" -- ").is_empty());
        assert_eq!(query_terms(&"word ".repeat(100)).len(), MAX_QUERY_WORDS);
    }
}
