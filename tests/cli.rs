//! The command line as an operator reads it: times as local dates and
//! relative, members by name, prefixes, bounded flags (issue 19).

use crate::cluster::{Daemon, eventually};

/// A run of 13 digits: a Unix time in milliseconds printed for people.
fn has_unix_ms(text: &str) -> bool {
    let mut run = 0;
    for c in text.chars() {
        run = if c.is_ascii_digit() { run + 1 } else { 0 };
        if run >= 13 {
            return true;
        }
    }
    false
}

fn host_name() -> String {
    let out = std::process::Command::new("hostname").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn mesh_output_names_members_and_shows_times_for_people() {
    let mut a = Daemon::start("alpha");
    // No node.name: the joiner's display name is the host name.
    let mut b = Daemon::start("");
    a.ok(&["mesh", "init", "--name", "readable"]);

    // --ttl is bounded like mesh.invite_ttl_secs.
    let too_long = a.fails(&["mesh", "invite", "--ttl", "99999d"]);
    assert!(too_long.contains("at most 365 days"), "{too_long}");
    assert!(
        a.fails(&["mesh", "invite", "--ttl", "0"])
            .contains("above 0")
    );

    // The invite's expiry is a local date and how far off it is.
    let out =
        a.g.run(&["mesh", "invite", "--ttl", "24h", "--note", "for bob"]);
    assert!(out.status.success());
    let note = String::from_utf8(out.stderr).unwrap();
    assert!(
        note.contains("(in 23 h)") || note.contains("(in 24 h)"),
        "{note}"
    );
    assert!(!has_unix_ms(&note) && !note.contains("Unix ms"), "{note}");
    let first = String::from_utf8(out.stdout).unwrap().trim().to_string();

    // The old spelling of the display name flag is refused with a pointer.
    let old = b.fails(&["mesh", "join", "--name", "bob", &first]);
    assert!(old.contains("--as bob"), "{old}");
    let joined = b.ok(&["mesh", "join", &first]);
    assert!(joined.contains("joined mesh"), "{joined}");
    let host = host_name();
    eventually("the joiner in the roster", || {
        a.status()["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == host.as_str())
    });

    // Invites: listed with readable expiries, revoked by a unique prefix.
    let second = a.json(&["mesh", "invite", "--note", "spare"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let list = a.ok(&["mesh", "invite", "list"]);
    assert!(list.contains("expires 20") && !has_unix_ms(&list), "{list}");
    let revoked = a.ok(&["mesh", "invite", "revoke", &second[..8]]);
    assert_eq!(revoked.trim(), format!("revoked invite {second}"));
    let unknown = a.fails(&["mesh", "invite", "revoke", "zz"]);
    assert!(unknown.contains("no invite `zz`"), "{unknown}");

    // Proposals name the proposer and the voters beside a short peer id;
    // a vote echoes its choice.
    let proposed = a.json(&["mesh", "propose", "rotate"]);
    let id = proposed["id"].as_str().unwrap().to_string();
    eventually("the proposal to reach the joiner", || {
        b.g.run(&["mesh", "proposals"]).status.success()
            && b.ok(&["mesh", "proposals"]).contains(&id)
    });
    let proposals = b.ok(&["mesh", "proposals"]);
    assert!(proposals.contains("by alpha (12D3KooW"), "{proposals}");
    assert!(
        proposals.contains("yes from alpha (12D3KooW"),
        "{proposals}"
    );
    assert!(!has_unix_ms(&proposals), "{proposals}");
    let voted = b.ok(&["mesh", "vote", &id[..10], "yes"]);
    assert!(voted.starts_with(&format!("voted yes on {id}")), "{voted}");

    // A member not reached since the node (re)started is being dialed:
    // "connecting", not "offline, never seen".
    b.stop();
    a.restart();
    let status = a.ok(&["mesh", "status"]);
    let line = status
        .lines()
        .find(|l| l.contains(host.as_str()))
        .unwrap_or_else(|| panic!("{status}"));
    assert!(line.contains("connecting"), "{status}");
    assert!(!status.contains("never seen"), "{status}");
}
