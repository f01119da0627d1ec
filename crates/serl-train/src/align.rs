//! Alignment before RL: the executor first imitates the plan's tracking
//! controller (behaviour cloning), then PPO fine-tunes it.
//!
//! The planner/executor systems this follows align the low-level policy
//! with the high-level plan before reinforcement learning, so that RL
//! starts from a policy that already does what the plan says and only
//! learns where to depart from it. Here the controller is exact: at every
//! decision it trades what brings the inventory onto the plan at the next
//! one ([`serl_design::PlanModule::tracking_share`]). [`demonstrations`]
//! plays it in the training environments (the observation normaliser
//! learns from these steps as from any), and [`clone_policy`] fits the
//! actor to its actions: the Gaussian's mean by squared error, or a
//! categorical head by cross-entropy, with a fresh Adam.

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::{activation, Tensor, TensorData};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use serl_design::PlanModule;

use crate::net::{ActorCritic, Head};
use crate::normalize::RunningNorm;
use crate::policy::{Pace, PolicyMeta, Squash};
use crate::rollout::VecEnv;
use crate::tensors::indices;
use crate::TrainError;

/// `[train.alignment]`: behaviour cloning of the plan before PPO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlignmentConfig {
    /// Environment steps of demonstrations (over all environments); 0
    /// switches alignment off.
    pub steps: usize,
    /// Passes over the demonstrations.
    pub epochs: usize,
    /// Rows per gradient step.
    pub batch_size: usize,
    /// Adam's learning rate.
    pub learning_rate: f64,
}

impl Default for AlignmentConfig {
    fn default() -> Self {
        AlignmentConfig {
            steps: 0,
            epochs: 20,
            batch_size: 256,
            learning_rate: 1e-3,
        }
    }
}

impl AlignmentConfig {
    /// Whether alignment is off (and left out of saved configs).
    pub fn is_off(&self) -> bool {
        self.steps == 0
    }

    pub(crate) fn check(&self, has_plan: bool, team: bool) -> Result<(), TrainError> {
        let bad = |field: &str, message: &str| TrainError::Config {
            field: format!("alignment.{field}"),
            message: message.into(),
        };
        if self.is_off() {
            return Ok(());
        }
        if !has_plan {
            return Err(bad("steps", "alignment imitates the plan's tracking controller: give [train] plan (or a design with a plan module)"));
        }
        if team {
            return Err(bad("steps", "a team's members share one order and have no plan each: alignment trains one agent"));
        }
        if self.epochs == 0 || self.batch_size == 0 {
            return Err(bad("epochs", "epochs and batch_size must be at least 1"));
        }
        if !(self.learning_rate > 0.0 && self.learning_rate < 1.0) {
            return Err(bad("learning_rate", "must be in (0, 1)"));
        }
        Ok(())
    }
}

/// What alignment did: written to the run directory as `alignment.json`
/// and into the training report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlignmentStats {
    /// Demonstration rows (environment steps) collected.
    pub demonstrations: usize,
    /// Mean PA, bps, of the tracking controller's finished episodes: the
    /// plan followed exactly.
    pub tracking_pa: Option<f64>,
    /// The cloning loss over the demonstrations before the first step and
    /// after the last epoch.
    pub loss_before: f64,
    /// See `loss_before`.
    pub loss_after: f64,
}

/// The tracking controller's decisions, as network input rows and the
/// actions the actor should output. Public because [`crate::Learner`]
/// fits an actor to them; only alignment (`run.rs`) makes them.
pub struct Demonstrations {
    pub(crate) rows: Vec<f32>,
    pub(crate) width: usize,
    pub(crate) targets: Vec<f32>,
    pub(crate) tracking_pa: Option<f64>,
}

/// Plays the plan's tracking controller: `steps / 4` environment steps
/// for the observation normaliser to learn the scale from, then `steps`
/// recorded ones (an order whose session is missing is stepped, not
/// recorded).
pub(crate) fn demonstrations(
    venv: &mut VecEnv,
    norm: &mut RunningNorm,
    meta: &PolicyMeta,
    plan: &PlanModule,
    steps: usize,
) -> Demonstrations {
    let n = venv.len();
    let width = venv.current().len() / n.max(1);
    let mut d = Demonstrations {
        rows: Vec::with_capacity(steps * width),
        width,
        targets: Vec::with_capacity(steps),
        tracking_pa: None,
    };
    let (mut pa_sum, mut episodes) = (0.0, 0usize);
    let mut warmup = steps / 4;
    // Environments whose orders all lack a session record nothing: give up
    // after four times the steps asked for.
    let mut budget = 4 * steps + warmup;
    while d.targets.len() < steps && budget > 0 {
        budget = budget.saturating_sub(n);
        let mut actions = Vec::with_capacity(n);
        let record = warmup == 0;
        let rows = venv.current().to_vec();
        for (i, progress) in venv.progress().into_iter().enumerate() {
            let Some((remaining, left, total)) = progress else {
                actions.push((0.0, 0));
                continue;
            };
            let share = plan.tracking_share(remaining, left, total);
            let (raw, action, placement) = demonstrated_action(meta, share, remaining, left);
            if record {
                d.targets.push(raw);
                d.rows.extend_from_slice(&rows[i * width..(i + 1) * width]);
            }
            actions.push((action, placement));
        }
        warmup = warmup.saturating_sub(n);
        venv.step_placed(&actions, norm, true);
        for e in venv.take_finished() {
            pa_sum += e.pa;
            episodes += 1;
        }
    }
    d.tracking_pa = (episodes > 0).then(|| pa_sum / episodes as f64);
    d
}

