//! The static environment on the bundled sample: what an order can and
//! cannot do.

use std::path::Path;

use serl_data::{load, DataConfig, Split};
use serl_env::*;

fn sample() -> (serl_data::Dataset, DataConfig) {
    let cfg = DataConfig::default();
    let ds = load(
        &Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"))
            .join("../../data/lean"),
        &cfg,
    )
    .unwrap();
    (ds, cfg)
}

struct Fixed(f64);
impl Strategy for Fixed {
    fn name(&self) -> String {
        format!("fixed({})", self.0)
    }
    fn act(&mut self, _: &Decision) -> f64 {
        self.0
    }
}

fn reward() -> DefaultReward {
    DefaultReward {
        inventory_penalty: 2.0,
        terminal_penalty: 50.0,
    }
}

#[test]
fn orders_are_drawn_per_session_and_side_deterministically() {
    let (ds, cfg) = sample();
    let oc = OrderConfig::default();
    let a = generate_orders(&ds, Split::Train, &cfg, &oc).unwrap();
    assert_eq!(a.len(), 4 * 4 * 2, "4 symbols x 4 train dates x both sides");
    assert_eq!(a, generate_orders(&ds, Split::Train, &cfg, &oc).unwrap());
    let spy: Vec<_> = a.iter().filter(|o| &*o.symbol == "SPY").collect();
    // 1% of the look-back ADV: SPY trades ~100M shares a day.
    assert!(
        spy.iter()
            .all(|o| o.qty > 100_000.0 && o.qty < 10_000_000.0),
        "{:?}",
        spy[0].qty
    );
}

#[test]
fn horizons_draw_one_order_each_inside_the_session() {
    let (ds, cfg) = sample();
    let oc = OrderConfig {
        horizons: vec![30, 60, 120, 390],
        ..OrderConfig::default()
    };
    let a = generate_orders(&ds, Split::Train, &cfg, &oc).unwrap();
    assert_eq!(a.len(), 4 * 4 * 2 * 4, "each draw once per horizon");
    assert_eq!(a, generate_orders(&ds, Split::Train, &cfg, &oc).unwrap());
    let lengths: Vec<u16> = a
        .iter()
        .take(4)
        .map(|o| o.end_minute - o.start_minute)
        .collect();
    assert_eq!(lengths, [30, 60, 120, 390]);
    assert!(a
        .iter()
        .all(|o| o.start_minute >= 570 && o.end_minute <= 960));
    // The short windows are spread over the day, not all at the open.
    let starts: std::collections::BTreeSet<u16> = a
        .iter()
        .filter(|o| o.end_minute - o.start_minute == 30)
        .map(|o| o.start_minute)
        .collect();
    assert!(starts.len() > 10, "{starts:?}");
    let zero = OrderConfig {
        horizons: vec![0],
        ..OrderConfig::default()
    };
    let err = generate_orders(&ds, Split::Train, &cfg, &zero).unwrap_err();
    assert!(err.to_string().contains("orders.horizons"), "{err}");
}

#[test]
fn one_side_asked_for_is_the_only_side_drawn_however_many_per_session() {
    let (ds, cfg) = sample();
    for (sides, side) in [(Sides::Buy, OrderSide::Buy), (Sides::Sell, OrderSide::Sell)] {
        let oc = OrderConfig {
            sides,
            per_session: 4,
            ..Default::default()
        };
        let orders = generate_orders(&ds, Split::Train, &cfg, &oc).unwrap();
        assert_eq!(orders.len(), 4 * 4 * 4);
        assert!(orders.iter().all(|o| o.side == side), "{sides:?}");
    }
    // Both sides, several per session: shuffled, and both drawn.
    let oc = OrderConfig {
        per_session: 4,
        ..Default::default()
    };
    let orders = generate_orders(&ds, Split::Train, &cfg, &oc).unwrap();
    let buys = orders.iter().filter(|o| o.side == OrderSide::Buy).count();
    assert!(
        buys > 0 && buys < orders.len(),
        "{buys} buys of {}",
        orders.len()
    );
}

