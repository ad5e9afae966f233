//! Issue 12 item 5: a trial started in a freed slot of a running batch computes what it would in a batch of
//! its own (fresh networks, optimizer state, replay ring, env segments, exploration and learning-rate
//! schedules), bit for bit, on each backend; its batch-mates do not notice.

mod common;

use std::collections::BTreeMap;

use common::assert_bitwise;
use gpu_kernels::dqn::DqnParams;
use gpu_kernels::ppo::PpoParams;
use tradesim::train::{
    EndedTrial, EpochReport, Learner, SlotControl, SlotTrial, SplitData, TrainConfig, rollout_len, run_slots,
};
use tradesim::{Backend, DqnAgent, EnvBatch, PpoAgent, TrialParams};

/// Everything a trial leaves: per own epoch (loss bits, validation Sharpe and return bits), and its end
/// (epochs, test bits, test actions, network bits).
#[derive(Debug, Default, PartialEq)]
struct Record {
    epochs: Vec<(u32, u64, u64)>,
    end: Option<End>,
}

/// A trial's end: epochs trained, test Sharpe and return bits, test actions, network bits.
type End = (usize, u64, u64, Vec<u8>, Vec<u32>);

/// A controller that stops the trial of `stop` (slot, after the report of its own epoch) and gives freed
/// slots the `queue`'s trials in order; it records every trial by key.
struct Script<P> {
    stop: Option<(usize, usize)>,
    stopped: bool,
    queue: Vec<SlotTrial<P>>,
    records: BTreeMap<u64, Record>,
    refills: Vec<(usize, usize, u64)>,
    /// Whether it says no trial may stop (a GPU batch then holds its validation walks back).
    hold: bool,
    /// Whether the slots start with the configured trials.
    preload: bool,
    /// The tick of the last `next` call, and per report that tick when the report came.
    next_tick: usize,
    report_ticks: Vec<usize>,
    /// A trial given to a slot at a tick (slot, tick, trial), besides the queue's.
    late: Option<(usize, usize, SlotTrial<P>)>,
}

impl<P> Script<P> {
    fn new(stop: Option<(usize, usize)>, queue: Vec<SlotTrial<P>>) -> Self {
        Self {
            stop,
            stopped: false,
            queue,
            records: BTreeMap::new(),
            refills: Vec::new(),
            hold: false,
            preload: true,
            next_tick: 0,
            report_ticks: Vec::new(),
            late: None,
        }
    }
}

impl<P> SlotControl<P> for Script<P> {
    fn report(&mut self, r: &EpochReport) -> Result<(), tradesim::Error> {
        self.report_ticks.push(self.next_tick);
        for (slot, t) in r.trials.iter().enumerate() {
            let Some((key, epoch)) = *t else { continue };
            let rec = self.records.entry(key).or_default();
            assert_eq!(rec.epochs.len(), epoch, "trial {key}: epochs reported in order");
            let m = &r.valid[slot];
            rec.epochs.push((r.losses[slot].to_bits(), m.sharpe.to_bits(), m.total_return.to_bits()));
            if self.stop == Some((slot, epoch)) {
                self.stopped = true;
            }
        }
        Ok(())
    }
    fn stops(&self, slot: usize) -> bool {
        self.stopped && self.stop.is_some_and(|(s, _)| s == slot) && self.refills.is_empty()
    }
    fn may_stop(&self, _: usize) -> bool {
        !self.hold
    }
    fn preloaded(&self) -> bool {
        self.preload
    }
    fn next(&mut self, slot: usize, tick: usize) -> Result<Option<SlotTrial<P>>, tradesim::Error> {
        self.next_tick = tick;
        if self.late.as_ref().is_some_and(|l| (l.0, l.1) == (slot, tick)) {
            return Ok(self.late.take().map(|l| l.2));
        }
        if self.queue.is_empty() {
            return Ok(None);
        }
        let t = self.queue.remove(0);
        self.refills.push((slot, tick, t.env.key));
        Ok(Some(t))
    }
    fn ended(&mut self, t: EndedTrial) -> Result<(), tradesim::Error> {
        let bits = t.network.weights.iter().map(|w| w.to_bits()).collect();
        let end = (t.epochs, t.test.sharpe.to_bits(), t.test.total_return.to_bits(), t.test_actions, bits);
        let rec = self.records.entry(t.key).or_default();
        assert!(rec.end.is_none(), "trial {} ended twice", t.key);
        rec.end = Some(end);
        Ok(())
    }
}

fn data() -> SplitData {
    let d = tradesim::data::embedded().unwrap();
    SplitData::new(&d.series[0], tradesim::train::DEFAULT_SPLIT, tradesim::DEFAULT_SIGMA_SPAN).unwrap()
}

