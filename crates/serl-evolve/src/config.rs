//! `[evolve]`: the outer loop's settings.

use serde::{Deserialize, Serialize};
use serl_design::ModuleKind;
use serl_train::{Algo, HybridMode, TrainConfig};

use crate::budget::BudgetConfig;
use crate::database::SearchConfig;
use crate::hierarchy::HierarchyConfig;

/// The `[evolve]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvolveConfig {
    /// Seeds the designer, the trainings and the ES.
    pub seed: u64,
    /// Iterations J (at most; convergence may stop earlier).
    pub iterations: usize,
    /// Candidates K per iteration.
    pub candidates: usize,
    /// Modules the designer writes for each candidate.
    pub modules: Vec<ModuleKind>,
    /// Attempts per module before the candidate is dropped.
    pub max_attempts: usize,
    /// In-context examples: the top-k designs of the performance buffer.
    pub top_k: usize,
    /// The user's research instruction.
    pub macro_instruction: String,
    /// The training of every candidate (its budget is `train.total_steps`).
    pub train: TrainConfig,
    /// Environment steps for the final retraining of the best design (and
    /// of the PPO and DDQN baselines it is compared with).
    pub final_steps: usize,
    /// With n > 0, the final trainings validate every n updates (on the
    /// candidates' validation orders) and keep the best policy: early
    /// stopping, so a retraining that peaks before its last step is
    /// tested at its peak. 0 keeps the last policy.
    pub final_eval_every: usize,
    /// Validation orders scored per candidate.
    pub validation_orders: usize,
    /// Validation orders replayed in the dynamic market for the illusory gain.
    pub dynamic_validation_orders: usize,
    /// High-level DEK: instructions rewritten from their history of scores.
    pub high_level: bool,
    /// High-level DEK's instruction cache: the chance that a language-model
    /// designer's instruction (a module's, or the research direction) is
    /// replaced by its best-scoring past one instead of being rewritten.
    /// Each replay is logged. (The builtin designer replays inside its own
    /// search.)
    pub instruction_replay: f64,
    /// Low-level DEK: the ES on the best design's constants.
    pub low_level: LowLevelConfig,
    /// When the loop stops early.
    pub convergence: ConvergenceConfig,
    /// Trainings run at once (a round's candidates, an ES generation,
    /// the final retrainings); 0 picks one per core.
    pub parallel: usize,
    /// Runs repeated after the main one with one part switched off, each
    /// in `RUN_DIR/ablations/NAME/`, and tabulated in the report.
    pub ablations: Vec<Ablation>,
    /// Keep the test split sealed until the run is declared final
    /// (`serl evolve --resume DIR --open-test`); `lockbox.json` records
    /// the design and when it was sealed and opened.
    pub lockbox: bool,
    /// `[evolve.budget]`: tokens and training seconds the search may spend
    /// (none: unlimited). Left out of the saved config when absent, so a
    /// cluster run planned before it resumes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetConfig>,
    /// `[evolve.hierarchy]`: the best design retrained with a plan,
    /// alignment, transition supervision or a reward critic switched on,
    /// each a row of the report (none: no rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hierarchy: Option<HierarchyConfig>,
    /// `[evolve.search]`: a program database in islands whose operators
    /// change good designs (mutate, crossover) as well as writing new
    /// ones, every design scored by its daily edge over plain PPO (none:
    /// each round designs afresh from the top-k examples).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchConfig>,
    /// Fine-tune the designing model between rounds on its designs'
    /// pairs (SE-RL's low-level enhancement of the designer; the embedded
    /// model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finetune: Option<crate::learner::FinetuneConfig>,
    /// `[evolve.select]`: when the chosen design is recommended over plain
    /// PPO (the SPA test's level, its bootstrap, CSCV's blocks).
    pub select: crate::select::SelectConfig,
    /// The learners retrained on the plain design beside the best one for
    /// one agent, each a `NAME-default` row (`ppo-default`,
    /// `ddqn-default`, `sac-default`); PPO must be one, the verdict's
    /// reference. Left out of saved configs at the default, so that runs
    /// planned before it resume.
    #[serde(skip_serializing_if = "is_default_baselines")]
    pub baselines: Vec<Algo>,
}

