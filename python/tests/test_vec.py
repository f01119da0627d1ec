"""serl.VecExecutionEnv steps N environments in Rust, and each plays what
a single environment with its seed plays."""

import numpy as np
import pytest

import serl


@pytest.mark.parametrize("venue", ["static", "dynamic"])
def test_vec_equals_n_single_environments_stepped_one_by_one(data, venue):
    n, seed = 4, 20
    vec = serl.VecExecutionEnv(n, data=data, venue=venue, seed=0)
    singles = [serl.ExecutionEnv(data=data, venue=venue, seed=0) for _ in range(n)]
    obs, _ = vec.reset(seed=seed)
    for k, env in enumerate(singles):
        o, _ = env.reset(seed=seed + k)
        np.testing.assert_array_equal(obs[k], o)
    rng = np.random.default_rng(1)
    episodes = 0
    for _ in range(200):
        actions = rng.uniform(0, 0.1, size=(n, 1))
        obs, rewards, dones, truncs, infos = vec.step(actions)
        assert not truncs.any()
        for k, env in enumerate(singles):
            o, r, d, _, info = env.step(actions[k])
            assert r == rewards[k] and d == dones[k]
            if d:
                episodes += 1
                np.testing.assert_array_equal(infos["final_obs"][k], o)
                assert infos["final_info"]["episode"]["pa_bps"][k] == info["episode"]["pa_bps"]
                o, _ = env.reset()
            np.testing.assert_array_equal(obs[k], o)
    assert episodes >= n, "the test crossed episode ends"


def test_vec_follows_gymnasiums_vector_api(data):
    vec = serl.VecExecutionEnv(8, data=data, seed=0)
    assert vec.num_envs == 8
    assert vec.observation_space.shape == (8, vec.single_observation_space.shape[0])
    obs, info = vec.reset(seed=0)
    assert obs.shape == vec.observation_space.shape and obs.dtype == np.float32
    obs, rewards, dones, truncs, infos = vec.step(vec.action_space.sample())
    assert rewards.shape == (8,) and dones.dtype == bool and truncs.shape == (8,)


def test_a_thousand_environments_step_together(data):
    vec = serl.VecExecutionEnv(1024, data=data, seed=0)
    vec.reset(seed=0)
    total = 0.0
    for _ in range(100):
        obs, rewards, dones, _, infos = vec.step(np.full((1024, 1), 0.02))
        total += float(rewards.sum())
    assert np.isfinite(obs).all() and np.isfinite(total)


def test_gymnasiums_info_wrappers_read_its_infos(data):
    import gymnasium as gym

    vec = gym.wrappers.vector.DictInfoToList(serl.VecExecutionEnv(2, data=data, seed=0))
    vec.reset(seed=0)
    ended = False
    for _ in range(200):
        _, _, dones, _, infos = vec.step(np.full((2, 1), 0.05))
        assert len(infos) == 2
        if dones.any():
            k = int(np.flatnonzero(dones)[0])
            assert np.isfinite(infos[k]["final_info"]["episode"]["pa_bps"])
            ended = True
    assert ended
