//! The moots this node hosts, in memory and in `<state_dir>/moots/<id>.json`
//! (one file per moot, written atomically after every accepted turn). The
//! file format is this module's own (`SavedMoot`), separate from the
//! control API's shapes, and files written by earlier versions load
//! unchanged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use prost::Message;
use serde::{Deserialize, Serialize};

use crate::api::{ApiError, dto};
use crate::db::{self, Put, StorageError};
use crate::moot::transcript::{DecisionRecord, TranscriptRecord};
use crate::wire::mesh::Signed;

/// Where a hosted moot is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MootState {
    Running,
    /// Stopped before its last turn; it can resume (see [`PauseCause`]).
    Paused,
    Finished,
}

impl MootState {
    pub fn as_str(self) -> &'static str {
        match self {
            MootState::Running => "running",
            MootState::Paused => "paused",
            MootState::Finished => "finished",
        }
    }
}

/// Why a moot paused, as far as resuming it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PauseCause {
    /// The host stopped while the moot ran: it resumes when the host starts.
    HostStopped,
    /// A speaker's node never answered: it resumes when that node reconnects.
    SpeakerSilent,
    /// Anything else (a refused turn, a removed member): `moot resume` only.
    Other,
}

/// The reason a moot shows when the host stopped while it ran.
pub const HOST_STOPPED: &str = "the host stopped while the moot ran";

/// Part of the reason of a moot paused on a speaker's node that never
/// answered (files from before `cause` was saved are read by it).
pub const NO_ANSWER: &str = "did not answer";

/// A tree as saved: the member holding the book, and the book.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedTree {
    pub peer_id: String,
    pub key: String,
    pub title: String,
}

/// An accepted turn as saved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedLine {
    pub turn: u32,
    pub key: String,
    pub title: String,
    pub text: String,
    pub grounded: bool,
    #[serde(default)]
    pub decision: Option<DecisionRecord>,
    /// When it landed, Unix ms (0 in files from before this was saved).
    #[serde(default)]
    pub at: i64,
}

/// What a resume needs: the trees as `PEER_ID:KEY` and the settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedPlan {
    pub trees: Vec<String>,
    pub topic: Option<String>,
    pub turns: u32,
    pub k: usize,
    pub temperature: f64,
    pub max_tokens: u32,
    pub seed: u64,
    pub summary_every: u32,
}

/// A moot's state and progress as saved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedView {
    pub id: String,
    pub state: MootState,
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<PauseCause>,
    pub host: String,
    pub trees: Vec<SavedTree>,
    pub topic: Option<String>,
    pub turns: u32,
    pub turns_done: u32,
    #[serde(default)]
    pub turn_ms: Vec<u64>,
    #[serde(default)]
    pub lines: Vec<SavedLine>,
    pub transcript: Option<TranscriptRecord>,
}

/// One file of `<state_dir>/moots/`: the view plus every signed turn and
/// the announcements that vouch for the trees' roots (hex).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedMoot {
    view: SavedView,
    turns: Vec<String>,
    announcements: Vec<String>,
    #[serde(default)]
    plan: Option<SavedPlan>,
    #[serde(default)]
    summaries: Vec<String>,
}

/// One moot as the host keeps it.
#[derive(Debug, Clone)]
pub struct Moot {
    pub view: SavedView,
    pub turns: Vec<Signed>,
    pub announcements: Vec<Signed>,
    pub plan: Option<SavedPlan>,
    pub summaries: Vec<String>,
}

impl Moot {
    /// Why it paused: the saved cause, or (for older files) the reason text.
    pub fn cause(&self) -> Option<PauseCause> {
        if self.view.state != MootState::Paused {
            return None;
        }
        self.view.cause.or_else(|| {
            let reason = self.view.reason.as_deref().unwrap_or_default();
            Some(if reason == HOST_STOPPED {
                PauseCause::HostStopped
            } else if reason.contains(NO_ANSWER) {
                PauseCause::SpeakerSilent
            } else {
                PauseCause::Other
            })
        })
    }

    fn trees(&self) -> Vec<dto::MootTree> {
        self.view
            .trees
            .iter()
            .map(|t| dto::MootTree {
                peer_id: t.peer_id.clone(),
                key: t.key.clone(),
                title: t.title.clone(),
            })
            .collect()
    }

    /// `moot show`.
    pub fn to_view(&self) -> dto::MootView {
        let v = &self.view;
        dto::MootView {
            id: v.id.clone(),
            state: v.state.as_str().into(),
            reason: v.reason.clone(),
            host: v.host.clone(),
            trees: self.trees(),
            topic: v.topic.clone(),
            turns: v.turns,
            turns_done: v.turns_done,
            turn_ms: v.turn_ms.clone(),
            lines: v
                .lines
                .iter()
                .map(|l| dto::MootLine {
                    turn: l.turn,
                    key: l.key.clone(),
                    title: l.title.clone(),
                    text: l.text.clone(),
                    grounded: l.grounded,
                    decision: l.decision.clone(),
                    at: l.at,
                })
                .collect(),
            transcript: v.transcript.clone(),
        }
    }

    /// A line of `moot list`.
    pub fn to_summary(&self) -> dto::MootSummary {
        let v = &self.view;
        dto::MootSummary {
            id: v.id.clone(),
            state: v.state.as_str().into(),
            reason: v.reason.clone(),
            topic: v.topic.clone(),
            trees: self.trees(),
            turns_done: v.turns_done,
            turns: v.turns,
        }
    }

    fn saved(&self) -> SavedMoot {
        let hex_all = |list: &[Signed]| {
            list.iter()
                .map(|s| hex::encode(s.encode_to_vec()))
                .collect()
        };
        SavedMoot {
            view: self.view.clone(),
            turns: hex_all(&self.turns),
            announcements: hex_all(&self.announcements),
            plan: self.plan.clone(),
            summaries: self.summaries.clone(),
        }
    }

