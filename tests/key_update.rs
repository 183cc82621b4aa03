//! Key updates through the real binary: a member runs `grove identity
//! rotate`, the update commits on its own yes, it reads the later epochs
//! with its new key, its old key file is gone, and the old key bytes open
//! none of the later envelopes another member stored.

use std::path::Path;

use grove::identity::Identity;
use grove::mesh::codec;
use grove::mesh::state::envelopes_of;
use grove::mesh::state::fixture::open_envelope_of;
use grove::mesh::state::verify_chain;
use grove::wire::mesh as wire;

use crate::cluster::{Daemon, converged, eventually, invite, open_proposal};

fn key_file(d: &Daemon, name: &str) -> std::path::PathBuf {
    d.g.state().join("identity").join(name)
}

fn key_bytes(path: &Path) -> [u8; 32] {
    std::fs::read(path).unwrap().try_into().unwrap()
}

/// A read-only look at `d`'s `mesh.db` (the daemon keeps running).
fn mesh_db(d: &Daemon) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(
        d.g.state().join("mesh.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap()
}

/// The stored commits of `d`, by the epoch each made.
fn commits(d: &Daemon) -> Vec<(i64, wire::Signed)> {
    let db = mesh_db(d);
    let mut q = db
        .prepare(
            "SELECT epoch, commit_msg FROM rosters WHERE commit_msg IS NOT NULL ORDER BY epoch",
        )
        .unwrap();
    q.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))
        .unwrap()
        .map(|r| {
            let (epoch, bytes) = r.unwrap();
            (
                epoch,
                codec::decode_canonical(&bytes, "stored commit").unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_member_that_rotates_its_key_reads_later_epochs_and_its_old_key_opens_none_of_them() {
    let a = Daemon::start("alpha");
    let mut b = Daemon::start("bravo");
    a.ok(&["mesh", "init", "--name", "keys"]);
    assert_eq!(b.json(&["mesh", "join", &invite(&a)])["state"], "joined");
    converged(&[&a, &b], 1);
    let old = key_bytes(&key_file(&b, "x25519.key"));
    let ed = key_bytes(&key_file(&b, "ed25519.key"));
    let peer = Identity::from_secrets(ed, old).peer_id();
    let old_key = x25519_dalek::StaticSecret::from(old);
    let shown_before = b.json(&["identity", "show"])["x25519"].clone();

    // Two members, majority quorum (2 of 2): the update needs only bravo's yes.
    let rotated = b.json(&["identity", "rotate"]);
    assert_eq!(rotated["committed"], true, "{rotated}");
    assert_eq!(rotated["epoch"], 2, "{rotated}");
    converged(&[&a, &b], 2);
    // Until the update is one commit deep a competing commit at its epoch
    // could still win, so bravo keeps both keys.
    assert_eq!(key_bytes(&key_file(&b, "x25519.key")), old);
    let pending = key_bytes(&key_file(&b, "x25519.next.key"));
    assert_ne!(pending, old);

    // A later epoch, committed by alpha, wrapped to bravo's new key; bravo
    // reads it after a restart (which loads the pending key again).
    b.restart();
    eventually("bravo to sync after its restart", || {
        b.json(&["mesh", "status"])["synced"] == true
    });
    a.ok(&["mesh", "propose", "rotate"]);
    let p = open_proposal(&b, "rotate");
    b.ok(&["mesh", "vote", &p, "yes"]);
    let tip = converged(&[&a, &b], 3);
    // Settled: the new key is the key, the old key file's bytes are gone.
    let new = key_bytes(&key_file(&b, "x25519.key"));
    assert_eq!(new, pending, "the key file holds the new key");
    assert!(
        !key_file(&b, "x25519.next.key").exists(),
        "no pending key is left"
    );
    let shown_after = b.json(&["identity", "show"])["x25519"].clone();
    assert_ne!(shown_after, shown_before);
    let db = mesh_db(&b);
    let held: i64 = db
        .query_row(
            "SELECT count(*) FROM secrets WHERE roster_hash = ?1",
            [hex::decode(&tip).unwrap()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(held, 1, "bravo holds the secret of epoch 3");
    let stranded: i64 = db
        .query_row("SELECT count(*) FROM bad_envelopes", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stranded, 0, "bravo opened every envelope");

    // alpha's stored commits: the old key opens bravo's envelope of epoch 1
    // (its join) and none from the update on; the new key opens those.
    // Bravo committed the update itself and sent it on without its own
    // envelope, so no copy holds that one (§7).
    let new_key = x25519_dalek::StaticSecret::from(new);
    let stored = commits(&a);
    let epochs: Vec<i64> = stored.iter().map(|(e, _)| *e).collect();
    assert_eq!(epochs, vec![1, 2, 3]);
    for (epoch, commit) in &stored {
        let with_old = open_envelope_of(commit, &peer, &old_key);
        let with_new = open_envelope_of(commit, &peer, &new_key);
        match epoch {
            1 => assert!(
                with_old.is_ok(),
                "the saved old key is bravo's key before the update"
            ),
            2 => {
                assert!(
                    with_old.is_err() && with_new.is_err(),
                    "epoch 2 is withheld"
                );
                let own = envelopes_of(commit).unwrap();
                let own = own.iter().find(|e| e.recipient == peer).unwrap();
                assert!(own.ciphertext.is_empty(), "bravo sent its own envelope on");
            }
            _ => {
                assert!(with_old.is_err(), "the old key opens epoch {epoch}");
                assert!(with_new.is_ok(), "the new key opens epoch {epoch}");
            }
        }
    }

    // The offline replay (`moot verify`'s) accepts the update's commit, and
    // its rosters name bravo's old key before it and the new one after.
    let genesis: Vec<u8> = mesh_db(&a)
        .query_row("SELECT roster FROM rosters WHERE epoch = 0", [], |r| {
            r.get(0)
        })
        .unwrap();
    let signed: Vec<wire::Signed> = stored.into_iter().map(|(_, c)| c).collect();
    let chain = verify_chain(&genesis, &signed).unwrap();
    let key_at = |e: u64| chain.at(e).and_then(|r| r.member(&peer)).map(|m| m.x25519);
    let old_public = x25519_dalek::PublicKey::from(&old_key).to_bytes();
    let new_public = x25519_dalek::PublicKey::from(&new_key).to_bytes();
    assert_eq!(key_at(1), Some(old_public));
    assert_eq!(key_at(2), Some(new_public));
    assert_eq!(key_at(3), Some(new_public));
}
