"""Stable-Baselines3 trains on serl.VecExecutionEnv through serl.sb3.
Skipped where SB3 (and torch) are not installed: CI's environment leaves
them out for their size; docs/python.md has the measured run."""

import numpy as np
import pytest

sb3 = pytest.importorskip(
    "stable_baselines3", reason="Stable-Baselines3 is not installed (pip install stable-baselines3)"
)

import serl  # noqa: E402
import serl.sb3  # noqa: E402


def test_sb3_ppo_learns_on_the_vectorized_environment(data):
    venv = serl.sb3.SB3VecEnv(serl.VecExecutionEnv(4, data=data, seed=0))
    model = sb3.PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=2, seed=0)
    model.learn(512)
    obs = venv.reset()
    actions, _ = model.predict(obs, deterministic=True)
    obs, rewards, dones, infos = venv.step(actions)
    assert obs.shape == (4, venv.observation_space.shape[0]) and np.isfinite(rewards).all()
    assert len(model.ep_info_buffer) > 0 and "pa_bps" in model.ep_info_buffer[0]
