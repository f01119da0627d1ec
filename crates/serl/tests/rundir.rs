//! A run directory in real use: one coordinator at a time, a run that
//! resumes after it (or its data) moved, and records that cannot be read,
//! named, set aside and recomputed. Each runs the quick evolve config on
//! the bundled data through the `serl` binary.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::slurm::{skip_note, skipped};
use common::{repo, serl, text, tiny_config_from};

fn tiny_config(dir: &Path) -> PathBuf {
    tiny_config_from(dir, "configs/evolve.toml", "")
}

/// `serl evolve` started in the background, from `cwd`.
fn spawn_evolve(args: &[&str], cwd: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_serl"))
        .arg("evolve")
        .args(args)
        .current_dir(cwd)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_for(path: &Path, what: &str) {
    let t = Instant::now();
    while !path.exists() && t.elapsed() < Duration::from_secs(180) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(path.exists(), "{what} never appeared");
}

fn serl_in(cwd: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_serl"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_second_coordinator_is_refused_by_name_and_a_dead_ones_lock_is_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path());
    let run = dir.path().join("run");
    let mut first = spawn_evolve(&["--config", s(&cfg), "--out", s(&run)], &repo());
    wait_for(&run.join("evolve.toml"), "the first coordinator's run");
    wait_for(&run.join(".lock"), "the first coordinator's lock");

    let second = serl(&["evolve", "--resume", s(&run)]);
    let said = text(&second);
    assert!(!second.status.success(), "a second coordinator ran: {said}");
    assert!(
        said.contains(&format!("is in use by process {}", first.id())),
        "{said}"
    );
    assert!(
        said.contains("serl evolve --config"),
        "the holder's command: {said}"
    );

    first.kill().unwrap(); // SIGKILL: no chance to let go of the lock
    first.wait().unwrap();
    assert!(
        run.join(".lock").exists(),
        "a killed coordinator leaves its lock"
    );
    let resumed = serl(&["evolve", "--resume", s(&run)]);
    let said = text(&resumed);
    assert!(resumed.status.success(), "{said}");
    assert!(
        said.contains(&format!("took over the lock of process {}", first.id()))
            && said.contains("is no longer running"),
        "{said}"
    );
    assert!(
        !run.join(".lock").exists(),
        "a finished run lets go of its lock"
    );
}

#[test]
fn a_moved_run_resumes_from_any_directory_and_moved_data_is_named_with_its_flag() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path());
    // The data the run reads, in a place that will move.
    let data = dir.path().join("bars");
    copy_dir(&repo().join("data/lean"), &data);
    // A clean run, for the tables.
    let clean = dir.path().join("clean");
    let o = serl(&[
        "evolve",
        "--config",
        s(&cfg),
        "--out",
        s(&clean),
        "--data",
        s(&data),
    ]);
    assert!(o.status.success(), "{}", text(&o));

    // Started from the temporary directory (relative paths), killed after
    // its first candidate.
    let mut child = spawn_evolve(
        &["--config", "evolve.toml", "--out", "run", "--data", "bars"],
        dir.path(),
    );
    wait_for(
        &dir.path().join("run/candidates/i0_c0.json"),
        "the first candidate",
    );
    child.kill().unwrap();
    child.wait().unwrap();

    // The run directory and the data move; the resume starts elsewhere.
    let moved = dir.path().join("elsewhere/run");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(dir.path().join("run"), &moved).unwrap();
    let new_data = dir.path().join("bars-moved");
    std::fs::rename(&data, &new_data).unwrap();
    let root = Path::new("/");
    let o = serl_in(root, &["evolve", "--resume", s(&moved)]);
    let said = text(&o);
    assert!(!o.status.success(), "{said}");
    assert!(
        said.contains(s(&data)) && said.contains("(written \"bars\")"),
        "{said}"
    );
    assert!(said.contains("--data NEW_PATH"), "{said}");

    let o = serl_in(
        root,
        &["evolve", "--resume", s(&moved), "--data", s(&new_data)],
    );
    assert!(o.status.success(), "{}", text(&o));
    let orders = |run: &Path| std::fs::read_to_string(run.join("test/orders.csv")).unwrap();
    assert_eq!(
        orders(&moved),
        orders(&clean),
        "the moved run's test differs"
    );
    // The new place is recorded: the next resume needs no flag.
    let o = serl_in(root, &["evolve", "--resume", s(&moved)]);
    assert!(o.status.success(), "{}", text(&o));

    // Other data at the old place is refused by its fingerprint.
    let other = dir.path().join("other");
    copy_dir(&repo().join("data/lean"), &other);
    std::fs::write(other.join("minute/extra.csv"), "x\n").unwrap();
    std::fs::rename(&new_data, dir.path().join("gone")).unwrap();
    let o = serl_in(
        root,
        &["evolve", "--resume", s(&moved), "--data", s(&other)],
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("not the data the run started with"),
        "{}",
        text(&o)
    );
}