/// PPO and DDQN: the paper's baselines.
pub fn default_baselines() -> Vec<Algo> {
    vec![Algo::PPO, Algo::DDQN]
}

fn is_default_baselines(b: &[Algo]) -> bool {
    b == default_baselines().as_slice()
}

/// One part of SE-RL to switch off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ablation {
    /// No instruction evolution or replay (high-level DEK off).
    NoHighLevel,
    /// No (1+λ)-ES on the best design's constants (low-level DEK off).
    NoLowLevel,
    /// Candidates train in the static replay only.
    StaticOnly,
    /// Candidates train in the dynamic market only.
    DynamicOnly,
    /// α and β fixed instead of adapted.
    FixedWeights,
    /// The builtin offline search instead of the configured LLM (the "no
    /// LLM" ablation; the same as the main run when that is builtin).
    Builtin,
    /// No `[evolve.budget]`: no limits on tokens or seconds, no pre-screen.
    NoBudget,
}

impl Ablation {
    /// Its name in configs and run directories.
    pub fn name(self) -> &'static str {
        match self {
            Ablation::NoHighLevel => "no_high_level",
            Ablation::NoLowLevel => "no_low_level",
            Ablation::StaticOnly => "static_only",
            Ablation::DynamicOnly => "dynamic_only",
            Ablation::FixedWeights => "fixed_weights",
            Ablation::Builtin => "builtin",
            Ablation::NoBudget => "no_budget",
        }
    }

    /// What it switches off, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Ablation::NoHighLevel => "without high-level DEK (instruction evolution and replay)",
            Ablation::NoLowLevel => "without low-level DEK (constant tuning)",
            Ablation::StaticOnly => "trained in the static replay only",
            Ablation::DynamicOnly => "trained in the dynamic market only",
            Ablation::FixedWeights => "fixed loss weights α, β",
            Ablation::Builtin => "builtin designer instead of the LLM",
            Ablation::NoBudget => "no budget: unlimited tokens and seconds, no pre-screen",
        }
    }

    /// The ablated run's config: the main one with this part switched off
    /// (and no ablations of its own).
    pub fn apply(self, cfg: &EvolveConfig) -> EvolveConfig {
        let mut c = cfg.clone();
        c.ablations.clear();
        // The hierarchy rows belong to the main run's report.
        c.hierarchy = None;
        match self {
            Ablation::NoHighLevel => c.high_level = false,
            Ablation::NoLowLevel => c.low_level.enabled = false,
            Ablation::StaticOnly => c.train.hybrid.mode = HybridMode::StaticOnly,
            Ablation::DynamicOnly => c.train.hybrid.mode = HybridMode::DynamicOnly,
            Ablation::FixedWeights => c.train.hybrid.mode = HybridMode::Fixed,
            Ablation::Builtin => {}
            Ablation::NoBudget => c.budget = None,
        }
        c
    }
}

/// Low-level DEK: a (1+λ)-ES over the numeric constants of the best
/// candidate's reward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LowLevelConfig {
    /// Whether the ES runs.
    pub enabled: bool,
    /// Generations per iteration.
    pub generations: usize,
    /// Offspring λ per generation.
    pub lambda: usize,
    /// Log-normal step size on each constant.
    pub sigma: f64,
}

impl Default for LowLevelConfig {
    fn default() -> Self {
        LowLevelConfig {
            enabled: true,
            generations: 1,
            lambda: 2,
            sigma: 0.3,
        }
    }
}

/// Stop when the EMA of the best validation PA moves by less than
/// `epsilon` bps for `window` iterations in a row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConvergenceConfig {
    /// The EMA's weight on the newest best PA.
    pub ema: f64,
    /// Movement, bps, that counts as still.
    pub epsilon: f64,
    /// Still iterations in a row that stop the loop.
    pub window: usize,
}

