//! One PPO update in the reference shape (Stable-Baselines3's MlpPolicy
//! [64, 64] tanh, 8 environments × 2048 steps, batches of 256), with the
//! fused learner and with burn's autodiff learner. One epoch (64
//! minibatches) per iteration; `serl bench train` times the whole loop.

use criterion::{criterion_group, criterion_main, Criterion};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serl_train::parts::{ppo_optimizer, ppo_update, ActorCritic, FusedPpo, Rollout};
use serl_train::{
    Algo, DeviceChoice, Head, LossWeights, NetworkSpec, PolicyMeta, PpoConfig, RunningNorm, Source,
    Squash,
};

const OBS: usize = 29;

fn rollout() -> Rollout {
    let (n_envs, steps) = (8, 2048);
    let n = n_envs * steps;
    let mut rng = SmallRng::seed_from_u64(1);
    let mut column = |lo: f32, hi: f32, len: usize| -> Vec<f32> {
        (0..len).map(|_| rng.random_range(lo..hi)).collect()
    };
    Rollout {
        n_envs,
        steps,
        width: OBS,
        obs: column(-2.0, 2.0, n * OBS),
        raw: column(-1.0, 1.0, n),
        log_prob: column(-1.5, -0.5, n),
        value: column(-0.1, 0.1, n),
        reward: column(-1.0, 1.0, n),
        done: (0..n).map(|i| i % 390 == 389).collect(),
        source: vec![Source::Static; n_envs],
        last_value: vec![0.0; n_envs],
        critic_obs: Vec::new(),
        critic_width: 0,
    }
}

fn update(c: &mut Criterion) {
    let device = DeviceChoice::Cpu.device().expect("the CPU").autodiff();
    let meta = PolicyMeta {
        algo: Algo::PPO,
        spec: NetworkSpec::mlp(&[64, 64]),
        obs_dim: OBS,
        head: Head::Gaussian,
        squash: Squash::Clip,
        pace: Default::default(),
        discrete: Vec::new(),
        norm: RunningNorm::new(OBS),
        features: Default::default(),
        message_dims: 0,
        placements: Vec::new(),
        team: None,
    };
    let model = ActorCritic::new(&meta.spec, OBS, meta.head, &device).expect("a valid spec");
    let cfg = PpoConfig {
        epochs: 1,
        ..PpoConfig::default()
    };
    let r = rollout();
    let weights = LossWeights {
        alpha: 1.0,
        beta: 0.0,
    };
    let mut g = c.benchmark_group("ppo update, 64 minibatches of 256");
    g.sample_size(10);
    let mut fused = FusedPpo::new(&model, &meta).expect("an MLP");
    g.bench_function("fused", |b| {
        b.iter(|| fused.update(&cfg, &r, weights, &mut SmallRng::seed_from_u64(2)))
    });
    let mut optim = ppo_optimizer(&cfg);
    let mut m = Some(model);
    g.bench_function("burn autodiff", |b| {
        b.iter(|| {
            let (next, stats) = ppo_update(
                m.take().expect("the model"),
                &mut optim,
                &cfg,
                &r,
                weights,
                &mut SmallRng::seed_from_u64(2),
            );
            m = Some(next);
            stats
        })
    });
    g.finish();
}

criterion_group!(benches, update);
criterion_main!(benches);
