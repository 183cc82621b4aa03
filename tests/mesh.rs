//! Mesh membership: flows, invites, envelopes (proptest), persistence, and a
//! deterministic seeded simulation with loss, reordering, duplication,
//! partitions that heal, restarts and injected bad messages.

use crate::sim;
use grove::identity::Identity;
use grove::mesh::MeshError;
use grove::mesh::codec;
use grove::mesh::envelope::{self, EnvelopeContext, EnvelopeSender};
use grove::mesh::invite;
use grove::mesh::roster::QuorumRule;
use grove::mesh::state::{Dest, MeshState, ProposalChange, Timing, Transition, fixture};
use grove::mesh::store::MeshStore;
use grove::wire::mesh as wire;
use prost::Message;
use rand::SeedableRng;
use rand::rngs::StdRng;

const STEP_MS: i64 = sim::STEP_MS;
/// Random steps per seed of the liveness sweep CI runs (300 seeds).
const LIVENESS_STEPS: usize = 60;

fn timing() -> Timing {
    sim::timing()
}

/// One node of a test: keys, state, and its own mesh.db.
struct Node {
    id: Identity,
    state: MeshState,
    store: MeshStore,
    _dir: tempfile::TempDir,
}

impl Node {
    fn new(rng: &mut StdRng) -> Node {
        let id = Identity::generate(rng);
        let dir = tempfile::tempdir().unwrap();
        let store = MeshStore::open_in(dir.path()).unwrap();
        store.set_synchronous(false).unwrap();
        let state = MeshState::empty(id.public(), timing());
        Node {
            id,
            state,
            store,
            _dir: dir,
        }
    }

    /// Persists and adopts a transition result.
    fn take(
        &mut self,
        r: Result<(MeshState, Transition), MeshError>,
        now: i64,
    ) -> Result<Transition, MeshError> {
        let (s, t) = r?;
        self.store.persist(&t, now).unwrap();
        self.state = s;
        Ok(t)
    }

    /// Reloads the state from mesh.db, as after a restart.
    fn restart(&mut self) {
        let loaded = self.store.load(self.id.public(), timing()).unwrap();
        let mut expected = self.state.clone();
        expected.synced = loaded.synced;
        expected.pending_sync = None;
        assert_eq!(loaded, expected, "state reloaded from mesh.db differs");
        self.state = loaded;
    }
}

fn peer_index(nodes: &[Node], peer: &[u8]) -> Option<usize> {
    nodes.iter().position(|n| n.id.peer_id() == peer)
}

/// Delivers every message of `t` reliably and in order (breadth first).
fn deliver_all(nodes: &mut [Node], from: usize, t: Transition, now: i64, rng: &mut StdRng) {
    deliver(nodes, from, t, now, rng, None);
}

/// A founder plus `extra` members added one by one over a reliable network.
fn mesh_of(n: usize, seed: u64) -> (Vec<Node>, StdRng, i64) {
    mesh_with_quorum(n, seed, QuorumRule::MAJORITY)
}

/// Like `mesh_of`, with the quorum rule chosen at genesis.
fn mesh_with_quorum(n: usize, seed: u64, quorum: QuorumRule) -> (Vec<Node>, StdRng, i64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut nodes = vec![Node::new(&mut rng)];
    let mut now = 1_000_000;
    let r = nodes[0]
        .state
        .init(&nodes[0].id, "test mesh", quorum, now, &mut rng);
    nodes[0].take(r, now).unwrap();
    for _ in 1..n {
        now += STEP_MS;
        add_member(&mut nodes, 0, now, &mut rng);
    }
    (nodes, rng, now)
}

/// Adds a new node through an invite by `inviter`; other members vote yes.
fn add_member(nodes: &mut Vec<Node>, inviter: usize, now: i64, rng: &mut StdRng) -> usize {
    let joiner = nodes.len();
    nodes.push(Node::new(rng));
    let r = nodes[inviter].state.create_invite(
        &nodes[inviter].id,
        vec!["/ip4/127.0.0.1/tcp/1".into()],
        String::new(),
        None,
        now,
        rng,
    );
    let t = nodes[inviter].take(r, now).unwrap();
    let text = t.output.unwrap();
    let r = nodes[joiner]
        .state
        .request_join(&nodes[joiner].id, &text, "joiner", now);
    let t = nodes[joiner].take(r, now).unwrap();
    deliver_all(nodes, joiner, t, now, rng);
    // Everyone else votes yes on the open add proposal.
    for i in 0..nodes.len() {
        if nodes[i].state.is_member() && !nodes[joiner].state.is_member() {
            let open: Vec<[u8; 32]> = nodes[i].state.proposals.keys().copied().collect();
            for p in open {
                let r = nodes[i].state.vote(&nodes[i].id, p, true, now, rng);
                if let Ok(t) = nodes[i].take(r, now) {
                    deliver_all(nodes, i, t, now, rng);
                }
            }
        }
    }
    assert!(nodes[joiner].state.is_member(), "joiner was not added");
    joiner
}

#[test]
fn one_member_mesh_adds_a_joiner_immediately() {
    let (nodes, _, _) = mesh_of(2, 1);
    assert_eq!(nodes[0].state.epoch(), 1);
    assert_eq!(nodes[1].state.epoch(), 1);
    assert_eq!(nodes[0].state.tip, nodes[1].state.tip);
    assert_eq!(
        nodes[0].state.current_secret(),
        nodes[1].state.current_secret()
    );
    assert!(nodes[0].state.current_secret().is_some());
    assert!(nodes[0].store.verify_audit().unwrap().events > 0);
}

#[test]
fn add_needs_quorum_once_there_are_two_members() {
    let (mut nodes, mut rng, now) = mesh_of(2, 2);
    // Third member: the inviter's yes alone (1 of 2) is not a quorum.
    let joiner = nodes.len();
    nodes.push(Node::new(&mut rng));
    let r = nodes[0]
        .state
        .create_invite(&nodes[0].id, vec![], "hi".into(), None, now, &mut rng);
    let text = nodes[0].take(r, now).unwrap().output.unwrap();
    let r = nodes[joiner]
        .state
        .request_join(&nodes[joiner].id, &text, "c", now);
    let t = nodes[joiner].take(r, now).unwrap();
    deliver_all(&mut nodes, joiner, t, now, &mut rng);
    assert_eq!(nodes[0].state.epoch(), 1, "one yes of two must not commit");
    assert!(!nodes[joiner].state.is_member());
    let p = *nodes[1].state.proposals.keys().next().unwrap();
    let r = nodes[1].state.vote(&nodes[1].id, p, true, now, &mut rng);
    let t = nodes[1].take(r, now).unwrap();
    deliver_all(&mut nodes, 1, t, now, &mut rng);
    for n in &nodes {
        assert_eq!(n.state.epoch(), 2);
        assert_eq!(n.state.roster().unwrap().members.len(), 3);
        assert_eq!(n.state.current_secret(), nodes[0].state.current_secret());
    }
}

#[test]
fn invite_refusals_each_have_their_own_message() {
    let (mut nodes, mut rng, now) = mesh_of(1, 3);
    let r = nodes[0].state.create_invite(
        &nodes[0].id,
        vec![],
        String::new(),
        Some(10_000),
        now,
        &mut rng,
    );
    let text = nodes[0].take(r, now).unwrap().output.unwrap();
    let outsider = Node::new(&mut rng);

    // Expired (injected clock).
    let err = outsider
        .state
        .request_join(&outsider.id, &text, "x", now + 10_000)
        .unwrap_err();
    assert_eq!(err, MeshError::InviteExpired);

    // Bad checksum: change one character of the base32 body.
    let mut chars: Vec<char> = text.chars().collect();
    let at = invite::PREFIX.len() + 10;
    chars[at] = if chars[at] == 'a' { 'b' } else { 'a' };
    let bad: String = chars.into_iter().collect();
    assert_eq!(
        outsider
            .state
            .request_join(&outsider.id, &bad, "x", now)
            .unwrap_err(),
        MeshError::InviteChecksum
    );
    // Whitespace and case from copy and paste are fine.
    let pasted = format!("  {}\n{} ", &text[..30].to_uppercase(), &text[30..]);
    assert!(
        outsider
            .state
            .request_join(&outsider.id, &pasted, "x", now)
            .is_ok()
    );

    // Forged: same body, signed by someone else but claiming the inviter.
    let signed = invite::from_text(&text).unwrap();
    let forged = wire::Signed {
        body: signed.body.clone(),
        signer: outsider.id.ed25519_public().to_vec(),
        signature: outsider.id.sign(codec::tag::INVITE, &signed.body).to_vec(),
        ..Default::default()
    };
    assert_eq!(
        outsider
            .state
            .request_join(&outsider.id, &invite::to_text(&forged), "x", now)
            .unwrap_err(),
        MeshError::InviteForged
    );
    let mut altered = signed.clone();
    altered.body[5] ^= 1;
    let err = outsider
        .state
        .request_join(&outsider.id, &invite::to_text(&altered), "x", now)
        .unwrap_err();
    assert!(
        matches!(err, MeshError::InviteForged | MeshError::Malformed { .. }),
        "{err}"
    );

    // Reuse: the first join uses it, the second is refused.
    nodes.push(outsider);
    let r = nodes[1].state.request_join(&nodes[1].id, &text, "x", now);
    let t = nodes[1].take(r, now).unwrap();
    deliver_all(&mut nodes, 1, t, now, &mut rng);
    assert!(nodes[1].state.is_member());
    let mut second = Node::new(&mut rng);
    let r = second.state.request_join(&second.id, &text, "y", now);
    let t = second.take(r, now).unwrap();
    let err = nodes[0]
        .state
        .receive(&nodes[0].id, &t.outbound[0].message, now, &mut rng)
        .unwrap_err();
    assert_eq!(err, MeshError::InviteUsed);

    // Revoked.
    let r = nodes[0]
        .state
        .create_invite(&nodes[0].id, vec![], String::new(), None, now, &mut rng);
    let text2 = nodes[0].take(r, now).unwrap().output.unwrap();
    let id2 = invite::verify(&invite::from_text(&text2).unwrap())
        .unwrap()
        .invite_id;
    let r = nodes[0].state.revoke_invite(&nodes[0].id, id2, now);
    let t = nodes[0].take(r, now).unwrap();
    deliver_all(&mut nodes, 0, t, now, &mut rng);
    assert!(nodes[1].state.revoked.contains_key(&id2));
    let r = second.state.request_join(&second.id, &text2, "y", now);
    // `second` already has a pending join; a fresh node asks instead.
    drop(r);
    let third = Node::new(&mut rng);
    let (_, t) = third
        .state
        .request_join(&third.id, &text2, "z", now)
        .unwrap();
    let err = nodes[0]
        .state
        .receive(&nodes[0].id, &t.outbound[0].message, now, &mut rng)
        .unwrap_err();
    assert_eq!(err, MeshError::InviteRevoked);
}

