//! `serl backtest`: strategies over parent orders, with a report.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::read_toml;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use serl_cluster::{ClusterConfig, EngineKind};
use serl_data::{DataConfig, Split};
use serl_env::{
    generate_orders, DynamicVenue, EnvConfig, LobsterDay, LobsterVenue, MarketData, OrderConfig,
    Quantity, Reward, StaticVenue, Venue,
};
use serl_eval::{
    run_backtest, write_report, Provenance, ReportData, StrategyFactory, StrategySpec,
};

#[derive(Args)]
pub struct BacktestArgs {
    /// Bar data: a file or folder (CSV, CSV.gz, LEAN zips).
    #[arg(long, required_unless_present = "lobster")]
    pub data: Option<PathBuf>,
    /// LOBSTER days instead of bars: a sample zip or a folder of them
    /// (the deepest file of each symbol). Orders are drawn from every day;
    /// `--env lobster` fills resting orders by their place in the real
    /// queue, `--env all` compares that with the static and dynamic
    /// models (docs/placement.md).
    #[arg(long, conflicts_with = "data")]
    pub lobster: Option<PathBuf>,
    /// Which dates to draw orders from.
    #[arg(long, default_value = "test")]
    pub split: Split,
    /// twap, vwap, pov[:rate], ac[:risk_aversion], oracle,
    /// twap-passive[:PLACEMENT] (touch, touch+TICKS, mid, mid+BPS),
    /// peg-mid, policy:RUN_DIR. Repeat for several. With --team, each
    /// baseline plays once per member (N TWAPs, say), and alone on the
    /// whole order for the crowding cost.
    #[arg(long = "strategy", required_unless_present = "teams")]
    pub strategies: Vec<String>,
    /// Where the orders play (static unless a team plays: dynamic).
    #[arg(long, value_enum)]
    pub env: Option<EnvChoice>,
    /// A team trained by `serl train --algo mappo|ippo` (its run
    /// directory): every parent order is worked by --agents members
    /// sharing its policy and hearing each other. Repeat for several;
    /// per-agent and team tables, paired comparisons and the crowding cost
    /// (docs/team.md).
    #[arg(long = "team")]
    pub teams: Vec<PathBuf>,
    /// Members per team (default: the trained team's size). Without
    /// --team, the baselines alone play as teams of N.
    #[arg(long)]
    pub agents: Option<usize>,
    /// How the members share the work (default: as the team trained).
    #[arg(long, value_enum)]
    pub mode: Option<super::team_backtest::TeamModeArg>,
    /// Also play every team that talks with its members hearing nothing
    /// (the gain from communication is the difference).
    #[arg(long)]
    pub silence: bool,
    /// Also play the dynamic market with held-out populations (momentum-
    /// heavy, thin book, informed-heavy: serl_market::held_out_profiles),
    /// which no training saw.
    #[arg(long)]
    pub held_out: bool,
    /// A backtest config with [data], [orders] and [env] tables.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// An orders config (the contents of an [orders] table); overrides the
    /// one in --config.
    #[arg(long)]
    pub orders: Option<PathBuf>,
    /// Order size as a fraction of ADV (overrides the configs).
    #[arg(long, allow_negative_numbers = true, value_parser = super::positive)]
    pub qty_adv: Option<f64>,
    /// Order size in shares (overrides the configs).
    #[arg(long, allow_negative_numbers = true, value_parser = super::positive)]
    pub qty_shares: Option<f64>,
    /// Only these symbols.
    #[arg(long = "symbol")]
    pub symbols: Vec<String>,
    /// Minutes between decisions (overrides the config).
    #[arg(long)]
    pub decision_minutes: Option<u16>,
    /// Order seed (overrides the config).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Who replays the orders (overrides `[cluster] engine`): here, or as
    /// `--shards` tasks of a Slurm or HyperQueue array or a Kubernetes
    /// Indexed Job (`docs/cluster.md`).
    #[arg(long, value_enum)]
    pub engine: Option<super::evolve::EngineChoice>,
    /// Shards of contiguous orders, one task each, on a cluster engine.
    #[arg(long, default_value_t = 8)]
    pub shards: usize,
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvChoice {
    Static,
    Dynamic,
    /// Static and dynamic.
    Both,
    /// The LOBSTER days' real queue (with --lobster).
    Lobster,
    /// Static, dynamic and the LOBSTER queue (with --lobster).
    All,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BacktestFile {
    pub data: DataConfig,
    pub orders: OrderConfig,
    pub env: EnvConfig,
    /// The dynamic market's population (for --env dynamic|both).
    pub market: serl_env::MarketConfig,
    /// Where the orders are replayed (`[cluster] engine`).
    pub cluster: ClusterConfig,
}

/// The configs a backtest runs with, after every override.
pub fn resolve(a: &BacktestArgs) -> Result<BacktestFile> {
    let mut cfg: BacktestFile = match (&a.config, a.teams.first()) {
        (Some(p), _) => read_toml(p)?,
        // A team plays the orders, steps and market it trained on.
        (None, Some(dir)) if dir.join("train.toml").exists() => {
            let t: super::train::TrainFile = read_toml(&dir.join("train.toml"))?;
            BacktestFile {
                data: t.data,
                orders: t.orders,
                env: t.env,
                market: t.market,
                cluster: ClusterConfig::default(),
            }
        }
        (None, _) => BacktestFile::default(),
    };
    if let Some(p) = &a.orders {
        cfg.orders = read_toml(p)?;
    }
    if let Some(q) = a.qty_adv {
        cfg.orders.quantity = Quantity::AdvFraction(q);
    }
    if let Some(q) = a.qty_shares {
        cfg.orders.quantity = Quantity::Shares(q);
    }
    if !a.symbols.is_empty() {
        cfg.orders.symbols = a.symbols.clone();
    }
    if let Some(s) = a.seed {
        cfg.orders.seed = s;
    }
    if let Some(k) = a.decision_minutes {
        cfg.env.decision_minutes = k;
    }
    if let Some(e) = a.engine {
        cfg.cluster.engine = e.into();
    }
    cfg.cluster.validate()?;
    cfg.data
        .validate()
        .map_err(|m| anyhow::anyhow!("[data] {m}"))?;
    cfg.env.validate()?;
    Ok(cfg)
}

pub(super) fn strategy_factory(s: &str) -> Result<StrategyFactory> {
    if let Some(dir) = s.strip_prefix("policy:") {
        return super::train::policy_factory(Path::new(dir));
    }
    let spec = StrategySpec::parse(s).map_err(anyhow::Error::msg)?;
    let label = spec.label_as_typed(s);
    Ok(StrategyFactory {
        label,
        ..StrategyFactory::from_spec(spec)
    })
}

/// The metrics table every command that backtests prints, the warnings
/// of its report and the legend of its abbreviations.
pub fn print_summaries(data: &serl_eval::ReportData) {
    let summaries = &data.summaries;
    let width = |f: &dyn Fn(&serl_eval::Summary) -> usize, least: usize| {
        summaries.iter().map(f).max().unwrap_or(0).max(least)
    };
    let (we, ws) = (width(&|s| s.env.len(), 8), width(&|s| s.strategy.len(), 14));
    println!(
        "{:<we$} {:<ws$} {:>7} {:>26} {:>9} {:>7} {:>6} {:>6} {:>7}",
        "env", "strategy", "orders", "PA bps [95% CI]", "PA filled", "PA-std", "WR", "GLR", "AFI"
    );
    for s in summaries {
        println!(
            "{:<we$} {:<ws$} {:>7} {:>26} {:>9.2} {:>7.2} {:>6.3} {:>6} {:>7.4}",
            s.env,
            s.strategy,
            s.orders,
            s.pa.to_string(),
            s.pa_filled,
            s.pa_std,
            s.wr,
            s.glr.map_or("-".into(), |g| format!("{g:.2}")),
            s.afi
        );
    }
    println!("{}", serl_eval::LEGEND);
    for w in serl_eval::warnings(data) {
        println!("warning: {w}");
    }
    print_placement(summaries);
}

/// What placement earned, when any strategy rested orders.
fn print_placement(summaries: &[serl_eval::Summary]) {
    if summaries.iter().all(|s| s.placement.passive_share == 0.0) {
        return;
    }
    println!(
        "\n{:<8} {:<22} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "env", "strategy", "passive", "captured", "adv 1m", "adv 5m", "final", "final bp"
    );
    for s in summaries {
        let c = serl_eval::placement_cells(&s.placement);
        println!(
            "{:<8} {:<22} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8}",
            s.env, s.strategy, c[0], c[1], c[2], c[3], c[4], c[5]
        );
    }
}

/// What the load of `ds` left out, one line each for the report's
/// provenance ([`super::load_data`] counted them on the terminal).
pub fn skipped_lines(ds: &serl_data::Dataset) -> Vec<String> {
    ds.left_out().iter().map(|p| p.to_string()).collect()
}

/// Where a report's orders came from: the data, split, seed and configs,
/// and the serl version and commit that wrote it, now.
pub fn provenance(
    data_path: &Path,
    split: &str,
    seed: u64,
    orders: usize,
    (order_config, env_config): (&serl_env::OrderConfig, &serl_env::EnvConfig),
    reward: String,
) -> Result<Provenance> {
    Ok(Provenance {
        data_path: data_path.display().to_string(),
        split: split.into(),
        seed,
        orders,
        order_config: serde_json::to_string(order_config)?,
        env_config: serde_json::to_string(env_config)?,
        reward,
        serl_version: env!("CARGO_PKG_VERSION").into(),
        git_commit: git_commit(),
        created: now(),
        ..Provenance::default()
    })
}

pub fn git_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// Why `--env lobster|all` without LOBSTER days is refused.
const NEEDS_LOBSTER: &str = "--env lobster and --env all need LOBSTER days: give --lobster PATH";

/// Replays `orders` with each of `strategies` at the venues of `env`:
/// what `serl backtest` does here and each of its shards does on a cluster.
pub fn replay(
    market: &MarketData,
    orders: &[serl_env::ParentOrder],
    strategies: &[String],
    env: EnvChoice,
    cfg: &BacktestFile,
    lobster: Option<&LobsterVenue>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<serl_eval::OrderResult>> {
    let factories: Vec<StrategyFactory> = strategies
        .iter()
        .map(|s| strategy_factory(s))
        .collect::<Result<_>>()?;
    let reward = cfg.env.default_reward();
    let dynamic = DynamicVenue {
        market: cfg.market.clone(),
        seed: cfg.orders.seed,
    };
    let queue = || -> Result<&dyn Venue> {
        match lobster {
            Some(l) => Ok(l),
            None => bail!(NEEDS_LOBSTER),
        }
    };
    let envs: Vec<&dyn Venue> = match env {
        EnvChoice::Static => vec![&StaticVenue],
        EnvChoice::Dynamic => vec![&dynamic],
        EnvChoice::Both => vec![&StaticVenue, &dynamic],
        EnvChoice::Lobster => vec![queue()?],
        EnvChoice::All => vec![&StaticVenue, &dynamic, queue()?],
    };
    Ok(run_backtest(
        market, orders, &factories, &envs, &cfg.env, &reward, progress,
    ))
}

pub fn run(a: BacktestArgs) -> Result<ExitCode> {
    let cfg = resolve(&a)?;
    if !a.teams.is_empty() || a.agents.is_some() {
        return super::team_backtest::run(&a, &cfg);
    }
    let env = a.env.unwrap_or(EnvChoice::Static);
    // Every strategy is checked before any order is played (or submitted).
    for s in &a.strategies {
        strategy_factory(s)?;
    }
    if matches!(env, EnvChoice::Lobster | EnvChoice::All) && a.lobster.is_none() {
        bail!(NEEDS_LOBSTER);
    }
    let t0 = std::time::Instant::now();
    let (ds, lobster, split, data_path) = match (&a.lobster, &a.data) {
        (Some(dir), _) => {
            if cfg.cluster.engine != EngineKind::Local {
                bail!("--lobster backtests run here: leave --engine local");
            }
            let (ds, venue) = lobster_days(dir)?;
            (ds, Some(venue), Split::All, dir.clone())
        }
        (None, Some(data)) => {
            let ds = super::load_data(data, &cfg.data)?;
            (ds, None, a.split, data.clone())
        }
        (None, None) => bail!("give --data or --lobster"),
    };
    let orders = generate_orders(&ds, split, &cfg.data, &cfg.orders)?;
    let market = super::market_data(&ds, &cfg.data);
    eprintln!(
        "loaded {} sessions of {} symbols in {:.2}s; {} orders from the {} split",
        ds.sessions.len(),
        ds.symbols().len(),
        t0.elapsed().as_secs_f64(),
        orders.len(),
        split
    );
    let t1 = std::time::Instant::now();
    let results = if cfg.cluster.engine == EngineKind::Local {
        let bar = ProgressBar::new(orders.len() as u64).with_style(
            ProgressStyle::with_template(
                "{spinner} backtest [{bar:40}] {pos}/{len} orders  {per_sec}  eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        // In a log (stderr not a terminal) the bar draws nothing: plain
        // lines instead.
        let plain = crate::progress::PlainProgress::for_bar(&bar, "backtest", "orders");
        let rows = replay(
            &market,
            &orders,
            &a.strategies,
            env,
            &cfg,
            lobster.as_ref(),
            &|n| {
                bar.inc(n);
                if let Some(p) = &plain {
                    p.at(bar.position(), "");
                }
            },
        )?;
        bar.finish_and_clear();
        rows
    } else {
        let b = super::shards::Backtest {
            data: &data_path,
            split,
            strategies: &a.strategies,
            env,
            cfg: &cfg,
        };
        super::shards::run(&b, &cfg.cluster, a.shards, &orders, &a.out)?
    };
    let secs = t1.elapsed().as_secs_f64();
    let provenance = provenance(
        &data_path,
        &split.to_string(),
        cfg.orders.seed,
        orders.len(),
        (&cfg.orders, &cfg.env),
        cfg.env.default_reward().describe(),
    )?;
    let provenance = Provenance {
        orders_over_capacity: serl_eval::orders_over_capacity(&market, &orders, &cfg.env),
        skipped: skipped_lines(&ds),
        ..provenance
    };
    let data = ReportData::new(&results, provenance);
    write_report(&a.out, &results, &data)
        .with_context(|| format!("writing the report to {}", a.out.display()))?;
    print_summaries(&data);
    println!(
        "{} episodes in {:.2}s; report: {}",
        results.len(),
        secs,
        a.out.join("report.html").display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The LOBSTER days of `path` (a sample zip or a folder of them, the
/// deepest file per symbol) as bar sessions, and the venue that replays
/// their message streams.
fn lobster_days(path: &Path) -> Result<(serl_data::Dataset, LobsterVenue)> {
    let mut sessions = Vec::new();
    let mut days = Vec::new();
    for (symbol, file) in super::realism::sample_files(path, &[])? {
        let (_, date, _) = super::realism::lobster_name(&file)
            .with_context(|| format!("{}: not named like a LOBSTER file", file.display()))?;
        let date = chrono::NaiveDate::parse_from_str(&date, "%Y-%m-%d").with_context(|| {
            format!(
                "{}: `{date}` in its name is not a YYYY-MM-DD date",
                file.display()
            )
        })?;
        let real = super::realism::read_day(symbol.clone(), file)?;
        let day = LobsterDay::new(&symbol, date, real.messages, real.rows);
        sessions.push(day.session().clone());
        days.push(std::sync::Arc::new(day));
    }
    sessions.sort_by(|a, b| (&a.symbol, a.date).cmp(&(&b.symbol, b.date)));
    let ds = serl_data::Dataset {
        sessions,
        problems: Vec::new(),
        files: Vec::new(),
    };
    Ok((ds, LobsterVenue::new(days)))
}

pub fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    chrono::DateTime::from_timestamp(secs, 0).map_or_else(|| secs.to_string(), |t| t.to_rfc3339())
}
