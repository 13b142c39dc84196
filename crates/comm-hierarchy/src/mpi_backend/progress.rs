//! The progress engine: one thread per rank that makes every MPI call of the job, so that
//! messages move while the rank computes.
//!
//! Open MPI over TCP moves a message only inside an MPI call: a send posted before a split
//! exchange's compute, and its receive posted after it, would otherwise cross the wire only
//! once the rank waits. Here the engine thread takes every send the rank posts, starts it at
//! once, and keeps the sends and the arriving messages moving: it matches each piece of a
//! message ([`super::frames`]: a header, then chunks) as it arrives (`MPI_Improbe` on any
//! source and tag), receives each chunk at its place in the message's buffer (`MPI_Imrecv`),
//! and files the message by sender and tag once it is whole, where the rank's `recv` finds it.
//!
//! Cost: one thread per rank. While the rank waits for a message, the engine polls MPI
//! without sleeping for [`SPIN`] after the last progress, then every [`WAIT_SLEEP`]; while the
//! rank computes, it polls every [`COMPUTE_SLEEP`], which the kernel's socket buffers outlast
//! at any link rate up to several Gbit/s (a millisecond of 10 Gbit/s is 1.25 MB), and wakes at
//! once when the rank posts a send. It asks for no thread level above `MPI_THREAD_SERIALIZED`: MPI
//! is called from one thread at a time, the engine's while it runs, the main thread's before it
//! starts (set-up) and after it is joined (abort, finalize).

use std::collections::{HashMap, VecDeque};
use std::ffi::c_int;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, TryRecvError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::point_to_point::{Message, Source};
use mpi::raw::AsRawMut;
use mpi::topology::{Communicator as MpiCommunicatorTrait, SimpleCommunicator};

use super::frames::{HEADER, announced};
use super::sends::{SendQueue, check};
use crate::error::CommError;

/// How long the engine polls without sleeping after the last progress, while the rank waits.
const SPIN: Duration = Duration::from_millis(2);
/// The engine's pause between polls while the rank waits, once it has spun for [`SPIN`].
const WAIT_SLEEP: Duration = Duration::from_micros(200);
/// The engine's pause between polls while the rank computes.
const COMPUTE_SLEEP: Duration = Duration::from_millis(1);

/// A chunk the engine has matched and is receiving into its message's [`Assembly`].
struct Receiving {
    request: ffi::MPI_Request,
    key: (usize, c_int),
}

/// A message whose header has arrived: its buffer, how far its matched chunks reach, and how
/// many of them are still being received.
struct Assembly {
    buffer: Vec<u8>,
    placed: usize,
    pending: usize,
}

/// What the rank and its engine share.
struct Shared {
    inbox: Mutex<Inbox>,
    /// Signalled whenever a message is filed, progress is made or the engine fails.
    filed: Condvar,
    /// Whether the rank is blocked in [`Engine::recv`] (the engine then polls without pause).
    waiting: AtomicBool,
}

/// Messages received and not yet taken, by `(sender, tag)` in arrival order.
struct Inbox {
    messages: HashMap<(usize, c_int), VecDeque<Vec<u8>>>,
    /// The last time a send or a receive completed.
    moved: Instant,
    /// The error that stopped the engine.
    failure: Option<CommError>,
}

/// A send for the engine to start.
struct Post {
    dst: c_int,
    tag: c_int,
    bytes: Vec<u8>,
}

/// The rank's handle on its engine thread.
pub(super) struct Engine {
    shared: Arc<Shared>,
    posts: Option<mpsc::Sender<Post>>,
    thread: Option<JoinHandle<()>>,
}

/// The communicator, moved to the engine thread.
struct World(SimpleCommunicator);

// SAFETY: an MPI communicator handle is a plain identifier that any thread may use at thread
// level Serialized, which `run` checks before it starts an engine. The handle moves into the
// engine thread, the only thread that calls MPI while the engine runs (the module notes).
// Exercised by every MPI test: `tests/mpi_launch.rs` runs each collective through an engine.
unsafe impl Send for World {}

