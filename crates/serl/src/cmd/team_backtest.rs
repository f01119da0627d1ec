//! `serl backtest --team RUN_DIR --agents N`: trained teams and baselines
//! working each parent order with N agents at once, judged per agent and
//! as a team, with the paired comparisons and the crowding cost.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressStyle};
use serl_env::{
    generate_orders, DynamicVenue, MarketConfig, MarketData, ParentOrder, Reward, StaticVenue,
    TeamMode, Venue,
};
use serl_eval::{
    run_backtest, run_team_backtest, write_team_report, NamedVenue, OrderResult, StrategyFactory,
    StrategySpec, TeamComparisons, TeamFactory, TeamReportData, TeamResult,
};
use serl_train::{load_run_policy, Policy, TeamPolicyStrategy};

use super::backtest::{provenance, BacktestArgs, BacktestFile, EnvChoice};

#[derive(Clone, Copy, ValueEnum)]
pub enum TeamModeArg {
    Cooperative,
    Competitive,
}

/// A trained team from its run directory, labelled by the directory's
/// name (and the learner that trained it).
struct TrainedTeam {
    label: String,
    policy: Policy,
}

fn load_team(dir: &Path) -> Result<TrainedTeam> {
    if !dir.is_dir() {
        bail!("team directory {} does not exist", dir.display());
    }
    let policy = load_run_policy(dir, &serl_train::DeviceChoice::Cpu.device()?)
        .with_context(|| format!("loading the team's policy in {}", dir.display()))?;
    let Some(team) = policy.meta.team.clone() else {
        bail!(
            "{} holds a single agent's policy, not a team's: train one with `serl train --algo mappo --agents N` (or play it with --strategy policy:{})",
            dir.display(),
            dir.display()
        );
    };
    let name = dir
        .file_name()
        .map_or("team".into(), |n| n.to_string_lossy().to_string());
    Ok(TrainedTeam {
        label: format!("{}:{name}", team.critic.algo_name()),
        policy,
    })
}

/// The trained teams, each under its own label.
fn load_teams(dirs: &[PathBuf]) -> Result<Vec<TrainedTeam>> {
    let teams: Vec<TrainedTeam> = dirs.iter().map(|d| load_team(d)).collect::<Result<_>>()?;
    for (i, t) in teams.iter().enumerate() {
        if let Some(j) = teams[..i].iter().position(|u| u.label == t.label) {
            bail!(
                "--team {} and --team {} would both be labelled `{}` in the report: give their run directories different names",
                dirs[j].display(),
                dirs[i].display(),
                t.label
            );
        }
    }
    Ok(teams)
}

/// Warns about a team played with another size or mode than it trained
/// with (its role columns then read values it never saw), and about a
/// team without the train.toml its orders and market would come from.
fn warn_shape(a: &BacktestArgs, teams: &[TrainedTeam], agents: usize, mode: TeamMode) {
    for t in teams {
        if let Some(m) = &t.policy.meta.team {
            if m.agents != agents || m.mode != mode {
                eprintln!(
                    "warning: {} trained as {} {} agents and plays as {agents} {}",
                    t.label,
                    m.agents,
                    m.mode.name(),
                    mode.name()
                );
            }
        }
    }
    if let (None, Some(dir)) = (&a.config, a.teams.first()) {
        if !dir.join("train.toml").exists() {
            eprintln!(
                "warning: {} has no train.toml: the orders, decisions and market are the defaults; give the team's with --config",
                dir.display()
            );
        }
    }
}

fn team_factory(t: &TrainedTeam, silent: bool) -> TeamFactory {
    let label = if silent {
        format!("{} (silent)", t.label)
    } else {
        t.label.clone()
    };
    let (policy, name) = (t.policy.clone(), label.clone());
    TeamFactory {
        label,
        make: Box::new(move || {
            let s = TeamPolicyStrategy::new(policy.clone(), name.clone());
            Box::new(if silent { s.silenced() } else { s })
        }),
    }
}

