//! Ed25519/X25519 node identity and key files (mesh membership issue).
//!
//! A node has one Ed25519 key (its libp2p PeerId derives from it) and one
//! X25519 key for commit envelopes. The X25519 key is bound to the Ed25519 key
//! by a signature that travels in the roster. Key files hold 32 raw secret
//! bytes, are created with mode 0600, and are refused (like ssh does) when
//! group/world accessible or owned by another user.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use rand::CryptoRng;

/// Domain tag of the signature binding an X25519 key to an Ed25519 key.
pub const X25519_BINDING_TAG: &[u8] = b"grove-mesh/v1/x25519-binding\0";

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
    #[error("not a valid Ed25519 public key")]
    BadPublicKey,
    #[error("invalid peer id bytes")]
    BadPeerId,
}

/// Directory of the key files inside the state directory.
pub const IDENTITY_DIR: &str = "identity";

/// A node's secret keys.
pub struct Identity {
    signing: SigningKey,
    x25519: x25519_dalek::StaticSecret,
    /// Derived once: deriving decompresses the public key (a square root).
    peer_id: Vec<u8>,
}

/// The public half of an identity, as it appears in a roster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicIdentity {
    /// libp2p PeerId bytes (identity multihash of the protobuf public key).
    pub peer_id: Vec<u8>,
    pub ed25519: [u8; 32],
    pub x25519: [u8; 32],
    /// Ed25519 signature over `X25519_BINDING_TAG || x25519`.
    pub x25519_binding: [u8; 64],
}

impl Identity {
    /// A fresh identity from `rng`.
    pub fn generate<R: CryptoRng + ?Sized>(rng: &mut R) -> Identity {
        let signing = SigningKey::generate(rng);
        let x25519 = x25519_dalek::StaticSecret::random_from_rng(rng);
        Identity::from_keys(signing, x25519)
    }

    fn from_keys(signing: SigningKey, x25519: x25519_dalek::StaticSecret) -> Identity {
        let peer_id = peer_id_bytes(&signing.verifying_key().to_bytes()).unwrap_or_default();
        Identity {
            signing,
            x25519,
            peer_id,
        }
    }

    /// An identity from its two 32-byte secrets.
    pub fn from_secrets(ed25519: [u8; 32], x25519: [u8; 32]) -> Identity {
        Identity::from_keys(
            SigningKey::from_bytes(&ed25519),
            x25519_dalek::StaticSecret::from(x25519),
        )
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
                write_key_file(&ed_path, &identity.signing.to_bytes())?;
                write_key_file(&x_path, &identity.x25519.to_bytes())?;
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

    /// The Ed25519 signing key.
    pub fn signing_key(&self) -> &SigningKey {
        &self.signing
    }

    /// The X25519 secret used to open envelopes.
    pub fn x25519_secret(&self) -> &x25519_dalek::StaticSecret {
        &self.x25519
    }

    pub fn ed25519_public(&self) -> [u8; 32] {
        self.signing.verifying_key().to_bytes()
    }

    pub fn x25519_public(&self) -> [u8; 32] {
        x25519_dalek::PublicKey::from(&self.x25519).to_bytes()
    }

    /// libp2p PeerId bytes of this node.
    pub fn peer_id(&self) -> Vec<u8> {
        self.peer_id.clone()
    }

    /// Signs `tag || body`.
    pub fn sign(&self, tag: &[u8], body: &[u8]) -> [u8; 64] {
        let mut msg = Vec::with_capacity(tag.len() + body.len());
        msg.extend_from_slice(tag);
        msg.extend_from_slice(body);
        self.signing.sign(&msg).to_bytes()
    }

    /// The public identity with its X25519 binding signature.
    pub fn public(&self) -> PublicIdentity {
        let x = self.x25519_public();
        PublicIdentity {
            peer_id: self.peer_id(),
            ed25519: self.ed25519_public(),
            x25519: x,
            x25519_binding: self.sign(X25519_BINDING_TAG, &x),
        }
    }
}

/// libp2p PeerId bytes for an Ed25519 public key: the identity multihash of
/// the protobuf-encoded public key, per the libp2p peer-id spec.
pub fn peer_id_bytes(ed25519: &[u8; 32]) -> Result<Vec<u8>, IdentityError> {
    let key = libp2p_identity::ed25519::PublicKey::try_from_bytes(ed25519)
        .map_err(|_| IdentityError::BadPublicKey)?;
    Ok(libp2p_identity::PublicKey::from(key)
        .to_peer_id()
        .to_bytes())
}

/// Base58 text form of peer id bytes (as libp2p prints it).
pub fn peer_id_text(peer_id: &[u8]) -> String {
    match libp2p_identity::PeerId::from_bytes(peer_id) {
        Ok(p) => p.to_base58(),
        Err(_) => hex::encode(peer_id),
    }
}

/// Verifies an Ed25519 signature over `tag || body` (strict: no malleable encodings).
pub fn verify(public: &[u8; 32], tag: &[u8], body: &[u8], signature: &[u8]) -> bool {
    let Ok(key) = VerifyingKey::from_bytes(public) else {
        return false;
    };
    let Ok(sig) = Signature::from_slice(signature) else {
        return false;
    };
    let mut msg = Vec::with_capacity(tag.len() + body.len());
    msg.extend_from_slice(tag);
    msg.extend_from_slice(body);
    key.verify_strict(&msg, &sig).is_ok()
}

/// Checks that the X25519 key is bound to the Ed25519 key.
pub fn verify_x25519_binding(ed25519: &[u8; 32], x25519: &[u8; 32], binding: &[u8]) -> bool {
    verify(ed25519, X25519_BINDING_TAG, x25519, binding)
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
        let a = Identity::load_or_create(&keys).unwrap();
        let mode = fs::metadata(keys.join(ED25519_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let b = Identity::load_or_create(&keys).unwrap();
        assert_eq!(a.public(), b.public());
    }

    #[test]
    fn readable_key_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("identity");
        Identity::load_or_create(&keys).unwrap();
        let path = keys.join(X25519_FILE);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        let err = Identity::load_or_create(&keys).err().unwrap();
        assert!(matches!(err, IdentityError::BadPermissions { .. }), "{err}");
        assert!(err.to_string().contains("chmod 600"));
    }

    #[test]
    fn half_missing_pair_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("identity");
        Identity::load_or_create(&keys).unwrap();
        fs::remove_file(keys.join(X25519_FILE)).unwrap();
        assert!(matches!(
            Identity::load_or_create(&keys),
            Err(IdentityError::HalfMissing { .. })
        ));
    }

    #[test]
    fn peer_id_matches_libp2p_and_binding_verifies() {
        let id = Identity::from_secrets([7u8; 32], [9u8; 32]);
        let kp = libp2p_identity::Keypair::ed25519_from_bytes([7u8; 32]).unwrap();
        assert_eq!(id.peer_id(), kp.public().to_peer_id().to_bytes());
        let p = id.public();
        assert!(verify_x25519_binding(
            &p.ed25519,
            &p.x25519,
            &p.x25519_binding
        ));
        assert!(!verify_x25519_binding(
            &p.ed25519,
            &[1u8; 32],
            &p.x25519_binding
        ));
    }
}
