//! docs/cli-json.md stays true: every command's real `--json` output has the
//! same fields (recursively) as an example in the document.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::support::{Grove, generated_book};

/// The field paths of a JSON value: `a`, `a.b`, `a[].c` (first array element).
fn shape(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(path.clone());
                // `node stats` counters: a map whose keys vary with traffic;
                // a moot's transcript: its format is in docs/moot.md.
                if k != "counters" && k != "transcript" {
                    shape(v, &path, out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(first) = items.first() {
                shape(first, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

pub fn shape_of(v: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    shape(v, "", &mut out);
    out
}

pub fn documented_shapes() -> Vec<BTreeSet<String>> {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli-json.md")).unwrap();
    doc.split("```json")
        .skip(1)
        .map(|block| {
            let body = block.split("```").next().unwrap();
            let v: Value = serde_json::from_str(body)
                .unwrap_or_else(|e| panic!("bad JSON in docs: {e}\n{body}"));
            shape_of(&v)
        })
        .collect()
}

#[test]
fn every_json_output_matches_a_documented_example() {
    let docs = documented_shapes();
    let g = Grove::new();
    let book = g.write(
        "b.txt",
        generated_book("Doc Book", "D", 1, 30, 1).as_bytes(),
    );
    let outputs = [
        (
            "book add",
            g.json(&[
                "book",
                "add",
                book.to_str().unwrap(),
                "--key",
                "fiction/doc",
            ]),
        ),
        ("book list", g.json(&["book", "list"])),
        ("book show", g.json(&["book", "show", "fiction/doc"])),
        ("book proof", g.json(&["book", "proof", "fiction/doc", "1"])),
        (
            "book search",
            g.json(&["book", "search", "sea whale", "-k", "2"]),
        ),
        ("book verify", g.json(&["book", "verify", "fiction/doc"])),
        ("shard list", g.json(&["shard", "list"])),
        ("audit verify", g.json(&["audit", "verify"])),
        ("book remove", g.json(&["book", "remove", "fiction/doc"])),
        ("shard compact", g.json(&["shard", "compact"])),
        ("identity show", g.json(&["identity", "show"])),
        (
            "mesh init (offline)",
            g.json(&["mesh", "init", "--name", "doc-mesh"]),
        ),
        (
            "backup",
            g.json(&["backup", g.dir.path().join("bk").to_str().unwrap()]),
        ),
    ];
    let daemon_outputs = daemon_outputs();
    let check = g
        .cmd(&["moot", "check", "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            let input = r#"{"reply":"\"The whale rose from the sea\" [s1].","passages":[{"tag":"s1","content":"The whale rose from the sea at dawn."}],"pool":[{"tag":"s1","content":"The whale rose from the sea at dawn."}],"others":{},"own":{}}"#;
            child.stdin.take().unwrap().write_all(input.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(check.status.success());
    let outputs = outputs
        .into_iter()
        .chain(daemon_outputs)
        .chain([("moot check", serde_json::from_slice(&check.stdout).unwrap())]);
    for (name, out) in outputs {
        let got = shape_of(&out);
        assert!(
            docs.contains(&got),
            "`grove {name} --json` has fields {got:?}, which no example in docs/cli-json.md has"
        );
    }
}

/// The commands that need a running daemon: two nodes forming a mesh.
fn daemon_outputs() -> Vec<(&'static str, Value)> {
    use crate::cluster::{Daemon, eventually};
    let a = Daemon::start("doc-a");
    let b = Daemon::start("doc-b");
    a.add_book(7);
    let mut out = vec![
        ("identity show (daemon)", a.json(&["identity", "show"])),
        ("mesh init", a.json(&["mesh", "init", "--name", "doc"])),
        ("mesh proposals (none)", a.json(&["mesh", "proposals"])),
    ];
    let invite = a.json(&["mesh", "invite", "--ttl", "2h", "--note", "doc"]);
    let text = invite["invite"].as_str().unwrap().to_string();
    out.push(("mesh invite", invite));
    let spare = a.json(&["mesh", "invite"]);
    out.push(("mesh invite list", a.json(&["mesh", "invite", "list"])));
    out.push((
        "mesh invite revoke",
        a.json(&["mesh", "invite", "revoke", spare["id"].as_str().unwrap()]),
    ));
    out.push(("mesh join", b.json(&["mesh", "join", &text])));
    let proposed = a.json(&["mesh", "propose", "rotate"]);
    out.push(("mesh propose", proposed.clone()));
    out.push(("mesh status (open proposal)", a.json(&["mesh", "status"])));
    out.push(("mesh proposals", a.json(&["mesh", "proposals"])));
    let id = proposed["id"].as_str().unwrap().to_string();
    eventually("B to see the rotate proposal", || {
        b.json(&["mesh", "proposals"])["proposals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["id"] == id.as_str())
    });
    out.push(("mesh vote", b.json(&["mesh", "vote", &id, "yes"])));
    eventually("B to see A's roots", || {
        b.json(&["roots"])["roots"].as_array().unwrap().len() == 2
    });
    out.push(("mesh status", b.json(&["mesh", "status"])));
    out.push(("peers", b.json(&["peers"])));
    out.push(("roots", b.json(&["roots"])));
    out.push(("node stats", b.json(&["node", "stats"])));
    out.push((
        "book search --mesh",
        b.json(&["book", "search", "sea whale", "-k", "2", "--mesh"]),
    ));
    out
}

/// Every `src/…` path `docs/ARCHITECTURE.md` names exists (in the root
/// crate, or under `crates/NAME/` where it says so), so the code map cannot
/// drift from the tree unnoticed.
#[test]
fn every_source_path_the_architecture_names_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let re = regex::Regex::new(r"(crates/[a-z-]+/)?src/[A-Za-z0-9_\-./]*[A-Za-z0-9_/]").unwrap();
    let mut named = std::collections::BTreeSet::new();
    for m in re.find_iter(&doc) {
        named.insert(m.as_str().trim_end_matches('/').to_string());
    }
    assert!(named.len() > 25, "the code map names {} paths", named.len());
    let missing: Vec<&String> = named.iter().filter(|p| !root.join(p).exists()).collect();
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
}

/// Each control path is spelled once, in `src/api/routes.rs`: no other
/// source file names a `"/v1/…` literal outside its tests.
#[test]
fn control_paths_are_spelled_only_in_the_routes_module() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    let mut dirs = vec![root.join("src"), root.join("crates")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("src/api/routes.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for (n, line) in code.lines().enumerate() {
                if line.contains("\"/v1/") {
                    found.push(format!("{}:{}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "control paths spelled outside src/api/routes.rs: {found:?}"
    );
}
