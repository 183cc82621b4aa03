//! Token sampling for the embedded model: seeded, pure, and with a hook
//! ([`DecodeGuide`]) that may forbid tokens at each step.
//!
//! The generator is our own SplitMix64 rather than a library RNG, so a seed
//! recorded in a transcript replays the same tokens after dependency
//! upgrades.

/// What a guide tells the decoding loop after a token was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuideControl {
    Continue,
    /// End the turn here (e.g. at a sentence end before the word limit).
    Stop,
}

/// A per-step hook into decoding. Guided decoding (grounding by
/// construction) implements it; [`Unguided`] leaves the model alone.
pub trait DecodeGuide {
    /// Called before each sampling step with the step's logits (one per
    /// vocabulary id). Setting an entry to `f32::NEG_INFINITY` forbids that
    /// token; leaving exactly one finite entry forces it.
    fn constrain(&mut self, logits: &mut [f32]);
    /// Called with each token chosen, in order.
    fn accept(&mut self, token: u32) -> GuideControl;
}

/// The guide that allows everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct Unguided;

impl DecodeGuide for Unguided {
    fn constrain(&mut self, _logits: &mut [f32]) {}
    fn accept(&mut self, _token: u32) -> GuideControl {
        GuideControl::Continue
    }
}

/// Forbids every token that would repeat an `n`-token sequence already in
/// `history` (a small model's loops: the same line over and over), unless
/// that would forbid every token still allowed (a guide's forced tag may
/// legitimately repeat). Returns how many tokens it forbade.
pub fn forbid_repeated_ngrams(history: &[u32], n: usize, logits: &mut [f32]) -> usize {
    if n < 2 || history.len() < n {
        return 0;
    }
    let tail = &history[history.len() - (n - 1)..];
    let mut banned: Vec<(usize, f32)> = Vec::new();
    for window in history.windows(n) {
        if &window[..n - 1] == tail {
            let id = window[n - 1] as usize;
            if let Some(&l) = logits.get(id)
                && l != f32::NEG_INFINITY
                && !banned.iter().any(|&(b, _)| b == id)
            {
                banned.push((id, l));
            }
        }
    }
    if banned.is_empty() {
        return 0;
    }
    for &(id, _) in &banned {
        logits[id] = f32::NEG_INFINITY;
    }
    if logits.iter().all(|&l| l == f32::NEG_INFINITY) {
        for &(id, l) in &banned {
            logits[id] = l;
        }
        return 0;
    }
    banned.len()
}

/// SplitMix64: tiny, fast, and stable forever for a given seed.
#[derive(Debug, Clone)]
pub struct SeededRng {
    state: u64,
}

