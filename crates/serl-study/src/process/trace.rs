//! The log lines on stderr (`SERL_LOG`), and `--trace FILE`: a trace of
//! the run in the Chrome trace-event format, which Perfetto
//! (ui.perfetto.dev) and `chrome://tracing` open. The libraries open
//! `tracing` spans at INFO for what takes time (an evolve run's stages,
//! each candidate, each training and its updates, a backtest); the trace
//! draws each as a slice on its thread's row, named by its `label` field
//! where it has one (the stage, the candidate's key) and else by its name.

use std::fmt::Debug;
use std::io::IsTerminal;
use std::path::Path;
use std::sync::Mutex;

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

/// Writes out the trace, if one is being written: at the command's end,
/// and before a signal stops it.
pub fn finish() {
    let guard = GUARD.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(guard);
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
