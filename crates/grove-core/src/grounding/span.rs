//! `best_span` (ground-v1 §8): the window of a source text closest to a
//! misquote, by Python difflib's `SequenceMatcher.ratio()`, reproduced exactly.
//!
//! Every window's ratio is `2M / (len(a) + len(b))`, with M the total size of
//! difflib's matching blocks. Computing M for each of the ~60k windows of a
//! full pool is slow, so windows are pruned by exact upper bounds on M, and
//! only windows that could still beat the best ratio so far are matched:
//!
//! 1. the character-multiset intersection (difflib's `quick_ratio`), kept
//!    incrementally while a window slides over the words;
//! 2. the longest common subsequence (M is the size of a common subsequence),
//!    computed bit-parallel for all window sizes at one start at once;
//! 3. difflib's recursive longest-match rule itself.
//!
//! Ratios are compared as exact fractions, so pruning never changes which
//! window wins (the first one with the strictly highest ratio).

use std::cmp::Ordering;

use super::text::{is_word_char, norm, trim_edge};

mod lcs;
use self::lcs::*;

/// The result of [`best_span`]: the span as it stands in the source text,
/// and its ratio (`("", 0.0)` when nothing matches at all).
#[derive(Debug, Clone, PartialEq)]
pub struct BestSpan {
    pub span: String,
    pub ratio: f64,
}

/// `best_span(q, texts)` per ground-v1 §8.
pub fn best_span<S: AsRef<str>>(quote: &str, texts: &[S]) -> BestSpan {
    let target = norm(quote);
    let target_chars: Vec<char> = target.chars().collect();
    let n = if target.is_empty() {
        0
    } else {
        target.split(' ').count()
    };
    let alphabet = Alphabet::new(&target_chars);
    let b: Vec<u16> = target_chars.iter().map(|&c| alphabet.symbol(c)).collect();

    let prepared: Vec<PreparedText> = texts
        .iter()
        .map(|t| PreparedText::new(t.as_ref(), &alphabet))
        .collect();
    let min_size = n.saturating_sub(2).max(1);
    let max_size = n + 2;

    let mut search = Search::new(&b, alphabet.len(), min_size, max_size);
    let best = search.run(&prepared);
    match best {
        Some((window, ratio)) if ratio.num > 0 => {
            let text = &prepared[window.text()];
            let first = text.words[window.start()];
            let last = text.words[window.start() + window.size() - 1];
            let source = texts[window.text()].as_ref();
            BestSpan {
                span: trim_edge(&source[first.0..last.1]).to_string(),
                ratio: ratio.to_f64(),
            }
        }
        _ => BestSpan {
            span: String::new(),
            ratio: 0.0,
        },
    }
}

/// A ratio `num / den` kept exact; `den == 0` never occurs (two empty
/// strings have ratio 1, stored as 1/1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ratio {
    num: u64,
    den: u64,
}

impl Ratio {
    fn new(matches: u64, total_len: u64) -> Ratio {
        if total_len == 0 {
            Ratio { num: 1, den: 1 }
        } else {
            Ratio {
                num: 2 * matches,
                den: total_len,
            }
        }
    }

    const ZERO: Ratio = Ratio { num: 0, den: 1 };

    /// Exactly as Python computes it: `2.0 * matches / length`.
    fn to_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }
}

impl PartialOrd for Ratio {
    fn partial_cmp(&self, other: &Ratio) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ratio {
    fn cmp(&self, other: &Ratio) -> Ordering {
        (u128::from(self.num) * u128::from(other.den))
            .cmp(&(u128::from(other.num) * u128::from(self.den)))
    }
}

/// Maps the target's distinct characters to symbols `1..=K`; every other
/// character is symbol 0, which never matches (the target has none).
struct Alphabet {
    chars: Vec<char>,
    /// Symbols of ASCII characters, looked up directly.
    ascii: [u16; 128],
}

impl Alphabet {
    fn new(target: &[char]) -> Alphabet {
        let mut chars: Vec<char> = target.to_vec();
        chars.sort_unstable();
        chars.dedup();
        let mut alphabet = Alphabet {
            chars,
            ascii: [0; 128],
        };
        for b in 0..128u8 {
            alphabet.ascii[b as usize] = alphabet.search(char::from(b));
        }
        alphabet
    }

