//! `grove node doctor`: how the running node is reached and reaches its
//! members (reachability and why, addresses, relay slots, links and
//! round-trip times), like `tailscale netcheck`.

use std::io::{self, Write};

use grove::api::dto;
use grove::api::routes;

use super::show::when;
use super::{Ctx, Show};

pub fn run(ctx: &Ctx) -> anyhow::Result<()> {
    let doctor: dto::Doctor =
        ctx.daemon()?
            .request(hyper::Method::GET, routes::NODE_DOCTOR, Vec::new())?;
    ctx.show(&doctor)
}

fn list(out: &mut dyn Write, label: &str, items: &[String]) -> io::Result<()> {
    if items.is_empty() {
        writeln!(out, "{label:12} none")
    } else {
        for (i, item) in items.iter().enumerate() {
            writeln!(out, "{:12} {item}", if i == 0 { label } else { "" })?;
        }
        Ok(())
    }
}

impl Show for dto::Doctor {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let now = grove::now_ms();
        writeln!(out, "reachability {}: {}", self.reachability, self.why)?;
        writeln!(out, "nat mapping  {}", self.mapping)?;
        list(out, "listening", &self.listen)?;
        list(out, "seen at", &self.observed)?;
        list(out, "public at", &self.external)?;
        list(out, "advertised", &self.advertised)?;
        if self.reservations.is_empty() {
            writeln!(out, "relays       none in use")?;
        }
        for r in &self.reservations {
            let renewed = r
                .renewed_ms
                .map(|t| format!(", renewed {}", when(t, now)))
                .unwrap_or_default();
            writeln!(
                out,
                "relay        {} at {}: {} since {}{renewed}",
                r.relay,
                r.address,
                r.state,
                when(r.since_ms, now)
            )?;
        }
        if self.members.is_empty() {
            writeln!(out, "members      none besides this node")?;
        }
        for m in &self.members {
            let link = match (&m.path, &m.link, &m.address) {
                (Some(path), _, Some(addr)) => format!("{path} via {addr}"),
                (None, Some(link), Some(addr)) => format!("{link} via {addr}"),
                _ => "not connected".to_string(),
            };
            let rtt = m
                .rtt_ms
                .map(|r| format!("  rtt {r} ms"))
                .unwrap_or_default();
            writeln!(out, "member       {:16} {}  {link}{rtt}", m.name, m.peer_id)?;
        }
        for (name, n) in &self.counters {
            writeln!(out, "  {name:40} {n}")?;
        }
        Ok(())
    }
}
