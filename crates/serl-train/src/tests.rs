//! Real training, however short, on the bundled LEAN sample (a unit test
//! because it compares with the untrained network, which only the crate
//! can build): the loss
//! falls and the trained policy's validation PA beats its untrained
//! network's. (Uniform random actions are no bar here: they front-load the
//! order, and on the sample's validation days a favourable drift pays them
//! 22.7 bps, more than 6,144 or 24,576 training steps reach; the learners'
//! correctness is proven on `DriftTask`, whose optimum is known.)

use std::path::Path;
use std::sync::Arc;

use crate::run::initial_policy;
use crate::{static_pa, train, ExecutionEnv, TrainConfig, TrainEnv, TrainSetup};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serl_data::{DataConfig, Split};
use serl_env::{generate_orders, DefaultReward, EnvConfig, MarketData, OrderConfig};
use serl_env::{DynamicVenue, StaticVenue, Venue};

/// The bundled LEAN sample, 30-minute decisions and the default reward.
fn bundled() -> (
    serl_data::Dataset,
    DataConfig,
    EnvConfig,
    Arc<DefaultReward>,
) {
    let data = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"))
        .join("../../data/lean");
    let data_cfg = DataConfig::default();
    let ds = serl_data::load(&data, &data_cfg).unwrap();
    let env_cfg = EnvConfig {
        decision_minutes: 30,
        ..Default::default()
    };
    let reward = Arc::new(DefaultReward {
        inventory_penalty: 2.0,
        terminal_penalty: 50.0,
    });
    (ds, data_cfg, env_cfg, reward)
}

#[test]
fn training_on_bundled_data_lowers_the_loss_and_beats_its_untrained_network() {
    let (ds, data_cfg, env_cfg, reward) = bundled();
    let orders = OrderConfig {
        per_session: 4,
        ..Default::default()
    };
    let train_orders = generate_orders(&ds, Split::Train, &data_cfg, &orders).unwrap();
    let val_orders = generate_orders(&ds, Split::Validation, &data_cfg, &orders).unwrap();
    let market = MarketData::new(&ds, &data_cfg);
    let envs: Vec<Box<dyn TrainEnv + '_>> = (0..8)
        .map(|i| {
            let venue: Box<dyn Venue + Send> = if i < 7 {
                Box::new(StaticVenue)
            } else {
                Box::new(DynamicVenue {
                    market: Default::default(),
                    seed: 0,
                })
            };
            Box::new(ExecutionEnv::new(
                &market,
                &train_orders,
                &env_cfg,
                reward.clone(),
                venue,
            )) as Box<dyn TrainEnv + '_>
        })
        .collect();
    let mut cfg = TrainConfig {
        total_steps: 8 * 64 * 12,
        n_envs: 8,
        eval_every: 4,
        ..Default::default()
    };
    let untrained = initial_policy(&cfg, serl_env::OBS_DIM).unwrap();
    cfg.ppo.n_steps = 64;
    cfg.ppo.batch_size = 128;
    cfg.ppo.learning_rate = 1e-3;
    cfg.hybrid.dynamic_envs = 1;
    let out = train(TrainSetup {
        config: cfg.clone(),
        envs,
        validate: Some(Box::new(|p| static_pa(p, &market, &val_orders, &env_cfg))),
        run_dir: None,
        resume: false,
        on_update: None,
        reward_critic: None,
    })
    .unwrap();

    let loss = |r: &crate::UpdateRecord| r.value_loss.unwrap();
    let first = loss(&out.records[0]);
    let last = out.records[out.records.len() - 2..]
        .iter()
        .map(loss)
        .sum::<f64>()
        / 2.0;
    assert!(last < first, "value loss {first} -> {last}");
    assert!(
        out.records.iter().any(|r| r.loss_dynamic.is_some()),
        "the dynamic environment took part"
    );

    let trained = static_pa(&out.policy, &market, &val_orders, &env_cfg);
    let initial = static_pa(&untrained, &market, &val_orders, &env_cfg);
    assert!(
        trained > initial,
        "validation PA: trained {trained} vs its untrained network {initial}"
    );
}

#[test]
fn a_replay_on_imagined_days_sees_the_scenario_drift_in_its_returns() {
    let (ds, data_cfg, env_cfg, reward) = bundled();
    let orders = generate_orders(&ds, Split::Train, &data_cfg, &OrderConfig::default()).unwrap();
    let market = MarketData::new(&ds, &data_cfg);
    let env = || {
        ExecutionEnv::new(
            &market,
            &orders,
            &env_cfg,
            reward.clone(),
            Box::new(StaticVenue),
        )
    };
    let rising = serl_env::Scenario {
        drift_bps: 390.0,
        ..Default::default()
    };
    let mut real = env();
    let mut imagined = env().with_imagined_replay(1.0, &[rising]);
    let ret_60 = serl_env::obs::feature_names()
        .iter()
        .position(|n| n == "ret_60")
        .unwrap();
    for seed in 0..5 {
        // The same seed draws the same order first.
        real.reset(&mut SmallRng::seed_from_u64(seed));
        imagined.reset(&mut SmallRng::seed_from_u64(seed));
        for _ in 0..3 {
            real.step(0.1);
            imagined.step(0.1);
        }
        let (mut a, mut b) = ([0f32; serl_env::OBS_DIM], [0f32; serl_env::OBS_DIM]);
        real.observe(&mut a);
        imagined.observe(&mut b);
        // 390 bps over the day is 1 bps a minute: 60 bps over the last
        // hour, signed by the order's side (the feature is in bps ÷ 10).
        let extra = (b[ret_60] - a[ret_60]).abs();
        assert!((extra - 6.0).abs() < 0.5, "seed {seed}: {extra}");
    }
}

