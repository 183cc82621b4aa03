//! The operator's mesh operations behind the control socket: init, invite,
//! join (and its polling), status, propose, vote, leave, peers, roots,
//! stats, and the mesh-wide search. Each returns a control-API type or an
//! [`ApiError`] whose message is what the CLI prints.

use std::time::Duration;

use libp2p::{Multiaddr, PeerId};
use prost::Message;

use super::mesh_actor::ActorError;
use super::node::Node;
use crate::api::books::{ApiError, BookApi, ErrorKind, SearchRequest};
use crate::api::dto;
use crate::identity::peer_id_text;
use crate::mesh::MeshError;
use crate::mesh::invite;
use crate::mesh::roster::{Change, QuorumRule};
use crate::mesh::state::{Dest, MeshState, ProposalChange};
use crate::wire::mesh as wire;
use crate::wire::node as node_wire;

/// How long a joiner waits for a connection to its inviter.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Polling of a pending join: first and longest wait between polls.
const POLL_FIRST: Duration = Duration::from_millis(500);
const POLL_MAX: Duration = Duration::from_secs(10);

impl From<ActorError> for ApiError {
    fn from(e: ActorError) -> ApiError {
        let kind = match &e {
            ActorError::Refused(MeshError::NoMesh) => ErrorKind::NotFound,
            ActorError::Refused(MeshError::UnknownProposal(_))
            | ActorError::Refused(MeshError::UnknownInvite(_)) => ErrorKind::NotFound,
            ActorError::Refused(_) => ErrorKind::Conflict,
            ActorError::Store(_) => ErrorKind::Internal,
            ActorError::Stopped => ErrorKind::Unavailable,
        };
        ApiError::new(kind, e.to_string())
    }
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorKind::BadRequest, message)
}

fn no_mesh() -> ApiError {
    ApiError::from(ActorError::Refused(MeshError::NoMesh))
}

/// Parses `N/D` (or a bare `N` meaning N/D with D = 100, a percentage).
pub fn parse_quorum(text: &str) -> Result<QuorumRule, ApiError> {
    let (n, d) = text.split_once('/').unwrap_or((text, "100"));
    let parse = |s: &str, what: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| bad(format!("quorum `{text}`: {what} is not a number")))
    };
    let rule = QuorumRule {
        numerator: parse(n, "numerator")?,
        denominator: parse(d, "denominator")?,
    };
    rule.validate().map_err(|e| bad(e.to_string()))
}

/// Resolves PEER: a full peer id, a unique prefix of one, or a member's name.
pub fn resolve_peer(view: &MeshState, text: &str) -> Result<Vec<u8>, ApiError> {
    let text = text.trim();
    if let Ok(p) = text.parse::<PeerId>() {
        return Ok(p.to_bytes());
    }
    let roster = view.roster().ok_or_else(no_mesh)?;
    let matches: Vec<&crate::mesh::roster::Member> = roster
        .members
        .iter()
        .filter(|m| m.name == text || peer_id_text(&m.peer_id).starts_with(text))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one.peer_id.clone()),
        [] => Err(ApiError::new(
            ErrorKind::NotFound,
            format!("no member is named `{text}` or has a peer id starting with it"),
        )),
        many => Err(bad(format!(
            "`{text}` matches {} members; give more of the peer id",
            many.len()
        ))),
    }
}

fn proposal_views(view: &MeshState) -> Vec<dto::ProposalView> {
    let needed = view.roster().map_or(0, |r| r.quorum_needed());
    view.proposals
        .values()
        .map(|p| {
            let votes: Vec<_> = view
                .votes
                .values()
                .filter(|v| v.proposal_hash == p.hash)
                .collect();
            let (kind, target) = match &p.change {
                Change::Add(m) => ("add", Some(peer_id_text(&m.peer_id))),
                Change::Kick(peer) => ("kick", Some(peer_id_text(peer))),
                Change::Rotate => ("rotate", None),
                Change::Quorum(q) => ("quorum", Some(format!("{}/{}", q.numerator, q.denominator))),
            };
            dto::ProposalView {
                id: hex::encode(p.hash),
                kind: kind.into(),
                target,
                proposer: peer_id_text(&p.proposer),
                votes: dto::Votes {
                    yes: votes.iter().filter(|v| v.yes).count(),
                    no: votes.iter().filter(|v| !v.yes).count(),
                    needed,
                    yes_by: votes
                        .iter()
                        .filter(|v| v.yes)
                        .map(|v| peer_id_text(&v.voter))
                        .collect(),
                },
                expires: p.expires_ms,
            }
        })
        .collect()
}

