//! What one iteration of the loop found: the summary line it prints and
//! the best scores of its designs, overall and per operator, that the
//! high-level DEK reads.

use std::collections::BTreeMap;

use crate::record::{best_of, CandidateKind, CandidateResult};

/// What one iteration found.
#[derive(Debug, Clone, PartialEq)]
pub struct IterationSummary {
    /// The iteration, from 1.
    pub iteration: usize,
    /// Designed candidates that were valid and scored.
    pub valid: usize,
    /// Candidates designed.
    pub designed: usize,
    /// Low-level DEK trials scored.
    pub low_level_trials: usize,
    /// The round's best score, if any candidate scored.
    pub best_score: Option<f64>,
    /// The best validation PA so far, bps.
    pub best_pa: f64,
    /// Per operator of the program database (`[evolve.search]`): the
    /// round's candidates it wrote and how many were valid and scored
    /// (empty without a database).
    pub operators: BTreeMap<String, (usize, usize)>,
}

/// What iteration `j`'s instructions produced: its designs' best score,
/// not the low-level trials of an older design.
pub(crate) fn designed_best(all: &[CandidateResult], j: usize) -> Option<f64> {
    all.iter()
        .filter(|c| c.iteration == j && c.kind() == CandidateKind::Designed)
        .filter_map(|c| c.selection_score())
        .max_by(f64::total_cmp)
}

/// The best score of round `j`'s designs by the operator that made them
/// (`None`: it made none that scored).
pub(crate) fn operator_best(all: &[CandidateResult], j: usize) -> BTreeMap<String, Option<f64>> {
    let mut best: BTreeMap<String, Option<f64>> = BTreeMap::new();
    for c in all
        .iter()
        .filter(|c| c.iteration == j && c.kind() == CandidateKind::Designed)
    {
        if let Some(l) = &c.lineage {
            let slot = best.entry(l.operator.name().to_string()).or_default();
            if let Some(s) = c.selection_score() {
                *slot = Some(slot.map_or(s, |b| b.max(s)));
            }
        }
    }
    best
}

/// Iteration `j`'s summary line.
pub(crate) fn summarize_iteration(
    all: &[CandidateResult],
    j: usize,
    designed: usize,
) -> IterationSummary {
    let scored: Vec<&CandidateResult> = all
        .iter()
        .filter(|c| c.iteration == j && c.score.is_some())
        .collect();
    let count = |kind: CandidateKind| scored.iter().filter(|c| c.kind() == kind).count();
    IterationSummary {
        iteration: j + 1,
        valid: count(CandidateKind::Designed),
        designed,
        low_level_trials: count(CandidateKind::LowLevel),
        best_score: scored
            .iter()
            .filter_map(|c| c.selection_score())
            .max_by(f64::total_cmp),
        best_pa: best_of(all)
            .and_then(|c| c.validation.as_ref())
            .map_or(0.0, |v| v.pa),
        operators: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_iteration_counts_designed_candidates_and_low_level_trials_apart() {
        let scored = |key: &str, score: f64| {
            let iteration = if key.starts_with("i0") { 0 } else { 1 };
            let mut c = CandidateResult::invalid(key.into(), iteration, 1.0);
            c.score = Some(score);
            c.design = Some(serl_design::Design::baseline());
            c
        };
        let all = vec![
            scored("i0_c0", 5.0),
            scored("i1_c0", 1.0),
            scored("ll1_g0_m0", 2.0),
            CandidateResult::invalid("i1_c1".into(), 1, 0.0),
        ];
        let s = summarize_iteration(&all, 1, 2);
        assert_eq!((s.valid, s.designed, s.low_level_trials), (1, 2, 1));
        assert_eq!(s.best_score, Some(2.0));
        assert_eq!(s.iteration, 2);
    }
}
