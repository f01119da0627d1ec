//! The built-in offline designer: a real, seeded search over modules with
//! no language model. It draws programs from a grammar of reward terms and
//! a pool of feature programs, mutates network and scenario specs, and
//! recombines the best designs the feedback names. It is the default
//! designer and the "no LLM" ablation, and is named as such everywhere.

use std::collections::HashMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};
use serl_design::{Module, ModuleKind, PlanShape};

use crate::backend::LlmError;
use crate::designer::{Designer, Reply};
use crate::prompts::ModuleContext;

/// Reward terms: (template with `{c}`, default coefficient, upper bound).
const TERMS: [(&str, f64, f64); 8] = [
    ("- {c} * remaining_inv^2 / steps", 2.0, 20.0),
    ("- {c} * done * remaining_inv^2", 50.0, 200.0),
    ("- {c} * abs(remaining_inv - time_left) / steps", 2.0, 20.0),
    ("- {c} * spread_bps * fill_qty", 0.2, 2.0),
    ("- {c} * max(fill_qty - 0.3, 0)", 5.0, 50.0),
    ("+ {c} * tanh(step_pa / 5)", 0.5, 5.0),
    ("- {c} * volatility * remaining_inv / steps", 0.05, 1.0),
    ("+ {c} * twap_gain", 1.0, 4.0),
];

/// Reward terms offered when the agent places its orders, numbered after
/// [`TERMS`].
const PLACEMENT_TERMS: [(&str, f64, f64); 2] = [
    ("+ {c} * spread_captured", 0.5, 2.0),
    ("- {c} * adverse_move", 0.5, 2.0),
];

/// Reward term `i`: one of [`TERMS`], then of [`PLACEMENT_TERMS`].
fn term(i: usize) -> (&'static str, f64, f64) {
    TERMS
        .get(i)
        .or_else(|| PLACEMENT_TERMS.get(i - TERMS.len()))
        .copied()
        .unwrap_or(TERMS[0])
}

/// Feature programs over the observation.
const FEATURES: [(&str, &str); 8] = [
    ("ret_mean_5", "mean(ret_1, 5)"),
    ("ret_std_10", "std(ret_1, 10)"),
    ("volume_ema_5", "ema(volume, 5)"),
    ("spread_ema_5", "ema(spread, 5)"),
    ("ret_range_10", "max_over(ret_1, 10) - min_over(ret_1, 10)"),
    ("behind_schedule", "inventory_left - time_left"),
    ("ret_3", "ret_1 + lag(ret_1, 1) + lag(ret_1, 2)"),
    (
        "imbalance",
        "(bid_size_1 - ask_size_1) / (bid_size_1 + ask_size_1 + 0.001)",
    ),
];

/// Feature programs over the resting order's queue, offered when the
/// agent places its orders, numbered after [`FEATURES`].
const PLACEMENT_FEATURES: [(&str, &str); 2] = [
    // Minutes of recent volume the queue ahead needs to trade away.
    ("queue_minutes", "queue_ahead / (ema(volume, 5) + 0.01)"),
    // A waiting order matters more the further behind schedule it is.
    (
        "late_and_waiting",
        "(inventory_left - time_left) * minutes_resting",
    ),
];

/// Feature programs over a planted forecast, offered where the data
/// carries one, numbered after [`PLACEMENT_FEATURES`].
const SIGNAL_FEATURES: [(&str, &str); 2] = [
    ("signal", "signal"),
    // The forecast matters more the more of the order is left.
    ("signal_x_left", "signal * inventory_left"),
];

/// Feature `i`: one of [`FEATURES`], then of [`PLACEMENT_FEATURES`], then
/// of [`SIGNAL_FEATURES`].
fn feature(i: usize) -> (&'static str, &'static str) {
    let placement = FEATURES.len();
    let signal = placement + PLACEMENT_FEATURES.len();
    FEATURES
        .get(i)
        .or_else(|| PLACEMENT_FEATURES.get(i.wrapping_sub(placement)))
        .or_else(|| SIGNAL_FEATURES.get(i.wrapping_sub(signal)))
        .copied()
        .unwrap_or(FEATURES[0])
}

