//! `tradesim backtest --weights FILE`: portfolios of target weights over a universe, ranked by Sharpe, with
//! the Decimal audit of the ones shown, JSON and CSV of every portfolio's metrics, and the fills and equity
//! exports of the selected ones.

use std::path::Path;

use super::DataArgs;
use super::backtest::BacktestArgs;
use crate::audit::parse_decimal;
use crate::data::Dataset;
use crate::data::universe::Universe;
use crate::data::weights::{TargetWeights, load_weights};
use crate::portfolio::{PortfolioRequest, PortfolioRun, run_portfolios};
use crate::{Backend, Error};

/// `tradesim backtest --weights FILE`: the exports' paths checked, then [`run`] on `dataset` (or why it
/// could not be loaded) with `backend` (or why none).
pub(super) fn run_command(
    dataset: Result<Dataset, Error>,
    data: &DataArgs,
    weights: &Path,
    req: &BacktestArgs,
    backend: Result<Backend, Error>,
) -> Result<(), Error> {
    let dataset = dataset?;
    super::backtest::check_exports(req)?;
    run(dataset, data, weights, req, backend?)
}

/// Runs the portfolios of the weights file `path` over the universe of `dataset` (the symbols `data`
/// chose) with `req`'s account and outputs.
fn run(dataset: Dataset, data: &DataArgs, path: &Path, req: &BacktestArgs, backend: Backend) -> Result<(), Error> {
    let backend = if backend.is_cuda() {
        eprintln!("note: portfolio backtests have no CUDA kernel yet; this one runs on the CPU");
        Backend::Cpu
    } else {
        backend
    };
    let universe = Universe::new(dataset, Some(&data.symbols))?;
    let refused = |report: crate::data::LoadReport| {
        Error::Data(format!("the weights file is refused ({} finding(s)):\n{report}", report.blocking().count()))
    };
    let table = load_weights(path, data.rows.time_unit).map_err(refused)?;
    let weights = TargetWeights::new(table, &universe, req.allow_short).map_err(refused)?;
    let request = PortfolioRequest {
        capital: parse_decimal("capital", &req.capital)?,
        spread: parse_decimal("spread", &req.spread)?,
        commission: parse_decimal("commission", &req.commission)?,
        whole_units: req.whole_units,
        allow_short: req.allow_short,
        bars_per_year: req.bars_per_year,
    };
    let run = run_portfolios(&backend, &universe, &weights, &request)?;
    let benchmark = run_portfolios(&backend, &universe, &crate::portfolio::equal_weight_hold(&universe)?, &request)?;
    let benchmark = &benchmark.result.metrics[0];
    print_summary(&universe, &weights, &run, &backend);
    print_table(&universe, &weights, &run, req.top)?;
    println!(
        "benchmark: {} of the {} symbols: total {:.2}%, Sharpe {:.3}, max drawdown {:.2}% (flat: 0%)",
        crate::portfolio::EQUAL_WEIGHT_HOLD,
        universe.n_symbols(),
        100.0 * benchmark.total_return,
        benchmark.sharpe,
        100.0 * benchmark.max_drawdown
    );
    write_outputs(&universe, &weights, &run, benchmark, req)
}

/// The data, the universe and the weights in a few lines; the orders that cannot fill, with examples.
fn print_summary(universe: &Universe, weights: &TargetWeights, run: &PortfolioRun, backend: &Backend) {
    let (first, last) = (universe.times.first(), universe.times.last());
    let span = first.zip(last).map(|(a, b)| format!("{} .. {}", a.to_rfc3339(), b.to_rfc3339())).unwrap_or_default();
    let symbols = universe.symbols();
    let listed = if symbols.len() > 10 { format!("{}, ...", symbols[..10].join(", ")) } else { symbols.join(", ") };
    println!(
        "data:     {}: {} symbols ({listed}) on {} times, {span}; {} bars/year",
        universe.label(),
        universe.n_symbols(),
        universe.n_times(),
        run.bars_per_year
    );
    println!(
        "weights:  {}: {} portfolios, {} orders; {} portfolios on {} in {:.3} s",
        weights.file,
        weights.portfolios.len(),
        weights.orders.len(),
        run.names.len(),
        backend.info().backend,
        run.seconds
    );
    if !weights.unfilled.is_empty() {
        let examples: Vec<String> = weights
            .unfilled
            .iter()
            .take(5)
            .map(|o| {
                format!(
                    "row {} ({} at {})",
                    o.row,
                    universe.series[o.symbol].symbol,
                    universe.times[o.time].to_rfc3339()
                )
            })
            .collect();
        println!(
            "note:     {} orders cannot fill (no bar of their symbol at the next time, or decided at the last \
             time) and were not placed: {}{}",
            weights.unfilled.len(),
            examples.join(", "),
            if weights.unfilled.len() > 5 { ", ..." } else { "" }
        );
    }
}

