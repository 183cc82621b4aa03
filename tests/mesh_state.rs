//! Regression tests of the state machine for runs of the seeded simulation
//! that once failed (`grove-bench mesh liveness`), each cut down to the
//! messages that matter and delivered by hand in the order that broke.

use std::sync::Arc;

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::sim::{self, Config, Memory, STEP_MS, Sim, SimNode};
use grove::identity::Identity;
use grove::mesh::MeshError;
use grove::mesh::codec::{self, tag};
use grove::mesh::invite;
use grove::mesh::roster::QuorumRule;
use grove::mesh::state::*;
use grove::wire::mesh as wire;
use grove::wire::mesh::mesh_message::Kind;

/// Nodes driven by hand: every message goes exactly where the test sends it.
struct Net {
    nodes: Vec<SimNode>,
    rng: StdRng,
    now: i64,
    /// One node whose transitions are also persisted in a mesh.db.
    stored: Option<(usize, grove::mesh::store::MeshStore, tempfile::TempDir)>,
}

impl Net {
    /// A mesh of `members` formed over a reliable network (the simulation's setup).
    fn mesh(members: usize, seed: u64) -> Net {
        let sim = Sim::new(
            seed,
            Config::new(members, 0.0),
            QuorumRule::MAJORITY,
            Memory,
        )
        .expect("mesh formed");
        Net {
            nodes: sim.nodes,
            rng: StdRng::seed_from_u64(seed ^ 0x5eed),
            now: sim.now,
            stored: None,
        }
    }

    /// Persists node `i`'s transitions from now on in its own mesh.db.
    fn store(&mut self, i: usize) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = grove::mesh::store::MeshStore::open_in(dir.path()).expect("mesh.db");
        store.set_synchronous(false).expect("pragma");
        self.stored = Some((i, store, dir));
    }

    /// Node `i`'s state as loaded again from its mesh.db equals the one in memory.
    fn assert_reloads(&self, i: usize) {
        let (_, store, _) = self.stored.as_ref().expect("a stored node");
        let loaded = store
            .load(self.nodes[i].id.public(), sim::timing())
            .expect("load");
        let mut expected = self.nodes[i].state.clone();
        expected.synced = loaded.synced;
        expected.pending_sync = None;
        assert_eq!(loaded, expected, "node {i} reloaded from mesh.db differs");
    }

    fn add_node(&mut self) -> usize {
        let id = Identity::generate(&mut self.rng);
        let state = MeshState::empty(id.public(), sim::timing());
        self.nodes.push(SimNode {
            id: Arc::new(id),
            state,
        });
        self.nodes.len() - 1
    }

    fn step(&mut self, steps: i64) {
        self.now += steps * STEP_MS;
    }

    /// Runs an operation of node `i`; returns what it sends.
    fn act(
        &mut self,
        i: usize,
        op: impl FnOnce(
            &MeshState,
            &Identity,
            &mut StdRng,
            i64,
        ) -> Result<(MeshState, Transition), MeshError>,
    ) -> Result<Vec<Outbound>, MeshError> {
        let id = self.nodes[i].id.clone();
        let (s, t) = op(&self.nodes[i].state, &id, &mut self.rng, self.now)?;
        if let Some((stored, store, _)) = self.stored.as_mut()
            && *stored == i
        {
            store.persist(&t, self.now).expect("persisted");
        }
        self.nodes[i].state = s;
        Ok(t.outbound)
    }

    /// Delivers one message to node `to`; returns what it sends in answer.
    fn deliver(&mut self, to: usize, message: &[u8]) -> Result<Vec<Outbound>, MeshError> {
        self.act(to, |s, id, rng, now| s.receive(id, message, now, rng))
    }

    /// Delivers every message of `out` to each node in `to`, answers dropped.
    fn deliver_to(&mut self, out: &[Outbound], to: &[usize]) {
        for o in out {
            for &i in to {
                let _ = self.deliver(i, &o.message);
            }
        }
    }

    fn peer(&self, i: usize) -> Vec<u8> {
        self.nodes[i].id.peer_id()
    }

    fn tip(&self, i: usize) -> [u8; 32] {
        self.nodes[i].state.tip
    }

    /// The one message of `kind` in `out`.
    fn find(out: &[Outbound], kind: fn(&Kind) -> bool) -> Vec<u8> {
        out.iter()
            .find(|o| {
                wire::MeshMessage::decode(o.message.as_slice())
                    .ok()
                    .and_then(|m| m.kind)
                    .is_some_and(|k| kind(&k))
            })
            .map(|o| o.message.clone())
            .expect("message of that kind sent")
    }

    /// The proposal this node holds that `proposer` made.
    fn proposal_by(&self, at: usize, proposer: usize) -> [u8; 32] {
        let p = self.peer(proposer);
        self.nodes[at]
            .state
            .proposals
            .values()
            .find(|r| r.proposer == p)
            .map(|r| r.hash)
            .expect("proposal held")
    }

    /// Node `i` asks for a sync; the answers of `from` come back to it.
    fn sync_from(&mut self, i: usize, from: &[usize]) {
        let out = self
            .act(i, |s, id, _, now| s.sync_request(id, now))
            .expect("sync request");
        for &f in from {
            let answers = self.deliver(f, &out[0].message).unwrap_or_default();
            for a in answers {
                let _ = self.deliver(i, &a.message);
            }
        }
    }

    /// Node `inviter` issues an invite; returns its text.
    fn invite(&mut self, inviter: usize) -> String {
        let id = self.nodes[inviter].id.clone();
        let (s, t) = self.nodes[inviter]
            .state
            .create_invite(&id, vec![], String::new(), None, self.now, &mut self.rng)
            .expect("invite");
        self.nodes[inviter].state = s;
        t.output.expect("invite text")
    }
}

