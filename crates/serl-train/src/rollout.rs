//! Vectorised experience collection: N environments stepped together, in
//! parallel across cores, with one batched network call per step. An
//! environment holding a team of learning agents gives one row per agent
//! (each with its own observation, action and reward), so everything
//! downstream (GAE, minibatches, both learners) works on rows.

use std::time::Instant;

use rand::rngs::SmallRng;
use rayon::prelude::*;

use crate::normalize::RunningNorm;
use crate::policy::{History, Policy, Sampled};
use crate::task::{env_rng, TrainEnv};
use serl_env::Source;

/// What a rollout asks of a policy: one batched decision per step.
pub trait Actor {
    /// Columns of one observation window.
    fn width(&self) -> usize;

    /// Decisions for `n` rows of normalised observation windows, with a
    /// centralised critic's input rows where the policy has one; see
    /// [`Policy::act_with_critic`].
    fn act(
        &self,
        rows: &[f32],
        critic: Option<&[f32]>,
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
        critic: Option<&[f32]>,
        n: usize,
        explore: bool,
        epsilon: f64,
        rng: &mut SmallRng,
    ) -> Vec<Sampled> {
        Policy::act_with_critic(self, rows, critic, n, explore, epsilon, rng)
    }
}

/// A finished episode.
#[derive(Debug, Clone, Copy)]
pub struct EpisodeStat {
    /// The environment it played in.
    pub source: Source,
    /// Its summed reward (a team's: the mean over its members).
    pub reward: f64,
    /// Its price advantage, bps.
    pub pa: f64,
}

/// One environment's actions (one per agent) and where its rewards go.
type EnvSlice<'r> = (&'r [(f64, u8)], &'r mut [f64]);

/// N environments, each with its own random stream, and one observation
/// window per row (an environment has a row per agent).
pub struct VecEnv<'a> {
    envs: Vec<Box<dyn TrainEnv + 'a>>,
    rngs: Vec<SmallRng>,
    /// Each environment's first row.
    first_row: Vec<usize>,
    histories: Vec<History>,
    obs_dim: usize,
    /// The current normalised observation windows, `rows × window·obs_dim`.
    current: Vec<f32>,
    /// Each row's newest normalised observation, `rows × obs_dim`.
    latest: Vec<f32>,
    /// The centralised critic's rows (`rows × critic_width`), when it has
    /// one: a row's window, then every member's newest observation.
    critic: Option<Vec<f32>>,
    ep_reward: Vec<f64>,
    /// Episodes finished since the last [`VecEnv::take_finished`].
    finished: Vec<EpisodeStat>,
    /// Whether any environment simulates a market (stepped in parallel).
    any_dynamic: bool,
    /// Where the stepping time went, for the run's profile.
    timing: StepTiming,
}

