//! `tradesim backtest`: an SMA-crossover grid over one symbol's bars, ranked by Sharpe, with JSON and CSV of
//! every column and the Decimal audit of the best one.

use crate::Error;
use std::path::PathBuf;

use crate::audit::parse_decimal;
use crate::data::Dataset;
pub use crate::grid::SignalRule;
use crate::grid::{GridRequest, run_grid};
use crate::{Backend, Metrics};

/// Strategy families of `tradesim backtest --strategy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Strategy {
    /// A fast and a slow simple moving average of the closes, one column per (fast, slow) pair.
    #[default]
    SmaCross,
}

/// `tradesim backtest`'s flags, passed whole to [`run`].
#[derive(Debug, Clone, clap::Args)]
pub struct BacktestArgs {
    /// Strategy family.
    #[arg(long, value_enum, default_value_t = Strategy::SmaCross)]
    pub strategy: Strategy,
    /// cross: change the target only on a crossover (long when fast crosses above slow, short or flat
    /// when it crosses below; flat before the first); state: long while fast > slow, short or flat while
    /// below, flat on a tie.
    #[arg(long, value_enum, default_value_t = SignalRule::Cross)]
    pub signal: SignalRule,
    /// Fast SMA windows: N, A:B or A:B:STEP.
    #[arg(long, default_value = "5:50:5")]
    pub fast: String,
    /// Slow SMA windows: N, A:B or A:B:STEP.
    #[arg(long, default_value = "20:200:10")]
    pub slow: String,
    /// Go short when the fast SMA is below the slow one (default: flat).
    #[arg(long)]
    pub allow_short: bool,
    /// Spread as a fraction of the price (Decimal).
    #[arg(long, default_value = crate::DEFAULT_SPREAD)]
    pub spread: String,
    /// Commission as a fraction of the notional (Decimal).
    #[arg(long, default_value = crate::DEFAULT_COMMISSION)]
    pub commission: String,
    /// Starting cash (Decimal).
    #[arg(long, default_value = "100000")]
    pub capital: String,
    /// Trade whole units only.
    #[arg(long)]
    pub whole_units: bool,
    /// Bars per year for annualized figures (default: inferred from the timestamps).
    #[arg(long)]
    pub bars_per_year: Option<f64>,
    /// Rows of the ranked table.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Write every column's metrics as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write every column's metrics as CSV.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Columns whose equity and trades --equity and --trades write: best, top:N, all, or FAST/SLOW pairs
    /// separated by commas.
    #[arg(long, default_value = "best")]
    pub columns: String,
    /// Write the per-bar equity of the selected columns (.csv or .parquet: time, bar, one column per
    /// strategy; bar 0 is the capital before the first decision).
    #[arg(long)]
    pub equity: Option<PathBuf>,
    /// Write the trades of the selected columns (.csv or .parquet: times and bars of entry and exit, side,
    /// units, fill prices, costs, PnL, return on the equity at entry, exit reason); with --weights, the
    /// fills of the selected portfolios (time, bar, symbol, side, units, price, commission, costs, reason).
    #[arg(long)]
    pub trades: Option<PathBuf>,
    /// Backtest portfolios instead of the SMA grid: a CSV or Parquet file of target weights (time, symbol,
    /// then one column per portfolio; a row sets each portfolio's weight of that symbol at that close, an
    /// empty cell is no order) over the universe of the data (--symbols, or every symbol).
    #[arg(long, conflicts_with_all = ["fast", "slow", "signal"])]
    pub weights: Option<PathBuf>,
}

/// Refuses an export path whose extension is neither `.csv` nor `.parquet`.
/// One column's row of the JSON export: the keys that name the column, its rank, then every metric.
pub(super) fn metrics_row<const N: usize>(
    names: [(&str, serde_json::Value); N],
    rank: serde_json::Value,
    m: &Metrics,
) -> serde_json::Value {
    let mut row: serde_json::Map<String, serde_json::Value> =
        names.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    row.insert("rank".to_owned(), rank);
    for (k, v) in Metrics::NAMES.iter().zip(m.values()) {
        row.insert((*k).to_owned(), crate::json::number(v));
    }
    serde_json::Value::Object(row)
}

/// Refuses `--equity` and `--trades` paths whose format is not known, before anything runs.
pub(super) fn check_exports(req: &BacktestArgs) -> Result<(), Error> {
    for (flag, path) in [("equity", &req.equity), ("trades", &req.trades)] {
        if let Some(p) = path {
            table_path(flag, p)?;
        }
    }
    Ok(())
}

fn table_path(flag: &str, path: &std::path::Path) -> Result<(), Error> {
    match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("csv" | "parquet") => Ok(()),
        _ => Err(Error::config(
            format!("--{flag}"),
            format!("{}: the file must end in .csv or .parquet", path.display()),
        )),
    }
}

