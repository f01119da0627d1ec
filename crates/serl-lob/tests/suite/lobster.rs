//! LOBSTER replay: the real samples replay with zero mismatches, and bad
//! files give errors that name the file and line.

use std::path::{Path, PathBuf};

use serl_lob::{replay, LobsterInput, ReplayError, ReplayOptions};

#[path = "../../../../tests-support/shared_data.rs"]
mod shared_data;
use shared_data::shared_data;

fn samples(test: &str) -> Option<Vec<PathBuf>> {
    let dir = shared_data("lobster-2012-06-21", test)?;
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "zip"))
        .collect();
    v.sort();
    Some(v)
}

#[test]
fn every_lobster_sample_replays_without_a_mismatch() {
    let Some(files) = samples("every_lobster_sample_replays_without_a_mismatch") else {
        return;
    };
    assert_eq!(files.len(), 6, "AAPL L1, AMZN L1/L5, GOOG L1/L5/L10");
    for f in files {
        let input = LobsterInput::open(&f, None).unwrap();
        let r = replay(&input, &ReplayOptions::default()).unwrap();
        assert!(r.messages > 40_000);
        assert_eq!(
            r.mismatched_rows,
            0,
            "{}: first mismatches {:?}",
            f.display(),
            r.first_mismatches
        );
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_tiny_day_replays_from_csv_files() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "X_message_1.csv", "34200.1,1,11,100,1000000,1\n34200.2,1,12,50,1000100,-1\n34200.3,4,12,20,1000100,-1\n34200.4,3,11,100,1000000,1\n");
    write(dir.path(), "X_orderbook_1.csv", "1000200,10,1000000,100\n1000100,50,1000000,100\n1000100,30,1000000,100\n1000100,30,999900,40\n");
    let r = replay(
        &LobsterInput::open(&m, None).unwrap(),
        &ReplayOptions::default(),
    )
    .unwrap();
    assert_eq!(r.messages, 4);
    assert_eq!(r.mismatched_rows, 0, "{:?}", r.first_mismatches);
}

#[test]
fn bad_rows_name_the_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let ob = "1000200,10,1000000,100\n1000200,10,1000000,100\n";
    let cases = [
        (
            "34200.1,1,11,100,1000000,1\n34200.2,1,12,abc,1000100,-1\n",
            ":2: field `size`",
        ),
        (
            "34200.1,1,11,100,1000000,1\n34200.2,1,12,-5,1000100,-1\n",
            ":2: field `size`: -5 is negative",
        ),
        (
            "34200.1,1,11,100,1000000,1\n34200.2,1,12,5,1000150,-1\n",
            ":2: price 1000150 is not on the tick grid",
        ),
        (
            "34200.1,1,11,100,1000000,1\n34200.2,2,999,500,1000000,1\n",
            ":2: order id 999 is unknown",
        ),
        (
            "34200.1,1,11,100,1000000,1\n34200.2,9,12,5,1000100,-1\n",
            ":2: field `type`",
        ),
        (
            "34200.1,1,11,100,1000000,1\n34200.2,1,12\n",
            ":2: field `size`: missing",
        ),
    ];
    for (i, (msgs, want)) in cases.iter().enumerate() {
        let m = write(dir.path(), &format!("C{i}_message_1.csv"), msgs);
        write(dir.path(), &format!("C{i}_orderbook_1.csv"), ob);
        let err = replay(
            &LobsterInput::open(&m, None).unwrap(),
            &ReplayOptions::default(),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains(want), "case {i}: `{text}` lacks `{want}`");
        assert!(
            text.contains(&format!("C{i}_message_1.csv")),
            "case {i}: `{text}` lacks the file"
        );
    }
}

#[test]
fn a_bad_order_book_row_names_its_line_and_field() {
    // The rows are read on a second thread as the replay needs them; a bad
    // one far into the file is still named by line and field.
    let dir = tempfile::tempdir().unwrap();
    let mut msgs = String::from("34200.1,1,11,100,1000000,1\n");
    let mut ob = String::from("1000200,10,1000000,100\n");
    for k in 0..9_000 {
        msgs.push_str(&format!("34200.2,1,{},1,1000000,1\n", 100 + k));
        ob.push_str(&format!("1000200,10,1000000,{}\n", 101 + k));
    }
    msgs.push_str("34200.3,1,99999,1,1000000,1\n");
    ob.push_str("1000200,10,10x0000,9101\n");
    let m = write(dir.path(), "D_message_1.csv", &msgs);
    write(dir.path(), "D_orderbook_1.csv", &ob);
    let err = replay(
        &LobsterInput::open(&m, None).unwrap(),
        &ReplayOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("D_orderbook_1.csv:9002") && err.contains("bid_price"),
        "{err}"
    );
}

#[test]
fn a_zip_without_an_orderbook_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("broken.zip");
    let mut w = zip::ZipWriter::new(std::fs::File::create(&p).unwrap());
    w.start_file("X_message_1.csv", zip::write::SimpleFileOptions::default())
        .unwrap();
    std::io::Write::write_all(&mut w, b"34200.1,1,11,100,1000000,1\n").unwrap();
    w.finish().unwrap();
    let err = LobsterInput::open(&p, None).err().unwrap();
    assert!(
        matches!(
            err,
            ReplayError::MissingFile {
                what: "orderbook",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("broken.zip"));
}

#[test]
fn a_book_that_disagrees_with_lobster_is_reported() {
    // Row 3 says 31 lots rest at 1000100 where the messages leave 30, at a
    // level that was already visible: a genuine mismatch, not hidden depth.
    let dir = tempfile::tempdir().unwrap();
    let m = write(
        dir.path(),
        "Y_message_1.csv",
        "34200.1,1,11,100,1000000,1\n34200.2,1,12,50,1000100,-1\n34200.3,4,12,20,1000100,-1\n",
    );
    write(
        dir.path(),
        "Y_orderbook_1.csv",
        "1000200,10,1000000,100\n1000100,50,1000000,100\n1000100,31,1000000,100\n",
    );
    let r = replay(
        &LobsterInput::open(&m, None).unwrap(),
        &ReplayOptions::default(),
    )
    .unwrap();
    assert_eq!(r.mismatched_rows, 1);
    let first = &r.first_mismatches[0];
    assert_eq!(
        (first.line, first.side, first.expected, first.actual),
        (3, "ask", (1000100, 31), (1000100, 30))
    );
}
