//! The fused learner must be burn's learner, only faster: the same
//! gradients for every tensor, and the same weights after an update.

use burn::module::Module;
use burn::nn::Linear;
use burn::optim::GradientsParams;
use rand::{Rng, SeedableRng};
use serl_design::{Activation, BlockSpec, NetworkSpec};

use super::kernels::tanh;
use super::*;
use crate::algo::Algo;
use crate::net::Block;
use crate::normalize::RunningNorm;
use crate::policy::Squash;
use crate::tensors::floats;
use serl_env::Source;

const OBS: usize = 5;

/// Columns of the observation a spec's tests use: a book attention reads
/// the book's columns, so it takes serl's whole observation.
pub(super) fn obs_of(spec: &NetworkSpec) -> usize {
    let attends = spec
        .blocks
        .iter()
        .any(|b| matches!(b, BlockSpec::BookAttention { .. }));
    if attends {
        serl_env::OBS_DIM
    } else {
        OBS
    }
}

fn spec(activation: Activation) -> NetworkSpec {
    NetworkSpec {
        window: 2,
        blocks: vec![
            BlockSpec::Dense {
                width: 16,
                activation,
            },
            BlockSpec::Dense {
                width: 8,
                activation,
            },
        ],
    }
}

/// Layer norms on the input and between two dense layers.
fn normed() -> NetworkSpec {
    let mut s = spec(Activation::Tanh);
    s.blocks.insert(0, BlockSpec::LayerNorm);
    s.blocks.insert(2, BlockSpec::LayerNorm);
    s
}

/// A residual block (relu inside) between two dense layers, and a
/// layer norm after it.
fn residual() -> NetworkSpec {
    let mut s = spec(Activation::Tanh);
    s.blocks.insert(
        1,
        BlockSpec::Residual {
            activation: Activation::Relu,
        },
    );
    s.blocks.insert(2, BlockSpec::LayerNorm);
    s
}

fn meta(head: Head, spec: NetworkSpec) -> PolicyMeta {
    let obs = obs_of(&spec);
    PolicyMeta {
        algo: Algo::PPO,
        spec,
        obs_dim: obs,
        head,
        squash: Squash::Clip,
        pace: Default::default(),
        discrete: match head {
            Head::Gaussian => Vec::new(),
            Head::Categorical(k) => (0..k).map(|a| a as f64 / (k - 1) as f64).collect(),
        },
        norm: RunningNorm::new(obs),
        features: Default::default(),
        message_dims: 0,
        placements: Vec::new(),
        team: None,
    }
}

fn config(head: Head) -> PpoConfig {
    PpoConfig {
        entropy_coef: 0.01,
        learning_rate: 0.01,
        batch_size: 16,
        epochs: 2,
        discrete: match head {
            Head::Gaussian => Vec::new(),
            Head::Categorical(k) => vec![0.0; k],
        },
        ..PpoConfig::default()
    }
}

/// A rollout of two environments (one static, one dynamic) whose
/// stored log-probabilities are the current policy's, perturbed so
/// that some ratios leave the clip range.
fn rollout(m: &PolicyMeta, model: &ActorCritic, rng: &mut SmallRng) -> Rollout {
    let (n_envs, steps) = (2, 16);
    let width = m.obs_dim * m.spec.window;
    let obs: Vec<f32> = (0..n_envs * steps * width)
        .map(|_| rng.random_range(-2.0..2.0))
        .collect();
    let policy = crate::policy::Policy {
        meta: m.clone(),
        model: crate::policy::Model::Ppo(model.valid()),
        device: crate::DeviceChoice::Cpu.device().expect("the CPU"),
    };
    let sampled = policy.act(&obs, n_envs * steps, true, 0.0, rng);
    Rollout {
        n_envs,
        steps,
        width,
        raw: sampled.iter().map(|s| s.raw).collect(),
        log_prob: sampled
            .iter()
            .map(|s| s.log_prob + rng.random_range(-0.4..0.4))
            .collect(),
        value: sampled.iter().map(|s| s.value).collect(),
        reward: (0..n_envs * steps)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect(),
        done: (0..n_envs * steps).map(|i| i % 7 == 6).collect(),
        source: vec![Source::Static, Source::Dynamic],
        last_value: vec![0.1, -0.2],
        obs,
        critic_obs: Vec::new(),
        critic_width: 0,
    }
}

