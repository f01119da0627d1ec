//! Attention over a cache kept in f16, computed in f32: dot products with
//! eight independent sums, so that the compiler vectorizes them (AVX2,
//! with F16C to widen the cache, where the CPU has them).
//!
//! The cache is f16, as llama.cpp keeps it by default: generating a token
//! reads every cached key and value of every layer (50 MB in f32 for
//! SmolLM2 at 1,100 tokens, half of what its weights take), so half the
//! bytes is what made generation as fast as llama.cpp's.

use half::f16;

/// One attention head over the cache: keys and values of position `p`
/// start at `p × stride` in `keys` and `values`.
pub struct Head<'a> {
    pub keys: &'a [f16],
    pub values: &'a [f16],
    pub stride: usize,
    /// Positions the query sees (its own included).
    pub seen: usize,
    /// 1/√width.
    pub scale: f32,
}

impl Head<'_> {
    /// `out = softmax(scale · K q) V`, with `scores` as scratch.
    pub fn attend(&self, q: &[f32], scores: &mut Vec<f32>, out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("fma")
            && std::is_x86_feature_detected!("f16c")
        {
            // SAFETY: the CPU has AVX2, FMA and F16C.
            return unsafe { self.attend_avx2(q, scores, out) };
        }
        self.attend_lanes(q, scores, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn attend_avx2(&self, q: &[f32], scores: &mut Vec<f32>, out: &mut [f32]) {
        use std::arch::x86_64::*;
        let d = q.len();
        if !d.is_multiple_of(8) {
            return self.attend_lanes(q, scores, out);
        }
        let (keys, values) = (self.keys.as_ptr(), self.values.as_ptr());
        // Eight f16 at `p` widened to f32.
        let load = |p: *const f16| _mm256_cvtph_ps(_mm_loadu_si128(p.cast()));
        // The loads below stay within these bounds.
        assert!(self.keys.len() >= (self.seen - 1) * self.stride + d);
        assert!(self.values.len() >= (self.seen - 1) * self.stride + d);
        assert!(out.len() == d);
        scores.resize(self.seen, 0.0);
        // Four positions at a time: four independent chains of multiply-adds
        // instead of one that waits on itself.
        let mut p = 0;
        while p < self.seen {
            let n = (self.seen - p).min(4);
            let mut acc = [_mm256_setzero_ps(); 4];
            for i in (0..d).step_by(8) {
                let a = _mm256_loadu_ps(q.as_ptr().add(i));
                for (j, acc) in acc.iter_mut().enumerate().take(n) {
                    let k = keys.add((p + j) * self.stride + i);
                    *acc = _mm256_fmadd_ps(a, load(k), *acc);
                }
            }
            for (j, acc) in acc.iter().enumerate().take(n) {
                scores[p + j] = self.scale * sum8(*acc);
            }
            p += n;
        }
        let norm = softmax(scores);
        // Likewise the values: each output lane is loaded and stored once
        // for four positions.
        out.fill(0.0);
        let o = out.as_mut_ptr();
        let mut p = 0;
        while p < self.seen {
            let n = (self.seen - p).min(4);
            let mut w = [_mm256_setzero_ps(); 4];
            for (j, w) in w.iter_mut().enumerate().take(n) {
                *w = _mm256_set1_ps(scores[p + j] * norm);
            }
            for i in (0..d).step_by(8) {
                let mut acc = _mm256_loadu_ps(o.add(i));
                for (j, w) in w.iter().enumerate().take(n) {
                    let v = values.add((p + j) * self.stride + i);
                    acc = _mm256_fmadd_ps(*w, load(v), acc);
                }
                _mm256_storeu_ps(o.add(i), acc);
            }
            p += n;
        }
    }

    #[inline(always)]
    fn attend_lanes(&self, q: &[f32], scores: &mut Vec<f32>, out: &mut [f32]) {
        let d = q.len();
        scores.resize(self.seen, 0.0);
        for (p, score) in scores.iter_mut().enumerate() {
            let at = p * self.stride;
            *score = self.scale * dot_half(q, &self.keys[at..at + d]);
        }
        let norm = softmax(scores);
        out.fill(0.0);
        for (p, &s) in scores.iter().enumerate() {
            let at = p * self.stride;
            axpy_lanes(s * norm, &self.values[at..at + d], out);
        }
    }
}

/// Exponentiates `scores` less their maximum, in place; returns one over
/// their sum.
#[inline(always)]
fn softmax(scores: &mut [f32]) -> f32 {
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut total = 0f32;
    for s in scores.iter_mut() {
        *s = (*s - max).exp();
        total += *s;
    }
    1.0 / total
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn sum8(v: std::arch::x86_64::__m256) -> f32 {
    use std::arch::x86_64::*;
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    _mm_cvtss_f32(s)
}

/// `a · b` in eight lanes, which the compiler vectorizes.
#[inline(always)]
pub(crate) fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
    dot_with(a, b, |x| x)
}

/// `a · b` with `b` widened from f16 as it is read.
#[inline(always)]
fn dot_half(a: &[f32], b: &[f16]) -> f32 {
    dot_with(a, b, f16::to_f32)
}

#[inline(always)]
fn dot_with<T: Copy>(a: &[f32], b: &[T], widen: impl Fn(T) -> f32) -> f32 {
    let n = a.len().min(b.len());
    let whole = n - n % 8;
    let mut lanes = [0f32; 8];
    let mut i = 0;
    while i < whole {
        for j in 0..8 {
            lanes[j] += a[i + j] * widen(b[i + j]);
        }
        i += 8;
    }
    let mut sum = 0f32;
    for lane in lanes {
        sum += lane;
    }
    for k in whole..n {
        sum += a[k] * widen(b[k]);
    }
    sum
}

#[inline(always)]
fn axpy_lanes(s: f32, v: &[f16], out: &mut [f32]) {
    for (o, x) in out.iter_mut().zip(v) {
        *o += s * x.to_f32();
    }
}

#[cfg(test)]
mod tests {
    use super::Head;
    use half::f16;

    #[test]
    fn a_head_attends_as_the_plain_formula_says() {
        // 12: the portable loop; 16: the AVX2 one where the CPU has it.
        for d in [12, 16] {
            check_head(d);
        }
    }

    fn check_head(d: usize) {
        let (stride, seen) = (20, 7);
        let wave =
            |n: usize, f: f32| -> Vec<f32> { (0..n).map(|i| (i as f32 * f).sin()).collect() };
        // The cache holds f16: the formula reads the same rounded values.
        let halves = |v: Vec<f32>| -> Vec<f16> { v.into_iter().map(f16::from_f32).collect() };
        let (keys, values, q) = (
            halves(wave(stride * seen, 0.37)),
            halves(wave(stride * seen, 0.11)),
            wave(d, 0.7),
        );
        let head = Head {
            keys: &keys[4..],
            values: &values[4..],
            stride,
            seen,
            scale: 0.5,
        };
        let mut out = vec![0f32; d];
        head.attend(&q, &mut Vec::new(), &mut out);
        let scores: Vec<f32> = (0..seen)
            .map(|p| {
                let key = |i: usize| keys[4 + p * stride + i].to_f32();
                0.5 * (0..d).map(|i| q[i] * key(i)).sum::<f32>()
            })
            .collect();
        let total: f32 = scores.iter().map(|s| s.exp()).sum();
        for i in 0..d {
            let want: f32 = (0..seen)
                .map(|p| scores[p].exp() / total * values[4 + p * stride + i].to_f32())
                .sum();
            assert!((out[i] - want).abs() < 1e-5, "{i}: {} vs {want}", out[i]);
        }
    }
}
