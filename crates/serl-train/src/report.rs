//! The training report: curves of the loss, the hybrid weights α and β,
//! the episode PA and the validation PA over updates.

use std::fmt::Write;
use std::path::Path;

use serl_report::{html, lines_chart, Chart};

use crate::files::write_atomic;
use crate::record::UpdateRecord;
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
    let mut t = serl_report::Table::new([
        "update",
        "steps",
        "loss",
        "α",
        "β",
        "episode PA",
        "validation PA",
        "steps/s",
    ]);
    for r in sampled(records, 20) {
        t.row(update_cells(r));
    }
    md.push_str(&t.markdown());
    write_atomic(&dir.join("report.md"), md.as_bytes())?;
    write_atomic(&dir.join("report.html"), html(&md, &svgs).as_bytes())
}

/// About `rows` of `records`, evenly strided, the last always among them.
fn sampled(records: &[UpdateRecord], rows: usize) -> impl Iterator<Item = &UpdateRecord> {
    let stride = (records.len() / rows).max(1);
    records
        .iter()
        .enumerate()
        .filter(move |(i, _)| i % stride == 0 || i + 1 == records.len())
        .map(|(_, r)| r)
}

/// An update's row: its number, steps, loss, α, β, episode and validation
/// PA, and steps per second, as the report and the terminal show them.
fn update_cells(r: &UpdateRecord) -> [String; 8] {
    let pa = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
    [
        (r.update + 1).to_string(),
        r.env_steps.to_string(),
        format!("{:.4}", r.loss),
        format!("{:.3}", r.alpha),
        format!("{:.3}", r.beta),
        pa(r.episode_pa),
        pa(r.val_pa),
        format!("{:.0}", r.steps_per_sec),
    ]
}

/// Every tenth update (and the last) as the terminal shows them, with the
/// legend of the columns.
pub fn updates_table(records: &[UpdateRecord]) -> String {
    let mut out = String::new();
    let header = [
        "update", "steps", "loss", "α", "β", "ep PA", "val PA", "steps/s",
    ];
    let widths = [7, 9, 9, 6, 6, 9, 9, 8];
    let line = |cells: &[&str]| -> String {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect();
        padded.join(" ")
    };
    let _ = writeln!(out, "{}", line(&header));
    for r in sampled(records, 10) {
        let cells = update_cells(r);
        let _ = writeln!(out, "{}", line(&cells.each_ref().map(String::as_str)));
    }
    let _ = writeln!(out, "α, β: the weights of the static replay's and the dynamic market's losses (L = α·L_static + β·L_dynamic, docs/train.md); ep PA: mean whole-order PA of the update's finished episodes, bps; val PA: the validation PA, bps (docs/metrics.md)");
    out
}
