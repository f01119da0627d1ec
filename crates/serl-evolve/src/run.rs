//! The loop, stage by stage: design ([`crate::design_stage`]), train and
//! score ([`crate::score`]), the low-level DEK ([`crate::dek_low`]),
//! feedback and the high-level DEK ([`crate::dek_high`]), convergence, and
//! the final test ([`crate::final_stage`]).
//!
//! Every finished candidate is written to `candidates/<key>.json`; a
//! resumed run replays the loop from the start (the designer is
//! deterministic by seed, and an LLM's answers come from the transcript
//! cache), loading each finished candidate instead of training it again,
//! so at most the candidates in flight are lost.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serl_env::{EnvConfig, MarketConfig, MarketData, ParentOrder, SESSION_MINUTES};
use serl_eval::OrderResult;
use serl_llm::prompts::{Feedback, Prompts, TaskInfo};
use serl_llm::Designer;

use crate::candidate::{Designed, ScoreJob, Scored};

use crate::config::{ConvergenceConfig, EvolveConfig};
use crate::dek_high::{feedback, Instructions, Refining};
use crate::design_stage::{Round, SmokeBench};
use crate::error::{file_err, write_json, EvolveError};
pub use crate::event::Event;
use crate::evidence::SelectionEvidence;
use crate::executor::{self, Executor};
use crate::hierarchy_rows::HierarchyRow;
pub use crate::iteration::IterationSummary;
use crate::iteration::{designed_best, operator_best, summarize_iteration};
use crate::llm_critic::CriticMaker;
use crate::lockbox::Lockbox;
use crate::record::{best_of, CandidateKind, CandidateResult, Screened};
use crate::search::Search;
use crate::stages::{ProfiledStage, Stages};
use crate::train::{Pairing, Scoring};

/// The learner's fine-tuning after round `j`, into
/// `finetune/adapter-{j + 1}`.
fn learn(
    inputs: &mut EvolveInputs,
    j: usize,
    all: &[CandidateResult],
    dir: &Path,
) -> Result<crate::learner::Learned, EvolveError> {
    let out = dir.join("finetune").join(format!("adapter-{}", j + 1));
    let designer = inputs.designer.as_mut();
    match inputs.learner.as_mut() {
        Some(l) => l.learn(j, all, &out, designer),
        None => Err(EvolveError::Config(
            "no learner for [evolve.finetune]".into(),
        )),
    }
}

/// Told about each [`Event`]; candidates train in parallel, so it is
/// called from several threads.
pub type OnEvent<'a> = Box<dyn Fn(Event) + Sync + 'a>;

/// What the loop needs.
pub struct EvolveInputs<'a> {
    /// The `[evolve]` table.
    pub cfg: EvolveConfig,
    /// The execution task.
    pub env_cfg: EnvConfig,
    /// The dynamic market's population (a profiling design replaces it).
    pub market_cfg: MarketConfig,
    /// The sessions the orders play on.
    pub market: &'a MarketData,
    /// Orders candidates train on.
    pub train_orders: &'a [ParentOrder],
    /// Orders candidates are scored on.
    pub val_orders: &'a [ParentOrder],
    /// Orders the final test plays, once.
    pub test_orders: &'a [ParentOrder],
    /// Who writes the modules.
    pub designer: Box<dyn Designer + 'a>,
    /// Rendered into the fine-tuning dataset (and for the builtin
    /// designer, which reads contexts directly).
    pub prompts: Option<Prompts>,
    /// Where candidates, the transcript and the report go; a run found
    /// there is resumed.
    pub run_dir: PathBuf,
    /// Told what the loop is doing (a progress bar, a log).
    pub on_event: Option<OnEvent<'a>>,
    /// Declares the run final and opens its sealed test
    /// (`[evolve] lockbox`); without a lockbox, nothing.
    pub open_test: bool,
    /// Where the trainings run: `None` here, side by side; a cluster
    /// runs each batch as tasks of its plan (`serl-cluster`).
    pub cluster: Option<&'a serl_cluster::Cluster>,
    /// Makes an LLM reward critic for the trainings whose config asks for
    /// one (`critic = "llm"`); without it such a training is an error.
    pub critic: Option<Box<CriticMaker>>,
    /// Fine-tunes the designer between rounds (`[evolve.finetune]`); a
    /// run that asks for it without one is refused.
    pub learner: Option<Box<dyn crate::learner::Learner + 'a>>,
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
            critic: self.critic.as_deref(),
            pairing: None,
        }
    }
}

