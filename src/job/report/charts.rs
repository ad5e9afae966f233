//! The report's charts: line charts drawn with plotters (learning curves, optimization history, the best
//! trial's equity and drawdown), the parameter importances and parallel coordinates as hand-written SVG, and
//! every chart rasterized to PNG in a bundled font.

use std::fmt::Write as _;

use plotters::prelude::*;

use super::format::{html_escape, param};
use crate::Error;
use crate::data::Series;
use crate::hyperopt::best::BestOnTest;
use crate::hyperopt::config::{Dimension, SearchConfig};
use crate::hyperopt::study::{EpochRecord, TrialRecord};

/// A line chart: `lines` (NaN points left out), `markers` drawn as crosses, x labels by `x_label` (dates, say),
/// the y axis over `y_range` when given (points outside are drawn at its edge), else over the data.
struct Chart<'a> {
    title: String,
    y_desc: &'a str,
    lines: Vec<(String, Vec<(f64, f64)>)>,
    markers: Vec<(String, Vec<(f64, f64)>)>,
    x_label: Option<&'a (dyn Fn(f64) -> String + Sync)>,
    y_range: Option<(f64, f64)>,
    /// The columns its lines are thinned to ([`m4`]).
    columns: usize,
}

impl<'a> Chart<'a> {
    fn new(title: impl Into<String>, y_desc: &'a str, lines: Vec<(String, Vec<(f64, f64)>)>) -> Self {
        Self {
            title: title.into(),
            y_desc,
            lines,
            markers: Vec::new(),
            x_label: None,
            y_range: None,
            columns: LINE_COLUMNS,
        }
    }

