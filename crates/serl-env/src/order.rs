//! Parent orders and the generator that draws them over a dataset split.

use std::sync::Arc;

use chrono::NaiveDate;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serl_data::{format_minute, DataConfig, Dataset, Session, Split};

use crate::EnvError;

/// Whether a parent order buys or sells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderSide {
    /// Buy `qty` shares: lower prices are better.
    Buy,
    /// Sell `qty` shares: higher prices are better.
    Sell,
}

impl OrderSide {
    /// +1 for a buy, -1 for a sell: the `s` in PA = -s (P_exec/P_bench - 1).
    pub fn sign(self) -> f64 {
        match self {
            OrderSide::Buy => 1.0,
            OrderSide::Sell => -1.0,
        }
    }

    /// The side of the book the order's child orders come from: bids for
    /// a buy, asks for a sell.
    pub(crate) fn book_side(self) -> serl_lob::Side {
        match self {
            OrderSide::Buy => serl_lob::Side::Bid,
            OrderSide::Sell => serl_lob::Side::Ask,
        }
    }

    /// The other side.
    pub fn opposite(self) -> OrderSide {
        match self {
            OrderSide::Buy => OrderSide::Sell,
            OrderSide::Sell => OrderSide::Buy,
        }
    }
}

impl std::fmt::Display for OrderSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OrderSide::Buy => "buy",
            OrderSide::Sell => "sell",
        })
    }
}

/// One parent order: trade `qty` shares of `symbol` on `date` between
/// `start_minute` (inclusive) and `end_minute` (exclusive), in minutes
/// after midnight, exchange local time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParentOrder {
    /// The order's number: its index in the list [`generate_orders`]
    /// drew, so unique within it. Paired comparisons match orders by it,
    /// and the dynamic market's seed derives from it.
    pub id: u64,
    /// The stock traded.
    pub symbol: Arc<str>,
    /// The session traded.
    pub date: NaiveDate,
    /// Buy or sell.
    pub side: OrderSide,
    /// Shares to trade (Q).
    pub qty: f64,
    /// First minute of the window, minutes after midnight (inclusive).
    pub start_minute: u16,
    /// End of the window, minutes after midnight (exclusive).
    pub end_minute: u16,
}

/// How big an order is: `{ shares = 5000 }` or `{ adv_fraction = 0.01 }`
/// in a config.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    /// A fixed number of shares.
    Shares(f64),
    /// A fraction of the average daily volume over the look-back window
    /// before the order's day (the day's own volume when it has no history).
    AdvFraction(f64),
}

/// Read by hand rather than derived: serde's error for `quantity = 0.01`
/// says only "wanted string or table", where this one names the forms.
impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(QuantityVisitor)
    }
}

struct QuantityVisitor;

impl<'de> serde::de::Visitor<'de> for QuantityVisitor {
    type Value = Quantity;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(
            "an order size, `{ adv_fraction = 0.01 }` (a fraction of the average daily volume) or `{ shares = 5000 }`",
        )
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Quantity, A::Error> {
        use serde::de::Error;
        let Some(key) = map.next_key::<String>()? else {
            return Err(A::Error::invalid_length(0, &self));
        };
        let v: f64 = map.next_value()?;
        let q = match key.as_str() {
            "shares" => Quantity::Shares(v),
            "adv_fraction" => Quantity::AdvFraction(v),
            other => {
                return Err(A::Error::unknown_variant(
                    other,
                    &["adv_fraction", "shares"],
                ))
            }
        };
        if map.next_key::<serde::de::IgnoredAny>()?.is_some() {
            return Err(A::Error::invalid_length(2, &self));
        }
        Ok(q)
    }
}

/// Which sides the generator draws orders on: one order per side listed
/// for each of `per_session` draws. With `Both` and `per_session` > 1 each
/// order's side is then flipped with probability ½ (so that ids do not
/// encode the side); `Buy` and `Sell` give only that side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sides {
    /// A buy and a sell per draw (with `per_session` > 1, each order's
    /// side is then flipped on its own with probability ½, so a draw may
    /// hold two of one side).
    Both,
    /// Buys only.
    Buy,
    /// Sells only.
    Sell,
}

/// The order generator's settings (`[orders]` in configs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OrderConfig {
    /// How big each order is.
    pub quantity: Quantity,
    /// Orders per symbol-session (each side counts).
    pub per_session: usize,
    /// Which sides to draw.
    pub sides: Sides,
    /// Window start, `HH:MM` exchange local time.
    pub start: String,
    /// Window end, `HH:MM` exchange local time (exclusive).
    pub end: String,
    /// Seed of the generator: the same seed draws the same orders.
    pub seed: u64,
    /// Only these symbols (all when empty).
    pub symbols: Vec<String>,
    /// Horizons, minutes: each draw becomes one order per horizon, its
    /// window `h` minutes long and starting at a whole minute drawn
    /// uniformly within `start..end` (a horizon at least the window's
    /// length is the whole window). Empty: one order over the whole
    /// window. Reports then give each horizon separately.
    pub horizons: Vec<u16>,
}

impl Default for OrderConfig {
    fn default() -> Self {
        OrderConfig {
            quantity: Quantity::AdvFraction(0.01),
            per_session: 1,
            sides: Sides::Both,
            start: "09:30".into(),
            end: "16:00".into(),
            seed: 7,
            symbols: Vec::new(),
            horizons: Vec::new(),
        }
    }
}

fn minute(s: &str, field: &str) -> Result<u16, EnvError> {
    serl_data::parse_time_minute(s.as_bytes()).ok_or_else(|| EnvError::Config {
        field: field.into(),
        message: format!("`{s}` is not a time of day HH:MM"),
    })
}

