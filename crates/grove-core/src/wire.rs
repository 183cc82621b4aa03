//! Wire types generated from `proto/` (the only serialized network formats).

/// Mesh membership messages (`proto/mesh.proto`).
#[allow(clippy::all, missing_docs)]
pub mod mesh {
    include!(concat!(env!("OUT_DIR"), "/grove.mesh.rs"));
}

/// Node-to-node messages beyond membership (`proto/node.proto`).
#[allow(clippy::all, missing_docs)]
pub mod node {
    include!(concat!(env!("OUT_DIR"), "/grove.node.rs"));
}

/// Cross-node moot messages (`proto/moot.proto`).
#[allow(clippy::all, missing_docs)]
pub mod moot {
    include!(concat!(env!("OUT_DIR"), "/grove.moot.rs"));
}
