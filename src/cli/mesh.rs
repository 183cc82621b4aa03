//! `grove mesh ...`: membership through the running daemon (invite, join,
//! status, propose, vote, proposals, leave). `mesh init` also works with no
//! daemon, directly on `mesh.db` under the state lock.

use std::io::{self, Write};

use anyhow::Context;
use hyper::Method;

use super::{Ctx, Show};
use grove::api::ErrorKind;
use grove::api::client::{Client, StreamEnd};
use grove::api::dto;
use grove::api::routes;
use grove::mesh::names::{Escaped, escaped};
use grove::mesh::roster::QuorumRule;
use grove::mesh::state::MeshState;
use grove::mesh::store::{MeshStore, StateLock};

#[derive(Debug, clap::Subcommand)]
pub enum MeshCmd {
    /// Create a new mesh (epoch 0) with this node as its only member.
    Init {
        /// The mesh's name, shown to every member (`--as` names this node).
        #[arg(long, value_name = "MESH_NAME")]
        name: String,
        /// Quorum rule as N/D: yes * D > members * N (default 1/2, a strict majority).
        #[arg(long, default_value = "1/2")]
        quorum: String,
        /// This node's display name in the roster (default: node.name, else `founder`).
        #[arg(long = "as", value_name = "DISPLAY_NAME")]
        member_name: Option<String>,
    },
    /// Create a single-use invite (prints its text), or revoke or list invites.
    #[command(args_conflicts_with_subcommands = true)]
    Invite {
        #[command(subcommand)]
        cmd: Option<InviteCmd>,
        /// Lifetime, e.g. 30m, 24h, 7d (default: mesh.invite_ttl_secs).
        #[arg(long)]
        ttl: Option<String>,
        /// A note kept with the invite (who it is for; at most 200 characters).
        #[arg(long, default_value = "")]
        note: String,
        /// Ask the members to approve the invite in advance: once that
        /// approval is committed, a joiner presenting it is added without a
        /// further vote (single use, until the invite expires).
        #[arg(long)]
        approved: bool,
        /// With --approved: the display name the joiner must use.
        #[arg(long, value_name = "DISPLAY_NAME", requires = "approved")]
        approved_name: Option<String>,
    },
    /// Join a mesh with an invite; waits for the members' vote in the background.
    Join {
        /// The invite text a member printed with `grove mesh invite`.
        invite: String,
        /// This node's display name in the roster (default: node.name, else the host name).
        #[arg(long = "as", value_name = "DISPLAY_NAME")]
        member_name: Option<String>,
        /// Old spelling of `--as`: refused with a pointer (`--name` names the mesh on `mesh init`).
        #[arg(long, hide = true)]
        name: Option<String>,
    },
    /// The mesh, its members (online or not) and open proposals.
    Status,
    /// Propose a change (your proposal counts as your yes).
    #[command(subcommand)]
    Propose(ProposeCmd),
    /// Vote on an open proposal (its id or a unique prefix).
    Vote {
        /// The proposal's id or a unique prefix of it (see `grove mesh proposals`).
        proposal: String,
        /// yes or no.
        choice: String,
    },
    /// Withdraw your own open proposal (its id or a unique prefix); every
    /// vote on it is free at once.
    Withdraw {
        /// The proposal's id or a unique prefix (see `grove mesh proposals`).
        proposal: String,
    },
    /// Open proposals and their votes.
    Proposals,
    /// Stream membership events as they happen (proposals, votes, commits,
    /// rejections, withdrawals, joins, removals, members online/offline);
    /// with --json one object per line. Runs until interrupted or the node
    /// stops.
    Watch,
    /// Propose removing this node from the mesh.
    Leave {
        /// Instead, give up a mesh whose `mesh.db` is lost (missing or empty
        /// beside this node's member mark), with no daemon running: the
        /// node then starts as a node of no mesh. Restoring a backup keeps
        /// the membership; this does not.
        #[arg(long)]
        forget: bool,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum InviteCmd {
    /// Revoke an invite by id.
    Revoke {
        /// The invite's id or a unique prefix of it (see `grove mesh invite list`).
        id: String,
    },
    /// The invites this node issued.
    List,
}

#[derive(Debug, clap::Subcommand)]
pub enum ProposeCmd {
    /// Remove a member: peer id, unique prefix, or name.
    Kick {
        /// The member's peer id, a unique prefix of it, or its display name.
        peer: String,
    },
    /// A fresh epoch secret, same members.
    Rotate,
    /// Change the quorum rule (N/D, above one half).
    Quorum {
        /// The new rule as N/D, e.g. 2/3: a change needs yes * D > members * N.
        rule: String,
    },
    /// Move a mesh made before protocol 1.3 to commits that sign their
    /// envelopes' hashes, so no member keeps an envelope its own key opens
    /// (docs/mesh-protocol.md §7). Every member must run 1.3 first.
    Upgrade,
}

/// An invite's lifetime from `--ttl`: positive, at most the longest an
/// invite may stay open.
fn invite_ttl_secs(text: &str) -> anyhow::Result<u64> {
    let secs = parse_duration_secs(text)?;
    let max = grove::mesh::MAX_INVITE_TTL_SECS;
    if secs == 0 {
        anyhow::bail!("--ttl {text}: an invite needs a lifetime above 0");
    }
    if secs > max {
        anyhow::bail!(
            "--ttl {text}: at most {} days ({max} s), as for mesh.invite_ttl_secs",
            max / 86_400
        );
    }
    Ok(secs)
}

/// Parses `90s`, `30m`, `24h`, `7d` or plain seconds.
pub fn parse_duration_secs(text: &str) -> anyhow::Result<u64> {
    let text = text.trim();
    let (digits, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: u64 = digits
        .parse()
        .with_context(|| format!("duration `{text}`: expected e.g. 30m, 24h or 7d"))?;
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        other => anyhow::bail!("duration `{text}`: unknown unit `{other}` (s, m, h or d)"),
    };
    Ok(n.saturating_mul(scale))
}

fn q(params: &[(&str, Option<String>)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in params {
        if let Some(v) = v {
            s.append_pair(k, v);
        }
    }
    s.finish()
}

fn post<T: serde::de::DeserializeOwned>(
    client: &Client,
    path: &str,
    params: &[(&str, Option<String>)],
) -> anyhow::Result<T> {
    Ok(client.request(Method::POST, &format!("{path}?{}", q(params)), Vec::new())?)
}

fn get<T: serde::de::DeserializeOwned>(client: &Client, path: &str) -> anyhow::Result<T> {
    Ok(client.request(Method::GET, path, Vec::new())?)
}

pub fn run(cmd: MeshCmd, ctx: &Ctx) -> anyhow::Result<()> {
    if let Some(done) = run_without_daemon(&cmd, ctx) {
        return done;
    }
    let client = ctx.daemon()?;
    match cmd {
        MeshCmd::Init {
            name,
            quorum,
            member_name,
        } => ctx.show(&post::<dto::MeshStatus>(
            &client,
            routes::MESH_INIT,
            &[
                ("name", Some(name)),
                ("quorum", Some(quorum)),
                ("as", member_name),
            ],
        )?),
        MeshCmd::Invite {
            cmd,
            ttl,
            note,
            approved,
            approved_name,
        } => invite(ctx, &client, cmd, ttl, note, approved, approved_name),
        MeshCmd::Join {
            invite,
            member_name,
            name,
        } => join(ctx, &client, invite, member_name, name),
        MeshCmd::Status => status(ctx, &client),
        MeshCmd::Propose(p) => propose(ctx, &client, p),
        MeshCmd::Leave { .. } => {
            ctx.show(&post::<dto::Proposed>(&client, routes::MESH_LEAVE, &[])?)
        }
        MeshCmd::Vote { proposal, choice } => ctx.show(&post::<dto::Voted>(
            &client,
            routes::MESH_VOTE,
            &[("id", Some(proposal)), ("choice", Some(choice))],
        )?),
        MeshCmd::Withdraw { proposal } => ctx.show(&post::<dto::Withdrawn>(
            &client,
            routes::MESH_WITHDRAW,
            &[("id", Some(proposal))],
        )?),
        MeshCmd::Proposals => ctx.show(&get::<dto::ProposalList>(&client, routes::MESH_PROPOSALS)?),
        MeshCmd::Watch => watch(ctx, &client),
    }
}

/// The commands that work with no daemon: `mesh init` when none runs (on
/// `mesh.db` directly) and `mesh leave --forget`; `None` for the rest.
fn run_without_daemon(cmd: &MeshCmd, ctx: &Ctx) -> Option<anyhow::Result<()>> {
    if let MeshCmd::Init {
        name,
        quorum,
        member_name,
    } = cmd
        && ctx.daemon_if_running().is_none()
    {
        let member = member_name
            .clone()
            .or_else(|| ctx.settings().node.name.clone())
            .unwrap_or_else(|| "founder".into());
        return Some(init_offline(ctx, name, &member, quorum).and_then(|view| ctx.show(&view)));
    }
    if let MeshCmd::Leave { forget: true } = cmd {
        return Some(forget_mesh(ctx));
    }
    None
}

/// `grove mesh leave --forget`: this node's lost mesh is forgotten, under
/// the state lock.
fn forget_mesh(ctx: &Ctx) -> anyhow::Result<()> {
    let _lock = StateLock::acquire(&ctx.state_dir)?;
    let mesh = grove::mesh::store::forget_lost_mesh(&ctx.state_dir)?;
    println!("forgot mesh {mesh}: this node starts as a node of no mesh");
    Ok(())
}

/// `grove mesh join INVITE`.
fn join(
    ctx: &Ctx,
    client: &Client,
    invite: String,
    member_name: Option<String>,
    name: Option<String>,
) -> anyhow::Result<()> {
    if let Some(name) = name {
        anyhow::bail!(
            "`mesh join --name {name}`: the display name is now given with `--as {name}` (`--name` names the mesh, on `mesh init`)"
        );
    }
    // In the body: an invite (or a wrong paste) can be long.
    let call = dto::JoinCall {
        invite,
        name: member_name,
    };
    let body = serde_json::to_vec(&call)?;
    ctx.show(&client.request::<dto::JoinResult>(Method::POST, routes::MESH_JOIN, body)?)
}

/// `grove mesh status`: the mesh's status with the node's start time.
fn status(ctx: &Ctx, client: &Client) -> anyhow::Result<()> {
    let status = get::<dto::MeshStatus>(client, routes::MESH_STATUS)?;
    let node: dto::NodeInfo = get(client, routes::NODE)?;
    ctx.show(&StatusView {
        status,
        node_started_ms: Some(node.started_ms),
    })
}

/// `grove mesh propose kick|rotate|quorum|upgrade`.
fn propose(ctx: &Ctx, client: &Client, p: ProposeCmd) -> anyhow::Result<()> {
    let (kind, target) = match p {
        ProposeCmd::Kick { peer } => ("kick", Some(peer)),
        ProposeCmd::Rotate => ("rotate", None),
        ProposeCmd::Quorum { rule } => ("quorum", Some(rule)),
        ProposeCmd::Upgrade => ("upgrade", None),
    };
    ctx.show(&post::<dto::Proposed>(
        client,
        routes::MESH_PROPOSE,
        &[("kind", Some(kind.into())), ("target", target)],
    )?)
}

/// `grove mesh watch`: each membership event of the node's event stream
/// as a line as it comes (stdout is line
/// buffered, so a pipe sees it at once); ends when stdout closes (exit 0),
/// and fails saying why when the daemon ended it: it dropped this watcher,
/// or "the daemon stopped", so a `watch | handler` pipeline can tell.
fn watch(ctx: &Ctx, client: &Client) -> anyhow::Result<()> {
    let mut dropped = None;
    let ended = client.stream_lines(routes::EVENTS, |line| {
        // Moot, book and reachability events are `moot watch`'s and
        // other readers'; an unknown name is a newer daemon's.
        let Ok(dto::Event::Mesh(e)) = serde_json::from_slice::<dto::Event>(line) else {
            return true;
        };
        if e.event == "watch_dropped" {
            dropped = Some(e.detail.clone());
        }
        ctx.show_line(&e).is_ok()
    });
    if let Some(why) = dropped {
        anyhow::bail!("{}", Escaped(&why));
    }
    match ended {
        Ok(StreamEnd::Caller) => Ok(()),
        Ok(StreamEnd::Daemon) => Err(client.stream_ended(None).into()),
        Err(e) if e.kind == ErrorKind::Unavailable => Err(client.stream_ended(Some(e)).into()),
        Err(e) => Err(e.into()),
    }
}

impl Show for dto::MeshEvent {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        // The daemon escapes the names in a detail; a detail from a daemon
        // before that is escaped here (escaping twice changes nothing).
        writeln!(
            out,
            "{}  {:15} {}",
            self.at,
            Escaped(&self.event),
            Escaped(&self.detail)
        )
    }
}

/// `grove mesh invite [revoke ID | list]`.
fn invite(
    ctx: &Ctx,
    client: &Client,
    cmd: Option<InviteCmd>,
    ttl: Option<String>,
    note: String,
    approved: bool,
    approved_name: Option<String>,
) -> anyhow::Result<()> {
    match cmd {
        None => {
            let ttl = ttl.as_deref().map(invite_ttl_secs).transpose()?;
            ctx.show(&post::<dto::InviteCreated>(
                client,
                routes::MESH_INVITE,
                &[
                    ("ttl_secs", ttl.map(|t| t.to_string())),
                    ("note", Some(note)),
                    ("approved", approved.then(|| "true".to_string())),
                    ("approved_name", approved_name),
                ],
            )?)
        }
        Some(InviteCmd::Revoke { id }) => ctx.show(&post::<dto::Revoked>(
            client,
            routes::MESH_INVITE_REVOKE,
            &[("id", Some(id))],
        )?),
        Some(InviteCmd::List) => ctx.show(&get::<dto::InviteList>(client, routes::MESH_INVITES)?),
    }
}

impl Show for dto::InviteCreated {
    /// The invite alone on stdout, so `$(grove mesh invite)` is the invite.
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "{}", self.invite)
    }

