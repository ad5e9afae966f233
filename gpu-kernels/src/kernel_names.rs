//! The names of the PTX entry points, defined once.
//!
//! `build.rs` fails the build when the PTX lacks an `.entry` for any name in [`ALL`], and the host resolves
//! every one of them when it loads the module, so a renamed shim is caught at build time, not at launch.

/// Walks every env over S bars (S = 1: step mode), writing transitions ([`crate::batch::scan_env`]).
pub const ENV_SCAN: &str = "env_scan";
/// Writes each env's state vector ([`crate::batch::observe_env`]).
pub const OBSERVE: &str = "observe";
/// Moments of chunks of raw rewards ([`crate::batch::chunk_moments`]).
pub const REWARD_CHUNK_MOMENTS: &str = "reward_chunk_moments";
/// Running reward moments per trial ([`crate::batch::merge_trial_moments`]).
pub const REWARD_MERGE: &str = "reward_merge";
/// Reward normalization ([`crate::batch::normalize_transition`]).
pub const REWARD_NORMALIZE: &str = "reward_normalize";
/// Replay sampling with state reconstruction ([`crate::batch::sample_entry`]).
pub const SAMPLE_TRANSITIONS: &str = "sample_transitions";

/// A new episode for every env of the vector env ([`crate::vector::reset_env`]).
pub const VECTOR_RESET: &str = "vector_reset";
/// The lowest env whose action is invalid ([`crate::vector::action_at`]).
pub const VECTOR_CHECK: &str = "vector_check";
/// One step of every env of the vector env, with autoreset ([`crate::vector::step_env`]).
pub const VECTOR_STEP: &str = "vector_step";

/// Backtest of every column: metrics, trade counts, equity curves or the ledger
/// ([`crate::backtest::run_column`]).
pub const BACKTEST: &str = "backtest";

/// Threads per block of a [`BACKTEST`] launch (its launch bounds' maximum). Small blocks fill the
/// multiprocessors evenly: 100,000 columns in blocks of 64 ran 1.4x faster than in blocks of 256 on the H200.
pub const BACKTEST_BLOCK: u32 = 64;

/// Launch bounds, CUDA's `__launch_bounds__(max_threads, min_blocks)`, which `build.rs` writes into the PTX
/// as `.maxntid` and (when `min_blocks > 0`) `.minnctapersm`, since Rust has no attribute for them:
/// `(kernel, max threads per block, min blocks per multiprocessor)`. Measured on the H200 (100,000 SMA
/// columns x 300K bars): the backtest keeps ~150 registers, so 6 blocks of 64 fit a multiprocessor and the
/// grid takes two waves; asking for 12 blocks (one wave, at most 80 registers) made ptxas spill and the
/// kernel 2x slower (0.89 s against 0.45 s), so only the block size is bounded.
/// `mlp_chain` asks for two blocks of 128 threads per multiprocessor (registers are no limit then: up to
/// 255 a thread): its shared memory (101 KB at D = 54, H = 128) leaves room for two. `mlp_chain_wide` asks
/// for one block of 512 (at most 128 registers a thread): its shared memory (200 KB) leaves room for one.
/// The acting kernels ask for one block of 256 (40 rows, the weights apart: 140 KB).
/// `gemm_tiles` asks for three blocks of 256 (at most 85 registers; ptxas keeps 80 and spills 28 bytes):
/// with 96 registers two fit, and the products are latency-bound (a global round trip per K step), so the
/// third block's warps hide more of it. Measured on the H200 (`bench learners`, interleaved variants by
/// `TRADESIM_DEV_PTX`): PPO's backward and gradient products 129.5 -> 115.1 us per env step; four blocks
/// (64 registers, 96 bytes spilled) were slower than two.
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

