//! The SQLite kit: the one way grove opens a database (the private
//! create, the pragmas of its kind, `application_id`, numbered migrations
//! with the audit table as part of a step, busy timeout, read-only and
//! immutable opens), and the integrity check, `PRAGMA quick_check` on every
//! database of a state directory at start, so damage is named before the
//! node serves from it (docs/operator-guide.md, "Damage at start"). Also
//! the two things every way to disk shares: [`StorageError`], the one
//! error a failed disk or SQLite operation produces (the file, the
//! operation, the problem), and [`write_private`], the one writer of a
//! private (0600) file, new or atomically replaced.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

/// How long a writer waits for another connection's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The audit chain's table (`store::audit` appends to it and checks it),
/// created in every database's first step.
pub const AUDIT_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS audit (
    seq   INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    kind  TEXT NOT NULL,
    body  TEXT NOT NULL,
    prev  BLOB NOT NULL CHECK (length(prev) = 32),
    hash  BLOB NOT NULL CHECK (length(hash) = 32)
);";

/// One migration step: `sql`, then `then` (a backfill), in one transaction,
/// taking `user_version` from its index to its index + 1.
pub struct Step {
    pub sql: &'static str,
    /// This step also creates the audit table ([`AUDIT_SCHEMA`]):
    /// every database's first step, so each one carries an audit chain.
    pub audit: bool,
    pub then: Option<fn(&Connection) -> rusqlite::Result<()>>,
}

impl Step {
    pub const fn sql(sql: &'static str) -> Step {
        Step {
            sql,
            audit: false,
            then: None,
        }
    }

    /// A first step: `sql` and the audit table.
    pub const fn first(sql: &'static str) -> Step {
        Step {
            sql,
            audit: true,
            then: None,
        }
    }
}

/// The layout of one kind of database.
pub struct Schema {
    pub kind: DbKind,
    /// `PRAGMA application_id`: names the file as grove's, of this kind.
    pub application_id: i64,
    pub steps: &'static [Step],
    /// A file of this kind from before it carried an `application_id` (0,
    /// with tables) is taken as this kind and marked; otherwise such a
    /// file is refused as not grove's.
    pub adopt_unmarked: bool,
    /// What every connection to a file of this kind registers before its
    /// schema is read or migrated (a shard's FTS5 extensions, which its
    /// migrations and its index already need).
    pub connect: Option<fn(&Connection) -> rusqlite::Result<()>>,
}

impl Schema {
    /// The schema version this build writes.
    pub fn latest(&self) -> i64 {
        self.steps.len() as i64
    }
}

/// How to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read and write, creating the file (0600) and migrating it.
    ReadWrite,
    /// Read-only media: no locks, no shared-memory file, nothing created
    /// beside it; the schema must already be current.
    Immutable,
}

/// The one storage error: a disk or SQLite operation that failed, with the
/// file and what was being done to it ("open /x/shards/a.db: database
/// disk image is malformed"). Every failure of a read or write under the
/// state directory is one; domain errors carry it as their `Storage` case.
#[derive(Debug, thiserror::Error)]
#[error("{op} {}: {problem}", path.display())]
pub struct StorageError {
    pub path: PathBuf,
    /// What was being done, as a verb phrase the path completes ("open",
    /// "write", "append to the audit chain of").
    pub op: &'static str,
    /// Boxed, so that every error carrying one stays small.
    pub problem: Box<Problem>,
}

/// What went wrong in a [`StorageError`].
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("not a grove {kind} (application_id {found:#x})")]
    NotOurs { kind: &'static str, found: i64 },
    #[error("written by a newer grove (schema {found}, this build knows up to {known})")]
    TooNew { found: i64, known: i64 },
    /// A file whose mode or owner is not private to this user.
    #[error("{0}")]
    NotPrivate(String),
    /// Stored content that does not decode (a hash of the wrong length, a
    /// row that breaks the schema's rules).
    #[error("damaged content: {0}")]
    Damaged(String),
}

