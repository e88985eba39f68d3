"""The actor-critic network of A3C, IMPALA and APPO: a body (convolutions for images, an MLP, optionally an LSTM
cell) and two heads.

Acting runs the same layers as training (`policy` is `forward` without the
value head), so a layer added to the body is used by both; workers run it
through framework.compile (`trainer.compile`), which replays it as array code.

Training runs the body once over a whole rollout (`forward_rollout`): the
convolutions and the MLP do not depend on the LSTM state, so all (T+1) x E
frames go through them as one batch (large GEMMs forward and backward), and
only the LSTM cell is unrolled over the T+1 steps, as one op (IMPALA and
sample-factory do the same). uint8 image frames stay uint8 until the first
convolution, which reads them as [0, 1] floats (FrameConv2d): a quarter of
the memory traffic in env buffers, rollouts and copies.

`ActorCriticBase` is the interface the workers, learners, evaluation and the
normalisation use (see its docstring); `ActorCritic` is the built-in one, and
a `model.factory` returns another (docs/models.md).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

import framework
from framework import nn
from framework.nn import functional as F
from framework.rl.normalization import RunningMeanStd

IMAGE_CONV = ((16, 8, 4), (32, 4, 2))
"""(channels, kernel, stride) of the convolutions over (C, H, W) observations: the A3C paper's Atari network."""

NATURE_CONV = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
"""The DQN Nature paper's convolutions (Mnih et al. 2015), which PPO's Atari results use, with a 512 layer after."""

CONVOLUTIONS = {"a3c": IMAGE_CONV, "nature": NATURE_CONV}
"""`model.conv`: the convolutions an image observation goes through first."""

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}


class FrameConv2d(nn.Conv2d):
    """Conv2d over uint8 frames (0..255) as if they were scaled to [0, 1]: conv(x / 255, W) = conv(x, W / 255).

    The first layer of an image body: frames become floats only inside the convolution's own block copy, so
    nothing before it (env buffers, rollouts, copies to a device) moves more than bytes.
    """

    def convolve(self, input: Any, relu: bool = False) -> Any:
        return F.conv2d(input, self.weight * (1.0 / 255.0), self.bias, self.stride, self.padding, self.dilation,
                        workspace=self.workspace, relu=relu)