    fn svg(&self) -> Result<String, Error> {
        let title = self.title.as_str();
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (900, 320)).into_drawing_area();
            let e = |e: &dyn std::fmt::Display| Error::Output(format!("drawing {title}: {e}"));
            root.fill(&WHITE).map_err(|x| e(&x))?;
            let points = self.lines.iter().chain(&self.markers).flat_map(|l| l.1.iter()).filter(|p| p.1.is_finite());
            let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
            for &(x, y) in points {
                (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
            }
            if let Some((lo, hi)) = self.y_range {
                (y0, y1) = (lo, hi);
            }
            if x0 > x1 {
                (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
            }
            if x1 - x0 < 1e-12 {
                x1 = x0 + 1.0;
            }
            if y1 - y0 < 1e-12 {
                (y0, y1) = (y0 - 1.0, y1 + 1.0);
            }
            let clamp = |p: &(f64, f64)| (p.0, p.1.clamp(y0, y1));
            let mut c = ChartBuilder::on(&root)
                .caption(title, ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(30)
                .y_label_area_size(70)
                .build_cartesian_2d(x0..x1, y0..y1)
                .map_err(|x| e(&x))?;
            // Trial numbers and epochs: whole ticks only.
            let default_x = |x: &f64| if (x - x.round()).abs() > 1e-9 { String::new() } else { format!("{x:.0}") };
            let x_fmt = |x: &f64| self.x_label.map_or_else(|| default_x(x), |f| f(*x));
            c.configure_mesh().y_desc(self.y_desc).x_labels(6).x_label_formatter(&x_fmt).draw().map_err(|x| e(&x))?;
            for (i, (name, pts)) in self.lines.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                let finite: Vec<(f64, f64)> = pts.iter().filter(|p| p.1.is_finite()).map(clamp).collect();
                c.draw_series(LineSeries::new(m4(finite, self.columns), color.stroke_width(2)))
                    .map_err(|x| e(&x))?
                    .label(name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
            }
            for (i, (name, pts)) in self.markers.iter().enumerate() {
                let color = if i == 0 { RED.to_rgba() } else { Palette99::pick(i + 5).to_rgba() };
                let finite: Vec<(f64, f64)> = pts.iter().filter(|p| p.1.is_finite()).map(clamp).collect();
                c.draw_series(finite.into_iter().map(|p| Cross::new(p, 5, color.stroke_width(2))))
                    .map_err(|x| e(&x))?
                    .label(name.clone())
                    .legend(move |(x, y)| Cross::new((x + 8, y), 5, color.stroke_width(2)));
            }
            if self.lines.len() + self.markers.len() > 1 {
                c.configure_series_labels()
                    .border_style(BLACK)
                    .background_style(WHITE.mix(0.8))
                    .draw()
                    .map_err(|x| e(&x))?;
            }
            root.present().map_err(|x| e(&x))?;
        }
        Ok(svg)
    }
}

/// The columns a line chart's lines are thinned to ([`m4`]): the PNG's width (twice the SVG's 900).
const LINE_COLUMNS: usize = 1800;

/// The points of line `pts` (x non-decreasing) that draw it at `columns` columns of equal x width: each
/// column's first, lowest, highest and last point, in x order (M4 aggregation: the line through them covers
/// the pixels the whole line covers where a column is at most a pixel wide): a test split's equity has a
/// point a bar, more than the chart can show. A line of at most `4 columns` points, or whose x is not in
/// order, is kept whole.
fn m4(pts: Vec<(f64, f64)>, columns: usize) -> Vec<(f64, f64)> {
    if pts.len() <= 4 * columns || !pts.windows(2).all(|w| w[0].0 <= w[1].0) {
        return pts;
    }
    let (x0, x1) = (pts[0].0, pts[pts.len() - 1].0);
    if x1 <= x0 {
        return pts;
    }
    let column = |x: f64| (((x - x0) / (x1 - x0) * columns as f64) as usize).min(columns - 1);
    let mut out = Vec::with_capacity(4 * columns);
    let mut i = 0;
    while i < pts.len() {
        let c = column(pts[i].0);
        let (mut j, mut lo, mut hi) = (i, i, i);
        while j < pts.len() && column(pts[j].0) == c {
            if pts[j].1 < pts[lo].1 {
                lo = j;
            }
            if pts[j].1 > pts[hi].1 {
                hi = j;
            }
            j += 1;
        }
        let mut keep = [i, lo, hi, j - 1];
        keep.sort_unstable();
        let mut last = usize::MAX;
        for k in keep {
            if k != last {
                out.push(pts[k]);
                last = k;
            }
        }
        i = j;
    }
    out
}

/// A line chart of `lines` titled `title` with the y axis `y_desc` (the universe report's equity).
pub(super) fn line_svg(title: &str, y_desc: &str, lines: Vec<(String, Vec<(f64, f64)>)>) -> Result<String, Error> {
    Chart::new(title, y_desc, lines).svg()
}

/// The y range that keeps one outlier from flattening the rest: the 5th to 95th percentile widened by half
/// its width on each side, or `None` when every value fits in it (then the axis spans the data).
fn robust_range(values: &[f64]) -> Option<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.len() < 5 {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    let (lo, hi) = (q(0.05), q(0.95));
    let pad = 0.5 * (hi - lo).max(1e-9);
    let (lo, hi) = (lo - pad, hi + pad);
    (v[0] < lo || v[v.len() - 1] > hi).then_some((lo, hi))
}

/// The font every PNG chart is drawn with: DejaVu Sans, bundled (Bitstream Vera license,
/// `assets/fonts/LICENSE-DejaVu.txt`), so the images do not depend on the fonts of the machine.
const FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

/// An SVG chart rasterized to PNG (resvg) at twice its size, text in the bundled font.
pub fn png_of(svg: &str) -> Result<Vec<u8>, Error> {
    let pixmap = render(svg)?;
    // Straight (not premultiplied) RGBA, as tiny-skia's own encoder writes it, deflated by the encoder's
    // fast mode (fdeflate) rather than its default: the report is written on the search's path, and larger
    // files cost less than the default's deflating (docs/PERFORMANCE.md).
    let (w, h) = (pixmap.width(), pixmap.height());
    let encode = || -> Result<Vec<u8>, png::EncodingError> {
        let mut data = Vec::new();
        let mut encoder = png::Encoder::new(&mut data, w, h);
        encoder.set_color(png::ColorType::Rgba);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::Fast);
        let mut writer = encoder.write_header()?;
        writer.write_image_data(&pixmap.take_demultiplied())?;
        writer.finish()?;
        Ok(data)
    };
    encode().map_err(|e| Error::Output(format!("encoding a PNG: {e}")))
}