fn setup(head: Head, spec: NetworkSpec) -> (PolicyMeta, ActorCritic, SmallRng) {
    let device = crate::DeviceChoice::Cpu
        .device()
        .expect("the CPU")
        .autodiff();
    device.seed(3);
    let m = meta(head, spec);
    let model = ActorCritic::new(&m.spec, m.obs_dim, head, &device).expect("a valid spec");
    (m, model, SmallRng::seed_from_u64(11))
}

/// Every tensor's gradient as burn computes it, in the fused order.
fn burn_gradients(
    model: &ActorCritic,
    loss: Tensor<1>,
    head: Head,
) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let grads = loss.backward();
    let grads = GradientsParams::from_grads(grads, model);
    let linear = |l: &Linear| {
        vec![
            floats(grads.get::<2>(l.weight.id).expect("weight gradient")),
            floats1(
                grads
                    .get::<1>(l.bias.as_ref().expect("bias").id)
                    .expect("bias gradient"),
            ),
        ]
    };
    let trunk = |t: &crate::net::Trunk, head: &Linear| {
        let mut out = Vec::new();
        for b in t.blocks() {
            match b {
                Block::Dense(d) => out.extend(linear(d.linear())),
                Block::Norm(n) => {
                    let beta = n.beta.as_ref().expect("beta");
                    for id in [n.gamma.id, beta.id] {
                        out.push(floats1(grads.get::<1>(id).expect("norm gradient")));
                    }
                }
                Block::Residual(r) => {
                    out.extend(linear(r.first()));
                    out.extend(linear(r.second()));
                }
                Block::Gru(g) => {
                    let gru = g.gru();
                    for gate in [&gru.update_gate, &gru.reset_gate, &gru.new_gate] {
                        out.extend(linear(&gate.input_transform));
                        out.extend(linear(&gate.hidden_transform));
                    }
                }
                Block::Attention(a) => {
                    out.extend(linear(a.embed()));
                    let mha = a.attention();
                    for l in [&mha.query, &mha.key, &mha.value, &mha.output] {
                        out.extend(linear(l));
                    }
                }
            }
        }
        out.extend(linear(head));
        out
    };
    let mut actor = trunk(&model.actor, &model.policy_head);
    if head == Head::Gaussian {
        actor.push(floats1(
            grads.get::<1>(model.log_std.id).expect("log_std gradient"),
        ));
    }
    (actor, trunk(&model.critic, &model.value_head))
}

pub(super) fn max_difference(a: &[Vec<f32>], b: &[Vec<f32>]) -> (f32, f32) {
    assert_eq!(a.len(), b.len(), "tensor count");
    let mut diff = 0f32;
    let mut scale = 0f32;
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.len(), y.len(), "tensor size");
        for (p, q) in x.iter().zip(y) {
            diff = diff.max((p - q).abs());
            scale = scale.max(p.abs());
        }
    }
    (diff, scale)
}

fn gradients_match(head: Head, spec: NetworkSpec) {
    let (m, model, mut rng) = setup(head, spec);
    let r = rollout(&m, &model, &mut rng);
    compare_gradients(&m, &model, &r, head);
}

/// MAPPO's critic reads rows of its own (`critic_obs`), wider than the
/// actor's: the fused critic must take the same gradients from them.
#[test]
fn fused_gradients_are_burns_with_a_centralised_critic() {
    for head in [Head::Gaussian, Head::Categorical(3)] {
        let device = crate::DeviceChoice::Cpu
            .device()
            .expect("the CPU")
            .autodiff();
        device.seed(5);
        let mut m = meta(head, normed());
        let joint = (m.spec.window + 3) * OBS;
        m.team = Some(crate::policy::TeamMeta {
            agents: 3,
            mode: serl_env::TeamMode::Cooperative,
            critic: crate::team::Critic::Centralized,
            critic_width: joint,
            communication: None,
        });
        let model = ActorCritic::with_critic_input(&m.spec, OBS, Some(joint), head, &device)
            .expect("a valid spec");
        let mut rng = SmallRng::seed_from_u64(13);
        let mut r = rollout(&m, &model, &mut rng);
        r.critic_width = joint;
        r.critic_obs = (0..r.raw.len() * joint)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        compare_gradients(&m, &model, &r, head);
    }
}

