//! The loop. Every finished candidate is written to
//! `candidates/<key>.json`; a resumed run replays the loop from the start
//! (the designer is deterministic by seed, and an LLM's answers come from
//! the transcript cache), loading each finished candidate instead of
//! training it again, so at most the candidate in flight is lost.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Normal};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serl_design::{
    smoke_test, Design, Module, ModuleKind, ProgramReward, RewardModule, StateModule,
};
use serl_env::{
    DefaultReward, DynamicVenue, EnvConfig, MarketConfig, MarketData, ParentOrder, StaticVenue,
    Venue,
};
use serl_eval::{run_backtest, summarize, OrderResult, StrategyFactory};
use serl_llm::prompts::{CandidateFeedback, Example, Feedback, ModuleContext, Prompts, TaskInfo};
use serl_llm::{generate, Designer};
use serl_train::task::execution_envs;
use serl_train::{train, Algo, Policy, PolicyStrategy, TrainSetup};

use crate::config::EvolveConfig;

#[derive(Debug, thiserror::Error)]
pub enum EvolveError {
    #[error("evolve config: {0}")]
    Config(String),
    #[error(transparent)]
    Train(#[from] serl_train::TrainError),
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("the designer failed: {0}")]
    Designer(String),
    #[error("no candidate was valid in {0} iterations; see the attempts in the run directory")]
    NoValidDesign(usize),
}

fn file_err(path: &Path, e: impl std::fmt::Display) -> EvolveError {
    EvolveError::File {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

pub(crate) fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<(), EvolveError> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| file_err(d, e))?;
    }
    let text = serde_json::to_string_pretty(v).map_err(|e| file_err(path, e))?;
    serl_report::write_atomic(path, text.as_bytes()).map_err(|e| file_err(path, e))
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Validation metrics of a trained candidate.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Validation {
    pub pa: f64,
    pub pa_std: f64,
    pub wr: f64,
    pub glr: f64,
    pub afi: f64,
    /// Static minus dynamic PA on the dynamic subset.
    pub illusory_gain: f64,
    pub pa_dynamic: f64,
}

/// One module's generation, as recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModuleRecord {
    pub kind: ModuleKind,
    pub text: Option<String>,
    pub attempts: usize,
    pub errors: Vec<String>,
    pub prompt: String,
    pub replies: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CandidateResult {
    pub key: String,
    pub iteration: usize,
    pub design: Option<Design>,
    pub modules: Vec<ModuleRecord>,
    /// Mean over modules of 1/attempts (0 when a module failed).
    pub success_rate: f64,
    pub validation: Option<Validation>,
    /// PA × success rate (the paper's score); `None` for invalid designs.
    pub score: Option<f64>,
    pub repaired: u64,
    pub train_secs: f64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// What the loop needs.
pub struct EvolveInputs<'a> {
    pub cfg: EvolveConfig,
    pub env_cfg: EnvConfig,
    pub market_cfg: MarketConfig,
    pub market: &'a MarketData,
    pub train_orders: &'a [ParentOrder],
    pub val_orders: &'a [ParentOrder],
    pub test_orders: &'a [ParentOrder],
    pub designer: Box<dyn Designer + 'a>,
    /// Rendered into the fine-tuning dataset (and for the builtin
    /// designer, which reads contexts directly).
    pub prompts: Option<Prompts>,
    pub run_dir: PathBuf,
    pub progress: bool,
}

/// A designed candidate waiting for training.
struct Pending {
    key: String,
    path: PathBuf,
    design: Option<Design>,
    modules: Vec<ModuleRecord>,
    success_rate: f64,
    seed: u64,
    prompt_tokens: u64,
    completion_tokens: u64,
}

/// A candidate's result and what it cost (zero when loaded from disk).
struct Trained {
    result: CandidateResult,
    train_secs: f64,
    eval_secs: f64,
}

impl Pending {
    /// Whether its training uses the fused learner, which gives the same
    /// numbers however many trainings share the machine.
    fn trains_fused(&self, base: &serl_train::TrainConfig) -> bool {
        self.design
            .as_ref()
            .is_none_or(|d| trains_fused(base, d, Algo::Ppo))
    }

