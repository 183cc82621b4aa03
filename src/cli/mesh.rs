//! `grove mesh ...`: offline membership commands working on `mesh.db` under
//! the state lock. Messages they produce are queued in the outbox for the
//! daemon and printed (hex) so they can also be handed over by hand.

use anyhow::{Context, bail};
use serde_json::json;

use super::Ctx;
use grove::identity::{self, Identity};
use grove::mesh::MeshError;
use grove::mesh::invite;
use grove::mesh::roster::{Change, QuorumRule};
use grove::mesh::state::{Dest, MeshState, ProposalChange, Transition};
use grove::mesh::store::{MeshStore, StateLock};
use grove::wire::mesh as wire;

#[derive(Debug, clap::Subcommand)]
pub enum MeshCmd {
    /// Create a new mesh (epoch 0) with this node as its only member.
    Init {
        #[arg(long)]
        name: String,
        /// Quorum rule as N/D: yes * D > members * N (default 1/2, a strict majority).
        #[arg(long, default_value = "1/2")]
        quorum: String,
    },
    /// Show the mesh, its current roster and open proposals.
    Show,
    /// Create, revoke or list invites.
    #[command(subcommand)]
    Invite(InviteCmd),
    /// Propose a change (your proposal counts as your yes).
    #[command(subcommand)]
    Propose(ProposeCmd),
    /// Vote on an open proposal.
    Vote {
        /// Proposal hash (hex) as `mesh show` prints it.
        proposal: String,
        /// yes or no.
        choice: String,
    },
    /// Ask to join a mesh with an invite; prints the request for the inviter.
    Join {
        invite: String,
        /// Display name in the roster.
        #[arg(long)]
        name: String,
    },
    /// Feed a mesh message (hex) handed over by hand, e.g. a join request or a welcome.
    Receive { message: String },
    /// List queued outbound messages (hex).
    Outbox,
    /// List equivocation evidence.
    Evidence,
}

#[derive(Debug, clap::Subcommand)]
pub enum InviteCmd {
    /// Create a signed, single-use invite.
    Create {
        /// Address the joiner can reach this node at (repeatable).
        #[arg(long = "bootstrap")]
        bootstrap: Vec<String>,
        #[arg(long, default_value = "")]
        note: String,
        /// Lifetime in seconds (default: mesh.invite_ttl_secs).
        #[arg(long)]
        ttl_secs: Option<u64>,
    },
    /// Revoke an invite by id (hex).
    Revoke { id: String },
    /// List the invites this node issued.
    List,
}

#[derive(Debug, clap::Subcommand)]
pub enum ProposeCmd {
    /// Add a joiner: its join request message (hex) as `mesh join` printed it.
    Add { request: String },
    /// Remove a member (peer id); propose your own to leave.
    Kick { peer: String },
    /// A fresh epoch secret, same members.
    Rotate,
    /// Change the quorum rule (N/D, above one half).
    Quorum { rule: String },
}

/// The node's keys, store and state, held under the state lock.
struct Session {
    _lock: StateLock,
    id: Identity,
    store: MeshStore,
    state: MeshState,
}

impl Session {
    fn open(ctx: &Ctx) -> anyhow::Result<Session> {
        ctx.settings
            .mesh
            .validate()
            .map_err(|(key, reason)| anyhow::anyhow!("config key `mesh.{key}`: {reason}"))?;
        let lock = StateLock::acquire(&ctx.state_dir)?;
        let id = super::identity::load(ctx)?;
        let store = MeshStore::open_in(&ctx.state_dir)?;
        let state = store
            .load(id.public(), ctx.settings.mesh.timing())
            .context("loading mesh state")?;
        Ok(Session {
            _lock: lock,
            id,
            store,
            state,
        })
    }

    /// Persists a transition (one transaction) and adopts the new state.
    fn apply(
        &mut self,
        r: Result<(MeshState, Transition), MeshError>,
        now: i64,
    ) -> anyhow::Result<Transition> {
        let (s, t) = r?;
        self.store.persist(&t, now)?;
        self.state = s;
        if let Some(refused) = &t.refused {
            eprintln!("refused: {refused}");
        }
        Ok(t)
    }
}