use prost::Message;

fn is_commit(k: &Kind) -> bool {
    matches!(k, Kind::Commit(_))
}

fn is_welcome(k: &Kind) -> bool {
    matches!(k, Kind::Welcome(_))
}

fn is_proposal(k: &Kind) -> bool {
    matches!(k, Kind::Proposal(_))
}

fn is_vote(k: &Kind) -> bool {
    matches!(k, Kind::Vote(_) | Kind::ReleasedVote(_))
}

/// Seed 2476: the approval of an invite and an add with that invite were
/// both committed at one epoch (the approval by a backup committer that had
/// not seen its withdrawal). Nodes that held the add refused the approval
/// commit as "invite used", nodes that held the approval took the add too,
/// and the fork choice then split the members at one epoch for good.
#[test]
fn sibling_commits_of_an_approval_and_an_add_with_its_invite_are_valid_everywhere() {
    let mut net = Net::mesh(3, 2476);
    let (a, b, c) = (0, 1, 2);
    let text = net.invite(a);
    let invite = grove::mesh::invite::from_text(&text).expect("invite text");
    // A proposes the approval; B's yes reaches only C (the backup committer).
    net.step(1);
    let out = net
        .act(a, |s, id, rng, now| {
            s.propose(
                id,
                ProposalChange::Approve {
                    invite,
                    name: String::new(),
                },
                now,
                rng,
            )
        })
        .expect("approval proposed");
    net.deliver_to(&out, &[b, c]);
    let approval = net.proposal_by(b, a);
    let out = net
        .act(b, |s, id, rng, now| s.vote(id, approval, true, now, rng))
        .expect("yes on the approval");
    net.deliver_to(&out, &[c]);
    // A withdraws it; the withdrawal reaches B only.
    let out = net
        .act(a, |s, id, _, now| s.withdraw(id, approval, now))
        .expect("withdrawn");
    net.deliver_to(&out, &[b]);
    // The joiner asks A, who proposes the add; B's yes lets A commit it.
    let joiner = net.add_node();
    let out = net
        .act(joiner, |s, id, _, now| s.request_join(id, &text, "j", now))
        .expect("join request");
    let out = net.deliver(a, &out[0].message).expect("add proposed");
    net.deliver_to(&out, &[b]);
    let add = net.proposal_by(b, a);
    let out = net
        .act(b, |s, id, rng, now| s.vote(id, add, true, now, rng))
        .expect("yes on the add");
    let out = net
        .deliver(a, &Net::find(&out, is_vote))
        .expect("add committed");
    let add_commit = Net::find(&out, is_commit);
    net.deliver_to(&out, &[b]);
    // C, past the backup time with a quorum for the approval, commits it.
    net.step(sim::timing().commit_backup_ms / STEP_MS + 1);
    let out = net
        .act(c, |s, id, rng, now| s.tick(id, now, rng))
        .expect("tick");
    let approval_commit = Net::find(&out, is_commit);
    // Each side receives the other's commit: both are valid everywhere.
    for i in [a, b] {
        net.deliver(i, &approval_commit)
            .expect("the approval commit is valid beside the add");
    }
    net.deliver(c, &add_commit)
        .expect("the add commit is valid beside the approval");
    assert_eq!(net.tip(a), net.tip(b));
    assert_eq!(net.tip(a), net.tip(c), "members split at one epoch");
}

