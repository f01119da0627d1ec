//! `serl train --walk-forward`: a policy trained on each rolling window
//! (`serl_eval::walk_forward`) and tested on the days after it, so that
//! every test day is out of sample for the policy that trades it. The test
//! days of all windows are pooled into one report, beside a table per
//! window.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use serl_data::{Dataset, Split};
use serl_env::{generate_orders, spread_orders, StaticVenue, Venue};
use serl_eval::walk_forward::{cut, run_windows, WindowRun};
use serl_eval::{Backtest, DayTest, PairedDiff, ReportData, StrategyFactory, StrategySpec};

use crate::config::TrainFile;
use crate::data::provenance;
use crate::error::{Context, Result, StudyError};
use crate::train::{policy_factory_labelled, reward_of, train_one, TrainingHooks};

/// The label of each window's policy in the pooled report.
pub const POLICY: &str = "policy";

/// What a window's policy gave, beside its window in `walk_forward.json`.
#[derive(Debug, Serialize)]
pub struct PolicyWindow {
    /// The window's best validation PA, if it was validated.
    pub best_val_pa: Option<f64>,
    /// The policy's test summary and its tests against the baselines.
    pub report: ReportData,
}

/// One window's record.
pub type WindowResult = WindowRun<PolicyWindow>;

/// What a walk-forward training gave.
pub struct WalkForward {
    /// Each window's record, in order.
    pub windows: Vec<WindowResult>,
    /// The test days of all windows, pooled.
    pub pooled: ReportData,
}

/// Runs the walk-forward evaluation of `cfg` on `ds` into `out`: a run
/// directory per window (`out/window-K`), the pooled report
/// (`out/walk-forward/`, `out/walk-forward.html`) and `walk_forward.json`.
/// `starting` hears each window and its directory before it trains.
pub fn run(
    cfg: &TrainFile,
    (ds, data_path): (&Dataset, &Path),
    (out, resume): (&Path, bool),
    hooks: &TrainingHooks,
    starting: &dyn Fn(&serl_eval::walk_forward::Window, &Path),
) -> Result<WalkForward> {
    let wf = &cfg.walk_forward;
    let all = generate_orders(ds, Split::All, &cfg.data, &cfg.orders)?;
    // Windows the data cannot fill are refused before anything is written.
    let cut = cut(&all, wf).map_err(|m| StudyError::msg(format!("[walk_forward] {m}")))?;
    let market = crate::data::market_data(ds, &cfg.data);
    let baselines: Vec<StrategySpec> = wf
        .baselines
        .iter()
        .map(|b| {
            StrategySpec::parse(b)
                .map_err(|e| StudyError::msg(format!("[walk_forward] baselines: {e}")))
        })
        .collect::<Result<_>>()?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    std::fs::write(out.join("train.toml"), toml::to_string(cfg)?)?;
    let reward = reward_of(cfg)?;
    let prov = |what: &str, orders: usize| {
        let configs = (&cfg.orders, &cfg.env);
        provenance(
            data_path,
            what,
            cfg.orders.seed,
            orders,
            configs,
            reward.describe(),
        )
    };
    let mut pooled = Vec::new();
    let windows = run_windows(cut, |w, _| -> Result<PolicyWindow> {
        let dir = out.join(format!("window-{}", w.window.index));
        starting(&w.window, &dir);
        let val = match cfg.validation.max_orders {
            0 => w.validation.clone(),
            max => spread_orders(&w.validation, max),
        };
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("train.toml"), toml::to_string(cfg)?)?;
        let trained = train_one(cfg, &market, (&w.train, &val), &dir, resume, hooks)?;
        let mut strategies = vec![policy_factory_labelled(&dir, POLICY)?];
        strategies.extend(baselines.iter().cloned().map(StrategyFactory::from_spec));
        let venues: Vec<&dyn Venue> = vec![&StaticVenue];
        let reward = reward.as_ref();
        let res = Backtest::new(&market, &cfg.env)
            .venues(&venues)
            .reward(reward)
            .run(&w.test, &strategies);
        let what = format!("walk-forward window {}", w.window.index);
        let report = ReportData::new(&res, prov(&what, w.test.len())?);
        pooled.extend(res);
        Ok(PolicyWindow {
            best_val_pa: trained.best_val,
            report,
        })
    })?;
    let test_orders: usize = windows.iter().map(|r| r.test_orders).sum();
    let data = ReportData::new(&pooled, prov("walk-forward test days", test_orders)?);
    let pooled_dir = out.join("walk-forward");
    serl_eval::write_report(&pooled_dir, &pooled, &data)
        .with_context(|| format!("writing {}", pooled_dir.display()))?;
    let md = markdown(&windows, &data, test_orders);
    std::fs::write(out.join("walk-forward.md"), &md)?;
    std::fs::write(out.join("walk-forward.html"), serl_report::html(&md, &[]))?;
    serl_report::write_atomic(
        &out.join("walk_forward.json"),
        serde_json::to_string_pretty(
            &serde_json::json!({"config": wf, "windows": windows, "pooled": data}),
        )?
        .as_bytes(),
    )?;
    Ok(WalkForward {
        windows,
        pooled: data,
    })
}

