//! A long search stays flat: 30 iterations of the builtin designer on the
//! bundled data, with the coordinator's resident memory and open file
//! descriptors sampled from `/proc` as it runs. After the warm-up (the
//! first three iterations) neither may grow past a stated bound.

#[allow(dead_code)] // the soak reads none of the outputs
use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{repo, tiny_config_from};

/// Resident memory (KiB) and open descriptors of process `pid`.
fn sample(pid: u32) -> Option<(u64, usize)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some((rss, fds))
}

#[test]
fn thirty_iterations_keep_memory_and_descriptors_flat_after_warm_up() {
    if !Path::new("/proc/self/status").exists() {
        eprintln!("skipped: no /proc to sample (Linux only)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config_from(dir.path(), "configs/evolve.toml", "");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replacen("iterations = 2", "iterations = 30", 1)
        .replacen("window = 2", "window = 1000", 1)
        .replacen("enabled = true", "enabled = false", 1);
    std::fs::write(&cfg, text).unwrap();
    let run = dir.path().join("run");
    let mut child = Command::new(env!("CARGO_BIN_EXE_serl"))
        .args([
            "evolve",
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            run.to_str().unwrap(),
        ])
        .current_dir(repo())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let warm = run.join("candidates/i3_c0.json");
    let finals = run.join("final");
    let (mut warm_up, mut after, mut last) = (Vec::new(), Vec::new(), Vec::new());
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if let Some(s) = sample(child.id()) {
            let phase = if finals.exists() {
                &mut last
            } else if warm.exists() {
                &mut after
            } else {
                &mut warm_up
            };
            phase.push(s);
        }
        assert!(
            t.elapsed() < Duration::from_secs(1200),
            "the soak run took over 20 minutes"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(status.success(), "the soak run failed");
    assert!(
        run.join("candidates/i29_c1.json").exists(),
        "30 iterations ran"
    );
    let max = |v: &[(u64, usize)]| {
        (
            v.iter().map(|s| s.0).max().unwrap_or(0),
            v.iter().map(|s| s.1).max().unwrap_or(0),
        )
    };
    let (warm_rss, warm_fds) = max(&warm_up);
    let (rss, fds) = max(&after);
    let (final_rss, final_fds) = max(&last);
    eprintln!(
        "soak: {:.0} s; warm-up (3 iterations, {} samples): max RSS {} KiB, max fds {warm_fds}; search (27 iterations, {} samples): max RSS {rss} KiB, max fds {fds}; final retrainings and test ({} samples): max RSS {final_rss} KiB, max fds {final_fds}",
        t.elapsed().as_secs_f64(),
        warm_up.len(),
        warm_rss,
        after.len(),
        last.len(),
    );
    assert!(!warm_up.is_empty() && after.len() > 10, "too few samples");
    // The bound: a quarter more memory than the warm-up's peak (the
    // buffers of 27 more iterations' records are small), and no more than
    // 8 more descriptors (a thread pool's, not one per candidate).
    assert!(
        rss <= warm_rss + warm_rss / 4,
        "memory grew: {warm_rss} KiB -> {rss} KiB"
    );
    assert!(fds <= warm_fds + 8, "descriptors grew: {warm_fds} -> {fds}");
}
