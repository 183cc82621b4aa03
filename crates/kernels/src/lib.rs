//! Q8_0 matrix products for grove's llama forward: weights in GGUF's Q8_0
//! blocks times activations quantized to Q8_0 per row (as llama.cpp and
//! candle do), one kernel for one token and for prompt chunks, with
//! AVX-512 VNNI, AVX-VNNI and AVX2 paths picked at run time and a scalar
//! fallback.
//!
//! candle's `QMatMul` has no VNNI path, and for many rows at SmolLM2's
//! widths (576, not a multiple of 256) it is slow enough that grove used to
//! dequantize whole matrices for prompts. Here a prompt chunk is multiplied
//! block by block, each weight row read once for four activation rows.
//!
//! A matrix reads its blocks where they are: in a buffer of its own, or in
//! place in a shared one (the GGUF file mapped into memory), so loading a
//! model copies no weight.

use std::sync::Arc;

use rayon::prelude::*;

/// Values per Q8_0 block.
pub const BLOCK: usize = 32;
/// Bytes of one Q8_0 block in GGUF: an f16 scale, then 32 signed bytes.
pub const BLOCK_BYTES: usize = 34;
/// Activation rows multiplied against one weight row at a time.
const TILE: usize = 4;

/// Errors building a [`Q8Matrix`].
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("a Q8_0 matrix of {rows}x{cols} needs {need} bytes, got {got}")]
    Size {
        rows: usize,
        cols: usize,
        need: usize,
        got: usize,
    },
    #[error("Q8_0 rows must be a multiple of {BLOCK} wide, not {0}")]
    Width(usize),
    #[error("a Q8_0 matrix at byte {start} runs past the end of its {len}-byte buffer")]
    Range { start: usize, len: usize },
}

/// Bytes several matrices can read in place: a mapped file, or an owned
/// buffer.
pub type SharedBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// The instruction set a kernel runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// Portable Rust (any CPU).
    Scalar,
    /// AVX2 + FMA + F16C (x86-64).
    Avx2,
    /// AVX2 with the 256-bit VNNI dot product of AVX-VNNI.
    AvxVnni,
    /// AVX2 with the 256-bit VNNI dot product of AVX-512 VNNI (+VL).
    Avx512Vnni,
}

impl Isa {
    /// The best kernel this CPU runs.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            let avx2 = is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("f16c");
            if avx2
                && is_x86_feature_detected!("avx512vnni")
                && is_x86_feature_detected!("avx512vl")
            {
                return Isa::Avx512Vnni;
            }
            if avx2 && is_x86_feature_detected!("avxvnni") {
                return Isa::AvxVnni;
            }
            if avx2 {
                return Isa::Avx2;
            }
        }
        Isa::Scalar
    }

    /// Every kernel this CPU can run, the scalar one first (for tests).
    pub fn available() -> Vec<Isa> {
        let best = Isa::detect();
        let mut all = vec![Isa::Scalar];
        if best != Isa::Scalar {
            all.push(Isa::Avx2);
        }
        if best == Isa::Avx512Vnni {
            #[cfg(target_arch = "x86_64")]
            if is_x86_feature_detected!("avxvnni") {
                all.push(Isa::AvxVnni);
            }
        }
        if best != Isa::Scalar && best != Isa::Avx2 {
            all.push(best);
        }
        all
    }
}

/// A `rows x cols` matrix in GGUF's Q8_0 layout (row-major blocks), at
/// `start` in its buffer.
pub struct Q8Matrix {
    rows: usize,
    cols: usize,
    bytes: SharedBytes,
    start: usize,
}

impl Q8Matrix {
    /// A matrix holding `data`, exactly its blocks.
    pub fn new(rows: usize, cols: usize, data: Vec<u8>) -> Result<Q8Matrix, KernelError> {
        let need = Q8Matrix::bytes_of(rows, cols)?;
        if data.len() != need {
            return Err(KernelError::Size {
                rows,
                cols,
                need,
                got: data.len(),
            });
        }
        Ok(Q8Matrix {
            rows,
            cols,
            bytes: Arc::new(data),
            start: 0,
        })
    }

