"""PyTorch side of bench_core.py: the same models, losses and optimizer steps, timed per step.

Run by experiments/bench_core.py with the torch interpreter, once per round; prints one
JSON object {case: seconds per step, the best of REPEATS timed runs after a warm-up}.
usage: python torch_core_reference.py STEPS [REPEATS]
"""
import json
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(1)


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 128)
        self.pi = nn.Linear(128, 2)
        self.v = nn.Linear(128, 1)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.pi(h), self.v(h)


def actor_critic_step(batch):
    torch.manual_seed(0)
    net = ActorCritic()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((batch, 4)).astype(np.float32))
    a = torch.from_numpy(rng.integers(0, 2, batch))
    ret = torch.from_numpy(rng.standard_normal(batch).astype(np.float32))

    def step():
        logits, v = net(x)
        dist = torch.distributions.Categorical(logits=logits)
        v = v.squeeze(-1)
        adv = (ret - v).detach()
        loss = -(dist.log_prob(a) * adv).mean() + 0.5 * ((ret - v) ** 2).mean() - 0.01 * dist.entropy().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def mlp_step():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((64, 784)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, 64))

    def step():
        opt.zero_grad()
        F.nll_loss(F.log_softmax(net(x), dim=1), y).backward()
        opt.step()
    return step


def per_step(step, steps, repeats):
    for _ in range(max(10, steps // 10)):
        step()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - start) / steps)
    return best


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    print(json.dumps({
        "actor_critic_b1": per_step(actor_critic_step(1), n, repeats),
        "actor_critic_b32": per_step(actor_critic_step(32), n, repeats),
        "mlp_784_b64": per_step(mlp_step(), max(n // 4, 50), repeats),
    }))
