//! The report folder of a search: `index.html` (leaderboard, best trial on the test split with its Decimal
//! audit, equity, drawdown and learning-curve charts as inline SVG drawn with plotters), `leaderboard.json`,
//! `leaderboard.csv`, `best-trades.csv`, and the charts as `.svg` files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::config::SearchConfig;
use super::search::{EnvDecimals, env_params};
use super::study::{Study, TrialRecord};
use crate::audit::{AuditReport, audit_column};
use crate::data::Series;
use crate::train::SplitData;
use crate::{Backend, BacktestSpec, Metrics, Signals, backtest};

/// What the report found.
#[derive(Clone, Debug)]
pub struct ReportSummary {
    /// Trials, best first (complete before pruned, by validation Sharpe, ties by number).
    pub leaderboard: Vec<TrialRecord>,
    /// The best trial's test metrics (re-run by the backtest engine).
    pub best_test: Option<Metrics>,
    /// The best trial's Decimal audit.
    pub audit: Option<Result<AuditReport, String>>,
    /// Files written.
    pub files: Vec<PathBuf>,
}

/// Orders trials: complete before pruned before failed (an undefined objective) before running, then by
/// value (NaN last), then by number. The best trial is the first, when it is complete.
pub fn leaderboard(mut trials: Vec<TrialRecord>) -> Vec<TrialRecord> {
    let rank = |s: &str| match s {
        "complete" => 0,
        "pruned" => 1,
        "fail" => 2,
        _ => 3,
    };
    trials.sort_by(|a, b| {
        rank(&a.status)
            .cmp(&rank(&b.status))
            .then_with(|| match (a.value.is_nan(), b.value.is_nan()) {
                (true, true) => std::cmp::Ordering::Equal,
                (true, false) => std::cmp::Ordering::Greater,
                (false, true) => std::cmp::Ordering::Less,
                (false, false) => b.value.total_cmp(&a.value),
            })
            .then(a.number.cmp(&b.number))
    });
    trials
}

fn chart(title: &str, y_desc: &str, lines: &[(String, Vec<(f64, f64)>)]) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 320)).into_drawing_area();
        let e = |e: &dyn std::fmt::Display| format!("drawing {title}: {e}");
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let points = lines.iter().flat_map(|l| l.1.iter()).filter(|p| p.1.is_finite());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in points {
            (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
        }
        if x0 > x1 {
            (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
        }
        if x1 - x0 < 1e-12 {
            x1 = x0 + 1.0;
        }
        if y1 - y0 < 1e-12 {
            (y0, y1) = (y0 - 1.0, y1 + 1.0);
        }
        let mut c = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|x| e(&x))?;
        c.configure_mesh().y_desc(y_desc).draw().map_err(|x| e(&x))?;
        for (i, (name, pts)) in lines.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let finite: Vec<(f64, f64)> = pts.iter().copied().filter(|p| p.1.is_finite()).collect();
            c.draw_series(LineSeries::new(finite, color.stroke_width(2)))
                .map_err(|x| e(&x))?
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
        }
        if lines.len() > 1 {
            c.configure_series_labels()
                .border_style(BLACK)
                .background_style(WHITE.mix(0.8))
                .draw()
                .map_err(|x| e(&x))?;
        }
        root.present().map_err(|x| e(&x))?;
    }
    Ok(svg)
}

fn num(x: f64) -> String {
    if x.is_finite() { format!("{x:.4}") } else { "NaN".to_owned() }
}

