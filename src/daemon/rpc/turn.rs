//! `/grove/turn/1`, both halves: the host's call for one turn of the engine
//! ([`wire_call`], [`opening_call`]) and the speaker's side of a cross-node
//! moot: a member asks this node to speak for a book it holds. The request carries everything
//! the turn needs (the pool as node ids, the cited set, the lines), so this
//! node keeps no moot state: it rebuilds the pool from its own store and
//! retrieves. Its turn policy decides (within its time bound) whether the
//! tree speaks or passes; then it runs its own model through the unchanged
//! local speaker (or records the pass), and answers with a signed turn
//! whose passages carry Merkle proofs and whose utterance records the
//! decision.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use libp2p::PeerId;
use prost::Message;

use crate::daemon::mesh::MeshWorker;
use crate::daemon::model::ModelWorker;
use crate::daemon::store::StoreWorker;
use crate::daemon::worker::Stopped;
use crate::model::ModelError;
use crate::moot::MootError;
use crate::moot::host;
use crate::moot::policy::{self, Decision, PolicySettings};
use crate::moot::prompt::Line;
use crate::moot::signed;
use crate::moot::speaker::{self, TurnRequest};
use crate::moot::transcript::UtteranceRecord;
use crate::moot::{Move, Passage, Tree};
use crate::store::StoreError;
use crate::store::retriever::BookRetriever;
use crate::wire::moot as wire;

