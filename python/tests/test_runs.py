"""serl.load_run reads the run directories serl writes, and a trained
policy from one plays in serl.backtest; serl.run_train and serl.run_evolve
run what the binary runs."""

import json
import subprocess

import pytest

import serl


def test_a_train_run_loads_and_its_policy_backtests(data, serl_bin, tmp_path):
    run_dir = tmp_path / "ppo"
    subprocess.run(
        [str(serl_bin), "train", "--data", str(data), "--decision-minutes", "30",
         "--total-steps", "4096", "--out", str(run_dir)],
        check=True, capture_output=True,
    )
    run = serl.load_run(run_dir)
    assert run.kind == "train"
    assert run.metrics is not None and len(run.metrics) >= 1
    assert {"update", "env_steps", "loss"} <= set(run.metrics.columns)
    assert run.config["env"]["decision_minutes"] == 30
    result = serl.backtest(data=data, strategies=["twap", f"policy:{run_dir}"],
                           policies={"mine": run_dir}, config=run_dir / "train.toml")
    table = result.table.set_index("strategy")
    assert table.loc["mine", "pa"] == table.loc[f"policy:{run_dir.name}", "pa"]


def test_an_evolve_run_loads_its_designs_candidates_and_tables(root, serl_bin, tmp_path):
    run_dir = tmp_path / "evolve"
    subprocess.run(
        [str(serl_bin), "evolve", "--config", str(root / "configs" / "evolve.toml"),
         "--out", str(run_dir)],
        check=True, capture_output=True, cwd=root,
    )
    run = serl.load_run(run_dir)
    assert run.kind == "evolve"
    assert len(run.candidates) >= 15
    assert run.best in run.designs
    assert {"reward", "state", "architecture"} <= set(run.designs[run.best])
    assert run.test is not None and {"strategy", "env", "pa", "pa_lo", "pa_hi"} <= set(run.test.columns)
    assert "serl-best" in run.finals and run.finals["serl-best"].kind == "train"
    # The recommendation comes first: the bundled data's one validation
    # day cannot tell a design from noise, so plain PPO is recommended.
    assert run.recommendation["recommended"] == "ppo-default"
    assert "cannot tell" in run.recommendation["reason"]
    assert repr(run).index("recommended=") < repr(run).index("candidates=")
    assert "recommended" not in run.finals
    assert (run_dir / "final" / "recommended").resolve() == (run_dir / "final" / "ppo-default").resolve()


def test_a_folder_that_is_no_run_is_refused(tmp_path):
    with pytest.raises(serl.SerlError, match="not a serl run directory"):
        serl.load_run(tmp_path)
    with pytest.raises(serl.SerlError, match="does not exist"):
        serl.load_run(tmp_path / "missing")


def test_run_train_trains_as_serl_train_does(data, tmp_path):
    run = serl.run_train(tmp_path / "sac", data=data, algo="sac", total_steps=2048, seed=3)
    assert run.kind == "train"
    assert run.metrics is not None and len(run.metrics) >= 1
    assert (tmp_path / "sac" / "final.bpk").is_file()
    assert json.loads((tmp_path / "sac" / "final.json").read_text())["algo"] == "sac"
    assert json.loads((tmp_path / "sac" / "serl-run.json").read_text())["kind"] == "train"
    # A finished run is not written over; an unknown learner is named.
    with pytest.raises(serl.SerlError, match="exists and is not empty"):
        serl.run_train(tmp_path / "sac", data=data, total_steps=2048)
    with pytest.raises(serl.SerlError, match="algo `a2c`"):
        serl.run_train(tmp_path / "a2c", data=data, algo="a2c")


def test_run_evolve_runs_the_loop_and_its_report(root, tmp_path):
    run = serl.run_evolve(tmp_path / "evolve", config=root / "configs" / "evolve.toml")
    assert run.kind == "evolve"
    assert len(run.candidates) >= 15
    assert run.best in run.designs
    assert (tmp_path / "evolve" / "report.html").is_file()
    assert run.recommendation["recommended"] == "ppo-default"
