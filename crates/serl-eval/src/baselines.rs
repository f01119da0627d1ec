//! The baseline strategies, all through the same [`Strategy`] interface as
//! a trained policy.

use serde::{Deserialize, Serialize};
use serl_env::{
    work_step, ChildOrder, Decision, EnvConfig, OrderSide, ParentOrder, Placement, SessionView,
    Strategy,
};

/// Time-weighted: the same share of what is left in every remaining step.
pub use serl_env::Twap;

/// Volume-weighted: follows the average intraday volume profile of the
/// look-back sessions (never the day itself).
#[derive(Debug, Clone, Default)]
pub struct Vwap;

impl Strategy for Vwap {
    fn name(&self) -> String {
        "vwap".into()
    }
    fn act(&mut self, d: &Decision) -> f64 {
        let v = d.view;
        let total = v.expected_share(d.order.start_minute, d.order.end_minute);
        if total <= 0.0 || d.step + 1 == d.steps {
            return d.remaining / d.qty;
        }
        let target = v.expected_share(d.order.start_minute, d.to_minute) / total;
        let done = 1.0 - d.remaining / d.qty;
        (target - done).max(0.0)
    }
}

/// Passive TWAP: rests one step's even share of the order at `placement`
/// (the touch by default) every step, and crosses at once whatever the
/// order has fallen behind the even schedule; what is left at the horizon
/// is crossed by the environment's forced liquidation. With
/// [`Placement::Mid`] it is a pegged-to-mid strategy.
#[derive(Debug, Clone, Copy)]
pub struct PassiveTwap {
    /// Where each step's share rests.
    pub placement: Placement,
}

impl PassiveTwap {
    /// Shares of the order (behind the schedule, posted) for a decision.
    fn shares(d: &Decision) -> (f64, f64) {
        let steps = d.steps.max(1) as f64;
        let left = d.remaining / d.qty;
        let scheduled_left = 1.0 - d.step as f64 / steps;
        let behind = (left - scheduled_left).max(0.0);
        (behind, (1.0 / steps).min(left - behind))
    }
}

impl Strategy for PassiveTwap {
    fn name(&self) -> String {
        match self.placement {
            Placement::Passive { ticks: 0 } => "twap-passive".into(),
            p => format!("twap-passive:{}", p.label()),
        }
    }
    fn act(&mut self, d: &Decision) -> f64 {
        let (behind, posted) = Self::shares(d);
        behind + posted
    }
    fn order(&mut self, d: &Decision) -> ChildOrder {
        let (behind, posted) = Self::shares(d);
        ChildOrder {
            action: behind + posted,
            placement: self.placement,
            cross_first: behind,
        }
    }
}

/// Percentage of volume: trades `rate` of the market volume of the previous
/// step (of the expected volume at the first step).
#[derive(Debug, Clone)]
pub struct Pov {
    /// Share of the market volume to trade (0.05: 5%).
    pub rate: f64,
}

impl Strategy for Pov {
    fn name(&self) -> String {
        format!("pov({})", self.rate)
    }
    fn act(&mut self, d: &Decision) -> f64 {
        let vol = if d.step == 0 {
            d.view.adv * d.view.expected_share(d.from_minute, d.to_minute)
        } else {
            d.last_step_volume
        };
        self.rate * vol / d.qty
    }
}

/// Almgren–Chriss: the risk-averse optimal trajectory
/// x(t) = X sinh(κ(T−t)) / sinh(κT), κ = sqrt(λσ²/η), with σ the look-back
/// 1-minute volatility (price units) and η a temporary impact coefficient
/// calibrated so that trading at the participation cap costs one extra half
/// spread.
#[derive(Debug, Clone)]
pub struct AlmgrenChriss {
    /// λ: how much variance of cost the trader will pay to avoid (0 gives
    /// the even TWAP schedule; larger values trade earlier).
    pub risk_aversion: f64,
    kappa: f64,
    horizon: f64,
}

impl AlmgrenChriss {
    /// The strategy for `risk_aversion` λ; κ and the horizon are set for
    /// each order when it is reset.
    pub fn new(risk_aversion: f64) -> Self {
        AlmgrenChriss {
            risk_aversion,
            kappa: 0.0,
            horizon: 1.0,
        }
    }

