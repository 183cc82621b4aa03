//! `/grove/join/1`, both sides. The inviter's side takes a joiner's signed
//! request to the mesh worker (the add proposal, or a welcome at once) and
//! answers its polls; the joiner's side sends the request to the inviter
//! named in the invite and, while the members vote, polls in the background.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use libp2p::{Multiaddr, PeerId};
use prost::Message;

use crate::api::{ApiError, ErrorKind, dto};
use crate::daemon::outbox::MeshLink;
use crate::daemon::peers::Peers;
use crate::mesh::invite;
use crate::mesh::state::{Dest, InviteStatus, MeshState, parse_join_request};
use crate::net::{Network, Protocol};
use crate::wire::mesh as wire;
use crate::wire::mesh::mesh_message::Kind;
use crate::wire::node as node_wire;
pub(super) use node_wire::join_answer::Kind as Answer;

/// The relay of a relayed address (`…/p2p/RELAY/p2p-circuit/…`): its id
/// and its own address.
fn relay_of(addr: &Multiaddr) -> Option<(PeerId, Multiaddr)> {
    use libp2p::multiaddr::Protocol as P;
    let mut relay_addr = Multiaddr::empty();
    let mut relay = None;
    for p in addr.iter() {
        match p {
            P::P2pCircuit => return relay.map(|r| (r, relay_addr)),
            P::P2p(peer) => {
                relay = Some(peer);
                relay_addr.push(p);
            }
            other => relay_addr.push(other),
        }
    }
    None
}

/// How long a joiner waits for a connection to its inviter.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Polling of a pending join: first and longest wait between polls.
const POLL_FIRST: Duration = Duration::from_millis(500);
const POLL_MAX: Duration = Duration::from_secs(10);

pub(super) fn refused(reason: impl Into<String>) -> node_wire::JoinAnswer {
    node_wire::JoinAnswer {
        kind: Some(Answer::Refused(reason.into())),
    }
}

fn pending(ticket: Vec<u8>) -> node_wire::JoinAnswer {
    node_wire::JoinAnswer {
        kind: Some(Answer::Pending(ticket)),
    }
}

fn welcome(w: wire::Welcome) -> node_wire::JoinAnswer {
    node_wire::JoinAnswer {
        kind: Some(Answer::Welcome(w)),
    }
}

/// The open add proposal for `peer`, if any.
fn pending_ticket(mesh: &MeshLink, peer: &[u8]) -> Option<[u8; 32]> {
    mesh.view()
        .proposals
        .values()
        .find(|p| p.joiner.as_deref() == Some(peer))
        .map(|p| p.hash)
}

/// The inviter's answer to a join call: a welcome, a ticket to poll with
/// while the members vote, or the reason it is refused.
pub async fn answer(mesh: &MeshLink, peer: PeerId, data: &[u8]) -> node_wire::JoinAnswer {
    let Ok(call) = node_wire::JoinCall::decode(data) else {
        return refused("malformed join call");
    };
    let peer_bytes = peer.to_bytes();
    match call.kind {
        Some(node_wire::join_call::Kind::Ticket(ticket)) => {
            if let Some(t) = pending_ticket(mesh, &peer_bytes)
                && t.as_slice() == ticket.as_slice()
            {
                return pending(ticket);
            }
            let view = mesh.view();
            let welcomed = view
                .roster()
                .and_then(|r| r.member(&peer_bytes))
                .and_then(|m| view.welcome_for(m));
            match welcomed {
                Some(w) => welcome(w),
                None => refused(
                    "the add was not voted through (expired, voted down or overtaken by another change); ask for a new invite",
                ),
            }
        }
        Some(node_wire::join_call::Kind::Request(signed)) => {
            request(mesh, &peer_bytes, signed).await
        }
        None => refused("empty join call"),
    }
}

