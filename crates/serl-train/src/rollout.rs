//! Vectorised experience collection: N environments stepped together, in
//! parallel across cores, with one batched network call per step.

use rand::rngs::SmallRng;
use rayon::prelude::*;

use crate::normalize::RunningNorm;
use crate::policy::{History, Policy, Sampled};
use crate::task::{env_rng, Source, TrainEnv};

/// What a rollout asks of a policy: one batched decision per step.
pub trait Actor {
    /// Columns of one observation window.
    fn width(&self) -> usize;

    /// Decisions for `n` rows of normalised observation windows; see
    /// [`Policy::act`].
    fn act(
        &self,
        rows: &[f32],
        n: usize,
        explore: bool,
        epsilon: f64,
        rng: &mut SmallRng,
    ) -> Vec<Sampled>;
}

impl Actor for Policy {
    fn width(&self) -> usize {
        Policy::width(self)
    }

    fn act(
        &self,
        rows: &[f32],
        n: usize,
        explore: bool,
        epsilon: f64,
        rng: &mut SmallRng,
    ) -> Vec<Sampled> {
        Policy::act(self, rows, n, explore, epsilon, rng)
    }
}

/// A finished episode.
#[derive(Debug, Clone, Copy)]
pub struct EpisodeStat {
    /// The environment it played in.
    pub source: Source,
    /// Its summed reward.
    pub reward: f64,
    /// Its price advantage, bps.
    pub pa: f64,
}

/// N environments, each with its own random stream and observation window.
pub struct VecEnv<'a> {
    envs: Vec<Box<dyn TrainEnv + 'a>>,
    rngs: Vec<SmallRng>,
    histories: Vec<History>,
    obs_dim: usize,
    /// The current normalised observation windows, `N × window·obs_dim`.
    current: Vec<f32>,
    ep_reward: Vec<f64>,
    /// Episodes finished since the last [`VecEnv::take_finished`].
    finished: Vec<EpisodeStat>,
    /// Whether any environment simulates a market (stepped in parallel).
    any_dynamic: bool,
}

impl<'a> VecEnv<'a> {
    /// Starts an episode in every environment. `seed` and the env's index
    /// choose its random stream.
    pub fn new(
        mut envs: Vec<Box<dyn TrainEnv + 'a>>,
        seed: u64,
        window: usize,
        norm: &mut RunningNorm,
        learn: bool,
    ) -> Self {
        let obs_dim = envs.first().map_or(0, |e| e.obs_dim());
        let mut rngs: Vec<SmallRng> = (0..envs.len()).map(|i| env_rng(seed, i)).collect();
        envs.par_iter_mut()
            .zip(rngs.par_iter_mut())
            .for_each(|(e, r)| e.reset(r));
        let n = envs.len();
        let mut v = VecEnv {
            envs,
            rngs,
            histories: (0..n).map(|_| History::new(window, obs_dim)).collect(),
            obs_dim,
            current: Vec::new(),
            ep_reward: vec![0.0; n],
            finished: Vec::new(),
            any_dynamic: false,
        };
        v.any_dynamic = v.envs.iter().any(|e| e.source() != Source::Static);
        v.refresh(norm, learn);
        v
    }

    /// Number of environments.
    pub fn len(&self) -> usize {
        self.envs.len()
    }

    /// Whether there are no environments.
    pub fn is_empty(&self) -> bool {
        self.envs.is_empty()
    }

    /// Columns of one observation (the first environment's).
    pub fn obs_dim(&self) -> usize {
        self.obs_dim
    }

    /// Each environment's source, in order.
    pub fn sources(&self) -> Vec<Source> {
        self.envs.iter().map(|e| e.source()).collect()
    }

    /// The current observation windows.
    pub fn current(&self) -> &[f32] {
        &self.current
    }

    fn refresh(&mut self, norm: &mut RunningNorm, learn: bool) {
        let d = self.obs_dim;
        let mut raw = vec![0f32; self.envs.len() * d];
        for (e, row) in self.envs.iter().zip(raw.chunks_mut(d)) {
            e.observe(row);
        }
        if learn {
            norm.update(&raw);
        }
        norm.apply(&mut raw);
        self.current.clear();
        for (h, row) in self.histories.iter_mut().zip(raw.chunks(d)) {
            h.push(row);
            h.write(&mut self.current);
        }
    }

    /// Steps every environment with its action; finished episodes restart.
    /// Returns the rewards and the done flags.
    pub fn step(
        &mut self,
        actions: &[f64],
        norm: &mut RunningNorm,
        learn: bool,
    ) -> (Vec<f32>, Vec<bool>) {
        let placed: Vec<(f64, u8)> = actions.iter().map(|&a| (a, 0)).collect();
        self.step_placed(&placed, norm, learn)
    }

