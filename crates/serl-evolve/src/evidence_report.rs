//! The evidence in words: the terminal's lines and the report's first
//! section (the recommendation before everything else).

use std::fmt::Write as _;
use std::path::Path;

use serl_eval::evidence::read_evidence;
use serl_report::{intervals_chart, Chart, Table};

use crate::evidence::{SelectionEvidence, EVIDENCE_FILE};

/// The most designs the edges chart shows (the best by mean edge).
const CHART_DESIGNS: usize = 12;

/// The chart's title, which is also its caption and its image's alt text.
pub(crate) fn edges_title(e: &SelectionEvidence) -> String {
    format!(
        "Each design's mean daily edge over plain PPO on the validation days, with its 95% interval, the best {CHART_DESIGNS} by mean (the chosen one starred); noise alone gives the best of {} about {}",
        e.designs,
        bps(e.noise_edge)
    )
}

/// A chart of each design's mean daily edge over plain PPO on the
/// validation days, with its 95% t-interval, best first, from the run's
/// evidence file; `None` under two days (no interval) or without the file.
pub(crate) fn edges_svg(dir: &Path, e: &SelectionEvidence) -> Option<String> {
    let rows = read_evidence(&dir.join(EVIDENCE_FILE)).ok()?;
    let m = crate::evidence::designs_matrix(&rows)?;
    let mut points: Vec<(String, (f64, f64, f64))> = m
        .designs
        .iter()
        .zip(&m.diffs)
        .filter_map(|(d, x)| Some((d.clone(), serl_eval::selection::mean_interval(x, 0.95)?)))
        .collect();
    if points.is_empty() {
        return None;
    }
    points.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
    points.truncate(CHART_DESIGNS);
    let labels = points
        .iter()
        .map(|(d, _)| {
            if *d == e.chosen {
                format!("{d}*")
            } else {
                d.clone()
            }
        })
        .collect();
    let chart = Chart::new(
        "Daily edge over plain PPO on validation (95% interval)",
        "design (* chosen)",
        "bps a day",
    )
    .x_labels(labels);
    let series = [(
        "daily edge over plain PPO".to_string(),
        points.into_iter().map(|p| p.1).collect(),
    )];
    let mut svg = String::new();
    intervals_chart(&mut svg, &chart, &series).ok()?;
    Some(svg)
}

/// A figure or a dash.
fn bps(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:+.2} bps"))
}

fn plain_bps(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.2} bps"))
}

fn prob(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.3}"))
}

impl SelectionEvidence {
    /// The recommendation in one line.
    pub fn recommendation_line(&self) -> String {
        let r = &self.recommendation;
        match &r.design {
            Some(key) => format!(
                "recommended: the design {key} (final/{}): {}",
                r.recommended, r.reason
            ),
            None => format!(
                "recommended: plain PPO (final/{}), not the chosen design {}: {}",
                r.recommended, self.chosen, r.reason
            ),
        }
    }

    /// Each figure as (name, value, what it means), in the order shown.
    pub fn figures(&self) -> Vec<(String, String, String)> {
        let mut figures = self.search_figures();
        figures.extend(self.folded_figures());
        figures
    }

    /// The folded test's figures (`[evolve.select] folds`), if any.
    fn folded_figures(&self) -> Vec<(String, String, String)> {
        let Some(f) = &self.folded else {
            return Vec::new();
        };
        let spa = f.spa.as_ref();
        vec![
            ("folds".into(), f.folds.to_string(), format!("blocks of the non-test days; the {} finalists and plain PPO trained without each ({} seed{} each, averaged), scored on it", f.designs, f.seeds, if f.seeds == 1 { "" } else { "s" })),
            ("folded days".into(), f.days.to_string(), "non-test days that did not pick the finalists (the validation days did), each scored by a fold that never trained on it".into()),
            ("folded σ_d".into(), plain_bps(f.sigma_d), format!("minimum detectable edge there {}", plain_bps(f.min_detectable_edge))),
            (format!("chosen design {} on the folds", self.chosen), bps(f.chosen_edge), format!("its mean daily edge over plain PPO there; won {} of {} days", f.chosen_days_won, f.days)),
            ("folded clustered t p".into(), prob(f.clustered.as_ref().map(|c| c.p_value)), format!("the chosen design against plain PPO on those days, each fold's days one unit ({} folds, t = {}): a fold's days share its trainings; the recommendation reads it at {}", f.clustered.as_ref().map_or(0, |c| c.clusters), f.clustered.as_ref().map_or("—".into(), |c| format!("{:.2}", c.t)), self.settings.alpha)),
            ("folded Reality Check p".into(), prob(spa.map(|s| s.p_reality_check)), format!("over the {} finalists on those days, resampled in blocks of {:.1} days on average; shown, not read (on a few blocks it rejects noise too often)", f.designs, spa.map_or(0.0, |s| s.mean_block))),
        ]
    }

