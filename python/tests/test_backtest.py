"""serl.backtest runs serl's backtester; a Python policy plays in it exactly
as it plays in the environments."""

import csv
import json

import numpy as np
import pytest

import serl


def fixed_action(order_id, step):
    """A random policy whose actions are fixed by the order and the step."""
    return float(np.random.default_rng([order_id, step]).uniform(0.0, 0.08))


def test_a_python_random_policy_scores_the_same_in_the_env_and_in_the_backtest(data):
    env = serl.ExecutionEnv(data=data, seed=0, split="validation")
    in_env = {}
    for k, order in enumerate(env.orders):
        env.reset(options={"order": k})
        step, done = 0, False
        while not done:
            _, _, done, _, info = env.step(fixed_action(order["order_id"], step))
            step += 1
        in_env[order["order_id"]] = info["episode"]["pa_bps"]

    result = serl.backtest(
        data=data,
        strategies=["twap"],
        policies={"random": lambda obs, d: fixed_action(d["order_id"], d["step"])},
        split="validation",
    )
    rows = result.orders[result.orders.strategy == "random"]
    assert len(rows) == len(in_env) > 0
    for order_id, pa in zip(rows.order_id, rows.pa_bps):
        assert pa == in_env[order_id], "the same PA to the last digit"
    assert set(result.table.strategy) == {"twap", "random"}
    assert any(t["strategy"] == "random" for t in result.summary["day_tests"])


def test_the_backtest_is_serl_backtests(data, serl_bin, tmp_path):
    import subprocess

    out = tmp_path / "cli"
    subprocess.run(
        [str(serl_bin), "backtest", "--data", str(data), "--split", "validation",
         "--strategy", "twap", "--strategy", "vwap", "--out", str(out)],
        check=True, capture_output=True,
    )
    with open(out / "orders.csv") as f:
        cli = {(r["strategy"], int(r["order_id"])): float(r["pa_bps"]) for r in csv.DictReader(f)}
    result = serl.backtest(data=data, strategies=["twap", "vwap"], split="validation",
                           out=tmp_path / "py")
    py = {(s, o): pa for s, o, pa in zip(result.orders.strategy, result.orders.order_id, result.orders.pa_bps)}
    assert py.keys() == cli.keys()
    for key, pa in py.items():
        assert abs(pa - cli[key]) <= 5e-7, "orders.csv keeps 6 decimals"
    with open(out / "summary.json") as f:
        cli_summary = json.load(f)
    assert result.summary["summaries"] == cli_summary["summaries"], "the same figures to the last digit"
    assert result.summary["day_tests"] == cli_summary["day_tests"]
    assert (tmp_path / "py" / "report.html").is_file()


def test_a_discrete_placing_policy_acts_in_its_action_space(data, root):
    config = root / "configs" / "train-placement.toml"
    env = serl.ExecutionEnv(data=data, config=config, seed=0, split="validation")
    shares = len(env.action_space.nvec) and env.action_space.nvec[0]
    result = serl.backtest(
        data=data,
        config=config,
        strategies=["twap"],
        policies={"touch": lambda obs, d: (shares - 1, 1)},
        split="validation",
    )
    row = result.table[result.table.strategy == "touch"].iloc[0]
    assert row.orders > 0


def test_a_policy_that_raises_stops_the_backtest_with_its_error(data):
    def broken(obs, d):
        raise RuntimeError("the policy broke")

    with pytest.raises(RuntimeError, match="the policy broke"):
        serl.backtest(data=data, policies={"broken": broken}, strategies=[])


def test_a_policy_with_state_plays_the_same_way_every_time(data):
    """Python policies are called from one thread, order after order."""

    def run():
        rng = np.random.default_rng(7)
        result = serl.backtest(
            data=data, strategies=[], split="all",
            policies={"noisy": lambda obs, d: float(rng.uniform(0, 0.1))},
        )
        return list(result.orders.pa_bps)

    assert run() == run()
