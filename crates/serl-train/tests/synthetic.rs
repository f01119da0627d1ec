//! The learners are proven on a task whose optimum is known in closed
//! form: a sell order whose price drifts up or down, the direction shown
//! in the observation. The best policy sells at the cap early when the
//! price falls and late when it rises; TWAP earns 0.

use serl_train::{env_rng, train, Algo, DriftTask, Policy, TrainConfig, TrainEnv, TrainSetup};

/// Mean episode PA of `policy`, acting greedily, over `episodes` episodes
/// of `env` (episode `i` drawn with seed `seed + i`).
fn greedy_pa(policy: &Policy, env: &mut dyn TrainEnv, episodes: usize, seed: u64) -> f64 {
    assert_eq!(policy.meta.spec.window, 1, "one observation per decision");
    let mut rng = env_rng(seed, 0);
    let mut obs = vec![0f32; policy.meta.obs_dim];
    let mut total = 0.0;
    for _ in 0..episodes {
        env.reset(&mut rng);
        loop {
            env.observe(&mut obs);
            policy.meta.norm.apply(&mut obs);
            let a = policy.act(&obs, 1, false, 0.0, &mut rng)[0].env_action;
            if env.step(a).1 {
                break;
            }
        }
        total += env.episode_pa();
    }
    total / episodes.max(1) as f64
}

fn drift_envs(n: usize) -> Vec<Box<dyn TrainEnv>> {
    (0..n)
        .map(|_| Box::new(DriftTask::new()) as Box<dyn TrainEnv>)
        .collect()
}

fn trained_share_of_optimum(cfg: TrainConfig) -> f64 {
    let n = cfg.n_envs;
    let out = train(TrainSetup {
        config: cfg,
        envs: drift_envs(n),
        validate: None,
        run_dir: None,
        resume: false,
        on_update: None,
    })
    .expect("training runs");
    let mut task = DriftTask::new();
    let optimum = task.optimal_pa();
    let pa = greedy_pa(&out.policy, &mut task, 200, 99);
    eprintln!("greedy PA {pa:.3} bps of an optimal {optimum:.3}");
    pa / optimum
}

#[test]
fn ppo_reaches_ninety_percent_of_the_optimal_pa() {
    let mut cfg = TrainConfig {
        total_steps: 40_000,
        n_envs: 8,
        ..Default::default()
    };
    cfg.ppo.n_steps = 64;
    cfg.ppo.batch_size = 128;
    cfg.ppo.epochs = 4;
    cfg.ppo.learning_rate = 3e-3;
    cfg.ppo.gamma = 1.0;
    let share = trained_share_of_optimum(cfg);
    assert!(
        share >= 0.9,
        "PPO reached {:.0}% of the optimum",
        share * 100.0
    );
}

#[test]
fn ddqn_reaches_ninety_percent_of_the_optimal_pa() {
    let mut cfg = TrainConfig {
        algo: Algo::Ddqn,
        total_steps: 24_000,
        n_envs: 8,
        ..Default::default()
    };
    cfg.ppo.n_steps = 64;
    cfg.ddqn.actions = vec![0.0, 0.125, 0.25];
    cfg.ddqn.gamma = 1.0;
    cfg.ddqn.learning_starts = 500;
    cfg.ddqn.epsilon_decay_steps = 12_000;
    cfg.ddqn.target_every = 400;
    cfg.ddqn.batch_size = 64;
    let share = trained_share_of_optimum(cfg);
    assert!(
        share >= 0.9,
        "DDQN reached {:.0}% of the optimum",
        share * 100.0
    );
}
