"""PPO as CleanRL's single-file ``cleanrl/ppo.py`` (https://github.com/vwxyzjn/cleanrl, docs at
https://docs.cleanrl.dev/rl-algorithms/ppo/), written out for tradesim's ``VectorEnv``: the parity reference
of issue 43 (docs/PARITY.md).

What is CleanRL's here (the algorithm, kept as ``ppo.py`` has it): separate actor and critic MLPs of two Tanh
hidden layers each, orthogonal init (gain sqrt(2), 0.01 for the policy head, 1 for the value head); rollouts
of ``num_steps`` steps of every env; GAE where an episode's end (termination or truncation) is a done, so a
truncated episode does not bootstrap; per-minibatch advantage normalization (``norm_adv``); the clipped
surrogate, the clipped value loss (``clip_vloss``), the entropy bonus; ``update_epochs`` passes over the
shuffled rollout in ``num_minibatches`` minibatches; global gradient-norm clipping; Adam (eps 1e-5) with the
learning rate annealed linearly to 0 over the iterations.

What is tradesim's (``tradesim train --algo ppo --trials 1``, read from the Rust sources by
``tradesim_defaults.py``): the env (``VectorEnv(split="train", w_cost=1)``), 256 envs, 128-bar episodes, a
rollout of one episode (``num_steps`` = 128: ``tradesim train`` collects one segment per epoch), the total env
steps, the network widths (64, 64) and the numbers both have (lr, gamma, lambda, clip, coefficients, epochs,
minibatches, max grad norm, Adam eps). After every iteration (one tradesim epoch) the greedy policy (the
most likely action) is scored on the validation split by ``tradesim.greedy_walk`` (the trainer's own walk and
backtest); the curve goes to ``--out`` as JSON.

    python python/parity/cleanrl/ppo.py --data FILE.csv --seed 1 --epochs 10 --out curve.json
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
import torch.optim as optim
from torch.distributions.categorical import Categorical

import tradesim

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tradesim_defaults import load as tradesim_settings  # noqa: E402


def parse_args() -> argparse.Namespace:
    ts = tradesim_settings()
    d = ts["ppo"]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=None, help="bars (CSV/Parquet); default: the embedded EURUSD")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epochs", type=int, default=10, help="iterations (tradesim epochs: one rollout each)")
    p.add_argument("--num-envs", type=int, default=ts["envs"])
    p.add_argument("--num-steps", type=int, default=ts["segment_len"], help="steps per env and rollout")
    p.add_argument("--episode-len", type=int, default=ts["segment_len"])
    p.add_argument("--hidden", type=int, default=ts["hidden"])
    p.add_argument("--learning-rate", type=float, default=d["lr"])
    p.add_argument("--anneal-lr", type=int, default=1)
    p.add_argument("--gamma", type=float, default=d["gamma"])
    p.add_argument("--gae-lambda", type=float, default=d["lambda"])
    p.add_argument("--num-minibatches", type=int, default=d["minibatches"])
    p.add_argument("--update-epochs", type=int, default=d["epochs"])
    p.add_argument("--norm-adv", type=int, default=1, help="per-minibatch advantage normalization (CleanRL: 1)")
    p.add_argument("--clip-coef", type=float, default=d["clip"])
    p.add_argument("--clip-vloss", type=int, default=d["clip_vloss"])
    p.add_argument("--ent-coef", type=float, default=d["ent_coef"])
    p.add_argument("--vf-coef", type=float, default=d["vf_coef"])
    p.add_argument("--max-grad-norm", type=float, default=d["max_grad_norm"])
    p.add_argument("--adam-eps", type=float, default=d["adam_eps"])
    p.add_argument("--w-cost", type=float, default=ts["w_cost"], help="the reward's cost weight (tradesim train: 1)")
    # Switches towards tradesim's learner (defaults: CleanRL's ppo.py), for finding the cause of a difference.
    p.add_argument("--activation", choices=("tanh", "relu"), default="tanh", help="CleanRL: tanh")
    p.add_argument("--shared-trunk", type=int, default=0, help="1: one trunk for both heads, as tradesim's")
    p.add_argument("--bootstrap-truncated", type=int, default=0,
                   help="1: a truncated episode bootstraps from its last observation's value, as tradesim's GAE")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None, help="write the learning curve here (JSON)")
    a = p.parse_args()
    a.batch_size = a.num_envs * a.num_steps
    a.minibatch_size = a.batch_size // a.num_minibatches
    a.num_iterations = a.epochs * a.episode_len // a.num_steps
    return a


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int, hidden: int, activation: str, shared: bool) -> None:
        super().__init__()
        act = nn.Tanh if activation == "tanh" else nn.ReLU

        def trunk() -> nn.Sequential:
            return nn.Sequential(layer_init(nn.Linear(obs_dim, hidden)), act(), layer_init(nn.Linear(hidden, hidden)), act())

        self.shared = shared
        if shared:
            self.trunk = trunk()
            self.critic = layer_init(nn.Linear(hidden, 1), std=1.0)
            self.actor = layer_init(nn.Linear(hidden, n_actions), std=0.01)
        else:
            self.critic = nn.Sequential(*trunk(), layer_init(nn.Linear(hidden, 1), std=1.0))
            self.actor = nn.Sequential(*trunk(), layer_init(nn.Linear(hidden, n_actions), std=0.01))

    def _h(self, x: torch.Tensor) -> torch.Tensor:
        return self.trunk(x) if self.shared else x

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(self._h(x))

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.actor(self._h(x))

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        h = self._h(x)
        probs = Categorical(logits=self.actor(h))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(h)


def evaluate(agent: Agent, data: str | None, env_steps: int) -> dict:
    """The greedy policy (the most likely action) on the validation split, scored by tradesim's walk and
    backtest."""
    with torch.no_grad():
        metrics, _ = tradesim.greedy_walk(lambda o: int(agent.logits(torch.from_numpy(o)).argmax()), data,
                                          split="valid")
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
    obs_dim, n_actions = envs.single_observation_space.shape[0], int(envs.single_action_space.n)
    agent = Agent(obs_dim, n_actions, args.hidden, args.activation, bool(args.shared_trunk))
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=args.adam_eps)

    n, s = args.num_envs, args.num_steps
    obs = torch.zeros((s, n, obs_dim))
    actions = torch.zeros((s, n), dtype=torch.long)
    logprobs = torch.zeros((s, n))
    rewards = torch.zeros((s, n))
    dones = torch.zeros((s, n))
    values = torch.zeros((s, n))
    # Value of a truncated episode's last observation, added to its reward (--bootstrap-truncated only).
    bootstrap = torch.zeros((s, n))

    global_step, curve, start = 0, [], time.time()
    next_obs_np, _ = envs.reset(seed=args.seed)
    next_obs = torch.tensor(next_obs_np)
    next_done = torch.zeros(n)

    for iteration in range(1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(s):
            global_step += n
            obs[step] = next_obs
            dones[step] = next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            next_obs_np, reward, terminations, truncations, infos = envs.step(action.numpy())
            rewards[step] = torch.tensor(reward)
            bootstrap[step] = 0.0
            if args.bootstrap_truncated and truncations.any():
                ended = np.flatnonzero(truncations & ~terminations)
                final = torch.tensor(np.stack([infos["final_obs"][i] for i in ended]))
                with torch.no_grad():
                    bootstrap[step, torch.tensor(ended)] = args.gamma * agent.get_value(final).flatten()
            next_obs = torch.tensor(next_obs_np)
            next_done = torch.tensor(np.logical_or(terminations, truncations), dtype=torch.float32)

        # GAE, bootstrapping from the value of the next observation.
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(s)):
                if t == s - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + bootstrap[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values

        b_obs = obs.reshape((-1, obs_dim))
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)

        b_inds = np.arange(args.batch_size)
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for mb_start in range(0, args.batch_size, args.minibatch_size):
                mb_inds = b_inds[mb_start:mb_start + args.minibatch_size]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                ratio = (newlogprob - b_logprobs[mb_inds]).exp()

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(newvalue - b_values[mb_inds], -args.clip_coef,
                                                                args.clip_coef)
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

                loss = pg_loss - args.ent_coef * entropy.mean() + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

        if global_step % (args.num_envs * args.episode_len) == 0:
            curve.append(evaluate(agent, args.data, global_step))
            # Diagnostics: the scale of the raw advantages and the policy's entropy (nats; ln 3 = 1.099 uniform).
            curve[-1].update(adv_std=float(b_advantages.std()), entropy=float(entropy.detach().mean()))
            print(f"env_steps={global_step} valid_sharpe={curve[-1]['sharpe']:.3f} "
                  f"[{time.time() - start:.1f} s]", flush=True)

    if args.out:
        Path(args.out).write_text(json.dumps({"algo": "ppo", "library": "cleanrl", "args": vars(args),
                                              "curve": curve, "seconds": time.time() - start}, indent=1))


if __name__ == "__main__":
    main()
