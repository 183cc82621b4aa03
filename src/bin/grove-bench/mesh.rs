//! `grove-bench mesh [sizes...]`: build and check-and-apply a commit for
//! rosters of 10, 100 and 1000 members; prints build time, check-and-apply
//! time (without fsync), the time to verify the commit's signatures alone
//! (the committer's, the proposal's and every vote's), the persist time with
//! and without fsync, the commit's size in bytes as sent and as the receiver
//! stores it; each size in both commit forms (docs/mesh-protocol.md §7a):
//! 0, envelopes signed (before protocol 1.3), and 1, their hashes signed
//! and the receiver's own envelope withheld from what it keeps.
//!
//! `grove-bench mesh liveness [seeds] [first seed] [steps]`: runs the seeded
//! membership simulation (`sim.rs` beside it, 10,000 seeds by default) and
//! prints how many runs got stuck or broke safety, how the proposals open at
//! the liveness checks were decided, and how long it took.

use std::time::{Duration, Instant};

use crate::sim as state_sim;
use grove::identity::Identity;
use grove::mesh::codec::{self, tag};
use grove::mesh::envelope::EnvelopeSender;
use grove::mesh::roster::CommitForm;
use grove::mesh::secret::EpochSecret;
use grove::mesh::state::fixture::{Fixture, NOW_MS};
use grove::mesh::state::{self, Effect, MeshState, Transition};
use grove::mesh::store::MeshStore;
use grove::wire::mesh as wire;
use prost::Message;
use rand::SeedableRng;
use rand::rngs::StdRng;

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// On-CPU time of the calling thread (Linux schedstat), to tell compute from
/// waiting for a core on a loaded machine.
fn thread_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// On-CPU time of the whole process, all threads (Linux, 10 ms ticks).
fn process_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are 14 and 15.
    let rest = text.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    if args.first().map(String::as_str) == Some("liveness") {
        return liveness(&args[1..]);
    }
    let sizes: Vec<usize> = if args.is_empty() {
        vec![10, 100, 1000]
    } else {
        args.iter()
            .map(|a| a.parse())
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!("sizes must be numbers: {e}"))?
    };
    println!(
        "{:>6} {:>5} {:>7} {:>10} {:>10} {:>12} {:>10} {:>12} {:>10} {:>10} {:>12} {:>14} {:>10} {:>10}",
        "members",
        "form",
        "votes",
        "build ms",
        "(cpu ms)",
        "check+apply",
        "(cpu ms)",
        "votes seen",
        "verify ms",
        "(cpu ms)",
        "persist ms",
        "persist+fsync",
        "bytes",
        "stored"
    );
    for n in sizes {
        for form in [CommitForm::Inline, CommitForm::Hashed] {
            bench_one(n, form)?;
        }
    }
    println!(
        "threads for envelope wraps: {}",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    Ok(())
}

/// A roster of `n` members, a signed rotate proposal by its first member
/// (the core's fixture), and a quorum of yes votes on it.
struct Setup {
    fx: Fixture,
    votes: Vec<wire::Signed>,
}

/// The commit as one receiving member gets it, timed over `rounds`.
struct Receipt<'a> {
    setup: &'a Setup,
    /// The receiver's state before the commit.
    base: MeshState,
    receiver: &'a Identity,
    message: &'a [u8],
    rounds: usize,
}

/// A commit's timings over the rounds, in the order the table prints them.
struct Timings {
    build: Vec<Duration>,
    /// Process CPU per build, or "-" where unknown.
    build_cpu: String,
    check: Vec<Duration>,
    check_cpu: Vec<Duration>,
    seen: Vec<Duration>,
    verify: Vec<Duration>,
    verify_cpu: Vec<Duration>,
    persist: Vec<Duration>,
    fsync: Vec<Duration>,
    /// The bytes of the commit as the receiver keeps it.
    stored: usize,
}

