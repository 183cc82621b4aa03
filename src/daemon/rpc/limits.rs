//! Admission at the request level: how many requests are answered at
//! once, how often one peer may call each protocol (token buckets), and
//! how much model time one member's turn requests may use per hour. Each
//! refusal is an answer with its reason (and the config key to change),
//! counted as `requests.refused.<protocol>.<reason>`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libp2p::PeerId;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::NetSettings;
use crate::net::Protocol;

/// Buckets of peers not heard from in this long are forgotten (a full
/// bucket and a forgotten one behave alike).
const FORGET_AFTER: Duration = Duration::from_secs(600);
/// The maps are pruned when they grow past this many entries.
const PRUNE_AT: usize = 4096;
/// The window a turn quota is given per.
const QUOTA_WINDOW: Duration = Duration::from_secs(3600);

/// Why a request was refused before it was answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "too many {protocol} requests from this node: at most {per_minute} a minute (net.rate.{short}); try again in {retry_ms} ms"
    )]
    Rate {
        protocol: Protocol,
        short: &'static str,
        per_minute: u32,
        retry_ms: u64,
    },
    #[error(
        "this node is answering {0} requests already (net.max_request_tasks); try again shortly"
    )]
    Busy(usize),
    #[error(
        "this node's model time for your node's turns is spent: {quota_secs} s an hour (net.turn_quota_secs); it frees up in {retry_secs} s"
    )]
    TurnQuota { quota_secs: u64, retry_secs: u64 },
}

impl Refusal {
    /// The counter suffix (`requests.refused.<protocol>.<reason>`).
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Rate { .. } => "rate",
            Refusal::Busy(_) => "busy",
            Refusal::TurnQuota { .. } => "turn-quota",
        }
    }
}

/// A token bucket: `capacity` tokens, refilled at `per_sec`.
#[derive(Debug, Clone)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(capacity: f64, now: Instant) -> Bucket {
        Bucket {
            tokens: capacity,
            at: now,
        }
    }

    fn refill(&mut self, capacity: f64, per_sec: f64, now: Instant) {
        let gained = now.duration_since(self.at).as_secs_f64() * per_sec;
        self.tokens = (self.tokens + gained).min(capacity);
        self.at = now;
    }
}

/// The request limits of one node; cheap to clone.
#[derive(Clone)]
pub struct Limits {
    tasks: Arc<Semaphore>,
    max_tasks: usize,
    rates: [u32; 4],
    quota_secs: u64,
    pub max_query_bytes: usize,
    buckets: Arc<Mutex<HashMap<(PeerId, Protocol), Bucket>>>,
    quotas: Arc<Mutex<HashMap<PeerId, Bucket>>>,
}

fn slot(protocol: Protocol) -> usize {
    match protocol {
        // A joiner's calls to its inviter and to relays share one budget.
        Protocol::Join | Protocol::RelayPass => 0,
        Protocol::Sync => 1,
        Protocol::Search => 2,
        Protocol::Turn => 3,
    }
}

fn prune(map: &mut HashMap<impl std::hash::Hash + Eq, Bucket>, now: Instant) {
    if map.len() > PRUNE_AT {
        map.retain(|_, b| now.duration_since(b.at) < FORGET_AFTER);
    }
}

