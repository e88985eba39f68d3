"""PyTorch side of bench_conv: the same convolutional networks on one CPU thread, timed per call on request.

Run by `python -m experiments.bench_conv` with the torch interpreter (HOGSHARE_TORCH_PYTHON) as a `common.Side`:
the networks come as JSON in the first argument (bench_conv.NETWORKS' form); each request on stdin, {"net",
"batch", "mode", "seconds"}, is answered with {"seconds": the fastest call}. Frames are uint8 on both sides;
here they become floats (times the network's scale) inside the timed call.
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Any, Callable

from experiments.common import best_time, conv_body, serve


def network(torch: Any, spec: dict) -> Any:
    """Convolutions with ReLUs, flatten, hidden Linear+ReLU layers, then one Linear head per entry of spec's
    `heads`, reading frames times spec's `scale`."""
    nn = torch.nn

    class Network(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layers, size = conv_body(nn, spec)
            self.body = nn.Sequential(*layers)
            self.heads = nn.ModuleList(nn.Linear(size, n) for n in spec["heads"])

        def forward(self, frames: Any) -> list:
            h = self.body(frames.float() * spec["scale"])
            return [head(h) for head in self.heads]
    return Network()


def passes(torch: Any, net: Any, frames: Any) -> dict[str, Callable[[], None]]:
    """The forward (no autograd) and forward + backward calls of `net` on `frames`."""
    def forward() -> None:
        with torch.no_grad():
            net(frames)

    def forward_backward() -> None:
        net.zero_grad(set_to_none=True)
        sum(out.sum() for out in net(frames)).backward()
    return {"forward": forward, "forward+backward": forward_backward}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("networks", help="the networks as JSON, bench_conv.NETWORKS' form")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import numpy as np
    import torch

    torch.set_num_threads(1)
    networks, made = json.loads(args.networks), {}

    def handle(request: dict) -> dict:
        key = (request["net"], request["batch"])
        if key not in made:
            torch.manual_seed(0)
            spec = networks[request["net"]]
            frames = torch.from_numpy(np.random.default_rng(0).integers(
                0, 256, (request["batch"], spec["frames"], 84, 84), dtype=np.uint8))
            made[key] = passes(torch, network(torch, spec), frames)
        return {"seconds": best_time(made[key][request["mode"]], request["seconds"])}
    serve(handle)


if __name__ == "__main__":
    main()