/// A parameter for the table: whole numbers as such, small values in scientific notation.
fn param(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e9 {
        format!("{x:.0}")
    } else if x != 0.0 && x.abs() < 0.01 {
        format!("{x:.2e}")
    } else {
        format!("{x:.3}")
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Writes the report of `study` into `dir`.
#[allow(clippy::too_many_arguments, reason = "the study, its data and where the report goes")]
pub fn write_report(
    backend: &Backend,
    study: &Study,
    series: &Series,
    data: &SplitData,
    data_label: &str,
    cfg: &SearchConfig,
    bars_per_year: f64,
    dir: &Path,
) -> Result<ReportSummary, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    // tradesim's own trials (another Optuna worker's trials have no test evaluation or checkpoint; the
    // Optuna tools show them).
    let board = leaderboard(study.trials()?.into_iter().filter(|t| t.ours).collect());
    let epochs = study.epochs()?;
    let names: Vec<String> = board.first().map(|t| t.params.keys().cloned().collect()).unwrap_or_default();
    let mut files = Vec::new();
    let mut write = |name: &str, text: &str| -> Result<(), String> {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        files.push(path);
        Ok(())
    };
    // Leaderboard JSON and CSV.
    let mut json_trials = Vec::with_capacity(board.len());
    let mut csv = format!("rank,number,status,value,test_return,test_sharpe,pruned_at,{}\n", names.join(","));
    for (rank, t) in board.iter().enumerate() {
        let params: serde_json::Map<String, serde_json::Value> =
            t.params.iter().map(|(k, v)| (k.clone(), crate::json::number(*v))).collect();
        let curve: Vec<serde_json::Value> =
            epochs.iter().filter(|e| e.trial == t.number).map(|e| crate::json::number(e.valid_sharpe)).collect();
        json_trials.push(serde_json::json!({
            "rank": rank + 1,
            "number": t.number,
            "status": t.status,
            "value": crate::json::number(t.value),
            "test_return": crate::json::number(t.test_return),
            "test_sharpe": crate::json::number(t.test_sharpe),
            "pruned_at": t.pruned_at,
            "valid_sharpe_by_epoch": curve,
            "params": params,
        }));
        let values: Vec<String> =
            names.iter().map(|n| t.params.get(n).map_or(String::new(), |v| v.to_string())).collect();
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{}",
            rank + 1,
            t.number,
            t.status,
            t.value,
            t.test_return,
            t.test_sharpe,
            t.pruned_at.map_or(String::new(), |e| e.to_string()),
            values.join(",")
        );
    }
    let best = board.first().filter(|t| t.status == "complete");
    let json = serde_json::json!({
        "data": data_label,
        "metric": "validation Sharpe (last epoch)",
        "trials": json_trials,
        "best": best.map(|b| b.number),
    });
    write("leaderboard.json", &crate::json::text(&json))?;
    write("leaderboard.csv", &csv)?;
    // Learning curves.
    let curves: Vec<(String, Vec<(f64, f64)>)> = board
        .iter()
        .map(|t| {
            let pts = epochs.iter().filter(|e| e.trial == t.number).map(|e| (e.epoch as f64, e.valid_sharpe)).collect();
            (format!("trial {}", t.number), pts)
        })
        .collect();
    let learning = chart("Validation Sharpe by epoch", "Sharpe", &curves)?;
    write("learning-curves.svg", &learning)?;
    // The best trial on the test split: backtest with ledger and equity, then the Decimal audit.
    let (mut best_test, mut audit, mut equity_svg, mut drawdown_svg, mut trades_html) =
        (None, None, String::new(), String::new(), String::new());
    if let Some(b) = best {
        let (split, test) = (&data.split, &data.test);
        let targets = study.test_actions(b.number)?.ok_or_else(|| format!("trial {} has no test actions", b.number))?;
        let env = EnvDecimals::parse(&cfg.env)?;
        let params = env_params(&b.params, &env)?;
        let steps = test.n_bars() - 1;
        let spec = BacktestSpec { start: 0, end: steps, bars_per_year, risk_free: 0.0, ledger: true, equity: true };
        let r = backtest(backend, test, &[params], Signals::Targets { targets: &targets, columns: 1 }, &spec)
            .map_err(|e| e.to_string())?;
        let m = r.metrics[0];
        let eq: Vec<(f64, f64)> = r.equity.iter().enumerate().map(|(i, &v)| (i as f64, v)).collect();
        let mut peak = f64::MIN;
        let dd: Vec<(f64, f64)> = r
            .equity
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                peak = peak.max(v);
                (i as f64, 100.0 * (v / peak - 1.0))
            })
            .collect();
        equity_svg =
            chart(&format!("Trial {}: equity on the test split", b.number), "equity", &[("equity".to_owned(), eq)])?;
        drawdown_svg = chart(
            &format!("Trial {}: drawdown on the test split", b.number),
            "drawdown %",
            &[("drawdown".to_owned(), dd)],
        )?;
        write("equity.svg", &equity_svg)?;
        write("drawdown.svg", &drawdown_svg)?;
        let test_start = split.test.start;
        let trades: Vec<(String, crate::Trade)> =
            r.column_trades(0).iter().map(|t| (format!("trial_{}", b.number), *t)).collect();
        let time =
            |bar: u32| series.bars.get(test_start + bar as usize).map_or_else(String::new, |x| x.time.to_rfc3339());
        write("best-trades.csv", &crate::table::csv_text(&crate::table::trade_columns(&trades, &time)))?;

        audit = Some(audit_column(&series.bars[split.test.start..], &env.audit_params(), r.column_trades(0), &m));
        let _ = write!(
            trades_html,
            "<p>{} trades on the test split (bars {}..{} of the series); the ledger is in best-trades.csv.</p>",
            r.column_trades(0).len(),
            split.test.start,
            split.test.end
        );
        best_test = Some(m);
    }
    // The page.
    let mut html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>tradesim hyperopt</title><style>\
         body{{font-family:sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right;white-space:nowrap}}th{{background:#eee}}</style></head><body>\
         <h1>tradesim hyperopt</h1><p>Data: {}. Symbol {}. {} trials ({} complete, {} pruned), {}, {} epochs each, \
         {} trials at a time. Metric: validation Sharpe of the last epoch.</p>",
        html_escape(data_label),
        html_escape(&series.symbol),
        board.len(),
        board.iter().filter(|t| t.status == "complete").count(),
        board.iter().filter(|t| t.status == "pruned").count(),
        cfg.study.algo.to_uppercase(),
        cfg.study.epochs,
        cfg.study.parallel
    );
    html += "<h2>Leaderboard</h2><div style=\"overflow-x:auto\"><table><tr><th>rank</th><th>trial</th><th>status</th><th>valid Sharpe</th><th>test return</th><th>test Sharpe</th>";
    for n in &names {
        let _ = write!(html, "<th>{}</th>", html_escape(n));
    }
    html += "</tr>";
    for (rank, t) in board.iter().enumerate() {
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            rank + 1,
            t.number,
            t.status,
            num(t.value),
            num(t.test_return),
            num(t.test_sharpe)
        );
        for n in &names {
            let _ = write!(html, "<td>{}</td>", t.params.get(n).map_or(String::new(), |v| param(*v)));
        }
        html += "</tr>";
    }
    html += "</table></div>";
    if let (Some(b), Some(m)) = (best, &best_test) {
        let _ = write!(html, "<h2>Best trial: {} on the test split</h2><table>", b.number);
        for (k, v) in [
            ("total return", m.total_return),
            ("annual return", m.annual_return),
            ("annual volatility", m.annual_volatility),
            ("Sharpe", m.sharpe),
            ("Sortino", m.sortino),
            ("max drawdown", m.max_drawdown),
            ("max drawdown bars", m.max_drawdown_bars),
            ("Calmar", m.calmar),
            ("trades", m.trades),
            ("win rate", m.win_rate),
            ("profit factor", m.profit_factor),
            ("average trade return", m.avg_trade_return),
            ("exposure", m.exposure),
            ("total costs", m.total_costs),
            ("final equity", m.final_equity),
        ] {
            let _ = write!(html, "<tr><th>{k}</th><td>{}</td></tr>", num(v));
        }
        html += "</table>";
        html += &trades_html;
        match &audit {
            Some(Ok(a)) => {
                let _ = write!(html, "<p>{}</p>", html_escape(&a.to_string()));
            }
            Some(Err(e)) => {
                let _ = write!(html, "<p>Decimal audit not available: {}</p>", html_escape(e));
            }
            None => {}
        }
        html += &equity_svg;
        html += &drawdown_svg;
    } else {
        html += "<p>No trial completed yet.</p>";
    }
    html += "<h2>Learning curves</h2>";
    html += &learning;
    html += "<p>Files: leaderboard.json, leaderboard.csv, best-trades.csv, equity.svg, drawdown.svg, learning-curves.svg.</p></body></html>\n";
    write("index.html", &html)?;
    Ok(ReportSummary { leaderboard: board, best_test, audit, files })
}
