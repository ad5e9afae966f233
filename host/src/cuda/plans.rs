//! The plans on the device ([`gpu_kernels::net::plan`], [`gpu_kernels::chain::chain_plan`]): the buffer
//! addresses a learner's launches read, and each stage's plan (its products or chains), built, checked and
//! uploaded once.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use gpu_kernels::net::{AFTER_LOSS, FORWARD, NetArgs, NetTrial, Stage, buffers};

use super::buffers::{ChainPlan, Dev, GemmPlan};
use super::launch;
use super::runtime::{CudaRuntime, MultiwaveBackward};
use crate::HostError;

#[derive(Debug)]
pub(crate) struct DevicePlans {
    rt: Arc<CudaRuntime>,
    stream: Arc<CudaStream>,
    /// Device addresses of the buffers in [`buffers`] order, and their host copy.
    pointers: CudaSlice<u64>,
    host_pointers: [u64; buffers::COUNT],
    /// Lengths of the buffers the addresses name (what the plans were checked against).
    lens: [usize; buffers::COUNT],
    /// Plans by stage and envs per trial (acting) or 0 (training).
    stages: Vec<((Stage, u32), GemmPlan)>,
    /// Chain plans by kind (acting or training) and envs per trial (acting) or 0 (training).
    chains: Vec<((bool, u32), ChainPlan)>,
}

impl DevicePlans {
    pub(crate) fn new(rt: &Arc<CudaRuntime>, stream: &Arc<CudaStream>) -> Result<Self, HostError> {
        Ok(Self {
            rt: rt.clone(),
            stream: stream.clone(),
            pointers: stream
                .alloc_zeros::<u64>(buffers::COUNT)
                .map_err(HostError::driver("allocating buffer addresses"))?,
            host_pointers: [0; buffers::COUNT],
            lens: [0; buffers::COUNT],
            stages: Vec::new(),
            chains: Vec::new(),
        })
    }

    /// Points the buffer addresses at `bufs` (buffer index, buffer); uploads the addresses when they changed
    /// (and drops the plans checked against the old lengths), waiting for the copy. Launches queued on other
    /// streams (the envs' acting kernels) read the addresses and the chain plans: the device finishes them
    /// before the addresses are overwritten and the old plans are freed (a freed plan's memory, reused by the
    /// next plan built, would give a queued `dqn_act` another launch's chains).
    pub(crate) fn point(&mut self, bufs: &[(u32, &CudaSlice<f32>)]) -> Result<(), HostError> {
        let (mut ptrs, mut lens) = (self.host_pointers, self.lens);
        for &(id, buf) in bufs {
            (ptrs[id as usize], lens[id as usize]) = (buf.device_ptr(&self.stream).0, buf.len());
        }
        if ptrs != self.host_pointers || lens != self.lens {
            self.rt.synchronize()?;
            self.stream
                .memcpy_htod(&ptrs, &mut self.pointers)
                .map_err(HostError::driver("uploading buffer addresses"))?;
            // The launches that read the addresses run on the envs' stream: the copy must have landed.
            self.stream.synchronize().map_err(HostError::driver("uploading buffer addresses"))?;
            (self.host_pointers, self.lens) = (ptrs, lens);
            self.stages.clear();
            self.chains.clear();
        }
        Ok(())
    }

    /// Launches `stages` in order ([`Self::launch`]).
    pub(crate) fn launch_all(
        &mut self,
        stream: &CudaStream,
        net: &NetArgs,
        trials: &[NetTrial],
        stages: &[Stage],
    ) -> Result<(), HostError> {
        stages.iter().try_for_each(|&stage| self.launch(stream, net, trials, stage))
    }

    /// Drops the built plans (a trial's sizes changed: they are rebuilt on next use). The caller has
    /// synchronized the device (queued launches on other streams read them).
    pub(crate) fn forget(&mut self) {
        self.stages.clear();
        self.chains.clear();
    }

