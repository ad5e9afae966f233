//! `tradesim backtest`: an SMA-crossover grid over one symbol's bars, ranked by Sharpe, with JSON and CSV of
//! every column and the Decimal audit of the best one.

use crate::Error;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use crate::audit::{DecimalParams, audit_column, parse_decimal};
use crate::data::Dataset;
use crate::data::device::Prepared;
use crate::{Backend, BacktestSpec, Metrics, Signals, SmaCross, backtest};

/// Strategy families of `tradesim backtest --strategy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Strategy {
    /// A fast and a slow simple moving average of the closes, one column per (fast, slow) pair.
    #[default]
    SmaCross,
}

/// When an SMA crossover changes a column's target (`--signal`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SignalRule {
    /// Only on a crossover event: long when fast crosses above slow, short (or flat) when it crosses below;
    /// flat before the first event, a tie is no event.
    #[default]
    Cross,
    /// The side of the averages: long while fast > slow, short (or flat) while below, flat on a tie.
    State,
}

/// Everything the command needs, already loaded.
#[derive(Debug)]
pub struct Request {
    /// The data (or why it could not be loaded).
    pub dataset: Result<Dataset, Error>,
    /// Symbol of a multi-symbol file.
    pub symbol: Option<String>,
    /// Strategy family.
    pub strategy: Strategy,
    /// When the SMA signal changes the target.
    pub signal: SignalRule,
    /// Fast windows.
    pub fast: String,
    /// Slow windows.
    pub slow: String,
    /// Short below.
    pub allow_short: bool,
    /// Spread text (Decimal).
    pub spread: String,
    /// Commission text (Decimal).
    pub commission: String,
    /// Capital text (Decimal).
    pub capital: String,
    /// Whole units.
    pub whole_units: bool,
    /// Annualization override.
    pub bars_per_year: Option<f64>,
    /// Table rows.
    pub top: usize,
    /// JSON output.
    pub json: Option<PathBuf>,
    /// CSV output.
    pub csv: Option<PathBuf>,
    /// Columns whose equity and trades are exported: `best`, `top:N`, `all` or `FAST/SLOW[,FAST/SLOW...]`.
    pub columns: String,
    /// Per-bar equity of the selected columns (CSV).
    pub equity: Option<PathBuf>,
    /// Trade ledger of the selected columns (CSV).
    pub trades: Option<PathBuf>,
    /// The backend (or why none).
    pub backend: Result<Backend, Error>,
}

/// The grid columns `spec` selects (`best`, `top:N`, `all`, or `FAST/SLOW` pairs, or `sma_FAST_SLOW` names as
/// the exports write them, separated by commas), in
/// rank order for `best`/`top`, grid order otherwise; `order` is the ranking.
pub fn select_columns(spec: &str, grid: &[SmaCross], order: &[usize]) -> Result<Vec<usize>, Error> {
    let spec = spec.trim();
    let bad = |why: &str| {
        Error::config("--columns", format!("`{spec}`: {why} (best, top:N, all or FAST/SLOW[,FAST/SLOW...])"))
    };
    match spec {
        "best" => Ok(order.iter().take(1).copied().collect()),
        "all" => Ok((0..grid.len()).collect()),
        _ if spec.starts_with("top:") => {
            let n: usize = spec[4..].trim().parse().map_err(|_| bad("N is not a whole number"))?;
            if n == 0 {
                return Err(bad("N must be at least 1"));
            }
            Ok(order.iter().take(n).copied().collect())
        }
        _ => spec
            .split(',')
            .map(|pair| {
                // `FAST/SLOW`, or an exported column's name `sma_FAST_SLOW`.
                let named = pair.trim().strip_prefix("sma_").and_then(|p| p.split_once('_'));
                let (f, s) =
                    named.or_else(|| pair.split_once('/')).ok_or_else(|| bad(&format!("`{pair}` is not FAST/SLOW")))?;
                let (f, s): (u32, u32) = (
                    f.trim().parse().map_err(|_| bad(&format!("`{f}` is not a window")))?,
                    s.trim().parse().map_err(|_| bad(&format!("`{s}` is not a window")))?,
                );
                grid.iter()
                    .position(|g| g.fast == f && g.slow == s)
                    .ok_or_else(|| bad(&format!("{f}/{s} is not in the grid")))
            })
            .collect(),
    }
}

/// Refuses an export path whose extension is neither `.csv` nor `.parquet`.
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

