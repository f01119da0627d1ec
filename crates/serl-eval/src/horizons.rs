//! Results by horizon: with `[orders] horizons = [30, 60, 120, 390]` a
//! run holds orders of several lengths, and a gain that only the whole day
//! shows (or only half an hour) must not hide in the pooled mean.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use serl_report::Table;

use crate::metrics::{bootstrap_mean, paired, Estimate, OrderResult};

/// Minutes in a regular session: a horizon this long is "the day".
const DAY_MINUTES: u16 = 390;

/// One strategy at one venue over the orders of one horizon.
#[derive(Debug, Clone, Serialize)]
pub struct HorizonRow {
    /// The venue.
    pub env: String,
    /// The strategy.
    pub strategy: String,
    /// The orders' window, minutes.
    pub horizon_min: u16,
    /// Orders of this horizon.
    pub orders: usize,
    /// Mean PA, bps, with a bootstrap CI.
    pub pa: Estimate,
    /// Mean PA minus TWAP's on the same orders, bps (not for TWAP).
    pub vs_twap: Option<Estimate>,
}

/// A horizon in words: "30 min", or "day" for a whole session.
pub fn horizon_label(minutes: u16) -> String {
    if minutes >= DAY_MINUTES {
        "day".into()
    } else {
        format!("{minutes} min")
    }
}

/// The distinct horizons of `results`, shortest first.
pub fn horizons(results: &[&OrderResult]) -> Vec<u16> {
    let mut h: Vec<u16> = results.iter().map(|r| r.horizon_min).collect();
    h.sort_unstable();
    h.dedup();
    h
}

/// The results of one horizon (all of them for `None`).
pub(crate) fn of_horizon<'a>(
    rows: &[&'a OrderResult],
    horizon: Option<u16>,
) -> Vec<&'a OrderResult> {
    rows.iter()
        .copied()
        .filter(|r| horizon.is_none_or(|h| r.horizon_min == h))
        .collect()
}

/// Every (venue, strategy, horizon) when the results hold more than one
/// horizon; empty otherwise (the pooled tables say it all).
pub fn by_horizon(
    groups: &BTreeMap<(String, String), Vec<&OrderResult>>,
    seed: u64,
) -> Vec<HorizonRow> {
    let all: Vec<&OrderResult> = groups.values().flatten().copied().collect();
    let hs = horizons(&all);
    if hs.len() < 2 {
        return Vec::new();
    }
    let mut rows = Vec::new();
    for ((env, strategy), results) in groups {
        let twap = groups.get(&(env.clone(), "twap".to_string()));
        for &h in &hs {
            let mine = of_horizon(results, Some(h));
            if mine.is_empty() {
                continue;
            }
            let pa: Vec<f64> = mine.iter().map(|r| r.pa_bps).collect();
            let vs_twap = twap.filter(|_| strategy != "twap").and_then(|t| {
                let diffs: Vec<f64> = paired(&mine, &of_horizon(t, Some(h)))
                    .map(|(_, d)| d)
                    .collect();
                (!diffs.is_empty()).then(|| bootstrap_mean(&diffs, 1000, seed ^ h as u64))
            });
            rows.push(HorizonRow {
                env: env.clone(),
                strategy: strategy.clone(),
                horizon_min: h,
                orders: mine.len(),
                pa: bootstrap_mean(&pa, 1000, seed ^ h as u64),
                vs_twap,
            });
        }
    }
    rows
}

/// The by-horizon table: one row per venue and strategy, one column per
/// horizon (mean PA, and the difference from TWAP on the same orders).
pub fn horizons_table(md: &mut String, rows: &[HorizonRow], h: &str) {
    if rows.is_empty() {
        return;
    }
    let mut hs: Vec<u16> = rows.iter().map(|r| r.horizon_min).collect();
    hs.sort_unstable();
    hs.dedup();
    let _ = writeln!(md, "\n{h} By horizon\n");
    let _ = writeln!(
        md,
        "Mean PA (bps) [95% CI] of the orders of each horizon; below it, PA − TWAP on the same orders.\n"
    );
    let labels: Vec<String> = hs.iter().map(|&m| horizon_label(m)).collect();
    let mut t = Table::new(
        ["env".to_string(), "strategy".to_string()]
            .into_iter()
            .chain(labels),
    );
    let mut keys: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.env.as_str(), r.strategy.as_str()))
        .collect();
    keys.dedup();
    for (env, strategy) in keys {
        let cells: Vec<String> = hs
            .iter()
            .map(|&m| {
                rows.iter()
                    .find(|r| r.env == env && r.strategy == strategy && r.horizon_min == m)
                    .map_or("–".into(), |r| match &r.vs_twap {
                        Some(d) => format!("{} (n {})<br>Δ {d}", r.pa, r.orders),
                        None => format!("{} (n {})", r.pa, r.orders),
                    })
            })
            .collect();
        t.row(
            [env.to_string(), strategy.to_string()]
                .into_iter()
                .chain(cells),
        );
    }
    md.push_str(&t.markdown());
}
