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

/// Writes out the trace, if one is being written, its threads numbered
/// from 1 and the traces of the tasks it ran as processes joined in: at
/// the command's end.
pub fn finish() {
    flush();
    let dirs = std::mem::take(&mut *TASK_DIRS.lock().unwrap_or_else(|p| p.into_inner()));
    if let Some((path, started)) = WRITING.get() {
        let (written, skipped) = write_out_joined(path, *started, &dirs);
        let at = path.display();
        if let Err(e) = written {
            eprintln!("warning: --trace {at}: not written out again ({e}): left as recorded");
        } else if skipped > 0 {
            eprintln!("warning: --trace {at}: {skipped} task traces not joined in");
        }
    }
}

/// Numbers a trace's threads from 1 where the writer numbered them from 0
/// (tracing-chrome gives the first thread, the command's own, id 0):
/// Perfetto takes a thread whose id is its process's for the process's
/// main thread, and one numbered 0 for no thread at all, whose slices it
/// draws on the main thread's row. So the command's thread becomes 1,
/// its process's id, and `main` again. A trace already numbered from 1
/// is left as it is.
fn threads_from_one(events: &mut [serde_json::Value]) {
    if !events.iter().any(|e| e["tid"] == 0) {
        return;
    }
    for e in events {
        if let Some(tid) = e["tid"].as_u64() {
            e["tid"] = (tid + 1).into();
        }
    }
}

/// Writes out the trace as it is, the tasks' traces left apart in their
/// folder: before a signal stops the command, which must not wait on a
/// join.
pub fn flush() {
    let guard = GUARD.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(guard);
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

/// A trace's events, one a line as tracing-chrome writes them; a line
/// that does not parse (a trace cut short by a kill) is left out. `None`
/// for a file that cannot be read.
fn read_events(path: &Path) -> Option<Vec<serde_json::Value>> {
    let text = std::fs::read_to_string(path).ok()?;
    let events = text.lines().filter_map(|line| {
        let line = line.trim().trim_end_matches(',');
        serde_json::from_str::<serde_json::Value>(line).ok()
    });
    Some(events.filter(|e| e.is_object()).collect())
}

/// The task traces in `dirs` (`task-K-START.json`), by their start:
/// `(start, K, path)`.
fn task_traces(dirs: &[PathBuf]) -> Vec<(u64, usize, PathBuf)> {
    let files = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|d| d.flatten().map(|e| e.path()));
    let mut tasks: Vec<(u64, usize, PathBuf)> = files
        // Not a task's temporary file (`task-K-START.tmpPID`) while it
        // writes its trace out.
        .filter(|file| file.extension().is_some_and(|e| e == "json"))
        .filter_map(|file| {
            let stem = file.file_stem()?.to_str()?.strip_prefix("task-")?;
            let (k, at) = stem.split_once('-')?;
            Some((at.parse().ok()?, k.parse().ok()?, file))
        })
        .collect();
    tasks.sort();
    tasks
}

/// The metadata event that names process `pid` in a viewer.
fn process_name(pid: usize, name: String) -> serde_json::Value {
    let args = serde_json::json!({ "name": name });
    serde_json::json!({"ph": "M", "pid": pid, "tid": 1, "name": "process_name", "args": args})
}

/// A slice's end without the arguments its beginning carries:
/// tracing-chrome writes a span's fields on both, and the trace viewer of
/// chrome://tracing warns of each pair ("different phases provided values
/// for argument") though they are the same.
fn end_events_without_args(events: &mut [serde_json::Value]) {
    for e in events.iter_mut().filter(|e| e["ph"] == "E") {
        if let Some(fields) = e.as_object_mut() {
            fields.remove("args");
        }
    }
}

/// A process's events as the viewers read them best: threads from 1, and
/// slices' ends without arguments.
fn for_viewers(events: &mut [serde_json::Value]) {
    threads_from_one(events);
    end_events_without_args(events);
}

