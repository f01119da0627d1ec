//! The low-level DEK: a (1+λ)-ES on the best design's numeric constants
//! (its reward program's literals and its imagination's shares, drifts and
//! multipliers). Each trial is a candidate of its own, so resume skips the
//! finished ones.

use std::path::Path;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Normal};
use serl_design::{Design, RewardModule};

use crate::candidate::ScoreJob;

use crate::error::EvolveError;
use crate::executor::Executor;
use crate::record::{CandidateKind, CandidateResult};
use crate::train::Scoring;

/// The numbers of a design the low-level DEK tunes: the reward program's
/// literals, then the imagination's (`ImaginationModule::constants`) when
/// the design imagines days at all, so that a reward without literals
/// (`twap_gain`) is still tuned.
struct Tunable {
    reward: RewardModule,
    imagines: bool,
}

impl Tunable {
    fn of(design: &Design) -> Self {
        Tunable {
            reward: design.reward.clone(),
            imagines: !design.imagination.scenarios.is_empty(),
        }
    }

    fn constants(&self, design: &Design) -> Vec<f64> {
        let mut c = self.reward.program().constants();
        if self.imagines {
            c.extend(design.imagination.constants());
        }
        c
    }

    /// `design` with `constants` in place, and its constants as it now
    /// has them (shares clamped); `None` when one is out of its range.
    fn apply(&self, design: &Design, constants: &[f64]) -> Option<(Design, Vec<f64>)> {
        let literals = self.reward.program().constants().len();
        let (for_reward, for_imagination) = constants.split_at(literals.min(constants.len()));
        let mut d = design.clone();
        if literals > 0 {
            d.reward = self.reward.with_constants(for_reward).ok()?;
        }
        let mut now = for_reward.to_vec();
        if self.imagines {
            d.imagination = d.imagination.with_constants(for_imagination).ok()?;
            now.extend(d.imagination.constants());
        }
        Some((d, now))
    }
}

/// One offspring of a (1+λ)-ES generation: its constants, and its result
/// from an earlier run or the design still to train with its seed.
struct Member {
    key: String,
    constants: Vec<f64>,
    job: Job,
}

enum Job {
    Stored(Box<CandidateResult>),
    Train(Box<Design>, u64),
}

