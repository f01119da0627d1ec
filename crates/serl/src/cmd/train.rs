//! `serl train`: PPO or DDQN on the train split, selected on the
//! validation split, in the hybrid static + dynamic environment.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::progress::Meter;
use anyhow::{bail, Result};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use serl_env::TeamMode;
use serl_study::rundir::{OutRule, RunKind};
use serl_study::train::{Loaded, TrainingHooks};
use serl_study::train_many::{Said, Trained};
use serl_study::train_overrides::{Learner, TrainOverrides, TrainRequest};
use serl_study::train_words as words;
use serl_study::TrainFile;
use serl_train::{DeviceChoice, HybridMode, TrainConfig, UpdateRecord};

use super::args::{named, positive, warn, OutDir};

#[derive(Args)]
#[command(mut_arg("out", |a| a.help("The run directory")))]
pub struct TrainArgs {
    /// A train config: [data], [orders], [env], [market], [train] tables.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Bar data: a file or folder (CSV, CSV.gz, LEAN zips). With --resume,
    /// defaults to the run's.
    #[arg(long)]
    pub data: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutDir,
    /// Continue the run in --out from its last checkpoint, with its config.
    #[arg(long, conflicts_with = "force")]
    pub resume: bool,
    /// The learner: any registered learner (PPO, DDQN, SAC) for one
    /// agent; MAPPO (a centralised critic) or independent PPO for a team
    /// (`--agents N`).
    #[arg(long, value_parser = learner_names())]
    pub algo: Option<Learner>,
    /// Learning agents working each parent order together (2 to 16: a
    /// team, `[train.team] agents`); with --algo mappo or ippo, 4 unless
    /// the config says.
    #[arg(long)]
    pub agents: Option<usize>,
    /// Train the team without messages (drops `[train.team]
    /// communication`): the no-communication side of the gain from talking.
    #[arg(long)]
    pub no_communication: bool,
    /// Environment steps to train for (overrides the config).
    #[arg(long)]
    pub total_steps: Option<usize>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Minutes between decisions (overrides the config).
    #[arg(long)]
    pub decision_minutes: Option<u16>,
    /// A team's mode (cooperative: one parent order split across the
    /// agents; competitive: independent orders competing). The hybrid
    /// weighting's names are still read here too, as --hybrid.
    #[arg(long, value_parser = named::<ModeFlag>(mode_names()))]
    pub mode: Option<ModeFlag>,
    /// Hybrid weighting, or a single environment for ablations.
    #[arg(long, value_parser = named::<HybridMode>(&HybridMode::NAMES))]
    pub hybrid: Option<HybridMode>,
    #[arg(long, value_parser = named::<DeviceChoice>(&DeviceChoice::NAMES))]
    pub device: Option<DeviceChoice>,
    /// Order size as a fraction of ADV (overrides the configs).
    #[arg(long, allow_negative_numbers = true, value_parser = positive)]
    pub qty_adv: Option<f64>,
    /// Train this many independent policies, from seeds `seed`, `seed + 1`,
    /// ..., each in `OUT/seed-<seed>/`, and report their validation PA
    /// per seed and as mean ± std (`OUT/seeds.json`).
    #[arg(long, value_parser = crate::cmd::args::at_least_one::<usize>, default_value_t = 1)]
    pub seeds: usize,
    /// Train a policy on each rolling window of `[walk_forward]` and test
    /// it on the sessions after it (`OUT/window-K/`, the pooled report in
    /// `OUT/walk-forward.html`).
    #[arg(long)]
    pub walk_forward: bool,
}

/// `--algo`'s names, from the learner registry.
fn learner_names() -> impl TypedValueParser<Value = Learner> {
    PossibleValuesParser::new(Learner::names()).try_map(|name| name.parse::<Learner>())
}

/// `--mode`: a team's mode, or the hybrid weighting's name (read here
/// from before `--hybrid` was a flag of its own).
#[derive(Clone, Copy, serde::Deserialize)]
#[serde(untagged)]
pub enum ModeFlag {
    Team(TeamMode),
    Hybrid(HybridMode),
}

/// `--mode`'s names: the team modes', then the weightings'.
fn mode_names() -> &'static [&'static str] {
    let names = TeamMode::NAMES.iter().chain(&HybridMode::NAMES).copied();
    Box::leak(names.collect::<Vec<_>>().into_boxed_slice())
}

