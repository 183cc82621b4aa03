//! The host side of cross-node moots: `grove moot start` on any member runs
//! the unchanged moot engine (`moot::host::run`) with one [`NodeSpeaker`]
//! per tree. Each turn goes to the node holding the tree's book (or stays
//! here for `self`), comes back signed, and is accepted only when
//! `moot::signed::check` passes (signer, announced root, proofs, chain) and
//! the engine's own re-grading agrees. Moots are kept in
//! `<state_dir>/moots/<id>.json`; a finished one exports with the host's
//! signature over everything a reader needs to verify it offline.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use libp2p::PeerId;
use prost::Message;

use super::control::resolve_peer;
use super::model_thread::ThreadModel;
use super::node::Node;
use crate::api::books::{ApiError, ErrorKind};
use crate::api::dto;
use crate::identity::peer_id_text;
use crate::merkle::Hash;
use crate::mesh::codec;
use crate::moot::export::{EXPORT_FORMAT, EXPORT_TAG};
use crate::moot::host::{self, Speaker, TurnCall};
use crate::moot::signed::{self, GENESIS_PREV};
use crate::moot::transcript::TranscriptRecord;
use crate::moot::{MootError, MootSettings, Passage, Tree, Utterance};
use crate::store::retriever::BookRetriever;
use crate::wire::mesh::Signed;
use crate::wire::moot as wire;

/// How many times a turn is asked before the moot pauses when the speaker's
/// node answers but its answer is refused.
const TURN_ATTEMPTS: usize = 2;

/// The longest wait between two tries of a speaker's node.
const MAX_RETRY_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Part of the reason of a moot paused on a speaker's node that never
/// answered; such a moot resumes when that node reconnects.
const NO_ANSWER: &str = "did not answer";

/// How a host retries a speaker's node that does not answer (config
/// `net.turn_retries`, `net.turn_retry_backoff_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnRetry {
    /// Tries after the first.
    pub retries: u32,
    /// The wait before the first retry; it doubles each time.
    pub backoff: std::time::Duration,
}

/// One moot as the host keeps it.
#[derive(Debug, Clone)]
struct Entry {
    view: dto::MootView,
    turns: Vec<Signed>,
    announcements: Vec<Signed>,
    plan: Option<dto::MootPlan>,
    summaries: Vec<String>,
}

/// The reason a moot shows when the host stopped while it ran; such moots
/// resume when the host starts again.
pub const HOST_STOPPED: &str = "the host stopped while the moot ran";

/// The moots this node hosts.
pub struct MootBook {
    dir: PathBuf,
    moots: Mutex<BTreeMap<String, Entry>>,
}

