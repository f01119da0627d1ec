//! A backtest study: strategies over parent orders at one or more venues,
//! here or as shards on a cluster (`shards`), from bar data or from
//! LOBSTER days.

use std::path::{Path, PathBuf};

use serl_data::{Dataset, Split};
use serl_env::{generate_orders, LobsterDay, LobsterVenue, MarketData, ParentOrder, Venue};
use serl_eval::{Backtest, OrderResult, StrategyFactory, StrategySpec};

use crate::config::BacktestFile;
use crate::error::{Context, Result, StudyError};
pub use crate::venues::{EnvChoice, NEEDS_LOBSTER};
use crate::venues::{Made, VenueInputs};

/// A strategy by its command-line name: a baseline (`twap`, `pov:0.1`,
/// ...) or a trained policy (`policy:RUN_DIR`), labelled as typed.
pub fn strategy_factory(s: &str) -> Result<StrategyFactory> {
    if let Some(dir) = s.strip_prefix("policy:") {
        return crate::train::policy_factory(Path::new(dir));
    }
    let spec = StrategySpec::parse(s).map_err(StudyError::msg)?;
    let label = spec.label_as_typed(s);
    Ok(StrategyFactory {
        label,
        ..StrategyFactory::from_spec(spec)
    })
}

/// Where a backtest plays its orders: the venues `env` names, made from
/// `cfg` (its market, its orders' seed) and the LOBSTER days where given.
#[derive(Clone, Copy)]
pub struct PlayedAt<'a> {
    /// The venues, by name (`static`, `dynamic`, `both`, ...).
    pub env: EnvChoice,
    /// The backtest's config.
    pub cfg: &'a BacktestFile,
    /// The venue replaying the LOBSTER days, when given.
    pub lobster: Option<&'a LobsterVenue>,
}