/// What kind of failure a [`StorageError`] is, for the advice a caller
/// gives and the status an API answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The file is corrupted, or not a grove database of its kind.
    Damaged,
    /// The disk is full.
    Full,
    /// The file or its directory cannot be written (read-only media,
    /// permissions).
    NotWritable,
    /// A file of secrets others can read, or another user's.
    NotPrivate,
    /// A newer grove wrote it.
    TooNew,
    Other,
}

impl StorageError {
    /// `problem` while doing `op` on `path`.
    pub fn new(path: &Path, op: &'static str, problem: impl Into<Problem>) -> StorageError {
        StorageError {
            path: path.to_path_buf(),
            op,
            problem: Box::new(problem.into()),
        }
    }

    /// [`Self::new`] as a `map_err` argument.
    pub fn at<E: Into<Problem>>(
        path: &Path,
        op: &'static str,
    ) -> impl Fn(E) -> StorageError + use<E> {
        let path = path.to_path_buf();
        move |e| StorageError::new(&path, op, e)
    }

    /// [`Self::at`] for the file `conn` has open.
    pub fn of<E: Into<Problem>>(
        conn: &Connection,
        op: &'static str,
    ) -> impl Fn(E) -> StorageError + use<E> {
        StorageError::at(&conn_path(conn), op)
    }

    /// What kind of failure this is.
    pub fn cause(&self) -> Cause {
        use rusqlite::ErrorCode as C;
        use std::io::ErrorKind as K;
        match &*self.problem {
            Problem::Sql(e) => match e.sqlite_error_code() {
                Some(C::DatabaseCorrupt | C::NotADatabase) => Cause::Damaged,
                Some(C::DiskFull) => Cause::Full,
                Some(C::ReadOnly | C::CannotOpen | C::PermissionDenied) => Cause::NotWritable,
                _ => Cause::Other,
            },
            Problem::Io(e) => match e.kind() {
                K::StorageFull => Cause::Full,
                K::ReadOnlyFilesystem | K::PermissionDenied => Cause::NotWritable,
                _ => Cause::Other,
            },
            Problem::NotOurs { .. } | Problem::Damaged(_) => Cause::Damaged,
            Problem::TooNew { .. } => Cause::TooNew,
            Problem::NotPrivate(_) => Cause::NotPrivate,
        }
    }
}

/// The file `conn` has open (`:memory:` for none).
pub fn conn_path(conn: &Connection) -> PathBuf {
    PathBuf::from(conn.path().filter(|p| !p.is_empty()).unwrap_or(":memory:"))
}

/// Creates `path` as an empty file only its owner can read and write
/// (0600), unless it exists: a database before SQLite opens it.
pub fn create_private(path: &Path) -> std::io::Result<()> {
    match open_private(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// How [`write_private`] puts a file in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// A new file (`O_CREAT|O_EXCL`): one that exists is an error.
    New,
    /// Atomically over any previous copy, which stays until the new one is
    /// durable: a temporary file beside it, synced, renamed over it.
    Replace,
}

/// Writes `bytes` to `path` in a file only its owner can read and write,
/// the mode set as it is created, then syncs the file and its directory
/// (so the file, or its rename, survives a crash); a file not written
/// whole is removed. The state directory's one file-mode policy: keys,
/// the HTTP token, the member mark, moots, backups and every database
/// ([`create_private`]; SQLite gives a database's -wal and -shm files its
/// mode) are private to the node's user; only the control socket is
/// shared, with its group (0660).
pub fn write_private(path: &Path, bytes: &[u8], put: Put) -> Result<(), StorageError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let target = match put {
        Put::New => path.to_path_buf(),
        Put::Replace => {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            let tmp = dir.join(format!(".{name}.tmp"));
            // A temporary file a crash left behind.
            match std::fs::remove_file(&tmp) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(StorageError::new(&tmp, "remove", e));
                }
                _ => {}
            }
            tmp
        }
    };
    let mut file = open_private(&target).map_err(StorageError::at(&target, "create"))?;
    let written = std::io::Write::write_all(&mut file, bytes).and_then(|()| file.sync_all());
    drop(file);
    if let Err(e) = written {
        // A file not written whole is not left behind.
        let _ = std::fs::remove_file(&target);
        return Err(StorageError::new(&target, "write", e));
    }
    if put == Put::Replace {
        std::fs::rename(&target, path).map_err(StorageError::at(path, "rename a new copy to"))?;
    }
    sync_dir(dir)
}

