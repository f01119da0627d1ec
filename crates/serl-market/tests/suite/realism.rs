//! The realism scores and the two simulators' LOBSTER days.
//!
//! Every day here, real or simulated, goes through the same path: a book's
//! events into a `LobsterRecorder`, the rows into `DayFeatures`, and the
//! features into `realism_score`.

use serl_lob::{
    message_stream, replay, BookRows, LobsterEvent, LobsterInput, LobsterRecorder, MessageRow,
    OrderBook, ReplayOptions,
};
use serl_market::{
    forecast_calibration, lobster_calibration, lobster_calibration_window, realism_score,
    Calibration, DayFeatures, MarketConfig, ParametricFlow, Simulator, StatKind, STATISTICS,
};

/// A day of the engine's synthetic stream as a level-`levels` LOBSTER day,
/// its messages spread evenly over the session.
fn synthetic_day(levels: usize, seed: u64) -> (Vec<MessageRow>, BookRows) {
    let mut book = OrderBook::default();
    let mut rec = LobsterRecorder::new(levels, 100);
    let stream = message_stream(60_000, seed);
    for (i, m) in stream.iter().enumerate() {
        rec.at(34_200.0 + i as f64 * 23_400.0 / stream.len() as f64);
        let _ = book.apply(m, &mut rec);
    }
    rec.into_rows()
}

/// Replays a recorded day through the engine's LOBSTER checker.
fn replays_exactly(rec: &LobsterRecorder) -> usize {
    let (mut messages, mut orderbook) = (Vec::new(), Vec::new());
    rec.write(&mut messages, &mut orderbook).unwrap();
    let input = LobsterInput {
        message_name: "SIM_message_5.csv".into(),
        orderbook_name: "SIM_orderbook_5.csv".into(),
        messages,
        orderbook,
    };
    let report = replay(&input, &ReplayOptions::default()).unwrap();
    assert_eq!(
        report.mismatched_rows, 0,
        "the written day contradicts itself"
    );
    report.messages
}

#[test]
fn a_day_is_at_no_distance_from_itself() {
    let (cal, market) = hour_of_trading();
    let (_, rec) = Simulator::recording_lobster(&cal, &market, 1, 5).finish_lobster();
    let (messages, rows) = rec.into_rows();
    let day = DayFeatures::measure(&messages, &rows, 100);
    let scores = realism_score(
        std::slice::from_ref(&day),
        &[("same".into(), vec![day.clone()])],
        7,
    );
    let names: Vec<&str> = scores.iter().map(|r| r.statistic).collect();
    let missing: Vec<&str> = STATISTICS
        .iter()
        .map(|s| s.name)
        .filter(|n| !names.contains(n))
        .collect();
    assert_eq!(missing, Vec::<&str>::new(), "every statistic has samples");
    for row in &scores {
        let s = &row.scores[0];
        assert_eq!(s.w1.value, 0.0, "{}", row.statistic);
        assert_eq!(s.l1.map_or(0.0, |i| i.value), 0.0, "{}", row.statistic);
        assert_eq!(s.l1.is_none(), row.kind == StatKind::Response);
    }
}

#[test]
fn a_fitted_poisson_flow_recovers_its_days_rates_and_writes_a_valid_day() {
    let (messages, rows) = synthetic_day(5, 2);
    let real = DayFeatures::measure(&messages, &rows, 100);
    let flow = ParametricFlow::fit(&real, &messages, &rows, 100).unwrap();
    let rec = flow.simulate(3);
    let kept = replays_exactly(&rec);
    assert!(kept > 10_000, "{kept} messages");
    let (m, r) = rec.into_rows();
    let sim = DayFeatures::measure(&m, &r, 100);
    // Market orders per day, within 15%.
    let ratio = sim.market_size.len() as f64 / real.market_size.len() as f64;
    assert!(
        (0.85..1.15).contains(&ratio),
        "market orders: {ratio:.2} of the real day's"
    );
    let scores = realism_score(
        std::slice::from_ref(&real),
        &[("poisson".into(), vec![sim])],
        1,
    );
    let w1 = |name: &str| scores.iter().find(|r| r.statistic == name).unwrap().scores[0].w1;
    // Sizes are drawn from the day's own: nearly the same distribution.
    assert!(
        w1("limit order size").value < 0.05,
        "{:?}",
        w1("limit order size")
    );
    assert!(
        w1("market order size").value < 0.05,
        "{:?}",
        w1("market order size")
    );
}

