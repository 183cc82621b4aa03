//! The host of a moot: turn order, moves, pools, cited sets, rolling
//! summaries and the record. It reaches each tree through [`Speaker`], so a
//! speaker may be local (a retriever and a model here) or, later, a peer.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use super::prompt::{self, Line};
use super::speaker::{self, TurnRequest};
use super::stats::{self, Stats};
use super::{MootError, MootSettings, Move, Passage, Retriever, Summary, Tree, Utterance};
use crate::chat::{ChatMessage, ChatModel, ChatRequest, ModelError, Role};

/// Temperature of the narrator's summary calls.
pub const SUMMARY_TEMPERATURE: f64 = 0.2;
/// Token budget of one summary.
pub const SUMMARY_MAX_TOKENS: u32 = 200;

/// What the host asks of a tree for one turn.
#[derive(Debug, Clone)]
pub struct TurnCall {
    /// The request, with `passages` empty and `pool` as it stood before
    /// this turn; the speaker fills both.
    pub request: TurnRequest,
    /// Passages to speak from instead of searching (turn 1: the opening).
    pub given: Option<Vec<Passage>>,
    /// Node ids this tree has already cited.
    pub cited: BTreeSet<String>,
    pub k: usize,
}

/// One tree, as the host sees it.
pub trait Speaker {
    /// The tree's opening passages for `query`.
    fn opening(&mut self, query: &str, k: usize) -> Result<Vec<Passage>, MootError>;
    /// Runs one turn and returns it as the host's checks accepted it
    /// ([`check_turn`], the one way to an [`Accepted`]): graded once, by
    /// the host's own rules, whoever spoke.
    fn turn(&mut self, call: &TurnCall) -> Result<Accepted, MootError>;
}

/// A turn the host's checks accepted ([`check_turn`]), with the speaking
/// tree's pool after it.
#[derive(Debug, Clone)]
pub struct Accepted {
    utterance: Utterance,
    pool: Vec<Passage>,
}

impl Accepted {
    pub fn utterance(&self) -> &Utterance {
        &self.utterance
    }

    pub fn into_utterance(self) -> Utterance {
        self.utterance
    }
}

/// A speaker on this node: its book's retriever and a model.
pub struct LocalSpeaker<'a> {
    pub book: String,
    pub retriever: &'a mut dyn Retriever,
    pub model: &'a mut dyn ChatModel,
}

impl Speaker for LocalSpeaker<'_> {
    fn opening(&mut self, query: &str, k: usize) -> Result<Vec<Passage>, MootError> {
        speaker::retrieve(self.retriever, &self.book, query, k, &BTreeSet::new())
    }

    fn turn(&mut self, call: &TurnCall) -> Result<Accepted, MootError> {
        let request = self.prepare(call)?;
        check_turn(call, speaker::speak(self.model, &request)?)
    }
}

impl LocalSpeaker<'_> {
    /// The speaker's request for `call`: the given passages (the opening)
    /// or this turn's retrieval, added to the pool.
    pub fn prepare(&mut self, call: &TurnCall) -> Result<TurnRequest, MootError> {
        let passages = match &call.given {
            Some(given) => given.clone(),
            None => speaker::retrieve(
                self.retriever,
                &self.book,
                &call.request.query,
                call.k,
                &call.cited,
            )?,
        };
        Ok(call.request.clone().with_passages(passages))
    }
}

/// One model shared by both local speakers and the narrator, one call at a
/// time.
pub struct SharedModel<'a>(RefCell<&'a mut dyn ChatModel>);

impl<'a> SharedModel<'a> {
    pub fn new(model: &'a mut dyn ChatModel) -> SharedModel<'a> {
        SharedModel(RefCell::new(model))
    }

    /// A handle that is itself a [`ChatModel`].
    pub fn handle(&self) -> SharedModelHandle<'_, 'a> {
        SharedModelHandle(&self.0)
    }
}

pub struct SharedModelHandle<'r, 'a>(&'r RefCell<&'a mut dyn ChatModel>);

impl ChatModel for SharedModelHandle<'_, '_> {
    fn complete(&mut self, request: &ChatRequest) -> Result<String, ModelError> {
        // Calls never nest (a speaker finishes before the narrator runs).
        match self.0.try_borrow_mut() {
            Ok(mut model) => model.complete(request),
            Err(_) => Err(ModelError::Failed("model already in use".into())),
        }
    }

    fn describe(&self) -> String {
        match self.0.try_borrow() {
            Ok(model) => model.describe(),
            Err(_) => String::new(),
        }
    }

    fn guides_decoding(&self) -> bool {
        self.0
            .try_borrow()
            .is_ok_and(|model| model.guides_decoding())
    }
}

/// A tree's opening search and what it returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Opening {
    pub tree: String,
    pub query: String,
    pub passages: Vec<Passage>,
}