fn parse_quorum(text: &str) -> anyhow::Result<QuorumRule> {
    let (n, d) = text
        .split_once('/')
        .with_context(|| format!("quorum `{text}`: expected N/D, e.g. 2/3"))?;
    let rule = QuorumRule {
        numerator: n.trim().parse().context("quorum numerator")?,
        denominator: d.trim().parse().context("quorum denominator")?,
    };
    Ok(rule.validate()?)
}

fn parse_hex<const N: usize>(text: &str, what: &str) -> anyhow::Result<[u8; N]> {
    let bytes = hex::decode(text.trim()).with_context(|| format!("{what}: not hex"))?;
    bytes
        .try_into()
        .map_err(|_| anyhow::anyhow!("{what}: expected {N} bytes"))
}

fn parse_peer(text: &str) -> anyhow::Result<Vec<u8>> {
    let peer: libp2p_identity::PeerId = text
        .trim()
        .parse()
        .with_context(|| format!("`{text}` is not a peer id"))?;
    Ok(peer.to_bytes())
}

fn outbound_json(t: &Transition) -> serde_json::Value {
    t.outbound
        .iter()
        .map(|o| {
            json!({
                "to": match &o.to { Dest::All => serde_json::Value::Null, Dest::Peer(p) => identity::peer_id_text(p).into() },
                "message": hex::encode(&o.message),
            })
        })
        .collect()
}

fn print_outbound(ctx: &Ctx, t: &Transition, extra: serde_json::Value) {
    if ctx.json {
        let mut v = extra;
        if let Some(obj) = v.as_object_mut() {
            obj.insert("outbound".into(), outbound_json(t));
        }
        println!("{v}");
        return;
    }
    for o in &t.outbound {
        let to = match &o.to {
            Dest::All => "all members".to_string(),
            Dest::Peer(p) => identity::peer_id_text(p),
        };
        println!("queued for {to}: {}", hex::encode(&o.message));
    }
}

