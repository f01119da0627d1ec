//! The calibration recovers the rates it was simulated with; the book
//! never crosses; a seed gives one day.

use super::*;

/// A one-tick stock's flow: limit orders join short queues faster, cancels
/// grow with the queue, market orders are rarer against a long best queue.
fn known() -> QueueReactive {
    let k = 3;
    let by_bin = |f: &dyn Fn(f64) -> f64| -> Vec<f64> {
        (0..=MAX_BIN)
            .map(|b| if b == 0 { 0.0 } else { f(b as f64) })
            .collect()
    };
    let mut inside = vec![0.0; MAX_SPREAD + 1];
    for (s, r) in inside.iter_mut().enumerate().skip(2) {
        *r = 0.3 * s as f64;
    }
    QueueReactive {
        format: FORMAT,
        source: "known".into(),
        tick: 100,
        seconds: 0.0,
        unit: vec![100.0; k],
        limit: (0..k)
            .map(|i| {
                let mut r = by_bin(&|b| (1.2 - 0.05 * b).max(0.2) / (1.0 + i as f64 * 0.3));
                r[0] = 0.8;
                r
            })
            .collect(),
        cancel: (0..k).map(|_| by_bin(&|b| 0.12 * b)).collect(),
        market: by_bin(&|b| 0.6 / (1.0 + 0.1 * b)),
        inside,
        inside_at: vec![0.5],
        behind: 0.2,
        behind_depth: vec![1, 2, 3, 4],
        gap: vec![1; k],
        depth: vec![400; k],
        spread: 1,
        volume_per_second: 1.0,
        limit_sizes: vec![100],
        market_sizes: vec![100],
    }
}

#[test]
fn calibration_recovers_the_rates_a_day_was_simulated_with() {
    let truth = known();
    truth.check().unwrap();
    let rec = truth.simulate((34_200.0, 6.0 * 3600.0), &[], 10_000.0, 3, 7);
    let (messages, rows) = rec.into_rows();
    let fitted = QueueReactive::fit(&messages, &rows, 100, "simulated").unwrap();
    assert_eq!(fitted.levels(), 3);
    // Every event is 100 shares but the opening book's orders.
    for u in &fitted.unit {
        assert!((u - 100.0).abs() < 1.0, "unit {u}");
    }
    // Time each bin was visited, to judge a rate by its Poisson error.
    let tested = compare(&truth, &fitted, &messages, &rows);
    assert!(tested >= 30, "only {tested} well-visited bins to compare");
}

/// Compares every rate of a bin visited at least 300 s (both sides):
/// within 5 standard errors plus 5%. Returns how many were compared.
fn compare(
    truth: &QueueReactive,
    fitted: &QueueReactive,
    m: &[serl_lob::MessageRow],
    rows: &serl_lob::BookRows,
) -> usize {
    let mut time = vec![[0.0; MAX_BIN + 1]; truth.levels()];
    for j in 1..m.len() {
        let before = rows.row(j - 1);
        for (i, t) in time.iter_mut().enumerate() {
            for q in [before[4 * i + 1], before[4 * i + 3]] {
                t[bin(q.max(0) as u64, 100.0)] += m[j].time - m[j - 1].time;
            }
        }
    }
    let mut tested = 0;
    let mut check = |what: &str, i: usize, b: usize, want: f64, got: f64| {
        let t = time[i][b];
        if t < 300.0 || b == 0 {
            return;
        }
        let tolerance = 5.0 * (want / t).sqrt() + 0.05 * want;
        assert!(
            (got - want).abs() <= tolerance,
            "{what} at level {i}, bin {b} ({t:.0} s): fitted {got:.4}, simulated with {want:.4}"
        );
        tested += 1;
    };
    for i in 0..truth.levels() {
        for b in 0..=MAX_BIN {
            check("limit", i, b, truth.limit[i][b], fitted.limit[i][b]);
            check("cancel", i, b, truth.cancel[i][b], fitted.cancel[i][b]);
        }
    }
    for b in 0..=MAX_BIN {
        check("market", 0, b, truth.market[b], fitted.market[b]);
    }
    tested
}

#[test]
fn the_book_never_crosses_and_one_seed_gives_one_day() {
    let model = known();
    let day = |seed| {
        model
            .simulate((34_200.0, 1800.0), &[], 10_000.0, 3, seed)
            .into_rows()
    };
    let (messages, rows) = day(3);
    assert!(messages.len() > 1_000, "{} messages", messages.len());
    for i in 0..rows.len() {
        let r = rows.row(i);
        if r[1] > 0 && r[3] > 0 {
            assert!(r[0] > r[2], "row {i} crosses: ask {} bid {}", r[0], r[2]);
        }
    }
    let again = day(3);
    assert_eq!(messages, again.0);
    assert_ne!(messages, day(4).0);
}

#[test]
fn a_model_file_with_broken_tables_is_refused_by_name() {
    let mut m = known();
    m.cancel[1].pop();
    assert!(m.check().unwrap_err().contains("`cancel`"));
    let mut m = known();
    m.market[3] = -1.0;
    assert!(m.check().unwrap_err().contains("negative"));
    let mut m = known();
    m.format = 9;
    assert!(m.check().unwrap_err().contains("format 9"));
}