/// The network output that trades `share` of the order now (with
/// `remaining` of it held over `left` decisions), the environment's action
/// for it and its placement number: what the actor is taught.
fn demonstrated_action(
    meta: &PolicyMeta,
    share: f64,
    remaining: f64,
    left: usize,
) -> (f32, f64, u8) {
    let action = match meta.pace {
        Pace::Absolute => share,
        // The tilt that trades `share`: (1 + max·a) × the even share.
        Pace::Tilt(max) if remaining > 0.0 && left > 1 => {
            ((share * left as f64 / remaining - 1.0) / max).clamp(-1.0, 1.0)
        }
        Pace::Tilt(_) => 0.0,
    };
    match meta.head {
        Head::Gaussian => {
            let raw = match (meta.pace, meta.squash) {
                (Pace::Absolute, Squash::Sigmoid) => {
                    let p = action.clamp(1e-4, 1.0 - 1e-4);
                    (p / (1.0 - p)).ln()
                }
                (Pace::Absolute, Squash::Tanh) => {
                    (2.0 * action - 1.0).clamp(-0.9999, 0.9999).atanh()
                }
                (Pace::Tilt(_), Squash::Tanh) => action.clamp(-0.9999, 0.9999).atanh(),
                _ => action,
            };
            (raw as f32, action, 0)
        }
        Head::Categorical(_) => {
            // The nearest discrete action, crossing (placement 0).
            let places = meta.placements.len().max(1);
            let nearest = meta
                .discrete
                .iter()
                .enumerate()
                .min_by(|a, b| (a.1 - action).abs().total_cmp(&(b.1 - action).abs()))
                .map_or(0, |(i, _)| i);
            let fraction = meta.discrete.get(nearest).copied().unwrap_or(0.0);
            ((nearest * places) as f32, fraction, 0)
        }
    }
}

/// Fits `model`'s actor to the demonstrations; returns it with the loss
/// before and after.
pub(crate) fn clone_policy(
    model: ActorCritic,
    demos: &Demonstrations,
    cfg: &AlignmentConfig,
    head: Head,
    rng: &mut SmallRng,
) -> (ActorCritic, f64, f64) {
    let device = model.value_head.weight.val().device();
    let n = demos.targets.len();
    if n == 0 {
        return (model, 0.0, 0.0);
    }
    let all: Vec<usize> = (0..n).collect();
    let loss_of = |m: &ActorCritic, rows: &[usize]| {
        let b = rows.len();
        let x: Vec<f32> = rows
            .iter()
            .flat_map(|&i| {
                demos.rows[i * demos.width..(i + 1) * demos.width]
                    .iter()
                    .copied()
            })
            .collect();
        let y: Vec<f32> = rows.iter().map(|&i| demos.targets[i]).collect();
        let xt = Tensor::<2>::from_data(TensorData::new(x, [b, demos.width]), &device);
        let out = m.policy(xt);
        match head {
            Head::Gaussian => {
                let yt = Tensor::<1>::from_data(TensorData::new(y, [b]), &device);
                (out.reshape([b]) - yt).powi_scalar(2).mean()
            }
            Head::Categorical(_) => activation::log_softmax(out, 1)
                .gather(1, indices(&y, &device))
                .mean()
                .neg(),
        }
    };
    let scalar = |t: Tensor<1>| t.into_scalar::<f32>() as f64;
    let before = scalar(loss_of(&model.valid(), &all));
    let mut optim = crate::ppo::optimizer(&crate::ppo::PpoConfig::default());
    let mut model = model;
    let mut order = all.clone();
    for _ in 0..cfg.epochs {
        order.shuffle(rng);
        for rows in order.chunks(cfg.batch_size) {
            let loss = loss_of(&model, rows);
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(cfg.learning_rate, model, grads);
        }
    }
    let after = scalar(loss_of(&model.valid(), &all));
    (model, before, after)
}
