//! What an AdaQP worker's codecs share with its controller: the bit-width of every row of every
//! stream (set by the assignment) and, read back by the assignment, each received row's
//! variance trace and the time spent quantizing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::stream::StreamId;

/// The bit-widths a row can travel at.
pub const WIDTHS: [u8; 3] = [2, 4, 8];

/// Bit-widths per row of the streams an assignment covers; every other stream sends every row
/// at the uniform width.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitTable {
    uniform: u8,
    streams: HashMap<StreamId, Arc<[u8]>>,
}

impl BitTable {
    /// Every row of every stream at `bits` (one of [`WIDTHS`]); `None` for another width.
    pub fn uniform(bits: u8) -> Option<Self> {
        WIDTHS.contains(&bits).then(|| Self { uniform: bits, streams: HashMap::new() })
    }

    /// Sets the widths of the rows of stream `id`, in message order; `None` (and no change)
    /// when a width is not one of [`WIDTHS`].
    pub fn set_stream(&mut self, id: StreamId, bits: Arc<[u8]>) -> Option<()> {
        bits.iter().all(|b| WIDTHS.contains(b)).then(|| {
            self.streams.insert(id, bits);
        })
    }

    /// The width of every row of stream `id`, or `None` when the stream runs at the uniform
    /// width.
    pub fn stream(&self, id: &StreamId) -> Option<&Arc<[u8]>> {
        self.streams.get(id)
    }

    /// The width of streams the table does not list.
    pub fn uniform_bits(&self) -> u8 {
        self.uniform
    }
}

/// Per received stream, the variance trace each row accumulated since the last
/// [`QuantProbe::take_traces`], plus the time this worker's codecs spent encoding and decoding.
#[derive(Debug, Clone, Default)]
pub struct QuantProbe(Arc<ProbeState>);

#[derive(Debug, Default)]
struct ProbeState {
    traces: Mutex<HashMap<StreamId, RowTraces>>,
    nanos: AtomicU64,
}

/// The summed variance traces of one received stream's rows.
#[derive(Debug, Clone, PartialEq)]
pub struct RowTraces {
    /// Values per row.
    pub width: usize,
    /// Global ids of the rows, in message order.
    pub rows: Arc<[u32]>,
    /// `(D / 6)(max - min)^2` per row, summed over messages.
    pub traces: Vec<f64>,
}

impl QuantProbe {
    /// Adds `trace` to each row of stream `id` (message order), whose rows are `rows`.
    pub(crate) fn add_traces(&self, id: StreamId, width: usize, rows: &Arc<[u32]>, trace: &[f64]) {
        let mut traces = self.0.traces.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = traces.entry(id).or_insert_with(|| RowTraces {
            width,
            rows: Arc::clone(rows),
            traces: vec![0.0; trace.len()],
        });
        entry.traces.iter_mut().zip(trace).for_each(|(a, t)| *a += t);
    }

    pub(crate) fn add_time(&self, elapsed: Duration) {
        self.0.nanos.fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The traces accumulated so far, per decode-side stream, and a fresh start.
    pub fn take_traces(&self) -> HashMap<StreamId, RowTraces> {
        std::mem::take(&mut *self.0.traces.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Seconds spent quantizing and dequantizing since the last call.
    pub fn take_seconds(&self) -> f64 {
        self.0.nanos.swap(0, Ordering::Relaxed) as f64 * 1e-9
    }
}
