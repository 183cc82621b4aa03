//! The operator's mesh operations: init, invite, join, status, propose,
//! vote, leave. Each takes one step on the mesh worker (through the mesh
//! link, so what it queued goes out) and answers a `dto` type.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use libp2p::PeerId;
use serde::Deserialize;

use super::{Answer, Query};
use crate::api::{ApiError, dto};
use crate::daemon::mesh::ActorError;
use crate::daemon::outbox::MeshLink;
use crate::daemon::peers::resolve_member;
use crate::daemon::rpc::join::Joiner;
use crate::identity::peer_id_text;
use crate::mesh::MeshError;
use crate::mesh::invite;
use crate::mesh::names::{self, Field};
use crate::mesh::roster::{Change, CommitForm, QuorumRule};
use crate::mesh::state::{CloseReason, MeshState, ProposalChange, Transition};

/// What the mesh endpoints need; cheap to clone.
#[derive(Clone)]
pub struct MeshOps {
    pub link: MeshLink,
    pub joiner: Joiner,
    /// Addresses invites carry (with this node's id appended).
    pub advertised: crate::daemon::advertised::Advertised,
    /// `node.name`: the display name when a command gives none.
    pub node_name: Option<String>,
}

fn no_mesh() -> ApiError {
    ApiError::from(ActorError::Refused(MeshError::NoMesh))
}

fn bad_name(e: names::NameError) -> ApiError {
    ApiError::bad_request(e.to_string())
}

fn quorum(text: &str) -> Result<QuorumRule, ApiError> {
    QuorumRule::parse(text).map_err(|e| ApiError::bad_request(e.to_string()))
}

fn proposal_views(view: &MeshState) -> Vec<dto::ProposalView> {
    let needed = view.roster().map_or(0, |r| r.quorum_needed());
    // Display names by peer id, for the people reading the proposals.
    let name_of = |peer: &[u8]| {
        view.roster()
            .and_then(|r| r.members.iter().find(|m| m.peer_id == peer))
            .map(|m| m.name.clone())
    };
    view.proposals
        .values()
        .map(|p| {
            let votes: Vec<_> = view
                .votes
                .values()
                .filter(|v| v.proposal_hash == p.hash)
                .collect();
            let (kind, target) = crate::daemon::events::change_view(&p.change);
            let target_name = match &p.change {
                Change::Add(m) => Some(m.name.clone()),
                Change::Kick(peer) => name_of(peer),
                _ => None,
            };
            let backed_by = match &p.change {
                Change::Kick(peer) => view
                    .proven_bad
                    .values()
                    .filter(|e| &e.committer == peer)
                    .map(|e| e.epoch)
                    .collect(),
                _ => Vec::new(),
            };
            dto::ProposalView {
                backed_by,
                id: hex::encode(p.hash),
                kind: kind.into(),
                target,
                target_name,
                proposer: peer_id_text(&p.proposer),
                proposer_name: name_of(&p.proposer),
                votes: dto::Votes {
                    yes: votes.iter().filter(|v| v.yes).count(),
                    no: votes.iter().filter(|v| !v.yes).count(),
                    needed,
                    yes_by: votes
                        .iter()
                        .filter(|v| v.yes)
                        .map(|v| peer_id_text(&v.voter))
                        .collect(),
                    yes_names: votes
                        .iter()
                        .filter(|v| v.yes)
                        .map(|v| name_of(&v.voter).unwrap_or_default())
                        .collect(),
                },
                expires: p.expires_ms,
            }
        })
        .collect()
}

/// The hash of the proposal a transition stored.
fn stored_proposal(t: &Transition) -> Option<[u8; 32]> {
    t.effects.iter().find_map(|e| match e {
        crate::mesh::state::Effect::PutProposal(p) => Some(p.hash),
        _ => None,
    })
}

/// The envelopes that did not open: checked evidence (this node's own and
/// other members'), then this node's own it could not prove.
fn bad_envelope_views(view: &MeshState) -> Vec<dto::BadEnvelopeView> {
    let name_of = |peer: &[u8]| {
        view.rosters
            .values()
            .find_map(|n| n.roster.member(peer))
            .map(|m| m.name.clone())
    };
    let me = &view.me.peer_id;
    let view_of = |epoch, committer: &[u8], accuser: &[u8], proven| dto::BadEnvelopeView {
        epoch,
        committer: peer_id_text(committer),
        committer_name: name_of(committer),
        accuser: peer_id_text(accuser),
        accuser_name: name_of(accuser),
        proven,
    };
    let mut out: Vec<dto::BadEnvelopeView> = view
        .proven_bad
        .values()
        .map(|p| view_of(p.epoch, &p.committer, &p.accuser, true))
        .chain(
            view.bad_envelopes
                .iter()
                .filter(|b| !view.proven_bad.contains_key(&(b.roster_hash, me.clone())))
                .map(|b| view_of(b.epoch, &b.committer, me, false)),
        )
        .collect();
    out.sort_by_key(|v| v.epoch);
    out
}

