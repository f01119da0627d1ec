//! What the subcommands share on their command lines: the value types of
//! flags that several take, and the checks of their values.

use clap::ValueEnum;
use serl_cluster::EngineKind;
use serl_study::backtest::EnvChoice;
use serl_study::LlmChoice;

/// Who runs the tasks (`--engine`).
#[derive(Clone, Copy, ValueEnum, Debug)]
pub enum EngineChoice {
    Local,
    Slurm,
    Hyperqueue,
    Kubernetes,
}

impl From<EngineChoice> for EngineKind {
    fn from(e: EngineChoice) -> Self {
        match e {
            EngineChoice::Local => EngineKind::Local,
            EngineChoice::Slurm => EngineKind::Slurm,
            EngineChoice::Hyperqueue => EngineKind::Hyperqueue,
            EngineChoice::Kubernetes => EngineKind::Kubernetes,
        }
    }
}

/// The designer (`--llm`).
#[derive(Clone, Copy, ValueEnum, Debug)]
pub enum LlmArg {
    Builtin,
    Openai,
    Ollama,
    /// The embedded GGUF model of `[llm.local]`.
    Local,
    Replay,
    /// No model: each module drawn at random from its own grammar (the
    /// random-search control).
    Grammar,
}

impl From<LlmArg> for LlmChoice {
    fn from(l: LlmArg) -> Self {
        match l {
            LlmArg::Builtin => LlmChoice::Builtin,
            LlmArg::Openai => LlmChoice::Openai,
            LlmArg::Ollama => LlmChoice::Ollama,
            LlmArg::Local => LlmChoice::Local,
            LlmArg::Replay => LlmChoice::Replay,
            LlmArg::Grammar => LlmChoice::Grammar,
        }
    }
}

/// Where the orders play (`--env`).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Debug)]
pub enum EnvArg {
    Static,
    Dynamic,
    /// Static and dynamic.
    Both,
    /// The LOBSTER days' real queue (with --lobster).
    Lobster,
    /// Static, dynamic and the LOBSTER queue (with --lobster).
    All,
}

impl From<EnvArg> for EnvChoice {
    fn from(e: EnvArg) -> Self {
        match e {
            EnvArg::Static => EnvChoice::Static,
            EnvArg::Dynamic => EnvChoice::Dynamic,
            EnvArg::Both => EnvChoice::Both,
            EnvArg::Lobster => EnvChoice::Lobster,
            EnvArg::All => EnvChoice::All,
        }
    }
}

/// The value of a flag that must be a positive number. Such a flag also
/// has `allow_negative_numbers`, so that `--qty-adv -1` reaches this check
/// and is told what is wrong, rather than being read as an unknown flag.
pub fn positive(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        Ok(_) => Err(format!("must be positive, got {s}")),
        Err(_) => Err(format!("`{s}` is not a number")),
    }
}

/// A count given on the command line: 1 or more, so that `--seeds 0` or
/// `--n 0` is refused by name instead of running nothing and reporting
/// statistics over it.
pub fn at_least_one<T: std::str::FromStr + PartialOrd + From<u8>>(
    s: &str,
) -> std::result::Result<T, String> {
    match s.parse::<T>() {
        Ok(v) if v >= T::from(1) => Ok(v),
        Ok(_) => Err(format!("must be 1 or more, got {s}")),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}

/// The designable modules' names, in `ModuleKind::ALL`'s order.
pub fn module_names() -> Vec<&'static str> {
    serl_design::ModuleKind::ALL
        .into_iter()
        .map(serl_design::ModuleKind::name)
        .collect()
}

/// Says a warning on stderr at once (what a load left out, a team played
/// with another shape than it trained with).
pub fn warn(w: &str) {
    eprintln!("warning: {w}");
}

/// Minutes after 09:30 of an `HH:MM` time of the session.
pub fn parse_clock(s: &str) -> Result<usize, String> {
    let (h, m) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}`: give a time as HH:MM"))?;
    let (h, m): (usize, usize) = (
        h.parse()
            .map_err(|_| format!("`{s}`: hours are not a number"))?,
        m.parse()
            .map_err(|_| format!("`{s}`: minutes are not a number"))?,
    );
    let at = h * 60 + m;
    if m >= 60 || !(9 * 60 + 30..=16 * 60).contains(&at) {
        return Err(format!("`{s}`: give a time of the session, 09:30 to 16:00"));
    }
    Ok(at - (9 * 60 + 30))
}
