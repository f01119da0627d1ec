//! Where episodes play.
//!
//! An [`Episode`] (`episode.rs`) is one parent order being worked: the
//! static replay ([`StaticEnv`]) and the dynamic market ([`DynamicEnv`])
//! both implement it, so every loop above it (backtests, validation,
//! training rollouts) is written once. A [`Venue`] opens episodes:
//! [`StaticVenue`] replays the day, [`DynamicVenue`] simulates it with every
//! strategy meeting the same simulated day for the same order.

use crate::config::EnvConfig;
use crate::dynamic_env::DynamicEnv;
use crate::episode::Episode;
use crate::lobster_queue::LobsterDay;
use crate::order::ParentOrder;
use crate::static_env::StaticEnv;
use crate::team::{DynamicTeam, StaticTeam, TeamEpisode};
use crate::team_mode::TeamMode;
use crate::training::{ImaginedDays, Source, TrainingDraw};
use crate::view::SessionView;
use rand::Rng;
use serl_market::MarketConfig;

/// Where episodes play: backtests and validation run every strategy at
/// every venue they are given.
pub trait Venue: Sync {
    /// The venue's name in reports (`static`, `dynamic`).
    fn name(&self) -> &str;
    /// A fresh episode of `order` on `view`'s session.
    fn open<'a>(
        &'a self,
        view: &'a SessionView,
        order: &'a ParentOrder,
        cfg: &'a EnvConfig,
    ) -> Box<dyn Episode + 'a>;

    /// A fresh team episode of `orders` (the members' shares of one parent
    /// order, [`crate::team_orders`]) on `view`'s session, working them as
    /// `mode` says; `None` where the venue cannot hold a team.
    fn open_team<'a>(
        &'a self,
        view: &'a SessionView,
        orders: &[ParentOrder],
        mode: TeamMode,
        cfg: &'a EnvConfig,
    ) -> Option<Box<dyn TeamEpisode + 'a>> {
        let _ = (view, orders, mode, cfg);
        None
    }

    /// Which half of a hybrid training's loss this venue's episodes feed;
    /// `None`: the venue does not train (it opens no training episode).
    fn source(&self) -> Option<Source> {
        None
    }

    /// A training episode of `order` on `view`'s session: as
    /// [`Venue::open`], with the trainer's draws ([`TrainingDraw`]) where
    /// the venue takes them. The episode borrows nothing of the venue, so
    /// that an environment can own its venue.
    fn open_training<'a>(
        &self,
        view: &'a SessionView,
        order: &'a ParentOrder,
        cfg: &'a EnvConfig,
        draw: TrainingDraw,
    ) -> Option<Box<dyn Episode + 'a>> {
        let _ = (view, order, cfg, draw);
        None
    }

    /// A training episode of a team's `orders`, as
    /// [`Venue::open_training`] is of one order.
    fn open_team_training<'a>(
        &self,
        view: &'a SessionView,
        orders: &[ParentOrder],
        mode: TeamMode,
        cfg: &'a EnvConfig,
        draw: TrainingDraw,
    ) -> Option<Box<dyn TeamEpisode + 'a>> {
        let _ = (view, orders, mode, cfg, draw);
        None
    }
}

/// The historical replay, with no market impact.
#[derive(Debug, Clone, Copy, Default)]
pub struct StaticVenue;

impl Venue for StaticVenue {
    fn name(&self) -> &str {
        "static"
    }
    fn open<'a>(
        &'a self,
        view: &'a SessionView,
        order: &'a ParentOrder,
        cfg: &'a EnvConfig,
    ) -> Box<dyn Episode + 'a> {
        Box::new(StaticEnv::new(view, order, cfg))
    }
    fn open_team<'a>(
        &'a self,
        view: &'a SessionView,
        orders: &[ParentOrder],
        mode: TeamMode,
        cfg: &'a EnvConfig,
    ) -> Option<Box<dyn TeamEpisode + 'a>> {
        Some(Box::new(StaticTeam::new(view.into(), orders, mode, cfg)))
    }

    fn source(&self) -> Option<Source> {
        Some(Source::Static)
    }

    /// The day replayed, or an imagined one drawn from it; the replay
    /// holds no peers.
    fn open_training<'a>(
        &self,
        view: &'a SessionView,
        order: &'a ParentOrder,
        cfg: &'a EnvConfig,
        draw: TrainingDraw,
    ) -> Option<Box<dyn Episode + 'a>> {
        let day = ImaginedDays::view(draw.imagined, view, draw.rng);
        Some(Box::new(StaticEnv::new(day, order, cfg)))
    }

    fn open_team_training<'a>(
        &self,
        view: &'a SessionView,
        orders: &[ParentOrder],
        mode: TeamMode,
        cfg: &'a EnvConfig,
        draw: TrainingDraw,
    ) -> Option<Box<dyn TeamEpisode + 'a>> {
        let day = ImaginedDays::view(draw.imagined, view, draw.rng);
        Some(Box::new(StaticTeam::new(day, orders, mode, cfg)))
    }
}