    /// A matrix whose blocks are `bytes[start..]`, read in place.
    pub fn in_place(
        rows: usize,
        cols: usize,
        bytes: SharedBytes,
        start: usize,
    ) -> Result<Q8Matrix, KernelError> {
        let need = Q8Matrix::bytes_of(rows, cols)?;
        let len = (*bytes).as_ref().len();
        if start.checked_add(need).is_none_or(|end| end > len) {
            return Err(KernelError::Range { start, len });
        }
        Ok(Q8Matrix {
            rows,
            cols,
            bytes,
            start,
        })
    }

    /// The size of a `rows x cols` matrix's blocks.
    pub fn bytes_of(rows: usize, cols: usize) -> Result<usize, KernelError> {
        if !cols.is_multiple_of(BLOCK) {
            return Err(KernelError::Width(cols));
        }
        let size = || rows.checked_mul(cols / BLOCK)?.checked_mul(BLOCK_BYTES);
        size().ok_or(KernelError::Size {
            rows,
            cols,
            need: usize::MAX,
            got: 0,
        })
    }

    /// The matrix's blocks (bounds checked at construction).
    fn data(&self) -> &[u8] {
        let len = self.rows * (self.cols / BLOCK) * BLOCK_BYTES;
        &(*self.bytes).as_ref()[self.start..self.start + len]
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `row` as floats (embedding lookup); `out` is `cols` long.
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        let blocks = self.cols / BLOCK;
        let bytes = &self.data()[row * blocks * BLOCK_BYTES..(row + 1) * blocks * BLOCK_BYTES];
        for (block, values) in bytes
            .chunks_exact(BLOCK_BYTES)
            .zip(out.chunks_exact_mut(BLOCK))
        {
            let scale = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
            for (value, &q) in values.iter_mut().zip(&block[2..]) {
                *value = scale * f32::from(q as i8);
            }
        }
    }
}

/// Rows of activations quantized to Q8_0: per block a scale (an f16 value,
/// kept as f32) and 32 signed bytes.
pub struct Q8Rows {
    count: usize,
    cols: usize,
    scales: Vec<f32>,
    quants: Vec<i8>,
}

impl Q8Rows {
    /// Quantizes `x`, `count` rows of `cols` floats, as ggml's
    /// `quantize_row_q8_0` does: scale = max |x| / 127 rounded to f16,
    /// values rounded half away from zero.
    pub fn quantize(x: &[f32], cols: usize) -> Q8Rows {
        assert!(
            cols.is_multiple_of(BLOCK) && x.len().is_multiple_of(cols),
            "activation shape"
        );
        let count = x.len() / cols;
        let mut scales = Vec::with_capacity(x.len() / BLOCK);
        let mut quants = vec![0i8; x.len()];
        for (values, out) in x.chunks_exact(BLOCK).zip(quants.chunks_exact_mut(BLOCK)) {
            let amax = values.iter().fold(0f32, |m, v| m.max(v.abs()));
            let scale = amax / 127.0;
            let inverse = if scale != 0.0 { 1.0 / scale } else { 0.0 };
            for (q, v) in out.iter_mut().zip(values) {
                *q = (v * inverse).round() as i8;
            }
            scales.push(round_to_f16(scale));
        }
        Q8Rows {
            count,
            cols,
            scales,
            quants,
        }
    }

    pub fn count(&self) -> usize {
        self.count
    }
}

/// `out[t * rows + r] = x_t · w_r` for every activation row `t` and weight
/// row `r`, split over the current rayon pool's threads by weight rows.
pub fn matmul(isa: Isa, w: &Q8Matrix, x: &Q8Rows, out: &mut [f32]) {
    assert_eq!(w.cols, x.cols, "matmul widths");
    let (rows, count) = (w.rows, x.count);
    assert_eq!(out.len(), rows * count, "matmul output");
    let threads = rayon::current_num_threads().max(1);
    // Several pieces per thread so a thread slowed by other work on the
    // machine does not hold the rest back.
    let chunk = rows.div_ceil(threads * 4).max(16);
    if count == 1 {
        let work = |(index, piece): (usize, &mut [f32])| {
            rows_times(isa, w, x, index * chunk, piece, 1);
        };
        if threads == 1 {
            out.chunks_mut(chunk).enumerate().for_each(work);
        } else {
            out.par_chunks_mut(chunk).enumerate().for_each(work);
        }
        return;
    }
    // Rows-major scratch (one weight row's results for every activation
    // row together), transposed at the end.
    let mut by_row = vec![0f32; rows * count];
    let work = |(index, piece): (usize, &mut [f32])| {
        rows_times(isa, w, x, index * chunk, piece, count);
    };
    if threads == 1 {
        by_row.chunks_mut(chunk * count).enumerate().for_each(work);
    } else {
        by_row
            .par_chunks_mut(chunk * count)
            .enumerate()
            .for_each(work);
    }
    for (r, results) in by_row.chunks_exact(count).enumerate() {
        for (t, &v) in results.iter().enumerate() {
            out[t * rows + r] = v;
        }
    }
}

