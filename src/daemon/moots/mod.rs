//! Moots hosted by this node (`grove moot start` on any member): resolving
//! each tree to the member holding its book and the root it announced,
//! starting and resuming runs (`host.rs`), and the signed export of a
//! finished moot. The moots themselves are kept by the [`MootBook`]
//! (`book.rs`).

pub mod book;
mod run;

use std::sync::Arc;

use libp2p::PeerId;
use prost::Message;

use self::book::{Moot, MootBook, MootState, PauseCause, SavedPlan, SavedTree, SavedView};
use self::run::{Paused, Resolved, Run};
use super::due::Due;
use super::mesh::MeshWorker;
use super::peers::{Peers, resolve_member};
use super::rpc::turn::Speaking;
use crate::api::{ApiError, dto};
use crate::identity::peer_id_text;
use crate::merkle::Hash;
use crate::mesh::codec;
use crate::mesh::names::Escaped;
use crate::moot::export::{EXPORT_FORMAT, EXPORT_TAG, EXPORT_VERSION};
use crate::moot::{MootSettings, Tree};
use crate::net::Network;
use crate::store::retriever::BookRetriever;
use crate::wire::mesh::Signed;
use crate::wire::moot as wire;

/// How a host retries a speaker's node that does not answer (config
/// `net.turn_retries`, `net.turn_retry_backoff_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnRetry {
    /// Tries after the first.
    pub retries: u32,
    /// The wait before the first retry; it doubles each time.
    pub backoff: std::time::Duration,
}

/// What hosting needs; cheap to clone.
#[derive(Clone)]
pub struct MootHost {
    pub mesh: MeshWorker,
    pub net: Network,
    pub peers: Peers,
    /// This node's store, model and key, for its own trees' turns and the
    /// host's narration.
    pub speaking: Speaking,
    pub book: Arc<MootBook>,
    pub settings: MootSettings,
    pub retry: TurnRetry,
    pub due: Arc<Due>,
    /// Turn counts and latency (`/metrics`).
    pub stats: Arc<crate::daemon::stats::Stats>,
    /// Where the moots' starts, turns, pauses and ends are published.
    pub events: crate::daemon::events::Events,
}

/// The `moot_turn` event of the turn saved at `index` of moot `id`'s lines.
fn turn_event(
    id: &str,
    index: u32,
    u: &crate::moot::Utterance,
    peer: PeerId,
    at: i64,
) -> dto::MootEvent {
    let decision: Option<crate::moot::transcript::DecisionRecord> =
        u.decision.as_ref().map(Into::into);
    let detail = match decision.as_ref().filter(|d| d.action == "pass") {
        Some(d) => format!(
            "turn {} of moot {id}: {} passes ({})",
            u.turn,
            Escaped(&u.title),
            Escaped(&d.reason)
        ),
        None => format!(
            "turn {} of moot {id}: {} ({})",
            u.turn,
            Escaped(&u.title),
            if u.grounded {
                "grounded"
            } else {
                "not grounded"
            }
        ),
    };
    dto::MootEvent {
        turn: Some(index),
        number: Some(u.turn),
        key: Some(u.speaker.clone()),
        title: Some(u.title.clone()),
        peer: Some(peer.to_string()),
        text: Some(u.text.clone()),
        grounded: Some(u.grounded),
        grounding: Some(u.grounding.counts),
        decision,
        ..dto::MootEvent::bare("moot_turn", at, id, detail)
    }
}

/// A tree argument: `PEER:KEY` (PEER is `self`, a member's name or peer id).
pub fn parse_tree_arg(text: &str) -> Result<(String, String), ApiError> {
    let (peer, key) = text.split_once(':').ok_or_else(|| {
        ApiError::bad_request(format!(
            "tree `{text}`: expected PEER:KEY, e.g. self:fiction/moby-dick"
        ))
    })?;
    Ok((peer.trim().to_string(), key.trim().to_string()))
}

