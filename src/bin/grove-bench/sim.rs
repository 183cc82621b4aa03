//! A seeded, deterministic simulation of one mesh driving the real state machine.
//!
//! Nodes exchange the messages their transitions produce over a simulated
//! network with loss, duplication, delay (so reordering), partitions that
//! heal, restarts, and injected bad messages. From states a run reaches it
//! checks **safety** (members that received the same messages agree on
//! roster and secret; bad messages change nothing) and **liveness**: with a
//! quorum of honest members online, every open proposal is decided
//! (committed, rejected, withdrawn or expired) and a next proposal can be
//! made and committed. With every member online that must happen well before
//! any proposal could expire; with some offline, within one proposal
//! lifetime. The same code runs in `tests/mesh.rs` (with each node's
//! transitions persisted in its own mesh.db) and in `grove-bench mesh
//! liveness` (in memory, 10,000 seeds). Nothing here does IO: storage is a
//! [`Storage`] the caller passes in.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use grove::identity::Identity;
use grove::mesh::MeshError;
use grove::mesh::codec;
use grove::mesh::roster::{KeyUpdate, QuorumRule};
use grove::mesh::state::fixture::with_bad_envelope;
use grove::mesh::state::{CloseReason, Dest, MeshState, ProposalChange, Timing, Transition};
use grove::wire::mesh as wire;

/// One simulated step of time.
pub const STEP_MS: i64 = 1000;

/// How often a commit goes out with one envelope that does not open, in
/// the random phase (a committer gone bad, §7b).
const BAD_ENVELOPE_RATE: f64 = 0.03;

/// The timing rules of a simulated mesh: short, so expiry and grace windows
/// happen within a run.
pub fn timing() -> Timing {
    Timing {
        proposal_ttl_ms: 40 * STEP_MS,
        invite_ttl_ms: 500 * STEP_MS,
        key_grace_ms: 10 * STEP_MS,
        commit_backup_ms: 15 * STEP_MS,
    }
}

/// Steps an honest proposer waits for its proposal to pass before it
/// withdraws it (the operator's patience).
pub const WITHDRAW_AFTER_STEPS: i64 = 8;
/// With every member online, every proposal must be decided within this
/// many steps: well under the proposal lifetime, so expiry is not needed.
pub const DECIDE_ONLINE_STEPS: usize = 24;
/// With some members offline, within one proposal lifetime plus this.
pub const DECIDE_OFFLINE_EXTRA_STEPS: usize = 24;
/// Steps a next proposal has to be committed by the online members.
pub const NEXT_COMMIT_STEPS: usize = 16;

/// One simulated node.
#[derive(Clone)]
pub struct SimNode {
    pub id: Arc<Identity>,
    pub state: MeshState,
}

/// Where simulated nodes' transitions go.
pub trait Storage {
    /// A node was added (its index is the number of nodes before).
    fn add_node(&mut self, id: &Identity);
    /// Node `node` adopted transition `t` (persist it before the next input).
    fn persist(&mut self, node: usize, t: &Transition, now_ms: i64);
    /// Node `node` restarts: its state as loaded again.
    fn reload(&mut self, node: usize, current: &MeshState) -> MeshState;
}

/// No persistence: a restart keeps the state, and the node is unsynced
/// unless it is the only member, as after a load from mesh.db.
pub struct Memory;

impl Storage for Memory {
    fn add_node(&mut self, _id: &Identity) {}

    fn persist(&mut self, _node: usize, _t: &Transition, _now_ms: i64) {}

    fn reload(&mut self, _node: usize, current: &MeshState) -> MeshState {
        let mut s = current.clone();
        s.synced = s.roster().is_none_or(|r| r.members.len() <= 1);
        s.pending_sync = None;
        s
    }
}

/// The shape of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Members formed before the run starts.
    pub members: usize,
    /// Steps of random activity.
    pub steps: usize,
    /// Probability that one delivery is lost.
    pub loss: f64,
    /// Probability that one delivery arrives twice.
    pub dup: f64,
    pub max_delay_steps: i64,
    /// Nodes that may join during the run.
    pub joiners: usize,
    /// Share of random votes that are no.
    pub no_share: f64,
    /// Probability per step that a member withdraws one of its open proposals.
    pub withdraw_rate: f64,
    /// Probability per step of an injected bad message (checked to change nothing).
    pub inject_rate: f64,
    /// Liveness checks during the run (evenly spaced), besides the one after it.
    pub liveness_checks: usize,
}

impl Config {
    pub fn new(members: usize, loss: f64) -> Config {
        Config {
            members,
            steps: 300,
            loss,
            dup: 0.05,
            max_delay_steps: 3,
            joiners: 3,
            no_share: 0.15,
            withdraw_rate: 0.02,
            inject_rate: 0.2,
            liveness_checks: 2,
        }
    }

    /// The configuration of seed `seed` in a sweep: 2 to 6 members, loss
    /// 0.05 to 0.26, quorum rule by parity.
    pub fn sweep(seed: u64, steps: usize) -> (Config, QuorumRule) {
        let mut c = Config::new(
            2 + (seed % 5) as usize,
            0.05 + ((seed / 5) % 4) as f64 * 0.07,
        );
        c.steps = steps;
        c.joiners = 2;
        c.inject_rate = 0.05;
        c.liveness_checks = 1;
        let rule = if seed.is_multiple_of(2) {
            QuorumRule::MAJORITY
        } else {
            QuorumRule {
                numerator: 2,
                denominator: 3,
            }
        };
        (c, rule)
    }
}

/// Why a run failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SimError {
    #[error("seed {seed}: stuck (liveness check at step {step}): {what}")]
    Stuck {
        seed: u64,
        step: String,
        what: String,
    },
    #[error("seed {seed}: unsafe: {what}")]
    Unsafe { seed: u64, what: String },
    #[error("seed {seed}: setup failed: {what}")]
    Setup { seed: u64, what: String },
}

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub start_epoch: u64,
    pub end_epoch: u64,
    pub members: usize,
    pub switches: usize,
    pub injected: usize,
    pub refused_injections: usize,
    /// Liveness checks made, and how many started with members offline.
    pub liveness_checks: usize,
    pub offline_checks: usize,
    /// How the proposals open at the liveness checks were decided.
    pub committed: usize,
    pub rejected: usize,
    pub withdrawn: usize,
    pub expired: usize,
    /// Commits on the first member's chain that added a member on a
    /// pre-approved invite with one vote where the quorum was more (§8a).
    pub approved_adds: usize,
    /// Key updates (§8b) committed on the first member's chain.
    pub key_updates: usize,
    /// Commits sent with one envelope that does not open (§7b), and the
    /// checked evidence of them all nodes hold.
    pub bad_envelopes: usize,
    pub evidence: usize,
}