fn compare_gradients(m: &PolicyMeta, model: &ActorCritic, r: &Rollout, head: Head) {
    let cfg = config(head);
    let (adv, ret) = gae(r, 0.99, 0.95);
    let rows: Vec<usize> = (0..r.raw.len()).step_by(3).collect();
    let mut mb = Minibatch::default();
    mb.gather(r, &adv, &ret, &rows);
    let weights = LossWeights {
        alpha: 0.3,
        beta: 0.7,
    };

    let loss = crate::ppo::loss(model, &cfg, &mb, weights);
    let (burn_actor, burn_critic) = burn_gradients(model, loss.total, head);
    let fused = FusedPpo::new(model, m).expect("an MLP");
    let (((actor, _), _), (critic, _)) = fused.gradients(
        &cfg,
        &mb,
        &mb.sample_weights(weights),
        None,
        &mut Workspace::default(),
    );

    for (name, ours, theirs) in [
        ("actor", &actor, &burn_actor),
        ("critic", &critic, &burn_critic),
    ] {
        let (diff, scale) = max_difference(ours, theirs);
        assert!(scale > 1e-4, "{name}: the loss should have a gradient");
        assert!(
            diff <= 1e-4 * scale.max(1.0),
            "{name}: fused and burn gradients differ by {diff} (scale {scale})"
        );
    }
}

#[test]
fn fused_gradients_are_burns_for_a_gaussian_tanh_policy() {
    gradients_match(Head::Gaussian, spec(Activation::Tanh));
}

#[test]
fn fused_gradients_are_burns_for_a_categorical_relu_policy() {
    gradients_match(Head::Categorical(4), spec(Activation::Relu));
}

#[test]
fn fused_gradients_are_burns_for_sigmoid_and_identity_layers() {
    gradients_match(Head::Gaussian, spec(Activation::Sigmoid));
    gradients_match(Head::Categorical(3), spec(Activation::Identity));
}

#[test]
fn fused_gradients_are_burns_through_layer_norms() {
    gradients_match(Head::Gaussian, normed());
    gradients_match(Head::Categorical(4), normed());
}

#[test]
fn fused_gradients_are_burns_through_residual_blocks() {
    gradients_match(Head::Gaussian, residual());
    gradients_match(Head::Categorical(3), residual());
}

#[test]
fn a_fused_update_through_a_residual_block_is_a_burn_update() {
    update_matches(residual());
}

#[test]
fn a_fused_update_leaves_the_weights_and_figures_of_a_burn_update() {
    update_matches(spec(Activation::Tanh));
}

/// After an update γ and β are no longer 1 and 0, so this also checks
/// the layer norm's gradients away from its initial values.
#[test]
fn a_fused_update_through_layer_norms_is_a_burn_update() {
    update_matches(normed());
}

