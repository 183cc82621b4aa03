//! Forward secrecy at rest, as a thief tries it (docs/mesh-protocol.md
//! §7a): three daemons move to epoch 6 with `mesh.key_grace_secs = 0`, so
//! each erases the secrets of epochs 1–5; bravo's state directory is then
//! copied while it runs, by `grove backup`, and after it stops. Each copy is
//! opened with an envelope opener written here from the specification
//! (X25519, HKDF-SHA256, ChaCha20-Poly1305), not grove's: with the keys a
//! copy holds it opens no envelope of epochs 1–5, and no file of it holds
//! those secrets' bytes. The truth it is held against comes from the other
//! members' disks, opened with each member's own key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Nonce};
use grove::mesh::codec;
use grove::mesh::roster::Roster;
use grove::mesh::state::envelopes_of;
use grove::wire::mesh as wire;

use crate::cluster::{Daemon, converged, eventually, identity_in, invite, vote_yes};

/// The secret in one envelope, opened as the specification says (§7 step
/// 4): `ss = X25519(key, e)`, `HKDF-SHA256(salt = e || key's public, ikm =
/// ss).expand(info, 32)`, ChaCha20-Poly1305 with a zero nonce and `info` as
/// associated data.
fn open(key: &[u8; 32], commit: &Stored, recipient: &[u8], ciphertext: &[u8]) -> Option<[u8; 32]> {
    let secret = x25519_dalek::StaticSecret::from(*key);
    let public = x25519_dalek::PublicKey::from(&secret);
    let shared = secret.diffie_hellman(&x25519_dalek::PublicKey::from(commit.ephemeral));
    let mut info = b"grove-mesh/v1/envelope\0".to_vec();
    info.extend_from_slice(&commit.mesh_id);
    info.extend_from_slice(&commit.epoch.to_be_bytes());
    info.extend_from_slice(&commit.roster_hash);
    info.extend_from_slice(&(recipient.len() as u16).to_be_bytes());
    info.extend_from_slice(recipient);
    let mut salt = commit.ephemeral.to_vec();
    salt.extend_from_slice(public.as_bytes());
    let mut k = [0u8; 32];
    hkdf::Hkdf::<sha2::Sha256>::new(Some(&salt), shared.as_bytes())
        .expand(&info, &mut k)
        .ok()?;
    let plain = ChaCha20Poly1305::new(&k.into())
        .decrypt(
            &Nonce::default(),
            Payload {
                msg: ciphertext,
                aad: &info,
            },
        )
        .ok()?;
    plain.try_into().ok()
}

/// One stored commit, as a reader of `mesh.db` finds it.
struct Stored {
    epoch: u64,
    mesh_id: Vec<u8>,
    roster_hash: Vec<u8>,
    ephemeral: [u8; 32],
    /// (recipient peer id, ciphertext; empty where withheld)
    envelopes: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Every commit stored in the `mesh.db` at `db`, by the epoch it made.
fn stored_commits(db: &Path) -> BTreeMap<u64, Stored> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut q = conn
        .prepare("SELECT epoch, roster, commit_msg FROM rosters WHERE commit_msg IS NOT NULL")
        .unwrap();
    let rows: Vec<(i64, Vec<u8>, Vec<u8>)> = q
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = BTreeMap::new();
    for (epoch, roster, msg) in rows {
        let signed: wire::Signed = codec::decode_canonical(&msg, "stored commit").unwrap();
        let body: wire::Commit = codec::decode_canonical(&signed.body, "commit").unwrap();
        let core: wire::CommitCore = codec::decode_canonical(&body.core, "core").unwrap();
        let next = Roster::decode(&roster).unwrap();
        let stored = Stored {
            epoch: epoch as u64,
            mesh_id: next.mesh_id.to_vec(),
            roster_hash: next.hash().to_vec(),
            ephemeral: core.ephemeral_x25519.try_into().unwrap(),
            envelopes: envelopes_of(&signed)
                .unwrap()
                .into_iter()
                .map(|e| (e.recipient, e.ciphertext))
                .collect(),
        };
        assert!(
            out.insert(epoch as u64, stored).is_none(),
            "one roster per epoch"
        );
    }
    out
}

/// The X25519 key file and peer id of a member.
struct Keys {
    x25519: [u8; 32],
    peer_id: Vec<u8>,
}

fn keys_of(state: &Path) -> Keys {
    let id = identity_in(state);
    Keys {
        x25519: id.x25519_secret().to_bytes(),
        peer_id: id.peer_id(),
    }
}

/// Every regular file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            out.extend(files_under(&entry.path()));
        } else if kind.is_file() {
            // (The control socket `cp -a` copies holds no bytes.)
            out.push(entry.path());
        }
    }
    out
}

fn copy_dir(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success(), "cp -a {}", from.display());
}