/// What a run found.
pub struct EvolveOutcome {
    /// Every candidate, in the order they were made.
    pub candidates: Vec<CandidateResult>,
    /// The best by validation score.
    pub best: CandidateResult,
    /// Plain PPO with the default modules, trained and validated exactly
    /// like a candidate: the bar the search must clear on validation.
    pub baseline: CandidateResult,
    /// The final test: every strategy on every test order (empty while
    /// the lockbox keeps it sealed).
    pub test: Vec<OrderResult>,
    /// The lockbox, where `[evolve] lockbox` keeps one: sealed
    /// (`opened_at` unset, no test played) or opened.
    pub lockbox: Option<Lockbox>,
    /// Seconds per stage, sorted by name.
    pub stages: Vec<(String, f64)>,
    /// Iterations run before convergence (or all of them).
    pub iterations_run: usize,
    /// Wall seconds the run has taken over every process that worked on
    /// it (a resumed run adds to its earlier ones, `costs.json`).
    pub wall_secs: f64,
    /// The CPU seconds of those processes and the cores they had, where
    /// the system tells.
    pub core_use: Option<crate::CoreUse>,
    /// The hierarchy rows (`[evolve.hierarchy]`), the design alone first;
    /// empty without them.
    pub hierarchy: Vec<HierarchyRow>,
    /// The evidence behind the choice on validation, and the run's
    /// recommendation (`evidence.json`).
    pub evidence: SelectionEvidence,
}

impl EvolveInputs<'_> {
    fn say(&self, event: Event) {
        if let Some(f) = &self.on_event {
            f(event);
        }
    }
}

fn task(env: &EnvConfig, train: &serl_train::TrainConfig, signal: bool) -> TaskInfo {
    let team = train.learning_team();
    TaskInfo {
        steps: (SESSION_MINUTES as usize / env.decision_minutes.max(1) as usize).max(1),
        decision_minutes: env.decision_minutes,
        benchmark: format!("{:?}", env.benchmark).to_uppercase(),
        placements: train.placements.iter().map(|p| p.label()).collect(),
        team_agents: team.map_or(1, |t| t.agents),
        team_mode: team.map_or(String::new(), |t| t.mode.name().to_string()),
        signal,
        ..TaskInfo::default()
    }
}

/// Whether the EMA of the best validation PA has stopped moving: less than
/// `epsilon` for `window` iterations in a row.
#[derive(Debug, Default)]
struct Converging {
    ema: Option<f64>,
    still: usize,
}

impl Converging {
    /// Takes the iteration's best PA; `true` once converged.
    fn update(&mut self, c: &ConvergenceConfig, best_pa: f64) -> bool {
        let next = match self.ema {
            None => best_pa,
            Some(e) => e + c.ema * (best_pa - e),
        };
        if self.ema.is_some_and(|e| (next - e).abs() < c.epsilon) {
            self.still += 1;
        } else {
            self.still = 0;
        }
        self.ema = Some(next);
        self.still >= c.window
    }
}

