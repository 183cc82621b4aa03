//! grove's own forward pass for GGUF llama models (SmolLM2), on candle ops
//! and grove's Q8_0 kernels (crate `grove-kernels`), built for
//! one-token-at-a-time decoding at long contexts.
//!
//! candle-transformers' quantized llama grows its key/value cache with a
//! concatenation per token and copies every key and value again to widen the
//! grouped heads, so each token costs time proportional to the context
//! (a moot prompt is about 1,500 tokens). Here the cache is allocated once
//! per request and written in place, and grouped-query attention folds the
//! query heads onto their shared key/value head instead of copying keys, so
//! a step only reads the cache.
//!
//! The cache outlives a request: [`LlamaModel::prefill`] keeps the keys and
//! values of the longest prefix the new prompt shares with the last one, in
//! whole prompt chunks (see [`PREFILL_CHUNK`]), and computes the rest.

use std::io::{Read, Seek};
use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor, gguf_file};

use grove_kernels::{Isa, Q8Matrix, Q8Rows, SharedBytes};

/// Prompt tokens fed to the model per forward pass; bounds the attention
/// scratch memory for long prompts. Chunks start at multiples of it
/// (positions 0, 512, 1024, ...) whether or not a prefix was reused, so
/// every chunk is the same computation in both cases: candle's float
/// matmul (the attention products) picks its blocking and kernels by the
/// matrices' sizes (the depth of its accumulation blocks changes with the
/// rows under 64, a horizontal kernel serves products under 256 elements),
/// so a token's attention changes in its last bits with the rows computed
/// beside it. Recomputing whole chunks keeps reuse exact.
pub const PREFILL_CHUNK: usize = 512;

/// With candle's kernels, from this many rows on (prompt chunks), a
/// projection dequantizes its weights and runs a float matmul: candle's
/// int8 path is slow for many rows at SmolLM2's widths.
const DENSE_ROWS: usize = 32;
use candle_core::{D, DType, Device, IndexOp, Module, Result, Tensor};

/// How the forward pass multiplies its quantized matrices.
#[derive(Debug, Clone, Copy)]
pub struct ForwardOptions {
    /// Q8_0 matrices through grove's kernels (`grove_kernels`); off: every
    /// matrix through candle's `QMatMul` (the reference path).
    pub grove_kernels: bool,
    /// With candle's kernels: prompt chunks through float projections.
    pub dense_prefill: bool,
    /// Threads of the forward pass's pool (at least 1).
    pub threads: usize,
}

/// A weight matrix and the kernel that multiplies it.
enum Projection {
    /// Q8_0, through grove's kernels.
    Q8(Arc<Q8Matrix>),
    /// Any type candle reads, through candle's `QMatMul`.
    Candle(QMatMul),
}

impl Projection {
    fn new(tensor: QTensor, options: &ForwardOptions) -> Result<Projection> {
        match q8_matrix(&tensor, options)? {
            Some(matrix) => Ok(Projection::Q8(Arc::new(matrix))),
            None => Ok(Projection::Candle(QMatMul::from_qtensor(tensor)?)),
        }
    }
}

/// `tensor` as a grove Q8_0 matrix (a copy of its blocks), when it is one
/// and grove's kernels are on.
fn q8_matrix(tensor: &QTensor, options: &ForwardOptions) -> Result<Option<Q8Matrix>> {
    if !options.grove_kernels || tensor.dtype() != GgmlDType::Q8_0 {
        return Ok(None);
    }
    let (rows, cols) = tensor.shape().dims2()?;
    let data = tensor.data()?.into_owned();
    Q8Matrix::new(rows, cols, data)
        .map(Some)
        .map_err(kernel_error)
}

fn kernel_error(e: grove_kernels::KernelError) -> candle_core::Error {
    candle_core::Error::Msg(e.to_string())
}

/// Where [`LlamaModel::from_gguf`] reads the weights: through the reader,
/// or, for Q8_0 matrices under grove's kernels when the whole file's bytes
/// are at hand (mapped), in place.
struct WeightSource<'a, R> {
    content: &'a gguf_file::Content,
    reader: &'a mut R,
    file: Option<&'a SharedBytes>,
    device: &'a Device,
    options: &'a ForwardOptions,
}

