//! ground-v1 vectors: every check, best span and normalization in
//! `grounding-vectors.json` reproduced exactly.

use grove::grounding::{CheckInput, Checked, best_span, norm};
use serde_json::Value;

fn vectors() -> Value {
    let path = crate::support::data_file("spec/grounding-vectors.json");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).expect("vectors are valid JSON")
}

#[test]
fn vectors_are_for_ground_v1() {
    let v = vectors();
    assert_eq!(v["spec"], grove::grounding::SPEC_VERSION);
}

#[test]
fn check_vectors() {
    let v = vectors();
    let checks = v["checks"].as_array().expect("checks array");
    assert!(!checks.is_empty());
    let mut failures = Vec::new();
    for case in checks {
        let name = case["name"].as_str().unwrap_or("?");
        let input: CheckInput = serde_json::from_value(case["input"].clone()).expect("input");
        let expected: Checked = serde_json::from_value(case["output"].clone()).expect("output");
        let got = input.run().expect("check runs");
        if got != expected {
            failures.push(format!(
                "{name}:\n  expected {}\n  got      {}",
                serde_json::to_string(&expected).unwrap_or_default(),
                serde_json::to_string(&got).unwrap_or_default()
            ));
        }
        // Byte-level agreement of the JSON too (field order and number forms).
        let got_value = serde_json::to_value(&got).expect("serializes");
        assert_eq!(got_value, case["output"], "{name}: JSON differs");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn best_span_vectors() {
    let v = vectors();
    // The best-span vectors search the pool the checks use.
    let pool: Vec<String> = v["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| c["input"]["pool"].as_array().expect("pool").clone())
        .max_by_key(|p| p.len())
        .expect("a pool")
        .iter()
        .map(|p| p["content"].as_str().expect("content").to_string())
        .collect();
    let cases = v["best_span"].as_array().expect("best_span array");
    assert!(!cases.is_empty());
    for case in cases {
        let quote = case["quote"].as_str().expect("quote");
        let got = best_span(quote, &pool);
        assert_eq!(got.span, case["span"].as_str().expect("span"), "{quote}");
        assert_eq!(got.ratio, case["ratio"].as_f64().expect("ratio"), "{quote}");
    }
}

#[test]
fn norm_vectors() {
    let v = vectors();
    let cases = v["norm"].as_object().expect("norm map");
    assert!(!cases.is_empty());
    for (input, expected) in cases {
        assert_eq!(norm(input), expected.as_str().expect("string"), "{input}");
    }
}

/// ground-v1 §9: after snapping, every quote of 3+ words left in the text is
/// found in its source. Replies are built from pool text with words
/// replaced, dropped or misspelt, then snapped and graded again.
#[test]
fn snapped_text_quotes_are_all_found() {
    use grove::grounding::{TurnSources, check, grade};
    use std::collections::BTreeMap;

    let v = vectors();
    let pool: Vec<String> = v["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| c["input"]["pool"].as_array().expect("pool").clone())
        .max_by_key(|p| p.len())
        .expect("a pool")
        .iter()
        .map(|p| p["content"].as_str().expect("content").to_string())
        .collect();
    let pool_refs: Vec<&str> = pool.iter().map(String::as_str).collect();
    let tags = ["s1", "s2"];
    let empty = BTreeMap::new();
    let sources = TurnSources {
        passage_tags: &tags,
        pool: &pool_refs,
        other_turns: &empty,
        own_turns: &empty,
    };
    let mut state = 0x5EED_u64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let mut snapped_any = 0;
    for _ in 0..150 {
        let mut reply = String::from("I say");
        for _ in 0..1 + next(3) {
            let text = &pool[next(pool.len())];
            let words: Vec<&str> = text.split_whitespace().collect();
            let len = 3 + next(12);
            if words.len() <= len {
                continue;
            }
            let start = next(words.len() - len);
            let mut quote: Vec<String> = words[start..start + len]
                .iter()
                .map(|w| w.to_string())
                .collect();
            match next(4) {
                0 => {}
                1 => quote[next(len)] = "zebra".into(),
                2 => {
                    quote.remove(next(len));
                }
                _ => {
                    let at = next(len);
                    quote[at] = quote[at].chars().rev().collect();
                }
            }
            let joined = quote.join(" ");
            // Quote marks inside the copied words would re-pair; skip those.
            if joined.chars().any(grove::grounding::is_quote_char) {
                continue;
            }
            reply.push_str(&format!(" \"{joined}\" [s1] and"));
        }
        let checked = check(&reply, &sources);
        snapped_any += checked.snaps.iter().filter(|s| s.to.is_some()).count();
        let again = grade(&checked.text, &sources);
        for q in &again.quotes {
            assert!(
                q.found,
                "{:?} left unfound in {:?} (from {reply:?})",
                q.text, checked.text
            );
        }
    }
    assert!(snapped_any > 10, "only {snapped_any} snaps exercised");
}

mod no_panics {
    use std::collections::BTreeMap;

    use grove::grounding::{TurnSources, best_span, check, is_quote_char};
    use proptest::prelude::*;

    /// Characters that exercise every rule: quote marks, tag syntax, EDGE,
    /// ellipses, apostrophes, non-ASCII letters, combining marks, spaces.
    fn reply_char() -> impl Strategy<Value = char> {
        prop::sample::select(vec![
            '"', '\u{201C}', '\u{201D}', '\u{301D}', '\u{FF02}', '[', ']', ',', ' ', '\n',
            '\u{3000}', 's', 'S', 'o', 'O', '0', '1', '2', '9', '.', '\u{2026}', '\'', '\u{2019}',
            '_', '-', 'a', 'b', 'é', 'Σ', 'ß', '\u{0301}', 'ﬁ', '½', '世',
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn check_never_panics_and_keeps_marks_paired(
            reply in prop::collection::vec(reply_char(), 0..120).prop_map(|v| v.into_iter().collect::<String>()),
            pool in prop::collection::vec(
                prop::collection::vec(reply_char(), 0..80).prop_map(|v| v.into_iter().collect::<String>()),
                0..4,
            ),
        ) {
            let pool_refs: Vec<&str> = pool.iter().map(String::as_str).collect();
            let tags = ["s1", "s2"];
            let mut others = BTreeMap::new();
            others.insert(2u64, "a b Σ ß é".to_string());
            let own = BTreeMap::new();
            let sources = TurnSources {
                passage_tags: &tags,
                pool: &pool_refs,
                other_turns: &others,
                own_turns: &own,
            };
            let checked = check(&reply, &sources);
            // Snapping removes marks in pairs and never adds any.
            let before = reply.chars().filter(|c| is_quote_char(*c)).count();
            let after = checked.text.chars().filter(|c| is_quote_char(*c)).count();
            prop_assert!(after <= before);
            prop_assert_eq!((before - after) % 2, 0);
            for snap in &checked.snaps {
                prop_assert!((0.0..=1.0).contains(&snap.ratio));
            }
            let span = best_span(&reply, &pool);
            prop_assert!((0.0..=1.0).contains(&span.ratio));
        }
    }
}
