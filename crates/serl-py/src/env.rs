//! The native environments behind `serl.ExecutionEnv` and
//! `serl.VecExecutionEnv`: N of the trainer's own environments
//! (`serl_train::execution_envs`, so the observation, the designed
//! features and the reward are the trainer's), stepped one at a time or
//! all together in Rust.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rayon::prelude::*;
use serl_train::TrainEnv;

use crate::error::{chain, Fail};
use crate::setup::{placement_name, Actions, ConfigSource, EnvRequest, Shared};

type EnvBoxes<'a> = Vec<Box<dyn TrainEnv + 'a>>;

self_cell::self_cell!(
    /// The environments, borrowing the data they share.
    struct EnvCell {
        owner: Arc<Shared>,
        #[covariant]
        dependent: EnvBoxes,
    }
);

/// Below this many replayed environments a step stays on the calling
/// thread: a replayed step takes well under a microsecond, less than a
/// hand-off to another thread. Simulated markets step in parallel always.
const PARALLEL_FROM: usize = 256;

/// One environment's episode bookkeeping.
#[derive(Clone, Default)]
struct Track {
    /// The order in play (its place in the split's list).
    order: usize,
    /// The episode's rewards so far.
    ret: f64,
    /// Its fills' price advantage against their steps' benchmarks so far,
    /// bps of the order (the sum of `step_pa`).
    running_pa: f64,
    /// Whether an episode is in play.
    live: bool,
}

struct Inner {
    cell: EnvCell,
    rngs: Vec<SmallRng>,
    tracks: Vec<Track>,
}

/// N execution environments over one config, data and split.
#[pyclass(module = "serl._native")]
pub struct Envs {
    inner: Mutex<Inner>,
    shared: Arc<Shared>,
    obs_dim: usize,
    n: usize,
}

/// One environment's step as Python gets it: the observation, the reward,
/// whether the episode ended, and what happened.
type StepOut<'py> = (Bound<'py, PyArray1<f32>>, f64, bool, Bound<'py, PyDict>);

/// One environment's work in a batched step: it, its generator and its
/// bookkeeping, its action and where its results go.
type Work<'e, 'a> = (
    (
        (&'e mut Box<dyn TrainEnv + 'a>, &'e mut SmallRng),
        &'e mut Track,
    ),
    (&'e (f64, u8), Slot<'e>),
);

/// What one step returns for one environment, before it meets Python.
struct Stepped {
    reward: f64,
    done: bool,
}

fn rng_for(seed: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed)
}

impl Envs {
    /// The environments. Never held while the GIL is taken back: a
    /// batched step locks and unlocks inside `py.detach`, so a Python
    /// thread waiting here with the GIL cannot block it. A panic that
    /// poisoned the lock left episodes half-stepped: they all need a
    /// reset.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| {
            let mut inner = p.into_inner();
            inner.tracks.iter_mut().for_each(|t| t.live = false);
            self.inner.clear_poison();
            inner
        })
    }

    fn check_index(&self, i: usize, n: usize) -> PyResult<()> {
        if i >= n {
            return Err(Fail::new(format!("environment {i} of {n}")).into());
        }
        Ok(())
    }
}

/// Starts an environment's next episode: on order `order`, or one drawn
/// as the trainer draws it (`TrainEnv::reset`).
fn reset_one(
    env: &mut Box<dyn TrainEnv + '_>,
    rng: &mut SmallRng,
    track: &mut Track,
    order: Option<usize>,
) {
    match order {
        Some(k) => env.reset_to(k, rng),
        None => env.reset(rng),
    }
    *track = Track {
        order: env.order().unwrap_or_default(),
        live: true,
        ..Track::default()
    };
}

fn step_one(
    env: &mut Box<dyn TrainEnv + '_>,
    track: &mut Track,
    (action, placement): (f64, u8),
) -> Stepped {
    let (reward, done) = env.step_placed(action, placement);
    track.ret += reward;
    if let Some(s) = env.last_step() {
        track.running_pa += s.step_pa;
    }
    track.live = !done;
    Stepped { reward, done }
}

