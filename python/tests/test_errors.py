"""Bad input raises a clear exception (serl.SerlError, a ValueError, with
serl's message), never a crash of the interpreter."""

import shutil

import numpy as np
import pytest

import serl


def test_a_missing_data_path_is_named(tmp_path):
    with pytest.raises(serl.SerlError, match="no-such-folder"):
        serl.ExecutionEnv(data=tmp_path / "no-such-folder")


def test_an_unknown_column_is_named(root, tmp_path):
    bars = tmp_path / "CLEAN.csv"
    shutil.copy(root / "crates" / "serl-data" / "tests" / "fixtures" / "CLEAN.csv", bars)
    with pytest.raises(serl.SerlError) as e:
        serl.ExecutionEnv(data=bars, config={"data": {"columns": {"close": "NoSuchColumn"}}})
    assert "CLEAN.csv:1" in str(e.value) and "no column `NoSuchColumn`" in str(e.value)


def test_a_config_file_error_names_the_file_line_and_field(tmp_path, data):
    bad = tmp_path / "train.toml"
    bad.write_text("[env]\ndecision_minutes = 30\nno_such_field = 1\n")
    with pytest.raises(serl.SerlError) as e:
        serl.ExecutionEnv(data=data, config=bad)
    assert "train.toml" in str(e.value) and "no_such_field" in str(e.value) and "line 3" in str(e.value)


def test_an_invalid_state_module_file_is_named(tmp_path, data):
    state = tmp_path / "state.toml"
    state.write_text('[[features]]\nname = "x"\nprogram = "spread +* 2"\n')
    with pytest.raises(serl.SerlError, match="state.toml"):
        serl.ExecutionEnv(data=data, state=state)


def test_an_invalid_reward_file_is_named(tmp_path, data):
    reward = tmp_path / "reward.txt"
    reward.write_text("no_such_variable * 2")
    with pytest.raises(serl.SerlError, match="reward.txt") as e:
        serl.ExecutionEnv(data=data, reward=reward)
    assert "no_such_variable" in str(e.value)


def test_a_wrong_action_shape_raises(data):
    env = serl.ExecutionEnv(data=data, seed=0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="1 number"):
        env.step(np.zeros(3))
    vec = serl.VecExecutionEnv(4, data=data, seed=0)
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="4 actions"):
        vec.step(np.zeros((3, 1)))


def test_a_step_before_reset_raises(data):
    env = serl.ExecutionEnv(data=data, seed=0)
    with pytest.raises(serl.SerlError, match="reset"):
        env.step(np.array([0.1], dtype=np.float32))


def test_an_unknown_venue_and_split_are_named(data):
    with pytest.raises(serl.SerlError, match="venue"):
        serl.ExecutionEnv(data=data, venue="moon")
    with pytest.raises(serl.SerlError, match="split"):
        serl.ExecutionEnv(data=data, split="later")


def test_an_out_of_range_order_is_refused(data):
    env = serl.ExecutionEnv(data=data, seed=0)
    with pytest.raises(serl.SerlError, match="order 100000"):
        env.reset(options={"order": 100000})


def test_an_unknown_strategy_is_named(data):
    with pytest.raises(serl.SerlError, match="moonshot"):
        serl.backtest(data=data, strategies=["moonshot"])