impl MeshOps {
    fn status_now(&self) -> Result<dto::MeshStatus, ApiError> {
        let view = self.link.view();
        let me = self.joiner.net.local_peer_id();
        if view.mesh.is_none()
            && let Some(p) = &view.pending_join
        {
            return Ok(dto::MeshStatus {
                state: "pending".into(),
                mesh_id: hex::encode(p.mesh_id),
                name: String::new(),
                epoch: 0,
                roster_hash: String::new(),
                quorum: String::new(),
                peer_id: me.to_string(),
                member: false,
                synced: view.synced,
                members: Vec::new(),
                proposals: Vec::new(),
                evidence: 0,
                bad_envelopes: Vec::new(),
                removed: None,
                join: Some(dto::PendingJoinView {
                    invite_id: hex::encode(p.invite_id),
                    inviter: peer_id_text(&p.inviter),
                    name: p.name.clone(),
                    waiting_for: self.joiner.waiting_for(),
                }),
            });
        }
        let roster = view.roster().ok_or_else(no_mesh)?;
        let removed = view.removal().map(|r| dto::RemovalView {
            epoch: r.epoch,
            proposal: r.proposal_hash.map(hex::encode),
            commit: hex::encode(r.commit_hash),
            at: r.at_ms,
        });
        let state = match (view.is_member(), &removed) {
            (true, _) => "member",
            (false, Some(_)) => "removed",
            (false, None) => "outsider",
        };
        let now = crate::now_ms();
        let peers = self.joiner.peers.lock();
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
            state: state.into(),
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
            bad_envelopes: bad_envelope_views(&view),
            removed,
            join: None,
        })
    }

    async fn propose(&self, change: ProposalChange) -> Answer<dto::Proposed> {
        let before = self.link.view().epoch();
        let t = self
            .link
            .step(move |s, id| s.propose(id, change, crate::now_ms(), &mut rand::rng()))
            .await?;
        Ok(Json(self.proposed(before, &t)))
    }

    /// The answer to the proposal this node made in `t`, proposed at
    /// epoch `before`.
    fn proposed(&self, before: u64, t: &Transition) -> dto::Proposed {
        let epoch = self.link.view().epoch();
        dto::Proposed {
            id: stored_proposal(t).map(hex::encode).unwrap_or_default(),
            epoch,
            committed: epoch > before,
        }
    }
}

pub async fn status(State(ops): State<MeshOps>) -> Answer<dto::MeshStatus> {
    Ok(Json(ops.status_now()?))
}

pub async fn proposals(State(ops): State<MeshOps>) -> Answer<dto::ProposalList> {
    let view = ops.link.view();
    view.roster().ok_or_else(no_mesh)?;
    Ok(Json(dto::ProposalList {
        proposals: proposal_views(&view),
    }))
}

/// Whether invite `id` is approved in advance: `approved` (the current
/// roster lists it), `proposed` (an open approval proposal), else None.
fn approval_state(view: &MeshState, id: &[u8; 16]) -> Option<String> {
    if view.roster().is_some_and(|r| r.approval(id).is_some()) {
        return Some("approved".into());
    }
    view.proposals
        .values()
        .any(|p| matches!(&p.change, Change::Approve(a) if &a.invite_id == id))
        .then(|| "proposed".into())
}

pub async fn invites(State(ops): State<MeshOps>) -> Json<dto::InviteList> {
    let now = crate::now_ms();
    let view = ops.link.view();
    Json(dto::InviteList {
        invites: view
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
                approval: approval_state(&view, &i.id),
            })
            .collect(),
    })
}

#[derive(Deserialize)]
pub struct InitQuery {
    name: String,
    quorum: Option<String>,
    /// This node's display name in the roster.
    #[serde(rename = "as")]
    member: Option<String>,
}

pub async fn init(
    State(ops): State<MeshOps>,
    Query(q): Query<InitQuery>,
) -> Answer<dto::MeshStatus> {
    let rule = quorum(q.quorum.as_deref().unwrap_or("1/2"))?;
    let member = q
        .member
        .or_else(|| ops.node_name.clone())
        .unwrap_or_else(|| "founder".into());
    let name = q.name;
    ops.link
        .step(move |s, id| s.init_as(id, &name, &member, rule, crate::now_ms(), &mut rand::rng()))
        .await?;
    Ok(Json(ops.status_now()?))
}

