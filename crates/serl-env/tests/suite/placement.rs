//! Resting orders on the bundled sample: where they fill, in the static
//! replay's conservative model and in the simulated book.

use std::path::Path;

use serl_data::{load, DataConfig, Split};
use serl_env::*;

fn sample() -> (MarketData, Vec<ParentOrder>) {
    let cfg = DataConfig::default();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/lean");
    let ds = load(&dir, &cfg).unwrap();
    let orders = generate_orders(&ds, Split::Test, &cfg, &OrderConfig::default()).unwrap();
    (MarketData::new(&ds, &cfg), orders)
}

fn reward() -> DefaultReward {
    DefaultReward {
        inventory_penalty: 0.0,
        terminal_penalty: 0.0,
    }
}

/// Posts one step's even share at `placement` every step but the first
/// (where the static replay, with no bar before it to price from, would
/// cross).
struct Post(Placement);

impl Strategy for Post {
    fn name(&self) -> String {
        format!("post({})", self.0.label())
    }
    fn act(&mut self, d: &Decision) -> f64 {
        if d.step == 0 {
            0.0
        } else {
            d.even_share()
        }
    }
    fn order(&mut self, d: &Decision) -> ChildOrder {
        ChildOrder {
            action: self.act(d),
            placement: self.0,
            cross_first: 0.0,
        }
    }
}

fn env(terminal: Terminal, fills: FillModel) -> EnvConfig {
    EnvConfig {
        decision_minutes: 5,
        terminal,
        fills,
        ..EnvConfig::default()
    }
}

#[test]
fn an_order_resting_far_from_the_market_never_fills_and_the_horizon_crosses_it() {
    let (md, orders) = sample();
    let far = Placement::Passive { ticks: 50_000 };
    for o in orders.iter().take(6) {
        let v = md.get(&o.symbol, o.date).unwrap();
        let left = env(Terminal::Leave, FillModel::default());
        let out = run_static(&mut Post(far), v, o, &left, &reward(), false);
        assert_eq!(out.filled, 0.0, "{} {}", o.symbol, o.date);
        let forced = env(Terminal::ForceLiquidate, FillModel::default());
        let out = run_static(&mut Post(far), v, o, &forced, &reward(), false);
        assert!((out.filled - o.qty).abs() < 1e-6);
        let p = out.placement;
        assert_eq!(p.passive_share, 0.0);
        assert!((p.final_cross_share - 1.0).abs() < 1e-9, "{p:?}");
        // Everything crossed: the spread was paid, not earned.
        assert!(p.spread_captured_bps < 0.0, "{p:?}");
        assert_eq!(p.adverse_1m_bps, None);
    }
}

#[test]
fn static_fills_shrink_with_the_queue_haircut_and_never_beat_the_posted_price() {
    let (md, orders) = sample();
    let touch = Placement::Passive { ticks: 0 };
    let fills = |haircut: f64, placement_bar: bool| -> f64 {
        let cfg = env(
            Terminal::Leave,
            FillModel {
                queue_haircut: haircut,
                placement_bar,
            },
        );
        orders
            .iter()
            .map(|o| {
                let v = md.get(&o.symbol, o.date).unwrap();
                run_static(&mut Post(touch), v, o, &cfg, &reward(), false).filled
            })
            .sum()
    };
    let (none, half, all) = (fills(1.0, false), fills(0.5, false), fills(0.0, false));
    assert!(
        none > 0.0,
        "trade-throughs fill even with the whole queue ahead"
    );
    assert!(none < half && half < all, "{none} {half} {all}");
    assert!(
        fills(0.5, true) > half,
        "the posting bar adds fills when allowed"
    );
    // A resting order at the touch earns the spread on every share it
    // fills: at least half of it, since the price rounds away from the mid.
    let cfg = env(Terminal::Leave, FillModel::default());
    for o in &orders {
        let v = md.get(&o.symbol, o.date).unwrap();
        let out = run_static(&mut Post(touch), v, o, &cfg, &reward(), false);
        if out.filled > 0.0 {
            assert!((out.placement.passive_share - 1.0).abs() < 1e-9);
            assert!(
                out.placement.spread_captured_bps > 0.0,
                "{:?}",
                out.placement
            );
        }
    }
}

#[test]
fn a_resting_order_queues_in_the_simulated_book_and_is_withdrawn_at_the_end() {
    let (md, orders) = sample();
    let o = &orders[0];
    let v = md.get(&o.symbol, o.date).unwrap();
    let cfg = env(Terminal::Leave, FillModel::default());
    let mut e = DynamicEnv::new(v, o, &cfg, &MarketConfig::default(), 11);
    let touch = Placement::Passive { ticks: 0 };
    let mut rested = false;
    while !e.done() {
        let order = ChildOrder {
            action: 0.02,
            placement: touch,
            cross_first: 0.0,
        };
        e.step_order(order);
        let QueueState { ahead, minutes } = e.queue();
        if minutes > 0.0 {
            rested = true;
            assert!(ahead >= 0.0);
            assert!(minutes <= 5.0 + 1e-9, "{minutes}");
        }
    }
    assert!(rested, "some order was still resting at a decision");
    assert_eq!(e.queue(), QueueState::default(), "withdrawn at the horizon");
    let out = e.outcome(0.0, Vec::new());
    assert!(out.filled > 0.0);
    let p = out.placement;
    assert!((p.passive_share - 1.0).abs() < 1e-9, "{p:?}");
    // Resting at the touch earns the spread on every fill, and a passive
    // fill has an adverse move to report.
    assert!(p.spread_captured_bps > 0.0, "{p:?}");
    assert!(p.adverse_1m_bps.is_some() && p.adverse_5m_bps.is_some());
    // The same seed plays the same day.
    let mut again = DynamicEnv::new(v, o, &cfg, &MarketConfig::default(), 11);
    let out2 = run_with(&mut again, touch);
    let mut first = DynamicEnv::new(v, o, &cfg, &MarketConfig::default(), 11);
    assert_eq!(run_with(&mut first, touch), out2);
}

