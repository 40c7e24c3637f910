//! The llama-family forward pass, tuned for a small model on a few CPU cores.
//!
//! The same computation as candle-transformers' `quantized_llama` (the tests compare the
//! two), with these changes that matter at this size:
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
//! - **Decoding without tensors** when the weights are Q8_0 (see `decode`): one token
//!   goes through Q8_0 matrix–vector products read straight from the GGUF blocks, on
//!   threads that stay awake between products, with candle's arithmetic per row.
//! - **Embeddings looked up in the quantized table**: a token's row is dequantized when
//!   it is asked for (the same values as dequantizing the whole table), and a tied
//!   output projection shares the table, instead of keeping a 49,152 × 576 f32 copy.

// The workspace denies `unsafe` (Cargo.toml). This module has two uses, each block saying
// why it is sound: the embedding-row lookup reads the quantized table in place, and the
// decode step's attention hands each thread of `decode`'s pool its own slots of the
// shared scores scratch (`Shared::range_mut`).
#![allow(unsafe_code)]

use std::borrow::Cow;
use std::sync::Arc;

use candle_core::quantized::k_quants::{
    BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1, BlockQ5K, BlockQ6K,
    BlockQ8_0, GgmlType,
};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor, gguf_file};
use candle_core::{DType, Device, IndexOp, Module, Result, Tensor};

use crate::decode::{self, Pool, Q8Matrix, QuantizedVec, Shared};

/// The longest sequence (prompt and answer) the model is run on.
pub const MAX_SEQ_LEN: usize = 4096;

/// Rows from which a product goes through dequantized f32 weights.
const PREFILL_ROWS: usize = 8;

/// Parts per decoding thread in each parallel step of a token.
const PARTS_PER_THREAD: usize = 4;

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
    fn new(weights: Arc<QTensor>) -> Result<Self> {
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

    /// The weights as a Q8_0 matrix for the decoding kernels, if they are one.
    fn q8_bytes(&self) -> Option<(Cow<'_, [u8]>, usize, usize)> {
        if self.weights.dtype() != GgmlDType::Q8_0 {
            return None;
        }
        let (rows, cols) = self.weights.shape().dims2().ok()?;
        let bytes = self.weights.data().ok()?;
        Q8Matrix::new(&bytes, rows, cols).ok()?;
        Some((bytes, rows, cols))
    }
}

/// Q8_0 matrix `linear`, checked at load time by [`Linear::q8_bytes`].
fn q8(linear: &Linear) -> Result<(Cow<'_, [u8]>, usize, usize)> {
    match linear.q8_bytes() {
        Some(m) => Ok(m),
        None => candle_core::bail!("a weight matrix is not Q8_0"),
    }
}

/// The token embedding table, kept as stored (quantized); rows are dequantized when
/// looked up.
struct Embeddings {
    table: Arc<QTensor>,
    dim: usize,
    /// The whole table in f32, for block formats rows cannot be read from.
    dense: Option<Tensor>,
}

impl Embeddings {
    fn new(table: Arc<QTensor>, dim: usize, device: &Device) -> Result<Self> {
        let mut e = Self {
            table,
            dim,
            dense: None,
        };
        let mut probe = vec![0f32; dim];
        if e.rows(&[0], &mut probe).is_err() {
            e.dense = Some(e.table.dequantize(device)?);
        }
        Ok(e)
    }

    fn vocab(&self) -> usize {
        self.table.shape().dims().first().copied().unwrap_or(0)
    }

