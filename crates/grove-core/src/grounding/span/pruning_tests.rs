//! Tests of `span` (pruning tests).

use super::*;

/// §8 with no pruning at all: every window matched, in order.
pub(super) fn unpruned(quote: &str, texts: &[String]) -> BestSpan {
    let target = norm(quote);
    let tc: Vec<char> = target.chars().collect();
    let n = if target.is_empty() {
        0
    } else {
        target.split(' ').count()
    };
    let alphabet = Alphabet::new(&tc);
    let b: Vec<u16> = tc.iter().map(|&c| alphabet.symbol(c)).collect();
    let mut matcher = Matcher::new(&b, alphabet.len());
    let mut best = (Ratio::ZERO, String::new());
    let mut scratch = Vec::new();
    for text in texts {
        let p = PreparedText::new(text, &alphabet);
        for size in n.saturating_sub(2).max(1)..=n + 2 {
            for start in 0..(p.words.len() + 1).saturating_sub(size) {
                p.window_into(start, size, &mut scratch);
                let total = (p.window_len(start, size) + b.len()) as u64;
                let r = Ratio::new(matcher.matching_total(&scratch), total);
                if r > best.0 {
                    let span = &text[p.words[start].0..p.words[start + size - 1].1];
                    best = (r, trim_edge(span).to_string());
                }
            }
        }
    }
    if best.0.num == 0 {
        BestSpan {
            span: String::new(),
            ratio: 0.0,
        }
    } else {
        BestSpan {
            span: best.1,
            ratio: best.0.to_f64(),
        }
    }
}

#[test]
fn pruned_search_equals_unpruned_search() {
    // Small alphabets make many ties, which is where pruning could go wrong.
    let vocab = ["ab", "ba", "a", "b", "aab", "bb", "ab'a", "x_y", "c"];
    let mut state = 0x1234_5678_u64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    for _ in 0..300 {
        let texts: Vec<String> = (0..1 + next(3))
            .map(|_| {
                (0..next(25))
                    .map(|_| vocab[next(vocab.len())])
                    .collect::<Vec<_>>()
                    .join(if next(2) == 0 { " " } else { ", " })
            })
            .collect();
        let quote: String = (0..1 + next(5))
            .map(|_| vocab[next(vocab.len())])
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(
            best_span(&quote, &texts),
            unpruned(&quote, &texts),
            "{quote:?} in {texts:?}"
        );
    }
}
