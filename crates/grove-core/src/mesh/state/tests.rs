//! Tests of the state machine at one receiving member: the fixture's roster,
//! rotate proposal and commit, as the member receives them.

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::fixture::{Fixture, NOW_MS, open_envelope_of, with_bad_envelope};
use super::*;
use crate::identity::small_order_r_signature;

/// The receiver's secret of the roster's epoch.
const OLD_SECRET: [u8; 32] = [
    0x5e, 0xc1, 0x7e, 0x70, 0x1d, 0xa2, 0x33, 0x84, 0x95, 0xa6, 0xb7, 0xc8, 0xd9, 0xea, 0xfb, 0x0c,
    0x1d, 0x2e, 0x3f, 0x40, 0x51, 0x62, 0x73, 0x84, 0x95, 0xa6, 0xb7, 0xc8, 0xd9, 0xea, 0xfb, 0x0c,
];

/// The fixture's mesh, received by its last member.
struct Mesh {
    fx: Fixture,
    rng: StdRng,
}

impl std::ops::Deref for Mesh {
    type Target = Fixture;
    fn deref(&self) -> &Fixture {
        &self.fx
    }
}

impl Mesh {
    fn new(n: usize) -> Mesh {
        let mut rng = StdRng::seed_from_u64(n as u64);
        Mesh {
            fx: Fixture::new(n, &mut rng),
            rng,
        }
    }

    /// Moves on to the roster `commit` made.
    fn advance(&mut self, commit: &wire::Signed) {
        self.fx.advance(commit).unwrap();
    }

    /// `commit` with the envelope for `peer` altered, signed again by its
    /// committer (member 0): valid for everyone but `peer`.
    fn bad_envelope_for(&self, commit: &wire::Signed, peer: &[u8]) -> wire::Signed {
        with_bad_envelope(&self.ids[0], commit, peer).unwrap()
    }

    fn receiver(&self) -> &Identity {
        &self.ids[self.ids.len() - 1]
    }

    /// The receiver's state at the roster, holding `OLD_SECRET`.
    fn state(&self) -> MeshState {
        self.member_state(self.ids.len() - 1)
    }

    /// Member `i`'s state at the roster, holding `OLD_SECRET`.
    fn member_state(&self, i: usize) -> MeshState {
        self.fx.state_of(i, EpochSecret::from(OLD_SECRET))
    }

    /// Member 0's rotate commit with `votes`, carrying `secret`.
    fn commit(&mut self, votes: Vec<wire::Signed>, secret: &EpochSecret) -> wire::Signed {
        let sender = EnvelopeSender::new(&mut self.rng);
        self.fx.commit(votes, secret, &sender).unwrap()
    }

    /// The receiver takes one message at `NOW_MS + 1000`.
    fn receive(
        &mut self,
        state: &MeshState,
        kind: Kind,
    ) -> Result<(MeshState, Transition), MeshError> {
        self.receive_as(self.ids.len() - 1, state, kind)
    }

    /// Member `i` takes one message at `NOW_MS + 1000`.
    fn receive_as(
        &mut self,
        i: usize,
        state: &MeshState,
        kind: Kind,
    ) -> Result<(MeshState, Transition), MeshError> {
        let bytes = codec::encode(&wire::MeshMessage { kind: Some(kind) });
        state.receive(&self.fx.ids[i], &bytes, NOW_MS + 1000, &mut self.rng)
    }
}

/// `signed` with its signature replaced by one with a small-order `R` by
/// the same signer (`i`), which only the strict rule refuses.
fn small_order_r(mesh: &Mesh, i: usize, tag: &[u8], signed: &wire::Signed) -> wire::Signed {
    wire::Signed {
        signature: small_order_r_signature(&mesh.ids[i], tag, &signed.body).to_vec(),
        ..signed.clone()
    }
}

#[test]
fn a_vote_signed_with_a_small_order_r_is_refused_alone_and_inside_a_commit() {
    let mut mesh = Mesh::new(5);
    let base = mesh.state();
    let (with_proposal, _) = mesh
        .receive(&base, Kind::Proposal(mesh.proposal.clone()))
        .unwrap();
    // Alone: the honest vote counts, the same vote under the other signature does not.
    let honest = mesh.vote(1);
    let forged = small_order_r(&mesh, 1, tag::VOTE, &honest);
    assert!(mesh.receive(&with_proposal, Kind::Vote(honest)).is_ok());
    assert_eq!(
        mesh.receive(&with_proposal, Kind::Vote(forged.clone()))
            .err(),
        Some(MeshError::BadSignature("vote"))
    );
    // Inside a commit, among the votes it carries.
    let good = mesh.commit(mesh.votes(), &EpochSecret::from([9u8; 32]));
    let (after, _) = mesh.receive(&base, Kind::Commit(good)).unwrap();
    assert_eq!(after.epoch(), 6);
    let mut votes = mesh.votes();
    votes[1] = forged;
    let bad = mesh.commit(votes, &EpochSecret::from([9u8; 32]));
    assert_eq!(
        mesh.receive(&base, Kind::Commit(bad)).err(),
        Some(MeshError::BadSignature("commit"))
    );
}

