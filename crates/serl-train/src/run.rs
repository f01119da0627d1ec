//! The training loop: [`train`] steps a learner ([`crate::learner`]) through
//! updates, validates, checkpoints into a run directory
//! ([`crate::rundir`]) and tells the caller about each update. Resume
//! reloads the latest checkpoint and continues with the next update; the
//! episodes in flight when the run stopped start over, so a resumed run is
//! statistically but not bitwise the same as an uninterrupted one.

use std::path::PathBuf;
use std::time::Instant;

use burn::tensor::Device;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::align::AlignmentStats;
use crate::config::TrainConfig;
use crate::critic::CriticHook;
use crate::hybrid::LossWeights;
use crate::learner::{AnyLearner, Experience};
use crate::normalize::RunningNorm;
use crate::policy::{Policy, PolicyMeta};
use crate::record::UpdateRecord;
use crate::registry::build_learner;
use crate::rollout::{EpisodeStat, VecEnv};
use crate::rundir::{LoopState, RunDir};
use crate::task::TrainEnv;
use crate::TrainError;
use serl_env::Source;

/// Scores a policy on held-out orders (greedy validation PA, bps).
pub type Validator<'a> = Box<dyn Fn(&Policy) -> f64 + 'a>;

/// Told about every update as it finishes (a progress bar, a log line).
pub type OnUpdate<'a> = Box<dyn Fn(&UpdateRecord) + 'a>;

/// What a training run needs besides its config.
pub struct TrainSetup<'a> {
    /// How to train.
    pub config: TrainConfig,
    /// The environments, `config.n_envs` of them.
    pub envs: Vec<Box<dyn TrainEnv + 'a>>,
    /// Validation PA of a policy (greedy), if the run selects on it.
    pub validate: Option<Validator<'a>>,
    /// Where to write metrics, checkpoints and the report.
    pub run_dir: Option<PathBuf>,
    /// Continue from `run_dir`'s checkpoint.
    pub resume: bool,
    /// Called after each update.
    pub on_update: Option<OnUpdate<'a>>,
    /// The reward critic re-weighting the environments' reward, when the
    /// config has one ([`crate::TrainSession`] builds it).
    pub reward_critic: Option<CriticHook>,
}

impl<'a> TrainSetup<'a> {
    /// A training of `config` on `envs` and nothing else: no validation,
    /// no run directory, no callbacks, no reward critic.
    pub fn bare(config: TrainConfig, envs: Vec<Box<dyn TrainEnv + 'a>>) -> Self {
        TrainSetup {
            config,
            envs,
            validate: None,
            run_dir: None,
            resume: false,
            on_update: None,
            reward_critic: None,
        }
    }
}

/// What a training run produced.
pub struct TrainOutcome {
    /// The best policy by validation PA (the final one without validation).
    pub policy: Policy,
    /// The policy after the last update.
    pub final_policy: Policy,
    /// One record per update.
    pub records: Vec<UpdateRecord>,
    /// The best validation PA, bps, if the run validated.
    pub best_val: Option<f64>,
    /// Environment steps taken.
    pub env_steps: usize,
    /// Seconds spent, over every session of a resumed run.
    pub secs: f64,
    /// Where this session's seconds went.
    pub profile: TrainProfile,
    /// What alignment before RL did (none without it, or on a resumed
    /// run that had aligned already).
    pub alignment: Option<AlignmentStats>,
    /// NaN, ±∞ and division-by-zero values the environments' reward
    /// repaired ([`crate::TrainSession`] fills it in; 0 from [`train`]).
    pub reward_repaired: u64,
}

/// Where a training's wall seconds went (this session's, for a resumed
/// run): stepping the environments, learning (acting and the gradient
/// updates) and validating; and, within the stepping, the seconds each
/// kind of environment took on its own thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainProfile {
    /// Wall seconds stepping the environments.
    pub env_secs: f64,
    /// Seconds the static replays took (summed over environments).
    pub static_env_secs: f64,
    /// Seconds the dynamic markets took (summed over environments).
    pub dynamic_env_secs: f64,
    /// Wall seconds of the updates outside the stepping: the policy
    /// acting and the gradient steps.
    pub learn_secs: f64,
    /// Wall seconds validating.
    pub validation_secs: f64,
}

