"""What a PyTorch user would run instead of tradesim's W3/W4 epochs: whole epochs on the same GPU.

The peer of `tradesim bench dqn` / `ppo` (docs/PERFORMANCE.md, "PyTorch peers"). Each epoch does all the work of
tradesim's epoch, written the way a PyTorch user batches many small trials (stacked weights, `bmm`):

- DQN: 5 trials x 1,024 envs x 292 steps (one pass over 300K bars). Every step acts epsilon-greedily from the
  online network (54 inputs -> 128 -> 128 -> 3, ReLU), steps the env, writes the transitions to each trial's
  replay ring, then takes one Double-DQN gradient step per trial (batch 1,024 sampled from the ring, Huber,
  Adam) with a hard target copy every 250 gradient steps.
- PPO (CleanRL's defaults): a rollout of 292 steps of every env sampling from the actor-critic (54 -> 128 ->
  128 -> 3 logits + 1 value, Tanh), GAE (gamma 0.99, lambda 0.95), then 4 update epochs of 4 shuffled minibatches
  (74,752 transitions each per trial): clipped surrogate, clipped value loss, entropy bonus, advantage
  normalisation, each trial's gradient clipped to norm 0.5, Adam (eps 1e-5).

The env is replaced by the per-step work PyTorch would need: the next bar's feature row gathered for every env,
the target position from the action, spread costs on a change, the mark-to-market return, triple-barrier exits
against the bar's high and low (take-profit, stop-loss, max hold), the reward, and the observation (51 features
and 3 portfolio floats). The bars are a seeded random walk already on the GPU.

Variants: `eager`; `compile` (torch.compile of the step functions, compile time excluded by warm-up);
`graph` (the steps captured in CUDA graphs and replayed, what `reduce-overhead` does). Each prints one JSON line:
{"peer": "pytorch", "algo", "variant", "torch", "device", "threads", "epoch_s", "grad_steps", "warmup_s"}; a variant that
fails prints {"variant", "error"} and the others still run.

Usage: python3 torch_learners.py [--algo dqn|ppo|both] [--variants eager,compile,graph] [--device cuda|cpu]
       [--threads N] (torch.set_num_threads: the CPU peer runs with the threads of tradesim's CPU row)
       [--small] (a tiny shape for checking the script on a CPU)
"""
import argparse
import json
import sys
import time

import torch

A = 3  # flat, long, short


class Sizes:
    def __init__(self, small):
        if small:
            self.K, self.E, self.B, self.F, self.H, self.N = 2, 16, 32, 5, 8, 2_001
        else:
            self.K, self.E, self.B, self.F, self.H, self.N = 5, 1024, 1024, 51, 128, 300_000
        self.D = self.F + 3
        self.STEPS = (self.N - 1) // self.E


def market(s, dev):
    g = torch.Generator(device="cpu").manual_seed(42)
    ret = torch.randn(s.N, generator=g) * 0.001
    close = 100.0 * torch.exp(torch.cumsum(ret, 0))
    wick = torch.rand(s.N, generator=g) * 0.001 * close
    high, low = close + wick, close - wick
    feats = torch.randn(s.N, s.F, generator=g)
    return close.to(dev), high.to(dev), low.to(dev), feats.to(dev)


