//! Quantized matrices and their products with quantized activations, the
//! way llama.cpp computes them: weights in 32-value blocks (8-bit, or
//! 4-bit with a scale and an offset), activations rounded to 8-bit blocks
//! per token, integer dot products per block, scaled in f32.
//!
//! The kernels have an AVX2 version, chosen at run time, and a portable
//! one that gives the same integers (only the order of the f32 sums of
//! block results differs, so results agree to rounding).

use ::half::f16;
use rayon::prelude::*;

/// Values per block, in weights and activations alike.
pub const BLOCK: usize = 32;

/// How a matrix's blocks are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// 32 signed bytes and a scale: w = d·q.
    Q8,
    /// 16 bytes of nibbles (values 0..15, the first 16 values in the low
    /// nibbles), a scale and an offset: w = d·q + m. GGUF's Q4_1 as it is;
    /// Q4_0 with m = −8·d.
    Q4,
}

/// A matrix of `rows` × `cols`, row-major, in blocks of [`BLOCK`] along a
/// row.
#[derive(Debug, Clone)]
pub struct QMatrix {
    layout: Layout,
    rows: usize,
    cols: usize,
    /// One per block, `rows × cols / BLOCK`.
    scales: Vec<f32>,
    /// Q4 only: one offset per block.
    mins: Vec<f32>,
    /// 32 (Q8) or 16 (Q4) bytes per block.
    quants: Vec<u8>,
}

/// Why a tensor's bytes do not make a matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct LayoutError(pub String);

