//! What an equal-budget study found: each arm's best validation score
//! against candidates trained (mean over search seeds), each arm's best
//! against every other across seeds (paired by seed, with a t interval,
//! an exact sign-flip p-value and Benjamini–Hochberg q-values), the
//! winner declared on validation, and only then the lockbox: the
//! winner's and the runner-up's chosen designs tested once.

use std::fmt::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serl_eval::OrderResult;

use crate::arm_run::ArmRun;
use crate::error::{Context, Result};

/// One arm over its seeds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArmSummary {
    /// The arm.
    pub arm: String,
    /// Search seeds run.
    pub seeds: usize,
    /// Mean over seeds of the study score of the design each run chose
    /// (the one its test would play): what the study ranks arms by.
    /// `-inf` when no seed chose a scored design.
    pub chosen_mean: f64,
    /// Lowest over seeds (seeds without a choice left out).
    pub chosen_min: f64,
    /// Highest over seeds.
    pub chosen_max: f64,
    /// Seeds whose run chose no scored design (every design invalid).
    pub no_choice: usize,
    /// Mean over seeds of the best study score among all the run's
    /// designs (the end of its curve).
    pub best_mean: f64,
    /// Mean over seeds of the chosen design's daily edge over plain PPO,
    /// bps (mean of days).
    pub chosen_edge: f64,
    /// Seeds whose chosen design beat plain PPO at its lower bound.
    pub chosen_beats_plain: usize,
    /// Mean tokens per run.
    pub tokens: f64,
    /// Mean seconds per run.
    pub secs: f64,
    /// Candidates per run, mean over seeds (designed ones, invalid
    /// included, and low-level trials, whose count depends on the
    /// designs: a design without constants has none).
    pub candidates: f64,
    /// Valid share of designed candidates.
    pub valid_rate: f64,
}

/// Arm `a` against arm `b`: the difference of their best scores, paired
/// by search seed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    /// The first arm.
    pub a: String,
    /// The second arm.
    pub b: String,
    /// Seeds both ran.
    pub n: usize,
    /// Mean of `a − b` over seeds.
    pub mean: f64,
    /// 95% t interval, low end (NaN with one seed).
    pub lo: f64,
    /// 95% t interval, high end.
    pub hi: f64,
    /// Exact two-sided sign-flip p-value over the seeds.
    pub p: f64,
    /// Benjamini–Hochberg over every comparison of the study.
    pub q: f64,
}

/// The study's final best score of a run (its curve's end), if any
/// design scored.
fn final_best(r: &ArmRun) -> Option<f64> {
    r.curve.iter().rev().find_map(|x| *x)
}

/// The mean of the finite values of `v`, `-inf` for none.
fn mean_of(v: &[f64]) -> f64 {
    let f: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if f.is_empty() {
        f64::NEG_INFINITY
    } else {
        f.iter().sum::<f64>() / f.len() as f64
    }
}

/// Each arm over its seeds, in the study's order.
pub fn summarize(arms: &[String], runs: &[ArmRun]) -> Vec<ArmSummary> {
    arms.iter()
        .map(|arm| {
            let rs: Vec<&ArmRun> = runs.iter().filter(|r| &r.arm == arm).collect();
            let chosen: Vec<f64> = rs.iter().filter_map(|r| r.chosen_score).collect();
            let bests: Vec<f64> = rs.iter().filter_map(|r| final_best(r)).collect();
            let n = rs.len().max(1) as f64;
            let designed: usize = rs.iter().map(|r| r.designed).sum();
            let valid: usize = rs.iter().map(|r| r.valid).sum();
            let edges: Vec<f64> = rs
                .iter()
                .filter_map(|r| r.chosen_paired.as_ref().map(|p| p.mean))
                .collect();
            ArmSummary {
                arm: arm.clone(),
                seeds: rs.len(),
                chosen_mean: mean_of(&chosen),
                chosen_min: chosen.iter().copied().fold(f64::INFINITY, f64::min),
                chosen_max: chosen.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                no_choice: rs.len() - chosen.len(),
                best_mean: mean_of(&bests),
                chosen_edge: mean_of(&edges),
                chosen_beats_plain: rs
                    .iter()
                    .filter(|r| r.chosen_paired.as_ref().is_some_and(|p| p.lower > 0.0))
                    .count(),
                tokens: rs.iter().map(|r| r.tokens as f64).sum::<f64>() / n,
                secs: rs.iter().map(|r| r.secs).sum::<f64>() / n,
                candidates: rs.iter().map(|r| r.candidates as f64).sum::<f64>() / n,
                valid_rate: valid as f64 / designed.max(1) as f64,
            }
        })
        .collect()
}

