//! The labelled conversations of the extraction evaluation, and how a store is scored
//! against them. Shared by `examples/eval_extraction`, `examples/eval_contradictions`
//! (whose cases, in `contradictions_*.json`, have the same format and matching rule) and
//! the model tests, which run a few of the cases.
//!
//! Two sets, in `examples/data/`: `extraction_tuned.json`, the conversations the prompts
//! were developed on (in-sample), and `extraction_heldout.json`, written later and never
//! tuned on. Each conversation is one or more `add` calls for its own user, at fixed times,
//! so that relative dates have one right answer. Its label is the set of facts a careful
//! person would keep about the user once it is over: corrected and contradicted facts are
//! gone, compatible facts both stay, small talk leaves nothing, and facts stay in the
//! language they were said in.
//!
//! **Matching.** A fact is a list of term groups; a stored memory states the fact when it
//! contains at least one term of every group (case-insensitive substring; accents count, so
//! a French fact translated into English does not match). After the last `add`:
//! - precision: the share of the user's live memories that state at least one labelled fact;
//! - recall: the share of labelled facts stated by at least one live memory.
//!
//! A memory that still holds a corrected or contradicted fact (it contains one of the
//! conversation's stale terms, such as the old city) counts as wrong even if it also states
//! the new one: it costs precision, and does not count for recall. Anything stored from
//! small talk is wrong too.
#![allow(dead_code)] // each user of this module needs a different part of it

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::Deserialize;

/// What a conversation tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum Kind {
    Preference,
    Correction,
    Contradiction,
    RelativeDate,
    NonEnglish,
    SmallTalk,
    Mixed,
    /// A fact that changes between turns (a new job, a move): only the new one stays.
    Update,
    /// Two facts that must both stay (a visit and a home, a second child).
    Compatible,
}

/// One `add` call: when it happened and what was said, as (role, text) pairs.
#[derive(Debug, Clone, Deserialize)]
pub struct Turn {
    pub at: DateTime<Utc>,
    pub messages: Vec<(String, String)>,
}

/// A fact to keep: every group must be matched by one of its terms.
pub type Fact = Vec<Vec<String>>;

/// One labelled conversation.
#[derive(Debug, Clone, Deserialize)]
pub struct Case {
    pub id: String,
    pub kind: Kind,
    pub turns: Vec<Turn>,
    pub facts: Vec<Fact>,
    /// Terms of a corrected or contradicted fact: a memory holding one is stale.
    #[serde(default)]
    pub stale: Vec<String>,
}

/// The two sets of conversations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Set {
    /// The conversations the prompts were developed on.
    Tuned,
    /// Conversations never tuned on.
    HeldOut,
}

impl Set {
    pub fn name(self) -> &'static str {
        match self {
            Set::Tuned => "tuned",
            Set::HeldOut => "heldout",
        }
    }

    /// The set's conversations, read from `examples/data/extraction_<name>.json`.
    pub fn cases(self) -> Vec<Case> {
        load(&format!("extraction_{}.json", self.name()))
    }
}

/// The conversations of `examples/data/<file>`.
pub fn load(file: &str) -> Vec<Case> {
    load_path(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("examples/data")
            .join(file),
    )
}

/// The conversations of a file anywhere (`--cases PATH`).
pub fn load_path(path: &std::path::Path) -> Vec<Case> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether a memory states a fact: a term of every group, case-insensitively.
pub fn states(memory: &str, fact: &Fact) -> bool {
    let memory = memory.to_lowercase();
    fact.iter().all(|group| {
        group
            .iter()
            .any(|term| memory.contains(&term.to_lowercase()))
    })
}

/// Whether a memory still holds a corrected or contradicted fact.
pub fn is_stale(memory: &str, stale: &[String]) -> bool {
    let memory = memory.to_lowercase();
    stale
        .iter()
        .any(|term| memory.contains(&term.to_lowercase()))
}

/// Whether a memory is right: it states a labelled fact and holds no stale one.
pub fn is_right(memory: &str, facts: &[Fact], stale: &[String]) -> bool {
    !is_stale(memory, stale) && facts.iter().any(|f| states(memory, f))
}

/// Counts for precision and recall.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Score {
    pub memories: usize,
    pub memories_stating_a_fact: usize,
    pub facts: usize,
    pub facts_stated: usize,
}

impl Score {
    pub fn of(memories: &[String], facts: &[Fact], stale: &[String]) -> Score {
        Score {
            memories: memories.len(),
            memories_stating_a_fact: memories
                .iter()
                .filter(|m| is_right(m, facts, stale))
                .count(),
            facts: facts.len(),
            facts_stated: facts
                .iter()
                .filter(|f| {
                    memories
                        .iter()
                        .any(|m| is_right(m, std::slice::from_ref(*f), stale))
                })
                .count(),
        }
    }

    pub fn add(&mut self, other: Score) {
        self.memories += other.memories;
        self.memories_stating_a_fact += other.memories_stating_a_fact;
        self.facts += other.facts;
        self.facts_stated += other.facts_stated;
    }

    /// Precision in percent; a store that kept nothing is 100% precise.
    pub fn precision(&self) -> f64 {
        if self.memories == 0 {
            100.0
        } else {
            100.0 * self.memories_stating_a_fact as f64 / self.memories as f64
        }
    }

    /// Recall in percent, `None` without facts to find.
    pub fn recall(&self) -> Option<f64> {
        (self.facts > 0).then(|| 100.0 * self.facts_stated as f64 / self.facts as f64)
    }
}
