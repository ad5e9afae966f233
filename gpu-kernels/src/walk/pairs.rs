//! The register walk two bars a round ([`greedy_walk_pairs`]): the wide layers' weights in registers, the
//! network of a bar's state and of its three children at once.

use super::WalkTrial;
use super::regs::{dot_regs, named_barrier, register_row};
use crate::batch::observe_floats;
use crate::env::walk_step_on_series;
use crate::mlp::{ACTIONS, argmax};
use crate::net::{
    NetTrial, WALK_LAYER_THREADS, WALK_OUTPUT_THREAD, WALK_PAIR_NETS, WALK_REG_UNITS, WALK_REGS_THREADS, WALK_THREADS,
    WalkPairsShared, dot_aligned, walk_row_stride,
};
use crate::nvptx_ops::{dyn_smem, lds4, prefetch, shared_addr};
use crate::tile::{fma, unrolled};
use crate::types::{Bar, EnvState, TrialParams};
use core::slice;

/// Env warps of a register-walk block (one an action), after the layer threads.
const ENV_THREADS: usize = WALK_THREADS - WALK_LAYER_THREADS;

/// A register walk's env states and outputs in shared memory ([`WalkPairsShared`]), double-buffered by round
/// parity. Round `r` takes bars `2r` and `2r + 1`: its inputs are its first state `S` and `S`'s children
/// `C[x]` (`S` stepped with action `x`), both written by round `r - 1` (parity `(r + 1) % 2`); it writes
/// the grandchildren `G[x][y]` (`C[x]` stepped with `y`) and their children `GG[x][y][z]` (parity `r % 2`),
/// among which the next round finds its inputs once this round's two actions are known.
#[derive(Clone, Copy)]
struct PairRounds {
    g: *mut EnvState,
    gg: *mut EnvState,
    gf: *mut [f32; 3],
    ggf: *mut [f32; 3],
    q: *mut f32,
    o: usize,
}

impl PairRounds {
    /// The rounds' buffers of the block whose shared memory starts at `smem`.
    ///
    /// # Safety
    /// `smem` holds `ws` (16-byte aligned).
    #[inline(always)]
    unsafe fn of(smem: *mut f32, ws: &WalkPairsShared, outputs: usize) -> Self {
        // SAFETY: the caller's contract.
        unsafe {
            Self {
                g: smem.add(ws.g) as *mut EnvState,
                gg: smem.add(ws.gg) as *mut EnvState,
                gf: smem.add(ws.gf) as *mut [f32; 3],
                ggf: smem.add(ws.ggf) as *mut [f32; 3],
                q: smem.add(ws.q),
                o: outputs,
            }
        }
    }

    /// The actions of round `r - 1`'s two bars: the argmax of its first state's outputs, then the argmax of
    /// the outputs of that action's child (`(0, 0)` before round 0, whose inputs [`Self::start`] placed
    /// where that pair points).
    ///
    /// # Safety
    /// Round `r - 1`'s outputs are written and ordered before this read (a block-wide barrier).
    #[inline(always)]
    unsafe fn pair(&self, r: usize) -> (usize, usize) {
        if r == 0 {
            return (0, 0);
        }
        // SAFETY: the caller's contract; the parity's `WALK_PAIR_NETS x o` outputs lie inside the buffer.
        unsafe {
            let q = self.q.add((r - 1) % 2 * WALK_PAIR_NETS * self.o);
            let a = argmax(slice::from_raw_parts(q, self.o));
            (a, argmax(slice::from_raw_parts(q.add((1 + a) * self.o), self.o)))
        }
    }

    /// Index of grandchild `(x, y)` of parity `p`.
    #[inline(always)]
    fn gi(p: usize, x: usize, y: usize) -> usize {
        9 * p + 3 * x + y
    }

    /// Index of great-grandchild `(x, y, z)` of parity `p`.
    #[inline(always)]
    fn ggi(p: usize, x: usize, y: usize, z: usize) -> usize {
        27 * p + 9 * x + 3 * y + z
    }

    /// Round `r`'s inputs with their portfolio floats: its first state, then that state's children.
    ///
    /// # Safety
    /// As [`Self::pair`], and round `r - 1`'s states are written and ordered before this read.
    #[inline(always)]
    unsafe fn inputs(&self, r: usize) -> [(*const EnvState, [f32; 3]); WALK_PAIR_NETS] {
        // SAFETY: the caller's contract; every index is below the buffers' `2 x 9` and `2 x 27`.
        unsafe {
            let ((a, b), p) = (self.pair(r), (r + 1) % 2);
            let first = Self::gi(p, a, b);
            let child = |x: usize| {
                let k = Self::ggi(p, a, b, x);
                (self.gg.add(k) as *const EnvState, *self.ggf.add(k))
            };
            [(self.g.add(first) as *const EnvState, *self.gf.add(first)), child(0), child(1), child(2)]
        }
    }