impl SeededRng {
    pub fn new(seed: u64) -> SeededRng {
        SeededRng { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Why no token could be sampled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SampleError {
    #[error("every token is forbidden at this step")]
    NothingAllowed,
    #[error("logits contain NaN")]
    NotANumber,
}

/// Picks tokens from logits: greedy at temperature 0, else softmax at the
/// temperature, optionally cut to the smallest set whose probability reaches
/// `top_p`.
#[derive(Debug, Clone)]
pub struct Sampler {
    temperature: f32,
    top_p: Option<f32>,
    rng: SeededRng,
    /// Reused between steps to avoid an allocation per token.
    scratch: Vec<(u32, f32)>,
}

impl Sampler {
    pub fn new(seed: u64, temperature: f32, top_p: Option<f32>) -> Sampler {
        Sampler {
            temperature: if temperature.is_finite() {
                temperature.max(0.0)
            } else {
                0.0
            },
            top_p: top_p.filter(|p| p.is_finite() && *p > 0.0 && *p < 1.0),
            rng: SeededRng::new(seed),
            scratch: Vec::new(),
        }
    }

    /// Samples one token id. Forbidden tokens (`-inf`) are never chosen.
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32, SampleError> {
        if logits.iter().any(|l| l.is_nan()) {
            return Err(SampleError::NotANumber);
        }
        let (best, best_logit) = logits
            .iter()
            .copied()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .ok_or(SampleError::NothingAllowed)?;
        if best_logit == f32::NEG_INFINITY {
            return Err(SampleError::NothingAllowed);
        }
        if self.temperature <= 1e-6 {
            return Ok(best as u32);
        }
        let inv_t = 1.0 / self.temperature;
        self.scratch.clear();
        let mut total = 0f32;
        for (id, &logit) in logits.iter().enumerate() {
            if logit == f32::NEG_INFINITY {
                continue;
            }
            let weight = ((logit - best_logit) * inv_t).exp();
            if weight > 0.0 {
                self.scratch.push((id as u32, weight));
                total += weight;
            }
        }
        if let Some(top_p) = self.top_p {
            // Keep the most likely tokens until their mass reaches top_p.
            self.scratch.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));
            let mut kept = 0f32;
            let mut cut = self.scratch.len();
            for (i, &(_, weight)) in self.scratch.iter().enumerate() {
                kept += weight;
                if kept >= top_p * total {
                    cut = i + 1;
                    break;
                }
            }
            self.scratch.truncate(cut);
            total = kept.min(total);
        }
        let mut target = self.rng.next_f64() as f32 * total;
        for &(id, weight) in &self.scratch {
            if target < weight {
                return Ok(id);
            }
            target -= weight;
        }
        // Rounding left the target past the end: the last candidate it is.
        self.scratch
            .last()
            .map(|&(id, _)| id)
            .ok_or(SampleError::NothingAllowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_picks_the_largest_logit() {
        let mut sampler = Sampler::new(1, 0.0, None);
        assert_eq!(sampler.sample(&[0.1, 3.0, -2.0]).unwrap(), 1);
    }

    #[test]
    fn same_seed_same_tokens_and_other_seed_differs() {
        let logits: Vec<f32> = (0..50).map(|i| (i % 7) as f32 * 0.3).collect();
        let run = |seed| {
            let mut sampler = Sampler::new(seed, 1.0, None);
            (0..40)
                .map(|_| sampler.sample(&logits).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn forbidden_tokens_are_never_sampled() {
        let mut logits = vec![5.0f32; 10];
        for (i, l) in logits.iter_mut().enumerate() {
            if i != 3 && i != 6 {
                *l = f32::NEG_INFINITY;
            }
        }
        let mut sampler = Sampler::new(3, 1.5, Some(0.9));
        for _ in 0..200 {
            let token = sampler.sample(&logits).unwrap();
            assert!(token == 3 || token == 6, "{token}");
        }
        let all_forbidden = vec![f32::NEG_INFINITY; 4];
        assert_eq!(
            sampler.sample(&all_forbidden),
            Err(SampleError::NothingAllowed)
        );
        assert_eq!(sampler.sample(&[]), Err(SampleError::NothingAllowed));
    }

    #[test]
    fn top_p_cuts_the_tail() {
        // Token 0 holds ~88% of the mass at temperature 1: top_p 0.5 keeps it alone.
        let logits = [4.0f32, 2.0, 0.0, 0.0];
        let mut sampler = Sampler::new(11, 1.0, Some(0.5));
        for _ in 0..100 {
            assert_eq!(sampler.sample(&logits).unwrap(), 0);
        }
        let mut wide = Sampler::new(11, 1.0, None);
        let picks: Vec<u32> = (0..300).map(|_| wide.sample(&logits).unwrap()).collect();
        assert!(picks.iter().any(|&t| t != 0));
    }

    #[test]
    fn sampling_follows_the_distribution() {
        // Two tokens with probabilities 0.75 / 0.25 at temperature 1.
        let logits = [(3.0f32).ln(), 0.0];
        let mut sampler = Sampler::new(99, 1.0, None);
        let n = 20_000;
        let zeros = (0..n).filter(|_| sampler.sample(&logits) == Ok(0)).count();
        let share = zeros as f64 / n as f64;
        assert!((share - 0.75).abs() < 0.02, "{share}");
    }

    #[test]
    fn repeated_ngrams_are_forbidden_unless_nothing_else_is_left() {
        // History 1 2 3 ... 1 2: with n = 3, token 3 would repeat `1 2 3`.
        let history = [1u32, 2, 3, 4, 1, 2];
        let mut logits = vec![0.0f32; 6];
        assert_eq!(forbid_repeated_ngrams(&history, 3, &mut logits), 1);
        assert_eq!(logits[3], f32::NEG_INFINITY);
        assert!(logits[5].is_finite());
        // n = 4 needs `4 1 2` before: nothing to forbid.
        let mut logits = vec![0.0f32; 6];
        assert_eq!(forbid_repeated_ngrams(&history, 4, &mut logits), 0);
        // When the repeat is the only allowed token, it stays.
        let mut only = vec![f32::NEG_INFINITY; 6];
        only[3] = 1.0;
        assert_eq!(forbid_repeated_ngrams(&history, 3, &mut only), 0);
        assert_eq!(only[3], 1.0);
    }

    #[test]
    fn nan_logits_are_an_error() {
        let mut sampler = Sampler::new(1, 1.0, None);
        assert_eq!(
            sampler.sample(&[0.0, f32::NAN]),
            Err(SampleError::NotANumber)
        );
    }
}
