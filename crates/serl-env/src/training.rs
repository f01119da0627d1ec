//! What a training episode adds to a venue's: the trainer's own draws. A
//! backtest meets the same day for the same order ([`crate::Venue::open`]);
//! a training draws each episode afresh from its generator (the dynamic
//! market's seed, an imagined day for the static replay) and may add
//! scripted peers beside the agent. A venue says which half of the hybrid
//! loss its episodes feed ([`Source`]).

use rand::rngs::SmallRng;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serl_market::Scenario;

use crate::order::OrderSide;
use crate::view::{SessionView, ViewRef};

/// Which half of the hybrid loss an episode's samples feed: the trainer
/// weights the static replay's and the dynamic market's losses separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The historical replay (of the real day or an imagined one).
    Static,
    /// The dynamic market (plain or with an imagined scenario).
    Dynamic,
}

/// Static episodes played on imagined days: `share` of them replay a day
/// reshaped by one of `scenarios`.
#[derive(Debug, Clone)]
pub struct ImaginedDays {
    /// The share of static episodes imagined.
    pub share: f64,
    /// The scenarios a day is reshaped by, one drawn per episode.
    pub scenarios: Vec<Scenario>,
}

impl ImaginedDays {
    /// The replay of `share` of the static episodes on days reshaped by
    /// one of `scenarios`; none when nothing would be imagined.
    pub fn new(share: f64, scenarios: &[Scenario]) -> Option<Self> {
        (share > 0.0 && !scenarios.is_empty()).then(|| ImaginedDays {
            share,
            scenarios: scenarios.to_vec(),
        })
    }

    /// The day a static episode replays: one imagined from `view` with
    /// probability `share`, else `view` itself.
    pub fn view<'a>(this: Option<&Self>, view: &'a SessionView, rng: &mut SmallRng) -> ViewRef<'a> {
        if let Some(r) = this {
            if rng.random::<f64>() < r.share {
                let s = &r.scenarios[rng.random_range(0..r.scenarios.len())];
                return view.imagined(s).into();
            }
        }
        ViewRef::Borrowed(view)
    }
}

/// The trainer's draws for one episode.
pub struct TrainingDraw<'r> {
    /// The trainer's generator: a dynamic market's seed, an imagined day.
    pub rng: &'r mut SmallRng,
    /// The static replay's imagined days, if any.
    pub imagined: Option<&'r ImaginedDays>,
    /// Scripted peers working beside the agent (side, shares), where the
    /// venue can hold them.
    pub peers: &'r [(OrderSide, f64)],
}
