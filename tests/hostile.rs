//! Hostile and careless input to the mesh commands, through the real binary
//! (issue 27): names and notes that would forge output are refused where
//! they enter (CLI, control socket, `node.name`) and leave nothing behind; a
//! cut or huge invite says what it is; `mesh watch` and `moot watch` say
//! the daemon stopped.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cluster::{Daemon, eventually, invite};
use crate::moot_net::{quoting_reply, start_sea_moot, three_nodes};
use crate::scripted_openai::{RecordedRequest, Reply};
use crate::support::Grove;

const FORGED: &str = "evil\nFAKE LOG LINE joined at epoch 99";

/// One raw HTTP request on `d`'s control socket: (status, body).
fn raw(d: &Daemon, method: &str, target: &str, body: &str) -> (u16, String) {
    let mut s = UnixStream::connect(d.g.state().join("grove.sock")).expect("control socket");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "{method} {target} HTTP/1.1\r\nHost: grove\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

fn no_invites(d: &Daemon) {
    let list = d.json(&["mesh", "invite", "list"]);
    assert_eq!(list["invites"], serde_json::json!([]), "{list}");
}

#[test]
fn names_notes_and_invites_that_would_forge_output_are_refused_and_leave_nothing() {
    // `node.name` follows the same rule, in `config check` and at start.
    let g = Grove::new();
    let out = g
        .cmd(&["config", "check"])
        .env("GROVE_NODE__NAME", "tab\there")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("node.name") && err.contains("tab"), "{err}");
    // `mesh init` with no daemon, straight on mesh.db.
    let err = g.fails(&["mesh", "init", "--name", "two\nlines"]);
    assert!(
        err.contains("mesh name") && err.contains("line break"),
        "{err}"
    );
    let err = g.fails(&["mesh", "init", "--name", "ok", "--as", " "]);
    assert!(err.contains("blank"), "{err}");
    // Nothing was made: a valid init still finds no mesh there.
    assert_eq!(g.json(&["mesh", "init", "--name", "fine"])["epoch"], 0);

    let a = Daemon::start("alpha");
    let err = a.fails(&["mesh", "init", "--name", "red", "--as", "\u{1b}[31mred"]);
    assert!(err.contains("terminal escape"), "{err}");
    let err = a.fails(&["mesh", "init", "--name", ""]);
    assert!(err.contains("mesh name is empty"), "{err}");
    a.ok(&["mesh", "init", "--name", "hostile ☕"]);

    // Notes: too long (row 11: it used to leave an open invite nobody can
    // use), a bidi override, and through the socket NUL and bytes that are
    // not UTF-8. Nothing is kept.
    let long = "n".repeat(4000);
    let err = a.fails(&["mesh", "invite", "--note", &long]);
    assert!(err.contains("4000 characters long; at most 200"), "{err}");
    let err = a.fails(&["mesh", "invite", "--note", "abc\u{202e}exe.txt"]);
    assert!(err.contains("format character"), "{err}");
    let err = a.fails(&[
        "mesh",
        "invite",
        "--approved",
        "--approved-name",
        "zero\u{200b}width",
    ]);
    assert!(err.contains("display name"), "{err}");
    for target in [
        "/v1/mesh/invite?note=%00",
        "/v1/mesh/invite?note=%FF%FE",
        "/v1/mesh/invite?note=a%0Ab",
        "/v1/mesh/init?name=x&as=%1B%5B31m",
    ] {
        let (status, body) = raw(&a, "POST", target, "");
        assert_eq!(status, 400, "{target}: {body}");
    }
    no_invites(&a);

    // The joiner: a forged or empty display name, a cut invite, a huge
    // paste (it used to fail as "uri too long"), and a NUL through the
    // socket's join body. None leaves a pending join.
    let b = Daemon::start("bravo");
    let text = invite(&a);
    let err = b.fails(&["mesh", "join", &text, "--as", FORGED]);
    assert!(err.contains("line break"), "{err}");
    let err = b.fails(&["mesh", "join", &text, "--as", ""]);
    assert!(err.contains("display name is empty"), "{err}");
    let err = b.fails(&["mesh", "join", &text[..text.len() - 3]]);
    assert!(err.contains("cut short"), "{err}");
    let huge = format!("{text}{}", "a".repeat(100_000));
    let err = b.fails(&["mesh", "join", &huge]);
    assert!(
        err.contains("more than an invite can be") && !err.contains("uri too long"),
        "{err}"
    );
    let call = serde_json::json!({ "invite": text, "name": "nul\u{0}" }).to_string();
    let (status, body) = raw(&b, "POST", "/v1/mesh/join", &call);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("control character"), "{body}");
    assert!(
        b.fails(&["mesh", "status"]).contains("no mesh here yet"),
        "a refused join left state behind"
    );

    // A valid name of letters, marks and a symbol joins; alpha names it.
    let joined = b.json(&["mesh", "join", &text, "--as", "Zoë ☕"]);
    assert_eq!(joined["state"], "joined", "{joined}");
    eventually("alpha to list Zoë", || {
        a.ok(&["mesh", "status"]).contains("Zoë ☕")
    });
    let log = a.log();
    assert!(
        !log.lines().any(|l| l.starts_with("FAKE LOG LINE")),
        "a forged log line:\n{log}"
    );
}

/// `grove ARGS` on `d` with its stdout lines collected as they come.
fn spawn_lines(d: &Daemon, args: &[&str]) -> (Child, Arc<Mutex<Vec<String>>>) {
    let mut child =
        d.g.cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    let stdout = child.stdout.take().unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            sink.lock().unwrap().push(line);
        }
    });
    (child, lines)
}

/// Stops `d` and requires `watch` to exit non-zero within 30 s, saying
/// that the daemon stopped.
fn stops_with_its_daemon(d: &mut Daemon, mut watch: Child) {
    d.stop();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = watch.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the watch outlived its daemon");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    watch
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!status.success(), "the watch exited 0: {err}");
    assert!(err.contains("the daemon stopped"), "{err}");
}

#[test]
fn a_watch_says_the_daemon_stopped() {
    let mut a = Daemon::start("alpha");
    a.ok(&["mesh", "init", "--name", "watched"]);
    let (watch, lines) = spawn_lines(&a, &["mesh", "watch"]);
    // Once a rotate (committed at once by the only member) shows, the watch
    // is connected.
    let seen = || {
        lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("committed"))
    };
    let started = Instant::now();
    while !seen() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the watch saw no commit"
        );
        a.ok(&["mesh", "propose", "rotate"]);
        let asked = Instant::now();
        while !seen() && asked.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    stops_with_its_daemon(&mut a, watch);
}

/// A model that takes its time, so a moot is still running when its host stops.
fn slow_quoting_reply(req: &RecordedRequest) -> Reply {
    Reply::Delay(Duration::from_millis(400), Box::new(quoting_reply(req)))
}

#[test]
fn a_moot_watch_says_the_daemon_stopped() {
    let (_servers, _a, _b, mut c) = three_nodes(slow_quoting_reply, false);
    let id = start_sea_moot(&c, 40);
    let (watch, lines) = spawn_lines(&c, &["moot", "watch", &id]);
    eventually("the watch to print a turn", || {
        lines.lock().unwrap().iter().any(|l| l.contains("── turn"))
    });
    stops_with_its_daemon(&mut c, watch);
}