fn hour_of_trading() -> (Calibration, MarketConfig) {
    let minutes = 60;
    let cal = Calibration {
        tick: 0.01,
        minute_price: (0..minutes)
            .map(|m| 50.0 + 0.05 * (m as f64 / 9.0).sin())
            .collect(),
        minute_volume: vec![3_000.0; minutes],
        spread_bps: 4.0,
        noise_scale: Vec::new(),
    };
    let market = MarketConfig {
        noise_agents: 20,
        value_agents: 5,
        momentum_agents: 2,
        informed_agents: 2,
        ..MarketConfig::default()
    };
    (cal, market)
}

#[test]
fn the_agent_based_day_is_a_valid_lobster_day_and_calibrates_back() {
    let (cal, market) = hour_of_trading();
    let (stats, rec) = Simulator::recording_lobster(&cal, &market, 4, 5).finish_lobster();
    let kept = replays_exactly(&rec);
    let (messages, rows) = rec.into_rows();
    assert_eq!(kept, messages.len());
    assert!(messages.len() > 1_000, "{} messages", messages.len());
    assert!(messages.windows(2).all(|w| w[0].time <= w[1].time));
    assert!(messages
        .iter()
        .all(|m| (34_200.0..34_200.0 + 3_600.0).contains(&m.time)));
    // Read back as a calibration, the day has the simulated volume (every
    // trade executes a visible order at level 1) and about its mids.
    let back = lobster_calibration(&messages, &rows, 100);
    let executed: f64 = messages
        .iter()
        .filter(|m| m.kind == LobsterEvent::Execute)
        .map(|m| m.size as f64)
        .sum();
    let simulated: f64 = stats.volume.iter().sum();
    assert_eq!(back.minute_volume.iter().sum::<f64>(), executed);
    assert_eq!(executed, simulated);
    for m in [10, 30, 59] {
        assert!(
            (back.minute_price[m] - stats.mid[m]).abs() < 0.05,
            "minute {m}"
        );
    }
}

/// An afternoon simulated on its own keeps LOBSTER's clock: its messages
/// start at 12:45 and read back, through the afternoon's window, as its
/// volume.
#[test]
fn part_of_a_session_is_simulated_on_the_sessions_clock() {
    let (cal, market) = hour_of_trading();
    let (stats, rec) =
        Simulator::recording_lobster_from(&cal, &market, 4, 5, 45_900.0).finish_lobster();
    let (messages, rows) = rec.into_rows();
    assert!(messages
        .iter()
        .all(|m| (45_900.0..45_900.0 + 3_600.0).contains(&m.time)));
    let back = lobster_calibration_window(&messages, &rows, 100, 195..255);
    assert_eq!(back.minute_volume.len(), 60);
    assert_eq!(
        back.minute_volume.iter().sum::<f64>(),
        stats.volume.iter().sum::<f64>()
    );
    // The whole session's calibration puts the same volume in minutes
    // 195 to 254 and none before.
    let whole = lobster_calibration(&messages, &rows, 100);
    assert_eq!(whole.minute_volume[..195].iter().sum::<f64>(), 0.0);
}

/// The held-out part's calibration is drawn from the seen part alone:
/// driftless from its last price at its minute volatility, its mean
/// volume, its spread; the same for the same seed.
#[test]
fn a_forecast_calibration_follows_the_seen_part() {
    let mut seen = hour_of_trading().0;
    let mut p = 50.0f64;
    seen.minute_price = (0..600)
        .map(|k| {
            p *= (0.002f64 * if (k * 7919) % 13 < 6 { 1.0 } else { -1.0 }).exp();
            p
        })
        .collect();
    seen.minute_volume = (0..600).map(|k| (k % 10) as f64 * 100.0).collect();
    let f = forecast_calibration(&seen, 4_000, 3);
    assert_eq!(f.minute_price.len(), 4_000);
    assert_eq!(f.minute_price[0], *seen.minute_price.last().unwrap());
    assert!(f.minute_volume.iter().all(|&v| (v - 450.0).abs() < 1e-9));
    assert_eq!(f.spread_bps, seen.spread_bps);
    assert!(f.noise_scale.is_empty());
    let sigma = |p: &[f64]| {
        let r: Vec<f64> = p.windows(2).map(|w| (w[1] / w[0]).ln()).collect();
        let m = r.iter().sum::<f64>() / r.len() as f64;
        (r.iter().map(|x| (x - m).powi(2)).sum::<f64>() / r.len() as f64).sqrt()
    };
    let (s, t) = (sigma(&seen.minute_price), sigma(&f.minute_price));
    assert!(
        (t / s - 1.0).abs() < 0.1,
        "forecast σ {t} against seen σ {s}"
    );
    assert_eq!(f, forecast_calibration(&seen, 4_000, 3));
    assert_ne!(
        f.minute_price,
        forecast_calibration(&seen, 4_000, 4).minute_price
    );
}

