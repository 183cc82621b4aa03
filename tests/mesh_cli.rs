//! Membership that never wedges, through the real binary: a "no" that makes
//! the quorum unreachable rejects at once, a proposer withdraws, a failed or
//! rejected join leaves no false "pending" state, a pending joiner's status
//! succeeds, a pre-approved invite adds its joiner without a vote, a
//! removed node is told on every command that needs membership, and
//! `mesh watch` and a `[hooks]` program see all of it.

use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::cluster::{Daemon, converged, eventually, eventually_explained, invite, open_proposal};

/// `grove mesh watch --json` on `d`, its lines collected as they come.
fn watch(d: &Daemon) -> (std::process::Child, Arc<Mutex<Vec<Value>>>) {
    let mut child =
        d.g.cmd(&["mesh", "watch", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
    let out = child.stdout.take().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            sink.lock()
                .unwrap()
                .push(serde_json::from_str(&line).unwrap());
        }
    });
    (child, seen)
}

/// Waits until `d` holds no open proposal; a timeout shows the logs of
/// `d` and of `others`.
fn no_open_proposals(d: &Daemon, others: &[&Daemon]) {
    eventually_explained(
        &format!("{} to hold no open proposal", d.name),
        || {
            d.json(&["mesh", "proposals"])["proposals"]
                .as_array()
                .unwrap()
                .is_empty()
        },
        || {
            std::iter::once(d)
                .chain(others.iter().copied())
                .map(|n| n.log_tail(40, ""))
                .collect::<Vec<_>>()
                .join("\n")
        },
    );
}

fn status(d: &Daemon) -> Value {
    d.json(&["mesh", "status"])
}

/// True once `d` holds no mesh and no pending join (`mesh status` says so).
fn holds_nothing(d: &Daemon) -> bool {
    let out = d.g.run(&["mesh", "status"]);
    !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("no mesh here yet")
}

