//! `serl evolve --seeds N --walk-forward`: the finished run's best design
//! and plain PPO retrained from independent seeds and on rolling windows
//! (`serl_evolve::confirm`), with a line per step and the tables printed.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use serl_cluster::Cluster;
use serl_design::Design;
use serl_eval::Provenance;
use serl_evolve::{ConfirmInputs, ConfirmReport, ConfirmStep};

use super::evolve::{EvolveFile, StudyData};

/// What `--seeds` and `--walk-forward` ask of a run.
pub struct Confirming<'a> {
    pub cfg: &'a EvolveFile,
    pub data: &'a StudyData,
    pub best: &'a Design,
    pub run_dir: &'a Path,
    pub cluster: Option<&'a Cluster>,
    pub seeds: usize,
    pub walk_forward: Option<&'a serl_eval::walk_forward::WalkForwardConfig>,
}

/// Retrains, tests and reports; prints the tables.
pub fn run(c: Confirming, provenance: Provenance) -> Result<ConfirmReport> {
    let bar = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} confirm {elapsed}  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(250));
    let shown = bar.clone();
    let on_step = move |s: ConfirmStep| {
        let line = match s {
            ConfirmStep::TrainingSeeds { seeds, trainings } => format!(
                "{seeds} seeds: {trainings} trainings of the best design and plain PPO to run"
            ),
            ConfirmStep::TrainingWindow {
                index,
                windows,
                test,
            } => format!(
                "walk-forward window {index} (0 to {}; tests {} .. {}): training",
                windows - 1,
                test.0,
                test.1
            ),
            ConfirmStep::Testing { orders } => format!("testing: {orders} episodes"),
        };
        if shown.is_hidden() {
            eprintln!("{line}");
        } else {
            shown.println(&line);
            shown.set_message(line);
        }
    };
    let confirmation = serl_evolve::confirm(&ConfirmInputs {
        cfg: &c.cfg.evolve,
        env_cfg: &c.cfg.env,
        market_cfg: &c.cfg.market,
        market: &c.data.market,
        train_orders: &c.data.train,
        val_orders: &c.data.val,
        test_orders: &c.data.test,
        all_orders: &c.data.all,
        best: c.best,
        run_dir: c.run_dir,
        cluster: c.cluster,
        seeds: c.seeds,
        walk_forward: c.walk_forward,
        on_step: Some(&on_step),
    })?;
    bar.finish_and_clear();
    let report = serl_evolve::write_confirmation(c.run_dir, &confirmation, provenance)?;
    print(&report);
    println!(
        "confirmation: {}",
        c.run_dir.join("confirm").join("report.html").display()
    );
    Ok(report)
}

fn print(r: &ConfirmReport) {
    if !r.across_seeds.is_empty() {
        println!(
            "{:<14} {:>6} {:>22} {:>22} {:>12}",
            "strategy", "seeds", "test PA (mean ± std)", "ΔPA vs TWAP", "above TWAP"
        );
        for a in &r.across_seeds {
            println!(
                "{:<14} {:>6} {:>22} {:>22} {:>12}",
                a.strategy,
                a.seeds,
                a.pa_text(),
                a.diff_text(),
                format!("{} of {}", a.seeds_above_twap, a.seeds)
            );
        }
        print_tests("the seeds' mean, day by day", &r.seed_tests);
    }
    if !r.windows.is_empty() {
        println!(
            "{:>6} {:>24} {:>7} {:>26} {:>26}",
            "window", "test days", "orders", "serl-best ΔPA vs TWAP", "ppo-default ΔPA vs TWAP"
        );
        for w in &r.windows {
            let of = |s: &str| w.diff_of(s).map_or("-".into(), |d| d.diff.to_string());
            println!(
                "{:>6} {:>24} {:>7} {:>26} {:>26}",
                w.window.index,
                w.window.test_span(),
                w.test_orders,
                of(serl_evolve::BEST),
                of(serl_evolve::PLAIN)
            );
        }
        print_tests("walk-forward test days, day by day", &r.walk_tests);
    }
}

fn print_tests(title: &str, tests: &[serl_eval::DayTest]) {
    println!("{title}:");
    for t in tests {
        let p = if t.too_few_days() {
            format!(
                "warning: too few days for a p-value (fewer than {})",
                serl_eval::MIN_TEST_DAYS
            )
        } else {
            format!("p {}  q {}", t.p_cell(), t.q_cell())
        };
        println!(
            "  {:<26} vs {:<26} won {:>2} of {:<2} days  mean {}  {p}",
            t.strategy, t.reference, t.days_won, t.days, t.mean_day_diff
        );
    }
}
