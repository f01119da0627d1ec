//! A team backtest: trained teams and baselines working each parent order
//! with N agents at once, judged per agent and as a team, with the paired
//! comparisons and the crowding cost (`serl backtest --team`).

use std::path::{Path, PathBuf};

use serl_data::Split;
use serl_env::{
    generate_orders, DynamicVenue, MarketConfig, MarketData, ParentOrder, TeamMode, Venue,
};
use serl_eval::{
    write_team_report, Backtest, NamedVenue, OrderResult, StrategyFactory, StrategySpec,
    TeamComparisons, TeamFactory, TeamReportData, TeamResult,
};
use serl_train::{load_run_policy, Policy, TeamPolicyStrategy};

use crate::backtest::EnvChoice;
use crate::config::BacktestFile;
use crate::error::{Context, Result, StudyError};
use crate::venues::{Made, VenueInputs};

/// What a team backtest is asked.
pub struct TeamRequest<'a> {
    /// The trained teams' run directories.
    pub teams: &'a [PathBuf],
    /// Baselines, each played by every member (and alone on the whole order).
    pub strategies: &'a [String],
    /// Members per team (default: as the first team trained).
    pub agents: Option<usize>,
    /// How the members share the work (default: as the first team trained).
    pub mode: Option<TeamMode>,
    /// Where they play (default: the dynamic market).
    pub env: Option<EnvChoice>,
    /// Also play every team that talks with its members hearing nothing.
    pub silence: bool,
    /// Also play the held-out populations of the dynamic market.
    pub held_out: bool,
    /// Whether a config was given (else the first team's train.toml is
    /// used, and its absence is warned of).
    pub configured: bool,
}

/// A team backtest, loaded and ready to play.
pub struct TeamBacktest {
    teams: Vec<TrainedTeam>,
    baselines: Vec<StrategySpec>,
    venues: Vec<Box<dyn Venue>>,
    /// Members per team.
    pub agents: usize,
    /// How the members share the work.
    pub mode: TeamMode,
    silence: bool,
    /// The parent orders the teams play.
    pub orders: Vec<ParentOrder>,
    market: MarketData,
    data_path: PathBuf,
    split: Split,
}

impl TeamBacktest {
    /// Loads the teams, checks the baselines and venues, then the orders
    /// of `split` of the bars at `data`.
    /// `warn` hears at once a team played with another shape than it
    /// trained with, and what the data's load left out.
    pub fn prepare(
        req: &TeamRequest,
        cfg: &BacktestFile,
        (data, split): (&Path, Split),
        warn: &dyn Fn(&str),
    ) -> Result<TeamBacktest> {
        if cfg.cluster.engine != serl_cluster::EngineKind::Local {
            crate::bail!("team backtests run here: leave --engine local");
        }
        let teams = load_teams(req.teams)?;
        let (agents, mode) = team_shape((req.agents, req.mode), &teams)?;
        let first_dir = req.teams.first().filter(|_| !req.configured);
        for w in shape_warnings(&teams, (agents, mode), first_dir.map(|d| d.as_path())) {
            warn(&w);
        }
        let baselines: Vec<StrategySpec> = req
            .strategies
            .iter()
            .map(|s| {
                if s.starts_with("policy:") {
                    crate::bail!("`{s}`: with --team, --strategy names baselines (each member plays one); give trained teams with --team");
                }
                StrategySpec::parse(s).map_err(StudyError::msg)
            })
            .collect::<Result<_>>()?;
        let venues = venues(req.env.unwrap_or(EnvChoice::DYNAMIC), cfg, req.held_out)?;
        let ds = crate::data::load_data(data, &cfg.data, warn)?;
        let orders = generate_orders(&ds, split, &cfg.data, &cfg.orders)?;
        Ok(TeamBacktest {
            market: crate::data::market_data(&ds, &cfg.data),
            teams,
            baselines,
            venues,
            agents,
            mode,
            silence: req.silence,
            orders,
            data_path: data.to_path_buf(),
            split,
        })
    }

    /// Venues the orders play at.
    pub fn venues(&self) -> usize {
        self.venues.len()
    }

    /// Order episodes to play: the teams', then the baselines' alone.
    pub fn episodes(&self) -> u64 {
        let passes = if self.baselines.is_empty() { 1 } else { 2 };
        (self.orders.len() * passes) as u64
    }