    /// Writes the rows of `ids` one after the other into `out`.
    fn rows(&self, ids: &[u32], out: &mut [f32]) -> Result<()> {
        if out.len() != ids.len() * self.dim {
            candle_core::bail!("{} values cannot hold {} rows", out.len(), ids.len());
        }
        if let Some(dense) = &self.dense {
            let ids_t = Tensor::new(ids, dense.device())?;
            let rows = dense
                .index_select(&ids_t, 0)?
                .flatten_all()?
                .to_vec1::<f32>()?;
            out.copy_from_slice(&rows);
            return Ok(());
        }
        let bytes = self.table.data()?;
        let (vocab, dim) = (self.vocab(), self.dim);
        match self.table.dtype() {
            GgmlDType::Q8_0 => rows_of::<BlockQ8_0>(&bytes, vocab, dim, ids, out),
            GgmlDType::Q4_0 => rows_of::<BlockQ4_0>(&bytes, vocab, dim, ids, out),
            GgmlDType::Q4_1 => rows_of::<BlockQ4_1>(&bytes, vocab, dim, ids, out),
            GgmlDType::Q5_0 => rows_of::<BlockQ5_0>(&bytes, vocab, dim, ids, out),
            GgmlDType::Q5_1 => rows_of::<BlockQ5_1>(&bytes, vocab, dim, ids, out),
            GgmlDType::Q2K => rows_of::<BlockQ2K>(&bytes, vocab, dim, ids, out),
            GgmlDType::Q3K => rows_of::<BlockQ3K>(&bytes, vocab, dim, ids, out),
            GgmlDType::Q4K => rows_of::<BlockQ4K>(&bytes, vocab, dim, ids, out),
            GgmlDType::Q5K => rows_of::<BlockQ5K>(&bytes, vocab, dim, ids, out),
            GgmlDType::Q6K => rows_of::<BlockQ6K>(&bytes, vocab, dim, ids, out),
            GgmlDType::F32 => rows_of::<f32>(&bytes, vocab, dim, ids, out),
            other => candle_core::bail!("no row lookup for {other:?} embeddings"),
        }
    }

    /// `tokens` (`(1, n)`) → `(1, n, dim)`.
    fn forward(&self, tokens: &Tensor) -> Result<Tensor> {
        let ids = tokens.flatten_all()?.to_vec1::<u32>()?;
        let mut out = vec![0f32; ids.len() * self.dim];
        self.rows(&ids, &mut out)?;
        Tensor::from_vec(out, (1, ids.len(), self.dim), tokens.device())
    }
}

/// Dequantizes rows `ids` of a `vocab × dim` table stored as blocks `T`, with the
/// format's own `to_float` (what dequantizing the whole table does, block by block).
fn rows_of<T: GgmlType>(
    bytes: &[u8],
    vocab: usize,
    dim: usize,
    ids: &[u32],
    out: &mut [f32],
) -> Result<()> {
    let size = std::mem::size_of::<T>();
    let per_row = dim / T::BLCK_SIZE;
    if !dim.is_multiple_of(T::BLCK_SIZE)
        || bytes.len() != vocab * per_row * size
        || !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>())
    {
        candle_core::bail!("the embedding table's layout does not allow row lookups");
    }
    // SAFETY: size and alignment checked above; the block types are plain `repr(C)`
    // structs of integers and floats (f16, f32), for which any bytes are a valid value.
    let blocks: &[T] =
        unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / size) };
    for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(dim)) {
        let id = id as usize;
        if id >= vocab {
            candle_core::bail!("token {id} is outside the vocabulary of {vocab}");
        }
        T::to_float(&blocks[id * per_row..(id + 1) * per_row], dst);
    }
    Ok(())
}

/// One layer's keys and values, `[position][kv head][head dim]`, grown in place.
#[derive(Default)]
struct KvCache {
    keys: Vec<f32>,
    values: Vec<f32>,
}

impl KvCache {
    fn push(&mut self, keys: &[f32], values: &[f32], stride: usize) {
        if self.keys.len() + keys.len() > self.keys.capacity() {
            let more = keys.len().max(CACHE_STEP * stride);
            self.keys.reserve_exact(more);
            self.values.reserve_exact(more);
        }
        self.keys.extend_from_slice(keys);
        self.values.extend_from_slice(values);
    }

    fn clear(&mut self) {
        self.keys.clear();
        self.values.clear();
    }
}

/// The per-token buffers of the decoding path.
struct Scratch {
    x: Vec<f32>,
    normed: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attended: Vec<f32>,
    projected: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    scores: Vec<f32>,
    logits: Vec<f32>,
    xq: QuantizedVec,
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
    attention_norm_v: Vec<f32>,
    ffn_norm_v: Vec<f32>,
    cache: KvCache,
}

