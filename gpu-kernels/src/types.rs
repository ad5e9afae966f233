//! Structs shared by the host and the kernels: `#[repr(C)]`, plain old data, layout locked at compile time.

use core::mem::size_of;

/// A discrete action: the target position after the next open.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// No position.
    Flat = 0,
    /// Long `(1 - cash_reserve_pct) x equity` worth of the asset.
    Long = 1,
    /// Short the same amount; acts as [`Action::Flat`] when the trial does not allow shorts.
    Short = 2,
}

impl Action {
    /// Number of discrete actions.
    pub const COUNT: u8 = 3;

    /// The action for an action code; codes past [`Action::COUNT`] are `None`.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::Flat),
            1 => Some(Self::Long),
            2 => Some(Self::Short),
            _ => None,
        }
    }
}

/// Per-trial parameters (one hyperparameter set): execution, risk limit, triple barrier, reward.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TrialParams {
    /// Cash each env starts with.
    pub initial_capital: f64,
    /// Bid-ask spread as a fraction of the price; buys pay `s/2` above it, sells get `s/2` below it.
    pub spread: f64,
    /// Commission as a fraction of the traded notional, paid in cash.
    pub commission: f64,
    /// Share of equity kept in cash when a position is opened, in `[0, 1)`.
    pub cash_reserve_pct: f64,
    /// Drawdown from the env's equity peak that trips the circuit breaker (`0` disables it).
    pub max_drawdown: f64,
    /// Take-profit distance in units of sigma at the decision bar (`0` disables it).
    pub take_profit_mult: f64,
    /// Stop-loss distance in units of sigma at the decision bar (`0` disables it).
    pub stop_loss_mult: f64,
    /// A stop-loss touched inside a bar is a market order: it fills this fraction of the bar's range
    /// (high - low) beyond its level, never beyond the bar's extreme (`0`: at the level). A gap through the
    /// stop fills at the open.
    pub stop_slippage: f64,
    /// Reward weight of `ln(equity_{t+1} / equity_t)`.
    pub w_pnl: f64,
    /// Reward weight of `costs_{t+1} / equity_t`.
    pub w_cost: f64,
    /// Reward weight of the drawdown increase.
    pub w_drawdown: f64,
    /// Reward weight of the barrier outcome (+1 take-profit, -1 stop-loss).
    pub w_barrier: f64,
    /// `1`: SHORT opens a short position; `0`: SHORT acts as FLAT.
    pub allow_short: u32,
    /// `1`: positions are floored to whole units (an open that buys 0 units is no trade).
    pub whole_units: u32,
    /// Vertical barrier: bars after the fill bar at which an unresolved position times out (`0` disables).
    pub max_hold_bars: u32,
    /// `1`: a resolved barrier closes the position; `0`: barriers only label.
    pub barrier_exits: u32,
    /// `1`: rewards are normalized by the trial's running mean and standard deviation.
    pub normalize_reward: u32,
    /// Keeps the size a multiple of 8.
    pub _pad: u32,
    /// The trial's random-number key: every stream of the trial (weight init, exploration, replay and
    /// minibatch draws, PPO's action sampling) is keyed by it and the seed, never by the trial's position in
    /// a batch, so a trial gives the same bits alone or beside any others. `train` sets the trial index,
    /// `hyperopt` the trial number; trials with equal keys and seeds draw the same numbers.
    pub key: u64,
    /// Where the trial's replay clock starts: transitions written per trial before it began (0 in a fresh
    /// batch; a trial started in a freed slot sets it, [`crate::batch::BatchArgs::trial_head`]), so its ring
    /// positions and sample counts are those it would have alone.
    pub ring_origin: u64,
    /// Minibatches the batch had drawn before the trial's first draw (0 in a fresh batch): its sample draws
    /// are numbered from there ([`crate::batch::sample_of`]).
    pub draw_origin: u64,
}

const _: () = assert!(size_of::<TrialParams>() == 144);

impl TrialParams {
    /// No costs, reserve, risk limit or barriers; long and short; fractional units; reward = log return.
    pub const fn frictionless(initial_capital: f64) -> Self {
        Self {
            initial_capital,
            spread: 0.0,
            commission: 0.0,
            cash_reserve_pct: 0.0,
            max_drawdown: 0.0,
            take_profit_mult: 0.0,
            stop_loss_mult: 0.0,
            stop_slippage: 0.0,
            w_pnl: 1.0,
            w_cost: 0.0,
            w_drawdown: 0.0,
            w_barrier: 0.0,
            allow_short: 1,
            whole_units: 0,
            max_hold_bars: 0,
            barrier_exits: 1,
            normalize_reward: 0,
            _pad: 0,
            key: 0,
            ring_origin: 0,
            draw_origin: 0,
        }
    }
}

/// One bar of the price block: OHLC and sigma (EWMA volatility of log returns up to this bar).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Bar {
    /// Open.
    pub open: f64,
    /// High.
    pub high: f64,
    /// Low.
    pub low: f64,
    /// Close.
    pub close: f64,
    /// EWMA standard deviation of close-to-close log returns through this bar (no lookahead).
    pub sigma: f64,
}

const _: () = assert!(size_of::<Bar>() == 40);

/// Triple-barrier outcome written on the bar where a barrier resolved.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarrierLabel {
    /// Nothing resolved on this bar.
    None = 0,
    /// The take-profit barrier was touched.
    TakeProfit = 1,
    /// The stop-loss barrier was touched (also when both were, in one bar).
    StopLoss = 2,
    /// The vertical barrier expired without a touch.
    Time = 3,
}

