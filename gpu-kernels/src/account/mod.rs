//! One cash account over N symbols (a portfolio): per-symbol units, one cash balance, and the per-bar rule
//! that moves every symbol to a target weight of the account at the next open (ENVIRONMENT.md,
//! "Portfolios"). The CPU backtest calls these functions; a GPU kernel calls the same ones.
//!
//! A rebalance values the account once, at the prices of the moment (a symbol's open where it has a bar,
//! its last close where it has none), then sends one order per symbol that trades there and has a target:
//! `(w x value) / price - units`, floored toward zero to whole units when the trial says so. Orders go in
//! the order of the value they move, lowest first (the largest sale first, the largest purchase last; ties
//! in symbol order, a stable sort), as vectorbt's `call_seq='auto'` does. Fills take half the spread and
//! the commission as every fill does ([`crate::portfolio`]); a purchase whose cost with commission exceeds
//! the cash buys what the cash pays instead. A symbol without a bar never trades.

pub mod backtest;
pub mod env;
pub mod rows;

use crate::portfolio::{BANKRUPTCY_SLACK, ExitReason, WHOLE_UNITS_SLACK, buy_fill_price, sell_fill_price};
use crate::types::{EnvStatus, TrialParams};

/// The account after the close of bar `bar`; the units of each symbol live beside it in a slice of N.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AccountState {
    /// Cash (the proceeds of shorts included).
    pub cash: f64,
    /// `cash + sum of units x close` (a symbol without a bar at its last close).
    pub equity: f64,
    /// Highest equity so far.
    pub peak_equity: f64,
    /// Spread plus commission paid by the last step.
    pub step_costs: f64,
    /// The bar of the last close.
    pub bar: u32,
    /// The last bar.
    pub end_bar: u32,
    /// An [`EnvStatus`] code.
    pub status: u32,
    /// Keeps the size a multiple of 8.
    pub _pad: u32,
}

const _: () = assert!(core::mem::size_of::<AccountState>() == 48);

impl AccountState {
    /// An account of the trial's capital in cash at `start_bar`, done after `end_bar`.
    pub fn new(params: &TrialParams, start_bar: u32, end_bar: u32) -> Self {
        let status = if start_bar >= end_bar { EnvStatus::SegmentEnd } else { EnvStatus::Active };
        Self {
            cash: params.initial_capital,
            equity: params.initial_capital,
            peak_equity: params.initial_capital,
            step_costs: 0.0,
            bar: start_bar,
            end_bar,
            status: status as u32,
            _pad: 0,
        }
    }

    /// The status.
    pub fn status(&self) -> EnvStatus {
        EnvStatus::from_code(self.status)
    }

    /// Drawdown from the equity peak: `1 - equity / peak` (0 at a new peak).
    pub fn drawdown(&self) -> f64 {
        if self.peak_equity > 0.0 { 1.0 - self.equity / self.peak_equity } else { 0.0 }
    }
}

/// One executed order.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AccountFill {
    /// The bar whose open (or, at the end and at bankruptcy, whose close) it filled at.
    pub bar: u32,
    /// The symbol's index in the universe.
    pub symbol: u32,
    /// An [`ExitReason`] code: `Signal` for an order to a target weight, `Breaker`, `EndOfData` or
    /// `Bankruptcy` for the closes those make.
    pub reason: u32,
    /// 1 when the cash could not pay for the whole purchase and it bought what the cash paid.
    pub limited: u32,
    /// Units traded: positive bought, negative sold.
    pub units: f64,
    /// Price per unit after the half spread.
    pub price: f64,
    /// Commission paid.
    pub commission: f64,
    /// Half spread (against the reference price) plus commission.
    pub costs: f64,
}

const _: () = assert!(core::mem::size_of::<AccountFill>() == 48);

/// Receives an account's fills: the backtest's ledger implements it, `()` ignores them.
pub trait FillLog {
    /// `fill` was executed.
    fn filled(&mut self, _fill: &AccountFill) {}
}

impl FillLog for () {}

/// The account's value: `cash + sum of units x price(s)` over the symbols held, in symbol order.
#[inline]
pub fn account_value(cash: f64, units: &[f64], price: impl Fn(usize) -> f64) -> f64 {
    let mut value = cash;
    for (s, &u) in units.iter().enumerate() {
        if u != 0.0 {
            value += u * price(s);
        }
    }
    value
}