impl Engine {
    /// Starts the engine thread of `world`; dropping the engine drains its sends (at most
    /// `drain_timeout`) and joins it.
    pub(super) fn start(world: SimpleCommunicator, drain_timeout: Duration) -> Result<Self, CommError> {
        let shared = Arc::new(Shared {
            inbox: Mutex::new(Inbox { messages: HashMap::new(), moved: Instant::now(), failure: None }),
            filed: Condvar::new(),
            waiting: AtomicBool::new(false),
        });
        let (posts, queue) = mpsc::channel();
        let world = World(world);
        let engine_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("halo-mpi-progress".into())
            .spawn(move || {
                let world = world;
                let mut state = EngineState {
                    sends: SendQueue::new(drain_timeout),
                    receiving: Vec::new(),
                    assemblies: HashMap::new(),
                    shared: engine_shared,
                };
                if let Err(e) = state.drive(&world.0, &queue) {
                    state.shared.lock().failure = Some(e);
                    state.shared.filed.notify_all();
                }
                state.finish();
            })
            .map_err(|e| CommError::Mpi(format!("cannot start the MPI progress thread: {e}")))?;
        Ok(Self { shared, posts: Some(posts), thread: Some(thread) })
    }

    /// Hands a send to the engine, which starts it at once.
    pub(super) fn post(&self, dst: usize, tag: c_int, bytes: Vec<u8>, phase: &str) -> Result<(), CommError> {
        if let Some(e) = &self.shared.lock().failure {
            return Err(e.clone());
        }
        let dst =
            c_int::try_from(dst).map_err(|_| CommError::invalid(phase, format!("rank {dst} exceeds MPI's ranks")))?;
        let post = Post { dst, tag, bytes };
        let sent = self.posts.as_ref().is_some_and(|posts| posts.send(post).is_ok());
        if !sent {
            return Err(CommError::Mpi("the MPI progress thread has stopped".into()));
        }
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
        Ok(())
    }