/// Runs the loop in `inputs.run_dir`, resuming whatever it finds there.
pub fn evolve(mut inputs: EvolveInputs) -> Result<EvolveOutcome, EvolveError> {
    let cfg = inputs.cfg.clone();
    cfg.validate().map_err(EvolveError::Config)?;
    let dir = inputs.run_dir.clone();
    std::fs::create_dir_all(dir.join("candidates")).map_err(|e| file_err(&dir, e))?;
    let task = task(
        &inputs.env_cfg,
        &inputs.cfg.train,
        inputs.market.has_signal(),
    );
    let mut stages = Stages::resume(&dir);
    let executor = executor::on(inputs.cluster);
    let executor = executor.as_ref();
    let mut instructions = Instructions::new(&cfg);
    let mut all: Vec<CandidateResult> = Vec::new();
    let mut last_feedback: Option<Feedback> = None;
    let mut converging = Converging::default();
    let mut iterations_run = 0;
    let mut search = start_search(&inputs, executor)?;
    if cfg.finetune.is_some() && inputs.learner.is_none() {
        return Err(EvolveError::Config(
            "[evolve.finetune] fine-tunes the designing model: it needs the embedded model (`--llm local` with [llm.local] model)".into(),
        ));
    }
    let mut learned = Vec::new();
    for j in 0..cfg.iterations {
        let k = match &cfg.budget {
            Some(b) => b.affordable(&all, cfg.candidates),
            None => cfg.candidates,
        };
        if k == 0 {
            inputs.say(Event::BudgetSpent { iterations: j });
            break;
        }
        if k < cfg.candidates {
            inputs.say(Event::BudgetLow {
                iteration: j + 1,
                candidates: k,
            });
        }
        iterations_run = j + 1;
        let designed = stages.time("design", || {
            let round = (&instructions, last_feedback.as_ref(), &all[..]);
            design_round(&mut inputs, &task, round, (j, k), search.as_mut())
        })?;
        let pairing = search.as_ref().map(Search::pairing);
        let trained = train_round(&inputs, executor, &designed, j, &mut stages, pairing)?;
        all.extend(trained);
        let tuned_parent = best_of(&all).cloned();
        let mut tuned = low_level_round(&inputs, executor, &all, j, &mut stages, pairing)?;
        if let (Some(s), Some(p)) = (search.as_ref(), tuned_parent.as_ref()) {
            s.adopt_tuned(&mut tuned, p, &dir)?;
        }
        all.extend(tuned);
        let mut summary = summarize_iteration(&all, j, k);
        if let Some(s) = search.as_mut() {
            s.end_round(&cfg, &all, j, &dir)?;
            summary.operators = s.operators(j);
        }
        let fb = feedback(&all, j);
        inputs.say(Event::Iteration(summary.clone()));
        if cfg
            .finetune
            .as_ref()
            .is_some_and(|f| f.after(j, cfg.iterations))
        {
            let l = stages.time("fine-tuning", || learn(&mut inputs, j, &all, &dir))?;
            learned.push(l.clone());
            write_json(&dir.join("finetune").join("adapters.json"), &learned)?;
            inputs.say(Event::FineTuned(l));
        }
        if cfg.high_level {
            stages.time("high-level DEK", || {
                let round = Refining {
                    cfg: &cfg,
                    task: &task,
                    iteration: j,
                    best_score: designed_best(&all, j),
                    operator_best: operator_best(&all, j),
                    feedback: &fb,
                };
                instructions.refine(inputs.designer.as_mut(), &round)
            });
        }
        last_feedback = Some(fb);
        write_json(&dir.join("instructions.json"), &instructions.log())?;
        if converging.update(&cfg.convergence, summary.best_pa) {
            inputs.say(Event::Converged { iterations: j + 1 });
            break;
        }
    }
    finish(&inputs, executor, all, iterations_run, stages)
}

/// After the rounds: the best design retrained and tested beside plain
/// PPO, the selection evidence and the hierarchy rows.
fn finish(
    inputs: &EvolveInputs,
    executor: &dyn Executor,
    all: Vec<CandidateResult>,
    iterations_run: usize,
    mut stages: Stages,
) -> Result<EvolveOutcome, EvolveError> {
    let best = best_of(&all)
        .cloned()
        .ok_or(EvolveError::NoValidDesign(iterations_run))?;
    let design = best.design.clone().expect("scored candidates have designs");
    let (baseline, (test, lockbox)) =
        baseline_and_final(inputs, executor, &best, &design, &mut stages)?;
    let evidence = stages.time("evidence", || {
        let scoring = inputs.scoring();
        let weighing = (&scoring, executor, inputs.run_dir.as_path());
        crate::evidence_stage::weigh(weighing, &all, &baseline, &best.key)
    })?;
    let sealed = lockbox.as_ref().is_some_and(Lockbox::sealed);
    let hierarchy = hierarchy_rows(inputs, executor, &design, sealed, &mut stages)?;
    Ok(EvolveOutcome {
        candidates: all,
        best,
        baseline,
        test,
        lockbox,
        stages: stages.sorted(),
        iterations_run,
        wall_secs: stages.wall_secs(),
        core_use: stages.core_use(),
        hierarchy,
        evidence,
    })
}

