//! A team that learns together: four agents work each parent order of the
//! bundled sample at once, trained with MAPPO or independent PPO, and the
//! trained team hears its messages wherever it plays.

use std::path::Path;
use std::sync::Arc;

use serl_data::{DataConfig, Split};
use serl_design::{Aggregate, Communication, FeatureDef};
use serl_env::{
    generate_orders, play_team, team_orders, DefaultReward, DynamicVenue, EnvConfig, MarketConfig,
    MarketData, OrderConfig, ParentOrder, TeamMode, TeamStrategy, Venue, OBS_DIM,
};
use serl_train::{
    execution_envs, team_pa, train, Critic, Model, Pace, Policy, TeamConfig, TeamPolicyStrategy,
    TrainConfig, TrainOutcome, TrainSetup,
};

struct Bundled {
    train: Vec<ParentOrder>,
    validation: Vec<ParentOrder>,
    market: MarketData,
    env_cfg: EnvConfig,
}

impl Bundled {
    fn load() -> Self {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/lean");
        let cfg = DataConfig::default();
        let ds = serl_data::load(&data, &cfg).unwrap();
        let orders = |split| generate_orders(&ds, split, &cfg, &OrderConfig::default()).unwrap();
        Bundled {
            train: orders(Split::Train),
            validation: orders(Split::Validation),
            market: MarketData::new(&ds, &cfg),
            env_cfg: EnvConfig {
                decision_minutes: 30,
                ..Default::default()
            },
        }
    }

    fn train(&self, cfg: TrainConfig) -> TrainOutcome {
        let reward = Arc::new(DefaultReward {
            inventory_penalty: 2.0,
            terminal_penalty: 50.0,
        });
        let market = MarketConfig::default();
        let envs = execution_envs(
            &cfg,
            &self.market,
            &self.train,
            &self.env_cfg,
            reward,
            &market,
        )
        .unwrap();
        train(TrainSetup::bare(cfg, envs)).unwrap()
    }
}

fn broadcast(program: &str) -> Communication {
    let def = FeatureDef {
        name: "left".into(),
        program: program.into(),
    };
    Communication::new(&[def], Aggregate::Mean).unwrap()
}

/// Four agents, a tilted pace, a short hybrid training.
fn team_config(critic: Critic, communication: Option<Communication>) -> TrainConfig {
    let mut cfg = TrainConfig {
        total_steps: 4 * 32 * 2,
        n_envs: 4,
        team: Some(TeamConfig {
            agents: 4,
            critic,
            peers: 0,
            communication,
            ..TeamConfig::default()
        }),
        ..Default::default()
    };
    cfg.ppo.n_steps = 32;
    cfg.ppo.batch_size = 128;
    cfg.ppo.epochs = 2;
    cfg.ppo.pace = Pace::Tilt(0.5);
    cfg.hybrid.dynamic_envs = 2;
    cfg
}

#[test]
fn mappo_trains_a_team_whose_critic_sees_every_member() {
    let bundled = Bundled::load();
    let cfg = team_config(Critic::Centralized, Some(broadcast("inventory_left")));
    let out = bundled.train(cfg.clone());
    let meta = &out.final_policy.meta;
    // The market's columns, one heard message, the role (2 columns).
    assert_eq!(meta.obs_dim, OBS_DIM + 1 + 2);
    let team = meta.team.as_ref().expect("a team's policy");
    assert_eq!((team.agents, team.mode), (4, TeamMode::Cooperative));
    assert_eq!(
        team.critic_width,
        (1 + 4) * meta.obs_dim,
        "own row + every member"
    );
    assert_eq!(
        out.env_steps,
        4 * 32 * 2,
        "joint steps, every member once each"
    );
    assert!(out.records.iter().all(|r| r.loss.is_finite()));
    assert!(
        out.records.iter().any(|r| r.episodes > 0),
        "episodes finished"
    );
    // The same config trains the same team.
    let again = bundled.train(cfg);
    let weights = |p: &Policy| match &p.model {
        Model::Ppo(m) => m
            .value_head
            .weight
            .val()
            .into_data()
            .try_to_vec::<f32>()
            .unwrap(),
        Model::Ddqn(_) => unreachable!(),
    };
    assert_eq!(weights(&out.final_policy), weights(&again.final_policy));
}