impl<R: Read + Seek> WeightSource<'_, R> {
    fn tensor(&mut self, name: &str) -> Result<QTensor> {
        self.content.tensor(self.reader, name, self.device)
    }

    /// A small tensor (a norm's weights) as floats.
    fn floats(&mut self, name: &str) -> Result<Tensor> {
        self.tensor(name)?.dequantize(self.device)
    }

    /// The Q8_0 matrix `name` read in place in the file, when it is one,
    /// grove's kernels are on and the file is mapped.
    fn in_place(&self, name: &str) -> Result<Option<Q8Matrix>> {
        let (Some(file), true) = (self.file, self.options.grove_kernels) else {
            return Ok(None);
        };
        let Some(info) = self.content.tensor_infos.get(name) else {
            candle_core::bail!("no tensor {name} in the file");
        };
        if info.ggml_dtype != GgmlDType::Q8_0 {
            return Ok(None);
        }
        let (rows, cols) = info.shape.dims2()?;
        let start = self
            .content
            .tensor_data_offset
            .checked_add(info.offset)
            .and_then(|at| usize::try_from(at).ok())
            .ok_or_else(|| candle_core::Error::Msg(format!("tensor {name}: offset")))?;
        Q8Matrix::in_place(rows, cols, Arc::clone(file), start)
            .map(Some)
            .map_err(kernel_error)
    }

    fn projection(&mut self, name: &str) -> Result<Projection> {
        match self.in_place(name)? {
            Some(matrix) => Ok(Projection::Q8(Arc::new(matrix))),
            None => Projection::new(self.tensor(name)?, self.options),
        }
    }

    /// The embedding table and the output matrix (the same one when the
    /// file has no `output.weight`: SmolLM2's embeddings are tied).
    fn embeddings(&mut self) -> Result<(Embeddings, Projection)> {
        let name = "token_embd.weight";
        let matrix = match self.in_place(name)? {
            Some(matrix) => matrix,
            None => {
                let table = self.tensor(name)?;
                match q8_matrix(&table, self.options)? {
                    Some(matrix) => matrix,
                    None => {
                        let dense = Embeddings::Dense(table.dequantize(self.device)?);
                        let tied = Projection::Candle(QMatMul::from_qtensor(table)?);
                        return Ok((dense, self.output(tied)?));
                    }
                }
            }
        };
        let matrix = Arc::new(matrix);
        let output = self.output(Projection::Q8(Arc::clone(&matrix)))?;
        Ok((Embeddings::Q8(matrix), output))
    }

    /// `output.weight`, or the tied embeddings when there is none.
    fn output(&mut self, tied: Projection) -> Result<Projection> {
        if self.content.tensor_infos.contains_key("output.weight") {
            self.projection("output.weight")
        } else {
            Ok(tied)
        }
    }

    fn block(&mut self, i: usize) -> Result<Block> {
        let name = |suffix: &str| format!("blk.{i}.{suffix}");
        Ok(Block {
            attn_norm: self.floats(&name("attn_norm.weight"))?,
            wq: self.projection(&name("attn_q.weight"))?,
            wk: self.projection(&name("attn_k.weight"))?,
            wv: self.projection(&name("attn_v.weight"))?,
            wo: self.projection(&name("attn_output.weight"))?,
            ffn_norm: self.floats(&name("ffn_norm.weight"))?,
            w_gate: self.projection(&name("ffn_gate.weight"))?,
            w_up: self.projection(&name("ffn_up.weight"))?,
            w_down: self.projection(&name("ffn_down.weight"))?,
            keys: None,
            values: None,
        })
    }
}

/// The token embedding table.
enum Embeddings {
    /// Q8_0 rows, dequantized per looked-up token (the table is also the
    /// tied output matrix: one copy, a quarter of the float table's size).
    Q8(Arc<Q8Matrix>),
    /// Floats (other types), `(vocab, width)`.
    Dense(Tensor),
}

/// One transformer block.
struct Block {
    attn_norm: Tensor,
    wq: Projection,
    wk: Projection,
    wv: Projection,
    wo: Projection,
    ffn_norm: Tensor,
    w_gate: Projection,
    w_up: Projection,
    w_down: Projection,
    /// `(1, kv_heads, capacity, head_dim)`, valid up to `LlamaModel::len`.
    keys: Option<Tensor>,
    values: Option<Tensor>,
}

/// A llama-architecture model with an in-place key/value cache.
pub struct LlamaModel {
    embeddings: Embeddings,
    blocks: Vec<Block>,
    output_norm: Tensor,
    output: Projection,
    /// `(max_positions, rope_dim / 2)`.
    cos: Tensor,
    sin: Tensor,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    eps: f32,
    max_positions: usize,
    /// With candle's kernels, prompt chunks of at least this many rows use
    /// float projections (`usize::MAX`: never).
    dense_rows: usize,
    /// grove's kernels' instruction set (detected at load).
    isa: Isa,
    /// Every forward runs in this pool: grove's kernels and candle's ops
    /// split their work over its threads.
    pool: Arc<rayon::ThreadPool>,
    /// Positions currently held in the cache.
    len: usize,
    capacity: usize,
    /// The last prompt [`LlamaModel::prefill`] ran, whose keys and values
    /// the cache holds at positions `0..tokens.len()` (later positions hold
    /// its answer, which later prompts do not reuse).
    prompt: Option<CachedPrompt>,
    device: Device,
}

