"""A3C: n-step advantage actor-critic, workers updating a shared model lock-free.

Each worker steps `env.envs_per_worker` environments with one batched no-grad
forward pass per step, then runs one forward+backward pass over the whole
(n_steps x envs) rollout: GAE(lambda) advantages (lambda = 1 is the classic
n-step return), an entropy bonus, a value loss, gradient clipping. Bootstraps
on truncation (time limits) but not on termination. The local model syncs from
the shared parameter arena with one copy; its gradient goes to the shared
optimizer with one copy and one fused step. A loss or gradient that is not
finite is never applied. Image observations (channels, height, width), such
as stacked Atari frames, pass through the A3C paper's two convolutions first.

On a GPU (`trainer.device: cuda:N`) the local model, the sampling and the
update run on the device: each step moves the batch of observations there in
one copy and the sampled actions back in one; an update moves the rollout
there once and the values back once (advantages are computed on the host).
"""
from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np

import framework
from framework import nn
from framework.algorithms.base import Algorithm, Evaluation, WorkerContext, learning_rate
from framework.config import Config, ConfigError, Field
from framework.device import array_module, to_device, to_host
from framework.distributions import Categorical, Normal
from framework.envs import EnvBatch, EnvError, make_env
from framework.optim.clip import grad_norm
from framework.random import standard_normal, uniform


def _relu_array(x: Any) -> Any:
    return array_module(x).maximum(x, 0.0, out=x)


def _tanh_array(x: Any) -> Any:
    return array_module(x).tanh(x, out=x)


IMAGE_CONV = ((16, 8, 4), (32, 4, 2))
"""(channels, kernel, stride) of the convolutions over (C, H, W) observations: the A3C paper's Atari network."""

