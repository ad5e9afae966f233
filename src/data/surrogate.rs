//! Placebo surrogates: a user's own bars with every predictable direction removed and the rest kept.
//!
//! [`placebo`] mirrors each bar, with probability 1/2, in log space around the previous surrogate close:
//! the gap `ln(open_t / close_(t-1))` and the moves inside the bar, `ln(high / open)`, `ln(low / open)` and
//! `ln(close / open)`, change sign (high and low swap roles), and the series is rebuilt bar by bar from the
//! first bar, which keeps its prices. Every bar's absolute log return, range, gap size, wick lengths and
//! volume stay where they were, so volatility and its clustering survive; the sign of each bar's move becomes
//! a fair coin independent of everything before it, so autocorrelation, drift, trends and the leverage effect
//! (falls followed by larger moves) are gone. A strategy that earns on a surrogate earns on the simulator, not
//! on the market (docs/SYNTHETIC.md).
//!
//! [`placebo_universe`] does the same to every symbol of a universe with one coin per calendar time, shared by
//! all symbols: at a time whose coin says "mirror", every symbol's bar there is mirrored. The cross-section at
//! each time keeps its shape (correlations, dispersion, which symbols moved together; the ranks of the moves
//! all reversed or all kept), and what one time's cross-section says about the next time's signs is gone: a
//! rule such as "tomorrow's best symbol is today's worst" holds under half the coins and reverses under the
//! other half.
//!
//! The arithmetic is Decimal: a mirrored ratio is the inverse ratio (`open'_t = close'_(t-1) * close_(t-1) /
//! open_t`, `high'_t = open'_t * open_t / low_t`, `low'_t = open'_t * open_t / high_t`, `close'_t = open'_t *
//! open_t / close_t`; a kept bar multiplies by the original ratios), and every price is rounded to the
//! input's own scale (the most decimal places of any of its prices), so the surrogate quotes the same tick.
//! Each ratio is a monotone function of the price it moves, and so is the rounding, so low <= open, close <=
//! high holds in the surrogate as in the input.

use rust_decimal::Decimal;

use super::universe::Universe;
use super::{Dataset, MarketBar, Series};
use crate::Error;

/// The stream base of the placebo coins; [`gpu_kernels::rng::keyed`] puts the surrogate's index above it.
const STREAM_PLACEBO: u64 = 0x504c_4342;

/// Whether bar `bar` of surrogate `index` under `seed` is mirrored (a fair coin, counter-based: the same
/// arguments give the same answer on every machine).
pub fn mirrored(seed: u64, index: u64, bar: u64) -> bool {
    gpu_kernels::rng::draw_u64(seed, gpu_kernels::rng::keyed(STREAM_PLACEBO, index), bar) >> 63 == 1
}

/// The `index`-th placebo surrogate of `series` under `seed` (see the module docs). Refuses a series with a
/// price <= 0 or an open or close outside [low, high], or whose surrogate would round a price to zero at the
/// input's scale, with an error naming the symbol, the bar and its time.
pub fn placebo(series: &Series, seed: u64, index: u64) -> Result<Series, Error> {
    placebo_by(series, |t| mirrored(seed, index, t as u64))
}

/// The `index`-th placebo surrogate of universe `u` under `seed`: each symbol's series mirrored at the
/// calendar times whose coin ([`mirrored`] of the time's index on the calendar) says so, the same coin for
/// every symbol (see the module docs). A symbol's first bar is kept; its later bars are rebuilt from its own
/// previous bar, also across times where it has none. Errors as [`placebo`]'s, naming the symbol.
pub fn placebo_universe(u: &Universe, seed: u64, index: u64) -> Result<Universe, Error> {
    let mut series = Vec::with_capacity(u.n_symbols());
    for one in &u.series {
        // Every bar's time is on the calendar (the calendar is the union of the bar times).
        let times: Vec<u64> = one.bars.iter().map(|b| u.time_index(&b.time).map_or(u64::MAX, |t| t as u64)).collect();
        series.push(placebo_by(one, |t| mirrored(seed, index, times[t]))?);
    }
    let source = format!("placebo {index} of {}", u.source);
    Universe::new(Dataset { source, synthetic: u.synthetic, series }, None)
}