#[derive(Deserialize)]
pub struct InviteQuery {
    ttl_secs: Option<u64>,
    note: Option<String>,
    /// Ask the members to approve it in advance (§8a).
    approved: Option<bool>,
    /// The display name an approved joiner must use (empty: any).
    approved_name: Option<String>,
}

pub async fn invite(
    State(ops): State<MeshOps>,
    Query(q): Query<InviteQuery>,
) -> Answer<dto::InviteCreated> {
    // Refused before anything is made: a bad note or approved name leaves
    // no invite behind.
    names::check(Field::InviteNote, q.note.as_deref().unwrap_or_default()).map_err(bad_name)?;
    if let Some(name) = q.approved_name.as_deref().filter(|n| !n.is_empty()) {
        names::check(Field::DisplayName, name).map_err(bad_name)?;
    }
    let me = ops.joiner.net.local_peer_id();
    let bootstrap: Vec<String> = ops
        .advertised
        .current()
        .iter()
        .map(|a| crate::net::with_peer_id(a, me).to_string())
        .collect();
    if bootstrap.is_empty() {
        return Err(ApiError::bad_request(
            "this node has no address to put in an invite: set net.external_addresses",
        ));
    }
    let ttl = q
        .ttl_secs
        .map(|t| i64::try_from(t.saturating_mul(1000)).unwrap_or(i64::MAX));
    let (boot, note) = (bootstrap.clone(), q.note.unwrap_or_default());
    let t = ops
        .link
        .step(move |s, id| s.create_invite(id, boot, note, ttl, crate::now_ms(), &mut rand::rng()))
        .await?;
    let text = t.output.unwrap_or_default();
    let signed = invite::from_text(&text).map_err(|e| ApiError::internal(e.to_string()))?;
    let inv = invite::verify(&signed).map_err(|e| ApiError::internal(e.to_string()))?;
    let (approval, approved) = if q.approved.unwrap_or(false) || q.approved_name.is_some() {
        let change = ProposalChange::Approve {
            invite: signed,
            name: q.approved_name.unwrap_or_default(),
        };
        match ops.propose(change).await {
            Ok(Json(p)) => (Some(p.id), Some(p.committed)),
            Err(e) => {
                // No approval without its invite: revoke the fresh invite,
                // so nothing is left half made.
                let id = inv.invite_id;
                let _ = ops
                    .link
                    .step(move |s, ident| s.revoke_invite(ident, id, crate::now_ms()))
                    .await;
                return Err(ApiError::new(
                    e.kind,
                    format!(
                        "the approval could not be proposed, so the invite was revoked: {}",
                        e.message
                    ),
                ));
            }
        }
    } else {
        (None, None)
    };
    Ok(Json(dto::InviteCreated {
        invite: text,
        id: hex::encode(inv.invite_id),
        expires: inv.expires_ms,
        bootstrap,
        approval,
        approved,
    }))
}

#[derive(Deserialize)]
pub struct IdQuery {
    id: String,
}

pub async fn revoke(State(ops): State<MeshOps>, Query(q): Query<IdQuery>) -> Answer<dto::Revoked> {
    let bytes = crate::api::prefix::resolve(
        &q.id,
        ops.link
            .view()
            .invites
            .keys()
            .map(|id| (hex::encode(id), *id)),
        "invite",
        "grove mesh invite list",
    )?;
    // An approval is ended by a commit; propose it first, so a refusal
    // (e.g. this node's vote is bound) changes nothing.
    let approval_revocation = if ops
        .link
        .view()
        .roster()
        .is_some_and(|r| r.approval(&bytes).is_some())
    {
        Some(
            ops.propose(ProposalChange::RevokeApproval(bytes))
                .await?
                .0
                .id,
        )
    } else {
        None
    };
    ops.link
        .step(move |s, ident| s.revoke_invite(ident, bytes, crate::now_ms()))
        .await?;
    Ok(Json(dto::Revoked {
        id: hex::encode(bytes),
        approval_revocation,
    }))
}

/// The host's name: the display name a joining node gets when neither
/// `--as` nor `node.name` gives one.
fn host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    (!name.is_empty()).then_some(name)
}

/// `mesh join`: the invite and name come as a JSON body ([`dto::JoinCall`]).
pub async fn join(State(ops): State<MeshOps>, body: Bytes) -> Answer<dto::JoinResult> {
    let q: dto::JoinCall = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("a malformed join: {e}")))?;
    let name = q
        .name
        .or_else(|| ops.node_name.clone())
        .or_else(host_name)
        .ok_or_else(|| {
            ApiError::bad_request("a display name is needed: pass --as NAME or set node.name")
        })?;
    Ok(Json(ops.joiner.join(q.invite, name).await?))
}

#[derive(Deserialize)]
pub struct ProposeQuery {
    kind: String,
    target: Option<String>,
}

