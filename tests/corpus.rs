//! The real Gutenberg books of `tests/data/corpus`:
//! metadata, proofs of a sample, `book verify`, and unchanged re-ingest.

use crate::support::{Grove, data_file, verify_served_proof};

#[test]
fn corpus_books_ingest_prove_and_verify() {
    let books = [
        (
            "corpus/moby-dick-2701-excerpt.txt",
            "Moby Dick; or The Whale",
            "Herman Melville",
            2701,
        ),
        (
            "corpus/pride-and-prejudice-1342-excerpt.txt",
            "Pride and Prejudice",
            "Jane Austen",
            1342,
        ),
        (
            "corpus/complete-angler-9198-excerpt.txt",
            "The Complete Angler, 1653",
            "Isaak Walton",
            9198,
        ),
        (
            "corpus/devils-dictionary-972-excerpt.txt",
            "The Devil's Dictionary",
            "Ambrose Bierce",
            972,
        ),
    ];
    let g = Grove::new();
    for (file, title, author, ebook) in books {
        let path = data_file(file);
        let path = path.to_str().unwrap();
        let added = g.json(&["book", "add", path]);
        assert_eq!(added["status"], "added", "{file}");
        assert_eq!(added["title"], title, "{file}");
        assert_eq!(added["author"], author, "{file}");
        assert_eq!(added["ebook"], ebook, "{file}");
        let key = added["key"].as_str().unwrap().to_string();
        let count = added["count"].as_u64().unwrap();
        // A sample of proofs: first, last, and a stride through the book.
        let mut sample: Vec<u64> = (0..count).step_by((count as usize / 25).max(1)).collect();
        sample.push(count - 1);
        for i in sample {
            let p = g.json(&["book", "proof", &key, &i.to_string()]);
            assert_eq!(p["root"], added["root"], "{key} chunk {i}");
            assert_eq!(p["count"], count, "{key} chunk {i}");
            verify_served_proof(&p);
        }
        assert_eq!(g.json(&["book", "verify", &key])["ok"], true, "{key}");
        assert_eq!(
            g.json(&["book", "add", path])["status"],
            "unchanged",
            "{file}"
        );
    }
    assert_eq!(g.json(&["audit", "verify"])["chains"][0]["events"], 4);
}