/// (1+λ)-ES on the design's numeric constants (`Tunable`): each generation tries λ
/// log-normal perturbations of the incumbent and keeps the best if it
/// scores higher. Each trial is a candidate of its own in the run
/// directory (`ll<j>_g<g>_m<m>`), so resume skips finished ones.
pub(crate) fn tune_constants(
    inputs: &Scoring,
    executor: &dyn Executor,
    best: &CandidateResult,
    j: usize,
    dir: &Path,
    tick: &(dyn Fn() + Sync),
) -> Result<Vec<CandidateResult>, EvolveError> {
    let cfg = &inputs.cfg.low_level;
    let Some(design) = best.design.clone() else {
        return Ok(Vec::new());
    };
    let tunable = Tunable::of(&design);
    let constants = tunable.constants(&design);
    if constants.is_empty() {
        return Ok(Vec::new());
    }
    let mut rng = SmallRng::seed_from_u64(inputs.cfg.seed ^ (j as u64 + 0xDE4));
    let noise = Normal::new(0.0, cfg.sigma).map_err(|e| EvolveError::Config(e.to_string()))?;
    let mut incumbent = (
        design,
        best.selection_score().unwrap_or(f64::MIN),
        constants,
    );
    let mut out = Vec::new();
    for g in 0..cfg.generations {
        // The generation's constants are drawn first, so that its
        // trainings can run side by side and draw the same numbers.
        let mut members = Vec::new();
        for m in 0..cfg.lambda {
            let constants: Vec<f64> = incumbent
                .2
                .iter()
                .map(|v| v * noise.sample(&mut rng).exp())
                .collect();
            let key = CandidateKind::low_level_key(j, g, m);
            let Some((d, constants)) = tunable.apply(&incumbent.0, &constants) else {
                continue;
            };
            let job = match CandidateResult::recorded(dir, &key) {
                Some(r) => Job::Stored(Box::new(r)),
                None => {
                    let seed = inputs.cfg.seed
                        ^ ((j * 1000 + 500 + g * 10 + m) as u64)
                            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    Job::Train(Box::new(d), seed)
                }
            };
            members.push(Member {
                key,
                constants,
                job,
            });
        }
        let jobs: Vec<ScoreJob> = members
            .iter()
            .filter_map(|m| match &m.job {
                Job::Stored(_) => None,
                Job::Train(d, seed) => Some(ScoreJob {
                    design: (**d).clone(),
                    key: m.key.clone(),
                    iteration: j,
                    success_rate: best.success_rate,
                    seed: *seed,
                    fold: None,
                }),
            })
            .collect();
        let batch = format!("ll{j}_g{g}");
        let mut trained = executor
            .score(inputs, dir, &batch, &jobs, tick)?
            .into_iter();
        let results = members
            .iter()
            .map(|m| match &m.job {
                Job::Stored(r) => Ok(inputs.pair((**r).clone())),
                Job::Train(..) => {
                    let scored = trained.next().expect("one result per job");
                    inputs.pair(scored.result).record(dir)
                }
            })
            .collect::<Result<Vec<_>, EvolveError>>()?;
        let mut gen_best: Option<(Design, f64, Vec<f64>)> = None;
        for (r, m) in results.into_iter().zip(&members) {
            if let (Some(d), Some(s)) = (r.design.clone(), r.selection_score()) {
                if gen_best.as_ref().is_none_or(|b| s > b.1) {
                    gen_best = Some((d, s, m.constants.clone()));
                }
            }
            out.push(r);
        }
        if let Some(b) = gen_best {
            if b.1 > incumbent.1 {
                incumbent = b;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serl_design::ImaginationModule;

    fn timing_design(reward: &str) -> Design {
        let mut d = Design::baseline();
        d.reward = RewardModule::compile(reward).unwrap();
        d.imagination = ImaginationModule {
            scenarios: vec![serl_env::Scenario {
                volatility_mult: 1.0,
                drift_bps: -120.0,
                liquidity_mult: 1.0,
                jumps: Vec::new(),
            }],
            share: 0.5,
            replay_share: 0.6,
        };
        d
    }

    #[test]
    fn the_es_tunes_the_imagination_of_a_reward_without_literals() {
        let d = timing_design("twap_gain");
        let t = Tunable::of(&d);
        assert_eq!(t.constants(&d), vec![0.5, 0.6, 1.0, -120.0, 1.0]);

        let (tuned, now) = t.apply(&d, &[0.4, 1.2, 1.1, -150.0, 0.8]).unwrap();
        assert_eq!(tuned.reward, d.reward);
        assert_eq!(tuned.imagination.replay_share, 1.0, "shares stay shares");
        assert_eq!(tuned.imagination.scenarios[0].drift_bps, -150.0);
        assert_eq!(now, t.constants(&tuned));
    }

    #[test]
    fn the_es_tunes_reward_literals_first_and_skips_what_is_out_of_range() {
        let d = timing_design("twap_gain - 2 * remaining_inv^2 / steps");
        let t = Tunable::of(&d);
        let c = t.constants(&d);
        assert_eq!(c[..2], [2.0, 2.0]);
        let mut changed = c.clone();
        changed[0] = 3.0;
        let (tuned, _) = t.apply(&d, &changed).unwrap();
        assert!(
            tuned.reward.source().contains("3 *"),
            "{}",
            tuned.reward.source()
        );
        assert_eq!(tuned.imagination, d.imagination);

        let mut wild = c;
        wild[4] = 50.0; // volatility_mult, at most 5
        assert!(t.apply(&d, &wild).is_none());

        // Without imagined days only the reward's literals are tuned.
        let plain = Design::baseline();
        let t = Tunable::of(&plain);
        assert_eq!(t.constants(&plain), plain.reward.program().constants());
    }
}
