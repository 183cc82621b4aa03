//! The node's key files under `<state_dir>/identity/` (the keys themselves,
//! peer ids and signing are `grove_core::identity`, re-exported here).
//!
//! Key files hold 32 raw secret bytes, are created with mode 0600, and are
//! refused (like ssh does) when group/world accessible or owned by another
//! user.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub use grove_core::identity::*;

/// File names inside `<state_dir>/identity/`.
pub const ED25519_FILE: &str = "ed25519.key";
pub const X25519_FILE: &str = "x25519.key";

/// Errors from loading, creating or checking the node identity.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("identity: {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} holds secrets but is accessible by group or others (mode {mode:o}); run `chmod 600 {path}` and try again"
    )]
    BadPermissions { path: PathBuf, mode: u32 },
    #[error(
        "key file {path} is owned by uid {owner}, not by this user (uid {me}); refusing to use it"
    )]
    WrongOwner { path: PathBuf, owner: u32, me: u32 },
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
            create_private_dir(dir)?;
            let identity = Identity::generate(&mut rand::rng());
            write_key_file(&ed_path, &identity.signing_key().to_bytes())?;
            write_key_file(&x_path, &identity.x25519_secret().to_bytes())?;
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

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> IdentityError + '_ {
    move |source| IdentityError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The effective uid of this process (owner of `/proc/self`).
pub fn current_uid() -> Result<u32, IdentityError> {
    let path = Path::new("/proc/self");
    Ok(fs::metadata(path).map_err(io_err(path))?.uid())
}

/// Refuses a secret file that is group/world accessible or owned by someone else.
pub fn check_private_file(path: &Path) -> Result<(), IdentityError> {
    let meta = fs::metadata(path).map_err(io_err(path))?;
    let me = current_uid()?;
    if meta.uid() != me {
        return Err(IdentityError::WrongOwner {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(IdentityError::BadPermissions {
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

fn read_key_file(path: &Path) -> Result<[u8; 32], IdentityError> {
    check_private_file(path)?;
    let bytes = fs::read(path).map_err(io_err(path))?;
    bytes
        .as_slice()
        .try_into()
        .map_err(|_| IdentityError::BadLength {
            path: path.to_path_buf(),
            len: bytes.len(),
        })
}

fn create_private_dir(dir: &Path) -> Result<(), IdentityError> {
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_err(dir))?;
    }
    Ok(())
}

fn write_key_file(path: &Path, secret: &[u8; 32]) -> Result<(), IdentityError> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io_err(path))?;
    file.write_all(secret).map_err(io_err(path))?;
    file.sync_all().map_err(io_err(path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(matches!(err, IdentityError::BadPermissions { .. }), "{err}");
        assert!(err.to_string().contains("chmod 600"));
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
