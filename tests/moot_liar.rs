//! A speaker that lies, between real daemons: bravo's daemon is stopped and
//! an in-process node with bravo's own key (same peer id, same address)
//! answers the host's `/grove/turn/1` requests in its place. Its opening
//! search is honest (from bravo's own store); its turn is an honest turn,
//! built exactly as `src/daemon/turns.rs` builds one, then corrupted and
//! signed with bravo's key, so that only the lie is wrong:
//! - a wrong proof (one sibling byte of one passage's proof flipped);
//! - false grading (the reply quotes words no passage holds, while the
//!   recorded grounding says the quote was found);
//! - a book it does not hold (passages of a book bravo never stored, with
//!   valid proofs against that book's own root, claimed as its book).
//!
//! Each is refused by the host, and the moot pauses with the reason.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use prost::Message;
use serde_json::Value;

use grove::identity::Identity;
use grove::model::{ChatModel, ChatRequest, ModelError};
use grove::moot::speaker;
use grove::moot::transcript::UtteranceRecord;
use grove::moot::{Passage, signed};
use grove::store::Store;
use grove::store::retriever::BookRetriever;
use grove::wire::moot as wire;

use crate::cluster::Daemon;
use crate::moot_net::{quoting_reply, three_nodes, wait_state};
use crate::scripted_openai::ScriptedServer;

const BOOK: &str = "essays/field-notes";

/// Words that are in no generated book (see `support::generated_book`).
const FAKE_QUOTE: &str = "quartz zeppelins hum violet psalms";

/// Which lie the liar tells, chosen by the moot's topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lie {
    Proof,
    Grading,
    Book,
}

impl Lie {
    fn topic(self) -> &'static str {
        match self {
            Lie::Proof => "the sea (a wrong proof)",
            Lie::Grading => "the sea (false grading)",
            Lie::Book => "the sea (a book it does not hold)",
        }
    }

    /// What the host's reason says failed, in parts.
    fn refusal(self) -> &'static [&'static str] {
        match self {
            Lie::Proof => &[
                "turn 2 refused: passage essays/field-notes#",
                "proof does not verify",
            ],
            Lie::Grading => &["turn 2: its grounding does not re-check"],
            Lie::Book => &[
                "turn 2 refused: book root",
                "(5 chunks) is not one the speaker announced",
            ],
        }
    }

    fn of_topic(topic: &str) -> Option<Lie> {
        [Lie::Proof, Lie::Grading, Lie::Book]
            .into_iter()
            .find(|l| l.topic() == topic)
    }
}

/// A model that quotes the first five words of passage `s1` and cites it,
/// as `quoting_reply` does for the daemons' model servers.
struct Quoter;

impl ChatModel for Quoter {
    fn complete(&mut self, request: &ChatRequest) -> Result<String, ModelError> {
        let first = request
            .guidance
            .as_ref()
            .and_then(|g| g.passages.first())
            .ok_or_else(|| ModelError::Failed("no passages".into()))?;
        let quote = first
            .split_whitespace()
            .take(5)
            .collect::<Vec<_>>()
            .join(" ");
        Ok(format!("\"{quote}\" [s1], and so I hold [s1]."))
    }

    fn describe(&self) -> String {
        "liar:quoter".into()
    }
}

/// A book bravo never stored: its chunks, Merkle levels and root.
struct FreshBook {
    chunks: Vec<String>,
    levels: Vec<Vec<grove::merkle::Hash>>,
    root: grove::merkle::Hash,
}

impl FreshBook {
    fn new() -> FreshBook {
        let chunks: Vec<String> = (0..5)
            .map(|i| {
                format!(
                    "Ledger {} of a book this node never stored: rope, tar and salt.",
                    ["one", "two", "three", "four", "five"][i]
                )
            })
            .collect();
        let leaves: Vec<_> = chunks
            .iter()
            .map(|c| grove::merkle::leaf_hash(c.as_bytes()))
            .collect();
        // The one reducer, as `Shard::ingest` runs it: the root is the
        // last level.
        let levels = grove::merkle::levels(leaves).unwrap();
        FreshBook {
            root: levels[levels.len() - 1][0],
            levels,
            chunks,
        }
    }

    /// Chunk `i`, claimed as a passage of `key`.
    fn passage(&self, key: &str, i: u64) -> Passage {
        let content = self.chunks[i as usize].clone();
        Passage {
            node_id: format!("{key}#{i}"),
            label: format!("chunk:{i:04}"),
            index: i,
            leaf: hex::encode(grove::merkle::leaf_hash(content.as_bytes())),
            content,
        }
    }
}

fn index_of(node_id: &str) -> u64 {
    node_id.rsplit_once('#').unwrap().1.parse().unwrap()
}

