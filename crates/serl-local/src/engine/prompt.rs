//! Attention for many new tokens at once (a prompt) as matrix products.
//!
//! Token by token ([`super::simd::Head`]), each query reads every cached key
//! and value again in f16, and each score ends in a horizontal sum: for the
//! probe's 1,163-token prompt that was a quarter of the prompt's time. Here a
//! block of a head's queries meets the keys in one product (the `gemm`
//! crate, as llama.cpp multiplies a prompt's queries and keys), the keys and
//! values being widened to f32 once per layer; the masked softmax runs per
//! row, and a second product weighs the values. Generation (one new token)
//! keeps the token-by-token kernel, which reads the cache once.

use half::f16;
use rayon::prelude::*;

/// New tokens from which a forward pass attends through this module.
pub(super) const MIN_TOKENS: usize = 16;

/// Query tokens one task attends: the scores of a block over a 1,000-token
/// cache (128 KB) stay in the L2 cache.
const BLOCK: usize = 32;

/// One layer's cache and shape, for the new tokens after `start` cached ones.
pub(super) struct PromptAttention<'a> {
    /// The layer's cached keys and values (f16), the new tokens' included,
    /// position `p`'s at `p × kv_dim`.
    pub keys: &'a [f16],
    pub values: &'a [f16],
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Positions cached before the new tokens.
    pub start: usize,
    /// Positions a query sees, its own included (`usize::MAX`: all).
    pub window: usize,
    /// 1/√width (or the model's own).
    pub scale: f32,
}

