"""A reward file and a state module file change the reward and the
observation as they do in serl's trainer."""

import numpy as np

import serl


def first_steps(env, n=5):
    obs, _ = env.reset(seed=3)
    out = [(obs, None, {})]
    for _ in range(n):
        obs, r, done, _, info = env.step(np.array([0.02], dtype=np.float32))
        out.append((obs, r, info))
    return out


def test_a_reward_file_sets_the_reward(data, tmp_path):
    reward = tmp_path / "reward.txt"
    reward.write_text("step_pa * 2 - 1\n")
    env = serl.ExecutionEnv(data=data, seed=0, reward=reward)
    for _, r, info in first_steps(env)[1:]:
        assert r == info["step_pa_bps"] * 2 - 1


def test_a_candidate_json_gives_its_reward(data, tmp_path):
    cand = tmp_path / "i0_c0.json"
    cand.write_text('{"key": "i0_c0", "design": {"reward": {"program": "0.5"}}}')
    env = serl.ExecutionEnv(data=data, seed=0, reward=cand)
    assert all(r == 0.5 for _, r, _ in first_steps(env)[1:])


def test_a_state_module_file_appends_its_features(data, tmp_path):
    state = tmp_path / "state.toml"
    state.write_text(
        '[[features]]\nname = "twice_spread"\nprogram = "spread * 2"\n'
        '[[features]]\nname = "held"\nprogram = "inventory_left"\n'
    )
    plain = serl.ExecutionEnv(data=data, seed=0)
    designed = serl.ExecutionEnv(data=data, seed=0, state=state)
    assert designed.obs_names == plain.obs_names + ["twice_spread", "held"]
    spread = plain.obs_names.index("spread")
    for (a, _, _), (b, _, _) in zip(first_steps(plain), first_steps(designed)):
        np.testing.assert_array_equal(b[: len(a)], a)
        assert b[-2] == np.float32(a[spread] * np.float32(2)) or abs(b[-2] - 2 * a[spread]) < 1e-5
        assert abs(b[-1] - a[1]) < 1e-6