#[test]
fn independent_ppo_gives_each_agent_its_own_critic() {
    let bundled = Bundled::load();
    let out = bundled.train(team_config(Critic::Local, None));
    let team = out.final_policy.meta.team.as_ref().unwrap();
    assert_eq!(team.critic, Critic::Local);
    assert_eq!(team.critic_width, 0, "the critic reads the agent's own row");
    // It plays as a team in the dynamic market.
    let venue = DynamicVenue {
        market: MarketConfig::default(),
        seed: 1,
    };
    let pa = team_pa(
        &out.final_policy,
        &bundled.market,
        &bundled.validation[..3],
        &bundled.env_cfg,
        &venue,
    );
    assert!(pa.is_finite() && pa.abs() < 500.0, "{pa}");
}

/// A team's backtest outcome, every member acting as `strategy` says.
fn team_result(
    bundled: &Bundled,
    strategy: &mut TeamPolicyStrategy,
    o: &ParentOrder,
) -> (f64, Vec<f64>) {
    let venue = DynamicVenue {
        market: MarketConfig::default(),
        seed: 2,
    };
    let view = bundled.market.get(&o.symbol, o.date).unwrap();
    let members = team_orders(o, 4);
    let mut e = venue
        .open_team(view, &members, TeamMode::Cooperative, &bundled.env_cfg)
        .unwrap();
    strategy.reset(view, &members, &bundled.env_cfg);
    let reward = DefaultReward {
        inventory_penalty: 0.0,
        terminal_penalty: 0.0,
    };
    let out = play_team(e.as_mut(), strategy, o, &reward, false);
    (
        out.team.notional,
        out.members.iter().map(|m| m.filled).collect(),
    )
}

/// The trained team's policy head made steep, so that what the members
/// hear moves their schedules by whole shares.
fn steep(mut p: Policy) -> Policy {
    if let Model::Ppo(m) = &mut p.model {
        m.policy_head.weight = m.policy_head.weight.clone().map(|w| w * 20.0);
    }
    p
}

#[test]
fn the_team_hears_its_messages_in_a_backtest_and_silence_is_no_communication() {
    let bundled = Bundled::load();
    let out = bundled.train(team_config(
        Critic::Centralized,
        Some(broadcast("inventory_left")),
    ));
    let policy = steep(out.final_policy);
    // The same team with a communication design whose messages are all
    // zero: what a team without communication hears.
    let mut mute = policy.clone();
    mute.meta.team.as_mut().unwrap().communication = Some(broadcast("0 * inventory_left"));
    // An order the cap does not bind, so that every share of a schedule
    // counts.
    let o = bundled.validation[0].clone();
    let talking = team_result(
        &bundled,
        &mut TeamPolicyStrategy::new(policy.clone(), "mappo".into()),
        &o,
    );
    let silent = team_result(
        &bundled,
        &mut TeamPolicyStrategy::new(policy.clone(), "s".into()).silenced(),
        &o,
    );
    let zero = team_result(&bundled, &mut TeamPolicyStrategy::new(mute, "z".into()), &o);
    assert_ne!(
        talking, silent,
        "what the members hear changes what they trade"
    );
    assert_eq!(silent, zero, "silence is exactly a team that hears nothing");
    // Playing it twice gives the same backtest.
    let again = team_result(
        &bundled,
        &mut TeamPolicyStrategy::new(policy, "mappo".into()),
        &o,
    );
    assert_eq!(talking, again);
}

#[test]
fn a_team_needs_ppo_and_at_most_sixteen_agents() {
    let mut cfg = team_config(Critic::Centralized, None);
    cfg.algo = serl_train::Algo::DDQN;
    let e = cfg.validate(cfg.obs_dim()).unwrap_err().to_string();
    assert!(e.contains("team.agents") && e.contains("PPO"), "{e}");
    let mut cfg = team_config(Critic::Centralized, None);
    cfg.team.as_mut().unwrap().agents = 17;
    let e = cfg.validate(cfg.obs_dim()).unwrap_err().to_string();
    assert!(e.starts_with("train config, team.agents: 17"), "{e}");
}
