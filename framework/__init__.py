"""hogshare's tensor library: Tensor with reverse-mode autograd on NumPy (CPU) or CuPy (CUDA), nn, optim,
distributions, with torch's names, values and gradients, and storage that moves into shared memory.

Importing it registers how tensors travel through `sharing` queues (see
framework.pickling). framework/ holds two things: this tensor library (the
modules beside this file, and compiler/, nn/, ops/, optim/) and, on top of
it, the training system (runtime/, rl/, algorithms/, train/: the `train` and
`evaluate` commands are framework.train.cli), which is not imported here.
"""
from . import pickling  # noqa: F401  (registers the ForkingPickler reducers)
from . import compiler, distributions, nn, optim
from .compiler import compile
from .creation import (arange, as_tensor, empty, from_numpy, full, ones, ones_like, rand, randint, randn, tensor,
                       zeros, zeros_like)
from .dtypes import bool_, float16, float32, float64, int8, int16, int32, int64, uint8
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .ops import (abs, add, argmax, argmin, cat, chunk, clamp, clone, conv2d, div, elu, exp, flatten, gather, linear,
                  log, log_softmax, logsumexp, matmul, max, max_pool2d, mean, min, mul, neg, permute, pow, relu,
                  reshape, sigmoid, softmax, softplus, sqrt, squeeze, stack, sub, sum, tanh, transpose, unsqueeze,
                  where)
from .random import initial_seed, manual_seed
from .tensor import Tensor

__all__ = [
    "Tensor", "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "arange", "zeros_like",
    "ones_like", "randn", "rand", "randint", "manual_seed", "initial_seed", "no_grad", "enable_grad",
    "set_grad_enabled", "is_grad_enabled", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "bool_", "abs", "add", "argmax", "argmin", "cat", "chunk", "clamp", "clone", "conv2d", "div", "elu",
    "exp", "flatten", "gather", "linear", "log", "log_softmax", "logsumexp", "matmul", "max", "max_pool2d", "mean",
    "min", "mul", "neg", "permute", "pow", "relu", "reshape", "sigmoid", "softmax", "softplus", "sqrt", "squeeze",
    "stack", "sub", "sum", "tanh", "transpose", "unsqueeze", "where", "nn", "optim", "distributions", "compile",
    "compiler",
]