/// Replaces the private file at `path` with `bytes` ([`Put::Replace`]) and
/// then overwrites the replaced copy with zeros and syncs it, so the old
/// bytes are in neither the file nor its old blocks (on a file system that
/// writes in place; a copy-on-write one or a journal of data may keep them).
/// A crash between the two leaves the new file in place and the old copy
/// unlinked, unreachable from the state directory.
pub fn replace_erasing(path: &Path, bytes: &[u8]) -> Result<(), StorageError> {
    let old = match std::fs::OpenOptions::new().write(true).open(path) {
        Ok(f) => Some(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(StorageError::new(path, "open to erase", e)),
    };
    write_private(path, bytes, Put::Replace)?;
    if let Some(mut old) = old {
        let len = old
            .metadata()
            .map_err(StorageError::at(path, "erase the replaced copy of"))?
            .len();
        let zeros = vec![0u8; usize::try_from(len).unwrap_or(0)];
        std::io::Write::write_all(&mut old, &zeros)
            .and_then(|()| old.sync_all())
            .map_err(StorageError::at(path, "erase the replaced copy of"))?;
    }
    Ok(())
}

/// Creates the directory `path` (and its parents) only its owner can
/// enter (0700), unless it exists.
pub fn create_private_dir(path: &Path) -> Result<(), StorageError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(StorageError::at(path, "create"))
}

/// Refuses a file of secrets (like ssh does) that its group or others
/// can read, or that another user owns.
pub fn check_private(path: &Path) -> Result<(), StorageError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let op = "check the mode of";
    let meta = std::fs::metadata(path).map_err(StorageError::at(path, op))?;
    let err = StorageError::at(path, op);
    // This process's effective uid: the owner of `/proc/self`.
    let me = Path::new("/proc/self");
    let me = std::fs::metadata(me)
        .map_err(StorageError::at(me, "read the owner of"))?
        .uid();
    if meta.uid() != me {
        return Err(err(Problem::NotPrivate(format!(
            "it is owned by uid {}, not by this user (uid {me}); refusing to use it",
            meta.uid()
        ))));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(err(Problem::NotPrivate(format!(
            "it holds secrets but is accessible by group or others (mode {mode:o}); \
             run `chmod 600 {}` and try again",
            path.display()
        ))));
    }
    Ok(())
}

/// Syncs a directory, so the names created or renamed in it are durable.
pub fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StorageError::at(dir, "sync"))
}

/// The one open that creates a private file: new (`O_CREAT|O_EXCL`), 0600
/// as it is created, never a chmod after.
fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// The SQLite URI that opens `path` as immutable: no locks, no
/// shared-memory file, nothing created beside it (read-only media, a
/// directory the caller cannot write).
pub fn immutable_uri(path: &Path) -> String {
    let escaped = path
        .display()
        .to_string()
        .replace('%', "%25")
        .replace('?', "%3f")
        .replace('#', "%23");
    format!("file:{escaped}?immutable=1")
}

/// A database opened to be read, never written (audit, checks, backups).
pub struct ReadOnly {
    pub conn: Connection,
    /// Whether it was opened as immutable (the main file alone): where the
    /// directory cannot be written and a WAL database's shared-memory file
    /// is missing, as on read-only media or for an operator checking the
    /// service's state. A live writer's WAL is then not seen.
    pub immutable: bool,
}