/// The ranked table (`top` rows) and the Decimal audit of each portfolio shown.
fn print_table(universe: &Universe, weights: &TargetWeights, run: &PortfolioRun, top: usize) -> Result<(), Error> {
    let width = run.names.iter().map(String::len).max().unwrap_or(9).max(9);
    println!(
        "{:>4} {:<width$} {:>9} {:>9} {:>8} {:>8} {:>7} {:>11} {:>14}",
        "rank", "portfolio", "total%", "annual%", "sharpe", "maxdd%", "fills", "costs", "final"
    );
    for (rank, &c) in run.order.iter().take(top).enumerate() {
        let m = &run.result.metrics[c];
        println!(
            "{:>4} {:<width$} {:>9.2} {:>9.2} {:>8.3} {:>8.2} {:>7} {:>11.2} {:>14.2}",
            rank + 1,
            run.names[c],
            100.0 * m.total_return,
            100.0 * m.annual_return,
            m.sharpe,
            100.0 * m.max_drawdown,
            m.trades,
            m.total_costs,
            m.final_equity
        );
    }
    for &c in run.order.iter().take(top) {
        match run.audit(universe, weights, c) {
            Ok(report) => println!("{}: {report}", run.names[c]),
            Err(e) => println!("{}: no Decimal audit: {e}", run.names[c]),
        }
    }
    Ok(())
}

/// `--json`, `--csv`, `--equity` and `--trades`.
fn write_outputs(
    universe: &Universe,
    weights: &TargetWeights,
    run: &PortfolioRun,
    benchmark: &crate::Metrics,
    req: &BacktestArgs,
) -> Result<(), Error> {
    if let Some(path) = &req.json {
        let portfolios: Vec<serde_json::Value> = run
            .result
            .metrics
            .iter()
            .enumerate()
            .map(|(c, m)| {
                let mut row = super::backtest::metrics_row(
                    [("portfolio", run.names[c].clone().into())],
                    run.rank_of(c).into(),
                    m,
                );
                let by_symbol: serde_json::Map<String, serde_json::Value> = universe
                    .symbols()
                    .iter()
                    .zip(run.contributions(c, universe.n_symbols()))
                    .map(|(s, v)| ((*s).to_owned(), crate::json::number(v)))
                    .collect();
                row["contributions"] = by_symbol.into();
                row
            })
            .collect();
        crate::json::write(
            path,
            &serde_json::json!({
                "data": universe.label(),
                "symbols": universe.symbols(),
                "times": universe.n_times(),
                "bars_per_year": crate::json::number(run.bars_per_year),
                "weights": weights.file,
                "orders": weights.orders.len(),
                "unfilled_orders": weights.unfilled.len(),
                "portfolios": portfolios,
                "benchmark": super::backtest::metrics_row(
                    [("portfolio", crate::portfolio::EQUAL_WEIGHT_HOLD.into())],
                    serde_json::Value::Null,
                    benchmark
                ),
            }),
        )?;
        println!("JSON: {}", path.display());
    }
    if let Some(path) = &req.csv {
        crate::table::write_table(path, &run.metric_columns())?;
        println!("CSV:  {}", path.display());
    }
    if req.equity.is_some() || req.trades.is_some() {
        let chosen = run.select(&req.columns)?;
        if let Some(path) = &req.equity {
            crate::table::write_table(path, &run.equity_columns(universe, &chosen))?;
            println!("equity: {} ({} portfolios x {} times)", path.display(), chosen.len(), universe.n_times());
        }
        if let Some(path) = &req.trades {
            let fills = run.fill_columns(universe, &chosen);
            let count = fills.first().map_or(0, |(_, c)| c.len());
            crate::table::write_table(path, &fills)?;
            println!("fills: {} ({count} fills of {} portfolios)", path.display(), chosen.len());
        }
    }
    Ok(())
}
