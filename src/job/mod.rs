//! The main job as one call, for the command line and the Python package alike: the configuration
//! (defaults, then a TOML file or text, then overrides), the study (created, resumed or joined), the search
//! and the report.

mod after;
mod early;
pub mod report;
pub mod side;
mod side_work;
pub mod universe;

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::data::Dataset;
use crate::data::time::infer_bars_per_year;
use crate::evidence::Evidence;
use crate::hyperopt::config::BudgetFor;
use crate::hyperopt::search::DEFAULT_STUDY_NAME;
use crate::hyperopt::storage::StorageUrl;
use crate::hyperopt::{Open, Progress, SearchConfig, SearchPaths, Study, run_search};
use crate::train::Algo;
use crate::{Backend, Error};
pub(crate) use early::EarlyFeatures;
use report::ReportSummary;

/// What a search is asked for: the `tradesim hyperopt` flags (the CLI takes them whole; the Python package
/// fills the same struct).
#[derive(Clone, Debug, clap::Args)]
pub struct JobArgs {
    /// TOML search configuration (see `tradesim::hyperopt::config`; every key optional).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The algorithm (default dqn, or study.algo of --config).
    #[arg(long, value_enum)]
    pub algo: Option<Algo>,
    /// Trials in the study.
    #[arg(long)]
    pub trials: Option<usize>,
    /// Trials trained at once.
    #[arg(long)]
    pub parallel: Option<usize>,
    /// Epochs per trial (default: the budget's).
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Envs per trial (default: the budget's).
    #[arg(long)]
    pub envs: Option<usize>,
    /// Steps per env and epoch (default: the budget's).
    #[arg(long)]
    pub segment_len: Option<usize>,
    /// The machine the defaults of --envs, --segment-len, --epochs and --parallel are sized for (default
    /// auto: the device the search runs on; docs/CLI.md, "Budgets").
    #[arg(long, value_enum)]
    pub budget: Option<BudgetFor>,
    /// Whether the search runs on a GPU (set by the caller from the selected backend; sizes `budget = auto`).
    #[arg(skip)]
    pub gpu: bool,
    /// Study file, shorthand for --storage sqlite:///PATH (default: `runs/hyperopt-<time>/study.sqlite`).
    #[arg(long, conflicts_with = "storage")]
    pub study: Option<PathBuf>,
    /// Study storage URL as Optuna spells it: sqlite:///PATH or postgresql://USER:PASSWORD@HOST:PORT/DB (the
    /// password is masked in every message).
    #[arg(long)]
    pub storage: Option<String>,
    /// The study's name in its storage (Optuna's study_name).
    #[arg(long, default_value = DEFAULT_STUDY_NAME)]
    pub study_name: String,
    /// Continue the study (after a kill: finished trials kept, interrupted ones re-run exactly); a larger
    /// --trials adds trials.
    #[arg(long, conflicts_with = "load_if_exists")]
    pub resume: bool,
    /// Create the study, or join it when it exists (Optuna's load_if_exists: start any number of workers
    /// on one study this way).
    #[arg(long)]
    pub load_if_exists: bool,
    /// Seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Placebo searches: the same search on N surrogate series of the data with every predictable
    /// direction removed (docs/EVIDENCE.md); 19 or more can show p <= 0.05.
    #[arg(long)]
    pub placebo: Option<usize>,
    /// Retrain the best configuration on K anchored walk-forward folds and test it on each.
    #[arg(long)]
    pub walk_forward: Option<usize>,
    /// Walk-forward optimisation: on K anchored folds of the bars after the validation split, run the whole
    /// search again on each fold's past (study `NAME.wfo-K`) and test its winner on the fold.
    #[arg(long, value_name = "K")]
    pub walk_forward_search: Option<usize>,
    /// Side work run at once: placebo searches, walk-forward folds and fold searches (default: 8 on a GPU,
    /// fewer where device memory holds fewer; 1 on the CPU). Each is independent: no result depends on it.
    #[arg(long, value_name = "N")]
    pub side_searches: Option<usize>,
    /// Report folder (default: `report/` in the study's folder, `STEM-NAME/` beside a SQLite study file).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Optuna artifact store (a folder in FileSystemArtifactStore's layout, e.g. on a shared mount):
    /// each finished trial's checkpoint and test ledger are uploaded and linked to the trial
    /// (overrides `[study] artifacts`; a new study stores it, so joining workers use it too).
    #[arg(long, value_name = "DIR")]
    pub artifacts: Option<PathBuf>,
    /// TOML search configuration text and how messages name it (instead of a file; not a flag).
    #[arg(skip)]
    pub config_text: Option<(String, String)>,
}

impl Default for JobArgs {
    fn default() -> Self {
        Self {
            config: None,
            config_text: None,
            algo: None,
            trials: None,
            parallel: None,
            epochs: None,
            envs: None,
            segment_len: None,
            budget: None,
            gpu: false,
            seed: None,
            placebo: None,
            walk_forward: None,
            walk_forward_search: None,
            side_searches: None,
            study: None,
            storage: None,
            study_name: DEFAULT_STUDY_NAME.to_owned(),
            resume: false,
            load_if_exists: false,
            report: None,
            artifacts: None,
        }
    }
}

impl JobArgs {
    /// The configuration of a new study: defaults, then the file or text, then the overrides.
    pub fn configure(&self) -> Result<SearchConfig, Error> {
        let text = match (&self.config, &self.config_text) {
            (Some(path), _) => {
                Some((path.display().to_string(), std::fs::read_to_string(path).map_err(Error::io(path))?))
            }
            (None, Some((label, text))) => Some((label.clone(), text.clone())),
            (None, None) => None,
        };
        let explicit_keys = text.as_ref().map(|(_, t)| crate::hyperopt::config::study_keys(t)).unwrap_or_default();
        let mut cfg = match text {
            Some((label, text)) => {
                let cfg = SearchConfig::from_toml(&text).map_err(|e| match e {
                    Error::Config { key, message } => Error::config(format!("{label}: {key}"), message),
                    other => other,
                })?;
                if let Some(algo) = self.algo.filter(|a| *a != cfg.study.algo) {
                    return Err(Error::config(
                        "--algo",
                        format!("{algo} differs from study.algo in {label}: set the algorithm in the configuration"),
                    ));
                }
                cfg
            }
            None => SearchConfig::for_algo(self.algo.unwrap_or_default()),
        };
        if let Some(n) = self.trials {
            cfg.study.trials = n;
        }
        if let Some(b) = self.budget {
            cfg.study.budget = b;
        }
        // A budget value given as a flag replaces the file's and counts as given (the budget leaves it).
        let mut explicit = explicit_keys;
        for (key, given, field) in [
            ("parallel", self.parallel, &mut cfg.study.parallel),
            ("epochs", self.epochs, &mut cfg.study.epochs),
            ("envs", self.envs, &mut cfg.study.envs),
            ("segment_len", self.segment_len, &mut cfg.study.segment_len),
        ] {
            if let Some(v) = given {
                *field = v;
                explicit.push(key.to_owned());
            }
        }
        cfg.study.resolve_budget(self.gpu, &explicit);
        if let Some(s) = self.seed {
            cfg.study.seed = s;
        }
        if let Some(n) = self.placebo {
            cfg.study.placebo = n;
        }
        if let Some(k) = self.walk_forward {
            cfg.study.walk_forward = k;
        }
        if let Some(k) = self.walk_forward_search {
            cfg.study.walk_forward_search = k;
        }
        if let Some(dir) = &self.artifacts {
            // Stored as an absolute path, so a worker that joins from another folder (or host, with the
            // store on a shared mount) uploads to the same store without the flag.
            let dir = std::path::absolute(dir).map_err(|e| Error::config("--artifacts", e.to_string()))?;
            let text = dir.to_str().ok_or_else(|| Error::config("--artifacts", "the path is not UTF-8"))?;
            cfg.study.artifacts = Some(text.to_owned());
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// These arguments with the `--config` file read into [`JobArgs::config_text`] (named as the file), so
    /// that [`JobArgs::configure`] can be called more than once on a file that can be read only once (a
    /// pipe); unchanged where it cannot be read (`configure` then says why).
    pub fn with_config_read(self) -> Self {
        match (&self.config, &self.config_text) {
            (Some(path), None) => match std::fs::read_to_string(path) {
                Ok(text) => Self { config_text: Some((path.display().to_string(), text)), config: None, ..self },
                Err(_) => self,
            },
            _ => self,
        }
    }

    fn overrides_configuration(&self) -> bool {
        self.config.is_some()
            || self.config_text.is_some()
            || self.parallel.is_some()
            || self.epochs.is_some()
            || self.envs.is_some()
            || self.segment_len.is_some()
            || self.budget.is_some()
            || self.placebo.is_some()
            || self.walk_forward.is_some()
            || self.walk_forward_search.is_some()
    }
}

/// A study opened for a search: where it is, its configuration, where its outputs go.
#[derive(Debug)]
pub struct Job {
    /// The study's storage.
    pub storage: StorageUrl,
    /// The study's name.
    pub name: String,
    /// The configuration the search runs with (the stored one for a study that exists).
    pub cfg: SearchConfig,
    /// The folder of this study's own files (absolute): `checkpoints/`, `report/`, `placebo-I/`.
    pub folder: PathBuf,
    /// The storage, name and checkpoints folder.
    pub paths: SearchPaths,
    /// The report folder.
    pub report_dir: PathBuf,
    /// Things the caller should tell the user (e.g. overrides ignored by a resumed study).
    pub notes: Vec<String>,
    /// Side searches and folds (placebo, walk-forward, walk-forward optimisation) to run at once, at most
    /// (`--side-searches`).
    pub side_searches: usize,
}

/// What [`Job::run`] produced.
#[derive(Debug)]
pub struct JobDone {
    /// The leaderboard, the best trial's test metrics and audit, the files written.
    pub summary: ReportSummary,
    /// Seconds spent on the splits' features before the search.
    pub split_seconds: f64,
    /// The seconds the features took where they were computed before the job (while the device opened).
    pub early_features: Option<f64>,
    /// The annualization of the data.
    pub bars_per_year: f64,
    /// How much of the answer could be luck or an artifact, and the verdict.
    pub evidence: Evidence,
    /// Side searches and folds run at once at most ([`Job::side_searches`], fewer where
    /// device memory holds fewer).
    pub side_at_once: usize,
    /// Where the time after the search went.
    pub after: AfterSearch,
}

/// The wall seconds of a job's parts after its search, in order (the evidence of its trials, the side work
/// of placebo searches and folds, the report), and of the parts that ran beside them on threads of their own
/// (`beside`: the best trial's test and charts, the study's charts; the wait for them, where they end
/// later, is a part of the order).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AfterSearch {
    /// The parts one after another.
    pub parts: Vec<(&'static str, f64)>,
    /// The parts beside them.
    pub beside: Vec<(&'static str, f64)>,
}

impl AfterSearch {
    /// Runs `part`, adding its wall seconds as `name`.
    pub fn time<T>(&mut self, name: &'static str, part: impl FnOnce() -> T) -> T {
        let (out, seconds) = timed(part);
        self.parts.push((name, seconds));
        out
    }

    /// The parts as `tradesim hyperopt` prints them: `evidence 0.08 s, side work 1.52 s, ...`, then `; beside
    /// them: ...` where parts ran beside.
    pub fn line(&self) -> String {
        let list = |parts: &[(&str, f64)]| parts.iter().map(|(n, s)| format!("{n} {s:.2} s")).collect::<Vec<_>>();
        let mut line = list(&self.parts).join(", ");
        if !self.beside.is_empty() {
            line += &format!("; beside them: {}", list(&self.beside).join(", "));
        }
        line
    }
}

/// `part`'s result and its wall seconds.
pub(super) fn timed<T>(part: impl FnOnce() -> T) -> (T, f64) {
    let started = Instant::now();
    let out = part();
    (out, started.elapsed().as_secs_f64())
}

impl Job {
    /// Opens (creates, resumes or joins) the study `args` names, with its configuration.
    pub fn prepare(args: &JobArgs) -> Result<Self, Error> {
        let storage = match (&args.storage, &args.study, args.resume) {
            (Some(url), _, _) => StorageUrl::parse(url)?,
            (None, Some(p), _) => StorageUrl::Sqlite(p.clone()),
            (None, None, true) => return Err(Error::config("--resume", "needs --study PATH or --storage URL")),
            (None, None, false) => {
                let stamp = chrono::Utc::now().format("%Y%m%d-%H%M%S");
                StorageUrl::Sqlite(Path::new("runs").join(format!("hyperopt-{stamp}")).join("study.sqlite"))
            }
        };
        let name = args.study_name.clone();
        let side_searches = args.side_searches.unwrap_or(if args.gpu { side::GPU_SIDE_SEARCHES } else { 1 });
        if side_searches == 0 {
            return Err(Error::config("--side-searches", "must be at least 1"));
        }
        // The study's files go in a folder of its own, claimed before the study is created or opened.
        let folder = study_folder(&storage, &name)?;
        let owner = StudyOwner::of(&storage, &name);
        let report_dir = match &args.report {
            Some(dir) => std::path::absolute(dir).map_err(|e| Error::config("--report", e.to_string()))?,
            None => folder.join("report"),
        };
        owner.check(&folder)?;
        owner.check(&report_dir)?;
        let fresh = args.configure()?;
        let fresh_json =
            serde_json::to_string(&fresh).map_err(|e| Error::Study(format!("configuration as JSON: {e}")))?;
        let how = match (args.resume, args.load_if_exists) {
            (true, _) => Open::Resume,
            (false, true) => Open::LoadIfExists,
            (false, false) => Open::Create,
        };
        // The store this worker names, or a new study's configuration names, is created before the study: a
        // store that cannot be created leaves no study behind. (A study made by `--load-if-exists` from a
        // configuration alone opens its store after it exists: the stored configuration says which store.)
        let early = args
            .artifacts
            .clone()
            .or_else(|| fresh.study.artifacts.as_ref().filter(|_| how == Open::Create).map(PathBuf::from));
        let made = early.as_ref().filter(|dir| !dir.exists());
        if let Some(dir) = &early {
            crate::hyperopt::artifacts::ArtifactStore::new(dir)?;
        }
        let study = Study::open_with(&storage, &name, how, &fresh_json).inspect_err(|_| {
            // The study cannot be opened: a store folder made for it goes again (only while empty).
            if let Some(dir) = made {
                let _ = std::fs::remove_dir(dir);
            }
        })?;
        let mut notes = Vec::new();
        // A study that exists (resumed or joined) runs with its own configuration, whoever created it.
        let cfg: SearchConfig = if how != Open::Create {
            let mut stored: SearchConfig = serde_json::from_str(&study.config_json()?)
                .map_err(|e| Error::Study(format!("{storage}: study {name}: stored configuration: {e}")))?;
            // More trials asked of an existing study are run, as Optuna's `optimize(n_trials=...)` adds
            // trials; the study records the new count, so that every worker runs to it.
            match args.trials {
                Some(n) if n > stored.study.trials => {
                    stored.study.trials = n;
                    let json = serde_json::to_string(&stored)
                        .map_err(|e| Error::Study(format!("configuration as JSON: {e}")))?;
                    study.set_study_attr(crate::hyperopt::study::CONFIG_ATTR, json)?;
                }
                Some(n) if n < stored.study.trials => notes.push(format!(
                    "--trials {n} is below the {} trials of study `{name}`: it keeps {}",
                    stored.study.trials, stored.study.trials
                )),
                _ => {}
            }
            if args.resume && args.overrides_configuration() {
                notes.push(
                    "an existing study continues with its own configuration; --config/--parallel/--epochs/--envs/\
                     --segment-len/--budget/--placebo/--walk-forward are ignored (a larger --trials adds trials)"
                        .to_owned(),
                );
            }
            stored
        } else {
            fresh
        };
        let artifacts = args.artifacts.clone().or_else(|| cfg.study.artifacts.as_ref().map(PathBuf::from));
        let store =
            artifacts.as_deref().map(crate::hyperopt::artifacts::ArtifactStore::new).transpose().map_err(|e| {
                match e {
                    // A store this worker did not name: say where it came from.
                    Error::Output(m) if args.artifacts.is_none() && how != Open::Create => Error::Output(format!(
                        "{m} (the store of study `{name}`'s configuration; pass --artifacts DIR to use another)"
                    )),
                    other => other,
                }
            })?;
        // Named again now that the study file's folder exists (its canonical path is the identity).
        let owner = StudyOwner::of(&storage, &name);
        owner.claim(&folder)?;
        if args.report.is_some() {
            owner.claim(&report_dir)?;
        }
        let paths = SearchPaths {
            storage: storage.clone(),
            study_name: name.clone(),
            checkpoints: folder.join("checkpoints"),
            artifacts: store,
        };
        Ok(Self { storage, name, cfg, folder, paths, report_dir, notes, side_searches })
    }

    /// Runs the search on `backends` over `dataset`'s `symbol` (the only series when `None`), then writes the
    /// report. `progress` hears every event; an error from it stops the search and is returned.
    pub fn run(
        &self,
        backends: &[Backend],
        dataset: &Dataset,
        symbol: Option<&str>,
        progress: &(dyn Fn(&Progress) -> Result<(), Error> + Sync),
    ) -> Result<JobDone, Error> {
        self.run_with(backends, dataset, symbol, None, progress)
    }

    /// [`Job::run`], with the series' splits and features taken from `early` where they are this job's
    /// ([`EarlyFeatures`]; [`JobDone::early_features`] then says how long they took).
    pub(crate) fn run_with(
        &self,
        backends: &[Backend],
        dataset: &Dataset,
        symbol: Option<&str>,
        early: Option<EarlyFeatures>,
        progress: &(dyn Fn(&Progress) -> Result<(), Error> + Sync),
    ) -> Result<JobDone, Error> {
        let backend = backends.first().ok_or_else(|| Error::config("--device", "no backend is available"))?;
        let series = dataset.select(symbol)?;
        let bars_per_year = infer_bars_per_year(&series.bars.iter().map(|b| b.time).collect::<Vec<_>>());
        let started = Instant::now();
        let sigma_span = self.cfg.env.sigma_span;
        let (data, early_features) = match early.and_then(|e| e.take_for(series, sigma_span)) {
            Some((data, seconds)) => (data, Some(seconds)),
            None => (crate::train::SplitData::new(series, crate::train::DEFAULT_SPLIT, sigma_span)?, None),
        };
        let split_seconds = started.elapsed().as_secs_f64();
        let mut paths = self.paths.clone();
        if let Some(store) = &mut paths.artifacts {
            store.test_times = series.bars[data.split.test.clone()].iter().map(|b| b.time.to_rfc3339()).collect();
        }
        let at_once = side::search_then_count(backend, self.side_searches, || {
            run_search(backends, &data, &self.cfg, bars_per_year, &paths, progress)
        })?;
        let (summary, evidence, after) =
            self.after_search(backends, (dataset, series, &data, bars_per_year), at_once, progress)?;
        Ok(JobDone { summary, split_seconds, early_features, bars_per_year, evidence, side_at_once: at_once, after })
    }

    /// A search beside the study's own, on `data`: study `NAME.SUFFIX` in the same storage with the study's
    /// configuration (created or continued, so a resumed job resumes it), `attrs` set on it before it runs,
    /// its checkpoints in `SUFFIX/checkpoints` of the study's folder, and no artifacts (its trials are
    /// evidence, not answers). Returns its name and study.
    fn side_search(
        &self,
        backends: &[Backend],
        data: &crate::train::SplitData,
        suffix: &str,
        attrs: &[(&str, String)],
        bars_per_year: f64,
        progress: &(dyn Fn(&Progress) -> Result<(), Error> + Sync),
    ) -> Result<(String, Study), Error> {
        let (name, study, paths) = self.open_side_study(suffix, attrs)?;
        run_search(backends, data, &self.cfg, bars_per_year, &paths, progress)?;
        Ok((name, study))
    }

    /// Study `NAME.SUFFIX` of a side search, created or continued with the study's configuration, `attrs`
    /// set on it, and the paths its search writes: checkpoints in `SUFFIX/checkpoints` of the study's folder,
    /// no artifacts.
    fn open_side_study(&self, suffix: &str, attrs: &[(&str, String)]) -> Result<(String, Study, SearchPaths), Error> {
        let config_json =
            serde_json::to_string(&self.cfg).map_err(|e| Error::Study(format!("configuration as JSON: {e}")))?;
        let name = format!("{}.{suffix}", self.name);
        let study = Study::open_with(&self.storage, &name, Open::LoadIfExists, &config_json)?;
        for (key, value) in attrs {
            study.set_study_attr(key, value.clone())?;
        }
        let paths = SearchPaths {
            storage: self.storage.clone(),
            study_name: name.clone(),
            checkpoints: self.folder.join(suffix).join("checkpoints"),
            artifacts: None,
        };
        Ok((name, study, paths))
    }

    /// Walk-forward optimisation's fold `fold` (from 1) of the K anchored folds of the bars after the
    /// validation split ([`crate::evidence::walk_forward::folds`]): study `NAME.wfo-FOLD` runs the whole search
    /// on the fold's past `bars.0` (its last share, as the study's split has it, the validation part;
    /// features normalized on the rest) with the fold's bars `bars.1` as its test split, created or
    /// continued; its winner (the best validation score, chosen on the past only) is tested on the fold by its
    /// stored test actions.
    fn search_fold(
        &self,
        backends: &[Backend],
        series: &crate::data::Series,
        bars: &crate::evidence::walk_forward::FoldBars,
        fold: usize,
        bars_per_year: f64,
        progress: &(dyn Fn(&Progress) -> Result<(), Error> + Sync),
    ) -> Result<crate::evidence::SearchFold, Error> {
        let backend = backends.first().ok_or_else(|| Error::config("--device", "no backend is available"))?;
        let (past, test) = bars.clone();
        let data = crate::evidence::walk_forward::fold_search_data(series, past, test, self.cfg.env.sigma_span)?;
        let (name, study) = self.side_search(backends, &data, &format!("wfo-{fold}"), &[], bars_per_year, progress)?;
        crate::evidence::walk_forward::search_fold(backend, (&study, &name), &data, &self.cfg, fold, bars_per_year)
    }
}

/// The folder of study `name`'s own files, absolute: `STEM-NAME` beside a SQLite study file (so two study
/// files in one folder, or two studies in one file, never share one), `runs/DATABASE-NAME` in the working
/// directory for a PostgreSQL study. Characters of the stem and name outside `[A-Za-z0-9._-]` become `_`.
pub fn study_folder(storage: &StorageUrl, name: &str) -> Result<PathBuf, Error> {
    let folder = match storage {
        StorageUrl::Sqlite(path) => {
            let stem = path.file_stem().map_or_else(|| "study".into(), |s| s.to_string_lossy());
            let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            parent.join(format!("{}-{}", file_safe(&stem), file_safe(name)))
        }
        StorageUrl::Postgres { database, .. } => {
            Path::new("runs").join(format!("{}-{}", file_safe(database), file_safe(name)))
        }
    };
    std::path::absolute(&folder).map_err(|e| Error::Output(format!("{}: {e}", folder.display())))
}

/// `text` with characters outside `[A-Za-z0-9._-]` replaced by `_` (a file name on every system).
fn file_safe(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' }).collect()
}

/// The file that names the study a folder's files belong to.
pub const OWNER_FILE: &str = "study-owner.json";

/// The study whose files a folder holds, as [`OWNER_FILE`] records it: the storage (a SQLite file by its
/// canonical path, so every spelling of it from any working directory is one study; a PostgreSQL URL
/// without its password and options) and the study's name.
#[derive(Debug, PartialEq, Eq)]
struct StudyOwner {
    storage: String,
    study_name: String,
}

impl StudyOwner {
    fn of(storage: &StorageUrl, name: &str) -> Self {
        let storage = match storage {
            StorageUrl::Sqlite(path) => {
                let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
                let dir = std::fs::canonicalize(parent)
                    .or_else(|_| std::path::absolute(parent))
                    .unwrap_or_else(|_| parent.to_path_buf());
                let file = path.file_name().map_or_else(|| path.as_os_str().to_owned(), ToOwned::to_owned);
                format!("sqlite:///{}", dir.join(file).display())
            }
            StorageUrl::Postgres { user, host, port, database, .. } => {
                format!("postgresql://{user}@{host}:{port}/{database}")
            }
        };
        Self { storage, study_name: name.to_owned() }
    }

    /// The owner `dir` records, if any.
    fn recorded(dir: &Path) -> Result<Option<Self>, Error> {
        let path = dir.join(OWNER_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::Output(format!("{}: {e}", path.display()))),
        };
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::Output(format!("{}: not a study owner record: {e}", path.display())))?;
        let field = |k: &str| {
            v.get(k)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| Error::Output(format!("{}: field `{k}`: missing or not a string", path.display())))
        };
        Ok(Some(Self { storage: field("storage")?, study_name: field("study_name")? }))
    }

