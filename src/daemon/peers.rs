//! What the node knows about other nodes: the latest verified root
//! announcement of every member (kept in `<state_dir>/node.db` so a restart
//! does not forget them), the addresses to redial them at, and when each was
//! last connected. Also this node's own announcement sequence number, which
//! must never go backwards.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use libp2p::{Multiaddr, PeerId};
use prost::Message;
use rusqlite::{Connection, OptionalExtension, params};

use crate::announce::Latest;
use crate::db::{self, DbKind, Schema, Step, StorageError};
use crate::mesh::state::MeshState;
use crate::net::{NetError, Network};
use crate::wire::mesh::Signed;
use crate::wire::node::{Announcement, BookRoot};

/// `node.db`: `application_id` "gron". Its first step is written with
/// `IF NOT EXISTS`, so a file from before it had a `user_version` (the
/// same tables, unmarked) is adopted at step 1. Like every database in the
/// state directory it carries an audit chain (`grove audit verify` checks
/// them all); this one's stays empty: announcements are cached copies of
/// signed messages, not decisions.
pub const NODE_SCHEMA: Schema = Schema {
    kind: DbKind::Node,
    application_id: 0x6772_6f6e,
    steps: &[Step::first(FIRST_STEP)],
    adopt_unmarked: true,
    connect: None,
};