/// Seeds 9696, 5100 and 6082: a joiner was welcomed on a branch that then
/// lost the fork choice below the roster it joined from. It held no roster
/// before that one, so it could check none of the winning commits and
/// stayed on the dead branch, believing itself a member.
#[test]
fn a_joiner_welcomed_on_a_losing_branch_follows_the_winning_one() {
    let mut net = Net::mesh(3, 9696);
    let (a, b, c) = (0, 1, 2);
    let invite_of = [net.invite(a), String::new(), net.invite(c)];
    // A proposes a rotate; B's yes reaches A and C. A commits it, and C,
    // not having seen that commit, commits the same proposal as backup.
    net.step(1);
    let out = net
        .act(a, |s, id, rng, now| {
            s.propose(id, ProposalChange::Rotate, now, rng)
        })
        .expect("rotate proposed");
    net.deliver_to(&out, &[b, c]);
    let rotate = net.proposal_by(b, a);
    let out = net
        .act(b, |s, id, rng, now| s.vote(id, rotate, true, now, rng))
        .expect("yes");
    net.deliver_to(&out, &[c]);
    let out = net
        .deliver(a, &Net::find(&out, is_vote))
        .expect("committed");
    let commit_a = Net::find(&out, is_commit);
    net.step(sim::timing().commit_backup_ms / STEP_MS + 1);
    let out = net
        .act(c, |s, id, rng, now| s.tick(id, now, rng))
        .expect("tick");
    let commit_c = Net::find(&out, is_commit);
    // The losing sibling, and who is on which side.
    let mut both = net.nodes[a].state.clone();
    let (s, _) = both
        .receive(&net.nodes[a].id, &commit_c, net.now, &mut net.rng)
        .expect("sibling");
    both = s;
    let a_wins = both.tip == net.tip(a);
    let (lose, lose_commit, win, win_commit) = if a_wins {
        (c, commit_c, a, commit_a)
    } else {
        (a, commit_a, c, commit_c)
    };
    // B joins the losing side; there the loser's inviter adds a joiner with B's yes.
    net.deliver(b, &lose_commit).expect("losing sibling");
    net.step(1);
    let joiner = net.add_node();
    net.store(joiner);
    let text = invite_of[lose].clone();
    let out = net
        .act(joiner, |s, id, _, now| s.request_join(id, &text, "j", now))
        .expect("join request");
    let out = net.deliver(lose, &out[0].message).expect("add proposed");
    net.deliver_to(&out, &[b]);
    let add = net.proposal_by(b, lose);
    let out = net
        .act(b, |s, id, rng, now| s.vote(id, add, true, now, rng))
        .expect("yes on the add");
    let out = net
        .deliver(lose, &Net::find(&out, is_vote))
        .expect("add committed");
    let welcome = Net::find(&out, is_welcome);
    net.deliver(joiner, &welcome).expect("welcomed");
    assert!(net.nodes[joiner].state.is_member());
    // B then learns the winning sibling, switches, and the winner's side
    // moves on to the same epoch with B's yes.
    net.deliver(b, &win_commit).expect("winning sibling");
    assert_eq!(net.tip(b), net.tip(win));
    net.step(1);
    let out = net
        .act(win, |s, id, rng, now| {
            s.propose(id, ProposalChange::Rotate, now, rng)
        })
        .expect("rotate on the winning side");
    net.deliver(b, &Net::find(&out, is_proposal))
        .expect("proposal");
    let next = net.proposal_by(b, win);
    let out = net
        .act(b, |s, id, rng, now| s.vote(id, next, true, now, rng))
        .expect("yes");
    let out = net
        .deliver(win, &Net::find(&out, is_vote))
        .expect("committed");
    net.deliver_to(&out, &[b]);
    assert_eq!(
        net.nodes[joiner].state.epoch(),
        net.nodes[b].state.epoch(),
        "both branches at one epoch"
    );
    // Everyone syncs with everyone: all follow the winning branch.
    for _ in 0..2 {
        for i in [a, b, c, joiner] {
            let others: Vec<usize> = [a, b, c, joiner].into_iter().filter(|&o| o != i).collect();
            net.sync_from(i, &others);
        }
    }
    for i in [a, c, joiner] {
        assert_eq!(net.tip(i), net.tip(b), "node {i} is on another branch");
    }
    assert!(
        !net.nodes[joiner].state.is_member(),
        "the joiner was added on the losing branch only"
    );
    // The rosters it linked below its first one are persisted too.
    net.assert_reloads(joiner);
}

