//! `grove node run`: systemd notifications, the control socket carrying
//! `book` commands, graceful shutdown on SIGTERM, and start-up refusals.

use std::io::Read;
use std::os::unix::net::UnixDatagram;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Grove, generated_book};

/// A running `grove node run` with a NOTIFY_SOCKET the test listens on.
struct Node {
    child: Child,
    notify: UnixDatagram,
}

impl Node {
    fn start(g: &Grove) -> Node {
        Node::start_with(g, "/ip4/127.0.0.1/tcp/0", &[])
    }

    /// A node listening on `listen`, with extra environment variables.
    fn start_with(g: &Grove, listen: &str, env: &[(&str, &str)]) -> Node {
        let notify_path = g.dir.path().join("notify.sock");
        let _ = std::fs::remove_file(&notify_path);
        let notify = UnixDatagram::bind(&notify_path).unwrap();
        notify
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let child = g
            .cmd(&["node", "run", "--listen", listen])
            .env("NOTIFY_SOCKET", &notify_path)
            .env("RUST_LOG", "grove=debug,info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Node { child, notify }
    }

    /// The next notification datagram.
    fn next_notification(&self) -> String {
        let mut buf = [0u8; 512];
        let n = self
            .notify
            .recv(&mut buf)
            .expect("a notification within 60 s");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    fn signal(&self, sig: i32) {
        // SAFETY: sending a signal to our own child process.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }

    /// Waits for exit (at most `limit`) and returns (success, stderr).
    fn wait(mut self, limit: Duration) -> (bool, String, Duration) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                self.child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                return (status.success(), err, start.elapsed());
            }
            if start.elapsed() > limit {
                let _ = self.child.kill();
                panic!("the node did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn node_notifies_serves_books_and_stops_on_sigterm() {
    let g = Grove::new();
    let node = Node::start(&g);
    let ready = node.next_notification();
    assert!(ready.contains("READY=1"), "{ready}");
    assert!(g.state().join("grove.sock").exists());
    // The node listens where it was told, on the port it picked, with its own identity.
    let status = g.json(&["node", "status"]);
    let identity = g.json(&["identity", "show"]);
    assert_eq!(status["peer_id"], identity["peer_id"]);
    let addr = status["listen"][0].as_str().unwrap();
    assert!(
        addr.starts_with("/ip4/127.0.0.1/tcp/") && !addr.ends_with("/tcp/0"),
        "{addr}"
    );
    // `book` commands go through the daemon while it runs.
    let book = g.write(
        "b.txt",
        generated_book("Daemon Tale", "D", 11, 40, 2).as_bytes(),
    );
    let added = g.json(&["book", "add", book.to_str().unwrap()]);
    assert_eq!(added["status"], "added");
    let hits = g.json(&[
        "book",
        "search",
        "zephyrine",
        "--key",
        "books/daemon-tale",
        "-k",
        "3",
    ]);
    assert_eq!(hits["hits"].as_array().unwrap().len(), 3);
    let err = g.fails(&["book", "show", "books/nope"]);
    assert!(err.contains("no book with key `books/nope`"), "{err}");
    assert_eq!(g.json(&["book", "verify", "books/daemon-tale"])["ok"], true);
    let proof = g.json(&["book", "proof", "books/daemon-tale", "1"]);
    assert_eq!(proof["root"], added["root"]);
    // A founded mesh too: its worker has a database to close.
    g.ok(&["mesh", "init", "--name", "stopping"]);
    // SIGTERM: STOPPING=1, a clean exit well within 10 s, socket removed,
    // and every worker thread ended (queue done, database closed) within
    // the shutdown budget.
    node.signal(libc::SIGTERM);
    let stopping = node.next_notification();
    assert!(stopping.contains("STOPPING=1"), "{stopping}");
    let (ok, stderr, took) = node.wait(Duration::from_secs(10));
    assert!(ok, "{stderr}");
    assert!(took < Duration::from_secs(10));
    assert!(
        !stderr.contains("did not end cleanly"),
        "a worker outlived the shutdown budget:\n{stderr}"
    );
    assert!(
        stderr.contains("/v1/books/add"),
        "the add went through the daemon:\n{stderr}"
    );
    assert!(!g.state().join("grove.sock").exists());
    // Without the daemon the CLI works on the state directly.
    assert_eq!(
        g.json(&["book", "list"])["books"][0]["key"],
        "books/daemon-tale"
    );
    assert_eq!(g.json(&["audit", "verify"])["ok"], true);
}

#[test]
fn second_node_on_one_state_is_refused_and_sigint_stops() {
    let g = Grove::new();
    let node = Node::start(&g);
    assert!(node.next_notification().contains("READY=1"));
    let err = g.fails(&["node", "run", "--listen", "/ip4/127.0.0.1/tcp/0"]);
    assert!(err.contains("is in use by a running grove node"), "{err}");
    node.signal(libc::SIGINT);
    let (ok, stderr, _) = node.wait(Duration::from_secs(10));
    assert!(ok, "{stderr}");
    // A stale socket file (no listener) does not block the next start.
    std::os::unix::net::UnixListener::bind(g.state().join("grove.sock")).unwrap();
    let node = Node::start(&g);
    assert!(node.next_notification().contains("READY=1"));
    node.signal(libc::SIGTERM);
    assert!(node.wait(Duration::from_secs(10)).0);
}

#[test]
fn bad_config_is_refused_at_start_with_key_and_reason() {
    let g = Grove::new();
    let cfg = g.write("grove.toml", b"[node]\nname = \"\"\n");
    let err = g.fails(&["--config", cfg.to_str().unwrap(), "node", "run"]);
    assert!(err.contains("node.name"), "{err}");
    let cfg = g.write("grove2.toml", b"[control]\nsockett = \"/tmp/x\"\n");
    let err = g.fails(&["--config", cfg.to_str().unwrap(), "node", "run"]);
    assert!(err.contains("sockett"), "{err}");
    let out = g
        .cmd(&["node", "run"])
        .env("GROVE_LOG__LEVEL", "grove=notalevel")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("log.level"));
}

/// A worker that panics (the test-only fault switch `GROVETEST_PANIC`)
/// ends the process with an error naming it, within the watchdog interval,
/// and no watchdog ping follows the failure.
#[test]
fn a_worker_that_panics_ends_the_node_naming_it() {
    for worker in ["store", "mesh", "model"] {
        let g = Grove::new();
        let node = Node::start_with(
            &g,
            "/ip4/127.0.0.1/tcp/0",
            &[("GROVETEST_PANIC", worker), ("WATCHDOG_USEC", "4000000")],
        );
        assert!(node.next_notification().contains("READY=1"));
        // Pings come while the node is healthy (every second here).
        assert!(node.next_notification().contains("WATCHDOG=1"));
        let (ok, stderr, took) = node.wait(Duration::from_secs(30));
        assert!(
            !ok,
            "the node exits with an error when its {worker} worker panics"
        );
        assert!(
            stderr.contains(&format!("the {worker} worker stopped")),
            "{stderr}"
        );
        // The fault comes a second after start; the exit follows within
        // the watchdog interval (4 s), plus the shutdown budget.
        assert!(took < Duration::from_secs(15), "{took:?}");
    }
}

/// A second daemon on a port another one listens on exits with an error
/// naming the port, instead of sharing it (libp2p sets port reuse).
#[test]
fn a_second_daemon_on_a_used_port_is_refused() {
    let port = crate::support::free_port();
    let listen = format!("/ip4/127.0.0.1/tcp/{port}");
    let (a, b) = (Grove::new(), Grove::new());
    let first = Node::start_with(&a, &listen, &[]);
    assert!(first.next_notification().contains("READY=1"));
    let second = Node::start_with(&b, &listen, &[]);
    let (ok, stderr, _) = second.wait(Duration::from_secs(30));
    assert!(!ok, "the second daemon must not start");
    assert!(
        stderr.contains(&format!("TCP port {port}")) && stderr.contains("already in use"),
        "{stderr}"
    );
    // Refused before any state was made.
    assert!(!b.state().exists(), "the refused daemon left state behind");
    first.signal(libc::SIGTERM);
    let (ok, stderr, _) = first.wait(Duration::from_secs(10));
    assert!(ok, "{stderr}");
}

/// `grove backup` backs up the node its commands reach: with the running
/// daemon found through its socket (as root's commands find the packaged
/// service's), the daemon's state directory, not the caller's empty one.
#[test]
fn backup_takes_the_state_of_the_daemon_it_reaches() {
    let node = crate::cluster::Daemon::start("backed-up");
    node.add_book(3);
    let caller = Grove::new();
    let socket = node.g.state().join("grove.sock");
    let dest = caller.dir.path().join("bk");
    let done = caller.json(&[
        "--socket",
        socket.to_str().unwrap(),
        "backup",
        dest.to_str().unwrap(),
    ]);
    let files: Vec<&str> = done["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        files.iter().any(|f| f.starts_with("shards/"))
            && files.iter().any(|f| f.starts_with("identity/")),
        "{done}"
    );
    let copied = std::fs::read(dest.join("identity/ed25519.key")).unwrap();
    let original = std::fs::read(node.g.state().join("identity/ed25519.key")).unwrap();
    assert_eq!(copied, original, "the daemon's own key");
}

/// `log.format = "json"`: every line the daemon logs, from start to stop,
/// is one JSON object with its level and message.
#[test]
fn json_logs_parse_line_by_line() {
    let g = Grove::new();
    let node = Node::start_with(&g, "/ip4/127.0.0.1/tcp/0", &[("GROVE_LOG__FORMAT", "json")]);
    assert!(node.next_notification().contains("READY=1"));
    node.signal(libc::SIGTERM);
    let (ok, stderr, _) = node.wait(Duration::from_secs(10));
    assert!(ok, "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines.len() >= 3, "{stderr}");
    let mut messages = Vec::new();
    for line in lines {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}"));
        assert!(v["level"].is_string(), "{line}");
        assert!(v["timestamp"].is_string(), "{line}");
        messages.push(
            v["fields"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    assert!(
        messages.iter().any(|m| m == "grove node ready"),
        "{messages:?}"
    );
    assert!(messages.iter().any(|m| m == "stopped"), "{messages:?}");
    // A format it does not know is refused by its key.
    let err = g
        .cmd(&["config", "check"])
        .env("GROVE_LOG__FORMAT", "xml")
        .output()
        .unwrap();
    assert!(!err.status.success());
    assert!(String::from_utf8_lossy(&err.stderr).contains("log.format"));
}

/// A node that has been a member refuses to start on a lost `mesh.db`
/// (missing, or emptied), naming the file, the mesh and both ways out; after
/// `grove mesh leave --forget` it starts as a node of no mesh.
#[test]
fn a_lost_mesh_db_is_refused_and_can_be_forgotten() {
    let g = Grove::new();
    let init = g.json(&["mesh", "init", "--name", "kept"]);
    let mesh_id = init["mesh_id"].as_str().unwrap().to_string();
    let db = g.state().join("mesh.db");
    // Forgetting a mesh whose database is there is refused.
    let err = g.fails(&["mesh", "leave", "--forget"]);
    assert!(err.contains("grove mesh leave"), "{err}");
    for lose in ["emptied", "missing"] {
        if lose == "emptied" {
            std::fs::write(&db, b"").unwrap();
        } else {
            std::fs::remove_file(&db).unwrap();
        }
        let err = g.fails(&["node", "run", "--listen", "/ip4/127.0.0.1/tcp/0"]);
        for want in [
            "mesh.db is missing or empty",
            mesh_id.as_str(),
            "Restore it from a backup",
            "grove mesh leave --forget",
        ] {
            assert!(err.contains(want), "{lose}: no `{want}` in: {err}");
        }
        // Nothing was recreated in its place.
        assert!(
            std::fs::metadata(&db).map_or(true, |m| m.len() == 0),
            "{lose}"
        );
    }
    let forgot = g.ok(&["mesh", "leave", "--forget"]);
    assert!(forgot.contains(&mesh_id), "{forgot}");
    let node = Node::start(&g);
    assert!(node.next_notification().contains("READY=1"));
    let status = g.fails(&["mesh", "status"]);
    assert!(status.contains("no mesh here yet"), "{status}");
    node.signal(libc::SIGTERM);
    assert!(node.wait(Duration::from_secs(10)).0);
}

/// Damage found at start by `PRAGMA quick_check` stops the node, naming the
/// file and the way out: a shard with overwritten pages, and a truncated
/// `node.db`. Moved aside, the node starts again.
#[test]
fn damaged_databases_are_named_at_start() {
    let g = Grove::new();
    let text = generated_book("Damage", "Tester", 7, 400, 3);
    let book = g.write("damage.txt", text.as_bytes());
    g.ok(&["book", "add", book.to_str().unwrap()]);
    let node = Node::start(&g);
    assert!(node.next_notification().contains("READY=1"));
    node.signal(libc::SIGTERM);
    assert!(node.wait(Duration::from_secs(10)).0);

    // A shard with three pages overwritten.
    let shard = g.state().join("shards/main.db");
    let mut bytes = std::fs::read(&shard).unwrap();
    assert!(bytes.len() > 6 * 4096, "a shard of {} bytes", bytes.len());
    bytes[2 * 4096..5 * 4096].fill(0xA5);
    std::fs::write(&shard, &bytes).unwrap();
    let err = g.fails(&["node", "run", "--listen", "/ip4/127.0.0.1/tcp/0"]);
    for want in ["shards/main.db is damaged", "restore it from a backup"] {
        assert!(err.contains(want), "no `{want}` in: {err}");
    }
    std::fs::rename(&shard, g.state().join("main.db.damaged")).unwrap();

    // A truncated node.db.
    let node_db = g.state().join("node.db");
    let len = std::fs::metadata(&node_db).unwrap().len();
    assert!(len > 4096, "node.db of {len} bytes");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&node_db)
        .unwrap()
        .set_len(len / 2 + 100)
        .unwrap();
    let err = g.fails(&["node", "run", "--listen", "/ip4/127.0.0.1/tcp/0"]);
    for want in ["node.db is damaged", "move it aside"] {
        assert!(err.contains(want), "no `{want}` in: {err}");
    }
    std::fs::rename(&node_db, g.state().join("node.db.damaged")).unwrap();
    let node = Node::start(&g);
    assert!(node.next_notification().contains("READY=1"));
    node.signal(libc::SIGTERM);
    let (ok, stderr, _) = node.wait(Duration::from_secs(10));
    assert!(ok, "{stderr}");
    assert!(stderr.contains("databases checked"), "{stderr}");
}

/// A truncated moot file is named at start (log and `moot list`) and left
/// in place, not dropped.
#[test]
fn a_truncated_moot_file_is_named_and_kept() {
    let g = Grove::new();
    let moots = g.state().join("moots");
    std::fs::create_dir_all(&moots).unwrap();
    let file = moots.join("0123456789abcdef0123456789abcdef.json");
    std::fs::write(&file, br#"{"version":1,"view":{"id":"0123456789abcdef"#).unwrap();
    let node = Node::start(&g);
    assert!(node.next_notification().contains("READY=1"));
    let list = g.ok(&["moot", "list"]);
    assert!(list.contains("damaged"), "{list}");
    assert!(list.contains(file.to_str().unwrap()), "{list}");
    assert!(list.contains("EOF"), "{list}");
    let json = g.json(&["moot", "list"]);
    assert_eq!(json["damaged"].as_array().unwrap().len(), 1, "{json}");
    node.signal(libc::SIGTERM);
    let (ok, stderr, _) = node.wait(Duration::from_secs(10));
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("a hosted moot's file is damaged"),
        "{stderr}"
    );
    assert!(file.is_file(), "the damaged file is kept");
}

/// Every database of a state directory is opened by the one SQLite kit:
/// each carries its kind's `application_id` and a schema version (a
/// `node.db` from before it had one is adopted, its rows kept), and a
/// database of one kind in another's place is refused by name.
#[test]
fn each_database_carries_its_kind_and_version_and_a_swapped_one_is_refused() {
    let g = Grove::new();
    g.ok(&["mesh", "init", "--name", "kinds"]);
    let text = generated_book("Kinds", "Tester", 7, 60, 3);
    let book = g.write("kinds.txt", text.as_bytes());
    g.ok(&["book", "add", book.to_str().unwrap()]);
    let run = |g: &Grove| {
        let node = Node::start(g);
        assert!(node.next_notification().contains("READY=1"));
        node.signal(libc::SIGTERM);
        let (ok, stderr, _) = node.wait(Duration::from_secs(10));
        assert!(ok, "{stderr}");
    };
    run(&g);
    let marks = |path: &std::path::Path| {
        let c = rusqlite::Connection::open(path).unwrap();
        let app: i64 = c
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .unwrap();
        let version: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        (app, version)
    };
    let state = g.state();
    for (file, app) in [
        ("shards/main.db", 0x6772_6f76),
        ("mesh.db", 0x6772_6f6d),
        ("node.db", 0x6772_6f6e),
    ] {
        let (found, version) = marks(&state.join(file));
        assert_eq!(found, app, "{file}");
        assert!(version >= 1, "{file}: user_version {version}");
    }

    // A node.db as grove wrote it before the kit: its tables, unmarked.
    let node_db = state.join("node.db");
    {
        let c = rusqlite::Connection::open(&node_db).unwrap();
        c.execute_batch(
            "PRAGMA application_id = 0; PRAGMA user_version = 0;
             INSERT OR REPLACE INTO meta (key, value) VALUES ('kept', 7);",
        )
        .unwrap();
    }
    run(&g);
    assert_eq!(marks(&node_db), (0x6772_6f6e, 1));
    let kept: i64 = rusqlite::Connection::open(&node_db)
        .unwrap()
        .query_row("SELECT value FROM meta WHERE key = 'kept'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(kept, 7, "the adopted file's rows are kept");

    // The shard in node.db's place.
    std::fs::rename(&node_db, state.join("node.db.aside")).unwrap();
    std::fs::copy(state.join("shards/main.db"), &node_db).unwrap();
    let err = g.fails(&["node", "run", "--listen", "/ip4/127.0.0.1/tcp/0"]);
    assert!(err.contains("not a grove node database"), "{err}");
    assert!(err.contains("node.db"), "{err}");
}

/// Every folder of a node's state directory is 0700 and every file 0600,
/// after a mesh, two books, a hosted moot, an ask and a model install: the
/// state directory is made by `StateDir` and every
/// file by the kit. Two files are apart, by design: the control socket
/// (0660, so an operators' group may use it) and `mesh.lock` (0644: it
/// holds only a pid, which another user's `grove` reads to say who holds
/// it).
#[test]
fn every_folder_of_the_state_directory_is_0700_and_every_file_0600() {
    use std::os::unix::fs::PermissionsExt;
    let Some(model) = crate::model::embedded_model_file() else {
        crate::support::skip("no embedded model to install (set GROVE_TEST_STATE)");
        return;
    };
    let server = crate::scripted_openai::ScriptedServer::start_with(|_| {
        crate::scripted_openai::Reply::text("The sea and the field both hold their keepers.")
    });
    let url = server.url();
    let d = crate::cluster::Daemon::start_with(
        "alpha",
        &[
            ("GROVE_MODEL__BACKEND", "openai"),
            ("GROVE_MODEL__URL", url.as_str()),
        ],
    );
    for (i, key) in ["x/one", "x/two"].into_iter().enumerate() {
        let text = generated_book(key, "Tester", i as u64, 40, 3);
        let file = d.g.write(&format!("{i}.txt"), text.as_bytes());
        d.ok(&["book", "add", file.to_str().unwrap(), "--key", key]);
    }
    d.ok(&["mesh", "init", "--name", "private"]);
    let id = d.json(&[
        "moot",
        "start",
        "--a",
        "self:x/one",
        "--b",
        "self:x/two",
        "--turns",
        "2",
    ])["id"]
        .as_str()
        .unwrap()
        .to_string();
    crate::moot_net::wait_state(&d, &id, "finished");
    d.json(&["ask", "-k", "1", "What do the keepers hold?"]);
    d.ok(&["model", "install", "--gguf", model.to_str().unwrap()]);
    let state = d.g.state();
    let mut seen = Vec::new();
    let mut wrong = Vec::new();
    let mut stack = vec![state.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o777;
            let name = path.strip_prefix(&state).unwrap().display().to_string();
            let want = if meta.is_dir() {
                stack.push(path.clone());
                0o700
            } else if name == "grove.sock" {
                0o660
            } else if name == "mesh.lock" {
                0o644
            } else {
                0o600
            };
            if mode != want {
                wrong.push(format!("{name}: {mode:o}, not {want:o}"));
            }
            seen.push(name);
        }
    }
    let root_mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
    assert_eq!(root_mode, 0o700, "the state directory itself");
    for must in [
        "identity",
        "shards/main.db",
        "mesh.db",
        "node.db",
        "ask.db",
        "models",
    ] {
        assert!(seen.iter().any(|s| s == must), "no {must} in {seen:?}");
    }
    assert!(seen.iter().any(|s| s.starts_with("moots/")), "{seen:?}");
    assert!(
        seen.iter()
            .any(|s| s.starts_with("models/") && s.ends_with(".gguf")),
        "{seen:?}"
    );
    assert!(wrong.is_empty(), "modes:\n{}", wrong.join("\n"));
}
