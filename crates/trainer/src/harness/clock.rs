//! Telling a worker's local compute from its waits on other workers.
//!
//! Every communicator call a worker makes (its exchange's and its own all-reduces) is bracketed
//! by a [`CommClock`], which adds the call's duration to the worker's waiting time; compute time
//! is the rest. With the local backend several workers share the machine's cores, so their
//! compute intervals overlap and stretch each other. A [`ComputeGate`] serialises them for
//! measurements: a worker holds the gate while it computes and gives it up inside every call, so
//! each worker's compute time is what it would take on a machine of its own.
//!
//! The clock also numbers the calls of a step (split starts count, their waits do not, so the
//! numbers match the ledger's records of the step) and credits each split call with the compute
//! between its start and its wait: the overlap the modeled timeline ([`super::timeline`]) uses.
//! Within a step it keeps every event (a call's start, a split call's wait) with the compute
//! since the one before, so the timeline can play the step out call by call.

use std::cell::{Cell, RefCell};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use gnn_core::exchange::{CallKind, CommWatch};

/// One-worker-at-a-time compute, shared by the in-process workers of a run.
#[derive(Debug, Default)]
pub struct ComputeGate {
    busy: Mutex<bool>,
    freed: Condvar,
}

impl ComputeGate {
    fn acquire(&self) {
        // A poisoned lock still guards a plain flag; keep going.
        let mut busy = self.busy.lock().unwrap_or_else(PoisonError::into_inner);
        while *busy {
            busy = self.freed.wait(busy).unwrap_or_else(PoisonError::into_inner);
        }
        *busy = true;
    }

    fn release(&self) {
        *self.busy.lock().unwrap_or_else(PoisonError::into_inner) = false;
        self.freed.notify_one();
    }
}

/// Accumulates the time one worker spends inside communicator calls; holds the worker's share
/// of the [`ComputeGate`], if any, from construction to drop outside those calls.
#[derive(Debug)]
pub(crate) struct CommClock<'g> {
    gate: Option<&'g ComputeGate>,
    call_start: Cell<Option<Instant>>,
    waited: Cell<Duration>,
    /// The kind of the call in progress.
    kind: Cell<CallKind>,
    /// Per call of the step so far, the compute that overlapped it (seconds).
    overlaps: RefCell<Vec<f64>>,
    /// The split call in flight: its number, and when it returned with the waiting so far.
    open: Cell<Option<(usize, Instant, Duration)>>,
    /// The step's events so far; `None` outside a step.
    events: RefCell<Option<Vec<Event>>>,
    /// When the last call of the step returned, or the step began.
    returned: Cell<Option<Instant>>,
}

/// One event of a step: a call's start (blocking or split) or a split call's wait, with the
/// compute the worker did since the event before it (or the step's start).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Event {
    pub kind: CallKind,
    pub lead_s: f64,
}

impl<'g> CommClock<'g> {
    /// A clock that takes `gate` now (blocking until it is free).
    pub(crate) fn new(gate: Option<&'g ComputeGate>) -> Self {
        if let Some(g) = gate {
            g.acquire();
        }
        Self {
            gate,
            call_start: Cell::new(None),
            waited: Cell::new(Duration::ZERO),
            kind: Cell::new(CallKind::Blocking),
            overlaps: RefCell::new(Vec::new()),
            open: Cell::new(None),
            events: RefCell::new(None),
            returned: Cell::new(None),
        }
    }

    /// Starts numbering the calls of a new step.
    pub(crate) fn begin_step(&self) {
        self.overlaps.borrow_mut().clear();
        self.open.set(None);
        *self.events.borrow_mut() = Some(Vec::new());
        self.returned.set(Some(Instant::now()));
    }

    /// The events of the step so far, in order.
    pub(crate) fn step_events(&self) -> Vec<Event> {
        self.events.borrow().clone().unwrap_or_default()
    }

    /// Per call of the step so far (in call order), the compute that overlapped it.
    pub(crate) fn step_overlaps(&self) -> Vec<f64> {
        self.overlaps.borrow().clone()
    }

    /// Total time spent in communicator calls so far.
    pub(crate) fn waited(&self) -> Duration {
        self.waited.get()
    }

    /// Runs one communicator call, counted as waiting.
    pub(crate) fn call<T>(&self, f: impl FnOnce() -> T) -> T {
        self.call_started(CallKind::Blocking);
        let out = f();
        self.call_finished();
        out
    }
}