    /// Trains and scores the design (or loads the result of an earlier
    /// run), and writes the result into the run directory.
    fn train(
        &self,
        scoring: &Scoring,
        iteration: usize,
        bar: &ProgressBar,
    ) -> Result<Trained, EvolveError> {
        if let Some(result) = read_json::<CandidateResult>(&self.path) {
            bar.inc(1);
            return Ok(Trained {
                result,
                train_secs: 0.0,
                eval_secs: 0.0,
            });
        }
        let (mut result, eval_secs) = match &self.design {
            Some(d) => train_and_score(
                scoring,
                d,
                self.key.clone(),
                iteration,
                self.success_rate,
                self.seed,
            )?,
            None => (
                CandidateResult {
                    key: self.key.clone(),
                    iteration,
                    design: None,
                    modules: Vec::new(),
                    success_rate: self.success_rate,
                    validation: None,
                    score: None,
                    repaired: 0,
                    train_secs: 0.0,
                    prompt_tokens: 0,
                    completion_tokens: 0,
                },
                0.0,
            ),
        };
        result.modules = self.modules.clone();
        result.prompt_tokens = self.prompt_tokens;
        result.completion_tokens = self.completion_tokens;
        write_json(&self.path, &result)?;
        bar.inc(1);
        Ok(Trained {
            train_secs: result.train_secs,
            result,
            eval_secs,
        })
    }
}

/// Whether `algo` trains `d` with the fused learner, which gives the same
/// numbers however many trainings share the machine.
fn trains_fused(base: &serl_train::TrainConfig, d: &Design, algo: Algo) -> bool {
    let mut tc = base.clone();
    tc.algo = algo;
    tc.network = d.architecture.clone();
    tc.trains_fused()
}

/// Runs `work` on every item and returns the results in the items' order:
/// `parallel` at a time for the items `fused` admits, one at a time for the
/// rest. Only fused trainings share the machine, because burn's learner
/// sums in parallel in an order that depends on what else runs, while the
/// fused one gives the same numbers in any company. Stops after the first
/// group with an error.
fn side_by_side<T: Sync, R: Send>(
    items: &[T],
    parallel: usize,
    fused: impl Fn(&T) -> bool,
    work: impl Fn(&T) -> Result<R, EvolveError> + Sync,
) -> Result<Vec<R>, EvolveError> {
    let (together, alone): (Vec<usize>, Vec<usize>) =
        (0..items.len()).partition(|&i| fused(&items[i]));
    let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    for group in together.chunks(parallel.max(1)).chain(alone.chunks(1)) {
        let done: Vec<Result<R, EvolveError>> = if group.len() == 1 {
            vec![work(&items[group[0]])]
        } else {
            group.par_iter().map(|&i| work(&items[i])).collect()
        };
        for (&i, r) in group.iter().zip(done) {
            out[i] = Some(r?);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// What training and scoring a design needs: the inputs without the
/// designer, shared by candidates training in parallel.
#[derive(Clone, Copy)]
struct Scoring<'a> {
    cfg: &'a EvolveConfig,
    env_cfg: &'a EnvConfig,
    market_cfg: &'a MarketConfig,
    market: &'a MarketData,
    train_orders: &'a [ParentOrder],
    val_orders: &'a [ParentOrder],
}

impl EvolveInputs<'_> {
    fn scoring(&self) -> Scoring<'_> {
        Scoring {
            cfg: &self.cfg,
            env_cfg: &self.env_cfg,
            market_cfg: &self.market_cfg,
            market: self.market,
            train_orders: self.train_orders,
            val_orders: self.val_orders,
        }
    }
}

pub struct EvolveOutcome {
    pub candidates: Vec<CandidateResult>,
    pub best: CandidateResult,
    /// Plain PPO with the default modules, trained and validated exactly
    /// like a candidate: the bar the search must clear on validation.
    pub baseline: CandidateResult,
    pub test: Vec<OrderResult>,
    pub stages: Vec<(String, f64)>,
    pub iterations_run: usize,
}

fn task(env: &EnvConfig) -> TaskInfo {
    TaskInfo {
        steps: (390 / env.decision_minutes.max(1) as usize).max(1),
        decision_minutes: env.decision_minutes,
        benchmark: format!("{:?}", env.benchmark).to_uppercase(),
        ..TaskInfo::default()
    }
}

struct Stage {
    name: &'static str,
    secs: f64,
}

