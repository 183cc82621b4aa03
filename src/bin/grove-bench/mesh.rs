//! `grove-bench mesh [sizes...]`: build and check-and-apply a commit for
//! rosters of 10, 100 and 1000 members; prints build time, check-and-apply
//! time (without fsync), the persist time with and without fsync, and the
//! commit's size in bytes.
//!
//! `grove-bench mesh liveness [seeds] [first seed] [steps]`: runs the seeded
//! membership simulation (`sim.rs` beside it, 10,000 seeds by default) and
//! prints how many runs got stuck or broke safety, how the proposals open at
//! the liveness checks were decided, and how long it took.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sim as state_sim;
use grove::identity::Identity;
use grove::mesh::codec::{self, tag};
use grove::mesh::envelope::EnvelopeSender;
use grove::mesh::roster::{Change, Member, QuorumRule, Roster};
use grove::mesh::state::{
    self, Effect, MeshInfo, MeshState, RosterNode, SecretEntry, Timing, Transition,
};
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
        "{:>6} {:>7} {:>10} {:>10} {:>12} {:>10} {:>12} {:>12} {:>14} {:>10}",
        "members",
        "votes",
        "build ms",
        "(cpu ms)",
        "check+apply",
        "(cpu ms)",
        "votes seen",
        "persist ms",
        "persist+fsync",
        "bytes"
    );
    for n in sizes {
        bench_one(n)?;
    }
    println!(
        "threads for envelope wraps: {}",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    Ok(())
}

