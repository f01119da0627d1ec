//! The program database (`[evolve.search]`): every design ever scored,
//! kept in islands that evolve apart and exchange their best every few
//! rounds, each island keeping the best design of each MAP-Elites cell,
//! and parents drawn from those elites by score with a temperature.
//!
//! It follows FunSearch and OpenEvolve: the model is asked to *change* a
//! good design (mutate) or to combine two (crossover) more often than to
//! write one from scratch, and a failed or invalid design never becomes
//! a parent. The database is a function of the run's candidates and its
//! seed: a resumed run replays the loop, rebuilds the same database and
//! draws the same parents; `search/database.json` keeps it for reading.

use std::collections::BTreeMap;
use std::path::Path;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::{write_json, EvolveError};
use crate::paired::FoldStability;
use crate::record::{CandidateResult, Lineage, Operator};

/// `[evolve.search]`: the program database and how it picks parents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    /// Sub-populations that evolve apart (a round's candidates are dealt
    /// to them in turn).
    pub islands: usize,
    /// Every this many rounds each island sends its best design to the
    /// next (a ring).
    pub migrate_every: usize,
    /// Parent selection's softmax temperature over selection scores, in
    /// score units (bps): small picks the best almost always, large
    /// picks uniformly among the island's elites.
    pub temperature: f64,
    /// How often each operator writes a candidate (weights, normalised).
    pub operators: OperatorWeights,
    /// The lower bound is the mean daily edge over plain PPO minus `z`
    /// standard errors.
    pub z: f64,
    /// Day-blocked folds for the stability report: how often each
    /// round's winner would also have won on each block of days alone
    /// (0: none).
    pub folds: usize,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            islands: 3,
            migrate_every: 2,
            temperature: 1.0,
            operators: OperatorWeights::default(),
            z: 1.0,
            folds: 3,
        }
    }
}

impl SearchConfig {
    /// What is wrong with it, naming the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.islands == 0 {
            return Err("[evolve.search] islands must be at least 1".into());
        }
        if self.migrate_every == 0 {
            return Err("[evolve.search] migrate_every must be at least 1 (rounds)".into());
        }
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Err(format!(
                "[evolve.search] temperature must be above 0, not {}",
                self.temperature
            ));
        }
        if !(self.z.is_finite() && self.z >= 0.0) {
            return Err(format!(
                "[evolve.search] z must be 0 or more, not {}",
                self.z
            ));
        }
        self.operators.validate()
    }
}

/// How often each operator writes a candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OperatorWeights {
    /// One module of a parent rewritten by the designer to do better.
    pub mutate: f64,
    /// Two parents' modules combined, one reconciled by the designer.
    pub crossover: f64,
    /// Every module written from scratch (the loop without a database).
    pub fresh: f64,
    /// Every module from the builtin offline search.
    pub builtin: f64,
}

impl Default for OperatorWeights {
    fn default() -> Self {
        OperatorWeights {
            mutate: 0.5,
            crossover: 0.2,
            fresh: 0.2,
            builtin: 0.1,
        }
    }
}

impl OperatorWeights {
    fn validate(&self) -> Result<(), String> {
        let w = [self.mutate, self.crossover, self.fresh, self.builtin];
        if w.iter().any(|x| !(x.is_finite() && *x >= 0.0)) || w.iter().sum::<f64>() <= 0.0 {
            return Err(format!(
                "[evolve.search.operators] weights must be 0 or more with a positive sum, not {w:?}"
            ));
        }
        Ok(())
    }

    fn draw(&self, rng: &mut SmallRng) -> Operator {
        let pairs = [
            (Operator::Mutate, self.mutate),
            (Operator::Crossover, self.crossover),
            (Operator::Fresh, self.fresh),
            (Operator::Builtin, self.builtin),
        ];
        let total: f64 = pairs.iter().map(|p| p.1).sum();
        let mut u = rng.random::<f64>() * total;
        for (op, w) in pairs {
            if u < w {
                return op;
            }
            u -= w;
        }
        Operator::Fresh
    }
}

/// A MAP-Elites cell: simple descriptors of a design, bucketed, so that
/// different kinds of good design are kept apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cell {
    /// Reward terms: 1, 2, 3, 4 or more.
    pub reward_terms: u8,
    /// Network size: 0 under 2,000 parameters, 1 under 20,000, 2 above.
    pub network: u8,
    /// Unfilled share of the order (AFI): 0 under 2%, 1 under 20%, 2 above.
    pub afi: u8,
}

