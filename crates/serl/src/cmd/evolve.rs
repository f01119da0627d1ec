//! `serl evolve`: the SE-RL outer loop, end to end.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod confirm;
mod evidence;
mod study;

use crate::progress::Meter;
use anyhow::{bail, Result};
use clap::Args;
use serl_cluster::{Cluster, EngineKind};
use serl_eval::ReportData;
use serl_evolve::{Ablation, AblationRow, Event, EvolveConfig, EvolveOutcome, OnEvent, Shown};
use serl_study::evolve::{EvolveHooks, EvolveRequest};
use serl_study::evolve_overrides::{EvolveOverrides, EvolveStart};
use serl_study::evolve_words as words;
use serl_study::rundir::RunKind;
use serl_study::{EvolveFile, LlmChoice, StudyData};

use super::args::{named, warn};
use crate::show;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct EvolveArgs {
    #[command(subcommand)]
    pub action: Option<EvolveAction>,
    /// An evolve config: [data], [orders], [env], [market], [evolve], [llm].
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Bar data (default: the config's `data_path`, else the bundled sample).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// The designer: the builtin offline search, an OpenAI-compatible
    /// server, Ollama, the embedded GGUF model, or a replay of a recorded
    /// transcript; or no model at all, each module drawn at random from its
    /// own grammar (`grammar`, the random-search control).
    #[arg(long, value_parser = named::<LlmChoice>(&LlmChoice::NAMES))]
    pub llm: Option<LlmChoice>,
    /// The GGUF model for `--llm local` (overrides `[llm.local] model`).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// A LoRA adapter for that model (`serl llm finetune`; overrides
    /// `[llm.local] adapter`).
    #[arg(long)]
    pub adapter: Option<PathBuf>,
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
    /// Write over the evolve run already in --out: its files are removed
    /// first (a folder serl did not write is refused even so).
    #[arg(long, conflicts_with = "resume")]
    pub force: bool,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Who runs the trainings (overrides `[cluster] engine`; a resumed run
    /// may change it).
    #[arg(long, value_parser = named::<EngineKind>(&EngineKind::NAMES))]
    pub engine: Option<EngineKind>,
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

#[derive(clap::Subcommand)]
pub enum EvolveAction {
    /// The equal-budget study of designers: several arms (the random
    /// grammar, the builtin search, a model without and with the program
    /// database) over several search seeds; the test sealed until the
    /// winner is declared (configs/study.toml).
    Study(study::StudyArgs),
    /// What a run's evidence says of its choice: σ_d, the designs tried,
    /// the edge noise alone gives the best of them, the minimum detectable
    /// edge, PBO, the deflated score, the SPA test and the recommendation,
    /// computed again from the run's evidence.parquet.
    Evidence(evidence::EvidenceArgs),
}

/// The run directory and its config: a resumed run's saved one, or the
/// given config with the command line's overrides; validated.
fn resolve(a: &EvolveArgs) -> Result<(PathBuf, EvolveFile)> {
    let overrides = EvolveOverrides {
        data: a.data.clone(),
        llm: a.llm,
        model: a.model.clone(),
        adapter: a.adapter.clone(),
        base_url: a.base_url.clone(),
        gbnf: a.gbnf,
        prompts: a.prompts.clone(),
        lockbox: a.lockbox,
        engine: a.engine,
        seed: a.seed,
    };
    let start = match (&a.resume, &a.out) {
        (Some(dir), _) => EvolveStart::Resume(dir),
        (None, Some(out)) => EvolveStart::New {
            out,
            config: a.config.as_deref(),
            force: a.force,
        },
        (None, None) => bail!("give --out DIR for a new run, or --resume DIR"),
    };
    Ok(serl_study::evolve_overrides::resolve(start, &overrides)?)
}

pub fn run(mut a: EvolveArgs) -> Result<ExitCode> {
    match a.action.take() {
        Some(EvolveAction::Study(s)) => return study::run(s),
        Some(EvolveAction::Evidence(e)) => return evidence::run(e),
        None => {}
    }
    if let Some(out) = &a.out {
        // Refused before the config is read: a run there is named first.
        let rule = serl_study::rundir::OutRule::from_flags(a.force, false);
        serl_study::rundir::check_out(out, RunKind::Evolve, rule)?;
    }
    let (out, cfg) = resolve(&a)?;
    serl_study::process::claim_run(&out, RunKind::Evolve, (a.force, a.resume.is_some()))?;
    if let Some(said) = a.resume.as_ref().and_then(|_| words::finished_before(&out)) {
        eprintln!("{said}");
    }
    say_how_to_resume(&out)?;
    let request = EvolveRequest {
        seeds: a.seeds,
        walk_forward: a.walk_forward,
        open_test: a.open_test,
        new_run: a.resume.is_none(),
        replay_from: a.replay_from.clone(),
    };
    let confirming = confirm::Spinner::default();
    let say_start = |designer: &str, data: &StudyData, cluster: Option<&Cluster>| {
        for line in words::start_lines(designer, data, &out, cluster) {
            eprintln!("{line}");
        }
    };
    let starting = |ablation: Ablation, name: &str| {
        eprintln!(
            "ablation {}: {} ({name})",
            ablation.name(),
            ablation.describe()
        )
    };
    let reported = |outcome: &EvolveOutcome, ablations: &[AblationRow], report: &ReportData| {
        if !ablations.is_empty() {
            eprint!("{}", serl_evolve::ablation_table(ablations));
        }
        show::summaries(report);
        print_hierarchy(&outcome.hierarchy);
    };
    let hooks = EvolveHooks {
        warn: &warn,
        starting: &say_start,
        shown: &shown,
        ablation: &starting,
        reported: &reported,
        confirm_step: &|step| confirming.show(step),
    };
    let run = serl_study::evolve::run(&out, &cfg, &request, &hooks);
    confirming.clear();
    let run = run?;
    if let Some(c) = run.finished.as_ref().and_then(|f| f.confirmation.as_ref()) {
        confirm::print(c, &out);
    }
    show::lines(run.closing_lines(&out));
    Ok(ExitCode::SUCCESS)
}

/// On a signal, the line that says how to go on. No clean points here: a
/// signal stops evolve at once, and `--resume` goes on from what its run
/// directory holds.
fn say_how_to_resume(out: &Path) -> Result<()> {
    let dir = out.to_path_buf();
    serl_study::process::on_signal(move || words::resume_hint(&dir))?;
    Ok(())
}

/// What one run of the loop shows: its own progress bar (one tick per
/// candidate trained, designed or a DEK trial), and the loop's lines above
/// it (or, in a log, plain lines).
fn shown<'a>(cfg: &EvolveConfig) -> OnEvent<'a> {
    let per_iteration = cfg.candidates_per_iteration() as u64;
    let meter = Meter::new(
        "evolve",
        "candidates",
        cfg.iterations as u64 * per_iteration,
    );
    Box::new(move |e| {
        if let Event::Iteration(s) = &e {
            // A design without constants has no DEK trials, and a budget
            // may design fewer: the bar catches up with the iteration.
            meter.reach(s.iteration as u64 * per_iteration);
        }
        match e.shown() {
            Shown::Status(s) => meter.set_message(s),
            Shown::Tick => meter.inc(1),
            Shown::Lines(lines) => lines.iter().for_each(|l| meter.say(l)),
            Shown::Finished(line) => {
                meter.finish();
                eprintln!("{line}");
            }
        }
    })
}

/// The hierarchy rows' table, when the run has them.
fn print_hierarchy(rows: &[serl_evolve::HierarchyRow]) {
    if !rows.is_empty() {
        eprintln!("\nhierarchy rows (bps; validation, then test):");
        eprint!("{}", serl_evolve::hierarchy_table(rows));
    }
}
