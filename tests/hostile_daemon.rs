//! Issue 27, second sweep, against real daemons: a control socket that
//! half-sent requests cannot hold, hooks that flood their pipes or leave a
//! child behind, a lone node hosting a moot between its own books, a
//! `book add` whose daemon dies under it, and a server that answers with
//! compressed content.

use std::io::{BufRead, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster::{Daemon, eventually};
use crate::moot_net::{quoting_reply, verify_offline};
use crate::scripted_openai::ScriptedServer;
use crate::support::{Grove, generated_book};

/// How a connection the test opened ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// The daemon answered (the status line) and closed.
    Answered(String),
    /// Closed without an answer.
    Closed,
    /// Still open when the test stopped waiting.
    Open,
}

/// Reads `stream` until the daemon closes it or `within` passes.
fn ending(stream: &mut UnixStream, within: Duration) -> Ended {
    let until = Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = |got: &[u8]| {
        if got.is_empty() {
            Ended::Closed
        } else {
            let text = String::from_utf8_lossy(got);
            Ended::Answered(text.lines().next().unwrap_or("").to_string())
        }
    };
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ended::Open;
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buf) {
            Ok(0) => return closed(&got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Ended::Open;
            }
            // Reset by the daemon: closed too.
            Err(_) => return closed(&got),
        }
    }
}

#[test]
fn half_sent_requests_neither_hold_the_control_socket_nor_starve_node_status() {
    let d = Daemon::start("held");
    let socket = d.g.state().join("grove.sock");
    let opened = Instant::now();
    // One answered request left idle on its keep-alive connection.
    let mut idle = UnixStream::connect(&socket).unwrap();
    idle.write_all(b"GET /v1/node HTTP/1.1\r\nHost: grove\r\n\r\n")
        .unwrap();
    // A body that stops a tenth of the way in.
    let mut stalled = UnixStream::connect(&socket).unwrap();
    stalled
        .write_all(b"POST /v1/books/add?source=x HTTP/1.1\r\nHost: grove\r\nContent-Length: 1000\r\n\r\n0123456789")
        .unwrap();
    // 300 connections from this one process, each with half a request
    // head (a refused one may be closed before its write).
    let mut half: Vec<UnixStream> = (0..300)
        .map(|_| {
            let mut s = UnixStream::connect(&socket).unwrap();
            let _ = s.write_all(b"GET /v1/node HTTP/1.1\r\nHo");
            s
        })
        .collect();

    // Another process is served at once.
    let asked = Instant::now();
    d.ok(&["node", "status"]);
    let status_took = asked.elapsed();
    assert!(
        status_took < Duration::from_secs(5),
        "node status took {status_took:?} beside 300 half-sent requests"
    );

    // Past this process's share, connections are refused with a 503 that
    // says why, at once.
    let refused: Vec<Ended> = half
        .iter_mut()
        .skip(40)
        .map(|s| ending(s, Duration::from_secs(3)))
        .collect();
    let said_why = refused
        .iter()
        .filter(|e| matches!(e, Ended::Answered(l) if l.contains("503")))
        .count();
    assert!(
        refused.iter().all(|e| *e != Ended::Open),
        "refused connections left open: {:?}",
        refused.iter().filter(|e| **e == Ended::Open).count()
    );
    assert!(said_why > 200, "{said_why} of 260 refusals answered 503");

    // The admitted ones are closed after the head deadline (5 s), the idle
    // keep-alive one too, and the stalled body is answered (10 s).
    for s in half.iter_mut().take(40) {
        let e = ending(s, Duration::from_secs(20));
        assert_ne!(e, Ended::Open, "a half-sent request held its connection");
    }
    match ending(&mut idle, Duration::from_secs(20)) {
        Ended::Answered(line) => assert!(line.contains("200"), "{line}"),
        other => panic!("the idle connection: {other:?}"),
    }
    let e = ending(&mut stalled, Duration::from_secs(30));
    assert!(
        matches!(&e, Ended::Answered(l) if l.contains("400")) || e == Ended::Closed,
        "the stalled body: {e:?}"
    );
    let all_closed = opened.elapsed();
    assert!(all_closed < Duration::from_secs(40), "{all_closed:?}");
    // The daemon serves on, and nothing panicked.
    d.ok(&["node", "status"]);
    assert!(!d.log().contains("panicked"), "{}", d.log());
}

