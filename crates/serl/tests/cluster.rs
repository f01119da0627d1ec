//! Runs cut into tasks (docs/cluster.md). The quick evolve run
//! (`configs/evolve.toml`) gives the same test tables whoever runs its
//! tasks: this process's threads (`engine = "local"`), `serl task run`
//! processes started one by one in a shuffled order, or a real one-node
//! Slurm cluster on loopback (`tests/slurm.sh`, which installs Slurm
//! where it can and says why it skipped where it cannot).

mod common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::slurm::{skip_note, skipped, Slurm};
use common::{read_json, repo, serl, text};
use serde_json::Value;

/// A report's `summary.json` without the time it was written.
fn summary(path: &Path) -> Value {
    let mut v = read_json(path);
    v["provenance"]
        .as_object_mut()
        .expect("a provenance")
        .remove("created");
    v
}

/// An evolve run's test tables.
fn tables(run: &Path) -> Value {
    summary(&run.join("test").join("summary.json"))
}

/// The quick run's tables with `engine = "local"`, computed once.
fn local_tables() -> &'static Value {
    &local_run().1
}

/// What `--seeds 2` found on the quick run with `engine = "local"`.
fn local_confirmation() -> &'static Value {
    &local_run().2
}

/// The quick run with `--seeds 2`, here: its tables and `confirm.json`.
fn local_run() -> &'static (tempfile::TempDir, Value, Value) {
    static LOCAL: OnceLock<(tempfile::TempDir, Value, Value)> = OnceLock::new();
    LOCAL.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("local");
        let o = serl(&[
            "evolve",
            "--config",
            "configs/evolve.toml",
            "--out",
            path(&out),
            "--seeds",
            "2",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            !out.join("tasks.jsonl").exists(),
            "the local engine plans no tasks"
        );
        let t = tables(&out);
        let c = read_json(&out.join("confirm/confirm.json"));
        (dir, t, c)
    })
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// configs/evolve.toml with a `[cluster]` table added.
fn quick_config(dir: &Path, cluster: &str) -> PathBuf {
    let base = common::shipped_config("configs/evolve.toml");
    let p = dir.join("evolve-cluster.toml");
    std::fs::write(&p, format!("{base}\n{cluster}\n")).unwrap();
    p
}

/// A seeded shuffle (xorshift), so a failure replays.
fn shuffle(v: &mut [usize], seed: &mut u64) {
    for i in (1..v.len()).rev() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        v.swap(i, (*seed % (i as u64 + 1)) as usize);
    }
}

/// The indices a batch's Indexed Job runs (`"--indices", "5-7"`).
fn manifest_indices(yaml: &str) -> Vec<usize> {
    let list = yaml
        .split("\"--indices\", \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the manifest names its indices");
    serl_cluster::indices::parse(list).unwrap()
}

