//! An evolve study: the run directory and its copy of the prompts, the
//! SE-RL loop on the run's data, the ablations after it, and the report.

use std::path::{Path, PathBuf};

use serl_cluster::Cluster;
use serl_eval::{Provenance, ReportData};
use serl_evolve::{
    evolve, Ablation, AblationRow, ConfirmReport, ConfirmStep, EvolveConfig, EvolveError,
    EvolveInputs, EvolveOutcome, OnEvent,
};
use serl_llm::{Designer, Prompts};

use crate::bail;
use crate::config::{EvolveFile, LlmChoice};
use crate::data::StudyData;
use crate::error::{Context, Result};

/// Writes a new run's config and its copy of the prompts (`new_run`);
/// returns the prompts the run asks with: its own copy, so that a resumed
/// or replayed run asks exactly what the original asked.
fn prepare_run_dir(out: &Path, cfg: &EvolveFile, new_run: bool) -> Result<PathBuf> {
    let prompt_dir = cfg.prompt_dir();
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    if new_run {
        write_config(out, cfg)?;
        crate::rundir::record_fingerprints(out, cfg)?;
        if prompt_dir.is_dir() {
            copy_dir(&prompt_dir, &out.join("prompts"))
                .with_context(|| format!("copying {} into the run", prompt_dir.display()))?;
        }
    }
    Ok(if out.join("prompts").is_dir() {
        out.join("prompts")
    } else {
        prompt_dir
    })
}

/// Writes the run's config, `RUN/evolve.toml`, whole or not at all.
pub(crate) fn write_config(out: &Path, cfg: &EvolveFile) -> Result<()> {
    let path = out.join("evolve.toml");
    let tmp = out.join(".evolve.toml.tmp");
    std::fs::write(&tmp, toml::to_string(cfg)?)
        .and_then(|_| std::fs::rename(&tmp, &path))
        .with_context(|| format!("writing {}", path.display()))
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let p = e?.path();
        if p.is_file() {
            std::fs::copy(&p, to.join(p.file_name().unwrap_or_default()))?;
        }
    }
    Ok(())
}

/// `open_test` on a run without a lockbox, and a confirmation (`--seeds`,
/// `--walk-forward`) on a sealed test split: refused before the run
/// rather than after it.
fn check_lockbox(cfg: &EvolveFile, out: &Path, open_test: bool, confirming: bool) -> Result<()> {
    if open_test && !cfg.evolve.lockbox {
        crate::bail!(
            "{}: this run has no lockbox ([evolve] lockbox = false): its test is played when the run ends; --open-test is for a run whose test was sealed",
            out.display()
        );
    }
    let opened = serl_evolve::Lockbox::read(out).is_some_and(|l| !l.sealed());
    if confirming && cfg.evolve.lockbox && !open_test && !opened {
        crate::bail!(
            "--seeds and --walk-forward test on the test split, which this run keeps sealed: declare the design final first (serl evolve --resume {} --open-test)",
            out.display()
        );
    }
    Ok(())
}

/// What a run asks besides its config: the confirmation after it, and
/// how it goes on.
pub struct EvolveRequest {
    /// Independent seeds to confirm the best design on (0: none).
    pub seeds: usize,
    /// Confirm on the rolling windows of `[walk_forward]` too.
    pub walk_forward: bool,
    /// Declare the run final and open its sealed test.
    pub open_test: bool,
    /// A new run (its config and prompts are written), or a resumed one.
    pub new_run: bool,
    /// The transcript a replayed run reads (default: the run's own).
    pub replay_from: Option<PathBuf>,
}

impl EvolveRequest {
    /// Whether the run is confirmed after it.
    pub fn confirming(&self) -> bool {
        self.seeds > 0 || self.walk_forward
    }
}

/// A run ready to start: its directory written, its data and orders
/// loaded, its cluster and designer made.
pub struct Prepared {
    /// The prompts the run asks with (its own copy).
    pub prompts_dir: PathBuf,
    /// The prompt templates, loaded from `prompts_dir`.
    pub prompts: Prompts,
    /// The run's sessions and orders.
    pub data: StudyData,
    /// Where the trainings run; here when `None`.
    pub cluster: Option<Cluster>,
    /// Who designs (`[llm] backend`).
    pub designer: Box<dyn Designer>,
}

