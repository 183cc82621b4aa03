//! A whole moot through the real binary against a scripted
//! OpenAI-compatible server over real HTTP: a retried invalid tag, a
//! misquote kept and snapped, an `[oN]` quote, an empty answer, then
//! `moot verify`.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::scripted_openai::{RecordedRequest, Reply, ScriptedServer};
use crate::support::{Grove, generated_book};

/// A state directory holding two generated books, `fiction/sea-tales` and
/// `essays/field-notes`, of `paragraphs` paragraphs each.
fn two_books(paragraphs: usize) -> Grove {
    let g = Grove::new();
    let books = [
        ("fiction/sea-tales", "Sea Tales", "Ann Sailor", 1, 3),
        ("essays/field-notes", "Field Notes", "Ben Angler", 2, 4),
    ];
    for (key, title, author, ebook, seed) in books {
        let file = g.write(
            &format!("{ebook}.txt"),
            generated_book(title, author, ebook, paragraphs, seed).as_bytes(),
        );
        g.ok(&["book", "add", file.to_str().unwrap(), "--key", key]);
    }
    g
}

/// The words of passage `[s1]` in the prompt.
fn first_passage(req: &RecordedRequest) -> Vec<String> {
    req.first_passage()
        .unwrap_or_else(|| panic!("no [s1] passage in the prompt: {}", req.body))
}

#[test]
fn moot_over_http_retries_snaps_quotes_and_verifies() {
    let g = two_books(80);

    let calls = Arc::new(Mutex::new(0usize));
    let counter = Arc::clone(&calls);
    let server = ScriptedServer::start_with(move |req| {
        let mut n = counter.lock().unwrap();
        *n += 1;
        let words = first_passage(req);
        let quote = |from: usize, len: usize| words[from..from + len].join(" ");
        match *n {
            // Turn 1: a tag that names no passage, then a clean reply.
            1 => Reply::text("I speak of the sea [s9]."),
            2 => Reply::text(&format!(
                "\"{}\" [s1], and the sea speaks plainly of this [s1].",
                quote(0, 6)
            )),
            // Turn 2: a misquote one word off, twice; the kept reply is
            // graded as written (not grounded), then snapped to the book's words.
            3 | 4 => {
                let mut near: Vec<String> = words[0..8].to_vec();
                near[4] = "zzzword".into();
                Reply::text(&format!(
                    "Indeed, \"{}\" [s1], so I answer [s1].",
                    near.join(" ")
                ))
            }
            // Turn 3: quoting turn 1's words as spoken in the moot.
            5 => Reply::text(&format!(
                "You said \"and the sea speaks plainly of this\" [o1], yet \"{}\" [s1].",
                quote(0, 5)
            )),
            // Turn 4: an empty answer, then a clean reply.
            6 => Reply::NullContent,
            _ => Reply::text(&format!(
                "You said \"and the sea speaks plainly of this\" [o1]; \"{}\" [s1] closes the matter [s1].",
                quote(1, 5)
            )),
        }
    });
    let out = g
        .cmd(&[
            "moot",
            "run",
            "--a",
            "fiction/sea-tales",
            "--b",
            "essays/field-notes",
            "--topic",
            "the sea",
            "--turns",
            "4",
            "--json",
        ])
        .env("GROVE_MODEL__BACKEND", "openai")
        .env("GROVE_MODEL__URL", server.url())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let transcript: Value = serde_json::from_slice(&out.stdout).expect("the transcript as JSON");
    assert_eq!(*calls.lock().unwrap(), 7, "4 turns, 3 of them retried");
    let utterances = transcript["utterances"].as_array().unwrap();
    assert_eq!(utterances.len(), 4);
    let stats = &transcript["stats"];
    assert_eq!(stats["turns"], 4);
    assert_eq!(stats["retried_turns"], 3, "{stats}");
    assert_eq!(stats["grounded_turns"], 3, "{stats}");
    assert!(stats["quotes_snapped"].as_u64().unwrap() >= 1, "{stats}");
    // Turn 3 quotes its own book's turn 1; turn 4 quotes the other book's.
    assert_eq!(stats["self_quotes_found"], 1, "{stats}");
    assert_eq!(stats["other_quotes_found"], 1, "{stats}");
    assert_eq!(stats["tags_valid_rate"], 1.0, "{stats}");
    // The snapped turn shows the book's own words, not the misquote.
    assert!(!utterances[1]["text"].as_str().unwrap().contains("zzzword"));
    assert!(
        utterances[1]["raw_text"]
            .as_str()
            .unwrap()
            .contains("zzzword")
    );
    // Turns alternate between the books, each citing its own passages.
    assert_eq!(utterances[0]["speaker"], utterances[2]["speaker"]);
    assert_ne!(utterances[0]["speaker"], utterances[1]["speaker"]);
    // The transcript verifies offline, and against the local store.
    let file = g.write("moot.json", &out.stdout);
    let verified = g.json(&["moot", "verify", file.to_str().unwrap()]);
    assert_eq!(verified["ok"], true, "{verified}");
    // A tampered transcript does not.
    let tampered =
        String::from_utf8(out.stdout)
            .unwrap()
            .replacen("closes the matter", "opens the matter", 1);
    let file = g.write("tampered.json", tampered.as_bytes());
    let err = g.fails(&["moot", "verify", file.to_str().unwrap()]);
    assert!(err.contains("mismatch"), "{err}");
}

/// The embedded model (when installed: `GROVE_TEST_STATE`, as CI does) runs
/// a short moot through the real binary, and its transcript verifies.
#[test]
fn embedded_model_runs_a_short_moot() {
    let Some(state) = std::env::var_os("GROVE_TEST_STATE") else {
        crate::support::skip(
            "no embedded model (set GROVE_TEST_STATE to a state dir with models/)",
        );
        return;
    };
    let dir = grove::model::install::model_dir(std::path::Path::new(&state));
    let model = grove::model::install::default_model_file(&dir);
    if !model.is_file() {
        crate::support::skip(&format!("no model file at {}", model.display()));
        return;
    }
    let g = two_books(30);
    // Small turns keep a debug build's model run short.
    let out = g
        .cmd(&[
            "moot",
            "run",
            "--a",
            "fiction/sea-tales",
            "--b",
            "essays/field-notes",
            "--topic",
            "the sea",
            "--turns",
            "2",
            "-k",
            "2",
            "--max-tokens",
            "24",
            "--seed",
            "7",
            "--json",
        ])
        .env("GROVE_MODEL__PATH", &model)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let transcript: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(transcript["utterances"].as_array().unwrap().len(), 2);
    assert!(
        transcript["model"].to_string().contains("embedded"),
        "{}",
        transcript["model"]
    );
    let file = g.write("moot.json", &out.stdout);
    assert_eq!(
        g.json(&["moot", "verify", file.to_str().unwrap()])["ok"],
        true
    );
}
