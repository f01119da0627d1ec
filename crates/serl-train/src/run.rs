//! The training loop, its config, and run directories.
//!
//! A run directory holds:
//!
//! | file | what |
//! |---|---|
//! | `config.json` | the [`TrainConfig`] the run was started with |
//! | `metrics.jsonl` | one [`UpdateRecord`] per update |
//! | `checkpoint/` | the latest model, optimiser and loop state, for resume |
//! | `best.json`, `best.bpk` | the policy with the best validation PA |
//! | `final.json`, `final.bpk` | the policy after the last update |
//! | `checkpoint.json` | which policy `serl backtest --strategy policy:DIR` plays |
//! | `report.md`, `report.html` | training curves |
//!
//! Resume reloads the latest checkpoint and continues with the next
//! update; the episodes in flight when the run stopped start over, so a
//! resumed run is statistically but not bitwise the same as an
//! uninterrupted one. DDQN's replay buffer is not saved and refills.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::module::Module;
use burn::tensor::Device;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use serl_design::{Activation, BlockSpec, FeatureDef, ImaginationModule, NetworkSpec};
use serl_env::MarketConfig;

use crate::ddqn::{self, DdqnConfig, Replay};
use crate::fused::FusedPpo;
use crate::hybrid::{HybridConfig, HybridMode, LossWeights};
use crate::net::Head;
use crate::normalize::RunningNorm;
use crate::policy::{Algo, Model, Pace, Policy, PolicyMeta, Squash};
use crate::ppo::{self, PpoConfig};
use crate::rollout::{collect, EpisodeStat, VecEnv};
use crate::task::{Source, TrainEnv};
use crate::TrainError;

/// Where tensors live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceChoice {
    /// NdArray on the CPU.
    #[default]
    Cpu,
    /// wgpu (Vulkan, Metal, DX12); needs the `wgpu` cargo feature.
    Wgpu,
}

impl DeviceChoice {
    pub fn device(self) -> Result<Device, TrainError> {
        match self {
            // The design card names burn-ndarray; it is deprecated upstream in
            // favour of flex, which a later release can switch to here.
            #[allow(deprecated)]
            DeviceChoice::Cpu => Ok(Device::ndarray()),
            #[cfg(feature = "wgpu")]
            DeviceChoice::Wgpu => Ok(Device::wgpu(burn::tensor::DeviceKind::DefaultDevice)),
            #[cfg(not(feature = "wgpu"))]
            DeviceChoice::Wgpu => Err(TrainError::Device("wgpu".into())),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    pub algo: Algo,
    pub seed: u64,
    /// Environment steps to train for, over all environments.
    pub total_steps: usize,
    /// Environments stepped together.
    pub n_envs: usize,
    pub device: DeviceChoice,
    pub network: NetworkSpec,
    pub ppo: PpoConfig,
    pub ddqn: DdqnConfig,
    pub hybrid: HybridConfig,
    /// Imagined days (the imagination module): dynamic environments that
    /// play a scenario, and replayed days reshaped by one.
    pub imagination: ImaginationModule,
    /// Validate every this many updates (and after the last).
    pub eval_every: usize,
    /// Save a checkpoint every this many updates (and after the last).
    pub checkpoint_every: usize,
    /// Designed state features (the state-space module), appended to the
    /// observation; the environments must already carry them
    /// ([`crate::features::WithFeatures`]).
    pub features: Vec<FeatureDef>,
    /// The multi-agent scenario: peers in every dynamic episode, and what
    /// the agents tell each other. None trains alone.
    pub team: Option<crate::team::TeamConfig>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            algo: Algo::Ppo,
            seed: 7,
            total_steps: 100_000,
            n_envs: 8,
            device: DeviceChoice::Cpu,
            network: NetworkSpec::default(),
            ppo: PpoConfig::default(),
            ddqn: DdqnConfig::default(),
            hybrid: HybridConfig::default(),
            imagination: ImaginationModule::none(),
            eval_every: 5,
            checkpoint_every: 1,
            features: Vec::new(),
            team: None,
        }
    }
}