struct InFlight {
    to: usize,
    at: i64,
    bytes: Vec<u8>,
}

/// A simulated mesh.
pub struct Sim<S: Storage> {
    pub seed: u64,
    pub rng: StdRng,
    pub nodes: Vec<SimNode>,
    queue: Vec<InFlight>,
    pub now: i64,
    pub cfg: Config,
    /// Partition group of each node (None: no partition).
    groups: Option<Vec<u8>>,
    /// Nodes that are down: they receive nothing and do nothing.
    offline: Vec<bool>,
    /// (node, bytes) of messages a node accepted with a change: replays must be refused.
    accepted: Vec<(usize, Vec<u8>)>,
    pub injected: usize,
    pub refused_injections: usize,
    pub storage: S,
    max_nodes: usize,
    /// The invite text each joiner used, so it can ask again (its welcome may be lost).
    invites: BTreeMap<usize, String>,
    /// Committers this run made send an envelope that does not open
    /// (§7b): evidence may name these, and no one else.
    bad_committers: BTreeSet<Vec<u8>>,
    pub bad_envelopes_sent: usize,
}

/// Runs seed `seed` in memory: the random phase with its liveness checks,
/// then healing, agreement and a last liveness check.
pub fn run(seed: u64, cfg: Config, quorum: QuorumRule) -> Result<Report, SimError> {
    let mut sim = Sim::new(seed, cfg, quorum, Memory)?;
    let mut report = sim.run_random()?;
    sim.heal_and_settle();
    sim.check_agreement(&mut report)?;
    sim.check_liveness(&mut report, usize::MAX)?;
    Ok(report)
}

impl<S: Storage> Sim<S> {
    /// A founder plus `cfg.members - 1` members added one by one over a
    /// reliable network.
    pub fn new(seed: u64, cfg: Config, quorum: QuorumRule, storage: S) -> Result<Sim<S>, SimError> {
        let max_nodes = cfg.members + cfg.joiners;
        let mut sim = Sim {
            seed,
            rng: StdRng::seed_from_u64(seed),
            nodes: Vec::new(),
            queue: Vec::new(),
            now: 1_000_000,
            cfg,
            groups: None,
            offline: Vec::new(),
            accepted: Vec::new(),
            injected: 0,
            refused_injections: 0,
            storage,
            max_nodes,
            invites: BTreeMap::new(),
            bad_committers: BTreeSet::new(),
            bad_envelopes_sent: 0,
        };
        let setup = |what: String| SimError::Setup { seed, what };
        let founder = sim.add_node();
        sim.act(founder, |s, id, rng, now| {
            s.init(id, "sim mesh", quorum, now, rng)
        })
        .map_err(|e| setup(e.to_string()))?;
        let (loss, dup, delay) = (sim.cfg.loss, sim.cfg.dup, sim.cfg.max_delay_steps);
        sim.cfg.loss = 0.0;
        sim.cfg.dup = 0.0;
        sim.cfg.max_delay_steps = 0;
        for _ in 1..sim.cfg.members {
            sim.now += STEP_MS;
            let joiner = sim.invite_and_join(founder, false);
            // Everyone else votes yes on the open add proposal.
            for _ in 0..4 {
                sim.deliver_due();
                for m in sim.members() {
                    let open: Vec<[u8; 32]> =
                        sim.nodes[m].state.proposals.keys().copied().collect();
                    for p in open {
                        let _ = sim.act(m, |s, id, rng, now| s.vote(id, p, true, now, rng));
                    }
                }
            }
            if !joiner.is_some_and(|j| sim.nodes[j].state.is_member()) {
                return Err(setup("a joiner was not added".into()));
            }
        }
        sim.cfg.loss = loss;
        sim.cfg.dup = dup;
        sim.cfg.max_delay_steps = delay;
        sim.max_nodes = sim.nodes.len() + sim.cfg.joiners;
        Ok(sim)
    }

    fn add_node(&mut self) -> usize {
        let id = Identity::generate(&mut self.rng);
        self.storage.add_node(&id);
        let state = MeshState::empty(id.public(), timing());
        self.nodes.push(SimNode {
            id: Arc::new(id),
            state,
        });
        self.offline.push(false);
        self.nodes.len() - 1
    }

    /// Member `inviter` creates an invite and a new node asks to join with it.
    /// `approve`: the inviter also proposes the invite's approval (§8a).
    fn invite_and_join(&mut self, inviter: usize, approve: bool) -> Option<usize> {
        let now = self.now;
        let r = self.nodes[inviter].state.create_invite(
            &self.nodes[inviter].id,
            vec![],
            String::new(),
            None,
            now,
            &mut self.rng,
        );
        let text = self.take(inviter, r).ok()?.output?;
        // An approved invite's join passes on the inviter's yes once the
        // approval is in; until then the inviter, bound by its vote on the
        // approval, refuses it and the joiner asks again.
        if approve && let Ok(invite) = grove::mesh::invite::from_text(&text) {
            let _ = self.act(inviter, |s, id, rng, now| {
                s.propose(
                    id,
                    ProposalChange::Approve {
                        invite,
                        name: String::new(),
                    },
                    now,
                    rng,
                )
            });
        }
        let joiner = self.add_node();
        self.invites.insert(joiner, text.clone());
        self.act(joiner, |s, id, _, now| {
            s.request_join(id, &text, "sim", now)
        })
        .ok()?;
        Some(joiner)
    }

    /// True when a joiner still waits though an online member's roster lists it.
    fn welcome_due(&self) -> bool {
        self.invites.keys().any(|&j| {
            let s = &self.nodes[j].state;
            s.mesh.is_none()
                && !self.offline[j]
                && self.online_members().iter().any(|&m| {
                    self.nodes[m]
                        .state
                        .roster()
                        .is_some_and(|r| r.member(&self.nodes[j].id.peer_id()).is_some())
                })
        })
    }

