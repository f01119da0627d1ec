//! The simulated market's fitted noise rates, kept between runs.
//!
//! A dynamic episode on a session it has not met pays for a pilot day
//! that fits the noise traders' rates to the session's volume
//! ([`serl_market::fit_noise_volume`]): about as long as the episode's own
//! day. The fit is a pure function of the calibration and the market
//! config, so a run can keep it on disk and the next run on the same data
//! reads it back instead of simulating the pilot again; the numbers are
//! the same to the bit either way (a float is written in its shortest form
//! that reads back as itself).
//!
//! One small text file per fit, named by the BLAKE3 hash of what it
//! depends on: a line per run of equal minutes (`value count`; a fit is
//! constant over each half hour, so a day is 13 lines). A file that does not read back (cut short, edited, another
//! version's) is fitted again and rewritten; writes go through a temporary
//! file and a rename, so runs sharing the folder never see half a file.

use std::path::{Path, PathBuf};

use serl_market::{Calibration, MarketConfig};

/// The first line of every file: the format and the hash it was written
/// under, checked on reading.
const HEADER: &str = "serl noise fit v2";

/// The file that holds the fit of `cal` under `cfg` in `dir`, and the hash
/// it is named by.
fn file_of(dir: &Path, cal: &Calibration, cfg: &MarketConfig) -> (PathBuf, String) {
    // Debug forms hold every field, floats in their round-trip form.
    let key = format!("{HEADER}\n{cal:?}\n{cfg:?}");
    let hash = blake3::hash(key.as_bytes()).to_hex().to_string();
    (dir.join(format!("{hash}.txt")), hash)
}

/// The stored fit of `cal` under `cfg`, when `dir` holds a whole one.
pub(crate) fn load(dir: &Path, cal: &Calibration, cfg: &MarketConfig) -> Option<Vec<f64>> {
    let (path, hash) = file_of(dir, cal, cfg);
    let text = std::fs::read_to_string(path).ok()?;
    let mut lines = text.lines();
    if lines.next()? != format!("{HEADER} {hash}") {
        return None;
    }
    let mut fit = Vec::with_capacity(cal.minute_price.len());
    for line in lines {
        let (value, count) = line.split_once(' ')?;
        let (value, count): (f64, usize) = (value.parse().ok()?, count.parse().ok()?);
        if fit.len() + count > cal.minute_price.len() {
            return None;
        }
        fit.extend(std::iter::repeat_n(value, count));
    }
    (fit.len() == cal.minute_price.len()).then_some(fit)
}

/// Keeps `fit` in `dir`. A folder that cannot be written only costs the
/// next run its pilot days, so the error is logged, not returned.
pub(crate) fn store(dir: &Path, cal: &Calibration, cfg: &MarketConfig, fit: &[f64]) {
    let (path, hash) = file_of(dir, cal, cfg);
    let mut text = format!("{HEADER} {hash}\n");
    for run in fit.chunk_by(|a, b| a.to_bits() == b.to_bits()) {
        text.push_str(&format!("{:?} {}\n", run[0], run.len()));
    }
    let tmp = dir.join(format!(".{hash}.{}.tmp", std::process::id()));
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, text))
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        tracing::warn!("noise-fit cache {}: {e}", dir.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day() -> Calibration {
        Calibration {
            tick: 0.01,
            minute_price: vec![10.0, 10.01, 10.02],
            minute_volume: vec![100.0, 200.0, 300.0],
            spread_bps: 5.0,
            noise_scale: Vec::new(),
        }
    }

    #[test]
    fn a_stored_fit_reads_back_to_the_bit_and_only_for_its_own_day_and_config() {
        let dir = tempfile::tempdir().unwrap();
        let (cal, cfg) = (day(), MarketConfig::default());
        let fit = vec![0.1 + 0.2, 1.0 / 3.0, 1.0 / 3.0];
        assert_eq!(load(dir.path(), &cal, &cfg), None);
        store(dir.path(), &cal, &cfg, &fit);
        let back = load(dir.path(), &cal, &cfg).unwrap();
        assert!(back
            .iter()
            .zip(&fit)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
        let other = MarketConfig {
            value_agents: 7,
            ..cfg.clone()
        };
        assert_eq!(load(dir.path(), &cal, &other), None);
        let mut moved = cal.clone();
        moved.minute_volume[1] += 1.0;
        assert_eq!(load(dir.path(), &moved, &cfg), None);
    }

    #[test]
    fn a_damaged_file_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let (cal, cfg) = (day(), MarketConfig::default());
        store(dir.path(), &cal, &cfg, &[1.0, 2.0, 2.0]);
        let (path, _) = file_of(dir.path(), &cal, &cfg);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with("\n1.0 1\n2.0 2\n"), "{text}");
        assert_eq!(load(dir.path(), &cal, &cfg), Some(vec![1.0, 2.0, 2.0]));
        // Cut short, too long, or a value that is not a number.
        for bad in [
            text.replace("2.0 2", "2.0 1"),
            text.replace("2.0 2", "2.0 3"),
            text.replace("2.0 2", "two 2"),
            text.replace(" v2 ", " v1 "),
        ] {
            std::fs::write(&path, bad).unwrap();
            assert_eq!(load(dir.path(), &cal, &cfg), None);
        }
    }
}