impl Default for ConvergenceConfig {
    fn default() -> Self {
        ConvergenceConfig {
            ema: 0.5,
            epsilon: 0.01,
            window: 2,
        }
    }
}

impl Default for EvolveConfig {
    fn default() -> Self {
        let mut train = TrainConfig {
            total_steps: 2048,
            n_envs: 8,
            eval_every: 1_000_000,
            ..Default::default()
        };
        train.ppo.n_steps = 64;
        train.ppo.batch_size = 128;
        train.ppo.learning_rate = 1e-3;
        train.hybrid.dynamic_envs = 1;
        EvolveConfig {
            seed: 7,
            iterations: 3,
            candidates: 3,
            modules: vec![ModuleKind::Reward, ModuleKind::State, ModuleKind::Architecture, ModuleKind::Imagination],
            max_attempts: 3,
            top_k: 3,
            macro_instruction: "Design an execution agent that beats TWAP robustly across stocks, in the static and the dynamic market.".into(),
            train,
            final_steps: 8192,
            final_eval_every: 0,
            validation_orders: 200,
            dynamic_validation_orders: 8,
            high_level: true,
            instruction_replay: 0.3,
            low_level: LowLevelConfig::default(),
            convergence: ConvergenceConfig::default(),
            ablations: Vec::new(),
            parallel: 0,
            lockbox: false,
            budget: None,
            hierarchy: None,
            search: None,
            finetune: None,
            select: Default::default(),
            baselines: default_baselines(),
        }
    }
}

impl EvolveConfig {
    /// Candidates an iteration trains: its designs and its low-level DEK
    /// trials (the README's count: 3 × (3 + 2) = 15 in the quick run),
    /// what a progress bar counts.
    pub fn candidates_per_iteration(&self) -> usize {
        let ll = &self.low_level;
        let trials = if ll.enabled {
            ll.generations * ll.lambda
        } else {
            0
        };
        self.candidates + trials
    }

    /// Checks the table, naming the field at fault.
    pub fn validate(&self) -> Result<(), String> {
        self.select.validate()?;
        if !self.baselines.contains(&Algo::PPO) {
            return Err("evolve.baselines must include \"ppo\": the verdict weighs the best design against plain PPO".into());
        }
        if let Some(twice) =
            (1..self.baselines.len()).find(|&i| self.baselines[..i].contains(&self.baselines[i]))
        {
            return Err(format!(
                "evolve.baselines names \"{}\" twice: each learner retrains the plain design once",
                serl_train::registered(self.baselines[twice])
                    .name
                    .to_lowercase()
            ));
        }
        if !(0.0..=1.0).contains(&self.instruction_replay) {
            return Err(format!(
                "evolve.instruction_replay is {}; give a probability in [0, 1]",
                self.instruction_replay
            ));
        }
        if self.iterations == 0 || self.candidates == 0 {
            return Err("evolve.iterations and evolve.candidates must be at least 1".into());
        }
        if self.modules.contains(&ModuleKind::Communication) && self.train.team.is_none() {
            return Err(
                "evolve.modules has communication, which needs the multi-agent scenario: \
                 add [evolve.train.team] (agents and mode for a team that learns together, \
                 or peers, peer_size and same_side for scripted peers)"
                    .into(),
            );
        }
        if !self.modules.contains(&ModuleKind::Reward) {
            return Err("evolve.modules must include reward".into());
        }
        if self.max_attempts == 0 {
            return Err("evolve.max_attempts must be at least 1".into());
        }
        if self.final_steps == 0 {
            return Err("evolve.final_steps must be at least 1".into());
        }
        if let Some(b) = &self.budget {
            b.validate()?;
        }
        if let Some(s) = &self.search {
            s.validate()?;
            if self.train.learning_team().is_some() {
                return Err("[evolve.search] scores each design by its daily edge over plain PPO in the static replay; a team is validated on dynamic episodes only: drop [evolve.search] or [evolve.train.team]".into());
            }
        }
        if let Some(f) = &self.finetune {
            f.validate()?;
        }
        if let Some(h) = &self.hierarchy {
            if self.train.learning_team().is_some() && !h.rows.is_empty() {
                return Err(
                    "[evolve.hierarchy] rows train one agent; this run trains a team".into(),
                );
            }
            if self.train.plan.is_some() && !h.rows.is_empty() {
                return Err("[evolve.train] plan with [evolve.hierarchy] rows: the rows decide which trainings follow a plan (remove [evolve.train] plan; set [evolve.hierarchy] plan, or design one with modules = [..., \"plan\"])".into());
            }
            h.validate()?;
        }
        Ok(())
    }