/// A batch's configuration for the trials `envs` (keys and env parameters), learner sizes shared.
fn config(envs: &[TrialParams]) -> TrainConfig {
    let mut cfg = TrainConfig::default_for(envs.len(), 3, 17);
    cfg.envs = 6;
    cfg.segment_len = 32;
    cfg.hidden = 16;
    cfg.batch = 32;
    cfg.ring_capacity = 6 * 40; // not a multiple of a segment's transitions: the ring wraps mid-epoch
    cfg.warmup_steps = 5;
    cfg.train_every = 2;
    cfg.grad_steps = 2;
    cfg.rollout_steps = 16;
    cfg.env_params = envs.to_vec();
    cfg
}

fn env(key: u64, spread: f64) -> TrialParams {
    TrialParams { key, spread, normalize_reward: u32::from(key % 2 == 1), ..TrialParams::frictionless(10_000.0) }
}

fn dqn(hidden: u32, batch: u32, lr: f32) -> DqnParams {
    DqnParams { hidden, batch, lr, gamma: 0.9, eps_decay_steps: 60.0, target_every: 7, ..DqnParams::default() }
}

fn ppo(hidden: u32, minibatches: u32, lr: f32) -> PpoParams {
    PpoParams { hidden, batch: 24, minibatches, lr, epochs: 2, anneal_rollouts: 9, ..PpoParams::default() }
}

/// Runs `slots` through `run_slots` with `make`'s agent; the script's records.
fn run<A: Learner>(
    backend: &Backend,
    data: &SplitData,
    cfg: &TrainConfig,
    ring: usize,
    make: impl FnOnce(&EnvBatch) -> Result<A, tradesim::HostError>,
    mut script: Script<A::Params>,
) -> Script<A::Params> {
    run_slots(backend, data, cfg, |_| ring, make, &mut script).unwrap();
    script
}

/// The refilled trial equals itself alone; the others equal themselves in a batch without the refill.
fn check<P>(refilled: &Script<P>, alone: &Script<P>, plain: &Script<P>, new_key: u64, stopped_key: u64) {
    let got = &refilled.records[&new_key];
    let want = &alone.records[&new_key];
    assert_eq!(got.epochs.len(), 3, "the new trial trains its 3 epochs");
    assert_eq!(got.epochs, want.epochs, "trial {new_key}: epochs in the freed slot vs alone");
    let (g, w) = (got.end.as_ref().unwrap(), want.end.as_ref().unwrap());
    assert_eq!((g.0, g.1, g.2), (w.0, w.1, w.2), "trial {new_key}: test metrics");
    assert_eq!(g.3, w.3, "trial {new_key}: test actions");
    assert_bitwise("network of the refilled trial", &g.4, &w.4);
    for (key, rec) in &plain.records {
        let mine = &refilled.records[key];
        if *key == stopped_key {
            // Stopped after the report of its epoch 0: it trained one more epoch by the boundary.
            assert_eq!(mine.end.as_ref().unwrap().0, 2);
            assert_eq!(mine.epochs[..], rec.epochs[..2]);
        } else {
            assert_eq!(mine, rec, "trial {key}: a batch-mate of the refill changed");
        }
    }
    assert_ne!(got.epochs, refilled.records[&stopped_key].epochs[..], "the new trial is another trial");
}

/// The three runs of a refill check: `envs` with `params` where slot `stop.0`'s trial stops after its epoch
/// `stop.1` and `newcomer` takes the slot; the same batch without the stop; the newcomer alone.
fn three_runs<A: Learner>(
    backend: &Backend,
    (envs, params): (&[TrialParams], &[A::Params]),
    newcomer: SlotTrial<A::Params>,
    stop: (usize, usize),
    ring: impl Fn(&TrainConfig) -> usize,
    make: impl Fn(&EnvBatch, &[A::Params], &TrainConfig) -> Result<A, tradesim::HostError>,
) -> [Script<A::Params>; 3] {
    let data = data();
    let go = |envs: &[TrialParams], params: Vec<A::Params>, script| {
        let cfg = config(envs);
        run(backend, &data, &cfg, ring(&cfg), |e: &EnvBatch| make(e, &params, &cfg), script)
    };
    let key = newcomer.env.key;
    let refilled = go(envs, params.to_vec(), Script::new(Some(stop), vec![newcomer.clone()]));
    assert_eq!(refilled.refills, [(stop.0, stop.1 + 2, key)], "the slot is freed two epochs after the stop");
    let plain = go(envs, params.to_vec(), Script::new(None, Vec::new()));
    let alone = go(&[newcomer.env], vec![newcomer.learner], Script::new(None, Vec::new()));
    [refilled, alone, plain]
}