    /// The training forward passes' three layers on `stream`: one fused launch (`mlp_chain`,
    /// [`gpu_kernels::chain`]) when the network fits a block's shared memory and fusing is on
    /// ([`CudaRuntime::fused`]), else one `gemm_tiles` launch per layer. The same bits either way.
    pub(crate) fn launch_layers(
        &mut self,
        stream: &CudaStream,
        net: &NetArgs,
        trials: &[NetTrial],
    ) -> Result<(), HostError> {
        match self.chain_plan(net, trials, false)? {
            Some(i) => launch::net::chain(&self.rt, stream, &self.chains[i].1, &self.pointers, net),
            None => self.launch_all(stream, net, trials, &FORWARD),
        }
    }

    /// The acting chains and the buffer addresses for a fused acting launch (`dqn_act`, `ppo_act`), or
    /// `None` where the layers do not fuse (the network is too wide for a block's shared memory, or fusing
    /// is off): the caller then launches `observe`, [`gpu_kernels::net::ACTING`]'s products and the selection.
    pub(crate) fn act_chains(
        &mut self,
        net: &NetArgs,
        trials: &[NetTrial],
    ) -> Result<Option<(&ChainPlan, &CudaSlice<u64>)>, HostError> {
        Ok(self.chain_plan(net, trials, true)?.map(|i| (&self.chains[i].1, &self.pointers)))
    }

    /// The index of the acting (`act`) or training chain plan (built, checked and uploaded on first use),
    /// or `None` where the layers do not fuse.
    fn chain_plan(&mut self, net: &NetArgs, trials: &[NetTrial], act: bool) -> Result<Option<usize>, HostError> {
        use gpu_kernels::chain::{CHAIN_ROWS, ChainShared, WIDE_ROWS};
        let fits = |sh: ChainShared| sh.bytes() <= self.rt.shared_per_block();
        // Acting tiles have a layout of their own (`ChainShared::acting`); training tiles fit at 32 rows.
        let layout = if act { ChainShared::acting(net) } else { ChainShared::with_rows(net, CHAIN_ROWS) };
        if !(fits(layout) && self.rt.fused()) {
            return Ok(None);
        }
        let key = (act, if act { net.envs_per_trial } else { 0 });
        if let Some(i) = self.chains.iter().position(|(k, _)| *k == key) {
            return Ok(Some(i));
        }
        // Training chains in wide tiles where their buffers fit a block (`mlp_chain_wide`), else in 32 rows.
        let wide = fits(ChainShared::with_rows(net, WIDE_ROWS));
        let train_rows = if !act && wide && !self.rt.narrow_chains() { WIDE_ROWS } else { CHAIN_ROWS };
        let mut host = Vec::new();
        gpu_kernels::chain::chain_plan(net, trials, act, train_rows, |c| host.push(c));
        let l = net.layout();
        let products: Vec<_> = host.iter().flat_map(|c| c.layers(&l)).collect();
        crate::plan::check(gpu_kernels::registry::MLP_CHAIN, &products, &self.lens)?;
        if let Some(c) = host.iter().find(|c| !c.row_major()) {
            return Err(HostError::Config(format!("mlp_chain: operands not row-major: {c:?}")));
        }
        self.chains.push((key, ChainPlan::upload(&self.stream, host)?));
        Ok(Some(self.chains.len() - 1))
    }

