//! `grove shard list`: each shard's root (books.md section 7) and its books.

use clap::Subcommand;
use grove::api::dto;

use super::{Ctx, print_json};

#[derive(Subcommand)]
pub enum ShardCmd {
    /// List shards with their roots and current books.
    List,
}

pub fn run(cmd: ShardCmd, ctx: &Ctx) -> anyhow::Result<()> {
    match cmd {
        ShardCmd::List => {
            let mut shards = Vec::new();
            for shard in ctx.store().open_all()? {
                let books = shard.books(false)?;
                shards.push(dto::Shard {
                    name: shard.name().to_string(),
                    root: shard.root()?.map(hex::encode),
                    books: books
                        .iter()
                        .map(|b| dto::ShardBook {
                            key: b.key.clone(),
                            root: hex::encode(b.root),
                            count: b.count,
                        })
                        .collect(),
                });
            }
            if ctx.json {
                return print_json(&dto::ShardList { shards });
            }
            if shards.is_empty() {
                println!("no shards");
            }
            for s in &shards {
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
