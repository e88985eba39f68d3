"""A3C: n-step advantage actor-critic, workers updating a shared model lock-free (the `a3c` plugin).

The plugin owns the `env`, `model` and `algorithm` sections and the return
target (`trainer.target_return`, `target_window`); the model is in
`a3c.model`, the worker loop in `a3c.worker`, the environments in `a3c.envs`.
Image observations (channels, height, width), such as stacked Atari frames,
pass through the A3C paper's two convolutions first (uint8 ones stay uint8
until the first convolution reads them as [0, 1]); `a3c.spaces` says how
other spaces are read. `model.factory: module:function` replaces the built-in
ActorCritic by the user's own network (`a3c.model_factory`, docs/models.md).
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from framework import nn
from framework.algorithms import user_code
from framework.algorithms.a3c import model_factory
from framework.algorithms.a3c.actor import Actor
from framework.algorithms.a3c.envs import (BatchStep, EnvBatch, EnvBuildError, NoFrames, env_id_problem, make_env,
                                           missing_extra_message)
from framework.algorithms.a3c.model import IMAGE_CONV, ActorCritic, ActorCriticBase, conv_output_sides
from framework.algorithms.a3c.spaces import ActionHead, ObservationLayout, SpaceError
from framework.algorithms.a3c.normalization import Normalization
from framework.algorithms.a3c.worker import Worker
from framework.algorithms.base import (DEFAULT_WINDOW, MLP_SCHEMA, Algorithm, Config, Evaluation, EvaluationBounds,
                                       FrameSink, WorkerContext)
from framework.train.formatting import significant
from framework.train.schema import ConfigError, Field


def _spaces(config: Config) -> tuple[ObservationLayout, ActionHead]:
    """How A3C reads the config's environment (a3c.spaces); ConfigError naming the real cause when it cannot be
    built (the config key at fault: env.id or env.kwargs) or has a space A3C cannot read."""
    env_id = config["env"]["id"]
    missing = missing_extra_message(env_id)
    if missing:
        raise ConfigError(f"config key 'env.id': {missing}")
    try:
        env = make_env(env_id, config["env"]["kwargs"])
    except EnvBuildError as exc:
        raise ConfigError(f"config key '{exc.key}': {exc.problem}") from None
    try:
        return ObservationLayout.of(env.observation_space), ActionHead(env.action_space)
    except SpaceError as exc:
        raise ConfigError(f"config key 'env.id': got {env_id!r} with {exc}") from None
    finally:
        env.close()


def _conv_layers(config: Config, layout: ObservationLayout) -> tuple[tuple[int, int, int], ...]:
    """IMAGE_CONV for observations with an image, none for others; ConfigError when images are too small for it."""
    if layout.image_shape is None:
        return ()
    if min(conv_output_sides(layout.image_shape[1:], IMAGE_CONV)) < 1:
        raise ConfigError(f"config key 'env.id': got {config['env']['id']!r} with images of shape "
                          f"{layout.image_shape}; allowed: (channels, height, width) images of at least 20x20 "
                          f"for the convolutions of the A3C image model (or gymnasium.wrappers.ResizeObservation)")
    return IMAGE_CONV


def _greedy_steps(actor: Actor, envs: EnvBatch) -> Iterator[BatchStep]:
    """Step envs with the actor's greedy actions (the most likely one of each component, or the mean), for ever."""
    state = actor.initial_state(len(envs))
    while True:
        actions, state = actor.choose(envs.obs, state)
        yield envs.step(actions)


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
                  "orthogonal_init": Field("bool", False),
                  "log_std_init": Field("float", 0.0, low=-20.0, high=2.0),
                  "factory": Field("str", None, nullable=True,
                                   check=lambda v: user_code.spec_problem(v, "function")),
                  "kwargs": Field("mapping", {})},
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
        """The environment must build (with env.kwargs) and have spaces A3C reads (images of at least 20x20); a
        separate value body needs no LSTM, env.normalize_obs observations that are not uint8 images; a
        model.factory's model must have the members of ActorCriticBase (checked on one forward pass)."""
        layout, head = _spaces(config)
        _conv_layers(config, layout)
        if not config["model"]["shared_body"] and config["model"]["lstm"]:
            raise ConfigError("config key 'model.shared_body': got false with model.lstm true; allowed: true with "
                              "an LSTM (the policy and the value share the LSTM's state)")
        if layout.dtype == np.uint8 and config["env"]["normalize_obs"]:
            raise ConfigError(f"config key 'env.normalize_obs': got true for {config['env']['id']!r}, whose "
                              f"observations are uint8 images (read as [0, 1] by the first convolution); "
                              f"allowed: false for image observations")
        spec = config["model"]["factory"]
        if spec is not None:
            model_factory.check_model(spec, self._build(config, layout, head), layout, head, config["env"])

    def build_model(self, config: Config) -> ActorCriticBase:
        return self._build(config, *_spaces(config))

    def _build(self, config: Config, layout: ObservationLayout, head: ActionHead) -> ActorCriticBase:
        """The model.factory's model for these spaces, or the built-in ActorCritic."""
        m, env = config["model"], config["env"]
        if m["factory"] is not None:
            return model_factory.add_statistics(model_factory.build(m["factory"], layout, head.space, m), layout, env)
        packed = layout.image_shape is not None and layout.vector_size > 0
        return ActorCritic(layout.shape, m["hidden"], m["activation"], m["lstm"], head.size, head.continuous,
                           _conv_layers(config, layout), uint8_frames=layout.dtype == np.uint8,
                           normalize_obs=env["normalize_obs"], normalize_returns=env["normalize_reward"],
                           shared_body=m["shared_body"], log_std_init=m["log_std_init"],
                           image_shape=layout.image_shape if packed else None, orthogonal_init=m["orthogonal_init"])

    def run_worker(self, ctx: WorkerContext) -> None:
        Worker(self.build_model(ctx.config), ctx).run()

    def evaluate(self, model: nn.Module, config: Config, episodes: int, seed: int) -> Evaluation:
        """Greedy episodes (the most likely action of each component, or the mean: `Actor`), one per environment in a
        batch."""
        envs = EnvBatch(config["env"]["id"], config["env"]["kwargs"], episodes, seed=seed,
                        vectorize=config["env"]["vectorize"])
        returns = np.full(episodes, np.nan)
        bounds = EvaluationBounds.of(config)
        try:
            for out in bounds.steps(_greedy_steps(Actor(model, config, envs.layout, envs.action_head), envs)):
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
                envs = EnvBatch(config["env"]["id"], config["env"]["kwargs"], 1, seed=seed + i, render=True)
            except NoFrames as exc:
                raise ConfigError(f"config key 'env.id': {exc}; allowed: an environment with the rgb_array render "
                                  f"mode, to record") from None
            episode_return = None
            try:
                more = frames(envs.frames[0])
                steps = _greedy_steps(Actor(model, config, envs.layout, envs.action_head), envs)
                for out in bounds.steps(steps) if more else ():
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

    def actor(self, model: nn.Module, config: Config) -> Actor:
        """The model acting in config's environment, whose spaces are read as the workers read them (a3c.spaces)."""
        return Actor(model, config, *_spaces(config))

    def scalars(self, model: nn.Module, config: Config) -> dict[str, float]:
        """The normalisation statistics, when the model has any (see a3c.normalization)."""
        normalization = Normalization.for_model(model, config, 0, update=False)
        return {} if normalization is None else normalization.scalars()


ALGORITHM = A3C()