/// Opens the database at `path` read-only, falling back to immutable where
/// SQLite cannot open it read-only the usual way (the first read is where
/// a missing shared-memory file shows). Nothing is created or changed.
pub fn open_read_only(path: &Path) -> Result<ReadOnly, StorageError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let first_read = |conn: Connection| -> rusqlite::Result<Connection> {
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))?;
        Ok(conn)
    };
    match Connection::open_with_flags(path, flags).and_then(first_read) {
        Ok(conn) => Ok(ReadOnly {
            conn,
            immutable: false,
        }),
        Err(rusqlite::Error::SqliteFailure(e, _))
            if matches!(
                e.code,
                rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly
            ) =>
        {
            let conn = Connection::open_with_flags(
                immutable_uri(path),
                flags | OpenFlags::SQLITE_OPEN_URI,
            )
            .map_err(|e| StorageError::new(path, "open as immutable", e))?;
            Ok(ReadOnly {
                conn,
                immutable: true,
            })
        }
        Err(e) => Err(StorageError::new(path, "open", e)),
    }
}

/// One consistent snapshot of the database at `from` into the new file
/// `to`, by SQLite's online backup (a writer may keep writing meanwhile),
/// left as a plain rollback-journal file with no WAL beside it.
pub fn snapshot(from: &Path, to: &Path) -> Result<(), StorageError> {
    let source = open_read_only(from)?;
    source
        .conn
        .backup(
            rusqlite::MAIN_DB,
            to,
            None::<fn(rusqlite::backup::Progress)>,
        )
        .map_err(|e| StorageError::new(from, "back up", e))?;
    let write = |e| StorageError::new(to, "write", e);
    let copy = Connection::open_with_flags(
        to,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(write)?;
    copy.pragma_update(None, "journal_mode", "DELETE")
        .map_err(write)
}

/// Opens the database at `path` as `schema` says: created private when
/// missing (read-write), the pragmas of its kind, its `application_id`
/// checked, migrated to the latest schema one step per transaction.
pub fn open(path: &Path, schema: &Schema, access: Access) -> Result<Connection, StorageError> {
    let mut conn = match access {
        Access::ReadWrite => open_read_write(path, schema)?,
        Access::Immutable => {
            let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            Connection::open_with_flags(immutable_uri(path), flags)
                .map_err(|e| StorageError::new(path, "open as immutable", e))?
        }
    };
    if let Some(connect) = schema.connect {
        connect(&conn).map_err(|e| StorageError::new(path, "open", e))?;
    }
    migrate(&mut conn, schema, access)
        .map_err(|(op, problem)| StorageError::new(path, op, problem))?;
    Ok(conn)
}

fn open_read_write(path: &Path, schema: &Schema) -> Result<Connection, StorageError> {
    let new = !path.exists();
    if new {
        create_private(path).map_err(|e| StorageError::new(path, "create", e))?;
    }
    if schema.kind == DbKind::Mesh {
        // It holds epoch secrets: a file others can read is refused.
        check_private(path)?;
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn =
        Connection::open_with_flags(path, flags).map_err(|e| StorageError::new(path, "open", e))?;
    let set = |name: &str, value: &dyn rusqlite::ToSql| {
        conn.pragma_update(None, name, value)
            .map_err(|e| StorageError::new(path, "open", e))
    };
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| StorageError::new(path, "set the busy timeout of", e))?;
    if new && schema.kind == DbKind::Shard {
        // Set before the first table exists: pages freed by a removal can
        // then go back to the file system (`Shard::reclaim`).
        set("auto_vacuum", &"incremental")?;
    }
    // The first statement reads the header: a garbage file fails here.
    set("journal_mode", &"wal")?;
    set("foreign_keys", &true)?;
    if schema.kind == DbKind::Mesh {
        // Erased epoch secrets are overwritten, and a commit is on disk
        // before it is acted on.
        set("secure_delete", &true)?;
        set("synchronous", &"FULL")?;
    }
    Ok(conn)
}

/// Brings the database to `schema`'s latest version, one transaction per
/// step; refuses a file of another kind or a newer schema.
fn migrate(
    conn: &mut Connection,
    schema: &Schema,
    access: Access,
) -> Result<(), (&'static str, Problem)> {
    let read = |e: rusqlite::Error| ("read the schema version of", Problem::Sql(e));
    let app: i64 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(read)?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(read)?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
        .map_err(read)?;
    let not_ours = || {
        (
            "check the application id of",
            Problem::NotOurs {
                kind: schema.kind.name(),
                found: app,
            },
        )
    };
    // An unmarked file: a new one, or one of this kind from before
    // application ids (adopted, at the version its tables say).
    let unmarked_legacy = app == 0 && (version > 0 || tables > 0);
    if unmarked_legacy && !schema.adopt_unmarked {
        return Err(not_ours());
    }
    if app != 0 && app != schema.application_id {
        return Err(not_ours());
    }
    if version > schema.latest() {
        return Err((
            "check the schema version of",
            Problem::TooNew {
                found: version,
                known: schema.latest(),
            },
        ));
    }
    let step_err = |e: rusqlite::Error| ("migrate", Problem::Sql(e));
    for (i, step) in schema.steps.iter().enumerate().skip(version as usize) {
        let tx = conn.transaction().map_err(step_err)?;
        tx.execute_batch(step.sql).map_err(step_err)?;
        if step.audit {
            tx.execute_batch(AUDIT_SCHEMA).map_err(step_err)?;
        }
        if let Some(then) = step.then {
            then(&tx).map_err(step_err)?;
        }
        tx.pragma_update(None, "user_version", (i + 1) as i64)
            .map_err(step_err)?;
        tx.pragma_update(None, "application_id", schema.application_id)
            .map_err(step_err)?;
        tx.commit().map_err(step_err)?;
    }
    if access == Access::ReadWrite && app == 0 && version == schema.latest() && version > 0 {
        // A current file from before application ids: mark it.
        conn.pragma_update(None, "application_id", schema.application_id)
            .map_err(|e| ("mark the application id of", Problem::Sql(e)))?;
    }
    Ok(())
}

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
    /// Answers to asks, kept while their books' roots hold (`ask.db`).
    AskCache,
}