/// The program database of `[evolve.search]` (none without it). It scores
/// every design by its daily edge over plain PPO, so plain PPO is
/// validated first.
fn start_search(
    inputs: &EvolveInputs,
    executor: &dyn Executor,
) -> Result<Option<Search>, EvolveError> {
    let Some(s) = &inputs.cfg.search else {
        return Ok(None);
    };
    let plain = crate::final_stage::baseline(&inputs.scoring(), executor, &inputs.run_dir)?;
    Ok(Some(Search::new(&inputs.cfg, s, &plain)))
}

/// Plain PPO validated (the bar on validation), and the final stage of
/// [`seal_or_test`]. Where no number can change by it
/// ([`crate::final_stage::baseline_overlaps_retraining`]), plain PPO trains
/// while the final retrainings do, so that the machine is not left to a
/// lone training twice over.
fn baseline_and_final(
    inputs: &EvolveInputs,
    executor: &dyn Executor,
    best: &CandidateResult,
    design: &serl_design::Design,
    stages: &mut Stages,
) -> Result<(CandidateResult, Tested), EvolveError> {
    let cfg = &inputs.cfg;
    let finale = Finale {
        scoring: inputs.scoring(),
        dir: &inputs.run_dir,
        lockbox: cfg.lockbox,
        open_test: inputs.open_test,
        test_orders: inputs.test_orders,
    };
    let plain = || crate::final_stage::baseline(&finale.scoring, executor, finale.dir);
    if crate::final_stage::baseline_overlaps_retraining(cfg, executor, design) {
        let (baseline, tested) = rayon::join(plain, || {
            seal_or_test(&finale, executor, &best.key, design, stages)
        });
        let baseline = baseline?;
        announce(inputs, best, &baseline);
        Ok((baseline, tested?))
    } else {
        let baseline = plain()?;
        announce(inputs, best, &baseline);
        let tested = seal_or_test(&finale, executor, &best.key, design, stages)?;
        Ok((baseline, tested))
    }
}

/// What the final stage needs of a run's inputs (all of it shareable
/// across threads, unlike the designer).
struct Finale<'a> {
    scoring: Scoring<'a>,
    dir: &'a Path,
    lockbox: bool,
    open_test: bool,
    test_orders: &'a [ParentOrder],
}

/// The final test's rows, and the lockbox.
type Tested = (Vec<OrderResult>, Option<Lockbox>);

/// The lockbox sealed (nothing retrained or played) or opened, or none;
/// unless sealed, the best design (`key`) and the baselines retrained
/// with the final budget and tested once. A sealed run leaves the final
/// retraining to the opening: most runs of a study are never opened.
fn seal_or_test(
    finale: &Finale,
    executor: &dyn Executor,
    key: &str,
    design: &serl_design::Design,
    stages: &mut Stages,
) -> Result<Tested, EvolveError> {
    let dir = finale.dir;
    let lockbox = match (finale.lockbox, finale.open_test) {
        (true, false) => Some(crate::lockbox::seal(dir, key, design)?),
        (true, true) => Some(crate::lockbox::open(dir, key)?),
        (false, _) => None,
    };
    if lockbox.as_ref().is_some_and(Lockbox::sealed) {
        return Ok((Vec::new(), lockbox));
    }
    let scoring = &finale.scoring;
    let trained = stages.time("final training", || {
        crate::final_stage::retrain(scoring, executor, design, dir)
    })?;
    let test = stages.time("test", || {
        crate::final_stage::test(scoring, finale.test_orders, trained, dir)
    })?;
    Ok((test, lockbox))
}

