//! What an AdaQP worker's codecs share with its controller: the bit-width of every row of every
//! stream (set by the assignment) and, read back by the assignment, each received row's
//! variance trace and the time spent quantizing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::state::{StateError, StateReader, put_bytes, put_f64s, put_stream};
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

    /// Appends the table for a checkpoint, streams in key order.
    pub fn save_state(&self, out: &mut Vec<u8>) {
        out.push(self.uniform);
        let mut ids: Vec<&StreamId> = self.streams.keys().collect();
        ids.sort();
        out.extend((ids.len() as u64).to_le_bytes());
        for id in ids {
            put_stream(out, *id);
            put_bytes(out, &self.streams[id]);
        }
    }

    /// The table a [`BitTable::save_state`] saved.
    pub fn restored(bytes: &[u8]) -> Result<Self, StateError> {
        let mut r = StateReader::new("the bit-width table", bytes);
        let uniform = r.u8("the uniform width")?;
        let mut table = Self::uniform(uniform).ok_or_else(|| {
            StateError(format!("the saved bit-width table: uniform width {uniform} is no codec width"))
        })?;
        for _ in 0..r.u64("the stream count")? {
            let id = r.stream()?;
            let bits = r.bytes("a stream's widths")?;
            table.set_stream(id, Arc::from(bits)).ok_or_else(|| {
                StateError(format!("the saved bit-width table: stream {} holds a width outside {WIDTHS:?}", id.tag))
            })?;
        }
        r.finish()?;
        Ok(table)
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

    /// Appends the traces accumulated so far (streams in key order) for a checkpoint; the
    /// quantizing time is a measurement, not state, and is left out.
    pub fn save_state(&self, out: &mut Vec<u8>) {
        let traces = self.0.traces.lock().unwrap_or_else(PoisonError::into_inner);
        let mut ids: Vec<&StreamId> = traces.keys().collect();
        ids.sort();
        out.extend((ids.len() as u64).to_le_bytes());
        for id in ids {
            let t = &traces[id];
            put_stream(out, *id);
            out.extend((t.width as u64).to_le_bytes());
            let rows: Vec<u8> = t.rows.iter().flat_map(|r| r.to_le_bytes()).collect();
            put_bytes(out, &rows);
            put_f64s(out, &t.traces);
        }
    }

    /// Replaces the traces with those a [`QuantProbe::save_state`] saved.
    pub fn restore_state(&self, bytes: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new("the variance traces", bytes);
        let mut restored = HashMap::new();
        for _ in 0..r.u64("the stream count")? {
            let id = r.stream()?;
            let width = r.u64("a row width")? as usize;
            let rows = r.bytes("a stream's rows")?;
            let traces = r.f64s("a stream's traces")?;
            if rows.len() % 4 != 0 || traces.len() != rows.len() / 4 {
                let detail = format!("{} row bytes and {} traces for stream {}", rows.len(), traces.len(), id.tag);
                return Err(StateError(format!("the saved variance traces: {detail}")));
            }
            let rows = rows.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            restored.insert(id, RowTraces { width, rows, traces });
        }
        r.finish()?;
        *self.0.traces.lock().unwrap_or_else(PoisonError::into_inner) = restored;
        Ok(())
    }

    /// Seconds spent quantizing and dequantizing since the last call.
    pub fn take_seconds(&self) -> f64 {
        self.0.nanos.swap(0, Ordering::Relaxed) as f64 * 1e-9
    }
}
