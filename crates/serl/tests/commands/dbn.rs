//! Databento's DBN bars as any other bar data (docs/data.md, "Databento
//! DBN"): the `dbn` crate's own sample files, read by `serl data inspect`
//! in the session's time zone, and a time zone that is not one refused by
//! name; Databento's MBP samples checked against the book replayed from
//! its MBO sample; and the scale fixture (docs/data.md, "Scale") made and read as a
//! dataset like any other.

use crate::common;

use common::{repo, serl, text};

#[test]
fn dbn_sample_bars_are_inspected_in_the_sessions_time_zone() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = repo().join("crates/serl-data/tests/dbn/bars");
    // The samples are CME futures at midnight UTC: a whole-day session in UTC.
    let cfg = dir.path().join("utc.toml");
    std::fs::write(
        &cfg,
        "[session]\nopen = \"00:00\"\nclose = \"23:59\"\ntimezone = \"UTC\"\n",
    )
    .unwrap();
    let o = serl(&[
        "data",
        "inspect",
        fixtures.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        said.contains("ESH1") && said.contains("2020-12-28"),
        "{said}"
    );

    // In New York (the default) the same bars are the evening before,
    // outside the regular session: nothing is left, and the error says why.
    let o = serl(&["data", "inspect", fixtures.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("outside the session, in its time zone"),
        "{}",
        text(&o)
    );

    std::fs::write(&cfg, "[session]\ntimezone = \"Mars/Olympus\"\n").unwrap();
    let o = serl(&[
        "data",
        "inspect",
        fixtures.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("`Mars/Olympus` is not an IANA time zone"),
        "{}",
        text(&o)
    );
}

#[test]
fn databentos_mbp_samples_are_checked_against_the_book_of_its_mbo_sample() {
    let dbn = repo().join("crates/serl-data/tests/dbn");
    let mbo = dbn.join("mbo/test_data.mbo.dbn");
    for name in ["test_data.mbp-10.dbn", "test_data.mbp-1.dbn"] {
        let o = serl(&[
            "lob",
            "mbp",
            mbo.to_str().unwrap(),
            dbn.join("mbp").join(name).to_str().unwrap(),
        ]);
        // The MBO sample cancels two orders resting before it starts: the
        // replayed book cannot be whole, and the command says so rather
        // than failing on it.
        assert!(o.status.success(), "{}", text(&o));
        assert!(text(&o).contains("ESH1"), "{}", text(&o));
        assert!(
            text(&o).contains("never added  2 MBO records"),
            "{}",
            text(&o)
        );
    }
    // Bars are not a book.
    let o = serl(&[
        "lob",
        "mbp",
        mbo.to_str().unwrap(),
        dbn.join("bars/test_data.ohlcv-1m.dbn").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("test_data.ohlcv-1m.dbn"), "{}", text(&o));
    assert!(text(&o).contains("not market by price"), "{}", text(&o));
}

/// A book crossed in an MBO file is named, with the file and the record,
/// and the day is read all the same: the shared GOOG level-10 day written
/// as MBO keeps orders whose cancels were deeper than ten levels, and its
/// book crosses through them.
#[test]
fn a_crossed_mbo_book_is_named_by_file_and_record_and_the_day_still_read() {
    let Some(goog) = crate::shared_data::shared_data(
        "lobster-2012-06-21/LOBSTER_SampleFile_GOOG_2012-06-21_10.zip",
        "a_crossed_mbo_book_is_named_by_file_and_record_and_the_day_still_read",
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dbn = tmp.path().join("goog.mbo.dbn");
    let o = serl(&[
        "lob",
        "export",
        goog.to_str().unwrap(),
        "--dbn",
        dbn.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = tmp.path().join("qr");
    let o = serl(&[
        "simulate",
        "calibrate",
        "--lobster",
        dbn.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let said = text(&o);
    let warning = said
        .lines()
        .find(|l| l.starts_with("warning: "))
        .unwrap_or_else(|| panic!("no warning: {said}"));
    assert!(
        warning.contains("goog.mbo.dbn: GOOG: record ") && warning.contains("the book is crossed"),
        "{warning}"
    );
    assert!(
        out.join("GOOG.json").exists(),
        "the day is still calibrated on"
    );
}

/// `serl data scale` writes the symbols and sessions asked, labelled a
/// scale test; `serl data inspect` reads it; sizes out of range are
/// refused by flag.
#[test]
fn a_scale_fixture_is_written_labelled_and_inspected() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("scale");
    let scale = |extra: &[&str]| {
        let mut args = vec![
            "data",
            "scale",
            "data/lean",
            "--sessions",
            "5",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        serl(&args)
    };
    let o = scale(&["--symbols", "0"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--symbols"), "{}", text(&o));

    let o = scale(&["--symbols", "3"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("never evidence"), "{}", text(&o));
    let manifest = common::read_json(&out.join("SCALE.json"));
    assert_eq!(manifest["sessions"], 15);
    assert!(manifest["note"].as_str().unwrap().contains("scale test"));

    let o = serl(&["data", "inspect", out.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let catalog: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (&catalog["symbols"], &catalog["symbol_sessions"]),
        (&serde_json::json!(3), &serde_json::json!(15)),
        "{catalog}"
    );
}
