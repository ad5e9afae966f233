//! The PyTorch peers of W3 and W4 (`--torch PYTHON`): whole DQN and PPO epochs of the same shapes written
//! the way a PyTorch user batches many small trials (`benches/peers/torch_learners.py`, embedded here). On
//! the GPU in three forms (eager, `torch.compile`, CUDA graphs: rows of backend `pytorch`), on the CPU eager
//! with the threads of tradesim's CPU row (`torch.set_num_threads`: rows of backend `pytorch-cpu`). The JSON
//! gives each tradesim row its ratio to the fastest peer on its device (`ratio_to_pytorch`).

use std::path::Path;
use std::process::Command;

use super::Row;
use super::end_to_end::Scratch;
use crate::Error;

const SCRIPT: &str = include_str!("../../benches/peers/torch_learners.py");

/// The peer variants on the GPU, in the order they run.
const VARIANTS: &str = "eager,compile,graph";

/// Where a peer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerDevice {
    /// The GPU: eager, `torch.compile` and CUDA graphs.
    Cuda,
    /// The CPU with this many threads: eager.
    Cpu(usize),
}

impl PeerDevice {
    /// The backend name of the peer's rows.
    pub fn backend(self) -> &'static str {
        match self {
            PeerDevice::Cuda => "pytorch",
            PeerDevice::Cpu(_) => "pytorch-cpu",
        }
    }
}

/// Rows of the PyTorch peer of `workload` ("W3": DQN, "W4": PPO) run by `python` on `device` (the small
/// shapes with `quick`). A variant that fails is reported on stderr and in no row; a Python that cannot run
/// the script at all is an error naming it.
pub fn torch(python: &Path, workload: &str, quick: bool, device: PeerDevice) -> Result<Vec<Row>, Error> {
    let dir = std::env::temp_dir().join(format!("tradesim-peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
    let scratch = Scratch(dir);
    let script = scratch.0.join("torch_learners.py");
    std::fs::write(&script, SCRIPT).map_err(Error::io(&script))?;
    let algo = if workload == "W3" { "dqn" } else { "ppo" };
    let mut command = Command::new(python);
    command.arg(&script).args(["--algo", algo]);
    let flags = match device {
        PeerDevice::Cuda => format!("--device cuda --variants {VARIANTS}"),
        PeerDevice::Cpu(threads) => format!("--device cpu --variants eager --threads {threads}"),
    };
    command.args(flags.split(' '));
    if quick {
        command.arg("--small");
    }
    let out = command.output().map_err(|e| Error::Output(format!("could not run {}: {e}", python.display())))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = stderr.lines().last().unwrap_or("killed without a message");
        return Err(Error::Output(format!("the PyTorch peer failed ({}): {why}", out.status)));
    }
    let mut rows = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with('{')) {
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| Error::Output(format!("the PyTorch peer printed a line that is not JSON ({e}): {line}")))?;
        let variant = v["variant"].as_str().unwrap_or("?").to_owned();
        if let Some(error) = v["error"].as_str() {
            eprintln!("{workload}: no PyTorch {variant} figure: {error}");
            continue;
        }
        let number = |k: &str| {
            v[k].as_f64().ok_or_else(|| Error::Output(format!("the PyTorch peer's {variant} line has no `{k}`")))
        };
        let (seconds, grad_steps, warmup) = (number("epoch_s")?, number("grad_steps")?, number("warmup_s")?);
        let shape = &v["shape"];
        let transitions = ["trials", "envs", "steps"].iter().map(|k| shape[*k].as_u64().unwrap_or(0)).product::<u64>();
        let backend = device.backend();
        let row = if workload == "W3" {
            Row::dqn(backend, transitions as usize, seconds, grad_steps / seconds, grad_steps as usize)
        } else {
            Row::ppo(backend, transitions as usize, seconds, grad_steps / seconds, grad_steps as usize)
        };
        let flags = match device {
            PeerDevice::Cuda => format!("--variants {variant}"),
            PeerDevice::Cpu(_) => flags.clone(),
        };
        rows.push(Row { variant: variant.clone(), ..row }.with_note(format!(
            "PyTorch {} {variant} ({}, {} threads): warm-up {warmup:.1} s; `{} benches/peers/torch_learners.py \
             --algo {algo} {flags}{}`",
            v["torch"].as_str().unwrap_or("?"),
            v["device"].as_str().unwrap_or("?"),
            v["threads"].as_u64().unwrap_or(0),
            python.display(),
            if quick { " --small" } else { "" }
        )));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::BenchReport;

    /// Each plain tradesim epoch row gets the fastest peer of its own device, the GPU's as well (its
    /// variant is its backend's name); the 1,024-trial row gets none.
    #[test]
    fn every_plain_row_is_compared_with_the_fastest_peer_of_its_device() {
        let peer = |backend, variant: &str, seconds| Row {
            variant: variant.to_owned(),
            ..Row::dqn(backend, 1, seconds, 1.0, 1)
        };
        let rows = vec![
            Row::dqn("cuda", 1, 0.032, 1.0, 1),
            Row { variant: "1024 trials".to_owned(), ..Row::dqn("cuda", 1, 4.8, 1.0, 1) },
            Row::dqn("cpu", 1, 1.2, 1.0, 1),
            peer("pytorch", "eager", 1.02),
            peer("pytorch", "graph", 0.16),
            peer("pytorch-cpu", "eager", 5.0),
        ];
        let report = BenchReport {
            machine: Default::default(),
            quick: true,
            variant: Default::default(),
            bars: 0,
            rows,
            gpu: None,
            seconds: 0.0,
        };
        let ratio =
            |i: usize| report.pytorch_ratio(&report.rows[i]).map(|(r, v)| ((r * 100.0).round() / 100.0, v.to_owned()));
        assert_eq!(ratio(0), Some((5.0, "graph".to_owned())));
        assert_eq!(ratio(1), None);
        assert_eq!(ratio(2), Some((4.17, "eager".to_owned())));
        assert_eq!(ratio(3), None);
    }
}
