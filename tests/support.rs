//! Shared test helpers: the shared spec directory, the real binary, temp state.

#![allow(dead_code)]

pub mod gguf;
pub mod netlab;

/// A NAT laboratory, or `None` after [`skip`] (a failure under
/// GROVE_TEST_STRICT=1) where namespaces cannot be made here.
pub fn lab() -> Option<netlab::Lab> {
    match netlab::Lab::build() {
        Ok(lab) => Some(lab),
        Err(why) => {
            skip(&why);
            None
        }
    }
}

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use grove::merkle::{self, Hash, ProofStep};
use serde_json::Value;

/// The spec vectors and corpus the tests read: the repository's own copy in
/// `tests/data` (see its README), or `$GROVE_SHARED_DIR` when set.
/// A port free on 127.0.0.1 now (for a listener that needs a fixed
/// address, or a connection refused there).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn data_dir() -> PathBuf {
    std::env::var_os("GROVE_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data"))
}

/// A file under [`data_dir`]; a missing one fails the test (a clone carries
/// every file the tests read, so nothing passes without its data).
pub fn data_file(rel: &str) -> PathBuf {
    let path = data_dir().join(rel);
    assert!(
        path.is_file(),
        "test data {} is missing (tests/data in the repository, or GROVE_SHARED_DIR)",
        path.display()
    );
    path
}

/// The real binary with none of the test process's GROVE_* variables (the
/// binary refuses unknown config keys) and no systemd state directory.
pub fn grove_cmd() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_grove"));
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GROVE_") {
            cmd.env_remove(k);
        }
    }
    cmd.env_remove("STATE_DIRECTORY");
    cmd
}

/// A temporary state directory and a way to run `grove` against it.
pub struct Grove {
    pub dir: tempfile::TempDir,
}

impl Grove {
    pub fn new() -> Grove {
        Grove {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// A command for the real binary with this state dir and a clean env.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = grove_cmd();
        cmd.arg("--state").arg(self.state()).args(args);
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run grove")
    }

    /// Runs and requires success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "grove {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Runs with `--json` appended and parses stdout.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.push("--json");
        let out = self.ok(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("bad JSON from {args:?}: {e}\n{out}"))
    }

    /// Runs and requires failure; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            !out.status.success(),
            "grove {args:?} unexpectedly succeeded"
        );
        String::from_utf8(out.stderr).expect("utf-8 stderr")
    }

    pub fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, bytes).expect("write input");
        p
    }
}

/// Runs `cmd` and requires success, naming its stderr; returns its output.
pub fn succeeded(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run grove");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A deterministic Gutenberg-style book: header, markers, `paragraphs`
/// paragraphs of pseudo-random words (seeded), and a licence after the end.
pub fn generated_book(
    title: &str,
    author: &str,
    ebook: u64,
    paragraphs: usize,
    seed: u64,
) -> String {
    const WORDS: &[&str] = &[
        "the",
        "sea",
        "ship",
        "whale",
        "captain",
        "harpoon",
        "wind",
        "deck",
        "sailor",
        "night",
        "storm",
        "island",
        "river",
        "angler",
        "trout",
        "meadow",
        "morning",
        "letter",
        "sister",
        "fortune",
        "marriage",
        "estate",
        "ball",
        "dance",
        "pride",
        "devil",
        "definition",
        "noun",
        "verb",
        "a",
        "of",
        "and",
        "to",
        "in",
        "was",
        "his",
        "her",
        "with",
        "upon",
        "silent",
    ];
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    let mut out = format!(
        "The Project Gutenberg eBook of {title}\n\nTitle: {title}\n\nAuthor: {author}\n\nRelease date: 2001 [eBook #{ebook}]\n\nLanguage: English\n\n*** START OF THE PROJECT GUTENBERG EBOOK {} ***\n\n",
        title.to_uppercase()
    );
    for p in 0..paragraphs {
        let n = 20 + next() % 120;
        let mut words: Vec<&str> = (0..n).map(|_| WORDS[next() % WORDS.len()]).collect();
        if p % 7 == 3 {
            words.push("zephyrine");
        }
        // Wrap lines at about ten words, as Gutenberg texts do.
        for line in words.chunks(10) {
            out.push_str(&line.join(" "));
            out.push('\n');
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "*** END OF THE PROJECT GUTENBERG EBOOK {} ***\n\nLicence text.\n",
        title.to_uppercase()
    ));
    out
}

/// Runs a shell script in a private mount namespace (for read-only or full
/// file systems); `None` when namespaces are not available here.
pub fn in_mount_namespace(script: &str) -> Option<Output> {
    let permitted = Command::new("unshare")
        .args(["-m", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !permitted {
        skip("unshare -m is not available or not permitted here");
        return None;
    }
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "sh", "-c", script]);
    // The binary refuses unknown GROVE_* keys; the tests' own settings stay out.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GROVE_") {
            cmd.env_remove(k);
        }
    }
    Some(
        cmd.env("TEST_GROVE_BIN", env!("CARGO_BIN_EXE_grove"))
            .output()
            .expect("run unshare"),
    )
}

