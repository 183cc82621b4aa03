//! `grove peers` and `grove roots`: who this node knows and is connected
//! to, and every member's latest announced shard roots (daemon only).

use std::io::{self, Write};

use hyper::Method;

use super::{Ctx, Show};
use grove::api::dto;
use grove::api::routes;
use grove::mesh::names::{Escaped, escaped};

pub fn peers(ctx: &Ctx) -> anyhow::Result<()> {
    let client = ctx.daemon()?;
    let list: dto::PeerList = client.request(Method::GET, routes::PEERS, Vec::new())?;
    ctx.show(&list)
}

pub fn roots(ctx: &Ctx) -> anyhow::Result<()> {
    let client = ctx.daemon()?;
    let view: dto::RootsView = client.request(Method::GET, routes::ROOTS, Vec::new())?;
    ctx.show(&view)
}

impl Show for dto::PeerList {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.peers.is_empty() {
            writeln!(out, "no peers")?;
        }
        for p in &self.peers {
            let shown = p.path.clone().or_else(|| p.link.map(|l| l.to_string()));
            let link = match (shown, p.rtt_ms) {
                (Some(link), Some(rtt)) => format!("{link} {rtt} ms"),
                (Some(link), None) => link,
                _ => "-".into(),
            };
            writeln!(
                out,
                "{}  {:16} {:10} {:12} {:16} {}",
                p.peer_id,
                escaped(p.name.as_deref().unwrap_or("-")),
                if p.member { "member" } else { "not member" },
                match (p.connected, p.member && !p.admitted) {
                    // A new member's connection from before its add: the
                    // members-only protocols wait for its replacement.
                    (true, true) => "not admitted",
                    (true, false) => "connected",
                    (false, _) => "offline",
                },
                link,
                p.addresses.join(" ")
            )?;
        }
        Ok(())
    }
}

impl Show for dto::RootsView {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.roots.is_empty() {
            writeln!(out, "no announcements yet")?;
        }
        for m in &self.roots {
            // Names, shard names, keys and titles are what members announced.
            writeln!(out, "{} ({})  seq {}", Escaped(&m.name), m.peer_id, m.seq)?;
            for s in &m.shards {
                writeln!(
                    out,
                    "  shard {}  root {}",
                    Escaped(&s.name),
                    s.root.as_deref().unwrap_or("-")
                )?;
                for b in &s.books {
                    writeln!(
                        out,
                        "    {}  v{}  {} chunks  {}  {}",
                        Escaped(&b.key),
                        b.version,
                        b.count,
                        b.root,
                        Escaped(b.title.as_deref().unwrap_or("-"))
                    )?;
                }
            }
        }
        Ok(())
    }
}