fn bad(field: &str, message: impl Into<String>) -> TrainError {
    TrainError::Config {
        field: field.into(),
        message: message.into(),
    }
}

impl TrainConfig {
    pub fn validate(&self, obs_dim: usize) -> Result<(), TrainError> {
        self.network.validate(obs_dim)?;
        if self.n_envs == 0 {
            return Err(bad("n_envs", "must be at least 1"));
        }
        if self.total_steps == 0 {
            return Err(bad("total_steps", "must be at least 1"));
        }
        let p = &self.ppo;
        if p.n_steps == 0 || p.batch_size == 0 || p.epochs == 0 {
            return Err(bad(
                "ppo",
                "n_steps, batch_size and epochs must be at least 1",
            ));
        }
        if let Pace::Tilt(max) = p.pace {
            if !(max > 0.0 && max <= 1.0) {
                return Err(bad("ppo.pace", format!("tilt {max} is not in (0, 1]")));
            }
            if !p.discrete.is_empty() {
                return Err(bad(
                    "ppo.pace",
                    "a tilted pace needs a continuous action (leave ppo.discrete empty)",
                ));
            }
        }
        for (f, v) in [
            ("ppo.learning_rate", p.learning_rate),
            ("ddqn.learning_rate", self.ddqn.learning_rate),
        ] {
            if !(v > 0.0 && v < 1.0) {
                return Err(bad(f, format!("{v} is not in (0, 1)")));
            }
        }
        for (f, v) in [
            ("ppo.gamma", p.gamma),
            ("ppo.gae_lambda", p.gae_lambda),
            ("ddqn.gamma", self.ddqn.gamma),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(bad(f, format!("{v} is not in [0, 1]")));
            }
        }
        if p.discrete
            .iter()
            .chain(&self.ddqn.actions)
            .any(|a| !(0.0..=1.0).contains(a))
        {
            return Err(bad("discrete", "action fractions must be in [0, 1]"));
        }
        if self.algo == Algo::Ddqn && self.ddqn.actions.len() < 2 {
            return Err(bad("ddqn.actions", "needs at least two actions"));
        }
        let h = &self.hybrid;
        if !(0.0..=1.0).contains(&h.alpha)
            || !(0.0..0.5).contains(&h.floor)
            || !(0.0..=1.0).contains(&h.ema)
        {
            return Err(bad(
                "hybrid",
                "alpha and ema must be in [0, 1], floor in [0, 0.5)",
            ));
        }
        for (field, share) in [
            ("imagination.share", self.imagination.share),
            ("imagination.replay_share", self.imagination.replay_share),
        ] {
            if !(0.0..=1.0).contains(&share) {
                return Err(bad(field, "must be in [0, 1]"));
            }
        }
        if let Some(t) = &self.team {
            t.validate()?;
        }
        Ok(())
    }

    /// How many of the environments play the dynamic market.
    pub fn dynamic_envs(&self) -> usize {
        match self.hybrid.mode {
            HybridMode::StaticOnly => 0,
            HybridMode::DynamicOnly => self.n_envs,
            _ => self.hybrid.dynamic_envs.min(self.n_envs),
        }
    }

    /// The market each dynamic environment `j` (of `dynamic_envs()`)
    /// plays: the calibrated day, or for the imagined share a scenario.
    pub fn dynamic_market(&self, base: &MarketConfig, j: usize) -> MarketConfig {
        let n = self.dynamic_envs();
        let imagined = (self.imagination.share * n as f64).round() as usize;
        let mut m = base.clone();
        if j < imagined && !self.imagination.scenarios.is_empty() {
            m.scenario = self.imagination.scenarios[j % self.imagination.scenarios.len()].clone();
        }
        m
    }

    fn steps_per_update(&self) -> usize {
        self.n_envs * self.ppo.n_steps
    }

    /// Everything but the weights of the policy this config trains, before
    /// any observation has been normalised.
    fn policy_meta(&self, obs_dim: usize) -> PolicyMeta {
        PolicyMeta {
            algo: self.algo,
            spec: self.network.clone(),
            obs_dim,
            head: self.head(),
            // DDQN has no Gaussian to squash.
            squash: match self.algo {
                Algo::Ppo => self.ppo.squash,
                Algo::Ddqn => Squash::Clip,
            },
            pace: self.pace(),
            discrete: match self.algo {
                Algo::Ppo => self.ppo.discrete.clone(),
                Algo::Ddqn => self.ddqn.actions.clone(),
            },
            norm: RunningNorm::new(obs_dim),
            features: self.features.clone(),
            message_dims: self.team.as_ref().map_or(0, |t| t.message_dims()),
        }
    }

    /// Whether this config trains with the fused learner ([`crate::fused`]):
    /// PPO on the CPU with a plain MLP. Burn's autodiff learner sums in
    /// parallel in an order that depends on what else the machine runs, so
    /// only fused trainings give the same numbers when several share it.
    pub fn trains_fused(&self) -> bool {
        self.algo == Algo::Ppo
            && self.ppo.fused
            && self.device == DeviceChoice::Cpu
            && self.network.blocks.iter().all(|b| {
                matches!(b, BlockSpec::Dense { activation, .. } if *activation != Activation::Gelu)
            })
    }

    /// How the trained policy's actions become shares: DDQN and
    /// categorical PPO pick fractions of the order.
    pub fn pace(&self) -> Pace {
        match self.algo {
            Algo::Ppo if self.ppo.discrete.is_empty() => self.ppo.pace,
            _ => Pace::Absolute,
        }
    }

    fn head(&self) -> Head {
        match self.algo {
            Algo::Ppo => self.ppo.head(),
            Algo::Ddqn => Head::Categorical(self.ddqn.actions.len()),
        }
    }
}

