//! grove's own forward pass for GGUF llama models (SmolLM2), on candle ops,
//! built for one-token-at-a-time decoding at long contexts.
//!
//! candle-transformers' quantized llama grows its key/value cache with a
//! concatenation per token and copies every key and value again to widen the
//! grouped heads, so each token costs time proportional to the context
//! (a moot prompt is about 1,500 tokens). Here the cache is allocated once
//! per request and written in place, and grouped-query attention folds the
//! query heads onto their shared key/value head instead of copying keys, so
//! a step only reads the cache.

use std::io::{Read, Seek};

use candle_core::quantized::{QMatMul, gguf_file};

/// From this many rows on (prompt chunks), a projection dequantizes its
/// weights and runs a float matmul: dequantizing one matrix costs about as
/// much as a handful of int8 rows, and the float kernels are much faster per
/// row than candle's int8 path for SmolLM2's widths.
const DENSE_ROWS: usize = 32;
use candle_core::{D, DType, Device, IndexOp, Module, Result, Tensor};

/// One transformer block.
struct Block {
    attn_norm: Tensor,
    wq: QMatMul,
    wk: QMatMul,
    wv: QMatMul,
    wo: QMatMul,
    ffn_norm: Tensor,
    w_gate: QMatMul,
    w_up: QMatMul,
    w_down: QMatMul,
    /// `(1, kv_heads, capacity, head_dim)`, valid up to `LlamaModel::len`.
    keys: Option<Tensor>,
    values: Option<Tensor>,
}

/// A llama-architecture model with an in-place key/value cache.
pub struct LlamaModel {
    embeddings: Tensor,
    blocks: Vec<Block>,
    output_norm: Tensor,
    output: QMatMul,
    /// `(max_positions, rope_dim / 2)`.
    cos: Tensor,
    sin: Tensor,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    eps: f32,
    max_positions: usize,
    /// Prompt chunks of at least this many rows use float projections
    /// (`usize::MAX`: never).
    dense_rows: usize,
    /// Positions currently held in the cache.
    len: usize,
    capacity: usize,
    device: Device,
}

/// The dimensions of a llama GGUF, read from its metadata: what grove's
/// forward pass (and the memory estimate) needs to know before loading any
/// weights.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LlamaShape {
    pub heads: usize,
    pub kv_heads: usize,
    pub block_count: usize,
    /// `llama.embedding_length`.
    pub width: usize,
    pub head_dim: usize,
    /// `llama.feed_forward_length` (0 when the file does not say).
    pub ffn_width: usize,
    pub eps: f32,
    pub rope_base: f32,
}

