//! The fused learner's networks: a trunk of dense layers and layer norms
//! plus a dense head, as flat tensors, with their forward and backward
//! passes and the kernels under them.

use burn::module::Param;
use burn::nn::{LayerNorm, Linear};
use burn::tensor::{Tensor, TensorData};

use super::attention::{self, AttentionShape, AttentionTrace};
use super::gru::{self, GruShape, GruTrace};
use super::kernels::{gemm, tanh};
use crate::net::{Block, BookAttention, Residual, Trunk, WindowGru, LAYER_NORM_EPSILON};
use crate::tensors::{floats, floats1};
use serl_design::{Activation, BlockSpec, NetworkSpec};

/// One layer of an [`Mlp`], with the tensors it owns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Layer {
    /// `activation(x·W + b)`: `W` is `fan_in × fan_out`, then `b`.
    Dense {
        fan_in: usize,
        fan_out: usize,
        activation: Activation,
    },
    /// Burn's layer norm over `width` features: `(x − mean) / √(var + ε)`
    /// per row (the variance over the row, not its unbiased estimate),
    /// times γ plus β, the two tensors.
    Norm { width: usize },
    /// `x + (activation(x·W₁ + b₁)·W₂ + b₂)` at constant `width`: `W₁`,
    /// `b₁`, `W₂`, `b₂`.
    Residual {
        width: usize,
        activation: Activation,
    },
    /// A GRU over the observation window (`gru`): always the first layer.
    Gru(GruShape),
    /// Attention over the newest book levels (`attention`): always the
    /// first layer.
    Attention(AttentionShape),
}

impl Layer {
    fn fan_out(&self) -> usize {
        match *self {
            Layer::Dense { fan_out, .. } => fan_out,
            Layer::Norm { width } | Layer::Residual { width, .. } => width,
            Layer::Gru(s) => s.hidden,
            Layer::Attention(s) => s.fan_out(),
        }
    }

    /// How many tensors it owns.
    fn tensors(&self) -> usize {
        match self {
            Layer::Residual { .. } => 4,
            Layer::Gru(_) => 12,
            Layer::Attention(_) => 10,
            _ => 2,
        }
    }
}

/// Whether the fused learner trains a network of this spec: dense and
/// residual blocks (any activation), layer norms, and a GRU or book
/// attention first (where the spec allows them): every block the grammar
/// has. The one test of which learner trains
/// ([`crate::TrainConfig::trains_fused`]).
pub fn implements(spec: &NetworkSpec) -> bool {
    spec.blocks.iter().enumerate().all(|(i, b)| match b {
        BlockSpec::Dense { .. } | BlockSpec::Residual { .. } | BlockSpec::LayerNorm => true,
        BlockSpec::Gru { .. } | BlockSpec::BookAttention { .. } => i == 0,
    })
}

/// A network as flat tensors: layer `l` owns the tensors from
/// `params[start[l]]` on, in [`Layer`]'s order. The actor's last tensor is
/// its log standard deviation when the head is Gaussian.
#[derive(Debug, Clone)]
pub(super) struct Mlp {
    pub(super) layers: Vec<Layer>,
    pub(super) params: Vec<Vec<f32>>,
    start: Vec<usize>,
}

/// Per-layer outputs of one forward pass, kept for the backward pass.
#[derive(Debug, Clone, Default)]
pub(super) struct Activations {
    pub(super) outputs: Vec<Vec<f32>>,
    /// Each layer norm's normalised input (before γ and β), by layer.
    normalized: Vec<Vec<f32>>,
    /// Each layer norm's 1 / √(var + ε) per row, by layer.
    inv_std: Vec<Vec<f32>>,
    /// Each residual block's inner activation, by layer.
    hidden: Vec<Vec<f32>>,
    /// A GELU's input (its derivative needs it, not its output), by layer:
    /// a dense layer's, or a residual block's inner one.
    pre: Vec<Vec<f32>>,
    /// A first-layer GRU's gates per window step.
    gru: GruTrace,
    /// A first-layer book attention's tokens, projections and weights.
    attention: AttentionTrace,
    /// Scratch: a residual block's gradient for its inner activation.
    d_hidden: Vec<f32>,
    /// The loss's gradient with respect to the current layer's output.
    pub(super) delta: Vec<f32>,
    delta_prev: Vec<f32>,
}

