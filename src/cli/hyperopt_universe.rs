//! `tradesim hyperopt` on a universe (a file of several symbols, all or `--symbols`): the search of
//! universe learners, its verdict, report, ledger and Decimal audit (docs/CLI.md, "A universe").

use std::time::Instant;

use indicatif::ProgressBar;

use super::progress::{budget_origin, group_thousands, style};
use crate::data::universe::Universe;
use crate::hyperopt::Progress;
use crate::hyperopt::search::universe::{accounts_per_trial, epoch_steps};
use crate::job::{Job, SearchClock};
use crate::{Backend, Error};

/// Runs the universe search of `job` on `u` with `backend` and prints what it found.
pub(super) fn run(job: &Job, backend: &Backend, u: &Universe) -> Result<(), Error> {
    let s = &job.cfg.study;
    let n = u.n_symbols();
    // A training segment is at most the training times' steps (as the search cuts it); PPO's rollouts
    // cover it.
    let (train_share, valid_share) = crate::train::DEFAULT_SPLIT;
    let train_times = crate::data::splits::time_split(0, u.n_times(), train_share, valid_share)?.train.len();
    let segment = s.segment_len.min(train_times.saturating_sub(1)).max(1);
    let steps = epoch_steps(&job.cfg, train_times);
    println!(
        "hyperopt: {} on a universe, {} trials ({} at a time, {} epochs, {} accounts x {} symbols x {} steps), TPE \
         after {} random, prune {}",
        s.algo.to_string().to_uppercase(),
        s.trials,
        s.parallel,
        s.epochs,
        accounts_per_trial(s.envs, n),
        n,
        segment,
        s.startup_trials,
        s.prune
    );
    let row_steps = accounts_per_trial(s.envs, n) * n * steps * s.epochs;
    println!("budget:   {} row steps a trial, {}", group_thousands(row_steps), budget_origin(s));
    let listed = u.symbols();
    let shown = if listed.len() > 10 { format!("{}, ...", listed[..10].join(", ")) } else { listed.join(", ") };
    println!(
        "data:     {}: {n} symbols ({shown}) on {} times; backend {}; study `{}` in {}",
        u.label(),
        u.n_times(),
        backend.info().backend,
        job.name,
        job.storage
    );
    let bar = ProgressBar::new(s.trials as u64);
    bar.set_style(style("trials {bar:30} {pos}/{len} {msg} [{elapsed_precise}]"));
    let started = Instant::now();
    let clock = SearchClock::default();
    let done = job.run_universe(backend, u, &|p| {
        clock.record(p);
        match p {
            Progress::Batch { numbers, finished } => {
                bar.set_position(*finished as u64);
                bar.set_message(format!("running {numbers:?}"));
            }
            Progress::Epoch { epoch, best, .. } => {
                bar.set_message(format!("epoch {}, best valid Sharpe {best:.2}", epoch + 1))
            }
            Progress::TrialDone { finished, .. } | Progress::BatchDone { finished } => {
                bar.set_position(*finished as u64)
            }
            Progress::Placebo { index, of } => {
                bar.reset();
                bar.set_message(format!("placebo search {index} of {of}"));
            }
            Progress::WalkForward { folds } => {
                bar.set_message(format!("walk-forward of the best configuration over {folds} folds"))
            }
            Progress::WalkForwardSearch { fold, of } => {
                bar.reset();
                bar.set_message(format!("walk-forward optimisation: the search on fold {fold} of {of}"));
            }
            _ => {}
        }
        Ok(())
    })?;
    bar.finish();
    let (train, valid, test) = &done.split;
    let total = started.elapsed().as_secs_f64();
    println!(
        "search done in {total:.1} s: {}; times: train {train:?}, validation {valid:?}, test {test:?}",
        clock
            .times(done.split_seconds)
            .breakdown(total, crate::job::side::overlapped(&done.evidence, done.side_at_once))
    );
    println!("after it: {}", done.after.line());
    if let Some(line) = crate::job::side::line(&done.evidence, done.side_at_once) {
        println!("{line}");
    }
    println!("verdict:  {}", done.evidence.verdict.line);
    println!(
        "{:>4} {:>6} {:>9} {:>12} {:>10} {:>11}",
        "rank", "trial", "status", "valid score", "test ret%", "test Sharpe"
    );
    for (rank, t) in done.leaderboard.iter().take(10).enumerate() {
        println!(
            "{:>4} {:>6} {:>9} {:>12.3} {:>10.2} {:>11.3}",
            rank + 1,
            t.number,
            t.status,
            t.value,
            100.0 * t.test_return,
            t.test_sharpe
        );
    }
    if let Some(b) = &done.evidence.baselines {
        println!("{:>4} {:>16} {:>12} {:>10} {:>11.3}", "-", "equal-weight hold", "", "", b.buy_and_hold_test_sharpe);
        println!("{:>4} {:>16} {:>12.3} {:>10.2} {:>11.3}", "-", "flat", 0.0, 0.0, b.flat_test_sharpe);
    }
    if let (Some(best), Some(m)) = (done.evidence.best_trial, &done.best_test) {
        println!(
            "best trial {best}: test walk total return {:.2}%, Sharpe {:.3}, max drawdown {:.2}%, {} side changes",
            100.0 * m.total_return,
            m.sharpe,
            100.0 * m.max_drawdown,
            m.trades
        );
    }
    if let Some(o) = &done.outputs {
        let (b, h) = (&o.best.result.metrics[0], &o.hold.result.metrics[0]);
        println!(
            "portfolio backtest of the test walk: total {:.2}%, Sharpe {:.3}, {} fills (the walk ends at equity {:.2} \
             without the end-of-data close); {}: total {:.2}%, Sharpe {:.3}",
            100.0 * b.total_return,
            b.sharpe,
            b.trades,
            o.walk_final_equity,
            o.hold.names[0],
            100.0 * h.total_return,
            h.sharpe
        );
        let top: Vec<String> = o.contributions.iter().take(5).map(|(s, c)| format!("{s} {c:+.2}")).collect();
        println!("by symbol: {}", top.join(", "));
        match &o.audit {
            Ok(a) => println!("{a}"),
            Err(e) => println!("Decimal audit not available: {e}"),
        }
    }
    print!("{}", crate::evidence::summary_text(&done.evidence));
    let index = job.report_dir.join("index.html");
    println!("report:   {}", index.display());
    for f in done.outputs.iter().flat_map(|o| o.files.iter()).filter(|f| **f != index) {
        println!("          {}", f.display());
    }
    Ok(())
}
