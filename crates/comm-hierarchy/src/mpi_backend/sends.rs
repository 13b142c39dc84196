//! Non-blocking MPI sends that own their buffers. The safe `mpi` crate API borrows send buffers
//! for a lexical scope, which cannot outlive `start_all_to_all_v`; here each buffer is owned
//! by the queue until MPI reports its send complete.

use std::ffi::c_int;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;

use crate::error::CommError;

/// A send MPI may still be reading `buffer` for.
struct InFlight {
    request: ffi::MPI_Request,
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

    /// Starts sending `buffer` to `dst` with `tag` and keeps the buffer until it is sent.
    pub(super) fn post(
        &mut self,
        world: &SimpleCommunicator,
        dst: c_int,
        tag: c_int,
        buffer: Vec<u8>,
        phase: &str,
    ) -> Result<(), CommError> {
        let count = c_int::try_from(buffer.len()).map_err(|_| {
            CommError::invalid(phase, format!("a message of {} bytes exceeds MPI's count limit", buffer.len()))
        })?;
        let mut request = MaybeUninit::<ffi::MPI_Request>::uninit();
        // SAFETY: MPI reads `count` bytes from the buffer until the request completes. The
        // buffer's heap allocation stays alive and unmodified until then: it moves into
        // `self.in_flight` below (moving a Vec does not move its heap data) and is released
        // only by `reap` after MPI_Test reports completion, or leaked by `Drop`. The datatype
        // is MPI_UINT8_T, matching `u8`, and `request` is a valid place for the handle.
        let rc = unsafe {
            ffi::MPI_Isend(
                buffer.as_ptr().cast(),
                count,
                ffi::RSMPI_UINT8_T,
                dst,
                tag,
                world.as_raw(),
                request.as_mut_ptr(),
            )
        };
        check(rc, "MPI_Isend")?;
        // SAFETY: MPI_Isend succeeded, so it wrote the request handle.
        let request = unsafe { request.assume_init() };
        self.in_flight.push(InFlight { request, buffer });
        Ok(())
    }

    /// Releases the buffers of sends that completed; returns how many did.
    pub(super) fn reap(&mut self) -> Result<usize, CommError> {
        let before = self.in_flight.len();
        let mut failure = Ok(());
        self.in_flight.retain_mut(|send| {
            let mut done: c_int = 0;
            // SAFETY: `send.request` is the live handle of an incomplete MPI_Isend (completed
            // sends are removed right here, so a handle is never tested after completion), and
            // MPI_STATUS_IGNORE is a valid status argument.
            let rc = unsafe { ffi::MPI_Test(&mut send.request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
            if let Err(e) = check(rc, "MPI_Test") {
                failure = Err(e);
                return true;
            }
            done == 0
        });
        failure.map(|()| before - self.in_flight.len())
    }
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
                std::mem::forget(send.buffer);
            }
        }
    }
}
