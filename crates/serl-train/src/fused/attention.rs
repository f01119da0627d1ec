//! Book attention on the fused learner: burn's `BookAttention` block
//! (`net.rs`) as flat tensors, forward and backward. The newest
//! observation's five book levels are five tokens of four values; each is
//! embedded (`E = T·Wₑ + bₑ`), attended by burn's multi-head attention
//! (queries, keys and values of `E`, scores `Q·Kᵀ/√dₖ` per head, softmax,
//! no dropout, the heads' contexts through the output layer), and the
//! tokens' mean is put before the observation's other columns. Always the
//! first layer: nothing below it takes a gradient.
//!
//! Tensors, in order: `Wₑ, bₑ, W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o`.

use super::kernels::gemm;

/// Tokens per row: the book's levels.
pub(super) const TOKENS: usize = serl_design::BOOK_LEVELS;
/// Values per token.
pub(super) const TOKEN: usize = serl_design::BOOK_TOKEN;

/// The block's sizes and where its inputs sit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct AttentionShape {
    /// Width of the embedding and of the attention.
    pub d_model: usize,
    /// Heads; `d_model / heads` columns each.
    pub heads: usize,
    /// Columns of the input row (the flattened window).
    pub width: usize,
    /// Where the newest observation starts in the row.
    pub newest: usize,
}

impl AttentionShape {
    /// Columns of the output row.
    pub fn fan_out(&self) -> usize {
        self.d_model + self.width - TOKENS * TOKEN
    }

    fn d_k(&self) -> usize {
        self.d_model / self.heads.max(1)
    }

    /// The input columns of the tokens, token-major (level, then part), as
    /// `net.rs` gathers them.
    pub fn book(&self) -> Vec<usize> {
        (0..TOKENS)
            .flat_map(|level| (0..TOKEN).map(move |part| (level, part)))
            .map(|(level, part)| self.newest + serl_design::book_index(level, part))
            .collect()
    }

    /// The input columns passed through after the pooled tokens, in order.
    pub fn rest(&self) -> Vec<usize> {
        let book = self.book();
        (0..self.width).filter(|c| !book.contains(c)).collect()
    }
}

/// What the backward pass needs from the forward pass: per token row
/// (`n × TOKENS` of them) the tokens, embeddings, queries, keys, values
/// and contexts, and per row and head the attention weights.
#[derive(Debug, Clone, Default)]
pub(super) struct AttentionTrace {
    tokens: Vec<f32>,
    embedded: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    context: Vec<f32>,
    weights: Vec<f32>,
    /// Scratch of the output layer and of the backward pass.
    out: Vec<f32>,
    d_out: Vec<f32>,
    d_context: Vec<f32>,
    d_q: Vec<f32>,
    d_k: Vec<f32>,
    d_v: Vec<f32>,
    d_embedded: Vec<f32>,
}

/// `rows × d` of `input · W + b`.
fn linear(
    rows: usize,
    fan_in: usize,
    d: usize,
    input: &[f32],
    w: &[f32],
    b: &[f32],
    out: &mut Vec<f32>,
) {
    out.resize(rows * d, 0.0);
    gemm([rows, fan_in, d], (input, false), (w, false), out);
    for row in out.chunks_exact_mut(d) {
        for (o, b) in row.iter_mut().zip(b) {
            *o += b;
        }
    }
}