class Env:
    """Every trial's envs as tensors [K, E]; `step(action)` is one bar for all of them."""

    def __init__(self, s, dev):
        self.s, self.dev = s, dev
        self.close, self.high, self.low, self.feats = market(s, dev)
        K, E = s.K, s.E
        # Env e of every trial walks its own segment of the bars (E segments of STEPS bars).
        self.t = (torch.arange(E, device=dev) * s.STEPS).expand(K, E).contiguous()
        self.pos = torch.zeros(K, E, device=dev)
        self.entry = torch.zeros(K, E, device=dev)
        self.held = torch.zeros(K, E, device=dev)
        self.equity = torch.ones(K, E, device=dev)
        self.spread = (0.0002 * (torch.arange(K, device=dev) + 1)).view(K, 1)
        self.tp, self.sl, self.max_hold = 0.004, 0.002, 50.0

    def obs(self):
        c = self.close[self.t]
        unreal = torch.where(self.pos != 0, self.pos * (c - self.entry) / self.entry.clamp_min(1e-9), 0.0)
        state = torch.stack([self.pos, unreal, self.held / self.max_hold], -1)
        return torch.cat([self.feats[self.t], state], -1)

    def step(self, action):
        target = torch.where(action == 1, 1.0, torch.where(action == 2, -1.0, 0.0))
        c0 = self.close[self.t]
        # Past the last bar an env wraps to the first (warm-ups and graph captures take extra steps).
        t1 = torch.remainder(self.t + 1, self.s.N - 1)
        c1, hi, lo = self.close[t1], self.high[t1], self.low[t1]
        changed = target != self.pos
        cost = changed.float() * self.spread * (target - self.pos).abs()
        self.entry = torch.where(changed, c0, self.entry)
        self.held = torch.where(changed, 0.0, self.held + 1.0)
        self.pos = target
        # Triple barrier: take-profit / stop-loss against the bar's extremes, or the holding limit.
        up, dn = self.entry * (1 + self.tp), self.entry * (1 - self.sl)
        long_exit_px = torch.where(lo <= dn, dn, torch.where(hi >= up, up, c1))
        up_s, dn_s = self.entry * (1 + self.sl), self.entry * (1 - self.tp)
        short_exit_px = torch.where(hi >= up_s, up_s, torch.where(lo <= dn_s, dn_s, c1))
        exit_px = torch.where(self.pos > 0, long_exit_px, torch.where(self.pos < 0, short_exit_px, c1))
        hit = (exit_px != c1) | (self.held >= self.max_hold)
        ret = self.pos * (exit_px - c0) / c0 - cost
        self.equity = self.equity * (1 + ret)
        self.pos = torch.where(hit, 0.0, self.pos)
        self.held = torch.where(hit, 0.0, self.held)
        self.t = t1
        return ret, hit.float()


def mlp_params(s, outputs, dev):
    def layer(i, o):
        w = (torch.randn(s.K, i, o, device=dev) * i**-0.5).requires_grad_()
        return w, torch.zeros(s.K, 1, o, device=dev, requires_grad=True)

    w1, b1 = layer(s.D, s.H)
    w2, b2 = layer(s.H, s.H)
    w3, b3 = layer(s.H, outputs)
    return [w1, b1, w2, b2, w3, b3]


def mlp(ps, x, act=torch.relu):
    w1, c1, w2, c2, w3, c3 = ps
    h = act(torch.baddbmm(c1, x, w1))
    h = act(torch.baddbmm(c2, h, w2))
    return torch.baddbmm(c3, h, w3)


class Dqn:
    def __init__(self, s, dev):
        self.s, self.dev = s, dev
        self.env = Env(s, dev)
        self.params = mlp_params(s, A, dev)
        self.target = [p.detach().clone() for p in self.params]
        self.opt = torch.optim.Adam(self.params, lr=1e-3, fused=dev == "cuda", capturable=dev == "cuda")
        cap = s.E * s.STEPS
        self.cap = cap
        self.r_obs = torch.zeros(s.K, cap, s.D, device=dev)
        self.r_next = torch.zeros(s.K, cap, s.D, device=dev)
        self.r_act = torch.zeros(s.K, cap, dtype=torch.long, device=dev)
        self.r_rew = torch.zeros(s.K, cap, device=dev)
        self.r_done = torch.zeros(s.K, cap, device=dev)
        self.head = torch.zeros((), dtype=torch.long, device=dev)  # env steps written (device: graph-safe)
        self.obs = self.env.obs()

    def act_and_store(self):
        s = self.s
        with torch.no_grad():
            eps = torch.clamp(1.0 - self.head.float() * (0.95 / 10_000.0), min=0.05)
            greedy = mlp(self.params, self.obs).argmax(-1)
            rand = torch.randint(0, A, greedy.shape, device=self.dev)
            action = torch.where(torch.rand(greedy.shape, device=self.dev) < eps, rand, greedy)
            rew, done = self.env.step(action)
            nxt = self.env.obs()
            slot = (self.head * s.E + torch.arange(s.E, device=self.dev)) % self.cap
            self.r_obs.index_copy_(1, slot, self.obs)
            self.r_next.index_copy_(1, slot, nxt)
            self.r_act.index_copy_(1, slot, action)
            self.r_rew.index_copy_(1, slot, rew)
            self.r_done.index_copy_(1, slot, done)
            self.obs.copy_(nxt)
            self.head += 1

    def train(self):
        s = self.s
        filled = torch.clamp(self.head * s.E, max=self.cap)
        idx = (torch.rand(s.K, s.B, device=self.dev) * filled).long()
        rows = idx.unsqueeze(-1).expand(-1, -1, s.D)
        o, o2 = torch.gather(self.r_obs, 1, rows), torch.gather(self.r_next, 1, rows)
        a, r, d = torch.gather(self.r_act, 1, idx), torch.gather(self.r_rew, 1, idx), torch.gather(self.r_done, 1, idx)
        with torch.no_grad():
            a2 = mlp(self.params, o2).argmax(-1, keepdim=True)
            tq = mlp(self.target, o2).gather(-1, a2).squeeze(-1)
            y = r + 0.99 * (1 - d) * tq
        pred = mlp(self.params, o).gather(-1, a.unsqueeze(-1)).squeeze(-1)
        # Each trial's mean Huber loss; their sum keeps the trials' gradients apart.
        loss = torch.nn.functional.huber_loss(pred, y, reduction="none").mean(1).sum()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()

    def sync_target(self):
        with torch.no_grad():
            for t, p in zip(self.target, self.params):
                t.copy_(p)

    def step(self):
        self.act_and_store()
        self.train()


