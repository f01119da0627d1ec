//! Writing a team backtest: `team.csv` (one row per order, strategy and
//! venue with every member's PA), `summary.json`, `report.md` and a
//! self-contained `report.html` with the team and per-agent tables, the
//! paired comparisons and a plot of each strategy's team score.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use serl_env::TeamMode;
use serl_report::{html, intervals_chart, table_cell, Chart, Table};

use crate::metrics::{summarize, OrderResult, Summary};
use crate::report_data::Provenance;
use crate::team::{
    crowding_cost, paired_scores, summarize_teams, TeamPaired, TeamResult, TeamSummary,
};

/// Everything a team report shows.
#[derive(Debug, Clone, Serialize)]
pub struct TeamReportData {
    /// Where the orders and data came from.
    pub provenance: Provenance,
    /// How the members shared the work.
    pub mode: TeamMode,
    /// Members per team.
    pub agents: usize,
    /// One per strategy and venue.
    pub summaries: Vec<TeamSummary>,
    /// One agent executing each whole parent order, per baseline and
    /// venue: what the crowding cost is measured against.
    pub alone: Vec<Summary>,
    /// The comparisons asked for, per venue.
    pub paired: Vec<TeamPaired>,
    /// The crowding cost of each independent baseline, per venue.
    pub crowding: Vec<TeamPaired>,
}

/// What a team report compares.
#[derive(Debug, Clone, Default)]
pub struct TeamComparisons {
    /// Pairs of strategy labels (a, b): a's team score minus b's.
    pub pairs: Vec<(String, String)>,
    /// Independent baselines whose crowding cost is measured against the
    /// same baseline alone (their label in `alone`'s results).
    pub crowding: Vec<String>,
}

impl TeamReportData {
    /// Summaries and comparisons of `results` (and `alone`, one agent per
    /// whole order), with bootstraps seeded by `provenance.seed`.
    pub fn new(
        provenance: Provenance,
        mode: TeamMode,
        agents: usize,
        results: &[TeamResult],
        alone: &[OrderResult],
        asked: &TeamComparisons,
    ) -> Self {
        let seed = provenance.seed;
        let mut envs: Vec<&str> = results.iter().map(|r| r.team.env.as_str()).collect();
        envs.sort();
        envs.dedup();
        let mut paired = Vec::new();
        let mut crowding = Vec::new();
        for env in &envs {
            for (a, b) in &asked.pairs {
                paired.extend(paired_scores(results, a, b, env, seed));
            }
            for base in &asked.crowding {
                crowding.extend(crowding_cost(results, base, alone, env, seed));
            }
        }
        let mut groups: Vec<(&str, &str)> = alone
            .iter()
            .map(|r| (r.env.as_str(), r.strategy.as_str()))
            .collect();
        groups.sort();
        groups.dedup();
        let alone = groups
            .into_iter()
            .map(|(env, s)| {
                let rows: Vec<&OrderResult> = alone
                    .iter()
                    .filter(|r| r.env == env && r.strategy == s)
                    .collect();
                summarize(s, env, &rows, seed)
            })
            .collect();
        TeamReportData {
            provenance,
            mode,
            agents,
            summaries: summarize_teams(results, seed),
            alone,
            paired,
            crowding,
        }
    }
}

/// Writes `team.csv`, `summary.json`, `report.md`, `report.html` and the
/// plot into `dir`.
pub fn write_team_report(
    dir: &Path,
    results: &[TeamResult],
    data: &TeamReportData,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("team.csv"), team_csv(results))?;
    let json = serde_json::to_string_pretty(data).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("summary.json"), json)?;
    let svgs = plot(data);
    for (k, (_, svg)) in svgs.iter().enumerate() {
        std::fs::write(dir.join(format!("plot{k}.svg")), svg)?;
    }
    let md = team_markdown(data, &svgs);
    std::fs::write(dir.join("report.md"), &md)?;
    std::fs::write(dir.join("report.html"), html(&md, &svgs))
}

fn team_csv(results: &[TeamResult]) -> String {
    let agents = results.iter().map(|r| r.members.len()).max().unwrap_or(0);
    let mut s = String::from(
        "env,strategy,order_id,symbol,date,side,qty,score_bps,team_pa_bps,team_unfilled",
    );
    for k in 0..agents {
        let _ = write!(s, ",agent{k}_pa_bps,agent{k}_unfilled");
    }
    s.push('\n');
    for r in results {
        let t = &r.team;
        let _ = write!(
            s,
            "{},{},{},{},{},{},{},{:.6},{:.6},{:.6}",
            t.env,
            t.strategy.replace(',', ";"),
            t.order_id,
            t.symbol,
            t.date,
            t.side,
            t.qty,
            r.score,
            t.pa_bps,
            t.unfilled
        );
        for m in &r.members {
            let _ = write!(s, ",{:.6},{:.6}", m.pa_bps, m.unfilled);
        }
        s.push('\n');
    }
    s
}

