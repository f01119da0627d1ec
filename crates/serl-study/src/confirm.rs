//! Confirming a finished evolve run (`--seeds`, `--walk-forward`): its best
//! design and plain PPO retrained from independent seeds and on rolling
//! windows (`serl_evolve::confirm`), reported in `RUN_DIR/confirm/`.

use std::path::Path;

use serl_cluster::Cluster;
use serl_design::Design;
use serl_eval::walk_forward::WalkForwardConfig;
use serl_eval::Provenance;
use serl_evolve::{ConfirmInputs, ConfirmReport, ConfirmStep};

use crate::config::EvolveFile;
use crate::data::StudyData;
use crate::error::Result;

/// What `--seeds` and `--walk-forward` ask of a run.
pub struct Confirming<'a> {
    /// The run's config.
    pub cfg: &'a EvolveFile,
    /// The run's sessions and orders (with every order, for walk-forward).
    pub data: &'a StudyData,
    /// The run's best design.
    pub best: &'a Design,
    /// The run directory; the report goes into its `confirm/`.
    pub run_dir: &'a Path,
    /// Where the seeds' trainings run; here when `None`.
    pub cluster: Option<&'a Cluster>,
    /// Independent seeds to retrain (0: none).
    pub seeds: usize,
    /// The rolling windows to retrain on, if any.
    pub walk_forward: Option<&'a WalkForwardConfig>,
}

/// Retrains, tests and writes the confirmation's report; `on_step` hears
/// what is running.
pub fn confirm(
    c: Confirming,
    provenance: Provenance,
    on_step: &(dyn Fn(ConfirmStep) + Sync),
) -> Result<ConfirmReport> {
    let confirmation = serl_evolve::confirm(&ConfirmInputs {
        cfg: &c.cfg.evolve,
        env_cfg: &c.cfg.env,
        market_cfg: &c.cfg.market,
        market: &c.data.market,
        train_orders: &c.data.train,
        val_orders: &c.data.val,
        test_orders: &c.data.test,
        all_orders: &c.data.all,
        best: c.best,
        run_dir: c.run_dir,
        cluster: c.cluster,
        seeds: c.seeds,
        walk_forward: c.walk_forward,
        on_step: Some(on_step),
    })?;
    Ok(serl_evolve::write_confirmation(
        c.run_dir,
        &confirmation,
        provenance,
    )?)
}