/// Everything before the loop: the lockbox flags checked, the run
/// directory prepared, the prompts, data and orders loaded (with the
/// confirmation's windows checked), the cluster and the designer made.
/// `warn` hears what the data's load left out.
pub fn prepare(
    out: &Path,
    cfg: &EvolveFile,
    req: &EvolveRequest,
    warn: &dyn Fn(&str),
) -> Result<Prepared> {
    check_lockbox(cfg, out, req.open_test, req.confirming())?;
    if !req.new_run {
        crate::rundir::set_aside_unreadable(out)?;
    }
    // The prompts and the data are read before a new run writes anything,
    // so a config that points at neither leaves no run behind.
    let run_prompts = out.join("prompts");
    let read_from = if !req.new_run && run_prompts.is_dir() {
        run_prompts
    } else {
        cfg.prompt_dir()
    };
    let prompts = Prompts::load(&read_from).with_context(|| {
        let hint = crate::paths::as_written_hint("prompts", &cfg.paths_as_written);
        format!("loading the prompts in {}{hint}", read_from.display())
    })?;
    if cfg.evolve.search.is_some() {
        // A search shows the model its parents through the operator
        // templates; a prompt directory without them would not.
        if let Some(e) = serl_llm::check_operators(&prompts).into_iter().next() {
            bail!("[evolve.search] needs the operator templates: {e}");
        }
    }
    let data = StudyData::load(cfg, req.confirming(), warn)?;
    if req.confirming() {
        // A team or windows the data cannot fill, before the run too.
        let walk_forward = req.walk_forward.then_some(&cfg.walk_forward);
        serl_evolve::check_confirmation(&cfg.evolve, walk_forward, &data.all)?;
    }
    let prompts_dir = prepare_run_dir(out, cfg, req.new_run)?;
    let cluster = crate::cluster::cluster_of(&cfg.cluster, out)?;
    let transcript = out.join("transcript.jsonl");
    let replay_from = req.replay_from.clone().unwrap_or(transcript.clone());
    let designer = crate::llm::make_designer(
        cfg,
        cfg.llm.backend,
        &prompts_dir,
        &transcript,
        &replay_from,
    )?;
    Ok(Prepared {
        prompts_dir,
        prompts,
        data,
        cluster,
        designer,
    })
}

/// Where a run's test orders came from, and which reward its best design
/// trained with.
fn provenance(cfg: &EvolveFile, orders: usize, outcome: &EvolveOutcome) -> Result<Provenance> {
    let reward = format!(
        "best design: {}",
        outcome
            .best
            .design
            .as_ref()
            .map_or("-".into(), |d| d.reward.source().to_string())
    );
    crate::data::provenance(
        &cfg.data_path(),
        "test",
        cfg.evolve.seed,
        orders,
        (&cfg.orders, &cfg.env),
        reward,
    )
}

/// What an evolve run shows as it goes: a fresh sink for each run of the
/// loop (the main one, then each ablation's).
pub type Shown<'a> = dyn Fn(&EvolveConfig) -> OnEvent<'a> + 'a;

/// The data and orders that the main run and every ablation share.
pub struct Study<'a, 's> {
    /// The run's config.
    pub cfg: &'a EvolveFile,
    /// The run's sessions and orders.
    pub data: &'a StudyData,
    /// `--open-test`: the main run is declared final.
    pub open_test: bool,
    /// Where the trainings run, when not here.
    pub cluster: Option<&'a Cluster>,
    /// The run's prompt templates (an LLM critic's too).
    pub prompts_dir: &'a Path,
    /// What each run of the loop shows.
    pub shown: &'a Shown<'s>,
}

impl Study<'_, '_> {
    /// One run of the loop into `run_dir`.
    pub fn evolve(
        &self,
        evolve_cfg: EvolveConfig,
        designer: Box<dyn Designer + '_>,
        prompts: Prompts,
        run_dir: &Path,
    ) -> Result<EvolveOutcome, EvolveError> {
        let critic = crate::llm::maker_for_evolve(
            &evolve_cfg,
            &self.cfg.llm,
            self.prompts_dir,
            self.cluster.is_some(),
        )
        .map_err(|e| EvolveError::Config(e.chain()))?;
        let on_event = (self.shown)(&evolve_cfg);
        let learner = crate::llm::learner_for_evolve(&evolve_cfg, &self.cfg.llm);
        evolve(EvolveInputs {
            learner,
            critic,
            cfg: evolve_cfg,
            env_cfg: self.cfg.env.clone(),
            market_cfg: self.cfg.market.clone(),
            market: &self.data.market,
            train_orders: &self.data.train,
            val_orders: &self.data.val,
            test_orders: &self.data.test,
            designer,
            prompts: Some(prompts),
            run_dir: run_dir.to_path_buf(),
            on_event: Some(on_event),
            open_test: self.open_test,
            cluster: self.cluster,
        })
    }

