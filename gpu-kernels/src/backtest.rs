//! Backtests: each column (a parameter set or a policy) walks one continuous range of bars with the
//! environment's execution rules, accumulating its metrics in bar order and telling a ledger every trade.
//! Conventions (empyrical's): per-bar simple returns of equity, `rf` per bar, ddof = 1, annualization by
//! `bars_per_year`; undefined values (a zero denominator) are NaN.

use crate::env::account_step;
pub use crate::equity::Metrics;
use crate::equity::{EquityStats, ratio};
use crate::portfolio::{ExitReason, Fill, TradeLog, close_position};
use crate::types::{Action, Bar, EnvState, TrialParams};

/// One closed trade.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Trade {
    /// Bar of the entry fill (at its open).
    pub entry_bar: u32,
    /// Bar of the exit fill.
    pub exit_bar: u32,
    /// 1 long, -1 short.
    pub side: i32,
    /// An [`ExitReason`] code.
    pub reason: u32,
    /// Entry fill price (after the half spread).
    pub entry_price: f64,
    /// Exit fill price (after the half spread).
    pub exit_price: f64,
    /// Units (absolute).
    pub units: f64,
    /// Cash after the exit minus cash before the entry (costs included).
    pub pnl: f64,
    /// `pnl / cash before the entry`.
    pub ret: f64,
    /// Spread plus commission of entry and exit.
    pub costs: f64,
}

const _: () = assert!(core::mem::size_of::<Trade>() == 64);

const _: () = assert!(core::mem::size_of::<Metrics>() == 128);

impl Metrics {
    /// Field names, in [`Metrics::values`] order.
    pub const NAMES: [&'static str; 16] = [
        "total_return",
        "annual_return",
        "annual_volatility",
        "sharpe",
        "sortino",
        "max_drawdown",
        "max_drawdown_bars",
        "calmar",
        "trades",
        "win_rate",
        "profit_factor",
        "avg_trade_return",
        "exposure",
        "total_costs",
        "final_equity",
        "bars",
    ];

    /// Every field, in [`Metrics::NAMES`] order.
    pub fn values(&self) -> [f64; 16] {
        [
            self.total_return,
            self.annual_return,
            self.annual_volatility,
            self.sharpe,
            self.sortino,
            self.max_drawdown,
            self.max_drawdown_bars,
            self.calmar,
            self.trades,
            self.win_rate,
            self.profit_factor,
            self.avg_trade_return,
            self.exposure,
            self.total_costs,
            self.final_equity,
            self.bars,
        ]
    }
}

/// A moving-average crossover: long while SMA(fast) > SMA(slow), short (or flat) while below.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SmaCross {
    /// Fast window in bars.
    pub fast: u32,
    /// Slow window in bars.
    pub slow: u32,
    /// 1: short below; 0: flat below.
    pub allow_short: u32,
    /// [`RULE_CROSS`] (act on crossover events, hold otherwise) or [`RULE_STATE`] (the side of the averages).
    pub rule: u32,
}

/// [`SmaCross::rule`]: the target is the side the averages are on at each close (long while fast > slow,
/// short or flat while fast < slow, flat on a tie), from the first bar where both exist.
pub const RULE_STATE: u32 = 0;
/// [`SmaCross::rule`]: the target changes only on a crossover event, as backtesting.py's `crossover` and
/// vectorbt's `crossed_above`/`crossed_below` act: up at bar t when fast < slow at t - 1 and fast > slow at
/// t (long), down when fast > slow at t - 1 and fast < slow at t (short, or flat without shorts); otherwise
/// the last target holds (flat before the first event).
pub const RULE_CROSS: u32 = 1;

/// Where a column's decisions come from.
pub const SIGNAL_TARGETS: u32 = 0;
/// Decisions from [`SmaCross`] parameters.
pub const SIGNAL_SMA_CROSS: u32 = 1;