/// Answers one `/grove/turn/1` request as bravo would, except for the lie
/// (chosen by the call's topic) told on a turn. Wire structs end in
/// `..Default::default()` so that fields added to proto/moot.proto later
/// do not break this test.
#[allow(clippy::needless_update)]
fn answer(store: &mut Store, identity: &Identity, data: &[u8]) -> wire::TurnAnswer {
    let call = wire::TurnCall::decode(data).unwrap();
    let key = call.speaker.as_ref().unwrap().key.clone();
    let k = (call.k as usize).clamp(1, 20);
    let mut retriever = BookRetriever::open(store, &key).unwrap();
    let record = retriever.book().clone();
    let proven = |retriever: &BookRetriever, tag: &str, p: &Passage| {
        signed::proven(tag, p, &retriever.proof(p.index).unwrap())
    };
    if call.opening {
        // Honest: the host checks these against bravo's announced root.
        let passages =
            speaker::retrieve(&mut retriever, &key, &call.query, k, &BTreeSet::new()).unwrap();
        return wire::TurnAnswer {
            kind: Some(wire::turn_answer::Kind::Opening(wire::Opening {
                passages: passages.iter().map(|p| proven(&retriever, "", p)).collect(),
                book_root: record.root.to_vec(),
                book_count: record.count,
                ..Default::default()
            })),
        };
    }
    let lie = Lie::of_topic(&call.topic).expect("a topic naming the lie");
    // An honest turn first, as src/daemon/rpc/turn.rs builds it: the pool as
    // the host sent it (node ids) rebuilt from the store, and the given or
    // retrieved passages. A speaker of a book it does not hold speaks from
    // that book alone.
    let pool: Vec<Passage> = match lie {
        Lie::Book => Vec::new(),
        _ => call
            .pool
            .iter()
            .map(|id| retriever.passage(index_of(id)).unwrap())
            .collect(),
    };
    let cited: BTreeSet<String> = call.cited.iter().cloned().collect();
    let fresh = FreshBook::new();
    let passages = if lie == Lie::Book {
        (0..k.min(fresh.chunks.len()) as u64)
            .map(|i| fresh.passage(&key, i))
            .collect()
    } else if call.given.is_empty() {
        speaker::retrieve(&mut retriever, &key, &call.query, k, &cited).unwrap()
    } else {
        call.given
            .iter()
            .map(|id| retriever.passage(index_of(id)).unwrap())
            .collect()
    };
    let request = grove::daemon::rpc::turn::turn_request(&call, passages, pool).unwrap();
    let mut utterance = speaker::speak(&mut Quoter, &request).unwrap();
    assert!(
        utterance.grounded && utterance.attempts == 1,
        "the honest turn under the lie is grounded: {utterance:?}"
    );
    let mut passages: Vec<wire::ProvenPassage> = utterance
        .retrieved
        .iter()
        .map(|t| match lie {
            Lie::Book => signed::proven(
                &t.tag,
                &t.passage,
                &grove::merkle::proof(&fresh.levels, t.passage.index).unwrap(),
            ),
            _ => proven(&retriever, &t.tag, &t.passage),
        })
        .collect();
    let (mut root, mut count) = (record.root, record.count);
    match lie {
        Lie::Proof => {
            let step = passages[0]
                .proof
                .first_mut()
                .expect("a book of many chunks has proof steps");
            step.sibling[0] ^= 1;
        }
        Lie::Grading => {
            // The reply quotes words no passage holds; the recorded grading
            // still says the quote was found and the turn grounded.
            let honest_quote = utterance.grounding.quotes[0].text.clone();
            assert!(utterance.grounding.quotes[0].found);
            utterance.raw_text = utterance.raw_text.replace(&honest_quote, FAKE_QUOTE);
            utterance.text = utterance.text.replace(&honest_quote, FAKE_QUOTE);
            utterance.grounding.quotes[0].text = FAKE_QUOTE.into();
            assert!(utterance.raw_text.contains(FAKE_QUOTE) && utterance.grounded);
        }
        Lie::Book => {
            root = fresh.root;
            count = fresh.chunks.len() as u64;
        }
    }
    let payload = wire::TurnPayload {
        moot_id: call.moot_id.clone(),
        turn: call.turn,
        prev_hash: call.prev_hash.clone(),
        speaker: identity.peer_id(),
        book: key,
        book_root: root.to_vec(),
        book_count: count,
        passages,
        utterance: serde_json::to_string(&UtteranceRecord::from(&utterance)).unwrap(),
        time_ms: grove::now_ms(),
        ..Default::default()
    };
    wire::TurnAnswer {
        kind: Some(wire::turn_answer::Kind::Turn(signed::sign(
            identity, &payload,
        ))),
    }
}

/// The in-process node speaking with bravo's key, on its own thread.
/// Bravo's stand-in, and every turn request it answered: (topic, opening).
struct Liar {
    node: crate::support::StandIn,
    asked: Arc<Mutex<Vec<(String, bool)>>>,
}