    fn symbol(&self, c: char) -> u16 {
        if c.is_ascii() {
            return self.ascii[c as usize];
        }
        self.search(c)
    }

    fn search(&self, c: char) -> u16 {
        match self.chars.binary_search(&c) {
            // Symbols beyond u16 cannot occur: a quote would need 65k
            // distinct characters; map them to "never matches" regardless.
            Ok(i) => u16::try_from(i + 1).unwrap_or(0),
            Err(_) => 0,
        }
    }

    /// Number of symbols including 0.
    fn len(&self) -> usize {
        self.chars.len() + 1
    }
}

/// One source text split into words, with each word's key as symbols.
struct PreparedText {
    /// Byte range of each word in the source text.
    words: Vec<(usize, usize)>,
    /// All keys' symbols, concatenated.
    key_symbols: Vec<u16>,
    /// `key_offsets[w]..key_offsets[w + 1]` is word w's key.
    key_offsets: Vec<usize>,
    /// Symbol of the joining space.
    space: u16,
}

impl PreparedText {
    fn new(text: &str, alphabet: &Alphabet) -> PreparedText {
        let mut words = Vec::new();
        let mut start: Option<usize> = None;
        for (i, c) in text.char_indices() {
            let in_word = is_word_char(c) || c == '\'' || c == '\u{2019}';
            match (in_word, start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    words.push((s, i));
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = start {
            words.push((s, text.len()));
        }
        let mut key_symbols = Vec::with_capacity(text.len());
        let mut key_offsets = Vec::with_capacity(words.len() + 1);
        key_offsets.push(0);
        for &(s, e) in &words {
            let word = &text[s..e];
            if word.is_ascii()
                && word
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'\'')
            {
                // norm() of such a word is just its lowercase form.
                key_symbols.extend(
                    word.bytes()
                        .map(|b| alphabet.symbol(char::from(b.to_ascii_lowercase()))),
                );
            } else {
                key_symbols.extend(norm(word).chars().map(|c| alphabet.symbol(c)));
            }
            key_offsets.push(key_symbols.len());
        }
        PreparedText {
            words,
            key_symbols,
            key_offsets,
            space: alphabet.symbol(' '),
        }
    }

    fn key(&self, word: usize) -> &[u16] {
        &self.key_symbols[self.key_offsets[word]..self.key_offsets[word + 1]]
    }

    /// Length of the window key of `size` words from `start`.
    fn window_len(&self, start: usize, size: usize) -> usize {
        self.key_offsets[start + size] - self.key_offsets[start] + size - 1
    }

    /// Whether the window key's symbols are exactly `target` (whose length
    /// the caller has already checked). Symbol 0 never equals a target
    /// symbol, so equal symbols mean equal characters.
    fn window_equals(&self, start: usize, size: usize, target: &[u16]) -> bool {
        let mut p = 0;
        for w in start..start + size {
            if w > start {
                if target.get(p) != Some(&self.space) || self.space == 0 {
                    return false;
                }
                p += 1;
            }
            let key = self.key(w);
            if target.get(p..p + key.len()) != Some(key) {
                return false;
            }
            p += key.len();
        }
        p == target.len()
    }

    /// Writes the window key's symbols into `out`.
    fn window_into(&self, start: usize, size: usize, out: &mut Vec<u16>) {
        out.clear();
        for w in start..start + size {
            if w > start {
                out.push(self.space);
            }
            out.extend_from_slice(self.key(w));
        }
    }
}

/// A window: text index, size in words, start word.
#[derive(Debug, Clone, Copy)]
struct Window {
    text: u32,
    size: u32,
    start: u32,
}

impl Window {
    fn text(self) -> usize {
        self.text as usize
    }
    fn size(self) -> usize {
        self.size as usize
    }
    fn start(self) -> usize {
        self.start as usize
    }
}

/// A window with its multiset upper bound (kept small: there are ~50k).
struct Candidate {
    window: Window,
    /// Multiset intersection with the target: an upper bound on M.
    common: u32,
    /// Total length `len(a) + len(b)`.
    total_len: u32,
}

impl Candidate {
    fn bound(&self) -> Ratio {
        Ratio::new(u64::from(self.common), u64::from(self.total_len))
    }
}

struct Search<'b> {
    b: &'b [u16],
    symbols: usize,
    min_size: usize,
    max_size: usize,
    lcs: BitLcs,
    matcher: Matcher,
    scratch: Vec<u16>,
}

impl<'b> Search<'b> {
    fn new(b: &'b [u16], symbols: usize, min_size: usize, max_size: usize) -> Search<'b> {
        Search {
            b,
            symbols,
            min_size,
            max_size,
            lcs: BitLcs::new(b, symbols),
            matcher: Matcher::new(b, symbols),
            scratch: Vec::new(),
        }
    }

    /// The first window (text, size, start order) with the strictly highest
    /// ratio, or `None` when there are no windows.
    fn run(&mut self, texts: &[PreparedText]) -> Option<(Window, Ratio)> {
        // Ratio 1 is the most any window can reach, and only a window whose
        // key equals the target reaches it: the first such window wins.
        if let Some(window) = self.first_equal_window(texts) {
            return Some((window, Ratio::new(0, 0)));
        }
        let candidates = self.candidates(texts);
        if candidates.is_empty() {
            return None;
        }
        // Seed: match the few windows with the highest bounds, to start the
        // ordered scan with a high bar. Any achieved ratio is a valid bar.
        let mut best: Option<(usize, Ratio)> = None;
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        let seeds = 8.min(order.len());
        if seeds < order.len() {
            order.select_nth_unstable_by(seeds, |&x, &y| {
                candidates[y].bound().cmp(&candidates[x].bound())
            });
        }
        for &index in &order[..seeds] {
            let ratio = self.exact(texts, &candidates[index]);
            best = Some(better(best, (index, ratio)));
        }
        // Ordered scan: a window is matched only if it could reach the bar.
        let mut lcs_cache = LcsCache::new(texts, self.min_size, self.max_size);
        for (index, candidate) in candidates.iter().enumerate() {
            let bar = best.map_or(Ratio::ZERO, |(_, r)| r);
            if candidate.bound() < bar {
                continue;
            }
            if best.is_some_and(|(i, _)| i == index) {
                continue;
            }
            let lcs = lcs_cache.get(&mut self.lcs, texts, candidate.window);
            if Ratio::new(u64::from(lcs), u64::from(candidate.total_len)) < bar {
                continue;
            }
            if let Some(ratio) = self.exact_if_reaches(texts, candidate, bar, lcs) {
                best = Some(better(best, (index, ratio)));
            }
        }
        best.map(|(index, ratio)| (candidates[index].window, ratio))
    }

    /// The first window (in order) whose key is exactly the target.
    fn first_equal_window(&self, texts: &[PreparedText]) -> Option<Window> {
        for (t, text) in texts.iter().enumerate() {
            let word_count = text.words.len();
            for size in self.min_size..=self.max_size.min(word_count) {
                for start in 0..=word_count - size {
                    if text.window_len(start, size) == self.b.len()
                        && text.window_equals(start, size, self.b)
                    {
                        return Some(Window {
                            text: to_u32(t),
                            size: to_u32(size),
                            start: to_u32(start),
                        });
                    }
                }
            }
        }
        None
    }

    /// Every window in order with its multiset bound, computed while sliding.
    fn candidates(&self, texts: &[PreparedText]) -> Vec<Candidate> {
        let mut target_counts = vec![0u32; self.symbols];
        for &s in self.b {
            target_counts[s as usize] += 1;
        }
        target_counts[0] = 0;
        let lb = self.b.len() as u64;
        let mut out = Vec::new();
        let mut counts = vec![0u32; self.symbols];
        for (t, text) in texts.iter().enumerate() {
            let word_count = text.words.len();
            for size in self.min_size..=self.max_size {
                if size > word_count {
                    break;
                }
                counts.iter_mut().for_each(|c| *c = 0);
                let mut common = 0u64;
                let add = |s: u16, counts: &mut Vec<u32>, common: &mut u64| {
                    let s = s as usize;
                    if counts[s] < target_counts[s] {
                        *common += 1;
                    }
                    counts[s] += 1;
                };
                for w in 0..size {
                    if w > 0 {
                        add(text.space, &mut counts, &mut common);
                    }
                    for &s in text.key(w) {
                        add(s, &mut counts, &mut common);
                    }
                }
                for start in 0..=word_count - size {
                    if start > 0 {
                        // Slide: drop word start-1 and its space, add the new last word.
                        let remove = |s: u16, counts: &mut Vec<u32>, common: &mut u64| {
                            let s = s as usize;
                            counts[s] -= 1;
                            if counts[s] < target_counts[s] {
                                *common -= 1;
                            }
                        };
                        for &s in text.key(start - 1) {
                            remove(s, &mut counts, &mut common);
                        }
                        if size > 1 {
                            remove(text.space, &mut counts, &mut common);
                            add(text.space, &mut counts, &mut common);
                        }
                        for &s in text.key(start + size - 1) {
                            add(s, &mut counts, &mut common);
                        }
                    }
                    let total_len = text.window_len(start, size) as u64 + lb;
                    out.push(Candidate {
                        window: Window {
                            text: to_u32(t),
                            size: to_u32(size),
                            start: to_u32(start),
                        },
                        common: u32::try_from(common).unwrap_or(u32::MAX),
                        total_len: u32::try_from(total_len).unwrap_or(u32::MAX),
                    });
                }
            }
        }
        out
    }

    fn exact(&mut self, texts: &[PreparedText], candidate: &Candidate) -> Ratio {
        let w = candidate.window;
        texts[w.text()].window_into(w.start(), w.size(), &mut self.scratch);
        let matches = self.matcher.matching_total(&self.scratch);
        Ratio::new(matches, u64::from(candidate.total_len))
    }

    /// The window's exact ratio, or `None` once it is proven below `bar`
    /// (a window at exactly `bar` is always computed: ties pick the earlier).
    fn exact_if_reaches(
        &mut self,
        texts: &[PreparedText],
        candidate: &Candidate,
        bar: Ratio,
        lcs_bound: u32,
    ) -> Option<Ratio> {
        let w = candidate.window;
        texts[w.text()].window_into(w.start(), w.size(), &mut self.scratch);
        if candidate.total_len == 0 {
            return Some(Ratio::new(0, 0));
        }
        // Least M with 2M / total_len >= bar.
        let numerator = u128::from(bar.num) * u128::from(candidate.total_len);
        let denominator = 2 * u128::from(bar.den);
        let needed = u64::try_from(numerator.div_ceil(denominator)).unwrap_or(u64::MAX);
        let matches = self.matcher.matching_total_bounded(
            &self.scratch,
            needed,
            u64::from(lcs_bound),
            &mut self.lcs,
        )?;
        Some(Ratio::new(matches, u64::from(candidate.total_len)))
    }
}

/// Texts, words and lengths here are far below 4G; saturate rather than wrap.
fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Keeps the higher ratio; on a tie, the earlier window (lower index).
fn better(best: Option<(usize, Ratio)>, new: (usize, Ratio)) -> (usize, Ratio) {
    match best {
        None => new,
        Some(old) => match new.1.cmp(&old.1) {
            Ordering::Greater => new,
            Ordering::Equal if new.0 < old.0 => new,
            _ => old,
        },
    }
}

/// difflib's `find_longest_match` / `get_matching_blocks` without junk, for
/// a fixed `b`, summing the sizes of the matching blocks.
struct Matcher {
    /// Positions of each symbol in b, ascending (difflib's `b2j`); used by
    /// the reference scan that tests compare the bit-parallel search with.
    #[cfg_attr(not(test), allow(dead_code))]
    b2j: Vec<Vec<u32>>,
    /// `masks[s * words + w]`: bits of b's positions holding symbol s.
    masks: Vec<u64>,
    words: usize,
    /// Bit-parallel run levels: level k holds the positions j where a run of
    /// at least k + 1 matching characters ends at (i, j).
    levels: Vec<u64>,
    range_masks: Vec<u64>,
    len_b: usize,
    /// Two rows of difflib's `j2len` for the reference scan, each entry
    /// valid only when its stamp equals the row's generation.
    #[cfg_attr(not(test), allow(dead_code))]
    lengths: [Vec<u32>; 2],
    #[cfg_attr(not(test), allow(dead_code))]
    stamps: [Vec<u64>; 2],
    #[cfg_attr(not(test), allow(dead_code))]
    generation: u64,
    queue: Vec<(usize, usize, usize, usize)>,
    bounded_queue: Vec<(usize, usize, usize, usize, u64)>,
}

impl Matcher {
    fn new(b: &[u16], symbols: usize) -> Matcher {
        let mut b2j = vec![Vec::new(); symbols];
        for (j, &s) in b.iter().enumerate() {
            if s != 0 {
                b2j[s as usize].push(j as u32);
            }
        }
        let words = b.len().div_ceil(64).max(1);
        let mut masks = vec![0u64; symbols * words];
        for (j, &s) in b.iter().enumerate() {
            if s != 0 {
                masks[s as usize * words + j / 64] |= 1u64 << (j % 64);
            }
        }
        Matcher {
            b2j,
            masks,
            words,
            levels: Vec::new(),
            range_masks: Vec::new(),
            len_b: b.len(),
            lengths: [vec![0; b.len()], vec![0; b.len()]],
            stamps: [vec![0; b.len()], vec![0; b.len()]],
            generation: 0,
            queue: Vec::new(),
            bounded_queue: Vec::new(),
        }
    }