/// A prompt whose keys and values are in the cache.
struct CachedPrompt {
    tokens: Vec<u32>,
    /// The logits after its last token, for a request with the same prompt.
    logits: Vec<f32>,
}

/// What [`LlamaModel::prefill`] did.
#[derive(Debug, Clone)]
pub struct Prefill {
    /// The logits after the prompt's last token (`vocab` long).
    pub logits: Vec<f32>,
    /// Prompt tokens run through the model (the rest were reused).
    pub computed: usize,
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
    /// context (rotary tables are built for it). `file`, the whole file's
    /// bytes (mapped), lets Q8_0 matrices be read in place, not copied.
    pub fn from_gguf<R: Read + Seek>(
        content: &gguf_file::Content,
        reader: &mut R,
        file: Option<&SharedBytes>,
        device: &Device,
        max_positions: usize,
        options: ForwardOptions,
    ) -> Result<LlamaModel> {
        let shape = LlamaShape::of(content).map_err(candle_core::Error::Msg)?;
        let mut source = WeightSource {
            content,
            reader,
            file,
            device,
            options: &options,
        };
        let (embeddings, output) = source.embeddings()?;
        let output_norm = source.floats("output_norm.weight")?;
        let blocks = (0..shape.block_count)
            .map(|i| source.block(i))
            .collect::<Result<Vec<_>>>()?;
        let (cos, sin) = rotary_tables(shape.head_dim, shape.rope_base, max_positions, device)?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(options.threads.max(1))
            .thread_name(|i| format!("grove-model-{i}"))
            .build()
            .map_err(|e| candle_core::Error::Msg(format!("model threads: {e}")))?;
        Ok(LlamaModel {
            embeddings,
            blocks,
            output_norm,
            output,
            cos,
            sin,
            heads: shape.heads,
            kv_heads: shape.kv_heads,
            head_dim: shape.head_dim,
            eps: shape.eps,
            max_positions,
            dense_rows: if options.dense_prefill {
                DENSE_ROWS
            } else {
                usize::MAX
            },
            isa: Isa::detect(),
            pool: Arc::new(pool),
            len: 0,
            capacity: 0,
            prompt: None,
            device: device.clone(),
        })
    }

    /// The instruction set of grove's kernels and the forward's threads.
    pub fn kernels(&self) -> (Isa, usize) {
        (self.isa, self.pool.current_num_threads())
    }

    /// Positions the model can attend to.
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// Empties the cache and makes room for `positions` tokens.
    pub fn reset(&mut self, positions: usize) -> Result<()> {
        self.prompt = None;
        self.len = 0;
        self.reserve(positions, 0)
    }

    /// Runs `prompt` from position 0 and makes room for `positions` tokens
    /// in all (prompt and answer). With `reuse`, the keys and values of the
    /// longest prefix `prompt` shares with the last prompt run here are
    /// kept, rounded down to whole chunks of [`PREFILL_CHUNK`] (all of it
    /// when the prompt is the same, whose last logits are kept too); the
    /// logits are then bit for bit those of a run from scratch. It holds no
    /// memory beyond the cache a request of `positions` needs anyway, the
    /// last prompt's ids and one row of logits.
    pub fn prefill(&mut self, prompt: &[u32], positions: usize, reuse: bool) -> Result<Prefill> {
        if prompt.is_empty() {
            candle_core::bail!("no tokens to feed");
        }
        // Taken: if this prefill fails, the cache holds no known prompt.
        let previous = self.prompt.take();
        let kept = match &previous {
            Some(cached) if reuse => reusable_prefix(&cached.tokens, prompt),
            _ => 0,
        };
        self.reserve(positions, kept)?;
        self.len = kept;
        let logits = match previous {
            Some(cached) if kept == prompt.len() => cached.logits,
            _ => {
                let mut logits = Vec::new();
                for chunk in prompt[kept..].chunks(PREFILL_CHUNK) {
                    logits = self.forward(chunk)?;
                }
                logits
            }
        };
        self.prompt = Some(CachedPrompt {
            tokens: prompt.to_vec(),
            logits: logits.clone(),
        });
        Ok(Prefill {
            logits,
            computed: prompt.len() - kept,
        })
    }