/// Iteration `j`'s low-level DEK trials on the best design so far (none
/// when it is switched off).
fn low_level_round(
    inputs: &EvolveInputs,
    executor: &dyn Executor,
    all: &[CandidateResult],
    j: usize,
    stages: &mut Stages,
    pairing: Option<Pairing>,
) -> Result<Vec<CandidateResult>, EvolveError> {
    let best = match best_of(all) {
        Some(best) if inputs.cfg.low_level.enabled => best,
        _ => return Ok(Vec::new()),
    };
    let scoring = Scoring {
        pairing,
        ..inputs.scoring()
    };
    let on_event = inputs.on_event.as_ref();
    let tick = || {
        if let Some(f) = on_event {
            f(Event::CandidateDone);
        }
    };
    let tuned = stages.time("low-level DEK", || {
        crate::dek_low::tune_constants(&scoring, executor, best, j, &inputs.run_dir, &tick)
    })?;
    for r in &tuned {
        stages.add_profile(ProfiledStage::LowLevel, &r.train_profile);
    }
    Ok(tuned)
}

/// Announces plain PPO's validation beside the best design's.
fn announce(inputs: &EvolveInputs, best: &CandidateResult, baseline: &CandidateResult) {
    let pa = |c: &CandidateResult| c.validation.as_ref().map_or(0.0, |v| v.pa);
    inputs.say(Event::Validated {
        best_pa: pa(best),
        baseline_pa: pa(baseline),
    });
}

/// The hierarchy rows of `[evolve.hierarchy]` on `design` (none without
/// them), tested unless the lockbox is `sealed`.
fn hierarchy_rows(
    inputs: &EvolveInputs,
    executor: &dyn Executor,
    design: &serl_design::Design,
    sealed: bool,
    stages: &mut Stages,
) -> Result<Vec<HierarchyRow>, EvolveError> {
    let Some(h) = inputs.cfg.hierarchy.as_ref().filter(|h| !h.rows.is_empty()) else {
        return Ok(Vec::new());
    };
    inputs.say(Event::Hierarchy { rows: h.rows.len() });
    let test_orders = (!sealed).then_some(inputs.test_orders);
    let scoring = inputs.scoring();
    stages.time("hierarchy rows", || {
        crate::hierarchy_rows::run(&scoring, executor, h, design, &inputs.run_dir, test_orders)
    })
}

