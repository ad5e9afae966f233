"""A small PPO in PyTorch (CleanRL's structure: rollout, GAE, clipped surrogate over minibatches) on
tradesim.VectorEnv. The env steps in tradesim (Rust, on the CPU or the GPU); the network trains in PyTorch.
The env hands its buffers to PyTorch as tensors (``arrays="torch"``, DLPack): with the env and the network
on the GPU, observations, rewards and actions never leave device memory.

    python examples/ppo_torch.py --envs 256 --steps 512 --episode-len 128 [--env-device cuda] [--torch-device cuda]

Prints one line per update (mean reward, mean episode return of the episodes that ended, losses) and a
final summary line starting with `done:`.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

import tradesim


def layer(i: int, o: int, std: float = 2**0.5) -> nn.Linear:
    lin = nn.Linear(i, o)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.zeros_(lin.bias)
    return lin


class Agent(nn.Module):
    def __init__(self, obs_dim: int, hidden: int = 64) -> None:
        super().__init__()
        self.body = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh())
        self.pi = layer(hidden, 3, 0.01)
        self.v = layer(hidden, 1, 1.0)

    def act(self, x: torch.Tensor, action: torch.Tensor | None = None):
        h = self.body(x)
        dist = torch.distributions.Categorical(logits=self.pi(h))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.v(h).squeeze(-1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--envs", type=int, default=256)
    p.add_argument("--steps", type=int, default=512, help="env steps per env in total")
    p.add_argument("--rollout", type=int, default=64)
    p.add_argument("--episode-len", type=int, default=128)
    p.add_argument("--env-device", default="auto")
    p.add_argument("--torch-device", default="auto", help="auto: the env's device")
    p.add_argument("--synthetic", type=int, default=20_000, help="synthetic bars (0: the embedded data)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    data = tradesim.synthetic(a.synthetic) if a.synthetic else None
    env = tradesim.VectorEnv(data, envs=a.envs, episode_len=a.episode_len, seed=a.seed, device=a.env_device,
                             arrays="torch")
    dev = torch.device(env.device if a.torch_device == "auto" else a.torch_device)
    n, d = env.num_envs, env.single_observation_space.shape[0]
    agent = Agent(d).to(dev)
    opt = torch.optim.Adam(agent.parameters(), lr=3e-4, eps=1e-5)
    T = a.rollout
    obs_b = torch.zeros((T, n, d), device=dev)
    act_b = torch.zeros((T, n), dtype=torch.long, device=dev)
    logp_b, rew_b, done_b, val_b = (torch.zeros((T, n), device=dev) for _ in range(4))
    obs, _ = env.reset(seed=a.seed)
    # The env's tensors are its own buffers, overwritten by each step: `.to(dev)` copies them only when the
    # network lives elsewhere, and the rollout below keeps copies.
    next_obs = obs.to(dev)
    next_done = torch.zeros(n, device=dev)
    running = torch.zeros(n, dtype=torch.float64, device=dev)
    episodes = 0
    started, steps = time.perf_counter(), 0
    updates = max(1, a.steps // T)
    for update in range(updates):
        ret_sum = torch.zeros((), dtype=torch.float64, device=dev)
        ret_n = torch.zeros((), dtype=torch.int64, device=dev)
        for t in range(T):
            obs_b[t], done_b[t] = next_obs, next_done
            with torch.no_grad():
                action, logp, _, value = agent.act(next_obs)
            act_b[t], logp_b[t], val_b[t] = action, logp, value
            # A CUDA tensor goes to a CUDA env as it is (read in device memory); elsewhere via the host.
            obs, reward, terminated, truncated, _ = env.step(action if action.device.type == env.device else action.cpu())
            done = (terminated | truncated).to(dev)
            running += reward.to(dev)
            ret_sum += (running * done).sum()
            ret_n += done.sum()
            running.masked_fill_(done, 0.0)
            rew_b[t] = reward
            next_obs = obs.to(dev, copy=True)
            next_done = done.float()
            steps += n
        with torch.no_grad():
            next_value = agent.act(next_obs)[3]
            adv = torch.zeros_like(rew_b)
            last = torch.zeros(n, device=dev)
            for t in reversed(range(T)):
                nv, nd = (next_value, next_done) if t == T - 1 else (val_b[t + 1], done_b[t + 1])
                delta = rew_b[t] + 0.99 * nv * (1 - nd) - val_b[t]
                last = delta + 0.99 * 0.95 * (1 - nd) * last
                adv[t] = last
            ret = adv + val_b
        b_obs, b_act, b_logp = obs_b.reshape(-1, d), act_b.reshape(-1), logp_b.reshape(-1)
        b_adv, b_ret = adv.reshape(-1), ret.reshape(-1)
        for _ in range(2):
            for mb in torch.randperm(T * n, device=dev).split(max(1, T * n // 4)):
                _, logp, ent, v = agent.act(b_obs[mb], b_act[mb])
                ratio = (logp - b_logp[mb]).exp()
                A = (b_adv[mb] - b_adv[mb].mean()) / (b_adv[mb].std() + 1e-8)
                pg = torch.max(-A * ratio, -A * ratio.clamp(0.8, 1.2)).mean()
                vl = 0.5 * ((v - b_ret[mb]) ** 2).mean()
                loss = pg + 0.5 * vl - 0.01 * ent.mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                opt.step()
        ended = int(ret_n.item())
        episodes += ended
        mean_ret = ret_sum.item() / ended if ended else float("nan")
        print(
            f"update {update + 1}/{updates}: mean reward {rew_b.mean().item():+.2e}, "
            f"episode return {mean_ret:+.4f} ({ended} episodes ended, {episodes} in all), "
            f"policy loss {pg.item():+.4f}, value loss {vl.item():.4e}"
        )
    seconds = time.perf_counter() - started
    print(f"done: {steps} env steps on {env.device} in {seconds:.1f} s ({steps / seconds:.3e} env-steps/s), "
          f"{episodes} episodes")


if __name__ == "__main__":
    main()
