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
    pub cfg: &'a EvolveFile,
    pub data: &'a StudyData,
    pub best: &'a Design,
    pub run_dir: &'a Path,
    pub cluster: Option<&'a Cluster>,
    pub seeds: usize,
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
