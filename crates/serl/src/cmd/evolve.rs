//! `serl evolve`: the SE-RL outer loop, end to end.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod resume;

use super::read_toml;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use serl_cluster::{Cluster, ClusterConfig, EngineKind};
use serl_data::{DataConfig, Split};
use serl_env::{generate_orders, EnvConfig, MarketConfig, MarketData, OrderConfig, ParentOrder};
use serl_eval::Provenance;
use serl_evolve::{evolve, Ablation, AblationRow, Event, EvolveConfig, EvolveInputs};
use serl_llm::{Designer, HttpConfig, Prompts};

#[derive(Args)]
pub struct EvolveArgs {
    /// An evolve config: [data], [orders], [env], [market], [evolve], [llm].
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Bar data (default: the config's `data_path`, else the bundled sample).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// The designer: the builtin offline search, an OpenAI-compatible
    /// server, Ollama, the embedded GGUF model, or a replay of a recorded
    /// transcript.
    #[arg(long, value_enum)]
    pub llm: Option<LlmChoice>,
    /// The GGUF model for `--llm local` (overrides `[llm.local] model`).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// The server for `--llm openai|ollama` (overrides `[llm.http]
    /// base_url`), e.g. `http://127.0.0.1:8000/v1`.
    #[arg(long)]
    pub base_url: Option<String>,
    /// Send each module's GBNF grammar (llama.cpp's `grammar` field)
    /// instead of its JSON schema (sets `[llm] gbnf = true`).
    #[arg(long)]
    pub gbnf: bool,
    /// The transcript to replay (default: the run directory's).
    #[arg(long)]
    pub replay_from: Option<PathBuf>,
    /// The prompt templates (default: prompts/).
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// Continue the run in this directory with its saved config.
    #[arg(long, conflicts_with = "out")]
    pub resume: Option<PathBuf>,
    /// Keep the test split sealed until the run is declared final (sets
    /// `[evolve] lockbox = true`).
    #[arg(long, conflicts_with = "resume")]
    pub lockbox: bool,
    /// Declare the resumed run final and open its sealed test split
    /// (`[evolve] lockbox = true`); `lockbox.json` records when.
    #[arg(long, requires = "resume")]
    pub open_test: bool,
    /// The run directory.
    #[arg(long, required_unless_present = "resume")]
    pub out: Option<PathBuf>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Who runs the trainings (overrides `[cluster] engine`; a resumed run
    /// may change it).
    #[arg(long, value_enum)]
    pub engine: Option<EngineChoice>,
    /// After the run (or on a finished run with --resume): retrain the
    /// best design and plain PPO from N independent seeds (the first is
    /// the run's own final retraining) and test each, day by day
    /// (`RUN_DIR/confirm/`).
    #[arg(long, default_value_t = 0)]
    pub seeds: usize,
    /// After the run: retrain the best design and plain PPO on each
    /// rolling window of `[walk_forward]` and test them on the
    /// sessions after it (`RUN_DIR/confirm/`).
    #[arg(long)]
    pub walk_forward: bool,
}

#[derive(Clone, Copy, ValueEnum, Debug)]
pub enum EngineChoice {
    Local,
    Slurm,
    Hyperqueue,
    Kubernetes,
}

impl From<EngineChoice> for EngineKind {
    fn from(e: EngineChoice) -> Self {
        match e {
            EngineChoice::Local => EngineKind::Local,
            EngineChoice::Slurm => EngineKind::Slurm,
            EngineChoice::Hyperqueue => EngineKind::Hyperqueue,
            EngineChoice::Kubernetes => EngineKind::Kubernetes,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum, Debug, Default)]
#[serde(rename_all = "snake_case")]
pub enum LlmChoice {
    #[default]
    Builtin,
    Openai,
    Ollama,
    /// The embedded GGUF model of `[llm.local]`.
    Local,
    Replay,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmSection {
    pub backend: LlmChoice,
    pub http: HttpConfig,
    pub temperature: f64,
    /// Constrain every reply to its module's JSON schema
    /// (`response_format` / Ollama's `format`).
    pub constrained: bool,
    /// Send each module's GBNF grammar (llama.cpp's `grammar` field)
    /// instead of its JSON schema.
    pub gbnf: bool,
    /// The embedded model (`--llm local`).
    pub local: LocalSection,
}

#[cfg(feature = "local")]
pub type LocalSection = serl_llm::LocalConfig;
/// Without the `local` feature the table is kept as written, unread.
#[cfg(not(feature = "local"))]
pub type LocalSection = toml::Table;

impl Default for LlmSection {
    fn default() -> Self {
        LlmSection {
            backend: LlmChoice::Builtin,
            http: HttpConfig::default(),
            temperature: 0.7,
            constrained: true,
            gbnf: false,
            local: LocalSection::default(),
        }
    }
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvolveFile {
    pub data: DataConfig,
    pub orders: OrderConfig,
    pub env: EnvConfig,
    pub market: MarketConfig,
    pub evolve: EvolveConfig,
    pub llm: LlmSection,
    pub data_path: Option<PathBuf>,
    pub prompts: Option<PathBuf>,
    /// Where the trainings run (`[cluster] engine`).
    pub cluster: ClusterConfig,
    /// The rolling windows of `--walk-forward` (outside `[evolve]`, which
    /// every cluster task carries: a run planned before may still resume).
    pub walk_forward: serl_eval::walk_forward::WalkForwardConfig,
}

impl EvolveFile {
    /// The bar data the run reads.
    pub fn data_path(&self) -> PathBuf {
        self.data_path
            .clone()
            .unwrap_or_else(|| PathBuf::from("data/lean"))
    }
}

/// The sessions and orders of a run: what the coordinator and each of
/// its tasks load alike from the run's config.
pub struct StudyData {
    pub symbols: usize,
    pub market: MarketData,
    pub train: Vec<ParentOrder>,
    pub val: Vec<ParentOrder>,
    pub test: Vec<ParentOrder>,
    /// Every order of the data in one id space (walk-forward's windows),
    /// when asked for.
    pub all: Vec<ParentOrder>,
    /// What the load left out, one line each (for the report's
    /// provenance).
    pub skipped: Vec<String>,
}

impl StudyData {
    /// The run's sessions and orders; with `all`, every order of the data
    /// too (for `--walk-forward`), else none.
    pub fn load(cfg: &EvolveFile, all: bool) -> Result<StudyData> {
        let data_path = cfg.data_path();
        let ds = super::load_data(&data_path, &cfg.data)?;
        let train = generate_orders(&ds, Split::Train, &cfg.data, &cfg.orders)?;
        let val = generate_orders(&ds, Split::Validation, &cfg.data, &cfg.orders)?;
        let test = generate_orders(&ds, Split::Test, &cfg.data, &cfg.orders)?;
        let all = if all {
            generate_orders(&ds, Split::All, &cfg.data, &cfg.orders)?
        } else {
            Vec::new()
        };
        if train.is_empty() || val.is_empty() || test.is_empty() {
            bail!(
                "{}: the train, validation and test splits need orders ({} / {} / {})",
                data_path.display(),
                train.len(),
                val.len(),
                test.len()
            );
        }
        Ok(StudyData {
            skipped: super::backtest::skipped_lines(&ds),
            symbols: ds.symbols().len(),
            market: super::market_data(&ds, &cfg.data),
            train,
            val,
            test,
            all,
        })
    }
}

/// The command line that runs one task of the run in `root`, before
/// `--indices`: `serl task run ROOT`.
pub fn task_runner(program: &str, root: &Path) -> Vec<String> {
    vec![
        program.to_string(),
        "task".into(),
        "run".into(),
        root.display().to_string(),
    ]
}

/// The program that runs a task on `engine`: this very binary (on a
/// shared filesystem), or the `serl` on a Kubernetes pod's PATH.
pub fn task_program(engine: EngineKind) -> Result<String> {
    Ok(match engine {
        EngineKind::Kubernetes => "serl".to_string(),
        _ => std::env::current_exe()?.display().to_string(),
    })
}

/// The cluster of a run in `out`: its plan there, its tasks run by
/// [`task_program`] in this working directory.
pub fn cluster_for(cfg: &ClusterConfig, out: &Path) -> Result<Cluster> {
    let root = std::path::absolute(out)?;
    let runner = task_runner(&task_program(cfg.engine)?, &root);
    Ok(Cluster::new(
        cfg.clone(),
        &root,
        runner,
        &std::env::current_dir()?,
    )?)
}

/// [`cluster_for`], where `[cluster] engine` is not `local` (which runs
/// everything in this process).
pub fn cluster_of(cfg: &ClusterConfig, out: &Path) -> Result<Option<Cluster>> {
    if cfg.engine == EngineKind::Local {
        return Ok(None);
    }
    cluster_for(cfg, out).map(Some)
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let p = e?.path();
        if p.is_file() {
            std::fs::copy(&p, to.join(p.file_name().unwrap_or_default()))?;
        }
    }
    Ok(())
}

/// The run directory and its config: a resumed run's saved one, or the
/// given config with the command line's overrides; validated.
fn resolve(a: &EvolveArgs) -> Result<(PathBuf, EvolveFile)> {
    let (out, mut cfg) = match &a.resume {
        Some(dir) => {
            let saved = dir.join("evolve.toml");
            if !saved.exists() {
                bail!(
                    "{} has no evolve.toml: it is not a run directory of `serl evolve`",
                    dir.display()
                );
            }
            (dir.clone(), read_toml::<EvolveFile>(&saved)?)
        }
        None => {
            let out = a.out.clone().expect("clap requires --out without --resume");
            let cfg = match &a.config {
                Some(p) => read_toml(p)?,
                None => EvolveFile::default(),
            };
            (out, cfg)
        }
    };
    if a.resume.is_none() {
        if out.join("evolve.toml").exists() {
            bail!(
                "{} already holds an evolve run; continue it with `serl evolve --resume {}`",
                out.display(),
                out.display()
            );
        }
        if let Some(d) = &a.data {
            cfg.data_path = Some(d.clone());
        }
        if let Some(l) = a.llm {
            cfg.llm.backend = l;
        }
        if let Some(p) = &a.prompts {
            cfg.prompts = Some(p.clone());
        }
        if let Some(m) = &a.model {
            set_local_model(&mut cfg, m)?;
        }
        if let Some(u) = &a.base_url {
            cfg.llm.http.base_url = Some(u.clone());
        }
        cfg.llm.gbnf |= a.gbnf;
        cfg.evolve.lockbox |= a.lockbox;
        if let Some(e) = a.engine {
            cfg.cluster.engine = e.into();
        }
        if let Some(s) = a.seed {
            cfg.evolve.seed = s;
        }
    } else {
        resume::refuse_changes(a, &cfg, &out)?;
        if let Some(l) = a.llm {
            // A resumed LLM run may be finished by replaying its transcript.
            cfg.llm.backend = l;
        }
        if let Some(e) = a.engine {
            // A resumed run may finish on another engine: tasks are the same.
            cfg.cluster.engine = e.into();
        }
    }
    cfg.data
        .validate()
        .map_err(|m| anyhow::anyhow!("[data] {m}"))?;
    cfg.env.validate()?;
    cfg.evolve
        .validate()
        .map_err(|m| anyhow::anyhow!("[evolve] {m}"))?;
    cfg.cluster.validate()?;
    Ok((out, cfg))
}

/// Writes a new run's config and its copy of the prompts; returns the data
/// path and the prompts the run asks with (its own copy, so a resumed or
/// replayed run asks exactly what the original asked).
fn prepare_run_dir(a: &EvolveArgs, out: &Path, cfg: &EvolveFile) -> Result<(PathBuf, PathBuf)> {
    let data_path = cfg.data_path();
    let prompt_dir = cfg
        .prompts
        .clone()
        .unwrap_or_else(|| PathBuf::from("prompts"));
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    if a.resume.is_none() {
        std::fs::write(out.join("evolve.toml"), toml::to_string(cfg)?)
            .with_context(|| format!("writing {}", out.join("evolve.toml").display()))?;
        if prompt_dir.is_dir() {
            copy_dir(&prompt_dir, &out.join("prompts"))
                .with_context(|| format!("copying {} into the run", prompt_dir.display()))?;
        }
    }
    let prompts_used = if out.join("prompts").is_dir() {
        out.join("prompts")
    } else {
        prompt_dir.clone()
    };
    Ok((data_path, prompts_used))
}

pub fn run(a: EvolveArgs) -> Result<ExitCode> {
    let (out, cfg) = resolve(&a)?;
    let dir = out.clone();
    // No clean points here: a signal stops evolve at once, and `--resume`
    // goes on from what its run directory holds.
    crate::interrupt::install(move || {
        if dir.join("evolve.toml").exists() {
            format!("resume with `serl evolve --resume {}`", dir.display())
        } else {
            "stopped before the run began: nothing to resume".into()
        }
    })?;
    check_lockbox_flags(&a, &cfg, &out)?;
    let confirming = a.seeds > 0 || a.walk_forward;
    let (data_path, prompts_used) = prepare_run_dir(&a, &out, &cfg)?;
    let prompts = Prompts::load(&prompts_used)
        .with_context(|| format!("loading the prompts in {}", prompts_used.display()))?;

    let t0 = std::time::Instant::now();
    let data_set = StudyData::load(&cfg, confirming)?;
    let data = &data_set;
    if confirming {
        // A team or windows the data cannot fill, before the run too.
        let walk_forward = a.walk_forward.then_some(&cfg.walk_forward);
        serl_evolve::check_confirmation(&cfg.evolve, walk_forward, &data.all)?;
    }
    let (market, train, val, test) = (&data.market, &data.train, &data.val, &data.test);
    let cluster = cluster_of(&cfg.cluster, &out)?;
    let transcript = out.join("transcript.jsonl");
    let replay_from = a.replay_from.clone().unwrap_or(transcript.clone());
    let designer = super::llm::make_designer(
        &cfg,
        cfg.llm.backend,
        &prompts_used,
        &transcript,
        &replay_from,
    )?;
    let designer_name = designer.name();
    say_start(&designer_name, data, &out, cluster.as_ref());
    let modules = cfg.evolve.modules.clone();
    let study = Study {
        cfg: &cfg,
        market,
        train,
        val,
        test,
        open_test: a.open_test,
        cluster: cluster.as_ref(),
        prompts_dir: &prompts_used,
    };
    let outcome = study.evolve(cfg.evolve.clone(), designer, prompts, &out)?;
    let main_secs = t0.elapsed().as_secs_f64();
    if let Some(l) = outcome.lockbox.as_ref().filter(|l| l.sealed()) {
        println!(
            "best design {} (validation score {:.3}); the test split is sealed since {} ({}); declare the design final and open it with: serl evolve --resume {} --open-test",
            outcome.best.key,
            outcome.best.score.unwrap_or(0.0),
            l.sealed_at,
            out.join("lockbox.json").display(),
            out.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let ablations = if cfg.evolve.ablations.is_empty() {
        Vec::new()
    } else {
        let full = AblationRow::from_outcome(
            "full",
            "the run as configured",
            &outcome,
            main_secs,
            cfg.evolve.seed,
        );
        study.ablations(full, &out, &prompts_used, &data_path)?
    };
    if !ablations.is_empty() {
        eprint!("{}", serl_evolve::ablation_table(&ablations));
    }
    let provenance = Provenance {
        orders_over_capacity: serl_eval::orders_over_capacity(market, test, &cfg.env),
        skipped: data.skipped.clone(),
        ..provenance(&cfg, &data_path, test.len(), &outcome)?
    };
    let data = serl_evolve::write_report(
        &out,
        &outcome,
        &modules,
        &designer_name,
        provenance.clone(),
        &ablations,
    )?;
    super::backtest::print_summaries(&data);
    print_hierarchy(&outcome.hierarchy);
    if confirming {
        let best = outcome.best.design.as_ref();
        super::confirm::run(
            super::confirm::Confirming {
                cfg: &cfg,
                data: &data_set,
                best: best.expect("the best candidate has a design"),
                run_dir: &out,
                cluster: cluster.as_ref(),
                seeds: a.seeds,
                walk_forward: a.walk_forward.then_some(&cfg.walk_forward),
            },
            provenance,
        )?;
    }
    println!(
        "best design {} (validation score {:.3}); {}; report: {}",
        outcome.best.key,
        outcome.best.score.unwrap_or(0.0),
        resume::took(main_secs, outcome.wall_secs),
        out.join("report.html").display()
    );
    if let Some(v) = serl_evolve::verdict(&outcome, &data) {
        println!("verdict:");
        for line in v.lines() {
            println!("  {line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The run's first lines: who designs, on how many orders, where.
fn say_start(designer: &str, data: &StudyData, out: &Path, cluster: Option<&Cluster>) {
    eprintln!(
        "designer: {designer}; {} / {} / {} train / validation / test orders over {} symbols; run directory {}",
        data.train.len(),
        data.val.len(),
        data.test.len(),
        data.symbols,
        out.display()
    );
    if let Some(c) = cluster {
        eprintln!(
            "engine: {}; tasks in {}",
            c.config().engine.name(),
            out.join(serl_cluster::PLAN_FILE).display()
        );
    }
}

/// `--open-test` on a run without a lockbox, and `--seeds` or
/// `--walk-forward` on a sealed test split: refused before the run rather
/// than after it.
fn check_lockbox_flags(a: &EvolveArgs, cfg: &EvolveFile, out: &Path) -> Result<()> {
    if a.open_test && !cfg.evolve.lockbox {
        bail!(
            "{}: this run has no lockbox ([evolve] lockbox = false): its test is played when the run ends; --open-test is for a run whose test was sealed",
            out.display()
        );
    }
    let confirming = a.seeds > 0 || a.walk_forward;
    let opened = serl_evolve::Lockbox::read(out).is_some_and(|l| !l.sealed());
    if confirming && cfg.evolve.lockbox && !a.open_test && !opened {
        bail!(
            "--seeds and --walk-forward test on the test split, which this run keeps sealed: declare the design final first (serl evolve --resume {} --open-test)",
            out.display()
        );
    }
    Ok(())
}

#[cfg(feature = "local")]
fn set_local_model(cfg: &mut EvolveFile, model: &Path) -> Result<()> {
    cfg.llm.local.model = Some(model.to_path_buf());
    Ok(())
}

#[cfg(not(feature = "local"))]
fn set_local_model(_: &mut EvolveFile, _: &Path) -> Result<()> {
    bail!("--model is for --llm local, and this serl was built without it (`--features local`)")
}

/// The hierarchy rows' table, when the run has them.
fn print_hierarchy(rows: &[serl_evolve::HierarchyRow]) {
    if !rows.is_empty() {
        eprintln!("\nhierarchy rows (bps; validation, then test):");
        eprint!("{}", serl_evolve::hierarchy_table(rows));
    }
}

fn provenance(
    cfg: &EvolveFile,
    data_path: &Path,
    orders: usize,
    outcome: &serl_evolve::EvolveOutcome,
) -> Result<Provenance> {
    let reward = format!(
        "best design: {}",
        outcome
            .best
            .design
            .as_ref()
            .map_or("-".into(), |d| d.reward.source().to_string())
    );
    super::backtest::provenance(
        data_path,
        "test",
        cfg.evolve.seed,
        orders,
        (&cfg.orders, &cfg.env),
        reward,
    )
}

/// The data and orders that the main run and every ablation share.
struct Study<'a> {
    cfg: &'a EvolveFile,
    market: &'a MarketData,
    train: &'a [ParentOrder],
    val: &'a [ParentOrder],
    test: &'a [ParentOrder],
    /// `--open-test`: the main run is declared final.
    open_test: bool,
    /// Where the trainings run, when not here.
    cluster: Option<&'a Cluster>,
    /// The run's prompt templates (an LLM critic's too).
    prompts_dir: &'a Path,
}

impl Study<'_> {
    /// One run of the loop with its own progress bar.
    fn evolve(
        &self,
        evolve_cfg: EvolveConfig,
        designer: Box<dyn Designer + '_>,
        prompts: Prompts,
        run_dir: &Path,
    ) -> Result<serl_evolve::EvolveOutcome, serl_evolve::EvolveError> {
        let critic = super::llm::maker_for_evolve(
            &evolve_cfg,
            &self.cfg.llm,
            self.prompts_dir,
            self.cluster.is_some(),
        )
        .map_err(|e| serl_evolve::EvolveError::Config(format!("{e:#}")))?;
        let bar = evolve_bar(&evolve_cfg);
        let plain = crate::progress::PlainProgress::for_bar(&bar, "evolve", "candidates");
        evolve(EvolveInputs {
            critic,
            cfg: evolve_cfg,
            env_cfg: self.cfg.env.clone(),
            market_cfg: self.cfg.market.clone(),
            market: self.market,
            train_orders: self.train,
            val_orders: self.val,
            test_orders: self.test,
            designer,
            prompts: Some(prompts),
            run_dir: run_dir.to_path_buf(),
            on_event: Some(Box::new(move |e| {
                let done = matches!(e, Event::CandidateDone);
                show_event(&bar, e);
                if let Some(p) = plain.as_ref().filter(|_| done) {
                    p.at(bar.position(), &bar.message());
                }
            })),
            open_test: self.open_test,
            cluster: self.cluster,
        })
    }

    /// Each configured ablation, run after the main one in
    /// `ablations/NAME/` with its own report; the rows of the table, the
    /// main run's (`full`) first.
    fn ablations(
        &self,
        full: AblationRow,
        out: &Path,
        prompts_used: &Path,
        data_path: &Path,
    ) -> Result<Vec<AblationRow>> {
        let cfg = self.cfg;
        let modules = cfg.evolve.modules.clone();
        let mut ablations = vec![full];
        for &ablation in &cfg.evolve.ablations {
            let sub = out.join("ablations").join(ablation.name());
            std::fs::create_dir_all(&sub).with_context(|| format!("creating {}", sub.display()))?;
            let backend = match ablation {
                Ablation::Builtin => LlmChoice::Builtin,
                _ => cfg.llm.backend,
            };
            let sub_transcript = sub.join("transcript.jsonl");
            let designer = super::llm::make_designer(
                cfg,
                backend,
                prompts_used,
                &sub_transcript,
                &sub_transcript,
            )?;
            let name = designer.name();
            eprintln!(
                "ablation {}: {} ({name})",
                ablation.name(),
                ablation.describe()
            );
            let t = std::time::Instant::now();
            // Ablations run once the main run's test is open.
            let mut sub_cfg = ablation.apply(&cfg.evolve);
            sub_cfg.lockbox = false;
            let sub_outcome = self.evolve(sub_cfg, designer, Prompts::load(prompts_used)?, &sub)?;
            let provenance = provenance(cfg, data_path, self.test.len(), &sub_outcome)?;
            serl_evolve::write_report(&sub, &sub_outcome, &modules, &name, provenance, &[])?;
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

/// The evolve progress bar: one tick per designed candidate.
fn evolve_bar(cfg: &EvolveConfig) -> ProgressBar {
    ProgressBar::new((cfg.iterations * cfg.candidates) as u64).with_style(
        ProgressStyle::with_template(
            "{spinner} evolve [{bar:30}] {pos}/{len} candidates  eta {eta}  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    )
}

/// What the loop says, on the bar or above it (on stderr when the bar is
/// hidden, as in a log).
fn show_event(bar: &ProgressBar, e: Event) {
    let say = |line: String| {
        if bar.is_hidden() {
            eprintln!("{line}");
        } else {
            bar.println(line);
        }
    };
    match e {
        Event::Designing {
            iteration,
            iterations,
            candidate,
        } => bar.set_message(format!(
            "iteration {iteration}/{iterations} candidate {candidate}"
        )),
        Event::Training {
            iteration,
            iterations,
            designs,
            parallel,
            engine,
        } => bar.set_message(if engine == "local" {
            format!("iteration {iteration}/{iterations}: training {designs} designs, {parallel} at a time")
        } else {
            format!("iteration {iteration}/{iterations}: training {designs} designs on {engine}")
        }),
        Event::CandidateDone => bar.inc(1),
        Event::Iteration(s) => say(format!(
            "iteration {}: {} valid of {} designed, {} low-level DEK trials (the Dual-Level Enhancement Kit's ES on the best design's constants), best score {}, best validation PA so far {:.3} bps",
            s.iteration,
            s.valid,
            s.designed,
            s.low_level_trials,
            s.best_score.map_or("-".into(), |v| format!("{v:.3}")),
            s.best_pa
        )),
        Event::Converged { iterations } => say(format!("converged after {iterations} iterations")),
        Event::BudgetSpent { iterations } => say(format!(
            "[evolve.budget] spent after {iterations} iterations: no more designs"
        )),
        Event::BudgetLow {
            iteration,
            candidates,
        } => say(format!(
            "iteration {iteration}: [evolve.budget] runs low, {candidates} candidates"
        )),
        Event::Hierarchy { rows } => eprintln!(
            "hierarchy: retraining the best design alone and with {rows} parts switched on ([evolve.hierarchy])"
        ),
        Event::Validated {
            best_pa,
            baseline_pa,
        } => {
            bar.finish_and_clear();
            eprintln!(
                "validation PA: best design {best_pa:.3} bps, plain PPO with the default modules {baseline_pa:.3} bps"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_evolve_config_parses_and_validates() {
        let configs = super::super::shipped_configs("evolve");
        for (name, p) in &configs {
            let cfg: EvolveFile = read_toml(p).unwrap();
            cfg.evolve
                .validate()
                .unwrap_or_else(|m| panic!("{name}: {m}"));
        }
        assert!(configs.len() >= 4, "found {} evolve configs", configs.len());
    }

    #[test]
    fn the_slurm_config_is_the_quick_run_on_slurm() {
        let read = |name: &str| {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
            read_toml::<EvolveFile>(&dir.join(name)).unwrap()
        };
        let (quick, mut slurm) = (read("evolve.toml"), read("evolve-slurm.toml"));
        assert_eq!(slurm.cluster.engine, EngineKind::Slurm);
        slurm.cluster = quick.cluster.clone();
        assert_eq!(
            toml::to_string(&slurm).unwrap(),
            toml::to_string(&quick).unwrap(),
            "evolve-slurm.toml must be evolve.toml with a [cluster] table"
        );
    }
}