    /// Total size of difflib's matching blocks, or `None` as soon as it is
    /// proven below `needed`: blocks found so far plus an LCS bound on every
    /// sub-range still to search. `initial_bound` bounds the whole total.
    fn matching_total_bounded(
        &mut self,
        a: &[u16],
        needed: u64,
        initial_bound: u64,
        lcs: &mut BitLcs,
    ) -> Option<u64> {
        /// Below this size a sub-range's bound is just its shorter side.
        const SMALL: usize = 12;
        let mut total = 0u64;
        let mut pending = initial_bound;
        if pending < needed {
            return None;
        }
        self.bounded_queue.clear();
        self.bounded_queue
            .push((0, a.len(), 0, self.len_b, initial_bound));
        while let Some((alo, ahi, blo, bhi, bound)) = self.bounded_queue.pop() {
            pending -= bound;
            let (i, j, k) = self.longest_match(a, alo, ahi, blo, bhi);
            if k > 0 {
                total += k as u64;
                for (clo, chi, dlo, dhi) in [(alo, i, blo, j), (i + k, ahi, j + k, bhi)] {
                    if clo < chi && dlo < dhi {
                        let shorter = (chi - clo).min(dhi - dlo);
                        let child = if shorter < SMALL {
                            shorter as u64
                        } else {
                            u64::from(lcs.range_lcs(&a[clo..chi], dlo, dhi))
                        };
                        // A child's total is at most its parent's bound minus k.
                        let child = child.min(bound.saturating_sub(k as u64));
                        pending += child;
                        self.bounded_queue.push((clo, chi, dlo, dhi, child));
                    }
                }
            }
            if total + pending < needed {
                return None;
            }
        }
        Some(total)
    }