#[test]
fn invites_of_a_kicked_member_become_void() {
    let (mut nodes, mut rng, mut now) = mesh_of(3, 4);
    let r = nodes[2]
        .state
        .create_invite(&nodes[2].id, vec![], String::new(), None, now, &mut rng);
    let text = nodes[2].take(r, now).unwrap().output.unwrap();
    now += STEP_MS;
    kick(&mut nodes, 0, 2, now, &mut rng);
    assert!(!nodes[2].state.is_member());
    assert!(
        nodes[2]
            .state
            .invites
            .values()
            .all(|i| i.status != grove::mesh::state::InviteStatus::Open)
    );
    let joiner = Node::new(&mut rng);
    let (_, t) = joiner
        .state
        .request_join(&joiner.id, &text, "j", now)
        .unwrap();
    // Any member refuses an add built on it: the inviter is gone.
    let req = match wire::MeshMessage::decode(&t.outbound[0].message[..])
        .unwrap()
        .kind
    {
        Some(wire::mesh_message::Kind::JoinRequest(s)) => s,
        other => panic!("unexpected {other:?}"),
    };
    let err = nodes[0]
        .state
        .propose(&nodes[0].id, ProposalChange::Add(req), now, &mut rng)
        .unwrap_err();
    assert_eq!(err, MeshError::InviteVoid);
}

fn kick(nodes: &mut [Node], by: usize, victim: usize, now: i64, rng: &mut StdRng) {
    let peer = nodes[victim].id.peer_id();
    let r = nodes[by]
        .state
        .propose(&nodes[by].id, ProposalChange::Kick(peer), now, rng);
    let t = nodes[by].take(r, now).unwrap();
    deliver_all(nodes, by, t, now, rng);
    for i in 0..nodes.len() {
        if i != by && nodes[i].state.is_member() {
            let open: Vec<[u8; 32]> = nodes[i].state.proposals.keys().copied().collect();
            for p in open {
                let r = nodes[i].state.vote(&nodes[i].id, p, true, now, rng);
                if let Ok(t) = nodes[i].take(r, now) {
                    deliver_all(nodes, i, t, now, rng);
                }
            }
        }
    }
}

#[test]
fn kicked_member_learns_nothing_of_later_epochs() {
    let (mut nodes, mut rng, mut now) = mesh_of(4, 5);
    let before = nodes[3].state.epoch();
    now += STEP_MS;
    kick(&mut nodes, 0, 3, now, &mut rng);
    assert_eq!(nodes[0].state.epoch(), before + 1);
    // Rotate twice more.
    for _ in 0..2 {
        now += STEP_MS;
        let r = nodes[1]
            .state
            .propose(&nodes[1].id, ProposalChange::Rotate, now, &mut rng);
        let t = nodes[1].take(r, now).unwrap();
        deliver_all(&mut nodes, 1, t, now, &mut rng);
        for i in [0, 2] {
            // The first yes may already complete the quorum.
            let Some(&p) = nodes[i].state.proposals.keys().next() else {
                continue;
            };
            let r = nodes[i].state.vote(&nodes[i].id, p, true, now, &mut rng);
            let t = nodes[i].take(r, now).unwrap();
            deliver_all(&mut nodes, i, t, now, &mut rng);
        }
    }
    assert_eq!(nodes[0].state.epoch(), before + 3);
    assert_kicked_learns_nothing(&nodes[0].state, &nodes[3].id, &nodes[3].state, &mut rng);
    // Its later messages are refused.
    let err = nodes[3]
        .state
        .propose(&nodes[3].id, ProposalChange::Rotate, now, &mut rng)
        .unwrap_err();
    // It is told it was removed, when, and by which proposal.
    let removal = nodes[3].state.removal().unwrap();
    assert_eq!(
        err,
        MeshError::Removed {
            mesh: "test mesh".into(),
            epoch: removal.epoch
        }
    );
    assert!(
        err.to_string()
            .contains("this node is no longer a member of mesh test mesh (removed at epoch"),
        "{err}"
    );
    let removing = &nodes[0].state.rosters[&removal.roster_hash];
    assert!(removing.roster.member(&nodes[3].id.peer_id()).is_none());
    assert!(removal.proposal_hash.is_some() && removal.at_ms.is_some());
    assert!(nodes[0].state.removal().is_none());
}

#[test]
fn a_failed_join_can_be_cancelled_and_leaves_nothing() {
    let (mut nodes, mut rng, now) = mesh_of(1, 35);
    let r = nodes[0]
        .state
        .create_invite(&nodes[0].id, vec![], String::new(), None, now, &mut rng);
    let text = nodes[0].take(r, now).unwrap().output.unwrap();
    let mut joiner = Node::new(&mut rng);
    let r = joiner.state.request_join(&joiner.id, &text, "j", now);
    joiner.take(r, now).unwrap();
    assert!(joiner.state.pending_join.is_some());
    // The inviter is never reached: the joiner gives up.
    let r = joiner.state.cancel_join();
    joiner.take(r, now).unwrap();
    assert!(joiner.state.pending_join.is_none() && joiner.state.mesh.is_none());
    joiner.restart();
    assert!(joiner.state.pending_join.is_none());
    assert!(joiner.state.cancel_join().is_err());
    // It can then found or join a mesh.
    let r = joiner.state.request_join(&joiner.id, &text, "j", now);
    joiner.take(r, now).unwrap();
}

/// Checks that `victim` holds no secret of, and opens no envelope or gossip
/// of, any epoch of `member`'s chain from which it is absent.
fn assert_kicked_learns_nothing(
    m: &MeshState,
    victim: &Identity,
    victim_state: &MeshState,
    rng: &mut StdRng,
) {
    let peer = victim.peer_id();
    for hash in m.chain() {
        let node = &m.rosters[&hash];
        if node.roster.member(&peer).is_some() {
            continue;
        }
        assert!(
            !victim_state.secrets.contains_key(&hash),
            "kicked member holds a secret of epoch {}",
            node.roster.epoch
        );
        let Some(commit) = &node.commit else { continue };
        let signed = wire::Signed::decode(&commit[..]).unwrap();
        let c = wire::Commit::decode(&signed.body[..]).unwrap();
        let core = wire::CommitCore::decode(&c.core[..]).unwrap();
        let eph: [u8; 32] = core.ephemeral_x25519.as_slice().try_into().unwrap();
        let envelopes = grove::mesh::state::envelopes_of(&signed).unwrap();
        for env in envelopes.iter().filter(|e| !e.ciphertext.is_empty()) {
            let ctx = EnvelopeContext {
                mesh_id: &node.roster.mesh_id,
                new_epoch: node.roster.epoch,
                roster_hash: &hash,
                recipient: &env.recipient,
            };
            assert!(
                envelope::open_envelope(victim.x25519_secret(), &eph, &ctx, &env.ciphertext)
                    .is_err()
            );
            let ctx_me = EnvelopeContext {
                recipient: &peer,
                ..ctx
            };
            assert!(
                envelope::open_envelope(victim.x25519_secret(), &eph, &ctx_me, &env.ciphertext)
                    .is_err()
            );
        }
    }
    let g = m.seal_gossip("books", b"only for members", rng).unwrap();
    assert!(victim_state.open_gossip(&g).is_err());
    assert_eq!(m.open_gossip(&g).unwrap(), b"only for members");
}

