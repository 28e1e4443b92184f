//! Project configuration: the extraction policy and the label taxonomy that guide `add`.

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::error::{Error, Result};

/// Longest extraction policy, in bytes.
pub const MAX_POLICY_BYTES: usize = 8 * 1024;
/// Most labels in a taxonomy.
pub const MAX_LABELS: usize = 100;
/// Longest label name, in bytes.
pub const MAX_LABEL_BYTES: usize = 64;
/// Longest label description, in bytes.
pub const MAX_LABEL_DESCRIPTION_BYTES: usize = 512;

/// Store metadata key of the configuration.
pub(crate) const META_CONFIG: &str = "project.config";
/// Store metadata key of the product variant.
pub(crate) const META_VARIANT: &str = "project.variant";

/// One label of a taxonomy: a name and what it means. In JSON it is the spec's single-key
/// object, `{"name": "description"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// The label, as stored in a memory's categories.
    pub name: String,
    /// What the label covers, for the model that assigns it.
    pub description: String,
}

impl Label {
    /// A label.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Label {
            name: name.into(),
            description: description.into(),
        }
    }
}

impl Serialize for Label {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(&self.name, &self.description)?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for Label {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        label_from_json(0, &value).map_err(|e| serde::de::Error::custom(e.detail()))
    }
}

/// A project's extraction configuration.
///
/// - `extraction_policy`: free text telling the model what to extract or skip ("Only keep
///   food preferences and allergies; never store health data"). Empty: no policy.
/// - `label_taxonomy`: the labels a memory may get as categories. Empty: memlane's default
///   catalogue ([`DEFAULT_LABELS`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ProjectConfig {
    /// What to extract or skip, in the project's words.
    pub extraction_policy: String,
    /// The labels memories are categorised with.
    pub label_taxonomy: Vec<Label>,
}

impl ProjectConfig {
    /// A configuration with this policy and taxonomy.
    pub fn new(extraction_policy: impl Into<String>, label_taxonomy: Vec<Label>) -> Self {
        ProjectConfig {
            extraction_policy: extraction_policy.into(),
            label_taxonomy,
        }
    }

