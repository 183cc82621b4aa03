//! `grove ask` through the real binary: a scripted OpenAI-compatible model
//! gives exact claim lines (resolved and unresolved pointers, an unsourced
//! line, lines that hold or not), bad input gets clear errors, and the
//! embedded model answers in guided claim lines whose quotes are verbatim.

use serde_json::Value;

use crate::scripted_openai::{RecordedRequest, Reply, ScriptedServer};
use crate::support::{Grove, data_file, succeeded};

const MOBY: &str = "corpus/moby-dick-2701-excerpt.txt";
const PRIDE: &str = "corpus/pride-and-prejudice-1342-excerpt.txt";
const MOBY_KEY: &str = "books/moby-dick-or-the-whale";
const PRIDE_KEY: &str = "books/pride-and-prejudice";

fn with_books() -> Grove {
    let g = Grove::new();
    for book in [MOBY, PRIDE] {
        g.ok(&["book", "add", data_file(book).to_str().unwrap()]);
    }
    g
}

/// The evidence pointer and passage of an ask's line request.
fn asked_passage(r: &RecordedRequest) -> (u32, String) {
    let user = r.last_message();
    let head = user.strip_prefix("Passage [E").expect("a passage prompt");
    let n: u32 = head[..head.find(']').unwrap()].parse().unwrap();
    let text =
        head[head.find(":\n").unwrap() + 2..head.find("\n\nQuestion: ").unwrap()].to_string();
    (n, text)
}

