//! The report of a large study, timed (`scripts/scale-postgres.sh --report`, issue 54 item 5): writes the
//! HTML report, `leaderboard.json` and `leaderboard.csv` of an existing study into a folder and prints the
//! seconds the study's part and `write_report` took (the study read included). The study's evidence is
//! not assessed here (its trials of `examples/claims.rs` have no returns): the report shows a verdict line
//! saying so, and the embedded default data as its series.
//!
//! Usage: `report_scale STORAGE_URL STUDY_NAME DIR` (the storage URL from the environment variable
//! `TRADESIM_STORAGE` when STORAGE_URL is `-`, so that its password stays off the command line).

use std::time::Instant;

use tradesim::evidence::{Evidence, PboUnavailable, Verdict};
use tradesim::hyperopt::SearchConfig;
use tradesim::hyperopt::storage::StorageUrl;
use tradesim::hyperopt::study::Study;
use tradesim::job::report::{BestPart, ReportInput, StudyPart, write_report};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: report_scale STORAGE_URL STUDY_NAME DIR".into());
    }
    let url = if args[1] == "-" { std::env::var("TRADESIM_STORAGE")? } else { args[1].clone() };
    let storage = StorageUrl::parse(&url)?;
    let dataset = tradesim::data::embedded().map_err(|e| format!("{e:?}"))?;
    let series = &dataset.series[0];
    let started = Instant::now();
    let study = Study::reopen(&storage, &args[2])?;
    let cfg: SearchConfig = serde_json::from_str(&study.config_json()?)?;
    let none = Verdict { evidence: false, line: "no evidence: not assessed (a timing of the report)".to_owned() };
    let evidence = Evidence {
        best_trial: None,
        valid: None,
        test: None,
        test_dsr_as_searched: None,
        baselines: None,
        spa_valid: None,
        spa_test: None,
        walk_forward_unseen: None,
        pbo: Err(PboUnavailable::TooFewTrials(0)),
        placebo: None,
        walk_forward: Vec::new(),
        walk_forward_search: Vec::new(),
        walk_forward_search_oos: None,
        barrier_floor_mult: 0.0,
        verdict: none.clone(),
        verdict_before: none,
    };
    let dashboard = format!("optuna-dashboard {storage}");
    let input = ReportInput { series, data_label: "embedded", cfg: &cfg, evidence: &evidence, dashboard: &dashboard };
    let (part, best) = (StudyPart::render(&study, &cfg)?, BestPart::render(None, series)?);
    write_report(&input, part, best, std::path::Path::new(&args[3]))?;
    println!("{:.3}", started.elapsed().as_secs_f64());
    Ok(())
}
