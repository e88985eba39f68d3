"""Every differentiable op's gradient against central finite differences, on random shapes (hypothesis)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import framework as F
from framework.distributions import Categorical, Normal
from framework.nn import functional as Fn

from core_gradcheck import check_grads

FAST = settings(max_examples=12, deadline=None)
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)


def values(shape, low=-2.0, high=2.0, away_from=None, margin=0.05):
    """float64 arrays of `shape` in [low, high], optionally kept `margin` away from a kink at `away_from`."""
    elements = st.floats(low, high, allow_nan=False, width=64)
    if away_from is not None:
        elements = elements.filter(lambda v: abs(v - away_from) > margin)
    return hnp.arrays(np.float64, shape, elements=elements)


def distinct(shape):
    """Arrays whose entries are well separated (no ties for max/min/sorting-like ops)."""
    size = int(np.prod(shape))
    return st.permutations(list(range(size))).map(lambda p: (np.array(p, np.float64) * 0.37 - 1.0).reshape(shape))


def broadcast_pair(min_dims=0):
    return hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=min_dims, max_dims=3, max_side=3)


# ---- arithmetic with broadcasting --------------------------------------------------------------
@FAST
@given(data=st.data(), shapes=broadcast_pair())
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
def test_binary_ops_broadcast(op, data, shapes):
    a_shape, b_shape = shapes.input_shapes
    if op in ("div", "pow"):
        a = data.draw(values(a_shape, 0.5, 2.0))
        b = data.draw(values(b_shape, 0.5, 2.0))
    else:
        a, b = data.draw(values(a_shape)), data.draw(values(b_shape))
    fn = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
          "div": lambda x, y: x / y, "pow": lambda x, y: x ** y}[op]
    check_grads(fn, a, b)


@FAST
@given(x=values(SHAPES, 0.5, 2.0), scalar=st.floats(0.5, 3.0))
def test_scalar_operands_and_reflected(x, scalar):
    check_grads(lambda t: scalar - t * scalar + scalar / t + t ** scalar + scalar ** t - (-t) + t / scalar, x)


@FAST
@given(x=values(SHAPES))
def test_square_fast_path(x):
    check_grads(lambda t: t ** 2, x)


@FAST
@given(data=st.data(), m=st.integers(1, 3), k=st.integers(1, 3), n=st.integers(1, 3),
       batch=st.sampled_from([(), (2,), (2, 1)]), case=st.sampled_from(["mm", "vm", "mv", "vv"]))
def test_matmul(data, m, k, n, batch, case):
    a_shape = (k,) if case in ("vm", "vv") else batch + (m, k)
    b_shape = (k,) if case in ("mv", "vv") else (batch[-1:] if batch else ()) + (k, n)
    check_grads(lambda x, y: x @ y, data.draw(values(a_shape)), data.draw(values(b_shape)))


@FAST
@given(data=st.data(), lead=st.sampled_from([(), (1,), (3,), (2, 2)]), fin=st.integers(1, 4),
       fout=st.integers(1, 3), bias=st.booleans())
def test_linear(data, lead, fin, fout, bias):
    arrays = [data.draw(values(lead + (fin,))), data.draw(values((fout, fin)))]
    if bias:
        arrays.append(data.draw(values((fout,))))
    check_grads(lambda *t: F.linear(*t), *arrays)


# ---- element-wise ---------------------------------------------------------------------------------
UNARY = {
    "exp": (F.exp, values), "neg": (lambda t: -t, values), "tanh": (F.tanh, values),
    "sigmoid": (F.sigmoid, lambda s: values(s, -8, 8)), "softplus": (F.softplus, values),
    "softplus_beta": (lambda t: F.softplus(t, beta=2.0, threshold=3.0), lambda s: values(s, away_from=1.5, margin=0.1)),
    "elu": (F.elu, lambda s: values(s, away_from=0.0)), "relu": (F.relu, lambda s: values(s, away_from=0.0)),
    "abs": (F.abs, lambda s: values(s, away_from=0.0)), "log": (F.log, lambda s: values(s, 0.2, 3.0)),
    "sqrt": (F.sqrt, lambda s: values(s, 0.2, 3.0)), "clone": (F.clone, values),
    "clamp": (lambda t: F.clamp(t, -0.5, 0.7), lambda s: values(s).filter(
        lambda a: np.all(np.abs(a + 0.5) > 0.05) and np.all(np.abs(a - 0.7) > 0.05))),
    "clamp_min": (lambda t: t.clamp(min=0.1), lambda s: values(s, away_from=0.1)),
}


@FAST
@given(data=st.data(), shape=SHAPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, data, shape):
    fn, strategy = UNARY[name]
    check_grads(fn, data.draw(strategy(shape)))


@FAST
@given(data=st.data(), shapes=broadcast_pair(), cond_seed=st.integers(0, 10))
def test_where(data, shapes, cond_seed):
    a_shape, b_shape = shapes.input_shapes
    cond = np.random.default_rng(cond_seed).random(shapes.result_shape) > 0.5
    check_grads(lambda x, y: F.where(F.tensor(cond), x, y), data.draw(values(a_shape)), data.draw(values(b_shape)))


# ---- reductions ---------------------------------------------------------------------------------------
def axis_for(data, shape):
    if not shape:
        return data.draw(st.sampled_from([None, 0, -1]))
    single = st.integers(-len(shape), len(shape) - 1)
    several = st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True).map(tuple)
    return data.draw(st.one_of(st.none(), single, several))


@FAST
@given(data=st.data(), shape=SHAPES, keepdims=st.booleans())
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "logsumexp"])
def test_reductions(name, data, shape, keepdims):
    axis = axis_for(data, shape)
    x = data.draw(distinct(shape)) if name in ("max", "min") else data.draw(values(shape))
    check_grads(lambda t: getattr(F, name)(t, axis=axis, keepdims=keepdims), x)


def test_max_ties_share_gradient_like_amax():
    x = F.tensor([1.0, 3.0, 3.0, 2.0], requires_grad=True)
    x.max().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0, 0.5, 0.5, 0])


@FAST
@given(data=st.data(), shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=4))
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_family(name, data, shape):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    check_grads(lambda t: getattr(F, name)(t, axis=axis), data.draw(values(shape, -3, 3)))


# ---- shapes and selection -------------------------------------------------------------------------------
@FAST
@given(x=values((2, 3, 4)))
def test_shape_ops(x):
    check_grads(lambda t: t.reshape(4, 6), x)
    check_grads(lambda t: t.reshape(-1), x)
    check_grads(lambda t: t.transpose(0, 2).reshape(24), x)
    check_grads(lambda t: t.permute(2, 0, 1), x)
    check_grads(lambda t: t.T, x)
    check_grads(lambda t: t.flatten(1), x)
    check_grads(lambda t: t.unsqueeze(1).squeeze(), x)
    check_grads(lambda t: t.view(3, 8), x)
    check_grads(lambda t: F.stack(list(F.chunk(t, 2, axis=2)), axis=0), x)


@FAST
@given(x=values((3, 4)))
def test_indexing(x):
    check_grads(lambda t: t[1], x)
    check_grads(lambda t: t[:, 1:3], x)
    check_grads(lambda t: t[::-1, ::2], x)
    check_grads(lambda t: t[None, 2, ...], x)
    check_grads(lambda t: t[[0, 2, 0]], x)  # duplicates accumulate
    check_grads(lambda t: t[np.arange(3), np.array([1, 1, 3])], x)
    mask = F.tensor(x > 0.0)
    check_grads(lambda t: t[mask], x)


@FAST
@given(x=values((3, 4)), seed=st.integers(0, 100), axis=st.sampled_from([0, 1, -1]))
def test_gather(x, seed, axis):
    rng = np.random.default_rng(seed)
    shape = (2, 4) if axis == 0 else (3, 3)
    index = rng.integers(0, x.shape[axis], shape)
    check_grads(lambda t: F.gather(t, axis, F.tensor(index)), x)
    check_grads(lambda t: t.gather(axis, F.tensor(index[:, :1] if axis else index[:1])), x)


@FAST
@given(data=st.data(), n=st.integers(1, 3), axis=st.integers(0, 1))
def test_cat_stack(data, n, axis):
    sizes = data.draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    arrays = [data.draw(values((size, 2) if axis == 0 else (2, size))) for size in sizes]
    check_grads(lambda *t: F.cat(list(t), axis=axis), *arrays)
    same = [data.draw(values((2, 3))) for _ in range(n)]
    check_grads(lambda *t: F.stack(list(t), axis=axis), *same)


# ---- convolution and pooling ---------------------------------------------------------------------------
@settings(max_examples=8, deadline=None)
@given(data=st.data(), stride=st.integers(1, 2), padding=st.integers(0, 1), dilation=st.integers(1, 2),
       batched=st.booleans())
def test_conv2d(data, stride, padding, dilation, batched):
    shape = (2, 2, 5, 5) if batched else (2, 5, 5)
    x = data.draw(values(shape))
    w = data.draw(values((3, 2, 2, 2)))
    b = data.draw(values((3,)))
    check_grads(lambda *t: F.conv2d(*t, stride=stride, padding=padding, dilation=dilation), x, w, b)


@pytest.mark.parametrize("size, kernel, stride, padding, dilation", [
    ((12, 12), (8, 8), (4, 4), (0, 0), (1, 1)),   # the A3C network's first convolution: 2 x 2 blocks of 4 x 4
    ((8, 8), (4, 4), (2, 2), (0, 0), (1, 1)),     # its second
    ((9, 7), (3, 3), (2, 2), (1, 1), (1, 1)),     # a kernel that is not a whole number of strides
    ((7, 8), (2, 3), (3, 2), (2, 1), (2, 1)),     # dilation and padding, unequal in H and W
    ((5, 6), (3, 2), (1, 1), (0, 2), (2, 3)),     # stride 1 with dilation
    ((3, 3), (1, 1), (4, 4), (2, 2), (1, 1)),     # a stride past the input: rows and columns cut off
], ids=["k8s4", "k4s2", "k3s2p1", "dilated-padded", "dilated-s1", "wide-stride"])
def test_conv2d_blocked_paths(size, kernel, stride, padding, dilation):
    """conv2d's space-to-depth and im2col paths on the shapes that exercise zero taps, padding and cropping,
    alone and with the fused ReLU."""
    rng = np.random.default_rng(sum(size) + sum(kernel))
    x, w, b = rng.standard_normal((2, 2, *size)), rng.standard_normal((3, 2, *kernel)), rng.standard_normal(3)
    for relu in (False, True):
        check_grads(lambda *t: F.conv2d(*t, stride=stride, padding=padding, dilation=dilation, relu=relu), x, w, b)


def test_conv2d_over_a_convolutions_output():
    """A stride-1 convolution (im2col) over a strided one's (space to depth) output, a view of (C, H, W, N) memory."""
    rng = np.random.default_rng(7)
    x, w, v = rng.standard_normal((2, 2, 9, 9)), rng.standard_normal((3, 2, 3, 3)), rng.standard_normal((2, 3, 2, 2))
    check_grads(lambda x, w, v: F.conv2d(F.conv2d(x, w, stride=2), v), x, w, v)