impl Mlp {
    /// The fused twin of a burn trunk and head, or `None` for a network
    /// this learner does not implement (see [`implements`]).
    pub(super) fn from_burn(trunk: &Trunk, head: &Linear) -> Option<Self> {
        let mut mlp = Mlp {
            layers: Vec::new(),
            params: Vec::new(),
            start: Vec::new(),
        };
        for block in trunk.blocks() {
            match block {
                Block::Dense(d) => mlp.push(d.linear(), d.activation)?,
                Block::Norm(norm) => mlp.push_norm(norm)?,
                Block::Residual(r) => mlp.push_residual(r)?,
                Block::Gru(g) if mlp.layers.is_empty() => mlp.push_gru(g)?,
                Block::Attention(a) if mlp.layers.is_empty() => mlp.push_attention(a)?,
                _ => return None,
            }
        }
        mlp.push(head, Activation::Identity)?;
        Some(mlp)
    }

    fn add(&mut self, layer: Layer, tensors: Vec<Vec<f32>>) {
        debug_assert_eq!(tensors.len(), layer.tensors());
        self.start.push(self.params.len());
        self.params.extend(tensors);
        self.layers.push(layer);
    }

    fn push(&mut self, linear: &Linear, activation: Activation) -> Option<()> {
        let [fan_in, fan_out] = linear.weight.val().dims();
        let layer = Layer::Dense {
            fan_in,
            fan_out,
            activation,
        };
        self.add(layer, linear_tensors(linear)?);
        Some(())
    }

    fn push_norm(&mut self, norm: &LayerNorm) -> Option<()> {
        let gamma = floats1(norm.gamma.val());
        let beta = floats1(norm.beta.as_ref()?.val());
        self.add(Layer::Norm { width: gamma.len() }, vec![gamma, beta]);
        Some(())
    }

    fn push_residual(&mut self, r: &Residual) -> Option<()> {
        let [width, _] = r.first().weight.val().dims();
        let mut tensors = linear_tensors(r.first())?;
        tensors.extend(linear_tensors(r.second())?);
        let layer = Layer::Residual {
            width,
            activation: r.activation,
        };
        self.add(layer, tensors);
        Some(())
    }

    fn push_gru(&mut self, g: &WindowGru) -> Option<()> {
        let gru = g.gru();
        let mut tensors = Vec::with_capacity(12);
        for gate in [&gru.update_gate, &gru.reset_gate, &gru.new_gate] {
            tensors.extend(linear_tensors(&gate.input_transform)?);
            tensors.extend(linear_tensors(&gate.hidden_transform)?);
        }
        let shape = GruShape {
            obs_dim: g.obs_dim(),
            window: g.window(),
            hidden: gru.d_hidden,
        };
        self.add(Layer::Gru(shape), tensors);
        Some(())
    }

    fn push_attention(&mut self, a: &BookAttention) -> Option<()> {
        let mha = a.attention();
        let width = a.book().len() + a.rest().len();
        let newest = a.book().first()? - serl_design::book_index(0, 0);
        let shape = AttentionShape {
            d_model: mha.d_model,
            heads: mha.n_heads,
            width,
            newest,
        };
        // The same columns as burn's block gathers, or burn trains it.
        if shape.book() != a.book() || shape.rest() != a.rest() || mha.quiet_softmax {
            return None;
        }
        let mut tensors = linear_tensors(a.embed())?;
        for l in [&mha.query, &mha.key, &mha.value, &mha.output] {
            tensors.extend(linear_tensors(l)?);
        }
        self.add(Layer::Attention(shape), tensors);
        Some(())
    }