/// `units` floored toward zero to whole units, with [`WHOLE_UNITS_SLACK`] (a quotient within the slack
/// below an integer is that integer).
#[inline]
pub fn whole_units_toward_zero(units: f64) -> f64 {
    let whole = libm::floor(libm::fabs(units) * (1.0 + WHOLE_UNITS_SLACK));
    if units < 0.0 { -whole } else { whole }
}

/// The units an order to weight `weight` trades for a symbol holding `units` at `price` in an account
/// worth `value`: `(weight x value) / price - units`, floored toward zero when `whole_units`.
#[inline]
pub fn order_units(weight: f64, value: f64, price: f64, units: f64, whole_units: bool) -> f64 {
    let delta = weight * value / price - units;
    if whole_units { whole_units_toward_zero(delta) } else { delta }
}

/// The orders of one rebalance, pushed in symbol order, then sorted by the value they move (the scratch of N
/// entries each a rebalance needs; the caller owns it, so that nothing allocates).
#[derive(Debug)]
pub struct Orders<'a> {
    /// The value each order moves: `weight x value - units x price` (vectorbt's approximate order value).
    pub value: &'a mut [f64],
    /// Its units.
    pub units: &'a mut [f64],
    /// Its symbol.
    pub symbol: &'a mut [u32],
}

/// Orders up to this many sort by insertion; more by heap sort (insertion moves about n^2 / 4 entries a
/// rebalance, each a round trip to device memory on a GPU thread).
const INSERTION_SORT_MAX: usize = 16;

impl Orders<'_> {
    /// Puts the `n`-th order at `n`; [`Self::sort`] orders the first `n` when all are in. `symbol` must grow
    /// with `n` (ties keep that order).
    #[inline]
    fn push(&mut self, n: usize, value: f64, units: f64, symbol: u32) {
        debug_assert!(n == 0 || symbol > self.symbol[n - 1], "orders are pushed in symbol order");
        self.value[n] = value;
        self.units[n] = units;
        self.symbol[n] = symbol;
    }

    /// Sorts the first `n` orders by the value they move, ties (0 and -0 among them) in the order they were
    /// pushed: exactly the order a stable insertion of each as it came gives (the orders executed before
    /// heap sort replaced it, and the same bits). Where a value is NaN (it compares with nothing, so the
    /// arrival order decides where it and the values after it land) and for a few orders, that insertion
    /// sort itself runs.
    #[inline]
    fn sort(&mut self, n: usize) {
        if n <= INSERTION_SORT_MAX || self.value[..n].iter().any(|v| v.is_nan()) {
            self.insertion_sort(n);
            return;
        }
        for root in (0..n / 2).rev() {
            self.sift_down(root, n);
        }
        for end in (1..n).rev() {
            self.swap(0, end);
            self.sift_down(0, end);
        }
    }

    /// Inserts each of the first `n` orders after every earlier one of a lower or equal value.
    #[inline]
    fn insertion_sort(&mut self, n: usize) {
        for k in 1..n {
            let (value, units, symbol) = (self.value[k], self.units[k], self.symbol[k]);
            let mut i = k;
            while i > 0 && self.value[i - 1] > value {
                self.value[i] = self.value[i - 1];
                self.units[i] = self.units[i - 1];
                self.symbol[i] = self.symbol[i - 1];
                i -= 1;
            }
            self.value[i] = value;
            self.units[i] = units;
            self.symbol[i] = symbol;
        }
    }

    /// Whether order `a` goes before order `b`: a lower value, or an equal one and an earlier symbol.
    #[inline]
    fn before(&self, a: usize, b: usize) -> bool {
        let (va, vb) = (self.value[a], self.value[b]);
        va < vb || (va <= vb && self.symbol[a] < self.symbol[b])
    }

    /// Moves the entry at `root` down the max-heap of the first `end` entries.
    #[inline]
    fn sift_down(&mut self, mut root: usize, end: usize) {
        loop {
            let mut child = 2 * root + 1;
            if child >= end {
                return;
            }
            if child + 1 < end && self.before(child, child + 1) {
                child += 1;
            }
            if !self.before(root, child) {
                return;
            }
            self.swap(root, child);
            root = child;
        }
    }

    #[inline]
    fn swap(&mut self, a: usize, b: usize) {
        self.value.swap(a, b);
        self.units.swap(a, b);
        self.symbol.swap(a, b);
    }
}