/// The team score of every strategy at every venue, with its CI.
fn plot(data: &TeamReportData) -> Vec<(String, String)> {
    let mut strategies: Vec<String> = Vec::new();
    let mut envs: Vec<String> = Vec::new();
    for s in &data.summaries {
        if !strategies.contains(&s.team.strategy) {
            strategies.push(s.team.strategy.clone());
        }
        if !envs.contains(&s.team.env) {
            envs.push(s.team.env.clone());
        }
    }
    let series: Vec<serl_report::Intervals> = envs
        .iter()
        .map(|env| {
            let points = strategies
                .iter()
                .map(|st| {
                    data.summaries
                        .iter()
                        .find(|s| &s.team.env == env && &s.team.strategy == st)
                        .map_or((0.0, 0.0, 0.0), |s| (s.score.mean, s.score.lo, s.score.hi))
                })
                .collect();
            (env.clone(), points)
        })
        .collect();
    let title = format!(
        "Team score by strategy ({}, {} agents)",
        data.mode.name(),
        data.agents
    );
    let chart = Chart::new(&title, "strategy", "bps").x_labels(strategies);
    let mut svg = String::new();
    match intervals_chart(&mut svg, &chart, &series) {
        Ok(()) => vec![(title, svg)],
        Err(_) => Vec::new(),
    }
}

fn team_markdown(data: &TeamReportData, svgs: &[(String, String)]) -> String {
    let mut md = String::new();
    let p = &data.provenance;
    let score = match data.mode {
        TeamMode::Cooperative => "the PA of the whole parent order",
        TeamMode::Competitive => "the members' mean PA, each on its own order",
    };
    let _ = writeln!(md, "# serl team backtest\n");
    let _ = writeln!(
        md,
        "{} parent orders from the **{}** split of `{}`, each worked by **{} agents** ({}). The team score is {score}, in bps; CIs are bootstrap 95% intervals of the mean, and comparisons are paired order by order.\n",
        p.orders, p.split, p.data_path, data.agents, data.mode.name()
    );
    let _ = writeln!(md, "## Teams\n");
    let mut teams = Table::new([
        "venue",
        "strategy",
        "orders",
        "team score",
        "team PA",
        "PA-std",
        "WR",
        "AFI",
    ]);
    for s in &data.summaries {
        let t = &s.team;
        teams.row([
            t.env.to_string(),
            table_cell(&t.strategy),
            t.orders.to_string(),
            s.score.to_string(),
            t.pa.to_string(),
            format!("{:.2}", t.pa_std),
            format!("{:.3}", t.wr),
            format!("{:.4}", t.afi),
        ]);
    }
    md.push_str(&teams.markdown());
    if !data.alone.is_empty() {
        let _ = writeln!(md, "\nOne agent executing each whole parent order:\n");
        let mut alone = Table::new(["venue", "strategy", "orders", "PA", "WR", "AFI"]);
        for s in &data.alone {
            alone.row([
                s.env.to_string(),
                format!("{} alone", table_cell(&s.strategy)),
                s.orders.to_string(),
                s.pa.to_string(),
                format!("{:.3}", s.wr),
                format!("{:.4}", s.afi),
            ]);
        }
        md.push_str(&alone.markdown());
    }
    let rows: Vec<&TeamPaired> = data.paired.iter().chain(&data.crowding).collect();
    if !rows.is_empty() {
        let _ = writeln!(md, "\n## Paired comparisons\n");
        let mut paired = Table::new([
            "venue",
            "comparison",
            "orders",
            "difference (bps)",
            "CI excludes 0",
        ]);
        for c in rows {
            paired.row([
                c.env.to_string(),
                table_cell(&c.what),
                c.orders.to_string(),
                c.diff.to_string(),
                (if c.diff.significant() { "yes" } else { "no" }).to_string(),
            ]);
        }
        md.push_str(&paired.markdown());
    }
    per_agent(&mut md, data);
    for (k, (title, _)) in svgs.iter().enumerate() {
        let _ = writeln!(md, "\n![{title}](plot{k}.svg)");
    }
    provenance(&mut md, p);
    md
}

/// Every member's table.
fn per_agent(md: &mut String, data: &TeamReportData) {
    let _ = writeln!(md, "\n## Per agent\n");
    let mut t = Table::new(["venue", "strategy", "agent", "PA", "WR", "AFI"]);
    for s in &data.summaries {
        for (k, m) in s.members.iter().enumerate() {
            t.row([
                m.env.to_string(),
                table_cell(&m.strategy),
                k.to_string(),
                m.pa.to_string(),
                format!("{:.3}", m.wr),
                format!("{:.4}", m.afi),
            ]);
        }
    }
    md.push_str(&t.markdown());
}

fn provenance(md: &mut String, p: &Provenance) {
    let _ = writeln!(
        md,
        "\n## Provenance\n\n- data: `{}`, split {}, seed {}\n- orders: `{}`\n- env: `{}`\n- reward: {}\n- serl {} ({}), {}",
        p.data_path, p.split, p.seed, p.order_config, p.env_config, p.reward, p.serl_version, p.git_commit, p.created
    );
}