impl QMatrix {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Quantizes f32 values to 8-bit blocks (as GGUF's Q8_0 does).
    pub fn from_f32(values: &[f32], rows: usize, cols: usize) -> Result<QMatrix, LayoutError> {
        check_shape(values.len(), rows, cols)?;
        let blocks = rows * cols / BLOCK;
        let mut scales = Vec::with_capacity(blocks);
        let mut quants = vec![0u8; blocks * BLOCK];
        for (block, out) in values
            .chunks_exact(BLOCK)
            .zip(quants.chunks_exact_mut(BLOCK))
        {
            let (d, _) = quantize_block(block, bytemuck_i8(out));
            scales.push(d);
        }
        Ok(QMatrix {
            layout: Layout::Q8,
            rows,
            cols,
            scales,
            mins: Vec::new(),
            quants,
        })
    }

    /// GGUF Q8_0 bytes: blocks of an f16 scale and 32 signed bytes.
    pub fn from_q8_0(bytes: &[u8], rows: usize, cols: usize) -> Result<QMatrix, LayoutError> {
        let blocks = blocks_of(bytes.len(), 34, rows, cols)?;
        let mut scales = Vec::with_capacity(blocks);
        let mut quants = Vec::with_capacity(blocks * BLOCK);
        for b in bytes.chunks_exact(34) {
            scales.push(f16_at(b[0], b[1]));
            quants.extend_from_slice(&b[2..]);
        }
        Ok(QMatrix {
            layout: Layout::Q8,
            rows,
            cols,
            scales,
            mins: Vec::new(),
            quants,
        })
    }

    /// GGUF Q4_0 bytes: an f16 scale and 16 bytes of nibbles, w = d·(q − 8).
    pub fn from_q4_0(bytes: &[u8], rows: usize, cols: usize) -> Result<QMatrix, LayoutError> {
        let blocks = blocks_of(bytes.len(), 18, rows, cols)?;
        let mut m = QMatrix::q4(rows, cols, blocks);
        for b in bytes.chunks_exact(18) {
            let d = f16_at(b[0], b[1]);
            m.scales.push(d);
            m.mins.push(-8.0 * d);
            m.quants.extend_from_slice(&b[2..]);
        }
        Ok(m)
    }

    /// GGUF Q4_1 bytes: f16 scale and offset, 16 bytes of nibbles.
    pub fn from_q4_1(bytes: &[u8], rows: usize, cols: usize) -> Result<QMatrix, LayoutError> {
        let blocks = blocks_of(bytes.len(), 20, rows, cols)?;
        let mut m = QMatrix::q4(rows, cols, blocks);
        for b in bytes.chunks_exact(20) {
            m.scales.push(f16_at(b[0], b[1]));
            m.mins.push(f16_at(b[2], b[3]));
            m.quants.extend_from_slice(&b[4..]);
        }
        Ok(m)
    }

    /// Matrices of the same width, one above the other. Mixed layouts
    /// are all rounded to 8 bits.
    pub fn stack(parts: &[QMatrix]) -> Result<QMatrix, LayoutError> {
        let first = parts
            .first()
            .ok_or(LayoutError("nothing to stack".into()))?;
        if parts.iter().any(|p| p.cols != first.cols) {
            return Err(LayoutError("matrices of different widths".into()));
        }
        let rows = parts.iter().map(|p| p.rows).sum();
        if parts.iter().all(|p| p.layout == first.layout) {
            return Ok(QMatrix {
                layout: first.layout,
                rows,
                cols: first.cols,
                scales: parts
                    .iter()
                    .flat_map(|p| p.scales.iter().copied())
                    .collect(),
                mins: parts.iter().flat_map(|p| p.mins.iter().copied()).collect(),
                quants: parts
                    .iter()
                    .flat_map(|p| p.quants.iter().copied())
                    .collect(),
            });
        }
        let mut values = vec![0f32; rows * first.cols];
        let mut rows_out = values.chunks_exact_mut(first.cols);
        for p in parts {
            for r in 0..p.rows {
                p.row(r, rows_out.next().expect("rows counted above"));
            }
        }
        QMatrix::from_f32(&values, rows, first.cols)
    }

    fn q4(rows: usize, cols: usize, blocks: usize) -> QMatrix {
        QMatrix {
            layout: Layout::Q4,
            rows,
            cols,
            scales: Vec::with_capacity(blocks),
            mins: Vec::with_capacity(blocks),
            quants: Vec::with_capacity(blocks * BLOCK / 2),
        }
    }

    /// Row `row` as f32 (an embedding lookup).
    pub fn row(&self, row: usize, out: &mut [f32]) {
        let per = self.cols / BLOCK;
        for (b, values) in out[..self.cols].chunks_exact_mut(BLOCK).enumerate() {
            let i = row * per + b;
            let d = self.scales[i];
            match self.layout {
                Layout::Q8 => {
                    let q = &self.quants[i * BLOCK..(i + 1) * BLOCK];
                    for (v, &q) in values.iter_mut().zip(q) {
                        *v = d * f32::from(q as i8);
                    }
                }
                Layout::Q4 => {
                    let q = &self.quants[i * BLOCK / 2..(i + 1) * BLOCK / 2];
                    let m = self.mins[i];
                    for (j, &byte) in q.iter().enumerate() {
                        values[j] = d * f32::from(byte & 0x0f) + m;
                        values[j + BLOCK / 2] = d * f32::from(byte >> 4) + m;
                    }
                }
            }
        }
    }
}

fn check_shape(len: usize, rows: usize, cols: usize) -> Result<(), LayoutError> {
    if cols == 0 || !cols.is_multiple_of(BLOCK) {
        return Err(LayoutError(format!(
            "rows of {cols} values, not a multiple of {BLOCK}"
        )));
    }
    if rows.checked_mul(cols) != Some(len) {
        return Err(LayoutError(format!(
            "{len} values for a {rows} × {cols} matrix"
        )));
    }
    Ok(())
}

fn blocks_of(bytes: usize, size: usize, rows: usize, cols: usize) -> Result<usize, LayoutError> {
    if !bytes.is_multiple_of(size) {
        return Err(LayoutError(format!(
            "{bytes} bytes, not whole blocks of {size}"
        )));
    }
    check_shape(bytes / size * BLOCK, rows, cols)?;
    Ok(bytes / size)
}

fn f16_at(lo: u8, hi: u8) -> f32 {
    f16::from_bits(u16::from_le_bytes([lo, hi])).to_f32()
}

fn bytemuck_i8(bytes: &mut [u8]) -> &mut [i8] {
    // SAFETY: i8 and u8 have the same size and alignment, every bit
    // pattern is valid for both.
    unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<i8>(), bytes.len()) }
}

/// Rounds one block to signed bytes: returns the scale and the sum of the
/// bytes.
fn quantize_block(values: &[f32], out: &mut [i8]) -> (f32, i32) {
    let amax = values.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
    let mut sum = 0i32;
    for (q, v) in out.iter_mut().zip(values) {
        let r = (v * inv).round() as i32;
        *q = r as i8;
        sum += r;
    }
    (d, sum)
}

/// Activations of `tokens` rows rounded to 8-bit blocks: what a
/// [`QMatrix`] multiplies.
#[derive(Debug, Default)]
pub struct QActs {
    cols: usize,
    tokens: usize,
    scales: Vec<f32>,
    /// Per block: scale × sum of the block's bytes (the offset term of Q4).
    sums: Vec<f32>,
    quants: Vec<i8>,
}