#[test]
fn a_commit_signed_with_a_small_order_r_is_refused() {
    let mut mesh = Mesh::new(5);
    let base = mesh.state();
    let good = mesh.commit(mesh.votes(), &EpochSecret::from([9u8; 32]));
    let forged = small_order_r(&mesh, 0, tag::COMMIT, &good);
    assert_eq!(
        mesh.receive(&base, Kind::Commit(forged)).err(),
        Some(MeshError::BadSignature("commit"))
    );
    assert!(mesh.receive(&base, Kind::Commit(good)).is_ok());
}

/// Every way `bytes` could show in a `Debug` text: hex, and the decimal
/// list `[u8; 32]` prints as.
fn shows(text: &str, bytes: &[u8; 32]) -> bool {
    text.contains(&hex::encode(bytes))
        || text.contains(&hex::encode(&bytes[..8]))
        || text.contains(&format!("{bytes:?}"))
        || text.contains(
            &format!("{:?}", &bytes[..8])
                .trim_end_matches(']')
                .to_string(),
        )
}

#[test]
fn no_secret_shows_in_the_debug_text_of_a_state_or_a_transition() {
    let mut mesh = Mesh::new(5);
    let base = mesh.state();
    let new_secret: [u8; 32] = std::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0xa5);
    let commit = mesh.commit(mesh.votes(), &EpochSecret::from(new_secret));
    let (after, transition) = mesh.receive(&base, Kind::Commit(commit)).unwrap();
    assert_eq!(after.current_secret(), Some(&EpochSecret::from(new_secret)));
    assert!(after.secrets.contains_key(&mesh.roster_hash));
    let texts = [
        format!("{base:?}"),
        format!("{after:?}"),
        format!("{transition:?}"),
    ];
    for text in &texts {
        assert!(text.contains("<redacted>"));
        assert!(!shows(text, &OLD_SECRET) && !shows(text, &new_secret));
    }
    // The check finds a secret printed as `SecretEntry` printed it before.
    assert!(shows(&format!("secret: {new_secret:?}"), &new_secret));
}

#[test]
fn a_transaction_shares_the_secrets_and_does_not_copy_them() {
    let mut mesh = Mesh::new(5);
    let base = mesh.state();
    let held = |s: &MeshState, h: &[u8; 32]| s.secrets[h].secret.clone();
    // A transaction that does not touch the secrets shares them.
    let (with_proposal, _) = mesh
        .receive(&base, Kind::Proposal(mesh.proposal.clone()))
        .unwrap();
    assert!(Arc::ptr_eq(
        &held(&base, &mesh.roster_hash),
        &held(&with_proposal, &mesh.roster_hash)
    ));
    // One that adds a secret hands the store the very secret the new
    // state holds, and still shares the old one (now scheduled for erasure).
    let commit = mesh.commit(mesh.votes(), &EpochSecret::from([9u8; 32]));
    let (after, transition) = mesh.receive(&with_proposal, Kind::Commit(commit)).unwrap();
    let put: Vec<&SecretEntry> = transition
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::PutSecret(s) => Some(s),
            _ => None,
        })
        .collect();
    let new = put.iter().find(|s| s.roster_hash == after.tip).unwrap();
    assert!(Arc::ptr_eq(&new.secret, &held(&after, &after.tip)));
    let old = put
        .iter()
        .find(|s| s.roster_hash == mesh.roster_hash)
        .unwrap();
    assert!(old.erase_at_ms.is_some());
    assert!(Arc::ptr_eq(&old.secret, &held(&base, &mesh.roster_hash)));
    assert!(Arc::ptr_eq(
        &held(&after, &mesh.roster_hash),
        &held(&base, &mesh.roster_hash)
    ));
}

