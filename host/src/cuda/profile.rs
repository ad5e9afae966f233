//! The launch profile ([`super::CudaRuntime::start_profile`]): a pair of timing events around every launch,
//! read back as times on one clock (milliseconds from the first launch's start event, negative for a launch
//! another stream ran before it), so that a profile gives each kernel's summed time and the time the device
//! ran any kernel at all (the union of the launches' intervals over every stream: overlapping launches count
//! once).

use cudarc::driver::CudaEvent;

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

/// Launches kept as events before the older half is read back (each read waits for its end event, which by
/// then has long completed): a whole search's launches never pile up as millions of live events.
const PENDING_LIMIT: usize = 1 << 14;

/// A profile in progress.
#[derive(Debug, Default)]
pub(crate) struct ProfileLog {
    /// The latest start event read back and its time on the profile's clock (milliseconds from the first
    /// launch's start; negative for a launch another stream ran earlier). Each start is read against the one
    /// before it, so that CUDA's f32 milliseconds round a short step, not the whole time since the first.
    anchor: Option<(CudaEvent, f64)>,
    /// Launches whose events are not read yet (label, start, end), in launch order; the first launch's start
    /// is the first anchor (`None` here).
    pending: Vec<(Label, Option<CudaEvent>, CudaEvent)>,
    /// Per label: launches and summed milliseconds, in order of first launch.
    kernels: Vec<(Label, usize, f64)>,
    /// Every launch read back: start and end on the profile's clock.
    intervals: Vec<(f64, f64)>,
    /// The first error of a read-back, returned by [`Self::finish`] (a launch does not fail for it).
    failed: Option<HostError>,
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

impl ProfileLog {
    /// Records one launch's events; reads the older half back once [`PENDING_LIMIT`] are pending.
    pub(crate) fn push(&mut self, label: Label, start: CudaEvent, end: CudaEvent) {
        let start = match self.anchor {
            None => {
                self.anchor = Some((start, 0.0));
                None
            }
            Some(_) => Some(start),
        };
        self.pending.push((label, start, end));
        if self.pending.len() >= PENDING_LIMIT && self.failed.is_none() {
            let older: Vec<_> = self.pending.drain(..PENDING_LIMIT / 2).collect();
            if let Err(e) = self.read_back(older) {
                self.failed = Some(e);
            }
        }
    }

    /// Reads every pending launch back (the caller has waited for the device) and sums the profile, or
    /// returns the first error a read-back met.
    pub(crate) fn finish(mut self) -> Result<KernelProfile, HostError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let pending = std::mem::take(&mut self.pending);
        self.read_back(pending)?;
        let first = self.intervals.iter().map(|i| i.0).fold(f64::INFINITY, f64::min);
        let last = self.intervals.iter().map(|i| i.1).fold(f64::NEG_INFINITY, f64::max);
        let span_ms = if self.intervals.is_empty() { 0.0 } else { last - first };
        Ok(KernelProfile {
            kernels: self.kernels.into_iter().map(|(label, n, ms)| (label.to_string(), n, ms)).collect(),
            busy_ms: busy_ms(self.intervals),
            span_ms,
        })
    }

    /// Each launch's start and end on the profile's clock (each read waits for its event), added to the
    /// per-label sums and the intervals.
    fn read_back(&mut self, launches: Vec<(Label, Option<CudaEvent>, CudaEvent)>) -> Result<(), HostError> {
        let Some(mut anchor) = self.anchor.take() else { return Ok(()) };
        let ms = |from: &CudaEvent, to: &CudaEvent| {
            from.elapsed_ms(to).map(f64::from).map_err(HostError::driver("reading event times"))
        };
        let read = || -> Result<(), HostError> {
            for (label, start, end) in launches {
                // A launch's own pair gives its duration (the finest resolution); its place, its start.
                let (begins, took) = match &start {
                    Some(start) => (anchor.1 + ms(&anchor.0, start)?, ms(start, &end)?),
                    None => (anchor.1, ms(&anchor.0, &end)?),
                };
                match self.kernels.iter_mut().find(|(l, _, _)| *l == label) {
                    Some(row) => {
                        row.1 += 1;
                        row.2 += took;
                    }
                    None => self.kernels.push((label, 1, took)),
                }
                self.intervals.push((begins, begins + took));
                if let Some(start) = start {
                    anchor = (start, begins);
                }
            }
            Ok(())
        };
        let ran = read();
        self.anchor = Some(anchor);
        ran
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