/// The 97.5% quantile of Student's t with `df` degrees of freedom (a
/// table to 30, the normal's beyond).
fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        d if d <= 30 => T[d - 1],
        _ => 1.96,
    }
}

/// The exact two-sided sign-flip p-value of "the differences `d` are
/// centred on 0": the share of the 2ⁿ sign patterns whose mean is at
/// least as far from 0 as the observed one (n ≤ 20; beyond, the normal
/// approximation of the t statistic).
fn sign_flip_p(d: &[f64]) -> f64 {
    let n = d.len();
    if n == 0 {
        return 1.0;
    }
    let observed = d.iter().sum::<f64>().abs();
    if n > 20 {
        let mean = d.iter().sum::<f64>() / n as f64;
        let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        let z = mean.abs() / (sd / (n as f64).sqrt()).max(1e-12);
        return (2.0 * (1.0 - normal_cdf(z))).min(1.0);
    }
    let mut extreme = 0u64;
    for signs in 0u64..(1 << n) {
        let s: f64 = d
            .iter()
            .enumerate()
            .map(|(i, x)| {
                if signs >> i & 1 == 1 {
                    -x.abs()
                } else {
                    x.abs()
                }
            })
            .sum();
        if s.abs() >= observed - 1e-12 {
            extreme += 1;
        }
    }
    extreme as f64 / (1u64 << n) as f64
}

fn normal_cdf(z: f64) -> f64 {
    // Abramowitz–Stegun 7.1.26, ample for a p-value.
    let t = 1.0 / (1.0 + 0.3275911 * z.abs() / std::f64::consts::SQRT_2);
    let poly = t
        * (0.254829592
            + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    let erf = 1.0 - poly * (-(z * z) / 2.0).exp();
    0.5 * (1.0 + erf.copysign(z))
}

/// Every pair of arms, the study scores of the designs their runs chose,
/// paired by seed (seeds where either chose none left out).
pub fn compare(arms: &[String], runs: &[ArmRun]) -> Vec<Comparison> {
    let best = |arm: &str, seed: u64| {
        runs.iter()
            .find(|r| r.arm == arm && r.seed == seed)
            .and_then(|r| r.chosen_score)
    };
    let mut out = Vec::new();
    for (i, a) in arms.iter().enumerate() {
        for b in &arms[i + 1..] {
            let d: Vec<f64> = runs
                .iter()
                .filter(|r| &r.arm == a)
                .filter_map(|r| Some(best(a, r.seed)? - best(b, r.seed)?))
                .collect();
            let n = d.len();
            let mean = d.iter().sum::<f64>() / n.max(1) as f64;
            let se = if n < 2 {
                f64::NAN
            } else {
                (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64 / n as f64)
                    .sqrt()
            };
            let half = t975(n.saturating_sub(1)) * se;
            out.push(Comparison {
                a: a.clone(),
                b: b.clone(),
                n,
                mean,
                lo: mean - half,
                hi: mean + half,
                p: sign_flip_p(&d),
                q: f64::NAN,
            });
        }
    }
    let q = serl_eval::benjamini_hochberg(&out.iter().map(|c| c.p).collect::<Vec<_>>());
    for (c, q) in out.iter_mut().zip(q) {
        c.q = q;
    }
    out
}

/// The arms from the winner down, on validation alone: by the mean over
/// seeds of the study score of the design each run chose (an arm whose
/// runs chose nothing last).
pub fn ranking(summaries: &[ArmSummary]) -> Vec<String> {
    let mut s: Vec<&ArmSummary> = summaries.iter().collect();
    s.sort_by(|a, b| b.chosen_mean.total_cmp(&a.chosen_mean));
    s.into_iter().map(|a| a.arm.clone()).collect()
}

/// One opened run's test: the chosen design and plain PPO, retrained the
/// same way, on the test orders of the static replay.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestLine {
    /// The arm.
    pub arm: String,
    /// The search seed.
    pub seed: u64,
    /// The chosen design's mean test PA, bps.
    pub best_pa: f64,
    /// Plain PPO's, bps.
    pub plain_pa: f64,
    /// Days the test spans.
    pub days: usize,
    /// Days the chosen design won.
    pub days_won: usize,
}

