//! The six modules, their validation, and the reward and communication
//! runtimes.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serl_env::{Reward, StepInfo};
use serl_expr::{Program, VarSet};
use serl_market::{MarketConfig, Scenario};
use serl_train::features::{FeatureDef, FeatureSet, MAX_FEATURES};
use serl_train::NetworkSpec;

/// Which module a text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModuleKind {
    Reward,
    State,
    Architecture,
    Imagination,
    Profiling,
    Communication,
}

impl ModuleKind {
    pub const ALL: [ModuleKind; 6] = [
        ModuleKind::Reward,
        ModuleKind::State,
        ModuleKind::Architecture,
        ModuleKind::Imagination,
        ModuleKind::Profiling,
        ModuleKind::Communication,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ModuleKind::Reward => "reward",
            ModuleKind::State => "state",
            ModuleKind::Architecture => "architecture",
            ModuleKind::Imagination => "imagination",
            ModuleKind::Profiling => "profiling",
            ModuleKind::Communication => "communication",
        }
    }

    pub fn parse_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Written as JSON (all but the reward, which is a program).
    pub fn is_json(self) -> bool {
        self != ModuleKind::Reward
    }
}

/// Why a module was rejected: what the designer is told.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{kind} module: {message}")]
pub struct ModuleError {
    pub kind: &'static str,
    pub message: String,
}

fn err(kind: ModuleKind, message: impl Into<String>) -> ModuleError {
    ModuleError {
        kind: kind.name(),
        message: message.into(),
    }
}

/// The per-step variables a reward program may read, documented for the
/// prompts, in the order [`ProgramReward`] passes them.
pub const REWARD_VARS: [(&str, &str); 13] = [
    (
        "step_pa",
        "this step's price advantage against the step benchmark, bps, weighted by the share filled",
    ),
    (
        "fill_qty",
        "shares filled this step, as a fraction of the order",
    ),
    (
        "fill_price",
        "average fill price this step (0 when nothing filled)",
    ),
    ("bench_price", "mean market price over the step"),
    (
        "timing",
        "how much better the step's mean price is than the price at the order's arrival, for the order's side, bps",
    ),
    (
        "twap_gain",
        "this step's share of the gain over an even (TWAP) schedule, bps: how far behind that schedule the order was before the step times how far prices moved in its favour since the last step; sums to the episode's timing gain over TWAP",
    ),
    ("spread_bps", "quoted spread, bps"),
    (
        "time_left",
        "share of the window left after this step, 1 to 0",
    ),
    (
        "remaining_inv",
        "share of the order still to trade after this step, 1 to 0",
    ),
    ("volatility", "1-minute volatility, bps"),
    (
        "volume",
        "market volume this step relative to an average step",
    ),
    ("steps", "decision steps in the episode"),
    ("done", "1 on the last step, else 0"),
];

/// `{name, doc}` of each reward variable, for the prompts.
pub fn reward_vars_doc() -> Vec<serde_json::Value> {
    REWARD_VARS
        .iter()
        .map(|(n, d)| serde_json::json!({"name": n, "doc": d}))
        .collect()
}

pub fn reward_vars() -> VarSet {
    VarSet::new(&REWARD_VARS.map(|v| v.0))
}

fn reward_values(s: &StepInfo) -> [f64; 13] {
    [
        s.step_pa,
        s.fill_frac,
        s.fill_price,
        s.step_bench,
        s.timing_bps,
        s.twap_gain_bps,
        s.spread_bps,
        s.time_left,
        s.inventory_left,
        s.volatility_bps,
        s.volume,
        s.steps as f64,
        if s.done { 1.0 } else { 0.0 },
    ]
}

/// A reward program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RewardModule {
    pub program: String,
}

/// A reward program as the environment's [`Reward`]. Rewards are per
/// step, so they may not use window functions.
#[derive(Debug)]
pub struct ProgramReward {
    program: Program,
    repaired: AtomicU64,
}

impl ProgramReward {
    pub fn new(m: &RewardModule) -> Result<Self, ModuleError> {
        let program = Program::compile(&m.program, &reward_vars())
            .map_err(|e| err(ModuleKind::Reward, e.to_string()))?;
        if program.has_windows() {
            return Err(err(ModuleKind::Reward, "a reward reads only this step's variables; window functions belong in state features"));
        }
        Ok(ProgramReward {
            program,
            repaired: AtomicU64::new(0),
        })
    }

    /// NaN, ±∞ and division-by-zero values replaced so far.
    pub fn repaired(&self) -> u64 {
        self.repaired.load(Ordering::Relaxed)
    }

    pub fn program(&self) -> &Program {
        &self.program
    }
}

