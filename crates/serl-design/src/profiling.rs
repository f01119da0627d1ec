//! The profiling module: the market's background population.

use serde::{Deserialize, Serialize};
use serl_market::{MarketConfig, SESSION_MINUTES};

use crate::imagination::check_scenario;
use crate::kind::{err, in_range, ModuleError, ModuleKind};

/// Most background agents a designed market may hold.
pub const MAX_AGENTS: usize = 2_000;

/// Minutes in a session, as a float for the ranges.
const DAY: f64 = SESSION_MINUTES as f64;

/// The range of each rate, share, size and horizon of a designed market:
/// the validator checks them, the JSON schema announces them.
pub(crate) const MARKET_RANGES: [(&str, f64, f64); 19] = [
    ("market_order_share", 0.0, 1.0),
    ("cancel_share", 0.0, 1.0),
    ("order_size", 1.0, 1e6),
    ("mm_levels", 1.0, 20.0),
    ("mm_interval_ms", 10.0, 600_000.0),
    ("mm_depth_share", 0.0, 1.0),
    ("value_rate_per_min", 0.0, 60.0),
    ("latency_us", 0.0, 1e7),
    ("momentum_rate_per_min", 0.0, 60.0),
    ("momentum_threshold_bps", 0.0, 1e4),
    ("informed_rate_per_min", 0.0, 60.0),
    ("informed_horizon_min", 0.0, DAY),
    ("informed_noise_bps", 0.0, 1e4),
    ("informed_size_mult", 0.0, 100.0),
    ("flow_impact", 0.0, 10.0),
    ("flow_memory_min", 0.0, DAY),
    ("mm_fundamental_weight", 0.0, 1.0),
    ("noise_fundamental_weight", 0.0, 1.0),
    ("momentum_lookback_min", 1.0, 120.0),
];

/// The market's background population.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfilingModule {
    /// The population, its rates and its scenario.
    pub market: Box<MarketConfig>,
}

impl ProfilingModule {
    /// Checks the population's size and every rate, share and horizon.
    pub fn validate(&self) -> Result<(), ModuleError> {
        let kind = ModuleKind::Profiling;
        let m = &self.market;
        let agents = m.noise_agents
            + m.value_agents
            + m.momentum_agents
            + m.informed_agents
            + m.market_makers;
        if agents == 0 || agents > MAX_AGENTS {
            return Err(err(
                kind,
                format!("{agents} agents; give 1 to {MAX_AGENTS}"),
            ));
        }
        if m.queue_reactive.is_some() {
            return Err(err(
                kind,
                "queue_reactive is a market config's choice, not a design's; profile the agents",
            ));
        }
        if m.market_makers == 0 {
            return Err(err(
                kind,
                "market_makers = 0 leaves the book without liquidity; give at least 1",
            ));
        }
        // Every range is read from the market's JSON by name, so that the
        // validator and the schema (`module_schema`) share one table.
        let values = serde_json::to_value(m.as_ref()).unwrap_or_default();
        for (field, lo, hi) in MARKET_RANGES {
            let value = values[field].as_f64().unwrap_or(f64::NAN);
            in_range(kind, &format!("market.{field}"), value, lo, hi)?;
        }
        // Written only when set, so not in the table the schema offers.
        let max = serl_market::Coarsening::MAX_MULT;
        in_range(
            kind,
            "market.noise_limit_mult",
            m.noise_limit_mult,
            1.0,
            max,
        )?;
        check_scenario(kind, "scenarios[0]", &m.scenario)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A designed population may make its flow coarser, within the range a
    /// training's `coarse_flow` has, and an error names the field.
    #[test]
    fn a_designed_coarser_flow_is_checked_by_name() {
        let mut p = ProfilingModule {
            market: Box::new(MarketConfig {
                noise_limit_mult: 4.0,
                ..MarketConfig::default()
            }),
        };
        p.validate().unwrap();
        p.market.noise_limit_mult = 100.0;
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("market.noise_limit_mult"), "{e}");
    }
}
