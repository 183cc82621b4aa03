//! The node's one event stream (`/v1/events`): during a real three-node
//! moot with scripted models, `grove moot watch` prints each turn as it
//! lands on the host (within a generous bound) and polls nothing (the host's request
//! counters move by its one snapshot), while a reader of the HTTP
//! listener's stream, filtered to the moot, gets its whole life.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::cluster::{Daemon, eventually};
use crate::scripted_openai::{RecordedRequest, Reply};

/// Turns of the watched moot.
const TURNS: usize = 4;
/// How late a turn may be printed after it landed: a generous bound, not a
/// figure (on two shared cores a loaded machine has delayed a debug
/// process's print by 2.8 s). That the watch is pushed rather than polling
/// is what the request counts below prove.
const MAX_LATENCY_MS: i64 = 10_000;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A quoting reply after a pause, so turns land while the watch runs.
fn paced_reply(req: &RecordedRequest) -> Reply {
    Reply::Delay(
        Duration::from_millis(300),
        Box::new(crate::moot_net::quoting_reply(req)),
    )
}

/// Lines read from a reader as they come, each with the wall time (Unix
/// ms) it was read at.
type Timed = Arc<Mutex<Vec<(i64, String)>>>;

fn collect_lines(from: impl std::io::Read + Send + 'static) -> Timed {
    let lines: Timed = Arc::default();
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            sink.lock().unwrap().push((now_ms(), line));
        }
    });
    lines
}

