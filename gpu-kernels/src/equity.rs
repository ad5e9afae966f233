//! What a backtest measures on an equity curve, bar after bar and in bar order (deterministic): the moments
//! of the per-bar simple returns (empyrical's conventions: `rf` per bar, ddof = 1, annualization by
//! `bars_per_year`), the downside deviation, the deepest drawdown and the longest time under water, and the
//! bars that closed in a position. The single-series backtest (`backtest.rs`) and the portfolio backtest
//! (`account/backtest.rs`) both fold their curves with [`EquityStats`] into [`Metrics`].

/// Per-column results.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Metrics {
    /// `final / initial - 1`.
    pub total_return: f64,
    /// `(1 + total)^(bars_per_year / n) - 1`.
    pub annual_return: f64,
    /// `std(r, ddof = 1) x sqrt(bars_per_year)`.
    pub annual_volatility: f64,
    /// `mean(r - rf) / std(r - rf) x sqrt(bars_per_year)`.
    pub sharpe: f64,
    /// `mean(r - rf) x ann / (sqrt(mean(min(r - rf, 0)^2)) x sqrt(ann))`.
    pub sortino: f64,
    /// Largest peak-to-trough fall of equity, as a negative fraction (empyrical's sign).
    pub max_drawdown: f64,
    /// Longest time under a previous equity peak, in bars (to recovery, or to the end).
    pub max_drawdown_bars: f64,
    /// `annual_return / |max_drawdown|`.
    pub calmar: f64,
    /// Closed trades (including the one closed at the end).
    pub trades: f64,
    /// Share of trades with pnl > 0.
    pub win_rate: f64,
    /// Gross profit / gross loss of trade pnl.
    pub profit_factor: f64,
    /// Mean trade return (each trade's PnL over the equity at its entry).
    pub avg_trade_return: f64,
    /// Share of the per-bar returns whose bar closed in a position (before an end-of-data close): the
    /// denominator is the number of returns, n - 1 for n bars.
    pub exposure: f64,
    /// Spread plus commission paid.
    pub total_costs: f64,
    /// Equity after the last bar.
    pub final_equity: f64,
    /// Number of per-bar returns (n - 1 for a column over n bars; the CLI's top-level `bars` counts bars).
    pub bars: f64,
}

/// Bars per block of [`ReturnMoments`].
const MOMENT_BLOCK: u32 = 64;

/// Mean and sum of squared deviations of the per-bar excess returns, without a division per bar: each
/// block of [`MOMENT_BLOCK`] returns sums its deviations from its first return (`d = x - c`: sums of `d`
/// and `d^2`, so a constant run adds exact zeros), and the block joins the running moments by Chan's
/// pairwise update (one division per block). Welford's update divided every bar, on the loop's longest
/// dependency chain; this takes 3 flops a bar and gives the two-pass moments to a few ulps.
#[derive(Clone, Copy, Debug, Default)]
struct ReturnMoments {
    n: f64,
    mean: f64,
    m2: f64,
    shift: f64,
    block: u32,
    sum: f64,
    squares: f64,
}

impl ReturnMoments {
    #[inline]
    fn push(&mut self, x: f64) {
        if self.block == 0 {
            self.shift = x;
        }
        let d = x - self.shift;
        self.sum += d;
        self.squares += d * d;
        self.block += 1;
        if self.block == MOMENT_BLOCK {
            self.join_block();
        }
    }

    /// Joins the open block (if any) to the running moments.
    #[inline]
    fn join_block(&mut self) {
        if self.block == 0 {
            return;
        }
        let nb = f64::from(self.block);
        let mean_d = self.sum / nb;
        // Rounding can leave a tiny negative where the deviations cancel; NaN passes through.
        let m2b = self.squares - self.sum * mean_d;
        let m2b = if m2b < 0.0 { 0.0 } else { m2b };
        if self.n == 0.0 {
            (self.mean, self.m2) = (self.shift + mean_d, m2b);
        } else {
            let n = self.n + nb;
            // The block mean less the running mean, without rounding the block mean first (the shift and
            // the running mean are near each other, so their difference is exact).
            let delta = (self.shift - self.mean) + mean_d;
            self.mean += delta * (nb / n);
            self.m2 += m2b + delta * delta * (self.n * nb / n);
        }
        self.n += nb;
        (self.block, self.sum, self.squares) = (0, 0.0, 0.0);
    }
}