/// Scalar arguments of a backtest launch.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BacktestArgs {
    /// First bar (decisions start at its close).
    pub start: u32,
    /// Last bar (the last fill is at its open; open positions close at its close).
    pub end: u32,
    /// Bars in the price block.
    pub n_bars: u32,
    /// Columns.
    pub n_columns: u32,
    /// Parameter sets: column c uses set `c % n_params`.
    pub n_params: u32,
    /// [`SIGNAL_TARGETS`] or [`SIGNAL_SMA_CROSS`].
    pub signal: u32,
    /// Bit 0: write the ledger; bit 1: write equity curves.
    pub write: u32,
    /// 1 when the host has proved that every SMA column's `window sum x other window` fits in an i64
    /// ([`sma_side`] then multiplies in 64 bits, the same answer as in 128 bits, and faster); 0: 128-bit
    /// products.
    pub narrow: u32,
    /// Bars per year (annualization).
    pub bars_per_year: f64,
    /// Risk-free return per bar.
    pub risk_free: f64,
}

const _: () = assert!(core::mem::size_of::<BacktestArgs>() == 48);

/// Write the ledger.
pub const WRITE_LEDGER: u32 = 1;
/// Write equity curves (`n_columns x (end - start + 1)`).
pub const WRITE_EQUITY: u32 = 2;

/// The sign of fast SMA - slow SMA at the close of bar `t` (1, -1, 0 on a tie), from prefix sums of the
/// closes in integer ticks (`prefix[i]` = sum of the ticks of bars `0..i`): `sum_fast x slow` against
/// `sum_slow x fast` in integers, so a tie is exact whatever the prices' floats; `None` until both windows
/// are full. In 64 bits when `narrow` (the caller's proof that the products fit: [`BacktestArgs::narrow`]),
/// else in 128 bits; the answer is the same.
#[inline]
pub fn sma_side(prefix: &[i64], t: usize, s: &SmaCross, narrow: bool) -> Option<i32> {
    let (fast, slow) = (s.fast as usize, s.slow as usize);
    if fast == 0 || slow == 0 || t + 1 < slow.max(fast) {
        return None;
    }
    let sum_fast = prefix[t + 1] - prefix[t + 1 - fast];
    let sum_slow = prefix[t + 1] - prefix[t + 1 - slow];
    let order = if narrow {
        (sum_fast * slow as i64).cmp(&(sum_slow * fast as i64))
    } else {
        (i128::from(sum_fast) * slow as i128).cmp(&(i128::from(sum_slow) * fast as i128))
    };
    Some(order as i32)
}

/// Whether every column's products in [`sma_side`] fit an i64 over these prefix sums: a window sum of `w`
/// bars is at most `w` times the largest |tick|, so `fast x slow x max |tick| <= i64::MAX` suffices.
pub fn products_fit_i64(prefix: &[i64], columns: &[SmaCross]) -> bool {
    let max_tick = prefix.windows(2).map(|w| (i128::from(w[1]) - i128::from(w[0])).unsigned_abs()).max().unwrap_or(0);
    let widest = columns.iter().map(|s| u128::from(s.fast) * u128::from(s.slow)).max().unwrap_or(0);
    widest.checked_mul(max_tick).is_some_and(|p| p <= i64::MAX as u128)
}

/// The target action of side `side` (1 long, -1 short or flat without shorts, 0 flat).
#[inline]
fn side_action(side: i32, s: &SmaCross) -> u8 {
    match side {
        1 => Action::Long as u8,
        -1 if s.allow_short != 0 => Action::Short as u8,
        _ => Action::Flat as u8,
    }
}

/// The target actions of an SMA column bar after bar, by its rule ([`RULE_STATE`], [`RULE_CROSS`]); called
/// with t ascending (the cross rule holds its last target). `NARROW`: 64-bit products (see [`sma_side`]), a
/// constant so that each kernel loop has one comparison and no branch on it.
#[derive(Debug)]
pub struct SmaSignal<'a, const NARROW: bool> {
    prefix: &'a [i64],
    s: SmaCross,
    held: u8,
    /// The side at bar `last_bar` (the previous call's), so that each bar's side is computed once.
    last: Option<i32>,
    last_bar: usize,
}

impl<'a, const NARROW: bool> SmaSignal<'a, NARROW> {
    /// The signal of column `s` over the prefix sums `prefix`.
    #[inline]
    pub fn new(prefix: &'a [i64], s: SmaCross) -> Self {
        Self { prefix, s, held: Action::Flat as u8, last: None, last_bar: usize::MAX }
    }

