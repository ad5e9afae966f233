//! The chains of a learner's step ([`chain_plan`]).

use super::{ACT_ROWS, Chain};
use crate::net::NetArgs;
use crate::tile::Operand;

/// The chains of acting (`act`: every env of each trial, `args.envs_per_trial` rows) or of the training forward passes
/// (each trial's [`crate::net::NetTrial::passes`]), in the order of [`crate::net::plan`]'s products: chain `i`'s layers
/// are the `i`-th product of each of the stage's three layers. Training chains have tiles of `train_rows`
/// ([`CHAIN_ROWS`](super::CHAIN_ROWS) or [`WIDE_ROWS`](super::WIDE_ROWS)); acting chains of [`ACT_ROWS`].
pub fn chain_plan(
    args: &NetArgs,
    trials: &[crate::net::NetTrial],
    act: bool,
    train_rows: usize,
    mut push: impl FnMut(Chain),
) {
    use crate::net::buffers::ONLINE;
    use crate::net::{ActWork, Work};
    let (d, b) = (args.input as usize, args.batch as usize);
    let w = Work::of(args);
    for (t, p) in trials.iter().enumerate() {
        let (h, bt, trial) = (p.hidden, p.batch, t as u32);
        if act {
            let e = args.envs_per_trial as usize;
            let rows = ActWork::of(args).trial_rows(t, e);
            push(Chain {
                x: rows[0],
                out: [rows[1], rows[2], rows[3]],
                net: ONLINE,
                trial,
                m: e as u32,
                m_pad: e as u32,
                h,
                rows: ACT_ROWS as u32,
                _pad: [0; 2],
            });
            continue;
        }
        for &(net, input, regions) in &crate::net::PASSES[..(p.passes as usize).min(3)] {
            push(Chain {
                x: Operand::rows(input, t * b * d, d),
                out: regions.map(|r| w.operand(r, t)),
                net,
                trial,
                m: bt,
                m_pad: b as u32,
                h,
                rows: train_rows as u32,
                _pad: [0; 2],
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::chain_plan;
    use crate::chain::{
        ACT_ROWS, ACT_THREADS, CHAIN_ROWS, CHAIN_THREADS, Chain, ROWS_PER_WARP, WIDE_ROWS, WIDE_THREADS,
    };
    use crate::net::{ACTING, FORWARD, NetArgs, NetTrial, plan};

    /// Chain `i`'s three layers are the `i`-th products of the three per-layer stages they replace, for
    /// acting and for training (one, two and three passes; widths and batches below the strides).
    #[test]
    fn chains_are_the_products_of_the_stages_they_fuse() {
        let net = NetArgs::new(3, 70, 57, 150, 3, 45, 1_000);
        let trials = [
            NetTrial { hidden: 150, batch: 45, passes: 2, _pad: 0 },
            NetTrial { hidden: 11, batch: 33, passes: 3, _pad: 0 },
            NetTrial { hidden: 130, batch: 1, passes: 1, _pad: 0 },
        ];
        for (act, train_rows) in [(true, CHAIN_ROWS), (false, CHAIN_ROWS), (false, WIDE_ROWS)] {
            let mut chains = [Chain::default(); 8];
            let mut n = 0;
            chain_plan(&net, &trials, act, train_rows, |c| {
                chains[n] = c;
                n += 1;
            });
            assert_eq!(n, if act { 3 } else { 6 });
            let stages = if act { ACTING } else { FORWARD };
            for (layer, stage) in stages.into_iter().enumerate() {
                let mut i = 0;
                plan(&net, &trials, stage, |g| {
                    assert_eq!(chains[i].layers(&net.layout())[layer], g, "chain {i}, layer {layer}, act {act}");
                    assert!(chains[i].row_major());
                    let rows = if act { ACT_ROWS } else { train_rows };
                    assert_eq!(chains[i].tile_rows(), rows);
                    let threads = match rows {
                        WIDE_ROWS => WIDE_THREADS,
                        ACT_ROWS => ACT_THREADS,
                        _ => CHAIN_THREADS,
                    };
                    assert_eq!(chains[i].threads(), threads);
                    let per_warp = if act { ACT_ROWS / (ACT_THREADS as usize / 32) } else { ROWS_PER_WARP };
                    assert_eq!(chains[i].threads() as usize / 32 * per_warp, rows);
                    assert_eq!(chains[i].tiles(), (chains[i].m_pad as usize).div_ceil(rows));
                    i += 1;
                });
                assert_eq!(i, n);
            }
        }
        assert_eq!(chains_tiles(70), 3);
    }

    fn chains_tiles(m_pad: u32) -> usize {
        Chain { m_pad, ..Chain::default() }.tiles()
    }
}
