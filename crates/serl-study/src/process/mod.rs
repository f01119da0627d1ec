//! What a command's process holds while it runs, for a front end that is
//! a process of its own (the `serl` binary; the Python package keeps its
//! interpreter's): its log lines and trace ([`init_logs`], [`finish`];
//! its tasks' traces joined in: [`trace_tasks_in`], [`task_trace`]),
//! the run directory it coordinates ([`claim_run`], [`release`]), and what
//! SIGINT and SIGTERM do to it ([`on_signal`], [`training`],
//! [`at_clean_point`]).

mod held;
mod signals;
mod trace;

pub use held::{claim_run, release};
pub use signals::{at_clean_point, on_signal, training};
pub use trace::{finish, flush, init_logs, task_trace, trace_tasks_in};
