"""Convolution: the A3C paper's Atari network against a float64 direct computation, the layer's workspace (buffers
reused only once nothing reads them), and conv models captured by framework.compile as one graph."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import framework as F
from framework import compiler, nn
from framework.ops.workspace import KEPT_SHAPES, Workspace
from framework.rl.model import ActorCritic

from compile_models import assert_same, grads_of


def atari_network(frames: int = 4) -> ActorCritic:
    """The A3C paper's feed-forward agent over uint8 frames (16 8x8/4, 32 4x4/2, 256), as configs/a3c_pong.yaml."""
    F.manual_seed(0)
    return ActorCritic((frames, 84, 84), [256], "relu", False, 6, False, conv=((16, 8, 4), (32, 4, 2)),
                       uint8_frames=True)


def frames(batch: int, seed: int) -> F.Tensor:
    return F.tensor(np.random.default_rng(seed).integers(0, 256, (batch, 4, 84, 84), dtype=np.uint8))


def loss_of(model: ActorCritic):
    def loss(x: F.Tensor) -> F.Tensor:
        head, value, _ = model(x)
        return (head * head).sum() + value.sum()
    return loss


def direct_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int) -> np.ndarray:
    """Cross-correlation by a loop over kernel offsets, in float64: the reference the layers are held to."""
    n, _, h, width = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (width - kw) // stride + 1
    out = np.zeros((n, o, oh, ow)) + b[None, :, None, None]
    for a in range(kh):
        for c in range(kw):
            window = x[:, :, a:a + stride * (oh - 1) + 1:stride, c:c + stride * (ow - 1) + 1:stride]
            out += np.einsum("nchw,oc->nohw", window, w[:, :, a, c])
    return out


