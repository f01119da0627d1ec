//! Each term of a reward's top-level sum, measured on the steps a reward
//! scores: what the designer is told about the smoke episode and about a
//! trained candidate's validation episodes, so that it sees which part of
//! its reward dominates or misbehaves.
//!
//! A recorder can also weight the terms ([`TermRecorder::set_weights`]):
//! the reward is then `Σ wₖ·termₖ`, which is how a reward critic
//! re-weights a reward during training without compiling anything again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use serde::{Deserialize, Serialize};
use serl_env::{Reward, StepInfo};
use serl_expr::Program;

use crate::reward::{ProgramReward, RewardModule, REWARD_VARS};

/// One reward term's values over the steps it was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TermStats {
    /// The term as a program, with its sign (`-(2 * remaining_inv^2)`).
    pub term: String,
    /// Mean per-step value.
    pub mean: f64,
    /// Standard deviation of the per-step values.
    pub std: f64,
    /// Share of steps whose value was NaN, infinite or a division by zero
    /// (repaired to 0 or clipped to ±1e12).
    pub repaired_share: f64,
}

/// Values are summed in fixed point (units of 1e-9), so that the totals do
/// not depend on the order in which parallel episodes add them: the same
/// run gives the same statistics, and the same prompt.
const SCALE: f64 = 1e9;

/// Largest magnitude a term's value is measured at: what an infinity is
/// repaired to. Sums saturate rather than wrap past about 1e17 steps of
/// bps-scale rewards (or 1e5 steps of clipped ones).
const LIMIT: f64 = 1e12;

#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    sum: i128,
    sum_sq: i128,
    repaired: u64,
}

/// The reward's own value (its [`ProgramReward`], repairs counted), with
/// every term measured on the side: a [`Reward`] to play episodes with,
/// then [`TermRecorder::stats`].
#[derive(Debug)]
pub struct TermRecorder {
    whole: ProgramReward,
    terms: Vec<Program>,
    tallies: Mutex<(u64, Vec<Tally>)>,
    /// The terms' weights, when set: the reward is then their weighted sum.
    weights: RwLock<Option<Vec<f64>>>,
    /// Repairs in the terms while weighted.
    weighted_repairs: AtomicU64,
}

impl TermRecorder {
    /// A recorder of `reward`'s terms ([`Program::terms`]), nothing
    /// measured yet.
    pub fn new(reward: &RewardModule) -> Self {
        let terms = reward.program().terms();
        let tallies = Mutex::new((0, vec![Tally::default(); terms.len()]));
        TermRecorder {
            whole: reward.reward(),
            terms,
            tallies,
            weights: RwLock::new(None),
            weighted_repairs: AtomicU64::new(0),
        }
    }

    /// The number of terms.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// Whether the program has no terms (never: a program is one at least).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Weights the terms from now on: the reward becomes `Σ wₖ·termₖ`
    /// (all ones is the program itself). `false`, and nothing changed,
    /// unless `weights` has one weight per term.
    pub fn set_weights(&self, weights: Vec<f64>) -> bool {
        if weights.len() != self.terms.len() {
            return false;
        }
        *self.weights.write().unwrap_or_else(|p| p.into_inner()) = Some(weights);
        true
    }

    /// The statistics so far, then forgets them: each call measures the
    /// steps since the last.
    pub fn take_stats(&self) -> Vec<TermStats> {
        let stats = self.stats();
        let mut guard = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        *guard = (0, vec![Tally::default(); self.terms.len()]);
        stats
    }

    /// Each term's statistics over the steps scored so far.
    pub fn stats(&self) -> Vec<TermStats> {
        let (n, tallies) = &*self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        let n = (*n).max(1) as f64;
        self.terms
            .iter()
            .zip(tallies)
            .map(|(p, t)| {
                let mean = t.sum as f64 / SCALE / n;
                let mean_sq = t.sum_sq as f64 / SCALE / n;
                TermStats {
                    term: p.source().to_string(),
                    mean,
                    std: (mean_sq - mean * mean).max(0.0).sqrt(),
                    repaired_share: t.repaired as f64 / n,
                }
            })
            .collect()
    }
}