pub fn run(cmd: MeshCmd, ctx: &Ctx) -> anyhow::Result<()> {
    let mut s = Session::open(ctx)?;
    let now = grove::now_ms();
    let mut rng = rand::rng();
    match cmd {
        MeshCmd::Init { name, quorum } => {
            let q = parse_quorum(&quorum)?;
            let r = s.state.init(&s.id, &name, q, now, &mut rng);
            s.apply(r, now)?;
            let mesh_id = s
                .state
                .mesh
                .as_ref()
                .map(|m| hex::encode(m.mesh_id))
                .unwrap_or_default();
            if ctx.json {
                println!("{}", json!({"mesh_id": mesh_id, "name": name, "epoch": 0}));
            } else {
                println!("created mesh {name} ({mesh_id}) at epoch 0");
            }
        }
        MeshCmd::Show => show(ctx, &s.state),
        MeshCmd::Invite(InviteCmd::Create {
            bootstrap,
            note,
            ttl_secs,
        }) => {
            let ttl = ttl_secs.map(|t| i64::try_from(t.saturating_mul(1000)).unwrap_or(i64::MAX));
            let r = s
                .state
                .create_invite(&s.id, bootstrap, note, ttl, now, &mut rng);
            let t = s.apply(r, now)?;
            let text = t.output.unwrap_or_default();
            let inv = invite::verify(&invite::from_text(&text)?)?;
            if ctx.json {
                println!(
                    "{}",
                    json!({"invite": text, "id": hex::encode(inv.invite_id), "expires_ms": inv.expires_ms})
                );
            } else {
                println!("{text}");
                eprintln!(
                    "invite {} expires at {} ms",
                    hex::encode(inv.invite_id),
                    inv.expires_ms
                );
            }
        }
        MeshCmd::Invite(InviteCmd::Revoke { id }) => {
            let id = parse_hex::<16>(&id, "invite id")?;
            let r = s.state.revoke_invite(&s.id, id, now);
            let t = s.apply(r, now)?;
            print_outbound(ctx, &t, json!({"revoked": hex::encode(id)}));
        }
        MeshCmd::Invite(InviteCmd::List) => {
            let rows: Vec<serde_json::Value> = s
                .state
                .invites
                .values()
                .map(|i| {
                    let status = if i.status.as_str() == "open" && now >= i.expires_ms {
                        "expired"
                    } else {
                        i.status.as_str()
                    };
                    json!({"id": hex::encode(i.id), "status": status, "expires_ms": i.expires_ms, "note": i.note})
                })
                .collect();
            if ctx.json {
                println!("{}", serde_json::Value::Array(rows));
            } else {
                for r in rows {
                    println!(
                        "{}  {:8}  expires {}  {}",
                        r["id"].as_str().unwrap_or(""),
                        r["status"].as_str().unwrap_or(""),
                        r["expires_ms"],
                        r["note"].as_str().unwrap_or("")
                    );
                }
            }
        }
        MeshCmd::Propose(p) => {
            let change = match p {
                ProposeCmd::Add { request } => {
                    ProposalChange::Add(join_request_from_hex(&request)?)
                }
                ProposeCmd::Kick { peer } => ProposalChange::Kick(parse_peer(&peer)?),
                ProposeCmd::Rotate => ProposalChange::Rotate,
                ProposeCmd::Quorum { rule } => ProposalChange::Quorum(parse_quorum(&rule)?),
            };
            let before = s.state.epoch();
            let r = s.state.propose(&s.id, change, now, &mut rng);
            let t = s.apply(r, now)?;
            print_outbound(
                ctx,
                &t,
                json!({"epoch": s.state.epoch(), "committed": s.state.epoch() > before}),
            );
        }
        MeshCmd::Vote { proposal, choice } => {
            let hash = parse_hex::<32>(&proposal, "proposal hash")?;
            let yes = match choice.as_str() {
                "yes" | "y" => true,
                "no" | "n" => false,
                other => bail!("vote `{other}`: say yes or no"),
            };
            let r = s.state.vote(&s.id, hash, yes, now, &mut rng);
            let t = s.apply(r, now)?;
            print_outbound(ctx, &t, json!({"epoch": s.state.epoch()}));
        }
        MeshCmd::Join { invite, name } => {
            let r = s.state.request_join(&s.id, &invite, &name, now);
            let t = s.apply(r, now)?;
            print_outbound(ctx, &t, json!({"pending": true}));
        }
        MeshCmd::Receive { message } => {
            let bytes = hex::decode(message.trim()).context("message: not hex")?;
            let r = s.state.receive(&s.id, &bytes, now, &mut rng);
            let t = s.apply(r, now)?;
            print_outbound(
                ctx,
                &t,
                json!({"epoch": s.state.epoch(), "member": s.state.is_member()}),
            );
        }
        MeshCmd::Outbox => {
            let q = s.store.outbox()?;
            let rows: Vec<serde_json::Value> = q
                .iter()
                .map(|m| json!({"seq": m.seq, "to": match &m.to { Dest::All => serde_json::Value::Null, Dest::Peer(p) => identity::peer_id_text(p).into() }, "message": hex::encode(&m.message)}))
                .collect();
            if ctx.json {
                println!("{}", serde_json::Value::Array(rows));
            } else {
                for r in rows {
                    println!(
                        "{} {} {}",
                        r["seq"],
                        r["to"],
                        r["message"].as_str().unwrap_or("")
                    );
                }
            }
        }
        MeshCmd::Evidence => {
            let rows: Vec<serde_json::Value> = s
                .state
                .evidence
                .iter()
                .map(|e| json!({"epoch": e.epoch, "voter": identity::peer_id_text(&e.voter), "first": hex::encode(&e.first), "second": hex::encode(&e.second), "at_ms": e.at_ms}))
                .collect();
            if ctx.json {
                println!("{}", serde_json::Value::Array(rows));
            } else if rows.is_empty() {
                println!("no equivocation evidence");
            } else {
                for r in rows {
                    println!(
                        "epoch {} voter {}",
                        r["epoch"],
                        r["voter"].as_str().unwrap_or("")
                    );
                }
            }
        }
    }
    Ok(())
}

