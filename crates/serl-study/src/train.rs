//! A training study: one policy, several seeds, or (in `walk_forward`) one
//! per rolling window, each in a resumable run directory; and the policy
//! of a run directory as a strategy to backtest.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serl_env::{MarketData, ParentOrder};
use serl_train::{load_run_policy, OnUpdate, TrainConfig, TrainOutcome, TrainSession};

use crate::config::TrainFile;
use crate::error::{Context, Result, StudyError};

/// Runs a training given to it (`around` of [`TrainingHooks`]).
pub type Around = Box<dyn Fn(&mut dyn FnMut())>;

/// What a caller shows of each training: made afresh for every training
/// (the seeds and windows train one after another), and the wrapper each
/// training runs in (where a signal may wait for the update under way).
pub struct TrainingHooks {
    /// What each update shows; dropped when its training ends.
    pub on_update: Box<dyn Fn(&TrainConfig) -> OnUpdate<'static>>,
    /// Runs one training.
    pub around: Around,
}

/// The config's reward program, or the default reward.
pub fn reward_of(cfg: &TrainFile) -> Result<Arc<dyn serl_env::Reward>> {
    Ok(match &cfg.reward {
        Some(program) => Arc::new(
            serl_design::RewardModule::compile(program)
                .with_context(|| format!("[train config] reward = {program:?}"))?
                .reward(),
        ),
        None => Arc::new(cfg.env.default_reward()),
    })
}

/// The run's reward as a program (the default reward written out with the
/// env's penalties when none is given): what a reward critic re-weights.
fn reward_program(cfg: &TrainFile) -> Result<serl_design::RewardModule> {
    let program = cfg.reward.clone().unwrap_or_else(|| {
        let env = &cfg.env;
        serl_design::default_reward_program(env.inventory_penalty, env.terminal_penalty)
    });
    serl_design::RewardModule::compile(&program)
        .with_context(|| format!("[train config] reward = {program:?}"))
}

/// The config's reward program compiles; when not, the error names the
/// config file and the line the program is on, as well as the place in the
/// program.
pub fn check_reward(cfg: &TrainFile, path: &Path) -> Result<()> {
    let Some(program) = &cfg.reward else {
        return Ok(());
    };
    let Err(e) = serl_design::RewardModule::compile(program) else {
        return Ok(());
    };
    let line = reward_line(path).map_or(String::new(), |l| format!(", line {l}"));
    Err(StudyError::Context {
        context: format!("{}{line}: reward = {program:?}", path.display()),
        source: Box::new(e),
    })
}

/// The line (from 1) of the top-level `reward` in the TOML file at `path`.
fn reward_line(path: &Path) -> Option<usize> {
    #[derive(Deserialize)]
    struct At {
        reward: Option<toml::Spanned<String>>,
    }
    let text = std::fs::read_to_string(path).ok()?;
    let at: At = toml::from_str(&text).ok()?;
    Some(text[..at.reward?.span().start].matches('\n').count() + 1)
}

/// A resumed run's new `--total-steps` goes on from where it is: a total
/// below the steps already trained would undo nothing, so it is refused.
fn check_new_total(dir: &Path, train: &TrainConfig, total: usize) -> Result<()> {
    let done = serl_train::read_metrics(&dir.join("metrics.jsonl"))?
        .last()
        .map_or(0, |r| r.env_steps);
    if train.planned().1 < done {
        crate::bail!(
            "--total-steps {total}: the run in {} has already trained {done} steps",
            dir.display()
        );
    }
    Ok(())
}

/// Whether `out` may take the run asked for (`seeds` trainings, or a
/// policy per window with `walk_forward`): a new run must not write over
/// a training there, and a resumed one goes on from it.
pub fn check_run_dir(out: &Path, resume: bool, (seeds, walk_forward): (usize, bool)) -> Result<()> {
    if seeds == 0 {
        crate::bail!("--seeds must be at least 1");
    }
    if walk_forward && seeds > 1 {
        crate::bail!(
            "--walk-forward trains one seed per window; run it once per --seed instead of --seeds"
        );
    }
    let taken = out.join("checkpoint").join("state.json").exists()
        || out.join("seeds.json").exists()
        || out.join("window-0").exists();
    if !resume && taken {
        crate::bail!(
            "{} already holds a training run; continue it with `serl train --resume --out {}` (and the same --seeds) or choose another --out",
            out.display(),
            out.display()
        );
    }
    if resume {
        check_same_kind(out, (seeds, walk_forward))?;
    }
    Ok(())
}

