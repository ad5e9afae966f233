//! The launch profile ([`super::CudaRuntime::start_profile`]): a pair of timing events around every launch,
//! read back as times on one clock (milliseconds after the first launch's start event), so that a profile
//! gives each kernel's summed time and the time the device ran any kernel at all (the union of the
//! launches' intervals over every stream: overlapping launches count once).

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
    /// The first launch's start event: the clock every time is read on.
    reference: Option<CudaEvent>,
    /// Launches whose events are not read yet (label, start, end), in launch order; the first launch's start
    /// is `reference` (`None` here).
    pending: Vec<(Label, Option<CudaEvent>, CudaEvent)>,
    /// Launches read back: label, start and end in milliseconds after `reference`.
    read: Vec<(Label, f64, f64)>,
}

/// What a profile measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelProfile {
    /// Per launch label (a kernel's name, followed by the stage where one kernel runs several; in order of
    /// first launch): the launches and their summed device milliseconds (each from its own event pair).
    pub kernels: Vec<(String, usize, f64)>,
    /// Milliseconds in which at least one profiled kernel ran ([`busy_ms`] of every launch's interval).
    pub busy_ms: f64,
    /// Milliseconds from the first launch's start to the last launch's end.
    pub span_ms: f64,
}

impl ProfileLog {
    /// Records one launch's events; reads the older half back once [`PENDING_LIMIT`] are pending.
    pub(crate) fn push(&mut self, label: Label, start: CudaEvent, end: CudaEvent) -> Result<(), HostError> {
        let start = match self.reference {
            None => {
                self.reference = Some(start);
                None
            }
            Some(_) => Some(start),
        };
        self.pending.push((label, start, end));
        if self.pending.len() >= PENDING_LIMIT {
            let older: Vec<_> = self.pending.drain(..PENDING_LIMIT / 2).collect();
            self.read_back(older)?;
        }
        Ok(())
    }

    /// Reads every pending launch back (the caller has waited for the device) and sums the profile.
    pub(crate) fn finish(mut self) -> Result<KernelProfile, HostError> {
        let pending = std::mem::take(&mut self.pending);
        self.read_back(pending)?;
        let mut kernels: Vec<(Label, usize, f64)> = Vec::new();
        for &(label, start, end) in &self.read {
            match kernels.iter_mut().find(|(l, _, _)| *l == label) {
                Some(row) => {
                    row.1 += 1;
                    row.2 += end - start;
                }
                None => kernels.push((label, 1, end - start)),
            }
        }
        let intervals: Vec<(f64, f64)> = self.read.iter().map(|&(_, s, e)| (s, e)).collect();
        let first = intervals.iter().map(|i| i.0).fold(f64::INFINITY, f64::min);
        let last = intervals.iter().map(|i| i.1).fold(f64::NEG_INFINITY, f64::max);
        let span_ms = if intervals.is_empty() { 0.0 } else { last - first };
        Ok(KernelProfile {
            kernels: kernels.into_iter().map(|(label, n, ms)| (label.to_string(), n, ms)).collect(),
            busy_ms: busy_ms(intervals),
            span_ms,
        })
    }

    /// Each launch's start and end on the reference event's clock (each read waits for its event).
    fn read_back(&mut self, launches: Vec<(Label, Option<CudaEvent>, CudaEvent)>) -> Result<(), HostError> {
        let Some(reference) = &self.reference else { return Ok(()) };
        let ms = |from: &CudaEvent, to: &CudaEvent| {
            from.elapsed_ms(to).map(f64::from).map_err(HostError::driver("reading event times"))
        };
        for (label, start, end) in &launches {
            // A launch's own pair gives its duration (the finest resolution); its place comes from its start.
            let (begins, took) = match start {
                Some(start) => (ms(reference, start)?, ms(start, end)?),
                None => (0.0, ms(reference, end)?),
            };
            self.read.push((*label, begins, begins + took));
        }
        Ok(())
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
