//! What a report says, computed: the provenance, each strategy's summary,
//! its paired differences against TWAP and passive TWAP, the illusory
//! gains and the day tests (`summary.json`). `report.rs` renders it;
//! `warnings.rs` reads it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::horizons::{by_horizon, horizons, of_horizon, HorizonRow};
use crate::metrics::{mean, paired_diff, summarize, OrderResult, PairedDiff, Summary};
use crate::significance::{benjamini_hochberg, day_test, DayTest};

/// Where the orders and data came from.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Provenance {
    /// The dataset's path.
    pub data_path: String,
    /// The split the orders were drawn from.
    pub split: String,
    /// The seed of the run (a backtest's order seed); it also seeds the
    /// report's bootstraps.
    pub seed: u64,
    /// Parent orders drawn.
    pub orders: usize,
    /// The order generator's settings, as JSON.
    pub order_config: String,
    /// The environment's settings, as JSON.
    pub env_config: String,
    /// The reward the episodes were scored with, in words.
    pub reward: String,
    /// The `serl` version that wrote the report.
    pub serl_version: String,
    /// The commit it was built from.
    pub git_commit: String,
    /// When the report was written.
    pub created: String,
    /// Orders larger than their window's volume times the participation
    /// cap ([`crate::orders_over_capacity`]).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub orders_over_capacity: usize,
    /// Every file or row the data loader skipped, one line each (`path:
    /// line: what`), so a report says what it left out.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub skipped: Vec<String>,
    /// Every record of the run directory that could not be read and was
    /// recomputed (`file: what was wrong`), so a repaired run says so.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub repairs: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Illusory gain of one strategy: PA in the static replay minus PA in the
/// dynamic market, on the same orders.
#[derive(Debug, Clone, Serialize)]
pub struct IllusoryGain {
    /// The strategy.
    pub strategy: String,
    /// Mean PA in the static replay, bps.
    pub pa_static: f64,
    /// Mean PA in the dynamic market, bps.
    pub pa_dynamic: f64,
    /// `pa_static − pa_dynamic`, bps.
    pub gain: f64,
}

/// Everything a report says, as `summary.json` holds it.
#[derive(Debug, Clone, Serialize)]
pub struct ReportData {
    /// Where the orders and data came from.
    pub provenance: Provenance,
    /// One per strategy and venue.
    pub summaries: Vec<Summary>,
    /// Each strategy's PA minus TWAP's, per venue.
    pub paired_vs_twap: Vec<PairedDiff>,
    /// Each strategy's PA minus passive TWAP's (`twap-passive`), per venue,
    /// where the report has it: what placing orders gains beyond resting
    /// at the touch.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub paired_vs_passive: Vec<PairedDiff>,
    /// Each strategy played at both venues.
    pub illusory_gain: Vec<IllusoryGain>,
    /// Each strategy against each baseline with the day as the unit
    /// ([`day_test`](crate::day_test)): Wilcoxon p-values, Benjamini–Hochberg
    /// q-values across the report, bootstrap CIs over days.
    pub day_tests: Vec<DayTest>,
    /// Each strategy per horizon, when the orders have several
    /// (`[orders] horizons`); empty otherwise.
    pub by_horizon: Vec<HorizonRow>,
    /// Mean PA per symbol: env → strategy → symbol → PA.
    pub pa_by_symbol: BTreeMap<String, BTreeMap<String, BTreeMap<String, f64>>>,
}

impl ReportData {
    /// Summarises `results` by venue and strategy, pairs each strategy with
    /// TWAP at its venue and computes the illusory gains.
    pub fn new(results: &[OrderResult], provenance: Provenance) -> Self {
        let mut groups: BTreeMap<(String, String), Vec<&OrderResult>> = BTreeMap::new();
        for r in results {
            groups
                .entry((r.env.clone(), r.strategy.clone()))
                .or_default()
                .push(r);
        }
        let seed = provenance.seed;
        let summaries: Vec<Summary> = groups
            .iter()
            .map(|((env, s), rows)| summarize(s, env, rows, seed))
            .collect();
        let paired = paired_against(&groups, "twap", seed);
        let paired_passive = paired_against(&groups, PASSIVE_TWAP, seed);
        let mut illusory = Vec::new();
        for ((env, s), rows) in &groups {
            if env != "static" {
                continue;
            }
            if let Some(dyn_rows) = groups.get(&("dynamic".to_string(), s.clone())) {
                let ps = mean(&rows.iter().map(|r| r.pa_bps).collect::<Vec<_>>());
                let pd = mean(&dyn_rows.iter().map(|r| r.pa_bps).collect::<Vec<_>>());
                illusory.push(IllusoryGain {
                    strategy: s.clone(),
                    pa_static: ps,
                    pa_dynamic: pd,
                    gain: ps - pd,
                });
            }
        }
        let mut pa_by_symbol: BTreeMap<String, BTreeMap<String, BTreeMap<String, f64>>> =
            BTreeMap::new();
        for ((env, s), rows) in &groups {
            let mut acc: BTreeMap<String, (f64, usize)> = BTreeMap::new();
            for r in rows {
                let e = acc.entry(r.symbol.clone()).or_default();
                e.0 += r.pa_bps;
                e.1 += 1;
            }
            pa_by_symbol.entry(env.clone()).or_default().insert(
                s.clone(),
                acc.into_iter()
                    .map(|(k, (sum, n))| (k, sum / n as f64))
                    .collect(),
            );
        }
        ReportData {
            paired_vs_passive: paired_passive,
            day_tests: day_tests(&groups, seed),
            by_horizon: by_horizon(&groups, seed),
            provenance,
            summaries,
            paired_vs_twap: paired,
            illusory_gain: illusory,
            pa_by_symbol,
        }
    }
}