/// Parses `N`, `A:B` or `A:B:STEP` into window lengths.
pub fn parse_windows(name: &str, text: &str) -> Result<Vec<u32>, Error> {
    let parts: Vec<&str> = text.split(':').collect();
    let num = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| Error::config(format!("--{name}"), format!("`{text}`: `{s}` is not a whole number")))
    };
    let (a, b, step) = match parts.as_slice() {
        [n] => (num(n)?, num(n)?, 1),
        [a, b] => (num(a)?, num(b)?, 1),
        [a, b, s] => (num(a)?, num(b)?, num(s)?),
        _ => return Err(Error::config(format!("--{name}"), format!("`{text}`: expected N, A:B or A:B:STEP"))),
    };
    if a == 0 || b < a || step == 0 {
        return Err(Error::config(format!("--{name}"), format!("`{text}`: need 1 <= A <= B and STEP >= 1")));
    }
    Ok((a..=b).step_by(step as usize).collect())
}

/// Runs the command on `dataset` (or why it could not be loaded) as the data flags `data` chose it, with
/// `backend` (or why none): the SMA grid over one symbol (`--weights`, the portfolios over a universe, is
/// [`super::portfolio::run_command`]'s).
pub(super) fn run(
    dataset: Result<Dataset, Error>,
    data: &super::DataArgs,
    req: &BacktestArgs,
    backend: Result<Backend, Error>,
) -> Result<(), Error> {
    let Strategy::SmaCross = req.strategy;
    let dataset = dataset?;
    check_exports(req)?;
    let series = dataset.select(data.symbol.as_deref())?;
    let backend = backend?;
    let request = GridRequest {
        fast: parse_windows("fast", &req.fast)?,
        slow: parse_windows("slow", &req.slow)?,
        signal: req.signal,
        allow_short: req.allow_short,
        capital: parse_decimal("capital", &req.capital)?,
        spread: parse_decimal("spread", &req.spread)?,
        commission: parse_decimal("commission", &req.commission)?,
        whole_units: req.whole_units,
        bars_per_year: req.bars_per_year,
    };
    let run = run_grid(&backend, series, &request)?;
    let (grid, result, n, bars_per_year) = (&run.grid, &run.result, series.bars.len(), run.bars_per_year);
    println!(
        "data:     {}, symbol {}, {n} bars, {bars_per_year} bars/year; {} columns on {} in {:.3} s ({:.3e} bar-columns/s)",
        dataset.label(),
        series.symbol,
        grid.len(),
        backend.info().backend,
        run.seconds,
        (grid.len() * (n - 1)) as f64 / run.seconds
    );
    let order = &run.order;
    println!(
        "{:>4} {:>5} {:>5} {:>9} {:>9} {:>8} {:>8} {:>7} {:>6} {:>7} {:>9}",
        "rank", "fast", "slow", "total%", "annual%", "sharpe", "maxdd%", "trades", "win%", "pf", "costs"
    );
    for (rank, &c) in order.iter().take(req.top).enumerate() {
        let (g, m) = (&grid[c], &result.metrics[c]);
        println!(
            "{:>4} {:>5} {:>5} {:>9.2} {:>9.2} {:>8.3} {:>8.2} {:>7} {:>6.1} {:>7.2} {:>9.2}",
            rank + 1,
            g.fast,
            g.slow,
            100.0 * m.total_return,
            100.0 * m.annual_return,
            m.sharpe,
            100.0 * m.max_drawdown,
            m.trades,
            100.0 * m.win_rate,
            m.profit_factor,
            m.total_costs
        );
    }
    let best = order[0];
    match run.audit_best(series) {
        Ok(report) => println!("best column (fast {}, slow {}): {report}", grid[best].fast, grid[best].slow),
        Err(e) => println!("best column: no Decimal audit: {e}"),
    }
    if let Some(path) = &req.json {
        let columns: Vec<serde_json::Value> = result
            .metrics
            .iter()
            .enumerate()
            .map(|(c, m)| {
                metrics_row([("fast", grid[c].fast.into()), ("slow", grid[c].slow.into())], run.rank_of(c).into(), m)
            })
            .collect();
        crate::json::write(
            path,
            &serde_json::json!({
                "data": dataset.label(),
                "symbol": series.symbol,
                "bars": n,
                "bars_per_year": crate::json::number(bars_per_year),
                "columns": columns,
            }),
        )?;
        println!("JSON: {}", path.display());
    }
    if let Some(path) = &req.csv {
        crate::table::write_table(path, &run.metric_columns())?;
        println!("CSV:  {}", path.display());
    }
    if req.equity.is_some() || req.trades.is_some() {
        let chosen = run.select_columns(&req.columns)?;
        let exports = run.exports(&backend, &chosen, req.equity.is_some())?;
        if let (Some(path), Some(columns)) = (&req.equity, &exports.equity) {
            crate::table::write_table(path, columns)?;
            println!("equity: {} ({} columns x {} bars)", path.display(), chosen.len(), exports.bars);
        }
        if let Some(path) = &req.trades {
            crate::table::write_table(path, &exports.trades)?;
            let count = exports.trades.first().map_or(0, |(_, c)| c.len());
            println!("trades: {} ({count} trades of {} columns)", path.display(), chosen.len());
        }
    }
    Ok(())
}