/// [`Transition::done`]: s_{t+1} is terminal (bankruptcy or the circuit breaker): targets do not bootstrap.
pub const TERMINATED: u8 = 1;
/// [`Transition::done`]: the segment ended at s_{t+1} (its last step, or the last bar of the data): nothing
/// happened to the account, so targets bootstrap from the value of s_{t+1}.
pub const TRUNCATED: u8 = 2;

/// One compressed transition `s_t, a_t -> r_t, s_{t+1}`: the features are gathered from `bar` and
/// `bar + 1` when sampled, so only the 3 portfolio floats of each state are stored (40 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Transition {
    /// Bar t of the state (its close has been seen).
    pub bar: u32,
    /// Portfolio floats of s_t: position, open-position return, equity / initial - 1.
    pub state: [f32; 3],
    /// Portfolio floats of s_{t+1}.
    pub next_state: [f32; 3],
    /// Reward (normalized when the trial asks for it).
    pub reward: f32,
    /// Action code that took effect at t (FLAT where the breaker overrode the agent or a disallowed SHORT
    /// acted as FLAT): what the replay learns from.
    pub action: u8,
    /// How the env's run ended at s_{t+1}: 0 it continues, [`TERMINATED`] or [`TRUNCATED`].
    pub done: u8,
    /// [`BarrierLabel`] code resolved on bar t+1.
    pub label: u8,
    /// 0 for a slot written by an env that was already done (skipped by the sampler and the statistics).
    pub valid: u8,
    /// Action code the agent chose at t (PPO's ratio needs the sampled action and its probability).
    pub chosen: u8,
    /// Padding (zero).
    pub _pad: [u8; 3],
}

const _: () = assert!(size_of::<Transition>() == 40);

/// Running moments (Chan et al.): count, mean and sum of squared deviations.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Moments {
    /// Number of values.
    pub count: f64,
    /// Their mean.
    pub mean: f64,
    /// Sum of squared deviations from the mean.
    pub m2: f64,
}

const _: () = assert!(size_of::<Moments>() == 24);

/// Where an env stands in its segment.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnvStatus {
    /// Stepping normally.
    Active = 0,
    /// The drawdown limit was exceeded: the next step closes the position at the open, then the env is done.
    HaltPending = 1,
    /// Done: equity fell to zero or below.
    Bankrupt = 2,
    /// Done: the circuit breaker closed the position.
    Halted = 3,
    /// Done: the env reached the last bar of its segment.
    SegmentEnd = 4,
}

impl EnvStatus {
    /// The status for a stored code (unknown codes read as done at segment end).
    pub fn from_code(code: u32) -> Self {
        match code {
            0 => Self::Active,
            1 => Self::HaltPending,
            2 => Self::Bankrupt,
            3 => Self::Halted,
            _ => Self::SegmentEnd,
        }
    }

    /// Whether the env no longer steps.
    pub fn is_done(self) -> bool {
        !matches!(self, Self::Active | Self::HaltPending)
    }
}

/// Sentinel of [`EnvState::expiry_bar`]: no vertical barrier.
pub const NO_EXPIRY: u32 = u32::MAX;

/// The portfolio of one env after the close of bar `bar`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct EnvState {
    /// Cash (negative after costs when fully invested with no reserve; grows when shorting).
    pub cash: f64,
    /// Units held: positive long, negative short, zero flat.
    pub units: f64,
    /// `cash + units x close[bar]`.
    pub equity: f64,
    /// Highest equity seen in this segment.
    pub peak_equity: f64,
    /// Fill price of the open position (0 when flat).
    pub entry_price: f64,
    /// Spread plus commission paid by the last step.
    pub step_costs: f64,
    /// Take-profit price of the open position (0: none).
    pub take_profit: f64,
    /// Stop-loss price of the open position (0: none).
    pub stop_loss: f64,
    /// Current bar (the env has seen its close).
    pub bar: u32,
    /// Last bar of the segment: the env is done once `bar == end_bar`.
    pub end_bar: u32,
    /// -1 short, 0 flat, 1 long.
    pub position: i32,
    /// An [`EnvStatus`] code.
    pub status: u32,
    /// Bar at whose close an unresolved position times out ([`NO_EXPIRY`]: none).
    pub expiry_bar: u32,
    /// 1 while the open position's barriers are unresolved.
    pub barrier_live: u32,
    /// [`BarrierLabel`] code resolved by the last step.
    pub label: u32,
    /// Keeps the size a multiple of 8.
    pub _pad: u32,
}

const _: () = assert!(size_of::<EnvState>() == 96);

impl EnvState {
    /// A flat env at `start_bar` holding the trial's initial capital, done after `end_bar`.
    pub fn new(params: &TrialParams, start_bar: u32, end_bar: u32) -> Self {
        let status = if start_bar >= end_bar { EnvStatus::SegmentEnd } else { EnvStatus::Active };
        Self {
            cash: params.initial_capital,
            units: 0.0,
            equity: params.initial_capital,
            peak_equity: params.initial_capital,
            entry_price: 0.0,
            step_costs: 0.0,
            take_profit: 0.0,
            stop_loss: 0.0,
            bar: start_bar,
            end_bar,
            position: 0,
            status: status as u32,
            expiry_bar: NO_EXPIRY,
            barrier_live: 0,
            label: 0,
            _pad: 0,
        }
    }

    /// The env's status.
    pub fn status(&self) -> EnvStatus {
        EnvStatus::from_code(self.status)
    }

    /// Drawdown from the segment's equity peak: `1 - equity / peak` (0 at a new peak).
    pub fn drawdown(&self) -> f64 {
        if self.peak_equity > 0.0 { 1.0 - self.equity / self.peak_equity } else { 0.0 }
    }
}
