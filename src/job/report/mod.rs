//! The report folder of a search: `index.html` (`html.rs`: leaderboard, the best trial on the test split with
//! its Decimal audit, the charts inline), `leaderboard.json`, `leaderboard.csv`, `best-trades.csv`, and the
//! charts (`charts.rs`) as `.svg` and `.png` files. The best trial's test backtest and audit come computed
//! ([`crate::hyperopt::best::best_on_test`]); the report only writes them down.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::audit::AuditReport;
use crate::data::Series;
use crate::evidence::Evidence;
use crate::hyperopt::best::BestOnTest;
use crate::hyperopt::config::SearchConfig;
use crate::hyperopt::study::{EpochRecord, Study, TrialRecord};
use crate::{Error, Metrics};

mod charts;
mod format;
mod html;
pub mod universe;

pub use crate::hyperopt::ranking::{leaderboard, study_leaderboard};
pub use charts::{importances, png_of};

/// What the report found.
#[derive(Debug)]
pub struct ReportSummary {
    /// Trials, best first (complete before pruned, by validation Sharpe, ties by number).
    pub leaderboard: Vec<TrialRecord>,
    /// The best trial's test metrics (re-run by the backtest engine).
    pub best_test: Option<Metrics>,
    /// The best trial's Decimal audit.
    pub audit: Option<Result<AuditReport, Error>>,
    /// Files written.
    pub files: Vec<PathBuf>,
}

/// A leaderboard ([`leaderboard`]) as table columns: `rank`, `number`, `status`, `value` (the validation
/// Sharpe), `pruned_at` (NaN when not pruned), `test_return`, `test_sharpe`, `checkpoint`, then one column
/// per parameter (the union of the trials' names, sorted; NaN where a trial has none).
pub fn leaderboard_columns(board: &[TrialRecord]) -> Vec<(String, crate::table::Column)> {
    use crate::table::Column;
    let float = |f: &dyn Fn(&TrialRecord) -> f64| Column::Float(board.iter().map(f).collect());
    let mut out = vec![
        ("rank".to_owned(), Column::Int((1..=board.len() as i64).collect())),
        ("number".to_owned(), Column::Int(board.iter().map(|t| t.number as i64).collect())),
        ("status".to_owned(), Column::Text(board.iter().map(|t| t.status.clone()).collect())),
        ("value".to_owned(), float(&|t| t.value)),
        ("pruned_at".to_owned(), float(&|t| t.pruned_at.map_or(f64::NAN, |e| e as f64))),
        ("test_return".to_owned(), float(&|t| t.test_return)),
        ("test_sharpe".to_owned(), float(&|t| t.test_sharpe)),
        (
            "checkpoint".to_owned(),
            Column::Text(board.iter().map(|t| t.checkpoint.clone().unwrap_or_default()).collect()),
        ),
        (
            "fail_reason".to_owned(),
            Column::Text(board.iter().map(|t| t.fail_reason.clone().unwrap_or_default()).collect()),
        ),
    ];
    let names: std::collections::BTreeSet<&String> = board.iter().flat_map(|t| t.params.keys()).collect();
    for name in names {
        out.push((name.clone(), float(&|t| t.params.get(name).copied().unwrap_or(f64::NAN))));
    }
    out
}

/// What a report shows besides its study's part ([`StudyPart`]) and its best trial's ([`BestPart`]).
#[derive(Debug)]
pub struct ReportInput<'a> {
    /// The series it searched on.
    pub series: &'a Series,
    /// How the page names the data.
    pub data_label: &'a str,
    /// The search's configuration.
    pub cfg: &'a SearchConfig,
    /// How much of the answer could be luck or an artifact, and the verdict.
    pub evidence: &'a Evidence,
    /// The command that opens the study in optuna-dashboard (its storage URL masked).
    pub dashboard: &'a str,
}