    /// Joiners still waiting ask again with their invite, as the daemon's
    /// joiner polls: a lost welcome is sent again once it is a member.
    fn joiners_ask_again(&mut self) {
        let waiting: Vec<(usize, String)> = self
            .invites
            .iter()
            .filter(|(i, _)| {
                let s = &self.nodes[**i].state;
                !self.offline[**i] && s.mesh.is_none() && s.pending_join.is_some()
            })
            .map(|(i, t)| (*i, t.clone()))
            .collect();
        for (i, text) in waiting {
            let _ = self.act(i, |s, id, _, now| s.request_join(id, &text, "sim", now));
        }
    }

    fn connected(&self, a: usize, b: usize) -> bool {
        !self.offline[a] && !self.offline[b] && self.groups.as_ref().is_none_or(|g| g[a] == g[b])
    }

    /// Persists and adopts a transition result of node `i`.
    fn take(
        &mut self,
        i: usize,
        r: Result<(MeshState, Transition), MeshError>,
    ) -> Result<Transition, MeshError> {
        let (s, t) = r?;
        self.storage.persist(i, &t, self.now);
        self.nodes[i].state = s;
        self.settle_key(i);
        Ok(t)
    }

    /// Once node `i`'s key update is settled (`MeshState::key_settled`),
    /// the pending key becomes its key and the old one is dropped, as the
    /// daemon does. (A probe's copy of the node shares its identity and
    /// keeps both.)
    fn settle_key(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let Some((pending, _)) = node.id.pending_x25519_public() else {
            return;
        };
        if node.state.key_settled(&pending)
            && let Some(id) = Arc::get_mut(&mut node.id)
        {
            id.promote_pending_x25519();
        }
    }

    /// Member `m` proposes a key update (§8b): a new pending key, or the one
    /// an earlier update of it left pending.
    fn propose_key_update(&mut self, m: usize) {
        let fresh = x25519_dalek::StaticSecret::random_from_rng(&mut self.rng).to_bytes();
        let Some(id) = Arc::get_mut(&mut self.nodes[m].id) else {
            return;
        };
        let (x25519, x25519_binding) = match id.pending_x25519_public() {
            Some(p) => p,
            None => id.set_pending_x25519(fresh),
        };
        let _ = self.act(m, |s, id, rng, now| {
            let update = KeyUpdate {
                member: id.peer_id(),
                x25519,
                x25519_binding,
            };
            s.propose(id, ProposalChange::UpdateKey(update), now, rng)
        });
    }

    fn enqueue(&mut self, from: usize, t: Transition) {
        for mut o in t.outbound {
            if o.to == Dest::All
                && self.cfg.inject_rate > 0.0
                && self.rng.random_bool(BAD_ENVELOPE_RATE)
            {
                self.corrupt_an_envelope(from, &mut o.message);
            }
            let targets: Vec<usize> = match &o.to {
                Dest::All => (0..self.nodes.len())
                    .filter(|&i| i != from && self.nodes[i].state.mesh.is_some())
                    .collect(),
                Dest::Peer(p) => self.peer_index(p).into_iter().collect(),
            };
            for to in targets {
                if !self.connected(from, to) || self.rng.random_bool(self.cfg.loss) {
                    continue;
                }
                let copies = if self.rng.random_bool(self.cfg.dup) {
                    2
                } else {
                    1
                };
                for _ in 0..copies {
                    let delay = self.rng.random_range(0..=self.cfg.max_delay_steps) * STEP_MS;
                    self.queue.push(InFlight {
                        to,
                        at: self.now + delay,
                        bytes: o.message.clone(),
                    });
                }
            }
        }
    }

    /// When `message` is a commit `from` sends: makes its envelope for one
    /// other member of the next roster not open, signed again by `from`, a
    /// committer gone bad (§7b).
    fn corrupt_an_envelope(&mut self, from: usize, message: &mut Vec<u8>) {
        use prost::Message;
        let Ok(wire::MeshMessage {
            kind: Some(wire::mesh_message::Kind::Commit(commit)),
        }) = wire::MeshMessage::decode(message.as_slice())
        else {
            return;
        };
        let Some(next) = wire::Commit::decode(commit.body.as_slice())
            .ok()
            .and_then(|b| grove::mesh::roster::Roster::decode(&b.next_roster).ok())
        else {
            return;
        };
        let me = self.nodes[from].id.peer_id();
        let others: Vec<Vec<u8>> = next
            .members
            .iter()
            .map(|m| m.peer_id.clone())
            .filter(|p| *p != me)
            .collect();
        if others.is_empty() {
            return;
        }
        let victim = &others[self.rng.random_range(0..others.len())];
        let Ok(bad) = with_bad_envelope(&self.nodes[from].id, &commit, victim) else {
            return;
        };
        *message = wire::MeshMessage {
            kind: Some(wire::mesh_message::Kind::Commit(bad)),
        }
        .encode_to_vec();
        self.bad_committers.insert(me);
        self.bad_envelopes_sent += 1;
    }

    fn peer_index(&self, peer: &[u8]) -> Option<usize> {
        self.nodes.iter().position(|n| n.id.peer_id() == peer)
    }

    /// Runs one operation of node `i` and sends what it produced.
    pub fn act(
        &mut self,
        i: usize,
        op: impl FnOnce(
            &MeshState,
            &Identity,
            &mut StdRng,
            i64,
        ) -> Result<(MeshState, Transition), MeshError>,
    ) -> Result<(), MeshError> {
        let now = self.now;
        let id = self.nodes[i].id.clone();
        let r = op(&self.nodes[i].state, &id, &mut self.rng, now);
        drop(id);
        let t = self.take(i, r)?;
        self.enqueue(i, t);
        Ok(())
    }

    fn deliver_due(&mut self) {
        let mut due = Vec::new();
        let mut i = 0;
        while i < self.queue.len() {
            if self.queue[i].at <= self.now {
                due.push(self.queue.swap_remove(i));
            } else {
                i += 1;
            }
        }
        // Random order within a step: reordering.
        for k in (1..due.len()).rev() {
            let j = self.rng.random_range(0..=k);
            due.swap(k, j);
        }
        for m in due {
            let to = m.to;
            if self.offline[to] {
                continue;
            }
            let bytes = m.bytes;
            let now = self.now;
            let id = self.nodes[to].id.clone();
            let r = self.nodes[to]
                .state
                .receive(&id, &bytes, now, &mut self.rng);
            drop(id);
            match self.take(to, r) {
                Ok(t) => {
                    if !t.is_empty() && t.refused.is_none() && self.cfg.inject_rate > 0.0 {
                        self.accepted.push((to, bytes));
                    }
                    self.enqueue(to, t);
                }
                Err(MeshError::UnknownRoster { .. }) => {
                    let _ = self.act(to, |s, id, _, now| s.sync_request(id, now));
                }
                Err(_) => {}
            }
        }
    }

