//! `grove mesh ...`: membership through the running daemon (invite, join,
//! status, propose, vote, proposals, leave). `mesh init` also works with no
//! daemon, directly on `mesh.db` under the state lock.

use anyhow::Context;
use hyper::Method;

use super::Ctx;
use grove::api::client::Client;
use grove::api::dto;
use grove::mesh::roster::QuorumRule;
use grove::mesh::state::MeshState;
use grove::mesh::store::{MeshStore, StateLock};

#[derive(Debug, clap::Subcommand)]
pub enum MeshCmd {
    /// Create a new mesh (epoch 0) with this node as its only member.
    Init {
        #[arg(long)]
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
        /// A note kept with the invite (who it is for).
        #[arg(long, default_value = "")]
        note: String,
    },
    /// Join a mesh with an invite; waits for the members' vote in the background.
    Join {
        invite: String,
        /// Display name in the roster (default: node.name).
        #[arg(long)]
        name: Option<String>,
    },
    /// The mesh, its members (online or not) and open proposals.
    Status,
    /// Propose a change (your proposal counts as your yes).
    #[command(subcommand)]
    Propose(ProposeCmd),
    /// Vote on an open proposal (its id or a unique prefix).
    Vote {
        proposal: String,
        /// yes or no.
        choice: String,
    },
    /// Open proposals and their votes.
    Proposals,
    /// Propose removing this node from the mesh.
    Leave,
}

#[derive(Debug, clap::Subcommand)]
pub enum InviteCmd {
    /// Revoke an invite by id.
    Revoke { id: String },
    /// The invites this node issued.
    List,
}

#[derive(Debug, clap::Subcommand)]
pub enum ProposeCmd {
    /// Remove a member: peer id, unique prefix, or name.
    Kick { peer: String },
    /// A fresh epoch secret, same members.
    Rotate,
    /// Change the quorum rule (N/D, above one half).
    Quorum { rule: String },
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
    if let MeshCmd::Init {
        name,
        quorum,
        member_name,
    } = &cmd
        && ctx.daemon_if_running().is_none()
    {
        let member = member_name
            .clone()
            .or_else(|| ctx.settings.node.name.clone())
            .unwrap_or_else(|| "founder".into());
        return init_offline(ctx, name, &member, quorum);
    }
    let client = ctx.daemon()?;
    match cmd {
        MeshCmd::Init {
            name,
            quorum,
            member_name,
        } => {
            let status: dto::MeshStatus = post(
                &client,
                "/v1/mesh/init",
                &[
                    ("name", Some(name)),
                    ("quorum", Some(quorum)),
                    ("as", member_name),
                ],
            )?;
            print_status(ctx, &status)
        }
        MeshCmd::Invite {
            cmd: None,
            ttl,
            note,
        } => {
            let ttl = ttl.as_deref().map(parse_duration_secs).transpose()?;
            let inv: dto::InviteCreated = post(
                &client,
                "/v1/mesh/invite",
                &[
                    ("ttl_secs", ttl.map(|t| t.to_string())),
                    ("note", Some(note)),
                ],
            )?;
            if ctx.json {
                return super::print_json(&inv);
            }
            println!("{}", inv.invite);
            eprintln!(
                "invite {} expires at {} (Unix ms); it tells the joiner to dial {}",
                inv.id,
                inv.expires,
                inv.bootstrap.join(", ")
            );
            Ok(())
        }
        MeshCmd::Invite {
            cmd: Some(InviteCmd::Revoke { id }),
            ..
        } => {
            let r: dto::Revoked = post(&client, "/v1/mesh/invite/revoke", &[("id", Some(id))])?;
            if ctx.json {
                return super::print_json(&r);
            }
            println!("revoked invite {}", r.id);
            Ok(())
        }
        MeshCmd::Invite {
            cmd: Some(InviteCmd::List),
            ..
        } => {
            let list: dto::InviteList = get(&client, "/v1/mesh/invites")?;
            if ctx.json {
                return super::print_json(&list);
            }
            if list.invites.is_empty() {
                println!("no invites issued");
            }
            for i in &list.invites {
                println!(
                    "{}  {:8}  expires {}  {}",
                    i.id, i.status, i.expires, i.note
                );
            }
            Ok(())
        }
        MeshCmd::Join { invite, name } => {
            let r: dto::JoinResult = post(
                &client,
                "/v1/mesh/join",
                &[("invite", Some(invite)), ("name", name)],
            )?;
            if ctx.json {
                return super::print_json(&r);
            }
            match r.state.as_str() {
                "joined" => println!(
                    "joined mesh {} at epoch {}",
                    r.mesh_id,
                    r.epoch.unwrap_or(0)
                ),
                _ => println!(
                    "asked to join mesh {}; the members are voting (ticket {}). The node keeps polling; see `grove mesh status`.",
                    r.mesh_id,
                    r.ticket.unwrap_or_default()
                ),
            }
            Ok(())
        }
        MeshCmd::Status => {
            let status: dto::MeshStatus = get(&client, "/v1/mesh/status")?;
            print_status(ctx, &status)
        }
        MeshCmd::Propose(p) => {
            let (kind, target) = match p {
                ProposeCmd::Kick { peer } => ("kick", Some(peer)),
                ProposeCmd::Rotate => ("rotate", None),
                ProposeCmd::Quorum { rule } => ("quorum", Some(rule)),
            };
            let r: dto::Proposed = post(
                &client,
                "/v1/mesh/propose",
                &[("kind", Some(kind.into())), ("target", target)],
            )?;
            print_proposed(ctx, &r)
        }
        MeshCmd::Leave => {
            let r: dto::Proposed = post(&client, "/v1/mesh/leave", &[])?;
            print_proposed(ctx, &r)
        }
        MeshCmd::Vote { proposal, choice } => {
            let r: dto::Voted = post(
                &client,
                "/v1/mesh/vote",
                &[("id", Some(proposal)), ("choice", Some(choice))],
            )?;
            if ctx.json {
                return super::print_json(&r);
            }
            if r.committed {
                println!(
                    "voted on {}; it passed: the mesh is now at epoch {}",
                    r.id, r.epoch
                );
            } else {
                println!("voted on {} (epoch {})", r.id, r.epoch);
            }
            Ok(())
        }
        MeshCmd::Proposals => {
            let list: dto::ProposalList = get(&client, "/v1/mesh/proposals")?;
            if ctx.json {
                return super::print_json(&list);
            }
            if list.proposals.is_empty() {
                println!("no open proposals");
            }
            for p in &list.proposals {
                print_proposal(p);
            }
            Ok(())
        }
    }
}

