//! Tests of `span`.

use super::*;

/// Direct port of difflib's ratio on chars, for cross-checking.
fn difflib_ratio(a: &str, b: &str) -> f64 {
    let b_chars: Vec<char> = b.chars().collect();
    let a_chars: Vec<char> = a.chars().collect();
    let alphabet = Alphabet::new(&b_chars);
    let bs: Vec<u16> = b_chars.iter().map(|&c| alphabet.symbol(c)).collect();
    let a_syms: Vec<u16> = a_chars.iter().map(|&c| alphabet.symbol(c)).collect();
    let mut m = Matcher::new(&bs, alphabet.len());
    Ratio::new(
        m.matching_total(&a_syms),
        (a_chars.len() + b_chars.len()) as u64,
    )
    .to_f64()
}

#[test]
fn ratio_matches_known_difflib_values() {
    // Values from CPython's difflib.
    assert_eq!(difflib_ratio("abcd", "bcde"), 0.75);
    assert_eq!(difflib_ratio("", ""), 1.0);
    assert_eq!(difflib_ratio("abc", ""), 0.0);
    // qabxcd vs abycdf: blocks "ab" and "cd" -> 2*4/12.
    assert_eq!(difflib_ratio("qabxcd", "abycdf"), 8.0 / 12.0);
    // Argument order matters: "tide"/"diet" is 0.25 one way, 0.5 the other.
    assert_eq!(difflib_ratio("tide", "diet"), 0.25);
    assert_eq!(difflib_ratio("diet", "tide"), 0.5);
}

#[test]
fn bit_lcs_matches_dynamic_programming() {
    let a = "the quick brown fox jumps over";
    let b =
        "a quick brawn fix jumped over the lazy dog and then some more words to pass sixty four";
    let bc: Vec<char> = b.chars().collect();
    let ac: Vec<char> = a.chars().collect();
    let alphabet = Alphabet::new(&bc);
    let bs: Vec<u16> = bc.iter().map(|&c| alphabet.symbol(c)).collect();
    let mut lcs = BitLcs::new(&bs, alphabet.len());
    for &c in &ac {
        lcs.push(alphabet.symbol(c));
    }
    let mut dp = vec![vec![0u32; bc.len() + 1]; ac.len() + 1];
    for i in 0..ac.len() {
        for j in 0..bc.len() {
            dp[i + 1][j + 1] = if ac[i] == bc[j] {
                dp[i][j] + 1
            } else {
                dp[i][j + 1].max(dp[i + 1][j])
            };
        }
    }
    assert_eq!(lcs.length(), dp[ac.len()][bc.len()]);
}

#[test]
fn exact_quote_is_found_with_ratio_one() {
    let r = best_span("brown fox", &["The quick brown fox, jumps."]);
    assert_eq!(r.span, "brown fox");
    assert_eq!(r.ratio, 1.0);
}

#[test]
fn nothing_to_search_gives_empty() {
    let none: [&str; 0] = [];
    assert_eq!(
        best_span("anything", &none),
        BestSpan {
            span: String::new(),
            ratio: 0.0
        }
    );
    assert_eq!(best_span("zzz", &["aaa"]).ratio, 0.0);
}
