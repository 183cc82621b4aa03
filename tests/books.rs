//! `grove book …`, `shard list` and `audit verify` through the real binary:
//! ingest, versions, tombstones, proofs, verify, search and every bad input.

use grove::merkle;
use serde_json::Value;

use crate::support::{Grove, generated_book, hash_hex, in_mount_namespace, verify_served_proof};

/// Everything a bad input must leave untouched: shards, books of every
/// version, and the audit chains.
fn snapshot(g: &Grove) -> (Value, Value, Value) {
    (
        g.json(&["shard", "list"]),
        g.json(&["book", "list", "--all"]),
        g.json(&["audit", "verify"]),
    )
}

#[test]
fn add_version_remove_and_history() {
    let g = Grove::new();
    let v1 = g.write(
        "sea.txt",
        generated_book("The Sea Tale", "Ann Writer", 4242, 60, 1).as_bytes(),
    );
    let added = g.json(&["book", "add", v1.to_str().unwrap()]);
    assert_eq!(added["status"], "added");
    assert_eq!(added["key"], "books/the-sea-tale");
    assert_eq!(added["title"], "The Sea Tale");
    assert_eq!(added["author"], "Ann Writer");
    assert_eq!(added["language"], "English");
    assert_eq!(added["ebook"], 4242);
    assert_eq!(added["shard"], "main");
    let count = added["count"].as_u64().unwrap();
    assert!(count > 5);
    // Same content: nothing changes, not even the audit chain.
    let before = snapshot(&g);
    let again = g.json(&["book", "add", v1.to_str().unwrap()]);
    assert_eq!(again["status"], "unchanged");
    assert_eq!(again["root"], added["root"]);
    assert_eq!(snapshot(&g), before);
    let hits_v1 = g.json(&[
        "book",
        "search",
        "zephyrine",
        "--key",
        "books/the-sea-tale",
        "-k",
        "50",
    ]);
    // New content under the same key: a new version; the old one is kept.
    let v2 = g.write(
        "sea2.txt",
        generated_book("The Sea Tale", "Ann Writer", 4242, 61, 1).as_bytes(),
    );
    let second = g.json(&["book", "add", v2.to_str().unwrap()]);
    assert_eq!(second["status"], "new-version");
    assert_eq!(second["version"], 2);
    assert_ne!(second["root"], added["root"]);
    let all = g.json(&["book", "list", "--all"]);
    let statuses: Vec<_> = all["books"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["status"].clone())
        .collect();
    assert_eq!(statuses, ["superseded", "current"]);
    assert_eq!(
        g.json(&["book", "list"])["books"].as_array().unwrap().len(),
        1
    );
    // Node ids are stable: a chunk whose content did not change keeps its id.
    let hits_v2 = g.json(&[
        "book",
        "search",
        "zephyrine",
        "--key",
        "books/the-sea-tale",
        "-k",
        "50",
    ]);
    let ids = |v: &Value| -> std::collections::BTreeMap<String, String> {
        v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h["leaf"].as_str().unwrap().to_string(),
                    h["node_id"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let (ids1, ids2) = (ids(&hits_v1), ids(&hits_v2));
    let shared: Vec<_> = ids1
        .keys()
        .filter(|leaf| ids2.contains_key(*leaf))
        .collect();
    assert!(shared.len() >= 3, "most chunks are unchanged");
    for leaf in shared {
        assert_eq!(ids1[leaf], ids2[leaf]);
    }
    // Proofs: current by default, the old version when named; both verify.
    let p2 = g.json(&["book", "proof", "books/the-sea-tale", "2"]);
    assert_eq!(p2["root"], second["root"]);
    verify_served_proof(&p2);
    let p1 = g.json(&[
        "book",
        "proof",
        "books/the-sea-tale",
        "2",
        "--book-version",
        "1",
    ]);
    assert_eq!(p1["root"], added["root"]);
    verify_served_proof(&p1);
    for i in 0..count {
        verify_served_proof(&g.json(&[
            "book",
            "proof",
            "books/the-sea-tale",
            &i.to_string(),
            "--book-version",
            "1",
        ]));
    }
    let err = g.fails(&[
        "book",
        "proof",
        "books/the-sea-tale",
        &count.to_string(),
        "--book-version",
        "1",
    ]);
    assert!(err.contains(&format!("no chunk {count}")), "{err}");
    assert_eq!(
        g.json(&["book", "verify", "books/the-sea-tale"])["ok"],
        true
    );
    assert_eq!(
        g.json(&[
            "book",
            "verify",
            "books/the-sea-tale",
            "--book-version",
            "1"
        ])["ok"],
        true
    );
    // Remove: gone from listings and search, kept in history, audited.
    g.ok(&["book", "remove", "books/the-sea-tale"]);
    assert_eq!(
        g.json(&["book", "list"])["books"].as_array().unwrap().len(),
        0
    );
    assert_eq!(
        g.json(&["book", "search", "zephyrine"])["hits"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    let all = g.json(&["book", "list", "--all"]);
    let statuses: Vec<_> = all["books"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["status"].clone())
        .collect();
    assert_eq!(statuses, ["superseded", "removed"]);
    let err = g.fails(&["book", "proof", "books/the-sea-tale", "0"]);
    assert!(err.contains("was removed"), "{err}");
    assert_eq!(g.json(&["shard", "list"])["shards"][0]["root"], Value::Null);
    let audit = g.json(&["audit", "verify"]);
    assert_eq!(audit["ok"], true);
    assert_eq!(audit["chains"][0]["events"], 3);
    // Re-adding after removal starts version 3.
    assert_eq!(g.json(&["book", "add", v1.to_str().unwrap()])["version"], 3);
}

#[test]
fn shard_roots_follow_spec_and_keys_stay_in_one_shard() {
    let g = Grove::new();
    let a = g.write("a.txt", generated_book("Alpha", "A", 1, 12, 2).as_bytes());
    let b = g.write("b.txt", generated_book("Beta", "B", 2, 30, 3).as_bytes());
    let ra = g.json(&["book", "add", a.to_str().unwrap(), "--key", "fiction/alpha"]);
    let rb = g.json(&[
        "book",
        "add",
        b.to_str().unwrap(),
        "--key",
        "essays/beta",
        "--shard",
        "second",
    ]);
    let err = g.fails(&["book", "add", b.to_str().unwrap(), "--key", "essays/beta"]);
    assert!(err.contains("already lives in shard `second`"), "{err}");
    let shards = g.json(&["shard", "list"]);
    let list = shards["shards"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    for (shard, book) in list.iter().zip([&ra, &rb]) {
        let entry = merkle::ShardEntry {
            key: book["key"].as_str().unwrap().into(),
            root: hash_hex(&book["root"]),
            count: book["count"].as_u64().unwrap(),
        };
        assert_eq!(
            hash_hex(&shard["root"]),
            merkle::shard_root(&[entry]).unwrap()
        );
        assert_eq!(shard["books"][0]["key"], book["key"]);
    }
    // Search across every shard finds both books.
    let hits = g.json(&["book", "search", "zephyrine", "-k", "20"]);
    let keys: std::collections::BTreeSet<_> = hits["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys.len(), 2);
}

#[test]
fn missing_metadata_is_null_and_needs_a_key() {
    let g = Grove::new();
    let plain = g.write(
        "plain.txt",
        b"Just a paragraph of plain text.\n\nAnd another one.\n",
    );
    let err = g.fails(&["book", "add", plain.to_str().unwrap()]);
    assert!(err.contains("no title"), "{err}");
    let added = g.json(&[
        "book",
        "add",
        plain.to_str().unwrap(),
        "--key",
        "misc/plain",
    ]);
    for field in ["title", "author", "language", "ebook"] {
        assert_eq!(added[field], Value::Null, "{field}");
    }
    let hits = g.json(&["book", "search", "paragraph"]);
    assert_eq!(hits["hits"][0]["title"], Value::Null);
}

#[test]
fn search_treats_fts_syntax_as_words_and_falls_back() {
    let g = Grove::new();
    let book = g.write(
        "s.txt",
        generated_book("Search Me", "S", 5, 120, 7).as_bytes(),
    );
    g.ok(&["book", "add", book.to_str().unwrap()]);
    for q in [
        "\"whale",
        "whale\"",
        "(sea",
        "sea)",
        "NEAR(sea ship)",
        "sea*",
        "^sea",
        "text:sea",
        "sea AND",
        "OR",
        "NOT sea",
        "- sea",
        "{text}: sea",
        "sea + ship",
        "''",
        "\"\"",
        "*",
        "rowid:1",
        "sea NEAR/2 ship",
    ] {
        let out = g.run(&["book", "search", q, "--key", "books/search-me", "--json"]);
        assert!(
            out.status.success(),
            "query {q:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Syntax does not change meaning: `NEAR(sea ship)` searches the words near, sea, ship.
    let near = g.json(&[
        "book",
        "search",
        "NEAR(sea ship)",
        "--key",
        "books/search-me",
        "-k",
        "6",
    ]);
    for hit in near["hits"].as_array().unwrap() {
        let text = hit["content"].as_str().unwrap();
        assert!(text.contains("sea") || text.contains("ship"), "{text}");
    }
    // Every word first, then the rarest words: an absent word does not empty the result.
    let hits = g.json(&[
        "book",
        "search",
        "zephyrine qqqabsentword",
        "--key",
        "books/search-me",
        "-k",
        "6",
    ]);
    let hits = hits["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 6);
    assert!(
        hits.iter()
            .all(|h| h["content"].as_str().unwrap().contains("zephyrine"))
    );
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "best first: {scores:?}"
    );
    for hit in hits {
        assert_eq!(hit["node_id"], format!("books/search-me#{}", hit["index"]));
        assert_eq!(
            merkle::leaf_hash(hit["content"].as_str().unwrap().as_bytes()),
            hash_hex(&hit["leaf"])
        );
    }
    // k is honoured.
    assert_eq!(
        g.json(&["book", "search", "sea", "-k", "2"])["hits"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// Runs a bad `book add`, checks the message and that nothing changed.
fn refused(g: &Grove, args: &[&str], message: &str) {
    let before = snapshot(g);
    let err = g.fails(args);
    assert!(
        err.contains(message),
        "{args:?}: expected {message:?} in {err}"
    );
    assert_eq!(snapshot(g), before, "{args:?} changed the store");
}

#[test]
fn bad_inputs_are_refused_and_store_nothing() {
    let g = Grove::new();
    let good = g.write(
        "good.txt",
        generated_book("Good Book", "G", 9, 10, 1).as_bytes(),
    );
    g.ok(&["book", "add", good.to_str().unwrap()]);
    let dir = g.dir.path().to_str().unwrap().to_string();
    refused(
        &g,
        &["book", "add", &format!("{dir}/nope.txt")],
        "no such file",
    );
    refused(&g, &["book", "add", &dir], "is a directory");
    let empty = g.write("empty.txt", b"");
    refused(
        &g,
        &["book", "add", empty.to_str().unwrap()],
        "input is empty",
    );
    let nul = g.write("nul.txt", b"Title: X\n\nsome\0text\n");
    refused(&g, &["book", "add", nul.to_str().unwrap()], "NUL bytes");
    let blank = g.write(
        "blank.txt",
        // Markers with only blank lines (spaces, a tab) between them.
        generated_book("Blank", "B", 1, 0, 1)
            .replace("***\n\n", "***\n\n   \n\t\n")
            .as_bytes(),
    );
    refused(
        &g,
        &["book", "add", blank.to_str().unwrap()],
        "yields no chunks",
    );
    for key in ["Books/x", "books", "books/", "a/b/c", "-a/b", "a/b c"] {
        refused(
            &g,
            &[
                "book",
                "add",
                good.to_str().unwrap(),
                &format!("--key={key}"),
            ],
            "invalid key",
        );
    }
    refused(
        &g,
        &["book", "add", good.to_str().unwrap(), "--shard", "Bad Name"],
        "invalid shard name",
    );
    // A 100 KB line without spaces is one chunk over the 64 KiB limit.
    let long = g.write(
        "long.txt",
        format!("Title: Long\n\n{}\n", "x".repeat(100_000)).as_bytes(),
    );
    refused(
        &g,
        &["book", "add", long.to_str().unwrap(), "--key", "x/long"],
        "over the limit of 65536 (limits.max_chunk_bytes)",
    );
    // The same, found midway: the chunks stored before it are rolled back.
    let mut midway = generated_book("Midway", "M", 8, 80, 3);
    midway = midway.replace(
        "*** END OF",
        &format!("{}\n\n*** END OF", "y".repeat(100_000)),
    );
    let midway = g.write("midway.txt", midway.as_bytes());
    refused(&g, &["book", "add", midway.to_str().unwrap()], "chunk ");
    // A new version that fails midway leaves the old version current.
    let good_v2 = generated_book("Good Book", "G", 9, 10, 1).replace(
        "*** END OF",
        &format!("{}\n\n*** END OF", "z".repeat(100_000)),
    );
    let good_v2 = g.write("good2.txt", good_v2.as_bytes());
    refused(
        &g,
        &["book", "add", good_v2.to_str().unwrap()],
        "limits.max_chunk_bytes",
    );
    assert_eq!(g.json(&["book", "verify", "books/good-book"])["ok"], true);
    // A book over limits.max_book_bytes (lowered by env for the test).
    let before = snapshot(&g);
    let out = g
        .cmd(&["book", "add", good.to_str().unwrap(), "--key", "x/y"])
        .env("GROVE_LIMITS__MAX_BOOK_BYTES", "1000")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("limits.max_book_bytes"));
    assert_eq!(snapshot(&g), before);
    // Unreachable and refused URLs.
    refused(
        &g,
        &["book", "add", "http://127.0.0.1:1/book.txt"],
        "cannot fetch http://127.0.0.1:1/book.txt",
    );
    refused(&g, &["book", "add", "http://[::1"], "invalid URL");
}

/// A one-shot HTTP server on 127.0.0.1 that answers every request with
/// `status` and `body` (and the body's length).
fn serve(status: &'static str, body: Vec<u8>, requests: usize) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(requests) {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
        }
    });
    format!("http://{addr}/book.txt")
}

#[test]
fn urls_are_fetched_with_limits() {
    let g = Grove::new();
    let url = serve(
        "200 OK",
        generated_book("Web Book", "W", 77, 20, 4).into_bytes(),
        1,
    );
    let added = g.json(&["book", "add", &url]);
    assert_eq!(added["status"], "added");
    assert_eq!(added["ebook"], 77);
    let url = serve("404 Not Found", b"nope".to_vec(), 1);
    refused(&g, &["book", "add", &url], "HTTP 404");
    let url = serve("200 OK", vec![b'a'; 5000], 1);
    let before = snapshot(&g);
    let out = g
        .cmd(&["book", "add", &url])
        .env("GROVE_LIMITS__MAX_BOOK_BYTES", "4096")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("over the limit of 4096"));
    assert_eq!(snapshot(&g), before);
}

#[test]
fn corrupted_shard_is_refused_by_name() {
    let g = Grove::new();
    let good = g.write(
        "good.txt",
        generated_book("Good Book", "G", 9, 10, 1).as_bytes(),
    );
    g.ok(&["book", "add", good.to_str().unwrap()]);
    let path = g.state().join("shards/main.db");
    // Checkpoint is implicit on close; overwrite the header with garbage.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[..100].copy_from_slice(&[0x5a; 100]);
    std::fs::write(&path, &bytes).unwrap();
    for args in [
        &["book", "list"][..],
        &["book", "add", good.to_str().unwrap()],
        &["shard", "list"],
    ] {
        let err = g.fails(args);
        assert!(
            err.contains("main.db") && err.contains("corrupted"),
            "{err}"
        );
        assert!(err.contains("book verify"), "{err}");
    }
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the corrupted file is left as it was"
    );
}

#[test]
fn config_refuses_unknown_keys_by_name() {
    let g = Grove::new();
    let out = g
        .cmd(&["book", "list"])
        .env("GROVE_LIMITS__MAX_BOK_BYTES", "5")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("max_bok_bytes"));
    let cfg = g.write("grove.toml", b"[limits]\nmax_book_bytes = 10\ncolour = 1\n");
    let err = g.fails(&["--config", cfg.to_str().unwrap(), "book", "list"]);
    assert!(err.contains("colour"), "{err}");
    // A config file's state_dir is used when no flag is given.
    let state = g.dir.path().join("from-config");
    let cfg = g.write(
        "grove2.toml",
        format!("state_dir = {:?}\n", state.to_str().unwrap()).as_bytes(),
    );
    let book = g.write("b.txt", generated_book("Cfg", "C", 3, 5, 1).as_bytes());
    let out = crate::support::grove_cmd()
        .args([
            "--config",
            cfg.to_str().unwrap(),
            "book",
            "add",
            book.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(state.join("shards/main.db").is_file());
}

#[test]
fn read_only_and_full_state_directories() {
    let g = Grove::new();
    let book = g.write("b.txt", generated_book("Big", "B", 3, 400, 9).as_bytes());
    let small = g.write("s.txt", generated_book("Small", "S", 4, 3, 9).as_bytes());
    let mnt = g.dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let (mnt, book, small) = (
        mnt.to_str().unwrap(),
        book.to_str().unwrap(),
        small.to_str().unwrap(),
    );
    // Read-only: a tmpfs holding one book, remounted read-only.
    let script = format!(
        "set -u; mount -t tmpfs -o size=8m tmpfs {mnt} && \"$TEST_GROVE_BIN\" --state {mnt}/s book add {small} >/dev/null && \
         mount -o remount,ro {mnt} && \"$TEST_GROVE_BIN\" --state {mnt}/s book add {book}; echo \"rc=$?\"; \
         \"$TEST_GROVE_BIN\" --state {mnt}/s book list"
    );
    let Some(out) = in_mount_namespace(&script) else {
        return;
    };
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(stdout.contains("rc=1"), "{stdout}\n{stderr}");
    assert!(
        stderr.to_lowercase().contains("read-only") || stderr.contains("cannot write"),
        "{stderr}"
    );
    assert!(
        stdout.contains("books/small") && !stdout.contains("books/big"),
        "{stdout}"
    );
    // Full: a tmpfs too small for the second book.
    let script = format!(
        "set -u; mount -t tmpfs -o size=400k tmpfs {mnt} && \"$TEST_GROVE_BIN\" --state {mnt}/s book add {small} >/dev/null && \
         \"$TEST_GROVE_BIN\" --state {mnt}/s book add {book}; echo \"rc=$?\"; \
         \"$TEST_GROVE_BIN\" --state {mnt}/s book list --all; \"$TEST_GROVE_BIN\" --state {mnt}/s audit verify"
    );
    let out = in_mount_namespace(&script).expect("namespace worked above");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(stdout.contains("rc=1"), "{stdout}\n{stderr}");
    assert!(stderr.contains("full"), "{stderr}");
    assert!(
        stdout.contains("books/small") && !stdout.contains("books/big"),
        "{stdout}"
    );
    assert!(stdout.contains("(1 events)"), "{stdout}");
}

#[test]
fn audit_verify_names_the_first_broken_link() {
    let g = Grove::new();
    for (i, title) in ["One", "Two", "Three"].iter().enumerate() {
        let f = g.write(
            &format!("{i}.txt"),
            generated_book(title, "A", i as u64, 5, i as u64).as_bytes(),
        );
        g.ok(&["book", "add", f.to_str().unwrap()]);
    }
    assert_eq!(g.json(&["audit", "verify"])["chains"][0]["events"], 3);
    let db = rusqlite::Connection::open(g.state().join("shards/main.db")).unwrap();
    db.execute(
        "UPDATE audit SET body = replace(body, 'books/two', 'books/evil') WHERE seq = 2",
        [],
    )
    .unwrap();
    drop(db);
    let out = g.run(&["audit", "verify", "--json"]);
    assert!(!out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false);
    let error = report["chains"][0]["error"].as_str().unwrap();
    assert!(error.contains("broken at event 2"), "{error}");
}

/// Damage is found on demand, not only at a node's start: 200 random bytes
/// written into one page of a shard make `audit verify` and `book verify`
/// name the file and the way out, and exit 1.
#[test]
fn damage_is_found_on_demand() {
    let g = Grove::new();
    let text = generated_book("Damage", "Tester", 7, 400, 3);
    let book = g.write("damage.txt", text.as_bytes());
    let added = g.json(&["book", "add", book.to_str().unwrap()]);
    let key = added["key"].as_str().unwrap().to_string();
    assert!(g.ok(&["audit", "verify"]).contains("ok:"));
    g.ok(&["book", "verify", &key]);

    let shard = g.state().join("shards/main.db");
    let mut bytes = std::fs::read(&shard).unwrap();
    let pages = bytes.len() / 4096;
    assert!(pages > 6, "a shard of {pages} pages");
    // 200 bytes of a seeded generator over the head of a page in the middle
    // of the file (its b-tree header and cell pointers).
    let at = pages / 2 * 4096;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for b in &mut bytes[at..at + 200] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    std::fs::write(&shard, &bytes).unwrap();

    let out = g.run(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for want in [
        "DAMAGED:",
        "shards/main.db is damaged",
        "restore it from a backup",
    ] {
        assert!(stdout.contains(want), "no `{want}` in: {stdout}");
    }
    let err = g.fails(&["book", "verify", &key]);
    assert!(err.contains("failed verification"), "{err}");
    let report = g.run(&["book", "verify", &key, "--json"]);
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert!(
        report["problems"][0]
            .as_str()
            .unwrap()
            .contains("shards/main.db is damaged"),
        "{report}"
    );
}
