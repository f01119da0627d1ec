//! The training report: curves of the loss, the hybrid weights α and β,
//! the episode PA and the validation PA over updates.

use std::fmt::Write;
use std::path::Path;

use serl_report::{html, lines_chart, Chart};

use crate::run::UpdateRecord;
use crate::rundir::write_atomic;
use crate::TrainError;

type Series = (String, Vec<(f64, f64)>);

fn series(
    name: &str,
    records: &[UpdateRecord],
    f: impl Fn(&UpdateRecord) -> Option<f64>,
) -> Series {
    (
        name.to_string(),
        records
            .iter()
            .filter_map(|r| {
                f(r).filter(|v| v.is_finite())
                    .map(|v| (r.env_steps as f64, v))
            })
            .collect(),
    )
}

/// One series per reward term: the weight the critic gave it, by update.
fn critic_weights(records: &[UpdateRecord]) -> Vec<Series> {
    let terms = records
        .iter()
        .filter_map(|r| r.reward_weights.as_ref().map(Vec::len))
        .max()
        .unwrap_or(0);
    (0..terms)
        .map(|k| {
            series(&format!("term {}", k + 1), records, |r| {
                r.reward_weights.as_ref().and_then(|w| w.get(k).copied())
            })
        })
        .collect()
}

/// Writes `report.md`, `report.html` and the plots into `dir`.
pub fn write(dir: &Path, records: &[UpdateRecord]) -> Result<(), TrainError> {
    let plots: Vec<(&str, &str, Vec<Series>)> = vec![
        (
            "Loss",
            "loss",
            vec![
                series("total", records, |r| Some(r.loss)),
                series("static", records, |r| r.loss_static),
                series("dynamic", records, |r| r.loss_dynamic),
            ],
        ),
        (
            "Hybrid weights",
            "weight",
            vec![
                series("α (static)", records, |r| Some(r.alpha)),
                series("β (dynamic)", records, |r| Some(r.beta)),
            ],
        ),
        (
            "Training episodes: PA",
            "PA, bps",
            vec![
                series("static", records, |r| r.episode_pa_static),
                series("dynamic", records, |r| r.episode_pa_dynamic),
            ],
        ),
        (
            "Validation PA (static, greedy)",
            "PA, bps",
            vec![series("validation", records, |r| r.val_pa)],
        ),
        (
            "Transition supervision: next market features, mean squared error",
            "MSE (normalised)",
            vec![
                series("the head's prediction", records, |r| r.transition_error),
                series("no change", records, |r| r.transition_no_change),
            ],
        ),
        (
            "Reward critic: term weights",
            "weight",
            critic_weights(records),
        ),
    ];
    let mut svgs = Vec::new();
    let mut md = String::from("# Training report\n\n");
    let last = records.last();
    let _ = writeln!(
        md,
        "{} updates, {} environment steps in {:.1} s.\n",
        records.len(),
        last.map_or(0, |r| r.env_steps),
        last.map_or(0.0, |r| r.secs)
    );
    if let Some(best) = records
        .iter()
        .filter_map(|r| r.val_pa.map(|v| (r.update, v)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
    {
        let _ = writeln!(
            md,
            "Best validation PA: **{:.3} bps** after update {}.\n",
            best.1,
            best.0 + 1
        );
    }
    for (title, y, s) in plots {
        let s: Vec<Series> = s.into_iter().filter(|s| !s.1.is_empty()).collect();
        if s.is_empty() {
            continue;
        }
        let mut svg = String::new();
        if lines_chart(&mut svg, &Chart::new(title, "environment steps", y), &s).is_ok() {
            let k = svgs.len();
            std::fs::write(dir.join(format!("train{k}.svg")), &svg)
                .map_err(|e| TrainError::io(dir, e))?;
            let _ = writeln!(md, "![{title}](train{k}.svg)\n");
            svgs.push((title.to_string(), svg));
        }
    }
    md.push_str("| update | steps | loss | α | β | episode PA | validation PA | steps/s |\n|---|---|---|---|---|---|---|---|\n");
    let stride = (records.len() / 20).max(1);
    for r in records
        .iter()
        .enumerate()
        .filter(|(i, _)| i % stride == 0 || i + 1 == records.len())
        .map(|(_, r)| r)
    {
        let _ = writeln!(
            md,
            "| {} | {} | {:.4} | {:.3} | {:.3} | {} | {} | {:.0} |",
            r.update + 1,
            r.env_steps,
            r.loss,
            r.alpha,
            r.beta,
            r.episode_pa.map_or("-".into(), |v| format!("{v:.2}")),
            r.val_pa.map_or("-".into(), |v| format!("{v:.2}")),
            r.steps_per_sec
        );
    }
    write_atomic(&dir.join("report.md"), md.as_bytes())?;
    write_atomic(&dir.join("report.html"), html(&md, &svgs).as_bytes())
}
