//! Lines and tables on stdout: a library's lines, the one every command that backtests prints, and
//! the libraries' tables drawn in boxes.

use comfy_table::presets::UTF8_FULL_CONDENSED;

/// `value` as JSON on stdout for `--json`, else what `text` prints.
pub fn json_or(
    value: &impl serde::Serialize,
    json: bool,
    text: impl FnOnce(),
) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(value)?);
    } else {
        text();
    }
    Ok(())
}

/// A command's lines, built by a library, on stdout.
pub fn lines<L: std::fmt::Display>(lines: impl IntoIterator<Item = L>) {
    for line in lines {
        println!("{line}");
    }
}

/// A report's metrics, warnings, legend and placement, on stdout.
pub fn summaries(data: &serl_eval::ReportData) {
    print!("{}", serl_eval::summary_table(data));
}

/// A library's table drawn in boxes, as the catalog and the listings
/// draw theirs.
pub fn boxed(t: &serl_report::Table) -> comfy_table::Table {
    let mut b = comfy_table::Table::new();
    b.load_preset(UTF8_FULL_CONDENSED);
    b.set_header(t.header());
    for r in t.rows() {
        b.add_row(r);
    }
    b
}

/// Titled tables, a blank line before each title.
pub fn sections(sections: &[serl_study::catalog::Section]) {
    for s in sections {
        if !s.title.is_empty() {
            println!("\n{}", s.title);
        }
        println!("{}", boxed(&s.table));
    }
}
