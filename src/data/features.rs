//! The 51 market features (docs/FEATURES.md defines each), computed from bars <= t only. Rows before
//! [`WARMUP`] lack a full window and are zero; normalization is fitted on the training rows only.

use std::ops::Range;

use chrono::{Datelike, Timelike};
use rayon::prelude::*;

/// Bars before the first row with every window full (the longest window is the 200-bar SMA).
pub const WARMUP: usize = 200;

/// Number of features per bar.
pub const N_FEATURES: usize = 51;

/// Feature names, in column order.
pub const NAMES: [&str; N_FEATURES] = [
    "logret_1",
    "logret_2",
    "logret_3",
    "logret_5",
    "logret_10",
    "logret_20",
    "ret_1",
    "ret_5",
    "ret_20",
    "ret_60",
    "rvol_5",
    "rvol_20",
    "rvol_60",
    "ewma_vol_100",
    "ewma_vol_20",
    "rvol_ratio_5_60",
    "rsi_14",
    "rsi_6",
    "macd",
    "macd_signal",
    "macd_hist",
    "bb_pct_b_20",
    "bb_width_20",
    "atr_14",
    "stoch_k_14",
    "stoch_d_3",
    "sma_dist_10",
    "sma_dist_20",
    "sma_dist_50",
    "sma_dist_200",
    "sma_10_50",
    "dist_high_20",
    "dist_low_20",
    "range",
    "body",
    "gap",
    "upper_wick",
    "lower_wick",
    "close_location",
    "parkinson_vol_20",
    "garman_klass_vol_20",
    "volume_z_20",
    "volume_z_60",
    "volume_ratio_20",
    "signed_volume_z_20",
    "mfi_14",
    "autocorr_20",
    "hour_sin",
    "hour_cos",
    "weekday_sin",
    "weekday_cos",
];

/// OHLCV columns as f64 (converted once from Decimal by [`super::device`]), plus local calendar fields.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Columns {
    /// Opens.
    pub open: Vec<f64>,
    /// Highs.
    pub high: Vec<f64>,
    /// Lows.
    pub low: Vec<f64>,
    /// Closes.
    pub close: Vec<f64>,
    /// Volumes.
    pub volume: Vec<f64>,
    /// Hour of day plus minutes as a fraction, in the timestamp's own offset.
    pub hour: Vec<f64>,
    /// Day of week, Monday = 0.
    pub weekday: Vec<f64>,
}

impl Columns {
    /// Number of bars.
    pub fn len(&self) -> usize {
        self.close.len()
    }

    /// Whether there are no bars.
    pub fn is_empty(&self) -> bool {
        self.close.is_empty()
    }

    /// Calendar fields of a timestamp.
    pub fn calendar(t: &chrono::DateTime<chrono::FixedOffset>) -> (f64, f64) {
        (f64::from(t.hour()) + f64::from(t.minute()) / 60.0, f64::from(t.weekday().num_days_from_monday()))
    }
}

/// Raw (unnormalized) features, `n x 51` row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureMatrix {
    /// Values; rows before the first computed one ([`WARMUP`] for [`FeatureMatrix::compute`]) are zero.
    pub values: Vec<f64>,
    /// Number of bars.
    pub rows: usize,
}

/// Mean and standard deviation per feature, fitted on training rows.
#[derive(Clone, Debug, PartialEq)]
pub struct Normalizer {
    /// Means.
    pub mean: Vec<f64>,
    /// Standard deviations (1 where a feature is constant on the training rows).
    pub std: Vec<f64>,
}

/// Normalized values are clipped to +-this many standard deviations.
pub const CLIP: f64 = 10.0;

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

fn std(xs: &[f64]) -> f64 {
    let m = mean(xs);
    (xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64).sqrt()
}

fn ratio(a: f64, b: f64) -> f64 {
    if b != 0.0 && a.is_finite() && b.is_finite() { a / b } else { 0.0 }
}

