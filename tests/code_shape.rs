//! The code's shape, checked so that it stays: no function over 80 lines in
//! `src/` or `crates/` (`extern "C"` ones too), no import circle between
//! the rooms (top-level modules) of a crate, every database opened by the
//! kit,
//! the state directory's layout spelled in `src/state_dir.rs` alone, and
//! private files and SQLite's errors in the kit (`src/db.rs`) alone
//! (docs/ARCHITECTURE.md, "Invariants"). The checks read the sources as rustfmt
//! writes them: a function's closing brace sits at its `fn` line's indent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest function allowed, from its `fn` line to its closing brace.
const MAX_FUNCTION_LINES: usize = 80;

/// The crates' source roots, from the repository's top.
const SOURCE_ROOTS: [&str; 2] = ["src", "crates/grove-core/src"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The name of a function a line opens, and its indent (None: no `fn`
/// item starts here, or it is a declaration without a body). Qualifiers
/// come in any order: `pub(crate) async fn`, `unsafe extern "C" fn`.
fn function_start(line: &str) -> Option<(usize, &str)> {
    const QUALIFIERS: [&str; 8] = [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "async ",
        "const ",
        "unsafe ",
        "extern \"C\" ",
        "extern ",
    ];
    let indent = line.len() - line.trim_start().len();
    let mut rest = line.trim_start();
    while let Some(q) = QUALIFIERS.iter().find(|q| rest.starts_with(*q)) {
        rest = &rest[q.len()..];
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    if end == 0 || line.trim_end().ends_with(';') {
        return None;
    }
    Some((indent, &name[..end]))
}

/// Functions over the limit in one file's text, as "path:line name (n lines)".
fn long_functions(path: &Path, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if let Some((indent, name)) = function_start(lines[i]) {
            let close = format!("{}}}", " ".repeat(indent));
            let end = (i + 1..lines.len())
                .find(|&j| lines[j].trim_end() == close)
                .unwrap_or(lines.len() - 1);
            let n = end - i + 1;
            if n > MAX_FUNCTION_LINES {
                out.push(format!("{}:{} {name} ({n} lines)", path.display(), i + 1));
            }
            i = end;
        }
        i += 1;
    }
    out
}

#[test]
fn no_function_is_longer_than_80_lines() {
    let mut long = Vec::new();
    let mut files = 0;
    for root in ["src", "crates"] {
        for path in rust_files(&repo().join(root)) {
            let text = std::fs::read_to_string(&path).unwrap();
            let rel = path.strip_prefix(repo()).unwrap();
            long.extend(long_functions(rel, &text));
            files += 1;
        }
    }
    assert!(files > 100, "only {files} source files found");
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The module path of a source file under its crate's root (`a/b.rs` and
/// `a/b/mod.rs` are `a::b`; `lib.rs` and `main.rs` the root); None for the
/// binaries under `bin/`, which are crates of their own.
fn module_of(root: &Path, path: &Path) -> Option<Vec<String>> {
    let rel = path.strip_prefix(root).ok()?.with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    if parts
        .last()
        .is_some_and(|p| p == "mod" || p == "lib" || p == "main")
    {
        parts.pop();
    }
    Some(parts)
}

/// The line ranges of a file's inline modules (`mod name {` to the brace
/// at its indent), where `super::` names the file's own module first.
fn inline_modules(code: &str) -> Vec<(usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let t = t.strip_prefix("pub ").unwrap_or(t);
        if t.starts_with("mod ") && t.trim_end().ends_with('{') {
            let close = format!("{}}}", &line[..line.len() - line.trim_start().len()]);
            let end = (i + 1..lines.len()).find(|&j| lines[j].trim_end() == close);
            out.push((i, end.unwrap_or(lines.len())));
        }
    }
    out
}

/// The `crate::…` and `super::…` paths a file's non-test code names, each
/// with the depth of inline modules it sits in.
fn paths_named(text: &str) -> Vec<(usize, Vec<String>)> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let inline = inline_modules(code);
    let in_path = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
    let mut out = Vec::new();
    for word in ["crate::", "super::"] {
        for (at, _) in code.match_indices(word) {
            // Not the tail of a longer path (`super::super::x` is read once).
            if code[..at].chars().next_back().is_some_and(in_path) {
                continue;
            }
            let end = code[at..]
                .find(|c| !in_path(c))
                .map_or(code.len(), |i| at + i);
            let line = code[..at].matches('\n').count();
            let depth = inline
                .iter()
                .filter(|(a, b)| *a < line && line < *b)
                .count();
            let path = code[at..end].split("::").filter(|s| !s.is_empty());
            out.push((depth, path.map(str::to_string).collect()));
        }
    }
    out
}

/// The module a path names, resolved from module `from` (a file that is a
/// `mod.rs` or `lib.rs` counts as its own folder's module); `depth` inline
/// modules deep, the first `depth` supers stay in the file.
fn target_of(
    from: &[String],
    depth: usize,
    path: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Vec<String> {
    let supers = path.iter().take_while(|p| *p == "super").count();
    if path.first().is_some_and(|p| p == "super") && supers <= depth {
        return from.to_vec();
    }
    let skip = if path.first().is_some_and(|p| p == "super") {
        depth
    } else {
        0
    };
    let path = &path[skip..];
    let (mut base, mut rest) = match path.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &path[1..]),
        _ => (from[..from.len().saturating_sub(1)].to_vec(), &path[1..]),
    };
    while rest.first().is_some_and(|p| p == "super") {
        base.pop();
        rest = &rest[1..];
    }
    for part in rest {
        let mut next = base.clone();
        next.push(part.clone());
        if !modules.contains(&next) {
            break;
        }
        base = next;
    }
    base
}

