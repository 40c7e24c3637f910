//! The llama-family forward pass, tuned for a small model on a few CPU cores.
//!
//! The same computation as candle-transformers' `quantized_llama` (the tests compare the
//! two), with three changes that matter at this size:
//!
//! - **Prefill through f32 matrix products.** candle's quantized kernels are fastest for
//!   one row (decoding) but slow for many (a prompt); with hidden sizes such as
//!   SmolLM2's 576, which are not multiples of 256, its repacked fast paths do not
//!   apply. For a prompt each weight matrix is dequantized on the fly (a few MB, freed
//!   at once) and multiplied with the f32 kernels, about three times faster.
//! - **A growing key/value cache written in place**, instead of concatenating the whole
//!   cache at every token.
//! - **Grouped-query attention without copying keys and values per query head**: the
//!   query heads that share a key/value head are folded into one matrix product.

use std::sync::Arc;

use candle_core::quantized::{QMatMul, QTensor, gguf_file};
use candle_core::{DType, Device, IndexOp, Module, Result, Tensor};
use candle_nn::kv_cache::Cache;

/// The longest sequence (prompt and answer) the model is run on.
pub const MAX_SEQ_LEN: usize = 4096;

/// Rows from which a product goes through dequantized f32 weights.
const PREFILL_ROWS: usize = 8;

/// The key/value cache grows by this many positions at a time.
const CACHE_STEP: usize = 512;

/// A weight matrix: quantized kernels for a few rows, f32 products for many.
struct Linear {
    weights: Arc<QTensor>,
    quantized: QMatMul,
    /// Rows from which the f32 products are used.
    prefill_rows: usize,
}

impl Linear {
    fn new(weights: QTensor) -> Result<Self> {
        let weights = Arc::new(weights);
        Ok(Self {
            quantized: QMatMul::from_arc(weights.clone())?,
            weights,
            prefill_rows: PREFILL_ROWS,
        })
    }

    /// `x` is `(batch, rows, in)`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if x.dim(1)? < self.prefill_rows || !matches!(self.quantized, QMatMul::QTensor(_)) {
            return self.quantized.forward(x);
        }
        let w = self.weights.dequantize(x.device())?;
        x.broadcast_matmul(&w.t()?)
    }
}

struct Layer {
    wq: Linear,
    wk: Linear,
    wv: Linear,
    wo: Linear,
    gate: Linear,
    up: Linear,
    down: Linear,
    attention_norm: Tensor,
    ffn_norm: Tensor,
    keys: Cache,
    values: Cache,
}

/// The model's weights and its attention cache.
pub struct Llama {
    embeddings: candle_nn::Embedding,
    layers: Vec<Layer>,
    norm: Tensor,
    output: Linear,
    n_head: usize,
    n_kv_head: usize,
    head_dim: usize,
    eps: f32,
    neox: bool,
    cos: Tensor,
    sin: Tensor,
}

fn metadata_u32(content: &gguf_file::Content, key: &str) -> Result<usize> {
    match content.metadata.get(key) {
        Some(v) => Ok(v.to_u32()? as usize),
        None => candle_core::bail!("the GGUF metadata has no `{key}`"),
    }
}