/// A summary line: above the bar on a terminal, on stderr in a log.
fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// Runs the loop in `inputs.run_dir`, resuming whatever it finds there.
pub fn evolve(mut inputs: EvolveInputs) -> Result<EvolveOutcome, EvolveError> {
    let cfg = inputs.cfg.clone();
    cfg.validate().map_err(EvolveError::Config)?;
    let dir = inputs.run_dir.clone();
    std::fs::create_dir_all(dir.join("candidates")).map_err(|e| file_err(&dir, e))?;
    let task = task(&inputs.env_cfg);
    let mut stages: HashMap<&'static str, f64> = HashMap::new();
    let add = |s: Stage, stages: &mut HashMap<&'static str, f64>| {
        *stages.entry(s.name).or_default() += s.secs
    };

    let bar = if inputs.progress {
        ProgressBar::new((cfg.iterations * cfg.candidates) as u64)
    } else {
        ProgressBar::with_draw_target(
            Some((cfg.iterations * cfg.candidates) as u64),
            ProgressDrawTarget::hidden(),
        )
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} evolve [{bar:30}] {pos}/{len} candidates  eta {eta}  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );

    let mut micro: HashMap<ModuleKind, String> = cfg
        .modules
        .iter()
        .map(|k| (*k, EvolveConfig::micro(*k).to_string()))
        .collect();
    let mut micro_history: HashMap<ModuleKind, Vec<(String, f64)>> = HashMap::new();
    let mut all: Vec<CandidateResult> = Vec::new();
    let mut feedback: Option<Feedback> = None;
    let mut ema: Option<f64> = None;
    let mut still = 0usize;
    let mut iterations_run = 0;
    let smoke_order = inputs.train_orders.first().cloned();

    for j in 0..cfg.iterations {
        iterations_run = j + 1;
        let mut round: Vec<CandidateResult> = Vec::new();
        let mut pending: Vec<Pending> = Vec::new();
        for k in 0..cfg.candidates {
            let key = format!("i{j}_c{k}");
            bar.set_message(format!(
                "iteration {}/{} candidate {}",
                j + 1,
                cfg.iterations,
                k + 1
            ));
            let t = Instant::now();
            let mut modules = Vec::new();
            let mut parts: HashMap<ModuleKind, Module> = HashMap::new();
            let (mut pt, mut ct) = (0, 0);
            for &kind in &cfg.modules {
                let mut ctx =
                    ModuleContext::new(kind, task.clone(), &cfg.macro_instruction, &micro[&kind]);
                ctx.examples = top_examples(&all, kind, cfg.top_k);
                ctx.feedback = feedback.clone();
                let market = inputs.market;
                let env_cfg = inputs.env_cfg.clone();
                let order = smoke_order.clone();
                let check = move |m: &Module| -> Result<(), String> {
                    let (Some(o), Module::Reward(r)) = (&order, m) else {
                        return match (&order, m) {
                            (Some(o), Module::State(s)) => {
                                smoke(market, o, &env_cfg, &Design::baseline().reward, s)
                            }
                            _ => Ok(()),
                        };
                    };
                    smoke(
                        market,
                        o,
                        &env_cfg,
                        r,
                        &StateModule {
                            features: Vec::new(),
                        },
                    )
                };
                let g = generate(
                    inputs.designer.as_mut(),
                    kind,
                    &ctx,
                    cfg.max_attempts,
                    &check,
                );
                if let Some(f) = g.fatal {
                    return Err(EvolveError::Designer(f));
                }
                pt += g.prompt_tokens;
                ct += g.completion_tokens;
                let prompt = match &inputs.prompts {
                    Some(p) => p.render(kind.name(), &ctx.to_value()).unwrap_or_default(),
                    None => String::new(),
                };
                modules.push(ModuleRecord {
                    kind,
                    text: g.module.as_ref().map(Module::text),
                    attempts: g.attempts.len(),
                    errors: g.attempts.iter().filter_map(|a| a.error.clone()).collect(),
                    prompt,
                    replies: g.attempts.iter().map(|a| a.reply.clone()).collect(),
                });
                if let Some(m) = g.module {
                    parts.insert(kind, m);
                }
            }
            add(
                Stage {
                    name: "design",
                    secs: t.elapsed().as_secs_f64(),
                },
                &mut stages,
            );
            let success_rate = modules
                .iter()
                .map(|m| {
                    if m.text.is_some() {
                        1.0 / m.attempts.max(1) as f64
                    } else {
                        0.0
                    }
                })
                .sum::<f64>()
                / modules.len().max(1) as f64;
            pending.push(Pending {
                path: dir.join("candidates").join(format!("{key}.json")),
                seed: cfg.seed ^ ((j * 1000 + k) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                key,
                design: assemble(&parts, cfg.modules.len()),
                modules,
                success_rate,
                prompt_tokens: pt,
                completion_tokens: ct,
            });
        }
        // The round's designs train `parallel` at a time; each result is
        // written as soon as it is known, so a kill loses only those in
        // flight, and a finished one is loaded instead of trained.
        let scoring = inputs.scoring();
        let parallel = cfg.parallel_candidates();
        bar.set_message(format!(
            "iteration {}/{}: training {} designs, {parallel} at a time",
            j + 1,
            cfg.iterations,
            pending.len()
        ));
        let fused = |p: &Pending| p.trains_fused(&inputs.cfg.train);
        for d in side_by_side(&pending, parallel, fused, |p| p.train(&scoring, j, &bar))? {
            for (name, secs) in [("train", d.train_secs), ("evaluate", d.eval_secs)] {
                add(Stage { name, secs }, &mut stages);
            }
            round.push(d.result);
        }
        all.extend(round.iter().cloned());

        // Low-level DEK: tune the best design's constants (reward, imagination).
        if cfg.low_level.enabled {
            if let Some(best) = best_of(&all).cloned() {
                let t = Instant::now();
                let tuned = tune_constants(&inputs.scoring(), &best, j, &dir)?;
                add(
                    Stage {
                        name: "low-level DEK",
                        secs: t.elapsed().as_secs_f64(),
                    },
                    &mut stages,
                );
                all.extend(tuned);
            }
        }

        // Feedback for the next round, and the iteration's summary.
        let scored: Vec<&CandidateResult> = all
            .iter()
            .filter(|c| c.iteration == j && c.score.is_some())
            .collect();
        let best_round = scored
            .iter()
            .filter_map(|c| c.score)
            .fold(f64::NEG_INFINITY, f64::max);
        feedback = Some(Feedback {
            candidates: scored
                .iter()
                .map(|c| {
                    let v = c.validation.clone().unwrap_or_default();
                    CandidateFeedback {
                        name: c.key.clone(),
                        score: c.score.unwrap_or(0.0),
                        pa: v.pa,
                        wr: v.wr,
                        glr: v.glr,
                        afi: v.afi,
                        illusory_gain: v.illusory_gain,
                        repaired: c.repaired,
                    }
                })
                .collect(),
            reward_stats: None,
            errors: all
                .iter()
                .filter(|c| c.iteration == j)
                .flat_map(|c| c.modules.iter().flat_map(|m| m.errors.iter().cloned()))
                .take(5)
                .collect(),
        });
        let best_pa = best_of(&all)
            .and_then(|c| c.validation.as_ref())
            .map_or(0.0, |v| v.pa);
        if inputs.progress {
            say(
                &bar,
                format!(
                "iteration {}: {} valid of {} designed, {} low-level trials, best score {}, best validation PA so far {:.3} bps",
                j + 1,
                scored.iter().filter(|c| !c.key.starts_with("ll")).count(),
                cfg.candidates,
                scored.iter().filter(|c| c.key.starts_with("ll")).count(),
                if best_round.is_finite() {
                    format!("{best_round:.3}")
                } else {
                    "-".into()
                },
                best_pa
            ),
            );
        }

        // High-level DEK: instruction history, then a rewritten instruction.
        if cfg.high_level {
            let t = Instant::now();
            for &kind in &cfg.modules {
                let score = if best_round.is_finite() {
                    best_round
                } else {
                    0.0
                };
                micro_history
                    .entry(kind)
                    .or_default()
                    .push((micro[&kind].clone(), score));
                let mut ctx =
                    ModuleContext::new(kind, task.clone(), &cfg.macro_instruction, &micro[&kind]);
                ctx.history = micro_history[&kind]
                    .iter()
                    .map(|(i, s)| serde_json::json!({"instruction": i, "score": s}))
                    .collect();
                ctx.feedback = feedback.clone();
                if let Ok(r) = inputs.designer.refine(&ctx) {
                    let text = r.text.trim();
                    if !text.is_empty() && text.len() <= 600 {
                        micro.insert(kind, text.to_string());
                    }
                }
            }
            add(
                Stage {
                    name: "high-level DEK",
                    secs: t.elapsed().as_secs_f64(),
                },
                &mut stages,
            );
        }
        write_json(&dir.join("instructions.json"), &micro_history)?;

        // Convergence on the EMA of the best validation PA.
        let c = &cfg.convergence;
        let next = match ema {
            None => best_pa,
            Some(e) => e + c.ema * (best_pa - e),
        };
        if ema.is_some_and(|e| (next - e).abs() < c.epsilon) {
            still += 1;
        } else {
            still = 0;
        }
        ema = Some(next);
        if still >= c.window {
            if inputs.progress {
                say(&bar, format!("converged after {} iterations", j + 1));
            }
            break;
        }
    }
    bar.finish_and_clear();
    let best = best_of(&all)
        .cloned()
        .ok_or(EvolveError::NoValidDesign(iterations_run))?;

    // Plain PPO on the candidates' budget, validated the same way.
    let base_path = dir.join("candidates").join("baseline.json");
    let baseline = match read_json::<CandidateResult>(&base_path) {
        Some(r) => r,
        None => {
            let (r, _) = train_and_score(
                &inputs.scoring(),
                &Design::baseline(),
                "baseline".into(),
                0,
                1.0,
                cfg.seed ^ 0xBA5E,
            )?;
            write_json(&base_path, &r)?;
            r
        }
    };
    if inputs.progress {
        // The bar is finished by now: print directly.
        eprintln!(
            "validation PA: best design {:.3} bps, plain PPO with the default modules {:.3} bps",
            best.validation.as_ref().map_or(0.0, |v| v.pa),
            baseline.validation.as_ref().map_or(0.0, |v| v.pa)
        );
    }

    // The final test: retrain with the full budget, test once.
    let t = Instant::now();
    let design = best.design.clone().expect("scored candidates have designs");
    let plain = Design::baseline();
    let finals = [
        ("serl-best", &design, Algo::Ppo),
        ("ppo-default", &plain, Algo::Ppo),
        ("ddqn-default", &plain, Algo::Ddqn),
    ];
    // serl-best and plain PPO retrain side by side when both are fused.
    let scoring = inputs.scoring();
    let policies = side_by_side(
        &finals,
        cfg.parallel_candidates(),
        |(_, d, algo)| trains_fused(&scoring.cfg.train, d, *algo),
        |(name, d, algo)| {
            let fdir = dir.join("final").join(name);
            let selected = cfg.final_eval_every > 0 && fdir.join("best.bpk").exists();
            if fdir.join("final.bpk").exists() {
                let which = if selected { "best" } else { "final" };
                return Ok(Policy::load(
                    &fdir,
                    which,
                    &serl_train::DeviceChoice::Cpu.device()?,
                )?);
            }
            let seed = cfg.seed ^ 0xF1AA;
            Ok(train_design(
                &scoring,
                d,
                *algo,
                cfg.final_steps,
                seed,
                Some(&fdir),
                cfg.final_eval_every,
            )?
            .0)
        },
    )?;
    let mut factories = Vec::new();
    for ((name, ..), policy) in finals.iter().zip(policies) {
        let label = name.to_string();
        factories.push(StrategyFactory {
            label: label.clone(),
            make: Box::new(move || Box::new(PolicyStrategy::new(policy.clone(), label.clone()))),
        });
    }
    add(
        Stage {
            name: "final training",
            secs: t.elapsed().as_secs_f64(),
        },
        &mut stages,
    );
    let t = Instant::now();
    for spec in ["twap", "vwap", "ac"] {
        factories.insert(
            factories.len() - 3,
            StrategyFactory::from_spec(
                serl_eval::StrategySpec::parse(spec).map_err(EvolveError::Config)?,
            ),
        );
    }
    let reward = DefaultReward {
        inventory_penalty: inputs.env_cfg.inventory_penalty,
        terminal_penalty: inputs.env_cfg.terminal_penalty,
    };
    let dynamic = DynamicVenue {
        market: inputs.market_cfg.clone(),
        seed: cfg.seed,
    };
    let mut test = run_backtest(
        inputs.market,
        inputs.test_orders,
        &factories,
        &[&StaticVenue as &dyn Venue],
        &inputs.env_cfg,
        &reward,
        &|_| {},
    );
    let n_dyn = cfg.dynamic_validation_orders.min(inputs.test_orders.len());
    test.extend(run_backtest(
        inputs.market,
        &inputs.test_orders[..n_dyn],
        &factories,
        &[&dynamic as &dyn Venue],
        &inputs.env_cfg,
        &reward,
        &|_| {},
    ));
    add(
        Stage {
            name: "test",
            secs: t.elapsed().as_secs_f64(),
        },
        &mut stages,
    );

    let mut stage_list: Vec<(String, f64)> = stages
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    stage_list.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(EvolveOutcome {
        candidates: all,
        best,
        baseline,
        test,
        stages: stage_list,
        iterations_run,
    })
}

