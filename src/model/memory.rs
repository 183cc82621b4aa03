//! Whether a GGUF model fits in this machine's memory, decided from its file
//! size and header before any weight is read, so a model too large gives a
//! clear error instead of an allocation failure (an abort) halfway through
//! loading.

use std::path::Path;

use super::ModelError;
use super::llama::LlamaShape;

/// Room for the runtime besides the weights: the tokenizer, the guide's
/// vocabulary trie, logits and scratch tensors (SmolLM2-135M measures about
/// 60 MB of these).
const RUNTIME_BYTES: u64 = 64 << 20;

/// The machine's memory, from `/proc/meminfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryInfo {
    /// `MemTotal`.
    pub total: u64,
    /// `MemAvailable`: what can be allocated without swapping.
    pub available: u64,
}

/// Reads `/proc/meminfo`; `None` where there is none (not Linux) or it does
/// not parse, and then no check is made.
pub fn machine_memory() -> Option<MemoryInfo> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text)
}

/// `MemTotal` and `MemAvailable` of a `/proc/meminfo` text (values in kB).
pub fn parse_meminfo(text: &str) -> Option<MemoryInfo> {
    let field = |name: &str| {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            kb.checked_mul(1024)
        })
    };
    Some(MemoryInfo {
        total: field("MemTotal")?,
        available: field("MemAvailable")?,
    })
}

/// What the embedded backend holds in memory for a model: the file's
/// weights (mapped, and read in place where they are Q8_0; pages of a
/// mapped file count in the process's resident memory once touched, as
/// every weight is), a key/value cache of f32 for the whole context, and
/// the runtime. An embedding table that is not Q8_0 once loaded
/// (`embeddings_q8_0` false) is also held as f32 (it is dequantized at
/// load), with one projection matrix as f32 for prompt chunks (candle's
/// kernels); a Q8_0 table stays quantized and is also the tied output
/// matrix, and grove's kernels dequantize no matrix. A Q4_1 file converted
/// to Q8_0 at load also holds the converted copy (about 1.7 times the
/// file).
pub fn estimate(
    file_bytes: u64,
    shape: &LlamaShape,
    vocab: usize,
    context: usize,
    converts_q4_1: bool,
    embeddings_q8_0: bool,
) -> u64 {
    let f32_bytes = 4u64;
    let width = shape.width as u64;
    let (embeddings, dense_matrix) = if embeddings_q8_0 {
        (0, 0)
    } else {
        (
            (vocab as u64) * width * f32_bytes,
            width * (shape.ffn_width.max(shape.width) as u64) * f32_bytes,
        )
    };
    let cache = 2
        * (shape.block_count as u64)
        * (shape.kv_heads as u64)
        * (shape.head_dim as u64)
        * (context as u64)
        * f32_bytes;
    let conversion = if converts_q4_1 {
        file_bytes.saturating_mul(17) / 10
    } else {
        0
    };
    file_bytes
        .saturating_add(embeddings)
        .saturating_add(cache)
        .saturating_add(dense_matrix)
        .saturating_add(conversion)
        .saturating_add(RUNTIME_BYTES)
}

/// Whether `need` bytes can be loaded now: refused when more than the
/// memory available (`MemAvailable`), with both figures in the error.
pub fn check_load(path: &Path, need: u64, memory: Option<MemoryInfo>) -> Result<(), ModelError> {
    let Some(memory) = memory else {
        return Ok(());
    };
    if need <= memory.available {
        return Ok(());
    }
    Err(ModelError::TooLarge(format!(
        "{} needs about {} of memory to run, and this machine has {} available ({} in all); \
         not loading it. Free memory, or use a smaller model (`grove model install`), or the \
         openai backend on a bigger machine",
        path.display(),
        mib(need),
        mib(memory.available),
        mib(memory.total)
    )))
}

/// Whether `need` bytes could ever be loaded here: refused when more than
/// the machine's whole memory (`MemTotal`). Installing a model that fits in
/// all but not in what is free now is allowed (memory frees up).
pub fn check_install(path: &Path, need: u64, memory: Option<MemoryInfo>) -> Result<(), ModelError> {
    let Some(memory) = memory else {
        return Ok(());
    };
    if need <= memory.total {
        return Ok(());
    }
    Err(ModelError::TooLarge(format!(
        "{} needs about {} of memory to run, more than this machine's {} in all; not installing it",
        path.display(),
        mib(need),
        mib(memory.total)
    )))
}

/// Bytes as MiB for messages.
pub fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes.div_ceil(1 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn smollm2_135m() -> LlamaShape {
        LlamaShape {
            heads: 9,
            kv_heads: 3,
            block_count: 30,
            width: 576,
            head_dim: 64,
            ffn_width: 1536,
            eps: 1e-5,
            rope_base: 100_000.0,
        }
    }

    #[test]
    fn meminfo_parses_total_and_available() {
        let text = "MemTotal:       24683568 kB\nMemFree:  1 kB\nMemAvailable:   22920852 kB\n";
        let info = parse_meminfo(text).expect("parses");
        assert_eq!(info.total, 24_683_568 * 1024);
        assert_eq!(info.available, 22_920_852 * 1024);
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn the_default_model_estimate_is_near_its_measured_peak() {
        // SmolLM2-135M Q8_0: a 145 MB file, PEAK_MB MB peak RSS measured at a
        // 1,353-token request; the estimate holds the whole 4,096 context.
        let need = estimate(145_000_000, &smollm2_135m(), 49_152, 4096, false, true);
        assert!(need > 300_000_000, "{need}");
        assert!(need < 500_000_000, "{need}");
        // On candle's kernels the table is also held as floats.
        let dense = estimate(145_000_000, &smollm2_135m(), 49_152, 4096, false, false);
        assert!(dense > need + 100_000_000, "{dense}");
        let converting = estimate(98_000_000, &smollm2_135m(), 49_152, 4096, true, true);
        assert!(converting > need, "{converting}");
    }

    #[test]
    fn too_large_is_refused_with_both_figures() {
        let memory = Some(MemoryInfo {
            total: 8 << 30,
            available: 2 << 30,
        });
        let path = Path::new("/m/big.gguf");
        assert!(check_load(path, 1 << 30, memory).is_ok());
        let err = check_load(path, 3 << 30, memory).unwrap_err().to_string();
        assert!(
            err.contains("3072 MiB") && err.contains("2048 MiB"),
            "{err}"
        );
        assert!(check_install(path, 3 << 30, memory).is_ok());
        let err = check_install(path, 9 << 30, memory)
            .unwrap_err()
            .to_string();
        assert!(err.contains("8192 MiB in all"), "{err}");
        assert!(check_load(path, u64::MAX, None).is_ok());
    }
}
