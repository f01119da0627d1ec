//! The profiling module: the market's background population.

use serde::{Deserialize, Serialize};
use serl_market::{MarketConfig, SESSION_MINUTES};

use crate::imagination::check_scenario;
use crate::kind::{err, in_range, ModuleError, ModuleKind};

/// Most background agents a designed market may hold.
pub const MAX_AGENTS: usize = 2_000;

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
        if m.market_makers == 0 {
            return Err(err(
                kind,
                "market_makers = 0 leaves the book without liquidity; give at least 1",
            ));
        }
        let day = SESSION_MINUTES as f64;
        for (field, value, lo, hi) in [
            ("market_order_share", m.market_order_share, 0.0, 1.0),
            ("cancel_share", m.cancel_share, 0.0, 1.0),
            ("order_size", m.order_size, 1.0, 1e6),
            ("mm_levels", m.mm_levels as f64, 1.0, 20.0),
            ("mm_interval_ms", m.mm_interval_ms as f64, 10.0, 600_000.0),
            ("mm_depth_share", m.mm_depth_share, 0.0, 1.0),
            ("value_rate_per_min", m.value_rate_per_min, 0.0, 60.0),
            ("latency_us", m.latency_us as f64, 0.0, 1e7),
            ("momentum_rate_per_min", m.momentum_rate_per_min, 0.0, 60.0),
            ("momentum_threshold_bps", m.momentum_threshold_bps, 0.0, 1e4),
            ("informed_rate_per_min", m.informed_rate_per_min, 0.0, 60.0),
            ("informed_horizon_min", m.informed_horizon_min, 0.0, day),
            ("informed_noise_bps", m.informed_noise_bps, 0.0, 1e4),
            ("informed_size_mult", m.informed_size_mult, 0.0, 100.0),
            ("flow_impact", m.flow_impact, 0.0, 10.0),
            ("flow_memory_min", m.flow_memory_min, 0.0, day),
            ("mm_fundamental_weight", m.mm_fundamental_weight, 0.0, 1.0),
            (
                "noise_fundamental_weight",
                m.noise_fundamental_weight,
                0.0,
                1.0,
            ),
            (
                "momentum_lookback_min",
                m.momentum_lookback_min as f64,
                1.0,
                120.0,
            ),
        ] {
            in_range(kind, &format!("market.{field}"), value, lo, hi)?;
        }
        check_scenario(kind, "scenarios[0]", &m.scenario)
    }
}