impl std::fmt::Display for DbKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl DbKind {
    fn name(self) -> &'static str {
        match self {
            DbKind::Shard => "shard",
            DbKind::Mesh => "mesh database",
            DbKind::Node => "node database",
            DbKind::AskCache => "ask cache",
        }
    }

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
            DbKind::AskCache => {
                "it holds only cached answers: move it aside and the next ask starts a new one"
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
    // Read-only: the check writes nothing (immutable where the directory
    // cannot be written, as `audit verify` reads it).
    let problems = open_read_only(path)
        .map_err(|e| damaged(e.problem.to_string()))
        .and_then(|r| {
            let mut stmt = r
                .conn
                .prepare("PRAGMA quick_check")
                .map_err(|e| damaged(e.to_string()))?;
            stmt.query_map([], |row| row.get::<_, String>(0))
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(|e| damaged(e.to_string()))
        })?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn private_files_are_0600_new_or_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        write_private(&path, b"one", Put::New).unwrap();
        assert_eq!(
            (std::fs::read(&path).unwrap(), mode(&path)),
            (b"one".to_vec(), 0o600)
        );
        let again = write_private(&path, b"two", Put::New).unwrap_err();
        assert!(again.to_string().starts_with("create "), "{again}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"one",
            "a new file never overwrites"
        );
        // A temporary file a crash left is not in the way.
        std::fs::write(dir.path().join(".secret.tmp"), b"left").unwrap();
        write_private(&path, b"three", Put::Replace).unwrap();
        assert_eq!(
            (std::fs::read(&path).unwrap(), mode(&path)),
            (b"three".to_vec(), 0o600)
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["secret"], "no temporary file is left");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let refused = check_private(&path).unwrap_err();
        assert_eq!(refused.cause(), Cause::NotPrivate);
        assert!(refused.to_string().contains("chmod 600"), "{refused}");
    }

    #[test]
    fn a_storage_error_names_the_operation_and_the_file() {
        let e = StorageError::new(
            Path::new("/x/shards/a.db"),
            "open",
            rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
                Some("database disk image is malformed".into()),
            ),
        );
        assert_eq!(
            e.to_string(),
            "open /x/shards/a.db: database disk image is malformed"
        );
        assert_eq!(e.cause(), Cause::Damaged);
    }
}
