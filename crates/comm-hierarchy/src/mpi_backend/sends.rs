//! Non-blocking MPI sends that own their buffers. The safe `mpi` crate API borrows send buffers
//! for a lexical scope, which cannot outlive `start_all_to_all_v`; here each buffer is owned
//! by the queue until MPI reports every piece of its send complete. A message goes as a header
//! and chunks ([`super::frames`]).

use std::ffi::c_int;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;

use super::frames::{HEADER, chunks, header};
use crate::error::CommError;

/// A message MPI may still be reading `header` and `buffer` for: one request per piece not
/// yet sent.
struct InFlight {
    requests: Vec<ffi::MPI_Request>,
    header: Box<[u8; HEADER]>,
    buffer: Vec<u8>,
}

/// Sends in flight on one rank.
pub(super) struct SendQueue {
    in_flight: Vec<InFlight>,
    /// How long dropping the queue waits for receivers to take the last messages.
    drain_timeout: Duration,
}

pub(super) fn check(rc: c_int, call: &str) -> Result<(), CommError> {
    if rc == ffi::MPI_SUCCESS as c_int { Ok(()) } else { Err(CommError::Mpi(format!("{call} failed with code {rc}"))) }
}

impl SendQueue {
    pub(super) fn new(drain_timeout: Duration) -> Self {
        Self { in_flight: Vec::new(), drain_timeout }
    }

    /// Starts sending `buffer` to `dst` with `tag`, as a header and chunks, and keeps the
    /// buffer until every piece is sent.
    pub(super) fn post(
        &mut self,
        world: &SimpleCommunicator,
        dst: c_int,
        tag: c_int,
        buffer: Vec<u8>,
    ) -> Result<(), CommError> {
        let header = Box::new(header(buffer.len()));
        let mut requests = Vec::with_capacity(1 + buffer.len().div_ceil(super::frames::CHUNK));
        requests.push(isend(world, &header[..], dst, tag)?);
        for range in chunks(buffer.len()) {
            requests.push(isend(world, &buffer[range], dst, tag)?);
        }
        // The header's and the buffer's heap memory move with them into `in_flight` (moving a
        // Box or a Vec does not move what it points to), where they stay until `reap` sees
        // every request complete, or `Drop` leaks them.
        self.in_flight.push(InFlight { requests, header, buffer });
        Ok(())
    }

    /// Releases the buffers of messages whose pieces are all sent; returns how many pieces
    /// completed.
    pub(super) fn reap(&mut self) -> Result<usize, CommError> {
        let mut completed = 0;
        let mut failure = Ok(());
        for send in &mut self.in_flight {
            send.requests.retain_mut(|request| {
                if failure.is_err() {
                    return true;
                }
                let mut done: c_int = 0;
                // SAFETY: `request` is the live handle of an incomplete MPI_Isend (completed
                // requests are removed right here, so a handle is never tested after
                // completion), and MPI_STATUS_IGNORE is a valid status argument.
                let rc = unsafe { ffi::MPI_Test(request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
                if let Err(e) = check(rc, "MPI_Test") {
                    failure = Err(e);
                    return true;
                }
                completed += usize::from(done != 0);
                done == 0
            });
        }
        self.in_flight.retain(|send| !send.requests.is_empty());
        failure.map(|()| completed)
    }
}

/// Starts sending `piece` to `dst` with `tag`; returns its request.
fn isend(world: &SimpleCommunicator, piece: &[u8], dst: c_int, tag: c_int) -> Result<ffi::MPI_Request, CommError> {
    // A piece is at most a chunk, far inside MPI's count limit.
    let count =
        c_int::try_from(piece.len()).map_err(|_| CommError::Mpi(format!("a piece of {} bytes", piece.len())))?;
    let mut request = MaybeUninit::<ffi::MPI_Request>::uninit();
    // SAFETY: MPI reads `count` bytes from `piece` until the request completes. `piece` lies in
    // a header or buffer that the caller keeps alive and unmodified until then (`post` moves
    // them into the queue, which frees them only once every request completed). The datatype
    // is MPI_UINT8_T, matching `u8`, and `request` is a valid place for the handle.
    let rc = unsafe {
        ffi::MPI_Isend(piece.as_ptr().cast(), count, ffi::RSMPI_UINT8_T, dst, tag, world.as_raw(), request.as_mut_ptr())
    };
    check(rc, "MPI_Isend")?;
    // SAFETY: MPI_Isend succeeded, so it wrote the request handle.
    Ok(unsafe { request.assume_init() })
}

impl Drop for SendQueue {
    fn drop(&mut self) {
        let deadline = Instant::now() + self.drain_timeout;
        while !self.in_flight.is_empty() && Instant::now() < deadline {
            if self.reap().is_err() {
                break;
            }
            std::thread::yield_now();
        }
        if !self.in_flight.is_empty() {
            // MPI may still read these buffers; freeing them would hand it freed memory.
            eprintln!("halo: {} MPI sends were never received; leaking their buffers", self.in_flight.len());
            for send in self.in_flight.drain(..) {
                std::mem::forget(send.header);
                std::mem::forget(send.buffer);
            }
        }
    }
}