#[test]
fn an_agents_resting_order_in_the_queue_reactive_market_keeps_price_time_priority() {
    use crate::{Calibration, MarketConfig, Simulator, EXECUTION_OWNER};
    let cal = Calibration {
        tick: 0.01,
        minute_price: vec![100.0; 60],
        minute_volume: vec![3_000.0; 60],
        spread_bps: 1.0,
        noise_scale: Vec::new(),
    };
    let cfg = MarketConfig {
        queue_reactive: Some(Box::new(known())),
        ..MarketConfig::default()
    };
    let mut sim = Simulator::new(&cal, &cfg, 5);
    assert_eq!(sim.agents(), 1, "the flow replaces every agent");
    sim.run_until(60_000_000);
    let bid = sim
        .book
        .best_bid()
        .expect("a two-sided book after a minute");
    let ahead_at_post = sim.book.qty_at(serl_lob::Side::Bid, bid);
    let (id, report) = sim
        .post_limit(EXECUTION_OWNER, serl_lob::Side::Bid, bid, 100)
        .expect("posted");
    assert_eq!(report.filled, 0, "a bid at the best bid rests");
    let first = sim.book.queue_position(id).unwrap();
    assert_eq!(
        first.qty_ahead, ahead_at_post,
        "it joins the back of its queue"
    );
    // Until it fills, the shares ahead of it only shrink (cancels and
    // fills of earlier orders), and it fills only at the front.
    let mut last = first.qty_ahead;
    let mut t = 60_000_000;
    let filled = loop {
        t += 50_000;
        sim.run_until(t);
        match sim.book.queue_position(id) {
            Some(p) => {
                assert!(
                    p.qty_ahead <= last,
                    "moved back: {} after {last}",
                    p.qty_ahead
                );
                last = p.qty_ahead;
                let left = sim.book.order(id).unwrap().qty;
                assert!(
                    left == 100 || p.qty_ahead == 0,
                    "filled from behind the front"
                );
            }
            None => break true,
        }
        if t > 55 * 60_000_000 {
            break false;
        }
    };
    assert!(
        filled,
        "a bid at the touch of a two-sided flow fills within the hour"
    );
}

/// A queue's bin is the ceiling of its size in units, capped, as
/// `f64::ceil` gives it: on whole multiples of the unit, just past them,
/// and on units that are not whole numbers.
#[test]
fn a_bin_is_the_ceiling_of_the_queue_in_units() {
    for unit in [1.0, 3.0, 100.0, 137.5, 0.7, 1e-3] {
        for qty in (0..5_000u64).chain([u64::MAX / 2]) {
            let want = if qty == 0 {
                0
            } else {
                ((qty as f64 / unit).ceil() as usize).clamp(1, MAX_BIN)
            };
            assert_eq!(bin(qty, unit), want, "{qty} shares in units of {unit}");
        }
    }
}

/// A buffer kept from event to event (a side the book did not change is
/// not read again) gives the very rates a fresh buffer gives, through
/// rests, partial and whole fills, cancels and reductions on either side.
#[test]
fn a_kept_buffer_gives_the_rates_a_fresh_one_gives() {
    use rand::{Rng, SeedableRng};
    use serl_lob::{NewOrder, OrderKind};
    let model = known();
    let mut book = OrderBook::default();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let mut kept = QrRates::default();
    let mut sink: Vec<serl_lob::Event> = Vec::new();
    let mut ids = Vec::new();
    for id in 1..=3_000u64 {
        let side = if rng.random::<bool>() {
            Side::Bid
        } else {
            Side::Ask
        };
        match rng.random_range(0..10) {
            0..=5 => {
                let offset = rng.random_range(0..6);
                let price = if side == Side::Bid {
                    100 - offset
                } else {
                    101 + offset
                };
                let kind = OrderKind::Limit { price };
                let qty = rng.random_range(1..400);
                let order = NewOrder {
                    id,
                    owner: 1,
                    side,
                    kind,
                    qty,
                };
                let _ = book.submit(order, &mut sink);
                ids.push(id);
            }
            6 => {
                let qty = rng.random_range(1..300);
                let order = NewOrder {
                    id,
                    owner: 2,
                    side,
                    kind: OrderKind::Market,
                    qty,
                };
                let _ = book.submit(order, &mut sink);
            }
            7 if !ids.is_empty() => {
                let at = rng.random_range(0..ids.len());
                let _ = book.reduce(ids[at], 1, &mut sink);
            }
            _ if !ids.is_empty() => {
                let gone = ids.swap_remove(rng.random_range(0..ids.len()));
                let _ = book.cancel(gone, &mut sink);
            }
            _ => {}
        }
        let fresh = model.rates(&book, 1.0, &mut QrRates::default());
        let total = model.rates(&book, 1.0, &mut kept);
        assert_eq!(total.to_bits(), fresh.to_bits(), "after order {id}");
    }
}