/// Seed 7151: a joiner's welcome was lost, and its inviter was removed
/// before the joiner asked again. The removed inviter answered nothing, no
/// other member answers a join request for its invite, and the roster
/// counted the joiner, so with every member online the quorum could not
/// be reached.
#[test]
fn a_removed_inviter_sends_a_lost_welcome_again() {
    let mut net = Net::mesh(2, 7151);
    let (a, b) = (0, 1);
    let text = net.invite(a);
    let joiner = net.add_node();
    net.step(1);
    let out = net
        .act(joiner, |s, id, _, now| s.request_join(id, &text, "j", now))
        .expect("join request");
    let request = out[0].message.clone();
    let out = net.deliver(a, &request).expect("add proposed");
    net.deliver_to(&out, &[b]);
    let add = net.proposal_by(b, a);
    let out = net
        .act(b, |s, id, rng, now| s.vote(id, add, true, now, rng))
        .expect("yes");
    // A commits the add; its welcome is lost.
    let out = net
        .deliver(a, &Net::find(&out, is_vote))
        .expect("committed");
    net.deliver_to(&out, &[b]);
    assert!(net.nodes[joiner].state.mesh.is_none());
    // A leaves: its own yes and B's are two of the three members.
    net.step(1);
    let leave = net.peer(a);
    let out = net
        .act(a, |s, id, rng, now| {
            s.propose(id, ProposalChange::Kick(leave), now, rng)
        })
        .expect("leave proposed");
    net.deliver_to(&out, &[b]);
    let kick = net.proposal_by(b, a);
    let out = net
        .act(b, |s, id, rng, now| s.vote(id, kick, true, now, rng))
        .expect("yes on the leave");
    let out = net
        .deliver(a, &Net::find(&out, is_vote))
        .expect("leave committed");
    net.deliver_to(&out, &[b]);
    assert!(!net.nodes[a].state.is_member());
    assert!(
        net.nodes[b]
            .state
            .roster()
            .unwrap()
            .member(&net.peer(joiner))
            .is_some()
    );
    // The joiner asks again: its removed inviter sends the welcome again.
    net.step(1);
    let out = net
        .act(joiner, |s, id, _, now| s.request_join(id, &text, "j", now))
        .expect("join request again");
    let out = net
        .deliver(a, &out[0].message)
        .expect("the removed inviter answers");
    net.deliver(joiner, &Net::find(&out, is_welcome))
        .expect("welcomed");
    net.sync_from(joiner, &[b]);
    assert_eq!(net.tip(joiner), net.tip(b));
    assert!(net.nodes[joiner].state.is_member());
}