/// The part of a report that reads the study alone: its leaderboard (tradesim's own trials, best first),
/// their epochs, the parameters' names, and the study's four charts as SVG with their PNGs. A job renders it
/// beside the evidence ([`crate::job::Job::run`]): nothing in it waits for the evidence or the best trial's
/// test, and it is most of a report's work.
#[derive(Debug)]
pub struct StudyPart {
    board: Vec<TrialRecord>,
    epochs: Vec<EpochRecord>,
    names: Vec<String>,
    learning: charts::LearningCurves,
    /// History, importances, parallel coordinates.
    history: String,
    importance: String,
    parallel: String,
    /// The PNGs of [`Self::svgs`], in their order.
    pngs: Vec<Vec<u8>>,
}

impl StudyPart {
    /// Reads `study` (tradesim's own trials and their epochs) and renders its charts, the PNGs at once.
    pub fn render(study: &Study, cfg: &SearchConfig) -> Result<Self, Error> {
        let board = study_leaderboard(study)?;
        let epochs = study.epochs()?;
        let names: Vec<String> = board.first().map(|t| t.params.keys().cloned().collect()).unwrap_or_default();
        let learning = charts::learning_curves(&board, &epochs)?;
        let history = charts::history_chart(&board)?;
        let (importance, parallel) = charts::parameter_charts(&board, &names, cfg);
        let mut part = Self { board, epochs, names, learning, history, importance, parallel, pngs: Vec::new() };
        part.pngs = pngs_of(&part.svgs().map(|(_, svg)| svg)).into_iter().collect::<Result<_, _>>()?;
        Ok(part)
    }

    /// The study's charts as their files' stems and SVGs, in the report's order.
    fn svgs(&self) -> [(&'static str, &String); 4] {
        [
            ("learning-curves", &self.learning.svg),
            ("history", &self.history),
            ("importances", &self.importance),
            ("parallel-coordinates", &self.parallel),
        ]
    }
}

/// The PNGs of `svgs` ([`png_of`]), each on a thread of its own ([`charts::each_on_its_thread`]).
fn pngs_of(svgs: &[&String]) -> Vec<Result<Vec<u8>, Error>> {
    charts::each_on_its_thread(svgs, "rasterizing a chart", |svg| png_of(svg))
}

/// The part of a report about the best trial on the test split: the trial
/// ([`crate::hyperopt::best::best_on_test`]), its equity and drawdown charts as SVG with their PNGs, and its
/// trades as CSV. A job renders it beside the evidence, after the trial's test.
#[derive(Debug)]
pub struct BestPart {
    best: Option<BestOnTest>,
    /// Equity, drawdown and `best-trades.csv` (none without a best trial).
    charts: Option<(charts::Drawn, charts::Drawn, String)>,
}

impl BestPart {
    /// The charts and trades of `best` (on `series`, the data searched), the two charts at once.
    pub fn render(best: Option<BestOnTest>, series: &Series) -> Result<Self, Error> {
        let charts = match &best {
            Some(b) => {
                let (equity, drawdown) = charts::equity_charts(b, series)?;
                Some((equity, drawdown, trades_csv(b, series)))
            }
            None => None,
        };
        Ok(Self { best, charts })
    }
}

/// Writes the report of `input` into `dir` from its study's part (`study`, [`StudyPart::render`] of the
/// study searched) and its best trial's (`best`, [`BestPart::render`]); the best trial's test metrics and
/// audit are handed on in the summary.
pub fn write_report(input: &ReportInput, study: StudyPart, best: BestPart, dir: &Path) -> Result<ReportSummary, Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::Output(format!("creating {}: {e}", dir.display())))?;
    let mut folder = Folder { dir, files: Vec::new(), charts: Vec::new() };
    let best_number = study.board.first().filter(|t| t.status == "complete").map(|b| b.number);
    let (json, csv) =
        leaderboard_files(&study.board, &study.epochs, &study.names, best_number, (input.data_label, input.evidence));
    folder.write("leaderboard.json", &json)?;
    folder.write("leaderboard.csv", &csv)?;
    crate::failpoint::hit("report");
    for ((stem, svg), png) in study.svgs().into_iter().zip(&study.pngs) {
        folder.write_chart(stem, svg, Some(png))?;
    }
    let StudyPart { board, names, learning, history, importance, parallel, .. } = study;
    let BestPart { best, charts: best_charts } = best;
    let (mut equity, mut drawdown) = (String::new(), String::new());
    if let Some(((e_png, e), (d_png, d), trades)) = best_charts {
        (equity, drawdown) = (e, d);
        folder.write_chart("equity", &equity, Some(&e_png))?;
        folder.write_chart("drawdown", &drawdown, Some(&d_png))?;
        folder.write("best-trades.csv", &trades)?;
    }
    let charts = html::ChartsSvg { learning, history, importance, parallel, equity, drawdown };
    let page = html::page(&html::Page {
        data_label: input.data_label,
        symbol: &input.series.symbol,
        cfg: input.cfg,
        evidence: input.evidence,
        board: &board,
        names: &names,
        best: best.as_ref(),
        charts: &charts,
        dashboard: input.dashboard,
    });
    folder.write("index.html", &page)?;
    let (best_test, audit) = best.map(|b| (b.metrics, b.audit)).unzip();
    Ok(ReportSummary { leaderboard: board, best_test, audit, files: folder.files })
}

