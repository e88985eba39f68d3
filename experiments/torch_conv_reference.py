"""PyTorch side of bench_conv.py: the same convolutional networks on one CPU thread, timed per call.

Run by experiments/bench_conv.py with the torch interpreter (HOGSHARE_TORCH_PYTHON); reads the networks and
batches as JSON on stdin (bench_conv.CASES' form) and prints one JSON object {"net/batch/mode": best seconds per
call}. Frames are uint8 on both sides; here they become floats (times the network's scale) inside the timed call.
usage: python torch_conv_reference.py < cases.json
"""
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import best_time, conv_body  # noqa: E402

torch.set_num_threads(1)


class Network(nn.Module):
    """Convolutions with ReLUs, flatten, hidden Linear+ReLU layers, then one Linear head per entry of `heads`."""

    def __init__(self, spec):
        super().__init__()
        layers, size = conv_body(nn, spec)
        self.body = nn.Sequential(*layers)
        self.heads = nn.ModuleList(nn.Linear(size, n) for n in spec["heads"])
        self.scale = spec["scale"]

    def forward(self, frames):
        h = self.body(frames.float() * self.scale)
        return [head(h) for head in self.heads]


def measure(spec, batch, seconds):
    torch.manual_seed(0)
    net = Network(spec)
    frames = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (batch, spec["frames"], 84, 84),
                                                               dtype=np.uint8))

    def forward():
        with torch.no_grad():
            net(frames)

    def forward_backward():
        net.zero_grad(set_to_none=True)
        sum(out.sum() for out in net(frames)).backward()
    return {"forward": best_time(forward, seconds), "forward+backward": best_time(forward_backward, seconds)}


if __name__ == "__main__":
    request = json.load(sys.stdin)
    times = {}
    for name, spec in request["networks"].items():
        for batch in request["batches"]:
            for mode, seconds in measure(spec, batch, request["seconds"]).items():
                times[f"{name}/{batch}/{mode}"] = seconds
    print(json.dumps(times))