fn bench_one(n: usize) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(n as u64);
    let ids: Vec<Identity> = (0..n).map(|_| Identity::generate(&mut rng)).collect();
    let mut members: Vec<Member> = ids
        .iter()
        .map(|id| {
            let p = id.public();
            Member {
                peer_id: p.peer_id,
                ed25519: p.ed25519,
                x25519: p.x25519,
                x25519_binding: p.x25519_binding,
                name: "member".into(),
                joined_epoch: 0,
            }
        })
        .collect();
    members.sort_by(|a, b| a.peer_id.cmp(&b.peer_id));
    let roster = Roster {
        mesh_id: [7u8; 16],
        mesh_name: "bench".into(),
        epoch: 5,
        members,
        quorum: QuorumRule::MAJORITY,
        commit_hash: [1u8; 32],
        approved: Vec::new(),
    };
    let roster_hash = roster.hash();
    let now: i64 = 1_700_000_000_000;
    let committer = &ids[0];
    let proposal_body = wire::Proposal {
        mesh_id: roster.mesh_id.to_vec(),
        epoch: roster.epoch,
        roster_hash: roster_hash.to_vec(),
        proposer: committer.peer_id(),
        created_ms: now,
        expires_ms: now + 3_600_000,
        change: Some(wire::proposal::Change::Rotate(vec![3u8; 16])),
    };
    let proposal = codec::sign(committer, tag::PROPOSAL, &proposal_body);
    let proposal_hash = codec::hash(codec::label::PROPOSAL, &proposal.body);
    let needed = roster.quorum_needed();
    let votes: Vec<wire::Signed> = ids
        .iter()
        .take(needed)
        .map(|id| {
            codec::sign(
                id,
                tag::VOTE,
                &wire::Vote {
                    mesh_id: roster.mesh_id.to_vec(),
                    epoch: roster.epoch,
                    roster_hash: roster_hash.to_vec(),
                    proposal_hash: proposal_hash.to_vec(),
                    yes: true,
                    voter: id.peer_id(),
                    proposal_created_ms: now,
                    proposal_expires_ms: now + 3_600_000,
                    seq: 0,
                    releases: Vec::new(),
                },
            )
        })
        .collect();

    let rounds = if n >= 1000 { 7 } else { 21 };
    let mut build_times = Vec::new();
    let mut commit = None;
    let build_cpu_start = process_cpu();
    for _ in 0..rounds {
        let secret = [9u8; 32];
        let start = Instant::now();
        let sender = EnvelopeSender::new(&mut rng);
        let c = state::build_commit(
            committer,
            &roster,
            &roster_hash,
            proposal.clone(),
            votes.clone(),
            &Change::Rotate,
            &secret,
            &sender,
        )?;
        build_times.push(start.elapsed());
        commit = Some(c);
    }
    let build_cpu = match (build_cpu_start, process_cpu()) {
        (Some(a), Some(b)) => format!("{:.1}", ms(b.saturating_sub(a)) / rounds as f64),
        _ => "-".to_string(),
    };
    let commit = commit.ok_or_else(|| anyhow::anyhow!("no commit built"))?;
    let message = wire::MeshMessage {
        kind: Some(wire::mesh_message::Kind::Commit(commit)),
    }
    .encode_to_vec();

    // One receiving member (not the committer) at the roster's epoch.
    let receiver = &ids[n / 2];
    let mut base = MeshState::empty(receiver.public(), Timing::default());
    base.mesh = Some(MeshInfo {
        mesh_id: roster.mesh_id,
        name: roster.mesh_name.clone(),
    });
    base.rosters.insert(
        roster_hash,
        Arc::new(RosterNode {
            roster: roster.clone(),
            hash: roster_hash,
            parent: None,
            commit: None,
            proposal_hash: None,
        }),
    );
    base.tip = roster_hash;
    base.secrets.insert(
        roster_hash,
        SecretEntry {
            roster_hash,
            epoch: roster.epoch,
            secret: [1u8; 32],
            erase_at_ms: None,
        },
    );
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
    let mut check_times = Vec::new();
    let mut check_cpu = Vec::new();
    let mut persist_times = Vec::new();
    let mut fsync_times = Vec::new();
    for round in 0..rounds {
        let cpu_start = thread_cpu();
        let start = Instant::now();
        let (after, transition) = base
            .receive(receiver, &message, now + 1000, &mut rng)
            .map_err(|e| anyhow::anyhow!("commit refused: {e}"))?;
        check_times.push(start.elapsed());
        if let (Some(a), Some(b)) = (cpu_start, thread_cpu()) {
            check_cpu.push(b.saturating_sub(a));
        }
        if after.epoch() != roster.epoch + 1 || after.current_secret() != Some([9u8; 32]) {
            anyhow::bail!("commit did not apply");
        }
        let dir = std::env::temp_dir().join(format!(
            "grove-bench-mesh-{}-{n}-{round}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let mut store = MeshStore::open_in(&dir)?;
        // The receiver's database already holds the current roster.
        store.set_synchronous(false)?;
        store.persist(&seed, now)?;
        let fsync = round % 2 == 1;
        store.set_synchronous(fsync)?;
        let start = Instant::now();
        store.persist(&transition, now)?;
        if fsync {
            fsync_times.push(start.elapsed());
        } else {
            persist_times.push(start.elapsed());
        }
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
    // The usual case: the receiver already verified the votes as they arrived.
    let mut seen_state = base.clone();
    for v in &votes {
        let body = wire::Vote::decode(&v.body[..])?;
        seen_state.votes.insert(
            (body.epoch, body.voter.clone()),
            state::VoteRec {
                epoch: body.epoch,
                voter: body.voter,
                roster_hash,
                proposal_hash,
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
    for _ in 0..rounds {
        let start = Instant::now();
        let (after, _) = seen_state
            .receive(receiver, &message, now + 1000, &mut rng)
            .map_err(|e| anyhow::anyhow!("commit refused: {e}"))?;
        seen_times.push(start.elapsed());
        if after.epoch() != roster.epoch + 1 {
            anyhow::bail!("commit did not apply");
        }
    }
    println!(
        "{:>6} {:>7} {:>10.2} {:>10} {:>12.2} {:>10} {:>12.2} {:>12.2} {:>14.2} {:>10}",
        n,
        needed,
        ms(median(build_times)),
        build_cpu,
        ms(median(check_times)),
        if check_cpu.is_empty() {
            "-".to_string()
        } else {
            format!("{:.2}", ms(median(check_cpu)))
        },
        ms(median(seen_times)),
        ms(median(persist_times)),
        ms(median(fsync_times)),
        message.len()
    );
    Ok(())
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
    let results: Vec<(u64, Result<state_sim::Report, state_sim::SimError>)> =
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    scope.spawn(move || {
                        (first..first + seeds)
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
        });
    let wall = start.elapsed();
    let cpu = match (cpu0, process_cpu()) {
        (Some(a), Some(b)) => format!("{:.1} s", (b - a).as_secs_f64()),
        _ => "unknown".into(),
    };
    let mut total = state_sim::Report::default();
    let mut stuck = Vec::new();
    let mut broken = Vec::new();
    for (_, r) in &results {
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
            }
            Err(e @ state_sim::SimError::Stuck { .. }) => stuck.push(e.to_string()),
            Err(e) => broken.push(e.to_string()),
        }
    }
    println!(
        "liveness: {} seeds ({first}..{}), {steps} random steps each, {threads} threads",
        results.len(),
        first + seeds
    );
    println!(
        "stuck: {}   unsafe or failed: {}   wall {:.1} s   cpu {cpu}   {:.2} ms per seed (wall)",
        stuck.len(),
        broken.len(),
        wall.as_secs_f64(),
        ms(wall) / results.len().max(1) as f64
    );
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
        "convergent switches: {}   bad messages injected (all refused): {}   adds on a pre-approved invite: {}",
        total.switches, total.injected, total.approved_adds
    );
    for e in stuck.iter().chain(&broken).take(10) {
        println!("  {e}");
    }
    if !stuck.is_empty() || !broken.is_empty() {
        anyhow::bail!(
            "{} of {} seeds stuck or failed",
            stuck.len() + broken.len(),
            results.len()
        );
    }
    Ok(())
}
