//! Portfolios against vectorbt: tradesim's portfolio backtest (`tradesim backtest --weights`, the library
//! path the command runs) and vectorbt's `Portfolio.from_orders` with `cash_sharing=True`,
//! `size_type='targetpercent'`, one group, `call_seq='auto'` (tests/vectorbt_portfolio.py, in the throwaway
//! virtualenv of `scripts/setup-vectorbt.sh`, whose python `scripts/test.sh` sets as
//! `TRADESIM_VECTORBT_PYTHON`) on the 5 large caps of ../shared/data (2000-2013; FB from 2012, GOOG from
//! 2004) and on its 524 S&P 500 members (days missing inside spans, symbols ending early): every fill
//! (time, symbol, units, price, commission, in execution order) and the equity at every time equal within
//! 1e-9 relative, for long-only fractional portfolios with costs and long/short whole-unit ones. The conventions mapped are in the script's docstring and docs/CLI.md.

use std::fmt::Write as _;
use std::path::Path;

use num_traits::ToPrimitive;
use rust_decimal::Decimal;
use tradesim::data::CleanPolicy;
use tradesim::data::universe::Universe;
use tradesim::data::weights::{TargetWeights, weights_from_bytes};
use tradesim::portfolio::{PortfolioRequest, PortfolioRun, run_portfolios};
use tradesim::{Backend, ExitReason};

#[path = "common/shared_data.rs"]
mod shared_data;
use shared_data::shared_data;

/// The python of the vectorbt virtualenv, or `None` (skip) outside CI.
fn vectorbt_python() -> Option<String> {
    match std::env::var("TRADESIM_VECTORBT_PYTHON") {
        Ok(python) => Some(python),
        Err(_) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the vectorbt check: TRADESIM_VECTORBT_PYTHON is unset"
            );
            eprintln!(
                "skipped: TRADESIM_VECTORBT_PYTHON is unset (scripts/test.sh sets it from scripts/setup-vectorbt.sh)"
            );
            None
        }
    }
}

fn universe(dir: &Path) -> Universe {
    let (data, _) = tradesim::data::load_file(&dir.join("stocks-daily-5-tickers.csv"), &CleanPolicy::default())
        .unwrap_or_else(|r| panic!("{r}"));
    Universe::new(data, None).unwrap()
}

/// A weight decided at time `t` for symbol `s` of portfolio `name`, or none.
type Rule<'a> = &'a dyn Fn(&Universe, usize, usize) -> Option<&'static str>;

/// Whether time `t` is the first of its month on the calendar and symbol `s` has a bar then.
fn month_start(u: &Universe, t: usize, s: usize) -> bool {
    let new_month = t == 0 || u.times[t].format("%Y%m").to_string() != u.times[t - 1].format("%Y%m").to_string();
    new_month && u.bar(t, s).is_some()
}

/// Equal weights of 0.2 on the first time of each month, for every symbol with a bar then (1.0 of the account
/// once all five trade: the last purchase of each rebalance finds the cash short by the costs).
fn monthly_equal(u: &Universe, t: usize, s: usize) -> Option<&'static str> {
    month_start(u, t, s).then_some("0.2")
}

/// AAPL, IBM and MSFT at 0.3 each, rebalanced every time (small orders every day).
fn daily_fixed(u: &Universe, _t: usize, s: usize) -> Option<&'static str> {
    ["AAPL", "IBM", "MSFT"].contains(&u.series[s].symbol.as_str()).then_some("0.3")
}

/// Every fifth time, among the symbols with 21 bars of their own: the best 20-bar return long 0.5, the worst
/// short 0.3, the others 0.1.
fn weekly_long_short(u: &Universe, t: usize, s: usize) -> Option<&'static str> {
    if !t.is_multiple_of(5) {
        return None;
    }
    let ret = |j: usize| -> Option<Decimal> {
        let i = u.bar_index(t, j)?;
        (i >= 20).then(|| u.series[j].bars[i].close / u.series[j].bars[i - 20].close)
    };
    let mine = ret(s)?;
    let others: Vec<Decimal> = (0..u.n_symbols()).filter_map(ret).collect();
    Some(if others.iter().all(|&r| r <= mine) {
        "0.5"
    } else if others.iter().all(|&r| r >= mine) {
        "-0.3"
    } else {
        "0.1"
    })
}

