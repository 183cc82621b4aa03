//! A GGUF writer for tests (format version 3, little-endian): metadata of
//! the few value types tests need and F32 tensors, aligned as llama.cpp
//! reads them. With [`tiny_model`], a model llama.cpp loads and runs: one
//! block, width 64, a byte-level BPE vocabulary of 259 tokens with ChatML
//! markers, weights from a fixed pseudo-random pattern.

/// One metadata value.
#[derive(Debug, Clone)]
enum Value {
    U32(u32),
    F32(f32),
    Str(String),
    Strs(Vec<String>),
    I32s(Vec<i32>),
}

impl Value {
    fn type_id(&self) -> u32 {
        match self {
            Value::U32(_) => 4,
            Value::F32(_) => 6,
            Value::Str(_) => 8,
            Value::Strs(_) | Value::I32s(_) => 9,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Value::U32(v) => out.extend(v.to_le_bytes()),
            Value::F32(v) => out.extend(v.to_le_bytes()),
            Value::Str(s) => write_str(out, s),
            Value::Strs(items) => {
                out.extend(8u32.to_le_bytes());
                out.extend((items.len() as u64).to_le_bytes());
                for s in items {
                    write_str(out, s);
                }
            }
            Value::I32s(items) => {
                out.extend(5u32.to_le_bytes());
                out.extend((items.len() as u64).to_le_bytes());
                for v in items {
                    out.extend(v.to_le_bytes());
                }
            }
        }
    }
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// One F32 tensor: its name, its dimensions (innermost first, as GGUF
/// lists them) and its values.
struct Tensor {
    name: String,
    dims: Vec<u64>,
    values: Vec<f32>,
}

const ALIGNMENT: usize = 32;

/// The bytes of a GGUF file holding `metadata` and `tensors`.
fn write(metadata: &[(String, Value)], tensors: &[Tensor]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(b"GGUF");
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend((metadata.len() as u64).to_le_bytes());
    for (key, value) in metadata {
        write_str(&mut out, key);
        out.extend(value.type_id().to_le_bytes());
        value.write(&mut out);
    }
    let mut offset = 0usize;
    for tensor in tensors {
        write_str(&mut out, &tensor.name);
        out.extend((tensor.dims.len() as u32).to_le_bytes());
        for d in &tensor.dims {
            out.extend(d.to_le_bytes());
        }
        out.extend(0u32.to_le_bytes()); // GGML_TYPE_F32
        out.extend((offset as u64).to_le_bytes());
        offset += (tensor.values.len() * 4).next_multiple_of(ALIGNMENT);
    }
    out.resize(out.len().next_multiple_of(ALIGNMENT), 0);
    for tensor in tensors {
        let start = out.len();
        for v in &tensor.values {
            out.extend(v.to_le_bytes());
        }
        out.resize(start + (out.len() - start).next_multiple_of(ALIGNMENT), 0);
    }
    out
}

/// GPT-2's byte-level alphabet: the character standing for each byte.
fn byte_level_chars() -> Vec<char> {
    let mut next = 256u32;
    (0..=255u8)
        .map(|b| {
            if matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF) {
                char::from(b)
            } else {
                let c = char::from_u32(next).expect("char");
                next += 1;
                c
            }
        })
        .collect()
}

/// A tiny llama-family GGUF (`architecture`: `llama`, or another name to
/// test refusals) that llama.cpp loads and runs.
pub fn tiny_model(architecture: &str) -> Vec<u8> {
    let (width, ffn, kv_width) = (64u64, 128u64, 32u64);
    let mut tokens = vec![
        "<|endoftext|>".to_string(),
        "<|im_start|>".to_string(),
        "<|im_end|>".to_string(),
    ];
    tokens.extend(byte_level_chars().into_iter().map(String::from));
    let vocab = tokens.len() as u64;
    let mut seed = 1u32;
    let mut tensor = |name: &str, rows: u64, cols: u64| {
        let values = (0..rows * cols)
            .map(|_| {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                ((seed >> 9) as f32 / (1u32 << 23) as f32 - 0.5) * 0.2
            })
            .collect();
        Tensor {
            name: name.into(),
            dims: vec![cols, rows],
            values,
        }
    };
    let ones = |name: &str| Tensor {
        name: name.into(),
        dims: vec![width],
        values: vec![1.0; width as usize],
    };
    let tensors = vec![
        tensor("token_embd.weight", vocab, width),
        ones("output_norm.weight"),
        ones("blk.0.attn_norm.weight"),
        ones("blk.0.ffn_norm.weight"),
        tensor("blk.0.attn_q.weight", width, width),
        tensor("blk.0.attn_k.weight", kv_width, width),
        tensor("blk.0.attn_v.weight", kv_width, width),
        tensor("blk.0.attn_output.weight", width, width),
        tensor("blk.0.ffn_gate.weight", ffn, width),
        tensor("blk.0.ffn_up.weight", ffn, width),
        tensor("blk.0.ffn_down.weight", width, ffn),
    ];
    let p = architecture;
    let metadata = vec![
        ("general.architecture".into(), Value::Str(p.into())),
        ("general.name".into(), Value::Str("tiny-test".into())),
        ("general.file_type".into(), Value::U32(0)),
        (format!("{p}.context_length"), Value::U32(256)),
        (format!("{p}.embedding_length"), Value::U32(width as u32)),
        (format!("{p}.feed_forward_length"), Value::U32(ffn as u32)),
        (format!("{p}.block_count"), Value::U32(1)),
        (format!("{p}.attention.head_count"), Value::U32(2)),
        (format!("{p}.attention.head_count_kv"), Value::U32(1)),
        (format!("{p}.rope.dimension_count"), Value::U32(32)),
        (
            format!("{p}.attention.layer_norm_rms_epsilon"),
            Value::F32(1e-5),
        ),
        ("tokenizer.ggml.model".into(), Value::Str("gpt2".into())),
        ("tokenizer.ggml.pre".into(), Value::Str("default".into())),
        ("tokenizer.ggml.tokens".into(), Value::Strs(tokens)),
        (
            "tokenizer.ggml.token_type".into(),
            Value::I32s((0..vocab).map(|i| if i < 3 { 3 } else { 1 }).collect()),
        ),
        ("tokenizer.ggml.merges".into(), Value::Strs(Vec::new())),
        ("tokenizer.ggml.bos_token_id".into(), Value::U32(0)),
        ("tokenizer.ggml.eos_token_id".into(), Value::U32(2)),
        (
            "tokenizer.chat_template".into(),
            Value::Str(
                "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
                    .into(),
            ),
        ),
    ];
    write(&metadata, &tensors)
}