/// The secrets bravo's copy holds, by epoch.
fn held_secrets(db: &Path) -> BTreeMap<u64, Vec<u8>> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut q = conn.prepare("SELECT epoch, secret FROM secrets").unwrap();
    q.query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_copy_of_a_members_disk_or_backup_opens_no_epoch_it_erased() {
    let grace = [("GROVE_MESH__KEY_GRACE_SECS", "0")];
    let a = Daemon::start_with("alpha", &grace);
    let mut b = Daemon::start_with("bravo", &grace);
    let c = Daemon::start_with("charlie", &grace);
    a.ok(&["mesh", "init", "--name", "stolen"]);
    assert_eq!(b.json(&["mesh", "join", &invite(&a)])["state"], "joined");
    let pending = c.json(&["mesh", "join", &invite(&a)]);
    assert_eq!(pending["state"], "pending", "{pending}");
    vote_yes(&b, "add");
    converged(&[&a, &b, &c], 2);
    // Epochs 3 to 6: rotations proposed (and so committed) by bravo, alpha,
    // charlie and bravo, each passed by one more yes.
    for (epoch, proposer, voter) in [(3, &b, &a), (4, &a, &c), (5, &c, &b), (6, &b, &c)] {
        proposer.ok(&["mesh", "propose", "rotate"]);
        vote_yes(voter, "rotate");
        converged(&[&a, &b, &c], epoch);
    }
    let keys: Vec<Keys> = [&a, &b, &c].iter().map(|d| keys_of(&d.g.state())).collect();
    let bravo = &keys[1];

    // The truth: each epoch's secret, from whichever disk holds an envelope
    // its member's key opens (every member keeps the others' envelopes).
    let mut truth: BTreeMap<u64, [u8; 32]> = BTreeMap::new();
    for d in [&a, &b, &c] {
        for (epoch, commit) in stored_commits(&d.g.state().join("mesh.db")) {
            for (recipient, ciphertext) in &commit.envelopes {
                let Some(k) = keys.iter().find(|k| &k.peer_id == recipient) else {
                    continue;
                };
                if let Some(secret) = open(&k.x25519, &commit, recipient, ciphertext) {
                    assert_eq!(*truth.entry(epoch).or_insert(secret), secret);
                }
            }
        }
    }
    assert_eq!(
        truth.keys().copied().collect::<Vec<_>>(),
        (1..=6).collect::<Vec<_>>(),
        "every epoch's secret is known from the members' disks"
    );

    // Bravo erases epochs 1-5 on its next tick.
    let live = b.g.state().join("mesh.db");
    eventually("bravo to erase every secret but epoch 6's", || {
        held_secrets(&live).keys().copied().collect::<Vec<_>>() == vec![6]
    });

    // Three copies: while it runs, its own backup, and after it stops.
    let loot = tempfile::tempdir().unwrap();
    let running = loot.path().join("running");
    copy_dir(&b.g.state(), &running);
    let backup = loot.path().join("backup");
    b.json(&["backup", backup.to_str().unwrap()]);
    b.stop();
    let stopped = loot.path().join("stopped");
    copy_dir(&b.g.state(), &stopped);

    for copy in [&running, &backup, &stopped] {
        let shown = copy.display();
        let db = copy.join("mesh.db");
        // A working copy: it holds epoch 6's secret and nothing older.
        let held = held_secrets(&db);
        assert_eq!(held.keys().copied().collect::<Vec<_>>(), vec![6], "{shown}");
        assert_eq!(held[&6], truth[&6].to_vec(), "{shown}");
        // Every key file the copy holds, tried on every envelope it keeps.
        let copy_keys: Vec<[u8; 32]> = ["x25519.key", "x25519.next.key"]
            .iter()
            .filter_map(|n| std::fs::read(copy.join("identity").join(n)).ok())
            .map(|k| k.try_into().unwrap())
            .collect();
        assert_eq!(copy_keys, vec![bravo.x25519], "{shown}");
        let commits = stored_commits(&db);
        assert_eq!(
            commits.keys().copied().collect::<Vec<_>>(),
            (1..=6).collect::<Vec<_>>()
        );
        for commit in commits.values() {
            for (recipient, ciphertext) in &commit.envelopes {
                if recipient == &bravo.peer_id {
                    assert!(
                        ciphertext.is_empty(),
                        "{shown} keeps its own envelope of epoch {}",
                        commit.epoch
                    );
                }
                for key in &copy_keys {
                    assert_eq!(
                        open(key, commit, recipient, ciphertext),
                        None,
                        "{shown}: epoch {} opens",
                        commit.epoch
                    );
                }
            }
        }
        // No file holds an erased secret's bytes; the scan does find the
        // live one, so it would find them.
        let files = files_under(copy);
        let holds = |secret: &[u8; 32]| {
            files.iter().any(|f| {
                std::fs::read(f)
                    .unwrap()
                    .windows(32)
                    .any(|w| w == secret.as_slice())
            })
        };
        for epoch in 1..=5 {
            assert!(
                !holds(&truth[&epoch]),
                "{shown} holds epoch {epoch}'s secret"
            );
        }
        assert!(holds(&truth[&6]), "{shown}: the scan finds the live secret");
    }
}
