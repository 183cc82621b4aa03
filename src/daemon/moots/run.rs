//! One hosted moot's run: the unchanged moot engine (`moot::host::run`) with
//! one [`NodeSpeaker`] per tree. Each turn goes to the node holding the
//! tree's book (or stays here for `self`), comes back signed, and is
//! accepted only when `moot::signed::check` passes (signer, announced root,
//! proofs, chain) and the engine's own re-grading agrees.

use std::sync::{Arc, Mutex};

use libp2p::PeerId;
use prost::Message;

use super::MootHost;
use super::book::{NO_ANSWER, PauseCause, SavedLine};
use crate::daemon::model::WorkerModel;
use crate::daemon::rpc::turn;
use crate::daemon::stats::Verdict;
use crate::merkle::Hash;
use crate::mesh::names::Escaped;
use crate::moot::host::{self, Accepted, Speaker, TurnCall};
use crate::moot::signed::{self, GENESIS_PREV};
use crate::moot::transcript::TranscriptRecord;
use crate::moot::{MootError, MootSettings, Passage, Tree, Utterance};
use crate::net::Protocol;
use crate::wire::mesh::Signed;
use crate::wire::moot as wire;

/// How many times a turn is asked before the moot pauses when the speaker's
/// node answers but its answer is refused.
const TURN_ATTEMPTS: usize = 2;

/// The longest wait between two tries of a speaker's node.
const MAX_RETRY_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// A tree as the host resolved it.
pub(super) struct Resolved {
    pub peer: PeerId,
    pub local: bool,
    pub tree: Tree,
    pub signer: [u8; 32],
    pub roots: Vec<(Hash, u64)>,
    pub announcement: Option<Signed>,
}

impl Resolved {
    /// What a turn of this tree must be checked against.
    fn expect<'a>(
        &'a self,
        moot_id: &'a [u8],
        turn: u32,
        prev: &'a [u8; 32],
    ) -> signed::Expect<'a> {
        signed::Expect {
            moot_id,
            turn,
            prev_hash: prev,
            book: &self.tree.key,
            signer: &self.signer,
            roots: &self.roots,
        }
    }
}

/// Called after each accepted turn: every signed turn so far, the turn's
/// wall time in ms, and its utterance.
type OnTurn = Arc<dyn Fn(&[Signed], u64, &Utterance, PeerId) + Send + Sync>;

/// The chain of accepted turns: the last turn's hash and every signed turn.
type Chain = Arc<Mutex<(Vec<u8>, Vec<Signed>)>>;

/// One tree's speaker: the node holding its book, reached over the network
/// (or locally for this node's own books). Runs on a blocking thread.
struct NodeSpeaker {
    host: MootHost,
    rt: tokio::runtime::Handle,
    moot_id: Vec<u8>,
    who: Resolved,
    chain: Chain,
    on_turn: OnTurn,
    /// Turns accepted before a resume: re-checked, not asked again.
    replay: Arc<Vec<Signed>>,
    /// Set when the speaker's node never answered (the moot then resumes
    /// when it reconnects).
    silent: Arc<Mutex<bool>>,
}

impl NodeSpeaker {
    fn fail(&self, reason: impl Into<String>) -> MootError {
        MootError::Speaker {
            book: self.who.tree.key.clone(),
            reason: reason.into(),
        }
    }

    fn prev(&self) -> Vec<u8> {
        self.chain
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone()
    }

    /// Sends `call` to the speaker's node; a node that does not answer is
    /// tried again with backoff before the turn fails.
    fn send(&self, call: &wire::TurnCall) -> Result<wire::TurnAnswer, MootError> {
        let bytes = call.encode_to_vec();
        if self.who.local {
            return Ok(self
                .rt
                .block_on(turn::answer(&self.host.speaking, None, &bytes)));
        }
        let retry = self.host.retry;
        let started = std::time::Instant::now();
        let mut wait = retry.backoff;
        let mut tries = 0u32;
        loop {
            // A member removed since the moot began is not asked any more.
            if !crate::daemon::rpc::is_member(&self.host.mesh.view(), self.who.peer) {
                return Err(self.fail(format!(
                    "{} was removed from the mesh; its tree cannot speak",
                    self.who.peer
                )));
            }
            tries += 1;
            let answer = self.rt.block_on(async {
                // Members dial each other as they learn addresses; make sure
                // rather than fail a turn on a connection still coming up.
                let net = &self.host.net;
                let _ = self.host.peers.ensure_connected(net, self.who.peer).await;
                net.request(self.who.peer, Protocol::Turn, bytes.clone())
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
                    *self.silent.lock().unwrap_or_else(|e| e.into_inner()) = true;
                    return Err(self.fail(format!(
                        "the speaker's node {NO_ANSWER} ({tries} tries over {:.1} s): {e}",
                        started.elapsed().as_secs_f64()
                    )));
                }
            }
        }
    }

