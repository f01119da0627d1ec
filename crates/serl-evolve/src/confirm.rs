//! Confirming a finished run: its best design and plain PPO retrained from
//! independent seeds and tested on the test split, and retrained on
//! rolling windows and tested on the sessions after each (walk-forward).
//!
//! One training seed and an order-level bootstrap overstate how sure a
//! gain is: a seed can be lucky, and the orders of one day move together.
//! Here every seed is a training of its own (seed 1 is the run's own final
//! retraining, reused), the seeds' mean is compared with each baseline day
//! by day (a one-sided Wilcoxon signed-rank test, Benjamini–Hochberg
//! across the comparisons), and walk-forward makes every test day out of
//! sample for the policy that trades it. The design itself stays the one
//! the run chose on its validation split.

use std::path::{Path, PathBuf};

use serl_cluster::Cluster;
use serl_design::Design;
use serl_env::{EnvConfig, MarketConfig, MarketData, ParentOrder};
use serl_eval::walk_forward::{
    cut, run_windows, WalkForwardConfig, Window, WindowOrders, WindowRun,
};
use serl_eval::{Backtest, OrderResult, StrategyFactory, StrategySpec};
use serl_train::Algo;

use crate::config::EvolveConfig;
use crate::error::{read_json, write_json, EvolveError};
use crate::executor::{self, Executor, Local};
use crate::final_stage::{load_final, BASELINES, FINAL_SEED_MIX};
use crate::tasks::FinalJob;
use crate::train::{policy_factory, Scoring};

/// The best design's label.
pub const BEST: &str = "serl-best";
/// Plain PPO's label.
pub const PLAIN: &str = "ppo-default";

/// What confirming needs: the run's inputs and what to do.
pub struct ConfirmInputs<'a> {
    /// The run's `[evolve]` table.
    pub cfg: &'a EvolveConfig,
    /// The execution task.
    pub env_cfg: &'a EnvConfig,
    /// The dynamic market's population.
    pub market_cfg: &'a MarketConfig,
    /// The sessions the orders play on.
    pub market: &'a MarketData,
    /// The run's train orders (the seeds train on them).
    pub train_orders: &'a [ParentOrder],
    /// The run's validation orders (the seeds' checkpoints are chosen on
    /// them).
    pub val_orders: &'a [ParentOrder],
    /// The run's test orders (the seeds are tested on them).
    pub test_orders: &'a [ParentOrder],
    /// Every order of the data in one id space, from which walk-forward
    /// cuts its windows.
    pub all_orders: &'a [ParentOrder],
    /// The run's best design.
    pub best: &'a Design,
    /// The run directory; everything goes into its `confirm/`.
    pub run_dir: &'a Path,
    /// Where the seeds' trainings run (walk-forward trains here: its
    /// windows' orders are not the run's).
    pub cluster: Option<&'a Cluster>,
    /// Independent seeds (0: none).
    pub seeds: usize,
    /// The walk-forward windows to run (`[walk_forward]`), if any.
    pub walk_forward: Option<&'a WalkForwardConfig>,
    /// Told what is running.
    pub on_step: Option<&'a (dyn Fn(ConfirmStep) + Sync)>,
}

/// What confirming is doing, for a progress line.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfirmStep {
    /// The seeds' trainings (`trainings` not yet done) are running.
    TrainingSeeds {
        /// Seeds in all.
        seeds: usize,
        /// Trainings still to run.
        trainings: usize,
    },
    /// A walk-forward window's two trainings are running.
    TrainingWindow {
        /// The window, from 0.
        index: usize,
        /// Windows in all.
        windows: usize,
        /// Its first and last test session.
        test: (chrono::NaiveDate, chrono::NaiveDate),
    },
    /// Test orders are being played.
    Testing {
        /// How many.
        orders: usize,
    },
}

