//! The venues a backtest plays, by name: one registry, as the learners
//! and the cluster's task kinds have theirs. A new venue is a type
//! implementing `serl_env::Venue` and one line in [`VENUES`]: `--env`,
//! its `--help` and errors, `--env all`, the Python package's `venue` and
//! the cluster's backtest shards all read the names from here.

use std::sync::OnceLock;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serl_env::{DynamicVenue, LobsterVenue, StaticVenue, Venue};

use crate::config::BacktestFile;
use crate::error::{Result, StudyError};

/// What a venue is made from: the backtest's config, and the LOBSTER days
/// when the backtest was given them.
pub struct VenueInputs<'a> {
    /// The backtest's config (its market, its orders' seed).
    pub cfg: &'a BacktestFile,
    /// The venue replaying the LOBSTER days, when given.
    pub lobster: Option<&'a LobsterVenue>,
}

/// A venue made for one backtest: its own, or one the inputs hold.
pub enum Made<'a> {
    /// Made afresh, holding what it plays.
    Owned(Box<dyn Venue>),
    /// Held by the inputs (the LOBSTER days, loaded once).
    Borrowed(&'a dyn Venue),
}

impl Made<'_> {
    /// The venue.
    pub fn venue(&self) -> &dyn Venue {
        match self {
            Made::Owned(v) => v.as_ref(),
            Made::Borrowed(v) => *v,
        }
    }
}

/// Makes a venue from a backtest's inputs.
type MakeFn = for<'a> fn(&VenueInputs<'a>) -> Result<Made<'a>>;

/// One venue of the registry.
pub struct VenueKind {
    /// Its name on the command line (`--env`) and in reports.
    pub name: &'static str,
    /// Whether a team of execution agents can play it.
    pub teams: bool,
    /// Whether it needs LOBSTER days (`--lobster`).
    pub needs_lobster: bool,
    make: MakeFn,
}

impl VenueKind {
    /// A venue named `name`, made by `make`, that a team can play.
    const fn new(name: &'static str, make: MakeFn) -> VenueKind {
        VenueKind {
            name,
            teams: true,
            needs_lobster: false,
            make,
        }
    }

    /// The same, playing the LOBSTER days (`--lobster`): only an
    /// execution agent alone plays them.
    const fn on_lobster_days(self) -> VenueKind {
        VenueKind {
            teams: false,
            needs_lobster: true,
            ..self
        }
    }

    /// The venue for one backtest.
    pub fn make<'a>(&self, inputs: &VenueInputs<'a>) -> Result<Made<'a>> {
        (self.make)(inputs)
    }
}

/// Every venue, in the order reports list them.
pub static VENUES: &[VenueKind] = &[
    VenueKind::new("static", static_venue),
    VenueKind::new("dynamic", dynamic_venue),
    VenueKind::new("lobster", lobster_venue).on_lobster_days(),
];

/// The historical replay, with no market impact.
fn static_venue<'a>(_: &VenueInputs<'a>) -> Result<Made<'a>> {
    Ok(Made::Owned(Box::new(StaticVenue)))
}

/// The simulated multi-agent market of the config, seeded by its orders'
/// seed.
fn dynamic_venue<'a>(i: &VenueInputs<'a>) -> Result<Made<'a>> {
    Ok(Made::Owned(Box::new(DynamicVenue {
        market: i.cfg.market.clone(),
        seed: i.cfg.orders.seed,
    })))
}

/// The LOBSTER days' real queue.
fn lobster_venue<'a>(i: &VenueInputs<'a>) -> Result<Made<'a>> {
    match i.lobster {
        Some(l) => Ok(Made::Borrowed(l)),
        None => Err(StudyError::msg(NEEDS_LOBSTER)),
    }
}

/// Why `--env lobster|all` without LOBSTER days is refused.
pub const NEEDS_LOBSTER: &str =
    "--env lobster and --env all need LOBSTER days: give --lobster PATH";

