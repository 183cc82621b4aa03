//! `grove moot start|list|show|export` (through the running node, which
//! hosts the moot) and `grove moot verify` of an export (offline: no daemon,
//! no network).

use std::path::Path;

use anyhow::bail;
use hyper::Method;

use super::Ctx;
use grove::api::dto;
use grove::moot::transcript::DecisionRecord;
use grove::moot::verify::{ChunkLookup, verify};

#[derive(clap::Args, Debug, Clone)]
pub struct StartArgs {
    /// A tree as PEER:KEY (PEER: `self`, a member's name or peer id);
    /// repeatable, in speaking order.
    #[arg(long = "tree")]
    pub trees: Vec<String>,
    /// Shorthand for the first tree.
    #[arg(long)]
    pub a: Option<String>,
    /// Shorthand for the second tree.
    #[arg(long)]
    pub b: Option<String>,
    #[arg(long)]
    pub topic: Option<String>,
    #[arg(long)]
    pub turns: Option<u32>,
    #[arg(short = 'k', long = "k")]
    pub k: Option<usize>,
    #[arg(long)]
    pub max_tokens: Option<u32>,
}

pub fn start(args: &StartArgs, ctx: &Ctx) -> anyhow::Result<()> {
    let client = ctx.daemon()?;
    let mut trees: Vec<String> = args.a.iter().chain(args.b.iter()).cloned().collect();
    trees.extend(args.trees.iter().cloned());
    if trees.len() < 2 {
        bail!("a moot needs two trees: --a PEER:KEY --b PEER:KEY (or --tree twice)");
    }
    let mut q = form_urlencoded::Serializer::new(String::new());
    q.append_pair("trees", &trees.join("\n"));
    if let Some(t) = &args.topic {
        q.append_pair("topic", t);
    }
    if let Some(t) = args.turns {
        q.append_pair("turns", &t.to_string());
    }
    if let Some(k) = args.k {
        q.append_pair("k", &k.to_string());
    }
    if let Some(m) = args.max_tokens {
        q.append_pair("max_tokens", &m.to_string());
    }
    let started: dto::MootStarted = client.request(
        Method::POST,
        &format!("/v1/moot/start?{}", q.finish()),
        Vec::new(),
    )?;
    if ctx.json {
        return super::print_json(&started);
    }
    println!("{}", started.id);
    eprintln!(
        "moot {} started; follow it with `grove moot show {}`",
        started.id, started.id
    );
    Ok(())
}

pub fn list(ctx: &Ctx) -> anyhow::Result<()> {
    let client = ctx.daemon()?;
    let list: dto::MootList = client.request(Method::GET, "/v1/moots", Vec::new())?;
    if ctx.json {
        return super::print_json(&list);
    }
    if list.moots.is_empty() {
        println!("no moots hosted here");
    }
    for m in &list.moots {
        let trees: Vec<String> = m.trees.iter().map(|t| t.key.clone()).collect();
        println!(
            "{}  {:8}  {}/{} turns  {}{}",
            m.id,
            m.state,
            m.turns_done,
            m.turns,
            trees.join(" ⇄ "),
            m.reason
                .as_ref()
                .map(|r| format!("  ({r})"))
                .unwrap_or_default()
        );
    }
    Ok(())
}

fn url(path: &str, id: &str) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    q.append_pair("id", id);
    format!("{path}?{}", q.finish())
}

pub fn show(id: &str, ctx: &Ctx) -> anyhow::Result<()> {
    let client = ctx.daemon()?;
    let v: dto::MootView = client.request(Method::GET, &url("/v1/moot/show", id), Vec::new())?;
    if ctx.json {
        return super::print_json(&v);
    }
    println!(
        "moot {}  {}  {}/{} turns",
        v.id, v.state, v.turns_done, v.turns
    );
    if let Some(r) = &v.reason {
        println!("reason: {r}");
    }
    for t in &v.trees {
        println!("  {} ({}) on {}", t.key, t.title, t.peer_id);
    }
    if let Some(t) = &v.transcript {
        for u in &t.utterances {
            println!();
            print_turn(u.turn, &u.title, &u.text, u.grounded, u.decision.as_ref());
        }
    }
    Ok(())
}

/// One turn as `moot show` and `moot watch` print it; a pass shows its
/// node's reason instead of text.
fn print_turn(
    turn: u32,
    title: &str,
    text: &str,
    grounded: bool,
    decision: Option<&DecisionRecord>,
) {
    match decision.filter(|d| d.action == "pass") {
        Some(d) => println!(
            "── turn {turn} · {title} passes ──\n   {} ({}, {} ms)\n",
            d.reason, d.policy, d.ms
        ),
        None => println!(
            "── turn {turn} · {title} ──\n{text}\n   {}\n",
            if grounded { "grounded" } else { "NOT grounded" }
        ),
    }
}