impl MootBook {
    /// Loads `<state_dir>/moots/`. A moot that was running when the node
    /// stopped is shown as paused.
    pub fn open(state_dir: &Path) -> MootBook {
        let dir = state_dir.join("moots");
        let mut moots = BTreeMap::new();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries.flatten().collect::<Vec<_>>(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "hosted moots cannot be read");
                Vec::new()
            }
        };
        for entry in entries {
            let path = entry.path();
            // Only `<id>.json`: a `.<id>.json.tmp` left by a crash mid-write
            // is an older copy of a file that was never replaced.
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            let file = match std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|t| serde_json::from_str::<dto::MootFile>(&t).map_err(|e| e.to_string()))
            {
                Ok(file) => file,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "unreadable moot file skipped");
                    continue;
                }
            };
            // Every saved message must decode: a turn dropped here would
            // shift the ones after it on resume.
            let decode = |list: &[String]| -> Option<Vec<Signed>> {
                list.iter()
                    .map(|h| Signed::decode(hex::decode(h).ok()?.as_slice()).ok())
                    .collect()
            };
            let (Some(turns), Some(announcements)) =
                (decode(&file.turns), decode(&file.announcements))
            else {
                tracing::warn!(path = %path.display(), "moot file with a corrupt signed message skipped");
                continue;
            };
            let mut view = file.view;
            if view.state == "running" {
                view.state = "paused".into();
                view.reason = Some(HOST_STOPPED.into());
            }
            moots.insert(
                view.id.clone(),
                Entry {
                    turns,
                    announcements,
                    plan: file.plan,
                    summaries: file.summaries,
                    view,
                },
            );
        }
        MootBook {
            dir,
            moots: Mutex::new(moots),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.moots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes one moot's file (atomically: a temporary file renamed over).
    fn persist(&self, entry: &Entry) {
        let file = dto::MootFile {
            view: entry.view.clone(),
            turns: entry
                .turns
                .iter()
                .map(|s| hex::encode(s.encode_to_vec()))
                .collect(),
            announcements: entry
                .announcements
                .iter()
                .map(|s| hex::encode(s.encode_to_vec()))
                .collect(),
            plan: entry.plan.clone(),
            summaries: entry.summaries.clone(),
        };
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(&self.dir)?;
            let path = self.dir.join(format!("{}.json", entry.view.id));
            let tmp = self.dir.join(format!(".{}.json.tmp", entry.view.id));
            std::fs::write(&tmp, serde_json::to_vec_pretty(&file).unwrap_or_default())?;
            std::fs::rename(&tmp, &path)
        };
        if let Err(e) = write() {
            tracing::warn!(error = %e, id = %entry.view.id, "moot not saved");
        }
    }

    fn update(&self, id: &str, f: impl FnOnce(&mut Entry)) {
        let mut moots = self.lock();
        if let Some(entry) = moots.get_mut(id) {
            f(entry);
            let copy = entry.clone();
            drop(moots);
            self.persist(&copy);
        }
    }

    pub fn list(&self) -> dto::MootList {
        dto::MootList {
            moots: self
                .lock()
                .values()
                .map(|e| dto::MootSummary {
                    id: e.view.id.clone(),
                    state: e.view.state.clone(),
                    reason: e.view.reason.clone(),
                    topic: e.view.topic.clone(),
                    trees: e.view.trees.clone(),
                    turns_done: e.view.turns_done,
                    turns: e.view.turns,
                })
                .collect(),
        }
    }

    /// Paused moots: (id, reason, the trees' peer ids).
    pub fn paused(&self) -> Vec<(String, String, Vec<String>)> {
        self.lock()
            .values()
            .filter(|e| e.view.state == "paused")
            .map(|e| {
                (
                    e.view.id.clone(),
                    e.view.reason.clone().unwrap_or_default(),
                    e.view.trees.iter().map(|t| t.peer_id.clone()).collect(),
                )
            })
            .collect()
    }

    pub fn show(&self, id: &str) -> Result<dto::MootView, ApiError> {
        self.lock()
            .get(id)
            .map(|e| e.view.clone())
            .ok_or_else(|| ApiError::new(ErrorKind::NotFound, format!("no moot {id} on this node")))
    }
}

/// A tree as the host resolved it.
struct Resolved {
    peer: PeerId,
    local: bool,
    tree: Tree,
    signer: [u8; 32],
    roots: Vec<(Hash, u64)>,
    announcement: Option<Signed>,
}

/// Called after each accepted turn: every signed turn so far, the turn's
/// wall time in ms, and its utterance.
type OnTurn = Arc<dyn Fn(&[Signed], u64, &Utterance) + Send + Sync>;

/// One tree's speaker: the node holding its book, reached over the network
/// (or locally for this node's own books). Runs on a blocking thread.
struct NodeSpeaker {
    node: Node,
    rt: tokio::runtime::Handle,
    moot_id: Vec<u8>,
    who: Resolved,
    chain: Arc<Mutex<(Vec<u8>, Vec<Signed>)>>,
    on_turn: OnTurn,
    /// Turns accepted before a resume: re-checked, not asked again.
    replay: Arc<Vec<Signed>>,
}

