//! `grove audit verify`: walks the audit chain of every database in the
//! state directory and names the first broken link.

use anyhow::bail;
use clap::Subcommand;
use grove::api::dto;

use super::{Ctx, print_json};

#[derive(Subcommand)]
pub enum AuditCmd {
    /// Verify every audit chain.
    Verify,
}

pub fn run(cmd: AuditCmd, ctx: &Ctx) -> anyhow::Result<()> {
    match cmd {
        AuditCmd::Verify => {
            let store = ctx.store();
            let mut chains = Vec::new();
            for name in store.shard_names()? {
                let path = store.shard_path(&name);
                let result = store.open(&name).and_then(|s| s.audit_verify());
                chains.push(match result {
                    Ok(r) => dto::Chain {
                        file: path.display().to_string(),
                        events: r.events,
                        head: r.head.map(hex::encode),
                        ok: true,
                        error: None,
                    },
                    Err(e) => dto::Chain {
                        file: path.display().to_string(),
                        events: 0,
                        head: None,
                        ok: false,
                        error: Some(e.to_string()),
                    },
                });
            }
            let ok = chains.iter().all(|c| c.ok);
            if ctx.json {
                print_json(&dto::AuditReport { ok, chains })?;
            } else {
                for c in &chains {
                    match &c.error {
                        None => println!("ok: {} ({} events)", c.file, c.events),
                        Some(e) => println!("BROKEN: {}: {e}", c.file),
                    }
                }
                if chains.is_empty() {
                    println!("no audit chains yet");
                }
            }
            if !ok {
                bail!("an audit chain is broken");
            }
            Ok(())
        }
    }
}
