//! # serl-evolve: the SE-RL outer loop
//!
//! `serl evolve` runs here. For each iteration the designer (an LLM or the
//! builtin search, from `serl-llm`) proposes K candidate algorithms, each a
//! set of modules (`serl-design`); every valid candidate is trained in the
//! hybrid environment (`serl-train`) and scored on the validation split
//! (`serl-eval`). The Dual-Level Enhancement Kit then improves the
//! designer's instructions from the results (high level) and tunes the
//! best design's constants with a (1+λ)-ES (low level). At the end the
//! best design is retrained with the full budget and tested once against
//! TWAP, VWAP, AC, plain PPO and DDQN on identical orders.
//!
//! The loop is [`evolve`]; each stage has a file of its own:
//!
//! | stage | file | what |
//! |---|---|---|
//! | program database | `database.rs`, `operators.rs`, `paired.rs` | `[evolve.search]`: designs kept in islands and MAP-Elites cells; parents chosen by score; mutate, crossover, fresh and builtin operators; each design scored by its daily edge over plain PPO |
//! | records | `record.rs` | what the run directory keeps of a candidate (`CandidateResult`) and the types it is made of: validation, days, paired edge, lineage; the score they share. A leaf: it imports no other stage |
//! | candidates | `candidate.rs` | a candidate's states: designed, a scoring job, scored |
//! | design | `design_stage.rs` | the designer writes each module; replies validated and smoke-tested, errors fed back |
//! | train and score | `train.rs`, `score.rs` | each design trained on the candidates' budget and validated: a function of its job |
//! | low-level DEK | `dek_low.rs` | a (1+λ)-ES on the best design's constants |
//! | feedback, high-level DEK | `dek_high.rs` | the round's results for the next prompts; instructions rewritten from their history |
//! | convergence | `run.rs` | the EMA of the best validation PA |
//! | events | `event.rs` | what the loop tells its caller as it goes, and the words a front end shows of each |
//! | budget | `budget.rs` | `[evolve.budget]`: fewer candidates as the tokens or training seconds run low, none once spent |
//! | final test | `final_stage.rs` | plain PPO validated alike, the best retrained, everything tested once |
//! | confirm | `confirm.rs`, `confirm_report.rs` | a finished run's best design and plain PPO retrained from independent seeds and on walk-forward windows, tested day by day ([`confirm`]) |
//! | lockbox | `lockbox.rs` | the test sealed until the run is declared final (`[evolve] lockbox`) |
//! | evidence | `evidence.rs`, `evidence_stage.rs` | every design's, plain PPO's and the baselines' PA per validation stock-day (`evidence.parquet`); σ_d, the noise edge, the detectable edge, PBO, the deflated score, the SPA test; the recommendation (`evidence.json`, `final/recommended`) |
//! | verdict | `verdict.rs` | the chosen design on test against plain PPO and the baselines, day by day; whether the validation ranking held |
//! | costs | `stages.rs`, `stage_clock.rs` | seconds per stage, read from the stage's `tracing` span by the [`StageClock`] layer, kept in `costs.json` across resumes |
//! | executors | `executor.rs` | jobs run here side by side (where the numbers stay the same), or as batches of a cluster's plan (`serl-cluster`) |
//! | tasks | `tasks.rs` | a job as a cluster task's line, which [`run_task`] runs |
//! | pairs | `pairs.rs`, `pair_counts.rs` | the designer's fine-tuning data from a run's records, and its counts per module (`serl llm pairs`) |
//! | hierarchy | `hierarchy.rs`, `hierarchy_rows.rs` | `[evolve.hierarchy]`, and the best design retrained with one more part switched on |
//!
//! The loop never prints: it tells its caller what it is doing through
//! [`Event`]s. [`EvolveConfig`] is the `[evolve]` table, [`write_report`]
//! writes the research report and fine-tuning dataset, and an
//! [`Ablation`] is the same run with one part switched off
//! ([`ablation_table`] compares them).

#![deny(missing_docs)]

mod ablation;
mod budget;
mod candidate;
mod config;
mod confirm;
mod confirm_report;
mod confirm_tables;
mod database;
mod dek_high;
mod dek_low;
mod design_stage;
mod error;
mod event;
pub mod evidence;
mod evidence_folds;
mod evidence_report;
mod evidence_stage;
mod executor;
mod final_stage;
pub mod fold;
mod hierarchy;
mod hierarchy_rows;
mod iteration;
mod learner;
mod llm_critic;
mod lockbox;
mod operators;
mod pair_counts;
mod paired;
mod pairs;
mod prescreen;
mod record;
pub mod repairs;
mod report;
mod report_search;
mod run;
mod score;
mod search;
mod select;
mod stage_clock;
mod stages;
mod tasks;
mod team_validation;
mod train;
mod verdict;

pub use ablation::{table as ablation_table, AblationRow};
pub use budget::{BudgetConfig, PrescreenConfig};
pub use config::{Ablation, ConvergenceConfig, EvolveConfig, LowLevelConfig};
pub use confirm::{
    check as check_confirmation, confirm, mean_label, seed_label, seed_mean, ConfirmInputs,
    ConfirmStep, Confirmation, WindowResult, BEST, PLAIN,
};
pub use confirm_report::{write_confirmation, AcrossSeeds, ConfirmReport, WindowLine};
pub use confirm_tables::confirm_tables;
pub use database::{
    Cell, Database, Island, Migration, OperatorWeights, Program, RoundLine, SearchConfig,
};
pub use error::EvolveError;
pub use event::Shown;
pub use hierarchy::{Base, HierarchyConfig, Switch};
pub use hierarchy_rows::{table as hierarchy_table, HierarchyRow, Split};
pub use learner::{FinetuneConfig, Learned, Learner};
pub use llm_critic::{parse_weights as parse_critic_weights, CriticMaker, LlmCritic};
pub use lockbox::{now as utc_now, Lockbox};
pub use pair_counts::PairCounts;
pub use paired::{paired as paired_days, FoldStability};
pub use pairs::{
    pairs_from_candidates, read_run_pairs, sft_from_candidates, Pair, PairKind, SftExample,
};
pub use record::{
    candidate_score, CandidateKind, CandidateResult, DayPa, Lineage, ModuleRecord, Operator,
    PairedScore, Screened, StockDayPa, Validation,
};
pub use report::write as write_report;
pub use run::{evolve, Event, EvolveInputs, EvolveOutcome, IterationSummary, OnEvent};
pub use stage_clock::StageClock;
pub use stages::CoreUse;
pub use tasks::{run_task, TaskInputs, FINAL_TASK, SCORE_TASK};
pub use train::policy_factory;
pub use verdict::{verdict, Verdict, VerdictRow};
