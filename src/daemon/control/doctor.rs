//! `GET /v1/node/doctor`: how this node is reached and reaches its members
//! (like `tailscale netcheck`): reachability and why, its addresses, its
//! relay slots, and per member the link in use and its round-trip time.

use std::time::Instant;

use axum::Json;
use axum::extract::State;
use libp2p::PeerId;

use super::peers::NodeView;
use crate::api::{ApiError, dto};
use crate::net::{ConnectivityReport, LinkReport};

/// A link as the doctor and `peers` word it ([`dto::LinkKind::path`]).
pub fn path_of(link: &LinkReport) -> String {
    dto::LinkKind::path(
        link.relayed,
        link.punched,
        link.why_relayed.as_ref().map(ToString::to_string),
    )
}

/// A moment `ago` before now, in ms since the epoch.
fn at(then: Instant, now: Instant, now_ms: i64) -> i64 {
    now_ms - i64::try_from(now.duration_since(then).as_millis()).unwrap_or(i64::MAX)
}

fn strings<T: ToString>(items: &[T]) -> Vec<String> {
    items.iter().map(|a| a.to_string()).collect()
}

pub fn report(node: &NodeView, net: &ConnectivityReport) -> dto::Doctor {
    let (now, now_ms) = (Instant::now(), crate::now_ms());
    let view = node.mesh.view();
    let members = view
        .roster()
        .map(|r| {
            r.members
                .iter()
                .filter_map(|m| Some((PeerId::from_bytes(&m.peer_id).ok()?, m.name.clone())))
                .filter(|(p, _)| *p != node.me)
                .map(|(peer, name)| {
                    let link = net.links.get(&peer);
                    dto::DoctorMember {
                        peer_id: peer.to_string(),
                        name,
                        connected: link.is_some(),
                        link: link.map(|l| dto::LinkKind::of(l.relayed)),
                        path: link.map(path_of),
                        punched: link.is_some_and(|l| l.punched),
                        relayed_why: link
                            .and_then(|l| l.why_relayed.as_ref())
                            .map(|w| w.to_string()),
                        address: link.map(|l| l.address.to_string()),
                        rtt_ms: link.and_then(|l| l.rtt).map(|d| d.as_millis() as u64),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let reservations = net
        .relays
        .iter()
        .map(|r| dto::DoctorReservation {
            relay: r.relay.to_string(),
            address: r.address.to_string(),
            state: if r.reserved { "reserved" } else { "pending" }.into(),
            since_ms: at(r.since, now, now_ms),
            renewed_ms: r.renewed.map(|t| at(t, now, now_ms)),
            relayed: strings(&r.relayed),
        })
        .collect();
    dto::Doctor {
        reachability: net.judgement.reachability.as_str().into(),
        why: net.judgement.why.clone(),
        mapping: net.mapping.as_str().into(),
        listen: strings(&net.listen),
        observed: strings(&net.observed),
        external: strings(&net.external),
        relayed: net
            .relays
            .iter()
            .filter(|r| r.reserved)
            .flat_map(|r| strings(&r.relayed))
            .collect(),
        advertised: strings(&node.advertised.current()),
        reservations,
        members,
        counters: net
            .counts
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
    }
}

pub async fn doctor(State(node): State<NodeView>) -> Result<Json<dto::Doctor>, ApiError> {
    let net = node
        .net
        .connectivity()
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    Ok(Json(report(&node, &net)))
}
