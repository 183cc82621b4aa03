//! Longest-common-subsequence lengths for the best-span search: a cache
//! of computed pairs and the bit-parallel kernel (ground-v1 §8).

use super::*;

/// LCS lengths per (text, start) for every window size, filled on demand:
/// one pass over the longest window's key gives every shorter prefix too.
pub(super) struct LcsCache {
    /// Per text, per start: LCS for sizes min_size..=max_size (0 = unknown
    /// marker is kept separately).
    pub(super) values: Vec<Vec<Option<Vec<u32>>>>,
    pub(super) min_size: usize,
    pub(super) max_size: usize,
}

impl LcsCache {
    pub(super) fn new(texts: &[PreparedText], min_size: usize, max_size: usize) -> LcsCache {
        LcsCache {
            values: texts.iter().map(|t| vec![None; t.words.len()]).collect(),
            min_size,
            max_size,
        }
    }

    pub(super) fn get(&mut self, lcs: &mut BitLcs, texts: &[PreparedText], window: Window) -> u32 {
        let slot = &mut self.values[window.text()][window.start()];
        if slot.is_none() {
            let text = &texts[window.text()];
            let longest = self.max_size.min(text.words.len() - window.start());
            let mut lengths = vec![0u32; self.max_size - self.min_size + 1];
            lcs.reset();
            for size in 1..=longest {
                if size > 1 {
                    lcs.push(text.space);
                }
                for &s in text.key(window.start() + size - 1) {
                    lcs.push(s);
                }
                if size >= self.min_size {
                    lengths[size - self.min_size] = lcs.length();
                }
            }
            *slot = Some(lengths);
        }
        match slot {
            Some(lengths) => lengths[window.size() - self.min_size],
            None => 0,
        }
    }
}

/// Bit-parallel LCS against a fixed `b` (Allison–Dix / Hyyrö), fed one
/// symbol of `a` at a time.
pub(super) struct BitLcs {
    pub(super) words: usize,
    /// `masks[s * words + k]`: bits of b's positions holding symbol s.
    pub(super) masks: Vec<u64>,
    pub(super) state: Vec<u64>,
    /// Scratch state of [`BitLcs::range_lcs`].
    pub(super) range_state: Vec<u64>,
    pub(super) len_b: usize,
}

impl BitLcs {
    pub(super) fn new(b: &[u16], symbols: usize) -> BitLcs {
        let words = b.len().div_ceil(64).max(1);
        let mut masks = vec![0u64; symbols * words];
        for (j, &s) in b.iter().enumerate() {
            if s != 0 {
                masks[s as usize * words + j / 64] |= 1u64 << (j % 64);
            }
        }
        BitLcs {
            words,
            masks,
            state: vec![u64::MAX; words],
            range_state: Vec::new(),
            len_b: b.len(),
        }
    }

    pub(super) fn reset(&mut self) {
        self.state.iter_mut().for_each(|v| *v = u64::MAX);
    }

    pub(super) fn push(&mut self, symbol: u16) {
        if symbol == 0 {
            return;
        }
        let mask = &self.masks[symbol as usize * self.words..][..self.words];
        let mut carry = 0u64;
        for (v, &m) in self.state.iter_mut().zip(mask) {
            // V' = (V + U) | (V - U) with U = V & M; V - U has no borrow.
            let u = *v & m;
            let (sum1, c1) = v.overflowing_add(u);
            let (sum2, c2) = sum1.overflowing_add(carry);
            carry = u64::from(c1 || c2);
            *v = sum2 | (*v & !u);
        }
    }

    /// LCS of `a` and `b[blo..bhi]`, leaving the streaming state alone.
    pub(super) fn range_lcs(&mut self, a: &[u16], blo: usize, bhi: usize) -> u32 {
        if blo >= bhi || a.is_empty() {
            return 0;
        }
        let first = blo / 64;
        let last = (bhi - 1) / 64;
        let range_mask = |k: usize| -> u64 {
            let lo = if k == first { blo % 64 } else { 0 };
            let hi = if k == last { (bhi - 1) % 64 + 1 } else { 64 };
            let upper = if hi == 64 { u64::MAX } else { (1u64 << hi) - 1 };
            upper & !((1u64 << lo) - 1)
        };
        let words = last - first + 1;
        self.range_state.clear();
        self.range_state.resize(words, u64::MAX);
        for &symbol in a {
            if symbol == 0 {
                continue;
            }
            let mask = &self.masks[symbol as usize * self.words..][first..=last];
            let mut carry = 0u64;
            for (w, (v, &m)) in self.range_state.iter_mut().zip(mask).enumerate() {
                // Bits outside the range never match, so they neither carry
                // into the range nor count (carries only move upward).
                let u = *v & m & range_mask(first + w);
                let (sum1, c1) = v.overflowing_add(u);
                let (sum2, c2) = sum1.overflowing_add(carry);
                carry = u64::from(c1 || c2);
                *v = sum2 | (*v & !u);
            }
        }
        self.range_state
            .iter()
            .enumerate()
            .map(|(w, &v)| (!v & range_mask(first + w)).count_ones())
            .sum()
    }

    pub(super) fn length(&self) -> u32 {
        let mut zeros = 0u32;
        for (k, &v) in self.state.iter().enumerate() {
            let bits_here = (self.len_b - (k * 64).min(self.len_b)).min(64);
            if bits_here == 0 {
                break;
            }
            let mask = if bits_here == 64 {
                u64::MAX
            } else {
                (1u64 << bits_here) - 1
            };
            zeros += (!v & mask).count_ones();
        }
        zeros
    }
}
