//! `grove-bench nat [ROUNDS] [TURNS]` (and `nat punch [TRIALS]`, see
//! [`punch`]): the NAT laboratory of the tests
//! (network namespaces, a cone and a symmetric NAT; needs root, `ip` and
//! `nft`) with real `grove node run` processes. Prints the time from
//! `mesh join` to member for a node behind each NAT type, joining by the
//! invite of a public member (direct) or of a member behind the other NAT
//! (through the public member's relay), each add taking the same two
//! votes, over ROUNDS rounds of four fresh meshes (default 2); and the
//! round trip of a hosted turn request (instant model) to a member reached
//! directly and to one reached through the relay, over TURNS turns.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::moot_net::{book, run_moot, serve_instant_model};
use super::net::{Node, grove, grove_bin, json, percentile, started, vote_add, wait_until};

#[path = "../../../tests/support/netlab.rs"]
#[allow(dead_code)]
mod netlab;

use netlab::{Host, Lab};

mod punch;

const SLOW: Duration = Duration::from_secs(120);

/// A node inside `host`'s namespace, listening on every interface there.
fn start_in(
    lab: &Lab,
    host: Host,
    bin: &Path,
    state: PathBuf,
    name: &str,
    model_url: &str,
) -> anyhow::Result<Node> {
    std::fs::create_dir_all(&state)?;
    let mut cmd = grove(
        bin,
        &state,
        &["node", "run", "--listen", "/ip4/0.0.0.0/tcp/4100"],
    );
    cmd.env("GROVE_NODE__NAME", name)
        .env("GROVE_LOG__LEVEL", "warn")
        .env("GROVE_MODEL__BACKEND", "openai")
        .env("GROVE_MODEL__URL", model_url)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    lab.enter(host, &mut cmd);
    let child = cmd.spawn()?;
    started(bin, Node { state, child })
}

fn peer_id(bin: &Path, node: &Node) -> anyhow::Result<String> {
    Ok(json(bin, &node.state, &["identity", "show"])?["peer_id"]
        .as_str()
        .context("peer id")?
        .to_string())
}

/// An invite from `inviter`; when `relayed`, once it carries an address
/// through a relay (the inviter holds a reservation).
fn invite(bin: &Path, inviter: &Node, relayed: bool) -> anyhow::Result<String> {
    if relayed {
        wait_until("the inviter's relay reservation", SLOW, || {
            json(bin, &inviter.state, &["node", "doctor"])
                .is_ok_and(|d| d["relayed"].as_array().is_some_and(|r| !r.is_empty()))
        })?;
    }
    Ok(json(bin, &inviter.state, &["mesh", "invite"])?["invite"]
        .as_str()
        .context("invite")?
        .to_string())
}

