//! The program database in the loop (`[evolve.search]`): plain PPO
//! validated before the first round (every design is scored by its daily
//! edge over it), each candidate planned by the database, each round's
//! results added with their lineage, islands migrating on schedule, and
//! `search/database.json` rewritten after every round.

use std::collections::BTreeMap;
use std::path::Path;

use serl_llm::BuiltinDesigner;

use crate::config::EvolveConfig;
use crate::database::{Database, RoundLine, SearchConfig};
use crate::error::EvolveError;
use crate::operators::CandidatePlan;
use crate::paired::fold_stability;
use crate::record::{CandidateKind, CandidateResult, DayPa, Lineage, Operator};
use crate::train::Pairing;

/// The search's state across rounds.
pub(crate) struct Search {
    pub cfg: SearchConfig,
    pub db: Database,
    /// Plain PPO's validation days, which every design is paired with.
    pub plain: Vec<DayPa>,
    /// The `builtin` operator's designer, with a seed of its own.
    pub builtin: BuiltinDesigner,
}

impl Search {
    /// A search under `cfg` (the `[evolve]` table), paired with `plain`,
    /// plain PPO validated like a candidate.
    pub fn new(cfg: &EvolveConfig, search: &SearchConfig, plain: &CandidateResult) -> Self {
        Search {
            cfg: search.clone(),
            db: Database::new(search.islands),
            plain: plain
                .validation
                .as_ref()
                .map(|v| v.days.clone())
                .unwrap_or_default(),
            builtin: BuiltinDesigner::new(cfg.seed ^ 0xB0117),
        }
    }

    /// What results are paired with.
    pub fn pairing(&self) -> Pairing<'_> {
        Pairing {
            plain: &self.plain,
            z: self.cfg.z,
        }
    }

    /// The plan of candidate `k` of round `j` (its training seed `seed`).
    pub fn plan(
        &self,
        cfg: &EvolveConfig,
        (j, k): (usize, usize),
        all: &[CandidateResult],
        seed: u64,
    ) -> CandidatePlan {
        // Islands are dealt in turn across rounds, so that a round of
        // fewer candidates than islands still reaches every island.
        let island = (j * cfg.candidates + k) % self.cfg.islands.max(1);
        let choice = self.db.choose(&self.cfg, cfg.seed, (j, k), island, all);
        crate::operators::plan(&choice, &cfg.modules, all, seed)
    }

    /// The low-level DEK's trials as `tune` children of `parent`, the
    /// design they tuned, on its island; recorded again with their lineage.
    pub fn adopt_tuned(
        &self,
        tuned: &mut [CandidateResult],
        parent: &CandidateResult,
        dir: &Path,
    ) -> Result<(), EvolveError> {
        for r in tuned.iter_mut() {
            r.lineage = Some(Lineage {
                operator: Operator::Tune,
                parents: vec![parent.key.clone()],
                island: parent.lineage.as_ref().map_or(0, |l| l.island),
                module: None,
            });
            *r = r.clone().record(dir)?;
        }
        Ok(())
    }

    /// Adds round `j`'s candidates (`all` holds them) with their lineage,
    /// migrates on schedule, and writes the database in `dir`.
    pub fn end_round(
        &mut self,
        cfg: &EvolveConfig,
        all: &[CandidateResult],
        j: usize,
        dir: &Path,
    ) -> Result<(), EvolveError> {
        let round: Vec<&CandidateResult> = all.iter().filter(|c| c.iteration == j).collect();
        let mut line = RoundLine {
            round: j + 1,
            ..RoundLine::default()
        };
        for c in &round {
            let Some(lineage) = c.lineage.clone() else {
                continue;
            };
            if c.kind() == CandidateKind::Designed {
                let e: &mut (usize, usize) = line
                    .operators
                    .entry(lineage.operator.name().into())
                    .or_default();
                e.0 += 1;
                e.1 += usize::from(c.selection_score().is_some());
            }
            self.db.add(c, lineage, &cfg.train, all);
        }
        line.stability = stability(&round, self.cfg.folds, self.cfg.z);
        self.db.rounds.push(line);
        self.db.migrate(j + 1, self.cfg.migrate_every, all);
        self.db.write(dir)
    }

    /// Per operator, candidates written and valid in round `j` (from 0).
    pub fn operators(&self, j: usize) -> BTreeMap<String, (usize, usize)> {
        self.db
            .rounds
            .iter()
            .find(|r| r.round == j + 1)
            .map(|r| r.operators.clone())
            .unwrap_or_default()
    }
}

/// How often the round's winner (by selection score) also wins each
/// day-blocked fold, by the same rule.
fn stability(
    round: &[&CandidateResult],
    folds: usize,
    z: f64,
) -> Option<crate::paired::FoldStability> {
    let designed = || {
        round
            .iter()
            .filter(|c| c.kind() == CandidateKind::Designed && c.score.is_some())
    };
    let contenders: Vec<crate::paired::Contender> = designed()
        .filter_map(|c| Some((c.key.clone(), c.paired.as_ref()?, c.success_rate)))
        .collect();
    let winner = designed()
        .filter_map(|c| Some((c, c.selection_score()?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?
        .0;
    if contenders.len() < 2 {
        return None;
    }
    fold_stability(&contenders, &winner.key, folds, z)
}
