//! The node's one event stream (`/v1/events`): membership events, hosted
//! moots' lives, books added and removed, reachability changes (names and
//! shapes in `api::dto::events`). Every mesh transition is turned into
//! membership events on the mesh thread ([`of_transition`], from its audit
//! events and the roster before and after), and the node loop adds members
//! going online and offline; the moot host, the book endpoints and the node
//! loop publish the rest. They go out on one bounded broadcast channel:
//! publishing never waits, and a watcher that falls more than [`BUFFER`]
//! events behind is dropped with a last line that says so. A `detail` is
//! one printable line: the names in it are escaped (`name` carries them as
//! they are).

use std::convert::Infallible;
use std::sync::Arc;

use hyper::body::Bytes;
use libp2p::PeerId;
use tokio::sync::{broadcast, watch};

use crate::api::dto::{Event, MeshEvent};
use crate::identity::peer_id_text;
use crate::mesh::names::Escaped;
use crate::mesh::roster::{Change, Roster};
use crate::mesh::state::{AuditEvent, MeshState, ProposalRec, RosterNode, Transition};

/// Events a watcher may fall behind before it is dropped.
pub const BUFFER: usize = 256;

/// The event channel; cheap to clone.
#[derive(Clone)]
pub struct Events {
    tx: broadcast::Sender<Arc<Event>>,
    closing: Arc<watch::Sender<bool>>,
}

impl Default for Events {
    fn default() -> Self {
        Events::new(BUFFER)
    }
}

impl Events {
    pub fn new(buffer: usize) -> Events {
        Events {
            tx: broadcast::channel(buffer.max(1)).0,
            closing: Arc::new(watch::channel(false).0),
        }
    }

    /// Sends to every watcher; never waits (nobody watching is fine).
    pub fn publish(&self, event: impl Into<Event>) {
        let event = event.into();
        tracing::debug!(event = %event.name(), detail = %event.detail(), "event");
        let _ = self.tx.send(Arc::new(event));
    }

    pub fn subscribe(&self) -> Subscription {
        Subscription {
            rx: self.tx.subscribe(),
            closing: self.closing.subscribe(),
        }
    }

    /// Ends every watch stream and the hook runner (the node is stopping).
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// A member's connection came up or went down.
    pub fn member_seen(&self, view: &MeshState, peer: PeerId, online: bool, now_ms: i64) {
        let Some(roster) = view.roster() else {
            return;
        };
        let Some(m) = roster.member(&peer.to_bytes()) else {
            return;
        };
        let event = if online {
            "member_online"
        } else {
            "member_offline"
        };
        self.publish(MeshEvent {
            peer: Some(peer.to_string()),
            name: Some(m.name.clone()),
            detail: format!(
                "member {} ({peer}) is {}",
                Escaped(&m.name),
                if online { "online" } else { "offline" }
            ),
            ..event_at(event, now_ms, roster.epoch)
        });
    }
}

/// One watcher's end of the channel.
pub struct Subscription {
    rx: broadcast::Receiver<Arc<Event>>,
    closing: watch::Receiver<bool>,
}

/// What a watcher gets next.
pub enum Next {
    Event(Arc<Event>),
    /// It fell this many events behind and is dropped.
    Lagged(u64),
    /// The node is stopping.
    Closed,
}

impl Subscription {
    pub async fn next(&mut self) -> Next {
        if *self.closing.borrow() {
            return Next::Closed;
        }
        tokio::select! {
            r = self.rx.recv() => match r {
                Ok(e) => Next::Event(e),
                Err(broadcast::error::RecvError::Lagged(n)) => Next::Lagged(n),
                Err(broadcast::error::RecvError::Closed) => Next::Closed,
            },
            _ = self.closing.wait_for(|c| *c) => Next::Closed,
        }
    }
}

/// Which events a watcher wants (`/v1/events?moot=ID`).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this moot's events.
    pub moot: Option<String>,
}

impl Filter {
    fn keeps(&self, e: &Event) -> bool {
        match &self.moot {
            Some(id) => e.moot() == Some(id.as_str()),
            None => true,
        }
    }
}

/// The body of a `/v1/events` answer: one JSON event per line until the
/// node stops or the watcher falls behind (then one last `watch_dropped`
/// line says why, whatever the filter). `hold` is kept as long as the
/// stream (a listener's slot for it).
pub fn watch_lines<H: Send + 'static>(
    sub: Subscription,
    filter: Filter,
    hold: H,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> {
    futures::stream::unfold(Some((sub, hold)), move |state| {
        let filter = filter.clone();
        async move {
            let (mut sub, hold) = state?;
            let (event, keep) = loop {
                match sub.next().await {
                    Next::Event(e) if filter.keeps(&e) => break (e, true),
                    Next::Event(_) => continue,
                    Next::Lagged(n) => {
                        break (
                            Arc::new(Event::Mesh(MeshEvent {
                                detail: format!(
                                    "this watcher fell {n} events behind (more than {BUFFER}) and is dropped; watch again"
                                ),
                                ..event_at("watch_dropped", crate::now_ms(), 0)
                            })),
                            false,
                        );
                    }
                    Next::Closed => return None,
                }
            };
            let mut line = serde_json::to_vec(&*event).unwrap_or_default();
            line.push(b'\n');
            Some((Ok(Bytes::from(line)), keep.then_some((sub, hold))))
        }
    })
}