impl LlamaShape {
    /// The one rule for which GGUF models this forward pass runs: a dense
    /// `llama` architecture (no mixture of experts) with full rotary
    /// embeddings and consistent head counts. The error says what is not
    /// supported.
    pub fn of(content: &gguf_file::Content) -> std::result::Result<LlamaShape, String> {
        let text = |key: &str| {
            content
                .metadata
                .get(key)
                .and_then(|v| v.to_string().ok())
                .cloned()
        };
        let meta_u32 = |key: &str| -> std::result::Result<usize, String> {
            content
                .metadata
                .get(key)
                .ok_or_else(|| format!("missing metadata {key}"))?
                .to_u32()
                .map(|v| v as usize)
                .map_err(|e| format!("metadata {key}: {e}"))
        };
        let arch = text("general.architecture").unwrap_or_default();
        if arch != "llama" {
            let shown = if arch.is_empty() { "none" } else { &arch };
            return Err(format!(
                "architecture `{shown}` is not supported: the embedded engine runs `llama` models only"
            ));
        }
        if meta_u32("llama.expert_count").unwrap_or(0) > 1 {
            return Err("mixture-of-experts llama models are not supported".into());
        }
        let heads = meta_u32("llama.attention.head_count")?;
        let kv_heads = meta_u32("llama.attention.head_count_kv")?;
        let block_count = meta_u32("llama.block_count")?;
        let width = meta_u32("llama.embedding_length")?;
        let rope_dim = meta_u32("llama.rope.dimension_count")?;
        let eps = content
            .metadata
            .get("llama.attention.layer_norm_rms_epsilon")
            .ok_or_else(|| "missing rms epsilon".to_string())?
            .to_f32()
            .map_err(|e| format!("rms epsilon: {e}"))?;
        let rope_base = content
            .metadata
            .get("llama.rope.freq_base")
            .and_then(|v| v.to_f32().ok())
            .unwrap_or(10_000.0);
        if heads == 0 || kv_heads == 0 || heads % kv_heads != 0 || width % heads != 0 {
            return Err(format!(
                "inconsistent head counts {heads}/{kv_heads} for width {width}"
            ));
        }
        let head_dim = width / heads;
        if rope_dim != head_dim {
            return Err(format!(
                "partial rotary embeddings ({rope_dim} of {head_dim}) are not supported"
            ));
        }
        Ok(LlamaShape {
            heads,
            kv_heads,
            block_count,
            width,
            head_dim,
            ffn_width: meta_u32("llama.feed_forward_length").unwrap_or(0),
            eps,
            rope_base,
        })
    }
}

impl LlamaModel {
    /// Reads the weights of a `llama` GGUF. `max_positions` bounds the
    /// context (rotary tables are built for it).
    pub fn from_gguf<R: Read + Seek>(
        content: &gguf_file::Content,
        reader: &mut R,
        device: &Device,
        max_positions: usize,
    ) -> Result<LlamaModel> {
        let LlamaShape {
            heads,
            kv_heads,
            block_count,
            head_dim,
            eps,
            rope_base,
            ..
        } = LlamaShape::of(content).map_err(candle_core::Error::Msg)?;
        let mut tensor = |name: &str| content.tensor(reader, name, device);
        let embeddings_q = tensor("token_embd.weight")?;
        let embeddings = embeddings_q.dequantize(device)?;
        let output_norm = tensor("output_norm.weight")?.dequantize(device)?;
        // Tied embeddings: SmolLM2 has no separate output matrix.
        let output = match tensor("output.weight") {
            Ok(weight) => weight,
            Err(_) => embeddings_q,
        };
        let mut blocks = Vec::with_capacity(block_count);
        for i in 0..block_count {
            let mut matmul =
                |suffix: &str| QMatMul::from_qtensor(tensor(&format!("blk.{i}.{suffix}"))?);
            let wq = matmul("attn_q.weight")?;
            let wk = matmul("attn_k.weight")?;
            let wv = matmul("attn_v.weight")?;
            let wo = matmul("attn_output.weight")?;
            let w_gate = matmul("ffn_gate.weight")?;
            let w_up = matmul("ffn_up.weight")?;
            let w_down = matmul("ffn_down.weight")?;
            let attn_norm = tensor(&format!("blk.{i}.attn_norm.weight"))?.dequantize(device)?;
            let ffn_norm = tensor(&format!("blk.{i}.ffn_norm.weight"))?.dequantize(device)?;
            blocks.push(Block {
                attn_norm,
                wq,
                wk,
                wv,
                wo,
                ffn_norm,
                w_gate,
                w_up,
                w_down,
                keys: None,
                values: None,
            });
        }
        let (cos, sin) = rotary_tables(head_dim, rope_base, max_positions, device)?;
        Ok(LlamaModel {
            embeddings,
            blocks,
            output_norm,
            output: QMatMul::from_qtensor(output)?,
            cos,
            sin,
            heads,
            kv_heads,
            head_dim,
            eps,
            max_positions,
            dense_rows: DENSE_ROWS,
            len: 0,
            capacity: 0,
            device: device.clone(),
        })
    }

