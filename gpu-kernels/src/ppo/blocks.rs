//! PPO's block kernels (nvptx only), whose blocks work as one (shared memory, barriers) rather than a thread
//! per element: the minibatch's observation rows and advantages ([`ppo_gather`]), its advantage moments
//! ([`ppo_adv`]), the loss and layer-2 hidden gradient of a tile of samples ([`ppo_loss`]) and the gradient-norm
//! lanes ([`ppo_norm`]). They are kernels themselves, as the greedy walks are (`crate::walk`); the
//! thread-per-element kernels' shims are in `entries::ppo`.

use super::{
    ADV_LANES, GATHER_AHEAD, GATHER_ROWS, NORM_LANES, NORM_THREADS, NORM_WINDOW, PpoArgs, PpoParams, Rollout, adv_mean,
    adv_pair, adv_std, gather_column, gathered_lane, minibatch_advantage, norm_window, rollout_index, sample_loss,
};
use crate::mlp::ACTOR_CRITIC;
use crate::net::{PPO_LOSS_ROWS, Work, gpu_loss_rows, hidden_gradient};
use crate::nvptx_ops::{barrier_sync_count, dyn_smem};
use crate::tile::unrolled;
use crate::types::Transition;
use core::arch::nvptx;
use core::slice;

/// The minibatch observations of update `args.counter`, [`GATHER_ROWS`] samples per block ([`gather_rows`]):
/// each sample's rollout index ([`rollout_index`], a shuffle), then its columns ([`gather_column`]); zeros
/// for a trial that sits the update out. The thread that finds a sample's index also copies its advantage
/// into `gathered` ([`minibatch_advantage`]), so [`ppo_adv`] reads the minibatch's advantages in order
/// instead of finding every index again.
///
/// # Safety
/// `ppo`: `n_trials`; `ring`, `advantages`: `n_trials x steps x E` (fewer than `u32::MAX` transitions per
/// trial); `features`: `n_bars x (input - 3)`; `obs`: `n_trials x batch x input`; `gathered`: `n_trials x
/// batch`; [`gather_rows`]'s launch.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn ppo_gather(
    ppo: *const PpoParams,
    ring: *const Transition,
    advantages: *const f32,
    features: *const f32,
    obs: *mut f32,
    gathered: *mut f32,
    args: PpoArgs,
) {
    crate::nvptx_ops::follow_previous();
    let (b, d) = (args.batch as usize, args.input as usize);
    let n = args.steps as usize * args.envs_per_trial as usize;
    // SAFETY: lengths as documented; each element of `obs` is written by one thread of one block, each of
    // `gathered` by the thread that finds its sample's index.
    unsafe {
        let ring_of = |i: usize| slice::from_raw_parts(ring.add(i / b * n), n);
        let features = slice::from_raw_parts(features, args.n_bars as usize * (d - 3));
        gather_rows(
            args.n_trials as usize * b,
            d,
            |i| {
                let ring = ring_of(i);
                let index = rollout_index(&args, &*ppo.add(i / b), i % b, ring);
                *gathered.add(i) = minibatch_advantage(index, slice::from_raw_parts(advantages.add(i / b * n), n));
                index.map(|s| (s, ring[s].bar))
            },
            |i, index, bar, c| gather_column(features, d - 3, bar, |k| ring_of(i)[index].state[k], c),
            |e, v| *obs.add(e) = v,
        );
    }
}

