//! Ed25519/X25519 node identity and key files (mesh membership issue).