_ACTIVATIONS = {"relu": (nn.ReLU, _relu_array), "tanh": (nn.Tanh, _tanh_array)}
"""Each activation as a module (for the graph) and as an in-place array function (for acting)."""


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
        act, self._act_array = _ACTIVATIONS[activation]
        layers: list[nn.Module] = []
        shape = (obs_shape,) if isinstance(obs_shape, int) else tuple(obs_shape)
        for channels, kernel, stride in conv:
            layers += [nn.Conv2d(shape[0], channels, kernel, stride), act()]
            shape = (channels, *((side - kernel) // stride + 1 for side in shape[1:]))
        if len(shape) > 1:
            layers.append(nn.Flatten())
        self._plain_mlp = not layers  # acting can then run on raw arrays (policy_array)
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

    def forward(self, x: Any, state: tuple[Any, Any] | None = None) -> tuple[Any, Any, tuple[Any, Any] | None]:
        """(policy output, value (batch,), new LSTM state or None) for a batch of observations."""
        h = self.body(x)
        if self.lstm is not None:
            state = self.lstm(h, state)
            h = state[0]
        return self.pi(h), self.v(h)[:, 0], state

    def policy_array(self, obs: Any, state: tuple[Any, Any] | None = None) -> tuple[Any, tuple[Any, Any] | None]:
        """The policy head output as an array, for acting (call under no_grad); obs on the model's device.

        For an MLP on flat observations this runs on the parameters' raw arrays
        (a few matmuls, none of the framework's per-op work), which is most of a
        worker's step.
        """
        if self.lstm is not None or not self._plain_mlp:
            head, _, state = self(framework.as_tensor(obs), state)
            return head.data_array, state
        x = obs
        for layer in self.body:
            if isinstance(layer, nn.Linear):
                x = self._act_array(x @ layer.weight.data_array.T + layer.bias.data_array)
        return x @ self.pi.weight.data_array.T + self.pi.bias.data_array, None

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


def _spaces(config: Config) -> tuple[tuple[int, ...], int, bool]:
    """(observation shape, action count or dimension, continuous) of the config's environment."""
    try:
        env = make_env(config["env"]["id"], config["env"]["kwargs"])
    except EnvError as exc:
        raise ConfigError(f"config key 'env.kwargs': got {config['env']['kwargs']!r}; allowed: keyword "
                          f"arguments {config['env']['id']} accepts ({exc.__cause__})") from None
    try:
        obs, act = env.observation_space, env.action_space
    finally:
        env.close()
    for what, space in (("observation", obs), ("action", act)):
        if not isinstance(space, (gym.spaces.Discrete, gym.spaces.Box)):
            raise ConfigError(f"config key 'env.id': got {config['env']['id']!r} with {what} space {space}; "
                              f"allowed: environments with Discrete or Box spaces")
    obs_shape = (int(obs.n),) if isinstance(obs, gym.spaces.Discrete) else tuple(int(d) for d in obs.shape)
    if isinstance(act, gym.spaces.Discrete):
        return obs_shape, int(act.n), False
    return obs_shape, int(np.prod(act.shape)), True


def _conv_layers(config: Config, obs_shape: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:
    """IMAGE_CONV for (C, H, W) observations, none for others; ConfigError when images are too small for it."""
    if len(obs_shape) != 3:
        return ()
    sides = obs_shape[1:]
    for _, kernel, stride in IMAGE_CONV:
        sides = tuple((side - kernel) // stride + 1 for side in sides)
    if min(sides) < 1:
        raise ConfigError(f"config key 'env.id': got {config['env']['id']!r} with observations of shape "
                          f"{obs_shape}; allowed: (channels, height, width) observations of at least 20x20 "
                          f"for the convolutions of the A3C image model")
    return IMAGE_CONV


def advantages(rewards: np.ndarray, dones: np.ndarray, values: np.ndarray, gamma: float,
               lam: float) -> tuple[np.ndarray, np.ndarray]:
    """GAE(lambda) advantages and value targets for a (T, E) rollout; values is (T+1, E) with the bootstrap last."""
    adv = np.empty_like(rewards)
    running = np.zeros_like(rewards[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        keep = 1.0 - dones[t]
        delta = rewards[t] + gamma * keep * values[t + 1] - values[t]
        running = delta + gamma * lam * keep * running
        adv[t] = running
    return adv, adv + values[:-1]


class _Worker:
    """One worker's rollout buffers, local model and update step."""

    def __init__(self, algo: "A3C", ctx: WorkerContext):
        cfg = ctx.config
        self.ctx, self.a = ctx, cfg["algorithm"]
        self.opt_cfg, self.total_steps = cfg["optimizer"], cfg["trainer"]["total_steps"]
        self.device = ctx.device
        framework.manual_seed(ctx.seed)  # the action noise comes from framework's generator for the device
        self.envs = EnvBatch(cfg["env"]["id"], cfg["env"]["kwargs"], cfg["env"]["envs_per_worker"],
                             seed=ctx.seed % (2**31), rank=ctx.rank)
        self.local = algo.build_model(cfg).to(self.device)
        self.local_arena = self.local.pack_parameters()
        self.shared_arena = ctx.model.arena
        T, E = self.a["n_steps"], len(self.envs)
        self.T, self.E = T, E
        self.obs = np.zeros((T + 1, E, *self.envs.obs_shape), dtype=np.float32)
        continuous = self.local.continuous
        self.actions = np.zeros((T, E, self.local.pi.out_features) if continuous else (T, E),
                                dtype=np.float32 if continuous else np.int64)
        self.rewards = np.zeros((T, E), dtype=np.float32)
        self.dones = np.zeros((T, E), dtype=np.float32)
        self.state = self.state0 = self.local.initial_state(E)

    def _tensor(self, array: np.ndarray) -> Any:
        """A host array as a tensor on the worker's device: itself on the CPU, one copy to a GPU."""
        return framework.as_tensor(to_device(array, self.device))

    def _act(self, obs: np.ndarray) -> np.ndarray:
        """Sample actions on the device for a batch of host observations (no grad); advances the LSTM state.

        Discrete actions use the Gumbel-max trick, continuous ones mean + std * noise.
        """
        head, self.state = self.local.policy_array(to_device(obs, self.device), self.state)
        xp = array_module(head)
        if self.local.continuous:
            std = xp.exp(self.local.log_std.data_array)
            actions = head + std * standard_normal(head.shape, head.dtype, self.device)
        else:
            gumbel = -xp.log(-xp.log(uniform(head.shape, head.dtype, device=self.device) + 1e-12) + 1e-12)
            actions = xp.argmax(head + gumbel, axis=1)
        return to_host(actions)

    def _values(self, obs: np.ndarray, state: tuple[Any, Any] | None) -> np.ndarray:
        """V(obs) on the host for host observations."""
        return to_host(self.local(self._tensor(obs), state)[1].data_array)

    def _mask_state(self, done: np.ndarray) -> None:
        if self.state is not None and done.any():
            keep = self._tensor((1.0 - done)[:, None])
            self.state = (self.state[0] * keep, self.state[1] * keep)

    def rollout(self) -> None:
        """Collect n_steps from every env with the local model."""
        gamma = self.a["gamma"]
        self.state0 = self.state
        returns: list[float] = []
        lengths: list[int] = []
        with framework.no_grad():
            for t in range(self.T):
                self.obs[t] = self.envs.obs
                actions = self._act(self.obs[t])
                self.actions[t] = actions
                out = self.envs.step(actions)
                self.rewards[t] = out.rewards
                done = out.terminated | out.truncated
                self.dones[t] = done
                if out.truncated_index.size:  # a time limit is not a real end: bootstrap from V(last obs)
                    rows = to_device(out.truncated_index, self.device)
                    sub = None if self.state is None else tuple(s[rows] for s in self.state)
                    self.rewards[t, out.truncated_index] += gamma * self._values(out.truncated_obs, sub)
                self._mask_state(done)
                returns += out.episode_returns
                lengths += out.episode_lengths
        self.obs[self.T] = self.envs.obs
        self.ctx.stats.add_steps(self.T * self.E)
        if returns:
            self.ctx.stats.add_episodes(returns, lengths)

    def _forward_rollout(self) -> tuple[Any, Any]:
        """Policy heads and values for all (T+1) x E observations, with grad."""
        flat = self.obs.reshape((self.T + 1) * self.E, *self.obs.shape[2:])
        if self.local.lstm is None:
            head, values, _ = self.local(self._tensor(flat))
            return head, values
        heads, values, state = [], [], self.state0
        for t in range(self.T + 1):
            h, v, state = self.local(self._tensor(self.obs[t]), state)
            heads.append(h)
            values.append(v)
            if t < self.T:
                keep = self._tensor((1.0 - self.dones[t])[:, None])
                state = (state[0] * keep, state[1] * keep)
        return framework.cat(heads, axis=0), framework.cat(values, axis=0)

    def loss(self) -> tuple[Any, list[float]] | None:
        """The A3C loss over the rollout and its parts (policy loss, value loss, entropy).

        None when the forward pass is not finite (a NaN or inf observation): no loss can be built from it.
        """
        a, n = self.a, self.T * self.E
        head, values = self._forward_rollout()
        v = to_host(values.data_array).reshape(self.T + 1, self.E)
        xp = array_module(head.data_array)
        if not (bool(xp.isfinite(head.data_array).all()) and np.isfinite(v).all()):
            return None
        adv, targets = advantages(self.rewards, self.dones, v, a["gamma"], a["gae_lambda"])
        if a["normalize_advantages"]:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        dist = self.local.distribution(head[:n])
        actions = self._tensor(self.actions.reshape(n, *self.actions.shape[2:]))
        log_prob = dist.log_prob(actions)
        entropy = dist.entropy()
        if self.local.continuous:
            log_prob, entropy = log_prob.sum(axis=1), entropy.sum(axis=1)
        policy_loss = -(log_prob * self._tensor(adv.reshape(n))).mean()
        value_loss = ((values[:n] - self._tensor(targets.reshape(n))) ** 2).mean()
        entropy = entropy.mean()
        loss = policy_loss + a["value_coef"] * value_loss - a["entropy_coef"] * entropy
        return loss, [policy_loss.item(), value_loss.item(), entropy.item()]

    def update(self) -> None:
        """Sync, roll out, compute the gradient, and apply it to the shared parameters if finite."""
        stats = self.ctx.stats
        self.local_arena.copy_from(self.shared_arena)
        synced_at = stats.global_updates()
        self.rollout()
        grad = self.local_arena.grad
        grad[...] = 0.0
        result = self.loss()
        if result is None:
            stats.add_skipped()
            return
        loss, parts = result
        loss.backward()
        norm = grad_norm(grad)
        if not (np.isfinite(norm) and all(np.isfinite(parts))):
            stats.add_skipped()
            return
        if norm > self.a["max_grad_norm"]:
            grad *= self.a["max_grad_norm"] / norm
        lr = learning_rate(self.opt_cfg, stats.global_steps(), self.total_steps)
        for group in self.ctx.optimizer.param_groups:
            group["lr"] = lr
        self.shared_arena.grad[...] = grad  # one device-to-device copy on a GPU
        self.ctx.optimizer.step()
        stats.add_update([*parts, norm, lr], stats.global_updates() - synced_at)

    def run(self) -> None:
        try:
            while not self.ctx.stats.should_stop():
                self.update()
        finally:
            self.envs.close()


class A3C(Algorithm):
    """The `a3c` algorithm plugin."""

    name = "a3c"
    schema = {
        "gamma": Field("float", 0.99, low=0.0, high=1.0),
        "gae_lambda": Field("float", 1.0, low=0.0, high=1.0),
        "n_steps": Field("int", 20, low=1, high=100_000),
        "entropy_coef": Field("float", 0.01, low=0.0),
        "value_coef": Field("float", 0.5, low=0.0),
        "max_grad_norm": Field("float", 40.0, low=0.0, low_open=True),
        "normalize_advantages": Field("bool", False),
    }
    metrics = ("policy_loss", "value_loss", "entropy", "grad_norm", "lr")

    def check_config(self, config: Config) -> None:
        """The environment must build (with env.kwargs) and have Discrete or Box spaces (images of at least 20x20)."""
        _conv_layers(config, _spaces(config)[0])

    def build_model(self, config: Config) -> ActorCritic:
        obs_shape, n_actions, continuous = _spaces(config)
        m = config["model"]
        return ActorCritic(obs_shape, m["hidden"], m["activation"], m["lstm"], n_actions, continuous,
                           _conv_layers(config, obs_shape))

    def run_worker(self, ctx: WorkerContext) -> None:
        _Worker(self, ctx).run()

    def evaluate(self, model: nn.Module, config: Config, episodes: int, seed: int) -> Evaluation:
        """Greedy episodes (most likely action, or the mean action), one per environment in a batch."""
        envs = EnvBatch(config["env"]["id"], config["env"]["kwargs"], episodes, seed=seed)
        returns = np.full(episodes, np.nan)
        state = model.initial_state(episodes)
        try:
            with framework.no_grad():
                while np.isnan(returns).any():
                    head, state = model.policy_array(to_device(envs.obs, model.device), state)
                    head = to_host(head)
                    out = envs.step(head if model.continuous else np.argmax(head, axis=1))
                    for i, ret in zip(out.episode_index, out.episode_returns):
                        if np.isnan(returns[i]):
                            returns[i] = ret
        finally:
            envs.close()
        mean, std = float(returns.mean()), float(returns.std())
        return Evaluation({"return_mean": mean, "return_std": std},
                          f"return over {episodes} greedy episodes: {mean:.1f} ± {std:.1f}")


ALGORITHM = A3C()
