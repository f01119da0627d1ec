//! What the loop tells its caller as it goes ([`Event`]), and what a
//! front end shows of each ([`Shown`]): the same words on a terminal, in
//! a log and from Python.

use crate::iteration::IterationSummary;
use crate::learner::Learned;

/// What the loop tells its caller as it goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Candidate `candidate` of `iteration` (both from 1) is being designed.
    Designing {
        /// The iteration, from 1.
        iteration: usize,
        /// Iterations configured.
        iterations: usize,
        /// The candidate, from 1.
        candidate: usize,
    },
    /// The iteration's designs are training.
    Training {
        /// The iteration, from 1.
        iteration: usize,
        /// Iterations configured.
        iterations: usize,
        /// Designs to train.
        designs: usize,
        /// How many train at once.
        parallel: usize,
        /// Who trains them: `local` or the cluster's engine.
        engine: &'static str,
    },
    /// One candidate, designed or a low-level DEK trial, is trained and
    /// scored (or was loaded): what the progress bar counts.
    CandidateDone,
    /// An iteration ended.
    Iteration(IterationSummary),
    /// The best validation PA stopped moving.
    Converged {
        /// Iterations run.
        iterations: usize,
    },
    /// `[evolve.budget]` was spent: no more iterations.
    BudgetSpent {
        /// Iterations run.
        iterations: usize,
    },
    /// `[evolve.budget]` runs low: the iteration designs fewer candidates.
    BudgetLow {
        /// The iteration, from 1.
        iteration: usize,
        /// Candidates it designs (of `[evolve] candidates`).
        candidates: usize,
    },
    /// The hierarchy rows' retrainings start.
    Hierarchy {
        /// Rows (besides the design alone).
        rows: usize,
    },
    /// The designer was fine-tuned on the pairs so far (`[evolve.finetune]`).
    FineTuned(Learned),
    /// The best design and plain PPO, validated alike.
    Validated {
        /// The best design's validation PA, bps.
        best_pa: f64,
        /// Plain PPO's, bps.
        baseline_pa: f64,
    },
}

/// What a front end shows of an [`Event`].
#[derive(Debug, Clone, PartialEq)]
pub enum Shown {
    /// What the run is doing now (a progress bar's message).
    Status(String),
    /// One more candidate done (a progress bar's tick).
    Tick,
    /// Lines to print, above the progress bar.
    Lines(Vec<String>),
    /// The loop is over (the progress bar goes), and this line says how
    /// it ended.
    Finished(String),
}

impl Event {
    /// What to show of it.
    pub fn shown(&self) -> Shown {
        let line = |s: String| Shown::Lines(vec![s]);
        match self {
            Event::Designing {
                iteration,
                iterations,
                candidate,
            } => Shown::Status(format!(
                "iteration {iteration}/{iterations} candidate {candidate}"
            )),
            Event::Training {
                iteration,
                iterations,
                designs,
                parallel,
                engine,
            } => Shown::Status(if *engine == "local" {
                format!("iteration {iteration}/{iterations}: training {designs} designs, {parallel} at a time")
            } else {
                format!("iteration {iteration}/{iterations}: training {designs} designs on {engine}")
            }),
            Event::CandidateDone => Shown::Tick,
            Event::Iteration(s) => Shown::Lines(iteration_lines(s)),
            Event::FineTuned(l) => line(fine_tuned_line(l)),
            Event::Converged { iterations } => {
                line(format!("converged after {iterations} iterations"))
            }
            Event::BudgetSpent { iterations } => line(format!(
                "[evolve.budget] spent after {iterations} iterations: no more designs"
            )),
            Event::BudgetLow {
                iteration,
                candidates,
            } => line(format!(
                "iteration {iteration}: [evolve.budget] runs low, {candidates} candidates"
            )),
            Event::Hierarchy { rows } => line(format!(
                "hierarchy: retraining the best design alone and with {rows} parts switched on ([evolve.hierarchy])"
            )),
            Event::Validated {
                best_pa,
                baseline_pa,
            } => Shown::Finished(format!(
                "validation PA: best design {best_pa:.3} bps, plain PPO with the default modules {baseline_pa:.3} bps"
            )),
        }
    }
}

/// An iteration's line, and its operators' when it used any.
fn iteration_lines(s: &IterationSummary) -> Vec<String> {
    let mut lines = vec![format!(
        "iteration {}: {} valid of {} designed, {} low-level DEK trials (the Dual-Level Enhancement Kit's ES on the best design's constants), best score {}, best validation PA so far {:.3} bps",
        s.iteration,
        s.valid,
        s.designed,
        s.low_level_trials,
        s.best_score.map_or("-".into(), |v| format!("{v:.3}")),
        s.best_pa
    )];
    if !s.operators.is_empty() {
        let ops: Vec<String> = s
            .operators
            .iter()
            .map(|(op, (n, valid))| format!("{op} {valid}/{n}"))
            .collect();
        lines.push(format!("  operators (valid/written): {}", ops.join(", ")));
    }
    lines
}

/// The designer's fine-tuning after an iteration, or why there was none.
fn fine_tuned_line(l: &Learned) -> String {
    match (&l.adapter, l.heldout_loss) {
        (Some(dir), Some((before, after))) => format!(
            "after iteration {}: the designer fine-tuned on {} examples ({:.0} s), held-out loss {before:.4} -> {after:.4}; designing with {}",
            l.iteration,
            l.examples,
            l.secs,
            dir.display()
        ),
        _ => format!(
            "after iteration {}: {} examples, too few to fine-tune the designer on",
            l.iteration, l.examples
        ),
    }
}
