//! The Decimal audit of a portfolio: its fills replayed in `rust_decimal` from the universe's Decimal prices,
//! the Decimal weights and the Decimal account, compared with the float (f64) path.
//!
//! The replay takes the float ledger's decisions (which symbols filled at which bar, in which order, and
//! whether the cash limited a purchase) and recomputes every amount exactly: the account's value at the
//! open, each order's units (`weight x value / open - units`, floored toward zero for whole units; a limited
//! purchase `cash / (1 + c) / fill`), fill prices, commissions, cash, and the final equity at the last
//! closes (a symbol without a bar at its last close before).

use std::fmt;

use rust_decimal::Decimal;
use rust_decimal::prelude::*;

use crate::audit::DecimalParams;
use crate::data::universe::Universe;
use crate::data::weights::TargetWeights;
use crate::{AccountFill, Error, ExitReason, Metrics};

/// The audit of one portfolio.
#[derive(Clone, Debug, PartialEq)]
pub struct PortfolioAudit {
    /// Fills replayed.
    pub fills: usize,
    /// Final equity of the float path.
    pub float_final_equity: f64,
    /// Final equity replayed in Decimal.
    pub decimal_final_equity: Decimal,
    /// |float - decimal| of final equity.
    pub equity_abs_diff: f64,
    /// The same relative to the Decimal final equity.
    pub equity_rel_diff: f64,
    /// The largest |float - decimal| of a fill's units, relative to the larger of the Decimal fill and the
    /// position it leaves.
    pub units_rel_diff: f64,
}

impl fmt::Display for PortfolioAudit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Decimal audit: {} fills; final equity f64 {:.6} vs Decimal {} (abs {:.3e}, rel {:.3e}); units of every \
             fill within {:.3e} (relative to the fill or the position it leaves)",
            self.fills,
            self.float_final_equity,
            self.decimal_final_equity.round_dp(6),
            self.equity_abs_diff,
            self.equity_rel_diff,
            self.units_rel_diff
        )
    }
}

/// Checked Decimal arithmetic of the replay: an overflow is an error naming the amount and the fill.
struct Exact {
    fill: usize,
}

impl Exact {
    fn ok(&self, x: Option<Decimal>, what: &str) -> Result<Decimal, Error> {
        x.ok_or_else(|| Error::Data(format!("Decimal audit: {what} of fill {} overflows a Decimal", self.fill)))
    }

    fn add(&self, a: Decimal, b: Decimal, what: &str) -> Result<Decimal, Error> {
        self.ok(a.checked_add(b), what)
    }

    fn sub(&self, a: Decimal, b: Decimal, what: &str) -> Result<Decimal, Error> {
        self.ok(a.checked_sub(b), what)
    }

    fn mul(&self, a: Decimal, b: Decimal, what: &str) -> Result<Decimal, Error> {
        self.ok(a.checked_mul(b), what)
    }

    fn div(&self, a: Decimal, b: Decimal, what: &str) -> Result<Decimal, Error> {
        self.ok(a.checked_div(b), what)
    }
}

/// Replays portfolio `column`'s `fills` over `universe` with `weights` and the account `p`, and compares
/// them with the float path's `metrics`.
pub fn audit_portfolio(
    universe: &Universe,
    weights: &TargetWeights,
    column: usize,
    p: &DecimalParams,
    fills: &[AccountFill],
    metrics: &Metrics,
) -> Result<PortfolioAudit, Error> {
    let n = universe.n_symbols();
    let half = p.spread / Decimal::TWO;
    let (mut cash, mut units) = (p.initial_capital, vec![Decimal::ZERO; n]);
    let mut units_rel_diff = 0.0f64;
    let mut value = Decimal::ZERO;
    for (k, f) in fills.iter().enumerate() {
        let x = Exact { fill: k };
        let (t, s) = (f.bar as usize, f.symbol as usize);
        let reason = ExitReason::from_code(f.reason);
        let at_open = matches!(reason, ExitReason::Signal | ExitReason::Breaker);
        let bar = universe.bar(t, s).ok_or_else(|| {
            Error::Data(format!("Decimal audit: fill {k} of symbol {s} at time {t}, where it has no bar"))
        })?;
        let reference = if at_open { bar.open } else { bar.close };
        // The account's value once per rebalance, before its first fill.
        if k == 0 || fills[k - 1].bar != f.bar || fills[k - 1].reason != f.reason {
            value = cash;
            for (j, u) in units.iter().enumerate().filter(|(_, u)| !u.is_zero()) {
                let price = match universe.bar(t, j) {
                    Some(b) if at_open => b.open,
                    _ => universe.carried_close(t, j).unwrap_or(Decimal::ZERO),
                };
                value = x.add(value, x.mul(*u, price, "a holding's value")?, "the account's value")?;
            }
        }
        let side = if f.units > 0.0 { Decimal::ONE + half } else { Decimal::ONE - half };
        let fill = x.mul(reference, side, "the fill price")?;
        let weight = if reason == ExitReason::Signal {
            weights
                .weight(column, t.wrapping_sub(1), s)
                .ok_or_else(|| Error::Data(format!("Decimal audit: fill {k} of symbol {s} at time {t} has no order")))?
        } else {
            Decimal::ZERO
        };
        let mut delta = if f.limited != 0 {
            x.div(x.div(cash, Decimal::ONE + p.commission, "the cash")?, fill, "the units")?
        } else {
            let target = x.div(x.mul(weight, value, "the target")?, reference, "the target")?;
            x.sub(target, units[s], "the units")?
        };
        if p.whole_units {
            delta = delta.trunc();
        }
        let traded = x.mul(delta, fill, "the notional")?;
        let commission = x.mul(p.commission, traded.abs(), "the commission")?;
        cash = x.sub(x.sub(cash, traded, "the cash")?, commission, "the cash")?;
        units[s] = x.add(units[s], delta, "the units")?;
        // Relative to the larger of the fill and the position it leaves: a small rebalance of a large
        // position is the difference of two near numbers, exact only to the position's precision.
        let (exact, held) = (delta.to_f64().unwrap_or(f64::NAN), units[s].to_f64().unwrap_or(f64::NAN));
        let scale = exact.abs().max(held.abs()).max(f64::MIN_POSITIVE);
        units_rel_diff = units_rel_diff.max((f.units - exact).abs() / scale);
    }
    let end = universe.n_times() - 1;
    let x = Exact { fill: fills.len() };
    let mut equity = cash;
    for (s, u) in units.iter().enumerate().filter(|(_, u)| !u.is_zero()) {
        let close = universe.carried_close(end, s).unwrap_or(Decimal::ZERO);
        equity = x.add(equity, x.mul(*u, close, "the final value")?, "the final equity")?;
    }
    let decimal = equity.to_f64().unwrap_or(f64::NAN);
    let equity_abs_diff = (metrics.final_equity - decimal).abs();
    Ok(PortfolioAudit {
        fills: fills.len(),
        float_final_equity: metrics.final_equity,
        decimal_final_equity: equity,
        equity_abs_diff,
        equity_rel_diff: equity_abs_diff / decimal.abs().max(f64::MIN_POSITIVE),
        units_rel_diff,
    })
}
