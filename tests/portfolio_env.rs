//! The portfolio env (issue 55, item 2): N symbols in one cash account, an action per symbol, on
//! hand-checkable numbers (fills at the next open with the half spread and commission, the equal-weight
//! sizing, a hold that sends no order, the reward); the breaker (waiting for a symbol without a bar) and
//! bankruptcy ending an env; a symbol
//! without a bar not trading; the same bits from the same inputs, in one scan or step by step; the fills of
//! the portfolio backtest when the actions map to the same target weights; the host's refusals; and the
//! CUDA backend against the CPU, bit for bit (skipped without a GPU, failed under `REQUIRE_GPU=1`).

mod common;

use gpu_kernels::rng::draw_below;
use tradesim::data::synthetic::normal;
use tradesim::{
    AccountState, Backend, BacktestSpec, Bar, ExitReason, HostError, PortfolioEnvBatch, PortfolioScan, PortfolioStep,
    TERMINATED, TRUNCATED, TrialParams, UniverseMarket,
};

fn bar(open: f64, close: f64) -> Bar {
    Bar { open, high: open.max(close), low: open.min(close), close, sigma: 0.0 }
}

/// A cell without a bar: the last close everywhere, flag 0.
fn carried(close: f64) -> Bar {
    Bar { open: close, high: close, low: close, close, sigma: 0.0 }
}

/// `a` within 1e-12 relative of `b`.
#[track_caller]
fn close_to(what: &str, a: f64, b: f64) {
    assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{what}: {a} vs {b}");
}

/// One env of `params` on `market` over times `[0, end]`, scanned with `actions` (`steps x n_symbols`).
fn run_one(market: &UniverseMarket, params: TrialParams, end: usize, actions: &[u8]) -> (PortfolioScan, Vec<f64>) {
    let mut envs = PortfolioEnvBatch::new(&Backend::Cpu, market, &[params], 1).unwrap();
    envs.reset(&[(0, end)]).unwrap();
    let scan = envs.scan(actions, actions.len() / market.n_symbols()).unwrap();
    (scan, envs.units().unwrap())
}

/// Two symbols, 1,000 of cash, spread 0.002, commission 0.001. Step 0 (A long): A takes the whole account;
/// 100 units at 10.01 cost more than the cash with the commission, so it buys 1000 / 1.001 / 10.01. Step 1
/// (A long, B short): half the account each, valued at the opens (A at 12): A sells half its units at
/// 11.988 and B is sold short at 17.982, A first (equal values, symbol order). Step 2 (the same sides): a
/// hold, no order, the equity marked at the closes.
#[test]
fn two_symbols_by_hand() {
    let bars = vec![bar(10.0, 10.0), bar(20.0, 20.0), bar(10.0, 11.0), bar(20.0, 19.0)];
    let bars = [bars, vec![bar(12.0, 12.0), bar(18.0, 18.0), bar(12.0, 13.0), bar(18.0, 17.0)]].concat();
    let market = UniverseMarket::new(bars, vec![1; 8], 2).unwrap();
    let p = TrialParams { spread: 0.002, commission: 0.001, w_cost: 2.0, ..TrialParams::frictionless(1_000.0) };
    let (scan, units) = run_one(&market, p, 3, &[1, 0, 1, 2, 1, 2]);
    let s = &scan.steps;
    let a = 1_000.0 / 1.001 / 10.01;
    close_to("equity after step 0", s[0].equity, a * 11.0);
    let costs0 = a * 10.0 * 0.001 + (1_000.0 - a * 10.01);
    close_to("costs of step 0", s[0].costs, costs0);
    close_to("reward of step 0", s[0].reward, (a * 11.0 / 1_000.0).ln() - 2.0 * costs0 / 1_000.0);
    let v = a * 12.0;
    let sold_a = a / 2.0;
    let short_b = 0.5 * v / 18.0;
    let cash = sold_a * 11.988 * (1.0 - 0.001) + short_b * 17.982 * (1.0 - 0.001);
    close_to("equity after step 1", s[1].equity, cash + (a - sold_a) * 12.0 - short_b * 18.0);
    let costs1 = (sold_a * 12.0 + short_b * 18.0) * 0.001 + 0.001 * (sold_a * 11.988 + short_b * 17.982);
    close_to("costs of step 1", s[1].costs, costs1);
    close_to("equity after step 2", s[2].equity, cash + (a - sold_a) * 13.0 - short_b * 17.0);
    close_to("A's units", units[0], a - sold_a);
    close_to("B's units", units[1], -short_b);
    let flags: Vec<(u8, u8, u8, u32)> = s.iter().map(|x| (x.rebalanced, x.valid, x.done, x.bar)).collect();
    assert_eq!(flags, [(1, 1, 0, 0), (1, 1, 0, 1), (0, 1, TRUNCATED, 2)]);
    assert_eq!(s[2].costs, 0.0);
    assert_eq!(scan.sides, [1, 0, 1, 2, 1, 2]);
}

