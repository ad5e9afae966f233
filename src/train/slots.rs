//! A batch whose slots take new trials at epoch boundaries ([`run_slots`]): a search's trials end (a test
//! walk of their networks) and freed slots refill, while the rest of the batch trains on.

use std::path::Path;
use std::time::Instant;

use gpu_kernels::mlp::Layout;

use super::{
    EpochReport, Learner, Networks, PendingGreedy, PreparedGreedy, SplitData, TrainConfig, prepare_greedy,
    trial_tensors,
};
use crate::{Backend, EnvBatch, EnvConfig, Error, HostError, Metrics, SimLayout, TrialParams};

/// A trial to start in a freed slot of a running batch.
#[derive(Clone, Debug)]
pub struct SlotTrial<P> {
    /// Its environment parameters (its `key` keys every random stream of the trial).
    pub env: TrialParams,
    /// Its learner's parameters.
    pub learner: P,
}

/// One trial's online network (active width) and where it sits in the parameter layout.
#[derive(Clone, Debug)]
pub struct TrialNetwork {
    /// The parameter layout of its batch.
    pub layout: Layout,
    /// Its hidden width.
    pub hidden: usize,
    /// Its parameters (`layout.params()` floats).
    pub weights: Vec<f32>,
}

impl TrialNetwork {
    /// Trial `k`'s network of `agent`, from all trials' online parameters `online`.
    pub(super) fn of(agent: &(impl Networks + ?Sized), online: &[f32], k: usize) -> Self {
        let layout = agent.net_layout();
        let n = layout.params();
        Self { layout, hidden: agent.hiddens()[k], weights: online[k * n..(k + 1) * n].to_vec() }
    }

    /// Saves it as safetensors at `path` (written beside, synced, then renamed into place: a kill leaves the
    /// old file or the new one, never a torn checkpoint).
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        let tensors = trial_tensors(&self.layout, &self.weights, self.hidden)
            .map_err(|e| Error::Output(format!("checkpoint tensors: {e}")))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = dir.join(format!(".{name}.tmp"));
        candle_core::safetensors::save(&tensors, &tmp)
            .map_err(|e| Error::Output(format!("writing {}: {e}", path.display())))?;
        std::fs::File::open(&tmp).and_then(|f| f.sync_all()).map_err(Error::io(&tmp))?;
        std::fs::rename(&tmp, path).map_err(Error::io(path))?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all(); // the rename itself, where the platform allows syncing a directory
        }
        Ok(())
    }
}

/// A trial whose run in a slot ended: it trained all its epochs, or it stopped early (pruned).
#[derive(Clone, Debug)]
pub struct EndedTrial {
    /// Its slot.
    pub slot: usize,
    /// Its key ([`TrialParams::key`]).
    pub key: u64,
    /// Epochs it trained.
    pub epochs: usize,
    /// Its greedy policy on the test split.
    pub test: Metrics,
    /// Its greedy test actions (test bars - 1).
    pub test_actions: Vec<u8>,
    /// Its online network when it ended.
    pub network: TrialNetwork,
}

/// What a batch does at its epoch boundaries (the search's slot refill; [`train_dqn`](super::train_dqn) and [`train_ppo`](super::train_ppo)
/// keep their trials to the end). Calls come in this order at each boundary: [`Self::stops`] for the live
/// slots; when some trial ends there, the [`Self::report`]s of every epoch not yet reported (in order) and
/// the ending trials' [`Self::ended`]; then [`Self::next`] for the free slots in order. At a boundary where
/// no trial ends, the previous epoch's report comes once the next epoch's training is under way (its
/// validation walk overlaps that training), or, on a GPU while no live trial [may stop](Self::may_stop),
/// later, several at once (the walks held back and launched together: [`run_slots`]).
pub trait SlotControl<P> {
    /// An epoch's validation report (per slot, with the trial it trained and that trial's own epoch:
    /// [`EpochReport::trials`]). An error stops the run.
    fn report(&mut self, report: &EpochReport) -> Result<(), Error>;
    /// Whether the trial in `slot` ends at this boundary before its last epoch (pruned).
    fn stops(&self, slot: usize) -> bool;
    /// Whether a report of the trial now in `slot` could make [`Self::stops`] true for it. Where no live
    /// trial may stop, a GPU batch holds its validation walks back and launches them together later
    /// (reports arrive later, in the same order and with the same contents).
    fn may_stop(&self, _slot: usize) -> bool {
        true
    }
    /// Whether the batch's slots start with the run's configured trials (`true`), or empty, every trial
    /// coming from [`Self::next`] (from the first boundary on).
    fn preloaded(&self) -> bool {
        true
    }
    /// A new trial for `slot`, free at the boundary before the batch's epoch `tick`; `None` leaves it idle
    /// (the batch ends when every slot is idle).
    fn next(&mut self, slot: usize, tick: usize) -> Result<Option<SlotTrial<P>>, Error>;
    /// A trial ended (after its last epoch's report).
    fn ended(&mut self, trial: EndedTrial) -> Result<(), Error>;
}

