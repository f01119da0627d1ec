//! The hierarchy rows: the best design retrained with one more part of
//! the LLM+RL systems switched on, measured against the same design alone
//! (`docs/hierarchy.md`).
//!
//! `[evolve.hierarchy] rows = ["plan", "plan_alignment", "transition",
//! "reward_critic"]` makes `serl evolve`, after the final test, retrain
//! the best design once per row with the final budget and seed, then play
//! every row and TWAP on the validation orders and (unless the lockbox
//! keeps it sealed) the test orders. Each row gets its PA and its paired
//! differences against TWAP and against the design alone, order by order,
//! with bootstrap CIs, and the wall seconds its training took.
//!
//! The design alone is the best design without a plan: the run's own
//! `serl-best` when the search designed none. The plan rows use the
//! design's plan when the search designed one (`modules` holds "plan"),
//! else `[evolve.hierarchy] plan`.

use std::path::Path;

use serde::Serialize;
use serl_design::Design;
use serl_env::ParentOrder;
use serl_eval::{paired_diff, Backtest, Estimate, OrderResult, StrategyFactory, StrategySpec};
use serl_report::Table;
use serl_train::Algo;

use crate::config::EvolveConfig;
use crate::error::{read_json, EvolveError};
use crate::executor::Executor;
use crate::final_stage::{load_final, FINAL_SEED_MIX};
use crate::hierarchy::{Base, HierarchyConfig, Switch};
use crate::score::trains_fused;
use crate::tasks::{FinalJob, Trained};
use crate::train::{policy_factory, validation_orders, Scoring};

/// One row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct HierarchyRow {
    /// The design it switches parts on (`best design`, `plain PPO`).
    pub base: String,
    /// `design alone`, or the switch's name.
    pub name: String,
    /// What the row adds.
    pub description: String,
    /// PA, ΔPA against TWAP and against the design alone, bps, on the
    /// validation orders (none for a row that could not train: `note`
    /// says why).
    pub validation: Option<Split>,
    /// The same on the test orders (none while the lockbox is sealed).
    pub test: Option<Split>,
    /// Wall seconds its training took (a row that is the run's own
    /// `serl-best` shows that training's).
    pub train_secs: f64,
    /// What the part itself reports: the plan tracker's PA and the cloning
    /// loss, the head's prediction error, the critic's last weights.
    pub note: String,
}

/// A row's figures on one split.
#[derive(Debug, Clone, Serialize)]
pub struct Split {
    /// Mean PA, bps.
    pub pa: f64,
    /// Paired PA difference against TWAP, with its 95% bootstrap CI.
    pub vs_twap: Option<Estimate>,
    /// Paired PA difference against the design alone.
    pub vs_alone: Option<Estimate>,
}

/// The name of the design alone's row.
const ALONE: &str = "design alone";

/// One row to train: its base, label, description, run-directory folder
/// and job.
struct Planned {
    base: Base,
    label: String,
    description: &'static str,
    folder: String,
    job: FinalJob,
    /// Why the row cannot train (its part does not fit the design).
    unable: Option<String>,
}

