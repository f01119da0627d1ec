//! Rewards: a pluggable interface, because the LLM designs them later.

/// What happened in one decision step: the variables a reward may use.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepInfo {
    /// Shares filled this step, as a fraction of the order.
    pub fill_frac: f64,
    /// Average fill price this step (0 when nothing filled).
    pub fill_price: f64,
    /// Mean minute price over the step: the step's benchmark.
    pub step_bench: f64,
    /// How much better the step's benchmark is than the price when the
    /// order arrived, for the order's side, bps (a buy gains when prices
    /// fall). `step_pa` compares fills with their own step and so cannot
    /// see timing; this and `twap_gain_bps` can.
    pub timing_bps: f64,
    /// This step's share of the gain over an even (TWAP) schedule, bps of
    /// the arrival price: how far behind that schedule the order was before
    /// the step, times how far the benchmark moved in the order's favour
    /// since the last step (a buy that is behind gains when prices fall).
    /// Summed over a fully executed episode it is the timing gain over TWAP
    /// (the spread paid aside, which differs from bar to bar where there
    /// are quotes). Each step carries one step's price move, which makes it
    /// a far less noisy learning signal than anything built on
    /// `timing_bps`, whose every step carries the whole move since arrival.
    pub twap_gain_bps: f64,
    /// PA of this step's fills against the step benchmark, in bps,
    /// weighted by `fill_frac` (sums to about the episode PA).
    pub step_pa: f64,
    /// The session's estimated bid-ask spread, bps (one figure for the
    /// day, the same every step).
    pub spread_bps: f64,
    /// After this step.
    pub time_left: f64,
    /// After this step, as a fraction of the order.
    pub inventory_left: f64,
    /// 1-minute volatility, bps.
    pub volatility_bps: f64,
    /// Market volume this step ÷ average minute volume × minutes.
    pub volume: f64,
    /// Spread captured by this step's fills, bps of the mid when each
    /// order was sent, weighted by the share of the order filled (minus
    /// half the spread on what crossed).
    pub spread_captured_bps: f64,
    /// The mid's move against the order from each of this step's passive
    /// fills to the step's end, bps, weighted by the share of the order
    /// filled: the adverse selection of resting orders.
    pub adverse_bps: f64,
    /// Share of the order held after this step minus an execution plan's
    /// target then (set by a planned reward, `serl_design::PlannedReward`;
    /// 0 without a plan).
    pub plan_gap: f64,
    /// 1 when this step reached one of the plan's checkpoints within its
    /// tolerance, else 0 (0 without a plan).
    pub subgoal_hit: f64,
    /// Number of decision steps in the episode.
    pub steps: usize,
    /// Whether this was the episode's last step.
    pub done: bool,
}

/// Turns what happened in a step into the learning signal. Episodes sum
/// it into `ExecutionOutcome::reward`; the designer's reward programs
/// (`serl_design::ProgramReward`) implement it too.
pub trait Reward: Send + Sync {
    /// The reward for one step.
    fn reward(&self, s: &StepInfo) -> f64;
    /// The reward as a formula, for reports and provenance.
    fn describe(&self) -> String;
    /// NaN, ±∞ and division-by-zero values replaced so far (a designed
    /// reward program repairs them; a written-out reward has none).
    fn repaired(&self) -> u64 {
        0
    }
}

/// Per-step PA of the filled quantity minus a quadratic inventory penalty,
/// and a larger one on what is left at the end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DefaultReward {
    /// Weight of the per-step penalty, bps: each step loses
    /// `inventory_penalty × inventory_left² / steps`.
    pub inventory_penalty: f64,
    /// Weight of the end-of-episode penalty, bps: the last step also loses
    /// `terminal_penalty × inventory_left²`.
    pub terminal_penalty: f64,
}

impl Reward for DefaultReward {
    fn reward(&self, s: &StepInfo) -> f64 {
        let inv2 = s.inventory_left * s.inventory_left;
        let mut r = s.step_pa - self.inventory_penalty * inv2 / s.steps.max(1) as f64;
        if s.done {
            r -= self.terminal_penalty * inv2;
        }
        r
    }

    fn describe(&self) -> String {
        format!(
            "step_pa - {} * inventory_left^2 / steps - {} * inventory_left^2 at the end",
            self.inventory_penalty, self.terminal_penalty
        )
    }
}
