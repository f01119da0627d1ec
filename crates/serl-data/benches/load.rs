//! Loading speed: the bundled LEAN sample always, and the 284-symbol
//! `us-equities-1min-2018` folder (3.2 M gzipped rows) when present.
//!
//! The `dbn` group reads the same bars six ways (the bundled sample's,
//! or the shared folder's when present): through the `dbn` crate's own
//! decoder alone (records decoded, nothing kept), serl's (the same), the
//! crate's into memory (its `decode_records`, the records kept); serl's
//! reading pass of the DBN file alone (decoding, symbols, local time, a
//! row per bar, no cleaning); `serl_data::load` of it; and `load` of the
//! same bars as serl's Parquet (a file per symbol, as `serl data convert`
//! writes).

use std::path::Path;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dbn::decode::{DecodeRecord, DynDecoder};
use serl_data::{load, write_dbn_bars, write_sessions, DataConfig, Dataset};

fn root() -> std::path::PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo")).join("../..")
}

fn bench_load(c: &mut Criterion) {
    let root = root();
    let cfg = DataConfig::default();
    let mut g = c.benchmark_group("load");
    g.sample_size(10);

    let lean = root.join("data/lean");
    g.bench_function("bundled_lean_sample", |b| {
        b.iter(|| load(&lean, &cfg).unwrap())
    });

    let us = root.join("../shared/data/us-equities-1min-2018");
    if us.exists() {
        let rows = load(&us, &cfg).unwrap().rows();
        g.throughput(Throughput::Elements(rows));
        g.bench_function("us_equities_1min_2018_284_symbols", |b| {
            b.iter(|| load(&us, &cfg).unwrap())
        });
    }
    g.finish();
}

/// The crate's own decoder over every record of `file`: the anchor.
fn crate_decode(file: &Path) -> u64 {
    let mut dec = DynDecoder::from_file(file, dbn::VersionUpgradePolicy::UpgradeToV3).unwrap();
    let mut volume = 0u64;
    while let Some(r) = dec.decode_record::<dbn::OhlcvMsg>().unwrap() {
        volume = volume.wrapping_add(r.volume);
    }
    volume
}

/// The crate's own decoder reading every record of `file` into memory.
fn crate_decode_records(file: &Path) -> usize {
    let dec = DynDecoder::from_file(file, dbn::VersionUpgradePolicy::UpgradeToV3).unwrap();
    dec.decode_records::<dbn::OhlcvMsg>().unwrap().len()
}

/// The same bars as one DBN file and as Parquet files, in a temporary
/// folder.
fn same_bars(
    ds: &Dataset,
    dir: &Path,
    cfg: &DataConfig,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let dbn_file = dir.join("bars.ohlcv-1m.dbn");
    write_dbn_bars(&dbn_file, &ds.sessions, chrono_tz::America::New_York).unwrap();
    let parquet = dir.join("parquet");
    std::fs::create_dir_all(&parquet).unwrap();
    for part in ds.sessions.chunk_by(|a, b| a.symbol == b.symbol) {
        let file = parquet.join(format!("{}.parquet", part[0].symbol));
        write_sessions(&file, part, &cfg.columns).unwrap();
    }
    (dbn_file, parquet)
}

fn bench_dbn(c: &mut Criterion) {
    let root = root();
    let cfg = DataConfig::default();
    let us = root.join("../shared/data/us-equities-1min-2018");
    let source = if us.exists() {
        us
    } else {
        root.join("data/lean")
    };
    let ds = load(&source, &cfg).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (dbn_file, parquet) = same_bars(&ds, dir.path(), &cfg);
    // The same bars, but for the close's bar: DBN stamps a bar at its
    // start, so a 16:00 stamp is after the session (8,203 of 3.17 M bars).
    let (from_dbn, from_parquet) = (
        load(&dbn_file, &cfg).unwrap(),
        load(&parquet, &cfg).unwrap(),
    );
    assert!(from_dbn.rows() * 100 >= from_parquet.rows() * 99);

    let mut g = c.benchmark_group("dbn");
    g.sample_size(10);
    g.throughput(Throughput::Elements(ds.rows()));
    g.bench_function("crate_decoder", |b| {
        b.iter(|| black_box(crate_decode(&dbn_file)))
    });
    g.bench_function("serl_decoder", |b| {
        b.iter(|| black_box(serl_data::dbn_records_decoded(&dbn_file).unwrap()))
    });
    g.bench_function("crate_decode_records", |b| {
        b.iter(|| black_box(crate_decode_records(&dbn_file)))
    });
    let tz = chrono_tz::America::New_York;
    g.bench_function("serl_read_dbn", |b| {
        b.iter(|| black_box(serl_data::dbn_bars_read(&dbn_file, tz).unwrap()))
    });
    g.bench_function("serl_load_dbn", |b| {
        b.iter(|| load(&dbn_file, &cfg).unwrap())
    });
    g.bench_function("serl_load_parquet", |b| {
        b.iter(|| load(&parquet, &cfg).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench_load, bench_dbn);
criterion_main!(benches);
