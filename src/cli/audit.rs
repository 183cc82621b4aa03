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
            // Every database keeps its own chain: each shard, and the
            // databases at the top of the state directory (mesh state).
            let mut files: Vec<std::path::PathBuf> = store
                .shard_names()?
                .iter()
                .map(|n| store.shard_path(n))
                .collect();
            if let Ok(entries) = std::fs::read_dir(&ctx.state_dir) {
                let mut top: Vec<_> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "db") && p.is_file())
                    .collect();
                top.sort();
                files.extend(top);
            }
            let mut chains = Vec::new();
            for path in files {
                let file = path.display().to_string();
                chains.push(match grove::store::audit::verify_file(&path) {
                    Ok(r) => dto::Chain {
                        file,
                        events: r.events,
                        head: r.head.map(hex::encode),
                        ok: true,
                        error: None,
                    },
                    Err(e) => dto::Chain {
                        file,
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