fn bench_one(n: usize, form: CommitForm) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(n as u64);
    let setup = Setup::new(n, form, &mut rng);
    let rounds = if n >= 1000 { 7 } else { 21 };
    let (build, build_cpu, commit) = time_builds(&setup, rounds, &mut rng)?;
    let message = wire::MeshMessage {
        kind: Some(wire::mesh_message::Kind::Commit(commit.clone())),
    }
    .encode_to_vec();
    // One receiving member (not the committer) at the roster's epoch.
    let receiver = &setup.fx.ids[n / 2];
    let receipt = Receipt {
        setup: &setup,
        base: setup.receiver_state(n / 2),
        receiver,
        message: &message,
        rounds,
    };
    let mut t = Timings {
        build,
        build_cpu,
        check: Vec::new(),
        check_cpu: Vec::new(),
        seen: Vec::new(),
        verify: Vec::new(),
        verify_cpu: Vec::new(),
        persist: Vec::new(),
        fsync: Vec::new(),
        stored: 0,
    };
    time_check_and_persist(&receipt, &mut rng, &mut t)?;
    t.seen = time_votes_seen(&receipt, &mut rng)?;
    (t.verify, t.verify_cpu) = time_verify(&commit, rounds)?;
    println!(
        "{:>6} {:>5} {:>7} {:>10.2} {:>10} {:>12.2} {:>10} {:>12.2} {:>10.2} {:>10} {:>12.2} {:>14.2} {:>10} {:>10}",
        n,
        form.to_wire(),
        setup.votes.len(),
        ms(median(t.build)),
        t.build_cpu,
        ms(median(t.check)),
        if t.check_cpu.is_empty() {
            "-".to_string()
        } else {
            format!("{:.2}", ms(median(t.check_cpu)))
        },
        ms(median(t.seen)),
        ms(median(t.verify)),
        if t.verify_cpu.is_empty() {
            "-".to_string()
        } else {
            format!("{:.2}", ms(median(t.verify_cpu)))
        },
        ms(median(t.persist)),
        ms(median(t.fsync)),
        message.len(),
        t.stored
    );
    Ok(())
}

impl Setup {
    fn new(n: usize, form: CommitForm, rng: &mut StdRng) -> Setup {
        let mut fx = Fixture::new(n, rng);
        fx.at_form(form);
        let votes = fx.votes();
        Setup { fx, votes }
    }

    /// The receiving member's state: the mesh at the roster's epoch, with
    /// its secret.
    fn receiver_state(&self, receiver: usize) -> MeshState {
        self.fx.state_of(receiver, EpochSecret::from([1u8; 32]))
    }
}

/// Builds the rotate commit `rounds` times; returns the build times, the
/// process CPU per build and the last commit.
fn time_builds(
    setup: &Setup,
    rounds: usize,
    rng: &mut StdRng,
) -> anyhow::Result<(Vec<Duration>, String, wire::Signed)> {
    let mut build_times = Vec::new();
    let mut commit = None;
    let build_cpu_start = process_cpu();
    for _ in 0..rounds {
        let secret = EpochSecret::from([9u8; 32]);
        let start = Instant::now();
        let sender = EnvelopeSender::new(&mut *rng);
        let c = setup.fx.commit(setup.votes.clone(), &secret, &sender)?;
        build_times.push(start.elapsed());
        commit = Some(c);
    }
    let build_cpu = match (build_cpu_start, process_cpu()) {
        (Some(a), Some(b)) => format!("{:.1}", ms(b.saturating_sub(a)) / rounds as f64),
        _ => "-".to_string(),
    };
    let commit = commit.ok_or_else(|| anyhow::anyhow!("no commit built"))?;
    Ok((build_times, build_cpu, commit))
}

