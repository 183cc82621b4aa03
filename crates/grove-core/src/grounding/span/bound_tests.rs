//! Tests of `span` (bound tests).

use super::*;

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn random_symbols(state: &mut u64, len: usize, alphabet: u64) -> Vec<u16> {
    (0..len)
        .map(|_| (xorshift(state) % alphabet) as u16)
        .collect()
}

fn dp_lcs(a: &[u16], b: &[u16]) -> u32 {
    let mut dp = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in 0..a.len() {
        for j in 0..b.len() {
            dp[i + 1][j + 1] = if a[i] == b[j] && a[i] != 0 {
                dp[i][j] + 1
            } else {
                dp[i][j + 1].max(dp[i + 1][j])
            };
        }
    }
    dp[a.len()][b.len()]
}

#[test]
fn bit_parallel_longest_match_equals_difflib_scan() {
    let mut state = 0xDEAD_BEEF_u64;
    for _ in 0..2000 {
        let b_len = 1 + (xorshift(&mut state) % 200) as usize;
        let b: Vec<u16> = random_symbols(&mut state, b_len, 3)
            .iter()
            .map(|s| s + 1)
            .collect();
        let a_len = 1 + (xorshift(&mut state) % 200) as usize;
        let a = random_symbols(&mut state, a_len, 4);
        let mut m = Matcher::new(&b, 5);
        let alo = (xorshift(&mut state) % a_len as u64) as usize;
        let ahi = alo + 1 + (xorshift(&mut state) % (a_len - alo) as u64) as usize;
        let blo = (xorshift(&mut state) % b_len as u64) as usize;
        let bhi = blo + 1 + (xorshift(&mut state) % (b_len - blo) as u64) as usize;
        assert_eq!(
            m.longest_match(&a, alo, ahi, blo, bhi),
            m.longest_match_scan(&a, alo, ahi, blo, bhi),
            "{alo}..{ahi} x {blo}..{bhi}"
        );
    }
}

#[test]
fn range_lcs_matches_dynamic_programming() {
    let mut state = 0x9E37_79B9_u64;
    for _ in 0..200 {
        let b_len = 1 + (xorshift(&mut state) % 200) as usize;
        // Symbols 1..=5 in b; a may hold 0 (never matches).
        let b: Vec<u16> = random_symbols(&mut state, b_len, 5)
            .iter()
            .map(|s| s + 1)
            .collect();
        let a_len = (xorshift(&mut state) % 150) as usize;
        let a = random_symbols(&mut state, a_len, 6);
        let mut lcs = BitLcs::new(&b, 7);
        let blo = (xorshift(&mut state) % b_len as u64) as usize;
        let bhi = blo + 1 + (xorshift(&mut state) % (b_len - blo) as u64) as usize;
        assert_eq!(
            lcs.range_lcs(&a, blo, bhi),
            dp_lcs(&a, &b[blo..bhi]),
            "{blo}..{bhi}"
        );
    }
}

#[test]
fn bounded_matching_is_exact_or_proven_short() {
    let mut state = 0x1357_9BDF_u64;
    for _ in 0..300 {
        let b_len = 20 + (xorshift(&mut state) % 180) as usize;
        let b: Vec<u16> = random_symbols(&mut state, b_len, 8)
            .iter()
            .map(|s| s + 1)
            .collect();
        let a_len = 20 + (xorshift(&mut state) % 180) as usize;
        let a = random_symbols(&mut state, a_len, 9);
        let mut matcher = Matcher::new(&b, 9);
        let mut lcs = BitLcs::new(&b, 9);
        let exact = matcher.matching_total(&a);
        let bound = u64::from(dp_lcs(&a, &b));
        assert!(exact <= bound);
        for needed in [0, exact / 2, exact, exact + 1, bound] {
            match matcher.matching_total_bounded(&a, needed, bound, &mut lcs) {
                Some(total) => assert_eq!(total, exact),
                None => assert!(exact < needed, "pruned {exact} >= {needed}"),
            }
        }
    }
}

#[test]
fn pruned_search_equals_unpruned_on_longer_windows() {
    let vocab = [
        "river", "rivers", "runs", "cold", "clear", "under", "willow", "banks", "trout", "lie",
        "still", "morning", "light", "angler", "waits", "the", "and", "a", "don't", "whale's",
    ];
    let mut state = 0x2468_ACE0_u64;
    for _ in 0..40 {
        let texts: Vec<String> = (0..2)
            .map(|_| {
                (0..30 + xorshift(&mut state) % 20)
                    .map(|_| vocab[(xorshift(&mut state) % vocab.len() as u64) as usize])
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        let quote: String = (0..6 + xorshift(&mut state) % 8)
            .map(|_| vocab[(xorshift(&mut state) % vocab.len() as u64) as usize])
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(
            best_span(&quote, &texts),
            super::pruning_tests::unpruned(&quote, &texts),
            "{quote:?}"
        );
    }
}