    fn note(&self, err: &mut dyn Write) -> io::Result<()> {
        writeln!(
            err,
            "invite {} expires {}; it tells the joiner to dial {}",
            self.id,
            super::when(self.expires, grove::now_ms()),
            self.bootstrap.join(", ")
        )?;
        match (self.approved, &self.approval) {
            (Some(true), _) => writeln!(
                err,
                "approved in advance: a joiner with it is added without a vote"
            ),
            (_, Some(p)) => writeln!(
                err,
                "approval proposed as {p}; once the members vote it through, a joiner with it is added without a vote"
            ),
            _ => Ok(()),
        }
    }
}

impl Show for dto::Revoked {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "revoked invite {}", self.id)?;
        if let Some(p) = &self.approval_revocation {
            writeln!(
                out,
                "its approval ends with proposal {p} (a commit: the members vote on it)"
            )?;
        }
        Ok(())
    }
}

impl Show for dto::InviteList {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.invites.is_empty() {
            writeln!(out, "no invites issued")?;
        }
        let now = grove::now_ms();
        for i in &self.invites {
            writeln!(
                out,
                "{}  {:8}  {:8}  expires {}  {}",
                i.id,
                i.status,
                i.approval.as_deref().unwrap_or("-"),
                super::when(i.expires, now),
                Escaped(&i.note)
            )?;
        }
        Ok(())
    }
}

