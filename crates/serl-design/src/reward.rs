//! The reward module: an expression program over the per-step variables
//! of one table, [`REWARD_VARS`].

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serl_env::{Reward, StepInfo};
use serl_expr::{Program, VarSet};

use crate::kind::{err, ModuleError, ModuleKind};

/// One variable a reward program may read: its name, what it means (for
/// the prompts), and where its value comes from.
#[derive(Clone, Copy)]
pub struct RewardVar {
    /// The name programs use.
    pub name: &'static str,
    /// What it means, as the prompts explain it.
    pub doc: &'static str,
    value: fn(&StepInfo) -> f64,
}

impl RewardVar {
    /// The variable's value at step `s`.
    pub fn value(&self, s: &StepInfo) -> f64 {
        (self.value)(s)
    }
}

impl std::fmt::Debug for RewardVar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RewardVar")
            .field("name", &self.name)
            .finish()
    }
}

/// The per-step variables a reward program may read, in the order
/// [`ProgramReward`] passes them: name, meaning and value in one row, so
/// the three can never drift apart.
pub const REWARD_VARS: [RewardVar; 17] = [
    RewardVar {
        name: "step_pa",
        doc: "this step's price advantage against the step benchmark, bps, weighted by the share filled",
        value: |s| s.step_pa,
    },
    RewardVar {
        name: "fill_qty",
        doc: "shares filled this step, as a fraction of the order",
        value: |s| s.fill_frac,
    },
    RewardVar {
        name: "fill_price",
        doc: "average fill price this step (0 when nothing filled)",
        value: |s| s.fill_price,
    },
    RewardVar {
        name: "bench_price",
        doc: "mean market price over the step",
        value: |s| s.step_bench,
    },
    RewardVar {
        name: "timing",
        doc: "how much better the step's mean price is than the price at the order's arrival, for the order's side, bps",
        value: |s| s.timing_bps,
    },
    RewardVar {
        name: "twap_gain",
        doc: "this step's share of the gain over an even (TWAP) schedule, bps: how far behind that schedule the order was before the step times how far prices moved in its favour since the last step; sums to the episode's timing gain over TWAP",
        value: |s| s.twap_gain_bps,
    },
    RewardVar {
        name: "spread_bps",
        doc: "quoted spread, bps",
        value: |s| s.spread_bps,
    },
    RewardVar {
        name: "time_left",
        doc: "share of the window left after this step, 1 to 0",
        value: |s| s.time_left,
    },
    RewardVar {
        name: "remaining_inv",
        doc: "share of the order still to trade after this step, 1 to 0",
        value: |s| s.inventory_left,
    },
    RewardVar {
        name: "volatility",
        doc: "1-minute volatility, bps",
        value: |s| s.volatility_bps,
    },
    RewardVar {
        name: "volume",
        doc: "market volume this step relative to an average step",
        value: |s| s.volume,
    },
    RewardVar {
        name: "steps",
        doc: "decision steps in the episode",
        value: |s| s.steps as f64,
    },
    RewardVar {
        name: "done",
        doc: "1 on the last step, else 0",
        value: |s| if s.done { 1.0 } else { 0.0 },
    },
    RewardVar {
        name: "spread_captured",
        doc: "spread earned by this step's fills, bps of the mid when each order was sent, weighted by the share filled: positive for resting orders that filled, minus half the spread on what crossed",
        value: |s| s.spread_captured_bps,
    },
    RewardVar {
        name: "adverse_move",
        doc: "the mid's move against the order from this step's passive fills to the step's end, bps, weighted by the share filled (the adverse selection of resting orders; 0 without them)",
        value: |s| s.adverse_bps,
    },
    RewardVar {
        name: "plan_gap",
        doc: "share of the order held after this step minus the plan's target then: positive is behind the plan (0 without a plan module)",
        value: |s| s.plan_gap,
    },
    RewardVar {
        name: "subgoal_hit",
        doc: "1 on a step that reaches one of the plan's checkpoints within its tolerance, else 0 (0 without a plan module)",
        value: |s| s.subgoal_hit,
    },
];

/// The reward variables a plan module sets: 0 on every step without one.
pub const PLAN_VARS: [&str; 2] = ["plan_gap", "subgoal_hit"];

/// `{name, doc}` of each reward variable, for the prompts.
pub fn reward_vars_doc() -> Vec<serde_json::Value> {
    REWARD_VARS
        .iter()
        .map(|v| serde_json::json!({"name": v.name, "doc": v.doc}))
        .collect()
}

/// The reward language as GBNF for constrained decoders: the expression
/// grammar over [`REWARD_VARS`] without the window functions, which a
/// reward may not use, so a constrained reply is never refused for one.
pub fn reward_grammar() -> String {
    serl_expr::gbnf_with(&reward_vars(), false)
}

