//! The kernel registry: every PTX entry point declared once ([`crate::for_each_kernel`]), and the facts the
//! build and the host need about them: launch bounds, early reads, the dependent-launch target.
//!
//! [`crate::for_each_kernel`] lists every kernel as `shim_name CONSTANT;`. This module makes the name constants
//! and [`ALL`] from it; the host makes its struct of loaded kernels from it (one field per kernel, each
//! resolved by its constant when the module loads); the shims in `entries` (nvptx only) carry these names,
//! and `build.rs` fails the build when the PTX lacks an `.entry` for any name in [`ALL`]. So a kernel is
//! added in one list, and a renamed shim is caught at build time.

/// Invokes the macro `$m` with the list of every kernel: for each, its doc comment, the name of its
/// `extern "ptx-kernel"` shim (the PTX entry) and the name of its constant here, as
/// `$(#[doc] shim CONSTANT;)*`.
#[macro_export]
macro_rules! for_each_kernel {
    ($m:ident) => {
        $m! {
            /// Walks every env over S bars (S = 1: step mode), writing transitions ([`crate::batch::scan_env`]).
            env_scan ENV_SCAN;
            /// Writes each env's observation ([`crate::batch::observe_env`]).
            observe OBSERVE;
            /// Moments of chunks of raw rewards ([`crate::batch::chunk_moments`]).
            reward_chunk_moments REWARD_CHUNK_MOMENTS;
            /// Running reward moments per trial ([`crate::batch::merge_trial_moments`]).
            reward_merge REWARD_MERGE;
            /// Reward normalization ([`crate::batch::normalize_transition`]).
            reward_normalize REWARD_NORMALIZE;
            /// Replay sampling with state reconstruction ([`crate::batch::sample_entry`]).
            sample_transitions SAMPLE_TRANSITIONS;
            /// A new episode for every env of the vector env ([`crate::vector::reset_env`]).
            vector_reset VECTOR_RESET;
            /// The lowest env whose action is invalid ([`crate::vector::action_at`]).
            vector_check VECTOR_CHECK;
            /// One step of every env of the vector env, with autoreset ([`crate::vector::step_env`]).
            vector_step VECTOR_STEP;
            /// Walks every portfolio env over S bars, one thread per env
            /// ([`crate::account::env::scan_portfolio_env`]).
            portfolio_env_scan PORTFOLIO_ENV_SCAN;
            /// Every row's observation of the universe learners, one thread per row
            /// ([`crate::account::rows::observe_universe_row`]).
            universe_observe UNIVERSE_OBSERVE;
            /// One portfolio step of every env of the universe learners and its rows' transitions into the
            /// ring, one thread per env ([`crate::account::rows::step_universe_env`]).
            universe_step UNIVERSE_STEP;
            /// Backtest of every column: metrics, trade counts, equity curves or the ledger
            /// ([`crate::backtest::run_column`]).
            backtest BACKTEST;
            /// The products of a plan: batched, masked matrix products (`crate::tile::gpu_tile`, nvptx only).
            gemm_tiles GEMM_TILES;
            /// The three layers of a network on a tile of rows, fused (`crate::chain::gpu_chain`, nvptx only).
            mlp_chain MLP_CHAIN;
            /// [`MLP_CHAIN`] on tiles of `crate::chain::WIDE_ROWS` rows, a block of 512 threads a multiprocessor.
            mlp_chain_wide MLP_CHAIN_WIDE;
            /// A product with its right operand staged whole, a tile of rows per block (`crate::chain::gpu_rows`,
            /// nvptx only): the hidden gradient of layer 1.
            mlp_rows MLP_ROWS;
            /// [`MLP_ROWS`] on tiles of `crate::chain::WIDE_ROWS` rows, a block of 512 threads a multiprocessor.
            mlp_rows_wide MLP_ROWS_WIDE;
            /// The hidden gradient of layer 1 and every weight gradient of a training step, fused
            /// (`crate::backward::gpu_backward`, nvptx only).
            mlp_backward MLP_BACKWARD;
            /// [`MLP_BACKWARD`]'s weight and bias gradients from a stored hidden gradient of layer 1
            /// (`crate::backward::gpu_backward` with `stored`, nvptx only).
            mlp_gradients MLP_GRADIENTS;
            /// Epsilon-greedy actions from the acting Q-values ([`crate::dqn::choose`]).
            dqn_select DQN_SELECT;
            /// DQN acting in one launch: observations, [`MLP_CHAIN`]'s layers on `crate::chain::ACT_ROWS`-row tiles,
            /// then [`DQN_SELECT`]'s choice (nvptx only).
            dqn_act DQN_ACT;
            /// TD targets, loss and output gradients of every sample ([`crate::dqn::td_sample`]), then their layer-2
            /// hidden gradients ([`crate::net::hidden_gradient`]).
            dqn_td DQN_TD;
            /// Per-parameter gradient, Adam and target update ([`crate::net::gradient`], [`crate::dqn::update_param`]).
            dqn_adam DQN_ADAM;
            /// The greedy walk of one env per trial, a block per trial ([`crate::net::dense_unit`]).
            greedy_walk GREEDY_WALK;
            /// The greedy walk with the wide layers' weights in registers, for hidden layers of at most 128 units.
            greedy_walk_regs GREEDY_WALK_REGS;
            /// The FP32 FMA throughput reference of the benchmarks ([`crate::tile::fma`] chains).
            fma_peak FMA_PEAK;
            /// PPO acting from the acting outputs ([`crate::ppo::choose`]).
            ppo_select PPO_SELECT;
            /// PPO acting in one launch ([`DQN_ACT`]'s shape, then [`PPO_SELECT`]'s choice; nvptx only).
            ppo_act PPO_ACT;
            /// GAE ([`crate::ppo::gae_env`]).
            ppo_gae PPO_GAE;
            /// The minibatch observations ([`crate::ppo::gather_column`]) and advantages
            /// ([`crate::ppo::minibatch_advantage`]).
            ppo_gather PPO_GATHER;
            /// The advantage moments of every normalizing trial's minibatch from its gathered advantages
            /// ([`crate::ppo::gathered_moments`], [`crate::ppo::adv_moments_of`]'s bits).
            ppo_adv PPO_ADV;
            /// PPO loss and output gradient per sample ([`crate::ppo::loss_sample`]), then the layer-2 hidden gradients
            /// ([`crate::net::hidden_gradient`]).
            ppo_loss PPO_LOSS;
            /// PPO gradient per parameter from the chunk partials ([`crate::net::gradient`]).
            ppo_grad PPO_GRAD;
            /// Lanes of the PPO gradient-norm sums ([`crate::ppo::norm_lane`]).
            ppo_norm PPO_NORM;
            /// PPO clipped gradient and Adam per parameter ([`crate::ppo::clip_scale`], [`crate::ppo::adam_step`]).
            ppo_adam PPO_ADAM;
        }
    };
}