pub async fn propose(
    State(ops): State<MeshOps>,
    Query(q): Query<ProposeQuery>,
) -> Answer<dto::Proposed> {
    let view = ops.link.view();
    let change = match (q.kind.as_str(), q.target.as_deref()) {
        ("kick", Some(peer)) => ProposalChange::Kick(resolve_member(&view, peer)?),
        ("rotate", None) => ProposalChange::Rotate,
        ("quorum", Some(rule)) => ProposalChange::Quorum(quorum(rule)?),
        ("upgrade", None) => ProposalChange::CommitForm(CommitForm::LATEST),
        ("kick", None) => return Err(ApiError::bad_request("propose kick needs a PEER")),
        ("quorum", None) => {
            return Err(ApiError::bad_request(
                "propose quorum needs a rule, e.g. 2/3",
            ));
        }
        (kind @ ("rotate" | "upgrade"), Some(_)) => {
            return Err(ApiError::bad_request(format!(
                "propose {kind} takes no argument"
            )));
        }
        (other, _) => {
            return Err(ApiError::bad_request(format!(
                "unknown proposal kind `{other}`: kick, rotate, quorum or upgrade"
            )));
        }
    };
    ops.propose(change).await
}

/// `identity rotate`: this node's key update (§8b); it commits on this
/// node's own yes, so the answer says at which epoch the new key is in
/// effect.
pub async fn rotate_key(State(ops): State<MeshOps>) -> Answer<dto::Proposed> {
    let before = ops.link.view().epoch();
    let t = ops.link.rotate_key().await?;
    Ok(Json(ops.proposed(before, &t)))
}

pub async fn leave(State(ops): State<MeshOps>) -> Answer<dto::Proposed> {
    let me = ops.link.view().me.peer_id.clone();
    ops.propose(ProposalChange::Kick(me)).await
}

#[derive(Deserialize)]
pub struct VoteQuery {
    id: String,
    choice: String,
}

/// The open proposal `text` names (its id or a unique prefix). A node that
/// is not a member says so; a proposal that closed says how.
fn resolve_proposal(view: &MeshState, text: &str) -> Result<[u8; 32], ApiError> {
    view.require_member()
        .map_err(|e| ApiError::from(ActorError::Refused(e)))?;
    let open = crate::api::prefix::resolve(
        text,
        view.proposals.keys().map(|h| (hex::encode(h), *h)),
        "open proposal",
        "grove mesh proposals",
    );
    let not_found = match open {
        Ok(hash) => return Ok(hash),
        Err(e) if e.kind == crate::api::ErrorKind::NotFound => e,
        Err(e) => return Err(e),
    };
    let wanted = text.trim().to_ascii_lowercase();
    let matching = |keys: &mut dyn Iterator<Item = &[u8; 32]>| -> Vec<[u8; 32]> {
        keys.filter(|h| hex::encode(h).starts_with(&wanted))
            .copied()
            .collect()
    };
    if let [one] = matching(&mut view.closed.keys()).as_slice()
        && let Some(c) = view.closed.get(one)
    {
        return Err(ApiError::conflict(format!(
            "proposal {} was {} at epoch {}; it is closed (see `grove mesh proposals`)",
            hex::encode(one),
            c.reason.as_str(),
            c.epoch
        )));
    }
    Err(not_found)
}

pub async fn vote(State(ops): State<MeshOps>, Query(q): Query<VoteQuery>) -> Answer<dto::Voted> {
    let yes = match q.choice.as_str() {
        "yes" | "y" => true,
        "no" | "n" => false,
        other => {
            return Err(ApiError::bad_request(format!(
                "vote `{other}`: say yes or no"
            )));
        }
    };
    let view = ops.link.view();
    let hash = resolve_proposal(&view, &q.id)?;
    let before = view.epoch();
    ops.link
        .step(move |s, ident| s.vote(ident, hash, yes, crate::now_ms(), &mut rand::rng()))
        .await?;
    let after = ops.link.view();
    let epoch = after.epoch();
    Ok(Json(dto::Voted {
        id: hex::encode(hash),
        yes,
        epoch,
        committed: epoch > before,
        rejected: after
            .closed
            .get(&hash)
            .is_some_and(|c| c.reason == CloseReason::Rejected),
    }))
}

pub async fn withdraw(
    State(ops): State<MeshOps>,
    Query(q): Query<IdQuery>,
) -> Answer<dto::Withdrawn> {
    let hash = resolve_proposal(&ops.link.view(), &q.id)?;
    ops.link
        .step(move |s, ident| s.withdraw(ident, hash, crate::now_ms()))
        .await?;
    Ok(Json(dto::Withdrawn {
        id: hex::encode(hash),
        epoch: ops.link.view().epoch(),
    }))
}