/// A finished moot, ready to be written as a transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct Moot {
    /// In speaking order (two or more).
    pub trees: Vec<Tree>,
    pub topic: Option<String>,
    /// The model's description.
    pub model: String,
    pub settings: MootSettings,
    pub openings: Vec<Opening>,
    pub utterances: Vec<Utterance>,
    pub summaries: Vec<Summary>,
    pub stats: Stats,
}

/// Checks the trees and settings before anything runs.
pub fn validate(trees: &[Tree], settings: &MootSettings) -> Result<(), MootError> {
    if trees.len() < 2 {
        return Err(MootError::Settings(format!(
            "a moot needs at least two trees, not {}",
            trees.len()
        )));
    }
    if let Some(key) = repeated_book(trees.iter().map(|t| t.key.as_str())) {
        return Err(MootError::SameBook(key.to_string()));
    }
    settings.validate()
}

/// The first book key that appears twice: a moot's trees must be different
/// books (the one rule the host, the local `moot run` and `verify` share).
pub fn repeated_book<'a>(keys: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut seen = std::collections::BTreeSet::new();
    keys.into_iter().find(|k| !seen.insert(*k))
}

/// The seed of a turn's first attempt (the retry adds 1).
pub fn turn_seed(base: u64, turn: u32) -> u64 {
    base.wrapping_add(2 * u64::from(turn))
}

/// Runs a whole moot. The trees speak round-robin in order (`speakers[0]`
/// first), each answering the line before; `on_utterance` sees each
/// utterance as it lands.
pub fn run(
    trees: Vec<Tree>,
    topic: Option<String>,
    settings: MootSettings,
    mut speakers: Vec<&mut dyn Speaker>,
    narrator: &mut dyn ChatModel,
    on_utterance: &mut dyn FnMut(&Utterance),
) -> Result<Moot, MootError> {
    validate(&trees, &settings)?;
    if speakers.len() != trees.len() {
        return Err(MootError::Settings(format!(
            "{} speakers for {} trees",
            speakers.len(),
            trees.len()
        )));
    }
    let n = trees.len();
    let topic = topic.filter(|t| !t.trim().is_empty());
    let model = narrator.describe();
    let (openings, pools) = open(&trees, topic.as_deref(), settings.k, &mut speakers)?;
    let mut moot = Proceedings {
        trees,
        topic,
        settings,
        openings,
        pools,
        utterances: Vec::new(),
        summaries: Vec::new(),
        summary: None,
        cited: vec![BTreeSet::new(); n],
    };
    for index in 0..moot.settings.turns {
        let turn = index + 1;
        let t = index as usize % n;
        let every = moot.settings.summary_every;
        if every > 0 && index > 0 && index % every == 0 {
            moot.summarize(narrator, turn)?;
        }
        let call = moot.turn_call(turn, t);
        let Accepted { utterance, pool } = speakers[t].turn(&call)?;
        moot.pools[t] = pool;
        moot.cited[t].extend(utterance.cited.values().cloned());
        on_utterance(&utterance);
        moot.utterances.push(utterance);
    }
    Ok(moot.finish(model))
}

/// Each tree's opening search (checked like a turn's passages), and the
/// pools it starts.
fn open(
    trees: &[Tree],
    topic: Option<&str>,
    k: usize,
    speakers: &mut [&mut dyn Speaker],
) -> Result<(Vec<Opening>, Vec<Vec<Passage>>), MootError> {
    let mut openings = Vec::new();
    let mut pools: Vec<Vec<Passage>> = vec![Vec::new(); trees.len()];
    for (t, tree) in trees.iter().enumerate() {
        let query = speaker::opening_query(topic, tree);
        let passages = speakers[t].opening(&query, k)?;
        check_passages(tree, &passages)?;
        speaker::extend_pool(&mut pools[t], &passages);
        openings.push(Opening {
            tree: tree.key.clone(),
            query,
            passages,
        });
    }
    Ok((openings, pools))
}

/// A moot in progress: what the host keeps between turns.
struct Proceedings {
    trees: Vec<Tree>,
    topic: Option<String>,
    settings: MootSettings,
    openings: Vec<Opening>,
    /// Per tree: every passage its book returned so far, each once.
    pools: Vec<Vec<Passage>>,
    utterances: Vec<Utterance>,
    summaries: Vec<Summary>,
    /// The latest summary, passed on to each turn.
    summary: Option<String>,
    /// Per tree: the node ids it has cited.
    cited: Vec<BTreeSet<String>>,
}