/// The line of one opened run's test results.
pub fn test_line(arm: &str, seed: u64, test: &[OrderResult]) -> Option<TestLine> {
    let rows = |s: &str| -> Vec<&OrderResult> {
        test.iter()
            .filter(|r| r.strategy == s && r.env == "static")
            .collect()
    };
    let (best, plain) = (rows("serl-best"), rows("ppo-default"));
    let mean = |v: &[&OrderResult]| v.iter().map(|r| r.pa_bps).sum::<f64>() / v.len().max(1) as f64;
    let day = serl_eval::day_test(&best, &plain, seed)?;
    Some(TestLine {
        arm: arm.into(),
        seed,
        best_pa: mean(&best),
        plain_pa: mean(&plain),
        days: day.days,
        days_won: day.days_won,
    })
}

/// `study/lockbox.json`: the winner declared on validation, then tested.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StudyLockbox {
    /// The arm with the highest mean best validation score.
    pub winner: String,
    /// The second.
    pub runner_up: String,
    /// When the winner was declared (and the test opened).
    pub declared_at: String,
    /// Each opened run's test.
    pub tests: Vec<TestLine>,
}

impl StudyLockbox {
    /// The winner on validation, then each of its runs' one test against
    /// plain PPO.
    pub fn line(&self) -> String {
        let tests: Vec<String> = self
            .tests
            .iter()
            .map(|t| {
                let edge = t.best_pa - t.plain_pa;
                format!("{} seed {} {edge:+.2} bps vs plain PPO", t.arm, t.seed)
            })
            .collect();
        let (winner, runner_up) = (&self.winner, &self.runner_up);
        let tests = tests.join("; ");
        format!("winner on validation: {winner} (runner-up {runner_up}); tested once: {tests}")
    }
}

