//! The CUDA backtest: one upload, a count pass (metrics, trade counts, equity), offsets on the host, a fill
//! pass that writes the ledger, one download.

use std::sync::Arc;

use gpu_kernels::TrialParams;
use gpu_kernels::backtest::{BacktestArgs, SmaCross, WRITE_EQUITY, WRITE_LEDGER};

use super::buffers::{BacktestInputs, BacktestOutputs, Dev, zeros};
use super::launch;
use super::runtime::CudaRuntime;
use crate::types::{BacktestResult, Signals, offsets_of};
use crate::{HostError, MarketData};

pub(crate) fn backtest(
    rt: &Arc<CudaRuntime>,
    market: &MarketData,
    params: &[TrialParams],
    signals: &Signals<'_>,
    prefix: &[i64],
    args: &BacktestArgs,
) -> Result<BacktestResult, HostError> {
    let stream = rt.new_stream()?;
    let columns = args.n_columns as usize;
    let width = (args.end - args.start) as usize + 1;
    let host_params: Vec<_> = params.iter().copied().map(Dev).collect();
    let host_bars: Vec<_> = market.bars().iter().copied().map(Dev).collect();
    let params = stream.clone_htod(&host_params).map_err(HostError::driver("uploading parameters"))?;
    let bars = stream.clone_htod(&host_bars).map_err(HostError::driver("uploading bars"))?;
    let prefix = stream.clone_htod(prefix).map_err(HostError::driver("uploading close prefix sums"))?;
    let (targets, sma) = match signals {
        Signals::Targets { targets, .. } => (
            stream.clone_htod(*targets).map_err(HostError::driver("uploading targets"))?,
            zeros::<Dev<SmaCross>>(&stream, 1)?,
        ),
        Signals::SmaCross(s) => {
            let host: Vec<_> = s.iter().copied().map(Dev).collect();
            (zeros::<u8>(&stream, 1)?, stream.clone_htod(&host).map_err(HostError::driver("uploading SMA parameters"))?)
        }
    };
    let input = BacktestInputs { params: &params, targets: &targets, sma: &sma, prefix: &prefix, bars: &bars };
    let mut metrics = zeros(&stream, columns)?;
    let mut counts = zeros::<u32>(&stream, columns)?;
    let want_equity = args.write & WRITE_EQUITY != 0;
    let mut equity = zeros::<f64>(&stream, if want_equity { columns * width } else { 1 })?;
    let mut no_offsets = zeros::<u64>(&stream, 1)?;
    let mut no_ledger = zeros(&stream, 1)?;
    let count_pass = BacktestArgs { write: args.write & WRITE_EQUITY, ..*args };
    let out = BacktestOutputs {
        metrics: &mut metrics,
        counts: &mut counts,
        offsets: &no_offsets,
        ledger: &mut no_ledger,
        equity: &mut equity,
    };
    launch::backtest::backtest(rt, &stream, &input, out, 0, &count_pass)?;
    let host_counts =
        stream.clone_dtoh(&counts.slice(0..columns)).map_err(HostError::driver("downloading trade counts"))?;
    let offsets = offsets_of(&host_counts);
    let total = offsets[columns];
    let mut trades = Vec::new();
    if args.write & WRITE_LEDGER != 0 && total > 0 {
        let device_offsets: Vec<u64> = offsets[..columns].iter().map(|&o| o as u64).collect();
        no_offsets = stream.clone_htod(&device_offsets).map_err(HostError::driver("uploading ledger offsets"))?;
        let mut ledger = zeros(&stream, total)?;
        let fill_pass = BacktestArgs { write: WRITE_LEDGER, ..*args };
        let mut scratch_metrics = zeros(&stream, columns)?;
        let mut scratch_counts = zeros::<u32>(&stream, columns)?;
        let out = BacktestOutputs {
            metrics: &mut scratch_metrics,
            counts: &mut scratch_counts,
            offsets: &no_offsets,
            ledger: &mut ledger,
            equity: &mut equity,
        };
        launch::backtest::backtest(rt, &stream, &input, out, total, &fill_pass)?;
        let host = stream.clone_dtoh(&ledger.slice(0..total)).map_err(HostError::driver("downloading the ledger"))?;
        trades = host.into_iter().map(|d| d.0).collect();
    }
    let metrics = stream.clone_dtoh(&metrics.slice(0..columns)).map_err(HostError::driver("downloading metrics"))?;
    let equity = if want_equity {
        stream.clone_dtoh(&equity.slice(0..columns * width)).map_err(HostError::driver("downloading equity curves"))?
    } else {
        Vec::new()
    };
    Ok(BacktestResult { metrics: metrics.into_iter().map(|d| d.0).collect(), trades, offsets, equity })
}