/// Where and why a rebalance trades: the reference price of a symbol's fill (its open, or its close at the
/// end), `None` where it has no bar; its valuation price (that price where it trades, its last close where it
/// does not); the bar and the reason the fills carry.
pub struct Market<P: Fn(usize) -> Option<f64>, V: Fn(usize) -> f64> {
    /// The fill's reference price of a symbol, `None` where it has no bar.
    pub price: P,
    /// The valuation price of a symbol.
    pub value_price: V,
    /// The bar of the fills.
    pub bar: u32,
    /// The reason of the fills.
    pub reason: ExitReason,
}

impl<P: Fn(usize) -> Option<f64>, V: Fn(usize) -> f64> core::fmt::Debug for Market<P, V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Market").field("bar", &self.bar).field("reason", &self.reason).finish_non_exhaustive()
    }
}

/// Executes an order of `delta` units of `symbol` around `price` (the reference: an open or a close): a sale
/// always fills at `price x (1 - s/2)`; a purchase at `price x (1 + s/2)` fills whole when its cost with
/// commission is at most the cash, else buys `cash / (1 + c) / fill` units (floored to whole units when the
/// trial says so), nothing when the cash is zero up to rounding: at most [`BANKRUPTCY_SLACK`] of the
/// initial capital (a residue of the sums, which would otherwise buy dust the Decimal rules do not).
/// Commission `c x |units| x fill` is paid in cash; a fractional purchase the cash limits leaves exactly 0.
#[inline]
pub fn execute_order(
    params: &TrialParams,
    cash: &mut f64,
    units: &mut f64,
    delta: f64,
    price: f64,
    symbol: u32,
) -> Option<AccountFill> {
    let c = params.commission;
    let (fill, mut traded, mut limited) = if delta > 0.0 {
        (buy_fill_price(price, params.spread), delta, 0)
    } else if delta < 0.0 {
        (sell_fill_price(price, params.spread), delta, 0)
    } else {
        return None;
    };
    if traded > 0.0 {
        let cost = traded * fill;
        if cost + c * cost > *cash {
            if *cash <= BANKRUPTCY_SLACK * params.initial_capital {
                return None;
            }
            traded = *cash / (1.0 + c) / fill;
            if params.whole_units != 0 {
                traded = whole_units_toward_zero(traded);
            }
            if traded <= 0.0 {
                return None;
            }
            limited = 1;
        }
    }
    let notional = libm::fabs(traded) * fill;
    let mut commission = c * notional;
    if limited != 0 && params.whole_units == 0 {
        // The purchase spends the cash: what the cash paid beyond the units is the commission (equal to
        // `c x notional` in exact arithmetic), and the cash is exactly 0.
        commission = *cash - notional;
        *cash = 0.0;
    } else {
        // The trade's cash flow as one amount (notional and commission together), then the cash.
        *cash -= traded * fill + commission;
    }
    *units += traded;
    let spread = libm::fabs(traded) * price * (0.5 * params.spread);
    Some(AccountFill {
        bar: 0,
        symbol,
        reason: 0,
        limited,
        units: traded,
        price: fill,
        commission,
        costs: spread + commission,
    })
}

/// Moves every symbol that trades in `market` and has a target (`target(s)`, NaN: no order) toward it:
/// values the account, sorts the orders, executes them, and tells `log`. A negative target is 0 where the
/// trial does not allow shorts; an account worth nothing or less sends only the orders to weight 0.
/// Returns the costs paid.
#[inline]
pub fn rebalance<P: Fn(usize) -> Option<f64>, V: Fn(usize) -> f64>(
    params: &TrialParams,
    state: &mut AccountState,
    units: &mut [f64],
    target: impl Fn(usize) -> f64,
    market: &Market<P, V>,
    orders: &mut Orders<'_>,
    log: &mut impl FillLog,
) -> f64 {
    let value = account_value(state.cash, units, &market.value_price);
    let whole = params.whole_units != 0;
    let mut n = 0;
    for (s, &held) in units.iter().enumerate() {
        let Some(price) = (market.price)(s) else { continue };
        let mut weight = target(s);
        if weight.is_nan() {
            continue;
        }
        if weight < 0.0 && params.allow_short == 0 {
            weight = 0.0;
        }
        if value <= 0.0 && weight != 0.0 {
            continue;
        }
        let delta = order_units(weight, value, price, held, whole);
        orders.push(n, weight * value - held * price, delta, s as u32);
        n += 1;
    }
    orders.sort(n);
    let mut costs = 0.0;
    for k in 0..n {
        let s = orders.symbol[k] as usize;
        let Some(price) = (market.price)(s) else { continue };
        if let Some(mut fill) = execute_order(params, &mut state.cash, &mut units[s], orders.units[k], price, s as u32)
        {
            fill.bar = market.bar;
            fill.reason = market.reason as u32;
            costs += fill.costs;
            log.filled(&fill);
        }
    }
    costs
}

