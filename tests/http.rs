//! The operator's HTTP listener (`[http]`): its rules (the loopback Host
//! check, same-origin state changes, the bearer token elsewhere,
//! `metrics_without_auth`), `/health` turning 503 for a dead part, and
//! `/metrics` of a real three-node moot passing `promtool check metrics`
//! with its counters moving.

use crate::support::free_port;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster::{Daemon, eventually};
use crate::support::{Grove, skip};

/// An answer: status, headers (lower-case names) and body.
pub(crate) struct Answer {
    pub status: u16,
    headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// One HTTP/1.1 request over `stream`, headers exactly as given (plus
/// `Connection: close`); reads the whole answer.
fn request_on(
    mut stream: impl Read + Write,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Answer {
    let mut text = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    if method != "GET" && method != "HEAD" {
        text.push_str("Content-Length: 0\r\n");
    }
    text.push_str("\r\n");
    stream.write_all(text.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {raw:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

/// A request to `port` on 127.0.0.1 with `Host: 127.0.0.1:PORT` unless
/// `headers` name another.
pub(crate) fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let host = format!("127.0.0.1:{port}");
    let mut all: Vec<(&str, &str)> = headers.to_vec();
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        all.push(("Host", &host));
    }
    request_on(stream, method, path, &all)
}

pub(crate) fn get(port: u16, path: &str) -> Answer {
    request(port, "GET", path, &[])
}

/// The body of a GET that must answer 200.
pub(crate) fn get_text(port: u16, path: &str) -> String {
    let a = get(port, path);
    assert_eq!(a.status, 200, "{path}: {}", a.body);
    a.body
}

/// A daemon with its HTTP listener on `ip:PORT`, and that port.
fn with_listener(name: &str, ip: &str, env: &[(&str, &str)]) -> (Daemon, u16) {
    let port = free_port();
    let listen = format!("{ip}:{port}");
    let mut all = vec![("GROVE_HTTP__LISTEN", listen.as_str())];
    all.extend_from_slice(env);
    (Daemon::start_with(name, &all), port)
}

/// The security headers on every answer, refusals included.
fn assert_guarded(a: &Answer) {
    assert_eq!(a.header("x-frame-options"), Some("DENY"));
    assert_eq!(a.header("x-content-type-options"), Some("nosniff"));
    let csp = a.header("content-security-policy").unwrap_or_default();
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
}

#[test]
fn a_loopback_listener_refuses_rebinding_and_cross_origin_changes() {
    let (d, port) = with_listener("alpha", "127.0.0.1", &[]);
    let ok = get(port, "/health");
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.json()["status"], "ok");
    assert_guarded(&ok);
    for host in ["localhost", &format!("localhost:{port}"), "[::1]"] {
        assert_eq!(
            request(port, "GET", "/v1/node", &[("Host", host)]).status,
            200,
            "{host}"
        );
    }
    // DNS rebinding: a page of rebind.example whose name now points here.
    let rebound = request(port, "GET", "/health", &[("Host", "rebind.example")]);
    assert_eq!(rebound.status, 403, "{}", rebound.body);
    assert!(rebound.json()["error"].as_str().unwrap().contains("Host"));
    assert_guarded(&rebound);
    // A state change from another origin, without the token.
    let origin = ("Origin", "http://evil.example");
    let cross = request(port, "POST", "/v1/moot/start", &[origin]);
    assert_eq!(cross.status, 403, "{}", cross.body);
    assert_guarded(&cross);
    let fetch = request(port, "POST", "/health", &[("Sec-Fetch-Site", "cross-site")]);
    assert_eq!(fetch.status, 403, "{}", fetch.body);
    // From its own origin it passes the rules (and the listener has no
    // route that changes state).
    let own = format!("http://127.0.0.1:{port}");
    let same = request(port, "POST", "/v1/moot/start", &[("Origin", &own)]);
    assert_eq!(same.status, 404, "{}", same.body);
    let same = request(
        port,
        "POST",
        "/health",
        &[("Sec-Fetch-Site", "same-origin")],
    );
    assert_eq!(same.status, 404, "{}", same.body);
    // No token file for a loopback listener without a token.
    assert!(!d.g.state().join("http.token").exists());
}

/// The head of a `/v1/events` answer on a connection kept open.
fn open_stream(port: u16) -> (std::net::TcpStream, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap() == 1 {
        head.push(byte[0]);
    }
    (stream, String::from_utf8_lossy(&head).into_owned())
}

#[test]
fn the_listener_serves_the_event_stream_within_its_cap() {
    let (_d, port) = with_listener("alpha", "127.0.0.1", &[]);
    let open: Vec<_> = (0..16)
        .map(|_| {
            let (stream, head) = open_stream(port);
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            assert!(head.contains("application/x-ndjson"), "{head}");
            stream
        })
        .collect();
    // A 17th stream is refused; requests still get in.
    let (_, head) = open_stream(port);
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert_eq!(get(port, "/health").status, 200);
    // A closed stream gives its slot back.
    drop(open);
    eventually("a stream slot to come back", || {
        open_stream(port).1.starts_with("HTTP/1.1 200")
    });
}

/// The listener's routes (`Served::Both` in the route table of `control/mod.rs`).
const ROUTES: &[&str] = &[
    "/health",
    "/metrics",
    "/v1/node",
    "/v1/node/stats",
    "/v1/peers",
    "/v1/mesh/status",
    "/v1/mesh/proposals",
    "/v1/books",
    "/v1/shards",
    "/v1/moots",
    "/v1/moot/show",
];

#[test]
fn a_non_loopback_listener_needs_the_token_on_every_route() {
    // Bound on every address, asked on 127.0.0.1: the rule follows the
    // configured address.
    let (mut d, port) = with_listener("alpha", "0.0.0.0", &[]);
    let file = d.g.state().join("http.token");
    let token = std::fs::read_to_string(&file).unwrap().trim().to_string();
    assert_eq!(token.len(), 64, "{token}");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    assert!(
        d.log().contains("http.token"),
        "the log names the token file"
    );
    let bearer = format!("Bearer {token}");
    for route in ROUTES {
        let bare = get(port, route);
        assert_eq!(bare.status, 401, "{route}: {}", bare.body);
        assert_guarded(&bare);
        assert!(bare.header("www-authenticate").is_some(), "{route}");
        let wrong = request(port, "GET", route, &[("Authorization", "Bearer 00")]);
        assert_eq!(wrong.status, 401, "{route}");
        let with = request(port, "GET", route, &[("Authorization", &bearer)]);
        // The mesh views say "no mesh" (404) and a moot needs its id (400):
        // past the rules either way.
        let expect: &[u16] = match *route {
            "/v1/mesh/status" | "/v1/mesh/proposals" => &[404],
            "/v1/moot/show" => &[400],
            _ => &[200],
        };
        assert!(
            expect.contains(&with.status),
            "{route}: {} {}",
            with.status,
            with.body
        );
    }
    // The same token after a restart (the file is kept).
    d.restart();
    assert_eq!(
        std::fs::read_to_string(&file).unwrap().trim(),
        token.as_str()
    );
    drop(d);

    // `metrics_without_auth` opens /metrics alone.
    let (_d, port) = with_listener(
        "bravo",
        "0.0.0.0",
        &[
            ("GROVE_HTTP__METRICS_WITHOUT_AUTH", "true"),
            ("GROVE_HTTP__TOKEN", "a-token-set-in-the-config"),
        ],
    );
    assert_eq!(get(port, "/metrics").status, 200);
    assert_eq!(get(port, "/health").status, 401);
    let with = request(
        port,
        "GET",
        "/health",
        &[("Authorization", "Bearer a-token-set-in-the-config")],
    );
    assert_eq!(with.status, 200, "{}", with.body);
    // `config check` masks the token, and refuses a short one by its key.
    let g = Grove::new();
    let out = g
        .cmd(&["config", "check", "--json"])
        .env("GROVE_HTTP__TOKEN", "a-token-set-in-the-config")
        .output()
        .unwrap();
    assert!(out.status.success());
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let http = &shown["settings"]["http"];
    assert_eq!(http["token"], "********", "{shown}");
    assert_eq!(http["listen"], Value::Null);
    let out = g
        .cmd(&["config", "check"])
        .env("GROVE_HTTP__TOKEN", "short")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("http.token"));
    let out = g
        .cmd(&["config", "check"])
        .env("GROVE_HTTP__LISTEN", "localhost")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("http.listen"));
}

