//! ground-v1 vectors: every check, best span and normalization in
//! `grounding-vectors.json` reproduced exactly.

use std::path::PathBuf;

use grove::grounding::{best_span, norm};
use grove::moot::transcript::{CheckInput, CheckOutput};
use serde_json::Value;

/// The shared directory: `$GROVE_SHARED_DIR`, else `<repo>/../shared`.
fn shared_dir() -> PathBuf {
    match std::env::var_os("GROVE_SHARED_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"),
    }
}

fn vectors() -> Option<Value> {
    let path = shared_dir().join("spec/grounding-vectors.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(serde_json::from_str(&text).expect("vectors are valid JSON")),
        Err(_) => {
            println!("skipping: {} not present", path.display());
            None
        }
    }
}

#[test]
fn vectors_are_for_ground_v1() {
    let Some(v) = vectors() else { return };
    assert_eq!(v["spec"], grove::grounding::SPEC_VERSION);
}

#[test]
fn check_vectors() {
    let Some(v) = vectors() else { return };
    let checks = v["checks"].as_array().expect("checks array");
    assert!(!checks.is_empty());
    let mut failures = Vec::new();
    for case in checks {
        let name = case["name"].as_str().unwrap_or("?");
        let input: CheckInput = serde_json::from_value(case["input"].clone()).expect("input");
        let expected: CheckOutput = serde_json::from_value(case["output"].clone()).expect("output");
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
    let Some(v) = vectors() else { return };
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
    let Some(v) = vectors() else { return };
    let cases = v["norm"].as_object().expect("norm map");
    assert!(!cases.is_empty());
    for (input, expected) in cases {
        assert_eq!(norm(input), expected.as_str().expect("string"), "{input}");
    }
}