/// The model's weights and its attention cache.
pub struct Llama {
    embeddings: Embeddings,
    layers: Vec<Layer>,
    norm: Tensor,
    norm_v: Vec<f32>,
    output: Linear,
    /// Every matrix is Q8_0: single tokens take the tensor-free path.
    fast_decode: bool,
    pool: Pool,
    scratch: Scratch,
    cos_v: Vec<f32>,
    sin_v: Vec<f32>,
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

        let embeddings_q = Arc::new(content.tensor(reader, "token_embd.weight", device)?);
        let embeddings = Embeddings::new(embeddings_q.clone(), embedding_length, device)?;
        let norm = content
            .tensor(reader, "output_norm.weight", device)?
            .dequantize(device)?;
        // A tied output projection shares the embedding table.
        let output = match content.tensor(reader, "output.weight", device) {
            Ok(t) => Arc::new(t),
            Err(_) => embeddings_q,
        };
        let mut layers = Vec::with_capacity(block_count);
        for i in 0..block_count {
            let mut tensor =
                |name: &str| content.tensor(reader, &format!("blk.{i}.{name}"), device);
            let mut linear = |name: &str| Linear::new(Arc::new(tensor(name)?));
            let (wq, wk, wv, wo) = (
                linear("attn_q.weight")?,
                linear("attn_k.weight")?,
                linear("attn_v.weight")?,
                linear("attn_output.weight")?,
            );
            let (gate, up, down) = (
                linear("ffn_gate.weight")?,
                linear("ffn_up.weight")?,
                linear("ffn_down.weight")?,
            );
            let mut tensor =
                |name: &str| content.tensor(reader, &format!("blk.{i}.{name}"), device);
            let attention_norm = tensor("attn_norm.weight")?.dequantize(device)?;
            let ffn_norm = tensor("ffn_norm.weight")?.dequantize(device)?;
            layers.push(Layer {
                wq,
                wk,
                wv,
                wo,
                gate,
                up,
                down,
                attention_norm_v: attention_norm.to_vec1()?,
                ffn_norm_v: ffn_norm.to_vec1()?,
                attention_norm,
                ffn_norm,
                cache: KvCache::default(),
            });
        }
        let output = Linear::new(output)?;
        let vocab = output.weights.shape().dims().first().copied().unwrap_or(0);
        let kv_dim = n_kv_head * head_dim;
        let q8_shapes = |l: &Layer| {
            let shape = |m: &Linear, rows: usize, cols: usize| {
                m.q8_bytes().is_some_and(|(_, r, c)| (r, c) == (rows, cols))
            };
            let ffn = l.gate.weights.shape().dims().first().copied().unwrap_or(0);
            shape(&l.wq, n_head * head_dim, embedding_length)
                && shape(&l.wk, kv_dim, embedding_length)
                && shape(&l.wv, kv_dim, embedding_length)
                && shape(&l.wo, embedding_length, n_head * head_dim)
                && shape(&l.gate, ffn, embedding_length)
                && shape(&l.up, ffn, embedding_length)
                && shape(&l.down, embedding_length, ffn)
        };
        let fast_decode = device.is_cpu()
            && n_head * head_dim == embedding_length
            && rope_dim == head_dim
            && layers.iter().all(q8_shapes)
            && output
                .q8_bytes()
                .is_some_and(|(_, r, c)| (r, c) == (vocab, embedding_length));
        let ffn = layers
            .first()
            .and_then(|l| l.gate.weights.shape().dims().first().copied())
            .unwrap_or(0);
        let scratch = Scratch {
            x: vec![0.0; embedding_length],
            normed: vec![0.0; embedding_length],
            q: vec![0.0; n_head * head_dim],
            k: vec![0.0; kv_dim],
            v: vec![0.0; kv_dim],
            attended: vec![0.0; n_head * head_dim],
            projected: vec![0.0; embedding_length],
            gate: vec![0.0; ffn],
            up: vec![0.0; ffn],
            scores: Vec::new(),
            logits: vec![0.0; vocab],
            xq: QuantizedVec::new(),
        };
        let threads = if fast_decode { decode_threads() } else { 1 };
        Ok(Self {
            embeddings,
            layers,
            norm_v: norm.to_vec1()?,
            norm,
            output,
            fast_decode,
            pool: Pool::new(threads),
            scratch,
            cos_v: cos.flatten_all()?.to_vec1()?,
            sin_v: sin.flatten_all()?.to_vec1()?,
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
    ///
    /// Nothing in claij switches it on: it is the verification switch of tests/forward.rs,
    /// which checks the forward pass against candle's `quantized_llama` to the last bit,
    /// possible only when both do the same arithmetic.
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
            layer.cache.clear();
        }
    }

