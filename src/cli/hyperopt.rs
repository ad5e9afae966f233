//! `tradesim hyperopt`: the main job.

use crate::Error;
use crate::hyperopt::hyperparameters::{GAMMA, HIDDEN, LR};
use std::time::Instant;

use indicatif::{MultiProgress, ProgressBar};

use crate::Backend;
use crate::data::Dataset;
use crate::hyperopt::Progress;
use crate::job::{EarlyFeatures, Job, JobArgs, SearchClock};

use super::progress::{budget_origin, group_thousands, style};

/// Runs the command; `early`: the series' features where they were computed while the device opened.
pub fn run(
    dataset: Result<Dataset, Error>,
    symbol: Option<&str>,
    early: Option<EarlyFeatures>,
    args: &JobArgs,
    backends: Result<Vec<Backend>, Error>,
) -> Result<(), Error> {
    // `budget = auto` sizes a new study for the device the search runs on.
    let gpu = backends.as_ref().is_ok_and(|b| b.first().is_some_and(Backend::is_cuda));
    let job = Job::prepare(&JobArgs { gpu, ..args.clone() })?;
    for note in &job.notes {
        eprintln!("note: {note}");
    }
    let (dataset, backends) = (dataset?, backends?);
    let backend = backends.first().cloned().ok_or_else(|| Error::config("--device", "no backend is available"))?;
    if symbol.is_none() && dataset.series.len() > 1 {
        let universe = crate::data::universe::Universe::new(dataset, None)?;
        return super::hyperopt_universe::run(&job, &backend, &universe);
    }
    let series = dataset.select(symbol)?;
    let (cfg, name, storage, report_dir) = (&job.cfg, &job.name, &job.storage, &job.report_dir);
    let s = &cfg.study;
    println!(
        "hyperopt: {}, {} trials ({} at a time, {} epochs, {} envs x {} steps), TPE after {} random, prune {}",
        s.algo.to_string().to_uppercase(),
        s.trials,
        s.parallel,
        s.epochs,
        s.envs,
        s.segment_len,
        s.startup_trials,
        s.prune
    );
    println!("budget:   {} env steps a trial, {}", group_thousands(s.env_steps()), budget_origin(s));
    let devices = if backends.len() > 1 { format!(" x {} devices", backends.len()) } else { String::new() };
    println!(
        "data:     {} ({}, {} bars); backend {}{devices}; study `{name}` in {storage}",
        dataset.label(),
        series.symbol,
        series.bars.len(),
        backend.info().backend,
    );
    println!("files:    {} (checkpoints, report: this study's own)", job.folder.display());
    let multi = MultiProgress::new();
    let trials_bar = multi.add(ProgressBar::new(s.trials as u64));
    trials_bar.set_style(style("trials {bar:30} {pos}/{len} {msg}"));
    let epochs_bar = multi.add(ProgressBar::new(s.epochs as u64));
    epochs_bar.set_style(style("epochs {bar:30} {pos}/{len} {msg} [{elapsed_precise}]"));
    let started = Instant::now();
    let clock = SearchClock::default();
    let done = job.run_with(&backends, &dataset, symbol, early, &|p| {
        clock.record(p);
        match p {
            Progress::Batch { numbers, finished } => {
                trials_bar.set_position(*finished as u64);
                trials_bar.set_message(format!("running {numbers:?}"));
                epochs_bar.reset();
                epochs_bar.set_length(cfg.study.epochs as u64);
            }
            Progress::Epoch { epoch, env_steps_per_s, best, .. } => {
                // A batch whose freed slots took new trials runs more epochs than a trial's.
                if *epoch as u64 + 1 > epochs_bar.length().unwrap_or(0) {
                    epochs_bar.set_length(*epoch as u64 + 1);
                }
                epochs_bar.set_position(*epoch as u64 + 1);
                epochs_bar.set_message(format!("{env_steps_per_s:.2e} env-steps/s, best valid Sharpe {best:.2}"));
            }
            Progress::Trained { .. } => {}
            Progress::Refill { slot, number } => trials_bar.set_message(format!("slot {slot} took trial {number}")),
            Progress::TrialDone { finished, .. } | Progress::BatchDone { finished } => {
                trials_bar.set_position(*finished as u64)
            }
            Progress::Placebo { index, of } => {
                trials_bar.reset();
                trials_bar.set_message(format!("placebo search {index} of {of}"));
            }
            Progress::WalkForward { folds } => {
                trials_bar.set_message(format!("walk-forward of the best configuration over {folds} folds"))
            }
            Progress::WalkForwardSearch { fold, of } => {
                trials_bar.reset();
                trials_bar.set_message(format!("walk-forward optimisation: the search on fold {fold} of {of}"));
            }
            Progress::Waiting { numbers } => trials_bar.set_message(format!(
                "waiting: other workers run {numbers:?} (taken over if their worker goes silent for {} s)",
                cfg.study.stale_seconds
            )),
        }
        Ok(())
    })?;
    trials_bar.finish();
    epochs_bar.finish();
    let times = clock.times(done.split_seconds);
    let evidence = done.evidence;
    let summary = done.summary;
    let total = started.elapsed().as_secs_f64();
    let overlapped = crate::job::side::overlapped(&evidence, done.side_at_once);
    if let Some(seconds) = done.early_features {
        println!(
            "features: {seconds:.2} s, computed once the data was loaded, beside the backend's opening (not in the \
             search's time)"
        );
    }
    println!("search done in {total:.1} s: {}", times.breakdown(total, overlapped));
    println!("after it: {}", done.after.line());
    if let Some(line) = crate::job::side::line(&evidence, done.side_at_once) {
        println!("{line}");
    }
    println!("verdict:  {}", evidence.verdict.line);
    if times.slots > 0 {
        println!(
            "slots: {} of {} slot-epochs trained a live trial ({:.0}%; a slot idles once its trial ended and no \
             trial is left to claim)",
            times.live,
            times.slots,
            100.0 * times.live as f64 / times.slots as f64
        );
    }
    print_leaderboard(&summary.leaderboard, &evidence);
    if let (Some(best), Some(m)) = (summary.leaderboard.first(), &summary.best_test) {
        println!(
            "best trial {}: test total return {:.2}%, Sharpe {:.3}, max drawdown {:.2}%, {} trades",
            best.number,
            100.0 * m.total_return,
            m.sharpe,
            100.0 * m.max_drawdown,
            m.trades
        );
    }
    match &summary.audit {
        Some(Ok(a)) => println!("{a}"),
        Some(Err(e)) => println!("Decimal audit not available: {e}"),
        None => {}
    }
    print!("{}", crate::evidence::summary_text(&evidence));
    println!("report:   {}", report_dir.join("index.html").display());
    for f in &summary.files {
        println!("          {}", f.display());
    }
    Ok(())
}