/// Marks the account at the closes `close(s)` (a symbol without a bar: its last close) after a step from
/// status `before` that paid `costs`: equity, peak, and the status, as a single position's
/// ([`crate::portfolio::mark_at_close`]): bankrupt at or below the slack, halted after the breaker's close
/// once the account holds nothing (a symbol without a bar at the breaker's open keeps its position, so the
/// breaker stays pending and closes it at that symbol's next bar), breaker pending beyond the drawdown limit,
/// segment end at `end_bar`.
#[inline]
pub fn mark_account(
    params: &TrialParams,
    state: &mut AccountState,
    units: &[f64],
    close: impl Fn(usize) -> f64,
    before: EnvStatus,
    costs: f64,
) {
    state.bar += 1;
    state.step_costs = costs;
    state.equity = account_value(state.cash, units, close);
    if state.equity > state.peak_equity {
        state.peak_equity = state.equity;
    }
    let next = if state.equity <= BANKRUPTCY_SLACK * params.initial_capital {
        EnvStatus::Bankrupt
    } else if before == EnvStatus::HaltPending {
        if units.iter().all(|&u| u == 0.0) { EnvStatus::Halted } else { EnvStatus::HaltPending }
    } else if params.max_drawdown > 0.0 && state.drawdown() > params.max_drawdown {
        EnvStatus::HaltPending
    } else {
        EnvStatus::Active
    };
    state.status =
        if !next.is_done() && state.bar >= state.end_bar { EnvStatus::SegmentEnd as u32 } else { next as u32 };
}

/// One bar of a symbol for a step: its reference price where it trades (`Some(open)`), and the price it is
/// worth (its open where it trades, else its last close, `close`).
#[inline]
fn quote(open: f64, close: f64, tradable: bool) -> (Option<f64>, f64) {
    if tradable { (Some(open), open) } else { (None, close) }
}

/// One step of the account from the close of bar t to the close of bar t + 1, with the targets decided at
/// t (`target(s)`, NaN: no order) and bar t + 1's `open`, `close` and `tradable` flags per symbol: the
/// rebalance at the open (to weight 0 for the breaker's close while it is pending), the mark at the close,
/// and at bankruptcy the close of every position that can trade there. A done account does not change.
#[allow(clippy::too_many_arguments, reason = "the inputs of one step, as a kernel passes them")]
#[inline]
pub fn account_step(
    params: &TrialParams,
    state: &mut AccountState,
    units: &mut [f64],
    target: impl Fn(usize) -> f64,
    open: impl Fn(usize) -> f64,
    close: impl Fn(usize) -> f64 + Copy,
    tradable: impl Fn(usize) -> bool + Copy,
    orders: &mut Orders<'_>,
    log: &mut impl FillLog,
) {
    let before = state.status();
    if before.is_done() {
        state.step_costs = 0.0;
        return;
    }
    let bar = state.bar + 1;
    let at_open = Market {
        price: |s: usize| quote(open(s), close(s), tradable(s)).0,
        value_price: |s: usize| quote(open(s), close(s), tradable(s)).1,
        bar,
        reason: if before == EnvStatus::HaltPending { ExitReason::Breaker } else { ExitReason::Signal },
    };
    let costs = if before == EnvStatus::HaltPending {
        rebalance(params, state, units, |_| 0.0, &at_open, orders, log)
    } else {
        rebalance(params, state, units, target, &at_open, orders, log)
    };
    mark_account(params, state, units, close, before, costs);
    if state.status() == EnvStatus::Bankrupt {
        let more = close_at(params, state, units, close, tradable, (bar, ExitReason::Bankruptcy), orders, log);
        state.step_costs += more;
        state.equity = account_value(state.cash, units, close);
    }
}

