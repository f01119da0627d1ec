//! Warnings where a result cannot mean what it seems: strategies that
//! leave shares unfilled, orders larger than the participation cap lets
//! fill, day tests over too few days. The terminal and the report print
//! the same list.

use serl_env::{EnvConfig, MarketData, ParentOrder};

use crate::report_data::ReportData;
use crate::significance::MIN_TEST_DAYS;

/// AFI above this (1% of the order left at the horizon) is named.
pub const AFI_WARNING: f64 = 0.01;

/// The abbreviations of the strategy tables, spelled out: one line under
/// every table that shows them.
pub const LEGEND: &str = "PA: price advantage of the whole parent order over the window's benchmark, bps (unfilled shares charged as if crossed at the horizon); PA filled: the same over the filled shares only; WR: win rate (share of orders with PA > 0); GLR: mean gain / mean loss; AFI: average fraction of the order's shares left unfilled (docs/metrics.md).";

/// What the IS column means, for the tables that show it (the report's
/// Markdown and HTML; the terminal's table has no IS column).
pub const IS_LEGEND: &str =
    "IS: implementation shortfall against the arrival price, bps (docs/metrics.md).";

/// How many of `orders` are larger than their window's volume times the
/// participation cap: they cannot finish by trading within the cap, so
/// their unfilled shares (or their forced cross at the horizon) carry
/// the result.
pub fn orders_over_capacity(market: &MarketData, orders: &[ParentOrder], cfg: &EnvConfig) -> usize {
    orders
        .iter()
        .filter(|o| {
            market.get(&o.symbol, o.date).is_some_and(|v| {
                let volume: f64 = v
                    .range(o.start_minute, o.end_minute)
                    .map(|i| v.volume[i])
                    .sum();
                o.qty > cfg.participation_cap * volume
            })
        })
        .count()
}

/// Every warning a report of `data` carries, one sentence each.
pub fn warnings(data: &ReportData) -> Vec<String> {
    let mut out = Vec::new();
    let p = &data.provenance;
    if p.orders_over_capacity > 0 {
        out.push(format!(
            "{} of {} orders are larger than their window's volume times the participation cap: no schedule within the cap can finish them, so what they leave (or cross at the horizon) drives their PA.",
            p.orders_over_capacity, p.orders
        ));
    }
    for s in data.summaries.iter().filter(|s| s.afi > AFI_WARNING) {
        out.push(format!(
            "{} ({}) left {:.1}% of its shares unfilled (AFI, over {} order{}): its PA charges them as if crossed at the horizon ({:.2} bps); over the filled shares alone it would read {:.2} bps.",
            s.strategy,
            s.env,
            100.0 * s.afi,
            s.orders,
            if s.orders == 1 { "" } else { "s" },
            s.pa.mean,
            s.pa_filled
        ));
    }
    let few: Vec<&crate::DayTest> = data.day_tests.iter().filter(|t| t.too_few_days()).collect();
    if let Some(most) = few.iter().map(|t| t.days).max() {
        let mut pairs: Vec<String> = few
            .iter()
            .map(|t| format!("{} vs {}", t.strategy, t.reference))
            .collect();
        pairs.dedup();
        let named = if pairs.len() > 3 {
            format!("{}, ...", pairs[..3].join(", "))
        } else {
            pairs.join(", ")
        };
        out.push(format!(
            "too few days for a day-level test (fewer than {MIN_TEST_DAYS}): {} test(s) over at most {most} day(s) show no p-value ({named}).",
            few.len()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Estimate, Summary};
    use crate::report_data::Provenance;

    fn summary(strategy: &str, afi: f64) -> Summary {
        let e = Estimate {
            mean: 1.0,
            lo: 0.5,
            hi: 1.5,
        };
        Summary {
            strategy: strategy.into(),
            env: "static".into(),
            orders: 10,
            pa: e,
            pa_filled: 3.0,
            pa_std: 1.0,
            wr: 0.5,
            glr: None,
            afi,
            fill_rate: 1.0 - afi,
            is: e,
            reward: 0.0,
            placement: Default::default(),
        }
    }

    fn data(summaries: Vec<Summary>) -> ReportData {
        ReportData {
            provenance: Provenance::default(),
            summaries,
            paired_vs_twap: vec![],
            paired_vs_passive: vec![],
            illusory_gain: vec![],
            day_tests: vec![],
            by_horizon: vec![],
            pa_by_symbol: Default::default(),
        }
    }

    #[test]
    fn a_strategy_that_leaves_shares_unfilled_is_named_with_both_pas() {
        let finishing = data(vec![summary("twap", 0.0), summary("ppo", 0.004)]);
        assert!(warnings(&finishing).is_empty());

        let w = warnings(&data(vec![summary("twap", 0.0), summary("ddqn", 0.212)]));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("ddqn (static) left 21.2% of its shares unfilled (AFI, over 10 orders)"),
            "{}",
            w[0]
        );
        assert!(
            w[0].contains("1.00 bps") && w[0].contains("3.00 bps"),
            "{}",
            w[0]
        );
    }

    #[test]
    fn orders_too_large_for_the_cap_are_counted() {
        let mut d = data(vec![]);
        d.provenance.orders = 8;
        d.provenance.orders_over_capacity = 3;
        let w = warnings(&d);
        assert!(w[0].starts_with("3 of 8 orders are larger"), "{w:?}");
    }

    /// The terminal's table has no IS column, so its legend does not
    /// define IS; the report's tables, which show it, add its line.
    #[test]
    fn the_legend_defines_only_the_columns_its_table_shows() {
        assert!(!LEGEND.contains("IS:"), "{LEGEND}");
        assert!(LEGEND.contains("share"), "AFI is a share of the shares");
        let table = crate::summary_table(&data(vec![summary("twap", 0.0)]));
        let header = table.lines().next().unwrap();
        assert!(!header.contains("IS"), "{header}");
        assert!(IS_LEGEND.starts_with("IS:"));
    }
}
