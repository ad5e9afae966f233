//! Anchored walk-forward of one configuration on bars the search never saw: the bars after the search's
//! validation split (its test split) are cut into K folds; fold k trains a fresh trial of the configuration
//! on every bar before it (from the first bar after the feature warm-up, features normalized on those bars)
//! and tests its greedy policy on the fold. A fold whose policy never traded scores 0.

use std::ops::Range;

use crate::data::Series;
use crate::data::device::Prepared;
use crate::data::splits::Split;
use crate::hyperopt::config::SearchConfig;
use crate::hyperopt::plan::{LearnerParams, TrialPlanner};
use crate::hyperopt::sampler::Params;
use crate::hyperopt::study::TrialRecord;
use crate::train::{SplitData, train_dqn, train_ppo};
use crate::{Backend, Error};

use super::Fold;

/// A fold's training and tested bars.
pub type FoldBars = (Range<usize>, Range<usize>);

/// The K folds' bar ranges: `[split.valid.end, n)` cut into `k` parts (the last takes the remainder),
/// each trained on `[split.train.start, fold start)`. Refuses folds of fewer than 2 bars.
pub fn folds(split: &Split, n: usize, k: usize) -> Result<Vec<FoldBars>, Error> {
    let from = split.valid.end;
    let len = n.saturating_sub(from);
    if k == 0 || len / k < 2 {
        return Err(Error::config(
            "--walk-forward",
            format!("{k} folds over the {len} bars after the validation split leave fewer than 2 bars a fold"),
        ));
    }
    let size = len / k;
    Ok((0..k)
        .map(|j| {
            let start = from + j * size;
            let end = if j + 1 == k { n } else { start + size };
            (split.train.start..start, start..end)
        })
        .collect())
}

/// Walk-forward fold `fold` (from 1) of the bars `bars` ([`folds`]): trains trial `number`'s configuration
/// `params` afresh on the fold's past and tests it on the fold (the study's seed; the trial's number as its
/// key, as in the search). Folds are independent: a job runs them side by side ([`crate::job::side`]).
#[allow(clippy::too_many_arguments, reason = "the search's context, passed down once")]
pub fn walk_forward_fold(
    backend: &Backend,
    series: &Series,
    split: &Split,
    cfg: &SearchConfig,
    params: &Params,
    number: u64,
    fold: usize,
    bars: &FoldBars,
    bars_per_year: f64,
) -> Result<Fold, Error> {
    let (train, test) = bars.clone();
    let prepared = Prepared::with_sigma_span(series, train.clone(), cfg.env.sigma_span)?;
    let fold_market = prepared.market_data(test.clone())?;
    let data = SplitData {
        split: Split { train: train.clone(), valid: test.clone(), test: test.clone() },
        train: prepared.market_data(train.clone())?,
        valid: fold_market.clone(),
        test: fold_market,
    };
    let planner = TrialPlanner::for_search(cfg, bars_per_year, &data.train)?;
    let plan = planner.plan_one(&planner.read(params)?, number)?;
    let trial = plan.train.env_params[0];
    let (metrics, actions) = match &plan.learner {
        LearnerParams::Ppo(ppo) => {
            let t = train_ppo(backend, &data, &plan.train, ppo, |_| Ok(()))?;
            (t.test, t.test_actions)
        }
        LearnerParams::Dqn(dqn) => {
            let t = train_dqn(backend, &data, &plan.train, dqn, |_| Ok(()))?;
            (t.test, t.test_actions)
        }
    };
    let m = metrics.first().ok_or_else(|| Error::Data("a walk-forward fold trained no trial".to_owned()))?;
    let returns = super::returns_of(backend, &data.test, &[trial], &actions)?.pop().unwrap_or_default();
    // An account at zero equity (bankrupt) earns nothing from then on.
    let returns = returns.into_iter().map(|x| if x.is_finite() { x } else { 0.0 }).collect();
    Ok(Fold {
        fold,
        train: (train.start, train.end),
        test: (test.start, test.end),
        seen_by_search: test.start < split.valid.end,
        sharpe: if m.sharpe.is_finite() { m.sharpe } else { 0.0 },
        total_return: m.total_return,
        max_drawdown: m.max_drawdown,
        trades: m.trades as u32,
        returns,
    })
}

/// The data of walk-forward optimisation's search on one fold: the fold's `past` cut as the study's split
/// cuts its bars (the last `valid / (train + valid)` share the validation part), features normalized on the
/// training part, the fold's `test` bars as the test split.
pub fn fold_search_data(
    series: &Series,
    past: Range<usize>,
    test: Range<usize>,
    sigma_span: usize,
) -> Result<SplitData, Error> {
    let split = fold_search_split(past, test)?;
    let prepared = Prepared::with_sigma_span(series, split.train.clone(), sigma_span)?;
    Ok(SplitData {
        train: prepared.market_data(split.train.clone())?,
        valid: prepared.market_data(split.valid.clone())?,
        test: prepared.market_data(split.test.clone())?,
        split,
    })
}

