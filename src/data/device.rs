//! The device boundary: Decimal prices become f64 exactly once, here, through `num_traits::ToPrimitive`
//! (never through strings), for one series or a universe; features are computed from those f64 columns
//! and handed over as f32.

use std::ops::Range;

use num_traits::ToPrimitive;
use rayon::prelude::*;
use rust_decimal::Decimal;

use super::Series;
use super::features::{Columns, FeatureMatrix, N_FEATURES, Normalizer};
use super::universe::Universe;
use super::weights::TargetWeights;
use crate::{DEFAULT_SIGMA_SPAN, Error, MarketData, PriceSeries, UniverseMarket};

fn to_f64(x: Decimal, what: &str, t: usize) -> Result<f64, Error> {
    x.to_f64().ok_or_else(|| Error::Data(format!("bar {t}: {what} = {x} has no f64 value")))
}

/// The series' OHLCV and calendar columns as f64.
pub fn columns(series: &Series) -> Result<Columns, Error> {
    // Each bar converts on its own (in parallel); the first failing bar in time order is the error.
    let rows: Vec<Result<[f64; 7], Error>> = series
        .bars
        .par_iter()
        .enumerate()
        .map(|(t, b)| {
            let (hour, weekday) = Columns::calendar(&b.time);
            Ok([
                to_f64(b.open, "open", t)?,
                to_f64(b.high, "high", t)?,
                to_f64(b.low, "low", t)?,
                to_f64(b.close, "close", t)?,
                to_f64(b.volume, "volume", t)?,
                hour,
                weekday,
            ])
        })
        .collect();
    let rows = rows.into_iter().collect::<Result<Vec<_>, _>>()?;
    let col = |i: usize| rows.iter().map(|r| r[i]).collect::<Vec<f64>>();
    Ok(Columns {
        open: col(0),
        high: col(1),
        low: col(2),
        close: col(3),
        volume: col(4),
        hour: col(5),
        weekday: col(6),
    })
}

/// The price block of `series` alone, without features (what a backtest reads): the same bars (prices and
/// sigma) as [`Prepared::market_data`] over the whole series, without computing the 51 features.
pub fn price_market(series: &Series) -> Result<MarketData, Error> {
    let c = columns(series)?;
    let prices = PriceSeries::new(c.open, c.high, c.low, c.close)?;
    Ok(MarketData::new(&prices, DEFAULT_SIGMA_SPAN, Vec::new(), 0)?)
}

/// The price block of a universe: each symbol's bars as f64 (through `ToPrimitive`, as every price) with
/// its own sigma (the EWMA of its own closes, span [`DEFAULT_SIGMA_SPAN`]), placed on the calendar; at a
/// time without its bar a symbol's cell carries its last close (and sigma) in every price field and a 0 flag,
/// and before its first bar zeros ([`UniverseMarket`]).
pub fn universe_market(u: &Universe) -> Result<UniverseMarket, Error> {
    let per_symbol: Vec<Vec<crate::Bar>> = u
        .series
        .par_iter()
        .map(|series| {
            let c = columns(series).map_err(|e| Error::Data(format!("symbol `{}`: {e}", series.symbol)))?;
            let sigma = crate::ewma_sigma(&c.close, DEFAULT_SIGMA_SPAN);
            Ok((0..c.len())
                .map(|i| crate::Bar {
                    open: c.open[i],
                    high: c.high[i],
                    low: c.low[i],
                    close: c.close[i],
                    sigma: sigma[i],
                })
                .collect())
        })
        .collect::<Result<_, Error>>()?;
    let n = u.n_symbols();
    let last = u.last_bar_indices();
    let none = crate::Bar { open: 0.0, high: 0.0, low: 0.0, close: 0.0, sigma: 0.0 };
    let mut bars = Vec::with_capacity(u.n_times() * n);
    let mut tradable = Vec::with_capacity(u.n_times() * n);
    for t in 0..u.n_times() {
        for (s, own) in per_symbol.iter().enumerate() {
            let present = u.bar_index(t, s).is_some();
            let bar = match last[t * n + s] {
                Some(i) if present => own[i],
                Some(i) => crate::Bar { open: own[i].close, high: own[i].close, low: own[i].close, ..own[i] },
                None => none,
            };
            bars.push(bar);
            tradable.push(u8::from(present));
        }
    }
    Ok(UniverseMarket::new(bars, tradable, n)?)
}