    /// Fraction of the order still held at minute offset `t`.
    fn holding(&self, t: f64) -> f64 {
        let kt = self.kappa * self.horizon;
        if kt < 1e-6 {
            return 1.0 - t / self.horizon;
        }
        (self.kappa * (self.horizon - t)).sinh() / kt.sinh()
    }
}

impl Strategy for AlmgrenChriss {
    fn name(&self) -> String {
        format!("ac({:e})", self.risk_aversion)
    }
    fn reset(&mut self, v: &SessionView, o: &ParentOrder, env: &EnvConfig) {
        let price = v.price.first().copied().unwrap_or(1.0);
        let sigma = price * v.minute_vol_bps / 1e4;
        let half_spread = price * v.spread_bps / 2e4;
        let rate = (env.participation_cap * v.avg_minute_volume).max(1.0);
        let eta = (half_spread / rate).max(1e-12);
        self.kappa = (self.risk_aversion * sigma * sigma / eta).sqrt();
        self.horizon = (o.end_minute - o.start_minute).max(1) as f64;
    }
    fn act(&mut self, d: &Decision) -> f64 {
        if d.step + 1 == d.steps {
            return d.remaining / d.qty;
        }
        let t1 = (d.to_minute - d.order.start_minute) as f64;
        let target_done = 1.0 - self.holding(t1);
        let done = 1.0 - d.remaining / d.qty;
        (target_done - done).max(0.0)
    }
}

/// Perfect foresight: puts the order into the steps with the best execution
/// prices of the day, up to their participation capacity. An upper bound
/// that no real strategy can reach.
#[derive(Debug, Clone, Default)]
pub struct Oracle {
    alloc: Vec<f64>,
}

impl Strategy for Oracle {
    fn name(&self) -> String {
        "oracle".into()
    }
    fn reset(&mut self, v: &SessionView, o: &ParentOrder, env: &EnvConfig) {
        let k = env.decision_minutes.max(1);
        let steps = (o.end_minute - o.start_minute).div_ceil(k) as usize;
        let sign = o.side.sign();
        // Per step: what it can fill and at what average price.
        let mut cand: Vec<(usize, f64, f64)> = (0..steps)
            .map(|j| {
                let from = o.start_minute + j as u16 * k;
                let to = (from + k).min(o.end_minute);
                let r = v.range(from, to);
                let most: f64 = r.clone().map(|i| env.participation_cap * v.volume[i]).sum();
                let (cap, cost) = work_step(v, r, most, env.participation_cap, sign);
                let price = if cap > 0.0 { cost / cap } else { f64::NAN };
                (j, price, cap)
            })
            .filter(|c| c.2 > 0.0)
            .collect();
        cand.sort_by(|a, b| {
            let (x, y) = match o.side {
                OrderSide::Buy => (a.1, b.1),
                OrderSide::Sell => (b.1, a.1),
            };
            x.total_cmp(&y)
        });
        self.alloc = vec![0.0; steps];
        let mut left = o.qty;
        for (j, _, cap) in cand {
            if left <= 0.0 {
                break;
            }
            let q = left.min(cap);
            self.alloc[j] = q;
            left -= q;
        }
    }
    fn act(&mut self, d: &Decision) -> f64 {
        self.alloc.get(d.step).copied().unwrap_or(0.0) / d.qty
    }
}

/// Signal-tilted TWAP: the even share of what is left, tilted by the
/// planted forecast ([`Decision::signal`], `serl data plant`): `1 + tilt ·
/// clamp(signal, −1, 1)` times it, so more is traded before a forecast
/// move against the order and less before one in its favour. With the
/// tilt of the trained policies' pace (0.5 in the standard config) it is
/// a policy inside their action space that follows the signal: its PA over
/// TWAP is the edge the plant put within a design's reach. On data
/// without a signal it is TWAP.
#[derive(Debug, Clone, Copy)]
pub struct SignalTwap {
    /// How far the forecast tilts the even share, as a fraction of it.
    pub tilt: f64,
}

impl Strategy for SignalTwap {
    fn name(&self) -> String {
        format!("signal:{}", self.tilt)
    }
    fn act(&mut self, d: &Decision) -> f64 {
        let left = d.remaining / d.qty;
        if d.step + 1 >= d.steps {
            return left;
        }
        let tilt = 1.0 + self.tilt * f64::from(d.signal).clamp(-1.0, 1.0);
        (d.even_share() * tilt).clamp(0.0, left)
    }
}