/// Replays `orders` with each of `strategies` where `at` says: what
/// `serl backtest` does here and each of its shards does on a cluster.
pub fn replay(
    market: &MarketData,
    orders: &[ParentOrder],
    strategies: &[String],
    at: PlayedAt,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<OrderResult>> {
    let factories: Vec<StrategyFactory> = strategies
        .iter()
        .map(|s| strategy_factory(s))
        .collect::<Result<_>>()?;
    replay_factories(market, orders, &factories, at, progress)
}

/// [`replay`] with strategies already built (a strategy of the caller's
/// own among them: serl's Python package plays Python callables).
pub fn replay_factories(
    market: &MarketData,
    orders: &[ParentOrder],
    factories: &[StrategyFactory],
    at: PlayedAt,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<OrderResult>> {
    let PlayedAt { env, cfg, lobster } = at;
    let _span = tracing::info_span!("backtest", orders = orders.len()).entered();
    let made = env.make(&VenueInputs { cfg, lobster })?;
    let envs: Vec<&dyn Venue> = made.iter().map(Made::venue).collect();
    Ok(Backtest::new(market, &cfg.env)
        .venues(&envs)
        .progress(progress)
        .run(orders, factories))
}

/// The orders a backtest plays, and where they came from.
pub struct BacktestData {
    /// The bar sessions (the LOBSTER days' sessions for `--lobster`).
    pub ds: Dataset,
    /// The venue replaying the LOBSTER days, when they were given.
    pub lobster: Option<LobsterVenue>,
    /// The split the orders come from (`All` for LOBSTER days).
    pub split: Split,
    /// The bar file or LOBSTER days loaded, for the provenance.
    pub data_path: PathBuf,
    /// The parent orders to play.
    pub orders: Vec<ParentOrder>,
    /// The market views of `ds` the orders play against.
    pub market: MarketData,
}

impl BacktestData {
    /// The LOBSTER days at `lobster` when given (orders from every day;
    /// they play here only), else the bars at `bars` (the orders of
    /// `split`).
    /// `warn` hears at once what the load of bars left out, and where a
    /// LOBSTER day's book crossed.
    pub fn load(
        lobster: Option<&Path>,
        bars: Option<&Path>,
        split: Split,
        cfg: &BacktestFile,
        warn: &dyn Fn(&str),
    ) -> Result<BacktestData> {
        match (lobster, bars) {
            (Some(dir), _) => {
                if cfg.cluster.engine != serl_cluster::EngineKind::Local {
                    crate::bail!("--lobster backtests run here: leave --engine local");
                }
                Self::lobster(dir, cfg, warn)
            }
            (None, Some(path)) => Self::bars(path, split, cfg, warn),
            (None, None) => crate::bail!("give --data or --lobster"),
        }
    }

    /// The report of `results` in `out`: the tables, plots and orders,
    /// with where the orders came from (the orders over the capacity cap
    /// and what the load left out included).
    pub fn report(
        &self,
        results: &[OrderResult],
        cfg: &BacktestFile,
        out: &Path,
    ) -> Result<serl_eval::ReportData> {
        let report = self.report_data(results, cfg)?;
        serl_eval::write_report(out, results, &report)
            .with_context(|| format!("writing the report to {}", out.display()))?;
        Ok(report)
    }

    /// What the report of `results` says (`summary.json`), written
    /// nowhere.
    pub fn report_data(
        &self,
        results: &[OrderResult],
        cfg: &BacktestFile,
    ) -> Result<serl_eval::ReportData> {
        let provenance =
            crate::data::backtest_provenance(&self.data_path, self.split, self.orders.len(), cfg)?;
        let provenance = serl_eval::Provenance {
            orders_over_capacity: serl_eval::orders_over_capacity(
                &self.market,
                &self.orders,
                &cfg.env,
            ),
            skipped: crate::data::skipped_lines(&self.ds),
            ..provenance
        };
        Ok(serl_eval::ReportData::new(results, provenance))
    }

    /// Bar data at `data`, the orders of `split`.
    pub fn bars(
        data: &Path,
        split: Split,
        cfg: &BacktestFile,
        warn: &dyn Fn(&str),
    ) -> Result<BacktestData> {
        let ds = crate::data::load_data(data, &cfg.data, warn)?;
        Self::of(ds, None, split, data, cfg)
    }

    /// The LOBSTER days of `path`, orders drawn from every day.
    /// The dynamic market of these days takes each day's own order flow;
    /// `warn` hears where a day's book crossed.
    pub fn lobster(path: &Path, cfg: &BacktestFile, warn: &dyn Fn(&str)) -> Result<BacktestData> {
        let (ds, days) = lobster_days(path, warn)?;
        let flows: Vec<_> = days
            .iter()
            .filter_map(|d| Some((d.symbol().clone(), d.date(), d.order_flow()?.clone())))
            .collect();
        let mut data = Self::of(ds, Some(LobsterVenue::new(days)), Split::All, path, cfg)?;
        data.market = std::mem::take(&mut data.market).with_order_flow(flows);
        Ok(data)
    }

    fn of(
        ds: Dataset,
        lobster: Option<LobsterVenue>,
        split: Split,
        path: &Path,
        cfg: &BacktestFile,
    ) -> Result<BacktestData> {
        let orders = generate_orders(&ds, split, &cfg.data, &cfg.orders)?;
        let market = crate::data::market_data(&ds, &cfg.data);
        Ok(BacktestData {
            ds,
            lobster,
            split,
            data_path: path.to_path_buf(),
            orders,
            market,
        })
    }
}

/// The LOBSTER days of `path` (a sample zip or a folder of them, the
/// deepest file per symbol) as bar sessions, and the days whose message
/// streams the LOBSTER venue replays; `warn` hears where a day's book
/// crossed.
fn lobster_days(
    path: &Path,
    warn: &dyn Fn(&str),
) -> Result<(Dataset, Vec<std::sync::Arc<LobsterDay>>)> {
    let mut sessions = Vec::new();
    let mut days = Vec::new();
    for (_, file, real) in serl_lob::read_days(serl_lob::sample_files(path, &[])?) {
        let real = real.with_context(|| format!("reading {}", file.display()))?;
        if let Some(w) = real.warning() {
            warn(&w);
        }
        let day = crate::data::lobster_day(real)?;
        sessions.push(day.session().clone());
        days.push(std::sync::Arc::new(day));
    }
    sessions.sort_by(|a, b| (&a.symbol, a.date).cmp(&(&b.symbol, b.date)));
    let ds = Dataset {
        sessions,
        problems: Vec::new(),
        files: Vec::new(),
    };
    Ok((ds, days))
}
