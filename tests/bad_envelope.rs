//! A committer that seals a member an envelope that does not open, through
//! the real binary (docs/mesh-protocol.md §7b): five daemons; alpha
//! proposes a rotate and goes down; charlie and delta vote yes; the test,
//! holding alpha's keys as a committer gone bad would, lets alpha's own
//! state machine take those votes and commit, and alters the commit's
//! envelope for bravo before alpha keeps it (its roster table) and leaves
//! it out of alpha's outbox, so the others get it only by asking alpha
//! (sync). Bravo proves its agreement output; every other member checks
//! the proof and names alpha; a kick of alpha, shown as backed by the
//! evidence, passes on the others' votes; bravo reads again from there.

use grove::mesh::codec;
use grove::mesh::state::fixture::with_bad_envelope;
use grove::mesh::state::{Dest, Timing, withhold_envelope};
use grove::mesh::store::MeshStore;
use grove::wire::mesh as wire;
use grove::wire::mesh::mesh_message::Kind;
use prost::Message;
use serde_json::Value;

use crate::cluster::{Daemon, converged, eventually, invite, open_proposal, vote_yes};
use crate::support::Grove;

/// The signed yes `d` cast on proposal `id` (hex), from its `mesh.db`.
fn signed_vote(d: &Daemon, id: &str) -> wire::Signed {
    let db = rusqlite::Connection::open_with_flags(
        d.g.state().join("mesh.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let bytes: Vec<u8> = db
        .query_row(
            "SELECT signed FROM votes WHERE proposal_hash = ?1 AND yes = 1 AND voter = ?2",
            rusqlite::params![hex::decode(id).unwrap(), d.identity().peer_id()],
            |r| r.get(0),
        )
        .unwrap();
    codec::decode_canonical(&bytes, "stored vote").unwrap()
}

/// `d`'s view of the envelopes that did not open.
fn bad_envelopes(d: &Daemon) -> Vec<Value> {
    d.json(&["mesh", "status"])["bad_envelopes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Whether `d` holds the secret of its current epoch.
fn reads_tip(d: &Daemon) -> bool {
    let status = d.json(&["mesh", "status"]);
    let tip = hex::decode(status["roster_hash"].as_str().unwrap()).unwrap();
    let db = rusqlite::Connection::open_with_flags(
        d.g.state().join("mesh.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    db.query_row(
        "SELECT count(*) FROM secrets WHERE roster_hash = ?1",
        [tip],
        |r| r.get::<_, i64>(0),
    )
    .unwrap()
        == 1
}

#[test]
fn a_member_proves_a_bad_envelope_the_others_check_it_and_kick_its_committer() {
    // No member commits alpha's proposal as a backup while alpha is down.
    let env = [("GROVE_MESH__COMMIT_BACKUP_SECS", "3600")];
    // Alpha comes back on the port it left, so the members' dials to it
    // (and the gossip they carry) resume whoever dials first.
    let listen = format!("/ip4/127.0.0.1/tcp/{}", crate::support::free_port());
    let mut a = Daemon::start_in(Grove::new(), "alpha", &env, &["--listen", &listen], None);
    let b = Daemon::start_with("bravo", &env);
    let c = Daemon::start_with("charlie", &env);
    let d = Daemon::start_with("delta", &env);
    let e = Daemon::start_with("echo", &env);
    a.ok(&["mesh", "init", "--name", "bad-envelope"]);
    assert_eq!(b.json(&["mesh", "join", &invite(&a)])["state"], "joined");
    let voters: [&[&Daemon]; 3] = [&[&b], &[&b], &[&b, &c]];
    for (joiner, voters) in [&c, &d, &e].into_iter().zip(voters) {
        let pending = joiner.json(&["mesh", "join", &invite(&a)]);
        assert_eq!(pending["state"], "pending", "{pending}");
        for v in voters {
            vote_yes(v, "add");
        }
        eventually(&format!("{} to join", joiner.name), || {
            joiner.json(&["mesh", "status"])["state"] == "member"
        });
    }
    let before = converged(&[&a, &b, &c, &d, &e], 4);
    // Every member reaches every other before alpha goes down: a joiner
    // learns the others' addresses through its inviter.
    for n in [&a, &b, &c, &d, &e] {
        eventually(&format!("{} to reach every member", n.name), || {
            n.json(&["mesh", "status"])["members"]
                .as_array()
                .is_some_and(|m| m.iter().all(|m| m["online"] == true))
        });
    }

    // Alpha proposes a rotate and goes down; charlie and delta vote yes.
    a.ok(&["mesh", "propose", "rotate"]);
    let proposal = open_proposal(&c, "rotate");
    eventually("every member to see the rotate", || {
        [&b, &d, &e]
            .iter()
            .all(|n| open_proposal(n, "rotate") == proposal)
    });
    a.stop();
    vote_yes(&c, "rotate");
    vote_yes(&d, "rotate");
    let votes = [signed_vote(&c, &proposal), signed_vote(&d, &proposal)];

    // Alpha's own state machine takes the votes and commits; the commit it
    // sends, and keeps, seals bravo an envelope that does not open.
    let alpha = a.identity();
    let bravo = b.identity().peer_id();
    let mut store = MeshStore::open_in(&a.g.state()).unwrap();
    let mut state = store.load(alpha.public(), Timing::default()).unwrap();
    let now = grove::now_ms();
    let mut bad_commit = None;
    for vote in votes {
        let message = codec::encode(&wire::MeshMessage {
            kind: Some(Kind::Vote(vote)),
        });
        let (next, mut t) = state
            .receive(&alpha, &message, now, &mut rand::rng())
            .unwrap();
        // The commit leaves alpha's outbox unsent, as a message gossipsub
        // took over a connection that then closed: members that reconnect
        // to alpha must fetch it from alpha (by sync), whatever alpha's
        // place in the roster.
        t.outbound.retain(|out| {
            let Ok(wire::MeshMessage {
                kind: Some(Kind::Commit(commit)),
            }) = wire::MeshMessage::decode(out.message.as_slice())
            else {
                return true;
            };
            assert_eq!(out.to, Dest::All);
            bad_commit = Some(with_bad_envelope(&alpha, &commit, &bravo).unwrap());
            false
        });
        store.persist(&t, now).unwrap();
        state = next;
    }
    let bad = bad_commit.expect("alpha committed on the second vote");
    drop(store);
    let kept = codec::encode(&withhold_envelope(&bad, &alpha.peer_id()).unwrap());
    rusqlite::Connection::open(a.g.state().join("mesh.db"))
        .unwrap()
        .execute(
            "UPDATE rosters SET commit_msg = ?1 WHERE hash = ?2",
            rusqlite::params![kept, &state.tip[..]],
        )
        .unwrap();
    let bad_epoch = state.epoch();
    assert_eq!(bad_epoch, 5);
    a.restart();
    let all = [&a, &b, &c, &d, &e];

    // Every member follows the commit; bravo does without the secret and
    // proves why; each other member checks the proof and names alpha.
    let tip = converged(&all, bad_epoch);
    assert_ne!(tip, before);
    assert!(!reads_tip(&b), "bravo holds no secret of epoch {bad_epoch}");
    let alpha_text = a.peer_id();
    let bravo_text = b.peer_id();
    for n in all {
        let holds = || {
            bad_envelopes(n).iter().any(|v| {
                v["epoch"] == bad_epoch
                    && v["committer"] == alpha_text.as_str()
                    && v["accuser"] == bravo_text.as_str()
                    && v["proven"] == true
            })
        };
        let start = std::time::Instant::now();
        while !holds() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "{} holds no checked evidence: {:?}\n{}",
                n.name,
                bad_envelopes(n),
                n.log()
                    .lines()
                    .filter(|l| l.contains("nvelope")
                        || l.contains("refus")
                        || l.contains("gossip"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    let text = c.ok(&["mesh", "status"]);
    assert!(
        text.contains("sealed by alpha") && text.contains("proven, the committer is at fault"),
        "{text}"
    );

    // Charlie proposes alpha's kick; the others see it backed by the
    // evidence; delta's and echo's yes make the quorum without bravo's.
    c.ok(&["mesh", "propose", "kick", "alpha"]);
    let kick = open_proposal(&d, "kick");
    let listed = d.json(&["mesh", "proposals"]);
    let view = listed["proposals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == kick.as_str())
        .cloned()
        .unwrap();
    assert_eq!(view["backed_by"], serde_json::json!([bad_epoch]), "{view}");
    vote_yes(&d, "kick");
    vote_yes(&e, "kick");
    let after = converged(&[&b, &c, &d, &e], bad_epoch + 1);
    let members = c.json(&["mesh", "status"])["members"].clone();
    assert!(
        members
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["peer_id"] != alpha_text.as_str()),
        "{members}"
    );
    eventually("bravo to read the epoch after the kick", || {
        b.json(&["mesh", "status"])["roster_hash"] == after.as_str() && reads_tip(&b)
    });
}
