//! SQLite persistence of mesh state (`<state_dir>/mesh.db`).
//!
//! The store writes one [`Transition`] per SQL transaction: its effects, the
//! messages to send (an outbox the daemon drains) and its audit events, so a
//! crash leaves either all of a transition or none of it. Secrets are deleted
//! with `secure_delete` on and the WAL is checkpointed right after, so erased
//! keys do not linger in free pages or the log.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, params};

use super::codec::{self, bytes16, bytes32, label, tag};
use super::roster::Roster;
use super::secret::EpochSecret;
use super::state::{
    BadEnvelope, CloseReason, ClosedRec, Dest, Effect, Evidence, HistoryEntry, InviteRec,
    InviteStatus, MeshInfo, MeshState, PendingJoin, ProposalRec, ProvenBadEnvelope, RosterNode,
    SecretEntry, Timing, Transition, VoteRec,
};
use crate::db::{self, Access, DbKind, Problem, Put, Schema, Step, StorageError};
use crate::identity::PublicIdentity;
use crate::state_dir::{Folder, StateDir};
use crate::store::audit;
use crate::wire::mesh as wire;

/// The mark a node keeps beside its keys (in the identity folder) once it is
/// a member of a mesh: the mesh id in hex and its name. A `mesh.db` missing
/// or empty beside it is damage, not a fresh node, and is refused.
pub const MEMBER_MARK: &str = "mesh-member";

/// Errors from the mesh database: a failed disk or SQLite operation
/// ([`StorageError`]), a broken audit chain, or a state the node refuses
/// to start from.
#[derive(Debug, thiserror::Error)]
pub enum MeshStoreError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
    #[error("{0}")]
    Refused(String),
    #[error("lock {path}: {reason}")]
    Locked { path: PathBuf, reason: String },
    #[error(
        "{} is missing or empty, but this node has been a member of mesh {mesh} ({} says so); \
         that file holds its membership and epoch keys. Restore it from a backup \
         (docs/operator-guide.md, \"Back up and restore\"), or run `grove mesh leave --forget` \
         to start over as a node of no mesh",
        db.display(),
        mark.display()
    )]
    Lost {
        db: PathBuf,
        mark: PathBuf,
        mesh: String,
    },
}

/// `mesh.db`: `application_id` "grom"; files from before it carried one
/// are taken as mesh databases (they sit at the state directory's
/// `mesh.db`) and marked.
pub const MESH_SCHEMA: Schema = Schema {
    kind: DbKind::Mesh,
    application_id: 0x6772_6f6d,
    steps: STEPS,
    adopt_unmarked: true,
    connect: None,
};