    /// Positions in the attention cache.
    fn cached(&self) -> usize {
        self.layers
            .first()
            .map_or(0, |l| l.cache.keys.len() / (self.n_kv_head * self.head_dim))
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
        if start != self.cached() {
            candle_core::bail!(
                "position {start} does not follow the {} cached ones",
                self.cached()
            );
        }
        if seq_len == 1 && self.fast_decode {
            let token = tokens.flatten_all()?.to_vec1::<u32>()?;
            return self.decode(token[0], start);
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
        // The cache holds (positions, kv heads, head dim), appended in place.
        let stride = kv * hd;
        let before = layer.cache.keys.len() / stride;
        let by_position = |t: &Tensor| -> Result<Vec<f32>> {
            t.squeeze(0)?
                .transpose(0, 1)?
                .contiguous()?
                .flatten_all()?
                .to_vec1()
        };
        layer
            .cache
            .push(&by_position(&k)?, &by_position(&v)?, stride);
        let (keys, values) = if before == 0 {
            (k.squeeze(0)?, v.squeeze(0)?)
        } else {
            let total = before + seq_len;
            let from_cache = |c: &[f32]| -> Result<Tensor> {
                Tensor::from_slice(c, (total, kv, hd), x.device())?
                    .transpose(0, 1)?
                    .contiguous()
            };
            (
                from_cache(&layer.cache.keys)?,
                from_cache(&layer.cache.values)?,
            )
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

impl Llama {
    /// One token at position `pos` through the tensor-free Q8_0 path; the logits as
    /// `(1, vocab)`.
    fn decode(&mut self, token: u32, pos: usize) -> Result<Tensor> {
        let (h, kv, hd) = (self.n_head, self.n_kv_head, self.head_dim);
        let (eps, neox, groups) = (self.eps, self.neox, h / kv);
        let stride = kv * hd;
        let half = hd / 2;
        let cos = &self.cos_v[pos * half..(pos + 1) * half];
        let sin = &self.sin_v[pos * half..(pos + 1) * half];
        let scale = (1.0 / (hd as f64).sqrt()) as f32;
        let pool = &self.pool;
        // More parts than threads: a thread the system does not schedule for a while
        // leaves its parts to the others.
        let parts = PARTS_PER_THREAD * pool.threads();
        let s = &mut self.scratch;
        self.embeddings.rows(&[token], &mut s.x)?;
        for layer in &mut self.layers {
            // Attention.
            decode::rms_norm(&s.x, &layer.attention_norm_v, eps, &mut s.normed);
            s.xq.quantize(&s.normed);
            project(
                pool,
                parts,
                &s.xq,
                vec![
                    (&layer.wq, &mut s.q),
                    (&layer.wk, &mut s.k),
                    (&layer.wv, &mut s.v),
                ],
            )?;
            decode::rope(&mut s.q, hd, cos, sin, neox);
            decode::rope(&mut s.k, hd, cos, sin, neox);
            layer.cache.push(&s.k, &s.v, stride);
            let positions = layer.cache.keys.len() / stride;
            s.scores.resize(positions * parts, 0.0);
            {
                let (keys, values) = (&layer.cache.keys, &layer.cache.values);
                let out = Shared::new(&mut s.attended);
                let scores = Shared::new(&mut s.scores);
                let q = &s.q;
                pool.run(parts, &|part| {
                    // SAFETY: each part takes its own `positions` slots of the scratch.
                    let scores =
                        unsafe { scores.range_mut(part * positions, (part + 1) * positions) };
                    let heads = h * part / parts..h * (part + 1) / parts;
                    decode::attend(
                        q,
                        keys,
                        values,
                        heads,
                        (kv, hd, groups),
                        scale,
                        scores,
                        &out,
                    );
                })?;
            }
            s.xq.quantize(&s.attended);
            project(pool, parts, &s.xq, vec![(&layer.wo, &mut s.projected)])?;
            for (x, o) in s.x.iter_mut().zip(&s.projected) {
                *x += o;
            }
            // Feed-forward.
            decode::rms_norm(&s.x, &layer.ffn_norm_v, eps, &mut s.normed);
            s.xq.quantize(&s.normed);
            project(
                pool,
                parts,
                &s.xq,
                vec![(&layer.gate, &mut s.gate), (&layer.up, &mut s.up)],
            )?;
            for (g, u) in s.gate.iter_mut().zip(&s.up) {
                *g = *g / (1.0 + (-*g).exp()) * u;
            }
            s.xq.quantize(&s.gate);
            project(pool, parts, &s.xq, vec![(&layer.down, &mut s.projected)])?;
            for (x, o) in s.x.iter_mut().zip(&s.projected) {
                *x += o;
            }
        }
        decode::rms_norm(&s.x, &self.norm_v, eps, &mut s.normed);
        s.xq.quantize(&s.normed);
        project(pool, parts, &s.xq, vec![(&self.output, &mut s.logits)])?;
        let vocab = s.logits.len();
        Tensor::from_slice(&s.logits, (1, vocab), &Device::Cpu)
    }
}

/// `out = matrix · xq` for each `(matrix, out)` pair (Q8_0 matrices), the rows shared
/// among the pool's `parts`.
fn project(
    pool: &Pool,
    parts: usize,
    xq: &QuantizedVec,
    pairs: Vec<(&Linear, &mut Vec<f32>)>,
) -> Result<()> {
    let mut weights = Vec::with_capacity(pairs.len());
    let mut outs = Vec::with_capacity(pairs.len());
    for (matrix, out) in pairs {
        weights.push(q8(matrix)?);
        outs.push(Shared::new(out));
    }
    let jobs = weights
        .iter()
        .zip(&outs)
        .map(|((bytes, rows, cols), out)| Ok((Q8Matrix::new(bytes, *rows, *cols)?, out)))
        .collect::<Result<Vec<_>>>()?;
    pool.run(parts, &|part| decode::products(&jobs, xq, part, parts))
}

/// Threads for decoding: `CANDLE_NUM_THREADS` when set (as for candle's own pool),
/// else candle's default (`RAYON_NUM_THREADS`, else the cores available).
fn decode_threads() -> usize {
    std::env::var("CANDLE_NUM_THREADS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(candle_core::utils::get_num_threads)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A row looked up in the quantized table is the row of the dequantized table, to
    /// the bit, for Q8_0 and a k-quant.
    #[test]
    fn embedding_rows_are_rows_of_the_dequantized_table() -> Result<()> {
        let device = Device::Cpu;
        for (dtype, dim) in [(GgmlDType::Q8_0, 576), (GgmlDType::Q4K, 512)] {
            let table = Tensor::randn(0f32, 1.0, (40, dim), &device)?;
            let q = Arc::new(QTensor::quantize(&table, dtype)?);
            let dense: Vec<Vec<f32>> = q.dequantize(&device)?.to_vec2()?;
            let e = Embeddings::new(q, dim, &device)?;
            assert!(e.dense.is_none(), "{dtype:?} rows are read from the blocks");
            let ids = [0u32, 39, 7, 7];
            let mut out = vec![0f32; ids.len() * dim];
            e.rows(&ids, &mut out)?;
            for (row, &id) in out.chunks_exact(dim).zip(&ids) {
                assert_eq!(row, dense[id as usize].as_slice(), "{dtype:?} row {id}");
            }
            assert!(e.rows(&[40], &mut out[..dim]).is_err());
        }
        Ok(())
    }
}
