//! Target weights on a universe: a weights file's rows ([`WeightTable`]) placed on the universe's calendar
//! and symbols, checked (every refusal names the file, the row, the column and the symbol), in Decimal. An
//! order decided at the close of time t fills at the open of t + 1 where the symbol has a bar there; one whose
//! symbol has no bar at t + 1 (or decided at the last time) cannot fill and is listed, never dropped silently.

use rust_decimal::Decimal;

pub use super::load::{WeightRow, WeightTable, load_weights, weights_from_bytes};
use super::universe::Universe;
use super::validate::{Finding, IssueClass, LoadReport, Severity};

/// One order row on the universe: its time and symbol indices and its weights (one per portfolio).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Order {
    /// The file's row.
    pub row: usize,
    /// The calendar index of the decision's time.
    pub time: usize,
    /// The symbol's index in the universe.
    pub symbol: usize,
    /// The target weight of each portfolio (`None`: no order).
    pub weights: Vec<Option<Decimal>>,
}

/// The target weights of some portfolios over a universe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetWeights {
    /// The file they came from.
    pub file: String,
    /// The portfolios' names (the file's column headers).
    pub portfolios: Vec<String>,
    /// The orders, by time then symbol.
    pub orders: Vec<Order>,
    /// The orders that cannot fill: no bar of their symbol at the next time, or decided at the last time.
    pub unfilled: Vec<Order>,
    /// `times x symbols`: the index in `orders` of the order at that time and symbol (`u32::MAX`: none).
    index: Vec<u32>,
    n_symbols: usize,
}

impl TargetWeights {
    /// Places `table`'s rows on `universe`: each symbol must be one of its symbols (any case) and each time
    /// one of its times; a time and symbol appear once; a negative weight needs `allow_short`. All findings
    /// are reported together.
    pub fn new(table: WeightTable, universe: &Universe, allow_short: bool) -> Result<Self, LoadReport> {
        let (n_times, n) = (universe.n_times(), universe.n_symbols());
        let mut index = vec![u32::MAX; n_times * n];
        let mut findings = Vec::new();
        let mut orders: Vec<Order> = Vec::with_capacity(table.rows.len());
        let file = table.file.clone();
        for r in table.rows {
            let finding = |column: &str, class: IssueClass, message: String| Finding {
                file: file.clone(),
                row: Some(r.row),
                column: Some(column.to_owned()),
                symbol: Some(r.symbol.clone()),
                class,
                severity: Severity::Error,
                message,
            };
            let Some(s) = universe.symbol_index(&r.symbol) else {
                let known = universe.symbols().iter().take(10).copied().collect::<Vec<_>>().join(", ");
                let message = format!("`{}` is not a symbol of the data (symbols: {known})", r.symbol);
                findings.push(finding(&table.symbol_column, IssueClass::BadRow, message));
                continue;
            };
            let Some(t) = universe.time_index(&r.time) else {
                let message = format!("{} is not a time of the data's calendar", r.time.to_rfc3339());
                findings.push(finding(&table.time_column, IssueClass::BadTime, message));
                continue;
            };
            if !allow_short
                && let Some((c, w)) = r
                    .weights
                    .iter()
                    .enumerate()
                    .find_map(|(c, w)| w.filter(|w| w.is_sign_negative() && !w.is_zero()).map(|w| (c, w)))
            {
                let message = format!("weight {w} is a short: pass --allow-short to allow negative weights");
                findings.push(finding(&table.portfolios[c], IssueClass::BadNumber, message));
                continue;
            }
            let slot = &mut index[t * n + s];
            if *slot != u32::MAX {
                let first = orders[*slot as usize].row;
                let message = format!("{} again for this symbol (first on row {first})", r.time.to_rfc3339());
                findings.push(finding(&table.time_column, IssueClass::DuplicateTime, message));
                continue;
            }
            *slot = orders.len() as u32;
            orders.push(Order { row: r.row, time: t, symbol: s, weights: r.weights });
        }
        if !findings.is_empty() {
            return Err(LoadReport { file, rows: orders.len(), findings, ..LoadReport::default() });
        }
        let mut placed: Vec<Order> = Vec::with_capacity(orders.len());
        let mut unfilled = Vec::new();
        index.iter_mut().for_each(|i| *i = u32::MAX);
        orders.sort_by_key(|o| (o.time, o.symbol));
        for o in orders {
            if o.weights.iter().all(Option::is_none) {
                continue;
            }
            if o.time + 1 >= n_times || universe.bar(o.time + 1, o.symbol).is_none() {
                unfilled.push(o);
                continue;
            }
            index[o.time * n + o.symbol] = placed.len() as u32;
            placed.push(o);
        }
        Ok(Self { file, portfolios: table.portfolios, orders: placed, unfilled, index, n_symbols: n })
    }

    /// The target weight of portfolio `c` for symbol `s` decided at the close of time `t` (`None`: no order).
    pub fn weight(&self, c: usize, t: usize, s: usize) -> Option<Decimal> {
        match self.index.get(t * self.n_symbols + s) {
            Some(&i) if i != u32::MAX => self.orders[i as usize].weights[c],
            _ => None,
        }
    }
}