/// The hash of the proposal a transition stored.
fn stored_proposal(t: &crate::mesh::state::Transition) -> Option<[u8; 32]> {
    t.effects.iter().find_map(|e| match e {
        crate::mesh::state::Effect::PutProposal(p) => Some(p.hash),
        _ => None,
    })
}

impl Node {
    pub fn identity_view(&self) -> dto::IdentityView {
        let me = &self.view().me;
        dto::IdentityView {
            peer_id: peer_id_text(&me.peer_id),
            ed25519: hex::encode(me.ed25519),
            x25519: hex::encode(me.x25519),
        }
    }

    pub async fn mesh_init(
        &self,
        name: String,
        member_name: String,
        quorum: &str,
    ) -> Result<dto::MeshStatus, ApiError> {
        let rule = parse_quorum(quorum)?;
        self.step(move |s, id| {
            s.init_as(
                id,
                &name,
                &member_name,
                rule,
                crate::now_ms(),
                &mut rand::rng(),
            )
        })
        .await?;
        self.mesh_status()
    }

    pub fn mesh_status(&self) -> Result<dto::MeshStatus, ApiError> {
        let view = self.view();
        if view.mesh.is_none()
            && let Some(p) = &view.pending_join
        {
            return Err(ApiError::new(
                ErrorKind::NotFound,
                format!(
                    "waiting to join mesh {}: the members are voting on this node's add",
                    hex::encode(p.mesh_id)
                ),
            ));
        }
        let roster = view.roster().ok_or_else(no_mesh)?;
        let me = self.shared().net.local_peer_id();
        let now = crate::now_ms();
        let peers = self.peers();
        let members = roster
            .members
            .iter()
            .map(|m| {
                let peer = PeerId::from_bytes(&m.peer_id).ok();
                let is_me = peer == Some(me);
                dto::MemberView {
                    peer_id: peer_id_text(&m.peer_id),
                    name: m.name.clone(),
                    online: is_me || peer.is_some_and(|p| peers.connected.contains(&p)),
                    last_seen: if is_me {
                        Some(now)
                    } else {
                        peer.and_then(|p| peers.last_seen.get(&p).copied())
                    },
                    joined_epoch: m.joined_epoch,
                }
            })
            .collect();
        Ok(dto::MeshStatus {
            mesh_id: hex::encode(roster.mesh_id),
            name: roster.mesh_name.clone(),
            epoch: roster.epoch,
            roster_hash: hex::encode(view.tip),
            quorum: format!("{}/{}", roster.quorum.numerator, roster.quorum.denominator),
            peer_id: me.to_string(),
            member: view.is_member(),
            synced: view.synced,
            members,
            proposals: proposal_views(&view),
            evidence: view.evidence.len(),
        })
    }

    pub fn mesh_proposals(&self) -> Result<dto::ProposalList, ApiError> {
        let view = self.view();
        view.roster().ok_or_else(no_mesh)?;
        Ok(dto::ProposalList {
            proposals: proposal_views(&view),
        })
    }

    /// The addresses an invite tells a joiner to dial (with this node's id).
    fn bootstrap(&self) -> Vec<String> {
        let me = self.shared().net.local_peer_id();
        self.shared()
            .advertised
            .iter()
            .map(|a| crate::net::with_peer_id(a, me).to_string())
            .collect()
    }

    pub async fn mesh_invite(
        &self,
        ttl_secs: Option<u64>,
        note: String,
    ) -> Result<dto::InviteCreated, ApiError> {
        let bootstrap = self.bootstrap();
        if bootstrap.is_empty() {
            return Err(bad(
                "this node has no address to put in an invite: set net.external_addresses",
            ));
        }
        let ttl = ttl_secs.map(|t| i64::try_from(t.saturating_mul(1000)).unwrap_or(i64::MAX));
        let boot = bootstrap.clone();
        let t = self
            .step(move |s, id| {
                s.create_invite(id, boot, note, ttl, crate::now_ms(), &mut rand::rng())
            })
            .await?;
        let text = t.output.unwrap_or_default();
        let inv = invite::from_text(&text)
            .and_then(|s| invite::verify(&s))
            .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?;
        Ok(dto::InviteCreated {
            invite: text,
            id: hex::encode(inv.invite_id),
            expires: inv.expires_ms,
            bootstrap,
        })
    }

