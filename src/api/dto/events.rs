//! The node's one event stream (`GET /v1/events`, NDJSON): every event
//! name once, with the family whose shape its line has, and the shapes.
//! Membership events are [`MeshEvent`]s (as `mesh watch` always printed
//! them); moot, book and reachability events have their own shapes. Every
//! line has `event` (its name) and `at` (Unix ms).

use serde::{Deserialize, Serialize};

use super::{MeshEvent, MootLine};
use crate::grounding::GroundingCounts;
use crate::moot::transcript::DecisionRecord;

pub use crate::events::{EVENTS, Family, family, names};

/// One line of `/v1/events`.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Event {
    /// Membership events and `watch_dropped`.
    Mesh(MeshEvent),
    Moot(MootEvent),
    Book(BookEvent),
    Reachability(ReachabilityEvent),
    Database(DatabaseEvent),
}

impl Event {
    pub fn name(&self) -> &str {
        match self {
            Event::Mesh(e) => &e.event,
            Event::Moot(e) => &e.event,
            Event::Book(e) => &e.event,
            Event::Reachability(e) => &e.event,
            Event::Database(e) => &e.event,
        }
    }

    pub fn at(&self) -> i64 {
        match self {
            Event::Mesh(e) => e.at,
            Event::Moot(e) => e.at,
            Event::Book(e) => e.at,
            Event::Reachability(e) => e.at,
            Event::Database(e) => e.at,
        }
    }

    /// The event in words.
    pub fn detail(&self) -> &str {
        match self {
            Event::Mesh(e) => &e.detail,
            Event::Moot(e) => &e.detail,
            Event::Book(e) => &e.detail,
            Event::Reachability(e) => &e.detail,
            Event::Database(e) => &e.detail,
        }
    }

    /// The moot it concerns, for a moot event.
    pub fn moot(&self) -> Option<&str> {
        match self {
            Event::Moot(e) => Some(&e.moot),
            _ => None,
        }
    }

    pub fn family(&self) -> Option<Family> {
        family(self.name())
    }
}

impl From<MeshEvent> for Event {
    fn from(e: MeshEvent) -> Event {
        Event::Mesh(e)
    }
}

impl From<MootEvent> for Event {
    fn from(e: MootEvent) -> Event {
        Event::Moot(e)
    }
}

impl From<BookEvent> for Event {
    fn from(e: BookEvent) -> Event {
        Event::Book(e)
    }
}

impl From<DatabaseEvent> for Event {
    fn from(e: DatabaseEvent) -> Event {
        Event::Database(e)
    }
}

impl From<ReachabilityEvent> for Event {
    fn from(e: ReachabilityEvent) -> Event {
        Event::Reachability(e)
    }
}

/// A line is read by its name's family (an unknown name is refused, so a
/// reader can say which name it does not know).
impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Event, D::Error> {
        use serde::de::Error;
        let value = serde_json::Value::deserialize(d)?;
        let name = value
            .get("event")
            .and_then(|e| e.as_str())
            .ok_or_else(|| D::Error::missing_field("event"))?
            .to_string();
        let family = family(&name)
            .ok_or_else(|| D::Error::custom(format!("unknown event name `{name}`")))?;
        let shape = |e: serde_json::Error| D::Error::custom(format!("a `{name}` line: {e}"));
        Ok(match family {
            Family::Membership | Family::Stream => {
                Event::Mesh(serde_json::from_value(value).map_err(shape)?)
            }
            Family::Moot => Event::Moot(serde_json::from_value(value).map_err(shape)?),
            Family::Book => Event::Book(serde_json::from_value(value).map_err(shape)?),
            Family::Reachability => {
                Event::Reachability(serde_json::from_value(value).map_err(shape)?)
            }
            Family::Database => Event::Database(serde_json::from_value(value).map_err(shape)?),
        })
    }
}

