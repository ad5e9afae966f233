//! The report's page, `index.html`: the header, the evidence, the leaderboard, the best trial on the test
//! split with its audit, and the charts inline; and the formatting of its numbers.

use std::fmt::Write as _;

use super::charts::LearningCurves;
use super::format::{html_escape, money, num, param, pct};
use crate::evidence::Evidence;
use crate::hyperopt::best::BestOnTest;
use crate::hyperopt::config::SearchConfig;
use crate::hyperopt::study::TrialRecord;

/// The charts of a report, as SVG.
pub(super) struct ChartsSvg {
    /// Intermediate values by epoch.
    pub learning: LearningCurves,
    /// Optimization history.
    pub history: String,
    /// Parameter importances.
    pub importance: String,
    /// Parallel coordinates.
    pub parallel: String,
    /// The best trial's equity on the test split (empty without a best trial).
    pub equity: String,
    /// The best trial's drawdown on the test split (empty without a best trial).
    pub drawdown: String,
}

/// What the page shows, all of it computed before.
pub(super) struct Page<'a> {
    /// How the page names the data.
    pub data_label: &'a str,
    /// The series' symbol.
    pub symbol: &'a str,
    /// The search's configuration.
    pub cfg: &'a SearchConfig,
    /// How much of the answer could be luck, and the verdict.
    pub evidence: &'a Evidence,
    /// The leaderboard, best first.
    pub board: &'a [TrialRecord],
    /// The parameters' names, the table's last columns.
    pub names: &'a [String],
    /// The best trial on the test split.
    pub best: Option<&'a BestOnTest>,
    /// The charts.
    pub charts: &'a ChartsSvg,
    /// The command that opens the study in optuna-dashboard.
    pub dashboard: &'a str,
}