impl TrainProfile {
    /// Takes the stepping seconds of a run's environments.
    fn add_stepping(&mut self, t: crate::rollout::StepTiming) {
        self.env_secs = t.wall;
        self.static_env_secs = t.static_envs;
        self.dynamic_env_secs = t.dynamic_envs;
    }

    /// The sum of two profiles, stage by stage.
    pub fn add(&mut self, o: &TrainProfile) {
        self.env_secs += o.env_secs;
        self.static_env_secs += o.static_env_secs;
        self.dynamic_env_secs += o.dynamic_env_secs;
        self.learn_secs += o.learn_secs;
        self.validation_secs += o.validation_secs;
    }
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
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
#[cfg(test)]
pub(crate) fn initial_policy(cfg: &TrainConfig, obs_dim: usize) -> Result<Policy, TrainError> {
    let (device, _, meta, learner) = seeded_learner(cfg, obs_dim)?;
    Ok(policy_now(&meta, learner.as_ref(), &device))
}

/// The device, its autodiff twin, the policy's metadata and the learner,
/// whose network is initialised from the config's seed.
fn seeded_learner(
    cfg: &TrainConfig,
    obs_dim: usize,
) -> Result<(Device, Device, PolicyMeta, Box<dyn AnyLearner>), TrainError> {
    cfg.validate(obs_dim)?;
    let device = cfg.device.device()?;
    let ad = device.clone().autodiff();
    let meta = cfg.policy_meta(obs_dim);
    // Weight initialisation draws from the backend's generator: seed it so
    // that the same config gives the same network.
    let init = seeded_init();
    device.seed(cfg.seed);
    ad.seed(cfg.seed);
    let learner = build_learner(cfg, &meta, &ad, &device)?;
    drop(init);
    Ok((device, ad, meta, learner))
}

/// The environments stepped together, seeded for the update a run starts
/// (or resumes) at, with the centralised critic's rows for a MAPPO policy.
fn vec_env<'a>(
    envs: Vec<Box<dyn TrainEnv + 'a>>,
    cfg: &TrainConfig,
    meta: &PolicyMeta,
    update: usize,
    norm: &mut RunningNorm,
) -> VecEnv<'a> {
    let env_seed = cfg.seed ^ (update as u64).wrapping_mul(0xA24B_AED4_963E_E407);
    let venv = VecEnv::new(envs, env_seed, meta.spec.window, norm, true);
    if meta.joint_critic_width().is_some() {
        venv.with_joint_critic()
    } else {
        venv
    }
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
        on_update,
        mut reward_critic,
    } = setup;
    let obs_dim = envs.first().map(|e| e.obs_dim()).ok_or_else(no_envs)?;
    let (device, ad, mut meta, mut learner) = seeded_learner(&cfg, obs_dim)?;
    let run_dir = run_dir.map(RunDir::new).transpose()?;
    let (mut state, mut records) = match &run_dir {
        Some(dir) if resume => dir.resume(learner.as_mut(), &mut meta, &ad)?,
        Some(dir) => dir.start(&cfg).map(|_| (fresh_state(&cfg), Vec::new()))?,
        None => (fresh_state(&cfg), Vec::new()),
    };
    reward_critic.iter_mut().for_each(|h| h.resume(&records));
    let (total_updates, _) = cfg.planned();
    let mut norm = meta.norm.clone();
    let mut venv = vec_env(envs, &cfg, &meta, state.update, &mut norm);
    let alignment = align_at_start(
        &cfg,
        state.update,
        (&mut venv, &mut norm),
        &meta,
        learner.as_mut(),
        run_dir.as_ref(),
    )?;
    let mut best: Option<Policy> = None;
    let mut profile = TrainProfile::default();
    let (t_run, secs_before) = (Instant::now(), state.secs);
    let _training = tracing::info_span!("training", algo = ?cfg.algo).entered();
    for update in state.update..total_updates {
        let _update = tracing::info_span!("update", update).entered();
        let t0 = Instant::now();
        let mut rng = update_rng(cfg.seed, update);
        meta.norm = norm.clone();
        let mut rec = UpdateRecord {
            update,
            ..Default::default()
        };
        let stepped = venv.timing().wall;
        let experience = Experience {
            venv: &mut venv,
            norm: &mut norm,
            meta: &meta,
            device: &device,
            weights: state.weights,
            env_steps: state.env_steps,
            rng: &mut rng,
        };
        learn(&cfg, learner.as_mut(), experience, &mut state, &mut rec);
        profile.learn_secs += t0.elapsed().as_secs_f64() - (venv.timing().wall - stepped);
        record_episodes(&mut rec, &venv.take_finished());
        if let Some(h) = reward_critic.as_mut() {
            rec.reward_weights = Some(h.after_update(&rec, true));
        }
        meta.norm = norm.clone();
        let last = update + 1 == total_updates;
        let current = policy_now(&meta, learner.as_ref(), &device);
        let due = (update + 1).is_multiple_of(cfg.eval_every.max(1)) || last;
        rec.val_pa = validate_timed(validate.as_ref().filter(|_| due), &current, &mut profile);
        if let Some(pa) = rec.val_pa {
            keep_if_best(pa, &current, &mut state, &mut best, run_dir.as_ref())?;
        }
        rec.env_steps = state.env_steps;
        rec.secs = secs_before + t_run.elapsed().as_secs_f64();
        rec.steps_per_sec = cfg.steps_per_update() as f64 / t0.elapsed().as_secs_f64().max(1e-9);
        (state.update, state.secs) = (update + 1, rec.secs);
        if let Some(dir) = &run_dir {
            let due = (update + 1).is_multiple_of(cfg.checkpoint_every.max(1)) || last;
            save_update(dir, &rec, due.then_some(&current), learner.as_ref(), &state)?;
        }
        if let Some(f) = &on_update {
            f(&rec);
        }
        records.push(rec);
    }
    meta.norm = norm;
    let final_policy = policy_now(&meta, learner.as_ref(), &device);
    if let Some(dir) = &run_dir {
        dir.finish(&final_policy, &state, &mut best, &records, &device)?;
    }
    profile.add_stepping(venv.timing());
    Ok(TrainOutcome {
        reward_repaired: 0,
        alignment,
        policy: best.unwrap_or_else(|| final_policy.clone()),
        final_policy,
        records,
        best_val: state.best_val,
        env_steps: state.env_steps,
        secs: state.secs,
        profile,
    })
}