/// The line a front end shows for the step.
impl std::fmt::Display for ConfirmStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfirmStep::TrainingSeeds { seeds, trainings } => write!(
                f,
                "{seeds} seeds: {trainings} trainings of the best design and plain PPO to run"
            ),
            ConfirmStep::TrainingWindow {
                index,
                windows,
                test,
            } => write!(
                f,
                "walk-forward window {index} (0 to {}; tests {} .. {}): training",
                windows - 1,
                test.0,
                test.1
            ),
            ConfirmStep::Testing { orders } => write!(f, "testing: {orders} episodes"),
        }
    }
}

/// One walk-forward window's outcome: every strategy on its test orders.
pub type WindowResult = WindowRun<Vec<OrderResult>>;

/// What confirming found.
#[derive(Debug, Clone, Default)]
pub struct Confirmation {
    /// The training seeds, the run's own first.
    pub seeds: Vec<u64>,
    /// The test orders played by the baselines, by each seed's policies
    /// ([`seed_label`]) and by the seeds' mean ([`mean_label`]); empty
    /// without seeds.
    pub seed_rows: Vec<OrderResult>,
    /// The walk-forward windows, in order; empty without walk-forward.
    pub windows: Vec<WindowResult>,
}

/// Seed `k`'s (from 1) policy of `name`.
pub fn seed_label(name: &str, k: usize) -> String {
    format!("{name} #{k}")
}

/// The mean over `n` seeds of `name`'s policies.
pub fn mean_label(name: &str, n: usize) -> String {
    format!("{name} ({n} seeds)")
}

impl ConfirmInputs<'_> {
    fn say(&self, step: ConfirmStep) {
        if let Some(f) = self.on_step {
            f(step);
        }
    }

    fn scoring<'s>(&'s self, train: &'s [ParentOrder], val: &'s [ParentOrder]) -> Scoring<'s> {
        Scoring {
            cfg: self.cfg,
            env_cfg: self.env_cfg,
            market_cfg: self.market_cfg,
            market: self.market,
            train_orders: train,
            val_orders: val,
            critic: None,
            pairing: None,
        }
    }

    fn designs(&self) -> [(&'static str, Design); 2] {
        [(BEST, self.best.clone()), (PLAIN, Design::baseline())]
    }

    /// The final retraining of `design` from `seed`, as the run's own.
    fn job(&self, name: String, design: Design, seed: u64) -> FinalJob {
        FinalJob {
            name,
            design,
            algo: Algo::PPO,
            steps: self.cfg.final_steps,
            seed,
            eval_every: self.cfg.final_eval_every,
            critic: None,
            switch: None,
        }
    }
}

/// Whether a run of `cfg` can be confirmed, with these windows over the
/// sessions of `all_orders`: checked before a run starts, so that a long
/// search does not end in a refusal.
pub fn check(
    cfg: &EvolveConfig,
    walk_forward: Option<&WalkForwardConfig>,
    all_orders: &[ParentOrder],
) -> Result<(), EvolveError> {
    if cfg.train.learning_team().is_some() {
        return Err(EvolveError::Config(
            "--seeds and --walk-forward confirm a single agent's run; this run trains a team ([evolve.train.team])".into(),
        ));
    }
    if let Some(wf) = walk_forward {
        cut_windows(wf, all_orders)?;
    }
    Ok(())
}

/// The windows of `wf` over `all_orders`, each with its orders.
fn cut_windows(
    wf: &WalkForwardConfig,
    all_orders: &[ParentOrder],
) -> Result<Vec<WindowOrders>, EvolveError> {
    cut(all_orders, wf).map_err(|m| EvolveError::Config(format!("[walk_forward] {m}")))
}