    /// Indices of the nodes that are members of their own current roster.
    pub fn members(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].state.is_member())
            .collect()
    }

    fn online_members(&self) -> Vec<usize> {
        self.members()
            .into_iter()
            .filter(|&i| !self.offline[i])
            .collect()
    }

    /// The random phase: activity with liveness checks at evenly spaced steps.
    pub fn run_random(&mut self) -> Result<Report, SimError> {
        let mut report = Report {
            start_epoch: self.nodes[0].state.epoch(),
            ..Report::default()
        };
        let every = self.cfg.steps / (self.cfg.liveness_checks + 1);
        for step in 0..self.cfg.steps {
            self.now += STEP_MS;
            self.deliver_due();
            self.random_action()?;
            if every > 0
                && step > 0
                && step % every == 0
                && step / every <= self.cfg.liveness_checks
            {
                self.check_liveness(&mut report, step)?;
            }
        }
        Ok(report)
    }

    fn random_action(&mut self) -> Result<(), SimError> {
        let members = self.members();
        if members.is_empty() {
            return Ok(());
        }
        if self.rng.random_bool(0.08) {
            self.random_proposal(&members);
        }
        self.random_votes(&members);
        self.random_withdrawals(&members);
        // Ticks.
        for i in 0..self.nodes.len() {
            if self.nodes[i].state.mesh.is_some() && self.rng.random_bool(0.2) {
                let _ = self.act(i, |s, id, rng, now| s.tick(id, now, rng));
            }
        }
        self.random_faults_and_syncs();
        if self.cfg.inject_rate > 0.0 && self.rng.random_bool(self.cfg.inject_rate) {
            self.inject_bad_message()?;
        }
        Ok(())
    }

    /// A random member proposes: an invite (approved in advance or not), a
    /// kick, a quorum change, a rotate or a key update of its own.
    fn random_proposal(&mut self, members: &[usize]) {
        let m = members[self.rng.random_range(0..members.len())];
        let roster_len = self.nodes[m].state.roster().map_or(0, |r| r.members.len());
        let pick = self.rng.random_range(0..10);
        if pick < 3 && self.nodes.len() < self.max_nodes {
            let approve = self.rng.random_bool(0.5);
            self.invite_and_join(m, approve);
        } else if pick < 5 && roster_len > 3 {
            let roster = self.nodes[m].state.roster().cloned();
            if let Some(r) = roster {
                let victim = r.members[self.rng.random_range(0..r.members.len())]
                    .peer_id
                    .clone();
                let _ = self.act(m, |s, id, rng, now| {
                    s.propose(id, ProposalChange::Kick(victim), now, rng)
                });
            }
        } else if pick < 6 {
            let q = if self.rng.random_bool(0.5) {
                QuorumRule::MAJORITY
            } else {
                QuorumRule {
                    numerator: 2,
                    denominator: 3,
                }
            };
            let _ = self.act(m, |s, id, rng, now| {
                s.propose(id, ProposalChange::Quorum(q), now, rng)
            });
        } else if pick < 9 {
            let _ = self.act(m, |s, id, rng, now| {
                s.propose(id, ProposalChange::Rotate, now, rng)
            });
        } else {
            self.propose_key_update(m);
        }
    }

    /// Some members vote on a random open proposal, yes or no.
    fn random_votes(&mut self, members: &[usize]) {
        for &m in members {
            if !self.rng.random_bool(0.25) {
                continue;
            }
            let open: Vec<[u8; 32]> = self.nodes[m].state.proposals.keys().copied().collect();
            if open.is_empty() {
                continue;
            }
            let p = open[self.rng.random_range(0..open.len())];
            let yes = !self.rng.random_bool(self.cfg.no_share);
            let _ = self.act(m, |s, id, rng, now| s.vote(id, p, yes, now, rng));
        }
    }

    /// Some members withdraw their first open proposal.
    fn random_withdrawals(&mut self, members: &[usize]) {
        for &m in members {
            if !self.rng.random_bool(self.cfg.withdraw_rate) {
                continue;
            }
            let me = self.nodes[m].id.peer_id();
            let own: Vec<[u8; 32]> = self.nodes[m]
                .state
                .proposals
                .values()
                .filter(|p| p.proposer == me)
                .map(|p| p.hash)
                .collect();
            if let Some(&p) = own.first() {
                let _ = self.act(m, |s, id, _, now| s.withdraw(id, p, now));
            }
        }
    }

    /// Partitions start and heal, nodes restart, joiners ask again, and a
    /// random node syncs.
    fn random_faults_and_syncs(&mut self) {
        // Partitions start and heal.
        if self.groups.is_none() && self.rng.random_bool(0.02) {
            let g: Vec<u8> = (0..self.max_nodes)
                .map(|_| self.rng.random_range(0..2))
                .collect();
            self.groups = Some(g);
        } else if self.groups.is_some() && self.rng.random_bool(0.05) {
            self.groups = None;
        }
        // Restarts: reload from storage, then sync.
        if self.rng.random_bool(0.02) {
            let i = self.rng.random_range(0..self.nodes.len());
            if self.nodes[i].state.mesh.is_some() {
                self.nodes[i].state = self.storage.reload(i, &self.nodes[i].state);
                let _ = self.act(i, |s, id, _, now| s.sync_request(id, now));
            }
        }
        if self.rng.random_bool(0.05) {
            self.joiners_ask_again();
        }
        // Periodic sync from a random node (anti-entropy).
        if self.rng.random_bool(0.1) {
            let i = self.rng.random_range(0..self.nodes.len());
            if self.nodes[i].state.mesh.is_some() {
                let _ = self.act(i, |s, id, _, now| s.sync_request(id, now));
            }
        }
    }

    /// Sends a forged, replayed, truncated or malformed message and checks
    /// that it is refused with no state change.
    fn inject_bad_message(&mut self) -> Result<(), SimError> {
        if self.accepted.is_empty() {
            return Ok(());
        }
        let (to, bytes) = self.accepted[self.rng.random_range(0..self.accepted.len())].clone();
        let outsider = Identity::generate(&mut self.rng);
        let kind = self.rng.random_range(0..5);
        let bad: Vec<u8> = match kind {
            0 => bytes.clone(), // replay to the node that already accepted it
            1 => {
                let mut b = bytes.clone();
                let at = self.rng.random_range(0..b.len());
                b[at] ^= self.rng.random_range(1..=255u8);
                b
            }
            2 => bytes[..self.rng.random_range(0..bytes.len())].to_vec(),
            3 => (0..self.rng.random_range(1..200))
                .map(|_| self.rng.random())
                .collect(),
            _ => forge(&bytes, &outsider),
        };
        if kind != 0 && bad == bytes {
            return Ok(());
        }
        let target = if kind == 0 {
            to
        } else {
            self.rng.random_range(0..self.nodes.len())
        };
        let before = &self.nodes[target].state;
        self.injected += 1;
        match before.receive(&self.nodes[target].id, &bad, self.now, &mut self.rng) {
            Err(_) => self.refused_injections += 1,
            Ok((after, t)) => {
                if !(t.is_empty() && t.refused.is_none()) || &after != before {
                    return Err(SimError::Unsafe {
                        seed: self.seed,
                        what: format!("bad message (kind {kind}) changed state: {:?}", t.audit),
                    });
                }
            }
        }
        Ok(())
    }

    /// Ends partitions, loss and duplication, syncs and ticks until the
    /// members agree, then moves past every grace window.
    pub fn heal_and_settle(&mut self) {
        self.groups = None;
        self.cfg.loss = 0.0;
        self.cfg.dup = 0.0;
        for _ in 0..30 {
            self.now += STEP_MS;
            for i in 0..self.nodes.len() {
                if self.nodes[i].state.mesh.is_some() {
                    let _ = self.act(i, |s, id, _, now| s.sync_request(id, now));
                    let _ = self.act(i, |s, id, rng, now| s.tick(id, now, rng));
                }
            }
            self.drain_queue();
            if self.converged() {
                break;
            }
        }
        // Past every grace window, so only current secrets remain.
        self.now += timing().key_grace_ms + timing().proposal_ttl_ms;
        for i in 0..self.nodes.len() {
            if self.nodes[i].state.mesh.is_some() {
                let _ = self.act(i, |s, id, rng, now| s.tick(id, now, rng));
            }
        }
        self.queue.clear();
    }

    /// True when the online members are on one roster.
    fn online_converged(&self) -> bool {
        let m = self.online_members();
        m.windows(2)
            .all(|w| self.nodes[w[0]].state.tip == self.nodes[w[1]].state.tip)
    }

    fn converged(&self) -> bool {
        let m = self.members();
        m.windows(2)
            .all(|w| self.nodes[w[0]].state.tip == self.nodes[w[1]].state.tip)
    }

    /// After `heal_and_settle`: members agree on roster and secret, and no
    /// node applied two commits at one epoch except by the convergent switch.
    pub fn check_agreement(&self, report: &mut Report) -> Result<(), SimError> {
        let members = self.members();
        let Some(&first_i) = members.first() else {
            return Err(self.unsafe_error("no member left".into()));
        };
        let first = &self.nodes[first_i].state;
        self.check_members_agree(&members, first)?;
        let max_epoch = self
            .nodes
            .iter()
            .map(|n| n.state.epoch())
            .max()
            .unwrap_or(0);
        if first.epoch() != max_epoch {
            return Err(self.unsafe_error(format!(
                "members are behind the highest epoch: {}",
                self.describe()
            )));
        }
        for (i, n) in self.nodes.iter().enumerate() {
            self.check_history(i, &n.state, report)?;
        }
        // Every member holds the X25519 key its roster names (its own, or
        // one still pending): envelopes wrapped to it open.
        for &m in &members {
            let n = &self.nodes[m];
            let named = n
                .state
                .roster()
                .and_then(|r| r.member(&n.state.me.peer_id))
                .map(|e| e.x25519);
            if named.is_none_or(|k| n.id.x25519_secret_for(&k).is_none()) {
                return Err(self.unsafe_error(format!(
                    "node {m}: its roster names an X25519 key it does not hold"
                )));
            }
        }
        // Evidence names only committers that sent a bad envelope.
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(p) = n
                .state
                .proven_bad
                .values()
                .find(|p| !self.bad_committers.contains(&p.committer))
            {
                return Err(self.unsafe_error(format!(
                    "node {i}: evidence of epoch {} blames a committer that sent no bad envelope",
                    p.epoch
                )));
            }
        }
        report.bad_envelopes = self.bad_envelopes_sent;
        report.evidence = self.nodes.iter().map(|n| n.state.proven_bad.len()).sum();
        report.end_epoch = first.epoch();
        report.members = members.len();
        report.approved_adds = approved_adds(first);
        report.key_updates = key_updates(first);
        report.injected = self.injected;
        report.refused_injections = self.refused_injections;
        Ok(())
    }

    fn unsafe_error(&self, what: String) -> SimError {
        SimError::Unsafe {
            seed: self.seed,
            what,
        }
    }

    /// Every member is on `first`'s roster with the one current secret (or
    /// none, proven stranded by the tip's envelope), and their chains agree.
    fn check_members_agree(&self, members: &[usize], first: &MeshState) -> Result<(), SimError> {
        for &m in members {
            let s = &self.nodes[m].state;
            if s.tip != first.tip || s.roster() != first.roster() {
                return Err(
                    self.unsafe_error(format!("node {m} on another roster: {}", self.describe()))
                );
            }
            // A member whose envelope of the tip did not open follows it
            // without the secret until the next commit (§7); any other
            // holds the one secret.
            let stranded = s.current_secret().is_none()
                && s.bad_envelopes.iter().any(|b| b.roster_hash == s.tip);
            let secret = members
                .iter()
                .find_map(|&o| self.nodes[o].state.current_secret());
            if !stranded && (s.current_secret().is_none() || s.current_secret() != secret) {
                return Err(self.unsafe_error(format!("node {m}: secrets differ")));
            }
            if s.secrets.len() != usize::from(!stranded) {
                return Err(self.unsafe_error(format!("node {m}: old secrets not erased")));
            }
            // A joiner's chain starts at the roster it joined from; the rest agrees.
            let (a, b) = (s.chain(), first.chain());
            let n = a.len().min(b.len());
            if a[..n] != b[..n] {
                return Err(self.unsafe_error(format!("node {m}: chains differ")));
            }
            // Every member holds the chain back to a genesis that hashes
            // to its mesh id (a joiner's came in its welcome), unless the
            // chain outgrew a welcome (`WELCOME_CHAIN_MAX_BYTES`).
            let held = s.chain_from_genesis();
            if held.is_none() && chain_outgrew_welcomes(first) {
                continue;
            }
            let genesis = held.and_then(|(g, _)| grove::mesh::roster::Roster::decode(&g).ok());
            if !genesis.is_some_and(|g| g.self_certifies() && Ok(g.mesh_id) == s.mesh_id()) {
                return Err(self.unsafe_error(format!(
                    "node {m}: no chain back to a genesis that hashes to its mesh id"
                )));
            }
        }
        // And that chain replays, offline, to the members' roster.
        if let Some((genesis, commits)) = first.chain_from_genesis() {
            let replayed = grove::mesh::state::verify_chain(&genesis, &commits)
                .map_err(|e| self.unsafe_error(format!("the chain does not replay: {e}")))?;
            if Some(replayed.tip()) != first.roster() {
                return Err(self.unsafe_error("the chain replays to another roster".into()));
            }
        }
        Ok(())
    }

    /// Node `i`'s tip never went back in epoch, and moved within one epoch
    /// only by the convergent switch to the preferred sibling (counted).
    fn check_history(
        &self,
        i: usize,
        state: &MeshState,
        report: &mut Report,
    ) -> Result<(), SimError> {
        let mut seen: BTreeMap<u64, BTreeSet<[u8; 32]>> = BTreeMap::new();
        for (k, e) in state.history.iter().enumerate() {
            seen.entry(e.epoch).or_default().insert(e.roster_hash);
            if k == 0 {
                continue;
            }
            let prev = &state.history[k - 1];
            if e.epoch < prev.epoch {
                return Err(self.unsafe_error(format!("node {i}: tip went back in epoch")));
            }
            if e.epoch == prev.epoch {
                if !e.switched {
                    return Err(self.unsafe_error(format!(
                        "node {i}: two commits at one epoch without a switch"
                    )));
                }
                report.switches += 1;
                // The switch goes to the preferred sibling: lowest commit hash.
                let parent = |h: &[u8; 32]| state.rosters.get(h).and_then(|r| r.parent);
                if parent(&e.roster_hash) == parent(&prev.roster_hash)
                    && e.commit_hash >= prev.commit_hash
                {
                    return Err(self.unsafe_error(format!("node {i}: switch to a higher hash")));
                }
            }
        }
        Ok(())
    }

    /// Checks liveness from the current state on a copy (this run goes on
    /// unchanged): the network becomes reliable, the nodes sync, then —
    /// every other check — up to `members - quorum` members go offline. The
    /// online members vote on what is open (yes or no at random), proposers
    /// withdraw what stays open, and every node re-sends its own open
    /// messages, as the daemon does. Every proposal open at any online
    /// member must be decided within the bound, and then a rotate proposed
    /// by a random online member must be committed by all of them.
    pub fn check_liveness(&mut self, report: &mut Report, step: usize) -> Result<(), SimError> {
        let probe_seed = self.rng.random::<u64>();
        let with_offline = report.liveness_checks % 2 == 1;
        let mut probe = Sim {
            seed: self.seed,
            rng: StdRng::seed_from_u64(probe_seed),
            nodes: self.nodes.clone(),
            queue: Vec::new(),
            now: self.now,
            cfg: Config {
                loss: 0.0,
                dup: 0.0,
                max_delay_steps: 1,
                inject_rate: 0.0,
                ..self.cfg.clone()
            },
            groups: None,
            offline: vec![false; self.nodes.len()],
            accepted: Vec::new(),
            injected: 0,
            refused_injections: 0,
            storage: Memory,
            max_nodes: self.max_nodes,
            invites: self.invites.clone(),
            bad_committers: self.bad_committers.clone(),
            bad_envelopes_sent: 0,
        };
        report.liveness_checks += 1;
        let step_text = if step == usize::MAX {
            "end".to_string()
        } else {
            step.to_string()
        };
        let stuck = |what: String| SimError::Stuck {
            seed: self.seed,
            step: step_text.clone(),
            what,
        };
        // Catch up: joiners ask again, everyone reachable syncs.
        for _ in 0..3 {
            probe.joiners_ask_again();
            probe.sync_all();
            probe.drain_queue();
            if probe.online_converged() && !probe.welcome_due() {
                break;
            }
        }
        if with_offline && probe.take_some_offline() {
            report.offline_checks += 1;
        }
        probe.decide_open(report).map_err(stuck)?;
        probe.commit_next().map_err(stuck)
    }

    fn sync_all(&mut self) {
        for i in 0..self.nodes.len() {
            if !self.offline[i] && self.nodes[i].state.mesh.is_some() {
                let _ = self.act(i, |s, id, _, now| s.sync_request(id, now));
            }
        }
    }

    /// Delivers until nothing is in flight (what arrives may send more;
    /// bounded at 20 steps).
    fn drain_queue(&mut self) {
        for _ in 0..20 {
            if self.queue.is_empty() {
                break;
            }
            self.now += STEP_MS;
            self.deliver_due();
        }
    }

    /// Takes between one and `members - quorum` members of the best roster
    /// offline (none when the roster cannot lose any). True when some went.
    fn take_some_offline(&mut self) -> bool {
        let Some(best) = self
            .members()
            .into_iter()
            .max_by_key(|&i| self.nodes[i].state.epoch())
        else {
            return false;
        };
        let Some(roster) = self.nodes[best].state.roster().cloned() else {
            return false;
        };
        let spare = roster.members.len() - roster.quorum_needed();
        if spare == 0 {
            return false;
        }
        let count = self.rng.random_range(1..=spare);
        let mut candidates: Vec<usize> = roster
            .members
            .iter()
            .filter_map(|m| self.peer_index(&m.peer_id))
            .collect();
        for _ in 0..count {
            if candidates.is_empty() {
                break;
            }
            let k = self.rng.random_range(0..candidates.len());
            let i = candidates.swap_remove(k);
            self.offline[i] = true;
        }
        true
    }

    /// Open proposals at online members, as text, or None.
    fn open_at_online(&self) -> Option<String> {
        let mut open = BTreeSet::new();
        for i in self.online_members() {
            for p in self.nodes[i].state.proposals.values() {
                open.insert(format!("{} at node {i}", &hex::encode(p.hash)[..12]));
            }
        }
        (!open.is_empty()).then(|| open.into_iter().collect::<Vec<_>>().join(", "))
    }

    /// The honest online members decide every open proposal. Ok when none
    /// is open at an online member within the bound; Err says what is.
    fn decide_open(&mut self, report: &mut Report) -> Result<(), String> {
        let offline = self.offline.iter().any(|&o| o);
        let limit = if offline {
            (timing().proposal_ttl_ms / STEP_MS) as usize + DECIDE_OFFLINE_EXTRA_STEPS
        } else {
            DECIDE_ONLINE_STEPS
        };
        let mut watched: BTreeMap<[u8; 32], (usize, u64)> = BTreeMap::new();
        for step in 0..limit {
            for i in self.online_members() {
                for p in self.nodes[i].state.proposals.values() {
                    watched.entry(p.hash).or_insert((i, p.epoch));
                }
            }
            if self.open_at_online().is_none() && self.queue.is_empty() && self.online_converged() {
                self.count_outcomes(&watched, report);
                return Ok(());
            }
            self.now += STEP_MS;
            self.deliver_due();
            self.honest_round(step);
        }
        match self.open_at_online() {
            None => {
                self.count_outcomes(&watched, report);
                Ok(())
            }
            Some(open) => Err(format!(
                "after {limit} steps{} proposals are still open at online members: {open}",
                if offline {
                    " (some members offline)"
                } else {
                    ""
                }
            )),
        }
    }

    /// One step of honest members: vote on what is open (if free), withdraw
    /// own proposals that stayed open, tick, and now and then re-send own
    /// open messages and sync.
    fn honest_round(&mut self, step: usize) {
        for i in self.online_members() {
            let me = self.nodes[i].id.peer_id();
            let epoch = self.nodes[i].state.epoch();
            let voted_on = self.nodes[i]
                .state
                .votes
                .get(&(epoch, me.clone()))
                .map(|v| v.proposal_hash);
            let state = &self.nodes[i].state;
            let open: Vec<[u8; 32]> = state
                .proposals
                .values()
                .filter(|p| {
                    Some(p.hash) != voted_on && state.binding_vote(&me, p.created_ms).is_none()
                })
                .map(|p| p.hash)
                .collect();
            for p in open {
                let yes = self.rng.random_bool(0.7);
                if self
                    .act(i, |s, id, rng, now| s.vote(id, p, yes, now, rng))
                    .is_ok()
                {
                    break;
                }
            }
            let stale: Vec<[u8; 32]> = self.nodes[i]
                .state
                .proposals
                .values()
                .filter(|p| {
                    p.proposer == me && self.now - p.created_ms >= WITHDRAW_AFTER_STEPS * STEP_MS
                })
                .map(|p| p.hash)
                .collect();
            for p in stale {
                let _ = self.act(i, |s, id, _, now| s.withdraw(id, p, now));
            }
            let _ = self.act(i, |s, id, rng, now| s.tick(id, now, rng));
        }
        if step.is_multiple_of(4) {
            self.republish_all();
        }
        if step.is_multiple_of(5) {
            self.joiners_ask_again();
            self.sync_all();
        }
    }

    /// Every online member re-sends its own open proposals, votes and
    /// withdrawals, as the daemon does every 30 s.
    fn republish_all(&mut self) {
        for i in self.online_members() {
            let messages = self.nodes[i].state.republish();
            self.enqueue(
                i,
                Transition {
                    outbound: messages
                        .into_iter()
                        .map(|message| grove::mesh::state::Outbound {
                            to: Dest::All,
                            message,
                        })
                        .collect(),
                    ..Transition::default()
                },
            );
        }
    }

    /// How the watched proposals ended, as seen by the node that first held them.
    fn count_outcomes(&self, watched: &BTreeMap<[u8; 32], (usize, u64)>, report: &mut Report) {
        for (hash, (i, epoch)) in watched {
            let s = &self.nodes[*i].state;
            if s.epoch() > *epoch {
                if s.rosters.values().any(|n| n.proposal_hash == Some(*hash)) {
                    report.committed += 1;
                } else {
                    // Void: another proposal moved the epoch on.
                    report.expired += 1;
                }
            } else {
                match s.closed.get(hash).map(|c| c.reason) {
                    Some(CloseReason::Rejected) => report.rejected += 1,
                    Some(CloseReason::Withdrawn) => report.withdrawn += 1,
                    None => report.expired += 1,
                }
            }
        }
    }

    /// A random online member proposes a rotate; every online member votes
    /// yes; all of them must reach the next epoch with one secret.
    fn commit_next(&mut self) -> Result<(), String> {
        // A commit during the decision (a kick) may have left too few online.
        let online = self.online_members();
        let Some(&first) = online.first() else {
            return Err("no online member".into());
        };
        let needed = self.nodes[first]
            .state
            .roster()
            .map_or(1, |r| r.quorum_needed());
        if online.len() < needed {
            self.offline.iter_mut().for_each(|o| *o = false);
            for _ in 0..3 {
                self.sync_all();
                self.drain_queue();
            }
        }
        for _ in 0..5 {
            if self.online_converged() {
                break;
            }
            self.sync_all();
            self.drain_queue();
        }
        let online = self.online_members();
        let Some(&by) = online.get(self.rng.random_range(0..online.len().max(1))) else {
            return Err("no online member".into());
        };
        let epoch = self.nodes[by].state.epoch();
        self.act(by, |s, id, rng, now| {
            s.propose(id, ProposalChange::Rotate, now, rng)
        })
        .map_err(|e| format!("node {by} cannot propose the next change: {e}"))?;
        // None when it committed at once (a one-member roster).
        let p = self.nodes[by]
            .state
            .proposals
            .values()
            .find(|p| p.proposer == self.nodes[by].id.peer_id())
            .map(|p| p.hash);
        for step in 0..NEXT_COMMIT_STEPS {
            self.now += STEP_MS;
            self.deliver_due();
            for i in self.online_members() {
                if let Some(p) = p.filter(|p| self.nodes[i].state.proposals.contains_key(p)) {
                    let _ = self.act(i, |s, id, rng, now| s.vote(id, p, true, now, rng));
                }
                let _ = self.act(i, |s, id, rng, now| s.tick(id, now, rng));
            }
            if step % 4 == 3 {
                self.joiners_ask_again();
                self.republish_all();
                self.sync_all();
            }
            let online = self.online_members();
            let done = online.iter().all(|&i| {
                self.nodes[i].state.epoch() > epoch
                    && self.nodes[i].state.tip == self.nodes[by].state.tip
                    && self.nodes[i].state.current_secret() == self.nodes[by].state.current_secret()
            });
            if done && self.nodes[by].state.epoch() > epoch {
                return Ok(());
            }
        }
        Err(format!(
            "node {by}'s rotate at epoch {epoch} was not committed by the online members in \
             {NEXT_COMMIT_STEPS} steps; {}",
            self.describe()
        ))
    }

    /// Each node's view, for a failure message.
    fn describe(&self) -> String {
        let mut out = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let s = &n.state;
            if s.mesh.is_none() {
                if let Some(p) = &s.pending_join {
                    out.push(format!(
                        "node {i}{}: waiting to join with invite {}",
                        if self.offline[i] { " (offline)" } else { "" },
                        &hex::encode(p.invite_id)[..8]
                    ));
                }
                continue;
            }
            let me = n.id.peer_id();
            let vote = s
                .votes
                .get(&(s.epoch(), me.clone()))
                .map(|v| format!("seq {} on {}", v.seq, &hex::encode(v.proposal_hash)[..8]));
            let open: Vec<String> = s
                .proposals
                .values()
                .map(|p| {
                    let yes = s
                        .votes
                        .values()
                        .filter(|v| v.proposal_hash == p.hash && v.yes)
                        .count();
                    format!("{} ({yes} yes)", &hex::encode(p.hash)[..8])
                })
                .collect();
            out.push(format!(
                "node {i}{}: epoch {} tip {} member {} synced {} needs {} vote {:?} open {:?}",
                if self.offline[i] { " (offline)" } else { "" },
                s.epoch(),
                &hex::encode(s.tip)[..8],
                s.is_member(),
                s.synced,
                s.roster().map_or(0, |r| r.quorum_needed()),
                vote,
                open
            ));
        }
        out.join("; ")
    }
}

