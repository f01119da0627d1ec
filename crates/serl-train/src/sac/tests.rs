//! SAC's gradients, as burn's autodiff takes them, against central finite
//! differences of the same loss: every parameter of the actor-critic and
//! of the twin critics, on a small network and a minibatch of random
//! transitions. (PPO's and DDQN's burn gradients are the reference their
//! fused twins are checked against; SAC has no fused twin, so its
//! reference is the loss itself.)

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::{Tensor, TensorData};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serl_design::NetworkSpec;

use super::{column, hybrid, losses, rows, squashed_sample, ReplaySample, Targets, TwinQ};
use crate::hybrid::LossWeights;
use crate::net::{ActorCritic, Head};
use crate::replay::Replay;
use serl_env::Source;

const OBS: usize = 3;
const TEMPERATURE: f64 = 0.2;

/// Each float parameter's gradient in `grads`, in visiting order (empty
/// for a parameter the loss does not reach).
struct Gradients<'g>(&'g GradientsParams, Vec<Vec<f32>>);

impl ModuleVisitor for Gradients<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let g = self.0.get::<D>(param.id).map_or_else(Vec::new, |t| {
            t.into_data().try_to_vec::<f32>().unwrap_or_default()
        });
        self.1.push(g);
    }
}

/// Adds `h` to one element of one float parameter (by visiting order).
struct Nudge {
    param: usize,
    element: usize,
    h: f32,
    next: usize,
}

impl ModuleMapper for Nudge {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let hit = self.next == self.param;
        self.next += 1;
        if !hit {
            return param;
        }
        let (element, h) = (self.element, self.h);
        param.map(|t| {
            let (shape, device) = (t.shape(), t.device());
            let mut v = t.into_data().try_to_vec::<f32>().unwrap_or_default();
            v[element] += h;
            Tensor::from_data(TensorData::new(v, shape), &device)
        })
    }
}

fn nudged<M: Module>(m: &M, param: usize, element: usize, h: f32) -> M {
    m.clone().map(&mut Nudge {
        param,
        element,
        h,
        next: 0,
    })
}

/// A minibatch of 16 random transitions, half static and half dynamic.
fn minibatch(rng: &mut SmallRng) -> ReplaySample {
    let mut replay = Replay::new(16, OBS);
    for i in 0..16 {
        let obs: Vec<f32> = (0..OBS).map(|_| rng.random_range(-1.0..1.0)).collect();
        let next: Vec<f32> = (0..OBS).map(|_| rng.random_range(-1.0..1.0)).collect();
        let source = if i % 2 == 0 {
            Source::Static
        } else {
            Source::Dynamic
        };
        let action = rng.random_range(-0.9..0.9);
        replay.push(
            &obs,
            action,
            rng.random_range(-1.0..1.0),
            &next,
            i == 5,
            source,
        );
    }
    replay.sample(16, rng)
}

/// V's targets for `s` with noise `eps`: min Q − τ·log π at the actor's
/// action, as [`losses`] computes them when not given.
fn value_targets(
    model: &ActorCritic,
    twin: &TwinQ,
    s: &ReplaySample,
    eps: &[f32],
    temperature: f64,
) -> Vec<f32> {
    let device = model.value_head.weight.val().device();
    let x = rows(&s.obs, s.rows, &device);
    let (a, log_prob) = squashed_sample(model, x.clone(), column(eps, &device));
    let (p1, p2) = twin.forward(x, a);
    crate::tensors::floats1(p1.min_pair(p2) - log_prob.mul_scalar(temperature))
}

/// A minibatch with its noise and its targets, held fixed while the
/// weights move.
struct Batch {
    s: ReplaySample,
    y: Vec<f32>,
    v: Vec<f32>,
    eps: Vec<f32>,
}

/// The hybrid-weighted loss of `b`: the twin critics' alone (`critics`),
/// or the actor's and V's (which reach the twins only through the action).
/// V's target is held, as a step holds it (detached).
fn loss(model: &ActorCritic, twin: &TwinQ, b: &Batch, critics: bool) -> Tensor<1> {
    let targets = Targets {
        q: &b.y,
        v: Some(&b.v),
    };
    let l = losses(model, twin, &b.s, targets, &b.eps, TEMPERATURE);
    let weights = LossWeights {
        alpha: 0.3,
        beta: 0.7,
    };
    let per = if critics { l.q } else { l.actor + l.value };
    hybrid(per, &b.s, weights).0
}

fn value(t: Tensor<1>) -> f64 {
    t.into_scalar::<f32>() as f64
}

/// The largest difference between burn's gradient and the finite
/// difference over every element of every parameter of `m`, relative to
/// the gradients' scale.
fn worst_relative_error<M: Module>(m: &M, grads: &GradientsParams, f: impl Fn(&M) -> f64) -> f64 {
    let mut visitor = Gradients(grads, Vec::new());
    m.visit(&mut visitor);
    let h = 1e-2f32;
    let (mut worst, mut scale) = (0f64, 0f64);
    for (p, g) in visitor.1.iter().enumerate() {
        assert!(!g.is_empty(), "parameter {p} has no gradient");
        for (e, &g) in g.iter().enumerate() {
            let fd = (f(&nudged(m, p, e, h)) - f(&nudged(m, p, e, -h))) / (2.0 * h as f64);
            worst = worst.max((fd - g as f64).abs());
            scale = scale.max(g.abs() as f64);
        }
    }
    assert!(scale > 1e-4, "the loss should have a gradient");
    worst / scale
}

#[test]
fn sac_gradients_match_finite_differences() {
    let device = crate::DeviceChoice::Cpu
        .device()
        .expect("the CPU")
        .autodiff();
    device.seed(5);
    let spec = NetworkSpec::mlp(&[5]);
    let model = ActorCritic::new(&spec, OBS, Head::Gaussian, &device).unwrap();
    let twin = TwinQ::new(&spec, OBS, &device).unwrap();
    let mut rng = SmallRng::seed_from_u64(3);
    let s = minibatch(&mut rng);
    let y: Vec<f32> = (0..s.rows).map(|_| rng.random_range(-1.0..1.0)).collect();
    let eps: Vec<f32> = (0..s.rows).map(|_| rng.random_range(-1.5..1.5)).collect();
    let v = value_targets(&model, &twin, &s, &eps, TEMPERATURE);
    let b = Batch { s, y, v, eps };

    let mut grads = (loss(&model, &twin, &b, true) + loss(&model, &twin, &b, false)).backward();
    let twin_grads = GradientsParams::from_module(&mut grads, &twin);
    let model_grads = GradientsParams::from_module(&mut grads, &model);

    let critics = worst_relative_error(&twin, &twin_grads, |t| value(loss(&model, t, &b, true)));
    assert!(critics < 0.02, "twin critics: relative error {critics}");
    let actor = worst_relative_error(&model, &model_grads, |m| value(loss(m, &twin, &b, false)));
    assert!(actor < 0.02, "actor and V: relative error {actor}");
}
