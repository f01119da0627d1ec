//! Parquet: the converted copy loads to the same sessions, a bad Parquet
//! file is named like a bad CSV, and the catalog read a symbol at a time
//! equals the one of a full load.

use std::path::{Path, PathBuf};

use serl_data::{convert, load, scan, Catalog, DataConfig, ErrorPolicy, ProblemKind, Session};

fn repo(rel: &str) -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap())
        .join("../..")
        .join(rel)
}

fn skip_policy() -> DataConfig {
    let mut c = DataConfig::default();
    c.policy.on_error = ErrorPolicy::Skip;
    c
}

/// Sessions without the quotes a Parquet copy does not carry.
fn bars(sessions: &[Session]) -> Vec<Session> {
    sessions
        .iter()
        .map(|s| Session {
            quotes: None,
            ..s.clone()
        })
        .collect()
}

#[test]
fn a_converted_copy_loads_to_the_same_sessions() {
    for (src, cfg) in [
        (repo("data/lean"), DataConfig::default()),
        (repo("crates/serl-data/tests/fixtures"), skip_policy()),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let report = convert(&src, dir.path(), &cfg, &|_| {}).unwrap();
        let original = scan(&src, &cfg).unwrap();
        // LEAN bars are stamped at their start, so a LEAN day has no 16:00
        // bar; its copy is read without one.
        let mut read = cfg.clone();
        read.session.include_close_bar = !src.ends_with("lean");
        let copy = load(dir.path(), &read).unwrap();
        assert_eq!(report.sessions, original.sessions.len());
        assert_eq!(report.rows, original.rows());
        assert_eq!(
            copy.sessions.len(),
            original.sessions.len(),
            "{}",
            src.display()
        );
        for (c, o) in bars(&copy.sessions).iter().zip(bars(&original.sessions)) {
            let what = format!("{} {} {}", src.display(), o.symbol, o.date);
            assert_eq!(
                (&c.symbol, c.date, &c.minute),
                (&o.symbol, o.date, &o.minute),
                "{what}"
            );
            assert_eq!(
                (&c.open, &c.high, &c.low, &c.close),
                (&o.open, &o.high, &o.low, &o.close),
                "{what}"
            );
            assert_eq!((&c.volume, &c.vwap), (&o.volume, &o.vwap), "{what}");
            assert_eq!(
                (c.missing_minutes, &c.filled),
                (o.missing_minutes, &o.filled),
                "{what}"
            );
        }
        assert!(copy.problems.is_empty(), "{:?}", copy.problems);
    }
}

#[test]
fn a_parquet_file_without_a_mapped_column_is_named() {
    let dir = tempfile::tempdir().unwrap();
    convert(
        &repo("crates/serl-data/tests/fixtures/CLEAN.csv"),
        dir.path(),
        &DataConfig::default(),
        &|_| {},
    )
    .unwrap();
    let mut cfg = DataConfig::default();
    cfg.columns.close = "last".into();
    let err = load(dir.path(), &cfg).unwrap_err().to_string();
    assert!(
        err.contains("CLEAN.parquet") && err.contains("no column `last`"),
        "{err}"
    );
    let junk = dir.path().join("JUNK.parquet");
    std::fs::write(&junk, b"not parquet").unwrap();
    let ds = scan(dir.path(), &DataConfig::default()).unwrap();
    let p = ds.problems.iter().find(|p| p.file == junk).unwrap();
    assert_eq!(p.kind, ProblemKind::BadValue);
    assert!(
        p.message.contains("not a readable Parquet file"),
        "{}",
        p.message
    );
}

#[test]
fn the_catalog_by_symbol_equals_the_catalog_of_a_full_load() {
    for (src, cfg) in [
        (repo("data/lean"), DataConfig::default()),
        (repo("crates/serl-data/tests/fixtures"), skip_policy()),
    ] {
        let ds = load(&src, &cfg).unwrap();
        let full = serde_json::to_value(Catalog::new(&src, &ds, &cfg)).unwrap();
        let streamed = serde_json::to_value(Catalog::scan(&src, &cfg).unwrap()).unwrap();
        assert_eq!(full, streamed, "{}", src.display());
    }
    // And the same error when the policy fails a bad file.
    let src = repo("crates/serl-data/tests/fixtures");
    let mut fail = DataConfig::default();
    fail.policy.on_error = ErrorPolicy::Fail;
    let a = load(&src, &fail).unwrap_err().to_string();
    let b = Catalog::scan(&src, &fail).unwrap_err().to_string();
    assert_eq!(a, b);
}

