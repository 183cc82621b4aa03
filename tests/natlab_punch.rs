//! Hole punching (DCUtR, issue 34) in the NAT laboratory: two members in
//! two homes meet through a relay that is not a member, then try a direct
//! connection. Each test's name says whether a direct path can exist
//! between its two homes' NATs, and asserts that outcome: punched to
//! direct, or relayed with the reason the doctor gives.
//!
//! Needs what tests/natlab.rs needs (root, `ip`, `nft`); skips without it,
//! and fails under GROVE_TEST_STRICT=1.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster::{Daemon, converged};
use crate::natlab::{
    SLOW, add, doctor, home_config, member_entry, node, reachability, relayed_invite, reserved_on,
    search_reaches, wait_for,
};
use crate::support::netlab::{Host, Lab};

/// Non-member relays on `hosts`; a mesh founded in home `one`, joined from
/// home `two` by an invite that carries `one`'s relayed address. Returns
/// the relays, the two members, and when the joiner became a member.
fn meet(lab: &Lab, hosts: &[Host], one: Host, two: Host) -> (Vec<Daemon>, Daemon, Daemon, Instant) {
    let relay_config = "[net]\nreachability = \"auto\"\n[net.relay]\nserve = \"anyone\"\n";
    let relays: Vec<Daemon> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| node(lab, *h, &format!("relay-{i}"), relay_config, &[]))
        .collect();
    let relay_ids: Vec<String> = relays.iter().map(Daemon::peer_id).collect();
    let relay_addrs: Vec<String> = hosts
        .iter()
        .zip(&relay_ids)
        .map(|(h, id)| format!("/ip4/{}/tcp/4100/p2p/{id}", h.addr()))
        .collect();
    let start = Instant::now();
    let config = home_config(&relay_addrs);
    let alpha = node(lab, one, "alpha", &config, &[]);
    add(&alpha, "fiction/sea-tales", "Sea Tales", 7);
    alpha.ok(&["mesh", "init", "--name", "punch"]);
    wait_for("alpha to reserve on every relay", SLOW, &[&alpha], || {
        reachability(&alpha) != "public" && reserved_on(&alpha).len() == hosts.len()
    });
    println!("reserved {:.1} s", start.elapsed().as_secs_f64());
    let ids: Vec<&str> = relay_ids.iter().map(String::as_str).collect();
    let invite = relayed_invite(&alpha, &ids);
    let bravo = node(lab, two, "bravo", &config, &[]);
    add(&bravo, "essays/field-notes", "Field Notes", 8);
    let joined = bravo.json(&["mesh", "join", &invite]);
    assert_eq!(joined["state"], "joined", "{joined}");
    println!("joined {:.1} s", start.elapsed().as_secs_f64());
    converged(&[&alpha, &bravo], 1);
    println!("converged {:.1} s", start.elapsed().as_secs_f64());
    (relays, alpha, bravo, Instant::now())
}

/// `of`'s doctor entry for `peer` once `check` holds for it, within `limit`.
fn entry_once(
    of: &Daemon,
    peer: &str,
    watched: &[&Daemon],
    what: &str,
    limit: Duration,
    check: impl Fn(&Value) -> bool,
) -> Value {
    wait_for(what, limit, watched, || check(&member_entry(of, peer)));
    member_entry(of, peer)
}

fn counter(d: &Daemon, name: &str) -> u64 {
    doctor(d)["counters"][name].as_u64().unwrap_or(0)
}

/// Both members end on a punched direct link, say so, and count it; a
/// search between them afterwards crosses no relay.
fn assert_punched(alpha: &Daemon, bravo: &Daemon, relays: &[Daemon], since: Instant) {
    let (alpha_id, bravo_id) = (alpha.peer_id(), bravo.peer_id());
    let mut watched: Vec<&Daemon> = vec![alpha, bravo];
    watched.extend(relays.iter());
    for (of, peer) in [(alpha, &bravo_id), (bravo, &alpha_id)] {
        let entry = entry_once(of, peer, &watched, "a punched direct link", SLOW, |m| {
            m["path"] == "direct (punched)"
        });
        assert_eq!(entry["link"], "direct", "{entry}");
        assert_eq!(entry["punched"], true, "{entry}");
    }
    println!(
        "direct {:.1} s after the join",
        since.elapsed().as_secs_f64()
    );
    let successes: u64 = [alpha, bravo]
        .iter()
        .map(|d| counter(d, "holepunch.successes.tcp") + counter(d, "holepunch.successes.quic"))
        .sum();
    assert!(successes >= 1, "no punch counted a success");
    // The relayed connections the direct one replaced are closed: what
    // the members exchange now crosses no relay.
    wait_for("the relayed links to close", SLOW, &watched, || {
        [alpha, bravo].iter().all(|d| {
            doctor(d)["members"]
                .as_array()
                .is_some_and(|m| m.iter().all(|e| e["link"] != "relayed"))
        })
    });
    let before: Vec<u64> = [alpha, bravo]
        .iter()
        .map(|d| counter(d, "relay.bytes.sent") + counter(d, "relay.bytes.received"))
        .collect();
    wait_for("a search between the members", SLOW, &watched, || {
        search_reaches(alpha, &bravo_id) && search_reaches(bravo, &alpha_id)
    });
    let after: Vec<u64> = [alpha, bravo]
        .iter()
        .map(|d| counter(d, "relay.bytes.sent") + counter(d, "relay.bytes.received"))
        .collect();
    assert_eq!(
        before,
        after,
        "bytes crossed a relay after the punch:\n{}\n{}\n{}",
        doctor(alpha),
        doctor(bravo),
        crate::natlab::tail(&alpha.log(), 80)
    );
}

/// Both members stay relayed, and each says `why`.
fn assert_relayed(alpha: &Daemon, bravo: &Daemon, relays: &[Daemon], why: &str, limit: Duration) {
    let (alpha_id, bravo_id) = (alpha.peer_id(), bravo.peer_id());
    let mut watched: Vec<&Daemon> = vec![alpha, bravo];
    watched.extend(relays.iter());
    for (of, peer) in [(alpha, &bravo_id), (bravo, &alpha_id)] {
        let entry = entry_once(of, peer, &watched, why, limit, |m| {
            m["relayed_why"]
                .as_str()
                .is_some_and(|w| w.starts_with(why))
        });
        assert_eq!(entry["link"], "relayed", "{entry}");
        assert!(
            entry["path"]
                .as_str()
                .is_some_and(|p| p.starts_with(&format!("relayed ({why}"))),
            "{entry}"
        );
    }
}

#[test]
fn natlab_punch_cone_to_cone_a_direct_path_exists_and_the_relayed_link_is_punched_direct() {
    let Some(lab) = crate::support::lab() else {
        return;
    };
    let (relays, alpha, bravo, since) = meet(&lab, &[Host::Public1], Host::HomeA, Host::HomeC);
    assert_punched(&alpha, &bravo, &relays, since);
}

#[test]
fn natlab_punch_symmetric_to_symmetric_no_direct_path_exists_and_the_link_stays_relayed_saying_why()
{
    let Some(lab) = crate::support::lab() else {
        return;
    };
    // Two relays: each member is seen by two observers, at two ports.
    let (relays, alpha, bravo, _) = meet(
        &lab,
        &[Host::Public1, Host::Public2],
        Host::HomeB,
        Host::HomeD,
    );
    assert_relayed(&alpha, &bravo, &relays, "both ends symmetric", SLOW);
    for d in [&alpha, &bravo] {
        let report = doctor(d);
        assert_eq!(
            report["mapping"], "endpoint-dependent (symmetric)",
            "{report}"
        );
    }
}
