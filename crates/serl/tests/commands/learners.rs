//! The learners as a user meets them: each trains, checkpoints, resumes
//! and backtests through `serl train` and `serl backtest`, SAC is a
//! baseline of `serl evolve`, and what earlier versions wrote (configs,
//! policies, weights) still loads.

use crate::common;

use std::path::Path;

use common::{repo, serl, text, tiny_config_from};
use serl_train::{env_rng, Algo, DeviceChoice, Policy, TrainConfig};

/// `serl train` with `args`, 30-minute decisions on the bundled data, into
/// `run`.
fn train(run: &Path, steps: &str, extra: &[&str]) {
    let mut args = vec![
        "train",
        "--data",
        "data/lean",
        "--out",
        run.to_str().unwrap(),
        "--total-steps",
        steps,
        "--decision-minutes",
        "30",
    ];
    args.extend_from_slice(extra);
    let o = serl(&args);
    assert!(o.status.success(), "{}", text(&o));
}

/// SAC trains its continuous share with `--algo sac`, keeps its twin
/// critics, target value, temperature and both optimisers in the
/// checkpoint, goes on from them when resumed, and its policy backtests
/// as any other.
#[test]
fn sac_trains_checkpoints_resumes_and_backtests() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    // 2 updates of 8 environments × 256 decisions; learning starts at 1,000.
    train(&run, "4096", &["--algo", "sac"]);
    for f in [
        "model.bpk",
        "target.bpk",
        "twin-q.bpk",
        "optim.bin",
        "twin-optim.bin",
        "sac-temperature.json",
    ] {
        assert!(run.join("checkpoint").join(f).exists(), "{f}");
    }
    let temperature = || -> f64 {
        let t: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(run.join("checkpoint/sac-temperature.json")).unwrap(),
        )
        .unwrap();
        t["t"].as_f64().unwrap()
    };
    let first = temperature();
    assert!(first > 0.0, "no gradient step was taken");
    let policy: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("final.json")).unwrap()).unwrap();
    assert_eq!(
        (policy["algo"].as_str(), policy["squash"].as_str()),
        (Some("sac"), Some("tanh"))
    );

    let cfg = std::fs::read_to_string(run.join("train.toml")).unwrap();
    std::fs::write(
        run.join("train.toml"),
        cfg.replace("total_steps = 4096", "total_steps = 8192"),
    )
    .unwrap();
    let o = serl(&["train", "--resume", "--out", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        temperature() > first,
        "the temperature's Adam restarted on resume"
    );
    let lines = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 4);
    let last: serde_json::Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
    for field in ["temperature", "entropy", "policy_loss", "value_loss"] {
        assert!(
            last[field].as_f64().is_some_and(f64::is_finite),
            "{field}: {last}"
        );
    }

    let bt = dir.path().join("bt");
    let strategy = format!("policy:{}", run.display());
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--split",
        "test",
        "--strategy",
        "twap",
        "--strategy",
        &strategy,
        "--out",
        bt.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("policy:run"), "{}", text(&o));
}

/// `[evolve] baselines` adds SAC beside plain PPO: it retrains on the
/// plain design as `sac-default` and takes its row in the report, while
/// plain PPO stays the verdict's reference whatever the list's order; a
/// list without PPO, or with a learner twice, is refused by name.
#[test]
fn sac_is_a_baseline_of_evolve() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config_from(dir.path(), "configs/evolve.toml", "");
    let text_cfg = std::fs::read_to_string(&cfg).unwrap();
    let with_sac = text_cfg.replace(
        "lockbox = false",
        "lockbox = false\nbaselines = [\"sac\", \"ppo\"]",
    );
    assert_ne!(with_sac, text_cfg, "the shipped config changed");
    std::fs::write(&cfg, with_sac).unwrap();
    let run = dir.path().join("run");
    let o = serl(&[
        "evolve",
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let sac = run.join("final/sac-default");
    assert!(sac.join("final.bpk").exists());
    assert!(!run.join("final/ddqn-default").exists());
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("sac-default"), "{report}");
    let evidence: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("evidence.json")).unwrap()).unwrap();
    assert_eq!(evidence["plain_final"], "ppo-default");

    for (list, says) in [
        ("[\"sac\"]", "evolve.baselines must include \"ppo\""),
        (
            "[\"ppo\", \"sac\", \"sac\"]",
            "evolve.baselines names \"sac\" twice",
        ),
    ] {
        let bad = std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("[\"sac\", \"ppo\"]", list);
        let bad_cfg = dir.path().join("bad.toml");
        std::fs::write(&bad_cfg, bad).unwrap();
        let o = serl(&[
            "evolve",
            "--config",
            bad_cfg.to_str().unwrap(),
            "--out",
            dir.path().join("bad").to_str().unwrap(),
        ]);
        assert!(!o.status.success());
        assert!(text(&o).contains(says), "{}", text(&o));
    }
}

