//! Walk-forward and walk-forward optimisation on a universe, as on a single series
//! ([`super::walk_forward`]) with the universe's calendar times for bars: the times after the search's
//! validation split are cut into K anchored folds ([`super::walk_forward::folds`]); walk-forward trains a
//! fresh trial of the best configuration on every time before a fold (features normalized on those times)
//! and walks its greedy policy on the fold; walk-forward optimisation runs the whole search on a fold's past
//! and walks its winner there. A fold's returns are the account's per-step returns.

use std::ops::Range;

use tradesim_host::universe::UniverseWalk;

use super::walk_forward::{FoldBars, fold_of_winner, fold_search_split, fold_winner, folds};
use super::{Fold, SearchFold};
use crate::data::splits::Split;
use crate::data::universe::Universe;
use crate::hyperopt::SearchConfig;
use crate::hyperopt::sampler::Params;
use crate::hyperopt::search::universe::{
    UniverseLearner, UniverseSplit, replay, universe_env, universe_planner, walk_score,
};
use crate::{Backend, Error};

/// A walk's simple per-step returns (an account at zero equity earns nothing from then on).
pub fn returns_of(w: &UniverseWalk) -> Vec<f64> {
    let r = super::stats::returns_from_equity(&w.equity);
    r.into_iter().map(|x| if x.is_finite() { x } else { 0.0 }).collect()
}

/// `x`, or 0 where it is not finite (a walk that never held a side has no Sharpe).
fn finite(x: f64) -> f64 {
    if x.is_finite() { x } else { 0.0 }
}

/// The K anchored folds of `u` after `split`'s validation times: each a past (training times from the
/// first) and the fold's times.
pub fn universe_folds(u: &Universe, split: &UniverseSplit, k: usize) -> Result<Vec<FoldBars>, Error> {
    let s = Split { train: split.train.clone(), valid: split.valid.clone(), test: split.test.clone() };
    folds(&s, u.n_times(), k)
}

/// Walk-forward fold `fold` (from 1) of the times `bars` ([`universe_folds`]): trains configuration
/// `params` (trial `number`'s key, as in the search) afresh on the fold's past and walks its greedy policy on
/// the fold: the study's epochs, accounts and segments, one trial.
#[allow(clippy::too_many_arguments, reason = "the search's context, passed down once")]
pub fn universe_walk_forward_fold(
    backend: &Backend,
    u: &Universe,
    split: &UniverseSplit,
    cfg: &SearchConfig,
    params: &Params,
    number: u64,
    fold: usize,
    bars: &FoldBars,
) -> Result<Fold, Error> {
    let n = split.n_symbols();
    let (train, test) = bars.clone();
    let data = crate::data::cross_section::learner_data(u, train.clone())?;
    let past = UniverseSplit {
        data,
        train: train.clone(),
        valid: test.clone(),
        test: test.clone(),
        bars_per_year: split.bars_per_year,
    };
    let planner = universe_planner(cfg, split.bars_per_year, train.len())?;
    let h = planner.read(params)?;
    let env = universe_env(&planner, &h, number)?;
    let mut learner = UniverseLearner::new(backend, &past, cfg, &planner, &[h], &[env])?;
    for _ in 0..cfg.study.epochs {
        learner.epoch(cfg, &past)?;
    }
    let w = learner.walk(&test)?.pop().ok_or_else(|| Error::Data("a walk-forward fold walked no trial".to_owned()))?;
    let (m, _) = walk_score(&w, n, split.bars_per_year);
    let traded = m.trades > 0.0;
    Ok(Fold {
        fold,
        train: (train.start, train.end),
        test: (test.start, test.end),
        seen_by_search: test.start < split.valid.end,
        sharpe: if traded { finite(m.sharpe) } else { 0.0 },
        total_return: m.total_return,
        max_drawdown: m.max_drawdown,
        trades: m.trades as u32,
        returns: returns_of(&w),
    })
}

/// The split of walk-forward optimisation's search on a fold of `u`: the fold's `past` cut as the study's
/// split cuts it ([`fold_search_split`]), features normalized on its training times, the fold as the test
/// times.
pub fn universe_fold_split(
    u: &Universe,
    past: Range<usize>,
    test: Range<usize>,
    bars_per_year: f64,
) -> Result<UniverseSplit, Error> {
    let s = fold_search_split(past, test)?;
    let data = crate::data::cross_section::learner_data(u, s.train.clone())?;
    Ok(UniverseSplit { data, train: s.train, valid: s.valid, test: s.test, bars_per_year })
}

/// Fold `fold` of walk-forward optimisation on a universe after its search in `study` on `split`: the
/// winner (the best complete trial by validation score) and its stored test codes walked again on the
/// fold. A fold without a winner, or whose winner never held a side, scores 0.
pub fn universe_search_fold(
    (study, name): (&crate::hyperopt::Study, &str),
    split: &UniverseSplit,
    cfg: &SearchConfig,
    fold: usize,
) -> Result<SearchFold, Error> {
    let best = fold_winner(study)?;
    let steps = split.test.len() - 1;
    let mut returns = Vec::new();
    if let Some(t) = &best {
        let actions = study.test_actions(t.number)?.unwrap_or_default();
        if actions.len() == steps * split.n_symbols() {
            let planner = universe_planner(cfg, split.bars_per_year, split.train.len())?;
            let env = universe_env(&planner, &planner.read(&t.params)?, t.number)?;
            returns = returns_of(&replay(&split.data, &[env], &[actions], &split.test)?[0]);
        }
    }
    Ok(fold_of_winner(fold, (&split.train, &split.valid, &split.test), name, best.as_ref(), returns, steps))
}
