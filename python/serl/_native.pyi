"""Type stubs of serl's native module (crates/serl-py). Use the Python API
in :mod:`serl`; this module is its Rust half."""

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

OBS_COLUMNS: List[str]

class SerlError(ValueError):
    """An error from serl: a missing or malformed file, an invalid config or
    module, a bad action. The message names the file, line and field."""

class Envs:
    """N of serl's training environments over one config, data and split."""

    def __init__(
        self,
        sources: Tuple[Optional[str], Optional[str], Optional[str]],
        where: Tuple[str, str],
        count: Tuple[int, int],
        modules: Tuple[Optional[str], Optional[str]],
    ) -> None:
        """`sources`: (data, config file, config JSON); `where`: (venue,
        split); `count`: (n, seed); `modules`: (reward file, state file)."""
    @property
    def n(self) -> int: ...
    @property
    def obs_dim(self) -> int: ...
    @property
    def obs_names(self) -> List[str]: ...
    def action_space(self) -> Dict[str, Any]: ...
    def orders(self) -> List[Dict[str, Any]]: ...
    def seed_env(self, i: int, seed: int) -> None: ...
    def reset_env(
        self, i: int, order: Optional[int] = None
    ) -> Tuple[npt.NDArray[np.float32], Dict[str, Any]]: ...
    def step_env(
        self, i: int, action: Sequence[float]
    ) -> Tuple[npt.NDArray[np.float32], float, bool, Dict[str, Any]]: ...
    def reset_all(
        self, seed: Optional[int] = None
    ) -> Tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]: ...
    def step_all(self, actions: npt.NDArray[np.float64]) -> Dict[str, np.ndarray]: ...

def backtest(
    inputs: Tuple[Optional[str], Optional[str]],
    config: Tuple[Optional[str], Optional[str]],
    where: Tuple[str, str],
    strategies: List[str],
    policies: List[Tuple[str, Any]],
    files: Tuple[Optional[str], Optional[str]],
) -> Tuple[str, str]:
    """`inputs`: (data, lobster); `config`: (file, JSON); `where`: (split,
    venue); `files`: (state module, report folder)."""

def run_train(out: str, options: str) -> str:
    """Trains one policy as `serl train` does; `options` is JSON."""

def run_evolve(out: str, options: str) -> str:
    """Runs SE-RL as `serl evolve` does; `options` is JSON."""