/// Writes `study/report.md` and `study/report.html` under `out`.
pub fn write(
    out: &Path,
    runs: &[ArmRun],
    arms: &[String],
    lockbox: Option<&StudyLockbox>,
) -> Result<()> {
    let summaries = summarize(arms, runs);
    let comparisons = compare(arms, runs);
    let mut md = String::from("# Designer study: equal budgets, several search seeds\n\n");
    let _ = writeln!(
        md,
        "Every arm ran the same task, data and budget (the same rounds and candidates per round, convergence and `[evolve.budget]` off) once per search seed. A design's study score is the lower bound (mean − z·se) of its daily edge over plain PPO trained and validated the same way, charged for the designer's retries. Arms are ranked by the study score of the design each run chose (the design its test would play); the test split stayed sealed until the winner was declared.\n"
    );
    let wall: f64 = runs.iter().map(|r| r.secs).sum();
    let _ = writeln!(
        md,
        "{} runs took {:.1} minutes of wall time in all (each run's own seconds, over every process that worked on it; the test openings are extra).\n",
        runs.len(),
        wall / 60.0
    );
    md.push_str("## Arms\n\n| arm | seeds | chosen design's score (mean) | min | max | best of all its designs (mean) | chosen design's edge over plain PPO (bps) | seeds whose chosen design beats plain PPO at its lower bound | valid designs | candidates per run | tokens per run | seconds per run |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for s in &summaries {
        let none = if s.no_choice > 0 {
            format!(" ({} chose none)", s.no_choice)
        } else {
            String::new()
        };
        let _ = writeln!(
            md,
            "| {} | {}{none} | {:.3} | {:.3} | {:.3} | {:.3} | {:+.3} | {}/{} | {:.0}% | {:.1} | {:.0} | {:.0} |",
            s.arm,
            s.seeds,
            s.chosen_mean,
            s.chosen_min,
            s.chosen_max,
            s.best_mean,
            s.chosen_edge,
            s.chosen_beats_plain,
            s.seeds,
            100.0 * s.valid_rate,
            s.candidates,
            s.tokens,
            s.secs
        );
    }
    md.push_str("\n## Each arm against each other (the chosen designs' scores, paired by seed)\n\n| a | b | seeds | mean a − b | 95% CI | p (sign-flip) | q (BH) |\n|---|---|---:|---:|---|---:|---:|\n");
    for c in &comparisons {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:+.3} | [{:+.3}, {:+.3}] | {:.3} | {:.3} |",
            c.a, c.b, c.n, c.mean, c.lo, c.hi, c.p, c.q
        );
    }
    md.push_str("\nWith n seeds the exact sign-flip p-value cannot go below 2/2ⁿ (0.25 with 3 seeds): the interval says more than the p-value in a small study.\n\n");
    let mut svgs: Vec<(String, String, &str)> = Vec::new();
    if let Some(svg) = curve_chart(&mut md, arms, runs) {
        svgs.push(("Best score so far".into(), svg, "curves.svg"));
    }
    if let Some(svg) = chosen_chart(&mut md, &summaries) {
        svgs.push(("The chosen designs".into(), svg, "chosen.svg"));
    }
    operators_table(&mut md, runs);
    designs(&mut md, runs);
    lockbox_section(&mut md, &summaries, lockbox);
    let write = |name: &str, text: &str| {
        let path = out.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    write("report.md", &md)?;
    for (_, svg, file) in &svgs {
        write(file, svg)?;
    }
    let svgs: Vec<(String, String)> = svgs.into_iter().map(|(t, s, _)| (t, s)).collect();
    write("report.html", &serl_report::html(&md, &svgs))?;
    let json = serde_json::json!({"arms": summaries, "comparisons": comparisons, "runs": runs});
    write(
        "summary.json",
        &serde_json::to_string_pretty(&json).unwrap_or_default(),
    )
}

/// The best score so far against candidates, each arm's mean over seeds.
fn curve_chart(md: &mut String, arms: &[String], runs: &[ArmRun]) -> Option<String> {
    let series: Vec<(String, Vec<(f64, f64)>)> = arms
        .iter()
        .map(|arm| {
            let rs: Vec<&ArmRun> = runs.iter().filter(|r| &r.arm == arm).collect();
            let len = rs.iter().map(|r| r.curve.len()).max().unwrap_or(0);
            let pts = (0..len)
                .filter_map(|i| {
                    let v: Vec<f64> = rs
                        .iter()
                        .filter_map(|r| r.curve.get(i).copied().flatten())
                        .collect();
                    (v.len() == rs.len() && !v.is_empty())
                        .then(|| ((i + 1) as f64, v.iter().sum::<f64>() / v.len() as f64))
                })
                .collect();
            (arm.clone(), pts)
        })
        .collect();
    let chart = serl_report::Chart::new(
        "Best study score so far (mean over seeds)",
        "candidates made (invalid designs included)",
        "lower bound of the daily edge over plain PPO",
    )
    .integer_x();
    let mut svg = String::new();
    serl_report::lines_chart(&mut svg, &chart, &series).ok()?;
    md.push_str("## Best score against candidates made\n\n![Best score so far](curves.svg)\n\nThe mean over seeds of the best study score among the designs made so far; the spread over seeds is in the next chart and the table above.\n\n");
    Some(svg)
}