/// One line of `metrics.jsonl`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct UpdateRecord {
    pub update: usize,
    pub env_steps: usize,
    pub secs: f64,
    /// Environment steps per second over this update, updates included.
    pub steps_per_sec: f64,
    pub loss: f64,
    pub loss_static: Option<f64>,
    pub loss_dynamic: Option<f64>,
    pub alpha: f64,
    pub beta: f64,
    pub policy_loss: Option<f64>,
    pub value_loss: Option<f64>,
    pub entropy: Option<f64>,
    pub approx_kl: Option<f64>,
    pub epsilon: Option<f64>,
    pub episodes: usize,
    pub episode_reward: Option<f64>,
    pub episode_pa: Option<f64>,
    pub episode_pa_static: Option<f64>,
    pub episode_pa_dynamic: Option<f64>,
    pub val_pa: Option<f64>,
}

impl UpdateRecord {
    fn set_ppo(&mut self, stats: &ppo::PpoStats) {
        self.loss = stats.loss;
        self.policy_loss = Some(stats.policy_loss);
        self.value_loss = Some(stats.value_loss);
        self.entropy = Some(stats.entropy);
        self.approx_kl = Some(stats.approx_kl);
    }
}

/// The loop's position, saved with each checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LoopState {
    update: usize,
    env_steps: usize,
    secs: f64,
    weights: LossWeights,
    best_val: Option<f64>,
}

/// Scores a policy on held-out orders (greedy validation PA, bps).
pub type Validator<'a> = Box<dyn Fn(&Policy) -> f64 + 'a>;

/// What a training run needs besides its config.
pub struct TrainSetup<'a> {
    pub config: TrainConfig,
    pub envs: Vec<Box<dyn TrainEnv + 'a>>,
    /// Validation PA of a policy (greedy), if the run selects on it.
    pub validate: Option<Validator<'a>>,
    pub run_dir: Option<PathBuf>,
    /// Continue from `run_dir`'s checkpoint.
    pub resume: bool,
    pub progress: bool,
}

