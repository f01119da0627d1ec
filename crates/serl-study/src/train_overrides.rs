//! What `serl train`'s command line may set over a config, and the
//! config a run resolves to: a new run's, or a resumed run's own (which
//! refuses, by name, any setting the command line would change).

use std::path::{Path, PathBuf};

use serl_env::TeamMode;
use serl_train::{Algo, Critic, DeviceChoice, HybridMode, TeamConfig, TrainConfig};

use crate::config::{read_toml, Base, TrainFile};
use crate::error::Result;

/// The learner asked for: one agent's learner from the registry
/// (`serl_train::Algo`), or a team's, MAPPO (a centralised critic) or
/// independent PPO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learner {
    /// One agent, with any registered learner.
    Single(Algo),
    /// MAPPO: a team with a centralised critic.
    Mappo,
    /// Independent PPO: a team, each member its own critic.
    Ippo,
}

impl Learner {
    /// Every name `--algo` takes: the registry's learners, then the teams'.
    pub fn names() -> Vec<&'static str> {
        let mut names = Algo::keys();
        names.extend(["mappo", "ippo"]);
        names
    }
}

impl std::str::FromStr for Learner {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "mappo" => Ok(Learner::Mappo),
            "ippo" => Ok(Learner::Ippo),
            _ => s.parse::<Algo>().map(Learner::Single).map_err(|_| {
                format!(
                    "no learner is called `{s}`: one of {}",
                    Learner::names().join(", ")
                )
            }),
        }
    }
}

/// The settings a command line gives over a config.
#[derive(Clone, Debug, Default)]
pub struct TrainOverrides {
    /// `--algo`: the learner.
    pub algo: Option<Learner>,
    /// Learning agents per parent order (a team from 2).
    pub agents: Option<usize>,
    /// A team's mode.
    pub team_mode: Option<TeamMode>,
    /// Train the team without messages.
    pub no_communication: bool,
    /// Environment steps to train for.
    pub total_steps: Option<usize>,
    /// The training's seed.
    pub seed: Option<u64>,
    /// Minutes between decisions.
    pub decision_minutes: Option<u16>,
    /// The hybrid weighting, or a single environment for ablations.
    pub hybrid: Option<HybridMode>,
    /// Where tensors live.
    pub device: Option<DeviceChoice>,
    /// Order size as a fraction of ADV.
    pub qty_adv: Option<f64>,
}

/// Where a run's config comes from.
pub struct TrainRequest<'a> {
    /// The run directory.
    pub out: &'a Path,
    /// Continue the run in `out` with its config.
    pub resume: bool,
    /// A config file (a new run's, or what a resumed run is compared with).
    pub config: Option<&'a Path>,
    /// The bar data (may change on resume).
    pub data: Option<PathBuf>,
    /// The command line's settings over the config.
    pub overrides: &'a TrainOverrides,
}

/// The config the run of `r` trains with.
pub fn resolve(r: &TrainRequest) -> Result<TrainFile> {
    let saved = r.out.join("train.toml");
    let mut cfg: TrainFile = if r.resume {
        if !saved.exists() {
            crate::bail!(
                "{} has no train.toml: it is not a run directory of `serl train`",
                r.out.display()
            );
        }
        read_toml(&saved)?
    } else {
        match r.config {
            Some(p) => TrainFile::read(p)?,
            None => TrainFile::default(),
        }
    };
    if let Some(d) = &r.data {
        cfg.data_path = Some(d.clone());
    }
    cfg.resolve_paths(Base::WorkingDir)?;
    let checked = if r.resume {
        Some(saved.as_path())
    } else {
        r.config
    };
    if let Some(p) = checked {
        crate::train::check_reward(&cfg, p)?;
    }
    if r.resume {
        refuse_changes_on_resume(r, &cfg)?;
        // The loop runs the updates from the checkpoint's up to the total,
        // and nothing else depends on it: a new total continues the run.
        if let Some(n) = r.overrides.total_steps {
            cfg.train.total_steps = n;
        }
        return Ok(cfg);
    }
    r.overrides.apply(&mut cfg)?;
    Ok(cfg)
}

/// A resumed run keeps the config it was started with (`OUT/train.toml`);
/// only its length (`--total-steps`) and the data's place may change. The
/// flags (and `--config`) are applied as a new run would apply them, and
/// any setting that would come out different is refused, named, rather
/// than ignored; flags that repeat the run's settings are fine.
fn refuse_changes_on_resume(r: &TrainRequest, saved: &TrainFile) -> Result<()> {
    let mut wanted = match r.config {
        Some(p) => TrainFile::read(p)?,
        None => saved.clone(),
    };
    wanted.data_path = saved.data_path.clone();
    wanted.paths_as_written = saved.paths_as_written.clone();
    r.overrides.apply(&mut wanted)?;
    wanted.train.total_steps = saved.train.total_steps;
    let changed = crate::config::differences(saved, &wanted)?;
    if changed.is_empty() {
        return Ok(());
    }
    crate::bail!(
        "a resumed run keeps the settings in {} (only --total-steps and --data may change): the command line would change {}",
        r.out.join("train.toml").display(),
        changed.join(", ")
    )
}

