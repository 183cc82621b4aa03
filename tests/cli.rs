//! The command line as an operator reads it: times as local dates and
//! relative, members by name, prefixes, bounded flags (issue 19).

use crate::cluster::{Daemon, eventually};
use crate::support::{Grove, data_file, generated_book};

/// A run of 13 digits: a Unix time in milliseconds printed for people.
/// Whether `text` shows a raw Unix time in milliseconds: a word of 13 or
/// more digits and nothing else (a hex id or peer id may hold such a run).
fn has_unix_ms(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|word| word.len() >= 13 && word.chars().all(|c| c.is_ascii_digit()))
}

fn host_name() -> String {
    let out = std::process::Command::new("hostname").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn mesh_output_names_members_and_shows_times_for_people() {
    let mut a = Daemon::start("alpha");
    // No node.name: the joiner's display name is the host name.
    let mut b = Daemon::start("");
    a.ok(&["mesh", "init", "--name", "readable"]);

    // --ttl is bounded like mesh.invite_ttl_secs.
    let too_long = a.fails(&["mesh", "invite", "--ttl", "99999d"]);
    assert!(too_long.contains("at most 365 days"), "{too_long}");
    assert!(
        a.fails(&["mesh", "invite", "--ttl", "0"])
            .contains("above 0")
    );

    // The invite's expiry is a local date and how far off it is.
    let out =
        a.g.run(&["mesh", "invite", "--ttl", "24h", "--note", "for bob"]);
    assert!(out.status.success());
    let note = String::from_utf8(out.stderr).unwrap();
    assert!(
        note.contains("(in 23 h)") || note.contains("(in 24 h)"),
        "{note}"
    );
    assert!(!has_unix_ms(&note) && !note.contains("Unix ms"), "{note}");
    let first = String::from_utf8(out.stdout).unwrap().trim().to_string();

    // The old spelling of the display name flag is refused with a pointer.
    let old = b.fails(&["mesh", "join", "--name", "bob", &first]);
    assert!(old.contains("--as bob"), "{old}");
    let joined = b.ok(&["mesh", "join", &first]);
    assert!(joined.contains("joined mesh"), "{joined}");
    let host = host_name();
    eventually("the joiner in the roster", || {
        a.status()["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == host.as_str())
    });

    // Invites: listed with readable expiries, revoked by a unique prefix.
    let second = a.json(&["mesh", "invite", "--note", "spare"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let list = a.ok(&["mesh", "invite", "list"]);
    assert!(list.contains("expires 20") && !has_unix_ms(&list), "{list}");
    let revoked = a.ok(&["mesh", "invite", "revoke", &second[..8]]);
    assert_eq!(revoked.trim(), format!("revoked invite {second}"));
    let unknown = a.fails(&["mesh", "invite", "revoke", "zz"]);
    assert!(unknown.contains("no invite `zz`"), "{unknown}");

    // Proposals name the proposer and the voters beside a short peer id;
    // a vote echoes its choice.
    let proposed = a.json(&["mesh", "propose", "rotate"]);
    let id = proposed["id"].as_str().unwrap().to_string();
    eventually("the proposal to reach the joiner", || {
        b.g.run(&["mesh", "proposals"]).status.success()
            && b.ok(&["mesh", "proposals"]).contains(&id)
    });
    let proposals = b.ok(&["mesh", "proposals"]);
    assert!(proposals.contains("by alpha (12D3KooW"), "{proposals}");
    assert!(
        proposals.contains("yes from alpha (12D3KooW"),
        "{proposals}"
    );
    assert!(!has_unix_ms(&proposals), "{proposals}");
    let voted = b.ok(&["mesh", "vote", &id[..10], "yes"]);
    assert!(voted.starts_with(&format!("voted yes on {id}")), "{voted}");

    // A member not reached since the node (re)started is being dialed:
    // "connecting", not "offline, never seen".
    b.stop();
    a.restart();
    let status = a.ok(&["mesh", "status"]);
    let line = status
        .lines()
        .find(|l| l.contains(host.as_str()))
        .unwrap_or_else(|| panic!("{status}"));
    assert!(line.contains("connecting"), "{status}");
    assert!(!status.contains("never seen"), "{status}");
}

/// Seeded bytes over 1..=255: random input with its NUL bytes removed.
fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let b = (state >> 56) as u8;
        if b != 0 {
            out.push(b);
        }
    }
    out
}

fn shard_bytes(g: &Grove) -> u64 {
    std::fs::metadata(g.state().join("shards/main.db"))
        .unwrap()
        .len()
}

fn judged(bytes: &[u8]) -> Result<(), grove::book::PrepareError> {
    grove::book::BookText::decode(bytes, 1 << 30)?.judge()
}

#[test]
fn book_input_is_judged_before_it_is_stored() {
    let g = Grove::new();
    // Every spec vector is still text, through the real binary.
    {
        use base64::Engine;
        let path = data_file("spec/vectors.json");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for b in v["books"].as_array().unwrap() {
            let name = b["name"].as_str().unwrap();
            let input = base64::engine::general_purpose::STANDARD
                .decode(b["input_base64"].as_str().unwrap())
                .unwrap();
            let file = g.write(name, &input);
            let key = format!("vectors/{name}");
            g.ok(&["book", "add", file.to_str().unwrap(), "--key", &key]);
        }
    }
    // The real books and the texts the tests generate.
    for book in [
        "corpus/moby-dick-2701-excerpt.txt",
        "corpus/pride-and-prejudice-1342-excerpt.txt",
        "corpus/complete-angler-9198-excerpt.txt",
        "corpus/devils-dictionary-972-excerpt.txt",
    ] {
        let path = data_file(book);
        judged(&std::fs::read(path).unwrap()).unwrap_or_else(|e| panic!("{book}: {e}"));
    }
    for seed in 0..20 {
        let text = generated_book(
            "Generated",
            "Tester",
            100 + seed,
            5 + seed as usize * 7,
            seed,
        );
        judged(text.as_bytes()).unwrap();
    }

    // 5 MB of random bytes without NULs: refused, naming the test; nothing stored.
    let before = g.json(&["book", "list"]);
    let random = g.write("random.bin", &random_bytes(5_000_000, 19));
    let refused = g.fails(&["book", "add", random.to_str().unwrap(), "--key", "x/random"]);
    assert!(
        refused.contains("`control characters` test failed"),
        "{refused}"
    );
    assert!(refused.contains("--force"), "{refused}");
    assert_eq!(g.json(&["book", "list"]), before);

    // UTF-16 is named as such, with how to convert it.
    let utf16: Vec<u8> = generated_book("Wide", "Tester", 7, 3, 7)
        .encode_utf16()
        .flat_map(|u| u.to_le_bytes())
        .collect();
    let wide = g.write("wide.txt", &utf16);
    let refused = g.fails(&["book", "add", wide.to_str().unwrap()]);
    assert!(
        refused.contains("UTF-16 (little-endian)") && refused.contains("iconv"),
        "{refused}"
    );
}

/// The demo's fallback books, fetched by the script the demo uses, or the
/// reason they could not be.
fn debian_fallback_books(dir: &std::path::Path) -> Result<(), String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/fallback-books.sh");
    let out = std::process::Command::new(script)
        .arg(dir)
        .output()
        .map_err(|e| format!("{script}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "examples/fallback-books.sh: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

#[test]
fn real_books_with_art_are_stored_and_binary_is_still_refused() {
    let g = Grove::new();
    let books = g.state().join("fallback-books");
    if let Err(why) = debian_fallback_books(&books) {
        crate::support::skip(&why);
        return;
    }
    // The Jargon File holds a stretch of ASCII art at 74 % symbols; both
    // books are stored without --force.
    for (file, key) in [
        ("jargon-file.txt", "reference/jargon-file"),
        ("devils-dictionary.txt", "reference/devils-dictionary"),
    ] {
        let path = books.join(file);
        let added = g.json(&["book", "add", path.to_str().unwrap(), "--key", key]);
        assert_eq!(added["status"], "added", "{file}: {added}");
    }
    let before = g.json(&["book", "list"]);
    // A text with a binary blob appended, and a PNG: refused, nothing stored.
    let mut blob = std::fs::read(books.join("devils-dictionary.txt")).unwrap();
    blob.extend(random_bytes(50_000, 23));
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\x02\0\0\0\x02\0\x08\x06\0\0\0".to_vec();
    png.extend(random_bytes(80_000, 29));
    png.extend(b"\0\0\0\0IEND\xaeB`\x82");
    for (name, bytes, why) in [
        ("appended.txt", blob, "`control characters` test failed"),
        ("picture.png", png, "holds NUL bytes"),
    ] {
        let file = g.write(name, &bytes);
        let refused = g.fails(&["book", "add", file.to_str().unwrap(), "--key", "x/bad"]);
        assert!(refused.contains(why), "{name}: {refused}");
    }
    // A dump of symbols with a little prose: the whole text fails.
    let dump = "+--+ |##| <==> [::] ~~~~ ".repeat(4000) + &"a few words. ".repeat(200);
    let file = g.write("dump.txt", dump.as_bytes());
    let refused = g.fails(&["book", "add", file.to_str().unwrap(), "--key", "x/dump"]);
    assert!(
        refused.contains("`letters and digits` test failed on the whole text"),
        "{refused}"
    );
    assert_eq!(g.json(&["book", "list"]), before);
}

#[test]
fn forced_random_input_is_stored_and_its_removal_reclaims_space() {
    let g = Grove::new();
    g.ok(&[
        "book",
        "add",
        &g.write(
            "seed.txt",
            generated_book("Seed", "Tester", 1, 10, 1).as_bytes(),
        )
        .display()
        .to_string(),
    ]);
    let random = g.write("random.bin", &random_bytes(400_000, 5));
    let random = random.to_str().unwrap();
    let added = g.json(&["book", "add", random, "--key", "x/random", "--force"]);
    assert_eq!(added["status"], "added", "{added}");
    let full = shard_bytes(&g);
    g.ok(&["book", "remove", "x/random"]);
    let removed = shard_bytes(&g);
    eprintln!(
        "shard after adding 400 kB of random bytes: {full} B; after removing it: {removed} B"
    );
    assert!(
        removed * 10 < full * 7,
        "removal freed too little: {full} -> {removed}"
    );

    // A shard made before removals reclaimed space (no auto-vacuum) keeps
    // its free pages until `shard compact`.
    g.ok(&["book", "add", random, "--key", "x/again", "--force"]);
    let db = rusqlite::Connection::open(g.state().join("shards/main.db")).unwrap();
    db.execute_batch("PRAGMA auto_vacuum = NONE; VACUUM;")
        .unwrap();
    drop(db);
    g.ok(&["book", "remove", "x/again"]);
    let old_style = shard_bytes(&g);
    let compacted = g.json(&["shard", "compact"]);
    let after = shard_bytes(&g);
    eprintln!("old-style shard after the removal: {old_style} B; after `shard compact`: {after} B");
    assert_eq!(
        compacted["shards"][0]["bytes_after"].as_u64(),
        Some(after),
        "{compacted}"
    );
    assert!(
        after * 10 < old_style * 7,
        "compact freed too little: {old_style} -> {after}"
    );
    // Nothing was lost: the shard still verifies and the history is kept.
    g.ok(&["book", "verify", "books/seed"]);
    assert_eq!(
        g.json(&["book", "list", "--all"])["books"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn a_fetch_from_a_silent_server_shows_progress_and_names_the_timeout_key() {
    // Accepts connections (the kernel does) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/book.txt", silent.local_addr().unwrap());
    let g = Grove::new();
    let started = std::time::Instant::now();
    let out = g
        .cmd(&["book", "add", &url])
        .env("GROVE_FETCH__TIMEOUT_SECS", "2")
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success(), "{err}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "{err}"
    );
    assert!(
        err.contains(&format!("fetching {url}: 1 s, 0 bytes so far")),
        "{err}"
    );
    assert!(
        err.contains("no answer within 2 s; raise fetch.timeout_secs"),
        "{err}"
    );
    drop(silent);
}

#[test]
fn audit_verify_on_a_database_it_cannot_write_only_reads() {
    let intact = Grove::new();
    let book = intact.write(
        "b.txt",
        generated_book("Kept", "Tester", 3, 8, 3).as_bytes(),
    );
    intact.ok(&["book", "add", book.to_str().unwrap()]);
    intact.ok(&["mesh", "init", "--name", "ro"]);
    // A second state whose shard chain was tampered with stays broken.
    let tampered = Grove::new();
    tampered.ok(&["book", "add", book.to_str().unwrap()]);
    let db = rusqlite::Connection::open(tampered.state().join("shards/main.db")).unwrap();
    db.execute("UPDATE audit SET body = '{}' WHERE seq = 1", [])
        .unwrap();
    drop(db);
    let (a, b) = (intact.state(), tampered.state());
    let script = format!(
        "set -u; mount --bind -o ro {a} {a} && mount --bind -o ro {b} {b} && \
         ls -R {a} > {a}/../before; \
         \"$TEST_GROVE_BIN\" --state {a} audit verify; echo \"rc=$?\"; \
         ls -R {a} > {a}/../after; \
         \"$TEST_GROVE_BIN\" --state {b} audit verify; echo \"rc=$?\"",
        a = a.display(),
        b = b.display()
    );
    let Some(out) = crate::support::in_mount_namespace(&script) else {
        return;
    };
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let mut parts = stdout.split("rc=");
    let first = parts.next().unwrap();
    assert!(
        first.contains("ok:") && !first.contains("BROKEN") && stdout.contains("rc=0"),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("BROKEN:") && stdout.contains("rc=1"),
        "{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("1 audit chain(s) broken"),
        "{stderr}\n{stdout}"
    );
    // Only read: nothing was created beside the databases.
    let dir = intact.dir.path();
    assert_eq!(
        std::fs::read_to_string(dir.join("before")).unwrap(),
        std::fs::read_to_string(dir.join("after")).unwrap()
    );
}

#[test]
fn a_node_that_cannot_listen_leaves_no_state_behind() {
    // 192.0.2.1 (TEST-NET-1, RFC 5737) is never a host's address: the bind
    // fails at once and no packet is sent.
    let addr = "/ip4/192.0.2.1/tcp/0";
    let g = Grove::new();
    let out = g.cmd(&["node", "run", "--listen", addr]).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("cannot listen on /ip4/192.0.2.1/tcp/0 (net.listen): 192.0.2.1 must be an address of this host"),
        "{err}"
    );
    assert!(
        !g.state().exists(),
        "a failed start left {:?}",
        std::fs::read_dir(g.state()).map(|d| d.count())
    );
}

#[test]
fn a_moot_header_shows_an_untitled_book_by_its_key_alone() {
    let g = Grove::new();
    // No Gutenberg header: the book has no title.
    let untitled: String = (0..40)
        .map(|i| format!("The sea and the ship sailed on, line {i} of the log.\n\n"))
        .collect();
    let file = g.write("untitled.txt", untitled.as_bytes());
    g.ok(&["book", "add", file.to_str().unwrap(), "--key", "notes/log"]);
    let titled = g.write(
        "t.txt",
        generated_book("Sea Tales", "Ann", 2, 30, 2).as_bytes(),
    );
    g.ok(&[
        "book",
        "add",
        titled.to_str().unwrap(),
        "--key",
        "fiction/sea-tales",
    ]);
    // The header is printed before the model is asked; a model endpoint
    // that refuses connections ends the run right after it.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let out = g
        .cmd(&[
            "moot",
            "run",
            "--a",
            "notes/log",
            "--b",
            "fiction/sea-tales",
            "--turns",
            "1",
            "-k",
            "2",
        ])
        .env("GROVE_MODEL__BACKEND", "openai")
        .env("GROVE_MODEL__URL", &url)
        .env("GROVE_MODEL__MAX_RETRIES", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let header = stdout.lines().next().unwrap();
    assert!(
        header.starts_with("moot: notes/log and Sea Tales (fiction/sea-tales), 1 turns"),
        "{header}"
    );
    assert!(!stdout.contains("()"), "{stdout}");
}

#[test]
fn book_add_refuses_special_files_and_says_which_length_limit_was_hit() {
    let g = Grove::new();
    let fifo = g.dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // A FIFO with no writer would block the read: refused before reading.
    let refused = g.fails(&["book", "add", fifo.to_str().unwrap()]);
    assert!(
        refused.contains("named pipe (FIFO), not a regular file"),
        "{refused}"
    );
    let book = g.write(
        "b.txt",
        generated_book("Limits", "Tester", 9, 5, 9).as_bytes(),
    );
    let long_key = format!("books/{}", "a".repeat(200));
    let refused = g.fails(&["book", "add", book.to_str().unwrap(), "--key", &long_key]);
    assert!(
        refused.contains("206 bytes, over the limit of 128"),
        "{refused}"
    );
    let long_shard = "s".repeat(70);
    let refused = g.fails(&[
        "book",
        "add",
        book.to_str().unwrap(),
        "--shard",
        &long_shard,
    ]);
    assert!(
        refused.contains("70 bytes, over the limit of 64"),
        "{refused}"
    );
}
