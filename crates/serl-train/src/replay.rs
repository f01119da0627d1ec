//! The replay buffer of the off-policy learners (DDQN and SAC): a ring of
//! transitions, each with its source (static or dynamic) so that a
//! minibatch's losses can be weighted as the hybrid loss says.

use rand::rngs::SmallRng;
use rand::Rng;

use crate::hybrid::LossWeights;
use serl_env::Source;

/// A ring buffer of transitions.
#[derive(Debug, Clone)]
pub struct Replay {
    pub(crate) width: usize,
    capacity: usize,
    next: usize,
    len: usize,
    obs: Vec<f32>,
    next_obs: Vec<f32>,
    action: Vec<f32>,
    reward: Vec<f32>,
    done: Vec<bool>,
    source: Vec<Source>,
}

impl Replay {
    pub fn new(capacity: usize, width: usize) -> Self {
        let capacity = capacity.max(1);
        Replay {
            width,
            capacity,
            next: 0,
            len: 0,
            obs: vec![0.0; capacity * width],
            next_obs: vec![0.0; capacity * width],
            action: vec![0.0; capacity],
            reward: vec![0.0; capacity],
            done: vec![false; capacity],
            source: vec![Source::Static; capacity],
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn push(
        &mut self,
        obs: &[f32],
        action: f32,
        reward: f32,
        next_obs: &[f32],
        done: bool,
        source: Source,
    ) {
        let i = self.next;
        let w = self.width;
        self.obs[i * w..(i + 1) * w].copy_from_slice(obs);
        self.next_obs[i * w..(i + 1) * w].copy_from_slice(next_obs);
        self.action[i] = action;
        self.reward[i] = reward;
        self.done[i] = done;
        self.source[i] = source;
        self.next = (i + 1) % self.capacity;
        self.len = (self.len + 1).min(self.capacity);
    }
}

/// A minibatch drawn from a [`Replay`], gathered into rows: what both
/// backends' gradient steps read.
pub(crate) struct ReplaySample {
    /// Rows drawn.
    pub(crate) rows: usize,
    pub(crate) obs: Vec<f32>,
    pub(crate) next_obs: Vec<f32>,
    pub(crate) action: Vec<f32>,
    pub(crate) reward: Vec<f32>,
    pub(crate) not_done: Vec<f32>,
    /// 1 for a static row, 0 for a dynamic one, and the reverse.
    pub(crate) is_static: Vec<f32>,
    pub(crate) is_dynamic: Vec<f32>,
}

impl Replay {
    /// `min(batch_size, len)` rows (at least one) drawn uniformly with
    /// replacement.
    pub(crate) fn sample(&self, batch_size: usize, rng: &mut SmallRng) -> ReplaySample {
        let b = batch_size.min(self.len).max(1);
        let w = self.width;
        let picks: Vec<usize> = (0..b).map(|_| rng.random_range(0..self.len)).collect();
        let mut s = ReplaySample {
            rows: b,
            obs: Vec::with_capacity(b * w),
            next_obs: Vec::with_capacity(b * w),
            action: Vec::with_capacity(b),
            reward: Vec::with_capacity(b),
            not_done: Vec::with_capacity(b),
            is_static: Vec::with_capacity(b),
            is_dynamic: Vec::with_capacity(b),
        };
        for &i in &picks {
            s.obs.extend_from_slice(&self.obs[i * w..(i + 1) * w]);
            s.next_obs
                .extend_from_slice(&self.next_obs[i * w..(i + 1) * w]);
            s.action.push(self.action[i]);
            s.reward.push(self.reward[i]);
            s.not_done.push(if self.done[i] { 0.0 } else { 1.0 });
            let st = self.source[i] == Source::Static;
            s.is_static.push(if st { 1.0 } else { 0.0 });
            s.is_dynamic.push(if st { 0.0 } else { 1.0 });
        }
        s
    }
}

impl ReplaySample {
    /// Targets r + γ·(1 − done)·V(s') from the next observations' values
    /// `v_next` (SAC's, from its target V̄).
    pub(crate) fn targets_from_values(&self, v_next: &[f32], gamma: f64) -> Vec<f32> {
        (0..self.rows)
            .map(|i| self.reward[i] + gamma as f32 * self.not_done[i] * v_next[i])
            .collect()
    }

    /// The static and dynamic rows' counts, and the weights of their mean
    /// losses: α and β with both present, else all on the one present.
    pub(crate) fn source_weights(&self, weights: LossWeights) -> (f32, f32, f64, f64) {
        let n_s = self.is_static.iter().sum::<f32>();
        let n_d = self.is_dynamic.iter().sum::<f32>();
        let (wa, wb) = match (n_s > 0.0, n_d > 0.0) {
            (true, true) => (weights.alpha, weights.beta),
            (true, false) => (1.0, 0.0),
            (false, _) => (0.0, 1.0),
        };
        (n_s, n_d, wa, wb)
    }
}