    /// Plays every team and baseline, writes the report into `out`, and
    /// returns it with the number of team episodes played.
    pub fn play(
        &self,
        cfg: &BacktestFile,
        out: &Path,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<(TeamReportData, usize)> {
        let mut factories: Vec<TeamFactory> = Vec::new();
        for t in &self.teams {
            factories.push(team_factory(t, false));
            if self.silence && talks(t) {
                factories.push(team_factory(t, true));
            }
        }
        factories.extend(
            self.baselines
                .iter()
                .map(|s| TeamFactory::independent(s.clone())),
        );
        let venue_refs: Vec<&dyn Venue> = self.venues.iter().map(|v| v.as_ref()).collect();
        let backtest = Backtest::new(&self.market, &cfg.env)
            .venues(&venue_refs)
            .progress(progress);
        let shape = (self.agents, self.mode);
        let players = (&factories[..], &self.baselines[..]);
        let (results, alone) = play(&backtest, &self.orders, players, shape)?;
        let prov =
            crate::data::backtest_provenance(&self.data_path, self.split, self.orders.len(), cfg)?;
        let labels: Vec<String> = self.baselines.iter().map(|s| s.label()).collect();
        let compared = comparisons(&self.teams, &labels, self.silence);
        let data = TeamReportData::new(prov, self.mode, self.agents, &results, &alone, &compared);
        write_team_report(out, &results, &data)
            .with_context(|| format!("writing the report to {}", out.display()))?;
        Ok((data, results.len()))
    }
}

/// A trained team from its run directory, labelled by the directory's
/// name (and the learner that trained it).
struct TrainedTeam {
    label: String,
    policy: Policy,
}

fn load_team(dir: &Path) -> Result<TrainedTeam> {
    if !dir.is_dir() {
        crate::bail!("team directory {} does not exist", dir.display());
    }
    let policy = load_run_policy(dir, &serl_train::DeviceChoice::Cpu.device()?)
        .with_context(|| format!("loading the team's policy in {}", dir.display()))?;
    let Some(team) = policy.meta.team.clone() else {
        crate::bail!(
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
            crate::bail!(
                "--team {} and --team {} would both be labelled `{}` in the report: give their run directories different names",
                dirs[j].display(),
                dirs[i].display(),
                t.label
            );
        }
    }
    Ok(teams)
}

/// Warnings about a team played with another size or mode than it trained
/// with (its role columns then read values it never saw), and about a team
/// without the train.toml its orders and market would come from (when no
/// config was given).
fn shape_warnings(
    teams: &[TrainedTeam],
    (agents, mode): (usize, TeamMode),
    first_dir: Option<&Path>,
) -> Vec<String> {
    let mut out = Vec::new();
    for t in teams {
        if let Some(m) = &t.policy.meta.team {
            if m.agents != agents || m.mode != mode {
                out.push(format!(
                    "{} trained as {} {} agents and plays as {agents} {}",
                    t.label,
                    m.agents,
                    m.mode.name(),
                    mode.name()
                ));
            }
        }
    }
    if let Some(dir) = first_dir.filter(|d| !d.join("train.toml").exists()) {
        out.push(format!(
            "{} has no train.toml: the orders, decisions and market are the defaults; give the team's with --config",
            dir.display()
        ));
    }
    out
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

/// Members and mode: as asked, else what the first team trained with.
fn team_shape(
    (agents, mode): (Option<usize>, Option<TeamMode>),
    teams: &[TrainedTeam],
) -> Result<(usize, TeamMode)> {
    let trained = teams.first().and_then(|t| t.policy.meta.team.as_ref());
    let agents = match (agents, trained) {
        (Some(n), _) => n,
        (None, Some(t)) => t.agents,
        (None, None) => crate::bail!("--agents N: how many agents work each order"),
    };
    if !(1..=serl_env::MAX_AGENTS).contains(&agents) {
        crate::bail!("--agents {agents}: give 1 to {}", serl_env::MAX_AGENTS);
    }
    let mode = match (mode, trained) {
        (Some(m), _) => m,
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
    let inputs = VenueInputs { cfg, lobster: None };
    let mut v = Vec::new();
    for kind in env.venues() {
        // A venue a team cannot play is refused before it is made (the
        // LOBSTER venue would first ask for its days).
        let Some(Made::Owned(venue)) = kind.teams.then(|| kind.make(&inputs)).transpose()? else {
            crate::bail!("a team plays the static replay or the dynamic market: --env static, dynamic or both");
        };
        v.push(venue);
    }
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

/// Plays every team on every order, and every baseline alone on the whole
/// orders.
fn play(
    backtest: &Backtest,
    orders: &[ParentOrder],
    (factories, baselines): (&[TeamFactory], &[StrategySpec]),
    (agents, mode): (usize, TeamMode),
) -> Result<(Vec<TeamResult>, Vec<OrderResult>)> {
    let results = backtest.run_teams(orders, factories, agents, mode);
    let alone_factories: Vec<StrategyFactory> = baselines
        .iter()
        .map(|s| StrategyFactory::from_spec(s.clone()))
        .collect();
    let alone = if alone_factories.is_empty() {
        Vec::new()
    } else {
        backtest.run(orders, &alone_factories)
    };
    if results.is_empty() {
        crate::bail!("no team episode was played: no order has a session in the data");
    }
    Ok((results, alone))
}