    /// Refuses `dir` when it or a folder above it holds another study's files.
    fn check(&self, dir: &Path) -> Result<(), Error> {
        for owned in dir.ancestors() {
            // A folder above that cannot be read (permissions) says nothing; `dir` itself must be readable.
            let recorded = match Self::recorded(owned) {
                Err(_) if owned != dir => None,
                other => other?,
            };
            match recorded {
                Some(other) if other != *self => {
                    return Err(Error::Output(format!(
                        "{}: holds the files of study `{}` in {}; study `{}` in {} would write over them (use \
                         another study file, study name or --report folder)",
                        owned.display(),
                        other.study_name,
                        other.storage,
                        self.study_name,
                        self.storage
                    )));
                }
                Some(_) => return Ok(()),
                None => {}
            }
        }
        Ok(())
    }

    /// Records this study as `dir`'s owner (created when missing), or refuses as [`Self::check`] does. The
    /// record is written whole beside and linked into place, so of two studies claiming one folder at once
    /// only one succeeds.
    fn claim(&self, dir: &Path) -> Result<(), Error> {
        self.check(dir)?;
        let failed = |e: std::io::Error| Error::Output(format!("{}: {e}", dir.display()));
        std::fs::create_dir_all(dir).map_err(failed)?;
        let path = dir.join(OWNER_FILE);
        if path.exists() {
            return Ok(());
        }
        let json = serde_json::json!({"storage": self.storage, "study_name": self.study_name});
        let tmp = dir.join(format!(".{OWNER_FILE}.{}-{:016x}", std::process::id(), rand::random::<u64>()));
        std::fs::write(&tmp, crate::json::text(&json)).map_err(failed)?;
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => self.check(dir),
            Err(e) => Err(failed(e)),
        }
    }
}

