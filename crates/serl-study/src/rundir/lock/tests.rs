use std::cell::RefCell;

use super::*;

fn quiet(_: &str) {}

fn write_holder(dir: &Path, h: &Holder) {
    std::fs::write(dir.join(LOCK_FILE), serde_json::to_string(h).unwrap()).unwrap();
}

fn holder(host: &str, pid: u32, renewed: i64) -> Holder {
    Holder {
        host: host.into(),
        pid,
        process_start: None,
        started: "2026-12-04T00:00:00Z".into(),
        command: "serl evolve --out runs/x".into(),
        renewed,
        lease_secs: 60,
    }
}

#[test]
fn a_second_holder_is_refused_with_the_first_ones_name_and_command() {
    let dir = tempfile::tempdir().unwrap();
    let first = RunLock::acquire(dir.path(), "serl evolve --out X", &quiet).unwrap();
    let e = RunLock::acquire(dir.path(), "serl evolve --resume X", &quiet)
        .err()
        .expect("a second lock is refused")
        .to_string();
    assert!(e.contains("is in use by process"), "{e}");
    assert!(e.contains(&std::process::id().to_string()), "{e}");
    assert!(e.contains(&host_name()), "{e}");
    assert!(e.contains("serl evolve --out X"), "{e}");
    drop(first);
    assert!(!dir.path().join(LOCK_FILE).exists(), "released on drop");
    RunLock::acquire(dir.path(), "serl evolve --resume X", &quiet).unwrap();
}

#[test]
fn a_dead_process_lock_on_this_host_is_taken_over_with_a_line() {
    let dir = tempfile::tempdir().unwrap();
    // A process that has ended: a child reaped before its id is written.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let now = unix_now();
    write_holder(dir.path(), &holder(&host_name(), pid, now));
    let said = RefCell::new(Vec::new());
    let lock = RunLock::acquire(dir.path(), "serl train", &|l| {
        said.borrow_mut().push(l.to_string())
    })
    .unwrap();
    assert_eq!(lock.holder().pid, std::process::id());
    let said = said.into_inner();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("took over the lock of process") && said[0].contains("no longer running"),
        "{}",
        said[0]
    );
}

#[test]
fn another_hosts_lock_holds_for_its_lease_and_then_expires() {
    let dir = tempfile::tempdir().unwrap();
    let now = unix_now();
    write_holder(dir.path(), &holder("node-17", 4242, now - 10));
    let e = RunLock::acquire(dir.path(), "serl evolve", &quiet)
        .err()
        .expect("a live lease holds")
        .to_string();
    assert!(e.contains("process 4242 on node-17"), "{e}");

    write_holder(dir.path(), &holder("node-17", 4242, now - 61));
    let said = RefCell::new(String::new());
    RunLock::acquire(dir.path(), "serl evolve", &|l| {
        *said.borrow_mut() = l.to_string()
    })
    .unwrap();
    assert!(
        said.borrow().contains("lease of 60 s ran out"),
        "{}",
        said.borrow()
    );
}

#[test]
fn the_holder_renews_its_lease_while_it_lives() {
    let dir = tempfile::tempdir().unwrap();
    let lock = RunLock::acquire_with_lease(dir.path(), "serl evolve", 1, &quiet).unwrap();
    let first = lock.holder().renewed;
    std::thread::sleep(Duration::from_millis(1_300));
    let now = RunLock::holder_of(dir.path()).unwrap();
    assert!(now.renewed > first, "renewed {} after {first}", now.renewed);
    assert!(same_holder(&now, lock.holder()));
}

#[test]
fn a_lock_taken_over_after_its_lease_is_not_removed_by_the_old_holder() {
    let dir = tempfile::tempdir().unwrap();
    let old = RunLock::acquire(dir.path(), "old", &quiet).unwrap();
    // Another host took over (as it would after the lease ran out).
    let new = holder("node-2", 7, unix_now());
    write_holder(dir.path(), &new);
    drop(old);
    assert_eq!(RunLock::holder_of(dir.path()), Some(new));
}

#[test]
fn an_unreadable_lock_file_is_refused_while_fresh() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(LOCK_FILE), "{\"host\": ").unwrap();
    let e = RunLock::acquire(dir.path(), "serl evolve", &quiet)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("cannot be read yet"), "{e}");
}

#[test]
fn a_directory_the_lock_created_goes_with_it_when_nothing_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    drop(RunLock::acquire(&run, "serl evolve", &quiet).unwrap());
    assert!(!run.exists(), "an empty run directory was left behind");
    let lock = RunLock::acquire(&run, "serl evolve", &quiet).unwrap();
    std::fs::write(run.join("evolve.toml"), "").unwrap();
    drop(lock);
    assert!(run.join("evolve.toml").exists() && !run.join(LOCK_FILE).exists());
}

#[test]
fn a_run_inside_a_held_directory_is_refused_while_its_holder_lives() {
    let dir = tempfile::tempdir().unwrap();
    let now = unix_now();
    // A study on another host holds the directory above the arm's run.
    write_holder(dir.path(), &holder("node-4", 99, now));
    let arm = dir.path().join("smollm2/seed1");
    let e = RunLock::acquire(&arm, "serl evolve --resume", &quiet)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("is inside") && e.contains("process 99 on node-4"),
        "{e}"
    );
    // Once that lease has run out, the run is free.
    write_holder(dir.path(), &holder("node-4", 99, now - 61));
    RunLock::acquire(&arm, "serl evolve --resume", &quiet).unwrap();
}