    fn from_saved(file: SavedMoot) -> Option<Moot> {
        // Every saved message must decode: a turn dropped here would shift
        // the ones after it on resume.
        let decode = |list: &[String]| -> Option<Vec<Signed>> {
            list.iter()
                .map(|h| Signed::decode(hex::decode(h).ok()?.as_slice()).ok())
                .collect()
        };
        Some(Moot {
            turns: decode(&file.turns)?,
            announcements: decode(&file.announcements)?,
            plan: file.plan,
            summaries: file.summaries,
            view: file.view,
        })
    }
}

/// Whether `name` is a hosted moot's file (not a `.<id>.json.tmp` left by a
/// crash mid-write, an older copy of a file that was never replaced).
pub fn is_moot_file(name: &str) -> bool {
    !name.starts_with('.') && name.ends_with(".json")
}

/// The moots this node hosts.
pub struct MootBook {
    dir: PathBuf,
    moots: Mutex<BTreeMap<String, Moot>>,
    /// Files found at start that could not be read (kept on disk).
    damaged: Vec<dto::DamagedMoot>,
}

/// A moot file that could not be read, named in the log at start.
fn damaged_file(path: &Path, error: String) -> dto::DamagedMoot {
    tracing::error!(
        path = %path.display(),
        error = %error,
        "a hosted moot's file is damaged; it is left in place (restore it from a backup)"
    );
    dto::DamagedMoot {
        path: path.display().to_string(),
        error,
    }
}

fn unknown(id: &str) -> ApiError {
    ApiError::not_found(format!("no moot {id} on this node"))
}

impl MootBook {
    /// Loads `<state_dir>/moots/`. A moot that was running when the node
    /// stopped is shown as paused; an unreadable file (truncated, say) is
    /// named in the log and in `moot list`, and left in place.
    pub fn open(state_dir: &Path) -> MootBook {
        let dir = crate::state_dir::StateDir::new(state_dir).moots();
        let mut moots = BTreeMap::new();
        let mut damaged = Vec::new();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries.flatten().collect::<Vec<_>>(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "hosted moots cannot be read");
                Vec::new()
            }
        };
        for entry in entries {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if !is_moot_file(&name) {
                continue;
            }
            let file = match std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|t| serde_json::from_str::<SavedMoot>(&t).map_err(|e| e.to_string()))
            {
                Ok(file) => file,
                Err(e) => {
                    damaged.push(damaged_file(&path, e));
                    continue;
                }
            };
            let Some(mut moot) = Moot::from_saved(file) else {
                damaged.push(damaged_file(
                    &path,
                    "a signed message in it is corrupt".into(),
                ));
                continue;
            };
            if moot.view.state == MootState::Running {
                moot.view.state = MootState::Paused;
                moot.view.reason = Some(HOST_STOPPED.into());
                moot.view.cause = Some(PauseCause::HostStopped);
            }
            moots.insert(moot.view.id.clone(), moot);
        }
        MootBook {
            dir,
            moots: Mutex::new(moots),
            damaged,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Moot>> {
        self.moots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes one moot's file durably: a temporary file, synced, renamed
    /// over the previous copy (which stays until the new one is on disk),
    /// then the folder synced so the rename itself survives a crash.
    fn persist(&self, moot: &Moot) {
        let write = || -> Result<(), StorageError> {
            let path = self.dir.join(format!("{}.json", moot.view.id));
            let bytes = serde_json::to_vec_pretty(&moot.saved())
                .map_err(|e| StorageError::new(&path, "encode", std::io::Error::from(e)))?;
            db::create_private_dir(&self.dir)?;
            // Private like every file of the state directory.
            db::write_private(&path, &bytes, Put::Replace)
        };
        if let Err(e) = write() {
            tracing::warn!(error = %e, id = %moot.view.id, "moot not saved");
        }
    }

    /// Adds a new moot and saves it.
    pub fn insert(&self, moot: Moot) {
        self.lock().insert(moot.view.id.clone(), moot.clone());
        self.persist(&moot);
    }

    /// Changes one moot and saves it.
    pub fn update(&self, id: &str, f: impl FnOnce(&mut Moot)) {
        let mut moots = self.lock();
        if let Some(moot) = moots.get_mut(id) {
            f(moot);
            let copy = moot.clone();
            drop(moots);
            self.persist(&copy);
        }
    }

    /// Marks a moot paused, with the reason it shows.
    pub fn pause(&self, id: &str, reason: String, cause: PauseCause) {
        self.update(id, |m| {
            m.view.state = MootState::Paused;
            m.view.reason = Some(reason);
            m.view.cause = Some(cause);
        });
    }

    pub fn get(&self, id: &str) -> Result<Moot, ApiError> {
        self.lock().get(id).cloned().ok_or_else(|| unknown(id))
    }

    pub fn list(&self) -> dto::MootList {
        dto::MootList {
            moots: self.lock().values().map(Moot::to_summary).collect(),
            damaged: self.damaged.clone(),
        }
    }

    /// Paused moots: (id, cause, the trees' peer ids).
    pub fn paused(&self) -> Vec<(String, PauseCause, Vec<String>)> {
        self.lock()
            .values()
            .filter_map(|m| {
                let cause = m.cause()?;
                let peers = m.view.trees.iter().map(|t| t.peer_id.clone()).collect();
                Some((m.view.id.clone(), cause, peers))
            })
            .collect()
    }

    pub fn show(&self, id: &str) -> Result<dto::MootView, ApiError> {
        self.lock()
            .get(id)
            .map(Moot::to_view)
            .ok_or_else(|| unknown(id))
    }
}