/// The breaker on the account: all in at 10, a close at 8 (20% below the peak, the limit 10%); the next
/// step sells at the open (9) whatever the action and ends the env (terminated); after that nothing moves.
/// Bankruptcy: all in short at 10, a close at 20: the account is worth 0, the short is bought back at that
/// close, and the env ends there.
#[test]
fn the_breaker_and_bankruptcy_end_the_env() {
    let bars = vec![bar(10.0, 10.0), bar(10.0, 8.0), bar(9.0, 9.5), bar(9.5, 12.0)];
    let market = UniverseMarket::new(bars, vec![1; 4], 1).unwrap();
    let p = TrialParams { max_drawdown: 0.1, ..TrialParams::frictionless(1_000.0) };
    let (scan, units) = run_one(&market, p, 3, &[1, 1, 1]);
    let s = &scan.steps;
    let got: Vec<(f64, u8, u8, u8)> = s.iter().map(|x| (x.equity, x.done, x.valid, x.rebalanced)).collect();
    assert_eq!(got, [(800.0, 0, 1, 1), (900.0, TERMINATED, 1, 1), (900.0, TERMINATED, 0, 0)]);
    assert_eq!((units[0], scan.sides), (0.0, vec![1, 0, 0]));
    let bars = vec![bar(10.0, 10.0), bar(10.0, 20.0), bar(20.0, 5.0), bar(5.0, 5.0)];
    let market = UniverseMarket::new(bars, vec![1; 4], 1).unwrap();
    let (scan, units) = run_one(&market, TrialParams::frictionless(1_000.0), 3, &[2, 2, 2]);
    let s = &scan.steps;
    assert_eq!((s[0].equity, s[0].done, s[0].valid), (0.0, TERMINATED, 1));
    assert_eq!(s[0].reward, 1e-12f64.ln());
    assert_eq!((s[1].valid, s[2].valid, s[2].equity, units[0]), (0, 0, 0.0, 0.0));
    // Without shorts SHORT is FLAT: nothing trades.
    let long_only = TrialParams { allow_short: 0, ..TrialParams::frictionless(1_000.0) };
    let (scan, _) = run_one(&market, long_only, 3, &[2, 2, 2]);
    assert!(scan.steps.iter().all(|x| x.equity == 1_000.0 && x.rebalanced == 0), "{:?}", scan.steps);
}

/// The breaker with a symbol that has no bar at its open: A and B half each at 10, both close at 8 (20%
/// below the peak, the limit 10%); at time 2 A is sold at its open (9) but B has no bar, so it keeps its 50
/// units and the breaker stays pending (the env goes on, whatever the actions); at time 3 B is sold at its
/// open (6), the account is flat and the env ends.
#[test]
fn the_breaker_waits_for_a_symbol_without_a_bar() {
    let bars = vec![bar(10.0, 10.0), bar(10.0, 10.0), bar(10.0, 8.0), bar(10.0, 8.0), bar(9.0, 9.0), carried(8.0)];
    let bars = [bars, vec![bar(9.0, 9.0), bar(6.0, 6.0)]].concat();
    let market = UniverseMarket::new(bars, vec![1, 1, 1, 1, 1, 0, 1, 1], 2).unwrap();
    let p = TrialParams { max_drawdown: 0.1, ..TrialParams::frictionless(1_000.0) };
    let (scan, units) = run_one(&market, p, 3, &[1, 1, 1, 1, 1, 1]);
    let got: Vec<(f64, u8, u8)> = scan.steps.iter().map(|x| (x.equity, x.done, x.rebalanced)).collect();
    assert_eq!(got, [(800.0, 0, 1), (450.0 + 400.0, 0, 1), (750.0, TERMINATED, 1)]);
    assert_eq!((scan.sides, units), (vec![1, 1, 0, 1, 0, 0], vec![0.0, 0.0]));
}