/// A trailing window ending at `t` (inclusive) of length `w` (shorter at the start).
fn window(xs: &[f64], t: usize, w: usize) -> &[f64] {
    &xs[(t + 1).saturating_sub(w)..=t]
}

/// Exponential moving average with `a = 2 / (span + 1)`, seeded with the first value.
fn ema(xs: &[f64], span: f64) -> Vec<f64> {
    let a = 2.0 / (span + 1.0);
    let mut out = Vec::with_capacity(xs.len());
    let mut e = xs.first().copied().unwrap_or(0.0);
    for &x in xs {
        e = a * x + (1.0 - a) * e;
        out.push(e);
    }
    out
}

/// Wilder's RSI with period `n`, in [0, 100] (50 while undefined).
fn rsi(close: &[f64], n: usize) -> Vec<f64> {
    let (mut up, mut down) = (0.0, 0.0);
    let a = 1.0 / n as f64;
    let mut out = vec![50.0; close.len()];
    for t in 1..close.len() {
        let d = close[t] - close[t - 1];
        up = (1.0 - a) * up + a * d.max(0.0);
        down = (1.0 - a) * down + a * (-d).max(0.0);
        out[t] = if up + down > 0.0 { 100.0 * up / (up + down) } else { 50.0 };
    }
    out
}

impl FeatureMatrix {
    /// Computes every feature from `cols`; row t uses bars 0..=t only. Rows before [`WARMUP`] are zero.
    pub fn compute(cols: &Columns) -> Self {
        Self::compute_from(cols, WARMUP)
    }