pub struct TrainOutcome {
    /// The best policy by validation PA (the final one without validation).
    pub policy: Policy,
    pub final_policy: Policy,
    pub records: Vec<UpdateRecord>,
    pub best_val: Option<f64>,
    pub env_steps: usize,
    pub secs: f64,
}

/// Writes a file so that a crash leaves the old or the new version, never
/// half of one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), TrainError> {
    serl_report::write_atomic(path, bytes).map_err(|e| TrainError::io(path, e))
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

/// The learner-specific part of the loop.
enum Learner {
    Ppo {
        model: crate::net::ActorCritic,
        optim: burn::optim::ModuleOptimizer,
        /// The fused learner for plain MLPs on the CPU; `model` then only
        /// mirrors its weights.
        fused: Option<Box<FusedPpo>>,
    },
    Ddqn {
        online: crate::net::QNetwork,
        target: crate::net::QNetwork,
        optim: burn::optim::ModuleOptimizer,
        replay: Box<Replay>,
    },
}

impl Learner {
    fn inference(&self) -> Model {
        match self {
            Learner::Ppo { model, .. } => Model::Ppo(model.valid()),
            Learner::Ddqn { online, .. } => Model::Ddqn(online.valid()),
        }
    }
}

/// Held from seeding the backend's generator until the network is built:
/// the generator is one per device, so trainings running at once (parallel
/// candidates) would otherwise interleave their draws.
fn seeded_init() -> std::sync::MutexGuard<'static, ()> {
    static INIT: std::sync::Mutex<()> = std::sync::Mutex::new(());
    INIT.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The policy `train` would start from: the config's network at its seeded
/// initialisation, before any experience (a random policy).
pub fn initial_policy(cfg: &TrainConfig, obs_dim: usize) -> Result<Policy, TrainError> {
    cfg.validate(obs_dim)?;
    let device = cfg.device.device()?;
    let init = seeded_init();
    device.seed(cfg.seed);
    let meta = cfg.policy_meta(obs_dim);
    let model = Model::build(&meta, &device)?;
    drop(init);
    Ok(Policy {
        meta,
        model,
        device,
    })
}