#[test]
fn equivocation_is_refused_and_evidence_kept() {
    let (mut nodes, mut rng, now) = mesh_of(3, 6);
    // Two proposals by two members at one epoch.
    let r = nodes[0]
        .state
        .propose(&nodes[0].id, ProposalChange::Rotate, now, &mut rng);
    let t0 = nodes[0].take(r, now).unwrap();
    let r = nodes[1].state.propose(
        &nodes[1].id,
        ProposalChange::Quorum(QuorumRule {
            numerator: 2,
            denominator: 3,
        }),
        now,
        &mut rng,
    );
    let t1 = nodes[1].take(r, now).unwrap();
    // Node 2 learns both proposals (not the votes yet).
    for t in [&t0, &t1] {
        let r = nodes[2]
            .state
            .receive(&nodes[2].id, &t.outbound[0].message, now, &mut rng);
        nodes[2].take(r, now).unwrap();
    }
    // Node 0's vote (its proposal's yes) reaches node 1; a forged second vote
    // by node 0 on node 1's proposal is equivocation.
    let vote0 = &t0.outbound[1].message;
    let r = nodes[1].state.receive(&nodes[1].id, vote0, now, &mut rng);
    nodes[1].take(r, now).unwrap();
    let p1 = *nodes[1]
        .state
        .proposals
        .values()
        .find(|p| p.proposer == nodes[1].id.peer_id())
        .map(|p| &p.hash)
        .unwrap();
    let p1rec = nodes[1].state.proposals[&p1].clone();
    let body = wire::Vote {
        mesh_id: nodes[1].state.mesh.as_ref().unwrap().mesh_id.to_vec(),
        epoch: p1rec.epoch,
        roster_hash: p1rec.roster_hash.to_vec(),
        proposal_hash: p1.to_vec(),
        yes: true,
        voter: nodes[0].id.peer_id(),
        proposal_created_ms: p1rec.created_ms,
        proposal_expires_ms: p1rec.expires_ms,
        seq: 0,
        releases: Vec::new(),
    };
    let second = codec::sign(&nodes[0].id, codec::tag::VOTE, &body);
    let msg = wire::MeshMessage {
        kind: Some(wire::mesh_message::Kind::Vote(second)),
    }
    .encode_to_vec();
    let before_epoch = nodes[1].state.epoch();
    let r = nodes[1].state.receive(&nodes[1].id, &msg, now, &mut rng);
    let t = nodes[1].take(r, now).unwrap();
    assert!(matches!(t.refused, Some(MeshError::Equivocation { .. })));
    assert_eq!(nodes[1].state.evidence.len(), 1);
    assert_eq!(
        nodes[1].state.epoch(),
        before_epoch,
        "the equivocating vote must not count"
    );
    // The same evidence again changes nothing.
    assert!(
        nodes[1]
            .state
            .receive(&nodes[1].id, &msg, now, &mut rng)
            .is_err()
    );
    // The evidence survives a restart.
    nodes[1].restart();
    assert_eq!(nodes[1].state.evidence.len(), 1);
}

#[test]
fn expired_proposal_releases_votes_for_a_later_one() {
    let (mut nodes, mut rng, mut now) = mesh_of(3, 7);
    let epoch = nodes[0].state.epoch();
    // Node 0 proposes; nobody else votes; it expires.
    let r = nodes[0]
        .state
        .propose(&nodes[0].id, ProposalChange::Rotate, now, &mut rng);
    let t = nodes[0].take(r, now).unwrap();
    deliver_all(&mut nodes, 0, t, now, &mut rng);
    // Node 0 cannot propose again while its yes is still bound.
    assert!(matches!(
        nodes[0]
            .state
            .propose(&nodes[0].id, ProposalChange::Rotate, now, &mut rng)
            .unwrap_err(),
        MeshError::AlreadyVoted { epoch: e, .. } if e == epoch
    ));
    now += timing().proposal_ttl_ms;
    for node in nodes.iter_mut() {
        let r = node.state.tick(&node.id, now, &mut rng);
        node.take(r, now).unwrap();
        assert!(node.state.proposals.is_empty());
    }
    // A later proposal by node 1 passes with node 0's released vote.
    let r = nodes[1]
        .state
        .propose(&nodes[1].id, ProposalChange::Rotate, now, &mut rng);
    let t = nodes[1].take(r, now).unwrap();
    deliver_all(&mut nodes, 1, t, now, &mut rng);
    let p = *nodes[0].state.proposals.keys().next().unwrap();
    let r = nodes[0].state.vote(&nodes[0].id, p, true, now, &mut rng);
    let t = nodes[0].take(r, now).unwrap();
    deliver_all(&mut nodes, 0, t, now, &mut rng);
    for n in &nodes {
        assert_eq!(n.state.epoch(), epoch + 1);
    }
}

const TWO_THIRDS: QuorumRule = QuorumRule {
    numerator: 2,
    denominator: 3,
};

/// Node `by` proposes `change` (delivered to all); returns the proposal hash.
fn propose_all(
    nodes: &mut [Node],
    by: usize,
    change: ProposalChange,
    now: i64,
    rng: &mut StdRng,
) -> [u8; 32] {
    let r = nodes[by].state.propose(&nodes[by].id, change, now, rng);
    let t = nodes[by].take(r, now).unwrap();
    let hash = t
        .effects
        .iter()
        .find_map(|e| match e {
            grove::mesh::state::Effect::PutProposal(p) => Some(p.hash),
            _ => None,
        })
        .unwrap();
    deliver_all(nodes, by, t, now, rng);
    hash
}

/// Node `by` votes on `p` (delivered to all).
fn vote_all(nodes: &mut [Node], by: usize, p: [u8; 32], yes: bool, now: i64, rng: &mut StdRng) {
    let r = nodes[by].state.vote(&nodes[by].id, p, yes, now, rng);
    let t = nodes[by].take(r, now).unwrap();
    deliver_all(nodes, by, t, now, rng);
}

/// Every node can propose a rotate and have it committed by the others' yes votes.
fn each_can_propose_and_commit(nodes: &mut [Node], now: &mut i64, rng: &mut StdRng) {
    for by in 0..nodes.len() {
        *now += STEP_MS;
        let epoch = nodes[by].state.epoch();
        let p = propose_all(nodes, by, ProposalChange::Rotate, *now, rng);
        for other in (0..nodes.len()).filter(|&o| o != by) {
            if nodes[other].state.epoch() == epoch {
                vote_all(nodes, other, p, true, *now, rng);
            }
        }
        for n in nodes.iter() {
            assert_eq!(
                n.state.epoch(),
                epoch + 1,
                "node {by}'s rotate was not committed"
            );
            assert_eq!(n.state.current_secret(), nodes[by].state.current_secret());
        }
    }
}

#[test]
fn two_members_two_thirds_one_no_rejects_at_once_and_both_can_go_on() {
    use grove::mesh::state::CloseReason;
    let (mut nodes, mut rng, mut now) = mesh_with_quorum(2, 31, TWO_THIRDS);
    assert_eq!(nodes[0].state.roster().unwrap().quorum_needed(), 2);
    let epoch = nodes[0].state.epoch();
    let p = propose_all(&mut nodes, 0, ProposalChange::Rotate, now, &mut rng);
    vote_all(&mut nodes, 1, p, false, now, &mut rng);
    // One no of two members leaves the 2/3 quorum unreachable: rejected at
    // once on both nodes, decided by the same signed no vote.
    for n in &nodes {
        assert!(n.state.proposals.is_empty(), "the proposal is still open");
        assert_eq!(n.state.closed[&p].reason, CloseReason::Rejected);
        assert_eq!(n.state.epoch(), epoch);
        assert!(n.state.evidence.is_empty());
        n.store.verify_audit().unwrap();
    }
    // The rejection survives a restart.
    nodes[1].restart();
    assert_eq!(nodes[1].state.closed[&p].reason, CloseReason::Rejected);
    let r = nodes[1].state.sync_request(&nodes[1].id, now);
    let t = nodes[1].take(r, now).unwrap();
    deliver_all(&mut nodes, 1, t, now, &mut rng);
    // Both members can then propose and commit a rotate, each in turn.
    each_can_propose_and_commit(&mut nodes, &mut now, &mut rng);
    assert_eq!(nodes[0].state.epoch(), epoch + 2);
    for n in &nodes {
        assert!(
            n.state.evidence.is_empty(),
            "an honest release was taken for equivocation"
        );
    }
}

