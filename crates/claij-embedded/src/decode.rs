//! The single-token (decode) step without candle tensors: Q8_0 matrix–vector products
//! read straight from the GGUF blocks, on a small pool of threads that stay awake
//! between the products of one token.
//!
//! At one row per product, candle spends a good part of a token outside the dot
//! products (an allocated tensor per operation, a parallel region per matrix, the f16
//! scale converted through a function call per block). Here the activations are
//! quantized to Q8_0 exactly as candle does (`BlockQ8_0::from_float`) and every output
//! is the same AVX2 sequence as candle's `vec_dot_q8_0_q8_0` (one 8-lane fused
//! multiply-add per block, the same horizontal sum), so a row gives the same score
//! whichever thread computes it.

// The workspace denies `unsafe` (Cargo.toml); the AVX2 kernels, the raw views of GGUF
// blocks and the thread pool's shared scratch need it; every block says why it is sound.
// The crate's only other `unsafe` is in `llama` (the embedding-row lookup, and the
// attention's slots of the shared scratch).
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use candle_core::quantized::k_quants::{BlockQ8_0, GgmlType};
use candle_core::{Result, bail};

/// Values per Q8_0 block.
pub(crate) const QK: usize = 32;
/// Bytes per Q8_0 block: an f16 scale, then 32 signed bytes.
pub(crate) const BLOCK_BYTES: usize = 34;

/// f16 bits to f32 (exact; the same value as `half::f16::to_f32`).
#[inline]
fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits & 0x8000) << 16;
    let exp = u32::from(bits >> 10) & 0x1f;
    let man = u32::from(bits & 0x3ff);
    let value = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: man × 2^-24, exact in f32.
            let v = man as f32 * f32::from_bits(0x3380_0000);
            return if sign != 0 { -v } else { v };
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, _) => sign | 0x7fc0_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(value)
}

/// The scale of the Q8_0 block starting at `block`.
#[inline]
fn block_scale(block: &[u8]) -> f32 {
    f16_to_f32(u16::from_le_bytes([block[0], block[1]]))
}

/// A vector quantized to Q8_0 for products with Q8_0 rows.
pub(crate) struct QuantizedVec {
    blocks: Vec<BlockQ8_0>,
    scales: Vec<f32>,
}

impl QuantizedVec {
    pub(crate) fn new() -> Self {
        Self {
            blocks: Vec::new(),
            scales: Vec::new(),
        }
    }

    /// Quantizes `x` (a multiple of 32 values) as candle's quantized matmul does.
    pub(crate) fn quantize(&mut self, x: &[f32]) {
        let nb = x.len() / QK;
        self.blocks.resize(nb, BlockQ8_0::zeros());
        BlockQ8_0::from_float(&x[..nb * QK], &mut self.blocks);
        let bytes = self.bytes();
        let scales: Vec<f32> = bytes.chunks_exact(BLOCK_BYTES).map(block_scale).collect();
        self.scales = scales;
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `BlockQ8_0` is `repr(C)`, 34 bytes (an f16 and 32 i8) without padding,
        // so its bytes are initialized and may be read as `u8`.
        unsafe {
            std::slice::from_raw_parts(
                self.blocks.as_ptr().cast::<u8>(),
                self.blocks.len() * BLOCK_BYTES,
            )
        }
    }

    fn len(&self) -> usize {
        self.blocks.len() * QK
    }
}

/// A Q8_0 matrix of `rows × cols` as GGUF stores it: row after row of blocks.
#[derive(Clone, Copy)]
pub(crate) struct Q8Matrix<'a> {
    bytes: &'a [u8],
    rows: usize,
    cols: usize,
}

impl<'a> Q8Matrix<'a> {
    /// Checks that `bytes` holds `rows × cols` values in Q8_0 blocks.
    pub(crate) fn new(bytes: &'a [u8], rows: usize, cols: usize) -> Result<Self> {
        if !cols.is_multiple_of(QK) || bytes.len() != rows * cols / QK * BLOCK_BYTES {
            bail!(
                "{} bytes do not hold a {rows}×{cols} Q8_0 matrix",
                bytes.len()
            );
        }
        Ok(Self { bytes, rows, cols })
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    fn row_bytes(&self) -> usize {
        self.cols / QK * BLOCK_BYTES
    }

    /// `out[i] = row(first + i) · x` for `out.len()` rows from `first`.
    fn product(&self, first: usize, x: &QuantizedVec, out: &mut [f32]) {
        debug_assert_eq!(x.len(), self.cols);
        let rb = self.row_bytes();
        let w = &self.bytes[first * rb..(first + out.len()) * rb];
        #[cfg(target_arch = "x86_64")]
        if avx2() {
            // SAFETY: the features were detected; `w` holds `out.len()` rows of `rb`
            // bytes and `x` as many blocks as a row (checked by the slicing above and by
            // the callers' shapes).
            unsafe { product_avx2(w, rb, x.bytes(), &x.scales, out) };
            return;
        }
        product_scalar(w, rb, x.bytes(), &x.scales, out);
    }
}

#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    use std::sync::OnceLock;
    static AVX2: OnceLock<bool> = OnceLock::new();
    *AVX2.get_or_init(|| {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
    })
}