#[test]
fn a_member_whose_envelope_does_not_open_follows_the_chain_and_keeps_evidence() {
    let mut mesh = Mesh::new(5);
    let base = mesh.state();
    let me = mesh.receiver().peer_id();
    let good = mesh.commit(mesh.votes(), &EpochSecret::from([9u8; 32]));
    let bad = mesh.bad_envelope_for(&good, &me);
    // Everyone else reads the commit.
    let (other, _) = mesh
        .receive_as(2, &mesh.member_state(2), Kind::Commit(bad.clone()))
        .unwrap();
    assert_eq!(other.current_secret(), Some(&EpochSecret::from([9u8; 32])));
    // This member follows it without the secret, and keeps who did it.
    let (after, t) = mesh.receive(&base, Kind::Commit(bad.clone())).unwrap();
    assert_eq!((after.epoch(), after.tip), (6, other.tip));
    assert!(after.is_member());
    assert_eq!(after.current_secret(), None);
    let evidence = BadEnvelope {
        epoch: 6,
        roster_hash: after.tip,
        commit_hash: after.roster().unwrap().commit_hash,
        committer: mesh.ids[0].peer_id(),
        at_ms: NOW_MS + 1000,
    };
    assert_eq!(after.bad_envelopes, vec![evidence.clone()]);
    assert!(t.effects.contains(&Effect::PutBadEnvelope(evidence)));
    assert!(t.audit.iter().any(|a| a.kind == "mesh.envelope.bad"));
    // Kept as it came, its own bad envelope included: the evidence.
    assert_eq!(after.rosters[&after.tip].commit, Some(codec::encode(&bad)));
    // The next commit re-keys it.
    mesh.advance(&bad);
    let next = mesh.commit(mesh.votes(), &EpochSecret::from([8u8; 32]));
    let (later, _) = mesh.receive(&after, Kind::Commit(next)).unwrap();
    assert_eq!(later.epoch(), 7);
    assert_eq!(later.current_secret(), Some(&EpochSecret::from([8u8; 32])));
    assert_eq!(later.bad_envelopes.len(), 1);
}

#[test]
fn a_sync_does_not_stop_at_a_commit_whose_envelope_does_not_open() {
    let mut mesh = Mesh::new(5);
    let mut base = mesh.state();
    let me = mesh.receiver().peer_id();
    let good = mesh.commit(mesh.votes(), &EpochSecret::from([9u8; 32]));
    let bad = mesh.bad_envelope_for(&good, &me);
    mesh.advance(&bad);
    let next = mesh.commit(mesh.votes(), &EpochSecret::from([8u8; 32]));
    let request = [4u8; 32];
    base.pending_sync = Some(request);
    base.synced = false;
    let response = codec::sign(
        &mesh.ids[1],
        tag::SYNC_RESPONSE,
        &wire::SyncResponse {
            mesh_id: mesh.roster.mesh_id.to_vec(),
            responder: mesh.ids[1].peer_id(),
            request_hash: request.to_vec(),
            commits: vec![bad, next],
            revocations: Vec::new(),
        },
    );
    let (after, _) = mesh.receive(&base, Kind::SyncResponse(response)).unwrap();
    assert_eq!(after.epoch(), 7);
    assert!(after.synced);
    assert_eq!(after.current_secret(), Some(&EpochSecret::from([8u8; 32])));
    assert_eq!(after.bad_envelopes.len(), 1);
    assert_eq!(after.bad_envelopes[0].epoch, 6);
}

/// Member `signer`'s key update proposal at the mesh's roster, naming
/// `member` and the X25519 key of `new_key`.
fn key_update(mesh: &Mesh, signer: usize, member: Vec<u8>, new_key: &Identity) -> wire::Signed {
    let public = new_key.public();
    let body = wire::Proposal {
        mesh_id: mesh.roster.mesh_id.to_vec(),
        epoch: mesh.roster.epoch,
        roster_hash: mesh.roster_hash.to_vec(),
        proposer: mesh.ids[signer].peer_id(),
        created_ms: NOW_MS,
        expires_ms: NOW_MS + 3_600_000,
        change: Some(wire::proposal::Change::UpdateKey(wire::KeyUpdate {
            member,
            x25519: public.x25519.to_vec(),
            // Bound by the signer's Ed25519 key, as the member's own is.
            x25519_binding: mesh.ids[signer]
                .sign(identity::X25519_BINDING_TAG, &public.x25519)
                .to_vec(),
        })),
    };
    codec::sign(&mesh.ids[signer], tag::PROPOSAL, &body)
}