const INSTRUCTIONS: [&str; 7] = [
    "Penalise inventory held late in the window more than inventory held early.",
    "Reward price advantage directly and keep penalties small and smooth.",
    "Track the time schedule loosely: penalise falling far behind it.",
    "Discourage trading large child orders that cross a wide spread.",
    "Use short-horizon return and volume signals to time the trades.",
    "Keep the network small; prefer robustness across stocks over peak PA.",
    "Reward timing: trading more than the even pace where prices beat the arrival price.",
];

/// What a reward is built on: the step's price advantage (the default
/// reward, which keeps both penalties), or the timing gain over TWAP,
/// which alone already scores a schedule against TWAP and needs no
/// penalty when the pace is tilted (docs/train.md).
const BASES: [&str; 2] = ["step_pa", "twap_gain"];

/// Hidden widths an architecture draws from; no hidden layer at all makes
/// the policy linear in the observation.
const WIDTHS: [usize; 5] = [8, 16, 32, 64, 128];

#[derive(Debug, Clone, PartialEq)]
enum Genome {
    Reward {
        base: usize,
        terms: Vec<(usize, f64)>,
    },
    State(Vec<usize>),
    Arch {
        widths: Vec<usize>,
        relu: bool,
        norm: bool,
    },
    Imagination {
        /// (volatility_mult, drift_bps, liquidity_mult) per scenario.
        scenarios: Vec<[f64; 3]>,
        share: f64,
        replay_share: f64,
    },
    Profiling([f64; 4]),
    Communication {
        features: Vec<usize>,
        aggregate: usize,
    },
    /// One of [`PlanShape::ALL`] at a strength in [0, 1].
    Plan {
        shape: usize,
        strength: f64,
    },
}

/// The offline designer.
pub struct BuiltinDesigner {
    rng: SmallRng,
    seed: u64,
    /// Every design it proposed, by the text a run records of it
    /// ([`known_as`]), so that an example naming a design can be mapped
    /// back to what to mutate.
    known: HashMap<String, Genome>,
    /// Fresh rewards drawn so far: the first two are fixed starting points.
    fresh_rewards: usize,
    /// Whether the agent places its orders (the task says so): rewards may
    /// then use the placement terms.
    placing: bool,
    /// Whether the data carries a planted forecast (the task says so):
    /// state features may then read it.
    signal: bool,
}

impl BuiltinDesigner {
    /// A designer whose search is deterministic in `seed`.
    pub fn new(seed: u64) -> Self {
        BuiltinDesigner {
            rng: SmallRng::seed_from_u64(seed),
            seed,
            known: HashMap::new(),
            fresh_rewards: 0,
            placing: false,
            signal: false,
        }
    }

    /// How many reward terms it draws from.
    fn terms(&self) -> usize {
        TERMS.len()
            + if self.placing {
                PLACEMENT_TERMS.len()
            } else {
                0
            }
    }

    /// The state features it draws from ([`feature`]'s numbers): the
    /// market's, the queue's for a placing agent, the planted signal's
    /// where there is one.
    fn features(&self) -> Vec<usize> {
        let placement = FEATURES.len();
        let signal = placement + PLACEMENT_FEATURES.len();
        let mut all: Vec<usize> = (0..placement).collect();
        if self.placing {
            all.extend(placement..signal);
        }
        if self.signal {
            all.extend(signal..signal + SIGNAL_FEATURES.len());
        }
        all
    }