impl NodeSpeaker {
    fn fail(&self, reason: impl Into<String>) -> MootError {
        MootError::Speaker {
            book: self.who.tree.key.clone(),
            reason: reason.into(),
        }
    }

    /// Sends `call` to the speaker's node; a node that does not answer is
    /// tried again with backoff before the turn fails.
    fn send(&self, call: &wire::TurnCall) -> Result<wire::TurnAnswer, MootError> {
        let bytes = call.encode_to_vec();
        if self.who.local {
            return Ok(self
                .rt
                .block_on(super::turns::answer(&self.node, None, &bytes)));
        }
        let retry = self.node.shared().turn_retry;
        let started = std::time::Instant::now();
        let mut wait = retry.backoff;
        let mut tries = 0u32;
        loop {
            // A member removed since the moot began is not asked any more.
            let still_member = self
                .node
                .view()
                .roster()
                .is_some_and(|r| r.member(&self.who.peer.to_bytes()).is_some());
            if !still_member {
                return Err(self.fail(format!(
                    "{} was removed from the mesh; its tree cannot speak",
                    self.who.peer
                )));
            }
            tries += 1;
            let answer = self.rt.block_on(async {
                // Members dial each other as they learn addresses; make sure
                // rather than fail a turn on a connection still coming up.
                let _ = self.node.ensure_connected(self.who.peer).await;
                self.node
                    .shared()
                    .net
                    .request(self.who.peer, "/grove/turn/1", bytes.clone())
                    .await
            });
            match answer {
                Ok(answer) => {
                    return wire::TurnAnswer::decode(answer.as_slice())
                        .map_err(|_| self.fail("the speaker's node sent a malformed answer"));
                }
                Err(e) if tries <= retry.retries => {
                    tracing::info!(
                        book = %self.who.tree.key,
                        error = %e,
                        wait_ms = wait.as_millis() as u64,
                        "the speaker's node did not answer; trying again"
                    );
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(MAX_RETRY_WAIT);
                }
                Err(e) => {
                    return Err(self.fail(format!(
                        "the speaker's node {NO_ANSWER} ({tries} tries over {:.1} s): {e}",
                        started.elapsed().as_secs_f64()
                    )));
                }
            }
        }
    }

    fn tree_ref(t: &Tree) -> wire::TreeRef {
        wire::TreeRef {
            key: t.key.clone(),
            title: t.title.clone(),
            author: t.author.clone(),
            genre: t.genre.clone(),
        }
    }
}

impl Speaker for NodeSpeaker {
    fn opening(&mut self, query: &str, k: usize) -> Result<Vec<Passage>, MootError> {
        let call = wire::TurnCall {
            moot_id: self.moot_id.clone(),
            speaker: Some(Self::tree_ref(&self.who.tree)),
            query: query.to_string(),
            k: k as u32,
            opening: true,
            ..Default::default()
        };
        let mut last = None;
        for _ in 0..TURN_ATTEMPTS {
            match self.send(&call)?.kind {
                Some(wire::turn_answer::Kind::Opening(o)) => {
                    let root: Hash = match o.book_root.as_slice().try_into() {
                        Ok(r) => r,
                        Err(_) => {
                            last = Some("its book root is not 32 bytes".to_string());
                            continue;
                        }
                    };
                    if !self.who.roots.contains(&(root, o.book_count)) {
                        last = Some("it searched a book root it did not announce".into());
                        continue;
                    }
                    let checked: Result<Vec<Passage>, _> = o
                        .passages
                        .iter()
                        .map(|p| signed::check_passage(p, &self.who.tree.key, &root, o.book_count))
                        .collect();
                    match checked {
                        Ok(p) => return Ok(p),
                        Err(e) => last = Some(e.to_string()),
                    }
                }
                Some(wire::turn_answer::Kind::Refused(r)) => last = Some(format!("refused: {r}")),
                _ => last = Some("an unexpected answer to the opening search".into()),
            }
        }
        Err(self.fail(last.unwrap_or_default()))
    }