impl Show for dto::JoinResult {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        match self.state.as_str() {
            "joined" => writeln!(
                out,
                "joined mesh {} at epoch {}",
                self.mesh_id,
                self.epoch.unwrap_or(0)
            ),
            _ => writeln!(
                out,
                "asked to join mesh {}; the members are voting (ticket {}). The node keeps polling; see `grove mesh status`.",
                self.mesh_id,
                self.ticket.as_deref().unwrap_or_default()
            ),
        }
    }
}

impl Show for dto::Withdrawn {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "withdrew {} (epoch {}); every vote on it is free",
            self.id, self.epoch
        )
    }
}

impl Show for dto::Voted {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let choice = if self.yes { "yes" } else { "no" };
        if self.rejected {
            writeln!(
                out,
                "voted no on {}; it can no longer reach its quorum, so it is rejected and every vote on it is free (epoch {})",
                self.id, self.epoch
            )
        } else if self.committed {
            writeln!(
                out,
                "voted {choice} on {}; it passed: the mesh is now at epoch {}",
                self.id, self.epoch
            )
        } else {
            writeln!(out, "voted {choice} on {} (epoch {})", self.id, self.epoch)
        }
    }
}

impl Show for dto::ProposalList {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.proposals.is_empty() {
            writeln!(out, "no open proposals")?;
        }
        for p in &self.proposals {
            write_proposal(out, p)?;
        }
        Ok(())
    }
}

