//! The report of a universe search: the verdict and its evidence, the leaderboard, the learning curves and
//! history, the best trial's test equity (its walk through the portfolio backtest) against the universe's
//! equal-weight buy-and-hold of the same times, and its profit or loss by symbol.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::format::html_escape;
use super::{Folder, charts, leaderboard_files};
use crate::evidence::Evidence;
use crate::hyperopt::study::{Study, TrialRecord};
use crate::{Error, Metrics};

/// The best trial's test walk as target weights through the portfolio backtest, and its benchmark.
#[derive(Debug)]
pub struct UniverseOutputs {
    /// The best trial's portfolio backtest on the test times (its fills ledger, equity, metrics).
    pub best: crate::portfolio::PortfolioRun,
    /// The equal-weight buy-and-hold of the test times.
    pub hold: crate::portfolio::PortfolioRun,
    /// The best trial's profit or loss by symbol (symbol, amount), largest first.
    pub contributions: Vec<(String, f64)>,
    /// The Decimal audit line, or why there is none.
    pub audit: Result<String, String>,
    /// The walk's final equity (the env's rule, no end-of-data close).
    pub walk_final_equity: f64,
    /// Files written.
    pub files: Vec<PathBuf>,
}

/// What the universe report shows.
#[derive(Debug)]
pub struct UniverseReport<'a> {
    /// The study.
    pub study: &'a Study,
    /// The study's name.
    pub study_name: &'a str,
    /// The data's label.
    pub data_label: &'a str,
    /// The evidence and verdict.
    pub evidence: &'a Evidence,
    /// The trials, best first.
    pub leaderboard: &'a [TrialRecord],
    /// The best trial's test walk's metrics.
    pub best_test: Option<&'a Metrics>,
    /// The best trial's portfolio backtest and benchmark.
    pub outputs: Option<&'a UniverseOutputs>,
    /// Symbols of the universe.
    pub symbols: usize,
}

/// An equity curve as chart points (step, equity).
fn points(equity: &[f64]) -> Vec<(f64, f64)> {
    equity.iter().enumerate().map(|(i, &e)| (i as f64, e)).collect()
}

/// Writes `index.html` (and the leaderboard and charts beside it) into `dir`; returns the page's path.
pub fn write(r: &UniverseReport, dir: &Path) -> Result<PathBuf, Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::Output(format!("creating {}: {e}", dir.display())))?;
    let mut folder = Folder { dir, files: Vec::new(), charts: Vec::new() };
    let board = r.leaderboard;
    let epochs = r.study.epochs()?;
    let names: Vec<String> = board.first().map(|t| t.params.keys().cloned().collect()).unwrap_or_default();
    let best_number = board.first().filter(|t| t.status == "complete").map(|b| b.number);
    let (json, csv) = leaderboard_files(board, &epochs, &names, best_number, (r.data_label, r.evidence));
    folder.write("leaderboard.json", &json)?;
    folder.write("leaderboard.csv", &csv)?;
    let learning = charts::learning_curves(board, &epochs)?;
    folder.write_chart("learning-curves", &learning.svg, None)?;
    folder.write_chart("history", &charts::history_chart(board)?, None)?;
    let mut page = String::new();
    let _ = write!(
        page,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>tradesim universe search</title></head><body>\
         <h1>Universe search</h1><p>{} ({} symbols), study <code>{}</code></p><p><b>{}</b></p>",
        html_escape(r.data_label),
        r.symbols,
        html_escape(r.study_name),
        html_escape(&r.evidence.verdict.line)
    );
    page.push_str(&crate::evidence::html::section(r.evidence));
    page.push_str("<h2>Leaderboard</h2><table><tr><th>trial</th><th>status</th><th>valid score</th><th>test return %</th><th>test Sharpe</th></tr>");
    for t in board.iter().take(20) {
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.2}</td><td>{:.3}</td></tr>",
            t.number,
            html_escape(&t.status),
            t.value,
            100.0 * t.test_return,
            t.test_sharpe
        );
    }
    page.push_str("</table><img src=\"learning-curves.svg\"><img src=\"history.svg\">");
    if let Some(m) = r.best_test {
        let _ = write!(
            page,
            "<h2>Best trial on the test times</h2><p>walk: total return {:.2}%, Sharpe {:.3}, max drawdown {:.2}%, {} \
             side changes</p>",
            100.0 * m.total_return,
            m.sharpe,
            100.0 * m.max_drawdown,
            m.trades
        );
    }
    if let Some(o) = r.outputs {
        let eq = |run: &crate::portfolio::PortfolioRun| {
            let per = run.result.equity.len() / run.names.len().max(1);
            run.result.equity[..per].to_vec()
        };
        let lines =
            vec![(o.best.names[0].clone(), points(&eq(&o.best))), (o.hold.names[0].clone(), points(&eq(&o.hold)))];
        folder.write_chart("equity", &charts::line_svg("Test equity", "equity", lines)?, None)?;
        let (b, h) = (&o.best.result.metrics[0], &o.hold.result.metrics[0]);
        let _ = write!(
            page,
            "<img src=\"equity.svg\"><p>portfolio backtest: {} total {:.2}%, Sharpe {:.3}; {} total {:.2}%, Sharpe \
             {:.3}; the walk's final equity {:.2} (the env's rule, no end-of-data close)</p><p>{}</p>\
             <h2>Profit or loss by symbol</h2><table><tr><th>symbol</th><th>P&amp;L</th></tr>",
            html_escape(&o.best.names[0]),
            100.0 * b.total_return,
            b.sharpe,
            html_escape(&o.hold.names[0]),
            100.0 * h.total_return,
            h.sharpe,
            o.walk_final_equity,
            html_escape(o.audit.as_ref().unwrap_or_else(|e| e))
        );
        for (s, c) in o.contributions.iter().take(50) {
            let _ = write!(page, "<tr><td>{}</td><td>{c:.2}</td></tr>", html_escape(s));
        }
        page.push_str("</table><p>The fills: <a href=\"trades.csv\">trades.csv</a> (with a symbol column); equity: <a href=\"equity.csv\">equity.csv</a>.</p>");
    }
    page.push_str("</body></html>\n");
    folder.write("index.html", &page)?;
    folder.rasterize()?;
    Ok(dir.join("index.html"))
}