fn smoke(
    market: &MarketData,
    o: &ParentOrder,
    env: &EnvConfig,
    r: &RewardModule,
    s: &StateModule,
) -> Result<(), String> {
    let view = market
        .get(&o.symbol, o.date)
        .ok_or("no session for the smoke order")?;
    smoke_test(r, s, view, o, env)
        .map(|_| ())
        .map_err(|e| format!("smoke test: {e}"))
}

/// A design from the generated modules; modules not designed keep the
/// baseline's. `None` when any designed module failed.
fn assemble(parts: &HashMap<ModuleKind, Module>, wanted: usize) -> Option<Design> {
    if parts.len() < wanted {
        return None;
    }
    let mut d = Design::baseline();
    for m in parts.values() {
        match m {
            Module::Reward(r) => d.reward = r.clone(),
            Module::State(s) => d.state = s.clone(),
            Module::Architecture(a) => d.architecture = a.clone(),
            Module::Imagination(i) => d.imagination = i.clone(),
            Module::Profiling(p) => d.profiling = Some(p.clone()),
            Module::Communication(c) => d.communication = Some(c.clone()),
        }
    }
    Some(d)
}

fn module_text(d: &Design, kind: ModuleKind) -> Option<String> {
    let m = match kind {
        ModuleKind::Reward => Module::Reward(d.reward.clone()),
        ModuleKind::State => Module::State(d.state.clone()),
        ModuleKind::Architecture => Module::Architecture(d.architecture.clone()),
        ModuleKind::Imagination => Module::Imagination(d.imagination.clone()),
        ModuleKind::Profiling => Module::Profiling(d.profiling.clone()?),
        ModuleKind::Communication => Module::Communication(d.communication.clone()?),
    };
    Some(m.text())
}