/// Retrains and tests as `inputs` asks, into `RUN_DIR/confirm/`; trainings
/// already there (a killed run's) are loaded, not repeated.
pub fn confirm(inputs: &ConfirmInputs) -> Result<Confirmation, EvolveError> {
    check(inputs.cfg, inputs.walk_forward, inputs.all_orders)?;
    let dir = inputs.run_dir.join("confirm");
    let first = inputs.cfg.seed ^ FINAL_SEED_MIX;
    let seeds: Vec<u64> = (0..inputs.seeds as u64)
        .map(|k| first.wrapping_add(k))
        .collect();
    let seed_rows = if seeds.is_empty() {
        Vec::new()
    } else {
        seed_study(inputs, &dir, &seeds)?
    };
    let windows = match inputs.walk_forward {
        Some(wf) => walk_forward(inputs, wf, &dir)?,
        None => Vec::new(),
    };
    Ok(Confirmation {
        seeds,
        seed_rows,
        windows,
    })
}

/// Each seed's two policies, trained where missing, tested beside the
/// baselines on the run's test orders, with the seeds' mean per order.
fn seed_study(
    inputs: &ConfirmInputs,
    dir: &Path,
    seeds: &[u64],
) -> Result<Vec<OrderResult>, EvolveError> {
    let mut policies: Vec<(String, PathBuf)> = Vec::new();
    let mut jobs = Vec::new();
    for (k, &seed) in seeds.iter().enumerate() {
        for (name, design) in inputs.designs() {
            // Seed 1 is the run's own final retraining.
            let own = inputs.run_dir.join("final").join(name);
            let fdir = if k == 0 && own.join("final.bpk").exists() {
                own
            } else {
                let job = inputs.job(format!("{name}-seed{}", k + 1), design, seed);
                let fdir = dir.join("final").join(&job.name);
                same_job(&fdir, &job)?;
                jobs.push(job);
                fdir
            };
            policies.push((seed_label(name, k + 1), fdir));
        }
    }
    let todo = jobs
        .iter()
        .filter(|j| !dir.join("final").join(&j.name).join("final.bpk").exists())
        .count();
    inputs.say(ConfirmStep::TrainingSeeds {
        seeds: seeds.len(),
        trainings: todo,
    });
    let scoring = inputs.scoring(inputs.train_orders, inputs.val_orders);
    executor::on(inputs.cluster).retrain(&scoring, dir, &jobs)?;
    let baselines = BASELINES.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut rows = play(
        inputs,
        inputs.test_orders,
        &policies,
        &baselines,
        "baselines",
    )?;
    for (name, _) in inputs.designs() {
        let mean = seed_mean(&rows, name, seeds.len());
        rows.extend(mean);
    }
    Ok(rows)
}

/// Each window's two policies, trained where missing on its sessions and
/// tested on the sessions after it.
fn walk_forward(
    inputs: &ConfirmInputs,
    wf: &WalkForwardConfig,
    dir: &Path,
) -> Result<Vec<WindowResult>, EvolveError> {
    let seed = inputs.cfg.seed ^ FINAL_SEED_MIX;
    run_windows(cut_windows(wf, inputs.all_orders)?, |cut, n| {
        let w = &cut.window;
        inputs.say(ConfirmStep::TrainingWindow {
            index: w.index,
            windows: n,
            test: (w.test[0], w.test[w.test.len() - 1]),
        });
        let wdir = dir.join(format!("window-{}", w.index));
        same_window(&wdir, w)?;
        let jobs: Vec<FinalJob> = inputs
            .designs()
            .into_iter()
            .map(|(name, d)| inputs.job(name.to_string(), d, seed))
            .collect();
        for j in &jobs {
            same_job(&wdir.join("final").join(&j.name), j)?;
        }
        // Here, not on the cluster: a task reloads the run's own orders.
        Local.retrain(&inputs.scoring(&cut.train, &cut.validation), &wdir, &jobs)?;
        let policies: Vec<(String, PathBuf)> = jobs
            .iter()
            .map(|j| (j.name.clone(), wdir.join("final").join(&j.name)))
            .collect();
        play(
            inputs,
            &cut.test,
            &policies,
            &wf.baselines,
            "[walk_forward] baselines",
        )
    })
}

