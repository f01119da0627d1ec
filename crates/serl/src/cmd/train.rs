//! `serl train`: PPO or DDQN on the train split, selected on the
//! validation split, in the hybrid static + dynamic environment.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serl_env::TeamMode;
use serl_study::rundir::{OutRule, RunKind};
use serl_study::train::TrainingHooks;
use serl_study::train_overrides::{Learner, TrainOverrides, TrainRequest};
use serl_study::train_words as words;
use serl_study::TrainFile;
use serl_train::{DeviceChoice, HybridMode, TrainConfig, UpdateRecord};

use super::args::{named, positive, warn};

mod walk_forward;

#[derive(Args)]
pub struct TrainArgs {
    /// A train config: [data], [orders], [env], [market], [train] tables.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Bar data: a file or folder (CSV, CSV.gz, LEAN zips). With --resume,
    /// defaults to the run's.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// The run directory.
    #[arg(long)]
    pub out: PathBuf,
    /// Continue the run in --out from its last checkpoint, with its config.
    #[arg(long)]
    pub resume: bool,
    /// Write over the training already in --out: its files are removed
    /// first (a folder serl did not write is refused even so).
    #[arg(long, conflicts_with = "resume")]
    pub force: bool,
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
        out: &a.out,
        resume: a.resume,
        config: a.config.as_deref(),
        data: a.data.clone(),
        overrides: &overrides,
    })?)
}

pub fn run(a: TrainArgs) -> Result<ExitCode> {
    crate::interrupt::install(resume_hint(&a))?;
    let kind = match (a.walk_forward, a.seeds) {
        (true, _) => RunKind::WalkForward,
        (false, n) if n > 1 => RunKind::TrainSeeds,
        _ => RunKind::Train,
    };
    serl_study::rundir::check_out(&a.out, kind, OutRule::from_flags(a.force, a.resume))?;
    let cfg = resolve(&a)?;
    crate::interrupt::claim_run(&a.out, kind, (a.force, a.resume))?;
    if let Some(said) = a
        .resume
        .then(|| words::finished_before(&a.out, a.total_steps))
        .flatten()
    {
        eprintln!("{said}");
    }
    let Some(data_path) = cfg.data_path.clone() else {
        bail!("--data is required (the bars to train on)");
    };
    if a.walk_forward || a.seeds > 1 {
        return train_many(&a, &cfg, &data_path);
    }
    let request = serl_study::train::RunRequest {
        out: &a.out,
        resume: a.resume,
        total_steps: a.total_steps,
    };
    let loaded = |l: &serl_study::train::Loaded| say_loaded(l, &cfg.train);
    let out = serl_study::train::run(&cfg, &request, &hooks(), &warn, &loaded)?;
    print!("{}", serl_train::updates_table(&out.records));
    println!(
        "{} environment steps in {:.1}s; best validation PA {}; report: {}",
        out.env_steps,
        out.secs,
        out.best_val.map_or("-".into(), |v| format!("{v:.3} bps")),
        a.out.join("report.html").display()
    );
    println!("{}", words::next_step(&cfg, &data_path, &a.out));
    Ok(ExitCode::SUCCESS)
}

/// The orders and environments a training is about to use.
fn say_loaded(l: &serl_study::train::Loaded, train: &TrainConfig) {
    eprintln!("{}", l.line(train));
}

/// `--walk-forward` and `--seeds N`: several trainings over one load of
/// the data.
fn train_many(a: &TrainArgs, cfg: &TrainFile, data_path: &Path) -> Result<ExitCode> {
    serl_study::train::check_run_dir(&a.out, a.resume, (a.seeds, a.walk_forward))?;
    let ds = serl_study::data::load_data(data_path, &cfg.data, &warn)?;
    if a.walk_forward {
        return walk_forward::run(cfg, (&ds, data_path), &a.out, a.resume);
    }
    let (train_orders, val_orders) = serl_study::train::orders(&ds, cfg, data_path)?;
    let market = serl_study::data::market_data(&ds, &cfg.data);
    let loaded = serl_study::train::Loaded {
        train_orders: train_orders.len(),
        val_orders: val_orders.len(),
        symbols: ds.symbols().len(),
    };
    say_loaded(&loaded, &cfg.train);
    serl_study::train::write_config(&a.out, cfg, a.resume, a.total_steps)?;
    let orders = (&train_orders[..], &val_orders[..]);
    train_seeds(a, cfg, &market, orders, data_path)
}