#[pymethods]
impl Envs {
    /// Loads the data and config and builds `n` environments. The
    /// arguments come in the groups the Python side passes: the data and
    /// config (a file or its JSON), where (`venue`, `split`), how many and
    /// their seed, and the designed module files (`reward`, `state`).
    #[new]
    fn new(
        py: Python<'_>,
        sources: (Option<PathBuf>, Option<PathBuf>, Option<String>),
        place: (String, String),
        count: (usize, u64),
        modules: (Option<PathBuf>, Option<PathBuf>),
    ) -> PyResult<Self> {
        let ((data, config, config_json), (venue, split)) = (sources, place);
        let ((n, seed), (reward, state)) = (count, modules);
        let req = EnvRequest {
            data,
            config: ConfigSource::of(config, config_json),
            venue,
            split,
            n,
            reward,
            state,
        };
        let shared = Arc::new(py.detach(|| Shared::load(&req))?);
        let cell = EnvCell::try_new(shared.clone(), |s| {
            serl_train::execution_envs(
                &s.train,
                &s.market,
                &s.orders,
                &s.env,
                s.reward.clone(),
                &s.market_cfg,
            )
        })
        .map_err(|e| Fail::new(chain(&e)))?;
        let obs_dim = cell.borrow_dependent().first().map_or(0, |e| e.obs_dim());
        let rngs = (0..n)
            .map(|i| rng_for(seed.wrapping_add(i as u64)))
            .collect();
        Ok(Envs {
            inner: Mutex::new(Inner {
                cell,
                rngs,
                tracks: vec![Track::default(); n],
            }),
            shared,
            obs_dim,
            n,
        })
    }

    /// Environments.
    #[getter]
    fn n(&self) -> usize {
        self.n
    }

    /// Columns of the observation.
    #[getter]
    fn obs_dim(&self) -> usize {
        self.obs_dim
    }

    /// The observation's column names.
    #[getter]
    fn obs_names(&self) -> Vec<String> {
        self.shared.obs_names(self.obs_dim)
    }