fn top_examples(all: &[CandidateResult], kind: ModuleKind, k: usize) -> Vec<Example> {
    let mut scored: Vec<(&CandidateResult, f64)> =
        all.iter().filter_map(|c| c.score.map(|s| (c, s))).collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut seen = std::collections::HashSet::new();
    scored
        .into_iter()
        .filter_map(|(c, s)| {
            let text = module_text(c.design.as_ref()?, kind)?;
            seen.insert(text.clone()).then_some(Example {
                source: text,
                score: s,
            })
        })
        .take(k)
        .collect()
}

pub(crate) fn best_of(all: &[CandidateResult]) -> Option<&CandidateResult> {
    all.iter().filter(|c| c.score.is_some()).max_by(|a, b| {
        a.score
            .unwrap_or(f64::MIN)
            .total_cmp(&b.score.unwrap_or(f64::MIN))
    })
}

/// Trains `design` and returns its policy and the values its programs
/// repaired: the final policy, or with `eval_every` > 0 the one that
/// scored best on the validation orders, checked every that many updates.
fn train_design(
    inputs: &Scoring,
    d: &Design,
    algo: Algo,
    steps: usize,
    seed: u64,
    dir: Option<&Path>,
    eval_every: usize,
) -> Result<(Policy, u64), EvolveError> {
    let reward =
        Arc::new(ProgramReward::new(&d.reward).map_err(|e| EvolveError::Config(e.to_string()))?);
    let mut tc = inputs.cfg.train.clone();
    tc.algo = algo;
    tc.total_steps = steps;
    tc.seed = seed;
    tc.network = d.architecture.clone();
    tc.features = d.state.features.clone();
    // In the multi-agent scenario the design's communication is how the
    // agents talk.
    if let Some(team) = &mut tc.team {
        if d.communication.is_some() {
            team.communication = d.communication.clone();
        }
    }
    // Without scenarios the shares play nothing (`TrainConfig::dynamic_market`,
    // `ExecutionEnv::with_imagined_replay`).
    tc.imagination = d.imagination.clone();
    let market_cfg = d
        .profiling
        .as_ref()
        .map_or(inputs.market_cfg.clone(), |p| (*p.market).clone());
    let envs = execution_envs(
        &tc,
        inputs.market,
        inputs.train_orders,
        inputs.env_cfg,
        reward.clone(),
        &market_cfg,
    )?;
    let selects = eval_every > 0;
    if selects {
        tc.eval_every = eval_every;
    }
    let val_orders = if selects {
        validation_orders(inputs)
    } else {
        Vec::new()
    };
    let validate: Option<serl_train::Validator> = selects.then(|| {
        Box::new(|p: &Policy| {
            serl_train::validate::static_pa(p, inputs.market, &val_orders, inputs.env_cfg)
        }) as serl_train::Validator
    });
    let out = train(TrainSetup {
        config: tc,
        envs,
        validate,
        run_dir: dir.map(Path::to_path_buf),
        resume: false,
        on_update: None,
    })?;
    let policy = if selects {
        out.policy
    } else {
        out.final_policy
    };
    Ok((policy, reward.repaired()))
}

