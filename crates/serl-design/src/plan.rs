//! The plan module: an intraday execution plan written by the designer and
//! followed, and improved on, by the RL executor (SE-RL's seventh module;
//! the planner of the planner/executor systems, `docs/hierarchy.md`).
//!
//! A plan is a target inventory curve: the share of the order that should
//! still be held at evenly spaced checkpoints of the window (the
//! subgoals; 13 checkpoints are the half hours of a full session), joined
//! by straight lines. The designer writes it as a named shape or as the
//! curve itself:
//!
//! ```
//! use serl_design::{Module, ModuleKind};
//!
//! let m = Module::parse(ModuleKind::Plan, r#"{"shape": "u_shaped", "strength": 0.6}"#).unwrap();
//! let Module::Plan(plan) = m else { unreachable!() };
//! assert_eq!(plan.remaining()[0], 1.0);
//! assert_eq!(*plan.remaining().last().unwrap(), 0.0);
//!
//! let e = Module::parse(ModuleKind::Plan, r#"{"remaining": [1.0, 0.2, 0.5, 0.0]}"#).unwrap_err();
//! assert!(e.to_string().contains("remaining[2]"), "{e}");
//! ```
//!
//! What it compiles into:
//! - two state features ([`PlanModule::features`]), programs of the
//!   expression language like any designed feature, so the executor sees
//!   the plan in training and in every backtest: `plan_gap`, the inventory
//!   left minus the plan's now, and `plan_ahead`, the inventory left minus
//!   the plan's at the next checkpoint's distance (what tracking would
//!   trade before then);
//! - two reward variables ([`PlannedReward`]): `plan_gap` after the step
//!   and `subgoal_hit`, 1 on a step that reaches a checkpoint within the
//!   plan's tolerance;
//! - the tracking controller's share ([`PlanModule::tracking_share`]), the
//!   target of the behaviour cloning that aligns the executor with the
//!   plan before PPO.

use serde::{Deserialize, Serialize};
use serl_env::{Reward, StepInfo};

use crate::features::FeatureDef;
use crate::kind::{err, in_range, ModuleError, ModuleKind};

/// Fewest and most checkpoints (segments) a plan may have.
pub const MIN_CHECKPOINTS: usize = 2;
/// See [`MIN_CHECKPOINTS`].
pub const MAX_CHECKPOINTS: usize = 26;

/// Most a plan may trade in one segment, in multiples of the even pace
/// (1/checkpoints of the order). The participation bound: with orders of
/// 1% of the daily volume and the environment's 10% cap, the cap binds
/// near 7.7× the even pace in an average half hour; 4× leaves room for a
/// quiet one.
pub const MAX_RATE: f64 = 4.0;

/// The shapes the builtin designer proposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanShape {
    /// Even pace (TWAP's schedule).
    Linear,
    /// Trade early, as Almgren–Chriss does under risk aversion:
    /// `sinh(κ(1−u)) / sinh(κ)`, κ = 4·strength.
    FrontLoaded,
    /// The mirror: hold early, trade late.
    BackLoaded,
    /// Trade at the open and the close, as intraday volume does: pace
    /// `1 + strength·(3(2u−1)² − 1)`, which follows the volume smile.
    UShaped,
}

impl PlanShape {
    /// Every shape, in the order the builtin designer tries them.
    pub const ALL: [PlanShape; 4] = [
        PlanShape::Linear,
        PlanShape::FrontLoaded,
        PlanShape::BackLoaded,
        PlanShape::UShaped,
    ];

    /// The share of the order still held at elapsed share `u` of the window.
    fn remaining(self, strength: f64, u: f64) -> f64 {
        let k = 4.0 * strength.max(1e-6);
        match self {
            PlanShape::Linear => 1.0 - u,
            PlanShape::FrontLoaded => (k * (1.0 - u)).sinh() / k.sinh(),
            PlanShape::BackLoaded => 1.0 - (k * u).sinh() / k.sinh(),
            PlanShape::UShaped => {
                let s = strength.clamp(0.0, 1.0);
                1.0 - u - s * (((2.0 * u - 1.0).powi(3) + 1.0) / 2.0 - u)
            }
        }
    }
}

/// A validated plan: the share of the order to hold at each checkpoint,
/// from 1 at the start to 0 at the end, never rising.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "PlanText", into = "PlanText")]
pub struct PlanModule {
    shape: Option<(PlanShape, f64)>,
    remaining: Vec<f64>,
    tolerance: f64,
}

/// The plan as a designer writes it: a shape (with its strength and
/// checkpoints) or the curve itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanText {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shape: Option<PlanShape>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    strength: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checkpoints: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    remaining: Option<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tolerance: Option<f64>,
}

