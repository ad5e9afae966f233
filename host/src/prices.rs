//! The price block uploaded to the device: f64 columns, validated once.

use crate::HostError;

/// Open, high, low and close columns of one instrument, in bar order.
#[derive(Clone, Debug, PartialEq)]
pub struct PriceSeries {
    open: Vec<f64>,
    high: Vec<f64>,
    low: Vec<f64>,
    close: Vec<f64>,
}

impl PriceSeries {
    /// A series from OHLC columns; every price must be finite and positive and the columns equally long.
    pub fn new(open: Vec<f64>, high: Vec<f64>, low: Vec<f64>, close: Vec<f64>) -> Result<Self, HostError> {
        for (what, col) in [("high", &high), ("low", &low), ("close", &close)] {
            if col.len() != open.len() {
                return Err(HostError::Shape {
                    what: format!("{what} column length (bars of the open column)"),
                    expected: open.len(),
                    got: col.len(),
                });
            }
        }
        for (field, col) in [("open", &open), ("high", &high), ("low", &low), ("close", &close)] {
            if let Some((bar, &value)) = col.iter().enumerate().find(|(_, v)| !(v.is_finite() && **v > 0.0)) {
                return Err(HostError::InvalidPrice { bar, field, value });
            }
        }
        Ok(Self { open, high, low, close })
    }

    /// A series from open and close alone (high and low are their max and min).
    ///
    /// # Panics
    /// When the columns differ in length or hold a price that is not finite and positive; use [`Self::new`]
    /// for data that is not known to be clean.
    pub fn from_open_close(open: Vec<f64>, close: Vec<f64>) -> Self {
        let high = open.iter().zip(&close).map(|(o, c)| o.max(*c)).collect();
        let low = open.iter().zip(&close).map(|(o, c)| o.min(*c)).collect();
        Self::new(open, high, low, close).expect("from_open_close takes clean, equally long columns")
    }

    /// Number of bars.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Whether the series has no bars.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Opens.
    pub fn open(&self) -> &[f64] {
        &self.open
    }

    /// Highs.
    pub fn high(&self) -> &[f64] {
        &self.high
    }

    /// Lows.
    pub fn low(&self) -> &[f64] {
        &self.low
    }

    /// Closes.
    pub fn close(&self) -> &[f64] {
        &self.close
    }
}