    /// The search's figures, on the validation days.
    fn search_figures(&self) -> Vec<(String, String, String)> {
        let spa = self.spa.as_ref();
        let pbo = self.pbo.as_ref();
        vec![
            ("designs tried (N)".into(), self.designs.to_string(), "every scored design, DEK trials included".into()),
            ("validation days (d)".into(), self.days.to_string(), "the days every design and plain PPO share".into()),
            ("σ_d".into(), plain_bps(self.sigma_d), "median daily sd of a design's difference from plain PPO".into()),
            ("noise edge".into(), bps(self.noise_edge), "what the best of N designs with no edge leads by: E[max of N normals]·σ_d/√d".into()),
            ("minimum detectable edge".into(), plain_bps(self.min_detectable_edge), format!("the smallest daily edge a paired t-test finds at {} with power {}", self.settings.alpha, self.settings.power)),
            (format!("chosen design {}", self.chosen), bps(self.chosen_edge), format!("its mean daily edge over plain PPO; won {} of {} days", self.chosen_days_won, self.days)),
            ("PBO (CSCV)".into(), prob(pbo.map(|p| p.pbo)), pbo.map_or("needs two designs and two days".into(), |p| format!("share of {} halvings of {} blocks whose in-sample best is below the median out of sample", p.halvings, p.blocks))),
            ("deflated Sharpe ratio".into(), prob(self.deflated_sharpe), "probability the chosen design's edge is real, given N and the designs' spread".into()),
            ("winner's curse".into(), bps(self.winners_curse()), if self.finalists.is_empty() { "no finalists retrained ([evolve.select] finalists = 0)".into() } else { format!("the {} finalists' lead when chosen minus their lead retrained from fresh seeds: {}", self.finalists.len(), self.finalists.iter().map(|f| format!("{} {:+.2} → {:+.2}", f.key, f.selection_edge, f.rescored_edge)).collect::<Vec<_>>().join(", ")) }),
            ("Reality Check p-value".into(), prob(spa.map(|s| s.p_reality_check)), spa.map_or("needs two days".into(), |s| format!("White's test that the best of N beats plain PPO, {} bootstrap resamples of the days (mean block {}); {}", s.reps, s.mean_block, if self.folded.is_some() { "with folds the recommendation reads the folded test below".to_string() } else { format!("the recommendation reads it at {}", self.settings.alpha) }))),
            ("SPA p-value".into(), prob(spa.map(|s| s.p_consistent)), spa.map_or("needs two days".into(), |s| format!("Hansen's studentized test (bootstrap-t, consistent; lower {:.3}): conservative on few days", s.p_lower))),
        ]
    }

    /// The evidence as terminal lines: the recommendation, then each
    /// figure.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![self.recommendation_line()];
        let figures = self.figures();
        let width = figures
            .iter()
            .map(|f| f.0.chars().count())
            .max()
            .unwrap_or(0);
        for (name, value, meaning) in figures {
            let pad = width - name.chars().count();
            out.push(format!(
                "  {name}{} {value:>11}  {meaning}",
                " ".repeat(pad)
            ));
        }
        out
    }

    /// The report's first section.
    pub fn markdown(&self) -> String {
        let mut md = String::from("## Recommendation\n\n");
        let _ = writeln!(md, "**{}**\n", self.recommendation_line());
        md.push_str("Chosen on validation only; the test split plays no part in it (`evidence.json`, `evidence.parquet`; `serl evolve evidence RUN`).\n\n");
        let mut t = Table::new(["figure", "value", "what it means"]).right([1]);
        for (name, value, meaning) in self.figures() {
            t.row([name, value, meaning]);
        }
        md.push_str(&t.markdown());
        md.push('\n');
        md
    }
}