/// Seconds of training after which a batch launches the validation walks it holds back ([`run_slots`]): the
/// longest its reports wait.
pub const DEFER_SECONDS: f64 = 1.0;

/// Bytes a batch may hold for validation walks not yet launched ([`run_slots`]): their copies of the weights
/// and their envs' copies of the validation split.
pub const DEFER_BYTES: usize = 64 << 20;

/// What [`run_slots`] leaves.
#[derive(Debug)]
pub struct SlotRun<A> {
    /// The agent (its slots hold the last trials' networks).
    pub agent: A,
    /// Seconds of setup: envs and networks.
    pub setup_seconds: f64,
    /// Seconds of the test walks and backtests left after training (those that overlap training are free).
    pub test_seconds: f64,
}

/// Launches the `held` validation walks, after those `pending` (launched earlier: reports keep their order).
fn release<'a>(
    held: &mut Vec<(EpochReport, PreparedGreedy<'a>, Instant)>,
    pending: &mut Vec<(EpochReport, PendingGreedy<'a>)>,
) -> Result<(), Error> {
    for (report, walk, _) in held.drain(..) {
        pending.push((report, walk.launch()?));
    }
    Ok(())
}

/// The trials that ended at one boundary: their test walk (started then) and what they leave.
struct Ending<'a> {
    walk: PendingGreedy<'a>,
    trials: Vec<(usize, u64, usize, TrialNetwork)>,
}

