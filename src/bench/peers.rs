//! The PyTorch peers of W3 and W4 (`--torch PYTHON`): whole DQN and PPO epochs of the same shapes written
//! the way a PyTorch user batches many small trials (`benches/peers/torch_learners.py`, embedded here), in
//! three forms: eager, `torch.compile` and CUDA graphs. Each peer is a row beside tradesim's GPU row; the
//! JSON gives each GPU row its ratio to the fastest peer (`ratio_to_pytorch`).

use std::path::Path;
use std::process::Command;

use super::Row;
use super::end_to_end::Scratch;
use crate::Error;

const SCRIPT: &str = include_str!("../../benches/peers/torch_learners.py");

/// The peer variants, in the order they run.
const VARIANTS: &str = "eager,compile,graph";

/// Rows of the PyTorch peer of `workload` ("W3": DQN, "W4": PPO) run by `python` on the GPU (the small
/// shapes on the CPU with `quick`). A variant that fails is reported on stderr and in no row; a Python that
/// cannot run the script at all is an error naming it.
pub fn torch(python: &Path, workload: &str, quick: bool) -> Result<Vec<Row>, Error> {
    let dir = std::env::temp_dir().join(format!("tradesim-peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
    let scratch = Scratch(dir);
    let script = scratch.0.join("torch_learners.py");
    std::fs::write(&script, SCRIPT).map_err(Error::io(&script))?;
    let algo = if workload == "W3" { "dqn" } else { "ppo" };
    let mut command = Command::new(python);
    command.arg(&script).args(["--algo", algo, "--variants", VARIANTS]);
    if quick {
        command.args(["--small", "--device", "cpu", "--variants", "eager"]);
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
        let row = if workload == "W3" {
            Row::dqn("pytorch", transitions as usize, seconds, grad_steps / seconds, grad_steps as usize)
        } else {
            Row::ppo("pytorch", transitions as usize, seconds, grad_steps / seconds, grad_steps as usize)
        };
        rows.push(Row { variant: variant.clone(), ..row }.with_note(format!(
            "PyTorch {} {variant} ({}): warm-up {warmup:.1} s; `{} benches/peers/torch_learners.py --algo {algo} \
             --variants {variant}`",
            v["torch"].as_str().unwrap_or("?"),
            v["device"].as_str().unwrap_or("?"),
            python.display()
        )));
    }
    Ok(rows)
}