/// Runs `n` rows of `x` through the block into `out` (`n × fan_out`).
pub(super) fn forward(
    s: &AttentionShape,
    t: &[Vec<f32>],
    x: &[f32],
    n: usize,
    out: &mut [f32],
    tr: &mut AttentionTrace,
) {
    let (d, rows) = (s.d_model, n * TOKENS);
    let (book, rest) = (s.book(), s.rest());
    tr.tokens.resize(rows * TOKEN, 0.0);
    for (row, tokens) in x
        .chunks_exact(s.width)
        .zip(tr.tokens.chunks_exact_mut(TOKENS * TOKEN))
    {
        for (v, &c) in tokens.iter_mut().zip(&book) {
            *v = row[c];
        }
    }
    linear(rows, TOKEN, d, &tr.tokens, &t[0], &t[1], &mut tr.embedded);
    linear(rows, d, d, &tr.embedded, &t[2], &t[3], &mut tr.q);
    linear(rows, d, d, &tr.embedded, &t[4], &t[5], &mut tr.k);
    linear(rows, d, d, &tr.embedded, &t[6], &t[7], &mut tr.v);
    attend(s, n, tr);
    linear(rows, d, d, &tr.context, &t[8], &t[9], &mut tr.out);
    let fan_out = s.fan_out();
    for (r, (o, row)) in out
        .chunks_exact_mut(fan_out)
        .zip(x.chunks_exact(s.width))
        .enumerate()
    {
        let (pooled, tail) = o.split_at_mut(d);
        pooled.fill(0.0);
        for token in tr.out[r * TOKENS * d..(r + 1) * TOKENS * d].chunks_exact(d) {
            for (p, v) in pooled.iter_mut().zip(token) {
                *p += v;
            }
        }
        pooled.iter_mut().for_each(|p| *p /= TOKENS as f32);
        for (o, &c) in tail.iter_mut().zip(&rest) {
            *o = row[c];
        }
    }
}

/// The heads' attention weights and contexts from the queries, keys and
/// values, row by row.
fn attend(s: &AttentionShape, n: usize, tr: &mut AttentionTrace) {
    let (d, dk) = (s.d_model, s.d_k());
    let scale = (dk as f32).sqrt();
    tr.weights.resize(n * s.heads * TOKENS * TOKENS, 0.0);
    tr.context.resize(n * TOKENS * d, 0.0);
    for r in 0..n {
        let base = r * TOKENS * d;
        for h in 0..s.heads {
            let w = &mut tr.weights[(r * s.heads + h) * TOKENS * TOKENS..][..TOKENS * TOKENS];
            for i in 0..TOKENS {
                let q = &tr.q[base + i * d + h * dk..][..dk];
                let scores = &mut w[i * TOKENS..(i + 1) * TOKENS];
                for (j, sc) in scores.iter_mut().enumerate() {
                    let k = &tr.k[base + j * d + h * dk..][..dk];
                    *sc = q.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() / scale;
                }
                let max = scores.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
                let mut total = 0.0;
                for sc in scores.iter_mut() {
                    *sc = (*sc - max).exp();
                    total += *sc;
                }
                scores.iter_mut().for_each(|sc| *sc /= total);
                let c = &mut tr.context[base + i * d + h * dk..][..dk];
                c.fill(0.0);
                for (j, a) in scores.iter().enumerate() {
                    let v = &tr.v[base + j * d + h * dk..][..dk];
                    for (c, v) in c.iter_mut().zip(v) {
                        *c += a * v;
                    }
                }
            }
        }
    }
}

/// `g[0] = inputᵀ·delta`, `g[1] = Σ delta` (a linear layer's weights and
/// bias) and, with `below`, `below = delta·Wᵀ` (added when `add`).
fn linear_backward(
    [rows, fan_in, d]: [usize; 3],
    input: &[f32],
    w: &[f32],
    delta: &[f32],
    g: &mut [Vec<f32>],
    below: Option<(&mut Vec<f32>, bool)>,
) {
    gemm([fan_in, rows, d], (input, true), (delta, false), &mut g[0]);
    g[1].fill(0.0);
    for row in delta.chunks_exact(d) {
        for (g, v) in g[1].iter_mut().zip(row) {
            *g += v;
        }
    }
    if let Some((below, add)) = below {
        let mut product = vec![0.0; rows * fan_in];
        gemm([rows, d, fan_in], (delta, false), (w, true), &mut product);
        if add {
            below.iter_mut().zip(&product).for_each(|(b, p)| *b += p);
        } else {
            *below = product;
        }
    }
}