impl Reward for ProgramReward {
    fn reward(&self, s: &StepInfo) -> f64 {
        let mut st = self.program.new_state();
        let v = self.program.eval(&mut st, &reward_values(s));
        if st.repaired > 0 {
            self.repaired.fetch_add(st.repaired, Ordering::Relaxed);
        }
        v
    }

    fn describe(&self) -> String {
        self.program.source().to_string()
    }
}

/// Designed state features.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateModule {
    pub features: Vec<FeatureDef>,
}

/// Synthetic market days to train on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImaginationModule {
    pub scenarios: Vec<Scenario>,
    /// Share of the dynamic environments that play them.
    #[serde(default = "half")]
    pub share: f64,
    /// Share of the static replay's episodes played on a real day reshaped
    /// by one of the scenarios (its drift, jumps, volatility and liquidity).
    #[serde(default)]
    pub replay_share: f64,
}

fn half() -> f64 {
    0.5
}

impl ImaginationModule {
    /// The numbers the low-level DEK tunes: the two shares, then each
    /// scenario's volatility multiplier, drift and liquidity multiplier.
    pub fn constants(&self) -> Vec<f64> {
        let mut c = vec![self.share, self.replay_share];
        for s in &self.scenarios {
            c.extend([s.volatility_mult, s.drift_bps, s.liquidity_mult]);
        }
        c
    }

    /// The module with `constants`, in the order `constants` lists them.
    /// Shares are clamped to [0, 1]; any other value out of its range is
    /// the validation error that names it.
    pub fn with_constants(&self, constants: &[f64]) -> Result<Self, ModuleError> {
        let want = 2 + 3 * self.scenarios.len();
        if constants.len() != want {
            return Err(err(
                ModuleKind::Imagination,
                format!("{} constants given for {want}", constants.len()),
            ));
        }
        let mut m = self.clone();
        m.share = constants[0].clamp(0.0, 1.0);
        m.replay_share = constants[1].clamp(0.0, 1.0);
        for (s, c) in m.scenarios.iter_mut().zip(constants[2..].chunks(3)) {
            (s.volatility_mult, s.drift_bps, s.liquidity_mult) = (c[0], c[1], c[2]);
        }
        Module::Imagination(m.clone()).validate()?;
        Ok(m)
    }
}

/// The market's background population.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfilingModule {
    pub market: Box<MarketConfig>,
}

pub use serl_train::team::{Aggregate, Communication};

/// A validated module.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "module")]
pub enum Module {
    Reward(RewardModule),
    State(StateModule),
    Architecture(NetworkSpec),
    Imagination(ImaginationModule),
    Profiling(ProfilingModule),
    Communication(Communication),
}

const MAX_SCENARIOS: usize = 8;
const MAX_AGENTS: usize = 2_000;

fn json<T: for<'de> Deserialize<'de>>(kind: ModuleKind, text: &str) -> Result<T, ModuleError> {
    serde_json::from_str(text).map_err(|e| {
        err(
            kind,
            format!(
                "invalid JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            ),
        )
    })
}

fn in_range(kind: ModuleKind, field: &str, v: f64, lo: f64, hi: f64) -> Result<(), ModuleError> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err(err(kind, format!("{field} = {v} is outside [{lo}, {hi}]")))
    }
}

impl Module {
    pub fn kind(&self) -> ModuleKind {
        match self {
            Module::Reward(_) => ModuleKind::Reward,
            Module::State(_) => ModuleKind::State,
            Module::Architecture(_) => ModuleKind::Architecture,
            Module::Imagination(_) => ModuleKind::Imagination,
            Module::Profiling(_) => ModuleKind::Profiling,
            Module::Communication(_) => ModuleKind::Communication,
        }
    }

    /// Parses and validates a module's text (already extracted from a
    /// reply), with a message precise enough to send back to the designer.
    pub fn parse(kind: ModuleKind, text: &str) -> Result<Module, ModuleError> {
        let m = match kind {
            ModuleKind::Reward => Module::Reward(RewardModule {
                program: text.trim().to_string(),
            }),
            ModuleKind::State => Module::State(json(kind, text)?),
            ModuleKind::Architecture => Module::Architecture(json(kind, text)?),
            ModuleKind::Imagination => Module::Imagination(json(kind, text)?),
            ModuleKind::Profiling => Module::Profiling(json(kind, text)?),
            ModuleKind::Communication => Module::Communication(json(kind, text)?),
        };
        m.validate()?;
        Ok(m)
    }