#[test]
fn a_key_update_signed_by_its_member_commits_on_its_own_yes_and_its_envelope_opens_only_with_the_new_key()
 {
    let mut mesh = Mesh::new(3);
    let updater = 1;
    let new_key = Identity::generate(&mut mesh.rng);
    let old_key = x25519_dalek::StaticSecret::from(mesh.ids[updater].x25519_secret().to_bytes());
    mesh.fx.ids[updater].set_pending_x25519(new_key.x25519_secret().to_bytes());
    let peer = mesh.ids[updater].peer_id();
    let proposal = key_update(&mesh, updater, peer.clone(), &new_key);
    mesh.fx.proposal = proposal.clone();
    mesh.fx.proposal_hash = codec::hash(label::PROPOSAL, &proposal.body);
    let body: wire::Proposal = codec::decode_canonical(&proposal.body, "p").unwrap();
    let (change, _, _) = proposal_change(&body).unwrap();
    // Its member's yes alone, of three members (a quorum is two).
    let own_yes = vec![mesh.vote(updater)];
    let sender = EnvelopeSender::new(&mut mesh.rng);
    let commit = build_commit(
        &mesh.ids[updater],
        &mesh.roster,
        &mesh.roster_hash,
        proposal.clone(),
        own_yes,
        &change,
        &EpochSecret::from([9u8; 32]),
        &sender,
    )
    .unwrap();
    let (after, _) = mesh
        .receive(&mesh.state(), Kind::Commit(commit.clone()))
        .unwrap();
    assert_eq!(after.epoch(), 6);
    let entry = after.roster().unwrap().member(&peer).unwrap().clone();
    assert_eq!(entry.x25519, new_key.x25519_public());
    entry.verify_keys().unwrap();
    // The updater's envelope opens with the new key, not with the old.
    let opened = open_envelope_of(&commit, &peer, new_key.x25519_secret()).unwrap();
    assert_eq!(opened.expose(), &[9u8; 32]);
    assert!(open_envelope_of(&commit, &peer, &old_key).is_err());
    // The updater itself, holding the new key pending, reads the epoch.
    let (own, _) = mesh
        .receive_as(
            updater,
            &mesh.member_state(updater),
            Kind::Commit(commit.clone()),
        )
        .unwrap();
    assert_eq!(own.epoch(), 6);
    assert!(
        own.secrets.contains_key(&own.tip),
        "the updater holds the new epoch's secret"
    );
    // One commit deep it is not yet settled: a rival commit at epoch 6 may
    // still win, so the old key is kept.
    assert!(!own.key_settled(&new_key.x25519_public()));
    // Another member's yes alone does not commit a key update.
    let sender = EnvelopeSender::new(&mut mesh.rng);
    let others = build_commit(
        &mesh.ids[0],
        &mesh.roster,
        &mesh.roster_hash,
        proposal,
        vec![mesh.vote(0)],
        &change,
        &EpochSecret::from([9u8; 32]),
        &sender,
    )
    .unwrap();
    assert!(matches!(
        mesh.receive(&mesh.state(), Kind::Commit(others)).err(),
        Some(MeshError::InvalidCommit(_))
    ));
}

#[test]
fn a_key_update_by_another_member_for_a_non_member_or_replayed_is_refused() {
    let mut mesh = Mesh::new(3);
    let base = mesh.state();
    let new_key = Identity::generate(&mut mesh.rng);
    let receive = |mesh: &mut Mesh, state: &MeshState, p: wire::Signed| {
        mesh.receive(state, Kind::Proposal(p)).err()
    };
    // Member 0 proposes member 1's key.
    let by_other = key_update(&mesh, 0, mesh.ids[1].peer_id(), &new_key);
    let err = receive(&mut mesh, &base, by_other);
    assert!(
        matches!(&err, Some(MeshError::InvalidProposal(m)) if m.contains("signed by the member it updates")),
        "{err:?}"
    );
    // Member 0 names an outsider: also not its own key.
    let outsider = Identity::generate(&mut mesh.rng);
    let for_outsider = key_update(&mesh, 0, outsider.peer_id(), &new_key);
    assert!(matches!(
        receive(&mut mesh, &base, for_outsider),
        Some(MeshError::InvalidProposal(_))
    ));
    // A non-member signing its own update is not a member's proposal.
    let mut stranger = Mesh::new(3);
    stranger.fx.ids.push(outsider);
    let own_outsider = key_update(&stranger, 3, stranger.ids[3].peer_id(), &new_key);
    assert_eq!(
        receive(&mut mesh, &base, own_outsider),
        Some(MeshError::NotMember("proposal"))
    );
    // The member's current key again.
    let current = Identity::from_secrets([1u8; 32], mesh.ids[1].x25519_secret().to_bytes());
    let same = key_update(&mesh, 1, mesh.ids[1].peer_id(), &current);
    let err = receive(&mut mesh, &base, same);
    assert!(
        matches!(&err, Some(MeshError::InvalidProposal(m)) if m.contains("current key")),
        "{err:?}"
    );
    // A binding that is not the member's signature.
    let mut bad_binding = key_update(&mesh, 1, mesh.ids[1].peer_id(), &new_key);
    let mut body: wire::Proposal = codec::decode_canonical(&bad_binding.body, "p").unwrap();
    if let Some(wire::proposal::Change::UpdateKey(u)) = &mut body.change {
        u.x25519_binding[0] ^= 1;
    }
    bad_binding = codec::sign(&mesh.ids[1], tag::PROPOSAL, &body);
    assert_eq!(
        receive(&mut mesh, &base, bad_binding),
        Some(MeshError::BadSignature("x25519 key binding"))
    );
    // The honest one passes; the same signed proposal again is a duplicate,
    // and after its commit it is for a past roster.
    let honest = key_update(&mesh, 1, mesh.ids[1].peer_id(), &new_key);
    let (with, _) = mesh.receive(&base, Kind::Proposal(honest.clone())).unwrap();
    assert!(
        receive(&mut mesh, &with, honest.clone()).is_some(),
        "a replay is refused"
    );
    mesh.fx.proposal = honest.clone();
    mesh.fx.proposal_hash = codec::hash(label::PROPOSAL, &honest.body);
    let body: wire::Proposal = codec::decode_canonical(&honest.body, "p").unwrap();
    let (change, _, _) = proposal_change(&body).unwrap();
    let sender = EnvelopeSender::new(&mut mesh.rng);
    let commit = build_commit(
        &mesh.ids[1],
        &mesh.roster,
        &mesh.roster_hash,
        honest.clone(),
        vec![mesh.vote(1)],
        &change,
        &EpochSecret::from([9u8; 32]),
        &sender,
    )
    .unwrap();
    let (after, _) = mesh.receive(&with, Kind::Commit(commit)).unwrap();
    assert_eq!(after.epoch(), 6);
    assert!(
        receive(&mut mesh, &after, honest).is_some(),
        "a replay after its commit is refused"
    );
}