/// The report's folder: the files written into it, and the charts whose PNGs are still to be written.
struct Folder<'a> {
    dir: &'a Path,
    files: Vec<PathBuf>,
    charts: Vec<(PathBuf, String)>,
}

impl Folder<'_> {
    /// Writes `text` into the file `name`.
    fn write(&mut self, name: &str, text: &str) -> Result<(), Error> {
        let path = self.dir.join(name);
        std::fs::write(&path, text).map_err(|e| Error::Output(format!("writing {}: {e}", path.display())))?;
        self.files.push(path);
        Ok(())
    }

    /// Writes the chart `STEM.svg` and its PNG beside it, for pasting into documents: `png` where it was
    /// rendered already, else kept to be rasterized ([`Self::rasterize`]).
    fn write_chart(&mut self, stem: &str, svg: &str, png: Option<&[u8]>) -> Result<(), Error> {
        self.write(&format!("{stem}.svg"), svg)?;
        let path = self.dir.join(format!("{stem}.png"));
        match png {
            Some(bytes) => {
                std::fs::write(&path, bytes).map_err(|e| Error::Output(format!("writing {}: {e}", path.display())))?
            }
            None => self.charts.push((path.clone(), svg.to_owned())),
        }
        self.files.push(path);
        Ok(())
    }

    /// Writes the PNG of every chart kept by [`Self::write_chart`] (the universe report's), all at once
    /// ([`pngs_of`]).
    fn rasterize(&self) -> Result<(), Error> {
        let svgs: Vec<&String> = self.charts.iter().map(|(_, svg)| svg).collect();
        for ((path, _), png) in self.charts.iter().zip(pngs_of(&svgs)) {
            std::fs::write(path, png?).map_err(|e| Error::Output(format!("writing {}: {e}", path.display())))?;
        }
        Ok(())
    }
}

/// Whether staying flat (validation score 0, `hyperopt::search::objective`) ranks above every complete trial
/// of `board`: the search found no policy better than never trading.
pub fn flat_beats_every_trial(board: &[TrialRecord]) -> bool {
    let mut complete = board.iter().filter(|t| t.status == "complete" && t.value.is_finite()).peekable();
    complete.peek().is_some() && complete.all(|t| t.value < 0.0)
}