    /// The main run's report (`out/report.*`), its test's provenance with
    /// the orders over the capacity cap and what the load skipped.
    pub fn report(
        &self,
        out: &Path,
        outcome: &EvolveOutcome,
        designer: &str,
        ablations: &[AblationRow],
    ) -> Result<(ReportData, Provenance)> {
        let (cfg, data) = (self.cfg, self.data);
        let provenance = Provenance {
            orders_over_capacity: serl_eval::orders_over_capacity(
                &data.market,
                &data.test,
                &cfg.env,
            ),
            skipped: data.skipped.clone(),
            repairs: serl_evolve::repairs::read_repairs(out)
                .iter()
                .map(ToString::to_string)
                .collect(),
            ..provenance(cfg, data.test.len(), outcome)?
        };
        let modules = &cfg.evolve.modules;
        let report = serl_evolve::write_report(
            out,
            outcome,
            modules,
            designer,
            provenance.clone(),
            ablations,
        )?;
        Ok((report, provenance))
    }

    /// Each configured ablation, run after the main one (`main`, which
    /// took `main_secs`) in `ablations/NAME/` with its own report; the
    /// rows of the table, the main run's (`full`) first, or none without
    /// ablations. `starting` hears each ablation and its designer's name
    /// before it runs.
    pub fn ablations(
        &self,
        (main, main_secs): (&EvolveOutcome, f64),
        out: &Path,
        starting: &dyn Fn(Ablation, &str),
    ) -> Result<Vec<AblationRow>> {
        let cfg = self.cfg;
        if cfg.evolve.ablations.is_empty() {
            return Ok(Vec::new());
        }
        let full = AblationRow::from_outcome(
            "full",
            "the run as configured",
            main,
            main_secs,
            cfg.evolve.seed,
        );
        let mut ablations = vec![full];
        for &ablation in &cfg.evolve.ablations {
            let sub = out.join("ablations").join(ablation.name());
            std::fs::create_dir_all(&sub).with_context(|| format!("creating {}", sub.display()))?;
            let backend = match ablation {
                Ablation::Builtin => LlmChoice::Builtin,
                _ => cfg.llm.backend,
            };
            let sub_transcript = sub.join("transcript.jsonl");
            let designer = crate::llm::make_designer(
                cfg,
                backend,
                self.prompts_dir,
                &sub_transcript,
                &sub_transcript,
            )?;
            let name = designer.name();
            starting(ablation, &name);
            let t = std::time::Instant::now();
            // Ablations run once the main run's test is open.
            let mut sub_cfg = ablation.apply(&cfg.evolve);
            sub_cfg.lockbox = false;
            let prompts = Prompts::load(self.prompts_dir)?;
            let sub_outcome = self.evolve(sub_cfg, designer, prompts, &sub)?;
            let provenance = provenance(cfg, self.data.test.len(), &sub_outcome)?;
            let modules = &cfg.evolve.modules;
            serl_evolve::write_report(&sub, &sub_outcome, modules, &name, provenance, &[])?;
            ablations.push(AblationRow::from_outcome(
                ablation.name(),
                ablation.describe(),
                &sub_outcome,
                t.elapsed().as_secs_f64(),
                cfg.evolve.seed,
            ));
        }
        Ok(ablations)
    }
}

/// What a caller hears while an evolve run goes ([`run`]); the library
/// draws and prints nothing itself.
pub struct EvolveHooks<'a> {
    /// What the data's load left out.
    pub warn: &'a dyn Fn(&str),
    /// The loop is about to start: the designer's name, the run's data and
    /// its cluster.
    pub starting: &'a dyn Fn(&str, &StudyData, Option<&Cluster>),
    /// What each run of the loop shows (the main one, then each
    /// ablation's).
    pub shown: &'a Shown<'a>,
    /// An ablation is about to run, with its designer's name.
    pub ablation: &'a dyn Fn(Ablation, &str),
    /// The report is written (the outcome, the ablations' rows, the
    /// report), before any confirmation runs.
    pub reported: &'a dyn Fn(&EvolveOutcome, &[AblationRow], &ReportData),
    /// A step of the confirmation (`--seeds`, `--walk-forward`).
    pub confirm_step: &'a (dyn Fn(ConfirmStep) + Sync),
}

/// What a finished evolve run left besides its loop's outcome.
pub struct Finished {
    /// The ablations' rows, the main run's (`full`) first; none without
    /// ablations.
    pub ablations: Vec<AblationRow>,
    /// The main run's report (also written as `report.*`).
    pub report: ReportData,
    /// The confirmation's report, when the request confirmed.
    pub confirmation: Option<ConfirmReport>,
}

