//! `/grove/relay-pass/1`, both sides. A joiner behind a NAT reaches its
//! inviter (also behind one) through a relay that is a member of the mesh;
//! the relay lets a stranger through only when it presents an open invite
//! of this mesh: signed by a current member, unexpired, neither revoked nor
//! used. The pass lets it reach that inviter, for at most `PASS_LEASE` (the
//! joiner presents it again when it polls later).

use std::time::{Duration, Instant};

use libp2p::PeerId;
use prost::Message;

use crate::mesh::invite;
use crate::mesh::state::MeshState;
use crate::net::{NetError, Network, Protocol};
use crate::wire::mesh as wire;
use crate::wire::node as node_wire;
use node_wire::relay_pass_answer::Kind;

/// The longest a pass lasts.
const PASS_LEASE: Duration = Duration::from_secs(600);

pub fn refused(reason: impl Into<String>) -> node_wire::RelayPassAnswer {
    node_wire::RelayPassAnswer {
        kind: Some(Kind::Refused(reason.into())),
    }
}

/// Whether `signed` is an open invite of this node's mesh: the inviter it
/// lets the presenter reach, and until when (ms since the epoch).
fn check(view: &MeshState, signed: &wire::Signed, now_ms: i64) -> Result<(PeerId, i64), String> {
    let Some(roster) = view.roster() else {
        return Err("this node is in no mesh".into());
    };
    let inv = invite::verify(signed).map_err(|e| e.to_string())?;
    if inv.mesh_id != roster.mesh_id {
        return Err("the invite is for another mesh".into());
    }
    if roster.member(&inv.inviter).is_none() {
        return Err("the invite's inviter is not a member of this mesh".into());
    }
    if inv.expires_ms <= now_ms {
        return Err("the invite has expired".into());
    }
    if view.revoked.contains_key(&inv.invite_id) {
        return Err("the invite was revoked".into());
    }
    if view.used_invites.contains_key(&inv.invite_id) {
        return Err("the invite was used".into());
    }
    let inviter = PeerId::from_bytes(&inv.inviter).map_err(|_| "malformed inviter".to_string())?;
    Ok((inviter, inv.expires_ms))
}

/// Answers a stranger's pass request; a granted pass is handed to the
/// network's relay rule.
pub async fn answer(
    net: &Network,
    view: &MeshState,
    serves_anyone: bool,
    peer: PeerId,
    data: &[u8],
) -> node_wire::RelayPassAnswer {
    if serves_anyone {
        // This relay serves everyone: no invite needed.
        return node_wire::RelayPassAnswer {
            kind: Some(Kind::ValidMs(PASS_LEASE.as_millis() as i64)),
        };
    }
    let Ok(call) = node_wire::RelayPassCall::decode(data) else {
        return refused("malformed relay-pass call");
    };
    let Some(signed) = call.invite else {
        return refused("the call carries no invite");
    };
    let now_ms = crate::now_ms();
    match check(view, &signed, now_ms) {
        Ok((inviter, expires_ms)) => {
            let left = Duration::from_millis(u64::try_from(expires_ms - now_ms).unwrap_or(0));
            let lease = left.min(PASS_LEASE);
            if net
                .grant_relay_pass(peer, inviter, Instant::now() + lease)
                .await
                .is_err()
            {
                return refused("the network is stopping");
            }
            node_wire::RelayPassAnswer {
                kind: Some(Kind::ValidMs(lease.as_millis() as i64)),
            }
        }
        Err(reason) => refused(reason),
    }
}

/// Asks `relay` for a pass with `invite` (the joiner's side).
pub async fn ask(
    net: &Network,
    relay: PeerId,
    invite: &wire::Signed,
) -> Result<Duration, NetError> {
    let call = node_wire::RelayPassCall {
        invite: Some(invite.clone()),
    };
    let bytes = net
        .request(relay, Protocol::RelayPass, call.encode_to_vec())
        .await?;
    let failed = |reason: String| NetError::Request {
        peer: relay,
        reason,
    };
    match node_wire::RelayPassAnswer::decode(bytes.as_slice()) {
        Ok(node_wire::RelayPassAnswer {
            kind: Some(Kind::ValidMs(ms)),
        }) => Ok(Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        Ok(node_wire::RelayPassAnswer {
            kind: Some(Kind::Refused(reason)),
        }) => Err(failed(format!("the relay refused a pass: {reason}"))),
        _ => Err(failed("the relay sent a malformed answer".into())),
    }
}