    /// Layer `l`'s tensors.
    fn tensors(&self, l: usize) -> &[Vec<f32>] {
        &self.params[self.start[l]..self.start[l] + self.layers[l].tensors()]
    }

    /// Columns of the trunk's last features (the last layer's input).
    pub(super) fn last_hidden_width(&self) -> Option<usize> {
        let n = self.layers.len();
        (n >= 2).then(|| self.layers[n - 2].fan_out())
    }

    pub(super) fn out_width(&self) -> usize {
        self.layers.last().map_or(0, Layer::fan_out)
    }

    /// Runs `n` rows of `x` through every layer, keeping what the backward
    /// pass needs in `acts`.
    pub(super) fn forward(&self, x: &[f32], n: usize, acts: &mut Activations) {
        let layers = self.layers.len();
        acts.outputs.resize(layers, Vec::new());
        acts.normalized.resize(layers, Vec::new());
        acts.inv_std.resize(layers, Vec::new());
        acts.hidden.resize(layers, Vec::new());
        acts.pre.resize(layers, Vec::new());
        for (l, layer) in self.layers.iter().enumerate() {
            let (before, rest) = acts.outputs.split_at_mut(l);
            let input = if l == 0 { x } else { &before[l - 1] };
            let out = &mut rest[0];
            out.resize(n * layer.fan_out(), 0.0);
            let t = self.tensors(l);
            match *layer {
                Layer::Dense {
                    fan_in,
                    fan_out,
                    activation,
                } => {
                    gemm([n, fan_in, fan_out], (input, false), (&t[0], false), out);
                    activate(out, &t[1], activation, &mut acts.pre[l]);
                }
                Layer::Norm { width } => layer_norm_forward(
                    &input[..n * width],
                    &t[0],
                    &t[1],
                    out,
                    &mut acts.normalized[l],
                    &mut acts.inv_std[l],
                ),
                Layer::Gru(shape) => gru::forward(shape, t, input, n, out, &mut acts.gru),
                Layer::Attention(shape) => {
                    attention::forward(&shape, t, input, n, out, &mut acts.attention)
                }
                Layer::Residual { width, activation } => {
                    let h = &mut acts.hidden[l];
                    h.resize(n * width, 0.0);
                    gemm([n, width, width], (input, false), (&t[0], false), h);
                    activate(h, &t[1], activation, &mut acts.pre[l]);
                    gemm([n, width, width], (h, false), (&t[2], false), out);
                    for (row, x) in out.chunks_exact_mut(width).zip(input.chunks_exact(width)) {
                        for ((o, b), x) in row.iter_mut().zip(&t[3]).zip(x) {
                            *o += b + x;
                        }
                    }
                }
            }
        }
    }