fn product_scalar(w: &[u8], rb: usize, x: &[u8], xd: &[f32], out: &mut [f32]) {
    for (row, o) in w.chunks_exact(rb).zip(out.iter_mut()) {
        let mut acc = 0f32;
        for ((wb, xb), d) in row
            .chunks_exact(BLOCK_BYTES)
            .zip(x.chunks_exact(BLOCK_BYTES))
            .zip(xd)
        {
            let sum: i32 = wb[2..]
                .iter()
                .zip(&xb[2..])
                .map(|(&a, &b)| i32::from(a as i8) * i32::from(b as i8))
                .sum();
            acc += sum as f32 * block_scale(wb) * d;
        }
        *o = acc;
    }
}

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{
    __m256, __m256i, _mm_add_ps, _mm_add_ss, _mm_cvtph_ps, _mm_cvtsi32_si128, _mm_cvtss_f32,
    _mm_movehdup_ps, _mm_movehl_ps, _mm256_castps256_ps128, _mm256_cvtepi32_ps,
    _mm256_extractf128_ps, _mm256_fmadd_ps, _mm256_loadu_si256, _mm256_madd_epi16,
    _mm256_maddubs_epi16, _mm256_set1_epi16, _mm256_set1_ps, _mm256_setzero_ps, _mm256_sign_epi8,
};

/// The f16 scale at `p`.
///
/// # Safety
/// `p` must point to two readable bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn scale_at(p: *const u8) -> f32 {
    // SAFETY: the caller's contract.
    let bits = unsafe { std::ptr::read_unaligned(p.cast::<u16>()) };
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}

/// candle's `avx::hsum_float_8`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn hsum(x: __m256) -> f32 {
    let res = _mm256_extractf128_ps(x, 1);
    let res = _mm_add_ps(res, _mm256_castps256_ps128(x));
    let res = _mm_add_ps(res, _mm_movehl_ps(res, res));
    let res = _mm_add_ss(res, _mm_movehdup_ps(res));
    _mm_cvtss_f32(res)
}

/// One block of a row (at `wp`) against the activation block `xq` (scale `xd`), added
/// to `acc`: candle's `mul_sum_i8_pairs_float` and fused multiply-add.
///
/// # Safety
/// `wp` must point to a readable 34-byte Q8_0 block.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn block(wp: *const u8, xq: __m256i, xd: f32, acc: __m256) -> __m256 {
    // SAFETY: the caller's contract.
    let (ws, wq) = unsafe {
        (
            scale_at(wp),
            _mm256_loadu_si256(wp.add(2).cast::<__m256i>()),
        )
    };
    let d = _mm256_set1_ps(ws * xd);
    let ax = _mm256_sign_epi8(wq, wq);
    let sy = _mm256_sign_epi8(xq, wq);
    let dot = _mm256_maddubs_epi16(ax, sy);
    let q = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), dot));
    _mm256_fmadd_ps(d, q, acc)
}

/// Row after row, each with the arithmetic of candle's `avx::vec_dot_q8_0_q8_0`. (Rows
/// are read one at a time on purpose: interleaving four rows, to share the activation
/// loads, made the weights stream three times slower here.)
///
/// # Safety
/// `w` must hold `out.len()` rows of `rb` bytes, `rb` must be `xd.len()` blocks, and `x`
/// must hold `xd.len()` blocks.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn product_avx2(w: &[u8], rb: usize, x: &[u8], xd: &[f32], out: &mut [f32]) {
    let nb = xd.len();
    debug_assert!(
        w.len() >= out.len() * rb && x.len() >= nb * BLOCK_BYTES && rb == nb * BLOCK_BYTES
    );
    let wp = w.as_ptr();
    let xp = x.as_ptr();
    for (r, o) in out.iter_mut().enumerate() {
        let mut acc = _mm256_setzero_ps();
        // SAFETY: row r is inside `w`.
        unsafe {
            let row = wp.add(r * rb);
            for (b, &d) in xd.iter().enumerate() {
                let off = b * BLOCK_BYTES;
                let xq = _mm256_loadu_si256(xp.add(off + 2).cast::<__m256i>());
                acc = block(row.add(off), xq, d, acc);
            }
        }
        *o = hsum(acc);
    }
}