/// `/health` on the control socket, through the same handler.
fn health_on_socket(g: &Grove) -> Option<Answer> {
    let stream = std::os::unix::net::UnixStream::connect(g.state().join("grove.sock")).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    Some(request_on(
        stream,
        "GET",
        "/health",
        &[("Host", "localhost")],
    ))
}

#[test]
fn health_names_the_part_that_died_and_is_ok_after_a_restart() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let g = Grove::new();
    let spawn = |fault: Option<&str>| {
        let mut cmd = g.cmd(&["node", "run", "--listen", "/ip4/127.0.0.1/tcp/0"]);
        let log = std::fs::File::create(g.dir.path().join("node.log")).unwrap();
        cmd.env("GROVE_HTTP__LISTEN", &listen)
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(part) = fault {
            cmd.env("GROVETEST_PANIC", part);
        }
        cmd.spawn().unwrap()
    };
    let mut node = spawn(Some("store"));
    eventually("the node to answer /health", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            && get(port, "/health").status == 200
    });
    assert_eq!(health_on_socket(&g).unwrap().status, 200);
    // The fault comes a second after start; the node lingers 3 s after
    // the watchdog finds it, answering 503.
    let start = Instant::now();
    let failed = loop {
        let a = get(port, "/health");
        if a.status != 200 {
            break a;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "/health stayed 200"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(failed.status, 503, "{}", failed.body);
    assert_eq!(
        failed.json(),
        serde_json::json!({"status": "failed", "part": "store worker"})
    );
    let on_socket = health_on_socket(&g).expect("the socket answers during the linger");
    assert_eq!(on_socket.status, 503);
    assert_eq!(on_socket.json()["part"], "store worker");
    let status = node.wait().unwrap();
    assert!(!status.success(), "an unhealthy node exits with an error");

    let mut node = spawn(None);
    eventually("the restarted node to answer /health", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            && get(port, "/health").status == 200
    });
    assert_eq!(get(port, "/health").json()["status"], "ok");
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(node.id() as i32, libc::SIGTERM) };
    assert!(node.wait().unwrap().success());
}