/// Plays the cluster for a coordinator that only writes manifests
/// (`kubernetes`, `apply = false`): each new batch's tasks run as
/// `serl task run` processes, one by one, in a shuffled order. Returns
/// the batches it ran.
fn play_the_cluster(out: &Path, coordinator: &mut std::process::Child) -> usize {
    let manifests = out.join("tasks").join("manifests");
    let mut seen = HashSet::new();
    let mut seed = 0x5EED_u64;
    let t0 = Instant::now();
    loop {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&manifests)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        for f in files {
            if f.extension().is_some_and(|e| e == "yaml") && seen.insert(f.clone()) {
                let mut idx = manifest_indices(&std::fs::read_to_string(&f).unwrap());
                shuffle(&mut idx, &mut seed);
                for i in idx {
                    let o = serl(&["task", "run", path(out), "--index", &i.to_string()]);
                    assert!(o.status.success(), "task {i}: {}", text(&o));
                }
            }
        }
        if let Some(status) = coordinator.try_wait().unwrap() {
            assert!(status.success(), "the coordinator failed");
            return seen.len();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(900),
            "the run takes too long"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn tasks_run_one_by_one_in_a_shuffled_order_give_the_local_run_s_tables() {
    // The local run the tables are compared with starts now, beside the
    // tasks played one at a time below (a failure in it fails the test
    // where its tables are read).
    std::thread::spawn(|| {
        let _ = std::panic::catch_unwind(local_run);
    });
    let dir = tempfile::tempdir().unwrap();
    let cfg = quick_config(
        dir.path(),
        "[cluster]\nengine = \"kubernetes\"\n[cluster.kubernetes]\napply = false\npoll_secs = 0.1\ntimeout_secs = 900",
    );
    let out = dir.path().join("shuffled");
    let trace = dir.path().join("trace.json");
    let mut coordinator = Command::new(env!("CARGO_BIN_EXE_serl"))
        .args(["--trace", path(&trace), "evolve", "--config", path(&cfg)])
        .args(["--out", path(&out)])
        .current_dir(repo())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let batches = play_the_cluster(&out, &mut coordinator);
    assert!(
        batches >= 4,
        "rounds, ES generations, baseline and finals: {batches}"
    );
    assert_eq!(&tables(&out), local_tables());
    every_task_on_the_coordinators_timeline(&trace, &out);

    // A task run twice (a scheduler's retry) writes the same bytes.
    let plan = serl_cluster::Plan::open(&out).unwrap();
    let first = plan.tasks()[0].clone();
    let before = std::fs::read(plan.output_path(&first)).unwrap();
    let o = serl(&["task", "run", path(&out), "--index", "0", "--force"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !text(&o).contains(" on : "),
        "the host is named: {}",
        text(&o)
    );
    assert_eq!(std::fs::read(plan.output_path(&first)).unwrap(), before);

    // A coordinator that died after its tasks finished resumes from their
    // outputs: nothing is submitted again, the tables are the same.
    std::fs::remove_dir_all(out.join("candidates")).unwrap();
    std::fs::remove_dir_all(out.join("test")).unwrap();
    let manifests = std::fs::read_dir(out.join("tasks/manifests"))
        .unwrap()
        .count();
    let o = serl(&["evolve", "--resume", path(&out)]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_dir(out.join("tasks/manifests"))
            .unwrap()
            .count(),
        manifests
    );
    assert_eq!(&tables(&out), local_tables());

    // Confirming with seeds: their trainings are the cluster's tasks too,
    // and the confirmation is the local run's.
    let mut coordinator = Command::new(env!("CARGO_BIN_EXE_serl"))
        .args(["evolve", "--resume", path(&out), "--seeds", "2"])
        .current_dir(repo())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    play_the_cluster(&out, &mut coordinator);
    let plan = serl_cluster::Plan::open(&out).unwrap();
    assert!(
        plan.tasks().iter().any(|t| t.batch.contains("confirm")),
        "the seeds did not train as tasks"
    );
    assert_eq!(
        &read_json(&out.join("confirm/confirm.json")),
        local_confirmation()
    );

    // The plan, as a user sees it.
    let o = serl(&["task", "list", path(&out)]);
    assert!(
        o.status.success() && text(&o).contains("evolve.final"),
        "{}",
        text(&o)
    );
}

/// The coordinator's `--trace` holds each task the cluster ran (as a
/// process of its own) on its own row, on the coordinator's clock: the
/// tasks, played one after another, follow each other there, inside the
/// coordinator's run.
fn every_task_on_the_coordinators_timeline(trace: &Path, out: &Path) {
    let events = read_json(trace);
    let events = events.as_array().expect("a trace is an array of events");
    let name_of = |pid: u64| {
        events.iter().find_map(|e| {
            let named = e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == pid;
            named.then(|| e["args"]["name"].as_str().unwrap_or("").to_string())
        })
    };
    assert_eq!(name_of(1).as_deref(), Some("serl (coordinator)"));
    let span = |pid: u64| -> Vec<f64> {
        let ts = events.iter().filter(|e| e["pid"] == pid && e["ph"] != "M");
        ts.filter_map(|e| e["ts"].as_f64()).collect()
    };
    let bounds = |times: &[f64]| {
        let least = times.iter().copied().fold(f64::INFINITY, f64::min);
        (
            least,
            times.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        )
    };
    let (start, end) = bounds(&span(1));
    let plan = serl_cluster::Plan::open(out).unwrap();
    let mut last_task_end = start;
    for pid in 2..2 + plan.tasks().len() as u64 {
        let name = name_of(pid).unwrap_or_else(|| panic!("no process {pid} in the trace"));
        assert!(name.starts_with("task "), "{name}");
        let times = span(pid);
        assert!(!times.is_empty(), "{name} has no spans");
        let (first, last) = bounds(&times);
        // A task's last span may close a moment after the coordinator saw
        // its output; a second is far less than a run.
        assert!(
            first > last_task_end && last < end + 1e6,
            "{name} is off the coordinator's clock"
        );
        last_task_end = last;
    }
}

/// A config whose coordinator only writes Kubernetes manifests and waits,
/// for [`play_the_cluster`] to run its tasks.
fn manifest_only_config(dir: &Path) -> PathBuf {
    let cfg = dir.join("k8s.toml");
    std::fs::write(
        &cfg,
        "[cluster]\nengine = \"kubernetes\"\n[cluster.kubernetes]\napply = false\npoll_secs = 0.1\ntimeout_secs = 600\n",
    )
    .unwrap();
    cfg
}

/// `serl backtest` of two strategies in both venues on the bundled data,
/// with extra arguments (the cluster played where they ask for it); its
/// summary and order rows.
fn backtest(out: &Path, extra: &[&str], envs: &[(&str, &Path)]) -> (Value, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_serl"));
    cmd.args(["backtest", "--data", "data/lean", "--split", "all"])
        .args(["--strategy", "twap", "--strategy", "ac", "--env", "both"])
        .args(["--out", path(out)])
        .args(extra)
        .current_dir(repo());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    play_the_cluster(out, &mut child);
    (
        summary(&out.join("summary.json")),
        read(&out.join("orders.csv")),
    )
}

#[test]
fn a_backtest_in_shards_run_in_a_shuffled_order_gives_the_local_rows() {
    let dir = tempfile::tempdir().unwrap();
    let local = backtest(&dir.path().join("local"), &[], &[]);
    let cfg = manifest_only_config(dir.path());
    let out = dir.path().join("sharded");
    let sharded = backtest(&out, &["--config", path(&cfg), "--shards", "3"], &[]);
    assert_eq!(sharded, local);
    let batches = std::fs::read_dir(out.join("tasks/manifests"))
        .unwrap()
        .count();
    assert_eq!(batches, 1, "one batch of shards");
}

/// `serl simulate` (6 seeds) and `serl simulate impact` (4 seeds, two
/// sizes) of one bundled session; their checks and study, byte for byte.
fn simulations(out: &Path, extra: &[&str], envs: &[(&str, &Path)]) -> (String, String) {
    let session = common::BUNDLED_DAY;
    let run = |args: Vec<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_serl"));
        cmd.args(args).args(session).args(extra).current_dir(repo());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        cmd
    };
    let days = spawn_or_run(
        run(vec![
            "simulate",
            "--seeds",
            "6",
            "--out",
            path(&out.join("days")),
        ]),
        out,
        "days",
    );
    let impact = run(vec![
        "simulate",
        "impact",
        "--seeds",
        "4",
        "--sizes",
        "0.01,0.05",
        "--out",
        path(&out.join("impact")),
    ]);
    let impact = spawn_or_run(impact, out, "impact");
    (
        read(&days.join("checks.json")),
        read(&impact.join("impact.json")),
    )
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Runs `cmd` to its end, playing the cluster for it when its output
/// directory's engine only writes manifests; returns that directory.
fn spawn_or_run(mut cmd: Command, out: &Path, name: &str) -> PathBuf {
    let dir = out.join(name);
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    play_the_cluster(&dir, &mut child);
    dir
}

#[test]
fn simulated_seeds_run_as_tasks_in_a_shuffled_order_give_the_local_checks() {
    let dir = tempfile::tempdir().unwrap();
    let local = simulations(&dir.path().join("local"), &[], &[]);
    let cfg = manifest_only_config(dir.path());
    let tasks = simulations(&dir.path().join("tasks"), &["--config", path(&cfg)], &[]);
    assert_eq!(tasks, local);
    let plan = serl_cluster::Plan::open(&dir.path().join("tasks/impact")).unwrap();
    assert_eq!(plan.tasks().len(), 4, "one task per seed");
}

#[test]
fn task_run_explains_a_missing_index_and_a_missing_plan() {
    let dir = tempfile::tempdir().unwrap();
    let o = serl(&["task", "run", path(dir.path())]);
    assert!(!o.status.success());
    assert!(text(&o).contains("SLURM_ARRAY_TASK_ID"), "{}", text(&o));
    let o = serl(&["task", "run", path(dir.path()), "--index", "0"]);
    assert!(text(&o).contains("has no tasks.jsonl"), "{}", text(&o));
}

/// A one-node Slurm cluster for the test's lifetime.
#[test]
fn a_slurm_array_job_per_batch_gives_the_local_run_s_tables() {
    let name = "a_slurm_array_job_per_batch_gives_the_local_run_s_tables";
    let _ = std::fs::remove_file(skip_note(name));
    let slurm = match Slurm::up() {
        Ok(s) => s,
        Err(why) => return skipped(name, &why),
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = quick_config(dir.path(), "[cluster]\nengine = \"slurm\"\nretries = 1");
    let out = dir.path().join("slurm-run");
    let o = Command::new(env!("CARGO_BIN_EXE_serl"))
        .args(["evolve", "--config", path(&cfg), "--out", path(&out)])
        .current_dir(repo())
        .env("SLURM_CONF", &slurm.conf)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("engine: slurm"), "{}", text(&o));
    assert_eq!(&tables(&out), local_tables());
    let submission = std::fs::read_dir(out.join("tasks/logs/i0"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let log = submission.path().join("0.log");
    assert!(
        std::fs::read_to_string(&log).unwrap().contains("wrote"),
        "{}",
        log.display()
    );

    // A backtest as an array of shards gives the local rows.
    let local = backtest(&dir.path().join("bt-local"), &[], &[]);
    let conf = [("SLURM_CONF", slurm.conf.as_path())];
    let sharded = backtest(
        &dir.path().join("bt-slurm"),
        &["--engine", "slurm", "--shards", "3"],
        &conf,
    );
    assert_eq!(sharded, local);

    // So are simulated seeds.
    let local = simulations(&dir.path().join("sim-local"), &[], &[]);
    let on_slurm = simulations(&dir.path().join("sim-slurm"), &["--engine", "slurm"], &conf);
    assert_eq!(on_slurm, local);

    // A task that keeps failing stops the run with its log.
    std::env::set_var("SLURM_CONF", &slurm.conf);
    let bad = dir.path().join("failing");
    let config = serl_cluster::ClusterConfig {
        engine: serl_cluster::EngineKind::Slurm,
        retries: 1,
        ..Default::default()
    };
    let exe = env!("CARGO_BIN_EXE_serl").to_string();
    let runner = vec![exe, "task".into(), "run".into(), path(&bad).into()];
    let cluster = serl_cluster::Cluster::new(config, &bad, runner, &repo()).unwrap();
    let task = serl_cluster::NewTask {
        kind: "no.such.kind".into(),
        seed: 0,
        output: "out.json".into(),
        input: Value::Null,
    };
    let idx = cluster.plan_batch("bad", vec![task.clone()]).unwrap();
    let err = cluster.run_batch("bad", &idx).unwrap_err().to_string();
    assert!(
        err.contains("failed 2 times") && err.contains("no.such.kind"),
        "{err}"
    );

    // A task that succeeds without its output showing up here is what a
    // run directory outside the shared filesystem looks like.
    let unshared = dir.path().join("unshared");
    let config = serl_cluster::ClusterConfig {
        engine: serl_cluster::EngineKind::Slurm,
        ..Default::default()
    };
    let cluster =
        serl_cluster::Cluster::new(config, &unshared, vec!["true".into()], &repo()).unwrap();
    let idx = cluster.plan_batch("lost", vec![task]).unwrap();
    let err = cluster.run_batch("lost", &idx).unwrap_err().to_string();
    assert!(
        err.contains("not visible here") && err.contains("shares"),
        "{err}"
    );
}

/// A HyperQueue server and one worker, in a directory of their own.
struct HyperQueue {
    dir: tempfile::TempDir,
    children: Vec<std::process::Child>,
}

impl HyperQueue {
    fn up() -> Result<HyperQueue, String> {
        let found = Command::new("hq").arg("--version").output();
        if !found.is_ok_and(|o| o.status.success()) {
            return Err("no `hq` on PATH (HyperQueue is not packaged for Debian or on crates.io; build it from its repository)".into());
        }
        let dir = tempfile::tempdir().unwrap();
        let server_dir = dir.path().to_path_buf();
        let spawn = |args: &[&str]| {
            Command::new("hq")
                .args(args)
                .arg("--server-dir")
                .arg(&server_dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| e.to_string())
        };
        let mut children = vec![spawn(&["server", "start"])?];
        std::thread::sleep(Duration::from_secs(1));
        children.push(spawn(&["worker", "start"])?);
        let hq = HyperQueue { dir, children };
        for _ in 0..60 {
            let o = Command::new("hq")
                .args(["worker", "list", "--server-dir"])
                .arg(hq.dir.path())
                .output()
                .map_err(|e| e.to_string())?;
            if String::from_utf8_lossy(&o.stdout).contains("RUNNING") {
                return Ok(hq);
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        Err("the HyperQueue worker never came up".into())
    }
}

impl Drop for HyperQueue {
    fn drop(&mut self) {
        let _ = Command::new("hq")
            .args(["server", "stop", "--server-dir"])
            .arg(self.dir.path())
            .output();
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn a_hyperqueue_array_per_batch_gives_the_local_run_s_tables() {
    let name = "a_hyperqueue_array_per_batch_gives_the_local_run_s_tables";
    let _ = std::fs::remove_file(skip_note(name));
    let hq = match HyperQueue::up() {
        Ok(h) => h,
        Err(why) => return skipped(name, &why),
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hq-run");
    let o = Command::new(env!("CARGO_BIN_EXE_serl"))
        .args([
            "evolve",
            "--config",
            "configs/evolve.toml",
            "--engine",
            "hyperqueue",
        ])
        .args(["--out", path(&out)])
        .current_dir(repo())
        .env("HQ_SERVER_DIR", hq.dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(&tables(&out), local_tables());
}