#[test]
fn bad_orders_are_clear_errors() {
    let (ds, cfg) = sample();
    let e = generate_orders(
        &ds,
        Split::Test,
        &cfg,
        &OrderConfig {
            start: "09:00".into(),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("outside the session 09:30..16:00"),
        "{e}"
    );
    let e = generate_orders(
        &ds,
        Split::Test,
        &cfg,
        &OrderConfig {
            quantity: Quantity::Shares(0.0),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(e, EnvError::ZeroQuantity(0.0));
    let e = generate_orders(
        &ds,
        Split::Test,
        &cfg,
        &OrderConfig {
            symbols: vec!["MSFT".into()],
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("unknown symbol `MSFT`") && e.to_string().contains("AIG"),
        "{e}"
    );
    let mut one_day = cfg.clone();
    one_day.splits.train_end = chrono::NaiveDate::from_ymd_opt(2013, 10, 11);
    one_day.splits.validation_end = chrono::NaiveDate::from_ymd_opt(2013, 10, 12);
    let e = generate_orders(&ds, Split::Validation, &one_day, &OrderConfig::default()).unwrap_err();
    assert!(matches!(e, EnvError::EmptySplit { .. }), "{e}");
    let e = EnvConfig {
        decision_minutes: 0,
        ..Default::default()
    }
    .validate()
    .unwrap_err();
    assert!(e.to_string().contains("env.decision_minutes"));
}

#[test]
fn trading_everything_at_once_is_capped_by_participation() {
    let (ds, cfg) = sample();
    let md = MarketData::new(&ds, &cfg);
    let orders = generate_orders(
        &ds,
        Split::Test,
        &cfg,
        &OrderConfig {
            quantity: Quantity::AdvFraction(0.2),
            ..Default::default()
        },
    )
    .unwrap();
    let env = EnvConfig {
        decision_minutes: 1,
        ..Default::default()
    };
    for o in &orders {
        let v = md.get(&o.symbol, o.date).unwrap();
        let out = run_static(&mut Fixed(1.0), v, o, &env, &reward(), true);
        // Never more than 10% of any minute's volume.
        assert!(out.filled <= 0.1 * v.volume.iter().sum::<f64>() + 1e-6);
        assert!(
            out.inventory_path.windows(2).all(|w| w[1] <= w[0]),
            "inventory never grows"
        );
        assert_eq!(out.steps, 390);
    }
}

#[test]
fn decision_intervals_of_1_5_and_30_minutes_fill_a_small_order() {
    let (ds, cfg) = sample();
    let md = MarketData::new(&ds, &cfg);
    let orders = generate_orders(&ds, Split::Test, &cfg, &OrderConfig::default()).unwrap();
    for k in [1u16, 5, 30] {
        let env = EnvConfig {
            decision_minutes: k,
            ..Default::default()
        };
        for o in &orders {
            let v = md.get(&o.symbol, o.date).unwrap();
            let env_ep = StaticEnv::new(v, o, &env);
            assert_eq!(env_ep.steps(), 390usize.div_ceil(k as usize));
            let mut obs = [0f32; OBS_DIM];
            env_ep.observe(&mut obs);
            assert_eq!((obs[0], obs[1]), (1.0, 1.0), "all time and inventory left");
            assert!(obs.iter().all(|x| x.is_finite()));
            let out = run_static(&mut Twap, v, o, &env, &reward(), false);
            assert!(
                (out.filled - o.qty).abs() < 1e-6 * o.qty,
                "k={k}: filled {} of {}",
                out.filled,
                o.qty
            );
        }
    }
}

#[test]
fn force_liquidation_empties_what_is_left() {
    let (ds, cfg) = sample();
    let md = MarketData::new(&ds, &cfg);
    let o = &generate_orders(&ds, Split::Test, &cfg, &OrderConfig::default()).unwrap()[0];
    let v = md.get(&o.symbol, o.date).unwrap();
    let leave = run_static(
        &mut Fixed(0.0),
        v,
        o,
        &EnvConfig::default(),
        &reward(),
        false,
    );
    assert_eq!(leave.filled, 0.0);
    assert!(
        leave.reward < -40.0,
        "an unfilled order is penalised: {}",
        leave.reward
    );
    let force = EnvConfig {
        terminal: Terminal::ForceLiquidate,
        ..Default::default()
    };
    let out = run_static(&mut Fixed(0.0), v, o, &force, &reward(), false);
    assert!((out.filled - o.qty).abs() < 1e-9);
}

/// A share left at the horizon is charged what the forced liquidation
/// pays, so leaving an order undone scores as crossing it at the end: the
/// whole-order PA cannot be won by not trading (docs/metrics.md).
#[test]
fn an_order_left_undone_scores_as_if_crossed_at_the_horizon() {
    let (ds, cfg) = sample();
    let md = MarketData::new(&ds, &cfg);
    let orders = generate_orders(&ds, Split::Test, &cfg, &OrderConfig::default()).unwrap();
    let force = EnvConfig {
        terminal: Terminal::ForceLiquidate,
        ..Default::default()
    };
    for o in orders.iter().take(6) {
        let v = md.get(&o.symbol, o.date).unwrap();
        let leave = run_static(
            &mut Fixed(0.0),
            v,
            o,
            &EnvConfig::default(),
            &reward(),
            false,
        );
        let crossed = run_static(&mut Fixed(0.0), v, o, &force, &reward(), false);
        assert_eq!(leave.filled, 0.0);
        assert_eq!(leave.filled_pa_bps(), 0.0, "the paper's PA of no fill");
        assert_eq!(leave.unfilled(), o.qty);
        assert!(
            (leave.pa_bps() - crossed.pa_bps()).abs() < 1e-9,
            "left {} vs crossed {}",
            leave.pa_bps(),
            crossed.pa_bps()
        );
        assert!((leave.is_bps() - crossed.is_bps()).abs() < 1e-9);
        // 0.5% of the order a step for 78 steps: about 40% done, the fills
        // and the rest at the horizon.
        let half = run_static(
            &mut Fixed(0.005),
            v,
            o,
            &EnvConfig::default(),
            &reward(),
            false,
        );
        assert!(half.unfilled() > 0.5 * o.qty);
        let done = half.filled / o.qty;
        let price = half.notional / o.qty + (1.0 - done) * half.horizon_price;
        let want = -o.side.sign() * (price / half.bench_price - 1.0) * 1e4;
        assert!((half.pa_bps() - want).abs() < 1e-9);
        // A dearer opportunity cost is charged on the unfilled shares only.
        let dear = EnvConfig {
            unfilled_cost_bps: 20.0,
            ..Default::default()
        };
        let costly = run_static(&mut Fixed(0.0), v, o, &dear, &reward(), false);
        assert!(
            (leave.pa_bps() - costly.pa_bps() - 20.0).abs() < 0.5,
            "about 20 bps dearer"
        );
    }
}

#[test]
fn dynamic_episodes_stepped_side_by_side_match_single_episodes() {
    let (ds, cfg) = sample();
    let md = MarketData::new(&ds, &cfg);
    let orders = generate_orders(&ds, Split::Test, &cfg, &OrderConfig::default()).unwrap();
    let orders = &orders[..4];
    let env = EnvConfig {
        decision_minutes: 30,
        ..Default::default()
    };
    let market = MarketConfig::default();
    let views: Vec<_> = orders
        .iter()
        .map(|o| md.get(&o.symbol, o.date).unwrap().clone())
        .collect();
    // Episodes stepped side by side, interleaved, as a trainer steps them.
    let mut episodes: Vec<DynamicEnv> = orders
        .iter()
        .zip(&views)
        .map(|(o, v)| DynamicEnv::new(v, o, &env, &market, o.id))
        .collect();
    let mut obs = [0f32; OBS_DIM];
    while !episodes.iter().all(|e| e.done()) {
        for e in episodes.iter_mut().filter(|e| !e.done()) {
            e.observe(&mut obs);
            assert!(obs.iter().all(|x| x.is_finite()));
            let a = 1.0 / e.steps() as f64;
            e.step(a);
        }
    }
    for ((e, o), v) in episodes.iter().zip(orders).zip(&views) {
        let one = run_dynamic(
            &mut Fixed(1.0 / e.steps() as f64),
            v,
            o,
            &env,
            (&market, o.id),
            &reward(),
            false,
        );
        let together = e.outcome(one.reward, Vec::new());
        assert_eq!(
            (together.filled, together.notional),
            (one.filled, one.notional),
            "same seed, same day"
        );
        assert!(one.filled > 0.0);
    }
}

/// Trades twice the even pace until half the window is gone, then evenly.
struct FrontLoaded;
impl Strategy for FrontLoaded {
    fn name(&self) -> String {
        "front-loaded".into()
    }
    fn act(&mut self, d: &Decision) -> f64 {
        let even = d.even_share();
        if 2 * d.step < d.steps {
            (2.0 * even).min(d.remaining / d.qty)
        } else {
            even
        }
    }
}

/// A reward of one StepInfo field, to add it up over an episode.
struct Sum(fn(&StepInfo) -> f64);
impl Reward for Sum {
    fn reward(&self, s: &StepInfo) -> f64 {
        (self.0)(s)
    }
    fn describe(&self) -> String {
        "a field".into()
    }
}

/// The bundled test split's orders, decided every 30 minutes.
fn thirty_minute_test_orders() -> (MarketData, Vec<ParentOrder>, EnvConfig) {
    let (ds, cfg) = sample();
    let orders = generate_orders(&ds, Split::Test, &cfg, &OrderConfig::default()).unwrap();
    let env = EnvConfig {
        decision_minutes: 30,
        ..Default::default()
    };
    (MarketData::new(&ds, &cfg), orders, env)
}

#[test]
fn twap_gain_adds_up_to_the_timing_gain_over_twap() {
    let (md, orders, env) = thirty_minute_test_orders();
    for o in &orders {
        let v = md.get(&o.symbol, o.date).unwrap();
        let gain = Sum(|s| s.twap_gain_bps);
        let front = run_static(&mut FrontLoaded, v, o, &env, &gain, false);
        let twap = run_static(&mut Twap, v, o, &env, &gain, false);
        assert!(twap.reward.abs() < 1e-9, "TWAP never strays from itself");
        // The timing gain: the schedules' benchmark prices weighted by what
        // they filled (spread costs aside, which differ per bar).
        let weighted = Sum(|s| s.fill_frac * s.step_bench);
        let at = |s: &mut dyn Strategy| run_static(s, v, o, &env, &weighted, false).reward;
        let timing =
            -o.side.sign() * (at(&mut FrontLoaded) - at(&mut Twap)) / front.arrival_price * 1e4;
        assert!(
            (front.reward - timing).abs() < 1e-6 * (1.0 + timing.abs()),
            "{} {:?}: summed twap_gain {} against the timing gain {timing}",
            o.symbol,
            o.side,
            front.reward,
        );
        assert!(front.reward != 0.0);
    }
}

#[test]
fn return_features_are_signed_against_the_order() {
    let (md, orders, env) = thirty_minute_test_orders();
    let names = obs::feature_names();
    let ret_30 = names.iter().position(|n| n == "ret_30").unwrap();
    let buy = orders.iter().find(|o| o.side == OrderSide::Buy).unwrap();
    let sell = orders
        .iter()
        .find(|o| o.side == OrderSide::Sell && o.symbol == buy.symbol && o.date == buy.date)
        .unwrap();
    let v = md.get(&buy.symbol, buy.date).unwrap();
    let (mut b, mut s) = (StaticEnv::new(v, buy, &env), StaticEnv::new(v, sell, &env));
    let (mut ob, mut os) = ([0f32; OBS_DIM], [0f32; OBS_DIM]);
    let mut seen_a_move = false;
    while !b.done() {
        b.observe(&mut ob);
        s.observe(&mut os);
        assert_eq!(ob[ret_30], -os[ret_30], "same market, opposite sides");
        seen_a_move |= ob[ret_30] != 0.0;
        b.step(Twap.act(&b.decision(&ob)));
        s.step(Twap.act(&s.decision(&os)));
    }
    assert!(seen_a_move);
}

#[test]
fn an_imagined_day_reshapes_the_replay_and_rewards_trading_ahead_of_its_drift() {
    let (md, orders, env) = thirty_minute_test_orders();
    let rising = Scenario {
        drift_bps: 200.0,
        jumps: vec![(60, 50.0)],
        ..Scenario::default()
    };
    for o in orders.iter().filter(|o| o.side == OrderSide::Buy) {
        let real = md.get(&o.symbol, o.date).unwrap();
        let imagined = real.imagined(&rising);
        // The day's shape: the drift grows with the minute, and the jump
        // holds from its minute on.
        let last = real.price.len() - 1;
        let lift = |i: usize| (imagined.price[i] / real.price[i]).ln() * 1e4;
        assert!(lift(0).abs() < 1e-9);
        assert!((lift(last) - 250.0).abs() < 1.0, "{}", lift(last));
        let at_60 = real
            .minute
            .iter()
            .position(|&m| m >= real.open_minute + 60)
            .unwrap();
        assert!(lift(at_60) - lift(at_60 - 1) > 49.0);
        // Spreads stay the same in bps.
        for i in 0..=last {
            let bps = |v: &SessionView| v.half_spread[i] / v.price[i];
            assert!((bps(real) - bps(&imagined)).abs() < 1e-12);
        }
        // A buyer who trades ahead of a rising day gains by it.
        let gain = Sum(|s| s.twap_gain_bps);
        let front = |v: &SessionView| run_static(&mut FrontLoaded, v, o, &env, &gain, false).reward;
        assert!(
            front(&imagined) > front(real) + 20.0,
            "{} {}",
            front(&imagined),
            front(real)
        );
        // The episode can own its imagined day.
        let mut e = StaticEnv::new(imagined, o, &env);
        while !e.done() {
            e.step(1.0);
        }
        assert_eq!(e.remaining(), 0.0);
    }
}