/// A 32-byte hash from its lowercase-hex JSON string.
pub fn hash_hex(v: &Value) -> Hash {
    hex::decode(v.as_str().expect("hex string"))
        .expect("hex")
        .try_into()
        .expect("32 bytes")
}

/// `[{sibling, is_left}]` as proof steps.
pub fn proof_steps(v: &Value) -> Vec<ProofStep> {
    v.as_array()
        .expect("proof array")
        .iter()
        .map(|s| ProofStep {
            sibling: hash_hex(&s["sibling"]),
            is_left: s["is_left"].as_bool().unwrap(),
        })
        .collect()
}

/// A `book proof --json` answer: its leaf is its text's hash and its proof
/// leads to its root for its index and count.
pub fn verify_served_proof(p: &Value) {
    let leaf = merkle::leaf_hash(p["text"].as_str().unwrap().as_bytes());
    assert_eq!(leaf, hash_hex(&p["leaf"]));
    merkle::verify(
        &leaf,
        p["index"].as_u64().unwrap(),
        p["count"].as_u64().unwrap(),
        &proof_steps(&p["proof"]),
        &hash_hex(&p["root"]),
    )
    .unwrap_or_else(|e| panic!("served proof of chunk {} refused: {e}", p["index"]));
}

/// A test that cannot run here says so: `SKIP: reason` locally, and a
/// failure when `GROVE_TEST_STRICT=1` (CI), so CI cannot pass by skipping.
pub fn skip(reason: &str) {
    if std::env::var("GROVE_TEST_STRICT").is_ok_and(|v| v == "1") {
        panic!("strict mode: this test needs what is missing here: {reason}");
    }
    eprintln!("SKIP: {reason}");
}

/// An in-process node standing in for a stopped daemon: the daemon's own
/// key (same peer id) on its old address, connected to `host`, answering
/// every request with `answer(protocol, body)`. Stops when dropped.
pub struct StandIn {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StandIn {
    pub fn start(
        state: &Path,
        listen: libp2p::Multiaddr,
        host: libp2p::PeerId,
        host_addr: libp2p::Multiaddr,
        answer: impl FnMut(grove::net::Protocol, &[u8]) -> Vec<u8> + Send + 'static,
    ) -> StandIn {
        let state = state.to_path_buf();
        let mut answer = answer;
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let identity = grove::identity::load_or_create(
                    &grove::state_dir::StateDir::new(&state).identity(),
                )
                .unwrap();
                let keypair = libp2p::identity::Keypair::ed25519_from_bytes(
                    identity.signing_key().to_bytes(),
                )
                .unwrap();
                let config = grove::config::Settings::default().net.checked().unwrap();
                let config = grove::net::NetConfig {
                    listen: vec![listen],
                    ..config
                };
                let (net, mut events) = grove::net::Network::start(keypair, config).await.unwrap();
                net.connect(host, &[host_addr], std::time::Duration::from_secs(10))
                    .await
                    .unwrap();
                ready_tx.send(()).unwrap();
                loop {
                    tokio::select! {
                        _ = &mut stopped => break,
                        event = events.recv() => match event {
                            Some(grove::net::Event::Request { id, protocol, data, .. }) => {
                                let bytes = answer(protocol, &data);
                                let _ = net.respond(id, bytes).await;
                            }
                            Some(_) => {}
                            None => break,
                        },
                    }
                }
            });
        });
        ready_rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the stand-in connected to the host");
        StandIn {
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Stops it; an error is a panic on its thread (a failed answer).
    pub fn stop(&mut self) -> std::thread::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take() {
            Some(thread) => thread.join(),
            None => Ok(()),
        }
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