/// `current`'s validation PA when `v` is given, its seconds counted.
fn validate_timed(v: Option<&Validator>, current: &Policy, p: &mut TrainProfile) -> Option<f64> {
    let t = Instant::now();
    let pa = v.map(|v| v(current));
    p.validation_secs += t.elapsed().as_secs_f64();
    pa
}

/// Appends the update's record, and checkpoints `current` when given.
fn save_update(
    dir: &RunDir,
    rec: &UpdateRecord,
    current: Option<&Policy>,
    learner: &dyn AnyLearner,
    state: &LoopState,
) -> Result<(), TrainError> {
    dir.append(rec)?;
    match current {
        Some(p) => dir.save_checkpoint(p, learner, state),
        None => Ok(()),
    }
}

/// One update of the learner, then the hybrid weights moved by its losses.
fn learn(
    cfg: &TrainConfig,
    learner: &mut dyn AnyLearner,
    x: Experience,
    state: &mut LoopState,
    rec: &mut UpdateRecord,
) {
    learner.update(cfg, x, rec);
    state.env_steps += cfg.steps_per_update();
    state
        .weights
        .update(&cfg.hybrid, rec.loss_static, rec.loss_dynamic);
    (rec.alpha, rec.beta) = (state.weights.alpha, state.weights.beta);
}

