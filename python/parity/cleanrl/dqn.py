"""DQN as CleanRL's single-file ``cleanrl/dqn.py`` (https://github.com/vwxyzjn/cleanrl, docs at
https://docs.cleanrl.dev/rl-algorithms/dqn/), written out for tradesim's ``VectorEnv``: the parity reference
of issue 43 (docs/PARITY.md).

What is CleanRL's here (the algorithm, kept as ``dqn.py`` has it): a Q-network of two ReLU hidden layers with
PyTorch's default init; one epsilon coin per vector step (all envs explore, or all act greedily), epsilon
falling linearly from ``start_e`` to ``end_e`` over ``exploration_fraction`` of the iterations; a replay
buffer of whole transitions sampled uniformly with replacement, the ended episodes' last observations as
``next_obs`` and only terminations as dones (truncations bootstrap); vanilla DQN targets (max over the
target network), an MSE loss, Adam; the target network copied (``tau`` = 1) every
``target_network_frequency`` iterations after ``learning_starts``.

What is tradesim's (``tradesim train --algo dqn --trials 1``, read from the Rust sources by
``tradesim_defaults.py``): the env (``VectorEnv(split="train", w_cost=1)``: the trainer's train bars, features
normalized on them, its costs and reward), 256 envs, 128-bar episodes, the total env steps, the network
widths (64, 64), and the numbers both have: lr, gamma, batch, buffer size, warm-up, training every
iteration, target copy period, epsilon schedule. Each ``--eval-every`` env steps (one tradesim epoch) the
greedy policy is scored on the validation split by ``tradesim.greedy_walk`` (the trainer's own walk and
backtest), and the curve goes to ``--out`` as JSON.

    python python/parity/cleanrl/dqn.py --data FILE.csv --seed 1 --epochs 10 --out curve.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tradesim

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tradesim_defaults import load as tradesim_settings  # noqa: E402


def parse_args() -> argparse.Namespace:
    ts = tradesim_settings()
    d = ts["dqn"]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=None, help="bars (CSV/Parquet); default: the embedded EURUSD")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epochs", type=int, default=10, help="tradesim epochs of env steps (num_envs x segment)")
    p.add_argument("--num-envs", type=int, default=ts["envs"])
    p.add_argument("--episode-len", type=int, default=ts["segment_len"])
    p.add_argument("--hidden", type=int, default=ts["hidden"])
    p.add_argument("--learning-rate", type=float, default=d["lr"])
    p.add_argument("--buffer-size", type=int, default=ts["envs"] * ts["ring_per_env"])
    p.add_argument("--gamma", type=float, default=d["gamma"])
    p.add_argument("--tau", type=float, default=1.0)
    p.add_argument("--target-network-frequency", type=int, default=d["target_every"],
                   help="iterations (vector steps) between target copies")
    p.add_argument("--batch-size", type=int, default=ts["batch"])
    p.add_argument("--start-e", type=float, default=d["eps_start"])
    p.add_argument("--end-e", type=float, default=d["eps_end"])
    p.add_argument("--exploration-fraction", type=float, default=d["eps_decay_fraction"])
    p.add_argument("--learning-starts", type=int, default=ts["warmup_steps"], help="iterations before training")
    p.add_argument("--train-frequency", type=int, default=ts["train_every"], help="iterations between updates")
    p.add_argument("--w-cost", type=float, default=ts["w_cost"], help="the reward's cost weight (tradesim train: 1)")
    # Switches towards tradesim's learner (off: CleanRL's dqn.py), for finding the cause of a difference.
    p.add_argument("--double", action="store_true", help="Double DQN targets (tradesim's default)")
    p.add_argument("--huber", type=float, default=0.0, help="Huber loss with this delta (tradesim: 1.0); 0: MSE")
    p.add_argument("--eval-every", type=int, default=0, help="env steps between evaluations (0: one tradesim epoch)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None, help="write the learning curve here (JSON)")
    a = p.parse_args()
    a.eval_every = a.eval_every or a.num_envs * a.episode_len
    a.total_timesteps = a.epochs * a.num_envs * a.episode_len
    return a


class QNetwork(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int, hidden: int) -> None:
        super().__init__()
        self.network = nn.Sequential(
            nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_actions),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


def linear_schedule(start_e: float, end_e: float, duration: float, t: int) -> float:
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


class ReplayBuffer:
    """Stable-Baselines3's ``ReplayBuffer`` as ``dqn.py`` uses it: a ring of transitions, uniform samples with
    replacement; ``dones`` are terminations only (``handle_timeout_termination``)."""

    def __init__(self, size: int, obs_dim: int) -> None:
        self.obs = np.zeros((size, obs_dim), np.float32)
        self.next_obs = np.zeros((size, obs_dim), np.float32)
        self.actions = np.zeros(size, np.int64)
        self.rewards = np.zeros(size, np.float32)
        self.dones = np.zeros(size, np.float32)
        self.size, self.pos, self.full = size, 0, False

    def add(self, obs, next_obs, actions, rewards, dones) -> None:
        n = len(actions)
        idx = (self.pos + np.arange(n)) % self.size
        self.obs[idx], self.next_obs[idx], self.actions[idx] = obs, next_obs, actions
        self.rewards[idx], self.dones[idx] = rewards, dones
        self.full = self.full or self.pos + n >= self.size
        self.pos = (self.pos + n) % self.size

    def sample(self, batch: int):
        idx = np.random.randint(0, self.size if self.full else self.pos, size=batch)
        t = torch.from_numpy
        return t(self.obs[idx]), t(self.next_obs[idx]), t(self.actions[idx]), t(self.rewards[idx]), t(self.dones[idx])


def evaluate(q: QNetwork, data: str | None, env_steps: int) -> dict:
    """The greedy policy on the validation split, scored by tradesim's walk and backtest."""
    with torch.no_grad():
        metrics, _ = tradesim.greedy_walk(lambda o: int(q(torch.from_numpy(o)).argmax()), data, split="valid")
    return {"env_steps": env_steps, **{k: metrics[k] for k in ("sharpe", "total_return", "trades", "exposure")}}


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = True

    envs = tradesim.VectorEnv(args.data, envs=args.num_envs, episode_len=args.episode_len, seed=args.seed,
                              split="train", w_cost=args.w_cost, device="cpu")
    envs.single_action_space.seed(args.seed)
    obs_dim, n_actions = envs.single_observation_space.shape[0], int(envs.single_action_space.n)
    q_network = QNetwork(obs_dim, n_actions, args.hidden)
    optimizer = optim.Adam(q_network.parameters(), lr=args.learning_rate)
    target_network = QNetwork(obs_dim, n_actions, args.hidden)
    target_network.load_state_dict(q_network.state_dict())
    rb = ReplayBuffer(args.buffer_size, obs_dim)

    iterations = args.total_timesteps // args.num_envs
    curve, start = [], time.time()
    obs, _ = envs.reset(seed=args.seed)
    obs = obs.copy()
    for global_step in range(iterations):
        epsilon = linear_schedule(args.start_e, args.end_e, args.exploration_fraction * iterations, global_step)
        if random.random() < epsilon:
            actions = np.array([envs.single_action_space.sample() for _ in range(envs.num_envs)])
        else:
            with torch.no_grad():
                actions = torch.argmax(q_network(torch.from_numpy(obs)), dim=1).numpy()

        next_obs, rewards, terminations, truncations, infos = envs.step(actions)

        # The ended episodes' last observations are the transitions' next observations.
        real_next_obs = next_obs.copy()
        if "_final_obs" in infos:
            for idx in np.flatnonzero(infos["_final_obs"]):
                real_next_obs[idx] = infos["final_obs"][idx]
        rb.add(obs, real_next_obs, actions, rewards, terminations)
        obs = next_obs.copy()

        if global_step > args.learning_starts:
            if global_step % args.train_frequency == 0:
                b_obs, b_next, b_actions, b_rewards, b_dones = rb.sample(args.batch_size)
                with torch.no_grad():
                    if args.double:
                        best = q_network(b_next).argmax(dim=1, keepdim=True)
                        target_max = target_network(b_next).gather(1, best).squeeze(1)
                    else:
                        target_max, _ = target_network(b_next).max(dim=1)
                    td_target = b_rewards + args.gamma * target_max * (1 - b_dones)
                old_val = q_network(b_obs).gather(1, b_actions.unsqueeze(1)).squeeze(1)
                if args.huber > 0:
                    loss = F.huber_loss(old_val, td_target, delta=args.huber)
                else:
                    loss = F.mse_loss(td_target, old_val)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

            if global_step % args.target_network_frequency == 0:
                for target_param, q_param in zip(target_network.parameters(), q_network.parameters()):
                    target_param.data.copy_(args.tau * q_param.data + (1.0 - args.tau) * target_param.data)

        env_steps = (global_step + 1) * args.num_envs
        if env_steps % args.eval_every == 0:
            curve.append(evaluate(q_network, args.data, env_steps))
            print(f"env_steps={env_steps} valid_sharpe={curve[-1]['sharpe']:.3f} epsilon={epsilon:.3f} "
                  f"[{time.time() - start:.1f} s]", flush=True)

    if args.out:
        Path(args.out).write_text(json.dumps({"algo": "dqn", "library": "cleanrl", "args": vars(args),
                                              "curve": curve, "seconds": time.time() - start}, indent=1))


if __name__ == "__main__":
    main()