impl QActs {
    /// Quantizes `values`, `tokens` rows of `cols`, reusing the buffers.
    pub fn quantize(&mut self, values: &[f32], cols: usize) {
        debug_assert!(cols.is_multiple_of(BLOCK) && values.len().is_multiple_of(cols));
        let blocks = values.len() / BLOCK;
        self.cols = cols;
        self.tokens = values.len() / cols;
        self.scales.resize(blocks, 0.0);
        self.sums.resize(blocks, 0.0);
        self.quants.resize(values.len(), 0);
        for (i, (block, out)) in values
            .chunks_exact(BLOCK)
            .zip(self.quants.chunks_exact_mut(BLOCK))
            .enumerate()
        {
            let (d, sum) = quantize_block(block, out);
            self.scales[i] = d;
            self.sums[i] = d * sum as f32;
        }
    }
}

/// `out[t][r] = w[r] · x[t]` for every token `t` and row `r`; `out` holds
/// `x.tokens × w.rows` values. Rows are split across the current rayon
/// pool; each output value is computed by one thread in a fixed order, so
/// the result does not depend on the number of threads.
pub fn matmul(w: &QMatrix, x: &QActs, out: &mut [f32]) {
    assert_eq!(w.cols, x.cols, "matrix and activations differ in width");
    assert_eq!(out.len(), x.tokens * w.rows, "output size");
    let kernel = Kernel::detect();
    let threads = rayon::current_num_threads().max(1);
    // Enough chunks to balance, few enough that scheduling stays cheap.
    let chunk = (w.rows / (threads * 4)).clamp(16, 1024);
    let out = SharedOut(out.as_mut_ptr());
    (0..w.rows.div_ceil(chunk)).into_par_iter().for_each(|c| {
        let rows = c * chunk..((c + 1) * chunk).min(w.rows);
        for r in rows {
            // Four tokens at a time share each block of weights unpacked.
            let mut t = 0;
            while t < x.tokens {
                let n = if x.tokens - t >= 4 { 4 } else { 1 };
                let mut v = [0f32; 4];
                if n == 4 {
                    v = kernel.dots::<4>(w, r, x, t);
                } else {
                    v[0] = kernel.dots::<1>(w, r, x, t)[0];
                }
                for (j, &v) in v.iter().enumerate().take(n) {
                    // SAFETY: (t, r) pairs are disjoint across tasks (each
                    // task owns its rows) and within bounds (asserted above).
                    unsafe { out.write((t + j) * w.rows + r, v) };
                }
                t += n;
            }
        }
    });
}

#[derive(Clone, Copy)]
struct SharedOut(*mut f32);
// SAFETY: the tasks that share it write disjoint elements.
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// # Safety
    /// `i` in bounds, and no other thread writes it.
    unsafe fn write(self, i: usize, v: f32) {
        *self.0.add(i) = v;
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kernel {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Kernel {
    fn detect() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return Kernel::Avx2;
        }
        Kernel::Portable
    }

    /// Every kernel this CPU runs, for the tests.
    #[cfg(test)]
    fn available() -> Vec<Kernel> {
        let mut all = vec![Kernel::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                all.push(Kernel::Avx2);
            }
        }
        all
    }

    /// Row `row` of `w` times tokens `t0..t0 + N`.
    fn dots<const N: usize>(self, w: &QMatrix, row: usize, x: &QActs, t0: usize) -> [f32; N] {
        let per = w.cols / BLOCK;
        let wb = row * per;
        let ws = &w.scales[wb..wb + per];
        let xs: [&[f32]; N] =
            std::array::from_fn(|j| &x.scales[(t0 + j) * per..(t0 + j + 1) * per]);
        let xq: [&[i8]; N] =
            std::array::from_fn(|j| &x.quants[(t0 + j) * w.cols..(t0 + j + 1) * w.cols]);
        match w.layout {
            Layout::Q8 => {
                let wq = &w.quants[wb * BLOCK..(wb + per) * BLOCK];
                match self {
                    Kernel::Portable => std::array::from_fn(|j| portable_q8(ws, wq, xs[j], xq[j])),
                    // SAFETY: detect() saw AVX2 and FMA on this CPU.
                    #[cfg(target_arch = "x86_64")]
                    Kernel::Avx2 => unsafe { avx2::q8::<N>(ws, wq, xs, xq) },
                }
            }
            Layout::Q4 => {
                let wm = &w.mins[wb..wb + per];
                let wq = &w.quants[wb * BLOCK / 2..(wb + per) * BLOCK / 2];
                let xsum: [&[f32]; N] =
                    std::array::from_fn(|j| &x.sums[(t0 + j) * per..(t0 + j + 1) * per]);
                match self {
                    Kernel::Portable => {
                        std::array::from_fn(|j| portable_q4(ws, wm, wq, xs[j], xsum[j], xq[j]))
                    }
                    // SAFETY: detect() saw AVX2 and FMA on this CPU.
                    #[cfg(target_arch = "x86_64")]
                    Kernel::Avx2 => unsafe { avx2::q4::<N>(ws, wm, wq, xs, xsum, xq) },
                }
            }
        }
    }
}