/// The import graph of one crate between its rooms, its top-level
/// modules: each room to the rooms its files name. A room's own modules
/// import each other freely; the crate's root (`lib.rs`, `main.rs`) holds
/// the rooms and is left out.
fn import_graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let files: Vec<(Vec<String>, PathBuf)> = rust_files(root)
        .into_iter()
        .filter_map(|p| Some((module_of(root, &p)?, p)))
        .filter(|(m, _)| m.last().is_none_or(|l| l != "tests"))
        .collect();
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, path) in &files {
        let Some(room) = module.first() else { continue };
        let text = std::fs::read_to_string(path).unwrap();
        let edges = graph.entry(room.clone()).or_default();
        for (depth, named) in paths_named(&text) {
            let target = target_of(module, depth, &named, &modules);
            if let Some(to) = target.first()
                && to != room
            {
                edges.insert(to.clone());
            }
        }
    }
    graph
}

/// The strongly connected parts of a graph with more than one module.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(m) = stack.pop() {
            for next in graph.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut placed = BTreeSet::new();
    for (m, from_m) in &reached {
        if placed.contains(*m) || !from_m.contains(*m) {
            continue;
        }
        let circle: Vec<String> = from_m
            .iter()
            .filter(|o| reached.get(o).is_some_and(|r| r.contains(*m)))
            .map(|o| {
                placed.insert(o.clone());
                o.clone()
            })
            .collect();
        out.push(circle);
    }
    out
}

