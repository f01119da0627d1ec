//! The evidence behind a run's choice, and its recommendation.
//!
//! Every design the run scored, plain PPO and the scripted baselines keep
//! their PA per validation stock-day in `evidence.parquet`. From its days
//! × designs matrix of differences from plain PPO the run measures how far
//! its choice can be trusted ([`SelectionEvidence`]: σ_d, the edge noise
//! alone gives the best of that many designs, the smallest edge the days
//! can detect, PBO by CSCV, the chosen design's deflated Sharpe ratio, the
//! winner's curse of the finalists retrained from fresh seeds, and White's
//! Reality Check with Hansen's SPA test over every design tried), and
//! recommends the chosen design only where the Reality Check rejects "no
//! design beats plain PPO" at `[evolve.select] alpha`; otherwise it
//! recommends plain PPO and says why ([`Recommendation`]). `evidence.json` keeps the figures and the
//! settings, so `serl evolve evidence RUN` computes them again from the
//! Parquet file alone ([`recompute`]).

use std::path::Path;

use serde::{Deserialize, Serialize};
use serl_eval::evidence::{
    day_matrix, name_with_role, names_with_role, read_evidence, stock_day_rows, write_evidence,
    EvidenceRow,
};
use serl_eval::selection::{self, DayMatrix, Pbo, Spa};

pub use crate::select::SelectConfig;

pub use crate::evidence_folds::{FoldedEvidence, FOLD_PLAIN_ROLE, FOLD_ROLE};

use crate::error::{file_err, read_json, write_json, EvolveError};
use crate::record::{CandidateResult, Validation};

/// The evidence file in a run directory.
pub const EVIDENCE_FILE: &str = "evidence.parquet";
/// What the run concluded from it.
pub const EVIDENCE_JSON: &str = "evidence.json";
/// The role of a scored design's rows.
pub const CANDIDATE_ROLE: &str = "candidate";
/// The role of plain PPO's rows: the reference every design is paired with.
pub const PLAIN_ROLE: &str = "plain";
/// The role of a finalist's rows after its retraining from a fresh seed.
pub const RESCORED_ROLE: &str = "rescored";
/// The prefix of a re-scored finalist's name (`rescore_<key>`).
pub const RESCORE_PREFIX: &str = "rescore_";

/// A finalist: its edge over plain PPO when it was chosen, and again
/// after a retraining from a fresh seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finalist {
    /// The candidate's key.
    pub key: String,
    /// Its mean daily edge over plain PPO as the search scored it, bps.
    pub selection_edge: f64,
    /// The same after its retraining from a fresh seed, bps.
    pub rescored_edge: f64,
}

/// What the run recommends, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// The final retraining it points to (`final/recommended`):
    /// `serl-best` or the plain baseline's name (`ppo-default`).
    pub recommended: String,
    /// The recommended design's candidate key (`None` for plain PPO).
    pub design: Option<String>,
    /// Why, in one sentence.
    pub reason: String,
}

impl Recommendation {
    /// Whether it recommends the searched design over plain PPO.
    pub fn is_design(&self) -> bool {
        self.design.is_some()
    }
}

/// What the evidence says of the run's choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelectionEvidence {
    /// Designs scored (the N of "best of N").
    pub designs: usize,
    /// Validation days every design and plain PPO share.
    pub days: usize,
    /// Median over designs of the daily standard deviation of their
    /// difference from plain PPO, bps.
    pub sigma_d: Option<f64>,
    /// The mean daily edge that noise alone gives the best of `designs`
    /// designs on `days` days, bps.
    pub noise_edge: Option<f64>,
    /// The smallest true daily edge a paired test finds on these days at
    /// `[evolve.select] alpha` with `power`, bps.
    pub min_detectable_edge: Option<f64>,
    /// The probability of backtest overfitting, by CSCV over the days.
    pub pbo: Option<Pbo>,
    /// The chosen design's key.
    pub chosen: String,
    /// Its mean daily edge over plain PPO on validation, bps.
    pub chosen_edge: Option<f64>,
    /// Days of `days` it beat plain PPO.
    pub chosen_days_won: usize,
    /// Its deflated Sharpe ratio: the probability that its daily edge is
    /// real given how many designs were tried and how their scores vary.
    pub deflated_sharpe: Option<f64>,
    /// White's Reality Check (and Hansen's SPA test) over every design:
    /// the recommendation reads the Reality Check's p-value.
    pub spa: Option<Spa>,
    /// The finalists retrained from fresh seeds (`[evolve.select]
    /// finalists`), best selection score first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalists: Vec<Finalist>,
    /// The finalists scored fold by fold (`[evolve.select] folds`): where
    /// present, the recommendation reads its test instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folded: Option<FoldedEvidence>,
    /// The recommendation.
    pub recommendation: Recommendation,
    /// The settings the figures were computed with.
    pub settings: SelectConfig,
    /// The bootstrap's seed.
    pub seed: u64,
    /// The plain baseline's final name (`ppo-default`, or a team's).
    pub plain_final: String,
    /// The chosen design's final name.
    #[serde(default = "best_final_name")]
    pub best_final: String,
}

