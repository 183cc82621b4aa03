//! Sealed gossip, both ways: a received message is opened with its epoch
//! key, checked and handed to the mesh state machine (mesh topic) or to
//! `announce::verify` and the peer book (roots topic), and its verdict goes
//! back to gossipsub; this node's own roots go out as a signed, sealed
//! announcement built from the store.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use libp2p::PeerId;
use prost::Message;

use super::due::Due;
use super::mesh::ActorError;
use super::outbox::MeshLink;
use super::peers::{Known, Peers};
use super::stats::{Stats, mesh_reason};
use super::store::StoreWorker;
use super::worker::Stopped;
use crate::announce;
use crate::mesh::MeshError;
use crate::mesh::state::MeshState;
use crate::net::protocol::{mesh_topic, roots_topic};
use crate::net::{NetError, Network, Verdict};
use crate::store::{Store, StoreError};
use crate::wire::mesh as wire;
use crate::wire::node as node_wire;

/// Votes that arrived before their proposal, kept for a retry.
const MAX_DEFERRED: usize = 64;
/// Received sealed gossip payloads kept for `GET /v1/node/gossip`.
const RECENT_GOSSIP: usize = 32;

/// Why this node's announcement did not go out.
#[derive(Debug, thiserror::Error)]
pub enum AnnounceError {
    #[error("no mesh")]
    NoMesh,
    #[error("reading the shards: {0}")]
    Store(#[from] StoreError),
    #[error(transparent)]
    Storage(#[from] crate::db::StorageError),
    #[error("sealing: {0}")]
    Seal(#[from] MeshError),
    #[error(transparent)]
    Net(#[from] NetError),
    #[error(transparent)]
    Stopped(#[from] Stopped),
}

/// The last sealed gossip payloads received, for audits (an operator can
/// check what a removed member could or could not read).
#[derive(Debug, Default)]
pub struct RecentGossip(Mutex<VecDeque<(String, Vec<u8>)>>);

impl RecentGossip {
    fn push(&self, topic: &str, data: &[u8]) {
        let mut recent = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() == RECENT_GOSSIP {
            recent.pop_front();
        }
        recent.push_back((topic.to_string(), data.to_vec()));
    }

    /// (topic, sealed bytes), oldest first.
    pub fn list(&self) -> Vec<(String, Vec<u8>)> {
        let recent = self.0.lock().unwrap_or_else(|e| e.into_inner());
        recent.iter().cloned().collect()
    }
}

/// Gossip in and announcements out; cheap to clone.
#[derive(Clone)]
pub struct Gossip {
    pub mesh: MeshLink,
    pub net: Network,
    pub peers: Peers,
    pub store: StoreWorker,
    pub stats: Arc<Stats>,
    pub due: Arc<Due>,
    /// Addresses announcements carry.
    pub advertised: super::advertised::Advertised,
    pub recent: Arc<RecentGossip>,
    deferred_votes: Arc<Mutex<Vec<Vec<u8>>>>,
}

/// Every current book of every shard, as announced: name, shard root, books.
fn shard_roots(store: &mut Store) -> Result<Vec<node_wire::ShardRoot>, StoreError> {
    let mut roots = Vec::new();
    for shard in store.open_all()? {
        let books = shard
            .books(false)?
            .into_iter()
            .map(|b| node_wire::BookRoot {
                key: b.key,
                title: b.title.unwrap_or_default(),
                author: b.author.unwrap_or_default(),
                root: b.root.to_vec(),
                count: b.count,
                version: b.version,
            })
            .collect();
        roots.push(node_wire::ShardRoot {
            name: shard.name().to_string(),
            root: shard.root()?.map(|r| r.to_vec()).unwrap_or_default(),
            books,
        });
    }
    Ok(roots)
}

impl Gossip {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mesh: MeshLink,
        net: Network,
        peers: Peers,
        store: StoreWorker,
        stats: Arc<Stats>,
        due: Arc<Due>,
        advertised: super::advertised::Advertised,
    ) -> Gossip {
        Gossip {
            mesh,
            net,
            peers,
            store,
            stats,
            due,
            advertised,
            recent: Arc::default(),
            deferred_votes: Arc::default(),
        }
    }

    /// Checks, opens and applies one gossip message; the verdict goes back
    /// to gossipsub (reject stops its spread, ignore just drops it).
    pub async fn on_message(&self, author: Option<PeerId>, topic: &str, data: Vec<u8>) -> Verdict {
        self.recent.push(topic, &data);
        let verdict = self.open_and_apply(author, topic, &data).await;
        self.stats.bump(match verdict {
            Verdict::Accept => "gossip.accepted",
            Verdict::Reject => "gossip.rejected",
            Verdict::Ignore => "gossip.ignored",
        });
        verdict
    }

    async fn open_and_apply(&self, author: Option<PeerId>, topic: &str, data: &[u8]) -> Verdict {
        let view = self.mesh.view();
        let Some(roster) = view.roster() else {
            return Verdict::Ignore;
        };
        let count = |reason: &str| self.stats.bump(&format!("gossip.dropped.{reason}"));
        let Ok(sealed) = wire::Gossip::decode(data) else {
            count("malformed");
            return Verdict::Reject;
        };
        if sealed.mesh_id != roster.mesh_id || sealed.topic != topic {
            count("wrong-mesh");
            return Verdict::Reject;
        }
        let Some(author) = author else {
            count("unsigned");
            return Verdict::Reject;
        };
        if sealed.epoch > roster.epoch {
            // This node is behind: catch up, from the sender first (it is
            // ahead), then the sender's later messages open.
            self.due.sync_from(author);
            count("future-epoch");
            return Verdict::Ignore;
        }
        let known_author = view
            .rosters
            .values()
            .any(|n| n.roster.member(&author.to_bytes()).is_some());
        if !known_author {
            count("not-member");
            return Verdict::Reject;
        }
        let Ok(plain) = view.open_gossip(&sealed) else {
            // A member that follows an epoch as a non-reader (its envelope
            // did not open) reads none of that epoch's gossip, the commit
            // that re-keys it included: ask members for commits instead.
            // (A flag, coalesced per tick: garbage costs one sync at most.)
            self.due.sync();
            count("cannot-open");
            return Verdict::Ignore;
        };
        if topic == mesh_topic(&roster.mesh_id) {
            self.on_mesh_message(plain).await
        } else if topic == roots_topic(&roster.mesh_id) {
            self.on_announcement(&view, author, &plain)
        } else {
            Verdict::Ignore
        }
    }

    async fn on_mesh_message(&self, message: Vec<u8>) -> Verdict {
        let is_proposal = matches!(
            wire::MeshMessage::decode(message.as_slice()).map(|m| m.kind),
            Ok(Some(wire::mesh_message::Kind::Proposal(_)))
        );
        match self.mesh.receive(message.clone()).await {
            Ok(_) => {
                if is_proposal {
                    self.retry_deferred_votes().await;
                }
                Verdict::Accept
            }
            Err(ActorError::Refused(e)) => {
                self.stats
                    .bump(&format!("gossip.dropped.{}", mesh_reason(&e)));
                match e {
                    MeshError::UnknownProposal(_) => {
                        let mut deferred = self
                            .deferred_votes
                            .lock()
                            .unwrap_or_else(|e| e.into_inner());
                        if deferred.len() < MAX_DEFERRED {
                            deferred.push(message);
                        }
                        Verdict::Ignore
                    }
                    MeshError::UnknownRoster { .. } => {
                        self.due.sync();
                        Verdict::Ignore
                    }
                    MeshError::Duplicate(_)
                    | MeshError::StaleEpoch { .. }
                    | MeshError::ProposalExpired
                    | MeshError::NotAMember
                    | MeshError::NoMesh => Verdict::Ignore,
                    _ => Verdict::Reject,
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "mesh message not applied");
                Verdict::Ignore
            }
        }
    }

    async fn retry_deferred_votes(&self) {
        let votes = std::mem::take(
            &mut *self
                .deferred_votes
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for vote in votes {
            let _ = self.mesh.receive(vote).await;
        }
    }

    fn on_announcement(&self, view: &MeshState, author: PeerId, plain: &[u8]) -> Verdict {
        let Some(roster) = view.roster() else {
            return Verdict::Ignore;
        };
        let count = |reason: &str| self.stats.bump(&format!("announcements.dropped.{reason}"));
        let Ok(signed) = wire::Signed::decode(plain) else {
            count("malformed");
            return Verdict::Reject;
        };
        let announcement = match announce::verify(&signed, roster) {
            Ok(a) => a,
            Err(announce::AnnounceError::NotMember) => {
                count("not-member");
                return Verdict::Ignore;
            }
            Err(e) => {
                tracing::debug!(error = %e, "announcement refused");
                count("invalid");
                return Verdict::Reject;
            }
        };
        if announcement.peer_id != author.to_bytes() {
            count("not-author");
            return Verdict::Reject;
        }
        let (first, offered, connected) = {
            let mut peers = self.peers.lock();
            let first = !peers.announcements.contains_key(&announcement.peer_id);
            let offered = peers.offer(announcement, signed, crate::now_ms());
            (first, offered, peers.connected.contains(&author))
        };
        match offered {
            Ok(true) => {
                self.stats.bump("announcements.accepted");
                if !connected {
                    self.due.redial();
                }
                if first {
                    // A member we had not heard from may not have our roots.
                    self.due.announce();
                }
                Verdict::Accept
            }
            Ok(false) => {
                count("stale");
                Verdict::Ignore
            }
            Err(e) => {
                tracing::warn!(error = %e, "node.db: announcement not stored");
                Verdict::Ignore
            }
        }
    }

    /// Signs this node's shard roots and keeps them as its own latest
    /// announcement; then, when `publish`, seals and publishes them. A lone
    /// member (no member connected) signs without publishing: its own moots
    /// resolve their trees from this announcement, and the next member to
    /// connect sets the announcement due again.
    pub async fn announce(&self, view: &MeshState, publish: bool) -> Result<(), AnnounceError> {
        let roster = view.roster().ok_or(AnnounceError::NoMesh)?;
        let me = self.net.local_peer_id().to_bytes();
        let name = roster
            .member(&me)
            .map(|m| m.name.clone())
            .unwrap_or_default();
        let shards = self
            .store
            .call(|books| shard_roots(books.store()))
            .await??;
        let now = crate::now_ms();
        let seq = self.peers.lock().next_seq(now)?;
        let announcement = node_wire::Announcement {
            mesh_id: roster.mesh_id.to_vec(),
            peer_id: me,
            seq,
            time_ms: now,
            shards,
            addresses: self
                .advertised
                .current()
                .iter()
                .map(|a| a.to_string())
                .collect(),
            name,
        };
        let to_sign = announcement.clone();
        let signed = self
            .mesh
            .worker
            .call(move |core| announce::sign(&core.id, &to_sign))
            .await?;
        // Kept before it is sent: it is this node's word on its books
        // whether or not any member has heard it yet.
        self.peers.lock().own = Some(Known {
            announcement,
            signed: signed.clone(),
            received_ms: now,
        });
        if !publish {
            return Ok(());
        }
        let topic = roots_topic(&roster.mesh_id);
        let sealed = view.seal_gossip(&topic, &signed.encode_to_vec(), &mut rand::rng())?;
        self.net.publish(&topic, sealed.encode_to_vec()).await?;
        self.stats.bump("announcements.sent");
        Ok(())
    }
}