/// Where the orders play (`--env`): one venue by its name, `both` (the
/// replay and the simulated market) or `all` (every venue). It reads and
/// writes as the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvChoice(&'static str);

impl EnvChoice {
    /// The historical replay.
    pub const STATIC: EnvChoice = EnvChoice("static");
    /// The simulated market.
    pub const DYNAMIC: EnvChoice = EnvChoice("dynamic");
    /// The replay and the simulated market.
    pub const BOTH: EnvChoice = EnvChoice("both");
    /// Every venue.
    pub const ALL: EnvChoice = EnvChoice("all");

    /// Every name `--env` takes: the venues', then `both` and `all`.
    pub fn names() -> &'static [&'static str] {
        static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
        NAMES.get_or_init(|| {
            let venues = VENUES.iter().map(|v| v.name);
            venues.chain([Self::BOTH.0, Self::ALL.0]).collect()
        })
    }

    /// Its name (`both`).
    pub fn name(self) -> &'static str {
        self.0
    }

    /// The venues it plays, in the registry's order.
    pub fn venues(self) -> Vec<&'static VenueKind> {
        let picked = |v: &VenueKind| match self.0 {
            "all" => true,
            "both" => v.name == "static" || v.name == "dynamic",
            name => v.name == name,
        };
        VENUES.iter().filter(|v| picked(v)).collect()
    }

    /// Whether one of its venues needs LOBSTER days.
    pub fn needs_lobster(self) -> bool {
        self.venues().iter().any(|v| v.needs_lobster)
    }

    /// Its venues made from `inputs`.
    pub fn make<'a>(self, inputs: &VenueInputs<'a>) -> Result<Vec<Made<'a>>> {
        self.venues().iter().map(|v| v.make(inputs)).collect()
    }
}

impl std::str::FromStr for EnvChoice {
    type Err = StudyError;

    fn from_str(s: &str) -> Result<Self> {
        match Self::names().iter().find(|&&n| n == s) {
            Some(&name) => Ok(EnvChoice(name)),
            None => Err(StudyError::msg(format!(
                "no venue is called `{s}`: one of {}",
                Self::names().join(", ")
            ))),
        }
    }
}

impl Serialize for EnvChoice {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for EnvChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `both` and `all` name the venues they always have; every venue's
    /// name reads back as itself, and as JSON as the shards write it.
    #[test]
    fn choices_name_their_venues_and_read_back() {
        let names = |c: EnvChoice| c.venues().iter().map(|v| v.name).collect::<Vec<_>>();
        assert_eq!(names(EnvChoice::BOTH), ["static", "dynamic"]);
        assert_eq!(names(EnvChoice::ALL), ["static", "dynamic", "lobster"]);
        assert_eq!(names(EnvChoice::STATIC), ["static"]);
        assert!(EnvChoice::ALL.needs_lobster() && !EnvChoice::BOTH.needs_lobster());
        for &name in EnvChoice::names() {
            let c: EnvChoice = name.parse().unwrap();
            assert_eq!(c.name(), name);
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(serde_json::from_str::<EnvChoice>(&json).unwrap(), c);
        }
        let err = "nowhere".parse::<EnvChoice>().unwrap_err().to_string();
        assert!(err.contains("static, dynamic, lobster, both, all"), "{err}");
    }

    /// A venue that needs LOBSTER days is refused by name without them;
    /// the others are made from the config.
    #[test]
    fn venues_are_made_from_the_backtests_inputs() {
        let cfg = BacktestFile::default();
        let inputs = VenueInputs {
            cfg: &cfg,
            lobster: None,
        };
        let made = EnvChoice::BOTH.make(&inputs).unwrap();
        let names: Vec<&str> = made.iter().map(|m| m.venue().name()).collect();
        assert_eq!(names, ["static", "dynamic"]);
        let Err(e) = EnvChoice::ALL.make(&inputs) else {
            panic!("made the LOBSTER venue without its days");
        };
        assert!(e.to_string().contains("--lobster"), "{e}");
    }
}
