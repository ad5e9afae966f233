"""The parity study of issue 43 item 1: tradesim's learners (``tradesim train``) against the CleanRL-faithful
PyTorch references (``cleanrl/dqn.py``, ``cleanrl/ppo.py``) on the same envs, the same env steps and the same
network sizes, several seeds per (library, algorithm, dataset); greedy validation Sharpe against env steps.
Run by ``bash scripts/parity.sh`` (docs/PARITY.md), which gives this script the torch venv's python.

Writes into ``--out`` (docs/parity): ``table.md`` (final mean +- standard error per dataset x algorithm, and the
ablations), ``parity.png`` (the learning curves, mean and +- one standard error band), ``curves.csv`` (every
run's curve) and ``study.json`` (settings, versions, timings). Runs' raw outputs go to ``--work``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from tradesim_defaults import load as tradesim_settings  # noqa: E402

# name -> (how the bars are made, label)
DATASETS = {
    "ar1": (["--kind", "autocorrelated"], "AR(1) phi 0.4 (synthetic)"),
    "regime": (["--kind", "regime"], "regime switches (synthetic)"),
    "trend": (["--kind", "random-walk", "--drift", "0.00015"], "trend, drift 1.5e-4 (synthetic)"),
    "eurusd": (None, "EURUSD 1h 2017 (embedded, real)"),
}

# Reference variants that take one of tradesim's choices at a time (cleanrl/*.py switches), run on one
# dataset to find where a difference comes from.
ABLATIONS = {
    "ppo": {
        "relu": ["--activation", "relu"],
        "no-norm-adv": ["--norm-adv", "0"],
        "shared-trunk": ["--shared-trunk", "1"],
        "bootstrap-truncated": ["--bootstrap-truncated", "1"],
        "all-four (tradesim's choices)": ["--activation", "relu", "--norm-adv", "0", "--shared-trunk", "1",
                                          "--bootstrap-truncated", "1"],
    },
    "dqn": {
        "double": ["--double"],
        "huber": ["--huber", "1.0"],
        "double+huber (tradesim's choices)": ["--double", "--huber", "1.0"],
    },
}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tradesim", default=str(ROOT / "target/release/tradesim"), help="the CLI binary")
    p.add_argument("--sources", default=None,
                   help="the checkout --tradesim was built from, whose defaults the references read (default: this one)")
    p.add_argument("--epochs", type=int, default=20, help="tradesim epochs (x 256 envs x 128 steps)")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--bars", type=int, default=40_000, help="bars of each synthetic dataset")
    p.add_argument("--datasets", default="ar1,regime,eurusd")
    p.add_argument("--algos", default="dqn,ppo")
    p.add_argument("--ablate", default="ar1", help="dataset of every reference ablation ('' for none)")
    p.add_argument("--ablate-combined", default="regime,eurusd",
                   help="datasets of the reference with all of tradesim's choices at once ('' for none)")
    p.add_argument("--jobs", type=int, default=1, help="runs at once")
    p.add_argument("--out", default=str(ROOT / "docs/parity"))
    p.add_argument("--work", default=str(ROOT / "runs/parity"))
    p.add_argument("--reuse", action="store_true", help="keep runs whose output exists")
    return p.parse_args()


def dataset_path(name: str, a: argparse.Namespace) -> Path:
    kind, _ = DATASETS[name]
    if kind is None:
        return ROOT / "data/eurusd-1h-ask-2017.csv"
    path = Path(a.work) / "data" / f"{name}-{a.bars}.csv"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([a.tradesim, "data", "synth", *kind, "--bars", str(a.bars), "--seed", "1", "--out", str(path)],
                       check=True, stdout=subprocess.DEVNULL)
    return path


def run_tradesim(algo: str, data: Path, seed: int, a: argparse.Namespace, ts: dict) -> dict:
    out = Path(a.work) / "tradesim" / f"{data.stem}-{algo}-e{a.epochs}-s{seed}"
    report = out / "report.json"
    started = time.time()
    if not (a.reuse and report.exists()):
        subprocess.run([a.tradesim, "train", "--data", str(data), "--algo", algo, "--trials", "1", "--epochs",
                        str(a.epochs), "--envs", str(ts["envs"]), "--seed", str(seed), "--out", str(out), "--device",
                        "cpu"], check=True, stdout=subprocess.DEVNULL)
    epochs = json.loads(report.read_text())["epochs"]
    per_epoch = ts["envs"] * ts["segment_len"]
    entropy = None
    if algo == "ppo":
        from ppo_entropy import tradesim_ppo_entropy

        found = tradesim_ppo_entropy(out)
        entropy = None if found is None else found["entropy"]
    # report.json writes a NaN Sharpe (a policy that never traded on the split) as null.
    curve = [{"env_steps": (e["epoch"] + 1) * per_epoch,
              "sharpe": math.nan if e["valid_sharpe"][0] is None else e["valid_sharpe"][0]} for e in epochs]
    return {"curve": curve, "seconds": time.time() - started, "entropy": entropy}


def run_reference(algo: str, data: Path, seed: int, a: argparse.Namespace, extra: list[str], tag: str) -> dict:
    out = Path(a.work) / "cleanrl" / f"{data.stem}-{algo}-e{a.epochs}-s{seed}{tag}.json"
    started = time.time()
    if not (a.reuse and out.exists()):
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(HERE / "cleanrl" / f"{algo}.py"), "--data", str(data), "--seed", str(seed),
                        "--epochs", str(a.epochs), "--out", str(out), *extra], check=True, stdout=subprocess.DEVNULL)
    curve = json.loads(out.read_text())["curve"]
    return {"curve": [{"env_steps": c["env_steps"], "sharpe": c["sharpe"]} for c in curve],
            "seconds": time.time() - started, "entropy": curve[-1].get("entropy")}


def score(s: float) -> float:
    """A Sharpe ratio for averaging: a policy that never traded (NaN) scores 0, as tradesim's search does."""
    return 0.0 if s is None or math.isnan(s) else s