    /// Adds an accepted turn to the chain; returns every turn so far.
    fn accept(&self, hash: Hash, signed_turn: Signed) -> Vec<Signed> {
        let mut chain = self.chain.lock().unwrap_or_else(|e| e.into_inner());
        chain.0 = hash.to_vec();
        chain.1.push(signed_turn);
        chain.1.clone()
    }

    /// Checks one signed answer: signature, root, proofs and chain first;
    /// then the host's own re-grading, so nothing is recorded (or replayed
    /// on resume) that the engine would refuse.
    fn check(
        &self,
        call: &TurnCall,
        signed_turn: &Signed,
        prev: &[u8; 32],
    ) -> Result<(Hash, Accepted), String> {
        let turn = call.request.turn;
        let expect = self.who.expect(&self.moot_id, turn, prev);
        let checked =
            signed::check(signed_turn, &expect).map_err(|e| format!("turn {turn} refused: {e}"))?;
        match host::check_turn(call, checked.utterance) {
            Ok(accepted) => Ok((checked.hash, accepted)),
            Err(MootError::Speaker { reason, .. }) if reason.starts_with("turn ") => Err(reason),
            Err(e) => Err(format!("turn {turn}: {e}")),
        }
    }
}

impl Speaker for NodeSpeaker {
    fn opening(&mut self, query: &str, k: usize) -> Result<Vec<Passage>, MootError> {
        let call = turn::opening_call(&self.moot_id, &self.who.tree, query, k);
        let mut last = None;
        for _ in 0..TURN_ATTEMPTS {
            match self.send(&call)?.kind {
                Some(wire::turn_answer::Kind::Opening(o)) => {
                    let Ok(root) = <Hash>::try_from(o.book_root.as_slice()) else {
                        last = Some("its book root is not 32 bytes".to_string());
                        continue;
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
                Some(wire::turn_answer::Kind::Refused(r)) => {
                    last = Some(format!("refused: {}", Escaped(&r)))
                }
                _ => last = Some("an unexpected answer to the opening search".into()),
            }
        }
        Err(self.fail(last.unwrap_or_default()))
    }

    fn turn(&mut self, call: &TurnCall) -> Result<Accepted, MootError> {
        let turn = call.request.turn;
        let prev = self.prev();
        let prev_arr: [u8; 32] = prev.as_slice().try_into().unwrap_or(GENESIS_PREV);
        if let Some(done) = self.replay.get(turn as usize - 1) {
            let (hash, accepted) = self
                .check(call, done, &prev_arr)
                .map_err(|e| self.fail(format!("turn {turn} as saved: {e}")))?;
            self.accept(hash, done.clone());
            return Ok(accepted);
        }
        let wire_call = turn::wire_call(call, &self.moot_id, prev);
        let started = std::time::Instant::now();
        let mut last = String::new();
        for _ in 0..TURN_ATTEMPTS {
            match self.send(&wire_call)?.kind {
                Some(wire::turn_answer::Kind::Turn(signed_turn)) => {
                    match self.check(call, &signed_turn, &prev_arr) {
                        Ok((hash, accepted)) => {
                            let turns = self.accept(hash, signed_turn);
                            let took = started.elapsed();
                            let speaker = if self.who.local { "local" } else { "remote" };
                            let u = accepted.utterance();
                            let passed = u.decision.as_ref().is_some_and(|d| d.action() == "pass");
                            let verdict = match (passed, u.grounded) {
                                (true, _) => Verdict::Passed,
                                (false, true) => Verdict::Grounded,
                                (false, false) => Verdict::Ungrounded,
                            };
                            let counts = &u.grounding.counts;
                            self.host.stats.turn_landed(
                                speaker,
                                took,
                                verdict,
                                (counts.quotes_total, counts.quotes_found),
                            );
                            let ms = took.as_millis() as u64;
                            (self.on_turn)(&turns, ms, u, self.who.peer);
                            return Ok(accepted);
                        }
                        Err(reason) => last = reason,
                    }
                }
                Some(wire::turn_answer::Kind::Refused(reason)) => {
                    last = format!(
                        "turn {turn} refused by the speaker's node {}: {}",
                        self.who.peer,
                        Escaped(&reason)
                    )
                }
                _ => last = format!("turn {turn}: an unexpected answer"),
            }
            tracing::info!(book = %self.who.tree.key, reason = %last, "asking the turn once more");
        }
        self.host.stats.bump("moot.turns.failed");
        Err(self.fail(last))
    }
}

/// The host's narrator: summaries written before a resume are given back
/// as they were; new ones come from the host's model and are saved.
struct ReplayNarrator {
    model: WorkerModel,
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

/// Everything one run of a moot starts from.
pub(super) struct Run {
    pub id: String,
    pub resolved: Vec<Resolved>,
    pub topic: Option<String>,
    pub settings: MootSettings,
    /// Signed turns accepted before a resume.
    pub replay: Vec<Signed>,
    /// Summaries written before a resume.
    pub summaries: Vec<String>,
}

/// How a run ended without a transcript: the reason shown, and its cause.
pub(super) struct Paused {
    pub reason: String,
    pub cause: PauseCause,
}

/// Runs one moot to its end on this (blocking) thread; every accepted turn
/// and summary is saved in the moot book as it comes.
pub(super) fn run(
    host: &MootHost,
    rt: tokio::runtime::Handle,
    run: Run,
) -> Result<TranscriptRecord, Paused> {
    let moot_id = hex::decode(&run.id).unwrap_or_default();
    let chain: Chain = Arc::new(Mutex::new((GENESIS_PREV.to_vec(), Vec::new())));
    let replay = Arc::new(run.replay);
    let silent = Arc::new(Mutex::new(false));
    let on_turn = saving_turns(host, &run.id);
    let trees: Vec<Tree> = run.resolved.iter().map(|r| r.tree.clone()).collect();
    let mut speakers: Vec<NodeSpeaker> = run
        .resolved
        .into_iter()
        .map(|who| NodeSpeaker {
            host: host.clone(),
            rt: rt.clone(),
            moot_id: moot_id.clone(),
            who,
            chain: chain.clone(),
            on_turn: on_turn.clone(),
            replay: replay.clone(),
            silent: silent.clone(),
        })
        .collect();
    let mut narrator = narrator(host, &run.id, run.summaries)?;
    let speakers: Vec<&mut dyn Speaker> =
        speakers.iter_mut().map(|s| s as &mut dyn Speaker).collect();
    let finished = host::run(
        trees,
        run.topic,
        run.settings,
        speakers,
        &mut narrator,
        &mut |_| {},
    );
    match finished {
        Ok(moot) => Ok(TranscriptRecord::from(&moot)),
        Err(e) => Err(Paused {
            reason: e.to_string(),
            cause: if *silent.lock().unwrap_or_else(|e| e.into_inner()) {
                PauseCause::SpeakerSilent
            } else {
                PauseCause::Other
            },
        }),
    }
}

/// What a landed turn does: it is saved in the moot book (turns, timing,
/// the line shown), then published on the event stream.
fn saving_turns(host: &MootHost, id: &str) -> OnTurn {
    let (book, moot, events) = (host.book.clone(), id.to_string(), host.events.clone());
    Arc::new(move |turns: &[Signed], ms: u64, u: &Utterance, peer| {
        let at = crate::now_ms();
        let mut index = None;
        book.update(&moot, |m| {
            m.turns = turns.to_vec();
            m.view.turns_done = turns.len() as u32;
            m.view.turn_ms.push(ms);
            index = Some(m.view.lines.len() as u32);
            m.view.lines.push(SavedLine {
                turn: u.turn,
                key: u.speaker.clone(),
                title: u.title.clone(),
                text: u.text.clone(),
                grounded: u.grounded,
                decision: u.decision.as_ref().map(Into::into),
                at,
            });
        });
        // Published once the turn is saved, so `/v1/moot/show` has it.
        if let Some(index) = index {
            events.publish(super::turn_event(&moot, index, u, peer, at));
        }
    })
}

/// The narrator of a run: the host's model, replaying the summaries a
/// resumed run already made, and saving each new one.
fn narrator(host: &MootHost, id: &str, summaries: Vec<String>) -> Result<ReplayNarrator, Paused> {
    let description = host
        .speaking
        .model
        .call_blocking(|m| m.describe())
        .map_err(|e| Paused {
            reason: format!("the host's model: {e}"),
            cause: PauseCause::Other,
        })?;
    let (book, moot) = (host.book.clone(), id.to_string());
    Ok(ReplayNarrator {
        model: WorkerModel {
            worker: host.speaking.model.clone(),
            description,
        },
        recorded: summaries.into(),
        record: Box::new(move |text: &str| {
            let text = text.to_string();
            book.update(&moot, |m| m.summaries.push(text));
        }),
    })
}