    /// The action space: (`"continuous"`, low, high) for a share or tilt,
    /// or (`"discrete"`, shares, placements).
    fn action_space<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        match &self.shared.actions {
            Actions::Continuous(pace) => {
                let low = if matches!(pace, serl_train::Pace::Absolute) {
                    0.0
                } else {
                    -1.0
                };
                d.set_item("kind", "continuous")?;
                d.set_item("low", low)?;
                d.set_item("high", 1.0)?;
            }
            Actions::Discrete {
                shares, placements, ..
            } => {
                d.set_item("kind", "discrete")?;
                d.set_item("shares", shares.clone())?;
                let names: Vec<String> = placements.iter().map(placement_name).collect();
                d.set_item("placements", names)?;
            }
        }
        d.set_item(
            "pace",
            format!("{:?}", self.shared.actions.pace()).to_lowercase(),
        )?;
        Ok(d)
    }

    /// The orders episodes draw from, as dicts.
    fn orders<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        (0..self.shared.orders.len())
            .map(|k| order_dict(py, &self.shared, k))
            .collect()
    }

    /// Re-seeds environment `i`'s generator.
    fn seed_env(&self, i: usize, seed: u64) -> PyResult<()> {
        let mut inner = self.lock();
        self.check_index(i, inner.rngs.len())?;
        inner.rngs[i] = rng_for(seed);
        Ok(())
    }

    /// Starts environment `i`'s next episode (on order number `order` when
    /// given); returns its first observation and the order.
    #[pyo3(signature = (i, order=None))]
    fn reset_env<'py>(
        &self,
        py: Python<'py>,
        i: usize,
        order: Option<usize>,
    ) -> PyResult<(Bound<'py, PyArray1<f32>>, Bound<'py, PyDict>)> {
        let orders = self.shared.orders.len();
        if let Some(k) = order.filter(|k| *k >= orders) {
            return Err(Fail::new(format!(
                "order {k}: the split has {orders} orders (0..{orders})"
            ))
            .into());
        }
        let mut obs = vec![0f32; self.obs_dim];
        let k = {
            let mut guard = self.lock();
            let inner = &mut *guard;
            self.check_index(i, inner.tracks.len())?;
            let (rng, track) = (&mut inner.rngs[i], &mut inner.tracks[i]);
            let steps = inner.cell.with_dependent_mut(|_, envs| {
                reset_one(&mut envs[i], rng, track, order);
                envs[i].observe(&mut obs);
                envs[i].progress().map_or(0, |p| p.2)
            });
            (track.order, steps)
        };
        let info = order_dict(py, &self.shared, k.0)?;
        info.set_item("steps", k.1)?;
        Ok((PyArray1::from_vec(py, obs), info))
    }

    /// Steps environment `i` with one action (its numbers as the action
    /// space takes them); returns the observation, the reward, whether
    /// the episode ended, and what happened.
    fn step_env<'py>(&self, py: Python<'py>, i: usize, action: Vec<f64>) -> PyResult<StepOut<'py>> {
        let placed = self.shared.actions.decode(&action).map_err(Fail::new)?;
        let mut obs = vec![0f32; self.obs_dim];
        let mut guard = self.lock();
        let inner = &mut *guard;
        self.check_index(i, inner.tracks.len())?;
        let track = &mut inner.tracks[i];
        if !track.live {
            return Err(Fail::new(
                "step() before reset(), or after the episode ended: call reset()",
            )
            .into());
        }
        let info = PyDict::new(py);
        let stepped = inner
            .cell
            .with_dependent_mut(|_, envs| -> PyResult<Stepped> {
                let e = &mut envs[i];
                let s = step_one(e, track, placed);
                e.observe(&mut obs);
                step_info(&info, &**e, track, &self.shared)?;
                Ok(s)
            })?;
        Ok((
            PyArray1::from_vec(py, obs),
            stepped.reward,
            stepped.done,
            info,
        ))
    }

    /// Starts an episode in every environment (re-seeding environment k
    /// with `seed + k` when a seed is given); returns the observations,
    /// one row each, and the orders' numbers.
    #[pyo3(signature = (seed=None))]
    fn reset_all<'py>(
        &self,
        py: Python<'py>,
        seed: Option<u64>,
    ) -> (Bound<'py, PyArray2<f32>>, Bound<'py, PyArray1<i64>>) {
        let (d, n) = (self.obs_dim, self.n);
        let mut obs = vec![0f32; n * d];
        let picked = py.detach(|| {
            let mut guard = self.lock();
            let inner = &mut *guard;
            if let Some(s) = seed {
                for (k, r) in inner.rngs.iter_mut().enumerate() {
                    *r = rng_for(s.wrapping_add(k as u64));
                }
            }
            let (rngs, tracks) = (&mut inner.rngs, &mut inner.tracks);
            inner.cell.with_dependent_mut(|_, envs| {
                for (((e, rng), track), row) in envs
                    .iter_mut()
                    .zip(rngs.iter_mut())
                    .zip(tracks.iter_mut())
                    .zip(obs.chunks_mut(d.max(1)))
                {
                    reset_one(e, rng, track, None);
                    e.observe(row);
                }
            });
            tracks.iter().map(|t| t.order as i64).collect::<Vec<i64>>()
        });
        (rows(py, obs, n, d), PyArray1::from_vec(py, picked))
    }

    /// Steps every environment with its row of `actions` (n × the action's
    /// numbers); an environment whose episode ends starts the next at once.
    /// Returns the observations (the new episode's first where one ended),
    /// the rewards, the done flags, the last observations of the episodes
    /// that ended, and their whole-order PA, return and filled share (NaN
    /// where none ended), and the orders now in play.
    fn step_all<'py>(
        &self,
        py: Python<'py>,
        actions: PyReadonlyArray2<'py, f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (d, n) = (self.obs_dim, self.n);
        let view = actions.as_array();
        if view.nrows() != n {
            return Err(Fail::new(format!(
                "actions: {n} rows expected (one per environment), got {}",
                view.nrows()
            ))
            .into());
        }
        let placed: Vec<(f64, u8)> = view
            .rows()
            .into_iter()
            .enumerate()
            .map(|(k, row)| {
                let nums: Vec<f64> = row.iter().copied().collect();
                self.shared
                    .actions
                    .decode(&nums)
                    .map_err(|m| Fail::new(format!("actions row {k}: {m}")))
            })
            .collect::<Result<_, Fail>>()?;
        let parallel = n >= PARALLEL_FROM
            || (n > 1 && self.shared.train.hybrid.mode == serl_train::HybridMode::DynamicOnly);
        let out = py.detach(|| -> Result<Batch, Fail> {
            let mut guard = self.lock();
            let inner = &mut *guard;
            if let Some(k) = inner.tracks.iter().position(|t| !t.live) {
                return Err(Fail::new(format!(
                    "environment {k} has no episode in play: call reset() first"
                )));
            }
            let mut out = Batch::new(n, d);
            let (rngs, tracks) = (&mut inner.rngs, &mut inner.tracks);
            inner.cell.with_dependent_mut(|_, envs| {
                step_batch(envs, (rngs, tracks), &placed, &mut out, parallel)
            });
            Ok(out)
        })?;
        out.into_dict(py, n, d)
    }
}

