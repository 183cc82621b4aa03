//! Search across books ranks like one index: `grove book search` (no key;
//! several books in two shards of one store) against a reference FTS5 table
//! the test builds itself over every chunk of the searched books: same top-k
//! node ids in the same order, scores equal to within 1e-9 relative. Books
//! the test generates, and the real books of `tests/data/corpus`.

use std::path::Path;

use rusqlite::Connection;
use serde_json::Value;

use crate::support::{Grove, data_dir};

/// The tokenizer grove's indexes are documented to use (docs/search.md).
const TOKENIZE: &str = "porter unicode61 remove_diacritics 2";

/// One index over every current chunk of every shard of `state`, rowids in
/// (key, index) order, so ties break as grove breaks them; and the node id
/// of each rowid.
struct Reference {
    conn: Connection,
    node_ids: Vec<String>,
    texts: Vec<String>,
}

impl Reference {
    fn build(state: &Path) -> Reference {
        Reference::build_many(&[state.to_path_buf()])
    }

    /// One index over the current chunks of every shard of these stores.
    fn build_many(states: &[std::path::PathBuf]) -> Reference {
        let mut chunks: Vec<(String, i64, String)> = Vec::new();
        for entry in states
            .iter()
            .flat_map(|s| std::fs::read_dir(s.join("shards")).expect("shards dir"))
        {
            let path = entry.expect("entry").path();
            if path.extension().is_none_or(|e| e != "db") {
                continue;
            }
            let shard = Connection::open(&path).expect("open shard");
            let mut stmt = shard
                .prepare(
                    "SELECT b.key, c.idx, c.text FROM chunks c JOIN books b ON b.id = c.book_id
                     WHERE b.status = 'current'",
                )
                .unwrap();
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap();
            chunks.extend(rows.map(Result::unwrap));
        }
        chunks.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!(
            "CREATE VIRTUAL TABLE ref USING fts5 (text, tokenize = '{TOKENIZE}')"
        ))
        .unwrap();
        {
            let mut insert = conn
                .prepare("INSERT INTO ref (rowid, text) VALUES (?1, ?2)")
                .unwrap();
            for (i, (_, _, text)) in chunks.iter().enumerate() {
                insert.execute(rusqlite::params![i as i64, text]).unwrap();
            }
        }
        Reference {
            conn,
            node_ids: chunks.iter().map(|(k, i, _)| format!("{k}#{i}")).collect(),
            texts: chunks.into_iter().map(|(_, _, t)| t).collect(),
        }
    }

    fn count(&self, fts_query: &str) -> u64 {
        self.conn
            .query_row(
                "SELECT count(*) FROM ref WHERE ref MATCH ?1",
                [fts_query],
                |r| r.get::<_, i64>(0),
            )
            .unwrap() as u64
    }

    /// The reference's top `k`: FTS5's own `bm25()` over the one table.
    fn top(&self, fts_query: &str, k: usize) -> Vec<(String, f64)> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT rowid, -bm25(ref) FROM ref WHERE ref MATCH ?1 ORDER BY rank, rowid LIMIT ?2",
            )
            .unwrap();
        stmt.query_map(rusqlite::params![fts_query, k as i64], |r| {
            Ok((
                self.node_ids[r.get::<_, i64>(0)? as usize].clone(),
                r.get(1)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    }
}

fn all_words(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| format!("\"{w}\""))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// `grove book search` as (node id, score), best first.
fn grove_top(g: &Grove, query: &str, k: usize, key: Option<&str>) -> Vec<(String, f64)> {
    let k = k.to_string();
    let mut args = vec!["book", "search", query, "-k", &k];
    if let Some(key) = key {
        args.extend(["--key", key]);
    }
    let out: Value = g.json(&args);
    out["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| {
            (
                h["node_id"].as_str().unwrap().to_string(),
                h["score"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn assert_same(query: &str, want: &[(String, f64)], got: &[(String, f64)]) {
    let ids = |v: &[(String, f64)]| v.iter().map(|h| h.0.clone()).collect::<Vec<_>>();
    assert_eq!(ids(got), ids(want), "query {query:?}: node ids differ");
    for ((id, w), (_, g)) in want.iter().zip(got) {
        assert!(
            (w - g).abs() <= 1e-9 * w.abs(),
            "query {query:?}, {id}: score {g} differs from the reference {w}"
        );
    }
}

/// A small deterministic generator (the same LCG the support books use).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }
}

/// A generated text whose word frequencies are its own: every book
/// draws from one vocabulary of 240 words, each book in a different order
/// of likelihood, so a word common in one book is rare in another (what
/// makes ranking by each book's own statistics differ from one index).
fn themed_book(book: u64, paragraphs: usize) -> String {
    const SYLLABLES: &[&str] = &[
        "ka", "lo", "mi", "ren", "sa", "tor", "vel", "an", "dri", "es", "po", "quin",
    ];
    let vocab: Vec<String> = (0..240)
        .map(|i| {
            let mut w = String::new();
            let mut x = i + 13;
            for _ in 0..2 + i % 2 {
                w.push_str(SYLLABLES[x % SYLLABLES.len()]);
                x = x / SYLLABLES.len() + 5;
            }
            w
        })
        .collect();
    let mut rng = Lcg(book * 7919 + 1);
    // This book's order of likelihood: a shuffle of the vocabulary.
    let mut order: Vec<usize> = (0..vocab.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.next() % (i + 1));
    }
    // Plain paragraphs, no header or markers: marker-less text is all body.
    let mut out = String::new();
    for _ in 0..paragraphs {
        let n = 40 + rng.next() % 160;
        let words: Vec<&str> = (0..n)
            .map(|_| {
                // Zipf-like: rank = 240^u.
                let u = (rng.next() % 10_000) as f64 / 10_000.0;
                let rank = (240f64.powf(u) as usize).saturating_sub(1).min(239);
                vocab[order[rank]].as_str()
            })
            .collect();
        for line in words.chunks(11) {
            out.push_str(&line.join(" "));
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

/// Queries of one to three words taken from the reference's chunks (so
/// they match), kept when every word together finds at least `k` chunks.
fn queries(reference: &Reference, k: usize, wanted: usize, seed: u64) -> Vec<String> {
    let mut rng = Lcg(seed);
    let mut out: Vec<String> = Vec::new();
    for _ in 0..wanted * 40 {
        if out.len() == wanted {
            break;
        }
        let text = &reference.texts[rng.next() % reference.texts.len()];
        let words: Vec<&str> = text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() > 2 && w.chars().all(|c| c.is_ascii_alphanumeric()))
            .collect();
        if words.is_empty() {
            continue;
        }
        let n = 1 + rng.next() % 3;
        let picked: Vec<String> = (0..n)
            .map(|_| words[rng.next() % words.len()].to_lowercase())
            .collect();
        let mut unique: Vec<&str> = Vec::new();
        for w in &picked {
            if !unique.contains(&w.as_str()) {
                unique.push(w);
            }
        }
        let query = unique.join(" ");
        if !out.contains(&query) && reference.count(&all_words(&unique)) >= k as u64 {
            out.push(query);
        }
    }
    assert_eq!(out.len(), wanted, "not enough queries with {k} hits");
    out
}

/// Checks `wanted` queries at each k against the reference.
fn check_against_reference(g: &Grove, reference: &Reference, wanted: usize, seed: u64) -> usize {
    let mut checked = 0;
    for (k, seed) in [(6usize, seed), (3, seed + 1), (20, seed + 2)] {
        let n = if k == 6 { wanted } else { wanted / 3 };
        for query in queries(reference, k, n, seed) {
            let words: Vec<&str> = query.split(' ').collect();
            let want = reference.top(&all_words(&words), k);
            assert_eq!(want.len(), k);
            assert_same(&query, &want, &grove_top(g, &query, k, None));
            checked += 1;
        }
    }
    checked
}

fn add(g: &Grove, name: &str, text: &str, key: &str, shard: &str) {
    let path = g.write(name, text.as_bytes());
    g.ok(&[
        "book",
        "add",
        path.to_str().unwrap(),
        "--key",
        key,
        "--shard",
        shard,
    ]);
}

#[test]
fn search_across_books_ranks_like_one_index() {
    let g = Grove::new();
    for b in 0..6u64 {
        let shard = if b < 4 { "main" } else { "second" };
        add(
            &g,
            &format!("b{b}.txt"),
            &themed_book(b, 40 + 25 * b as usize),
            &format!("themed/book-{b}"),
            shard,
        );
    }
    // Words the tokenizer treats specially: diacritics folded, a script
    // whose vowel signs cut a word into several terms, a long word.
    let long = "z".repeat(300);
    let mut odd = themed_book(9, 30);
    let lines: String = (0..24)
        .map(|i| {
            format!(
                "Café crème, naïve straße; हिन्दी भाषा {long} {}\n\n",
                if i % 2 == 0 { "cafe" } else { "NAIVE" }
            )
        })
        .collect();
    odd.push_str(&lines);
    add(&g, "odd.txt", &odd, "themed/odd", "main");
    let reference = Reference::build(&g.state());
    let checked = check_against_reference(&g, &reference, 30, 11);
    assert!(checked >= 30);
    for query in ["Café crème", "naive", "हिन्दी", "भाषा straße", &long] {
        // The documented query words: runs of letters and digits, lowercased.
        let words: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let fts_query = all_words(&words);
        let k = reference.count(&fts_query).min(3) as usize;
        assert!(k > 0, "{query:?} ({fts_query}) finds nothing");
        assert_same(
            query,
            &reference.top(&fts_query, k),
            &grove_top(&g, query, k, None),
        );
    }

    // The fallback is decided once for the collection: a query whose words
    // never meet finds the rarest words (by the collection's counts) or
    // every word.
    let absent = "qqqnowhere";
    for query in queries(&reference, 1, 4, 99) {
        let mut words: Vec<&str> = query.split(' ').collect();
        words.push(absent);
        let k = 6;
        let mut counted: Vec<(u64, String)> = words
            .iter()
            .map(|w| (reference.count(&format!("\"{w}\"")), w.to_string()))
            .filter(|(n, _)| *n > 0)
            .collect();
        counted.sort();
        let rare: Vec<String> = counted.into_iter().take(3).map(|(_, w)| w).collect();
        let fallback = format!(
            "{} OR ({})",
            rare.iter()
                .map(|w| format!("\"{w}\""))
                .collect::<Vec<_>>()
                .join(" OR "),
            all_words(&words)
        );
        let with_absent = words.join(" ");
        assert_same(
            &with_absent,
            &reference.top(&fallback, k),
            &grove_top(&g, &with_absent, k, None),
        );
    }

    // A book-scoped search keeps ranking by its own book, as one index over
    // that book alone does.
    let key = "themed/book-2";
    let mut book = Reference {
        conn: Connection::open_in_memory().unwrap(),
        node_ids: Vec::new(),
        texts: Vec::new(),
    };
    book.conn
        .execute_batch(&format!(
            "CREATE VIRTUAL TABLE ref USING fts5 (text, tokenize = '{TOKENIZE}')"
        ))
        .unwrap();
    for (id, text) in reference.node_ids.iter().zip(&reference.texts) {
        if id.starts_with(&format!("{key}#")) {
            book.conn
                .execute(
                    "INSERT INTO ref (rowid, text) VALUES (?1, ?2)",
                    rusqlite::params![book.node_ids.len() as i64, text],
                )
                .unwrap();
            book.node_ids.push(id.clone());
            book.texts.push(text.clone());
        }
    }
    for query in queries(&book, 6, 5, 5) {
        let words: Vec<&str> = query.split(' ').collect();
        assert_same(
            &query,
            &book.top(&all_words(&words), 6),
            &grove_top(&g, &query, 6, Some(key)),
        );
    }
}

#[test]
fn search_across_corpus_books_ranks_like_one_index() {
    let corpus = data_dir().join("corpus");
    let g = Grove::new();
    let mut files: Vec<_> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no books in {}", corpus.display());
    for (i, f) in files.iter().enumerate() {
        let shard = if i % 2 == 0 { "main" } else { "second" };
        g.ok(&["book", "add", f.to_str().unwrap(), "--shard", shard]);
    }
    add(&g, "t.txt", &themed_book(1, 60), "themed/one", "main");
    let reference = Reference::build(&g.state());
    // The issue's own example first.
    let want = reference.top(&all_words(&["white", "whale"]), 3);
    if want.len() == 3 {
        assert_same("white whale", &want, &grove_top(&g, "white whale", 3, None));
    }
    let checked = check_against_reference(&g, &reference, 30, 23);
    assert!(checked >= 30);
}

/// A mesh of three daemons, two themed books on each, formed by invite.
fn three_node_mesh() -> Vec<crate::cluster::Daemon> {
    use crate::cluster::{Daemon, converged, invite, vote_yes};
    let nodes: Vec<Daemon> = ["alpha", "bravo", "charlie"]
        .iter()
        .map(|n| Daemon::start(n))
        .collect();
    for (i, n) in nodes.iter().enumerate() {
        for j in 0..2u64 {
            let b = i as u64 * 2 + j;
            let path = n.g.write(
                &format!("b{b}.txt"),
                themed_book(b, 40 + 20 * b as usize).as_bytes(),
            );
            n.ok(&[
                "book",
                "add",
                path.to_str().unwrap(),
                "--key",
                &format!("themed/book-{b}"),
            ]);
        }
    }
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    a.ok(&["mesh", "init", "--name", "search-mesh"]);
    let joined = b.json(&["mesh", "join", &invite(a)]);
    assert_eq!(joined["state"], "joined", "{joined}");
    c.json(&["mesh", "join", &invite(a)]);
    vote_yes(b, "add");
    converged(&[a, b, c], 2);
    nodes
}

fn mesh_top(d: &crate::cluster::Daemon, query: &str, k: usize) -> (Vec<(String, f64)>, Value) {
    let out = d.json(&["book", "search", query, "-k", &k.to_string(), "--mesh"]);
    let hits = out["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| {
            (
                h["node_id"].as_str().unwrap().to_string(),
                h["score"].as_f64().unwrap(),
            )
        })
        .collect();
    (hits, out["errors"].clone())
}

/// Waits until `d`'s mesh search hears from every other member without an
/// error (their roots announced, so their hits prove).
fn until_every_member_answers(d: &crate::cluster::Daemon, query: &str) {
    // Polled once a second: faster would meet the members' rate limit.
    let start = std::time::Instant::now();
    loop {
        let (hits, errors) = mesh_top(d, query, 1000);
        let books: std::collections::BTreeSet<&str> = hits
            .iter()
            .map(|(id, _)| id.split('#').next().unwrap())
            .collect();
        if errors.as_array().is_none_or(|e| e.is_empty()) && books.len() == 6 {
            return;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(90),
            "members' hits never all proved: books {books:?}, errors {errors}"
        );
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

#[test]
fn mesh_search_ranks_like_one_index_and_drops_hits_that_fail_their_proof() {
    let mut nodes = three_node_mesh();
    let states: Vec<std::path::PathBuf> = nodes.iter().map(|n| n.g.state()).collect();
    let reference = Reference::build_many(&states);
    // A word every themed book holds, so every member has hits.
    let common = queries(&reference, 40, 1, 5).remove(0);
    // Every member admits every other's connection as a member's (what
    // deploy/mesh.sh waits for before the demo's search).
    let ids: Vec<String> = nodes.iter().map(|n| n.peer_id()).collect();
    crate::cluster::eventually("every member admitted both ways", || {
        nodes.iter().all(|n| {
            let peers = n.json(&["peers"]);
            let me = n.peer_id();
            ids.iter().filter(|id| **id != me).all(|id| {
                peers["peers"].as_array().unwrap().iter().any(|p| {
                    p["peer_id"] == id.as_str() && p["connected"] == true && p["admitted"] == true
                })
            })
        })
    });
    // Every node searches below: each must have every other's roots.
    for node in &nodes {
        until_every_member_answers(node, &common);
    }
    let mut checked = 0;
    for (k, seed) in [(6usize, 21u64), (3, 22), (20, 23)] {
        let n = if k == 6 { 20 } else { 6 };
        for (i, query) in queries(&reference, k, n, seed).into_iter().enumerate() {
            let words: Vec<&str> = query.split(' ').collect();
            let want = reference.top(&all_words(&words), k);
            // From every node alike.
            let (got, errors) = mesh_top(&nodes[i % 3], &query, k);
            assert!(
                errors.as_array().is_none_or(|e| e.is_empty()),
                "query {query:?}: {errors}"
            );
            assert_same(&query, &want, &got);
            checked += 1;
        }
    }
    assert!(checked >= 30);

    // Bravo answers with altered text: its hits are dropped, each named
    // under `errors` with the reason; the others' hits are shown.
    let bravo_addr: libp2p::Multiaddr = nodes[1].json(&["node", "status"])["listen"][0]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let alpha_addr: libp2p::Multiaddr = nodes[0].json(&["node", "status"])["listen"][0]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let alpha: libp2p::PeerId = nodes[0].peer_id().parse().unwrap();
    nodes[1].stop();
    // An in-process node with bravo's key on bravo's address answers from
    // bravo's store, honestly ranked and proven, but with every hit's text
    // altered.
    let store = std::sync::Mutex::new(grove::store::Store::new(&nodes[1].g.state()));
    let _impostor = crate::support::StandIn::start(
        &nodes[1].g.state(),
        bravo_addr,
        alpha,
        alpha_addr,
        move |protocol, data| {
            use prost::Message;
            if protocol != grove::net::Protocol::Search {
                return Vec::new();
            }
            let call = grove::wire::node::SearchCall::decode(data).unwrap();
            altered_answer(&mut store.lock().unwrap(), call).encode_to_vec()
        },
    );
    let mut shown = Value::Null;
    crate::cluster::eventually("the altered hits to be dropped", || {
        shown = nodes[0].json(&["book", "search", &common, "-k", "50", "--mesh"]);
        shown["errors"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e.as_str().unwrap().contains("dropped")))
    });
    let errors = shown["errors"].to_string();
    assert!(errors.contains("does not hash to its leaf"), "{errors}");
    for h in shown["hits"].as_array().unwrap() {
        let key = h["key"].as_str().unwrap();
        assert!(
            !["themed/book-2", "themed/book-3"].contains(&key),
            "an altered hit of bravo's book was shown: {h}"
        );
        assert!(!h["content"].as_str().unwrap().contains("ALTERED"));
    }
    assert!(!shown["hits"].as_array().unwrap().is_empty());
}

/// Round 1 answered honestly; round 2's hits honest but for their text.
fn altered_answer(
    store: &mut grove::store::Store,
    call: grove::wire::node::SearchCall,
) -> grove::wire::node::SearchAnswer {
    use grove::wire::node as wire;
    let k = call.k as usize;
    if call.stats_only {
        let s = store.query_stats(&call.query, k).unwrap();
        return wire::SearchAnswer {
            stats: Some(wire::QueryStats {
                words: s.words,
                chunks: s.chunks,
                tokens: s.tokens,
                word_chunks: s.word_chunks,
                all_words: s.all_words,
            }),
            max_k: 1000,
            ..Default::default()
        };
    }
    let s = call.stats.unwrap();
    let stats = grove::store::QueryStats {
        words: s.words,
        chunks: s.chunks,
        tokens: s.tokens,
        word_chunks: s.word_chunks,
        all_words: s.all_words,
    };
    let hits = store.search_ranked(&call.query, &stats, k).unwrap();
    wire::SearchAnswer {
        hits: hits
            .into_iter()
            .map(|h| {
                let shard = store.shard_of(&h.key).unwrap();
                let book = shard.book(&h.key, Some(h.version)).unwrap();
                let proof = shard.proof(&book, h.index).unwrap();
                wire::SearchHit {
                    key: h.key,
                    index: h.index,
                    node_id: h.node_id,
                    text: format!("ALTERED {}", h.content),
                    score: h.score,
                    version: h.version,
                    label: h.label,
                    leaf: h.leaf.to_vec(),
                    count: book.count,
                    proof: proof
                        .proof
                        .iter()
                        .map(|p| grove::wire::moot::ProofStep {
                            sibling: p.sibling.to_vec(),
                            is_left: p.is_left,
                        })
                        .collect(),
                    ..Default::default()
                }
            })
            .collect(),
        max_k: 1000,
        ..Default::default()
    }
}
