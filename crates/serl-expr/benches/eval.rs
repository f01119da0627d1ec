//! The targets: an 8-term reward in at most 200 ns per step, and
//! column-wise evaluation at most 2× slower than the same formula in Rust.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serl_expr::{Program, VarSet};
use std::hint::black_box;

const VARS: [&str; 8] = [
    "step_pa",
    "remaining_inv",
    "time_left",
    "spread_bps",
    "fill_qty",
    "volatility",
    "volume",
    "done",
];

/// Eight terms over eight variables.
const REWARD: &str =
    "step_pa - 2 * remaining_inv ^ 2 * (1 - time_left) - 0.1 * spread_bps * fill_qty \
    - 0.05 * volatility * abs(fill_qty - 0.1) + 0.01 * min(volume, 3) - 50 * done * remaining_inv \
    + 0.5 * tanh(step_pa / 10) - 0.2 * max(fill_qty - 0.3, 0)";

fn rust_reward(v: &[f64; 8]) -> f64 {
    let [step_pa, remaining_inv, time_left, spread_bps, fill_qty, volatility, volume, done] = *v;
    step_pa
        - 2.0 * remaining_inv.powf(2.0) * (1.0 - time_left)
        - 0.1 * spread_bps * fill_qty
        - 0.05 * volatility * (fill_qty - 0.1).abs()
        + 0.01 * volume.min(3.0)
        - 50.0 * done * remaining_inv
        + 0.5 * (step_pa / 10.0).tanh()
        - 0.2 * (fill_qty - 0.3).max(0.0)
}

fn rows(n: usize) -> Vec<[f64; 8]> {
    (0..n)
        .map(|i| {
            let x = i as f64;
            [
                (x * 0.3).sin() * 5.0,
                1.0 - (i % 78) as f64 / 78.0,
                1.0 - (i % 78) as f64 / 78.0,
                3.0 + (x * 0.1).cos(),
                0.01 * (i % 10) as f64,
                20.0 + (x * 0.05).sin(),
                1.0 + (x * 0.2).cos(),
                if i % 78 == 77 { 1.0 } else { 0.0 },
            ]
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let vars = VarSet::new(&VARS);
    let p = Program::compile(REWARD, &vars).unwrap();
    let data = rows(4096);
    let mut g = c.benchmark_group("reward_step");
    g.throughput(Throughput::Elements(1));
    g.bench_function("serl_expr", |b| {
        let mut st = p.new_state();
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & 4095;
            black_box(p.eval(&mut st, black_box(&data[i])))
        })
    });
    g.bench_function("rust", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & 4095;
            black_box(rust_reward(black_box(&data[i])))
        })
    });
    g.finish();

    let n = 4096;
    let cols: Vec<Vec<f64>> = (0..8)
        .map(|k| data.iter().map(|r| r[k]).collect())
        .collect();
    let col_refs: Vec<&[f64]> = cols.iter().map(Vec::as_slice).collect();
    let mut out = vec![0.0; n];
    let mut g = c.benchmark_group("reward_columns_4096");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("serl_expr", |b| {
        b.iter(|| black_box(p.eval_columns(black_box(&col_refs), &mut out)))
    });
    g.bench_function("rust", |b| {
        b.iter(|| {
            for (o, r) in out.iter_mut().zip(black_box(&data)) {
                *o = rust_reward(r);
            }
            black_box(&out);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