/// A resume never changes a run's kind: a walk-forward run resumes as
/// one, a run of several seeds as one, a single training as one (a
/// walk-forward run resumed without `--walk-forward` once trained a new
/// policy on the whole data beside its windows).
fn check_same_kind(out: &Path, (seeds, walk_forward): (usize, bool)) -> Result<()> {
    let d = out.display();
    let was_walk_forward = out.join("window-0").exists();
    let was_seeds = out.join("seeds.json").exists()
        || std::fs::read_dir(out).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("seed-"))
        });
    let was_single = out.join("checkpoint").join("state.json").exists();
    if was_walk_forward && !walk_forward {
        crate::bail!(
            "{d} is a walk-forward run: resume it with `serl train --resume --out {d} --walk-forward`"
        );
    }
    if walk_forward && !was_walk_forward && (was_seeds || was_single) {
        crate::bail!("{d} is not a walk-forward run: resume it without --walk-forward");
    }
    if was_seeds && seeds == 1 {
        crate::bail!(
            "{d} trained several seeds: resume it with `serl train --resume --out {d}` and the same --seeds"
        );
    }
    if was_single && !was_seeds && seeds > 1 {
        crate::bail!("{d} is a single training: resume it without --seeds");
    }
    Ok(())
}

/// Writes the run's config into `out/train.toml`: a new run's, or a
/// resumed run's with its new `total_steps` (checked against the steps
/// already trained).
pub fn write_config(
    out: &Path,
    cfg: &TrainFile,
    resume: bool,
    total_steps: Option<usize>,
) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    if let Some(total) = total_steps.filter(|_| resume) {
        check_new_total(out, &cfg.train, total)?;
    }
    if !resume || total_steps.is_some() {
        std::fs::write(out.join("train.toml"), toml::to_string(cfg)?)
            .with_context(|| format!("writing {}", out.join("train.toml").display()))?;
    }
    Ok(())
}

/// One training of `cfg` into the run directory `dir` (resumed when asked
/// and a checkpoint is there).
pub fn train_one(
    cfg: &TrainFile,
    market: &MarketData,
    (train_orders, val_orders): (&[ParentOrder], &[ParentOrder]),
    dir: &Path,
    resume: bool,
    hooks: &TrainingHooks,
) -> Result<TrainOutcome> {
    let reward_critic = crate::llm::for_training(
        &cfg.train.reward_critic,
        &cfg.llm,
        cfg.prompts.as_ref(),
        cfg.train.seed,
        dir,
    )?;
    let session = TrainSession {
        config: cfg.train.clone(),
        reward: reward_of(cfg)?,
        reward_program: Some(reward_program(cfg)?),
        reward_critic,
        market,
        env: &cfg.env,
        population: cfg.market.clone(),
        train_orders,
        val_orders,
        eval_market: cfg.market.clone(),
    };
    let resume = resume && dir.join("checkpoint").join("state.json").exists();
    let (mut session, mut on_update) = (Some(session), Some((hooks.on_update)(&cfg.train)));
    let mut out = None;
    (hooks.around)(&mut || {
        if let Some(s) = session.take() {
            out = Some(s.run(Some(dir.to_path_buf()), resume, on_update.take()));
        }
    });
    Ok(out.context("the training was not run")??)
}

/// What a training run asks besides its config ([`run`]).
pub struct RunRequest<'a> {
    /// The run directory.
    pub out: &'a Path,
    /// Go on from the checkpoint in `out`.
    pub resume: bool,
    /// A resumed run's new total of environment steps.
    pub total_steps: Option<usize>,
}

