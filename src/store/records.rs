//! What a store keeps beside memories: entities (owner ids) and feedback.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::record::Owners;

/// The kinds of owner a memory has; each owner id is an entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityKind {
    /// `user_id`
    User,
    /// `agent_id`
    Agent,
    /// `app_id`
    App,
    /// `run_id`
    Run,
}

impl EntityKind {
    /// Every kind, in listing order.
    pub const ALL: [EntityKind; 4] = [
        EntityKind::User,
        EntityKind::Agent,
        EntityKind::App,
        EntityKind::Run,
    ];

    /// The kind's name: `user`, `agent`, `app` or `run`.
    pub fn as_str(self) -> &'static str {
        match self {
            EntityKind::User => "user",
            EntityKind::Agent => "agent",
            EntityKind::App => "app",
            EntityKind::Run => "run",
        }
    }

    /// The kind with this name.
    pub fn parse(name: &str) -> Option<EntityKind> {
        EntityKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The owner field of this kind in a record's [`Owners`].
    pub fn of(self, owners: &Owners) -> Option<&str> {
        match self {
            EntityKind::User => owners.user_id.as_deref(),
            EntityKind::Agent => owners.agent_id.as_deref(),
            EntityKind::App => owners.app_id.as_deref(),
            EntityKind::Run => owners.run_id.as_deref(),
        }
    }

    /// Owners with only this kind's id set.
    pub fn owners(self, id: &str) -> Owners {
        let mut owners = Owners::default();
        let slot = match self {
            EntityKind::User => &mut owners.user_id,
            EntityKind::Agent => &mut owners.agent_id,
            EntityKind::App => &mut owners.app_id,
            EntityKind::Run => &mut owners.run_id,
        };
        *slot = Some(id.to_string());
        owners
    }
}

/// An owner id with live memories.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entity {
    /// The owner id.
    pub id: String,
    /// Which kind of owner.
    #[serde(rename = "type")]
    pub kind: EntityKind,
    /// How many live (not deleted) memories it owns, expired ones included.
    pub memory_count: u64,
    /// When its oldest live memory was created.
    pub created_at: DateTime<Utc>,
    /// When any of its live memories last changed.
    pub updated_at: DateTime<Utc>,
}

/// A quality signal about a memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FeedbackKind {
    /// The memory is right and useful.
    Positive,
    /// The memory is wrong or unhelpful: search halves its score.
    Negative,
    /// The memory must not be used: search and retrieve leave it out.
    VeryNegative,
}

impl FeedbackKind {
    /// The kind's name: `POSITIVE`, `NEGATIVE` or `VERY_NEGATIVE`.
    pub fn as_str(self) -> &'static str {
        match self {
            FeedbackKind::Positive => "POSITIVE",
            FeedbackKind::Negative => "NEGATIVE",
            FeedbackKind::VeryNegative => "VERY_NEGATIVE",
        }
    }

    /// The kind with this name.
    pub fn parse(name: &str) -> Option<FeedbackKind> {
        [
            FeedbackKind::Positive,
            FeedbackKind::Negative,
            FeedbackKind::VeryNegative,
        ]
        .into_iter()
        .find(|k| k.as_str() == name)
    }

    /// Whether search demotes or removes a memory with this feedback.
    pub fn is_negative(self) -> bool {
        matches!(self, FeedbackKind::Negative | FeedbackKind::VeryNegative)
    }
}

/// The feedback on a memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Feedback {
    /// The memory.
    pub memory_id: Uuid,
    /// The signal; `None` when cleared or never given.
    pub feedback: Option<FeedbackKind>,
    /// Why, in the giver's words.
    pub feedback_reason: Option<String>,
    /// When it was last set or cleared (`None` if never).
    pub updated_at: Option<DateTime<Utc>>,
}
