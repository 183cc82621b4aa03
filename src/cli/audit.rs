//! `grove audit verify`: walks the audit chain of every database in the
//! state directory and names the first broken link.

use std::io::{self, Write};

use anyhow::bail;
use clap::Subcommand;
use grove::api::dto;

use super::{Ctx, Show};

#[derive(Subcommand)]
pub enum AuditCmd {
    /// Verify every audit chain.
    Verify,
}

pub fn run(cmd: AuditCmd, ctx: &Ctx) -> anyhow::Result<()> {
    match cmd {
        AuditCmd::Verify => {
            let report = ctx.books().audit()?;
            ctx.show(&report)?;
            if !report.ok {
                bail!("an audit chain is broken");
            }
            Ok(())
        }
    }
}

impl Show for dto::AuditReport {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        for c in &self.chains {
            match &c.error {
                None => writeln!(out, "ok: {} ({} events)", c.file, c.events)?,
                Some(e) => writeln!(out, "BROKEN: {}: {e}", c.file)?,
            }
        }
        if self.chains.is_empty() {
            writeln!(out, "no audit chains yet")?;
        }
        Ok(())
    }
}
