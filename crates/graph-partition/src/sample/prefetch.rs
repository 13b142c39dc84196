//! Sampling ahead of training: a background thread samples batch `k + 1` while the caller
//! trains on batch `k`.
//!
//! The thread is scoped (`std::thread::scope`), so the sampler and the batch plan are borrowed,
//! not moved or reference-counted. Batches travel through a bounded channel: with the default
//! lookahead of one, the thread samples the next batch and then waits for the caller to take
//! it, so at most two batches exist at once (the one in use and the next). Its parallel blocks
//! run on the global rayon pool.
//!
//! Errors: a failed step is handed over in its turn and ends the iterator (the thread samples
//! nothing after it); a panic on the thread comes out as [`SampleError::PrefetchPanicked`].
//! Dropping the iterator early stops the thread: it finishes the batch in hand, sees the
//! channel closed, and is joined before `drop` returns.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use super::{MiniBatch, NeighborSampler, SampleError, Step};

/// State the sampling thread and the iterator share.
#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    sampling_ns: AtomicU64,
}

/// An iterator over sampled batches, produced on a background thread; see the module docs.
#[derive(Debug)]
pub struct Prefetch<'scope> {
    batches: Option<Receiver<Result<MiniBatch, SampleError>>>,
    worker: Option<ScopedJoinHandle<'scope, ()>>,
    shared: Arc<Shared>,
    waiting: Duration,
}

impl<'scope> Prefetch<'scope> {
    /// Starts sampling `steps` with `sampler` on a thread of `scope`, one batch ahead.
    pub fn spawn<'env, I>(scope: &'scope Scope<'scope, 'env>, sampler: &'env NeighborSampler<'env>, steps: I) -> Self
    where
        I: IntoIterator<Item = Step<'env>>,
        I::IntoIter: Send + 'scope,
    {
        Self::with_lookahead(scope, sampler, steps, NonZeroUsize::MIN)
    }

    /// As [`Prefetch::spawn`], sampling up to `ahead` batches before the caller takes them.
    pub fn with_lookahead<'env, I>(
        scope: &'scope Scope<'scope, 'env>,
        sampler: &'env NeighborSampler<'env>,
        steps: I,
        ahead: NonZeroUsize,
    ) -> Self
    where
        I: IntoIterator<Item = Step<'env>>,
        I::IntoIter: Send + 'scope,
    {
        // The thread holds one finished batch while blocked in `send`, so the channel keeps
        // `ahead - 1` more.
        let (tx, rx) = sync_channel(ahead.get() - 1);
        let shared = Arc::new(Shared::default());
        let steps = steps.into_iter();
        let thread_shared = Arc::clone(&shared);
        let worker = scope.spawn(move || produce(sampler, steps, &tx, &thread_shared));
        Self { batches: Some(rx), worker: Some(worker), shared, waiting: Duration::ZERO }
    }

    /// Time the sampling thread has spent sampling so far (hidden behind training when
    /// [`Prefetch::waiting_time`] stays small).
    pub fn sampling_time(&self) -> Duration {
        Duration::from_nanos(self.shared.sampling_ns.load(Ordering::Relaxed))
    }

    /// Time the caller has spent blocked in `next` waiting for a batch.
    pub fn waiting_time(&self) -> Duration {
        self.waiting
    }
}

/// The sampling thread's loop.
fn produce<'env>(
    sampler: &NeighborSampler<'env>,
    steps: impl Iterator<Item = Step<'env>>,
    tx: &SyncSender<Result<MiniBatch, SampleError>>,
    shared: &Shared,
) {
    for step in steps {
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        let start = Instant::now();
        let batch = sampler.sample(step.key, step.seeds);
        shared.sampling_ns.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let failed = batch.is_err();
        if tx.send(batch).is_err() || failed {
            return;
        }
    }
}

impl Iterator for Prefetch<'_> {
    type Item = Result<MiniBatch, SampleError>;

    fn next(&mut self) -> Option<Self::Item> {
        let start = Instant::now();
        let received = self.batches.as_ref()?.recv();
        self.waiting += start.elapsed();
        match received {
            Ok(batch) => Some(batch),
            // The thread has returned or panicked: nothing more will come.
            Err(_) => {
                self.batches = None;
                match self.worker.take()?.join() {
                    Ok(()) => None,
                    Err(payload) => Some(Err(SampleError::PrefetchPanicked { message: panic_message(&*payload) })),
                }
            }
        }
    }
}

impl Drop for Prefetch<'_> {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Closing the channel first wakes a thread blocked in `send`.
        self.batches = None;
        if let Some(worker) = self.worker.take() {
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
