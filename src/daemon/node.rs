//! The node loop: network events in, periodic work out. It hands gossip to
//! `gossip.rs`, requests to `rpc/`, and on every epoch refreshes the gossip
//! peers and the block list; on its ticks it flushes the mesh outbox,
//! announces this node's roots, syncs, republishes its open proposals and
//! votes, and redials members. The membership decisions stay in
//! `mesh::state`; this file only moves bytes and reports verdicts.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use libp2p::{Multiaddr, PeerId};
use prost::Message;
use tokio::sync::{mpsc, watch};

use super::due::Due;
use super::gossip::Gossip;
use super::moots::MootHost;
use super::outbox::MeshLink;
use super::peers::Peers;
use super::rpc::{self, Rpc};
use super::stats::Stats;
use crate::api::dto;
use crate::mesh::state::MeshState;
use crate::net::protocol::{mesh_topic, roots_topic};
use crate::net::reach::{circuits_through, is_relayed};
use crate::net::{Event, Network};

/// How often the node re-announces its roots even when nothing changed.
const ANNOUNCE_EVERY_TICKS: u64 = 120;
/// The periodic loop's tick.
const TICK: Duration = Duration::from_millis(500);
/// How often this node re-sends its open proposals and its votes of the
/// current epoch (members that were offline when they were first sent
/// could not vote otherwise; receivers ignore copies they have).
const REPUBLISH_EVERY_TICKS: u64 = 60;

/// What the node loop drives; every part is a cheap handle.
#[derive(Clone)]
pub struct NodeLoop {
    pub net: Network,
    pub mesh: MeshLink,
    pub peers: Peers,
    pub stats: Arc<Stats>,
    pub due: Arc<Due>,
    pub gossip: Gossip,
    pub rpc: Rpc,
    pub moots: MootHost,
}

impl NodeLoop {
    fn view(&self) -> Arc<MeshState> {
        self.mesh.view()
    }

    /// The node's loop: network events, state changes, periodic work.
    pub async fn run(self, mut events: mpsc::Receiver<Event>, mut stop: watch::Receiver<bool>) {
        let mut view_rx = self.mesh.worker.watch();
        let mut last_tip = None;
        self.on_view(&mut last_tip).await;
        let (resumer, mut stopped) = (self.moots.clone(), stop.clone());
        tokio::spawn(async move {
            // Ends at shutdown too: it holds worker handles the shutdown
            // waits to see dropped.
            tokio::select! {
                _ = resumer.resume_after_start() => {}
                _ = stopped.wait_for(|s| *s) => {}
            }
        });
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
        self.stats.bump("epochs.seen");
        for topic in [mesh_topic(&roster.mesh_id), roots_topic(&roster.mesh_id)] {
            if let Err(e) = self.net.subscribe(&topic).await {
                tracing::warn!(error = %e, %topic, "cannot subscribe");
            }
        }
        let members: Vec<PeerId> = roster
            .members
            .iter()
            .filter_map(|m| PeerId::from_bytes(&m.peer_id).ok())
            .collect();
        let me = self.net.local_peer_id();
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
            .net
            .set_peers(members.clone(), blocked.into_iter().collect())
            .await;
        let member_bytes: BTreeSet<Vec<u8>> =
            roster.members.iter().map(|m| m.peer_id.clone()).collect();
        if let Err(e) = self.peers.lock().retain_members(&member_bytes) {
            tracing::warn!(error = %e, "the node database kept announcements of former members");
        }
        tracing::info!(
            epoch = roster.epoch,
            members = roster.members.len(),
            member = view.is_member(),
            "mesh epoch"
        );
        self.due.announce();
        self.due.redial();
    }