    fn turn(&mut self, call: &TurnCall) -> Result<Utterance, MootError> {
        let r = &call.request;
        let prev = self
            .chain
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone();
        let line = |l: &crate::moot::prompt::Line| wire::Line {
            turn: l.turn,
            title: l.title.clone(),
            text: l.text.clone(),
        };
        let wire_call = wire::TurnCall {
            moot_id: self.moot_id.clone(),
            turn: r.turn,
            r#move: r.mv.as_str().to_string(),
            speaker: Some(Self::tree_ref(&r.speaker)),
            other: Some(Self::tree_ref(&r.other)),
            topic: r.topic.clone().unwrap_or_default(),
            query: r.query.clone(),
            given: call
                .given
                .iter()
                .flatten()
                .map(|p| p.node_id.clone())
                .collect(),
            pool: r.pool.iter().map(|p| p.node_id.clone()).collect(),
            cited: call.cited.iter().cloned().collect(),
            other_turns: r.other_turns.clone().into_iter().collect(),
            own_turns: r.own_turns.clone().into_iter().collect(),
            incoming: r.incoming.as_ref().map(line),
            recent: r.recent.iter().map(line).collect(),
            summary: r.summary.clone().unwrap_or_default(),
            temperature: r.temperature,
            max_tokens: r.max_tokens,
            seed: r.seed,
            k: call.k as u32,
            prev_hash: prev.clone(),
            opening: false,
        };
        let prev_arr: [u8; 32] = prev.as_slice().try_into().unwrap_or(GENESIS_PREV);
        if let Some(done) = self.replay.get(r.turn as usize - 1) {
            let expect = signed::Expect {
                moot_id: &self.moot_id,
                turn: r.turn,
                prev_hash: &prev_arr,
                book: &self.who.tree.key,
                signer: &self.who.signer,
                roots: &self.who.roots,
            };
            let checked = signed::check(done, &expect)
                .map_err(|e| self.fail(format!("turn {} as saved: {e}", r.turn)))?;
            let mut chain = self.chain.lock().unwrap_or_else(|e| e.into_inner());
            chain.0 = checked.hash.to_vec();
            chain.1.push(done.clone());
            return Ok(checked.utterance);
        }
        let started = std::time::Instant::now();
        let mut last = String::new();
        for _ in 0..TURN_ATTEMPTS {
            match self.send(&wire_call)?.kind {
                Some(wire::turn_answer::Kind::Turn(signed_turn)) => {
                    let expect = signed::Expect {
                        moot_id: &self.moot_id,
                        turn: r.turn,
                        prev_hash: &prev_arr,
                        book: &self.who.tree.key,
                        signer: &self.who.signer,
                        roots: &self.who.roots,
                    };
                    // Signature, root, proofs and chain first; then the
                    // host's own re-grading, so nothing is recorded (or
                    // replayed on resume) that the engine would refuse.
                    let checked = signed::check(&signed_turn, &expect)
                        .map_err(|e| format!("turn {} refused: {e}", r.turn))
                        .and_then(|checked| match host::check_turn(call, &checked.utterance) {
                            Ok(_) => Ok(checked),
                            Err(MootError::Speaker { reason, .. })
                                if reason.starts_with("turn ") =>
                            {
                                Err(reason)
                            }
                            Err(e) => Err(format!("turn {}: {e}", r.turn)),
                        });
                    match checked {
                        Ok(checked) => {
                            let turns = {
                                let mut chain =
                                    self.chain.lock().unwrap_or_else(|e| e.into_inner());
                                chain.0 = checked.hash.to_vec();
                                chain.1.push(signed_turn);
                                chain.1.clone()
                            };
                            (self.on_turn)(
                                &turns,
                                started.elapsed().as_millis() as u64,
                                &checked.utterance,
                            );
                            return Ok(checked.utterance);
                        }
                        Err(reason) => last = reason,
                    }
                }
                Some(wire::turn_answer::Kind::Refused(reason)) => {
                    last = format!("turn {} refused by the speaker's node: {reason}", r.turn)
                }
                _ => last = format!("turn {}: an unexpected answer", r.turn),
            }
            tracing::info!(book = %self.who.tree.key, reason = %last, "asking the turn once more");
        }
        Err(self.fail(last))
    }
}