    /// Gradients of every layer given `acts.delta`, the loss's gradient
    /// with respect to the last layer's output (consumed), and `extra`,
    /// a further gradient with respect to the trunk's last features (the
    /// last layer's input: an auxiliary head's).
    pub(super) fn backward(
        &self,
        x: &[f32],
        n: usize,
        acts: &mut Activations,
        grads: &mut [Vec<f32>],
        extra: Option<&[f32]>,
    ) {
        let last = self.layers.len().saturating_sub(1);
        let Activations {
            outputs,
            normalized,
            inv_std,
            hidden,
            pre,
            gru,
            attention,
            d_hidden,
            delta,
            delta_prev,
        } = acts;
        for (l, layer) in self.layers.iter().enumerate().rev() {
            let t = self.tensors(l);
            let g = &mut grads[self.start[l]..self.start[l] + layer.tensors()];
            let input = if l == 0 { x } else { &outputs[l - 1] };
            // The gradient for the layer's input, where one is needed.
            let below = (l > 0).then_some(&mut *delta_prev);
            match *layer {
                Layer::Dense {
                    fan_in,
                    fan_out,
                    activation,
                } => {
                    activation_backward(delta, &outputs[l], &pre[l], activation);
                    dense_backward([fan_in, fan_out, n], input, &t[0], delta, g, below);
                }
                // The first layer: nothing below it takes a gradient.
                Layer::Gru(shape) => gru::backward(shape, t, n, gru, delta, g),
                Layer::Attention(shape) => attention::backward(&shape, t, n, attention, delta, g),
                Layer::Norm { .. } => {
                    let (dgamma, dbeta) = g.split_at_mut(1);
                    layer_norm_backward(
                        &normalized[l],
                        &inv_std[l],
                        &t[0],
                        delta,
                        &mut dgamma[0],
                        &mut dbeta[0],
                        below,
                    )
                }
                Layer::Residual { width, activation } => {
                    // Through the second linear layer into the hidden one,
                    // then the first; the skip adds `delta` itself.
                    let (g1, g2) = g.split_at_mut(2);
                    let h = &hidden[l];
                    dense_backward([width, width, n], h, &t[2], delta, g2, Some(&mut *d_hidden));
                    activation_backward(d_hidden, h, &pre[l], activation);
                    dense_backward([width, width, n], input, &t[0], d_hidden, g1, below);
                    if l > 0 {
                        for (d, skip) in delta_prev.iter_mut().zip(delta.iter()) {
                            *d += skip;
                        }
                    }
                }
            }
            if let (true, Some(e)) = (l == last && l > 0, extra) {
                for (d, x) in delta_prev.iter_mut().zip(e) {
                    *d += x;
                }
            }
            if l > 0 {
                std::mem::swap(delta, delta_prev);
            }
        }
    }

    /// Writes the tensors into the burn layers they came from. `map` keeps
    /// each parameter's id.
    pub(super) fn write_into(&self, trunk: &mut Trunk, head: &mut Linear) {
        let mut l = 0;
        for block in trunk.blocks_mut() {
            let t = self.tensors(l);
            match block {
                Block::Dense(d) => write_linear(d.linear_mut(), t),
                Block::Norm(norm) => {
                    write_vector(&mut norm.gamma, &t[0]);
                    if let Some(beta) = &mut norm.beta {
                        write_vector(beta, &t[1]);
                    }
                }
                Block::Residual(r) => {
                    write_linear(r.first_mut(), &t[..2]);
                    write_linear(r.second_mut(), &t[2..]);
                }
                Block::Gru(g) => {
                    let gru = g.gru_mut();
                    let gates = [&mut gru.update_gate, &mut gru.reset_gate, &mut gru.new_gate];
                    for (gate, t) in gates.into_iter().zip(t.chunks(4)) {
                        write_linear(&mut gate.input_transform, &t[..2]);
                        write_linear(&mut gate.hidden_transform, &t[2..]);
                    }
                }
                Block::Attention(a) => {
                    let (embed, mha) = a.parts_mut();
                    write_linear(embed, &t[..2]);
                    let layers = [
                        &mut mha.query,
                        &mut mha.key,
                        &mut mha.value,
                        &mut mha.output,
                    ];
                    for (linear, t) in layers.into_iter().zip(t[2..].chunks(2)) {
                        write_linear(linear, t);
                    }
                }
            }
            l += 1;
        }
        write_linear(head, self.tensors(l));
    }
}

/// A linear layer's weights and bias, or `None` without a bias.
fn linear_tensors(linear: &Linear) -> Option<Vec<Vec<f32>>> {
    Some(vec![
        floats(linear.weight.val()),
        floats1(linear.bias.as_ref()?.val()),
    ])
}