/// Members and mode: the flags, else what the first team trained with.
fn team_shape(a: &BacktestArgs, teams: &[TrainedTeam]) -> Result<(usize, TeamMode)> {
    let trained = teams.first().and_then(|t| t.policy.meta.team.as_ref());
    let agents = match (a.agents, trained) {
        (Some(n), _) => n,
        (None, Some(t)) => t.agents,
        (None, None) => bail!("--agents N: how many agents work each order"),
    };
    if !(1..=serl_env::MAX_AGENTS).contains(&agents) {
        bail!("--agents {agents}: give 1 to {}", serl_env::MAX_AGENTS);
    }
    let mode = match (a.mode, trained) {
        (Some(TeamModeArg::Cooperative), _) => TeamMode::Cooperative,
        (Some(TeamModeArg::Competitive), _) => TeamMode::Competitive,
        (None, Some(t)) => t.mode,
        (None, None) => TeamMode::Cooperative,
    };
    Ok((agents, mode))
}

/// The venues a team plays: the replay and/or the calibrated market, and
/// the held-out populations when asked.
fn venues(env: EnvChoice, cfg: &BacktestFile, held_out: bool) -> Result<Vec<Box<dyn Venue>>> {
    let dynamic = |market: MarketConfig| DynamicVenue {
        market,
        seed: cfg.orders.seed,
    };
    let mut v: Vec<Box<dyn Venue>> = match env {
        EnvChoice::Static => vec![Box::new(StaticVenue)],
        EnvChoice::Dynamic => vec![Box::new(dynamic(cfg.market.clone()))],
        EnvChoice::Both => vec![Box::new(StaticVenue), Box::new(dynamic(cfg.market.clone()))],
        EnvChoice::Lobster | EnvChoice::All => {
            bail!("a team plays the static replay or the dynamic market: --env static, dynamic or both")
        }
    };
    if held_out {
        for (name, market) in serl_env::held_out_profiles(&cfg.market) {
            v.push(Box::new(NamedVenue {
                name: format!("dynamic:{name}"),
                venue: dynamic(market),
            }));
        }
    }
    Ok(v)
}

/// Whether a team hears anything: silencing one without communication
/// would play it twice.
fn talks(t: &TrainedTeam) -> bool {
    t.policy
        .meta
        .team
        .as_ref()
        .is_some_and(|m| m.communication.is_some())
}

/// What the report compares: every team and baseline against the first
/// baseline, every team that talks against its silenced self, the teams
/// pairwise.
fn comparisons(teams: &[TrainedTeam], baselines: &[String], silence: bool) -> TeamComparisons {
    let mut labels: Vec<String> = teams.iter().map(|t| t.label.clone()).collect();
    let mut pairs = Vec::new();
    for (i, a) in labels.iter().enumerate() {
        for b in &labels[i + 1..] {
            pairs.push((a.clone(), b.clone()));
        }
        if silence && talks(&teams[i]) {
            pairs.push((a.clone(), format!("{a} (silent)")));
        }
    }
    if let Some(reference) = baselines.first() {
        labels.extend(baselines[1..].iter().cloned());
        pairs.extend(labels.iter().map(|l| (l.clone(), reference.clone())));
    }
    TeamComparisons {
        pairs,
        crowding: baselines.to_vec(),
    }
}

