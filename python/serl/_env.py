"""serl's execution environments with the Gymnasium API.

Both classes hold the trainer's own environments (``serl train`` steps the
same ones), so the observation columns, the designed state features and the
designed reward are exactly what serl's trainer sees.
"""

from __future__ import annotations

import json
import numbers
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from . import _native

PathLike = Union[str, "os.PathLike[str]"]
Config = Union[PathLike, Dict[str, Any], None]


def _path(p: Optional[PathLike]) -> Optional[str]:
    return None if p is None else os.fspath(p)


def _config(config: Config) -> Tuple[Optional[str], Optional[str]]:
    """A config file, or a dict of serl's config tables sent as JSON."""
    if config is None:
        return None, None
    if isinstance(config, dict):
        return None, json.dumps(config)
    return os.fspath(config), None


def _action_space(desc: Dict[str, Any]) -> Tuple[gym.Space, int]:
    """The Gymnasium space of the native action description, and how many
    numbers one action has."""
    if desc["kind"] == "continuous":
        return spaces.Box(desc["low"], desc["high"], shape=(1,), dtype=np.float32), 1
    shares = len(desc["shares"])
    if desc["placements"]:
        return spaces.MultiDiscrete([shares, len(desc["placements"])]), 2
    return spaces.Discrete(shares), 1


class _Spec:
    """What both environment classes read from their native half."""

    def __init__(self, native: Any) -> None:
        self.native = native
        self.obs_dim: int = native.obs_dim
        self.obs_names: List[str] = native.obs_names
        self.action_desc: Dict[str, Any] = native.action_space()
        self.action_space, self.width = _action_space(self.action_desc)
        self.observation_space = spaces.Box(
            -np.inf, np.inf, shape=(self.obs_dim,), dtype=np.float32
        )
        self._orders: Optional[List[Dict[str, Any]]] = None

    def orders(self) -> List[Dict[str, Any]]:
        """The split's orders, read once."""
        if self._orders is None:
            self._orders = self.native.orders()
        return self._orders

    def numbers(self, action: Any) -> List[float]:
        """One action as the list of numbers the native side takes."""
        if type(action) is float or type(action) is int:
            return [action]
        a = np.asarray(action, dtype=np.float64)
        if a.size != self.width:
            raise ValueError(
                f"an action of this environment has {self.width} number(s) "
                f"({self.action_space}), got shape {a.shape}"
            )
        return a.ravel().tolist()


def _native_envs(
    n: int,
    data: Optional[PathLike],
    config: Config,
    venue: str,
    seed: int,
    split: str,
    reward: Optional[PathLike],
    state: Optional[PathLike],
) -> Any:
    path, as_json = _config(config)
    return _native.Envs(
        (_path(data), path, as_json), (venue, split), (n, seed), (_path(reward), _path(state))
    )


class _Described:
    """What both environment classes tell about themselves, read from
    their native half (``self._spec``)."""

    _spec: _Spec

    @property
    def obs_names(self) -> List[str]:
        """The observation's column names, in order."""
        return self._spec.obs_names

    @property
    def orders(self) -> List[Dict[str, Any]]:
        """The orders episodes draw from (symbol, date, side, qty, window)."""
        return self._spec.orders()


