//! `serl.backtest`: serl's backtester (the code `serl backtest` runs) with
//! Python callables among the strategies. A callable sees the observation
//! the environments give (designed features included) and answers with an
//! action of the environments' action space, so an agent trained on
//! `serl.ExecutionEnv` plays here as it learned.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serl_env::{ChildOrder, Decision, EnvConfig, ParentOrder, SessionView, Strategy};
use serl_eval::StrategyFactory;
use serl_study::backtest::{replay_factories, BacktestData, EnvChoice, PlayedAt};
use serl_train::DecisionObserver;

use crate::error::{chain, Fail};
use crate::setup::{self, Actions, ConfigSource};

/// What a Python policy needs to see and act as in the environments.
#[derive(Clone)]
struct PolicyShape {
    actions: Actions,
    features: serl_design::FeatureSet,
    message_dims: usize,
    obs_dim: usize,
}

/// A Python callable as a backtest strategy.
struct PyStrategy {
    label: String,
    policy: Arc<Py<PyAny>>,
    shape: PolicyShape,
    observer: DecisionObserver,
    obs: Vec<f32>,
    /// The first error a call raised; the backtest stops asking.
    failed: Arc<Mutex<Option<PyErr>>>,
}

impl PyStrategy {
    fn call(&mut self, d: &Decision) -> Result<(f64, u8), PyErr> {
        self.observer.observe(d, &mut self.obs);
        Python::attach(|py| {
            let obs = PyArray1::from_slice(py, &self.obs);
            let ctx = PyDict::new(py);
            ctx.set_item("step", d.step)?;
            ctx.set_item("steps", d.steps)?;
            ctx.set_item("remaining", d.remaining / d.qty.max(f64::MIN_POSITIVE))?;
            ctx.set_item("order_id", d.order.id)?;
            ctx.set_item("symbol", &*d.order.symbol)?;
            ctx.set_item("date", d.order.date.to_string())?;
            let answer = self.policy.call1(py, (obs, ctx))?;
            // A sequence first: numpy warns when a one-element array is
            // read as a number.
            let numbers: Vec<f64> = match answer.extract::<Vec<f64>>(py) {
                Ok(v) => v,
                Err(_) => answer.extract::<f64>(py).map(|x| vec![x]).map_err(|_| {
                    Fail::new(format!(
                        "policy {:?} answered {}: an action is a number, or a sequence of numbers (a share index and a placement index)",
                        self.label,
                        answer.bind(py).repr().map_or("?".into(), |r| r.to_string())
                    ))
                })?,
            };
            self.shape
                .actions
                .decode(&numbers)
                .map_err(|m| Fail::new(format!("policy {:?}: {m}", self.label)).into())
        })
    }
}

impl Strategy for PyStrategy {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn reset(&mut self, _view: &SessionView, _order: &ParentOrder, _env: &EnvConfig) {
        self.observer.reset();
    }

    fn act(&mut self, d: &Decision) -> f64 {
        self.order(d).action
    }

    fn order(&mut self, d: &Decision) -> ChildOrder {
        let stopped = self.failed.lock().map_or(true, |f| f.is_some());
        let (action, placement) = if stopped {
            (0.0, 0)
        } else {
            match self.call(d) {
                Ok(a) => a,
                Err(e) => {
                    if let Ok(mut slot) = self.failed.lock() {
                        slot.get_or_insert(e);
                    }
                    (0.0, 0)
                }
            }
        };
        let share = self.shape.actions.pace().share(
            action,
            d.remaining / d.qty.max(f64::MIN_POSITIVE),
            d.steps.saturating_sub(d.step),
        );
        ChildOrder {
            action: share,
            placement: self
                .shape
                .actions
                .placements()
                .get(usize::from(placement))
                .copied()
                .unwrap_or_default(),
            cross_first: 0.0,
        }
    }
}

fn python_factory(
    label: String,
    policy: Py<PyAny>,
    shape: &PolicyShape,
    failed: &Arc<Mutex<Option<PyErr>>>,
) -> StrategyFactory {
    let (policy, shape, failed) = (Arc::new(policy), shape.clone(), failed.clone());
    StrategyFactory {
        label: label.clone(),
        make: Box::new(move || {
            let observer = DecisionObserver::new(
                &shape.features,
                !shape.actions.placements().is_empty(),
                (shape.message_dims, false),
                shape.obs_dim,
            );
            Box::new(PyStrategy {
                label: label.clone(),
                policy: policy.clone(),
                observer,
                obs: vec![0.0; shape.obs_dim],
                shape: shape.clone(),
                failed: failed.clone(),
            })
        }),
    }
}