const STEPS: &[Step] = &[
    Step::first(
        "
CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE rosters (
    hash BLOB PRIMARY KEY CHECK (length(hash) = 32),
    epoch INTEGER NOT NULL,
    parent BLOB,
    roster BLOB NOT NULL,
    commit_msg BLOB,
    proposal_hash BLOB
);
CREATE TABLE secrets (
    roster_hash BLOB PRIMARY KEY REFERENCES rosters(hash),
    epoch INTEGER NOT NULL,
    secret BLOB NOT NULL CHECK (length(secret) = 32),
    erase_at_ms INTEGER
);
CREATE TABLE proposals (
    hash BLOB PRIMARY KEY,
    roster_hash BLOB NOT NULL REFERENCES rosters(hash),
    signed BLOB NOT NULL
);
CREATE TABLE votes (
    epoch INTEGER NOT NULL,
    voter BLOB NOT NULL,
    roster_hash BLOB NOT NULL,
    proposal_hash BLOB NOT NULL,
    yes INTEGER NOT NULL,
    proposal_created_ms INTEGER NOT NULL,
    proposal_expires_ms INTEGER NOT NULL,
    signed BLOB NOT NULL,
    PRIMARY KEY (epoch, voter)
);
CREATE TABLE evidence (
    id INTEGER PRIMARY KEY,
    epoch INTEGER NOT NULL,
    voter BLOB NOT NULL,
    first BLOB NOT NULL,
    second BLOB NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE TABLE invites (
    id BLOB PRIMARY KEY CHECK (length(id) = 16),
    signed BLOB NOT NULL,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    note TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('open', 'used', 'revoked', 'void'))
);
CREATE TABLE revocations (id BLOB PRIMARY KEY, signed BLOB NOT NULL);
CREATE TABLE used_invites (id BLOB PRIMARY KEY, proposal BLOB NOT NULL);
CREATE TABLE history (
    seq INTEGER PRIMARY KEY,
    epoch INTEGER NOT NULL,
    roster_hash BLOB NOT NULL,
    commit_hash BLOB NOT NULL,
    switched INTEGER NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE TABLE pending_join (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    mesh_id BLOB NOT NULL,
    invite_id BLOB NOT NULL,
    inviter BLOB NOT NULL,
    name TEXT NOT NULL
);
CREATE TABLE outbox (seq INTEGER PRIMARY KEY, dest BLOB, message BLOB NOT NULL);
",
    ),
    Step::sql(
        "
-- Protocol 1.1: numbered votes with their releases; early-closed proposals.
ALTER TABLE votes ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE votes ADD COLUMN releases BLOB;
ALTER TABLE votes ADD COLUMN release BLOB;
CREATE TABLE closed (
    hash BLOB PRIMARY KEY CHECK (length(hash) = 32),
    epoch INTEGER NOT NULL,
    roster_hash BLOB NOT NULL,
    reason TEXT NOT NULL CHECK (reason IN ('rejected', 'withdrawn')),
    proof BLOB NOT NULL,
    at_ms INTEGER NOT NULL
);
",
    ),
    Step::sql(
        "
-- Commits whose envelope for this node did not open (docs/mesh-protocol.md §7).
CREATE TABLE bad_envelopes (
    id INTEGER PRIMARY KEY,
    epoch INTEGER NOT NULL,
    roster_hash BLOB NOT NULL CHECK (length(roster_hash) = 32),
    commit_hash BLOB NOT NULL CHECK (length(commit_hash) = 32),
    committer BLOB NOT NULL,
    at_ms INTEGER NOT NULL
);
",
    ),
    Step::sql(
        "
-- Checked evidence of envelopes that do not open (docs/mesh-protocol.md §7b).
CREATE TABLE proven_bad_envelopes (
    roster_hash BLOB NOT NULL CHECK (length(roster_hash) = 32),
    accuser BLOB NOT NULL,
    epoch INTEGER NOT NULL,
    commit_hash BLOB NOT NULL CHECK (length(commit_hash) = 32),
    committer BLOB NOT NULL,
    signed BLOB NOT NULL,
    at_ms INTEGER NOT NULL,
    PRIMARY KEY (roster_hash, accuser)
);
",
    ),
];

/// The mesh database of one node.
pub struct MeshStore {
    conn: Connection,
    path: PathBuf,
    /// Where this node's member mark goes ([`MEMBER_MARK`]).
    mark: PathBuf,
}

/// A queued outbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    pub seq: i64,
    pub to: Dest,
    pub message: Vec<u8>,
}

fn corrupt(what: impl ToString) -> Problem {
    Problem::Damaged(what.to_string())
}

fn arr32(v: Vec<u8>, what: &str) -> Result<[u8; 32], Problem> {
    v.try_into()
        .map_err(|_| corrupt(format!("{what} is not 32 bytes")))
}

fn arr16(v: Vec<u8>, what: &str) -> Result<[u8; 16], Problem> {
    v.try_into()
        .map_err(|_| corrupt(format!("{what} is not 16 bytes")))
}

/// The member mark of the mesh database at `db`: in the identity folder of
/// its state directory.
fn member_mark(db: &Path) -> PathBuf {
    let state_dir = db.parent().unwrap_or(Path::new("."));
    StateDir::new(state_dir).identity().join(MEMBER_MARK)
}

/// The mesh a member mark names when the database beside it is missing or
/// empty (its id, as the mark holds it).
fn lost_mesh(db: &Path, mark: &Path) -> Option<String> {
    let empty = fs::metadata(db).map_or(true, |m| m.len() == 0);
    if !empty {
        return None;
    }
    let text = fs::read_to_string(mark).ok()?;
    Some(text.lines().next().unwrap_or("").trim().to_string())
}

