//! An independent reference backtester in Decimal: a slow, plain loop from prices to SMA signals, fills,
//! costs, sizing, barriers, the drawdown breaker, bankruptcy and the final close, written from
//! docs/ENVIRONMENT.md without calling any of the engine's code. The property tests compare the engine's
//! trade lists and equity curves (CPU and GPU) against it.

use rust_decimal::Decimal;
use rust_decimal::prelude::*;
// Why a trade ended: the engine's vocabulary of exit reasons (the codes its ledger stores), not its rules.
pub use tradesim::ExitReason;

/// One bar in Decimal; `sigma` is the volatility estimate at its close (barrier widths).
#[derive(Clone, Copy, Debug)]
pub struct OBar {
    pub open: Decimal,
    pub high: Decimal,
    pub low: Decimal,
    pub close: Decimal,
    pub sigma: Decimal,
}

/// The account's rules in Decimal (a zero multiple, hold or drawdown disables that rule).
#[derive(Clone, Copy, Debug)]
pub struct Rules {
    pub capital: Decimal,
    pub spread: Decimal,
    pub commission: Decimal,
    pub reserve: Decimal,
    pub max_drawdown: Decimal,
    pub take_profit: Decimal,
    pub stop_loss: Decimal,
    pub max_hold: u32,
    pub barrier_exits: bool,
    pub allow_short: bool,
    pub whole_units: bool,
}

impl Rules {
    /// All in from `capital` with `spread` and `commission`: no reserve, breaker or barriers; shorts and
    /// whole units.
    pub fn all_in(capital: Decimal, spread: Decimal, commission: Decimal) -> Self {
        Self {
            capital,
            spread,
            commission,
            reserve: Decimal::ZERO,
            max_drawdown: Decimal::ZERO,
            take_profit: Decimal::ZERO,
            stop_loss: Decimal::ZERO,
            max_hold: 0,
            barrier_exits: true,
            allow_short: true,
            whole_units: true,
        }
    }

    /// The engine's parameters for these rules (floats from the Decimals, `ToPrimitive`).
    pub fn to_params(self) -> tradesim::TrialParams {
        let f = |d: Decimal| d.to_f64().expect("a Decimal converts to f64");
        tradesim::TrialParams {
            spread: f(self.spread),
            commission: f(self.commission),
            cash_reserve_pct: f(self.reserve),
            max_drawdown: f(self.max_drawdown),
            take_profit_mult: f(self.take_profit),
            stop_loss_mult: f(self.stop_loss),
            max_hold_bars: self.max_hold,
            barrier_exits: u32::from(self.barrier_exits),
            allow_short: u32::from(self.allow_short),
            whole_units: u32::from(self.whole_units),
            ..tradesim::TrialParams::frictionless(f(self.capital))
        }
    }
}

/// One closed trade.
#[derive(Clone, Copy, Debug)]
pub struct OTrade {
    pub entry_bar: usize,
    pub exit_bar: usize,
    pub side: i32,
    pub units: Decimal,
    pub entry_price: Decimal,
    pub exit_price: Decimal,
    pub pnl: Decimal,
    pub costs: Decimal,
    pub exit: ExitReason,
}

/// A run: the trades in order and the equity after each bar (index 0: the start).
#[derive(Debug)]
pub struct Run {
    pub trades: Vec<OTrade>,
    pub equity: Vec<Decimal>,
}

/// The side (1 long, -1 short, 0 flat) an SMA `fast`/`slow` column targets at the close of each bar:
/// `cross` changes it only on a crossover (fast below slow at t - 1 and above at t, or the mirror) and holds
/// it otherwise, flat before the first; otherwise (state) it is the side the averages are on, flat on a tie
/// and before both windows are full. Exact: window sums in Decimal, `sum_fast x slow` against
/// `sum_slow x fast`.
pub fn sma_sides(closes: &[Decimal], fast: usize, slow: usize, cross: bool) -> Vec<i32> {
    let sign = |t: usize| -> Option<i32> {
        if t + 1 < fast.max(slow) {
            return None;
        }
        let sum = |w: usize| closes[t + 1 - w..=t].iter().copied().sum::<Decimal>();
        let (a, b) = (sum(fast) * Decimal::from(slow), sum(slow) * Decimal::from(fast));
        Some(match a.cmp(&b) {
            std::cmp::Ordering::Greater => 1,
            std::cmp::Ordering::Less => -1,
            std::cmp::Ordering::Equal => 0,
        })
    };
    let mut held = 0;
    (0..closes.len())
        .map(|t| {
            if !cross {
                return sign(t).unwrap_or(0);
            }
            if let (Some(before), Some(now)) = (t.checked_sub(1).and_then(sign), sign(t)) {
                if before < 0 && now > 0 {
                    held = 1;
                } else if before > 0 && now < 0 {
                    held = -1;
                }
            }
            held
        })
        .collect()
}