/// Trains `design` on the candidates' budget and validates it: the
/// result is scored PA × `success_rate`. Also returns the seconds spent
/// validating (the result holds the training time).
fn train_and_score(
    inputs: &Scoring,
    design: &Design,
    key: String,
    iteration: usize,
    success_rate: f64,
    seed: u64,
) -> Result<(CandidateResult, f64), EvolveError> {
    let t = Instant::now();
    let (policy, repaired) = train_design(
        inputs,
        design,
        Algo::Ppo,
        inputs.cfg.train.total_steps,
        seed,
        None,
        0,
    )?;
    let train_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let v = validate(inputs, &policy);
    let r = CandidateResult {
        key,
        iteration,
        design: Some(design.clone()),
        modules: Vec::new(),
        success_rate,
        score: Some(v.pa * success_rate),
        validation: Some(v),
        repaired,
        train_secs,
        prompt_tokens: 0,
        completion_tokens: 0,
    };
    Ok((r, t.elapsed().as_secs_f64()))
}

/// `validation_orders` of the validation split, spread evenly over it.
fn validation_orders(inputs: &Scoring) -> Vec<ParentOrder> {
    let n = inputs.cfg.validation_orders.min(inputs.val_orders.len());
    let step = (inputs.val_orders.len() as f64 / n.max(1) as f64).max(1.0);
    (0..n)
        .map(|i| inputs.val_orders[(i as f64 * step) as usize].clone())
        .collect()
}