    /// How the backward pass after the loss ([`AFTER_LOSS`]) runs ([`BackwardKernels`]): fused kernels where the
    /// sizes suit them ([`gpu_kernels::backward`]) and fusing is on: one `mlp_backward` launch where its
    /// blocks fit the device in one wave; where they would take more, `mlp_rows` (the hidden gradient of
    /// layer 1, stored) and then `mlp_gradients` (the weight and bias gradients from it), `mlp_rows`
    /// computing (and storing) the hidden gradient of layer 2 from the output gradient where it runs the
    /// products, or `mlp_backward` in many waves where the options ask for it ([`MultiwaveBackward`]).
    /// Otherwise the stages' launches (`mlp_rows` and `gemm_tiles`). The same bits every way. The loss kernel launched before these kernels stores `D2` unless
    /// [`BackwardKernels::loss_stores_hidden`] says it need not.
    ///
    /// Why one wave for `mlp_backward`: each of its layer-1 blocks reads its chunk's `D2` rows again (a block
    /// per unit group) and computes its units' `D1`, which is cheap while the launch is latency-bound but not
    /// when it runs in many waves.
    pub(crate) fn backward_kernels(
        &mut self,
        net: &NetArgs,
        trials: &[NetTrial],
    ) -> Result<BackwardKernels, HostError> {
        use gpu_kernels::backward::{BackwardShared, backward_blocks, backward_suit};
        // 1 KB of a multiprocessor's shared memory is the driver's per block.
        let bytes = BackwardShared::of(net).bytes() + 1_024;
        let per_sm = (self.rt.shared_per_block() + 1_024) / bytes;
        let (x, y) = backward_blocks(net);
        let one_wave = x * y <= per_sm * self.rt.multiprocessors;
        let mode = if one_wave { MultiwaveBackward::Fused } else { self.rt.multiwave_backward() };
        if !(self.rt.fused() && per_sm > 0 && backward_suit(net)) {
            return Ok(BackwardKernels::Products);
        }
        // The products the kernels compute, built and checked against the buffers' lengths (once).
        for stage in AFTER_LOSS {
            self.stage_plan(net, trials, stage)?;
        }
        Ok(match mode {
            MultiwaveBackward::Fused => BackwardKernels::Fused,
            MultiwaveBackward::Split => {
                BackwardKernels::Split { from_out: self.hidden_from_out(net, trials)?.is_some() }
            }
        })
    }

    /// The backward pass after the loss by `kernels` ([`Self::backward_kernels`] for the same sizes), on
    /// `stream`; `dev_trials` holds `trials` on the device.
    pub(crate) fn launch_backward(
        &mut self,
        stream: &CudaStream,
        net: &NetArgs,
        trials: &[NetTrial],
        dev_trials: &CudaSlice<Dev<NetTrial>>,
        kernels: BackwardKernels,
    ) -> Result<(), HostError> {
        let from_out = match kernels {
            BackwardKernels::Products => return self.launch_all(stream, net, trials, &AFTER_LOSS),
            BackwardKernels::Fused => {
                return launch::net::backward(&self.rt, stream, dev_trials, &self.pointers, net, false);
            }
            BackwardKernels::Split { from_out } => from_out,
        };
        if from_out {
            let Some((b1, b2, wide)) = self.hidden_from_out(net, trials)? else {
                return Err(HostError::Config("mlp_rows: the hidden gradients do not pair".to_owned()));
            };
            let (b1, b2) = (&self.stages[b1].1, &self.stages[b2].1);
            launch::net::rows(&self.rt, stream, b1, Some(b2), &self.pointers, wide)?;
        } else {
            self.launch(stream, net, trials, Stage::Backward1)?;
        }
        launch::net::backward(&self.rt, stream, dev_trials, &self.pointers, net, true)
    }

    /// Where `mlp_rows` can compute the hidden gradient of layer 1 with the one of layer 2 computed (and
    /// stored) from the output gradient (`gpu_kernels::chain::gpu_rows`' `from`, nvptx only): the plans of
    /// [`Stage::Backward1`] and [`Stage::Backward2`] and whether the tiles are wide; `None` where the products
    /// run otherwise or do not pair ([`crate::plan::hidden_pairs`]).
    fn hidden_from_out(
        &mut self,
        net: &NetArgs,
        trials: &[NetTrial],
    ) -> Result<Option<(usize, usize, bool)>, HostError> {
        let (b1, b2) =
            (self.stage_plan(net, trials, Stage::Backward1)?, self.stage_plan(net, trials, Stage::Backward2)?);
        let Some(wide) = self.rows_tiles(&self.stages[b1].1.host) else { return Ok(None) };
        let pairs = crate::plan::hidden_pairs(&self.stages[b1].1.host, &self.stages[b2].1.host);
        Ok(pairs.then_some((b1, b2, wide)))
    }