/// `grove mesh leave --forget`: the node gives up a mesh whose database is
/// lost, so it starts as a node of no mesh. Refused while the database is
/// there (that mesh is left with `grove mesh leave`). Returns the mesh the
/// mark named. The caller holds the state lock.
pub fn forget_lost_mesh(state_dir: &Path) -> Result<String, MeshStoreError> {
    let dir = StateDir::new(state_dir);
    let db = dir.mesh_db();
    let mark = member_mark(&db);
    let Some(mesh) = lost_mesh(&db, &mark) else {
        return Err(MeshStoreError::Refused(if mark.exists() {
            format!(
                "{} is there: this node's mesh is left with `grove mesh leave`, not forgotten",
                db.display()
            )
        } else {
            "this node has no mesh to forget".to_string()
        }));
    };
    let [wal, shm] = dir.mesh_db_sidecars();
    for path in [db.clone(), wal, shm, mark] {
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StorageError::new(&path, "remove", e).into()),
        }
    }
    Ok(mesh)
}

impl MeshStore {
    /// Opens (creating and migrating) `<state_dir>/mesh.db`.
    pub fn open_in(state_dir: &Path) -> Result<MeshStore, MeshStoreError> {
        StateDir::new(state_dir).make(Folder::Root)?;
        MeshStore::open(&StateDir::new(state_dir).mesh_db())
    }

    /// Opens (creating and migrating) a mesh database file. A missing or
    /// empty one beside a member mark is refused ([`MeshStoreError::Lost`]).
    pub fn open(path: &Path) -> Result<MeshStore, MeshStoreError> {
        let mark = member_mark(path);
        if let Some(mesh) = lost_mesh(path, &mark) {
            return Err(MeshStoreError::Lost {
                db: path.to_path_buf(),
                mark,
                mesh,
            });
        }
        // It holds epoch secrets: the kit creates it private (SQLite gives
        // its -wal and -shm files the same mode) and refuses a readable one.
        let conn = db::open(path, &MESH_SCHEMA, Access::ReadWrite)?;
        Ok(MeshStore {
            conn,
            path: path.to_path_buf(),
            mark,
        })
    }

