//! `[evolve.budget]`: a search that counts what it spends (the designer's
//! tokens, the candidates' training seconds) and designs fewer candidates
//! as the budget runs low, none once it is spent.
//!
//! Both counts come from the candidates the run has stored, so a resumed
//! run makes the same decisions as the run it resumes. A seconds budget
//! depends on the machine's speed: two fresh runs on different machines
//! may stop at different places (a tokens budget, or none, does not).

use serde::{Deserialize, Serialize};

use crate::record::{CandidateKind, CandidateResult};

/// The `[evolve.budget]` table; a limit left out is not counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    /// The designer's tokens, prompt and completion.
    pub tokens: Option<u64>,
    /// The candidates' training seconds (each its own; side by side they
    /// add up to more than the wall time).
    pub seconds: Option<f64>,
    /// A short training of each design first, which stops the ones far
    /// below plain PPO (the pre-screen, `prescreen.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prescreen: Option<PrescreenConfig>,
}

/// `[evolve.budget.prescreen]`: the pre-screen's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrescreenConfig {
    /// Environment steps of the short training.
    pub steps: usize,
    /// Validation orders it is scored on.
    pub validation_orders: usize,
    /// How far below plain PPO's short-run PA, bps, a design may fall and
    /// still train in full.
    pub margin: f64,
}

impl Default for PrescreenConfig {
    fn default() -> Self {
        PrescreenConfig {
            steps: 1024,
            validation_orders: 100,
            margin: 1.0,
        }
    }
}

impl PrescreenConfig {
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.steps == 0 || self.validation_orders == 0 {
            return Err(
                "evolve.budget.prescreen: steps and validation_orders must be at least 1".into(),
            );
        }
        if !self.margin.is_finite() {
            return Err("evolve.budget.prescreen.margin must be a number".into());
        }
        Ok(())
    }
}

/// What the run has spent so far.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Spent {
    pub(crate) tokens: u64,
    pub(crate) seconds: f64,
}

impl Spent {
    pub(crate) fn of(all: &[CandidateResult]) -> Spent {
        Spent {
            tokens: all
                .iter()
                .map(|c| c.prompt_tokens + c.completion_tokens)
                .sum(),
            seconds: all.iter().map(|c| c.train_secs).sum(),
        }
    }
}

impl BudgetConfig {
    /// Checks the table, naming the field at fault.
    pub fn validate(&self) -> Result<(), String> {
        if self.seconds.is_some_and(|s| s <= 0.0 || s.is_nan()) {
            return Err("evolve.budget.seconds must be above 0".into());
        }
        if self.tokens == Some(0) {
            return Err("evolve.budget.tokens must be at least 1".into());
        }
        if let Some(p) = &self.prescreen {
            p.validate()?;
        }
        Ok(())
    }

    /// How many of `k` candidates the next iteration can afford after
    /// `all`: `k` while nothing is known of a candidate's cost, then as many
    /// as what is left pays for at the mean cost of a candidate so far
    /// (designing one, training it and its share of the ES trials), and
    /// none once either limit is reached.
    pub(crate) fn affordable(&self, all: &[CandidateResult], k: usize) -> usize {
        let spent = Spent::of(all);
        let designed = all
            .iter()
            .filter(|c| c.kind() == CandidateKind::Designed)
            .count();
        let mut n = k;
        let mut limit = |cap: f64, used: f64| {
            let left = cap - used;
            if left <= 0.0 {
                n = 0;
            } else if designed > 0 && used > 0.0 {
                let each = used / designed as f64;
                n = n.min((left / each).floor() as usize);
            }
        };
        if let Some(t) = self.tokens {
            limit(t as f64, spent.tokens as f64);
        }
        if let Some(s) = self.seconds {
            limit(s, spent.seconds);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(key: &str, tokens: u64, secs: f64) -> CandidateResult {
        let mut c = CandidateResult::invalid(key.into(), 0, 1.0);
        c.prompt_tokens = tokens;
        c.train_secs = secs;
        c
    }

    #[test]
    fn the_next_round_shrinks_as_the_budget_runs_low_and_stops_when_it_is_spent() {
        let budget = BudgetConfig {
            tokens: None,
            seconds: Some(100.0),
            prescreen: None,
        };
        assert_eq!(budget.affordable(&[], 4), 4, "nothing known yet");
        // Two candidates and an ES trial: 30 s, 15 s a designed candidate.
        let mut all = vec![
            candidate("i0_c0", 0, 10.0),
            candidate("i0_c1", 0, 10.0),
            candidate("ll0_g0_m0", 0, 10.0),
        ];
        assert_eq!(budget.affordable(&all, 4), 4);
        all.push(candidate("i1_c0", 0, 40.0));
        // 70 s spent over 3 designed: 23.3 s each, 30 s left: one more.
        assert_eq!(budget.affordable(&all, 4), 1);
        all.push(candidate("i2_c0", 0, 30.0));
        assert_eq!(budget.affordable(&all, 4), 0);

        let tokens = BudgetConfig {
            tokens: Some(1_000),
            seconds: None,
            prescreen: None,
        };
        let all = vec![candidate("i0_c0", 300, 1.0), candidate("i0_c1", 300, 1.0)];
        assert_eq!(tokens.affordable(&all, 3), 1);
        assert!(BudgetConfig {
            seconds: Some(0.0),
            ..BudgetConfig::default()
        }
        .validate()
        .is_err());
        assert!(PrescreenConfig {
            steps: 0,
            ..PrescreenConfig::default()
        }
        .validate()
        .is_err());
    }
}