/// The config the run trains with: the flags over the config, or a
/// resumed run's own.
fn resolve(a: &TrainArgs) -> Result<TrainFile> {
    let overrides = TrainOverrides {
        algo: a.algo,
        agents: a.agents,
        team_mode: match a.mode {
            Some(ModeFlag::Team(m)) => Some(m),
            _ => None,
        },
        no_communication: a.no_communication,
        total_steps: a.total_steps,
        seed: a.seed,
        decision_minutes: a.decision_minutes,
        hybrid: a.hybrid.or(match a.mode {
            Some(ModeFlag::Hybrid(h)) => Some(h),
            _ => None,
        }),
        device: a.device,
        qty_adv: a.qty_adv,
    };
    Ok(serl_study::train_overrides::resolve(&TrainRequest {
        out: &a.output.out,
        resume: a.resume,
        config: a.config.as_deref(),
        data: a.data.clone(),
        overrides: &overrides,
    })?)
}

pub fn run(a: TrainArgs) -> Result<ExitCode> {
    serl_study::process::on_signal(resume_hint(&a))?;
    let kind = match (a.walk_forward, a.seeds) {
        (true, _) => RunKind::WalkForward,
        (false, n) if n > 1 => RunKind::TrainSeeds,
        _ => RunKind::Train,
    };
    let out = &a.output.out;
    serl_study::rundir::check_out(out, kind, OutRule::from_flags(a.output.force, a.resume))?;
    let cfg = resolve(&a)?;
    a.output.claim(kind, a.resume)?;
    if let Some(said) = a
        .resume
        .then(|| words::finished_before(out, a.total_steps))
        .flatten()
    {
        eprintln!("{said}");
    }
    let Some(data_path) = cfg.data_path.clone() else {
        bail!("--data is required (the bars to train on)");
    };
    let request = serl_study::train::RunRequest {
        out,
        resume: a.resume,
        total_steps: a.total_steps,
    };
    let loaded = |l: &Loaded| eprintln!("{}", l.line(&cfg.train));
    if a.walk_forward || a.seeds > 1 {
        let how_many = (a.seeds, a.walk_forward);
        let said = Said {
            warn: &warn,
            loaded: &loaded,
            starting: &|s| eprintln!("{s}"),
        };
        match serl_study::train_many::run(&cfg, &request, how_many, &hooks(), &said)? {
            Trained::Seeds(runs) => {
                print!("{}", serl_study::train::seeds_table(&runs));
                println!("{}", words::seeds_next_step(&runs, &data_path, out));
            }
            Trained::WalkForward(done) => {
                print!("{}", serl_study::walk_forward::windows_table(&done.windows));
                crate::show::summaries(&done.pooled);
                println!("report: {}", out.join("walk-forward.html").display());
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let trained = serl_study::train::run(&cfg, &request, &hooks(), &warn, &loaded)?;
    print!("{}", serl_train::updates_table(&trained.records));
    println!(
        "{} environment steps in {:.1}s; best validation PA {}; report: {}",
        trained.env_steps,
        trained.secs,
        trained
            .best_val
            .map_or("-".into(), |v| format!("{v:.3} bps")),
        out.join("report.html").display()
    );
    println!("{}", words::next_step(&cfg, &data_path, out));
    Ok(ExitCode::SUCCESS)
}

/// What to say when a signal stops `serl train`: how to go on, once the
/// run has a directory to go on from.
fn resume_hint(a: &TrainArgs) -> impl Fn() -> String + Send + Sync + 'static {
    let (out, seeds, walk_forward) = (a.output.out.clone(), a.seeds, a.walk_forward);
    move || words::resume_hint(&out, seeds, walk_forward)
}

/// What every training of the command shows: its own progress bar, with
/// a stop asked for by a signal taken once an update is on disk.
fn hooks() -> TrainingHooks {
    let on_update = |cfg: &TrainConfig| -> serl_train::OnUpdate<'static> {
        let meter = Meter::new("train", "steps", cfg.planned().1 as u64);
        Box::new(move |r| {
            meter.set_message(update_line(r));
            meter.set_position(r.env_steps as u64);
            // The update is on disk (its metrics, and its checkpoint when
            // due): a stop asked for by a signal happens here.
            serl_study::process::at_clean_point();
        })
    };
    TrainingHooks {
        on_update: Box::new(on_update),
        around: Box::new(|f| serl_study::process::training(f)),
    }
}

/// An update on the bar: the latest losses, hybrid weights and PA.
fn update_line(r: &UpdateRecord) -> String {
    format!(
        "loss {:.3}  α {:.2} β {:.2}  PA {}{}",
        r.loss,
        r.alpha,
        r.beta,
        r.episode_pa.map_or("-".into(), |p| format!("{p:.2}")),
        r.val_pa.map_or(String::new(), |p| format!("  val {p:.2}"))
    )
}
