//! What the node knows and counts: its identity, its peers, every member's
//! announced roots, its counters, and the sealed gossip it received last.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use libp2p::PeerId;

use crate::api::dto;
use crate::daemon::gossip::RecentGossip;
use crate::daemon::mesh::MeshWorker;
use crate::daemon::peers::Peers;
use crate::daemon::stats::Stats;
use crate::identity::peer_id_text;
use crate::wire::node as node_wire;

/// What these endpoints read; cheap to clone.
#[derive(Clone)]
pub struct NodeView {
    pub me: PeerId,
    pub mesh: MeshWorker,
    pub peers: Peers,
    pub stats: Arc<Stats>,
    pub recent: Arc<RecentGossip>,
    pub started_ms: i64,
    pub net: crate::net::Network,
    pub advertised: crate::daemon::advertised::Advertised,
}

pub async fn identity(State(node): State<NodeView>) -> Json<dto::IdentityView> {
    Json(dto::IdentityView::from(&node.mesh.view().me))
}

pub async fn peers(State(node): State<NodeView>) -> Json<dto::PeerList> {
    // Without the network's view (it is stopping) the links are unknown.
    let links = node
        .net
        .connectivity()
        .await
        .map(|c| c.links)
        .unwrap_or_default();
    let view = node.mesh.view();
    let roster = view.roster();
    let peers = node.peers.lock();
    let mut ids: std::collections::BTreeSet<PeerId> = peers.connected.iter().copied().collect();
    if let Some(r) = roster {
        ids.extend(
            r.members
                .iter()
                .filter_map(|m| PeerId::from_bytes(&m.peer_id).ok()),
        );
    }
    ids.remove(&node.me);
    let list = ids
        .into_iter()
        .map(|p| {
            let member = roster.and_then(|r| r.member(&p.to_bytes()));
            dto::PeerView {
                peer_id: p.to_string(),
                name: member.map(|m| m.name.clone()),
                member: member.is_some(),
                connected: peers.connected.contains(&p),
                last_seen: peers.last_seen.get(&p).copied(),
                addresses: peers
                    .addresses
                    .get(&p)
                    .map(|a| a.iter().map(|x| x.to_string()).collect())
                    .unwrap_or_default(),
                link: links.get(&p).map(|l| dto::LinkKind::of(l.relayed)),
                rtt_ms: links
                    .get(&p)
                    .and_then(|l| l.rtt)
                    .map(|d| d.as_millis() as u64),
                admitted: links.get(&p).is_some_and(|l| l.admitted),
                path: links.get(&p).map(|l| {
                    dto::LinkKind::path(
                        l.relayed,
                        l.punched,
                        l.why_relayed.as_ref().map(ToString::to_string),
                    )
                }),
            }
        })
        .collect();
    Json(dto::PeerList { peers: list })
}

fn announced_shard(s: &node_wire::ShardRoot) -> dto::AnnouncedShard {
    dto::AnnouncedShard {
        name: s.name.clone(),
        root: (!s.root.is_empty()).then(|| hex::encode(&s.root)),
        books: s
            .books
            .iter()
            .map(|b| dto::AnnouncedBook {
                key: b.key.clone(),
                title: (!b.title.is_empty()).then(|| b.title.clone()),
                author: (!b.author.is_empty()).then(|| b.author.clone()),
                root: hex::encode(&b.root),
                count: b.count,
                version: b.version,
            })
            .collect(),
    }
}

pub async fn roots(State(node): State<NodeView>) -> Json<dto::RootsView> {
    let peers = node.peers.lock();
    let view = node.mesh.view();
    let mut roots: Vec<dto::MemberRoots> = peers
        .own
        .iter()
        .chain(peers.announcements.values())
        .filter(|k| {
            view.roster()
                .is_some_and(|r| r.member(&k.announcement.peer_id).is_some())
        })
        .map(|k| {
            let a = &k.announcement;
            dto::MemberRoots {
                peer_id: peer_id_text(&a.peer_id),
                name: a.name.clone(),
                seq: a.seq,
                time: a.time_ms,
                received: k.received_ms,
                addresses: a.addresses.clone(),
                shards: a.shards.iter().map(announced_shard).collect(),
            }
        })
        .collect();
    roots.sort_by(|a, b| a.name.cmp(&b.name).then(a.peer_id.cmp(&b.peer_id)));
    Json(dto::RootsView { roots })
}

pub async fn stats(State(node): State<NodeView>) -> Json<dto::NodeStats> {
    let view = node.mesh.view();
    Json(dto::NodeStats {
        peer_id: node.me.to_string(),
        uptime_ms: crate::now_ms() - node.started_ms,
        epoch: view.epoch(),
        epochs_seen: node.stats.get("epochs.seen"),
        members: view.roster().map_or(0, |r| r.members.len()),
        peers_connected: node.peers.lock().connected.len(),
        counters: node.stats.snapshot(),
    })
}

pub async fn gossip(State(node): State<NodeView>) -> Json<dto::RecentGossip> {
    Json(dto::RecentGossip {
        messages: node
            .recent
            .list()
            .into_iter()
            .map(|(topic, bytes)| dto::SealedGossip {
                topic,
                sealed: hex::encode(bytes),
            })
            .collect(),
    })
}