    /// Applies the spec's PUT body: `{"extraction_policy": "…", "label_taxonomy": [{"label":
    /// "description"}, …]}`. A field that is absent keeps its value; `null` clears it. Any
    /// other shape is a 400 naming what is wrong.
    pub fn merged_with_json(&self, body: &Value) -> Result<ProjectConfig> {
        let Value::Object(fields) = body else {
            return Err(Error::invalid(format!(
                "the project configuration must be a JSON object with extraction_policy and/or \
                 label_taxonomy, got {}",
                kind(body)
            )));
        };
        let mut next = self.clone();
        for (key, value) in fields {
            match (key.as_str(), value) {
                ("extraction_policy", Value::Null) => next.extraction_policy.clear(),
                ("extraction_policy", Value::String(s)) => next.extraction_policy = s.clone(),
                ("extraction_policy", other) => {
                    return Err(Error::invalid_field(
                        "extraction_policy",
                        format!("extraction_policy must be a string, got {}", kind(other)),
                    ))
                }
                ("label_taxonomy", Value::Null) => next.label_taxonomy.clear(),
                ("label_taxonomy", Value::Array(items)) => {
                    next.label_taxonomy = items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| label_from_json(i, item))
                        .collect::<Result<_>>()?;
                }
                ("label_taxonomy", other) => {
                    return Err(Error::invalid_field(
                        "label_taxonomy",
                        format!(
                            "label_taxonomy must be a list of single-key objects such as \
                         [{{\"food\": \"what the user eats\"}}], got {}",
                            kind(other)
                        ),
                    ))
                }
                (other, _) => {
                    return Err(Error::invalid(format!(
                        "unknown configuration field {:?}; the fields are extraction_policy and \
                         label_taxonomy",
                        other.chars().take(64).collect::<String>()
                    )))
                }
            }
        }
        next.validate()?;
        Ok(next)
    }

    /// Checks the limits and that label names are unique (400 otherwise).
    pub fn validate(&self) -> Result<()> {
        if self.extraction_policy.len() > MAX_POLICY_BYTES {
            return Err(Error::too_large(
                "extraction_policy",
                format!(
                    "extraction_policy is {} bytes; the limit is {MAX_POLICY_BYTES}",
                    self.extraction_policy.len()
                ),
            ));
        }
        if self.label_taxonomy.len() > MAX_LABELS {
            return Err(Error::too_large(
                "label_taxonomy",
                format!(
                    "label_taxonomy has {} labels; the limit is {MAX_LABELS}",
                    self.label_taxonomy.len()
                ),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, label) in self.label_taxonomy.iter().enumerate() {
            check_label(i, &label.name, &label.description)?;
            if !seen.insert(label.name.as_str()) {
                return Err(Error::invalid_field(
                    "label_taxonomy",
                    format!(
                        "label_taxonomy names {:?} twice; each label appears once",
                        label.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The labels in force: the taxonomy, or the default catalogue when it is empty.
    pub fn labels(&self) -> Vec<Label> {
        if self.label_taxonomy.is_empty() {
            DEFAULT_LABELS
                .iter()
                .map(|(n, d)| Label::new(*n, *d))
                .collect()
        } else {
            self.label_taxonomy.clone()
        }
    }
}

/// The labels used when a project has no taxonomy of its own (mem0's catalogue, so that
/// memories move between the two with their categories intact).
pub const DEFAULT_LABELS: &[(&str, &str)] = &[
    ("personal_details", "name, age, home, languages, identity"),
    ("family", "relatives, partners, children, pets"),
    ("professional_details", "job, employer, skills, career"),
    ("sports", "sports played or followed"),
    ("travel", "trips, places visited or planned"),
    ("food", "diet, dishes, allergies, restaurants"),
    ("music", "artists, genres, instruments"),
    ("health", "conditions, medication, fitness"),
    ("technology", "devices, software, tools"),
    ("hobbies", "pastimes and interests"),
    ("fashion", "clothing and style"),
    ("entertainment", "films, series, books, games"),
    ("milestones", "life events and achievements"),
    ("user_preferences", "likes, dislikes and preferences"),
    ("misc", "anything else worth keeping"),
];

fn label_from_json(i: usize, item: &Value) -> Result<Label> {
    let shape = || {
        Error::invalid_field(
            format!("label_taxonomy[{i}]"),
            format!(
            "label_taxonomy[{i}] must be an object with exactly one key, the label, mapping to \
             its description (such as {{\"food\": \"what the user eats\"}}), got {}",
            excerpt(item)
        ),
        )
    };
    let Value::Object(map) = item else {
        return Err(shape());
    };
    let mut entries = map.iter();
    let (Some((name, description)), None) = (entries.next(), entries.next()) else {
        return Err(shape());
    };
    let Value::String(description) = description else {
        return Err(Error::invalid_field(
            format!("label_taxonomy[{i}]"),
            format!(
                "label_taxonomy[{i}]: the description of {name:?} must be a string, got {}",
                kind(description)
            ),
        ));
    };
    check_label(i, name, description)?;
    Ok(Label::new(name.clone(), description.clone()))
}

fn check_label(i: usize, name: &str, description: &str) -> Result<()> {
    if name.trim().is_empty() || name.len() > MAX_LABEL_BYTES || name.chars().any(char::is_control)
    {
        return Err(Error::invalid_field(
            format!("label_taxonomy[{i}]"),
            format!(
            "label_taxonomy[{i}]: a label name is 1–{MAX_LABEL_BYTES} printable bytes, got {:?}",
            name.chars().take(80).collect::<String>()
        ),
        ));
    }
    if description.len() > MAX_LABEL_DESCRIPTION_BYTES {
        return Err(Error::invalid_field(
            format!("label_taxonomy[{i}]"),
            format!(
                "label_taxonomy[{i}]: the description of {name:?} is {} bytes; the limit is \
             {MAX_LABEL_DESCRIPTION_BYTES}",
                description.len()
            ),
        ));
    }
    Ok(())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn excerpt(v: &Value) -> String {
    v.to_string().chars().take(80).collect()
}

/// Which product a project has. The synchronous [`extract`](crate::Memory::extract) call belongs to
/// [`Structured`](ProductVariant::Structured) only; projects on other variants get a 403.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProductVariant {
    /// Memories only: add, search, list and the rest, without `extract`.
    Memory,
    /// Memories and structured extraction. The default: whoever opens a file owns every
    /// capability of it.
    #[default]
    Structured,
}

/// The configuration after a change, with the credit fields of every mutating call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ConfigResult {
    /// The configuration now in force.
    #[serde(flatten)]
    pub config: ProjectConfig,
    /// Credits this call used (configuration changes are free).
    pub credits_used: u64,
    /// Credits left.
    pub credits_remaining: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_put_body_is_checked_and_merged() {
        let base = ProjectConfig::default();
        let c = base
            .merged_with_json(&json!({
                "extraction_policy": "only food",
                "label_taxonomy": [{"food": "what they eat"}, {"pets": "animals"}]
            }))
            .unwrap();
        assert_eq!(c.extraction_policy, "only food");
        assert_eq!(c.label_taxonomy[1], Label::new("pets", "animals"));
        // Absent keeps, null clears.
        let d = c
            .merged_with_json(&json!({"label_taxonomy": null}))
            .unwrap();
        assert_eq!(d.extraction_policy, "only food");
        assert!(d.label_taxonomy.is_empty());
        assert_eq!(d.labels().len(), DEFAULT_LABELS.len());
        // The JSON form is the spec's.
        assert_eq!(
            serde_json::to_value(&c).unwrap()["label_taxonomy"],
            json!([{"food": "what they eat"}, {"pets": "animals"}])
        );
        let back: ProjectConfig =
            serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn wrong_shapes_are_400s_that_say_why() {
        let base = ProjectConfig::default();
        let cases = [
            (json!([]), "must be a JSON object"),
            (json!({"extraction_policy": 3}), "must be a string"),
            (
                json!({"label_taxonomy": {"food": "x"}}),
                "list of single-key objects",
            ),
            (json!({"label_taxonomy": ["food"]}), "exactly one key"),
            (json!({"label_taxonomy": [{}]}), "exactly one key"),
            (
                json!({"label_taxonomy": [{"a": "x", "b": "y"}]}),
                "exactly one key",
            ),
            (json!({"label_taxonomy": [{"a": 1}]}), "must be a string"),
            (json!({"label_taxonomy": [{"": "x"}]}), "label name"),
            (json!({"label_taxonomy": [{"a": "x"}, {"a": "y"}]}), "twice"),
            (json!({"labels": []}), "unknown configuration field"),
        ];
        for (body, needle) in cases {
            let err = base.merged_with_json(&body).unwrap_err();
            assert_eq!(err.status(), 400, "{body}");
            assert!(err.detail().contains(needle), "{body}: {err}");
        }
        let long = json!({"extraction_policy": "x".repeat(MAX_POLICY_BYTES + 1)});
        assert_eq!(base.merged_with_json(&long).unwrap_err().status(), 413);
    }
}