/// Default tolerance of a subgoal, as a share of the order.
const TOLERANCE: f64 = 0.02;
/// Default checkpoints: the half hours of a full session.
const CHECKPOINTS: usize = 13;

impl TryFrom<PlanText> for PlanModule {
    type Error = ModuleError;
    fn try_from(t: PlanText) -> Result<Self, ModuleError> {
        let kind = ModuleKind::Plan;
        let tolerance = t.tolerance.unwrap_or(TOLERANCE);
        in_range(kind, "tolerance", tolerance, 0.0, 0.5)?;
        match (t.shape, t.remaining) {
            (Some(_), Some(_)) => Err(err(kind, "give `shape` or `remaining`, not both")),
            (None, None) => Err(err(
                kind,
                "no plan; give `shape` (linear, front_loaded, back_loaded, u_shaped) or `remaining` (the share held at each checkpoint, 1 down to 0)",
            )),
            (Some(shape), None) => {
                let strength = t.strength.unwrap_or(0.5);
                in_range(kind, "strength", strength, 0.0, 1.0)?;
                let n = t.checkpoints.unwrap_or(CHECKPOINTS);
                in_range(
                    kind,
                    "checkpoints",
                    n as f64,
                    MIN_CHECKPOINTS as f64,
                    MAX_CHECKPOINTS as f64,
                )?;
                PlanModule::shaped(shape, strength, n, tolerance)
            }
            (None, Some(remaining)) => {
                if t.strength.is_some() || t.checkpoints.is_some() {
                    return Err(err(
                        kind,
                        "`strength` and `checkpoints` belong to a `shape`; a `remaining` curve has its own",
                    ));
                }
                PlanModule::curve(remaining, tolerance)
            }
        }
    }
}

impl From<PlanModule> for PlanText {
    fn from(p: PlanModule) -> Self {
        match p.shape {
            Some((shape, strength)) => PlanText {
                shape: Some(shape),
                strength: Some(strength),
                checkpoints: Some(p.remaining.len() - 1),
                remaining: None,
                tolerance: Some(p.tolerance),
            },
            None => PlanText {
                shape: None,
                strength: None,
                checkpoints: None,
                remaining: Some(p.remaining),
                tolerance: Some(p.tolerance),
            },
        }
    }
}

impl PlanModule {
    /// The plan of `shape` at `strength` over `checkpoints` segments.
    pub fn shaped(
        shape: PlanShape,
        strength: f64,
        checkpoints: usize,
        tolerance: f64,
    ) -> Result<Self, ModuleError> {
        let n = checkpoints as f64;
        let mut remaining: Vec<f64> = (0..=checkpoints)
            .map(|k| shape.remaining(strength, k as f64 / n).clamp(0.0, 1.0))
            .collect();
        remaining[0] = 1.0;
        remaining[checkpoints] = 0.0;
        let mut p = PlanModule::curve(remaining, tolerance)?;
        p.shape = Some((shape, strength));
        Ok(p)
    }

    /// The plan that holds `remaining[k]` of the order at checkpoint `k`,
    /// checked: 1 at the start, 0 at the end, never rising, and no
    /// segment faster than [`MAX_RATE`] times the even pace.
    pub fn curve(remaining: Vec<f64>, tolerance: f64) -> Result<Self, ModuleError> {
        let kind = ModuleKind::Plan;
        let n = remaining.len().saturating_sub(1);
        if !(MIN_CHECKPOINTS..=MAX_CHECKPOINTS).contains(&n) {
            return Err(err(
                kind,
                format!(
                    "remaining has {} values; give {} to {} (the start, then each checkpoint)",
                    remaining.len(),
                    MIN_CHECKPOINTS + 1,
                    MAX_CHECKPOINTS + 1
                ),
            ));
        }
        for (k, &v) in remaining.iter().enumerate() {
            in_range(kind, &format!("remaining[{k}]"), v, 0.0, 1.0)?;
        }
        if remaining[0] != 1.0 || remaining[n] != 0.0 {
            return Err(err(
                kind,
                format!(
                    "remaining must start at 1 (the whole order) and end at 0; it runs from {} to {}",
                    remaining[0], remaining[n]
                ),
            ));
        }
        let cap = MAX_RATE / n as f64;
        for k in 1..=n {
            let traded = remaining[k - 1] - remaining[k];
            if traded < 0.0 {
                return Err(err(kind, format!("remaining[{k}] = {} rises above remaining[{}] = {}: a plan never buys back", remaining[k], k - 1, remaining[k - 1])));
            }
            if traded > cap + 1e-12 {
                return Err(err(kind, format!("remaining[{k}]: the segment trades {traded:.3} of the order, over the participation bound of {MAX_RATE}× the even pace ({cap:.3})")));
            }
        }
        Ok(PlanModule {
            shape: None,
            remaining,
            tolerance,
        })
    }