impl CommWatch for CommClock<'_> {
    fn call_started(&self, kind: CallKind) {
        let now = Instant::now();
        if let Some(events) = self.events.borrow_mut().as_mut() {
            let lead_s = self.returned.get().map_or(0.0, |at| now.duration_since(at).as_secs_f64());
            events.push(Event { kind, lead_s });
        }
        match kind {
            CallKind::Blocking | CallKind::Start => self.overlaps.borrow_mut().push(0.0),
            CallKind::Wait => {
                if let Some((call, returned, waited)) = self.open.take() {
                    let computed = now.duration_since(returned).saturating_sub(self.waited.get() - waited);
                    self.overlaps.borrow_mut()[call] += computed.as_secs_f64();
                }
            }
        }
        self.kind.set(kind);
        self.call_start.set(Some(now));
        if let Some(g) = self.gate {
            g.release();
        }
    }

    fn call_finished(&self) {
        if let Some(g) = self.gate {
            g.acquire();
        }
        if let Some(start) = self.call_start.take() {
            self.waited.set(self.waited.get() + start.elapsed());
        }
        self.returned.set(Some(Instant::now()));
        if self.kind.get() == CallKind::Start {
            let call = self.overlaps.borrow().len() - 1;
            self.open.set(Some((call, Instant::now(), self.waited.get())));
        }
    }
}

impl Drop for CommClock<'_> {
    fn drop(&mut self) {
        if let Some(g) = self.gate {
            g.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn only_time_inside_calls_counts_as_waiting() {
        let clock = CommClock::new(None);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(clock.waited(), Duration::ZERO);
        let value = clock.call(|| {
            std::thread::sleep(Duration::from_millis(20));
            7
        });
        assert_eq!(value, 7);
        assert!(clock.waited() >= Duration::from_millis(20) && clock.waited() < Duration::from_millis(500));
    }

    #[test]
    fn compute_between_a_start_and_its_wait_overlaps_that_call() {
        let clock = CommClock::new(None);
        clock.begin_step();
        clock.call(|| ());
        clock.call_started(CallKind::Start);
        clock.call_finished();
        std::thread::sleep(Duration::from_millis(30));
        clock.call_started(CallKind::Wait);
        clock.call_finished();
        clock.call(|| ());
        let overlaps = clock.step_overlaps();
        assert_eq!(overlaps.len(), 3, "the wait is no call of its own");
        assert_eq!((overlaps[0], overlaps[2]), (0.0, 0.0));
        assert!(overlaps[1] >= 0.03 && overlaps[1] < 1.0, "{overlaps:?}");
        clock.begin_step();
        assert!(clock.step_overlaps().is_empty());
    }

    #[test]
    fn a_step_keeps_each_event_with_the_compute_before_it() {
        let clock = CommClock::new(None);
        clock.call(|| ());
        assert!(clock.step_events().is_empty(), "no events outside a step");
        clock.begin_step();
        std::thread::sleep(Duration::from_millis(20));
        clock.call(|| std::thread::sleep(Duration::from_millis(30)));
        clock.call_started(CallKind::Start);
        clock.call_finished();
        std::thread::sleep(Duration::from_millis(20));
        clock.call_started(CallKind::Wait);
        clock.call_finished();
        let events = clock.step_events();
        let kinds: Vec<CallKind> = events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [CallKind::Blocking, CallKind::Start, CallKind::Wait]);
        assert!(events[0].lead_s >= 0.02 && events[0].lead_s < 0.5, "{events:?}");
        assert!(events[1].lead_s < 0.02, "the blocking call's 30 ms are waiting, not compute: {events:?}");
        assert!(events[2].lead_s >= 0.02 && events[2].lead_s < 0.5, "{events:?}");
        clock.begin_step();
        assert!(clock.step_events().is_empty());
    }

    #[test]
    fn the_gate_lets_one_worker_compute_at_a_time() {
        let gate = ComputeGate::default();
        let computing = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    let clock = CommClock::new(Some(&gate));
                    for _ in 0..5 {
                        let now = computing.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(2));
                        computing.fetch_sub(1, Ordering::SeqCst);
                        // Waiting inside a call lets another worker compute meanwhile.
                        clock.call(|| std::thread::sleep(Duration::from_millis(2)));
                    }
                });
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 1);
    }
}