def test_the_atari_network_matches_a_float64_direct_computation_within_float32_rounding():
    model = atari_network()
    x = frames(3, 1)
    with F.no_grad():
        head, value, _ = model(x)
    params = {name: p.detach().numpy().astype(np.float64) for name, p in model.named_parameters()}
    h = np.maximum(direct_conv(x.numpy() / 255.0, params["body.0.weight"], params["body.0.bias"], 4), 0)
    h = np.maximum(direct_conv(h, params["body.2.weight"], params["body.2.bias"], 2), 0).reshape(3, -1)
    h = np.maximum(h @ params["body.5.weight"].T + params["body.5.bias"], 0)
    np.testing.assert_allclose(head.numpy(), h @ params["pi.weight"].T + params["pi.bias"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(value.numpy(), (h @ params["v.weight"].T + params["v.bias"])[:, 0], rtol=1e-4,
                               atol=1e-5)


def test_a_second_forward_before_the_first_backward_leaves_the_first_gradients_intact():
    model = atari_network()
    params = list(model.parameters())
    loss = loss_of(model)
    expected = grads_of(params, lambda: loss(frames(5, 1)))
    pending = loss(frames(5, 1))
    loss(frames(5, 2)).backward()  # same shapes: it must not reuse the pending graph's saved block matrices
    with F.no_grad():
        loss(frames(5, 3))  # nor may a forward without autograd
    for p in params:
        p.grad = None
    pending.backward()
    assert_same([p.grad for p in params], expected)


def test_saved_buffers_return_to_the_layers_workspace_once_backward_has_run():
    conv = nn.Conv2d(2, 3, 3, stride=2)
    x = F.randn(4, 2, 9, 9, requires_grad=True)
    with F.no_grad():
        conv(x)
    free = len(conv.workspace)
    assert free > 0  # the forward's temporaries and its block matrix, kept for the next call
    out = conv(x)
    assert len(conv.workspace) < free  # the block matrix is held for the backward
    out.sum().backward()
    assert len(conv.workspace) >= free
    before = [b for bufs in conv.workspace._free.values() for b in bufs]
    with F.no_grad():
        conv(x)
    after = [b for bufs in conv.workspace._free.values() for b in bufs]
    assert sorted(map(id, before)) == sorted(map(id, after))  # the same arrays again, none allocated


def test_a_workspace_keeps_the_buffers_of_its_most_recent_shapes_only():
    workspace = Workspace()
    for size in range(KEPT_SHAPES + 3):
        workspace.give(np.empty(size + 1, np.float32))
    assert len(workspace) == KEPT_SHAPES
    kept = workspace.take(np, np.empty(0), (KEPT_SHAPES + 3,), np.dtype(np.float32))
    assert kept.shape == (KEPT_SHAPES + 3,) and len(workspace) == KEPT_SHAPES - 1
    zeroed = workspace.take(np, np.empty(0), (3, 2), np.dtype(np.float32), zeroed=True)
    assert not zeroed.any()


def test_a_layer_copied_or_pickled_starts_with_an_empty_workspace():
    conv = nn.Conv2d(2, 3, 3)
    with F.no_grad():
        conv(F.randn(2, 2, 5, 5))
    assert len(conv.workspace) > 0
    for clone in (copy.deepcopy(conv), pickle.loads(pickle.dumps(conv))):
        assert clone.workspace is not conv.workspace and len(clone.workspace) == 0
        assert_same(clone(F.ones(1, 2, 5, 5)), conv(F.ones(1, 2, 5, 5)))


@pytest.mark.usefixtures("fresh_compiler")
def test_the_atari_network_compiles_as_one_graph_with_eager_values_and_gradients():
    model = atari_network()
    loss = loss_of(model)
    params = list(model.parameters())
    explanation = compiler.explain(loss, frames(4, 1))
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.ops_per_graph[0].count("conv2d") == 2
    compiled = F.compile(loss, fullgraph=True)
    for seed in range(3):
        x = frames(4, seed)
        assert_same(compiled(x), loss(x))
        assert_same(grads_of(params, lambda: compiled(x)), grads_of(params, lambda: loss(x)))
    pending = compiled(frames(4, 0))  # a replay whose backward is pending keeps its own saved block matrices
    compiled(frames(4, 1)).backward()
    assert_same(grads_of(params, lambda: pending), grads_of(params, lambda: loss(frames(4, 0))))
    assert compiler.counters["captures"] == 1 and compiler.counters["graph_breaks"] == 0


def test_sequential_fuses_each_conv2d_with_the_relu_after_it_to_the_same_values_and_gradients():
    F.manual_seed(0)
    fused = nn.Sequential(nn.Conv2d(2, 4, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(4, 3, 2, dilation=2),
                          nn.ReLU(), nn.Flatten(), nn.Linear(3 * 2 * 2, 2))
    layers = list(fused)

    def unfused(x):
        h = F.relu(layers[0](x))
        return layers[5](layers[4](F.relu(layers[2](h))))
    x = F.randn(3, 2, 8, 8, requires_grad=True)
    params = [x] + list(fused.parameters())
    assert_same(fused(x), unfused(x))
    assert_same(grads_of(params, lambda: fused(x).sum()), grads_of(params, lambda: unfused(x).sum()))
    ops = compiler.explain(lambda x: fused(x).sum(), x).ops_per_graph[0]
    assert ops.count("conv2d") == 2 and "relu" not in ops  # each ReLU ran inside its convolution


def test_sequential_leaves_a_conv2d_whose_forward_is_overridden_unfused():
    class Negated(nn.Conv2d):
        def forward(self, input):
            return -super().forward(input)
    F.manual_seed(0)
    net = nn.Sequential(Negated(2, 3, 3), nn.ReLU())
    x = F.randn(2, 2, 5, 5)
    assert_same(net(x), F.relu(-net[0].convolve(x)))


def test_a_layer_run_on_inputs_of_two_sizes_with_one_block_shape_keeps_each_ones_zero_padding():
    F.manual_seed(0)
    conv = nn.Conv2d(2, 3, 3, stride=2, padding=1)
    fresh = copy.deepcopy(conv)
    large, small = F.randn(2, 2, 10, 10), F.randn(2, 2, 9, 9)  # both give 5 x 5 outputs: the same block matrix
    with F.no_grad():
        conv(large)
        assert_same(conv(small), fresh(small))


@pytest.mark.usefixtures("fresh_compiler")
def test_a_dynamic_capture_of_the_atari_network_serves_every_batch_size():
    model = atari_network()
    loss = loss_of(model)
    params = list(model.parameters())
    compiled = F.compile(loss, dynamic=True)
    for batch in (3, 5, 7, 5):
        x = frames(batch, batch)
        assert_same(compiled(x), loss(x))
        assert_same(grads_of(params, lambda: compiled(x)), grads_of(params, lambda: loss(x)))
    assert compiler.counters["captures"] == 1 and compiler.counters["graph_breaks"] == 0