/// A strategy by name, as the CLI and configs give it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StrategySpec {
    /// [`Twap`].
    Twap,
    /// [`Vwap`].
    Vwap,
    /// [`Pov`].
    Pov {
        /// Share of the market volume (default 0.05).
        rate: f64,
    },
    /// [`AlmgrenChriss`].
    Ac {
        /// λ (default 1e-7).
        risk_aversion: f64,
    },
    /// [`Oracle`].
    Oracle,
    /// [`PassiveTwap`].
    TwapPassive {
        /// Where each step's share rests (default: the touch).
        placement: Placement,
    },
    /// [`SignalTwap`].
    Signal {
        /// How far the planted forecast tilts TWAP (default 0.5).
        tilt: f64,
    },
}

impl StrategySpec {
    /// Parses `twap`, `vwap`, `pov`, `pov:0.05`, `ac`, `ac:1e-7`, `oracle`,
    /// `twap-passive`, `twap-passive:PLACEMENT` (see [`Placement::parse`]),
    /// `peg-mid` (`twap-passive:mid`) and `signal`, `signal:0.5`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let num = |default: f64| -> Result<f64, String> {
            match arg {
                None => Ok(default),
                Some(a) => a
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| format!("strategy `{s}`: `{a}` is not a non-negative number")),
            }
        };
        match name {
            "twap" => Ok(StrategySpec::Twap),
            "vwap" => Ok(StrategySpec::Vwap),
            "pov" => Ok(StrategySpec::Pov { rate: num(0.05)? }),
            "ac" => Ok(StrategySpec::Ac { risk_aversion: num(1e-7)? }),
            "oracle" => Ok(StrategySpec::Oracle),
            "signal" => Ok(StrategySpec::Signal { tilt: num(0.5)? }),
            "twap-passive" => Ok(StrategySpec::TwapPassive {
                placement: match arg {
                    None => Placement::Passive { ticks: 0 },
                    Some(a) => Placement::parse(a).map_err(|e| format!("strategy `{s}`: {e}"))?,
                },
            }),
            "peg-mid" if arg.is_none() => Ok(StrategySpec::TwapPassive {
                placement: Placement::Mid { offset_bps: 0.0 },
            }),
            _ => Err(format!(
                "unknown strategy `{s}`: expected twap, vwap, pov[:rate], ac[:risk_aversion], oracle, twap-passive[:placement], peg-mid, signal[:tilt] or policy:RUN_DIR"
            )),
        }
    }

    /// The name it parses from, with its parameter (`pov:0.05`, `ac:1e-7`).
    pub fn label(&self) -> String {
        match self {
            StrategySpec::Twap => "twap".into(),
            StrategySpec::Vwap => "vwap".into(),
            StrategySpec::Pov { rate } => format!("pov:{rate}"),
            StrategySpec::Ac { risk_aversion } => format!("ac:{risk_aversion:e}"),
            StrategySpec::Oracle => "oracle".into(),
            StrategySpec::Signal { tilt } => format!("signal:{tilt}"),
            StrategySpec::TwapPassive { placement } => PassiveTwap {
                placement: *placement,
            }
            .name(),
        }
    }

    /// The label of the strategy a user typed as `typed`: as typed when it
    /// is another name for it (`peg-mid`, not `twap-passive:mid`), else
    /// [`label`](Self::label), which spells out a default parameter (`pov`
    /// shows as `pov:0.05`).
    pub fn label_as_typed(&self, typed: &str) -> String {
        let label = self.label();
        let name = |s: &str| s.split(':').next().unwrap_or_default().to_string();
        if name(typed) == name(&label) {
            label
        } else {
            typed.to_string()
        }
    }

    /// A fresh instance of the strategy.
    pub fn build(&self) -> Box<dyn Strategy> {
        match *self {
            StrategySpec::Twap => Box::new(Twap),
            StrategySpec::Vwap => Box::new(Vwap),
            StrategySpec::Pov { rate } => Box::new(Pov { rate }),
            StrategySpec::Ac { risk_aversion } => Box::new(AlmgrenChriss::new(risk_aversion)),
            StrategySpec::Oracle => Box::new(Oracle::default()),
            StrategySpec::TwapPassive { placement } => Box::new(PassiveTwap { placement }),
            StrategySpec::Signal { tilt } => Box::new(SignalTwap { tilt }),
        }
    }
}
