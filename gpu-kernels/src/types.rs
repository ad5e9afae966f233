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

/// Per-trial execution parameters (one hyperparameter set).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrialParams {
    /// Cash each env starts with.
    pub initial_capital: f64,
    /// Bid-ask spread as a fraction of the open; buys pay `s/2` above it, sells get `s/2` below it.
    pub spread: f64,
    /// Commission as a fraction of the traded notional, paid in cash.
    pub commission: f64,
    /// Share of equity kept in cash when a position is opened, in `[0, 1)`.
    pub cash_reserve_pct: f64,
    /// Drawdown from the env's equity peak that trips the circuit breaker (`0` disables it).
    pub max_drawdown: f64,
    /// `1`: SHORT opens a short position; `0`: SHORT acts as FLAT.
    pub allow_short: u32,
    /// `1`: positions are floored to whole units (an open that buys 0 units is no trade).
    pub whole_units: u32,
}

const _: () = assert!(size_of::<TrialParams>() == 48);

impl TrialParams {
    /// Parameters with no costs, no reserve, no risk limit, long and short, fractional units.
    pub const fn frictionless(initial_capital: f64) -> Self {
        Self {
            initial_capital,
            spread: 0.0,
            commission: 0.0,
            cash_reserve_pct: 0.0,
            max_drawdown: 0.0,
            allow_short: 1,
            whole_units: 0,
        }
    }
}

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

/// The portfolio of one env after the close of bar `bar`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
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
    /// Current bar (the env has seen its close).
    pub bar: u32,
    /// Last bar of the segment: the env is done once `bar == end_bar`.
    pub end_bar: u32,
    /// -1 short, 0 flat, 1 long.
    pub position: i32,
    /// An [`EnvStatus`] code.
    pub status: u32,
}

const _: () = assert!(size_of::<EnvState>() == 64);

impl EnvState {
    /// A flat env at `start_bar` holding the trial's initial capital, done after `end_bar`.
    pub fn new(params: &TrialParams, start_bar: u32, end_bar: u32) -> Self {
        let status = if start_bar >= end_bar {
            EnvStatus::SegmentEnd
        } else {
            EnvStatus::Active
        };
        Self {
            cash: params.initial_capital,
            units: 0.0,
            equity: params.initial_capital,
            peak_equity: params.initial_capital,
            entry_price: 0.0,
            step_costs: 0.0,
            bar: start_bar,
            end_bar,
            position: 0,
            status: status as u32,
        }
    }

    /// The env's status.
    pub fn status(&self) -> EnvStatus {
        EnvStatus::from_code(self.status)
    }

    /// Drawdown from the segment's equity peak: `1 - equity / peak` (0 at a new peak).
    pub fn drawdown(&self) -> f64 {
        if self.peak_equity > 0.0 {
            1.0 - self.equity / self.peak_equity
        } else {
            0.0
        }
    }
}