/// A proposal as a node before protocol 1.2 decodes it: the changes it
/// knows (1.1), without `update_key`.
#[derive(Clone, PartialEq, prost::Message)]
struct ProposalBefore12 {
    #[prost(bytes = "vec", tag = "1")]
    mesh_id: Vec<u8>,
    #[prost(uint64, tag = "2")]
    epoch: u64,
    #[prost(bytes = "vec", tag = "3")]
    roster_hash: Vec<u8>,
    #[prost(bytes = "vec", tag = "4")]
    proposer: Vec<u8>,
    #[prost(int64, tag = "5")]
    created_ms: i64,
    #[prost(int64, tag = "6")]
    expires_ms: i64,
    #[prost(bytes = "vec", optional, tag = "11")]
    kick: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "12")]
    rotate: Option<Vec<u8>>,
}

#[test]
fn a_node_before_protocol_1_2_refuses_a_key_update_as_malformed() {
    let mut mesh = Mesh::new(3);
    let new_key = Identity::generate(&mut mesh.rng);
    let update = key_update(&mesh, 1, mesh.ids[1].peer_id(), &new_key);
    assert!(matches!(
        codec::decode_canonical::<ProposalBefore12>(&update.body, "proposal"),
        Err(MeshError::Malformed { .. })
    ));
    // A proposal it knows decodes there as here.
    assert!(codec::decode_canonical::<ProposalBefore12>(&mesh.proposal.body, "proposal").is_ok());
}

/// The receiver's stored copy of the commit that made its tip.
fn stored(state: &MeshState) -> wire::Signed {
    codec::decode_canonical(state.rosters[&state.tip].commit.as_ref().unwrap(), "stored").unwrap()
}

#[test]
fn a_reader_stores_a_commit_without_its_own_envelope_and_the_copy_still_proves_and_serves() {
    let mut mesh = Mesh::new(5);
    let base = mesh.state();
    let me = mesh.receiver().peer_id();
    let commit = mesh.commit(mesh.votes(), &EpochSecret::from([9u8; 32]));
    assert!(commit.envelopes.iter().all(|e| e.len() == ENVELOPE_LEN));
    let body: wire::Commit = codec::decode_canonical(&commit.body, "commit").unwrap();
    assert!(body.envelopes.is_empty(), "the body signs hashes only");
    assert_eq!(body.envelope_hashes.len(), 5);
    let (after, t) = mesh.receive(&base, Kind::Commit(commit.clone())).unwrap();
    assert_eq!(after.current_secret(), Some(&EpochSecret::from([9u8; 32])));
    // What it keeps (and so serves) lacks its own envelope, and only that.
    let kept = stored(&after);
    let mine = after.roster().unwrap().position(&me).unwrap();
    for (i, env) in kept.envelopes.iter().enumerate() {
        assert_eq!(env.is_empty(), i == mine, "envelope {i}");
    }
    assert!(
        t.effects
            .iter()
            .all(|e| !format!("{e:?}").contains(&hex::encode(&commit.envelopes[mine])))
    );
    let key = mesh
        .receiver()
        .x25519_secret_for(&after.roster().unwrap().members[mine].x25519)
        .unwrap();
    assert!(open_envelope_of(&commit, &me, key).is_ok());
    assert!(
        open_envelope_of(&kept, &me, key).is_err(),
        "the stored copy opens nothing with its key"
    );
    // Another member takes the kept copy and reads the epoch from it.
    let (other, _) = mesh
        .receive_as(2, &mesh.member_state(2), Kind::Commit(kept.clone()))
        .unwrap();
    assert_eq!(other.current_secret(), Some(&EpochSecret::from([9u8; 32])));
    // The receiver itself refuses a copy without its envelope: it would
    // follow the epoch blind, and any other member's copy carries it.
    assert_eq!(
        mesh.receive(&base, Kind::Commit(kept)).err(),
        Some(MeshError::InvalidCommit(
            "this node's envelope is withheld".into()
        ))
    );
}