fn portable_q8(ws: &[f32], wq: &[u8], xs: &[f32], xq: &[i8]) -> f32 {
    let mut acc = 0f32;
    for b in 0..ws.len() {
        let w = &wq[b * BLOCK..(b + 1) * BLOCK];
        let x = &xq[b * BLOCK..(b + 1) * BLOCK];
        let dot: i32 = w
            .iter()
            .zip(x)
            .map(|(&w, &x)| i32::from(w as i8) * i32::from(x))
            .sum();
        acc += ws[b] * xs[b] * dot as f32;
    }
    acc
}

fn portable_q4(ws: &[f32], wm: &[f32], wq: &[u8], xs: &[f32], xsum: &[f32], xq: &[i8]) -> f32 {
    let mut acc = 0f32;
    let half = BLOCK / 2;
    for b in 0..ws.len() {
        let w = &wq[b * half..(b + 1) * half];
        let x = &xq[b * BLOCK..(b + 1) * BLOCK];
        let mut dot = 0i32;
        for (j, &byte) in w.iter().enumerate() {
            dot += i32::from(byte & 0x0f) * i32::from(x[j]);
            dot += i32::from(byte >> 4) * i32::from(x[j + half]);
        }
        acc += ws[b] * xs[b] * dot as f32 + wm[b] * xsum[b];
    }
    acc
}

