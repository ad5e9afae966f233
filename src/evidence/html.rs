//! The report's first section, "Can this be trusted?": the verdict, then each part of the evidence with
//! the numbers it rests on, and the histogram of the CSCV logits.

use std::fmt::Write;

use super::stats::logit_histogram;
use super::{DSR_THRESHOLD, Evidence, MIN_PLACEBO, PLACEBO_ALPHA, SPA_ALPHA};
use crate::html::html_escape as escape;

fn fixed(x: f64, places: usize) -> String {
    if x.is_finite() { format!("{x:.places$}") } else { "NaN".to_owned() }
}

/// The histogram of the logits as an inline SVG (bars left of 0 are splits whose in-sample best fell to the
/// lower half out of sample).
fn histogram_svg(logits: &[f64]) -> String {
    let bins = logit_histogram(logits, 20);
    let (w, h, pad) = (520.0, 160.0, 24.0);
    let top = bins.iter().map(|b| b.2).max().unwrap_or(1).max(1) as f64;
    let (lo, hi) = (bins.first().map_or(-1.0, |b| b.0), bins.last().map_or(1.0, |b| b.1));
    let x = |v: f64| pad + (v - lo) / (hi - lo).max(1e-9) * (w - 2.0 * pad);
    let mut svg = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\">");
    for (from, to, n) in &bins {
        let bh = *n as f64 / top * (h - 2.0 * pad);
        let colour = if *to <= 0.0 { "#c0392b" } else { "#2e86c1" };
        let _ = write!(
            svg,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{colour}\"/>",
            x(*from),
            h - pad - bh,
            (x(*to) - x(*from) - 1.0).max(0.5)
        );
    }
    if lo < 0.0 && hi > 0.0 {
        let _ =
            write!(svg, "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{pad}\" y2=\"{1}\" stroke=\"#000\"/>", x(0.0), h - pad);
    }
    let _ = write!(
        svg,
        "<text x=\"{pad}\" y=\"{}\" font-size=\"11\">{lo:.2}</text><text x=\"{}\" y=\"{}\" font-size=\"11\" \
         text-anchor=\"end\">{hi:.2}</text><text x=\"{}\" y=\"14\" font-size=\"11\" text-anchor=\"middle\">logit of the \
         in-sample best's out-of-sample rank (left of 0: overfit)</text></svg>",
        h - 6.0,
        w - pad,
        h - 6.0,
        w / 2.0
    );
    svg
}

/// SPA and StepM on each split where they ran, a paragraph each.
fn spa_paragraphs(e: &Evidence) -> String {
    let mut html = String::new();
    for s in [&e.spa_valid, &e.spa_test].into_iter().flatten() {
        let r = &s.result;
        let _ = write!(
            html,
            "<p>Hansen's SPA on {} ({} trials against buy-and-hold, stationary bootstrap, mean block {} bars, {} \
             draws{}): p = <b>{}</b> (consistent; lower {}, White's Reality Check {}). Romano and Wolf's StepM \
             (family-wise 0.05): {}.</p>",
            s.split,
            r.models,
            r.block,
            r.reps,
            if r.studentized { ", studentized" } else { "" },
            fixed(r.consistent, 3),
            fixed(r.lower, 3),
            fixed(r.upper, 3),
            if s.superior_trials.is_empty() {
                "no trial beats buy-and-hold".to_owned()
            } else {
                format!("trials {:?} beat buy-and-hold", s.superior_trials)
            }
        );
    }
    html
}

