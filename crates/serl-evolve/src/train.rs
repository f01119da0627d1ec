//! Training a design: what training and scoring need from the run (its
//! config, market and orders), a design trained on them, and the orders
//! and players it is validated with.

use std::path::Path;

use serl_design::Design;
use serl_env::{spread_orders, EnvConfig, MarketConfig, MarketData, ParentOrder};
use serl_eval::StrategyFactory;
use serl_train::{Algo, Policy, PolicyStrategy, TrainProfile, TrainSession};

use crate::config::EvolveConfig;
use crate::error::EvolveError;
use crate::llm_critic::CriticMaker;
use crate::record::CandidateResult;

/// What training and scoring a design needs: the run's inputs without the
/// designer, shared by trainings running in parallel. Where the
/// trainings run is not part of it: that is the executor's (`executor.rs`).
#[derive(Clone, Copy)]
pub(crate) struct Scoring<'a> {
    pub(crate) cfg: &'a EvolveConfig,
    pub(crate) env_cfg: &'a EnvConfig,
    pub(crate) market_cfg: &'a MarketConfig,
    pub(crate) market: &'a MarketData,
    pub(crate) train_orders: &'a [ParentOrder],
    pub(crate) val_orders: &'a [ParentOrder],
    /// Makes an LLM reward critic, for trainings that ask for one.
    pub(crate) critic: Option<&'a CriticMaker>,
    /// Plain PPO's validation days, where results are scored by their
    /// daily edge over it (`[evolve.search]`).
    pub(crate) pairing: Option<Pairing<'a>>,
}

/// What a result's daily edge is measured against.
#[derive(Clone, Copy)]
pub(crate) struct Pairing<'a> {
    /// Plain PPO's validation days.
    pub(crate) plain: &'a [crate::record::DayPa],
    /// Standard errors below the mean for the lower bound.
    pub(crate) z: f64,
}

impl Scoring<'_> {
    /// `r` with its daily edge over plain PPO, where this scoring pairs
    /// days (else as it is).
    pub(crate) fn pair(&self, mut r: CandidateResult) -> CandidateResult {
        if let (Some(p), Some(v)) = (self.pairing, r.validation.as_ref()) {
            r.paired = crate::paired::paired(&v.days, p.plain, p.z);
        }
        r
    }
}

/// One training of a design on a run's inputs, its settings named as they
/// are set: PPO for the run's `[train] total_steps` from its seed unless
/// told otherwise, the final policy kept, nothing written.
///
/// ```text
/// let trained = TrainDesign::new(&design).seed(job.seed).run(&scoring)?;
/// ```
pub(crate) struct TrainDesign<'a> {
    design: &'a Design,
    algo: Algo,
    steps: Option<usize>,
    seed: Option<u64>,
    checkpoints: Option<&'a Path>,
    select_every: usize,
}

/// What [`TrainDesign::run`] gives back.
pub(crate) struct TrainedDesign {
    pub(crate) policy: Policy,
    /// Values the design's programs repaired (non-finite, clamped).
    pub(crate) repaired: u64,
    pub(crate) profile: TrainProfile,
}

impl<'a> TrainDesign<'a> {
    pub(crate) fn new(design: &'a Design) -> Self {
        TrainDesign {
            design,
            algo: Algo::PPO,
            steps: None,
            seed: None,
            checkpoints: None,
            select_every: 0,
        }
    }

    /// The learner, PPO unless given.
    pub(crate) fn algo(mut self, algo: Algo) -> Self {
        self.algo = algo;
        self
    }

    /// Environment steps, `[train] total_steps` unless given.
    pub(crate) fn steps(mut self, steps: usize) -> Self {
        self.steps = Some(steps);
        self
    }

    /// The training's seed, `[train] seed` unless given.
    pub(crate) fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Writes the training's checkpoints into `dir` (and resumes from
    /// them), where `Some`.
    pub(crate) fn checkpoints(mut self, dir: Option<&'a Path>) -> Self {
        self.checkpoints = dir;
        self
    }

    /// Keeps the policy that scored best on the validation orders, checked
    /// every `updates` updates (0: the final policy).
    pub(crate) fn select_every(mut self, updates: usize) -> Self {
        self.select_every = updates;
        self
    }

    /// Trains the design on `inputs`' train orders.
    pub(crate) fn run(&self, inputs: &Scoring) -> Result<TrainedDesign, EvolveError> {
        let selects = self.select_every > 0;
        let val_orders = if selects {
            validation_orders(inputs)
        } else {
            Vec::new()
        };
        let mut session = TrainSession::for_design(
            (&inputs.cfg.train, self.design, self.algo),
            (inputs.market, inputs.env_cfg, inputs.market_cfg),
            (inputs.train_orders, &val_orders),
        );
        if let Some(steps) = self.steps {
            session.config.total_steps = steps;
        }
        if let Some(seed) = self.seed {
            session.config.seed = seed;
        }
        let critic = &session.config.reward_critic;
        if !critic.is_off() && critic.critic == serl_train::CriticKind::Llm {
            let make = inputs.critic.ok_or_else(|| EvolveError::Config("reward_critic.critic = \"llm\" needs a language model: [llm] backend openai, ollama or local, and trainings that run here (cluster tasks have no LLM critic)".into()))?;
            session.reward_critic = Some(make().map_err(EvolveError::Designer)?);
        }
        if selects {
            session.config.eval_every = self.select_every;
        }
        let out = session.run(self.checkpoints.map(Path::to_path_buf), false, None)?;
        Ok(TrainedDesign {
            policy: out.policy,
            repaired: out.reward_repaired,
            profile: out.profile,
        })
    }
}

/// `validation_orders` of the validation split, spread evenly over it.
pub(crate) fn validation_orders(inputs: &Scoring) -> Vec<ParentOrder> {
    spread_orders(inputs.val_orders, inputs.cfg.validation_orders)
}

/// Fresh greedy players of `policy` under the name `label`, for a backtest:
/// the one wrapper of a trained policy as a strategy.
pub fn policy_factory(label: String, policy: Policy) -> StrategyFactory {
    StrategyFactory {
        label: label.clone(),
        make: Box::new(move || Box::new(PolicyStrategy::new(policy.clone(), label.clone()))),
    }
}