impl Cell {
    /// Its name in `database.json` and the report: `t2.n0.a1`.
    pub fn label(self) -> String {
        format!("t{}.n{}.a{}", self.reward_terms, self.network, self.afi)
    }

    /// The cell of a scored candidate trained under `train`; `None` for
    /// one without a design or validation.
    pub fn of(c: &CandidateResult, train: &serl_train::TrainConfig) -> Option<Cell> {
        let d = c.design.as_ref()?;
        let v = c.validation.as_ref()?;
        let obs_dim = train.with_design(d).obs_dim();
        let terms = d.reward.program().terms().len().clamp(1, 4) as u8;
        // Its size only: a design recorded before the compute limit keeps
        // its cell.
        let params = d
            .architecture
            .validate_within(obs_dim, serl_design::MAX_PARAMS)
            .map(|s| s.params)
            .unwrap_or(0);
        let network = match params {
            p if p < 2_000 => 0,
            p if p < 20_000 => 1,
            _ => 2,
        };
        let afi = match v.afi {
            a if a < 0.02 => 0,
            a if a < 0.2 => 1,
            _ => 2,
        };
        Some(Cell {
            reward_terms: terms,
            network,
            afi,
        })
    }
}

/// One sub-population: its members and the best of each cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Island {
    /// Every valid scored design that lives here (migrants included).
    pub members: Vec<String>,
    /// The best design of each cell, by cell label: the parents.
    pub elites: BTreeMap<String, String>,
}

/// A design sent from one island to the next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Migration {
    /// The round after which it moved (from 1).
    pub round: usize,
    /// The island it left.
    pub from: usize,
    /// The island it joined.
    pub to: usize,
    /// The design.
    pub key: String,
}

/// A design as the database lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// Its key in the run.
    pub key: String,
    /// Its round (from 0).
    pub iteration: usize,
    /// Where it came from.
    pub lineage: Lineage,
    /// Whether it was valid and scored (only those become parents).
    pub valid: bool,
    /// Its selection score, if scored.
    pub score: Option<f64>,
    /// Its cell, if scored.
    pub cell: Option<String>,
}

/// A round as the database saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoundLine {
    /// The round, from 1.
    pub round: usize,
    /// Per operator: candidates it wrote and how many were valid.
    pub operators: BTreeMap<String, (usize, usize)>,
    /// How stable the round's winner is across day-blocked folds.
    pub stability: Option<FoldStability>,
}

/// The program database.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Database {
    /// The islands.
    pub islands: Vec<Island>,
    /// Every design added, in order.
    pub programs: Vec<Program>,
    /// Every migration, in order.
    pub migrations: Vec<Migration>,
    /// One line per round.
    pub rounds: Vec<RoundLine>,
}

/// What the database chose for one candidate.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Choice {
    pub island: usize,
    pub operator: Operator,
    /// Parents' keys (as many as the operator needs).
    pub parents: Vec<String>,
}

impl Database {
    /// An empty database of `islands` islands.
    pub fn new(islands: usize) -> Self {
        Database {
            islands: vec![Island::default(); islands.max(1)],
            ..Default::default()
        }
    }

    /// Adds `c` with its lineage; a valid scored design joins its island
    /// and takes its cell if it beats the cell's elite.
    pub(crate) fn add(
        &mut self,
        c: &CandidateResult,
        lineage: Lineage,
        train: &serl_train::TrainConfig,
        all: &[CandidateResult],
    ) {
        let score = c.selection_score();
        let cell = score.and(Cell::of(c, train));
        let island = lineage.island.min(self.islands.len() - 1);
        self.programs.push(Program {
            key: c.key.clone(),
            iteration: c.iteration,
            lineage,
            valid: score.is_some(),
            score,
            cell: cell.map(Cell::label),
        });
        if let (Some(s), Some(cell)) = (score, cell) {
            self.join(island, &c.key, s, &cell.label(), all);
        }
    }

    /// `key` (scoring `score`) joins `island`, taking `cell` if it beats
    /// the elite there.
    fn join(&mut self, island: usize, key: &str, score: f64, cell: &str, all: &[CandidateResult]) {
        let isl = &mut self.islands[island];
        if !isl.members.iter().any(|m| m == key) {
            isl.members.push(key.to_string());
        }
        let beats = match isl.elites.get(cell) {
            Some(e) => score_of(all, e).is_none_or(|s| score > s),
            None => true,
        };
        if beats {
            isl.elites.insert(cell.to_string(), key.to_string());
        }
    }

