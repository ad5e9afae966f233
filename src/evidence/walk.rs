//! Anchored walk-forward of one configuration on bars the search never saw: the bars after the search's
//! validation split (its test split) are cut into K folds; fold k trains a fresh trial of the configuration
//! on every bar before it (from the first bar after the feature warm-up, features normalized on those bars)
//! and tests its greedy policy on the fold. A fold whose policy never traded scores 0.

use crate::data::Series;
use crate::data::device::Prepared;
use crate::data::splits::Split;
use crate::hyperopt::config::SearchConfig;
use crate::hyperopt::plan::{LearnerParams, TrialPlanner};
use crate::hyperopt::sampler::Params;
use crate::train::{SplitData, train_dqn, train_ppo};
use crate::{Backend, Error};

use super::Fold;

/// A fold's training and tested bars.
pub type FoldBars = (std::ops::Range<usize>, std::ops::Range<usize>);

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

/// Trains trial `number`'s configuration `params` on each fold and tests it there (the study's seed; the
/// trial's number as its key, as in the search).
#[allow(clippy::too_many_arguments, reason = "the search's context, passed down once")]
pub fn walk_forward(
    backend: &Backend,
    series: &Series,
    split: &Split,
    cfg: &SearchConfig,
    params: &Params,
    number: u64,
    k: usize,
    bars_per_year: f64,
) -> Result<Vec<Fold>, Error> {
    let mut out = Vec::new();
    for (j, (train, test)) in folds(split, series.bars.len(), k)?.into_iter().enumerate() {
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
        out.push(Fold {
            fold: j + 1,
            train: (train.start, train.end),
            test: (test.start, test.end),
            seen_by_search: test.start < split.valid.end,
            sharpe: if m.sharpe.is_finite() { m.sharpe } else { 0.0 },
            total_return: m.total_return,
            max_drawdown: m.max_drawdown,
            trades: m.trades as u32,
            returns,
        });
    }
    Ok(out)
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