/// The section as HTML.
pub fn section(e: &Evidence) -> String {
    let colour = if e.verdict.evidence { "#1e8449" } else { "#b03a2e" };
    let mut html = format!(
        "<h2>Can this be trusted?</h2><p style=\"font-size:1.15em;font-weight:bold;color:{colour}\">{}</p>\
         <p>The rule (docs/EVIDENCE.md): <b>evidence</b> needs the best trial's deflated Sharpe ratio &ge; \
         {DSR_THRESHOLD} on validation; on the test split (a hold-out) a probabilistic Sharpe ratio &ge; \
         {DSR_THRESHOLD} against 0 and for its per-bar excess over buy-and-hold; Hansen's SPA over every trial \
         against buy-and-hold on validation with p &le; {SPA_ALPHA}; at least {MIN_PLACEBO} placebo searches with \
         p &le; {PLACEBO_ALPHA}; and, when a walk-forward ran, a probabilistic Sharpe ratio &ge; {DSR_THRESHOLD} \
         of its folds' returns on bars the search never saw. Otherwise <b>no evidence</b>, whatever the \
         leaderboard below shows.</p><table>",
        escape(&e.verdict.line)
    );
    html += "<tr><th>part</th><th>Sharpe a year</th><th>bars</th><th>trials</th><th>SR0 a year</th><th>DSR</th>\
             <th>PSR vs 0</th><th>min. track record (bars)</th></tr>";
    for (split, s) in [("best trial, validation", &e.valid), ("best trial, test", &e.test)] {
        if let Some(s) = s {
            let _ = write!(
                html,
                "<tr><td>{split}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                fixed(s.sharpe_annual, 2),
                s.n_obs,
                s.trials,
                fixed(s.sr0_annual, 2),
                fixed(s.dsr, 3),
                fixed(s.psr, 3),
                fixed(s.min_track_record, 0)
            );
        }
    }
    if let Some(b) = &e.baselines {
        let s = &b.excess;
        let _ = write!(
            html,
            "<tr><td>best trial minus buy-and-hold, test</td><td>{}</td><td>{}</td><td>1</td><td>0.00</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr></table><p>Test Sharpe a year: best trial <b>{}</b>, buy-and-hold <b>{}</b>, \
             flat <b>{}</b>.</p>",
            fixed(s.sharpe_annual, 2),
            s.n_obs,
            fixed(s.dsr, 3),
            fixed(s.psr, 3),
            fixed(s.min_track_record, 0),
            fixed(b.best_test_sharpe, 2),
            fixed(b.buy_and_hold_test_sharpe, 2),
            fixed(b.flat_test_sharpe, 2)
        );
    } else {
        html += "</table>";
    }
    html += &spa_paragraphs(e);
    match &e.pbo {
        Ok(p) => {
            let _ = write!(
                html,
                "<p>Probability of backtest overfitting (CSCV over {} trials' validation returns, {} bars, {} blocks, {} \
                 splits): <b>{}</b>; probability that the in-sample best loses out of sample {}; slope of its \
                 out-of-sample on its in-sample Sharpe {}.</p>{}",
                p.trials,
                p.bars,
                p.blocks,
                p.logits.len(),
                fixed(p.pbo, 3),
                fixed(p.prob_loss, 3),
                fixed(p.degradation_slope, 3),
                histogram_svg(&p.logits)
            );
        }
        Err(why) => {
            let _ =
                write!(html, "<p>Probability of backtest overfitting not computed: {}.</p>", escape(&why.to_string()));
        }
    }
    match &e.placebo {
        Some(p) => {
            let _ = write!(
                html,
                "<p>Placebo searches: the same search on {} surrogate series of these bars, each bar's direction \
                 flipped at random (volatility, clustering, intrabar shape and gaps kept). p = <b>{}</b>. Their best \
                 trials' test Sharpes: {}.</p>",
                p.searches.len(),
                fixed(p.p_value, 3),
                p.searches.iter().map(|s| fixed(s.best_test_sharpe, 2)).collect::<Vec<_>>().join(", ")
            );
        }
        None => html += "<p>Placebo searches: not run (<code>--placebo 19</code>).</p>",
    }
    html += &walk_forward_tables(e);
    if e.barrier_floor_mult > 0.0 {
        let _ = write!(
            html,
            "<p>Barriers narrower than {} sigma (one typical bar range times <code>barrier_floor</code>) were widened to it; \
             stops touched inside a bar filled beyond their level (docs/ENVIRONMENT.md).</p>",
            fixed(e.barrier_floor_mult, 2)
        );
    }
    html
}

/// The walk-forward and walk-forward optimisation tables, with their PSR lines (empty when neither ran).
fn walk_forward_tables(e: &Evidence) -> String {
    let mut html = String::new();
    if !e.walk_forward.is_empty() {
        html += "<table><tr><th>walk-forward fold</th><th>trained on bars</th><th>tested on bars</th><th>Sharpe</th>\
                 <th>return</th><th>max drawdown</th><th>trades</th></tr>";
        for f in &e.walk_forward {
            let _ = write!(
                html,
                "<tr><td>{}{}</td><td>{}..{}</td><td>{}..{}</td><td>{}</td><td>{}%</td><td>{}%</td><td>{}</td></tr>",
                f.fold,
                if f.seen_by_search { " (in validation)" } else { "" },
                f.train.0,
                f.train.1,
                f.test.0,
                f.test.1,
                fixed(f.sharpe, 2),
                fixed(100.0 * f.total_return, 2),
                fixed(100.0 * f.max_drawdown, 2),
                f.trades
            );
        }
        let n = e.walk_forward.len() as f64;
        let mean = e.walk_forward.iter().map(|f| f.sharpe).sum::<f64>() / n;
        let worst = e.walk_forward.iter().map(|f| f.sharpe).fold(f64::INFINITY, f64::min);
        let _ = write!(
            html,
            "<tr><th>mean / worst</th><td></td><td></td><td>{}/ {}</td></tr></table>",
            fixed(mean, 2),
            fixed(worst, 2)
        );
        if let Some(s) = &e.walk_forward_unseen {
            let _ = write!(
                html,
                "<p>Walk-forward on {} bars the search never saw: Sharpe {} a year, PSR <b>{}</b>.</p>",
                s.n_obs,
                fixed(s.sharpe_annual, 2),
                fixed(s.psr, 3)
            );
        }
    }
    if !e.walk_forward_search.is_empty() {
        html += "<table><tr><th>walk-forward optimisation fold</th><th>searched on bars (train / validation)</th>\
                 <th>tested on bars</th><th>winner</th><th>validation score</th><th>Sharpe</th><th>return</th>\
                 <th>chosen parameters</th></tr>";
        for f in &e.walk_forward_search {
            let _ = write!(
                html,
                "<tr><td>{}</td><td>{}..{} / {}..{}</td><td>{}..{}</td><td>{} ({})</td><td>{}</td><td>{}</td>\
                 <td>{}%</td><td><code>{}</code></td></tr>",
                f.fold,
                f.train.0,
                f.train.1,
                f.valid.0,
                f.valid.1,
                f.test.0,
                f.test.1,
                f.trial.map_or("none".to_owned(), |t| format!("trial {t}")),
                escape(&f.study),
                fixed(f.valid_score, 3),
                fixed(f.sharpe, 2),
                fixed(100.0 * f.total_return, 2),
                escape(&super::params_line(&f.params))
            );
        }
        html += "</table>";
        if let Some(s) = &e.walk_forward_search_oos {
            let _ = write!(
                html,
                "<p>Walk-forward optimisation: each fold's winner chosen on bars before it; their {} \
                 out-of-sample bars together: Sharpe {} a year, PSR <b>{}</b>.</p>",
                s.n_obs,
                fixed(s.sharpe_annual, 2),
                fixed(s.psr, 3)
            );
        }
    }
    html
}
