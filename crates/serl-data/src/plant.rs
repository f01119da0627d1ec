//! `serl data plant`: a copy of a bar dataset that carries a forecast of
//! known strength, the unit test of a search for edges.
//!
//! Every bar gets a `signal` column: a noisy forecast of the log return
//! from its close over the next `horizon_minutes`,
//!
//! ```text
//! signal_i = ρ · z_i + √(1 − ρ²) · ε_i,   z_i = r_i / rms(r),   ε_i ~ N(0, 1)
//! ```
//!
//! where `r_i` is the forward return (to the close of the first bar at
//! least `horizon_minutes` later, or the session's last bar) and `rms(r)`
//! its root mean square over the session. The signal has unit variance and
//! an information coefficient (its correlation with `r`) of about
//! `ρ = strength`: at 0 it is pure noise and there is nothing to find. The
//! prices are the source's, untouched, so the market is exactly as real as
//! before; only a design that reads the column can know what is coming.
//! The noise is drawn from a seed per (seed, symbol, date), so a copy is
//! the same whatever order its symbols are written in.

use std::path::Path;

use rand::{rngs::SmallRng, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use crate::bars::Session;
use crate::config::DataConfig;
use crate::convert::copy_by_symbol;
use crate::{DataError, Problem};

/// The manifest a planted copy carries beside its files.
pub const PLANT_MANIFEST: &str = "PLANT.json";

/// What to plant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlantConfig {
    /// The forecast's information coefficient ρ, in [0, 1).
    pub strength: f64,
    /// How far ahead it forecasts, minutes (best set to the task's
    /// decision interval).
    pub horizon_minutes: u16,
    /// Seed of the forecast's noise.
    pub seed: u64,
}

impl PlantConfig {
    /// Checks the strength and the horizon.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..1.0).contains(&self.strength) {
            return Err(format!(
                "strength {} is not in [0, 1): it is the forecast's correlation with the coming return",
                self.strength
            ));
        }
        if self.horizon_minutes == 0 {
            return Err("horizon_minutes must be at least 1".into());
        }
        Ok(())
    }
}

/// What a plant wrote, and the forecast as measured on the copy.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PlantReport {
    /// What was planted.
    pub config: Option<PlantConfig>,
    /// Source files read.
    pub files: usize,
    /// Parquet files written, one per symbol.
    pub written: usize,
    /// Symbol-sessions written.
    pub sessions: usize,
    /// Bars written.
    pub rows: u64,
    /// The signal's correlation with the forward return over a session's
    /// bars (those with a later bar), averaged over the sessions: the
    /// realised information coefficient.
    pub realised_ic: f64,
    /// Root mean square of the forward return, bps (pooled).
    pub forward_rms_bps: f64,
    /// Every problem met while reading.
    #[serde(skip)]
    pub problems: Vec<Problem>,
}

/// Sums for the pooled correlation of signal and forward return.
#[derive(Debug, Clone, Copy, Default)]
struct Moments {
    n: f64,
    s: f64,
    r: f64,
    ss: f64,
    rr: f64,
    sr: f64,
}

impl Moments {
    fn add(&mut self, s: f64, r: f64) {
        self.n += 1.0;
        self.s += s;
        self.r += r;
        self.ss += s * s;
        self.rr += r * r;
        self.sr += s * r;
    }

    fn merge(&mut self, o: &Moments) {
        self.n += o.n;
        self.s += o.s;
        self.r += o.r;
        self.ss += o.ss;
        self.rr += o.rr;
        self.sr += o.sr;
    }

    fn correlation(&self) -> f64 {
        let n = self.n.max(1.0);
        let cov = self.sr / n - (self.s / n) * (self.r / n);
        let vs = self.ss / n - (self.s / n).powi(2);
        let vr = self.rr / n - (self.r / n).powi(2);
        if vs > 0.0 && vr > 0.0 {
            cov / (vs * vr).sqrt()
        } else {
            0.0
        }
    }
}

