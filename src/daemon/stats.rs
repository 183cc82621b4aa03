//! The node's counters (`grove node stats`, and `/metrics` through
//! `daemon::metrics`): messages accepted and dropped by reason, requests
//! served, epochs seen; and its latency histograms. Reasons are a fixed
//! vocabulary so the set of counters stays small whatever peers send.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// A latency histogram family by one label (`scope` of a search, ...).
pub type Latency = Family<[(&'static str, &'static str); 1], Histogram, fn() -> Histogram>;

/// Buckets from 1 ms to about 33 s (doubling): searches take milliseconds,
/// a turn of the embedded model seconds.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

#[derive(Debug)]
pub struct Stats {
    counters: Mutex<BTreeMap<String, u64>>,
    /// Searches by `scope`: `local` (this node's books, asked here),
    /// `mesh` (the whole fan-out, asked here), `peer` (answering a member).
    pub search_seconds: Latency,
    /// Hosted moot turns that landed, by `speaker` (`local` or `remote`),
    /// from the ask to the checked answer.
    pub turn_seconds: Latency,
    /// Books stored through the control API, by `status` (`added`,
    /// `new-version`, `unchanged`), from the request to the commit.
    pub ingest_seconds: Latency,
    /// Asks through the control API, by `scope` (`local`, `mesh`), from the
    /// request to the verified answer (a cache hit too).
    pub ask_seconds: Latency,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            counters: Mutex::default(),
            search_seconds: Family::new_with_constructor(latency_histogram),
            turn_seconds: Family::new_with_constructor(latency_histogram),
            ingest_seconds: Family::new_with_constructor(latency_histogram),
            ask_seconds: Family::new_with_constructor(latency_histogram),
        }
    }
}

/// Records `took` in `family` under `label = value`.
pub fn observe(family: &Latency, label: &'static str, value: &'static str, took: Duration) {
    family
        .get_or_create(&[(label, value)])
        .observe(took.as_secs_f64());
}

/// A hosted moot turn's verdict, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Grounded,
    Ungrounded,
    /// The speaker passed.
    Passed,
}

impl Stats {
    /// Everything a landed hosted-moot turn counts: the turn, its latency
    /// by speaker (`local` or `remote`), its grounding verdict and its
    /// quotes (checked, found).
    pub fn turn_landed(
        &self,
        speaker: &'static str,
        took: Duration,
        verdict: Verdict,
        quotes: (u32, u32),
    ) {
        self.bump("moot.turns.landed");
        observe(&self.turn_seconds, "speaker", speaker, took);
        self.bump(match verdict {
            Verdict::Grounded => "moot.grounding.grounded",
            Verdict::Ungrounded => "moot.grounding.ungrounded",
            Verdict::Passed => "moot.grounding.passed",
        });
        self.add("moot.quotes.checked", u64::from(quotes.0));
        self.add("moot.quotes.found", u64::from(quotes.1));
    }

    /// Everything one completion of the node's model counts: answered or
    /// failed, its wall time, and the tokens and phase times its backend
    /// reported (times in nanoseconds; `/metrics` shows seconds).
    pub fn model_completion(
        &self,
        took: Duration,
        answered: bool,
        usage: Option<&crate::model::Usage>,
    ) {
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let mut c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let mut add = |name: &str, n: u64| {
            let v = c.entry(name.to_string()).or_default();
            *v = v.saturating_add(n);
        };
        add(
            if answered {
                "model.completions.answered"
            } else {
                "model.completions.failed"
            },
            1,
        );
        add("model.completion.ns", nanos(took));
        if let Some(usage) = usage {
            add("model.prompt.tokens", usage.prompt_tokens);
            add("model.generated.tokens", usage.generated_tokens);
            if let Some((prompt, generation)) = usage.phases {
                add("model.prompt.ns", nanos(prompt));
                add("model.generation.ns", nanos(generation));
            }
        }
    }

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