/// Extracts the signed join request from a `mesh join` message (hex).
fn join_request_from_hex(text: &str) -> anyhow::Result<wire::Signed> {
    use prost::Message;
    let bytes = hex::decode(text.trim()).context("join request: not hex")?;
    let msg =
        wire::MeshMessage::decode(bytes.as_slice()).context("join request: not a mesh message")?;
    match msg.kind {
        Some(wire::mesh_message::Kind::JoinRequest(s)) => Ok(s),
        _ => bail!("that message is not a join request"),
    }
}

fn show(ctx: &Ctx, state: &MeshState) {
    let Some(roster) = state.roster() else {
        if ctx.json {
            println!(
                "{}",
                json!({"mesh": null, "pending_join": state.pending_join.as_ref().map(|p| hex::encode(p.mesh_id))})
            );
        } else if let Some(p) = &state.pending_join {
            println!("waiting to join mesh {}", hex::encode(p.mesh_id));
        } else {
            println!("no mesh: run `grove mesh init --name NAME` or `grove mesh join INVITE`");
        }
        return;
    };
    let members: Vec<serde_json::Value> = roster
        .members
        .iter()
        .map(|m| json!({"peer_id": identity::peer_id_text(&m.peer_id), "name": m.name, "joined_epoch": m.joined_epoch,
                         "ed25519": hex::encode(m.ed25519), "x25519": hex::encode(m.x25519)}))
        .collect();
    let proposals: Vec<serde_json::Value> = state
        .proposals
        .values()
        .map(|p| {
            let yes = state
                .votes
                .values()
                .filter(|v| v.proposal_hash == p.hash && v.yes)
                .count();
            let change = match &p.change {
                Change::Add(m) => format!("add {} ({})", identity::peer_id_text(&m.peer_id), m.name),
                Change::Kick(peer) => format!("kick {}", identity::peer_id_text(peer)),
                Change::Rotate => "rotate".into(),
                Change::Quorum(q) => format!("quorum {}/{}", q.numerator, q.denominator),
            };
            json!({"hash": hex::encode(p.hash), "change": change, "proposer": identity::peer_id_text(&p.proposer),
                   "yes": yes, "needed": roster.quorum_needed(), "expires_ms": p.expires_ms})
        })
        .collect();
    let v = json!({
        "mesh_id": hex::encode(roster.mesh_id),
        "name": roster.mesh_name,
        "epoch": roster.epoch,
        "roster_hash": hex::encode(state.tip),
        "quorum": format!("{}/{}", roster.quorum.numerator, roster.quorum.denominator),
        "member": state.is_member(),
        "synced": state.synced,
        "members": members,
        "proposals": proposals,
        "evidence": state.evidence.len(),
    });
    if ctx.json {
        println!("{v}");
        return;
    }
    println!(
        "mesh {} ({})",
        roster.mesh_name,
        hex::encode(roster.mesh_id)
    );
    println!(
        "epoch {}  roster {}  quorum {}/{} ({} of {})",
        roster.epoch,
        hex::encode(state.tip),
        roster.quorum.numerator,
        roster.quorum.denominator,
        roster.quorum_needed(),
        roster.members.len()
    );
    if !state.is_member() {
        println!("this node is not a member");
    }
    for m in &roster.members {
        println!(
            "  {}  {}  (since epoch {})",
            identity::peer_id_text(&m.peer_id),
            m.name,
            m.joined_epoch
        );
    }
    for p in &proposals {
        println!(
            "proposal {}: {} by {}, {} yes of {} needed",
            p["hash"].as_str().unwrap_or(""),
            p["change"].as_str().unwrap_or(""),
            p["proposer"].as_str().unwrap_or(""),
            p["yes"],
            p["needed"]
        );
    }
    if !state.evidence.is_empty() {
        println!(
            "equivocation evidence: {} (see `grove mesh evidence`)",
            state.evidence.len()
        );
    }
}