/// Rows `[lo, hi)` of `n` that part `part` of `parts` computes (multiples of 4 but the last).
pub(crate) fn share(n: usize, part: usize, parts: usize) -> (usize, usize) {
    let quads = n.div_ceil(4);
    let lo = (quads * part / parts * 4).min(n);
    let hi = (quads * (part + 1) / parts * 4).min(n);
    (lo, hi)
}

/// A mutable `f32` buffer that the parts of a parallel job write in disjoint ranges.
pub(crate) struct Shared<'a> {
    ptr: *mut f32,
    len: usize,
    _buf: std::marker::PhantomData<&'a mut [f32]>,
}

// SAFETY: the parts of a job only write disjoint ranges (`range_mut`'s contract).
unsafe impl Sync for Shared<'_> {}

impl<'a> Shared<'a> {
    pub(crate) fn new(buf: &'a mut [f32]) -> Self {
        Self {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
            _buf: std::marker::PhantomData,
        }
    }

    /// Elements `[lo, hi)`.
    ///
    /// # Safety
    /// No other live slice from this buffer may overlap `[lo, hi)`.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn range_mut(&self, lo: usize, hi: usize) -> &mut [f32] {
        assert!(
            lo <= hi && hi <= self.len,
            "range {lo}..{hi} of {}",
            self.len
        );
        // SAFETY: in bounds (asserted); exclusivity is the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(lo), hi - lo) }
    }
}

/// Computes, in part `part` of `parts`, that part's rows of each `(matrix, out)` pair.
pub(crate) fn products(
    jobs: &[(Q8Matrix<'_>, &Shared<'_>)],
    x: &QuantizedVec,
    part: usize,
    parts: usize,
) {
    for (m, out) in jobs {
        let (lo, hi) = share(m.rows(), part, parts);
        if lo < hi {
            // SAFETY: `share` gives the parts disjoint ranges.
            let dst = unsafe { out.range_mut(lo, hi) };
            m.product(lo, x, dst);
        }
    }
}

/// Candle's RMS norm (`candle_nn::ops::rms_norm`) of one row.
pub(crate) fn rms_norm(x: &[f32], alpha: &[f32], eps: f32, out: &mut [f32]) {
    let sum2: f32 = x.iter().map(|v| v * v).sum();
    let m = (sum2 / x.len() as f32 + eps).sqrt();
    for ((o, v), a) in out.iter_mut().zip(x).zip(alpha) {
        *o = *v / m * *a;
    }
}

/// Rotates each `head_dim` head of `x` in place: interleaved pairs (`rope_i`) or halves
/// (`rope`, neox), with the position's `cos`/`sin` (`head_dim / 2` each).
pub(crate) fn rope(x: &mut [f32], head_dim: usize, cos: &[f32], sin: &[f32], neox: bool) {
    let half = head_dim / 2;
    for head in x.chunks_exact_mut(head_dim) {
        for i in 0..half {
            let (a, b) = if neox {
                (i, i + half)
            } else {
                (2 * i, 2 * i + 1)
            };
            let (x0, x1) = (head[a], head[b]);
            head[a] = x0 * cos[i] - x1 * sin[i];
            head[b] = x0 * sin[i] + x1 * cos[i];
        }
    }
}

/// Attention of query heads `heads` (one position) over `positions` cached keys and
/// values laid out `[position][kv head][head_dim]`; writes each head's output to
/// `out[head * head_dim..]`. `scores` is scratch of at least `positions`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attend(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    heads: std::ops::Range<usize>,
    (n_kv_head, head_dim, groups): (usize, usize, usize),
    scale: f32,
    scores: &mut [f32],
    out: &Shared<'_>,
) {
    let stride = n_kv_head * head_dim;
    let positions = keys.len() / stride;
    let scores = &mut scores[..positions];
    for h in heads {
        let kvh = h / groups;
        let qh = &q[h * head_dim..(h + 1) * head_dim];
        for (p, s) in scores.iter_mut().enumerate() {
            let k = &keys[p * stride + kvh * head_dim..][..head_dim];
            *s = dot(qh, k) * scale;
        }
        let max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
        let mut sum = 0f32;
        for s in scores.iter_mut() {
            *s = (*s - max).exp();
            sum += *s;
        }
        // SAFETY: each head's output range belongs to the part computing that head.
        let o = unsafe { out.range_mut(h * head_dim, (h + 1) * head_dim) };
        o.fill(0.0);
        for (p, s) in scores.iter().enumerate() {
            let w = s / sum;
            let v = &values[p * stride + kvh * head_dim..][..head_dim];
            for (o, v) in o.iter_mut().zip(v) {
                *o += w * v;
            }
        }
    }
}

