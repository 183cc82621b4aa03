//! `grove shard list`: each shard's root (books.md section 7) and its books.

use std::io::{self, Write};

use clap::Subcommand;
use grove::api::dto;

use super::{Ctx, Show};

#[derive(Subcommand)]
pub enum ShardCmd {
    /// List shards with their roots and current books.
    List,
}

pub fn run(cmd: ShardCmd, ctx: &Ctx) -> anyhow::Result<()> {
    match cmd {
        ShardCmd::List => ctx.show(&ctx.books().shards()?),
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