/// With a real day's size quantiles, the traders' orders take those sizes
/// and a market maker's level is several orders: many of the day's new
/// limit orders are of the quantiles' sizes (none without them), and the
/// book holds more orders for its shares.
#[test]
fn traders_draw_a_real_days_sizes_and_makers_quote_levels_as_many_orders() {
    let (cal, market) = hour_of_trading();
    let quantiles: Vec<u64> = (0..64).map(|i| [100, 100, 200, 300][i % 4]).collect();
    let sized = MarketConfig {
        size_quantiles: quantiles.clone(),
        mm_orders_per_level: 4,
        ..market.clone()
    };
    let submissions = |cfg: &MarketConfig| -> Vec<i64> {
        let (_, rec) = Simulator::recording_lobster(&cal, cfg, 4, 5).finish_lobster();
        let (messages, _) = rec.into_rows();
        messages
            .iter()
            .filter(|m| m.kind == LobsterEvent::Submit)
            .map(|m| m.size)
            .collect()
    };
    let (plain, real) = (submissions(&market), submissions(&sized));
    let share = |s: &[i64], f: &dyn Fn(i64) -> bool| {
        s.iter().filter(|&&x| f(x)).count() as f64 / s.len() as f64
    };
    let drawn = |s: &[i64]| share(s, &|x| [100, 200, 300].contains(&x));
    eprintln!(
        "drawn sizes {:.2} / {:.2}, submissions {} / {}",
        drawn(&real),
        drawn(&plain),
        real.len(),
        plain.len()
    );
    // The rest are a level's remainder after its drawn orders, the deep
    // blocks and the larger traders' multiples.
    assert!(
        drawn(&real) > 0.35 && drawn(&plain) < 0.1,
        "{:.0}% of submissions of the drawn sizes ({:.0}% without the quantiles)",
        100.0 * drawn(&real),
        100.0 * drawn(&plain)
    );
    // Half an hour in, the book holds more orders per share resting when
    // a maker's level (here 1,500 shares at the touch, no deep block) is
    // several orders than when it is one.
    let deep_levels = MarketConfig {
        mm_depth_share: 0.5,
        mm_deep_minutes: 0.0,
        ..sized.clone()
    };
    let resting = |cfg: &MarketConfig| {
        let mut sim = Simulator::new(&cal, cfg, 4);
        sim.run_until(30 * 60 * 1_000_000);
        let shares = sim.book.resting_volume(serl_lob::Side::Bid)
            + sim.book.resting_volume(serl_lob::Side::Ask);
        sim.book.len() as f64 / shares as f64
    };
    let one_block = MarketConfig {
        mm_orders_per_level: 1,
        ..deep_levels.clone()
    };
    let (many, one) = (resting(&deep_levels), resting(&one_block));
    assert!(
        many > 1.5 * one,
        "orders per resting share: {many:.5} in levels of several orders, {one:.5} in blocks"
    );
}

/// With a real day's depth profile, the noise traders' limit orders go
/// where the profile says, at tick resolution behind their own side's
/// best price: with every quantile at 2 ticks, many more of the day's new
/// limit orders sit 2 ticks behind than on the default grid (the market
/// makers' quotes are the rest).
#[test]
fn noise_limit_orders_follow_a_fitted_depth_profile() {
    let (cal, market) = hour_of_trading();
    let placed = MarketConfig {
        depth_quantiles: vec![2; 64],
        ..market.clone()
    };
    let at_two = |cfg: &MarketConfig| -> f64 {
        let (_, rec) = Simulator::recording_lobster(&cal, cfg, 4, 5).finish_lobster();
        let (messages, rows) = rec.into_rows();
        let f = DayFeatures::measure(&messages, &rows, 100);
        let d = f.limit_depth_quantiles(100);
        assert_eq!(d.len(), 100);
        d.iter().filter(|&&x| x == 2).count() as f64 / d.len() as f64
    };
    let (fitted, grid) = (at_two(&placed), at_two(&market));
    assert!(
        fitted > grid + 0.15,
        "{fitted:.2} of new limit orders 2 ticks behind, {grid:.2} on the grid"
    );
}