/// One sample's value in Prometheus text (`name{labels} value`).
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// The sum of a family's samples whose labels contain every `want`.
fn sum_of(text: &str, family: &str, want: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let rest = series.strip_prefix(family)?;
            (rest.is_empty() || rest.starts_with('{')).then_some(())?;
            want.iter().all(|w| rest.contains(w)).then_some(())?;
            value.parse::<f64>().ok()
        })
        .sum()
}

#[test]
fn metrics_of_a_three_node_moot_pass_promtool_and_move() {
    let promtool = Command::new("promtool").arg("--version").output();
    if !promtool.is_ok_and(|o| o.status.success()) {
        skip("promtool (Debian's prometheus package) is not installed");
        return;
    }
    let (port, speaker_port) = (free_port(), free_port());
    let listen = format!("127.0.0.1:{port}");
    let speaker_listen = format!("127.0.0.1:{speaker_port}");
    let host_env: &[(&'static str, &str)] = &[("GROVE_HTTP__LISTEN", &listen)];
    let speaker_env: &[(&'static str, &str)] = &[("GROVE_HTTP__LISTEN", &speaker_listen)];
    let (servers, a, _b, c) = crate::moot_net::three_nodes_with(
        crate::moot_net::quoting_reply,
        false,
        [speaker_env, &[], host_env],
    );
    let speaker_before = get(speaker_port, "/metrics").body;
    let before = get(port, "/metrics").body;
    let id = crate::moot_net::start_sea_moot(&c, 4);
    crate::moot_net::wait_state(&c, &id, "finished");
    c.ok(&["book", "search", "whale sea", "--mesh"]);
    // Gossip and announcements keep flowing; give a counter a moment.
    let mut after = String::new();
    eventually("gossip to be counted", || {
        after = get(port, "/metrics").body;
        sum_of(&after, "grove_gossip_messages_total", &["accepted"])
            > sum_of(&before, "grove_gossip_messages_total", &["accepted"])
            || sum_of(&after, "grove_gossip_published_total", &[])
                > sum_of(&before, "grove_gossip_published_total", &[])
    });

    // promtool reads the Prometheus text format (what a client gets without
    // asking for OpenMetrics).
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(after.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{after}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // The moot's turns: counted, and timed by the histogram.
    assert_eq!(
        sample(&after, "grove_moot_turns_total{outcome=\"landed\"}"),
        4.0,
        "{after}"
    );
    assert_eq!(
        sum_of(&after, "grove_moot_turn_duration_seconds_count", &[]),
        4.0,
        "{after}"
    );
    assert!(sum_of(&after, "grove_search_duration_seconds_count", &["mesh"]) >= 1.0);
    // Their grounding: every landed turn has a verdict; the quotes checked
    // and found give the rate.
    assert_eq!(sum_of(&after, "grove_moot_grounding_total", &[]), 4.0);
    let quotes = |count: &str| {
        let label = format!("count=\"{count}\"");
        sum_of(&after, "grove_moot_quotes_total", &[&label])
    };
    assert!(
        quotes("checked") >= 1.0 && quotes("found") >= 1.0,
        "{after}"
    );
    // The turns were requests alpha and bravo served; the host's mesh
    // search asked them too.
    let speaker = get(speaker_port, "/metrics").body;
    let served = |text: &str, protocol: &str| {
        let p = format!("protocol=\"{protocol}\"");
        sum_of(text, "grove_requests_total", &["outcome=\"served\"", &p])
    };
    assert!(
        served(&speaker, "turn") >= served(&speaker_before, "turn") + 2.0,
        "{speaker}"
    );
    assert!(served(&speaker, "search") >= 1.0, "{speaker}");
    assert!(sum_of(&speaker, "grove_search_duration_seconds_count", &["peer"]) >= 1.0);
    assert_eq!(sample(&after, "grove_mesh_members"), 3.0);
    assert_eq!(sample(&after, "grove_mesh_epoch"), 2.0);
    // The founder applied its genesis and the two adds.
    assert_eq!(sample(&after, "grove_mesh_commits_applied_total"), 3.0);
    assert_eq!(sample(&after, "grove_books"), 0.0);
    assert_eq!(sample(&speaker, "grove_books"), 1.0);
    assert!(sample(&speaker, "grove_book_chunks") >= 1.0);
    // alpha's book went in through its daemon: counted, sized and timed.
    assert_eq!(
        sum_of(&speaker, "grove_ingest_books_total", &["status=\"added\""]),
        1.0
    );
    assert!(sum_of(&speaker, "grove_ingest_bytes_total", &[]) > 1000.0);
    assert_eq!(
        sum_of(&speaker, "grove_ingest_duration_seconds_count", &[]),
        1.0
    );
    eventually("every member online at the host", || {
        sample(&get(port, "/metrics").body, "grove_mesh_members_online") == 3.0
    });

    // libp2p's own families, in the same registry: connections, identify
    // and ping with the members, gossipsub messages.
    assert!(
        sum_of(&after, "libp2p_swarm_connections_established_total", &[]) >= 2.0,
        "{after}"
    );
    assert!(sum_of(&after, "libp2p_identify_received_total", &[]) >= 1.0);
    assert!(sum_of(&after, "libp2p_ping_rtt_seconds_count", &[]) >= 1.0);
    assert!(sum_of(&after, "libp2p_gossipsub_messages_total", &[]) >= 1.0);

    // The same counters as `node stats`: one set, not two.
    let stats = c.json(&["node", "stats"]);
    let landed = stats["counters"]["moot.turns.landed"].as_u64().unwrap();
    assert_eq!(landed, 4);

    // alpha's model (its turns): every token its server reported, counted
    // once, and the seconds beside them.
    let (prompt, generated) = servers[0].reported_tokens();
    let answered = servers[0].requests().len() as f64;
    assert!(answered >= 2.0 && generated > 0, "{answered} {generated}");
    assert_eq!(
        sample(&speaker_before, "grove_model_prompt_tokens_total"),
        0.0
    );
    assert_eq!(
        sample(&speaker, "grove_model_prompt_tokens_total"),
        prompt as f64,
        "{speaker}"
    );
    assert_eq!(
        sample(&speaker, "grove_model_generated_tokens_total"),
        generated as f64
    );
    assert_eq!(
        sample(
            &speaker,
            "grove_model_completions_total{outcome=\"answered\"}"
        ),
        answered
    );
    let secs = |family: &str| sample(&speaker, family);
    let (total, reading, generating) = (
        secs("grove_model_seconds_total"),
        secs("grove_model_prompt_seconds_total"),
        secs("grove_model_generation_seconds_total"),
    );
    assert!(
        generating > 0.0 && reading > 0.0 && reading + generating <= total,
        "{speaker}"
    );
    let alpha = a.json(&["node", "stats"]);
    assert_eq!(alpha["counters"]["model.prompt.tokens"], prompt);
    assert_eq!(alpha["counters"]["model.generated.tokens"], generated);
    let shown = a.ok(&["node", "stats"]);
    let line = format!("prompt {prompt} tokens (");
    assert!(
        shown.contains(&line) && shown.contains(&format!("generated {generated} tokens (")),
        "{shown}"
    );
    // charlie, the host, counts its own model's calls (its summaries, if
    // the moot had any), not its speakers'.
    let (narrated, _) = servers[2].reported_tokens();
    assert_eq!(
        sample(
            &get(port, "/metrics").body,
            "grove_model_prompt_tokens_total"
        ),
        narrated as f64
    );

    // OpenMetrics when asked for, ending in # EOF.
    let om = request(
        port,
        "GET",
        "/metrics",
        &[("Accept", "application/openmetrics-text; version=1.0.0")],
    );
    assert!(
        om.header("content-type")
            .unwrap()
            .starts_with("application/openmetrics-text"),
    );
    assert!(om.body.ends_with("# EOF\n"));
    assert!(om.body.contains("# TYPE grove_moot_turns counter"));
}
