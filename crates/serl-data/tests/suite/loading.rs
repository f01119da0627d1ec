//! Loading real-looking bar files, and every kind of broken one.

use std::path::{Path, PathBuf};

use serl_data::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"))
        .join("tests/fixtures")
        .join(name)
}

fn repo(rel: &str) -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"))
        .join("../..")
        .join(rel)
}

#[path = "../../../../tests-support/shared_data.rs"]
mod shared_data;
use shared_data::shared_data;

fn skip_policy() -> DataConfig {
    DataConfig::default()
}

fn fail_policy() -> DataConfig {
    let mut c = DataConfig::default();
    c.policy.on_error = ErrorPolicy::Fail;
    c
}

fn kinds(ds: &Dataset) -> Vec<ProblemKind> {
    ds.problems.iter().map(|p| p.kind).collect()
}

#[test]
fn a_clean_file_loads_into_full_sessions() {
    let ds = load(&fixture("CLEAN.csv"), &fail_policy()).unwrap();
    assert_eq!(ds.sessions.len(), 2);
    let s = &ds.sessions[0];
    assert_eq!(&*s.symbol, "CLEAN");
    assert_eq!(s.len(), 391, "09:30..16:00 inclusive");
    assert_eq!((s.minute[0], s.minute[390]), (570, 960));
    assert_eq!(s.missing_minutes, 0);
    assert!(ds.problems.is_empty(), "{:?}", ds.problems);
    // No VWAP column: the minute price is the typical price.
    let tp = (s.high[0] + s.low[0] + s.close[0]) / 3.0;
    assert!((s.minute_price(0) - tp).abs() < 1e-12);
}

#[test]
fn a_session_appended_twice_is_dropped_with_a_counted_warning() {
    let ds = load(&fixture("DUPED.csv"), &fail_policy()).unwrap();
    assert_eq!(ds.sessions.len(), 2);
    assert!(ds.sessions.iter().all(|s| s.len() == 391));
    let dup = ds
        .problems
        .iter()
        .find(|p| p.kind == ProblemKind::DuplicateRows)
        .unwrap();
    assert_eq!(dup.count, 391);
    assert_eq!(dup.severity, Severity::Warning);
    assert_eq!(dup.line, Some(784), "the first repeated row");
    assert!(kinds(&ds).contains(&ProblemKind::Unsorted));
}

#[test]
fn missing_minutes_are_counted_and_never_invented() {
    let ds = load(&fixture("GAPPY.csv"), &fail_policy()).unwrap();
    let s = &ds.sessions[0];
    assert_eq!((s.len(), s.missing_minutes, s.filled_minutes), (387, 4, 0));

    let mut fill = fail_policy();
    fill.session.missing_minutes = MissingMinutes::Fill;
    let ds = load(&fixture("GAPPY.csv"), &fill).unwrap();
    let s = &ds.sessions[0];
    // The gap at the open has no earlier price to carry, so it stays missing.
    assert_eq!((s.len(), s.missing_minutes, s.filled_minutes), (390, 4, 3));
    let i = s.minute.iter().position(|&m| m == 670).unwrap();
    assert!(s.filled[i] && s.volume[i] == 0.0 && s.open[i] == s.close[i - 1]);
}

#[test]
fn gzip_files_load_and_a_truncated_one_is_named() {
    let ds = load(&fixture("GZ.csv.gz"), &fail_policy()).unwrap();
    assert_eq!(ds.sessions[0].len(), 391);
    assert_eq!(&*ds.sessions[0].symbol, "GZ");

    let err = load(&fixture("TRUNC.csv.gz"), &fail_policy())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("TRUNC.csv.gz") && err.contains("truncated or corrupt gzip"),
        "{err}"
    );
}

#[test]
fn a_wrong_header_names_the_missing_column() {
    let err = load(&fixture("WRONGHDR.csv"), &fail_policy())
        .unwrap_err()
        .to_string();
    assert!(err.contains("WRONGHDR.csv:1"), "{err}");
    assert!(
        err.contains("wrong header") && err.contains("found [day,minute,o,h,l,c,v]"),
        "{err}"
    );
}

#[test]
fn a_bad_number_names_its_line_and_field() {
    let err = load(&fixture("BADNUM.csv"), &fail_policy())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("BADNUM.csv:5")
            && err.contains("`close`")
            && err.contains("`12.3x` is not a number"),
        "{err}"
    );
    // Under the skip policy only that row goes.
    let ds = load(&fixture("BADNUM.csv"), &skip_policy()).unwrap();
    assert_eq!(ds.sessions[0].len(), 390);
    assert_eq!(ds.sessions[0].missing_minutes, 1);
}

#[test]
fn empty_files_and_folders_are_clear_errors() {
    let err = load(&fixture("EMPTY.csv"), &fail_policy())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("EMPTY.csv") && err.contains("empty file"),
        "{err}"
    );
    let err = load(&fixture("HEADERONLY.csv"), &fail_policy())
        .unwrap_err()
        .to_string();
    assert!(err.contains("header but no rows"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "no bars here").unwrap();
    let err = load(dir.path(), &skip_policy()).unwrap_err();
    assert!(matches!(err, DataError::NoData { .. }), "{err}");
    assert!(err.to_string().contains("no market data found"));

    let err = load(&dir.path().join("nope"), &skip_policy()).unwrap_err();
    assert!(matches!(err, DataError::NotFound { .. }));
}

