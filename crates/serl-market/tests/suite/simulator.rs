//! The simulated market: deterministic, on the real day's path, and moved
//! by the orders sent into it.

use serl_lob::Side;
use serl_market::*;

/// A synthetic but realistic day: a U-shaped volume profile and a gentle
/// random-walk price around $50.
fn day() -> Calibration {
    let minutes = 390;
    let mut p = 50.0;
    let mut prices = Vec::new();
    let mut volumes = Vec::new();
    for m in 0..minutes {
        p *= 1.0 + 0.0004 * ((m * 7919 % 13) as f64 / 6.0 - 1.0);
        prices.push(p);
        let x = m as f64 / (minutes - 1) as f64;
        volumes.push(4000.0 * (1.0 + 3.0 * (2.0 * x - 1.0).powi(2)));
    }
    Calibration {
        tick: 0.01,
        minute_price: prices,
        minute_volume: volumes,
        spread_bps: 4.0,
        noise_scale: Vec::new(),
    }
}

#[test]
fn the_same_seed_gives_the_same_day() {
    let cfg = MarketConfig::default();
    let a = Simulator::new(&day(), &cfg, 42).finish();
    let b = Simulator::new(&day(), &cfg, 42).finish();
    assert_eq!(a, b);
    let c = Simulator::new(&day(), &cfg, 43).finish();
    assert_ne!(a.mid, c.mid);
}

/// The fundamental, read at the middle of each second of minutes 10 to
/// 19, a minute a row (the traders' flow impact off: only the path).
fn fundamental_by_second(cfg: &MarketConfig) -> Vec<Vec<f64>> {
    let cfg = MarketConfig {
        flow_impact: 0.0,
        ..cfg.clone()
    };
    let mut sim = Simulator::new(&day(), &cfg, 3);
    (10..20u64)
        .map(|m| {
            (0..60)
                .map(|s| {
                    sim.run_until((m * 60 + s) * 1_000_000 + 500_000);
                    sim.fundamental_now()
                })
                .collect()
        })
        .collect()
}

/// The distinct values of a minute's readings in order, and the second of
/// the first change (`None`: it held all minute).
fn changes(readings: &[f64]) -> (Vec<f64>, Option<usize>) {
    let mut values = vec![readings[0]];
    let mut moved_at = None;
    for (s, &f) in readings.iter().enumerate() {
        if values.last() != Some(&f) {
            moved_at = moved_at.or(Some(s));
            values.push(f);
        }
    }
    (values, moved_at)
}

#[test]
fn a_stepped_fundamental_holds_each_minute_then_moves_at_once() {
    let stepped = MarketConfig {
        fundamental_steps: true,
        ..MarketConfig::default()
    };
    let closes = Simulator::new(&day(), &stepped, 3).fundamental();
    let minutes = fundamental_by_second(&stepped);
    let mut seconds = std::collections::BTreeSet::new();
    for (m, readings) in (10..).zip(&minutes) {
        // The last minute's close until the step, then this minute's (a
        // step in the minute's first second shows this minute's only).
        let (values, moved_at) = changes(readings);
        let is_close = |v: f64, k: usize| (v - closes[k]).abs() < 1e-9;
        match values[..] {
            [before, after] => assert!(is_close(before, m - 1) && is_close(after, m), "minute {m}"),
            [after] => assert!(is_close(after, m), "minute {m}"),
            _ => panic!("minute {m}: {values:?}"),
        }
        seconds.insert(moved_at);
    }
    // At a second of its own each minute, the same for the same seed.
    assert!(seconds.len() >= 5, "{seconds:?}");
    assert_eq!(minutes, fundamental_by_second(&stepped));
    // By default it moves in a line, a little every second.
    for readings in fundamental_by_second(&MarketConfig::default()) {
        let (values, moved_at) = changes(&readings);
        assert_eq!((values.len(), moved_at), (60, Some(1)));
    }
}

#[test]
fn a_bridge_adds_its_moves_to_a_stepped_fundamental_as_to_a_line() {
    let with = |bridge: f64, steps: bool| {
        fundamental_by_second(&MarketConfig {
            fundamental_bridge: bridge,
            fundamental_steps: steps,
            ..MarketConfig::default()
        })
    };
    let (line, bridged, stepped, both) = (
        with(0.0, false),
        with(1.0, false),
        with(0.0, true),
        with(1.0, true),
    );
    let rows = line.iter().zip(&bridged).zip(stepped.iter().zip(&both));
    for (m, ((line, bridged), (stepped, both))) in (10..).zip(rows) {
        for s in 0..60 {
            let (bridge_moves, added) = (bridged[s] - line[s], both[s] - stepped[s]);
            assert!(
                (bridge_moves - added).abs() < 1e-9,
                "minute {m}, second {s}"
            );
        }
        assert_ne!(bridged, line, "minute {m}: the bridge moves nothing");
    }
}

#[test]
fn the_simulated_day_follows_the_real_one() {
    let cal = day();
    let s = Simulator::new(&cal, &MarketConfig::default(), 1).finish();
    // Opening level and path: within 0.5% of the real minute price.
    for m in [5usize, 100, 200, 385] {
        let err = (s.mid[m] / cal.minute_price[m] - 1.0).abs();
        assert!(
            err < 0.005,
            "minute {m}: sim {} real {}",
            s.mid[m],
            cal.minute_price[m]
        );
    }
    // Daily volume within a factor of two of the calibration target.
    let (sim, real): (f64, f64) = (s.volume.iter().sum(), cal.minute_volume.iter().sum());
    assert!(
        sim > 0.5 * real && sim < 2.0 * real,
        "volume {sim} vs {real}"
    );
}

