//! The log lines on stderr (`SERL_LOG`), and `--trace FILE`: a trace of
//! the run in the Chrome trace-event format, which Perfetto
//! (ui.perfetto.dev) and `chrome://tracing` open. The libraries open
//! `tracing` spans at INFO for what takes time (an evolve run's stages,
//! each candidate, each training and its updates, a backtest); the trace
//! draws each as a slice on its thread's row, named by its `label` field
//! where it has one (the stage, the candidate's key) and else by its name.
//!
//! A run whose tasks run as processes of their own (a cluster engine's
//! `serl task run`) has them on the same timeline: the coordinator makes
//! the plan's `traces/` folder ([`trace_tasks_in`]), each task writes its
//! trace there, named by the instant it started ([`task_trace`]), and the
//! coordinator's [`finish`] joins them into its own, a process row per
//! task, its times shifted onto the coordinator's clock.

use std::fmt::Debug;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Level, Subscriber};
use tracing_chrome::{ChromeLayerBuilder, EventOrSpan, FlushGuard};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{filter, EnvFilter, Layer};

use crate::error::{Context as _, Result};

/// A span's `label` field, kept with the span for the trace's names.
struct Label(String);

/// Reads the `label` field of new spans into their extensions.
struct Labels;

struct LabelField(Option<String>);

impl Visit for LabelField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "label" {
            self.0 = Some(value.to_string());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "label" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Labels {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut label = LabelField(None);
        attrs.record(&mut label);
        if let (Some(text), Some(span)) = (label.0, ctx.span(id)) {
            span.extensions_mut().insert(Label(text));
        }
    }
}

/// Only serl's own spans at INFO and above go into a trace.
fn serl_span(meta: &tracing::Metadata<'_>) -> bool {
    meta.is_span() && meta.target().starts_with("serl") && *meta.level() <= Level::INFO
}

/// The trace's writer, held until the command ends ([`finish`]).
static GUARD: Mutex<Option<FlushGuard>> = Mutex::new(None);

/// The trace this process writes, and when it started (µs since the
/// Unix epoch: its events' times count from then).
static WRITING: OnceLock<(PathBuf, u64)> = OnceLock::new();
/// The plans' `traces/` folders whose tasks' traces join this one.
static TASK_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// The folder under a plan's root its tasks write their traces to.
const TASK_TRACES: &str = "traces";

fn epoch_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Writes out the trace, if one is being written, with the traces of the
/// tasks it ran as processes joined in: at the command's end, and before a
/// signal stops it.
pub fn finish() {
    let guard = GUARD.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(guard);
    let dirs = std::mem::take(&mut *TASK_DIRS.lock().unwrap_or_else(|p| p.into_inner()));
    if let (Some((path, started)), false) = (WRITING.get(), dirs.is_empty()) {
        if let Err(e) = join_tasks(path, *started, &dirs) {
            eprintln!(
                "warning: --trace {}: the tasks' traces were not joined in: {e}",
                path.display()
            );
        }
    }
}

/// Where task `index` of the plan in `root` writes its trace, when the
/// coordinator traces (it made the plan's `traces/` folder):
/// `traces/task-K-START.json`, START this process's start in µs since the
/// Unix epoch, which places its events on the coordinator's clock.
pub fn task_trace(root: &Path, index: usize) -> Option<PathBuf> {
    let dir = root.join(TASK_TRACES);
    dir.is_dir()
        .then(|| dir.join(format!("task-{index}-{}.json", epoch_us())))
}

