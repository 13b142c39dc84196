//! Sampling ahead of training: background threads sample batches `k + 1, k + 2, ...` while the
//! caller trains on batch `k`.
//!
//! The threads are scoped (`std::thread::scope`), so the sampler and the batch plan are
//! borrowed, not moved or reference-counted. With `T` threads, thread `t` samples the steps
//! `t, t + T, t + 2T, ...` and the caller takes them in step order, so the batches are the
//! serial ones whatever `T` (a draw depends on its step's key only). Batches travel through
//! bounded channels: with the default lookahead of one, a thread samples its next batch and
//! then waits for the caller to take it, so at most `T + 1` batches exist at once. Each
//! thread's parallel blocks run on the global rayon pool.
//!
//! [`Prefetch::finishing`] also runs a function of the caller's on each batch on its sampling
//! thread (the trainer builds the batch's aggregation blocks there), so that work leaves the
//! training thread too; its items are what the function returns.
//!
//! Errors: a failed step is handed over in its turn and ends the iterator (the threads sample
//! nothing after it); a panic on a thread comes out as [`SampleError::PrefetchPanicked`] in
//! the turn of the step it left undone. Dropping the iterator early stops the threads: each
//! finishes the batch in hand, sees its channel closed, and is joined before `drop` returns.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use super::{MiniBatch, NeighborSampler, SampleError, Step};

/// State the sampling thread and the iterator share.
#[derive(Debug)]
struct Shared {
    stop: AtomicBool,
    /// The first step that failed (`usize::MAX`: none); no thread samples a later one.
    failed: AtomicUsize,
    sampling_ns: AtomicU64,
}

impl Default for Shared {
    fn default() -> Self {
        Self { stop: AtomicBool::new(false), failed: AtomicUsize::new(usize::MAX), sampling_ns: AtomicU64::new(0) }
    }
}

/// How many threads sample, and how far ahead of the caller each one goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefetchOptions {
    /// Sampling threads; thread `t` samples steps `t, t + threads, ...`.
    pub threads: NonZeroUsize,
    /// Batches a thread samples before the caller takes them.
    pub ahead: NonZeroUsize,
}

impl Default for PrefetchOptions {
    /// One thread, one batch ahead.
    fn default() -> Self {
        Self { threads: NonZeroUsize::MIN, ahead: NonZeroUsize::MIN }
    }
}

/// An iterator over sampled batches (or what [`Prefetch::finishing`]'s function makes of
/// them), produced on background threads; see the module docs.
#[derive(Debug)]
pub struct Prefetch<'scope, T = MiniBatch, E = SampleError> {
    /// One channel per thread; step `k` comes from `batches[k % T]`.
    batches: Vec<Option<Receiver<Result<T, E>>>>,
    workers: Vec<Option<ScopedJoinHandle<'scope, ()>>>,
    /// The next step the caller takes.
    next: usize,
    /// Set once an error or the end has been handed over.
    done: bool,
    shared: Arc<Shared>,
    waiting: Duration,
}

impl<'scope> Prefetch<'scope> {
    /// Starts sampling `steps` with `sampler` on a thread of `scope`, one batch ahead.
    pub fn spawn<'env, I>(scope: &'scope Scope<'scope, 'env>, sampler: &'env NeighborSampler<'env>, steps: I) -> Self
    where
        I: IntoIterator<Item = Step<'env>>,
        I::IntoIter: Clone + Send + 'scope,
    {
        Self::with_options(scope, sampler, steps, PrefetchOptions::default())
    }

    /// As [`Prefetch::spawn`], on `options.threads` threads, each sampling up to
    /// `options.ahead` batches before the caller takes them.
    pub fn with_options<'env, I>(
        scope: &'scope Scope<'scope, 'env>,
        sampler: &'env NeighborSampler<'env>,
        steps: I,
        options: PrefetchOptions,
    ) -> Self
    where
        I: IntoIterator<Item = Step<'env>>,
        I::IntoIter: Clone + Send + 'scope,
    {
        Prefetch::finishing(scope, sampler, steps, options, &Ok)
    }
}