/// B has no bar at time 1: step 0 (both long) buys A's half alone and B keeps nothing (its side reads
/// FLAT); at step 1, with the same actions, B trades at time 2 and its side differs from the one held, so
/// the account rebalances both to half of 1,100.
#[test]
fn a_symbol_without_a_bar_does_not_trade() {
    let bars = vec![bar(10.0, 10.0), bar(20.0, 20.0), bar(10.0, 12.0), carried(20.0)];
    let bars = [bars, vec![bar(12.0, 12.0), bar(20.0, 22.0), bar(12.0, 12.0), bar(22.0, 22.0)]].concat();
    let market = UniverseMarket::new(bars, vec![1, 1, 1, 0, 1, 1, 1, 1], 2).unwrap();
    let (scan, units) = run_one(&market, TrialParams::frictionless(1_000.0), 3, &[1, 1, 1, 1, 1, 1]);
    let s = &scan.steps;
    assert_eq!((s[0].equity, s[0].rebalanced), (500.0 + 50.0 * 12.0, 1));
    assert_eq!(scan.sides[..2], [1, 0]);
    assert_eq!(s[1].rebalanced, 1);
    close_to("A's units", units[0], 550.0 / 12.0);
    close_to("B's units", units[1], 550.0 / 20.0);
    close_to("equity after step 1", s[1].equity, 550.0 + 550.0 / 20.0 * 22.0);
    assert_eq!((scan.sides[2..].to_vec(), s[2].rebalanced), (vec![1, 1, 1, 1], 0));
}

/// A universe of `n` symbols over `times` times: random walks with gaps (about 1 cell in 12 without a bar,
/// none at time 0), sigma 0.
fn random_universe(n: usize, times: usize, seed: u64) -> UniverseMarket {
    let (mut bars, mut flags) = (Vec::new(), Vec::new());
    let mut close = vec![50.0; n];
    for t in 0..times {
        for (s, c) in close.iter_mut().enumerate() {
            let i = (t * n + s) as u64;
            if t > 0 && draw_below(seed, 1, i, 12) == 0 {
                bars.push(carried(*c));
                flags.push(0);
                continue;
            }
            let open = *c * (1.0 + 0.01 * normal(seed, 2, i));
            *c = open * (1.0 + 0.02 * normal(seed, 3, i));
            bars.push(bar(open, *c));
            flags.push(1);
        }
    }
    UniverseMarket::new(bars, flags, n).unwrap()
}

/// Actions that change for one env and symbol with probability 1 in 4 a step (holds are frequent).
fn sticky_actions(steps: usize, envs: usize, n: usize, seed: u64) -> Vec<u8> {
    let mut out = vec![0u8; steps * envs * n];
    for i in 0..out.len() {
        let fresh = draw_below(seed, 4, i as u64, 3) as u8;
        out[i] = if i < envs * n || draw_below(seed, 5, i as u64, 4) == 0 { fresh } else { out[i - envs * n] };
    }
    out
}

/// Trials that cover the rules: costs, shorts on and off, whole units, the breaker, a cash reserve.
fn trials() -> Vec<TrialParams> {
    (0..4u32)
        .map(|k| TrialParams {
            spread: 0.001 * f64::from(k),
            commission: 0.0005 * f64::from(k % 2),
            cash_reserve_pct: if k == 3 { 0.1 } else { 0.0 },
            max_drawdown: if k == 1 { 0.05 } else { 0.0 },
            allow_short: u32::from(k != 2),
            whole_units: u32::from(k >= 2),
            w_cost: 1.0,
            w_drawdown: 0.5,
            ..TrialParams::frictionless(10_000.0)
        })
        .collect()
}

/// Bits of every field a scan and the state after it hold.
fn bits(scan: &PortfolioScan, accounts: &[AccountState], units: &[f64]) -> Vec<u64> {
    let step = |x: &PortfolioStep| {
        let flags =
            u64::from(x.done) | u64::from(x.valid) << 8 | u64::from(x.rebalanced) << 16 | u64::from(x.bar) << 32;
        [x.reward.to_bits(), x.equity.to_bits(), x.costs.to_bits(), flags]
    };
    let account = |a: &AccountState| {
        [a.cash, a.equity, a.peak_equity, a.step_costs].map(f64::to_bits).into_iter().chain([
            u64::from(a.bar),
            u64::from(a.end_bar),
            u64::from(a.status),
        ])
    };
    let mut out: Vec<u64> = scan.steps.iter().flat_map(step).collect();
    out.extend(scan.sides.iter().map(|&c| u64::from(c)));
    out.extend(accounts.iter().flat_map(account));
    out.extend(units.iter().map(|u| u.to_bits()));
    out
}