    /// After round `round` (from 1), every `every` rounds: each island's
    /// best elite joins the next island (a ring).
    pub(crate) fn migrate(&mut self, round: usize, every: usize, all: &[CandidateResult]) {
        let n = self.islands.len();
        if n < 2 || every == 0 || !round.is_multiple_of(every) {
            return;
        }
        let bests: Vec<Option<(String, f64)>> = (0..n).map(|i| self.best(i, all)).collect();
        for (from, best) in bests.into_iter().enumerate() {
            let Some((key, score)) = best else { continue };
            let to = (from + 1) % n;
            let cell = self
                .programs
                .iter()
                .find(|p| p.key == key)
                .and_then(|p| p.cell.clone())
                .unwrap_or_default();
            self.join(to, &key, score, &cell, all);
            self.migrations.push(Migration {
                round,
                from,
                to,
                key,
            });
        }
    }

    /// Island `i`'s best elite and its score.
    fn best(&self, i: usize, all: &[CandidateResult]) -> Option<(String, f64)> {
        self.islands[i]
            .elites
            .values()
            .filter_map(|k| Some((k.clone(), score_of(all, k)?)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// A parent from island `i`'s elites, drawn by softmax over their
    /// scores at `temperature`, leaving out `except`; `None` when the
    /// island has none.
    fn draw_parent(
        &self,
        i: usize,
        all: &[CandidateResult],
        temperature: f64,
        except: Option<&str>,
        rng: &mut SmallRng,
    ) -> Option<String> {
        let elites: Vec<(String, f64)> = self.islands[i]
            .elites
            .values()
            .filter(|k| Some(k.as_str()) != except)
            .filter_map(|k| Some((k.clone(), score_of(all, k)?)))
            .collect();
        let top = elites.iter().map(|e| e.1).fold(f64::MIN, f64::max);
        let weights: Vec<f64> = elites
            .iter()
            .map(|e| ((e.1 - top) / temperature).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        if elites.is_empty() || total <= 0.0 {
            return None;
        }
        let mut u = rng.random::<f64>() * total;
        for (e, w) in elites.iter().zip(&weights) {
            if u < *w {
                return Some(e.0.clone());
            }
            u -= w;
        }
        elites.last().map(|e| e.0.clone())
    }

    /// The operator and parents of candidate `k` of round `j`, which
    /// lives on `island`: the operator drawn by weight, and an operator
    /// whose parents the island lacks falls back (crossover to mutate,
    /// mutate to fresh). Seeded by the run's seed, the round and the
    /// candidate, so a replay draws the same.
    pub(crate) fn choose(
        &self,
        cfg: &SearchConfig,
        seed: u64,
        (j, k): (usize, usize),
        island: usize,
        all: &[CandidateResult],
    ) -> Choice {
        let mix = ((j as u64) << 32 | k as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93);
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x5EA2_C4DB ^ mix);
        let island = island % self.islands.len();
        let mut operator = cfg.operators.draw(&mut rng);
        let t = cfg.temperature;
        let first = match operator.parents() {
            0 => None,
            _ => self.draw_parent(island, all, t, None, &mut rng),
        };
        let mut parents: Vec<String> = first.into_iter().collect();
        if operator == Operator::Crossover && !parents.is_empty() {
            // The second parent from the same island, else from any other.
            let second = self
                .draw_parent(
                    island,
                    all,
                    t,
                    parents.first().map(String::as_str),
                    &mut rng,
                )
                .or_else(|| {
                    (0..self.islands.len())
                        .filter(|&i| i != island)
                        .find_map(|i| {
                            self.draw_parent(
                                i,
                                all,
                                t,
                                parents.first().map(String::as_str),
                                &mut rng,
                            )
                        })
                });
            parents.extend(second);
        }
        if parents.len() < operator.parents() {
            operator = if parents.is_empty() {
                Operator::Fresh
            } else {
                Operator::Mutate
            };
            parents.truncate(operator.parents());
        }
        Choice {
            island,
            operator,
            parents,
        }
    }

    /// Writes it to `run_dir/search/database.json`.
    pub(crate) fn write(&self, run_dir: &Path) -> Result<(), EvolveError> {
        write_json(&run_dir.join("search").join("database.json"), self)
    }

    /// The database a run directory holds, if any.
    pub fn read(run_dir: &Path) -> Option<Database> {
        crate::error::read_json(&run_dir.join("search").join("database.json"))
    }
}

/// Candidate `key`'s selection score.
fn score_of(all: &[CandidateResult], key: &str) -> Option<f64> {
    all.iter().find(|c| c.key == key)?.selection_score()
}

#[cfg(test)]
#[path = "database_tests.rs"]
mod tests;