/// `a / b`, NaN where `b` is 0 (an undefined metric).
pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    if b != 0.0 { a / b } else { f64::NAN }
}

/// The statistics of one equity curve, fed one bar at a time ([`EquityStats::push`]) from the capital at
/// bar `start`, and turned into the curve's share of [`Metrics`] by [`EquityStats::finish`].
#[derive(Clone, Copy, Debug)]
pub struct EquityStats {
    initial: f64,
    risk_free: f64,
    moments: ReturnMoments,
    downside: f64,
    peak: f64,
    peak_bar: usize,
    underwater: bool,
    /// The lowest equity since the peak: under one peak, `equity / peak - 1` falls with equity (division by
    /// a positive constant rounds monotonically), so only a new trough can deepen the drawdown.
    trough: f64,
    max_dd: f64,
    max_dd_bars: usize,
    /// Bars in a position: an integer count (an f64 add a bar sat on the f64 pipe), exact as a double.
    in_position: u32,
}

impl EquityStats {
    /// A curve that starts at `initial` on bar `start`, with the risk-free return `risk_free` per bar.
    #[inline]
    pub fn new(initial: f64, start: usize, risk_free: f64) -> Self {
        Self {
            initial,
            risk_free,
            moments: ReturnMoments::default(),
            downside: 0.0,
            peak: initial,
            peak_bar: start,
            underwater: false,
            trough: initial,
            max_dd: 0.0,
            max_dd_bars: 0,
            in_position: 0,
        }
    }

    /// Bar `bar` closed at `equity` after `prev` at the close before; `in_position` when it closed holding a
    /// position (before any end-of-data close).
    #[inline]
    pub fn push(&mut self, bar: usize, prev: f64, equity: f64, in_position: bool) {
        if in_position {
            self.in_position += 1;
        }
        // An unchanged finite equity returns exactly 0 (what `e / e - 1` gives), without the division.
        let r = if prev == 0.0 || (equity == prev && prev.is_finite()) { 0.0 } else { equity / prev - 1.0 };
        let x = r - self.risk_free;
        self.moments.push(x);
        if x < 0.0 {
            self.downside += x * x;
        }
        // Drawdown duration: bars from the peak to the bar that regains it (or to the end).
        if equity >= self.peak {
            if self.underwater && bar - self.peak_bar > self.max_dd_bars {
                self.max_dd_bars = bar - self.peak_bar;
            }
            self.underwater = false;
            self.peak = equity;
            self.trough = equity;
            self.peak_bar = bar;
        } else {
            self.underwater = true;
            if equity < self.trough {
                self.trough = equity;
                let dd = equity / self.peak - 1.0;
                if dd < self.max_dd {
                    self.max_dd = dd;
                }
            }
        }
    }

