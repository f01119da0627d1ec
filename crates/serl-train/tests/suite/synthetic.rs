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
        reward_critic: None,
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
        algo: Algo::DDQN,
        total_steps: 24_000,
        n_envs: 8,
        ..Default::default()
    };
    cfg.ppo.n_steps = 64;
    cfg.table_mut::<serl_train::DdqnLearner>().actions = vec![0.0, 0.125, 0.25];
    cfg.table_mut::<serl_train::DdqnLearner>().gamma = 1.0;
    cfg.table_mut::<serl_train::DdqnLearner>().learning_starts = 500;
    cfg.table_mut::<serl_train::DdqnLearner>()
        .epsilon_decay_steps = 12_000;
    cfg.table_mut::<serl_train::DdqnLearner>().target_every = 400;
    cfg.table_mut::<serl_train::DdqnLearner>().batch_size = 64;
    let share = trained_share_of_optimum(cfg);
    assert!(
        share >= 0.9,
        "DDQN reached {:.0}% of the optimum",
        share * 100.0
    );
}

/// SAC's continuous share, squashed by tanh, learns to sell at the cap
/// early when the price falls and to hold when it rises.
#[test]
fn sac_reaches_ninety_percent_of_the_optimal_pa() {
    let mut cfg = TrainConfig {
        algo: "sac".parse().unwrap(),
        total_steps: 16_000,
        n_envs: 8,
        ..Default::default()
    };
    cfg.ppo.n_steps = 64;
    cfg.table_mut::<serl_train::SacLearner>().gamma = 1.0;
    cfg.table_mut::<serl_train::SacLearner>().learning_starts = 500;
    cfg.table_mut::<serl_train::SacLearner>().learning_rate = 1e-3;
    let share = trained_share_of_optimum(cfg);
    assert!(
        share >= 0.9,
        "SAC reached {:.0}% of the optimum",
        share * 100.0
    );
}

/// A team of three sellers of the same drifting price: each works its own
/// share with its own decisions, and all are paid the team's mean reward.
struct DriftTeam {
    members: Vec<DriftTask>,
}

impl DriftTeam {
    fn new() -> Self {
        DriftTeam {
            members: (0..3).map(|_| DriftTask::new()).collect(),
        }
    }
}

impl TrainEnv for DriftTeam {
    fn obs_dim(&self) -> usize {
        3
    }
    fn source(&self) -> serl_train::Source {
        serl_train::Source::Static
    }
    fn agents(&self) -> usize {
        self.members.len()
    }
    fn reset(&mut self, rng: &mut rand::rngs::SmallRng) {
        // One draw of the direction for the whole team.
        let seed = rand::Rng::random::<u64>(rng);
        for m in &mut self.members {
            m.reset(&mut env_rng(seed, 0));
        }
    }
    fn observe(&self, out: &mut [f32]) {
        self.observe_agent(0, out)
    }
    fn observe_agent(&self, k: usize, out: &mut [f32]) {
        self.members[k].observe(out)
    }
    fn step(&mut self, _action: f64) -> (f64, bool) {
        unreachable!("a team steps all at once")
    }
    fn step_agents(&mut self, actions: &[(f64, u8)], rewards: &mut [f64]) -> bool {
        let mut done = false;
        for ((m, a), r) in self.members.iter_mut().zip(actions).zip(rewards.iter_mut()) {
            (*r, done) = m.step(a.0);
        }
        let team = rewards.iter().sum::<f64>() / rewards.len() as f64;
        rewards.fill(team);
        done
    }
    fn episode_pa(&self) -> f64 {
        self.members.iter().map(|m| m.episode_pa()).sum::<f64>() / self.members.len() as f64
    }
}

/// The team's greedy PA over `episodes` episodes: every member decides from
/// its own row, all in one batch.
fn greedy_team_pa(policy: &Policy, episodes: usize) -> f64 {
    let mut team = DriftTeam::new();
    let mut rng = env_rng(99, 0);
    let (n, d) = (team.agents(), policy.meta.obs_dim);
    let mut rows = vec![0f32; n * d];
    let mut total = 0.0;
    for _ in 0..episodes {
        team.reset(&mut rng);
        loop {
            for (k, row) in rows.chunks_mut(d).enumerate() {
                team.observe_agent(k, row);
                policy.meta.norm.apply(row);
            }
            let acts: Vec<(f64, u8)> = policy
                .act(&rows, n, false, 0.0, &mut rng)
                .iter()
                .map(|a| (a.env_action, 0))
                .collect();
            if team.step_agents(&acts, &mut vec![0.0; n]) {
                break;
            }
        }
        total += team.episode_pa();
    }
    total / episodes as f64
}

/// MAPPO (the critic sees all three members) and independent PPO both
/// learn the team's optimum: every row of the rollout is a member.
#[test]
fn a_team_of_three_learns_the_optimum_with_mappo_and_with_independent_ppo() {
    for critic in [serl_train::Critic::Centralized, serl_train::Critic::Local] {
        let mut cfg = TrainConfig {
            total_steps: 20_000,
            n_envs: 8,
            team: Some(serl_train::TeamConfig {
                agents: 3,
                critic,
                ..Default::default()
            }),
            ..Default::default()
        };
        cfg.ppo.n_steps = 64;
        cfg.ppo.batch_size = 256;
        cfg.ppo.epochs = 4;
        cfg.ppo.learning_rate = 3e-3;
        cfg.ppo.gamma = 1.0;
        let out = train(TrainSetup {
            config: cfg,
            envs: (0..8)
                .map(|_| Box::new(DriftTeam::new()) as Box<dyn TrainEnv>)
                .collect(),
            validate: None,
            run_dir: None,
            resume: false,
            on_update: None,
            reward_critic: None,
        })
        .expect("training runs");
        let optimum = DriftTask::new().optimal_pa();
        let pa = greedy_team_pa(&out.policy, 200);
        assert!(
            pa >= 0.9 * optimum,
            "{critic:?}: the team reached {pa:.2} bps of an optimal {optimum:.2}"
        );
    }
}