    /// The target at the close of bar `t` (t ascending from call to call).
    #[inline]
    pub fn target(&mut self, t: usize) -> u8 {
        let now = sma_side(self.prefix, t, &self.s, NARROW);
        if self.s.rule != RULE_CROSS {
            return side_action(now.unwrap_or(0), &self.s);
        }
        let before = match t.checked_sub(1) {
            Some(prev) if prev == self.last_bar => self.last,
            Some(prev) => sma_side(self.prefix, prev, &self.s, NARROW),
            None => None,
        };
        (self.last, self.last_bar) = (now, t);
        if let (Some(before), Some(now)) = (before, now) {
            if before < 0 && now > 0 {
                self.held = side_action(1, &self.s);
            } else if before > 0 && now < 0 {
                self.held = side_action(-1, &self.s);
            }
        }
        self.held
    }
}

/// The ledger of one column: trade statistics, and every closed trade handed to `sink`.
struct Ledger<F: FnMut(Trade)> {
    open: Trade,
    cash_before: f64,
    count: u32,
    wins: u32,
    gross_profit: f64,
    gross_loss: f64,
    sum_returns: f64,
    costs: f64,
    sink: F,
}

impl<F: FnMut(Trade)> TradeLog for Ledger<F> {
    fn opened(&mut self, bar: u32, fill: &Fill, cash_before: f64) {
        let side = if fill.units > 0.0 { 1 } else { -1 };
        self.open = Trade {
            entry_bar: bar,
            side,
            entry_price: fill.price,
            units: libm::fabs(fill.units),
            costs: fill.costs,
            ..Trade::default()
        };
        self.cash_before = cash_before;
        self.costs += fill.costs;
    }

    fn closed(&mut self, bar: u32, fill: &Fill, reason: ExitReason, cash_after: f64) {
        let mut t = self.open;
        t.exit_bar = bar;
        t.reason = reason as u32;
        t.exit_price = fill.price;
        t.costs += fill.costs;
        t.pnl = cash_after - self.cash_before;
        t.ret = if self.cash_before > 0.0 { t.pnl / self.cash_before } else { 0.0 };
        self.costs += fill.costs;
        self.count += 1;
        if t.pnl > 0.0 {
            self.wins += 1;
            self.gross_profit += t.pnl;
        } else {
            self.gross_loss -= t.pnl;
        }
        self.sum_returns += t.ret;
        (self.sink)(t);
    }
}

/// Runs one column over bars `[args.start, args.end]`: decisions from `target(t)` at the close of each bar
/// t < end, fills from the next open; a position still open after the last step is closed at the last close
/// (reason EndOfData). Equity after each bar goes to `equity(i, value)` (i = 0 is the start), each closed
/// trade to `sink`. Returns the metrics and the number of trades.
#[inline]
pub fn backtest_column(
    args: &BacktestArgs,
    params: &TrialParams,
    bars: &[Bar],
    mut target: impl FnMut(usize) -> u8,
    mut equity: impl FnMut(usize, f64),
    sink: impl FnMut(Trade),
) -> (Metrics, u32) {
    let (start, end) = (args.start as usize, args.end as usize);
    let mut state = EnvState::new(params, args.start, args.end);
    let mut ledger = Ledger {
        open: Trade::default(),
        cash_before: 0.0,
        count: 0,
        wins: 0,
        gross_profit: 0.0,
        gross_loss: 0.0,
        sum_returns: 0.0,
        costs: 0.0,
        sink,
    };
    let initial = state.equity;
    equity(0, initial);
    let mut stats = EquityStats::new(initial, start, args.risk_free);
    // Bars `start..=end` only: the loop's indices are then provably in bounds (no check a bar).
    let bars = &bars[..=end];
    for t in start..end {
        let prev = state.equity;
        // An ended env (bankrupt, halted by the breaker) never trades again and its decisions are ignored:
        // its signal is not computed (what `account_step` does for it, it does without one).
        let action = if state.status().is_done() { Action::Flat as u8 } else { target(t) };
        account_step(params, &mut state, action, &bars[t], &bars[t + 1], &mut ledger);
        let in_position = state.position != 0;
        if t + 1 == end && state.position != 0 && state.status() != crate::EnvStatus::Bankrupt {
            let fill = close_position(params, &mut state, bars[end].close);
            ledger.closed(end as u32, &fill, ExitReason::EndOfData, state.cash);
            state.equity = state.cash;
            state.step_costs += fill.costs;
        }
        stats.push(t + 1, prev, state.equity, in_position);
        equity(t + 1 - start, state.equity);
    }
    let trades = f64::from(ledger.count);
    let metrics = Metrics {
        trades,
        win_rate: ratio(f64::from(ledger.wins), trades),
        profit_factor: if ledger.gross_loss > 0.0 {
            ledger.gross_profit / ledger.gross_loss
        } else if ledger.gross_profit > 0.0 {
            f64::INFINITY
        } else {
            f64::NAN
        },
        avg_trade_return: ratio(ledger.sum_returns, trades),
        total_costs: ledger.costs,
        ..stats.finish(end, state.equity, args.bars_per_year)
    };
    (metrics, ledger.count)
}