impl Llama {
    /// Reads a llama-family model from a GGUF file.
    pub fn from_gguf<R: std::io::Seek + std::io::Read>(
        content: gguf_file::Content,
        reader: &mut R,
        device: &Device,
    ) -> Result<Self> {
        let n_head = metadata_u32(&content, "llama.attention.head_count")?;
        let n_kv_head = metadata_u32(&content, "llama.attention.head_count_kv")?;
        let block_count = metadata_u32(&content, "llama.block_count")?;
        let embedding_length = metadata_u32(&content, "llama.embedding_length")?;
        let rope_dim = metadata_u32(&content, "llama.rope.dimension_count")?;
        let eps = match content
            .metadata
            .get("llama.attention.layer_norm_rms_epsilon")
        {
            Some(v) => v.to_f32()?,
            None => candle_core::bail!("the GGUF metadata has no rms epsilon"),
        };
        let freq_base = content
            .metadata
            .get("llama.rope.freq_base")
            .and_then(|v| v.to_f32().ok())
            .unwrap_or(10_000.0);
        let arch = content
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        // Interleaved rotary pairs for llama and mistral; "neox" halves for the others
        // llama.cpp lists (the ones a llama-shaped GGUF may carry).
        let neox = matches!(
            arch.as_str(),
            "qwen" | "qwen2" | "qwen3" | "falcon" | "phi2" | "phi3" | "stablelm" | "olmo2"
        );
        if n_kv_head == 0 || n_head % n_kv_head != 0 {
            candle_core::bail!("{n_head} query heads cannot share {n_kv_head} key/value heads");
        }
        let head_dim = embedding_length / n_head;
        let (cos, sin) = rotary_tables(rope_dim, freq_base, device)?;

        let embeddings_q = content.tensor(reader, "token_embd.weight", device)?;
        let embeddings =
            candle_nn::Embedding::new(embeddings_q.dequantize(device)?, embedding_length);
        let norm = content
            .tensor(reader, "output_norm.weight", device)?
            .dequantize(device)?;
        let output = match content.tensor(reader, "output.weight", device) {
            Ok(t) => t,
            Err(_) => embeddings_q,
        };
        let mut layers = Vec::with_capacity(block_count);
        for i in 0..block_count {
            let mut tensor =
                |name: &str| content.tensor(reader, &format!("blk.{i}.{name}"), device);
            layers.push(Layer {
                wq: Linear::new(tensor("attn_q.weight")?)?,
                wk: Linear::new(tensor("attn_k.weight")?)?,
                wv: Linear::new(tensor("attn_v.weight")?)?,
                wo: Linear::new(tensor("attn_output.weight")?)?,
                gate: Linear::new(tensor("ffn_gate.weight")?)?,
                up: Linear::new(tensor("ffn_up.weight")?)?,
                down: Linear::new(tensor("ffn_down.weight")?)?,
                attention_norm: tensor("attn_norm.weight")?.dequantize(device)?,
                ffn_norm: tensor("ffn_norm.weight")?.dequantize(device)?,
                keys: Cache::new(1, CACHE_STEP),
                values: Cache::new(1, CACHE_STEP),
            });
        }
        Ok(Self {
            embeddings,
            layers,
            norm,
            output: Linear::new(output)?,
            n_head,
            n_kv_head,
            head_dim,
            eps,
            neox,
            cos,
            sin,
        })
    }

    /// With `true`, prompts go through the quantized kernels too, as in
    /// candle-transformers' `quantized_llama` (the same scores to rounding, about three
    /// times slower); with `false` (the default), through f32 products.
    pub fn quantized_prefill(&mut self, on: bool) {
        let rows = if on { usize::MAX } else { PREFILL_ROWS };
        for layer in &mut self.layers {
            for linear in [
                &mut layer.wq,
                &mut layer.wk,
                &mut layer.wv,
                &mut layer.wo,
                &mut layer.gate,
                &mut layer.up,
                &mut layer.down,
            ] {
                linear.prefill_rows = rows;
            }
        }
        self.output.prefill_rows = rows;
    }

    /// Forgets the cached positions (a new prompt follows).
    pub fn clear_cache(&mut self) {
        for layer in &mut self.layers {
            layer.keys.reset();
            layer.values.reset();
        }
    }

    /// Runs `tokens` (`(1, n)`) at positions `start..start + n` after the cached ones,
    /// and returns the logits of the last position (`(1, vocab)`).
    pub fn forward(&mut self, tokens: &Tensor, start: usize) -> Result<Tensor> {
        let (_, seq_len) = tokens.dims2()?;
        if start + seq_len > MAX_SEQ_LEN {
            candle_core::bail!(
                "{} positions exceed the {MAX_SEQ_LEN} supported",
                start + seq_len
            );
        }
        let groups = self.n_head / self.n_kv_head;
        let mask = (seq_len > 1)
            .then(|| causal_mask(seq_len, start, groups, tokens.device()))
            .transpose()?;
        let cos = self.cos.narrow(0, start, seq_len)?;
        let sin = self.sin.narrow(0, start, seq_len)?;
        let mut x = self.embeddings.forward(tokens)?;
        for i in 0..self.layers.len() {
            let normed = candle_nn::ops::rms_norm(&x, &self.layers[i].attention_norm, self.eps)?;
            let attended = self.attention(i, &normed, mask.as_ref(), &cos, &sin)?;
            x = (attended + x)?;
            let layer = &self.layers[i];
            let normed = candle_nn::ops::rms_norm(&x, &layer.ffn_norm, self.eps)?;
            let gated = (candle_nn::ops::silu(&layer.gate.forward(&normed)?)?
                * layer.up.forward(&normed)?)?;
            x = (layer.down.forward(&gated)? + x)?;
        }
        let last = x.i((.., seq_len - 1..seq_len, ..))?;
        let last = candle_nn::ops::rms_norm(&last, &self.norm, self.eps)?;
        self.output.forward(&last)?.squeeze(1)
    }