/// What to say when a signal stops `serl train`: how to go on, once the
/// run has a directory to go on from.
fn resume_hint(a: &TrainArgs) -> impl Fn() -> String + Send + Sync + 'static {
    let (out, seeds, walk_forward) = (a.out.clone(), a.seeds, a.walk_forward);
    move || words::resume_hint(&out, seeds, walk_forward)
}

/// What every training of the command shows: its own progress bar, with
/// a stop asked for by a signal taken once an update is on disk.
fn hooks() -> TrainingHooks {
    let on_update = |cfg: &TrainConfig| -> serl_train::OnUpdate<'static> {
        let bar = training_bar(cfg);
        let plain = crate::progress::PlainProgress::for_bar(&bar, "train", "steps");
        let shown = Cleared(bar);
        Box::new(move |r| {
            show_update(&shown.0, plain.as_ref(), r);
            // The update is on disk (its metrics, and its checkpoint when
            // due): a stop asked for by a signal happens here.
            crate::interrupt::at_clean_point();
        })
    };
    TrainingHooks {
        on_update: Box::new(on_update),
        around: Box::new(|f| crate::interrupt::training(f)),
    }
}

/// A training's bar, cleared when the training lets go of it.
struct Cleared(ProgressBar);

impl Drop for Cleared {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// `--seeds N`: the trainings, then their validation PA per seed and
/// across seeds.
fn train_seeds(
    a: &TrainArgs,
    cfg: &TrainFile,
    market: &serl_env::MarketData,
    orders: (&[serl_env::ParentOrder], &[serl_env::ParentOrder]),
    data_path: &Path,
) -> Result<ExitCode> {
    let hooks = hooks();
    let starting = |seed: u64, k: usize, dir: &Path| {
        eprintln!("seed {seed} ({} of {}): {}", k + 1, a.seeds, dir.display());
    };
    let runs = serl_study::train::train_seeds(
        cfg,
        market,
        orders,
        (&a.out, a.seeds, a.resume),
        &hooks,
        &starting,
    )?;
    print!("{}", serl_study::train::seeds_table(&runs));
    println!("{}", words::seeds_next_step(&runs, data_path, &a.out));
    Ok(ExitCode::SUCCESS)
}

/// The training progress bar: environment steps, their rate, and the
/// latest losses, hybrid weights and PA.
fn training_bar(cfg: &serl_train::TrainConfig) -> ProgressBar {
    let (_, steps) = cfg.planned();
    ProgressBar::new(steps as u64).with_style(
        ProgressStyle::with_template(
            "{spinner} train [{bar:30}] {pos}/{len} steps  {per_sec}  eta {eta}  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    )
}

/// One update on the bar, or as a plain line in a log.
fn show_update(
    bar: &ProgressBar,
    plain: Option<&crate::progress::PlainProgress>,
    r: &UpdateRecord,
) {
    let msg = format!(
        "loss {:.3}  α {:.2} β {:.2}  PA {}{}",
        r.loss,
        r.alpha,
        r.beta,
        r.episode_pa.map_or("-".into(), |p| format!("{p:.2}")),
        r.val_pa.map_or(String::new(), |p| format!("  val {p:.2}"))
    );
    if let Some(p) = plain {
        p.at(r.env_steps as u64, &msg);
    }
    bar.set_position(r.env_steps as u64);
    bar.set_message(msg);
}
