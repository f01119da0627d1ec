//! # serl-report: what every serl report shares
//!
//! The backtest, training, evolve and simulate reports are Markdown with
//! SVG plots; this leaf crate turns them into one self-contained HTML page
//! ([`html`], rendered by pulldown-cmark), draws the plots ([`lines_chart`],
//! [`bars_chart`], and estimates with their intervals: [`intervals_chart`]), holds the one
//! table type every report renders as Markdown, HTML or terminal text
//! ([`Table`]), says how far long work is in a log ([`ProgressLines`]),
//! and writes files so that a crash leaves the old or the
//! new version, never half of one ([`write_atomic`]).
//!
//! ```
//! let mut svg = String::new();
//! serl_report::lines_chart(
//!     &mut svg,
//!     &serl_report::Chart::new("PA over updates", "update", "bps").integer_x(),
//!     &[("train".to_string(), vec![(0.0, -1.0), (1.0, 0.5), (2.0, 1.0)])],
//! )
//! .unwrap();
//! let page = serl_report::html("# Run\n\n![PA](plot0.svg)\n", &[("PA".into(), svg)]);
//! assert!(page.contains("<h1>Run</h1>") && page.contains("<svg"));
//! ```

#![deny(missing_docs)]

mod chart;
mod html;
mod progress;
mod table;

pub use chart::{bars_chart, intervals_chart, lines_chart, Chart, Intervals, PlotResult};
pub use html::{html, table_cell};
pub use progress::ProgressLines;
pub use table::{Align, Table};

use std::path::Path;

/// Writes a report into `dir`: each plot of `svgs` as `plotK.svg` (the
/// names `md` links them by), `report.md`, and `report.html` with the
/// plots inline. Returns the HTML page's path.
pub fn write_pages(
    dir: &Path,
    md: &str,
    svgs: &[(String, String)],
) -> std::io::Result<std::path::PathBuf> {
    for (k, (_, svg)) in svgs.iter().enumerate() {
        std::fs::write(dir.join(format!("plot{k}.svg")), svg)?;
    }
    std::fs::write(dir.join("report.md"), md)?;
    let page = dir.join("report.html");
    std::fs::write(&page, html(md, svgs))?;
    Ok(page)
}

/// Writes `bytes` to `path` through a temporary file beside it and a
/// rename, so that a crash leaves the old or the new version, never half
/// of one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    // The writer's own temporary file: two processes writing the same
    // file (a scheduler's retry beside the first try) never rename each
    // other's half-written bytes into place.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