    /// A failed operation `op` on this database.
    fn err<E: Into<Problem>>(&self, op: &'static str) -> impl Fn(E) -> MeshStoreError + '_ {
        move |e| StorageError::new(&self.path, op, e).into()
    }

    /// The underlying connection (read-only use: audit checks, inspection).
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Sets `synchronous` (FULL by default; the benchmark measures fsync separately).
    pub fn set_synchronous(&self, full: bool) -> Result<(), MeshStoreError> {
        self.conn
            .pragma_update(None, "synchronous", if full { "FULL" } else { "OFF" })
            .map_err(self.err("set the synchronous mode of"))
    }

    /// Persists one transition atomically: effects, outbox and audit events.
    pub fn persist(&mut self, t: &Transition, now_ms: i64) -> Result<(), MeshStoreError> {
        if t.is_empty() && t.outbound.is_empty() {
            return Ok(());
        }
        let path = self.path.clone();
        write_transition(&mut self.conn, t, now_ms)
            .map_err(|e| StorageError::new(&path, "write a transition to", e))?;
        if let Some(mesh) = t.effects.iter().find_map(|e| match e {
            Effect::PutMesh(m) => Some(m),
            _ => None,
        }) {
            self.write_mark(mesh)?;
        }
        if t.effects
            .iter()
            .any(|e| matches!(e, Effect::EraseSecret(_)))
        {
            // Move the erased pages out of the WAL into the (zeroed) main file.
            self.conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                .map_err(self.err("checkpoint"))?;
        }
        Ok(())
    }

    /// Queued outbound messages, oldest first.
    pub fn outbox(&self) -> Result<Vec<Queued>, MeshStoreError> {
        let read = || -> rusqlite::Result<Vec<Queued>> {
            let mut stmt = self
                .conn
                .prepare("SELECT seq, dest, message FROM outbox ORDER BY seq")?;
            let rows = stmt.query_map([], |r| {
                Ok(Queued {
                    seq: r.get(0)?,
                    to: r
                        .get::<_, Option<Vec<u8>>>(1)?
                        .map_or(Dest::All, Dest::Peer),
                    message: r.get(2)?,
                })
            })?;
            rows.collect()
        };
        read().map_err(self.err("read the outbox of"))
    }

    /// Drops queued messages up to and including `seq` (after they were sent).
    pub fn ack_outbox(&self, seq: i64) -> Result<(), MeshStoreError> {
        self.conn
            .execute("DELETE FROM outbox WHERE seq <= ?1", params![seq])
            .map_err(self.err("write the outbox of"))?;
        Ok(())
    }

    /// Checks the audit chain.
    pub fn verify_audit(&self) -> Result<audit::ChainReport, MeshStoreError> {
        Ok(audit::verify(&self.conn)?)
    }

    /// Marks this node a member of `mesh`, durably, where its identity
    /// folder is (a bare database without one, as in tests, has no mark).
    fn write_mark(&self, mesh: &MeshInfo) -> Result<(), StorageError> {
        if !self.mark.parent().is_some_and(|d| d.is_dir()) {
            return Ok(());
        }
        let text = format!("{}\n{}\n", hex::encode(mesh.mesh_id), mesh.name);
        db::write_private(&self.mark, text.as_bytes(), Put::Replace)
    }

    /// The envelopes that did not open here, and the checked evidence (§7b).
    fn read_bad_envelopes(&self, s: &mut MeshState) -> Result<(), Problem> {
        let sql = "SELECT epoch, roster_hash, commit_hash, committer, at_ms FROM bad_envelopes \
                   ORDER BY id";
        s.bad_envelopes = self.rows(sql, |r| {
            Ok(BadEnvelope {
                epoch: r.get::<_, i64>(0)? as u64,
                roster_hash: arr32(r.get(1)?, "bad envelope roster")?,
                commit_hash: arr32(r.get(2)?, "bad envelope commit")?,
                committer: r.get(3)?,
                at_ms: r.get(4)?,
            })
        })?;
        let sql = "SELECT roster_hash, accuser, epoch, commit_hash, committer, signed, at_ms \
                   FROM proven_bad_envelopes";
        s.proven_bad = self
            .rows(sql, |r| {
                Ok(ProvenBadEnvelope {
                    roster_hash: arr32(r.get(0)?, "proven envelope roster")?,
                    accuser: r.get(1)?,
                    epoch: r.get::<_, i64>(2)? as u64,
                    commit_hash: arr32(r.get(3)?, "proven envelope commit")?,
                    committer: r.get(4)?,
                    signed: r.get(5)?,
                    at_ms: r.get(6)?,
                })
            })?
            .into_iter()
            .map(|p| ((p.roster_hash, p.accuser.clone()), p))
            .collect();
        Ok(())
    }

    /// Loads the state. After a restart the node is not synced (it casts no
    /// vote until a member answered its sync request), unless it is the only
    /// member, so no other copy of the mesh exists to be behind.
    pub fn load(&self, me: PublicIdentity, timing: Timing) -> Result<MeshState, MeshStoreError> {
        let mut s = self
            .read_state(me, timing)
            .map_err(self.err("load the mesh state from"))?;
        // A node that was a member before marks existed gains its mark.
        if let Some(mesh) = &s.mesh
            && !self.mark.exists()
        {
            self.write_mark(mesh)?;
        }
        s.synced = s.roster().is_none_or(|r| r.members.len() <= 1);
        Ok(s)
    }

    /// The stored state, every table read and checked.
    fn read_state(&self, me: PublicIdentity, timing: Timing) -> Result<MeshState, Problem> {
        let mut s = MeshState::empty(me, timing);
        if let (Some(id), Some(name)) = (self.meta("mesh_id")?, self.meta("name")?) {
            s.mesh = Some(MeshInfo {
                mesh_id: arr16(id, "mesh id")?,
                name: String::from_utf8(name).map_err(|_| corrupt("mesh name"))?,
            });
        }
        if let Some(tip) = self.meta("tip")? {
            s.tip = arr32(tip, "tip")?;
        }
        let sql = "SELECT hash, parent, roster, commit_msg, proposal_hash FROM rosters";
        s.rosters = self.rows(sql, roster_row)?.into_iter().collect();
        let sql = "SELECT roster_hash, epoch, secret, erase_at_ms FROM secrets";
        s.secrets = self.rows(sql, secret_row)?.into_iter().collect();
        let sql = "SELECT epoch, voter, roster_hash, proposal_hash, yes, proposal_created_ms, \
                   proposal_expires_ms, signed, seq, releases, release FROM votes";
        s.votes = self.rows(sql, vote_row)?.into_iter().collect();
        let sql = "SELECT hash, epoch, roster_hash, reason, proof, at_ms FROM closed";
        s.closed = self.rows(sql, closed_row)?.into_iter().collect();
        let sql = "SELECT epoch, voter, first, second, at_ms FROM evidence ORDER BY id";
        s.evidence = self.rows(sql, evidence_row)?;
        self.read_bad_envelopes(&mut s)?;
        let sql = "SELECT id, signed, created_ms, expires_ms, note, status FROM invites";
        s.invites = self.rows(sql, invite_row)?.into_iter().collect();
        s.revoked = self
            .rows("SELECT id, signed FROM revocations", |r| {
                Ok((arr16(r.get(0)?, "invite id")?, r.get(1)?))
            })?
            .into_iter()
            .collect();
        s.used_invites = self
            .rows("SELECT id, proposal FROM used_invites", |r| {
                let id = arr16(r.get(0)?, "invite id")?;
                Ok((id, arr32(r.get(1)?, "used invite proposal")?))
            })?
            .into_iter()
            .collect();
        let sql =
            "SELECT epoch, roster_hash, commit_hash, switched, at_ms FROM history ORDER BY seq";
        s.history = self.rows(sql, history_row)?;
        let sql = "SELECT mesh_id, invite_id, inviter, name FROM pending_join WHERE id = 1";
        s.pending_join = self.rows(sql, pending_join_row)?.pop();
        // Proposals are re-checked against the current roster on load.
        let stored = self.rows("SELECT hash, signed FROM proposals", |r| {
            Ok((arr32(r.get(0)?, "proposal hash")?, r.get::<_, Vec<u8>>(1)?))
        })?;
        s.proposals = stored
            .into_iter()
            .filter_map(|(hash, signed)| {
                Some((hash, Arc::new(reload_proposal(&s, hash, &signed)?)))
            })
            .collect();
        if s.mesh.is_some() && !s.rosters.contains_key(&s.tip) {
            return Err(corrupt("the current roster is missing"));
        }
        Ok(s)
    }

    /// One value of the `meta` table.
    fn meta(&self, key: &str) -> Result<Option<Vec<u8>>, Problem> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    }