/// A dense layer's gradients from `delta` (for its pre-activation output,
/// `n × fan_out`): the weights' and the bias's into `g`, and with `below`
/// its input's.
fn dense_backward(
    [fan_in, fan_out, n]: [usize; 3],
    input: &[f32],
    weights: &[f32],
    delta: &[f32],
    g: &mut [Vec<f32>],
    below: Option<&mut Vec<f32>>,
) {
    gemm(
        [fan_in, n, fan_out],
        (input, true),
        (delta, false),
        &mut g[0],
    );
    let db = &mut g[1];
    db.fill(0.0);
    for row in delta.chunks(fan_out) {
        for (g, d) in db.iter_mut().zip(row) {
            *g += d;
        }
    }
    if let Some(below) = below {
        below.resize(n * fan_in, 0.0);
        gemm([n, fan_out, fan_in], (delta, false), (weights, true), below);
    }
}

/// Writes `params[0]` (weights) and `params[1]` (bias) into `linear`.
fn write_linear(linear: &mut Linear, params: &[Vec<f32>]) {
    let device = linear.weight.val().device();
    let dims = linear.weight.val().dims();
    let w = params[0].clone();
    linear.weight = linear
        .weight
        .clone()
        .map(|_| Tensor::from_data(TensorData::new(w, dims), &device));
    if let Some(bias) = &mut linear.bias {
        write_vector(bias, &params[1]);
    }
}

fn write_vector(param: &mut Param<Tensor<1>>, values: &[f32]) {
    let device = param.val().device();
    let v = values.to_vec();
    let len = v.len();
    *param = param
        .clone()
        .map(|_| Tensor::from_data(TensorData::new(v, [len]), &device));
}

/// `delta *= activation'(·)`, from the activation's output `h` (or, for
/// GELU, its input `z`).
fn activation_backward(delta: &mut [f32], h: &[f32], z: &[f32], activation: Activation) {
    let pairs = delta.iter_mut().zip(h);
    match activation {
        Activation::Gelu => delta
            .iter_mut()
            .zip(z)
            .for_each(|(d, &z)| *d *= gelu_slope(z)),
        Activation::Tanh => pairs.for_each(|(d, &h)| *d *= 1.0 - h * h),
        Activation::Relu => pairs.for_each(|(d, &h)| {
            if h <= 0.0 {
                *d = 0.0
            }
        }),
        Activation::Sigmoid => pairs.for_each(|(d, &h)| *d *= h * (1.0 - h)),
        Activation::Identity => {}
    }
}

/// `out = activation(out + bias)`, keeping a GELU's input in `pre`.
fn activate(out: &mut [f32], bias: &[f32], activation: Activation, pre: &mut Vec<f32>) {
    if activation != Activation::Gelu {
        return bias_and_activation(out, bias, activation);
    }
    bias_and_activation(out, bias, Activation::Identity);
    pre.clear();
    pre.extend_from_slice(out);
    out.iter_mut().for_each(|v| *v = gelu(*v));
}

/// GELU as burn computes it: `x·(1 + erf(x/√2))/2`, erf in f64.
fn gelu(x: f32) -> f32 {
    let e = libm::erf(f64::from(x / std::f32::consts::SQRT_2)) as f32;
    x * (e + 1.0) / 2.0
}

/// GELU's slope as burn's backward pass computes it: the derivative of
/// its tanh approximation, `½·tanh(u) + (0.0535·x³ + 0.3989·x)·(1 −
/// tanh²(u)) + ½` with `u = 0.0357·x³ + 0.7979·x` (burn's constants).
fn gelu_slope(x: f32) -> f32 {
    let x3 = x * x * x;
    let inner1 = x3 * 0.035_677_4 + x * 0.797_885;
    let inner2 = x3 * 0.053_516_1 + x * 0.398_942;
    let t = tanh(inner1);
    0.5 * t + (inner2 * (1.0 - t * t) + 0.5)
}