/// A hook script that floods both pipes with 200 KB, leaves `sleep 1000`
/// running in the background (its pid appended to `pids`) and exits 7.
fn flooding_hook(dir: &std::path::Path, pids: &std::path::Path) -> std::path::PathBuf {
    let hook = dir.join("hook.sh");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\nhead -c 200000 /dev/zero | tr '\\0' o\nhead -c 200000 /dev/zero | tr '\\0' e >&2\nsleep 1000 &\necho $! >> {}\nexit 7\n",
            pids.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    hook
}

/// Whether process `pid` is gone (a zombie not yet reaped counts as gone).
fn gone(pid: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty()
        || stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
}

fn pids(file: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_hook_that_floods_its_pipes_or_leaves_a_child_is_logged_as_it_ended_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let hook = flooding_hook(dir.path(), &pid_file);
    let mut d = Daemon::start_with(
        "hooked",
        &[
            ("GROVE_HOOKS__PROGRAM", hook.to_str().unwrap()),
            ("GROVE_HOOKS__TIMEOUT_SECS", "3"),
            ("GROVE_HOOKS__MAX_RUNNING", "1"),
        ],
    );
    d.ok(&["mesh", "init", "--name", "hooks"]);
    d.ok(&["mesh", "propose", "rotate"]);
    // It exits 7 at once (the flood does not block it); what it left
    // running is killed at the time limit, and the slot is free again.
    eventually("the hook's run to be logged", || {
        d.log().contains("were killed at hooks.timeout_secs")
    });
    let log = d.log();
    assert!(log.contains("hook failed: exited with code 7"), "{log}");
    assert!(!log.contains("ran past hooks.timeout_secs"), "{log}");
    assert!(log.contains("out_bytes=200000"), "{log}");
    let first = pids(&pid_file);
    assert!(!first.is_empty());
    eventually("the hook's background sleep to be killed", || {
        first.iter().all(|p| gone(p))
    });
    let runs = |log: &str| log.matches("hook failed: exited with code 7").count();
    let before = runs(&log);
    d.ok(&["mesh", "propose", "rotate"]);
    eventually("a second run in the freed slot", || runs(&d.log()) > before);

    // At shutdown, a run's leftovers are killed with it and logged so.
    // (Counted before the proposal: the run may start its child before
    // `propose` returns.)
    let seen = pids(&pid_file).len();
    d.ok(&["mesh", "propose", "rotate"]);
    eventually("the third run to start its child", || {
        pids(&pid_file).len() > seen
    });
    d.stop();
    let log = d.log();
    assert!(log.contains("were killed at shutdown"), "{log}");
    for pid in pids(&pid_file) {
        assert!(gone(&pid), "hook child {pid} survived the daemon");
    }
}

/// A node with its model on `server`.
fn with_model(name: &str, server: &ScriptedServer) -> Daemon {
    let url = server.url();
    Daemon::start_with(
        name,
        &[
            ("GROVE_MODEL__BACKEND", "openai"),
            ("GROVE_MODEL__URL", url.as_str()),
        ],
    )
}

#[test]
fn a_lone_node_hosts_a_moot_between_its_own_books_in_both_cli_forms() {
    let server = ScriptedServer::start_with(quoting_reply);
    let d = with_model("lone", &server);
    d.ok(&["mesh", "init", "--name", "alone"]);
    for (key, title, seed) in [
        ("fiction/sea-tales", "Sea Tales", 5),
        ("essays/field-notes", "Field Notes", 6),
    ] {
        let text = generated_book(title, "Anon", seed, 60, seed);
        let path = d.g.write(&format!("{seed}.txt"), text.as_bytes());
        d.ok(&["book", "add", path.to_str().unwrap(), "--key", key]);
    }
    let forms: [&[&str]; 2] = [
        &[
            "--tree",
            "self:fiction/sea-tales",
            "--tree",
            "self:essays/field-notes",
        ],
        &[
            "--a",
            "self:essays/field-notes",
            "--b",
            "self:fiction/sea-tales",
        ],
    ];
    for form in forms {
        let mut args = vec!["moot", "start", "--turns", "2"];
        args.extend_from_slice(form);
        // Right after the adds: no "has not announced" and no retry.
        let started = d.json(&args);
        let id = started["id"].as_str().unwrap().to_string();
        let mut shown = Value::Null;
        eventually("the lone node's moot to end", || {
            shown = d.json(&["moot", "show", &id]);
            shown["state"] != "running"
        });
        assert_eq!(shown["state"], "finished", "{shown}");
        assert_eq!(shown["turns_done"], 2, "{shown}");
        let export: Value = serde_json::from_str(&d.ok(&["moot", "export", &id])).unwrap();
        let (ok, out) = verify_offline(&export);
        assert!(ok, "{out}");
    }
}