impl Show for dto::Proposed {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.committed {
            writeln!(
                out,
                "proposal {} passed at once: the mesh is now at epoch {}",
                self.id, self.epoch
            )
        } else {
            writeln!(
                out,
                "proposed {}; members vote with `grove mesh vote {} yes`",
                self.id,
                &self.id[..self.id.len().min(12)]
            )
        }
    }
}

/// `name (12D3KooWAbCdEfGh…)`: a member as people call it, with enough of
/// its peer id to tell it apart (and to pass to `propose kick`).
fn member_label(peer_id: &str, name: Option<&str>) -> String {
    let short: String = peer_id.chars().take(16).collect();
    let short = if short.len() < peer_id.len() {
        format!("{short}…")
    } else {
        short
    };
    match name.filter(|n| !n.is_empty()) {
        Some(name) => format!("{} ({short})", Escaped(name)),
        None => short,
    }
}

fn write_proposal(out: &mut dyn Write, p: &dto::ProposalView) -> io::Result<()> {
    let target = match (p.kind.as_str(), &p.target) {
        ("add" | "kick", Some(peer)) => member_label(peer, p.target_name.as_deref()),
        (_, Some(other)) => escaped(other),
        (_, None) => String::new(),
    };
    let yes_by: Vec<String> = p
        .votes
        .yes_by
        .iter()
        .enumerate()
        .map(|(i, peer)| member_label(peer, p.votes.yes_names.get(i).map(String::as_str)))
        .collect();
    writeln!(
        out,
        "{}  {} {}  by {}  yes {} / needed {}  no {}  expires {}",
        p.id,
        p.kind,
        target,
        member_label(&p.proposer, p.proposer_name.as_deref()),
        p.votes.yes,
        p.votes.needed,
        p.votes.no,
        super::when(p.expires, grove::now_ms())
    )?;
    if !yes_by.is_empty() {
        writeln!(out, "    yes from {}", yes_by.join(", "))?;
    }
    if !p.backed_by.is_empty() {
        let epochs: Vec<String> = p.backed_by.iter().map(u64::to_string).collect();
        writeln!(
            out,
            "    backed by checked evidence: it sealed an envelope that does not open (epoch {})",
            epochs.join(", ")
        )?;
    }
    Ok(())
}