const FIRST_STEP: &str = "
CREATE TABLE IF NOT EXISTS announcements (
    peer_id BLOB PRIMARY KEY,
    seq INTEGER NOT NULL,
    received_ms INTEGER NOT NULL,
    signed BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS addresses (peer_id BLOB PRIMARY KEY, addrs TEXT NOT NULL);
";

/// A stored announcement.
#[derive(Debug, Clone)]
pub struct Known {
    pub announcement: Announcement,
    pub signed: Signed,
    pub received_ms: i64,
}

/// The peer book: announcements, addresses, connection times.
pub struct PeerBook {
    conn: Connection,
    latest: Latest,
    pub announcements: BTreeMap<Vec<u8>, Known>,
    /// Addresses learned from invites (bootstrap) and announcements.
    pub addresses: BTreeMap<PeerId, Vec<Multiaddr>>,
    pub connected: BTreeSet<PeerId>,
    pub last_seen: BTreeMap<PeerId, i64>,
    /// This node's own latest announcement.
    pub own: Option<Known>,
}

impl PeerBook {
    /// Opens `node.db`, loading the stored announcements.
    pub fn open(state_dir: &Path) -> Result<PeerBook, StorageError> {
        let path = crate::state_dir::StateDir::new(state_dir).node_db();
        let conn = db::open(&path, &NODE_SCHEMA, db::Access::ReadWrite)?;
        Self::load(conn).map_err(StorageError::at(&path, "load"))
    }

    /// A failed SQLite call while doing `op` on `node.db`.
    fn err(&self, op: &'static str) -> impl Fn(rusqlite::Error) -> StorageError + use<> {
        StorageError::of(&self.conn, op)
    }

    /// The book with what `conn` stores.
    fn load(conn: Connection) -> Result<PeerBook, rusqlite::Error> {
        let mut book = PeerBook {
            conn,
            latest: Latest::default(),
            announcements: BTreeMap::new(),
            addresses: BTreeMap::new(),
            connected: BTreeSet::new(),
            last_seen: BTreeMap::new(),
            own: None,
        };
        let known: Vec<(Vec<u8>, String)> = {
            let mut stmt = book.conn.prepare("SELECT peer_id, addrs FROM addresses")?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?
        };
        for (peer, addrs) in known {
            if let Ok(peer) = PeerId::from_bytes(&peer) {
                let addrs: Vec<Multiaddr> = addrs
                    .split_whitespace()
                    .filter_map(|a| a.parse().ok())
                    .collect();
                book.addresses.insert(peer, addrs);
            }
        }
        let rows: Vec<(Vec<u8>, i64, Vec<u8>)> = {
            let mut stmt = book
                .conn
                .prepare("SELECT peer_id, received_ms, signed FROM announcements")?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<Result<_, _>>()?
        };
        for (peer, received_ms, bytes) in rows {
            // Rows were verified before they were stored; a row that no
            // longer decodes is skipped (the member re-announces).
            let Ok(signed) = Signed::decode(bytes.as_slice()) else {
                continue;
            };
            let Ok(announcement) = Announcement::decode(signed.body.as_slice()) else {
                continue;
            };
            let _ = book.latest.offer(&peer, announcement.seq);
            book.learn_addresses(&announcement);
            book.announcements.insert(
                peer,
                Known {
                    announcement,
                    signed,
                    received_ms,
                },
            );
        }
        Ok(book)
    }

    /// Offers a verified announcement; false when it is not newer than the
    /// one kept.
    pub fn offer(
        &mut self,
        announcement: Announcement,
        signed: Signed,
        now_ms: i64,
    ) -> Result<bool, StorageError> {
        let peer = announcement.peer_id.clone();
        if self.latest.offer(&peer, announcement.seq).is_err() {
            return Ok(false);
        }
        self.conn.execute(
            "INSERT OR REPLACE INTO announcements (peer_id, seq, received_ms, signed) VALUES (?1, ?2, ?3, ?4)",
            params![peer, announcement.seq as i64, now_ms, signed.encode_to_vec()],
        ).map_err(self.err("store an announcement in"))?;
        self.learn_addresses(&announcement);
        self.announcements.insert(
            peer,
            Known {
                announcement,
                signed,
                received_ms: now_ms,
            },
        );
        Ok(true)
    }

    fn learn_addresses(&mut self, a: &Announcement) {
        let Ok(peer) = PeerId::from_bytes(&a.peer_id) else {
            return;
        };
        let addrs: Vec<Multiaddr> = a.addresses.iter().filter_map(|s| s.parse().ok()).collect();
        if let Err(e) = self.remember_addresses(peer, addrs) {
            tracing::warn!(error = %e, "addresses not stored");
        }
    }

    /// Keeps (and persists, so a restarted node can redial) where `peer`
    /// can be reached: from an invite's bootstrap list or an announcement.
    pub fn remember_addresses(
        &mut self,
        peer: PeerId,
        addrs: Vec<Multiaddr>,
    ) -> Result<(), StorageError> {
        if addrs.is_empty() || self.addresses.get(&peer) == Some(&addrs) {
            return Ok(());
        }
        let text: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
        self.conn
            .execute(
                "INSERT OR REPLACE INTO addresses (peer_id, addrs) VALUES (?1, ?2)",
                params![peer.to_bytes(), text.join(" ")],
            )
            .map_err(self.err("store addresses in"))?;
        self.addresses.insert(peer, addrs);
        Ok(())
    }

    /// Forgets the announcements of peers that are not members any more.
    pub fn retain_members(&mut self, members: &BTreeSet<Vec<u8>>) -> Result<(), StorageError> {
        let gone: Vec<Vec<u8>> = self
            .announcements
            .keys()
            .filter(|p| !members.contains(*p))
            .cloned()
            .collect();
        for peer in gone {
            self.conn
                .execute("DELETE FROM announcements WHERE peer_id = ?1", [&peer])
                .map_err(self.err("forget an announcement in"))?;
            self.announcements.remove(&peer);
        }
        self.last_seen
            .retain(|p, _| members.contains(&p.to_bytes()) || self.connected.contains(p));
        Ok(())
    }

    /// The next sequence number for this node's announcement: above every
    /// earlier one, and at least the clock (so a lost database does not
    /// make members refuse this node's announcements for long).
    pub fn next_seq(&mut self, now_ms: i64) -> Result<u64, StorageError> {
        let err = self.err("store the announcement sequence number in");
        let last: Option<i64> = self
            .conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'announce_seq'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(&err)?;
        let next = (last.unwrap_or(0) + 1).max(now_ms);
        self.conn
            .execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('announce_seq', ?1)",
                [next],
            )
            .map_err(&err)?;
        Ok(next as u64)
    }

    /// The books `peer` last announced, over all its shards.
    fn announced_books(&self, peer: &PeerId) -> impl Iterator<Item = &BookRoot> {
        self.announcements
            .get(&peer.to_bytes())
            .into_iter()
            .flat_map(|known| known.announcement.shards.iter())
            .flat_map(|s| s.books.iter())
    }

    /// The root and chunk count `peer` last announced for `key` at `version`.
    pub fn announced_root(
        &self,
        peer: &PeerId,
        key: &str,
        version: u32,
    ) -> Option<([u8; 32], u64)> {
        self.announced_books(peer)
            .find(|b| b.key == key && b.version == version)
            .and_then(root_and_count)
    }

    /// The root and chunk count `peer` last announced for `key`'s newest
    /// version.
    pub fn current_root(&self, peer: &PeerId, key: &str) -> Option<([u8; 32], u64)> {
        self.announced_books(peer)
            .filter(|b| b.key == key)
            .max_by_key(|b| b.version)
            .and_then(root_and_count)
    }

    pub fn connected(&mut self, peer: PeerId, now_ms: i64) {
        self.connected.insert(peer);
        self.last_seen.insert(peer, now_ms);
    }

    /// A peer's last connection closed; its time is kept for members only
    /// (a stranger's would grow the map with every identity that calls).
    pub fn disconnected(&mut self, peer: PeerId, now_ms: i64, member: bool) {
        self.connected.remove(&peer);
        if member {
            self.last_seen.insert(peer, now_ms);
        } else {
            self.last_seen.remove(&peer);
        }
    }
}