    fn random(&mut self, kind: ModuleKind) -> Genome {
        let n_terms = self.terms();
        let n_features = self.features();
        let r = &mut self.rng;
        match kind {
            ModuleKind::Reward => {
                let base = r.random_range(0..BASES.len());
                let mut terms = Vec::new();
                for i in 0..n_terms {
                    // `Genome::reward` gives the step-PA base its penalties.
                    if i < 2 && base == 0 {
                        continue;
                    }
                    if r.random_bool(0.3) {
                        terms.push((i, term(i).1 * r.random_range(0.3..2.0)));
                    }
                }
                Genome::reward(base, terms)
            }
            ModuleKind::State => {
                let n = r.random_range(1..=3);
                let mut f: Vec<usize> = Vec::new();
                while f.len() < n {
                    let i = n_features[r.random_range(0..n_features.len())];
                    if !f.contains(&i) {
                        f.push(i);
                    }
                }
                f.sort();
                Genome::State(f)
            }
            ModuleKind::Architecture => {
                let depth = r.random_range(0..=3);
                Genome::Arch {
                    widths: (0..depth)
                        .map(|_| WIDTHS[r.random_range(0..WIDTHS.len())])
                        .collect(),
                    relu: r.random_bool(0.3),
                    norm: r.random_bool(0.2),
                }
            }
            ModuleKind::Imagination => Genome::Imagination {
                scenarios: (0..r.random_range(1..=3))
                    .map(|_| {
                        [
                            r.random_range(0.7..1.6),
                            r.random_range(-150.0..150.0),
                            r.random_range(0.5..1.5),
                        ]
                    })
                    .collect(),
                share: r.random_range(0.2..0.6),
                replay_share: if r.random_bool(0.7) {
                    r.random_range(0.2..0.8)
                } else {
                    0.0
                },
            },
            ModuleKind::Profiling => Genome::Profiling([
                r.random_range(20.0..100.0),
                r.random_range(20.0..100.0),
                r.random_range(1.0..4.0),
                r.random_range(0.1..0.4),
            ]),
            ModuleKind::Communication => Genome::Communication {
                features: vec![r.random_range(0..FEATURES.len())],
                aggregate: r.random_range(0..4),
            },
            ModuleKind::Plan => Genome::Plan {
                shape: r.random_range(0..PlanShape::ALL.len()),
                strength: r.random_range(0.2..0.9),
            },
        }
    }

    fn mutate(&mut self, g: &Genome) -> Genome {
        let n_terms = self.terms();
        let n_features = self.features();
        let r = &mut self.rng;
        let jitter: Normal<f64> = Normal::new(0.0, 0.35).expect("valid normal");
        match g {
            Genome::Reward { base, terms } => {
                let mut t = terms.clone();
                for (i, c) in t.iter_mut() {
                    if r.random_bool(0.6) {
                        *c = (*c * jitter.sample(r).exp()).min(term(*i).2);
                    }
                }
                let base = if r.random_bool(0.15) { 1 - base } else { *base };
                if r.random_bool(0.3) {
                    // The step-PA base keeps its penalties.
                    let first = if base == 0 { 2 } else { 0 };
                    let i = r.random_range(first..n_terms);
                    match t.iter().position(|(j, _)| *j == i) {
                        Some(p) => {
                            t.remove(p);
                        }
                        None => t.push((i, term(i).1)),
                    }
                }
                Genome::reward(base, t)
            }
            Genome::State(f) => {
                let mut f = f.clone();
                let i = n_features[r.random_range(0..n_features.len())];
                match f.iter().position(|j| *j == i) {
                    Some(p) if f.len() > 1 => {
                        f.remove(p);
                    }
                    Some(_) => {}
                    None if f.len() < 5 => f.push(i),
                    None => f[0] = i,
                }
                f.sort();
                Genome::State(f)
            }
            Genome::Arch { widths, relu, norm } => mutate_arch(r, widths, *relu, *norm),
            Genome::Imagination {
                scenarios,
                share,
                replay_share,
            } => Genome::Imagination {
                scenarios: scenarios
                    .iter()
                    .map(|s| {
                        [
                            (s[0] * jitter.sample(r).exp()).clamp(0.3, 3.0),
                            (s[1] + 30.0 * jitter.sample(r)).clamp(-200.0, 200.0),
                            (s[2] * jitter.sample(r).exp()).clamp(0.2, 3.0),
                        ]
                    })
                    .collect(),
                share: (share + 0.1 * jitter.sample(r)).clamp(0.0, 1.0),
                replay_share: (replay_share + 0.1 * jitter.sample(r)).clamp(0.0, 1.0),
            },
            Genome::Profiling(p) => Genome::Profiling([
                (p[0] * jitter.sample(r).exp()).clamp(5.0, 400.0),
                (p[1] * jitter.sample(r).exp()).clamp(5.0, 400.0),
                (p[2] + jitter.sample(r)).clamp(1.0, 8.0),
                (p[3] * jitter.sample(r).exp()).clamp(0.02, 0.8),
            ]),
            Genome::Communication {
                features,
                aggregate,
            } => {
                let mut f = features.clone();
                let i = r.random_range(0..FEATURES.len());
                if !f.contains(&i) && f.len() < 4 {
                    f.push(i);
                }
                Genome::Communication {
                    features: f,
                    aggregate: if r.random_bool(0.3) {
                        r.random_range(0..4)
                    } else {
                        *aggregate
                    },
                }
            }
            Genome::Plan { shape, strength } => mutate_plan(r, *shape, *strength, &jitter),
        }
    }