    /// Total size of difflib's matching blocks between `a` and b.
    fn matching_total(&mut self, a: &[u16]) -> u64 {
        let mut total = 0u64;
        self.queue.clear();
        self.queue.push((0, a.len(), 0, self.len_b));
        while let Some((alo, ahi, blo, bhi)) = self.queue.pop() {
            let (i, j, k) = self.longest_match(a, alo, ahi, blo, bhi);
            if k > 0 {
                total += k as u64;
                if alo < i && blo < j {
                    self.queue.push((alo, i, blo, j));
                }
                if i + k < ahi && j + k < bhi {
                    self.queue.push((i + k, ahi, j + k, bhi));
                }
            }
        }
        total
    }

    /// Longest common block in `a[alo..ahi]` × `b[blo..bhi]`: earliest in a,
    /// then earliest in b, among the longest (difflib's scan order). With no
    /// junk, difflib's extension loops never extend the block found.
    ///
    /// Bit-parallel over b: after row i, level k holds the positions j with
    /// a run of at least k + 1 matches ending at (i, j) inside the range.
    /// The first row whose longest run beats the best so far, and the lowest
    /// such j in it, is exactly where difflib's scan would update its best.
    fn longest_match(
        &mut self,
        a: &[u16],
        alo: usize,
        ahi: usize,
        blo: usize,
        bhi: usize,
    ) -> (usize, usize, usize) {
        let (mut best_i, mut best_j, mut best_size) = (alo, blo, 0usize);
        if alo >= ahi || blo >= bhi {
            return (best_i, best_j, best_size);
        }
        let first = blo / 64;
        let last = (bhi - 1) / 64;
        let nw = last - first + 1;
        self.range_masks.clear();
        for w in first..=last {
            let lo = if w == first { blo % 64 } else { 0 };
            let hi = if w == last { (bhi - 1) % 64 + 1 } else { 64 };
            let upper = if hi == 64 { u64::MAX } else { (1u64 << hi) - 1 };
            self.range_masks.push(upper & !((1u64 << lo) - 1));
        }
        // Number of non-empty levels after the previous row. A run of k + 1
        // ending at j implies one of k ending there, so they form a prefix.
        let mut alive = 0usize;
        for (i, &symbol) in a.iter().enumerate().take(ahi).skip(alo) {
            if symbol == 0 {
                alive = 0;
                continue;
            }
            let mask = &self.masks[symbol as usize * self.words + first..][..nw];
            if self.levels.len() < (alive + 1) * nw {
                self.levels.resize((alive + 1) * nw, 0);
            }
            // Highest levels first, so level k - 1 still holds the previous
            // row when level k is computed from it.
            let mut new_alive = 0usize;
            for k in (0..=alive).rev() {
                let mut any = 0u64;
                if k == 0 {
                    for ((level, &m), &range) in
                        self.levels.iter_mut().zip(mask).zip(&self.range_masks)
                    {
                        *level = m & range;
                        any |= *level;
                    }
                } else {
                    let (below, above) = self.levels.split_at_mut(k * nw);
                    let prev = &below[(k - 1) * nw..];
                    let mut carry = 0u64;
                    for w in 0..nw {
                        let shifted = (prev[w] << 1) | carry;
                        carry = prev[w] >> 63;
                        let v = shifted & mask[w] & self.range_masks[w];
                        above[w] = v;
                        any |= v;
                    }
                }
                if any != 0 && new_alive == 0 {
                    new_alive = k + 1;
                }
            }
            alive = new_alive;
            if alive > best_size {
                let top = &self.levels[(alive - 1) * nw..alive * nw];
                if let Some((w, bits)) = top.iter().enumerate().find(|(_, b)| **b != 0) {
                    let j = (first + w) * 64 + bits.trailing_zeros() as usize;
                    best_size = alive;
                    best_i = i + 1 - best_size;
                    best_j = j + 1 - best_size;
                }
            }
        }
        (best_i, best_j, best_size)
    }