/// [`reward_grammar`] as Lark, for decoders that mask tokens with
/// llguidance (the local backend): a bare program, bounded as
/// [`serl_expr::lark_rules`] says.
pub fn reward_lark() -> String {
    serl_expr::lark(&reward_vars(), false)
}

/// The variables a reward program is compiled over.
pub fn reward_vars() -> VarSet {
    VarSet::new(&REWARD_VARS.map(|v| v.name))
}

/// The default reward (the environment's `DefaultReward` with penalties 2
/// and 50) as a program: "plain PPO"'s reward.
pub const DEFAULT_REWARD_PROGRAM: &str =
    "step_pa - 2 * remaining_inv^2 / steps - 50 * done * remaining_inv^2";

/// The environment's default reward with penalties `inventory` and
/// `terminal` (`[env] inventory_penalty`, `terminal_penalty`) as a
/// program: what a reward critic re-weights when a run gives none.
/// [`DEFAULT_REWARD_PROGRAM`] is it with the default penalties.
pub fn default_reward_program(inventory: f64, terminal: f64) -> String {
    format!("step_pa - {inventory} * remaining_inv^2 / steps - {terminal} * done * remaining_inv^2")
}

/// A reward program, compiled: it can only be built by compiling and
/// checking its source ([`RewardModule::compile`], or deserializing
/// `{"program": "..."}`), so holding one means the program is valid, and
/// turning it into a [`ProgramReward`] compiles nothing again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RewardText", into = "RewardText")]
pub struct RewardModule {
    program: Program,
}

/// A reward module as it is written and stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RewardText {
    program: String,
}

impl TryFrom<RewardText> for RewardModule {
    type Error = ModuleError;
    fn try_from(t: RewardText) -> Result<Self, ModuleError> {
        RewardModule::compile(&t.program)
    }
}

impl From<RewardModule> for RewardText {
    fn from(m: RewardModule) -> Self {
        RewardText {
            program: m.program.source().to_string(),
        }
    }
}

impl RewardModule {
    /// Compiles `source` over [`REWARD_VARS`] and checks that it reads
    /// only this step's variables (rewards are per step, so no window
    /// functions).
    pub fn compile(source: &str) -> Result<Self, ModuleError> {
        let program = Program::compile(source.trim(), &reward_vars())
            .map_err(|e| err(ModuleKind::Reward, e.to_string()))?;
        if program.has_windows() {
            return Err(err(ModuleKind::Reward, "a reward reads only this step's variables; window functions belong in state features"));
        }
        Ok(RewardModule { program })
    }

    /// "Plain PPO"'s reward, [`DEFAULT_REWARD_PROGRAM`].
    pub fn plain() -> Self {
        Self::compile(DEFAULT_REWARD_PROGRAM).expect("the default reward program compiles")
    }

    /// The program's source text.
    pub fn source(&self) -> &str {
        self.program.source()
    }

    /// The compiled program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The same program with its numeric literals replaced, in the order
    /// `program().constants()` lists them.
    pub fn with_constants(&self, values: &[f64]) -> Result<Self, ModuleError> {
        let program = self
            .program
            .with_constants(values)
            .map_err(|e| err(ModuleKind::Reward, e.to_string()))?;
        Ok(RewardModule { program })
    }

    /// Refuses a reward that reads no state: one whose value is the same
    /// on every step of an episode (a constant, `steps` alone, or an
    /// expression whose variables cancel), since it teaches the policy
    /// nothing and a search would only select it by luck. The program is
    /// played on random steps of one episode (seeded, so the verdict is
    /// the same every time).
    pub fn check_reads_state(&self) -> Result<(), ModuleError> {
        self.check_reads_state_in(true)
    }

    /// [`Self::check_reads_state`] for a design with or without a plan
    /// module: without one, `plan_gap` and `subgoal_hit` are 0 on every
    /// step, so a reward built on them alone reads no state either.
    pub fn check_reads_state_in(&self, with_plan: bool) -> Result<(), ModuleError> {
        let fixed = |name: &str| name == "steps" || (!with_plan && PLAN_VARS.contains(&name));
        let mut seed = 0x5EED_u64;
        let mut uniform = move || {
            // splitmix64: no generator crate for 32 draws.
            seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) as f64 / u64::MAX as f64
        };
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        let mut repaired = 0;
        for _ in 0..32 {
            let vars = REWARD_VARS.map(|v| match v.name {
                // Fixed for the episode.
                "steps" => 13.0,
                name if fixed(name) => 0.0,
                "done" => f64::from(u8::from(uniform() < 0.3)),
                _ => uniform() * 20.0 - 10.0,
            });
            let mut st = self.program.new_state();
            let v = self.program.eval(&mut st, &vars);
            repaired += usize::from(st.repaired > 0);
            lo = lo.min(v);
            hi = hi.max(v);
        }
        // A value repaired on every step (a division by zero, a NaN) is
        // the smoke test's to report, with the count of such steps.
        if hi - lo > 1e-9 * (1.0 + lo.abs().max(hi.abs())) || repaired == 32 {
            return Ok(());
        }
        let read: Vec<&str> = self
            .program
            .variables()
            .iter()
            .map(|&i| REWARD_VARS[i].name)
            .collect();
        let changing = read.iter().any(|v| !fixed(v));
        let reads = match (read.is_empty(), changing) {
            (true, _) => "reads no variable".to_string(),
            (false, false) => format!(
                "reads only {}, which is fixed for an episode (plan_gap and subgoal_hit are 0 without a plan module)",
                read.join(", ")
            ),
            (false, true) => format!("reads {}, but they cancel out", read.join(", ")),
        };
        Err(err(
            ModuleKind::Reward,
            format!("the reward is {lo} on every step: it {reads}, so it teaches the policy nothing; build it on what changes from step to step (step_pa, twap_gain, remaining_inv, fill_qty, ...)"),
        ))
    }

    /// The module as the environment's [`Reward`], with its own count of
    /// repaired values; nothing is compiled again.
    pub fn reward(&self) -> ProgramReward {
        ProgramReward {
            program: self.program.clone(),
            repaired: AtomicU64::new(0),
        }
    }
}

