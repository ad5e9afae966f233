//! The market data a batch of envs walks: the price block (OHLC + sigma, f64) and the feature matrix (f32),
//! both uploaded to the device once.

use gpu_kernels::Bar;

use crate::{HostError, PriceSeries};

/// Default span of the EWMA volatility that sets barrier widths.
pub const DEFAULT_SIGMA_SPAN: usize = 100;

/// EWMA standard deviation of close-to-close log returns, from bars <= t only: with `a = 2 / (span + 1)`,
/// `var_t = (1 - a) var_{t-1} + a r_t^2` (zero-mean, RiskMetrics style), `var_1 = r_1^2`, and sigma 0 at
/// bar 0 (no return yet: barriers are disabled there).
pub fn ewma_sigma(close: &[f64], span: usize) -> Vec<f64> {
    let returns: Vec<f64> =
        (0..close.len()).map(|t| if t == 0 { 0.0 } else { (close[t] / close[t - 1]).ln() }).collect();
    ewma_sigma_of_returns(&returns, span)
}

/// [`ewma_sigma`] from the log returns `returns[t] = ln(close[t] / close[t - 1])` (`returns[0]` unused), for
/// a caller that has them already: the same bits.
pub fn ewma_sigma_of_returns(returns: &[f64], span: usize) -> Vec<f64> {
    let alpha = 2.0 / (span.max(1) as f64 + 1.0);
    let mut out = Vec::with_capacity(returns.len());
    let mut var = 0.0;
    for (t, &r) in returns.iter().enumerate() {
        if t > 0 {
            var = if t == 1 { r * r } else { (1.0 - alpha) * var + alpha * r * r };
        }
        out.push(var.sqrt());
    }
    out
}

/// Bars with sigma plus an `n_bars x n_features` row-major f32 feature matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct MarketData {
    bars: Vec<Bar>,
    features: Vec<f32>,
    n_features: usize,
}

impl MarketData {
    /// Market data from a price series (sigma with `sigma_span`) and its feature matrix.
    pub fn new(
        prices: &PriceSeries,
        sigma_span: usize,
        features: Vec<f32>,
        n_features: usize,
    ) -> Result<Self, HostError> {
        if sigma_span == 0 {
            return Err(HostError::Config("the sigma EWMA span must be at least 1 bar".to_owned()));
        }
        let sigma = ewma_sigma(prices.close(), sigma_span);
        let bars = (0..prices.len())
            .map(|t| Bar {
                open: prices.open()[t],
                high: prices.high()[t],
                low: prices.low()[t],
                close: prices.close()[t],
                sigma: sigma[t],
            })
            .collect();
        Self::from_bars(bars, features, n_features)
    }

    /// Market data from bars whose sigma is given (prices finite and positive, sigma finite and >= 0).
    pub fn from_bars(bars: Vec<Bar>, features: Vec<f32>, n_features: usize) -> Result<Self, HostError> {
        if bars.len() < 2 {
            return Err(HostError::Shape {
                what: "bars (at least 2 to step once)".to_owned(),
                expected: 2,
                got: bars.len(),
            });
        }
        for (bar, b) in bars.iter().enumerate() {
            for (field, value) in [("open", b.open), ("high", b.high), ("low", b.low), ("close", b.close)] {
                if !(value.is_finite() && value > 0.0) {
                    return Err(HostError::InvalidPrice { bar, field, value });
                }
            }
            if !(b.sigma.is_finite() && b.sigma >= 0.0) {
                return Err(HostError::InvalidPrice { bar, field: "sigma", value: b.sigma });
            }
        }
        if features.len() != bars.len() * n_features {
            return Err(HostError::Shape {
                what: format!("feature matrix ({} bars x {n_features} features)", bars.len()),
                expected: bars.len() * n_features,
                got: features.len(),
            });
        }
        if let Some(i) = features.iter().position(|x| !x.is_finite()) {
            return Err(HostError::InvalidFeature { bar: i / n_features, feature: i % n_features });
        }
        Ok(Self { bars, features, n_features })
    }

    /// Market data with no features (portfolio-only runs).
    pub fn prices_only(prices: &PriceSeries) -> Result<Self, HostError> {
        Self::new(prices, DEFAULT_SIGMA_SPAN, Vec::new(), 0)
    }

    /// The price block.
    pub fn bars(&self) -> &[Bar] {
        &self.bars
    }

    /// The feature matrix, row-major.
    pub fn features(&self) -> &[f32] {
        &self.features
    }

    /// Features per bar (F).
    pub fn n_features(&self) -> usize {
        self.n_features
    }

    /// Number of bars.
    pub fn n_bars(&self) -> usize {
        self.bars.len()
    }

    /// Bytes this data takes on the device.
    pub fn device_bytes(&self) -> usize {
        size_of_val(self.bars.as_slice()) + size_of_val(self.features.as_slice())
    }
}