    /// Every row of `sql`, each decoded by `row`.
    fn rows<T>(
        &self,
        sql: &str,
        mut row: impl FnMut(&rusqlite::Row<'_>) -> Result<T, Problem>,
    ) -> Result<Vec<T>, Problem> {
        let mut stmt = self.conn.prepare(sql)?;
        let mut rows = stmt.query([])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            out.push(row(r)?);
        }
        Ok(out)
    }
}

/// One transition's effects, outbox and audit events, in one transaction.
fn write_transition(conn: &mut Connection, t: &Transition, now_ms: i64) -> Result<(), Problem> {
    let tx = conn.transaction()?;
    for e in &t.effects {
        apply_effect(&tx, e)?;
    }
    for o in &t.outbound {
        let dest = match &o.to {
            Dest::All => None,
            Dest::Peer(p) => Some(p.clone()),
        };
        tx.execute(
            "INSERT INTO outbox (dest, message) VALUES (?1, ?2)",
            params![dest, o.message],
        )?;
    }
    for a in &t.audit {
        // The same file: the transition's error names it.
        audit::append(&tx, now_ms, a.kind, &a.body).map_err(|e| *e.problem)?;
    }
    tx.commit()?;
    Ok(())
}

fn roster_row(r: &rusqlite::Row<'_>) -> Result<([u8; 32], Arc<RosterNode>), Problem> {
    let hash = arr32(r.get(0)?, "roster hash")?;
    let parent: Option<Vec<u8>> = r.get(1)?;
    let bytes: Vec<u8> = r.get(2)?;
    let roster = Roster::decode(&bytes).map_err(corrupt)?;
    if codec::hash(label::ROSTER, &bytes) != hash {
        return Err(corrupt("a roster does not match its hash"));
    }
    let proposal_hash: Option<Vec<u8>> = r.get(4)?;
    let node = RosterNode {
        roster,
        hash,
        parent: parent.map(|p| arr32(p, "parent")).transpose()?,
        commit: r.get(3)?,
        proposal_hash: proposal_hash
            .map(|p| arr32(p, "proposal hash"))
            .transpose()?,
    };
    Ok((hash, Arc::new(node)))
}