/// A revoked invite ends an open proposal to approve it: the proposer
/// withdraws it, so every vote on it is free again, whichever of the
/// revocation and the withdrawal a member receives first, and no member
/// votes on it or commits it meanwhile.
#[test]
fn revoking_an_invite_closes_the_open_proposal_to_approve_it() {
    let mut net = Net::mesh(4, 18);
    let (a, b, c, d) = (0, 1, 2, 3);
    let text = net.invite(a);
    let invite = grove::mesh::invite::from_text(&text).expect("invite text");
    net.step(1);
    let out = net
        .act(a, |s, id, rng, now| {
            s.propose(
                id,
                ProposalChange::Approve {
                    invite,
                    name: String::new(),
                },
                now,
                rng,
            )
        })
        .expect("approval proposed");
    net.deliver_to(&out, &[b, c, d]);
    let approval = net.proposal_by(b, a);
    // B votes yes (two of the three needed); B is now bound to it.
    let out = net
        .act(b, |s, id, rng, now| s.vote(id, approval, true, now, rng))
        .expect("yes");
    net.deliver_to(&out, &[a, c, d]);
    assert!(net.nodes[a].state.proposals.contains_key(&approval));
    // A revokes the invite: the revocation and A's withdrawal go out.
    let invite_id = net.nodes[a].state.invites.keys().next().copied().unwrap();
    let out = net
        .act(a, |s, id, _, now| s.revoke_invite(id, invite_id, now))
        .expect("revoked");
    assert_eq!(
        net.nodes[a].state.closed.get(&approval).map(|c| c.reason),
        Some(CloseReason::Withdrawn)
    );
    // B gets the revocation first, then the withdrawal; D the other way round.
    net.deliver_to(&out, &[b]);
    let mut reversed = out.clone();
    reversed.reverse();
    net.deliver_to(&reversed, &[d]);
    // C gets only the revocation for now: it no longer votes on the approval.
    net.deliver_to(&out[..1], &[c]);
    let err = net
        .act(c, |s, id, rng, now| s.vote(id, approval, true, now, rng))
        .unwrap_err();
    assert_eq!(err, MeshError::InviteRevoked);
    net.deliver_to(&out[1..], &[c]);
    for i in [a, b, c, d] {
        let s = &net.nodes[i].state;
        assert!(
            !s.proposals.contains_key(&approval),
            "still open at node {i}"
        );
        assert_eq!(
            s.closed.get(&approval).map(|c| c.reason),
            Some(CloseReason::Withdrawn),
            "not closed at node {i}"
        );
    }
    // B's vote is free: B proposes a rotate and the others commit it.
    let epoch = net.nodes[b].state.epoch();
    net.step(1);
    let out = net
        .act(b, |s, id, rng, now| {
            s.propose(id, ProposalChange::Rotate, now, rng)
        })
        .expect("B is free to propose");
    net.deliver_to(&out, &[a, c, d]);
    let rotate = net.proposal_by(c, b);
    for i in [c, d] {
        let out = net
            .act(i, |s, id, rng, now| s.vote(id, rotate, true, now, rng))
            .expect("yes");
        let others: Vec<usize> = [a, b, c, d].into_iter().filter(|&o| o != i).collect();
        for o in out {
            for &to in &others {
                if let Ok(more) = net.deliver(to, &o.message) {
                    net.deliver_to(&more, &[a, b, c, d]);
                }
            }
        }
    }
    for i in [a, b, c, d] {
        assert_eq!(net.nodes[i].state.epoch(), epoch + 1, "node {i}");
    }
    // A new proposal to approve the revoked invite is refused.
    let invite = grove::mesh::invite::from_text(&text).expect("invite text");
    let err = net
        .act(a, |s, id, rng, now| {
            s.propose(
                id,
                ProposalChange::Approve {
                    invite,
                    name: String::new(),
                },
                now,
                rng,
            )
        })
        .unwrap_err();
    assert_eq!(err, MeshError::InviteRevoked);
}