fn run_with(e: &mut DynamicEnv, placement: Placement) -> (u64, u64) {
    while !e.done() {
        e.step_order(ChildOrder {
            action: 0.02,
            placement,
            cross_first: 0.0,
        });
    }
    let out = e.outcome(0.0, Vec::new());
    (out.filled.to_bits(), out.notional.to_bits())
}

#[test]
fn crossing_first_catches_up_before_the_rest_is_placed() {
    let (md, orders) = sample();
    let cfg = env(Terminal::Leave, FillModel::default());
    let o = &orders[1];
    let v = md.get(&o.symbol, o.date).unwrap();
    let far = Placement::Passive { ticks: 50_000 };
    let mut e = StaticEnv::new(&**v, o, &cfg);
    // The first step has no bar before it to price a limit from: it
    // crosses. At the second, half of a 2% slice crosses at once and the
    // rest rests out of reach.
    e.step(0.0);
    e.step_order(ChildOrder {
        action: 0.02,
        placement: far,
        cross_first: 0.01,
    });
    let (left, _) = e.left();
    assert!((left - 0.99).abs() < 1e-9, "{left}");
}

#[test]
fn the_forced_cross_happens_at_the_horizon_not_at_the_close() {
    let cfg = DataConfig::default();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/lean");
    let ds = load(&dir, &cfg).unwrap();
    let oc = OrderConfig {
        horizons: vec![30],
        sides: Sides::Buy,
        ..OrderConfig::default()
    };
    let orders = generate_orders(&ds, Split::Test, &cfg, &oc).unwrap();
    let md = MarketData::new(&ds, &cfg);
    let env = env(Terminal::ForceLiquidate, FillModel::default());
    let far = Placement::Passive { ticks: 50_000 };
    for o in orders.iter().take(4) {
        let v = md.get(&o.symbol, o.date).unwrap();
        let out = run_static(&mut Post(far), v, o, &env, &reward(), false);
        let i = v.range(o.start_minute, o.end_minute).last().unwrap();
        let horizon = v.price[i] + v.half_spread[i];
        let avg = out.avg_price().unwrap();
        assert!(
            (avg - horizon).abs() < 1e-9,
            "{} {}: {avg} != {horizon}",
            o.symbol,
            o.date
        );
    }
}

#[test]
fn a_session_with_its_real_order_flow_gives_the_dynamic_market_its_sizes_and_depths() {
    let (md, orders) = sample();
    let o = &orders[0];
    let view = md.get(&o.symbol, o.date).unwrap();
    let base = MarketConfig::default();
    let (bars_cal, bars_cfg) = calibrate(view, &base);
    assert!(bars_cfg.size_quantiles.is_empty() && bars_cfg.depth_quantiles.is_empty());

    // A made-up day's flow: half its orders of 100 shares, the rest 300,
    // placed at the touch and two ticks behind it, 0.8 ms apart.
    let stats = serl_market::OrderStats {
        submissions: 1_000,
        cancels: 800,
        executed_shares: 50_000,
        median_size: 100.0,
        mean_size: 200.0,
        cancel_ratio: 0.8,
        round_lot_share: 1.0,
        size_quantiles: [vec![100; 32], vec![300; 32]].concat(),
    };
    let flow = serl_market::OrderFlow {
        stats,
        depth_quantiles: [vec![0; 32], vec![2; 32]].concat(),
        median_gap_us: 800.0,
    };
    let md = md.with_order_flow([(o.symbol.clone(), o.date, std::sync::Arc::new(flow.clone()))]);
    let view = md.get(&o.symbol, o.date).unwrap();
    let (cal, cfg) = calibrate(view, &base);
    // The same day's prices and volumes, the flow's orders and depths
    // (sizes scaled from the sample's executed volume to this day's).
    assert_eq!(cal.minute_price, bars_cal.minute_price);
    let daily: f64 = cal.minute_volume.iter().sum();
    let mut expected = base.clone();
    flow.apply(&mut expected, daily);
    assert_eq!(cfg.size_quantiles, expected.size_quantiles);
    assert_eq!(cfg.depth_quantiles, flow.depth_quantiles);
    assert_eq!(cfg.mm_message_gap_us, 800.0);
    assert_eq!(cfg.order_size, expected.order_size);
    assert_ne!(cfg.order_size, bars_cfg.order_size);
    // And it trades: an episode runs in that market.
    let env_cfg = env(Terminal::ForceLiquidate, FillModel::default());
    let mut post = Post(Placement::Passive { ticks: 0 });
    let out = run_dynamic(&mut post, view, o, &env_cfg, (&base, 3), &reward(), false);
    assert!(out.filled > 0.0, "{out:?}");
}