fn event_at(event: &str, at: i64, epoch: u64) -> MeshEvent {
    MeshEvent {
        event: event.into(),
        at,
        epoch,
        proposal: None,
        kind: None,
        target: None,
        peer: None,
        name: None,
        yes: None,
        detail: String::new(),
    }
}

/// A proposal's kind and target as shown to operators (add/kick: the peer;
/// quorum: the rule).
pub fn change_view(c: &Change) -> (&'static str, Option<String>) {
    match c {
        Change::Add(m) => ("add", Some(peer_id_text(&m.peer_id))),
        Change::Kick(peer) => ("kick", Some(peer_id_text(peer))),
        Change::Rotate => ("rotate", None),
        Change::Quorum(q) => ("quorum", Some(format!("{}/{}", q.numerator, q.denominator))),
        Change::Approve(a) => ("approve", Some(hex::encode(a.invite_id))),
        Change::RevokeApproval(id) => ("revoke_approval", Some(hex::encode(id))),
        Change::UpdateKey(u) => ("update_key", Some(peer_id_text(&u.member))),
        Change::CommitForm(f) => ("commit_form", Some(f.to_wire().to_string())),
    }
}

fn short(hex: &str) -> &str {
    &hex[..hex.len().min(12)]
}

/// The events of one persisted transition from `before` to `after`.
pub fn of_transition(
    before: &MeshState,
    after: &MeshState,
    t: &Transition,
    now_ms: i64,
) -> Vec<MeshEvent> {
    let mut out: Vec<MeshEvent> = t
        .audit
        .iter()
        .filter_map(|a| audit_event(before, after, a, now_ms))
        .collect();
    if before.tip != after.tip
        && let Some(node) = after.tip_node()
    {
        commit_events(before, node, now_ms, &mut out);
    }
    out
}

/// A string field of an audit body.
fn body_text(body: &serde_json::Value, key: &str) -> Option<String> {
    body.get(key).and_then(|x| x.as_str()).map(String::from)
}

/// The kind and target of a proposal as [`MeshEvent`] fields.
fn kind_and_target(rec: Option<&ProposalRec>) -> (Option<String>, Option<String>) {
    rec.map(|p| change_view(&p.change))
        .map_or((None, None), |(k, t)| (Some(k.to_string()), t))
}

/// The event (if any) of one audit entry: proposals opened, votes cast,
/// proposals rejected, withdrawn or expired.
fn audit_event(
    before: &MeshState,
    after: &MeshState,
    a: &AuditEvent,
    now_ms: i64,
) -> Option<MeshEvent> {
    let epoch = a
        .body
        .get("epoch")
        .and_then(|e| e.as_u64())
        .unwrap_or(after.epoch());
    let proposal = body_text(&a.body, "proposal");
    let rec = proposal.as_deref().and_then(|hash| {
        let bytes: [u8; 32] = hex::decode(hash).ok()?.try_into().ok()?;
        after
            .proposals
            .get(&bytes)
            .or_else(|| before.proposals.get(&bytes))
            .cloned()
    });
    let (kind, target) = kind_and_target(rec.as_deref());
    let what = proposal_words(proposal.as_deref(), kind.as_deref(), target.as_deref());
    let base = |event: &str| MeshEvent {
        proposal: proposal.clone(),
        kind: kind.clone(),
        target: target.clone(),
        ..event_at(event, now_ms, epoch)
    };
    Some(match a.kind {
        "mesh.proposal" => {
            let by = rec.as_ref().map(|p| peer_id_text(&p.proposer));
            MeshEvent {
                detail: format!("{what} opened by {}", by.as_deref().unwrap_or("?")),
                peer: by,
                ..base("proposal_opened")
            }
        }
        "mesh.vote" => {
            let voter =
                body_text(&a.body, "voter").unwrap_or_else(|| peer_id_text(&after.me.peer_id));
            let yes = a.body.get("yes").and_then(|y| y.as_bool());
            MeshEvent {
                detail: format!(
                    "{voter} voted {} on {what}",
                    if yes == Some(true) { "yes" } else { "no" }
                ),
                peer: Some(voter),
                yes,
                ..base("vote_cast")
            }
        }
        "mesh.proposal.reject" => MeshEvent {
            detail: format!("{what} rejected: its quorum is unreachable"),
            ..base("rejected")
        },
        "mesh.proposal.withdraw" => MeshEvent {
            detail: format!("{what} withdrawn by its proposer"),
            ..base("withdrawn")
        },
        "mesh.proposal.expire" => MeshEvent {
            detail: format!("{what} expired"),
            ..base("expired")
        },
        "mesh.envelope.proven" => {
            let committer = body_text(&a.body, "committer");
            let accuser = body_text(&a.body, "accuser");
            MeshEvent {
                detail: format!(
                    "{} sealed an envelope that does not open for {} at epoch {epoch}: proven",
                    committer.as_deref().unwrap_or("?"),
                    accuser.as_deref().unwrap_or("?")
                ),
                target: committer,
                peer: accuser,
                ..event_at("envelope_proven", now_ms, epoch)
            }
        }
        _ => return None,
    })
}