fn print_proposed(ctx: &Ctx, r: &dto::Proposed) -> anyhow::Result<()> {
    if ctx.json {
        return super::print_json(r);
    }
    if r.committed {
        println!(
            "proposal {} passed at once: the mesh is now at epoch {}",
            r.id, r.epoch
        );
    } else {
        println!(
            "proposed {}; members vote with `grove mesh vote {} yes`",
            r.id,
            &r.id[..r.id.len().min(12)]
        );
    }
    Ok(())
}

fn print_proposal(p: &dto::ProposalView) {
    println!(
        "{}  {} {}  by {}  yes {} / needed {}  no {}",
        p.id,
        p.kind,
        p.target.as_deref().unwrap_or(""),
        p.proposer,
        p.votes.yes,
        p.votes.needed,
        p.votes.no
    );
}

fn print_status(ctx: &Ctx, s: &dto::MeshStatus) -> anyhow::Result<()> {
    if ctx.json {
        return super::print_json(s);
    }
    println!("mesh {} ({})", s.name, s.mesh_id);
    println!(
        "epoch {}  roster {}  quorum {}",
        s.epoch, s.roster_hash, s.quorum
    );
    println!(
        "this node {}{}{}",
        s.peer_id,
        if s.member { "" } else { "  (not a member)" },
        if s.synced { "" } else { "  (not synced yet)" }
    );
    println!("members:");
    let now = grove::now_ms();
    for m in &s.members {
        let seen = match (m.online, m.last_seen) {
            (true, _) => "online".to_string(),
            (false, Some(t)) => format!("offline, last seen {}s ago", (now - t).max(0) / 1000),
            (false, None) => "offline, never seen".to_string(),
        };
        println!("  {:16} {}  {}", m.name, m.peer_id, seen);
    }
    if !s.proposals.is_empty() {
        println!("open proposals:");
        for p in &s.proposals {
            print!("  ");
            print_proposal(p);
        }
    }
    if s.evidence > 0 {
        println!("equivocation evidence kept: {}", s.evidence);
    }
    Ok(())
}

/// `mesh init` with no daemon: straight to `mesh.db` under the state lock.
fn init_offline(ctx: &Ctx, name: &str, member: &str, quorum: &str) -> anyhow::Result<()> {
    let rule = grove::mesh::roster::QuorumRule::parse(quorum)?;
    let _lock = StateLock::acquire(&ctx.state_dir)?;
    let id = super::identity::load(ctx)?;
    let mut store = MeshStore::open_in(&ctx.state_dir)?;
    let state: MeshState = store
        .load(id.public(), ctx.settings.mesh.timing())
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
    let status = dto::MeshStatus {
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
    };
    print_status(ctx, &status)
}