impl PeerBook {
    /// Members (not this node) with a live connection.
    pub fn connected_members(&self, view: &MeshState) -> Vec<PeerId> {
        let Some(roster) = view.roster() else {
            return Vec::new();
        };
        roster
            .members
            .iter()
            .filter_map(|m| PeerId::from_bytes(&m.peer_id).ok())
            .filter(|p| self.connected.contains(p))
            .collect()
    }
}

/// How long a request waits for this node to announce a book as it is now.
const OWN_ANNOUNCEMENT_WAIT: Duration = Duration::from_secs(5);

/// The peer book shared by the node loop and the handlers; cheap to clone.
#[derive(Clone)]
pub struct Peers(Arc<Mutex<PeerBook>>);

impl Peers {
    pub fn new(book: PeerBook) -> Peers {
        Peers(Arc::new(Mutex::new(book)))
    }

    /// The book; a panic elsewhere while it was held does not poison it
    /// (every change to it is one statement).
    pub fn lock(&self) -> MutexGuard<'_, PeerBook> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This node's own latest signed announcement listing `key` with `root`
    /// and `count`. A book added a moment ago is announced on the node
    /// loop's next tick (a lone member signs its roots without publishing
    /// them): this asks for that tick and waits for it, a few seconds at
    /// most.
    pub async fn own_announcement(
        &self,
        due: &super::due::Due,
        key: &str,
        root: &[u8],
        count: u64,
    ) -> Option<Signed> {
        let waited = std::time::Instant::now();
        loop {
            let listed = self.lock().own.as_ref().and_then(|k| {
                k.announcement
                    .shards
                    .iter()
                    .flat_map(|s| s.books.iter())
                    .any(|b| b.key == key && b.root.as_slice() == root && b.count == count)
                    .then(|| k.signed.clone())
            });
            if listed.is_some() || waited.elapsed() >= OWN_ANNOUNCEMENT_WAIT {
                return listed;
            }
            due.announce();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Makes sure there is a connection to `peer` (a member), dialing its
    /// known addresses when there is none.
    pub async fn ensure_connected(&self, net: &Network, peer: PeerId) -> Result<(), NetError> {
        let addrs = {
            let book = self.lock();
            if book.connected.contains(&peer) {
                return Ok(());
            }
            book.addresses.get(&peer).cloned().unwrap_or_default()
        };
        net.connect(peer, &addrs, Duration::from_secs(10)).await
    }
}

/// Resolves PEER as an operator writes it: a full peer id, a unique prefix
/// of one, or a member's name.
pub fn resolve_member(view: &MeshState, text: &str) -> Result<Vec<u8>, crate::api::ApiError> {
    use crate::api::ApiError;
    let text = text.trim();
    if let Ok(p) = text.parse::<PeerId>() {
        return Ok(p.to_bytes());
    }
    let roster = view.roster().ok_or_else(|| {
        ApiError::from(crate::daemon::mesh::ActorError::Refused(
            crate::mesh::MeshError::NoMesh,
        ))
    })?;
    let matches: Vec<&crate::mesh::roster::Member> = roster
        .members
        .iter()
        .filter(|m| m.name == text || crate::identity::peer_id_text(&m.peer_id).starts_with(text))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one.peer_id.clone()),
        [] => Err(ApiError::not_found(format!(
            "no member is named `{text}` or has a peer id starting with it"
        ))),
        many => Err(ApiError::bad_request(format!(
            "`{text}` matches {} members; give more of the peer id",
            many.len()
        ))),
    }
}

/// An announced book's root and chunk count (a root not 32 bytes long is none).
fn root_and_count(b: &BookRoot) -> Option<([u8; 32], u64)> {
    Some((b.root.as_slice().try_into().ok()?, b.count))
}