impl MootHost {
    /// The member holding `key` as `peer_text` names it, and the roots of the
    /// book it announced.
    async fn resolve_tree(&self, peer_text: &str, key: &str) -> Result<Resolved, ApiError> {
        let view = self.mesh.view();
        crate::daemon::mesh::refuse_if_removed(&view)?;
        let roster = view
            .roster()
            .ok_or_else(|| ApiError::not_found("no mesh: a moot runs between members"))?;
        let me = self.net.local_peer_id();
        let peer_bytes = if peer_text == "self" {
            me.to_bytes()
        } else {
            resolve_member(&view, peer_text)?
        };
        let member = roster.member(&peer_bytes).ok_or_else(|| {
            ApiError::bad_request(format!(
                "{} is not a member of the mesh",
                peer_id_text(&peer_bytes)
            ))
        })?;
        let peer =
            PeerId::from_bytes(&peer_bytes).map_err(|_| ApiError::bad_request("bad peer id"))?;
        if peer == me {
            return self.resolve_own(key, member.ed25519, peer).await;
        }
        let peers = self.peers.lock();
        let known = peers.announcements.get(&peer_bytes).ok_or_else(|| {
            ApiError::conflict(format!("{} has not announced its books yet", member.name))
        })?;
        let book = known
            .announcement
            .shards
            .iter()
            .flat_map(|s| s.books.iter())
            .find(|b| b.key == key)
            .ok_or_else(|| {
                ApiError::not_found(format!("{} does not announce a book {key}", member.name))
            })?;
        let root: Hash = book
            .root
            .as_slice()
            .try_into()
            .map_err(|_| ApiError::internal("bad announced root"))?;
        Ok(Resolved {
            peer,
            local: false,
            tree: Tree::new(key, &book.title, &book.author),
            signer: member.ed25519,
            roots: vec![(root, book.count)],
            announcement: Some(known.signed.clone()),
        })
    }

    /// A tree of this node's own books; the export vouches for every root
    /// with a signed announcement, so this node's must list the book as it
    /// is now.
    async fn resolve_own(
        &self,
        key: &str,
        signer: [u8; 32],
        peer: PeerId,
    ) -> Result<Resolved, ApiError> {
        let k = key.to_string();
        let (tree, root, count) = self
            .speaking
            .store
            .call(move |b| {
                let r = BookRetriever::open(b.store(), &k)?;
                Ok::<_, crate::store::StoreError>((r.tree(), r.book().root, r.book().count))
            })
            .await??;
        let announcement = self
            .peers
            .own_announcement(&self.due, key, &root, count)
            .await;
        if announcement.is_none() {
            return Err(ApiError::conflict(format!(
                "this node has not announced {key} as it is now yet; try again in a second"
            )));
        }
        Ok(Resolved {
            peer,
            local: true,
            tree,
            signer,
            roots: vec![(root, count)],
            announcement,
        })
    }

    /// Starts a moot hosted here; returns at once with its id.
    pub async fn start(&self, req: dto::MootStart) -> Result<dto::MootStarted, ApiError> {
        if req.trees.len() < 2 {
            return Err(ApiError::bad_request(
                "a moot needs at least two trees (--a and --b, or --tree more than once)",
            ));
        }
        let settings = self.requested_settings(&req)?;
        let resolved = self.resolve_trees(&req.trees).await?;
        let mut id_bytes = [0u8; 16];
        rand::Rng::fill_bytes(&mut rand::rng(), &mut id_bytes);
        let id = hex::encode(id_bytes);
        self.book
            .insert(self.new_moot(&id, &resolved, &req.topic, &settings));
        let trees: Vec<String> = resolved.iter().map(|r| r.tree.key.clone()).collect();
        self.events.publish(dto::MootEvent::bare(
            "moot_started",
            crate::now_ms(),
            &id,
            format!(
                "moot {id} started: {} ({} turns)",
                trees.join(" ⇄ "),
                settings.turns
            ),
        ));
        self.spawn_run(Run {
            id: id.clone(),
            resolved,
            topic: req.topic,
            settings,
            replay: Vec::new(),
            summaries: Vec::new(),
        });
        Ok(dto::MootStarted { id })
    }

    /// This node's `[moot]` settings with the request's own values over
    /// them, checked like the config they override.
    fn requested_settings(&self, req: &dto::MootStart) -> Result<MootSettings, ApiError> {
        let mut settings = self.settings.clone();
        if let Some(t) = req.turns {
            settings.turns = t;
        }
        if let Some(k) = req.k {
            settings.k = k;
        }
        if let Some(m) = req.max_tokens {
            settings.max_tokens = m;
        }
        settings
            .validate()
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        Ok(settings)
    }