/// Seconds a search spent by part, summed over its batches, and its slot-epochs ([`SearchClock`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SearchTimes {
    /// Collection and training.
    pub train: f64,
    /// Validation walks and backtests.
    pub eval: f64,
    /// Setup: each batch's envs and networks.
    pub setup: f64,
    /// Setup before the batches: the study's own split (its features, normalization and price block); the
    /// side searches' splits are not timed (their time is in the rest).
    pub features: f64,
    /// Test walks and backtests.
    pub test: f64,
    /// Slot-epochs that trained a live trial.
    pub live: usize,
    /// Slot-epochs in all.
    pub slots: usize,
}

impl SearchTimes {
    /// Where a search of `total` seconds spent them, as `tradesim hyperopt` prints it after "search done in
    /// {total} s: " (the rest: the study, checkpoints and report). Where side searches ran at once
    /// (`overlapped`, [`side::overlapped`]) their parts overlap: their sum is said instead of a rest.
    pub fn breakdown(&self, total: f64, overlapped: bool) -> String {
        let parts = self.train + self.eval + self.features + self.setup + self.test;
        let rest = if overlapped {
            format!("{parts:.2} s in all, summed over searches that ran at once")
        } else {
            format!("the rest (study, checkpoints, report) {:.2} s", total - parts)
        };
        format!(
            "training {:.2} s, validation {:.2} s, setup {:.2} s (features {:.2} s, envs and networks {:.2} s), \
             test walks {:.2} s, {rest}",
            self.train,
            self.eval,
            self.features + self.setup,
            self.features,
            self.setup,
            self.test,
        )
    }
}