    /// Uniform crossover of two parents of the same kind.
    fn recombine(&mut self, a: &Genome, b: &Genome) -> Genome {
        let n_terms = self.terms();
        let r = &mut self.rng;
        match (a, b) {
            (Genome::Reward { base: bx, terms: x }, Genome::Reward { base: by, terms: y }) => {
                let base = if r.random_bool(0.5) { *bx } else { *by };
                let mut t: Vec<(usize, f64)> = Vec::new();
                for i in 0..n_terms {
                    let pick = if r.random_bool(0.5) { x } else { y };
                    if let Some(&(j, c)) = pick.iter().find(|(j, _)| *j == i) {
                        t.push((j, c));
                    }
                }
                Genome::reward(base, t)
            }
            (Genome::State(x), Genome::State(y)) => {
                let mut f: Vec<usize> = x
                    .iter()
                    .chain(y)
                    .copied()
                    .filter(|_| r.random_bool(0.6))
                    .collect();
                f.sort();
                f.dedup();
                if f.is_empty() {
                    f = x.clone();
                }
                f.truncate(5);
                Genome::State(f)
            }
            _ => {
                if r.random_bool(0.5) {
                    a.clone()
                } else {
                    b.clone()
                }
            }
        }
    }

    fn render(g: &Genome) -> String {
        match g {
            Genome::Reward { base, terms } => {
                let mut s = String::from(BASES[*base]);
                for &(i, c) in terms {
                    if c <= 0.0 {
                        continue;
                    }
                    s.push(' ');
                    s.push_str(&term(i).0.replace("{c}", &format!("{:.4}", c)));
                }
                s
            }
            Genome::State(f) => {
                let feats: Vec<serde_json::Value> = f
                    .iter()
                    .map(|&i| serde_json::json!({"name": feature(i).0, "program": feature(i).1}))
                    .collect();
                serde_json::json!({ "features": feats }).to_string()
            }
            Genome::Arch { widths, relu, norm } => {
                let act = if *relu { "relu" } else { "tanh" };
                let mut blocks = Vec::new();
                if *norm {
                    blocks.push(serde_json::json!({"kind": "layer_norm"}));
                }
                for w in widths {
                    blocks
                        .push(serde_json::json!({"kind": "dense", "width": w, "activation": act}));
                }
                serde_json::json!({"window": 1, "blocks": blocks}).to_string()
            }
            Genome::Imagination {
                scenarios,
                share,
                replay_share,
            } => {
                let sc: Vec<serde_json::Value> = scenarios
                    .iter()
                    .map(|s| serde_json::json!({"volatility_mult": round(s[0]), "drift_bps": round(s[1]), "liquidity_mult": round(s[2]), "jumps": []}))
                    .collect();
                serde_json::json!({"scenarios": sc, "share": round(*share), "replay_share": round(*replay_share)}).to_string()
            }
            Genome::Profiling(p) => {
                let mut m =
                    serde_json::to_value(serl_design::MarketConfig::default()).unwrap_or_default();
                m["noise_agents"] = serde_json::json!(p[0].round() as usize);
                m["value_agents"] = serde_json::json!(p[1].round() as usize);
                m["market_makers"] = serde_json::json!(p[2].round().max(1.0) as usize);
                m["market_order_share"] = serde_json::json!(round(p[3]));
                serde_json::json!({ "market": m }).to_string()
            }
            Genome::Communication {
                features,
                aggregate,
            } => {
                let b: Vec<serde_json::Value> = features
                    .iter()
                    .map(|&i| serde_json::json!({"name": FEATURES[i].0, "program": FEATURES[i].1}))
                    .collect();
                let aggregate = ["mean", "sum", "attention", "max"][*aggregate % 4];
                serde_json::json!({"broadcast": b, "aggregate": aggregate}).to_string()
            }
            Genome::Plan { shape, strength } => {
                let shape = PlanShape::ALL[*shape % PlanShape::ALL.len()];
                serde_json::json!({"shape": shape, "strength": round(*strength), "checkpoints": 13})
                    .to_string()
            }
        }
    }
}