/// Writes the trace at `path` (started at `started`) again, its threads
/// numbered from 1 and its slices' ends without arguments, with each task
/// trace in `dirs` joined in: a process row per task (`task K`), its times
/// shifted by how much later it started. Returns how it went, and how many
/// task traces could not be read.
fn write_out_joined(path: &Path, started: u64, dirs: &[PathBuf]) -> (std::io::Result<()>, usize) {
    let Some(mut events) = read_events(path) else {
        return (Err(std::io::Error::other("it cannot be read back")), 0);
    };
    for_viewers(&mut events);
    if !dirs.is_empty() {
        events.push(process_name(1, "serl (coordinator)".into()));
    }
    let mut skipped = 0;
    for (n, (at, k, file)) in task_traces(dirs).into_iter().enumerate() {
        let Some(mut task) = read_events(&file) else {
            skipped += 1;
            continue;
        };
        // A task killed before its end left its events as written.
        for_viewers(&mut task);
        let (pid, shift) = (n + 2, at.saturating_sub(started) as f64);
        events.push(process_name(pid, format!("task {k}")));
        for mut e in task {
            e["pid"] = pid.into();
            if let Some(ts) = e["ts"].as_f64() {
                e["ts"] = (ts + shift).into();
            }
            events.push(e);
        }
    }
    let lines: Vec<String> = events.iter().map(|e| e.to_string()).collect();
    let text = format!("[\n{}\n]\n", lines.join(",\n"));
    (serl_report::write_atomic(path, text.as_bytes()), skipped)
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
    let colour = colour_logs();
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_filter(
            EnvFilter::try_from_env("SERL_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
        );
    // The cost table's stage seconds are the stage spans' (traced or not).
    let stages =
        serl_evolve::StageClock.with_filter(filter::filter_fn(serl_evolve::StageClock::measures));
    let Some(path) = trace else {
        tracing_subscriber::registry()
            .with(logs)
            .with(stages)
            .init();
        name_workers();
        return Ok(());
    };
    let file = std::fs::File::create(path)
        .with_context(|| format!("--trace {}: cannot write the trace there", path.display()))?;
    let _ = WRITING.set((path.to_path_buf(), epoch_us()));
    let (chrome, guard) = ChromeLayerBuilder::new()
        // The writer buffers (8 KiB): a command stopped by a signal writes
        // its trace out in `finish`; one killed outright leaves it cut
        // short, which `read_events` reads up to the cut.
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
        .with(stages)
        .with(Labels.with_filter(filter::filter_fn(serl_span)))
        .with(chrome.with_filter(filter::filter_fn(serl_span)))
        .init();
    *GUARD.lock().unwrap_or_else(|p| p.into_inner()) = Some(guard);
    name_workers();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn event(ph: &str, ts: f64) -> String {
        format!(r#"{{"ph":"{ph}","pid":1,"ts":{ts},"name":"training","tid":0}}"#)
    }

    #[test]
    fn the_tasks_traces_join_the_coordinators_a_row_each_on_its_clock() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run.json");
        let own = format!("[\n{},\n{}\n]\n", event("B", 10.0), event("E", 5000.0));
        std::fs::write(&run, own).unwrap();
        let traces = dir.path().join(TASK_TRACES);
        std::fs::create_dir(&traces).unwrap();
        // Task 3 started 1 ms after the coordinator and was killed in the
        // middle of an event; task 0 started 2 ms after it and ended.
        let cut = format!("[\n{},\n{{\"ph\":\"E\",\"pid\":1,\"ts\":", event("B", 2.0));
        std::fs::write(traces.join("task-3-1001000.json"), cut).unwrap();
        let whole = format!("[\n{},\n{}\n]\n", event("B", 1.0), event("E", 9.0));
        std::fs::write(traces.join("task-0-1002000.json"), whole).unwrap();
        std::fs::write(traces.join("notes.txt"), "not a trace").unwrap();
        // A task writing its trace out: not a task of its own.
        std::fs::write(traces.join("task-0-1002000.tmp77"), "[").unwrap();

        let (joined, skipped) = write_out_joined(&run, 1_000_000, &[traces]);
        assert!(joined.is_ok() && skipped == 0, "{joined:?}, {skipped}");
        let text = std::fs::read_to_string(&run).unwrap();
        let events: Vec<Value> = serde_json::from_str(&text).expect("a whole JSON array");
        let rows: Vec<(u64, &str)> = events
            .iter()
            .filter(|e| e["name"] == "process_name")
            .map(|e| {
                (
                    e["pid"].as_u64().unwrap(),
                    e["args"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [(1, "serl (coordinator)"), (2, "task 3"), (3, "task 0")]
        );
        let times = |pid: u64| -> Vec<f64> {
            let of = events.iter().filter(|e| e["pid"] == pid && e["ph"] != "M");
            of.map(|e| e["ts"].as_f64().unwrap()).collect()
        };
        assert_eq!(times(1), [10.0, 5000.0]);
        // Task 3's cut event is left out; each task's times move by its
        // later start.
        assert_eq!(times(2), [1002.0]);
        assert_eq!(times(3), [2001.0, 2009.0]);
        // No thread numbered 0 (Perfetto draws one on the main thread's
        // row): every process's first thread is 1.
        assert!(events.iter().all(|e| e["tid"] == 1), "{text}");
    }

    #[test]
    fn a_traces_threads_are_numbered_from_one_once() {
        let mut events: Vec<Value> = [0, 1, 0, 2]
            .map(|tid| serde_json::json!({"ph": "B", "pid": 1, "tid": tid}))
            .into();
        threads_from_one(&mut events);
        let tids = |events: &[Value]| -> Vec<u64> {
            events.iter().map(|e| e["tid"].as_u64().unwrap()).collect()
        };
        assert_eq!(tids(&events), [1, 2, 1, 3]);
        threads_from_one(&mut events);
        assert_eq!(tids(&events), [1, 2, 1, 3], "numbered once");
    }

    #[test]
    fn a_slices_end_carries_no_arguments_its_beginning_has() {
        let label = serde_json::json!({"label": "i0_c0"});
        let mut events: Vec<Value> = ["B", "E"]
            .map(|ph| serde_json::json!({"ph": ph, "tid": 1, "args": label}))
            .into();
        end_events_without_args(&mut events);
        assert_eq!(events[0]["args"], label);
        assert!(events[1].get("args").is_none(), "{}", events[1]);
    }
}