    /// The default plan of the "plan" switch when the design has none:
    /// even pace over 13 checkpoints.
    pub fn linear() -> Self {
        PlanModule::shaped(PlanShape::Linear, 0.5, CHECKPOINTS, TOLERANCE)
            .expect("the linear plan is valid")
    }

    /// The share held at each checkpoint, 1 down to 0.
    pub fn remaining(&self) -> &[f64] {
        &self.remaining
    }

    /// The shape and strength it was made from, if any.
    pub fn shape(&self) -> Option<(PlanShape, f64)> {
        self.shape
    }

    /// Segments between checkpoints.
    pub fn checkpoints(&self) -> usize {
        self.remaining.len() - 1
    }

    /// The plan's share of the order still held at elapsed share `u`
    /// (clamped to [0, 1]), linear between checkpoints.
    pub fn target(&self, u: f64) -> f64 {
        let n = self.checkpoints() as f64;
        let x = u.clamp(0.0, 1.0) * n;
        let k = (x.floor() as usize).min(self.checkpoints() - 1);
        let f = x - k as f64;
        self.remaining[k] * (1.0 - f) + self.remaining[k + 1] * f
    }

    /// The share of the order the tracking controller trades now, with
    /// `remaining` of it held and `steps_left` of `steps` decisions to go:
    /// what brings the inventory onto the plan at the next decision.
    pub fn tracking_share(&self, remaining: f64, steps_left: usize, steps: usize) -> f64 {
        if steps_left <= 1 {
            return remaining.max(0.0);
        }
        let after = 1.0 - (steps_left - 1) as f64 / steps.max(1) as f64;
        (remaining - self.target(after)).clamp(0.0, remaining.max(0.0))
    }

    /// The two state features the plan adds, as programs over the
    /// observation's `time_left` and `inventory_left`: the plan is a sum
    /// of hinges `max(u − uₖ, 0)`, which is its piecewise-linear curve.
    pub fn features(&self) -> Vec<FeatureDef> {
        let step = 1.0 / self.checkpoints() as f64;
        let curve = |u: &str| self.program_at(u);
        vec![
            FeatureDef {
                name: "plan_gap".into(),
                program: format!("let u = 1 - time_left in inventory_left - ({})", curve("u")),
            },
            FeatureDef {
                name: "plan_ahead".into(),
                program: format!(
                    "let u = min(1 - time_left + {step}, 1) in inventory_left - ({})",
                    curve("u")
                ),
            },
        ]
    }

    /// The curve at variable `u` as a sum of hinges, summed as a balanced
    /// tree so that the program stays within the language's depth bound.
    fn program_at(&self, u: &str) -> String {
        let n = self.checkpoints();
        let step = 1.0 / n as f64;
        let slope = |k: usize| (self.remaining[k + 1] - self.remaining[k]) / step;
        let mut terms = vec![format!("1 + ({}) * {u}", slope(0))];
        for k in 1..n {
            let bend = slope(k) - slope(k - 1);
            if bend != 0.0 {
                terms.push(format!("({bend}) * max({u} - {}, 0)", k as f64 * step));
            }
        }
        balanced_sum(&terms)
    }

    /// The plan's reward variables at step `s`: `plan_gap` after the step,
    /// and whether the step reached a checkpoint within tolerance.
    pub fn step_vars(&self, s: &StepInfo) -> (f64, bool) {
        let after = 1.0 - s.time_left;
        let gap = s.inventory_left - self.target(after);
        let n = self.checkpoints() as f64;
        let before = (after - 1.0 / s.steps.max(1) as f64).max(0.0);
        // Checkpoint indices reached: ⌊after·n⌋ passes one that ⌊before·n⌋
        // had not (the small slack absorbs the rounding of 1/steps).
        let reached = ((after * n + 1e-9).floor() as i64) > ((before * n + 1e-9).floor() as i64);
        (gap, reached && gap.abs() <= self.tolerance)
    }
}

/// `(a + b) + (c + d)`: the terms summed with logarithmic nesting.
fn balanced_sum(terms: &[String]) -> String {
    match terms {
        [] => "0".into(),
        [one] => one.clone(),
        _ => {
            let (a, b) = terms.split_at(terms.len() / 2);
            format!("({}) + ({})", balanced_sum(a), balanced_sum(b))
        }
    }
}

/// A reward with the plan's variables filled in: the step's `plan_gap`
/// and `subgoal_hit` set from the plan, then the inner reward.
pub struct PlannedReward {
    plan: PlanModule,
    inner: std::sync::Arc<dyn Reward>,
}