    /// Each `PEER:KEY` tree resolved to its member and announced book; the
    /// same book twice is refused.
    async fn resolve_trees(&self, trees: &[String]) -> Result<Vec<Resolved>, ApiError> {
        let mut resolved = Vec::new();
        for t in trees {
            let (peer, key) = parse_tree_arg(t)?;
            resolved.push(self.resolve_tree(&peer, &key).await?);
        }
        if let Some(key) =
            crate::moot::host::repeated_book(resolved.iter().map(|r| r.tree.key.as_str()))
        {
            return Err(ApiError::bad_request(format!(
                "{key} is given twice: the trees must be different books"
            )));
        }
        Ok(resolved)
    }

    /// A new running moot as the book keeps it: its plan, an empty view,
    /// and the speakers' announcements its turns are proven against.
    fn new_moot(
        &self,
        id: &str,
        resolved: &[Resolved],
        topic: &Option<String>,
        settings: &MootSettings,
    ) -> Moot {
        let plan = SavedPlan {
            trees: resolved
                .iter()
                .map(|r| format!("{}:{}", r.peer, r.tree.key))
                .collect(),
            topic: topic.clone(),
            turns: settings.turns,
            k: settings.k,
            temperature: settings.temperature,
            max_tokens: settings.max_tokens,
            seed: settings.seed,
            summary_every: settings.summary_every,
        };
        let view = SavedView {
            id: id.to_string(),
            state: MootState::Running,
            reason: None,
            cause: None,
            host: self.net.local_peer_id().to_string(),
            trees: resolved
                .iter()
                .map(|r| SavedTree {
                    peer_id: r.peer.to_string(),
                    key: r.tree.key.clone(),
                    title: r.tree.title.clone(),
                })
                .collect(),
            topic: topic.clone(),
            turns: settings.turns,
            turns_done: 0,
            turn_ms: Vec::new(),
            lines: Vec::new(),
            transcript: None,
        };
        Moot {
            view,
            turns: Vec::new(),
            announcements: resolved
                .iter()
                .filter_map(|r| r.announcement.clone())
                .collect(),
            plan: Some(plan),
            summaries: Vec::new(),
        }
    }

    /// Resumes a paused moot: the turns already accepted are re-checked
    /// and kept, the rest are asked for.
    pub async fn resume(&self, id: &str) -> Result<dto::MootStarted, ApiError> {
        let moot = self.book.get(id)?;
        if moot.view.state != MootState::Paused {
            return Err(ApiError::conflict(format!(
                "moot {id} is {}; only a paused moot resumes",
                moot.view.state.as_str()
            )));
        }
        let plan = moot
            .plan
            .clone()
            .ok_or_else(|| ApiError::conflict("this moot was saved without its plan"))?;
        let mut resolved = Vec::new();
        for t in &plan.trees {
            let (peer, key) = parse_tree_arg(t)?;
            let mut r = self.resolve_tree(&peer, &key).await?;
            // Turns already taken were against the roots announced then.
            for a in &moot.announcements {
                add_announced_roots(&mut r, a, &key);
            }
            resolved.push(r);
        }
        let settings = MootSettings {
            turns: plan.turns,
            k: plan.k,
            temperature: plan.temperature,
            max_tokens: plan.max_tokens,
            seed: plan.seed,
            summary_every: plan.summary_every,
        };
        let new_announcements: Vec<Signed> = resolved
            .iter()
            .filter_map(|r| r.announcement.clone())
            .collect();
        self.book.update(id, |m| {
            m.view.state = MootState::Running;
            m.view.reason = None;
            m.view.cause = None;
            for a in new_announcements {
                if !m.announcements.contains(&a) {
                    m.announcements.push(a);
                }
            }
        });
        tracing::info!(%id, done = moot.turns.len(), "resuming moot");
        self.events.publish(dto::MootEvent::bare(
            "moot_resumed",
            crate::now_ms(),
            id,
            format!(
                "moot {id} resumed after {} of {} turns",
                moot.turns.len(),
                plan.turns
            ),
        ));
        self.spawn_run(Run {
            id: id.to_string(),
            resolved,
            topic: plan.topic,
            settings,
            replay: moot.turns,
            summaries: moot.summaries,
        });
        Ok(dto::MootStarted { id: id.to_string() })
    }