class Ppo:
    def __init__(self, s, dev):
        self.s, self.dev = s, dev
        self.env = Env(s, dev)
        self.params = mlp_params(s, A + 1, dev)
        self.opt = torch.optim.Adam(self.params, lr=3e-4, eps=1e-5, fused=dev == "cuda", capturable=dev == "cuda")
        K, T, E, D = s.K, s.STEPS, s.E, s.D
        self.b_obs = torch.zeros(K, T, E, D, device=dev)
        self.b_act = torch.zeros(K, T, E, dtype=torch.long, device=dev)
        self.b_logp = torch.zeros(K, T, E, device=dev)
        self.b_rew = torch.zeros(K, T, E, device=dev)
        self.b_done = torch.zeros(K, T, E, device=dev)
        self.b_val = torch.zeros(K, T, E, device=dev)
        self.adv = torch.zeros(K, T, E, device=dev)
        self.ret = torch.zeros(K, T, E, device=dev)
        self.t = torch.zeros((), dtype=torch.long, device=dev)
        self.obs = self.env.obs()
        self.n = T * E
        self.mb = self.n // 4

    def rollout_step(self):
        with torch.no_grad():
            out = mlp(self.params, self.obs, torch.tanh)
            logits, value = out[..., :A], out[..., A]
            logp_all = torch.log_softmax(logits, -1)
            # A categorical draw by the Gumbel-max trick (capturable in a CUDA graph, unlike multinomial).
            gumbel = -torch.log(-torch.log(torch.rand_like(logits).clamp_min(1e-20)))
            action = (logp_all + gumbel).argmax(-1)
            logp = logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
            rew, done = self.env.step(action)
            i = self.t.view(1)
            self.b_obs.index_copy_(1, i, self.obs.unsqueeze(1))
            self.b_act.index_copy_(1, i, action.unsqueeze(1))
            self.b_logp.index_copy_(1, i, logp.unsqueeze(1))
            self.b_rew.index_copy_(1, i, rew.unsqueeze(1))
            self.b_done.index_copy_(1, i, done.unsqueeze(1))
            self.b_val.index_copy_(1, i, value.unsqueeze(1))
            self.obs.copy_(self.env.obs())
            self.t += 1

    def gae(self):
        with torch.no_grad():
            next_val = mlp(self.params, self.obs, torch.tanh)[..., A]
            last = torch.zeros_like(next_val)
            for t in reversed(range(self.s.STEPS)):
                nv = next_val if t == self.s.STEPS - 1 else self.b_val[:, t + 1]
                nonterminal = 1.0 - self.b_done[:, t]
                delta = self.b_rew[:, t] + 0.99 * nv * nonterminal - self.b_val[:, t]
                last = delta + 0.99 * 0.95 * nonterminal * last
                self.adv[:, t] = last
            self.ret.copy_(self.adv + self.b_val)
            self.t.zero_()

    def shuffle(self):
        return torch.argsort(torch.rand(self.s.K, self.n, device=self.dev), dim=1)

    def minibatch(self, perm, j):
        s = self.s
        idx = perm[:, j * self.mb : (j + 1) * self.mb]
        flat = lambda x: x.reshape(s.K, self.n, *x.shape[3:])
        rows = idx.unsqueeze(-1).expand(-1, -1, s.D)
        o = torch.gather(flat(self.b_obs), 1, rows)
        a, old_logp = torch.gather(flat(self.b_act), 1, idx), torch.gather(flat(self.b_logp), 1, idx)
        adv, ret = torch.gather(flat(self.adv), 1, idx), torch.gather(flat(self.ret), 1, idx)
        old_v = torch.gather(flat(self.b_val), 1, idx)
        adv = (adv - adv.mean(1, keepdim=True)) / (adv.std(1, keepdim=True) + 1e-8)
        out = mlp(self.params, o, torch.tanh)
        logp_all = torch.log_softmax(out[..., :A], -1)
        logp = logp_all.gather(-1, a.unsqueeze(-1)).squeeze(-1)
        ratio = (logp - old_logp).exp()
        pg = torch.max(-adv * ratio, -adv * ratio.clamp(0.8, 1.2)).mean(1)
        v = out[..., A]
        v_clipped = old_v + (v - old_v).clamp(-0.2, 0.2)
        vf = 0.5 * torch.max((v - ret) ** 2, (v_clipped - ret) ** 2).mean(1)
        entropy = -(logp_all.exp() * logp_all).sum(-1).mean(1)
        loss = (pg - 0.01 * entropy + 0.5 * vf).sum()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        # Each trial's gradient clipped to global norm 0.5 (CleanRL's max_grad_norm), trial by trial.
        with torch.no_grad():
            sq = sum(p.grad.pow(2).flatten(1).sum(1) for p in self.params)
            scale = torch.clamp(0.5 / (sq.sqrt() + 1e-6), max=1.0)
            for p in self.params:
                p.grad.mul_(scale.view(-1, *([1] * (p.dim() - 1))))
        self.opt.step()

    def update_epoch(self):
        perm = self.shuffle()
        for j in range(4):
            self.minibatch(perm, j)


