//! Loading speed: the bundled LEAN sample always, and the 284-symbol
//! `us-equities-1min-2018` folder (3.2 M gzipped rows) when present.

use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serl_data::{load, DataConfig};

fn bench_load(c: &mut Criterion) {
    let root = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo")).join("../..");
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

criterion_group!(benches, bench_load);
criterion_main!(benches);
