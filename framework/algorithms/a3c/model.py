"""The A3C actor-critic: a body (convolutions for images, an MLP, optionally an LSTM cell) and two heads.

Acting runs the same layers as training (`policy` is `forward` without the
value head), so a layer added to the body is used by both; workers run it
through framework.compile, which replays it as array code.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import framework
from framework import nn
from framework.distributions import Categorical, Normal

IMAGE_CONV = ((16, 8, 4), (32, 4, 2))
"""(channels, kernel, stride) of the convolutions over (C, H, W) observations: the A3C paper's Atari network."""

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}


def conv_output_sides(sides: Sequence[int], conv: Sequence[tuple[int, int, int]]) -> tuple[int, ...]:
    """Height and width after the (channels, kernel, stride) convolutions (no padding)."""
    for _, kernel, stride in conv:
        sides = tuple((side - kernel) // stride + 1 for side in sides)
    return tuple(sides)


class ActorCritic(nn.Module):
    """Body (convolutions, then an MLP, optionally an LSTM cell), a policy head and a value head.

    obs_shape is the observation size or shape; `conv` lists (channels, kernel,
    stride) of Conv2d layers over (C, H, W) observations (Atari frames), and
    observations of more than one axis are flattened before the MLP.
    Discrete actions: the policy head gives logits. Continuous actions: it gives
    the mean of a Normal whose log standard deviation is a learned parameter.
    """

    def __init__(self, obs_shape: int | Sequence[int], hidden: list[int], activation: str, lstm: bool,
                 n_actions: int, continuous: bool, conv: Sequence[tuple[int, int, int]] = ()):
        super().__init__()
        act = ACTIVATIONS[activation]
        layers: list[nn.Module] = []
        shape = (obs_shape,) if isinstance(obs_shape, int) else tuple(obs_shape)
        for channels, kernel, stride in conv:
            layers += [nn.Conv2d(shape[0], channels, kernel, stride), act()]
            shape = (channels, *conv_output_sides(shape[1:], [(channels, kernel, stride)]))
        if len(shape) > 1:
            layers.append(nn.Flatten())
        size = int(np.prod(shape))
        for width in hidden:
            layers += [nn.Linear(size, width), act()]
            size = width
        self.body = nn.Sequential(*layers)
        self.lstm = nn.LSTMCell(size, size) if lstm else None
        self.pi = nn.Linear(size, n_actions)
        self.v = nn.Linear(size, 1)
        self.continuous = continuous
        self.log_std = nn.Parameter(framework.zeros(n_actions)) if continuous else None
        self.hidden_size = size

    def _features(self, x: Any, state: tuple[Any, Any] | None) -> tuple[Any, tuple[Any, Any] | None]:
        h = self.body(x)
        if self.lstm is not None:
            state = self.lstm(h, state)
            h = state[0]
        return h, state

    def forward(self, x: Any, state: tuple[Any, Any] | None = None) -> tuple[Any, Any, tuple[Any, Any] | None]:
        """(policy output, value (batch,), new LSTM state or None) for a batch of observations."""
        h, state = self._features(x, state)
        return self.pi(h), self.v(h)[:, 0], state

    def policy(self, obs: Any, state: tuple[Any, Any] | None = None) -> tuple[Any, tuple[Any, Any] | None]:
        """(policy output, new LSTM state or None): `forward` without the value head, for acting."""
        h, state = self._features(obs, state)
        return self.pi(h), state

    def policy_array(self, obs: Any, state: tuple[Any, Any] | None = None) -> tuple[Any, tuple[Any, Any] | None]:
        """`policy` without autograd on an array of observations (on the model's device): (array, state)."""
        with framework.no_grad():
            head, state = self.policy(framework.as_tensor(obs), state)
        return head.data_array, state

    @property
    def device(self) -> str:
        """Where the parameters live: 'cpu' or 'cuda:N'."""
        return self.pi.weight.device

    def initial_state(self, batch: int) -> tuple[Any, Any] | None:
        """Zero LSTM state for a batch, on the model's device (None without an LSTM)."""
        if self.lstm is None:
            return None
        return tuple(framework.zeros(batch, self.hidden_size, device=self.device) for _ in range(2))

    def distribution(self, head: Any) -> Any:
        """The action distribution for a policy head output."""
        if self.continuous:
            return Normal(head, framework.exp(self.log_std))
        return Categorical(logits=head)