/// The body of a row-gathering kernel, [`GATHER_ROWS`] rows per block of 256 threads with `2 x GATHER_ROWS`
/// u32 of dynamic shared memory. The block's first threads find their row's rollout index and its bar
/// (`find(row)`, once per row: a random draw or a shuffle, which one thread per element would repeat `width`
/// times); then each thread computes the values of up to [`GATHER_AHEAD`] elements `(row, column)` of the
/// block's rows, 256 apart (`value(row, index, bar, column)`, whose loads depend only on shared memory, so
/// they are in flight together), before it stores them (`put(row x width + column, value)`); a row without
/// an index gets zeros.
///
/// # Safety
/// Blocks of 256 threads and `8 x GATHER_ROWS` bytes of dynamic shared memory; every thread of the block
/// calls it (it holds a barrier); indices below `u32::MAX`.
#[inline(always)]
unsafe fn gather_rows<T: Copy + Default>(
    rows: usize,
    width: usize,
    find: impl Fn(usize) -> Option<(usize, u32)>,
    value: impl Fn(usize, usize, u32, usize) -> T,
    put: impl Fn(usize, T),
) {
    let indices = dyn_smem() as *mut u32;
    // SAFETY: reading the special registers has no side effects.
    let (block, thread) = unsafe { (nvptx::_block_idx_x() as usize, nvptx::_thread_idx_x() as usize) };
    let first = block * GATHER_ROWS;
    // SAFETY: thread `r < GATHER_ROWS` alone writes index and bar `r` before the barrier; all read them after.
    unsafe {
        let bars = indices.add(GATHER_ROWS);
        if thread < GATHER_ROWS && first + thread < rows {
            let (index, bar) = find(first + thread).map_or((u32::MAX, 0), |(s, b)| (s as u32, b));
            *indices.add(thread) = index;
            *bars.add(thread) = bar;
        }
        barrier_sync_count(0, 256);
        // Elements of the block's rows (fewer than 2^32: GATHER_ROWS rows of a u32 width).
        let (n, w) = ((rows.min(first + GATHER_ROWS).saturating_sub(first) * width) as u32, width as u32);
        let mut e0 = thread as u32;
        while e0 < n {
            const _: () = assert!(GATHER_AHEAD == 8, "the unrolled loops below are written for 8 elements");
            let mut vals = [T::default(); GATHER_AHEAD];
            unrolled!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                let e = e0 + 256 * j as u32;
                let (r, c) = ((e / w) as usize, (e % w) as usize);
                let index = if e < n { *indices.add(r) } else { u32::MAX };
                if index != u32::MAX {
                    vals[j] = value(first + r, index as usize, *bars.add(r), c);
                }
            });
            unrolled!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                let e = e0 + 256 * j as u32;
                if e < n {
                    put(first * width + e as usize, vals[j]);
                }
            });
            e0 += 256 * GATHER_AHEAD as u32;
        }
    }
}