class ExecutionEnv(_Described, gym.Env):
    """One parent order at a time, worked in serl's static replay of the
    bars or in its simulated multi-agent market.

    Args:
        data: minute bars (a folder or file, as ``serl train --data``), or
            the config's ``data_path``.
        config: a ``serl train`` config file (``configs/train.toml``) or a
            dict of its tables; every table is optional.
        venue: ``"static"`` (the historical replay) or ``"dynamic"`` (the
            simulated market, where the agent's orders move the price).
        seed: the generator that draws orders (and the market's days).
        split: the orders of ``"train"``, ``"validation"``, ``"test"`` or
            ``"all"`` sessions.
        reward: a reward file: a program in the reward module's language
            (``twap_gain - 0.5 * inventory_left``), or JSON holding one (an
            evolve run's candidate file).
        state: a state module file: TOML or JSON with
            ``features = [{name, program}]`` (or a candidate file).

    Actions follow the config: a share of the order in [0, 1] (or a tilt of
    TWAP in [-1, 1] with ``pace = { tilt = ... }``), an index into
    ``[train.ppo] discrete`` (or DDQN's actions), and with ``[train]
    placements`` also a placement index. ``reset(options={"order": k})``
    plays order ``k`` of :attr:`orders`.

    ``info`` after a step carries the step's fill (``fill``: share of the
    order), ``fill_price``, ``step_benchmark``, ``step_pa_bps``, the running
    ``running_pa_bps`` (the sum of ``step_pa_bps``), and at the end
    ``episode``: the whole-order PA (``pa_bps``, unfilled shares charged at
    the horizon, as serl's backtests score it), ``filled_pa_bps``,
    ``is_bps``, ``filled_share``, ``return`` and the order.
    """

    metadata: Dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        data: Optional[PathLike] = None,
        config: Config = None,
        venue: str = "static",
        seed: int = 0,
        split: str = "train",
        reward: Optional[PathLike] = None,
        state: Optional[PathLike] = None,
    ) -> None:
        super().__init__()
        self._spec = _Spec(_native_envs(1, data, config, venue, seed, split, reward, state))
        self._native = self._spec.native
        self.observation_space = self._spec.observation_space
        self.action_space = self._spec.action_space
        self.venue = venue

    def reset(
        self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None
    ) -> Tuple[np.ndarray, Dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._native.seed_env(0, seed)
        order = None if options is None else options.get("order")
        obs, order_info = self._native.reset_env(0, order)
        return obs, {"order": order_info}

    def step(self, action: Any) -> Tuple[np.ndarray, float, bool, bool, Dict[str, Any]]:
        obs, reward, done, info = self._native.step_env(0, self._spec.numbers(action))
        return obs, reward, done, False, info


class VecExecutionEnv(_Described, gym.vector.VectorEnv):
    """``n`` execution environments stepped together in Rust: numpy arrays
    in, numpy arrays out, no Python loop over environments.

    The arguments are :class:`ExecutionEnv`'s. Environment ``k`` draws with
    the seed ``seed + k`` (``reset(seed=s)``: ``s + k``), so it plays what
    ``ExecutionEnv(seed=seed + k)`` plays. An environment whose episode
    ends starts the next in the same step (Gymnasium's same-step
    autoreset): ``infos["final_obs"]`` holds the last observation and
    ``infos["final_info"]["episode"]`` the finished episodes' ``pa_bps``,
    ``return`` and ``filled_share``, each with its ``_`` mask.
    :mod:`serl.sb3` adapts it to Stable-Baselines3.
    """

    def __init__(
        self,
        n: int,
        data: Optional[PathLike] = None,
        config: Config = None,
        venue: str = "static",
        seed: int = 0,
        split: str = "train",
        reward: Optional[PathLike] = None,
        state: Optional[PathLike] = None,
    ) -> None:
        if int(n) < 1:
            raise ValueError(f"n: at least one environment, got {n}")
        self._spec = _Spec(_native_envs(int(n), data, config, venue, seed, split, reward, state))
        self._native = self._spec.native
        self.num_envs = int(n)
        self.single_observation_space = self._spec.observation_space
        self.single_action_space = self._spec.action_space
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, self.num_envs
        )
        self.action_space = gym.vector.utils.batch_space(
            self.single_action_space, self.num_envs
        )
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
        self.venue = venue
        self._no_truncation = np.zeros(self.num_envs, dtype=bool)

    def reset(
        self,
        *,
        seed: Optional[Union[int, Sequence[Optional[int]]]] = None,
        options: Optional[Dict[str, Any]] = None,
    ) -> Tuple[np.ndarray, Dict[str, Any]]:
        """Starts an episode everywhere. ``seed``: environment k takes
        ``seed + k``; a sequence gives each its own (``None`` keeps its
        generator)."""
        if seed is not None and not isinstance(seed, numbers.Integral):
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"seed: {self.num_envs} seeds expected, got {len(seeds)}")
            for k, s in enumerate(seeds):
                if s is not None:
                    self._native.seed_env(k, int(s))
            seed = None
        obs, orders = self._native.reset_all(None if seed is None else int(seed))
        return obs, {"order": orders, "_order": np.ones(self.num_envs, dtype=bool)}

    def actions_array(self, actions: Any) -> np.ndarray:
        """``actions`` as the n × width float array the native side steps."""
        a = np.asarray(actions, dtype=np.float64)
        if a.size != self.num_envs * self._spec.width:
            raise ValueError(
                f"actions: {self.num_envs} actions of {self._spec.width} number(s) each "
                f"expected, got shape {a.shape}"
            )
        return a.reshape(self.num_envs, self._spec.width)

    def step(self, actions: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
        out = self._native.step_all(self.actions_array(actions))
        dones = out["dones"]
        infos: Dict[str, Any] = {"order": out["order"], "_order": np.ones(self.num_envs, dtype=bool)}
        if dones.any():
            final_obs = np.full(self.num_envs, None, dtype=object)
            for k in np.flatnonzero(dones):
                final_obs[k] = out["final_obs"][k]
            episode = {
                "pa_bps": out["final_pa_bps"],
                "_pa_bps": dones.copy(),
                "return": out["final_return"],
                "_return": dones.copy(),
                "filled_share": out["final_filled"],
                "_filled_share": dones.copy(),
            }
            infos.update(
                final_obs=final_obs,
                _final_obs=dones.copy(),
                final_info={"episode": episode, "_episode": dones.copy()},
                _final_info=dones.copy(),
            )
        return out["obs"], out["rewards"], dones, self._no_truncation.copy(), infos

    def step_arrays(self, actions: np.ndarray) -> Dict[str, np.ndarray]:
        """The fastest step: ``actions`` already an n × width float64 array;
        returns the native arrays (``obs``, ``rewards``, ``dones``,
        ``final_obs``, ``final_pa_bps``, ``final_return``, ``final_filled``,
        ``order``) without building Gymnasium's info dict."""
        return self._native.step_all(actions)