/// A dot product in eight lanes (vectorized by the compiler).
#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ac, ar) = a.split_at(a.len() / 8 * 8);
    let (bc, br) = b.split_at(ac.len());
    for (x, y) in ac.chunks_exact(8).zip(bc.chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ar.iter().zip(br) {
        s += x * y;
    }
    s
}

type Job = dyn Fn(usize) + Sync;

/// `word` packs the job's epoch (high 32 bits), its number of parts (16 bits) and the
/// next unclaimed part (low 16 bits).
const PART_BITS: u32 = 16;
const PART_MASK: u64 = (1 << PART_BITS) - 1;

/// The most parts a job may have.
pub(crate) const MAX_PARTS: usize = PART_MASK as usize;

struct PoolState {
    word: AtomicU64,
    /// Parts finished in the current job.
    done: AtomicUsize,
    /// The current job, valid while some of its parts are unfinished.
    job: UnsafeCell<Option<*const Job>>,
    stop: AtomicBool,
    panicked: AtomicBool,
    sleeping: Vec<AtomicBool>,
}

// SAFETY: `job` is written only by the owner thread while no part of a job is
// unfinished, and read by a worker only after it claimed a part of the current job
// (which the owner waits for); everything else is atomic.
unsafe impl Sync for PoolState {}
// SAFETY: as above; the raw job pointer is only dereferenced during `run`.
unsafe impl Send for PoolState {}

impl PoolState {
    /// Claims and runs parts of the job of `epoch` until none is left.
    fn work(&self, epoch: u64) {
        loop {
            let cur = self.word.load(Ordering::Acquire);
            let parts = (cur >> PART_BITS) & PART_MASK;
            let next = cur & PART_MASK;
            if cur >> 32 != epoch || next >= parts {
                return;
            }
            if self
                .word
                .compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            // SAFETY: a part of the current job is claimed and unfinished, so the owner
            // keeps the job alive and does not rewrite it.
            if let Some(job) = unsafe { *self.job.get() } {
                // SAFETY: as above: the job the pointer names outlives every claimed part.
                let job = unsafe { &*job };
                let part = next as usize;
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(part))).is_err() {
                    self.panicked.store(true, Ordering::SeqCst);
                }
            }
            self.done.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// Threads that run the parts of a job together, the caller included. Parts are
/// claimed one by one, so a thread the system does not schedule delays nobody: the
/// others take its parts. Workers spin briefly between jobs (the products of one token
/// follow each other within microseconds), then yield, then sleep.
pub(crate) struct Pool {
    state: Arc<PoolState>,
    workers: Vec<(JoinHandle<()>, Thread)>,
    epoch: std::cell::Cell<u64>,
}

/// How long a worker spins, then yields, before it sleeps.
const SPIN: Duration = Duration::from_micros(200);
const YIELD: Duration = Duration::from_millis(3);

impl Pool {
    /// A pool of `threads` threads (at least one: the caller).
    pub(crate) fn new(threads: usize) -> Self {
        let threads = threads.max(1);
        let state = Arc::new(PoolState {
            word: AtomicU64::new(0),
            done: AtomicUsize::new(0),
            job: UnsafeCell::new(None),
            stop: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
            sleeping: (0..threads).map(|_| AtomicBool::new(false)).collect(),
        });
        let mut workers = Vec::new();
        for id in 1..threads {
            let s = state.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("claij-decode-{id}"))
                .spawn(move || worker(&s, id));
            match spawned {
                Ok(handle) => {
                    let thread = handle.thread().clone();
                    workers.push((handle, thread));
                }
                // Fewer threads, same results: every part is computed whole by one thread.
                Err(_) => break,
            }
        }
        Self {
            state,
            workers,
            epoch: std::cell::Cell::new(0),
        }
    }

