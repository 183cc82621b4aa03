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
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use crate::state_dir::{IDENTITY_DIR, MESH_DB, MOOTS_DIR, NODE_DB, StateDir};

/// Why a backup failed; nothing is left at DEST.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{path} already exists; pick a new backup directory")]
    Exists { path: PathBuf },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("backing up {path}: {source}")]
    Sql {
        path: PathBuf,
        source: rusqlite::Error,
    },
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

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BackupError + '_ {
    move |source| BackupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The files a backup covers, relative to the state directory: those
/// copied as they are (keys, moot files), and the databases.
fn sources(state_dir: &Path) -> Result<(Vec<String>, Vec<String>), BackupError> {
    let mut keys = Vec::new();
    for name in [crate::identity::ED25519_FILE, crate::identity::X25519_FILE] {
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
    let store = crate::store::Store::new(state_dir);
    let shards = store.shard_names().map_err(|e| BackupError::Io {
        path: StateDir::new(state_dir).shards(),
        source: std::io::Error::other(e.to_string()),
    })?;
    for shard in shards {
        dbs.push(crate::state_dir::shard_file(&shard));
    }
    Ok((keys, dbs))
}

/// The hosted moots' files, relative to the state directory, in name order.
fn moot_files(state_dir: &Path) -> Result<Vec<String>, BackupError> {
    use crate::daemon::moots::book::is_moot_file;
    let dir = StateDir::new(state_dir).moots();
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(BackupError::Io {
                path: dir,
                source: e,
            });
        }
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io(&dir))?;
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
            fs::rename(&partial, dest).map_err(io(dest))?;
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

fn private_dir(path: &Path) -> Result<(), BackupError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(io(path))
}

fn write_backup(
    state_dir: &Path,
    out: &Path,
    keys: &[String],
    dbs: &[String],
) -> Result<u64, BackupError> {
    private_dir(out)?;
    let mut bytes = 0;
    for rel in keys {
        let from = state_dir.join(rel);
        let to = out.join(rel);
        private_dir(to.parent().unwrap_or(out))?;
        let data = fs::read(&from).map_err(io(&from))?;
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&to)
            .map_err(io(&to))?;
        std::io::Write::write_all(&mut f, &data).map_err(io(&to))?;
        f.sync_all().map_err(io(&to))?;
        bytes += data.len() as u64;
    }
    for rel in dbs {
        let from = state_dir.join(rel);
        let to = out.join(rel);
        private_dir(to.parent().unwrap_or(out))?;
        // Created private first: mesh.db holds epoch secrets.
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&to)
            .map_err(io(&to))?;
        let sql = |source| BackupError::Sql {
            path: from.clone(),
            source,
        };
        let src =
            Connection::open_with_flags(&from, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(sql)?;
        src.backup(
            rusqlite::MAIN_DB,
            &to,
            None::<fn(rusqlite::backup::Progress)>,
        )
        .map_err(sql)?;
        // A self-contained file: no WAL beside it.
        let copy = Connection::open(&to).map_err(sql)?;
        copy.pragma_update(None, "journal_mode", "DELETE")
            .map_err(sql)?;
        drop(copy);
        fs::set_permissions(&to, fs::Permissions::from_mode(0o600)).map_err(io(&to))?;
        bytes += fs::metadata(&to).map_err(io(&to))?.len();
    }
    Ok(bytes)
}
