//! How a team's agents share the work: the [`TeamMode`], the members'
//! orders for a parent order, and their shares of the participation cap.
//! Apart from the team episodes (`team.rs`) because the dynamic market
//! needs the cap shares too, and the team episodes are built on it.

use serde::{Deserialize, Serialize};

use crate::order::ParentOrder;

/// How a team's agents share the work and how they are judged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TeamMode {
    /// One parent order split across the agents (desks, venues); the team
    /// is judged on the whole order's PA, and the members share one
    /// participation cap.
    #[default]
    Cooperative,
    /// Independent orders in the same stock and direction, competing for
    /// liquidity; each agent is judged on its own PA and has its own cap.
    Competitive,
}

impl TeamMode {
    /// Every mode's name, as configs spell it and the command line
    /// lists it (with `-` for `_`).
    pub const NAMES: [&'static str; 2] = ["cooperative", "competitive"];

    /// The mode's name in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            TeamMode::Cooperative => "cooperative",
            TeamMode::Competitive => "competitive",
        }
    }
}

/// The members' orders for `parent` worked by `agents` agents: a
/// `1/agents` share each, over the parent's window and side, keeping the
/// parent's id (so every strategy and venue meets the same order).
pub fn team_orders(parent: &ParentOrder, agents: usize) -> Vec<ParentOrder> {
    let n = agents.max(1);
    (0..n)
        .map(|_| ParentOrder {
            qty: parent.qty / n as f64,
            ..parent.clone()
        })
        .collect()
}

/// Each member's share of the participation cap: its share of the team's
/// orders when the team cooperates (together they keep one agent's cap),
/// the whole cap when they compete.
pub(crate) fn cap_shares(orders: &[ParentOrder], mode: TeamMode) -> Vec<f64> {
    let total: f64 = orders.iter().map(|o| o.qty).sum();
    orders
        .iter()
        .map(|o| match mode {
            TeamMode::Cooperative if total > 0.0 => o.qty / total,
            _ => 1.0,
        })
        .collect()
}

#[cfg(test)]
mod names_tests {
    use super::*;

    /// The command line lists [`TeamMode::NAMES`]: each reads as the config
    /// reads it, and every variant is listed in its place (a new one fails
    /// to compile here until it is).
    #[test]
    fn every_team_mode_is_named_as_the_config_names_it() {
        use serde::de::value::{Error, StrDeserializer};
        let index = |v: TeamMode| match v {
            TeamMode::Cooperative => 0,
            TeamMode::Competitive => 1,
        };
        for (i, name) in TeamMode::NAMES.iter().enumerate() {
            let v = TeamMode::deserialize(StrDeserializer::<Error>::new(name)).unwrap();
            assert_eq!(index(v), i, "{name}");
        }
    }
}