#[test]
fn an_envelope_changed_beside_a_signed_commit_or_beside_another_kind_is_refused() {
    let mut mesh = Mesh::new(5);
    let base = mesh.state();
    let commit = mesh.commit(mesh.votes(), &EpochSecret::from([9u8; 32]));
    for i in 0..5 {
        let mut altered = commit.clone();
        altered.envelopes[i][0] ^= 1;
        assert_eq!(
            mesh.receive(&base, Kind::Commit(altered)).err(),
            Some(MeshError::InvalidCommit(
                "an envelope does not match its signed hash".into()
            )),
            "envelope {i}"
        );
    }
    let mut short = commit.clone();
    short.envelopes.pop();
    assert!(matches!(
        mesh.receive(&base, Kind::Commit(short)),
        Err(MeshError::InvalidCommit(_))
    ));
    let mut proposal = mesh.proposal.clone();
    proposal.envelopes = vec![vec![0u8; ENVELOPE_LEN]];
    assert!(matches!(
        mesh.receive(&base, Kind::Proposal(proposal)),
        Err(MeshError::Malformed { .. })
    ));
}

#[test]
fn a_mesh_made_before_1_3_keeps_signed_envelopes_until_its_members_vote_it_to_form_1() {
    let mut mesh = Mesh::new(5);
    mesh.fx.at_form(CommitForm::Inline);
    let base = mesh.state();
    let me = mesh.receiver().peer_id();
    // Form 0: the envelopes are in the signed body, and kept, own included.
    let commit = mesh.commit(mesh.votes(), &EpochSecret::from([9u8; 32]));
    assert!(commit.envelopes.is_empty());
    let (after, _) = mesh.receive(&base, Kind::Commit(commit.clone())).unwrap();
    assert_eq!(after.current_secret(), Some(&EpochSecret::from([9u8; 32])));
    assert_eq!(stored(&after), commit);
    // A form-1 commit on a form-0 roster is refused, whoever signs it.
    let body: wire::Commit = codec::decode_canonical(&commit.body, "commit").unwrap();
    let wrong = sign_commit(
        &mesh.ids[0],
        body.core,
        body.next_roster,
        body.envelopes,
        CommitForm::Hashed,
    );
    assert_eq!(
        mesh.receive(&base, Kind::Commit(wrong)).err(),
        Some(MeshError::InvalidCommit(
            "envelope hashes in a commit of form 0".into()
        ))
    );
    // The members vote the mesh to form 1: that commit is still of form 0,
    // the next roster is of form 1, and the commit after it hashes.
    mesh.advance(&commit);
    mesh.fx.propose_form(CommitForm::Hashed);
    let upgrade = mesh.commit(mesh.votes(), &EpochSecret::from([8u8; 32]));
    assert!(upgrade.envelopes.is_empty());
    let (upgraded, _) = mesh.receive(&after, Kind::Commit(upgrade.clone())).unwrap();
    assert_eq!(upgraded.roster().unwrap().commit_form, CommitForm::Hashed);
    mesh.advance(&upgrade);
    let next = mesh.commit(mesh.votes(), &EpochSecret::from([6u8; 32]));
    assert_eq!(next.envelopes.len(), 5);
    let (later, _) = mesh.receive(&upgraded, Kind::Commit(next)).unwrap();
    assert_eq!(later.current_secret(), Some(&EpochSecret::from([6u8; 32])));
    let kept = stored(&later);
    let mine = later.roster().unwrap().position(&me).unwrap();
    assert!(kept.envelopes[mine].is_empty());
    // No way back down.
    mesh.advance(&kept);
    mesh.fx.propose_form(CommitForm::Inline);
    assert!(matches!(
        mesh.receive(&later, Kind::Proposal(mesh.proposal.clone())),
        Err(MeshError::InvalidProposal(_))
    ));
}

/// The `EnvelopeEvidence` messages a transition sends.
fn evidence_sent(t: &Transition) -> Vec<wire::Signed> {
    t.outbound
        .iter()
        .filter_map(|o| {
            match codec::decode_canonical::<wire::MeshMessage>(&o.message, "out")
                .ok()?
                .kind?
            {
                Kind::EnvelopeEvidence(s) => Some(s),
                _ => None,
            }
        })
        .collect()
}