/// Commits on `state`'s chain that added a member on a pre-approved invite
/// with one vote where the quorum was more (§8a).
fn approved_adds(state: &MeshState) -> usize {
    state
        .chain()
        .iter()
        .filter_map(|h| state.rosters.get(h))
        .filter(|n| {
            let votes = n.commit.as_deref().and_then(|c| {
                let signed: wire::Signed = codec::decode_canonical(c, "commit").ok()?;
                let commit: wire::Commit = codec::decode_canonical(&signed.body, "commit").ok()?;
                let core: wire::CommitCore =
                    codec::decode_canonical(&commit.core, "commit core").ok()?;
                Some(core.votes.len())
            });
            let needed = n
                .parent
                .and_then(|p| state.rosters.get(&p))
                .map(|p| p.roster.quorum_needed());
            votes == Some(1) && needed.is_some_and(|q| q > 1)
        })
        .count()
}

/// Commits on `state`'s chain that changed a member's X25519 key.
fn key_updates(state: &MeshState) -> usize {
    state
        .chain()
        .iter()
        .filter_map(|h| state.rosters.get(h))
        .filter(|n| n.parent.is_some_and(|p| key_changed(state, p, &n.roster)))
        .count()
}

/// True when some member's X25519 key in `next` differs from its key in
/// the roster `parent`.
fn key_changed(state: &MeshState, parent: [u8; 32], next: &grove::mesh::roster::Roster) -> bool {
    state.rosters.get(&parent).is_some_and(|p| {
        next.members.iter().any(|m| {
            p.roster
                .member(&m.peer_id)
                .is_some_and(|old| old.x25519 != m.x25519)
        })
    })
}

