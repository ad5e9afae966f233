//! The seed's experience loop, rebuilt for variants (a) and (b) of W1: one trial at a time, bar by bar, the
//! portfolio in `Decimal`, the observation assembled as f32 (features + 3 portfolio floats), full observations
//! stored twice per transition in a replay ring. Variant (a) crosses every Decimal -> float boundary with
//! `to_string().parse::<f32>()` (the seed before its Phase 0 fix), variant (b) with `ToPrimitive`.

use num_traits::ToPrimitive;
use rust_decimal::Decimal;

use crate::data::MarketBar;

/// How a Decimal becomes an f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conversion {
    /// `x.to_string().parse::<f32>()` (variant a).
    ViaString,
    /// `ToPrimitive::to_f32` (variant b).
    ToPrimitive,
}

fn to_f32(x: Decimal, how: Conversion) -> f32 {
    match how {
        Conversion::ViaString => x.to_string().parse::<f32>().unwrap_or(f32::NAN),
        Conversion::ToPrimitive => x.to_f32().unwrap_or(f32::NAN),
    }
}

/// A stored transition of the seed: both full observations.
#[derive(Clone, Debug)]
struct SeedTransition {
    state: Vec<f32>,
    next_state: Vec<f32>,
    action: u8,
    reward: f32,
}

/// Runs `trials` trials over `bars` with `actions[trial * (n - 1) + t]` (0 flat, 1 long, 2 short), spread
/// and commission as Decimal fractions; `features` is the `n x f` f32 matrix. Returns transitions made and a
/// checksum of the rewards (so the work cannot be optimized away).
pub fn seed_experience(
    bars: &[MarketBar],
    features: &[f32],
    n_features: usize,
    actions: &[u8],
    trials: usize,
    how: Conversion,
) -> (usize, f64) {
    let n = bars.len();
    let (spread, commission, capital) = (Decimal::new(2, 4), Decimal::new(1, 4), Decimal::from(100_000));
    let half = spread / Decimal::TWO;
    let capacity = 100_000;
    let mut ring: Vec<SeedTransition> = Vec::with_capacity(capacity);
    let (mut made, mut checksum) = (0usize, 0.0f64);
    for trial in 0..trials {
        let (mut cash, mut units, mut position, mut entry) = (capital, Decimal::ZERO, 0i32, Decimal::ZERO);
        let state_of = |t: usize, cash: Decimal, units: Decimal, position: i32, entry: Decimal| {
            let close = bars[t].close;
            let equity = cash + units * close;
            let open_return =
                if position != 0 { (close / entry - Decimal::ONE) * Decimal::from(position) } else { Decimal::ZERO };
            let mut s = Vec::with_capacity(n_features + 3);
            s.extend_from_slice(&features[t * n_features..(t + 1) * n_features]);
            s.push(to_f32(Decimal::from(position), how));
            s.push(to_f32(open_return, how));
            s.push(to_f32(equity / capital - Decimal::ONE, how));
            (s, equity)
        };
        for t in 0..n - 1 {
            let (state, equity) = state_of(t, cash, units, position, entry);
            let action = actions[trial * (n - 1) + t];
            let target = match action {
                1 => 1,
                2 => -1,
                _ => 0,
            };
            if target != position {
                let open = bars[t + 1].open;
                if position != 0 {
                    let fill =
                        if units > Decimal::ZERO { open * (Decimal::ONE - half) } else { open * (Decimal::ONE + half) };
                    cash += units * fill - commission * units.abs() * fill;
                    units = Decimal::ZERO;
                }
                if target != 0 && cash > Decimal::ZERO {
                    let fill = if target > 0 { open * (Decimal::ONE + half) } else { open * (Decimal::ONE - half) };
                    let size = (cash / fill).round_dp(8);
                    units = if target > 0 { size } else { -size };
                    cash -= units * fill + commission * size * fill;
                    entry = fill;
                }
                position = if units == Decimal::ZERO { 0 } else { target };
            }
            let (next_state, next_equity) = state_of(t + 1, cash, units, position, entry);
            let ratio = to_f32(next_equity / equity, how);
            let reward = if ratio > 0.0 { ratio.ln() } else { -27.6 };
            checksum += f64::from(reward);
            let transition = SeedTransition { state, next_state, action, reward };
            if ring.len() < capacity {
                ring.push(transition);
            } else {
                ring[made % capacity] = transition;
            }
            made += 1;
        }
    }
    let stored: f32 = ring.iter().map(|t| t.state[0] + t.next_state[0] + t.reward + f32::from(t.action)).sum();
    (made, checksum + f64::from(stored) * 0.0)
}
