//! The environment's settings (`[env]` in configs).

use serde::{Deserialize, Serialize};

use crate::placement::FillModel;
use crate::EnvError;

/// What happens to inventory left when the window ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Terminal {
    /// Leave it unfilled; it counts in AFI.
    #[default]
    Leave,
    /// Trade it at the horizon, crossing the spread, with no participation
    /// cap: at the window's last bar in the static replay, as a market
    /// order at the window's end in the dynamic market.
    ForceLiquidate,
}

/// The benchmark price PA is measured against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Benchmark {
    /// Mean of the window's minute prices (the design brief's default).
    #[default]
    Twap,
    /// Volume-weighted mean of the window's minute prices.
    Vwap,
}

/// The action space: a fraction of the whole order to trade now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionSpace {
    /// Any a in [0, 1]; q = min(a * Q, remaining).
    Continuous,
    /// One of these fractions of Q.
    Discrete(Vec<f64>),
}

/// The environment's settings: decision cadence, action space, what
/// happens at the end of the window, the benchmark, the participation cap
/// and the default reward's penalty weights. The same settings drive the
/// static replay and the dynamic market.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvConfig {
    /// Minutes between decisions (1, 5, 30, ...).
    pub decision_minutes: u16,
    /// What an action means: a continuous fraction or an index into a
    /// table of fractions of the order.
    pub action: ActionSpace,
    /// What happens to inventory left when the window ends.
    pub terminal: Terminal,
    /// The price PA is measured against.
    pub benchmark: Benchmark,
    /// Largest share of a minute's volume a child order may take.
    pub participation_cap: f64,
    /// Weight of the per-step quadratic inventory penalty in the default
    /// reward, in bps over the episode.
    pub inventory_penalty: f64,
    /// Weight on the squared unfilled share at the end of an episode, bps.
    pub terminal_penalty: f64,
    /// How resting orders fill in the static replay (`[env.fills]`).
    pub fills: FillModel,
    /// The opportunity cost of a share left at the horizon, in bps of its
    /// price beyond crossing the half spread at the horizon's last price
    /// (docs/metrics.md: the whole-order PA). 0, the default, charges
    /// exactly the forced liquidation's price; a desk that would finish an
    /// order the next morning can charge more.
    #[serde(skip_serializing_if = "is_zero")]
    pub unfilled_cost_bps: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Default for EnvConfig {
    fn default() -> Self {
        EnvConfig {
            decision_minutes: 5,
            action: ActionSpace::Continuous,
            terminal: Terminal::Leave,
            benchmark: Benchmark::Twap,
            participation_cap: 0.1,
            inventory_penalty: 2.0,
            terminal_penalty: 50.0,
            fills: FillModel::default(),
            unfilled_cost_bps: 0.0,
        }
    }
}

impl EnvConfig {
    /// The default reward with this task's penalty weights: what backtests
    /// score episodes with, and what a training rewards without a designed
    /// reward.
    pub fn default_reward(&self) -> crate::DefaultReward {
        crate::DefaultReward {
            inventory_penalty: self.inventory_penalty,
            terminal_penalty: self.terminal_penalty,
        }
    }

    /// Checks the settings; the error names the offending field
    /// (`env.<field>`).
    pub fn validate(&self) -> Result<(), EnvError> {
        let bad = |field: &str, message: String| {
            Err(EnvError::Config {
                field: format!("env.{field}"),
                message,
            })
        };
        if self.decision_minutes == 0 {
            return bad("decision_minutes", "must be at least 1".into());
        }
        if !(self.participation_cap > 0.0 && self.participation_cap <= 1.0) {
            return bad(
                "participation_cap",
                format!("{} is not in (0, 1]", self.participation_cap),
            );
        }
        if let ActionSpace::Discrete(v) = &self.action {
            if v.is_empty() || v.iter().any(|a| !(0.0..=1.0).contains(a)) {
                return bad(
                    "action",
                    "discrete actions must be fractions in [0, 1], at least one".into(),
                );
            }
        }
        if !(self.inventory_penalty >= 0.0 && self.terminal_penalty >= 0.0) {
            return bad("inventory_penalty", "penalties must be non-negative".into());
        }
        if !(self.unfilled_cost_bps >= 0.0 && self.unfilled_cost_bps.is_finite()) {
            return bad(
                "unfilled_cost_bps",
                format!(
                    "{} must be a non-negative number of bps",
                    self.unfilled_cost_bps
                ),
            );
        }
        self.fills.validate()
    }

    /// Maps an action to a fraction of the order: clamps continuous actions
    /// to [0, 1] (NaN is 0) and indexes discrete ones.
    pub fn fraction(&self, action: f64) -> f64 {
        match &self.action {
            ActionSpace::Continuous => {
                if action.is_nan() {
                    0.0
                } else {
                    action.clamp(0.0, 1.0)
                }
            }
            ActionSpace::Discrete(v) => {
                let i = if action.is_nan() {
                    0
                } else {
                    (action.max(0.0) as usize).min(v.len() - 1)
                };
                v[i]
            }
        }
    }
}