#[test]
fn a_proposer_withdraws_and_every_vote_on_it_is_free() {
    use grove::mesh::state::CloseReason;
    let (mut nodes, mut rng, mut now) = mesh_of(3, 32);
    let p = propose_all(&mut nodes, 0, ProposalChange::Rotate, now, &mut rng);
    vote_all(&mut nodes, 1, p, false, now, &mut rng);
    // Only its proposer may withdraw it.
    assert!(matches!(
        nodes[1].state.withdraw(&nodes[1].id, p, now).unwrap_err(),
        MeshError::NotProposer(_)
    ));
    // Bound votes refuse a new proposal, and say what they wait for.
    let err = nodes[1]
        .state
        .propose(&nodes[1].id, ProposalChange::Rotate, now, &mut rng)
        .unwrap_err();
    assert!(err.to_string().contains(&hex::encode(p)), "{err}");
    assert!(err.to_string().contains("withdrawn"), "{err}");
    let r = nodes[0].state.withdraw(&nodes[0].id, p, now);
    let t = nodes[0].take(r, now).unwrap();
    deliver_all(&mut nodes, 0, t, now, &mut rng);
    for n in &nodes {
        assert!(n.state.proposals.is_empty());
        assert_eq!(n.state.closed[&p].reason, CloseReason::Withdrawn);
    }
    // A second withdrawal changes nothing.
    assert_eq!(
        nodes[0].state.withdraw(&nodes[0].id, p, now).unwrap_err(),
        MeshError::Duplicate("withdrawal")
    );
    each_can_propose_and_commit(&mut nodes, &mut now, &mut rng);
    for n in &nodes {
        assert!(n.state.evidence.is_empty());
    }
}

#[test]
fn a_release_reaches_a_node_that_missed_the_closure_and_late_votes_are_no_evidence() {
    let (mut nodes, mut rng, now) = mesh_of(3, 33);
    // Node 0 proposes rotate and node 2 never hears of it (nor of its withdrawal).
    let r = nodes[0]
        .state
        .propose(&nodes[0].id, ProposalChange::Rotate, now, &mut rng);
    let t = nodes[0].take(r, now).unwrap();
    let first_vote = t.outbound[1].message.clone();
    let p = *nodes[0].state.proposals.keys().next().unwrap();
    for o in &t.outbound {
        let r = nodes[1]
            .state
            .receive(&nodes[1].id, &o.message, now, &mut rng);
        nodes[1].take(r, now).unwrap();
    }
    let r = nodes[0].state.withdraw(&nodes[0].id, p, now);
    nodes[0].take(r, now).unwrap();
    // Node 0 proposes again: its new yes carries the withdrawal that frees the first.
    let r = nodes[0]
        .state
        .propose(&nodes[0].id, ProposalChange::Rotate, now, &mut rng);
    let t = nodes[0].take(r, now).unwrap();
    let released: Vec<Vec<u8>> = t.outbound.iter().map(|o| o.message.clone()).collect();
    let bare = {
        let m = wire::MeshMessage::decode(released[1].as_slice()).unwrap();
        let Some(wire::mesh_message::Kind::ReleasedVote(rv)) = m.kind else {
            panic!("a later vote travels with its release");
        };
        wire::MeshMessage {
            kind: Some(wire::mesh_message::Kind::Vote(rv.vote.unwrap())),
        }
        .encode_to_vec()
    };
    // Without its release, node 2 cannot tell the vote is free: refused, no evidence.
    let r = nodes[2]
        .state
        .receive(&nodes[2].id, &released[0], now, &mut rng);
    nodes[2].take(r, now).unwrap();
    assert_eq!(
        nodes[2]
            .state
            .receive(&nodes[2].id, &bare, now, &mut rng)
            .unwrap_err(),
        MeshError::ReleaseMissing
    );
    // Node 1 holds the released vote but not the withdrawal: refused as well.
    let r = nodes[1]
        .state
        .receive(&nodes[1].id, &released[0], now, &mut rng);
    nodes[1].take(r, now).unwrap();
    assert_eq!(
        nodes[1]
            .state
            .receive(&nodes[1].id, &bare, now, &mut rng)
            .unwrap_err(),
        MeshError::ReleaseMissing
    );
    // Whole, it counts on both, and teaches them the withdrawal.
    for i in [1, 2] {
        let r = nodes[i]
            .state
            .receive(&nodes[i].id, &released[1], now, &mut rng);
        nodes[i].take(r, now).unwrap();
        assert!(nodes[i].state.closed.contains_key(&p));
        assert!(!nodes[i].state.proposals.contains_key(&p));
    }
    // The first vote arriving late at node 2 is outdated, not equivocation.
    let late = nodes[2]
        .state
        .receive(&nodes[2].id, &first_vote, now, &mut rng);
    assert!(late.is_err() || late.unwrap().1.refused.is_none());
    assert!(nodes[2].state.evidence.is_empty());
    // Once a node knows the closure, the bare re-send is a duplicate.
    assert_eq!(
        nodes[1]
            .state
            .receive(&nodes[1].id, &bare, now, &mut rng)
            .unwrap_err(),
        MeshError::Duplicate("vote")
    );
    // The new proposal passes with node 1's yes.
    let q = *nodes[1].state.proposals.keys().next().unwrap();
    let epoch = nodes[0].state.epoch();
    vote_all(&mut nodes, 1, q, true, now, &mut rng);
    for n in &nodes {
        assert_eq!(n.state.epoch(), epoch + 1);
        assert!(n.state.evidence.is_empty());
    }
}

#[test]
fn a_release_that_proves_nothing_is_refused() {
    let (mut nodes, mut rng, now) = mesh_of(3, 34);
    let p = propose_all(&mut nodes, 0, ProposalChange::Rotate, now, &mut rng);
    // Node 1 votes no (not enough to reject: 2 of 3 members must say no).
    vote_all(&mut nodes, 1, p, false, now, &mut rng);
    assert!(nodes[2].state.proposals.contains_key(&p));
    // Node 1 builds a later vote on another proposal whose "release" is its
    // one no vote: it proves nothing, so every node refuses it alike.
    let prev = nodes[1].state.votes[&(nodes[1].state.epoch(), nodes[1].id.peer_id())].clone();
    let prev_signed = wire::Signed::decode(prev.signed.as_slice()).unwrap();
    let roster = nodes[1].state.roster().unwrap().clone();
    let body = wire::Vote {
        mesh_id: roster.mesh_id.to_vec(),
        epoch: roster.epoch,
        roster_hash: nodes[1].state.tip.to_vec(),
        proposal_hash: vec![7; 32],
        yes: true,
        voter: nodes[1].id.peer_id(),
        proposal_created_ms: now,
        proposal_expires_ms: now + 10_000,
        seq: 1,
        releases: codec::hash(codec::label::VOTE, &prev_signed.body).to_vec(),
    };
    let vote = codec::sign(&nodes[1].id, codec::tag::VOTE, &body);
    let msg = wire::MeshMessage {
        kind: Some(wire::mesh_message::Kind::ReleasedVote(wire::ReleasedVote {
            vote: Some(vote),
            release: Some(wire::VoteRelease {
                previous: Some(prev_signed.clone()),
                proposal: None,
                withdrawal: None,
                no_votes: vec![prev_signed],
            }),
        })),
    }
    .encode_to_vec();
    for i in [0, 2] {
        let before = nodes[i].state.clone();
        let err = before
            .receive(&nodes[i].id, &msg, now, &mut rng)
            .unwrap_err();
        assert!(matches!(err, MeshError::InvalidRelease(_)), "{err}");
    }
}

#[test]
fn restarted_node_votes_only_after_sync() {
    let (mut nodes, mut rng, now) = mesh_of(3, 8);
    nodes[2].restart();
    assert!(!nodes[2].state.synced);
    let r = nodes[0]
        .state
        .propose(&nodes[0].id, ProposalChange::Rotate, now, &mut rng);
    let t = nodes[0].take(r, now).unwrap();
    deliver_all(&mut nodes, 0, t, now, &mut rng);
    let p = *nodes[2].state.proposals.keys().next().unwrap();
    assert_eq!(
        nodes[2]
            .state
            .vote(&nodes[2].id, p, true, now, &mut rng)
            .unwrap_err(),
        MeshError::NotSynced
    );
    let r = nodes[2].state.sync_request(&nodes[2].id, now);
    let t = nodes[2].take(r, now).unwrap();
    deliver_all(&mut nodes, 2, t, now, &mut rng);
    assert!(nodes[2].state.synced);
    let r = nodes[2].state.vote(&nodes[2].id, p, true, now, &mut rng);
    let t = nodes[2].take(r, now).unwrap();
    deliver_all(&mut nodes, 2, t, now, &mut rng);
    assert_eq!(nodes[2].state.epoch(), nodes[0].state.epoch());
    assert_eq!(
        nodes[2].state.current_secret(),
        nodes[0].state.current_secret()
    );
}

