//! Converting a GGUF's quantized matrices to another block type (Q4 to
//! Q8_0 for the embedded engine's kernels, or any type an install asks for).

use std::collections::BTreeMap;
use std::io::{Read, Seek, Write};

use candle_core::Device;
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};

use super::ModelError;

/// GGUF `general.file_type` for "mostly Q8_0" (llama.cpp's LLAMA_FTYPE_MOSTLY_Q8_0).
const FILE_TYPE_MOSTLY_Q8_0: u32 = 7;

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