/// Member `i`'s evidence about its own envelope in `commit`, proven with its
/// real key whether or not the envelope opens.
fn evidence_of(mesh: &mut Mesh, i: usize, commit: &wire::Signed) -> wire::Signed {
    let id = &mesh.fx.ids[i];
    let body: wire::Commit = codec::decode_canonical(&commit.body, "commit").unwrap();
    let core: wire::CommitCore = codec::decode_canonical(&body.core, "core").unwrap();
    let next = Roster::decode(&body.next_roster).unwrap();
    let next_hash = next.hash();
    let me = id.peer_id();
    let key = id
        .x25519_secret_for(&next.member(&me).unwrap().x25519)
        .unwrap();
    let eph: [u8; 32] = core.ephemeral_x25519.clone().try_into().unwrap();
    let ctx = EnvelopeContext {
        mesh_id: &next.mesh_id,
        new_epoch: next.epoch,
        roster_hash: &next_hash,
        recipient: &me,
    };
    let proven = agreement::prove(key, &eph, &ctx, &mut mesh.rng).unwrap();
    codec::sign(
        id,
        tag::ENVELOPE_EVIDENCE,
        &wire::EnvelopeEvidence {
            mesh_id: next.mesh_id.to_vec(),
            commit: Some(commit.clone()),
            accuser: me,
            agreement: proven.point.to_vec(),
            proof: proven.proof.to_vec(),
        },
    )
}

#[test]
fn a_member_proves_its_envelope_bad_and_another_member_checks_the_proof() {
    let mut mesh = Mesh::new(5);
    let me = mesh.receiver().peer_id();
    let good = mesh.commit(mesh.votes(), &EpochSecret::from([9u8; 32]));
    let bad = mesh.bad_envelope_for(&good, &me);
    // The victim proves it at once and sends the proof to every member,
    // bound to the parent roster (it holds no key of the new epoch).
    let (victim, t) = mesh
        .receive(&mesh.state(), Kind::Commit(bad.clone()))
        .unwrap();
    let sent = evidence_sent(&t);
    assert_eq!(sent.len(), 1);
    assert_eq!(victim.proven_bad.len(), 1);
    assert!(t.audit.iter().any(|a| a.kind == "mesh.envelope.proven"));
    let message = codec::encode(&wire::MeshMessage {
        kind: Some(Kind::EnvelopeEvidence(sent[0].clone())),
    });
    assert_eq!(gossip_keys::bound_roster(&message), Some(mesh.roster_hash));
    // A member that applied the same commit checks it and keeps it.
    let (other, _) = mesh
        .receive_as(2, &mesh.member_state(2), Kind::Commit(bad.clone()))
        .unwrap();
    let (checked, t) = mesh
        .receive_as(2, &other, Kind::EnvelopeEvidence(sent[0].clone()))
        .unwrap();
    let proven = checked.proven_bad.values().next().unwrap();
    assert_eq!(
        (proven.epoch, &proven.committer, &proven.accuser),
        (6, &mesh.ids[0].peer_id(), &me)
    );
    assert!(
        t.effects
            .iter()
            .any(|e| matches!(e, Effect::PutProvenBadEnvelope(_)))
    );
    assert_eq!(
        mesh.receive_as(2, &checked, Kind::EnvelopeEvidence(sent[0].clone()))
            .err(),
        Some(MeshError::Duplicate("envelope evidence"))
    );
    // A member whose envelope opened cannot accuse the committer: the
    // proven agreement opens it.
    let (honest_2, _) = mesh
        .receive_as(2, &mesh.member_state(2), Kind::Commit(good.clone()))
        .unwrap();
    let false_claim = evidence_of(&mut mesh, 1, &good);
    assert!(matches!(
        mesh.receive_as(2, &honest_2, Kind::EnvelopeEvidence(false_claim)),
        Err(MeshError::InvalidEvidence(why)) if why.contains("opens")
    ));
    // An altered agreement or proof, or the evidence signed by another.
    let mut body: wire::EnvelopeEvidence =
        codec::decode_canonical(&sent[0].body, "evidence").unwrap();
    body.proof[5] ^= 1;
    let altered = codec::sign(mesh.receiver(), tag::ENVELOPE_EVIDENCE, &body);
    assert!(matches!(
        mesh.receive_as(2, &other, Kind::EnvelopeEvidence(altered)),
        Err(MeshError::InvalidEvidence(_))
    ));
    let body: wire::EnvelopeEvidence = codec::decode_canonical(&sent[0].body, "evidence").unwrap();
    let impostor = codec::sign(&mesh.ids[3], tag::ENVELOPE_EVIDENCE, &body);
    assert_eq!(
        mesh.receive_as(2, &other, Kind::EnvelopeEvidence(impostor))
            .err(),
        Some(MeshError::NotMember("envelope evidence"))
    );
}

