//! A GRU over the observation window in the fused learner, as burn's GRU
//! computes it (`reset_after`, a bias on both transforms of each gate):
//!
//! ```text
//! z = σ(x·W_iz + b_iz + h·W_hz + b_hz)
//! r = σ(x·W_ir + b_ir + h·W_hr + b_hr)
//! g = h·W_hn + b_hn
//! c = tanh(x·W_in + b_in + r ⊙ g)
//! h' = (1 − z) ⊙ c + z ⊙ h
//! ```
//!
//! from h = 0 over the window's observations, oldest first; the block's
//! output is the last h. Its tensors, in this order: the update, reset and
//! new gates', each its input transform's weight and bias, then its hidden
//! transform's. The backward pass runs back through the window, and each
//! weight's gradient is then one product over all its steps. A GRU reads
//! the observation window, so it is always a network's first block: no
//! gradient flows to its input.

use super::kernels::{gemm, tanh};

/// A GRU layer's sizes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct GruShape {
    pub(super) obs_dim: usize,
    pub(super) window: usize,
    pub(super) hidden: usize,
}

/// What the forward pass keeps for the backward pass: per window step,
/// stacked step after step, the input rows, the hidden state before the
/// step, and the gates.
#[derive(Debug, Clone, Default)]
pub(super) struct GruTrace {
    inputs: Vec<f32>,
    before: Vec<f32>,
    update: Vec<f32>,
    reset: Vec<f32>,
    candidate: Vec<f32>,
    /// `h·W_hn + b_hn`, which the reset gate scales.
    hidden_new: Vec<f32>,
}

/// `out = x·W + b` for `rows` rows.
fn affine(rows: usize, fan_in: usize, x: &[f32], w: &[f32], b: &[f32], out: &mut [f32]) {
    let fan_out = b.len();
    gemm([rows, fan_in, fan_out], (x, false), (w, false), out);
    for row in out.chunks_exact_mut(fan_out) {
        for (v, b) in row.iter_mut().zip(b) {
            *v += b;
        }
    }
}

/// burn's sigmoid (`exp(−ln(1 + exp(−x)))`).
fn sigmoid(x: f32) -> f32 {
    (-(1.0 + (-x).exp()).ln()).exp()
}

/// Runs `n` rows of `x` (each the window's observations, oldest first)
/// through the GRU with tensors `t`, its last hidden state into `out`.
pub(super) fn forward(
    s: GruShape,
    t: &[Vec<f32>],
    x: &[f32],
    n: usize,
    out: &mut [f32],
    tr: &mut GruTrace,
) {
    let (d, w, hd) = (s.obs_dim, s.window, s.hidden);
    let step = n * hd;
    tr.inputs.resize(w * n * d, 0.0);
    for i in 0..n {
        for k in 0..w {
            let from = &x[i * w * d + k * d..i * w * d + (k + 1) * d];
            tr.inputs[(k * n + i) * d..(k * n + i + 1) * d].copy_from_slice(from);
        }
    }
    for v in [
        &mut tr.before,
        &mut tr.update,
        &mut tr.reset,
        &mut tr.candidate,
        &mut tr.hidden_new,
    ] {
        v.resize(w * step, 0.0);
    }
    let mut h = vec![0f32; step];
    let (mut a, mut b) = (vec![0f32; step], vec![0f32; step]);
    for k in 0..w {
        let xk = &tr.inputs[k * n * d..(k + 1) * n * d];
        let at = k * step..(k + 1) * step;
        tr.before[at.clone()].copy_from_slice(&h);
        let gate = |gi: usize, dest: &mut [f32], hidden_part: &mut [f32]| {
            affine(n, d, xk, &t[4 * gi], &t[4 * gi + 1], dest);
            affine(n, hd, &h, &t[4 * gi + 2], &t[4 * gi + 3], hidden_part);
        };
        gate(0, &mut a, &mut b);
        for ((z, a), b) in tr.update[at.clone()].iter_mut().zip(&a).zip(&b) {
            *z = sigmoid(a + b);
        }
        gate(1, &mut a, &mut b);
        for ((r, a), b) in tr.reset[at.clone()].iter_mut().zip(&a).zip(&b) {
            *r = sigmoid(a + b);
        }
        gate(2, &mut a, &mut tr.hidden_new[at.clone()]);
        for j in 0..step {
            let g = tr.hidden_new[k * step + j];
            let c = tanh(a[j] + tr.reset[k * step + j] * g);
            let z = tr.update[k * step + j];
            tr.candidate[k * step + j] = c;
            h[j] = c * (1.0 - z) + z * h[j];
        }
    }
    out[..step].copy_from_slice(&h);
}

/// The gradients of the GRU's tensors into `g`, from `dh`, the loss's
/// gradient for its output (`n` rows).
pub(super) fn backward(
    s: GruShape,
    t: &[Vec<f32>],
    n: usize,
    tr: &GruTrace,
    dh: &[f32],
    g: &mut [Vec<f32>],
) {
    let (d, w, hd) = (s.obs_dim, s.window, s.hidden);
    let step = n * hd;
    let mut dh = dh[..step].to_vec();
    // The gradients of each gate's sums, stacked by step: the update's and
    // the reset's pre-activations, the candidate's, and `h·W_hn + b_hn`.
    let mut d_update = vec![0f32; w * step];
    let mut d_reset = vec![0f32; w * step];
    let mut d_candidate = vec![0f32; w * step];
    let mut d_hidden_new = vec![0f32; w * step];
    let mut through = vec![0f32; step];
    for k in (0..w).rev() {
        for (j, dh) in dh.iter_mut().enumerate() {
            let i = k * step + j;
            let (z, r, c) = (tr.update[i], tr.reset[i], tr.candidate[i]);
            let dc = *dh * (1.0 - z) * (1.0 - c * c);
            d_candidate[i] = dc;
            d_hidden_new[i] = dc * r;
            d_reset[i] = dc * tr.hidden_new[i] * r * (1.0 - r);
            d_update[i] = *dh * (tr.before[i] - c) * z * (1.0 - z);
            *dh *= z;
        }
        if k == 0 {
            break;
        }
        let at = k * step..(k + 1) * step;
        for (sums, gi) in [(&d_update, 0), (&d_reset, 1), (&d_hidden_new, 2)] {
            gemm(
                [n, hd, hd],
                (&sums[at.clone()], false),
                (&t[4 * gi + 2], true),
                &mut through,
            );
            for (a, b) in dh.iter_mut().zip(&through) {
                *a += b;
            }
        }
    }
    let rows = w * n;
    for (gi, (input_sums, hidden_sums)) in [
        (&d_update, &d_update),
        (&d_reset, &d_reset),
        (&d_candidate, &d_hidden_new),
    ]
    .into_iter()
    .enumerate()
    {
        gemm(
            [d, rows, hd],
            (&tr.inputs, true),
            (input_sums, false),
            &mut g[4 * gi],
        );
        column_sums(input_sums, hd, &mut g[4 * gi + 1]);
        gemm(
            [hd, rows, hd],
            (&tr.before, true),
            (hidden_sums, false),
            &mut g[4 * gi + 2],
        );
        column_sums(hidden_sums, hd, &mut g[4 * gi + 3]);
    }
}

/// `out[c] = Σ_r m[r][c]` over rows of `width`.
fn column_sums(m: &[f32], width: usize, out: &mut [f32]) {
    out.fill(0.0);
    for row in m.chunks_exact(width) {
        for (o, v) in out.iter_mut().zip(row) {
            *o += v;
        }
    }
}
