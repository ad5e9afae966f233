//! PTX entry points: each shim turns raw pointers into slices, bounds-checks the thread index and calls the
//! plain function the CPU backend calls too. Names must match [`crate::kernel_names`].

use crate::portfolio::step_env_on_series;
use crate::types::{EnvState, TrialParams};
use core::arch::nvptx;

/// Global thread index in a 1-D launch.
#[inline]
fn thread_index() -> usize {
    // SAFETY: reading the special registers has no side effects.
    unsafe {
        nvptx::_block_idx_x() as usize * nvptx::_block_dim_x() as usize
            + nvptx::_thread_idx_x() as usize
    }
}

/// One portfolio step for the `n_envs` envs of a trial group (`n_trials = n_envs / envs_per_trial`).
///
/// # Safety
/// `params` points to `n_envs / envs_per_trial` trials, `states` and `actions` to `n_envs` elements,
/// `open` and `close` to `n_bars` elements; `states` is not aliased.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn portfolio_step(
    params: *const TrialParams,
    states: *mut EnvState,
    actions: *const u8,
    open: *const f64,
    close: *const f64,
    n_bars: u32,
    n_envs: u32,
    envs_per_trial: u32,
) {
    let env = thread_index();
    let (n_envs, envs_per_trial) = (n_envs as usize, envs_per_trial as usize);
    if env >= n_envs || envs_per_trial == 0 {
        return;
    }
    // SAFETY: the caller guarantees the lengths; this thread alone touches `states[env]`.
    unsafe {
        let params = &*params.add(env / envs_per_trial);
        let state = &mut *states.add(env);
        let action = *actions.add(env);
        let open = core::slice::from_raw_parts(open, n_bars as usize);
        let close = core::slice::from_raw_parts(close, n_bars as usize);
        step_env_on_series(params, state, action, open, close);
    }
}