    /// Makes room for `positions` tokens, keeping the first `keep` cached
    /// positions when the cache grows.
    fn reserve(&mut self, positions: usize, keep: usize) -> Result<()> {
        let positions = positions.min(self.max_positions);
        if positions <= self.capacity {
            return Ok(());
        }
        // Round up so similar requests reuse the allocation.
        let capacity = positions
            .div_ceil(256)
            .saturating_mul(256)
            .min(self.max_positions);
        let shape = (1, self.kv_heads, capacity, self.head_dim);
        let keep = keep.min(self.capacity);
        for block in &mut self.blocks {
            for cache in [&mut block.keys, &mut block.values] {
                let grown = Tensor::zeros(shape, DType::F32, &self.device)?;
                if let Some(old) = cache.as_ref()
                    && keep > 0
                {
                    grown.slice_set(&old.narrow(2, 0, keep)?.contiguous()?, 2, 0)?;
                }
                *cache = Some(grown);
            }
        }
        self.capacity = capacity;
        Ok(())
    }

    /// Feeds `tokens` at the next positions and returns the logits for the
    /// last one (`vocab` long), in the forward's thread pool.
    pub fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        let pool = self.pool.clone();
        pool.install(|| self.forward_here(tokens))
    }

    fn forward_here(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
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
        let mut hidden = self.embed(tokens)?;
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
        let (isa, device) = (self.isa, self.device.clone());
        for block in &mut self.blocks {
            let residual = hidden.clone();
            let x = candle_nn::ops::rms_norm(&hidden, &block.attn_norm, self.eps)?;
            let [q, k, v] = project(isa, &device, [&block.wq, &block.wk, &block.wv], &x, dense)?;
            let q = q
                .reshape((1, count, self.heads, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()?;
            let k = k
                .reshape((1, count, self.kv_heads, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()?;
            let v = v
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
            let [attended] = project(isa, &device, [&block.wo], &attended, dense)?;
            let x = (attended + residual)?;
            let residual = x.clone();
            let normed = candle_nn::ops::rms_norm(&x, &block.ffn_norm, self.eps)?;
            let [gate, up] = project(isa, &device, [&block.w_gate, &block.w_up], &normed, dense)?;
            let gate = candle_nn::ops::silu(&gate)?;
            let [down] = project(isa, &device, [&block.w_down], &(gate * up)?, dense)?;
            hidden = (down + residual)?;
        }
        self.len = start + count;
        let last = hidden.i((.., count - 1..count, ..))?;
        let last = candle_nn::ops::rms_norm(&last, &self.output_norm, self.eps)?;
        let [logits] = project(isa, &device, [&self.output], &last, false)?;
        logits.flatten_all()?.to_vec1()
    }

    /// The embeddings of `tokens`, `(1, count, width)`.
    fn embed(&self, tokens: &[u32]) -> Result<Tensor> {
        match &self.embeddings {
            Embeddings::Dense(table) => {
                let ids = Tensor::new(tokens, &self.device)?;
                table.index_select(&ids, 0)?.unsqueeze(0)
            }
            Embeddings::Q8(table) => {
                let width = table.cols();
                let mut rows = vec![0f32; tokens.len() * width];
                for (&token, row) in tokens.iter().zip(rows.chunks_exact_mut(width)) {
                    if token as usize >= table.rows() {
                        candle_core::bail!("token {token} is outside the vocabulary");
                    }
                    table.dequantize_row(token as usize, row);
                }
                Tensor::from_vec(rows, (1, tokens.len(), width), &self.device)
            }
        }
    }
}

/// `x · wᵀ` for each of `weights`, `x` of shape `(1, rows, in)`; grove's
/// kernels quantize `x` once for all of them.
fn project<const N: usize>(
    isa: Isa,
    device: &Device,
    weights: [&Projection; N],
    x: &Tensor,
    dense: bool,
) -> Result<[Tensor; N]> {
    let (_, count, width) = x.dims3()?;
    // A GGUF whose shapes disagree is an error here, not a kernel's panic.
    for weight in &weights {
        if let Projection::Q8(matrix) = weight
            && (matrix.cols() != width || width % grove_kernels::BLOCK != 0)
        {
            candle_core::bail!(
                "a projection of {} columns applied to activations {width} wide",
                matrix.cols()
            );
        }
    }
    let quantized = if weights.iter().any(|w| matches!(w, Projection::Q8(_))) {
        let values: Vec<f32> = x.flatten_all()?.to_vec1()?;
        Some(Q8Rows::quantize(&values, width))
    } else {
        None
    };
    let mut out = Vec::with_capacity(N);
    for weight in weights {
        out.push(match (weight, &quantized) {
            (Projection::Q8(matrix), Some(rows)) => {
                let mut product = vec![0f32; count * matrix.rows()];
                grove_kernels::matmul(isa, matrix, rows, &mut product);
                Tensor::from_vec(product, (1, count, matrix.rows()), device)?
            }
            (Projection::Q8(_), None) => candle_core::bail!("activations not quantized"),
            (Projection::Candle(QMatMul::QTensor(q)), _) if dense => {
                let dense = q.dequantize(x.device())?;
                x.broadcast_matmul(&dense.t()?)?
            }
            (Projection::Candle(matmul), _) => matmul.forward(x)?,
        });
    }
    out.try_into()
        .map_err(|_| candle_core::Error::Msg("projection count".into()))
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

/// How much of `previous`'s cache a run of `prompt` can keep: all of it for
/// the same prompt, else the common prefix rounded down to whole chunks
/// (at least one token is left to compute, for the logits).
fn reusable_prefix(previous: &[u32], prompt: &[u32]) -> usize {
    if previous == prompt {
        return prompt.len();
    }
    let common = previous
        .iter()
        .zip(prompt)
        .take_while(|(a, b)| a == b)
        .count();
    common.min(prompt.len().saturating_sub(1)) / PREFILL_CHUNK * PREFILL_CHUNK
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
    fn a_prefix_is_reused_in_whole_chunks_or_whole() {
        let c = PREFILL_CHUNK;
        let old: Vec<u32> = (0..(2 * c + 100) as u32).collect();
        assert_eq!(reusable_prefix(&old, &old), old.len(), "the same prompt");
        let mut new = old.clone();
        new[2 * c + 10] = u32::MAX;
        assert_eq!(reusable_prefix(&old, &new), 2 * c, "parts in chunk 3");
        new[c + 1] = u32::MAX;
        assert_eq!(reusable_prefix(&old, &new), c, "parts in chunk 2");
        new[3] = u32::MAX;
        assert_eq!(reusable_prefix(&old, &new), 0, "parts in chunk 1");
        // A longer prompt keeps the full chunks the old one computed.
        let longer: Vec<u32> = (0..(3 * c) as u32).collect();
        assert_eq!(reusable_prefix(&old, &longer), 2 * c);
        // A shorter one ending on a chunk boundary computes its last chunk.
        assert_eq!(reusable_prefix(&old, &old[..2 * c]), c);
        assert_eq!(reusable_prefix(&old[..2 * c], &old), 2 * c);
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

#[cfg(test)]
mod kernel_tests {
    use super::*;

    #[test]
    fn grove_kernels_match_candle_qmatmul() {
        let device = Device::Cpu;
        let (rows, cols) = (64, 576);
        let w = Tensor::randn(0f32, 1.0, (rows, cols), &device).expect("w");
        let q = QTensor::quantize(&w, GgmlDType::Q8_0).expect("q");
        let options = ForwardOptions {
            grove_kernels: true,
            dense_prefill: false,
            threads: 1,
        };
        let ours = Projection::new(QTensor::quantize(&w, GgmlDType::Q8_0).expect("q"), &options)
            .expect("ours");
        let theirs = Projection::Candle(QMatMul::from_qtensor(q).expect("theirs"));
        for count in [1usize, 3, 40] {
            let x = Tensor::randn(0f32, 1.0, (1, count, cols), &device).expect("x");
            let [a] = project(Isa::detect(), &device, [&ours], &x, false).expect("a");
            let [b] = project(Isa::detect(), &device, [&theirs], &x, false).expect("b");
            let a: Vec<f32> = a.flatten_all().unwrap().to_vec1().unwrap();
            let b: Vec<f32> = b.flatten_all().unwrap().to_vec1().unwrap();
            let worst = a
                .iter()
                .zip(&b)
                .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
            let scale = b.iter().fold(0f32, |m, x| m.max(x.abs()));
            println!("count {count}: worst {worst} scale {scale}");
            assert!(worst <= 1e-4 * scale, "count {count}: {worst} of {scale}");
        }
        let Projection::Q8(matrix) = &ours else {
            panic!("Q8")
        };
        let dense: Vec<Vec<f32>> = QTensor::quantize(&w, GgmlDType::Q8_0)
            .unwrap()
            .dequantize(&device)
            .unwrap()
            .to_vec2()
            .unwrap();
        let mut row = vec![0f32; cols];
        matrix.dequantize_row(5, &mut row);
        assert_eq!(row, dense[5]);
    }
}