/// An SVG chart drawn at twice its size on white (resvg), text in the bundled font.
fn render(svg: &str) -> Result<resvg::tiny_skia::Pixmap, Error> {
    use resvg::{tiny_skia, usvg};
    let mut opt = usvg::Options::default();
    {
        let db = opt.fontdb_mut();
        db.load_font_data(FONT.to_vec());
        db.set_sans_serif_family("DejaVu Sans");
        db.set_serif_family("DejaVu Sans");
        db.set_monospace_family("DejaVu Sans");
    }
    opt.font_family = "DejaVu Sans".to_owned();
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| Error::Output(format!("rasterizing a chart: {e}")))?;
    let size = tree.size().to_int_size();
    let (w, h) = (size.width() * 2, size.height() * 2);
    let mut pixmap =
        tiny_skia::Pixmap::new(w, h).ok_or_else(|| Error::Output("rasterizing a chart: empty image".to_owned()))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::from_scale(2.0, 2.0), &mut pixmap.as_mut());
    Ok(pixmap)
}

/// Average ranks (ties share the mean rank) of `v`.
fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        for k in i..=j {
            r[idx[k]] = (i + j) as f64 / 2.0;
        }
        i = j + 1;
    }
    r
}

/// Parameter importances: the absolute Spearman rank correlation of each searched parameter with the
/// objective over the complete trials with a finite value, normalized to sum to 1 (0 for a parameter that
/// never varied). A quick, model-free measure; Optuna's default (fANOVA) fits a random forest instead.
pub fn importances(trials: &[TrialRecord], names: &[String]) -> Vec<(String, f64)> {
    let mut done: Vec<&TrialRecord> = trials.iter().filter(|t| t.status == "complete" && t.value.is_finite()).collect();
    if done.len() > CHART_TRIALS {
        done.sort_by(|a, b| b.value.total_cmp(&a.value).then(a.number.cmp(&b.number)));
        done.truncate(CHART_TRIALS);
    }
    let value_ranks = ranks(&done.iter().map(|t| t.value).collect::<Vec<_>>());
    let spearman = |xs: &[f64]| -> f64 {
        let rx = ranks(xs);
        let n = rx.len() as f64;
        let (mx, my) = (rx.iter().sum::<f64>() / n, value_ranks.iter().sum::<f64>() / n);
        let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
        for (a, b) in rx.iter().zip(&value_ranks) {
            sxy += (a - mx) * (b - my);
            sxx += (a - mx) * (a - mx);
            syy += (b - my) * (b - my);
        }
        if sxx == 0.0 || syy == 0.0 { 0.0 } else { (sxy / (sxx * syy).sqrt()).abs() }
    };
    let raw: Vec<(String, f64)> = names
        .iter()
        .map(|n| {
            let xs: Vec<f64> = done.iter().map(|t| t.params.get(n).copied().unwrap_or(f64::NAN)).collect();
            (n.clone(), if done.len() < 3 || xs.iter().any(|x| x.is_nan()) { 0.0 } else { spearman(&xs) })
        })
        .collect();
    let total: f64 = raw.iter().map(|r| r.1).sum();
    let mut out: Vec<(String, f64)> =
        raw.into_iter().map(|(n, v)| (n, if total > 0.0 { v / total } else { 0.0 })).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// Horizontal bars of the importances (SVG).
fn importance_svg(imp: &[(String, f64)]) -> String {
    let (w, row) = (900.0, 22.0);
    let h = 40.0 + row * imp.len() as f64;
    let mut svg = format!(
        "<svg width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" xmlns=\"http://www.w3.org/2000/svg\" \
         font-family=\"sans-serif\" font-size=\"12\"><text x=\"450\" y=\"18\" text-anchor=\"middle\" \
         font-size=\"15\">Parameter importances (|Spearman rank correlation| with the value, normalized)</text>"
    );
    for (i, (name, v)) in imp.iter().enumerate() {
        let y = 32.0 + row * i as f64;
        let bar = 600.0 * v;
        let _ = write!(
            svg,
            "<text x=\"175\" y=\"{:.1}\" text-anchor=\"end\">{}</text><rect x=\"180\" y=\"{y:.1}\" width=\"{bar:.1}\" \
             height=\"{:.1}\" fill=\"#4c72b0\"/><text x=\"{:.1}\" y=\"{:.1}\">{v:.2}</text>",
            y + 14.0,
            html_escape(name),
            row - 6.0,
            185.0 + bar,
            y + 14.0
        );
    }
    svg + "</svg>"
}

/// Parallel coordinates (SVG): one axis per parameter (log scale for log ranges) and the value last; one line
/// per complete trial (the [`CHART_TRIALS`] best), colored from blue (worst) to red (best).
fn parallel_svg(trials: &[TrialRecord], names: &[String], cfg: &SearchConfig) -> String {
    let mut done: Vec<&TrialRecord> = trials.iter().filter(|t| t.status == "complete" && t.value.is_finite()).collect();
    if done.len() > CHART_TRIALS {
        done.sort_by(|a, b| b.value.total_cmp(&a.value).then(a.number.cmp(&b.number)));
        done.truncate(CHART_TRIALS);
    }
    let mut axes: Vec<String> = names.to_vec();
    axes.push("value".to_owned());
    let (w, h, top, bottom) = (900.0, 360.0, 40.0, 310.0);
    let step = (w - 120.0) / (axes.len().max(2) - 1) as f64;
    let log = |n: &str| matches!(cfg.space.get(n), Some(Dimension::Range { log: true, .. }));
    let get = |t: &TrialRecord, n: &str| -> f64 {
        let v = if n == "value" { t.value } else { t.params.get(n).copied().unwrap_or(f64::NAN) };
        if log(n) && v > 0.0 { v.ln() } else { v }
    };
    let bounds: Vec<(f64, f64)> = axes
        .iter()
        .map(|n| {
            done.iter()
                .map(|t| get(t, n))
                .filter(|v| v.is_finite())
                .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)))
        })
        .collect();
    let mut svg = format!(
        "<svg width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" xmlns=\"http://www.w3.org/2000/svg\" \
         font-family=\"sans-serif\" font-size=\"11\"><text x=\"450\" y=\"18\" text-anchor=\"middle\" \
         font-size=\"15\">Parallel coordinates of the complete trials (color: value, blue worst, red best)</text>"
    );
    let (vlo, vhi) = *bounds.last().unwrap_or(&(0.0, 1.0));
    for t in &done {
        let frac = if vhi > vlo { (t.value - vlo) / (vhi - vlo) } else { 0.5 };
        let color = format!("rgb({},{},{})", (255.0 * frac) as u8, 60, (255.0 * (1.0 - frac)) as u8);
        let pts: Vec<String> = axes
            .iter()
            .zip(&bounds)
            .enumerate()
            .map(|(i, (n, (lo, hi)))| {
                let v = get(t, n);
                let f = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
                format!("{:.1},{:.1}", 60.0 + step * i as f64, bottom - f * (bottom - top))
            })
            .collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>",
            pts.join(" ")
        );
    }
    for (i, (n, (lo, hi))) in axes.iter().zip(&bounds).enumerate() {
        let x = 60.0 + step * i as f64;
        let shown = |v: f64| if log(n) { param(v.exp()) } else { param(v) };
        let (lo_s, hi_s) = if lo <= hi { (shown(*lo), shown(*hi)) } else { (String::new(), String::new()) };
        let _ = write!(
            svg,
            "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{bottom}\" stroke=\"#333\"/><text x=\"{x:.1}\" \
             y=\"{:.1}\" text-anchor=\"middle\">{}</text><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{hi_s}</text>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{lo_s}</text>",
            // Neighbouring names alternate between two rows so that long ones do not overlap.
            bottom + if i % 2 == 0 { 30.0 } else { 44.0 },
            html_escape(n),
            top - 6.0,
            bottom + 14.0
        );
    }
    svg + "</svg>"
}