/// The page (`index.html`): header, evidence, leaderboard, best trial, history, intermediate values,
/// parameters, where to look further.
pub(super) fn page(p: &Page) -> String {
    let board = p.board;
    let mut html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>tradesim hyperopt</title><style>\
         body{{font-family:sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right;white-space:nowrap}}th{{background:#eee}}</style></head><body>\
         <h1>tradesim hyperopt</h1><p>Data: {}. Symbol {}. {} trials ({} complete, {} pruned, {} failed), {}, {} epochs each, \
         {} trials at a time. Metric: validation score of the last epoch (the validation Sharpe's one-sided 95% lower bound; 0 for a policy that never traded).</p>",
        html_escape(p.data_label),
        html_escape(p.symbol),
        board.len(),
        board.iter().filter(|t| t.status == "complete").count(),
        board.iter().filter(|t| t.status == "pruned").count(),
        board.iter().filter(|t| t.status == "fail").count(),
        p.cfg.study.algo.to_string().to_uppercase(),
        p.cfg.study.epochs,
        p.cfg.study.parallel
    );
    html += &crate::evidence::html::section(p.evidence);
    html += &leaderboard_table(board, p.names);
    match p.best {
        Some(best) => html += &best_section(best, p.charts),
        None => html += "<p>No trial completed yet.</p>",
    }
    html += "<h2>Optimization history</h2>";
    html += &p.charts.history;
    html += "<h2>Intermediate values</h2>";
    html += &p.charts.learning.svg;
    html += &clip_note(&p.charts.learning);
    html += "<h2>Parameters</h2>";
    html += &p.charts.importance;
    html += &p.charts.parallel;
    let _ = write!(
        html,
        "<p>The same study in optuna-dashboard (history, intermediate values, parameter importances, parallel \
         coordinates): <code>{}</code>.</p>",
        html_escape(p.dashboard)
    );
    html += "<p>Files: leaderboard.json, leaderboard.csv, best-trades.csv, equity.svg, drawdown.svg, history.svg, \
             learning-curves.svg, importances.svg, parallel-coordinates.svg.</p></body></html>\n";
    html
}

/// The most rows of the page's leaderboard table (the best; the files list every trial).
const TABLE_ROWS: usize = 1000;

/// The leaderboard as a table: rank, trial, status, validation Sharpe, test return and Sharpe, then `names`
/// (the [`TABLE_ROWS`] best).
fn leaderboard_table(board: &[TrialRecord], names: &[String]) -> String {
    let mut html = "<h2>Leaderboard</h2><div style=\"overflow-x:auto\"><table><tr><th>rank</th><th>trial</th><th>status</th><th>valid score</th><th>test return</th><th>test Sharpe</th>".to_owned();
    for n in names {
        let _ = write!(html, "<th>{}</th>", html_escape(n));
    }
    html += "</tr>";
    for (rank, t) in board.iter().take(TABLE_ROWS).enumerate() {
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            rank + 1,
            t.number,
            t.status,
            num(t.value),
            pct(t.test_return),
            num(t.test_sharpe)
        );
        for n in names {
            let _ = write!(html, "<td>{}</td>", t.params.get(n).map_or(String::new(), |v| param(*v)));
        }
        html += "</tr>";
    }
    html += "</table></div>";
    if board.len() > TABLE_ROWS {
        let _ = write!(html, "<p>The {TABLE_ROWS} best of {} trials; leaderboard.csv lists them all.</p>", board.len());
    }
    html += &failed_list(board);
    html
}

/// The failed trials and why each failed (nothing when none did).
fn failed_list(board: &[TrialRecord]) -> String {
    let failed: Vec<&TrialRecord> = board.iter().filter(|t| t.status == "fail").collect();
    if failed.is_empty() {
        return String::new();
    }
    let mut html = "<h3>Failed trials</h3><ul>".to_owned();
    for t in failed {
        let why = t.fail_reason.as_deref().unwrap_or("no reason recorded");
        let _ = write!(html, "<li>trial {}: {}</li>", t.number, html_escape(why));
    }
    html + "</ul>"
}

/// The best trial on the test split: its metrics, its trades, its Decimal audit, its equity and drawdown.
fn best_section(best: &BestOnTest, charts: &ChartsSvg) -> String {
    let m = &best.metrics;
    let mut html = format!("<h2>Best trial: {} on the test split</h2><table>", best.trial);
    for (k, v) in [
        ("total return", pct(m.total_return)),
        ("annual return", pct(m.annual_return)),
        ("annual volatility", pct(m.annual_volatility)),
        ("Sharpe", num(m.sharpe)),
        ("Sortino", num(m.sortino)),
        ("max drawdown", pct(m.max_drawdown)),
        ("max drawdown bars", format!("{:.0}", m.max_drawdown_bars)),
        ("Calmar", num(m.calmar)),
        ("trades", format!("{:.0}", m.trades)),
        ("win rate", pct(m.win_rate)),
        ("profit factor", num(m.profit_factor)),
        ("average trade return", pct(m.avg_trade_return)),
        ("exposure", pct(m.exposure)),
        ("total costs", money(m.total_costs)),
        ("final equity", money(m.final_equity)),
    ] {
        let _ = write!(html, "<tr><th>{k}</th><td>{v}</td></tr>");
    }
    html += "</table>";
    let _ = write!(
        html,
        "<p>{} trades on the test split (bars {}..{} of the series); the ledger is in best-trades.csv.</p>",
        best.trades.len(),
        best.test_bars.start,
        best.test_bars.end
    );
    match &best.audit {
        Ok(a) => {
            let _ = write!(html, "<p>{}</p>", html_escape(&a.to_string()));
        }
        Err(e) => {
            let _ = write!(html, "<p>Decimal audit not available: {}</p>", html_escape(&e.to_string()));
        }
    }
    html += &charts.equity;
    html += &charts.drawdown;
    html
}

/// Says how the learning curves' y axis was clipped (nothing when it was not).
fn clip_note(learning: &LearningCurves) -> String {
    learning.clip.map_or_else(String::new, |((lo, hi), outside)| {
        format!(
            "<p>The y axis is clipped to [{lo:.2}, {hi:.2}] (the 5th to 95th percentile of the values widened by half \
             its width on each side) so that an outlier does not flatten the rest; {outside} values outside it are \
             drawn at its edge.</p>"
        )
    })
}