/// The block's gradients into `g` from `delta`, the loss's gradient with
/// respect to its output (`n × fan_out`).
pub(super) fn backward(
    s: &AttentionShape,
    t: &[Vec<f32>],
    n: usize,
    tr: &mut AttentionTrace,
    delta: &[f32],
    g: &mut [Vec<f32>],
) {
    let (d, rows) = (s.d_model, n * TOKENS);
    // The mean over the tokens: each gets a fifth of the pooled gradient.
    tr.d_out.resize(rows * d, 0.0);
    for (r, row) in delta.chunks_exact(s.fan_out()).enumerate() {
        for token in tr.d_out[r * TOKENS * d..(r + 1) * TOKENS * d].chunks_exact_mut(d) {
            for (o, v) in token.iter_mut().zip(&row[..d]) {
                *o = v / TOKENS as f32;
            }
        }
    }
    let (g_embed, rest) = g.split_at_mut(2);
    let (g_q, rest) = rest.split_at_mut(2);
    let (g_k, rest) = rest.split_at_mut(2);
    let (g_v, g_o) = rest.split_at_mut(2);
    let d_out = std::mem::take(&mut tr.d_out);
    let mut d_context = std::mem::take(&mut tr.d_context);
    linear_backward(
        [rows, d, d],
        &tr.context,
        &t[8],
        &d_out,
        g_o,
        Some((&mut d_context, false)),
    );
    tr.d_out = d_out;
    tr.d_context = d_context;
    attend_backward(s, n, tr);
    let mut d_embedded = std::mem::take(&mut tr.d_embedded);
    linear_backward(
        [rows, d, d],
        &tr.embedded,
        &t[2],
        &tr.d_q,
        g_q,
        Some((&mut d_embedded, false)),
    );
    linear_backward(
        [rows, d, d],
        &tr.embedded,
        &t[4],
        &tr.d_k,
        g_k,
        Some((&mut d_embedded, true)),
    );
    linear_backward(
        [rows, d, d],
        &tr.embedded,
        &t[6],
        &tr.d_v,
        g_v,
        Some((&mut d_embedded, true)),
    );
    linear_backward(
        [rows, TOKEN, d],
        &tr.tokens,
        &t[0],
        &d_embedded,
        g_embed,
        None,
    );
    tr.d_embedded = d_embedded;
}

/// The queries', keys' and values' gradients from the contexts'.
fn attend_backward(s: &AttentionShape, n: usize, tr: &mut AttentionTrace) {
    let (d, dk) = (s.d_model, s.d_k());
    let scale = (dk as f32).sqrt();
    for buf in [&mut tr.d_q, &mut tr.d_k, &mut tr.d_v] {
        buf.clear();
        buf.resize(n * TOKENS * d, 0.0);
    }
    let mut d_scores = [0f32; TOKENS];
    for r in 0..n {
        let base = r * TOKENS * d;
        for h in 0..s.heads {
            let w = &tr.weights[(r * s.heads + h) * TOKENS * TOKENS..][..TOKENS * TOKENS];
            for i in 0..TOKENS {
                let a = &w[i * TOKENS..(i + 1) * TOKENS];
                let dc = &tr.d_context[base + i * d + h * dk..][..dk];
                // Through the weighted sum of values, then the softmax.
                for (j, ds) in d_scores.iter_mut().enumerate() {
                    let v = &tr.v[base + j * d + h * dk..][..dk];
                    *ds = dc.iter().zip(v).map(|(x, y)| x * y).sum();
                    let dv = &mut tr.d_v[base + j * d + h * dk..][..dk];
                    for (dv, x) in dv.iter_mut().zip(dc) {
                        *dv += a[j] * x;
                    }
                }
                let dot: f32 = a.iter().zip(&d_scores).map(|(a, x)| a * x).sum();
                for (ds, a) in d_scores.iter_mut().zip(a) {
                    *ds = a * (*ds - dot) / scale;
                }
                // Scores are q_i·k_j: into the query of i and every key.
                for (j, ds) in d_scores.iter().enumerate() {
                    for c in 0..dk {
                        let (qi, kj) = (base + i * d + h * dk + c, base + j * d + h * dk + c);
                        tr.d_q[qi] += ds * tr.k[kj];
                        tr.d_k[kj] += ds * tr.q[qi];
                    }
                }
            }
        }
    }
}