impl PlannedReward {
    /// `inner` reading `plan`'s variables.
    pub fn new(plan: PlanModule, inner: std::sync::Arc<dyn Reward>) -> Self {
        PlannedReward { plan, inner }
    }
}

impl Reward for PlannedReward {
    fn reward(&self, s: &StepInfo) -> f64 {
        let (gap, hit) = self.plan.step_vars(s);
        let s = StepInfo {
            plan_gap: gap,
            subgoal_hit: if hit { 1.0 } else { 0.0 },
            ..*s
        };
        self.inner.reward(&s)
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn repaired(&self) -> u64 {
        self.inner.repaired()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::check_features;

    #[test]
    fn every_builtin_shape_is_a_valid_plan() {
        for shape in PlanShape::ALL {
            for strength in [0.0, 0.5, 1.0] {
                let p = PlanModule::shaped(shape, strength, 13, 0.02).unwrap();
                assert_eq!(p.remaining().len(), 14);
            }
        }
        let front = PlanModule::shaped(PlanShape::FrontLoaded, 0.5, 13, 0.02).unwrap();
        let back = PlanModule::shaped(PlanShape::BackLoaded, 0.5, 13, 0.02).unwrap();
        assert!(front.target(0.5) < 0.5 && back.target(0.5) > 0.5);
    }

    #[test]
    fn the_feature_programs_compute_the_curve() {
        let p = PlanModule::shaped(PlanShape::UShaped, 0.8, 13, 0.02).unwrap();
        let set = check_features(&p.features()).unwrap();
        let wavy: Vec<f64> = (0..=MAX_CHECKPOINTS)
            .map(|k| {
                let u = k as f64 / MAX_CHECKPOINTS as f64;
                1.0 - u - 0.02 * (k % 2) as f64 * (k < MAX_CHECKPOINTS) as u8 as f64
            })
            .collect();
        let most = PlanModule::curve(wavy, 0.02).unwrap();
        check_features(&most.features()).expect("the most checkpoints stay within the bounds");
        let mut states = set.states();
        let mut obs = vec![0f32; serl_env::OBS_DIM];
        let mut out = [0f64; 2];
        for (time_left, inv) in [(1.0, 1.0), (0.63, 0.5), (0.1, 0.05), (0.0, 0.0)] {
            obs[0] = time_left as f32;
            obs[1] = inv as f32;
            set.eval_into(&mut states, &obs, 0.0, &mut out);
            let u = 1.0 - time_left;
            let gap = inv - p.target(u);
            let ahead = inv - p.target((u + 1.0 / 13.0).min(1.0));
            assert!(
                (out[0] - gap).abs() < 1e-6,
                "{time_left}: {} vs {gap}",
                out[0]
            );
            assert!(
                (out[1] - ahead).abs() < 1e-6,
                "{time_left}: {} vs {ahead}",
                out[1]
            );
        }
    }

    #[test]
    fn tracking_lands_on_the_plan_and_hits_each_subgoal() {
        let p = PlanModule::shaped(PlanShape::FrontLoaded, 0.7, 13, 0.02).unwrap();
        let steps = 13;
        let mut remaining = 1.0;
        for k in 0..steps {
            let share = p.tracking_share(remaining, steps - k, steps);
            remaining -= share;
            let s = StepInfo {
                time_left: 1.0 - (k + 1) as f64 / steps as f64,
                inventory_left: remaining,
                steps,
                ..Default::default()
            };
            let (gap, hit) = p.step_vars(&s);
            assert!(gap.abs() < 1e-9 && hit, "step {k}: gap {gap}");
        }
        assert!(remaining.abs() < 1e-12);
        let behind = StepInfo {
            time_left: 0.5,
            inventory_left: 0.9,
            steps: 2,
            ..Default::default()
        };
        assert!(!p.step_vars(&behind).1, "off plan misses");
    }

    #[test]
    fn bad_plans_are_refused_with_the_value_at_fault() {
        let e = |text: &str| {
            crate::Module::parse(ModuleKind::Plan, text)
                .unwrap_err()
                .to_string()
        };
        assert!(e(r#"{"remaining": [1, 0.5, 0.6, 0]}"#).contains("remaining[2]"));
        assert!(e(r#"{"remaining": [0.9, 0.5, 0]}"#).contains("start at 1"));
        assert!(e(r#"{"remaining": [1, 0.5, 0.1]}"#).contains("end at 0"));
        assert!(e(r#"{"remaining": [1, 1, 1, 1, 1, 1, 1, 1, 0]}"#).contains("participation"));
        assert!(e(r#"{"shape": "spiral"}"#).contains("invalid JSON"));
        assert!(e(r#"{"shape": "linear", "strength": 3}"#).contains("strength"));
        assert!(e(r#"{}"#).contains("no plan"));
    }
}