/// The host's narrator: summaries written before a resume are given back
/// as they were; new ones come from the host's model and are saved.
struct ReplayNarrator {
    model: ThreadModel,
    recorded: std::collections::VecDeque<String>,
    record: Box<dyn Fn(&str) + Send>,
}

impl crate::model::ChatModel for ReplayNarrator {
    fn complete(
        &mut self,
        request: &crate::model::ChatRequest,
    ) -> Result<String, crate::model::ModelError> {
        if let Some(text) = self.recorded.pop_front() {
            return Ok(text);
        }
        let text = self.model.complete(request)?;
        (self.record)(&text);
        Ok(text)
    }

    fn describe(&self) -> String {
        self.model.describe()
    }
}

/// A tree argument: `PEER:KEY` (PEER is `self`, a member's name or peer id).
pub fn parse_tree_arg(text: &str) -> Result<(String, String), ApiError> {
    let (peer, key) = text.split_once(':').ok_or_else(|| {
        ApiError::new(
            ErrorKind::BadRequest,
            format!("tree `{text}`: expected PEER:KEY, e.g. self:fiction/moby-dick"),
        )
    })?;
    Ok((peer.trim().to_string(), key.trim().to_string()))
}

impl Node {
    async fn resolve_tree(&self, peer_text: &str, key: &str) -> Result<Resolved, ApiError> {
        let view = self.view();
        let roster = view.roster().ok_or_else(|| {
            ApiError::new(ErrorKind::NotFound, "no mesh: a moot runs between members")
        })?;
        let me = self.shared().net.local_peer_id();
        let peer_bytes = if peer_text == "self" {
            me.to_bytes()
        } else {
            resolve_peer(&view, peer_text)?
        };
        let member = roster.member(&peer_bytes).ok_or_else(|| {
            ApiError::new(
                ErrorKind::BadRequest,
                format!("{} is not a member of the mesh", peer_id_text(&peer_bytes)),
            )
        })?;
        let peer = PeerId::from_bytes(&peer_bytes)
            .map_err(|_| ApiError::new(ErrorKind::BadRequest, "bad peer id"))?;
        if peer == me {
            let k = key.to_string();
            let (tree, root, count) = self
                .shared()
                .store
                .call(move |b| {
                    let r = BookRetriever::open(b.store(), &k)?;
                    Ok((r.tree(), r.book().root, r.book().count))
                })
                .await?;
            // The export vouches for every root with a signed announcement:
            // this node's must list the book as it is now.
            let announcement = self
                .peers()
                .own
                .as_ref()
                .filter(|k| {
                    k.announcement
                        .shards
                        .iter()
                        .flat_map(|s| s.books.iter())
                        .any(|b| {
                            b.key == key && b.root.as_slice() == root.as_slice() && b.count == count
                        })
                })
                .map(|k| k.signed.clone());
            if announcement.is_none() {
                self.books_changed();
                return Err(ApiError::new(
                    ErrorKind::Conflict,
                    format!(
                        "this node has not announced {key} as it is now yet; try again in a second"
                    ),
                ));
            }
            return Ok(Resolved {
                peer,
                local: true,
                tree,
                signer: member.ed25519,
                roots: vec![(root, count)],
                announcement,
            });
        }
        let peers = self.peers();
        let known = peers.announcements.get(&peer_bytes).ok_or_else(|| {
            ApiError::new(
                ErrorKind::Conflict,
                format!("{} has not announced its books yet", member.name),
            )
        })?;
        let book = known
            .announcement
            .shards
            .iter()
            .flat_map(|s| s.books.iter())
            .find(|b| b.key == key)
            .ok_or_else(|| {
                ApiError::new(
                    ErrorKind::NotFound,
                    format!("{} does not announce a book {key}", member.name),
                )
            })?;
        let root: Hash = book
            .root
            .as_slice()
            .try_into()
            .map_err(|_| ApiError::new(ErrorKind::Internal, "bad announced root"))?;
        Ok(Resolved {
            peer,
            local: false,
            tree: Tree::new(key, &book.title, &book.author),
            signer: member.ed25519,
            roots: vec![(root, book.count)],
            announcement: Some(known.signed.clone()),
        })
    }