/// Weight rows from `first` on, `out.len() / count` of them, each times
/// every activation row; `out` is `(row, activation)` ordered.
fn rows_times(isa: Isa, w: &Q8Matrix, x: &Q8Rows, first: usize, out: &mut [f32], count: usize) {
    let blocks = w.cols / BLOCK;
    let row_bytes = blocks * BLOCK_BYTES;
    let data = w.data();
    for (i, results) in out.chunks_exact_mut(count).enumerate() {
        let r = first + i;
        let weights = &data[r * row_bytes..(r + 1) * row_bytes];
        let mut t = 0;
        while t < count {
            let n = (count - t).min(TILE);
            let mut tile = [0f32; TILE];
            dot_tile(isa, weights, x, t, n, blocks, &mut tile);
            results[t..t + n].copy_from_slice(&tile[..n]);
            t += n;
        }
    }
}

/// One weight row (`blocks` Q8_0 blocks) times activation rows
/// `t .. t + n` (`n <= TILE`).
fn dot_tile(
    isa: Isa,
    weights: &[u8],
    x: &Q8Rows,
    t: usize,
    n: usize,
    blocks: usize,
    out: &mut [f32; TILE],
) {
    debug_assert!(weights.len() == blocks * BLOCK_BYTES);
    debug_assert!(t + n <= x.count);
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 | Isa::AvxVnni | Isa::Avx512Vnni => {
            // SAFETY: `isa` came from `Isa::detect`/`available`, so the CPU
            // has these features; the slices cover every block read (the
            // debug assertions above state the bounds).
            unsafe {
                let (q, s) = (x.quants.as_ptr(), x.scales.as_ptr());
                let (qa, sa) = (
                    [0, 1, 2, 3].map(|j| q.add((t + j.min(n - 1)) * x.cols)),
                    [0, 1, 2, 3].map(|j| s.add((t + j.min(n - 1)) * blocks)),
                );
                let sums = match (isa, n) {
                    (Isa::Avx512Vnni, 1) => {
                        x86::tile_avx512vnni::<1>(weights.as_ptr(), blocks, qa, sa)
                    }
                    (Isa::Avx512Vnni, _) => {
                        x86::tile_avx512vnni::<4>(weights.as_ptr(), blocks, qa, sa)
                    }
                    (Isa::AvxVnni, 1) => x86::tile_avxvnni::<1>(weights.as_ptr(), blocks, qa, sa),
                    (Isa::AvxVnni, _) => x86::tile_avxvnni::<4>(weights.as_ptr(), blocks, qa, sa),
                    (_, 1) => x86::tile_avx2::<1>(weights.as_ptr(), blocks, qa, sa),
                    _ => x86::tile_avx2::<4>(weights.as_ptr(), blocks, qa, sa),
                };
                out[..n].copy_from_slice(&sums[..n]);
            }
        }
        _ => {
            for (j, o) in out.iter_mut().enumerate().take(n) {
                let row = t + j;
                let quants = &x.quants[row * x.cols..(row + 1) * x.cols];
                let scales = &x.scales[row * blocks..(row + 1) * blocks];
                let mut sum = 0f32;
                for (k, block) in weights.chunks_exact(BLOCK_BYTES).enumerate() {
                    let scale = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
                    let dot: i32 = block[2..]
                        .iter()
                        .zip(&quants[k * BLOCK..(k + 1) * BLOCK])
                        .map(|(&w, &a)| i32::from(w as i8) * i32::from(a))
                        .sum();
                    sum += dot as f32 * (scale * scales[k]);
                }
                *o = sum;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{BLOCK, BLOCK_BYTES};

    /// One kernel per instruction set: the same loop, with the 32-byte
    /// signed dot product done by `$dot(abs(w), sign(x, w))`.
    macro_rules! tile_kernel {
        ($name:ident, $features:literal, $dot:ident) => {
            /// One weight row times `T` activation rows (pointers to their
            /// quants and scales); returns the `T` dot products.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name<const T: usize>(
                weights: *const u8,
                blocks: usize,
                quants: [*const i8; 4],
                scales: [*const f32; 4],
            ) -> [f32; 4] {
                let mut acc = [_mm256_setzero_ps(); T];
                for k in 0..blocks {
                    // SAFETY (whole body): the caller guarantees `blocks`
                    // blocks behind `weights` and each activation row.
                    unsafe {
                        let block = weights.add(k * BLOCK_BYTES);
                        let scale_bits = (block as *const u16).read_unaligned();
                        let w_scale =
                            _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(scale_bits))));
                        let w = _mm256_loadu_si256(block.add(2) as *const __m256i);
                        let w_abs = _mm256_sign_epi8(w, w);
                        for j in 0..T {
                            let a = _mm256_loadu_si256(quants[j].add(k * BLOCK) as *const __m256i);
                            let a_signed = _mm256_sign_epi8(a, w);
                            let dot: __m256i = $dot(w_abs, a_signed);
                            let scale = _mm256_set1_ps(w_scale * *scales[j].add(k));
                            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[j]);
                        }
                    }
                }
                let mut out = [0f32; 4];
                for j in 0..T {
                    // SAFETY: AVX is on in this kernel.
                    out[j] = unsafe { horizontal_sum(acc[j]) };
                }
                out
            }
        };
    }

    #[inline(always)]
    unsafe fn dot_avx2(u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: only called from kernels compiled with AVX2.
        unsafe { _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)) }
    }

    #[inline(always)]
    unsafe fn dot_avxvnni(u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: only called from kernels compiled with AVX-VNNI.
        unsafe { _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s) }
    }

    #[inline(always)]
    unsafe fn dot_avx512vnni(u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: only called from kernels compiled with AVX-512 VNNI + VL.
        unsafe { _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s) }
    }

    tile_kernel!(tile_avx2, "avx2,fma,f16c", dot_avx2);
    tile_kernel!(tile_avxvnni, "avx2,fma,f16c,avxvnni", dot_avxvnni);
    tile_kernel!(
        tile_avx512vnni,
        "avx2,fma,f16c,avx512f,avx512vnni,avx512vl",
        dot_avx512vnni
    );

    #[inline(always)]
    unsafe fn horizontal_sum(v: __m256) -> f32 {
        // SAFETY: only called from kernels compiled with AVX.
        unsafe {
            let pair = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
            let pair = _mm_add_ps(pair, _mm_movehl_ps(pair, pair));
            _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)))
        }
    }
}