/// The training loop of any learner over a batch of slots: envs on the train split, an agent from
/// `make_agent` with `cfg`'s trials in its slots, each epoch fresh segments (each trial's own epoch), one
/// learning epoch, the greedy validation; at each boundary the trials that are done (all `cfg.epochs`
/// epochs, or stopped by `ctl`) end with a greedy test walk and free their slots for `ctl`'s next trials.
///
/// Epoch e's validation walk runs (on a GPU: on its own stream, from a copy of the weights) while epoch e + 1
/// trains; it is finished and reported once that training is under way, so `ctl` hears of an epoch one
/// epoch later and a trial it stops has trained one more epoch by the boundary where it ends. At a boundary
/// where trials end, the walk is waited for first (the ended trials' last reports come before their slots
/// are refilled). The reports and their order are those of walks finished at once: the overlap only
/// changes when they arrive.
///
/// Where no live trial may stop ([`SlotControl::may_stop`]), a GPU batch only copies each epoch's weights
/// and launches the walks together at the next boundary where trials end (beside their test walk), after
/// [`DEFER_SECONDS`] of training, or once the walks held would pass [`DEFER_BYTES`]: a walk (a block per
/// trial, a bar at a time) takes longer than a short epoch's training, and walks beside training slow it
/// (the training chains fill the device in one wave).
pub fn run_slots<A: Learner>(
    backend: &Backend,
    data: &SplitData,
    cfg: &TrainConfig,
    ring_capacity: impl FnOnce(usize) -> usize,
    make_agent: impl FnOnce(&EnvBatch) -> Result<A, HostError>,
    ctl: &mut dyn SlotControl<A::Params>,
) -> Result<SlotRun<A>, Error> {
    let trials = cfg.env_params.len();
    let setup = Instant::now();
    let (train, valid, test) = (&data.train, &data.valid, &data.test);
    let segment_len = cfg.segment_len.min(train.n_bars() - 1);
    let env_cfg = EnvConfig {
        segment_len: segment_len as u32,
        ring_capacity: ring_capacity(segment_len),
        seed: cfg.seed,
        trial_groups: 1,
    };
    let layout = SimLayout::new(trials, cfg.envs)?;
    let mut env = EnvBatch::new(backend, train, &cfg.env_params, layout, env_cfg)?;
    let mut agent = make_agent(&env)?;
    let setup_seconds = setup.elapsed().as_secs_f64();
    // Per slot: the live trial's key (None: idle), the tick it started at, the epochs it trained.
    let preloaded = ctl.preloaded();
    let mut live: Vec<Option<u64>> = cfg.env_params.iter().map(|p| preloaded.then_some(p.key)).collect();
    let (mut started_at, mut trained) = (vec![0usize; trials], vec![0usize; trials]);
    let mut step = 0u64;
    // Launched validation walks, oldest first, and those held back (prepared, not launched), each with when
    // it was prepared (the first one's time bounds the hold).
    let mut pending: Vec<(EpochReport, PendingGreedy)> = Vec::new();
    let mut held: Vec<(EpochReport, PreparedGreedy, Instant)> = Vec::new();
    // A held walk keeps a copy of every trial's weights and its envs' copy of the validation split.
    let held_bytes =
        4 * trials * agent.net_layout().params() + size_of_val(valid.bars()) + size_of_val(valid.features());
    let max_held = DEFER_BYTES / held_bytes.max(1);
    let mut endings: Vec<Ending> = Vec::new();
    let mut test_seconds = 0.0;
    // Finishes the pending validations (reported to `ctl` in order), then the endings registered before.
    let settle = |pending: &mut Vec<(EpochReport, PendingGreedy)>,
                  endings: &mut Vec<Ending>,
                  ctl: &mut dyn SlotControl<A::Params>|
     -> Result<f64, Error> {
        for (mut report, walk) in pending.drain(..) {
            let started = Instant::now();
            (report.valid, report.valid_actions) = walk.finish()?;
            report.eval_seconds += started.elapsed().as_secs_f64();
            ctl.report(&report)?;
        }
        let started = Instant::now();
        for ending in endings.drain(..) {
            let (metrics, actions) = ending.walk.finish()?;
            let steps = actions.len() / metrics.len().max(1);
            for (slot, key, epochs, network) in ending.trials {
                let test_actions = actions[slot * steps..(slot + 1) * steps].to_vec();
                ctl.ended(EndedTrial { slot, key, epochs, test: metrics[slot], test_actions, network })?;
            }
        }
        Ok(started.elapsed().as_secs_f64())
    };
    for tick in 0.. {
        // The boundary: trials that are done end (a test walk of their networks now), free slots refill.
        let done: Vec<usize> =
            (0..trials).filter(|&k| live[k].is_some() && (trained[k] >= cfg.epochs || ctl.stops(k))).collect();
        if !done.is_empty() {
            let started = Instant::now();
            // The held validation walks and the test walk run together; on a GPU beside any pending
            // validation walk while the weights download (which waits for the device).
            release(&mut held, &mut pending)?;
            let walk =
                prepare_greedy(backend, &mut agent, test, env.params(), cfg.bars_per_year, cfg.seed)?.launch()?;
            let online = agent.online()?;
            let ended = done
                .iter()
                .map(|&k| (k, live[k].take().unwrap_or_default(), trained[k], TrialNetwork::of(&agent, &online, k)))
                .collect();
            endings.push(Ending { walk, trials: ended });
            test_seconds += started.elapsed().as_secs_f64();
            // Their last epoch's report and their ends come before the claims for their slots (a search
            // samples the next trials from every trial finished by then).
            test_seconds += settle(&mut pending, &mut endings, ctl)?;
        }
        for k in 0..trials {
            if live[k].is_none()
                && let Some(t) = ctl.next(k, tick)?
            {
                agent.restart_slot(k, t.learner, &mut env, t.env, cfg, step)?;
                (live[k], started_at[k], trained[k]) = (Some(t.env.key), tick, 0);
            }
        }
        if live.iter().all(Option::is_none) {
            break;
        }
        let started = Instant::now();
        env.reset_epochs(&(0..trials).map(|k| (tick - started_at[k]) as u64).collect::<Vec<_>>())?;
        agent.learn_epoch(&mut env, cfg, segment_len, &mut step)?;
        let launched = started.elapsed().as_secs_f64();
        test_seconds += settle(&mut pending, &mut endings, ctl)?;
        let started = Instant::now();
        let losses = agent.losses()?;
        let train_seconds = launched + started.elapsed().as_secs_f64();
        let started = Instant::now();
        let walk = prepare_greedy(backend, &mut agent, valid, env.params(), cfg.bars_per_year, cfg.seed)?;
        let report = EpochReport {
            epoch: tick,
            trials: (0..trials).map(|k| live[k].map(|key| (key, trained[k]))).collect(),
            env_steps: step,
            grad_steps: agent.gradient_steps(),
            losses,
            valid: Vec::new(),
            valid_actions: Vec::new(),
            train_seconds,
            eval_seconds: 0.0,
        };
        for (k, n) in trained.iter_mut().enumerate() {
            *n += usize::from(live[k].is_some());
        }
        let hold = walk.is_deferred()
            && held.len() < max_held
            && held.first().is_none_or(|h| h.2.elapsed().as_secs_f64() < DEFER_SECONDS)
            && (0..trials).all(|k| live[k].is_none() || !ctl.may_stop(k));
        let eval_seconds = started.elapsed().as_secs_f64();
        if hold {
            held.push((EpochReport { eval_seconds, ..report }, walk, started));
        } else {
            release(&mut held, &mut pending)?;
            pending.push((EpochReport { eval_seconds, ..report }, walk.launch()?));
        }
    }
    release(&mut held, &mut pending)?;
    test_seconds += settle(&mut pending, &mut endings, ctl)?;
    Ok(SlotRun { agent, setup_seconds, test_seconds })
}
