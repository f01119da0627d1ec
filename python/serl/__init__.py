"""serl from Python.

serl's order-execution environments (the historical replay of minute bars
and a simulated multi-agent limit order book market) as Gymnasium
environments, stepped in Rust; serl's backtester; its run records.

>>> import serl
>>> env = serl.ExecutionEnv(data="data/lean", venue="static", seed=0)
>>> obs, info = env.reset()
>>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

- :class:`ExecutionEnv`: one environment (``gymnasium.Env``);
- :class:`VecExecutionEnv`: N stepped together (Gymnasium's vector API;
  :mod:`serl.sb3` for Stable-Baselines3);
- :func:`backtest`: strategies and Python policies over a split's orders,
  with the metrics, paired CIs, day-level tests and the report;
- :func:`load_run`: an evolve or train run directory;
- :func:`run_train`, :func:`run_evolve`: what ``serl train`` and ``serl
  evolve`` run, through the same library functions;
- :class:`SerlError`: serl's errors (a ``ValueError``), naming the file,
  line and field.
"""

from ._native import SerlError, OBS_COLUMNS
from ._env import ExecutionEnv, VecExecutionEnv
from ._backtest import BacktestResult, backtest
from ._runs import Run, load_run, run_evolve, run_train

__version__ = "0.1.0"

__all__ = [
    "ExecutionEnv",
    "VecExecutionEnv",
    "backtest",
    "BacktestResult",
    "load_run",
    "run_train",
    "run_evolve",
    "Run",
    "SerlError",
    "OBS_COLUMNS",
]