#[test]
fn membership_never_wedges_through_the_cli() {
    // alpha's hook records every "rejected" and "joined" event it runs on.
    let hook_dir = tempfile::tempdir().unwrap();
    let hook = hook_dir.path().join("hook.sh");
    let hook_log = hook_dir.path().join("hook.log");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\necho \"$GROVE_EVENT $GROVE_EVENT_EPOCH $GROVE_EVENT_PEER\" >> {}\n",
            hook_log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let a = Daemon::start_with(
        "alpha",
        &[
            ("GROVE_HOOKS__PROGRAM", hook.to_str().unwrap()),
            ("GROVE_HOOKS__TIMEOUT_SECS", "5"),
        ],
    );
    let mut b = Daemon::start("bravo");
    let c = Daemon::start("charlie");
    a.ok(&["mesh", "init", "--name", "wedge", "--quorum", "2/3"]);
    let (mut watcher, seen) = watch(&a);
    let first = invite(&a);
    assert_eq!(b.json(&["mesh", "join", &first])["state"], "joined");
    converged(&[&a, &b], 1);
    // A member going offline and coming back is an event on alpha.
    b.restart();
    eventually("bravo to sync after its restart", || {
        status(&b)["synced"] == true
    });

    // Two members, quorum 2/3: one "no" (by a one-character prefix) makes
    // the quorum unreachable, so the proposal is rejected at once.
    a.ok(&["mesh", "propose", "rotate"]);
    let p = open_proposal(&b, "rotate");
    let voted = b.json(&["mesh", "vote", &p[..1], "no"]);
    assert_eq!(voted["rejected"], true, "{voted}");
    assert_eq!(voted["committed"], false);
    no_open_proposals(&a, &[&b]);
    let again = a.fails(&["mesh", "vote", &p[..8], "yes"]);
    assert!(again.contains("was rejected"), "{again}");
    // Both can go on at once: a fresh proposal commits.
    a.ok(&["mesh", "propose", "rotate"]);
    let p = open_proposal(&b, "rotate");
    b.ok(&["mesh", "vote", &p[..6], "yes"]);
    converged(&[&a, &b], 2);

    // Withdrawal: only the proposer; then every vote on it is free.
    b.ok(&["mesh", "propose", "rotate"]);
    let p = open_proposal(&a, "rotate");
    let not_mine = a.fails(&["mesh", "withdraw", &p[..6]]);
    assert!(not_mine.contains("only the proposer"), "{not_mine}");
    let w = b.ok(&["mesh", "withdraw", &p[..6]]);
    assert!(w.contains("withdrew"), "{w}");
    no_open_proposals(&a, &[&b]);
    a.ok(&["mesh", "propose", "rotate"]);
    let p = open_proposal(&b, "rotate");
    b.ok(&["mesh", "vote", &p[..6], "yes"]);
    converged(&[&a, &b], 3);

    // A used invite: refused, and nothing is left waiting.
    let used = c.fails(&["mesh", "join", &first]);
    assert!(used.contains("used"), "{used}");
    assert!(holds_nothing(&c), "{}", c.g.run(&["mesh", "status"]).status);

    // An unreachable inviter: the join fails and leaves nothing behind.
    let gone = Daemon::start("delta");
    gone.ok(&["mesh", "init", "--name", "elsewhere"]);
    let unreachable_invite = invite(&gone);
    drop(gone);
    let unreachable = c.fails(&["mesh", "join", &unreachable_invite]);
    assert!(unreachable.contains("reach"), "{unreachable}");
    assert!(holds_nothing(&c));

    // A pending joiner's status succeeds and says what it waits for; when
    // the add is voted down the pending join is forgotten.
    let second = invite(&a);
    assert_eq!(c.json(&["mesh", "join", &second])["state"], "pending");
    let s = status(&c);
    assert_eq!(s["state"], "pending", "{s}");
    assert!(
        s["join"]["waiting_for"]
            .as_str()
            .unwrap()
            .contains("vote on this node's add"),
        "{s}"
    );
    assert!(c.ok(&["mesh", "status"]).contains("state: pending"));
    let add = open_proposal(&b, "add");
    assert_eq!(b.json(&["mesh", "vote", &add, "no"])["rejected"], true);
    eventually("charlie to forget its voted-down join", || {
        holds_nothing(&c)
    });

    // A pre-approved invite: the members approve it (a commit), then a
    // joiner presenting it is added at once, without a vote on the add.
    let approved = a.json(&["mesh", "invite", "--approved", "--approved-name", "charlie"]);
    let approval = approved["approval"].as_str().unwrap().to_string();
    assert_eq!(approved["approved"], false, "{approved}");
    let invite_id = approved["id"].as_str().unwrap().to_string();
    let listed = |d: &Daemon| {
        d.json(&["mesh", "invite", "list"])["invites"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == invite_id.as_str())
            .cloned()
            .unwrap()
    };
    assert_eq!(listed(&a)["approval"], "proposed");
    assert_eq!(open_proposal(&b, "approve"), approval);
    b.ok(&["mesh", "vote", &approval[..8], "yes"]);
    converged(&[&a, &b], 4);
    assert_eq!(listed(&a)["approval"], "approved");
    let joined = c.json(&[
        "mesh",
        "join",
        approved["invite"].as_str().unwrap(),
        "--as",
        "charlie",
    ]);
    assert_eq!(joined["state"], "joined", "{joined}");
    converged(&[&a, &b, &c], 5);
    let used = listed(&a);
    assert_eq!(used["status"], "used", "{used}");
    assert!(used["approval"].is_null(), "single use: {used}");

    // A removed node is told when and by which proposal, and every command
    // that needs membership says so.
    let leave = b.json(&["mesh", "leave"]);
    let leave_id = leave["id"].as_str().unwrap().to_string();
    for voter in [&a, &c] {
        let p = open_proposal(voter, "kick");
        assert_eq!(p, leave_id);
        voter.ok(&["mesh", "vote", &p, "yes"]);
    }
    converged(&[&a, &c], 6);
    eventually("bravo to apply its removal", || {
        status(&b)["state"] == "removed"
    });
    let s = status(&b);
    assert_eq!(s["removed"]["epoch"], 6, "{s}");
    assert_eq!(s["removed"]["proposal"].as_str(), Some(leave_id.as_str()));
    let told = "this node is no longer a member of mesh wedge (removed at epoch 6)";
    assert!(b.ok(&["mesh", "status"]).contains("removed at epoch 6"));
    for args in [
        &["book", "search", "whale", "--mesh"][..],
        &["mesh", "propose", "rotate"],
        &["mesh", "vote", "00", "yes"],
        &["mesh", "withdraw", "00"],
        &["moot", "start", "--a", "self:x/one", "--b", "self:x/two"],
    ] {
        let err = b.fails(args);
        assert!(err.contains(told), "grove {args:?}: {err}");
    }

    // alpha's watcher saw every kind of membership event, in order, and
    // its hook ran with the event in its environment.
    let wanted = [
        "member_offline",
        "member_online",
        "proposal_opened",
        "vote_cast",
        "rejected",
        "committed",
        "withdrawn",
        "joined",
        "removed",
    ];
    let start = std::time::Instant::now();
    while !wanted
        .iter()
        .all(|w| seen.lock().unwrap().iter().any(|e| e["event"] == *w))
    {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "alpha's watcher saw only {:?}\n{}",
            seen.lock()
                .unwrap()
                .iter()
                .map(|e| e["event"].as_str().unwrap_or("?").to_string())
                .collect::<Vec<_>>(),
            a.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    {
        let seen = seen.lock().unwrap();
        let removed = seen.iter().find(|e| e["event"] == "removed").unwrap();
        assert_eq!(removed["epoch"], 6, "{removed}");
        assert_eq!(removed["name"], "bravo", "{removed}");
        let rejected = seen.iter().find(|e| e["event"] == "rejected").unwrap();
        assert_eq!(rejected["kind"], "rotate", "{rejected}");
    }
    let _ = watcher.kill();
    let _ = watcher.wait();
    eventually("alpha's hook to have run", || {
        let log = std::fs::read_to_string(&hook_log).unwrap_or_default();
        log.contains("rejected 1") && log.contains("removed 6 12D3")
    });
    assert!(a.log().contains("hook ran"), "{}", a.log());
}

/// A quorum rule no roster could meet, or one whose quorums need not
/// overlap, is refused with what is wrong with it (not "must stay above
/// half" for 5/3), and nothing is proposed.
#[test]
fn bad_quorum_rules_are_refused_with_what_is_wrong() {
    let a = Daemon::start("alpha");
    a.g.ok(&["mesh", "init", "--name", "q"]);
    for (rule, says) in [
        ("5/3", "no roster can give more than all of them"),
        ("3/3", "no roster can give more than all of them"),
        ("1/0", "the denominator is 0"),
        ("1/3", "below one half"),
        ("2/x", "is not a number"),
    ] {
        let err = a.g.fails(&["mesh", "propose", "quorum", rule]);
        assert!(err.contains(says), "quorum {rule}: {err}");
        assert!(
            !err.contains("must stay above half"),
            "quorum {rule}: {err}"
        );
    }
    no_open_proposals(&a, &[]);
}