def mean_se(xs: list[float]) -> tuple[float, float]:
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, math.nan
    var = sum((x - m) ** 2 for x in xs) / (n - 1)
    return m, math.sqrt(var / n)


def summary(runs: list[dict]) -> dict:
    finals = [score(r["curve"][-1]["sharpe"]) for r in runs]
    m, se = mean_se(finals)
    flat = sum(1 for r in runs if r["curve"][-1]["sharpe"] is None or math.isnan(r["curve"][-1]["sharpe"]))
    steps = [c["env_steps"] for c in runs[0]["curve"]]
    band = [mean_se([score(r["curve"][i]["sharpe"]) for r in runs]) for i in range(len(steps))]
    entropies = [r["entropy"] for r in runs if r.get("entropy") is not None]
    return {"mean": m, "se": se, "finals": finals, "never_traded": flat, "steps": steps, "band": band,
            "first_mean": band[0][0], "seconds": sum(r["seconds"] for r in runs),
            "entropy": sum(entropies) / len(entropies) if len(entropies) == len(runs) else None}


def fmt(m: float, se: float) -> str:
    return f"{m:+.2f} ± {se:.2f}"


def ent(s: dict) -> str:
    return "" if s.get("entropy") is None else f"{s['entropy']:.3f}"


def main() -> None:
    a = parse_args()
    if a.sources:
        import os

        os.environ["TRADESIM_SOURCES"] = str(Path(a.sources).resolve())  # read by tradesim_defaults, here and in the references
    ts = tradesim_settings(Path(a.sources).resolve() if a.sources else None)
    if ts["missing"]:
        print(f"tradesim defaults not read from the sources (fallbacks used): {ts['missing']}", file=sys.stderr)
    datasets = [d for d in a.datasets.split(",") if d]
    algos = [x for x in a.algos.split(",") if x]
    seeds = list(range(1, a.seeds + 1))
    paths = {d: dataset_path(d, a) for d in datasets}
    started = time.time()

    jobs = []  # (key, callable)
    for d in datasets:
        for algo in algos:
            for s in seeds:
                jobs.append(((d, algo, "tradesim", s), lambda d=d, algo=algo, s=s: run_tradesim(algo, paths[d], s, a, ts)))
                jobs.append(((d, algo, "cleanrl", s), lambda d=d, algo=algo, s=s: run_reference(algo, paths[d], s, a, [], "")))
    ablations = [(a.ablate, algo, name) for algo in algos for name in ABLATIONS[algo]] if a.ablate in paths else []
    ablations += [(d, algo, name) for d in a.ablate_combined.split(",") if d in paths and d != a.ablate
                  for algo in algos for name in ABLATIONS[algo] if "tradesim's choices" in name]
    for d, algo, name in ablations:
        extra = ABLATIONS[algo][name]
        tag = "-" + "".join(ch if ch.isalnum() else "_" for ch in name)
        for s in seeds:
            jobs.append(((d, algo, f"cleanrl {name}", s),
                         lambda d=d, algo=algo, s=s, extra=extra, tag=tag: run_reference(algo, paths[d], s, a, extra, tag)))

    results: dict = {}
    done = 0

    def work(job):
        key, fn = job
        return key, fn()

    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for key, res in pool.map(work, jobs):
            results[key] = res
            done += 1
            print(f"[{done}/{len(jobs)}] {key[0]} {key[1]} {key[2]} seed {key[3]}: final valid Sharpe "
                  f"{res['curve'][-1]['sharpe']:.3f} ({res['seconds']:.1f} s; {time.time() - started:.0f} s in all)",
                  flush=True)

    groups: dict = {}
    for (d, algo, lib, s), res in results.items():
        groups.setdefault((d, algo, lib), []).append(res)
    summaries = {k: summary(v) for k, v in groups.items()}
    wall = time.time() - started

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "curves.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["dataset", "algo", "library", "seed", "env_steps", "valid_sharpe"])
        for (d, algo, lib, s), res in sorted(results.items()):
            for c in res["curve"]:
                w.writerow([d, algo, lib, s, c["env_steps"], "" if math.isnan(c["sharpe"]) else f"{c['sharpe']:.6f}"])

    steps_total = a.epochs * ts["envs"] * ts["segment_len"]
    lines = [
        f"Greedy validation Sharpe (annualized, tradesim's backtest) after {steps_total:,} env steps "
        f"({a.epochs} epochs x {ts['envs']} envs x {ts['segment_len']} steps), mean ± standard error over "
        f"{len(seeds)} seeds (1-{len(seeds)}); a policy that never traded scores 0 (count in brackets). "
        f"\"gap\": tradesim's mean minus the reference's; **below** where it is below by more than the larger "
        f"standard error.",
        "",
        "| dataset | algo | tradesim | CleanRL reference (PyTorch) | gap | tradesim first epoch | reference first epoch "
        "| PPO policy entropy at the end, tradesim / reference (nats; uniform 1.099) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    verdicts = {}
    for d in datasets:
        for algo in algos:
            t, r = summaries[(d, algo, "tradesim")], summaries[(d, algo, "cleanrl")]
            gap = t["mean"] - r["mean"]
            below = gap < -max(t["se"], r["se"])
            verdicts[(d, algo)] = below
            flat = lambda x: f" [{x['never_traded']}]" if x["never_traded"] else ""  # noqa: E731
            lines.append(f"| {DATASETS[d][1]} | {algo.upper()} | {fmt(t['mean'], t['se'])}{flat(t)} | "
                         f"{fmt(r['mean'], r['se'])}{flat(r)} | {gap:+.2f}{' **below**' if below else ''} | "
                         f"{t['first_mean']:+.2f} | {r['first_mean']:+.2f} | {ent(t)} / {ent(r)} |")
    ablated = [d for d in datasets if any(k[0] == d and k[2].startswith("cleanrl ") for k in summaries)]
    if ablated:
        lines += ["", "Reference ablations: the CleanRL reference with tradesim's choices, one at a time (on "
                  f"{DATASETS[a.ablate][1] if a.ablate in paths else '-'}) and all at once (same seeds, same budget).",
                  "", "| dataset | algo | variant | final valid Sharpe | change against the reference | PPO policy "
                  "entropy (nats) |", "|---|---|---|---|---|---|"]
        for d in ablated:
            for algo in algos:
                base = summaries.get((d, algo, "cleanrl"))
                t = summaries.get((d, algo, "tradesim"))
                if not base:
                    continue
                lines.append(f"| {DATASETS[d][1]} | {algo.upper()} | CleanRL reference | {fmt(base['mean'], base['se'])} "
                             f"| | {ent(base)} |")
                for name in ABLATIONS[algo]:
                    v = summaries.get((d, algo, f"cleanrl {name}"))
                    if v:
                        lines.append(f"| {DATASETS[d][1]} | {algo.upper()} | {name} | {fmt(v['mean'], v['se'])} | "
                                     f"{v['mean'] - base['mean']:+.2f} | {ent(v)} |")
                if t:
                    lines.append(f"| {DATASETS[d][1]} | {algo.upper()} | tradesim | {fmt(t['mean'], t['se'])} | "
                                 f"{t['mean'] - base['mean']:+.2f} | {ent(t)} |")
    lines += ["", f"Wall time of the study: {wall / 60:.1f} min on {platform.machine()} with {a.jobs} run(s) at once "
              f"(tradesim runs {sum(v['seconds'] for k, v in summaries.items() if k[2] == 'tradesim'):.0f} s, "
              f"references {sum(v['seconds'] for k, v in summaries.items() if k[2] != 'tradesim'):.0f} s)."]
    (out / "table.md").write_text("\n".join(lines) + "\n")

    import torch
    study = {
        "epochs": a.epochs, "seeds": seeds, "bars": a.bars, "env_steps": steps_total, "datasets": {d: str(paths[d].relative_to(ROOT)) if paths[d].is_relative_to(ROOT) else str(paths[d]) for d in datasets},
        "tradesim_settings": ts, "torch": torch.__version__, "python": platform.python_version(),
        "tradesim": a.tradesim, "sources": a.sources or str(ROOT),
        "commit": subprocess.run(["git", "-C", a.sources or str(ROOT), "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True).stdout.strip(),
        "uncommitted_changes": subprocess.run(["git", "-C", a.sources or str(ROOT), "status", "--short", "-uno"],
                                              capture_output=True, text=True).stdout.split("\n")[:40],
        "wall_seconds": wall,
        "summary": {" / ".join(map(str, k)): {x: v[x] for x in ("mean", "se", "finals", "never_traded", "first_mean",
                                                                 "entropy")}
                    for k, v in summaries.items()},
    }
    (out / "study.json").write_text(json.dumps(study, indent=1) + "\n")
    plot(summaries, datasets, algos, out / "parity.png", a)
    print((out / "table.md").read_text())


def plot(summaries: dict, datasets: list[str], algos: list[str], path: Path, a: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(algos), len(datasets), figsize=(4.2 * len(datasets), 3.3 * len(algos)),
                             squeeze=False, sharex=True)
    colors = {"tradesim": "tab:blue", "cleanrl": "tab:orange"}
    labels = {"tradesim": "tradesim", "cleanrl": "CleanRL reference (PyTorch)"}
    for i, algo in enumerate(algos):
        for j, d in enumerate(datasets):
            ax = axes[i][j]
            for lib in ("tradesim", "cleanrl"):
                s = summaries.get((d, algo, lib))
                if not s:
                    continue
                x = [v / 1e3 for v in s["steps"]]
                m = [b[0] for b in s["band"]]
                se = [0.0 if math.isnan(b[1]) else b[1] for b in s["band"]]
                ax.plot(x, m, color=colors[lib], label=labels[lib], marker="o", ms=2.5)
                ax.fill_between(x, [u - e for u, e in zip(m, se)], [u + e for u, e in zip(m, se)], color=colors[lib],
                                alpha=0.2)
            ax.axhline(0, color="grey", lw=0.6)
            ax.set_title(f"{algo.upper()}, {DATASETS[d][1]}", fontsize=9)
            if i == len(algos) - 1:
                ax.set_xlabel("env steps (thousands)")
            if j == 0:
                ax.set_ylabel("greedy validation Sharpe")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"tradesim vs CleanRL-faithful PyTorch on the same envs: mean ± s.e. over {a.seeds} seeds", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
