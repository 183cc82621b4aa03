//! The node's key files under `<state_dir>/identity/` (the keys themselves,
//! peer ids and signing are `grove_core::identity`, re-exported here).
//!
//! Key files hold 32 raw secret bytes, are created with mode 0600, and are
//! refused (like ssh does) when group/world accessible or owned by another
//! user.

use std::fs;
use std::path::{Path, PathBuf};

use zeroize::Zeroize;

use crate::db::{self, Put, StorageError};

pub use grove_core::identity::*;

/// File names inside `<state_dir>/identity/`.
pub const ED25519_FILE: &str = "ed25519.key";
pub const X25519_FILE: &str = "x25519.key";
/// The replacement X25519 key of a key update not yet in effect (§8b).
pub const PENDING_X25519_FILE: &str = "x25519.next.key";

/// Errors from loading, creating or checking the node identity.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("key file {path} must hold exactly 32 bytes, found {len}")]
    BadLength { path: PathBuf, len: usize },
    #[error(
        "key file {path} is missing while {other} exists; refusing to pair a new key with an old one"
    )]
    HalfMissing { path: PathBuf, other: PathBuf },
}

/// Loads the key files under `dir`, creating both (mode 0600) when neither exists.
pub fn load_or_create(dir: &Path) -> Result<Identity, IdentityError> {
    let ed_path = dir.join(ED25519_FILE);
    let x_path = dir.join(X25519_FILE);
    match (ed_path.exists(), x_path.exists()) {
        (true, true) => {
            let ed = read_key_file(&ed_path)?;
            let x = read_key_file(&x_path)?;
            Ok(Identity::from_secrets(ed, x))
        }
        (false, false) => {
            db::create_private_dir(dir)?;
            let identity = Identity::generate(&mut rand::rng());
            db::write_private(&ed_path, &identity.signing_key().to_bytes(), Put::New)?;
            db::write_private(&x_path, &identity.x25519_secret().to_bytes(), Put::New)?;
            Ok(identity)
        }
        (true, false) => Err(IdentityError::HalfMissing {
            path: x_path,
            other: ed_path,
        }),
        (false, true) => Err(IdentityError::HalfMissing {
            path: ed_path,
            other: x_path,
        }),
    }
}

/// Loads the pending X25519 key of an unfinished key update into `id`,
/// when one was saved (a restart resumes the update).
pub fn load_pending(dir: &Path, id: &mut Identity) -> Result<(), IdentityError> {
    let path = dir.join(PENDING_X25519_FILE);
    if path.exists() {
        id.set_pending_x25519(read_key_file(&path)?);
    }
    Ok(())
}

/// The pending X25519 key of a key update: the one saved before (an update
/// that did not finish), else a new one, saved privately before it is used.
pub fn pending_or_new(
    dir: &Path,
    id: &mut Identity,
) -> Result<([u8; 32], [u8; 64]), IdentityError> {
    if let Some(public) = id.pending_x25519_public() {
        return Ok(public);
    }
    let mut secret = x25519_dalek::StaticSecret::random_from_rng(&mut rand::rng()).to_bytes();
    let saved = db::write_private(&dir.join(PENDING_X25519_FILE), &secret, Put::Replace);
    if let Err(e) = saved {
        secret.zeroize();
        return Err(e.into());
    }
    Ok(id.set_pending_x25519(secret))
}

/// Makes the pending X25519 key this node's key: it replaces
/// `x25519.key`, whose old bytes are overwritten, and the pending file is
/// removed. Called once the update is settled (`MeshState::key_settled`)
/// and persisted; each step can be repeated, so a crash between them loses
/// nothing.
pub fn promote_pending(dir: &Path, id: &mut Identity) -> Result<(), IdentityError> {
    let pending = dir.join(PENDING_X25519_FILE);
    let mut secret = read_key_file(&pending)?;
    let replaced = db::replace_erasing(&dir.join(X25519_FILE), &secret);
    secret.zeroize();
    replaced?;
    fs::remove_file(&pending).map_err(StorageError::at(&pending, "remove"))?;
    db::sync_dir(dir)?;
    id.promote_pending_x25519();
    Ok(())
}

fn read_key_file(path: &Path) -> Result<[u8; 32], IdentityError> {
    db::check_private(path)?;
    let bytes = fs::read(path).map_err(StorageError::at(path, "read"))?;
    bytes
        .as_slice()
        .try_into()
        .map_err(|_| IdentityError::BadLength {
            path: path.to_path_buf(),
            len: bytes.len(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn key_files_are_created_private_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("identity");
        let a = load_or_create(&keys).unwrap();
        let mode = fs::metadata(keys.join(ED25519_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let b = load_or_create(&keys).unwrap();
        assert_eq!(a.public(), b.public());
    }

    #[test]
    fn readable_key_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("identity");
        load_or_create(&keys).unwrap();
        let path = keys.join(X25519_FILE);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        let err = load_or_create(&keys).err().unwrap();
        assert!(
            matches!(&err, IdentityError::Storage(e) if e.cause() == db::Cause::NotPrivate),
            "{err}"
        );
        assert!(err.to_string().contains("chmod 600"));
    }

    #[test]
    fn a_pending_key_survives_a_restart_and_its_promotion_erases_the_old_key() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("identity");
        let mut id = load_or_create(&keys).unwrap();
        let old = fs::read(keys.join(X25519_FILE)).unwrap();
        // A second name for the old key file's bytes, to see them erased.
        let old_copy = dir.path().join("old-inode");
        fs::hard_link(keys.join(X25519_FILE), &old_copy).unwrap();
        let (public, _) = pending_or_new(&keys, &mut id).unwrap();
        let mode = fs::metadata(keys.join(PENDING_X25519_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // A restart: the saved pending key is loaded and proposed again.
        drop(id);
        let mut again = load_or_create(&keys).unwrap();
        assert!(again.pending_x25519_public().is_none());
        load_pending(&keys, &mut again).unwrap();
        assert_eq!(again.pending_x25519_public().map(|p| p.0), Some(public));
        assert_eq!(pending_or_new(&keys, &mut again).unwrap().0, public);
        assert!(again.x25519_secret_for(&public).is_some());
        promote_pending(&keys, &mut again).unwrap();
        assert_eq!(again.x25519_public(), public);
        assert!(again.pending_x25519_public().is_none());
        assert!(!keys.join(PENDING_X25519_FILE).exists());
        assert_ne!(fs::read(keys.join(X25519_FILE)).unwrap(), old);
        assert_eq!(
            fs::read(&old_copy).unwrap(),
            vec![0u8; 32],
            "the old bytes are overwritten"
        );
        assert_eq!(load_or_create(&keys).unwrap().x25519_public(), public);
    }

    #[test]
    fn half_missing_pair_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("identity");
        load_or_create(&keys).unwrap();
        fs::remove_file(keys.join(X25519_FILE)).unwrap();
        assert!(matches!(
            load_or_create(&keys),
            Err(IdentityError::HalfMissing { .. })
        ));
    }

    #[test]
    fn peer_ids_match_libp2ps() {
        for seed in [[7u8; 32], [0u8; 32], [200u8; 32]] {
            let id = Identity::from_secrets(seed, [9u8; 32]);
            let kp = libp2p_identity::Keypair::ed25519_from_bytes(seed).unwrap();
            let peer = kp.public().to_peer_id();
            assert_eq!(id.peer_id(), peer.to_bytes());
            assert_eq!(peer_id_text(&id.peer_id()), peer.to_base58());
        }
    }
}