/// Records `w` in its directory, or checks that the trainings already
/// there were trained on the same dates: a changed `[walk_forward]` must
/// not test a window with another window's policies.
fn same_window(wdir: &Path, w: &Window) -> Result<(), EvolveError> {
    let path = wdir.join("window.json");
    match read_json::<Window>(&path) {
        Some(old) if old != *w => Err(EvolveError::Config(format!(
            "{} was trained on other dates (train {}, test {}); [walk_forward] changed since: move {} away to train the new windows",
            path.display(),
            old.train_span(),
            old.test_span(),
            wdir.parent().unwrap_or(wdir).display()
        ))),
        Some(_) => Ok(()),
        None => write_json(&path, w),
    }
}

/// Records the training `job` beside it in `fdir`, or checks that the
/// one already there is the same (design, steps, seed, selection): a run
/// whose config was edited must not test another design's policies.
fn same_job(fdir: &Path, job: &FinalJob) -> Result<(), EvolveError> {
    let path = fdir.join("job.json");
    let now = serde_json::to_value(job).map_err(|e| crate::error::file_err(&path, e))?;
    match read_json::<serde_json::Value>(&path) {
        Some(old) if old != now => Err(EvolveError::Config(format!(
            "{} holds a training of another job (the design, budget or seed changed since): move {} away to train it again",
            path.display(),
            fdir.display()
        ))),
        Some(_) => Ok(()),
        None => write_json(&path, job),
    }
}

/// The baselines and the policies in `policies` (label, run directory) on
/// `orders`, in the static replay.
fn play(
    inputs: &ConfirmInputs,
    orders: &[ParentOrder],
    policies: &[(String, PathBuf)],
    baselines: &[String],
    baselines_from: &str,
) -> Result<Vec<OrderResult>, EvolveError> {
    let mut factories = baselines
        .iter()
        .map(|s| StrategySpec::parse(s).map(StrategyFactory::from_spec))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| EvolveError::Config(format!("{baselines_from}: {e}")))?;
    for (label, fdir) in policies {
        let policy = load_final(inputs.cfg, fdir)?;
        factories.push(policy_factory(label.clone(), policy));
    }
    inputs.say(ConfirmStep::Testing {
        orders: orders.len() * factories.len(),
    });
    Ok(Backtest::new(inputs.market, inputs.env_cfg).run(orders, &factories))
}

/// The mean over `n` seeds of `name`'s policies, order by order: PA,
/// shortfall, fills and reward averaged; the fill price, placement figures
/// and inventory path, which do not average, left empty.
pub fn seed_mean(rows: &[OrderResult], name: &str, n: usize) -> Vec<OrderResult> {
    let labels: Vec<String> = (1..=n).map(|k| seed_label(name, k)).collect();
    let mut by_order: std::collections::BTreeMap<(String, u64), Vec<&OrderResult>> =
        Default::default();
    for r in rows.iter().filter(|r| labels.contains(&r.strategy)) {
        by_order
            .entry((r.env.clone(), r.order_id))
            .or_default()
            .push(r);
    }
    let avg = |g: &[&OrderResult], f: fn(&OrderResult) -> f64| {
        g.iter().map(|r| f(r)).sum::<f64>() / g.len() as f64
    };
    by_order
        .into_values()
        .map(|g| {
            let mut m = g[0].clone();
            m.strategy = mean_label(name, n);
            m.pa_bps = avg(&g, |r| r.pa_bps);
            m.is_bps = avg(&g, |r| r.is_bps);
            m.filled = avg(&g, |r| r.filled);
            m.unfilled = avg(&g, |r| r.unfilled);
            m.reward = avg(&g, |r| r.reward);
            m.avg_price = None;
            m.placement = Default::default();
            m.inventory_path = Vec::new();
            m
        })
        .collect()
}