/// A network one block wider, narrower or resized, its activation or
/// normalisation sometimes flipped.
fn mutate_arch(r: &mut SmallRng, widths: &[usize], relu: bool, norm: bool) -> Genome {
    let mut w = widths.to_vec();
    match r.random_range(0..4) {
        0 if w.len() < 3 => w.push(WIDTHS[r.random_range(0..WIDTHS.len())]),
        1 if !w.is_empty() => {
            w.pop();
        }
        _ if !w.is_empty() => {
            let k = r.random_range(0..w.len());
            w[k] = WIDTHS[r.random_range(0..WIDTHS.len())];
        }
        _ => w.push(WIDTHS[r.random_range(0..WIDTHS.len())]),
    }
    Genome::Arch {
        widths: w,
        relu: if r.random_bool(0.2) { !relu } else { relu },
        norm: if r.random_bool(0.2) { !norm } else { norm },
    }
}

/// Another shape one time in five; the strength jittered.
fn mutate_plan(r: &mut SmallRng, shape: usize, strength: f64, jitter: &Normal<f64>) -> Genome {
    Genome::Plan {
        shape: if r.random_bool(0.2) {
            r.random_range(0..PlanShape::ALL.len())
        } else {
            shape
        },
        strength: (strength + 0.15 * jitter.sample(r)).clamp(0.05, 1.0),
    }
}

impl Genome {
    /// A reward on `base` with `terms` in order, the step-PA base with
    /// both default penalties (added at their default weights if missing).
    fn reward(base: usize, mut terms: Vec<(usize, f64)>) -> Genome {
        if base == 0 {
            for i in [0, 1] {
                if !terms.iter().any(|(j, _)| *j == i) {
                    terms.push((i, TERMS[i].1));
                }
            }
        }
        terms.sort_by_key(|x| x.0);
        Genome::Reward { base, terms }
    }
}

/// The name a module's text is known by: the text a run records of it
/// (`Module::text`: its program, or its JSON written out in full), so
/// that an example written as the run records it (pretty JSON) finds the
/// design this designer wrote compactly. Text that does not parse keys
/// as it is.
fn known_as(kind: ModuleKind, text: &str) -> String {
    crate::designer::read_reply(kind, text).map_or_else(|_| text.to_string(), |m| m.text())
}