fn validate(inputs: &Scoring, policy: &Policy) -> Validation {
    let orders = validation_orders(inputs);
    let p = policy.clone();
    let f = [StrategyFactory {
        label: "candidate".into(),
        make: Box::new(move || Box::new(PolicyStrategy::new(p.clone(), "candidate".into()))),
    }];
    let reward = DefaultReward {
        inventory_penalty: inputs.env_cfg.inventory_penalty,
        terminal_penalty: inputs.env_cfg.terminal_penalty,
    };
    let rows = run_backtest(
        inputs.market,
        &orders,
        &f,
        &[&StaticVenue as &dyn Venue],
        inputs.env_cfg,
        &reward,
        &|_| {},
    );
    let refs: Vec<&OrderResult> = rows.iter().collect();
    let s = summarize("candidate", "static", &refs, inputs.cfg.seed);
    let nd = inputs.cfg.dynamic_validation_orders.min(orders.len());
    let dynamic = DynamicVenue {
        market: inputs.market_cfg.clone(),
        seed: inputs.cfg.seed,
    };
    let drows = run_backtest(
        inputs.market,
        &orders[..nd],
        &f,
        &[&dynamic as &dyn Venue],
        inputs.env_cfg,
        &reward,
        &|_| {},
    );
    let mean = |v: &[OrderResult]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().map(|r| r.pa_bps).sum::<f64>() / v.len() as f64
        }
    };
    let pa_dynamic = mean(&drows);
    let static_subset = mean(
        &rows
            .iter()
            .filter(|r| drows.iter().any(|d| d.order_id == r.order_id))
            .cloned()
            .collect::<Vec<_>>(),
    );
    Validation {
        pa: s.pa.mean,
        pa_std: s.pa_std,
        wr: s.wr,
        glr: s.glr.unwrap_or(0.0),
        afi: s.afi,
        illusory_gain: static_subset - pa_dynamic,
        pa_dynamic,
    }
}

/// The numbers of a design the low-level DEK tunes: the reward program's
/// literals, then the imagination's (`ImaginationModule::constants`) when
/// the design imagines days at all, so that a reward without literals
/// (`twap_gain`) is still tuned.
struct Tunable {
    reward: ProgramReward,
    imagines: bool,
}

impl Tunable {
    fn of(design: &Design) -> Result<Self, EvolveError> {
        Ok(Tunable {
            reward: ProgramReward::new(&design.reward)
                .map_err(|e| EvolveError::Config(e.to_string()))?,
            imagines: !design.imagination.scenarios.is_empty(),
        })
    }

    fn constants(&self, design: &Design) -> Vec<f64> {
        let mut c = self.reward.program().constants();
        if self.imagines {
            c.extend(design.imagination.constants());
        }
        c
    }

    /// `design` with `constants` in place, and its constants as it now
    /// has them (shares clamped); `None` when one is out of its range.
    fn apply(&self, design: &Design, constants: &[f64]) -> Option<(Design, Vec<f64>)> {
        let literals = self.reward.program().constants().len();
        let (for_reward, for_imagination) = constants.split_at(literals.min(constants.len()));
        let mut d = design.clone();
        if literals > 0 {
            let program = self.reward.program().with_constants(for_reward).ok()?;
            d.reward = RewardModule {
                program: program.source().to_string(),
            };
        }
        let mut now = for_reward.to_vec();
        if self.imagines {
            d.imagination = d.imagination.with_constants(for_imagination).ok()?;
            now.extend(d.imagination.constants());
        }
        Some((d, now))
    }
}

/// One offspring of a (1+λ)-ES generation: its constants, and its result
/// from an earlier run or the design still to train with its seed.
struct Member {
    key: String,
    path: PathBuf,
    constants: Vec<f64>,
    job: Job,
}

enum Job {
    Stored(CandidateResult),
    Train(Design, u64),
}

