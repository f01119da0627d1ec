//! One simulated day (09:30–16:00) with an RMSC04-like population of about
//! 1,000 agents, on a synthetic U-shaped day of 4 M shares around $50.

use criterion::{criterion_group, criterion_main, Criterion};
use serl_market::{fit_noise_volume, Calibration, FitEffort, MarketConfig, Simulator};

fn day() -> Calibration {
    let minutes = 390;
    let mut p = 50.0;
    let (mut prices, mut volumes) = (Vec::new(), Vec::new());
    for m in 0..minutes {
        p *= 1.0 + 0.0004 * ((m * 7919 % 13) as f64 / 6.0 - 1.0);
        prices.push(p);
        let x = m as f64 / (minutes - 1) as f64;
        volumes.push(5_000.0 * (1.0 + 3.0 * (2.0 * x - 1.0).powi(2)));
    }
    Calibration {
        tick: 0.01,
        minute_price: prices,
        minute_volume: volumes,
        spread_bps: 4.0,
        noise_scale: Vec::new(),
    }
}

fn simulated_day(c: &mut Criterion) {
    let mut cal = day();
    let daily: f64 = cal.minute_volume.iter().sum();
    let cfg = MarketConfig {
        noise_agents: 850,
        value_agents: 90,
        momentum_agents: 30,
        informed_agents: 28,
        market_makers: 2,
        order_size: daily / 80_000.0,
        ..MarketConfig::default()
    };
    cal.noise_scale = fit_noise_volume(&cal, &cfg, 0, FitEffort::Quick);
    let mut g = c.benchmark_group("market");
    g.sample_size(10);
    let mut seed = 0;
    g.bench_function("day_1000_agents", |b| {
        b.iter(|| {
            seed += 1;
            Simulator::new(&cal, &cfg, seed).finish()
        })
    });
    g.finish();
}

criterion_group!(benches, simulated_day);
criterion_main!(benches);