/// `joiner` joins with `inviter`'s invite; the members in `voters` vote
/// yes. Returns the time from `mesh join` to member.
fn join(
    bin: &Path,
    inviter: &Node,
    relayed: bool,
    voters: &[&Node],
    joiner: &Node,
    name: &str,
) -> anyhow::Result<Duration> {
    let text = invite(bin, inviter, relayed)?;
    let peer = peer_id(bin, joiner)?;
    let start = Instant::now();
    json(bin, &joiner.state, &["mesh", "join", &text, "--as", name])?;
    vote_add(bin, voters, &peer)?;
    wait_until("the joiner to be a member", SLOW, || {
        json(bin, &joiner.state, &["mesh", "status"]).is_ok_and(|s| s["member"] == true)
    })?;
    Ok(start.elapsed())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn summary(label: &str, mut v: Vec<f64>) {
    v.sort_by(f64::total_cmp);
    println!(
        "{label}: median {:.0} ms, min {:.0} ms, max {:.0} ms ({} joins)",
        percentile(&v, 0.5),
        v.first().copied().unwrap_or(0.0),
        v.last().copied().unwrap_or(0.0),
        v.len()
    );
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    if args.first().map(String::as_str) == Some("punch") {
        return punch::run(&args[1..]);
    }
    let rounds: usize = args.first().map(|s| s.parse()).transpose()?.unwrap_or(2);
    let turns: u32 = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(20);
    let bin = grove_bin()?;
    let lab = Lab::build().map_err(|why| anyhow::anyhow!("no NAT laboratory: {why}"))?;
    let root = tempfile::tempdir()?;
    let mut urls = std::collections::HashMap::new();
    for host in [Host::Public1, Host::HomeA, Host::HomeB] {
        urls.insert(host, serve_instant_model(lab.listen(host, 0))?);
    }
    println!(
        "grove-bench nat: a public member relays for two homes (cone: plain masquerade; symmetric: masquerade random); {rounds} rounds of 4 meshes"
    );
    // [NAT type][path]: cone 0, symmetric 1; direct 0, relayed 1.
    let mut joins: [[Vec<f64>; 2]; 2] = Default::default();
    let homes = [Host::HomeA, Host::HomeB];
    for round in 0..rounds {
        // Four meshes a round: the public node founds each, one home joins
        // first (untimed), then the other home's join is timed, by an
        // invite of the public node (direct; the first home votes too) or
        // of the first home (through the relay; the public node votes).
        // Both ways the add takes the same two votes.
        for (case, (nat, path)) in [(1, 0), (1, 1), (0, 0), (0, 1)].into_iter().enumerate() {
            let (first, second) = (homes[1 - nat], homes[nat]);
            let dir = root.path().join(format!("round{round}-{case}"));
            let public = start_in(
                &lab,
                Host::Public1,
                &bin,
                dir.join("p"),
                "public",
                &urls[&Host::Public1],
            )?;
            json(&bin, &public.state, &["mesh", "init", "--name", "nat"])?;
            let one = start_in(&lab, first, &bin, dir.join("one"), "one", &urls[&first])?;
            join(&bin, &public, false, &[], &one, "one")?;
            let two = start_in(&lab, second, &bin, dir.join("two"), "two", &urls[&second])?;
            let took = if path == 0 {
                join(&bin, &public, false, &[&one], &two, "two")?
            } else {
                join(&bin, &one, true, &[&public], &two, "two")?
            };
            joins[nat][path].push(ms(took));
            if round + 1 == rounds && case == 3 {
                turn_round_trips(&bin, &dir, [&public, &one, &two], turns)?;
            }
        }
    }
    for (nat, nat_name) in ["cone", "symmetric"].iter().enumerate() {
        for (path, path_name) in [
            "public inviter, direct",
            "inviter behind the other NAT, through the relay",
        ]
        .iter()
        .enumerate()
        {
            summary(
                &format!("mesh join to member (two votes), {nat_name} NAT, {path_name}"),
                joins[nat][path].clone(),
            );
        }
    }
    Ok(())
}

/// `one` (a home) hosts a moot between a book on the public node (reached
/// directly) and one on `two` (the other home, reached through the relay):
/// the turns alternate, so each speaker's turn times compare one path with
/// the other under the same host and model.
fn turn_round_trips(
    bin: &Path,
    dir: &Path,
    [public, one, two]: [&Node; 3],
    turns: u32,
) -> anyhow::Result<()> {
    // The same text for both, so each speaker's own work is the same and
    // the difference is the path.
    let path = book(dir, 1)?;
    for (node, key) in [(public, "bench/direct"), (two, "bench/relayed")] {
        let out = grove(
            bin,
            &node.state,
            &["book", "add", path.to_str().context("path")?, "--key", key],
        )
        .output()?;
        if !out.status.success() {
            bail!("book add: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    wait_until("the host to see both books", SLOW, || {
        json(bin, &one.state, &["roots"]).is_ok_and(|v| {
            v.to_string().contains("bench/direct") && v.to_string().contains("bench/relayed")
        })
    })?;
    let (_, view) = run_moot(
        bin,
        &one.state,
        &["public:bench/direct", "two:bench/relayed"],
        turns,
    )?;
    // The links the turns took (by need: read after the moot).
    let doctor = json(bin, &one.state, &["node", "doctor"])?;
    let link = |name: &str| {
        doctor["members"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["name"] == name))
            .map(|m| {
                format!(
                    "{}, ping {} ms",
                    m["link"].as_str().unwrap_or("not connected"),
                    m["rtt_ms"].as_u64().map_or("-".into(), |r| r.to_string())
                )
            })
            .unwrap_or_else(|| "unknown".into())
    };
    let (public_link, two_link) = (link("public"), link("two"));
    let times: Vec<f64> = view["turn_ms"]
        .as_array()
        .context("turn_ms")?
        .iter()
        .filter_map(|v| v.as_f64())
        .collect();
    let mut by_path = [Vec::new(), Vec::new()];
    for (i, t) in times.iter().enumerate() {
        by_path[i % 2].push(*t);
    }
    for v in &mut by_path {
        v.sort_by(f64::total_cmp);
    }
    let (d, r) = (percentile(&by_path[0], 0.5), percentile(&by_path[1], 0.5));
    println!(
        "hosted turn request (instant model; request, retrieval, signing, proofs, host checks), {} turns each: direct p50 {d:.1} ms ({}), relayed p50 {r:.1} ms ({}); the relay adds {:.1} ms per turn",
        by_path[0].len(),
        public_link,
        two_link,
        r - d
    );
    Ok(())
}