/// A symbol's planted sessions: the sum of their correlations and their
/// pooled moments.
#[derive(Debug, Clone, Copy, Default)]
struct Planted {
    ic_sum: f64,
    moments: Moments,
}

/// Each bar's forward log return in bps over `horizon` minutes (0 for a
/// bar with no later bar).
pub fn forward_returns_bps(session: &Session, horizon: u16) -> Vec<f64> {
    let n = session.len();
    (0..n)
        .map(|i| {
            let target = session.minute[i].saturating_add(horizon);
            let j = session.index_at_or_after(target).min(n - 1);
            if j > i && session.close[i] > 0.0 {
                (session.close[j] / session.close[i]).ln() * 1e4
            } else {
                0.0
            }
        })
        .collect()
}

/// A stable seed for one session's noise (FNV-1a over seed, symbol, date).
fn session_seed(seed: u64, session: &Session) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let date = session.date.to_string();
    for b in seed
        .to_le_bytes()
        .iter()
        .chain(session.symbol.as_bytes())
        .chain(date.as_bytes())
    {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Plants the forecast in one session (its `signal` column), returning
/// the moments of signal and forward return over its bars.
fn plant_session(session: &mut Session, cfg: &PlantConfig) -> Moments {
    let r = forward_returns_bps(session, cfg.horizon_minutes);
    let informed: Vec<usize> = (0..r.len()).filter(|&i| r[i] != 0.0).collect();
    let rms =
        (informed.iter().map(|&i| r[i] * r[i]).sum::<f64>() / informed.len().max(1) as f64).sqrt();
    let mut rng = SmallRng::seed_from_u64(session_seed(cfg.seed, session));
    let rho = cfg.strength;
    let noise = (1.0 - rho * rho).sqrt();
    let mut m = Moments::default();
    let signal = r
        .iter()
        .map(|&ri| {
            let z = if rms > 0.0 { ri / rms } else { 0.0 };
            let e: f64 = StandardNormal.sample(&mut rng);
            let s = rho * z + noise * e;
            if ri != 0.0 {
                m.add(s, ri);
            }
            s
        })
        .collect();
    session.signal = Some(signal);
    m
}

/// Writes a planted copy of every bar file under `src` into
/// `dst/SYMBOL.parquet` (a symbol at a time, in bounded memory, as
/// [`crate::convert`] does), with [`PLANT_MANIFEST`] beside them.
pub fn plant(
    src: &Path,
    dst: &Path,
    cfg: &DataConfig,
    plant: &PlantConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<PlantReport, DataError> {
    plant.validate().map_err(|message| DataError::Config {
        path: dst.to_path_buf(),
        message,
    })?;
    let copied = copy_by_symbol(src, dst, cfg, progress, |sessions| {
        let mut m = Planted::default();
        for s in sessions {
            let one = plant_session(s, plant);
            m.ic_sum += one.correlation();
            m.moments.merge(&one);
        }
        m
    })?;
    let (mut ic, mut rr, mut n) = (0.0, 0.0, 0.0);
    for m in &copied.parts {
        (ic, rr, n) = (ic + m.ic_sum, rr + m.moments.rr, n + m.moments.n);
    }
    let report = PlantReport {
        config: Some(*plant),
        files: copied.files,
        written: copied.written,
        sessions: copied.sessions,
        rows: copied.rows,
        realised_ic: ic / copied.sessions.max(1) as f64,
        forward_rms_bps: (rr / n.max(1.0)).sqrt(),
        problems: copied.problems,
    };
    let manifest = dst.join(PLANT_MANIFEST);
    let text = serde_json::to_string_pretty(&report).unwrap_or_default();
    std::fs::write(&manifest, text).map_err(|source| DataError::Io {
        path: manifest.clone(),
        source,
    })?;
    Ok(report)
}

/// The manifest of a planted copy at `dir`, if it is one.
pub fn read_plant_manifest(dir: &Path) -> Option<PlantReport> {
    let text = std::fs::read_to_string(dir.join(PLANT_MANIFEST)).ok()?;
    serde_json::from_str(&text).ok()
}

impl PlantReport {
    /// What `serl data plant` says of the copy of `source` it wrote to
    /// `out` in `secs` with `planted`'s signal.
    pub fn lines(
        &self,
        planted: &PlantConfig,
        source: &Path,
        out: &Path,
        secs: f64,
    ) -> Vec<String> {
        let (first, problems) = crate::convert::copy_lines(
            (self.files, self.written),
            (self.sessions, self.rows),
            &self.problems,
            (source, out, secs),
        );
        let horizon = planted.horizon_minutes;
        let planted_line = format!(
            "planted: a {horizon}-minute forecast with information coefficient {} (measured {:+.3}); the {horizon}-minute return's rms is {:.1} bps",
            planted.strength, self.realised_ic, self.forward_rms_bps
        );
        let next = format!(
            "the edge it puts within reach: serl backtest --data {} --config CONFIG --strategy twap --strategy signal --out DIR",
            out.display()
        );
        [first, planted_line, next]
            .into_iter()
            .chain(problems)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A random-walk session of `n` minutes from 09:30.
    fn walk(n: usize, seed: u64) -> Session {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut p = 100.0;
        let close: Vec<f64> = (0..n)
            .map(|_| {
                let e: f64 = StandardNormal.sample(&mut rng);
                p *= (e * 5e-4).exp();
                p
            })
            .collect();
        Session {
            symbol: Arc::from("TEST"),
            date: chrono::NaiveDate::from_ymd_opt(2018, 3, 1).unwrap(),
            minute: (0..n).map(|i| 570 + i as u16).collect(),
            open: close.clone(),
            high: close.clone(),
            low: close.clone(),
            close,
            volume: vec![100.0; n],
            vwap: None,
            signal: None,
            quotes: None,
            filled: vec![false; n],
            missing_minutes: 0,
            filled_minutes: 0,
        }
    }

    fn planted(strength: f64, seed: u64) -> (Session, Moments) {
        let mut s = walk(390, 1);
        let cfg = PlantConfig {
            strength,
            horizon_minutes: 30,
            seed,
        };
        let mut m = Moments::default();
        for day in 0..20 {
            let mut d = walk(390, 100 + day);
            m.merge(&plant_session(&mut d, &cfg));
        }
        // Every walk has the same volatility, so the pooled correlation is
        // the sessions' own.
        plant_session(&mut s, &cfg);
        (s, m)
    }

    #[test]
    fn the_realised_information_coefficient_is_the_strength() {
        for rho in [0.0, 0.1, 0.5] {
            let (_, m) = planted(rho, 3);
            let ic = m.correlation();
            // 20 days × ~360 bars, overlapping 30-minute returns: about
            // 240 independent draws, so a standard error near 0.06.
            assert!((ic - rho).abs() < 0.15, "strength {rho}: IC {ic:.3}");
        }
    }

    #[test]
    fn the_signal_has_unit_variance_and_follows_its_seed() {
        let (a, _) = planted(0.3, 9);
        let (b, _) = planted(0.3, 9);
        let (c, _) = planted(0.3, 10);
        let sa = a.signal.unwrap();
        assert_eq!(Some(sa.clone()), b.signal);
        assert_ne!(Some(sa.clone()), c.signal);
        let var = sa.iter().map(|x| x * x).sum::<f64>() / sa.len() as f64;
        assert!((var - 1.0).abs() < 0.2, "variance {var:.3}");
    }

    #[test]
    fn a_strength_outside_its_range_is_refused() {
        let mut cfg = PlantConfig {
            strength: 1.0,
            horizon_minutes: 30,
            seed: 0,
        };
        assert!(cfg.validate().unwrap_err().contains("strength 1"));
        cfg.strength = 0.2;
        cfg.horizon_minutes = 0;
        assert!(cfg.validate().unwrap_err().contains("horizon"));
    }
}