/// A synthetic set of `symbols` × `days` full sessions in Parquet, one
/// file per symbol, written a symbol at a time.
fn synthetic(dir: &Path, symbols: usize, days: usize) {
    let start = chrono::NaiveDate::from_ymd_opt(2020, 1, 1).unwrap();
    let dates: Vec<_> = start
        .iter_days()
        .filter(|d| chrono::Datelike::weekday(d).number_from_monday() <= 5)
        .take(days)
        .collect();
    for k in 0..symbols {
        let symbol: std::sync::Arc<str> = format!("S{k:05}").into();
        let sessions: Vec<Session> = dates
            .iter()
            .map(|&date| {
                let minute: Vec<u16> = (570..=960).collect();
                let p: Vec<f64> = minute
                    .iter()
                    .map(|m| 50.0 + (k % 7) as f64 + (*m as f64 / 37.0).sin())
                    .collect();
                Session {
                    symbol: symbol.clone(),
                    date,
                    open: p.clone(),
                    high: p.iter().map(|x| x + 0.01).collect(),
                    low: p.iter().map(|x| x - 0.01).collect(),
                    close: p.clone(),
                    volume: vec![100.0; minute.len()],
                    vwap: None,
                    quotes: None,
                    filled: vec![false; minute.len()],
                    missing_minutes: 0,
                    filled_minutes: 0,
                    signal: None,
                    minute,
                }
            })
            .collect();
        serl_data::write_sessions(
            &dir.join(format!("{symbol}.parquet")),
            &sessions,
            &DataConfig::default().columns,
        )
        .unwrap();
    }
}

/// Peak resident memory of this process so far, MiB (Linux).
fn peak_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

#[test]
fn a_synthetic_set_is_cataloged_a_symbol_at_a_time() {
    // SERL_SYNTHETIC=5000x250 measures the scale of the issue (peak memory
    // is printed); the default keeps the test quick.
    let spec = std::env::var("SERL_SYNTHETIC").unwrap_or_else(|_| "40x20".into());
    let (symbols, days) = spec
        .split_once('x')
        .map(|(s, d)| (s.parse().unwrap(), d.parse().unwrap()))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let t0 = std::time::Instant::now();
    synthetic(dir.path(), symbols, days);
    let written = t0.elapsed().as_secs_f64();
    let before = peak_mib();
    let t1 = std::time::Instant::now();
    let cat = Catalog::scan(dir.path(), &DataConfig::default()).unwrap();
    eprintln!(
        "synthetic {symbols} symbols x {days} days: written in {written:.1}s, cataloged in {:.1}s; peak memory {:?} MiB before the catalog, {:?} MiB after",
        t1.elapsed().as_secs_f64(),
        before,
        peak_mib()
    );
    assert_eq!(
        (cat.symbols, cat.dates, cat.symbol_sessions),
        (symbols, days, symbols * days)
    );
    assert_eq!(cat.rows, (symbols * days * 391) as u64);
    assert_eq!(
        cat.splits.train.len() + cat.splits.validation.len() + cat.splits.test.len(),
        days
    );
}

#[test]
fn a_symbol_day_in_two_files_with_a_symbol_column_is_cataloged_once() {
    let dir = tempfile::tempdir().unwrap();
    let stamped = repo("crates/serl-data/tests/fixtures/stamped.csv");
    for name in ["part-a.csv", "part-b.csv"] {
        std::fs::copy(&stamped, dir.path().join(name)).unwrap();
    }
    let cfg = DataConfig::default();
    let ds = load(dir.path(), &cfg).unwrap();
    let full = serde_json::to_value(Catalog::new(dir.path(), &ds, &cfg)).unwrap();
    let streamed = serde_json::to_value(Catalog::scan(dir.path(), &cfg).unwrap()).unwrap();
    assert_eq!(full, streamed);
    assert_eq!(full["symbol_sessions"], 1);
}