/// What a training loaded before it trained.
#[derive(Debug, Clone, Copy)]
pub struct Loaded {
    /// Orders it trains on.
    pub train_orders: usize,
    /// Orders it validates on.
    pub val_orders: usize,
    /// Symbols of the data.
    pub symbols: usize,
}

/// One training of `cfg`, as `serl train` runs it: the run directory
/// checked, the bars loaded (`warn` hears what the load left out) and
/// split into orders (`loaded` hears how many), the config written, and
/// the policy trained or resumed. `serl train` and the Python package
/// both call this.
pub fn run(
    cfg: &TrainFile,
    req: &RunRequest,
    hooks: &TrainingHooks,
    warn: &dyn Fn(&str),
    loaded: &dyn Fn(&Loaded),
) -> Result<TrainOutcome> {
    let loading = tracing::info_span!("phase", label = %"load").entered();
    let (ds, data_path) = load_bars(cfg, req, (1, false), warn)?;
    let (market, train_orders, val_orders) = prepare(cfg, (&ds, &data_path), req, loaded)?;
    drop(loading);
    let orders = (&train_orders[..], &val_orders[..]);
    train_one(cfg, &market, orders, req.out, req.resume, hooks)
}

/// The bars `cfg` trains on (`warn` hears what the load left out), loaded
/// once the run directory may take the run asked for (`seeds` trainings,
/// or a policy per window: [`check_run_dir`]), and the path they came
/// from.
pub(crate) fn load_bars(
    cfg: &TrainFile,
    req: &RunRequest,
    how_many: (usize, bool),
    warn: &dyn Fn(&str),
) -> Result<(serl_data::Dataset, std::path::PathBuf)> {
    let Some(data_path) = cfg.data_path.clone() else {
        crate::bail!("--data is required (the bars to train on)");
    };
    check_run_dir(req.out, req.resume, how_many)?;
    let ds = crate::data::load_data(&data_path, &cfg.data, warn)?;
    Ok((ds, data_path))
}

/// What the bars give a training of `cfg`: the market, and the orders it
/// trains and validates on (`loaded` hears how many); the config written
/// into the run directory.
pub(crate) fn prepare(
    cfg: &TrainFile,
    (ds, data_path): (&serl_data::Dataset, &Path),
    req: &RunRequest,
    loaded: &dyn Fn(&Loaded),
) -> Result<(MarketData, Vec<ParentOrder>, Vec<ParentOrder>)> {
    let (train_orders, val_orders) = orders(ds, cfg, data_path)?;
    let market = crate::data::market_data(ds, &cfg.data);
    loaded(&Loaded {
        train_orders: train_orders.len(),
        val_orders: val_orders.len(),
        symbols: ds.symbols().len(),
    });
    write_config(req.out, cfg, req.resume, req.total_steps)?;
    Ok((market, train_orders, val_orders))
}

/// One seed's training, as `seeds.json` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct SeedRun {
    /// The training's seed.
    pub seed: u64,
    /// Its run directory (`OUT/seed-<seed>`).
    pub run_dir: String,
    /// Its best validation PA, if it was validated.
    pub best_val_pa: Option<f64>,
    /// Its last validation PA, if any.
    pub final_val_pa: Option<f64>,
    /// Environment steps it took.
    pub env_steps: usize,
    /// Its wall seconds.
    pub secs: f64,
}