    pub async fn mesh_revoke(&self, id: &str) -> Result<dto::Revoked, ApiError> {
        let bytes = hex::decode(id.trim())
            .ok()
            .and_then(|b| <[u8; 16]>::try_from(b).ok())
            .ok_or_else(|| bad(format!("invite id `{id}`: expected 32 hex digits")))?;
        self.step(move |s, ident| s.revoke_invite(ident, bytes, crate::now_ms()))
            .await?;
        Ok(dto::Revoked {
            id: hex::encode(bytes),
        })
    }

    pub fn mesh_invites(&self) -> dto::InviteList {
        let now = crate::now_ms();
        dto::InviteList {
            invites: self
                .view()
                .invites
                .values()
                .map(|i| dto::InviteView {
                    id: hex::encode(i.id),
                    status: if i.status.as_str() == "open" && now >= i.expires_ms {
                        "expired".into()
                    } else {
                        i.status.as_str().into()
                    },
                    expires: i.expires_ms,
                    note: i.note.clone(),
                })
                .collect(),
        }
    }

    pub async fn mesh_propose(
        &self,
        kind: &str,
        target: Option<&str>,
    ) -> Result<dto::Proposed, ApiError> {
        let view = self.view();
        let change = match (kind, target) {
            ("kick", Some(peer)) => ProposalChange::Kick(resolve_peer(&view, peer)?),
            ("rotate", None) => ProposalChange::Rotate,
            ("quorum", Some(rule)) => ProposalChange::Quorum(parse_quorum(rule)?),
            ("kick", None) => return Err(bad("propose kick needs a PEER")),
            ("quorum", None) => return Err(bad("propose quorum needs a rule, e.g. 2/3")),
            ("rotate", Some(_)) => return Err(bad("propose rotate takes no argument")),
            (other, _) => {
                return Err(bad(format!(
                    "unknown proposal kind `{other}`: kick, rotate or quorum"
                )));
            }
        };
        self.propose(change, view.epoch()).await
    }

    pub async fn mesh_leave(&self) -> Result<dto::Proposed, ApiError> {
        let view = self.view();
        let me = view.me.peer_id.clone();
        self.propose(ProposalChange::Kick(me), view.epoch()).await
    }

    async fn propose(
        &self,
        change: ProposalChange,
        before: u64,
    ) -> Result<dto::Proposed, ApiError> {
        let t = self
            .step(move |s, id| s.propose(id, change, crate::now_ms(), &mut rand::rng()))
            .await?;
        let id = stored_proposal(&t).map(hex::encode).unwrap_or_default();
        let epoch = self.view().epoch();
        Ok(dto::Proposed {
            id,
            epoch,
            committed: epoch > before,
        })
    }

    pub async fn mesh_vote(&self, id: &str, choice: &str) -> Result<dto::Voted, ApiError> {
        let yes = match choice {
            "yes" | "y" => true,
            "no" | "n" => false,
            other => return Err(bad(format!("vote `{other}`: say yes or no"))),
        };
        let view = self.view();
        let wanted = id.trim().to_ascii_lowercase();
        let matching: Vec<[u8; 32]> = view
            .proposals
            .keys()
            .filter(|h| hex::encode(h).starts_with(&wanted))
            .copied()
            .collect();
        let hash = match matching.as_slice() {
            [one] if !wanted.is_empty() => *one,
            [] | [_] => {
                return Err(ApiError::new(
                    ErrorKind::NotFound,
                    format!("no open proposal `{id}` (see `grove mesh proposals`)"),
                ));
            }
            _ => {
                return Err(bad(format!(
                    "`{id}` matches several proposals; give more of it"
                )));
            }
        };
        let before = view.epoch();
        self.step(move |s, ident| s.vote(ident, hash, yes, crate::now_ms(), &mut rand::rng()))
            .await?;
        let epoch = self.view().epoch();
        Ok(dto::Voted {
            id: hex::encode(hash),
            epoch,
            committed: epoch > before,
        })
    }