/// The chosen design's final retraining, as runs before this field named it.
fn best_final_name() -> String {
    "serl-best".into()
}

/// The evidence rows of one validated strategy: its stock-days, or its
/// days where an older record kept only those.
pub(crate) fn validation_rows(name: &str, role: &str, v: &Validation) -> Vec<EvidenceRow> {
    if !v.stock_days.is_empty() {
        return v
            .stock_days
            .iter()
            .map(|s| EvidenceRow {
                name: name.into(),
                role: role.into(),
                date: s.date,
                symbol: s.symbol.clone(),
                pa_bps: s.pa,
                orders: s.orders,
            })
            .collect();
    }
    v.days
        .iter()
        .map(|d| EvidenceRow {
            name: name.into(),
            role: role.into(),
            date: d.date,
            symbol: String::new(),
            pa_bps: d.pa,
            orders: 1,
        })
        .collect()
}

/// The rows of every scored candidate, the re-scored finalists, the
/// finalists and plain PPO scored fold by fold (`folded`), plain PPO
/// (named by its key) and the baselines' rows (`baselines`, already
/// played on the validation orders).
pub(crate) fn rows(
    all: &[CandidateResult],
    rescored: &[CandidateResult],
    folded: &[CandidateResult],
    plain: &CandidateResult,
    baselines: &[serl_eval::OrderResult],
) -> Vec<EvidenceRow> {
    let mut out = Vec::new();
    for c in scored(folded) {
        let Some(key) = crate::fold::unfolded_key(&c.key) else {
            continue;
        };
        let role = if key == plain.key {
            FOLD_PLAIN_ROLE
        } else {
            FOLD_ROLE
        };
        let name = crate::evidence_folds::fold_name(key);
        out.extend(validation_rows(
            &name,
            role,
            c.validation.as_ref().expect("scored"),
        ));
    }
    for c in scored(all) {
        out.extend(validation_rows(
            &c.key,
            CANDIDATE_ROLE,
            c.validation.as_ref().expect("scored"),
        ));
    }
    for c in scored(rescored) {
        out.extend(validation_rows(
            &c.key,
            RESCORED_ROLE,
            c.validation.as_ref().expect("scored"),
        ));
    }
    if let Some(v) = &plain.validation {
        out.extend(validation_rows(&plain.key, PLAIN_ROLE, v));
    }
    let mut names: Vec<&str> = baselines.iter().map(|r| r.strategy.as_str()).collect();
    names.dedup();
    for name in names {
        let mine: Vec<_> = baselines
            .iter()
            .filter(|r| r.strategy == name)
            .cloned()
            .collect();
        out.extend(stock_day_rows(name, "baseline", &mine));
    }
    out
}