/// The policy against TWAP in one window's report: (ΔPA over orders, day
/// test).
fn against_twap(r: &ReportData) -> (Option<&PairedDiff>, Option<&DayTest>) {
    (
        r.vs_twap("static", POLICY),
        r.day_test("static", POLICY, "twap"),
    )
}

fn markdown(results: &[WindowResult], pooled: &ReportData, test_orders: usize) -> String {
    let mut md = String::from("# serl train --walk-forward\n\n");
    let _ = writeln!(
        md,
        "{} windows; each trains a policy on its sessions (the last ones select the checkpoint) and trades the sessions after it, so every test day is out of sample for the policy that trades it. {test_orders} test orders in all. The pooled tables are over all windows' test days; `walk-forward/` holds their orders and plots.\n",
        results.len()
    );
    md.push_str("## Per window\n\n");
    let mut t = serl_report::Table::new([
        "window",
        "train",
        "test",
        "test orders",
        "best val PA",
        "policy PA [95% CI]",
        "ΔPA vs TWAP [95% CI]",
        "days won",
        "p (Wilcoxon)",
    ])
    .right(3..9);
    for r in results {
        let w = &r.window;
        let report = &r.outcome.report;
        let policy = report.summaries.iter().find(|s| s.strategy == POLICY);
        let (diff, day) = against_twap(report);
        t.row([
            w.index.to_string(),
            w.train_span().to_string(),
            w.test_span().to_string(),
            r.test_orders.to_string(),
            r.outcome
                .best_val_pa
                .map_or("–".into(), |v| format!("{v:.3}")),
            policy.map_or("–".into(), |s| s.pa.to_string()),
            diff.map_or("–".into(), |d| d.diff.to_string()),
            day.map_or("–".into(), |t| format!("{} of {}", t.days_won, t.days)),
            day.map_or("–".into(), |t| t.p_cell()),
        ]);
    }
    md.push_str(&t.markdown());
    md.push('\n');
    md.push_str(&serl_eval::results_tables(pooled, "##"));
    md
}

/// Each window's test as the terminal shows it.
pub fn windows_table(results: &[WindowResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>6} {:>23} {:>7} {:>26} {:>26} {:>9}",
        "window", "test days", "orders", "policy PA [95% CI]", "ΔPA vs TWAP [95% CI]", "days won"
    );
    for r in results {
        let w = &r.window;
        let policy = r
            .outcome
            .report
            .summaries
            .iter()
            .find(|s| s.strategy == POLICY);
        let (diff, day) = against_twap(&r.outcome.report);
        let _ = writeln!(
            out,
            "{:>6} {:>23} {:>7} {:>26} {:>26} {:>9}",
            w.index,
            w.test_span(),
            r.test_orders,
            policy.map_or("-".into(), |s| s.pa.to_string()),
            diff.map_or("-".into(), |d| d.diff.to_string()),
            day.map_or("-".into(), |t| format!("{}/{}", t.days_won, t.days)),
        );
    }
    out
}