    async fn periodic(&self, n: u64) {
        if n.is_multiple_of(2) {
            self.mesh.flush().await;
        }
        if n.is_multiple_of(ANNOUNCE_EVERY_TICKS) {
            self.due.announce();
        }
        if n.is_multiple_of(60) {
            self.due.sync();
        }
        if n.is_multiple_of(4)
            && let Ok(c) = self.net.admission_counts().await
        {
            for (name, value) in [
                ("admission.refused.handshakes", c.refused_pending),
                ("admission.refused.full", c.refused_full),
                ("admission.closed.evicted", c.evicted),
                ("admission.closed.join-window", c.window_closed),
                ("admission.closed.membership-changed", c.membership_changed),
            ] {
                self.stats.set(name, value);
            }
            if let Ok(report) = self.net.connectivity().await {
                for (name, value) in report.counts {
                    self.stats.set(name, value);
                }
            }
        }
        let view = self.view();
        if !view.is_member() {
            return;
        }
        let connected_members = self.peers.lock().connected_members(&view);
        if self.due.announce_is_due() {
            let publish = !connected_members.is_empty();
            match self.gossip.announce(&view, publish).await {
                Ok(()) => self.due.announced(),
                Err(e) => tracing::debug!(error = %e, "announcement kept for a retry"),
            }
        }
        if (self.due.sync_is_due() || !view.synced) && n.is_multiple_of(4) {
            let alone = view.roster().is_some_and(|r| r.members.len() <= 1);
            if !connected_members.is_empty() {
                self.due.synced();
                let first = self.due.take_sync_from();
                let targets = rpc::sync::targets(&connected_members, &first, &mut rand::rng());
                rpc::sync::ask(&self.rpc, targets).await;
            } else if alone {
                self.due.synced();
            }
        }
        if n.is_multiple_of(10)
            && let Err(e) = self
                .mesh
                .step(|s, id| s.tick(id, crate::now_ms(), &mut rand::rng()))
                .await
        {
            tracing::warn!(error = %e, "periodic mesh work (key erasure, expiry, backup commits) failed");
        }
        if self.due.take_republish() || n.is_multiple_of(REPUBLISH_EVERY_TICKS) {
            self.republish_open(&view).await;
        }
        if self.due.take_redial() || n % 6 == 1 {
            self.redial(&view).await;
        }
    }

    /// Re-sends this node's open proposals, its votes (with the releases
    /// they carry) and its withdrawals of the current epoch, sealed as when
    /// first sent (`MeshState::republish` says which).
    async fn republish_open(&self, view: &MeshState) {
        let Some(mesh) = &view.mesh else {
            return;
        };
        if !view.is_member() || view.roster().is_some_and(|r| r.members.len() <= 1) {
            return;
        }
        let topic = mesh_topic(&mesh.mesh_id);
        for bytes in view.republish() {
            let sealed = view.seal_mesh_message(&topic, &bytes, &mut rand::rng());
            if let Ok(sealed) = sealed
                && self
                    .net
                    .publish(&topic, sealed.encode_to_vec())
                    .await
                    .is_ok()
            {
                self.stats.bump("gossip.republished");
            }
        }
    }

    /// Dials members that are not connected, at their announced addresses;
    /// a member announced behind a relay also through every relay this
    /// node holds a reservation on ([`circuits_through`]: the relay its
    /// announcement names may be gone).
    async fn redial(&self, view: &MeshState) {
        let Some(roster) = view.roster() else {
            return;
        };
        let me = self.net.local_peer_id();
        let own_relayed = self.net.addresses().relayed;
        let targets: Vec<(PeerId, Vec<Multiaddr>)> = {
            let peers = self.peers.lock();
            roster
                .members
                .iter()
                .filter_map(|m| PeerId::from_bytes(&m.peer_id).ok())
                .filter(|p| *p != me && !peers.connected.contains(p))
                .filter_map(|p| {
                    let mut addrs = peers.addresses.get(&p)?.clone();
                    if addrs.iter().any(is_relayed) {
                        for circuit in circuits_through(&own_relayed, p) {
                            if !addrs.contains(&circuit) {
                                addrs.push(circuit);
                            }
                        }
                    }
                    Some((p, addrs))
                })
                .collect()
        };
        for (peer, addrs) in targets {
            for addr in addrs {
                let _ = self.net.dial(crate::net::with_peer_id(&addr, peer)).await;
            }
        }
    }