/// A commit whose envelope for one member does not open: that member
/// follows it without the secret, keeps the evidence, and still has it
/// after a restart.
#[test]
fn a_bad_envelope_strands_no_one_and_its_evidence_survives_a_restart() {
    let (mut nodes, mut rng, mut now) = mesh_of(3, 33);
    now += STEP_MS;
    let epoch = nodes[0].state.epoch();
    let p = propose_all(&mut nodes, 0, ProposalChange::Rotate, now, &mut rng);
    // Node 1's yes makes the quorum; node 0 commits on receiving it.
    let r = nodes[1].state.vote(&nodes[1].id, p, true, now, &mut rng);
    let t = nodes[1].take(r, now).unwrap();
    let mut commit = None;
    for m in &t.outbound {
        let r = nodes[0]
            .state
            .receive(&nodes[0].id, &m.message, now, &mut rng);
        let t0 = nodes[0].take(r, now).unwrap();
        for out in t0.outbound {
            if let Ok(wire::MeshMessage {
                kind: Some(wire::mesh_message::Kind::Commit(c)),
            }) = wire::MeshMessage::decode(out.message.as_slice())
            {
                commit = Some(c);
            }
        }
    }
    let commit = commit.expect("node 0 committed");
    let bad = fixture::with_bad_envelope(&nodes[0].id, &commit, &nodes[2].id.peer_id()).unwrap();
    let message = wire::MeshMessage {
        kind: Some(wire::mesh_message::Kind::Commit(bad)),
    }
    .encode_to_vec();
    let r = nodes[2]
        .state
        .receive(&nodes[2].id, &message, now, &mut rng);
    nodes[2].take(r, now).unwrap();
    let s = &nodes[2].state;
    assert_eq!((s.epoch(), s.tip), (epoch + 1, nodes[0].state.tip));
    assert!(s.is_member() && s.current_secret().is_none());
    assert_eq!(s.bad_envelopes.len(), 1);
    assert_eq!(s.bad_envelopes[0].committer, nodes[0].id.peer_id());
    assert_eq!(s.bad_envelopes[0].epoch, epoch + 1);
    assert_eq!(
        s.bad_envelopes[0].commit_hash,
        nodes[0].state.roster().unwrap().commit_hash
    );
    nodes[2].restart();
    assert_eq!(nodes[2].state.bad_envelopes.len(), 1);
    nodes[2].store.verify_audit().unwrap();
}

#[test]
fn erased_secret_is_gone_from_the_database_file() {
    let (mut nodes, mut rng, mut now) = mesh_of(1, 9);
    let old = *nodes[0].state.current_secret().unwrap().expose();
    let r = nodes[0]
        .state
        .propose(&nodes[0].id, ProposalChange::Rotate, now, &mut rng);
    nodes[0].take(r, now).unwrap();
    assert_ne!(nodes[0].state.current_secret().unwrap().expose(), &old);
    now += timing().key_grace_ms;
    let r = nodes[0].state.tick(&nodes[0].id, now, &mut rng);
    let t = nodes[0].take(r, now).unwrap();
    assert!(t.audit.iter().any(|a| a.kind == "mesh.secret.erase"));
    assert_eq!(nodes[0].state.secrets.len(), 1);
    let dir = nodes[0]._dir.path().to_path_buf();
    for name in ["mesh.db", "mesh.db-wal"] {
        if let Ok(bytes) = std::fs::read(dir.join(name)) {
            assert!(
                !bytes.windows(32).any(|w| w == old),
                "erased secret still in {name}"
            );
        }
    }
    nodes[0].store.verify_audit().unwrap();
}

#[test]
fn gossip_is_bound_to_mesh_epoch_and_topic_and_old_key_has_a_grace_window() {
    let (mut nodes, mut rng, mut now) = mesh_of(2, 10);
    let g = nodes[0]
        .state
        .seal_gossip("moots", b"hello", &mut rng)
        .unwrap();
    assert_eq!(nodes[1].state.open_gossip(&g).unwrap(), b"hello");
    let mut other_topic = g.clone();
    other_topic.topic = "books".into();
    assert!(nodes[1].state.open_gossip(&other_topic).is_err());
    let mut other_epoch = g.clone();
    other_epoch.epoch += 1;
    assert!(nodes[1].state.open_gossip(&other_epoch).is_err());
    // Rotate: the old epoch's gossip still opens inside the grace window only.
    let r = nodes[0]
        .state
        .propose(&nodes[0].id, ProposalChange::Rotate, now, &mut rng);
    let t = nodes[0].take(r, now).unwrap();
    deliver_all(&mut nodes, 0, t, now, &mut rng);
    let p = *nodes[1].state.proposals.keys().next().unwrap();
    let r = nodes[1].state.vote(&nodes[1].id, p, true, now, &mut rng);
    let t = nodes[1].take(r, now).unwrap();
    deliver_all(&mut nodes, 1, t, now, &mut rng);
    assert_eq!(nodes[1].state.epoch(), g.epoch + 1);
    assert_eq!(nodes[1].state.open_gossip(&g).unwrap(), b"hello");
    now += timing().key_grace_ms;
    let r = nodes[1].state.tick(&nodes[1].id, now, &mut rng);
    nodes[1].take(r, now).unwrap();
    assert!(nodes[1].state.open_gossip(&g).is_err());
}

#[test]
fn bad_quorum_rule_is_refused() {
    let (nodes, mut rng, now) = mesh_of(2, 11);
    let err = nodes[0]
        .state
        .propose(
            &nodes[0].id,
            ProposalChange::Quorum(QuorumRule {
                numerator: 1,
                denominator: 3,
            }),
            now,
            &mut rng,
        )
        .unwrap_err();
    assert!(matches!(err, MeshError::BadQuorum { .. }));
}

mod envelope_props {
    use super::*;
    use proptest::prelude::*;

    fn setup(seed: u64) -> (x25519_dalek::StaticSecret, [u8; 32], Vec<u8>, [u8; 32]) {
        let mut rng = StdRng::seed_from_u64(seed);
        let secret = x25519_dalek::StaticSecret::random_from_rng(&mut rng);
        let public = x25519_dalek::PublicKey::from(&secret).to_bytes();
        let sender = EnvelopeSender::new(&mut rng);
        let ctx = EnvelopeContext {
            mesh_id: &[3; 16],
            new_epoch: 7,
            roster_hash: &[4; 32],
            recipient: b"peer-a",
        };
        let ct = sender.wrap(&public, &ctx, &[5; 32]).unwrap();
        (secret, sender.ephemeral_public(), ct, public)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn any_changed_byte_fails(seed in any::<u64>(), at in 0usize..48, flip in 1u8..=255) {
            let (secret, eph, mut ct, _) = setup(seed);
            ct[at] ^= flip;
            let ctx = EnvelopeContext { mesh_id: &[3; 16], new_epoch: 7, roster_hash: &[4; 32], recipient: b"peer-a" };
            prop_assert!(envelope::open_envelope(&secret, &eph, &ctx, &ct).is_err());
        }

        #[test]
        fn any_changed_context_fails(seed in any::<u64>(), which in 0u8..4, byte in 0usize..16, flip in 1u8..=255) {
            let (secret, eph, ct, _) = setup(seed);
            let mut mesh_id = [3u8; 16];
            let mut epoch = 7u64;
            let mut roster = [4u8; 32];
            let mut recipient = b"peer-a".to_vec();
            match which {
                0 => mesh_id[byte] ^= flip,
                1 => epoch ^= u64::from(flip) << (byte % 8),
                2 => roster[byte] ^= flip,
                _ => recipient[byte % 6] ^= flip,
            }
            let ctx = EnvelopeContext { mesh_id: &mesh_id, new_epoch: epoch, roster_hash: &roster, recipient: &recipient };
            prop_assert!(envelope::open_envelope(&secret, &eph, &ctx, &ct).is_err());
        }

        #[test]
        fn changed_ephemeral_or_other_recipient_fails(seed in any::<u64>(), other in any::<u64>(), byte in 0usize..32, flip in 1u8..=255) {
            let (secret, mut eph, ct, _) = setup(seed);
            let ctx = EnvelopeContext { mesh_id: &[3; 16], new_epoch: 7, roster_hash: &[4; 32], recipient: b"peer-a" };
            prop_assert_eq!(*envelope::open_envelope(&secret, &eph, &ctx, &ct).unwrap().expose(), [5u8; 32]);
            let mut rng = StdRng::seed_from_u64(other);
            let stranger = x25519_dalek::StaticSecret::random_from_rng(&mut rng);
            prop_assert!(envelope::open_envelope(&stranger, &eph, &ctx, &ct).is_err());
            eph[byte] ^= flip;
            prop_assert!(envelope::open_envelope(&secret, &eph, &ctx, &ct).is_err());
        }

        #[test]
        fn gossip_any_change_fails(seed in any::<u64>(), at in 0usize..40, flip in 1u8..=255) {
            let mut rng = StdRng::seed_from_u64(seed);
            let key = envelope::gossip_key(&[1; 16], 3, &[2; 32]);
            let (nonce, mut ct) = envelope::seal_gossip(&key, &[1; 16], 3, "t", &[9u8; 24], &mut rng).unwrap();
            prop_assert!(envelope::open_gossip(&key, &[1; 16], 3, "t", &nonce, &ct).is_ok());
            prop_assert!(envelope::open_gossip(&key, &[1; 16], 4, "t", &nonce, &ct).is_err());
            prop_assert!(envelope::open_gossip(&key, &[2; 16], 3, "t", &nonce, &ct).is_err());
            let other = envelope::gossip_key(&[1; 16], 4, &[2; 32]);
            prop_assert!(envelope::open_gossip(&other, &[1; 16], 3, "t", &nonce, &ct).is_err());
            ct[at] ^= flip;
            prop_assert!(envelope::open_gossip(&key, &[1; 16], 3, "t", &nonce, &ct).is_err());
        }
    }
}

