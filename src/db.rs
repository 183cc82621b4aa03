//! The SQLite kit's integrity check: `PRAGMA quick_check` on every database
//! of a state directory at start, so damage is named before the node serves
//! from it (docs/operator-guide.md, "Damage at start").

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

/// The most problems one check reports (SQLite lists up to 100).
const MAX_PROBLEMS: usize = 3;

/// What kind of database a file is, and so what to do when it is damaged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbKind {
    /// A book shard (`shards/NAME.db`).
    Shard,
    /// The mesh state (`mesh.db`).
    Mesh,
    /// The node's cache of announcements and addresses (`node.db`).
    Node,
}

impl DbKind {
    /// The way out of damage to a database of this kind.
    fn advice(self) -> &'static str {
        match self {
            DbKind::Shard => {
                "restore it from a backup, or move it out of shards/ to start without its books"
            }
            DbKind::Mesh => "restore it from a backup (its epoch keys exist nowhere else)",
            DbKind::Node => {
                "it holds only cached announcements and addresses: move it aside and the node \
                 starts a new one (or restore it from a backup)"
            }
        }
    }
}

/// A database that failed its check.
#[derive(Debug, thiserror::Error)]
#[error("{} is damaged: {detail}; {}", path.display(), kind.advice())]
pub struct Damaged {
    pub path: PathBuf,
    pub kind: DbKind,
    pub detail: String,
}

/// One database checked, and how long it took.
#[derive(Debug, Clone)]
pub struct Checked {
    pub path: PathBuf,
    pub kind: DbKind,
    pub took: Duration,
}

/// Runs `PRAGMA quick_check` on the database at `path` (which exists).
/// A file SQLite cannot open as a database counts as damage too.
pub fn quick_check(path: &Path, kind: DbKind) -> Result<Checked, Damaged> {
    let start = Instant::now();
    let damaged = |detail: String| Damaged {
        path: path.to_path_buf(),
        kind,
        detail,
    };
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| damaged(e.to_string()))?;
    let problems: Vec<String> = conn
        .prepare("PRAGMA quick_check")
        .and_then(|mut stmt| {
            stmt.query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| damaged(e.to_string()))?;
    if problems != ["ok"] {
        let shown: Vec<&str> = problems
            .iter()
            .take(MAX_PROBLEMS)
            .map(String::as_str)
            .collect();
        let more = problems.len().saturating_sub(MAX_PROBLEMS);
        let tail = if more > 0 {
            format!(" (and {more} more)")
        } else {
            String::new()
        };
        return Err(damaged(format!(
            "quick_check found {}{tail}",
            shown.join("; ")
        )));
    }
    Ok(Checked {
        path: path.to_path_buf(),
        kind,
        took: start.elapsed(),
    })
}

/// Checks every database in `files` that exists, in order; the first
/// damaged one ends the check.
pub fn check_all(files: &[(PathBuf, DbKind)]) -> Result<Vec<Checked>, Damaged> {
    files
        .iter()
        .filter(|(path, _)| path.is_file())
        .map(|(path, kind)| quick_check(path, *kind))
        .collect()
}
