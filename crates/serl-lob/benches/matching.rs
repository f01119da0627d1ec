//! Matching-engine throughput on a synthetic stream, and LOBSTER replay
//! throughput (parsing included) when the shared samples are present.

use std::path::Path;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use serl_lob::{message_stream, replay, LobsterInput, OrderBook, ReplayOptions, SelfTradePolicy};

fn matching(c: &mut Criterion) {
    let msgs = message_stream(2_000_000, 7);
    let mut g = c.benchmark_group("matching");
    g.throughput(Throughput::Elements(msgs.len() as u64));
    g.sample_size(10);
    g.bench_function("synthetic_2M_mixed", |b| {
        b.iter_batched_ref(
            || OrderBook::with_capacity(SelfTradePolicy::Allow, 1 << 14),
            |book| {
                for m in &msgs {
                    let _ = book.apply(m, &mut ());
                }
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn lobster(c: &mut Criterion) {
    let dir = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"))
        .join("../../../shared/data/lobster-2012-06-21");
    let mut g = c.benchmark_group("lobster");
    g.sample_size(10);
    for name in [
        "AAPL_2012-06-21_1",
        "AMZN_2012-06-21_1",
        "AMZN_2012-06-21_5",
        "GOOG_2012-06-21_1",
        "GOOG_2012-06-21_5",
        "GOOG_2012-06-21_10",
    ] {
        let p = dir.join(format!("LOBSTER_SampleFile_{name}.zip"));
        if !p.exists() {
            continue;
        }
        let input = LobsterInput::open(&p, None).unwrap();
        let n = replay(&input, &ReplayOptions::default()).unwrap().messages;
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(format!("replay_with_parse_{name}"), |b| {
            b.iter(|| replay(&input, &ReplayOptions::default()).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, matching, lobster);
criterion_main!(benches);