def conv_output_sides(sides: Sequence[int], conv: Sequence[tuple[int, int, int]]) -> tuple[int, ...]:
    """Height and width after the (channels, kernel, stride) convolutions (no padding)."""
    for _, kernel, stride in conv:
        sides = tuple((side - kernel) // stride + 1 for side in sides)
    return tuple(sides)


def _body(input_shape: tuple[int, ...], hidden: list[int], activation: str, conv: Sequence[tuple[int, int, int]],
          uint8_frames: bool) -> tuple[nn.Sequential, int]:
    """The layers before the heads (convolutions for images, then the MLP) and the width of their output."""
    act = ACTIVATIONS[activation]
    layers: list[nn.Module] = []
    shape = input_shape
    for channels, kernel, stride in conv:
        layer = FrameConv2d if uint8_frames and not layers else nn.Conv2d
        layers += [layer(shape[0], channels, kernel, stride), act()]
        shape = (channels, *conv_output_sides(shape[1:], [(channels, kernel, stride)]))
    if len(shape) > 1:
        layers.append(nn.Flatten())
    size = int(np.prod(shape))
    for width in hidden:
        layers += [nn.Linear(size, width), act()]
        size = width
    return nn.Sequential(*layers), size


class ActorCriticBase(nn.Module):
    """What the actor-critic plugins call on a model; subclass it (or return a Module with the same members) from a
    model.factory.

    Shapes: B observations of the layout rl.spaces gives (`obs`: (B, *obs_shape), uint8 for uint8 images,
    else float32); `head` is the policy output, (B, size) with size = the action space's n (Discrete logits),
    dimensions (Box: the Normal's mean), sum(nvec) (MultiDiscrete: each component's logits in turn) or n
    (MultiBinary: one logit each); `value` is (B,).

    A subclass implements `forward`; the rest has defaults:
    - `forward(obs, state) -> (head, value, state)`: state is None for a feed-forward model;
    - `initial_state(batch)`: None, or a tuple of (batch, ...) tensors on the model's device (a recurrent model);
    - `policy(obs, state) -> (head, state)`: forward without the value (acting);
    - `policy_array(obs, state)`: policy on an array, without autograd: (array, state);
    - `forward_rollout(obs, state, keep) -> (head, value)`: a rollout's (T+1, E, *obs_shape) observations as
      (T+1) * E rows; a recurrent state entering step t is multiplied by keep[t] ((T+1, E), 0 after an end);
    - `device`: where the parameters are;
    - `log_std`: for Box actions, a Parameter (dimensions,) with the Normal's log standard deviation (None
      otherwise); with generalized state-dependent exploration (rl.sde), a (latent, dimensions) Parameter, the
      policy output then (B, dimensions + latent): the mean and the policy's last features, detached;
    - `obs_norm`, `return_norm`: the RunningMeanStd of env.normalize_obs / normalize_reward (None without).
    """

    log_std: Any = None
    obs_norm: Any = None
    return_norm: Any = None

    def forward(self, obs: Any, state: Any = None) -> tuple[Any, Any, Any]:
        """(policy output (B, size), value (B,), new state or None) for a batch of observations."""
        raise NotImplementedError(f"{type(self).__name__} must implement forward(obs, state)")

    def initial_state(self, batch: int) -> Any:
        """The state a recurrent model starts an episode with for a batch (None: feed-forward)."""
        return None

    def policy(self, obs: Any, state: Any = None) -> tuple[Any, Any]:
        """(policy output, new state): `forward` without the value, for acting."""
        head, _, state = self.forward(obs, state)
        return head, state

    def policy_array(self, obs: Any, state: Any = None) -> tuple[Any, Any]:
        """`policy` without autograd on an array of observations (on the model's device): (array, state)."""
        with framework.no_grad():
            head, state = self.policy(framework.as_tensor(obs), state)
        return head.data_array, state

    def forward_rollout(self, obs: Any, state: Any, keep: Any) -> tuple[Any, Any]:
        """(policy outputs, values) of a rollout's (T+1, E, *obs_shape) observations as (T+1) * E rows: one
        forward over all of them, or, with a state, step by step, the state masked by keep[t] before step t."""
        steps, batch = obs.shape[:2]
        if state is None:
            head, value, _ = self.forward(obs.reshape(steps * batch, *obs.shape[2:]))
            return head, value
        heads, values = [], []
        for t in range(steps):
            mask = framework.as_tensor(keep[t].reshape(batch, 1))
            state = tuple(s * mask for s in state)
            head, value, state = self.forward(obs[t], state)
            heads.append(head)
            values.append(value)
        return framework.cat(heads, 0), framework.cat(values, 0)

    @property
    def device(self) -> str:
        """Where the parameters live: 'cpu' or 'cuda:N'."""
        return next(iter(self.parameters())).device


class ImageVectorBody(nn.Module):
    """A body over rows that pack an image (flattened, first) and a vector: the convolutions over the image,
    then their flattened output and the vector together through the MLP (a Dict observation's image entry)."""

    def __init__(self, image_shape: tuple[int, ...], vector_size: int, hidden: list[int], activation: str,
                 conv: Sequence[tuple[int, int, int]]):
        super().__init__()
        self.image_shape, self.image_size = tuple(image_shape), int(np.prod(image_shape))
        self.conv, conv_size = _body(self.image_shape, [], activation, conv, False)
        self.mlp, self.size = _body((conv_size + vector_size,), hidden, activation, (), False)

    def forward(self, x: Any) -> Any:
        image = x[:, :self.image_size].reshape(x.shape[0], *self.image_shape)
        return self.mlp(framework.cat([self.conv(image), x[:, self.image_size:]], 1))


class ActorCritic(ActorCriticBase):
    """Body (convolutions, then an MLP, optionally an LSTM cell), a policy head and a value head.

    obs_shape is the observation size or shape; `conv` lists (channels, kernel,
    stride) of Conv2d layers over (C, H, W) observations (Atari frames), and
    observations of more than one axis are flattened before the MLP. With
    uint8_frames the observations are uint8 images, read as [0, 1] by the
    first convolution (FrameConv2d). With image_shape, each observation row
    packs an image of that shape (flattened, first) and a vector
    (`ImageVectorBody`).
    Discrete actions: the policy head gives logits. Continuous actions: it gives
    the mean of a Normal whose log standard deviation is a learned parameter.
    With shared_body false the value head has a body of its own (the same
    layers, separately trained; not with an LSTM), and log_std_init sets the
    initial log standard deviation of continuous actions; orthogonal_init
    initialises as OpenAI Baselines and Stable-Baselines3 do (`_orthogonal_init`).
    With sde (continuous actions only), the actions explore with generalized
    state-dependent noise (rl.sde): log_std is a (hidden, n_actions) matrix and
    the policy output carries the policy's last features after the mean.
    With normalize_obs / normalize_returns the model carries the running
    statistics of observations / discounted returns (`obs_norm`, `return_norm`:
    rl.normalization); the environments apply them, the layers never see raw inputs.
    """

    def __init__(self, obs_shape: int | Sequence[int], hidden: list[int], activation: str, lstm: bool,
                 n_actions: int, continuous: bool, conv: Sequence[tuple[int, int, int]] = (),
                 uint8_frames: bool = False, normalize_obs: bool = False, normalize_returns: bool = False,
                 shared_body: bool = True, log_std_init: float = 0.0, image_shape: Sequence[int] | None = None,
                 orthogonal_init: bool = False, sde: bool = False):
        super().__init__()
        input_shape = (obs_shape,) if isinstance(obs_shape, int) else tuple(obs_shape)

        def body() -> tuple[nn.Module, int]:
            if image_shape is None:
                return _body(input_shape, hidden, activation, conv, uint8_frames)
            packed = ImageVectorBody(tuple(image_shape), input_shape[0] - int(np.prod(image_shape)), hidden,
                                     activation, conv)
            return packed, packed.size

        self.body, size = body()
        self.lstm = nn.LSTMCell(size, size) if lstm else None
        self.value_body = None if shared_body else body()[0]
        self.pi = nn.Linear(size, n_actions)
        self.v = nn.Linear(size, 1)
        self.continuous = continuous
        if sde and not continuous:
            raise ValueError("sde: state-dependent exploration needs continuous actions")
        self.sde = sde
        std_shape = (size, n_actions) if sde else (n_actions,)
        self.log_std = nn.Parameter(framework.full(std_shape, log_std_init)) if continuous else None
        self.hidden_size = size
        self.obs_norm = RunningMeanStd(input_shape) if normalize_obs else None
        self.return_norm = RunningMeanStd((1,)) if normalize_returns else None
        if orthogonal_init:
            self._orthogonal_init()

    def _orthogonal_init(self) -> None:
        """The initialisation of OpenAI Baselines and Stable-Baselines3: orthogonal weights with gain sqrt(2) in
        the bodies' layers, 0.01 in the policy head (actions start near uniform / the Normal near its mean), 1 in
        the value head; zero biases. The LSTM cell keeps its own."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Conv2d)):
                gain = 0.01 if module is self.pi else 1.0 if module is self.v else math.sqrt(2)
                nn.init.orthogonal_(module.weight, gain)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    def _features(self, x: Any, state: tuple[Any, Any] | None) -> tuple[Any, tuple[Any, Any] | None]:
        h = self.body(x)
        if self.lstm is not None:
            state = self.lstm(h, state)
            h = state[0]
        return h, state

    def _value(self, x: Any, h: Any) -> Any:
        """V for observations x whose (policy) features are h: from h, or from the value body's own features."""
        return self.v(h if self.value_body is None else self.value_body(x))[:, 0]

    def _policy_output(self, h: Any) -> Any:
        """The policy head on features h; with sde, the features (detached) after it (rl.sde)."""
        head = self.pi(h)
        return framework.cat([head, h.detach()], 1) if self.sde else head

    def forward(self, x: Any, state: tuple[Any, Any] | None = None) -> tuple[Any, Any, tuple[Any, Any] | None]:
        """(policy output, value (batch,), new LSTM state or None) for a batch of observations."""
        h, state = self._features(x, state)
        return self._policy_output(h), self._value(x, h), state

    def forward_rollout(self, obs: Any, state: tuple[Any, Any] | None, keep: Any) -> tuple[Any, Any]:
        """(policy outputs, values) for a rollout's (T+1, E, *obs_shape) observations, flattened to (T+1) * E rows.

        The body runs once over all frames; with an LSTM, the cell then unrolls over the T+1 steps from
        `state`, the state entering step t multiplied by keep[t] ((T+1, E) array: 0 where an episode ended
        at step t-1). Equal to calling `forward` step by step, masking the state in between.
        """
        steps, batch = obs.shape[:2]
        x = obs.reshape(steps * batch, *obs.shape[2:])
        h = self.body(x)
        if self.lstm is not None:
            h = self.lstm.unroll(h.reshape(steps, batch, self.hidden_size), state, keep)
            h = h.reshape(steps * batch, self.hidden_size)
        return self._policy_output(h), self._value(x, h)

    def policy(self, obs: Any, state: tuple[Any, Any] | None = None) -> tuple[Any, tuple[Any, Any] | None]:
        """(policy output, new LSTM state or None): `forward` without the value head, for acting."""
        h, state = self._features(obs, state)
        return self._policy_output(h), state

    @property
    def device(self) -> str:
        """Where the parameters live: 'cpu' or 'cuda:N'."""
        return self.pi.weight.device

    def initial_state(self, batch: int) -> tuple[Any, Any] | None:
        """Zero LSTM state for a batch, on the model's device (None without an LSTM)."""
        if self.lstm is None:
            return None
        return tuple(framework.zeros(batch, self.hidden_size, device=self.device) for _ in range(2))
