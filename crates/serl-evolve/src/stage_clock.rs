//! The seconds of an evolve run's stages, read from their `tracing` spans:
//! [`StageClock`] is a layer that measures each `stage` span's time
//! entered (the time a trace draws as its slices), and [`take`] hands a
//! closed span's seconds to the cost table (`costs.json`). So the table and
//! a `--trace` timeline are one measurement, not two clocks that could
//! disagree.
//!
//! A front end installs the layer with its subscriber (the `serl` binary
//! does, traced or not). Where none is installed (a library caller that set
//! no subscriber), the stage has no span to read and the cost table times
//! it with a clock around the same call instead.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::span::{Attributes, Id};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// The name of the spans the cost table reads (opened by `Stages::time`).
pub(crate) const STAGE_SPAN: &str = "stage";
/// Their target (`Stages::time`'s module, named where it opens them).
pub(crate) const STAGE_TARGET: &str = "serl_evolve::stages";

/// The seconds of closed stage spans, by span id, until taken.
static CLOSED: Mutex<Option<HashMap<u64, f64>>> = Mutex::new(None);

/// A tracing layer that measures the time each stage span is entered.
pub struct StageClock;

/// A stage span's time entered so far, and since when it is entered now.
#[derive(Default)]
struct Entered {
    total: Duration,
    since: Option<Instant>,
}

impl StageClock {
    /// Whether `meta` is a stage span, which the layer measures: its
    /// filter, so that a subscriber holding it enables no other span (an
    /// untraced run creates none of the training's per-update spans).
    pub fn measures(meta: &tracing::Metadata<'_>) -> bool {
        meta.is_span() && meta.name() == STAGE_SPAN && meta.target() == STAGE_TARGET
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for StageClock {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let stage = StageClock::measures(attrs.metadata());
        if let (true, Some(span)) = (stage, ctx.span(id)) {
            span.extensions_mut().insert(Entered::default());
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(e) = span.extensions_mut().get_mut::<Entered>() {
                e.since = Some(Instant::now());
            }
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(e) = span.extensions_mut().get_mut::<Entered>() {
                e.total += e.since.take().map_or(Duration::ZERO, |t| t.elapsed());
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let extensions = span.extensions();
        let Some(e) = extensions.get::<Entered>() else {
            return;
        };
        let mut closed = CLOSED.lock().unwrap_or_else(|p| p.into_inner());
        let secs = e.total.as_secs_f64();
        closed
            .get_or_insert_with(HashMap::new)
            .insert(id.into_u64(), secs);
    }
}

/// The seconds the closed stage span `id` was entered, once: `None` where
/// no [`StageClock`] measured it.
pub(crate) fn take(id: &Id) -> Option<f64> {
    let mut closed = CLOSED.lock().unwrap_or_else(|p| p.into_inner());
    let secs = closed.as_mut()?.remove(&id.into_u64());
    #[cfg(test)]
    if secs.is_some() {
        TAKEN.with(|n| n.set(n.get() + 1));
    }
    secs
}

#[cfg(test)]
thread_local! {
    /// Seconds this thread took from the layer: a test's proof that the
    /// cost table read the span, not a clock.
    pub(crate) static TAKEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    fn nap(ms: u64) {
        std::thread::sleep(Duration::from_millis(ms));
    }

    /// A span's seconds are its time entered: a span left and entered
    /// again does not count the time between.
    #[test]
    fn a_stage_counts_the_time_its_span_is_entered() {
        let subscriber = tracing_subscriber::registry().with(StageClock);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(target: STAGE_TARGET, STAGE_SPAN, label = "t");
            let id = span.id().expect("the layer's subscriber enables the span");
            span.in_scope(|| nap(30));
            nap(1000);
            span.in_scope(|| nap(30));
            assert_eq!(take(&id), None, "an open span has no seconds yet");
            drop(span);
            let secs = take(&id).expect("measured");
            assert!((0.06..0.5).contains(&secs), "{secs}");
            assert_eq!(take(&id), None, "taken once");

            let other = tracing::info_span!(target: STAGE_TARGET, "candidate");
            let id = other.id().unwrap();
            other.in_scope(|| nap(1));
            drop(other);
            assert_eq!(take(&id), None, "only stage spans are measured");
        });
    }
}