/// The most trials whose learning curves the chart draws (the best of the leaderboard) and whose lines the
/// parallel coordinates draw (the best complete ones): a 100,000-trial study's page stays small and quick to
/// draw; the leaderboard files keep every trial.
pub(super) const CHART_TRIALS: usize = 500;
/// The most trials whose markers the optimization history draws; beyond it every k-th trial by number is
/// drawn (k the smallest that fits), and every trial that raised the best value so far.
pub(super) const HISTORY_POINTS: usize = 5000;

/// The epochs of trial `number` in `epochs` (sorted by trial, then epoch, as [`Study::epochs`] gives them).
///
/// [`Study::epochs`]: crate::hyperopt::study::Study::epochs
pub(super) fn epochs_of(epochs: &[EpochRecord], number: u64) -> &[EpochRecord] {
    let lo = epochs.partition_point(|e| e.trial < number);
    let hi = epochs.partition_point(|e| e.trial <= number);
    &epochs[lo..hi]
}

/// The learning-curves chart and how its y axis was clipped.
#[derive(Debug)]
pub(super) struct LearningCurves {
    /// The chart (SVG).
    pub svg: String,
    /// The y range when [`robust_range`] clipped it, and how many values lie outside it.
    pub clip: Option<((f64, f64), usize)>,
}

