"""A3C: n-step advantage actor-critic, workers updating a shared model lock-free (the `a3c` plugin).

The plugin owns the `env`, `model` and `algorithm` sections and the return
target (`trainer.target_return`, `target_window`); the model is in
`a3c.model`, the worker loop in `a3c.worker`, the environments in `a3c.envs`.
Image observations (channels, height, width), such as stacked Atari frames,
pass through the A3C paper's two convolutions first (uint8 ones stay uint8
until the first convolution reads them as [0, 1]).
"""
from __future__ import annotations

from typing import Iterator

import gymnasium as gym
import numpy as np

import framework
from framework import nn
from framework.algorithms.a3c.envs import BatchStep, EnvBatch, EnvError, NoFrames, env_id_problem, make_env
from framework.algorithms.a3c.model import IMAGE_CONV, ActorCritic, conv_output_sides
from framework.algorithms.a3c.normalization import Normalization
from framework.algorithms.a3c.worker import Worker
from framework.algorithms.base import (DEFAULT_WINDOW, MLP_SCHEMA, Algorithm, Config, Evaluation, EvaluationBounds,
                                       FrameSink, WorkerContext)
from framework.device import to_device, to_host
from framework.train.formatting import significant
from framework.train.schema import ConfigError, Field


def _spaces(config: Config) -> tuple[tuple[int, ...], bool, int, bool]:
    """(observation shape, uint8 images, action count or dimension, continuous) of the config's environment."""
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
    uint8_frames = isinstance(obs, gym.spaces.Box) and obs.dtype == np.uint8 and len(obs_shape) == 3
    if isinstance(act, gym.spaces.Discrete):
        return obs_shape, uint8_frames, int(act.n), False
    return obs_shape, uint8_frames, int(np.prod(act.shape)), True