    /// The curve's metrics after its last bar `end` at `final_equity`, annualized by `bars_per_year`; the
    /// trade statistics (`trades`, `win_rate`, `profit_factor`, `avg_trade_return`, `total_costs`) are left
    /// NaN and 0 for the caller to fill.
    #[inline]
    pub fn finish(mut self, end: usize, final_equity: f64, bars_per_year: f64) -> Metrics {
        if self.underwater && end - self.peak_bar > self.max_dd_bars {
            self.max_dd_bars = end - self.peak_bar;
        }
        self.moments.join_block();
        let ReturnMoments { n, mean, m2, .. } = self.moments;
        let ann = bars_per_year;
        let total = final_equity / self.initial - 1.0;
        let std = if n > 1.0 { crate::sqrt(m2 / (n - 1.0)) } else { f64::NAN };
        let annual = if n > 0.0 && 1.0 + total > 0.0 { libm::pow(1.0 + total, ann / n) - 1.0 } else { -1.0 };
        let downside_dev = if n > 0.0 { crate::sqrt(self.downside / n) } else { 0.0 };
        Metrics {
            total_return: total,
            annual_return: annual,
            annual_volatility: std * crate::sqrt(ann),
            sharpe: ratio(mean, std) * crate::sqrt(ann),
            // empyrical's edge: no return below the target and a positive mean is +inf (a zero mean is NaN).
            sortino: if downside_dev > 0.0 {
                ratio(mean * ann, downside_dev * crate::sqrt(ann))
            } else if mean > 0.0 {
                f64::INFINITY
            } else {
                f64::NAN
            },
            max_drawdown: self.max_dd,
            max_drawdown_bars: self.max_dd_bars as f64,
            calmar: ratio(annual, libm::fabs(self.max_dd)),
            trades: 0.0,
            win_rate: f64::NAN,
            profit_factor: f64::NAN,
            avg_trade_return: f64::NAN,
            exposure: ratio(f64::from(self.in_position), n),
            total_costs: 0.0,
            final_equity,
            bars: n,
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// The block moments are the two-pass moments (mean, then squared deviations from it) to 1e-13
    /// relative over series of every length around the block size and of many blocks, for returns whose
    /// mean is up to 10 spreads from zero; a constant series has exactly zero spread; NaN passes through.
    #[test]
    fn block_moments_are_two_pass_moments() {
        let mut counter = 0;
        let mut uniform = move || {
            counter += 1;
            (crate::rng::draw_u64(3, 0, counter) >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let lengths = [1usize, 2, 63, 64, 65, 127, 128, 129, 1_000, 20_000];
        for (case, &len) in lengths.iter().cycle().take(60).enumerate() {
            // Returns whose mean is up to 10 spreads from zero (a steady riser), and far beyond it.
            let (offset, spread) =
                [(0.0, 0.02), (1e-4, 0.01), (1e-3, 1e-4), (-2e-3, 2e-4), (0.5, 1e-3), (-3.0, 1e-5)][case % 6];
            let xs: Vec<f64> = (0..len).map(|_| offset + spread * uniform()).collect();
            let mut m = ReturnMoments::default();
            xs.iter().for_each(|&x| m.push(x));
            m.join_block();
            let mean = xs.iter().sum::<f64>() / len as f64;
            let m2: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
            assert_eq!(m.n, len as f64);
            // Far beyond (a mean 500 and 300,000 spreads from zero) both the two-pass and Welford's moments
            // lose digits to the mean's rounding (Welford's differed from the two-pass by up to 6e-10 here).
            let tolerance = if case % 6 < 4 { 1e-13 } else { 1e-10 };
            assert!((m.mean - mean).abs() <= 1e-14 * mean.abs().max(spread), "case {case}: {} vs {mean}", m.mean);
            assert!((m.m2 - m2).abs() <= tolerance * m2.max(f64::MIN_POSITIVE), "case {case}: {} vs {m2}", m.m2);
        }
        let mut constant = ReturnMoments::default();
        (0..1_000).for_each(|_| constant.push(-1.7e-5));
        constant.join_block();
        assert_eq!((constant.mean, constant.m2), (-1.7e-5, 0.0));
        let mut nan = ReturnMoments::default();
        [0.1, f64::NAN, 0.2].iter().for_each(|&x| nan.push(x));
        nan.join_block();
        assert!(nan.mean.is_nan() && nan.m2.is_nan());
    }

    /// A hand-checked curve: 100 -> 110 -> 99 -> 99 -> 120 from bar 0: returns 0.1, -0.1, 0, 0.2121...;
    /// the drawdown from 110 to 99 is -10%, under water for 3 bars (bars 1 to 4), in a position on 2 of 4.
    #[test]
    fn a_hand_checked_curve() {
        let mut s = EquityStats::new(100.0, 0, 0.0);
        let curve = [(110.0, true), (99.0, true), (99.0, false), (120.0, false)];
        let mut prev = 100.0;
        for (i, &(e, held)) in curve.iter().enumerate() {
            s.push(i + 1, prev, e, held);
            prev = e;
        }
        let m = s.finish(4, 120.0, 252.0);
        assert_eq!((m.bars, m.exposure, m.max_drawdown_bars), (4.0, 0.5, 3.0));
        assert!((m.max_drawdown + 0.1).abs() < 1e-15, "{}", m.max_drawdown);
        assert!((m.total_return - 0.2).abs() < 1e-15);
        assert!(m.win_rate.is_nan() && m.trades == 0.0);
    }
}