/// What a batched step writes, one row or entry per environment.
struct Batch {
    obs: Vec<f32>,
    final_obs: Vec<f32>,
    rewards: Vec<f64>,
    dones: Vec<bool>,
    final_pa: Vec<f64>,
    final_return: Vec<f64>,
    final_filled: Vec<f64>,
    order: Vec<i64>,
}

impl Batch {
    fn new(n: usize, d: usize) -> Self {
        Batch {
            obs: vec![0.0; n * d],
            final_obs: vec![0.0; n * d],
            rewards: vec![0.0; n],
            dones: vec![false; n],
            final_pa: vec![f64::NAN; n],
            final_return: vec![f64::NAN; n],
            final_filled: vec![f64::NAN; n],
            order: vec![0; n],
        }
    }

    fn into_dict(self, py: Python<'_>, n: usize, d: usize) -> PyResult<Bound<'_, PyDict>> {
        let out = PyDict::new(py);
        out.set_item("obs", rows(py, self.obs, n, d))?;
        out.set_item("rewards", PyArray1::from_vec(py, self.rewards))?;
        out.set_item("dones", PyArray1::from_vec(py, self.dones))?;
        out.set_item("final_obs", rows(py, self.final_obs, n, d))?;
        out.set_item("final_pa_bps", PyArray1::from_vec(py, self.final_pa))?;
        out.set_item("final_return", PyArray1::from_vec(py, self.final_return))?;
        out.set_item("final_filled", PyArray1::from_vec(py, self.final_filled))?;
        out.set_item("order", PyArray1::from_vec(py, self.order))?;
        Ok(out)
    }
}

/// One environment's slice of a [`Batch`].
struct Slot<'b> {
    obs: &'b mut [f32],
    final_obs: &'b mut [f32],
    reward: &'b mut f64,
    done: &'b mut bool,
    finals: (&'b mut f64, &'b mut f64, &'b mut f64),
    order: &'b mut i64,
}

fn step_batch(
    envs: &mut [Box<dyn TrainEnv + '_>],
    (rngs, tracks): (&mut [SmallRng], &mut [Track]),
    placed: &[(f64, u8)],
    out: &mut Batch,
    parallel: bool,
) {
    let d = out.obs.len() / envs.len().max(1);
    let slots: Vec<Slot<'_>> = out
        .obs
        .chunks_mut(d.max(1))
        .zip(out.final_obs.chunks_mut(d.max(1)))
        .zip(out.rewards.iter_mut())
        .zip(out.dones.iter_mut())
        .zip(out.final_pa.iter_mut())
        .zip(out.final_return.iter_mut())
        .zip(out.final_filled.iter_mut())
        .zip(out.order.iter_mut())
        .map(
            |(((((((obs, final_obs), reward), done), pa), ret), filled), order)| Slot {
                obs,
                final_obs,
                reward,
                done,
                finals: (pa, ret, filled),
                order,
            },
        )
        .collect();
    let one = |(((e, rng), track), (a, slot)): Work<'_, '_>| {
        let s = step_one(e, track, *a);
        *slot.reward = s.reward;
        *slot.done = s.done;
        if s.done {
            e.observe(slot.final_obs);
            *slot.finals.0 = e.episode_pa();
            *slot.finals.1 = track.ret;
            *slot.finals.2 = e
                .finished()
                .map_or(f64::NAN, |o| o.filled / o.qty.max(f64::MIN_POSITIVE));
            reset_one(e, rng, track, None);
        }
        e.observe(slot.obs);
        *slot.order = track.order as i64;
    };
    let work = envs
        .iter_mut()
        .zip(rngs.iter_mut())
        .zip(tracks.iter_mut())
        .zip(placed.iter().zip(slots));
    if parallel {
        let work: Vec<_> = work.collect();
        work.into_par_iter().for_each(one);
    } else {
        work.for_each(one);
    }
}

/// The share of an order its episode filled.
fn filled_share(o: &serl_env::ExecutionOutcome) -> f64 {
    o.filled / o.qty.max(f64::MIN_POSITIVE)
}

/// A flat buffer as an n × d array.
fn rows(py: Python<'_>, flat: Vec<f32>, n: usize, d: usize) -> Bound<'_, PyArray2<f32>> {
    PyArray1::from_vec(py, flat)
        .reshape([n, d])
        .expect("n × d values")
}

/// The order numbered `k`, as a dict.
fn order_dict<'py>(py: Python<'py>, shared: &Shared, k: usize) -> PyResult<Bound<'py, PyDict>> {
    let o = &shared.orders[k];
    let d = PyDict::new(py);
    d.set_item("order", k)?;
    d.set_item("order_id", o.id)?;
    d.set_item("symbol", &*o.symbol)?;
    d.set_item("date", o.date.to_string())?;
    d.set_item("side", format!("{:?}", o.side).to_lowercase())?;
    d.set_item("qty", o.qty)?;
    d.set_item("start_minute", o.start_minute)?;
    d.set_item("end_minute", o.end_minute)?;
    Ok(d)
}

/// What a step did, as `info`: the step's fills and the running PA, and
/// at the end the episode's metrics under `"episode"`.
fn step_info(
    info: &Bound<'_, PyDict>,
    env: &dyn TrainEnv,
    track: &Track,
    shared: &Shared,
) -> PyResult<()> {
    if let Some(s) = env.last_step() {
        info.set_item("fill", s.fill_frac)?;
        info.set_item("fill_price", s.fill_price)?;
        info.set_item("step_benchmark", s.step_bench)?;
        info.set_item("step_pa_bps", s.step_pa)?;
        info.set_item("inventory_left", s.inventory_left)?;
        info.set_item("time_left", s.time_left)?;
    }
    info.set_item("running_pa_bps", track.running_pa)?;
    if let Some((_, steps_left, _)) = env.progress() {
        info.set_item("steps_left", steps_left)?;
    }
    if track.live {
        return Ok(());
    }
    let Some(o) = env.finished() else {
        return Ok(());
    };
    let py = info.py();
    let e = PyDict::new(py);
    e.set_item("pa_bps", o.pa_bps())?;
    e.set_item("filled_pa_bps", o.filled_pa_bps())?;
    e.set_item("is_bps", o.is_bps())?;
    e.set_item("qty", o.qty)?;
    e.set_item("filled", o.filled)?;
    e.set_item("filled_share", filled_share(o))?;
    e.set_item("avg_price", o.avg_price())?;
    e.set_item("bench_price", o.bench_price)?;
    e.set_item("arrival_price", o.arrival_price)?;
    e.set_item("horizon_price", o.horizon_price)?;
    e.set_item("return", track.ret)?;
    e.set_item("steps", o.steps)?;
    e.set_item("order_id", o.order_id)?;
    e.set_item("order", order_dict(py, shared, track.order)?)?;
    info.set_item("episode", e)?;
    Ok(())
}