/// A compiled reward program as the environment's [`Reward`]
/// ([`RewardModule::reward`]).
#[derive(Debug)]
pub struct ProgramReward {
    program: Program,
    repaired: AtomicU64,
}

impl Reward for ProgramReward {
    fn reward(&self, s: &StepInfo) -> f64 {
        let mut st = self.program.new_state();
        let v = self
            .program
            .eval(&mut st, &REWARD_VARS.map(|var| var.value(s)));
        if st.repaired > 0 {
            self.repaired.fetch_add(st.repaired, Ordering::Relaxed);
        }
        v
    }

    fn describe(&self) -> String {
        self.program.source().to_string()
    }

    fn repaired(&self) -> u64 {
        self.repaired.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_program_is_the_program_of_the_default_penalties() {
        assert_eq!(default_reward_program(2.0, 50.0), DEFAULT_REWARD_PROGRAM);
    }

    #[test]
    fn the_default_reward_program_equals_the_default_reward() {
        let r = RewardModule::plain().reward();
        let d = serl_env::DefaultReward {
            inventory_penalty: 2.0,
            terminal_penalty: 50.0,
        };
        for (inv, done) in [(0.5, false), (0.2, true), (0.0, true)] {
            let s = StepInfo {
                step_pa: 1.5,
                inventory_left: inv,
                steps: 13,
                done,
                ..Default::default()
            };
            assert!((r.reward(&s) - d.reward(&s)).abs() < 1e-12);
        }
    }

    #[test]
    fn a_reward_that_reads_no_state_is_refused_with_its_reason() {
        for (src, why) in [
            ("03.2223", "reads no variable"),
            ("2 * steps + 1", "reads only steps"),
            (
                "step_pa - step_pa + 4",
                "reads step_pa, but they cancel out",
            ),
        ] {
            let e = RewardModule::compile(src)
                .unwrap()
                .check_reads_state()
                .unwrap_err();
            assert!(e.message.contains(why), "{src}: {}", e.message);
            assert!(
                e.message.contains("teaches the policy nothing"),
                "{}",
                e.message
            );
        }
        for src in [
            DEFAULT_REWARD_PROGRAM,
            "twap_gain",
            "done * step_pa",
            "fill_qty / steps",
        ] {
            RewardModule::compile(src)
                .unwrap()
                .check_reads_state()
                .unwrap();
        }
        // Without a plan module its variables are 0 on every step.
        let subgoal = RewardModule::compile("subgoal_hit").unwrap();
        subgoal.check_reads_state().unwrap();
        let e = subgoal.check_reads_state_in(false).unwrap_err();
        assert!(e.message.contains("without a plan module"), "{}", e.message);
        // A division by zero on every step is left to the smoke test, which
        // counts the steps it repaired.
        let zero = RewardModule::compile("step_pa / (done - done)").unwrap();
        zero.check_reads_state().unwrap();
    }

    #[test]
    fn each_variable_reads_its_own_field() {
        let s = StepInfo {
            step_pa: 1.0,
            fill_frac: 2.0,
            fill_price: 3.0,
            step_bench: 4.0,
            timing_bps: 5.0,
            twap_gain_bps: 6.0,
            spread_bps: 7.0,
            time_left: 8.0,
            inventory_left: 9.0,
            volatility_bps: 10.0,
            volume: 11.0,
            steps: 12,
            done: true,
            spread_captured_bps: 14.0,
            adverse_bps: 15.0,
            plan_gap: 16.0,
            subgoal_hit: 17.0,
        };
        for (k, var) in REWARD_VARS.iter().enumerate() {
            let r = RewardModule::compile(var.name).unwrap().reward();
            let want = if var.name == "done" {
                1.0
            } else {
                k as f64 + 1.0
            };
            assert_eq!(r.reward(&s), want, "{}", var.name);
        }
    }
}
