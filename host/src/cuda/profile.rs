//! The launch profile ([`super::CudaRuntime::start_profile`]): a pair of timing events around every launch,
//! read back as times on one clock (milliseconds from the first launch's start event, negative for a launch
//! another stream ran before it), so that a profile gives each kernel's summed time and the time the device
//! ran any kernel at all (the union of the launches' intervals over every stream: overlapping launches count
//! once).
//!
//! The profile disturbs what it measures as little as it can: a launch takes its two events from a pool
//! (creating an event costs more than recording one; the pool starts with a chunk's events and grows only
//! until the reader returns the first ones) and only appends them to a list; a reader thread reads the
//! events back in launch order, chunk by chunk, and returns them to the pool, waiting for an event that is
//! not complete yet by short sleeps rather than by spinning on a core. The launching threads never wait
//! for the device, nor for each other beyond the list's lock.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use cudarc::driver::{CudaContext, CudaEvent};

use crate::HostError;

/// What a launch is recorded as (the last kernel of a stream, the profile's rows): its kernel's name and,
/// where one kernel runs several stages, the stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Label {
    pub(crate) kernel: &'static str,
    pub(crate) stage: Option<&'static str>,
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.stage {
            Some(stage) => write!(f, "{} {stage}", self.kernel),
            None => f.write_str(self.kernel),
        }
    }
}

/// Launches handed to the reader at once: a launch's events return to the pool a chunk after it. The chunks
/// queue without a bound: how far the reader may lag is how far the host's launches run ahead of the device.
const CHUNK: usize = 1 << 12;

/// How long the reader sleeps before asking again whether an event is complete.
const POLL: std::time::Duration = std::time::Duration::from_micros(50);

/// One launch as the profile keeps it: its label and its events (start, end).
type Launch = (Label, CudaEvent, CudaEvent);

/// Timing events no launch holds, for reuse.
type Pool = Arc<Mutex<Vec<CudaEvent>>>;

/// A profile in progress: the launches not yet handed to the reader, the event pool and the reader.
#[derive(Debug)]
pub(crate) struct ProfileLog {
    ctx: Arc<CudaContext>,
    pool: Pool,
    pending: Vec<Launch>,
    to_reader: Sender<Vec<Launch>>,
    reader: JoinHandle<Result<Reading, HostError>>,
    /// The reader stopped (a read-back failed; `finish` returns its error): launches are no longer profiled.
    stopped: bool,
}

/// What the reader has read so far.
#[derive(Debug, Default)]
struct Reading {
    /// The latest start event read back and its time on the profile's clock (milliseconds from the first
    /// launch's start; negative for a launch another stream ran earlier). Each start is read against the one
    /// before it, so that CUDA's f32 milliseconds round a short step, not the whole time since the first.
    anchor: Option<(CudaEvent, f64)>,
    /// Per label: launches and summed milliseconds, in order of first launch.
    kernels: Vec<(Label, usize, f64)>,
    /// Every launch read back: start and end on the profile's clock.
    intervals: Vec<(f64, f64)>,
}

impl ProfileLog {
    /// A profile of launches on `ctx`'s streams, its pool holding a chunk's events, its reader started.
    pub(crate) fn start(ctx: &Arc<CudaContext>) -> Result<Self, HostError> {
        let events = (0..2 * CHUNK).map(|_| new_event(ctx)).collect::<Result<Vec<_>, _>>()?;
        let pool: Pool = Arc::new(Mutex::new(events));
        let (to_reader, chunks) = channel();
        let (reader_ctx, reader_pool) = (ctx.clone(), pool.clone());
        let reader = std::thread::Builder::new()
            .name("tradesim-profile".into())
            .spawn(move || read_chunks(&reader_ctx, &reader_pool, &chunks))
            .map_err(|e| HostError::Profile(format!("starting its reader thread: {e}")))?;
        Ok(Self { ctx: ctx.clone(), pool, pending: Vec::new(), to_reader, reader, stopped: false })
    }

    /// Two timing events for a launch (from the pool, or new where it is empty); `None` once the reader has
    /// stopped.
    pub(crate) fn events(&self) -> Result<Option<(CudaEvent, CudaEvent)>, HostError> {
        if self.stopped {
            return Ok(None);
        }
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        let mut take = || match pool.pop() {
            Some(event) => Ok(event),
            None => new_event(&self.ctx),
        };
        Ok(Some((take()?, take()?)))
    }

    /// Records one launch's events (recorded on its stream around it); hands a chunk to the reader once
    /// [`CHUNK`] are pending.
    pub(crate) fn push(&mut self, label: Label, start: CudaEvent, end: CudaEvent) {
        self.pending.push((label, start, end));
        if self.pending.len() >= CHUNK && self.to_reader.send(std::mem::take(&mut self.pending)).is_err() {
            // The reader stopped (a read-back failed): it returns its error at `finish`; the launches it no
            // longer reads are dropped with their events, and later launches are not profiled.
            self.stopped = true;
        }
    }

    /// Hands the pending launches to the reader (the caller has waited for the device), waits for it and
    /// sums the profile, or returns the first error a read-back met.
    pub(crate) fn finish(self) -> Result<KernelProfile, HostError> {
        let Self { pending, to_reader, reader, .. } = self;
        if !pending.is_empty() {
            let _ = to_reader.send(pending);
        }
        drop(to_reader);
        let reading = reader.join().map_err(|_| HostError::Profile("its reader thread panicked".into()))??;
        let first = reading.intervals.iter().map(|i| i.0).fold(f64::INFINITY, f64::min);
        let last = reading.intervals.iter().map(|i| i.1).fold(f64::NEG_INFINITY, f64::max);
        let span_ms = if reading.intervals.is_empty() { 0.0 } else { last - first };
        Ok(KernelProfile {
            kernels: reading.kernels.into_iter().map(|(label, n, ms)| (label.to_string(), n, ms)).collect(),
            busy_ms: busy_ms(reading.intervals),
            span_ms,
        })
    }
}