    /// Turns the float projections for prompt chunks on (the default) or
    /// off (every row through candle's int8 kernels, as candle-transformers
    /// does; slower, used to compare the two).
    pub fn set_dense_prefill(&mut self, on: bool) {
        self.dense_rows = if on { DENSE_ROWS } else { usize::MAX };
    }

    /// Positions the model can attend to.
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// Empties the cache and makes room for `positions` tokens.
    pub fn reset(&mut self, positions: usize) -> Result<()> {
        let positions = positions.min(self.max_positions);
        self.len = 0;
        if positions > self.capacity {
            // Round up so similar requests reuse the allocation.
            let capacity = positions
                .div_ceil(256)
                .saturating_mul(256)
                .min(self.max_positions);
            let shape = (1, self.kv_heads, capacity, self.head_dim);
            for block in &mut self.blocks {
                block.keys = Some(Tensor::zeros(shape, DType::F32, &self.device)?);
                block.values = Some(Tensor::zeros(shape, DType::F32, &self.device)?);
            }
            self.capacity = capacity;
        }
        Ok(())
    }

    /// Feeds `tokens` at the next positions and returns the logits for the
    /// last one, shape `(vocab,)`.
    pub fn forward(&mut self, tokens: &[u32]) -> Result<Tensor> {
        let count = tokens.len();
        if count == 0 {
            candle_core::bail!("no tokens to feed");
        }
        let start = self.len;
        if start + count > self.capacity {
            candle_core::bail!(
                "the cache holds {} positions; {} more do not fit after {start}",
                self.capacity,
                count
            );
        }
        let ids = Tensor::new(tokens, &self.device)?;
        let mut hidden = self.embeddings.index_select(&ids, 0)?.unsqueeze(0)?;
        let cos = self.cos.narrow(0, start, count)?;
        let sin = self.sin.narrow(0, start, count)?;
        let group = self.heads / self.kv_heads;
        let mask = if count > 1 {
            Some(causal_mask(count, start, group, &self.device)?)
        } else {
            None
        };
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let dense = count >= self.dense_rows;
        for block in &mut self.blocks {
            let residual = hidden.clone();
            let x = candle_nn::ops::rms_norm(&hidden, &block.attn_norm, self.eps)?;
            let q = project(&block.wq, &x, dense)?
                .reshape((1, count, self.heads, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()?;
            let k = project(&block.wk, &x, dense)?
                .reshape((1, count, self.kv_heads, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()?;
            let v = project(&block.wv, &x, dense)?
                .reshape((1, count, self.kv_heads, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()?;
            let q = candle_nn::rotary_emb::rope_i(&q, &cos, &sin)?;
            let k = candle_nn::rotary_emb::rope_i(&k, &cos, &sin)?;
            let (Some(keys), Some(values)) = (&block.keys, &block.values) else {
                candle_core::bail!("forward before reset");
            };
            keys.slice_set(&k, 2, start)?;
            values.slice_set(&v, 2, start)?;
            let total = start + count;
            let keys = keys.narrow(2, 0, total)?;
            let values = values.narrow(2, 0, total)?;
            // Query heads h = kv * group + r share key/value head kv: fold
            // them into rows of that head instead of copying keys per head.
            let q = q.reshape((1, self.kv_heads, group * count, self.head_dim))?;
            let scores = (q.matmul(&keys.t()?)? * scale)?;
            let scores = match &mask {
                Some(mask) => scores.broadcast_add(mask)?,
                None => scores,
            };
            let weights = candle_nn::ops::softmax_last_dim(&scores)?;
            let attended = weights
                .matmul(&values)?
                .reshape((1, self.heads, count, self.head_dim))?
                .transpose(1, 2)?
                .reshape((1, count, self.heads * self.head_dim))?;
            let x = (project(&block.wo, &attended, dense)? + residual)?;
            let residual = x.clone();
            let normed = candle_nn::ops::rms_norm(&x, &block.ffn_norm, self.eps)?;
            let gate = candle_nn::ops::silu(&project(&block.w_gate, &normed, dense)?)?;
            let up = project(&block.w_up, &normed, dense)?;
            hidden = (project(&block.w_down, &(gate * up)?, dense)? + residual)?;
        }
        self.len = start + count;
        let last = hidden.i((.., count - 1, ..))?;
        let last = candle_nn::ops::rms_norm(&last, &self.output_norm, self.eps)?;
        self.output.forward(&last)?.squeeze(0)
    }
}

/// `x · wᵀ` for `x` of shape `(1, rows, in)`.
fn project(weights: &QMatMul, x: &Tensor, dense: bool) -> Result<Tensor> {
    match weights {
        QMatMul::QTensor(quantized) if dense => {
            let dense = quantized.dequantize(x.device())?;
            x.broadcast_matmul(&dense.t()?)
        }
        _ => weights.forward(x),
    }
}

/// Rotary cos/sin tables, `(positions, head_dim / 2)`.
fn rotary_tables(
    head_dim: usize,
    base: f32,
    positions: usize,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let inverse: Vec<f32> = (0..head_dim)
        .step_by(2)
        .map(|i| 1.0 / base.powf(i as f32 / head_dim as f32))
        .collect();
    let inverse = Tensor::new(inverse.as_slice(), device)?.unsqueeze(0)?;
    let angles = Tensor::arange(0u32, positions as u32, device)?
        .to_dtype(DType::F32)?
        .unsqueeze(1)?
        .matmul(&inverse)?;
    Ok((angles.cos()?, angles.sin()?))
}

/// Additive mask for `count` new queries after `start` cached positions,
/// rows ordered as the folded heads are (`group` copies of the queries).
fn causal_mask(count: usize, start: usize, group: usize, device: &Device) -> Result<Tensor> {
    let total = start + count;
    let mut mask = Vec::with_capacity(group * count * total);
    for _ in 0..group {
        for query in 0..count {
            let visible = start + query;
            mask.extend((0..total).map(|key| {
                if key <= visible {
                    0.0
                } else {
                    f32::NEG_INFINITY
                }
            }));
        }
    }
    Tensor::from_vec(mask, (group * count, total), device)
}

/// The index of the largest logit (used by tests and greedy checks).
pub fn argmax(logits: &Tensor) -> Result<u32> {
    logits.argmax(D::Minus1)?.to_scalar::<u32>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_lets_each_query_see_the_cache_and_earlier_new_tokens() {
        // Two new queries after one cached position, two folded head copies.
        let mask: Vec<Vec<f32>> = causal_mask(2, 1, 2, &Device::Cpu)
            .and_then(|m| m.to_vec2())
            .expect("mask");
        let inf = f32::NEG_INFINITY;
        let expected = vec![
            vec![0.0, 0.0, inf],
            vec![0.0, 0.0, 0.0],
            vec![0.0, 0.0, inf],
            vec![0.0, 0.0, 0.0],
        ];
        assert_eq!(mask, expected);
    }

    #[test]
    fn rotary_tables_start_at_angle_zero() {
        let (cos, sin) = rotary_tables(4, 10_000.0, 3, &Device::Cpu).expect("tables");
        assert_eq!(cos.dims(), &[3, 2]);
        let cos: Vec<Vec<f32>> = cos.to_vec2().expect("cos");
        let sin: Vec<Vec<f32>> = sin.to_vec2().expect("sin");
        assert_eq!(cos[0], vec![1.0, 1.0]);
        assert_eq!(sin[0], vec![0.0, 0.0]);
        // Position 1, first pair: angle 1 rad; second pair: 1/100 rad.
        assert!((sin[1][0] - 1f32.sin()).abs() < 1e-6);
        assert!((sin[1][1] - 0.01f32.sin()).abs() < 1e-6);
    }
}