/// How an evolve run ended.
pub struct EvolveRun {
    /// The loop's outcome: the best design, the evidence, the lockbox.
    pub outcome: EvolveOutcome,
    /// Who designed.
    pub designer: String,
    /// Seconds the main loop took in this process.
    pub main_secs: f64,
    /// `None` while the run's test is sealed: nothing after the loop ran.
    pub finished: Option<Finished>,
}

impl EvolveRun {
    /// The run's last lines, after its tables (and its confirmation):
    /// the recommendation, then the chosen design with where its test
    /// stands (sealed, with the way to open it) or how long the run took
    /// and its report, then the verdict.
    pub fn closing_lines(&self, out: &Path) -> Vec<String> {
        let outcome = &self.outcome;
        let best = &outcome.best;
        let score = best.selection_score().unwrap_or(0.0);
        let mut lines = outcome.evidence.lines();
        let Some(finished) = &self.finished else {
            // Nothing after the loop ran: its test is sealed.
            let Some(l) = &outcome.lockbox else {
                return Vec::new();
            };
            lines.push(format!(
                "best design {} (validation score {score:.3}); the test split is sealed since {} ({}); declare the design final and open it with: serl evolve --resume {} --open-test",
                best.key,
                l.sealed_at,
                out.join("lockbox.json").display(),
                out.display()
            ));
            return lines;
        };
        lines.push(format!(
            "best design {} (validation score {score:.3}); {}; report: {}",
            best.key,
            took(self.main_secs, outcome.wall_secs),
            out.join("report.html").display()
        ));
        if let Some(v) = serl_evolve::verdict(outcome, &finished.report) {
            lines.push("verdict:".into());
            lines.extend(v.lines().into_iter().map(|l| format!("  {l}")));
        }
        lines
    }
}

/// How long the run took: this process's seconds, and the run's over
/// every process where it was resumed.
fn took(this_process: f64, all_processes: f64) -> String {
    if all_processes > this_process + 1.0 {
        format!("{all_processes:.0}s in all over its processes ({this_process:.0}s in this one)")
    } else {
        format!("{this_process:.0}s in all")
    }
}

/// A whole evolve run into `out`, as `serl evolve` runs it: prepared
/// ([`prepare`]), the loop, then, unless its test is sealed, the
/// ablations, the report and the confirmation the request asks for.
/// `serl evolve` and the Python package both call this.
pub fn run(
    out: &Path,
    cfg: &EvolveFile,
    req: &EvolveRequest,
    hooks: &EvolveHooks,
) -> Result<EvolveRun> {
    let t0 = std::time::Instant::now();
    let _run = tracing::info_span!("evolve").entered();
    let span = |stage: &str| tracing::info_span!("phase", label = %stage).entered();
    let preparing = span("prepare");
    let Prepared {
        prompts_dir,
        prompts,
        data,
        cluster,
        designer,
    } = prepare(out, cfg, req, hooks.warn)?;
    drop(preparing);
    let designer_name = designer.name();
    (hooks.starting)(&designer_name, &data, cluster.as_ref());
    let study = Study {
        cfg,
        data: &data,
        open_test: req.open_test,
        cluster: cluster.as_ref(),
        prompts_dir: &prompts_dir,
        shown: hooks.shown,
    };
    let looping = span("loop");
    let outcome = study.evolve(cfg.evolve.clone(), designer, prompts, out)?;
    drop(looping);
    let main_secs = t0.elapsed().as_secs_f64();
    let mut run = EvolveRun {
        outcome,
        designer: designer_name,
        main_secs,
        finished: None,
    };
    if run.outcome.lockbox.as_ref().is_some_and(|l| l.sealed()) {
        return Ok(run);
    }
    let ablations = {
        let _s = span("ablations");
        study.ablations((&run.outcome, main_secs), out, hooks.ablation)?
    };
    let (report, provenance) = {
        let _s = span("report");
        study.report(out, &run.outcome, &run.designer, &ablations)?
    };
    (hooks.reported)(&run.outcome, &ablations, &report);
    let confirmation = match run.outcome.best.design.as_ref() {
        None if req.confirming() => {
            bail!("--seeds and --walk-forward confirm the best design, and this run has none")
        }
        Some(best) if req.confirming() => {
            let c = crate::confirm::Confirming {
                cfg,
                data: &data,
                best,
                run_dir: out,
                cluster: cluster.as_ref(),
                seeds: req.seeds,
                walk_forward: req.walk_forward.then_some(&cfg.walk_forward),
            };
            let _s = span("confirmation");
            Some(crate::confirm::confirm(c, provenance, hooks.confirm_step)?)
        }
        _ => None,
    };
    run.finished = Some(Finished {
        ablations,
        report,
        confirmation,
    });
    Ok(run)
}