fn secret_row(r: &rusqlite::Row<'_>) -> Result<([u8; 32], SecretEntry), Problem> {
    let roster_hash = arr32(r.get(0)?, "secret roster")?;
    let entry = SecretEntry {
        roster_hash,
        epoch: r.get::<_, i64>(1)? as u64,
        // Read in place from SQLite's buffer into the zeroizing type.
        secret: Arc::new(
            r.get_ref(2)?
                .as_blob()
                .ok()
                .and_then(EpochSecret::from_slice)
                .ok_or_else(|| corrupt("secret is not 32 bytes"))?,
        ),
        erase_at_ms: r.get(3)?,
    };
    Ok((roster_hash, entry))
}

fn vote_row(r: &rusqlite::Row<'_>) -> Result<((u64, Vec<u8>), VoteRec), Problem> {
    let v = VoteRec {
        epoch: r.get::<_, i64>(0)? as u64,
        voter: r.get(1)?,
        roster_hash: arr32(r.get(2)?, "vote roster")?,
        proposal_hash: arr32(r.get(3)?, "vote proposal")?,
        yes: r.get(4)?,
        proposal_created_ms: r.get(5)?,
        proposal_expires_ms: r.get(6)?,
        signed: r.get(7)?,
        seq: u32::try_from(r.get::<_, i64>(8)?).map_err(|_| corrupt("vote seq"))?,
        releases: r
            .get::<_, Option<Vec<u8>>>(9)?
            .map(|x| arr32(x, "vote releases"))
            .transpose()?,
        release: r.get(10)?,
    };
    Ok(((v.epoch, v.voter.clone()), v))
}

fn closed_row(r: &rusqlite::Row<'_>) -> Result<([u8; 32], ClosedRec), Problem> {
    let hash = arr32(r.get(0)?, "closed proposal")?;
    let reason: String = r.get(3)?;
    let rec = ClosedRec {
        hash,
        epoch: r.get::<_, i64>(1)? as u64,
        roster_hash: arr32(r.get(2)?, "closed roster")?,
        reason: CloseReason::parse(&reason).ok_or_else(|| corrupt("closed reason"))?,
        proof: r.get(4)?,
        at_ms: r.get(5)?,
    };
    Ok((hash, rec))
}

fn evidence_row(r: &rusqlite::Row<'_>) -> Result<Evidence, Problem> {
    Ok(Evidence {
        epoch: r.get::<_, i64>(0)? as u64,
        voter: r.get(1)?,
        first: r.get(2)?,
        second: r.get(3)?,
        at_ms: r.get(4)?,
    })
}

fn invite_row(r: &rusqlite::Row<'_>) -> Result<([u8; 16], InviteRec), Problem> {
    let id = arr16(r.get(0)?, "invite id")?;
    let status: String = r.get(5)?;
    let rec = InviteRec {
        id,
        signed: r.get(1)?,
        created_ms: r.get(2)?,
        expires_ms: r.get(3)?,
        note: r.get(4)?,
        status: InviteStatus::parse(&status).ok_or_else(|| corrupt("invite status"))?,
    };
    Ok((id, rec))
}

fn history_row(r: &rusqlite::Row<'_>) -> Result<HistoryEntry, Problem> {
    Ok(HistoryEntry {
        epoch: r.get::<_, i64>(0)? as u64,
        roster_hash: arr32(r.get(1)?, "history roster")?,
        commit_hash: arr32(r.get(2)?, "history commit")?,
        switched: r.get(3)?,
        at_ms: r.get(4)?,
    })
}

fn pending_join_row(r: &rusqlite::Row<'_>) -> Result<PendingJoin, Problem> {
    Ok(PendingJoin {
        mesh_id: arr16(r.get(0)?, "pending mesh id")?,
        invite_id: arr16(r.get(1)?, "pending invite id")?,
        inviter: r.get(2)?,
        name: r.get(3)?,
    })
}

/// Rebuilds a stored proposal record of `state` (its checks passed when it
/// was stored).
fn reload_proposal(state: &MeshState, hash: [u8; 32], signed: &[u8]) -> Option<ProposalRec> {
    let signed: wire::Signed = codec::decode_canonical(signed, "stored proposal").ok()?;
    let (body, _) =
        codec::open_signed::<wire::Proposal>(&signed, tag::PROPOSAL, "proposal").ok()?;
    if bytes32(&body.roster_hash, "roster").ok()? != state.tip {
        return None;
    }
    let (change, joiner, invite_id) = super::state::proposal_change(&body).ok()?;
    Some(ProposalRec {
        hash,
        signed: codec::encode(&signed),
        epoch: body.epoch,
        roster_hash: state.tip,
        proposer: body.proposer,
        created_ms: body.created_ms,
        expires_ms: body.expires_ms,
        change,
        joiner,
        invite_id: invite_id.and_then(|i| bytes16(&i, "invite").ok()),
    })
}