/// Sums a search's [`SearchTimes`] from its progress events (`record` in the listener of [`Job::run`]).
#[derive(Debug, Default)]
pub struct SearchClock(std::sync::Mutex<SearchTimes>);

impl SearchClock {
    /// Adds what `p` reports (epochs' training and validation seconds and slots, batches' setup and test).
    pub fn record(&self, p: &Progress) {
        let mut t = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match p {
            Progress::Epoch { train_seconds, eval_seconds, live, slots, .. } => {
                t.train += train_seconds;
                t.eval += eval_seconds;
                t.live += live;
                t.slots += slots;
            }
            Progress::Trained { setup_seconds, test_seconds } => {
                t.setup += setup_seconds;
                t.test += test_seconds;
            }
            _ => {}
        }
    }

    /// The sums, with the study's split seconds (`split_seconds` of the job's result) as [`SearchTimes::features`].
    pub fn times(self, split_seconds: f64) -> SearchTimes {
        let mut t = self.0.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        t.features = split_seconds;
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parts one after another, then those beside them; none beside: no second list.
    #[test]
    fn the_line_lists_the_parts_then_those_beside() {
        let mut after = AfterSearch::default();
        let seven = after.time("evidence", || 7);
        assert_eq!(seven, 7);
        after.parts.push(("report", 0.25));
        assert_eq!(after.parts[0].0, "evidence");
        assert!(after.parts[0].1 >= 0.0 && after.parts[0].1 < 1.0);
        assert_eq!(after.line(), "evidence 0.00 s, report 0.25 s");
        after.beside = vec![("the best trial's test and charts", 0.5), ("the study's charts", 0.13)];
        assert_eq!(
            after.line(),
            "evidence 0.00 s, report 0.25 s; beside them: the best trial's test and charts 0.50 s, the study's \
             charts 0.13 s"
        );
    }

    /// A study's folder is named for its file's stem and its name (characters outside `[A-Za-z0-9._-]` as
    /// `_`), absolute; a PostgreSQL study's owner record keeps no password or options.
    #[test]
    fn study_folders_and_owners_name_the_study_and_no_secret() {
        let sqlite = study_folder(&StorageUrl::Sqlite("runs/a b.sqlite".into()), "x/y").unwrap();
        assert!(sqlite.is_absolute() && sqlite.ends_with("runs/a_b-x_y"), "{}", sqlite.display());
        let url = StorageUrl::parse("postgresql://ann:s3cret@db.example:5433/trades?sslmode=require").unwrap();
        let folder = study_folder(&url, "my study").unwrap();
        assert!(folder.is_absolute() && folder.ends_with("runs/trades-my_study"), "{}", folder.display());
        let owner = StudyOwner::of(&url, "my study");
        assert_eq!(owner.storage, "postgresql://ann@db.example:5433/trades");
        assert!(!format!("{owner:?}").contains("s3cret"));
    }

    /// A folder another study owns, or a folder inside it, is refused naming both; its owner may use it.
    #[test]
    fn a_folder_is_claimed_once() {
        let dir = std::env::temp_dir().join(format!("tradesim-owner-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (a, b) = (
            StudyOwner::of(&StorageUrl::Sqlite(dir.join("a.sqlite")), "s"),
            StudyOwner::of(&StorageUrl::Sqlite(dir.join("b.sqlite")), "s"),
        );
        a.claim(&dir.join("a-s")).unwrap();
        a.claim(&dir.join("a-s")).unwrap();
        a.check(&dir.join("a-s").join("report")).unwrap();
        for inside in [dir.join("a-s"), dir.join("a-s").join("report")] {
            let message = b.claim(&inside).unwrap_err().to_string();
            assert!(message.contains("a.sqlite") && message.contains("b.sqlite"), "{message}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