pub fn run(a: &BacktestArgs, cfg: &BacktestFile) -> Result<ExitCode> {
    if a.lobster.is_some() {
        bail!("--team plays bar data (--data), not LOBSTER days");
    }
    if cfg.cluster.engine != serl_cluster::EngineKind::Local {
        bail!("team backtests run here: leave --engine local");
    }
    let teams = load_teams(&a.teams)?;
    let (agents, mode) = team_shape(a, &teams)?;
    warn_shape(a, &teams, agents, mode);
    let baselines: Vec<StrategySpec> = a
        .strategies
        .iter()
        .map(|s| {
            if s.starts_with("policy:") {
                bail!("`{s}`: with --team, --strategy names baselines (each member plays one); give trained teams with --team");
            }
            StrategySpec::parse(s).map_err(anyhow::Error::msg)
        })
        .collect::<Result<_>>()?;
    let venues = venues(a.env.unwrap_or(EnvChoice::Dynamic), cfg, a.held_out)?;
    let data_path: PathBuf = a.data.clone().context("--team needs --data")?;
    let ds = super::load_data(&data_path, &cfg.data)?;
    let orders = generate_orders(&ds, a.split, &cfg.data, &cfg.orders)?;
    let market = super::market_data(&ds, &cfg.data);
    eprintln!(
        "{} parent orders from the {} split, {agents} agents each ({}), at {} venue(s)",
        orders.len(),
        a.split,
        mode.name(),
        venues.len()
    );
    let mut factories: Vec<TeamFactory> = Vec::new();
    for t in &teams {
        factories.push(team_factory(t, false));
        if a.silence && talks(t) {
            factories.push(team_factory(t, true));
        }
    }
    factories.extend(
        baselines
            .iter()
            .map(|s| TeamFactory::independent(s.clone())),
    );
    let venue_refs: Vec<&dyn Venue> = venues.iter().map(|v| v.as_ref()).collect();
    let t0 = std::time::Instant::now();
    let (results, alone) = play(
        &market,
        &orders,
        &factories,
        &baselines,
        &venue_refs,
        (agents, mode),
        cfg,
    )?;
    let secs = t0.elapsed().as_secs_f64();
    let reward = cfg.env.default_reward();
    let prov = provenance(
        &data_path,
        &a.split.to_string(),
        cfg.orders.seed,
        orders.len(),
        (&cfg.orders, &cfg.env),
        reward.describe(),
    )?;
    let labels: Vec<String> = baselines.iter().map(|s| s.label()).collect();
    let data = TeamReportData::new(
        prov,
        mode,
        agents,
        &results,
        &alone,
        &comparisons(&teams, &labels, a.silence),
    );
    write_team_report(&a.out, &results, &data)
        .with_context(|| format!("writing the report to {}", a.out.display()))?;
    print_team_tables(&data);
    println!(
        "{} team episodes in {secs:.1}s; report: {}",
        results.len(),
        a.out.join("report.html").display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Plays every team on every order, and every baseline alone on the whole
/// orders, with a progress bar.
fn play(
    market: &MarketData,
    orders: &[ParentOrder],
    factories: &[TeamFactory],
    baselines: &[StrategySpec],
    venues: &[&dyn Venue],
    (agents, mode): (usize, TeamMode),
    cfg: &BacktestFile,
) -> Result<(Vec<TeamResult>, Vec<OrderResult>)> {
    let reward = cfg.env.default_reward();
    let passes = if baselines.is_empty() { 1 } else { 2 };
    let bar = ProgressBar::new((orders.len() * passes) as u64).with_style(
        ProgressStyle::with_template(
            "{spinner} team backtest [{bar:40}] {pos}/{len} orders  {per_sec}  eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let results = run_team_backtest(
        market,
        orders,
        factories,
        venues,
        agents,
        mode,
        &cfg.env,
        &reward,
        &|n| bar.inc(n),
    );
    let alone_factories: Vec<StrategyFactory> = baselines
        .iter()
        .map(|s| StrategyFactory::from_spec(s.clone()))
        .collect();
    let alone = if alone_factories.is_empty() {
        Vec::new()
    } else {
        run_backtest(
            market,
            orders,
            &alone_factories,
            venues,
            &cfg.env,
            &reward,
            &|n| bar.inc(n),
        )
    };
    bar.finish_and_clear();
    if results.is_empty() {
        bail!("no team episode was played: no order has a session in the data");
    }
    Ok((results, alone))
}

fn print_team_tables(data: &TeamReportData) {
    println!(
        "{:<18} {:<26} {:>7} {:>26} {:>26} {:>7}",
        "env", "team", "orders", "team score [95% CI]", "team PA [95% CI]", "AFI"
    );
    for s in &data.summaries {
        println!(
            "{:<18} {:<26} {:>7} {:>26} {:>26} {:>7.4}",
            s.team.env,
            s.team.strategy,
            s.team.orders,
            s.score.to_string(),
            s.team.pa.to_string(),
            s.team.afi
        );
    }
    if data.paired.is_empty() && data.crowding.is_empty() {
        return;
    }
    println!(
        "\n{:<18} {:<52} {:>7} {:>26}",
        "env", "comparison", "orders", "difference [95% CI]"
    );
    for c in data.paired.iter().chain(&data.crowding) {
        println!(
            "{:<18} {:<52} {:>7} {:>26}",
            c.env,
            c.what,
            c.orders,
            c.diff.to_string()
        );
    }
}
