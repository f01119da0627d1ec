//! Static environment steps per second on one core (1-minute decisions,
//! default observation), over every order of the bundled sample.

use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serl_data::{load, DataConfig, Split};
use serl_env::*;

fn bench(c: &mut Criterion) {
    let root = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"))
        .join("../../data/lean");
    let data = DataConfig::default();
    let ds = load(&root, &data).unwrap();
    let md = MarketData::new(&ds, &data);
    let orders = generate_orders(&ds, Split::All, &data, &OrderConfig::default()).unwrap();
    let cfg = EnvConfig {
        decision_minutes: 1,
        ..EnvConfig::default()
    };
    let reward = DefaultReward {
        inventory_penalty: 2.0,
        terminal_penalty: 50.0,
    };
    let steps: u64 = orders
        .iter()
        .map(|o| (o.end_minute - o.start_minute) as u64)
        .sum();
    let mut g = c.benchmark_group("static_env");
    g.throughput(Throughput::Elements(steps));
    g.bench_function("one_minute_steps", |b| {
        b.iter(|| {
            for o in &orders {
                let v = md.get(&o.symbol, o.date).unwrap();
                run_static(&mut Twap, v, o, &cfg, &reward, false);
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
