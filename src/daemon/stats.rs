//! The node's counters (`grove node stats`): messages accepted and dropped
//! by reason, requests served, epochs seen. Reasons are a fixed vocabulary
//! so the set of counters stays small whatever peers send.

use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct Stats {
    counters: Mutex<BTreeMap<String, u64>>,
}

impl Stats {
    pub fn bump(&self, name: &str) {
        self.add(name, 1);
    }

    pub fn add(&self, name: &str, n: u64) {
        let mut c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        *c.entry(name.to_string()).or_default() += n;
    }

    /// Sets a counter kept elsewhere (the network's admission counts).
    pub fn set(&self, name: &str, value: u64) {
        let mut c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        c.insert(name.to_string(), value);
    }

    pub fn get(&self, name: &str) -> u64 {
        let c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        c.get(name).copied().unwrap_or(0)
    }

    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// A short, fixed reason for a refused mesh message, for counter names.
pub fn mesh_reason(e: &crate::mesh::MeshError) -> &'static str {
    use crate::mesh::MeshError as E;
    match e {
        E::Malformed { .. } => "malformed",
        E::BadSignature(_) => "bad-signature",
        E::WrongMesh(_) => "wrong-mesh",
        E::StaleEpoch { .. } => "stale-epoch",
        E::UnknownRoster { .. } => "unknown-roster",
        E::NotMember(_) | E::NotAMember => "not-member",
        E::Duplicate(_) => "duplicate",
        E::Equivocation { .. } => "equivocation",
        E::ProposalExpired => "expired",
        E::UnknownProposal(_) => "unknown-proposal",
        E::InvalidProposal(_) | E::InvalidCommit(_) => "invalid",
        _ => "refused",
    }
}