/// The `n` candidates with the best selection scores, best first.
pub(crate) fn finalists(all: &[CandidateResult], n: usize) -> Vec<&CandidateResult> {
    let mut ranked: Vec<(&CandidateResult, f64)> = all
        .iter()
        .filter_map(|c| Some((c, c.selection_score()?)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    ranked.into_iter().take(n).map(|(c, _)| c).collect()
}

/// The candidates with a score and a validation.
fn scored(all: &[CandidateResult]) -> impl Iterator<Item = &CandidateResult> {
    all.iter()
        .filter(|c| c.score.is_some() && c.validation.is_some())
}

/// What the run needs to assess its evidence besides the rows.
pub struct Assessing<'a> {
    /// The chosen design's key.
    pub chosen: &'a str,
    /// The settings.
    pub settings: &'a SelectConfig,
    /// The bootstrap's seed.
    pub seed: u64,
    /// The plain baseline's final name.
    pub plain_final: &'a str,
    /// The chosen design's final name (`serl-best`).
    pub best_final: &'a str,
}

/// The evidence's figures and the recommendation, from its rows alone.
pub fn assess(rows: &[EvidenceRow], a: &Assessing) -> SelectionEvidence {
    let plain = plain_name(rows);
    let m = designs_matrix(rows).unwrap_or(DayMatrix {
        designs: Vec::new(),
        diffs: Vec::new(),
    });
    let s = a.settings;
    let (n, days) = (m.designs.len(), m.days());
    let sigma_d = m.sigma_d();
    let chosen_row = m.designs.iter().position(|d| d == a.chosen);
    let chosen_diffs = chosen_row.map(|k| m.diffs[k].clone()).unwrap_or_default();
    let chosen_edge = chosen_row.map(|k| m.means()[k]);
    let spa = selection::spa_test(&m, s.mean_block, s.reps, a.seed);
    let finalists = plain
        .as_deref()
        .map_or_else(Vec::new, |p| rescored_finalists(rows, &m, p));
    // Plain PPO's rows are stock-days: each date once.
    let validation_days: std::collections::BTreeSet<chrono::NaiveDate> = rows
        .iter()
        .filter(|r| r.role == PLAIN_ROLE)
        .map(|r| r.date)
        .collect();
    let folded = crate::evidence_folds::assess_folds(
        rows,
        a.chosen,
        s,
        a.seed ^ FOLD_SEED_MIX,
        &validation_days,
    );
    let mut e = SelectionEvidence {
        designs: n,
        days,
        sigma_d,
        noise_edge: sigma_d.map(|sd| selection::noise_edge(sd, n, days)),
        min_detectable_edge: sigma_d
            .and_then(|sd| selection::min_detectable_edge(sd, days, s.alpha, s.power)),
        pbo: selection::cscv_blocks(days, s.max_blocks).and_then(|b| selection::pbo_cscv(&m, b)),
        chosen: a.chosen.to_string(),
        chosen_edge,
        chosen_days_won: chosen_diffs.iter().filter(|&&d| d > 0.0).count(),
        deflated_sharpe: deflated(&m, &chosen_diffs),
        spa,
        finalists,
        folded,
        recommendation: Recommendation {
            recommended: a.plain_final.to_string(),
            design: None,
            reason: String::new(),
        },
        settings: s.clone(),
        seed: a.seed,
        plain_final: a.plain_final.to_string(),
        best_final: a.best_final.to_string(),
    };
    e.recommendation = recommend(&e);
    e
}

/// Each re-scored finalist in `rows` beside its selection edge (from
/// `m`), on the days both scorings share with plain PPO, in the order of
/// the selection edges.
fn rescored_finalists(rows: &[EvidenceRow], m: &DayMatrix, plain: &str) -> Vec<Finalist> {
    let names = names_with_role(rows, RESCORED_ROLE);
    let means = m.means();
    let mut out: Vec<Finalist> = names
        .iter()
        .filter_map(|name| {
            let key = name.strip_prefix(RESCORE_PREFIX)?;
            let k = m.designs.iter().position(|d| d == key)?;
            let again = day_matrix(rows, std::slice::from_ref(name), plain)?;
            Some(Finalist {
                key: key.to_string(),
                selection_edge: means[k],
                rescored_edge: again.means()[0],
            })
        })
        .collect();
    out.sort_by(|a, b| b.selection_edge.total_cmp(&a.selection_edge));
    out
}

impl SelectionEvidence {
    /// The winner's curse: the finalists' mean selection edge minus their
    /// mean re-scored edge, bps (`None` without finalists).
    pub fn winners_curse(&self) -> Option<f64> {
        if self.finalists.is_empty() {
            return None;
        }
        let n = self.finalists.len() as f64;
        Some(
            self.finalists
                .iter()
                .map(|f| f.selection_edge - f.rescored_edge)
                .sum::<f64>()
                / n,
        )
    }
}

/// Mixed into the bootstrap's seed for the folded test.
const FOLD_SEED_MIX: u64 = 0xF01D_5EED;

/// The name of the reference's rows (plain PPO's key), if any.
fn plain_name(rows: &[EvidenceRow]) -> Option<String> {
    name_with_role(rows, PLAIN_ROLE)
}

/// The days × designs matrix of every candidate's daily difference from
/// plain PPO, designs by name; `None` without plain PPO's rows.
pub(crate) fn designs_matrix(rows: &[EvidenceRow]) -> Option<DayMatrix> {
    day_matrix(
        rows,
        &names_with_role(rows, CANDIDATE_ROLE),
        &plain_name(rows)?,
    )
}

/// The chosen design's deflated Sharpe ratio among `m`'s designs.
fn deflated(m: &DayMatrix, chosen: &[f64]) -> Option<f64> {
    let (sr, skew, kurt) = selection::sharpe_moments(chosen)?;
    let srs: Vec<f64> = m
        .diffs
        .iter()
        .filter_map(|d| selection::sharpe_moments(d).map(|t| t.0))
        .collect();
    let mean = srs.iter().sum::<f64>() / srs.len().max(1) as f64;
    let var = if srs.len() < 2 {
        0.0
    } else {
        srs.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (srs.len() - 1) as f64
    };
    selection::deflated_sharpe(sr, chosen.len(), (skew, kurt), m.designs.len(), var)
}

/// The recommendation the figures support: the chosen design where the
/// Reality Check rejects at `alpha` and the chosen design leads plain PPO;
/// otherwise plain PPO, with the reason.
fn recommend(e: &SelectionEvidence) -> Recommendation {
    let plain = |reason: String| Recommendation {
        recommended: e.plain_final.clone(),
        design: None,
        reason,
    };
    let alpha = e.settings.alpha;
    let Some(edge) = e.chosen_edge else {
        return plain(format!(
            "the chosen design {} has no validation days paired with plain PPO's",
            e.chosen
        ));
    };
    // The folds' test, on the days that did not pick the finalists,
    // replaces the search's.
    if let Some(f) = &e.folded {
        return recommend_folded(e, f);
    }
    let Some(spa) = &e.spa else {
        return plain(format!(
            "{} validation day{} cannot tell a design from noise (a test needs at least 2 days; configs/evolve-standard.toml has 6)",
            e.days,
            if e.days == 1 { "" } else { "s" }
        ));
    };
    let noise = e.noise_edge.map_or(String::new(), |v| {
        format!(
            ", noise alone gives the best of {} about {v:+.2}",
            e.designs
        )
    });
    if spa.p_value() >= alpha {
        return plain(format!(
            "the best of {} designs is not better than plain PPO once the search is accounted for: the chosen design leads by {edge:+.2} bps a day on {} validation days{noise}; Reality Check p = {:.3} ≥ {alpha}",
            e.designs, e.days, spa.p_value()
        ));
    }
    let again = e.finalists.iter().find(|f| f.key == e.chosen);
    if let Some(f) = again.filter(|f| f.rescored_edge <= 0.0) {
        return plain(format!(
            "the chosen design's lead did not survive a retraining from a fresh seed: {:+.2} bps a day when chosen, {:+.2} retrained (Reality Check p = {:.3})",
            f.selection_edge, f.rescored_edge, spa.p_value()
        ));
    }
    if edge <= 0.0 {
        return plain(format!(
            "the Reality Check rejects (p = {:.3}) for {}, but the chosen design {} trails plain PPO by {edge:+.2} bps a day",
            spa.p_value(),
            spa.best.as_deref().unwrap_or("another design"),
            e.chosen
        ));
    }
    Recommendation {
        recommended: e.best_final.clone(),
        design: Some(e.chosen.clone()),
        reason: format!(
            "the chosen design leads plain PPO by {edge:+.2} bps a day on {} validation days ({} won){noise}; Reality Check p = {:.3} < {alpha} over all {} designs tried",
            e.days, e.chosen_days_won, spa.p_value(), e.designs
        ),
    }
}

/// The recommendation where the finalists were scored fold by fold: the
/// Reality Check over them on the days that did not pick them.
fn recommend_folded(e: &SelectionEvidence, f: &FoldedEvidence) -> Recommendation {
    let plain = |reason: String| Recommendation {
        recommended: e.plain_final.clone(),
        design: None,
        reason,
    };
    let alpha = e.settings.alpha;
    let (Some(test), Some(edge)) = (&f.clustered, f.chosen_edge) else {
        return plain(format!(
            "the folds leave {} day{} in fewer than 2 folds that did not pick the finalists: too few to test (cut the non-test days into more blocks)",
            f.days,
            if f.days == 1 { "" } else { "s" }
        ));
    };
    let p = test.p_value;
    let k = test.clusters;
    let again = e.finalists.iter().find(|r| r.key == e.chosen);
    if let Some(r) = again.filter(|r| r.rescored_edge <= 0.0) {
        return plain(format!(
            "the chosen design's lead did not survive a retraining from a fresh seed: {:+.2} bps a day when chosen, {:+.2} retrained",
            r.selection_edge, r.rescored_edge
        ));
    }
    let rc = f
        .spa
        .as_ref()
        .map(|s| {
            format!(
                "; the Reality Check over the {} finalists, shown beside, p = {:.3}",
                f.designs,
                s.p_value()
            )
        })
        .unwrap_or_default();
    if p >= alpha || edge <= 0.0 {
        return plain(format!(
            "on the {} non-test days that did not pick it, each scored by a fold that never trained on it, the chosen design is not better than plain PPO: it leads by {edge:+.2} bps a day ({} won), and with each of the {k} folds as one unit (a clustered t) p = {p:.3} ≥ {alpha}{rc}",
            f.days, f.chosen_days_won
        ));
    }
    Recommendation {
        recommended: e.best_final.clone(),
        design: Some(e.chosen.clone()),
        reason: format!(
            "the chosen design leads plain PPO by {edge:+.2} bps a day on the {} non-test days that did not pick it ({} won), each scored by a fold that never trained on it; with each of the {k} folds as one unit (a clustered t) p = {p:.3} < {alpha}{rc}",
            f.days, f.chosen_days_won
        ),
    }
}

/// Writes the evidence file and `evidence.json`, and points
/// `final/recommended` at the recommended final retraining where the run
/// has one.
pub(crate) fn write(
    dir: &Path,
    rows: &[EvidenceRow],
    e: &SelectionEvidence,
) -> Result<(), EvolveError> {
    let path = dir.join(EVIDENCE_FILE);
    write_evidence(&path, rows).map_err(|err| file_err(&path, err))?;
    write_json(&dir.join(EVIDENCE_JSON), e)?;
    let final_dir = dir.join("final");
    if final_dir.join(&e.recommendation.recommended).is_dir() {
        point(&final_dir, &e.recommendation.recommended)?;
    }
    Ok(())
}

/// `final/recommended` → `final/<target>` (a symbolic link; a text file
/// naming it where links are not to be had).
fn point(final_dir: &Path, target: &str) -> Result<(), EvolveError> {
    let link = final_dir.join("recommended");
    if link.symlink_metadata().is_ok() {
        std::fs::remove_file(&link).map_err(|e| file_err(&link, e))?;
    }
    #[cfg(unix)]
    let made = std::os::unix::fs::symlink(target, &link);
    #[cfg(not(unix))]
    let made = std::fs::write(&link, target);
    made.map_err(|e| file_err(&link, e))
}

/// The evidence of the run in `dir`, computed again from its evidence
/// file with the settings `evidence.json` recorded.
pub fn recompute(dir: &Path) -> Result<(SelectionEvidence, Vec<EvidenceRow>), EvolveError> {
    let json = dir.join(EVIDENCE_JSON);
    let recorded: SelectionEvidence = read_json(&json).ok_or_else(|| {
        EvolveError::Evidence(format!(
            "{} not found or unreadable: the run has not reached its choice yet (or was made before evidence files); resume it with `serl evolve --resume {}`",
            json.display(),
            dir.display()
        ))
    })?;
    let rows = read_evidence(&dir.join(EVIDENCE_FILE)).map_err(EvolveError::Evidence)?;
    let a = Assessing {
        chosen: &recorded.chosen,
        settings: &recorded.settings,
        seed: recorded.seed,
        plain_final: &recorded.plain_final,
        best_final: &recorded.best_final,
    };
    Ok((assess(&rows, &a), rows))
}

#[cfg(test)]
#[path = "evidence_tests.rs"]
mod tests;
