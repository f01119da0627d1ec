//! A trained policy acting greedily, as validation and backtests play it:
//! one observation at a time, or a team's members' together.
//!
//! Burn spends tens of microseconds of bookkeeping on each call of a small
//! network, and a backtest calls it once per decision: a validation of
//! 4,000 orders of 13 decisions was most of a final retraining's time.
//! The fused network's forward pass is the one the policy trained with
//! (its rollouts act through it), so backtests now use it too. It skips
//! the critic, which a greedy decision does not read.

use rand::rngs::SmallRng;

use super::mlp::{Activations, Mlp};
use crate::policy::{epsilon_greedy, sample_actor_critic, Model, Policy, PolicyMeta, Sampled};
use crate::tensors::floats1;

/// The network a greedy decision needs: an actor-critic's actor or a
/// Q-network.
#[derive(Debug, Clone)]
pub(crate) struct GreedyNet {
    net: Mlp,
    /// The actor's log standard deviation (a greedy decision takes the
    /// mean, so it only fills [`Sampled::log_prob`]); `None` for a
    /// Q-network.
    log_std: Option<f64>,
}

impl GreedyNet {
    /// The greedy twin of `model`, or `None` when its network has a block
    /// the fused passes do not implement (burn then acts).
    pub(crate) fn new(model: &Model) -> Option<Self> {
        match model {
            Model::Ppo(m) => Some(GreedyNet {
                net: Mlp::from_burn(&m.actor, &m.policy_head)?,
                log_std: Some(floats1(m.log_std.val()).first().copied().unwrap_or(0.0) as f64),
            }),
            Model::Ddqn(q) => Some(GreedyNet {
                net: Mlp::from_burn(&q.trunk, &q.head)?,
                log_std: None,
            }),
        }
    }

    /// The greedy decisions for `n` rows of normalised observation windows
    /// (their values are 0 for PPO: the critic is not run).
    pub(crate) fn decide(
        &self,
        meta: &PolicyMeta,
        rows: &[f32],
        n: usize,
        acts: &mut GreedyScratch,
        rng: &mut SmallRng,
    ) -> Vec<Sampled> {
        self.net.forward(rows, n, &mut acts.0);
        let out = acts.0.outputs.last().map_or(&[][..], Vec::as_slice);
        match self.log_std {
            Some(log_std) => {
                acts.1.resize(n, 0.0);
                sample_actor_critic(meta, out, &acts.1, log_std, n, false, rng)
            }
            None => epsilon_greedy(meta, out, n, false, 0.0, rng),
        }
    }
}

/// The buffers of [`GreedyNet::decide`], kept between decisions so that
/// a backtest allocates them once (and the zero values PPO's rows get).
#[derive(Debug, Clone, Default)]
pub(crate) struct GreedyScratch(Activations, Vec<f32>);

/// How a backtest strategy asks a trained policy for its greedy
/// decisions: through the fused twin where the network has one (with its
/// buffers), else through burn's network.
#[derive(Debug, Clone)]
pub(crate) struct Greedy(Option<(GreedyNet, GreedyScratch)>);

impl Greedy {
    /// The way `policy` acts greedily.
    pub(crate) fn new(policy: &Policy) -> Self {
        Greedy(GreedyNet::new(&policy.model).map(|net| (net, GreedyScratch::default())))
    }

    /// `policy`'s greedy decisions for `n` rows of normalised observation
    /// windows.
    pub(crate) fn act(
        &mut self,
        policy: &Policy,
        rows: &[f32],
        n: usize,
        rng: &mut SmallRng,
    ) -> Vec<Sampled> {
        match &mut self.0 {
            Some((net, scratch)) => net.decide(&policy.meta, rows, n, scratch, rng),
            None => policy.act(rows, n, false, 0.0, rng),
        }
    }
}