/// The advantage moments (mean, standard deviation) of every normalizing trial's minibatch at update
/// `args.counter` ([`crate::ppo::gathered_moments`]'s bits, which are [`crate::ppo::adv_moments_of`]'s) from
/// the advantages [`ppo_gather`] copied in minibatch order: a block of [`ADV_LANES`] threads per trial (block
/// `(0, t)`), thread `l` lane `l` ([`gathered_lane`]: consecutive lanes load consecutive samples), the lanes
/// added in [`crate::ppo::adv_tree`]'s pairs level by level, twice (the mean, then the squared deviations from
/// it). Launched only when a trial normalizes its advantages; a trial that does not keeps its moments.
///
/// # Safety
/// `ppo`: `n_trials`, each trial's `batch` at most `args.batch`; `gathered`: `n_trials x batch` ([`ppo_gather`]'s
/// of this update); `moments`: `2 x n_trials`; blocks of `ADV_LANES` threads with `8 x ADV_LANES` bytes of
/// dynamic shared memory.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn ppo_adv(
    ppo: *const PpoParams,
    gathered: *const f32,
    moments: *mut f32,
    args: PpoArgs,
) {
    crate::nvptx_ops::follow_previous();
    // SAFETY: reads of special registers.
    let (t, lane) = unsafe { (nvptx::_block_idx_y() as usize, nvptx::_thread_idx_x() as usize) };
    if t >= args.n_trials as usize {
        return; // uniform over the block
    }
    let b = args.batch as usize;
    // SAFETY: lengths as documented; at each level thread `i < half` alone writes entry `i`, reading entries `i`
    // and `i + half`, which no thread writes at that level; the barriers order the levels, and the total
    // (entry 0) before every thread reads it; the first thread alone writes trial `t`'s moments.
    unsafe {
        let p = &*ppo.add(t);
        if p.norm_adv == 0 {
            return; // uniform over the block: the loss reads no moments of this trial
        }
        let batch = p.batch as usize;
        let gathered = slice::from_raw_parts(gathered.add(t * b), b);
        let (counts, sums) = (dyn_smem() as *mut u32, dyn_smem().add(ADV_LANES));
        let tree = |(c, s): (u32, f32)| {
            (*counts.add(lane), *sums.add(lane)) = (c, s);
            let mut half = ADV_LANES / 2;
            while half > 0 {
                nvptx::_syncthreads();
                if lane < half {
                    let (c, s) = adv_pair(
                        (*counts.add(lane), *sums.add(lane)),
                        (*counts.add(lane + half), *sums.add(lane + half)),
                    );
                    (*counts.add(lane), *sums.add(lane)) = (c, s);
                }
                half /= 2;
            }
            nvptx::_syncthreads();
            let total = (*counts, *sums);
            nvptx::_syncthreads();
            total
        };
        let (count, sum) = tree(gathered_lane(batch, lane, gathered, None));
        let mean = adv_mean(count, sum);
        let (_, squares) = tree(gathered_lane(batch, lane, gathered, Some(mean)));
        if lane == 0 {
            *moments.add(2 * t) = mean;
            *moments.add(2 * t + 1) = adv_std(count, squares);
        }
    }
}

/// Loss and output gradient of every minibatch sample, from the forward outputs in `work`'s region `Q` into
/// its region `DOUT`, then (with `hidden != 0`) the hidden gradient of layer 2 of the same samples: blocks as
/// in `dqn_td`, of [`PPO_LOSS_ROWS`] samples. Without it the products after the loss compute `D2` from the
/// output gradient (`mlp_rows`' `from_out`, which stores it for `mlp_gradients`).
///
/// # Safety
/// `ppo`: `n_trials`; `ring`, `logps`, `values`, `advantages`, `returns`: `n_trials x steps x E`; `moments`:
/// `2 x n_trials` ([`ppo_adv`]'s, read only for trials that normalize); `work`: `n_trials x Work::per_trial`;
/// `weights`: `n_trials x params`; `losses`: `n_trials x batch`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "the rollout's buffers")]
pub unsafe extern "ptx-kernel" fn ppo_loss(
    ppo: *const PpoParams,
    ring: *const Transition,
    logps: *const f32,
    values: *const f32,
    advantages: *const f32,
    returns: *const f32,
    moments: *const f32,
    work: *mut f32,
    weights: *const f32,
    losses: *mut f32,
    args: PpoArgs,
    hidden: u32,
) {
    crate::nvptx_ops::follow_previous();
    // SAFETY: reads of special registers.
    let (tile, t, tid) =
        unsafe { (nvptx::_block_idx_x() as usize, nvptx::_block_idx_y() as usize, nvptx::_thread_idx_x() as usize) };
    let (b, j0) = (args.batch as usize, tile * PPO_LOSS_ROWS);
    if t >= args.n_trials as usize || j0 >= b {
        return; // uniform over the block
    }
    let n = args.steps as usize * args.envs_per_trial as usize;
    let net = args.net();
    let w = Work::of(&net);
    // SAFETY: lengths as documented; thread `tid < PPO_LOSS_ROWS` alone writes sample `j0 + tid`'s output gradient
    // and loss; the barrier orders them before the product reads them.
    unsafe {
        let p = &*ppo.add(t);
        let j = j0 + tid;
        if tid < PPO_LOSS_ROWS && j < b {
            let row = |r: usize| w.at(r, t) + j * ACTOR_CRITIC;
            let at = |p: *const f32| slice::from_raw_parts(p.add(t * n), n);
            let ring = slice::from_raw_parts(ring.add(t * n), n);
            let out = slice::from_raw_parts(work.add(row(Work::Q)), ACTOR_CRITIC);
            let dout = slice::from_raw_parts_mut(work.add(row(Work::DOUT)), ACTOR_CRITIC);
            let r = Rollout {
                ring,
                logps: at(logps),
                values: at(values),
                advantages: at(advantages),
                returns: at(returns),
            };
            let m = if p.norm_adv != 0 { [*moments.add(2 * t), *moments.add(2 * t + 1)] } else { [0.0; 2] };
            // A trial that sits the update out keeps the losses of its last one.
            if let Some(loss) = sample_loss(&args, p, j, &r, m, out, dout) {
                *losses.add(t * b + j) = loss;
            }
        }
        if hidden == 0 {
            return; // uniform: the products after the loss compute D2 where they read it
        }
        nvptx::_syncthreads();
        let g = hidden_gradient(&net, t, &p.net(), true);
        gpu_loss_rows(&g, [work, weights, work, work], work, j0, PPO_LOSS_ROWS, tid);
    }
}

