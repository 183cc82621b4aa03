//! `grove identity show`: this node's peer id and public keys;
//! `grove identity rotate`: replace its X25519 key through a commit.

use std::io::{self, Write};

use anyhow::Context;

use super::{Ctx, Show};
use grove::api::dto;
use grove::api::routes;
use grove::identity::Identity;
use grove::mesh::store::StateLock;

#[derive(Debug, clap::Subcommand)]
pub enum IdentityCmd {
    /// Print the peer id and both public keys (keys are created on first use).
    Show,
    /// Replace this member's X25519 key: a new key, a signed key update
    /// committed on this member's own yes (no vote of the others), and the
    /// old key file erased once the commit is applied (needs the running
    /// node; see docs/mesh-protocol.md, "Key updates").
    Rotate,
}

pub fn run(cmd: IdentityCmd, ctx: &Ctx) -> anyhow::Result<()> {
    match cmd {
        IdentityCmd::Show => ctx.show(&identity(ctx)?),
        IdentityCmd::Rotate => {
            let client = ctx.daemon()?;
            let done: dto::Proposed =
                client.request(hyper::Method::POST, routes::IDENTITY_ROTATE, Vec::new())?;
            ctx.show(&Rotated(done))
        }
    }
}

/// The answer of `identity rotate`.
#[derive(serde::Serialize)]
#[serde(transparent)]
struct Rotated(dto::Proposed);

impl Show for Rotated {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.0.committed {
            writeln!(
                out,
                "key update {} committed: the new x25519 key is in effect from epoch {}",
                self.0.id, self.0.epoch
            )
        } else {
            writeln!(
                out,
                "key update {} proposed at epoch {}; it commits when this node next can",
                self.0.id, self.0.epoch
            )
        }
    }
}

/// The daemon's answer when one runs (it holds the keys), else the keys
/// read under the state lock: the same DTO either way.
fn identity(ctx: &Ctx) -> anyhow::Result<dto::IdentityView> {
    if let Some(client) = ctx.daemon_if_running() {
        return Ok(client.request(hyper::Method::GET, routes::IDENTITY, Vec::new())?);
    }
    let _lock = StateLock::acquire(&ctx.state_dir)?;
    Ok(dto::IdentityView::from(&load(ctx)?.public()))
}

impl Show for dto::IdentityView {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "peer id  {}", self.peer_id)?;
        writeln!(out, "ed25519  {}", self.ed25519)?;
        writeln!(out, "x25519   {}", self.x25519)
    }
}

/// Loads (or creates on first use) this node's keys, refusing unsafe key files.
pub fn load(ctx: &Ctx) -> anyhow::Result<Identity> {
    let dir = grove::state_dir::StateDir::new(&ctx.state_dir).identity();
    grove::identity::load_or_create(&dir)
        .with_context(|| format!("loading the node identity from {}", dir.display()))
}