impl Reward for TermRecorder {
    fn reward(&self, s: &StepInfo) -> f64 {
        let vars = REWARD_VARS.map(|v| v.value(s));
        let values: Vec<(f64, bool)> = self
            .terms
            .iter()
            .map(|p| {
                let mut st = p.new_state();
                let v = p.eval(&mut st, &vars);
                // A huge finite value is clipped like an infinite one (and
                // counted), so that the fixed-point sums stay in range.
                let clipped = v.clamp(-LIMIT, LIMIT);
                (clipped, st.repaired > 0 || clipped != v)
            })
            .collect();
        {
            let mut guard = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
            let (n, tallies) = &mut *guard;
            *n += 1;
            for (t, &(v, repaired)) in tallies.iter_mut().zip(&values) {
                t.sum = t.sum.saturating_add((v * SCALE).round() as i128);
                t.sum_sq = t.sum_sq.saturating_add((v * v * SCALE).round() as i128);
                t.repaired += repaired as u64;
            }
        }
        let weights = self.weights.read().unwrap_or_else(|p| p.into_inner());
        match &*weights {
            Some(w) => {
                let repairs = values.iter().filter(|v| v.1).count() as u64;
                if repairs > 0 {
                    self.weighted_repairs.fetch_add(repairs, Ordering::Relaxed);
                }
                values.iter().zip(w).map(|((v, _), w)| v * w).sum()
            }
            None => self.whole.reward(s),
        }
    }

    fn describe(&self) -> String {
        self.whole.describe()
    }

    fn repaired(&self) -> u64 {
        self.whole.repaired() + self.weighted_repairs.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_term_is_measured_and_the_reward_is_the_programs() {
        let m = RewardModule::compile("step_pa - 2 * remaining_inv + sqrt(-done)").unwrap();
        let rec = TermRecorder::new(&m);
        let mut steps = Vec::new();
        for (pa, inv, done) in [(1.0, 0.5, false), (3.0, 0.0, true)] {
            let s = StepInfo {
                step_pa: pa,
                inventory_left: inv,
                done,
                ..Default::default()
            };
            steps.push(rec.reward(&s));
        }
        assert_eq!(
            steps,
            [0.0, 3.0],
            "1 - 1 + 0, then 3 - 0 + sqrt(-1) repaired to 0"
        );
        let st = rec.stats();
        let terms: Vec<&str> = st.iter().map(|t| t.term.as_str()).collect();
        assert_eq!(terms, ["step_pa", "-(2 * remaining_inv)", "sqrt(-done)"]);
        assert_eq!((st[0].mean, st[0].std), (2.0, 1.0));
        assert_eq!(st[1].mean, -0.5);
        assert_eq!(st[2].repaired_share, 0.5);
        assert_eq!(rec.repaired(), 1, "the whole program's repairs");
    }

    #[test]
    fn weighted_terms_sum_to_the_program_at_ones_and_scale_each_term() {
        let m = RewardModule::compile("step_pa - 2 * remaining_inv").unwrap();
        let rec = TermRecorder::new(&m);
        let s = StepInfo {
            step_pa: 3.0,
            inventory_left: 0.5,
            ..Default::default()
        };
        assert_eq!(rec.reward(&s), 2.0);
        rec.set_weights(vec![1.0, 1.0]);
        assert_eq!(rec.reward(&s), 2.0);
        rec.set_weights(vec![0.5, 3.0]);
        assert_eq!(rec.reward(&s), 1.5 - 3.0);
        assert_eq!(rec.take_stats()[0].mean, 3.0);
        assert_eq!(rec.stats()[0].mean, 0.0, "forgotten once taken");
    }

    #[test]
    fn a_huge_term_is_clipped_and_counted_and_the_sums_never_overflow() {
        let m = RewardModule::compile("step_pa + 1e300 * step_pa").unwrap();
        let rec = TermRecorder::new(&m);
        let s = StepInfo {
            step_pa: 1.0,
            ..Default::default()
        };
        for _ in 0..200_000 {
            rec.reward(&s);
        }
        let st = rec.stats();
        assert_eq!(st[1].repaired_share, 1.0, "clipped on every step");
        assert!(st[1].mean.is_finite() && st[1].mean > 0.0, "{:?}", st[1]);
    }
}