/// Four trials x 16 envs x 7 symbols over a random universe with gaps: 40 steps in one scan, then 10 scans
/// of one step (the envs keep their state between calls); the bits of every output after each call.
fn simulate(backend: &Backend, one_scan: bool) -> Vec<Vec<u64>> {
    let (n, envs, times) = (7, 16, 80);
    let market = random_universe(n, times, 11);
    let params = trials();
    let mut batch = PortfolioEnvBatch::new(backend, &market, &params, envs).unwrap();
    let segments: Vec<(usize, usize)> = (0..params.len() * envs).map(|e| (e % 9, times - 1 - e % 5)).collect();
    batch.reset(&segments).unwrap();
    let per_step = params.len() * envs * n;
    let actions = sticky_actions(50, params.len() * envs, n, 5);
    let mut out = Vec::new();
    let mut record = |batch: &PortfolioEnvBatch, scan: PortfolioScan| {
        out.push(bits(&scan, &batch.accounts().unwrap(), &batch.units().unwrap()));
    };
    if one_scan {
        let scan = batch.scan(&actions[..40 * per_step], 40).unwrap();
        record(&batch, scan);
    } else {
        let mut scans = PortfolioScan::default();
        for i in 0..40 {
            let scan = batch.scan(&actions[i * per_step..(i + 1) * per_step], 1).unwrap();
            scans.steps.extend(scan.steps);
            scans.sides.extend(scan.sides);
        }
        record(&batch, scans);
    }
    for i in 40..50 {
        let scan = batch.scan(&actions[i * per_step..(i + 1) * per_step], 1).unwrap();
        record(&batch, scan);
    }
    out
}

/// The same inputs give the same bits: twice in one scan, and step by step as in one scan. The run is not
/// trivial: envs rebalance, hold, and end by the breaker.
#[test]
fn the_same_inputs_give_the_same_bits() {
    let a = simulate(&Backend::Cpu, true);
    assert_eq!(a, simulate(&Backend::Cpu, true));
    assert_eq!(a, simulate(&Backend::Cpu, false));
    // Peek at the run's variety through a fresh batch of the same case.
    let market = random_universe(7, 80, 11);
    let mut batch = PortfolioEnvBatch::new(&Backend::Cpu, &market, &trials(), 16).unwrap();
    batch.reset(&vec![(0, 79); 64]).unwrap();
    let scan = batch.scan(&sticky_actions(40, 64, 7, 5), 40).unwrap();
    let count = |f: &dyn Fn(&PortfolioStep) -> bool| scan.steps.iter().filter(|x| f(x)).count();
    assert!(count(&|x| x.valid == 1 && x.rebalanced == 1) > 100, "rebalances");
    assert!(count(&|x| x.valid == 1 && x.rebalanced == 0) > 100, "holds");
    assert!(count(&|x| x.done == TERMINATED) > 0, "the breaker ends some envs");
}