/// Re-signs the signed body inside a message with an outsider's key.
pub fn forge(bytes: &[u8], outsider: &Identity) -> Vec<u8> {
    use prost::Message;
    use wire::mesh_message::Kind;
    let Ok(mut msg) = wire::MeshMessage::decode(bytes) else {
        return bytes.to_vec();
    };
    let resign = |s: &mut wire::Signed, t: &[u8]| {
        s.signer = outsider.ed25519_public().to_vec();
        s.signature = outsider.sign(t, &s.body).to_vec();
    };
    match msg.kind.as_mut() {
        Some(Kind::Proposal(s)) => resign(s, codec::tag::PROPOSAL),
        Some(Kind::Vote(s)) => resign(s, codec::tag::VOTE),
        Some(Kind::Commit(s)) => resign(s, codec::tag::COMMIT),
        Some(Kind::Revocation(s)) => resign(s, codec::tag::REVOCATION),
        Some(Kind::JoinRequest(s)) => resign(s, codec::tag::JOIN),
        Some(Kind::SyncRequest(s)) => resign(s, codec::tag::SYNC_REQUEST),
        Some(Kind::SyncResponse(s)) => resign(s, codec::tag::SYNC_RESPONSE),
        Some(Kind::Withdrawal(s)) => resign(s, codec::tag::WITHDRAWAL),
        Some(Kind::EnvelopeEvidence(s)) => resign(s, codec::tag::ENVELOPE_EVIDENCE),
        Some(Kind::ReleasedVote(rv)) => {
            if let Some(v) = rv.vote.as_mut() {
                resign(v, codec::tag::VOTE);
            }
        }
        Some(Kind::Welcome(w)) => {
            if let Some(c) = w.commit.as_mut() {
                resign(c, codec::tag::COMMIT);
            }
        }
        None => {}
    }
    msg.encode_to_vec()
}

/// Whether `state`'s chain from the genesis is longer than a welcome carries.
fn chain_outgrew_welcomes(state: &MeshState) -> bool {
    use prost::Message;
    state
        .chain_from_genesis()
        .is_some_and(|(genesis, commits)| {
            genesis.len() + commits.iter().map(Message::encoded_len).sum::<usize>()
                > grove::mesh::state::WELCOME_CHAIN_MAX_BYTES
        })
}