impl Liar {
    /// Starts it from bravo's (stopped) state directory, listening on
    /// `listen` (bravo's old address, which the host dials), and connects
    /// it to the host.
    fn start(
        state: &Path,
        listen: libp2p::Multiaddr,
        host: libp2p::PeerId,
        host_addr: libp2p::Multiaddr,
    ) -> Liar {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        let identity =
            grove::identity::load_or_create(&grove::state_dir::StateDir::new(state).identity())
                .unwrap();
        let store = std::sync::Mutex::new(Store::new(state));
        let node = crate::support::StandIn::start(
            state,
            listen,
            host,
            host_addr,
            move |protocol, data| {
                if protocol == grove::net::Protocol::Turn {
                    let call = wire::TurnCall::decode(data).unwrap();
                    log.lock().unwrap().push((call.topic.clone(), call.opening));
                    answer(&mut store.lock().unwrap(), &identity, data).encode_to_vec()
                } else {
                    // Sync, search, join: an empty answer (each decodes as
                    // "nothing"), so the host is not left waiting.
                    Vec::new()
                }
            },
        );
        Liar { node, asked }
    }

    /// How many opening searches it answered, and how many turn requests
    /// for `lie`'s moot.
    fn asked(&self, lie: Lie) -> (usize, usize) {
        let asked = self.asked.lock().unwrap();
        let openings = asked.iter().filter(|(_, opening)| *opening).count();
        let turns = asked
            .iter()
            .filter(|(topic, opening)| !opening && topic == lie.topic())
            .count();
        (openings, turns)
    }

    /// Stops it; an error is a panic on its thread (a failed answer).
    fn stop(&mut self) -> std::thread::Result<()> {
        self.node.stop()
    }
}

/// Starts a moot with `lie` in bravo's turn (turn 2) and waits until it
/// pauses; checks the reason names bravo's book, the turn and what failed,
/// and that the paused moot does not export. Returns the paused view.
fn lied_to(host: &Daemon, lie: Lie) -> Value {
    let started = host.json(&[
        "moot",
        "start",
        "--a",
        "alpha:fiction/sea-tales",
        "--b",
        &format!("bravo:{BOOK}"),
        "--topic",
        lie.topic(),
        "--turns",
        "4",
    ]);
    let id = started["id"].as_str().unwrap().to_string();
    let paused = wait_state(host, &id, "paused");
    let reason = paused["reason"].as_str().unwrap_or_default();
    println!("{lie:?}: {reason}");
    assert!(
        reason.contains(&format!("speaker for `{BOOK}` failed: turn 2")),
        "{lie:?}: {paused}"
    );
    for part in lie.refusal() {
        assert!(reason.contains(part), "{lie:?}: {paused}");
    }
    if lie == Lie::Book {
        // The root it claimed is the other book's own.
        let root = hex::encode(FreshBook::new().root);
        assert!(reason.contains(&root), "{reason}");
    }
    // Only a finished moot exports: the lie is in no export.
    let refused = host.fails(&["moot", "export", &id]);
    assert!(
        refused.contains("only a finished moot exports"),
        "{refused}"
    );
    paused
}

/// The speakers of a moot's accepted lines.
fn speakers(shown: &Value) -> Vec<String> {
    shown["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["key"].as_str().unwrap().to_string())
        .collect()
}

/// Three nodes, then bravo's daemon stopped and the liar in its place.
fn liar_in_place_of_bravo() -> (Vec<ScriptedServer>, Daemon, Daemon, Daemon, Liar) {
    let (servers, a, mut b, c) = three_nodes(quoting_reply, false);
    let listen = |d: &Daemon| -> libp2p::Multiaddr {
        d.json(&["node", "status"])["listen"][0]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let b_addr = listen(&b);
    let c_addr = listen(&c);
    let c_peer: libp2p::PeerId = c.peer_id().parse().unwrap();
    b.stop();
    let liar = Liar::start(&b.g.state(), b_addr, c_peer, c_addr);
    (servers, a, b, c, liar)
}

#[test]
fn a_speaker_that_lies_is_refused_and_the_moot_pauses_with_the_reason() {
    let (_servers, _a, _b, c, mut liar) = liar_in_place_of_bravo();
    for lie in [Lie::Proof, Lie::Grading, Lie::Book] {
        let paused = lied_to(&c, lie);
        let id = paused["id"].as_str().unwrap();
        let (_, asked) = liar.asked(lie);
        println!("{lie:?}: turn 2 asked {asked} times");
        // Refused (by the signed-turn check, or, for the grading lie whose
        // proofs are true, by the host's re-grading) and asked once more;
        // the lie was not taken, nor shown.
        assert!(asked >= 2, "{lie:?} asked {asked} times");
        assert_eq!(paused["turns_done"], 1, "{lie:?}: {paused}");
        assert_eq!(speakers(&paused), ["fiction/sea-tales"], "{lie:?}");
        // Resumed, the moot asks bravo again and pauses again with the same
        // reason: a refused turn is never saved to be replayed.
        c.ok(&["moot", "resume", id]);
        let again = wait_state(&c, id, "paused");
        assert_eq!(again["reason"], paused["reason"], "{lie:?}");
        assert_eq!(again["turns_done"], paused["turns_done"], "{lie:?}");
    }
    // One opening search per start and per resume; no more.
    assert_eq!(liar.asked(Lie::Proof).0, 6);
    liar.stop().expect("the liar answered every request");
}