/// Update `update`'s own generator (its minibatches and its actions).
fn update_rng(seed: u64, update: usize) -> SmallRng {
    SmallRng::seed_from_u64(
        seed.wrapping_add(update as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15),
    )
}

fn no_envs() -> TrainError {
    TrainError::Config {
        field: "n_envs".into(),
        message: "no environments to train in".into(),
    }
}

/// Aligns the fresh learner with the plan, when there is one, alignment
/// is on and the run starts at `update` 0 (a resumed run was aligned
/// before): demonstrations of its tracking controller, then behaviour
/// cloning ([`crate::align`]). Its figures go to `alignment.json` in the
/// run directory.
fn align_at_start(
    cfg: &TrainConfig,
    update: usize,
    (venv, norm): (&mut VecEnv, &mut crate::normalize::RunningNorm),
    meta: &PolicyMeta,
    learner: &mut dyn AnyLearner,
    run_dir: Option<&RunDir>,
) -> Result<Option<AlignmentStats>, TrainError> {
    let Some(plan) = cfg
        .plan
        .as_ref()
        .filter(|_| update == 0 && !cfg.alignment.is_off())
    else {
        return Ok(None);
    };
    let demos = crate::align::demonstrations(venv, norm, meta, plan, cfg.alignment.steps);
    // The normaliser learnt from the demonstrations: the actor is fitted
    // to rows normalised as PPO will see them next.
    let mut meta = meta.clone();
    meta.norm = norm.clone();
    let mut rng = SmallRng::seed_from_u64(cfg.seed ^ 0xA11C_0DE5);
    let (loss_before, loss_after) = learner.align(&demos, &cfg.alignment, &meta, &mut rng);
    let stats = AlignmentStats {
        demonstrations: demos.targets.len(),
        tracking_pa: demos.tracking_pa,
        loss_before,
        loss_after,
    };
    tracing::info!(
        "aligned with the plan: {} demonstrations, cloning loss {:.4} -> {:.4}",
        stats.demonstrations,
        loss_before,
        loss_after
    );
    if let Some(dir) = run_dir {
        dir.write_json("alignment.json", &stats)?;
    }
    Ok(Some(stats))
}

/// Keeps `current` (in `best`, and in the run directory) when its
/// validation PA beats every earlier one.
fn keep_if_best(
    pa: f64,
    current: &Policy,
    state: &mut LoopState,
    best: &mut Option<Policy>,
    run_dir: Option<&RunDir>,
) -> Result<(), TrainError> {
    if state.best_val.is_none_or(|b| pa > b) {
        state.best_val = Some(pa);
        if let Some(dir) = run_dir {
            dir.save_best(current)?;
        }
        *best = Some(current.clone());
    }
    Ok(())
}

fn fresh_state(cfg: &TrainConfig) -> LoopState {
    LoopState {
        update: 0,
        env_steps: 0,
        secs: 0.0,
        weights: LossWeights::new(&cfg.hybrid),
        best_val: None,
    }
}

fn policy_now(meta: &PolicyMeta, learner: &dyn AnyLearner, device: &Device) -> Policy {
    Policy {
        meta: meta.clone(),
        model: learner.inference(),
        device: device.clone(),
    }
}

/// The update's finished episodes: how many, their mean reward and PA, and
/// the PA of each source.
fn record_episodes(rec: &mut UpdateRecord, eps: &[EpisodeStat]) {
    let pa_of = |source: Source| mean(eps.iter().filter(|e| e.source == source).map(|e| e.pa));
    rec.episodes = eps.len();
    rec.episode_reward = mean(eps.iter().map(|e| e.reward));
    rec.episode_pa = mean(eps.iter().map(|e| e.pa));
    rec.episode_pa_static = pa_of(Source::Static);
    rec.episode_pa_dynamic = pa_of(Source::Dynamic);
}
