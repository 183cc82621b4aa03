//! The state directory's layout: every file and folder grove keeps under
//! it, named here once (docs/ARCHITECTURE.md, "State directory"). The
//! daemon, the CLI, backup, audit and the start-up check ask [`StateDir`]
//! where things are; nothing else spells a name inside the directory.

use std::path::{Path, PathBuf};

use crate::db::DbKind;

/// The node's key files (`ed25519.key`, `x25519.key`) and its member mark.
pub const IDENTITY_DIR: &str = "identity";
/// The book shards, one SQLite database `<name>.db` each.
pub const SHARDS_DIR: &str = "shards";
/// The hosted moots, one `<id>.json` each.
pub const MOOTS_DIR: &str = "moots";
/// Installed model files.
pub const MODELS_DIR: &str = "models";
/// The mesh state database.
pub const MESH_DB: &str = "mesh.db";
/// The node database (cached announcements and addresses).
pub const NODE_DB: &str = "node.db";
/// The ask cache: answers kept while their books' roots hold.
pub const ASK_DB: &str = "ask.db";
/// The lock the daemon and offline commands take.
pub const MESH_LOCK: &str = "mesh.lock";
/// The control socket, when neither `control.socket` nor systemd names one.
pub const SOCKET: &str = "grove.sock";
/// The HTTP listener's bearer token, made when missing.
pub const HTTP_TOKEN: &str = "http.token";
/// The extension of a shard's file.
const SHARD_EXTENSION: &str = ".db";

/// A folder of the state directory that [`StateDir::make`] makes (the
/// identity, moots and models folders are made by their own writers, each
/// through the kit's `create_private_dir`, with the same mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Folder {
    /// The state directory itself.
    Root,
    Shards,
}

/// A state directory: where each of its files and folders is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateDir<'a> {
    root: &'a Path,
}

impl<'a> StateDir<'a> {
    pub fn new(root: &'a Path) -> StateDir<'a> {
        StateDir { root }
    }

    pub fn root(self) -> &'a Path {
        self.root
    }

    /// Makes `folder` (and the state directory above it) when missing,
    /// private to the node's user (0700). A folder that exists is left as
    /// it is.
    pub fn make(self, folder: Folder) -> Result<PathBuf, crate::db::StorageError> {
        let path = match folder {
            Folder::Root => self.root.to_path_buf(),
            Folder::Shards => self.shards(),
        };
        crate::db::create_private_dir(&path)?;
        Ok(path)
    }

    pub fn identity(self) -> PathBuf {
        self.root.join(IDENTITY_DIR)
    }

    pub fn shards(self) -> PathBuf {
        self.root.join(SHARDS_DIR)
    }

    /// The file of shard `name` (a checked shard name).
    pub fn shard(self, name: &str) -> PathBuf {
        self.root.join(shard_file(name))
    }

    pub fn moots(self) -> PathBuf {
        self.root.join(MOOTS_DIR)
    }

    pub fn models(self) -> PathBuf {
        self.root.join(MODELS_DIR)
    }

    pub fn mesh_db(self) -> PathBuf {
        self.root.join(MESH_DB)
    }

    /// The mesh database's WAL and shared-memory files.
    pub fn mesh_db_sidecars(self) -> [PathBuf; 2] {
        [
            self.root.join(format!("{MESH_DB}-wal")),
            self.root.join(format!("{MESH_DB}-shm")),
        ]
    }

    pub fn node_db(self) -> PathBuf {
        self.root.join(NODE_DB)
    }

    pub fn ask_db(self) -> PathBuf {
        self.root.join(ASK_DB)
    }

    pub fn lock(self) -> PathBuf {
        self.root.join(MESH_LOCK)
    }

    pub fn socket(self) -> PathBuf {
        self.root.join(SOCKET)
    }

    pub fn http_token(self) -> PathBuf {
        self.root.join(HTTP_TOKEN)
    }

    /// The databases at the top of the directory, with their kinds (the
    /// shards are listed by the store); each may not exist yet.
    pub fn top_databases(self) -> [(PathBuf, DbKind); 3] {
        [
            (self.mesh_db(), DbKind::Mesh),
            (self.node_db(), DbKind::Node),
            (self.ask_db(), DbKind::AskCache),
        ]
    }
}

/// Shard `name`'s file, relative to the state directory.
pub fn shard_file(name: &str) -> String {
    format!("{SHARDS_DIR}/{name}{SHARD_EXTENSION}")
}

/// The shard a file name in the shards folder holds, if it is a shard's
/// (the name is checked by the caller).
pub fn shard_name(file_name: &str) -> Option<&str> {
    file_name.strip_suffix(SHARD_EXTENSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_is_under_the_root() {
        let dir = StateDir::new(Path::new("/var/lib/grove"));
        assert_eq!(
            dir.shard("main"),
            Path::new("/var/lib/grove/shards/main.db")
        );
        assert_eq!(shard_name("main.db"), Some("main"));
        assert_eq!(shard_name("main.db-wal"), None);
        assert_eq!(dir.socket(), Path::new("/var/lib/grove/grove.sock"));
        assert!(dir.shard("main").starts_with(dir.shards()));
        for (path, _) in dir.top_databases() {
            assert_eq!(path.parent(), Some(dir.root()));
        }
    }
}
