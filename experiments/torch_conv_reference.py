"""PyTorch side of bench_conv.py: the same convolutional networks on one CPU thread, timed per call on request.

Run by experiments/bench_conv.py with the torch interpreter (HOGSHARE_TORCH_PYTHON) as a `common.Side`: the
networks come as JSON in the first argument (bench_conv.NETWORKS' form); each request on stdin,
{"net", "batch", "mode", "seconds"}, is answered with {"seconds": the fastest call}. Frames are uint8 on both
sides; here they become floats (times the network's scale) inside the timed call.
usage: python torch_conv_reference.py NETWORKS_JSON   (then requests on stdin, one JSON object a line)
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
from common import best_time, conv_body, serve  # noqa: E402

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


def passes(net, frames):
    """The forward (no autograd) and forward + backward calls of `net` on `frames`."""
    def forward():
        with torch.no_grad():
            net(frames)

    def forward_backward():
        net.zero_grad(set_to_none=True)
        sum(out.sum() for out in net(frames)).backward()
    return {"forward": forward, "forward+backward": forward_backward}


if __name__ == "__main__":
    networks, made = json.loads(sys.argv[1]), {}

    def handle(request):
        key = (request["net"], request["batch"])
        if key not in made:
            torch.manual_seed(0)
            spec = networks[request["net"]]
            frames = torch.from_numpy(np.random.default_rng(0).integers(
                0, 256, (request["batch"], spec["frames"], 84, 84), dtype=np.uint8))
            made[key] = passes(Network(spec), frames)
        return {"seconds": best_time(made[key][request["mode"]], request["seconds"])}
    serve(handle)