impl TrainOverrides {
    /// These settings over `cfg` (a new run's, or what a resumed run would
    /// become), validated.
    pub fn apply(&self, cfg: &mut TrainFile) -> Result<()> {
        self.apply_team(&mut cfg.train)?;
        if let Some(n) = self.total_steps {
            cfg.train.total_steps = n;
        }
        if let Some(s) = self.seed {
            cfg.train.seed = s;
        }
        if let Some(k) = self.decision_minutes {
            cfg.env.decision_minutes = k;
        }
        if let Some(q) = self.qty_adv {
            cfg.orders.quantity = serl_env::Quantity::AdvFraction(q);
        }
        if let Some(m) = self.hybrid {
            cfg.train.hybrid.mode = m;
        }
        if let Some(d) = self.device {
            cfg.train.device = d;
        }
        cfg.validate()
    }

    /// `--algo`, `--agents` and a team `--mode` on the config's `[train]`:
    /// MAPPO and IPPO train a team (4 agents unless the config or `--agents`
    /// says), whose scripted peers default to none.
    fn apply_team(&self, train: &mut TrainConfig) -> Result<()> {
        let critic = match self.algo {
            None => None,
            Some(Learner::Single(algo)) => {
                train.algo = algo;
                None
            }
            Some(Learner::Mappo) => Some(Critic::Centralized),
            Some(Learner::Ippo) => Some(Critic::Local),
        };
        let mode = self.team_mode;
        if self.no_communication {
            if let Some(t) = &mut train.team {
                t.communication = None;
            }
        }
        if self.agents == Some(1) {
            if critic.is_some() {
                crate::bail!(
                    "--agents 1 is a single agent: --algo mappo and ippo train a team of 2 to {}",
                    serl_env::MAX_AGENTS
                );
            }
            if let Some(t) = &mut train.team {
                t.agents = 1;
            }
            return Ok(());
        }
        let wants_team = critic.is_some() || self.agents.is_some_and(|n| n > 1) || mode.is_some();
        if !wants_team {
            return Ok(());
        }
        if train.algo != Algo::PPO {
            crate::bail!(
                "a team learns with PPO: use --algo mappo or --algo ippo, not {}",
                train.algo.key()
            );
        }
        let team = train.team.get_or_insert_with(|| TeamConfig {
            peers: 0,
            ..TeamConfig::default()
        });
        if let Some(c) = critic {
            team.critic = c;
        }
        if let Some(m) = mode {
            team.mode = m;
        }
        match self.agents {
            Some(n) => team.agents = n,
            None if team.agents < 2 => team.agents = 4,
            None => {}
        }
        if team.agents < 2 {
            crate::bail!(
                "--agents {}: a team has 2 to {} agents",
                team.agents,
                serl_env::MAX_AGENTS
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(o: TrainOverrides) -> Result<TrainFile> {
        let mut cfg = TrainFile::default();
        o.apply(&mut cfg)?;
        Ok(cfg)
    }

    #[test]
    fn every_name_of_algo_parses_and_an_unknown_one_lists_them() {
        assert_eq!("sac".parse(), Ok(Learner::Single("sac".parse().unwrap())));
        assert_eq!("ippo".parse(), Ok(Learner::Ippo));
        for name in Learner::names() {
            assert!(name.parse::<Learner>().is_ok(), "{name}");
        }
        assert_eq!(
            "td3".parse::<Learner>().unwrap_err(),
            "no learner is called `td3`: one of ppo, ddqn, sac, mappo, ippo"
        );
    }

    #[test]
    fn mappo_trains_a_team_of_four_with_a_centralised_critic() {
        let cfg = applied(TrainOverrides {
            algo: Some(Learner::Mappo),
            ..TrainOverrides::default()
        })
        .unwrap();
        let team = cfg.train.team.expect("a team");
        assert_eq!((team.agents, team.critic), (4, Critic::Centralized));
    }

    #[test]
    fn a_team_of_one_and_a_ddqn_team_are_refused() {
        let one = applied(TrainOverrides {
            algo: Some(Learner::Ippo),
            agents: Some(1),
            ..TrainOverrides::default()
        });
        assert!(one.unwrap_err().to_string().contains("single agent"));
        let ddqn = applied(TrainOverrides {
            algo: Some(Learner::Single(Algo::DDQN)),
            agents: Some(3),
            ..TrainOverrides::default()
        });
        assert!(ddqn.unwrap_err().to_string().contains("learns with PPO"));
    }
}
