//! The device boundary: Decimal prices become f64 exactly once, here, through `num_traits::ToPrimitive`
//! (never through strings); features are computed from those f64 columns and handed over as f32.

use std::ops::Range;

use num_traits::ToPrimitive;
use rust_decimal::Decimal;

use super::Series;
use super::features::{Columns, FeatureMatrix, N_FEATURES, Normalizer};
use crate::{DEFAULT_SIGMA_SPAN, HostError, MarketData, PriceSeries};

fn to_f64(x: Decimal, what: &str, t: usize) -> Result<f64, HostError> {
    x.to_f64().ok_or_else(|| HostError::Config(format!("bar {t}: {what} = {x} has no f64 value")))
}

/// The series' OHLCV and calendar columns as f64.
pub fn columns(series: &Series) -> Result<Columns, HostError> {
    let mut cols = Columns::default();
    for (t, b) in series.bars.iter().enumerate() {
        cols.open.push(to_f64(b.open, "open", t)?);
        cols.high.push(to_f64(b.high, "high", t)?);
        cols.low.push(to_f64(b.low, "low", t)?);
        cols.close.push(to_f64(b.close, "close", t)?);
        cols.volume.push(to_f64(b.volume, "volume", t)?);
        let (hour, weekday) = Columns::calendar(&b.time);
        cols.hour.push(hour);
        cols.weekday.push(weekday);
    }
    Ok(cols)
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
}

impl Prepared {
    /// Converts `series`, computes its features and fits the normalizer on rows `train`.
    pub fn new(series: &Series, train: Range<usize>) -> Result<Self, HostError> {
        let columns = columns(series)?;
        let features = FeatureMatrix::compute(&columns);
        let normalizer = features.fit(train);
        Ok(Self { columns, features, normalizer })
    }

    /// Market data of bars `range` (prices, sigma over the whole history up to each bar, normalized
    /// features), ready for an [`crate::EnvBatch`].
    pub fn market_data(&self, range: Range<usize>) -> Result<MarketData, HostError> {
        let c = &self.columns;
        let prices = PriceSeries::new(c.open.clone(), c.high.clone(), c.low.clone(), c.close.clone())?;
        let full = MarketData::new(&prices, DEFAULT_SIGMA_SPAN, Vec::new(), 0)?;
        let bars = full.bars()[range.clone()].to_vec();
        MarketData::from_bars(bars, self.features.normalized(&self.normalizer, range), N_FEATURES)
    }
}