/// Cheap checks of a join request, before any signature work or the mesh
/// worker: it must carry an invite this node issued, byte for byte, that
/// is neither revoked nor expired. (A used invite goes on to the full
/// check, which answers a joiner already added with its welcome.) A flood
/// of self-signed invites stops here.
fn precheck(view: &MeshState, signed: &wire::Signed, now_ms: i64) -> Result<(), &'static str> {
    let request =
        wire::JoinRequest::decode(signed.body.as_slice()).map_err(|_| "malformed join request")?;
    let presented = request
        .invite
        .as_ref()
        .ok_or("the join request carries no invite")?;
    let invite = wire::Invite::decode(presented.body.as_slice()).map_err(|_| "malformed invite")?;
    let id: [u8; 16] = invite
        .invite_id
        .as_slice()
        .try_into()
        .map_err(|_| "malformed invite id")?;
    let issued = view
        .invites
        .get(&id)
        .ok_or("this node did not issue that invite (wrong mesh or wrong inviter)")?;
    if issued.signed != presented.encode_to_vec() {
        return Err("the invite differs from the one this node issued");
    }
    match issued.status {
        InviteStatus::Revoked => Err("the invite was revoked"),
        InviteStatus::Void => Err("the invite is void: its inviter is no longer a member"),
        _ if issued.expires_ms <= now_ms => Err("the invite has expired"),
        _ => Ok(()),
    }
}

async fn request(
    mesh: &MeshLink,
    peer_bytes: &[u8],
    signed: wire::Signed,
) -> node_wire::JoinAnswer {
    if let Err(reason) = precheck(&mesh.view(), &signed, crate::now_ms()) {
        return refused(reason);
    }
    let check = match parse_join_request(&signed) {
        Ok((check, _)) => check,
        Err(e) => return refused(e.to_string()),
    };
    if check.member.peer_id != peer_bytes {
        return refused("the join request is signed by another node than the caller");
    }
    if let Some(t) = pending_ticket(mesh, peer_bytes) {
        return pending(t.to_vec());
    }
    let message = wire::MeshMessage {
        kind: Some(Kind::JoinRequest(signed)),
    }
    .encode_to_vec();
    let t = match mesh.receive(message).await {
        Ok(t) => t,
        Err(e) => return refused(e.to_string()),
    };
    let welcomed = t.outbound.iter().find_map(|o| match &o.to {
        Dest::Peer(p) if p.as_slice() == peer_bytes => {
            match wire::MeshMessage::decode(o.message.as_slice()).ok()?.kind? {
                Kind::Welcome(w) => Some(w),
                _ => None,
            }
        }
        _ => None,
    });
    if let Some(w) = welcomed {
        return welcome(w);
    }
    match pending_ticket(mesh, peer_bytes) {
        Some(t) => pending(t.to_vec()),
        None => refused("the join request was not taken up"),
    }
}

/// The joiner's side: what joining needs.
#[derive(Clone)]
pub struct Joiner {
    pub mesh: MeshLink,
    pub net: Network,
    pub peers: Peers,
    /// What this node's join poller waits for right now (None: no poller
    /// runs in this process), shown by `mesh status`.
    pub progress: Arc<Mutex<Option<String>>>,
}

enum Outcome {
    Joined,
    Pending(Vec<u8>),
}

/// An invite as a join reads it: signed, checked, its inviter and the
/// addresses to reach it at.
struct ReadInvite {
    signed: wire::Signed,
    invite: invite::Invite,
    inviter: PeerId,
    addrs: Vec<Multiaddr>,
}

impl ReadInvite {
    fn from_text(text: &str) -> Result<ReadInvite, ApiError> {
        let bad = |e: &dyn std::fmt::Display| ApiError::bad_request(e.to_string());
        let signed = invite::from_text(text).map_err(|e| bad(&e))?;
        let invite = invite::verify(&signed).map_err(|e| bad(&e))?;
        let inviter = PeerId::from_bytes(&invite.inviter)
            .map_err(|_| ApiError::bad_request("the invite names an invalid inviter"))?;
        let addrs: Vec<Multiaddr> = invite
            .bootstrap
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect();
        if addrs.is_empty() {
            return Err(ApiError::bad_request(
                "the invite carries no address to reach its inviter",
            ));
        }
        Ok(ReadInvite {
            signed,
            invite,
            inviter,
            addrs,
        })
    }
}

/// The signed join request a `request_join` step queued for the inviter.
fn join_request_of(t: &crate::mesh::state::Transition) -> Result<wire::Signed, ApiError> {
    t.outbound
        .iter()
        .find_map(
            |o| match (&o.to, wire::MeshMessage::decode(o.message.as_slice())) {
                (
                    Dest::Peer(_),
                    Ok(wire::MeshMessage {
                        kind: Some(Kind::JoinRequest(s)),
                    }),
                ) => Some(s),
                _ => None,
            },
        )
        .ok_or_else(|| ApiError::internal("no join request was made"))
}