    /// [`VecEnv::step`] with each action's placement number
    /// ([`TrainEnv::step_placed`]).
    pub fn step_placed(
        &mut self,
        actions: &[(f64, u8)],
        norm: &mut RunningNorm,
        learn: bool,
    ) -> (Vec<f32>, Vec<bool>) {
        type One<'e, 'a> = (
            (&'e mut Box<dyn TrainEnv + 'a>, &'e mut SmallRng),
            &'e (f64, u8),
        );
        let step_one = |((e, rng), &(a, place)): One<'_, 'a>| {
            let (r, done) = e.step_placed(a, place);
            let stat = done.then(|| {
                let s = EpisodeStat {
                    source: e.source(),
                    reward: 0.0,
                    pa: e.episode_pa(),
                };
                e.reset(rng);
                s
            });
            (r, done, stat)
        };
        // A replayed step takes about a microsecond, less than handing it
        // to another thread; a simulated market's step is worth it.
        let results: Vec<(f64, bool, Option<EpisodeStat>)> = if self.any_dynamic {
            self.envs
                .par_iter_mut()
                .zip(self.rngs.par_iter_mut())
                .zip(actions.par_iter())
                .map(step_one)
                .collect()
        } else {
            self.envs
                .iter_mut()
                .zip(self.rngs.iter_mut())
                .zip(actions.iter())
                .map(step_one)
                .collect()
        };
        let mut rewards = Vec::with_capacity(results.len());
        let mut dones = Vec::with_capacity(results.len());
        for (i, (r, done, stat)) in results.into_iter().enumerate() {
            self.ep_reward[i] += r;
            if let Some(mut s) = stat {
                s.reward = self.ep_reward[i];
                self.ep_reward[i] = 0.0;
                self.histories[i].clear();
                self.finished.push(s);
            }
            rewards.push(r as f32);
            dones.push(done);
        }
        self.refresh(norm, learn);
        (rewards, dones)
    }

    /// The episodes finished since the last call.
    pub fn take_finished(&mut self) -> Vec<EpisodeStat> {
        std::mem::take(&mut self.finished)
    }
}

/// `steps` decisions of every environment, time-major (`[t][env]`).
#[derive(Debug, Clone, Default)]
pub struct Rollout {
    /// Environments.
    pub n_envs: usize,
    /// Decisions per environment.
    pub steps: usize,
    /// Columns of one observation window (a network input row).
    pub width: usize,
    /// The normalised observation windows the policy saw, `width` columns
    /// per decision.
    pub obs: Vec<f32>,
    /// The sampled actions as the learner stores them ([`Sampled::raw`]).
    pub raw: Vec<f32>,
    /// Their log-probabilities when sampled.
    pub log_prob: Vec<f32>,
    /// The critic's values of the observations.
    pub value: Vec<f32>,
    /// The rewards received.
    pub reward: Vec<f32>,
    /// Whether the decision ended its episode.
    pub done: Vec<bool>,
    /// Per environment.
    pub source: Vec<Source>,
    /// Value of the observation after the last step, per environment.
    pub last_value: Vec<f32>,
}

/// Collects `steps` decisions per environment with `policy` exploring.
pub fn collect(
    venv: &mut VecEnv,
    policy: &dyn Actor,
    norm: &mut RunningNorm,
    steps: usize,
    rng: &mut SmallRng,
) -> Rollout {
    let n = venv.len();
    let width = policy.width();
    let mut r = Rollout {
        n_envs: n,
        steps,
        width,
        obs: Vec::with_capacity(steps * n * width),
        raw: Vec::with_capacity(steps * n),
        log_prob: Vec::with_capacity(steps * n),
        value: Vec::with_capacity(steps * n),
        reward: Vec::with_capacity(steps * n),
        done: Vec::with_capacity(steps * n),
        source: venv.sources(),
        last_value: Vec::new(),
    };
    for _ in 0..steps {
        let obs = venv.current().to_vec();
        let acts = policy.act(&obs, n, true, 0.0, rng);
        let actions: Vec<(f64, u8)> = acts.iter().map(|a| (a.env_action, a.placement)).collect();
        let (rew, done) = venv.step_placed(&actions, norm, true);
        r.obs.extend_from_slice(&obs);
        for a in &acts {
            r.raw.push(a.raw);
            r.log_prob.push(a.log_prob);
            r.value.push(a.value);
        }
        r.reward.extend_from_slice(&rew);
        r.done.extend_from_slice(&done);
    }
    let last = policy.act(venv.current(), n, false, 0.0, rng);
    r.last_value = last.iter().map(|a| a.value).collect();
    r
}

/// Generalised advantage estimates and returns, time-major like the
/// rollout.
pub fn gae(r: &Rollout, gamma: f32, lambda: f32) -> (Vec<f32>, Vec<f32>) {
    let (n, t) = (r.n_envs, r.steps);
    let mut adv = vec![0f32; n * t];
    for e in 0..n {
        let mut next_value = r.last_value[e];
        let mut running = 0f32;
        for s in (0..t).rev() {
            let i = s * n + e;
            let not_done = if r.done[i] { 0.0 } else { 1.0 };
            let delta = r.reward[i] + gamma * next_value * not_done - r.value[i];
            running = delta + gamma * lambda * not_done * running;
            adv[i] = running;
            next_value = r.value[i];
        }
    }
    let ret = adv.iter().zip(&r.value).map(|(a, v)| a + v).collect();
    (adv, ret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gae_with_lambda_one_is_the_discounted_return_minus_the_value() {
        let r = Rollout {
            n_envs: 1,
            steps: 3,
            width: 1,
            reward: vec![1.0, 2.0, 3.0],
            value: vec![0.5, 0.5, 0.5],
            done: vec![false, false, true],
            last_value: vec![100.0],
            ..Default::default()
        };
        let (adv, ret) = gae(&r, 0.9, 1.0);
        let g0 = 1.0 + 0.9 * 2.0 + 0.81 * 3.0;
        assert!((ret[0] - g0).abs() < 1e-5, "{ret:?}");
        assert!(
            (adv[2] - 2.5).abs() < 1e-6,
            "the episode ended: no bootstrap"
        );
    }
}