    /// [`FeatureMatrix::compute`] with rows from `first` on (at least 1: the first bar has no return):
    /// a row before [`WARMUP`] is computed from the bars there are (a lag or window longer than the bars
    /// so far reaches back to the first bar), as a universe's late starters and short calendars need;
    /// rows from [`WARMUP`] on are the same bits whatever `first`.
    pub fn compute_from(cols: &Columns, first: usize) -> Self {
        let n = cols.len();
        let (o, h, l, c, v) = (&cols.open, &cols.high, &cols.low, &cols.close, &cols.volume);
        // The element-wise columns in parallel, the recursive ones (EWMAs, RSIs) concurrently, each in its
        // own order: the same bits as one after another.
        let r: Vec<f64> = (0..n).into_par_iter().map(|t| if t == 0 { 0.0 } else { (c[t] / c[t - 1]).ln() }).collect();
        let sigmas = || {
            rayon::join(
                || tradesim_host::ewma_sigma_of_returns(&r, 100),
                || tradesim_host::ewma_sigma_of_returns(&r, 20),
            )
        };
        let rsis = || rayon::join(|| rsi(c, 14), || rsi(c, 6));
        let macd = || {
            let (ema12, ema26) = rayon::join(|| ema(c, 12.0), || ema(c, 26.0));
            let macd: Vec<f64> = ema12.iter().zip(&ema26).map(|(a, b)| a - b).collect();
            let signal = ema(&macd, 9.0);
            (macd, signal)
        };
        let atr = || {
            let tr: Vec<f64> = (0..n)
                .into_par_iter()
                .map(|t| {
                    if t == 0 {
                        h[t] - l[t]
                    } else {
                        (h[t] - l[t]).max((h[t] - c[t - 1]).abs()).max((l[t] - c[t - 1]).abs())
                    }
                })
                .collect();
            ema(&tr, 2.0 * 14.0 - 1.0)
        };
        let (((sigma100, sigma20), (rsi14, rsi6)), ((macd, signal), atr)) =
            rayon::join(|| rayon::join(sigmas, rsis), || rayon::join(macd, atr));
        let stoch_k: Vec<f64> = (0..n)
            .into_par_iter()
            .map(|t| {
                let hh = window(h, t, 14).iter().copied().fold(f64::MIN, f64::max);
                let ll = window(l, t, 14).iter().copied().fold(f64::MAX, f64::min);
                if hh > ll { (c[t] - ll) / (hh - ll) } else { 0.5 }
            })
            .collect();
        let log_vol: Vec<f64> = v.par_iter().map(|x| x.max(0.0).ln_1p()).collect();
        let typical: Vec<f64> = (0..n).into_par_iter().map(|t| (h[t] + l[t] + c[t]) / 3.0).collect();
        // The range estimators' logarithms, once a bar (each row reads 20 of each, in the same order).
        let log_hl: Vec<f64> = (0..n).into_par_iter().map(|u| (h[u] / l[u]).ln()).collect();
        let log_co: Vec<f64> = (0..n).into_par_iter().map(|u| (c[u] / o[u]).ln()).collect();
        let sma = |t: usize, w: usize| mean(window(c, t, w));
        let mut values = vec![0.0; n * N_FEATURES];
        // Rows are independent (each reads the series only): computed in parallel, the same bits as in order.
        let first = first.clamp(1, WARMUP).min(n);
        values[first * N_FEATURES..].par_chunks_mut(N_FEATURES).enumerate().for_each(|(i, row)| {
            let t = first + i;
            let lag = |k: usize| c[t.saturating_sub(k)];
            for (i, k) in [1, 2, 3, 5, 10, 20].into_iter().enumerate() {
                row[i] = (c[t] / lag(k)).ln();
            }
            for (i, k) in [1, 5, 20, 60].into_iter().enumerate() {
                row[6 + i] = c[t] / lag(k) - 1.0;
            }
            let (rv5, rv20, rv60) = (std(window(&r, t, 5)), std(window(&r, t, 20)), std(window(&r, t, 60)));
            // The ratio is 0 where undefined (no 60-bar variation), not -1.
            let rvol_ratio = if rv60 > 0.0 { ratio(rv5, rv60) - 1.0 } else { 0.0 };
            row[10..16].copy_from_slice(&[rv5, rv20, rv60, sigma100[t], sigma20[t], rvol_ratio]);
            row[16] = rsi14[t] / 100.0 - 0.5;
            row[17] = rsi6[t] / 100.0 - 0.5;
            row[18] = macd[t] / c[t];
            row[19] = signal[t] / c[t];
            row[20] = (macd[t] - signal[t]) / c[t];
            let (m20, s20) = (sma(t, 20), std(window(c, t, 20)));
            row[21] = if s20 > 0.0 { (c[t] - (m20 - 2.0 * s20)) / (4.0 * s20) } else { 0.5 };
            row[22] = 4.0 * s20 / m20;
            row[23] = atr[t] / c[t];
            row[24] = stoch_k[t] - 0.5;
            row[25] = mean(window(&stoch_k, t, 3)) - 0.5;
            let (s10, s50) = (sma(t, 10), sma(t, 50));
            row[26] = c[t] / s10 - 1.0;
            row[27] = c[t] / m20 - 1.0;
            row[28] = c[t] / s50 - 1.0;
            row[29] = c[t] / sma(t, 200) - 1.0;
            row[30] = s10 / s50 - 1.0;
            row[31] = c[t] / window(h, t, 20).iter().copied().fold(f64::MIN, f64::max) - 1.0;
            row[32] = c[t] / window(l, t, 20).iter().copied().fold(f64::MAX, f64::min) - 1.0;
            row[33] = (h[t] - l[t]) / c[t];
            row[34] = c[t] / o[t] - 1.0;
            row[35] = o[t] / c[t - 1] - 1.0;
            row[36] = (h[t] - o[t].max(c[t])) / c[t];
            row[37] = (o[t].min(c[t]) - l[t]) / c[t];
            row[38] = if h[t] > l[t] { (c[t] - l[t]) / (h[t] - l[t]) - 0.5 } else { 0.0 };
            let (hl, co) = (window(&log_hl, t, 20), window(&log_co, t, 20));
            // 20 bars from WARMUP on (the same bits as a constant 20); fewer before.
            let bars = hl.len() as f64;
            row[39] = (hl.iter().map(|x| x * x).sum::<f64>() / (bars * 4.0 * std::f64::consts::LN_2)).sqrt();
            let gk: f64 =
                hl.iter().zip(co).map(|(a, b)| 0.5 * a * a - (2.0 * std::f64::consts::LN_2 - 1.0) * b * b).sum();
            row[40] = (gk / bars).max(0.0).sqrt();
            let z = |w: usize| ratio(log_vol[t] - mean(window(&log_vol, t, w)), std(window(&log_vol, t, w)));
            row[41] = z(20);
            row[42] = z(60);
            row[43] = ((1.0 + v[t].max(0.0)) / (1.0 + mean(window(v, t, 20)).max(0.0))).ln();
            // sign(0) = 0 (f64::signum is +1 at +0).
            row[44] = if r[t] > 0.0 {
                row[41]
            } else if r[t] < 0.0 {
                -row[41]
            } else {
                0.0
            };
            let (mut pos, mut neg) = (0.0, 0.0);
            for u in t.saturating_sub(13).max(1)..=t {
                let flow = typical[u] * v[u].max(0.0);
                if typical[u] > typical[u - 1] {
                    pos += flow;
                } else if typical[u] < typical[u - 1] {
                    neg += flow;
                }
            }
            row[45] = if pos + neg > 0.0 { pos / (pos + neg) - 0.5 } else { 0.0 };
            let (a, b) = (window(&r, t - 1, 20), window(&r, t, 20));
            let (ma, mb) = (mean(a), mean(b));
            let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
            row[46] = ratio(
                cov,
                (a.iter().map(|x| (x - ma).powi(2)).sum::<f64>() * b.iter().map(|y| (y - mb).powi(2)).sum::<f64>())
                    .sqrt(),
            );
            let (hour, day) =
                (cols.hour[t] * std::f64::consts::TAU / 24.0, cols.weekday[t] * std::f64::consts::TAU / 7.0);
            row[47..51].copy_from_slice(&[hour.sin(), hour.cos(), day.sin(), day.cos()]);
            for x in row.iter_mut() {
                if !x.is_finite() {
                    *x = 0.0;
                }
            }
        });
        Self { values, rows: n }
    }

