//! Faults on a real Slurm cluster (a one-node cluster on loopback,
//! `tests/slurm.sh`): a task killed with SIGKILL, the same task run twice
//! at once, a coordinator killed while its array runs, a task past its
//! time limit. Each run of the quick evolve config must still give the
//! tables of a clean local run.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::slurm::{skip_note, skipped, Slurm};
use common::{read_json, repo, serl, text};
use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The test tables of a run (its `test/summary.json` without where and
/// when it was written).
fn tables(run: &Path) -> Value {
    let mut v = read_json(&run.join("test/summary.json"));
    if let Some(o) = v.as_object_mut() {
        o.remove("provenance");
    }
    v
}

fn config(dir: &Path, cluster: &str) -> PathBuf {
    let base = common::shipped_config("configs/evolve.toml");
    let p = dir.join(format!("evolve-{}.toml", cluster.len()));
    std::fs::write(&p, format!("{base}\n{cluster}\n")).unwrap();
    p
}

fn coordinator(cfg: &Path, out: &Path, conf: &Path, resume: bool) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_serl"));
    if resume {
        cmd.args(["evolve", "--resume", s(out)]);
    } else {
        cmd.args(["evolve", "--config", s(cfg), "--out", s(out)]);
    }
    cmd.current_dir(repo())
        .env("SLURM_CONF", conf)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `what` to hold, at most three minutes.
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(180), "{what}: never");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The process ids of `serl task run` processes working on `run`.
fn task_processes(run: &Path) -> Vec<String> {
    let o = Command::new("pgrep")
        .args(["-f", &format!("task run {}", s(run))])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[test]
fn faults_on_a_slurm_cluster_leave_the_clean_runs_tables() {
    let name = "faults_on_a_slurm_cluster_leave_the_clean_runs_tables";
    let _ = std::fs::remove_file(skip_note(name));
    let slurm = match Slurm::up() {
        Ok(s) => s,
        Err(why) => return skipped(name, &why),
    };
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    let o = serl(&[
        "evolve",
        "--config",
        s(&config(dir.path(), "")),
        "--out",
        s(&local),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let clean = tables(&local);
    let cfg = config(dir.path(), "[cluster]\nengine = \"slurm\"\nretries = 1");

    // A task killed with SIGKILL while it trains is submitted again, and
    // the run's tables are the clean run's.
    let killed = dir.path().join("task-killed");
    let c = coordinator(&cfg, &killed, &slurm.conf, false);
    wait_until("a task of the first batch", || {
        !task_processes(&killed).is_empty()
    });
    let victim = task_processes(&killed)[0].clone();
    assert!(Command::new("kill")
        .args(["-9", &victim])
        .status()
        .unwrap()
        .success());
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(tables(&killed), clean);
    let retried = std::fs::read_dir(killed.join("tasks/logs/i0"))
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with("-a1"));
    assert!(retried, "the killed task was not submitted again");

    the_same_task_run_twice_at_once_writes_the_same_bytes(&killed);

    // The coordinator killed while its second batch runs: the resumed one
    // cancels that array from its recorded id, submits nothing already
    // done, and ends with the clean run's tables.
    let run = dir.path().join("coordinator-killed");
    let mut first = coordinator(&cfg, &run, &slurm.conf, false);
    let jobs = || serl_cluster::recorded_jobs(&run);
    wait_until("the second batch's array", || {
        jobs().len() >= 2 && !task_processes(&run).is_empty()
    });
    first.kill().unwrap();
    first.wait().unwrap();
    let left = jobs().last().unwrap().clone();
    let done_batch = jobs()[0].batch.clone();
    let submissions = || jobs().iter().filter(|j| j.batch == done_batch).count();
    let i0_submissions = submissions();
    let out = coordinator(&cfg, &run, &slurm.conf, true)
        .wait_with_output()
        .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!("cancelled Slurm job {}", left.id)),
        "{said}"
    );
    assert_eq!(
        submissions(),
        i0_submissions,
        "a finished batch was submitted again"
    );
    assert_eq!(tables(&run), clean);

    // A task past its time limit is reported with the scheduler's reason.
    std::env::set_var("SLURM_CONF", &slurm.conf);
    let slow = dir.path().join("slow");
    let config = serl_cluster::ClusterConfig {
        engine: serl_cluster::EngineKind::Slurm,
        retries: 0,
        slurm: serl_cluster::SlurmConfig {
            time: Some("1".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let runner = vec!["bash".into(), "-c".into(), "sleep 600".into()];
    let cluster = serl_cluster::Cluster::new(config, &slow, runner, &repo()).unwrap();
    let task = serl_cluster::NewTask {
        kind: "sleep".into(),
        seed: 0,
        output: "out.json".into(),
        input: Value::Null,
    };
    let idx = cluster.plan_batch("slow", vec![task]).unwrap();
    let err = cluster.run_batch("slow", &idx).unwrap_err().to_string();
    assert!(
        err.contains("stopped it at its time limit ([cluster.slurm] time = \"1\")"),
        "{err}"
    );
}

/// The same task run twice at once: both succeed, with the same bytes.
fn the_same_task_run_twice_at_once_writes_the_same_bytes(killed: &Path) {
    let plan = std::fs::read_to_string(killed.join("tasks.jsonl")).unwrap();
    let task0: Value = serde_json::from_str(plan.lines().next().unwrap()).unwrap();
    let output = killed.join(task0["output"].as_str().unwrap());
    let before = std::fs::read(&output).unwrap();
    let twice: Vec<Child> = (0..2)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_serl"))
                .args(["task", "run", s(killed), "--index", "0", "--force"])
                .current_dir(repo())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut t in twice {
        assert!(
            t.wait().unwrap().success(),
            "a task run beside itself failed"
        );
    }
    assert_eq!(std::fs::read(&output).unwrap(), before);
}
