"""serl.ExecutionEnv is a Gymnasium environment that plays the trainer's
own episodes."""

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import serl


@pytest.mark.parametrize("venue", ["static", "dynamic"])
def test_gymnasiums_checker_passes(data, venue):
    env = serl.ExecutionEnv(data=data, venue=venue, seed=0)
    check_env(env, skip_render_check=True)


def play(env, seed, actions):
    obs, info = env.reset(seed=seed)
    trajectory = [obs]
    rewards = []
    done = False
    step = 0
    while not done:
        obs, r, done, truncated, info = env.step(actions(step))
        assert not truncated
        trajectory.append(obs)
        rewards.append(r)
        step += 1
    return np.array(trajectory), np.array(rewards), info


@pytest.mark.parametrize("venue", ["static", "dynamic"])
def test_the_same_seed_plays_the_same_trajectory(data, venue):
    def actions(step):
        return np.array([0.01 + 0.03 * (step % 3)], dtype=np.float32)

    a = play(serl.ExecutionEnv(data=data, venue=venue, seed=5), 11, actions)
    b = play(serl.ExecutionEnv(data=data, venue=venue, seed=99), 11, actions)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert a[2]["episode"]["pa_bps"] == b[2]["episode"]["pa_bps"]
    c = play(serl.ExecutionEnv(data=data, venue=venue, seed=5), 12, actions)
    assert c[0].shape != a[0].shape or not np.array_equal(c[0], a[0]), "another seed, another episode"


def test_info_reports_fills_the_running_pa_and_the_episode(data):
    env = serl.ExecutionEnv(data=data, seed=0)
    obs, info = env.reset(seed=0)
    assert set(info["order"]) >= {"symbol", "date", "side", "qty"}
    assert obs.dtype == np.float32 and obs.shape == (len(env.obs_names),)
    assert env.obs_names[:2] == ["time_left", "inventory_left"]
    filled = 0.0
    done = False
    while not done:
        obs, r, done, _, info = env.step(np.array([0.05], dtype=np.float32))
        filled += info["fill"]
        assert "running_pa_bps" in info
    episode = info["episode"]
    assert episode["filled_share"] == pytest.approx(filled)
    assert episode["order"]["symbol"] == env.orders[episode["order"]["order"]]["symbol"]
    assert np.isfinite(episode["pa_bps"]) and np.isfinite(episode["is_bps"])


def test_an_order_can_be_chosen(data):
    env = serl.ExecutionEnv(data=data, seed=0, split="validation")
    _, info = env.reset(options={"order": 3})
    assert info["order"]["order"] == 3
    assert info["order"]["order_id"] == env.orders[3]["order_id"]
