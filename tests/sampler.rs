//! The search's sampler (Optuna 5.0's default TPE, docs/SAMPLER.md): its `[study]` keys and defaults, the
//! start-up trials, integer and log ranges, the constant liar, and reproducible batches.

use std::collections::BTreeMap;

use tradesim::hyperopt::config::{Dimension, SearchConfig};
use tradesim::hyperopt::sampler::{Observed, Params, TpeOptions, sample, tpe_loss};

fn space_1d() -> BTreeMap<String, Dimension> {
    [("w_cost".to_owned(), Dimension::Range { low: 0.0, high: 1.0, log: false })].into()
}

fn complete(number: u64, params: Params, value: f64) -> Observed {
    Observed { number, params, loss: tpe_loss("complete", value, None, 4) }
}

/// 30 complete trials on a grid of [0, 1], the objective peaked at 0.3.
fn history_peaked_at_0_3() -> Vec<Observed> {
    (0..30u64)
        .map(|i| {
            let x = (i as f64 + 0.5) / 30.0;
            complete(i, [("w_cost".to_owned(), x)].into(), -(x - 0.3).abs())
        })
        .collect()
}

#[test]
fn the_study_keys_default_to_optunas_and_the_old_name_still_parses() {
    let cfg = SearchConfig::from_toml("[study]\n").unwrap();
    assert_eq!(TpeOptions::from(&cfg.study), TpeOptions::default());
    assert_eq!(
        TpeOptions::default(),
        TpeOptions { n_startup_trials: 10, n_ei_candidates: 24, gamma: 25, multivariate: true, constant_liar: true }
    );
    let old = SearchConfig::from_toml("[study]\nstartup_trials = 3\n").unwrap();
    let new = SearchConfig::from_toml(
        "[study]\nn_startup_trials = 3\nn_ei_candidates = 8\ngamma = 5\nmultivariate = false\nconstant_liar = false\n",
    )
    .unwrap();
    assert_eq!(old.study.startup_trials, 3);
    assert_eq!(
        TpeOptions::from(&new.study),
        TpeOptions { n_startup_trials: 3, n_ei_candidates: 8, gamma: 5, multivariate: false, constant_liar: false }
    );
    let err = SearchConfig::from_toml("[study]\ngamma = 0\n").unwrap_err().to_string();
    assert!(err.contains("study.gamma"), "{err}");
    let err = SearchConfig::from_toml("[study]\nn_ei_candidates = 0\n").unwrap_err().to_string();
    assert!(err.contains("study.n_ei_candidates"), "{err}");
}

#[test]
fn start_up_draws_ignore_running_trials_and_depend_on_seed_and_number_only() {
    let opts = TpeOptions::default();
    let space = space_1d();
    let mut trials: Vec<Observed> = history_peaked_at_0_3().into_iter().take(9).collect();
    // 9 finished and 5 running: still fewer than 10 finished, so uniform, the same as with no history.
    trials.extend((100..105).map(|n| Observed { number: n, params: [("w_cost".to_owned(), 0.5)].into(), loss: None }));
    let alone = sample(&space, &[], &opts, 4, 200).unwrap();
    assert_eq!(sample(&space, &trials, &opts, 4, 200).unwrap(), alone);
    assert_ne!(sample(&space, &[], &opts, 4, 201).unwrap(), alone, "another number, another draw");
    assert_ne!(sample(&space, &[], &opts, 5, 200).unwrap(), alone, "another seed, another draw");
}

#[test]
fn tpe_draws_near_the_good_trials_and_the_liar_pushes_a_batch_away_from_running_ones() {
    let space = space_1d();
    let history = history_peaked_at_0_3();
    let distance = |opts: &TpeOptions, running: usize| -> f64 {
        let mut trials = history.clone();
        trials.extend((0..running as u64).map(|i| Observed {
            number: 30 + i,
            params: [("w_cost".to_owned(), 0.3)].into(),
            loss: None,
        }));
        (0..40u64).map(|seed| (sample(&space, &trials, opts, seed, 100).unwrap()["w_cost"] - 0.3).abs()).sum::<f64>()
            / 40.0
    };
    let liar = TpeOptions::default();
    let no_liar = TpeOptions { constant_liar: false, ..liar };
    // Uniform draws would lie 0.29 from 0.3 on average; TPE's lie within the good trials' neighbourhood.
    let free = distance(&liar, 0);
    assert!(free < 0.1, "mean distance to the optimum {free}");
    // Ten trials already running at 0.3: without the liar they change nothing; with it the draws move off.
    assert_eq!(distance(&no_liar, 10), free);
    let pushed = distance(&liar, 10);
    assert!(pushed > 1.5 * free, "with the liar {pushed}, without {free}");
}

#[test]
fn integer_log_ranges_give_integers_with_both_ends_and_choices_stay_choices() {
    let space: BTreeMap<String, Dimension> = [
        ("target_every".to_owned(), Dimension::Range { low: 2.0, high: 9.0, log: true }),
        ("hidden".to_owned(), Dimension::Choice { choices: vec![32.0, 64.0, 128.0] }),
    ]
    .into();
    let opts = TpeOptions { n_startup_trials: 4, ..TpeOptions::default() };
    let mut trials = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for n in 0..150u64 {
        let p = sample(&space, &trials, &opts, 11, n).unwrap();
        let t = p["target_every"];
        assert!(t.fract() == 0.0 && (2.0..=9.0).contains(&t), "{p:?}");
        assert!([32.0, 64.0, 128.0].contains(&p["hidden"]), "{p:?}");
        seen.insert(t as u32);
        // Best at both ends, so TPE keeps drawing them.
        let value = (t - 5.5).abs() - f64::from(p["hidden"] != 64.0);
        trials.push(complete(n, p, value));
    }
    assert!(seen.contains(&2) && seen.contains(&9), "both ends drawn: {seen:?}");
}

#[test]
fn a_batch_is_reproducible_bit_for_bit() {
    let space = tradesim::hyperopt::config::default_space();
    let opts = TpeOptions { n_startup_trials: 5, ..TpeOptions::default() };
    let run = || {
        let mut trials: Vec<Observed> = Vec::new();
        for batch in 0..4u64 {
            let first = trials.len();
            for n in batch * 6..batch * 6 + 6 {
                let params = sample(&space, &trials, &opts, 9, n).unwrap();
                trials.push(Observed { number: n, params, loss: None });
            }
            for t in &mut trials[first..] {
                t.loss = tpe_loss("complete", -(t.params["lr"].ln() - 1e-3f64.ln()).abs(), None, 4);
            }
        }
        trials.iter().map(|t| t.params.values().map(|v| v.to_bits()).collect::<Vec<_>>()).collect::<Vec<_>>()
    };
    let a = run();
    assert_eq!(a, run());
    // The batch's trials differ from each other (the liar and their own streams).
    assert_ne!(a[20], a[21]);
}
