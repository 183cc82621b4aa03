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
    NsModel, SLOW, add, doctor, home_config, member_entry, node, reachability, relayed_invite,
    reserved_on, search_reaches, wait_for,
};
use crate::support::netlab::{Host, Lab};

/// How the relays are named in the members' `net.relays`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    Tcp,
    Quic,
}

/// Non-member relays on `hosts`; a mesh founded in home `one`, joined from
/// home `two` by an invite that carries `one`'s relayed address (so `two`
/// dials the circuit). Returns the relays, the two members, and when the
/// joiner became a member.
fn meet(
    lab: &Lab,
    hosts: &[Host],
    via: Via,
    [(one, env_one), (two, env_two)]: [(Host, &[(&str, &str)]); 2],
) -> (Vec<Daemon>, Daemon, Daemon, Instant) {
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
        .map(|(h, id)| match via {
            Via::Tcp => format!("/ip4/{}/tcp/4100/p2p/{id}", h.addr()),
            Via::Quic => format!("/ip4/{}/udp/4100/quic-v1/p2p/{id}", h.addr()),
        })
        .collect();
    let start = Instant::now();
    let config = home_config(&relay_addrs);
    let alpha = node(lab, one, "alpha", &config, env_one);
    add(&alpha, "fiction/sea-tales", "Sea Tales", 7);
    alpha.ok(&["mesh", "init", "--name", "punch"]);
    wait_for("alpha to reserve on every relay", SLOW, &[&alpha], || {
        reachability(&alpha) != "public" && reserved_on(&alpha).len() == hosts.len()
    });
    println!("reserved {:.1} s", start.elapsed().as_secs_f64());
    let ids: Vec<&str> = relay_ids.iter().map(String::as_str).collect();
    let invite = relayed_invite(&alpha, &ids);
    let bravo = node(lab, two, "bravo", &config, env_two);
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
    // What the members exchange goes over the direct link: a search
    // between them reaches (the moot test checks that no byte crosses the
    // relay).
    wait_for("a search between the members", SLOW, &watched, || {
        search_reaches(alpha, &bravo_id) && search_reaches(bravo, &alpha_id)
    });
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

/// Homes with no model of their own (the tests that hold no moot).
const NO_MODEL: &[(&str, &str)] = &[];

#[test]
fn natlab_punch_cone_to_cone_a_direct_path_exists_and_a_moot_goes_direct_once_punched() {
    let Some(lab) = crate::support::lab() else {
        return;
    };
    let model_a = NsModel::start(&lab, Host::HomeA);
    let model_c = NsModel::start(&lab, Host::HomeC);
    let (relays, alpha, bravo, since) = meet(
        &lab,
        &[Host::Public1],
        Via::Tcp,
        [(Host::HomeA, &model_a.env()), (Host::HomeC, &model_c.env())],
    );
    assert_punched(&alpha, &bravo, &relays, since);
    // The relayed connections the direct one replaced close 3 to 5 s after
    // the punch (docs/networking.md).
    std::thread::sleep(Duration::from_secs(6));
    // A moot hosted by alpha with bravo's book speaking: its turns go over
    // the direct link; the relay carries no circuit for them.
    let circuits = |r: &Daemon| counter(r, "relay.server.circuits.accepted");
    let relayed_bytes =
        |d: &Daemon| counter(d, "relay.bytes.sent") + counter(d, "relay.bytes.received");
    let before = (circuits(&relays[0]), relayed_bytes(&alpha));
    crate::natlab::sea_moot_with_bravo(&alpha, &[&alpha, &bravo], 2);
    let to_bravo = member_entry(&alpha, &bravo.peer_id());
    assert_eq!(to_bravo["path"], "direct (punched)", "{to_bravo}");
    let after = (circuits(&relays[0]), relayed_bytes(&alpha));
    assert_eq!(before, after, "the moot crossed the relay");
}

#[test]
fn natlab_punch_cone_to_cone_over_quic_with_tcp_blocked_a_direct_path_exists_and_is_punched() {
    let Some(lab) = crate::support::lab() else {
        return;
    };
    // The homes' routers pass no TCP at all: members meet, reserve, relay
    // and punch over QUIC only.
    for router in [Host::RouterA, Host::RouterC] {
        lab.nft(router, NO_TCP);
    }
    let (relays, alpha, bravo, since) = meet(
        &lab,
        &[Host::Public1],
        Via::Quic,
        [(Host::HomeA, NO_MODEL), (Host::HomeC, NO_MODEL)],
    );
    assert_punched(&alpha, &bravo, &relays, since);
    let entry = member_entry(&alpha, &bravo.peer_id());
    assert!(
        entry["address"]
            .as_str()
            .is_some_and(|a| a.contains("/udp/") && a.contains("/quic-v1")),
        "{entry}"
    );
    let quic: u64 = [&alpha, &bravo]
        .iter()
        .map(|d| counter(d, "holepunch.successes.quic"))
        .sum();
    assert!(quic >= 1, "no QUIC punch counted");
}

/// Drops every forwarded TCP packet (a router that passes UDP only).
const NO_TCP: &str = r#"table inet notcp {
    chain forward {
        type filter hook forward priority -10; policy accept;
        meta l4proto tcp drop
    }
}
"#;

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
        Via::Tcp,
        [(Host::HomeB, NO_MODEL), (Host::HomeD, NO_MODEL)],
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

#[test]
fn natlab_punch_port_restricted_cone_to_symmetric_no_direct_path_exists_and_the_link_stays_relayed_after_failed_punches()
 {
    let Some(lab) = crate::support::lab() else {
        return;
    };
    // The symmetric home dials from a new port that the cone's filter
    // (address and port) does not let in; the cone's dial reaches a port
    // the symmetric NAT mapped for someone else.
    let (relays, alpha, bravo, _) = meet(
        &lab,
        &[Host::Public1, Host::Public2],
        Via::Tcp,
        [(Host::HomeA, NO_MODEL), (Host::HomeB, NO_MODEL)],
    );
    assert_relayed(&alpha, &bravo, &relays, "punch failed", SLOW);
}

#[test]
fn natlab_punch_address_restricted_cone_to_symmetric_a_direct_path_exists_and_is_punched() {
    let Some(lab) = crate::support::lab() else {
        return;
    };
    // The address-restricted cone lets the symmetric home in from any
    // port once it has sent to its address. The symmetric home dials the
    // circuit (it joins), so its punch is the connection's dialer and the
    // cone takes it as an inbound connection.
    let (relays, alpha, bravo, since) = meet(
        &lab,
        &[Host::Public1, Host::Public2],
        Via::Tcp,
        [(Host::HomeE, NO_MODEL), (Host::HomeB, NO_MODEL)],
    );
    assert_punched(&alpha, &bravo, &relays, since);
}
