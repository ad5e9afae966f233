//! GAE as a reverse scan per env ([`gae_env`]).

use crate::types::Transition;

/// GAE for env `e` of a trial over its rollout of `steps`: `ring`, `values` hold the trial's `steps x E`
/// transitions and values (step-major), `bootstrap` the value of the env's state after the rollout. Writes
/// advantages and returns (`advantage + value`). A step of an env that was already done is not a transition:
/// advantage and return 0, and it cuts the recursion. A terminated transition does not bootstrap; a truncated
/// one (the segment's end) bootstraps from `bootstrap`, which is the value of its next state (a done env does
/// not move), and starts a new recursion.
#[inline]
#[allow(clippy::too_many_arguments, reason = "one env's rollout")]
pub fn gae_env(
    e: usize,
    envs: usize,
    steps: usize,
    gamma: f32,
    lambda: f32,
    ring: &[Transition],
    values: &[f32],
    bootstrap: f32,
    mut write: impl FnMut(usize, f32, f32),
) {
    let mut next_value = bootstrap;
    let mut gae = 0.0f32;
    // Steps in groups of GAE_AHEAD from the last: a group's transitions and values are all read before any
    // of its writes (on the GPU a read after a write through another pointer waited for the write: a global
    // round trip a step). The arithmetic, and so every bit, is the step-by-step recursion's.
    let mut end = steps;
    while end > 0 {
        let start = end.saturating_sub(GAE_AHEAD);
        let mut read = [(0u8, 0u8, 0.0f32, 0.0f32); GAE_AHEAD];
        const _: () = assert!(GAE_AHEAD == 8, "the unrolled groups below are written for 8 steps");
        crate::tile::unrolled!(k in [0, 1, 2, 3, 4, 5, 6, 7] {
            if k < end - start {
                let i = (end - 1 - k) * envs + e;
                let tr = &ring[i];
                read[k] = (tr.valid, tr.done, tr.reward, values[i]);
            }
        });
        crate::tile::unrolled!(k in [0, 1, 2, 3, 4, 5, 6, 7] {
            if k < end - start {
                let i = (end - 1 - k) * envs + e;
                let (valid, done, reward, value) = read[k];
                if valid == 0 {
                    gae = 0.0;
                    next_value = 0.0;
                    write(i, 0.0, 0.0);
                } else {
                    let (next, carry) = match done {
                        0 => (next_value, 1.0),
                        crate::types::TRUNCATED => (bootstrap, 0.0),
                        _ => (0.0, 0.0),
                    };
                    let delta = reward + gamma * next - value;
                    gae = delta + gamma * lambda * carry * gae;
                    write(i, gae, gae + value);
                    next_value = value;
                }
            }
        });
        end = start;
    }
}

/// Rollout steps [`gae_env`] reads ahead of its writes.
pub const GAE_AHEAD: usize = 8;

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// `gae_env` reads its steps in groups ahead of its writes: the same bits as the plain backward
    /// recursion, for rollouts shorter than, equal to and past a group, with done, truncated and invalid steps.
    #[test]
    fn gae_in_groups_is_the_step_by_step_recursion() {
        let (envs, gamma, lambda, bootstrap) = (3usize, 0.99f32, 0.95f32, 0.37f32);
        for steps in [1usize, 7, 8, 9, 29] {
            let n = steps * envs;
            let ring: Vec<Transition> = (0..n)
                .map(|i| Transition {
                    reward: ((i * 37 % 17) as f32 - 8.0) * 0.01,
                    done: [0, 0, 0, crate::types::TRUNCATED, 1][i % 5],
                    valid: u8::from(i % 11 != 4),
                    ..Transition::default()
                })
                .collect();
            let values: Vec<f32> = (0..n).map(|i| ((i * 53 % 23) as f32 - 11.0) * 0.03).collect();
            for e in 0..envs {
                let mut got = vec![(0.0f32, 0.0f32); n];
                gae_env(e, envs, steps, gamma, lambda, &ring, &values, bootstrap, |i, a, r| got[i] = (a, r));
                let (mut next_value, mut gae) = (bootstrap, 0.0f32);
                for t in (0..steps).rev() {
                    let i = t * envs + e;
                    let tr = &ring[i];
                    let want = if tr.valid == 0 {
                        (gae, next_value) = (0.0, 0.0);
                        (0.0, 0.0)
                    } else {
                        let (next, carry) = match tr.done {
                            0 => (next_value, 1.0),
                            crate::types::TRUNCATED => (bootstrap, 0.0),
                            _ => (0.0, 0.0),
                        };
                        gae = tr.reward + gamma * next - values[i] + gamma * lambda * carry * gae;
                        next_value = values[i];
                        (gae, gae + values[i])
                    };
                    assert_eq!(got[i].0.to_bits(), want.0.to_bits(), "steps {steps}, env {e}, t {t}");
                    assert_eq!(got[i].1.to_bits(), want.1.to_bits(), "steps {steps}, env {e}, t {t}");
                }
            }
        }
    }
}