/// A PPO and a DDQN policy and a training config as the release before SAC
/// wrote them (`tests/fixtures/before-sac`, from commit 0e7bc8d) load,
/// act, and validate; the config written again gains no `sac` table.
#[test]
fn configs_policies_and_weights_written_before_sac_still_load() {
    let fixtures = repo().join("crates/serl/tests/fixtures/before-sac");
    let device = DeviceChoice::Cpu.device().unwrap();
    let mut rng = env_rng(7, 0);
    for (dir, algo) in [("ppo", Algo::PPO), ("ddqn", Algo::DDQN)] {
        let policy = Policy::load(&fixtures.join(dir), "final", &device).unwrap();
        assert_eq!(policy.meta.algo, algo);
        let row = vec![0.5f32; policy.width()];
        let act = policy.act(&row, 1, false, 0.0, &mut rng)[0];
        // A share for DDQN's fractions; a tilt of TWAP's pace for this PPO
        // (its pace clips the tilt to [-1, 1] when it trades).
        assert!(act.env_action.is_finite(), "{dir}: {act:?}");
        if algo == Algo::DDQN {
            assert!(policy.meta.discrete.contains(&act.env_action), "{act:?}");
        }
    }
    let text = std::fs::read_to_string(fixtures.join("train/config.json")).unwrap();
    let cfg: TrainConfig = serde_json::from_str(&text).unwrap();
    cfg.validate(cfg.obs_dim()).unwrap();
    let again = serde_json::to_value(&cfg).unwrap();
    assert!(again.get("sac").is_none(), "{again}");
    assert_eq!(again["algo"], "ppo");
}

/// DDQN's fused learner keeps its Adam moments and target network in the
/// checkpoint, and a resumed run goes on from them.
#[test]
fn a_fused_ddqn_run_resumes_with_its_optimiser() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let run_s = run.to_str().unwrap();
    train(&run, "4096", &["--algo", "ddqn"]);
    let adam_steps = || {
        let optim: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(run.join("checkpoint/fused-optim.json")).unwrap(),
        )
        .unwrap();
        optim["time"].as_i64().unwrap()
    };
    assert!(run.join("checkpoint/target.bpk").exists());
    let first = adam_steps();
    assert!(first > 0, "no gradient step was taken");

    let mut cfg = std::fs::read_to_string(run.join("train.toml")).unwrap();
    cfg = cfg.replace("total_steps = 4096", "total_steps = 8192");
    std::fs::write(run.join("train.toml"), cfg).unwrap();
    let o = serl(&["train", "--resume", "--out", run_s]);
    assert!(o.status.success(), "{}", text(&o));
    // The replay buffer refills first, then Adam counts on from `first`.
    assert!(adam_steps() > first, "the optimiser restarted on resume");
    let lines = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 4);
}

/// `--algo` takes its names from the learner registry: `--help` lists
/// every registered learner beside the teams', and an unknown name is
/// refused with that list before anything is read.
#[test]
fn algo_names_come_from_the_registry() {
    let help = serl(&["train", "--help"]);
    let help = text(&help);
    let names: Vec<&str> = Algo::keys();
    for name in names.iter().chain(&["mappo", "ippo"]) {
        assert!(help.contains(name), "--help lacks {name}: {help}");
    }
    let o = serl(&["train", "--data", "data/lean", "--algo", "td3"]);
    assert!(!o.status.success());
    let err = text(&o);
    assert!(
        err.contains("td3") && err.contains("ppo, ddqn, sac"),
        "{err}"
    );
}