    /// Before round 0, env warp `w`'s lane 0: child `w` of the walk's `start` where round 0 reads it
    /// (`GG[0][0][w]` of parity 1), and lane 0 of warp 0 `start` itself (`G[0][0]`).
    ///
    /// # Safety
    /// One thread per env warp calls this, before a block-wide barrier that precedes round 0.
    #[inline(always)]
    unsafe fn start(&self, params: &TrialParams, start: EnvState, bars: &[Bar], w: usize) {
        // SAFETY: the caller's contract.
        unsafe {
            let mut s = start;
            walk_step_on_series(params, &mut s, w as u8, bars);
            let k = Self::ggi(1, 0, 0, w);
            *self.ggf.add(k) = observe_floats(params, &s, bars);
            *self.gg.add(k) = s;
            if w == 0 {
                let k = Self::gi(1, 0, 0);
                *self.gf.add(k) = observe_floats(params, &start, bars);
                *self.g.add(k) = start;
            }
        }
    }

    /// Env warp `w`'s part of round `r` (lane `lane`): the grandchildren `G[x][w]` (lanes `x < 3`), then,
    /// after the env warps' barrier, the great-grandchildren `GG[x][y][w]` (lane `3x + y < 9`).
    ///
    /// # Safety
    /// Every thread of the env warps calls this in round `r`, after the block-wide barrier that ends round
    /// `r - 1`; `env_barrier` is the env warps' own barrier.
    #[inline(always)]
    unsafe fn step(
        &self,
        params: &TrialParams,
        bars: &[Bar],
        r: usize,
        (w, lane): (usize, usize),
        env_barrier: impl Fn(),
    ) {
        // SAFETY: the caller's contract; each slot written here is this lane's alone in round `r`, and the
        // grandchildren are written before the barrier that precedes their reads.
        unsafe {
            let ((a, b), p, src) = (self.pair(r), r % 2, (r + 1) % 2);
            if lane < ACTIONS {
                let mut s = *self.gg.add(Self::ggi(src, a, b, lane));
                walk_step_on_series(params, &mut s, w as u8, bars);
                let k = Self::gi(p, lane, w);
                *self.gf.add(k) = observe_floats(params, &s, bars);
                *self.g.add(k) = s;
            }
            env_barrier();
            if lane < ACTIONS * ACTIONS {
                let (x, y) = (lane / ACTIONS, lane % ACTIONS);
                let mut s = *self.g.add(Self::gi(p, x, y));
                walk_step_on_series(params, &mut s, w as u8, bars);
                let k = Self::ggi(p, x, y, w);
                *self.ggf.add(k) = observe_floats(params, &s, bars);
                *self.gg.add(k) = s;
            }
        }
    }

    /// The state after the walk's `steps` steps.
    ///
    /// # Safety
    /// After the block-wide barrier that ends the last round.
    #[inline(always)]
    unsafe fn last(&self, steps: usize) -> EnvState {
        let rounds = steps.div_ceil(2);
        // SAFETY: the caller's contract; the last round's and the one before's outputs are still in place.
        unsafe {
            if rounds == 0 {
                return *self.g.add(Self::gi(1, 0, 0));
            }
            let (a, b) = self.pair(rounds);
            if steps.is_multiple_of(2) {
                *self.g.add(Self::gi((rounds - 1) % 2, a, b))
            } else {
                let (pa, pb) = self.pair(rounds - 1);
                *self.gg.add(Self::ggi(rounds % 2, pa, pb, a))
            }
        }
    }
}