fn update_matches(spec: NetworkSpec) {
    let head = Head::Gaussian;
    let (m, model, mut rng) = setup(head, spec);
    let cfg = config(head);
    let r = rollout(&m, &model, &mut rng);
    let weights = LossWeights {
        alpha: 0.4,
        beta: 0.6,
    };

    let mut fused = FusedPpo::new(&model, &m).expect("an MLP");
    let ours = fused.update(&cfg, &r, weights, &mut SmallRng::seed_from_u64(5));
    let mut optim = crate::ppo::optimizer(&cfg);
    let (trained, theirs) = crate::ppo::update(
        model.clone(),
        &mut optim,
        &cfg,
        &r,
        weights,
        &mut SmallRng::seed_from_u64(5),
    );

    let figures = |s: &PpoStats| {
        [
            s.loss,
            s.policy_loss,
            s.value_loss,
            s.entropy,
            s.approx_kl,
            s.clip_fraction,
            s.loss_static.unwrap_or(f64::NAN),
            s.loss_dynamic.unwrap_or(f64::NAN),
        ]
    };
    assert_figures_close(
        &figures(&ours),
        &figures(&theirs),
        &format!("{ours:?}\n{theirs:?}"),
    );
    let burn_twin = FusedPpo::new(&trained, &m).expect("an MLP");
    let (diff, _) = max_difference(&fused.actor.params, &burn_twin.actor.params);
    assert!(diff < 1e-3, "actor weights differ by {diff}");
    let (diff, _) = max_difference(&fused.critic.params, &burn_twin.critic.params);
    assert!(diff < 1e-3, "critic weights differ by {diff}");

    // Written back, the burn model acts as the fused one does.
    let mut mirrored = model;
    fused.write_into(&mut mirrored);
    let (diff, _) = max_difference(
        &FusedPpo::new(&mirrored, &m).expect("an MLP").actor.params,
        &fused.actor.params,
    );
    assert_eq!(diff, 0.0);
}

#[test]
fn the_rational_tanh_is_within_a_few_ulp_of_libm() {
    let mut worst = 0f32;
    for i in -200_000..=200_000 {
        let x = i as f32 * 1e-4;
        worst = worst.max((tanh(x) - x.tanh()).abs());
    }
    assert!(worst < 5e-7, "largest error {worst}");
    assert_eq!(tanh(40.0), 1.0);
    assert_eq!(tanh(-40.0), -1.0);
}

#[test]
fn fused_gradients_are_burns_through_gelu_layers() {
    // burn's GELU: erf on the way forward, the slope of its tanh
    // approximation on the way back; a dense GELU layer and a residual
    // block with GELU inside.
    gradients_match(Head::Categorical(3), spec(Activation::Gelu));
    let mut s = spec(Activation::Tanh);
    s.blocks.insert(
        1,
        BlockSpec::Residual {
            activation: Activation::Gelu,
        },
    );
    gradients_match(Head::Gaussian, s);
}

#[test]
fn a_fused_update_through_gelu_layers_is_a_burn_update() {
    update_matches(spec(Activation::Gelu));
}

/// A GRU over a window of three observations, then a dense layer.
fn gru() -> NetworkSpec {
    NetworkSpec {
        window: 3,
        blocks: vec![
            BlockSpec::Gru { hidden: 6 },
            BlockSpec::Dense {
                width: 8,
                activation: Activation::Tanh,
            },
        ],
    }
}

#[test]
fn fused_gradients_are_burns_through_a_gru() {
    // Back through the window: each step's gates, and the hidden state
    // carried from one step to the next.
    gradients_match(Head::Gaussian, gru());
    gradients_match(Head::Categorical(3), gru());
}

#[test]
fn a_fused_update_through_a_gru_is_a_burn_update() {
    update_matches(gru());
}

/// Book attention over the newest of two observations (two heads), then
/// a dense GELU layer.
pub(super) fn attention() -> NetworkSpec {
    NetworkSpec {
        window: 2,
        blocks: vec![
            BlockSpec::BookAttention {
                d_model: 8,
                heads: 2,
            },
            BlockSpec::Dense {
                width: 8,
                activation: Activation::Gelu,
            },
        ],
    }
}

#[test]
fn fused_gradients_are_burns_through_book_attention() {
    // Through the mean over the tokens, the output layer, each head's
    // softmax and its queries, keys and values, into the embedding.
    gradients_match(Head::Gaussian, attention());
    gradients_match(Head::Categorical(3), attention());
}

#[test]
fn a_fused_update_through_book_attention_is_a_burn_update() {
    update_matches(attention());
}

#[test]
fn every_block_of_the_grammar_trains_fused() {
    let device = crate::DeviceChoice::Cpu.device().expect("the CPU");
    for spec in [
        attention(),
        gru(),
        normed(),
        residual(),
        spec(Activation::Gelu),
    ] {
        let m = meta(Head::Gaussian, spec);
        let model = ActorCritic::new(&m.spec, m.obs_dim, m.head, &device).expect("a valid spec");
        assert!(FusedPpo::new(&model, &m).is_some(), "{:?}", m.spec);
        assert!(implements(&m.spec));
    }
}

