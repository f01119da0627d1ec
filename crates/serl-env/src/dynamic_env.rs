//! The dynamic environment: the agent's child orders go into a multi-agent
//! market calibrated to the order's symbol and session, so they move the
//! price.
//!
//! The market is built from the session's real minute prices (the value
//! traders' fundamental), real minute volumes (noise arrival rates and
//! market-maker depth) and estimated spread. Each step's quantity is sent as
//! market orders at the start of each of the step's minutes, evenly, capped
//! at `participation_cap` of the minute's real volume. The benchmark is the
//! TWAP of the simulated mid over the window.

use serl_lob::Side;
use serl_market::{Calibration, MarketConfig, Simulator, EXECUTION_OWNER};

use crate::config::EnvConfig;
use crate::obs::{write_obs, BookPicture, LEVELS, OBS_DIM, RETURN_LAGS};
use crate::order::{OrderSide, ParentOrder};
use crate::reward::{Reward, StepInfo};
use crate::static_env::{Decision, ExecutionOutcome, Strategy};
use crate::view::SessionView;

const US_PER_MIN: u64 = 60_000_000;

/// The simulator settings for one session: the configured population with
/// the order size scaled to the stock's volume, so that a day is about
/// 100-200 thousand events whatever the stock.
pub fn calibrate(view: &SessionView, base: &MarketConfig) -> (Calibration, MarketConfig) {
    let minutes = 390usize;
    let open = view.open_minute;
    let mut price = Vec::with_capacity(minutes);
    let mut volume = Vec::with_capacity(minutes);
    let mut last = view.price.first().copied().unwrap_or(1.0);
    let mut j = 0;
    for m in 0..minutes as u16 {
        let minute = open + m;
        while j < view.minute.len() && view.minute[j] < minute {
            j += 1;
        }
        if j < view.minute.len() && view.minute[j] == minute {
            last = view.price[j];
            volume.push(view.volume[j]);
        } else {
            volume.push(0.0);
        }
        price.push(last);
    }
    let daily: f64 = volume.iter().sum();
    let mut cfg = base.clone();
    cfg.order_size = (daily / 80_000.0).max(base.order_size);
    (
        Calibration {
            tick: 0.01,
            minute_price: price,
            minute_volume: volume,
            spread_bps: view.spread_bps,
        },
        cfg,
    )
}