/// The surrogate of `series` whose bar `t` (`t >= 1`) is mirrored where `mirror(t)` says so; the first bar is
/// kept. Refuses prices <= 0, an open or close outside [low, high], and a price that overflows or rounds to
/// zero, naming the symbol, the bar and its time.
fn placebo_by(series: &Series, mirror: impl Fn(usize) -> bool) -> Result<Series, Error> {
    let refuse = |t: usize, what: String| {
        let time = series.bars[t].time.to_rfc3339();
        Error::Data(format!("placebo of {}: bar {t} ({time}): {what}", series.symbol))
    };
    for (t, b) in series.bars.iter().enumerate() {
        for (name, v) in [("open", b.open), ("high", b.high), ("low", b.low), ("close", b.close)] {
            if v <= Decimal::ZERO {
                return Err(refuse(t, format!("{name} = {v} is not positive")));
            }
        }
        if b.low > b.open.min(b.close) || b.high < b.open.max(b.close) {
            let prices = format!("open {}, high {}, low {}, close {}", b.open, b.high, b.low, b.close);
            return Err(refuse(t, format!("{prices}: open and close are not within [low, high]")));
        }
    }
    let Some(first) = series.bars.first() else {
        return Ok(series.clone());
    };
    let scale = series.bars.iter().flat_map(|b| [b.open, b.high, b.low, b.close]).map(|d| d.scale()).max();
    let scale = scale.unwrap_or(0);
    let mut bars = Vec::with_capacity(series.bars.len());
    bars.push(first.clone());
    for t in 1..series.bars.len() {
        let mirror = mirror(t);
        let bar =
            surrogate_bar(&series.bars[t - 1], &series.bars[t], &bars[t - 1], mirror, scale, |what| refuse(t, what))?;
        bars.push(bar);
    }
    Ok(Series { symbol: series.symbol.clone(), bars })
}

/// Bar `bar` of the surrogate after its surrogate predecessor `prev_out` (whose original is `prev`), mirrored
/// or kept, rounded to `scale` places; the error (`refuse`'s, from what went wrong) says which price
/// overflowed or rounded to zero.
fn surrogate_bar(
    prev: &MarketBar,
    bar: &MarketBar,
    prev_out: &MarketBar,
    mirror: bool,
    scale: u32,
    refuse: impl Fn(String) -> Error,
) -> Result<MarketBar, Error> {
    // `ratio(a, b)` is a / b for a kept bar and b / a for a mirrored one: the move's log changes sign.
    let ratio = |name: &str, a: Decimal, b: Decimal| {
        let (num, den) = if mirror { (b, a) } else { (a, b) };
        num.checked_div(den).ok_or_else(|| refuse(format!("{name}: {num} / {den} overflows")))
    };
    let scaled = |name: &str, base: Decimal, r: Decimal| {
        let v = base.checked_mul(r).ok_or_else(|| refuse(format!("{name}: {base} * {r} overflows")))?.round_dp(scale);
        if v > Decimal::ZERO {
            Ok(v)
        } else {
            Err(refuse(format!("the surrogate's {name} rounds to {v} at {scale} decimal places")))
        }
    };
    let open = scaled("open", prev_out.close, ratio("open", bar.open, prev.close)?)?;
    // Mirrored, the high comes from the low's move and the low from the high's.
    let (to_high, to_low) = if mirror { (bar.low, bar.high) } else { (bar.high, bar.low) };
    Ok(MarketBar {
        time: bar.time,
        open,
        high: scaled("high", open, ratio("high", to_high, bar.open)?)?,
        low: scaled("low", open, ratio("low", to_low, bar.open)?)?,
        close: scaled("close", open, ratio("close", bar.close, bar.open)?)?,
        volume: bar.volume,
    })
}