/// A hosted moot's event: `moot_started`, `moot_turn`, `moot_paused`,
/// `moot_resumed`, `moot_finished`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MootEvent {
    pub event: String,
    /// When it happened on the host, Unix ms (for `moot_turn`: when the
    /// turn landed, the same time as the turn's `at` in `/v1/moot/show`).
    pub at: i64,
    /// The moot's id, as `/v1/moots` and `/v1/moot/show?id=` use it.
    pub moot: String,
    /// `moot_turn`: the 0-based index of the turn in `/v1/moot/show`'s
    /// `lines`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// `moot_turn`: the turn's number as `moot show` prints it (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<u32>,
    /// `moot_turn`: the speaking tree's book key and title, and the peer
    /// id of the member holding it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// `moot_turn`: the turn's text, and whether it passes grounding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounded: Option<bool>,
    /// `moot_turn`: the grounding summary (tags and quotes found).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounding: Option<GroundingCounts>,
    /// `moot_turn`: the speaking node's decision; `action` is `pass` (with
    /// its `reason`) when the speaker passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionRecord>,
    /// `moot_paused`: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The event in words.
    pub detail: String,
}

impl MootEvent {
    /// An event of moot `moot` with only its name, time and words.
    pub fn bare(event: &str, at: i64, moot: &str, detail: String) -> MootEvent {
        MootEvent {
            event: event.into(),
            at,
            moot: moot.into(),
            turn: None,
            number: None,
            key: None,
            title: None,
            peer: None,
            text: None,
            grounded: None,
            grounding: None,
            decision: None,
            reason: None,
            detail,
        }
    }

    /// A `moot_turn`'s line as `moot watch` prints it.
    pub fn line(&self) -> Option<MootLine> {
        Some(MootLine {
            turn: self.number?,
            key: self.key.clone()?,
            title: self.title.clone()?,
            text: self.text.clone().unwrap_or_default(),
            grounded: self.grounded.unwrap_or(false),
            decision: self.decision.clone(),
            at: self.at,
        })
    }
}

/// `book_added` (a new book or a new version) and `book_removed`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BookEvent {
    pub event: String,
    pub at: i64,
    /// The book's key and title.
    pub key: String,
    pub title: Option<String>,
    /// Its version (the one added, or the last one removed).
    pub version: u32,
    /// Its Merkle root (hex).
    pub root: String,
    pub detail: String,
}

/// `database_damaged`: the running node's integrity check found a database
/// damaged; `database_recovered`: a database found damaged before checks
/// whole again (restored, or moved aside).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DatabaseEvent {
    pub event: String,
    pub at: i64,
    /// The database's file, and its kind (`shard`, `mesh database`, …).
    pub file: String,
    pub kind: String,
    /// What the check found, and the way out (`database_damaged`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    pub detail: String,
}

/// `reachability_changed`: this node's judged reachability, or the
/// addresses others reach it at, changed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReachabilityEvent {
    pub event: String,
    pub at: i64,
    /// What changed: `reachability` or `addresses`.
    pub changed: String,
    /// `public`, `private` or `unknown` (when `changed` is `reachability`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reachability: Option<String>,
    /// Why it was judged so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The addresses others can reach this node at now: its listen
    /// addresses and relayed ones (when `changed` is `addresses`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listen: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relayed: Vec<String>,
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_read_back_by_its_names_family_and_an_unknown_name_is_refused() {
        let book = Event::Book(BookEvent {
            event: "book_added".into(),
            at: 1,
            key: "fiction/moby".into(),
            title: Some("Moby Dick".into()),
            version: 1,
            root: "00".into(),
            detail: "book fiction/moby added".into(),
        });
        let moot = Event::Moot(MootEvent {
            reason: Some("the host stopped".into()),
            ..MootEvent::bare("moot_paused", 2, "d3f5", "paused".into())
        });
        for e in [book, moot] {
            let line = serde_json::to_string(&e).unwrap();
            let back: Event = serde_json::from_str(&line).unwrap();
            assert_eq!(back.name(), e.name());
            assert_eq!(back.at(), e.at());
            assert_eq!(serde_json::to_string(&back).unwrap(), line);
        }
        let unknown = serde_json::from_str::<Event>(r#"{"event":"sky_fell","at":1}"#);
        assert!(unknown.unwrap_err().to_string().contains("sky_fell"));
        let short = serde_json::from_str::<Event>(r#"{"event":"moot_turn","at":1}"#);
        assert!(short.unwrap_err().to_string().contains("moot_turn"));
    }

    #[test]
    fn every_event_name_is_documented() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli-json.md"))
            .unwrap();
        for (name, _) in EVENTS {
            assert!(
                doc.contains(&format!("`{name}`")),
                "{name} is not in docs/cli-json.md"
            );
        }
    }
}