/// The price block of a universe: N symbols on one calendar of T times, time-major (`bars[t x N + s]`),
/// with a flag per cell: 1 where the symbol has a bar at that time. A cell without a bar holds the symbol's
/// last close in every price field (0 before its first bar) and is only ever a valuation price, never a
/// fill's (ENVIRONMENT.md, "Portfolios").
#[derive(Clone, Debug, PartialEq)]
pub struct UniverseMarket {
    bars: Vec<Bar>,
    tradable: Vec<u8>,
    n_symbols: usize,
}

impl UniverseMarket {
    /// The block of `n_symbols` symbols from its cells and flags: at least 2 times; a cell with a bar has
    /// finite positive prices and a finite sigma >= 0; a cell without one a finite close >= 0, 0 only
    /// before the symbol's first bar.
    pub fn new(bars: Vec<Bar>, tradable: Vec<u8>, n_symbols: usize) -> Result<Self, HostError> {
        let n_times = bars.len().checked_div(n_symbols).unwrap_or(0);
        if n_symbols == 0 || n_times < 2 || bars.len() != n_times * n_symbols {
            return Err(HostError::Shape {
                what: format!("universe bars (at least 2 times x {n_symbols} symbols, time-major)"),
                expected: n_times.max(2) * n_symbols.max(1),
                got: bars.len(),
            });
        }
        if tradable.len() != bars.len() {
            return Err(HostError::Shape {
                what: format!("universe bar flags ({n_times} times x {n_symbols} symbols)"),
                expected: bars.len(),
                got: tradable.len(),
            });
        }
        let mut seen = vec![false; n_symbols];
        for (i, (b, &flag)) in bars.iter().zip(&tradable).enumerate() {
            let (time, symbol) = (i / n_symbols, i % n_symbols);
            let bad = |field: &'static str, value: f64| HostError::InvalidUniversePrice { time, symbol, field, value };
            if flag > 1 {
                return Err(bad("flag", f64::from(flag)));
            }
            if flag == 1 {
                for (field, value) in [("open", b.open), ("high", b.high), ("low", b.low), ("close", b.close)] {
                    if !(value.is_finite() && value > 0.0) {
                        return Err(bad(field, value));
                    }
                }
                if !(b.sigma.is_finite() && b.sigma >= 0.0) {
                    return Err(bad("sigma", b.sigma));
                }
                seen[symbol] = true;
            } else if !(b.close.is_finite() && (b.close > 0.0 || (b.close == 0.0 && !seen[symbol]))) {
                return Err(bad("carried close", b.close));
            }
        }
        Ok(Self { bars, tradable, n_symbols })
    }

    /// The cells, time-major.
    pub fn bars(&self) -> &[Bar] {
        &self.bars
    }

    /// 1 where the symbol has a bar, time-major.
    pub fn tradable(&self) -> &[u8] {
        &self.tradable
    }

    /// Symbols (N).
    pub fn n_symbols(&self) -> usize {
        self.n_symbols
    }

    /// Times (T).
    pub fn n_times(&self) -> usize {
        self.bars.len() / self.n_symbols
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigma_uses_past_returns_only() {
        let close = [100.0, 110.0, 99.0, 99.0];
        let s = ewma_sigma(&close, 3); // alpha = 0.5
        let r1 = (1.1f64).ln();
        let r2 = (0.9f64).ln();
        assert_eq!(s[0], 0.0);
        assert!((s[1] - r1.abs()).abs() < 1e-15);
        assert!((s[2] - (0.5 * r1 * r1 + 0.5 * r2 * r2).sqrt()).abs() < 1e-15);
        assert!((s[3] - (0.25 * r1 * r1 + 0.25 * r2 * r2).sqrt()).abs() < 1e-15);
        let mut later = close;
        later[3] = 500.0;
        assert_eq!(ewma_sigma(&later, 3)[..3], s[..3]);
    }

    /// A universe's block: a cell without a bar carries the last close (0 only before the first bar).
    #[test]
    fn universe_cells_without_a_bar_carry_a_close() {
        let bar = |p: f64| Bar { open: p, high: p, low: p, close: p, sigma: 0.0 };
        let bars = vec![bar(0.0), bar(10.0), bar(5.0), bar(10.0), bar(5.0), bar(11.0)];
        let block = UniverseMarket::new(bars.clone(), vec![0, 1, 1, 0, 1, 1], 2).unwrap();
        assert_eq!((block.n_times(), block.n_symbols()), (3, 2));
        let mut after = bars.clone();
        after[4] = bar(0.0);
        let err = UniverseMarket::new(after, vec![0, 1, 1, 0, 0, 1], 2).unwrap_err();
        assert!(matches!(err, HostError::InvalidUniversePrice { time: 2, symbol: 0, .. }), "{err}");
        assert!(UniverseMarket::new(bars, vec![1, 1, 1, 0, 1, 1], 2).is_err(), "a bar at price 0");
    }
}
