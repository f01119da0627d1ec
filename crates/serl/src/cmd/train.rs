//! `serl train`: PPO or DDQN on the train split, selected on the
//! validation split, in the hybrid static + dynamic environment.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use super::read_toml;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use serl_data::{DataConfig, Split};
use serl_env::TeamMode;
use serl_env::{
    generate_orders, spread_orders, EnvConfig, MarketConfig, MarketData, OrderConfig, ParentOrder,
};
use serl_train::{
    load_run_policy, Algo, Critic, DeviceChoice, HybridMode, TeamConfig, TrainConfig, TrainSession,
    UpdateRecord,
};

#[derive(Args)]
pub struct TrainArgs {
    /// A train config: [data], [orders], [env], [market], [train] tables.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Bar data: a file or folder (CSV, CSV.gz, LEAN zips). With --resume,
    /// defaults to the run's.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// The run directory.
    #[arg(long)]
    pub out: PathBuf,
    /// Continue the run in --out from its last checkpoint, with its config.
    #[arg(long)]
    pub resume: bool,
    /// The learner: PPO or DDQN for one agent; MAPPO (a centralised
    /// critic) or independent PPO for a team (`--agents N`).
    #[arg(long, value_enum)]
    pub algo: Option<AlgoChoice>,
    /// Learning agents working each parent order together (2 to 16: a
    /// team, `[train.team] agents`); with --algo mappo or ippo, 4 unless
    /// the config says.
    #[arg(long)]
    pub agents: Option<usize>,
    /// Train the team without messages (drops `[train.team]
    /// communication`): the no-communication side of the gain from talking.
    #[arg(long)]
    pub no_communication: bool,
    /// Environment steps to train for (overrides the config).
    #[arg(long)]
    pub total_steps: Option<usize>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Minutes between decisions (overrides the config).
    #[arg(long)]
    pub decision_minutes: Option<u16>,
    /// A team's mode (cooperative: one parent order split across the
    /// agents; competitive: independent orders competing). The hybrid
    /// weighting's names are still read here too, as --hybrid.
    #[arg(long, value_enum)]
    pub mode: Option<ModeChoice>,
    /// Hybrid weighting, or a single environment for ablations.
    #[arg(long, value_enum)]
    pub hybrid: Option<HybridChoice>,
    #[arg(long, value_enum)]
    pub device: Option<DeviceArg>,
    /// Order size as a fraction of ADV (overrides the configs).
    #[arg(long, allow_negative_numbers = true, value_parser = super::positive)]
    pub qty_adv: Option<f64>,
    /// Train this many independent policies, from seeds `seed`, `seed + 1`,
    /// ..., each in `OUT/seed-<seed>/`, and report their validation PA
    /// per seed and as mean ± std (`OUT/seeds.json`).
    #[arg(long, default_value_t = 1)]
    pub seeds: usize,
    /// Train a policy on each rolling window of `[walk_forward]` and test
    /// it on the sessions after it (`OUT/window-K/`, the pooled report in
    /// `OUT/walk-forward.html`).
    #[arg(long)]
    pub walk_forward: bool,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum AlgoChoice {
    Ppo,
    Ddqn,
    /// A team sharing one policy, with a centralised critic.
    Mappo,
    /// A team sharing one policy, each agent's critic its own.
    Ippo,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ModeChoice {
    Cooperative,
    Competitive,
    Adaptive,
    Fixed,
    StaticOnly,
    DynamicOnly,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum HybridChoice {
    Adaptive,
    Fixed,
    StaticOnly,
    DynamicOnly,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum DeviceArg {
    Cpu,
    Wgpu,
}

/// Validation settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ValidationConfig {
    /// Validation orders scored each time (spread evenly over the split).
    pub max_orders: usize,
}

impl Default for ValidationConfig {
    fn default() -> Self {
        ValidationConfig { max_orders: 300 }
    }
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainFile {
    pub data: DataConfig,
    pub orders: OrderConfig,
    pub env: EnvConfig,
    pub market: MarketConfig,
    pub train: TrainConfig,
    pub validation: ValidationConfig,
    /// A reward program in the reward module's language (docs/modules.md),
    /// for example `step_pa + (fill_qty - 1 / steps) * timing`; the default
    /// reward when absent.
    pub reward: Option<String>,
    /// The rolling windows of `serl train --walk-forward`.
    pub walk_forward: serl_eval::walk_forward::WalkForwardConfig,
    /// Where the bars came from (filled in by `serl train`).
    pub data_path: Option<PathBuf>,
    /// The language model of an LLM reward critic
    /// (`[train.reward_critic] critic = "llm"`; docs/hierarchy.md): the
    /// `[llm]` table of the evolve configs.
    pub llm: super::evolve::LlmSection,
    /// The templates an LLM critic renders (`reward_critic.j2`; default
    /// `prompts/`).
    pub prompts: Option<PathBuf>,
}

fn resolve(a: &TrainArgs) -> Result<TrainFile> {
    let saved = a.out.join("train.toml");
    let mut cfg: TrainFile = if a.resume {
        if !saved.exists() {
            bail!(
                "{} has no train.toml: it is not a run directory of `serl train`",
                a.out.display()
            );
        }
        read_toml(&saved)?
    } else {
        match &a.config {
            Some(p) => read_toml(p)?,
            None => TrainFile::default(),
        }
    };
    if let Some(d) = &a.data {
        cfg.data_path = Some(d.clone());
    }
    if let Some(p) = a
        .config
        .as_ref()
        .filter(|_| !a.resume)
        .or(a.resume.then_some(&saved))
    {
        check_reward(&cfg, p)?;
    }
    if a.resume {
        refuse_changes_on_resume(a, &cfg)?;
        // The loop runs the updates from the checkpoint's up to the total,
        // and nothing else depends on it: a new total continues the run.
        if let Some(n) = a.total_steps {
            cfg.train.total_steps = n;
        }
        return Ok(cfg);
    }
    apply_flags(a, &mut cfg)?;
    Ok(cfg)
}

/// The command line's settings over a config (a new run's, or what a
/// resumed run would become).
fn apply_flags(a: &TrainArgs, cfg: &mut TrainFile) -> Result<()> {
    apply_team_args(a, &mut cfg.train)?;
    if let Some(n) = a.total_steps {
        cfg.train.total_steps = n;
    }
    if let Some(s) = a.seed {
        cfg.train.seed = s;
    }
    if let Some(k) = a.decision_minutes {
        cfg.env.decision_minutes = k;
    }
    if let Some(q) = a.qty_adv {
        cfg.orders.quantity = serl_env::Quantity::AdvFraction(q);
    }
    let hybrid = a.hybrid.map(|h| match h {
        HybridChoice::Adaptive => HybridMode::Adaptive,
        HybridChoice::Fixed => HybridMode::Fixed,
        HybridChoice::StaticOnly => HybridMode::StaticOnly,
        HybridChoice::DynamicOnly => HybridMode::DynamicOnly,
    });
    let old_hybrid = match a.mode {
        Some(ModeChoice::Adaptive) => Some(HybridMode::Adaptive),
        Some(ModeChoice::Fixed) => Some(HybridMode::Fixed),
        Some(ModeChoice::StaticOnly) => Some(HybridMode::StaticOnly),
        Some(ModeChoice::DynamicOnly) => Some(HybridMode::DynamicOnly),
        _ => None,
    };
    if let Some(m) = hybrid.or(old_hybrid) {
        cfg.train.hybrid.mode = m;
    }
    if let Some(d) = a.device {
        cfg.train.device = match d {
            DeviceArg::Cpu => DeviceChoice::Cpu,
            DeviceArg::Wgpu => DeviceChoice::Wgpu,
        };
    }
    cfg.data
        .validate()
        .map_err(|m| anyhow::anyhow!("[data] {m}"))?;
    cfg.env.validate()?;
    if let serl_env::ActionSpace::Discrete(_) = cfg.env.action {
        bail!("[env] action: training sets its discrete actions in [train.ppo] discrete or [train.ddqn] actions; leave [env] action continuous");
    }
    Ok(())
}

/// A resumed run keeps the config it was started with (`OUT/train.toml`);
/// only its length (`--total-steps`) and the data's place may change. The
/// flags (and `--config`) are applied as a new run would apply them, and
/// any setting that would come out different is refused, named, rather
/// than ignored; flags that repeat the run's settings are fine.
fn refuse_changes_on_resume(a: &TrainArgs, saved: &TrainFile) -> Result<()> {
    let mut wanted = match &a.config {
        Some(p) => read_toml(p)?,
        None => saved.clone(),
    };
    wanted.data_path = saved.data_path.clone();
    apply_flags(a, &mut wanted)?;
    wanted.train.total_steps = saved.train.total_steps;
    let (was, now) = (serde_json::to_value(saved)?, serde_json::to_value(&wanted)?);
    let mut changed = Vec::new();
    differences("", &was, &now, &mut changed);
    if changed.is_empty() {
        return Ok(());
    }
    bail!(
        "a resumed run keeps the settings in {} (only --total-steps and --data may change): the command line would change {}",
        a.out.join("train.toml").display(),
        changed.join(", ")
    )
}

/// The dotted paths at which `a` and `b` differ, with both values.
fn differences(at: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value::Object;
    match (a, b) {
        (Object(x), Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let null = serde_json::Value::Null;
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                differences(
                    &path,
                    x.get(k).unwrap_or(&null),
                    y.get(k).unwrap_or(&null),
                    out,
                );
            }
        }
        _ if a != b => out.push(format!("{at} (the run has {a}, now {b})")),
        _ => {}
    }
}

/// The config's reward program compiles; when not, the error names the
/// config file and the line the program is on, as well as the place in the
/// program.
fn check_reward(cfg: &TrainFile, path: &Path) -> Result<()> {
    let Some(program) = &cfg.reward else {
        return Ok(());
    };
    let Err(e) = serl_design::RewardModule::compile(program) else {
        return Ok(());
    };
    let line = reward_line(path).map_or(String::new(), |l| format!(", line {l}"));
    Err(anyhow::Error::new(e).context(format!("{}{line}: reward = {program:?}", path.display())))
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

/// `--algo`, `--agents` and a team `--mode` on the config's `[train]`:
/// MAPPO and IPPO train a team (4 agents unless the config or `--agents`
/// says), whose scripted peers default to none.
fn apply_team_args(a: &TrainArgs, train: &mut TrainConfig) -> Result<()> {
    let critic = match a.algo {
        Some(AlgoChoice::Ppo) | None => None,
        Some(AlgoChoice::Ddqn) => {
            train.algo = Algo::Ddqn;
            None
        }
        Some(AlgoChoice::Mappo) => Some(Critic::Centralized),
        Some(AlgoChoice::Ippo) => Some(Critic::Local),
    };
    if matches!(a.algo, Some(AlgoChoice::Ppo)) {
        train.algo = Algo::Ppo;
    }
    let mode = match a.mode {
        Some(ModeChoice::Cooperative) => Some(TeamMode::Cooperative),
        Some(ModeChoice::Competitive) => Some(TeamMode::Competitive),
        _ => None,
    };
    if a.no_communication {
        if let Some(t) = &mut train.team {
            t.communication = None;
        }
    }
    if a.agents == Some(1) {
        if critic.is_some() {
            bail!(
                "--agents 1 is a single agent: --algo mappo and ippo train a team of 2 to {}",
                serl_env::MAX_AGENTS
            );
        }
        if let Some(t) = &mut train.team {
            t.agents = 1;
        }
        return Ok(());
    }
    let wants_team = critic.is_some() || a.agents.is_some_and(|n| n > 1) || mode.is_some();
    if !wants_team {
        return Ok(());
    }
    if train.algo != Algo::Ppo {
        bail!("a team learns with PPO: use --algo mappo or --algo ippo, not ddqn");
    }
    let team = train.team.get_or_insert_with(|| TeamConfig {
        peers: 0,
        ..TeamConfig::default()
    });
    if let Some(c) = critic {
        team.critic = c;
    }
    if let Some(m) = mode {
        team.mode = m;
    }
    match a.agents {
        Some(n) => team.agents = n,
        None if team.agents < 2 => team.agents = 4,
        None => {}
    }
    if team.agents < 2 {
        bail!(
            "--agents {}: a team has 2 to {} agents",
            team.agents,
            serl_env::MAX_AGENTS
        );
    }
    Ok(())
}

/// The config's reward program, or the default reward.
pub(super) fn reward_of(cfg: &TrainFile) -> Result<Arc<dyn serl_env::Reward>> {
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
        format!(
            "step_pa - {} * remaining_inv^2 / steps - {} * done * remaining_inv^2",
            cfg.env.inventory_penalty, cfg.env.terminal_penalty
        )
    });
    serl_design::RewardModule::compile(&program)
        .with_context(|| format!("[train config] reward = {program:?}"))
}

pub fn run(a: TrainArgs) -> Result<ExitCode> {
    crate::interrupt::install(resume_hint(&a))?;
    let cfg = resolve(&a)?;
    let Some(data_path) = cfg.data_path.clone() else {
        bail!("--data is required (the bars to train on)");
    };
    if a.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let taken = a.out.join("checkpoint").join("state.json").exists()
        || a.out.join("seeds.json").exists()
        || a.out.join("window-0").exists();
    if !a.resume && taken {
        bail!(
            "{} already holds a training run; continue it with `serl train --resume --out {}` (and the same --seeds) or choose another --out",
            a.out.display(),
            a.out.display()
        );
    }
    let ds = super::load_data(&data_path, &cfg.data)?;
    if a.walk_forward {
        if a.seeds > 1 {
            bail!("--walk-forward trains one seed per window; run it once per --seed instead of --seeds");
        }
        return super::walk_forward::run(&cfg, &ds, &data_path, &a.out, a.resume);
    }
    let train_orders = generate_orders(&ds, Split::Train, &cfg.data, &cfg.orders)?;
    let val_orders = generate_orders(&ds, Split::Validation, &cfg.data, &cfg.orders)?;
    let val_orders = match cfg.validation.max_orders {
        0 => val_orders,
        max => spread_orders(&val_orders, max),
    };
    if train_orders.is_empty() {
        bail!("the train split of {} has no orders", data_path.display());
    }
    let market = super::market_data(&ds, &cfg.data);
    eprintln!(
        "{} train orders, {} validation orders over {} symbols; {} environments ({} dynamic)",
        train_orders.len(),
        val_orders.len(),
        ds.symbols().len(),
        cfg.train.n_envs,
        cfg.train.dynamic_envs()
    );
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    if a.resume {
        check_new_total(&a, &cfg.train)?;
    }
    if !a.resume || a.total_steps.is_some() {
        std::fs::write(a.out.join("train.toml"), toml::to_string(&cfg)?)
            .with_context(|| format!("writing {}", a.out.join("train.toml").display()))?;
    }
    let orders = (&train_orders[..], &val_orders[..]);
    if a.seeds > 1 {
        return train_seeds(&a, &cfg, &market, orders, &data_path);
    }
    let out = train_one(&cfg, &market, orders, &a.out, a.resume)?;
    print_summary(&out.records);
    println!(
        "{} environment steps in {:.1}s; best validation PA {}; report: {}",
        out.env_steps,
        out.secs,
        out.best_val.map_or("-".into(), |v| format!("{v:.3} bps")),
        a.out.join("report.html").display()
    );
    if cfg.train.learning_team().is_some() {
        println!(
            "backtest the team: serl backtest --data {} --split test --team {} --strategy twap --silence --out {}/backtest",
            data_path.display(),
            a.out.display(),
            a.out.display()
        );
    } else {
        println!(
            "backtest it: serl backtest --data {} --split test --strategy twap --strategy policy:{} --out {}/backtest",
            data_path.display(),
            a.out.display(),
            a.out.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What to say when a signal stops `serl train`: how to go on, once the
/// run has a directory to go on from.
fn resume_hint(a: &TrainArgs) -> impl Fn() -> String + Send + Sync + 'static {
    let out = a.out.clone();
    let seeds = if a.seeds > 1 {
        format!(" --seeds {}", a.seeds)
    } else {
        String::new()
    };
    let wf = if a.walk_forward {
        " --walk-forward"
    } else {
        ""
    };
    move || {
        if out.join("train.toml").exists() {
            format!(
                "resume with `serl train --resume --out {}{seeds}{wf}`",
                out.display()
            )
        } else {
            "stopped before training began: nothing to resume".into()
        }
    }
}

/// A resumed run's `--total-steps` goes on from where it is: a total below
/// the steps already trained would undo nothing, so it is refused.
fn check_new_total(a: &TrainArgs, train: &TrainConfig) -> Result<()> {
    let Some(n) = a.total_steps else {
        return Ok(());
    };
    let done = serl_train::read_metrics(&a.out.join("metrics.jsonl"))?
        .last()
        .map_or(0, |r| r.env_steps);
    if train.planned().1 < done {
        bail!(
            "--total-steps {n}: the run in {} has already trained {done} steps",
            a.out.display()
        );
    }
    Ok(())
}

/// One training of `cfg` into the run directory `dir` (resumed when asked
/// and a checkpoint is there), with a progress bar.
pub(super) fn train_one(
    cfg: &TrainFile,
    market: &MarketData,
    (train_orders, val_orders): (&[ParentOrder], &[ParentOrder]),
    dir: &Path,
    resume: bool,
) -> Result<serl_train::TrainOutcome> {
    let reward_critic = super::llm::for_training(
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
    let bar = training_bar(&cfg.train);
    let plain = crate::progress::PlainProgress::for_bar(&bar, "train", "steps");
    let shown = bar.clone();
    let on_update: serl_train::OnUpdate = Box::new(move |r| {
        show_update(&shown, plain.as_ref(), r);
        // The update is on disk (its metrics, and its checkpoint when due):
        // a stop asked for by a signal happens here.
        crate::interrupt::at_clean_point();
    });
    let resume = resume && dir.join("checkpoint").join("state.json").exists();
    let out = crate::interrupt::training(|| {
        session.run(Some(dir.to_path_buf()), resume, Some(on_update))
    })?;
    bar.finish_and_clear();
    Ok(out)
}

/// One seed's training, as `seeds.json` lists it.
#[derive(Debug, Serialize)]
struct SeedRun {
    seed: u64,
    run_dir: String,
    best_val_pa: Option<f64>,
    final_val_pa: Option<f64>,
    env_steps: usize,
    secs: f64,
}

/// `--seeds N`: N independent trainings, each in `OUT/seed-<seed>/`, then
/// their validation PA per seed and across seeds.
fn train_seeds(
    a: &TrainArgs,
    cfg: &TrainFile,
    market: &MarketData,
    orders: (&[ParentOrder], &[ParentOrder]),
    data_path: &Path,
) -> Result<ExitCode> {
    let mut runs = Vec::new();
    for k in 0..a.seeds {
        let seed = cfg.train.seed + k as u64;
        let dir = a.out.join(format!("seed-{seed}"));
        eprintln!("seed {seed} ({} of {}): {}", k + 1, a.seeds, dir.display());
        let mut c = cfg.clone();
        c.train.seed = seed;
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("train.toml"), toml::to_string(&c)?)?;
        let out = train_one(&c, market, orders, &dir, a.resume)?;
        runs.push(SeedRun {
            seed,
            run_dir: dir.display().to_string(),
            best_val_pa: out.best_val,
            final_val_pa: out.records.last().and_then(|r| r.val_pa),
            env_steps: out.env_steps,
            secs: out.secs,
        });
    }
    let best: Vec<f64> = runs.iter().filter_map(|r| r.best_val_pa).collect();
    // No validation orders, no best: the mean is then none, not 0.
    let mean = (!best.is_empty()).then(|| serl_eval::mean(&best));
    let std = serl_eval::std_dev(&best);
    println!(
        "{:>8} {:>14} {:>14} {:>10}",
        "seed", "best val PA", "final val PA", "seconds"
    );
    let pa = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
    for r in &runs {
        println!(
            "{:>8} {:>14} {:>14} {:>10.1}",
            r.seed,
            pa(r.best_val_pa),
            pa(r.final_val_pa),
            r.secs
        );
    }
    println!(
        "best validation PA over {} seeds: {} ± {std:.3} bps (mean ± std)",
        best.len(),
        pa(mean)
    );
    let summary =
        serde_json::json!({"seeds": runs, "best_val_pa_mean": mean, "best_val_pa_std": std});
    serl_report::write_atomic(
        &a.out.join("seeds.json"),
        serde_json::to_string_pretty(&summary)?.as_bytes(),
    )?;
    let dirs: Vec<String> = runs
        .iter()
        .map(|r| format!("--strategy policy:{}", r.run_dir))
        .collect();
    println!(
        "backtest them: serl backtest --data {} --split test --strategy twap {} --out {}/backtest",
        data_path.display(),
        dirs.join(" "),
        a.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The training progress bar: environment steps, their rate, and the
/// latest losses, hybrid weights and PA.
fn training_bar(cfg: &serl_train::TrainConfig) -> ProgressBar {
    let (_, steps) = cfg.planned();
    ProgressBar::new(steps as u64).with_style(
        ProgressStyle::with_template(
            "{spinner} train [{bar:30}] {pos}/{len} steps  {per_sec}  eta {eta}  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    )
}

/// One update on the bar, or as a plain line in a log.
fn show_update(
    bar: &ProgressBar,
    plain: Option<&crate::progress::PlainProgress>,
    r: &UpdateRecord,
) {
    let msg = format!(
        "loss {:.3}  α {:.2} β {:.2}  PA {}{}",
        r.loss,
        r.alpha,
        r.beta,
        r.episode_pa.map_or("-".into(), |p| format!("{p:.2}")),
        r.val_pa.map_or(String::new(), |p| format!("  val {p:.2}"))
    );
    if let Some(p) = plain {
        p.at(r.env_steps as u64, &msg);
    }
    bar.set_position(r.env_steps as u64);
    bar.set_message(msg);
}

fn print_summary(records: &[UpdateRecord]) {
    let stride = (records.len() / 10).max(1);
    println!(
        "{:>7} {:>9} {:>9} {:>6} {:>6} {:>9} {:>9} {:>8}",
        "update", "steps", "loss", "α", "β", "ep PA", "val PA", "steps/s"
    );
    for (i, r) in records.iter().enumerate() {
        if i % stride != 0 && i + 1 != records.len() {
            continue;
        }
        println!(
            "{:>7} {:>9} {:>9.4} {:>6.3} {:>6.3} {:>9} {:>9} {:>8.0}",
            r.update + 1,
            r.env_steps,
            r.loss,
            r.alpha,
            r.beta,
            r.episode_pa.map_or("-".into(), |v| format!("{v:.2}")),
            r.val_pa.map_or("-".into(), |v| format!("{v:.2}")),
            r.steps_per_sec
        );
    }
    println!("α, β: the weights of the static replay's and the dynamic market's losses (L = α·L_static + β·L_dynamic, docs/train.md); ep PA: mean whole-order PA of the update's finished episodes, bps; val PA: the validation PA, bps (docs/metrics.md)");
}

/// A trained policy from a run directory, for `serl backtest`, labelled
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
        bail!("policy directory {} does not exist", dir.display());
    }
    let policy =
        load_run_policy(dir, &serl_train::DeviceChoice::Cpu.device()?).with_context(|| {
            format!(
                "loading the policy in {} (trained policies come from `serl train`)",
                dir.display()
            )
        })?;
    let label = label.to_string();
    Ok(serl_eval::StrategyFactory {
        label: label.clone(),
        make: Box::new(move || {
            Box::new(serl_train::PolicyStrategy::new(
                policy.clone(),
                label.clone(),
            ))
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_train_config_parses_and_validates() {
        let configs = super::super::shipped_configs("train");
        for (name, p) in &configs {
            let cfg: TrainFile = read_toml(p).unwrap();
            cfg.env.validate().unwrap();
            cfg.train
                .validate(cfg.train.obs_dim())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            reward_of(&cfg).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        }
        assert!(configs.len() >= 2, "found {} train configs", configs.len());
    }
}