// ----- the seeded simulation (src/bin/grove-bench/sim.rs), persisted ------------------

/// Each simulated node's transitions go to its own mesh.db; a restart loads
/// it again and checks it matches the state the node had.
#[derive(Default)]
struct Stores {
    stores: Vec<(MeshStore, tempfile::TempDir)>,
}

impl sim::Storage for Stores {
    fn add_node(&mut self, _id: &Identity) {
        let dir = tempfile::tempdir().unwrap();
        let store = MeshStore::open_in(dir.path()).unwrap();
        store.set_synchronous(false).unwrap();
        self.stores.push((store, dir));
    }

    fn persist(&mut self, node: usize, t: &Transition, now_ms: i64) {
        self.stores[node].0.persist(t, now_ms).unwrap();
    }

    fn reload(&mut self, node: usize, current: &MeshState) -> MeshState {
        let loaded = self.stores[node]
            .0
            .load(current.me.clone(), sim::timing())
            .unwrap();
        let mut expected = current.clone();
        expected.synced = loaded.synced;
        expected.pending_sync = None;
        assert_eq!(loaded, expected, "state reloaded from mesh.db differs");
        loaded
    }
}

fn run_simulation(seed: u64) {
    run_simulation_with(seed, 5, 0.1);
}

fn run_simulation_with(seed: u64, members: usize, loss: f64) {
    let cfg = sim::Config::new(members, loss);
    let mut sim = sim::Sim::new(seed, cfg, QuorumRule::MAJORITY, Stores::default()).unwrap();
    let mut report = sim.run_random().unwrap_or_else(|e| panic!("{e}"));
    sim.heal_and_settle();
    // Honest members that received the same messages agree; no node applied
    // two commits at one epoch except by the convergent switch.
    sim.check_agreement(&mut report)
        .unwrap_or_else(|e| panic!("{e}"));
    let members = sim.members();
    for &m in &members {
        sim.storage.stores[m].0.verify_audit().unwrap();
    }
    // Kicked members learn nothing of later epochs.
    let mut kicked = 0;
    for v in &sim.nodes {
        let s = &v.state;
        if s.mesh.is_some() && !s.is_member() && s.pending_join.is_none() {
            kicked += 1;
            let member = &sim.nodes[members[0]].state;
            assert_kicked_learns_nothing(member, &v.id, s, &mut StdRng::seed_from_u64(seed));
        }
    }
    // Liveness from the settled state too (the run checked it on the way).
    sim.check_liveness(&mut report, usize::MAX)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.refused_injections > 0);
    eprintln!("seed {seed}: kicked {kicked} {report:?}");
}

#[test]
fn simulation_seed_1() {
    run_simulation(101);
}

#[test]
fn simulation_seed_2() {
    run_simulation(202);
}

#[test]
fn simulation_seed_3() {
    run_simulation(303);
}

#[test]
fn simulation_seed_4() {
    run_simulation(404);
}

#[test]
fn stale_forged_truncated_and_outsider_messages_change_nothing() {
    let (mut nodes, mut rng, mut now) = mesh_of(3, 12);
    // A vote and a proposal of epoch E, kept for replay after the epoch moves on.
    let r = nodes[0]
        .state
        .propose(&nodes[0].id, ProposalChange::Rotate, now, &mut rng);
    let t = nodes[0].take(r, now).unwrap();
    let old_proposal = t.outbound[0].message.clone();
    let old_vote = t.outbound[1].message.clone();
    deliver_all(&mut nodes, 0, t, now, &mut rng);
    let p = *nodes[1].state.proposals.keys().next().unwrap();
    let r = nodes[1].state.vote(&nodes[1].id, p, true, now, &mut rng);
    let t = nodes[1].take(r, now).unwrap();
    let commit_msg = nodes[0].state.tip_node().unwrap().commit.clone();
    deliver_all(&mut nodes, 1, t, now, &mut rng);
    assert!(commit_msg.is_some());
    now += STEP_MS;
    let target = &nodes[2];
    let before = target.state.clone();
    let outsider = Identity::generate(&mut rng);
    let commit_bytes = {
        let s =
            wire::Signed::decode(&nodes[2].state.tip_node().unwrap().commit.clone().unwrap()[..])
                .unwrap();
        wire::MeshMessage {
            kind: Some(wire::mesh_message::Kind::Commit(s)),
        }
        .encode_to_vec()
    };
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("stale proposal", old_proposal.clone()),
        ("stale vote", old_vote.clone()),
        ("replayed commit", commit_bytes.clone()),
        ("forged proposal", sim::forge(&old_proposal, &outsider)),
        ("forged commit", sim::forge(&commit_bytes, &outsider)),
        ("empty", Vec::new()),
        ("garbage", vec![0xff; 40]),
    ];
    for cut in [1, commit_bytes.len() / 2, commit_bytes.len() - 1] {
        cases.push(("truncated commit", commit_bytes[..cut].to_vec()));
    }
    // A non-canonical encoding of a valid message: an unknown field appended.
    let mut padded = old_vote.clone();
    padded.extend_from_slice(&[0x78, 0x01]);
    cases.push(("non-canonical vote", padded));
    // An outsider's well-formed, correctly signed proposal for the current roster.
    let roster = target.state.roster().unwrap();
    let body = wire::Proposal {
        mesh_id: roster.mesh_id.to_vec(),
        epoch: roster.epoch,
        roster_hash: target.state.tip.to_vec(),
        proposer: outsider.peer_id(),
        created_ms: now,
        expires_ms: now + 10_000,
        change: Some(wire::proposal::Change::Rotate(vec![1; 16])),
    };
    let outsider_proposal = wire::MeshMessage {
        kind: Some(wire::mesh_message::Kind::Proposal(codec::sign(
            &outsider,
            codec::tag::PROPOSAL,
            &body,
        ))),
    }
    .encode_to_vec();
    cases.push(("outsider proposal", outsider_proposal));
    for (what, bytes) in cases {
        let r = target.state.receive(&target.id, &bytes, now, &mut rng);
        assert!(r.is_err(), "{what} was accepted");
        assert_eq!(target.state, before, "{what} changed state");
    }
}

#[test]
fn mesh_db_is_private_and_a_readable_one_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = MeshStore::open_in(dir.path()).unwrap();
    drop(store);
    let db = grove::state_dir::StateDir::new(dir.path()).mesh_db();
    let mode = std::fs::metadata(&db).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = MeshStore::open_in(dir.path()).err().unwrap();
    assert!(err.to_string().contains("chmod 600"), "{err}");
}

#[test]
fn state_lock_is_exclusive_and_released_on_drop() {
    let dir = tempfile::tempdir().unwrap();
    let lock = grove::mesh::store::StateLock::acquire(dir.path()).unwrap();
    assert!(grove::mesh::store::StateLock::acquire(dir.path()).is_err());
    drop(lock);
    assert!(grove::mesh::store::StateLock::acquire(dir.path()).is_ok());
}

#[test]
fn joiner_whose_welcome_was_lost_asks_again_and_catches_up() {
    let (mut nodes, mut rng, mut now) = mesh_of(2, 13);
    let r = nodes[0]
        .state
        .create_invite(&nodes[0].id, vec![], String::new(), None, now, &mut rng);
    let text = nodes[0].take(r, now).unwrap().output.unwrap();
    let joiner = nodes.len();
    nodes.push(Node::new(&mut rng));
    let r = nodes[joiner]
        .state
        .request_join(&nodes[joiner].id, &text, "late", now);
    let t = nodes[joiner].take(r, now).unwrap();
    // The inviter proposes; member 1 votes; the commit reaches members only.
    let r = nodes[0]
        .state
        .receive(&nodes[0].id, &t.outbound[0].message, now, &mut rng);
    let t0 = nodes[0].take(r, now).unwrap();
    for o in &t0.outbound {
        let r = nodes[1]
            .state
            .receive(&nodes[1].id, &o.message, now, &mut rng);
        let _ = nodes[1].take(r, now);
    }
    let p = *nodes[1].state.proposals.keys().next().unwrap();
    let r = nodes[1].state.vote(&nodes[1].id, p, true, now, &mut rng);
    let t1 = nodes[1].take(r, now).unwrap();
    let r = nodes[0]
        .state
        .receive(&nodes[0].id, &t1.outbound[0].message, now, &mut rng);
    let t0 = nodes[0].take(r, now).unwrap();
    assert!(
        t0.outbound
            .iter()
            .any(|o| o.to == Dest::Peer(nodes[joiner].id.peer_id()))
    );
    assert!(!nodes[joiner].state.is_member(), "the welcome was dropped");
    // Meanwhile the mesh moves on one more epoch.
    now += STEP_MS;
    let r = nodes[1]
        .state
        .receive(&nodes[1].id, &t0.outbound[0].message, now, &mut rng);
    nodes[1].take(r, now).unwrap();
    let r = nodes[0]
        .state
        .propose(&nodes[0].id, ProposalChange::Rotate, now, &mut rng);
    let t = nodes[0].take(r, now).unwrap();
    deliver_all(&mut nodes, 0, t, now, &mut rng);
    let p = *nodes[1].state.proposals.keys().next().unwrap();
    let r = nodes[1].state.vote(&nodes[1].id, p, true, now, &mut rng);
    let t = nodes[1].take(r, now).unwrap();
    deliver_all(&mut nodes, 1, t, now, &mut rng);
    // The joiner asks again with the same invite and gets the welcome, then syncs.
    now += STEP_MS;
    let r = nodes[joiner]
        .state
        .request_join(&nodes[joiner].id, &text, "late", now);
    let t = nodes[joiner].take(r, now).unwrap();
    deliver_all(&mut nodes, joiner, t, now, &mut rng);
    assert!(nodes[joiner].state.mesh.is_some());
    let r = nodes[joiner].state.sync_request(&nodes[joiner].id, now);
    let t = nodes[joiner].take(r, now).unwrap();
    deliver_all(&mut nodes, joiner, t, now, &mut rng);
    assert_eq!(nodes[joiner].state.tip, nodes[0].state.tip);
    assert_eq!(
        nodes[joiner].state.current_secret(),
        nodes[0].state.current_secret()
    );
    // Another node cannot reuse the invite.
    let stranger = Node::new(&mut rng);
    let (_, t) = stranger
        .state
        .request_join(&stranger.id, &text, "x", now)
        .unwrap();
    assert_eq!(
        nodes[0]
            .state
            .receive(&nodes[0].id, &t.outbound[0].message, now, &mut rng)
            .unwrap_err(),
        MeshError::InviteUsed
    );
}

