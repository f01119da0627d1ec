//! The imagination module: synthetic market days to train on.

use serde::{Deserialize, Serialize};
use serl_market::{Scenario, SESSION_MINUTES};

use crate::kind::{err, in_range, ModuleError, ModuleKind};

/// Most scenarios one design may imagine.
pub const MAX_SCENARIOS: usize = 8;

/// Most price jumps one scenario may hold.
pub const MAX_JUMPS: usize = 10;

/// Synthetic market days to train on: dynamic environments that play a
/// scenario instead of the plain calibrated day, and replayed days
/// reshaped by a scenario. The trainer's `[train.imagination]` table is
/// this type too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImaginationModule {
    /// The imagined days.
    #[serde(default)]
    pub scenarios: Vec<Scenario>,
    /// Share of the dynamic environments that play them (the paper mixes
    /// 50%).
    #[serde(default = "half")]
    pub share: f64,
    /// Share of the static replay's episodes played on a real day reshaped
    /// by one of the scenarios, drawn at random (its drift, jumps,
    /// volatility and liquidity; `serl_env::SessionView::imagined`). A real
    /// day holds one market move; imagined drifts hold many, so a timing
    /// rule that real days only hint at can be learned from them.
    #[serde(default)]
    pub replay_share: f64,
}

fn half() -> f64 {
    0.5
}

impl Default for ImaginationModule {
    /// No imagined days.
    fn default() -> Self {
        ImaginationModule::none()
    }
}

impl ImaginationModule {
    /// No imagined days: every environment plays the real one.
    pub fn none() -> Self {
        ImaginationModule {
            scenarios: Vec::new(),
            share: 0.0,
            replay_share: 0.0,
        }
    }

    /// The numbers the low-level DEK tunes: the two shares, then each
    /// scenario's volatility multiplier, drift and liquidity multiplier.
    pub fn constants(&self) -> Vec<f64> {
        let mut c = vec![self.share, self.replay_share];
        for s in &self.scenarios {
            c.extend([s.volatility_mult, s.drift_bps, s.liquidity_mult]);
        }
        c
    }

    /// The module with `constants`, in the order `constants` lists them.
    /// Shares are clamped to [0, 1]; any other value out of its range is
    /// the validation error that names it.
    pub fn with_constants(&self, constants: &[f64]) -> Result<Self, ModuleError> {
        let want = 2 + 3 * self.scenarios.len();
        if constants.len() != want {
            return Err(err(
                ModuleKind::Imagination,
                format!("{} constants given for {want}", constants.len()),
            ));
        }
        let mut m = self.clone();
        m.share = constants[0].clamp(0.0, 1.0);
        m.replay_share = constants[1].clamp(0.0, 1.0);
        for (s, c) in m.scenarios.iter_mut().zip(constants[2..].chunks(3)) {
            (s.volatility_mult, s.drift_bps, s.liquidity_mult) = (c[0], c[1], c[2]);
        }
        m.validate()?;
        Ok(m)
    }

    /// Checks the shares and every scenario as a designed module: 1 to
    /// [`MAX_SCENARIOS`] scenarios with values in range.
    pub fn validate(&self) -> Result<(), ModuleError> {
        let kind = ModuleKind::Imagination;
        if self.scenarios.is_empty() || self.scenarios.len() > MAX_SCENARIOS {
            return Err(err(
                kind,
                format!(
                    "give 1 to {MAX_SCENARIOS} scenarios, not {}",
                    self.scenarios.len()
                ),
            ));
        }
        self.check_shares()?;
        for (i, s) in self.scenarios.iter().enumerate() {
            check_scenario(kind, &format!("scenarios[{i}]"), s)?;
        }
        Ok(())
    }

    /// Checks the two shares alone (a trainer's table may imagine nothing).
    pub fn check_shares(&self) -> Result<(), ModuleError> {
        let kind = ModuleKind::Imagination;
        in_range(kind, "share", self.share, 0.0, 1.0)?;
        in_range(kind, "replay_share", self.replay_share, 0.0, 1.0)
    }
}

/// The range of a scenario's volatility multiplier (validator and JSON
/// schema both read these).
pub const VOLATILITY_MULT_RANGE: (f64, f64) = (0.1, 5.0);
/// The range of a scenario's drift, bps over the session.
pub const DRIFT_BPS_RANGE: (f64, f64) = (-500.0, 500.0);
/// The range of a scenario's liquidity multiplier.
pub const LIQUIDITY_MULT_RANGE: (f64, f64) = (0.05, 10.0);
/// The range of a jump's size, bps.
pub const JUMP_BPS_RANGE: (f64, f64) = (-1000.0, 1000.0);

/// Checks one scenario's multipliers, drift and jumps; `at` names it.
pub(crate) fn check_scenario(kind: ModuleKind, at: &str, s: &Scenario) -> Result<(), ModuleError> {
    in_range(
        kind,
        &format!("{at}.volatility_mult"),
        s.volatility_mult,
        VOLATILITY_MULT_RANGE.0,
        VOLATILITY_MULT_RANGE.1,
    )?;
    let (lo, hi) = DRIFT_BPS_RANGE;
    in_range(kind, &format!("{at}.drift_bps"), s.drift_bps, lo, hi)?;
    in_range(
        kind,
        &format!("{at}.liquidity_mult"),
        s.liquidity_mult,
        LIQUIDITY_MULT_RANGE.0,
        LIQUIDITY_MULT_RANGE.1,
    )?;
    if s.jumps.len() > MAX_JUMPS {
        return Err(err(kind, format!("{at}.jumps: at most {MAX_JUMPS}")));
    }
    for (j, (minute, size)) in s.jumps.iter().enumerate() {
        in_range(
            kind,
            &format!("{at}.jumps[{j}] minute"),
            *minute as f64,
            0.0,
            SESSION_MINUTES as f64,
        )?;
        in_range(
            kind,
            &format!("{at}.jumps[{j}] size"),
            *size,
            JUMP_BPS_RANGE.0,
            JUMP_BPS_RANGE.1,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imagination_constants_round_trip_and_shares_stay_shares() {
        let m = ImaginationModule {
            scenarios: vec![Scenario {
                volatility_mult: 1.2,
                drift_bps: -80.0,
                liquidity_mult: 0.9,
                jumps: vec![(60, 20.0)],
            }],
            share: 0.5,
            replay_share: 0.6,
        };
        assert_eq!(m.constants(), vec![0.5, 0.6, 1.2, -80.0, 0.9]);
        assert_eq!(m.with_constants(&m.constants()).unwrap(), m);

        let tuned = m.with_constants(&[0.4, 1.3, 1.5, -95.0, 1.1]).unwrap();
        assert_eq!(tuned.replay_share, 1.0, "a share above 1 is clamped");
        assert_eq!(tuned.scenarios[0].drift_bps, -95.0);
        assert_eq!(tuned.scenarios[0].jumps, m.scenarios[0].jumps);

        let e = m.with_constants(&[0.5, 0.6, 9.0, -80.0, 0.9]).unwrap_err();
        assert!(
            e.to_string().contains("scenarios[0].volatility_mult"),
            "{e}"
        );
        assert!(m.with_constants(&[0.5]).is_err());
    }
}