    /// Joins by invite: asks the inviter, then either is welcomed at once
    /// or keeps polling in the background while the members vote.
    pub async fn mesh_join(
        &self,
        invite_text: String,
        name: String,
    ) -> Result<dto::JoinResult, ApiError> {
        let signed_invite = invite::from_text(&invite_text).map_err(|e| bad(e.to_string()))?;
        let inv = invite::verify(&signed_invite).map_err(|e| bad(e.to_string()))?;
        let inviter = PeerId::from_bytes(&inv.inviter)
            .map_err(|_| bad("the invite names an invalid inviter"))?;
        let addrs: Vec<Multiaddr> = inv
            .bootstrap
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect();
        if addrs.is_empty() {
            return Err(bad("the invite carries no address to reach its inviter"));
        }
        let text = invite_text.clone();
        let t = self
            .step(move |s, id| s.request_join(id, &text, &name, crate::now_ms()))
            .await?;
        let request = t
            .outbound
            .iter()
            .find_map(
                |o| match (&o.to, wire::MeshMessage::decode(o.message.as_slice())) {
                    (
                        Dest::Peer(_),
                        Ok(wire::MeshMessage {
                            kind: Some(wire::mesh_message::Kind::JoinRequest(s)),
                        }),
                    ) => Some(s),
                    _ => None,
                },
            )
            .ok_or_else(|| ApiError::new(ErrorKind::Internal, "no join request was made"))?;
        if let Err(e) = self.peers().remember_addresses(inviter, addrs.clone()) {
            tracing::warn!(error = %e, "node.db: the inviter's addresses are not stored");
        }
        let net = &self.shared().net;
        net.connect(inviter, &addrs, CONNECT_TIMEOUT)
            .await
            .map_err(|e| {
                ApiError::new(
                    ErrorKind::Unavailable,
                    format!("cannot reach the inviter: {e}"),
                )
            })?;
        let call = node_wire::JoinCall {
            kind: Some(node_wire::join_call::Kind::Request(request)),
        };
        let mesh_id = hex::encode(inv.mesh_id);
        match self.join_call(inviter, call).await? {
            JoinOutcome::Joined => Ok(dto::JoinResult {
                state: "joined".into(),
                mesh_id,
                ticket: None,
                epoch: Some(self.view().epoch()),
            }),
            JoinOutcome::Pending(ticket) => {
                let node = self.clone();
                let poll_ticket = ticket.clone();
                tokio::spawn(async move { node.poll_join(inviter, addrs, poll_ticket).await });
                Ok(dto::JoinResult {
                    state: "pending".into(),
                    mesh_id,
                    ticket: Some(hex::encode(ticket)),
                    epoch: None,
                })
            }
        }
    }

    async fn join_call(
        &self,
        inviter: PeerId,
        call: node_wire::JoinCall,
    ) -> Result<JoinOutcome, ApiError> {
        let answer = self
            .shared()
            .net
            .request(inviter, "/grove/join/1", call.encode_to_vec())
            .await
            .map_err(|e| ApiError::new(ErrorKind::Unavailable, format!("join request: {e}")))?;
        let answer = node_wire::JoinAnswer::decode(answer.as_slice()).map_err(|_| {
            ApiError::new(
                ErrorKind::Unavailable,
                "the inviter sent a malformed answer",
            )
        })?;
        match answer.kind {
            Some(node_wire::join_answer::Kind::Welcome(w)) => {
                let message = wire::MeshMessage {
                    kind: Some(wire::mesh_message::Kind::Welcome(w)),
                }
                .encode_to_vec();
                self.step(move |s, id| s.receive(id, &message, crate::now_ms(), &mut rand::rng()))
                    .await?;
                Ok(JoinOutcome::Joined)
            }
            Some(node_wire::join_answer::Kind::Pending(ticket)) => Ok(JoinOutcome::Pending(ticket)),
            Some(node_wire::join_answer::Kind::Refused(reason)) => Err(ApiError::new(
                ErrorKind::Conflict,
                format!("the inviter refused: {reason}"),
            )),
            None => Err(ApiError::new(
                ErrorKind::Unavailable,
                "the inviter sent an empty answer",
            )),
        }
    }

    /// Polls the inviter until the add is voted through (welcome), refused,
    /// or this node joined some other way.
    async fn poll_join(&self, inviter: PeerId, addrs: Vec<Multiaddr>, ticket: Vec<u8>) {
        let mut wait = POLL_FIRST;
        loop {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(POLL_MAX);
            let view = self.view();
            if view.mesh.is_some() || view.pending_join.is_none() {
                return;
            }
            if self
                .shared()
                .net
                .connect(inviter, &addrs, CONNECT_TIMEOUT)
                .await
                .is_err()
            {
                continue;
            }
            let call = node_wire::JoinCall {
                kind: Some(node_wire::join_call::Kind::Ticket(ticket.clone())),
            };
            match self.join_call(inviter, call).await {
                Ok(JoinOutcome::Joined) => {
                    tracing::info!("joined the mesh");
                    return;
                }
                Ok(JoinOutcome::Pending(_)) => {}
                Err(e) if e.kind == ErrorKind::Conflict => {
                    tracing::warn!(error = %e, "join refused");
                    return;
                }
                Err(e) => tracing::debug!(error = %e, "join poll failed; retrying"),
            }
        }
    }

