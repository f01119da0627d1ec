//! `[evolve.hierarchy]`: which parts of the LLM+RL systems the hierarchy
//! rows switch on, on which designs, and how each part is set. The rows
//! themselves are trained and tabulated in `hierarchy_rows.rs`.

use serde::{Deserialize, Serialize};
use serl_design::{Design, PlanModule};
use serl_train::{AlignmentConfig, CriticConfig, TrainConfig, TransitionConfig};

/// One part switched on for a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Switch {
    /// The plan module: the executor observes the plan, the reward may
    /// read it.
    Plan,
    /// The plan, and the executor aligned with it by behaviour cloning
    /// before PPO.
    PlanAlignment,
    /// The auxiliary next-observation head.
    Transition,
    /// The in-training reward critic.
    RewardCritic,
}

impl Switch {
    /// Its name in configs, run directories and the report.
    pub fn name(self) -> &'static str {
        match self {
            Switch::Plan => "plan",
            Switch::PlanAlignment => "plan_alignment",
            Switch::Transition => "transition",
            Switch::RewardCritic => "reward_critic",
        }
    }

    /// What it adds, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Switch::Plan => "the plan observed (and readable by the reward)",
            Switch::PlanAlignment => "the plan, and behaviour cloning of its tracker before PPO",
            Switch::Transition => "an auxiliary head predicting the next market features",
            Switch::RewardCritic => "reward terms re-weighted during training",
        }
    }

    pub(crate) fn uses_plan(self) -> bool {
        matches!(self, Switch::Plan | Switch::PlanAlignment)
    }

    /// The training config of this row: `base` with the part switched on
    /// as `h` sets it.
    pub fn apply(self, base: &TrainConfig, h: &HierarchyConfig) -> TrainConfig {
        let mut t = base.clone();
        match self {
            Switch::Plan => {}
            Switch::PlanAlignment => t.alignment = h.alignment.clone(),
            Switch::Transition => t.transition = h.transition.clone(),
            Switch::RewardCritic => t.reward_critic = h.reward_critic.clone(),
        }
        t
    }
}

/// `[evolve.hierarchy]`: which rows, and how each part is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HierarchyConfig {
    /// The rows, in order.
    pub rows: Vec<Switch>,
    /// The designs they switch parts on, each with its own "alone" row:
    /// the search's best (default) and plain PPO's.
    pub bases: Vec<Base>,
    /// The plan of the plan rows when the search designed none.
    pub plan: PlanModule,
    /// Behaviour cloning in the `plan_alignment` row.
    pub alignment: AlignmentConfig,
    /// The head of the `transition` row.
    pub transition: TransitionConfig,
    /// The critic of the `reward_critic` row.
    pub reward_critic: CriticConfig,
}

impl Default for HierarchyConfig {
    fn default() -> Self {
        HierarchyConfig {
            rows: Vec::new(),
            bases: vec![Base::Best],
            plan: PlanModule::linear(),
            alignment: AlignmentConfig {
                steps: 4096,
                ..AlignmentConfig::default()
            },
            transition: TransitionConfig { weight: 0.5 },
            reward_critic: CriticConfig {
                every: 4,
                ..CriticConfig::default()
            },
        }
    }
}

impl HierarchyConfig {
    /// Checks each part's settings; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        let t = TrainConfig {
            plan: Some(self.plan.clone()),
            alignment: self.alignment.clone(),
            transition: self.transition.clone(),
            reward_critic: self.reward_critic.clone(),
            ..TrainConfig::default()
        };
        t.validate(t.obs_dim()).map_err(|e| {
            format!(
                "[evolve.hierarchy] {}",
                e.to_string().replace("train config, ", "")
            )
        })
    }
}

/// The design the rows switch parts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Base {
    /// The search's best design (its plan removed for "alone").
    Best,
    /// Plain PPO's design: the MLP [64, 64] and the default reward, whose
    /// hidden layers and three reward terms every part can act on.
    Plain,
}

impl Base {
    /// Its name in the table.
    pub fn label(self) -> &'static str {
        match self {
            Base::Best => "best design",
            Base::Plain => "plain PPO",
        }
    }

    /// The design, and the run's own retraining of it.
    pub(crate) fn design(self, best: &Design) -> (Design, &'static str) {
        match self {
            Base::Best => (best.clone(), "serl-best"),
            Base::Plain => (Design::baseline(), "ppo-default"),
        }
    }

    /// A row's label: the part's name, prefixed for plain PPO.
    pub(crate) fn row(self, part: &str) -> String {
        match self {
            Base::Best => part.to_string(),
            Base::Plain => format!("plain: {part}"),
        }
    }
}

/// The training config of a final job's row: `train`, with the row's
/// part switched on as `h` (or the defaults) sets it.
pub(crate) fn train_config(
    train: &TrainConfig,
    h: Option<&HierarchyConfig>,
    switch: Option<Switch>,
) -> TrainConfig {
    match (switch, h) {
        (Some(s), Some(h)) => s.apply(train, h),
        (Some(s), None) => s.apply(train, &HierarchyConfig::default()),
        (None, _) => train.clone(),
    }
}