/// Designs iteration `j`'s `candidates`, one after another (the designer
/// is one conversation), each planned by the program database where the
/// run has one.
fn design_round(
    inputs: &mut EvolveInputs,
    task: &TaskInfo,
    (instructions, feedback, all): (&Instructions, Option<&Feedback>, &[CandidateResult]),
    (j, candidates): (usize, usize),
    mut search: Option<&mut Search>,
) -> Result<Vec<Designed>, EvolveError> {
    let cfg = &inputs.cfg;
    let round = Round {
        cfg,
        task,
        micro: &instructions.micro,
        operator_instructions: &instructions.operators,
        macro_instruction: &instructions.macro_instruction,
        feedback,
        history: all,
        prompts: inputs.prompts.as_ref(),
        smoke: SmokeBench {
            market: inputs.market,
            env_cfg: &inputs.env_cfg,
            order: inputs.train_orders.first(),
            placing: !cfg.train.placements.is_empty(),
            plan: cfg.train.plan.is_some() || cfg.modules.contains(&serl_design::ModuleKind::Plan),
        },
    };
    let mut designed = Vec::with_capacity(candidates);
    for k in 0..candidates {
        if let Some(f) = &inputs.on_event {
            f(Event::Designing {
                iteration: j + 1,
                iterations: cfg.iterations,
                candidate: k + 1,
            });
        }
        let key = CandidateKind::designed_key(j, k);
        let seed = cfg.seed ^ ((j * 1000 + k) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let plan = search.as_ref().map(|s| s.plan(cfg, (j, k), all, seed));
        let designer: &mut dyn Designer = match (&plan, search.as_mut()) {
            (Some(p), Some(s)) if p.builtin() => &mut s.builtin,
            _ => inputs.designer.as_mut(),
        };
        designed.push(round.design(designer, key, seed, plan.as_ref())?);
    }
    Ok(designed)
}

/// Trains and scores the round's designs (`parallel` at a time, or as a
/// cluster batch) and records each. A finished one is loaded instead of
/// trained: recorded, or scored (`scores/<key>.json`) by a process killed
/// before it recorded the round, so a kill loses only those in flight.
fn train_round(
    inputs: &EvolveInputs,
    executor: &dyn Executor,
    designed: &[Designed],
    j: usize,
    stages: &mut Stages,
    pairing: Option<Pairing>,
) -> Result<Vec<CandidateResult>, EvolveError> {
    let scoring = Scoring {
        pairing,
        ..inputs.scoring()
    };
    inputs.say(Event::Training {
        iteration: j + 1,
        iterations: inputs.cfg.iterations,
        designs: designed.len(),
        parallel: inputs.cfg.parallel_candidates(),
        engine: executor.engine(),
    });
    let dir = &inputs.run_dir;
    let mut round: Vec<Option<CandidateResult>> = designed
        .iter()
        .map(|d| CandidateResult::recorded(dir, &d.key).map(|r| scoring.pair(r)))
        .collect();
    let jobs: Vec<ScoreJob> = designed
        .iter()
        .zip(&round)
        .filter(|(_, recorded)| recorded.is_none())
        .filter_map(|(d, _)| d.job(j))
        .collect();
    let prescreen = inputs
        .cfg
        .budget
        .as_ref()
        .and_then(|b| b.prescreen.as_ref());
    let (jobs, screened) = match prescreen {
        Some(p) => crate::prescreen::screen(&scoring, executor, dir, p, jobs, j)?,
        None => (jobs, HashMap::new()),
    };
    // A tick for each design as it finishes (here), or as the batch does.
    let on_event = inputs.on_event.as_ref();
    let tick = || {
        if let Some(f) = on_event {
            f(Event::CandidateDone);
        }
    };
    let mut scored: HashMap<String, Scored> = executor
        .score(&scoring, dir, &format!("i{j}"), &jobs, &tick)?
        .into_iter()
        .map(|s| (s.result.key.clone(), s))
        .collect();
    for (d, slot) in designed.iter().zip(round.iter_mut()) {
        if slot.is_some() {
            tick();
            continue;
        }
        let Scored { result, eval_secs } = settle(d, j, screened.get(&d.key), &mut scored, &tick);
        stages.add("train", result.train_secs);
        stages.add_profile(ProfiledStage::Candidates, &result.train_profile);
        stages.add("evaluate", eval_secs);
        *slot = Some(d.record(scoring.pair(result), dir)?);
    }
    Ok(round.into_iter().flatten().collect())
}

/// What became of designed candidate `d` of iteration `j` this round:
/// stopped by the pre-screen, scored (taken from `scored`, with the
/// pre-screen's word and seconds), or invalid. `tick` is told of those
/// the batch did not count.
fn settle(
    d: &Designed,
    j: usize,
    screened: Option<&Screened>,
    scored: &mut HashMap<String, Scored>,
    tick: &dyn Fn(),
) -> Scored {
    let unscored = |result| Scored {
        result,
        eval_secs: 0.0,
    };
    match (&d.design, screened) {
        (Some(design), Some(s)) if !s.passed => {
            tick();
            let stopped =
                crate::prescreen::stopped(d.key.clone(), j, d.success_rate, design.clone(), *s);
            unscored(stopped)
        }
        (Some(_), s) => {
            let mut out = scored.remove(&d.key).expect("one result per job");
            if let Some(s) = s {
                out.result.prescreen = Some(*s);
                out.result.train_secs += s.secs;
            }
            out
        }
        (None, _) => {
            tick();
            unscored(CandidateResult::invalid(d.key.clone(), j, d.success_rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convergence(window: usize) -> ConvergenceConfig {
        ConvergenceConfig {
            ema: 0.5,
            epsilon: 0.01,
            window,
        }
    }

    #[test]
    fn the_loop_converges_once_the_best_pa_stays_put_for_the_window() {
        let c = convergence(2);
        let mut conv = Converging::default();
        assert!(
            !conv.update(&c, 1.0),
            "the first iteration sets the EMA to 1"
        );
        assert!(!conv.update(&c, 3.0), "the EMA moves to 2");
        assert!(
            !conv.update(&c, 2.0),
            "the EMA stays at 2: one still iteration"
        );
        assert!(conv.update(&c, 2.0), "two still iterations: converged");
        let mut jumpy = Converging::default();
        for pa in [2.0, 2.0, 5.0, 5.0] {
            assert!(!jumpy.update(&c, pa), "a jump resets the count");
        }
    }
}