impl ReportData {
    /// `strategy`'s paired difference against TWAP at venue `env`.
    pub fn vs_twap(&self, env: &str, strategy: &str) -> Option<&PairedDiff> {
        self.paired_vs_twap
            .iter()
            .find(|d| d.env == env && d.strategy == strategy)
    }

    /// `strategy` against `reference` day by day at venue `env`, over all
    /// horizons pooled.
    pub fn day_test(&self, env: &str, strategy: &str, reference: &str) -> Option<&DayTest> {
        self.day_tests.iter().find(|t| {
            t.env == env
                && t.strategy == strategy
                && t.reference == reference
                && t.horizon_min.is_none()
        })
    }
}

/// The passive baseline's label.
const PASSIVE_TWAP: &str = "twap-passive";

/// Each strategy's paired difference against `reference` at its venue.
fn paired_against(
    groups: &BTreeMap<(String, String), Vec<&OrderResult>>,
    reference: &str,
    seed: u64,
) -> Vec<PairedDiff> {
    let mut paired = Vec::new();
    for ((env, s), rows) in groups {
        if s == reference {
            continue;
        }
        if let Some(base) = groups.get(&(env.clone(), reference.to_string())) {
            paired.extend(paired_diff(rows, base, seed));
        }
    }
    paired
}

/// Whether a strategy is a baseline a day test compares with: a classical
/// schedule `StrategySpec` reads (TWAP, VWAP, POV, Almgren–Chriss), not
/// the oracle, which trades with hindsight.
pub fn is_baseline(label: &str) -> bool {
    matches!(
        crate::StrategySpec::parse(label),
        Ok(spec) if spec != crate::StrategySpec::Oracle
    )
}

/// Every strategy that is not a baseline against every baseline at its
/// venue (or, in a report of baselines only, each against TWAP), over all
/// orders and, when they have several horizons, over each horizon's; the
/// q-values are corrected across all of them (baselines and horizons).
fn day_tests(groups: &BTreeMap<(String, String), Vec<&OrderResult>>, seed: u64) -> Vec<DayTest> {
    let all: Vec<&OrderResult> = groups.values().flatten().copied().collect();
    let hs = horizons(&all);
    let mut filters: Vec<Option<u16>> = vec![None];
    if hs.len() > 1 {
        filters.extend(hs.into_iter().map(Some));
    }
    let mut tests = Vec::new();
    for horizon in filters {
        let filtered: BTreeMap<(String, String), Vec<&OrderResult>> = groups
            .iter()
            .map(|(k, rows)| (k.clone(), of_horizon(rows, horizon)))
            .collect();
        for mut t in day_tests_of(&filtered, seed) {
            t.horizon_min = horizon;
            tests.push(t);
        }
    }
    let q = benjamini_hochberg(&tests.iter().map(|t| t.p_value).collect::<Vec<_>>());
    for (t, q) in tests.iter_mut().zip(q) {
        t.q_value = q;
    }
    tests
}

/// The day tests of one set of groups (uncorrected).
fn day_tests_of(groups: &BTreeMap<(String, String), Vec<&OrderResult>>, seed: u64) -> Vec<DayTest> {
    let only_baselines = groups.keys().all(|(_, s)| is_baseline(s) || s == "oracle");
    let mut tests = Vec::new();
    for ((env, s), rows) in groups {
        let tested = if only_baselines {
            is_baseline(s) && s != "twap"
        } else {
            !is_baseline(s) && s != "oracle"
        };
        if !tested || rows.is_empty() {
            continue;
        }
        for ((ref_env, r), ref_rows) in groups {
            if ref_env == env
                && is_baseline(r)
                && (!only_baselines || r == "twap")
                && !ref_rows.is_empty()
            {
                tests.extend(day_test(rows, ref_rows, seed));
            }
        }
    }
    tests
}
