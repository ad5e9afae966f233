//! The backtest launch.

use cudarc::driver::{CudaStream, PushKernelArg};
use gpu_kernels::backtest::{BacktestArgs, SIGNAL_SMA_CROSS, WRITE_EQUITY, WRITE_LEDGER};
use gpu_kernels::registry::BACKTEST_BLOCK;

use super::{Launch, at_least, grid_of, timed};
use crate::HostError;
use crate::cuda::buffers::{BacktestInputs, BacktestOutputs, Dev};
use crate::cuda::runtime::CudaRuntime;

/// `backtest`: every column, one thread each. `ledger_len` is the total trade count the offsets describe.
pub(crate) fn backtest(
    rt: &CudaRuntime,
    stream: &CudaStream,
    input: &BacktestInputs<'_>,
    out: BacktestOutputs<'_>,
    ledger_len: usize,
    args: &BacktestArgs,
) -> Result<(), HostError> {
    let kernel = rt.kernels.backtest.name;
    let (columns, steps) = (args.n_columns as usize, (args.end - args.start) as usize);
    at_least(kernel, "parameter sets", args.n_params as usize, input.params.len())?;
    if args.signal == SIGNAL_SMA_CROSS {
        at_least(kernel, "SMA parameters", columns, input.sma.len())?;
    } else {
        at_least(kernel, "target actions", columns * steps, input.targets.len())?;
    }
    at_least(kernel, "close tick prefix sums", args.n_bars as usize + 1, input.prefix.len())?;
    at_least(kernel, "bars", args.n_bars as usize, input.bars.len())?;
    at_least(kernel, "metrics", columns, out.metrics.len())?;
    at_least(kernel, "trade counts", columns, out.counts.len())?;
    if args.write & WRITE_LEDGER != 0 {
        at_least(kernel, "ledger offsets", columns, out.offsets.len())?;
        at_least(kernel, "ledger", ledger_len, out.ledger.len())?;
    }
    if args.write & WRITE_EQUITY != 0 {
        at_least(kernel, "equity values", columns * (steps + 1), out.equity.len())?;
    }
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.backtest);
    launch
        .arg(input.params)
        .arg(input.targets)
        .arg(input.sma)
        .arg(input.prefix)
        .arg(input.bars)
        .arg(out.metrics)
        .arg(out.counts)
        .arg(out.offsets)
        .arg(out.ledger)
        .arg(out.equity)
        .arg(&dev_args);
    // Columns are few next to the GPU's thread slots (100,000 columns fill about a third of an H200) and each
    // walks every bar: small blocks spread them evenly over the multiprocessors (the kernel's launch bounds).
    let cfg = grid_of(kernel, columns, BACKTEST_BLOCK)?;
    // SAFETY: arguments match `gpu_kernels::entries::backtest::backtest`; lengths checked above, and the offsets were
    // computed from this launch's own count pass, so each column's trades fit at its offset.
    timed(rt, stream, rt.kernels.backtest.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}