/// Why this node does not speak a turn; the message is the refusal the
/// host sees.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("this node does not hold {book}: {source}")]
    NotHeld { book: String, source: StoreError },
    #[error("{node_id} is not a passage of {book}")]
    NotAPassage { node_id: String, book: String },
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Retrieval(#[from] MootError),
    #[error("model: {0}")]
    Model(#[from] ModelError),
    #[error("recording the utterance: {0}")]
    Record(#[from] serde_json::Error),
    #[error(transparent)]
    Stopped(#[from] Stopped),
}

/// What speaking a turn needs; cheap to clone.
#[derive(Clone)]
pub struct Speaking {
    pub store: StoreWorker,
    pub model: ModelWorker,
    /// Signs the turn with the node's key; its view says who is a member.
    pub mesh: MeshWorker,
    /// This node's turn policy when other nodes' moots ask it to speak.
    pub policy: PolicySettings,
}

pub(super) fn refused(reason: impl Into<String>) -> wire::TurnAnswer {
    wire::TurnAnswer {
        kind: Some(wire::turn_answer::Kind::Refused(reason.into())),
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

fn wire_line(l: &Line) -> wire::Line {
    wire::Line {
        turn: l.turn,
        title: l.title.clone(),
        text: l.text.clone(),
    }
}

/// The host's call for a tree's opening search.
pub fn opening_call(moot_id: &[u8], speaker: &Tree, query: &str, k: usize) -> wire::TurnCall {
    wire::TurnCall {
        moot_id: moot_id.to_vec(),
        speaker: Some(tree_ref(speaker)),
        query: query.to_string(),
        k: k as u32,
        opening: true,
        ..Default::default()
    }
}

/// The host's call for one turn of the engine, chained to `prev` (the
/// speaker rebuilds the request from it: [`turn_request`]).
pub fn wire_call(call: &host::TurnCall, moot_id: &[u8], prev: Vec<u8>) -> wire::TurnCall {
    let r = &call.request;
    wire::TurnCall {
        moot_id: moot_id.to_vec(),
        turn: r.turn,
        r#move: r.mv.as_str().to_string(),
        speaker: Some(tree_ref(&r.speaker)),
        other: Some(tree_ref(&r.other)),
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
        incoming: r.incoming.as_ref().map(wire_line),
        recent: r.recent.iter().map(wire_line).collect(),
        summary: r.summary.clone().unwrap_or_default(),
        temperature: r.temperature,
        max_tokens: r.max_tokens,
        seed: r.seed,
        k: call.k as u32,
        prev_hash: prev,
        opening: false,
    }
}

fn tree(t: Option<&wire::TreeRef>) -> Tree {
    let t = t.cloned().unwrap_or_default();
    let mut tree = Tree::new(&t.key, &t.title, &t.author);
    if !t.genre.is_empty() {
        tree.genre = t.genre;
    }
    tree
}

fn line(l: &wire::Line) -> Line {
    Line {
        turn: l.turn,
        title: l.title.clone(),
        text: l.text.clone(),
    }
}

/// The chunk index of `node_id` when it names a chunk of `book`.
fn index_in(book: &str, node_id: &str) -> Result<u64, TurnError> {
    node_id
        .rsplit_once('#')
        .filter(|(key, _)| *key == book)
        .and_then(|(_, i)| i.parse().ok())
        .ok_or_else(|| TurnError::NotAPassage {
            node_id: node_id.to_string(),
            book: book.to_string(),
        })
}

/// What the store thread prepares for a turn.
struct Prepared {
    pool: Vec<Passage>,
    passages: Vec<Passage>,
    proofs: BTreeMap<u64, Vec<crate::merkle::ProofStep>>,
    root: [u8; 32],
    count: u64,
    /// The turn's search as the policy reads it, when it does.
    searched: Option<PolicySearch>,
}

/// The best score of a turn's search (`None`: nothing matched), or why
/// there is none, and how long the search took.
#[derive(Debug, Clone)]
struct PolicySearch {
    best: Result<Option<f64>, String>,
    ms: u64,
}

/// Answers one turn request; `peer` is None when this node hosts the moot
/// and speaks for its own book.
pub async fn answer(speaking: &Speaking, peer: Option<PeerId>, data: &[u8]) -> wire::TurnAnswer {
    if let Some(peer) = peer
        && !super::is_member(&speaking.mesh.view(), peer)
    {
        return refused("turn requests are for members of the current roster");
    }
    let Ok(call) = wire::TurnCall::decode(data) else {
        return refused("malformed turn request");
    };
    match speak(speaking, call).await {
        Ok(answer) => answer,
        Err(e) => refused(e.to_string()),
    }
}

/// The speaker's request for one turn, from the host's call and the
/// passages this node prepared: the turn's passages and the pool before
/// them (this extends it).
pub fn turn_request(
    call: &wire::TurnCall,
    passages: Vec<Passage>,
    pool: Vec<Passage>,
) -> Result<TurnRequest, TurnError> {
    let mv = Move::parse(&call.r#move)
        .ok_or_else(|| TurnError::BadRequest(format!("unknown move `{}`", call.r#move)))?;
    let request = TurnRequest {
        turn: call.turn,
        speaker: tree(call.speaker.as_ref()),
        other: tree(call.other.as_ref()),
        topic: (!call.topic.is_empty()).then(|| call.topic.clone()),
        query: call.query.clone(),
        passages: Vec::new(),
        pool,
        other_turns: call.other_turns.clone().into_iter().collect(),
        own_turns: call.own_turns.clone().into_iter().collect(),
        incoming: call.incoming.as_ref().map(line),
        recent: call.recent.iter().map(line).collect(),
        summary: (!call.summary.is_empty()).then(|| call.summary.clone()),
        mv,
        // Bounded whatever the host asks: this node's model time is its own.
        temperature: if call.temperature.is_finite() {
            call.temperature.clamp(0.0, 2.0)
        } else {
            0.0
        },
        max_tokens: call.max_tokens.clamp(1, crate::moot::MAX_REPLY_TOKENS),
        seed: call.seed,
    };
    Ok(request.with_passages(passages))
}

/// This node's turn policy on one turn, from the best score of the turn's
/// own search (`searched`: the score, or why there is none, and how long
/// it took). A policy that fails or runs past its time bound does not
/// silence the tree.
fn decide(settings: &PolicySettings, searched: Option<&PolicySearch>) -> Decision {
    let Some(PolicySearch { best, ms }) = searched else {
        return policy::decide(settings, None, 0);
    };
    let ms = *ms;
    match best {
        _ if ms > settings.decide_timeout_ms => policy::undecided(
            settings,
            &format!("no decision within {} ms", settings.decide_timeout_ms),
            ms,
        ),
        Ok(best) => policy::decide(settings, *best, ms),
        Err(e) => policy::undecided(settings, &format!("its search failed: {e}"), ms),
    }
}

/// The turn's passages (retrieved, or the ones the host gave), the pool
/// rebuilt from its node ids, a proof for every passage and, when the
/// policy asks for it, the best score of the turn's search: one search of
/// the book, read on the store worker.
fn prepare(
    books: &mut crate::books::LocalBooks,
    key: &str,
    call: &wire::TurnCall,
    k: usize,
    scored: bool,
) -> Result<Prepared, TurnError> {
    let mut retriever =
        BookRetriever::open(books.store(), key).map_err(|source| TurnError::NotHeld {
            book: key.to_string(),
            source,
        })?;
    let mut pool = Vec::new();
    for id in &call.pool {
        pool.push(retriever.passage(index_in(key, id)?)?);
    }
    let cited: BTreeSet<String> = call.cited.iter().cloned().collect();
    let started = Instant::now();
    let passages = if call.opening {
        speaker::retrieve(&mut retriever, key, &call.query, k, &BTreeSet::new())
    } else if call.given.is_empty() {
        speaker::retrieve(&mut retriever, key, &call.query, k, &cited)
    } else {
        call.given
            .iter()
            .map(|id| Ok(retriever.passage(index_in(key, id)?)?))
            .collect::<Result<Vec<_>, TurnError>>()
            .map_err(|e| MootError::Speaker {
                book: key.to_string(),
                reason: e.to_string(),
            })
    }?;
    let searched = (scored && !call.opening).then(|| {
        let best = match retriever.best_of_last_search() {
            Some(best) => Ok(best),
            // Given passages: the policy's search is the turn's only one.
            None => retriever
                .best_score(&call.query, k)
                .map_err(|e| e.to_string()),
        };
        PolicySearch {
            best,
            ms: started.elapsed().as_millis() as u64,
        }
    });
    let mut proofs = BTreeMap::new();
    for p in &passages {
        proofs.insert(p.index, retriever.proof(p.index)?);
    }
    let record = retriever.book();
    Ok(Prepared {
        pool,
        passages,
        proofs,
        root: record.root,
        count: record.count,
        searched,
    })
}

async fn speak(speaking: &Speaking, call: wire::TurnCall) -> Result<wire::TurnAnswer, TurnError> {
    let book = call
        .speaker
        .as_ref()
        .map(|t| t.key.clone())
        .unwrap_or_default();
    let k = (call.k as usize).clamp(1, crate::moot::MAX_PASSAGES);
    let opening = call.opening;
    let (key, for_store) = (book.clone(), call.clone());
    let scored = policy::needs_search(speaking.policy.policy);
    let prepared = speaking
        .store
        .call(move |b| prepare(b, &key, &for_store, k, scored))
        .await??;
    if opening {
        let passages = prepared
            .passages
            .iter()
            .map(|p| signed::proven("", p, &prepared.proofs[&p.index]))
            .collect();
        return Ok(wire::TurnAnswer {
            kind: Some(wire::turn_answer::Kind::Opening(wire::Opening {
                passages,
                book_root: prepared.root.to_vec(),
                book_count: prepared.count,
            })),
        });
    }
    let request = turn_request(&call, prepared.passages.clone(), prepared.pool.clone())?;
    // An opening search (answered above) is retrieval only; a turn asks the
    // policy, within its own time bound, whether the tree speaks.
    let decision = decide(&speaking.policy, prepared.searched.as_ref());
    let utterance = if decision.speak {
        let mut utterance = speaking
            .model
            .call(move |m| speaker::speak(m, &request))
            .await??;
        utterance.decision = Some(decision);
        utterance
    } else {
        speaker::pass(&request, decision)
    };
    let passages = utterance
        .retrieved
        .iter()
        .map(|t| {
            let proof = prepared
                .proofs
                .get(&t.passage.index)
                .cloned()
                .unwrap_or_default();
            signed::proven(&t.tag, &t.passage, &proof)
        })
        .collect();
    let utterance_json = serde_json::to_string(&UtteranceRecord::from(&utterance))?;
    let payload = wire::TurnPayload {
        moot_id: call.moot_id.clone(),
        turn: call.turn,
        prev_hash: call.prev_hash.clone(),
        speaker: speaking.mesh.view().me.peer_id.clone(),
        book,
        book_root: prepared.root.to_vec(),
        book_count: prepared.count,
        passages,
        utterance: utterance_json,
        time_ms: crate::now_ms(),
        epoch: Some(speaking.mesh.view().epoch()),
    };
    let signed_turn = speaking
        .mesh
        .call(move |core| signed::sign(&core.id, &payload))
        .await?;
    Ok(wire::TurnAnswer {
        kind: Some(wire::turn_answer::Kind::Turn(signed_turn)),
    })
}