@settings(max_examples=8, deadline=None)
@given(data=st.data(), kernel=st.integers(2, 3), stride=st.sampled_from([None, 1, 2]), padding=st.integers(0, 1))
def test_max_pool2d(data, kernel, stride, padding):
    x = data.draw(distinct((1, 2, 5, 5)))
    check_grads(lambda t: F.max_pool2d(t, kernel, stride, padding), x)


# ---- losses, distributions, LSTM -----------------------------------------------------------------------
@FAST
@given(x=values((4, 3)), y=values((4, 3)), reduction=st.sampled_from(["mean", "sum", "none"]))
def test_regression_losses(x, y, reduction):
    check_grads(lambda a, b: Fn.mse_loss(a, b, reduction=reduction), x, y)
    check_grads(lambda a, b: Fn.smooth_l1_loss(a, b, reduction=reduction, beta=0.5),
                x, np.where(np.abs(x - y - 0.5) < 0.05, y + 0.2, y))


@FAST
@given(x=values((4, 3)), seed=st.integers(0, 50), reduction=st.sampled_from(["mean", "sum", "none"]))
def test_classification_losses(x, seed, reduction):
    target = F.tensor(np.random.default_rng(seed).integers(0, 3, 4))
    check_grads(lambda t: Fn.nll_loss(F.log_softmax(t, axis=1), target, reduction=reduction), x)
    check_grads(lambda t: Fn.cross_entropy(t, target, reduction=reduction), x)