    /// How many trainings run at once (`parallel`, or one per core).
    pub fn parallel_candidates(&self) -> usize {
        match self.parallel {
            // One per core: a hybrid training waits on its dynamic market,
            // one simulation at a time, and leaves the other cores idle.
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }

    /// The default micro instruction of a module.
    pub fn micro(kind: ModuleKind) -> &'static str {
        match kind {
            ModuleKind::Reward => {
                "Reward price advantage; penalise unfilled inventory, most of all at the end."
            }
            ModuleKind::State => {
                "Add a few features that predict short-term price moves or liquidity."
            }
            ModuleKind::Architecture => "Keep the network small and stable to train.",
            ModuleKind::Imagination => {
                "Add days a little more volatile or trending than the real one."
            }
            ModuleKind::Profiling => "Keep the population close to the calibrated market.",
            ModuleKind::Communication => {
                "Share what helps the other agents avoid trading at the same time."
            }
            ModuleKind::Plan => {
                "Plan a schedule that trades where liquidity is deep and prices tend to be favourable."
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ablation_switches_off_exactly_its_part() {
        let mut cfg = EvolveConfig {
            ablations: vec![Ablation::NoHighLevel, Ablation::StaticOnly],
            ..EvolveConfig::default()
        };
        cfg.train.hybrid.mode = HybridMode::Adaptive;
        cfg.budget = Some(crate::budget::BudgetConfig::default());
        let full = cfg.clone();
        for a in [
            Ablation::NoHighLevel,
            Ablation::NoLowLevel,
            Ablation::StaticOnly,
            Ablation::DynamicOnly,
            Ablation::FixedWeights,
            Ablation::Builtin,
            Ablation::NoBudget,
        ] {
            let c = a.apply(&full);
            assert_eq!(
                c.budget.is_none(),
                a == Ablation::NoBudget || full.budget.is_none()
            );
            assert!(c.ablations.is_empty(), "{a:?} would recurse");
            assert_eq!(c.high_level, a != Ablation::NoHighLevel, "{a:?}");
            assert_eq!(c.low_level.enabled, a != Ablation::NoLowLevel, "{a:?}");
            let mode = match a {
                Ablation::StaticOnly => HybridMode::StaticOnly,
                Ablation::DynamicOnly => HybridMode::DynamicOnly,
                Ablation::FixedWeights => HybridMode::Fixed,
                _ => HybridMode::Adaptive,
            };
            assert_eq!(c.train.hybrid.mode, mode, "{a:?}");
            assert_eq!(c.seed, full.seed);
        }
    }

    #[test]
    fn ablation_names_are_what_the_config_spells() {
        let names = [
            "no_high_level",
            "no_low_level",
            "static_only",
            "dynamic_only",
            "fixed_weights",
            "builtin",
            "no_budget",
        ];
        let parsed: Vec<Ablation> =
            serde_json::from_str(&serde_json::to_string(&names).unwrap()).unwrap();
        assert_eq!(parsed.iter().map(|a| a.name()).collect::<Vec<_>>(), names);
        assert!(serde_json::from_str::<Vec<Ablation>>(r#"["no_llm"]"#).is_err());
    }
}