/// `text` as one CSV field: quoted, inner quotes doubled (a reason holds commas).
fn csv_text(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// `leaderboard.json` (the trials with their epochs' validation Sharpe, the best trial `best`, the verdict
/// and the evidence) and `leaderboard.csv` (the trials, one a row, the parameters `names` last).
fn leaderboard_files(
    board: &[TrialRecord],
    epochs: &[EpochRecord],
    names: &[String],
    best: Option<u64>,
    (data_label, evidence): (&str, &crate::evidence::Evidence),
) -> (String, String) {
    let mut json_trials = Vec::with_capacity(board.len());
    let mut csv =
        format!("rank,number,status,value,test_return,test_sharpe,pruned_at,fail_reason,{}\n", names.join(","));
    for (rank, t) in board.iter().enumerate() {
        let params: serde_json::Map<String, serde_json::Value> =
            t.params.iter().map(|(k, v)| (k.clone(), crate::json::number(*v))).collect();
        let curve: Vec<serde_json::Value> =
            charts::epochs_of(epochs, t.number).iter().map(|e| crate::json::number(e.valid_sharpe)).collect();
        json_trials.push(serde_json::json!({
            "rank": rank + 1,
            "number": t.number,
            "status": t.status,
            "value": crate::json::number(t.value),
            "test_return": crate::json::number(t.test_return),
            "test_sharpe": crate::json::number(t.test_sharpe),
            "pruned_at": t.pruned_at,
            "fail_reason": t.fail_reason,
            "valid_score_by_epoch": curve,
            "params": params,
        }));
        let values: Vec<String> =
            names.iter().map(|n| t.params.get(n).map_or(String::new(), |v| v.to_string())).collect();
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{},{}",
            rank + 1,
            t.number,
            t.status,
            t.value,
            t.test_return,
            t.test_sharpe,
            t.pruned_at.map_or(String::new(), |e| e.to_string()),
            t.fail_reason.as_deref().map_or(String::new(), csv_text),
            values.join(",")
        );
    }
    let json = serde_json::json!({
        "data": data_label,
        "metric": "validation score: the validation Sharpe's one-sided 95% lower bound, 0 for no trade (last epoch)",
        "trials": json_trials,
        "best": best,
        "verdict": evidence.verdict.line,
        "baselines": evidence.baselines.as_ref().map(|b| serde_json::json!({
            "buy_and_hold_test_sharpe": crate::json::number(b.buy_and_hold_test_sharpe),
            "flat_test_sharpe": crate::json::number(b.flat_test_sharpe),
            "best_test_sharpe": crate::json::number(b.best_test_sharpe),
            "flat_valid_score": 0.0,
            "flat_beats_every_trial": flat_beats_every_trial(board),
        })),
        "evidence": crate::evidence::to_json(evidence),
    });
    (crate::json::text(&json), csv)
}

/// `best-trades.csv`: the best trial's ledger, its bars' times from `series`.
fn trades_csv(best: &BestOnTest, series: &Series) -> String {
    let time = |bar: u32| {
        series.bars.get(best.test_bars.start + bar as usize).map_or_else(String::new, |x| x.time.to_rfc3339())
    };
    crate::hyperopt::ledger::ledger_csv(best.trial, &best.trades, &time)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flat (score 0) beats every trial only when every complete trial scored below 0; pruned and failed
    /// trials do not count, and a study without a complete trial says nothing.
    #[test]
    fn flat_beats_every_trial_only_when_every_complete_trial_scores_below_zero() {
        let trial = |number: u64, status: &str, value: f64| TrialRecord { value, ..TrialRecord::ours(number, status) };
        assert!(flat_beats_every_trial(&[trial(0, "complete", -0.2), trial(1, "pruned", 3.0)]));
        assert!(!flat_beats_every_trial(&[trial(0, "complete", -0.2), trial(1, "complete", 0.1)]));
        assert!(!flat_beats_every_trial(&[trial(0, "complete", 0.0)]));
        assert!(!flat_beats_every_trial(&[trial(0, "fail", f64::NAN)]));
        assert!(!flat_beats_every_trial(&[]));
    }
}