/// The name constants and [`ALL`] of [`crate::for_each_kernel`]'s list.
macro_rules! name_constants {
    ($($(#[$doc:meta])* $shim:ident $name:ident;)*) => {
        $($(#[$doc])* pub const $name: &str = stringify!($shim);)*
        /// Every kernel the host expects in the PTX module.
        pub const ALL: &[&str] = &[$($name),*];
    };
}
for_each_kernel!(name_constants);

/// Threads per block of a [`BACKTEST`] launch (its launch bounds' maximum): small blocks fill the
/// multiprocessors evenly.
pub const BACKTEST_BLOCK: u32 = 64;

/// Launch bounds, CUDA's `__launch_bounds__(max_threads, min_blocks)`, which `build.rs` writes into the PTX
/// as `.maxntid` and (when `min_blocks > 0`) `.minnctapersm`, since Rust has no attribute for them:
/// `(kernel, max threads per block, min blocks per multiprocessor)`. The backtest bounds only its block
/// size: it keeps about 150 registers, and a register limit for more blocks per multiprocessor makes ptxas
/// spill. `mlp_chain` asks for two blocks of 128 threads per multiprocessor (registers are no limit then:
/// up to 255 a thread): its shared memory (101 KB at D = 54, H = 128) leaves room for two. `mlp_chain_wide`
/// asks for one block of 512 (at most 128 registers a thread): its shared memory (200 KB) leaves room for
/// one. The acting kernels ask for one block of 256 (40 rows, the weights apart: 140 KB). `gemm_tiles` asks
/// for three blocks of 256 (at most 85 registers): the products are latency-bound (a global round trip per
/// K step), so a third block's warps hide more of it.
pub const LAUNCH_BOUNDS: &[(&str, u32, u32)] = &[
    (BACKTEST, BACKTEST_BLOCK, 0),
    (MLP_CHAIN, crate::chain::CHAIN_THREADS, 2),
    (MLP_CHAIN_WIDE, crate::chain::WIDE_THREADS, 1),
    (DQN_ACT, crate::chain::ACT_THREADS, 1),
    (PPO_ACT, crate::chain::ACT_THREADS, 1),
    (MLP_ROWS, crate::chain::CHAIN_THREADS, 2),
    (MLP_ROWS_WIDE, crate::chain::WIDE_THREADS, 1),
    (MLP_BACKWARD, crate::backward::BACKWARD_THREADS, 2),
    (MLP_GRADIENTS, crate::backward::BACKWARD_THREADS, 2),
    (GEMM_TILES, crate::tile::GEMM_THREADS, 3),
    (GREEDY_WALK_REGS, crate::net::WALK_REGS_THREADS as u32, 1),
    (PPO_NORM, crate::ppo::NORM_THREADS, 0),
    (PPO_ADV, crate::ppo::ADV_LANES as u32, 0),
];

/// The kernels that read before their grid-dependency wait (`nvptx_ops::follow_previous`; every other kernel
/// waits first): the training chains copy the network's weights (`W1`, `W3`) and the fused backward pass the
/// layer-1 side's `W2` columns, with programmatic dependent launch while the kernel before them runs. So the
/// kernel launched just before one of these on its stream must not write the weights it reads: the sampler
/// or PPO's gather before a training forward pass, the loss kernel or `mlp_rows` before the backward pass
/// (every grid before that one has completed when a kernel's blocks start, so an update two or more launches
/// back is done). Nothing is written to global memory before the wait (a PTX test checks it).
/// The acting kernels read early what their `early` argument names: the host passes the weights after an
/// acting kernel (which writes the envs' states, not the weights) and the observations' inputs after an
/// update (which writes the weights, not the envs), nothing after any other kernel.
pub const EARLY_READS: &[&str] = &[MLP_CHAIN, MLP_CHAIN_WIDE, MLP_BACKWARD, MLP_GRADIENTS, DQN_ACT, PPO_ACT];

/// The first PTX target whose modules use programmatic dependent launch (`griddepcontrol`): build.rs builds
/// a module for it beside an older `GPU_ARCH`, and the host launches a module of this target or later
/// dependently.
pub const DEPENDENT_LAUNCH_ARCH: &str = "sm_90";

/// The number of an `sm_NN` target (90 for `sm_90` and `sm_90a`; `None` for anything else).
pub fn sm_number(arch: &str) -> Option<u32> {
    arch.strip_prefix("sm_")?.trim_end_matches(char::is_alphabetic).parse().ok()
}