impl Joiner {
    /// Joins by invite: asks the inviter, then either is welcomed at once
    /// or keeps polling in the background while the members vote.
    pub async fn join(
        &self,
        invite_text: String,
        name: String,
    ) -> Result<dto::JoinResult, ApiError> {
        let ReadInvite {
            signed: signed_invite,
            invite: inv,
            inviter,
            addrs,
        } = ReadInvite::from_text(&invite_text)?;
        let text = invite_text.clone();
        let t = self
            .mesh
            .step(move |s, id| s.request_join(id, &text, &name, crate::now_ms()))
            .await?;
        let request = join_request_of(&t)?;
        if let Err(e) = self.peers.lock().remember_addresses(inviter, addrs.clone()) {
            tracing::warn!(error = %e, "node.db: the inviter's addresses are not stored");
        }
        let asked = async {
            self.reach(inviter, &addrs, &signed_invite)
                .await
                .map_err(|e| ApiError::unavailable(format!("cannot reach the inviter: {e}")))?;
            let call = node_wire::JoinCall {
                kind: Some(node_wire::join_call::Kind::Request(request)),
            };
            self.call(inviter, call).await
        };
        let mesh_id = hex::encode(inv.mesh_id);
        let outcome = match asked.await {
            Ok(o) => o,
            Err(e) => {
                // Nothing waits on a join the inviter never took up: forget
                // it, so `mesh status` shows no false "pending".
                self.forget("the join failed").await;
                return Err(e);
            }
        };
        match outcome {
            Outcome::Joined => Ok(dto::JoinResult {
                state: "joined".into(),
                mesh_id,
                ticket: None,
                epoch: Some(self.mesh.view().epoch()),
            }),
            Outcome::Pending(ticket) => {
                let joiner = self.clone();
                let poll_ticket = ticket.clone();
                self.set_progress(Some(format!(
                    "the members' vote on this node's add (proposal {}); polling the inviter",
                    hex::encode(&ticket)
                )));
                tokio::spawn(async move {
                    joiner
                        .poll(inviter, addrs, &signed_invite, poll_ticket)
                        .await
                });
                Ok(dto::JoinResult {
                    state: "pending".into(),
                    mesh_id,
                    ticket: Some(hex::encode(ticket)),
                    epoch: None,
                })
            }
        }
    }

    /// Connects to the inviter at the invite's addresses. Through a relay
    /// (an address `…/p2p/RELAY/p2p-circuit/…`), the invite is shown to the
    /// relay first for a pass; a relay that refuses is named in the error
    /// when no address works.
    async fn reach(
        &self,
        inviter: PeerId,
        addrs: &[Multiaddr],
        invite: &wire::Signed,
    ) -> Result<(), crate::net::NetError> {
        let mut refusals = Vec::new();
        for (relay, relay_addr) in addrs.iter().filter_map(relay_of) {
            let passed = match self
                .net
                .connect(relay, &[relay_addr], CONNECT_TIMEOUT)
                .await
            {
                Ok(()) => super::relay_pass::ask(&self.net, relay, invite)
                    .await
                    .map(|_| ()),
                Err(e) => Err(e),
            };
            if let Err(e) = passed {
                tracing::info!(%relay, error = %e, "no pass at the relay");
                refusals.push(e.to_string());
            }
        }
        match self.connect_retrying(inviter, addrs).await {
            Ok(()) => Ok(()),
            Err(e) if refusals.is_empty() => Err(e),
            Err(e) => Err(crate::net::NetError::Dial {
                addr: inviter.to_string(),
                reason: format!("{e}; through relays: {}", refusals.join("; ")),
            }),
        }
    }

