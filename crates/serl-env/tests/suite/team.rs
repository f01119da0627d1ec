//! Teams on the bundled sample: several execution agents working one
//! parent order (or competing ones) in one market, stepped jointly.

use std::path::Path;

use serl_data::{load, DataConfig, Split};
use serl_env::*;

fn sample() -> (MarketData, Vec<ParentOrder>) {
    let cfg = DataConfig::default();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/lean");
    let ds = load(&dir, &cfg).unwrap();
    let orders = generate_orders(&ds, Split::Test, &cfg, &OrderConfig::default()).unwrap();
    (MarketData::new(&ds, &cfg), orders)
}

fn reward() -> DefaultReward {
    DefaultReward {
        inventory_penalty: 0.0,
        terminal_penalty: 0.0,
    }
}

fn twaps() -> Independent {
    Independent::new("twap".into(), Box::new(|| Box::new(Twap)))
}

fn env_cfg() -> EnvConfig {
    EnvConfig {
        decision_minutes: 30,
        ..EnvConfig::default()
    }
}

fn play_in(
    venue: &dyn Venue,
    md: &MarketData,
    o: &ParentOrder,
    agents: usize,
    mode: TeamMode,
    cfg: &EnvConfig,
) -> TeamOutcome {
    let view = md.get(&o.symbol, o.date).unwrap();
    let members = team_orders(o, agents);
    let mut e = venue.open_team(view, &members, mode, cfg).unwrap();
    let mut s = twaps();
    s.reset(view, &members, cfg);
    play_team(e.as_mut(), &mut s, o, &reward(), true)
}

#[test]
fn a_team_of_one_is_the_single_agent_episode_exactly() {
    let (md, orders) = sample();
    let cfg = env_cfg();
    let venue = DynamicVenue {
        market: MarketConfig::default(),
        seed: 3,
    };
    let o = &orders[0];
    let view = md.get(&o.symbol, o.date).unwrap();
    let mut alone = venue.open(view, o, &cfg);
    let single = play(alone.as_mut(), &mut Twap, &reward(), false);
    let team = play_in(&venue, &md, o, 1, TeamMode::Cooperative, &cfg);
    assert_eq!(team.members[0].filled, single.filled);
    assert_eq!(team.members[0].notional, single.notional);
    assert_eq!(team.team.pa_bps(), single.pa_bps());
}

#[test]
fn a_cooperative_team_is_judged_as_its_parent_order() {
    let (md, orders) = sample();
    let cfg = env_cfg();
    let venue = DynamicVenue {
        market: MarketConfig::default(),
        seed: 3,
    };
    let o = &orders[1];
    let out = play_in(&venue, &md, o, 4, TeamMode::Cooperative, &cfg);
    assert_eq!(out.members.len(), 4);
    let filled: f64 = out.members.iter().map(|m| m.filled).sum();
    let notional: f64 = out.members.iter().map(|m| m.notional).sum();
    assert_eq!(out.team.filled, filled);
    assert_eq!(out.team.notional, notional);
    assert_eq!(out.team.order_id, o.id);
    for m in &out.members {
        // One benchmark for all: the same window of the same market.
        assert_eq!(m.bench_price, out.team.bench_price);
        assert!(m.filled > 0.0, "every member trades");
    }
    // The team's inventory path is the members' average.
    let steps = out.team.inventory_path.len();
    assert_eq!(steps, out.members[0].inventory_path.len());
    let last = out.team.inventory_path[steps - 1];
    let mean_last: f32 = out
        .members
        .iter()
        .map(|m| m.inventory_path[steps - 1])
        .sum::<f32>()
        / 4.0;
    assert!((last - mean_last).abs() < 1e-6);
    // The same seed, the same team episode.
    let again = play_in(&venue, &md, o, 4, TeamMode::Cooperative, &cfg);
    assert_eq!(again.team.notional, out.team.notional);
}

#[test]
fn cooperative_members_share_one_cap_and_competitors_each_have_their_own() {
    let (md, orders) = sample();
    // An order far beyond what the cap lets one agent trade in a day.
    let mut o = orders[0].clone();
    o.qty *= 400.0;
    let cfg = EnvConfig {
        participation_cap: 0.02,
        ..env_cfg()
    };
    let venue = DynamicVenue {
        market: MarketConfig::default(),
        seed: 5,
    };
    let view = md.get(&o.symbol, o.date).unwrap();
    let alone = play(
        venue.open(view, &o, &cfg).as_mut(),
        &mut Twap,
        &reward(),
        false,
    );
    let coop = play_in(&venue, &md, &o, 4, TeamMode::Cooperative, &cfg);
    let rivals = play_in(&venue, &md, &o, 4, TeamMode::Competitive, &cfg);
    assert!(
        alone.filled < 0.9 * o.qty,
        "the cap binds: {} of {}",
        alone.filled,
        o.qty
    );
    let ratio = coop.team.filled / alone.filled;
    assert!(
        (0.8..1.25).contains(&ratio),
        "a cooperative team keeps one cap: {ratio}"
    );
    assert!(
        rivals.team.filled > 2.0 * alone.filled,
        "competitors each trade up to the cap: {} vs {}",
        rivals.team.filled,
        alone.filled
    );
}

#[test]
fn in_the_replay_each_member_replays_its_share_alone() {
    let (md, orders) = sample();
    let cfg = env_cfg();
    let o = &orders[2];
    let view = md.get(&o.symbol, o.date).unwrap();
    let share = &team_orders(o, 3)[0];
    // Competitors each have the whole cap; cooperating members a third.
    for (mode, cap) in [
        (TeamMode::Competitive, cfg.participation_cap),
        (TeamMode::Cooperative, cfg.participation_cap / 3.0),
    ] {
        let out = play_in(&StaticVenue, &md, o, 3, mode, &cfg);
        let alone_cfg = EnvConfig {
            participation_cap: cap,
            ..cfg.clone()
        };
        let alone = run_static(&mut Twap, view, share, &alone_cfg, &reward(), false);
        for m in &out.members {
            assert_eq!(m.filled, alone.filled, "{mode:?}");
            assert_eq!(m.notional, alone.notional, "{mode:?}");
        }
        assert!((out.team.pa_bps() - alone.pa_bps()).abs() < 1e-9);
    }
}

#[test]
fn members_trade_in_turn_so_none_is_always_first() {
    let (md, orders) = sample();
    let cfg = EnvConfig {
        decision_minutes: 5,
        ..EnvConfig::default()
    };
    let venue = DynamicVenue {
        market: MarketConfig::default(),
        seed: 8,
    };
    let mut o = orders[3].clone();
    o.qty *= 20.0;
    let out = play_in(&venue, &md, &o, 4, TeamMode::Competitive, &cfg);
    let pas: Vec<f64> = out.members.iter().map(|m| m.pa_bps()).collect();
    let spread =
        pas.iter().cloned().fold(f64::MIN, f64::max) - pas.iter().cloned().fold(f64::MAX, f64::min);
    let cost = pas.iter().map(|p| p.abs()).sum::<f64>() / 4.0;
    assert!(
        spread < 0.5 * cost.max(1.0),
        "identical TWAPs pay about the same when the turn rotates: {pas:?}"
    );
}