/// Intermediate values: each epoch's validation Sharpe of the first [`CHART_TRIALS`] trials of `board` (the
/// best), pruned trials marked where they were pruned, the y axis clipped by [`robust_range`].
pub(super) fn learning_curves(board: &[TrialRecord], epochs: &[EpochRecord]) -> Result<LearningCurves, Error> {
    let board = &board[..board.len().min(CHART_TRIALS)];
    let curves: Vec<(String, Vec<(f64, f64)>)> = board
        .iter()
        .map(|t| {
            let pts = epochs_of(epochs, t.number).iter().map(|e| (e.epoch as f64, e.valid_sharpe)).collect();
            (format!("trial {}", t.number), pts)
        })
        .collect();
    let prunes: Vec<(f64, f64)> = board
        .iter()
        .filter_map(|t| {
            let at = t.pruned_at?;
            epochs_of(epochs, t.number).iter().find(|e| e.epoch == at).map(|e| (at as f64, e.valid_sharpe))
        })
        .collect();
    let all: Vec<f64> = board.iter().flat_map(|t| epochs_of(epochs, t.number)).map(|e| e.valid_sharpe).collect();
    let clip = robust_range(&all);
    let mut chart = Chart::new("Intermediate values: validation score by epoch", "score", curves);
    chart.markers = vec![("pruned here".to_owned(), prunes)];
    chart.y_range = clip;
    let outside = |(lo, hi): (f64, f64)| all.iter().filter(|v| v.is_finite() && (**v < lo || **v > hi)).count();
    Ok(LearningCurves { svg: chart.svg()?, clip: clip.map(|range| (range, outside(range))) })
}

/// Optimization history: each trial's value by number (complete and pruned apart; in a study of more than
/// [`HISTORY_POINTS`] trials every k-th and each that raised the best), and the best complete value so far.
pub(super) fn history_chart(board: &[TrialRecord]) -> Result<String, Error> {
    let mut best_so_far = Vec::new();
    let mut running = f64::NEG_INFINITY;
    let mut by_number: Vec<&TrialRecord> = board.iter().collect();
    by_number.sort_by_key(|t| t.number);
    for (i, t) in by_number.iter().enumerate() {
        let before = running;
        if t.status == "complete" && t.value.is_finite() {
            running = running.max(t.value);
        }
        // The line's corners: where it rises, and the last trial (a flat stretch needs no points between).
        if running.is_finite() && (running != before || i + 1 == by_number.len() || by_number.len() <= HISTORY_POINTS) {
            best_so_far.push((t.number as f64, running));
        }
    }
    // Every k-th trial (all of them up to HISTORY_POINTS), and each that raised the best so far.
    let k = by_number.len().div_ceil(HISTORY_POINTS).max(1);
    let mut best = f64::NEG_INFINITY;
    let shown: Vec<bool> = by_number
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let raises = t.status == "complete" && t.value > best;
            if raises {
                best = t.value;
            }
            i % k == 0 || raises
        })
        .collect();
    let values = |status: &str| -> Vec<(f64, f64)> {
        by_number
            .iter()
            .zip(&shown)
            .filter(|(t, s)| **s && t.status == status)
            .map(|(t, _)| (t.number as f64, t.value))
            .collect()
    };
    let mut history =
        Chart::new("Optimization history", "validation score", vec![("best so far".to_owned(), best_so_far)]);
    history.markers = vec![("complete".to_owned(), values("complete")), ("pruned".to_owned(), values("pruned"))];
    history.y_range = robust_range(&board.iter().map(|t| t.value).collect::<Vec<_>>());
    history.svg()
}