pub fn resume(id: &str, ctx: &Ctx) -> anyhow::Result<()> {
    let client = ctx.daemon()?;
    let r: dto::MootStarted =
        client.request(Method::POST, &url("/v1/moot/resume", id), Vec::new())?;
    if ctx.json {
        return super::print_json(&r);
    }
    println!(
        "moot {} resumed; follow it with `grove moot watch {}`",
        r.id, r.id
    );
    Ok(())
}

pub fn watch(id: &str, ctx: &Ctx) -> anyhow::Result<()> {
    let client = ctx.daemon()?;
    let mut printed = 0usize;
    loop {
        let v: dto::MootView =
            client.request(Method::GET, &url("/v1/moot/show", id), Vec::new())?;
        for line in v.lines.iter().skip(printed) {
            if ctx.json {
                println!("{}", serde_json::to_string(line)?);
            } else {
                print_turn(
                    line.turn,
                    &line.title,
                    &line.text,
                    line.grounded,
                    line.decision.as_ref(),
                );
            }
        }
        printed = v.lines.len();
        if v.state != "running" {
            if !ctx.json {
                match &v.reason {
                    Some(r) => println!("moot {} is {}: {r}", v.id, v.state),
                    None => println!("moot {} is {}", v.id, v.state),
                }
            }
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

pub fn export(id: &str, ctx: &Ctx) -> anyhow::Result<()> {
    let client = ctx.daemon()?;
    let e: dto::MootExport =
        client.request(Method::GET, &url("/v1/moot/export", id), Vec::new())?;
    println!("{}", serde_json::to_string_pretty(&e)?);
    Ok(())
}

/// Whether a file is a moot export rather than a plain transcript.
pub fn is_export(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .is_ok_and(|v| v["format"] == grove::moot::export::EXPORT_FORMAT)
}

/// `moot verify` of an export: the host's signature, the roster and
/// announcements, every signed turn, then the transcript's own re-check.
pub fn verify_export(
    file: &Path,
    text: &str,
    expect_mesh: Option<&str>,
    expect_roster: Option<&str>,
    store: &mut dyn ChunkLookup,
    ctx: &Ctx,
) -> anyhow::Result<()> {
    let export: dto::MootExport = serde_json::from_str(text)
        .map_err(|e| anyhow::anyhow!("{}: not a moot export: {e}", file.display()))?;
    let (vouched, mut mismatches) = grove::moot::export::verify_signed_export(&export.signed)?;
    if export.transcript != vouched.transcript {
        mismatches.push(grove::moot::verify::Mismatch {
            turn: None,
            what: "the readable transcript differs from the signed one".into(),
        });
    }
    if export.mesh_id != vouched.mesh_id || export.roster_hash != vouched.roster_hash {
        mismatches.push(grove::moot::verify::Mismatch {
            turn: None,
            what: "the mesh id or roster hash shown differs from the signed roster".into(),
        });
    }
    mismatches.extend(verify(&vouched.transcript, Some(store))?);
    if let Some(m) = expect_mesh
        && m != vouched.mesh_id
    {
        mismatches.push(grove::moot::verify::Mismatch {
            turn: None,
            what: format!("vouched for by mesh {}, not {m}", vouched.mesh_id),
        });
    }
    if let Some(r) = expect_roster
        && r != vouched.roster_hash
    {
        mismatches.push(grove::moot::verify::Mismatch {
            turn: None,
            what: format!("vouched for by roster {}, not {r}", vouched.roster_hash),
        });
    }
    if ctx.json {
        let list: Vec<serde_json::Value> = mismatches
            .iter()
            .map(|m| serde_json::json!({"turn": m.turn, "what": m.what}))
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "file": file.display().to_string(),
                "utterances": vouched.transcript.utterances.len(),
                "mesh_id": vouched.mesh_id,
                "roster_hash": vouched.roster_hash,
                "host": vouched.host,
                "ok": mismatches.is_empty(),
                "mismatches": list,
            })
        );
    } else {
        println!(
            "vouched for by mesh {} (roster {}), hosted by {}",
            vouched.mesh_id, vouched.roster_hash, vouched.host
        );
        for m in &mismatches {
            println!("MISMATCH {m}");
        }
        if mismatches.is_empty() {
            println!(
                "ok: {} signed turns (signatures, proofs, chain) and {} utterances re-graded, re-snapped and hashed; stats agree",
                vouched.turns,
                vouched.transcript.utterances.len()
            );
        }
    }
    if !mismatches.is_empty() {
        bail!("{} mismatches in {}", mismatches.len(), file.display());
    }
    Ok(())
}
