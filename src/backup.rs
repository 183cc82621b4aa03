//! `grove backup DEST`: a consistent copy of a node's state. Every SQLite
//! database (mesh.db, node.db, each shard) is copied with SQLite's online
//! backup API, so a running daemon keeps working and each copy is one
//! consistent snapshot; the identity keys and the hosted moots' files
//! (each replaced whole by a rename, so each read is one version) are
//! copied with their private modes. The copy is built beside DEST and renamed into place, so DEST is
//! either complete or absent. Models are not copied (`grove model install`
//! recreates them). A node restored from a backup casts no vote until it
//! has synced with a member (mesh state is loaded as not synced).

use std::fs;
use std::path::{Path, PathBuf};

use crate::db::{self, Put, StorageError};
use crate::state_dir::{IDENTITY_DIR, MESH_DB, MOOTS_DIR, NODE_DB, StateDir};

/// Why a backup failed; nothing is left at DEST.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{path} already exists; pick a new backup directory")]
    Exists { path: PathBuf },
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("nothing to back up in {0}: no identity or databases")]
    Empty(PathBuf),
    #[error(
        "cannot read {path}: a node's state is private to its user (files 0600); run the backup as that user or as root, e.g. `sudo grove backup --state {state} DEST`"
    )]
    NotReadable { path: PathBuf, state: PathBuf },
}

/// What a backup wrote.
#[derive(Debug, Clone)]
pub struct BackupReport {
    pub dest: PathBuf,
    /// Paths relative to DEST.
    pub files: Vec<String>,
    pub bytes: u64,
}

/// The files a backup covers, relative to the state directory: those
/// copied as they are (keys, moot files), and the databases.
fn sources(state_dir: &Path) -> Result<(Vec<String>, Vec<String>), BackupError> {
    // The folders are 0700: another user learns so here, before a listing
    // fails on it.
    let dir = StateDir::new(state_dir);
    for folder in [dir.identity(), dir.moots(), dir.shards()] {
        if let Err(e) = fs::read_dir(&folder)
            && e.kind() == std::io::ErrorKind::PermissionDenied
        {
            return Err(BackupError::NotReadable {
                path: folder,
                state: state_dir.to_path_buf(),
            });
        }
    }
    let mut keys = Vec::new();
    for name in [
        crate::identity::ED25519_FILE,
        crate::identity::X25519_FILE,
        crate::identity::PENDING_X25519_FILE,
    ] {
        let rel = format!("{IDENTITY_DIR}/{name}");
        if state_dir.join(&rel).is_file() {
            keys.push(rel);
        }
    }
    keys.extend(moot_files(state_dir)?);
    let mut dbs = Vec::new();
    for name in [MESH_DB, NODE_DB] {
        if state_dir.join(name).is_file() {
            dbs.push(name.to_string());
        }
    }
    for shard in crate::store::Store::new(state_dir).shard_names()? {
        dbs.push(crate::state_dir::shard_file(&shard));
    }
    Ok((keys, dbs))
}

/// The hosted moots' files, relative to the state directory, in name order.
fn moot_files(state_dir: &Path) -> Result<Vec<String>, BackupError> {
    use crate::daemon::moots::book::is_moot_file;
    let dir = StateDir::new(state_dir).moots();
    let io = StorageError::at(&dir, "list the moots in");
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(e).into()),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(&io)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_moot_file(&name) && entry.path().is_file() {
            files.push(format!("{MOOTS_DIR}/{name}"));
        }
    }
    files.sort();
    Ok(files)
}

/// Copies the state under `state_dir` into the new directory `dest`.
pub fn backup(state_dir: &Path, dest: &Path) -> Result<BackupReport, BackupError> {
    if dest.exists() {
        return Err(BackupError::Exists {
            path: dest.to_path_buf(),
        });
    }
    let (keys, dbs) = sources(state_dir)?;
    if keys.is_empty() && dbs.is_empty() {
        return Err(BackupError::Empty(state_dir.to_path_buf()));
    }
    // Say who can take the backup before writing anything.
    for rel in keys.iter().chain(&dbs) {
        let path = state_dir.join(rel);
        if let Err(e) = fs::File::open(&path)
            && e.kind() == std::io::ErrorKind::PermissionDenied
        {
            return Err(BackupError::NotReadable {
                path,
                state: state_dir.to_path_buf(),
            });
        }
    }
    let parent = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let partial = parent.join(format!(
        ".{}.partial-{}",
        dest.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "backup".into()),
        std::process::id()
    ));
    let result = write_backup(state_dir, &partial, &keys, &dbs);
    match result {
        Ok(bytes) => {
            fs::rename(&partial, dest).map_err(StorageError::at(dest, "move the backup to"))?;
            Ok(BackupReport {
                dest: dest.to_path_buf(),
                files: keys.into_iter().chain(dbs).collect(),
                bytes,
            })
        }
        Err(e) => {
            let _ = fs::remove_dir_all(&partial);
            Err(e)
        }
    }
}

fn write_backup(
    state_dir: &Path,
    out: &Path,
    keys: &[String],
    dbs: &[String],
) -> Result<u64, BackupError> {
    db::create_private_dir(out)?;
    let mut bytes = 0;
    for rel in keys {
        let from = state_dir.join(rel);
        let to = out.join(rel);
        db::create_private_dir(to.parent().unwrap_or(out))?;
        let data = fs::read(&from).map_err(StorageError::at(&from, "read"))?;
        db::write_private(&to, &data, Put::New)?;
        bytes += data.len() as u64;
    }
    for rel in dbs {
        let from = state_dir.join(rel);
        let to = out.join(rel);
        db::create_private_dir(to.parent().unwrap_or(out))?;
        // Created private first (mesh.db holds epoch secrets): SQLite
        // keeps the mode of a file it opens.
        db::write_private(&to, &[], Put::New)?;
        crate::db::snapshot(&from, &to)?;
        bytes += fs::metadata(&to)
            .map_err(StorageError::at(&to, "read the size of"))?
            .len();
    }
    Ok(bytes)
}