/// A fold's `past` cut as the study's split cuts its bars (the last `valid / (train + valid)` share the
/// validation part), the fold's `test` as the test part; refused when either part of the past has fewer
/// than 2 bars (times, on a universe).
pub fn fold_search_split(past: Range<usize>, test: Range<usize>) -> Result<Split, Error> {
    let (train_share, valid_share) = crate::train::DEFAULT_SPLIT;
    let valid_len = ((past.len() as f64) * valid_share / (train_share + valid_share)).round() as usize;
    let cut = past.end - valid_len.min(past.len());
    if cut - past.start < 2 || past.end - cut < 2 {
        return Err(Error::config(
            "--walk-forward-search",
            format!("a fold's past of {} bars leaves too few bars to train and validate on", past.len()),
        ));
    }
    Ok(Split { train: past.start..cut, valid: cut..past.end, test })
}

/// Fold `fold` of walk-forward optimisation after its search in `study` on `data`: the winner (the best
/// complete trial by validation score) and its greedy policy's returns on the fold (its stored test
/// actions, a policy trained on the fold's past only). A fold without a winner, or whose winner never
/// traded, scores 0.
pub fn search_fold(
    backend: &Backend,
    (study, name): (&crate::hyperopt::Study, &str),
    data: &SplitData,
    cfg: &SearchConfig,
    fold: usize,
    bars_per_year: f64,
) -> Result<super::SearchFold, Error> {
    let best = fold_winner(study)?;
    let planner = TrialPlanner::for_search(cfg, bars_per_year, &data.train)?;
    let returns = match &best {
        Some(t) => super::trial_returns(backend, study, std::slice::from_ref(t), data, &planner, true)?
            .pop()
            .map(|r| r.returns)
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let steps = data.test.n_bars().saturating_sub(1);
    let split = &data.split;
    Ok(fold_of_winner(fold, (&split.train, &split.valid, &split.test), name, best.as_ref(), returns, steps))
}

/// The winner of a fold's search in `study`: its best complete trial by validation score (none when no
/// trial completed).
pub fn fold_winner(study: &crate::hyperopt::Study) -> Result<Option<TrialRecord>, Error> {
    let board = crate::hyperopt::ranking::study_leaderboard(study)?;
    Ok(board.into_iter().find(|t| t.status == "complete" && t.value.is_finite()))
}

/// Fold `fold` of walk-forward optimisation, searched in study `name` on its `train` and `valid` parts and
/// tested on `test`: its `winner` and the winner's `returns` on the fold, `steps` of them (zeros where they
/// are not: no winner, or no stored walk of it). Sharpe and return are the winner's stored test results, 0
/// without a winner or where they are not finite (a policy that never traded).
pub fn fold_of_winner(
    fold: usize,
    (train, valid, test): (&Range<usize>, &Range<usize>, &Range<usize>),
    name: &str,
    winner: Option<&TrialRecord>,
    returns: Vec<f64>,
    steps: usize,
) -> super::SearchFold {
    let returns = if returns.len() == steps { returns } else { vec![0.0; steps] };
    let finite = |x: f64| if x.is_finite() { x } else { 0.0 };
    let range = |r: &Range<usize>| (r.start, r.end);
    super::SearchFold {
        fold,
        train: range(train),
        valid: range(valid),
        test: range(test),
        study: name.to_owned(),
        trial: winner.map(|t| t.number),
        params: winner.map(|t| t.params.clone()).unwrap_or_default(),
        valid_score: winner.map_or(f64::NAN, |t| t.value),
        sharpe: winner.map_or(0.0, |t| finite(t.test_sharpe)),
        total_return: winner.map_or(0.0, |t| finite(t.test_return)),
        returns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_tile_the_bars_after_the_validation_split_and_anchor_at_the_training_start() {
        let split = Split { train: 100..700, valid: 700..850, test: 850..1_000 };
        let f = folds(&split, 1_000, 4).unwrap();
        assert_eq!(f.len(), 4);
        assert_eq!(f[0], (100..850, 850..887));
        assert_eq!(f[3], (100..961, 961..1_000));
        assert!(f.iter().all(|(_, test)| test.start >= split.valid.end));
        for w in f.windows(2) {
            assert_eq!(w[0].1.end, w[1].1.start);
            assert_eq!(w[1].0.end, w[1].1.start);
        }
        assert!(folds(&split, 1_000, 0).is_err());
        assert!(folds(&split, 1_000, 100).is_err());
    }
}
