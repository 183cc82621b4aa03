//! `grove audit verify`: walks the audit chain of every database in the
//! state directory and names the first broken link.

use anyhow::bail;
use clap::Subcommand;

use super::{Ctx, print_json};

#[derive(Subcommand)]
pub enum AuditCmd {
    /// Verify every audit chain.
    Verify,
}

pub fn run(cmd: AuditCmd, ctx: &Ctx) -> anyhow::Result<()> {
    match cmd {
        AuditCmd::Verify => {
            let report = ctx.books().audit()?;
            if ctx.json {
                print_json(&report)?;
            } else {
                for c in &report.chains {
                    match &c.error {
                        None => println!("ok: {} ({} events)", c.file, c.events),
                        Some(e) => println!("BROKEN: {}: {e}", c.file),
                    }
                }
                if report.chains.is_empty() {
                    println!("no audit chains yet");
                }
            }
            if !report.ok {
                bail!("an audit chain is broken");
            }
            Ok(())
        }
    }
}