def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


def run_dqn(s, dev, variant):
    agent = Dqn(s, dev)
    step = agent.step
    if variant == "compile":
        agent.act_and_store = torch.compile(agent.act_and_store)
        agent.train = torch.compile(agent.train)
    started = time.perf_counter()
    for _ in range(3):
        step()
    if variant == "graph":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        step = graph.replay
    sync(dev)
    warmup = time.perf_counter() - started
    started = time.perf_counter()
    for i in range(s.STEPS):
        step()
        if (i + 1) % 250 == 0:
            agent.sync_target()
    sync(dev)
    return time.perf_counter() - started, s.STEPS, warmup


def run_ppo(s, dev, variant):
    agent = Ppo(s, dev)
    rollout_step, gae, update_epoch = agent.rollout_step, agent.gae, agent.update_epoch
    if variant == "compile":
        rollout_step = torch.compile(agent.rollout_step)
        agent.minibatch = torch.compile(agent.minibatch)
        update_epoch = agent.update_epoch
    started = time.perf_counter()

    def epoch():
        for _ in range(s.STEPS):
            rollout_step()
        gae()
        for _ in range(4):
            update_epoch()

    if variant == "graph":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                agent.rollout_step()
            agent.gae()
            agent.update_epoch()
        torch.cuda.current_stream().wait_stream(side)
        graphs = []
        for fn in (agent.rollout_step, agent.gae, agent.update_epoch):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn()
            graphs.append(g)
        rollout_step, gae, update_epoch = (g.replay for g in graphs)
        agent.t.zero_()
    else:
        epoch()  # warm-up (and compilation)
    sync(dev)
    warmup = time.perf_counter() - started
    started = time.perf_counter()
    epoch()
    sync(dev)
    return time.perf_counter() - started, 4 * 4, warmup


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--algo", default="both", choices=["dqn", "ppo", "both"])
    ap.add_argument("--variants", default="eager,compile,graph")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    s = Sizes(args.small)
    torch.manual_seed(0)
    algos = ["dqn", "ppo"] if args.algo == "both" else [args.algo]
    for algo in algos:
        for variant in args.variants.split(","):
            line = {"peer": "pytorch", "algo": algo, "variant": variant, "torch": torch.__version__, "device": args.device,
                    "threads": torch.get_num_threads()}
            line["shape"] = {"trials": s.K, "envs": s.E, "batch": s.B, "inputs": s.D, "hidden": s.H, "steps": s.STEPS}
            try:
                if variant == "graph" and args.device != "cuda":
                    raise RuntimeError("CUDA graphs need --device cuda")
                run = run_dqn if algo == "dqn" else run_ppo
                seconds, grad_steps, warmup = run(s, args.device, variant)
                line.update(epoch_s=seconds, grad_steps=grad_steps, warmup_s=warmup)
            except Exception as e:  # one variant failing must not hide the others
                line["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            print(json.dumps(line), flush=True)
            if args.device == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
