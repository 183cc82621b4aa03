//! The running node's network side: it carries the mesh state machine's
//! messages over sealed gossip, announces this node's shard roots and keeps
//! every member's latest announcement, answers the join, sync and search
//! protocols (rpc.rs), redials members, and refreshes gossip peers and the
//! block list at every epoch. The membership decisions stay in
//! `mesh::state`; this file only moves bytes and reports verdicts.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use libp2p::{Multiaddr, PeerId};
use prost::Message;
use tokio::sync::{mpsc, watch};

use super::mesh_actor::{ActorError, MeshActor};
use super::peers::{Known, PeerBook};
use super::stats::{Stats, mesh_reason};
use crate::announce;
use crate::api::server::StoreThread;
use crate::mesh::MeshError;
use crate::mesh::state::{Dest, MeshState};
use crate::net::{Event, Network, Verdict};
use crate::wire::mesh as wire;
use crate::wire::node as node_wire;

/// How often the node re-announces its roots even when nothing changed.
const ANNOUNCE_EVERY_TICKS: u64 = 120;
/// The periodic loop's tick.
const TICK: Duration = Duration::from_millis(500);
/// Longest outbox kept while no member can be reached; older messages are
/// dropped (members catch up on commits by sync).
const MAX_OUTBOX: usize = 512;
/// How many members a sync request goes to.
const SYNC_FANOUT: usize = 3;
/// Votes that arrived before their proposal, kept for a retry.
const MAX_DEFERRED: usize = 64;
/// How often this node re-sends its open proposals and its votes of the
/// current epoch (members that were offline when they were first sent
/// could not vote otherwise; receivers ignore copies they have).
const REPUBLISH_EVERY_TICKS: u64 = 60;
/// Received sealed gossip payloads kept for `GET /v1/node/gossip`.
const RECENT_GOSSIP: usize = 32;

/// The gossip topic of mesh messages.
pub fn mesh_topic(mesh_id: &[u8; 16]) -> String {
    format!("grove/{}/mesh/1", hex::encode(mesh_id))
}

/// The gossip topic of root announcements.
pub fn roots_topic(mesh_id: &[u8; 16]) -> String {
    format!("grove/{}/roots/1", hex::encode(mesh_id))
}

pub struct Shared {
    pub net: Network,
    pub mesh: MeshActor,
    pub store: StoreThread,
    pub model: super::model_thread::ModelThread,
    pub state_dir: std::path::PathBuf,
    pub moot_settings: crate::moot::MootSettings,
    /// This node's turn policy when other nodes' moots ask it to speak.
    pub policy: crate::moot::policy::PolicySettings,
    /// How hosted moots retry a speaker's node that does not answer.
    pub turn_retry: super::moots::TurnRetry,
    pub moots: super::moots::MootBook,
    pub peers: Mutex<PeerBook>,
    pub stats: Stats,
    /// Addresses invites and announcements carry.
    pub advertised: Vec<Multiaddr>,
    pub started_ms: i64,
    pub request_timeout: Duration,
    flush_lock: tokio::sync::Mutex<()>,
    announce_due: AtomicBool,
    sync_due: AtomicBool,
    republish_due: AtomicBool,
    redial_due: AtomicBool,
    deferred_votes: Mutex<Vec<Vec<u8>>>,
    /// The last sealed gossip payloads received, for audits (an operator can
    /// check what a removed member could or could not read).
    recent_gossip: Mutex<std::collections::VecDeque<(String, Vec<u8>)>>,
}

/// A handle to the running node; cheap to clone.
#[derive(Clone)]
pub struct Node(pub(super) Arc<Shared>);

/// What a node is built from.
pub struct Parts {
    pub net: Network,
    pub mesh: MeshActor,
    pub store: StoreThread,
    pub model: super::model_thread::ModelThread,
    pub peers: PeerBook,
    pub advertised: Vec<Multiaddr>,
    pub request_timeout: Duration,
    pub state_dir: std::path::PathBuf,
    pub moot_settings: crate::moot::MootSettings,
    pub policy: crate::moot::policy::PolicySettings,
    pub turn_retry: super::moots::TurnRetry,
}

