//! `grove moot start|list|show|watch|resume|export`: moots hosted by the
//! running node between books held on members, all through the daemon.

use std::cell::{Cell, RefCell};
use std::io::{self, Write};

use anyhow::bail;
use hyper::Method;
use serde::Serialize;

use crate::cli::{Ctx, Show, print_json};
use grove::api::dto;
use grove::api::routes;
use grove::moot::transcript::DecisionRecord;

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
    #[command(flatten)]
    pub moot: super::MootFlags,
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
    if let Some(t) = &args.moot.topic {
        q.append_pair("topic", t);
    }
    if let Some(t) = args.moot.turns {
        q.append_pair("turns", &t.to_string());
    }
    if let Some(k) = args.moot.k {
        q.append_pair("k", &k.to_string());
    }
    if let Some(m) = args.moot.max_tokens {
        q.append_pair("max_tokens", &m.to_string());
    }
    let started: dto::MootStarted = client.request(
        Method::POST,
        &format!("{}?{}", routes::MOOT_START, q.finish()),
        Vec::new(),
    )?;
    ctx.show(&Started(started))
}

pub fn list(ctx: &Ctx) -> anyhow::Result<()> {
    let client = ctx.daemon()?;
    let list: dto::MootList = client.request(Method::GET, routes::MOOTS, Vec::new())?;
    ctx.show(&list)
}

fn url(path: &str, id: &str) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    q.append_pair("id", id);
    format!("{path}?{}", q.finish())
}

pub fn show(id: &str, ctx: &Ctx) -> anyhow::Result<()> {
    let client = ctx.daemon()?;
    let v: dto::MootView = client.request(Method::GET, &url(routes::MOOT_SHOW, id), Vec::new())?;
    ctx.show(&v)
}

/// One turn as `moot show` and `moot watch` print it; a pass shows its
/// node's reason instead of text.
fn write_turn(
    out: &mut dyn Write,
    turn: u32,
    title: &str,
    text: &str,
    grounded: bool,
    decision: Option<&DecisionRecord>,
) -> io::Result<()> {
    match decision.filter(|d| d.action == "pass") {
        Some(d) => writeln!(
            out,
            "── turn {turn} · {title} passes ──\n   {} ({}, {} ms)\n",
            d.reason, d.policy, d.ms
        ),
        None => writeln!(
            out,
            "── turn {turn} · {title} ──\n{text}\n   {}\n",
            if grounded { "grounded" } else { "NOT grounded" }
        ),
    }
}

pub fn resume(id: &str, ctx: &Ctx) -> anyhow::Result<()> {
    let client = ctx.daemon()?;
    let r: dto::MootStarted =
        client.request(Method::POST, &url(routes::MOOT_RESUME, id), Vec::new())?;
    ctx.show(&Resumed(r))
}

/// `grove moot watch`: the turns so far, then each turn as it lands, read
/// from the node's event stream (nothing polls), until the moot finishes
/// or pauses. The stream is opened before the turns so far are asked for,
/// so no turn falls between the two.
pub fn watch(id: &str, ctx: &Ctx) -> anyhow::Result<()> {
    let client = ctx.daemon()?;
    let watch = Watch::new(ctx);
    let mut q = form_urlencoded::Serializer::new(String::new());
    q.append_pair("moot", id);
    let stream = format!("{}?{}", routes::EVENTS, q.finish());
    let snapshot = url(routes::MOOT_SHOW, id);
    let ended = client.stream_after(
        &stream,
        Some((snapshot.as_str(), |v| watch.so_far(v))),
        |line| watch.on_event(line),
    );
    if let Some(e) = watch.failed.into_inner() {
        return Err(e);
    }
    if let Some(why) = watch.dropped.into_inner() {
        bail!("{}", grove::mesh::names::Escaped(&why));
    }
    if let Some((state, reason)) = watch.end.into_inner() {
        if !ctx.json {
            match reason {
                Some(r) => println!("moot {id} is {state}: {r}"),
                None => println!("moot {id} is {state}"),
            }
        }
        return Ok(());
    }
    match ended {
        Ok(grove::api::client::StreamEnd::Caller) => Ok(()),
        // Said as such, so a `watch | handler` pipeline can tell it from
        // the moot's end (the moot resumes with the daemon).
        Ok(grove::api::client::StreamEnd::Daemon) => Err(client.stream_ended(None).into()),
        Err(e) if e.kind == grove::api::ErrorKind::Unavailable => {
            Err(client.stream_ended(Some(e)).into())
        }
        Err(e) => Err(e.into()),
    }
}

/// What `moot watch` has printed and seen so far. Its answers (`true`: go
/// on reading) are given to the snapshot and to the stream's lines, which
/// the client calls in turn, hence the cells.
struct Watch<'a> {
    ctx: &'a Ctx,
    /// Lines printed so far: the index of the next turn to print.
    printed: Cell<usize>,
    /// How the moot ended (its state and reason), or why the stream did.
    end: RefCell<Option<(String, Option<String>)>>,
    dropped: RefCell<Option<String>>,
    failed: RefCell<Option<anyhow::Error>>,
}