    async fn on_event(&self, event: Event) {
        let now = crate::now_ms();
        match event {
            Event::Listening(addr) => tracing::debug!(%addr, "listening"),
            // Peers learn the new addresses (a relayed one, say) from the
            // next announcement.
            Event::AddressesChanged => {
                self.due.announce();
                self.publish_addresses(now);
            }
            Event::ReachabilityChanged { reachability, why } => {
                self.mesh.worker.events().publish(dto::ReachabilityEvent {
                    event: "reachability_changed".into(),
                    at: now,
                    changed: "reachability".into(),
                    reachability: Some(reachability.into()),
                    detail: format!("this node is judged {reachability}: {why}"),
                    why: Some(why),
                    listen: Vec::new(),
                    relayed: Vec::new(),
                });
            }
            Event::PeerConnected(peer) => self.on_connected(peer, now),
            Event::PeerDisconnected(peer) => self.on_disconnected(peer, now),
            Event::Gossip {
                id,
                source,
                author,
                topic,
                data,
            } => {
                let verdict = self.gossip.on_message(author, &topic, data).await;
                let _ = self.net.report(id, source, verdict).await;
            }
            Event::Request {
                id,
                peer,
                protocol,
                data,
            } => self.on_request(id, peer, protocol, data).await,
            Event::Dropped {
                peer,
                reason,
                detail,
            } => {
                tracing::debug!(?peer, %reason, %detail, "dropped");
                self.stats.bump(&format!("dropped.{reason}"));
            }
        }
    }

    /// The addresses this node is reachable at changed: on the event stream.
    fn publish_addresses(&self, now: i64) {
        let now_at = self.net.addresses();
        let text = |l: &[Multiaddr]| l.iter().map(|a| a.to_string()).collect();
        let (listen, relayed): (Vec<String>, Vec<String>) =
            (text(&now_at.listen), text(&now_at.relayed));
        self.mesh.worker.events().publish(dto::ReachabilityEvent {
            event: "reachability_changed".into(),
            at: now,
            changed: "addresses".into(),
            reachability: None,
            why: None,
            detail: format!(
                "reachable at {} listen and {} relayed addresses",
                listen.len(),
                relayed.len()
            ),
            listen,
            relayed,
        });
    }

    fn on_connected(&self, peer: PeerId, now: i64) {
        let was_online = self.peers.lock().connected.contains(&peer);
        self.peers.lock().connected(peer, now);
        let view = self.view();
        if !was_online {
            self.mesh
                .worker
                .events()
                .member_seen(&view, peer, true, now);
        }
        if view
            .roster()
            .is_some_and(|r| r.member(&peer.to_bytes()).is_some())
        {
            // A member (re)appeared: it may have missed our roots,
            // commits, proposals and votes.
            self.due.announce();
            self.due.sync_from(peer);
            self.due.republish();
            // Moots paused because this member's node did not
            // answer go on, once its roots and commits are in.
            let moots = self.moots.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(2)).await;
                moots.resume_of(peer).await;
            });
        }
    }

    fn on_disconnected(&self, peer: PeerId, now: i64) {
        let view = self.view();
        let member = super::rpc::is_member(&view, peer);
        self.peers.lock().disconnected(peer, now, member);
        self.mesh
            .worker
            .events()
            .member_seen(&view, peer, false, now);
        // A member's connection closes when its standing changed
        // (a new member's first connection was a stranger's, with
        // no gossip on it): redial on the next tick, not the next
        // periodic round, so it votes and hears votes at once.
        if member {
            self.due.redial();
        }
    }

    /// A peer's request: admitted under its limits and answered on its own
    /// task, or refused at once with the reason.
    async fn on_request(
        &self,
        id: u64,
        peer: PeerId,
        protocol: crate::net::Protocol,
        data: Vec<u8>,
    ) {
        let permit = match self.rpc.limits.admit(peer, protocol) {
            Ok(permit) => permit,
            Err(refusal) => {
                self.stats.bump(&format!(
                    "requests.refused.{}.{}",
                    protocol.short(),
                    refusal.reason()
                ));
                let answer = rpc::refusal(protocol, &refusal.to_string());
                let _ = self.net.respond(id, answer).await;
                return;
            }
        };
        let rpc = self.rpc.clone();
        let net = self.net.clone();
        tokio::spawn(async move {
            let answer = rpc::answer(&rpc, peer, protocol, &data).await;
            let _ = net.respond(id, answer).await;
            drop(permit);
        });
    }
}