/// A joiner running another client signs a join request with a name that
/// would forge output: the inviter refuses it (its invite stays open), and
/// a member whose own client proposes such an add has it refused by every
/// other member; a valid name still joins.
#[test]
fn a_name_that_breaks_the_rule_is_refused_from_a_peer() {
    let mut net = Net::mesh(2, 2701);
    let (a, b) = (0, 1);
    let text = net.invite(a);
    let joiner = net.add_node();
    net.step(1);
    let signed_invite = invite::from_text(&text).expect("invite text");
    let jid = net.nodes[joiner].id.clone();
    let p = jid.public();
    let mesh_id = net.nodes[a].state.mesh_id().unwrap();
    let join = |name: &str, now: i64| {
        codec::sign(
            &jid,
            tag::JOIN,
            &wire::JoinRequest {
                mesh_id: mesh_id.to_vec(),
                invite: Some(signed_invite.clone()),
                ed25519: p.ed25519.to_vec(),
                x25519: p.x25519.to_vec(),
                x25519_binding: p.x25519_binding.to_vec(),
                name: name.to_string(),
                created_ms: now,
            },
        )
    };
    let forged = join("evil\nFAKE LOG LINE joined at epoch 99", net.now);
    let message = wire::MeshMessage {
        kind: Some(Kind::JoinRequest(forged.clone())),
    }
    .encode_to_vec();
    let err = net.deliver(a, &message).expect_err("refused");
    assert!(err.to_string().contains("line break"), "{err}");
    let invite_id = invite::verify(&signed_invite).unwrap().invite_id;
    assert_eq!(
        net.nodes[a].state.invites[&invite_id].status,
        InviteStatus::Open
    );
    assert!(net.nodes[a].state.proposals.is_empty());

    // A's own client proposes the add anyway: B refuses the proposal.
    let body = wire::Proposal {
        mesh_id: mesh_id.to_vec(),
        epoch: net.nodes[a].state.epoch(),
        roster_hash: net.tip(a).to_vec(),
        proposer: net.peer(a),
        created_ms: net.now,
        expires_ms: net.now + 3_600_000,
        change: Some(wire::proposal::Change::Add(forged)),
    };
    let proposal = codec::sign(&net.nodes[a].id, tag::PROPOSAL, &body);
    let message = wire::MeshMessage {
        kind: Some(Kind::Proposal(proposal)),
    }
    .encode_to_vec();
    let err = net.deliver(b, &message).expect_err("refused by B");
    assert!(err.to_string().contains("display name"), "{err}");
    assert!(net.nodes[b].state.proposals.is_empty());

    // The same joiner with a valid name is proposed.
    let message = wire::MeshMessage {
        kind: Some(Kind::JoinRequest(join("Zoë ☕", net.now))),
    }
    .encode_to_vec();
    net.deliver(a, &message).expect("add proposed");
    assert_eq!(net.nodes[a].state.proposals.len(), 1);
}

/// An invite too large to read back (many addresses) is refused when made,
/// and nothing is kept; so is one with a note over the name rule's limit.
#[test]
fn an_invite_that_cannot_be_read_back_is_not_made() {
    let net = Net::mesh(1, 2711);
    let node = &net.nodes[0];
    let many: Vec<String> = (0..200)
        .map(|i| format!("/ip4/127.0.0.1/tcp/{}", 1000 + i))
        .collect();
    let mut rng = StdRng::seed_from_u64(1);
    let err = node
        .state
        .create_invite(&node.id, many, String::new(), None, net.now, &mut rng)
        .unwrap_err();
    assert!(err.to_string().contains("over the 4096"), "{err}");
    let err = node
        .state
        .create_invite(&node.id, vec![], "n".repeat(201), None, net.now, &mut rng)
        .unwrap_err();
    assert!(matches!(err, MeshError::Name(_)), "{err}");
    assert!(node.state.invites.is_empty());
}