    /// Starts a moot hosted here; returns at once with its id.
    pub async fn moot_start(&self, req: dto::MootStart) -> Result<dto::MootStarted, ApiError> {
        if req.trees.len() < 2 {
            return Err(ApiError::new(
                ErrorKind::BadRequest,
                "a moot needs at least two trees (--a and --b, or --tree more than once)",
            ));
        }
        let mut settings: MootSettings = self.shared().moot_settings.clone();
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
            .map_err(|e| ApiError::new(ErrorKind::BadRequest, e.to_string()))?;
        let mut resolved = Vec::new();
        for t in &req.trees {
            let (peer, key) = parse_tree_arg(t)?;
            resolved.push(self.resolve_tree(&peer, &key).await?);
        }
        for (i, r) in resolved.iter().enumerate() {
            if resolved[..i].iter().any(|o| o.tree.key == r.tree.key) {
                return Err(ApiError::new(
                    ErrorKind::BadRequest,
                    format!(
                        "{} is given twice: the trees must be different books",
                        r.tree.key
                    ),
                ));
            }
        }
        let mut id_bytes = [0u8; 16];
        rand::Rng::fill_bytes(&mut rand::rng(), &mut id_bytes);
        let id = hex::encode(id_bytes);
        let me = self.shared().net.local_peer_id();
        let plan = dto::MootPlan {
            trees: resolved
                .iter()
                .map(|r| format!("{}:{}", r.peer, r.tree.key))
                .collect(),
            topic: req.topic.clone(),
            turns: settings.turns,
            k: settings.k,
            temperature: settings.temperature,
            max_tokens: settings.max_tokens,
            seed: settings.seed,
            summary_every: settings.summary_every,
        };
        let view = dto::MootView {
            id: id.clone(),
            state: "running".into(),
            reason: None,
            host: me.to_string(),
            trees: resolved
                .iter()
                .map(|r| dto::MootTree {
                    peer_id: r.peer.to_string(),
                    key: r.tree.key.clone(),
                    title: r.tree.title.clone(),
                })
                .collect(),
            topic: req.topic.clone(),
            turns: settings.turns,
            turns_done: 0,
            turn_ms: Vec::new(),
            lines: Vec::new(),
            transcript: None,
        };
        let entry = Entry {
            view: view.clone(),
            turns: Vec::new(),
            announcements: resolved
                .iter()
                .filter_map(|r| r.announcement.clone())
                .collect(),
            plan: Some(plan),
            summaries: Vec::new(),
        };
        self.shared().moots.lock().insert(id.clone(), entry.clone());
        self.shared().moots.persist(&entry);
        self.spawn_runner(
            id,
            resolved,
            req.topic.clone(),
            settings,
            Vec::new(),
            Vec::new(),
        );
        Ok(dto::MootStarted { id: view.id })
    }