/// Starts `book add` of a generated book of `paragraphs` through `d`, kills
/// the daemon (SIGKILL) once the add reached it, and returns the CLI's
/// output.
fn add_killed_midway(d: &mut Daemon, key: &str, paragraphs: usize) -> std::process::Output {
    let text = generated_book("Killed Midway", "Anon", 9, paragraphs, 9);
    let path = d.g.write("big.txt", text.as_bytes());
    let child =
        d.g.cmd(&["book", "add", path.to_str().unwrap(), "--key", key])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
    let marks = |log: &str| log.matches("path=/v1/books/add").count();
    let before = marks(&d.log());
    eventually("the add to reach the daemon", || marks(&d.log()) > before);
    d.kill();
    child.wait_with_output().unwrap()
}

#[test]
fn a_book_add_whose_daemon_dies_under_it_says_what_happened_and_the_book_is_stored() {
    let mut d = Daemon::start("killed");
    let mut lost = false;
    for (attempt, paragraphs) in [4000, 12000, 30000].into_iter().enumerate() {
        let key = format!("fiction/killed-{attempt}");
        let out = add_killed_midway(&mut d, &key, paragraphs);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(
            out.status.success(),
            "the add failed ({}): {stderr}",
            out.status
        );
        // With no daemon the CLI reads the shard itself: the book is there.
        let listed = d.g.json(&["book", "list"]);
        assert!(listed.to_string().contains(&key), "{listed}\n{stderr}");
        if stderr.contains("connection to the daemon ended") {
            assert!(
                stderr.contains("by grove itself, as no daemon runs now"),
                "{stderr}"
            );
            lost = true;
            break;
        }
        // The add finished before the kill: try again with a longer book.
        d.restart();
    }
    assert!(lost, "no kill landed in the middle of an add");
}

#[test]
fn a_daemon_gone_between_the_check_and_the_request_leaves_the_add_to_the_cli() {
    // A socket that accepts the CLI's check and then stops listening: the
    // request itself is refused, as when the daemon dies in between.
    let g = Grove::new();
    std::fs::create_dir_all(g.state()).unwrap();
    let socket = g.state().join("grove.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let text = generated_book("Refused Midway", "Anon", 3, 20, 3);
    let path = g.write("b.txt", text.as_bytes());
    let child = g
        .cmd(&[
            "book",
            "add",
            path.to_str().unwrap(),
            "--key",
            "fiction/refused",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (check, _) = listener.accept().unwrap();
    drop(listener);
    drop(check);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("Connection refused"), "{stderr}");
    assert!(g.ok(&["book", "list"]).contains("fiction/refused"));
}

/// A one-shot HTTP server on 127.0.0.1 that answers with gzip-encoded
/// content; returns its URL and the request it got.
fn gzip_server() -> (String, std::thread::JoinHandle<String>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/book.txt", listener.local_addr().unwrap());
    let served = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        // The first bytes of a gzip member: magic, deflate, no flags.
        let body = [
            0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0, 0x03, 0x4b, 0x4c, 0x4a, 0x06, 0,
        ];
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(answer.as_bytes()).unwrap();
        stream.write_all(&body).unwrap();
        head
    });
    (url, served)
}

#[test]
fn content_the_server_compressed_is_refused_by_name_and_nothing_is_stored() {
    let g = Grove::new();
    let (url, served) = gzip_server();
    let err = g.fails(&["book", "add", &url]);
    assert!(
        err.contains("gzip-encoded") && err.contains("does not decode"),
        "{err}"
    );
    assert!(!err.contains("NUL"), "{err}");
    let head = served.join().unwrap().to_ascii_lowercase();
    assert!(head.contains("accept-encoding: identity"), "{head}");
    let listed = g.json(&["book", "list"]);
    assert_eq!(listed["books"], serde_json::json!([]), "{listed}");
}