/// The rows of `base`: the design alone, then one per switch.
fn plan_rows(cfg: &EvolveConfig, h: &HierarchyConfig, base: Base, best: &Design) -> Vec<Planned> {
    let (design, own) = base.design(best);
    let alone = Design {
        plan: None,
        ..design.clone()
    };
    let planned = Design {
        plan: Some(design.plan.clone().unwrap_or_else(|| h.plan.clone())),
        ..alone.clone()
    };
    let prefix = match base {
        Base::Best => "hierarchy",
        Base::Plain => "hierarchy-plain",
    };
    let row = |part: &str, description, d: &Design, switch: Option<Switch>| {
        // The run's own retraining where a row is exactly it.
        let folder = if switch.is_none_or(|s| s == Switch::Plan) && *d == design {
            own.to_string()
        } else {
            format!("{prefix}-{}", part.replace(' ', "-"))
        };
        let unable = (switch == Some(Switch::Transition)
            && !trains_fused(&cfg.train, d, Algo::PPO))
        .then(|| "the transition head trains with the fused learner (PPO on the CPU, dense, layer-norm and residual blocks); this design's network or device has no fused learner, so the row was not trained".to_string());
        Planned {
            unable,
            base,
            label: base.row(part),
            description,
            job: FinalJob {
                name: folder.clone(),
                design: d.clone(),
                algo: Algo::PPO,
                steps: cfg.final_steps,
                seed: cfg.seed ^ FINAL_SEED_MIX,
                eval_every: cfg.final_eval_every,
                critic: None,
                switch,
            },
            folder,
        }
    };
    let mut rows = vec![row("alone", "the design, no plan", &alone, None)];
    rows[0].label = base.row(ALONE);
    for &s in &h.rows {
        let d = if s.uses_plan() { &planned } else { &alone };
        rows.push(row(s.name(), s.describe(), d, Some(s)));
    }
    rows
}

/// Retrains each base design with each row's part on, and scores every
/// row on validation and (when `test_orders` is given) test.
pub(crate) fn run(
    scoring: &Scoring,
    executor: &dyn Executor,
    h: &HierarchyConfig,
    best: &Design,
    dir: &Path,
    test_orders: Option<&[ParentOrder]>,
) -> Result<Vec<HierarchyRow>, EvolveError> {
    let cfg = scoring.cfg;
    let rows: Vec<Planned> = h
        .bases
        .iter()
        .flat_map(|&b| plan_rows(cfg, h, b, best))
        .collect();
    let todo: Vec<FinalJob> = rows
        .iter()
        .filter(|r| r.folder.starts_with("hierarchy") && r.unable.is_none())
        .map(|r| r.job.clone())
        .collect();
    executor.retrain(scoring, dir, &todo)?;
    let policies = rows
        .iter()
        .filter(|r| r.unable.is_none())
        .map(|r| {
            let policy = load_final(cfg, &dir.join("final").join(&r.folder))?;
            Ok((r.label.clone(), policy))
        })
        .collect::<Result<Vec<_>, EvolveError>>()?;
    let val = backtest(scoring, &validation_orders(scoring), &policies)?;
    let test = test_orders
        .map(|orders| backtest(scoring, orders, &policies))
        .transpose()?;
    Ok(rows
        .iter()
        .map(|r| row(r, dir, &val, test.as_deref(), cfg.seed))
        .collect())
}

/// A planned row's line of the table, from the splits' results.
fn row(
    r: &Planned,
    dir: &Path,
    val: &[OrderResult],
    test: Option<&[OrderResult]>,
    seed: u64,
) -> HierarchyRow {
    let fdir = dir.join("final").join(&r.folder);
    let alone = r.base.row(ALONE);
    let trained = r.unable.is_none();
    HierarchyRow {
        base: r.base.label().to_string(),
        name: r.label.clone(),
        description: r.description.to_string(),
        validation: trained.then(|| split(val, &r.label, &alone, seed)),
        test: test
            .filter(|_| trained)
            .map(|t| split(t, &r.label, &alone, seed)),
        train_secs: read_json::<Trained>(&fdir.join("trained.json")).map_or(0.0, |t| t.secs),
        note: r.unable.clone().unwrap_or_else(|| note(&fdir, &r.job)),
    }
}

/// Every row's policy and TWAP on `orders`, in the static replay.
fn backtest(
    scoring: &Scoring,
    orders: &[ParentOrder],
    policies: &[(String, serl_train::Policy)],
) -> Result<Vec<OrderResult>, EvolveError> {
    let mut factories = vec![StrategySpec::parse("twap")
        .map(StrategyFactory::from_spec)
        .map_err(EvolveError::Config)?];
    for (label, policy) in policies {
        factories.push(policy_factory(label.clone(), policy.clone()));
    }
    let env = scoring.env_cfg;
    Ok(Backtest::new(scoring.market, env).run(orders, &factories))
}