impl Limits {
    pub fn new(net: &NetSettings) -> Limits {
        Limits {
            tasks: Arc::new(Semaphore::new(net.max_request_tasks)),
            max_tasks: net.max_request_tasks,
            rates: [net.rate.join, net.rate.sync, net.rate.search, net.rate.turn],
            quota_secs: net.turn_quota_secs,
            max_query_bytes: net.max_query_bytes,
            buckets: Arc::new(Mutex::new(HashMap::new())),
            quotas: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Takes one request of `peer` on `protocol`: its rate, then a task
    /// slot (held until the answer is sent).
    pub fn admit(&self, peer: PeerId, protocol: Protocol) -> Result<OwnedSemaphorePermit, Refusal> {
        self.take_rate(peer, protocol, Instant::now())?;
        self.tasks
            .clone()
            .try_acquire_owned()
            .map_err(|_| Refusal::Busy(self.max_tasks))
    }

    fn take_rate(&self, peer: PeerId, protocol: Protocol, now: Instant) -> Result<(), Refusal> {
        let per_minute = self.rates[slot(protocol)];
        let per_sec = f64::from(per_minute) / 60.0;
        // A quarter of a minute's worth at once, and at least five.
        let capacity = (f64::from(per_minute) / 4.0).max(5.0);
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        prune(&mut buckets, now);
        let bucket = buckets
            .entry((peer, protocol))
            .or_insert_with(|| Bucket::full(capacity, now));
        bucket.refill(capacity, per_sec, now);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        Err(Refusal::Rate {
            protocol,
            short: protocol.short(),
            per_minute,
            retry_ms: ((1.0 - bucket.tokens) / per_sec * 1000.0).ceil() as u64,
        })
    }

    /// Refuses a turn when `peer` has used its model time this hour.
    pub fn check_turn_quota(&self, peer: PeerId) -> Result<(), Refusal> {
        self.quota_at(peer, Instant::now())
    }

    fn quota_at(&self, peer: PeerId, now: Instant) -> Result<(), Refusal> {
        let (capacity, per_sec) = self.quota_rate();
        let mut quotas = self.quotas.lock().unwrap_or_else(|e| e.into_inner());
        prune(&mut quotas, now);
        let bucket = quotas
            .entry(peer)
            .or_insert_with(|| Bucket::full(capacity, now));
        bucket.refill(capacity, per_sec, now);
        if bucket.tokens > 0.0 {
            return Ok(());
        }
        Err(Refusal::TurnQuota {
            quota_secs: self.quota_secs,
            retry_secs: ((-bucket.tokens + 1.0) / per_sec).ceil() as u64,
        })
    }

    /// Charges `used` model time to `peer`'s quota (a turn that ran over
    /// what was left leaves it in debt, repaid before its next turn).
    pub fn charge_turn(&self, peer: PeerId, used: Duration) {
        let now = Instant::now();
        let (capacity, per_sec) = self.quota_rate();
        let mut quotas = self.quotas.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = quotas
            .entry(peer)
            .or_insert_with(|| Bucket::full(capacity, now));
        bucket.refill(capacity, per_sec, now);
        bucket.tokens -= used.as_secs_f64();
    }

    fn quota_rate(&self) -> (f64, f64) {
        let capacity = self.quota_secs as f64;
        (capacity, capacity / QUOTA_WINDOW.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> NetSettings {
        let mut s = NetSettings::default();
        s.rate.search = 60;
        s.max_request_tasks = 2;
        s.turn_quota_secs = 10;
        s
    }

    #[test]
    fn a_peer_past_its_rate_is_refused_and_others_are_not() {
        let limits = Limits::new(&settings());
        let (a, b) = (PeerId::random(), PeerId::random());
        let now = Instant::now();
        // A burst of 15 (a quarter of 60 a minute), then refusals.
        for _ in 0..15 {
            limits.take_rate(a, Protocol::Search, now).unwrap();
        }
        let refused = limits.take_rate(a, Protocol::Search, now).unwrap_err();
        assert!(refused.to_string().contains("net.rate.search"), "{refused}");
        limits.take_rate(b, Protocol::Search, now).unwrap();
        limits.take_rate(a, Protocol::Sync, now).unwrap();
        // One a second comes back.
        limits
            .take_rate(a, Protocol::Search, now + Duration::from_millis(1100))
            .unwrap();
    }

    #[test]
    fn task_slots_are_bounded_and_given_back() {
        let limits = Limits::new(&settings());
        let p = PeerId::random();
        let one = limits.admit(p, Protocol::Sync).unwrap();
        let _two = limits.admit(p, Protocol::Sync).unwrap();
        assert_eq!(
            limits.admit(p, Protocol::Sync).unwrap_err(),
            Refusal::Busy(2)
        );
        drop(one);
        let _three = limits.admit(p, Protocol::Sync).unwrap();
    }

    #[test]
    fn a_member_past_its_turn_quota_is_refused_until_it_refills() {
        let limits = Limits::new(&settings());
        let p = PeerId::random();
        limits.check_turn_quota(p).unwrap();
        limits.charge_turn(p, Duration::from_secs(12));
        let refused = limits.check_turn_quota(p).unwrap_err();
        assert!(
            refused.to_string().contains("net.turn_quota_secs"),
            "{refused}"
        );
        limits.check_turn_quota(PeerId::random()).unwrap();
        // 10 s an hour refills at one second per six minutes.
        let later = Instant::now() + Duration::from_secs(3 * 360 + 1);
        limits.quota_at(p, later).unwrap();
    }
}