/// Checks and applies the commit `rounds` times, and persists each
/// outcome into a fresh store holding the current roster, with and
/// without fsync by turns.
fn time_check_and_persist(
    r: &Receipt<'_>,
    rng: &mut StdRng,
    t: &mut Timings,
) -> anyhow::Result<()> {
    let (setup, base) = (r.setup, &r.base);
    let roster_hash = setup.fx.roster_hash;
    let seed = Transition {
        effects: vec![
            Effect::PutMesh(
                base.mesh
                    .clone()
                    .ok_or_else(|| anyhow::anyhow!("no mesh"))?,
            ),
            Effect::PutRoster(base.rosters[&roster_hash].clone()),
            Effect::SetTip(roster_hash),
            Effect::PutSecret(base.secrets[&roster_hash].clone()),
        ],
        ..Transition::default()
    };
    for round in 0..r.rounds {
        let cpu_start = thread_cpu();
        let start = Instant::now();
        let (after, transition) = base
            .receive(r.receiver, r.message, NOW_MS + 1000, &mut *rng)
            .map_err(|e| anyhow::anyhow!("commit refused: {e}"))?;
        t.check.push(start.elapsed());
        if let (Some(a), Some(b)) = (cpu_start, thread_cpu()) {
            t.check_cpu.push(b.saturating_sub(a));
        }
        if after.epoch() != setup.fx.roster.epoch + 1
            || after.current_secret() != Some(&EpochSecret::from([9u8; 32]))
        {
            anyhow::bail!("commit did not apply");
        }
        t.stored = after
            .rosters
            .get(&after.tip)
            .and_then(|node| node.commit.as_ref())
            .map_or(0, Vec::len);
        let dir = std::env::temp_dir().join(format!(
            "grove-bench-mesh-{}-{}-{round}",
            std::process::id(),
            setup.fx.ids.len()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let mut store = MeshStore::open_in(&dir)?;
        // The receiver's database already holds the current roster.
        store.set_synchronous(false)?;
        store.persist(&seed, NOW_MS)?;
        let fsync = round % 2 == 1;
        store.set_synchronous(fsync)?;
        let start = Instant::now();
        store.persist(&transition, NOW_MS)?;
        if fsync {
            t.fsync.push(start.elapsed());
        } else {
            t.persist.push(start.elapsed());
        }
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

/// Check-and-apply times in the usual case: the receiver already verified
/// the votes as they arrived.
fn time_votes_seen(r: &Receipt<'_>, rng: &mut StdRng) -> anyhow::Result<Vec<Duration>> {
    let setup = r.setup;
    let mut seen_state = r.base.clone();
    for v in &setup.votes {
        let body = wire::Vote::decode(&v.body[..])?;
        seen_state.votes.insert(
            (body.epoch, body.voter.clone()),
            state::VoteRec {
                epoch: body.epoch,
                voter: body.voter,
                roster_hash: setup.fx.roster_hash,
                proposal_hash: setup.fx.proposal_hash,
                yes: true,
                proposal_created_ms: body.proposal_created_ms,
                proposal_expires_ms: body.proposal_expires_ms,
                signed: v.encode_to_vec(),
                seq: 0,
                releases: None,
                release: None,
            },
        );
    }
    let mut seen_times = Vec::new();
    for _ in 0..r.rounds {
        let start = Instant::now();
        let (after, _) = seen_state
            .receive(r.receiver, r.message, NOW_MS + 1000, &mut *rng)
            .map_err(|e| anyhow::anyhow!("commit refused: {e}"))?;
        seen_times.push(start.elapsed());
        if after.epoch() != setup.fx.roster.epoch + 1 {
            anyhow::bail!("commit did not apply");
        }
    }
    Ok(seen_times)
}

/// Verifies the commit's signatures `rounds` times, as a receiver that saw
/// none of its votes does: the committer's, the proposal's and every vote's,
/// through the codec's one rule.
fn time_verify(
    commit: &wire::Signed,
    rounds: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let body = wire::Commit::decode(&commit.body[..])?;
    let core = wire::CommitCore::decode(&body.core[..])?;
    let proposal = core
        .proposal
        .ok_or_else(|| anyhow::anyhow!("commit without a proposal"))?;
    let signed = [(commit, tag::COMMIT), (&proposal, tag::PROPOSAL)]
        .into_iter()
        .chain(core.votes.iter().map(|v| (v, tag::VOTE)));
    let mut checks = Vec::new();
    for (s, tag) in signed {
        checks.push(codec::SigCheck {
            signer: codec::bytes32(&s.signer, "signer")?,
            tag,
            body: &s.body,
            signature: s.signature[..].try_into()?,
        });
    }
    let (mut times, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let cpu_start = thread_cpu();
        let start = Instant::now();
        codec::verify_all(&checks, "commit")?;
        times.push(start.elapsed());
        if let (Some(a), Some(b)) = (cpu_start, thread_cpu()) {
            cpu.push(b.saturating_sub(a));
        }
    }
    Ok((times, cpu))
}

/// Seeds the liveness simulation runs by default.
const LIVENESS_SEEDS: u64 = 10_000;
/// Random steps per seed before the last liveness check.
const LIVENESS_STEPS: usize = 120;

fn liveness(args: &[String]) -> anyhow::Result<()> {
    let number = |i: usize, default: u64| -> anyhow::Result<u64> {
        args.get(i).map_or(Ok(default), |a| {
            a.parse()
                .map_err(|e| anyhow::anyhow!("`{a}` is not a number: {e}"))
        })
    };
    let seeds = number(0, LIVENESS_SEEDS)?;
    let first = number(1, 0)?;
    let steps = usize::try_from(number(2, LIVENESS_STEPS as u64)?)?;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8) as u64;
    let start = Instant::now();
    let cpu0 = process_cpu();
    let results = run_seeds(first..first + seeds, steps, threads);
    let wall = start.elapsed();
    let cpu = match (cpu0, process_cpu()) {
        (Some(a), Some(b)) => format!("{:.1} s", (b - a).as_secs_f64()),
        _ => "unknown".into(),
    };
    let tally = Tally::of(&results);
    println!(
        "liveness: {} seeds ({first}..{}), {steps} random steps each, {threads} threads",
        results.len(),
        first + seeds
    );
    println!(
        "stuck: {}   unsafe or failed: {}   wall {:.1} s   cpu {cpu}   {:.2} ms per seed (wall)",
        tally.stuck.len(),
        tally.broken.len(),
        wall.as_secs_f64(),
        ms(wall) / results.len().max(1) as f64
    );
    tally.print_totals();
    if !tally.stuck.is_empty() || !tally.broken.is_empty() {
        anyhow::bail!(
            "{} of {} seeds stuck or failed",
            tally.stuck.len() + tally.broken.len(),
            results.len()
        );
    }
    Ok(())
}

type SeedRun = (u64, Result<state_sim::Report, state_sim::SimError>);

/// Runs the simulation for every seed of `seeds`, spread over `threads`
/// threads by seed modulo; a seed whose run panics fails with a setup error.
fn run_seeds(seeds: std::ops::Range<u64>, steps: usize, threads: u64) -> Vec<SeedRun> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let seeds = seeds.clone();
                scope.spawn(move || {
                    seeds
                        .filter(|s| s % threads == t)
                        .map(|seed| {
                            let (cfg, quorum) = state_sim::Config::sweep(seed, steps);
                            // A panic is a failure of that seed, not of the sweep.
                            let run =
                                std::panic::catch_unwind(|| state_sim::run(seed, cfg, quorum))
                                    .unwrap_or_else(|_| {
                                        Err(state_sim::SimError::Setup {
                                            seed,
                                            what: "panicked".into(),
                                        })
                                    });
                            (seed, run)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// The runs' reports summed, and the failures: stuck runs apart from the
/// unsafe or otherwise failed ones.
struct Tally {
    total: state_sim::Report,
    stuck: Vec<String>,
    broken: Vec<String>,
}

impl Tally {
    fn of(results: &[SeedRun]) -> Tally {
        let mut total = state_sim::Report::default();
        let mut stuck = Vec::new();
        let mut broken = Vec::new();
        for (_, r) in results {
            match r {
                Ok(r) => {
                    total.liveness_checks += r.liveness_checks;
                    total.offline_checks += r.offline_checks;
                    total.committed += r.committed;
                    total.rejected += r.rejected;
                    total.withdrawn += r.withdrawn;
                    total.expired += r.expired;
                    total.switches += r.switches;
                    total.injected += r.injected;
                    total.approved_adds += r.approved_adds;
                    total.key_updates += r.key_updates;
                    total.bad_envelopes += r.bad_envelopes;
                    total.evidence += r.evidence;
                }
                Err(e @ state_sim::SimError::Stuck { .. }) => stuck.push(e.to_string()),
                Err(e) => broken.push(e.to_string()),
            }
        }
        Tally {
            total,
            stuck,
            broken,
        }
    }

    /// How the proposals open at the liveness checks were decided, the
    /// other counts, and the first failures.
    fn print_totals(&self) {
        let total = &self.total;
        println!(
            "liveness checks: {} ({} with members offline); proposals open at them: committed {}, rejected {}, withdrawn {}, expired or void {}",
            total.liveness_checks,
            total.offline_checks,
            total.committed,
            total.rejected,
            total.withdrawn,
            total.expired
        );
        println!(
            "convergent switches: {}   bad messages injected (all refused): {}   adds on a pre-approved invite: {}   key updates: {}",
            total.switches, total.injected, total.approved_adds, total.key_updates
        );
        println!(
            "commits sent with a bad envelope: {}   checked evidence held (all naming such a committer): {}",
            total.bad_envelopes, total.evidence
        );
        for e in self.stuck.iter().chain(&self.broken).take(10) {
            println!("  {e}");
        }
    }
}
