//! The table every command that backtests prints.

/// A report's metrics, warnings, legend and placement, on stdout.
pub fn summaries(data: &serl_eval::ReportData) {
    print!("{}", serl_eval::summary_table(data));
}