/// Runs one episode of `strategy` in the dynamic market.
#[allow(clippy::too_many_arguments)]
pub fn run_dynamic(
    strategy: &mut dyn Strategy,
    view: &SessionView,
    order: &ParentOrder,
    cfg: &EnvConfig,
    market: &MarketConfig,
    reward: &dyn Reward,
    seed: u64,
    record_path: bool,
) -> ExecutionOutcome {
    strategy.reset(view, order, cfg);
    let (cal, mcfg) = calibrate(view, market);
    let mut sim = Simulator::new(&cal, &mcfg, seed);
    let open = view.open_minute;
    let k = cfg.decision_minutes.max(1);
    let span = order.end_minute - order.start_minute;
    let steps = span.div_ceil(k) as usize;
    let side = match order.side {
        OrderSide::Buy => Side::Bid,
        OrderSide::Sell => Side::Ask,
    };
    let sign = order.side.sign();
    let minute_us = |m: u16| (m.saturating_sub(open)) as u64 * US_PER_MIN;
    sim.run_until(minute_us(order.start_minute));
    let arrival = sim.mid_price().unwrap_or(cal.minute_price[0]);
    let (mut remaining, mut filled, mut notional, mut total) = (order.qty, 0.0, 0.0, 0.0);
    let mut path = Vec::new();
    let mut obs = [0f32; OBS_DIM];
    let mut last_step_volume = 0.0;
    let mut mids: Vec<f64> = Vec::with_capacity(span as usize);
    for step in 0..steps {
        let from = order.start_minute + step as u16 * k;
        let to = (from + k).min(order.end_minute);
        observe(
            &sim,
            view,
            from,
            open,
            step,
            steps,
            remaining / order.qty,
            &mut obs,
        );
        let d = Decision {
            obs: &obs,
            step,
            steps,
            qty: order.qty,
            remaining,
            from_minute: from,
            to_minute: to,
            last_step_volume,
            view,
            order,
        };
        let want = (cfg.fraction(strategy.act(&d)) * order.qty).min(remaining);
        let (mut got, mut cost, mut vol, mut bench) = (0.0, 0.0, 0.0, 0.0);
        let n = (to - from) as f64;
        for (i, m) in (from..to).enumerate() {
            sim.run_until(minute_us(m));
            let mi = (m - open) as usize;
            let cap = cfg.participation_cap * cal.minute_volume.get(mi).copied().unwrap_or(0.0);
            let q = ((want - got) / (n - i as f64)).min(cap).floor();
            if q >= 1.0 {
                let r = sim.execute_market(EXECUTION_OWNER, side, q as u64);
                got += r.filled as f64;
                cost += r.notional as f64 * sim.tick();
            }
            let before = sim.stats().volume.get(mi).copied().unwrap_or(0.0);
            sim.run_until(minute_us(m + 1) - 1);
            vol += sim
                .stats()
                .volume
                .get(mi)
                .copied()
                .unwrap_or(0.0)
                .max(before);
            let mid = sim
                .mid_price()
                .unwrap_or(cal.minute_price[mi.min(cal.minute_price.len() - 1)]);
            mids.push(mid);
            bench += mid;
        }
        let done = step + 1 == steps;
        if done && cfg.terminal == crate::Terminal::ForceLiquidate && remaining - got >= 1.0 {
            let r = sim.execute_market(EXECUTION_OWNER, side, (remaining - got).round() as u64);
            got += r.filled as f64;
            cost += r.notional as f64 * sim.tick();
        }
        remaining = (remaining - got).max(0.0);
        filled += got;
        notional += cost;
        last_step_volume = vol;
        let step_bench = if n > 0.0 { bench / n } else { arrival };
        let fill_price = if got > 0.0 { cost / got } else { 0.0 };
        let fill_frac = got / order.qty;
        let info = StepInfo {
            fill_frac,
            fill_price,
            step_bench,
            step_pa: if got > 0.0 {
                -sign * (fill_price / step_bench - 1.0) * 1e4 * fill_frac
            } else {
                0.0
            },
            spread_bps: view.spread_bps,
            time_left: 1.0 - (step + 1) as f64 / steps as f64,
            inventory_left: remaining / order.qty,
            volatility_bps: view.minute_vol_bps,
            volume: vol / (view.avg_minute_volume.max(1.0) * n.max(1.0)),
            steps,
            done,
        };
        total += reward.reward(&info);
        if record_path {
            path.push(info.inventory_left as f32);
        }
    }
    let bench_price = if mids.is_empty() {
        arrival
    } else {
        mids.iter().sum::<f64>() / mids.len() as f64
    };
    ExecutionOutcome {
        order_id: order.id,
        filled,
        notional,
        bench_price,
        arrival_price: arrival,
        reward: total,
        steps,
        inventory_path: path,
    }
}

#[allow(clippy::too_many_arguments)]
fn observe(
    sim: &Simulator,
    view: &SessionView,
    from: u16,
    open: u16,
    step: usize,
    steps: usize,
    inv: f64,
    out: &mut [f32],
) {
    let tick = sim.tick();
    let mid = sim
        .mid_price()
        .unwrap_or(view.price.first().copied().unwrap_or(1.0));
    let mut b = BookPicture::default();
    for (k, l) in sim.book.levels(Side::Bid).take(LEVELS).enumerate() {
        b.bid_bps[k] = (l.price as f64 * tick / mid - 1.0) * 1e4;
        b.bid_size[k] = l.qty as f64;
    }
    for (k, l) in sim.book.levels(Side::Ask).take(LEVELS).enumerate() {
        b.ask_bps[k] = (l.price as f64 * tick / mid - 1.0) * 1e4;
        b.ask_size[k] = l.qty as f64;
    }
    let stats = sim.stats();
    let m = (from - open) as usize;
    let mut rets = [0.0; RETURN_LAGS];
    for (k, r) in rets.iter_mut().enumerate() {
        if m >= k + 2 {
            let (a, c) = (stats.mid[m - k - 2], stats.mid[m - k - 1]);
            if a > 0.0 && c > 0.0 {
                *r = (c / a).ln() * 1e4;
            }
        }
    }
    let spread = sim
        .book
        .spread()
        .map_or(view.spread_bps, |s| s as f64 * tick / mid * 1e4);
    let last_volume = if m >= 1 { stats.volume[m - 1] } else { 0.0 };
    write_obs(
        out,
        1.0 - step as f64 / steps.max(1) as f64,
        inv,
        &b,
        &rets,
        last_volume,
        spread,
        view.avg_minute_volume,
    );
}