/// The weights file of `rules` (a column each) over `u`.
fn weights_csv(u: &Universe, rules: &[(&str, Rule<'_>)]) -> String {
    let mut out = String::from("time,symbol");
    for (name, _) in rules {
        write!(out, ",{name}").unwrap();
    }
    out.push('\n');
    for t in 0..u.n_times() {
        for s in 0..u.n_symbols() {
            let cells: Vec<Option<&str>> = rules.iter().map(|(_, rule)| rule(u, t, s)).collect();
            if cells.iter().all(Option::is_none) {
                continue;
            }
            write!(out, "{},{}", u.times[t].to_rfc3339(), u.series[s].symbol).unwrap();
            for c in cells {
                write!(out, ",{}", c.unwrap_or("")).unwrap();
            }
            out.push('\n');
        }
    }
    out
}

/// vectorbt's input: prices as tradesim's device sees them (f64 of the Decimals), the account, the weights.
fn vectorbt_input(u: &Universe, weights: &TargetWeights, req: &PortfolioRequest) -> serde_json::Value {
    let f = |d: Decimal| d.to_f64().unwrap();
    let grid = |cell: &dyn Fn(usize, usize) -> Option<f64>| -> Vec<Vec<Option<f64>>> {
        (0..u.n_times()).map(|t| (0..u.n_symbols()).map(|s| cell(t, s)).collect()).collect()
    };
    let portfolios: serde_json::Map<String, serde_json::Value> = weights
        .portfolios
        .iter()
        .enumerate()
        .map(|(c, name)| (name.clone(), serde_json::json!(grid(&|t, s| weights.weight(c, t, s).map(f)))))
        .collect();
    serde_json::json!({
        "symbols": u.symbols(),
        "open": grid(&|t, s| u.bar(t, s).map(|b| f(b.open))),
        "close": grid(&|t, s| u.carried_close(t, s).map(f)),
        "tradable": (0..u.n_times()).map(|t| (0..u.n_symbols()).map(|s| u.bar(t, s).is_some()).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "account": {
            "capital": f(req.capital),
            "spread": f(req.spread),
            "commission": f(req.commission),
            "whole_units": req.whole_units,
            "allow_short": req.allow_short,
        },
        "weights": portfolios,
    })
}

/// `a` within `rel` of `b` (relative to the larger), or within `abs`.
fn near(a: f64, b: f64, rel: f64, abs: f64) -> bool {
    (a - b).abs() <= (rel * a.abs().max(b.abs())).max(abs)
}

/// tradesim's portfolio `c` against vectorbt's output for it: the first difference, if any.
fn compare(run: &PortfolioRun, c: usize, n_times: usize, theirs: &serde_json::Value) -> Result<(), String> {
    let fills = run.result.column_fills(c);
    let orders = theirs["orders"].as_array().unwrap();
    if fills.len() != orders.len() {
        return Err(format!("{} fills, vectorbt {} orders", fills.len(), orders.len()));
    }
    for (k, (f, o)) in fills.iter().zip(orders).enumerate() {
        let o: Vec<f64> = o.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        let row = if f.reason == ExitReason::EndOfData as u32 { n_times } else { f.bar as usize };
        let same = row as f64 == o[0]
            && f64::from(f.symbol) == o[1]
            && near(f.units, o[2], 1e-9, 1e-9)
            && near(f.price, o[3], 1e-12, 0.0)
            && near(f.commission, o[4], 1e-9, 1e-9);
        if !same {
            return Err(format!(
                "fill {k}: tradesim (row {row}, symbol {}, units {}, price {}, commission {}), vectorbt {o:?}",
                f.symbol, f.units, f.price, f.commission
            ));
        }
    }
    let value: Vec<f64> = theirs["value"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    let per = n_times;
    let ours = &run.result.equity[c * per..(c + 1) * per];
    // tradesim's last point is after the end-of-data closes, vectorbt's row T.
    let theirs_at = |i: usize| if i + 1 == per { value[per] } else { value[i] };
    for (i, &e) in ours.iter().enumerate() {
        if !near(e, theirs_at(i), 1e-9, 1e-6) {
            return Err(format!("equity at time {i}: tradesim {e}, vectorbt {}", theirs_at(i)));
        }
    }
    Ok(())
}

/// One account and its portfolios against vectorbt; returns the run for further checks.
fn conforms(python: &str, u: &Universe, req: &PortfolioRequest, rules: &[(&str, Rule<'_>)]) -> PortfolioRun {
    let text = weights_csv(u, rules);
    let table = weights_from_bytes("weights.csv", text.as_bytes(), None).unwrap_or_else(|r| panic!("{r}"));
    let weights = TargetWeights::new(table, u, req.allow_short).unwrap_or_else(|r| panic!("{r}"));
    let run = run_portfolios(&Backend::Cpu, u, &weights, req).unwrap();
    let dir = std::env::temp_dir().join(format!("tradesim-vbt-{}-{}", std::process::id(), rules[0].0));
    std::fs::create_dir_all(&dir).unwrap();
    let (input, output) = (dir.join("in.json"), dir.join("out.json"));
    std::fs::write(&input, vectorbt_input(u, &weights, req).to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectorbt_portfolio.py");
    let status = std::process::Command::new(python).arg(&script).arg(&input).arg(&output).status().unwrap();
    assert!(status.success(), "{} {} failed: {status}", python, script.display());
    let out: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    for (c, name) in run.names.iter().enumerate() {
        let theirs = &out["portfolios"][name];
        compare(&run, c, u.n_times(), theirs).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (ours, final_value) = (run.result.metrics[c].final_equity, theirs["value"][u.n_times()].as_f64().unwrap());
        eprintln!(
            "{name}: final equity tradesim {ours:.6}, vectorbt {} {final_value:.6} (relative difference {:.1e}); {} \
             fills, {} orders",
            out["vectorbt"].as_str().unwrap_or("?"),
            (ours - final_value).abs() / final_value,
            run.result.column_fills(c).len(),
            theirs["orders"].as_array().unwrap().len()
        );
    }
    run
}

/// A daily account of 100,000 with these costs and rules.
fn request(spread: &str, commission: &str, whole_units: bool, allow_short: bool) -> PortfolioRequest {
    let d = |s: &str| s.parse::<Decimal>().unwrap();
    PortfolioRequest {
        capital: d("100000"),
        spread: d(spread),
        commission: d(commission),
        whole_units,
        allow_short,
        bars_per_year: Some(252.0),
    }
}

/// Long only, fractional units, the CLI's default costs: equal weights monthly (purchases the cash limits
/// once the weights sum to 1) and three stocks rebalanced daily.
#[test]
fn long_only_portfolios_match_vectorbt() {
    let (Some(dir), Some(python)) = (shared_data(), vectorbt_python()) else { return };
    let u = universe(&dir);
    let req = request("0.0002", "0.0001", false, false);
    let run = conforms(&python, &u, &req, &[("monthly_equal", &monthly_equal), ("daily_fixed", &daily_fixed)]);
    let fills = run.result.column_fills(0);
    // Each of the 9 rebalances with all five symbols at 0.2 (June 2012 to February 2013) ends with a purchase
    // that the cash, short by the costs, limits.
    assert_eq!(fills.iter().filter(|f| f.limited == 1).count(), 9, "purchases the cash limited");
    // FB trades only from its first bar (2012-05-18) on, at the open after it: never before.
    let fb = u.symbol_index("FB").unwrap();
    let first = fills.iter().find(|f| f.symbol as usize == fb).unwrap();
    assert!(first.bar as usize > u.first_time(fb));
    assert_eq!(u.times[first.bar as usize].date_naive().to_string(), "2012-06-04");
    assert!(run.result.column_fills(1).len() > 3 * 3_000, "daily rebalances of three symbols");
}

/// Long and short, whole units, higher costs: a weekly long/short rule and monthly equal weights.
#[test]
fn long_short_whole_unit_portfolios_match_vectorbt() {
    let (Some(dir), Some(python)) = (shared_data(), vectorbt_python()) else { return };
    let u = universe(&dir);
    let req = request("0.001", "0.0005", true, true);
    let run =
        conforms(&python, &u, &req, &[("weekly_long_short", &weekly_long_short), ("monthly_equal", &monthly_equal)]);
    let fills = run.result.column_fills(0);
    assert!(fills.iter().all(|f| f.units == f.units.trunc()), "whole units");
    let mut held = vec![0.0; u.n_symbols()];
    let mut shorted = false;
    for f in fills {
        held[f.symbol as usize] += f.units;
        shorted |= held[f.symbol as usize] < 0.0;
    }
    assert!(shorted, "the long/short rule went short");
}

/// The S&P 500 members (2009-2010, opens outside the range repaired): 524 symbols on 245 days, 25 starting
/// late, 114 with days missing inside their span, some ending early. Monthly weights of 0.0019 for every
/// symbol with a bar that day: the orders whose symbol has no bar the next day are not placed (vectorbt: no
/// price, no order); a symbol without a bar is worth its last close (vectorbt's `val_price` and `close`).
#[test]
fn a_universe_with_gaps_matches_vectorbt() {
    let (Some(dir), Some(python)) = (shared_data(), vectorbt_python()) else { return };
    let policy = CleanPolicy::parse(&[], &["open-outside-range".to_owned()]).unwrap();
    let unit = Some(tradesim::data::time::TimeUnit::YearMonthDay);
    let (data, _) = tradesim::data::load_file(&dir.join("sp500-members-daily-2009-2010.csv"), (&policy, unit))
        .unwrap_or_else(|r| panic!("{r}"));
    let u = Universe::new(data, None).unwrap();
    let req = request("0.0002", "0.0001", false, false);
    let monthly = |u: &Universe, t: usize, s: usize| month_start(u, t, s).then_some("0.0019");
    let run = conforms(&python, &u, &req, &[("sp500_monthly", &monthly)]);
    // Some symbols hold a position at the end without a bar at the last day: no end-of-data fill for them.
    let last = u.n_times() - 1;
    let closed: std::collections::BTreeSet<u32> =
        run.result.column_fills(0).iter().filter(|f| f.bar as usize == last).map(|f| f.symbol).collect();
    let bought: std::collections::BTreeSet<u32> = run.result.column_fills(0).iter().map(|f| f.symbol).collect();
    let kept = bought.iter().filter(|&&s| u.bar(last, s as usize).is_none()).count();
    assert!(kept > 0 && closed.iter().all(|&s| u.bar(last, s as usize).is_some()), "{kept} kept");
}