/// [`dot_regs`] of the same register row with [`WALK_PAIR_NETS`] inputs at once (network `n`'s at `x + n x
/// WALK_REG_UNITS` floats): each sum is `dot_regs`'s chain (the same terms in the same order), the chains
/// interleaved, so one row's latency covers four networks. Four inputs of each network are loaded while the
/// four before them are summed.
///
/// # Safety
/// `x` addresses this block's shared memory, holding `WALK_PAIR_NETS x WALK_REG_UNITS` floats.
#[inline(always)]
#[allow(unused_assignments, reason = "the last chunk's load ahead is not read")]
unsafe fn dot_regs_nets(x: u32, w: &[f32; WALK_REG_UNITS], h: usize) -> [f32; WALK_PAIR_NETS] {
    const LAST: usize = WALK_REG_UNITS / 4 - 1;
    const NET: u32 = 4 * WALK_REG_UNITS as u32;
    const _: () = assert!(LAST == 31 && WALK_PAIR_NETS == 4, "the unrolled groups below are 4 of 8 chunks, 4 nets");
    // SAFETY: the caller's contract; chunk c reads floats 4c .. 4c + 4 of each network, c <= LAST.
    let load = |c: usize| unsafe {
        let a = x + 16 * c as u32;
        [lds4(a), lds4(a + NET), lds4(a + 2 * NET), lds4(a + 3 * NET)]
    };
    let mut acc = [0.0f32; WALK_PAIR_NETS];
    let mut ahead = load(0);
    unrolled!(g in [0, 1, 2, 3] {
        if 32 * g < h {
            unrolled!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
                let c = 8 * g + i;
                let cur = ahead;
                ahead = load((c + 1).min(LAST));
                unrolled!(u in [0, 1, 2, 3] {
                    unrolled!(n in [0, 1, 2, 3] {
                        acc[n] = fma(cur[n][u], w[4 * c + u], acc[n]);
                    });
                });
            });
        }
    });
    acc
}

/// Layer 1's market part (the first `input - 3` terms of a unit's chain) for recent bars: the bars of the
/// round's inputs and those foreseen for the next round, newest first.
struct MarketParts {
    bars: [usize; 4],
    parts: [f32; 4],
}

impl MarketParts {
    /// The part of `bar`, when kept.
    #[inline(always)]
    fn get(&self, bar: usize) -> Option<f32> {
        let mut found = None;
        unrolled!(e in [0, 1, 2, 3] {
            if found.is_none() && self.bars[e] == bar {
                found = Some(self.parts[e]);
            }
        });
        found
    }

    /// The part of `bar` for layer thread `tid` (`unit`: it has a unit): kept, or else computed from the
    /// bar's features staged in `now` (a bar not foreseen, as where a done env stays on its bar) with its
    /// staged row `w1row` of `W1`, and kept. `features` holds `f` floats a bar.
    ///
    /// # Safety
    /// Every layer thread calls this with the same `bar` and the same kept bars (uniform control flow:
    /// `layer_barrier` is theirs); `now` holds `f` floats of this block's shared memory that only this
    /// function writes, `w1row` `f` (16-byte aligned).
    #[inline(always)]
    unsafe fn part(
        &mut self,
        bar: usize,
        (tid, unit): (usize, bool),
        (features, f): (&[f32], usize),
        (now, w1row): (*mut f32, *const f32),
        layer_barrier: impl Fn(),
    ) -> f32 {
        if let Some(p) = self.get(bar) {
            return p;
        }
        // SAFETY: the caller's contract; the first barrier orders earlier readers of `now` before these
        // writes, the second these writes before the reads.
        unsafe {
            layer_barrier();
            let mut c = tid;
            while c < f {
                *now.add(c) = features[bar * f + c];
                c += WALK_LAYER_THREADS;
            }
            layer_barrier();
            let p = if unit { dot_aligned(now, w1row, f) } else { 0.0 };
            self.keep(bar, p);
            p
        }
    }

    /// Keeps `part` of `bar`, dropping the oldest.
    #[inline(always)]
    fn keep(&mut self, bar: usize, part: f32) {
        unrolled!(e in [3, 2, 1] {
            self.bars[e] = self.bars[e - 1];
            self.parts[e] = self.parts[e - 1];
        });
        self.bars[0] = bar;
        self.parts[0] = part;
    }
}

/// Layer thread `tid`'s share of the features of bars `ahead` and `ahead + 1` (those in `features`, which
/// holds `f` floats a bar) into the two rows of `next` (`row` floats apart), prefetching those of the two
/// bars after them.
///
/// # Safety
/// `next` holds two rows of `f` floats of this block's shared memory that no thread reads before the next
/// barrier among the layer threads.
#[inline(always)]
unsafe fn stage_features(next: *mut f32, row: usize, (features, f): (&[f32], usize), ahead: usize, tid: usize) {
    let n_bars = features.len() / f.max(1);
    unrolled!(k in [0, 1] {
        if ahead + k < n_bars {
            let mut c = tid;
            while c < f {
                // SAFETY: the caller's contract; `c < f`.
                unsafe { *next.add(k * row + c) = features[(ahead + k) * f + c] };
                if ahead + k + 2 < n_bars {
                    prefetch(features.as_ptr().wrapping_add((ahead + k + 2) * f + c));
                }
                c += WALK_LAYER_THREADS;
            }
        }
    });
}