impl PromptAttention<'_> {
    /// For `n` new tokens whose rows of `qkv` (each `row` wide) start with
    /// their rotated queries, writes each head's `softmax(scale · K q) V`
    /// into `out` (`n × heads × head_dim`), as [`super::simd::Head`] would.
    pub(super) fn attend(&self, qkv: &[f32], row: usize, n: usize, out: &mut [f32]) {
        let (d, kv_dim) = (self.head_dim, self.kv_heads * self.head_dim);
        let q_dim = self.heads * d;
        assert!(qkv.len() >= n * row && out.len() == n * q_dim && row >= q_dim);
        let total = self.start + n;
        assert!(self.keys.len() >= total * kv_dim && self.values.len() >= total * kv_dim);
        // The first position any new token sees.
        let first = self.from(0);
        let widened: Vec<(Vec<f32>, Vec<f32>)> = (0..self.kv_heads)
            .map(|g| {
                let widen = |cache: &[f16]| {
                    let mut m = vec![0f32; (total - first) * d];
                    for (p, dst) in (first..total).zip(m.chunks_exact_mut(d)) {
                        let at = p * kv_dim + g * d;
                        for (x, h) in dst.iter_mut().zip(&cache[at..at + d]) {
                            *x = h.to_f32();
                        }
                    }
                    m
                };
                (widen(self.keys), widen(self.values))
            })
            .collect();
        out.par_chunks_mut(BLOCK * q_dim).enumerate().for_each_init(
            Vec::new,
            |scores, (b, out)| {
                let t0 = b * BLOCK;
                let rows = out.len() / q_dim;
                for h in 0..self.heads {
                    let (k, v) = &widened[h / (self.heads / self.kv_heads)];
                    let q = &qkv[t0 * row + h * d..];
                    self.block((t0, rows), (q, row), (k, v, first), scores, (out, h * d));
                }
            },
        );
    }

    /// The first position new token `t` sees.
    fn from(&self, t: usize) -> usize {
        (self.start + t + 1).saturating_sub(self.window)
    }

    /// Tokens `t0 .. t0 + rows` of one head: `q` their queries (rows
    /// `stride` apart), `k` and `v` the head's widened cache from position
    /// `first`; the result goes to `out` at column `col` of rows `q_dim`
    /// wide.
    fn block(
        &self,
        (t0, rows): (usize, usize),
        (q, stride): (&[f32], usize),
        (k, v, first): (&[f32], &[f32], usize),
        scores: &mut Vec<f32>,
        (out, col): (&mut [f32], usize),
    ) {
        let d = self.head_dim;
        let q_dim = out.len() / rows;
        // Columns: the positions any of the block's tokens sees.
        let (lo, hi) = (self.from(t0), self.start + t0 + rows);
        let width = hi - lo;
        scores.resize(rows * width, 0.0);
        assert!(q.len() > (rows - 1) * stride + d - 1);
        assert!(k.len() >= (hi - first) * d && v.len() >= (hi - first) * d);
        let (k, v) = (&k[(lo - first) * d..], &v[(lo - first) * d..]);
        // SAFETY: the assertions above keep every index the strides reach
        // inside `q`, `k`, `v` and `scores`; `out` gets its own product
        // below, and nothing aliases.
        unsafe {
            gemm::gemm(
                rows,
                width,
                d,
                scores.as_mut_ptr(),
                1,
                width as isize,
                false,
                q.as_ptr(),
                1,
                stride as isize,
                k.as_ptr(),
                d as isize,
                1,
                0.0,
                self.scale,
                false,
                false,
                false,
                gemm::Parallelism::None,
            );
        }
        for (r, s) in scores.chunks_exact_mut(width).enumerate() {
            let t = t0 + r;
            // Token t sees positions from(t) ..= start + t.
            let (a, b) = (self.from(t) - lo, self.start + t + 1 - lo);
            s[..a].fill(0.0);
            s[b..].fill(0.0);
            let seen = &mut s[a..b];
            let max = seen.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut total = 0f32;
            for x in seen.iter_mut() {
                *x = (*x - max).exp();
                total += *x;
            }
            let norm = 1.0 / total;
            seen.iter_mut().for_each(|x| *x *= norm);
        }
        assert!(out.len() >= (rows - 1) * q_dim + col + d);
        // SAFETY: as above; the product writes `rows` rows of `d` columns
        // from `col`, `q_dim` apart, inside `out`.
        unsafe {
            gemm::gemm(
                rows,
                d,
                width,
                out.as_mut_ptr().add(col),
                1,
                q_dim as isize,
                false,
                scores.as_ptr(),
                1,
                width as isize,
                v.as_ptr(),
                1,
                d as isize,
                0.0,
                1.0,
                false,
                false,
                false,
                gemm::Parallelism::None,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::simd::Head;

    /// Every token of a prompt attends as the token-by-token kernel does:
    /// after a cached prefix and without, with a sliding window and
    /// without, over more than one block.
    #[test]
    fn a_prompt_attends_as_token_by_token() {
        for (start, n, window) in [(0, 40, usize::MAX), (9, 70, usize::MAX), (5, 50, 24)] {
            check(start, n, window);
        }
    }

    fn check(start: usize, n: usize, window: usize) {
        let (heads, kv_heads, d) = (6, 2, 16);
        let (q_dim, kv_dim) = (heads * d, kv_heads * d);
        let row = q_dim + 2 * kv_dim;
        let wave = |len: usize, f: f32| -> Vec<f32> {
            (0..len).map(|i| (i as f32 * f).sin() * 1.5).collect()
        };
        let halves = |v: Vec<f32>| -> Vec<f16> { v.into_iter().map(f16::from_f32).collect() };
        let total = start + n;
        let (keys, values) = (
            halves(wave(total * kv_dim, 0.37)),
            halves(wave(total * kv_dim, 0.11)),
        );
        let qkv = wave(n * row, 0.23);
        let attention = PromptAttention {
            keys: &keys,
            values: &values,
            heads,
            kv_heads,
            head_dim: d,
            start,
            window,
            scale: 0.25,
        };
        let mut got = vec![0f32; n * q_dim];
        attention.attend(&qkv, row, n, &mut got);
        for t in 0..n {
            for h in 0..heads {
                let seen = start + t + 1;
                let from = seen.saturating_sub(window);
                let at = from * kv_dim + (h / (heads / kv_heads)) * d;
                let head = Head {
                    keys: &keys[at..],
                    values: &values[at..],
                    stride: kv_dim,
                    seen: seen - from,
                    scale: 0.25,
                };
                let mut want = vec![0f32; d];
                let q = &qkv[t * row + h * d..t * row + (h + 1) * d];
                head.attend(q, &mut Vec::new(), &mut want);
                let got = &got[t * q_dim + h * d..t * q_dim + (h + 1) * d];
                for (g, w) in got.iter().zip(&want) {
                    assert!((g - w).abs() < 1e-5, "token {t} head {h}: {g} against {w}");
                }
            }
        }
    }
}