    /// Connects to the inviter, trying again a few times when a dial
    /// fails fast: under a flood the inviter's admission may refuse a
    /// handshake from a crowded address, and a moment later it has room.
    async fn connect_retrying(
        &self,
        inviter: PeerId,
        addrs: &[Multiaddr],
    ) -> Result<(), crate::net::NetError> {
        let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
        let mut wait = Duration::from_millis(250);
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.net.connect(inviter, addrs, left).await {
                Ok(()) => return Ok(()),
                Err(e) if tokio::time::Instant::now() + wait >= deadline => return Err(e),
                Err(e) => {
                    tracing::debug!(error = %e, "the inviter did not take the connection; trying again");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    fn set_progress(&self, what: Option<String>) {
        *self.progress.lock().unwrap_or_else(|e| e.into_inner()) = what;
    }

    /// What a pending join waits for, in words.
    pub fn waiting_for(&self) -> String {
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| {
                "nothing: the node restarted since it asked, so nothing polls the inviter; \
                 run `grove mesh join` again with the same invite (the inviter answers a \
                 repeated request the same way)"
                    .into()
            })
    }

    /// Drops the pending join (when there is one and no mesh).
    async fn forget(&self, why: &str) {
        self.set_progress(None);
        let view = self.mesh.view();
        if view.mesh.is_some() || view.pending_join.is_none() {
            return;
        }
        match self.mesh.step(|s, _| s.cancel_join()).await {
            Ok(_) => tracing::info!("{why}; the pending join is forgotten"),
            Err(e) => tracing::warn!(error = %e, "cannot forget the pending join"),
        }
    }

    async fn call(&self, inviter: PeerId, call: node_wire::JoinCall) -> Result<Outcome, ApiError> {
        let answer = self
            .net
            .request(inviter, Protocol::Join, call.encode_to_vec())
            .await
            .map_err(|e| ApiError::unavailable(format!("join request: {e}")))?;
        let answer = node_wire::JoinAnswer::decode(answer.as_slice())
            .map_err(|_| ApiError::unavailable("the inviter sent a malformed answer"))?;
        match answer.kind {
            Some(Answer::Welcome(w)) => {
                let message = wire::MeshMessage {
                    kind: Some(Kind::Welcome(w)),
                }
                .encode_to_vec();
                self.mesh.receive(message).await?;
                Ok(Outcome::Joined)
            }
            Some(Answer::Pending(ticket)) => Ok(Outcome::Pending(ticket)),
            Some(Answer::Refused(reason)) => Err(ApiError::conflict(format!(
                "the inviter refused: {}",
                crate::mesh::names::Escaped(&reason)
            ))),
            None => Err(ApiError::unavailable("the inviter sent an empty answer")),
        }
    }

    /// Polls the inviter until the add is voted through (welcome), refused,
    /// or this node joined some other way. The wait doubles up to
    /// `POLL_MAX`; an unreachable inviter is retried the same way.
    async fn poll(
        &self,
        inviter: PeerId,
        addrs: Vec<Multiaddr>,
        invite: &wire::Signed,
        ticket: Vec<u8>,
    ) {
        let mut wait = POLL_FIRST;
        let vote = format!(
            "the members' vote on this node's add (proposal {})",
            hex::encode(&ticket)
        );
        // The add proposal expires within the proposal lifetime (this
        // node's setting; a week at most): polling longer is pointless.
        let give_up = tokio::time::Instant::now()
            + Duration::from_millis(
                u64::try_from(self.mesh.view().timing.proposal_ttl_ms).unwrap_or(0),
            )
            + POLL_MAX;
        loop {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(POLL_MAX);
            let view = self.mesh.view();
            if view.mesh.is_some() || view.pending_join.is_none() {
                self.set_progress(None);
                return;
            }
            if tokio::time::Instant::now() >= give_up {
                self.forget("the add was not decided within the proposal lifetime")
                    .await;
                return;
            }
            if let Err(e) = self.reach(inviter, &addrs, invite).await {
                self.set_progress(Some(format!(
                    "{vote}; the inviter cannot be reached ({e}), next try in {} s",
                    wait.as_secs()
                )));
                continue;
            }
            let call = node_wire::JoinCall {
                kind: Some(node_wire::join_call::Kind::Ticket(ticket.clone())),
            };
            match self.call(inviter, call).await {
                Ok(Outcome::Joined) => {
                    self.set_progress(None);
                    tracing::info!("joined the mesh");
                    return;
                }
                Ok(Outcome::Pending(_)) => self.set_progress(Some(format!(
                    "{vote}; polling the inviter, next in {} s",
                    wait.as_secs()
                ))),
                Err(e) if e.kind == ErrorKind::Conflict => {
                    tracing::warn!(error = %e, "join refused");
                    self.forget("the inviter refused the join").await;
                    return;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "join poll failed; retrying");
                    self.set_progress(Some(format!(
                        "{vote}; the last poll failed ({e}), next try in {} s",
                        wait.as_secs()
                    )));
                }
            }
        }
    }
}