    pub fn peer_list(&self) -> dto::PeerList {
        let view = self.view();
        let roster = view.roster();
        let me = self.shared().net.local_peer_id();
        let peers = self.peers();
        let mut ids: std::collections::BTreeSet<PeerId> = peers.connected.iter().copied().collect();
        if let Some(r) = roster {
            ids.extend(
                r.members
                    .iter()
                    .filter_map(|m| PeerId::from_bytes(&m.peer_id).ok()),
            );
        }
        ids.remove(&me);
        dto::PeerList {
            peers: ids
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
                    }
                })
                .collect(),
        }
    }

    pub fn roots(&self) -> dto::RootsView {
        let peers = self.peers();
        let view = self.view();
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
                    shards: a
                        .shards
                        .iter()
                        .map(|s| dto::AnnouncedShard {
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
                        })
                        .collect(),
                }
            })
            .collect();
        roots.sort_by(|a, b| a.name.cmp(&b.name).then(a.peer_id.cmp(&b.peer_id)));
        dto::RootsView { roots }
    }

    pub fn stats(&self) -> dto::NodeStats {
        let view = self.view();
        let shared = self.shared();
        dto::NodeStats {
            peer_id: shared.net.local_peer_id().to_string(),
            uptime_ms: crate::now_ms() - shared.started_ms,
            epoch: view.epoch(),
            epochs_seen: shared.stats.get("epochs.seen"),
            members: view.roster().map_or(0, |r| r.members.len()),
            peers_connected: self.peers().connected.len(),
            counters: shared.stats.snapshot(),
        }
    }

    /// Searches this node's books and every connected member's, merging the
    /// hits by score; each names the peer holding it.
    pub async fn mesh_search(&self, request: SearchRequest) -> Result<dto::Hits, ApiError> {
        let me = self.shared().net.local_peer_id().to_string();
        let k = request.k;
        let local_request = request.clone();
        let mut local = self
            .shared()
            .store
            .call(move |b| b.search(&local_request))
            .await?;
        for h in &mut local.hits {
            h.peer_id = Some(me.clone());
        }
        let mut hits = local.hits;
        let mut errors = Vec::new();
        let view = self.view();
        let targets: Vec<PeerId> = view
            .roster()
            .map(|r| {
                r.members
                    .iter()
                    .filter_map(|m| PeerId::from_bytes(&m.peer_id).ok())
                    .filter(|p| p.to_string() != me)
                    .collect()
            })
            .unwrap_or_default();
        let call = node_wire::SearchCall {
            query: request.query.clone(),
            k: u32::try_from(k).unwrap_or(u32::MAX),
            key: request.key.clone().unwrap_or_default(),
        }
        .encode_to_vec();
        let asks = targets.into_iter().map(|peer| {
            let node = self.clone();
            let call = call.clone();
            async move {
                let _ = node.ensure_connected(peer).await;
                let answer = node
                    .shared()
                    .net
                    .request(peer, "/grove/search/1", call)
                    .await;
                (peer, answer)
            }
        });
        for (peer, answer) in futures::future::join_all(asks).await {
            let answer = match answer {
                Ok(bytes) => node_wire::SearchAnswer::decode(bytes.as_slice())
                    .map_err(|_| "malformed answer".to_string()),
                Err(e) => Err(e.to_string()),
            };
            match answer {
                Ok(a) if a.refused.is_empty() => {
                    hits.extend(a.hits.into_iter().map(|h| dto::Hit {
                        key: h.key,
                        version: h.version,
                        title: (!h.title.is_empty()).then_some(h.title),
                        author: (!h.author.is_empty()).then_some(h.author),
                        node_id: h.node_id,
                        label: h.label,
                        index: h.index,
                        score: h.score,
                        content: h.text,
                        leaf: hex::encode(h.leaf),
                        peer_id: Some(peer.to_string()),
                    }))
                }
                Ok(a) => errors.push(format!("{peer}: refused: {}", a.refused)),
                Err(e) => errors.push(format!("{peer}: {e}")),
            }
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(k);
        Ok(dto::Hits { hits, errors })
    }
}

enum JoinOutcome {
    Joined,
    Pending(Vec<u8>),
}