/// The control-request counters of `d` (`control.requests.*`).
fn control_requests(d: &Daemon) -> std::collections::BTreeMap<String, u64> {
    let stats = d.json(&["node", "stats"]);
    stats["counters"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("control.requests."))
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

/// Opens `/v1/events?moot=ID` on the HTTP listener at `port`; its JSON
/// lines as they come (the chunk framing is skipped: every event is one
/// chunk, so each JSON line is whole).
fn http_events(port: u16, query: &str) -> Timed {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "GET /v1/events{query} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .unwrap();
    let lines = collect_lines(stream);
    eventually("the HTTP event stream to answer", || {
        lines
            .lock()
            .unwrap()
            .iter()
            .any(|(_, l)| l.starts_with("HTTP/1.1 200"))
    });
    lines
}

fn json_lines(lines: &Timed) -> Vec<Value> {
    lines
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, l)| l.starts_with('{'))
        .map(|(_, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn moot_watch_prints_each_turn_as_it_lands_from_the_event_stream_without_polling() {
    let port = crate::support::free_port();
    let listen = format!("127.0.0.1:{port}");
    let host_env = [("GROVE_HTTP__LISTEN", listen.as_str())];
    let (_servers, _a, _b, c) =
        crate::moot_net::three_nodes_with(paced_reply, false, [&[], &[], &host_env]);
    // Every reader of the stream, from before the moot starts: all of it.
    let all = http_events(port, "");
    let id = crate::moot_net::start_sea_moot(&c, TURNS as u32);
    let moot_only = http_events(port, &format!("?moot={id}"));
    let before = control_requests(&c);

    let watch_started = now_ms();
    let mut watch =
        c.g.cmd(&["moot", "watch", &id, "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    let printed = collect_lines(watch.stdout.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = watch.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "moot watch never ended");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "moot watch failed");
    let after = control_requests(&c);

    // Each turn once, in order, printed within MAX_LATENCY_MS of landing
    // (the watch may have printed the first turns from its snapshot).
    let printed = printed.lock().unwrap().clone();
    let turns: Vec<(i64, Value)> = printed
        .iter()
        .map(|(t, l)| (*t, serde_json::from_str::<Value>(l).unwrap()))
        .collect();
    assert_eq!(turns.len(), TURNS, "{printed:?}");
    let mut late = Vec::new();
    for (i, (read_at, line)) in turns.iter().enumerate() {
        assert_eq!(line["turn"], i as u64 + 1, "{line}");
        let landed = line["at"].as_i64().unwrap();
        assert!(landed > 0, "{line}");
        // A turn that landed before the watch started came from its
        // snapshot; the others from the stream, and must be prompt.
        if landed > watch_started {
            late.push(read_at - landed);
        }
    }
    eprintln!("moot watch: turn print delay after landing (ms): {late:?}");
    assert!(late.len() >= TURNS - 1, "the watch came late: {late:?}");
    assert!(
        late.iter().all(|ms| *ms <= MAX_LATENCY_MS),
        "a turn printed more than {MAX_LATENCY_MS} ms after it landed: {late:?}"
    );

    // No polling: the watch asked for the moot once (its snapshot) and
    // made no other request but its stream.
    let delta =
        |key: &str| after.get(key).copied().unwrap_or(0) - before.get(key).copied().unwrap_or(0);
    assert_eq!(
        delta("control.requests.socket./v1/moot/show"),
        1,
        "{after:?}"
    );
    assert_eq!(delta("control.requests.socket./v1/events"), 1, "{after:?}");
    let others: Vec<_> = after
        .keys()
        .filter(|k| {
            k.starts_with("control.requests.socket.")
                && !k.ends_with("/v1/moot/show")
                && !k.ends_with("/v1/events")
                && !k.ends_with("/v1/node/stats")
        })
        .filter(|k| delta(k) > 0)
        .collect();
    assert!(others.is_empty(), "requests during the watch: {others:?}");

    // The HTTP reader of this moot's events got its whole life, in order,
    // and nothing else; each turn's index points at its line in
    // `moot show`, with the same landing time.
    eventually("the moot's stream to carry moot_finished", || {
        json_lines(&moot_only)
            .iter()
            .any(|e| e["event"] == "moot_finished")
    });
    let events = json_lines(&moot_only);
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    let mut want = vec!["moot_turn"; TURNS];
    want.push("moot_finished");
    assert_eq!(names, want, "{events:?}");
    let stream_late: Vec<i64> = moot_only
        .lock()
        .unwrap()
        .iter()
        .filter_map(|(t, l)| {
            let e: Value = serde_json::from_str(l).ok()?;
            (e["event"] == "moot_turn").then(|| t - e["at"].as_i64().unwrap())
        })
        .collect();
    eprintln!("HTTP stream: moot_turn read delay after landing (ms): {stream_late:?}");
    let docs = crate::docs::documented_shapes();
    for e in &events {
        let shape = crate::docs::shape_of(e);
        assert!(
            docs.contains(&shape),
            "{e} has no example in docs/cli-json.md"
        );
    }
    let shown = c.json(&["moot", "show", &id]);
    for (i, e) in events.iter().take(TURNS).enumerate() {
        assert_eq!(e["moot"], id.as_str());
        assert!(e["at"].as_i64().unwrap() > 0);
        assert_eq!(e["turn"], i as u64, "{e}");
        let line = &shown["lines"][i];
        assert_eq!(e["text"], line["text"], "{e}");
        assert_eq!(e["at"], line["at"], "{e}");
        assert_eq!(e["key"], line["key"]);
        assert!(e["grounding"]["quotes_total"].is_u64(), "{e}");
        assert!(e["peer"].is_string() && e["detail"].is_string(), "{e}");
    }
    // The unfiltered reader saw the start too, and a book added later.
    c.add_book(9);
    eventually("the stream to carry book_added", || {
        json_lines(&all).iter().any(|e| e["event"] == "book_added")
    });
    let everything = json_lines(&all);
    for e in everything.iter().filter(|e| e["event"] == "book_added") {
        assert!(docs.contains(&crate::docs::shape_of(e)), "{e}");
    }
    assert!(
        everything
            .iter()
            .any(|e| e["event"] == "moot_started" && e["moot"] == id.as_str()),
        "{everything:?}"
    );
}

/// The `reachability_changed` events of addresses in `lines`, each as its
/// relayed addresses (empty when left out).
fn relayed_changes(lines: &Timed) -> Vec<Vec<String>> {
    json_lines(lines)
        .iter()
        .filter(|e| e["event"] == "reachability_changed" && e["changed"] == "addresses")
        .map(|e| {
            e["relayed"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| a.as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

#[test]
fn the_event_stream_carries_reachability_changes_as_a_relay_comes_and_goes() {
    // A relay on 127.0.0.1 (public by configuration, serving anyone, its
    // loopback address its external one so reservations carry it), first
    // run only to learn its peer id.
    let relay_port = crate::support::free_port();
    let relay_addr = format!("/ip4/127.0.0.1/tcp/{relay_port}");
    let external = format!("[\"{relay_addr}\"]");
    let relay_env = [
        ("GROVE_NET__REACHABILITY", "public"),
        ("GROVE_NET__RELAY__SERVE", "anyone"),
        ("GROVE_NET__EXTERNAL_ADDRESSES", external.as_str()),
    ];
    let mut relay = Daemon::start_in(
        crate::support::Grove::new(),
        "relay",
        &relay_env,
        &["--listen", &relay_addr],
        None,
    );
    let relay_id = relay.peer_id();
    relay.stop();

    // A private node that uses it, watched from before the relay is back:
    // the reservation's address arrives as an event, and goes as one.
    let port = crate::support::free_port();
    let listen = format!("127.0.0.1:{port}");
    let relays = format!("[\"{relay_addr}/p2p/{relay_id}\"]");
    let node = Daemon::start_with(
        "private",
        &[
            ("GROVE_NET__REACHABILITY", "private"),
            ("GROVE_NET__RELAYS", relays.as_str()),
            ("GROVE_HTTP__LISTEN", listen.as_str()),
        ],
    );
    let events = http_events(port, "");
    assert!(relayed_changes(&events).is_empty(), "no relay yet");
    let circuit = format!("{relay_addr}/p2p/{relay_id}/p2p-circuit");
    relay.restart();
    eventually("the stream to carry the relayed address", || {
        relayed_changes(&events)
            .iter()
            .any(|r| r.iter().any(|a| a.starts_with(&circuit)))
    });
    relay.stop();
    eventually("the stream to carry the relayed address gone", || {
        let changes = relayed_changes(&events);
        let reserved = changes
            .iter()
            .position(|r| r.iter().any(|a| a.starts_with(&circuit)));
        reserved.is_some_and(|i| changes[i + 1..].iter().any(Vec::is_empty))
    });
    eprintln!(
        "relayed addresses, event by event: {:?}",
        relayed_changes(&events)
    );
    // Each shape has its example in docs/cli-json.md; the detail counts
    // the addresses.
    let docs = crate::docs::documented_shapes();
    for e in json_lines(&events)
        .iter()
        .filter(|e| e["event"] == "reachability_changed")
    {
        assert!(
            docs.contains(&crate::docs::shape_of(e)),
            "{e} has no example in docs/cli-json.md"
        );
        if e["changed"] == "addresses" {
            let relayed = e["relayed"].as_array().map_or(0, Vec::len);
            let detail = format!("and {relayed} relayed addresses");
            assert!(e["detail"].as_str().unwrap().ends_with(&detail), "{e}");
        }
    }
    drop(node);
}

/// Overwrites 200 bytes at the head of `table`'s root page in the database
/// at `file` (after a checkpoint, so the page is the file's own); returns
/// where and what was there.
fn damage_table(file: &std::path::Path, table: &str) -> (u64, Vec<u8>) {
    use std::os::unix::fs::FileExt;
    let (root, page_size): (i64, i64) = {
        let conn = rusqlite::Connection::open(file).unwrap();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        let root = conn
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = ?1",
                [table],
                |r| r.get(0),
            )
            .unwrap_or_else(|e| panic!("{table} in {}: {e}", file.display()));
        let size = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        (root, size)
    };
    assert!(root > 1, "{table} is on page {root}");
    let at = ((root - 1) * page_size) as u64;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .unwrap();
    let mut original = vec![0u8; 200];
    f.read_exact_at(&mut original, at).unwrap();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ root as u64;
    let noise: Vec<u8> = (0..200)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    f.write_all_at(&noise, at).unwrap();
    f.sync_all().unwrap();
    (at, original)
}

/// A running node checks its databases every `node.integrity_check_secs`:
/// a page of a shard's chunks, a page of its full-text index and a page of
/// `mesh.db`, each overwritten while the node runs, is named by `/health`
/// (503 `damaged`), by `grove audit verify` (exit 1), by the
/// `grove_databases_damaged` gauge and by a `database_damaged` event; the
/// page put back, the next check publishes `database_recovered` and
/// `/health` is ok again.
#[test]
fn a_running_node_finds_damage_and_its_repair() {
    let port = crate::support::free_port();
    let listen = format!("127.0.0.1:{port}");
    let d = Daemon::start_with(
        "alpha",
        &[
            ("GROVE_HTTP__LISTEN", listen.as_str()),
            ("GROVE_NODE__INTEGRITY_CHECK_SECS", "1"),
        ],
    );
    let text = crate::support::generated_book("Damage", "Tester", 7, 400, 3);
    let book = d.g.write("damage.txt", text.as_bytes());
    d.ok(&["book", "add", book.to_str().unwrap()]);
    d.ok(&["mesh", "init", "--name", "careful"]);
    let events = http_events(port, "");
    let state = d.g.state();
    let shard = state.join("shards/main.db");
    let mesh = state.join("mesh.db");
    let mesh_table: String = rusqlite::Connection::open(&mesh)
        .unwrap()
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rootpage DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    for (file, table) in [
        (&shard, "chunks"),
        (&shard, "fts_all_data"),
        (&mesh, mesh_table.as_str()),
    ] {
        let shown = file.display().to_string();
        let (at, original) = damage_table(file, table);
        eventually(&format!("/health to name {shown} ({table})"), || {
            let h = crate::http::get(port, "/health");
            h.status == 503 && h.body.contains("\"damaged\"") && h.body.contains(&shown)
        });
        let audit = d.g.run(&["audit", "verify"]);
        assert_eq!(audit.status.code(), Some(1), "{table}");
        let said = String::from_utf8_lossy(&audit.stdout);
        assert!(
            said.contains("DAMAGED:") && said.contains(&shown),
            "{table}: {said}"
        );
        let metrics = crate::http::get(port, "/metrics").body;
        assert!(metrics.contains("grove_databases_damaged 1"), "{metrics}");
        // Put back: the next check finds it whole.
        {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
            f.write_all_at(&original, at).unwrap();
            f.sync_all().unwrap();
        }
        eventually(
            &format!("/health to be ok after {table} is put back"),
            || crate::http::get(port, "/health").status == 200,
        );
    }
    let seen = json_lines(&events);
    for (name, file) in [
        ("database_damaged", &shard),
        ("database_recovered", &shard),
        ("database_damaged", &mesh),
        ("database_recovered", &mesh),
    ] {
        let file = file.display().to_string();
        let n = seen
            .iter()
            .filter(|e| e["event"] == name && e["file"] == file.as_str())
            .count();
        let want = if file.ends_with("main.db") { 2 } else { 1 };
        assert_eq!(n, want, "{name} {file}: {seen:?}");
    }
}