    pub fn validate(&self) -> Result<(), ModuleError> {
        let kind = self.kind();
        match self {
            Module::Reward(r) => ProgramReward::new(r).map(|_| ()),
            Module::State(s) => {
                if s.features.is_empty() {
                    return Err(err(
                        kind,
                        "no features; give at least one {\"name\", \"program\"}",
                    ));
                }
                features(kind, &s.features)
            }
            Module::Architecture(spec) => spec
                .validate(serl_env::OBS_DIM)
                .map(|_| ())
                .map_err(|e| err(kind, e.to_string())),
            Module::Imagination(m) => {
                if m.scenarios.is_empty() || m.scenarios.len() > MAX_SCENARIOS {
                    return Err(err(
                        kind,
                        format!(
                            "give 1 to {MAX_SCENARIOS} scenarios, not {}",
                            m.scenarios.len()
                        ),
                    ));
                }
                in_range(kind, "share", m.share, 0.0, 1.0)?;
                in_range(kind, "replay_share", m.replay_share, 0.0, 1.0)?;
                for (i, s) in m.scenarios.iter().enumerate() {
                    in_range(
                        kind,
                        &format!("scenarios[{i}].volatility_mult"),
                        s.volatility_mult,
                        0.1,
                        5.0,
                    )?;
                    in_range(
                        kind,
                        &format!("scenarios[{i}].drift_bps"),
                        s.drift_bps,
                        -500.0,
                        500.0,
                    )?;
                    in_range(
                        kind,
                        &format!("scenarios[{i}].liquidity_mult"),
                        s.liquidity_mult,
                        0.05,
                        10.0,
                    )?;
                    if s.jumps.len() > 10 {
                        return Err(err(kind, format!("scenarios[{i}].jumps: at most 10")));
                    }
                    for (j, (minute, size)) in s.jumps.iter().enumerate() {
                        in_range(
                            kind,
                            &format!("scenarios[{i}].jumps[{j}] minute"),
                            *minute as f64,
                            0.0,
                            390.0,
                        )?;
                        in_range(
                            kind,
                            &format!("scenarios[{i}].jumps[{j}] size"),
                            *size,
                            -1000.0,
                            1000.0,
                        )?;
                    }
                }
                Ok(())
            }
            Module::Profiling(p) => {
                let m = &p.market;
                let agents = m.noise_agents
                    + m.value_agents
                    + m.momentum_agents
                    + m.informed_agents
                    + m.market_makers;
                if agents == 0 || agents > MAX_AGENTS {
                    return Err(err(
                        kind,
                        format!("{agents} agents; give 1 to {MAX_AGENTS}"),
                    ));
                }
                if m.market_makers == 0 {
                    return Err(err(
                        kind,
                        "market_makers = 0 leaves the book without liquidity; give at least 1",
                    ));
                }
                in_range(
                    kind,
                    "market.market_order_share",
                    m.market_order_share,
                    0.0,
                    1.0,
                )?;
                in_range(kind, "market.cancel_share", m.cancel_share, 0.0, 1.0)?;
                in_range(kind, "market.order_size", m.order_size, 1.0, 1e6)?;
                in_range(kind, "market.mm_levels", m.mm_levels as f64, 1.0, 20.0)?;
                in_range(
                    kind,
                    "market.mm_interval_ms",
                    m.mm_interval_ms as f64,
                    10.0,
                    600_000.0,
                )?;
                in_range(kind, "market.mm_depth_share", m.mm_depth_share, 0.0, 1.0)?;
                in_range(
                    kind,
                    "market.value_rate_per_min",
                    m.value_rate_per_min,
                    0.0,
                    60.0,
                )?;
                in_range(kind, "market.latency_us", m.latency_us as f64, 0.0, 1e7)?;
                for (field, value, hi) in [
                    ("momentum_rate_per_min", m.momentum_rate_per_min, 60.0),
                    ("momentum_threshold_bps", m.momentum_threshold_bps, 1e4),
                    ("informed_rate_per_min", m.informed_rate_per_min, 60.0),
                    ("informed_horizon_min", m.informed_horizon_min, 390.0),
                    ("informed_noise_bps", m.informed_noise_bps, 1e4),
                    ("informed_size_mult", m.informed_size_mult, 100.0),
                    ("flow_impact", m.flow_impact, 10.0),
                    ("flow_memory_min", m.flow_memory_min, 390.0),
                    ("mm_fundamental_weight", m.mm_fundamental_weight, 1.0),
                    ("noise_fundamental_weight", m.noise_fundamental_weight, 1.0),
                ] {
                    in_range(kind, &format!("market.{field}"), value, 0.0, hi)?;
                }
                in_range(
                    kind,
                    "market.momentum_lookback_min",
                    m.momentum_lookback_min as f64,
                    1.0,
                    120.0,
                )?;
                Module::Imagination(ImaginationModule {
                    scenarios: vec![m.scenario.clone()],
                    share: 0.5,
                    replay_share: 0.0,
                })
                .validate()
                .map_err(|e| err(kind, e.message))
            }
            Module::Communication(c) => {
                if c.broadcast.is_empty() || c.broadcast.len() > 8 {
                    return Err(err(
                        kind,
                        format!("broadcast 1 to 8 values, not {}", c.broadcast.len()),
                    ));
                }
                features(kind, &c.broadcast)
            }
        }
    }