    fn attention(
        &mut self,
        i: usize,
        x: &Tensor,
        mask: Option<&Tensor>,
        cos: &Tensor,
        sin: &Tensor,
    ) -> Result<Tensor> {
        let (b, seq_len, hidden) = x.dims3()?;
        let (h, kv, hd) = (self.n_head, self.n_kv_head, self.head_dim);
        let neox = self.neox;
        let layer = &mut self.layers[i];
        let heads = |t: Tensor, n: usize| -> Result<Tensor> {
            t.reshape((b, seq_len, n, hd))?
                .transpose(1, 2)?
                .contiguous()
        };
        let rotate = |t: &Tensor| {
            if neox {
                candle_nn::rotary_emb::rope(t, cos, sin)
            } else {
                candle_nn::rotary_emb::rope_i(t, cos, sin)
            }
        };
        let q = rotate(&heads(layer.wq.forward(x)?, h)?)?;
        let k = rotate(&heads(layer.wk.forward(x)?, kv)?)?;
        let v = heads(layer.wv.forward(x)?, kv)?;
        // The cache holds (kv heads, positions, head dim), written in place.
        layer.keys.append(&k.squeeze(0)?)?;
        layer.values.append(&v.squeeze(0)?)?;
        let (Some(keys), Some(values)) = (layer.keys.current_data()?, layer.values.current_data()?)
        else {
            candle_core::bail!("the attention cache is empty after an append");
        };
        // The query heads sharing a key/value head form one (groups × positions) matrix.
        let groups = h / kv;
        // (Decoding, this gives three query rows per product instead of one: the same
        // scores up to float rounding, which 30 layers can carry to a percent or two.)
        let q = q.reshape((kv, groups * seq_len, hd))?;
        let scores = (q.matmul(&keys.t()?)? / (hd as f64).sqrt())?;
        let scores = match mask {
            Some(mask) => scores.broadcast_add(mask)?,
            None => scores,
        };
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let y = weights.matmul(&values)?;
        let y = y
            .reshape((b, h, seq_len, hd))?
            .transpose(1, 2)?
            .reshape((b, seq_len, hidden))?;
        layer.wo.forward(&y)
    }
}

/// Cosines and sines of the rotary embedding, `(MAX_SEQ_LEN, dim / 2)`.
fn rotary_tables(dim: usize, base: f32, device: &Device) -> Result<(Tensor, Tensor)> {
    let theta: Vec<f32> = (0..dim)
        .step_by(2)
        .map(|i| 1.0 / base.powf(i as f32 / dim as f32))
        .collect();
    let theta = Tensor::new(theta.as_slice(), device)?;
    let positions = Tensor::arange(0, MAX_SEQ_LEN as u32, device)?
        .to_dtype(DType::F32)?
        .reshape((MAX_SEQ_LEN, 1))?;
    let angles = positions.matmul(&theta.reshape((1, ()))?)?;
    Ok((angles.cos()?, angles.sin()?))
}

/// The additive causal mask of `seq_len` new positions after `start` cached ones, its
/// rows repeated for each of the `groups` query heads folded together:
/// `(groups × seq_len, start + seq_len)`, 0 where a position may look, −∞ elsewhere.
fn causal_mask(seq_len: usize, start: usize, groups: usize, device: &Device) -> Result<Tensor> {
    let width = start + seq_len;
    let row: Vec<f32> = (0..seq_len)
        .flat_map(|i| {
            (0..width).map(move |j| {
                if j > start + i {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
        })
        .collect();
    let mask = Tensor::from_vec(row, (seq_len, width), device)?;
    mask.repeat((groups, 1))
}