/// Column `col` of a launch: its parameter set, its decision source, and the run.
#[inline]
#[allow(clippy::too_many_arguments, reason = "the inputs of one column, as the kernel passes them")]
pub fn run_column(
    col: usize,
    args: &BacktestArgs,
    params: &[TrialParams],
    targets: &[u8],
    sma: &[SmaCross],
    prefix: &[i64],
    bars: &[Bar],
    equity: impl FnMut(usize, f64),
    sink: impl FnMut(Trade),
) -> (Metrics, u32) {
    let p = &params[col % args.n_params.max(1) as usize];
    let steps = (args.end - args.start) as usize;
    let start = args.start as usize;
    if args.signal == SIGNAL_SMA_CROSS {
        // The prefix sums the bars `..=end` read (one more than the bars): the signal's indices are then
        // provably in bounds.
        let prefix = &prefix[..args.end as usize + 2];
        if args.narrow != 0 {
            let mut signal = SmaSignal::<true>::new(prefix, sma[col]);
            backtest_column(args, p, bars, |t| signal.target(t), equity, sink)
        } else {
            let mut signal = SmaSignal::<false>::new(prefix, sma[col]);
            backtest_column(args, p, bars, |t| signal.target(t), equity, sink)
        }
    } else {
        let column = &targets[col * steps..(col + 1) * steps];
        backtest_column(args, p, bars, |t| column[t - start], equity, sink)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prefix sums of `ticks`.
    fn prefix<const N: usize, const M: usize>(ticks: &[i64; N]) -> [i64; M] {
        let mut p = [0i64; M];
        for (i, t) in ticks.iter().enumerate() {
            p[i + 1] = p[i] + t;
        }
        p
    }

    /// Where the host's proof holds, the 64-bit comparison gives the 128-bit one at every bar, ties
    /// included (a series of exact ties, and walks of random ticks up to the proof's bound); the proof
    /// refuses one tick past the bound.
    #[test]
    fn narrow_products_compare_as_wide_ones() {
        let mut counter = 0;
        let mut next = move || {
            counter += 1;
            crate::rng::draw_u64(7, 0, counter)
        };
        for case in 0..300 {
            let (fast, slow) = (2 + (next() % 40) as u32, 1 + (next() % 90) as u32);
            let column = SmaCross { fast, slow, allow_short: 1, rule: RULE_CROSS };
            let bound = i64::MAX / (i64::from(fast) * i64::from(slow));
            // The prefix sums themselves stay within 64 bits (as the host's tick scale ensures).
            let top = if case % 3 == 0 { 7 } else { bound.min(i64::MAX / 401) };
            let ticks: [i64; 400] = core::array::from_fn(|i| {
                if case % 10 == 1 {
                    5
                } else if i == 17 {
                    top
                } else {
                    (next() % top as u64) as i64
                }
            });
            let p: [i64; 401] = prefix(&ticks);
            assert!(products_fit_i64(&p, &[column]), "case {case}");
            let mut ties = 0;
            for t in 0..ticks.len() {
                let (narrow, wide) = (sma_side(&p, t, &column, true), sma_side(&p, t, &column, false));
                assert_eq!(narrow, wide, "case {case}, bar {t}");
                ties += usize::from(wide == Some(0));
            }
            if case % 10 == 1 {
                assert!(ties > 300, "a constant series ties at every full window ({ties})");
            }
            let past: [i64; 3] = prefix(&[bound + 1, 1]);
            assert!(!products_fit_i64(&past, &[column]), "case {case}: one past the bound");
        }
    }
}