/// The lanes of every trial's gradient-norm sum ([`norm_lane`](super::norm_lane)'s bits): a block of
/// [`NORM_THREADS`] per trial stages the trial's active gradients [`NORM_WINDOW`] at a time in shared memory
/// (16 loads a thread in flight at once), and its first [`NORM_LANES`] threads fold their lanes over each
/// window in turn ([`norm_window`]): a thread per lane loading its own terms would wait a global round trip
/// per 8 terms.
///
/// # Safety
/// `ppo`: `n_trials`; `grads`: `n_trials x params`; `lanes`: `n_trials x NORM_LANES`; blocks of
/// `NORM_THREADS` threads, block `(0, t)` for trial `t`, with `4 x NORM_WINDOW` bytes of dynamic shared memory.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn ppo_norm(ppo: *const PpoParams, grads: *const f32, lanes: *mut f32, args: PpoArgs) {
    crate::nvptx_ops::follow_previous();
    const PER_THREAD: usize = NORM_WINDOW / NORM_THREADS as usize;
    // SAFETY: reads of special registers.
    let (t, thread) = unsafe { (nvptx::_block_idx_y() as usize, nvptx::_thread_idx_x() as usize) };
    if t >= args.n_trials as usize {
        return; // uniform over the block
    }
    let l = args.layout();
    // SAFETY: lengths as documented; thread `j` alone writes window elements `j + NORM_THREADS i`, the
    // barriers order them before the lanes' reads and those before the next window's writes; thread `lane`
    // alone writes lane `lane` of trial `t`.
    unsafe {
        let h = (*ppo.add(t)).hidden as usize;
        let n = super::active_params(&l, h);
        let g = grads.add(t * l.params());
        let window = dyn_smem();
        let mut acc = 0.0f32;
        let mut w0 = 0;
        while w0 < n {
            let len = (n - w0).min(NORM_WINDOW);
            let at = |i: usize| thread + NORM_THREADS as usize * i;
            const _: () = assert!(PER_THREAD == 16, "the unrolled loops below are written for 16 loads");
            let mut vals = [0.0f32; PER_THREAD];
            unrolled!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if at(i) < len {
                    vals[i] = *g.add(super::active_param(&l, h, w0 + at(i)));
                }
            });
            unrolled!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if at(i) < len {
                    *window.add(at(i)) = vals[i];
                }
            });
            nvptx::_syncthreads();
            if thread < NORM_LANES {
                acc = norm_window(thread, slice::from_raw_parts(window, len), acc);
            }
            nvptx::_syncthreads();
            w0 += NORM_WINDOW;
        }
        if thread < NORM_LANES {
            *lanes.add(t * NORM_LANES + thread) = acc;
        }
    }
}