fn round(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

impl Designer for BuiltinDesigner {
    fn name(&self) -> String {
        format!("builtin offline search (no LLM), seed {}", self.seed)
    }

    fn is_llm(&self) -> bool {
        false
    }

    fn propose(&mut self, kind: ModuleKind, ctx: &ModuleContext) -> Result<Reply, LlmError> {
        self.placing = !ctx.task.placements.is_empty();
        self.signal = ctx.task.signal;
        // Parents: the best examples it recognises, best first.
        let mut parents: Vec<(Genome, f64)> = ctx
            .examples
            .iter()
            .filter_map(|e| {
                let key = e
                    .module
                    .as_ref()
                    .map_or_else(|| known_as(kind, &e.source), Module::text);
                let g = self.known.get(&key)?;
                Some((g.clone(), e.score))
            })
            .collect();
        parents.sort_by(|a, b| b.1.total_cmp(&a.1));
        // A rejection means the last proposal was bad: start afresh.
        let g = if ctx.error.is_some() || parents.is_empty() {
            let fresh = (kind == ModuleKind::Reward && ctx.error.is_none()).then(|| {
                self.fresh_rewards += 1;
                self.fresh_rewards
            });
            match fresh {
                // The first reward is the environment's default: the
                // search starts from plain PPO and must improve on it.
                Some(1) => Genome::reward(0, Vec::new()),
                // The second scores exactly what beating TWAP means: the
                // timing gain over it, with no penalty to bias the pace.
                Some(2) => Genome::reward(1, Vec::new()),
                _ => self.random(kind),
            }
        } else {
            let roll: f64 = self.rng.random();
            if parents.len() >= 2 && roll < 0.3 {
                let (a, b) = (parents[0].0.clone(), parents[1].0.clone());
                let child = self.recombine(&a, &b);
                self.mutate(&child)
            } else if roll < 0.85 {
                let k = if parents.len() > 1 && self.rng.random_bool(0.3) {
                    1
                } else {
                    0
                };
                let p = parents[k].0.clone();
                self.mutate(&p)
            } else {
                self.random(kind)
            }
        };
        // Written once and read once: the module goes back typed, and is
        // known by the text a run records of it.
        let text = Self::render(&g);
        let module = crate::designer::read_reply(kind, &text).ok();
        let key = module.as_ref().map_or_else(|| text.clone(), Module::text);
        self.known.insert(key, g);
        Ok(Reply {
            text,
            module,
            ..Default::default()
        })
    }

    fn refine(&mut self, ctx: &ModuleContext) -> Result<Reply, LlmError> {
        // Keep the best past instruction with probability 1/2 (replay),
        // else try another from the pool (diversify).
        let best = ctx
            .history
            .iter()
            .filter_map(|h| Some((h["instruction"].as_str()?.to_string(), h["score"].as_f64()?)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let text = match best {
            Some((i, _)) if self.rng.random_bool(0.5) => i,
            _ => INSTRUCTIONS[self.rng.random_range(0..INSTRUCTIONS.len())].to_string(),
        };
        Ok(Reply {
            text,
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts::{Example, TaskInfo};

    #[test]
    fn the_first_rewards_are_the_default_and_the_timing_gain_and_penalties_stay_on_step_pa() {
        let mut d = BuiltinDesigner::new(1);
        let ctx = ModuleContext::new(ModuleKind::Reward, TaskInfo::default(), "m", "m");
        let first = d.propose(ModuleKind::Reward, &ctx).unwrap().text;
        assert_eq!(
            first,
            "step_pa - 2.0000 * remaining_inv^2 / steps - 50.0000 * done * remaining_inv^2"
        );
        let second = d.propose(ModuleKind::Reward, &ctx).unwrap().text;
        assert_eq!(second, "twap_gain");
        // Every later reward on the step PA keeps both penalties of the
        // default; the search also tries rewards built on the timing gain.
        let mut ctx = ctx;
        let mut timing = 0;
        for round in 0..30 {
            ctx.examples = vec![Example {
                source: first.clone(),
                score: round as f64,
                module: None,
            }];
            let r = d.propose(ModuleKind::Reward, &ctx).unwrap().text;
            if r.starts_with("twap_gain") {
                timing += 1;
                continue;
            }
            assert!(
                r.contains("* remaining_inv^2 / steps") && r.contains("* done * remaining_inv^2"),
                "{r}"
            );
        }
        assert!(timing > 0, "no reward on the timing gain in 30 rounds");
    }

    /// 41 proposals of a `kind` module for a task with `placements`, each
    /// mutating the first.
    fn proposals(kind: ModuleKind, placements: Vec<String>) -> Vec<String> {
        let mut d = BuiltinDesigner::new(3);
        let task = TaskInfo {
            placements,
            ..TaskInfo::default()
        };
        let mut ctx = ModuleContext::new(kind, task, "m", "m");
        let first = d.propose(kind, &ctx).unwrap().text;
        let mut all: Vec<String> = (0..40)
            .map(|round| {
                ctx.examples = vec![Example {
                    source: first.clone(),
                    score: round as f64,
                    module: None,
                }];
                d.propose(kind, &ctx).unwrap().text
            })
            .collect();
        all.push(first);
        all
    }

    #[test]
    fn placement_terms_and_queue_features_are_offered_only_when_the_agent_places_its_orders() {
        let placing = || vec!["cross".to_string(), "touch".to_string()];
        let uses = |r: &String| r.contains("spread_captured") || r.contains("adverse_move");
        assert!(!proposals(ModuleKind::Reward, Vec::new()).iter().any(uses));
        let rewards = proposals(ModuleKind::Reward, placing());
        assert!(rewards.iter().any(uses), "{rewards:?}");
        for r in &rewards {
            serl_design::RewardModule::compile(r).unwrap();
        }

        let reads_queue = |s: &String| s.contains("queue_ahead") || s.contains("minutes_resting");
        assert!(!proposals(ModuleKind::State, Vec::new())
            .iter()
            .any(reads_queue));
        let states = proposals(ModuleKind::State, placing());
        assert!(states.iter().any(reads_queue), "{states:?}");
        for s in &states {
            let Module::State(m) = Module::parse(ModuleKind::State, s).unwrap() else {
                unreachable!("a state module parses as one")
            };
            m.check_task(true).unwrap();
        }
    }

    /// An example as a run records it (`Module::text`: pretty JSON for
    /// the JSON kinds, however the designer wrote it) is recognised as
    /// the design it proposed, so the search mutates it.
    #[test]
    fn examples_recorded_by_a_run_are_recognised_as_its_designs() {
        for kind in ModuleKind::ALL {
            let mut d = BuiltinDesigner::new(5);
            let ctx = ModuleContext::new(kind, TaskInfo::default(), "m", "m");
            let text = d.propose(kind, &ctx).unwrap().text;
            let recorded = Module::parse(kind, &text).unwrap().text();
            assert!(
                d.known.contains_key(&known_as(kind, &recorded)),
                "{kind:?}: {recorded}"
            );
        }
    }

    /// An example handed over as a module (as a run does) is the example
    /// its recorded text is: the same seed proposes the same child from
    /// either, a change of the example rather than a fresh draw.
    #[test]
    fn an_example_handed_over_as_a_module_is_the_one_its_text_is() {
        for kind in ModuleKind::ALL {
            let child = |typed: bool| {
                let mut d = BuiltinDesigner::new(5);
                let mut ctx = ModuleContext::new(kind, TaskInfo::default(), "m", "m");
                let first = d.propose(kind, &ctx).unwrap().text;
                let module = Module::parse(kind, &first).unwrap();
                let mut example = Example::of(module, 1.0);
                if !typed {
                    example.module = None;
                }
                ctx.examples = vec![example];
                d.propose(kind, &ctx).unwrap().text
            };
            assert_eq!(child(true), child(false), "{kind:?}");
        }
    }

    #[test]
    fn every_module_it_proposes_is_valid_and_seeds_reproduce() {
        let mut a = BuiltinDesigner::new(3);
        let mut b = BuiltinDesigner::new(3);
        for kind in ModuleKind::ALL {
            let mut ctx = ModuleContext::new(kind, TaskInfo::default(), "m", "m");
            for round in 0..20 {
                let ra = a.propose(kind, &ctx).unwrap();
                let rb = b.propose(kind, &ctx).unwrap();
                assert_eq!(ra.text, rb.text);
                Module::parse(kind, &ra.text)
                    .unwrap_or_else(|e| panic!("{kind:?} round {round}: {e}\n{}", ra.text));
                ctx.examples = vec![Example {
                    source: ra.text,
                    score: round as f64,
                    module: None,
                }];
            }
        }
    }
}
