//! A DBN file's bar records read straight from its bytes.
//!
//! The `dbn` crate reads the file's metadata (and its symbology), and
//! finds and undoes its compression; the records after the metadata are
//! then walked here, a megabyte at a time, each read at the fixed offsets
//! of an `ohlcv` record. The crate's own `decode_record` copies every
//! record into its buffer behind a version check and a type check through
//! a reader trait object: 33 ns a bar, the same as the whole of serl's
//! reading pass besides (symbol, local time, row). An `ohlcv` record has
//! the same layout in every DBN version, which is what lets it be read
//! here; the crate's decoding stays the reference in the tests
//! (`dbn_bars.rs`), record for record.

use std::io::Read;
use std::path::Path;

use dbn::decode::{DbnMetadataDecoder, DynReader};
use dbn::{Metadata, OhlcvMsg, VersionUpgradePolicy};

use crate::error::{Problem, ProblemKind};

/// One bar record's fields.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct BarRecord {
    pub instrument_id: u32,
    pub ts_event: u64,
    pub open: i64,
    pub high: i64,
    pub low: i64,
    pub close: i64,
    pub volume: u64,
}

/// An `ohlcv` record's size (a 16-byte header, four prices, a volume).
const RECORD: usize = std::mem::size_of::<OhlcvMsg>();
const CHUNK: usize = 1 << 20;

fn corrupt(path: &Path, record: u64, why: impl std::fmt::Display) -> Problem {
    Problem {
        line: Some(record),
        ..Problem::file_error(
            path,
            ProblemKind::Compression,
            format!("record {record}: {why}"),
        )
    }
}

/// The file's metadata and a reader at its first record, from one
/// opening through the crate's reader, which undoes any compression: the
/// prelude (`DBN`, a version byte, the metadata's length) and the
/// metadata are read, and the crate decodes the metadata from those
/// bytes alone.
pub(crate) fn open(path: &Path) -> Result<(Metadata, impl Read), Problem> {
    let refused = |e: &dyn std::fmt::Display| {
        Problem::file_error(
            path,
            ProblemKind::Io,
            format!("not a readable DBN file: {e}"),
        )
    };
    let mut reader = DynReader::from_file(path).map_err(|e| refused(&e))?;
    let mut head = vec![0u8; 8];
    reader.read_exact(&mut head).map_err(|e| refused(&e))?;
    let length = u64::from(u32::from_le_bytes([head[4], head[5], head[6], head[7]]));
    (&mut reader)
        .take(length)
        .read_to_end(&mut head)
        .map_err(|e| refused(&e))?;
    if (head.len() as u64) < 8 + length {
        return Err(refused(&"it ends inside its metadata"));
    }
    let metadata = DbnMetadataDecoder::with_upgrade_policy(
        std::io::Cursor::new(head),
        VersionUpgradePolicy::UpgradeToV3,
    )
    .decode()
    .map_err(|e| refused(&e))?;
    Ok((metadata, reader))
}

fn i64_at(r: &[u8; RECORD], at: usize) -> i64 {
    i64::from_le_bytes(r[at..at + 8].try_into().unwrap_or_default())
}

fn read_record(r: &[u8; RECORD]) -> BarRecord {
    BarRecord {
        instrument_id: u32::from_le_bytes(r[4..8].try_into().unwrap_or_default()),
        ts_event: i64_at(r, 8) as u64,
        open: i64_at(r, 16),
        high: i64_at(r, 24),
        low: i64_at(r, 32),
        close: i64_at(r, 40),
        volume: i64_at(r, 48) as u64,
    }
}

/// Calls `bar` with each record (its 1-based place, its fields) of
/// `reader`, which holds records of type `rtype` only; returns the count.
/// A record of another type or size, and a file that ends inside a
/// record, are errors naming the file and the record.
pub(crate) fn each_bar(
    path: &Path,
    mut reader: impl Read,
    rtype: u8,
    mut bar: impl FnMut(u64, &BarRecord),
) -> Result<u64, Problem> {
    let mut buf = vec![0u8; CHUNK];
    let (mut filled, mut record) = (0usize, 0u64);
    loop {
        let n = reader
            .read(&mut buf[filled..])
            .map_err(|e| corrupt(path, record + 1, format!("truncated or corrupt DBN ({e})")))?;
        if n == 0 {
            if filled > 0 {
                let why =
                    format!("the file ends inside it ({filled} of its {RECORD} bytes): truncated");
                return Err(corrupt(path, record + 1, why));
            }
            return Ok(record);
        }
        filled += n;
        let mut pos = 0;
        while let Some(bytes) = buf[..filled].get(pos..pos + RECORD) {
            let r: &[u8; RECORD] = bytes.try_into().unwrap_or(&[0; RECORD]);
            record += 1;
            if usize::from(r[0]) * 4 != RECORD || r[1] != rtype {
                let why = format!(
                    "a record of type {:#04x} and {} bytes where the schema's bars ({rtype:#04x}, {RECORD} bytes) belong",
                    r[1],
                    usize::from(r[0]) * 4
                );
                return Err(corrupt(path, record, why));
            }
            bar(record, &read_record(r));
            pos += RECORD;
        }
        buf.copy_within(pos..filled, 0);
        filled -= pos;
    }
}

/// A DBN bar sample the tests ship (`tests/dbn/bars`).
#[cfg(test)]
pub(crate) fn sample(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/dbn/bars")
        .join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(path: &Path) -> Result<u64, Problem> {
        let (_, reader) = open(path)?;
        each_bar(path, reader, dbn::rtype::OHLCV_1M, |_, _| {})
    }

    /// A record of another type, a zstd file cut short and a file cut
    /// inside its metadata are each named, with the file.
    #[test]
    fn a_foreign_record_and_a_cut_file_are_named_with_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = std::fs::read(sample("test_data.ohlcv-1m.dbn")).unwrap();
        let meta = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
        let mut foreign = bytes.clone();
        foreign[8 + meta + RECORD + 1] = dbn::rtype::MBO;
        let path = dir.path().join("foreign.dbn");
        std::fs::write(&path, &foreign).unwrap();
        let e = read_all(&path).unwrap_err();
        assert_eq!(e.line, Some(2), "{}", e.message);
        assert!(
            e.message.starts_with("record 2: a record of type 0xa0"),
            "{}",
            e.message
        );
        assert_eq!(e.file, path);

        let zst = std::fs::read(sample("test_data.ohlcv-1m.v3.dbn.zst")).unwrap();
        let cut = dir.path().join("cut.dbn.zst");
        std::fs::write(&cut, &zst[..zst.len() - 12]).unwrap();
        // The sample is 166 bytes: the cut is already in its metadata's frame.
        let e = read_all(&cut).unwrap_err();
        assert!(e.message.contains("incomplete frame"), "{}", e.message);
        assert_eq!(e.file, cut);

        let head = dir.path().join("head.dbn");
        std::fs::write(&head, &bytes[..8 + meta / 2]).unwrap();
        let e = read_all(&head).unwrap_err();
        assert!(
            e.message.contains("not a readable DBN file"),
            "{}",
            e.message
        );
        assert_eq!(read_all(&sample("test_data.ohlcv-1m.dbn")).unwrap(), 2);
    }
}