#[test]
fn bad_values_are_dropped_and_reported_by_line() {
    let ds = load(&fixture("BADVALS.csv"), &skip_policy()).unwrap();
    let at = |k: ProblemKind| ds.problems.iter().find(|p| p.kind == k).unwrap();
    assert_eq!(at(ProblemKind::HighBelowLow).line, Some(3));
    assert_eq!(at(ProblemKind::NonPositivePrice).line, Some(4));
    assert_eq!(
        at(ProblemKind::NonPositivePrice).field.as_deref(),
        Some("open")
    );
    assert_eq!(at(ProblemKind::Unsorted).line, Some(7));
    let s = &ds.sessions[0];
    assert_eq!(s.len(), 389);
    assert!(
        s.minute.windows(2).all(|w| w[0] < w[1]),
        "sorted after loading"
    );
    assert!(load(&fixture("BADVALS.csv"), &fail_policy()).is_err());
}

#[test]
fn a_skip_policy_folder_keeps_the_good_files_and_lists_the_bad() {
    let ds = scan(&fixture(""), &skip_policy()).unwrap();
    let skipped: Vec<_> = ds
        .files
        .iter()
        .filter(|f| f.skipped)
        .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for bad in [
        "EMPTY.csv",
        "HEADERONLY.csv",
        "TRUNC.csv.gz",
        "WRONGHDR.csv",
    ] {
        assert!(
            skipped.iter().any(|s| s == bad),
            "{bad} not skipped: {skipped:?}"
        );
    }
    assert!(ds.symbols().iter().any(|s| &**s == "CLEAN"));
}

#[test]
fn timestamp_layout_with_vwap_and_symbol_column() {
    let ds = load(&fixture("stamped.csv"), &fail_policy()).unwrap();
    let s = &ds.sessions[0];
    assert_eq!(&*s.symbol, "XYZ");
    assert_eq!(s.len(), 391);
    assert_eq!(s.minute_price(0), 10.02, "VWAP wins over the typical price");
}

#[test]
fn a_config_with_an_unknown_key_names_it() {
    let err =
        DataConfig::from_toml("[session]\nopen = \"09:30\"\nclose_time = \"16:00\"\n").unwrap_err();
    assert!(err.contains("close_time"), "{err}");
    let err = DataConfig::from_toml("[session]\nopen = \"9h30\"\n").unwrap_err();
    assert!(err.contains("session.open"), "{err}");
}

#[test]
fn the_bundled_lean_sample_loads_with_quotes() {
    let cfg = DataConfig::default();
    let ds = load(&repo("data/lean"), &cfg).unwrap();
    assert_eq!(ds.symbols().len(), 4);
    assert_eq!(ds.dates().len(), 6);
    for s in &ds.sessions {
        assert!(
            s.minute[0] >= 570 && *s.minute.last().unwrap() <= 959,
            "regular session only"
        );
        let q = s.quotes.as_ref().expect("quote bars");
        assert_eq!(q.bid.len(), s.len());
    }
    let spy = ds
        .session("SPY", chrono::NaiveDate::from_ymd_opt(2013, 10, 7).unwrap())
        .unwrap();
    assert!(
        (160.0..175.0).contains(&spy.close[0]),
        "prices are in dollars: {}",
        spy.close[0]
    );
    let stats = ds.session_stats(&cfg.session, &cfg.stats);
    let st = stats
        .iter()
        .find(|s| s.symbol == "SPY" && s.date == spy.date)
        .unwrap();
    assert_eq!(st.spread_source, SpreadSource::Quotes);
    assert!(
        st.spread_bps > 0.0 && st.spread_bps < 5.0,
        "SPY trades at about a cent: {}",
        st.spread_bps
    );
    assert!(st.adv.is_some(), "the second session has a look-back");
    assert!((st.volume_profile.iter().sum::<f64>() - 1.0).abs() < 1e-9);
}

/// The shared real dataset, when this machine has it (CI does).
#[test]
fn us_equities_2018_catalog_matches_its_readme() {
    let Some(path) = shared_data(
        "us-equities-1min-2018",
        "us_equities_2018_catalog_matches_its_readme",
    ) else {
        return;
    };
    let cfg = DataConfig::default();
    let ds = load(&path, &cfg).unwrap();
    let cat = Catalog::new(&path, &ds, &cfg);
    assert_eq!(cat.symbols, 284);
    assert_eq!(cat.symbol_sessions, 8203);
    assert_eq!(cat.dates, 29);
    let short: Vec<(&str, usize)> = cat
        .short_histories
        .iter()
        .map(|s| (s.symbol.as_str(), s.sessions))
        .collect();
    assert_eq!(short, vec![("CPN", 14), ("JUNO", 11)]);
    assert_eq!(cat.sessions_with_missing_minutes, 4525);
    assert!(ds.problems.iter().all(|p| p.severity == Severity::Warning));
    let (tr, va, te) = (
        cat.splits.train.len(),
        cat.splits.validation.len(),
        cat.splits.test.len(),
    );
    assert_eq!(tr + va + te, 29);
    assert!(cat.splits.train.last() < cat.splits.validation.first());
}