/// IEEE half to float (normal, subnormal, zero, infinity, NaN).
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits >> 15) << 31;
    let exponent = u32::from((bits >> 10) & 0x1f);
    let mantissa = u32::from(bits & 0x3ff);
    let magnitude = match exponent {
        0 => {
            let value = mantissa as f32 * 2f32.powi(-24);
            return if sign != 0 { -value } else { value };
        }
        0x1f => 0x7f80_0000 | (mantissa << 13),
        _ => ((exponent + 112) << 23) | (mantissa << 13),
    };
    f32::from_bits(sign | magnitude)
}

/// `x` rounded to the nearest f16 value (ties to even), as a float: the
/// scale an f16 field would store. `x` is finite and non-negative here.
fn round_to_f16(x: f32) -> f32 {
    const MIN_NORMAL: f32 = 6.103_515_6e-5; // 2^-14
    if x < MIN_NORMAL {
        // Subnormal halves are multiples of 2^-24.
        let step = 2f32.powi(-24);
        return (x / step).round_ties_even() * step;
    }
    if x >= 65_520.0 {
        return f32::INFINITY;
    }
    let bits = x.to_bits();
    let rounded = bits + 0x0fff + ((bits >> 13) & 1);
    f32::from_bits(rounded & !0x1fff)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random stream in [-1, 1).
    fn noise(seed: u64, n: usize) -> Vec<f32> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 23) as f32) - 1.0
            })
            .collect()
    }

    /// Quantizes a float matrix into GGUF Q8_0 bytes.
    fn q8_matrix(values: &[f32], rows: usize, cols: usize) -> Q8Matrix {
        let q = Q8Rows::quantize(values, cols);
        let mut data = Vec::new();
        for (k, block) in q.quants.chunks_exact(BLOCK).enumerate() {
            data.extend_from_slice(&f32_to_f16_bits(q.scales[k]).to_le_bytes());
            data.extend(block.iter().map(|&v| v as u8));
        }
        Q8Matrix::new(rows, cols, data).expect("matrix")
    }

    /// Exact for values `round_to_f16` produced (normal range).
    fn f32_to_f16_bits(x: f32) -> u16 {
        if x == 0.0 {
            return 0;
        }
        let bits = x.to_bits();
        let exponent = ((bits >> 23) & 0xff) as i32 - 127 + 15;
        assert!(exponent > 0, "normal halves only in this test");
        ((exponent as u16) << 10) | ((bits >> 13) & 0x3ff) as u16
    }

    #[test]
    fn halves_convert_both_ways() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(round_to_f16(1.0 + 2f32.powi(-11)), 1.0, "tie to even");
        assert_eq!(
            round_to_f16(1.0 + 3.0 * 2f32.powi(-11)),
            1.0 + 2f32.powi(-9)
        );
        let x = 0.123_456_7;
        assert!((round_to_f16(x) - x).abs() <= x * 2f32.powi(-11));
    }

    #[test]
    fn every_kernel_gives_the_scalar_products() {
        let (rows, cols) = (37, 96);
        let weights = q8_matrix(&noise(1, rows * cols), rows, cols);
        for count in [1, 3, 4, 9] {
            let x = Q8Rows::quantize(&noise(2 + count as u64, count * cols), cols);
            let mut reference = vec![0f32; rows * count];
            matmul(Isa::Scalar, &weights, &x, &mut reference);
            for isa in Isa::available() {
                let mut out = vec![0f32; rows * count];
                matmul(isa, &weights, &x, &mut out);
                for (a, b) in out.iter().zip(&reference) {
                    assert!(
                        (a - b).abs() <= 1e-4 * b.abs().max(1.0),
                        "{isa:?}: {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn products_approximate_the_float_ones() {
        let (rows, cols) = (5, 64);
        let w = noise(7, rows * cols);
        let xs = noise(8, cols);
        let weights = q8_matrix(&w, rows, cols);
        let mut row = vec![0f32; cols];
        weights.dequantize_row(2, &mut row);
        assert!(
            row.iter()
                .zip(&w[2 * cols..])
                .all(|(a, b)| (a - b).abs() < 0.01)
        );
        let mut out = vec![0f32; rows];
        matmul(
            Isa::detect(),
            &weights,
            &Q8Rows::quantize(&xs, cols),
            &mut out,
        );
        for (r, &o) in out.iter().enumerate() {
            let exact: f32 = w[r * cols..(r + 1) * cols]
                .iter()
                .zip(&xs)
                .map(|(a, b)| a * b)
                .sum();
            assert!((o - exact).abs() < 0.05, "row {r}: {o} vs {exact}");
        }
    }

    #[test]
    fn a_short_buffer_is_refused() {
        assert!(Q8Matrix::new(2, 32, vec![0; 67]).is_err());
        assert!(Q8Matrix::new(1, 33, vec![0; 34]).is_err());
        let shared: SharedBytes = Arc::new(vec![0u8; 100]);
        assert!(Q8Matrix::in_place(2, 32, shared.clone(), 32).is_ok());
        assert!(Q8Matrix::in_place(2, 32, shared.clone(), 33).is_err());
        assert!(Q8Matrix::in_place(2, 32, shared, usize::MAX).is_err());
    }

    #[test]
    fn a_matrix_in_place_reads_its_range() {
        let (rows, cols) = (3, 64);
        let owned = q8_matrix(&noise(9, rows * cols), rows, cols);
        let mut buffer = vec![0xAAu8; 5];
        buffer.extend_from_slice(owned.data());
        buffer.extend_from_slice(&[0x55; 7]);
        let shared = Q8Matrix::in_place(rows, cols, Arc::new(buffer), 5).expect("in place");
        let x = Q8Rows::quantize(&noise(10, 2 * cols), cols);
        let (mut a, mut b) = (vec![0f32; 2 * rows], vec![0f32; 2 * rows]);
        matmul(Isa::detect(), &owned, &x, &mut a);
        matmul(Isa::detect(), &shared, &x, &mut b);
        assert_eq!(a, b);
    }
}