/// When this process writes a trace, the tasks of the plan in `root` write
/// theirs too ([`task_trace`]), and [`finish`] joins them in: makes the
/// plan's `traces/` folder, emptied of an earlier coordinator's once; when
/// it writes none, takes the folder away.
pub fn trace_tasks_in(root: &Path) {
    let dir = root.join(TASK_TRACES);
    if WRITING.get().is_none() {
        // The folder says the coordinator traces: an earlier one's is
        // taken away, so that this one's tasks write no traces.
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let mut dirs = TASK_DIRS.lock().unwrap_or_else(|p| p.into_inner());
    if dirs.contains(&dir) {
        return;
    }
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::create_dir_all(&dir).is_ok() {
        dirs.push(dir);
    }
}

/// A trace's events: its JSON array, whose closing bracket a process
/// stopped mid-way may not have written.
fn read_events(path: &Path) -> std::io::Result<Vec<serde_json::Value>> {
    let text = std::fs::read_to_string(path)?;
    let body = text.trim_end().trim_end_matches(',');
    let whole = match body.ends_with(']') {
        true => body.to_string(),
        false => format!("{body}]"),
    };
    Ok(serde_json::from_str(&whole)?)
}

/// Joins into the trace at `path` (started at `started`) each task trace
/// in `dirs`: a process row per task (`task K`), its times shifted by how
/// much later it started; returns how many were joined.
fn join_tasks(path: &Path, started: u64, dirs: &[PathBuf]) -> std::io::Result<usize> {
    let mut tasks: Vec<(u64, usize, PathBuf)> = Vec::new();
    for dir in dirs {
        for file in std::fs::read_dir(dir)?.flatten().map(|e| e.path()) {
            let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            let mut parts = stem.strip_prefix("task-").unwrap_or("").split('-');
            if let (Some(Ok(k)), Some(Ok(at))) = (
                parts.next().map(str::parse::<usize>),
                parts.next().map(str::parse::<u64>),
            ) {
                tasks.push((at, k, file));
            }
        }
    }
    tasks.sort();
    let mut events = read_events(path)?;
    let name = |pid: usize, name: String| serde_json::json!({"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": name}});
    events.push(name(1, "serl (coordinator)".into()));
    for (n, (at, k, file)) in tasks.iter().enumerate() {
        let pid = n + 2;
        let shift = at.saturating_sub(started) as f64;
        events.push(name(pid, format!("task {k}")));
        for mut e in read_events(file)? {
            e["pid"] = pid.into();
            if let Some(ts) = e["ts"].as_f64() {
                e["ts"] = (ts + shift).into();
            }
            events.push(e);
        }
    }
    let lines: Vec<String> = events.iter().map(|e| e.to_string()).collect();
    let text = format!("[\n{}\n]\n", lines.join(",\n"));
    serl_report::write_atomic(path, text.as_bytes())?;
    Ok(tasks.len())
}

/// Names the threads of rayon's global pool (where candidates train side
/// by side) `worker K`, so that a trace's rows, `top -H` and a debugger say
/// what they are; the pool's size is rayon's own (`RAYON_NUM_THREADS`, else
/// a thread per core). A pool already built keeps its names.
fn name_workers() {
    let pool = rayon::ThreadPoolBuilder::new().thread_name(|k| format!("worker {k}"));
    let _ = pool.build_global();
}

/// Colour in log lines only on a terminal: `serl evolve 2> run.log` must
/// not fill the file with escape codes. `NO_COLOR` (no-color.org), when
/// set and not empty, turns it off on a terminal too.
fn colour_logs() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && std::io::stderr().is_terminal()
}

/// Sets up this process's log lines on stderr (`SERL_LOG`, `warn` by
/// default), and the trace into `trace` when given (until [`finish`]).
pub fn init_logs(trace: Option<&Path>) -> Result<()> {
    name_workers();
    let colour = colour_logs();
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_filter(
            EnvFilter::try_from_env("SERL_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
        );
    let Some(path) = trace else {
        tracing_subscriber::registry().with(logs).init();
        return Ok(());
    };
    let file = std::fs::File::create(path)
        .with_context(|| format!("--trace {}: cannot write the trace there", path.display()))?;
    let _ = WRITING.set((path.to_path_buf(), epoch_us()));
    let (chrome, guard) = ChromeLayerBuilder::new()
        // Unbuffered: each event is on disk once written, so a command
        // stopped by a signal or a panic leaves its trace up to then (the
        // format lets the closing bracket be missing).
        .writer(file)
        .include_args(true)
        .include_locations(false)
        .name_fn(Box::new(|e| match e {
            EventOrSpan::Span(s) => s
                .extensions()
                .get::<Label>()
                .map_or_else(|| s.name().to_string(), |l| l.0.clone()),
            EventOrSpan::Event(ev) => ev.metadata().name().to_string(),
        }))
        .build();
    tracing_subscriber::registry()
        .with(logs)
        .with(Labels.with_filter(filter::filter_fn(serl_span)))
        .with(chrome.with_filter(filter::filter_fn(serl_span)))
        .init();
    *GUARD.lock().unwrap_or_else(|p| p.into_inner()) = Some(guard);
    Ok(())
}
