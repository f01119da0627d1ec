//! A design's smoke test: its reward and state features on a short real
//! episode, before any training is spent on it.

use serde::{Deserialize, Serialize};

use crate::terms::TermStats;
use serl_env::obs::{DESIGN_DIM, OBS_DIM};
use serl_env::{
    ChildOrder, EnvConfig, Episode, ParentOrder, Placement, Reward, SessionView, StaticEnv,
};

use crate::features::FeatureSet;
use crate::kind::{ModuleError, ModuleKind};
use crate::modules::StateModule;
use crate::reward::RewardModule;
use crate::terms::TermRecorder;

/// What the smoke episode showed; part of the designer's feedback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SmokeReport {
    /// Steps the episode took.
    pub steps: usize,
    /// Smallest per-step reward.
    pub reward_min: f64,
    /// Largest per-step reward.
    pub reward_max: f64,
    /// Mean per-step reward.
    pub reward_mean: f64,
    /// NaN, ±∞ and division-by-zero values the programs produced.
    pub repaired: u64,
    /// (name, min, max) of each designed feature.
    pub features: Vec<(String, f64, f64)>,
    /// Each term of the reward's top-level sum on the same steps, so that
    /// the designer sees which part dominates or misbehaves (one term, the
    /// whole program, when it is not a sum).
    #[serde(default)]
    pub terms: Vec<TermStats>,
}

/// The magnitude an infinite value is repaired to (`serl_expr`).
const INFINITE: f64 = 1e12;

/// Largest per-step reward or feature magnitude a sane design produces.
const SANE: f64 = 1e4;

/// Plays one TWAP episode of `order` in the static environment, scoring
/// each step with the reward and computing the features. With `placing`
/// (a task whose agent places its orders) each step's share rests at the
/// touch, so that features of the resting order's queue see real values;
/// without it a feature that reads the queue is refused.
pub fn smoke_test(
    reward: &RewardModule,
    state: &StateModule,
    view: &SessionView,
    order: &ParentOrder,
    cfg: &EnvConfig,
    placing: bool,
) -> Result<SmokeReport, ModuleError> {
    state.check_task(placing)?;
    let fs = state.features.clone().with_queue_input(placing);
    let r = TermRecorder::new(reward);
    let mut states = fs.states();
    let mut env = StaticEnv::new(view, order, cfg);
    let mut obs = [0f32; DESIGN_DIM];
    let mut ext = vec![0f32; DESIGN_DIM + fs.len()];
    let mut ranges: Vec<(f64, f64)> = vec![(f64::INFINITY, f64::NEG_INFINITY); fs.len()];
    let (mut lo, mut hi, mut sum, mut n) = (f64::INFINITY, f64::NEG_INFINITY, 0.0, 0usize);
    while !env.done() {
        env.observe(&mut obs[..OBS_DIM]);
        env.queue().write(&mut obs[OBS_DIM..]);
        let signal = env.decision(&[]).signal;
        fs.extend(&mut states, &obs, signal, &mut ext);
        for (k, rg) in ranges.iter_mut().enumerate() {
            let v = ext[DESIGN_DIM + k] as f64;
            rg.0 = rg.0.min(v);
            rg.1 = rg.1.max(v);
        }
        let steps = env.steps();
        let info = env.step_order(ChildOrder {
            action: 1.0 / steps as f64,
            placement: if placing {
                Placement::Passive { ticks: 0 }
            } else {
                Placement::Cross
            },
            cross_first: 0.0,
        });
        let v = r.reward(&info);
        lo = lo.min(v);
        hi = hi.max(v);
        sum += v;
        n += 1;
    }
    let report = SmokeReport {
        steps: n,
        reward_min: lo,
        reward_max: hi,
        reward_mean: sum / n.max(1) as f64,
        repaired: r.repaired() + FeatureSet::repaired(&states),
        features: fs
            .defs()
            .iter()
            .zip(&ranges)
            .map(|(d, r)| (d.name.clone(), r.0, r.1))
            .collect(),
        terms: r.stats(),
    };
    if n == 0 {
        return Err(ModuleError {
            kind: "smoke test",
            message: "the episode had no steps".into(),
        });
    }
    if !(lo.abs() <= SANE && hi.abs() <= SANE) {
        // ±1e12 is what an infinity is repaired to: say so.
        // (A step's other terms move it a little off ±1e12.)
        let near = |v: f64| (v.abs() - INFINITE).abs() <= SANE;
        let infinite = if r.repaired() > 0 && (near(lo) || near(hi)) {
            " (±1e12 is an infinite value, clipped)"
        } else {
            ""
        };
        return Err(ModuleError {
            kind: ModuleKind::Reward.name(),
            message: format!("rewards ranged over [{lo:.3e}, {hi:.3e}]{infinite} on a TWAP episode; keep them within ±{SANE:e} (bps-scale)"),
        });
    }
    if r.repaired() as usize > n / 2 {
        return Err(ModuleError {
            kind: ModuleKind::Reward.name(),
            message: format!(
                "{} of {n} steps produced NaN, infinity or a division by zero",
                r.repaired()
            ),
        });
    }
    for (name, a, b) in &report.features {
        if !(a.abs() <= SANE * 100.0 && b.abs() <= SANE * 100.0) {
            return Err(ModuleError {
                kind: ModuleKind::State.name(),
                message: format!(
                    "feature `{name}` ranged over [{a:.3e}, {b:.3e}]; scale it to within ±1e6"
                ),
            });
        }
    }
    Ok(report)
}
