//! One interface for the three learners: burn's PPO (any network, any
//! device), the fused PPO learner (plain MLPs on the CPU) and DDQN. The
//! training loop ([`crate::run`]) calls [`Learner::update`] once per update
//! and never asks which learner it holds; [`build`] makes the one choice.

use std::path::Path;

use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::tensor::Device;
use rand::rngs::SmallRng;

use crate::align::{clone_policy, AlignmentConfig, Demonstrations};
use crate::config::TrainConfig;
use crate::ddqn::{self, Replay};
use crate::fused::FusedPpo;
use crate::hybrid::LossWeights;
use crate::net::{ActorCritic, Head, QNetwork};
use crate::normalize::RunningNorm;
use crate::policy::{Algo, Model, Policy, PolicyMeta};
use crate::ppo;
use crate::rollout::{collect, VecEnv};
use crate::run::UpdateRecord;
use crate::TrainError;

/// What one update works with: the environments, the observation
/// normaliser, the policy's metadata, the hybrid weights and a generator.
pub(crate) struct Experience<'s, 'a> {
    pub venv: &'s mut VecEnv<'a>,
    pub norm: &'s mut RunningNorm,
    pub meta: &'s PolicyMeta,
    pub device: &'s Device,
    pub weights: LossWeights,
    /// Environment steps taken before this update.
    pub env_steps: usize,
    pub rng: &'s mut SmallRng,
}

/// A learner: collects an update's experience and learns from it.
pub(crate) trait Learner {
    /// One update; writes the losses (total, static, dynamic) and the
    /// learner's own figures into `rec`.
    fn update(&mut self, cfg: &TrainConfig, x: Experience, rec: &mut UpdateRecord);
    /// The network as it acts now.
    fn inference(&self) -> Model;
    /// Writes what resuming needs besides the policy (optimiser moments, a
    /// target network) into the checkpoint directory `ck`.
    fn save(&self, ck: &Path, current: &Policy) -> Result<(), TrainError>;
    /// Takes the weights of `saved` and the state [`Learner::save`] wrote
    /// into `ck`.
    fn restore(&mut self, ck: &Path, saved: Model, meta: &PolicyMeta) -> Result<(), TrainError>;
    /// Fits the actor to `demos` before any update (alignment); the
    /// cloning loss before and after. DDQN has no actor (the config
    /// refuses alignment for it).
    fn align(
        &mut self,
        demos: &Demonstrations,
        cfg: &AlignmentConfig,
        meta: &PolicyMeta,
        rng: &mut SmallRng,
    ) -> (f64, f64) {
        let _ = (demos, cfg, meta, rng);
        (0.0, 0.0)
    }
}

/// The learner `cfg` trains with: fused PPO where
/// [`TrainConfig::trains_fused`] says so, burn's PPO otherwise, or DDQN.
pub(crate) fn build(
    cfg: &TrainConfig,
    meta: &PolicyMeta,
    ad: &Device,
    device: &Device,
) -> Result<Box<dyn Learner>, TrainError> {
    let obs_dim = meta.obs_dim;
    match cfg.algo {
        Algo::Ppo => {
            let model = ActorCritic::with_critic_input(
                &meta.spec,
                obs_dim,
                meta.joint_critic_width(),
                meta.head,
                ad,
            )?;
            let optim = ppo::optimizer(&cfg.ppo);
            let fused = cfg.trains_fused().then(|| FusedPpo::new(&model, meta));
            let fused = fused
                .flatten()
                .map(|f| f.with_transition(cfg.transition.weight));
            if fused.is_none() && !cfg.transition.is_off() {
                return Err(TrainError::Config {
                    field: "transition.weight".into(),
                    message: "the transition head trains with the fused learner: PPO on the CPU with dense, layer-norm and residual blocks (no GRU, attention or GELU)".into(),
                });
            }
            Ok(match fused {
                Some(f) => Box::new(FusedLearner {
                    fused: Box::new(f),
                    model,
                    optim,
                }),
                None => Box::new(BurnPpo { model, optim }),
            })
        }
        Algo::Ddqn => {
            let Head::Categorical(k) = meta.head else {
                unreachable!("DDQN's head is categorical")
            };
            let online = QNetwork::new(&meta.spec, obs_dim, k, ad)?;
            Ok(Box::new(Ddqn {
                target: online.valid(),
                online,
                optim: ddqn::optimizer(&cfg.ddqn),
                replay: Box::new(Replay::new(cfg.ddqn.buffer, obs_dim * meta.spec.window)),
                device: device.clone(),
            }))
        }
    }
}

/// burn's optimiser state in `optim.bin`.
const OPTIMIZER: &str = "optim.bin";
/// The fused learner's Adam moments, beside burn's `optim.bin`.
const FUSED_OPTIMIZER: &str = "fused-optim.json";