    /// difflib's own scan (`j2len` rows), kept as the reference the
    /// bit-parallel search is tested against.
    #[cfg(test)]
    fn longest_match_scan(
        &mut self,
        a: &[u16],
        alo: usize,
        ahi: usize,
        blo: usize,
        bhi: usize,
    ) -> (usize, usize, usize) {
        let (mut best_i, mut best_j, mut best_size) = (alo, blo, 0usize);
        // Skip a generation so no entry of an earlier call looks current.
        self.generation += 1;
        for (i, &symbol) in a.iter().enumerate().take(ahi).skip(alo) {
            self.generation += 1;
            let row = self.generation;
            if symbol == 0 {
                continue;
            }
            let cur = (row & 1) as usize;
            let prev = cur ^ 1;
            let positions = &self.b2j[symbol as usize];
            let first = positions.partition_point(|&j| (j as usize) < blo);
            for &j in &positions[first..] {
                let j = j as usize;
                if j >= bhi {
                    break;
                }
                let before = if j > 0 && self.stamps[prev][j - 1] == row - 1 {
                    self.lengths[prev][j - 1]
                } else {
                    0
                };
                let k = before + 1;
                self.stamps[cur][j] = row;
                self.lengths[cur][j] = k;
                if k as usize > best_size {
                    best_size = k as usize;
                    best_i = i + 1 - best_size;
                    best_j = j + 1 - best_size;
                }
            }
        }
        (best_i, best_j, best_size)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod pruning_tests;

#[cfg(test)]
mod bound_tests;
