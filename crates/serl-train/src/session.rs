//! The pipeline "orders + market + design → trained policy", wired once:
//! `serl train` and `serl evolve` both build a [`TrainSession`] and run it.

use std::path::PathBuf;
use std::sync::Arc;

use serl_design::{Design, PlannedReward, RewardModule};
use serl_env::{DynamicVenue, EnvConfig, MarketConfig, MarketData, ParentOrder, Reward};

use crate::algo::Algo;
use crate::config::TrainConfig;
use crate::envs::execution_envs;
use crate::policy::Policy;
use crate::run::{train, OnUpdate, TrainOutcome, TrainSetup, Validator};
use crate::team_play::team_pa;
use crate::validate::static_pa;
use crate::TrainError;

/// Everything a training run is made of: how to train, what to reward,
/// where the episodes play and which orders it learns and selects on.
pub struct TrainSession<'a> {
    /// How to train (the design's modules already applied).
    pub config: TrainConfig,
    /// The per-step reward.
    pub reward: Arc<dyn Reward>,
    /// The reward as a program, when it is one: what a reward critic
    /// re-weights term by term (`[train.reward_critic]`).
    pub reward_program: Option<RewardModule>,
    /// The critic that re-weights it (none: the builtin one, when the
    /// config switches a critic on).
    pub reward_critic: Option<Box<dyn crate::RewardCritic>>,
    /// The sessions the orders play on.
    pub market: &'a MarketData,
    /// The execution task.
    pub env: &'a EnvConfig,
    /// The dynamic market's population.
    pub population: MarketConfig,
    /// Orders to learn on.
    pub train_orders: &'a [ParentOrder],
    /// Orders to select the best policy on (greedy static PA; a team's PA
    /// in the dynamic market); none keeps the last policy.
    pub val_orders: &'a [ParentOrder],
    /// The market a team is validated in: the calibrated population, even
    /// when training plays a designed one (the profiling module), so that
    /// the design's effect is measured.
    pub eval_market: MarketConfig,
}

impl TrainConfig {
    /// This config with a design's modules in place: its network, its
    /// state features, its imagined days and, in the multi-agent scenario,
    /// its communication.
    pub fn with_design(&self, d: &Design) -> TrainConfig {
        let mut tc = self.clone();
        tc.network = d.architecture.clone();
        tc.features = d.state.features.clone();
        if let Some(team) = &mut tc.team {
            if d.communication.is_some() {
                team.communication = d.communication.clone();
            }
        }
        // Without scenarios the shares play nothing
        // (`TrainConfig::dynamic_market`, `ExecutionEnv::with_imagined_replay`).
        tc.imagination = d.imagination.clone();
        if d.plan.is_some() {
            tc.plan = d.plan.clone();
        }
        tc
    }
}

impl<'a> TrainSession<'a> {
    /// The session that trains `design` with `algo`: `base` with the
    /// design's modules ([`TrainConfig::with_design`]), its reward program,
    /// and its profiled population in place of `population`, on `market`
    /// (the bars, the environment's settings) and the orders.
    pub fn for_design(
        (base, design, algo): (&TrainConfig, &Design, Algo),
        (market, env, population): (&'a MarketData, &'a EnvConfig, &MarketConfig),
        (train_orders, val_orders): (&'a [ParentOrder], &'a [ParentOrder]),
    ) -> Self {
        let mut config = base.with_design(design);
        config.algo = algo;
        if !crate::registry::registered(algo).extras.placements {
            // Only PPO learns where its orders go; the others cross.
            config.placements.clear();
        }
        TrainSession {
            config,
            reward: Arc::new(design.reward.reward()),
            reward_program: Some(design.reward.clone()),
            reward_critic: None,
            market,
            env,
            population: design
                .profiling
                .as_ref()
                .map_or(population.clone(), |p| (*p.market).clone()),
            train_orders,
            val_orders,
            eval_market: population.clone(),
        }
    }

    /// Trains: the best policy by validation PA when there are validation
    /// orders, else the final one. With a run directory, writes metrics,
    /// checkpoints and the report there; with `resume`, continues it.
    pub fn run(
        self,
        run_dir: Option<PathBuf>,
        resume: bool,
        on_update: Option<OnUpdate<'a>>,
    ) -> Result<TrainOutcome, TrainError> {
        let mut reward = self.reward.clone();
        let hook = if self.config.reward_critic.is_off() {
            None
        } else {
            let program = self.reward_program.as_ref().ok_or_else(|| TrainError::Config {
                field: "reward_critic.every".into(),
                message: "the critic re-weights the terms of a reward program; this run's reward is not one".into(),
            })?;
            let terms = Arc::new(serl_design::TermRecorder::new(program));
            reward = terms.clone();
            Some(crate::critic::CriticHook::new(
                terms,
                &self.config.reward_critic,
                self.reward_critic,
            )?)
        };
        if let Some(plan) = &self.config.plan {
            reward = Arc::new(PlannedReward::new(plan.clone(), reward));
        }
        let used = reward.clone();
        let envs = execution_envs(
            &self.config,
            self.market,
            self.train_orders,
            self.env,
            reward,
            &self.population,
        )?;
        let (market, orders, env) = (self.market, self.val_orders, self.env);
        let validate: Option<Validator> = if orders.is_empty() {
            None
        } else if self.config.learning_team().is_some() {
            let venue = DynamicVenue {
                market: self.eval_market.clone(),
                seed: self.config.seed,
            };
            Some(Box::new(move |p: &Policy| {
                team_pa(p, market, orders, env, &venue)
            }))
        } else {
            Some(Box::new(move |p: &Policy| {
                static_pa(p, market, orders, env)
            }))
        };
        let mut out = train(TrainSetup {
            config: self.config,
            envs,
            validate,
            run_dir,
            resume,
            on_update,
            reward_critic: hook,
        })?;
        out.reward_repaired = used.repaired();
        Ok(out)
    }
}
