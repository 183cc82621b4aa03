//! Whether a GGUF model fits in this machine's memory, decided from its file
//! size and header before any weight is read, so a model too large gives a
//! clear error instead of an allocation failure (an abort) halfway through
//! loading.

use std::path::Path;

use super::ModelError;

/// Room for the runtime besides the weights and the cache: llama.cpp's
/// compute buffers for a 512-token batch, the logits, the guide's
/// vocabulary trie.
const RUNTIME_BYTES: u64 = 128 << 20;

/// What the memory estimate needs of a model, from its GGUF header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelShape {
    /// Transformer blocks.
    pub block_count: u64,
    /// Key (and value) width per position per block: key/value heads times
    /// the head width.
    pub kv_width: u64,
    /// Positions the model was trained for.
    pub context_length: u64,
    /// Tokens in the vocabulary.
    pub vocab: u64,
}

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
/// weights (llama.cpp maps the file, and its pages count in the process's
/// resident memory once touched, as every weight is), a key/value cache of
/// f16 for `positions` cache cells, and the runtime.
pub fn estimate(file_bytes: u64, shape: &ModelShape, positions: usize) -> u64 {
    let f16_bytes = 2u64;
    let cache = 2u64
        .saturating_mul(shape.block_count)
        .saturating_mul(shape.kv_width)
        .saturating_mul(positions as u64)
        .saturating_mul(f16_bytes);
    let logits = shape.vocab.saturating_mul(4);
    file_bytes
        .saturating_add(cache)
        .saturating_add(logits)
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

    fn smollm2_135m() -> ModelShape {
        ModelShape {
            block_count: 30,
            kv_width: 3 * 64,
            context_length: 8192,
            vocab: 49_152,
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
    fn the_default_model_estimate_holds_file_cache_and_runtime() {
        // SmolLM2-135M Q4_1: a 98 MB file; two sequences of 4,096 positions
        // hold 30 blocks x 192 x 2 (key, value) x 2 bytes each: 94 MB each.
        let need = estimate(98_000_000, &smollm2_135m(), 2 * 4096);
        let cache = 2 * 30 * 192 * 2 * 8192u64;
        assert_eq!(need, 98_000_000 + cache + 49_152 * 4 + RUNTIME_BYTES);
        assert!(need < 450_000_000, "{need}");
        assert!(estimate(98_000_000, &smollm2_135m(), 4096) < need);
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