@FAST
@given(logits=values((2, 3, 4)), seed=st.integers(0, 50))
def test_categorical(logits, seed):
    actions = F.tensor(np.random.default_rng(seed).integers(0, 4, (2, 3)))
    check_grads(lambda t: Categorical(logits=t).log_prob(actions), logits)
    check_grads(lambda t: Categorical(logits=t).log_prob(actions[0]), logits)
    check_grads(lambda t: Categorical(logits=t).entropy(), logits)
    check_grads(lambda t: Categorical(probs=t).entropy(), np.exp(logits))


@FAST
@given(loc=values((3, 2)), scale=values((2,), 0.3, 2.0), x=values((3, 2)))
def test_normal(loc, scale, x):
    check_grads(lambda m, s, v: Normal(m, s).log_prob(v), loc, scale, x)
    check_grads(lambda s: Normal(F.tensor(loc), s).entropy(), scale)

    def reparameterised(m, s):
        F.manual_seed(3)  # the same noise on every evaluation
        return Normal(m, s).rsample((2,))
    check_grads(reparameterised, loc, scale)


@settings(max_examples=5, deadline=None)
@given(data=st.data(), batched=st.booleans())
def test_lstm_cell(data, batched):
    F.manual_seed(0)
    cell = F.nn.LSTMCell(3, 2).double()
    lead = (2,) if batched else ()
    x, h, c = data.draw(values(lead + (3,))), data.draw(values(lead + (2,))), data.draw(values(lead + (2,)))
    params = [p.detach().numpy().copy() for p in cell.parameters()]

    names = [name for name, _ in cell.named_parameters()]

    def run(xt, ht, ct, *weights):
        for name, w in zip(names, weights):
            object.__setattr__(cell, name, w)  # differentiate with respect to the weights themselves
        h1, c1 = cell(xt, (ht, ct))
        return F.cat([h1, c1], axis=-1)
    check_grads(run, x, h, c, *params)


@settings(max_examples=6, deadline=None)
@given(data=st.data(), keep=st.booleans())
def test_lstm_unroll(data, keep):
    """LSTMCell.unroll (ops/recurrent.py) with respect to its input, initial state and every weight."""
    F.manual_seed(0)
    cell = F.nn.LSTMCell(3, 2).double()
    x, h, c = data.draw(values((4, 2, 3))), data.draw(values((2, 2))), data.draw(values((2, 2)))
    mask = np.array([[1, 1], [0, 1], [1, 1], [1, 0]], dtype=np.float64) if keep else None
    names = [name for name, _ in cell.named_parameters()]

    def run(xt, ht, ct, *weights):
        for name, w in zip(names, weights):
            object.__setattr__(cell, name, w)
        return cell.unroll(xt, (ht, ct), mask)
    check_grads(run, x, h, c, *[p.detach().numpy().copy() for p in cell.parameters()])
