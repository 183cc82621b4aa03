//! A transaction on the state: a working copy and the effects, messages
//! and audit events made on it, handed back whole or not at all.

use super::*;

/// A working copy plus the effects made on it.
#[derive(Clone)]
pub(super) struct Tx {
    pub(super) s: MeshState,
    pub(super) t: Transition,
}

impl Tx {
    pub(super) fn effect(&mut self, e: Effect) {
        match &e {
            Effect::PutMesh(m) => self.s.mesh = Some(m.clone()),
            Effect::PutRoster(n) => {
                self.s.rosters.insert(n.hash, n.clone());
            }
            Effect::SetTip(h) => self.s.tip = *h,
            Effect::PutSecret(x) => {
                self.s.secrets.insert(x.roster_hash, x.clone());
            }
            Effect::EraseSecret(h) => {
                self.s.secrets.remove(h);
            }
            Effect::PutProposal(p) => {
                self.s.proposals.insert(p.hash, p.clone());
            }
            Effect::DeleteProposal(h) => {
                self.s.proposals.remove(h);
            }
            Effect::PutVote(v) => {
                self.s.votes.insert((v.epoch, v.voter.clone()), v.clone());
            }
            Effect::DeleteVotesBefore(epoch) => {
                self.s.votes.retain(|(e, _), _| *e >= *epoch);
            }
            Effect::PutClosed(c) => {
                self.s.closed.insert(c.hash, c.clone());
            }
            Effect::DeleteClosed(h) => {
                self.s.closed.remove(h);
            }
            Effect::PutEvidence(ev) => self.s.evidence.push(ev.clone()),
            Effect::PutBadEnvelope(b) => self.s.bad_envelopes.push(b.clone()),
            Effect::PutProvenBadEnvelope(p) => {
                self.s
                    .proven_bad
                    .insert((p.roster_hash, p.accuser.clone()), p.clone());
            }
            Effect::PutInvite(i) => {
                self.s.invites.insert(i.id, i.clone());
            }
            Effect::PutRevocation { id, signed } => {
                self.s.revoked.insert(*id, signed.clone());
            }
            Effect::PutUsedInvite { id, proposal } => {
                self.s.used_invites.insert(*id, *proposal);
            }
            Effect::PutHistory(h) => self.s.history.push(h.clone()),
            Effect::SetPendingJoin(p) => self.s.pending_join = p.clone(),
        }
        self.t.effects.push(e);
    }

    pub(super) fn audit(&mut self, kind: &'static str, body: serde_json::Value) {
        self.t.audit.push(AuditEvent { kind, body });
    }

    pub(super) fn send(&mut self, to: Dest, kind: Kind) {
        let msg = wire::MeshMessage { kind: Some(kind) };
        self.t.outbound.push(Outbound {
            to,
            message: codec::encode(&msg),
        });
    }

    pub(super) fn done(self) -> (MeshState, Transition) {
        (self.s, self.t)
    }
}
