//! How long a run took over the processes that worked on it.

/// How long the run took: this process's seconds, and the run's over
/// every process where it was resumed.
pub(super) fn took(this_process: f64, all_processes: f64) -> String {
    if all_processes > this_process + 1.0 {
        format!("{all_processes:.0}s in all over its processes ({this_process:.0}s in this one)")
    } else {
        format!("{this_process:.0}s in all")
    }
}