/// Writes one effect of a transition.
fn apply_effect(tx: &Connection, e: &Effect) -> Result<(), Problem> {
    let meta = "INSERT OR REPLACE INTO meta (key, value) VALUES";
    match e {
        Effect::PutMesh(m) => tx.execute(
            &format!("{meta} ('mesh_id', ?1), ('name', ?2)"),
            params![&m.mesh_id[..], m.name.as_bytes()],
        )?,
        Effect::PutRoster(n) => put_roster(tx, n)?,
        Effect::SetTip(h) => tx.execute(&format!("{meta} ('tip', ?1)"), params![&h[..]])?,
        Effect::PutSecret(s) => tx.execute(
            "INSERT OR REPLACE INTO secrets (roster_hash, epoch, secret, erase_at_ms) \
             VALUES (?1, ?2, ?3, ?4)",
            params![
                &s.roster_hash[..],
                s.epoch as i64,
                &s.secret.expose()[..],
                s.erase_at_ms
            ],
        )?,
        Effect::EraseSecret(h) => tx.execute(
            "DELETE FROM secrets WHERE roster_hash = ?1",
            params![&h[..]],
        )?,
        Effect::PutProposal(p) => tx.execute(
            "INSERT OR REPLACE INTO proposals (hash, roster_hash, signed) VALUES (?1, ?2, ?3)",
            params![&p.hash[..], &p.roster_hash[..], p.signed],
        )?,
        Effect::DeleteProposal(h) => {
            tx.execute("DELETE FROM proposals WHERE hash = ?1", params![&h[..]])?
        }
        Effect::PutVote(v) => put_vote(tx, v)?,
        Effect::PutClosed(c) => put_closed(tx, c)?,
        Effect::DeleteClosed(h) => {
            tx.execute("DELETE FROM closed WHERE hash = ?1", params![&h[..]])?
        }
        Effect::DeleteVotesBefore(epoch) => {
            tx.execute("DELETE FROM votes WHERE epoch < ?1", params![*epoch as i64])?
        }
        Effect::PutEvidence(ev) => tx.execute(
            "INSERT INTO evidence (epoch, voter, first, second, at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![ev.epoch as i64, ev.voter, ev.first, ev.second, ev.at_ms],
        )?,
        Effect::PutBadEnvelope(b) => put_bad_envelope(tx, b)?,
        Effect::PutProvenBadEnvelope(p) => put_proven_bad_envelope(tx, p)?,
        Effect::PutInvite(i) => tx.execute(
            "INSERT OR REPLACE INTO invites (id, signed, created_ms, expires_ms, note, status) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                &i.id[..],
                i.signed,
                i.created_ms,
                i.expires_ms,
                i.note,
                i.status.as_str()
            ],
        )?,
        Effect::PutRevocation { id, signed } => tx.execute(
            "INSERT OR REPLACE INTO revocations (id, signed) VALUES (?1, ?2)",
            params![&id[..], signed],
        )?,
        Effect::PutUsedInvite { id, proposal } => tx.execute(
            "INSERT OR REPLACE INTO used_invites (id, proposal) VALUES (?1, ?2)",
            params![&id[..], &proposal[..]],
        )?,
        Effect::PutHistory(hst) => put_history(tx, hst)?,
        Effect::SetPendingJoin(p) => set_pending_join(tx, p.as_ref())?,
    };
    Ok(())
}

fn put_roster(tx: &Connection, n: &RosterNode) -> Result<usize, Problem> {
    Ok(tx.execute(
        "INSERT OR REPLACE INTO rosters (hash, epoch, parent, roster, commit_msg, proposal_hash) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            &n.hash[..],
            n.roster.epoch as i64,
            n.parent.map(|p| p.to_vec()),
            n.roster.encode(),
            n.commit,
            n.proposal_hash.map(|p| p.to_vec())
        ],
    )?)
}