/// Trains a policy. With a run directory, writes metrics, checkpoints and
/// the report there; with `resume`, continues from its checkpoint.
pub fn train(setup: TrainSetup) -> Result<TrainOutcome, TrainError> {
    let TrainSetup {
        config: cfg,
        envs,
        validate,
        run_dir,
        resume,
        progress,
    } = setup;
    let obs_dim = envs
        .first()
        .map(|e| e.obs_dim())
        .ok_or_else(|| bad("n_envs", "no environments to train in"))?;
    cfg.validate(obs_dim)?;
    let device = cfg.device.device()?;
    let ad = device.clone().autodiff();
    // Weight initialisation draws from the backend's generator: seed it so
    // that the same config gives the same network.
    let init = seeded_init();
    device.seed(cfg.seed);
    ad.seed(cfg.seed);
    let mut meta = cfg.policy_meta(obs_dim);
    let mut state = LoopState {
        update: 0,
        env_steps: 0,
        secs: 0.0,
        weights: LossWeights::new(&cfg.hybrid),
        best_val: None,
    };
    let ckpt_dir = run_dir.as_ref().map(|d| d.join("checkpoint"));
    let mut learner = match cfg.algo {
        Algo::Ppo => {
            let model = crate::net::ActorCritic::new(&meta.spec, obs_dim, meta.head, &ad)?;
            Learner::Ppo {
                fused: fused_learner(&cfg, &model, &meta),
                model,
                optim: ppo::optimizer(&cfg.ppo),
            }
        }
        Algo::Ddqn => {
            let Head::Categorical(k) = meta.head else {
                unreachable!()
            };
            let online = crate::net::QNetwork::new(&meta.spec, obs_dim, k, &ad)?;
            Learner::Ddqn {
                target: online.valid(),
                online,
                optim: ddqn::optimizer(&cfg.ddqn),
                replay: Box::new(Replay::new(cfg.ddqn.buffer, obs_dim * meta.spec.window)),
            }
        }
    };
    drop(init);
    let mut records: Vec<UpdateRecord> = Vec::new();
    if let Some(dir) = &run_dir {
        std::fs::create_dir_all(dir).map_err(|e| TrainError::io(dir, e))?;
        let cfg_path = dir.join("config.json");
        if resume {
            let ck = dir.join("checkpoint");
            let st_path = ck.join("state.json");
            let text =
                std::fs::read_to_string(&st_path).map_err(|e| TrainError::io(&st_path, e))?;
            state = serde_json::from_str(&text).map_err(|e| TrainError::Corrupt {
                path: st_path.display().to_string(),
                message: e.to_string(),
            })?;
            let saved = Policy::load(&ck, "model", &ad)?;
            meta.norm = saved.meta.norm.clone();
            let optim_path = ck.join("optim.bin");
            let bytes = std::fs::read(&optim_path).map_err(|e| TrainError::io(&optim_path, e))?;
            let restore = |o: burn::optim::ModuleOptimizer| {
                o.from_bytes(burn::tensor::Bytes::from_bytes_vec(bytes.clone()))
                    .map_err(|e| TrainError::Corrupt {
                        path: optim_path.display().to_string(),
                        message: format!("{e:?}"),
                    })
            };
            learner = match (learner, saved.model) {
                (Learner::Ppo { optim, .. }, Model::Ppo(m)) => {
                    let model = m.train();
                    let mut fused = fused_learner(&cfg, &model, &meta);
                    if let Some(f) = &mut fused {
                        restore_fused_optimizer(&ck, f)?;
                    }
                    Learner::Ppo {
                        fused,
                        model,
                        optim: restore(optim)?,
                    }
                }
                (Learner::Ddqn { optim, replay, .. }, Model::Ddqn(m)) => {
                    let target = Policy::load(&ck, "target", &device)?;
                    let Model::Ddqn(target) = target.model else {
                        return Err(TrainError::Corrupt {
                            path: ck.join("target.json").display().to_string(),
                            message: "not a DDQN network".into(),
                        });
                    };
                    Learner::Ddqn {
                        online: m.train(),
                        target,
                        optim: restore(optim)?,
                        replay,
                    }
                }
                _ => {
                    return Err(TrainError::Corrupt {
                        path: ck.display().to_string(),
                        message: "the checkpoint's algorithm differs from the config's".into(),
                    })
                }
            };
            records = read_metrics(&dir.join("metrics.jsonl"))?
                .into_iter()
                .filter(|r| r.update < state.update)
                .collect();
        } else {
            let text = serde_json::to_string_pretty(&cfg)
                .map_err(|e| TrainError::io(&cfg_path, std::io::Error::other(e)))?;
            write_atomic(&cfg_path, text.as_bytes())?;
        }
        write_metrics(&dir.join("metrics.jsonl"), &records)?;
    }

    let per_update = cfg.steps_per_update();
    let total_updates = cfg.total_steps.div_ceil(per_update);
    let bar = if progress {
        ProgressBar::new((total_updates * per_update) as u64)
    } else {
        ProgressBar::with_draw_target(
            Some((total_updates * per_update) as u64),
            ProgressDrawTarget::hidden(),
        )
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} train [{bar:30}] {pos}/{len} steps  {per_sec}  eta {eta}  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_position(state.env_steps as u64);
    let window = meta.spec.window;
    let mut norm = meta.norm.clone();
    let env_seed = cfg.seed ^ (state.update as u64).wrapping_mul(0xA24B_AED4_963E_E407);
    let mut venv = VecEnv::new(envs, env_seed, window, &mut norm, true);
    let sources = venv.sources();
    let mut best: Option<Policy> = None;
    let t_run = Instant::now();
    let secs_before = state.secs;

    for update in state.update..total_updates {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(
            cfg.seed
                .wrapping_add(update as u64)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        meta.norm = norm.clone();
        let mut rec = UpdateRecord {
            update,
            ..Default::default()
        };
        let (loss_s, loss_d);
        match &mut learner {
            Learner::Ppo {
                model,
                fused: Some(f),
                ..
            } => {
                let rollout = collect(&mut venv, &**f, &mut norm, cfg.ppo.n_steps, &mut rng);
                let stats = f.update(&cfg.ppo, &rollout, state.weights, &mut rng);
                f.write_into(model);
                rec.set_ppo(&stats);
                (loss_s, loss_d) = (stats.loss_static, stats.loss_dynamic);
            }
            Learner::Ppo {
                model,
                optim,
                fused: None,
            } => {
                let policy = Policy {
                    meta: meta.clone(),
                    model: Model::Ppo(model.valid()),
                    device: device.clone(),
                };
                let rollout = collect(&mut venv, &policy, &mut norm, cfg.ppo.n_steps, &mut rng);
                let (m, stats) = ppo::update(
                    model.clone(),
                    optim,
                    &cfg.ppo,
                    &rollout,
                    state.weights,
                    &mut rng,
                );
                *model = m;
                rec.set_ppo(&stats);
                (loss_s, loss_d) = (stats.loss_static, stats.loss_dynamic);
            }
            Learner::Ddqn {
                online,
                target,
                optim,
                replay,
            } => {
                let d = &cfg.ddqn;
                let n = venv.len();
                let width = obs_dim * window;
                let (mut ls, mut ld, mut lsum, mut nls, mut nld, mut nl) =
                    (0.0, 0.0, 0.0, 0usize, 0usize, 0usize);
                for _ in 0..cfg.ppo.n_steps {
                    let eps = d.epsilon(state.env_steps);
                    let policy = Policy {
                        meta: meta.clone(),
                        model: Model::Ddqn(online.valid()),
                        device: device.clone(),
                    };
                    let obs = venv.current().to_vec();
                    let acts = policy.act(&obs, n, true, eps, &mut rng);
                    let actions: Vec<f64> = acts.iter().map(|a| a.env_action).collect();
                    let before = state.env_steps / d.target_every.max(1);
                    let (rew, done) = venv.step(&actions, &mut norm, true);
                    let next = venv.current();
                    for i in 0..n {
                        // A finished episode's next window is the new
                        // episode's; `done` masks it out of the target.
                        replay.push(
                            &obs[i * width..(i + 1) * width],
                            acts[i].raw,
                            rew[i],
                            &next[i * width..(i + 1) * width],
                            done[i],
                            sources[i],
                        );
                    }
                    state.env_steps += n;
                    if replay.len() >= d.learning_starts.max(d.batch_size) {
                        for _ in 0..d.gradient_steps {
                            let (m, stats) = ddqn::train_step(
                                online.clone(),
                                target,
                                optim,
                                d,
                                replay,
                                state.weights,
                                &mut rng,
                            );
                            *online = m;
                            lsum += stats.loss;
                            nl += 1;
                            if let Some(v) = stats.loss_static {
                                ls += v;
                                nls += 1;
                            }
                            if let Some(v) = stats.loss_dynamic {
                                ld += v;
                                nld += 1;
                            }
                        }
                    }
                    if state.env_steps / d.target_every.max(1) != before {
                        *target = online.valid();
                    }
                }
                state.env_steps -= n * cfg.ppo.n_steps;
                rec.loss = if nl > 0 { lsum / nl as f64 } else { 0.0 };
                rec.epsilon = Some(d.epsilon(state.env_steps));
                (loss_s, loss_d) = (
                    (nls > 0).then(|| ls / nls as f64),
                    (nld > 0).then(|| ld / nld as f64),
                );
            }
        }
        state.env_steps += per_update;
        state.weights.update(&cfg.hybrid, loss_s, loss_d);
        rec.loss_static = loss_s;
        rec.loss_dynamic = loss_d;
        rec.alpha = state.weights.alpha;
        rec.beta = state.weights.beta;
        let eps: Vec<EpisodeStat> = venv.take_finished();
        rec.episodes = eps.len();
        rec.episode_reward = mean(eps.iter().map(|e| e.reward));
        rec.episode_pa = mean(eps.iter().map(|e| e.pa));
        rec.episode_pa_static = mean(
            eps.iter()
                .filter(|e| e.source == Source::Static)
                .map(|e| e.pa),
        );
        rec.episode_pa_dynamic = mean(
            eps.iter()
                .filter(|e| e.source == Source::Dynamic)
                .map(|e| e.pa),
        );
        meta.norm = norm.clone();
        let last = update + 1 == total_updates;
        let current = Policy {
            meta: meta.clone(),
            model: learner.inference(),
            device: device.clone(),
        };
        if let Some(v) = &validate {
            if (update + 1) % cfg.eval_every.max(1) == 0 || last {
                let pa = v(&current);
                rec.val_pa = Some(pa);
                if state.best_val.is_none_or(|b| pa > b) {
                    state.best_val = Some(pa);
                    if let Some(dir) = &run_dir {
                        current.save(dir, "best")?;
                        write_marker(dir, "best")?;
                    }
                    best = Some(current.clone());
                }
            }
        }
        let dt = t0.elapsed().as_secs_f64();
        rec.env_steps = state.env_steps;
        rec.secs = secs_before + t_run.elapsed().as_secs_f64();
        rec.steps_per_sec = per_update as f64 / dt.max(1e-9);
        state.update = update + 1;
        state.secs = rec.secs;
        bar.set_position(state.env_steps as u64);
        bar.set_message(format!(
            "loss {:.3}  α {:.2} β {:.2}  PA {}{}",
            rec.loss,
            rec.alpha,
            rec.beta,
            rec.episode_pa.map_or("-".into(), |p| format!("{p:.2}")),
            rec.val_pa
                .map_or(String::new(), |p| format!("  val {p:.2}"))
        ));
        if let Some(dir) = &run_dir {
            append_metrics(&dir.join("metrics.jsonl"), &rec)?;
            if (update + 1) % cfg.checkpoint_every.max(1) == 0 || last {
                let ck = ckpt_dir.as_ref().expect("set with run_dir");
                save_checkpoint(ck, &current, &learner, &state, &device)?;
            }
        }
        records.push(rec);
    }
    bar.finish_and_clear();
    meta.norm = norm;
    let final_policy = Policy {
        meta,
        model: learner.inference(),
        device: device.clone(),
    };
    if let Some(dir) = &run_dir {
        final_policy.save(dir, "final")?;
        if best.is_none() && state.best_val.is_some() && dir.join("best.bpk").exists() {
            best = Some(Policy::load(dir, "best", &device)?);
        }
        if state.best_val.is_none() {
            write_marker(dir, "final")?;
        }
        crate::report::write(dir, &records)?;
    }
    Ok(TrainOutcome {
        policy: best.unwrap_or_else(|| final_policy.clone()),
        final_policy,
        records,
        best_val: state.best_val,
        env_steps: state.env_steps,
        secs: state.secs,
    })
}

fn save_checkpoint(
    dir: &Path,
    current: &Policy,
    learner: &Learner,
    state: &LoopState,
    device: &Device,
) -> Result<(), TrainError> {
    std::fs::create_dir_all(dir).map_err(|e| TrainError::io(dir, e))?;
    current.save(dir, "model")?;
    let (optim, target) = match learner {
        Learner::Ppo {
            optim,
            fused: Some(f),
            ..
        } => {
            let path = dir.join(FUSED_OPTIMIZER);
            let text = serde_json::to_string(f.optimizer())
                .map_err(|e| TrainError::io(&path, std::io::Error::other(e)))?;
            write_atomic(&path, text.as_bytes())?;
            (optim, None)
        }
        Learner::Ppo { optim, .. } => (optim, None),
        Learner::Ddqn { optim, target, .. } => (optim, Some(target)),
    };
    if let Some(t) = target {
        Policy {
            meta: current.meta.clone(),
            model: Model::Ddqn(t.clone()),
            device: device.clone(),
        }
        .save(dir, "target")?;
    }
    let path = dir.join("optim.bin");
    let bytes = optim
        .into_bytes()
        .map_err(|e| TrainError::io(&path, std::io::Error::other(format!("{e:?}"))))?;
    write_atomic(&path, &bytes)?;
    // The state goes last: it names an update only once everything of that
    // update is on disk.
    let text = serde_json::to_string_pretty(state)
        .map_err(|e| TrainError::io(dir, std::io::Error::other(e)))?;
    write_atomic(&dir.join("state.json"), text.as_bytes())
}

/// The fused learner's Adam moments, beside burn's `optim.bin`.
const FUSED_OPTIMIZER: &str = "fused-optim.json";

/// The fused learner when the config asks for it and the network is a
/// plain MLP on the CPU.
fn fused_learner(
    cfg: &TrainConfig,
    model: &crate::net::ActorCritic,
    meta: &PolicyMeta,
) -> Option<Box<FusedPpo>> {
    if !cfg.ppo.fused || cfg.device != DeviceChoice::Cpu {
        return None;
    }
    FusedPpo::new(model, meta).map(Box::new)
}

/// Restores the fused learner's optimiser from a checkpoint. A checkpoint
/// written by burn's learner has none: Adam then starts afresh.
fn restore_fused_optimizer(ck: &Path, fused: &mut FusedPpo) -> Result<(), TrainError> {
    let path = ck.join(FUSED_OPTIMIZER);
    if !path.exists() {
        tracing::warn!("{} is missing: the optimiser starts afresh", path.display());
        return Ok(());
    }
    let text = std::fs::read_to_string(&path).map_err(|e| TrainError::io(&path, e))?;
    let corrupt = |message: String| TrainError::Corrupt {
        path: path.display().to_string(),
        message,
    };
    let saved = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
    if fused.restore_optimizer(saved) {
        Ok(())
    } else {
        Err(corrupt("its shapes differ from the network's".into()))
    }
}

/// `checkpoint.json`: which saved policy a backtest should play.
fn write_marker(dir: &Path, name: &str) -> Result<(), TrainError> {
    let text = serde_json::json!({ "policy": name }).to_string();
    write_atomic(&dir.join("checkpoint.json"), text.as_bytes())
}

/// Loads the policy a run directory's `checkpoint.json` names.
pub fn load_run_policy(dir: &Path, device: &Device) -> Result<Policy, TrainError> {
    let marker = dir.join("checkpoint.json");
    let text = std::fs::read_to_string(&marker).map_err(|e| TrainError::io(&marker, e))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| TrainError::Corrupt {
        path: marker.display().to_string(),
        message: e.to_string(),
    })?;
    let name = v["policy"].as_str().ok_or_else(|| TrainError::Corrupt {
        path: marker.display().to_string(),
        message: "no `policy` field".into(),
    })?;
    if name.contains(['/', '\\', '.']) {
        return Err(TrainError::Corrupt {
            path: marker.display().to_string(),
            message: format!("`{name}` is not a policy name"),
        });
    }
    Policy::load(dir, name, device)
}

pub fn read_metrics(path: &Path) -> Result<Vec<UpdateRecord>, TrainError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(TrainError::io(path, e)),
    };
    // A line cut short by a kill is dropped; every whole line is kept.
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

fn write_metrics(path: &Path, records: &[UpdateRecord]) -> Result<(), TrainError> {
    let mut text = String::new();
    for r in records {
        text.push_str(&serde_json::to_string(r).unwrap_or_default());
        text.push('\n');
    }
    write_atomic(path, text.as_bytes())
}

fn append_metrics(path: &Path, r: &UpdateRecord) -> Result<(), TrainError> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| TrainError::io(path, e))?;
    let line = serde_json::to_string(r).unwrap_or_default();
    writeln!(f, "{line}").map_err(|e| TrainError::io(path, e))
}
