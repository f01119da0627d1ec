//! The sanity checks every execution study must pass: TWAP pays about its
//! spread and no more, and perfect foresight is clearly positive.

use std::path::Path;

use serl_data::{load, DataConfig, Split};
use serl_env::*;
use serl_eval::*;

#[path = "../../../tests-support/shared_data.rs"]
mod shared_data;
use shared_data::shared_data;

fn provenance(path: &Path, split: Split, orders: usize) -> Provenance {
    Provenance {
        data_path: path.display().to_string(),
        split: split.to_string(),
        seed: 7,
        orders,
        order_config: String::new(),
        env_config: String::new(),
        reward: String::new(),
        serl_version: "test".into(),
        git_commit: "test".into(),
        created: "now".into(),
        ..Provenance::default()
    }
}

fn backtest(path: &Path, split: Split) -> Vec<Summary> {
    let cfg = DataConfig::default();
    let ds = load(path, &cfg).unwrap();
    let md = MarketData::new(&ds, &cfg);
    let orders = generate_orders(&ds, split, &cfg, &OrderConfig::default()).unwrap();
    let factories: Vec<StrategyFactory> = ["twap", "vwap", "ac", "oracle"]
        .iter()
        .map(|s| StrategyFactory::from_spec(StrategySpec::parse(s).unwrap()))
        .collect();
    let env = EnvConfig::default();
    let reward = DefaultReward {
        inventory_penalty: 2.0,
        terminal_penalty: 50.0,
    };
    let results = Backtest::new(&md, &env)
        .reward(&reward)
        .run(&orders, &factories);
    assert_eq!(results.len(), orders.len() * 4);
    let data = ReportData::new(&results, provenance(path, split, orders.len()));
    let dir = tempfile::tempdir().unwrap();
    write_report(dir.path(), &results, &data).unwrap();
    for f in ["orders.csv", "summary.json", "report.md", "report.html"] {
        assert!(dir.path().join(f).metadata().unwrap().len() > 100, "{f}");
    }
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("Paired differences"));
    data.summaries
}

fn check(summaries: &[Summary]) {
    let get = |s: &str| summaries.iter().find(|x| x.strategy == s).unwrap();
    let twap = get("twap");
    assert!(
        twap.pa.mean < 0.0 && twap.pa.mean > -5.0,
        "TWAP pays its spread, a few bps at most: {}",
        twap.pa
    );
    assert_eq!(twap.afi, 0.0);
    let oracle = get("oracle");
    assert!(
        oracle.pa.lo > 10.0,
        "foresight is clearly positive: {}",
        oracle.pa
    );
    assert_eq!(oracle.wr, 1.0);
    for s in summaries {
        assert!(s.pa.mean.is_finite() && s.pa_std.is_finite());
    }
}

#[test]
fn twap_pays_its_spread_and_the_oracle_wins_on_bundled_data() {
    let path = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"))
        .join("../../data/lean");
    check(&backtest(&path, Split::All));
}

#[test]
fn twap_pays_its_spread_and_the_oracle_wins_on_us_equities_2018() {
    let Some(path) = shared_data(
        "us-equities-1min-2018",
        "twap_pays_its_spread_and_the_oracle_wins_on_us_equities_2018",
    ) else {
        return;
    };
    check(&backtest(&path, Split::Test));
}

/// SE-RL's illusory gain: a 10%-of-ADV TWAP looks better in the static
/// replay than in the market its own orders move.
#[test]
fn a_large_order_shows_an_illusory_gain() {
    let path = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"))
        .join("../../data/lean");
    let cfg = DataConfig::default();
    let ds = load(&path, &cfg).unwrap();
    let md = MarketData::new(&ds, &cfg);
    let oc = OrderConfig {
        quantity: Quantity::AdvFraction(0.1),
        ..Default::default()
    };
    let orders = generate_orders(&ds, Split::All, &cfg, &oc).unwrap();
    let f = vec![StrategyFactory::from_spec(StrategySpec::Twap)];
    let dynamic = DynamicVenue {
        market: MarketConfig::default(),
        seed: 7,
    };
    let env = EnvConfig::default();
    let reward = DefaultReward {
        inventory_penalty: 2.0,
        terminal_penalty: 50.0,
    };
    let results = Backtest::new(&md, &env)
        .venues(&[&StaticVenue, &dynamic])
        .reward(&reward)
        .run(&orders, &f);
    let data = ReportData::new(&results, provenance(&path, Split::All, orders.len()));
    let g = &data.illusory_gain[0];
    assert!(
        g.gain > 0.0,
        "static {} vs dynamic {}",
        g.pa_static,
        g.pa_dynamic
    );
}

/// A backtest's defaults, as its builder names them: the static replay,
/// the env's own reward and no progress. Given the same explicitly, the
/// rows are the same; another reward changes the reward column and not
/// the PA; a progress callback hears each order once.
#[test]
fn a_backtest_plays_the_static_replay_with_the_envs_reward_unless_told() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/lean");
    let cfg = DataConfig::default();
    let ds = load(&path, &cfg).unwrap();
    let md = MarketData::new(&ds, &cfg);
    let orders = generate_orders(&ds, Split::Validation, &cfg, &OrderConfig::default()).unwrap();
    let twap = || {
        vec![StrategyFactory::from_spec(
            StrategySpec::parse("twap").unwrap(),
        )]
    };
    let env = EnvConfig::default();
    let rows = |r: &[OrderResult]| serde_json::to_value(r).unwrap();

    let by_default = Backtest::new(&md, &env).run(&orders, &twap());
    let told = Backtest::new(&md, &env)
        .venues(&[&StaticVenue])
        .reward(&env.default_reward())
        .run(&orders, &twap());
    assert!(!by_default.is_empty() && by_default.iter().all(|r| r.env == "static"));
    assert_eq!(rows(&by_default), rows(&told));

    let harsher = DefaultReward {
        inventory_penalty: 50.0,
        terminal_penalty: 500.0,
    };
    let other = Backtest::new(&md, &env)
        .reward(&harsher)
        .run(&orders, &twap());
    let pa = |r: &[OrderResult]| r.iter().map(|o| o.pa_bps).collect::<Vec<_>>();
    let reward = |r: &[OrderResult]| r.iter().map(|o| o.reward).collect::<Vec<_>>();
    assert_eq!(pa(&other), pa(&by_default));
    assert_ne!(reward(&other), reward(&by_default));

    let heard = std::sync::atomic::AtomicU64::new(0);
    let count = |n: u64| {
        heard.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    };
    Backtest::new(&md, &env)
        .progress(&count)
        .run(&orders, &twap());
    assert_eq!(heard.into_inner(), orders.len() as u64);
}