#[test]
fn simulation_seven_members_heavy_loss() {
    run_simulation_with(505, 7, 0.3);
}

#[test]
fn simulation_three_members_light_loss() {
    run_simulation_with(606, 3, 0.02);
}

/// A longer sweep over many seeds (run with `--ignored`).
#[test]
#[ignore]
fn simulation_many_seeds() {
    for seed in 1000..1040 {
        run_simulation_with(
            seed,
            3 + (seed as usize % 5),
            0.05 + (seed % 4) as f64 * 0.07,
        );
    }
}

/// Liveness over a sweep of seeds (2 to 6 members, both quorum rules, loss
/// up to 0.26), in memory: from the states each run reaches, with a quorum
/// online (all members, or some offline), every proposal is decided and a
/// next one is committed. `grove-bench mesh liveness` runs the same sweep
/// over 10,000 seeds. Split in three so the parts run side by side.
fn liveness_sweep(seeds: std::ops::Range<u64>) {
    let start = std::time::Instant::now();
    let mut failed = Vec::new();
    let mut total = sim::Report::default();
    let count = seeds.end - seeds.start;
    for seed in seeds {
        let (cfg, quorum) = sim::Config::sweep(seed, LIVENESS_STEPS);
        match sim::run(seed, cfg, quorum) {
            Ok(r) => {
                total.liveness_checks += r.liveness_checks;
                total.offline_checks += r.offline_checks;
                total.rejected += r.rejected;
                total.withdrawn += r.withdrawn;
                total.committed += r.committed;
                total.expired += r.expired;
                total.approved_adds += r.approved_adds;
                total.key_updates += r.key_updates;
            }
            Err(e) => failed.push(e.to_string()),
        }
    }
    eprintln!(
        "{count} seeds in {:.1} s: {} stuck or failed; {total:?}",
        start.elapsed().as_secs_f64(),
        failed.len()
    );
    assert!(failed.is_empty(), "{failed:#?}");
    assert!(total.offline_checks > 0, "no check had members offline");
    assert!(
        total.rejected > 0 && total.withdrawn > 0 && total.committed > 0,
        "the checks never saw a rejection, a withdrawal and a commit"
    );
    assert!(
        total.approved_adds > 0,
        "no run added a member on a pre-approved invite"
    );
    assert!(total.key_updates > 0, "no run committed a key update");
}

#[test]
fn simulation_liveness_seeds_0_to_99() {
    liveness_sweep(0..100);
}

#[test]
fn simulation_liveness_seeds_100_to_199() {
    liveness_sweep(100..200);
}

#[test]
fn simulation_liveness_seeds_200_to_299() {
    liveness_sweep(200..300);
}

/// `node` issues an invite; returns its text and signed form.
fn issue_invite(node: &mut Node, now: i64, rng: &mut StdRng) -> (String, wire::Signed) {
    let r = node.state.create_invite(
        &node.id,
        vec!["/ip4/127.0.0.1/tcp/1".into()],
        String::new(),
        None,
        now,
        rng,
    );
    let text = node.take(r, now).unwrap().output.unwrap();
    let signed = invite::from_text(&text).unwrap();
    (text, signed)
}

#[test]
fn a_pre_approved_invite_adds_on_the_inviters_yes_once_and_revoking_is_a_commit() {
    let (mut nodes, mut rng, mut now) = mesh_of(3, 41);
    let epoch = nodes[0].state.epoch();
    let (text, signed) = issue_invite(&mut nodes[0], now, &mut rng);
    let id = invite::verify(&signed).unwrap().invite_id;
    // The approval is an ordinary proposal with the usual quorum.
    let p = propose_all(
        &mut nodes,
        0,
        ProposalChange::Approve {
            invite: signed.clone(),
            name: "dora".into(),
        },
        now,
        &mut rng,
    );
    assert_eq!(nodes[0].state.epoch(), epoch, "one yes of three");
    vote_all(&mut nodes, 1, p, true, now, &mut rng);
    for n in &nodes {
        assert_eq!(n.state.epoch(), epoch + 1);
        let a = n.state.roster().unwrap().approval(&id).expect("approved");
        assert_eq!(a.approved_epoch, epoch + 1);
    }
    now += STEP_MS;
    let joiner = nodes.len();
    nodes.push(Node::new(&mut rng));
    let r = nodes[joiner]
        .state
        .request_join(&nodes[joiner].id, &text, "dora", now);
    let t = nodes[joiner].take(r, now).unwrap();
    deliver_all(&mut nodes, joiner, t, now, &mut rng);
    // Added on the inviter's yes alone: every member checked the one-vote
    // commit against the approval in its roster.
    assert!(nodes[joiner].state.is_member(), "not added without a vote");
    for n in &nodes {
        assert_eq!(n.state.epoch(), epoch + 2);
        assert_eq!(n.state.tip, nodes[0].state.tip);
        assert!(
            n.state.roster().unwrap().approval(&id).is_none(),
            "single use"
        );
    }
    nodes[1].restart();
    let r = nodes[1].state.sync_request(&nodes[1].id, now);
    let t = nodes[1].take(r, now).unwrap();
    deliver_all(&mut nodes, 1, t, now, &mut rng);
    // Used: a second joiner presenting it is refused.
    let late = nodes.len();
    nodes.push(Node::new(&mut rng));
    let r = nodes[late]
        .state
        .request_join(&nodes[late].id, &text, "dora", now);
    let t = nodes[late].take(r, now).unwrap();
    let request = t.outbound[0].message.clone();
    let r = nodes[0]
        .state
        .receive(&nodes[0].id, &request, now, &mut rng);
    assert_eq!(r.unwrap_err(), MeshError::InviteUsed);
    nodes.pop();
    // A one-vote add without an approval is refused by every member.
    now += STEP_MS;
    let (text2, _) = issue_invite(&mut nodes[0], now, &mut rng);
    let stranger = nodes.len();
    nodes.push(Node::new(&mut rng));
    let r = nodes[stranger]
        .state
        .request_join(&nodes[stranger].id, &text2, "eve", now);
    let t = nodes[stranger].take(r, now).unwrap();
    deliver_all(&mut nodes, stranger, t, now, &mut rng);
    assert!(!nodes[stranger].state.is_member(), "added without a quorum");
    assert_eq!(nodes[0].state.epoch(), epoch + 2);
    let open: Vec<[u8; 32]> = nodes[0].state.proposals.keys().copied().collect();
    for p in open {
        let r = nodes[0].state.withdraw(&nodes[0].id, p, now);
        let t = nodes[0].take(r, now).unwrap();
        deliver_all(&mut nodes, 0, t, now, &mut rng);
    }
    nodes.pop();
    // Revoking an approval is itself a commit (quorum).
    now += STEP_MS;
    let (_, signed3) = issue_invite(&mut nodes[1], now, &mut rng);
    let id3 = invite::verify(&signed3).unwrap().invite_id;
    let p = propose_all(
        &mut nodes,
        1,
        ProposalChange::Approve {
            invite: signed3,
            name: String::new(),
        },
        now,
        &mut rng,
    );
    vote_all(&mut nodes, 2, p, true, now, &mut rng);
    vote_all(&mut nodes, 3, p, true, now, &mut rng);
    assert!(nodes[3].state.roster().unwrap().approval(&id3).is_some());
    now += STEP_MS;
    let p = propose_all(
        &mut nodes,
        2,
        ProposalChange::RevokeApproval(id3),
        now,
        &mut rng,
    );
    vote_all(&mut nodes, 3, p, true, now, &mut rng);
    vote_all(&mut nodes, 0, p, true, now, &mut rng);
    for n in &nodes {
        assert_eq!(n.state.epoch(), epoch + 4);
        assert!(n.state.roster().unwrap().approved.is_empty());
        assert!(n.state.evidence.is_empty());
        n.store.verify_audit().unwrap();
    }
}