    /// The number of threads.
    pub(crate) fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `job(part)` for every part in `0..parts` (at most [`MAX_PARTS`]), each once,
    /// on whichever thread claims it, and returns when all are done.
    pub(crate) fn run<'a>(&self, parts: usize, job: &'a (dyn Fn(usize) + Sync + 'a)) -> Result<()> {
        if parts > MAX_PARTS {
            bail!("{parts} parts exceed the {MAX_PARTS} a job may have");
        }
        if self.workers.is_empty() || parts <= 1 {
            for part in 0..parts {
                job(part);
            }
            return Ok(());
        }
        let s = &*self.state;
        // SAFETY: the lifetime is erased only for the duration of this call, which
        // returns after every part has finished (`done == parts`).
        let ptr: *const Job =
            unsafe { std::mem::transmute::<&'a (dyn Fn(usize) + Sync + 'a), &'static Job>(job) };
        // SAFETY: no part of a job is unfinished, so no worker reads `job` now.
        unsafe { *s.job.get() = Some(ptr) };
        s.done.store(0, Ordering::SeqCst);
        let epoch = (self.epoch.get() + 1) & 0xffff_ffff;
        self.epoch.set(epoch);
        s.word.store(
            (epoch << 32) | ((parts as u64) << PART_BITS),
            Ordering::SeqCst,
        );
        for (i, (_, thread)) in self.workers.iter().enumerate() {
            if s.sleeping[i + 1].load(Ordering::SeqCst) {
                thread.unpark();
            }
        }
        s.work(epoch);
        let started = Instant::now();
        let mut spins = 0u32;
        while s.done.load(Ordering::Acquire) != parts {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) && started.elapsed() > SPIN {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        // SAFETY: every part is done.
        unsafe { *s.job.get() = None };
        if s.panicked.swap(false, Ordering::SeqCst) {
            bail!("a decoding thread panicked");
        }
        Ok(())
    }
}

fn worker(s: &PoolState, id: usize) {
    let mut seen = 0u64;
    loop {
        let started = Instant::now();
        let mut spins = 0u32;
        loop {
            if s.stop.load(Ordering::Acquire) {
                return;
            }
            if s.word.load(Ordering::Acquire) >> 32 != seen {
                break;
            }
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) {
                std::hint::spin_loop();
                continue;
            }
            let waited = started.elapsed();
            if waited < SPIN {
                std::hint::spin_loop();
            } else if waited < YIELD {
                std::thread::yield_now();
            } else {
                s.sleeping[id].store(true, Ordering::SeqCst);
                if s.word.load(Ordering::SeqCst) >> 32 == seen && !s.stop.load(Ordering::SeqCst) {
                    std::thread::park();
                }
                s.sleeping[id].store(false, Ordering::SeqCst);
            }
        }
        seen = s.word.load(Ordering::Acquire) >> 32;
        s.work(seen);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        for (handle, thread) in self.workers.drain(..) {
            thread.unpark();
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Module, Tensor};

    #[test]
    fn f16_conversion_matches_candle() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert!(f16_to_f32(0x7c00).is_infinite());
    }

    /// The products are candle's `QMatMul` for one row, to the bit, on any number of
    /// threads.
    #[test]
    fn products_match_candle_for_one_row() -> Result<()> {
        let (rows, cols) = (70, 576);
        let device = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (rows, cols), &device)?;
        let q = QTensor::quantize(&w, GgmlDType::Q8_0)?;
        let x = Tensor::randn(0f32, 1.0, (1, cols), &device)?;
        let expected: Vec<f32> =
            candle_core::quantized::QMatMul::from_qtensor(QTensor::quantize(&w, GgmlDType::Q8_0)?)?
                .forward(&x)?
                .squeeze(0)?
                .to_vec1()?;
        let data = q.data()?;
        let m = Q8Matrix::new(&data, rows, cols)?;
        let mut xq = QuantizedVec::new();
        xq.quantize(&x.squeeze(0)?.to_vec1::<f32>()?);
        for threads in [1, 2, 3] {
            let pool = Pool::new(threads);
            let mut out = vec![0f32; rows];
            let shared = Shared::new(&mut out);
            let parts = 4 * pool.threads();
            pool.run(parts, &|part| products(&[(m, &shared)], &xq, part, parts))?;
            assert_eq!(out, expected, "{threads} threads");
            let mut scalar = vec![0f32; rows];
            product_scalar(&data, m.row_bytes(), xq.bytes(), &xq.scales, &mut scalar);
            for (a, b) in scalar.iter().zip(&expected) {
                assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{a} vs {b}");
            }
        }
        Ok(())
    }

    #[test]
    fn shares_cover_every_row_once() {
        for n in [1, 3, 4, 5, 192, 577] {
            for parts in 1..4 {
                let mut next = 0;
                for p in 0..parts {
                    let (lo, hi) = share(n, p, parts);
                    assert_eq!(lo, next);
                    next = hi;
                }
                assert_eq!(next, n);
            }
        }
    }
}
