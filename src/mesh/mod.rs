//! Mesh membership at the edge: the `[mesh]` settings and `store`, which
//! persists every transition of the pure state machine in
//! `<state_dir>/mesh.db`. The machine itself (roster, envelopes, invites,
//! votes, the commit rules) is `grove_core::mesh`, re-exported here; the
//! protocol is written down in docs/mesh-protocol.md.

pub use grove_core::mesh::*;

pub mod store;

use grove_core::settings::Invalid;
use serde::Deserialize;

/// The longest an invite may stay open (`mesh.invite_ttl_secs`, `mesh invite --ttl`).
pub const MAX_INVITE_TTL_SECS: u64 = 365 * 24 * 3600;

/// Mesh configuration (`[mesh]` in grove.toml).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MeshSettings {
    /// How long a proposal stays open before its votes are released.
    pub proposal_ttl_secs: u64,
    /// Default lifetime of an invite.
    pub invite_ttl_secs: u64,
    /// How long the previous epoch's keys are kept after a change.
    pub key_grace_secs: u64,
    /// How long after a proposal's creation any member (not only the proposer)
    /// may build its commit once it has quorum.
    pub commit_backup_secs: u64,
}

impl Default for MeshSettings {
    fn default() -> Self {
        let secs = |ms: i64| u64::try_from(ms / 1000).unwrap_or(0);
        let t = state::Timing::default();
        MeshSettings {
            proposal_ttl_secs: secs(t.proposal_ttl_ms),
            invite_ttl_secs: secs(t.invite_ttl_ms),
            key_grace_secs: secs(t.key_grace_ms),
            commit_backup_secs: secs(t.commit_backup_ms),
        }
    }
}

impl MeshSettings {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), Invalid> {
        let week = 7 * 24 * 3600;
        if !(60..=week).contains(&self.proposal_ttl_secs) {
            return Err(Invalid::new(
                "mesh.proposal_ttl_secs",
                "must be between 60 s and 7 days",
            ));
        }
        if !(60..=MAX_INVITE_TTL_SECS).contains(&self.invite_ttl_secs) {
            return Err(Invalid::new(
                "mesh.invite_ttl_secs",
                "must be between 60 s and 365 days",
            ));
        }
        if self.key_grace_secs > 24 * 3600 {
            return Err(Invalid::new(
                "mesh.key_grace_secs",
                "must be at most one day",
            ));
        }
        if self.commit_backup_secs == 0 || self.commit_backup_secs >= self.proposal_ttl_secs {
            return Err(Invalid::new(
                "mesh.commit_backup_secs",
                "must be positive and shorter than proposal_ttl_secs",
            ));
        }
        Ok(())
    }

    /// The timing values the state machine uses, in milliseconds.
    pub fn timing(&self) -> state::Timing {
        let ms = |s: u64| i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX);
        state::Timing {
            proposal_ttl_ms: ms(self.proposal_ttl_secs),
            invite_ttl_ms: ms(self.invite_ttl_secs),
            key_grace_ms: ms(self.key_grace_secs),
            commit_backup_ms: ms(self.commit_backup_secs),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_settings_are_valid_and_bad_ones_name_their_key() {
        assert_eq!(MeshSettings::default().validate(), Ok(()));
        let bad = MeshSettings {
            commit_backup_secs: 0,
            ..MeshSettings::default()
        };
        assert_eq!(bad.validate().unwrap_err().key, "mesh.commit_backup_secs");
        let bad = MeshSettings {
            proposal_ttl_secs: 1,
            ..MeshSettings::default()
        };
        assert_eq!(bad.validate().unwrap_err().key, "mesh.proposal_ttl_secs");
    }
}