fn put_vote(tx: &Connection, v: &VoteRec) -> Result<usize, Problem> {
    Ok(tx.execute(
        "INSERT OR REPLACE INTO votes (epoch, voter, roster_hash, proposal_hash, yes, \
         proposal_created_ms, proposal_expires_ms, signed, seq, releases, release) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            v.epoch as i64,
            v.voter,
            &v.roster_hash[..],
            &v.proposal_hash[..],
            v.yes,
            v.proposal_created_ms,
            v.proposal_expires_ms,
            v.signed,
            i64::from(v.seq),
            v.releases.map(|r| r.to_vec()),
            v.release
        ],
    )?)
}

fn put_closed(tx: &Connection, c: &ClosedRec) -> Result<usize, Problem> {
    Ok(tx.execute(
        "INSERT OR REPLACE INTO closed (hash, epoch, roster_hash, reason, proof, at_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            &c.hash[..],
            c.epoch as i64,
            &c.roster_hash[..],
            c.reason.as_str(),
            c.proof,
            c.at_ms
        ],
    )?)
}

fn put_history(tx: &Connection, hst: &HistoryEntry) -> Result<usize, Problem> {
    Ok(tx.execute(
        "INSERT INTO history (epoch, roster_hash, commit_hash, switched, at_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            hst.epoch as i64,
            &hst.roster_hash[..],
            &hst.commit_hash[..],
            hst.switched,
            hst.at_ms
        ],
    )?)
}

fn set_pending_join(tx: &Connection, p: Option<&PendingJoin>) -> Result<usize, Problem> {
    let mut n = tx.execute("DELETE FROM pending_join", [])?;
    if let Some(p) = p {
        n += tx.execute(
            "INSERT INTO pending_join (id, mesh_id, invite_id, inviter, name) \
             VALUES (1, ?1, ?2, ?3, ?4)",
            params![&p.mesh_id[..], &p.invite_id[..], p.inviter, p.name],
        )?;
    }
    Ok(n)
}

/// An exclusive lock on a state directory's mesh state, held while an offline
/// command (or the daemon) works on it; released on drop.
pub struct StateLock {
    path: PathBuf,
}

impl StateLock {
    /// Takes `<state_dir>/mesh.lock`. A lock left by a process that no longer
    /// runs is taken over; a live one is refused with its pid.
    pub fn acquire(state_dir: &Path) -> Result<StateLock, MeshStoreError> {
        StateDir::new(state_dir).make(Folder::Root)?;
        let path = StateDir::new(state_dir).lock();
        for _ in 0..2 {
            // Readable by all (it holds only a pid), so another user's
            // command can say which process holds it.
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    let _ = writeln!(f, "{}", std::process::id());
                    return Ok(StateLock { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let holder = fs::read_to_string(&path).unwrap_or_default();
                    let pid = holder.trim().parse::<u32>().ok();
                    let alive = pid.is_some_and(|p| Path::new(&format!("/proc/{p}")).exists());
                    if alive {
                        return Err(MeshStoreError::Locked {
                            path,
                            reason: format!(
                                "held by running process {} (is the daemon running?)",
                                holder.trim()
                            ),
                        });
                    }
                    // Stale lock of a process that is gone.
                    let _ = fs::remove_file(&path);
                }
                Err(e) => return Err(StorageError::new(&path, "create", e).into()),
            }
        }
        Err(MeshStoreError::Locked {
            path,
            reason: "could not take the lock".into(),
        })
    }
}

impl Drop for StateLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

fn put_bad_envelope(tx: &Connection, b: &BadEnvelope) -> rusqlite::Result<usize> {
    tx.execute(
        "INSERT INTO bad_envelopes (epoch, roster_hash, commit_hash, committer, at_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            b.epoch as i64,
            &b.roster_hash[..],
            &b.commit_hash[..],
            b.committer,
            b.at_ms
        ],
    )
}

fn put_proven_bad_envelope(tx: &Connection, p: &ProvenBadEnvelope) -> rusqlite::Result<usize> {
    tx.execute(
        "INSERT OR IGNORE INTO proven_bad_envelopes \
         (roster_hash, accuser, epoch, commit_hash, committer, signed, at_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            &p.roster_hash[..],
            p.accuser,
            p.epoch as i64,
            &p.commit_hash[..],
            p.committer,
            p.signed,
            p.at_ms
        ],
    )
}
