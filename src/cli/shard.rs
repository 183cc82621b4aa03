//! `grove shard list`: each shard's root (books.md section 7) and its
//! books; `grove shard compact`: give a shard's free pages back.

use std::io::{self, Write};

use clap::Subcommand;
use grove::api::dto;

use super::{Ctx, Show};

#[derive(Subcommand)]
pub enum ShardCmd {
    /// List shards with their roots and current books.
    List,
    /// Rewrite shards without their free pages (space left by removed
    /// books in shards made before removals reclaimed it themselves).
    Compact {
        /// Only this shard (default: every shard).
        shard: Option<String>,
    },
}

pub fn run(cmd: ShardCmd, ctx: &Ctx) -> anyhow::Result<()> {
    match cmd {
        ShardCmd::List => ctx.show(&ctx.books().shards()?),
        ShardCmd::Compact { shard } => ctx.show(&ctx.books().compact(shard.as_deref())?),
    }
}

impl Show for dto::Compacted {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.shards.is_empty() {
            writeln!(out, "no shards")?;
        }
        for s in &self.shards {
            writeln!(
                out,
                "{}  {} bytes -> {} bytes",
                s.name, s.bytes_before, s.bytes_after
            )?;
        }
        Ok(())
    }
}

impl Show for dto::ShardList {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.shards.is_empty() {
            writeln!(out, "no shards")?;
        }
        for s in &self.shards {
            writeln!(
                out,
                "{}  root {}",
                s.name,
                s.root.as_deref().unwrap_or("(none: no books)")
            )?;
            for b in &s.books {
                writeln!(out, "  {}  {} chunks  {}", b.key, b.count, b.root)?;
            }
        }
        Ok(())
    }
}