/// A timing event of `ctx`.
fn new_event(ctx: &Arc<CudaContext>) -> Result<CudaEvent, HostError> {
    ctx.new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(HostError::driver("creating a timing event"))
}

/// The reader: each chunk's launches read back in launch order (each read waits for its end event), added
/// to the per-label sums and the intervals, their events returned to `pool`; until the sender is dropped.
/// The thread binds the context once: its calls are the raw driver's, which leave the context's deferred
/// errors (those cudarc's destructors record) to the launching threads that report them.
fn read_chunks(ctx: &Arc<CudaContext>, pool: &Pool, chunks: &Receiver<Vec<Launch>>) -> Result<Reading, HostError> {
    ctx.bind_to_thread().map_err(HostError::driver("binding the profile's reader to the device"))?;
    let mut reading = Reading::default();
    for chunk in chunks {
        let mut freed = Vec::with_capacity(2 * chunk.len());
        for (label, start, end) in chunk {
            wait_for(&end)?;
            // A launch's own pair gives its duration (the finest resolution); its place, its start.
            let took = elapsed_ms(&start, &end)?;
            let begins = match reading.anchor.take() {
                Some((anchor, at)) => {
                    let begins = at + elapsed_ms(&anchor, &start)?;
                    freed.push(anchor);
                    begins
                }
                None => 0.0,
            };
            match reading.kernels.iter_mut().find(|(l, _, _)| *l == label) {
                Some(row) => {
                    row.1 += 1;
                    row.2 += took;
                }
                None => reading.kernels.push((label, 1, took)),
            }
            reading.intervals.push((begins, begins + took));
            reading.anchor = Some((start, begins));
            freed.push(end);
        }
        pool.lock().unwrap_or_else(PoisonError::into_inner).extend(freed);
    }
    Ok(reading)
}

/// Returns once `event` is complete, sleeping [`POLL`] between queries (a blocking wait on an event of the
/// context's default flags would spin a core).
fn wait_for(event: &CudaEvent) -> Result<(), HostError> {
    loop {
        // SAFETY: the event was created by `CudaContext::new_event` and is alive (borrowed).
        match unsafe { cudarc::driver::result::event::query(event.cu_event()) } {
            Ok(()) => return Ok(()),
            Err(cudarc::driver::DriverError(cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_READY)) => {
                std::thread::sleep(POLL);
            }
            Err(e) => return Err(HostError::driver("waiting for a launch's end event")(e)),
        }
    }
}

/// Milliseconds from `from` to `to`, both recorded and complete (the reader waits for each launch's end
/// event, and every start it reads against came before an end it waited for, or is that launch's own).
fn elapsed_ms(from: &CudaEvent, to: &CudaEvent) -> Result<f64, HostError> {
    // SAFETY: both events were created by `CudaContext::new_event` with timing and are alive (borrowed);
    // the reader thread is bound to their context.
    unsafe { cudarc::driver::result::event::elapsed(from.cu_event(), to.cu_event()) }
        .map(f64::from)
        .map_err(HostError::driver("reading event times"))
}

/// What a profile measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelProfile {
    /// Per launch label (a kernel's name, followed by the stage where one kernel runs several; in order of
    /// first launch): the launches and their summed device milliseconds (each from its own event pair).
    pub kernels: Vec<(String, usize, f64)>,
    /// Milliseconds in which at least one profiled kernel ran: the union of every launch's interval.
    pub busy_ms: f64,
    /// Milliseconds from the earliest launch's start to the latest launch's end.
    pub span_ms: f64,
}

impl KernelProfile {
    /// What [`Self::busy_ms`] over a wall time means, for a report beside it: a launch's interval starts at
    /// the event recorded before it, so on an idle stream the launch's own latency counts as busy.
    pub const BUSY_BOUND: &'static str =
        "a launch's interval runs from the event before it, so an idle stream's launch latency counts as busy";

    /// Launches profiled.
    pub fn launches(&self) -> usize {
        self.kernels.iter().map(|k| k.1).sum()
    }

    /// Milliseconds of every launch summed (overlapping launches on several streams each count).
    pub fn summed_ms(&self) -> f64 {
        self.kernels.iter().map(|k| k.2).sum()
    }
}

/// The length of the union of `intervals` (start, end): time covered by at least one of them.
pub(crate) fn busy_ms(mut intervals: Vec<(f64, f64)>) -> f64 {
    intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut busy = 0.0;
    let mut open: Option<(f64, f64)> = None;
    for (s, e) in intervals {
        open = match open {
            Some((os, oe)) if s <= oe => Some((os, oe.max(e))),
            Some((os, oe)) => {
                busy += oe - os;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    busy + open.map_or(0.0, |(s, e)| e - s)
}

#[cfg(test)]
mod tests {
    use super::busy_ms;

    #[test]
    fn overlapping_intervals_count_once() {
        assert_eq!(busy_ms(vec![]), 0.0);
        assert_eq!(busy_ms(vec![(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)]), 4.0);
        // Out of order, nested and touching.
        assert_eq!(busy_ms(vec![(5.0, 6.0), (0.0, 4.0), (1.0, 2.0), (4.0, 4.5), (-1.0, 0.0)]), 6.5);
    }
}