#[test]
fn no_modules_import_each_other_in_a_circle() {
    let mut found = Vec::new();
    for root in SOURCE_ROOTS {
        let graph = import_graph(&repo().join(root));
        assert!(!graph.is_empty(), "{root}: no modules found");
        for circle in circles(&graph) {
            found.push(format!("{root}: {}", circle.join(" -> ")));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

/// The names inside a state directory, as a path join or format would
/// spell them.
const STATE_DIR_NAMES: [&str; 10] = [
    "\"grove.sock\"",
    "\"mesh.db\"",
    "\"node.db\"",
    "\"mesh.lock\"",
    "join(\"http.token\")",
    "join(\"identity\")",
    "join(\"shards\")",
    "join(\"moots\")",
    "join(\"models\")",
    "\"shards/{",
];

/// The lines of `text` outside comments that spell one of `names`.
fn spellings(text: &str, names: &[&str]) -> Vec<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .filter(|l| names.iter().any(|n| l.contains(n)))
        .map(|l| l.trim().to_string())
        .collect()
}

/// Fails naming every line of `src/` outside `homes` (files or folders)
/// and outside unit tests (which build what they test in temporary
/// directories) that spells one of `names`, which are `what`.
fn assert_spelled_only_in(homes: &[&str], names: &[&str], what: &str) {
    let mut found = Vec::new();
    for path in rust_files(&repo().join("src")) {
        if homes.iter().any(|home| path.starts_with(repo().join(home))) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        for line in spellings(text, names) {
            found.push(format!("{}: {line}", path.display()));
        }
    }
    assert!(
        found.is_empty(),
        "{what} outside {}:\n{}",
        homes.join(", "),
        found.join("\n")
    );
}

#[test]
fn the_state_directory_layout_is_spelled_in_one_file() {
    assert_spelled_only_in(
        &["src/state_dir.rs"],
        &STATE_DIR_NAMES,
        "state-directory names",
    );
}

/// What only the kit (`src/db.rs`) spells: the private file's mode, and
/// SQLite's error as an error's own case or source.
const KIT_ONLY: [&str; 3] = [
    ".mode(0o600)",
    "#[from] rusqlite::Error",
    "source: rusqlite::Error",
];

#[test]
fn private_files_and_storage_errors_are_the_kits() {
    let what = "a private file's mode or an SQLite error of an error's own \
                (the kit has write_private and StorageError)";
    assert_spelled_only_in(&["src/db.rs"], &KIT_ONLY, what);
}

/// Opening an SQLite file: only the kit does (`db::open`, `open_read_only`,
/// `snapshot`); the benchmarks' bare FTS5 insert, which ingest is compared
/// with, opens its own.
const KIT_OPENS: [&str; 2] = ["Connection::open(", "Connection::open_with_flags("];

#[test]
fn every_database_is_opened_through_the_kit() {
    let what = "a database opened past the kit (db::open, db::open_read_only, db::snapshot)";
    assert_spelled_only_in(&["src/db.rs", "src/bin"], &KIT_OPENS, what);
}

#[test]
fn the_checks_see_what_they_look_for() {
    assert_eq!(
        spellings(
            "let p = dir.join(\"mesh.db\");\n// \"mesh.db\"\n",
            &STATE_DIR_NAMES
        ),
        ["let p = dir.join(\"mesh.db\");"]
    );
    let long = format!("fn long() {{\n{}}}\n", "    x();\n".repeat(80));
    assert_eq!(long_functions(Path::new("f.rs"), &long).len(), 1);
    let short = format!(
        "    pub async fn short() {{\n{}    }}\n",
        "        x();\n".repeat(78)
    );
    assert!(long_functions(Path::new("f.rs"), &short).is_empty());
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["a".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
    ]
    .into();
    assert_eq!(
        circles(&graph),
        vec![vec!["a".to_string(), "b".to_string()]]
    );
    let modules = BTreeSet::from([vec!["net".to_string()], vec!["net".into(), "reach".into()]]);
    let named = paths_named("use super::reach::Reach;\nfn f() { crate::net::reach::x(); }");
    let from = vec!["net".to_string(), "punch".to_string()];
    for (depth, path) in &named {
        assert_eq!(
            target_of(&from, *depth, path, &modules),
            vec!["net".to_string(), "reach".into()]
        );
    }
    assert_eq!(named.len(), 2);
    // Inside an inline module, `super::` is the file's own module.
    let inline = paths_named("pub mod a {\n}\npub mod b {\n    use super::a::X;\n}\n");
    assert_eq!(
        inline,
        vec![(1, vec!["super".to_string(), "a".into(), "X".into()])]
    );
    let wire = vec!["wire".to_string()];
    assert_eq!(target_of(&wire, 1, &inline[0].1, &modules), wire);
    // `extern "C"` functions are functions.
    let ffi = format!(
        "unsafe extern \"C\" fn rank(x: i32) -> i32 {{\n{}}}\n",
        "    x();\n".repeat(80)
    );
    assert_eq!(long_functions(Path::new("f.rs"), &ffi).len(), 1);
}

/// A circle planted between two rooms of a small crate in
/// `tests/data/code_shape/planted` (`a` names `b` from a sub-module, `b`
/// names `a` back) is found; its room `c`, named by both, is not in it.
#[test]
fn a_circle_between_rooms_is_caught() {
    let root = repo().join("tests/data/code_shape/planted/src");
    let graph = import_graph(&root);
    assert_eq!(graph.len(), 3, "{graph:?}");
    assert_eq!(
        circles(&graph),
        vec![vec!["a".to_string(), "b".to_string()]],
        "{graph:?}"
    );
}

/// What `docs/ARCHITECTURE.md` says this file enforces, each with the test
/// that does: a claim without its test, or a test the document does not
/// claim, fails here, so the document and the checks change together.
const CLAIMS: [(&str, &str); 6] = [
    (
        "no function over 80 lines in `src/` or `crates/`",
        "no_function_is_longer_than_80_lines",
    ),
    (
        "collapses each room into one node, and\nfinds no circle",
        "no_modules_import_each_other_in_a_circle",
    ),
    (
        "a circle planted in `tests/data/code_shape/planted` is\ncaught",
        "a_circle_between_rooms_is_caught",
    ),
    (
        "`tests/code_shape.rs` finds no state-directory\nname spelled outside `src/state_dir.rs`",
        "the_state_directory_layout_is_spelled_in_one_file",
    ),
    (
        "`tests/code_shape.rs` finds no private file\nmode and no `rusqlite::Error` of an error's own outside `src/db.rs`",
        "private_files_and_storage_errors_are_the_kits",
    ),
    (
        "`tests/code_shape.rs` finds no\n`Connection::open` outside `src/db.rs`",
        "every_database_is_opened_through_the_kit",
    ),
];

#[test]
fn the_architecture_claims_what_this_file_checks() {
    let doc = std::fs::read_to_string(repo().join("docs/ARCHITECTURE.md")).unwrap();
    // Line breaks in the document are white space like any other.
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let doc = flat(&doc);
    let this = std::fs::read_to_string(repo().join("tests/code_shape.rs")).unwrap();
    for (claim, test) in CLAIMS {
        assert!(
            doc.contains(&flat(claim)),
            "ARCHITECTURE.md no longer says: {claim}"
        );
        assert!(
            this.contains(&format!("fn {test}()")),
            "the claim `{claim}` names no test here: {test}"
        );
    }
    // Every test of this file but the self-checks is claimed.
    let tests: Vec<&str> = this
        .split("#[test]\nfn ")
        .skip(1)
        .filter_map(|rest| rest.split('(').next())
        .collect();
    assert!(tests.len() >= CLAIMS.len() + 2, "tests found: {tests:?}");
    for test in tests {
        let own = [
            "the_checks_see_what_they_look_for",
            "the_architecture_claims_what_this_file_checks",
        ];
        assert!(
            own.contains(&test) || CLAIMS.iter().any(|(_, t)| *t == test),
            "ARCHITECTURE.md claims nothing for the check {test}"
        );
    }
}
