//! The backtest grid: a thread per column.

use super::thread_index;
use crate::backtest::{
    BacktestArgs, Metrics, SIGNAL_SMA_CROSS, SmaCross, Trade, WRITE_EQUITY, WRITE_LEDGER, run_column,
};
use crate::types::{Bar, TrialParams};
use core::slice;

/// Backtests every column (one thread each): metrics and trade counts always; the ledger at `offsets`
/// and the equity curves when `args.write` asks for them.
///
/// # Safety
/// `params`: `n_params`; `targets`: `n_columns x (end - start)` for target signals; `sma`: `n_columns` for
/// SMA signals; `prefix`: `n_bars + 1`; `bars`: `n_bars`; `metrics`, `counts`: `n_columns`; with the
/// ledger, `offsets`: `n_columns` and `ledger` long enough for every column's trades at its offset; with
/// equity, `equity`: `n_columns x (end - start + 1)`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn backtest(
    params: *const TrialParams,
    targets: *const u8,
    sma: *const SmaCross,
    prefix: *const i64,
    bars: *const Bar,
    metrics: *mut Metrics,
    counts: *mut u32,
    offsets: *const u64,
    ledger: *mut Trade,
    equity: *mut f64,
    args: BacktestArgs,
) {
    crate::nvptx_ops::follow_previous();
    let col = thread_index();
    if col >= args.n_columns as usize {
        return;
    }
    let steps = (args.end - args.start) as usize;
    // SAFETY: lengths as documented; this thread alone writes its column's outputs.
    unsafe {
        let params = slice::from_raw_parts(params, args.n_params as usize);
        let n_targets = if args.signal == SIGNAL_SMA_CROSS { 0 } else { args.n_columns as usize * steps };
        let targets = slice::from_raw_parts(targets, n_targets);
        let sma = slice::from_raw_parts(sma, if args.signal == SIGNAL_SMA_CROSS { args.n_columns as usize } else { 0 });
        let prefix = slice::from_raw_parts(prefix, args.n_bars as usize + 1);
        let bars = slice::from_raw_parts(bars, args.n_bars as usize);
        let base = if args.write & WRITE_LEDGER != 0 { *offsets.add(col) as usize } else { 0 };
        let mut written = 0;
        let (m, count) = run_column(
            col,
            &args,
            params,
            targets,
            sma,
            prefix,
            bars,
            |i, value| {
                if args.write & WRITE_EQUITY != 0 {
                    *equity.add(col * (steps + 1) + i) = value;
                }
            },
            |trade| {
                if args.write & WRITE_LEDGER != 0 {
                    *ledger.add(base + written) = trade;
                    written += 1;
                }
            },
        );
        *metrics.add(col) = m;
        *counts.add(col) = count;
    }
}