    /// Takes the message `tag` from `src`, waiting for it. `Err(None)` when nothing moved for
    /// `timeout` (no message arrived, no send completed); `Err(Some(e))` when the engine failed.
    pub(super) fn recv(&self, src: usize, tag: c_int, timeout: Duration) -> Result<Vec<u8>, Option<CommError>> {
        let started = Instant::now();
        let mut inbox = self.shared.lock();
        self.shared.waiting.store(true, Ordering::SeqCst);
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
        let outcome = loop {
            if let Some(bytes) = inbox.messages.get_mut(&(src, tag)).and_then(VecDeque::pop_front) {
                break Ok(bytes);
            }
            if let Some(e) = &inbox.failure {
                break Err(Some(e.clone()));
            }
            let idle = started.max(inbox.moved).elapsed();
            if idle >= timeout {
                break Err(None);
            }
            inbox = self
                .shared
                .filed
                .wait_timeout(inbox, (timeout - idle).min(Duration::from_millis(50)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        self.shared.waiting.store(false, Ordering::SeqCst);
        outcome
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Closing the channel tells the engine to drain its sends and stop.
        drop(self.posts.take());
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The engine thread's own state.
struct EngineState {
    sends: SendQueue,
    receiving: Vec<Receiving>,
    assemblies: HashMap<(usize, c_int), Assembly>,
    shared: Arc<Shared>,
}

impl EngineState {
    /// Polls MPI until the rank closes the channel: starts posted sends, matches and receives
    /// arriving messages, files them and reaps completed sends.
    fn drive(&mut self, world: &SimpleCommunicator, queue: &mpsc::Receiver<Post>) -> Result<(), CommError> {
        let mut last_progress = Instant::now();
        loop {
            let mut closed = false;
            loop {
                match queue.try_recv() {
                    Ok(post) => self.sends.post(world, post.dst, post.tag, post.bytes)?,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        closed = true;
                        break;
                    }
                }
            }
            let mut progress = self.sends.reap()?;
            progress += self.match_arrivals(world)?;
            progress += self.complete_receives()?;
            if progress > 0 {
                last_progress = Instant::now();
                self.shared.lock().moved = last_progress;
                self.shared.filed.notify_all();
            }
            if closed {
                return Ok(());
            }
            if progress > 0 {
                continue;
            }
            if !self.shared.waiting.load(Ordering::SeqCst) {
                std::thread::park_timeout(COMPUTE_SLEEP);
            } else if last_progress.elapsed() < SPIN {
                std::thread::yield_now();
            } else {
                std::thread::park_timeout(WAIT_SLEEP);
            }
        }
    }

    /// Matches every piece that has arrived: takes a header at once (it is 8 bytes, already
    /// here) and starts receiving a chunk at its place; returns how many pieces it matched.
    fn match_arrivals(&mut self, world: &SimpleCommunicator) -> Result<usize, CommError> {
        let mut matched = 0;
        while let Some((message, status)) = world.any_process().immediate_matched_probe() {
            let len = status.count(u8::equivalent_datatype());
            let key = (status.source_rank() as usize, status.tag());
            let malformed = |detail: String| CommError::malformed("mpi", key.0, detail);
            let size = usize::try_from(len).map_err(|_| malformed(format!("MPI reports a piece of {len} bytes")))?;
            match self.assemblies.get_mut(&key) {
                None => {
                    let mut head = [0u8; HEADER];
                    if size != HEADER {
                        return Err(malformed(format!("a message opened with {size} bytes, not a header")));
                    }
                    message.matched_receive_into(&mut head[..]);
                    let total = announced(&head).ok_or_else(|| malformed("an unreadable header".into()))?;
                    let assembly = Assembly { buffer: vec![0; total], placed: 0, pending: 0 };
                    if total == 0 {
                        self.file(key, assembly.buffer);
                    } else {
                        self.assemblies.insert(key, assembly);
                    }
                }
                Some(assembly) => {
                    let end = assembly.placed + size;
                    if end > assembly.buffer.len() {
                        return Err(malformed(format!(
                            "chunks reach {end} bytes of a message of {}",
                            assembly.buffer.len()
                        )));
                    }
                    let request = receive(message, &mut assembly.buffer[assembly.placed..end], len)?;
                    assembly.placed = end;
                    assembly.pending += 1;
                    self.receiving.push(Receiving { request, key });
                }
            }
            matched += 1;
        }
        Ok(matched)
    }

    /// Counts every completed chunk against its message and files the messages that are
    /// whole; returns how many chunks completed.
    fn complete_receives(&mut self) -> Result<usize, CommError> {
        let mut completed = 0;
        let mut i = 0;
        while i < self.receiving.len() {
            let mut done: c_int = 0;
            // SAFETY: the request is the live handle of an incomplete receive started by
            // `receive` (completed receives leave the list right here, so a handle is never
            // tested after completion); MPI_STATUS_IGNORE is a valid status.
            let rc = unsafe { ffi::MPI_Test(&mut self.receiving[i].request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
            check(rc, "MPI_Test")?;
            if done == 0 {
                i += 1;
                continue;
            }
            let key = self.receiving.swap_remove(i).key;
            completed += 1;
            let whole = self.assemblies.get_mut(&key).is_some_and(|a| {
                a.pending -= 1;
                a.pending == 0 && a.placed == a.buffer.len()
            });
            if whole && let Some(assembly) = self.assemblies.remove(&key) {
                self.file(key, assembly.buffer);
            }
        }
        Ok(completed)
    }

    /// Puts a whole message where the rank's `recv` finds it.
    fn file(&self, key: (usize, c_int), message: Vec<u8>) {
        self.shared.lock().messages.entry(key).or_default().push_back(message);
    }

    /// After the rank has closed the channel (or the engine failed): drains the sends (the
    /// queue's drop) and leaks the buffers of receives MPI may still write into.
    fn finish(&mut self) {
        if !self.receiving.is_empty() {
            eprintln!("halo: {} MPI receives were never completed; leaking their buffers", self.receiving.len());
            self.receiving.clear();
            for (_, assembly) in self.assemblies.drain() {
                std::mem::forget(assembly.buffer);
            }
        }
    }
}

/// Starts receiving the matched `message` of `len` bytes into `place` (exactly `len` bytes).
fn receive(mut message: Message, place: &mut [u8], len: c_int) -> Result<ffi::MPI_Request, CommError> {
    let mut request = MaybeUninit::<ffi::MPI_Request>::uninit();
    // SAFETY: MPI writes `len` bytes (the matched piece's length, `place.len()`) into `place`
    // until the request completes. `place` lies in an assembly's buffer, allocated once at its
    // full length and never resized; the buffer is handed out only after every chunk's
    // MPI_Test reported completion, or leaked by `finish`, so MPI never writes into freed
    // memory. `message` is a matched message that MPI_Imrecv consumes (setting it to
    // MPI_MESSAGE_NULL, which the `Message`'s drop expects). The datatype is MPI_UINT8_T.
    let rc = unsafe {
        ffi::MPI_Imrecv(place.as_mut_ptr().cast(), len, ffi::RSMPI_UINT8_T, message.as_raw_mut(), request.as_mut_ptr())
    };
    check(rc, "MPI_Imrecv")?;
    // SAFETY: MPI_Imrecv succeeded, so it wrote the request handle.
    Ok(unsafe { request.assume_init() })
}