/// A layer norm over the rows of `input` (each `gamma.len()` wide) into
/// `out`, keeping each row's normalised values and 1 / √(var + ε).
fn layer_norm_forward(
    input: &[f32],
    gamma: &[f32],
    beta: &[f32],
    out: &mut [f32],
    normalized: &mut Vec<f32>,
    inv_std: &mut Vec<f32>,
) {
    let width = gamma.len();
    normalized.resize(input.len(), 0.0);
    inv_std.resize(input.len() / width, 0.0);
    let rows = input
        .chunks_exact(width)
        .zip(normalized.chunks_exact_mut(width))
        .zip(out.chunks_exact_mut(width));
    for (((x, xhat), y), inv) in rows.zip(inv_std.iter_mut()) {
        let mean = x.iter().sum::<f32>() / width as f32;
        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / width as f32;
        let denom = (var + LAYER_NORM_EPSILON as f32).sqrt();
        *inv = 1.0 / denom;
        for c in 0..width {
            xhat[c] = (x[c] - mean) / denom;
            y[c] = xhat[c] * gamma[c] + beta[c];
        }
    }
}

/// The layer norm's gradients from `dy`, the loss's gradient for its
/// output: γ's and β's, and with `dx` its input's,
/// `(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)) / √(var + ε)` per row, where
/// `dx̂ = dy·γ`.
fn layer_norm_backward(
    normalized: &[f32],
    inv_std: &[f32],
    gamma: &[f32],
    dy: &[f32],
    dgamma: &mut [f32],
    dbeta: &mut [f32],
    dx: Option<&mut Vec<f32>>,
) {
    let width = gamma.len();
    dgamma.fill(0.0);
    dbeta.fill(0.0);
    for (xhat, d) in normalized.chunks_exact(width).zip(dy.chunks_exact(width)) {
        for c in 0..width {
            dgamma[c] += d[c] * xhat[c];
            dbeta[c] += d[c];
        }
    }
    let Some(dx) = dx else { return };
    dx.resize(dy.len(), 0.0);
    let w = width as f32;
    let rows = normalized
        .chunks_exact(width)
        .zip(dy.chunks_exact(width))
        .zip(dx.chunks_exact_mut(width));
    for (((xhat, d), out), inv) in rows.zip(inv_std) {
        let (mut sum, mut dot) = (0f32, 0f32);
        for c in 0..width {
            let g = d[c] * gamma[c];
            sum += g;
            dot += g * xhat[c];
        }
        let (mean, mean_dot) = (sum / w, dot / w);
        for c in 0..width {
            out[c] = inv * (d[c] * gamma[c] - mean - xhat[c] * mean_dot);
        }
    }
}

/// `out[r][c] = activation(out[r][c] + bias[c])`, compiled for AVX2 when
/// the CPU has it: the activation is a chain of dependent multiplies, so
/// wider vectors are most of its speed.
fn bias_and_activation(out: &mut [f32], bias: &[f32], activation: Activation) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has the feature the function is compiled for.
        return unsafe { bias_and_activation_avx2(out, bias, activation) };
    }
    bias_and_activation_portable(out, bias, activation)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn bias_and_activation_avx2(out: &mut [f32], bias: &[f32], activation: Activation) {
    bias_and_activation_portable(out, bias, activation)
}

#[inline(always)]
fn bias_and_activation_portable(out: &mut [f32], bias: &[f32], activation: Activation) {
    // One loop per activation, so that each vectorises.
    match activation {
        Activation::Tanh => add_bias_then(out, bias, tanh),
        Activation::Relu => add_bias_then(out, bias, |z| z.max(0.0)),
        Activation::Sigmoid => add_bias_then(out, bias, |z| 1.0 / (1.0 + (-z).exp())),
        // GELU's bias goes first, then `activate` keeps its input.
        Activation::Identity | Activation::Gelu => add_bias_then(out, bias, |z| z),
    }
}

#[inline(always)]
fn add_bias_then(out: &mut [f32], bias: &[f32], activation: impl Fn(f32) -> f32) {
    for row in out.chunks_exact_mut(bias.len()) {
        for (v, b) in row.iter_mut().zip(bias) {
            *v = activation(*v + b);
        }
    }
}