/// The config keys that point grove at an OpenAI-compatible server (a
/// scripted one, or an address nothing answers on), with no retries.
fn scripted_model(url: &str) -> [(&'static str, String); 3] {
    [
        ("GROVE_MODEL__BACKEND", "openai".to_string()),
        ("GROVE_MODEL__URL", url.to_string()),
        ("GROVE_MODEL__MAX_RETRIES", "0".to_string()),
    ]
}

fn ask(g: &Grove, server: &ScriptedServer, args: &[&str]) -> Value {
    let mut all = vec!["ask", "--json"];
    all.extend_from_slice(args);
    let out = succeeded(g.cmd(&all).envs(scripted_model(&server.url())));
    serde_json::from_slice(&out.stdout).expect("the record as JSON")
}

/// Lines that copy their passage's words (a span) hold up; with no warrant
/// to meet the answer is STRICT, and each line is asked of one passage.
#[test]
fn lines_that_copy_their_passages_make_a_strict_answer() {
    let g = with_books();
    let server = ScriptedServer::start_with(|r| {
        let (n, text) = asked_passage(r);
        let first: Vec<&str> = text.split_whitespace().take(16).collect();
        Reply::text(&format!("{} [E{n}].", first.join(" ")))
    });
    let out_file = g.dir.path().join("answer.json");
    let record = ask(
        &g,
        &server,
        &[
            "-k",
            "3",
            "--out",
            out_file.to_str().unwrap(),
            "what makes a good life?",
        ],
    );
    verify_and_tamper(&g, &out_file);
    assert_eq!(record["format"], "ask-v2");
    assert_eq!(record["evidence"].as_array().unwrap().len(), 3);
    assert_eq!(server.requests().len(), 3, "one model call per passage");
    for e in record["evidence"].as_array().unwrap() {
        assert_eq!(e["id"].as_str().unwrap().len(), 64, "{e}");
        assert_eq!(e["proven"], true);
    }
    let v = &record["verification"];
    assert_eq!(v["lines"], 3, "{v}");
    assert_eq!(v["supported"], 3, "{v}");
    // Copied words hold up as a span (or as a quote, where the copy holds a
    // quotation of the book's own).
    assert!(
        v["claims"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["support"] == "span" || c["support"] == "quote"),
        "{v}"
    );
    assert_eq!(v["label"], "STRICT", "{v}");
    assert_eq!(v["rung"], "grounded");
}

/// Exact lines: a pointer naming no passage, a line citing nothing, and a
/// line whose pointer is not at its end; each is counted and named, and the
/// text output says the rung and why.
#[test]
fn bad_lines_are_counted_and_named() {
    let g = with_books();
    let script = || {
        vec![
            Reply::text("Ahab commands the ship. [E9]"),
            Reply::text("He is a madman."),
            Reply::text("Ahab [E1] hunts the whale."),
        ]
    };
    let server = ScriptedServer::start(script());
    let record = ask(
        &g,
        &server,
        &["--book", MOBY_KEY, "-k", "3", "Who is Ishmael?"],
    );
    assert_eq!(record["books"], serde_json::json!([MOBY_KEY]));
    assert!(
        record["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["book"] == MOBY_KEY)
    );
    let v = &record["verification"];
    assert_eq!(
        (v["lines"].as_u64(), v["unsourced"].as_u64()),
        (Some(3), Some(1)),
        "{v}"
    );
    let claims = v["claims"].as_array().unwrap();
    assert_eq!(claims[0]["violations"][0]["check"], "unresolved", "{v}");
    assert_eq!(claims[0]["violations"][0]["pointer"], 9);
    assert_eq!(claims[1]["sourced"], false);
    assert_eq!(claims[2]["violations"][0]["check"], "unparsed");
    assert_eq!(v["label"], "UNGROUNDED");
    assert_eq!(v["rung"], "not-grounded");

    let server = ScriptedServer::start(script());
    let out = g
        .cmd(&["ask", "--book", MOBY_KEY, "-k", "3", "Who is Ishmael?"])
        .envs(scripted_model(&server.url()))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("E9 names no passage"), "{text}");
    assert!(text.contains("it cites no passage"), "{text}");
    assert!(text.contains("rung 4 of 4, not grounded"), "{text}");
    assert!(
        text.contains("warrant (proper noun): not checked"),
        "{text}"
    );
}

/// `ask verify` passes the record as written; one byte changed in a
/// passage, or in the answer, is caught and named.
fn verify_and_tamper(g: &Grove, file: &std::path::Path) {
    let verdict = g.json(&["ask", "verify", file.to_str().unwrap()]);
    assert_eq!(verdict["valid"], true, "{verdict}");
    assert_eq!(verdict["root"].as_str().unwrap().len(), 64);
    let original = std::fs::read_to_string(file).unwrap();
    let record: Value = serde_json::from_str(&original).unwrap();
    let passage = record["evidence"][0]["text"].as_str().unwrap();
    let answer = record["answer"].as_str().unwrap();
    for (field, text, what) in [
        ("text", passage, "E1: its proof fails"),
        (
            "answer",
            answer,
            "stage raw-answer: its content does not match",
        ),
    ] {
        // One byte: the first ASCII letter turned to another.
        let at = text.find(|c: char| c.is_ascii_alphabetic()).unwrap();
        let mut changed = text.to_string();
        let c = changed.as_bytes()[at];
        changed.replace_range(at..at + 1, if c == b'x' { "y" } else { "x" });
        let mut tampered = record.clone();
        if field == "text" {
            tampered["evidence"][0]["text"] = Value::String(changed);
        } else {
            tampered["answer"] = Value::String(changed);
        }
        let bad = g.write("tampered.json", tampered.to_string().as_bytes());
        let out = g.run(&["ask", "verify", bad.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("INVALID") && text.contains(what),
            "{what}: {text}"
        );
    }
}

/// A second ask is served from the cache without the model; an
/// equivalent question meets it only in `equivalent` mode; a book
/// re-ingested with a new root turns the answer stale and the model is
/// asked again.
#[test]
fn cached_answers_hold_while_their_books_roots_do() {
    let g = with_books();
    let server = ScriptedServer::start_with(|r| {
        let (n, text) = asked_passage(r);
        let first: Vec<&str> = text.split_whitespace().take(16).collect();
        Reply::text(&format!("{} [E{n}].", first.join(" ")))
    });
    let run = |question: &str, mode: &str| {
        let out = succeeded(
            g.cmd(&[
                "ask", "--book", MOBY_KEY, "-k", "2", "--cache", mode, question,
            ])
            .envs(scripted_model(&server.url())),
        );
        (
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (first, _) = run("Who is Ishmael?", "strict");
    assert_eq!(server.requests().len(), 2);
    let (again, note) = run("Who is Ishmael?", "strict");
    assert_eq!(server.requests().len(), 2, "served without the model");
    assert_eq!(again, first);
    assert!(note.contains("answered from the cache"), "{note}");
    run("who is ishmael", "strict");
    assert_eq!(server.requests().len(), 4, "strict: another question");
    run("Who is Ishmael?", "equivalent");
    assert_eq!(
        server.requests().len(),
        6,
        "each mode keeps its own answers"
    );
    let (_, note) = run("WHO is Ishmael", "equivalent");
    assert_eq!(server.requests().len(), 6, "{note}");
    // The book again, one word changed: a new root.
    let text = std::fs::read_to_string(data_file(MOBY)).unwrap();
    let changed = g.write(
        "moby-2.txt",
        text.replacen("Loomings", "Loomings again", 1).as_bytes(),
    );
    g.ok(&["book", "add", changed.to_str().unwrap(), "--key", MOBY_KEY]);
    let (_, note) = run("Who is Ishmael?", "strict");
    assert!(
        note.contains("the cached answer is stale: books/moby-dick-or-the-whale changed"),
        "{note}"
    );
    assert_eq!(server.requests().len(), 8, "asked again");
    let (_, note) = run("Who is Ishmael?", "off");
    assert_eq!(server.requests().len(), 10, "{note}");
}

#[test]
fn bad_questions_books_and_models_get_clear_errors() {
    let empty = Grove::new();
    assert!(empty.fails(&["ask", "who?"]).contains("holds no books"));
    let g = with_books();
    assert!(g.fails(&["ask", "  "]).contains("the question is empty"));
    let long = "why ".repeat(200);
    assert!(g.fails(&["ask", &long]).contains("at most 500"));
    assert!(
        g.fails(&["ask", "--book", "books/nothing", "who?"])
            .contains("no book with key `books/nothing`")
    );
    // A model that is down is named as such.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let out = g
        .cmd(&["ask", "Who is Ahab?"])
        .envs(scripted_model(&url))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unreachable"), "{err}");
}

/// The embedded model answers from two books: one guided line per passage,
/// each ending in its own passage's pointer, every quote verbatim (no
/// misquote, no unparsed line), and the record written with `--out`.
#[test]
fn the_embedded_model_answers_in_guided_claim_lines() {
    let Some(model) = crate::model::embedded_model_file() else {
        crate::support::skip("no embedded model (set GROVE_TEST_STATE or GROVE_TEST_MODEL)");
        return;
    };
    let g = with_books();
    let out_file = g.dir.path().join("answer.json");
    let out = succeeded(
        g.cmd(&[
            "ask",
            "--book",
            MOBY_KEY,
            "--book",
            PRIDE_KEY,
            "-k",
            "3",
            "--out",
            out_file.to_str().unwrap(),
            "Why does Ishmael go to sea?",
        ])
        .env("GROVE_MODEL__PATH", &model)
        .env(
            "GROVE_MODEL__THREADS",
            std::env::var("GROVE_MODEL__THREADS").unwrap_or_else(|_| "2".into()),
        ),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert!(text.contains("rung "), "{text}");
    let record: Value = serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    assert_eq!(record["guided"], true);
    let v = &record["verification"];
    let claims = v["claims"].as_array().unwrap();
    assert!(!claims.is_empty(), "{record}");
    let pointers: Vec<u64> = record["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pointer"].as_u64().unwrap())
        .collect();
    for claim in claims {
        let raw = claim["raw"].as_str().unwrap();
        assert!(
            pointers.iter().any(|n| raw.ends_with(&format!("[E{n}]."))),
            "line {raw:?} ends in one of {pointers:?}"
        );
        for violation in claim["violations"].as_array().unwrap() {
            let check = violation["check"].as_str().unwrap();
            assert!(
                !["unparsed", "unresolved", "misquote"].contains(&check),
                "guidance keeps lines parsed and quotes verbatim: {raw:?} {violation}"
            );
        }
    }
}

/// A model that answers each line by copying its passage's first words.
pub(crate) fn copying_server() -> ScriptedServer {
    ScriptedServer::start_with(|r| {
        let (n, text) = asked_passage(r);
        let first: Vec<&str> = text.split_whitespace().take(16).collect();
        Reply::text(&format!("{} [E{n}].", first.join(" ")))
    })
}

/// A mesh of three daemons through the real binary: alpha holds no books
/// and asks with `--mesh`; bravo holds Moby-Dick, charlie Pride and
/// Prejudice. The answer cites passages of both peers, each proven against
/// the root its holder announced; `ask verify --expect-mesh` proves them
/// from the mesh's genesis offline, and refuses another mesh id, a changed
/// announcement and a passage moved to another holder. Without the daemon
/// a mesh ask is refused with how to start it.
#[test]
fn a_mesh_answers_from_two_peers_books_with_proofs() {
    use crate::cluster::{Daemon, converged, invite, vote_yes};
    let server = copying_server();
    let model_env = scripted_model(&server.url());
    let model_env: Vec<(&str, &str)> = model_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let offline = Grove::new();
    assert!(
        offline
            .fails(&["ask", "--mesh", "who?"])
            .contains("grove node run")
    );
    let a = Daemon::start_with("alpha", &model_env);
    let b = Daemon::start("bravo");
    let c = Daemon::start("charlie");
    b.ok(&["book", "add", data_file(MOBY).to_str().unwrap()]);
    c.ok(&["book", "add", data_file(PRIDE).to_str().unwrap()]);
    a.ok(&["mesh", "init", "--name", "ask-mesh"]);
    assert_eq!(b.json(&["mesh", "join", &invite(&a)])["state"], "joined");
    c.json(&["mesh", "join", &invite(&a)]);
    vote_yes(&b, "add");
    converged(&[&a, &b, &c], 2);
    let question = "What does a man want most in his life?";
    crate::cluster::eventually("both peers' hits prove on alpha", || {
        let out = a.json(&["book", "search", question, "-k", "12", "--mesh"]);
        let books: std::collections::BTreeSet<&str> = out["hits"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|h| h["key"].as_str())
            .collect();
        out["errors"].as_array().is_none_or(|e| e.is_empty()) && books.len() == 2
    });
    let file = a.g.dir.path().join("mesh-answer.json");
    let record = a.json(&[
        "ask",
        "--mesh",
        "--book",
        MOBY_KEY,
        "--book",
        PRIDE_KEY,
        "-k",
        "6",
        "--out",
        file.to_str().unwrap(),
        question,
    ]);
    let holders: std::collections::BTreeSet<&str> = record["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["proven"], true, "{e}");
            assert!(e["proof"]["steps"].is_array(), "{e}");
            e["holder"].as_str().expect("a holder")
        })
        .collect();
    let (pb, pc) = (b.peer_id(), c.peer_id());
    assert_eq!(
        holders,
        [pb.as_str(), pc.as_str()].into_iter().collect(),
        "{record}"
    );
    assert_eq!(
        server.requests().len(),
        record["evidence"].as_array().unwrap().len()
    );
    let mesh_id = a.status()["mesh_id"].as_str().unwrap().to_string();
    assert_eq!(record["mesh"]["mesh_id"], mesh_id.as_str());
    let path = file.to_str().unwrap();
    let verdict = a.json(&["ask", "verify", path, "--expect-mesh", &mesh_id]);
    assert_eq!(verdict["valid"], true, "{verdict}");
    assert_eq!(verdict["mesh"], mesh_id.as_str());
    let other = "0".repeat(mesh_id.len());
    let out = a.g.run(&["ask", "verify", path, "--expect-mesh", &other]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("not the expected"));
    // One changed byte in an announcement, or a passage claimed for the
    // other holder: the anchor no longer holds.
    let original: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let mut forged = original.clone();
    let ann = forged["mesh"]["announcements"][0]
        .as_str()
        .unwrap()
        .to_string();
    let flipped = if ann.ends_with('0') { "1" } else { "0" };
    forged["mesh"]["announcements"][0] =
        Value::String(format!("{}{flipped}", &ann[..ann.len() - 1]));
    let mut moved = original.clone();
    let first = moved["evidence"][0]["holder"].as_str().unwrap().to_string();
    let swap = if first == pb { &pc } else { &pb };
    moved["evidence"][0]["holder"] = Value::String(swap.clone());
    for (name, bad) in [("forged", forged), ("moved", moved)] {
        let f =
            a.g.write(&format!("{name}.json"), bad.to_string().as_bytes());
        let out = a.g.run(&[
            "ask",
            "verify",
            f.to_str().unwrap(),
            "--expect-mesh",
            &mesh_id,
        ]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("INVALID"),
            "{name}"
        );
    }
    // A member that does not answer is named, and the answer goes on with
    // the others' passages.
    let mut c = c;
    c.stop();
    let out = succeeded(&mut a.g.cmd(&[
        "ask", "--mesh", "--cache", "off", "--json", "-k", "4", question,
    ]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not asked: charlie"), "{err}");
    let record: Value = serde_json::from_slice(&out.stdout).unwrap();
    let evidence = record["evidence"].as_array().unwrap();
    assert!(!evidence.is_empty());
    assert!(
        evidence.iter().all(|e| e["holder"] == pb.as_str()),
        "{record}"
    );
    // A local ask's record has no anchor to pin.
    let g = with_books();
    let local = g.dir.path().join("local.json");
    ask(
        &g,
        &server,
        &["-k", "1", "--out", local.to_str().unwrap(), "Who is Ahab?"],
    );
    let out = g.run(&[
        "ask",
        "verify",
        local.to_str().unwrap(),
        "--expect-mesh",
        &mesh_id,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no mesh anchor"));
}

/// A record written before `ask-v2` (each line asked once over its whole
/// passage) still verifies offline: its prompt stage is recomputed as its
/// format wrote it. Relabelled `ask-v2`, the same record fails there.
#[test]
fn an_ask_v1_record_still_verifies() {
    let g = Grove::new();
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ask-v1-record.json");
    let text = std::fs::read_to_string(&file).expect("tests/data/ask-v1-record.json");
    let verdict = g.json(&["ask", "verify", file.to_str().unwrap()]);
    assert_eq!(verdict["valid"], true, "{verdict}");
    let mut record: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(record["format"], "ask-v1");
    record["format"] = Value::String("ask-v2".into());
    let relabelled = g.write("relabelled.json", record.to_string().as_bytes());
    let out = g.run(&["ask", "verify", relabelled.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("stage prompt"), "{said}");
}
