//! `serl train --seeds N` and `--walk-forward`: several trainings over one
//! load of the data, each in its own directory under the run's.

use std::fmt;
use std::path::Path;

use serl_eval::walk_forward::Window;

use crate::config::TrainFile;
use crate::error::Result;
use crate::train::{self, Loaded, RunRequest, SeedRun, TrainingHooks};
use crate::walk_forward::{self, WalkForward};

/// A training of several about to start.
pub enum Starting<'a> {
    /// Seed `seed`, the `k`-th (from 0) of `seeds`, into `dir`.
    Seed {
        /// The training's seed.
        seed: u64,
        /// Its place, from 0.
        k: usize,
        /// Seeds in all.
        seeds: usize,
        /// Its run directory.
        dir: &'a Path,
    },
    /// A walk-forward window's training, into `dir`.
    Window {
        /// The window.
        window: &'a Window,
        /// Its run directory.
        dir: &'a Path,
    },
}

impl fmt::Display for Starting<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Starting::Seed {
                seed,
                k,
                seeds,
                dir,
            } => write!(f, "seed {seed} ({} of {seeds}): {}", k + 1, dir.display()),
            Starting::Window { window: w, dir } => write!(
                f,
                "window {}: train {}, test {}: {}",
                w.index,
                w.train_span(),
                w.test_span(),
                dir.display()
            ),
        }
    }
}

/// What the trainings gave.
pub enum Trained {
    /// `--seeds N`: each seed's training (`OUT/seeds.json`).
    Seeds(Vec<SeedRun>),
    /// `--walk-forward`: each window's policy tested, and the test days
    /// pooled.
    WalkForward(Box<WalkForward>),
}

/// What the trainings say as they go.
pub struct Said<'a> {
    /// What the load left out.
    pub warn: &'a dyn Fn(&str),
    /// The orders the seeds train and validate on.
    pub loaded: &'a dyn Fn(&Loaded),
    /// Each training, before it starts.
    pub starting: &'a dyn Fn(&Starting),
}

/// `seeds` trainings of `cfg` from its seed on, or (`walk_forward`) one
/// per rolling window of `[walk_forward]` tested on the sessions after
/// it, as `serl train` runs them: the run directory checked, the bars
/// loaded once, the seeds' orders drawn and the config written, then each
/// training; `said` hears what the load left out, the orders and each
/// training before it starts.
pub fn run(
    cfg: &TrainFile,
    req: &RunRequest,
    (seeds, walk_forward): (usize, bool),
    hooks: &TrainingHooks,
    said: &Said,
) -> Result<Trained> {
    let starting = said.starting;
    let (ds, data_path) = train::load_bars(cfg, req, (seeds, walk_forward), said.warn)?;
    if walk_forward {
        let on_window = |window: &Window, dir: &Path| starting(&Starting::Window { window, dir });
        let data = (&ds, data_path.as_path());
        let done = walk_forward::run(cfg, data, (req.out, req.resume), hooks, &on_window)?;
        return Ok(Trained::WalkForward(Box::new(done)));
    }
    let (market, train_orders, val_orders) =
        train::prepare(cfg, (&ds, &data_path), req, said.loaded)?;
    let on_seed = |seed, k, dir: &Path| {
        starting(&Starting::Seed {
            seed,
            k,
            seeds,
            dir,
        })
    };
    let orders = (&train_orders[..], &val_orders[..]);
    let place = (req.out, seeds, req.resume);
    let runs = train::train_seeds(cfg, &market, orders, place, hooks, &on_seed)?;
    Ok(Trained::Seeds(runs))
}
