//! `serl simulate calibrate`: the queue-reactive order flow fitted to
//! LOBSTER days, one model file per symbol, for a market config to name
//! (`[market] queue_reactive = "FILE"`).

use std::path::{Path, PathBuf};

use serl_lob::{read_days, sample_files};
use serl_market::QueueReactive;

use crate::error::{Context, Result, StudyError};
use crate::realism::{clock, minute_seconds};

/// LOBSTER's price units per cent.
const CENT: i64 = 100;

/// What `serl simulate calibrate` is asked.
pub struct CalibrateRequest {
    /// A LOBSTER sample zip, or a directory of them (the deepest file of
    /// each symbol).
    pub lobster: PathBuf,
    /// Only these symbols of the directory.
    pub symbols: Vec<String>,
    /// Calibrate on the messages before this minute of the session only
    /// (0: 09:30), to keep the rest of the day for a held-out check.
    pub until_minute: Option<usize>,
    /// The directory the model files go to.
    pub out: PathBuf,
    /// Write over model files already there.
    pub force: bool,
}

/// One symbol's fitted model and where it was written.
pub struct CalibratedFile {
    /// The symbol.
    pub symbol: String,
    /// The model file.
    pub path: PathBuf,
    /// The model.
    pub model: QueueReactive,
}

impl CalibratedFile {
    /// The fit in a line: levels, seconds, the median spread, and the
    /// best queue's rates (of one unit) per second per side, then the file.
    pub fn summary_line(&self) -> String {
        let m = &self.model;
        let limit: f64 = m.limit.iter().map(|r| r[1]).sum();
        format!(
            "{}: {} levels over {:.0} s, median spread {} ticks, best queue of 1 unit: {:.2} market, {:.2} cancels, {:.2} limit orders per second per side; {}",
            self.symbol,
            m.levels(),
            m.seconds,
            m.spread,
            m.market[1],
            m.cancel[0][1],
            limit,
            self.path.display()
        )
    }
}

/// Fits the flow to each symbol's day (or its part before
/// `until_minute`) and writes `OUT/SYMBOL.json`; `warn` hears what is
/// wrong with a day that is read all the same (its book crossed).
pub fn calibrate(a: &CalibrateRequest, warn: &dyn Fn(&str)) -> Result<Vec<CalibratedFile>> {
    let files = sample_files(&a.lobster, &a.symbols)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let mut done = Vec::new();
    for (symbol, file, day) in read_days(files) {
        let path = a.out.join(format!("{symbol}.json"));
        refuse_writing_over(&path, a.force)?;
        let day = day.with_context(|| format!("reading {}", file.display()))?;
        let (day, window) = match a.until_minute {
            Some(m) => (
                day.split_at(minute_seconds(m)).0,
                format!(" before {}", clock(m)),
            ),
            None => (day, String::new()),
        };
        // Said of the part the flow is fitted to.
        if let Some(w) = day.warning() {
            warn(&w);
        }
        let source = format!("{}{window}", file.display());
        let model =
            QueueReactive::fit(&day.messages, &day.rows, CENT, &source).with_context(|| {
                format!("{source}: too little order flow to fit the queue-reactive flow")
            })?;
        let text = serde_json::to_string_pretty(&model)?;
        serl_report::write_atomic(&path, text.as_bytes())?;
        done.push(CalibratedFile {
            symbol,
            path,
            model,
        });
    }
    Ok(done)
}

fn refuse_writing_over(path: &Path, force: bool) -> Result<()> {
    if path.exists() && !force {
        return Err(StudyError::msg(format!(
            "{} exists; pass --force to write over it",
            path.display()
        )));
    }
    Ok(())
}
