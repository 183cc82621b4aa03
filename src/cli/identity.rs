//! `grove identity show`: this node's peer id and public keys.

use anyhow::Context;

use super::Ctx;
use grove::identity::{self, Identity};
use grove::mesh::store::StateLock;

pub use grove::identity::IDENTITY_DIR;

#[derive(Debug, clap::Subcommand)]
pub enum IdentityCmd {
    /// Print the peer id and both public keys (keys are created on first use).
    Show,
}

pub fn run(cmd: IdentityCmd, ctx: &Ctx) -> anyhow::Result<()> {
    match cmd {
        IdentityCmd::Show => {
            if let Some(client) = ctx.daemon_if_running() {
                let v: grove::api::dto::IdentityView =
                    client.request(hyper::Method::GET, "/v1/identity", Vec::new())?;
                if ctx.json {
                    return super::print_json(&v);
                }
                println!("peer id  {}", v.peer_id);
                println!("ed25519  {}", v.ed25519);
                println!("x25519   {}", v.x25519);
                return Ok(());
            }
            let _lock = StateLock::acquire(&ctx.state_dir)?;
            let id = load(ctx)?;
            let p = id.public();
            let peer_id = identity::peer_id_text(&p.peer_id);
            if ctx.json {
                println!(
                    "{}",
                    serde_json::json!({
                        "peer_id": peer_id,
                        "ed25519": hex::encode(p.ed25519),
                        "x25519": hex::encode(p.x25519),
                    })
                );
            } else {
                println!("peer id  {peer_id}");
                println!("ed25519  {}", hex::encode(p.ed25519));
                println!("x25519   {}", hex::encode(p.x25519));
            }
            Ok(())
        }
    }
}

/// Loads (or creates on first use) this node's keys, refusing unsafe key files.
pub fn load(ctx: &Ctx) -> anyhow::Result<Identity> {
    let dir = ctx.state_dir.join(IDENTITY_DIR);
    Identity::load_or_create(&dir)
        .with_context(|| format!("loading the node identity from {}", dir.display()))
}