/// A row's PA and its paired differences on one split's results.
fn split(results: &[OrderResult], name: &str, alone_name: &str, seed: u64) -> Split {
    let of =
        |s: &str| -> Vec<&OrderResult> { results.iter().filter(|r| r.strategy == s).collect() };
    let (mine, twap, alone) = (of(name), of("twap"), of(alone_name));
    let pa = mine.iter().map(|r| r.pa_bps).sum::<f64>() / mine.len().max(1) as f64;
    Split {
        pa,
        vs_twap: paired_diff(&mine, &twap, seed).map(|p| p.diff),
        vs_alone: (name != alone_name)
            .then(|| paired_diff(&mine, &alone, seed).map(|p| p.diff))
            .flatten(),
    }
}

/// What the row's part reported in its training directory, and why a part
/// could change nothing in this design.
fn note(fdir: &Path, job: &FinalJob) -> String {
    let mut parts = Vec::new();
    match job.switch {
        Some(Switch::Transition) if job.design.architecture.blocks.is_empty() => parts.push(
            "the design's network has no hidden layer, so the head trains but cannot shape what the policy reads: the row is the design alone"
                .to_string(),
        ),
        Some(Switch::RewardCritic) if job.design.reward.program().terms().len() < 2 => parts.push(
            "the design's reward is one term: nothing to re-weight, so the row is the design alone"
                .to_string(),
        ),
        _ => {}
    }
    if let Some(a) = read_json::<serl_train::AlignmentStats>(&fdir.join("alignment.json")) {
        parts.push(format!(
            "plan tracker {} bps on training episodes; cloning loss {:.3} → {:.3}",
            a.tracking_pa.map_or("-".into(), |p| format!("{p:+.2}")),
            a.loss_before,
            a.loss_after
        ));
    }
    let records = serl_train::read_metrics(&fdir.join("metrics.jsonl")).unwrap_or_default();
    if let Some(r) = records.iter().rev().find(|r| r.transition_error.is_some()) {
        parts.push(format!(
            "next-market MSE {:.3} (no change: {:.3})",
            r.transition_error.unwrap_or(0.0),
            r.transition_no_change.unwrap_or(0.0)
        ));
    }
    if let Some(w) = records.iter().rev().find_map(|r| r.reward_weights.clone()) {
        let w: Vec<String> = w.iter().map(|v| format!("{v:.2}")).collect();
        parts.push(format!("final term weights [{}]", w.join(", ")));
    }
    parts.join("; ")
}

/// The Markdown table of the rows.
pub fn table(rows: &[HierarchyRow]) -> String {
    let est = |e: &Option<Estimate>| e.map_or("-".to_string(), |e| e.to_string());
    let mut t = Table::new([
        "base",
        "row",
        "adds",
        "validation PA",
        "val. Δ vs TWAP [95% CI]",
        "val. Δ vs design alone",
        "test PA",
        "test Δ vs TWAP",
        "test Δ vs design alone",
        "train s",
        "notes",
    ])
    .right([3, 6, 9]);
    // A split's three cells: PA, Δ vs TWAP, Δ vs the design alone.
    let cells = |split: Option<&Split>, missing: &str| match split {
        Some(t) => [format!("{:+.3}", t.pa), est(&t.vs_twap), est(&t.vs_alone)],
        None => [missing.to_string(), "-".into(), "-".into()],
    };
    for r in rows {
        let trained = r.validation.is_some();
        let [vpa, vtw, val] = cells(r.validation.as_ref(), "-");
        let [tpa, ttw, tal] = cells(r.test.as_ref(), if trained { "sealed" } else { "-" });
        t.row([
            r.base.to_string(),
            r.name.to_string(),
            r.description.to_string(),
            vpa,
            vtw,
            val,
            tpa,
            ttw,
            tal,
            format!("{:.0}", r.train_secs),
            r.note.to_string(),
        ]);
    }
    t.markdown()
}