impl Node {
    pub fn new(parts: Parts) -> Node {
        Node(Arc::new(Shared {
            moots: super::moots::MootBook::open(&parts.state_dir),
            net: parts.net,
            mesh: parts.mesh,
            store: parts.store,
            model: parts.model,
            state_dir: parts.state_dir,
            moot_settings: parts.moot_settings,
            policy: parts.policy,
            turn_retry: parts.turn_retry,
            peers: Mutex::new(parts.peers),
            stats: Stats::default(),
            advertised: parts.advertised,
            started_ms: crate::now_ms(),
            request_timeout: parts.request_timeout,
            flush_lock: tokio::sync::Mutex::new(()),
            announce_due: AtomicBool::new(true),
            sync_due: AtomicBool::new(true),
            republish_due: AtomicBool::new(true),
            redial_due: AtomicBool::new(true),
            deferred_votes: Mutex::new(Vec::new()),
            recent_gossip: Mutex::new(std::collections::VecDeque::new()),
        }))
    }

    pub fn shared(&self) -> &Shared {
        &self.0
    }

    pub fn peers(&self) -> MutexGuard<'_, PeerBook> {
        self.0.peers.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn view(&self) -> Arc<MeshState> {
        self.0.mesh.view()
    }

    /// The last sealed gossip payloads received: (topic, bytes).
    pub fn recent_gossip(&self) -> Vec<(String, Vec<u8>)> {
        self.0
            .recent_gossip
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// Asks for a fresh announcement (books changed).
    pub fn books_changed(&self) {
        self.0.announce_due.store(true, Ordering::Relaxed);
    }

    /// Runs a state-machine step on the mesh thread and persists it, then
    /// sends what it queued. Returns the transition's inline messages (those
    /// addressed to one peer, which the caller delivers).
    pub async fn step(
        &self,
        f: impl FnOnce(
            &MeshState,
            &crate::identity::Identity,
        ) -> Result<(MeshState, crate::mesh::state::Transition), MeshError>
        + Send
        + 'static,
    ) -> Result<crate::mesh::state::Transition, ActorError> {
        let t = self
            .0
            .mesh
            .call(move |core| {
                let r = f(&core.state, &core.id);
                core.apply(r)
            })
            .await??;
        self.flush().await;
        Ok(t)
    }

    /// Sends queued mesh messages in order: each goes out sealed on the mesh
    /// topic and leaves the outbox once gossipsub took it. Messages for one
    /// peer were delivered inline by whoever made them.
    pub async fn flush(&self) {
        let _one_at_a_time = self.0.flush_lock.lock().await;
        let queued = match self.0.mesh.call(|core| core.store.outbox()).await {
            Ok(Ok(q)) => q,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "reading the mesh outbox");
                return;
            }
            Err(_) => return,
        };
        let view = self.view();
        let alone = view
            .roster()
            .is_none_or(|r| r.members.len() <= 1 || !view.is_member());
        let too_many = queued.len() > MAX_OUTBOX;
        let mut acked = None;
        for q in &queued {
            if let Dest::All = q.to
                && !alone
                && let Some(mesh) = &view.mesh
            {
                let topic = mesh_topic(&mesh.mesh_id);
                let sealed = view.seal_mesh_message(&topic, &q.message, &mut rand::rng());
                match sealed {
                    Ok(sealed) => {
                        if let Err(e) = self.0.net.publish(&topic, sealed.encode_to_vec()).await
                            && !too_many
                        {
                            tracing::debug!(error = %e, "mesh message kept for a retry");
                            break;
                        }
                        self.0.stats.bump("gossip.published");
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot seal a queued mesh message; dropped")
                    }
                }
            }
            acked = Some(q.seq);
        }
        if let Some(seq) = acked
            && let Ok(Err(e)) = self
                .0
                .mesh
                .call(move |core| core.store.ack_outbox(seq))
                .await
        {
            // The messages went out; they are sent once more after a restart.
            tracing::warn!(error = %e, "mesh outbox not cleared");
        }
    }

    /// The node's loop: network events, state changes, periodic work.
    pub async fn run(self, mut events: mpsc::Receiver<Event>, mut stop: watch::Receiver<bool>) {
        let mut view_rx = self.0.mesh.watch();
        let mut last_tip = None;
        self.on_view(&mut last_tip).await;
        let resumer = self.clone();
        tokio::spawn(async move { resumer.resume_moots_after_start().await });
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut n: u64 = 0;
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(e) => self.on_event(e).await,
                    None => break,
                },
                changed = view_rx.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    self.on_view(&mut last_tip).await;
                }
                _ = tick.tick() => {
                    n += 1;
                    self.periodic(n).await;
                }
                _ = stop.changed() => break,
            }
        }
    }

    async fn on_view(&self, last_tip: &mut Option<[u8; 32]>) {
        let view = self.view();
        let Some(roster) = view.roster() else {
            return;
        };
        if *last_tip == Some(view.tip) {
            return;
        }
        *last_tip = Some(view.tip);
        self.0.stats.bump("epochs.seen");
        for topic in [mesh_topic(&roster.mesh_id), roots_topic(&roster.mesh_id)] {
            if let Err(e) = self.0.net.subscribe(&topic).await {
                tracing::warn!(error = %e, %topic, "cannot subscribe");
            }
        }
        let members: Vec<PeerId> = roster
            .members
            .iter()
            .filter_map(|m| PeerId::from_bytes(&m.peer_id).ok())
            .collect();
        let me = self.0.net.local_peer_id();
        // Everyone who was a member of a known roster and is not now: a
        // kicked or departed node is refused at the connection level.
        let mut blocked = BTreeSet::new();
        if view.is_member() {
            for node in view.rosters.values() {
                for m in &node.roster.members {
                    if let Ok(p) = PeerId::from_bytes(&m.peer_id)
                        && p != me
                        && !members.contains(&p)
                    {
                        blocked.insert(p);
                    }
                }
            }
        }
        let _ = self
            .0
            .net
            .set_peers(members.clone(), blocked.into_iter().collect())
            .await;
        let member_bytes: BTreeSet<Vec<u8>> =
            roster.members.iter().map(|m| m.peer_id.clone()).collect();
        if let Err(e) = self.peers().retain_members(&member_bytes) {
            tracing::warn!(error = %e, "node.db");
        }
        tracing::info!(
            epoch = roster.epoch,
            members = roster.members.len(),
            member = view.is_member(),
            "mesh epoch"
        );
        self.0.announce_due.store(true, Ordering::Relaxed);
        self.0.redial_due.store(true, Ordering::Relaxed);
    }

    async fn periodic(&self, n: u64) {
        if n.is_multiple_of(2) {
            self.flush().await;
        }
        if n.is_multiple_of(ANNOUNCE_EVERY_TICKS) {
            self.0.announce_due.store(true, Ordering::Relaxed);
        }
        if n.is_multiple_of(60) {
            self.0.sync_due.store(true, Ordering::Relaxed);
        }
        let view = self.view();
        if !view.is_member() {
            return;
        }
        let connected_members = self.connected_members(&view);
        if self.0.announce_due.load(Ordering::Relaxed) && !connected_members.is_empty() {
            match self.announce(&view).await {
                Ok(()) => self.0.announce_due.store(false, Ordering::Relaxed),
                Err(e) => tracing::debug!(error = %e, "announcement kept for a retry"),
            }
        }
        if (self.0.sync_due.load(Ordering::Relaxed) || !view.synced) && n.is_multiple_of(4) {
            let alone = view.roster().is_some_and(|r| r.members.len() <= 1);
            if !connected_members.is_empty() {
                self.0.sync_due.store(false, Ordering::Relaxed);
                self.sync(connected_members.clone()).await;
            } else if alone {
                self.0.sync_due.store(false, Ordering::Relaxed);
            }
        }
        if n.is_multiple_of(10)
            && let Err(e) = self
                .step(|s, id| s.tick(id, crate::now_ms(), &mut rand::rng()))
                .await
        {
            tracing::warn!(error = %e, "periodic mesh work (key erasure, expiry, backup commits) failed");
        }
        if self.0.republish_due.swap(false, Ordering::Relaxed)
            || n.is_multiple_of(REPUBLISH_EVERY_TICKS)
        {
            self.republish_open(&view).await;
        }
        if self.0.redial_due.swap(false, Ordering::Relaxed) || n % 6 == 1 {
            self.redial(&view).await;
        }
    }

    /// Re-sends this node's open proposals and its votes of the current
    /// epoch, sealed as when first sent.
    async fn republish_open(&self, view: &MeshState) {
        let Some(mesh) = &view.mesh else {
            return;
        };
        if !view.is_member() || view.roster().is_some_and(|r| r.members.len() <= 1) {
            return;
        }
        let me = &view.me.peer_id;
        let epoch = view.epoch();
        let mut messages = Vec::new();
        for p in view.proposals.values().filter(|p| &p.proposer == me) {
            if let Ok(signed) = wire::Signed::decode(p.signed.as_slice()) {
                messages.push(wire::mesh_message::Kind::Proposal(signed));
            }
        }
        for v in view
            .votes
            .values()
            .filter(|v| &v.voter == me && v.epoch == epoch)
        {
            if let Ok(signed) = wire::Signed::decode(v.signed.as_slice()) {
                messages.push(wire::mesh_message::Kind::Vote(signed));
            }
        }
        let topic = mesh_topic(&mesh.mesh_id);
        for kind in messages {
            let bytes = wire::MeshMessage { kind: Some(kind) }.encode_to_vec();
            let sealed = view.seal_mesh_message(&topic, &bytes, &mut rand::rng());
            if let Ok(sealed) = sealed
                && self
                    .0
                    .net
                    .publish(&topic, sealed.encode_to_vec())
                    .await
                    .is_ok()
            {
                self.0.stats.bump("gossip.republished");
            }
        }
    }

    /// Makes sure there is a connection to `peer` (a member), dialing its
    /// known addresses when there is none.
    pub async fn ensure_connected(&self, peer: PeerId) -> Result<(), crate::net::NetError> {
        if self.peers().connected.contains(&peer) {
            return Ok(());
        }
        let addrs = self
            .peers()
            .addresses
            .get(&peer)
            .cloned()
            .unwrap_or_default();
        self.0
            .net
            .connect(peer, &addrs, Duration::from_secs(10))
            .await
    }

    /// Members (not this node) with a live connection.
    pub fn connected_members(&self, view: &MeshState) -> Vec<PeerId> {
        let Some(roster) = view.roster() else {
            return Vec::new();
        };
        let peers = self.peers();
        roster
            .members
            .iter()
            .filter_map(|m| PeerId::from_bytes(&m.peer_id).ok())
            .filter(|p| peers.connected.contains(p))
            .collect()
    }

    /// Dials members that are not connected, at their announced addresses.
    async fn redial(&self, view: &MeshState) {
        let Some(roster) = view.roster() else {
            return;
        };
        let me = self.0.net.local_peer_id();
        let targets: Vec<(PeerId, Vec<Multiaddr>)> = {
            let peers = self.peers();
            roster
                .members
                .iter()
                .filter_map(|m| PeerId::from_bytes(&m.peer_id).ok())
                .filter(|p| *p != me && !peers.connected.contains(p))
                .filter_map(|p| peers.addresses.get(&p).map(|a| (p, a.clone())))
                .collect()
        };
        for (peer, addrs) in targets {
            for addr in addrs {
                let _ = self.0.net.dial(crate::net::with_peer_id(&addr, peer)).await;
            }
        }
    }

    /// Publishes this node's signed, sealed shard roots.
    async fn announce(&self, view: &MeshState) -> Result<(), String> {
        let roster = view.roster().ok_or("no mesh")?;
        let me = self.0.net.local_peer_id().to_bytes();
        let name = roster
            .member(&me)
            .map(|m| m.name.clone())
            .unwrap_or_default();
        let (shards, books) = self
            .0
            .store
            .call(|b| {
                use crate::api::books::BookApi;
                Ok((b.shards()?, b.list(false)?))
            })
            .await
            .map_err(|e| e.message)?;
        let mut shard_roots = Vec::new();
        for shard in shards.shards {
            let books = books
                .books
                .iter()
                .filter(|b| b.shard == shard.name)
                .filter_map(|b| {
                    Some(node_wire::BookRoot {
                        key: b.key.clone(),
                        title: b.title.clone().unwrap_or_default(),
                        author: b.author.clone().unwrap_or_default(),
                        root: hex::decode(&b.root).ok()?,
                        count: b.count,
                        version: b.version,
                    })
                })
                .collect();
            shard_roots.push(node_wire::ShardRoot {
                name: shard.name,
                root: shard
                    .root
                    .and_then(|r| hex::decode(r).ok())
                    .unwrap_or_default(),
                books,
            });
        }
        let now = crate::now_ms();
        let seq = self.peers().next_seq(now).map_err(|e| e.to_string())?;
        let announcement = node_wire::Announcement {
            mesh_id: roster.mesh_id.to_vec(),
            peer_id: me,
            seq,
            time_ms: now,
            shards: shard_roots,
            addresses: self.0.advertised.iter().map(|a| a.to_string()).collect(),
            name,
        };
        let to_sign = announcement.clone();
        let signed = self
            .0
            .mesh
            .call(move |core| announce::sign(&core.id, &to_sign))
            .await
            .map_err(|e| e.to_string())?;
        let topic = roots_topic(&roster.mesh_id);
        let sealed = view
            .seal_gossip(&topic, &signed.encode_to_vec(), &mut rand::rng())
            .map_err(|e| e.to_string())?;
        self.0
            .net
            .publish(&topic, sealed.encode_to_vec())
            .await
            .map_err(|e| e.to_string())?;
        self.0.stats.bump("announcements.sent");
        self.peers().own = Some(Known {
            announcement,
            signed,
            received_ms: now,
        });
        Ok(())
    }

    /// Asks up to a few connected members for the commits this node lacks.
    async fn sync(&self, members: Vec<PeerId>) {
        let request = self
            .0
            .mesh
            .call(|core| {
                // The request is sent here, not queued: only the state's
                // note of the pending request is kept.
                let (state, t) = core.state.sync_request(&core.id, crate::now_ms())?;
                core.state = state;
                Ok::<_, MeshError>(t.outbound)
            })
            .await;
        let Ok(Ok(outbound)) = request else {
            return;
        };
        let Some(signed) = outbound.iter().find_map(|o| {
            match wire::MeshMessage::decode(o.message.as_slice()).ok()?.kind? {
                wire::mesh_message::Kind::SyncRequest(s) => Some(s),
                _ => None,
            }
        }) else {
            return;
        };
        let bytes = signed.encode_to_vec();
        for peer in members.into_iter().take(SYNC_FANOUT) {
            let node = self.clone();
            let bytes = bytes.clone();
            tokio::spawn(async move {
                let answer = node.0.net.request(peer, "/grove/sync/1", bytes).await;
                let Ok(answer) = answer else {
                    node.0.stats.bump("sync.failed");
                    return;
                };
                let Ok(node_wire::SyncAnswer {
                    kind: Some(node_wire::sync_answer::Kind::Response(response)),
                }) = node_wire::SyncAnswer::decode(answer.as_slice())
                else {
                    node.0.stats.bump("sync.refused");
                    return;
                };
                let message = wire::MeshMessage {
                    kind: Some(wire::mesh_message::Kind::SyncResponse(response)),
                }
                .encode_to_vec();
                match node
                    .step(move |s, id| s.receive(id, &message, crate::now_ms(), &mut rand::rng()))
                    .await
                {
                    Ok(_) => node.0.stats.bump("sync.applied"),
                    Err(e) => {
                        tracing::debug!(error = %e, %peer, "sync response refused");
                        node.0.stats.bump("sync.refused");
                    }
                }
            });
        }
    }

    async fn on_event(&self, event: Event) {
        let now = crate::now_ms();
        match event {
            Event::Listening(addr) => tracing::debug!(%addr, "listening"),
            Event::PeerConnected(peer) => {
                self.peers().connected(peer, now);
                let view = self.view();
                if view
                    .roster()
                    .is_some_and(|r| r.member(&peer.to_bytes()).is_some())
                {
                    // A member (re)appeared: it may have missed our roots,
                    // commits, proposals and votes.
                    self.0.announce_due.store(true, Ordering::Relaxed);
                    self.0.sync_due.store(true, Ordering::Relaxed);
                    self.0.republish_due.store(true, Ordering::Relaxed);
                    // Moots paused because this member's node did not
                    // answer go on, once its roots and commits are in.
                    let node = self.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_secs(2)).await;
                        node.resume_moots_of(peer).await;
                    });
                }
            }
            Event::PeerDisconnected(peer) => self.peers().disconnected(peer, now),
            Event::Gossip {
                id,
                source,
                author,
                topic,
                data,
            } => {
                {
                    let mut recent = self
                        .0
                        .recent_gossip
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    if recent.len() == RECENT_GOSSIP {
                        recent.pop_front();
                    }
                    recent.push_back((topic.clone(), data.clone()));
                }
                let verdict = self.on_gossip(author, &topic, &data).await;
                let name = match verdict {
                    Verdict::Accept => "gossip.accepted",
                    Verdict::Reject => "gossip.rejected",
                    Verdict::Ignore => "gossip.ignored",
                };
                self.0.stats.bump(name);
                let _ = self.0.net.report(id, source, verdict).await;
            }
            Event::Request {
                id,
                peer,
                protocol,
                data,
            } => {
                let node = self.clone();
                tokio::spawn(async move {
                    let answer = super::rpc::answer(&node, peer, &protocol, &data).await;
                    let _ = node.0.net.respond(id, answer).await;
                });
            }
            Event::Dropped { peer, reason } => {
                tracing::debug!(?peer, %reason, "dropped");
                let kind = reason.split(':').next().unwrap_or("other").trim();
                let kind = match kind {
                    "incoming connection" => "incoming-connection",
                    "outgoing connection" => "outgoing-connection",
                    "inbound request" => "inbound-request",
                    _ => "other",
                };
                self.0.stats.bump(&format!("dropped.{kind}"));
            }
        }
    }

    /// Checks, opens and applies one gossip message; the verdict goes back
    /// to gossipsub (reject stops its spread, ignore just drops it).
    async fn on_gossip(&self, author: Option<PeerId>, topic: &str, data: &[u8]) -> Verdict {
        let view = self.view();
        let Some(roster) = view.roster() else {
            return Verdict::Ignore;
        };
        let count = |reason: &str| self.0.stats.bump(&format!("gossip.dropped.{reason}"));
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
            // This node is behind: catch up, then the sender's later
            // messages open.
            self.0.sync_due.store(true, Ordering::Relaxed);
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
        let plain = match view.open_gossip(&sealed) {
            Ok(p) => p,
            Err(_) => {
                count("cannot-open");
                return Verdict::Ignore;
            }
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
        let copy = message.clone();
        let result = self
            .step(move |s, id| s.receive(id, &copy, crate::now_ms(), &mut rand::rng()))
            .await;
        match result {
            Ok(_) => {
                if is_proposal {
                    self.retry_deferred_votes().await;
                }
                Verdict::Accept
            }
            Err(ActorError::Refused(e)) => {
                self.0
                    .stats
                    .bump(&format!("gossip.dropped.{}", mesh_reason(&e)));
                match e {
                    MeshError::UnknownProposal(_) => {
                        let mut deferred = self
                            .0
                            .deferred_votes
                            .lock()
                            .unwrap_or_else(|e| e.into_inner());
                        if deferred.len() < MAX_DEFERRED {
                            deferred.push(message);
                        }
                        Verdict::Ignore
                    }
                    MeshError::UnknownRoster { .. } => {
                        self.0.sync_due.store(true, Ordering::Relaxed);
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
                .0
                .deferred_votes
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for vote in votes {
            let _ = self
                .step(move |s, id| s.receive(id, &vote, crate::now_ms(), &mut rand::rng()))
                .await;
        }
    }

    fn on_announcement(&self, view: &MeshState, author: PeerId, plain: &[u8]) -> Verdict {
        let Some(roster) = view.roster() else {
            return Verdict::Ignore;
        };
        let count = |reason: &str| {
            self.0
                .stats
                .bump(&format!("announcements.dropped.{reason}"))
        };
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
        let first = !self
            .peers()
            .announcements
            .contains_key(&announcement.peer_id);
        // Bound first: a guard in the `match` scrutinee would live through
        // the arms, and the arms lock the peer book again.
        let offered = self.peers().offer(announcement, signed, crate::now_ms());
        let connected = self.peers().connected.contains(&author);
        match offered {
            Ok(true) => {
                self.0.stats.bump("announcements.accepted");
                if !connected {
                    // Its addresses are known now: dial it on the next tick.
                    self.0.redial_due.store(true, Ordering::Relaxed);
                }
                if first {
                    // A member we had not heard from may not have our roots.
                    self.0.announce_due.store(true, Ordering::Relaxed);
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
}