impl Proceedings {
    /// The narrator's summary of the lines so far, before `turn`. An
    /// empty answer keeps the old summary.
    fn summarize(&mut self, narrator: &mut dyn ChatModel, turn: u32) -> Result<(), MootError> {
        let lines = lines_of(&self.utterances);
        let answer = narrator
            .complete(&ChatRequest {
                messages: vec![
                    ChatMessage {
                        role: Role::System,
                        content: prompt::narrator_system(),
                    },
                    ChatMessage {
                        role: Role::User,
                        content: prompt::narrator_user(self.summary.as_deref(), &lines),
                    },
                ],
                max_tokens: SUMMARY_MAX_TOKENS,
                temperature: SUMMARY_TEMPERATURE as f32,
                seed: self
                    .settings
                    .seed
                    .wrapping_add(2 * u64::from(turn))
                    .wrapping_add(1 << 32),
                guidance: None,
            })
            .map_err(|source| MootError::Model {
                book: "narrator".into(),
                source,
            })?;
        let text = prompt::clip_words(&answer, prompt::MAX_SUMMARY_WORDS);
        if !text.is_empty() {
            self.summaries.push(Summary {
                before_turn: turn,
                text: text.clone(),
            });
            self.summary = Some(text);
        }
        Ok(())
    }

    /// What tree `t` is asked for `turn`: it answers the last real line
    /// (on turn 1, it speaks from its opening).
    fn turn_call(&self, turn: u32, t: usize) -> TurnCall {
        let lines = lines_of(&self.utterances);
        let incoming = lines.last().cloned();
        let o = answered_tree(&self.utterances, &self.trees, t);
        let recent: Vec<Line> = match lines.len() {
            0 | 1 => Vec::new(),
            n => lines[n.saturating_sub(3)..n - 1].to_vec(),
        };
        let (query, given) = match &incoming {
            None => (
                self.openings[t].query.clone(),
                Some(self.openings[t].passages.clone()),
            ),
            Some(line) => (speaker::turn_query(self.topic.as_deref(), &line.text), None),
        };
        let (own_turns, other_turns) = turn_maps(&self.utterances, &self.trees[t].key);
        let settings = &self.settings;
        let request = TurnRequest {
            turn,
            speaker: self.trees[t].clone(),
            other: self.trees[o].clone(),
            topic: self.topic.clone(),
            query,
            passages: Vec::new(),
            pool: self.pools[t].clone(),
            other_turns,
            own_turns,
            incoming,
            recent,
            summary: self.summary.clone(),
            mv: Move::for_turn_of(turn, settings.turns, self.trees.len() as u32),
            temperature: settings.temperature,
            max_tokens: settings.max_tokens,
            seed: turn_seed(settings.seed, turn),
        };
        TurnCall {
            request,
            given,
            cited: self.cited[t].clone(),
            k: settings.k,
        }
    }

    fn finish(self, model: String) -> Moot {
        let stats = stats::compute(&self.utterances);
        Moot {
            trees: self.trees,
            topic: self.topic,
            model,
            settings: self.settings,
            openings: self.openings,
            utterances: self.utterances,
            summaries: self.summaries,
            stats,
        }
    }
}

/// A moot on this node: both books' retrievers and one model.
pub fn run_local(
    trees: [Tree; 2],
    topic: Option<String>,
    settings: MootSettings,
    retrievers: [&mut dyn Retriever; 2],
    model: &mut dyn ChatModel,
    on_utterance: &mut dyn FnMut(&Utterance),
) -> Result<Moot, MootError> {
    validate(&trees, &settings)?;
    let shared = SharedModel::new(model);
    let mut model_a = shared.handle();
    let mut model_b = shared.handle();
    let mut narrator = shared.handle();
    let [retriever_a, retriever_b] = retrievers;
    let mut a = LocalSpeaker {
        book: trees[0].key.clone(),
        retriever: retriever_a,
        model: &mut model_a,
    };
    let mut b = LocalSpeaker {
        book: trees[1].key.clone(),
        retriever: retriever_b,
        model: &mut model_b,
    };
    run(
        trees.to_vec(),
        topic,
        settings,
        vec![&mut a, &mut b],
        &mut narrator,
        on_utterance,
    )
}

/// The host's checks of a tree's answer to `call`, before it is accepted:
/// the turn and speaker asked for, passages from the tree's own book with
/// their true leaf hashes, and the host's own re-grading and re-snapping
/// (for a pass: that it is exactly a pass). Every speaker's turn passes
/// here once before the host records it.
pub fn check_turn(call: &TurnCall, utterance: Utterance) -> Result<Accepted, MootError> {
    let request = &call.request;
    if utterance.turn != request.turn || utterance.speaker != request.speaker.key {
        return Err(MootError::Speaker {
            book: request.speaker.key.clone(),
            reason: format!(
                "answered as {} turn {} instead of turn {}",
                utterance.speaker, utterance.turn, request.turn
            ),
        });
    }
    let passages: Vec<Passage> = utterance
        .retrieved
        .iter()
        .map(|p| p.passage.clone())
        .collect();
    check_passages(&request.speaker, &passages)?;
    let mut pool = request.pool.clone();
    speaker::extend_pool(&mut pool, &passages);
    if utterance.passed() {
        recheck_pass(&utterance, &pool, request)?;
    } else {
        recheck(&utterance, &pool, request)?;
    }
    Ok(Accepted { utterance, pool })
}

