//! What the subcommands share on their command lines: the value types of
//! flags that several take, the checks of their values, and the exit code
//! of a command that reports a check.

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use serde::de::value::StrDeserializer;
use serde::de::DeserializeOwned;
use serl_study::rundir::RunKind;

/// A flag whose values are a library enum's names (`NAMES`, its config
/// names): `--help` lists them, with `-` for `_` as flags spell words
/// (`static-only`; the config's `static_only` is read too), and a value is
/// read as the config reads it, so the binary keeps no copy of the enum to
/// add a variant to.
pub fn named<T>(names: &'static [&'static str]) -> impl TypedValueParser<Value = T>
where
    T: DeserializeOwned + Clone + Send + Sync + 'static,
{
    let values = names.iter().map(|&name| {
        if name.contains('_') {
            // Built once, with the command line: a few bytes kept.
            let flag: &'static str = Box::leak(name.replace('_', "-").into_boxed_str());
            PossibleValue::new(flag).alias(name)
        } else {
            PossibleValue::new(name)
        }
    });
    PossibleValuesParser::new(values).try_map(|value| {
        let name = value.replace('-', "_");
        T::deserialize(StrDeserializer::<serde::de::value::Error>::new(&name))
    })
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

/// The exit code of a command that reports a check (a validation, a
/// replay, a run check): 0 when it passed, 1 when it did not (2 is an
/// error's).
pub fn check_exit(passed: bool) -> std::process::ExitCode {
    if passed {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    }
}

/// The folder a command writes, and whether it may write over what serl
/// wrote there before: one flag pair, so that every command refuses and
/// forces alike. A command says what its folder holds with
/// `#[command(mut_arg("out", ...))]`.
#[derive(clap::Args)]
pub struct OutDir {
    /// The folder to write.
    #[arg(long)]
    pub out: PathBuf,
    /// Write over what serl wrote in --out before: its files are removed
    /// first (a folder serl did not write is refused even so).
    #[arg(long)]
    pub force: bool,
}

impl OutDir {
    /// Claims the folder for a run of `kind` (`resume`: going on with
    /// the one there).
    pub fn claim(&self, kind: RunKind, resume: bool) -> anyhow::Result<()> {
        serl_study::process::claim_run(&self.out, kind, (self.force, resume))?;
        Ok(())
    }
}