    /// Whether [`Stage::Backward1`]'s `products` run in `mlp_rows` tiles: `Some(true)` for wide tiles
    /// (`mlp_rows_wide`, where their rows fit a block), `Some(false)` for tiles of 32, `None` where they do
    /// not fit (`gemm_tiles`) or fusing is off.
    fn rows_tiles(&self, products: &[gpu_kernels::tile::Gemm]) -> Option<bool> {
        use gpu_kernels::chain::{CHAIN_ROWS, WIDE_ROWS};
        if !self.rt.fused() {
            return None;
        }
        if !self.rt.narrow_chains() && rows_fit(&self.rt, products, WIDE_ROWS) {
            Some(true)
        } else {
            rows_fit(&self.rt, products, CHAIN_ROWS).then_some(false)
        }
    }

    /// The index of `stage`'s plan (built, checked and uploaded on first use).
    fn stage_plan(&mut self, net: &NetArgs, trials: &[NetTrial], stage: Stage) -> Result<usize, HostError> {
        let key = (stage, if matches!(stage, Stage::Act(_)) { net.envs_per_trial } else { 0 });
        Ok(match self.stages.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                let host = crate::plan::stage_plan(net, trials, stage);
                crate::plan::check(gpu_kernels::registry::GEMM_TILES, &host, &self.lens)?;
                self.stages.push((key, GemmPlan::upload(&self.stream, host)?));
                self.stages.len() - 1
            }
        })
    }

    /// Launches `stage`'s products on `stream` (its plan built, checked and uploaded on first use).
    pub(crate) fn launch(
        &mut self,
        stream: &CudaStream,
        net: &NetArgs,
        trials: &[NetTrial],
        stage: Stage,
    ) -> Result<(), HostError> {
        let i = self.stage_plan(net, trials, stage)?;
        let plan = &self.stages[i].1;
        // Wide tiles where their rows fit a block (`mlp_rows_wide`), else tiles of 32 (`mlp_rows`).
        if stage == Stage::Backward1
            && let Some(wide) = self.rows_tiles(&plan.host)
        {
            return launch::net::rows(&self.rt, stream, plan, None, &self.pointers, wide);
        }
        launch::net::gemm(&self.rt, stream, plan, &self.pointers, stage)
    }
}

/// Which kernels run the backward pass after a loss kernel ([`DevicePlans::backward_kernels`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BackwardKernels {
    /// The stages' launches (`mlp_rows` or `gemm_tiles`, then `gemm_tiles`).
    Products,
    /// One `mlp_backward` launch.
    Fused,
    /// `mlp_rows` stores the hidden gradient of layer 1, then `mlp_gradients`; with `from_out` `mlp_rows`
    /// computes the hidden gradient of layer 2 from the output gradient (and stores it for `mlp_gradients`).
    Split {
        /// Whether the loss kernel's output gradient is all the products read of layer 2's gradients.
        from_out: bool,
    },
}

impl BackwardKernels {
    /// Whether the loss kernel must store the hidden gradient of layer 2 (every way but a split that
    /// computes it from the output gradient).
    pub(crate) fn loss_stores_hidden(self) -> bool {
        self != Self::Split { from_out: true }
    }
}

/// Whether `mlp_rows` (or `mlp_rows_wide`) can run `products` in tiles of `rows` rows
/// ([`gpu_kernels::chain::gpu_rows`]): row-major operands, and the largest product's staged operands fit a
/// block's shared memory.
fn rows_fit(rt: &CudaRuntime, products: &[gpu_kernels::tile::Gemm], rows: usize) -> bool {
    use gpu_kernels::chain::{RowsShared, rows_suit};
    products.iter().all(|g| rows_suit(g) && RowsShared::of_product(g, rows).bytes() <= rt.shared_per_block())
}