/// Every member, founder and joiners alike (theirs came in the welcome),
/// holds the chain from a genesis that hashes to the mesh id; the chain
/// replays offline to the tip roster at every epoch up to 20 with 10
/// members; a chain with a commit below quorum, a forged genesis, or a
/// welcome whose chain was cut, is refused.
#[test]
fn the_chain_from_a_self_certifying_genesis_replays_offline() {
    use grove::mesh::roster::Roster;
    use grove::mesh::state::{Anchor, verify_chain};
    let (mut nodes, mut rng, mut now) = mesh_of(10, 20);
    rotate_to(&mut nodes, 20, &mut now, &mut rng);
    for (i, n) in nodes.iter().enumerate() {
        let (genesis, commits) = n
            .state
            .chain_from_genesis()
            .unwrap_or_else(|| panic!("node {i} holds no chain from the genesis"));
        assert!(Roster::decode(&genesis).unwrap().self_certifies());
        let chain = verify_chain(&genesis, &commits).unwrap();
        assert_eq!(chain.anchor, Anchor::Genesis);
        assert_eq!(chain.mesh_id(), n.state.mesh_id().unwrap());
        assert_eq!(Some(chain.tip()), n.state.roster(), "node {i}");
        assert_eq!(chain.epochs(), 21);
    }
    let (genesis, commits) = nodes[0].state.chain_from_genesis().unwrap();
    let bytes = genesis.len()
        + commits
            .iter()
            .map(|c| c.encode_to_vec().len())
            .sum::<usize>();
    eprintln!("the chain of 20 epochs with 10 members: {bytes} bytes");

    // A commit with a vote taken out, re-signed by its own committer: the
    // chain breaks there, below quorum.
    let k = 15;
    let parsed: wire::Commit = prost::Message::decode(commits[k].body.as_slice()).unwrap();
    let mut core: wire::CommitCore = prost::Message::decode(parsed.core.as_slice()).unwrap();
    core.votes.truncate(core.votes.len() - 1);
    let committer = nodes
        .iter()
        .find(|n| n.id.peer_id() == core.committer)
        .unwrap();
    let mut short = commits.clone();
    short[k] = codec::sign(
        &committer.id,
        codec::tag::COMMIT,
        &wire::Commit {
            core: core.encode_to_vec(),
            ..parsed
        },
    );
    let err = verify_chain(&genesis, &short).unwrap_err().to_string();
    assert!(err.contains("epoch 16") && err.contains("quorum"), "{err}");

    // A genesis of the founder's own making under the same id: it does
    // not hash to it; without its nonce it reads as a legacy id.
    let mut forged = Roster::decode(&genesis).unwrap();
    forged.mesh_name = "forged".into();
    let err = verify_chain(&forged.encode(), &[]).unwrap_err().to_string();
    assert!(err.contains("does not hash to its mesh id"), "{err}");
    forged.genesis_nonce = None;
    assert_eq!(
        verify_chain(&forged.encode(), &[]).unwrap().anchor,
        Anchor::Legacy
    );

    // A welcome whose chain lost a commit is refused by the joiner.
    now += STEP_MS;
    let joiner = nodes.len();
    nodes.push(Node::new(&mut rng));
    let r = nodes[0].state.create_invite(
        &nodes[0].id,
        vec!["/ip4/127.0.0.1/tcp/1".into()],
        String::new(),
        None,
        now,
        &mut rng,
    );
    let text = nodes[0].take(r, now).unwrap().output.unwrap();
    let r = nodes[joiner]
        .state
        .request_join(&nodes[joiner].id, &text, "joiner", now);
    let t = nodes[joiner].take(r, now).unwrap();
    let mut held = Vec::new();
    deliver_holding_welcomes(&mut nodes, joiner, t, now, &mut rng, &mut held);
    for i in 0..joiner {
        let open: Vec<[u8; 32]> = nodes[i].state.proposals.keys().copied().collect();
        for p in open {
            let r = nodes[i].state.vote(&nodes[i].id, p, true, now, &mut rng);
            if let Ok(t) = nodes[i].take(r, now) {
                deliver_holding_welcomes(&mut nodes, i, t, now, &mut rng, &mut held);
            }
        }
    }
    let welcome = held.into_iter().next();
    let welcome = welcome.expect("the joiner's welcome");
    let mut message = wire::MeshMessage::decode(welcome.as_slice()).unwrap();
    let Some(wire::mesh_message::Kind::Welcome(w)) = message.kind.as_mut() else {
        panic!("not a welcome");
    };
    assert_eq!(w.chain.len(), 20, "the welcome carries the chain");
    w.chain.remove(3);
    let cut = message.encode_to_vec();
    let r = nodes[joiner]
        .state
        .receive(&nodes[joiner].id, &cut, now, &mut rng);
    let err = r.unwrap_err().to_string();
    assert!(err.contains("welcome's chain"), "{err}");
    let r = nodes[joiner]
        .state
        .receive(&nodes[joiner].id, &welcome, now, &mut rng);
    nodes[joiner].take(r, now).unwrap();
    assert!(nodes[joiner].state.is_member());
    assert!(nodes[joiner].state.chain_from_genesis().is_some());
}

/// Like [`deliver_all`], but welcomes are held in `held`, not delivered.
fn deliver_holding_welcomes(
    nodes: &mut [Node],
    from: usize,
    t: Transition,
    now: i64,
    rng: &mut StdRng,
    held: &mut Vec<Vec<u8>>,
) {
    deliver(nodes, from, t, now, rng, Some(held));
}

/// Delivers every message of `t` reliably and in order (breadth first);
/// with `held`, welcomes go there instead of to their joiner.
fn deliver(
    nodes: &mut [Node],
    from: usize,
    t: Transition,
    now: i64,
    rng: &mut StdRng,
    mut held: Option<&mut Vec<Vec<u8>>>,
) {
    let mut queue: Vec<(usize, Dest, Vec<u8>)> = t
        .outbound
        .into_iter()
        .map(|o| (from, o.to, o.message))
        .collect();
    while !queue.is_empty() {
        let (sender, to, msg) = queue.remove(0);
        if let Some(held) = held.as_deref_mut()
            && wire::MeshMessage::decode(msg.as_slice())
                .is_ok_and(|m| matches!(m.kind, Some(wire::mesh_message::Kind::Welcome(_))))
        {
            held.push(msg);
            continue;
        }
        let targets: Vec<usize> = match to {
            Dest::All => (0..nodes.len())
                .filter(|&i| i != sender && nodes[i].state.mesh.is_some())
                .collect(),
            Dest::Peer(p) => peer_index(nodes, &p).into_iter().collect(),
        };
        for i in targets {
            let r = nodes[i].state.receive(&nodes[i].id, &msg, now, rng);
            if let Ok(t) = nodes[i].take(r, now) {
                queue.extend(t.outbound.into_iter().map(|o| (i, o.to, o.message)));
            }
        }
    }
}

/// Rotates, each member proposing in turn, until the mesh is at `epoch`.
fn rotate_to(nodes: &mut [Node], epoch: u64, now: &mut i64, rng: &mut StdRng) {
    while nodes[0].state.epoch() < epoch {
        *now += STEP_MS;
        let at = nodes[0].state.epoch();
        let by = at as usize % nodes.len();
        let p = propose_all(nodes, by, ProposalChange::Rotate, *now, rng);
        for other in (0..nodes.len()).filter(|&o| o != by) {
            if nodes[other].state.epoch() == at {
                vote_all(nodes, other, p, true, *now, rng);
            }
        }
        assert_eq!(nodes[0].state.epoch(), at + 1);
    }
}

/// A chain too long for one join response (over `WELCOME_CHAIN_MAX_BYTES`)
/// is left out of the welcome: the joiner still joins, on its inviter's
/// word, and holds no chain back to the genesis.
#[test]
fn a_welcome_too_long_for_its_chain_still_adds_the_joiner() {
    let (mut nodes, mut rng, mut now) = mesh_of(10, 21);
    let mut epoch = 20;
    loop {
        rotate_to(&mut nodes, epoch, &mut now, &mut rng);
        let (genesis, commits) = nodes[0].state.chain_from_genesis().unwrap();
        let bytes = genesis.len() + commits.iter().map(|c| c.encoded_len()).sum::<usize>();
        if bytes > grove::mesh::state::WELCOME_CHAIN_MAX_BYTES {
            break;
        }
        epoch += 10;
        assert!(epoch < 200, "the chain never outgrew a welcome");
    }
    now += STEP_MS;
    let joiner = add_member(&mut nodes, 0, now, &mut rng);
    assert!(nodes[joiner].state.is_member());
    assert!(nodes[joiner].state.chain_from_genesis().is_none());
}