fn save_optimizer(ck: &Path, optim: &ModuleOptimizer) -> Result<(), TrainError> {
    let path = ck.join(OPTIMIZER);
    let bytes = optim
        .into_bytes()
        .map_err(|e| TrainError::io(&path, std::io::Error::other(format!("{e:?}"))))?;
    crate::rundir::write_atomic(&path, &bytes)
}

fn restore_optimizer(ck: &Path, optim: &mut ModuleOptimizer) -> Result<(), TrainError> {
    let path = ck.join(OPTIMIZER);
    let bytes = std::fs::read(&path).map_err(|e| TrainError::io(&path, e))?;
    *optim = optim
        .clone()
        .from_bytes(burn::tensor::Bytes::from_bytes_vec(bytes))
        .map_err(|e| TrainError::Corrupt {
            path: path.display().to_string(),
            message: format!("{e:?}"),
        })?;
    Ok(())
}

fn wrong_algorithm(ck: &Path) -> TrainError {
    TrainError::Corrupt {
        path: ck.display().to_string(),
        message: "the checkpoint's algorithm differs from the config's".into(),
    }
}

/// PPO through burn's autodiff: any network, any device.
struct BurnPpo {
    model: ActorCritic,
    optim: ModuleOptimizer,
}

impl Learner for BurnPpo {
    fn update(&mut self, cfg: &TrainConfig, x: Experience, rec: &mut UpdateRecord) {
        let policy = Policy {
            meta: x.meta.clone(),
            model: Model::Ppo(self.model.valid()),
            device: x.device.clone(),
        };
        let rollout = collect(x.venv, &policy, x.norm, cfg.ppo.n_steps, x.rng);
        let (m, stats) = ppo::update(
            self.model.clone(),
            &mut self.optim,
            &cfg.ppo,
            &rollout,
            x.weights,
            x.rng,
        );
        self.model = m;
        rec.set_ppo(&stats);
    }

    fn inference(&self) -> Model {
        Model::Ppo(self.model.valid())
    }

    fn save(&self, ck: &Path, _current: &Policy) -> Result<(), TrainError> {
        save_optimizer(ck, &self.optim)
    }

    fn restore(&mut self, ck: &Path, saved: Model, _meta: &PolicyMeta) -> Result<(), TrainError> {
        let Model::Ppo(m) = saved else {
            return Err(wrong_algorithm(ck));
        };
        self.model = m.train();
        restore_optimizer(ck, &mut self.optim)
    }

    fn align(
        &mut self,
        demos: &Demonstrations,
        cfg: &AlignmentConfig,
        meta: &PolicyMeta,
        rng: &mut SmallRng,
    ) -> (f64, f64) {
        let (m, before, after) = clone_policy(self.model.clone(), demos, cfg, meta.head, rng);
        self.model = m;
        (before, after)
    }
}

/// PPO for plain MLPs on the CPU without autodiff ([`crate::fused`]); the
/// burn model only mirrors its weights, so everything downstream sees one
/// kind of policy.
struct FusedLearner {
    fused: Box<FusedPpo>,
    model: ActorCritic,
    /// burn's optimiser, unused while fused but kept in checkpoints so a
    /// run can resume with either learner.
    optim: ModuleOptimizer,
}

impl Learner for FusedLearner {
    fn update(&mut self, cfg: &TrainConfig, x: Experience, rec: &mut UpdateRecord) {
        let rollout = collect(x.venv, &*self.fused, x.norm, cfg.ppo.n_steps, x.rng);
        let stats = self.fused.update(&cfg.ppo, &rollout, x.weights, x.rng);
        self.fused.write_into(&mut self.model);
        rec.set_ppo(&stats);
        if let Some((error, still)) = self.fused.transition_error() {
            rec.transition_error = Some(error);
            rec.transition_no_change = Some(still);
        }
    }

    fn inference(&self) -> Model {
        Model::Ppo(self.model.valid())
    }

    fn save(&self, ck: &Path, _current: &Policy) -> Result<(), TrainError> {
        let path = ck.join(FUSED_OPTIMIZER);
        let text = serde_json::to_string(self.fused.optimizer())
            .map_err(|e| TrainError::io(&path, std::io::Error::other(e)))?;
        crate::rundir::write_atomic(&path, text.as_bytes())?;
        save_optimizer(ck, &self.optim)
    }

    fn restore(&mut self, ck: &Path, saved: Model, meta: &PolicyMeta) -> Result<(), TrainError> {
        let Model::Ppo(m) = saved else {
            return Err(wrong_algorithm(ck));
        };
        self.model = m.train();
        let weight = self.fused.transition_weight();
        *self.fused = FusedPpo::new(&self.model, meta)
            .ok_or_else(|| wrong_algorithm(ck))?
            .with_transition(weight);
        restore_fused_optimizer(ck, &mut self.fused)?;
        restore_optimizer(ck, &mut self.optim)
    }