/// `mesh status`: the status, and when the daemon started (a member not
/// reached since then is still being dialed).
#[derive(serde::Serialize)]
#[serde(transparent)]
struct StatusView {
    status: dto::MeshStatus,
    #[serde(skip)]
    node_started_ms: Option<i64>,
}

impl Show for StatusView {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        self.status.write(out, self.node_started_ms)
    }
}

impl Show for dto::MeshStatus {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        self.write(out, None)
    }
}

trait WriteStatus {
    fn write(&self, out: &mut dyn Write, node_started_ms: Option<i64>) -> io::Result<()>;
}

impl WriteStatus for dto::MeshStatus {
    fn write(&self, out: &mut dyn Write, node_started_ms: Option<i64>) -> io::Result<()> {
        if let Some(j) = &self.join {
            writeln!(out, "state: pending")?;
            writeln!(
                out,
                "asked to join mesh {} as {} with invite {} (inviter {})",
                self.mesh_id,
                Escaped(&j.name),
                j.invite_id,
                j.inviter
            )?;
            return writeln!(out, "waiting for {}", Escaped(&j.waiting_for));
        }
        writeln!(out, "mesh {} ({})", Escaped(&self.name), self.mesh_id)?;
        if let Some(r) = &self.removed {
            writeln!(
                out,
                "state: removed: this node is no longer a member of mesh {} (removed at epoch {} by proposal {}, commit {}{})",
                Escaped(&self.name),
                r.epoch,
                r.proposal.as_deref().unwrap_or("unknown"),
                r.commit,
                r.at.map(|t| format!(", applied here at {t} Unix ms"))
                    .unwrap_or_default()
            )?;
        }
        writeln!(
            out,
            "epoch {}  roster {}  quorum {}",
            self.epoch, self.roster_hash, self.quorum
        )?;
        writeln!(
            out,
            "this node {}{}{}",
            self.peer_id,
            if self.member { "" } else { "  (not a member)" },
            if self.synced {
                ""
            } else {
                "  (not synced yet)"
            }
        )?;
        writeln!(out, "members:")?;
        let now = grove::now_ms();
        for m in &self.members {
            let seen = match (m.online, m.last_seen) {
                (true, _) => "online".to_string(),
                (false, Some(t)) => format!("offline, last seen {}", super::when(t, now)),
                // The daemon dials every member it has not reached (right
                // after a join, the seconds before the first contact).
                (false, None) => match node_started_ms {
                    Some(started) if now - started > 60_000 => format!(
                        "connecting (not reached since this node started {})",
                        super::show::relative(started - now)
                    ),
                    _ => "connecting".to_string(),
                },
            };
            // Padding counts the escaped text, as it is printed.
            writeln!(out, "  {:16} {}  {}", escaped(&m.name), m.peer_id, seen)?;
        }
        if !self.proposals.is_empty() {
            writeln!(out, "open proposals:")?;
            for p in &self.proposals {
                write!(out, "  ")?;
                write_proposal(out, p)?;
            }
        }
        if self.evidence > 0 {
            writeln!(out, "equivocation evidence kept: {}", self.evidence)?;
        }
        write_bad_envelopes(out, &self.bad_envelopes)
    }
}