/// Rebalances every symbol that has a bar at the close (`tradable`) to weight 0 there, at `close`; the fills
/// carry `bar` and `reason` (the end of the data, bankruptcy). Returns the costs.
#[allow(clippy::too_many_arguments, reason = "the inputs of one close, as a kernel passes them")]
#[inline]
pub fn close_at(
    params: &TrialParams,
    state: &mut AccountState,
    units: &mut [f64],
    close: impl Fn(usize) -> f64 + Copy,
    tradable: impl Fn(usize) -> bool + Copy,
    (bar, reason): (u32, ExitReason),
    orders: &mut Orders<'_>,
    log: &mut impl FillLog,
) -> f64 {
    let at_close = Market { price: |s: usize| tradable(s).then(|| close(s)), value_price: close, bar, reason };
    rebalance(params, state, units, |_| 0.0, &at_close, orders, log)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    fn params(capital: f64, spread: f64, commission: f64) -> TrialParams {
        TrialParams { spread, commission, ..TrialParams::frictionless(capital) }
    }

    /// Orders sort by the value they move, ties in symbol order.
    #[test]
    fn orders_sort_stably_by_value() {
        let (mut v, mut u, mut s) = ([0.0; 5], [0.0; 5], [0u32; 5]);
        let mut orders = Orders { value: &mut v, units: &mut u, symbol: &mut s };
        for (n, value) in [30.0, -10.0, 30.0, -50.0, 0.0].into_iter().enumerate() {
            orders.push(n, value, 0.0, n as u32);
        }
        orders.sort(5);
        assert_eq!(s, [3, 1, 4, 0, 2]);
        assert_eq!(v, [-50.0, -10.0, 0.0, 30.0, 30.0]);
    }

    /// The stable insertion of each order as it comes, as rebalances sorted before heap sort.
    fn inserted(values: &[f64]) -> std::vec::Vec<(u64, u64, u32)> {
        let mut out: std::vec::Vec<(f64, f64, u32)> = std::vec::Vec::new();
        for (n, &v) in values.iter().enumerate() {
            let mut i = out.len();
            while i > 0 && out[i - 1].0 > v {
                i -= 1;
            }
            out.insert(i, (v, -(n as f64), n as u32));
        }
        out.into_iter().map(|(v, u, s)| (v.to_bits(), u.to_bits(), s)).collect()
    }

    /// Heap sort gives the insertion's order bit for bit: many orders, ties, 0 and -0, NaN, sorted and
    /// reversed inputs.
    #[test]
    fn heap_sort_orders_as_the_stable_insertion_did() {
        let mut seed = 7u64;
        let mut draw = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            seed >> 33
        };
        let mut cases: std::vec::Vec<std::vec::Vec<f64>> = std::vec::Vec::new();
        for n in [0, 1, 2, 15, 16, 17, 33, 100, 524, 1000] {
            cases.push((0..n).map(|_| (draw() % 2001) as f64 - 1000.0).collect());
            cases.push((0..n).map(|_| (draw() % 5) as f64 - 2.0).collect());
            cases.push((0..n).map(|k| if k % 2 == 0 { 0.0 } else { -0.0 }).collect());
            cases.push((0..n).map(|k| k as f64).collect());
            cases.push((0..n).map(|k| -(k as f64)).collect());
            let mut with_nan: std::vec::Vec<f64> = (0..n).map(|_| (draw() % 100) as f64).collect();
            if n > 3 {
                with_nan[n / 3] = f64::NAN;
            }
            cases.push(with_nan);
        }
        for values in cases {
            let n = values.len();
            let (mut v, mut u, mut s) = (std::vec![0.0; n], std::vec![0.0; n], std::vec![0u32; n]);
            let mut orders = Orders { value: &mut v, units: &mut u, symbol: &mut s };
            for (k, &value) in values.iter().enumerate() {
                orders.push(k, value, -(k as f64), k as u32);
            }
            orders.sort(n);
            let got: std::vec::Vec<(u64, u64, u32)> = (0..n).map(|k| (v[k].to_bits(), u[k].to_bits(), s[k])).collect();
            assert_eq!(got, inserted(&values), "{n} orders: {values:?}");
        }
    }

    /// A purchase the cash cannot pay buys what the cash pays, commission included: 1,000 of cash at a fill
    /// of 10.01 (open 10, spread 0.002) with 0.1% commission buys 1000 / 1.001 / 10.01 = 99.80... units.
    #[test]
    fn a_purchase_beyond_the_cash_buys_what_the_cash_pays() {
        let p = params(1_000.0, 0.002, 0.001);
        let (mut cash, mut units) = (1_000.0, 0.0);
        let fill = execute_order(&p, &mut cash, &mut units, 100.0, 10.0, 3).unwrap();
        let price = buy_fill_price(10.0, 0.002);
        assert!((price - 10.01).abs() < 1e-12);
        assert_eq!((fill.limited, fill.price, fill.symbol), (1, price, 3));
        assert!((fill.units - 1_000.0 / 1.001 / 10.01).abs() < 1e-9);
        assert_eq!(cash, 0.0);
        let whole = TrialParams { whole_units: 1, ..p };
        let (mut cash, mut units) = (1_000.0, 0.0);
        let fill = execute_order(&whole, &mut cash, &mut units, 100.0, 10.0, 3).unwrap();
        assert_eq!((fill.units, units), (99.0, 99.0));
        assert!((cash - (1_000.0 - 99.0 * 10.01 * 1.001)).abs() < 1e-9, "{cash}");
    }

    /// Cash that is zero up to rounding (1e-13 of a capital of 1,000) buys nothing, where a cent buys.
    #[test]
    fn a_rounding_residue_of_cash_buys_nothing() {
        let p = params(1_000.0, 0.0, 0.0);
        let (mut cash, mut units) = (1e-10, 0.0);
        assert_eq!(execute_order(&p, &mut cash, &mut units, 5.0, 10.0, 0), None);
        let (mut cash, mut units) = (0.01, 0.0);
        assert_eq!(execute_order(&p, &mut cash, &mut units, 5.0, 10.0, 0).map(|f| f.units), Some(0.001));
    }

    /// Two symbols at 50/50 from 1,000 of cash, no costs, then a move to 100/0 at new opens: the sale of the
    /// first comes before the purchase of the second, whatever their symbol order.
    #[test]
    fn a_rebalance_sells_before_it_buys() {
        let p = params(1_000.0, 0.0, 0.0);
        let mut state = AccountState::new(&p, 0, 10);
        let mut units = [0.0, 0.0];
        let (mut v, mut u, mut s) = ([0.0; 2], [0.0; 2], [0u32; 2]);
        let mut orders = Orders { value: &mut v, units: &mut u, symbol: &mut s };
        let mut fills = Fills::default();
        let opens = [10.0, 20.0];
        let market = Market {
            price: |s: usize| Some(opens[s]),
            value_price: |s: usize| opens[s],
            bar: 1,
            reason: ExitReason::Signal,
        };
        rebalance(&p, &mut state, &mut units, |_| 0.5, &market, &mut orders, &mut fills);
        assert_eq!(units, [50.0, 25.0]);
        assert_eq!(state.cash, 0.0);
        // Symbol 0 doubles to 20, symbol 1 halves to 10: worth 1,000 + 250 = 1,250; all in symbol 1.
        let opens = [20.0, 10.0];
        let market = Market {
            price: |s: usize| Some(opens[s]),
            value_price: |s: usize| opens[s],
            bar: 2,
            reason: ExitReason::Signal,
        };
        rebalance(&p, &mut state, &mut units, |s| [0.0, 1.0][s], &market, &mut orders, &mut fills);
        assert_eq!(units, [0.0, 125.0]);
        assert_eq!(state.cash, 0.0);
        let got: [(u32, u32, f64); 4] = core::array::from_fn(|i| (fills.0[i].bar, fills.0[i].symbol, fills.0[i].units));
        assert_eq!(got, [(1, 0, 50.0), (1, 1, 25.0), (2, 0, -50.0), (2, 1, 100.0)]);
        assert_eq!(fills.1, 4);
    }

    /// A symbol without a bar does not trade (its target waits for no one) and is valued at its last close.
    #[test]
    fn a_symbol_without_a_bar_does_not_trade() {
        let p = params(1_000.0, 0.0, 0.0);
        let mut state = AccountState::new(&p, 0, 10);
        let mut units = [10.0, 0.0];
        state.cash = 500.0;
        let (mut v, mut u, mut s) = ([0.0; 2], [0.0; 2], [0u32; 2]);
        let mut orders = Orders { value: &mut v, units: &mut u, symbol: &mut s };
        // Symbol 0 has no bar (last close 50); symbol 1 opens at 25: the account is worth 1,000.
        let market = Market {
            price: |s: usize| (s == 1).then_some(25.0),
            value_price: |s: usize| [50.0, 25.0][s],
            bar: 3,
            reason: ExitReason::Signal,
        };
        rebalance(&p, &mut state, &mut units, |_| 0.2, &market, &mut orders, &mut ());
        assert_eq!(units, [10.0, 8.0]);
        assert_eq!(state.cash, 300.0);
    }

    /// The fills of a test, in order, and their count.
    #[derive(Default)]
    struct Fills([AccountFill; 8], usize);

    impl FillLog for Fills {
        fn filled(&mut self, fill: &AccountFill) {
            self.0[self.1] = *fill;
            self.1 += 1;
        }
    }
}