    fn align(
        &mut self,
        demos: &Demonstrations,
        cfg: &AlignmentConfig,
        meta: &PolicyMeta,
        rng: &mut SmallRng,
    ) -> (f64, f64) {
        let (m, before, after) = clone_policy(self.model.clone(), demos, cfg, meta.head, rng);
        self.model = m;
        // The same network as before, so the fused twin always exists.
        if let Some(f) = FusedPpo::new(&self.model, meta) {
            self.fused.take_weights(f);
        }
        (before, after)
    }
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

/// Double DQN with a replay buffer and a target network. Its replay buffer
/// is not checkpointed: a resumed run refills it.
struct Ddqn {
    online: QNetwork,
    target: QNetwork,
    optim: ModuleOptimizer,
    replay: Box<Replay>,
    device: Device,
}

/// Running sums of the DDQN losses over an update's gradient steps.
#[derive(Default)]
struct LossSums {
    total: (f64, usize),
    static_: (f64, usize),
    dynamic: (f64, usize),
}

impl LossSums {
    fn add(&mut self, stats: &ddqn::DdqnStats) {
        let add = |acc: &mut (f64, usize), v: f64| *acc = (acc.0 + v, acc.1 + 1);
        add(&mut self.total, stats.loss);
        if let Some(v) = stats.loss_static {
            add(&mut self.static_, v);
        }
        if let Some(v) = stats.loss_dynamic {
            add(&mut self.dynamic, v);
        }
    }

    fn mean((sum, n): (f64, usize)) -> Option<f64> {
        (n > 0).then(|| sum / n as f64)
    }
}

impl Learner for Ddqn {
    fn update(&mut self, cfg: &TrainConfig, x: Experience, rec: &mut UpdateRecord) {
        let d = &cfg.ddqn;
        let n = x.venv.len();
        let width = x.meta.obs_dim * x.meta.spec.window;
        let sources = x.venv.sources();
        let mut env_steps = x.env_steps;
        let mut sums = LossSums::default();
        // One update is `n_steps` decisions of every environment, as PPO's.
        for _ in 0..cfg.ppo.n_steps {
            let policy = Policy {
                meta: x.meta.clone(),
                model: Model::Ddqn(self.online.valid()),
                device: x.device.clone(),
            };
            let obs = x.venv.current().to_vec();
            let acts = policy.act(&obs, n, true, d.epsilon(env_steps), x.rng);
            let actions: Vec<f64> = acts.iter().map(|a| a.env_action).collect();
            let before = env_steps / d.target_every.max(1);
            let (rew, done) = x.venv.step(&actions, x.norm, true);
            let next = x.venv.current();
            for i in 0..n {
                // A finished episode's next window is the new episode's;
                // `done` masks it out of the target.
                let row = i * width..(i + 1) * width;
                self.replay.push(
                    &obs[row.clone()],
                    acts[i].raw,
                    rew[i],
                    &next[row],
                    done[i],
                    sources[i],
                );
            }
            env_steps += n;
            if self.replay.len() >= d.learning_starts.max(d.batch_size) {
                for _ in 0..d.gradient_steps {
                    let (m, stats) = ddqn::train_step(
                        self.online.clone(),
                        &self.target,
                        &mut self.optim,
                        d,
                        &self.replay,
                        x.weights,
                        x.rng,
                    );
                    self.online = m;
                    sums.add(&stats);
                }
            }
            if env_steps / d.target_every.max(1) != before {
                self.target = self.online.valid();
            }
        }
        rec.loss = LossSums::mean(sums.total).unwrap_or(0.0);
        rec.epsilon = Some(d.epsilon(x.env_steps));
        rec.loss_static = LossSums::mean(sums.static_);
        rec.loss_dynamic = LossSums::mean(sums.dynamic);
    }

    fn inference(&self) -> Model {
        Model::Ddqn(self.online.valid())
    }

    fn save(&self, ck: &Path, current: &Policy) -> Result<(), TrainError> {
        Policy {
            meta: current.meta.clone(),
            model: Model::Ddqn(self.target.clone()),
            device: self.device.clone(),
        }
        .save(ck, "target")?;
        save_optimizer(ck, &self.optim)
    }

    fn restore(&mut self, ck: &Path, saved: Model, _meta: &PolicyMeta) -> Result<(), TrainError> {
        let Model::Ddqn(m) = saved else {
            return Err(wrong_algorithm(ck));
        };
        let Model::Ddqn(target) = Policy::load(ck, "target", &self.device)?.model else {
            return Err(TrainError::Corrupt {
                path: ck.join("target.json").display().to_string(),
                message: "not a DDQN network".into(),
            });
        };
        self.online = m.train();
        self.target = target;
        restore_optimizer(ck, &mut self.optim)
    }
}