/// The first ten trials of the leaderboard, buy-and-hold's and flat's rows, and whether flat ranks first.
fn print_leaderboard(leaderboard: &[crate::hyperopt::study::TrialRecord], evidence: &crate::evidence::Evidence) {
    println!(
        "{:>4} {:>6} {:>9} {:>12} {:>10} {:>11} {:>9} {:>7} {:>6}",
        "rank", "trial", "status", "valid score", "test ret%", "test Sharpe", LR.name, GAMMA.name, HIDDEN.name
    );
    for (rank, t) in leaderboard.iter().take(10).enumerate() {
        let p = |k: &str| t.params.get(k).copied().unwrap_or(f64::NAN);
        println!(
            "{:>4} {:>6} {:>9} {:>12.3} {:>10.2} {:>11.3} {:>9.2e} {:>7.3} {:>6}",
            rank + 1,
            t.number,
            t.status,
            t.value,
            100.0 * t.test_return,
            t.test_sharpe,
            p(LR.name),
            p(GAMMA.name),
            p(HIDDEN.name)
        );
    }
    if let Some(b) = &evidence.baselines {
        println!("{:>4} {:>16} {:>12} {:>10} {:>11.3}", "-", "buy-and-hold", "", "", b.buy_and_hold_test_sharpe);
        println!("{:>4} {:>16} {:>12.3} {:>10.2} {:>11.3}", "-", "flat", 0.0, 0.0, b.flat_test_sharpe);
    }
    if crate::job::report::flat_beats_every_trial(leaderboard) {
        println!(
            "flat:     never trading (validation score 0) ranks above every trial: the search found no policy better \
             than staying out"
        );
    }
}