/// "proposal <short hash> (<kind> <target>)", as event details name a proposal.
fn proposal_words(proposal: Option<&str>, kind: Option<&str>, target: Option<&str>) -> String {
    format!(
        "proposal {}{}",
        proposal.map(short).unwrap_or("?"),
        kind.map(|k| format!(
            " ({k}{})",
            target.map(|t| format!(" {t}")).unwrap_or_default()
        ))
        .unwrap_or_default()
    )
}

/// The events of a new tip: `committed` (unless this node was only now
/// welcomed) and the members it added and removed.
fn commit_events(before: &MeshState, node: &RosterNode, now_ms: i64, out: &mut Vec<MeshEvent>) {
    let epoch = node.roster.epoch;
    let proposal = node.proposal_hash.map(hex::encode);
    let rec = node
        .proposal_hash
        .and_then(|h| before.proposals.get(&h).cloned());
    let (kind, target) = kind_and_target(rec.as_deref());
    if before.roster().is_some() {
        out.push(MeshEvent {
            proposal: proposal.clone(),
            kind,
            target,
            detail: format!(
                "epoch {epoch} committed{} ({} members)",
                proposal
                    .as_deref()
                    .map(|p| format!(" by proposal {}", short(p)))
                    .unwrap_or_default(),
                node.roster.members.len()
            ),
            ..event_at("committed", now_ms, epoch)
        });
    }
    member_changes(before.roster(), &node.roster, &proposal, now_ms, out);
}

/// `joined` and `removed` events between two rosters (every member is new
/// when there was none before: this node was welcomed).
fn member_changes(
    before: Option<&Roster>,
    after: &Roster,
    proposal: &Option<String>,
    now_ms: i64,
    out: &mut Vec<MeshEvent>,
) {
    let had = |r: &Roster, peer: &[u8]| r.member(peer).is_some();
    for m in &after.members {
        let new = match before {
            Some(b) => !had(b, &m.peer_id),
            None => m.joined_epoch == after.epoch,
        };
        if new {
            let peer = peer_id_text(&m.peer_id);
            out.push(MeshEvent {
                proposal: proposal.clone(),
                detail: format!(
                    "{} ({peer}) joined at epoch {}",
                    Escaped(&m.name),
                    after.epoch
                ),
                peer: Some(peer),
                name: Some(m.name.clone()),
                ..event_at("joined", now_ms, after.epoch)
            });
        }
    }
    for m in before.map(|b| b.members.as_slice()).unwrap_or_default() {
        if !had(after, &m.peer_id) {
            let peer = peer_id_text(&m.peer_id);
            out.push(MeshEvent {
                proposal: proposal.clone(),
                detail: format!(
                    "{} ({peer}) removed at epoch {}",
                    Escaped(&m.name),
                    after.epoch
                ),
                peer: Some(peer),
                name: Some(m.name.clone()),
                ..event_at("removed", now_ms, after.epoch)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[tokio::test]
    async fn a_watcher_that_falls_behind_is_dropped_with_a_message_and_never_blocks() {
        let events = Events::new(4);
        let slow = watch_lines(events.subscribe(), Filter::default(), ());
        // The publisher never waits on the watcher that does not read.
        for i in 0..100 {
            events.publish(MeshEvent {
                detail: format!("event {i}"),
                ..event_at("committed", i, 1)
            });
        }
        let lines: Vec<_> = slow.collect().await;
        assert_eq!(lines.len(), 1, "only the drop notice, then the end");
        let last: MeshEvent = serde_json::from_slice(lines[0].as_ref().unwrap()).unwrap();
        assert_eq!(last.event, "watch_dropped");
        assert!(
            last.detail.contains("fell 96 events behind"),
            "{}",
            last.detail
        );
    }

    #[tokio::test]
    async fn a_watcher_gets_events_in_order_and_ends_when_the_node_stops() {
        let events = Events::new(8);
        let mut lines = Box::pin(watch_lines(events.subscribe(), Filter::default(), ()));
        events.publish(event_at("joined", 1, 1));
        events.publish(event_at("removed", 2, 2));
        for want in ["joined", "removed"] {
            let line = lines.next().await.unwrap().unwrap();
            let e: MeshEvent = serde_json::from_slice(&line).unwrap();
            assert_eq!(e.event, want);
        }
        events.close();
        assert!(lines.next().await.is_none());
    }
}