    /// Feature `j` of row `t`.
    pub fn get(&self, t: usize, j: usize) -> f64 {
        self.values[t * N_FEATURES + j]
    }

    /// Fits means and standard deviations on rows `train` (which must lie after the warm-up).
    pub fn fit(&self, train: Range<usize>) -> Normalizer {
        let rows = train.start.max(WARMUP)..train.end.min(self.rows);
        let count = rows.len().max(1) as f64;
        let mut mean = vec![0.0; N_FEATURES];
        let mut var = vec![0.0; N_FEATURES];
        for t in rows.clone() {
            for (j, m) in mean.iter_mut().enumerate() {
                *m += self.get(t, j) / count;
            }
        }
        for t in rows {
            for (j, s) in var.iter_mut().enumerate() {
                *s += (self.get(t, j) - mean[j]).powi(2) / count;
            }
        }
        let std = var.into_iter().map(|s| if s > 1e-24 { s.sqrt() } else { 1.0 }).collect();
        Normalizer { mean, std }
    }

    /// Rows `range`, normalized with `norm` and clipped to +-[`CLIP`], as the f32 matrix the device takes.
    pub fn normalized(&self, norm: &Normalizer, range: Range<usize>) -> Vec<f32> {
        let mut out = vec![0.0; range.len() * N_FEATURES];
        // Each value on its own: rows in parallel.
        out.par_chunks_mut(N_FEATURES).zip(range.into_par_iter()).for_each(|(row, t)| {
            for (j, x) in row.iter_mut().enumerate() {
                *x = ((self.get(t, j) - norm.mean[j]) / norm.std[j]).clamp(-CLIP, CLIP) as f32;
            }
        });
        out
    }
}