    /// Resumes, shortly after start, the moots that were running when this
    /// host stopped.
    pub async fn resume_after_start(&self) {
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        for (id, cause, _) in self.book.paused() {
            if cause == PauseCause::HostStopped
                && let Err(e) = self.resume(&id).await
            {
                tracing::warn!(%id, error = %e, "moot not resumed");
            }
        }
    }

    /// A member reconnected: resume the moots paused because its node did
    /// not answer.
    pub async fn resume_of(&self, peer: PeerId) {
        let peer = peer.to_string();
        for (id, cause, peers) in self.book.paused() {
            if peers.contains(&peer)
                && cause == PauseCause::SpeakerSilent
                && let Err(e) = self.resume(&id).await
            {
                tracing::info!(%id, error = %e, "moot not resumed yet");
            }
        }
    }

    fn spawn_run(&self, run: Run) {
        let host = self.clone();
        let rt = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let id = run.id.clone();
            match run::run(&host, rt, run) {
                Ok(transcript) => {
                    let turns = transcript.utterances.len();
                    host.book.update(&id, |m| {
                        m.view.state = MootState::Finished;
                        m.view.reason = None;
                        m.view.cause = None;
                        m.view.turns_done = m.turns.len() as u32;
                        m.view.transcript = Some(transcript);
                    });
                    host.events.publish(dto::MootEvent::bare(
                        "moot_finished",
                        crate::now_ms(),
                        &id,
                        format!("moot {id} finished after {turns} turns"),
                    ));
                }
                Err(Paused { reason, cause }) => {
                    tracing::warn!(%id, %reason, "moot paused");
                    host.book.pause(&id, reason.clone(), cause);
                    host.events.publish(dto::MootEvent {
                        reason: Some(reason.clone()),
                        ..dto::MootEvent::bare(
                            "moot_paused",
                            crate::now_ms(),
                            &id,
                            format!("moot {id} paused: {}", Escaped(&reason)),
                        )
                    });
                }
            }
        });
    }

    /// The export of a finished moot: everything a reader needs, signed by
    /// this node (the host).
    pub async fn export(&self, id: &str) -> Result<dto::MootExport, ApiError> {
        let moot = self.book.get(id)?;
        let Some(transcript) = moot.view.transcript.clone() else {
            return Err(ApiError::conflict(format!(
                "moot {id} is {}; only a finished moot exports",
                moot.view.state.as_str()
            )));
        };
        let view = self.mesh.view();
        let roster = view
            .roster()
            .ok_or_else(|| ApiError::not_found("no mesh"))?
            .clone();
        // The chain that lets a reader check the roster offline; a node
        // that joined before welcomes carried it has none to give, and
        // its export verifies as unanchored.
        let (genesis, chain) = view.chain_from_genesis().unwrap_or_default();
        let body = wire::ExportBody {
            genesis,
            chain,
            moot_id: hex::decode(id).unwrap_or_default(),
            host: view.me.peer_id.clone(),
            mesh_id: roster.mesh_id.to_vec(),
            roster: roster.encode(),
            transcript: transcript.to_json_pretty(),
            turns: moot.turns.clone(),
            announcements: moot.announcements.clone(),
            exported_ms: crate::now_ms(),
        };
        let signed = self
            .mesh
            .call(move |core| codec::sign(&core.id, EXPORT_TAG, &body))
            .await?;
        Ok(dto::MootExport {
            format: EXPORT_FORMAT.into(),
            version: EXPORT_VERSION,
            id: id.to_string(),
            host: moot.view.host.clone(),
            mesh_id: hex::encode(roster.mesh_id),
            roster_hash: hex::encode(roster.hash()),
            transcript,
            signed: hex::encode(signed.encode_to_vec()),
        })
    }
}

/// Adds to `r` the roots of `key` that a saved announcement of its member
/// vouched for.
fn add_announced_roots(r: &mut Resolved, announcement: &Signed, key: &str) {
    let Ok(ann) = crate::wire::node::Announcement::decode(announcement.body.as_slice()) else {
        return;
    };
    if ann.peer_id != r.peer.to_bytes() {
        return;
    }
    for b in ann.shards.iter().flat_map(|s| s.books.iter()) {
        if b.key == key
            && let Ok(root) = <Hash>::try_from(b.root.as_slice())
            && !r.roots.contains(&(root, b.count))
        {
            r.roots.push((root, b.count));
        }
    }
}