#[test]
fn a_large_product_split_across_threads_gives_the_same_bits() {
    // A 256-row minibatch through a 960-wide layer, forward (a·b) and the
    // weight gradient (aᵀ·δ): the shapes the threads take.
    let mut rng = SmallRng::seed_from_u64(3);
    let (m, k, n) = (256, 960, 960);
    let a: Vec<f32> = (0..m * k).map(|_| rng.random_range(-1.0..1.0)).collect();
    let b: Vec<f32> = (0..k * n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    for (ta, rows, inner) in [(false, m, k), (true, k, m)] {
        let product = |threads, out: &mut [f32]| {
            let b = &b[..inner * n];
            super::kernels::gemm_on(threads, [rows, inner, n], (&a, ta), (b, false), out)
        };
        let mut one = vec![0f32; rows * n];
        let mut four = vec![0f32; rows * n];
        product(gemm::Parallelism::None, &mut one);
        pool.install(|| product(gemm::Parallelism::Rayon(4), &mut four));
        assert!(one
            .iter()
            .zip(&four)
            .all(|(x, y)| x.to_bits() == y.to_bits()));
    }
}

/// Each of a fused learner's figures within 10⁻⁴ (relative, or absolute
/// below 1) of burn's.
pub(super) fn assert_figures_close(ours: &[f64], theirs: &[f64], context: &str) {
    for (a, b) in ours.iter().zip(theirs) {
        assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{context}");
    }
}

/// A greedy decision through the fused network is burn's: the same
/// action, and the Gaussian's mean to rounding, for every block of the
/// grammar and both learners' networks.
#[test]
fn greedy_decisions_through_the_fused_network_are_burns() {
    let device = crate::DeviceChoice::Cpu.device().expect("the CPU");
    let mut rng = SmallRng::seed_from_u64(5);
    let specs = [
        attention(),
        gru(),
        normed(),
        residual(),
        spec(Activation::Gelu),
    ];
    const SAC: Algo = Algo::from_key("sac");
    for (spec, algo, head) in specs.iter().flat_map(|s| {
        [
            (s.clone(), Algo::PPO, Head::Gaussian),
            (s.clone(), Algo::PPO, Head::Categorical(3)),
            (s.clone(), Algo::DDQN, Head::Categorical(3)),
            (s.clone(), SAC, Head::Gaussian),
        ]
    }) {
        let mut m = meta(head, spec);
        m.algo = algo;
        if algo == SAC {
            m.squash = Squash::Tanh;
        }
        let model = crate::registry::registered(algo)
            .network(&m, &device)
            .expect("a valid spec");
        let net = GreedyNet::new(&model).expect("every block is fused");
        let policy = crate::policy::Policy {
            meta: m.clone(),
            model,
            device: device.clone(),
        };
        let mut scratch = GreedyScratch::default();
        // One row, as a backtest asks, and three, as a team's members do.
        for n in [1, 1, 1, 3, 3] {
            let rows: Vec<f32> = (0..n * policy.width())
                .map(|_| rng.random_range(-2.0..2.0))
                .collect();
            let burn = policy.act(&rows, n, false, 0.0, &mut rng);
            let fused = net.decide(&m, &rows, n, &mut scratch, &mut rng);
            assert_eq!(fused.len(), n);
            let what = format!("{algo:?} {head:?} {:?}", m.spec.blocks);
            for (burn, fused) in burn.iter().zip(&fused) {
                match head {
                    Head::Gaussian => assert!(
                        (burn.raw - fused.raw).abs() <= 1e-5 * (1.0 + burn.raw.abs()),
                        "{what}: mean {} against burn's {}",
                        fused.raw,
                        burn.raw
                    ),
                    Head::Categorical(_) => {
                        assert_eq!(fused.raw, burn.raw, "{what}");
                        assert_eq!(fused.env_action, burn.env_action, "{what}");
                    }
                }
            }
        }
    }
}
