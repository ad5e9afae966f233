"""The settings of ``tradesim train``'s learners, in one place for the parity scripts.

Read at run time from the Rust sources (``src/train/mod.rs`` ``TrainConfig::default_for`` and ``default_dqn``, ``src/cli/train.rs``
and the ``Default`` impls of ``DqnParams`` in ``gpu-kernels/src/dqn/mod.rs`` and ``PpoParams`` in
``gpu-kernels/src/ppo/params.rs``), so that the references follow the learners when their defaults change. A value
that cannot be read falls back to the one below (the defaults at issue 43) and is listed in ``missing``.

    python python/parity/tradesim_defaults.py      # prints what was read
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

# The checkout whose sources are read: this one, or TRADESIM_SOURCES (the checkout a --tradesim binary was built
# from, when it is not this one).
ROOT = Path(os.environ.get("TRADESIM_SOURCES") or Path(__file__).resolve().parents[2])

# Fallbacks: the values at the commit of issue 43 item 1 (used only where the sources cannot be read).
FALLBACK: dict[str, Any] = {
    "envs": 256, "segment_len": 128, "hidden": 64, "batch": 128, "warmup_steps": 16, "train_every": 1,
    "grad_steps": 1, "ring_per_env": 64,
    "dqn": {"lr": 5e-4, "gamma": 0.9, "eps_start": 1.0, "eps_end": 0.05, "eps_decay_fraction": 0.5, "tau": 0.0,
            "huber_delta": 1.0, "adam_eps": 1e-8, "target_every": 100, "double_dqn": 1},
    "ppo": {"lr": 3e-4, "gamma": 0.99, "lambda": 0.95, "clip": 0.2, "vf_coef": 0.5, "ent_coef": 0.01,
            "adam_eps": 1e-5, "epochs": 4, "minibatches": 4, "max_grad_norm": 0.5, "clip_vloss": 1,
            "orthogonal_init": 1, "anneal": 1},
    "w_cost": 1.0, "capital": "100000",
}


def _block(text: str, start: str) -> str:
    """The brace-balanced block that follows the first match of ``start``."""
    m = re.search(start, text)
    if not m:
        return ""
    i = text.find("{", m.end())
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j + 1]
    return ""


def _fields(block: str) -> dict[str, str]:
    """``name: expression,`` lines of a struct literal."""
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^\s*(\w+):\s*([^,\n]+),", block, re.M)}


def _num(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text.replace("_", ""))
    except ValueError:
        return None


def load(root: Path | None = None) -> dict[str, Any]:
    """The learners' settings as ``tradesim train --trials 1`` uses them, with ``missing`` (names that fell
    back) and ``extra_ppo``/``extra_dqn`` (fields of the Default impls this file does not know: new options)."""
    root = root or ROOT
    out: dict[str, Any] = json.loads(json.dumps(FALLBACK))
    missing: list[str] = []

    def read(path: str) -> str:
        try:
            return (root / path).read_text()
        except OSError:
            return ""

    train = _block(read("src/train/mod.rs"), r"pub fn default_for\(")
    m = re.search(r"let \(envs, segment_len\) = \((\d+), (\d+)\);", train)
    if m:
        out["envs"], out["segment_len"] = int(m.group(1)), int(m.group(2))
    else:
        missing += ["envs", "segment_len"]
    dqn_over = _fields(_block(read("src/train/mod.rs"), r"pub fn default_dqn\("))
    cfg = _fields(_block(train, r"Self\s*"))
    for key in ("hidden", "batch", "warmup_steps", "train_every", "grad_steps"):
        v = _num(cfg.get(key))
        if v is None:
            missing.append(key)
        else:
            out[key] = int(v)
    m = re.search(r"envs \* (\d+)", cfg.get("ring_capacity", ""))
    if m:
        out["ring_per_env"] = int(m.group(1))
    else:
        missing.append("ring_per_env")
    m = re.search(r"w_cost:\s*([0-9.eE+-]+)", train)
    if m:
        out["w_cost"] = float(m.group(1))
    else:
        missing.append("w_cost")

    dqn_default = _fields(_block(read("gpu-kernels/src/dqn/mod.rs"), r"impl Default for DqnParams"))
    dqn_default.update(dqn_over)
    for key in ("lr", "gamma", "eps_start", "eps_end", "tau", "huber_delta", "adam_eps", "target_every", "double_dqn"):
        v = _num(dqn_default.get(key))
        if v is None:
            missing.append(f"dqn.{key}")
        else:
            out["dqn"][key] = v
    m = re.search(r"([0-9.]+)\s*\*\s*steps", dqn_default.get("eps_decay_steps", ""))
    if m:
        out["dqn"]["eps_decay_fraction"] = float(m.group(1))
    else:
        missing.append("dqn.eps_decay_fraction")
    known_dqn = set(FALLBACK["dqn"]) | {"eps_decay_steps", "beta1", "beta2", "hidden", "batch", "key", "origin_steps",
                                        "origin_grads"}
    out["extra_dqn"] = {k: v for k, v in dqn_default.items() if k not in known_dqn}

    ppo_default = _fields(_block(read("gpu-kernels/src/ppo/params.rs"), r"impl Default for PpoParams"))
    cli = read("src/cli/train.rs")
    ppo_cli = _fields(_block(cli, r"let ppo = \|k: usize\| PpoParams"))
    m = re.search(r"([0-9.eE+-]+)\s*\*\s*spread", ppo_cli.get("lr", ""))
    if m:
        ppo_default["lr"] = m.group(1)
    out["ppo"]["anneal"] = 1 if "anneal_rollouts" in ppo_cli and "rollouts" in ppo_cli["anneal_rollouts"] else 0
    for key in ("lr", "gamma", "lambda", "clip", "vf_coef", "ent_coef", "adam_eps", "epochs", "minibatches",
                "max_grad_norm", "clip_vloss", "orthogonal_init"):
        v = _num(ppo_default.get(key))
        if v is None:
            missing.append(f"ppo.{key}")
        else:
            out["ppo"][key] = v
    known_ppo = set(FALLBACK["ppo"]) | {"beta1", "beta2", "hidden", "batch", "anneal_rollouts", "key", "_pad",
                                        "origin_rollouts"}
    out["extra_ppo"] = {k: v for k, v in ppo_default.items() if k not in known_ppo}
    for key in ("epochs", "minibatches", "clip_vloss", "orthogonal_init"):
        out["ppo"][key] = int(out["ppo"][key])
    for key in ("target_every", "double_dqn"):
        out["dqn"][key] = int(out["dqn"][key])
    out["missing"] = missing
    return out


if __name__ == "__main__":
    print(json.dumps(load(), indent=2))