/// [`greedy_walk`](super::greedy_walk) with the wide layers' weights in registers, for networks of at most
/// [`WALK_REG_UNITS`] hidden units and [`WALK_PAIRS_OUTPUTS`](crate::net::WALK_PAIRS_OUTPUTS) outputs
/// ([`crate::net::walk_pairs_suit`]): a block of [`WALK_REGS_THREADS`] per trial, two bars a round. Layer
/// thread `n` keeps unit `n`'s row of `W2`; lane `L` of the output warp output `L % outputs`'s row of `W3`
/// (zeros past the trial's width); `W1` is staged in shared memory.
///
/// A round starts from the state `S` of its first bar and `S`'s three children (one per action), found
/// among what the round before stepped. Its layer threads compute the network of all four at once (each
/// unit's four chains interleaved over its register row), the output warp their outputs (a lane each): the
/// argmax of `S`'s outputs is the first bar's action, and the argmax of that child's outputs the second's.
/// Meanwhile the env warps step every child with every action and each of those nine grandchildren with
/// every action again (warp `w` takes action `w`), so that once both actions are known the next round's
/// `S` (a grandchild) and its children (great-grandchildren) are stepped already. Per two bars the critical
/// path is three layer-1 terms, layer 2's chain, the output chain and three barriers. Layer 1 is split at
/// the portfolio floats: the market features' part of each unit's sum (its first `input - 3` terms, which
/// do not depend on the actions) is computed for the next round's two bars while the output warp computes
/// this round's outputs, and each input's portfolio floats add their three terms to it (the same FMA chain,
/// so the same bits); a bar that was not foreseen (a done env stays on its bar) has its part computed when
/// it is observed. Every unit is [`crate::net::dense_unit`]'s element and every action the argmax of the
/// state the CPU walk reaches, bit for bit.
///
/// # Safety
/// [`greedy_walk`](super::greedy_walk)'s, with dynamic shared memory of [`WalkPairsShared::of`]`(args).len`
/// floats (16-byte aligned), `args.hidden <= WALK_REG_UNITS`, `args.outputs <= WALK_PAIRS_OUTPUTS`; one block
/// of `WALK_REGS_THREADS` per trial.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn greedy_walk_pairs(
    env_params: *const TrialParams,
    states: *mut EnvState,
    bars: *const Bar,
    features: *const f32,
    trials: *const NetTrial,
    weights: *const f32,
    actions: *mut u8,
    args: crate::net::NetArgs,
    steps: u32,
) {
    crate::nvptx_ops::follow_previous();
    const LAYER: usize = WALK_LAYER_THREADS;
    const NET: usize = WALK_REG_UNITS;
    // Barrier ids: 0 the whole block, 1 the layer threads, 2 the layer threads and the output warp, 3 the
    // env warps.
    // SAFETY: every thread of the block takes barrier 0 in the same order.
    let block_barrier = || unsafe { named_barrier(0, WALK_REGS_THREADS) };
    // SAFETY: every layer thread takes barrier 1 in the same order (uniform control flow).
    let layer_barrier = || unsafe { named_barrier(1, LAYER) };
    // SAFETY: every layer thread and the output warp take barrier 2 in the same order.
    let output_barrier = || unsafe { named_barrier(2, LAYER + 32) };
    // SAFETY: every env thread takes barrier 3 in the same order.
    let env_barrier = || unsafe { named_barrier(3, ENV_THREADS) };
    // SAFETY: the caller's contract. Shared writes and their reads are ordered by the barriers: the states
    // and outputs of round r are written before the block-wide barrier that ends it and read after it, into
    // the parity-r buffers, which round r + 1 leaves alone; `h1` is written before barrier 1 and read after
    // it, `h2` before barrier 2 and read after it, `next` before barrier 1 and read after barrier 2, `now`
    // after a barrier 1 that follows its earlier readers and read after the next; every buffer is rewritten
    // only in a later round, after the block-wide barrier that ends the round of its readers.
    unsafe {
        let Some(trial) = WalkTrial::of(&args, env_params, (bars, features), trials, weights) else { return };
        let WalkTrial { t, tid, l, params, f, bars, features, w, .. } = trial;
        let (d, o) = (l.input, l.outputs);
        let h = trial.hidden.min(WALK_REG_UNITS);
        let smem = dyn_smem();
        let ws = WalkPairsShared::of(&args);
        let rounds = PairRounds::of(smem, &ws, o);
        let (h1, h2, now, next, w1s) =
            (smem.add(ws.h1), smem.add(ws.h2), smem.add(ws.now), smem.add(ws.next), smem.add(ws.w1));
        let s1 = walk_row_stride(d);
        let mut i = tid;
        while i < h * d {
            let (n, j) = (i / d, i % d);
            *w1s.add(n * s1 + j) = *w.add(l.w1() + n * d + j);
            i += WALK_REGS_THREADS;
        }
        let (layer, lane) = (tid < LAYER, tid.wrapping_sub(WALK_OUTPUT_THREAD));
        let env = (LAYER..WALK_THREADS).contains(&tid).then(|| ((tid - LAYER) / 32, (tid - LAYER) % 32));
        let unit = layer && tid < h;
        let output = lane < WALK_PAIR_NETS * o;
        let (wr, bias) = register_row(&l, w, h, unit.then_some(tid), output.then(|| lane % o));
        // Layer 1's bias and its weights of the three portfolio floats (the last inputs).
        let (b1, tail) = if unit {
            let r = w.add(l.w1() + tid * d + f);
            (*w.add(l.b1() + tid), [*r, *r.add(1), *r.add(2)])
        } else {
            (0.0, [0.0; 3])
        };
        let w1row = w1s.add(tid.min(WALK_REG_UNITS - 1) * s1);
        let (h1a, h2a) = (shared_addr(h1), shared_addr(h2));
        let n_bars = bars.len();
        let steps = steps as usize;
        let mut kept = MarketParts { bars: [usize::MAX; 4], parts: [0.0; 4] };
        if let Some((w, 0)) = env {
            rounds.start(params, *states.add(t), bars, w);
        }
        block_barrier();
        for r in 0..steps.div_ceil(2) {
            if tid >= WALK_OUTPUT_THREAD {
                output_barrier();
                if output {
                    let x = h2a + (4 * NET * (lane / o)) as u32;
                    *rounds.q.add(r % 2 * WALK_PAIR_NETS * o + lane) = dot_regs(x, &wr, h) + bias;
                }
            } else if let Some(warp_lane) = env {
                rounds.step(params, bars, r, warp_lane, env_barrier);
            } else {
                let inputs = rounds.inputs(r);
                let bar0 = (*inputs[0].0).bar as usize;
                // The next round's bars, when this round's children moved on a bar.
                let ahead = bar0 + 2;
                let foresee = (*inputs[1].0).bar as usize == bar0 + 1;
                if foresee {
                    stage_features(next, ws.next_row, (features, f), ahead, tid);
                }
                trial.prefetch_bars(ahead, LAYER - 1);
                trial.prefetch_bars(ahead + 1, LAYER - 2);
                // `dense_unit` of layer 1 for each input: the chain goes on from its bar's market part with
                // its portfolio floats.
                unrolled!(n in [0, 1, 2, 3] {
                    let (state, pf) = inputs[n];
                    let bar = (*state).bar as usize;
                    let part = kept.part(bar, (tid, unit), (features, f), (now, w1row), layer_barrier);
                    let v = if unit {
                        let s = fma(pf[2], tail[2], fma(pf[1], tail[1], fma(pf[0], tail[0], part))) + b1;
                        crate::mlp::activate(l.activation, s)
                    } else {
                        0.0
                    };
                    *h1.add(n * NET + tid) = v;
                });
                layer_barrier();
                let sums = dot_regs_nets(h1a, &wr, h);
                unrolled!(n in [0, 1, 2, 3] {
                    *h2.add(n * NET + tid) = if unit { crate::mlp::activate(l.activation, sums[n] + bias) } else { 0.0 };
                });
                output_barrier();
                // While the output warp computes this round's outputs: the next round's market parts.
                if foresee {
                    unrolled!(k in [0, 1] {
                        if ahead + k < n_bars && kept.get(ahead + k).is_none() {
                            let p = if unit { dot_aligned(next.add(k * ws.next_row), w1row, f) } else { 0.0 };
                            kept.keep(ahead + k, p);
                        }
                    });
                }
            }
            block_barrier();
            if tid == LAYER {
                let (a, b) = rounds.pair(r + 1);
                *actions.add(t * steps + 2 * r) = a as u8;
                if 2 * r + 1 < steps {
                    *actions.add(t * steps + 2 * r + 1) = b as u8;
                }
            }
        }
        if tid == LAYER {
            *states.add(t) = rounds.last(steps);
        }
    }
}
