"""Stable-Baselines3 on serl's vectorized environments.

>>> from stable_baselines3 import PPO
>>> import serl, serl.sb3
>>> venv = serl.sb3.SB3VecEnv(serl.VecExecutionEnv(8, data="data/lean", seed=0))
>>> model = PPO("MlpPolicy", venv, n_steps=256).learn(20_000)

The adapter steps all environments in one native call, as
:class:`serl.VecExecutionEnv` does; SB3 sees a ``VecEnv`` whose finished
episodes carry ``terminal_observation`` and ``episode`` (``r``, ``l`` and
serl's whole-order ``pa_bps``), so its logger reports episode returns.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Type

import numpy as np

try:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError(
        "serl.sb3 needs Stable-Baselines3: pip install stable-baselines3 (and torch)"
    ) from e

from ._env import VecExecutionEnv


class SB3VecEnv(VecEnv):
    """A :class:`serl.VecExecutionEnv` as a Stable-Baselines3 ``VecEnv``."""

    def __init__(self, env: VecExecutionEnv) -> None:
        self.env = env
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)
        self._actions: Optional[np.ndarray] = None
        self._returns = np.zeros(env.num_envs)
        self._lengths = np.zeros(env.num_envs, dtype=np.int64)

    def reset(self) -> np.ndarray:
        seeds = getattr(self, "_seeds", [None])
        seed = seeds[0] if seeds and seeds[0] is not None else None
        obs, _ = self.env.reset(seed=seed)
        if hasattr(self, "_reset_seeds"):
            self._reset_seeds()
        self._returns[:] = 0.0
        self._lengths[:] = 0
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = self.env.actions_array(actions)

    def step_wait(self):
        out = self.env.step_arrays(self._actions)
        rewards = out["rewards"].astype(np.float32)
        dones = out["dones"]
        self._returns += out["rewards"]
        self._lengths += 1
        infos: List[dict] = [{} for _ in range(self.num_envs)]
        for k in np.flatnonzero(dones):
            infos[k] = {
                "terminal_observation": out["final_obs"][k],
                "TimeLimit.truncated": False,
                "episode": {
                    "r": float(self._returns[k]),
                    "l": int(self._lengths[k]),
                    "pa_bps": float(out["final_pa_bps"][k]),
                },
            }
            self._returns[k] = 0.0
            self._lengths[k] = 0
        return out["obs"], rewards, dones, infos

    def close(self) -> None:
        pass

    def _indices(self, indices: Any) -> Sequence[int]:
        if indices is None:
            return range(self.num_envs)
        if isinstance(indices, int):
            return [indices]
        return list(indices)

    def get_attr(self, attr_name: str, indices: Any = None) -> List[Any]:
        return [getattr(self.env, attr_name) for _ in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        if indices is not None and list(self._indices(indices)) != list(range(self.num_envs)):
            raise NotImplementedError("serl's environments share their attributes: set them for all")
        setattr(self.env, attr_name, value)

    def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> List[Any]:
        """Calls the vectorized environment's method once; every index
        gets its answer."""
        answer = getattr(self.env, method_name)(*args, **kwargs)
        return [answer for _ in self._indices(indices)]

    def env_is_wrapped(self, wrapper_class: Type[Any], indices: Any = None) -> List[bool]:
        return [False for _ in self._indices(indices)]
