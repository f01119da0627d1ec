//! Work that reads files through polars, spread over the cores on plain
//! threads rather than rayon's pool.
//!
//! A rayon worker that waits for polars' own pool (every Parquet or CSV
//! read) steals the next item's job meanwhile, so each item's frames stay
//! alive on the worker's stack and the peak grows with the number of
//! items: 292 MiB for the 3.2 M bars of the shared minute data where one
//! file at a time needed 25 MiB, 4.6 GB loading the scale fixture's 500
//! files, 4.8 GB writing them (docs/data.md, "Scale"). On plain threads
//! the peak is a core's worth of items.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `work` on every item, a core's worth at a time on plain threads that
/// each take the next item when done; the results in the items' order. A
/// panic in `work` is raised again here.
pub(crate) fn on_cores<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    if threads <= 1 || items.len() <= 1 {
        return items.iter().map(work).collect();
    }
    let next = AtomicUsize::new(0);
    let mut all: Vec<(usize, R)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads.min(items.len()))
            .map(|_| {
                let (next, work) = (&next, &work);
                scope.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            return done;
                        };
                        done.push((i, work(item)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_is_worked_once_and_the_results_keep_their_order() {
        let items: Vec<u64> = (0..1_000).collect();
        let seen = AtomicUsize::new(0);
        let out = on_cores(&items, |&x| {
            seen.fetch_add(1, Ordering::Relaxed);
            x * x
        });
        assert_eq!(seen.load(Ordering::Relaxed), 1_000);
        assert_eq!(out, items.iter().map(|x| x * x).collect::<Vec<_>>());
    }
}