fn dqn_refill(backend: &Backend) {
    let envs = [env(0, 0.0001), env(1, 0.0002), env(2, 0.0)];
    let params = [dqn(16, 32, 1e-3), dqn(12, 20, 5e-4), dqn(8, 32, 2e-3)];
    let newcomer = SlotTrial { env: env(7, 0.00015), learner: dqn(12, 24, 7e-4) };
    let make = |e: &EnvBatch, p: &[DqnParams], c: &TrainConfig| DqnAgent::new(backend, e, p, c.hidden, c.batch, c.seed);
    let [refilled, alone, plain] = three_runs(backend, (&envs, &params), newcomer, (1, 0), |c| c.ring_capacity, make);
    check(&refilled, &alone, &plain, 7, 1);
}
test_device!(dqn_refill);

fn ppo_refill(backend: &Backend) {
    let envs = [env(3, 0.0001), env(4, 0.0002)];
    let params = [ppo(16, 4, 3e-4), ppo(8, 0, 1e-3)];
    let newcomer = SlotTrial { env: env(9, 0.0), learner: ppo(12, 4, 5e-4) };
    let make = |e: &EnvBatch, p: &[PpoParams], c: &TrainConfig| PpoAgent::new(backend, e, p, c.hidden, c.batch, c.seed);
    let ring = |c: &TrainConfig| rollout_len(c, c.segment_len) * c.envs;
    let [refilled, alone, plain] = three_runs(backend, (&envs, &params), newcomer, (0, 0), ring, make);
    check(&refilled, &alone, &plain, 9, 3);
}
test_device!(ppo_refill);

/// Where no trial may stop, a GPU batch holds its validation walks back and launches them together at the
/// boundary where a trial ends: the same reports, in the same order, with the same bits, only later. Slot 1
/// idles until a narrower trial starts in it at tick 2, while the first two epochs' walks are held (a held
/// walk keeps the sizes and weights it was prepared with); the script hears of each boundary with an idle
/// slot (`next`).
fn held_walks(backend: &Backend) {
    let data = data();
    let cfg = config(&[env(0, 0.0001), env(1, 0.0)]);
    let go = |hold: bool| {
        let mut script = Script::new(None, vec![SlotTrial { env: env(5, 0.0002), learner: dqn(12, 24, 7e-4) }]);
        (script.hold, script.preload) = (hold, false);
        script.late = Some((1, 2, SlotTrial { env: env(6, 0.0001), learner: dqn(8, 32, 2e-3) }));
        let make = |e: &EnvBatch| DqnAgent::new(backend, e, &[dqn(16, 32, 1e-3); 2], cfg.hidden, cfg.batch, cfg.seed);
        run(backend, &data, &cfg, cfg.ring_capacity, make, script)
    };
    let (launched, held) = (go(false), go(true));
    assert_eq!(held.records, launched.records, "held walks report what launched walks do");
    for key in [5, 6] {
        let epochs = &held.records[&key].epochs;
        assert_eq!(epochs.len(), 3, "trial {key}");
        assert!(held.records[&key].end.is_some(), "trial {key}");
        // Each epoch's walk saw that epoch's network: the validation results differ between epochs.
        assert!(epochs.windows(2).any(|w| (w[0].1, w[0].2) != (w[1].1, w[1].2)), "trial {key}: {epochs:?}");
    }
    // Launched: epoch e is reported while epoch e + 1 trains (after that boundary's `next`), the last one of
    // a trial at the boundary where it ends (before that boundary's `next`): ticks 0-2 (trial 5; trial 6
    // from tick 2), then 3 and 4 (trial 6).
    assert_eq!(launched.report_ticks, [1, 2, 2, 4, 4]);
    let gpu = !matches!(backend, Backend::Cpu);
    // A CPU walk is done when prepared: nothing to hold. On a GPU the walks are held to the boundaries where
    // the trials end (or launched sooner after `DEFER_SECONDS`, which reports them at the same ticks).
    assert_eq!(held.report_ticks, if gpu { [2, 2, 2, 4, 4] } else { [1, 2, 2, 4, 4] });
}
test_device!(held_walks);

/// A refill where the batch's gradient rounds and the trial's own would not line up is refused.
#[test]
fn misaligned_refills_are_refused() {
    let mut cfg = config(&[env(0, 0.0)]);
    cfg.train_every = 3;
    let err = tradesim::train::warmup_rounds(&cfg, 32).unwrap_err().to_string();
    assert!(err.contains("train_every (3)") && err.contains("segment_len"), "{err}");
    // Aligned: warm-up 5, every 3 -> the trial's first round is its step 6; the batch's rounds at its
    // steps 3 (33 + 3 = 36 is not 3k: start 33 -> 36 = 3 x 12) are skipped.
    assert_eq!(tradesim::train::warmup_rounds(&cfg, 33).unwrap(), 1);
    cfg.train_every = 1;
    cfg.warmup_steps = 0;
    assert_eq!(tradesim::train::warmup_rounds(&cfg, 64).unwrap(), 0);
    cfg.warmup_steps = 16;
    assert_eq!(tradesim::train::warmup_rounds(&cfg, 64).unwrap(), 15);
}
