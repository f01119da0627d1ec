//! The research report (Markdown and self-contained HTML) and the
//! fine-tuning dataset.

use std::fmt::Write;
use std::path::Path;

use serde_json::json;
use serl_design::ModuleKind;
use serl_eval::{Provenance, ReportData};
use serl_report::{html, lines_chart, Chart, Table};

use crate::error::{write_json, EvolveError};
use crate::pairs::{pairs_from_candidates, sft_from_candidates, Pair, SftExample};
use crate::record::CandidateResult;
use crate::run::EvolveOutcome;

fn err(path: &Path, e: impl std::fmt::Display) -> EvolveError {
    EvolveError::File {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// A line diff: `-` lines of `a` gone, `+` lines of `b` new.
fn diff(a: &str, b: &str) -> String {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut out = String::new();
    for l in &la {
        if !lb.contains(l) {
            let _ = writeln!(out, "- {l}");
        }
    }
    for l in &lb {
        if !la.contains(l) {
            let _ = writeln!(out, "+ {l}");
        }
    }
    if out.is_empty() {
        out.push_str("  (unchanged)\n");
    }
    out
}

fn module_source(c: &CandidateResult, kind: ModuleKind) -> String {
    let Some(d) = &c.design else {
        return String::new();
    };
    let pretty = |v: serde_json::Result<String>| v.unwrap_or_default();
    match kind {
        ModuleKind::Reward => d.reward.source().to_string(),
        ModuleKind::State => pretty(serde_json::to_string_pretty(&d.state)),
        ModuleKind::Architecture => pretty(serde_json::to_string_pretty(&d.architecture)),
        ModuleKind::Imagination => pretty(serde_json::to_string_pretty(&d.imagination)),
        ModuleKind::Profiling => pretty(serde_json::to_string_pretty(&d.profiling)),
        ModuleKind::Communication => pretty(serde_json::to_string_pretty(&d.communication)),
        ModuleKind::Plan => pretty(serde_json::to_string_pretty(&d.plan)),
    }
}

/// Writes `report.md`, `report.html`, `test/` (the backtest report of the
/// final test) and `finetune/` into `dir`; returns the test's summaries.
pub fn write(
    dir: &Path,
    out: &EvolveOutcome,
    modules: &[ModuleKind],
    designer: &str,
    provenance: Provenance,
    ablations: &[crate::AblationRow],
) -> Result<ReportData, EvolveError> {
    let mut md = String::from("# SE-RL evolve report\n\n");
    let _ = writeln!(
        md,
        "Designer: **{designer}**. {} iterations, {} candidates trained.\n",
        out.iterations_run,
        out.candidates.len()
    );
    if let Some(l) = &out.lockbox {
        let _ = writeln!(
            md,
            "Lockbox: the design ({}) was fixed and the test split sealed at {}; the run was declared final and the test opened at {} (`lockbox.json`).\n",
            l.design_key,
            l.sealed_at,
            l.opened_at.as_deref().unwrap_or("(not yet)")
        );
    }
    // The recommendation first, then the final test's verdict.
    md.push_str(&out.evidence.markdown());
    let mut svgs = Vec::new();
    if let Some(svg) = crate::evidence_report::edges_svg(dir, &out.evidence) {
        let title = crate::evidence_report::edges_title(&out.evidence);
        std::fs::write(dir.join("evidence.svg"), &svg).map_err(|e| err(dir, e))?;
        let _ = writeln!(md, "![{title}](evidence.svg)\n");
        svgs.push((title, svg));
    }
    let data = ReportData::new(&out.test, provenance);
    if let Some(v) = crate::verdict(out, &data) {
        md.push_str(&v.markdown());
    }
    let (best_line, points) = iterations_table(&mut md, out);
    svgs.extend(score_plots(dir, &mut md, best_line, points)?);
    best_design(&mut md, out, modules);
    if let Some(db) = crate::database::Database::read(dir) {
        if let Some(svg) = crate::report_search::section(&mut md, &db, &out.candidates) {
            std::fs::write(dir.join("lineage.svg"), &svg).map_err(|e| err(dir, e))?;
            svgs.push(("Lineage".to_string(), svg));
        }
    }
    fine_tunings(&mut md, dir);

    serl_eval::write_report(&dir.join("test"), &out.test, &data)
        .map_err(|e| err(&dir.join("test"), e))?;
    md.push_str("## Test split (once), identical orders\n\n");
    md.push_str(&serl_eval::results_tables(&data, "###"));
    md.push_str(
        "\nThe full backtest report of the test is in [test/report.html](test/report.html).\n\n",
    );
    if dir.join("test-team").join("report.html").exists() {
        md.push_str(
            "Each team above is one order (its members' fills added up). The team report, with every member's table, the gain from communication (`serl-best` against itself silenced), MAPPO against independent PPO and the crowding cost, is in [test-team/report.html](test-team/report.html).\n\n",
        );
    }
    cost_and_ablations(&mut md, out, ablations);
    std::fs::write(dir.join("report.md"), &md).map_err(|e| err(dir, e))?;
    std::fs::write(dir.join("report.html"), html(&md, &svgs)).map_err(|e| err(dir, e))?;
    write_finetune(dir, &out.candidates)?;
    Ok(data)
}

type Points = Vec<(f64, f64)>;

/// The designer's fine-tunings between rounds (`[evolve.finetune]`,
/// `finetune/adapters.json`), when the run had them.
fn fine_tunings(md: &mut String, dir: &Path) {
    let path = dir.join("finetune").join("adapters.json");
    let Some(learned) = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str::<Vec<crate::Learned>>(&t).ok())
    else {
        return;
    };
    md.push_str("## The designer, fine-tuned between rounds\n\n");
    let mut t = Table::new([
        "after round",
        "examples",
        "held-out loss, base → adapter",
        "seconds",
        "adapter",
    ])
    .right([0, 1, 3]);
    for l in &learned {
        let loss = l
            .heldout_loss
            .map_or("-".into(), |(b, a)| format!("{b:.4} → {a:.4}"));
        let adapter = l.adapter.as_ref().map_or("(too few examples)".into(), |a| {
            format!("`{}`", a.display())
        });
        t.row([
            l.iteration.to_string(),
            l.examples.to_string(),
            loss,
            format!("{:.0}", l.secs),
            adapter,
        ]);
    }
    md.push_str(&t.markdown());
    md.push_str(
        "\nThe rounds after each fine-tuning were designed with its adapter (docs/llm.md).\n\n",
    );
}

/// The table of iterations; returns the best score so far and every
/// candidate's score, by iteration, for the plots.
fn iterations_table(md: &mut String, out: &EvolveOutcome) -> (Points, Points) {
    let iters = out.iterations_run;
    let mut best_line = Vec::new();
    let mut points = Vec::new();
    let mut best_so_far = f64::NEG_INFINITY;
    md.push_str("## Iterations\n\n");
    let mut t = Table::new([
        "iteration",
        "candidates",
        "valid",
        "best score",
        "mean score",
        "best validation PA",
        "success rate",
    ]);
    for j in 0..iters {
        let cs: Vec<&CandidateResult> =
            out.candidates.iter().filter(|c| c.iteration == j).collect();
        let scores: Vec<f64> = cs.iter().filter_map(|c| c.selection_score()).collect();
        for s in &scores {
            points.push(((j + 1) as f64, *s));
        }
        let best = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        best_so_far = best_so_far.max(best);
        if best_so_far.is_finite() {
            best_line.push(((j + 1) as f64, best_so_far));
        }
        let best_pa = cs
            .iter()
            .filter_map(|c| c.validation.as_ref().map(|v| v.pa))
            .fold(f64::NEG_INFINITY, f64::max);
        let sr = cs
            .iter()
            .filter(|c| !c.modules.is_empty())
            .map(|c| c.success_rate)
            .sum::<f64>()
            / cs.iter().filter(|c| !c.modules.is_empty()).count().max(1) as f64;
        let fmt = |v: f64| {
            if v.is_finite() {
                format!("{v:.3}")
            } else {
                "-".into()
            }
        };
        let mean = if scores.is_empty() {
            f64::NAN
        } else {
            scores.iter().sum::<f64>() / scores.len() as f64
        };
        t.row([
            (j + 1).to_string(),
            cs.len().to_string(),
            scores.len().to_string(),
            fmt(best),
            fmt(mean),
            fmt(best_pa),
            format!("{sr:.2}"),
        ]);
    }
    md.push_str(&t.markdown());
    md.push('\n');
    (best_line, points)
}

/// The score plots, written beside the report; returns them for the HTML.
fn score_plots(
    dir: &Path,
    md: &mut String,
    best_line: Points,
    points: Points,
) -> Result<Vec<(String, String)>, EvolveError> {
    let mut svgs = Vec::new();
    let mut svg = String::new();
    let series = [
        ("best so far".to_string(), best_line),
        ("candidates".to_string(), points.clone()),
    ];
    let chart = Chart::new(
        "Score per iteration (PA × success rate)",
        "iteration",
        "score",
    );
    if lines_chart(&mut svg, &chart.integer_x(), &series[..1]).is_ok() {
        md.push_str("![Best score per iteration](evolve0.svg)\n\n");
        svgs.push(("Best score per iteration".to_string(), svg));
    }
    let mut svg = String::new();
    if !points.is_empty()
        && lines_chart(
            &mut svg,
            &Chart::new("Candidate scores", "iteration", "score")
                .points()
                .integer_x(),
            &series[1..],
        )
        .is_ok()
    {
        md.push_str("![Candidate score distribution](evolve1.svg)\n\n");
        svgs.push(("Candidate score distribution".to_string(), svg));
    }
    for (k, (_, s)) in svgs.iter().enumerate() {
        std::fs::write(dir.join(format!("evolve{k}.svg")), s).map_err(|e| err(dir, e))?;
    }

    Ok(svgs)
}

/// The best design, module by module, and how each changed between the
/// iterations' best candidates.
fn best_design(md: &mut String, out: &EvolveOutcome, modules: &[ModuleKind]) {
    let iters = out.iterations_run;
    let _ = writeln!(md, "## The best design: `{}`\n", out.best.key);
    if let Some(v) = &out.best.validation {
        let _ = writeln!(md, "Validation: score {:.3}, PA {:.3} bps (std {:.2}), WR {:.3}, GLR {:.2}, AFI {:.4}; dynamic PA {:.3}, illusory gain {:.3} bps.\n",
            out.best.selection_score().unwrap_or(0.0), v.pa, v.pa_std, v.wr, v.glr, v.afi, v.pa_dynamic, v.illusory_gain);
    }
    if let Some(p) = &out.best.paired {
        let _ = writeln!(
            md,
            "Daily edge over plain PPO on {} validation days: {:+.3} bps ± {:.3} (standard error); lower bound {:+.3} bps, which the search ranked by.\n",
            p.days, p.mean, p.se, p.lower
        );
    }
    if let (Some(b), Some(v)) = (&out.baseline.validation, &out.best.validation) {
        let _ = writeln!(
            md,
            "Plain PPO with the default modules, trained and validated the same way: PA {:.3} bps (WR {:.3}); the best design {} it on validation by {:.3} bps.\n",
            b.pa,
            b.wr,
            if v.pa > b.pa { "beats" } else { "does not beat" },
            v.pa - b.pa
        );
    }
    let mut bests: Vec<&CandidateResult> = Vec::new();
    for j in 0..iters {
        if let Some(b) = out
            .candidates
            .iter()
            .filter(|c| c.iteration == j && c.score.is_some())
            .max_by(|a, b| {
                let s = |c: &&CandidateResult| c.selection_score().unwrap_or(0.0);
                s(a).total_cmp(&s(b))
            })
        {
            bests.push(b);
        }
    }
    for &kind in modules {
        let _ = writeln!(
            md,
            "### {}\n\n```\n{}\n```\n",
            kind.name(),
            module_source(&out.best, kind)
        );
        for w in bests.windows(2) {
            let (a, b) = (module_source(w[0], kind), module_source(w[1], kind));
            if a != b {
                let _ = writeln!(
                    md,
                    "Iteration {} → {} (best of each):\n\n```\n{}```\n",
                    w[0].iteration + 1,
                    w[1].iteration + 1,
                    diff(&a, &b)
                );
            }
        }
    }
}

/// What the run cost, and the ablation table.
fn cost_and_ablations(md: &mut String, out: &EvolveOutcome, ablations: &[crate::AblationRow]) {
    let (pt, ct): (u64, u64) = out.candidates.iter().fold((0, 0), |a, c| {
        (a.0 + c.prompt_tokens, a.1 + c.completion_tokens)
    });
    md.push_str("## Cost\n\n");
    let mut t = Table::new(["stage", "s"]);
    for (name, secs) in &out.stages {
        t.row([name.to_string(), format!("{secs:.1}")]);
    }
    md.push_str(&t.markdown());
    md.push_str("\n`train` and `evaluate` add up each candidate's own seconds, so where candidates trained side by side (`[evolve] parallel`) they exceed the wall time they took; the other stages are wall time.\n");
    if let Some(u) = out.core_use {
        let _ = writeln!(
            md,
            "\nThe run's processes used {:.0} s of CPU over {:.0} s of wall time on {} cores: the cores were {:.0}% busy.",
            u.cpu_secs,
            u.wall_secs,
            u.cores,
            100.0 * u.busy_share()
        );
    }
    let _ = writeln!(md, "\nLLM tokens: {pt} prompt, {ct} completion.\n");
    spend(md, out);
    md.push_str("## Ablations\n\n");
    if ablations.is_empty() {
        md.push_str("None configured: `[evolve] ablations = [\"no_high_level\", \"no_low_level\", \"static_only\", \"dynamic_only\", \"fixed_weights\", \"builtin\"]` runs each after the main run (same seed, data and orders) and tabulates it here.\n");
    } else {
        md.push_str("Each row is a full run with the same seed, data and orders (`ablations/NAME/` holds its own report): the search's best validation score, and its best design retrained and tested once on the static test split.\n\n");
        md.push_str(&crate::ablation::table(ablations));
    }
    hierarchy(md, out);
}

/// The hierarchy rows: the best design with each part switched on.
fn hierarchy(md: &mut String, out: &EvolveOutcome) {
    md.push_str(
        "
## Hierarchy: plan, alignment, transition supervision, reward critic

",
    );
    if out.hierarchy.is_empty() {
        md.push_str("None configured: `[evolve.hierarchy] rows = [\"plan\", \"plan_alignment\", \"transition\", \"reward_critic\"]` retrains the best design with each part switched on and tabulates it here (`configs/evolve-hierarchy.toml`, docs/hierarchy.md).\n");
        return;
    }
    md.push_str("Each base design (the search's best, and plain PPO's where configured) retrained with the final budget and seed, alone and once with each part switched on; every row and TWAP play the same validation orders and test orders in the static replay. Differences are paired order by order, with 95% bootstrap CIs. The design alone is the base without a plan. Training seconds are wall time, with rows trained side by side, so they compare only roughly. See docs/hierarchy.md.\n\n");
    md.push_str(&crate::hierarchy_rows::table(&out.hierarchy));
}

/// What the search spent per module it accepted and per basis point its
/// best design gained on validation over plain PPO: the tokens the
/// designer used and the seconds the candidates trained.
fn spend(md: &mut String, out: &EvolveOutcome) {
    let designed = out
        .candidates
        .iter()
        .filter(|c| c.kind() == crate::CandidateKind::Designed);
    let accepted = designed
        .flat_map(|c| &c.modules)
        .filter(|m| m.text.is_some())
        .count();
    let crate::budget::Spent {
        tokens,
        seconds: secs,
    } = crate::budget::Spent::of(&out.candidates);
    let pa = |c: &CandidateResult| c.validation.as_ref().map_or(0.0, |v| v.pa);
    let gain = pa(&out.best) - pa(&out.baseline);
    md.push_str("| spent | LLM tokens | candidates' training seconds |\n|---|---:|---:|\n");
    let _ = writeln!(md, "| in all | {tokens} | {secs:.1} |");
    if accepted > 0 {
        let n = accepted as f64;
        let _ = writeln!(
            md,
            "| per accepted module ({accepted}) | {:.0} | {:.1} |",
            tokens as f64 / n,
            secs / n
        );
    }
    if gain > 0.0 {
        let _ = writeln!(
            md,
            "| per bp of validation gain over plain PPO (+{gain:.3} bp) | {:.0} | {:.1} |",
            tokens as f64 / gain,
            secs / gain
        );
    } else {
        let _ = writeln!(
            md,
            "| per bp of validation gain over plain PPO | no gain ({gain:+.3} bp) | |"
        );
    }
    md.push('\n');
    let screened: Vec<&crate::record::Screened> = out
        .candidates
        .iter()
        .filter_map(|c| c.prescreen.as_ref())
        .collect();
    if !screened.is_empty() {
        let stopped = screened.iter().filter(|s| !s.passed).count();
        let secs: f64 = screened.iter().map(|s| s.secs).sum();
        let _ = writeln!(
            md,
            "Pre-screen (`[evolve.budget.prescreen]`): {} designs trained briefly first ({secs:.1} s in all), {stopped} of them stopped there for falling more than the margin below plain PPO's short run, the rest trained in full.\n",
            screened.len()
        );
    }
}

/// `finetune/`: what the designer can learn from this run
/// ([`crate::pairs`]), in the formats outside trainers read (TRL and most
/// LoRA tools) and in full for `serl llm`: `sft.jsonl` each prompt's best
/// reply as a chat record, `dpo.jsonl` every pair as `{prompt, chosen,
/// rejected, score_chosen, score_rejected}`, `pairs.jsonl` the same pairs
/// with their kind, module, the refusal's reason and where they come from.
fn write_finetune(dir: &Path, all: &[CandidateResult]) -> Result<(), EvolveError> {
    let fdir = dir.join("finetune");
    std::fs::create_dir_all(&fdir).map_err(|e| err(&fdir, e))?;
    let tag = dir.display().to_string();
    let mut pairs = pairs_from_candidates(all);
    for p in &mut pairs {
        p.source = format!("{tag}:{}", p.source);
    }
    let files = [
        (
            "sft.jsonl",
            jsonl(sft_from_candidates(all).iter().map(SftExample::chat_record)),
        ),
        ("dpo.jsonl", jsonl(pairs.iter().map(Pair::dpo_record))),
        ("pairs.jsonl", jsonl(pairs.iter().map(|p| json!(p)))),
    ];
    for (name, text) in files {
        let path = fdir.join(name);
        std::fs::write(&path, text).map_err(|e| err(&path, e))?;
    }
    write_json(
        &fdir.join("README.json"),
        &json!({
            "sft.jsonl": "chat-format SFT records {messages: [user prompt, assistant reply], score}: each prompt's best-scored accepted reply, as the model wrote it",
            "dpo.jsonl": "preference pairs {prompt, chosen, rejected, score_chosen, score_rejected} on the same prompt, for DPO/ORPO trainers: every pair of pairs.jsonl",
            "pairs.jsonl": "the same pairs with their kind (better: the higher-scored design's reply; valid: an accepted reply over one the validator refused, with its reason; mutation: a mutation's reply over the parent's module it beat), module and source (run:candidate keys)",
            "howto": "see docs/evolve.md, section Fine-tuning your own model; `serl llm pairs RUN` counts them"
        }),
    )
}

/// One JSON record a line.
fn jsonl(records: impl Iterator<Item = serde_json::Value>) -> String {
    records.map(|r| format!("{r}\n")).collect()
}