impl<'scope, T: Send + 'scope, E: From<SampleError> + Send + 'scope> Prefetch<'scope, T, E> {
    /// As [`Prefetch::with_options`], each batch then handed to `finish` on the thread that
    /// sampled it; the iterator yields what `finish` returns, an error of either ending it as a
    /// sampling error does.
    pub fn finishing<'env, I, F>(
        scope: &'scope Scope<'scope, 'env>,
        sampler: &'env NeighborSampler<'env>,
        steps: I,
        options: PrefetchOptions,
        finish: &'env F,
    ) -> Self
    where
        I: IntoIterator<Item = Step<'env>>,
        I::IntoIter: Clone + Send + 'scope,
        F: Fn(MiniBatch) -> Result<T, E> + Sync,
    {
        let PrefetchOptions { threads, ahead } = options;
        let shared = Arc::new(Shared::default());
        let steps = steps.into_iter();
        let (mut batches, mut workers) = (Vec::new(), Vec::new());
        for t in 0..threads.get() {
            // A thread holds one finished batch while blocked in `send`, so its channel keeps
            // `ahead - 1` more.
            let (tx, rx) = sync_channel(ahead.get() - 1);
            let mine = steps.clone().enumerate().skip(t).step_by(threads.get());
            let thread_shared = Arc::clone(&shared);
            workers.push(Some(scope.spawn(move || produce(sampler, mine, finish, &tx, &thread_shared))));
            batches.push(Some(rx));
        }
        Self { batches, workers, next: 0, done: false, shared, waiting: Duration::ZERO }
    }

    /// Time the sampling threads have spent sampling so far (not finishing), summed over them
    /// (hidden behind training when [`Prefetch::waiting_time`] stays small).
    pub fn sampling_time(&self) -> Duration {
        Duration::from_nanos(self.shared.sampling_ns.load(Ordering::Relaxed))
    }

    /// Time the caller has spent blocked in `next` waiting for a batch.
    pub fn waiting_time(&self) -> Duration {
        self.waiting
    }
}

/// A sampling thread's loop over its `(index, step)` pairs.
fn produce<'env, T, E: From<SampleError>>(
    sampler: &NeighborSampler<'env>,
    steps: impl Iterator<Item = (usize, Step<'env>)>,
    finish: &(dyn Fn(MiniBatch) -> Result<T, E> + Sync),
    tx: &SyncSender<Result<T, E>>,
    shared: &Shared,
) {
    for (index, step) in steps {
        if shared.stop.load(Ordering::Relaxed) || index > shared.failed.load(Ordering::Relaxed) {
            return;
        }
        let start = Instant::now();
        let batch = sampler.sample(step.key, step.seeds);
        shared.sampling_ns.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let batch = batch.map_err(E::from).and_then(finish);
        let failed = batch.is_err();
        if failed {
            // The steps after a failed one are not handed over: no thread samples them.
            shared.failed.fetch_min(index, Ordering::Relaxed);
        }
        if tx.send(batch).is_err() || failed {
            return;
        }
    }
}

impl<T, E: From<SampleError>> Iterator for Prefetch<'_, T, E> {
    type Item = Result<T, E>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let t = self.next % self.batches.len();
        let start = Instant::now();
        let received = self.batches[t].as_ref()?.recv();
        self.waiting += start.elapsed();
        self.next += 1;
        match received {
            Ok(batch) => {
                self.done = batch.is_err();
                Some(batch)
            }
            // The thread has returned (its steps are done, and so every step is) or panicked
            // in this step: nothing more will come in order.
            Err(_) => {
                self.done = true;
                self.batches[t] = None;
                match self.workers[t].take()?.join() {
                    Ok(()) => None,
                    Err(payload) => {
                        Some(Err(SampleError::PrefetchPanicked { message: panic_message(&*payload) }.into()))
                    }
                }
            }
        }
    }
}

impl<T, E> Drop for Prefetch<'_, T, E> {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Closing the channels first wakes the threads blocked in `send`.
        self.batches.clear();
        for worker in self.workers.iter_mut().filter_map(Option::take) {
            // The caller abandoned the iterator; a panic after that has nobody to report to.
            let _ = worker.join();
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a panic without a message)".to_string())
}
