//! `tradesim train`: progress bars per epoch, a table of the trials, weights and a JSON report.

use crate::Error;
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use crate::Backend;
use crate::data::Dataset;
use crate::data::time::infer_bars_per_year;
use crate::hyperopt::config::{Budget, EnvSettings, StudyConfig};
use crate::hyperopt::plan::{EnvDecimals, LearnerParam, LearnerParams, SlotSizes, TrialPlanner};
use crate::json;
use crate::train::{Algo, Networks, TrainConfig, default_dqn, save_weights, train_dqn, train_ppo};
use crate::{DqnParams, PpoParams};

/// PPO's hidden activation (`--activation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Activation {
    /// tanh (CleanRL's `ppo.py`).
    Tanh,
    /// relu.
    Relu,
}

impl Activation {
    /// The kernels' code of the activation.
    pub fn code(self) -> u32 {
        match self {
            Self::Tanh => gpu_kernels::mlp::ACT_TANH,
            Self::Relu => gpu_kernels::mlp::ACT_RELU,
        }
    }
}

/// The flags of `tradesim train` besides the data and the device.
#[derive(Clone, Debug, clap::Args)]
pub struct TrainArgs {
    /// Algorithm.
    #[arg(long, value_enum, default_value_t = Algo::Dqn)]
    pub algo: Algo,
    /// Trials trained at once (learning rates spread around 5e-4 for DQN, 3e-4 for PPO).
    #[arg(long, default_value_t = 3)]
    pub trials: usize,
    /// Epochs.
    #[arg(long, default_value_t = 10)]
    pub epochs: usize,
    /// Envs per trial (default: 1,024 on a GPU, 256 on the CPU).
    #[arg(long)]
    pub envs: Option<usize>,
    /// Steps per env and epoch (default: 256 on a GPU, 128 on the CPU).
    #[arg(long)]
    pub segment_len: Option<usize>,
    /// Seed.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// EWMA span (bars) of the volatility sigma that sets barrier widths.
    #[arg(long, default_value_t = crate::DEFAULT_SIGMA_SPAN)]
    pub sigma_span: usize,
    /// PPO's hidden activation (CleanRL's `ppo.py` uses tanh; DQN always uses relu, as `dqn.py`).
    #[arg(long, value_enum, default_value_t = Activation::Tanh)]
    pub activation: Activation,
    /// Folder for the weights (safetensors) and the report.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Runs the command on `dataset`'s series `symbol` (its only one when `None`); `early`: its features where
/// they were computed while the backend opened.
pub fn run(
    dataset: Result<Dataset, Error>,
    symbol: Option<&str>,
    early: Option<crate::job::EarlyFeatures>,
    args: &TrainArgs,
    backend: Result<Backend, Error>,
) -> Result<(), Error> {
    let TrainArgs { algo, trials, epochs, envs, segment_len, seed, sigma_span, activation, ref out } = *args;
    let out = out.as_deref();
    let (dataset, backend) = (dataset?, backend?);
    // The budget of a trial fits the device unless given: 1,024 envs x 256 steps an epoch on a GPU (the
    // search's GPU budget), 256 x 128 on the CPU.
    let gpu = backend.is_cuda();
    let given: Vec<&str> = [("--envs", envs.is_some()), ("--segment-len", segment_len.is_some())]
        .into_iter()
        .filter_map(|(flag, set)| set.then_some(flag))
        .collect();
    let envs = envs.unwrap_or(if gpu { Budget::GPU.envs } else { 256 });
    let segment_len = segment_len.unwrap_or(if gpu { Budget::GPU.segment_len } else { 128 });
    if trials == 0 || epochs == 0 || envs == 0 || segment_len == 0 {
        return Err(Error::config("--trials/--epochs/--envs/--segment-len", "must be at least 1"));
    }
    let series = dataset.select(symbol)?;
    let bars_per_year = infer_bars_per_year(&series.bars.iter().map(|b| b.time).collect::<Vec<_>>());
    // DQN's gradient steps after every env step of the batch, as the search's budget has them; PPO on a GPU
    // as the search runs it there (docs/CLI.md, "PPO specifics"): rollouts of 64 steps, each cut into 32
    // minibatches, so its 1,024 envs' rollouts give enough updates; on the CPU CleanRL's: one rollout an
    // epoch in 4 minibatches (the parity study's setting, docs/PARITY.md).
    let shape = StudyConfig {
        algo,
        envs,
        segment_len,
        epochs,
        seed,
        grad_steps: if gpu { Budget::GPU.grad_steps } else { 1 },
        rollout_steps: if gpu { StudyConfig::default().rollout_steps } else { 0 },
        ..StudyConfig::default()
    };
    let minibatches = if gpu { 32 } else { PpoParams::default().minibatches };
    let data = match early.and_then(|e| e.take_for(series, sigma_span)) {
        Some((data, _)) => data,
        None => crate::train::SplitData::new(series, crate::train::DEFAULT_SPLIT, sigma_span)?,
    };
    let planner =
        TrialPlanner::new(&shape, EnvDecimals::parse(&EnvSettings::default())?, bars_per_year, data.train.n_bars());
    let spread = |k: usize| [1.0, 0.5, 2.0, 0.25, 4.0][k % 5];
    let envs_of = TrainConfig::default_for(trials, epochs, seed).env_params;
    let ppo = |k: usize| PpoParams {
        lr: 3e-4 * spread(k),
        hidden: 64,
        batch: 128,
        minibatches,
        // CleanRL's schedule: the learning rate falls linearly to 0 over the run's rollouts.
        anneal_rollouts: planner.rollouts() as u32,
        activation: activation.code(),
        ..PpoParams::default()
    };
    let learner = |k: usize| match algo {
        Algo::Dqn => {
            let dqn = default_dqn(epochs * segment_len);
            LearnerParam::Dqn(DqnParams { lr: dqn.lr * spread(k), ..dqn })
        }
        Algo::Ppo => LearnerParam::Ppo(ppo(k)),
    };
    let sizes = SlotSizes { hidden: 64, batch: 128, fewest_minibatches: Some(minibatches as usize) };
    let plan = planner.plan(envs_of.into_iter().enumerate().map(|(k, e)| (e, learner(k))).collect(), sizes)?;
    let cfg = &plan.train;
    let lrs: Vec<f32> = match &plan.learner {
        LearnerParams::Dqn(d) => d.iter().map(|p| p.lr).collect(),
        LearnerParams::Ppo(p) => p.iter().map(|p| p.lr).collect(),
    };
    println!(
        "train:    {}, {trials} trials x {envs} envs, {epochs} epochs, on {} ({}, {} bars), backend {}",
        algo.to_string().to_uppercase(),
        dataset.label(),
        series.symbol,
        series.bars.len(),
        backend.info().backend
    );
    println!(
        "budget:   {} env steps a trial ({envs} envs x {segment_len} steps x {epochs} epochs; {})",
        envs * segment_len * epochs,
        match (gpu, given.is_empty()) {
            (true, true) => "the GPU's defaults".to_owned(),
            (false, true) => "the CPU's defaults".to_owned(),
            (true, false) => format!("the GPU's defaults, {} as given", given.join(", ")),
            (false, false) => format!("the CPU's defaults, {} as given", given.join(", ")),
        }
    );
    let bar = ProgressBar::new(epochs as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} epoch {pos}/{len} {msg} [{elapsed_precise}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let started = Instant::now();
    let progress = |r: &crate::train::EpochReport| {
        let steps_per_s =
            (r.env_steps as f64 / (r.epoch + 1) as f64) * (trials * envs) as f64 / r.train_seconds.max(1e-9);
        let best = r.valid.iter().map(|m| m.sharpe).filter(|s| s.is_finite()).fold(f64::NAN, f64::max);
        bar.set_message(format!(
            "loss {:.4}  valid Sharpe best {best:.2}  {:.2e} env-steps/s",
            r.losses.iter().sum::<f32>() / r.losses.len() as f32,
            steps_per_s
        ));
        bar.inc(1);
        Ok(())
    };
    let label = dataset.label();
    let finish = |lines: Outcome<'_>| report(lines, &lrs, out, &label, &series.symbol);
    if let LearnerParams::Ppo(ppo) = &plan.learner {
        let trained = train_ppo(&backend, &data, cfg, ppo, progress)?;
        bar.finish();
        println!("done in {:.1} s", started.elapsed().as_secs_f64());
        finish(Outcome { epochs: &trained.epochs, test: &trained.test, agent: &trained.agent })
    } else {
        let LearnerParams::Dqn(dqn) = &plan.learner else { return Err(Error::Data("a plan without a learner".into())) };
        let trained = train_dqn(&backend, &data, cfg, dqn, progress)?;
        bar.finish();
        println!("done in {:.1} s", started.elapsed().as_secs_f64());
        finish(Outcome { epochs: &trained.epochs, test: &trained.test, agent: &trained.agent })
    }
}

/// What a training run produced, for the table and the files.
struct Outcome<'a> {
    epochs: &'a [crate::train::EpochReport],
    test: &'a [crate::Metrics],
    agent: &'a dyn Networks,
}

/// Prints the table and writes the weights and report.json into `out`.
fn report(o: Outcome<'_>, lrs: &[f32], out: Option<&Path>, label: &str, symbol: &str) -> Result<(), Error> {
    let last = o.epochs.last().ok_or_else(|| Error::Data("no epoch ran".to_owned()))?;
    println!("{} gradient steps per trial", last.grad_steps);
    println!(
        "{:>5} {:>9} {:>9} {:>12} {:>12} {:>10} {:>10}",
        "trial",
        crate::hyperopt::hyperparameters::LR.name,
        "loss",
        "valid ret%",
        "valid Sharpe",
        "test ret%",
        "test Sharpe"
    );
    // A policy that never trades has no Sharpe ratio (a constant equity has no volatility): say so.
    let sharpe = |m: &crate::Metrics| {
        if m.sharpe.is_nan() && m.trades == 0.0 { "no trades".to_owned() } else { format!("{:.3}", m.sharpe) }
    };
    for (k, lr) in lrs.iter().enumerate() {
        let (v, t) = (&last.valid[k], &o.test[k]);
        println!(
            "{k:>5} {:>9.2e} {:>9.4} {:>12.2} {:>12} {:>10.2} {:>10}",
            lr,
            last.losses[k],
            100.0 * v.total_return,
            sharpe(v),
            100.0 * t.total_return,
            sharpe(t)
        );
    }
    if last.valid.iter().chain(o.test).any(|m| m.sharpe.is_nan() && m.trades == 0.0) {
        println!(
            "no trades: the greedy policy stayed flat on that split, so its Sharpe ratio is undefined (NaN in JSON)"
        );
    }
    if let Some(dir) = out {
        let paths = save_weights(o.agent, dir)?;
        let epochs: Vec<serde_json::Value> = o
            .epochs
            .iter()
            .map(|r| {
                serde_json::json!({
                    "epoch": r.epoch,
                    "losses": r.losses.iter().map(|l| json::number(f64::from(*l))).collect::<Vec<_>>(),
                    "valid_sharpe": r.valid.iter().map(|m| json::number(m.sharpe)).collect::<Vec<_>>(),
                    "train_seconds": json::number(r.train_seconds),
                })
            })
            .collect();
        let test: Vec<serde_json::Value> = o.test.iter().map(|m| json::number(m.total_return)).collect();
        let report = dir.join("report.json");
        json::write(
            &report,
            &serde_json::json!({"data": label, "symbol": symbol, "epochs": epochs, "test_total_return": test}),
        )?;
        println!("weights:  {}", paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "));
        println!("report:   {}", report.display());
    }
    Ok(())
}
