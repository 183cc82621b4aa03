//! `grove audit verify`: walks the audit chain of every database in the
//! state directory and names the first broken link, and runs each one's
//! integrity check, naming the damage and the way out.

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
            let damaged = report.chains.iter().filter(|c| c.damage.is_some()).count();
            if damaged > 0 {
                bail!("{damaged} database(s) damaged");
            }
            let broken = report.chains.iter().filter(|c| c.broken).count();
            let unread = report.chains.iter().filter(|c| !c.ok && !c.broken).count();
            if broken > 0 {
                bail!("{broken} audit chain(s) broken");
            }
            if unread > 0 {
                bail!("{unread} database(s) could not be read, so their chains were not checked");
            }
            Ok(())
        }
    }
}

impl Show for dto::AuditReport {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        for c in &self.chains {
            if let Some(damage) = &c.damage {
                writeln!(out, "DAMAGED: {damage}")?;
            }
            match &c.error {
                None => writeln!(
                    out,
                    "ok: {} ({} events{})",
                    c.file,
                    c.events,
                    if c.immutable {
                        "; read from the main file only, the directory is not writable here"
                    } else {
                        ""
                    }
                )?,
                Some(e) if c.broken => writeln!(out, "BROKEN: {}: {e}", c.file)?,
                Some(e) => writeln!(out, "UNREADABLE: {}: {e}", c.file)?,
            }
        }
        if self.chains.is_empty() {
            writeln!(out, "no audit chains yet")?;
        }
        Ok(())
    }
}