/// Passages must come from the tree's own book (node ids `KEY#INDEX`) and
/// carry their true leaf hash, or the transcript would not verify.
fn check_passages(tree: &Tree, passages: &[Passage]) -> Result<(), MootError> {
    for p in passages {
        let reason = if p.node_id != format!("{}#{}", tree.key, p.index) {
            format!("passage {} is not from this book", p.node_id)
        } else if p.leaf != hex::encode(crate::merkle::leaf_hash(p.content.as_bytes())) {
            format!("passage {} does not match its leaf hash", p.node_id)
        } else {
            continue;
        };
        return Err(MootError::Speaker {
            book: tree.key.clone(),
            reason,
        });
    }
    Ok(())
}

/// The host grades and snaps the kept reply again against its own record
/// of the pool and turn texts: a speaker (later, a peer) cannot claim a
/// verdict its reply does not earn.
fn recheck(
    utterance: &Utterance,
    pool: &[Passage],
    request: &TurnRequest,
) -> Result<(), MootError> {
    let (checked, cited) = speaker::record_reply(
        &utterance.raw_text,
        &utterance.retrieved,
        pool,
        &request.other_turns,
        &request.own_turns,
    );
    let problem = if checked.grounding != utterance.grounding
        || checked.passes != utterance.grounded
    {
        Some("its grounding")
    } else if checked.text != utterance.text || checked.snaps != utterance.snaps {
        Some("its snapped text")
    } else if cited != utterance.cited {
        Some("its citations")
    } else if utterance.intent != request.mv {
        Some("its move")
    } else if !(1..=2).contains(&utterance.attempts) || (utterance.attempts == 1 && !checked.passes)
    {
        Some("its attempts")
    } else if !speaker::has_text(&utterance.raw_text) {
        Some("its (empty) text")
    } else {
        None
    };
    match problem {
        Some(what) => Err(MootError::Speaker {
            book: utterance.speaker.clone(),
            reason: format!("turn {}: {what} does not re-check", utterance.turn),
        }),
        None => Ok(()),
    }
}

/// A pass must be exactly a pass: no text, no claimed grounding, the
/// move asked for.
fn recheck_pass(
    utterance: &Utterance,
    pool: &[Passage],
    request: &TurnRequest,
) -> Result<(), MootError> {
    let problem = speaker::pass_problem(utterance, pool, &request.other_turns, &request.own_turns)
        .or((utterance.intent != request.mv).then_some("its move"));
    match problem {
        Some(what) => Err(MootError::Speaker {
            book: utterance.speaker.clone(),
            reason: format!("turn {} (a pass): {what}", utterance.turn),
        }),
        None => Ok(()),
    }
}

/// The tree whose line turn `t`'s speaker answers: the one that spoke the
/// last real line, unless that is the speaker itself (or nobody spoke yet),
/// in which case the tree before it in the round (on turn 1, the next).
pub fn answered_tree(utterances: &[Utterance], trees: &[Tree], t: usize) -> usize {
    let n = trees.len();
    let last = utterances
        .iter()
        .rev()
        .find(|u| !u.passed())
        .and_then(|u| trees.iter().position(|tree| tree.key == u.speaker));
    match last {
        Some(o) if o != t => o,
        _ if utterances.is_empty() => (t + 1) % n,
        _ => (t + n - 1) % n,
    }
}

/// Every line spoken so far; passes say nothing, so the next speaker
/// answers the last real line.
pub fn lines_of(utterances: &[Utterance]) -> Vec<Line> {
    utterances
        .iter()
        .filter(|u| !u.passed())
        .map(|u| Line {
            turn: u.turn,
            title: u.title.clone(),
            text: u.text.clone(),
        })
        .collect()
}

/// Stored turn texts of the tree `key` and of the other tree.
pub fn turn_maps(
    utterances: &[Utterance],
    key: &str,
) -> (BTreeMap<u64, String>, BTreeMap<u64, String>) {
    let mut own = BTreeMap::new();
    let mut other = BTreeMap::new();
    for u in utterances.iter().filter(|u| !u.passed()) {
        let map = if u.speaker == key {
            &mut own
        } else {
            &mut other
        };
        map.insert(u64::from(u.turn), u.text.clone());
    }
    (own, other)
}