/// Each arm's chosen designs: the mean study score over seeds, with the
/// lowest and highest seed as its band.
fn chosen_chart(md: &mut String, summaries: &[ArmSummary]) -> Option<String> {
    let shown: Vec<&ArmSummary> = summaries
        .iter()
        .filter(|s| s.chosen_mean.is_finite())
        .collect();
    if shown.is_empty() {
        return None;
    }
    let chart = serl_report::Chart::new(
        "The chosen designs' study scores: mean, lowest and highest seed",
        "arm",
        "lower bound of the daily edge over plain PPO",
    )
    .x_labels(shown.iter().map(|s| s.arm.clone()).collect());
    let points = shown
        .iter()
        .map(|s| (s.chosen_mean, s.chosen_min, s.chosen_max))
        .collect();
    let mut svg = String::new();
    serl_report::intervals_chart(&mut svg, &chart, &[("chosen".to_string(), points)]).ok()?;
    md.push_str("![The chosen designs](chosen.svg)\n\n");
    Some(svg)
}

/// Valid designs per operator, over every run of each arm.
fn operators_table(md: &mut String, runs: &[ArmRun]) {
    let mut rows = Vec::new();
    for r in runs {
        for (op, (n, v)) in &r.operators {
            rows.push((r.arm.clone(), op.clone(), *n, *v));
        }
    }
    if rows.is_empty() {
        return;
    }
    let mut merged: std::collections::BTreeMap<(String, String), (usize, usize)> =
        Default::default();
    for (arm, op, n, v) in rows {
        let e = merged.entry((arm, op)).or_default();
        e.0 += n;
        e.1 += v;
    }
    md.push_str("## Operators (arms with the program database)\n\n| arm | operator | written | valid |\n|---|---|---:|---:|\n");
    for ((arm, op), (n, v)) in merged {
        let _ = writeln!(
            md,
            "| {arm} | {op} | {n} | {v} ({:.0}%) |",
            100.0 * v as f64 / n.max(1) as f64
        );
    }
    md.push('\n');
}

/// A few of each arm's best and worst designs, as text.
fn designs(md: &mut String, runs: &[ArmRun]) {
    md.push_str("## Designs (reward programs)\n\n");
    for r in runs {
        let _ = writeln!(
            md,
            "**{} seed {}** (chose `{}`: `{}`)\n",
            r.arm, r.seed, r.chosen, r.chosen_reward
        );
        for (label, list) in [("best", &r.best_designs), ("worst", &r.worst_designs)] {
            for (key, score, reward) in list {
                let _ = writeln!(md, "- {label} {key} ({score:+.3}): `{reward}`");
            }
        }
        md.push('\n');
    }
}

fn lockbox_section(md: &mut String, summaries: &[ArmSummary], lockbox: Option<&StudyLockbox>) {
    md.push_str("## The lockbox\n\n");
    let Some(l) = lockbox else {
        md.push_str("The test split is sealed: the study has not declared its winner yet.\n");
        return;
    };
    let _ = writeln!(
        md,
        "Declared on validation at {}: winner **{}**, runner-up **{}** (of {} arms); only their runs' tests were opened, once.\n",
        l.declared_at,
        l.winner,
        l.runner_up,
        summaries.len()
    );
    md.push_str("| arm | seed | chosen design, test PA (bps) | plain PPO, test PA (bps) | difference | days won |\n|---|---:|---:|---:|---:|---:|\n");
    for t in &l.tests {
        let _ = writeln!(
            md,
            "| {} | {} | {:+.3} | {:+.3} | {:+.3} | {}/{} |",
            t.arm,
            t.seed,
            t.best_pa,
            t.plain_pa,
            t.best_pa - t.plain_pa,
            t.days_won,
            t.days
        );
    }
    md.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sign_flip_p_value_counts_patterns_as_extreme() {
        // Three positive differences: only the all-plus and all-minus
        // patterns are as extreme, so 2/8.
        assert!((sign_flip_p(&[1.0, 2.0, 3.0]) - 0.25).abs() < 1e-12);
        assert!((sign_flip_p(&[1.0, -1.0]) - 1.0).abs() < 1e-12);
        let many = [1.0; 10];
        assert!((sign_flip_p(&many) - 2.0 / 1024.0).abs() < 1e-12);
    }

    #[test]
    fn the_t_interval_widens_with_few_seeds() {
        assert!((t975(2) - 4.303).abs() < 1e-9);
        assert_eq!(t975(100), 1.96);
        assert!(t975(0).is_nan());
        assert!((normal_cdf(1.96) - 0.975).abs() < 1e-3);
    }
}
