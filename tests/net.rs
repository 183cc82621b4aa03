//! Two in-process networks on 127.0.0.1: connect, gossip with validation,
//! requests on versioned protocols, limits, and the block list.

use std::time::Duration;

use grove::net::{Event, NetConfig, Network, Verdict};
use libp2p::identity::Keypair;
use tokio::sync::mpsc;
use tokio::time::timeout;

fn config() -> NetConfig {
    let settings = grove::config::NetSettings {
        listen: vec!["/ip4/127.0.0.1/tcp/0".into()],
        max_message_bytes: 64 * 1024,
        max_connections: 16,
        request_timeout_secs: 10,
        turn_timeout_secs: 10,
        idle_timeout_secs: 60,
        ..Default::default()
    };
    settings.checked().unwrap()
}

/// The next event matching `pick`, within 20 s.
async fn next<T>(
    events: &mut mpsc::Receiver<Event>,
    mut pick: impl FnMut(Event) -> Option<T>,
) -> T {
    timeout(Duration::from_secs(20), async {
        loop {
            let event = events.recv().await.expect("network task alive");
            if let Some(v) = pick(event) {
                return v;
            }
        }
    })
    .await
    .expect("event within 20 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gossip_requests_limits_and_blocking() {
    let (a, mut ea) = Network::start(Keypair::generate_ed25519(), config())
        .await
        .unwrap();
    let (b, mut eb) = Network::start(Keypair::generate_ed25519(), config())
        .await
        .unwrap();
    let addr = a.listeners().await.unwrap()[0].clone();
    assert!(
        addr.to_string().starts_with("/ip4/127.0.0.1/tcp/")
            && !addr.to_string().ends_with("/tcp/0")
    );
    b.dial(addr.clone()).await.unwrap();
    let (pa, pb) = (a.local_peer_id(), b.local_peer_id());
    next(&mut ea, |e| {
        matches!(e, Event::PeerConnected(p) if p == pb).then_some(())
    })
    .await;
    next(&mut eb, |e| {
        matches!(e, Event::PeerConnected(p) if p == pa).then_some(())
    })
    .await;
    a.set_peers(vec![pa, pb], vec![]).await.unwrap();
    b.set_peers(vec![pa, pb], vec![]).await.unwrap();

    // Gossip: published by A, validated by B.
    a.subscribe("grove/test/1").await.unwrap();
    b.subscribe("grove/test/1").await.unwrap();
    let payload = b"a shard root announcement".to_vec();
    timeout(Duration::from_secs(20), async {
        while a.publish("grove/test/1", payload.clone()).await.is_err() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("publish succeeds once B's subscription is known");
    let (id, source, data) = next(&mut eb, |e| match e {
        Event::Gossip {
            id,
            source,
            topic,
            data,
            ..
        } if topic == "grove/test/1" => Some((id, source, data)),
        _ => None,
    })
    .await;
    assert_eq!(data, payload);
    assert_eq!(source, pa);
    b.report(id, source, Verdict::Accept).await.unwrap();
    // Gossip over the size limit is refused at publish.
    assert!(
        a.publish("grove/test/1", vec![0u8; 70 * 1024])
            .await
            .is_err()
    );

    // Requests: B asks A on /grove/search/1; A answers from its event stream.
    let answering = tokio::spawn(async move {
        loop {
            match ea.recv().await {
                Some(Event::Request {
                    id,
                    peer,
                    protocol,
                    data,
                }) => {
                    assert_eq!(peer, pb);
                    let mut answer = protocol.name().as_bytes().to_vec();
                    answer.extend_from_slice(&data);
                    a.respond(id, answer).await.unwrap();
                }
                Some(_) => {}
                None => break,
            }
        }
    });
    let answer = b
        .request(pa, grove::net::Protocol::Search, b"whale".to_vec())
        .await
        .unwrap();
    assert_eq!(answer, b"/grove/search/1whale");
    let answer = b
        .request(pa, grove::net::Protocol::Join, b"invite".to_vec())
        .await
        .unwrap();
    assert_eq!(answer, b"/grove/join/1invite");
    assert!(
        grove::net::Protocol::from_name("/grove/nope/1").is_none(),
        "unknown protocol refused"
    );
    assert!(
        b.request(pa, grove::net::Protocol::Search, vec![1u8; 65 * 1024])
            .await
            .is_err(),
        "oversized request refused"
    );

    // Blocking: once B blocks A, the connection goes and requests fail.
    b.set_peers(vec![pb], vec![pa]).await.unwrap();
    next(&mut eb, |e| {
        matches!(e, Event::PeerDisconnected(p) if p == pa).then_some(())
    })
    .await;
    assert!(
        b.request(pa, grove::net::Protocol::Search, b"x".to_vec())
            .await
            .is_err()
    );
    answering.abort();
}

/// A member that comes back under the same identity while the other side
/// still holds its old connection: gossipsub tells a peer its topics only
/// on the first connection, so the returning node never hears the other's
/// subscription and can publish to nobody. The network finds that out from
/// the gossip it still receives, or from the member's silence, and
/// reconnects, and both hear each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_back_before_its_old_connection_closed_is_heard_again() {
    back_before_old_connection_closed(true).await;
}

/// The same, when the other side sends nothing: the member's silence on
/// its topics shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_back_before_its_old_connection_closed_is_heard_though_nobody_speaks() {
    back_before_old_connection_closed(false).await;
}

async fn back_before_old_connection_closed(a_speaks: bool) {
    let kb = Keypair::generate_ed25519();
    let pb = kb.public().to_peer_id();
    let (a, mut ea) = Network::start(Keypair::generate_ed25519(), config())
        .await
        .unwrap();
    let pa = a.local_peer_id();
    a.set_peers(vec![pa, pb], vec![]).await.unwrap();
    a.subscribe(TOPIC).await.unwrap();
    let addr = a.listeners().await.unwrap()[0].clone();
    let (b_old, eb_old) = member_dials(&kb, pa, &addr).await;
    // A heard B's subscription (its publish reaches B).
    timeout(Duration::from_secs(20), async {
        while a.publish(TOPIC, b"before".to_vec()).await.is_err() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("A hears B's subscription");

    // B comes back (same key) while its old connection is still up.
    let (b, mut eb) = member_dials(&kb, pa, &addr).await;
    // The state this test is about (should gossipsub ever re-announce
    // topics on a later connection, this fails and the repair can go).
    assert!(
        b.publish(TOPIC, rand_payload()).await.is_err(),
        "the new B heard A's topics over A's second connection to it"
    );
    drop(b_old);
    drop(eb_old);
    // A's gossip still reaches the new B over the new connection (in
    // process, the old one is seen closed only when its pings fail).
    if a_speaks {
        reaches(&a, &mut eb, "A's gossip reaches the new B").await;
    }
    // And the new B's gossip reaches A, once B found it was not heard.
    reaches(&b, &mut ea, "the new B's gossip reaches A").await;
    if !a_speaks {
        reaches(&a, &mut eb, "A's gossip reaches the new B").await;
    }
}

/// A network under key `key`, a member beside `pa` on [`TOPIC`], dialled
/// to `pa` at `addr` and connected.
async fn member_dials(
    key: &Keypair,
    pa: libp2p::PeerId,
    addr: &libp2p::Multiaddr,
) -> (Network, mpsc::Receiver<Event>) {
    let (n, mut events) = Network::start(key.clone(), config()).await.unwrap();
    n.set_peers(vec![pa, n.local_peer_id()], vec![])
        .await
        .unwrap();
    n.subscribe(TOPIC).await.unwrap();
    // As a node started with its roster does: the roster is set before any
    // member is connected, so the reconnect a new member makes after its
    // welcome finds nobody to reconnect.
    tokio::time::sleep(Duration::from_secs(1)).await;
    n.dial(addr.clone()).await.unwrap();
    next(&mut events, |e| {
        matches!(e, Event::PeerConnected(p) if p == pa).then_some(())
    })
    .await;
    (n, events)
}

/// Publishes fresh payloads from `from` until one reaches `to` (its
/// events), within 60 s.
async fn reaches(from: &Network, to: &mut mpsc::Receiver<Event>, what: &str) {
    let author = from.local_peer_id();
    timeout(Duration::from_secs(60), async {
        loop {
            let _ = from.publish(TOPIC, rand_payload()).await;
            let got = timeout(Duration::from_millis(500), async {
                loop {
                    match to.recv().await.expect("network task alive") {
                        Event::Gossip { author: a, .. } if a == Some(author) => return,
                        _ => {}
                    }
                }
            })
            .await;
            if got.is_ok() {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what} within 60 s"));
}

const TOPIC: &str = "grove/test/1";

/// A payload gossipsub has not seen (message ids are content hashes).
fn rand_payload() -> Vec<u8> {
    use rand::RngExt;
    rand::rng().random::<[u8; 16]>().to_vec()
}