/// The x86 kernels for an instruction set: `$features` for the target
/// attribute, `$udot` the unsigned-by-signed byte dot product. Only AVX2
/// (maddubs and madd) is instantiated: AVX-VNNI's single dpbusd measured no
/// faster on SmolLM2 here (prompt 137 against 163 tokens/s, generation 40
/// against 44, medians of 5 on a noisy 2-core machine).
#[cfg(target_arch = "x86_64")]
macro_rules! x86_kernels {
    ($name:ident, $features:literal, |$u:ident, $s:ident| $udot:expr) => {
        mod $name {
            use super::BLOCK;
            use std::arch::x86_64::*;

            /// Horizontal sum of eight lanes.
            #[target_feature(enable = $features)]
            unsafe fn sum8(v: __m256) -> f32 {
                let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
                let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
                let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
                _mm_cvtss_f32(s)
            }

            /// Unsigned bytes times signed bytes, summed in eight i32
            /// lanes, as f32.
            #[target_feature(enable = $features)]
            unsafe fn udot($u: __m256i, $s: __m256i) -> __m256 {
                _mm256_cvtepi32_ps($udot)
            }

            #[target_feature(enable = $features)]
            pub unsafe fn q8<const N: usize>(
                ws: &[f32],
                wq: &[u8],
                xs: [&[f32]; N],
                xq: [&[i8]; N],
            ) -> [f32; N] {
                let mut acc = [_mm256_setzero_ps(); N];
                for b in 0..ws.len() {
                    let w = _mm256_loadu_si256(wq.as_ptr().add(b * BLOCK).cast());
                    // |w| · (x with w's sign): unsigned times signed.
                    let magnitude = _mm256_sign_epi8(w, w);
                    for j in 0..N {
                        let x = _mm256_loadu_si256(xq[j].as_ptr().add(b * BLOCK).cast());
                        let dot = udot(magnitude, _mm256_sign_epi8(x, w));
                        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(ws[b] * xs[j][b]), dot, acc[j]);
                    }
                }
                let mut out = [0f32; N];
                for j in 0..N {
                    out[j] = sum8(acc[j]);
                }
                out
            }

            #[target_feature(enable = $features)]
            pub unsafe fn q4<const N: usize>(
                ws: &[f32],
                wm: &[f32],
                wq: &[u8],
                xs: [&[f32]; N],
                xsum: [&[f32]; N],
                xq: [&[i8]; N],
            ) -> [f32; N] {
                let mut acc = [_mm256_setzero_ps(); N];
                let mut offset = [0f32; N];
                let low = _mm256_set1_epi8(0x0f);
                for b in 0..ws.len() {
                    let bytes = _mm_loadu_si128(wq.as_ptr().add(b * BLOCK / 2).cast());
                    // Low nibbles are values 0..16, high nibbles 16..32.
                    let both = _mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes);
                    let w = _mm256_and_si256(both, low);
                    for j in 0..N {
                        let x = _mm256_loadu_si256(xq[j].as_ptr().add(b * BLOCK).cast());
                        let scale = _mm256_set1_ps(ws[b] * xs[j][b]);
                        acc[j] = _mm256_fmadd_ps(scale, udot(w, x), acc[j]);
                        offset[j] += wm[b] * xsum[j][b];
                    }
                }
                let mut out = [0f32; N];
                for j in 0..N {
                    out[j] = sum8(acc[j]) + offset[j];
                }
                out
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
x86_kernels!(avx2, "avx2,fma", |u, s| _mm256_madd_epi16(
    _mm256_maddubs_epi16(u, s),
    _mm256_set1_epi16(1)
));

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    fn random(n: usize, seed: u64) -> Vec<f32> {
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
    }

    /// GGUF Q4_1 bytes for `values`, written the way ggml quantizes.
    fn q4_1_bytes(values: &[f32]) -> Vec<u8> {
        let mut out = Vec::new();
        for block in values.chunks_exact(BLOCK) {
            let min = block.iter().copied().fold(f32::INFINITY, f32::min);
            let max = block.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let d = (max - min) / 15.0;
            out.extend_from_slice(&f16::from_f32(d).to_bits().to_le_bytes());
            out.extend_from_slice(&f16::from_f32(min).to_bits().to_le_bytes());
            let q = |v: f32| (((v - min) / d).round() as i32).clamp(0, 15) as u8;
            for j in 0..BLOCK / 2 {
                out.push(q(block[j]) | (q(block[j + BLOCK / 2]) << 4));
            }
        }
        out
    }

    fn dense(m: &QMatrix) -> Vec<f32> {
        let mut out = vec![0f32; m.rows * m.cols];
        for (r, row) in out.chunks_exact_mut(m.cols).enumerate() {
            m.row(r, row);
        }
        out
    }

    fn check_product(m: &QMatrix, tokens: usize) {
        let x = random(tokens * m.cols, 7);
        let mut acts = QActs::default();
        acts.quantize(&x, m.cols);
        let mut out = vec![0f32; tokens * m.rows];
        matmul(m, &acts, &mut out);
        let w = dense(m);
        for t in 0..tokens {
            for r in 0..m.rows {
                let exact: f32 = (0..m.cols)
                    .map(|c| w[r * m.cols + c] * x[t * m.cols + c])
                    .sum();
                let got = out[t * m.rows + r];
                // Rounding the activations to 8 bits costs about 1% of the
                // sum's scale.
                assert!(
                    (got - exact).abs() < 0.02 * (m.cols as f32).sqrt(),
                    "row {r} token {t}: {got} vs {exact}"
                );
                for kernel in Kernel::available() {
                    let other = kernel.dots::<1>(m, r, &acts, t)[0];
                    assert!((got - other).abs() < 1e-3, "{kernel:?}: {got} vs {other}");
                }
            }
        }
    }

    #[test]
    fn eight_bit_products_match_the_dense_product() {
        let m = QMatrix::from_f32(&random(40 * 96, 1), 40, 96).unwrap();
        check_product(&m, 3);
    }

    #[test]
    fn four_bit_products_match_the_dense_product() {
        let values = random(40 * 128, 2);
        let m = QMatrix::from_q4_1(&q4_1_bytes(&values), 40, 128).unwrap();
        let back = dense(&m);
        for (a, b) in values.iter().zip(&back) {
            assert!((a - b).abs() < 0.08, "{a} dequantized as {b}");
        }
        check_product(&m, 5);
    }

    #[test]
    fn q4_0_is_q4_with_an_offset_of_minus_eight_scales() {
        // One block: scale 0.5, nibbles 0..15 then 15..0.
        let mut bytes = f16::from_f32(0.5).to_bits().to_le_bytes().to_vec();
        bytes.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
        let m = QMatrix::from_q4_0(&bytes, 1, 32).unwrap();
        let mut row = [0f32; 32];
        m.row(0, &mut row);
        assert_eq!(row[0], -4.0);
        assert_eq!(row[15], 3.5);
        assert_eq!(row[16], 3.5);
        check_product(&m, 2);
    }

    #[test]
    fn malformed_tensors_are_refused() {
        assert!(QMatrix::from_q8_0(&[0u8; 33], 1, 32).is_err());
        assert!(QMatrix::from_q4_1(&[0u8; 20], 2, 32).is_err());
        assert!(QMatrix::from_f32(&[0.0; 20], 1, 20).is_err());
    }
}