#[test]
fn makers_send_a_requote_one_message_at_a_time_with_a_gap_set() {
    let (cal, market) = hour_of_trading();
    // Bursts: instants at which three or more new orders or cancels go
    // out together (a noise trader's cancel and new order make two; a
    // maker re-quoting its ladder at once, a dozen).
    let bursts = |gap_us: f64| {
        let cfg = MarketConfig {
            mm_message_gap_us: gap_us,
            ..market.clone()
        };
        let (_, rec) = Simulator::recording_lobster(&cal, &cfg, 3, 5).finish_lobster();
        replays_exactly(&rec);
        let sent: Vec<f64> = rec
            .messages()
            .iter()
            .filter(|r| {
                matches!(
                    r.kind,
                    LobsterEvent::Submit | LobsterEvent::Cancel | LobsterEvent::Delete
                )
            })
            .map(|r| r.time)
            .collect();
        let bursts = sent
            .chunk_by(|a, b| a == b)
            .filter(|same| same.len() >= 3)
            .count();
        (bursts, rec.messages().len())
    };
    let (at_once, n_at_once) = bursts(0.0);
    let (spread_out, n_spread) = bursts(1_000.0);
    // All at once, every re-quote is a burst; a millisecond apart on
    // average, only the opening quotes are.
    assert!(at_once > 100, "{at_once} bursts");
    assert!(spread_out <= 2, "{spread_out} bursts");
    // The day still trades about as much.
    let ratio = n_spread as f64 / n_at_once as f64;
    assert!(
        (0.5..2.0).contains(&ratio),
        "{n_spread} against {n_at_once}"
    );
}

#[test]
fn time_to_first_fill_and_imbalance_at_depth_are_measured_as_lob_bench_does() {
    // A level-2 day: two bids and an ask; order 2 (a bid) is partly
    // filled 2 s after it arrived, then again; order 3 never fills.
    let lines = [
        (
            "34200.0,1,1,100,1000100,-1",
            "1000100,100,-9999999999,0,9999999999,0,-9999999999,0",
        ),
        (
            "34201.0,1,2,300,1000000,1",
            "1000100,100,1000000,300,9999999999,0,-9999999999,0",
        ),
        (
            "34201.5,1,3,100,999900,1",
            "1000100,100,1000000,300,9999999999,0,999900,100",
        ),
        (
            "34203.0,4,2,100,1000000,1",
            "1000100,100,1000000,200,9999999999,0,999900,100",
        ),
        (
            "34204.0,4,2,100,1000000,1",
            "1000100,100,1000000,100,9999999999,0,999900,100",
        ),
    ];
    let msgs: String = lines.iter().map(|(m, _)| format!("{m}\n")).collect();
    let book: String = lines.iter().map(|(_, b)| format!("{b}\n")).collect();
    let messages = serl_lob::parse_messages("m.csv", msgs.as_bytes()).unwrap();
    let rows = serl_lob::parse_orderbook("b.csv", book.as_bytes()).unwrap();
    let f = DayFeatures::measure(&messages, &rows, 100);
    // One first fill, 2 s after the submission; a second fill of the
    // same order is not a first fill.
    let fills: Vec<f64> = f.fill_time.iter().map(|s| s.1).collect();
    assert_eq!(fills.len(), 1);
    assert!((fills[0] - 2f64.log10()).abs() < 1e-12, "{fills:?}");
    // Over two levels after the third message: bids 400, asks 100.
    let depth: Vec<f64> = f.imbalance_depth.iter().map(|s| s.1).collect();
    assert!((depth[2] - 0.6).abs() < 1e-12, "{depth:?}");
    // Level 1 alone then: bids 300, asks 100.
    let touch: Vec<f64> = f.imbalance.iter().map(|s| s.1).collect();
    assert!((touch[1] - 0.5).abs() < 1e-12, "{touch:?}");
}
