"""PyTorch side of bench_core: the reference programs' own networks, trained a step at a time and timed per step.

The networks are those of ../shared/baselines, imported from there: torch_a3c_cartpole.py's actor-critic
4-128-(2+1) (with bench_core's A2C loss and Adam) and torch_hogwild_mlp.py's MLP 784-128-10 (nll loss, SGD).
Run by `python -m experiments.bench_core` with the torch interpreter (HOGSHARE_TORCH_PYTHON), once per round;
prints one JSON object {case: seconds per step, the best of REPEATS timed runs after a warm-up}.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any, Callable

from experiments.common import baseline_module


def actor_critic_step(torch: Any, batch: int) -> Callable[[], None]:
    """One A2C step (Categorical log-prob and entropy, value loss, Adam) of torch_a3c_cartpole.py's network."""
    import numpy as np

    torch.manual_seed(0)
    net = baseline_module("torch_a3c_cartpole.py").Net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((batch, 4)).astype(np.float32))
    a = torch.from_numpy(rng.integers(0, 2, batch))
    ret = torch.from_numpy(rng.standard_normal(batch).astype(np.float32))

    def step() -> None:
        logits, v = net(x)
        dist = torch.distributions.Categorical(logits=logits)
        v = v.squeeze(-1)
        adv = (ret - v).detach()
        loss = -(dist.log_prob(a) * adv).mean() + 0.5 * ((ret - v) ** 2).mean() - 0.01 * dist.entropy().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def mlp_step(torch: Any) -> Callable[[], None]:
    """One SGD step of torch_hogwild_mlp.py's network (log-softmax output, nll loss) on a batch of 64."""
    import numpy as np

    torch.manual_seed(0)
    net = baseline_module("torch_hogwild_mlp.py").Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((64, 784)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, 64))

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.nll_loss(net(x), y).backward()
        opt.step()
    return step


def per_step(step: Callable[[], None], steps: int, repeats: int) -> float:
    """Seconds per step: the best of `repeats` timed runs of `steps` steps, after a warm-up."""
    for _ in range(max(10, steps // 10)):
        step()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - start) / steps)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", type=int, nargs="?", default=2000, help="timed steps per case (MLP: a quarter)")
    parser.add_argument("repeats", type=int, nargs="?", default=3, help="timed runs per case, the best kept")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    print(json.dumps({
        "actor_critic_b1": per_step(actor_critic_step(torch, 1), args.steps, args.repeats),
        "actor_critic_b32": per_step(actor_critic_step(torch, 32), args.steps, args.repeats),
        "mlp_784_b64": per_step(mlp_step(torch), max(args.steps // 4, 50), args.repeats),
    }))


if __name__ == "__main__":
    main()