/// The env's fills are the portfolio backtest's: each trial's env walks the whole universe, and a backtest
/// column gets, at each decision, the env's equal target weights where the env's sides changed on a symbol
/// that trades next (NaN, no order, where they did not). The equity after every step but the last (where
/// the backtest also closes at the end) is the backtest's curve, bit for bit; each step's costs are its
/// fills' costs at that bar.
#[test]
fn the_env_fills_as_the_portfolio_backtest_does() {
    let (n, times) = (6, 70);
    let market = random_universe(n, times, 23);
    let params = trials();
    let steps = times - 1;
    let mut batch = PortfolioEnvBatch::new(&Backend::Cpu, &market, &params, 1).unwrap();
    batch.reset(&vec![(0, times - 1); params.len()]).unwrap();
    let actions = sticky_actions(steps, params.len(), n, 9);
    let scan = batch.scan(&actions, steps).unwrap();
    let k = params.len();
    let mut weights = vec![f64::NAN; k * steps * n];
    for (c, p) in params.iter().enumerate() {
        for i in 0..steps {
            let codes = &actions[(i * k + c) * n..][..n];
            let side = |a: u8| match a {
                1 => 1.0,
                2 if p.allow_short == 1 => -1.0,
                _ => 0.0,
            };
            let held = |s: usize| if i == 0 { 0.0 } else { side(scan.sides[((i - 1) * k + c) * n + s]) };
            let tradable = |s: usize| market.tradable()[(i + 1) * n + s] == 1;
            let changed = (0..n).any(|s| tradable(s) && side(codes[s]) != held(s));
            let step = &scan.steps[i * k + c];
            assert!(!changed || step.valid == 0 || step.rebalanced == 1, "trial {c}, step {i} rebalances");
            let open = codes.iter().filter(|&&a| side(a) != 0.0).count().max(1) as f64;
            if changed {
                for s in 0..n {
                    weights[(c * steps + i) * n + s] = side(codes[s]) * (1.0 - p.cash_reserve_pct) / open;
                }
            }
        }
    }
    // The backtest refuses a cash reserve (its weights say what stays in cash): trial 3's weights carry it.
    let bt_params: Vec<TrialParams> = params.iter().map(|p| TrialParams { cash_reserve_pct: 0.0, ..*p }).collect();
    let spec = BacktestSpec { start: 0, end: steps, bars_per_year: 252.0, risk_free: 0.0, ledger: true, equity: true };
    let r = tradesim::backtest_portfolios(&Backend::Cpu, &market, &bt_params, &weights, &spec).unwrap();
    let mut compared = 0;
    for c in 0..k {
        let fills = r.column_fills(c);
        assert!(fills.len() > 10, "column {c} trades: {}", fills.len());
        for i in 0..steps - 1 {
            let step = &scan.steps[i * k + c];
            if step.valid == 0 {
                continue;
            }
            let curve = r.equity[c * (steps + 1) + i + 1];
            assert_eq!(step.equity.to_bits(), curve.to_bits(), "trial {c}, step {i}: {} vs {curve}", step.equity);
            let bar_costs: f64 = fills
                .iter()
                .filter(|f| f.bar as usize == i + 1 && ExitReason::from_code(f.reason) != ExitReason::EndOfData)
                .map(|f| f.costs)
                .sum();
            close_to(&format!("trial {c}, step {i}: costs"), step.costs, bar_costs);
            compared += 1;
        }
    }
    assert!(compared > 150, "{compared} steps compared");
}

/// The host refuses what the env cannot use, naming it: an action code past SHORT (with its step, env and
/// symbol), barriers and reward normalization, segments past the data, actions of the wrong length.
#[test]
fn the_host_refuses_what_the_env_cannot_use() {
    let market = UniverseMarket::new(vec![bar(10.0, 10.0); 6], vec![1; 6], 2).unwrap();
    let p = TrialParams::frictionless(1_000.0);
    let mut batch = PortfolioEnvBatch::new(&Backend::Cpu, &market, &[p], 2).unwrap();
    batch.reset(&[(0, 2), (0, 2)]).unwrap();
    let err = batch.scan(&[0, 1, 2, 0, 1, 1, 1, 3], 2).unwrap_err();
    assert!(matches!(err, HostError::InvalidSymbolAction { step: 1, env: 1, symbol: 1, code: 3 }), "{err}");
    assert_eq!(batch.accounts().unwrap()[0].bar, 0, "nothing moved");
    let err = batch.scan(&[0; 7], 2).unwrap_err();
    assert!(matches!(err, HostError::Shape { got: 7, .. }), "{err}");
    let err = batch.reset(&[(0, 3), (0, 1)]).unwrap_err().to_string();
    assert!(err.contains("env 0: segment [0, 3]"), "{err}");
    for (field, bad) in [
        ("stop_loss_mult", TrialParams { stop_loss_mult: 1.0, ..p }),
        ("normalize_reward", TrialParams { normalize_reward: 1, ..p }),
        ("spread", TrialParams { spread: -0.1, ..p }),
    ] {
        let err = PortfolioEnvBatch::new(&Backend::Cpu, &market, &[bad], 1).unwrap_err();
        assert!(matches!(err, HostError::InvalidParam { field: f, .. } if f == field), "{err}");
    }
}

/// The CUDA backend gives the CPU's bits: every output after a 40-step scan and after each of 10 one-step
/// scans, on envs that rebalance, hold, hit the breaker, with and without shorts and whole units.
#[test]
fn gpu_matches_cpu_bit_for_bit() {
    let Some(gpu) = common::gpu_backend() else { return };
    let cpu = simulate(&Backend::Cpu, true);
    let device = simulate(&gpu, true);
    for (call, (a, b)) in cpu.iter().zip(&device).enumerate() {
        let first = a.iter().zip(b).position(|(x, y)| x != y);
        assert!(first.is_none() && a.len() == b.len(), "call {call}: first differing word {first:?} of {}", a.len());
    }
    assert_eq!(device, simulate(&gpu, false), "the GPU, step by step");
}