/// The open position.
struct Position {
    side: i32,
    units: Decimal,
    entry_bar: usize,
    entry_price: Decimal,
    cash_before: Decimal,
    entry_costs: Decimal,
    take_profit: Option<Decimal>,
    stop_loss: Option<Decimal>,
    expiry: Option<usize>,
}

struct Account<'a> {
    rules: &'a Rules,
    cash: Decimal,
    position: Option<Position>,
    trades: Vec<OTrade>,
}

impl Account<'_> {
    fn half_spread(&self) -> Decimal {
        self.rules.spread / Decimal::TWO
    }

    /// Closes the position around `price` on `bar`.
    fn close(&mut self, price: Decimal, bar: usize, exit: ExitReason) {
        let Some(p) = self.position.take() else { return };
        // Selling a long gets the price less the half spread; buying back a short pays it more.
        let fill = if p.side > 0 {
            price * (Decimal::ONE - self.half_spread())
        } else {
            price * (Decimal::ONE + self.half_spread())
        };
        let commission = self.rules.commission * p.units * fill;
        let signed = if p.side > 0 { p.units } else { -p.units };
        self.cash = self.cash + signed * fill - commission;
        let costs = p.units * price * self.half_spread() + commission;
        self.trades.push(OTrade {
            entry_bar: p.entry_bar,
            exit_bar: bar,
            side: p.side,
            units: p.units,
            entry_price: p.entry_price,
            exit_price: fill,
            pnl: self.cash - p.cash_before,
            costs: p.entry_costs + costs,
            exit,
        });
    }

    /// Opens `side` from flat at `open` on `bar` with barriers from `sigma`; false when it buys nothing.
    fn open(&mut self, side: i32, open: Decimal, bar: usize, sigma: Decimal) -> bool {
        let r = self.rules;
        let fill = if side > 0 {
            open * (Decimal::ONE + self.half_spread())
        } else {
            open * (Decimal::ONE - self.half_spread())
        };
        if self.cash <= Decimal::ZERO || fill <= Decimal::ZERO {
            return false;
        }
        let mut units = (Decimal::ONE - r.reserve) * self.cash / fill;
        if r.whole_units {
            units = units.floor();
        }
        if units <= Decimal::ZERO {
            return false;
        }
        let commission = r.commission * units * fill;
        let cash_before = self.cash;
        let signed = if side > 0 { units } else { -units };
        self.cash = self.cash - signed * fill - commission;
        let level = |mult: Decimal, direction: Decimal| {
            if mult > Decimal::ZERO && sigma > Decimal::ZERO {
                let l = fill * (Decimal::ONE + direction * mult * sigma);
                (l > Decimal::ZERO).then_some(l)
            } else {
                None
            }
        };
        let s = Decimal::from(side);
        self.position = Some(Position {
            side,
            units,
            entry_bar: bar,
            entry_price: fill,
            cash_before,
            entry_costs: units * open * self.half_spread() + commission,
            take_profit: level(r.take_profit, s),
            stop_loss: level(r.stop_loss, -s),
            expiry: (r.max_hold > 0).then_some(bar + r.max_hold as usize),
        });
        true
    }

    /// The barrier the open position meets on `bar` (index `u`), with its exit price: gaps at the open
    /// first (only for a position held into the bar), then the range (stop-loss first), then the expiry.
    fn barrier(&self, bar: &OBar, u: usize, gap: bool) -> Option<(ExitReason, Decimal)> {
        let p = self.position.as_ref()?;
        let long = p.side > 0;
        let (adverse, favourable) = if long { (bar.low, bar.high) } else { (bar.high, bar.low) };
        let beyond = |price: Decimal, level: Decimal, up: bool| if up { price >= level } else { price <= level };
        if p.take_profit.is_some_and(|tp| gap && beyond(bar.open, tp, long)) {
            return Some((ExitReason::TakeProfit, bar.open));
        }
        if p.stop_loss.is_some_and(|sl| gap && beyond(bar.open, sl, !long)) {
            return Some((ExitReason::StopLoss, bar.open));
        }
        if let Some(sl) = p.stop_loss.filter(|&sl| beyond(adverse, sl, !long)) {
            return Some((ExitReason::StopLoss, sl));
        }
        if let Some(tp) = p.take_profit.filter(|&tp| beyond(favourable, tp, long)) {
            return Some((ExitReason::TakeProfit, tp));
        }
        if p.expiry.is_some_and(|e| u >= e) {
            return Some((ExitReason::Time, bar.close));
        }
        None
    }

    fn equity(&self, close: Decimal) -> Decimal {
        match &self.position {
            Some(p) if p.side > 0 => self.cash + p.units * close,
            Some(p) => self.cash - p.units * close,
            None => self.cash,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Status {
    Active,
    BreakerPending,
    Halted,
    Bankrupt,
}

/// Runs the rules over bars `start..=end`: the side wanted at the close of bar t (`sides[t]`, -1 meaning
/// flat when shorts are off) is traded at the open of t + 1; barriers are checked on the rest of that bar
/// (once a barrier resolves, the position has none left); equity is marked at its close. Equity at or below
/// 1e-12 of the capital (zero, with the engine's documented slack) is bankruptcy (the position closes at
/// that close, nothing more happens); a drawdown from the peak
/// beyond the limit closes the position at the next open and halts the account. A position still open after
/// the last bar closes at its close.
pub fn run(bars: &[OBar], sides: &[i32], rules: &Rules, start: usize, end: usize) -> Run {
    let mut acc = Account { rules, cash: rules.capital, position: None, trades: Vec::new() };
    let mut equity = vec![rules.capital];
    let (mut peak, mut status, mut barriers_live) = (rules.capital, Status::Active, false);
    for t in start..end {
        let (u, bar) = (t + 1, &bars[t + 1]);
        if matches!(status, Status::Halted | Status::Bankrupt) {
            equity.push(*equity.last().unwrap());
            continue;
        }
        let pending = status == Status::BreakerPending;
        let wanted = match sides[t] {
            _ if pending => 0,
            -1 if !rules.allow_short => 0,
            s => s,
        };
        let held = acc.position.as_ref().map_or(0, |p| p.side);
        let mut opened = false;
        if wanted != held {
            acc.close(bar.open, u, if pending { ExitReason::Breaker } else { ExitReason::Signal });
            if wanted != 0 && acc.open(wanted, bar.open, u, bars[t].sigma) {
                opened = true;
                let p = acc.position.as_ref().unwrap();
                barriers_live = p.take_profit.is_some() || p.stop_loss.is_some() || p.expiry.is_some();
            }
        }
        if barriers_live && let Some((exit, price)) = acc.barrier(bar, u, !opened) {
            barriers_live = false;
            if rules.barrier_exits {
                acc.close(price, u, exit);
            }
        }
        let mut value = acc.equity(bar.close);
        peak = peak.max(value);
        // The engine's documented slack (BANKRUPTCY_SLACK): an exact zero is bankrupt whatever the rounding.
        status = if value <= rules.capital * Decimal::new(1, 12) {
            Status::Bankrupt
        } else if pending {
            Status::Halted
        } else if rules.max_drawdown > Decimal::ZERO && Decimal::ONE - value / peak > rules.max_drawdown {
            Status::BreakerPending
        } else {
            Status::Active
        };
        if status == Status::Bankrupt && acc.position.is_some() {
            acc.close(bar.close, u, ExitReason::Bankruptcy);
            value = acc.cash;
        }
        if u == end && acc.position.is_some() && status != Status::Bankrupt {
            acc.close(bar.close, u, ExitReason::EndOfData);
            value = acc.cash;
        }
        equity.push(value);
    }
    Run { trades: acc.trades, equity }
}
