//! `grove peers` and `grove roots`: who this node knows and is connected
//! to, and every member's latest announced shard roots (daemon only).

use hyper::Method;

use super::Ctx;
use grove::api::dto;

pub fn peers(ctx: &Ctx) -> anyhow::Result<()> {
    let client = ctx.daemon()?;
    let list: dto::PeerList = client.request(Method::GET, "/v1/peers", Vec::new())?;
    if ctx.json {
        return super::print_json(&list);
    }
    if list.peers.is_empty() {
        println!("no peers");
    }
    for p in &list.peers {
        println!(
            "{}  {:16} {:10} {:12} {}",
            p.peer_id,
            p.name.as_deref().unwrap_or("-"),
            if p.member { "member" } else { "not member" },
            if p.connected { "connected" } else { "offline" },
            p.addresses.join(" ")
        );
    }
    Ok(())
}

pub fn roots(ctx: &Ctx) -> anyhow::Result<()> {
    let client = ctx.daemon()?;
    let view: dto::RootsView = client.request(Method::GET, "/v1/roots", Vec::new())?;
    if ctx.json {
        return super::print_json(&view);
    }
    if view.roots.is_empty() {
        println!("no announcements yet");
    }
    for m in &view.roots {
        println!("{} ({})  seq {}", m.name, m.peer_id, m.seq);
        for s in &m.shards {
            println!(
                "  shard {}  root {}",
                s.name,
                s.root.as_deref().unwrap_or("-")
            );
            for b in &s.books {
                println!(
                    "    {}  v{}  {} chunks  {}  {}",
                    b.key,
                    b.version,
                    b.count,
                    b.root,
                    b.title.as_deref().unwrap_or("-")
                );
            }
        }
    }
    Ok(())
}

pub fn backup(ctx: &Ctx, dest: &std::path::Path) -> anyhow::Result<()> {
    let report = grove::backup::backup(&ctx.state_dir, dest)?;
    let done = dto::BackupDone {
        dest: report.dest.display().to_string(),
        files: report.files,
        bytes: report.bytes,
    };
    if ctx.json {
        return super::print_json(&done);
    }
    println!(
        "backed up {} files ({} bytes) to {}",
        done.files.len(),
        done.bytes,
        done.dest
    );
    Ok(())
}