/// `--seeds N`: N independent trainings, each in `OUT/seed-<seed>/`, and
/// their validation PA per seed and across seeds (`OUT/seeds.json`).
/// `starting` hears each seed's number, place and directory first.
pub fn train_seeds(
    cfg: &TrainFile,
    market: &MarketData,
    orders: (&[ParentOrder], &[ParentOrder]),
    (out, seeds, resume): (&Path, usize, bool),
    hooks: &TrainingHooks,
    starting: &dyn Fn(u64, usize, &Path),
) -> Result<Vec<SeedRun>> {
    let mut runs = Vec::new();
    for k in 0..seeds {
        let seed = cfg.train.seed + k as u64;
        let dir = out.join(format!("seed-{seed}"));
        starting(seed, k, &dir);
        let mut c = cfg.clone();
        c.train.seed = seed;
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("train.toml"), toml::to_string(&c)?)?;
        let trained = train_one(&c, market, orders, &dir, resume, hooks)?;
        runs.push(SeedRun {
            seed,
            run_dir: dir.display().to_string(),
            best_val_pa: trained.best_val,
            final_val_pa: trained.records.last().and_then(|r| r.val_pa),
            env_steps: trained.env_steps,
            secs: trained.secs,
        });
    }
    let (mean, std) = seeds_mean(&runs);
    let summary =
        serde_json::json!({"seeds": runs, "best_val_pa_mean": mean, "best_val_pa_std": std});
    serl_report::write_atomic(
        &out.join("seeds.json"),
        serde_json::to_string_pretty(&summary)?.as_bytes(),
    )?;
    Ok(runs)
}

/// The seeds' best validation PA: mean (none without validation orders,
/// not 0) and standard deviation.
fn seeds_mean(runs: &[SeedRun]) -> (Option<f64>, f64) {
    let best: Vec<f64> = runs.iter().filter_map(|r| r.best_val_pa).collect();
    let mean = (!best.is_empty()).then(|| serl_eval::mean(&best));
    (mean, serl_eval::std_dev(&best))
}

/// A trained policy from a run directory, for a backtest, labelled
/// `policy:<directory name>`.
pub fn policy_factory(dir: &Path) -> Result<serl_eval::StrategyFactory> {
    let name = dir
        .file_name()
        .map_or("policy".into(), |n| n.to_string_lossy().to_string());
    policy_factory_labelled(dir, &format!("policy:{name}"))
}

/// A trained policy from a run directory under the report label `label`.
pub fn policy_factory_labelled(dir: &Path, label: &str) -> Result<serl_eval::StrategyFactory> {
    if !dir.is_dir() {
        crate::bail!("policy directory {} does not exist", dir.display());
    }
    let policy =
        load_run_policy(dir, &serl_train::DeviceChoice::Cpu.device()?).with_context(|| {
            format!(
                "loading the policy in {} (trained policies come from `serl train`)",
                dir.display()
            )
        })?;
    Ok(serl_evolve::policy_factory(label.to_string(), policy))
}

/// The train orders and the validation orders (spread over the split to
/// `[validation] max_orders`) of `ds` under `cfg`; the train split must
/// have some.
pub fn orders(
    ds: &serl_data::Dataset,
    cfg: &TrainFile,
    data_path: &Path,
) -> Result<(Vec<ParentOrder>, Vec<ParentOrder>)> {
    use serl_data::Split;
    let train = serl_env::generate_orders(ds, Split::Train, &cfg.data, &cfg.orders)?;
    let val = serl_env::generate_orders(ds, Split::Validation, &cfg.data, &cfg.orders)?;
    let val = match cfg.validation.max_orders {
        0 => val,
        max => serl_env::spread_orders(&val, max),
    };
    if train.is_empty() {
        crate::bail!("the train split of {} has no orders", data_path.display());
    }
    Ok((train, val))
}

/// The seeds' validation PA as the terminal shows it: per seed, then the
/// mean ± std of their best.
pub fn seeds_table(runs: &[SeedRun]) -> String {
    let mut out = String::new();
    let (mean, std) = seeds_mean(runs);
    let _ = writeln!(
        out,
        "{:>8} {:>14} {:>14} {:>10}",
        "seed", "best val PA", "final val PA", "seconds"
    );
    let pa = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
    for r in runs {
        let _ = writeln!(
            out,
            "{:>8} {:>14} {:>14} {:>10.1}",
            r.seed,
            pa(r.best_val_pa),
            pa(r.final_val_pa),
            r.secs
        );
    }
    let scored = runs.iter().filter(|r| r.best_val_pa.is_some()).count();
    let _ = writeln!(
        out,
        "best validation PA over {scored} seeds: {} ± {std:.3} bps (mean ± std)",
        pa(mean)
    );
    out
}