    /// Resumes a paused moot: the turns already accepted are re-checked
    /// and kept, the rest are asked for.
    pub async fn moot_resume(&self, id: &str) -> Result<dto::MootStarted, ApiError> {
        let entry = self.shared().moots.lock().get(id).cloned().ok_or_else(|| {
            ApiError::new(ErrorKind::NotFound, format!("no moot {id} on this node"))
        })?;
        if entry.view.state != "paused" {
            return Err(ApiError::new(
                ErrorKind::Conflict,
                format!(
                    "moot {id} is {}; only a paused moot resumes",
                    entry.view.state
                ),
            ));
        }
        let plan = entry.plan.clone().ok_or_else(|| {
            ApiError::new(ErrorKind::Conflict, "this moot was saved without its plan")
        })?;
        let mut resolved = Vec::new();
        for t in &plan.trees {
            let (peer, key) = parse_tree_arg(t)?;
            let mut r = self.resolve_tree(&peer, &key).await?;
            // Turns already taken were against the roots announced then.
            for a in &entry.announcements {
                if let Ok(ann) = crate::wire::node::Announcement::decode(a.body.as_slice())
                    && ann.peer_id == r.peer.to_bytes()
                {
                    for b in ann.shards.iter().flat_map(|s| s.books.iter()) {
                        if b.key == key
                            && let Ok(root) = <Hash>::try_from(b.root.as_slice())
                            && !r.roots.contains(&(root, b.count))
                        {
                            r.roots.push((root, b.count));
                        }
                    }
                }
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
        self.shared().moots.update(id, |e| {
            e.view.state = "running".into();
            e.view.reason = None;
            for a in new_announcements {
                if !e.announcements.contains(&a) {
                    e.announcements.push(a);
                }
            }
        });
        tracing::info!(%id, done = entry.turns.len(), "resuming moot");
        self.spawn_runner(
            id.to_string(),
            resolved,
            plan.topic.clone(),
            settings,
            entry.turns.clone(),
            entry.summaries.clone(),
        );
        Ok(dto::MootStarted { id: id.to_string() })
    }

    /// Resumes, shortly after start, the moots that were running when this
    /// host stopped, and later the ones paused on a speaker that comes back.
    pub async fn resume_moots_after_start(&self) {
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        for (id, reason, _) in self.shared().moots.paused() {
            if reason == HOST_STOPPED
                && let Err(e) = self.moot_resume(&id).await
            {
                tracing::warn!(%id, error = %e, "moot not resumed");
            }
        }
    }

    /// A member reconnected: resume the moots paused because its node did
    /// not answer.
    pub async fn resume_moots_of(&self, peer: PeerId) {
        let peer = peer.to_string();
        for (id, reason, peers) in self.shared().moots.paused() {
            if peers.contains(&peer)
                && reason.contains(NO_ANSWER)
                && let Err(e) = self.moot_resume(&id).await
            {
                tracing::info!(%id, error = %e, "moot not resumed yet");
            }
        }
    }

    fn spawn_runner(
        &self,
        id: String,
        resolved: Vec<Resolved>,
        topic: Option<String>,
        settings: MootSettings,
        replay: Vec<Signed>,
        summaries: Vec<String>,
    ) {
        let node = self.clone();
        let rt = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let moot_id = hex::decode(&id).unwrap_or_default();
            let result = node.run_moot(
                rt, &id, moot_id, resolved, topic, settings, replay, summaries,
            );
            match result {
                Ok(transcript) => node.shared().moots.update(&id, |e| {
                    e.view.state = "finished".into();
                    e.view.reason = None;
                    e.view.turns_done = e.turns.len() as u32;
                    e.view.transcript = Some(transcript);
                }),
                Err(reason) => {
                    tracing::warn!(%id, %reason, "moot paused");
                    node.shared().moots.update(&id, |e| {
                        e.view.state = "paused".into();
                        e.view.reason = Some(reason);
                    })
                }
            }
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn run_moot(
        &self,
        rt: tokio::runtime::Handle,
        id: &str,
        moot_id: Vec<u8>,
        resolved: Vec<Resolved>,
        topic: Option<String>,
        settings: MootSettings,
        replay: Vec<Signed>,
        summaries: Vec<String>,
    ) -> Result<TranscriptRecord, String> {
        let chain = Arc::new(Mutex::new((GENESIS_PREV.to_vec(), Vec::new())));
        let replay = Arc::new(replay);
        let book = Arc::new(self.clone());
        let moot = id.to_string();
        let on_turn: OnTurn = Arc::new(move |turns: &[Signed], ms: u64, u: &Utterance| {
            book.shared().moots.update(&moot, |e| {
                e.turns = turns.to_vec();
                e.view.turns_done = turns.len() as u32;
                e.view.turn_ms.push(ms);
                e.view.lines.push(dto::MootLine {
                    turn: u.turn,
                    key: u.speaker.clone(),
                    title: u.title.clone(),
                    text: u.text.clone(),
                    grounded: u.grounded,
                    decision: u.decision.as_ref().map(Into::into),
                });
            });
        });
        let trees: Vec<Tree> = resolved.iter().map(|r| r.tree.clone()).collect();
        let mut speakers: Vec<NodeSpeaker> = resolved
            .into_iter()
            .map(|who| NodeSpeaker {
                node: self.clone(),
                rt: rt.clone(),
                moot_id: moot_id.clone(),
                who,
                chain: chain.clone(),
                on_turn: on_turn.clone(),
                replay: replay.clone(),
            })
            .collect();
        let description = self
            .shared()
            .model
            .call_blocking(|m| m.describe())
            .map_err(|e| format!("the host's model: {e}"))?;
        let node = self.clone();
        let moot = id.to_string();
        let mut narrator = ReplayNarrator {
            model: ThreadModel {
                thread: self.shared().model.clone(),
                description,
            },
            recorded: summaries.into(),
            record: Box::new(move |text: &str| {
                let text = text.to_string();
                node.shared()
                    .moots
                    .update(&moot, |e| e.summaries.push(text));
            }),
        };
        let speakers: Vec<&mut dyn Speaker> =
            speakers.iter_mut().map(|s| s as &mut dyn Speaker).collect();
        let moot = host::run(trees, topic, settings, speakers, &mut narrator, &mut |_| {})
            .map_err(|e| e.to_string())?;
        Ok(TranscriptRecord::from(&moot))
    }

    /// The export of a finished moot: everything a reader needs, signed by
    /// this node (the host).
    pub async fn moot_export(&self, id: &str) -> Result<dto::MootExport, ApiError> {
        let entry = self.shared().moots.lock().get(id).cloned().ok_or_else(|| {
            ApiError::new(ErrorKind::NotFound, format!("no moot {id} on this node"))
        })?;
        let Some(transcript) = entry.view.transcript.clone() else {
            return Err(ApiError::new(
                ErrorKind::Conflict,
                format!(
                    "moot {id} is {}; only a finished moot exports",
                    entry.view.state
                ),
            ));
        };
        let view = self.view();
        let roster = view
            .roster()
            .ok_or_else(|| ApiError::new(ErrorKind::NotFound, "no mesh"))?
            .clone();
        let body = wire::ExportBody {
            moot_id: hex::decode(id).unwrap_or_default(),
            host: view.me.peer_id.clone(),
            mesh_id: roster.mesh_id.to_vec(),
            roster: roster.encode(),
            transcript: transcript.to_json_pretty(),
            turns: entry.turns.clone(),
            announcements: entry.announcements.clone(),
            exported_ms: crate::now_ms(),
        };
        let signed = self
            .shared()
            .mesh
            .call(move |core| codec::sign(&core.id, EXPORT_TAG, &body))
            .await
            .map_err(|e| ApiError::new(ErrorKind::Unavailable, e.to_string()))?;
        Ok(dto::MootExport {
            format: EXPORT_FORMAT.into(),
            version: 1,
            id: id.to_string(),
            host: entry.view.host.clone(),
            mesh_id: hex::encode(roster.mesh_id),
            roster_hash: hex::encode(roster.hash()),
            transcript,
            signed: hex::encode(signed.encode_to_vec()),
        })
    }
}