/// The target weights of every portfolio as the device takes them: `portfolios x (times - 1) x symbols`
/// f64 (through `ToPrimitive`), NaN where there is no order; an order that cannot fill is not there.
pub fn target_weights(w: &TargetWeights, n_times: usize, n_symbols: usize) -> Result<Vec<f64>, Error> {
    let steps = n_times.saturating_sub(1);
    let mut out = vec![f64::NAN; w.portfolios.len() * steps * n_symbols];
    for o in &w.orders {
        for (c, weight) in o.weights.iter().enumerate() {
            if let Some(x) = weight {
                let value = x.to_f64().ok_or_else(|| {
                    Error::Data(format!(
                        "{}: row {}: weight {x} of `{}` has no f64 value",
                        w.file, o.row, w.portfolios[c]
                    ))
                })?;
                out[(c * steps + o.time) * n_symbols + o.symbol] = value;
            }
        }
    }
    Ok(out)
}

/// A series prepared for the device: its columns, raw features and the normalizer fitted on `train`.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// f64 columns.
    pub columns: Columns,
    /// Raw features of every bar.
    pub features: FeatureMatrix,
    /// Fitted on the training rows only.
    pub normalizer: Normalizer,
    /// Every bar with its sigma over the whole history up to it (computed once; parts are slices).
    bars: Vec<crate::Bar>,
}

impl Prepared {
    /// Converts `series`, computes its features and fits the normalizer on rows `train`; sigma with the
    /// default span ([`DEFAULT_SIGMA_SPAN`]).
    pub fn new(series: &Series, train: Range<usize>) -> Result<Self, Error> {
        Self::with_sigma_span(series, train, DEFAULT_SIGMA_SPAN)
    }

    /// [`Prepared::new`] with the EWMA span (bars) of the sigma that sets barrier widths.
    pub fn with_sigma_span(series: &Series, train: Range<usize>, sigma_span: usize) -> Result<Self, Error> {
        let columns = columns(series)?;
        let features = FeatureMatrix::compute(&columns);
        let normalizer = features.fit(train);
        let c = &columns;
        let prices = PriceSeries::new(c.open.clone(), c.high.clone(), c.low.clone(), c.close.clone())?;
        let bars = MarketData::new(&prices, sigma_span, Vec::new(), 0)?.bars().to_vec();
        Ok(Self { columns, features, normalizer, bars })
    }

    /// Market data of bars `range` (prices, sigma over the whole history up to each bar, normalized
    /// features), ready for an [`crate::EnvBatch`].
    pub fn market_data(&self, range: Range<usize>) -> Result<MarketData, Error> {
        let bars = self
            .bars
            .get(range.clone())
            .ok_or_else(|| Error::Data(format!("bars {range:?} are outside the series' {} bars", self.bars.len())))?;
        Ok(MarketData::from_bars(bars.to_vec(), self.features.normalized(&self.normalizer, range), N_FEATURES)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::synthetic::{GeneratorConfig, generate};

    #[test]
    fn the_price_block_alone_has_the_prepared_bars() {
        let data = generate(&GeneratorConfig { bars: 2_000, ..GeneratorConfig::default() });
        let series = &data.series[0];
        let alone = price_market(series).unwrap();
        let prepared = Prepared::new(series, 0..2_000).unwrap().market_data(0..2_000).unwrap();
        let bits = |m: &MarketData| -> Vec<[u64; 5]> {
            m.bars().iter().map(|b| [b.open, b.high, b.low, b.close, b.sigma].map(f64::to_bits)).collect()
        };
        assert_eq!(alone.bars().len(), 2_000);
        assert_eq!(bits(&alone), bits(&prepared));
    }
}