/// (1+λ)-ES on the design's numeric constants (`Tunable`): each generation tries λ
/// log-normal perturbations of the incumbent and keeps the best if it
/// scores higher. Each trial is a candidate of its own in the run
/// directory (`ll<j>_g<g>_m<m>`), so resume skips finished ones.
fn tune_constants(
    inputs: &Scoring,
    best: &CandidateResult,
    j: usize,
    dir: &Path,
) -> Result<Vec<CandidateResult>, EvolveError> {
    let cfg = &inputs.cfg.low_level;
    let Some(design) = best.design.clone() else {
        return Ok(Vec::new());
    };
    let tunable = Tunable::of(&design)?;
    let constants = tunable.constants(&design);
    if constants.is_empty() {
        return Ok(Vec::new());
    }
    let mut rng = SmallRng::seed_from_u64(inputs.cfg.seed ^ (j as u64 + 0xDE4));
    let noise = Normal::new(0.0, cfg.sigma).map_err(|e| EvolveError::Config(e.to_string()))?;
    let mut incumbent = (design, best.score.unwrap_or(f64::MIN), constants);
    let mut out = Vec::new();
    for g in 0..cfg.generations {
        // The generation's constants are drawn first, so that its
        // trainings can run side by side and draw the same numbers.
        let mut members = Vec::new();
        for m in 0..cfg.lambda {
            let constants: Vec<f64> = incumbent
                .2
                .iter()
                .map(|v| v * noise.sample(&mut rng).exp())
                .collect();
            let key = format!("ll{j}_g{g}_m{m}");
            let path = dir.join("candidates").join(format!("{key}.json"));
            let Some((d, constants)) = tunable.apply(&incumbent.0, &constants) else {
                continue;
            };
            let job = match read_json::<CandidateResult>(&path) {
                Some(r) => Job::Stored(r),
                None => {
                    let seed = inputs.cfg.seed
                        ^ ((j * 1000 + 500 + g * 10 + m) as u64)
                            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    Job::Train(d, seed)
                }
            };
            members.push(Member {
                key,
                path,
                constants,
                job,
            });
        }
        let fused = |m: &Member| match &m.job {
            Job::Stored(_) => true,
            Job::Train(d, _) => trains_fused(&inputs.cfg.train, d, Algo::Ppo),
        };
        let results = side_by_side(
            &members,
            inputs.cfg.parallel_candidates(),
            fused,
            |m| match &m.job {
                Job::Stored(r) => Ok(r.clone()),
                Job::Train(d, seed) => {
                    let (r, _) =
                        train_and_score(inputs, d, m.key.clone(), j, best.success_rate, *seed)?;
                    write_json(&m.path, &r)?;
                    Ok(r)
                }
            },
        )?;
        let mut gen_best: Option<(Design, f64, Vec<f64>)> = None;
        for (r, m) in results.into_iter().zip(&members) {
            if let (Some(d), Some(s)) = (r.design.clone(), r.score) {
                if gen_best.as_ref().is_none_or(|b| s > b.1) {
                    gen_best = Some((d, s, m.constants.clone()));
                }
            }
            out.push(r);
        }
        if let Some(b) = gen_best {
            if b.1 > incumbent.1 {
                incumbent = b;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serl_design::ImaginationModule;

    fn timing_design(reward: &str) -> Design {
        let mut d = Design::baseline();
        d.reward = RewardModule {
            program: reward.into(),
        };
        d.imagination = ImaginationModule {
            scenarios: vec![serl_env::Scenario {
                volatility_mult: 1.0,
                drift_bps: -120.0,
                liquidity_mult: 1.0,
                jumps: Vec::new(),
            }],
            share: 0.5,
            replay_share: 0.6,
        };
        d
    }

    #[test]
    fn the_es_tunes_the_imagination_of_a_reward_without_literals() {
        let d = timing_design("twap_gain");
        let t = Tunable::of(&d).unwrap();
        assert_eq!(t.constants(&d), vec![0.5, 0.6, 1.0, -120.0, 1.0]);

        let (tuned, now) = t.apply(&d, &[0.4, 1.2, 1.1, -150.0, 0.8]).unwrap();
        assert_eq!(tuned.reward, d.reward);
        assert_eq!(tuned.imagination.replay_share, 1.0, "shares stay shares");
        assert_eq!(tuned.imagination.scenarios[0].drift_bps, -150.0);
        assert_eq!(now, t.constants(&tuned));
    }

    #[test]
    fn the_es_tunes_reward_literals_first_and_skips_what_is_out_of_range() {
        let d = timing_design("twap_gain - 2 * remaining_inv^2 / steps");
        let t = Tunable::of(&d).unwrap();
        let c = t.constants(&d);
        assert_eq!(c[..2], [2.0, 2.0]);
        let mut changed = c.clone();
        changed[0] = 3.0;
        let (tuned, _) = t.apply(&d, &changed).unwrap();
        assert!(
            tuned.reward.program.contains("3 *"),
            "{}",
            tuned.reward.program
        );
        assert_eq!(tuned.imagination, d.imagination);

        let mut wild = c;
        wild[4] = 50.0; // volatility_mult, at most 5
        assert!(t.apply(&d, &wild).is_none());

        // Without imagined days only the reward's literals are tuned.
        let plain = Design::baseline();
        let t = Tunable::of(&plain).unwrap();
        assert_eq!(
            t.constants(&plain),
            ProgramReward::new(&plain.reward)
                .unwrap()
                .program()
                .constants()
        );
    }
}
