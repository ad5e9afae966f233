//! `tradesim hyperopt`: the main job.

use crate::Error;
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::Backend;
use crate::data::Dataset;
use crate::data::time::infer_bars_per_year;
use crate::hyperopt::report::write_report;
use crate::hyperopt::search::folder_for;
use crate::hyperopt::storage::StorageUrl;
use crate::hyperopt::{Open, Progress, SearchConfig, Study, run_search};
use crate::train::Algo;

/// The command's flags.
#[derive(Debug, Default)]
pub struct HyperoptArgs {
    /// TOML search configuration.
    pub config: Option<PathBuf>,
    /// Algorithm override.
    pub algo: Option<Algo>,
    /// Trials override.
    pub trials: Option<usize>,
    /// Parallel trials override.
    pub parallel: Option<usize>,
    /// Epochs override.
    pub epochs: Option<usize>,
    /// Seed override.
    pub seed: Option<u64>,
    /// Study file (default: `runs/<time>/study.sqlite`), shorthand for `storage = sqlite:///PATH`.
    pub study: Option<PathBuf>,
    /// Study storage URL.
    pub storage: Option<String>,
    /// Study name in the storage.
    pub study_name: String,
    /// Continue the study.
    pub resume: bool,
    /// Create the study or join it.
    pub load_if_exists: bool,
    /// Report folder (default: beside the study, `report/`).
    pub report: Option<PathBuf>,
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// The configuration of a new study: defaults, then the file, then the flags.
fn configure(args: &HyperoptArgs) -> Result<SearchConfig, Error> {
    let mut cfg = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(Error::io(path))?;
            let cfg = SearchConfig::from_toml(&text).map_err(|e| match e {
                Error::Config { key, message } => Error::config(format!("{}: {key}", path.display()), message),
                other => other,
            })?;
            if let Some(algo) = args.algo.filter(|a| *a != cfg.study.algo) {
                return Err(Error::config(
                    "--algo",
                    format!("{algo} differs from study.algo in {}: set the algorithm in the file", path.display()),
                ));
            }
            cfg
        }
        None => SearchConfig::for_algo(args.algo.unwrap_or_default()),
    };
    if let Some(n) = args.trials {
        cfg.study.trials = n;
    }
    if let Some(k) = args.parallel {
        cfg.study.parallel = k;
    }
    if let Some(e) = args.epochs {
        cfg.study.epochs = e;
    }
    if let Some(s) = args.seed {
        cfg.study.seed = s;
    }
    cfg.validate()?;
    Ok(cfg)
}