/// A table of batched, masked matrix products (`crate::tile::gpu_tile`, nvptx only).
pub const GEMM_TILES: &str = "gemm_tiles";
/// The three layers of a network on a tile of rows, fused (`crate::chain::gpu_chain`, nvptx only).
pub const MLP_CHAIN: &str = "mlp_chain";
/// [`MLP_CHAIN`] on tiles of `crate::chain::WIDE_ROWS` rows, a block of 512 threads a multiprocessor.
pub const MLP_CHAIN_WIDE: &str = "mlp_chain_wide";
/// A product with its right operand staged whole, a tile of rows per block (`crate::chain::gpu_rows`,
/// nvptx only): the hidden gradient of layer 1.
pub const MLP_ROWS: &str = "mlp_rows";
/// [`MLP_ROWS`] on tiles of `crate::chain::WIDE_ROWS` rows, a block of 512 threads a multiprocessor.
pub const MLP_ROWS_WIDE: &str = "mlp_rows_wide";
/// The hidden gradient of layer 1 and every weight gradient of a training step, fused
/// (`crate::backward::gpu_backward`, nvptx only).
pub const MLP_BACKWARD: &str = "mlp_backward";
/// [`MLP_BACKWARD`]'s weight and bias gradients from a stored hidden gradient of layer 1
/// (`crate::backward::gpu_backward` with `stored`, nvptx only).
pub const MLP_GRADIENTS: &str = "mlp_gradients";
/// Epsilon-greedy actions from the acting Q-values ([`crate::dqn::choose`]).
pub const DQN_SELECT: &str = "dqn_select";
/// DQN acting in one launch: observations, [`MLP_CHAIN`]'s layers on `crate::chain::ACT_ROWS`-row tiles,
/// then [`DQN_SELECT`]'s choice (nvptx only).
pub const DQN_ACT: &str = "dqn_act";
/// TD targets, loss and output gradients of every sample ([`crate::dqn::td_sample`]), then their layer-2
/// hidden gradients ([`crate::net::hidden_gradient`]).
pub const DQN_TD: &str = "dqn_td";
/// Per-parameter gradient, Adam and target update ([`crate::net::gradient`], [`crate::dqn::update_param`]).
pub const DQN_ADAM: &str = "dqn_adam";
/// The greedy walk of one env per trial, a block per trial ([`crate::net::dense_unit`]).
pub const GREEDY_WALK: &str = "greedy_walk";
/// The greedy walk with the wide layers' weights in registers, for hidden layers of at most 128 units.
pub const GREEDY_WALK_REGS: &str = "greedy_walk_regs";

/// PPO acting from the acting outputs ([`crate::ppo::choose`]).
pub const PPO_SELECT: &str = "ppo_select";
/// PPO acting in one launch ([`DQN_ACT`]'s shape, then [`PPO_SELECT`]'s choice; nvptx only).
pub const PPO_ACT: &str = "ppo_act";
/// GAE ([`crate::ppo::gae_env`]).
pub const PPO_GAE: &str = "ppo_gae";
/// The minibatch observations ([`crate::ppo::gather_entry`]).
pub const PPO_GATHER: &str = "ppo_gather";
/// PPO loss and output gradient per sample ([`crate::ppo::loss_sample`]), then the layer-2 hidden gradients
/// ([`crate::net::hidden_gradient`]).
pub const PPO_LOSS: &str = "ppo_loss";
/// PPO gradient per parameter from the chunk partials ([`crate::net::gradient`]).
pub const PPO_GRAD: &str = "ppo_grad";
/// Lanes of the PPO gradient-norm sums ([`crate::ppo::norm_lane`]).
pub const PPO_NORM: &str = "ppo_norm";
/// PPO clipped gradient and Adam per parameter ([`crate::ppo::clip_scale`], [`crate::ppo::adam_step`]).
pub const PPO_ADAM: &str = "ppo_adam";

/// The FP32 FMA throughput reference of the benchmarks ([`crate::tile::fma`] chains).
pub const FMA_PEAK: &str = "fma_peak";

/// Every kernel the host expects in the PTX module.
pub const ALL: &[&str] = &[
    ENV_SCAN,
    OBSERVE,
    REWARD_CHUNK_MOMENTS,
    REWARD_MERGE,
    REWARD_NORMALIZE,
    SAMPLE_TRANSITIONS,
    VECTOR_RESET,
    VECTOR_CHECK,
    VECTOR_STEP,
    BACKTEST,
    GEMM_TILES,
    MLP_CHAIN,
    MLP_CHAIN_WIDE,
    MLP_ROWS,
    MLP_ROWS_WIDE,
    MLP_BACKWARD,
    MLP_GRADIENTS,
    DQN_SELECT,
    DQN_ACT,
    DQN_TD,
    DQN_ADAM,
    GREEDY_WALK,
    GREEDY_WALK_REGS,
    FMA_PEAK,
    PPO_SELECT,
    PPO_ACT,
    PPO_GAE,
    PPO_GATHER,
    PPO_LOSS,
    PPO_GRAD,
    PPO_NORM,
    PPO_ADAM,
];