#[test]
fn a_commit_whose_ephemeral_key_is_off_the_prime_order_subgroup_is_refused() {
    let mut mesh = Mesh::new(5);
    let base = mesh.state();
    let good = mesh.commit(mesh.votes(), &EpochSecret::from([9u8; 32]));
    let body: wire::Commit = codec::decode_canonical(&good.body, "commit").unwrap();
    let mut core: wire::CommitCore = codec::decode_canonical(&body.core, "core").unwrap();
    // A point of order 8 added to an honest key: still contributory for
    // X25519, but no recipient could prove its agreement with it.
    let honest: [u8; 32] = core.ephemeral_x25519.clone().try_into().unwrap();
    let p = curve25519_dalek::montgomery::MontgomeryPoint(honest)
        .to_edwards(0)
        .unwrap()
        + curve25519_dalek::constants::EIGHT_TORSION[1];
    core.ephemeral_x25519 = p.to_montgomery().to_bytes().to_vec();
    let forged = sign_commit(
        &mesh.ids[0],
        codec::encode(&core),
        body.next_roster.clone(),
        envelopes_of_commit(&good),
        CommitForm::Hashed,
    );
    assert_eq!(
        mesh.receive(&base, Kind::Commit(forged)).err(),
        Some(MeshError::InvalidCommit(
            "the ephemeral key is not of the prime-order subgroup".into()
        ))
    );
}

fn envelopes_of_commit(c: &wire::Signed) -> Vec<wire::Envelope> {
    envelopes_of(c).unwrap()
}

#[test]
fn evidence_that_overtakes_its_commit_brings_the_commit_along() {
    let mut mesh = Mesh::new(5);
    let me = mesh.receiver().peer_id();
    let good = mesh.commit(mesh.votes(), &EpochSecret::from([9u8; 32]));
    let bad = mesh.bad_envelope_for(&good, &me);
    let (_, t) = mesh.receive(&mesh.state(), Kind::Commit(bad)).unwrap();
    let sent = evidence_sent(&t);
    // Member 2 gets the evidence before the commit: it applies the commit
    // the evidence carries (its own envelope is in it), then keeps the proof.
    let (after, _) = mesh
        .receive_as(
            2,
            &mesh.member_state(2),
            Kind::EnvelopeEvidence(sent[0].clone()),
        )
        .unwrap();
    assert_eq!(after.epoch(), 6);
    assert_eq!(after.current_secret(), Some(&EpochSecret::from([9u8; 32])));
    assert_eq!(after.proven_bad.len(), 1);
}

#[test]
fn a_member_whose_roster_names_a_key_it_no_longer_holds_proposes_its_key_again() {
    let mut mesh = Mesh::new(5);
    let state = mesh.state();
    // As after a fork choice that left the branch its update settled on:
    // the node holds only its new key, the roster names the old one.
    let receiver = mesh.fx.ids.len() - 1;
    let id = &mut mesh.fx.ids[receiver];
    id.set_pending_x25519([7u8; 32]);
    assert!(id.promote_pending_x25519());
    let new_key = id.x25519_public();
    let (after, t) = state
        .tick(&mesh.fx.ids[receiver], NOW_MS + 1000, &mut mesh.rng)
        .unwrap();
    assert!(t.audit.iter().any(|a| a.kind == "mesh.key.rekey"));
    // A key update passes on its member's yes: committed at once.
    assert_eq!(after.epoch(), 6);
    let me = mesh.fx.ids[receiver].peer_id();
    assert_eq!(after.roster().unwrap().member(&me).unwrap().x25519, new_key);
    // Re-keyed: the next tick proposes nothing more.
    let (_, t) = after
        .tick(&mesh.fx.ids[receiver], NOW_MS + 2000, &mut mesh.rng)
        .unwrap();
    assert!(!t.audit.iter().any(|a| a.kind == "mesh.key.rekey"));
}

#[test]
fn a_victim_sends_its_evidence_again_while_the_committer_is_a_member() {
    let mut mesh = Mesh::new(5);
    let me = mesh.receiver().peer_id();
    let good = mesh.commit(mesh.votes(), &EpochSecret::from([9u8; 32]));
    let bad = mesh.bad_envelope_for(&good, &me);
    let (victim, t) = mesh.receive(&mesh.state(), Kind::Commit(bad)).unwrap();
    let sent = evidence_sent(&t);
    let again: Vec<Vec<u8>> = victim
        .republish()
        .into_iter()
        .filter(|m| {
            matches!(
                codec::decode_canonical::<wire::MeshMessage>(m, "m").map(|m| m.kind),
                Ok(Some(Kind::EnvelopeEvidence(_)))
            )
        })
        .collect();
    assert_eq!(
        again,
        vec![codec::encode(&wire::MeshMessage {
            kind: Some(Kind::EnvelopeEvidence(sent[0].clone()))
        })]
    );
    // A member that checked it does not send it: only the accuser does.
    let (other, _) = mesh
        .receive_as(
            2,
            &mesh.member_state(2),
            Kind::EnvelopeEvidence(sent[0].clone()),
        )
        .unwrap();
    assert!(other.republish().iter().all(|m| !matches!(
        codec::decode_canonical::<wire::MeshMessage>(m, "m").map(|m| m.kind),
        Ok(Some(Kind::EnvelopeEvidence(_)))
    )));
}