/// Seconds spent stepping a [`VecEnv`]: the wall time of its steps
/// (observations and resets included), and the time each kind of
/// environment took on its own thread. Where the static and the dynamic
/// environments run side by side, the two add up to more than the wall.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepTiming {
    /// Wall seconds in [`VecEnv::step`] and [`VecEnv::step_placed`].
    pub wall: f64,
    /// Seconds the static replays took (steps and resets).
    pub static_envs: f64,
    /// Seconds the dynamic markets took (steps and resets).
    pub dynamic_envs: f64,
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
        let mut first_row = Vec::with_capacity(envs.len());
        let mut rows = 0;
        for e in &envs {
            first_row.push(rows);
            rows += e.agents();
        }
        let mut v = VecEnv {
            rngs,
            first_row,
            histories: (0..rows).map(|_| History::new(window, obs_dim)).collect(),
            obs_dim,
            current: Vec::new(),
            latest: Vec::new(),
            critic: None,
            ep_reward: vec![0.0; rows],
            finished: Vec::new(),
            any_dynamic: envs.iter().any(|e| e.source() != Source::Static),
            envs,
            timing: StepTiming::default(),
        };
        v.refresh(norm, learn);
        v
    }

    /// Gives the rows a centralised critic's input (MAPPO): each row's
    /// window followed by the newest observation of every agent of its
    /// environment, in agent order. Every environment must hold the same
    /// number of agents.
    pub fn with_joint_critic(mut self) -> Self {
        self.critic = Some(Vec::new());
        self.build_critic();
        self
    }

    /// Number of rows: one per agent of every environment.
    pub fn len(&self) -> usize {
        self.histories.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.histories.is_empty()
    }

    /// Columns of one observation (the first environment's).
    pub fn obs_dim(&self) -> usize {
        self.obs_dim
    }

    /// Each row's source, in order.
    pub fn sources(&self) -> Vec<Source> {
        self.envs
            .iter()
            .flat_map(|e| std::iter::repeat_n(e.source(), e.agents()))
            .collect()
    }

    /// The current observation windows, one row per agent.
    pub fn current(&self) -> &[f32] {
        &self.current
    }

    /// Each row's [`TrainEnv::progress`] (a team's rows: none).
    pub fn progress(&self) -> Vec<Option<(f64, usize, usize)>> {
        self.envs
            .iter()
            .flat_map(|e| {
                let p = if e.agents() == 1 { e.progress() } else { None };
                std::iter::repeat_n(p, e.agents())
            })
            .collect()
    }

    /// The centralised critic's current rows, when it has them.
    pub fn critic_rows(&self) -> Option<&[f32]> {
        self.critic.as_deref()
    }

    fn rows_of(&self, e: usize) -> std::ops::Range<usize> {
        let first = self.first_row[e];
        first..first + self.envs[e].agents()
    }

    fn refresh(&mut self, norm: &mut RunningNorm, learn: bool) {
        let d = self.obs_dim;
        let mut raw = vec![0f32; self.histories.len() * d];
        for (e, env) in self.envs.iter().enumerate() {
            let rows = &mut raw[self.first_row[e] * d..];
            for (k, row) in rows.chunks_mut(d).take(env.agents()).enumerate() {
                env.observe_agent(k, row);
            }
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
        self.latest = raw;
        if self.critic.is_some() {
            self.build_critic();
        }
    }

    fn build_critic(&mut self) {
        let (d, n) = (self.obs_dim, self.histories.len());
        let width = self.current.len() / n.max(1);
        let mut c = self.critic.take().unwrap_or_default();
        c.clear();
        for e in 0..self.envs.len() {
            let members = self.rows_of(e);
            let team = &self.latest[members.start * d..members.end * d];
            for r in members.clone() {
                c.extend_from_slice(&self.current[r * width..(r + 1) * width]);
                c.extend_from_slice(team);
            }
        }
        self.critic = Some(c);
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

    /// [`VecEnv::step`] with each row's placement number
    /// ([`TrainEnv::step_placed`]); one action per row.
    pub fn step_placed(
        &mut self,
        actions: &[(f64, u8)],
        norm: &mut RunningNorm,
        learn: bool,
    ) -> (Vec<f32>, Vec<bool>) {
        let started = Instant::now();
        let mut rewards = vec![0f64; actions.len()];
        let mut slices: Vec<EnvSlice> = Vec::with_capacity(self.envs.len());
        let (mut acts, mut rews) = (actions, &mut rewards[..]);
        for e in &self.envs {
            let (a, rest_a) = acts.split_at(e.agents());
            let (r, rest_r) = std::mem::take(&mut rews).split_at_mut(e.agents());
            slices.push((a, r));
            (acts, rews) = (rest_a, rest_r);
        }
        type One<'e, 'a> = (
            (&'e mut Box<dyn TrainEnv + 'a>, &'e mut SmallRng),
            (&'e [(f64, u8)], &'e mut [f64]),
        );
        let step_one = |((e, rng), (a, r)): One<'_, 'a>| {
            let t = Instant::now();
            let done = e.step_agents(a, r);
            let stat = done.then(|| {
                let s = EpisodeStat {
                    source: e.source(),
                    reward: 0.0,
                    pa: e.episode_pa(),
                };
                e.reset(rng);
                s
            });
            (done, stat, e.source(), t.elapsed().as_secs_f64())
        };
        // A replayed step takes about a microsecond, less than handing it
        // to another thread; a simulated market's step is worth it.
        let results: Vec<(bool, Option<EpisodeStat>, Source, f64)> = if self.any_dynamic {
            self.envs
                .par_iter_mut()
                .zip(self.rngs.par_iter_mut())
                .zip(slices.into_par_iter())
                .map(step_one)
                .collect()
        } else {
            self.envs
                .iter_mut()
                .zip(self.rngs.iter_mut())
                .zip(slices)
                .map(step_one)
                .collect()
        };
        let mut dones = Vec::with_capacity(actions.len());
        for (e, (done, stat, source, secs)) in results.into_iter().enumerate() {
            match source {
                Source::Static => self.timing.static_envs += secs,
                Source::Dynamic => self.timing.dynamic_envs += secs,
            }
            let rows = self.rows_of(e);
            for r in rows.clone() {
                self.ep_reward[r] += rewards[r];
                dones.push(done);
            }
            if let Some(mut s) = stat {
                let sum: f64 = rows.clone().map(|r| self.ep_reward[r]).sum();
                s.reward = sum / rows.len() as f64;
                for r in rows {
                    self.ep_reward[r] = 0.0;
                    self.histories[r].clear();
                }
                self.finished.push(s);
            }
        }
        self.refresh(norm, learn);
        self.timing.wall += started.elapsed().as_secs_f64();
        (rewards.into_iter().map(|r| r as f32).collect(), dones)
    }

    /// Where the stepping time has gone so far.
    pub fn timing(&self) -> StepTiming {
        self.timing
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
    /// A centralised critic's input rows (`critic_width` columns per
    /// decision), for MAPPO; empty when the critic reads `obs`.
    pub critic_obs: Vec<f32>,
    /// Columns of one critic row (0: the critic reads `obs`).
    pub critic_width: usize,
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
    let critic_width = venv.critic_rows().map_or(0, |c| c.len() / n.max(1));
    let mut r = Rollout {
        n_envs: n,
        steps,
        width,
        critic_width,
        critic_obs: Vec::with_capacity(steps * n * critic_width),
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
        let at = r.critic_obs.len();
        if let Some(c) = venv.critic_rows() {
            r.critic_obs.extend_from_slice(c);
        }
        let critic = (critic_width > 0).then(|| &r.critic_obs[at..]);
        let acts = policy.act(&obs, critic, n, true, 0.0, rng);
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
    let last = policy.act(venv.current(), venv.critic_rows(), n, false, 0.0, rng);
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

    /// Three agents whose observations are their index and the step.
    struct Trio {
        t: usize,
    }

    impl TrainEnv for Trio {
        fn obs_dim(&self) -> usize {
            2
        }
        fn source(&self) -> Source {
            Source::Static
        }
        fn reset(&mut self, _rng: &mut SmallRng) {
            self.t = 0;
        }
        fn observe(&self, out: &mut [f32]) {
            self.observe_agent(0, out)
        }
        fn observe_agent(&self, k: usize, out: &mut [f32]) {
            out[0] = k as f32;
            out[1] = self.t as f32;
        }
        fn agents(&self) -> usize {
            3
        }
        fn step(&mut self, _action: f64) -> (f64, bool) {
            unreachable!("a team steps all at once")
        }
        fn step_agents(&mut self, actions: &[(f64, u8)], rewards: &mut [f64]) -> bool {
            for (r, a) in rewards.iter_mut().zip(actions) {
                *r = a.0;
            }
            self.t += 1;
            self.t == 4
        }
        fn episode_pa(&self) -> f64 {
            1.0
        }
    }

    #[test]
    fn a_team_gives_a_row_per_member_and_the_critic_sees_them_all() {
        let envs: Vec<Box<dyn TrainEnv>> = vec![Box::new(Trio { t: 0 }), Box::new(Trio { t: 0 })];
        let mut norm = RunningNorm::new(2);
        let mut v = VecEnv::new(envs, 1, 2, &mut norm, false).with_joint_critic();
        assert_eq!(v.len(), 6, "two teams of three");
        let (rewards, dones) = v.step(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &mut norm, false);
        assert_eq!(
            rewards,
            vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
            "each row its own reward"
        );
        assert_eq!(dones, vec![false; 6]);
        // A row's window (2 observations) and every member's newest one.
        let window = v.current().len() / 6;
        assert_eq!(window, 4);
        let critic = v.critic_rows().unwrap().to_vec();
        let width = critic.len() / 6;
        assert_eq!(width, window + 3 * 2);
        for r in 0..6 {
            let row = &critic[r * width..(r + 1) * width];
            assert_eq!(&row[..window], &v.current()[r * window..(r + 1) * window]);
            let team = r / 3;
            for k in 0..3 {
                let newest = &v.current()[(team * 3 + k) * window + 2..(team * 3 + k + 1) * window];
                assert_eq!(
                    &row[window + 2 * k..window + 2 * k + 2],
                    newest,
                    "row {r}, member {k}"
                );
            }
        }
        for _ in 0..3 {
            v.step(&[1.0; 6], &mut norm, false);
        }
        let finished = v.take_finished();
        assert_eq!(finished.len(), 2, "both teams finished together");
        assert_eq!(
            finished[0].reward,
            3.0 + 1.0,
            "the members' mean summed reward"
        );
    }

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