    /// The module as the text a designer writes (a program or JSON).
    pub fn text(&self) -> String {
        let j = |v: serde_json::Result<String>| v.unwrap_or_default();
        match self {
            Module::Reward(r) => r.program.clone(),
            Module::State(s) => j(serde_json::to_string_pretty(s)),
            Module::Architecture(s) => j(serde_json::to_string_pretty(s)),
            Module::Imagination(s) => j(serde_json::to_string_pretty(s)),
            Module::Profiling(s) => j(serde_json::to_string_pretty(s)),
            Module::Communication(s) => j(serde_json::to_string_pretty(s)),
        }
    }
}

fn features(kind: ModuleKind, defs: &[FeatureDef]) -> Result<(), ModuleError> {
    if defs.len() > MAX_FEATURES {
        return Err(err(
            kind,
            format!("{} features; at most {MAX_FEATURES}", defs.len()),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for d in defs {
        let ok = !d.name.is_empty()
            && d.name.len() <= 40
            && d.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(err(
                kind,
                format!(
                    "feature name `{}` must be 1 to 40 letters, digits or underscores",
                    d.name
                ),
            ));
        }
        if !seen.insert(&d.name) {
            return Err(err(kind, format!("feature `{}` is defined twice", d.name)));
        }
    }
    FeatureSet::compile(defs, &serl_env::obs::feature_names())
        .map(|_| ())
        .map_err(|e| err(kind, e.to_string()))
}

/// A candidate algorithm: one module of each kind the scenario needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Design {
    pub reward: RewardModule,
    pub state: StateModule,
    pub architecture: NetworkSpec,
    pub imagination: ImaginationModule,
    #[serde(default)]
    pub profiling: Option<ProfilingModule>,
    #[serde(default)]
    pub communication: Option<Communication>,
}

impl Design {
    /// The default design: the environment's default reward, no extra
    /// features, the MLP [64, 64], no imagined days ("plain PPO").
    pub fn baseline() -> Self {
        Design {
            reward: RewardModule {
                program: "step_pa - 2 * remaining_inv^2 / steps - 50 * done * remaining_inv^2"
                    .into(),
            },
            state: StateModule {
                features: Vec::new(),
            },
            architecture: NetworkSpec::default(),
            imagination: ImaginationModule {
                scenarios: Vec::new(),
                share: 0.0,
                replay_share: 0.0,
            },
            profiling: None,
            communication: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baseline_reward_program_equals_the_default_reward() {
        let r = ProgramReward::new(&Design::baseline().reward).unwrap();
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
    fn attention_weighs_similar_messages_more() {
        let c = Communication {
            broadcast: vec![FeatureDef {
                name: "a".into(),
                program: "time_left".into(),
            }],
            aggregate: Aggregate::Attention,
        };
        let msgs = vec![vec![2.0], vec![2.0], vec![-2.0]];
        let got = c.aggregate(&msgs, 0);
        assert!(got[0] > 1.9, "{got:?}");
        let mean = Communication {
            aggregate: Aggregate::Mean,
            ..c
        };
        assert_eq!(mean.aggregate(&msgs, 0), vec![0.0]);
    }

    #[test]
    fn imagination_constants_round_trip_and_shares_stay_shares() {
        let m = ImaginationModule {
            scenarios: vec![Scenario {
                volatility_mult: 1.2,
                drift_bps: -80.0,
                liquidity_mult: 0.9,
                jumps: vec![(60, 20.0)],
            }],
            share: 0.5,
            replay_share: 0.6,
        };
        assert_eq!(m.constants(), vec![0.5, 0.6, 1.2, -80.0, 0.9]);
        assert_eq!(m.with_constants(&m.constants()).unwrap(), m);

        let tuned = m.with_constants(&[0.4, 1.3, 1.5, -95.0, 1.1]).unwrap();
        assert_eq!(tuned.replay_share, 1.0, "a share above 1 is clamped");
        assert_eq!(tuned.scenarios[0].drift_bps, -95.0);
        assert_eq!(tuned.scenarios[0].jumps, m.scenarios[0].jumps);

        let e = m.with_constants(&[0.5, 0.6, 9.0, -80.0, 0.9]).unwrap_err();
        assert!(
            e.to_string().contains("scenarios[0].volatility_mult"),
            "{e}"
        );
        assert!(m.with_constants(&[0.5]).is_err());
    }
}