/// Checks an order's window against the session hours.
pub fn check_window(start: u16, end: u16, data: &DataConfig) -> Result<(), EnvError> {
    let open = data.session.open_minute().unwrap_or(570);
    let close = data.session.close_minute().unwrap_or(960);
    if start >= end {
        return Err(EnvError::EmptyWindow {
            start: format_minute(start),
            end: format_minute(end),
        });
    }
    if start < open || end > close {
        return Err(EnvError::WindowOutsideSession {
            start: format_minute(start),
            end: format_minute(end),
            open: format_minute(open),
            close: format_minute(close),
        });
    }
    Ok(())
}

/// `n` of `orders` spread evenly over them (every `len / n`-th), so that a
/// capped validation set spans the whole split: all of them when `n` is at
/// least their number, none when `n` is 0.
pub fn spread_orders(orders: &[ParentOrder], n: usize) -> Vec<ParentOrder> {
    let n = n.min(orders.len());
    let step = (orders.len() as f64 / n.max(1) as f64).max(1.0);
    (0..n)
        .map(|i| orders[(i as f64 * step) as usize].clone())
        .collect()
}

/// Average daily volume before `i` in a symbol's sessions.
pub fn adv_before(sessions: &[Session], i: usize, lookback: usize) -> f64 {
    let look = &sessions[i.saturating_sub(lookback)..i];
    if look.is_empty() {
        sessions[i].total_volume()
    } else {
        look.iter().map(Session::total_volume).sum::<f64>() / look.len() as f64
    }
}

/// The windows of one draw: the whole `start..end` without horizons, else
/// one per horizon, placed at random within it.
fn windows(start: u16, end: u16, horizons: &[u16], rng: &mut SmallRng) -> Vec<(u16, u16)> {
    if horizons.is_empty() {
        return vec![(start, end)];
    }
    let len = end - start;
    horizons
        .iter()
        .map(|&h| {
            if h >= len {
                (start, end)
            } else {
                let from = start + rng.random_range(0..=len - h);
                (from, from + h)
            }
        })
        .collect()
}

/// Draws parent orders over the sessions of a split: `per_session` orders
/// per symbol-session for each side asked for, deterministic in the seed.
pub fn generate_orders(
    ds: &Dataset,
    split: Split,
    data: &DataConfig,
    cfg: &OrderConfig,
) -> Result<Vec<ParentOrder>, EnvError> {
    let start = minute(&cfg.start, "orders.start")?;
    let end = minute(&cfg.end, "orders.end")?;
    check_window(start, end, data)?;
    match cfg.quantity {
        Quantity::Shares(q) | Quantity::AdvFraction(q) if !(q > 0.0 && q.is_finite()) => {
            return Err(EnvError::ZeroQuantity(q))
        }
        _ => {}
    }
    let symbols = ds.symbols();
    for s in &cfg.symbols {
        if !symbols.iter().any(|x| x.eq_ignore_ascii_case(s)) {
            let near: Vec<&str> = symbols.iter().take(8).map(|s| &**s).collect();
            return Err(EnvError::UnknownSymbol {
                symbol: s.clone(),
                hint: format!(
                    " (the data has {} symbols: {} ...)",
                    symbols.len(),
                    near.join(", ")
                ),
            });
        }
    }
    if let Some(h) = cfg.horizons.iter().find(|&&h| h == 0) {
        return Err(EnvError::Config {
            field: "orders.horizons".into(),
            message: format!("{h}: a horizon is at least one minute"),
        });
    }
    let splits = ds.splits(&data.splits);
    let mut rng = SmallRng::seed_from_u64(cfg.seed);
    let mut out = Vec::new();
    let sides: &[OrderSide] = match cfg.sides {
        Sides::Both => &[OrderSide::Buy, OrderSide::Sell],
        Sides::Buy => &[OrderSide::Buy],
        Sides::Sell => &[OrderSide::Sell],
    };
    for sym in &symbols {
        if !cfg.symbols.is_empty() && !cfg.symbols.iter().any(|x| x.eq_ignore_ascii_case(sym)) {
            continue;
        }
        let ss = ds.symbol_sessions(sym);
        for (i, s) in ss.iter().enumerate() {
            if !splits.contains(split, s.date) {
                continue;
            }
            let qty = match cfg.quantity {
                Quantity::Shares(q) => q,
                Quantity::AdvFraction(f) => (f * adv_before(ss, i, data.stats.adv_lookback))
                    .round()
                    .max(1.0),
            };
            for _ in 0..cfg.per_session {
                for &side in sides {
                    // With both sides and several orders per session the
                    // side order is shuffled so that ids do not encode the
                    // side; one side asked for is that side only.
                    let shuffle = cfg.sides == Sides::Both && cfg.per_session > 1;
                    let side = if shuffle && rng.random_bool(0.5) {
                        match side {
                            OrderSide::Buy => OrderSide::Sell,
                            OrderSide::Sell => OrderSide::Buy,
                        }
                    } else {
                        side
                    };
                    for (from, to) in windows(start, end, &cfg.horizons, &mut rng) {
                        out.push(ParentOrder {
                            id: out.len() as u64,
                            symbol: s.symbol.clone(),
                            date: s.date,
                            side,
                            qty,
                            start_minute: from,
                            end_minute: to,
                        });
                    }
                }
            }
        }
    }
    if out.is_empty() {
        return Err(EnvError::EmptySplit {
            split: split.to_string(),
        });
    }
    Ok(out)
}