/// The action space and observation of Python policies under `config`:
/// a training config's (with `state`'s features), else shares in [0, 1]
/// over the environment's own columns.
fn policy_shape(
    config: &ConfigSource,
    state: Option<&std::path::Path>,
) -> Result<PolicyShape, Fail> {
    let mut train = if config.is_training()? {
        config.train_file()?.train
    } else {
        serl_train::TrainConfig::default()
    };
    if let Some(path) = state {
        train.features = setup::state_features(path)?;
        train
            .validate(train.obs_dim())
            .map_err(|e| Fail::new(chain(&e)))?;
    }
    Ok(PolicyShape {
        actions: Actions::of(&train),
        message_dims: train.team.as_ref().map_or(0, |t| t.message_dims()),
        obs_dim: train.obs_dim(),
        features: train.observed_features(),
    })
}

/// The venues `venue` names, as `serl backtest --env` reads them.
fn env_choice(venue: &str) -> Result<EnvChoice, Fail> {
    venue
        .parse()
        .map_err(|e: serl_study::StudyError| Fail::new(format!("venue {venue:?}: {e}")))
}

/// Runs strategies (names as `serl backtest` takes them) and policies
/// (Python callables, or run directories of `serl train`) over the orders
/// of `split`; returns the per-order results and the summary as JSON, and
/// writes the report to `out` when given. The arguments come in the
/// groups the Python side passes: the data (`data` or `lobster`), the
/// config (a file or its JSON), where (`split`, `venue`), the players, and
/// the files (`state`, `out`).
#[pyfunction]
pub fn backtest(
    py: Python<'_>,
    inputs: (Option<PathBuf>, Option<PathBuf>),
    config: (Option<PathBuf>, Option<String>),
    place: (String, String),
    strategies: Vec<String>,
    policies: Vec<(String, Py<PyAny>)>,
    files: (Option<PathBuf>, Option<PathBuf>),
) -> PyResult<(String, String)> {
    let ((data, lobster), (config, config_json)) = (inputs, config);
    let ((split, venue), (state, out)) = (place, files);
    let source = ConfigSource::of(config, config_json);
    let cfg = source.backtest_file()?;
    let env = env_choice(&venue)?;
    if strategies.is_empty() && policies.is_empty() {
        return Err(Fail::new("give at least one strategy or policy").into());
    }
    let shape = policy_shape(&source, state.as_deref())?;
    let split = setup::split(&split)?;
    if let Some(d) = &data {
        setup::check_data_path(d)?;
    }
    if data.is_none() && lobster.is_none() {
        return Err(
            Fail::new("give data=PATH (minute bars) or lobster=PATH (LOBSTER days)").into(),
        );
    }
    let loaded = py
        .detach(|| BacktestData::load(lobster.as_deref(), data.as_deref(), split, &cfg, &|_| {}))
        .map_err(|e| Fail::new(chain(&e)))?;
    let failed = Arc::new(Mutex::new(None));
    let mut factories = Vec::new();
    for s in &strategies {
        factories
            .push(serl_study::backtest::strategy_factory(s).map_err(|e| Fail::new(chain(&e)))?);
    }
    let mut python_policies = false;
    for (name, policy) in policies {
        let factory = match policy.extract::<PathBuf>(py) {
            Ok(dir) => serl_study::train::policy_factory_labelled(&dir, &name)
                .map_err(|e| Fail::new(chain(&e)))?,
            Err(_) if policy.bind(py).is_callable() => {
                python_policies = true;
                python_factory(name, policy, &shape, &failed)
            }
            Err(_) => {
                return Err(Fail::new(format!(
                    "policy {name:?}: a callable (obs, decision) -> action, or a `serl train` run directory"
                ))
                .into())
            }
        };
        factories.push(factory);
    }
    // Python policies are called from one thread, order after order, so a
    // policy that keeps state (a generator, a recurrent network) plays the
    // same way every time; the GIL would serialise them anyway.
    let threads = if python_policies { 1 } else { 0 };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Fail::new(format!("starting the backtest's threads: {e}")))?;
    let results = py
        .detach(|| {
            pool.install(|| {
                let at = PlayedAt {
                    env,
                    cfg: &cfg,
                    lobster: loaded.lobster.as_ref(),
                };
                replay_factories(&loaded.market, &loaded.orders, &factories, at, &|_| {})
            })
        })
        .map_err(|e| Fail::new(chain(&e)))?;
    if let Some(e) = failed.lock().ok().and_then(|mut f| f.take()) {
        return Err(e);
    }
    let report = match &out {
        Some(dir) => loaded.report(&results, &cfg, dir),
        None => loaded.report_data(&results, &cfg),
    }
    .map_err(|e| Fail::new(chain(&e)))?;
    let orders = serde_json::to_string(&results);
    let summary = serde_json::to_string(&report);
    match (orders, summary) {
        (Ok(o), Ok(s)) => Ok((o, s)),
        (Err(e), _) | (_, Err(e)) => Err(Fail::new(format!("serializing the results: {e}")).into()),
    }
}
