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

/// A Merkle proof as it travels (`grove.moot.ProofStep`, in moot turns and
/// search hits alike): one conversion each way.
pub mod proof {
    use super::moot::ProofStep as WireStep;
    use crate::merkle::ProofStep;

    /// The steps as sent.
    pub fn to_wire(proof: &[ProofStep]) -> Vec<WireStep> {
        proof
            .iter()
            .map(|s| WireStep {
                sibling: s.sibling.to_vec(),
                is_left: s.is_left,
            })
            .collect()
    }

    /// The steps as received; None when a sibling is not 32 bytes.
    pub fn from_wire(proof: &[WireStep]) -> Option<Vec<ProofStep>> {
        proof
            .iter()
            .map(|s| {
                Some(ProofStep {
                    sibling: s.sibling.as_slice().try_into().ok()?,
                    is_left: s.is_left,
                })
            })
            .collect()
    }
}