#[test]
fn a_large_buy_moves_the_price_up_and_the_move_decays() {
    let cal = day();
    // Orders of 100 shares, as calibration gives a stock of this volume.
    let cfg = MarketConfig {
        order_size: 100.0,
        ..MarketConfig::default()
    };
    let t = 60 * 60_000_000;
    let (mut now, mut later) = (0.0, 0.0);
    let seeds = 12;
    for seed in 0..seeds {
        let mut quiet = Simulator::new(&cal, &cfg, seed);
        let mut pushed = Simulator::new(&cal, &cfg, seed);
        quiet.run_until(t);
        pushed.run_until(t);
        let before = pushed.mid_price().unwrap();
        let r = pushed.execute_market(EXECUTION_OWNER, Side::Bid, 5_000);
        assert!(r.filled > 0);
        now += (pushed.mid_price().unwrap() / before - 1.0) * 1e4;
        quiet.run_until(t + 20_000_000);
        pushed.run_until(t + 20_000_000);
        later += (pushed.mid_price().unwrap() / quiet.mid_price().unwrap() - 1.0) * 1e4;
    }
    let (now, later) = (now / seeds as f64, later / seeds as f64);
    assert!(now > 0.5, "immediate impact {now:.2} bps");
    assert!(later < now, "impact decays: {now:.2} -> {later:.2} bps");
}

#[test]
fn recording_a_day_keeps_its_tape_and_books_without_changing_it() {
    let (cal, cfg) = (day(), MarketConfig::default());
    let (stats, rec) = Simulator::recording(&cal, &cfg, 5, 5).finish_recorded();
    assert_eq!(stats, Simulator::new(&cal, &cfg, 5).finish());
    // One snapshot per minute, and the tape adds up to the day's volume.
    assert_eq!(rec.snapshots.len(), 390);
    let taped: u64 = rec.trades.iter().map(|t| t.qty).sum();
    assert_eq!(taped as f64, stats.volume.iter().sum::<f64>());
    assert!(rec.trades.windows(2).all(|w| w[0].time_us <= w[1].time_us));
    let book = &rec.snapshots[200];
    assert!(book.bids.len() == 5 && book.asks.len() == 5);
    assert!(book.bids[0].0 < book.asks[0].0, "not crossed");
}

#[test]
fn fitted_noise_rates_bring_every_half_hour_to_the_real_volume() {
    let mut cal = day();
    let cfg = MarketConfig::default();
    cal.noise_scale = fit_noise_volume(&cal, &cfg, 0, FitEffort::Full);
    let seeds = 4;
    let mut sim = [0.0; 13];
    for seed in 10..10 + seeds {
        let d = Simulator::new(&cal, &cfg, seed).finish();
        for (m, v) in d.volume.iter().enumerate() {
            sim[m / 30] += v / seeds as f64;
        }
    }
    for (h, s) in sim.iter().enumerate() {
        let real: f64 = cal.minute_volume[h * 30..(h + 1) * 30].iter().sum();
        assert!(
            (s / real - 1.0).abs() < 0.2,
            "half hour {h}: {s:.0} vs {real:.0}"
        );
    }
}

/// A coarser flow plays the same day in far fewer events: its noise
/// orders are larger and fewer and its makers re-quote less often, yet
/// the day's volume, spread and path stay the calibrated day's. The
/// default coarsening changes nothing, to the bit.
#[test]
fn a_coarser_flow_plays_the_same_day_in_a_fraction_of_the_events() {
    let cal = day();
    let fine_cfg = MarketConfig::default();
    assert_eq!(Coarsening::default().apply(&fine_cfg), fine_cfg);
    let coarse_cfg = Coarsening {
        noise_limit_mult: 8.0,
        mm_interval_mult: 3.0,
        merge_makers: true,
    }
    .apply(&fine_cfg);
    assert_eq!(coarse_cfg.mm_interval_ms, 3 * fine_cfg.mm_interval_ms);
    assert_eq!(coarse_cfg.market_makers, 1);
    assert_eq!(coarse_cfg.mm_depth_share, 2.0 * fine_cfg.mm_depth_share);

    let (mut fine_events, mut coarse_events) = (0, 0);
    let (mut fine_volume, mut coarse_volume) = (0.0, 0.0);
    for seed in 0..3 {
        let mut fine = Simulator::new(&cal, &fine_cfg, seed);
        let mut coarse = Simulator::new(&cal, &coarse_cfg, seed);
        fine.run_until(390 * 60_000_000 - 1);
        coarse.run_until(390 * 60_000_000 - 1);
        fine_events += fine.events();
        coarse_events += coarse.events();
        let (f, c) = (fine.finish(), coarse.finish());
        fine_volume += f.volume.iter().sum::<f64>();
        coarse_volume += c.volume.iter().sum::<f64>();
        for m in [100usize, 385] {
            let off = (c.mid[m] / cal.minute_price[m] - 1.0).abs();
            assert!(
                off < 0.005,
                "minute {m}: coarse mid {} off the day",
                c.mid[m]
            );
        }
    }
    assert!(
        coarse_events * 3 < fine_events,
        "{coarse_events} events coarse against {fine_events} fine"
    );
    assert!(
        (coarse_volume / fine_volume - 1.0).abs() < 0.2,
        "volume {coarse_volume:.0} coarse against {fine_volume:.0} fine"
    );
}

#[test]
fn a_coarsening_outside_its_range_is_named() {
    let too_coarse = Coarsening {
        noise_limit_mult: 100.0,
        ..Coarsening::default()
    };
    let why = too_coarse.check().unwrap_err();
    assert!(why.contains("noise_limit_mult = 100"), "{why}");
    let finer = Coarsening {
        mm_interval_mult: 0.5,
        ..Coarsening::default()
    };
    assert!(finer.check().unwrap_err().contains("mm_interval_mult"));
}
