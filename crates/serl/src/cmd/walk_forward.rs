//! `serl train --walk-forward`: a policy trained on each rolling window
//! (`serl_eval::walk_forward`) and tested on the days after it, so that
//! every test day is out of sample for the policy that trades it. The test
//! days of all windows are pooled into one report, beside a table per
//! window.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use serl_data::{Dataset, Split};
use serl_env::{generate_orders, spread_orders, StaticVenue, Venue};
use serl_eval::walk_forward::{order_dates, orders_on, windows, Window};
use serl_eval::{run_backtest, ReportData, StrategyFactory, StrategySpec};

use super::backtest::provenance;
use super::train::{policy_factory_labelled, reward_of, train_one, TrainFile};

/// The label of each window's policy in the pooled report.
const POLICY: &str = "policy";

/// What one window gave, as `walk_forward.json` lists it.
#[derive(Debug, Serialize)]
struct WindowResult {
    window: Window,
    train_orders: usize,
    test_orders: usize,
    best_val_pa: Option<f64>,
    /// The policy's test summary and its tests against the baselines.
    report: ReportData,
}

/// Runs the walk-forward evaluation of `cfg` on `ds` into `out`.
pub fn run(
    cfg: &TrainFile,
    ds: &Dataset,
    data_path: &Path,
    out: &Path,
    resume: bool,
) -> Result<ExitCode> {
    let wf = &cfg.walk_forward;
    let all = generate_orders(ds, Split::All, &cfg.data, &cfg.orders)?;
    let windows =
        windows(&order_dates(&all), wf).map_err(|m| anyhow::anyhow!("[walk_forward] {m}"))?;
    let market = super::market_data(ds, &cfg.data);
    let baselines: Vec<StrategySpec> = wf
        .baselines
        .iter()
        .map(|b| {
            StrategySpec::parse(b).map_err(|e| anyhow::anyhow!("[walk_forward] baselines: {e}"))
        })
        .collect::<Result<_>>()?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    std::fs::write(out.join("train.toml"), toml::to_string(cfg)?)?;
    let reward = reward_of(cfg)?;
    let (mut pooled, mut results) = (Vec::new(), Vec::new());
    for w in windows {
        let dir = out.join(format!("window-{}", w.index));
        eprintln!(
            "window {}: train {}, test {}: {}",
            w.index,
            w.train_span(),
            w.test_span(),
            dir.display()
        );
        let train = orders_on(&all, &w.train);
        let val = orders_on(&all, &w.validation);
        let val = match cfg.validation.max_orders {
            0 => val,
            max => spread_orders(&val, max),
        };
        let test = orders_on(&all, &w.test);
        if train.is_empty() || test.is_empty() {
            bail!(
                "walk-forward window {} has {} train and {} test orders; every window needs both (check [orders] symbols and the dates)",
                w.index,
                train.len(),
                test.len()
            );
        }
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("train.toml"), toml::to_string(cfg)?)?;
        let trained = train_one(cfg, &market, (&train, &val), &dir, resume)?;
        let mut strategies = vec![policy_factory_labelled(&dir, POLICY)?];
        strategies.extend(baselines.iter().cloned().map(StrategyFactory::from_spec));
        let venues: Vec<&dyn Venue> = vec![&StaticVenue];
        let res = run_backtest(
            &market,
            &test,
            &strategies,
            &venues,
            &cfg.env,
            reward.as_ref(),
            &|_| {},
        );
        let report = ReportData::new(
            &res,
            provenance(
                data_path,
                &format!("walk-forward window {}", w.index),
                cfg.orders.seed,
                test.len(),
                (&cfg.orders, &cfg.env),
                reward.describe(),
            )?,
        );
        results.push(WindowResult {
            train_orders: train.len(),
            test_orders: test.len(),
            best_val_pa: trained.best_val,
            window: w,
            report,
        });
        pooled.extend(res);
    }
    let test_orders: usize = results.iter().map(|r| r.test_orders).sum();
    let data = ReportData::new(
        &pooled,
        provenance(
            data_path,
            "walk-forward test days",
            cfg.orders.seed,
            test_orders,
            (&cfg.orders, &cfg.env),
            reward.describe(),
        )?,
    );
    let pooled_dir = out.join("walk-forward");
    serl_eval::write_report(&pooled_dir, &pooled, &data)
        .with_context(|| format!("writing {}", pooled_dir.display()))?;
    let md = markdown(&results, &data, test_orders);
    std::fs::write(out.join("walk-forward.md"), &md)?;
    std::fs::write(out.join("walk-forward.html"), serl_report::html(&md, &[]))?;
    serl_report::write_atomic(
        &out.join("walk_forward.json"),
        serde_json::to_string_pretty(
            &serde_json::json!({"config": wf, "windows": results, "pooled": data}),
        )?
        .as_bytes(),
    )?;
    print_windows(&results);
    super::backtest::print_summaries(&data);
    println!("report: {}", out.join("walk-forward.html").display());
    Ok(ExitCode::SUCCESS)
}

/// The policy against TWAP in one window's report: (ΔPA over orders, day
/// test).
fn against_twap(r: &ReportData) -> (Option<&serl_eval::PairedDiff>, Option<&serl_eval::DayTest>) {
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
    md.push_str("## Per window\n\n| window | train | test | test orders | best val PA | policy PA [95% CI] | ΔPA vs TWAP [95% CI] | days won | p (Wilcoxon) |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n");
    for r in results {
        let w = &r.window;
        let policy = r.report.summaries.iter().find(|s| s.strategy == POLICY);
        let (diff, day) = against_twap(&r.report);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            w.index,
            w.train_span(),
            w.test_span(),
            r.test_orders,
            r.best_val_pa.map_or("–".into(), |v| format!("{v:.3}")),
            policy.map_or("–".into(), |s| s.pa.to_string()),
            diff.map_or("–".into(), |d| d.diff.to_string()),
            day.map_or("–".into(), |t| format!("{} of {}", t.days_won, t.days)),
            day.map_or("–".into(), |t| t.p_cell()),
        );
    }
    md.push('\n');
    md.push_str(&serl_eval::results_tables(pooled, "##"));
    md
}

fn print_windows(results: &[WindowResult]) {
    println!(
        "{:>6} {:>23} {:>7} {:>26} {:>26} {:>9}",
        "window", "test days", "orders", "policy PA [95% CI]", "ΔPA vs TWAP [95% CI]", "days won"
    );
    for r in results {
        let w = &r.window;
        let policy = r.report.summaries.iter().find(|s| s.strategy == POLICY);
        let (diff, day) = against_twap(&r.report);
        println!(
            "{:>6} {:>23} {:>7} {:>26} {:>26} {:>9}",
            w.index,
            w.test_span(),
            r.test_orders,
            policy.map_or("-".into(), |s| s.pa.to_string()),
            diff.map_or("-".into(), |d| d.diff.to_string()),
            day.map_or("-".into(), |t| format!("{}/{}", t.days_won, t.days)),
        );
    }
}