/// The envelopes that did not open, in `mesh status`.
fn write_bad_envelopes(out: &mut dyn Write, bad: &[dto::BadEnvelopeView]) -> io::Result<()> {
    if bad.is_empty() {
        return Ok(());
    }
    writeln!(out, "envelopes that did not open:")?;
    for b in bad {
        let who = |name: &Option<String>, peer: &str| match name {
            Some(n) => format!("{} ({peer})", Escaped(n)),
            None => peer.to_string(),
        };
        writeln!(
            out,
            "  epoch {}: sealed by {} for {}: {}",
            b.epoch,
            who(&b.committer_name, &b.committer),
            who(&b.accuser_name, &b.accuser),
            if b.proven {
                "proven, the committer is at fault"
            } else {
                "not proven (this node holds no key the roster names for it)"
            }
        )?;
    }
    Ok(())
}

/// `mesh init` with no daemon: straight to `mesh.db` under the state lock.
fn init_offline(
    ctx: &Ctx,
    name: &str,
    member: &str,
    quorum: &str,
) -> anyhow::Result<dto::MeshStatus> {
    let rule = grove::mesh::roster::QuorumRule::parse(quorum)?;
    let _lock = StateLock::acquire(&ctx.state_dir)?;
    let id = super::identity::load(ctx)?;
    let mut store = MeshStore::open_in(&ctx.state_dir)?;
    let state: MeshState = store
        .load(id.public(), ctx.settings().mesh.timing())
        .context("loading mesh state")?;
    let now = grove::now_ms();
    let (state, t) = state.init_as(
        &id,
        name,
        member,
        QuorumRule::validate(rule)?,
        now,
        &mut rand::rng(),
    )?;
    store.persist(&t, now)?;
    let roster = state.roster().context("no roster after init")?;
    Ok(dto::MeshStatus {
        state: "member".into(),
        mesh_id: hex::encode(roster.mesh_id),
        name: roster.mesh_name.clone(),
        epoch: roster.epoch,
        roster_hash: hex::encode(state.tip),
        quorum: format!("{}/{}", roster.quorum.numerator, roster.quorum.denominator),
        peer_id: grove::identity::peer_id_text(&state.me.peer_id),
        member: true,
        synced: true,
        members: roster
            .members
            .iter()
            .map(|m| dto::MemberView {
                peer_id: grove::identity::peer_id_text(&m.peer_id),
                name: m.name.clone(),
                online: true,
                last_seen: Some(now),
                joined_epoch: m.joined_epoch,
            })
            .collect(),
        proposals: Vec::new(),
        evidence: 0,
        bad_envelopes: Vec::new(),
        removed: None,
        join: None,
    })
}