def _conv_layers(config: Config, obs_shape: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:
    """IMAGE_CONV for (C, H, W) observations, none for others; ConfigError when images are too small for it."""
    if len(obs_shape) != 3:
        return ()
    if min(conv_output_sides(obs_shape[1:], IMAGE_CONV)) < 1:
        raise ConfigError(f"config key 'env.id': got {config['env']['id']!r} with observations of shape "
                          f"{obs_shape}; allowed: (channels, height, width) observations of at least 20x20 "
                          f"for the convolutions of the A3C image model")
    return IMAGE_CONV


def _greedy_steps(model: ActorCritic, envs: EnvBatch) -> Iterator[BatchStep]:
    """Step envs with the model's greedy actions (the most likely action, or the mean action), for ever."""
    state = model.initial_state(len(envs))
    while True:
        with framework.no_grad():  # entered per step: a generator must not hold grad mode off for its caller
            head, state = model.policy_array(to_device(envs.obs, model.device), state)
        head = to_host(head)
        yield envs.step(head if model.continuous else np.argmax(head, axis=1))


def _evaluation(returns: np.ndarray, cut: int, bounds: EvaluationBounds) -> Evaluation:
    """The metrics and line of greedy episodes' returns, `cut` of them at the bounds (their return so far)."""
    mean, std = float(returns.mean()), float(returns.std())
    text = f"return over {returns.size} greedy episodes: {significant(mean)} ± {significant(std)}"
    if cut:
        text += (f" ({cut} cut short, at trainer.eval_max_steps = {bounds.max_steps} steps or "
                 f"trainer.eval_max_seconds = {bounds.max_seconds:g} s)")
    return Evaluation({"return_mean": mean, "return_std": std, "episodes_cut": float(cut)}, text)


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
    sections = {
        "env": {
            "id": Field("str", "CartPole-v1", check=env_id_problem),
            "kwargs": Field("mapping", {}),
            "envs_per_worker": Field("int", 4, low=1, high=4096),
            "vectorize": Field("bool", True),
            "normalize_obs": Field("bool", False),
            "clip_obs": Field("float", 10.0, low=0.0, low_open=True),
            "normalize_reward": Field("bool", False),
            "clip_reward": Field("float", 10.0, low=0.0, low_open=True),
        },
        "model": {**MLP_SCHEMA, "lstm": Field("bool", False), "shared_body": Field("bool", True),
                  "log_std_init": Field("float", 0.0, low=-20.0, high=2.0)},
        "trainer": {
            "target_return": Field("float", 475.0, nullable=True),
            "target_window": Field("int", DEFAULT_WINDOW, low=1, high=100_000),
        },
    }
    hparams = ("optimizer.name", "optimizer.lr", "algorithm.n_steps", "env.envs_per_worker", "trainer.workers",
               "model.hidden")
    metrics = ("policy_loss", "value_loss", "entropy", "grad_norm", "lr")

    def default_experiment(self, config: Config) -> str:
        """a3c-<env id>, e.g. a3c-cartpole-v1 (a factory's `module:Name` becomes module-name)."""
        return "a3c-" + config["env"]["id"]

    def window(self, config: Config) -> int:
        return config["trainer"]["target_window"]

    def target_return(self, config: Config) -> float | None:
        return config["trainer"]["target_return"]

    def check_config(self, config: Config) -> None:
        """The environment must build (with env.kwargs) and have Discrete or Box spaces (images of at least 20x20);
        a separate value body needs no LSTM, env.normalize_obs observations that are not uint8 images."""
        obs_shape, uint8_frames, _, _ = _spaces(config)
        _conv_layers(config, obs_shape)
        if not config["model"]["shared_body"] and config["model"]["lstm"]:
            raise ConfigError("config key 'model.shared_body': got false with model.lstm true; allowed: true with "
                              "an LSTM (the policy and the value share the LSTM's state)")
        if uint8_frames and config["env"]["normalize_obs"]:
            raise ConfigError(f"config key 'env.normalize_obs': got true for {config['env']['id']!r}, whose "
                              f"observations are uint8 images (read as [0, 1] by the first convolution); "
                              f"allowed: false for image observations")

    def build_model(self, config: Config) -> ActorCritic:
        obs_shape, uint8_frames, n_actions, continuous = _spaces(config)
        m, env = config["model"], config["env"]
        return ActorCritic(obs_shape, m["hidden"], m["activation"], m["lstm"], n_actions, continuous,
                           _conv_layers(config, obs_shape), uint8_frames=uint8_frames,
                           normalize_obs=env["normalize_obs"], normalize_returns=env["normalize_reward"],
                           shared_body=m["shared_body"], log_std_init=m["log_std_init"])

    def run_worker(self, ctx: WorkerContext) -> None:
        Worker(self.build_model(ctx.config), ctx).run()

    def evaluate(self, model: nn.Module, config: Config, episodes: int, seed: int) -> Evaluation:
        """Greedy episodes (most likely action, or the mean action), one per environment in a batch."""
        envs = EnvBatch(config["env"]["id"], config["env"]["kwargs"], episodes, seed=seed,
                        normalization=Normalization.for_model(model, config, episodes, update=False),
                        vectorize=config["env"]["vectorize"])
        returns = np.full(episodes, np.nan)
        bounds = EvaluationBounds.of(config)
        try:
            for out in bounds.steps(_greedy_steps(model, envs)):
                for i, ret in zip(out.episode_index, out.episode_returns):
                    if np.isnan(returns[i]):
                        returns[i] = ret
                if not np.isnan(returns).any():
                    break
            cut = np.isnan(returns)
            returns[cut] = np.asarray(envs.returns, dtype=np.float64)[cut]
        finally:
            envs.close()
        return _evaluation(returns, int(cut.sum()), bounds)

    def record(self, model: nn.Module, config: Config, episodes: int, seed: int, frames: FrameSink) -> Evaluation:
        """evaluate's episodes, one at a time in an environment that renders rgb_array frames: episode i is
        seeded with seed + i, as there, so they are the same episodes wherever evaluate's envs are seeded one by
        one: a loop of envs, or CartPole's vector env (not Atari's, whose no-op counts have a generator of their
        own)."""
        returns: list[float] = []
        cut = 0
        bounds = EvaluationBounds.of(config)
        for i in range(episodes):
            try:
                envs = EnvBatch(config["env"]["id"], config["env"]["kwargs"], 1, seed=seed + i, render=True,
                                normalization=Normalization.for_model(model, config, 1, update=False))
            except NoFrames as exc:
                raise ConfigError(f"config key 'env.id': {exc}; allowed: an environment with the rgb_array render "
                                  f"mode, to record") from None
            episode_return = None
            try:
                more = frames(envs.frames[0])
                for out in bounds.steps(_greedy_steps(model, envs)) if more else ():
                    more = frames(envs.frames[0])
                    if out.episode_index:
                        episode_return = out.episode_returns[0]
                    if not more or episode_return is not None:
                        break
                cut += episode_return is None and more
                returns.append(float(envs.returns[0]) if episode_return is None else episode_return)
            finally:
                envs.close()
            if not more:
                break
        return _evaluation(np.asarray(returns), cut, bounds)

    def scalars(self, model: nn.Module, config: Config) -> dict[str, float]:
        """The normalisation statistics, when the model has any (see a3c.normalization)."""
        normalization = Normalization.for_model(model, config, 0, update=False)
        return {} if normalization is None else normalization.scalars()


ALGORITHM = A3C()