/// Which parameters mattered, over the searched ones of `names` (those `cfg` does not fix): the
/// importances' bars and the parallel coordinates (SVG both).
pub(super) fn parameter_charts(board: &[TrialRecord], names: &[String], cfg: &SearchConfig) -> (String, String) {
    let searched: Vec<String> =
        names.iter().filter(|n| !matches!(cfg.space.get(*n), Some(Dimension::Fixed(_)))).cloned().collect();
    (importance_svg(&importances(board, &searched)), parallel_svg(board, &searched, cfg))
}

/// A chart drawn: its PNG and its SVG.
pub(super) type Drawn = (Vec<u8>, String);

/// The best trial's equity on the test split beside buy and hold (the capital in the symbol at the first
/// close, no costs) and flat, and its drawdown in percent (x labelled by the bars' dates): each as its PNG
/// and its SVG.
pub(super) fn equity_charts(best: &BestOnTest, series: &Series) -> Result<(Drawn, Drawn), Error> {
    let start = best.test_bars.start;
    let eq: Vec<(f64, f64)> = best.equity.iter().enumerate().map(|(i, &v)| (i as f64, v)).collect();
    let mut peak = f64::MIN;
    let dd: Vec<(f64, f64)> = best
        .equity
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            peak = peak.max(v);
            (i as f64, 100.0 * (v / peak - 1.0))
        })
        .collect();
    let capital = best.equity.first().copied().unwrap_or(0.0);
    let closes: Vec<f64> = series.bars[start..]
        .iter()
        .take(best.equity.len())
        .map(|b| num_traits::ToPrimitive::to_f64(&b.close).unwrap_or(f64::NAN))
        .collect();
    let hold: Vec<(f64, f64)> = closes.iter().enumerate().map(|(i, c)| (i as f64, capital * c / closes[0])).collect();
    let flat: Vec<(f64, f64)> = vec![(0.0, capital), ((best.equity.len().max(2) - 1) as f64, capital)];
    let date = |x: f64| {
        let i = (x.round().max(0.0) as usize).min(series.bars.len() - 1 - start);
        series.bars[start + i].time.format("%Y-%m-%d").to_string()
    };
    let mut equity = Chart::new(
        format!("Trial {}: equity on the test split", best.trial),
        "equity",
        vec![
            (format!("trial {}", best.trial), eq),
            ("buy and hold (no costs)".to_owned(), hold),
            ("flat".to_owned(), flat),
        ],
    );
    equity.x_label = Some(&date);
    let mut drawdown = Chart::new(
        format!("Trial {}: drawdown on the test split", best.trial),
        "drawdown %",
        vec![("drawdown".to_owned(), dd)],
    );
    drawdown.x_label = Some(&date);
    let drawn = each_on_its_thread(&[&equity, &drawdown], "drawing the equity charts", |c| {
        let svg = c.svg()?;
        Ok((png_of(&svg)?, svg))
    });
    let [equity, drawdown] =
        <[_; 2]>::try_from(drawn).map_err(|_| Error::Output("two charts, not two drawn".into()))?;
    Ok((equity?, drawdown?))
}

