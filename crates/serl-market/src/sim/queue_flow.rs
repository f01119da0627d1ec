//! The queue-reactive flow played inside the simulator, in place of the
//! agents: one clock carries it (agent 0), its events go through the same
//! book, statistics and recordings as every agent's order, and the
//! execution agents meet it there with the engine's price-time priority.

use serl_lob::{OrderKind, Side};

use super::{Simulator, US_PER_MIN};
use crate::queue_reactive::{draw_resting, QrEvent, QrRates, QueueReactive};

/// What a simulated day says to the flow.
pub(super) struct QrDay<'a> {
    /// Each minute's volume over the day's mean minute.
    pub(super) activity: &'a [f64],
    /// Shares traded a second, on average.
    pub(super) volume: f64,
    /// The day's spread, ticks.
    pub(super) spread: f64,
}

/// The flow's state in a simulator.
pub(super) struct QrRun {
    pub(super) model: Box<QueueReactive>,
    rates: QrRates,
    /// The rates' scale per minute: the minute's activity, the day's
    /// volume over the model's, and the fitted volume correction.
    scale: Vec<f64>,
    deepest: usize,
    /// The book's last two-sided mid, ticks: the flow's price is the
    /// book's own, so where a side is empty for a moment, this (not the
    /// fundamental, which the flow never reads) is its price.
    pub(super) last_mid: f64,
}

impl QrRun {
    /// The flow of `model` on a day whose minutes have `day.activity`
    /// (each minute's volume over the day's mean minute), `day.volume` shares
    /// a second on average, a spread of `day.spread` ticks, and the fitted
    /// volume correction `fitted` per minute (empty: 1). A day of another
    /// stock keeps the model's events and scales their sizes by the day's
    /// volume over the model's, as the agents' order size follows the
    /// day's volume (a busy stock is not simulated as a hundred times more
    /// events), and its distances in ticks by the day's spread over the
    /// model's (a $1,500 stock quotes wider in ticks than a $200 one, SPY
    /// a tick wide).
    pub(super) fn new(mut model: Box<QueueReactive>, day: QrDay<'_>, fitted: &[f64]) -> QrRun {
        let ratio = day.volume / model.volume_per_second.max(1e-12);
        if (ratio - 1.0).abs() > 0.05 {
            model.scale_sizes(ratio);
        }
        model.scale_prices(day.spread / model.spread.max(1) as f64);
        let activity = day.activity;
        let scale = activity
            .iter()
            .enumerate()
            .map(|(m, a)| a * fitted.get(m).copied().unwrap_or(1.0))
            .collect();
        QrRun {
            deepest: model.deepest(),
            model,
            rates: QrRates::default(),
            scale,
            last_mid: 0.0,
        }
    }
}

impl Simulator {
    /// The flow's next wake-up after `now`: an exponential wait at the
    /// book's rates now, or the minute's end to draw again at the next
    /// minute's scale (the flow is memoryless, so this changes nothing
    /// but the scale).
    pub(super) fn queue_reactive_wake(&mut self, a: u32, now: u64) -> u64 {
        let m = self.minute_at(now);
        let Some(run) = self.queue_reactive.as_mut() else {
            return u64::MAX;
        };
        let scale = run.scale.get(m).copied().unwrap_or(1.0);
        let Some(wait) = run
            .model
            .wait(&self.book, scale, &mut run.rates, &mut self.rng)
        else {
            return (m as u64 + 1) * US_PER_MIN;
        };
        let end = (m as u64 + 1) * US_PER_MIN;
        let t = now as f64 + wait * 1e6;
        let redraw = t >= end as f64;
        self.agents[a as usize].redraw = redraw;
        if redraw {
            end
        } else {
            (t as u64).max(now + 1)
        }
    }

    /// One event of the flow, drawn in the book as it is now.
    pub(super) fn wake_queue_reactive(&mut self, a: u32) {
        if self.agents[a as usize].redraw {
            return;
        }
        let Some(run) = self.queue_reactive.as_mut() else {
            return;
        };
        if let Some(mid) = self.book.mid() {
            run.last_mid = mid;
        }
        let event = run
            .model
            .pick(&self.book, run.last_mid, &run.rates, &mut self.rng);
        let deepest = run.deepest;
        match event {
            QrEvent::Limit { side, price, qty } => {
                self.place(a, side, OrderKind::Limit { price }, qty);
                self.trim(a, side, deepest);
            }
            QrEvent::Market { side, qty } => {
                self.place(a, side.opposite(), OrderKind::Market, qty);
            }
            QrEvent::Cancel { side, price } => {
                // One of the flow's own orders there, each as likely.
                let own = |o: &serl_lob::RestingOrder| o.owner == a;
                if let Some(id) = draw_resting(&self.book, (side, price), own, &mut self.rng) {
                    self.cancel(id);
                }
            }
        }
    }

    /// Cancels the flow's orders on the levels behind the `deepest`-th.
    fn trim(&mut self, a: u32, side: Side, deepest: usize) {
        if self.book.level_count(side) <= deepest {
            return;
        }
        let deep: Vec<_> = self
            .book
            .levels(side)
            .skip(deepest)
            .map(|l| l.price)
            .collect();
        for price in deep {
            for o in self.book.queue(side, price) {
                if o.owner == a {
                    self.cancel(o.id);
                }
            }
        }
    }

    /// The flow's opening book around the day's first price.
    pub(super) fn open_queue_reactive(&mut self, a: u32) {
        let Some(run) = self.queue_reactive.as_ref() else {
            return;
        };
        let mid = self.fundamental[0];
        let book = run.model.opening_book(mid);
        if let Some(run) = self.queue_reactive.as_mut() {
            run.last_mid = mid;
        }
        for (side, price, qty) in book {
            self.place(a, side, OrderKind::Limit { price }, qty);
        }
    }
}
