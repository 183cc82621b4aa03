//! `grove shard list`: each shard's root (books.md section 7) and its books.

use clap::Subcommand;

use super::{Ctx, print_json};

#[derive(Subcommand)]
pub enum ShardCmd {
    /// List shards with their roots and current books.
    List,
}

pub fn run(cmd: ShardCmd, ctx: &Ctx) -> anyhow::Result<()> {
    match cmd {
        ShardCmd::List => {
            let list = ctx.books().shards()?;
            if ctx.json {
                return print_json(&list);
            }
            if list.shards.is_empty() {
                println!("no shards");
            }
            for s in &list.shards {
                println!(
                    "{}  root {}",
                    s.name,
                    s.root.as_deref().unwrap_or("(none: no books)")
                );
                for b in &s.books {
                    println!("  {}  {} chunks  {}", b.key, b.count, b.root);
                }
            }
            Ok(())
        }
    }
}