/// `f` of each of `items`, each on a scoped thread of its own, not in rayon's pool: a job draws its charts
/// beside the evidence, whose parallel loops keep the pool's threads. A panic is an error naming `what`.
pub(super) fn each_on_its_thread<T: Sync, R: Send>(
    items: &[T],
    what: &str,
    f: impl Fn(&T) -> Result<R, Error> + Sync,
) -> Vec<Result<R, Error>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = items.iter().map(|item| s.spawn(|| f(item))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(Error::Output(format!("{what} panicked")))))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(number: u64, value: f64, a: f64, b: f64, c: f64) -> TrialRecord {
        TrialRecord {
            params: [("a".to_owned(), a), ("b".to_owned(), b), ("c".to_owned(), c)].into(),
            value,
            ..TrialRecord::ours(number, "complete")
        }
    }

    /// The charts of a 100,000-trial study draw a bounded number of elements (the best trials' curves and
    /// lines, a thinned history with every new best), and an epoch lookup finds each trial's epochs; the time
    /// is printed (`cargo test --release --lib charts_of_a_large_study -- --nocapture`; docs/PERFORMANCE.md).
    #[test]
    fn charts_of_a_large_study_stay_bounded() {
        let started = std::time::Instant::now();
        let n = 100_000u64;
        let value = |k: u64| ((k * 7919) % 100_003) as f64 / 1e5 + k as f64 * 1e-7;
        let board: Vec<TrialRecord> = crate::hyperopt::ranking::leaderboard(
            (0..n)
                .map(|k| {
                    let mut t = trial(k, value(k), (k % 97) as f64, (k % 13) as f64 + 1.0, 0.5);
                    if k % 3 == 0 {
                        (t.status, t.pruned_at) = ("pruned".to_owned(), Some(0));
                    }
                    t
                })
                .collect(),
        );
        let epochs: Vec<EpochRecord> = (0..n)
            .flat_map(|k| {
                (0..2).map(move |epoch| EpochRecord {
                    trial: k,
                    epoch,
                    loss: 0.0,
                    valid_sharpe: value(k),
                    valid_return: 0.0,
                })
            })
            .collect();
        assert_eq!(
            epochs_of(&epochs, 777).iter().map(|e| (e.trial, e.epoch)).collect::<Vec<_>>(),
            [(777, 0), (777, 1)]
        );
        assert!(epochs_of(&epochs, n + 5).is_empty());
        let curves = learning_curves(&board, &epochs).unwrap();
        let history = history_chart(&board).unwrap();
        let cfg = SearchConfig::default();
        let names = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let (importance, parallel) = parameter_charts(&board, &names, &cfg);
        let elapsed = started.elapsed().as_secs_f64();
        eprintln!(
            "100,000 trials: charts in {elapsed:.2} s; SVG bytes: curves {}, history {}, importances {}, parallel {}",
            curves.svg.len(),
            history.len(),
            importance.len(),
            parallel.len()
        );
        assert_eq!(parallel.matches("<polyline").count(), CHART_TRIALS, "the best complete trials' lines");
        assert!(curves.svg.len() < 4 << 20 && history.len() < 4 << 20, "{} {}", curves.svg.len(), history.len());
    }

    /// `a` orders the values exactly (|rho| 1), `b` against them half the time, `c` never varies (0).
    #[test]
    fn importances_rank_the_parameters_by_rank_correlation() {
        let trials: Vec<TrialRecord> = (0..6)
            .map(|i| trial(i, i as f64, 10.0 * i as f64, [1.0, 3.0, 2.0, 2.0, 3.0, 1.0][i as usize], 5.0))
            .collect();
        let names = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let imp = importances(&trials, &names);
        assert_eq!(imp.iter().map(|i| i.0.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert!((imp.iter().map(|i| i.1).sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(imp[0].1 > 0.8 && imp[2].1 == 0.0, "{imp:?}");
    }

    /// M4 keeps each column's first, lowest, highest and last point in x order; short lines and lines whose
    /// x is out of order stay whole.
    #[test]
    fn m4_keeps_each_columns_extremes_in_order() {
        let short: Vec<(f64, f64)> = (0..8).map(|i| (f64::from(i), f64::from(i % 3))).collect();
        assert_eq!(m4(short.clone(), 2), short);
        let unordered = vec![
            (1.0, 0.0),
            (0.0, 1.0),
            (2.0, 0.0),
            (3.0, 1.0),
            (4.0, 0.0),
            (5.0, 2.0),
            (6.0, 0.0),
            (7.0, 0.0),
            (8.0, 1.0),
        ];
        assert_eq!(m4(unordered.clone(), 2), unordered);
        // 20 points over 2 columns (x 0..9 and 10..19); column 0's low at x 3, high at x 7.
        let pts: Vec<(f64, f64)> = (0..20)
            .map(|i| {
                (
                    f64::from(i),
                    match i {
                        3 => -5.0,
                        7 => 9.0,
                        12 => 4.0,
                        15 => -1.0,
                        _ => 0.5,
                    },
                )
            })
            .collect();
        let kept = m4(pts, 2);
        assert_eq!(
            kept,
            [(0.0, 0.5), (3.0, -5.0), (7.0, 9.0), (9.0, 0.5), (10.0, 0.5), (12.0, 4.0), (15.0, -1.0), (19.0, 0.5)]
        );
    }

    /// A line of 45,000 points drawn thinned ([`m4`]) looks as drawn whole: under 1% of the PNGs' pixels
    /// differ by more than a quarter of a channel (the stroke's anti-aliased edges), and the SVG is under a
    /// third of the size.
    #[test]
    fn a_thinned_long_line_draws_as_the_whole_line() {
        let mut y = 100.0f64;
        let walk: Vec<(f64, f64)> = (0..45_000)
            .map(|i| {
                y += (f64::from(i * 7919 % 1000) / 1000.0 - 0.5) * (f64::from(i % 97) / 40.0);
                (f64::from(i), y)
            })
            .collect();
        let thinned = Chart::new("walk", "y", vec![("walk".to_owned(), walk.clone())]).svg().unwrap();
        let mut whole = Chart::new("walk", "y", vec![("walk".to_owned(), walk)]);
        whole.columns = usize::MAX / 4;
        let whole = whole.svg().unwrap();
        let pixels = |svg: &str| resvg::tiny_skia::Pixmap::decode_png(&png_of(svg).unwrap()).unwrap();
        let (a, b) = (pixels(&thinned), pixels(&whole));
        let shade = |p: &resvg::tiny_skia::PremultipliedColorU8| [p.red(), p.green(), p.blue()];
        let differ = a
            .pixels()
            .iter()
            .zip(b.pixels())
            .filter(|(p, q)| shade(p).iter().zip(shade(q)).any(|(x, y)| x.abs_diff(y) > 64));
        let (n, total) = (differ.count(), a.pixels().len());
        eprintln!(
            "thinned {} bytes, whole {} bytes; {n} of {total} pixels differ by more than a quarter",
            thinned.len(),
            whole.len()
        );
        assert!(n * 100 < total, "{n} of {total} pixels differ");
        assert!(thinned.len() * 3 < whole.len(), "{} against {} bytes", thinned.len(), whole.len());
    }

    /// A chart's PNG is a real image of it: the PNG signature, twice the SVG's size, and text drawn (dark
    /// pixels inside the title's box, which is empty without a font).
    #[test]
    fn charts_rasterize_with_the_bundled_font() {
        let svg = Chart::new("A title", "y", vec![("line".to_owned(), vec![(0.0, 1.0), (1.0, 2.0)])]).svg().unwrap();
        let png = png_of(&svg).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let img = resvg::tiny_skia::Pixmap::decode_png(&png).unwrap();
        assert_eq!((img.width(), img.height()), (1800, 640));
        // The fast encoding holds the pixels tiny-skia's own encoder writes.
        let reference = resvg::tiny_skia::Pixmap::decode_png(&render(&svg).unwrap().encode_png().unwrap()).unwrap();
        assert!(img.data() == reference.data(), "the PNG's pixels differ from the drawing's");
        // The title is centred at the top (y 17..35 in SVG units, x 400..500).
        let dark = (34..70)
            .flat_map(|y| (800..1000).map(move |x| (x, y)))
            .filter(|&(x, y)| img.pixel(x, y).is_some_and(|p| p.red() < 100))
            .count();
        assert!(dark > 50, "no text drawn in the title's box ({dark} dark pixels)");
    }
}