/// The dynamic multi-agent market. Each episode simulates the order's
/// session with a seed derived from `seed` and the order id
/// ([`DynamicVenue::episode_seed`]), so that every strategy meets the same
/// simulated day.
#[derive(Debug, Clone)]
pub struct DynamicVenue {
    /// The market's population, calibrated to each session.
    pub market: MarketConfig,
    /// The backtest's seed.
    pub seed: u64,
}

impl DynamicVenue {
    /// The simulation seed of `order`'s episode.
    pub fn episode_seed(&self, order: &ParentOrder) -> u64 {
        self.seed ^ order.id.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

impl Venue for DynamicVenue {
    fn name(&self) -> &str {
        "dynamic"
    }
    fn open<'a>(
        &'a self,
        view: &'a SessionView,
        order: &'a ParentOrder,
        cfg: &'a EnvConfig,
    ) -> Box<dyn Episode + 'a> {
        let seed = self.episode_seed(order);
        Box::new(DynamicEnv::new(view, order, cfg, &self.market, seed))
    }
    /// The team meets the simulated day of its parent order (the members'
    /// orders keep the parent's id), as a single agent would.
    fn open_team<'a>(
        &'a self,
        view: &'a SessionView,
        orders: &[ParentOrder],
        mode: TeamMode,
        cfg: &'a EnvConfig,
    ) -> Option<Box<dyn TeamEpisode + 'a>> {
        let seed = self.episode_seed(orders.first()?);
        Some(Box::new(DynamicTeam::new(DynamicEnv::team(
            view,
            orders,
            cfg,
            &self.market,
            seed,
            mode,
        ))))
    }

    fn source(&self) -> Option<Source> {
        Some(Source::Dynamic)
    }

    /// A day simulated with a seed drawn from the trainer's generator
    /// (not `seed`: a training meets a new day every episode), the
    /// scripted peers beside the agent.
    fn open_training<'a>(
        &self,
        view: &'a SessionView,
        order: &'a ParentOrder,
        cfg: &'a EnvConfig,
        draw: TrainingDraw,
    ) -> Option<Box<dyn Episode + 'a>> {
        let mut e = DynamicEnv::new(view, order, cfg, &self.market, draw.rng.random());
        e.add_peers(draw.peers.iter().copied());
        Some(Box::new(e))
    }

    fn open_team_training<'a>(
        &self,
        view: &'a SessionView,
        orders: &[ParentOrder],
        mode: TeamMode,
        cfg: &'a EnvConfig,
        draw: TrainingDraw,
    ) -> Option<Box<dyn TeamEpisode + 'a>> {
        let seed = draw.rng.random();
        let mut e = DynamicEnv::team(view, orders, cfg, &self.market, seed, mode);
        e.add_peers(draw.peers.iter().copied());
        Some(Box::new(DynamicTeam::new(e)))
    }
}

/// The LOBSTER days' real message streams: the static replay of their
/// minute bars, where resting orders fill by their place in the real queue
/// (the reference the two other fill models are judged against).
#[derive(Clone, Default)]
pub struct LobsterVenue {
    days: std::collections::HashMap<
        (std::sync::Arc<str>, chrono::NaiveDate),
        std::sync::Arc<LobsterDay>,
    >,
}

impl LobsterVenue {
    /// The venue of these days.
    pub fn new(days: impl IntoIterator<Item = std::sync::Arc<LobsterDay>>) -> Self {
        LobsterVenue {
            days: days
                .into_iter()
                .map(|d| ((d.symbol().clone(), d.date()), d))
                .collect(),
        }
    }
}

impl Venue for LobsterVenue {
    fn name(&self) -> &str {
        "lobster"
    }
    /// Panics when the venue has no message stream for the view's day:
    /// the orders of a LOBSTER backtest are drawn from its own days.
    fn open<'a>(
        &'a self,
        view: &'a SessionView,
        order: &'a ParentOrder,
        cfg: &'a EnvConfig,
    ) -> Box<dyn Episode + 'a> {
        let day = self
            .days
            .get(&(view.symbol.clone(), view.date))
            .unwrap_or_else(|| panic!("no LOBSTER messages for {} {}", view.symbol, view.date));
        Box::new(StaticEnv::on_lobster(view, order, cfg, day))
    }
}