#[test]
fn an_unreadable_record_is_named_set_aside_and_recomputed_and_the_check_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path());
    let run = dir.path().join("run");
    let o = serl(&["evolve", "--config", s(&cfg), "--out", s(&run)]);
    assert!(o.status.success(), "{}", text(&o));
    let check = serl(&["run", "check", s(&run)]);
    assert!(check.status.success(), "{}", text(&check));
    assert!(text(&check).contains("whole"), "{}", text(&check));
    let orders = std::fs::read_to_string(run.join("test/orders.csv")).unwrap();

    // A candidate record cut short, a score that is not JSON.
    let cut = run.join("candidates/i1_c0.json");
    let whole = std::fs::read(&cut).unwrap();
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    std::fs::write(run.join("scores/i0_c1.json"), "score = 3").unwrap();
    let check = serl(&["run", "check", s(&run)]);
    let said = text(&check);
    assert_eq!(check.status.code(), Some(1), "{said}");
    assert!(
        said.contains("problem: candidates/i1_c0.json: cut short"),
        "{said}"
    );
    assert!(
        said.contains("problem: scores/i0_c1.json: not JSON"),
        "{said}"
    );

    let o = serl(&["evolve", "--resume", s(&run)]);
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    assert!(
        said.contains("candidates/i1_c0.json: cut short"),
        "the repair is named: {said}"
    );
    assert_eq!(
        std::fs::read(run.join("repaired/candidates/i1_c0.json")).unwrap(),
        &whole[..whole.len() / 2],
        "the unreadable record is kept aside"
    );
    assert_eq!(
        std::fs::read_to_string(run.join("test/orders.csv")).unwrap(),
        orders
    );
    let report = std::fs::read_to_string(run.join("test/report.md")).unwrap();
    assert!(
        report.contains("Repaired") && report.contains("candidates/i1_c0.json"),
        "{report}"
    );

    let check = serl(&["run", "check", s(&run)]);
    let said = text(&check);
    assert!(check.status.success(), "{said}");
    assert!(
        said.contains("repaired: candidates/i1_c0.json: cut short"),
        "{said}"
    );
    assert!(
        said.contains("repaired: scores/i0_c1.json: not JSON"),
        "{said}"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &target);
        } else {
            std::fs::copy(&p, &target).unwrap();
        }
    }
}

/// A small filesystem of its own (a tmpfs, mounted as root), unmounted
/// when dropped.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(at: &Path, size: &str) -> Result<SmallDisk, String> {
        common::slurm::cluster_suite()?;
        std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs", s(at)])
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !o.status.success() {
            return Err(format!("mount a tmpfs (needs root): {}", text(&o).trim()));
        }
        Ok(SmallDisk(at.to_path_buf()))
    }

    fn grow(&self, size: &str) {
        let o = Command::new("mount")
            .args(["-o", &format!("remount,size={size}"), s(&self.0)])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_ends_with_the_path_and_the_resume_after_freeing_space_is_the_clean_run() {
    let name = "a_full_disk_ends_with_the_path_and_the_resume_after_freeing_space_is_the_clean_run";
    let _ = std::fs::remove_file(skip_note(name));
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path());
    let disk = match SmallDisk::mount(&dir.path().join("disk"), "600k") {
        Ok(d) => d,
        Err(why) => return skipped(name, &why),
    };
    let clean = dir.path().join("clean");
    let o = serl(&["evolve", "--config", s(&cfg), "--out", s(&clean)]);
    assert!(o.status.success(), "{}", text(&o));

    let run = disk.0.join("run");
    let o = serl(&["evolve", "--config", s(&cfg), "--out", s(&run)]);
    let said = text(&o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "a full disk is an error, not a panic: {said}"
    );
    assert!(said.contains("No space left on device"), "{said}");
    assert!(said.contains(s(&run)), "the error names the path: {said}");
    assert!(!said.contains("panicked"), "{said}");

    disk.grow("64m");
    let o = serl(&["evolve", "--resume", s(&run)]);
    assert!(o.status.success(), "{}", text(&o));
    let orders = |r: &Path| std::fs::read_to_string(r.join("test/orders.csv")).unwrap();
    assert_eq!(orders(&run), orders(&clean));
    let check = serl(&["run", "check", s(&run)]);
    assert!(check.status.success(), "{}", text(&check));
}
