//! The Decimal ledger audit: one column's trades replayed in `rust_decimal` from the original Decimal prices
//! and the Decimal parameters, compared with the float (f64) path's final equity and total pnl.
//!
//! The replay takes the float ledger's decisions (entry and exit bars, sides, exit reasons) and recomputes
//! every amount exactly: fill prices, units (28 significant digits, floored for whole units), commissions
//! and cash. Exits at a bar's open (signal, breaker) or close (end of data) are supported; barrier exits
//! depend on the f64 sigma and are refused.

use crate::Error;
use std::fmt;

use num_traits::{FromPrimitive, ToPrimitive};
use rust_decimal::Decimal;

use crate::data::MarketBar;
use gpu_kernels::TrialParams;
use gpu_kernels::backtest::{Metrics, Trade};
use gpu_kernels::portfolio::ExitReason;

/// The money parameters of a column in Decimal: the API's canonical form. [`Self::to_params`] gives the
/// device's f64 parameters through `ToPrimitive`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecimalParams {
    /// Starting cash.
    pub initial_capital: Decimal,
    /// Spread as a fraction.
    pub spread: Decimal,
    /// Commission as a fraction of notional.
    pub commission: Decimal,
    /// Cash kept back on an open.
    pub cash_reserve_pct: Decimal,
    /// Floor units to whole numbers.
    pub whole_units: bool,
    /// Allow short positions.
    pub allow_short: bool,
}

impl DecimalParams {
    /// An account without a cash reserve: starting cash, spread and commission as fractions, units rule and
    /// whether SHORT opens a short.
    pub fn account(
        capital: Decimal,
        spread: Decimal,
        commission: Decimal,
        whole_units: bool,
        allow_short: bool,
    ) -> Self {
        Self { initial_capital: capital, spread, commission, cash_reserve_pct: Decimal::ZERO, whole_units, allow_short }
    }

    /// The f64 trial parameters for the device (no barriers, no breaker, reward = log return).
    pub fn to_params(&self) -> Result<TrialParams, Error> {
        let f =
            |name: &str, x: Decimal| x.to_f64().ok_or_else(|| Error::Data(format!("{name} = {x} has no f64 value")));
        Ok(TrialParams {
            spread: f("spread", self.spread)?,
            commission: f("commission", self.commission)?,
            cash_reserve_pct: f("cash_reserve_pct", self.cash_reserve_pct)?,
            whole_units: u32::from(self.whole_units),
            allow_short: u32::from(self.allow_short),
            ..TrialParams::frictionless(f("initial_capital", self.initial_capital)?)
        })
    }
}

/// The audit of one column.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditReport {
    /// Trades replayed.
    pub trades: usize,
    /// Final equity of the float path.
    pub float_final_equity: f64,
    /// Final equity replayed in Decimal.
    pub decimal_final_equity: Decimal,
    /// Total trade pnl of the float path.
    pub float_pnl: f64,
    /// Total trade pnl in Decimal.
    pub decimal_pnl: Decimal,
    /// |float - decimal| of final equity.
    pub equity_abs_diff: f64,
    /// The same relative to the Decimal final equity.
    pub equity_rel_diff: f64,
    /// |float - decimal| of total pnl.
    pub pnl_abs_diff: f64,
}

impl fmt::Display for AuditReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Decimal audit: {} trades; final equity f64 {:.6} vs Decimal {} (abs {:.3e}, rel {:.3e}); \
             total pnl f64 {:.6} vs Decimal {} (abs {:.3e})",
            self.trades,
            self.float_final_equity,
            self.decimal_final_equity.round_dp(6),
            self.equity_abs_diff,
            self.equity_rel_diff,
            self.float_pnl,
            self.decimal_pnl.round_dp(6),
            self.pnl_abs_diff
        )
    }
}

/// Replays `trades` (one column's ledger, bar indices relative to `bars`) in Decimal and compares them
/// with the float path's `metrics`.
pub fn audit_column(
    bars: &[MarketBar],
    p: &DecimalParams,
    trades: &[Trade],
    metrics: &Metrics,
) -> Result<AuditReport, Error> {
    let two = Decimal::TWO;
    let mut cash = p.initial_capital;
    let mut pnl_total = Decimal::ZERO;
    let bar = |i: u32| {
        bars.get(i as usize).ok_or_else(|| Error::Data(format!("trade at bar {i} is outside the {} bars", bars.len())))
    };
    for (k, t) in trades.iter().enumerate() {
        let reference = bar(t.entry_bar)?.open;
        let long = t.side > 0;
        let half = p.spread / two;
        let entry = if long { reference * (Decimal::ONE + half) } else { reference * (Decimal::ONE - half) };
        let mut units = (Decimal::ONE - p.cash_reserve_pct) * cash / entry;
        if p.whole_units {
            units = units.floor();
        }
        let cash_before = cash;
        let signed = if long { units } else { -units };
        cash = cash - signed * entry - p.commission * units * entry;
        let exit = match ExitReason::from_code(t.reason) {
            ExitReason::Signal | ExitReason::Breaker => Some(bar(t.exit_bar)?.open),
            ExitReason::EndOfData | ExitReason::Time | ExitReason::Bankruptcy => Some(bar(t.exit_bar)?.close),
            ExitReason::TakeProfit | ExitReason::StopLoss => None,
        };
        let exit = match exit {
            Some(reference) => {
                if long {
                    reference * (Decimal::ONE - half)
                } else {
                    reference * (Decimal::ONE + half)
                }
            }
            None => Decimal::from_f64(t.exit_price)
                .ok_or_else(|| Error::Data(format!("trade {k}: exit price {} has no Decimal value", t.exit_price)))?,
        };
        cash = cash + signed * exit - p.commission * units * exit;
        pnl_total += cash - cash_before;
    }
    let float_pnl: f64 = trades.iter().map(|t| t.pnl).sum();
    let decimal_equity = cash.to_f64().unwrap_or(f64::NAN);
    let equity_abs_diff = (metrics.final_equity - decimal_equity).abs();
    Ok(AuditReport {
        trades: trades.len(),
        float_final_equity: metrics.final_equity,
        decimal_final_equity: cash,
        float_pnl,
        decimal_pnl: pnl_total,
        equity_abs_diff,
        equity_rel_diff: equity_abs_diff / decimal_equity.abs().max(f64::MIN_POSITIVE),
        pnl_abs_diff: (float_pnl - pnl_total.to_f64().unwrap_or(f64::NAN)).abs(),
    })
}

/// A Decimal from a command-line number (parsed as written, no float in between).
pub fn parse_decimal(name: &str, text: &str) -> Result<Decimal, Error> {
    let t = text.trim();
    t.parse::<Decimal>().or_else(|_| Decimal::from_scientific(t)).map_err(|_| {
        let hint = if t.contains('%') { " (write fractions: 0.001 for 0.1%)" } else { "" };
        Error::config(format!("--{name}"), format!("`{text}` is not a number{hint}"))
    })
}