/// Runs the command.
pub fn run(
    dataset: Result<Dataset, Error>,
    symbol: Option<&str>,
    args: &HyperoptArgs,
    backends: Result<Vec<Backend>, Error>,
) -> Result<(), Error> {
    let storage = match (&args.storage, &args.study, args.resume) {
        (Some(url), _, _) => StorageUrl::parse(url)?,
        (None, Some(p), _) => StorageUrl::Sqlite(p.clone()),
        (None, None, true) => return Err(Error::config("--resume", "needs --study PATH or --storage URL")),
        (None, None, false) => {
            let stamp = chrono::Utc::now().format("%Y%m%d-%H%M%S");
            StorageUrl::Sqlite(Path::new("runs").join(format!("hyperopt-{stamp}")).join("study.sqlite"))
        }
    };
    let name = args.study_name.as_str();
    // Checkpoints and the report go beside a SQLite study; with a database, under runs/<study name>/ here.
    let dir = match &storage {
        StorageUrl::Sqlite(path) => path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf),
        StorageUrl::Postgres { .. } => Path::new("runs").join(folder_for("study", name)),
    };
    let fresh = configure(args)?;
    let fresh_json = serde_json::to_string(&fresh).map_err(|e| Error::Study(format!("configuration as JSON: {e}")))?;
    let how = match (args.resume, args.load_if_exists) {
        (true, _) => Open::Resume,
        (false, true) => Open::LoadIfExists,
        (false, false) => Open::Create,
    };
    let study = Study::open_with(&storage, name, how, &fresh_json)?;
    // A study that exists (resumed or joined) runs with its own configuration, whoever created it.
    let cfg: SearchConfig = if how != Open::Create {
        let stored: SearchConfig = serde_json::from_str(&study.config_json()?)
            .map_err(|e| Error::Study(format!("{storage}: study {name}: stored configuration: {e}")))?;
        if args.resume
            && (args.config.is_some() || args.trials.is_some() || args.parallel.is_some() || args.epochs.is_some())
        {
            eprintln!(
                "note: an existing study continues with its own configuration; --config/--trials/--parallel/--epochs \
                 are ignored"
            );
        }
        stored
    } else {
        fresh
    };
    let (dataset, backends) = (dataset?, backends?);
    let backend = backends.first().cloned().ok_or_else(|| Error::config("--device", "no backend is available"))?;
    let series = dataset.select(symbol)?;
    let bars_per_year = infer_bars_per_year(&series.bars.iter().map(|b| b.time).collect::<Vec<_>>());
    let paths = crate::hyperopt::SearchPaths {
        storage: storage.clone(),
        study_name: name.to_owned(),
        checkpoints: dir.join(folder_for("checkpoints", name)),
    };
    let report_dir = args.report.clone().unwrap_or_else(|| dir.join(folder_for("report", name)));
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
    let devices = if backends.len() > 1 { format!(" x {} devices", backends.len()) } else { String::new() };
    println!(
        "data:     {} ({}, {} bars); backend {}{devices}; study `{name}` in {storage}",
        dataset.label(),
        series.symbol,
        series.bars.len(),
        backend.info().backend,
    );
    let multi = MultiProgress::new();
    let trials_bar = multi.add(ProgressBar::new(s.trials as u64));
    trials_bar.set_style(style("trials {bar:30} {pos}/{len} {msg}"));
    let epochs_bar = multi.add(ProgressBar::new(s.epochs as u64));
    epochs_bar.set_style(style("epochs {bar:30} {pos}/{len} {msg} [{elapsed_precise}]"));
    let started = Instant::now();
    // Seconds of training, validation, setup (the splits' features, then each batch's envs and networks) and
    // test walks, summed over batches.
    let data = crate::train::SplitData::new(series, crate::train::DEFAULT_SPLIT, cfg.env.sigma_span)?;
    let timing = std::sync::Mutex::new([0.0, 0.0, started.elapsed().as_secs_f64(), 0.0]);
    drop(study);
    run_search(&backends, &data, &cfg, bars_per_year, &paths, &|p| match p {
        Progress::Batch { numbers, finished } => {
            trials_bar.set_position(*finished as u64);
            trials_bar.set_message(format!("running {numbers:?}"));
            epochs_bar.reset();
        }
        Progress::Epoch { epoch, env_steps_per_s, best, train_seconds, eval_seconds } => {
            let mut t = timing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            t[0] += train_seconds;
            t[1] += eval_seconds;
            epochs_bar.set_position(*epoch as u64 + 1);
            epochs_bar.set_message(format!("{env_steps_per_s:.2e} env-steps/s, best valid Sharpe {best:.2}"));
        }
        Progress::Trained { setup_seconds, test_seconds } => {
            let mut t = timing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            t[2] += setup_seconds;
            t[3] += test_seconds;
        }
        Progress::BatchDone { finished } => trials_bar.set_position(*finished as u64),
        Progress::Waiting { numbers } => trials_bar.set_message(format!(
            "waiting: other workers run {numbers:?} (taken over if their worker goes silent for {} s)",
            cfg.study.stale_seconds
        )),
    })?;
    trials_bar.finish();
    epochs_bar.finish();
    let study = Study::reopen(&storage, name)?;
    let dashboard = format!("optuna-dashboard {storage}  (study `{name}`)");
    let summary =
        write_report(&backend, &study, series, &data, &dataset.label(), &cfg, bars_per_year, &report_dir, &dashboard)?;
    let [train_s, eval_s, setup_s, test_s] = timing.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    let total = started.elapsed().as_secs_f64();
    println!(
        "search done in {total:.1} s: training {train_s:.2} s, validation {eval_s:.2} s, setup (features, envs, \
         networks) {setup_s:.2} s, test walks {test_s:.2} s, the rest (study, checkpoints, report) {:.2} s",
        total - train_s - eval_s - setup_s - test_s
    );
    println!(
        "{:>4} {:>6} {:>9} {:>12} {:>10} {:>11} {:>9} {:>7} {:>6}",
        "rank", "trial", "status", "valid Sharpe", "test ret%", "test Sharpe", "lr", "gamma", "hidden"
    );
    for (rank, t) in summary.leaderboard.iter().take(10).enumerate() {
        let p = |k: &str| t.params.get(k).copied().unwrap_or(f64::NAN);
        println!(
            "{:>4} {:>6} {:>9} {:>12.3} {:>10.2} {:>11.3} {:>9.2e} {:>7.3} {:>6}",
            rank + 1,
            t.number,
            t.status,
            t.value,
            100.0 * t.test_return,
            t.test_sharpe,
            p("lr"),
            p("gamma"),
            p("hidden")
        );
    }
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
    println!("report:   {}", report_dir.join("index.html").display());
    for f in &summary.files {
        println!("          {}", f.display());
    }
    Ok(())
}