impl<'a> Watch<'a> {
    fn new(ctx: &'a Ctx) -> Self {
        Watch {
            ctx,
            printed: Cell::new(0),
            end: RefCell::new(None),
            dropped: RefCell::new(None),
            failed: RefCell::new(None),
        }
    }

    fn print(&self, line: &dto::MootLine) -> bool {
        match self.ctx.show_line(line) {
            Ok(()) => true,
            Err(e) => {
                *self.failed.borrow_mut() = Some(e);
                false
            }
        }
    }

    /// The turns so far; a moot no longer running ends the watch.
    fn so_far(&self, v: dto::MootView) -> bool {
        for line in &v.lines {
            if !self.print(line) {
                return false;
            }
        }
        self.printed.set(v.lines.len());
        if v.state != "running" {
            *self.end.borrow_mut() = Some((v.state, v.reason));
            return false;
        }
        true
    }

    /// One line of the event stream: a new turn is printed; the moot's end
    /// or this watcher's drop ends the watch.
    fn on_event(&self, line: &[u8]) -> bool {
        let e = match serde_json::from_slice::<dto::Event>(line) {
            Ok(dto::Event::Moot(e)) => e,
            Ok(dto::Event::Mesh(e)) if e.event == "watch_dropped" => {
                *self.dropped.borrow_mut() = Some(e.detail);
                return false;
            }
            _ => return true,
        };
        match e.event.as_str() {
            "moot_turn" => {
                let index = e.turn.map_or(usize::MAX, |t| t as usize);
                // A turn the snapshot already showed is not printed twice.
                if index < self.printed.get() {
                    return true;
                }
                let Some(line) = e.line() else { return true };
                self.printed.set(index.saturating_add(1));
                self.print(&line)
            }
            "moot_finished" => {
                *self.end.borrow_mut() = Some(("finished".into(), None));
                false
            }
            "moot_paused" => {
                *self.end.borrow_mut() = Some(("paused".into(), e.reason));
                false
            }
            _ => true,
        }
    }
}

pub fn export(id: &str, ctx: &Ctx) -> anyhow::Result<()> {
    let client = ctx.daemon()?;
    let e: dto::MootExport =
        client.request(Method::GET, &url(routes::MOOT_EXPORT, id), Vec::new())?;
    print_json(&e)
}

/// `moot start`: the new moot's id (same JSON as the daemon's answer).
#[derive(Serialize)]
#[serde(transparent)]
struct Started(dto::MootStarted);

/// `moot resume`: the resumed moot's id.
#[derive(Serialize)]
#[serde(transparent)]
struct Resumed(dto::MootStarted);

impl Show for Started {
    /// The id alone on stdout, so `$(grove moot start …)` is the id.
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "{}", self.0.id)
    }

    fn note(&self, err: &mut dyn Write) -> io::Result<()> {
        writeln!(
            err,
            "moot {} started; follow it with `grove moot show {}`",
            self.0.id, self.0.id
        )
    }
}

impl Show for Resumed {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "moot {} resumed; follow it with `grove moot watch {}`",
            self.0.id, self.0.id
        )
    }
}

impl Show for dto::MootList {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.moots.is_empty() && self.damaged.is_empty() {
            writeln!(out, "no moots hosted here")?;
        }
        for d in &self.damaged {
            writeln!(
                out,
                "damaged  {}: {} (left in place; restore it from a backup)",
                d.path, d.error
            )?;
        }
        for m in &self.moots {
            let trees: Vec<&str> = m.trees.iter().map(|t| t.key.as_str()).collect();
            writeln!(
                out,
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
            )?;
        }
        Ok(())
    }
}

impl Show for dto::MootView {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "moot {}  {}  {}/{} turns",
            self.id, self.state, self.turns_done, self.turns
        )?;
        if let Some(r) = &self.reason {
            writeln!(out, "reason: {r}")?;
        }
        for t in &self.trees {
            writeln!(
                out,
                "  {} on {}",
                grove::moot::book_label(&t.key, &t.title),
                t.peer_id
            )?;
        }
        if let Some(t) = &self.transcript {
            for u in &t.utterances {
                writeln!(out)?;
                write_turn(
                    out,
                    u.turn,
                    &u.title,
                    &u.text,
                    u.grounded,
                    u.decision.as_ref(),
                )?;
            }
        }
        Ok(())
    }
}

/// One accepted turn as `moot watch` prints it (one JSON line with --json).
impl Show for dto::MootLine {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        write_turn(
            out,
            self.turn,
            &self.title,
            &self.text,
            self.grounded,
            self.decision.as_ref(),
        )
    }
}