/// Runs the command.
pub fn run(req: Request) -> Result<(), Error> {
    let Strategy::SmaCross = req.strategy;
    let dataset = req.dataset?;
    let series = dataset.select(req.symbol.as_deref())?;
    let backend = req.backend?;
    let dp = DecimalParams {
        initial_capital: parse_decimal("capital", &req.capital)?,
        spread: parse_decimal("spread", &req.spread)?,
        commission: parse_decimal("commission", &req.commission)?,
        cash_reserve_pct: rust_decimal::Decimal::ZERO,
        whole_units: req.whole_units,
        allow_short: req.allow_short,
    };
    let params = dp.to_params()?;
    for (flag, path) in [("equity", &req.equity), ("trades", &req.trades)] {
        if let Some(p) = path {
            table_path(flag, p)?;
        }
    }
    let rule = match req.signal {
        SignalRule::Cross => gpu_kernels::backtest::RULE_CROSS,
        SignalRule::State => gpu_kernels::backtest::RULE_STATE,
    };
    let (fast, slow) = (parse_windows("fast", &req.fast)?, parse_windows("slow", &req.slow)?);
    let grid: Vec<SmaCross> = fast
        .iter()
        .flat_map(|&f| {
            slow.iter().filter(move |&&s| s > f).map(move |&s| SmaCross {
                fast: f,
                slow: s,
                allow_short: u32::from(req.allow_short),
                rule,
            })
        })
        .collect();
    if grid.is_empty() {
        return Err(Error::config("--slow", "the grid is empty: every slow window must exceed a fast one"));
    }
    let n = series.bars.len();
    let market = Prepared::new(series, 0..n)?.market_data(0..n)?;
    let times: Vec<_> = series.bars.iter().map(|b| b.time).collect();
    let bars_per_year = req.bars_per_year.unwrap_or_else(|| crate::data::time::infer_bars_per_year(&times));
    let spec = BacktestSpec { start: 0, end: n - 1, bars_per_year, risk_free: 0.0, ledger: true, equity: false };
    let started = Instant::now();
    let result = backtest(&backend, &market, &[params], Signals::SmaCross(&grid), &spec)?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "data:     {}, symbol {}, {n} bars, {bars_per_year} bars/year; {} columns on {} in {seconds:.3} s ({:.3e} bar-columns/s)",
        dataset.label(),
        series.symbol,
        grid.len(),
        backend.info().backend,
        (grid.len() * (n - 1)) as f64 / seconds
    );
    let order = result.ranking(|m| m.sharpe);
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
    match audit_column(&series.bars, &dp, result.column_trades(best), &result.metrics[best]) {
        Ok(report) => println!("best column (fast {}, slow {}): {report}", grid[best].fast, grid[best].slow),
        Err(e) => println!("best column: no Decimal audit: {e}"),
    }
    if let Some(path) = &req.json {
        let columns: Vec<serde_json::Value> = result
            .metrics
            .iter()
            .enumerate()
            .map(|(c, m)| {
                let mut row = serde_json::Map::new();
                row.insert("fast".to_owned(), grid[c].fast.into());
                row.insert("slow".to_owned(), grid[c].slow.into());
                row.insert("rank".to_owned(), order.iter().position(|&x| x == c).map_or(0, |r| r + 1).into());
                for (k, v) in Metrics::NAMES.iter().zip(m.values()) {
                    row.insert((*k).to_owned(), crate::json::number(v));
                }
                serde_json::Value::Object(row)
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
        let mut out = format!("fast,slow,rank,{}\n", Metrics::NAMES.join(","));
        for (c, m) in result.metrics.iter().enumerate() {
            let rank = order.iter().position(|&x| x == c).map_or(0, |r| r + 1);
            let fields: Vec<String> = m.values().iter().map(|v| v.to_string()).collect();
            let _ = writeln!(out, "{},{},{rank},{}", grid[c].fast, grid[c].slow, fields.join(","));
        }
        std::fs::write(path, out).map_err(Error::io(path))?;
        println!("CSV:  {}", path.display());
    }
    if req.equity.is_some() || req.trades.is_some() {
        let chosen = select_columns(&req.columns, &grid, &order)?;
        let sub: Vec<SmaCross> = chosen.iter().map(|&c| grid[c]).collect();
        let spec = BacktestSpec { equity: true, ..spec };
        let r = backtest(&backend, &market, &[params], Signals::SmaCross(&sub), &spec)?;
        let name = |g: &SmaCross| format!("sma_{}_{}", g.fast, g.slow);
        let time = |bar: usize| times.get(bar).map_or_else(String::new, |t| t.to_rfc3339());
        if let Some(path) = &req.equity {
            use crate::table::Column;
            let per = r.equity.len() / sub.len().max(1);
            let mut columns = vec![
                ("time".to_owned(), Column::Text((0..per).map(time).collect())),
                ("bar".to_owned(), Column::Int((0..per as i64).collect())),
            ];
            for (c, g) in sub.iter().enumerate() {
                columns.push((name(g), Column::Float(r.equity[c * per..(c + 1) * per].to_vec())));
            }
            crate::table::write_table(path, &columns)?;
            println!("equity: {} ({} columns x {per} bars)", path.display(), sub.len());
        }
        if let Some(path) = &req.trades {
            let all: Vec<(String, crate::Trade)> = (0..sub.len())
                .flat_map(|c| {
                    let label = name(&sub[c]);
                    r.column_trades(c).iter().map(move |t| (label.clone(), *t))
                })
                .collect();
            let columns = crate::table::trade_columns(&all, &|bar| time(bar as usize));
            crate::table::write_table(path, &columns)?;
            println!("trades: {} ({} trades of {} columns)", path.display(), all.len(), sub.len());
        }
    }
    Ok(())
}