/// A planted forecast reaches a designed feature in training, signed
/// against each order, and nowhere else: the observation's own columns
/// are the same with and without it.
#[test]
fn a_designed_feature_reads_the_planted_signal_in_training() {
    let (mut ds, data_cfg, env_cfg, reward) = bundled();
    let orders = generate_orders(&ds, Split::Train, &data_cfg, &OrderConfig::default()).unwrap();
    let plain = MarketData::new(&ds, &data_cfg);
    for s in &mut ds.sessions {
        s.signal = Some(vec![0.75; s.len()]);
    }
    let planted = MarketData::new(&ds, &data_cfg);
    assert!(planted.has_signal() && !plain.has_signal());
    let edge = serl_design::FeatureDef {
        name: "edge".into(),
        program: "signal * 2".into(),
    };
    let mut cfg = TrainConfig {
        n_envs: 1,
        features: serl_design::check_features(&[edge]).unwrap(),
        ..Default::default()
    };
    cfg.hybrid.mode = crate::HybridMode::StaticOnly;
    let base = serl_env::MarketConfig::default();
    let envs = |market| {
        crate::execution_envs(&cfg, market, &orders, &env_cfg, reward.clone(), &base).unwrap()
    };
    let (mut with, mut without) = (envs(&planted), envs(&plain));
    let dim = with[0].obs_dim();
    assert_eq!(
        dim,
        serl_env::OBS_DIM + 1,
        "the signal is no column of its own"
    );
    let (mut a, mut b) = (vec![0f32; dim], vec![0f32; dim]);
    for k in 0..6 {
        let mut rng = SmallRng::seed_from_u64(k);
        with[0].reset_to(k as usize, &mut rng.clone());
        without[0].reset_to(k as usize, &mut rng);
        // The first decision knows no bar yet: the second reads one.
        assert_eq!(with[0].signal(), 0.0);
        with[0].step(0.1);
        without[0].step(0.1);
        with[0].observe(&mut a);
        without[0].observe(&mut b);
        let side = orders[k as usize % orders.len()].side.sign() as f32;
        assert_eq!(a[..dim - 1], b[..dim - 1], "the observation is the same");
        assert_eq!((a[dim - 1], b[dim - 1]), (1.5 * side, 0.0), "order {k}");
    }
}

/// A placing agent's designed feature of its resting order: the column it
/// reads is the queue state the environment writes after the market's,
/// and a crossing agent's config that names it is refused.
#[test]
fn a_placing_agents_designed_features_read_its_resting_order() {
    use serl_env::{obs::OBS_DIM, Placement, QueueState};
    // A placing agent's observation: the market's columns, its queue's,
    // then the feature.
    let queued = OBS_DIM + QueueState::COLUMNS;
    let (ds, data_cfg, _, reward) = bundled();
    let env_cfg = EnvConfig::default();
    let orders = generate_orders(&ds, Split::Train, &data_cfg, &OrderConfig::default()).unwrap();
    let market = MarketData::new(&ds, &data_cfg);
    let waited = serl_design::FeatureDef {
        name: "waited".into(),
        program: "minutes_resting * 10".into(),
    };
    let mut cfg = TrainConfig {
        n_envs: 1,
        features: serl_design::check_features(&[waited]).unwrap(),
        ..Default::default()
    };
    cfg.hybrid.mode = crate::HybridMode::StaticOnly;
    cfg.ppo.discrete = vec![0.05];
    let e = cfg.validate(queued + 1).unwrap_err().to_string();
    assert!(
        e.contains("features.waited: reads `minutes_resting`"),
        "{e}"
    );

    cfg.placements = vec![Placement::Cross, Placement::Passive { ticks: 0 }];
    cfg.validate(queued + 1).unwrap();
    let base = serl_env::MarketConfig::default();
    let mut envs = crate::execution_envs(&cfg, &market, &orders, &env_cfg, reward, &base).unwrap();
    let env = &mut envs[0];
    assert_eq!(env.obs_dim(), queued + 1);
    assert_eq!(env.obs_dim(), cfg.obs_dim());
    env.reset(&mut SmallRng::seed_from_u64(3));
    let mut obs = vec![0f32; env.obs_dim()];
    let mut longest = 0f32;
    for _ in 0..20 {
        // Placement 1: rest the step's share at the touch.
        if env.step_placed(0.05, 1).1 {
            break;
        }
        env.observe(&mut obs);
        let minutes = obs[queued - 1] * 10.0;
        assert_eq!(obs[queued], minutes, "the feature reads the queue column");
        longest = longest.max(minutes);
    }
    assert!(longest >= env_cfg.decision_minutes as f32, "{longest}");
}
